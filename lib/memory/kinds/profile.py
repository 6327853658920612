"""profile.yaml: what the loaded data looks like (tables, columns, types, statistics), written by `profile --write`.

Review summarises it by shape only (tables and columns added, removed or retyped): its figures
change on every refresh and say nothing a reviewer decides on. The model sees it compact and held
to a token budget (lib/chat/compose.py and lib/data/profile.py do that).
"""

from __future__ import annotations

from typing import Any

from ...core import settings
from ..changes import Category, Change, by_key, keyed_diff, mapping
from .base import Kind, unique

SHAPE = Category(
    "profile",
    "Data profile",
    7,
    "profile",
    {
        "table_added": "profile: table {id} added",
        "table_removed": "profile: table {id} removed",
        "column_added": "profile: column {id} added ({new})",
        "column_removed": "profile: column {id} removed (was {old})",
        "retyped": "profile: column {id} type {old} -> {new}",
    },
)


def profile_changes(old: Any, new: Any) -> list[Change]:
    """profile.yaml by shape only: tables and columns added, removed or retyped; never its figures."""
    a, b = by_key(mapping(old).get("tables"), "name"), by_key(mapping(new).get("tables"), "name")
    added, removed, kept = keyed_diff(a, b)
    out = [SHAPE.change("table_added", t, None, None) for t in added]
    out += [SHAPE.change("table_removed", t, None, None) for t in removed]
    for t in kept:
        ca, cb = by_key(a[t].get("columns"), "name"), by_key(b[t].get("columns"), "name")
        cols_added, cols_removed, cols_kept = keyed_diff(ca, cb)
        out += [SHAPE.change("column_added", f"{t}.{c}", None, cb[c].get("type")) for c in cols_added]
        out += [SHAPE.change("column_removed", f"{t}.{c}", ca[c].get("type"), None) for c in cols_removed]
        out += [SHAPE.change("retyped", f"{t}.{c}", ca[c].get("type"), cb[c].get("type")) for c in cols_kept if ca[c].get("type") != cb[c].get("type")]
    return out


KIND = Kind(
    name="profile",
    file="profile.yaml",
    schema="profile.schema.json",
    required=False,
    checks=(unique("tables", "name", "table"),),
    diff=profile_changes,
    review=SHAPE,
    model_heading="Data profile (profile.yaml, compact; tables you can query)",
    model_empty=f"No data profile yet: the workspace has no loaded data (connect a source, refresh, then `{settings.COMMAND} profile PATH --write`).",
    model_empty_heading="Data profile",
)
