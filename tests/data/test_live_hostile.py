"""Hostile live queries and hostile networks, against the real local PostgreSQL and MariaDB.

A live query reads only its declared table (lib/data/live_guard.py): functions that run SQL given as
text, read server files, open connections, take locks, change settings or sleep are refused before
anything is sent, with a role that may read only that table and with a superuser alike. A pooled
connection forgets what a query left on its session. A connection that goes silent mid-query ends
within the source's bounds (lib/data/connectors/sql_wait.py), and the components after it do not
each wait again.
"""

from __future__ import annotations

import time
import uuid

import pytest
import sqlalchemy as sa

from lib.data import live
from lib.data.connectors.base import FetchContext, SourceError, fetch
from lib.data.sandbox import QueryError, QueryRefused
from tests.helpers.databases import DATABASE
from tests.helpers.live import _url_of_its_own

from ..conftest import SERVERS, FlakyProxy, server_engine, statements_sent

# Each attack: (what it tries, PostgreSQL's form, MariaDB's form); None where the dialect has no such thing.
ATTACKS = [
    ("runs SQL given as text", "SELECT query_to_xml('select * from {secret}', true, false, '')::text AS x FROM gates LIMIT 1", None),
    ("a table function in FROM", "SELECT * FROM gates, pg_ls_dir('.') LIMIT 1", None),
    ("a table function joined laterally", "SELECT * FROM gates CROSS JOIN LATERAL pg_ls_dir('.') AS d LIMIT 1", None),
    ("reads a server file", "SELECT pg_read_file('PG_VERSION') AS x FROM gates LIMIT 1", "SELECT load_file('/etc/passwd') AS x FROM gates LIMIT 1"),
    ("reads a large object", "SELECT lo_import('/etc/passwd') AS x FROM gates LIMIT 1", None),
    ("opens a connection", "SELECT dblink('dbname=postgres', 'select 1') AS x FROM gates LIMIT 1", None),
    ("takes a session lock", "SELECT pg_advisory_lock(4242) AS x FROM gates LIMIT 1", "SELECT get_lock('dm', 1) AS x FROM gates LIMIT 1"),
    ("changes a setting", "SELECT set_config('statement_timeout', '0', false) AS x FROM gates LIMIT 1", None),
    ("reads a setting", "SELECT current_setting('data_directory') AS x FROM gates LIMIT 1", None),
    ("sleeps", "SELECT pg_sleep(5) AS x FROM gates LIMIT 1", "SELECT sleep(5) AS x FROM gates LIMIT 1"),
    ("reads the catalogue", "SELECT * FROM pg_catalog.pg_authid", "SELECT * FROM mysql.user"),
    (
        "joins the catalogue",
        "SELECT * FROM gates JOIN information_schema.tables t ON true LIMIT 1",
        "SELECT * FROM gates JOIN information_schema.tables t ON 1=1 LIMIT 1",
    ),
    ("asks the server about itself", "SELECT version() AS v, current_user AS u FROM gates LIMIT 1", "SELECT version() AS v FROM gates LIMIT 1"),
    ("looks a name up in the catalogue", "SELECT 'pg_authid'::regclass AS r FROM gates LIMIT 1", None),
    ("reads another table", "SELECT (SELECT count(*) FROM {secret}) AS x FROM gates LIMIT 1", "SELECT (SELECT count(*) FROM {secret}) AS x FROM gates LIMIT 1"),
]


