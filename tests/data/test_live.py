"""Live SQL sources (lib/data/live.py) against the real local PostgreSQL and MariaDB.

The supply-chain demo dashboard (KPIs, charts, a filtered table, text) runs
unchanged over a generated 200k-row `gates` table kept in PostgreSQL: its
results must equal the same dashboard over a snapshot of the same rows. A
server that is not running skips its tests with the reason.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

from lib.artifacts.render import QueryCache, render
from lib.data import live
from lib.data.connectors import sql_source
from lib.data.connectors.base import FetchContext
from lib.data.engine import Engine, live_source_of
from lib.data.refresh import refresh
from lib.data.sandbox import QueryError, QueryRefused
from lib.data.snapshots import Warehouse
from lib.memory import workspace
from lib.roles.access import OPERATOR
from tests.helpers import current_id
from tests.helpers.databases import MARIADB_URL, PG_URL
from tests.helpers.live import CONNECTION_ID, _drop_connection, _source, _url_of_its_own, _workspace, results, same

from ..conftest import ROOT, WORKSPACES, server_engine, statements_sent

ROWS = 200_000
MARIADB_ROWS = 20_000  # a smaller table: its rows are inserted from Python
SITES = ["Brno", "Lyon", "Porto", "Gdansk", "Leeds", "Turin"]
CHOSEN = {"site": ["Brno", "Lyon"]}


@pytest.fixture(scope="module")
def pg_table():
    """A generated `gates`-shaped table of ROWS rows in PostgreSQL; dropped afterwards."""
    engine = server_engine("postgresql")
    name = f"dm_live_{uuid.uuid4().hex[:10]}"
    sites = ",".join(f"'{s}'" for s in SITES)
    with engine.begin() as connection:
        connection.exec_driver_sql(f"""
            CREATE TABLE {name} AS
            SELECT day, to_char(day, 'IYYY-"W"IW') AS week, site, gate, target, actual,
                   actual::double precision / target AS attainment
            FROM (SELECT DATE '2026-01-01' + (g %% 120) AS day,
                         (ARRAY[{sites}])[(g / 3) %% 6 + 1] AS site,
                         (ARRAY['Supply','Orders','Process'])[g %% 3 + 1] AS gate,
                         (800 + g %% 400)::bigint AS target,
                         (800 + g %% 400 - g %% 97)::bigint AS actual
                  FROM generate_series(1, {ROWS}) g) rows""")
    yield engine, name
    with engine.begin() as connection:
        connection.exec_driver_sql(f"DROP TABLE IF EXISTS {name}")
    engine.dispose()


def _snapshot_tables(source: dict, tmp_path: Path) -> dict:
    return {"gates": sql_source.fetch({**source, "mode": "snapshot"}, FetchContext(workspace_path=tmp_path))}


def _live_tables(source: dict, tmp_path: Path) -> dict:
    return {"gates": live.catalogue_table(source, FetchContext(workspace_path=tmp_path))}


# --------------------------------------------------------------------------- results equal a snapshot's


def test_demo_dashboard_live_equals_snapshot_of_the_same_rows(pg_table, tmp_path):
    _, table = pg_table
    source = _source(table)
    files = workspace.load(WORKSPACES / "supply-chain-weekly")[0].data
    snapshot = render({**files, "sources": {"sources": [{**source, "mode": "snapshot"}]}}, _snapshot_tables(source, tmp_path), "v1", CHOSEN, cache=QueryCache())
    live_files = {**files, "sources": {"sources": [source]}}
    live.LIVE_CACHE = live.LiveCache()
    with statements_sent() as sent:
        rendered = render(live_files, _live_tables(source, tmp_path), "v1", CHOSEN, cache=QueryCache())
    same(results(rendered), results(snapshot))
    assert [f.options for f in rendered.filters] == [f.options for f in snapshot.filters]
    selects = [s for s, _ in sent if table in s]
    assert selects and all("LIMIT" in s for s in selects)  # every result capped in the database, not after pulling
    # Only small results came back: the app received the rows shown, not the table's 200k.
    assert sum(c.result.table.num_rows for c in rendered.components if c.result is not None) < 1000


@pytest.mark.slow
def test_refresh_and_render_in_other_processes(pg_table, tmp_path):
    """Refresh in one process (a catalogue check, no rows), render in another: the same numbers as a snapshot."""
    _, table = pg_table
    folder = _workspace(tmp_path, _source(table), "live-ws")
    cache_root = tmp_path / "cache"
    script = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from lib.memory import workspace\n"
        "from lib.roles.access import OPERATOR\n"
        "from lib.data.refresh import refresh\n"
        "from lib.artifacts.render import render\n"
        "from lib.data.snapshots import Warehouse\n"
        "folder, cache, step = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]\n"
        "wh = Warehouse.for_workspace(folder, cache)\n"
        "if step == 'refresh':\n"
        "    report = refresh(folder, wh, user=OPERATOR)\n"
        "    print(json.dumps({'ok': report.ok, 'summary': report.summary(), 'rows': wh.tables()['gates'].num_rows}))\n"
        "else:\n"
        "    ws, _ = workspace.load(folder)\n"
        "    snap = wh.current()\n"
        "    r = render(ws.data, wh.tables(snap), snap.id, json.loads(sys.argv[4]))\n"
        "    out = {c.id: [list(row) for row in c.result.rows] for c in r.components if c.result is not None}\n"
        "    out.update({f'{c.id}.{q}': [list(row) for row in res.rows] for c in r.components for q, res in c.text_results.items()})\n"
        "    print(json.dumps({'results': out, 'errors': r.errors}, default=str))\n"
    )

    def run(*args: str) -> dict:
        done = subprocess.run(
            [sys.executable, "-c", script, str(folder), str(cache_root), *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])

    refreshed = run("refresh")
    assert refreshed["ok"], refreshed["summary"]
    assert refreshed["rows"] == 0  # the live table's rows stayed in the database
    rendered = run("render", json.dumps(CHOSEN))
    assert rendered["errors"] == []
    source = _source(table)
    snapshot = render(
        {**workspace.load(folder)[0].data, "sources": {"sources": [{**source, "mode": "snapshot"}]}},
        _snapshot_tables(source, tmp_path),
        "v1",
        CHOSEN,
        cache=QueryCache(),
    )
    expected = json.loads(json.dumps(results(snapshot), default=str))
    same(rendered["results"], expected)


# --------------------------------------------------------------------------- filters, limits, refusals


def test_a_filter_value_travels_as_a_bind_parameter(pg_table, tmp_path):
    _, table = pg_table
    source = _source(table, cache_ttl_s=0)
    hostile = "x' OR 1=1 --"
    files = {**workspace.load(WORKSPACES / "supply-chain-weekly")[0].data, "sources": {"sources": [source]}}
    with statements_sent() as sent:
        rendered = render(files, _live_tables(source, tmp_path), "v1", {"site": [hostile]}, cache=QueryCache())
    table_rows = rendered.component("site_gate").result
    assert table_rows is not None and table_rows.table.num_rows == 0  # just a site nobody has
    queries = [(s, p) for s, p in sent if table in s]
    assert queries and all(hostile not in s for s, _ in queries)
    assert any(isinstance(p, dict) and p.get("site") == [hostile] for _, p in queries)

    one = live.run(source, "SELECT count(*) AS n FROM gates WHERE site = $site", {"site": hostile})
    assert one.rows == [(0,)]
    everything = live.run(source, "SELECT count(*) AS n FROM gates WHERE site = $site OR $site IS NULL", {"site": None})
    assert everything.rows == [(ROWS,)]


def test_like_with_a_percent_sign_and_a_parameter_keeps_its_meaning(pg_table):
    _, table = pg_table
    source = _source(table, cache_ttl_s=0)
    result = live.run(source, "SELECT count(*) AS n FROM gates WHERE site LIKE 'Br%' AND gate = $gate", {"gate": "Supply"})
    expected = live.run(source, "SELECT count(*) AS n FROM gates WHERE site = 'Brno' AND gate = 'Supply'", {})
    assert result.rows == expected.rows and result.rows[0][0] > 0


def test_row_cap_is_applied_in_the_database(pg_table):
    _, table = pg_table
    with statements_sent() as sent:
        result = live.run(_source(table), "SELECT * FROM gates ORDER BY target", max_rows=25)
    assert result.table.num_rows == 25 and result.truncated
    assert any("LIMIT 26" in s for s, _ in sent)


def test_statement_timeout_stops_a_runaway_query(pg_table):
    _, table = pg_table
    source = _source(table, cache_ttl_s=0)
    with pytest.raises(QueryError, match="ran longer than 1 s"):
        live.run(source, RUNAWAY, timeout_s=1)


# A query that runs for minutes on the 200k-row table (and the 20k-row one in MariaDB), from allowed functions only.
RUNAWAY = "SELECT count(*) AS n FROM gates a CROSS JOIN gates b WHERE a.target + b.actual = 17"


def _pooled_connection_id(source: dict, admin) -> int:
    """The server's id of the connection the live source's pool holds (asked outside the live query path:
    a live query may not call server functions)."""
    with live._engine(source, None).connect() as connection:
        return connection.exec_driver_sql(f"SELECT {CONNECTION_ID[admin.dialect.name]}").scalar_one()


def _connection_id(dbapi_connection) -> int:
    """The server's id of a driver's connection: PyMySQL's thread id, psycopg2's backend pid."""
    if hasattr(dbapi_connection, "thread_id"):
        return dbapi_connection.thread_id()
    return dbapi_connection.info.backend_pid


@pytest.fixture(params=["postgresql", "mariadb"])
def server_table(request):
    """(admin engine, `gates` table, its row count, live url) in PostgreSQL or MariaDB."""
    if request.param == "postgresql":
        admin, table = request.getfixturevalue("pg_table")
        return admin, table, ROWS, PG_URL
    admin, table = request.getfixturevalue("mariadb_table")
    return admin, table, MARIADB_ROWS, MARIADB_URL


def test_a_dropped_connection_is_tried_again_once_and_an_sql_error_never(server_table, caplog):
    admin, table, rows, url = server_table
    source = _source(table, cache_ttl_s=0, url=_url_of_its_own(url, "dm_reconnect"), retry={"attempts": 3, "backoff_s": 0.01})
    live.run(source, "SELECT count(*) AS n FROM gates")
    dropped = _pooled_connection_id(source, admin)
    _drop_connection(admin, dropped)  # the pooled connection is now dead; the pool does not know yet
    caplog.set_level("INFO", logger="lib.data.live")
    with statements_sent() as sent:
        result = live.run(source, "SELECT count(*) AS n FROM gates")
    assert result.rows[0][0] == rows and _pooled_connection_id(source, admin) != dropped  # answered, on a new connection
    assert len([r for r in caplog.records if "trying again" in r.getMessage()]) == 1  # one retry
    assert sum("count(*)" in statement.lower() for statement, _ in sent) == 1  # the dead connection failed before the query
    caplog.clear()
    with statements_sent() as sent:
        with pytest.raises(QueryError, match="no_such_column") as caught:
            live.run(source, "SELECT no_such_column FROM gates")
    assert sum("no_such_column" in statement.lower() for statement, _ in sent) == 1 and "attempt" not in str(caught.value)
    assert not [r for r in caplog.records if "trying again" in r.getMessage()]


def test_a_statement_stopped_by_its_time_limit_is_not_tried_again(pg_table):
    _, table = pg_table
    source = _source(table, cache_ttl_s=0, retry={"attempts": 3, "backoff_s": 0.01})
    with statements_sent() as sent:
        with pytest.raises(QueryError, match="ran longer than 1 s"):
            live.run(source, RUNAWAY, timeout_s=1)
    assert sum("cross join" in statement.lower() for statement, _ in sent) == 1


def test_a_connection_dropped_on_every_attempt_gives_up_saying_how_often_it_tried(server_table):
    from sqlalchemy import event

    admin, table, _, url = server_table
    source = _source(table, cache_ttl_s=0, url=_url_of_its_own(url, "dm_always_dropped"), retry={"attempts": 2, "backoff_s": 0.01})
    engine = live._engine(source, None)

    def drop_before_the_query(connection, cursor, statement, parameters, context, executemany):
        if "count(*)" in statement.lower():
            _drop_connection(admin, _connection_id(connection.connection.dbapi_connection))

    event.listen(engine, "before_cursor_execute", drop_before_the_query)
    try:
        with pytest.raises(QueryError, match=r"^gates: .*\(after 2 attempts\)$"):
            live.run(source, "SELECT count(*) AS n FROM gates")
    finally:
        event.remove(engine, "before_cursor_execute", drop_before_the_query)


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM gates",
        "SELECT 1; DROP TABLE gates",
        "UPDATE gates SET target = 0",
        "CREATE TABLE x AS SELECT * FROM gates",
    ],
)
def test_a_write_is_refused_before_anything_is_sent(pg_table, sql):
    engine, table = pg_table
    with statements_sent() as sent, pytest.raises(QueryRefused):
        live.run(_source(table, cache_ttl_s=0), sql)
    assert sent == []
    with engine.connect() as connection:
        assert connection.exec_driver_sql(f"SELECT count(*) FROM {table}").scalar() == ROWS


def test_a_select_that_writes_is_stopped_by_the_read_only_transaction(pg_table, monkeypatch):
    """Refused by the function allow-list first; and with that line gone, the read-only transaction still holds."""
    engine, table = pg_table
    sequence = f"{table}_seq"
    with engine.begin() as connection:
        connection.exec_driver_sql(f"CREATE SEQUENCE {sequence}")
    writing = f"SELECT nextval('{sequence}') AS n FROM gates LIMIT 1"
    try:
        with pytest.raises(QueryRefused, match="nextval"):
            live.run(_source(table, cache_ttl_s=0), writing)
        monkeypatch.setattr(live.live_guard, "check", lambda tree, name: None)
        with pytest.raises(QueryError, match="read-only"):
            live.run(_source(table, cache_ttl_s=0), writing)
    finally:
        with engine.begin() as connection:
            connection.exec_driver_sql(f"DROP SEQUENCE {sequence}")


def test_a_join_across_engines_is_refused_naming_the_tables(pg_table, tmp_path):
    _, table = pg_table
    source = _source(table)
    other = {**_source(table), "name": "targets"}
    import pyarrow as pa

    files = {
        "sources": {"sources": [source, other, {"name": "sites", "type": "csv", "path": "sites.csv"}]},
        "dashboard": {
            "components": [
                {"id": "mixed", "type": "table", "query": "SELECT * FROM gates JOIN sites USING (site)"},
                {"id": "two_live", "type": "table", "query": "SELECT * FROM gates g JOIN targets t USING (site)"},
                {"id": "alone", "type": "kpi", "query": "SELECT count(*) AS value FROM gates"},
            ]
        },
    }
    tables = {**_live_tables(source, tmp_path), "targets": _live_tables(source, tmp_path)["gates"], "sites": pa.table({"site": SITES})}
    with statements_sent() as sent:
        rendered = render(files, tables, "v1", cache=QueryCache())
    assert "gates (live" in (rendered.component("mixed").error or "") and "sites (snapshot)" in (rendered.component("mixed").error or "")
    assert "gates (live" in (rendered.component("two_live").error or "") and "targets (live" in (rendered.component("two_live").error or "")
    assert rendered.component("alone").value == ROWS
    assert not any("sites" in s for s, _ in sent)


# --------------------------------------------------------------------------- the cache


def test_the_cache_serves_a_repeat_within_the_ttl_and_asks_again_after(pg_table, tmp_path):
    _, table = pg_table
    source = _source(table, cache_ttl_s=60)
    now = [1000.0]
    cache = live.LiveCache(clock=lambda: now[0])
    engine = Engine(files={}, version="v1", cache=QueryCache(), live_cache=cache, live={"gates": source})
    sql = "SELECT site, sum(actual) AS actual FROM gates WHERE gate = $gate GROUP BY site ORDER BY site"

    def ask(gate: str):
        with statements_sent() as sent:
            result = engine.run(sql, {"gate": gate}, max_rows=100, timeout_s=10)
        return result, [s for s, _ in sent if table in s]

    first, sent = ask("Supply")
    assert len(sent) == 1
    now[0] += 59
    again, sent = ask("Supply")
    assert sent == [] and again is first
    other, sent = ask("Orders")  # other parameters: another entry
    assert len(sent) == 1 and other.rows != first.rows
    now[0] += 2  # past the first entry's TTL
    fresh, sent = ask("Supply")
    assert len(sent) == 1 and fresh.rows == first.rows


# --------------------------------------------------------------------------- refresh: the catalogue only


def test_refresh_reads_the_catalogue_and_catches_a_dropped_column(pg_table, tmp_path):
    engine, table = pg_table
    copy = f"{table}_copy"
    with engine.begin() as connection:
        connection.exec_driver_sql(f"CREATE TABLE {copy} AS SELECT * FROM {table} LIMIT 1000")
    try:
        folder = _workspace(tmp_path, _source(copy), "live-ws")
        wh = Warehouse(tmp_path / "cache")
        with statements_sent() as sent:
            first = refresh(folder, wh, user=OPERATOR)
        assert first.ok, first.summary()
        assert wh.tables()["gates"].num_rows == 0
        assert "live: columns checked" in first.sources[0].message
        assert not any(f"FROM {copy}" in s or f'FROM "{copy}"' in s or f'FROM public."{copy}"' in s for s, _ in sent)
        with engine.begin() as connection:
            connection.exec_driver_sql(f"ALTER TABLE {copy} DROP COLUMN actual")
        second = refresh(folder, wh, user=OPERATOR)
        assert not second.ok
        assert "actual" in second.summary()
        assert current_id(wh) == first.snapshot  # the recorded schema stays served
    finally:
        with engine.begin() as connection:
            connection.exec_driver_sql(f"DROP TABLE IF EXISTS {copy}")


# --------------------------------------------------------------------------- MariaDB: the same path, a smaller table


@pytest.fixture(scope="module")
def mariadb_table():
    engine = server_engine("mariadb")
    name = f"dm_live_{uuid.uuid4().hex[:10]}"
    with engine.begin() as connection:
        connection.exec_driver_sql(f"CREATE TABLE {name} (day DATE, site VARCHAR(20), gate VARCHAR(20), target BIGINT, actual BIGINT)")
        rows = [
            {
                "day": f"2026-01-{1 + g % 28:02d}",
                "site": SITES[(g // 3) % 6],
                "gate": ["Supply", "Orders", "Process"][g % 3],
                "target": 800 + g % 400,
                "actual": 800 + g % 400 - g % 97,
            }
            for g in range(MARIADB_ROWS)
        ]
        connection.execute(sa.text(f"INSERT INTO {name} VALUES (:day, :site, :gate, :target, :actual)"), rows)
    yield engine, name
    with engine.begin() as connection:
        connection.exec_driver_sql(f"DROP TABLE IF EXISTS {name}")
    engine.dispose()


def test_mariadb_live_equals_snapshot_and_binds_its_filter(mariadb_table, tmp_path):
    engine, table = mariadb_table
    source = _source(table, url=MARIADB_URL, cache_ttl_s=0)
    dashboard = {
        "filters": [{"id": "site", "type": "select", "options_query": "SELECT DISTINCT site FROM gates ORDER BY 1"}],
        "components": [
            {"id": "units", "type": "kpi", "query": "SELECT sum(actual) AS value FROM gates WHERE ($site IS NULL OR site = $site)"},
            {
                "id": "by_gate",
                "type": "chart",
                "mark": "bar",
                "query": "SELECT gate, sum(actual) AS actual, count(*) AS n FROM gates WHERE ($site IS NULL OR site = $site) GROUP BY gate ORDER BY gate",
                "encoding": {"x": {"field": "gate", "type": "nominal"}, "y": {"field": "actual", "type": "quantitative"}},
            },
            {
                "id": "days",
                "type": "table",
                "query": "SELECT day, site, sum(target) AS target FROM gates WHERE ($site IS NULL OR site = $site) GROUP BY day, site ORDER BY day, site",
            },
        ],
    }
    chosen = {"site": "Lyon"}
    snapshot = render(
        {"dashboard": dashboard, "sources": {"sources": [{**source, "mode": "snapshot"}]}}, _snapshot_tables(source, tmp_path), "v1", chosen, cache=QueryCache()
    )
    with statements_sent() as sent:
        rendered = render({"dashboard": dashboard, "sources": {"sources": [source]}}, _live_tables(source, tmp_path), "v1", chosen, cache=QueryCache())
    same(results(rendered), results(snapshot))
    assert all("Lyon" not in s for s, _ in sent if table in s)
    with pytest.raises(QueryRefused), statements_sent() as sent:
        live.run(source, "DELETE FROM gates")
    assert sent == []
    with pytest.raises(QueryError, match="ran longer than 1 s"):
        live.run(source, RUNAWAY, timeout_s=1)


# --------------------------------------------------------------------------- SQLite: no server needed


def test_sqlite_live_source_runs_read_only_with_a_time_limit(tmp_path):
    import sqlite3

    database = tmp_path / "local.db"
    with sqlite3.connect(database) as connection:
        connection.execute("CREATE TABLE orders (region TEXT, sales INTEGER)")
        connection.executemany("INSERT INTO orders VALUES (?, ?)", [(r, n) for n in range(1000) for r in ("north", "south")])
    source = {"name": "orders", "type": "sql", "url": "sqlite:///local.db", "table": "orders", "mode": "live", "cache_ttl_s": 0}
    with statements_sent() as sent:
        result = live.run(
            source, "SELECT region, sum(sales) AS sales FROM orders WHERE region = $region GROUP BY region", {"region": "north"}, workspace_path=tmp_path
        )
    assert result.rows == [("north", sum(range(1000)))]
    assert all("north" not in s for s, _ in sent)
    runaway = "SELECT count(*) FROM orders a, orders b, orders c WHERE a.sales + b.sales + c.sales = -1"
    with pytest.raises(QueryError, match="ran longer than 1 s"):
        live.run(source, runaway, workspace_path=tmp_path, timeout_s=1)
    with pytest.raises(QueryRefused):
        live.run(source, "DELETE FROM orders", workspace_path=tmp_path)
    with sqlite3.connect(database) as connection:
        assert connection.execute("SELECT count(*) FROM orders").fetchone() == (2000,)


def test_snapshot_queries_of_a_workspace_with_a_live_source_do_not_depend_on_sqlglot():
    live_source = {"gates": {"name": "gates", "type": "sql", "mode": "live", "table": "gates", "url": PG_URL}}
    # Syntax only DuckDB knows (or a typo) on a snapshot table goes on to the sandbox, which reports it as always.
    assert live_source_of("SELECT * EXCLUDE (x) FROM sites WHERE ((", live_source) is None
    assert live_source_of("SELECT * FROM sites WHERE name = 'gate'", live_source) is None
    assert live_source_of("SELECT * FROM sites WHERE name = 'gates'", live_source) is None  # a value, not a table
    assert live_source_of("SELECT count(*) FROM GATES", live_source) == "gates"


def test_the_models_run_sql_reads_a_live_table_in_its_database(pg_table, tmp_path):
    """The model's query tool must not see the snapshot's empty stand-in of a live table."""
    from lib.chat.toolbox import Toolbox

    _, table = pg_table
    source = _source(table)
    files = {"sources": {"sources": [source]}}
    box = Toolbox(files, _live_tables(source, tmp_path), "v1", "query", "sam")
    answer = box.execute("run_sql", {"sql": "SELECT count(*) AS n FROM gates"})
    assert not answer.is_error, answer.content
    assert f"{ROWS}" in answer.content.replace(",", "")


# --------------------------------------------------------------------------- multiselect filters where there are no arrays

MULTISELECT = {
    "filters": [{"id": "site", "type": "multiselect", "options_query": "SELECT DISTINCT site FROM gates ORDER BY 1"}],
    "components": [
        {"id": "units", "type": "kpi", "query": "SELECT sum(actual) AS value FROM gates WHERE ($site IS NULL OR list_contains($site, site))"},
        {
            "id": "by_site",
            "type": "table",
            "query": "SELECT site, count(*) AS n FROM gates WHERE $site IS NULL OR list_contains($site, site) GROUP BY site ORDER BY site",
        },
    ],
}


@pytest.mark.parametrize("chosen", [{"site": ["Lyon", "Brno"]}, {"site": ["Porto"]}, {}, {"site": ["x' OR 1=1 --"]}])
def test_mariadb_multiselect_filter_equals_snapshot_with_one_parameter_per_value(mariadb_table, tmp_path, chosen):
    _, table = mariadb_table
    source = _source(table, url=MARIADB_URL, cache_ttl_s=0)
    snapshot = render(
        {"dashboard": MULTISELECT, "sources": {"sources": [{**source, "mode": "snapshot"}]}},
        _snapshot_tables(source, tmp_path),
        "v1",
        chosen,
        cache=QueryCache(),
    )
    with statements_sent() as sent:
        rendered = render({"dashboard": MULTISELECT, "sources": {"sources": [source]}}, _live_tables(source, tmp_path), "v1", chosen, cache=QueryCache())
    same(results(rendered), results(snapshot))
    assert rendered.component("units").value is not None or chosen.get("site") == ["x' OR 1=1 --"]
    queries = [(s, p) for s, p in sent if table in s and "count(*)" in s.lower()]
    assert queries
    for statement, parameters in queries:
        assert "list_contains" not in statement.lower() and "array_contains" not in statement.lower()
        for value in chosen.get("site") or []:
            assert value not in statement  # each value a bind parameter
            assert value in list(parameters.values() if isinstance(parameters, dict) else parameters)


def test_transpiled_multiselect_for_mysql_and_sqlite_has_a_placeholder_per_value():
    source = {"name": "gates", "table": "gates"}
    sql = "SELECT count(*) AS n FROM gates WHERE ($site IS NULL OR list_contains($site, site))"
    text, names = live.transpile(sql, source, "mysql", "pyformat", 10, {"site": ["a", "b", "c"]})
    assert "IN (%(site__dm0)s, %(site__dm1)s, %(site__dm2)s)" in text and names == ["site", "site__dm0", "site__dm1", "site__dm2"]
    text, names = live.transpile(sql, source, "sqlite", "qmark", 10, {"site": None})
    assert "CONTAINS" not in text.upper() and names == ["site"]
    assert live.bindable({"site": ["a", "b"]}, "mysql") == {"site": '["a", "b"]', "site__dm0": "a", "site__dm1": "b"}
    assert live.bindable({"site": ["a", "b"]}, "postgres") == {"site": ["a", "b"]}  # PostgreSQL takes the array as it is


def test_sqlite_multiselect_filter_runs(tmp_path):
    import sqlite3

    with sqlite3.connect(tmp_path / "local.db") as connection:
        connection.execute("CREATE TABLE orders (region TEXT, sales INTEGER)")
        connection.executemany("INSERT INTO orders VALUES (?, ?)", [("north", 1), ("south", 2), ("east", 4)])
    source = {"name": "orders", "type": "sql", "url": "sqlite:///local.db", "table": "orders", "mode": "live", "cache_ttl_s": 0}
    sql = "SELECT coalesce(sum(sales), 0) AS n FROM orders WHERE ($r IS NULL OR list_contains($r, region))"
    assert live.run(source, sql, {"r": ["north", "east"]}, workspace_path=tmp_path).rows == [(5,)]
    assert live.run(source, sql, {"r": None}, workspace_path=tmp_path).rows == [(7,)]
    assert live.run(source, sql, {"r": []}, workspace_path=tmp_path).rows == [(0,)]


# --------------------------------------------------------------------------- date_trunc where the dialect has none, or another week

GRAIN_DAYS = ["2025-12-28", "2025-12-29", "2026-01-01", "2026-01-04", "2026-01-05", "2026-02-14", "2026-03-31", "2026-04-01", "2026-11-22"]
GRAIN_SQL = "SELECT DISTINCT day, date_trunc('{grain}', day) AS period FROM gates ORDER BY day"


def _periods_in_duckdb(grain: str) -> list[tuple[str, str]]:
    import duckdb

    connection = duckdb.connect()
    connection.execute("CREATE TABLE gates AS SELECT CAST(d AS DATE) AS day FROM unnest($days) AS t(d)", {"days": GRAIN_DAYS})
    return [(str(d)[:10], str(p)[:10]) for d, p in connection.execute(GRAIN_SQL.format(grain=grain)).fetchall()]


@pytest.mark.parametrize("grain", ["day", "week", "month", "quarter", "year"])
def test_sqlite_truncates_dates_to_a_grain_as_duckdb_does(tmp_path, grain):
    """SQLite has no date_trunc (sqlglot wrote TIMESTAMP_TRUNC, which fails): each period's first day, weeks from Monday."""
    import sqlite3

    with sqlite3.connect(tmp_path / "local.db") as connection:
        connection.execute("CREATE TABLE gates (day DATE)")
        connection.executemany("INSERT INTO gates VALUES (?)", [(d,) for d in GRAIN_DAYS])
    source = {"name": "gates", "type": "sql", "url": "sqlite:///local.db", "table": "gates", "mode": "live", "cache_ttl_s": 0}
    got = live.run(source, GRAIN_SQL.format(grain=grain), {}, workspace_path=tmp_path).rows
    assert [(str(d)[:10], str(p)[:10]) for d, p in got] == _periods_in_duckdb(grain)


