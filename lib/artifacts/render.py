"""Render a dashboard spec: run each component's query and build what is shown.

This module knows nothing of Streamlit. It turns a spec plus the workspace's
tables into `Rendered`: KPI values with their colours and deltas, Vega-Lite
charts, formatted tables with cell colours, and insight text with its
placeholders filled, each by its kind in `lib/artifacts/components/`; this module lays
the components out, binds the filters and caches the queries. The Dashboard
page draws the result with Streamlit; `export` writes it as a standalone HTML
file; `checks` uses it to prove a spec renders.

Each component runs exactly one query (a text block one per named query).
Filter values are bound as named parameters, never pasted into SQL. The
components are independent of each other, so they render side by side
(`render_components`): while one waits for its query in a worker process,
another's query runs in a second one, up to one query per core (and never
more than the worker pool, DASHMEM_QUERY_WORKERS, holds). The
queries run through the workspace's query engine (`lib.data.engine`: the
snapshot through the render cache, `QueryCache`, re-exported here, or a live
source's database). Results are cached per data version, so a rerun with the
same data and filters runs no query twice.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import pyarrow as pa

from ..core import settings
from ..data.engine import CACHE, Engine, QueryCache
from ..data.sandbox import QueryError
from ..memory.kinds.output import theme_for
from .components import Component, RenderContext, kind_of


@dataclass
class FilterState:
    id: str
    type: str
    label: str
    options: list[Any] = field(default_factory=list)
    bounds: tuple[Any, Any] | None = None
    error: str | None = None


@dataclass
class Rendered:
    title: str
    description: str
    theme: dict[str, Any]
    rows: list[list[Component]]
    filters: list[FilterState]
    data_version: str
    seconds: float
    queries_run: int
    chosen_filters: dict[str, Any] = field(default_factory=dict)  # the filter values this rendering used

    @property
    def components(self) -> list[Component]:
        return [c for row in self.rows for c in row]

    def component(self, component_id: str) -> Component:
        return next(c for c in self.components if c.id == component_id)

    @property
    def errors(self) -> list[tuple[str, str]]:
        return [(c.id, c.error) for c in self.components if c.error] + [(f.id, f.error) for f in self.filters if f.error]


__all__ = [
    "CACHE",
    "QueryCache",
    "Rendered",
    "FilterState",
    "filter_states",
    "filter_params",
    "render",
    "render_context",
    "render_component",
    "render_components",
]


def filter_states(dashboard: Mapping[str, Any], tables: Mapping[str, pa.Table], version: str, cache: Any = CACHE, timeout_s: float = 10.0) -> list[FilterState]:
    """Each filter's options or bounds, from its query; `cache` runs them: an `Engine` (rebound to `tables`), or a
    bare `QueryCache`, which runs them on the snapshot as the engine of a workspace without live sources does."""
    engine = Engine.of(cache, {}, tables, version)
    states = []
    for f in dashboard.get("filters") or []:
        state = FilterState(f["id"], f["type"], f.get("label") or f["id"].replace("_", " ").capitalize())
        try:
            if f.get("options_query"):
                result = engine.run(f["options_query"], {}, max_rows=1000, timeout_s=timeout_s)
                state.options = result.table.column(0).to_pylist() if result.table.num_columns else []
            if f.get("bounds_query"):
                result = engine.run(f["bounds_query"], {}, max_rows=1, timeout_s=timeout_s)
                row = result.rows[0] if result.rows else (None, None)
                state.bounds = (row[0], row[1] if len(row) > 1 else None)
        except QueryError as exc:
            state.error = str(exc)
        states.append(state)
    return states


def filter_params(states: list[FilterState], chosen: Mapping[str, Any]) -> dict[str, Any]:
    """Parameter values from filter choices: `$id` for selects, `$id_from`/`$id_to` for ranges."""
    params: dict[str, Any] = {}
    for state in states:
        value = chosen.get(state.id)
        if state.type in ("date_range", "number_range"):
            low, high = value if value else (None, None)
            params[f"{state.id}_from"], params[f"{state.id}_to"] = low, high
        elif state.type == "multiselect":
            params[state.id] = list(value) if value else None
        else:
            params[state.id] = value if value not in ("", None) else None
    return params


def render(
    files: Mapping[str, Any],
    tables: Mapping[str, pa.Table],
    version: str,
    chosen_filters: Mapping[str, Any] | None = None,
    *,
    cache: QueryCache = CACHE,
    workspace_path: Path | None = None,
    engine: Engine | None = None,
) -> Rendered:
    """Render the dashboard in `files["dashboard"]` over `tables` (the data of `version`).

    `workspace_path` is the workspace's folder, which a live SQLite source's relative path is relative to.
    `engine` runs the queries instead of the workspace's default one over `cache` (lib.artifacts.time_travel's, over an earlier snapshot).
    """
    started = time.perf_counter()
    dashboard = files.get("dashboard") or {}
    ctx, states, misses_before = render_context(files, dashboard, dashboard.get("filters"), tables, version, chosen_filters, cache, workspace_path, engine)
    queries, theme = ctx.engine, ctx.theme

    by_id = {c["id"]: c for c in dashboard.get("components") or []}
    placement: list[list[tuple[Mapping[str, Any], int]]] = []
    placed: set[str] = set()
    for row in dashboard.get("layout") or []:
        cells = []
        for cell in row:
            cid, width = (cell, 1) if isinstance(cell, str) else (cell["id"], cell.get("width", 1))
            if cid in by_id and cid not in placed:
                cells.append((by_id[cid], width))
                placed.add(cid)
        if cells:
            placement.append(cells)
    placement += [[(spec, 1)] for cid, spec in by_id.items() if cid not in placed]  # components the layout does not place follow, one per row
    built = iter(render_components([cell for row in placement for cell in row], ctx))
    rows = [[next(built) for _ in row] for row in placement]
    chosen = {k: v for k, v in (chosen_filters or {}).items() if v not in (None, "", [], ())}
    return Rendered(
        dashboard.get("title", ""),
        dashboard.get("description", ""),
        theme,
        rows,
        states,
        version,
        time.perf_counter() - started,
        queries.misses - misses_before,
        chosen,
    )


def render_context(
    files: Mapping[str, Any],
    artifact: Mapping[str, Any],
    filters: list[Mapping[str, Any]] | None,
    tables: Mapping[str, pa.Table],
    version: str,
    chosen: Mapping[str, Any] | None,
    cache: QueryCache = CACHE,
    workspace_path: Path | None = None,
    engine: Engine | None = None,
) -> tuple[RenderContext, list[FilterState], int]:
    """What rendering an artifact (a dashboard, a report) needs: its theme, the output limits, the filters' states
    and their values bound as parameters, and the query engine (live sources' queries run in their database, lib.data.engine).

    The last value is the engine's count of queries run before the filters' own, which the rendering's count starts from.
    `engine` runs the queries instead of the workspace's default one over `cache` (lib.artifacts.time_travel's, over an earlier snapshot).
    """
    queries = Engine.of(engine if engine is not None else cache, files, tables, version, workspace_path)
    misses_before = queries.misses
    output = files.get("output") or {}
    injection = output.get("data_injection") or {}
    timeout_s = float(injection.get("query_timeout_s", 10))
    states = filter_states({"filters": filters or []}, tables, version, queries, timeout_s)
    params = filter_params(states, chosen or {})
    ctx = RenderContext(
        params,
        theme_for(artifact, output),
        output.get("number_formats") or {},
        int(injection.get("max_rows_per_query", 10_000)),
        timeout_s,
        queries,
    )
    return ctx, states, misses_before


def parallel_queries(count: int) -> int:
    """How many of `count` independent queries one render runs at once: one per core, within the worker pool."""
    return max(1, min(count, os.cpu_count() or 1, settings.get("DASHMEM_QUERY_WORKERS")))


def render_components(cells: list[tuple[Mapping[str, Any], int]], ctx: RenderContext) -> list[Component]:
    """(spec, width) of each component, rendered side by side (`parallel_queries` at a time), in their order."""
    threads = parallel_queries(len(cells))
    if threads == 1:
        return [render_component(spec, width, ctx) for spec, width in cells]
    with ThreadPoolExecutor(threads, thread_name_prefix="render") as pool:
        return list(pool.map(lambda cell: render_component(cell[0], cell[1], ctx), cells))


def render_component(spec: Mapping[str, Any], width: int, ctx: RenderContext) -> Component:
    """One component, rendered by its kind (lib/artifacts/components/); a failure becomes its error, shown in its place."""
    comp = Component(spec["id"], spec["type"], spec.get("title", ""), width, spec)
    try:
        kind_of(spec).render(comp, ctx)
    except QueryError as exc:
        comp.error = f"query failed: {exc}"
    except (KeyError, ValueError, TypeError, IndexError, ArithmeticError) as exc:
        comp.error = f"cannot render: {exc}"
    return comp
