"""The data profile as a user held to some rows may see it (lib.data.row_filters): what their chat sends the model.

A filtered snapshot table is profiled again on the user's rows, so its row count, top values, ranges and
samples are theirs; a filtered live table, whose rows are in its database, keeps its column names, types and
meanings only ("rows": None, no value); a join touching a filtered table loses its overlap, measured on every
row. profile.yaml itself, computed on every row for stewards, is not changed.
"""

from __future__ import annotations

from typing import Any, Mapping

import pyarrow as pa

from . import live
from .profile import profile_table
from .row_filters import RowScope

# What of a profile's table and column tells nothing about its rows; every other field (counts, shares, minima and
# maxima, top and rare values, samples, a join's overlap) is computed from them, so a new field is left out until named here.
_TABLE_SHAPE = ("name", "source")
_COLUMN_SHAPE = ("name", "type", "role", "aggregate")


def scoped_profile(
    doc: Mapping[str, Any] | None, scope: RowScope | None, tables: Mapping[str, pa.Table] | None, files: Mapping[str, Any]
) -> Mapping[str, Any] | None:
    """The profile.yaml content `doc` as the user of `scope` may see it (unchanged for one who sees every row).

    A filtered snapshot table is profiled again on the user's rows (their copy, `RowScope.apply`); a filtered
    live table, whose rows are in its database, and a table whose data is not at hand keep their shape only:
    column names, types and meanings, no row count ("rows": None) and no value. A join touching a filtered table
    loses its overlap, which was measured on every row."""
    if scope is None or not doc or not doc.get("tables"):
        return doc
    lives = live.live_sources(files)
    sources = {s["name"]: s for s in (files.get("sources") or {}).get("sources") or [] if isinstance(s, dict) and "name" in s}
    out = dict(doc)
    shown = []
    for entry in doc["tables"]:
        rule = scope.rule_for(entry["name"])
        if rule is None:
            shown.append(entry)
            continue
        table = (tables or {}).get(entry["name"])
        if table is None or entry["name"] in lives or rule.column not in table.column_names:
            shown.append(_shape_only(entry))
        else:
            sample_values = sources.get(entry["name"], {}).get("sample_values", True)
            shown.append(_reprofiled(entry, scope.apply({entry["name"]: table})[entry["name"]], sample_values))
    out["tables"] = shown
    filtered = {t["name"].lower() for t in doc["tables"] if scope.rule_for(t["name"]) is not None}
    if doc.get("relationships"):
        out["relationships"] = [{k: v for k, v in rel.items() if k != "overlap"} if _touches(rel, filtered) else rel for rel in doc["relationships"]]
    return out


def _shape_only(entry: Mapping[str, Any]) -> dict[str, Any]:
    kept = {k: entry[k] for k in _TABLE_SHAPE if k in entry}
    columns = [{k: c[k] for k in _COLUMN_SHAPE if k in c} for c in entry.get("columns") or []]
    return {**kept, "rows": None, "columns": columns}


def _reprofiled(entry: Mapping[str, Any], rows: pa.Table, sample_values: bool) -> dict[str, Any]:
    """The table's profile computed on `rows`, each column keeping the meaning the stored profile gave it."""
    fresh = profile_table(entry["name"], rows, source=entry.get("source"), sample_values=sample_values)
    meaning = {c["name"]: {k: c[k] for k in ("role", "aggregate") if k in c} for c in entry.get("columns") or []}
    columns = []
    for c in fresh["columns"]:
        column = {k: v for k, v in c.items() if k not in ("role", "aggregate")}
        columns.append({"name": column.pop("name"), "type": column.pop("type"), **meaning.get(c["name"], {}), **column})
    return {**fresh, "columns": columns}


def _touches(rel: Mapping[str, Any], tables: set[str]) -> bool:
    return any(str(rel.get(side, "")).split(".")[0].lower() in tables for side in ("left", "right"))
