"""What every component kind shares: the kind's interface, what rendering produces, and small helpers.

A kind (`ComponentKind`) is a bundle of plain functions over one component's
spec (a dict from dashboard.yaml) or its rendered `Component`:

    render            run the kind's query or queries through a `RenderContext` and fill the Component
    to_html           the rendered component's body as HTML, for the standalone export
    fields            the columns of its query's output the spec names, as `FieldRef`s (checks.references)
    placeholders      `{{query.column}}` placeholders in its text (checks.references)
    prose             titles, labels and text a person reads, where data values must not be literals
    rule_values       numbers the spec states as rules (thresholds), which prose may repeat
    threshold_places  where it shows a field, and so must carry a task rule's threshold
    color_channel     where it colours categories, and so must carry a task rule's category colour
    data_places       where Vega-Lite would take inline data

Nothing here imports Streamlit, Altair or pandas: charts are Vega-Lite dicts and
tables lists of display strings, which the page and the export draw.
"""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ...core.formats import format_value
from ...memory import schemas
from ...memory.schemas import load_schema
from ...memory.spec import params_for

if TYPE_CHECKING:
    from ...data.engine import Engine
    from ...data.sandbox import QueryResult

Spec = Mapping[str, Any]
SpecPath = tuple  # a path below the component in the spec, e.g. ("encoding", "x", "field")

COLOR_RE = re.compile(schemas.pattern("dashboard", "color"))


@dataclass
class Component:
    """One rendered component: its spec, then what its kind filled in (or the error that stopped it)."""

    id: str
    type: str
    title: str = ""
    width: int = 1
    spec: Mapping[str, Any] = field(default_factory=dict)
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
    chart: Any = None  # vegalite.Drawn: its Vega-Lite spec and its data as Arrow, which the page sends
    vega: dict[str, Any] | None = None  # its Vega-Lite spec with the data inlined as JSON rows, which the export writes
    # table
    shown: Any = None  # table.Shown: its labels and rows of display strings
    cell_colors: dict[tuple[int, str], str] = field(default_factory=dict)
    legend: dict[str, str] = field(default_factory=dict)  # status mark -> what it means, for the cells marked
    # text
    markdown: str = ""
    text_results: dict[str, QueryResult] = field(default_factory=dict)


@dataclass
class RenderContext:
    """What a kind's render needs besides its spec: the data, the bound filter values, theme, formats and limits."""

    params: Mapping[str, Any]  # every filter parameter's value; each query gets the ones it names
    theme: dict[str, Any]
    formats: Mapping[str, Any]
    max_rows: int
    timeout_s: float
    engine: Engine  # the workspace's query engine over the data rendered (lib.data.engine)

    def run(self, sql: str, max_rows: int | None = None, unset: tuple[str, ...] = ()) -> QueryResult:
        """One query of the component, its parameters bound (those in `unset` left NULL: "all"), through the engine."""
        params = {k: v for k, v in self.params.items() if k not in unset}
        return self.engine.run(sql, params_for(sql, params), max_rows=self.max_rows if max_rows is None else max_rows, timeout_s=self.timeout_s)


@dataclass(frozen=True)
class FieldRef:
    """A column of the component's query output that its spec names."""

    name: str | None  # None or "" when the spec leaves it out
    path: SpecPath  # where the spec names it
    usable: str | None = None  # a key of checks.USABLE: the column must be of that family
    what: str = "field"  # how messages call it


def _none(spec: Spec) -> list:
    return []


def _no_fields(spec: Spec, columns: list[str]) -> list[FieldRef]:
    return []


def _no_thresholds(spec: Spec, target: str, columns_of: Callable[[str], list[str] | None]) -> list:
    return []


def _no_color_channel(spec: Spec) -> None:
    return None


def _itself(spec: Spec) -> list[tuple[SpecPath, Spec]]:
    return [((), spec)]


@dataclass(frozen=True)
class ComponentKind:
    name: str  # the spec's `type`
    render: Callable[[Component, RenderContext], None]
    to_html: Callable[[Component, list[dict[str, Any]]], str]  # the list collects chart specs for the page's script
    fields: Callable[[Spec, list[str]], list[FieldRef]] = _no_fields  # (spec, its query's output columns)
    placeholders: Callable[[Spec], list[tuple[re.Match, SpecPath]]] = _none
    prose: Callable[[Spec], list[tuple[SpecPath, str]]] = _none  # besides the title, which every kind has
    rule_values: Callable[[Spec], list[float]] = _none
    # (spec, field name lower-cased, columns_of(sql) -> output column names or None) -> [(path, thresholds)]
    threshold_places: Callable[[Spec, str, Callable[[str], list[str] | None]], list[tuple[SpecPath, Any]]] = _no_thresholds
    color_channel: Callable[[Spec], tuple[SpecPath, Mapping[str, Any]] | None] = _no_color_channel
    data_places: Callable[[Spec], list[tuple[SpecPath, Spec]]] = _itself

    @property
    def spec_fields(self) -> dict[str, Any]:
        """The kind's own fields and their JSON Schemas, read from schemas/dashboard.schema.json (never re-typed here)."""

        return load_schema("dashboard")["$defs"][self.name].get("properties") or {}


# --------------------------------------------------------------------------- query results


def result_column(result: QueryResult, name: str | None, fallback: int = 0) -> str:
    """The result's column for a name the spec gives, matched case-insensitively."""
    columns = result.columns
    if name is None:
        return columns[fallback]
    for c in columns:
        if c.lower() == name.lower():
            return c
    raise KeyError(f"column {name!r} is not in the query result (columns: {', '.join(columns)})")


