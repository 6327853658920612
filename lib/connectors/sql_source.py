"""`sql` sources: a query, or a whole table, from any database SQLAlchemy can reach.

The URL in sources.yaml never holds the password: it is resolved from its
secret reference at fetch time and set on the parsed URL object, so it exists
only inside the engine and never in a string that could be shown or logged.
"""
from __future__ import annotations

import json
from decimal import Decimal

import pyarrow as pa
import sqlalchemy as sa
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError

from ..secrets import is_reference
from .base import FetchContext, confined_path, to_arrow_column

# Long enough for a slow VPN, short enough that an unreachable server fails in seconds.
CONNECT_TIMEOUT_S = 10

# The keyword each driver takes for its connect timeout; drivers not listed keep their own default.
CONNECT_TIMEOUT_ARG = {
    "psycopg2": "connect_timeout",
    "psycopg": "connect_timeout",
    "pymysql": "connect_timeout",
    "mysqldb": "connect_timeout",
    "mariadbconnector": "connect_timeout",
    "pyodbc": "timeout",
    "pymssql": "login_timeout",
    "oracledb": "tcp_connect_timeout",
}

# A bare `postgresql://` or `mysql://` gets the driver requirements.txt installs; SQLAlchemy's own
# defaults (psycopg 3 since SQLAlchemy 2.1, mysqlclient) are not installed.
DEFAULT_DRIVER = {"postgresql": "psycopg2", "mysql": "pymysql", "mariadb": "pymysql"}

ROWS_PER_BATCH = 10_000


def fetch(source: dict, ctx: FetchContext) -> pa.Table:
    name = source["name"]
    url = _engine_url(source, ctx)
    engine = _create_engine(name, url, ctx)
    try:
        try:
            connection = engine.connect()
        except SQLAlchemyError as exc:
            raise ctx.error(name, f"cannot connect to {_shown(url)}: {_driver_message(exc)}") from None
        # Nothing is ever committed: closing the connection rolls back whatever a query changed
        # inside the driver's transaction (DDL on SQLite and MySQL commits itself, beyond our reach).
        with connection:
            return _read(source, connection, ctx)
    finally:
        engine.dispose()


def _engine_url(source: dict, ctx: FetchContext) -> URL:
    name = source["name"]
    try:
        url = make_url(source["url"])
    except (ArgumentError, ValueError):  # ValueError: a port that is not a number
        raise ctx.error(name, "url is not a SQLAlchemy URL (expected e.g. postgresql://user@host:5432/db)") from None
    if "+" not in url.drivername and url.drivername in DEFAULT_DRIVER:
        url = url.set(drivername=f"{url.drivername}+{DEFAULT_DRIVER[url.drivername]}")
    if url.get_backend_name() == "sqlite":
        url = _sqlite_in_workspace(name, url, ctx)
    if source.get("password"):
        if not is_reference(source["password"]):  # checked here so that a pasted password is never echoed
            raise ctx.error(name, "password must be a secret reference (env:NAME or secrets:KEY), not the password itself")
        url = url.set(password=ctx.secret(name, source["password"]))
    return url


def _sqlite_in_workspace(name: str, url: URL, ctx: FetchContext) -> URL:
    """Relative SQLite paths are relative to the workspace; a missing file is an error, not a new empty database."""
    database = url.database
    if database and (database.startswith("file:") or url.query.get("uri")):
        # A URI names any file, with any mode; confining it means parsing it, so refuse it instead.
        raise ctx.error(name, "SQLite URI file names (file:..., uri=true) are not allowed; give a path inside the workspace folder")
    if not database or database == ":memory:":
        return url
    path = confined_path(name, database, ctx)
    if not path.is_file():
        raise ctx.error(name, f"SQLite database file {database} not found (looked for {path})")
    return url.set(database=str(path))