@pytest.fixture(params=["postgresql", "mariadb"])
def tables(request):
    """(kind, admin engine, the live table, a secret table beside it, a role that may read only the live table)."""
    kind = request.param
    admin = server_engine(kind)
    tag = uuid.uuid4().hex[:8]
    table, secret, role = f"dm_gates_{tag}", f"dm_secret_{tag}", f"dm_reader_{tag}"
    with admin.begin() as c:
        c.exec_driver_sql(f"CREATE TABLE {table} (site VARCHAR(20), actual BIGINT)")
        c.exec_driver_sql(f"INSERT INTO {table} VALUES ('Brno', 10), ('Lyon', 20)")
        c.exec_driver_sql(f"CREATE TABLE {secret} (name VARCHAR(20), salary BIGINT)")
        c.exec_driver_sql(f"INSERT INTO {secret} VALUES ('olivia', 99000)")
        if kind == "postgresql":
            c.exec_driver_sql(f"CREATE ROLE {role} LOGIN")
            c.exec_driver_sql(f"GRANT SELECT ON {table} TO {role}")
        else:
            c.exec_driver_sql(f"CREATE USER '{role}'@'%%'")
            c.exec_driver_sql(f"GRANT SELECT ON `{DATABASE}`.{table} TO '{role}'@'%%'")
    urls = {
        "superuser": SERVERS[kind][2],
        "reader": sa.make_url(SERVERS[kind][2]).set(username=role).render_as_string(hide_password=False),
    }
    yield kind, admin, table, secret, urls
    with admin.begin() as c:
        c.exec_driver_sql(f"DROP TABLE IF EXISTS {table}")
        c.exec_driver_sql(f"DROP TABLE IF EXISTS {secret}")
        c.exec_driver_sql(f"DROP ROLE IF EXISTS {role}" if kind == "postgresql" else f"DROP USER IF EXISTS '{role}'@'%%'")
    admin.dispose()


def _live(url: str, table: str, **extra) -> dict:
    return {"name": "gates", "type": "sql", "mode": "live", "url": url, "table": table, "cache_ttl_s": 0, **extra}


@pytest.mark.parametrize("who", ["reader", "superuser"])
def test_a_live_query_reaches_only_its_table_whoever_the_role_is(tables, who):
    kind, _, table, secret, urls = tables
    source = _live(_url_of_its_own(urls[who], f"dm_{who}"), table)
    assert live.run(source, "SELECT site, actual FROM gates ORDER BY site").table.to_pylist() == [
        {"site": "Brno", "actual": 10},
        {"site": "Lyon", "actual": 20},
    ]
    tried = 0
    with statements_sent() as sent:
        for what, postgres, mariadb in ATTACKS:
            sql = postgres if kind == "postgresql" else mariadb
            if sql is None:
                continue
            tried += 1
            with pytest.raises(QueryRefused, match=r"is not allowed in a live query|reads only its table gates") as refused:
                live.run(source, sql.format(secret=secret))
            assert "Traceback" not in str(refused.value), what
    assert tried >= 6
    assert not [s for s, _ in sent if "pg_" in s or "load_file" in s.lower() or secret in s], "a refused query reached the database"


def test_the_functions_dashboards_use_still_run_in_both_dialects(tables):
    kind, _, table, _, urls = tables
    source = _live(urls["superuser"], table)
    sql = (
        "WITH t AS (SELECT site, actual FROM gates) SELECT upper(site) AS s, coalesce(sum(actual), 0) AS a, round(avg(actual), 1) AS m, "
        "count(*) AS n, nullif(site, '') AS raw, length(site) AS l FROM t WHERE list_contains($sites, site) GROUP BY site ORDER BY site"
    )
    rows = live.run(source, sql, {"sites": ["Brno", "Lyon"]}).table.to_pylist()
    assert [(r["s"], r["a"], r["n"], r["l"]) for r in rows] == [("BRNO", 10, 1, 4), ("LYON", 20, 1, 4)]


def _locks_held(admin: sa.Engine, kind: str, pid: int) -> int:
    """Session locks the connection `pid` holds, seen from another connection."""
    with admin.connect() as c:
        if kind == "postgresql":
            return c.exec_driver_sql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = %s", (pid,)).scalar_one()
        return int(c.exec_driver_sql("SELECT IS_USED_LOCK('dm_pool')").scalar() == pid)


