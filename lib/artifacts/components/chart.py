"""Chart: a Vega-Lite mark and encoding over its query's rows.

Spec: `query`, `mark` (bar, line, area, point, arc, rect, tick), `encoding`
({x, y, color, theta, size, facet: {field, type, title, format, sort, ...},
tooltip: [...]}; `color` may carry `scale: {domain, range}` or `thresholds`)
and `height`. The Vega-Lite dict is written here directly from the Arrow
result (lib.artifacts.components.vegalite holds the format: its version, its
schema, chart data), and checked against Vega-Lite's JSON Schema once, so
neither a browser nor the export meets an invalid one. A field without a
`type` gets the one Altair would infer: numbers quantitative, dates and times
temporal, anything else nominal.

Building and checking a chart costs more than a cached query, so the built
chart is kept per (component spec, query result, theme): a rerun whose query
came from the cache gets the same chart and Vega-Lite dict back without
building or checking them again.
"""

from __future__ import annotations

import copy
import json
import math
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Mapping

import pyarrow as pa

from ...core.formats import format_value
from ...memory.spec import selection_values, selections
from . import vegalite
from .base import Component, ComponentKind, FieldRef, RenderContext, Spec, result_column, threshold_color

if TYPE_CHECKING:
    from ...data.sandbox import QueryResult

NAME = "chart"


def new(cid: str, title: str, query: str, mark: str, encoding: dict[str, Any]) -> dict[str, Any]:
    """A chart's spec."""
    return {"id": cid, "type": NAME, "title": title, "query": query, "mark": mark, "encoding": encoding}


# --------------------------------------------------------------------------- render


class BuiltCharts:
    """Built charts keyed by (query result, spec, theme); least recently used dropped first.

    The result is keyed by identity: lib.artifacts.render.QueryCache hands back the same
    QueryResult object for the same data version, SQL and filter values, and a
    new object whenever the data can differ. Each entry holds its result, so
    the object's id cannot be reused by another result while the entry lives.
    """

    def __init__(self, size: int = 256):
        self.size = size
        self._items: OrderedDict[tuple, tuple[QueryResult, Any, dict[str, Any]]] = OrderedDict()
        self._lock = threading.Lock()  # sessions render in threads of one server process
        self.builds = 0

    @staticmethod
    def key(result: QueryResult, spec: Spec, theme: dict[str, Any], selected: list[dict[str, Any]] | None = None) -> tuple:
        """`selected` are the marks a cross-filter highlights (see `selected_points`): a chart per selection."""
        dumped = (json.dumps(x, sort_keys=True, default=str) for x in (spec, theme, selected or []))
        return id(result), *dumped

    def get(self, key: tuple, result: QueryResult) -> tuple[Any, dict[str, Any]] | None:
        with self._lock:
            entry = self._items.get(key)
            if entry is None or entry[0] is not result:
                return None
            self._items.move_to_end(key)
            return entry[1], entry[2]

    def put(self, key: tuple, result: QueryResult, chart: Any, vega: dict[str, Any]) -> None:
        with self._lock:
            self.builds += 1
            self._items[key] = (result, chart, vega)
            while len(self._items) > self.size:
                self._items.popitem(last=False)


BUILT = BuiltCharts()


def render(comp: Component, ctx: RenderContext) -> None:
    spec, theme = comp.spec, ctx.theme
    driven = tuple(fid for _, _, fid in selections(spec))
    # A chart whose marks set a filter runs without it: every mark stays there to click, the chosen ones highlighted.
    comp.result = result = ctx.run(spec["query"], unset=driven)
    selected = selected_points(spec, ctx.params)
    key = BUILT.key(result, spec, theme, selected)
    cached = BUILT.get(key, result)
    if cached is None:
        cached = _build(spec, theme, result, selected)  # raises on an invalid chart, which is then not kept
        BUILT.put(key, result, *cached)
    # Shared by every session that shows this chart on this data: nobody changes them after this point.
    comp.chart, comp.vega = cached


SELECTION = "selected"  # the point selection parameter of a chart with `select` (one per chart, so one name serves)


