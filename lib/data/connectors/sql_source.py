"""`sql` sources: a query, or a whole table, from any database SQLAlchemy can reach.

The URL in sources.yaml never holds the password: it is resolved from its
secret reference at fetch time and set on the parsed URL object, so it exists
only inside the engine and never in a string that could be shown or logged.
"""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Iterable, Iterator, Sequence

import pyarrow as pa
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, SQLAlchemyError

from ...memory.secrets import is_reference
from . import spark_connect, sql_wait
from .base import FetchContext, _as_text, confined_path, to_arrow_column
from .policy import RetryPolicy, Transient

# The time limit of each connection attempt (`timeout_s`): long enough for a slow VPN, short
# enough that an unreachable server fails in seconds.
DEFAULT_TIMEOUT_S = 10

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

# Schema metadata of an incremental table: its cursor's largest value exactly, when the column holds decimals.
# Decimals are stored as doubles (dashboards aggregate), and a double past 2**53 is not the value the
# database holds: bound as the last cursor it would fetch the row at the top again, or skip new ones.
CURSOR_MAX_KEY = b"dashmem.cursor_max"
# What says the connection failed, not the request, so that another attempt may pass (see `_transient`).
# MySQL/MariaDB client and server codes: cannot connect (2002, 2003), server gone or connection lost
# (2006, 2013, 2055), too many connections (1040), lock wait timeout and deadlock (1205, 1213).
MYSQL_TRANSIENT_CODES = frozenset({2002, 2003, 2006, 2013, 2055, 1040, 1205, 1213})
# PostgreSQL SQLSTATEs: connection exceptions (class 08), the server shutting down or starting up
# (57P01-57P03), too many connections (53300), serialization failure and deadlock (40001, 40P01).
POSTGRES_TRANSIENT_STATES = ("08", "57P01", "57P02", "57P03", "53300", "40001", "40P01")
# libpq reports a failed connection without a SQLSTATE; these are its words for the network's failures
# (a wrong password or database, "password authentication failed", "does not exist", is not among them).
POSTGRES_TRANSIENT_WORDS = (
    "connection refused",
    "connection reset",
    "timeout expired",
    "server closed the connection unexpectedly",
    "could not receive data from server",
    "could not send data to server",
    "the database system is starting up",
    "the database system is shutting down",
    "too many clients",
    "no route to host",
    "network is unreachable",
    "ssl syscall error",
)


def fetch(source: dict, ctx: FetchContext) -> pa.Table:
    """The whole query result or table (from Spark through Spark Connect for an `sc://` URL)."""
    if spark_connect.is_spark(source):
        return spark_connect.fetch(source, ctx)
    return _fetch(source, ctx, after=None)


def fetch_after(source: dict, ctx: FetchContext, last) -> pa.Table:
    """Only the table's rows whose `incremental.cursor` column is past `last` (incremental refresh).

    `last` goes to the database as a bind parameter, never as text in the SQL; rows whose cursor
    is NULL never compare greater, so they arrive only with a full load.
    """
    if spark_connect.is_spark(source):
        return spark_connect.fetch(source, ctx)  # which says incremental refresh is not for Spark
    if not source.get("table") or not (source.get("incremental") or {}).get("cursor"):
        raise ctx.error(source["name"], "incremental refresh needs `table` and `incremental.cursor`")
    return _fetch(source, ctx, after=last)


def _fetch(source: dict, ctx: FetchContext, after) -> pa.Table:
    name = source["name"]
    url = _engine_url(source, ctx)
    policy = RetryPolicy.of(source, DEFAULT_TIMEOUT_S)
    engine = _create_engine(name, url, ctx, policy.timeout_s)
    try:
        # A lost connection retries the whole read: nothing was kept of it, and nothing is ever written.
        return policy.run(lambda: _attempt(source, engine, url, ctx, after), name, ctx)
    finally:
        engine.dispose()


