"""KPI card: one value from the first row of its query, formatted, coloured by its thresholds, with a delta.

Spec: `query` (one row), `value_column` (else the column named `value`, else
the first), `compare_column` with `delta: absolute | relative | none` and
`compare_label` (the delta reads "+3.1% vs last week"; without it, the compare
column's name), `format` and `thresholds: [{op, value, color}]`.
"""

from __future__ import annotations

from typing import Any

from ...core.formats import format_value
from .base import COLOR_RE, Component, ComponentKind, FieldRef, RenderContext, Spec, escape, result_column, threshold_color, threshold_status

NAME = "kpi"


def new(cid: str, title: str, query: str, *, format: str | None = None, thresholds: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A KPI card's spec."""
    spec: dict[str, Any] = {"id": cid, "type": NAME, "title": title, "query": query}
    if format is not None:
        spec["format"] = format
    if thresholds:
        spec["thresholds"] = thresholds
    return spec


def value_column(spec: Spec, columns: list[str]) -> str | None:
    """The KPI's value: its `value_column`, else the column named `value`, else the first."""
    return spec.get("value_column") or next((c for c in columns if c.lower() == "value"), columns[0] if columns else None)


# --------------------------------------------------------------------------- render


def render(comp: Component, ctx: RenderContext) -> None:
    spec = comp.spec
    comp.result = result = ctx.run(spec["query"])
    if result.table.num_rows == 0:
        comp.display = "—"
        return
    first = result.table.slice(0, 1).to_pylist()[0]
    value_col = result_column(result, spec["value_column"]) if spec.get("value_column") else value_column(spec, result.columns)
    comp.value = first[value_col]
    fmt = spec.get("format") or ctx.formats.get("default")
    comp.display = format_value(comp.value, fmt)
    comp.color = threshold_color(comp.value, spec.get("thresholds"))
    comp.status = threshold_status(comp.value, spec.get("thresholds"), fmt)
    if spec.get("compare_column"):
        comp.compare = first[result_column(result, spec["compare_column"])]
        mode = spec.get("delta", "absolute")
        if comp.compare is not None and comp.value is not None and mode != "none":
            if mode == "relative":
                comp.delta_display = format_value((comp.value - comp.compare) / comp.compare, "+.1%") if comp.compare else ""
            else:
                comp.delta_display = format_value(comp.value - comp.compare, ("+" + fmt) if fmt and fmt[0] not in "+-( " else fmt)
            if comp.delta_display:  # a difference says what it is a difference from
                comp.delta_display += f" vs {compared_with(spec)}"


def compared_with(spec: Spec) -> str:
    """What a KPI's delta compares the value with: its `compare_label`, else its compare column's name in words."""
    return spec.get("compare_label") or " ".join(str(spec.get("compare_column") or "").replace("_", " ").split())


# --------------------------------------------------------------------------- what the checks read


def fields(spec: Spec, columns: list[str]) -> list[FieldRef]:
    return [
        FieldRef(value_column(spec, columns), ("value_column" if spec.get("value_column") else "query",), "kpi", "value column"),
        FieldRef(spec.get("compare_column"), ("compare_column",), "kpi", "compare column"),
    ]


def prose(spec: Spec) -> list[tuple[tuple, str]]:
    """What the delta says it compares with."""
    return [(("compare_label",), spec["compare_label"])] if spec.get("compare_label") else []


def rule_values(spec: Spec) -> list[float]:
    return [float(t["value"]) for t in spec.get("thresholds") or []]


def threshold_places(spec: Spec, target: str, columns_of) -> list[tuple[tuple, Any]]:
    """A KPI shows a field when its id or title mentions it."""
    mentions = target in (spec.get("id") or "").lower() or target in (spec.get("title") or "").lower()
    return [(("thresholds",), spec.get("thresholds"))] if mentions else []


# --------------------------------------------------------------------------- HTML export


def to_html(comp: Component, chart_specs: list[dict[str, Any]]) -> str:
    """The card as the Dashboard draws it: the threshold's colour as a bar (a colour as text would fail its
    contrast: amber on white is 2:1), the value, the delta and what it is compared with, the status in words."""
    bar = f'<div class="kpi-bar" style="background: {comp.color}"></div>' if comp.color and COLOR_RE.match(comp.color) else ""
    delta = f'<div class="kpi-delta">{escape(comp.delta_display)}</div>' if comp.delta_display else ""
    status = f'<div class="kpi-status">{escape(comp.status)}</div>' if comp.status else ""
    return f'{bar}<div class="kpi-value">{escape(comp.display)}</div>{delta}{status}'


KIND = ComponentKind(NAME, render, to_html, fields=fields, prose=prose, rule_values=rule_values, threshold_places=threshold_places)
