"""Live SQL sources: a dashboard query on a live table runs in the source database, not in a snapshot.

A `sql` source with `mode: live` is never copied. Its table in the snapshot is
empty, with the columns and types the database's catalogue reports (written by
refresh through `catalogue_table`), so binding, checks and the model see the
same workspace as before; the stand-in is marked (`standins.mark`) and no
snapshot query answers from it. The query engine (`lib.data.engine`) decides
where a query runs: one naming only snapshot tables goes on to the sandbox as
always; one naming tables of exactly one live source comes here (`LiveCache.run`), and is

1. checked by the sandbox's single-SELECT rule (`sandbox.check_statement`) and by
   `live_guard.check`: its one table, and only functions that compute over its rows,
2. transpiled with sqlglot from DuckDB SQL to the source's dialect, its table
   name replaced by the database table and its row count capped,
3. run through SQLAlchemy with filter values as bind parameters of the driver
   (never spliced into the text), in a read-only transaction with the
   database's own statement time limit where it has one, and
4. cached per (sql, parameters, data version, row cap) for the source's
   `cache_ttl_s`.

A connection that fails (dropped by the server, refused, the server restarting)
is tried again on a new one, as the source's `retry` says, after a jittered wait
(`with_reconnects`); a SQL error or a statement stopped by its time limit is not.

A query mixing a live source's table with snapshot tables or another live
source is refused by the engine, naming the tables: no engine can join across the two.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
import uuid
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, TypeVar

import pyarrow as pa

from . import connectors, live_guard, standins
from .coltypes import plain_numbers
from .connectors import spark_connect, sql_wait
from .connectors.base import FetchContext, SourceError
from .connectors.policy import RetryPolicy
from .sandbox import DEFAULT_MAX_ROWS, DEFAULT_TIMEOUT_S, QueryError, QueryRefused, QueryResult, check_statement, first_line
from .standins import parse as _parse

if TYPE_CHECKING:
    import sqlalchemy as sa
    from sqlglot import exp

    from .connectors.base import FetchContext

log = logging.getLogger(__name__)

DEFAULT_TTL_S = 300
# sqlglot's dialect for each SQLAlchemy backend (its `engine.dialect.name`); others are tried under their own name.
# Tested against real servers: postgresql, mysql/mariadb, sqlite. The warehouses below are transpiled only (docs/sources.md, "Warehouses").
SQLGLOT_DIALECT = {
    "postgresql": "postgres",
    "mysql": "mysql",
    "mariadb": "mysql",
    "sqlite": "sqlite",
    "trino": "trino",  # the `trino` package's dialect
    "presto": "presto",
    "hive": "spark",  # PyHive's `hive://`, which is how a Spark Thrift server is reached: it speaks Spark SQL
    "databricks": "databricks",
    "bigquery": "bigquery",  # sqlalchemy-bigquery
    "snowflake": "snowflake",  # snowflake-sqlalchemy
}


def is_live(source: Mapping[str, Any]) -> bool:
    return source.get("type") == "sql" and source.get("mode") == "live"


def live_sources(files: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The workspace's live sources by table name."""
    sources = (files.get("sources") or {}).get("sources") or []
    return {s["name"]: s for s in sources if isinstance(s, dict) and is_live(s)}


# --------------------------------------------------------------------------- transpiling


POSITIONAL = ("format", "qmark", "numeric")


# Dialects where a list cannot be one bind parameter (no arrays, or a driver that binds a list as a tuple):
# a multiselect's `list_contains($x, col)` becomes `col IN (...)`, one parameter per value.
NO_ARRAYS = frozenset({"mysql", "sqlite", "spark", "databricks", "snowflake"})
LIST_ITEM = "__dm"  # `$site`'s values travel as `site__dm0`, `site__dm1`, ... there


ROW_PARAM = "dmrow"  # a row filter's values travel as `dmrow0`, `dmrow1`, ... (lib.data.row_filters)


