"""The `sql` connector against real databases: SQLite always, PostgreSQL and MariaDB when their servers answer.

Every fetch goes through `lib.data.connectors.base.fetch`, so the dispatch by `type` is
exercised too. Each test makes its own uniquely named tables (and users) and
drops them afterwards.
"""

from __future__ import annotations

import datetime as dt
import os
import sqlite3
import time
import uuid
import weakref
from pathlib import Path

import pyarrow as pa
import pytest
import sqlalchemy as sa
from sqlalchemy import event

from lib.data.connectors import sql_source
from lib.data.connectors.base import FetchContext, SourceError, fetch
from tests.helpers.databases import DATABASE, PG_URL

from ..conftest import SERVERS, FlakyProxy, server_engine

BACKENDS = ["sqlite", *SERVERS]


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session")
def postgresql_engine():
    engine = server_engine("postgresql")
    yield engine
    engine.dispose()


@pytest.fixture(scope="session")
def mariadb_engine():
    engine = server_engine("mariadb")
    yield engine
    engine.dispose()


class Database:
    """One backend as a test sees it: the url a source names, and admin access to set up and clean up."""

    def __init__(self, kind: str, admin: sa.Engine, source_url: str, workspace: Path):
        self.kind = kind
        self.admin = admin
        self.source_url = source_url
        self.ctx = FetchContext(workspace_path=workspace)
        self.cleanup: list[str] = []

    def execute(self, *statements: str) -> None:
        with self.admin.begin() as connection:
            for statement in statements:
                connection.execution_options(no_parameters=True).exec_driver_sql(statement)  # `%` stays `%`

    def scalar(self, statement: str):
        with self.admin.connect() as connection:
            return connection.exec_driver_sql(statement).scalar()

    def new_table(self, columns: str, *rows: str, name: str | None = None) -> str:
        """CREATE a fresh table (dropped after the test) and INSERT the given rows; returns its name."""
        name = name or unique("dm_t")
        quoted = ".".join(map(self.admin.dialect.identifier_preparer.quote, name.split(".")))
        self.execute(f"CREATE TABLE {quoted} ({columns})", *(f"INSERT INTO {quoted} VALUES {row}" for row in rows))
        self.cleanup.append(f"DROP TABLE IF EXISTS {quoted}")
        return name

    def source(self, **settings) -> dict:
        return {"name": "orders", "type": "sql", "url": self.source_url, **settings}

    def fetch(self, **settings) -> pa.Table:
        return fetch(self.source(**settings), self.ctx)

    def drop_all(self) -> None:
        for statement in reversed(self.cleanup):
            self.execute(statement)


@pytest.fixture(params=BACKENDS)
def db(request, tmp_path):
    kind = request.param
    if kind == "sqlite":
        (tmp_path / "data").mkdir()
        sqlite3.connect(tmp_path / "data" / "shop.db").close()  # the file exists from the start, as a real one would
        admin = sa.create_engine(f"sqlite:///{tmp_path / 'data' / 'shop.db'}")
        database = Database(kind, admin, "sqlite:///data/shop.db", tmp_path)  # relative: resolved in the workspace
    else:
        admin = request.getfixturevalue(f"{kind}_engine")
        database = Database(kind, admin, SERVERS[kind][2], tmp_path)
    yield database
    database.drop_all()
    if kind == "sqlite":
        admin.dispose()


@pytest.fixture(params=list(SERVERS))
def server_db(request, tmp_path):
    """Like `db`, for the tests that need a server with users and passwords."""
    kind = request.param
    database = Database(kind, request.getfixturevalue(f"{kind}_engine"), SERVERS[kind][2], tmp_path)
    yield database
    database.drop_all()


# --- types and modes --------------------------------------------------------------------------------

COLUMNS = {
    "sqlite": "id INTEGER, i INTEGER, f REAL, n NUMERIC(10,2), t TEXT, d DATE, ts TIMESTAMP, b BOOLEAN",
    "postgresql": "id INTEGER, i INTEGER, f DOUBLE PRECISION, n NUMERIC(10,2), t TEXT, d DATE, ts TIMESTAMP, b BOOLEAN",
    "mariadb": "id INTEGER, i INTEGER, f DOUBLE, n DECIMAL(10,2), t TEXT, d DATE, ts DATETIME, b BOOLEAN",
}
FULL_ROW = "(1, 42, 2.5, 12.34, 'hello', '2024-03-01', '2024-03-01 12:30:15', TRUE)"
NULL_ROW = "(2, NULL, NULL, NULL, NULL, NULL, NULL, NULL)"

