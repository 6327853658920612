"""The query sandbox: locked-down DuckDB, the single-SELECT rule, limits, and the errors queries raise.

A statement must be a single SELECT (WITH … SELECT included): `check_statement`
refuses anything else with `QueryRefused`. Dashboards, the model and viewers run
theirs through `lib.data.queries` (in a worker process, `lib.data.query_worker`,
stopped at the time or memory limit).

Every DuckDB that touches data opens through `connect` (an in-memory database
with external access disabled, no extension autoloading and its configuration
locked: no files, COPY, ATTACH, INSTALL/LOAD), and every cursor on it through
`sandbox_cursor`, which registers Arrow tables zero-copy. In-process use
(column types, profiling) shares one such database per process (`sandbox`).
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Collection, Mapping

import pyarrow as pa

from ..core.errors import DashmemError
from ..core.settings import sandbox_memory_limit
from . import sql_errors
from .coltypes import duckdb_name

if TYPE_CHECKING:
    import duckdb  # imported where a query is checked or a database opened: a refresh whose bindings are recorded needs neither


class QueryError(DashmemError, ValueError):
    """A query was refused or failed; the message says why in user terms.

    One DuckDB failed on (`failed`) also says, for the checks, what it is about: `table`, a table the
    query names that is not loaded, or `column`, a column none of the tables it reads has, and
    `allowed`, what it may name instead (`lib.data.sql_errors` wrote the message from DuckDB's).
    """

    def __init__(self, message: str = "", *, table: str | None = None, column: str | None = None, allowed: tuple[str, ...] = ()):
        super().__init__(message)
        self.table, self.column, self.allowed = table, column, allowed

    @classmethod
    def failed(cls, raw: str, tables: Mapping[str, pa.Table] | None = None, read: Collection[str] | None = None) -> QueryError:
        """The error of a query over `tables` (reading those of them in `read`, None if not known) that DuckDB
        failed on with `raw`, in a person's words; DuckDB's text goes to the log."""
        said = sql_errors.translate(raw, {name: t.schema.names for name, t in (tables or {}).items()}, read)
        return cls(said.message, table=said.table, column=said.column, allowed=said.allowed)


class QueryRefused(QueryError):
    """The sandbox refused the statement before running it."""


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

    if not isinstance(sql, str) or not sql.strip():
        raise QueryRefused("the query is empty")
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError.failed(str(exc)) from None
    if len(statements) != 1:
        raise QueryRefused(f"exactly one statement is allowed, got {len(statements)}")
    kind = statements[0].type
    if kind != duckdb.StatementType.SELECT:
        raise QueryRefused(f"only SELECT queries are allowed (WITH … SELECT included), not {kind.name}")


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

    names = [duckdb_name(f.type) for f in schema]
    known = [name for name in names if name]
    return tuple(zip(schema.names, known)) if len(known) == len(names) else None


def quote_ident(name: str) -> str:
    """A table or column name as a quoted SQL identifier (any character allowed)."""
    return '"' + name.replace('"', '""') + '"'


def first_line(exc: BaseException) -> str:
    """The first line of an error's message (its type's name if it has none)."""
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
