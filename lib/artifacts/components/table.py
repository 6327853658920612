"""Table: its query's rows as display strings, with per-column labels, formats and threshold colours.

Spec: `query`, `max_rows` (at most the output constraints' rows per query),
`columns: {column: {label, format, thresholds}}`. A cell that meets a
threshold gets its colour and the threshold's shape, and the legend says what
each shape means.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ...core.formats import format_value, readable_text_on
from .base import COLOR_RE, Component, ComponentKind, FieldRef, RenderContext, Spec, escape, threshold_bands, threshold_marks, threshold_met

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


@dataclass(frozen=True)
class Shown:
    """A table as it shows: its column labels, then its rows of display strings in the query's column order.

    Plain lists, so the export writes a table without pandas; the page makes a DataFrame of it (`to_pandas`).
    """

    columns: list[str]
    rows: list[tuple[str, ...]]

    def __len__(self) -> int:
        return len(self.rows)

    def column(self, label: str) -> list[str]:
        """The cells under a label (the first column with it)."""
        at = self.columns.index(label)
        return [row[at] for row in self.rows]

    def to_pandas(self):
        import pandas as pd

        return pd.DataFrame(self.rows, columns=self.columns)


def render(comp: Component, ctx: RenderContext) -> None:
    spec = comp.spec
    comp.result = result = ctx.run(spec["query"], min(ctx.max_rows, int(spec.get("max_rows", ctx.max_rows))))
    columns_spec = {k.lower(): v for k, v in (spec.get("columns") or {}).items()}
    raw = result.table.to_pylist()
    labels = [columns_spec.get(c.lower(), {}).get("label", c) for c in result.columns]
    display_rows = []
    marked: dict[str, set[int]] = {}  # column -> the thresholds its cells met
    for i, row in enumerate(raw):
        shown: dict[str, str] = {}
        for col in result.columns:
            conf = columns_spec.get(col.lower(), {})
            label = conf.get("label", col)
            value = row[col]
            fmt = conf.get("format") or (ctx.formats.get("default") if isinstance(value, float) else None)
            shown[label] = format_value(value, fmt)
            met = threshold_met(value, conf.get("thresholds")) if isinstance(value, (int, float)) else None
            if met:
                comp.cell_colors[(i, label)] = met["color"]
                # The threshold's shape beside the number: the status must not rest on colour alone.
                index = conf["thresholds"].index(met)
                shown[label] = f"{threshold_marks(conf['thresholds'])[index]} {shown[label]}"
                marked.setdefault(col, set()).add(index)
        display_rows.append(tuple(shown[label] for label in labels))
    comp.legend = legend(spec, result.columns, marked, ctx.formats)
    comp.shown = Shown(labels, display_rows)


def legend(spec: Spec, columns: list[str], marked: dict[str, set[int]], formats: Any) -> dict[str, str]:
    """What each shape in the table means ("▲" -> "Attainment at or above 95.0%"), for the shapes its cells show,
    column by column in the thresholds' order; a shape two columns use says both meanings."""
    columns_spec = {k.lower(): v for k, v in (spec.get("columns") or {}).items()}
    out: dict[str, str] = {}
    for col in columns:
        conf = columns_spec.get(col.lower(), {})
        thresholds = conf.get("thresholds") or []
        bands, marks = threshold_bands(thresholds), threshold_marks(thresholds)
        fmt = conf.get("format") or (formats.get("default") if any(isinstance(t["value"], float) for t in thresholds) else None)
        for index in sorted(marked.get(col, ())):
            meaning = f"{conf.get('label', col)} {bands[index].words(fmt)}"
            out[marks[index]] = f"{out[marks[index]]}; {meaning}" if marks[index] in out else meaning
    return out


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
    shown = comp.shown
    numeric = _numeric_labels(comp)
    head = "".join(f"<th{_number_class(label, numeric)}>{escape(label)}</th>" for label in shown.columns)
    body_rows = []
    for position, values in enumerate(shown.rows):
        cells = []
        for label, value in zip(shown.columns, values):
            background = comp.cell_colors.get((position, label))
            style = f' style="background: {background}; color: {readable_text_on(background)}"' if background and COLOR_RE.match(background) else ""
            cells.append(f"<td{_number_class(label, numeric)}{style}>{escape(value)}</td>")
        body_rows.append("<tr>" + "".join(cells) + "</tr>")
    notes = f'<p class="note legend">{escape(legend_text(comp))}</p>' if comp.legend and body_rows else ""
    if not body_rows:
        notes = '<p class="note">No rows.</p>'
    elif comp.result is not None and comp.result.truncated:
        notes += f'<p class="note">Showing the first {len(body_rows):,} rows.</p>'
    return f'<div class="table-scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body_rows)}</tbody></table></div>{notes}'


def legend_text(comp: Component) -> str:
    """The legend in one line, as the Dashboard and the exports show it under the table."""
    return " · ".join(f"{mark} {meaning}" for mark, meaning in comp.legend.items())


def _numeric_labels(comp: Component) -> set[str]:
    """Labels of the table's number columns, right-aligned. Shown columns follow the query's columns in order."""
    if comp.result is None:
        return set()
    return {
        label
        for label, field in zip(comp.shown.columns, comp.result.table.schema)
        if pa.types.is_integer(field.type) or pa.types.is_floating(field.type) or pa.types.is_decimal(field.type)
    }


def _number_class(label: str, numeric: set[str]) -> str:
    return ' class="number"' if label in numeric else ""


KIND = ComponentKind(NAME, render, to_html, fields=fields, prose=prose, rule_values=rule_values, threshold_places=threshold_places)
