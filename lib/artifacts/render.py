"""Render a dashboard spec: run each component's query and build what is shown.

This module knows nothing of Streamlit. It turns a spec plus the workspace's
tables into `Rendered`: KPI values with their colours and deltas, Altair
charts, formatted tables with cell colours, and insight text with its
placeholders filled, each by its kind in `lib/components/`; this module lays
the components out, binds the filters and caches the queries. The Dashboard
page draws the result with Streamlit; `export` writes it as a standalone HTML
file; `checks` uses it to prove a spec renders.

Each component runs exactly one query (a text block one per named query).
Filter values are bound as named parameters, never pasted into SQL. Results
are cached per data version, so a rerun with the same data and filters runs
no query twice.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import pyarrow as pa

from ..data.live import router_for
from ..data.queries import run_query
from ..data.sandbox import QueryError, QueryResult
from ..memory.spec import theme_for
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


class QueryCache:
    """Query results keyed by (data version, SQL, parameters); least recently used dropped first."""

    def __init__(self, size: int = 512):
        self.size = size
        self._items: OrderedDict[tuple, QueryResult] = OrderedDict()
        self._lock = threading.Lock()
        self.misses = 0

    def run(self, version: str, tables: Mapping[str, pa.Table], sql: str, params: Mapping[str, Any], *, max_rows: int, timeout_s: float) -> QueryResult:
        key = (version, sql, tuple(sorted((k, _hashable(v)) for k, v in params.items())), max_rows)
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        result = run_query(tables, sql, params, max_rows=max_rows, timeout_s=timeout_s)
        with self._lock:
            self.misses += 1
            self._items[key] = result
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return result


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


CACHE = QueryCache()


def filter_states(dashboard: Mapping[str, Any], tables: Mapping[str, pa.Table], version: str, cache: Any = CACHE, timeout_s: float = 10.0) -> list[FilterState]:
    """Each filter's options or bounds, from its query; `cache` runs them (a QueryCache, or a router as `render` takes)."""
    states = []
    for f in dashboard.get("filters") or []:
        state = FilterState(f["id"], f["type"], f.get("label") or f["id"].replace("_", " ").capitalize())
        try:
            if f.get("options_query"):
                result = cache.run(version, tables, f["options_query"], {}, max_rows=1000, timeout_s=timeout_s)
                state.options = result.table.column(0).to_pylist() if result.table.num_columns else []
            if f.get("bounds_query"):
                result = cache.run(version, tables, f["bounds_query"], {}, max_rows=1, timeout_s=timeout_s)
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
    router: Any = None,
) -> Rendered:
    """Render the dashboard in `files["dashboard"]` over `tables` (the data of `version`).

    `workspace_path` is the workspace's folder, which a live SQLite source's relative path is relative to.
    `router` runs the queries instead of the cache and live router (lib.artifacts.time_travel's, over an earlier snapshot).
    """
    started = time.perf_counter()
    dashboard = files.get("dashboard") or {}
    ctx, states, misses_before = render_context(files, dashboard, dashboard.get("filters"), tables, version, chosen_filters, cache, workspace_path, router)
    queries, theme = ctx.cache, ctx.theme

    by_id = {c["id"]: c for c in dashboard.get("components") or []}
    rows: list[list[Component]] = []
    placed: set[str] = set()
    for row in dashboard.get("layout") or []:
        built = []
        for cell in row:
            cid, width = (cell, 1) if isinstance(cell, str) else (cell["id"], cell.get("width", 1))
            if cid in by_id and cid not in placed:
                built.append(render_component(by_id[cid], width, ctx))
                placed.add(cid)
        if built:
            rows.append(built)
    for cid, spec in by_id.items():  # components the layout does not place follow, one per row
        if cid not in placed:
            rows.append([render_component(spec, 1, ctx)])
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
    router: Any = None,
) -> tuple[RenderContext, list[FilterState], int]:
    """What rendering an artifact (a dashboard, a report) needs: its theme, the output limits, the filters' states
    and their values bound as parameters, and the query runner (live sources' queries run in their database, lib/live.py).

    The last value is the runner's count of queries run before the filters' own, which the rendering's count starts from.
    `router` runs the queries instead of the cache and live router (lib.artifacts.time_travel's, over an earlier snapshot).
    """
    queries = router or router_for(files, cache, workspace_path)
    misses_before = queries.misses
    output = files.get("output") or {}
    injection = output.get("data_injection") or {}
    timeout_s = float(injection.get("query_timeout_s", 10))
    states = filter_states({"filters": filters or []}, tables, version, queries, timeout_s)
    params = filter_params(states, chosen or {})
    ctx = RenderContext(
        tables,
        version,
        params,
        theme_for(artifact, output),
        output.get("number_formats") or {},
        int(injection.get("max_rows_per_query", 10_000)),
        timeout_s,
        queries,
    )
    return ctx, states, misses_before


def render_component(spec: Mapping[str, Any], width: int, ctx: RenderContext) -> Component:
    """One component, rendered by its kind (lib/components/); a failure becomes its error, shown in its place."""
    comp = Component(spec["id"], spec["type"], spec.get("title", ""), width, spec)
    try:
        kind_of(spec).render(comp, ctx)
    except QueryError as exc:
        comp.error = f"query failed: {exc}"
    except (KeyError, ValueError, TypeError, IndexError, ArithmeticError) as exc:
        comp.error = f"cannot render: {exc}"
    return comp