@pytest.mark.parametrize("grain", ["day", "week", "month", "quarter", "year"])
def test_mariadb_truncates_dates_to_a_grain_as_duckdb_does(grain):
    """sqlglot counted MySQL weeks from year 0, so they started on Sunday; DuckDB's start on Monday."""
    engine = server_engine("mariadb")
    name = f"dm_grain_{uuid.uuid4().hex[:10]}"
    with engine.begin() as connection:
        connection.exec_driver_sql(f"CREATE TABLE {name} (day DATE)")
        connection.execute(sa.text(f"INSERT INTO {name} VALUES (:day)"), [{"day": d} for d in GRAIN_DAYS])
    try:
        got = live.run(_source(name, url=MARIADB_URL, cache_ttl_s=0), GRAIN_SQL.format(grain=grain), {}).rows
        assert [(str(d)[:10], str(p)[:10]) for d, p in got] == _periods_in_duckdb(grain)
    finally:
        with engine.begin() as connection:
            connection.exec_driver_sql(f"DROP TABLE IF EXISTS {name}")
        engine.dispose()


# --------------------------------------------------------------------------- a relative SQLite path, across processes


def test_a_relative_sqlite_live_source_refreshes_in_one_process_and_renders_in_another(tmp_path):
    """`sqlite:///local.db` is in the workspace folder wherever the renderer runs from (not its working directory)."""
    import os
    import sqlite3

    folder = tmp_path / "ws"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", folder)
    shutil.rmtree(folder / "data")
    (folder / "profile.yaml").unlink()
    with sqlite3.connect(folder / "local.db") as connection:
        connection.execute("CREATE TABLE orders (region TEXT, sales INTEGER)")
        connection.executemany("INSERT INTO orders VALUES (?, ?)", [("north", 1200), ("south", 3400)])
    ws, _ = workspace.load(folder)
    ws.data["sources"] = {"sources": [{"name": "orders", "type": "sql", "url": "sqlite:///local.db", "table": "orders", "mode": "live"}]}
    ws.data["dashboard"] = {
        "title": "Orders",
        "components": [{"id": "total", "type": "kpi", "title": "Total sales", "query": "SELECT sum(sales) AS value FROM orders", "format": ",.0f"}],
        "layout": [["total"]],
    }
    workspace.save(folder, ws.data)
    env = {"PYTHONPATH": str(ROOT), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "DASHMEM_CACHE_DIR": str(tmp_path / "cache")}

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "lib", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)

    refreshed = cli("refresh", str(folder), "--json")
    assert refreshed.returncode == 0, refreshed.stdout + refreshed.stderr
    exported = cli("export", str(folder), "--html", str(tmp_path / "out.html"))
    assert exported.returncode == 0, exported.stdout + exported.stderr
    assert "4,600" in (tmp_path / "out.html").read_text(encoding="utf-8")
    checked = cli("check", str(folder), "--json")  # the checks render the dashboard too
    assert '"check.data_not_run"' not in checked.stdout and "not found" not in checked.stdout, checked.stdout