# SQLite keeps dates and timestamps as the text they were written as, and booleans as 0/1;
# MySQL/MariaDB BOOLEAN is TINYINT(1). The connector passes on what the database holds.
EXPECTED_TYPES = {
    "sqlite": dict(d=pa.string(), ts=pa.string(), b=pa.int64()),
    "postgresql": dict(d=pa.date32(), ts=pa.timestamp("us"), b=pa.bool_()),
    "mariadb": dict(d=pa.date32(), ts=pa.timestamp("us"), b=pa.int64()),
}
EXPECTED_VALUES = {
    "sqlite": dict(d="2024-03-01", ts="2024-03-01 12:30:15", b=1),
    "postgresql": dict(d=dt.date(2024, 3, 1), ts=dt.datetime(2024, 3, 1, 12, 30, 15), b=True),
    "mariadb": dict(d=dt.date(2024, 3, 1), ts=dt.datetime(2024, 3, 1, 12, 30, 15), b=1),
}


def test_table_mode_brings_every_type_with_its_values_and_nulls(db):
    table = db.new_table(COLUMNS[db.kind], FULL_ROW, NULL_ROW)
    result = db.fetch(table=table)
    assert result.column_names == ["id", "i", "f", "n", "t", "d", "ts", "b"]
    types = {field.name: field.type for field in result.schema}
    assert types == dict(id=pa.int64(), i=pa.int64(), f=pa.float64(), n=pa.float64(), t=pa.string(), **EXPECTED_TYPES[db.kind])
    full, empty = sorted(result.to_pylist(), key=lambda row: row["id"])
    assert full == dict(id=1, i=42, f=2.5, n=12.34, t="hello", **EXPECTED_VALUES[db.kind])
    assert empty == dict(id=2, i=None, f=None, n=None, t=None, d=None, ts=None, b=None)


def test_query_mode_runs_the_sql_as_written(db):
    table = db.new_table("id INTEGER, t VARCHAR(20)", "(1, 'apple')", "(2, 'banana')", "(3, 'cherry')")
    # `%` and `:name` must reach the database untouched, not be taken for bind parameters.
    result = db.fetch(query=f"SELECT id, t AS fruit, ':kept' AS marker FROM {table} WHERE t LIKE '%an%' ORDER BY id")
    assert result.to_pylist() == [{"id": 2, "fruit": "banana", "marker": ":kept"}]


def test_query_with_no_rows_keeps_its_columns(db):
    table = db.new_table("id INTEGER, t VARCHAR(20)", "(1, 'apple')")
    result = db.fetch(query=f"SELECT id, t FROM {table} WHERE id > 99")
    assert result.num_rows == 0 and result.column_names == ["id", "t"]


def test_schema_qualified_table(db):
    if db.kind == "sqlite":
        schema = "main"
    else:
        schema = unique("dm_s")
        db.execute(f"CREATE SCHEMA {schema}")  # a database in MariaDB, which is what a schema is there
        db.cleanup.append(f"DROP SCHEMA {schema} CASCADE" if db.kind == "postgresql" else f"DROP DATABASE {schema}")
    table = db.new_table("id INTEGER, t VARCHAR(20)", "(7, 'qualified')", name=unique(f"{schema}.dm_t"))
    assert db.fetch(table=table).to_pylist() == [{"id": 7, "t": "qualified"}]


def test_table_names_are_quoted_not_pasted_into_sql(db):
    mixed_case = db.new_table("id INTEGER", "(1)", name=unique("Dm_Mixed"))
    assert db.fetch(table=mixed_case).to_pylist() == [{"id": 1}]
    victim = db.new_table("id INTEGER", "(1)")
    with pytest.raises(SourceError, match="cannot read table"):
        db.fetch(table=f"{victim}; DROP TABLE {victim}")
    assert db.scalar(f"SELECT COUNT(*) FROM {victim}") == 1