def _attempt(source: dict, engine: sa.Engine, url: URL, ctx: FetchContext, after) -> pa.Table:
    try:
        connection = engine.connect()
    except SQLAlchemyError as exc:
        detail = _driver_message(exc)
        if sql_wait.stalled(exc):  # psycopg2, through sql_wait: the greeting never came
            waited = math.ceil(RetryPolicy.of(source, DEFAULT_TIMEOUT_S).timeout_s) + sql_wait.MARGIN_S  # libpq's whole seconds
            detail = f"the server accepted the connection but sent nothing for {waited:g} s"
        if _transient(exc):
            raise Transient(f"cannot connect to {_shown(url)}", f": {detail}") from None
        raise ctx.error(source["name"], f"cannot connect to {_shown(url)}: {detail}") from None
    # Nothing is ever committed: closing the connection rolls back whatever a query changed
    # inside the driver's transaction (DDL on SQLite and MySQL commits itself, beyond our reach).
    with connection:
        return _read(source, connection, ctx, after)


def _transient(exc: SQLAlchemyError) -> bool:
    """Whether the connection failed (refused, reset, timed out, lost, the server restarting or full)
    rather than the request (a SQL error, a wrong password, a missing database or table)."""
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:  # the dialect's own verdict: a disconnect
        return True
    if sql_wait.stalled(exc):  # a wait for the server ran out (a read that stalled is not retried: see `_read`)
        return True
    original = getattr(exc, "orig", None)
    if isinstance(original, OSError):  # the network itself, below the driver
        return True
    args = getattr(original, "args", ())
    if args and isinstance(args[0], int):  # MySQL drivers: (code, text)
        return args[0] in MYSQL_TRANSIENT_CODES
    state = getattr(original, "pgcode", None) or getattr(original, "sqlstate", None)  # psycopg2, psycopg 3
    if state:
        return str(state).startswith(POSTGRES_TRANSIENT_STATES)
    if _backend_of(exc) == "postgresql":
        text = str(original).lower()
        return any(words in text for words in POSTGRES_TRANSIENT_WORDS)
    return False


def _backend_of(exc: SQLAlchemyError) -> str:
    """The database family an error came from, by its driver's module."""
    module = type(getattr(exc, "orig", None)).__module__ or ""
    return "postgresql" if module.startswith(("psycopg", "pg8000", "asyncpg")) else module.split(".")[0]


def engine_for(source: dict, ctx: FetchContext) -> sa.Engine:
    """An engine for the source, its password resolved from its reference (live sources query through it)."""
    return _create_engine(source["name"], _engine_url(source, ctx), ctx, RetryPolicy.of(source, DEFAULT_TIMEOUT_S).timeout_s)


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


def _create_engine(name: str, url: URL, ctx: FetchContext, timeout_s: float) -> sa.Engine:
    try:
        driver = url.get_driver_name()
        timeout_arg = CONNECT_TIMEOUT_ARG.get(driver)
        # Whole seconds: libpq takes no fraction (and counts under 2 as 2).
        connect_args: dict = {timeout_arg: math.ceil(timeout_s)} if timeout_arg else {}
        # Every wait for the server bounded, not only connecting (sql_wait: a stalled connection ends).
        connect_args.update(sql_wait.connect_args(driver, timeout_s))
        engine = sa.create_engine(url, connect_args=connect_args)
        backend = url.get_backend_name()
        event.listen(engine, "checkin", lambda dbapi_connection, record: _clean_session(backend, dbapi_connection, record, timeout_s))
        return engine
    except NoSuchModuleError:
        raise ctx.error(name, f"no SQLAlchemy dialect for {url.drivername!r}; check the start of the url") from None
    except ImportError as exc:
        raise ctx.error(
            name,
            f"the database driver for {url.drivername!r} is not installed ({exc}); "
            "name an installed driver in the url, e.g. postgresql+psycopg2:// or mysql+pymysql://",
        ) from None


def _clean_session(backend: str, dbapi_connection, record, timeout_s: float) -> None:
    """A pooled connection goes back without what a query left on its session: advisory and named locks,
    settings, temporary tables, prepared statements (a query cannot take them, `live_guard`; this is the
    second line). PostgreSQL's DISCARD ALL; MariaDB and MySQL release their named locks. A connection that
    cannot be cleaned is dropped from the pool instead."""
    if dbapi_connection is None:
        return
    sql_wait.forget(dbapi_connection, timeout_s)
    try:
        if backend == "postgresql":
            dbapi_connection.rollback()
            dbapi_connection.autocommit = True
            try:
                dbapi_connection.cursor().execute("DISCARD ALL")
            finally:
                dbapi_connection.autocommit = False
        elif backend in ("mysql", "mariadb"):
            cursor = dbapi_connection.cursor()
            cursor.execute("SELECT RELEASE_ALL_LOCKS()")
            cursor.fetchall()
            dbapi_connection.rollback()
    except Exception as exc:  # a broken connection: never handed out again
        record.invalidate(exc)