# --------------------------------------------------------------------------- warehouses: transpiled here, not run


@pytest.mark.parametrize(
    "backend, dialect, quote, contains",
    [
        ("trino", "trino", '"', "CONTAINS(:site, site)"),
        ("presto", "presto", '"', "CONTAINS(:site, site)"),
        ("hive", "spark", "`", "site IN (:site__dm0, :site__dm1)"),
        ("databricks", "databricks", "`", "site IN (:site__dm0, :site__dm1)"),
        ("bigquery", "bigquery", "`", "UNNEST(:site)"),
        ("snowflake", "snowflake", '"', "site IN (:site__dm0, :site__dm1)"),
    ],
)
def test_warehouse_backends_map_to_their_sqlglot_dialect_and_transpile(backend, dialect, quote, contains):
    """A SQLAlchemy backend name finds its sqlglot dialect, and the demo's filtered query comes out in that dialect."""
    import sqlglot
    from sqlglot import exp

    assert live.SQLGLOT_DIALECT[backend] == dialect
    sql = "SELECT site, sum(actual) AS actual FROM gates WHERE ($site IS NULL OR list_contains($site, site)) AND day >= $day_from GROUP BY site ORDER BY 2 DESC"
    text, names = live.transpile(sql, {"name": "gates", "table": "analytics.gates"}, dialect, "named", 100, {"site": ["Brno", "Lyon"], "day_from": None})
    assert f"FROM {quote}analytics{quote}.{quote}gates{quote}" in text and "LIMIT 101" in text
    assert contains in text and "list_contains" not in text.lower()
    assert set(names) <= {"site", "site__dm0", "site__dm1", "day_from"} and "day_from" in names
    parsed = sqlglot.parse_one(text, read=dialect)  # what came out is that dialect's SQL
    assert {t.name for t in parsed.find_all(exp.Table) if t.name} >= {"gates"}