def _create_engine(name: str, url: URL, ctx: FetchContext) -> sa.Engine:
    try:
        timeout_arg = CONNECT_TIMEOUT_ARG.get(url.get_driver_name())
        connect_args = {timeout_arg: CONNECT_TIMEOUT_S} if timeout_arg else {}
        return sa.create_engine(url, connect_args=connect_args)
    except NoSuchModuleError:
        raise ctx.error(name, f"no SQLAlchemy dialect for {url.drivername!r}; check the start of the url") from None
    except ImportError as exc:
        raise ctx.error(
            name,
            f"the database driver for {url.drivername!r} is not installed ({exc}); "
            "name an installed driver in the url, e.g. postgresql+psycopg2:// or mysql+pymysql://",
        ) from None


def _read(source: dict, connection: sa.Connection, ctx: FetchContext) -> pa.Table:
    name = source["name"]
    statement, failure = _statement(source, connection.dialect, ctx)
    try:
        # The query runs exactly as written: no bind-parameter parsing, so `:x` or `%` mean what they mean in SQL.
        # No server-side cursor: it would wrap the query in the driver's own SQL (psycopg2's DECLARE ... CURSOR),
        # which rejects some valid queries and shows up in error messages.
        result = connection.execution_options(no_parameters=True).exec_driver_sql(statement)
        if not result.returns_rows:
            raise ctx.error(name, "the query returns no rows; write a SELECT")
        names = list(result.keys())
        columns: list[list] = [[] for _ in names]
        for batch in result.partitions(ROWS_PER_BATCH):
            for column, values in zip(columns, zip(*batch)):
                column.extend(values)
    except SQLAlchemyError as exc:
        raise ctx.error(name, f"{failure}: {_driver_message(exc)}") from None
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ctx.error(name, f"the result has more than one column named {', '.join(duplicates)}; give them distinct aliases")
    return pa.Table.from_arrays([_arrow_column(values) for values in columns], names=names)


def _statement(source: dict, dialect: sa.Dialect, ctx: FetchContext) -> tuple[str, str]:
    """The SQL to run, and how to introduce its failure in a message."""
    if source.get("query"):
        return source["query"], "query failed"
    if source.get("table"):
        table = source["table"]
        return f"SELECT * FROM {_quoted_table(source['name'], table, dialect, ctx)}", f"cannot read table {table!r}"
    raise ctx.error(source["name"], "a sql source needs `query` or `table`")


def _quoted_table(name: str, table: str, dialect: sa.Dialect, ctx: FetchContext) -> str:
    """`schema.table` quoted part by part by the dialect; a lower-case name stays case-insensitive, as in SQL."""
    parts = table.split(".")
    if not all(parts) or len(parts) > 3:
        raise ctx.error(name, f"table {table!r} is not a table name (expected table or schema.table)")
    return ".".join(dialect.identifier_preparer.quote(part) for part in parts)


def _arrow_column(values: list) -> pa.Array:
    """Arrow infers the type from the values; only what it cannot hold is converted first."""
    kinds = set(map(type, values))
    if kinds & {Decimal, memoryview, dict, list}:
        values = [_arrow_friendly(v) for v in values]
    return to_arrow_column(values)


def _arrow_friendly(value):
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, memoryview):
        return value.tobytes()
    if isinstance(value, (dict, list)):  # JSON columns: kept as JSON text, as REST records keep their lists
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return value


def _driver_message(exc: SQLAlchemyError) -> str:
    """The database's own words on one line, without SQLAlchemy's statement echo and help link."""
    original = getattr(exc, "orig", None)
    if original is None:
        return " ".join(str(exc).split())
    diagnostics = getattr(original, "diag", None)  # psycopg2: the server's message without the echoed query
    if diagnostics is not None and diagnostics.message_primary:
        return " ".join(filter(None, (diagnostics.message_primary, diagnostics.message_hint)))
    args = getattr(original, "args", ())
    if len(args) == 2 and isinstance(args[0], int) and isinstance(args[1], str):  # MySQL drivers: (code, text)
        return f"{args[1]} (error {args[0]})"
    return " ".join(str(original).split()) or type(original).__name__


def _shown(url: URL) -> str:
    return url.render_as_string(hide_password=True)