def test_a_statement_that_returns_no_rows_is_refused_and_rolled_back(db):
    table = db.new_table("id INTEGER, t VARCHAR(20)", "(1, 'before')")
    with pytest.raises(SourceError, match="returns no rows; write a SELECT"):
        db.fetch(query=f"UPDATE {table} SET t = 'after'")
    assert db.scalar(f"SELECT t FROM {table}") == "before"


def test_duplicate_column_names_are_refused_with_a_hint(db):
    table = db.new_table("id INTEGER", "(1)")
    with pytest.raises(SourceError, match="more than one column named id; give them distinct aliases"):
        db.fetch(query=f"SELECT id, id FROM {table}")


# --- a batch at a time ---------------------------------------------------------------------------------

# Eight rows fetched three at a time: the first batch is NULL in every column but id, so each column's
# first chunk has no type of its own; `z` is NULL throughout; in SQLite, `n` holds 12 (12.00 is stored
# as an integer) in one batch and 12.34 in another.
BATCHED_ROWS = (
    "(1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
    "(2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
    "(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
    "(4, 42, 2.5, 12.00, 'hello', '2024-03-01', '2024-03-01 12:30:15', TRUE, NULL)",
    "(5, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
    "(6, 7, 3.0, 12.00, 'world', '2024-03-02', '2024-03-02 08:00:00', FALSE, NULL)",
    "(7, -1, 0.5, 12.34, 'again', '2024-03-03', '2024-03-03 23:59:59', TRUE, NULL)",
    "(8, 8, 1.25, 0.01, 'last', '2024-03-04', '2024-03-04 00:00:01', FALSE, NULL)",
)


def test_types_across_batches_are_those_of_the_whole_column(db, monkeypatch):
    table = db.new_table(COLUMNS[db.kind] + ", z TEXT", *BATCHED_ROWS)
    query = f"SELECT * FROM {table} ORDER BY id"
    whole = db.fetch(query=query)  # one batch
    monkeypatch.setattr(sql_source, "ROWS_PER_BATCH", 3)
    batched = db.fetch(query=query)
    assert [column.num_chunks for column in batched.columns if column.type != pa.null()] == [3] * 8  # made per batch
    types = {field.name: field.type for field in batched.schema}
    assert types == dict(id=pa.int64(), i=pa.int64(), f=pa.float64(), n=pa.float64(), t=pa.string(), **EXPECTED_TYPES[db.kind], z=pa.null())
    assert batched.schema == whole.schema and batched.to_pylist() == whole.to_pylist()
    rows = batched.to_pylist()
    assert [row["i"] for row in rows] == [None, None, None, 42, None, 7, -1, 8]
    assert [row["n"] for row in rows] == [None, None, None, 12.0, None, 12.0, 12.34, 0.01]
    assert rows[3] == dict(id=4, i=42, f=2.5, n=12.0, t="hello", **EXPECTED_VALUES[db.kind], z=None)
    assert rows[4] == dict.fromkeys(rows[4], None) | {"id": 5}


def test_table_mode_streams_in_batches(db, monkeypatch):
    """Table mode reads from a server-side cursor where the driver has one that runs our SELECT as it is."""
    table = db.new_table("id INTEGER, t VARCHAR(20)", *(f"({n}, 'row {n}')" for n in range(10)))
    cursors = []

    def seen(conn, cursor, statement, parameters, context, executemany):
        cursors.append(cursor)

    monkeypatch.setattr(sql_source, "ROWS_PER_BATCH", 3)
    event.listen(sa.Engine, "before_cursor_execute", seen)
    try:
        result = db.fetch(table=table)
    finally:
        event.remove(sa.Engine, "before_cursor_execute", seen)
    assert sorted(result.column("id").to_pylist()) == list(range(10))
    assert [len(chunk) for chunk in result.column("t").chunks] == [3, 3, 3, 1]
    (cursor,) = cursors
    if db.kind == "postgresql":
        assert cursor.name  # a named cursor is psycopg2's server-side one
    elif db.kind == "mariadb":
        assert type(cursor).__name__ == "SSCursor"  # PyMySQL's unbuffered cursor