def _demo_queries() -> list[tuple[str, str]]:
    """Every SQL text of the demo workspaces' dashboards and reports (queries, options queries), with its file."""
    import yaml

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if isinstance(value, str) and (key == "query" or key.endswith("_query")):
                    yield value
                else:
                    yield from walk(value)
        elif isinstance(node, list):
            for value in node:
                yield from walk(value)

    return [
        (f"{f.parent.name}/{f.name}", q)
        for f in sorted(WORKSPACES.glob("*/*.yaml"))
        if f.name in ("dashboard.yaml", "report.yaml")
        for q in walk(yaml.safe_load(f.read_text()))
    ]


def test_every_demo_query_transpiles_to_each_warehouse_and_parses_back_to_the_same_shape():
    """The warehouses that do not run here, on paper: each demo query of one table, transpiled to Trino, BigQuery,
    Snowflake, Databricks and Spark with its filters set, parses back in that dialect with the same aggregates, columns,
    GROUP BY and ORDER BY as the DuckDB text; one sqlglot cannot write without dropping an argument is refused, saying so."""
    import sqlglot
    from sqlglot import exp

    def shape(tree):
        aggregates = sorted(type(n).__name__ for n in tree.find_all(exp.AggFunc))
        columns = sorted({c.name.lower() for c in tree.find_all(exp.Column)} - {"_col"})  # BigQuery's UNNEST names its element
        return aggregates, columns, sum(len(g.expressions) for g in tree.find_all(exp.Group)), sum(len(o.expressions) for o in tree.find_all(exp.Order))

    checked, refused = 0, []
    for where, sql in _demo_queries():
        tree = sqlglot.parse_one(sql, read="duckdb")
        tables = {t.name for t in tree.find_all(exp.Table)} - {c.alias_or_name for c in tree.find_all(exp.CTE)}
        assert len(tables) == 1, (where, sql)
        values = {}
        for node in tree.find_all(exp.Placeholder, exp.Parameter):
            values[live._param_name(node)] = ["Brno", "Lyon"] if isinstance(node.parent, exp.ArrayContains) else "2026-01-01"
        for dialect in ("trino", "bigquery", "snowflake", "databricks", "spark"):
            try:
                text, _ = live.transpile(sql, {"name": next(iter(tables)), "table": "analytics.t"}, dialect, "named", 1000, values)
            except QueryError as exc:
                assert "cannot be run in the source's database as written" in str(exc), (where, dialect, exc)
                refused.append((where, dialect))
                continue
            assert shape(sqlglot.parse_one(text, read=dialect)) == shape(tree), (where, dialect, sql, text)
            checked += 1
    assert checked >= 100
    # gdp-explorer's `arg_max(v, year, 2)[2]`: Spark, Databricks and BigQuery have no top-n form of it.
    assert {d for _, d in refused} == {"bigquery", "databricks", "spark"} and {w for w, _ in refused} == {"gdp-explorer/dashboard.yaml"}


