"""Apache Spark through Spark Connect: a `sql` source whose `url` is `sc://HOST:PORT`.

A Spark source is a `sql` source with a Spark Connect URL rather than a type of its own: it is a SQL
engine reached by URL like the others, so everything a live SQL source has (the empty stand-in, the
engine's routing, row filters, the change marker, the live profile, Explain, Data as of) applies
unchanged, and moving from a local server to a Spark cluster or a Databricks warehouse is a change of
URL. What differs is the wire: the Spark Connect client (`pyspark-client`, gRPC, Arrow results)
instead of SQLAlchemy, and so this module instead of `sql_source`:

- `query`: one statement, already checked and transpiled to Spark SQL by `lib.data.live`, with the
  filter values as named parameters (`spark.sql(text, args=...)`, never spliced into the text). It runs
  on a thread of its own under an operation tag; at the time limit the tag is interrupted on the
  server (`interruptTag`), and a server that does not answer even that within GRACE_S is given up on.
- `columns`: the table's schema from Spark's catalogue (an analyze call, no rows read).
- `fetch`: snapshot mode (no `mode: live`): the table or query result copied as Arrow, for small tables.
- `Connection`: the live profile's aggregates (`lib.data.live_profile`) run in Spark through the few
  calls of a SQLAlchemy connection the profile makes.

Failures come back as `SparkFailure` in plain words (the server's own message, first line, without the
JVM stack, which goes to the log); `lost` says the server could not be reached or stopped answering,
which the live layer holds for a while (`live.OUTAGES`) rather than asking again per component.

Types Spark has and the dashboards' Arrow results do not (maps, arrays, structs, intervals): such a
column is text in the stand-in, left out of the profile's statistics, and a query returning it fails
naming the column and saying how to select it (`to_json(col)`, a field, a cast). Decimals arrive as
numbers (integers when whole), as from every other source.

The client is imported on first use (it loads gRPC and pandas); a workspace without a Spark source never
loads it. The app's requirement is the thin `pyspark-client`; the tests' server is the full `pyspark` in a
venv of its own (`make spark`), since both provide the module `pyspark` and must not share a venv.
"""

from __future__ import annotations

import atexit
import logging
import re
import sys
import threading
import uuid
import warnings
from typing import TYPE_CHECKING, Any, Callable, Mapping

import pyarrow as pa

from ..coltypes import plain_numbers
from .policy import RetryPolicy

if TYPE_CHECKING:
    from .base import FetchContext

log = logging.getLogger(__name__)

SCHEME = "sc://"
DEFAULT_PORT = 15002
DEFAULT_TIMEOUT_S = 10.0  # connecting and each metadata call; a dashboard query has its own limit
GRACE_S = 5.0  # after the interrupt at the time limit, how long the server has to say the query stopped
SNAPSHOT_TIMEOUT_S = 600.0  # copying a table for a snapshot
# URL parameters (`sc://host:port/;name=value`) a source may set; `token` is a secret and comes from `password`.
URL_PARAMETERS = frozenset({"user_id", "use_ssl", "user_agent"})


class SparkFailure(Exception):
    """A Spark call failed; `str()` is for the user, `lost` says the server was unreachable or stopped answering."""

    def __init__(self, message: str, *, lost: bool = False):
        super().__init__(message)
        self.lost = lost


def is_spark(source: Mapping[str, Any]) -> bool:
    return str(source.get("url") or "").startswith(SCHEME)


def address(source: Mapping[str, Any]) -> str:
    """HOST:PORT of the source's server, for messages."""
    rest = str(source["url"])[len(SCHEME) :].split("/", 1)[0]
    return rest if ":" in rest else f"{rest}:{DEFAULT_PORT}"


