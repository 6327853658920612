"""Running a sandboxed SELECT over Arrow tables: checked here, run and bound in a worker process.

Dashboards, the model and viewers query snapshot data through `run_query` (and
check a query with `bind`): the statement must be a single SELECT
(`sandbox.check_statement`), returns at most `max_rows` rows, and runs in a
worker process (`lib.data.query_worker`) that is stopped at the time or memory
limit. A query naming a live source's stand-in is refused (`standins.refuse`):
it holds no rows, so its answer would be made up; `lib.data.engine` sends such
queries to the source's database instead.
"""

from __future__ import annotations

import time
from typing import Any, Mapping

import pyarrow as pa

from . import query_worker, sql_errors, standins
from .coltypes import plain_numbers
from .sandbox import BIND_TIMEOUT_S, DEFAULT_MAX_ROWS, DEFAULT_TIMEOUT_S, QueryError, QueryRefused, QueryResult, check_statement


def run_query(
    tables: Mapping[str, pa.Table], sql: str, params: Mapping[str, Any] | None = None, *, max_rows: int = DEFAULT_MAX_ROWS, timeout_s: float = DEFAULT_TIMEOUT_S
) -> QueryResult:
    """Run one sandboxed SELECT over the given Arrow tables, in a worker process that is
    stopped at `timeout_s` (plus a second) or when it needs more memory than allowed."""
    check_statement(sql)
    standins.refuse(tables, sql)
    if max_rows < 1:
        raise QueryRefused("max_rows must be at least 1")
    start = time.perf_counter()
    try:
        result, truncated = query_worker.run(tables, sql, params, max_rows, timeout_s)
    except query_worker.WorkerError as exc:
        raise failed(str(exc), tables, sql) from None
    result = plain_numbers(result)
    return QueryResult(result, truncated, time.perf_counter() - start, result.column_names)


_BOUND: dict[tuple, list[tuple[str, str]]] = {}


def bind(tables: Mapping[str, pa.Table], sql: str, params: Mapping[str, Any] | None = None) -> list[tuple[str, str]]:
    """Check a SELECT against the tables without running it; returns its output (column, type) pairs.

    Binding resolves every table and column, so a renamed or dropped column
    fails here in milliseconds, however large the data. A binding depends only
    on the tables' schemas, so successful ones are remembered per schema:
    the refresh of data with the same shape binds nothing again.
    """
    key = (sql, tuple(sorted(params or {})), tuple(sorted((name, t.schema.to_string(show_schema_metadata=False)) for name, t in tables.items())))
    if key in _BOUND:
        return _BOUND[key]
    result = _bind(tables, sql, params)
    if len(_BOUND) > 2048:
        _BOUND.clear()
    _BOUND[key] = result
    return result


def _bind(tables: Mapping[str, pa.Table], sql: str, params: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """In a worker too: binding folds constants, so `SELECT repeat('x', 2e9)` costs its full price already here."""
    check_statement(sql)
    try:
        return query_worker.bind(tables, sql, params, BIND_TIMEOUT_S)
    except query_worker.WorkerError as exc:
        raise failed(str(exc), tables, sql) from None


def failed(raw: str, tables: Mapping[str, pa.Table], sql: str) -> QueryError:
    """The QueryError of `sql` over `tables` failing with the worker's `raw` text: where it is DuckDB's, in a
    person's words, naming what the query reads that does not fit and the columns of only the tables it reads."""
    read = None
    if sql_errors.is_engine_text(raw):
        try:
            read = standins.tables_named(sql)
        except QueryError:
            pass  # sqlglot does not parse it: every loaded table counts
    return QueryError.failed(raw, tables, read)