# Of the failures `_transient` retries, those of the request rather than the connection: a serialization
# failure or deadlock (PostgreSQL class 40), a lock wait timeout or deadlock (MySQL 1205, 1213).
REQUEST_CONFLICT_STATES = ("40",)
REQUEST_CONFLICT_CODES = frozenset({1205, 1213})


def connection_failed(exc: SQLAlchemyError) -> bool:
    """Whether the connection itself failed (refused, lost, the server restarting or full), so that the
    same statement on a new connection may pass; a SQL error, a conflict or a time limit is not that."""
    if not _transient(exc):
        return False
    original = getattr(exc, "orig", None)
    args = getattr(original, "args", ())
    if args and isinstance(args[0], int) and args[0] in REQUEST_CONFLICT_CODES:
        return False
    state = getattr(original, "pgcode", None) or getattr(original, "sqlstate", None)
    return not (state and str(state).startswith(REQUEST_CONFLICT_STATES))


def _read(source: dict, connection: sa.Connection, ctx: FetchContext, after=None) -> pa.Table:
    name = source["name"]
    statement, failure = _statement(source, connection.dialect, ctx)
    options: dict = {}
    if source.get("query_timeout_s"):
        sql_wait.allow(connection.connection.dbapi_connection, float(source["query_timeout_s"]), RetryPolicy.of(source, DEFAULT_TIMEOUT_S).timeout_s)
    if _streams(source, connection.dialect):
        options["stream_results"] = True
    try:
        if after is None:
            # The query runs exactly as written: no bind-parameter parsing, so `:x` or `%` mean what they mean in SQL.
            result = connection.execution_options(no_parameters=True, **options).exec_driver_sql(statement)
        else:
            cursor = connection.dialect.identifier_preparer.quote(source["incremental"]["cursor"])
            past = sa.text(f"{statement} WHERE {cursor} > :last").bindparams(sa.bindparam("last", after))
            result = connection.execution_options(**options).execute(past)
        if not result.returns_rows:
            raise ctx.error(name, "the query returns no rows; write a SELECT")
        names = list(result.keys())
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            result.close()  # reads the rest of a streamed result off the wire, as the driver wants before the next statement
            raise ctx.error(name, f"the result has more than one column named {', '.join(duplicates)}; give them distinct aliases")
        cursor = (source.get("incremental") or {}).get("cursor")
        if not source.get("table") or not isinstance(cursor, str) or cursor not in names:
            return arrow_table(names, _batches(result))
        top = _Largest(names.index(cursor))
        return with_cursor_max(arrow_table(names, top.watch(_batches(result))), cursor, top.value)
    except SQLAlchemyError as exc:
        if sql_wait.stalled(exc):  # not tried again: a silent server answers a second attempt no better
            policy = RetryPolicy.of(source, DEFAULT_TIMEOUT_S)
            waited = max(policy.timeout_s, float(source.get("query_timeout_s") or 0)) + sql_wait.MARGIN_S
            if_slow = "raise the source's query_timeout_s"
            raise ctx.error(name, f"{failure}: {sql_wait.message(waited, if_slow)}") from None
        if _transient(exc):
            raise Transient(failure, f": {_driver_message(exc)}") from None
        raise ctx.error(name, f"{failure}: {_driver_message(exc)}") from None


class _Largest:
    """The largest value of one column as the driver gave it (a Decimal stays exact), seen batch by batch."""

    def __init__(self, index: int):
        self.index, self.value = index, None

    def watch(self, batches: Iterable[Sequence[Sequence]]) -> Iterator[Sequence[Sequence]]:
        for batch in batches:
            try:
                values = [row[self.index] for row in batch if row[self.index] is not None]
                if values:
                    self.value = max(values) if self.value is None else max(self.value, *values)
            except TypeError:  # values that do not compare (SQLite mixes types): the Arrow column decides
                self.value = None
            yield batch