# --------------------------------------------------------------------------- thresholds


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
# A shape per threshold, so status never rests on colour alone, and one that says the threshold's direction: the
# band that runs up without end points up, the one that runs down points down, a band between two thresholds is a
# square (then the other shapes, one per band), a single value a circle.
UP, DOWN, AT = "▲", "▼", "●"
BETWEEN = ("■", "◆", "⬟", "⬢")
STATUS_MARKS = (UP, DOWN, AT, *BETWEEN)

_INF = math.inf


@dataclass(frozen=True)
class Band:
    """The values one threshold catches, first match winning: what the thresholds before it leave it."""

    low: float  # -inf: no lower end
    low_closed: bool
    high: float  # +inf: no upper end
    high_closed: bool
    empty: bool = False  # the thresholds before it catch every value it would

    def shape(self) -> str:
        if self.empty:
            return ""
        if self.high == _INF:
            return UP
        if self.low == -_INF:
            return DOWN
        return AT if self.low == self.high else BETWEEN[0]

    def words(self, fmt: str | None) -> str:
        """The band in words: "at or above 95.0%", "at or above 85.0% and below 95.0%", "below 85.0%"."""
        fmt = fmt[1:] if fmt and fmt[0] == "+" else fmt  # "below 0.0%", not "below +0.0%"
        if self.empty:
            return "never (the thresholds before it catch every such value)"
        if self.low == self.high:
            return f"equal to {format_value(self.low, fmt)}"
        lower = f"{'at or above' if self.low_closed else 'above'} {format_value(self.low, fmt)}" if self.low != -_INF else ""
        upper = f"{'at or below' if self.high_closed else 'below'} {format_value(self.high, fmt)}" if self.high != _INF else ""
        return " and ".join(w for w in (lower, upper) if w) or "any value"


def _own(op: str, value: float) -> tuple[float, bool, float, bool]:
    return {
        ">=": (value, True, _INF, False),
        ">": (value, False, _INF, False),
        "<=": (-_INF, False, value, True),
        "<": (-_INF, False, value, False),
        "==": (value, True, value, True),
    }[op]


def _minus(pieces: list[tuple[float, bool, float, bool]], cut: tuple[float, bool, float, bool]) -> list[tuple[float, bool, float, bool]]:
    """The intervals `pieces` without the interval `cut` (each (low, low closed, high, high closed))."""
    out = []
    c_lo, c_lo_in, c_hi, c_hi_in = cut
    for lo, lo_in, hi, hi_in in pieces:
        # the part below the cut: up to the cut's low end, which it keeps when the cut does not
        if lo < c_lo or (lo == c_lo and lo_in and not c_lo_in):
            top, top_in = (c_lo, not c_lo_in) if c_lo < hi or (c_lo == hi and hi_in) else (hi, hi_in)
            out.append((lo, lo_in, top, top_in))
        # the part above the cut
        if hi > c_hi or (hi == c_hi and hi_in and not c_hi_in):
            bottom, bottom_in = (c_hi, not c_hi_in) if c_hi > lo or (c_hi == lo and lo_in) else (lo, lo_in)
            out.append((bottom, bottom_in, hi, hi_in))
    return [p for p in out if p[0] < p[2] or (p[0] == p[2] and p[1] and p[3])]


def threshold_bands(thresholds: list[dict[str, Any]] | None) -> list[Band]:
    """Each threshold's band (in the thresholds' order): its own values less those an earlier threshold catches.

    `>= 95 %`, `< 85 %`, `>= 85 %` (first match wins) are the bands "at or above 95 %", "below 85 %" and
    "at or above 85 % and below 95 %": the third is a band between two thresholds, not a second upward one.
    """
    bands, taken = [], []
    for t in thresholds or []:
        pieces = [_own(t["op"], float(t["value"]))]
        for earlier in taken:
            pieces = _minus(pieces, earlier)
        taken.append(_own(t["op"], float(t["value"])))
        if not pieces:
            bands.append(Band(0.0, False, 0.0, False, empty=True))
            continue
        pieces.sort()
        bands.append(Band(pieces[0][0], pieces[0][1], pieces[-1][2], pieces[-1][3]))
    return bands


def threshold_marks(thresholds: list[dict[str, Any]] | None) -> list[str]:
    """The shape of each threshold's band, as `threshold_status` and a table's cells show it: ▲ for the band that
    runs up without end, ▼ for the one that runs down, ● for a single value, and a shape of its own for each band
    between two thresholds ("" for a threshold that never matches)."""
    marks, between = [], iter(BETWEEN * (1 + len(thresholds or []) // len(BETWEEN)))
    for band in threshold_bands(thresholds):
        shape = band.shape()
        marks.append(next(between) if shape == BETWEEN[0] else shape)
    return marks


def threshold_status(value: Any, thresholds: list[dict[str, Any]] | None, fmt: str | None) -> str:
    """The met threshold in words and its shape ("▲ at or above 95.0%"), so the status does not rest on colour alone."""
    met = threshold_met(value, thresholds)
    if met is None:
        return ""
    i = (thresholds or []).index(met)
    return f"{threshold_marks(thresholds)[i]} {threshold_bands(thresholds)[i].words(fmt)}"


# --------------------------------------------------------------------------- HTML


def escape(value: Any) -> str:
    return html.escape(str(value), quote=True)
