"""Spark sources (lib/data/connectors/spark_connect.py) against a real local Spark Connect server.

One server for the module (tests/helpers/spark.py: the full pyspark of `make spark` on Java 17, bound to
127.0.0.1 on a free port, UI off, stopped by PID). In it: the supply-chain demo's `gates` rows, a generated
10M-row `events` table, and a view of the types Spark has and dashboards cannot show. The demo dashboard
over Spark must give the numbers DuckDB gives over the CSV; everything else is asked of Spark itself.
Without Java or the server installed, the tests skip saying which.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow.csv as pacsv
import pytest

from lib.artifacts import explore
from lib.artifacts.render import QueryCache, render
from lib.data import live, live_profile
from lib.data.connectors import spark_connect, sql_source
from lib.data.connectors.base import FetchContext, SourceError
from lib.data.refresh import refresh
from lib.data.sandbox import QueryError, QueryRefused
from lib.data.snapshots import Warehouse
from lib.memory import workspace
from lib.roles.access import OPERATOR
from tests.helpers import ROOT, WORKSPACES, current_id
from tests.helpers import spark as spark_helper
from tests.helpers.live import _workspace, results, same

from ..conftest import FlakyProxy, free_port

pytestmark = pytest.mark.skipif(spark_helper.missing() is not None, reason=str(spark_helper.missing()))

EVENTS = 10_000_000
SITES = ["Brno", "Lyon", "Porto", "Turku"]
CHOSEN = {"site": ["Brno", "Lyon"]}
GATES_CSV = WORKSPACES / "supply-chain-weekly" / "data" / "gates.csv"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The module's Spark Connect server with its tables; yields (url, a client session for the tests' own checks)."""
    folder = tmp_path_factory.mktemp("spark")
    srv = spark_helper.Server(folder)
    try:
        srv.wait_until_serving()
        spark = spark_connect.connect(srv.url)
        gates = pacsv.read_csv(GATES_CSV)
        spark.createDataFrame(gates.to_pandas()).createOrReplaceTempView("gates_csv")
        spark.sql(
            "CREATE TABLE gates USING parquet AS SELECT CAST(day AS DATE) AS day, week, site, gate, CAST(target AS BIGINT) AS target, "
            "CAST(actual AS BIGINT) AS actual, CAST(attainment AS DOUBLE) AS attainment FROM gates_csv"
        )
        sites = ", ".join(f"'{s}'" for s in SITES)
        spark.sql(
            f"CREATE TABLE events USING parquet AS SELECT id, element_at(array({sites}), CAST(id % 4 + 1 AS INT)) AS site, "
            "CAST(id % 1000 AS DOUBLE) / 10 AS amount, date_add(DATE'2025-01-01', CAST(id % 365 AS INT)) AS day, "
            f"CAST(id % 1000 AS DECIMAL(38, 10)) AS exact FROM range({EVENTS})"
        )
        spark.sql(
            "CREATE VIEW odd AS SELECT id, map('a', id) AS tags, array(id, id + 1) AS pair, named_struct('x', id) AS point, "
            "CAST(id AS DECIMAL(38, 10)) AS big, make_dt_interval(0, 0, 0, id) AS waited FROM range(3)"
        )
        yield srv.url, spark
    finally:
        srv.stop()


# Beside a busy test run a Spark query over even a small table can take seconds (planning in a new session, two
# cores shared with the suite's workers): the dashboards here get the time limit a Spark user would set.
def _with_spark_limits(files: dict) -> dict:
    output = files.get("output") or {}
    injection = {"mode": "queries_at_render", **(output.get("data_injection") or {}), "query_timeout_s": 60}
    return {**files, "output": {**output, "data_injection": injection}}


def _source(url: str, table: str, name: str = "gates", **extra) -> dict:
    return {"name": name, "type": "sql", "url": url, "table": table, "mode": "live", "cache_ttl_s": 0, **extra}


# --------------------------------------------------------------------------- the demo dashboard, live in Spark