def with_cursor_max(table: pa.Table, cursor: str, value) -> pa.Table:
    """The table recording `value` as its cursor's exact largest value, if it is a decimal (see CURSOR_MAX_KEY)."""
    metadata = {k: v for k, v in (table.schema.metadata or {}).items() if k != CURSOR_MAX_KEY}
    if isinstance(value, Decimal):
        metadata[CURSOR_MAX_KEY] = json.dumps({"column": cursor, "max": str(value)}).encode()
    return table.replace_schema_metadata(metadata or None)


def cursor_max(table: pa.Table, cursor: str) -> Decimal | None:
    """The exact largest cursor value a table recorded, None when it recorded none for this column."""
    raw = (table.schema.metadata or {}).get(CURSOR_MAX_KEY)
    if raw is None:
        return None
    recorded = json.loads(raw)
    return Decimal(recorded["max"]) if recorded.get("column") == cursor else None


def _batches(result: sa.CursorResult) -> Iterator[Sequence[sa.Row]]:
    """The result's rows, ROWS_PER_BATCH at a time; a batch is let go of before the next is fetched."""
    while rows := result.fetchmany(ROWS_PER_BATCH):
        yield rows
        del rows


def _streams(source: dict, dialect: sa.Dialect) -> bool:
    """Whether rows come from the server a batch at a time rather than all at once into the driver's memory.

    SQLite's driver steps through the result as rows are fetched anyway. PyMySQL's unbuffered cursor
    (SSCursor) sends the query as written and reads rows off the socket as they are fetched. psycopg2
    streams only through a server-side cursor, which wraps the query in `DECLARE ... CURSOR FOR`: that
    rejects some valid queries (a data-modifying WITH, say) and shows up in their error messages, so
    it is used only for table mode, whose plain `SELECT * FROM table` is ours. A query in psycopg2
    (and any other driver) keeps the client-side cursor: libpq holds the whole result as text in C
    memory (roughly the size of the data on the wire), while the Python rows are still made and
    turned into Arrow one batch at a time.
    """
    driver = dialect.driver
    return driver == "pymysql" or (driver == "psycopg2" and not source.get("query"))


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


def arrow_table(names: list[str], batches: Iterable[Sequence[Sequence]]) -> pa.Table:
    """Rows, a batch at a time, as one Arrow table with the types Arrow infers for each whole column.

    Each batch is turned into one Arrow array per column (a chunk) before the next is fetched, so at
    most one batch of Python rows is alive at a time: peak memory is a batch plus the Arrow result.
    The types are what `pa.array` would infer from the column's values all at once (see `_Column`).
    """
    columns = [_Column() for _ in names]
    for batch in batches:
        _add_batch(columns, batch)
        del batch  # the rows go now, before the next batch is fetched, not when it replaces them
    return pa.Table.from_arrays([column.finish() for column in columns], names=names)


def _add_batch(columns: list[_Column], batch: Sequence[Sequence]) -> None:
    for column, values in zip(columns, zip(*batch)):
        column.add(values)


# Python values Arrow would keep as decimals, structs or lists: converted first (see `_arrow_friendly`).
CONVERTED = frozenset({Decimal, memoryview, dict, list})
# What `pa.array` raises for values it cannot give one type (ArrowInvalid and ArrowTypeError are among them).
UNTYPABLE = (ValueError, TypeError, OverflowError)


