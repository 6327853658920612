"""dashboard.yaml: the dashboard spec: filters, components (each with its SQL), layout."""

from __future__ import annotations

from typing import Any

from ...core.diagnostics import ERROR, Diagnostic, format_path
from ..changes import Category, Change, by_key, keyed_diff, mapping, same_sql
from ..yamlio import Document
from .base import Kind, unique


def layout_references(doc: Document, shown: str) -> list[Diagnostic]:
    ids = {c.get("id") for c in doc.data.get("components") or []}
    out = []
    for r, row in enumerate(doc.data.get("layout") or []):
        for c, cell in enumerate(row):
            ref = cell if isinstance(cell, str) else cell.get("id")
            path = ("layout", r, c)
            if ref not in ids:
                out.append(
                    Diagnostic(
                        "layout.unknown_component",
                        ERROR,
                        f"layout names unknown component {ref!r}",
                        shown,
                        doc.line_of(path),
                        format_path(path),
                        ", ".join(sorted(i for i in ids if i)),
                    )
                )
    return out


DASHBOARD = Category(
    "dashboard",
    "Dashboard",
    5,
    "component",
    {
        "added": "component {id} added: {new}",
        "removed": "component {id} removed (was {old})",
        "requery": "component {id} runs different SQL: {old} -> {new}",
        "changed": "component {id} changed: {old} -> {new}",
        "filter_added": "filter {id} added: {new}",
        "filter_removed": "filter {id} removed (was {old})",
        "filter_changed": "filter {id} changed: {old} -> {new}",
        "title": "dashboard {id}: {old} -> {new}",
        "layout": "dashboard layout changed",
    },
)


def dashboard_changes(old: Any, new: Any, category: Category = DASHBOARD) -> list[Change]:
    """dashboard.yaml: components added, removed or requerying (their SQL changed), other edits; filters; title; layout.

    A report's components and parameters are compared the same way, reported under its own `category`.
    """
    old, new = mapping(old), mapping(new)
    out: list[Change] = []
    for field in ("title", "description"):
        if old.get(field) != new.get(field):
            out.append(category.change("title", field, old.get(field), new.get(field)))
    a, b = by_key(old.get("components"), "id"), by_key(new.get("components"), "id")
    added, removed, kept = keyed_diff(a, b)
    label = lambda c: f"{c.get('type', '?')} {c.get('title') or ''}".strip()  # noqa: E731
    out += [category.change("added", cid, None, label(b[cid])) for cid in added]
    out += [category.change("removed", cid, label(a[cid]), None) for cid in removed]
    for cid in kept:
        before, after = a[cid], b[cid]
        for sql_field in ("query", "queries"):
            if not same_sql(before.get(sql_field), after.get(sql_field)):
                out.append(category.change("requery", cid, before.get(sql_field), after.get(sql_field)))
        rest = sorted(k for k in {*before, *after} - {"query", "queries"} if before.get(k) != after.get(k))
        if rest:
            out.append(category.change("changed", cid, {k: before.get(k) for k in rest}, {k: after.get(k) for k in rest}))
    fa, fb = by_key(old.get("filters"), "id"), by_key(new.get("filters"), "id")
    added, removed, kept = keyed_diff(fa, fb)
    out += [category.change("filter_added", fid, None, fb[fid].get("label") or fb[fid].get("type")) for fid in added]
    out += [category.change("filter_removed", fid, fa[fid].get("label") or fa[fid].get("type"), None) for fid in removed]
    for fid in kept:
        if fa[fid] != fb[fid]:
            fields = sorted(k for k in {*fa[fid], *fb[fid]} if fa[fid].get(k) != fb[fid].get(k))
            out.append(category.change("filter_changed", fid, {k: fa[fid].get(k) for k in fields}, {k: fb[fid].get(k) for k in fields}))
    if old.get("layout") != new.get("layout") and old.get("layout") is not None and new.get("layout") is not None:
        out.append(category.change("layout", "layout"))
    return out


KIND = Kind(
    name="dashboard",
    file="dashboard.yaml",
    schema="dashboard.schema.json",
    required=False,
    checks=(unique("components", "id", "component id"), unique("filters", "id", "filter id"), layout_references),
    diff=dashboard_changes,
    review=DASHBOARD,
    model_heading="Current dashboard (dashboard.yaml). Refine this spec: write it back whole, changed only where the request asks.",
    model_empty="",  # an empty dashboard is not shown
)