def transpile(
    sql: str,
    source: Mapping[str, Any],
    dialect: str,
    paramstyle: str,
    max_rows: int,
    values: Mapping[str, Any] | None = None,
    where: tuple[str, Sequence[Any]] | None = None,
) -> tuple[str, list[str]]:
    """The DuckDB query as the database's SQL with the driver's placeholders, and the parameter
    names in the order their placeholders appear (what a positional paramstyle binds by).

    `values` are the parameters' values, needed only by dialects without arrays (NO_ARRAYS): there
    `list_contains($x, col)` is written `col IN` one placeholder per value of `$x` (see `bindable`).

    `where` is a row filter (column, values): every reference to the table becomes a subquery holding
    only the rows whose column is one of the values, bound as `dmrow0`, `dmrow1`, ... (none: no row)."""
    from sqlglot import exp

    check_statement(sql)  # the sandbox's own rule, on the text as written
    tree = _parse(sql)
    if not isinstance(tree, exp.Query):
        raise QueryRefused("only SELECT queries are allowed (WITH … SELECT included)")
    live_guard.check(tree, source["name"])  # its one table, and functions that only compute
    real = _table_expression(source["table"])
    for table in list(tree.find_all(exp.Table)):
        if table.name.lower() == source["name"].lower():
            alias = table.args.get("alias") or exp.TableAlias(this=exp.to_identifier(table.name))
            if where is None:
                replacement = real.copy()
                replacement.set("alias", alias)
            else:
                replacement = _filtered_table(real, where).subquery(alias.copy())
            table.replace(replacement)
    for n, subquery in enumerate(tree.find_all(exp.Subquery)):
        if not subquery.alias and isinstance(subquery.parent, (exp.From, exp.Join)):
            subquery.set("alias", exp.TableAlias(this=exp.to_identifier(f"dm_sub{n}")))  # DuckDB names them; PostgreSQL < 16 and MySQL insist
    tree = _capped(tree, max_rows + 1)  # one row more than shown tells that the result was cut
    if dialect in NO_ARRAYS:
        _lists_as_in(tree, values or {})
    _portable_trunc(tree, dialect)
    # Placeholders become markers that cannot occur in SQL text by chance, then the driver's own placeholders.
    token = uuid.uuid4().hex[:12]
    for node in list(tree.find_all(exp.Placeholder, exp.Parameter)):
        node.replace(exp.column(f"dmp{token}_{_param_name(node)}"))
    text = _written(tree, dialect)
    marker = re.compile(rf'[`"]?dmp{token}_([A-Za-z_][A-Za-z0-9_]*)[`"]?')
    names: list[str] = []

    def placeholder(match: re.Match) -> str:
        name = match.group(1)
        names.append(name)
        return {"pyformat": f"%({name})s", "format": "%s", "qmark": "?", "named": f":{name}", "numeric": f":{len(names)}"}[paramstyle]

    if paramstyle in ("pyformat", "format"):
        # A literal % (LIKE 'a%') is not a placeholder: SQLAlchemy always passes the driver parameters, so %% reads as %.
        text = text.replace("%", "%%")
    text = marker.sub(placeholder, text)
    return text, names


def _written(tree: exp.Expr, dialect: str) -> str:
    """The query in the dialect's SQL; refused where sqlglot would drop an argument it cannot write there (DuckDB's
    `arg_max(x, y, 2)` became Spark's `MAX_BY(x, y)`: one value, not two, and a different answer, silently).
    Other gaps it reports (MySQL's NULLS LAST after a positional ORDER BY) change only where NULLs sort."""
    import sqlglot
    from sqlglot.errors import ErrorLevel

    generator = sqlglot.Dialect.get_or_raise(dialect).generator(unsupported_level=ErrorLevel.IGNORE)
    text = generator.generate(tree)
    for message in generator.unsupported_messages:
        if message.startswith("Argument "):
            raise QueryError(f"this query cannot be run in the source's database as written: {message.rstrip('.')} ({dialect} SQL has no such form)")
        log.info("transpiling to %s: %s", dialect, message)
    return text


