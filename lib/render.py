"""Render a dashboard spec: run each component's query and build what is shown.

This module knows nothing of Streamlit. It turns a spec plus the workspace's
tables into `Rendered`: KPI values with their colours and deltas, Altair
charts, formatted tables with cell colours, and insight text with its
placeholders filled. The Dashboard page draws it with Streamlit; `export`
writes it as a standalone HTML file; `checks` uses it to prove a spec renders.

Each component runs exactly one query (a text block one per named query).
Filter values are bound as named parameters, never pasted into SQL. Results
are cached per data version, so a rerun with the same data and filters runs
no query twice.
"""
from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

import pyarrow as pa

from . import schemas
from .formats import format_value
from .warehouse import QueryError, QueryResult, run_query

DEFAULT_THEME = schemas.default("output", "theme")  # what output.yaml's theme leaves out
PARAM_RE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
PLACEHOLDER_RE = re.compile(r"\{\{\s*([a-z][a-z0-9_]*)\.([^}|\s]+)\s*(?:\|\s*([^}]*?))?\s*\}\}")


@dataclass
class Component:
    id: str
    type: str
    title: str = ""
    width: int = 1
    spec: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    result: QueryResult | None = None
    # kpi
    value: Any = None
    compare: Any = None
    display: str = ""
    delta_display: str = ""
    color: str | None = None
    status: str = ""  # the threshold met, in words and a shape: never colour alone
    # chart
    chart: Any = None  # altair.Chart
    vega: dict[str, Any] | None = None  # its Vega-Lite spec, data inlined (made once, to validate it)
    # table
    frame: Any = None  # pandas.DataFrame of display strings
    cell_colors: dict[tuple[int, str], str] = field(default_factory=dict)
    legend: dict[str, str] = field(default_factory=dict)  # status mark -> what it means, for the cells marked
    # text
    markdown: str = ""
    text_results: dict[str, QueryResult] = field(default_factory=dict)


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


def theme_for(dashboard: Mapping[str, Any], output: Mapping[str, Any] | None) -> dict[str, Any]:
    """Defaults, then the workspace theme (output.yaml), then the dashboard's own overrides."""
    return {**DEFAULT_THEME, **((output or {}).get("theme") or {}), **(dashboard.get("theme") or {})}


def queries(dashboard: Mapping[str, Any]) -> Iterator[tuple[tuple, str, str]]:
    """(path in the spec, description, sql) of every query a dashboard runs."""
    for i, f in enumerate(dashboard.get("filters") or []):
        for key in ("options_query", "bounds_query"):
            if f.get(key):
                yield ("filters", i, key), f"filter '{f.get('id')}'", f[key]
    for i, c in enumerate(dashboard.get("components") or []):
        if isinstance(c.get("query"), str):
            yield ("components", i, "query"), f"component '{c.get('id')}'", c["query"]
        for name, sql in (c.get("queries") or {}).items():
            yield ("components", i, "queries", name), f"component '{c.get('id')}' query '{name}'", sql


def unset_params(sql: str) -> dict[str, None]:
    """Every parameter of a query, unset: what checks bind and run with."""
    return params_for(sql, {})


