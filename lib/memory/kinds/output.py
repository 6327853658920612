"""output.yaml: the output constraints: data injection, theme, number formats, layout, notes."""

from __future__ import annotations

from typing import Any

from ..changes import Category, Change, leaf_changes, mapping
from .base import Kind

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