def remote_url(source: Mapping[str, Any], secret: Callable[[str, str], str] | None = None) -> str:
    """The client's connection string: the source's URL, checked, with the token resolved from `password`."""
    name = source["name"]
    rest = str(source["url"])[len(SCHEME) :]
    host_port, _, tail = rest.partition("/")
    host, _, port = host_port.partition(":")
    if not host or (port and not port.isdigit()):
        raise SparkFailure(f"{name}: url must be sc://HOST:PORT (e.g. sc://127.0.0.1:15002), not {source['url']!r}")
    parameters = [p for p in tail.split(";") if p]
    for parameter in parameters:
        key = parameter.partition("=")[0]
        if key == "token":
            raise SparkFailure(f"{name}: the token goes in `password` as a secret reference (env:NAME or secrets:KEY), never in the url")
        if key not in URL_PARAMETERS:
            raise SparkFailure(f"{name}: url parameter {key!r} is not one dashmem passes on (allowed: {', '.join(sorted(URL_PARAMETERS))})")
    if source.get("password"):
        if secret is None:
            raise SparkFailure(f"{name}: the server's token could not be resolved here")
        parameters.append(f"token={secret(name, source['password'])}")
    url = f"{SCHEME}{host}:{port or DEFAULT_PORT}"
    return url + ("/;" + ";".join(parameters) if parameters else "")


# --------------------------------------------------------------------------- sessions


_SESSIONS: dict[tuple, Any] = {}
_SESSIONS_LOCK = threading.Lock()


def _client() -> Any:
    """The Spark Connect client's SparkSession class, imported on first use, its own error logging silenced
    (it prints each failed query's JVM stack to stderr; ours goes to the log once, in one line)."""
    # The client takes a __main__ with neither a spec nor a file (an xdist worker, an embedding host) for its own
    # doctest run and exits the process; such a __main__ gets a stand-in file name for the import only.
    main = sys.modules.get("__main__")
    stand_in = main is not None and getattr(main, "__spec__", None) is None and not hasattr(main, "__file__") and not hasattr(sys, "ps1")
    if stand_in:
        main.__file__ = "<dashmem>"  # pyright: ignore[reportOptionalMemberAccess]
    try:
        with warnings.catch_warnings():  # "PySpark does not yet fully support pandas >= 3.0.0": it converts no pandas here
            warnings.simplefilter("ignore", FutureWarning)
            from pyspark.logger.logger import PySparkLogger
            from pyspark.sql.connect.session import SparkSession
    finally:
        if stand_in:
            del main.__file__  # pyright: ignore[reportOptionalMemberAccess]

    # Its retry loop warns once it gives up; the failure it raises says so, in our words.
    warnings.filterwarnings("ignore", message=r"\[RETRIES_EXCEEDED\]", category=UserWarning)
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL + 1)
    return SparkSession


def connect(url: str, attempts: int = 2) -> Any:
    """A session of its own to the server at `url` (a tool's or a test's, outside any source): few retries, and
    closed at exit without asking the server anything (see `close_at_exit`)."""
    spark = _client().builder.remote(url).create()
    _set_retries(spark, RetryPolicy(timeout_s=DEFAULT_TIMEOUT_S, attempts=attempts, backoff_s=0.2))
    close_at_exit(spark)
    return spark


def session(source: Mapping[str, Any], secret: Callable[[str, str], str] | None = None) -> Any:
    """One Spark Connect session per server and credentials, shared by the process's threads (operation tags
    are per thread). Connecting is lazy in the client; a server that cannot be reached fails the first call."""
    url = remote_url(source, secret)
    key = (url, repr(source.get("retry")))
    with _SESSIONS_LOCK:
        found = _SESSIONS.get(key)
        if found is not None:
            return found
        spark = _client().builder.remote(url).create()
        _set_retries(spark, RetryPolicy.of(dict(source), DEFAULT_TIMEOUT_S))
        close_at_exit(spark)
        _SESSIONS[key] = spark
        return spark


def close_at_exit(spark: Any) -> None:
    """Close the session's channel when the process ends, without a word to the server. The client's own exit
    handler otherwise asks the server to clean a cache first: a CLI run whose server had gone away waited out every
    retry, and one whose server hung waited for good. Handlers run last-registered first, so this one runs before it."""
    atexit.register(_quietly_close, spark)


