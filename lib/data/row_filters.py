"""Row-level access: the rows of a filtered table a user may see, applied by the query engine to every query.

workspace.yaml's `row_filters: [{table: gates, column: site, attribute: site}]` keeps a user to the rows
of `gates` whose `site` is one of the values of their attribute `site` (the users file's `attributes:`,
their own and their groups', `lib.roles.auth.attributes_of`). The roles in `row_filter_bypass` (owners and
stewards by default) and the command line's operator see every row. A table without a rule is
unfiltered; a user without the attribute sees no row of a filtered table, and `RowScope.notes` says why.

The filter is not a WHERE clause added to the query's text, which an alias, a subquery, a CTE, a join, a
UNION or a table function could step around: the engine substitutes the table itself.

- Snapshot: the worker is handed, under the table's own name, a filtered copy of the Arrow table
  (`RowScope.apply`, made once per table and scope and spilled to the worker once), so the other rows
  are simply not in the database the query runs in.
- Live: every reference to the table in the pushed-down SQL becomes `(SELECT * FROM real WHERE column
  IN (:p0, :p1))`, its values bound parameters of the driver (`lib.data.live.transpile`).

The engine keys its caches on `RowScope.key`, so one user's cached result is never served to another
whose rows differ.

The data profile a filtered user's chat sends to the model (`scoped_profile`) is theirs too: a snapshot
table's is computed again on their rows; a live table's keeps only its column names, types and meanings,
its row count and every value left out, as the rows behind them are in the database.
"""

from __future__ import annotations

import hashlib
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from ..roles.access import OPERATOR, OWNER, STEWARD, User, role_of
from . import live
from .profile import profile_table
from .sandbox import QueryRefused

DEFAULT_BYPASS = (OWNER, STEWARD)


@dataclass(frozen=True)
class Rule:
    """One filtered table: its rows whose `column` is one of `values`; `values` None when the user lacks `attribute`."""

    table: str
    column: str
    attribute: str
    values: tuple[str, ...] | None


@dataclass(frozen=True)
class RowScope:
    """The row filters that hold for one user in one workspace."""

    who: str
    rules: tuple[Rule, ...]

    @property
    def key(self) -> str:
        """What a cache keys on: equal for two users who see the same rows."""
        text = repr(sorted((r.table.lower(), r.column, r.values) for r in self.rules))
        return "rows:" + hashlib.sha256(text.encode()).hexdigest()[:16]

    def rule_for(self, table: str) -> Rule | None:
        for rule in self.rules:
            if rule.table.lower() == table.lower():
                return rule
        return None

    def notes(self) -> list[str]:
        """A plain sentence per filtered table the user sees no row of because an attribute is missing."""
        return [
            f"{self.who} sees no rows of {r.table}: rows are shown by {r.column} against the user attribute "
            f"{r.attribute!r}, which {self.who} does not have; ask an owner to add it to the users file"
            for r in self.rules
            if not r.values
        ]

    def held(self) -> list[str]:
        """What the user is shown of each filtered table they see rows of: "gates whose site is Brno or Porto"."""
        return [f"{r.table} whose {r.column} is {' or '.join(r.values)}" for r in self.rules if r.values]

    def apply(self, tables: Mapping[str, pa.Table]) -> dict[str, pa.Table]:
        """`tables` with each filtered one replaced by its copy holding only the user's rows."""
        out = dict(tables)
        for name, table in tables.items():
            rule = self.rule_for(name)
            if rule is not None:
                out[name] = _filtered(table, name, rule)
        return out

    def live_where(self, table: str) -> tuple[str, tuple[str, ...]] | None:
        """(column, values) a live query of `table` is held to, None when it is unfiltered."""
        rule = self.rule_for(table)
        return None if rule is None else (rule.column, rule.values or ())


def scope_for(user: User | None, files: Mapping[str, Any]) -> RowScope | None:
    """The row filters `user` is held to in the workspace whose memory is `files`; None when they see every row
    (no rule, the operator, or a role that bypasses them)."""
    meta = files.get("workspace") or {}
    rules = meta.get("row_filters") or []
    if user is None or user is OPERATOR or not rules:
        return None
    bypass = meta.get("row_filter_bypass", list(DEFAULT_BYPASS))
    if role_of(user, meta) in bypass:
        return None
    attributes = dict(user.attributes)
    return RowScope(user.name, tuple(Rule(r["table"], r["column"], r["attribute"], attributes.get(r["attribute"])) for r in rules))


# --------------------------------------------------------------------------- the snapshot side's filtered copies

_COPIES: OrderedDict[tuple[int, str, str, tuple[str, ...] | None], tuple[Any, pa.Table]] = OrderedDict()
_LOCK = threading.Lock()
_KEEP = 64


def _filtered(table: pa.Table, name: str, rule: Rule) -> pa.Table:
    key = (id(table), rule.column, name, rule.values)
    with _LOCK:
        hit = _COPIES.get(key)
        if hit is not None and hit[0]() is table:
            _COPIES.move_to_end(key)
            return hit[1]
    if rule.column not in table.column_names:
        raise QueryRefused(
            f"the row filter on {name} names column {rule.column!r}, which {name} does not have; "
            "nothing of it is shown until an owner corrects row_filters in workspace.yaml"
        )
    if not rule.values or table.num_rows == 0:
        copy = table.slice(0, 0)
    else:
        column = table.column(rule.column)
        try:
            allowed = pa.array(list(rule.values)).cast(column.type)
            mask = pc.is_in(column, value_set=allowed)  # pyright: ignore[reportAttributeAccessIssue]  # kernels made at import: no stubs
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            mask = pc.is_in(pc.cast(column, pa.string()), value_set=pa.array(list(rule.values)))  # pyright: ignore[reportAttributeAccessIssue]  # kernels made at import: no stubs
        copy = table.filter(pc.fill_null(mask, False))
    copy = copy.replace_schema_metadata(table.schema.metadata)
    with _LOCK:
        _COPIES[key] = (weakref.ref(table), copy)
        while len(_COPIES) > _KEEP:
            _COPIES.popitem(last=False)
    return copy


# --------------------------------------------------------------------------- the data profile a filtered user's model sees

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
            shown.append(_reprofiled(entry, _filtered(table, entry["name"], rule), sample_values))
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