def _filtered_table(real: exp.Table, where: tuple[str, Sequence[Any]]) -> exp.Select:
    """`SELECT * FROM real WHERE column IN (:dmrow0, ...)`, or no row at all when there are no values."""
    from sqlglot import exp

    column, allowed = where
    condition: exp.Expr = (
        exp.In(this=exp.column(column, quoted=True), expressions=[exp.Placeholder(this=f"{ROW_PARAM}{i}") for i in range(len(allowed))])
        if allowed
        else exp.EQ(this=exp.Literal.number(1), expression=exp.Literal.number(0))
    )
    return exp.select("*").from_(real.copy()).where(condition)


def row_values(where: tuple[str, Sequence[Any]] | None) -> dict[str, Any]:
    """The row filter's bound parameters, as `transpile` names them."""
    return {f"{ROW_PARAM}{i}": value for i, value in enumerate(where[1])} if where else {}


def _param_name(node: exp.Expr) -> str:
    from sqlglot import exp

    return node.name or (node.this.name if isinstance(node.this, exp.Expr) else str(node.this))


def _lists_as_in(tree: exp.Expr, values: Mapping[str, Any]) -> None:
    """`list_contains($x, col)` as `col IN ($x__dm0, ...)`: NULL for an unset `$x`, false for an empty one, as in DuckDB."""
    from sqlglot import exp

    for node in list(tree.find_all(exp.ArrayContains)):
        if not isinstance(node.this, (exp.Placeholder, exp.Parameter)):
            continue  # a literal list: the dialect's own function, or its error
        name = _param_name(node.this)
        items = _items(values.get(name))
        if items is None:
            node.replace(exp.Null())
        elif not items:
            node.replace(exp.false())
        else:
            node.replace(exp.In(this=node.expression, expressions=[exp.Placeholder(this=f"{name}{LIST_ITEM}{i}") for i in range(len(items))]))


# DuckDB's date_trunc where sqlglot's translation is missing (SQLite has no truncation: it wrote TIMESTAMP_TRUNC,
# which fails) or differs (MySQL weeks counted from year 0, so starting on Sunday): the period's first day, weeks
# starting on Monday as in DuckDB. `__x__` stands for the truncated expression.
_TRUNC = {
    "mysql": {
        "day": "DATE(__x__)",
        "week": "DATE_SUB(DATE(__x__), INTERVAL WEEKDAY(__x__) DAY)",
        "month": "MAKEDATE(YEAR(__x__), 1) + INTERVAL (MONTH(__x__) - 1) MONTH",
        "quarter": "MAKEDATE(YEAR(__x__), 1) + INTERVAL (QUARTER(__x__) - 1) * 3 MONTH",
        "year": "MAKEDATE(YEAR(__x__), 1)",
    },
    "sqlite": {
        "day": "date(__x__)",
        "week": "date(__x__, 'weekday 0', '-6 days')",
        "month": "date(__x__, 'start of month')",
        "quarter": "date(__x__, 'start of month', printf('-%d months', (CAST(strftime('%m', __x__) AS INTEGER) - 1) % 3))",
        "year": "date(__x__, 'start of year')",
    },
}


def _portable_trunc(tree: exp.Expr, dialect: str) -> None:
    """`date_trunc(grain, x)` written in the dialect's own date functions where sqlglot's is wrong (see _TRUNC)."""
    import sqlglot
    from sqlglot import exp

    templates = _TRUNC.get(dialect)
    if not templates:
        return
    for node in list(tree.find_all(exp.DateTrunc, exp.TimestampTrunc)):
        template = templates.get(node.text("unit").lower())
        if template is None:
            continue  # an hour, a minute: sqlglot's own translation
        written = sqlglot.parse_one(template, read=dialect)
        for column in list(written.find_all(exp.Column)):
            if column.name == "__x__":
                column.replace(node.this.copy())
        node.replace(written)


def _items(value: Any) -> list | None:
    return None if value is None else list(value) if isinstance(value, (list, tuple)) else [value]


