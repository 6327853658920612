"""A workspace's data: immutable snapshots on disk, served through a sandboxed DuckDB.

This module is the public facade of two parts:

- `lib.snapshots`, the storage: each refresh writes one new snapshot file
  holding every table (Arrow IPC), renamed into place, so all of a workspace's
  tables change in one step and a failed refresh leaves the last good data
  served; `Warehouse` is one workspace's store (`current`, `write_snapshot`,
  `switch_to`, `mark_checked`, `clean_abandoned`).
- `lib.sandbox`, the queries: dashboards and the model query through
  `Warehouse.query` / `run_query`, on a DuckDB opened with external access
  disabled and its configuration locked (no files, COPY, ATTACH, INSTALL/LOAD),
  in worker processes (`lib.query_worker`). A query must be a single SELECT
  (WITH … SELECT included), returns at most `max_rows` rows and is stopped
  after `timeout_s`.

The exceptions below are the ones both parts raise (they import them from here when they raise them).
"""

from __future__ import annotations

from .errors import DashmemError
from .fsutil import replace_symlink as _point
from .sandbox import (
    DEFAULT_MAX_ROWS,
    DEFAULT_TIMEOUT_S,
    QueryResult,
    bind,
    check_statement,
    describe,
    quote_ident,
    run_query,
    sandbox,
    sandbox_cursor,
)
from .snapshots import (
    _IN_MEMORY,
    _OPENED,
    DURABLE_AFTER_S,
    KEEP_IN_MEMORY_BYTES,
    KEEP_SNAPSHOTS,
    SUFFIX,
    Snapshot,
    Warehouse,
    compact_strings,
)


class QueryError(DashmemError, ValueError):
    """A query was refused or failed; the message says why in user terms."""


class QueryRefused(QueryError):
    """The sandbox refused the statement before running it."""


__all__ = [
    "QueryError",
    "QueryRefused",
    "Warehouse",
    "Snapshot",
    "QueryResult",
    "run_query",
    "bind",
    "check_statement",
    "describe",
    "quote_ident",
    "sandbox",
    "sandbox_cursor",
    "compact_strings",
    "KEEP_SNAPSHOTS",
    "KEEP_IN_MEMORY_BYTES",
    "SUFFIX",
    "DURABLE_AFTER_S",
    "DEFAULT_MAX_ROWS",
    "DEFAULT_TIMEOUT_S",
    "_IN_MEMORY",
    "_OPENED",
    "_point",
]
