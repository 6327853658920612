"""A live table's stand-in in the snapshot, and the rule that no query answers from one.

A `sql` source with `mode: live` is never copied: its table in the snapshot is
empty, with the columns the database's catalogue reports (`live.catalogue_table`),
so binding, checks and the model see the workspace's shape. Counting or summing
that stand-in would answer 0 or NULL, silently. So the stand-in says what it
is, in its Arrow schema metadata (`mark`, kept in the snapshot file), and the
snapshot path (`queries.run_query`, hence `Warehouse.query` and the render
cache) refuses a query that names one (`refuse`), in one plain sentence. The
query engine (`lib.data.engine`) sends such a query to the table's database
before it ever gets there.

`tables_named` (which tables a DuckDB query reads) lives here, below both.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Mapping

import pyarrow as pa

from ..core import settings
from .sandbox import QueryError, QueryRefused, first_line

if TYPE_CHECKING:
    from sqlglot import exp

LIVE_KEY = b"dashmem.live_source"


class StandInRefused(QueryRefused):
    """A query over the snapshot named a live source's stand-in, which holds no rows."""


def mark(table: pa.Table, source: str) -> pa.Table:
    """The table marked as the stand-in of live source `source` (its other metadata kept)."""
    metadata = dict(table.schema.metadata or {})
    metadata[LIVE_KEY] = source.encode()
    return table.replace_schema_metadata(metadata)


def source_of(table: Any) -> str | None:
    """The live source a table stands in for; None for a table holding its rows."""
    metadata = getattr(getattr(table, "schema", None), "metadata", None) or {}
    raw = metadata.get(LIVE_KEY)
    return raw.decode("utf-8", "replace") if raw is not None else None


def refuse(tables: Mapping[str, Any], sql: str) -> None:
    """Refuse `sql` over `tables` when it reads a live source's stand-in: its answer would be made up."""
    standing = {name.lower(): name for name, table in tables.items() if source_of(table) is not None}
    if not standing or not any(re.search(rf"\b{re.escape(name)}\b", sql, re.IGNORECASE) for name in standing.values()):
        return  # the common case costs a metadata look-up per table, and never parses
    named = sorted(standing[t] for t in tables_named(sql) if t in standing)
    if named:
        which = ", ".join(named)
        raise StandInRefused(
            f"{which} {'is a live source' if len(named) == 1 else 'are live sources'}: the snapshot holds only the columns, "
            f"the rows are in the database; this query was not run on the snapshot (run it through the dashboard, Explore or `{settings.COMMAND} query`)"
        )


def tables_named(sql: str) -> set[str]:
    """The tables a DuckDB query reads, without its own CTE names; lower-cased as DuckDB resolves them."""
    tree = parse(sql)
    from sqlglot import exp

    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    return {t.name.lower() for t in tree.find_all(exp.Table) if t.name and t.name.lower() not in ctes}


def parse(sql: str) -> exp.Expr:
    """The DuckDB query's syntax tree; a QueryError in one line when it does not parse."""
    import sqlglot
    from sqlglot.errors import ParseError

    try:
        tree = sqlglot.parse_one(sql, read="duckdb")
    except ParseError as exc:
        raise QueryError(f"SQL syntax error: {first_line(exc)}") from None
    if tree is None:
        raise QueryError("the query is empty")
    return tree