def test_demo_dashboard_over_spark_equals_duckdb_over_the_csv(server, tmp_path):
    url, _ = server
    files = workspace.load(WORKSPACES / "supply-chain-weekly")[0].data
    snapshot_tables = Warehouse.for_workspace(WORKSPACES / "supply-chain-weekly", tmp_path / "cache")
    refresh(WORKSPACES / "supply-chain-weekly", snapshot_tables, user=OPERATOR)
    expected = render(files, snapshot_tables.tables(), "v1", CHOSEN, cache=QueryCache())

    source = _source(url, "gates")
    stand_in = live.catalogue_table(source, FetchContext(workspace_path=tmp_path))
    assert stand_in.num_rows == 0
    assert dict(zip(stand_in.schema.names, map(str, stand_in.schema.types))) == {
        "day": "date32[day]",
        "week": "string",
        "site": "string",
        "gate": "string",
        "target": "int64",
        "actual": "int64",
        "attainment": "double",
    }
    rendered = render(_with_spark_limits({**files, "sources": {"sources": [source]}}), {"gates": stand_in}, "v1", CHOSEN, cache=QueryCache())
    same(results(rendered), results(expected), ties_in_any_order=True)
    assert [f.options for f in rendered.filters] == [f.options for f in expected.filters]


@pytest.mark.slow
def test_refresh_query_explain_rows_changes_and_export_in_fresh_cli_processes(server, tmp_path):
    """The user's path as separate processes: refresh reads the catalogue only, `query` answers from Spark (never
    from the empty stand-in), explain, rows and changes work, and the exported dashboard shows Spark's figures."""
    url, spark = server
    folder = _workspace(tmp_path, _source(url, "gates"), "spark-ws")
    ws, _ = workspace.load(folder)
    workspace.save(folder, _with_spark_limits(ws.data))
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "XDG_CACHE_HOME": str(tmp_path / "xdg")}

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "lib", *args], cwd=tmp_path, capture_output=True, text=True, timeout=180, env=env)

    done = cli("refresh", str(folder))
    assert done.returncode == 0, done.stdout + done.stderr
    total, rows = spark.sql("SELECT sum(actual), count(*) FROM gates").toArrow().to_pylist()[0].values()
    done = cli("query", str(folder), "select count(*) as n, sum(actual) as s from gates")
    assert done.returncode == 0, done.stderr
    assert str(rows) in done.stdout and str(total) in done.stdout, done.stdout
    done = cli("explain", str(folder), "kpi_volume", "--json")
    assert done.returncode == 0, done.stderr
    assert "gates" in done.stdout and "Spark" not in done.stderr
    done = cli("rows", str(folder), "kpi_volume", "--max-rows", "3", "--json")
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["rows"]) == 3
    done = cli("changes", str(folder))
    assert done.returncode == 0, done.stderr
    assert "no earlier data kept" in done.stdout
    done = cli("export", str(folder), "--html", str(tmp_path / "dashboard.html"))
    assert done.returncode == 0, done.stderr
    assert f"{total:,}" in (tmp_path / "dashboard.html").read_text()
    done = cli("export", str(folder), "--report", "--html", str(tmp_path / "report.html"))
    assert done.returncode == 0, done.stderr
    report = (tmp_path / "report.html").read_text()
    sites = sorted(r["site"] for r in spark.sql("SELECT DISTINCT site FROM gates").toArrow().to_pylist())
    assert all(site in report for site in sites) and 'role="alert"' not in report and 'role="alert"' not in (tmp_path / "dashboard.html").read_text()


@pytest.mark.parametrize("grain", explore.GRAINS)
def test_explore_asks_spark_and_answers_as_duckdb_does_over_the_csv(server, tmp_path, grain):
    """A question with a breakdown, a time grain, filters and a top-n, built from the profile Spark computed."""
    url, _ = server
    source = _source(url, "gates")
    stand_in = live.catalogue_table(source, FetchContext(workspace_path=tmp_path))
    profile = {"tables": [live_profile.profile_live_table("gates", source, stand_in)]}
    question = explore.Question(
        "gates",
        "actual",
        "sum",
        breakdown="site",
        time="day",
        grain=grain,
        filters=(explore.Filter("gate", "in", ["Supply", "Orders"]), explore.Filter("site", "contains", "r")),
        top=2,
    )
    _, got = explore.run(
        question, _with_spark_limits({"profile": profile, "sources": {"sources": [source]}}), {}, "v1", workspace_path=tmp_path, cache=QueryCache()
    )
    csv = pacsv.read_csv(GATES_CSV, convert_options=pacsv.ConvertOptions(column_types={"day": "date32"}))
    _, expected = explore.run(question, {"profile": profile}, {"gates": csv}, "v1", cache=QueryCache())

    def rows(result):
        return sorted((str(r["period"])[:10], r["site"], int(r["value"])) for r in result.table.to_pylist())

    assert rows(got) == rows(expected) and rows(got)


