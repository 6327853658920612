"""dashboard.yaml: the dashboard spec: filters, components (each with its SQL), layout."""

from __future__ import annotations

from typing import Any

from ...core.diagnostics import ERROR, Diagnostic, format_path
from ..changes import Category, Change
from ..yamlio import Document
from .base import Kind, artifact_changes, unique


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


def dashboard_changes(old: Any, new: Any) -> list[Change]:
    """dashboard.yaml: components added, removed or requerying (their SQL changed), other edits; filters; title; layout."""
    return artifact_changes(old, new, DASHBOARD)


KIND = Kind(
    name="dashboard",
    file="dashboard.yaml",
    schema="dashboard.schema.json",
    required=False,
    checks=(unique("components", "id", "component id"), unique("filters", "id", "filter id"), layout_references),
    diff=dashboard_changes,
    review=DASHBOARD,
    model_heading="Current dashboard (dashboard.yaml). Refine it with edit_dashboard, changing only what the request asks.",
    model_empty="",  # an empty dashboard is not shown
)
