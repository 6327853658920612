"""A live source's change marker: the database's own word on whether the table's data changed.

A live table's stand-in in the snapshot is empty, so without a marker the data
version (the snapshot id) moves only when the table's columns do and cached
live results stay until their `cache_ttl_s` runs out. With
`change_marker: {max: COLUMN}`, `{row_count: true}` or `{query: "SELECT ..."}`
each refresh evaluates the marker in the database, through the same route as a
dashboard query (`live.run`: the sandbox's single-SELECT rule, transpiled,
read-only, time-limited), and records the value in the stand-in's Arrow schema
metadata. Refresh compares it with the served one (`same`): a new value makes a
new snapshot, hence a new data version, and every cached result of the old one
is passed over at once; the same value keeps the served snapshot.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Mapping

import pyarrow as pa

from . import live
from .sandbox import QueryError, quote_ident

if TYPE_CHECKING:
    from .connectors.base import FetchContext

METADATA_KEY = b"dashmem.change_marker"
TIMEOUT_S = 30.0  # a marker is one small aggregate; a slow one should fail the refresh, not hang it


def marker_sql(source: Mapping[str, Any]) -> str:
    """The marker as a DuckDB query over the source's name, as a dashboard query would read it."""

    marker = source["change_marker"]
    table = quote_ident(source["name"])
    if "max" in marker:
        return f"SELECT max({quote_ident(marker['max'])}) AS marker FROM {table}"
    if marker.get("row_count"):
        return f"SELECT count(*) AS marker FROM {table}"
    return marker["query"]


def describe(source: Mapping[str, Any]) -> str:
    """How the marker reads in a report: `max(updated_at)`, `row count`, `query`."""
    marker = source["change_marker"]
    if "max" in marker:
        return f"max({marker['max']})"
    return "row count" if marker.get("row_count") else "query"


def evaluate(source: Mapping[str, Any], ctx: FetchContext) -> str:
    """The marker's value now, as JSON text of its first row (`[]` when the query returns none)."""

    try:
        result = live.run(source, marker_sql(source), {}, max_rows=1, timeout_s=TIMEOUT_S, workspace_path=ctx.workspace_path)
    except QueryError as exc:
        raise ctx.error(source["name"], f"change_marker {describe(source)}: {exc}") from None
    return json.dumps([list(row) for row in result.rows][:1], default=str)


def attach(table: pa.Table, value: str | None) -> pa.Table:
    """The table with the marker's value in its schema metadata (kept in the snapshot file)."""
    metadata = {k: v for k, v in (table.schema.metadata or {}).items() if k != METADATA_KEY}
    if value is not None:
        metadata[METADATA_KEY] = value.encode()
    return table.replace_schema_metadata(metadata or None)


def recorded(table: pa.Table | None) -> str | None:
    """The marker value a table was stored with; None for a table without one."""
    raw = (table.schema.metadata or {}).get(METADATA_KEY) if table is not None else None
    return raw.decode("utf-8", "replace") if raw is not None else None


def same(new: pa.Table, old: pa.Table) -> bool:
    """Whether two tables carry the same marker (both none included)."""
    return recorded(new) == recorded(old)