def bindable(values: Mapping[str, Any], dialect: str) -> dict[str, Any]:
    """The parameters as the driver takes them: where a dialect has no arrays, each list's values as
    their own parameters (see `_lists_as_in`), and the list itself, wherever else the query reads it
    (`$x IS NULL`), as its JSON text, which is NULL exactly when the list is."""
    if dialect not in NO_ARRAYS:
        return dict(values)
    out = dict(values)
    for name, value in values.items():
        if isinstance(value, (list, tuple)):
            out[name] = json.dumps(list(value), default=str)
            out.update({f"{name}{LIST_ITEM}{i}": item for i, item in enumerate(value)})
    return out


def _table_expression(table: str) -> exp.Table:
    from sqlglot import exp

    parts = table.split(".")
    ident = [exp.to_identifier(p, quoted=True) for p in parts]
    return exp.Table(this=ident[-1], db=ident[-2] if len(ident) > 1 else None, catalog=ident[-3] if len(ident) > 2 else None)


def _capped(tree: exp.Query, limit: int) -> exp.Query:
    """At most `limit` rows: a smaller LIMIT the query has stays, a bigger or missing one becomes `limit`."""
    from sqlglot import exp

    if isinstance(tree, exp.Select):
        current = tree.args.get("limit")
        expression = current.expression if current is not None else None
        if isinstance(expression, exp.Literal) and expression.is_int and int(expression.name) <= limit:
            return tree
        if current is None or isinstance(expression, exp.Literal):
            return tree.limit(limit)
    return exp.select("*").from_(tree.subquery("dm_live")).limit(limit)


# --------------------------------------------------------------------------- running


_ENGINES: dict[tuple, sa.Engine] = {}


def _sql() -> Any:
    """The SQL connector module, imported when a live source is first used (`connectors.module`)."""
    return connectors.module("sql")


_ENGINES_LOCK = threading.Lock()


def _engine(source: Mapping[str, Any], workspace_path: Path | None) -> sa.Engine:
    """One pooled engine per source settings; the URL and password are resolved by the SQL connector's own code."""

    key = (source["name"], source["url"], source.get("password"), str(workspace_path))
    with _ENGINES_LOCK:
        if key not in _ENGINES:
            ctx = FetchContext(workspace_path=workspace_path or Path.cwd())
            _ENGINES[key] = _sql().engine_for(dict(source), ctx)
        return _ENGINES[key]


def run(
    source: Mapping[str, Any],
    sql: str,
    params: Mapping[str, Any] | None = None,
    *,
    max_rows: int = DEFAULT_MAX_ROWS,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    workspace_path: Path | None = None,
    where: tuple[str, Sequence[Any]] | None = None,
) -> QueryResult:
    """Run one dashboard query in the live source's database; the sandbox's limits and result type;
    `where` the row filter (column, values) of the user asking (lib.data.row_filters)."""
    from sqlalchemy.exc import OperationalError, SQLAlchemyError

    if max_rows < 1:
        raise QueryRefused("max_rows must be at least 1")
    OUTAGES.check(source)
    if spark_connect.is_spark(source):
        return _run_spark(source, sql, params or {}, max_rows=max_rows, timeout_s=timeout_s, workspace_path=workspace_path, where=where)
    try:
        engine = _engine(source, workspace_path)
    except SourceError as exc:
        raise QueryError(str(exc)) from None
    backend = engine.dialect.name
    paramstyle = engine.dialect.paramstyle
    dialect = SQLGLOT_DIALECT.get(backend, backend)
    text, names_in_order, values = _prepared(sql, source, dialect, paramstyle, max_rows, params or {}, where)
    # The values travel beside the text, to the driver: a filter value is never part of the SQL.
    bound: Any = tuple(values[n] for n in names_in_order) if paramstyle in POSITIONAL else {n: values[n] for n in names_in_order}
    start = time.perf_counter()

    def attempt() -> tuple[list[str], Sequence[Any]]:
        with engine.connect() as connection:
            _read_only(connection, backend, timeout_s, source)
            result = connection.exec_driver_sql(text, bound)
            names = list(result.keys())
            rows = result.fetchmany(max_rows + 1)
            result.close()
            connection.rollback()  # nothing is ever committed
            return names, rows

    try:
        names, rows = with_reconnects(source, attempt)
    except OperationalError as exc:
        message = first_line(exc.orig or exc)
        if sql_wait.stalled(exc):
            waited = sql_wait.waited(exc, max(timeout_s, _source_timeout(source)) + sql_wait.MARGIN_S)
            raise OUTAGES.record(source, f"{source['name']}: {sql_wait.message(waited, 'check the database and the network to it')}") from None
        if _timed_out(message):
            raise QueryError(f"the query ran longer than {timeout_s:g} s in {source['name']}'s database and was stopped") from None
        if _sql().connection_failed(exc):
            raise OUTAGES.record(source, f"{source['name']}: {message}{_tried(exc)}") from None
        raise QueryError(f"{source['name']}: {message}{_tried(exc)}") from None
    except SQLAlchemyError as exc:
        raise QueryError(f"{source['name']}: {first_line(getattr(exc, 'orig', None) or exc)}{_tried(exc)}") from None
    truncated = len(rows) > max_rows
    table = _arrow(names, [tuple(_plain(v) for v in row) for row in rows[:max_rows]])
    return QueryResult(table, truncated, time.perf_counter() - start, table.column_names)