def params_for(sql: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """Exactly the named parameters a query uses; unset filters are NULL (meaning 'all')."""
    return {name: values.get(name) for name in PARAM_RE.findall(sql)}


def filter_states(dashboard: Mapping[str, Any], tables: Mapping[str, pa.Table], version: str,
                  cache: QueryCache = CACHE, timeout_s: float = 10.0) -> list[FilterState]:
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


def render(files: Mapping[str, Any], tables: Mapping[str, pa.Table], version: str,
           chosen_filters: Mapping[str, Any] | None = None, *, cache: QueryCache = CACHE) -> Rendered:
    """Render the dashboard in `files["dashboard"]` over `tables` (the data of `version`)."""
    started = time.perf_counter()
    misses_before = cache.misses
    dashboard = files.get("dashboard") or {}
    output = files.get("output") or {}
    injection = output.get("data_injection") or {}
    max_rows = int(injection.get("max_rows_per_query", 10_000))
    timeout_s = float(injection.get("query_timeout_s", 10))
    theme = theme_for(dashboard, output)
    formats = output.get("number_formats") or {}
    states = filter_states(dashboard, tables, version, cache, timeout_s)
    params = filter_params(states, chosen_filters or {})

    by_id = {c["id"]: c for c in dashboard.get("components") or []}
    rows: list[list[Component]] = []
    placed: set[str] = set()
    for row in dashboard.get("layout") or []:
        built = []
        for cell in row:
            cid, width = (cell, 1) if isinstance(cell, str) else (cell["id"], cell.get("width", 1))
            if cid in by_id and cid not in placed:
                built.append(_component(by_id[cid], width, tables, version, params, theme, formats, max_rows, timeout_s, cache))
                placed.add(cid)
        if built:
            rows.append(built)
    for cid, spec in by_id.items():  # components the layout does not place follow, one per row
        if cid not in placed:
            rows.append([_component(spec, 1, tables, version, params, theme, formats, max_rows, timeout_s, cache)])
    chosen = {k: v for k, v in (chosen_filters or {}).items() if v not in (None, "", [], ())}
    return Rendered(dashboard.get("title", ""), dashboard.get("description", ""), theme, rows, states, version,
                    time.perf_counter() - started, cache.misses - misses_before, chosen)


def _component(spec, width, tables, version, params, theme, formats, max_rows, timeout_s, cache) -> Component:
    comp = Component(spec["id"], spec["type"], spec.get("title", ""), width, spec)
    try:
        if comp.type == "text":
            _text(comp, tables, version, params, formats, timeout_s, cache)
            return comp
        rows_cap = min(max_rows, int(spec.get("max_rows", max_rows))) if comp.type == "table" else max_rows
        comp.result = cache.run(version, tables, spec["query"], params_for(spec["query"], params), max_rows=rows_cap, timeout_s=timeout_s)
        {"kpi": _kpi, "chart": _chart, "table": _table}[comp.type](comp, theme, formats)
    except QueryError as exc:
        comp.error = f"query failed: {exc}"
    except (KeyError, ValueError, TypeError, IndexError, ArithmeticError) as exc:
        comp.error = f"cannot render: {exc}"
    return comp


# --------------------------------------------------------------------------- kinds


def threshold_met(value: Any, thresholds: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    """The first threshold the value meets."""
    if value is None or not thresholds:
        return None
    for t in thresholds:
        v = t["value"]
        if {">=": value >= v, ">": value > v, "<=": value <= v, "<": value < v, "==": value == v}[t["op"]]:
            return t
    return None


def threshold_color(value: Any, thresholds: list[dict[str, Any]] | None) -> str | None:
    """Colour of the first threshold the value meets."""
    met = threshold_met(value, thresholds)
    return met["color"] if met else None


OP_WORDS = {">=": "at or above", ">": "above", "<=": "at or below", "<": "below", "==": "equal to"}
STATUS_MARKS = ("▲", "■", "▼", "◆", "●")  # a shape per threshold, so status never rests on colour alone


def threshold_status(value: Any, thresholds: list[dict[str, Any]] | None, fmt: str | None) -> str:
    """The met threshold in words ("▲ at or above 95.0%"), so the status does not rest on colour alone."""
    met = threshold_met(value, thresholds)
    if met is None:
        return ""
    return f"{STATUS_MARKS[thresholds.index(met) % len(STATUS_MARKS)]} {OP_WORDS[met['op']]} {format_value(met['value'], fmt)}"


def _column(result: QueryResult, name: str | None, fallback: int = 0) -> str:
    columns = result.columns
    if name is None:
        return columns[fallback]
    for c in columns:
        if c.lower() == name.lower():
            return c
    raise KeyError(f"column {name!r} is not in the query result (columns: {', '.join(columns)})")


def kpi_value_column(spec: dict[str, Any], columns: list[str]) -> str | None:
    """The KPI's value: its `value_column`, else the column named `value`, else the first."""
    return spec.get("value_column") or next((c for c in columns if c.lower() == "value"), columns[0] if columns else None)


def _kpi(comp: Component, theme, formats) -> None:
    spec, result = comp.spec, comp.result
    if result.table.num_rows == 0:
        comp.display = "—"
        return
    first = result.table.slice(0, 1).to_pylist()[0]
    value_col = _column(result, spec["value_column"]) if spec.get("value_column") else kpi_value_column(spec, result.columns)
    comp.value = first[value_col]
    fmt = spec.get("format") or formats.get("default")
    comp.display = format_value(comp.value, fmt)
    comp.color = threshold_color(comp.value, spec.get("thresholds"))
    comp.status = threshold_status(comp.value, spec.get("thresholds"), fmt)
    if spec.get("compare_column"):
        comp.compare = first[_column(result, spec["compare_column"])]
        mode = spec.get("delta", "absolute")
        if comp.compare is not None and comp.value is not None and mode != "none":
            if mode == "relative":
                comp.delta_display = format_value((comp.value - comp.compare) / comp.compare, "+.1%") if comp.compare else ""
            else:
                comp.delta_display = format_value(comp.value - comp.compare, ("+" + fmt) if fmt and fmt[0] not in "+-( " else fmt)


def _chart(comp: Component, theme, formats) -> None:
    import altair as alt

    spec, result = comp.spec, comp.result
    frame = result.table.to_pandas(date_as_object=False)  # datetimes, which Altair serialises itself
    dates = {f.name for f in result.table.schema if pa.types.is_date(f.type)}
    encoding = dict(spec["encoding"])
    channels: dict[str, Any] = {}
    for name, ch in encoding.items():
        if name == "tooltip":
            channels["tooltip"] = [alt.Tooltip(_column(result, t["field"]), **{k: t[k] for k in ("type", "title", "format") if t.get(k)})
                                   for t in ch]
            continue
        field_name = _column(result, ch["field"])
        if name == "color" and ch.get("thresholds"):
            frame["__color"] = [threshold_color(v, ch["thresholds"]) or theme["primary"] for v in frame[field_name]]
            channels["color"] = alt.Color("__color:N", scale=None, legend=None)
            continue
        kwargs: dict[str, Any] = {"type": ch.get("type") or alt.Undefined, "title": ch.get("title", alt.Undefined)}
        for key in ("aggregate", "timeUnit", "stack"):
            if key in ch:
                kwargs[key] = ch[key]
        if field_name in dates and ch.get("type") == "temporal" and "timeUnit" not in ch:
            kwargs["timeUnit"] = "yearmonthdate"  # whole days: no "12 PM" ticks between them
        if "sort" in ch:
            kwargs["sort"] = ch["sort"]
        if ch.get("format") and name in ("x", "y"):
            kwargs["axis"] = alt.Axis(format=ch["format"])
        if ch.get("format") and name == "theta":
            kwargs["format"] = ch["format"]
        scale = dict(ch.get("scale") or {})
        if name == "color" and "range" not in scale:
            scale["range"] = theme["palette"]
        if scale:
            kwargs["scale"] = alt.Scale(**scale)
        cls = {"x": alt.X, "y": alt.Y, "color": alt.Color, "theta": alt.Theta, "size": alt.Size, "facet": alt.Facet}[name]
        if name == "facet":
            kwargs.pop("stack", None)
            channels["facet"] = alt.Facet(field_name, type=kwargs["type"], title=kwargs["title"], columns=3)
        else:
            channels[name] = cls(field_name, **{k: v for k, v in kwargs.items() if v is not alt.Undefined})
    mark = spec["mark"]
    mark_kwargs = {"color": theme["primary"]} if "color" not in channels else {}
    if mark == "arc":
        mark_kwargs["innerRadius"] = 40
    chart = getattr(alt.Chart(frame), f"mark_{mark}")(**mark_kwargs).encode(**channels)
    chart = chart.properties(height=spec.get("height", 280), width="container" if "facet" not in channels else 200,
                             description=chart_summary(spec, frame, channels))
    comp.chart = chart.configure(background=theme["background"], font=theme.get("font", "sans-serif")).configure_view(stroke=None).configure_axis(
        labelColor=theme["text"], titleColor=theme["text"]).configure_legend(labelColor=theme["text"], titleColor=theme["text"])
    try:
        comp.vega = comp.chart.to_dict()  # Vega-Lite validation now, not when a browser or an export draws it
    except alt.utils.schemapi.SchemaValidationError as exc:
        raise ValueError(f"not a valid Vega-Lite chart: {str(exc).splitlines()[0]}") from None


def chart_summary(spec: dict[str, Any], frame, channels: dict[str, Any]) -> str:
    """A chart's text alternative: its title, its kind, and a one-line summary of what it shows.

    Vega renders it as the chart's ARIA label, so screen readers and the HTML export say it.
    """
    title = spec.get("title") or spec.get("id", "chart")
    words = f"{title}: {spec['mark']} chart of {len(frame):,} row{'s' if len(frame) != 1 else ''}"
    x, y = (getattr(channels.get(c), "shorthand", None) for c in ("x", "y"))
    measure, category = (y, x) if y in frame and frame[y].dtype.kind in "if" else (x, y) if x in frame and frame[x].dtype.kind in "if" else (None, None)
    if measure and len(frame) and frame[measure].notna().any():
        top, low = frame[measure].idxmax(), frame[measure].idxmin()
        name = lambda row: f" ({frame[category][row]})" if category in frame else ""  # noqa: E731
        words += f"; {measure} from {frame[measure][low]:,.4g}{name(low)} to {frame[measure][top]:,.4g}{name(top)}"
    return words


def _table(comp: Component, theme, formats) -> None:
    spec, result = comp.spec, comp.result
    columns_spec = {k.lower(): v for k, v in (spec.get("columns") or {}).items()}
    raw = result.table.to_pylist()
    display_rows = []
    for i, row in enumerate(raw):
        shown = {}
        for col in result.columns:
            conf = columns_spec.get(col.lower(), {})
            value = row[col]
            fmt = conf.get("format") or (formats.get("default") if isinstance(value, float) else None)
            shown[conf.get("label", col)] = format_value(value, fmt)
            met = threshold_met(value, conf.get("thresholds")) if isinstance(value, (int, float)) else None
            if met:
                comp.cell_colors[(i, conf.get("label", col))] = met["color"]
                # The threshold's shape beside the number: the status must not rest on colour alone.
                mark = STATUS_MARKS[conf["thresholds"].index(met) % len(STATUS_MARKS)]
                shown[conf.get("label", col)] = f"{mark} {shown[conf.get('label', col)]}"
                comp.legend.setdefault(mark, f"{conf.get('label', col)} {threshold_status(value, conf['thresholds'], fmt).split(' ', 1)[1]}")
        display_rows.append(shown)
    import pandas as pd

    comp.frame = pd.DataFrame(display_rows, columns=[columns_spec.get(c.lower(), {}).get("label", c) for c in result.columns])


def _text(comp: Component, tables, version, params, formats, timeout_s, cache) -> None:
    spec = comp.spec
    firsts: dict[str, dict[str, Any]] = {}
    for name, sql in (spec.get("queries") or {}).items():
        result = cache.run(version, tables, sql, params_for(sql, params), max_rows=1, timeout_s=timeout_s)
        comp.text_results[name] = result
        firsts[name] = {k.lower(): v for k, v in (result.table.to_pylist()[0] if result.table.num_rows else {}).items()}

    def fill(match: re.Match) -> str:
        query, column, fmt = match.group(1), match.group(2).lower(), match.group(3)
        if query not in firsts:
            raise KeyError(f"placeholder {match.group(0)} names no query (queries: {', '.join(firsts) or 'none'})")
        if column not in firsts[query]:
            if not firsts[query]:
                return "—"
            raise KeyError(f"placeholder {match.group(0)}: query {query!r} has no column {match.group(2)!r}")
        return format_value(firsts[query][column], fmt)

    comp.markdown = PLACEHOLDER_RE.sub(fill, spec["markdown"])