def _quietly_close(spark: Any) -> None:
    """Close the session's gRPC channel now, without a word to the server. The client's `close()` first waits up
    to 10 s for its pending releases, which on a hung server never come; closing the channel underneath cancels them."""
    try:
        channel = getattr(spark.client, "_channel", None)
        if channel is not None:
            channel.close()
        threading.Thread(target=spark.client.close, daemon=True, name="dashmem-spark-close").start()
    except Exception:  # noqa: BLE001 - the session is dropped either way
        log.debug("closing a Spark session failed", exc_info=True)


def _set_retries(spark: Any, policy: RetryPolicy) -> None:
    """The source's `retry` as the client's own retry policy (it retries only an unreachable server, UNAVAILABLE):
    its default waits ten minutes before giving up on a server that is down."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    spark.client.set_retry_policies(
        [
            DefaultPolicy(
                max_retries=max(0, policy.attempts - 1),
                initial_backoff=int(policy.backoff_s * 1000),
                backoff_multiplier=2.0,
                max_backoff=int(policy.max_backoff_s * 1000),
                jitter=0,
                recognize_server_retry_delay=False,
            )
        ]
    )


def forget(source: Mapping[str, Any]) -> None:
    """Drop the process's sessions to the source's server after it was lost or stopped answering, closing their
    channels at once: that cancels the calls still waiting on it, among them the client's own background threads,
    which the interpreter joins at exit (a CLI run after a hung server never ended). The next call connects anew."""
    prefix = f"{SCHEME}{address(source)}"
    with _SESSIONS_LOCK:
        for key in [k for k in _SESSIONS if k[0].startswith(prefix)]:
            _quietly_close(_SESSIONS.pop(key))


# --------------------------------------------------------------------------- running


def call(source: Mapping[str, Any], work: Callable[[Any], Any], timeout_s: float, secret: Callable[[str, str], str] | None = None) -> Any:
    """`work(spark)` on a thread of its own under a fresh operation tag, stopped on the server at `timeout_s`."""
    spark = session(source, secret)
    tag = f"dashmem-{uuid.uuid4().hex}"
    box: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            spark.addTag(tag)
            try:
                box["value"] = work(spark)
            finally:
                spark.removeTag(tag)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread, which raises it
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, daemon=True, name="dashmem-spark").start()
    if not done.wait(timeout_s):
        threading.Thread(target=_interrupt, args=(spark, tag), daemon=True).start()
        if not done.wait(GRACE_S):
            forget(source)
            raise SparkFailure(
                f"{source['name']}: the Spark Connect server at {address(source)} sent nothing for {timeout_s + GRACE_S:g} s; "
                "check the server and the network to it",
                lost=True,
            )
        if "value" not in box:
            raise SparkFailure(f"the query ran longer than {timeout_s:g} s in {source['name']}'s Spark and was stopped")
    if "error" in box:
        raise _failure(source, box["error"]) from None
    return box["value"]


def _interrupt(spark: Any, tag: str) -> None:
    try:
        spark.interruptTag(tag)
    except Exception:  # noqa: BLE001 - the caller gives up after GRACE_S either way
        log.info("interrupting Spark operation %s failed", tag, exc_info=True)


def query(
    source: Mapping[str, Any],
    text: str,
    args: Mapping[str, Any],
    *,
    max_rows: int,
    timeout_s: float,
    secret: Callable[[str, str], str] | None = None,
) -> tuple[pa.Table, bool]:
    """The rows of one Spark SQL SELECT (at most `max_rows`; whether there were more) as plain Arrow columns."""
    table = call(source, lambda spark: spark.sql(text, args=dict(args) or None).toArrow(), timeout_s, secret)
    truncated = table.num_rows > max_rows
    return dashboard_table(source, table.slice(0, max_rows)), truncated


def dashboard_table(source: Mapping[str, Any], table: pa.Table) -> pa.Table:
    """Decimals as numbers; a map, array, struct or interval column refused, naming it and saying how to select it."""
    for f in table.schema:
        if unsupported(f.type):
            raise SparkFailure(
                f"{source['name']}: column {f.name!r} is a Spark {spark_type_name(f.type)}, which a dashboard cannot show; "
                f"select a field of it, a cast, or to_json({f.name}) instead"
            )
    return plain_numbers(table)


def unsupported(kind: pa.DataType) -> bool:
    return pa.types.is_nested(kind) or pa.types.is_interval(kind) or pa.types.is_duration(kind)


def spark_type_name(kind: pa.DataType) -> str:
    if pa.types.is_map(kind):
        return "map"
    if pa.types.is_struct(kind):
        return "struct"
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return "array"
    return "interval"


def _failure(source: Mapping[str, Any], exc: BaseException) -> SparkFailure:
    """The client's exception in plain words: the server's message, first line, without the error class and JVM stack."""
    if isinstance(exc, SparkFailure):
        return exc
    name = source["name"]
    text = str(exc)
    log.info("Spark source %s: %s: %s", name, type(exc).__name__, text)
    condition = getattr(exc, "getCondition", lambda: None)()
    if condition == "OPERATION_CANCELED" or "OPERATION_CANCELED" in text:
        return SparkFailure(f"the query ran longer than its time limit in {name}'s Spark and was stopped")
    if _unreachable(exc):
        forget(source)
        return SparkFailure(f"{name}: cannot reach the Spark Connect server at {address(source)} (is it running?)", lost=True)
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(exc).__name__)
    first = re.sub(r"^\[[A-Z_.]+\]\s*", "", first)  # [TABLE_OR_VIEW_NOT_FOUND] The table ...
    first = re.sub(r"\s*SQLSTATE: \w+.*$", "", first)
    first = re.sub(r"^\((?:org|java)\.[\w.$]+\)\s*", "", first)  # (org.apache.spark.SparkException) ...
    return SparkFailure(f"{name}: {first[:400]}")


def _unreachable(exc: BaseException) -> bool:
    """The server could not be reached, or went away mid-call (gRPC UNAVAILABLE, a reset stream, a stopped server)."""
    for candidate in (exc, exc.__cause__, exc.__context__):
        code = getattr(candidate, "code", None)
        if callable(code):
            try:
                if getattr(code(), "name", "") in ("UNAVAILABLE", "CANCELLED"):
                    return True
            except Exception:  # noqa: BLE001 - not a gRPC error after all
                pass
    text = str(exc)
    return any(
        words in text
        for words in ("UNAVAILABLE", "failed to connect to all addresses", "Connection refused", "Socket closed", "RST_STREAM", "stopped SparkContext")
    )


# --------------------------------------------------------------------------- the catalogue


# A stand-in column of a type dashboards cannot show (map, array, struct, interval) carries its Spark type here.
UNSUPPORTED_KEY = b"dashmem.spark_type"


def columns(source: Mapping[str, Any], secret: Callable[[str, str], str] | None = None) -> list[tuple[str, pa.DataType, dict | None]]:
    """The live table's columns, the Arrow type each arrives as, and for a type dashboards cannot show its Spark
    type as field metadata (`UNSUPPORTED_KEY`; the column is text in the stand-in), from Spark's catalogue:
    the table's cached file listing refreshed, then an analyze call; no row read."""
    timeout = RetryPolicy.of(dict(source), DEFAULT_TIMEOUT_S).timeout_s

    def read(spark: Any) -> Any:
        # A session keeps the file listing of a table it has read: without this, rows another writer added stay
        # unseen by it (and the change marker never moves) until the server restarts.
        spark.catalog.refreshTable(source["table"])
        return spark.table(source["table"]).schema

    schema = call(source, read, max(timeout, 30.0), secret)
    out = []
    for f in schema.fields:
        text = f.dataType.simpleString()
        shown = not text.startswith(("map<", "array<", "struct<", "interval"))
        out.append((f.name, arrow_type(f.dataType), None if shown else {UNSUPPORTED_KEY: text.encode()}))
    return out


