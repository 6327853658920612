"""output.yaml: the output constraints: data injection, theme, number formats, layout, notes; and the theme an
artifact is drawn in (`theme_for`)."""

from __future__ import annotations

from typing import Any, Mapping

from .. import schemas
from ..changes import Category, Change, leaf_changes, mapping
from ..shapes import DashboardSpec, ReportSpec
from .base import Kind

DEFAULT_THEME = schemas.default("output", "theme")  # what output.yaml's theme leaves out

CONSTRAINTS = Category(
    "output",
    "Output constraints",
    3,
    "output",
    {
        "added": "output constraint {id} set to {new}",
        "removed": "output constraint {id} removed (was {old})",
        "changed": "output constraint {id}: {old} -> {new}",
    },
)


def output_changes(old: Any, new: Any) -> list[Change]:
    """output.yaml: each constraint (data injection, theme, formats, layout, notes) old -> new."""
    return leaf_changes(CONSTRAINTS, mapping(old), mapping(new))


def theme_for(dashboard: DashboardSpec | ReportSpec | Mapping[str, Any], output: Mapping[str, Any] | None) -> dict[str, Any]:
    """Defaults, then the workspace theme (output.yaml), then the dashboard's own overrides."""
    return {**DEFAULT_THEME, **((output or {}).get("theme") or {}), **(dashboard.get("theme") or {})}


KIND = Kind(
    name="output",
    file="output.yaml",
    schema="output.schema.json",
    required=True,
    checks=(),
    diff=output_changes,
    review=CONSTRAINTS,
    model_heading="Output constraints (output.yaml)",
    model_empty="No output constraints are set.",
)