def test_a_pooled_connection_forgets_the_locks_and_settings_a_query_left(tables):
    """Whatever took a session lock on a pooled connection (not a live query: those are refused), the lock is
    gone once the connection is back in the pool, and the connection still serves the next query."""
    kind, admin, table, _, urls = tables
    tag = f"dm_lock_{uuid.uuid4().hex[:6]}"
    source = _live(_url_of_its_own(urls["superuser"], tag), table)
    live.run(source, "SELECT count(*) AS n FROM gates")  # the pooled engine and its connection
    engine = live._engine(source, None)
    with engine.connect() as c:
        pid = c.exec_driver_sql("SELECT pg_backend_pid()" if kind == "postgresql" else "SELECT CONNECTION_ID()").scalar_one()
        c.exec_driver_sql("SELECT pg_advisory_lock(4242)" if kind == "postgresql" else "SELECT get_lock('dm_pool', 1)")
        if kind == "postgresql":
            c.exec_driver_sql("SET work_mem = '77MB'")
        assert _locks_held(admin, kind, pid) == 1
    assert _locks_held(admin, kind, pid) == 0  # back in the pool: released
    with engine.connect() as c:  # the same connection, cleaned, not a new one
        assert c.exec_driver_sql("SELECT pg_backend_pid()" if kind == "postgresql" else "SELECT CONNECTION_ID()").scalar_one() == pid
        if kind == "postgresql":
            assert c.exec_driver_sql("SHOW work_mem").scalar_one() != "77MB"
    assert live.run(source, "SELECT count(*) AS n FROM gates").table.column("n").to_pylist() == [2]


# --------------------------------------------------------------------------- a network that goes silent mid-query


def _through(proxy: FlakyProxy, url: str) -> str:
    return sa.make_url(url).set(port=proxy.port).render_as_string(hide_password=False)


def test_a_live_query_ends_when_the_database_goes_silent_and_the_next_fails_at_once(tables):
    kind, _, table, _, urls = tables
    proxy = FlakyProxy(("127.0.0.1", SERVERS[kind][1]))
    try:
        source = _live(_through(proxy, urls["superuser"]), table, timeout_s=2)
        assert live.run(source, "SELECT count(*) AS n FROM gates", timeout_s=2).table.column("n").to_pylist() == [2]
        proxy.silence()
        started = time.monotonic()
        with pytest.raises(QueryError, match="stopped answering: nothing came for 4 s") as stalled:
            live.run(source, "SELECT site FROM gates", timeout_s=2)
        waited = time.monotonic() - started
        assert waited < 2 + 2 + 3, f"the stalled query took {waited:.1f} s"
        assert "Traceback" not in str(stalled.value) and "psycopg2" not in str(stalled.value)
        started = time.monotonic()
        with pytest.raises(QueryError, match="stopped answering.*not asked again"):
            live.run(source, "SELECT actual FROM gates", timeout_s=2)
        assert time.monotonic() - started < 1.0, "the next query waited again on a source that is down"
    finally:
        proxy.stop()
        live.OUTAGES._down.clear()


def test_a_snapshot_read_that_goes_silent_ends_after_its_timeout_and_says_what_to_raise(tables, tmp_path):
    kind, _, table, _, urls = tables
    proxy = FlakyProxy(("127.0.0.1", SERVERS[kind][1]), silent_on=b"dm_stall_here")
    try:
        source = {
            "name": "gates",
            "type": "sql",
            "url": _through(proxy, urls["superuser"]),
            "query": f"SELECT site AS dm_stall_here FROM {table}",
            "timeout_s": 2,
            "retry": {"attempts": 3, "backoff_s": 0},
        }
        started = time.monotonic()
        with pytest.raises(SourceError, match=r"^source 'gates': .*stopped answering: nothing came for 4 s.*query_timeout_s"):
            fetch(source, FetchContext(workspace_path=tmp_path))
        waited = time.monotonic() - started
    finally:
        proxy.stop()
    assert waited < 2 + 2 + 3, f"the stalled read took {waited:.1f} s"
    assert proxy.connections == 1, "a stalled read was tried again"


