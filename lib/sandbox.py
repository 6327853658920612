"""The query sandbox: locked-down DuckDB, the single-SELECT rule, limits, and routing queries to workers.

Dashboards, the model and viewers query through `run_query` (and check a query
with `bind`): the statement must be a single SELECT (WITH … SELECT included),
returns at most `max_rows` rows, and runs in a worker process
(`lib.query_worker`) that is stopped at the time or memory limit.

Every DuckDB that touches data opens through `connect` (an in-memory database
with external access disabled, no extension autoloading and its configuration
locked: no files, COPY, ATTACH, INSTALL/LOAD), and every cursor on it through
`sandbox_cursor`, which registers Arrow tables zero-copy. In-process use
(column types, profiling) shares one such database per process (`sandbox`).
"""

from __future__ import annotations

import functools
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

import pyarrow as pa

if TYPE_CHECKING:
    import duckdb  # imported where a query is checked or a database opened: a refresh whose bindings are recorded needs neither

DEFAULT_MAX_ROWS = 10_000
DEFAULT_TIMEOUT_S = 10.0
BIND_TIMEOUT_S = 5.0  # binding takes milliseconds; only a query that folds a huge constant gets near this


@dataclass
class QueryResult:
    table: pa.Table
    truncated: bool
    seconds: float
    columns: list[str] = field(default_factory=list)

    def to_pandas(self):
        return self.table.to_pandas()

    @property
    def rows(self) -> list[tuple]:
        return list(zip(*(self.table.column(i).to_pylist() for i in range(self.table.num_columns)))) if self.table.num_columns else []


# --------------------------------------------------------------------------- opening the sandbox


def connect(memory_limit: str, **settings: Any) -> duckdb.DuckDBPyConnection:
    """A new in-memory DuckDB for untrusted SQL: no file or network access, no extensions, configuration locked.

    `settings` add DuckDB options (threads, ...); they are applied before the lock.
    """
    import duckdb

    return duckdb.connect(
        ":memory:",
        config={
            "enable_external_access": False,
            "autoload_known_extensions": False,
            "autoinstall_known_extensions": False,
            "memory_limit": memory_limit,
            **settings,
            "lock_configuration": True,
        },
    )


_SANDBOX_LOCK = threading.Lock()
_SANDBOX: duckdb.DuckDBPyConnection | None = None


def sandbox() -> duckdb.DuckDBPyConnection:
    """The process's locked-down DuckDB; every in-process query runs on a cursor of it (`sandbox_cursor`)."""
    global _SANDBOX
    with _SANDBOX_LOCK:
        if _SANDBOX is None:
            from .settings import sandbox_memory_limit

            _SANDBOX = connect(sandbox_memory_limit())
        return _SANDBOX


def sandbox_cursor(tables: Mapping[str, pa.Table] | None = None, *, connection: duckdb.DuckDBPyConnection | None = None) -> duckdb.DuckDBPyConnection:
    """A new cursor of `connection` (by default the process's `sandbox()`) with `tables` registered by name.

    Each thread needs its own cursor. The caller closes it: `with sandbox_cursor(tables) as cursor: ...`.
    """
    cursor = (connection if connection is not None else sandbox()).cursor()
    try:
        for name, table in (tables or {}).items():
            cursor.register(name, table)
    except BaseException:
        cursor.close()
        raise
    return cursor


# --------------------------------------------------------------------------- checking and running a query


def check_statement(sql: str) -> None:
    """Accept exactly one SELECT statement; refuse anything else with a clear reason."""
    import duckdb

    from .warehouse import QueryError, QueryRefused  # the facade's exceptions (it imports this module)

    if not isinstance(sql, str) or not sql.strip():
        raise QueryRefused("the query is empty")
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(f"SQL syntax error: {first_line(exc)}") from None
    if len(statements) != 1:
        raise QueryRefused(f"exactly one statement is allowed, got {len(statements)}")
    kind = statements[0].type
    if kind != duckdb.StatementType.SELECT:
        raise QueryRefused(f"only SELECT queries are allowed (WITH … SELECT included), not {kind.name}")


def run_query(
    tables: Mapping[str, pa.Table], sql: str, params: Mapping[str, Any] | None = None, *, max_rows: int = DEFAULT_MAX_ROWS, timeout_s: float = DEFAULT_TIMEOUT_S
) -> QueryResult:
    """Run one sandboxed SELECT over the given Arrow tables, in a worker process that is
    stopped at `timeout_s` (plus a second) or when it needs more memory than allowed."""
    from . import query_worker
    from .warehouse import QueryError, QueryRefused

    check_statement(sql)
    if max_rows < 1:
        raise QueryRefused("max_rows must be at least 1")
    start = time.perf_counter()
    try:
        result, truncated = query_worker.run(tables, sql, params, max_rows, timeout_s)
    except query_worker.WorkerError as exc:
        raise QueryError(str(exc)) from None
    result = _plain_numbers(result)
    return QueryResult(result, truncated, time.perf_counter() - start, result.column_names)


def _plain_numbers(table: pa.Table) -> pa.Table:
    """DuckDB sums integers into HUGEINT, which arrives as decimal; dashboards want plain numbers."""
    for i, f in enumerate(table.schema):
        if pa.types.is_decimal(f.type):
            target = pa.int64() if f.type.scale == 0 else pa.float64()
            try:
                table = table.set_column(i, f.name, table.column(i).cast(target))
            except pa.ArrowInvalid:  # beyond int64: a double keeps the magnitude
                table = table.set_column(i, f.name, table.column(i).cast(pa.float64()))
    return table


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
    from . import query_worker
    from .warehouse import QueryError

    check_statement(sql)
    try:
        return query_worker.bind(tables, sql, params, BIND_TIMEOUT_S)
    except query_worker.WorkerError as exc:
        raise QueryError(str(exc)) from None


# --------------------------------------------------------------------------- column types and names


def describe(tables: Mapping[str, pa.Table]) -> dict[str, list[list[str]]]:
    """DuckDB column types of Arrow tables, without scanning them.

    Common types are named from the Arrow schema directly (a DuckDB round trip
    cost about 1 ms a table, a sixth of a small refresh); anything else asks DuckDB.
    """
    out, unusual = {}, {}
    for name, table in tables.items():
        names = _duckdb_names(table.schema)
        if names is not None:
            out[name] = [list(pair) for pair in names]
        else:
            unusual[name] = table
    if unusual:
        with sandbox_cursor(unusual) as cursor:
            for name in unusual:
                out[name] = [[row[0], row[1]] for row in cursor.execute(f"DESCRIBE {quote_ident(name)}").fetchall()]
    return {name: out[name] for name in tables}


@functools.lru_cache(maxsize=256)
def _duckdb_names(schema: pa.Schema) -> tuple[tuple[str, str], ...] | None:
    """(column, DuckDB type) for a schema of common types; the same schema comes back every refresh."""
    from .coltypes import duckdb_name

    names = [duckdb_name(f.type) for f in schema]
    known = [name for name in names if name]
    return tuple(zip(schema.names, known)) if len(known) == len(names) else None


def quote_ident(name: str) -> str:
    """A table or column name as a quoted SQL identifier (any character allowed)."""
    return '"' + name.replace('"', '""') + '"'


def first_line(exc: BaseException) -> str:
    """The first line of an error's message (its type's name if it has none)."""
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