# --------------------------------------------------------------------------- checks and CI on a live source


def test_validate_binds_a_live_tables_queries_in_its_database_and_says_when_it_could_not(tmp_path, pg_table):
    """CI's `validate` on a live workspace: a wrong column is an error found against the database's catalogue, a right
    query runs there, and an unreachable database is "data checks not run", never a silent pass."""
    import os

    _, table = pg_table
    folder = tmp_path / "ws"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", folder)
    shutil.rmtree(folder / "data")
    (folder / "profile.yaml").unlink()
    (folder / "report.yaml").unlink()  # this test's one artifact is the dashboard below
    ws, _ = workspace.load(folder)
    ws.data["dashboard"] = {
        "title": "Gates",
        "components": [
            {"id": "total", "type": "kpi", "title": "Actual", "query": "SELECT sum(actual) AS value FROM gates", "format": ",.0f"},
            {"id": "wrong", "type": "kpi", "title": "Volume", "query": "SELECT sum(volume) AS value FROM gates", "format": ",.0f"},
        ],
        "layout": [["total", "wrong"]],
    }
    env = {"PYTHONPATH": str(ROOT), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "DASHMEM_CACHE_DIR": str(tmp_path / "cache")}

    def validate(url: str) -> dict:
        ws.data["sources"] = {"sources": [{"name": "gates", "type": "sql", "url": url, "table": table, "mode": "live", "timeout_s": 3}]}
        workspace.save(folder, ws.data)
        done = subprocess.run([sys.executable, "-m", "lib", "validate", str(folder), "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
        assert "Traceback" not in done.stderr, done.stderr
        return {"rc": done.returncode, "found": json.loads(done.stdout)}

    def flat(report: dict) -> list[dict]:
        [entry] = report["found"]["workspaces"]
        return entry["diagnostics"]

    reachable = validate(PG_URL)
    errors = [d for d in flat(reachable) if d["level"] == "error"]
    assert reachable["rc"] == 1 and len(errors) == 1 and "volume" in errors[0]["message"] and errors[0]["line"], errors
    assert not [d for d in flat(reachable) if d["id"] == "check.data_not_run"]

    unreachable = validate("postgresql://postgres@127.0.0.1:1/test")
    notes = [d for d in flat(unreachable) if d["id"] == "check.data_not_run"]
    assert len(notes) == 1 and notes[0]["message"].startswith("data checks not run: "), flat(unreachable)
    assert not [d for d in flat(unreachable) if d["level"] == "error"] and unreachable["rc"] == 0
