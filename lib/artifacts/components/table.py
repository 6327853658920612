"""Table: its query's rows as display strings, with per-column labels, formats and threshold colours.

Spec: `query`, `max_rows` (at most the output constraints' rows per query),
`columns: {column: {label, format, thresholds}}`. A cell that meets a
threshold gets its colour and the threshold's shape, and the legend says what
each shape means.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from ...core.formats import format_value, readable_text_on
from .base import COLOR_RE, STATUS_MARKS, Component, ComponentKind, FieldRef, RenderContext, Spec, escape, threshold_met, threshold_status

NAME = "table"


def new(cid: str, title: str, query: str, *, max_rows: int | None = None, columns: dict[str, Any] | None = None) -> dict[str, Any]:
    """A table's spec."""
    spec: dict[str, Any] = {"id": cid, "type": NAME, "title": title, "query": query}
    if max_rows is not None:
        spec["max_rows"] = max_rows
    if columns:
        spec["columns"] = columns
    return spec


# --------------------------------------------------------------------------- render


def render(comp: Component, ctx: RenderContext) -> None:
    spec = comp.spec
    comp.result = result = ctx.run(spec["query"], min(ctx.max_rows, int(spec.get("max_rows", ctx.max_rows))))
    columns_spec = {k.lower(): v for k, v in (spec.get("columns") or {}).items()}
    raw = result.table.to_pylist()
    display_rows = []
    for i, row in enumerate(raw):
        shown = {}
        for col in result.columns:
            conf = columns_spec.get(col.lower(), {})
            value = row[col]
            fmt = conf.get("format") or (ctx.formats.get("default") if isinstance(value, float) else None)
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


# --------------------------------------------------------------------------- what the checks read


def fields(spec: Spec, columns: list[str]) -> list[FieldRef]:
    return [FieldRef(column, ("columns", column), None, "column") for column in spec.get("columns") or {}]


def prose(spec: Spec) -> list[tuple[tuple, str]]:
    """Column labels."""
    return [(("columns", column, "label"), conf.get("label", "")) for column, conf in (spec.get("columns") or {}).items()]


def rule_values(spec: Spec) -> list[float]:
    return [float(t["value"]) for conf in (spec.get("columns") or {}).values() for t in conf.get("thresholds") or []]


def threshold_places(spec: Spec, target: str, columns_of) -> list[tuple[tuple, Any]]:
    """A table shows a field when it configures that column, or when its query returns it."""
    columns = {k.lower(): v for k, v in (spec.get("columns") or {}).items()}
    shown = target in columns or target in [c.lower() for c in columns_of(spec["query"]) or []]
    return [(("columns",), (columns.get(target) or {}).get("thresholds"))] if shown else []


# --------------------------------------------------------------------------- HTML export


def to_html(comp: Component, chart_specs: list[dict[str, Any]]) -> str:
    frame = comp.frame
    numeric = _numeric_labels(comp)
    head = "".join(f"<th{_number_class(label, numeric)}>{escape(label)}</th>" for label in frame.columns)
    body_rows = []
    for position, values in enumerate(frame.itertuples(index=False, name=None)):
        cells = []
        for label, value in zip(frame.columns, values):
            background = comp.cell_colors.get((position, label))
            style = f' style="background: {background}; color: {readable_text_on(background)}"' if background and COLOR_RE.match(background) else ""
            cells.append(f"<td{_number_class(label, numeric)}{style}>{escape(value)}</td>")
        body_rows.append("<tr>" + "".join(cells) + "</tr>")
    notes = ""
    if not body_rows:
        notes = '<p class="note">No rows.</p>'
    elif comp.result is not None and comp.result.truncated:
        notes = f'<p class="note">Showing the first {len(body_rows):,} rows.</p>'
    return f'<div class="table-scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body_rows)}</tbody></table></div>{notes}'


def _numeric_labels(comp: Component) -> set[str]:
    """Labels of the table's number columns, right-aligned. Frame columns follow the query's columns in order."""
    if comp.result is None:
        return set()
    return {
        label
        for label, field in zip(comp.frame.columns, comp.result.table.schema)
        if pa.types.is_integer(field.type) or pa.types.is_floating(field.type) or pa.types.is_decimal(field.type)
    }


def _number_class(label: str, numeric: set[str]) -> str:
    return ' class="number"' if label in numeric else ""


KIND = ComponentKind(NAME, render, to_html, fields=fields, prose=prose, rule_values=rule_values, threshold_places=threshold_places)