def _prepared(
    sql: str,
    source: Mapping[str, Any],
    dialect: str,
    paramstyle: str,
    max_rows: int,
    params: Mapping[str, Any],
    where: tuple[str, Sequence[Any]] | None,
) -> tuple[str, list[str], dict[str, Any]]:
    """The query as the database's SQL, its parameter names in placeholder order, and every value they bind."""
    if any(str(name).startswith(ROW_PARAM) for name in params):
        raise QueryRefused(f"parameter names starting with {ROW_PARAM} are reserved")
    text, names_in_order = transpile(sql, source, dialect, paramstyle, max_rows, params, where)
    values = {**bindable(params, dialect), **row_values(where)}
    missing = sorted(set(names_in_order) - values.keys())
    if missing:
        raise QueryError(f"no value for parameter {', '.join('$' + m for m in missing)}")
    return text, names_in_order, values


def _run_spark(
    source: Mapping[str, Any],
    sql: str,
    params: Mapping[str, Any],
    *,
    max_rows: int,
    timeout_s: float,
    workspace_path: Path | None,
    where: tuple[str, Sequence[Any]] | None,
) -> QueryResult:
    """`run` on a Spark Connect source: the same checks and transpiling, Spark SQL with named parameters."""
    text, names_in_order, values = _prepared(sql, source, "spark", "named", max_rows, params, where)
    ctx = FetchContext(workspace_path=workspace_path or Path.cwd())
    start = time.perf_counter()
    try:
        table, truncated = spark_connect.query(source, text, {n: values[n] for n in names_in_order}, max_rows=max_rows, timeout_s=timeout_s, secret=ctx.secret)
    except spark_connect.SparkFailure as exc:
        if exc.lost:
            raise OUTAGES.record(source, str(exc)) from None
        raise QueryError(str(exc)) from None
    except SourceError as exc:  # the token's reference could not be resolved
        raise QueryError(str(exc)) from None
    return QueryResult(table, truncated, time.perf_counter() - start, table.column_names)