def test_postgresql_queries_keep_a_client_side_cursor(postgresql_engine, tmp_path):
    """A server-side cursor would wrap the query in DECLARE ... CURSOR, which refuses a data-modifying WITH."""
    database = Database("postgresql", postgresql_engine, SERVERS["postgresql"][2], tmp_path)
    try:
        table = database.new_table("id INTEGER, t VARCHAR(20)", "(1, 'before')")
        result = database.fetch(query=f"WITH changed AS (UPDATE {table} SET t = 'after' RETURNING id, t) SELECT * FROM changed")
        assert result.to_pylist() == [{"id": 1, "t": "after"}]
        assert database.scalar(f"SELECT t FROM {table}") == "before"  # rolled back, as every fetch is
    finally:
        database.drop_all()


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        # (values in id order, fetched two at a time) -> the column as Arrow has it, the same as in one batch
        (["1", "2", "2.5", "NULL", "3"], (pa.float64(), [1.0, 2.0, 2.5, None, 3.0])),
        (["1", "2.5", "'x'", "NULL", "3", "4.0"], (pa.string(), ["1", "2.5", "x", None, "3", "4.0"])),
        (["NULL", "NULL", "'x'", "X'ff'", "'y'"], (pa.binary(), [None, None, b"x", b"\xff", b"y"])),
        (["'a'", "X'ff'", "1", "1.5"], (pa.string(), ["a", "b'\\xff'", "1", "1.5"])),
        (["1", "9007199254740993", "0.5", "NULL"], (pa.string(), ["1", "9007199254740993", "0.5", None])),
    ],
)
def test_sqlite_columns_of_mixed_kinds_across_batches(tmp_path, monkeypatch, values, expected):
    """SQLite lets one column hold numbers, text and bytes: batches must not change what the column becomes."""
    (tmp_path / "data").mkdir()
    with sqlite3.connect(tmp_path / "data" / "mixed.db") as con:
        con.execute("CREATE TABLE mixed (id INTEGER, v)")
        for n, value in enumerate(values):
            con.execute(f"INSERT INTO mixed VALUES ({n}, {value})")
    source = {"name": "mixed", "type": "sql", "url": "sqlite:///data/mixed.db", "query": "SELECT v FROM mixed ORDER BY id"}
    whole = fetch(source, FetchContext(workspace_path=tmp_path)).column("v")
    monkeypatch.setattr(sql_source, "ROWS_PER_BATCH", 2)
    batched = fetch(source, FetchContext(workspace_path=tmp_path)).column("v")
    assert (batched.type, batched.to_pylist()) == expected == (whole.type, whole.to_pylist())


def test_a_batch_of_rows_is_let_go_before_the_next_is_fetched():
    """Peak memory is a batch plus the Arrow result: no batch of Python rows outlives its conversion."""

    class Row(list):  # a driver's row that can be watched going away (tuples cannot be weakly referenced)
        pass

    handed_out: list[weakref.ref] = []

    def batches():
        for start in range(0, 12, 3):
            assert not [ref for ref in handed_out if ref() is not None], "an earlier batch of rows is still held"
            rows = [Row([n, f"t{n}", None if n < 6 else n / 2]) for n in range(start, start + 3)]
            handed_out.extend(map(weakref.ref, rows))
            yield rows
            del rows

    table = sql_source.arrow_table(["id", "t", "half"], batches())
    assert len(handed_out) == 12 and not [ref for ref in handed_out if ref() is not None]
    assert table.schema == pa.schema([("id", pa.int64()), ("t", pa.string()), ("half", pa.float64())])
    assert table.column("half").to_pylist() == [None] * 6 + [3.0, 3.5, 4.0, 4.5, 5.0, 5.5]
    assert table.column("id").num_chunks == 4


def test_decimal_and_json_columns_convert_in_every_batch(postgresql_engine, tmp_path, monkeypatch):
    database = Database("postgresql", postgresql_engine, SERVERS["postgresql"][2], tmp_path)
    try:
        table = database.new_table(
            "id INTEGER, n NUMERIC, j JSONB", "(1, NULL, NULL)", '(2, 1.50, \'{"b": 1, "a": [1, 2]}\')', "(3, 'NaN', '[1]')", "(4, 10, NULL)"
        )
        monkeypatch.setattr(sql_source, "ROWS_PER_BATCH", 1)
        result = database.fetch(query=f"SELECT n, j FROM {table} ORDER BY id")
    finally:
        database.drop_all()
    assert result.schema == pa.schema([("n", pa.float64()), ("j", pa.string())])
    n, j = result.column("n").to_pylist(), result.column("j").to_pylist()
    assert n[0] is None and n[1] == 1.5 and n[2] != n[2] and n[3] == 10.0  # NaN stays NaN
    assert j == [None, '{"a": [1, 2], "b": 1}', "[1]", None]