class _Column:
    """One result column as Arrow chunks, one per batch, whose types agree at the end.

    Each batch gets the type `pa.array` infers from it. A batch of NULLs only is of the null type; a
    batch of whole numbers in a column whose other batches hold fractions is int64 beside double; a
    batch Arrow cannot type at all (SQLite allows numbers and text in one column) means the whole
    column cannot be typed either, so it becomes text from then on, the earlier chunks included, as
    `to_arrow_column` does for a whole column. `finish` then gives every chunk the type that inferring
    from all the values at once gives: null chunks take the column's type, int64 becomes double beside
    double, string becomes binary beside binary, timestamps take the first one's time zone; anything
    else (which the drivers here do not produce) is inferred again from all the values, as before batches.

    Going back to the values (for text, or to infer again) must give the driver's values, not Arrow's:
    a batch mixing whole numbers and fractions (SQLite) is double, and `1` must still read "1", not
    "1.0"; one mixing text and bytes is binary. Such a chunk keeps a mask of the values it changed.
    """

    __slots__ = ("chunks", "changed", "as_text", "convert_first")

    def __init__(self) -> None:
        self.chunks: list[pa.Array] = []
        self.changed: dict[int, tuple[type, pa.Array]] = {}  # chunk index -> (original type, mask of its values)
        self.as_text = False  # the column could not be typed: every value is text
        self.convert_first = False  # an earlier batch held values to convert (decimals, JSON): skip the first try

    def add(self, values: Sequence) -> None:
        array = None
        if not self.as_text and not self.convert_first:
            try:
                array = pa.array(values)
            except UNTYPABLE:
                array = None
            if array is not None and _may_hold_converted(array.type):
                array = None
        if array is None:
            kinds = set(map(type, values))
            if kinds & CONVERTED:
                self.convert_first = True
                values = _friendly_values(values, kinds)
            if not self.as_text:
                try:
                    array = pa.array(values)
                except UNTYPABLE:
                    self.as_text = True
                    self.chunks = [_text_chunk(self._values(n)) for n in range(len(self.chunks))]
                    self.changed.clear()
            if self.as_text or array is None:  # array is None only when typing it failed just now
                array = _text_chunk(values)
        offset = 0
        for chunk in array.chunks if isinstance(array, pa.ChunkedArray) else [array]:  # chunked: over 2 GB of text
            self._remember_changes(chunk, values[offset : offset + len(chunk)] if offset or len(chunk) < len(values) else values)
            self.chunks.append(chunk)
            offset += len(chunk)

    def _remember_changes(self, chunk: pa.Array, values: Sequence) -> None:
        changed = {pa.float64(): int, pa.binary(): str}.get(chunk.type)
        if changed is not None and changed in set(map(type, values)):
            self.changed[len(self.chunks)] = (changed, pa.array([type(value) is changed for value in values]))

    def _values(self, n: int) -> list:
        """The driver's values behind chunk n (decimals and JSON as converted)."""
        values = self.chunks[n].to_pylist()
        if n in self.changed:
            kind, mask = self.changed[n]
            restore = int if kind is int else bytes.decode
            values = [restore(value) if changed else value for value, changed in zip(values, mask.to_pylist())]
        return values

    def finish(self) -> pa.ChunkedArray:
        chunks = self.chunks
        if not chunks:
            return pa.chunked_array([], type=pa.null())
        types = list(dict.fromkeys(chunk.type for chunk in chunks if chunk.type != pa.null()))
        target = _common_type(types)
        if target is not None:
            try:
                return pa.chunked_array([chunk if chunk.type == target else chunk.cast(target) for chunk in chunks], type=target)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # e.g. an integer beyond 2**53 beside doubles
                pass
        return pa.chunked_array([to_arrow_column([value for n in range(len(chunks)) for value in self._values(n)])])


def _common_type(types: list[pa.DataType]) -> pa.DataType | None:
    """The type inferring from all the values at once gives these chunk types, where that is simple to tell."""
    if len(types) <= 1:
        return types[0] if types else pa.null()
    if set(types) == {pa.int64(), pa.float64()}:
        return pa.float64()
    if set(types) == {pa.string(), pa.binary()}:
        return pa.binary()
    if all(pa.types.is_timestamp(t) and t.tz is not None and t.unit == types[0].unit for t in types):
        return types[0]  # Arrow takes the first value's time zone for the column; the instants stay
    return None


def _may_hold_converted(arrow_type: pa.DataType) -> bool:
    """Arrow inferred a type that values in CONVERTED give (decimals, dicts, lists): convert them instead."""
    return pa.types.is_decimal(arrow_type) or pa.types.is_struct(arrow_type) or pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type)


def _friendly_values(values: Sequence, kinds: set) -> list:
    if kinds <= {Decimal, type(None)}:  # a NUMERIC column: the common case, made quick
        return [None if value is None else float(value) for value in values]
    return [_arrow_friendly(value) for value in values]


def _text_chunk(values: Sequence) -> pa.Array:
    return pa.array([None if value is None else _as_text(value) for value in values], type=pa.string())


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