class Outages:
    """Live sources whose database failed a moment ago (it stopped answering, or every reconnect failed):
    their next queries fail at once with the same words for `hold_s`, so that the other components of a page
    do not each spend a whole wait and retry budget on a source that is down. Then it is asked again."""

    def __init__(self, hold_s: float = 20.0, clock: Callable[[], float] = time.monotonic):
        self.hold_s, self.clock = hold_s, clock
        self._down: dict[tuple, tuple[float, str]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _key(source: Mapping[str, Any]) -> tuple:
        return (source["name"], source.get("url"), source.get("table"))

    def record(self, source: Mapping[str, Any], message: str) -> QueryError:
        with self._lock:
            self._down[self._key(source)] = (self.clock() + self.hold_s, message)
        log.warning("live source %s is down: %s", source["name"], message)
        return QueryError(message)

    def check(self, source: Mapping[str, Any]) -> None:
        with self._lock:
            down = self._down.get(self._key(source))
            if down is not None and down[0] <= self.clock():
                del self._down[self._key(source)]
                down = None
        if down is not None:
            raise QueryError(f"{down[1]}; not asked again for a few seconds")


OUTAGES = Outages()

T = TypeVar("T")


def with_reconnects(source: Mapping[str, Any], attempt: Callable[[], T], sleep: Callable[[float], None] = time.sleep) -> T:
    """`attempt()` (one whole read on a connection of its own) again while the connection is what failed,
    up to the source's `retry.attempts` in all, after the policy's jittered waits. Anything else, and the
    last failure (with a note of the attempts), is raised as it came."""
    from sqlalchemy.exc import SQLAlchemyError

    policy = RetryPolicy.of(dict(source), _sql().DEFAULT_TIMEOUT_S)
    for n in range(1, policy.attempts + 1):
        try:
            return attempt()
        except SQLAlchemyError as exc:
            lost = _sql().connection_failed(exc) and not _timed_out(first_line(getattr(exc, "orig", None) or exc))
            if not lost:
                raise
            if n == policy.attempts:
                exc.add_note(policy.tries(n))
                raise
            log.info("%s: the database connection failed (%s); trying again", source["name"], first_line(getattr(exc, "orig", None) or exc))
            sleep(policy.wait_after(n))
    raise AssertionError("attempts is at least 1 (schema)")


def _tried(exc: BaseException) -> str:
    """' (after 3 attempts)' when `with_reconnects` gave up on a lost connection, else nothing."""
    notes = getattr(exc, "__notes__", None) or []
    return f" (after {notes[-1]})" if notes else ""


def _read_only(connection: sa.Connection, backend: str, timeout_s: float, source: Mapping[str, Any]) -> None:
    """A read-only transaction with the database's own time limit, where the dialect has them; the client
    waits for the server up to that limit (plus a margin, `sql_wait`), since by then the server has answered."""
    sql_wait.allow(connection.connection.dbapi_connection, timeout_s, _source_timeout(source))
    ms = max(1, int(timeout_s * 1000))
    if backend == "postgresql":
        connection.exec_driver_sql("SET TRANSACTION READ ONLY")
        connection.exec_driver_sql(f"SET LOCAL statement_timeout = {ms}")
    elif backend in ("mysql", "mariadb"):
        if getattr(connection.dialect, "is_mariadb", False):
            connection.exec_driver_sql(f"SET SESSION max_statement_time = {timeout_s:.3f}")
        else:
            connection.exec_driver_sql(f"SET SESSION max_execution_time = {ms}")
        connection.exec_driver_sql("SET SESSION TRANSACTION READ ONLY")
        connection.exec_driver_sql("START TRANSACTION READ ONLY")
    elif backend == "sqlite":
        connection.exec_driver_sql("PRAGMA query_only = ON")
        deadline = time.monotonic() + timeout_s
        raw = connection.connection.dbapi_connection
        if raw is not None and hasattr(raw, "set_progress_handler"):
            raw.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 10_000)


def _source_timeout(source: Mapping[str, Any]) -> float:
    return RetryPolicy.of(dict(source), _sql().DEFAULT_TIMEOUT_S).timeout_s


def _timed_out(message: str) -> bool:
    """A statement stopped by its time limit, or a wait for the server that ran out (`sql_wait`): neither is tried again."""
    if sql_wait.stalled(Exception(message)):
        return True
    lowered = message.lower()
    return "statement timeout" in lowered or "max_statement_time" in lowered or "maximum statement execution time" in lowered or "interrupted" in lowered