# --- failures worded for people --------------------------------------------------------------------


def test_bad_sql_says_query_failed_with_the_database_reason(db):
    with pytest.raises(SourceError) as caught:
        db.fetch(query="SELEC 1")
    message = str(caught.value)
    assert message.startswith("source 'orders': query failed:") and "syntax" in message.lower()
    assert "sqlalche.me" not in message  # SQLAlchemy's help link and statement echo are left out


def test_missing_table_names_the_table(db):
    missing = unique("dm_missing")
    with pytest.raises(SourceError) as caught:
        db.fetch(table=missing)
    message = str(caught.value)
    assert f"cannot read table '{missing}'" in message
    assert {"sqlite": "no such table", "postgresql": "does not exist", "mariadb": "doesn't exist"}[db.kind] in message


def test_missing_password_variable_names_the_reference(db, monkeypatch):
    variable = unique("DM_UNSET").upper()
    monkeypatch.delenv(variable, raising=False)
    with pytest.raises(SourceError, match=f"source 'orders': secret env:{variable} is not set"):
        db.fetch(query="SELECT 1", password=f"env:{variable}")


def test_a_password_written_into_the_settings_is_refused_without_echo(db):
    with pytest.raises(SourceError, match="must be a secret reference") as caught:
        db.fetch(query="SELECT 1", password="hunter2-pasted")
    assert "hunter2-pasted" not in str(caught.value)


# --- passwords by reference, against servers that check them -----------------------------------------


@pytest.fixture
def password_user(server_db, monkeypatch):
    """A server login with a password, allowed to read one fresh table; returns (database, url, table, password)."""
    user, password = unique("dm_u"), unique("pw")
    table = server_db.new_table("id INTEGER, t VARCHAR(20)", "(1, 'secret rows')")
    if server_db.kind == "postgresql":
        server_db.execute(f"CREATE ROLE {user} LOGIN PASSWORD '{password}'", f"GRANT SELECT ON {table} TO {user}")
        server_db.cleanup.insert(0, f"DROP ROLE IF EXISTS {user}")  # dropped last, after the table
        url = f"postgresql://{user}@127.0.0.1:5432/{DATABASE}"
    else:
        server_db.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'", f"GRANT SELECT ON {DATABASE}.{table} TO '{user}'@'%'")
        server_db.cleanup.insert(0, f"DROP USER IF EXISTS '{user}'@'%'")
        url = f"mysql+pymysql://{user}@127.0.0.1:3306/{DATABASE}"
    variable = unique("DM_PW").upper()
    monkeypatch.setenv(variable, password)
    return server_db, url, table, variable


def test_password_by_reference_logs_in(password_user):
    database, url, table, variable = password_user
    result = fetch(database.source(url=url, table=table, password=f"env:{variable}"), database.ctx)
    assert result.to_pylist() == [{"id": 1, "t": "secret rows"}]


def test_wrong_password_names_the_source_and_never_shows_the_password(password_user, monkeypatch):
    database, url, table, variable = password_user
    wrong = "Wr0ng-" + uuid.uuid4().hex
    monkeypatch.setenv(variable, wrong)
    try:
        fetch(database.source(url=url, table=table, password=f"env:{variable}"), database.ctx)
    except SourceError as exc:
        message = str(exc)
    else:
        pytest.skip(f"{database.kind} on 127.0.0.1 accepts any password (trust authentication)")
    assert message.startswith("source 'orders': cannot connect to") and wrong not in message
    assert {"postgresql": "password authentication failed", "mariadb": "Access denied"}[database.kind] in message


def test_password_echoed_by_the_server_is_redacted(password_user):
    """Name a database after the password: the server's 'no such database' answer repeats it, the error must not."""
    database, url, table, variable = password_user
    password = os.environ[variable]
    with pytest.raises(SourceError) as caught:
        fetch(database.source(url=url.rsplit("/", 1)[0] + "/" + password, table=table, password=f"env:{variable}"), database.ctx)
    assert password not in str(caught.value) and "***" in str(caught.value)