# --------------------------------------------------------------------------- queries: parameters, caps, limits, refusals


def test_a_filter_value_is_a_named_parameter_never_text(server):
    url, _ = server
    source = _source(url, "gates")
    sql = "SELECT count(*) AS n FROM gates WHERE ($site IS NULL OR list_contains($site, site))"
    hostile = "x' OR '1'='1"
    text, names = live.transpile(sql, source, "spark", "named", 10, {"site": [hostile]})
    assert hostile not in text and ":site__dm0" in text and names
    assert live.run(source, sql, {"site": [hostile]}).rows == [(0,)]
    assert live.run(source, sql, {"site": ["Brno"]}).rows[0][0] > 0


def test_the_row_cap_and_the_time_limit_hold_on_ten_million_rows(server):
    url, spark = server
    source = _source(url, "events", name="events")
    capped = live.run(source, "SELECT id, site FROM events", {}, max_rows=5)
    assert capped.truncated and capped.table.num_rows == 5
    start = time.monotonic()
    with pytest.raises(QueryError, match="ran longer than 2 s"):
        live.run(source, "SELECT count(*) FROM events a JOIN events b ON a.id % 1000 = b.id % 1000", {}, timeout_s=2)
    assert time.monotonic() - start < 2 + spark_connect.GRACE_S + 3
    assert spark.sql("SELECT 1 AS one").toArrow().to_pylist() == [{"one": 1}]  # the server goes on answering
    assert live.run(source, "SELECT count(*) AS n FROM events", {}).rows == [(EVENTS,)]


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT reflect('java.lang.System', 'exit', 0) FROM events",
        "SELECT java_method('java.lang.System', 'exit', 0) FROM events",
        "SELECT try_reflect('java.lang.Runtime', 'getRuntime') FROM events",
        "SELECT * FROM read_files('/etc/passwd')",
        "SELECT secret('scope', 'key') FROM events",
        "SELECT input_file_name() FROM events",
        "CREATE FUNCTION f(x) AS x + 1",
        "CREATE TEMPORARY FUNCTION f AS 'java.lang.System' USING JAR '/tmp/x.jar'",
        "SELECT count(*) FROM events; DROP TABLE events",
    ],
)
def test_spark_s_dangerous_functions_are_refused_before_anything_is_sent(server, sql):
    url, spark = server
    with pytest.raises(QueryError) as caught:
        live.run(_source(url, "events", name="events"), sql, {})
    assert isinstance(caught.value, QueryRefused) or "syntax error" in str(caught.value)  # or DuckDB's grammar has no such statement
    assert spark.sql("SELECT count(*) AS n FROM events").toArrow().column("n").to_pylist() == [EVENTS]  # still there, still serving


# --------------------------------------------------------------------------- profile, change marker, snapshot mode


def test_the_profile_is_computed_in_spark_and_says_what_is_approximate(server):
    url, spark = server
    source = _source(url, "events", name="events")
    stand_in = live.catalogue_table(source, FetchContext(workspace_path=Path.cwd()))
    profile = live_profile.profile_live_table("events", source, stand_in)
    assert profile["rows"] == EVENTS
    columns = {c["name"]: c for c in profile["columns"]}
    lowest, highest, mean = spark.sql("SELECT min(amount), max(amount), avg(amount) FROM events").toArrow().to_pylist()[0].values()
    assert columns["amount"]["min"] == lowest and columns["amount"]["max"] == highest
    assert columns["amount"]["mean"] == pytest.approx(mean, rel=1e-6)
    assert columns["site"]["distinct"] == len(SITES) and {t["value"] for t in columns["site"]["top"]} == set(SITES)
    assert columns["id"]["distinct"] == pytest.approx(EVENTS, rel=0.1)  # HyperLogLog's estimate, said to be one
    assert set(profile["approximate"]) == {"distinct", "quantiles"}  # above the exact size: approx_count_distinct, percentile_approx