def test_a_slow_snapshot_query_runs_when_its_query_timeout_allows_it(tables, tmp_path):
    kind, _, table, _, urls = tables
    # Silent for 5 s before the first row: longer than timeout_s + the margin (3 s), shorter than query_timeout_s.
    slow = f"SELECT site, pg_sleep(2.5) IS NULL AS slept FROM {table}" if kind == "postgresql" else f"SELECT site, SLEEP(5) AS slept FROM {table} LIMIT 1"
    source = {"name": "gates", "type": "sql", "url": urls["superuser"], "query": slow, "timeout_s": 1, "retry": {"attempts": 1}}
    with pytest.raises(SourceError, match="stopped answering"):
        fetch(source, FetchContext(workspace_path=tmp_path))
    assert fetch({**source, "query_timeout_s": 10}, FetchContext(workspace_path=tmp_path)).num_rows >= 1


def test_a_dashboard_on_a_source_that_goes_silent_shows_a_message_per_component_and_renders_the_rest(tables, tmp_path):
    """Each query component says the database stopped answering, the text and the snapshot-free parts render,
    and the page waits about one bound, not one per component."""
    from lib.artifacts.render import QueryCache, render

    kind, _, table, _, urls = tables
    proxy = FlakyProxy(("127.0.0.1", SERVERS[kind][1]))
    try:
        source = _live(_through(proxy, urls["superuser"]), table, timeout_s=2)
        stand_in = {"gates": live.catalogue_table(source, FetchContext(workspace_path=tmp_path))}
        dashboard = {
            "title": "Gates",
            "components": [
                {"id": "intro", "type": "text", "markdown": "Where the gates stand this week."},
                *({"id": f"q{n}", "type": "table", "query": f"SELECT site, actual + {n} AS a FROM gates ORDER BY site"} for n in range(6)),
            ],
        }
        proxy.silence()
        started = time.monotonic()
        files = {"dashboard": dashboard, "sources": {"sources": [source]}, "output": {"data_injection": {"query_timeout_s": 2}}}
        rendered = render(files, stand_in, "v1", {}, cache=QueryCache())
        waited = time.monotonic() - started
    finally:
        proxy.stop()
        live.OUTAGES._down.clear()
    by_id = {c.id: c for c in rendered.components}
    assert by_id["intro"].error is None
    for n in range(6):
        error = by_id[f"q{n}"].error or ""
        assert "stopped answering" in error and "Traceback" not in error, error
    assert waited < 2 * (2 + 2) + 3, f"the page waited {waited:.1f} s for six components on a silent source"


def test_only_dashmems_own_connections_are_bounded(tables):
    """psycopg2's wait callback is the whole process's: another engine's connection (the app's own code, a
    test's admin engine) waits for a long statement as it always did, even with a short connect_timeout."""
    kind, _, table, _, urls = tables
    if kind != "postgresql":
        pytest.skip("the wait callback is psycopg2's; PyMySQL's bound is a per-connection read timeout")
    live.run(_live(urls["superuser"], table, timeout_s=1), "SELECT count(*) AS n FROM gates")  # the callback is installed
    other = sa.create_engine(SERVERS[kind][2], connect_args={"connect_timeout": 2})
    try:
        with other.connect() as c:
            assert c.exec_driver_sql("SELECT pg_sleep(4.5) IS NOT NULL").scalar_one() is True
    finally:
        other.dispose()


def test_a_live_profile_on_a_silent_connection_ends_within_the_sources_query_timeout(tables, tmp_path):
    from lib.data import profile

    kind, _, table, _, urls = tables
    proxy = FlakyProxy(("127.0.0.1", SERVERS[kind][1]))
    try:
        source = _live(_through(proxy, urls["superuser"]), table, timeout_s=2, query_timeout_s=3, retry={"attempts": 1})
        stand_in = live.catalogue_table(source, FetchContext(workspace_path=tmp_path))
        proxy.silence()
        started = time.monotonic()
        with pytest.raises(Exception) as stalled:
            profile.build({"gates": stand_in}, [source], workspace_path=tmp_path)
        waited = time.monotonic() - started
    finally:
        proxy.stop()
        live.OUTAGES._down.clear()
    assert waited < 3 + 2 + 3, f"the stalled profile took {waited:.1f} s"
    assert "cannot profile the live table: the database stopped answering" in str(stalled.value), stalled.value
    assert "2013" not in str(stalled.value) and "psycopg2" not in str(stalled.value)