# --- servers that cannot be reached, drivers that are not there ---------------------------------------

UNREACHABLE = {
    "postgresql": "postgresql://postgres@127.0.0.1:1/test",
    "mariadb": "mysql+pymysql://root@127.0.0.1:1/test",
}


@pytest.mark.parametrize("kind", list(UNREACHABLE))
def test_unreachable_server_fails_fast_without_the_password(kind, tmp_path, monkeypatch):
    monkeypatch.setenv("DM_TEST_UNREACHABLE_PW", "not-for-your-eyes")
    source = {"name": "orders", "type": "sql", "url": UNREACHABLE[kind], "query": "SELECT 1", "password": "env:DM_TEST_UNREACHABLE_PW"}
    started = time.monotonic()
    with pytest.raises(SourceError) as caught:
        fetch(source, FetchContext(workspace_path=tmp_path))
    assert time.monotonic() - started < 5
    message = str(caught.value)
    assert message.startswith("source 'orders': cannot connect to") and "127.0.0.1" in message
    assert "not-for-your-eyes" not in message and "refused" in message.lower()


SILENT_URL = {"postgresql": "postgresql://postgres@127.0.0.1:{port}/test", "mariadb": "mysql+pymysql://root@127.0.0.1:{port}/test"}
NEVER_ANSWERED = "the server accepted the connection but sent nothing for 4 s"  # timeout_s 2 + the 2 s margin


@pytest.mark.parametrize("kind", list(SILENT_URL))
def test_a_server_that_never_answers_times_out_on_every_attempt(kind, tmp_path):
    """A port that accepts the TCP connection but never speaks: each attempt gives up after `timeout_s`.

    PyMySQL's connect timeout covers only the TCP connect; without a read timeout it waited for the
    server's greeting for ever."""
    proxy = FlakyProxy(None, mode="silent")
    try:
        source = {
            "name": "orders",
            "type": "sql",
            "url": SILENT_URL[kind].format(port=proxy.port),
            "query": "SELECT 1",
            "timeout_s": 2,  # libpq's smallest timeout
            "retry": {"attempts": 2, "backoff_s": 0},
        }
        with pytest.raises(SourceError, match=rf"^source 'orders': cannot connect to .* after 2 attempts: .*{NEVER_ANSWERED}"):
            fetch(source, FetchContext(workspace_path=tmp_path))
    finally:
        proxy.stop()
    assert proxy.connections == 2


# --- the retry policy against a network that drops connections -----------------------------------------

QUICK = {"attempts": 3, "backoff_s": 0.05, "max_backoff_s": 0.1}


def through(proxy: FlakyProxy, url: str) -> str:
    """`url` with its port replaced by the proxy's."""
    return sa.make_url(url).set(port=proxy.port).render_as_string(hide_password=False)


def test_connections_dropped_at_first_are_retried_until_one_gets_through(server_db):
    table = server_db.new_table("id INTEGER", "(1)", "(2)")
    proxy = FlakyProxy(("127.0.0.1", SERVERS[server_db.kind][1]), failures=2, mode="reset")
    try:
        result = fetch(server_db.source(url=through(proxy, server_db.source_url), table=table, retry=QUICK), server_db.ctx)
    finally:
        proxy.stop()
    assert result.column("id").to_pylist() == [1, 2] and proxy.connections == 3


def test_a_sql_error_is_not_retried(server_db):
    proxy = FlakyProxy(("127.0.0.1", SERVERS[server_db.kind][1]))
    try:
        with pytest.raises(SourceError, match="query failed: "):
            fetch(server_db.source(url=through(proxy, server_db.source_url), query="SELEC 1", retry=QUICK), server_db.ctx)
    finally:
        proxy.stop()
    assert proxy.connections == 1


def test_a_wrong_password_is_not_retried(password_user, monkeypatch):
    database, url, table, variable = password_user
    monkeypatch.setenv(variable, "Wr0ng-" + uuid.uuid4().hex)
    proxy = FlakyProxy(("127.0.0.1", SERVERS[database.kind][1]))
    try:
        fetch(database.source(url=through(proxy, url), table=table, password=f"env:{variable}", retry=QUICK), database.ctx)
    except SourceError as exc:
        message = str(exc)
    else:
        pytest.skip(f"{database.kind} on 127.0.0.1 accepts any password (trust authentication)")
    finally:
        proxy.stop()
    assert "after" not in message and proxy.connections == 1