def selected_points(spec: Spec, params: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The marks a chart's `select` filters have chosen, as Vega-Lite point selection values ([{field: value}]).

    A chart with one pair highlights each chosen value; with several pairs, a
    mark is selected when every one of its fields has its filter's value (the
    combinations of the first chosen value of each).
    """
    pairs = selections(spec)
    if not pairs:
        return []
    chosen = [(name, selection_values(params.get(fid))) for _, name, fid in pairs]
    if any(not values for _, values in chosen):
        return []
    if len(chosen) == 1:
        name, values = chosen[0]
        return [{name: v} for v in values]
    return [{name: values[0] for name, values in chosen}]


def _build(spec: Spec, theme: dict[str, Any], result: QueryResult, selected: list[dict[str, Any]] | None = None) -> tuple[vegalite.Drawn, dict[str, Any]]:
    """The chart drawn from the query result, and its Vega-Lite dict with the data inlined (validated)."""
    types = {f.name: f.type for f in result.table.schema}
    table = vegalite.chart_table(result.table)
    extra: dict[str, list[Any]] = {}  # columns the chart adds: threshold colours, temporal values as text

    shows: dict[str, str] = {}  # channel -> the query column it shows

    def channel(ch: Mapping[str, Any], keys: tuple[str, ...]) -> tuple[str, dict[str, Any]]:
        column = result_column(result, ch["field"])
        out: dict[str, Any] = {"field": vegalite.field(column), "type": ch.get("type") or vegalite.measure_type(types[column])}
        if out["field"] != column and "title" not in ch:
            out["title"] = column  # Vega-Lite's own title would show the escapes
        out.update({k: ch[k] for k in keys if k in ch})
        return column, out

    encoding: dict[str, Any] = {}
    for name, ch in spec["encoding"].items():
        if name == "tooltip":
            encoding["tooltip"] = [
                channel({k: t[k] for k in ("field", "type", "title", "format") if t.get(k) or k == "field"}, ("title", "format"))[1] for t in ch
            ]
            continue
        if name == "color" and ch.get("thresholds"):
            values = table.column(result_column(result, ch["field"])).to_pylist()
            extra["__color"] = [threshold_color(v, ch["thresholds"]) or theme["primary"] for v in values]
            encoding["color"] = {"field": "__color", "type": "nominal", "scale": None, "legend": None}
            continue
        if name == "facet":
            encoding["facet"] = {**channel(ch, ("title",))[1], "columns": 3}
            continue
        column, out = channel(ch, ("title", "aggregate", "timeUnit", "stack", "sort"))
        shows[name] = column
        if pa.types.is_date(types[column]) and ch.get("type") == "temporal" and "timeUnit" not in ch:
            out["timeUnit"] = "yearmonthdate"  # whole days: no "12 PM" ticks between them
        if ch.get("format") and name in ("x", "y"):
            out["axis"] = {"format": ch["format"]}
        if ch.get("format") and name == "theta":
            out["format"] = ch["format"]
        scale = dict(ch.get("scale") or {})
        if name == "color" and "range" not in scale:
            scale["range"] = theme["palette"]
        if scale:
            out["scale"] = scale
        encoding[name] = out
    mark: dict[str, Any] = {"type": spec["mark"], **({"color": theme["primary"]} if "color" not in encoding else {})}
    if spec["mark"] == "arc":
        mark["innerRadius"] = 40
    view: dict[str, Any] = {"mark": mark, "encoding": encoding}
    view = _selectable(view, spec, result, extra, selected or [])
    for column, values in extra.items():
        table = table.append_column(column, vegalite.strings(values))
    vega: dict[str, Any] = {
        "config": {
            "background": theme["background"],
            "font": theme.get("font", "sans-serif"),
            "view": {"stroke": None},
            "axis": {"labelColor": theme["text"], "titleColor": theme["text"]},
            "legend": {"labelColor": theme["text"], "titleColor": theme["text"]},
        },
        **view,
        "height": spec.get("height", 280),
        "width": "container" if "facet" not in encoding else 200,
        "description": summary(spec, table, shows),
    }
    return vegalite.draw(vega, table)  # checked now, not when a browser or an export draws it


POINTS = "points"  # the layer of a line or area chart's clickable points


def _selectable(view: dict[str, Any], spec: Spec, result: QueryResult, extra: dict[str, list[Any]], selected: list[dict[str, Any]]) -> dict[str, Any]:
    """The view with a point selection over its `select` fields, the selected marks opaque and the others faded.

    Vega-Lite keeps it working offline: in the HTML export a click still
    highlights inside the chart; only the Dashboard page turns it into filters.
    """
    pairs = selections(spec)
    if not pairs:
        return view
    fields = []
    for _, name, _ in pairs:
        column = result_column(result, name)
        if _is_temporal(result, column):
            # A browser reports a clicked date as an instant in its own time zone; the selection
            # projects this column instead: the value's own text, which the page maps back exactly.
            extra[select_key(column)] = [None if v is None else str(v) for v in result.table.column(column).to_pylist()]
            column = select_key(column)
        fields.append(column)
    values = [{_selected_field(result, k): _selected_value(result, k, v) for k, v in point.items()} for point in selected]
    param: dict[str, Any] = {"name": SELECTION, "select": {"type": "point", "fields": fields}}
    if values:
        param["value"] = values
    opacity = {"condition": {"param": SELECTION, "value": 1.0}, "value": 0.3}
    mark, encoding = view["mark"], view["encoding"]
    if spec["mark"] in ("line", "area"):
        # A line is one mark for all its points, and a click on it reports its first point: the points, drawn
        # over it, carry the selection, and the line (a layer without one) lets clicks through to them.
        points = {"type": "point", "filled": True, "size": 50, **({"color": mark["color"]} if "color" in mark else {})}
        layer = [view, {"name": POINTS, "mark": points, "encoding": {**encoding, "opacity": opacity}}]
        return {"layer": layer, "params": [{**param, "views": [POINTS]}]}
    # Shift-click adds marks, which only a multiselect filter can hold; the page keeps the first for a select.
    return {**view, "encoding": {**encoding, "opacity": opacity}, "params": [param]}


SELECT_KEY = "__select_{column}"  # the text of a temporal column's values, which a point selection projects


def select_key(column: str) -> str:
    return SELECT_KEY.format(column=column)


def selected_field(key: str) -> str:
    """The query's column a selected mark's key names (a temporal column's text key, or the column itself)."""
    prefix, _, _ = SELECT_KEY.partition("{")
    return key[len(prefix) :] if key.startswith(prefix) else key


def _is_temporal(result: QueryResult, column: str) -> bool:
    return vegalite.is_temporal(result.table.schema.field(column).type)


def _selected_field(result: QueryResult, name: str) -> str:
    column = result_column(result, name)
    return select_key(column) if _is_temporal(result, column) else column


def _selected_value(result: QueryResult, name: str, value: Any) -> Any:
    if _is_temporal(result, result_column(result, name)):
        return str(value)
    return vegalite.json_value(value)


def summary(spec: Spec, table: pa.Table, shows: Mapping[str, str]) -> str:
    """A chart's text alternative: its title, its kind, and the range of its data.

    "Daily attainment by gate: line chart of 21 rows; Attainment from 92% (2026-11-22) to 98% (2026-11-17);
    Day from 2026-11-16 to 2026-11-22": the measure's lowest and highest (with the mark's category), then the
    other axis's range when it runs over numbers or times, each named by its title and shown in its format
    (its tooltip's, where that shows the field).
    Vega renders it as the chart's ARIA label, so screen readers and the HTML export say it.
    """
    title = spec.get("title") or spec.get("id", "chart")
    words = f"{title}: {spec['mark']} chart of {table.num_rows:,} row{'s' if table.num_rows != 1 else ''}"
    given = spec.get("encoding") or {}
    x, y = (shows.get(c) for c in ("x", "y"))  # the query columns on the axes
    axis = {x: "x", y: "y"}
    names = set(table.column_names)

    def numeric(column: Any) -> bool:
        return column in names and vegalite.is_number(table.schema.field(column).type)

    def continuous(column: Any) -> bool:
        return numeric(column) or (column in names and vegalite.is_temporal(table.schema.field(column).type))

    def values(column: str) -> list[Any]:
        # NaN is missing, as pandas counts it
        return [None if isinstance(v, float) and math.isnan(v) else v for v in table.column(column).to_pylist()]

    def named(column: str) -> str:
        return (given.get(axis[column]) or {}).get("title") or column

    def shown(column: str, value: Any) -> str:
        # the tooltip's format where it shows the field (often finer than the axis's), else the axis's
        tip = next((t.get("format") for t in given.get("tooltip") or [] if str(t.get("field", "")).lower() == column.lower() and t.get("format")), None)
        fmt = tip or (given.get(axis[column]) or {}).get("format")
        try:
            if fmt is None and isinstance(value, float):
                return f"{value:,.4g}"
            return format_value(value, fmt)
        except ValueError:  # a format the d3 subset here does not know: the value as it is
            return str(value)

    measure, category = (y, x) if numeric(y) else (x, y) if numeric(x) else (None, None)
    if measure:
        measured = values(measure)
        present = [i for i, v in enumerate(measured) if v is not None]
        if present:
            top = max(present, key=lambda i: (measured[i], -i))  # the first of the highest, as pandas' idxmax
            low = min(present, key=lambda i: (measured[i], i))
            beside = values(category) if category and category in names else None

            def name(row: int) -> str:
                return f" ({shown(category, beside[row])})" if beside is not None and category else ""

            words += f"; {named(measure)} from {shown(measure, measured[low])}{name(low)} to {shown(measure, measured[top])}{name(top)}"
    if category and continuous(category):
        present = [v for v in values(category) if v is not None]
        if present:
            words += f"; {named(category)} from {shown(category, min(present))} to {shown(category, max(present))}"
    return words


# --------------------------------------------------------------------------- what the checks read


def _channels(spec: Spec) -> list[tuple[str, int | None, dict[str, Any]]]:
    """(channel, index in a list channel such as tooltip, its definition)."""
    out = []
    for channel, ch in (spec.get("encoding") or {}).items():
        if channel == "tooltip":
            out.extend((channel, j, t) for j, t in enumerate(ch))
        else:
            out.append((channel, None, ch))
    return out


def fields(spec: Spec, columns: list[str]) -> list[FieldRef]:
    refs = []
    for channel, j, ch in _channels(spec):
        usable = ch.get("type") if ch.get("type") in ("quantitative", "temporal") and not ch.get("aggregate") == "count" else None
        refs.append(FieldRef(ch.get("field"), ("encoding", channel) + (() if j is None else (j,)) + ("field",), usable, f"encoding.{channel} field"))
    refs += [FieldRef(name, place + ("field",), None, "select field") for place, name, _ in selections(spec)]
    return refs


def prose(spec: Spec) -> list[tuple[tuple, str]]:
    """Axis and legend titles (a tooltip's titles included)."""
    return [
        (("encoding", channel, "title"), ch.get("title", ""))
        for channel, node in (spec.get("encoding") or {}).items()
        for ch in (node if isinstance(node, list) else [node])
    ]


def rule_values(spec: Spec) -> list[float]:
    color = (spec.get("encoding") or {}).get("color") or {}
    return [float(t["value"]) for t in color.get("thresholds") or []]


def color_channel(spec: Spec) -> tuple[tuple, Any]:
    return ("encoding", "color"), (spec.get("encoding") or {}).get("color") or {}


def threshold_places(spec: Spec, target: str, columns_of) -> list[tuple[tuple, Any]]:
    """A chart shows a field with thresholds when its colour encodes it."""
    path, channel = color_channel(spec)
    if (channel.get("field") or "").lower() == target:
        return [(path + ("thresholds",), channel.get("thresholds"))]
    return []


def data_places(spec: Spec) -> list[tuple[tuple, Spec]]:
    """The component and each encoding channel: where Vega-Lite would take inline data."""
    return [((), spec), *((("encoding", ch), node) for ch, node in (spec.get("encoding") or {}).items() if isinstance(node, dict))]


# --------------------------------------------------------------------------- HTML export


def to_html(comp: Component, chart_specs: list[dict[str, Any]]) -> str:
    """A holder the page's script draws the chart into; its spec joins `chart_specs`."""
    chart_specs.append(vega_lite_spec(comp))
    holder = f'<div class="chart" data-chart="{len(chart_specs) - 1}"></div>'
    if selections(comp.spec):
        # The point selection works in Vega-Lite alone; setting the dashboard's filters needs the app's server.
        holder += '<p class="note clicks">Click a mark to highlight it (shift-click for more). The filters are fixed in this file: the other components do not follow the click.</p>'
    return holder


def vega_lite_spec(comp: Component) -> dict[str, Any]:
    """The chart's Vega-Lite spec (validated by render) as plain JSON values, data inlined."""
    return copy.deepcopy(comp.vega) if comp.vega is not None else {}


KIND = ComponentKind(
    NAME,
    render,
    to_html,
    fields=fields,
    prose=prose,
    rule_values=rule_values,
    threshold_places=threshold_places,
    color_channel=color_channel,
    data_places=data_places,
)
