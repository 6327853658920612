"""report.yaml: a document read top to bottom and printed: parameters, named queries, sections in reading order."""

from __future__ import annotations

import difflib
from typing import Any

from ...core.diagnostics import ERROR, Diagnostic, format_path
from ..changes import Category, Change, mapping, same_sql, short
from ..shapes import report_components
from ..yamlio import Document
from .base import Kind, artifact_changes, unique


def unique_report_ids(doc: Document, shown: str) -> list[Diagnostic]:
    """A report's KPI cards, charts and tables share one id space, as a dashboard's components do."""
    seen: dict[Any, tuple] = {}
    out = []
    for where, spec in report_components(doc.data):
        value, path = spec.get("id"), where + ("id",)
        if value in seen:
            out.append(
                Diagnostic(
                    "component id.duplicate",
                    ERROR,
                    f"duplicate component id {value!r} (first at {format_path(seen[value])})",
                    shown,
                    doc.line_of(path),
                    format_path(path),
                    "a unique id",
                )
            )
        else:
            seen[value] = where
    return out


REPORT = Category(
    "report",
    "Report",
    6,
    "report",
    {
        "added": "report component {id} added: {new}",
        "removed": "report component {id} removed (was {old})",
        "requery": "report component {id} runs different SQL: {old} -> {new}",
        "changed": "report component {id} changed: {old} -> {new}",
        "filter_added": "report parameter {id} added: {new}",
        "filter_removed": "report parameter {id} removed (was {old})",
        "filter_changed": "report parameter {id} changed: {old} -> {new}",
        "title": "report {id}: {old} -> {new}",
        "query_added": "report query {id} added: {new}",
        "query_removed": "report query {id} removed (was {old})",
        "query_changed": "report query {id} runs different SQL: {old} -> {new}",
        "reworded": "report {id} reworded: {old} -> {new}",
        "section_added": "report section {id} added at sections[{new}]",  # old and new: positions in `sections`
        "section_removed": "report section {id} removed from sections[{old}]",
        "section_moved": "report section {id} moved: sections[{old}] -> sections[{new}]",
    },
)


def report_changes(old: Any, new: Any) -> list[Change]:
    """report.yaml: its components and parameters as a dashboard's are compared; its named queries;
    its sections aligned (`_section_changes`): added, removed, moved, headings and prose reworded."""

    old, new = mapping(old), mapping(new)

    def as_dashboard(report: dict) -> dict:
        return {
            "title": report.get("title"),
            "description": report.get("description"),
            "components": [spec for _, spec in report_components(report)],
            "filters": report.get("parameters"),
        }

    out = artifact_changes(as_dashboard(old), as_dashboard(new), REPORT)
    qa, qb = mapping(old.get("queries")), mapping(new.get("queries"))
    out += [REPORT.change("query_added", name, None, qb[name]) for name in qb if name not in qa]
    out += [REPORT.change("query_removed", name, qa[name], None) for name in qa if name not in qb]
    out += [REPORT.change("query_changed", name, qa[name], qb[name]) for name in qa if name in qb and not same_sql(qa[name], qb[name])]
    return out + _section_changes(old, new)


def _section_changes(old: dict, new: dict) -> list[Change]:
    """The document's outline, aligned section by section (difflib), so one inserted heading is one change
    and not a shifted outline: sections added, removed or moved; headings and prose reworded in place.

    A chart, table or KPI row that comes or goes is already a component added or removed;
    here it is named only when it moves.
    """
    a, b = _outline(old), _outline(new)
    matcher = difflib.SequenceMatcher(a=[key for key, _, _ in a], b=[key for key, _, _ in b], autojunk=False)
    out: list[Change] = []
    gone: list[int] = []  # positions in `a` of sections no longer where they were
    came: list[int] = []  # positions in `b` of sections new where they are
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        kinds_a, kinds_b = [a[i][1] for i in range(i1, i2)], [b[j][1] for j in range(j1, j2)]
        if tag == "replace" and kinds_a == kinds_b and set(kinds_a) <= {"heading", "prose"}:
            out += [REPORT.change("reworded", f"{b[j][1]} sections[{j}]", a[i][2], b[j][2]) for i, j in zip(range(i1, i2), range(j1, j2))]
            continue
        gone += range(i1, i2)
        came += range(j1, j2)
    for j in came:
        key, kind, says = b[j]
        i = next((i for i in gone if a[i][0] == key), None)
        if i is not None:
            gone.remove(i)
            out.append(REPORT.change("section_moved", _section_label(kind, says), i, j))
        elif kind in _PLAIN_SECTIONS:
            out.append(REPORT.change("section_added", _section_label(kind, says), None, j))
    out += [REPORT.change("section_removed", _section_label(a[i][1], a[i][2]), i, None) for i in gone if a[i][1] in _PLAIN_SECTIONS]
    return out


_PLAIN_SECTIONS = ("heading", "prose", "page_break")  # the sections that are no component (they have no id)


def _section_label(kind: str, says: Any) -> str:
    """ "heading 'Overview'", "prose 'Week {{week.week}} …'", "chart daily", "page_break"."""
    if says is None:
        return kind
    return f"{kind} {short(says, 60)}" if kind in ("heading", "prose") else f"{kind} {says}"


def _outline(report: dict) -> list[tuple[str, str, Any]]:
    """Each section as (key, type, what it says): a heading's text, prose's markdown, a component's id
    (a KPI row's card ids). The key is what aligns one version's sections with the other's."""
    sections = report.get("sections")
    out: list[tuple[str, str, Any]] = []
    for s in sections if isinstance(sections, list) else []:
        s = mapping(s)
        kind = str(s.get("type", "?"))
        if kind == "kpis":
            cards = s.get("components")
            says: Any = ", ".join(str(mapping(c).get("id")) for c in cards) if isinstance(cards, list) else None
        elif kind in ("heading", "prose"):
            says = s.get("text") if kind == "heading" else s.get("markdown")
        else:
            says = s.get("id")
        out.append((f"{kind}\0{says}", kind, says))
    return out


KIND = Kind(
    name="report",
    file="report.yaml",
    schema="report.schema.json",
    required=False,
    checks=(unique_report_ids, unique("parameters", "id", "filter id")),
    diff=report_changes,
    review=REPORT,
    model_heading="Current report (report.yaml). Refine it with edit_report, changing only what the request asks.",
    model_empty="",  # an empty report is not shown
)