def test_a_view_with_types_dashboards_cannot_show_profiles_the_rest_and_names_the_column_when_selected(server, tmp_path):
    url, _ = server
    source = _source(url, "odd", name="odd")
    stand_in = live.catalogue_table(source, FetchContext(workspace_path=tmp_path))
    assert spark_connect.unsupported_columns(stand_in) == {
        "tags": "map<string,bigint>",
        "pair": "array<bigint>",
        "point": "struct<x:bigint>",
        "waited": "interval day to second",
    }
    profile = live_profile.profile_live_table("odd", source, stand_in)
    assert [c["name"] for c in profile["columns"]] == ["id", "big"]
    assert live.run(source, "SELECT sum(big) AS total FROM odd", {}).rows == [(3,)]  # decimal(38, 10) as a number
    for column, kind in (("tags", "map"), ("pair", "array"), ("point", "struct"), ("waited", "interval")):
        with pytest.raises(QueryError, match=rf"column '{column}' is a Spark {kind}.*to_json\({column}\)"):
            live.run(source, f"SELECT {column} FROM odd", {})


def test_refresh_with_a_change_marker_keeps_the_snapshot_until_spark_s_data_changes(server, tmp_path):
    url, spark = server
    spark.sql("CREATE TABLE marked USING parquet AS SELECT * FROM gates")
    source = _source(url, "marked", name="gates", change_marker={"max": "day"})
    folder = _workspace(tmp_path, source, "spark-ws")
    wh = Warehouse.for_workspace(folder, tmp_path / "cache")
    first = refresh(folder, wh, user=OPERATOR)
    assert first.ok, first.summary()
    version = current_id(wh)
    start = time.monotonic()
    again = refresh(folder, wh, user=OPERATOR)
    took = time.monotonic() - start
    assert again.ok and current_id(wh) == version
    spark.sql("INSERT INTO marked SELECT date_add((SELECT max(day) FROM marked), 1), week, site, gate, target, actual, attainment FROM marked LIMIT 1")
    changed = refresh(folder, wh, user=OPERATOR)
    assert changed.ok and current_id(wh) != version
    assert took < 30  # a metadata call and one max(), not a copy of the table


def test_snapshot_mode_copies_a_small_table_as_duckdb_reads_the_csv(server, tmp_path):
    url, _ = server
    table = sql_source.fetch({"name": "gates", "type": "sql", "url": url, "table": "gates"}, FetchContext(workspace_path=tmp_path))
    csv = pacsv.read_csv(GATES_CSV)
    assert table.num_rows == csv.num_rows
    assert sum(table.column("actual").to_pylist()) == sum(csv.column("actual").to_pylist())
    query = sql_source.fetch(
        {"name": "gates", "type": "sql", "url": url, "query": "SELECT site, sum(actual) AS actual FROM gates GROUP BY site"},
        FetchContext(workspace_path=tmp_path),
    )
    assert sorted(query.column("site").to_pylist()) == sorted(set(csv.column("site").to_pylist()))


# --------------------------------------------------------------------------- failures in plain words


def test_a_server_that_is_not_running_fails_at_once_in_plain_words(tmp_path):
    port = free_port()
    source = _source(f"sc://127.0.0.1:{port}", "gates", retry={"attempts": 2, "backoff_s": 0.1})
    start = time.monotonic()
    with pytest.raises(QueryError, match=rf"cannot reach the Spark Connect server at 127.0.0.1:{port} \(is it running\?\)"):
        live.run(source, "SELECT count(*) FROM gates", {})
    assert time.monotonic() - start < 30
    with pytest.raises(QueryError, match="not asked again"):  # the page's other components do not each wait again
        live.run(source, "SELECT 1 AS one FROM gates", {})
    live.OUTAGES = live.Outages()
    with pytest.raises(SourceError, match=rf"'gates': cannot read the catalogue: cannot reach the Spark Connect server at 127.0.0.1:{port}"):
        live.catalogue_table(source, FetchContext(workspace_path=tmp_path))


def test_an_unknown_table_is_named(server, tmp_path):
    url, _ = server
    with pytest.raises(SourceError, match=r"cannot read the catalogue: The table or view `nope` cannot be found") as caught:
        live.catalogue_table(_source(url, "nope"), FetchContext(workspace_path=tmp_path))
    assert "JVM" not in str(caught.value) and "\n" not in str(caught.value)