def unsupported_columns(stand_in: pa.Table) -> dict[str, str]:
    """The stand-in's columns of types dashboards cannot show, with their Spark types."""
    return {f.name: f.metadata[UNSUPPORTED_KEY].decode() for f in stand_in.schema if f.metadata and UNSUPPORTED_KEY in f.metadata}


def arrow_type(spark_type: Any) -> pa.DataType:
    """The Arrow type a column of this Spark type has in a dashboard's result (the stand-in's column type)."""
    kind = type(spark_type).__name__
    if kind == "BooleanType":
        return pa.bool_()
    if kind in ("ByteType", "ShortType", "IntegerType", "LongType"):
        return pa.int64()
    if kind in ("FloatType", "DoubleType"):
        return pa.float64()
    if kind == "DecimalType":
        return pa.int64() if spark_type.scale == 0 and spark_type.precision <= 18 else pa.float64()
    if kind == "DateType":
        return pa.date32()
    if kind == "TimestampType":
        return pa.timestamp("us", tz="UTC")
    if kind == "TimestampNTZType":
        return pa.timestamp("us")
    if kind == "BinaryType":
        return pa.binary()
    return pa.string()  # strings, chars, varchars; maps, arrays, structs and intervals are refused when selected


# --------------------------------------------------------------------------- snapshot mode