def test_missing_driver_says_so_and_suggests_an_installed_one(tmp_path):
    source = {"name": "orders", "type": "sql", "url": "mysql+mysqldb://root@127.0.0.1/test", "query": "SELECT 1"}
    with pytest.raises(SourceError, match=r"driver for 'mysql\+mysqldb' is not installed .*mysql\+pymysql://"):
        fetch(source, FetchContext(workspace_path=tmp_path))


def test_unknown_dialect_points_at_the_url(tmp_path):
    source = {"name": "orders", "type": "sql", "url": "nosuchdb://host/x", "query": "SELECT 1"}
    with pytest.raises(SourceError, match="no SQLAlchemy dialect for 'nosuchdb'"):
        fetch(source, FetchContext(workspace_path=tmp_path))


def test_missing_sqlite_file_is_an_error_not_a_new_empty_database(tmp_path):
    source = {"name": "orders", "type": "sql", "url": "sqlite:///data/absent.db", "table": "orders"}
    with pytest.raises(SourceError, match=f"SQLite database file data/absent.db not found \\(looked for {tmp_path}/data/absent.db\\)"):
        fetch(source, FetchContext(workspace_path=tmp_path))
    assert not (tmp_path / "data" / "absent.db").exists()


def test_engine_is_disposed_so_no_connection_stays_open(postgresql_engine, tmp_path):
    application = unique("dm_app")
    source = {"name": "orders", "type": "sql", "url": f"{PG_URL}?application_name={application}", "query": "SELECT 1 AS one"}
    assert fetch(source, FetchContext(workspace_path=tmp_path)).to_pylist() == [{"one": 1}]
    # The server ends its side a moment after the client closed: wait for that, not for ever (a pooled connection never ends).
    deadline, still_open = time.monotonic() + 10, None
    while still_open != 0 and time.monotonic() < deadline:
        with postgresql_engine.connect() as connection:
            still_open = connection.exec_driver_sql(f"SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = '{application}'").scalar()
        time.sleep(0.05 if still_open else 0)
    assert still_open == 0


def test_timestamps_with_time_zone_keep_their_instant(postgresql_engine, tmp_path):
    source = {"name": "orders", "type": "sql", "url": SERVERS["postgresql"][2], "query": "SELECT TIMESTAMPTZ '2024-03-01 12:00:00+02' AS at"}
    column = fetch(source, FetchContext(workspace_path=tmp_path)).column("at")
    assert pa.types.is_timestamp(column.type) and column.type.tz is not None
    assert column[0].as_py() == dt.datetime(2024, 3, 1, 10, 0, tzinfo=dt.timezone.utc)


def test_sqlite_outside_the_workspace_is_refused(tmp_path):
    import sqlite3

    outside = tmp_path / "outside.db"
    with sqlite3.connect(outside) as con:
        con.execute("CREATE TABLE secrets_tbl (v TEXT)")
        con.execute("INSERT INTO secrets_tbl VALUES ('private')")
    folder = tmp_path / "ws"
    folder.mkdir()
    ctx = FetchContext(workspace_path=folder)
    for url in (f"sqlite:///{outside}", "sqlite:///../outside.db"):
        with pytest.raises(SourceError, match="outside the workspace folder"):
            fetch({"name": "leak", "type": "sql", "url": url, "table": "secrets_tbl"}, ctx)


@pytest.mark.parametrize("suffix", ["file:{p}?uri=true", "file:{p}?mode=ro&uri=true"])
def test_sqlite_uri_file_names_are_refused(tmp_path, suffix):
    import sqlite3

    outside = tmp_path / "outside.db"
    with sqlite3.connect(outside) as con:
        con.execute("CREATE TABLE s (x TEXT)")
    folder = tmp_path / "ws"
    folder.mkdir()
    with pytest.raises(SourceError, match="URI file names"):
        fetch({"name": "leak", "type": "sql", "url": "sqlite:///" + suffix.format(p=outside), "query": "SELECT * FROM s"}, FetchContext(workspace_path=folder))