def test_a_stalled_connection_ends_at_the_deadline_in_plain_words(server):
    url, _ = server
    proxy = FlakyProxy(("127.0.0.1", int(url.rsplit(":", 1)[1])))
    try:
        source = _source(f"sc://127.0.0.1:{proxy.port}", "events", name="events", retry={"attempts": 1})
        assert live.run(source, "SELECT count(*) AS n FROM events", {}).rows == [(EVENTS,)]
        proxy.silence()
        start = time.monotonic()
        with pytest.raises(QueryError, match=r"the Spark Connect server at 127.0.0.1:\d+ sent nothing for 7 s"):
            live.run(source, "SELECT max(id) AS n FROM events", {}, timeout_s=2)
        assert time.monotonic() - start < 2 + spark_connect.GRACE_S + 3
        with pytest.raises(QueryError, match="not asked again"):  # held for a while: the page's other components fail at once
            live.run(source, "SELECT min(id) AS n FROM events", {})
    finally:
        proxy.stop()
        live.OUTAGES = live.Outages()


def _asked_in_background(source: dict, sql: str) -> tuple[threading.Thread, list[BaseException]]:
    """A live query running on a thread of its own (time limit 60 s); the list gets what it raised."""
    failed: list[BaseException] = []

    def ask() -> None:
        try:
            live.run(source, sql, {}, timeout_s=60)
        except BaseException as exc:  # noqa: BLE001 - examined by the caller
            failed.append(exc)

    asking = threading.Thread(target=ask)
    asking.start()
    return asking, failed


def test_a_server_lost_mid_query_ends_in_plain_words(server):
    url, _ = server
    proxy = FlakyProxy(("127.0.0.1", int(url.rsplit(":", 1)[1])))
    source = _source(f"sc://127.0.0.1:{proxy.port}", "events", name="events", retry={"attempts": 2, "backoff_s": 0.1})
    try:
        asking, failed = _asked_in_background(source, "SELECT count(DISTINCT id) AS n FROM events")
        time.sleep(1.0)  # the query is running in Spark
        start = time.monotonic()
        proxy.cut()
        asking.join(timeout=30)
        assert not asking.is_alive() and time.monotonic() - start < 15
        assert len(failed) == 1 and isinstance(failed[0], QueryError)
        assert "cannot reach the Spark Connect server" in str(failed[0]) and "\n" not in str(failed[0])
    finally:
        proxy.stop()
        live.OUTAGES = live.Outages()


@pytest.mark.slow
def test_a_server_killed_mid_query_ends_in_plain_words(tmp_path):
    """A Spark Connect server of its own, killed (SIGKILL, by PID) while a query runs in it."""
    srv = spark_helper.Server(tmp_path)
    try:
        srv.wait_until_serving()
        source = _source(srv.url, "numbers", name="numbers", retry={"attempts": 2, "backoff_s": 0.1})
        spark = spark_connect.connect(srv.url)
        spark.sql("CREATE TABLE numbers USING parquet AS SELECT id FROM range(2000000)")
        asking, failed = _asked_in_background(source, "SELECT count(*) AS n FROM numbers a JOIN numbers b ON a.id % 100 = b.id % 100")
        time.sleep(2.0)  # running in Spark
        start = time.monotonic()
        os.killpg(srv.pid, signal.SIGKILL)
        asking.join(timeout=30)
        assert not asking.is_alive() and time.monotonic() - start < 15
        assert len(failed) == 1 and isinstance(failed[0], QueryError), failed
        assert f"cannot reach the Spark Connect server at 127.0.0.1:{srv.port} (is it running?)" in str(failed[0])
    finally:
        srv.stop()
        live.OUTAGES = live.Outages()


def test_one_failing_component_leaves_the_rest_of_the_page_rendering(server, tmp_path):
    url, _ = server
    files = workspace.load(WORKSPACES / "supply-chain-weekly")[0].data
    dashboard = json.loads(json.dumps(files["dashboard"]))
    broken = next(c for c in dashboard["components"] if c.get("type") == "kpi")
    broken["query"] = "SELECT reflect('java.lang.System', 'exit', 0) AS value FROM gates"
    source = _source(url, "gates")
    stand_in = live.catalogue_table(source, FetchContext(workspace_path=tmp_path))
    rendered = render(
        _with_spark_limits({**files, "dashboard": dashboard, "sources": {"sources": [source]}}), {"gates": stand_in}, "v1", CHOSEN, cache=QueryCache()
    )
    errors = {c.id: c.error for c in rendered.components if c.error}
    assert list(errors) == [broken["id"]] and "reflect" in str(errors[broken["id"]])
    assert all(c.result is not None or c.text_results for c in rendered.components if c.id != broken["id"])