def fetch(source: dict, ctx: FetchContext) -> pa.Table:
    """The whole table or query result, copied as Arrow (snapshot mode: meant for small tables)."""
    if (source.get("incremental") or {}).get("cursor"):
        raise ctx.error(source["name"], "incremental refresh of a Spark source is not supported; use mode: live for a big table")

    def work(spark: Any) -> pa.Table:
        frame = spark.sql(source["query"]) if source.get("query") else spark.table(source["table"])
        return frame.toArrow()

    try:
        table = call(source, work, float(source.get("query_timeout_s") or SNAPSHOT_TIMEOUT_S), ctx.secret)
        return dashboard_table(source, table)
    except SparkFailure as exc:
        raise ctx.error(source["name"], str(exc).removeprefix(f"{source['name']}: ")) from None


# --------------------------------------------------------------------------- the live profile's connection


class Connection:
    """The calls of a SQLAlchemy connection `lib.data.live_profile` makes, answered by Spark: `dialect.name`,
    `dialect.identifier_preparer.quote`, and `exec_driver_sql(text)` with `.one()`, `.first()`, `.all()`,
    `.scalar_one()`. Each statement runs under the profile's time limit."""

    class _Preparer:
        @staticmethod
        def quote(name: str) -> str:
            return "`" + name.replace("`", "``") + "`"

    class _Dialect:
        name = "spark"
        identifier_preparer: Connection._Preparer

    def __init__(self, source: Mapping[str, Any], timeout_s: float, secret: Callable[[str, str], str] | None = None):
        self.source, self.timeout_s, self.secret = source, timeout_s, secret
        self.dialect = self._Dialect()
        self.dialect.identifier_preparer = self._Preparer()

    def exec_driver_sql(self, text: str) -> _Rows:
        table = plain_numbers(call(self.source, lambda spark: spark.sql(text).toArrow(), self.timeout_s, self.secret))
        return _Rows(list(zip(*(column.to_pylist() for column in table.columns))))

    def rollback(self) -> None:  # nothing is ever written
        pass


class _Rows:
    def __init__(self, rows: list[tuple]):
        self.rows = rows

    def one(self) -> tuple:
        if len(self.rows) != 1:
            raise SparkFailure(f"expected one row from Spark, got {len(self.rows)}")
        return self.rows[0]

    def first(self) -> tuple | None:
        return self.rows[0] if self.rows else None

    def all(self) -> list[tuple]:
        return self.rows

    def scalar_one(self) -> Any:
        return self.one()[0]
