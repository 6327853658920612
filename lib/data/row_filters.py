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

The data profile a filtered user's chat sends to the model is theirs too (`lib.data.row_profile`).
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

from .sandbox import QueryRefused


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