def _plain(value: Any) -> Any:
    """Whole-number decimals (PostgreSQL's SUM of integers) as int, others as float: what DuckDB's results hold."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() and value.as_tuple().exponent >= 0 else float(value)  # pyright: ignore[reportOperatorIssue]  # exponent is an int for finite decimals
    return value


def _arrow(names: list[str], rows: list[tuple]) -> pa.Table:

    return plain_numbers(_sql().arrow_table(names, [rows] if rows else []))


# --------------------------------------------------------------------------- caching


class LiveCache:
    """Live results keyed by (source, data version, sql, parameters, row cap), each kept for its source's TTL."""

    def __init__(self, size: int = 512, clock: Callable[[], float] = time.monotonic):
        self.size = size
        self.clock = clock
        self._items: dict[tuple, tuple[float, QueryResult]] = {}
        self._lock = threading.Lock()
        self.round_trips = 0

    def run(
        self,
        source: Mapping[str, Any],
        version: str,
        sql: str,
        params: Mapping[str, Any],
        *,
        max_rows: int,
        timeout_s: float,
        workspace_path: Path | None = None,
        where: tuple[str, Sequence[Any]] | None = None,
    ) -> QueryResult:
        key = (source["name"], version, sql, tuple(sorted((k, _hashable(v)) for k, v in params.items())), max_rows, _hashable_where(where))
        now = self.clock()
        with self._lock:
            hit = self._items.get(key)
            if hit is not None and hit[0] > now:
                return hit[1]
        result = run(source, sql, params, max_rows=max_rows, timeout_s=timeout_s, workspace_path=workspace_path, where=where)
        ttl = int(source.get("cache_ttl_s", DEFAULT_TTL_S))
        with self._lock:
            self.round_trips += 1
            if ttl > 0:
                self._items[key] = (self.clock() + ttl, result)
                if len(self._items) > self.size:
                    for stale in sorted(self._items, key=lambda k: self._items[k][0])[: len(self._items) - self.size]:
                        del self._items[stale]
        return result


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _hashable_where(where: tuple[str, Sequence[Any]] | None) -> Any:
    return None if where is None else (where[0], tuple(where[1]))


LIVE_CACHE = LiveCache()


# --------------------------------------------------------------------------- refresh: the catalogue, not the rows


def catalogue_table(source: Mapping[str, Any], ctx: FetchContext) -> pa.Table:
    """The stand-in: an empty Arrow table with the live table's columns and types from the database's catalogue,
    marked as the live source's (`standins.mark`) so that no snapshot query answers from it; no row is read."""
    name = source["name"]
    if spark_connect.is_spark(source):
        try:
            fields = spark_connect.columns(source, ctx.secret)
        except spark_connect.SparkFailure as exc:
            raise ctx.error(name, f"cannot read the catalogue: {str(exc).removeprefix(name + ': ')}") from None
        return standins.mark(pa.schema([pa.field(n, t, metadata=m) for n, t, m in fields]).empty_table(), name)
    import sqlalchemy as sa
    from sqlalchemy.exc import NoSuchTableError, SQLAlchemyError

    engine = _sql().engine_for(dict(source), ctx)
    schema, _, table = source["table"].rpartition(".")
    try:
        columns = sa.inspect(engine).get_columns(table, schema=schema or None)
    except NoSuchTableError:
        raise ctx.error(name, f"table {source['table']!r} not found in the database") from None
    except SQLAlchemyError as exc:
        raise ctx.error(name, f"cannot read the catalogue: {first_line(getattr(exc, 'orig', None) or exc)}") from None
    finally:
        engine.dispose()
    return standins.mark(pa.schema([pa.field(c["name"], _arrow_type(c["type"])) for c in columns]).empty_table(), name)


def _arrow_type(sql_type: Any) -> pa.DataType:
    """The Arrow type the snapshot connector would give this column's values."""
    import sqlalchemy as sa

    if isinstance(sql_type, sa.Boolean):
        return pa.bool_()
    if isinstance(sql_type, sa.Integer):
        return pa.int64()
    if isinstance(sql_type, (sa.Float, sa.Numeric)):
        return pa.float64()
    if isinstance(sql_type, sa.DateTime):
        return pa.timestamp("us", tz="UTC") if getattr(sql_type, "timezone", False) else pa.timestamp("us")
    if isinstance(sql_type, sa.Date):
        return pa.date32()
    if isinstance(sql_type, sa.Time):
        return pa.time64("us")
    if isinstance(sql_type, (sa.LargeBinary, sa.types._Binary)):
        return pa.binary()
    return pa.string()
