"""Live sources at scale: a dashboard over a 5-million-row PostgreSQL table (lib/data/live.py).

tests/data/test_live.py covers the live path on a 200k-row table (equality with a snapshot of the demo
dashboard, binding, caps, refusals, the cache). Here the table is big enough that pulling it would
show, generated once for the module inside PostgreSQL (generate_series, the shape of bench.live:
an order date, region and category, units, price, discount, revenue) and dropped afterwards.

The reference is the same dashboard rendered in snapshot mode (the same `render`, sandbox and query
workers) over the same rows. Those rows are not pulled through the SQL connector: fetching 5M rows
into Python costs about a minute and a gigabyte here, against a module budget of about 60 s. They
are exported with PostgreSQL's COPY to a CSV and read by DuckDB into Arrow with the catalogue's
types, a few seconds; every query of the reference still runs in DuckDB, the snapshot engine.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from contextlib import contextmanager

import pyarrow.compute as pc
import pytest
import sqlalchemy as sa
from sqlalchemy import event

from bench.live import DASHBOARD, REGIONS, create_orders_table
from lib.artifacts.render import QueryCache, render
from lib.data import live
from lib.data.connectors.base import FetchContext
from lib.memory import workspace
from tests.helpers.databases import PG_URL, psycopg2_blocking

from ..conftest import ROOT, server_engine, statements_sent

pytestmark = pytest.mark.slow  # a 5M-row table: about a minute of the suite

ROWS = 5_000_000
MEMORY_BOUND_MB = 400  # the app process renders in ~220 MB; holding the table's rows would take it past 1 GB


@pytest.fixture(scope="module")
def orders_table():
    """The generated table's name in PostgreSQL; dropped when the module is done."""
    engine = server_engine("postgresql")
    name = f"dm_live_scale_{uuid.uuid4().hex[:10]}"
    try:
        with engine.begin() as connection:
            create_orders_table(connection, name, ROWS)
        yield name
    finally:
        with engine.begin() as connection:
            connection.exec_driver_sql(f"DROP TABLE IF EXISTS {name}")
        engine.dispose()


@pytest.fixture(scope="module")
def snapshot_rows(orders_table, tmp_path_factory):
    """The same rows as an Arrow table: COPY to CSV in PostgreSQL, read by DuckDB with the catalogue's types."""
    import duckdb

    csv = tmp_path_factory.mktemp("live-scale") / "orders.csv"
    catalogue = live.catalogue_table(_source(orders_table), FetchContext(workspace_path=csv.parent))
    duck_types = {"int64": "BIGINT", "double": "DOUBLE", "string": "VARCHAR", "date32[day]": "DATE"}
    columns = {f.name: duck_types[str(f.type)] for f in catalogue.schema}
    engine = server_engine("postgresql")
    connection = engine.raw_connection()
    try:
        with csv.open("w", encoding="utf-8") as out:
            with psycopg2_blocking():  # COPY needs psycopg2's own blocking waits (lib.data.connectors.sql_wait installs its own)
                connection.cursor().copy_expert(f"COPY {orders_table} TO STDOUT WITH (FORMAT csv, HEADER true)", out)  # psycopg2's cursor
    finally:
        connection.close()
        engine.dispose()
    reader = duckdb.connect()
    reader.execute("SET enable_progress_bar = false")
    table = reader.read_csv(str(csv), header=True, columns=columns).to_arrow_table()
    reader.close()
    csv.unlink()
    assert table.num_rows == ROWS and table.schema.names == catalogue.schema.names
    return table


def _source(table: str, **extra) -> dict:
    return {"name": "orders", "type": "sql", "url": PG_URL, "table": table, "mode": "live", "cache_ttl_s": 0, **extra}


def _live(table: str, chosen: dict, dashboard: dict = DASHBOARD, timeout_s: float = 30):
    source = _source(table)
    files = {"dashboard": dashboard, "sources": {"sources": [source]}, "output": {"data_injection": {"query_timeout_s": timeout_s}}}
    stand_in = {"orders": live.catalogue_table(source, FetchContext(workspace_path=ROOT))}
    return render(files, stand_in, "v1", chosen, cache=QueryCache())


def _snapshot(table: str, rows, chosen: dict):
    files = {"dashboard": DASHBOARD, "sources": {"sources": [{**_source(table), "mode": "snapshot"}]}, "output": {"data_injection": {"query_timeout_s": 60}}}
    return render(files, {"orders": rows}, "v1", chosen, cache=QueryCache())


def _results(rendered) -> dict[str, list[list]]:
    out = {}
    for comp in rendered.components:
        assert comp.error is None, (comp.id, comp.error)
        assert comp.result is not None
        out[comp.id] = [list(row) for row in comp.result.rows]
    return out


def _same(got: dict, expected: dict) -> None:
    assert got.keys() == expected.keys()
    for key, rows in expected.items():
        assert len(got[key]) == len(rows), key
        for a, b in zip(got[key], rows):
            assert len(a) == len(b), key
            for x, y in zip(a, b):
                if isinstance(y, float):  # sums of 5M doubles: the two engines add them in another order
                    assert x == pytest.approx(y, rel=1e-9), key
                else:
                    assert str(x) == str(y), key


@contextmanager
def rows_received(table: str):
    """The rows PostgreSQL sent for each statement on `table` (psycopg2's cursors hold all of a result)."""
    counts: list[int] = []

    def record(conn, cursor, statement, parameters, context, executemany):
        if table in statement:
            counts.append(cursor.rowcount)

    event.listen(sa.engine.Engine, "after_cursor_execute", record)
    try:
        yield counts
    finally:
        event.remove(sa.engine.Engine, "after_cursor_execute", record)


# --------------------------------------------------------------------------- results, and only the results, come back


def test_live_dashboard_equals_the_snapshot_and_receives_only_its_results(orders_table, snapshot_rows):
    with rows_received(orders_table) as counts:
        rendered = _live(orders_table, {})
    expected = _snapshot(orders_table, snapshot_rows, {})
    _same(_results(rendered), _results(expected))
    assert [f.options for f in rendered.filters] == [f.options for f in expected.filters] == [sorted(REGIONS)]
    kpi = rendered.component("revenue").result
    assert kpi is not None and kpi.rows[0][1] == pc.sum(snapshot_rows.column("units")).as_py()  # pyright: ignore[reportAttributeAccessIssue]  # all 5M rows counted (pc has no stubs)
    # Every row the database sent is a row on the screen: 5 filter options, 1 KPI row, 8 bars, 50 table rows.
    shown = sum(len(c.result.rows) for c in rendered.components if c.result is not None) + sum(len(f.options or []) for f in rendered.filters)
    assert len(counts) == 4 and sum(counts) == shown == 64


def test_a_filter_change_reaches_the_database_as_a_bind_parameter(orders_table, snapshot_rows):
    with statements_sent() as first_sent:
        _live(orders_table, {"region": ["North"]})
    with statements_sent() as sent:
        changed = _live(orders_table, {"region": ["West", "Central"]})
    _same(_results(changed), _results(_snapshot(orders_table, snapshot_rows, {"region": ["West", "Central"]})))
    before = [(s, p) for s, p in first_sent if orders_table in s]
    after = [(s, p) for s, p in sent if orders_table in s]
    # The same SQL text: only the parameters changed (in any order: a render's components query side by side).
    assert sorted(s for s, _ in after) == sorted(s for s, _ in before)
    filtered = [p for _, p in after if isinstance(p, dict) and p.get("region") is not None]
    assert len(filtered) == 3 and all(p["region"] == ["West", "Central"] for p in filtered)
    assert not any(value in s for s, _ in after for value in ("West", "Central", "North"))


# --------------------------------------------------------------------------- the app process stays small


def test_the_app_process_renders_5m_rows_in_small_memory(orders_table, snapshot_rows, tmp_path):
    """Refresh (the catalogue) and render in a fresh process, as the app does: its peak RSS stays far below the table's size."""
    folder = tmp_path / "live-orders"
    meta = workspace.blank("Orders", "olivia", "2026-12-01")
    workspace.save(folder, {**meta, "sources": {"sources": [_source(orders_table)]}, "dashboard": DASHBOARD})
    script = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from lib.memory import workspace\n"
        "from lib.roles.access import OPERATOR\n"
        "from lib.data.refresh import refresh\n"
        "from lib.artifacts.render import render\n"
        "from lib.data.snapshots import Warehouse\n"
        "folder = Path(sys.argv[1])\n"
        "wh = Warehouse.for_workspace(folder, Path(sys.argv[2]))\n"
        "report = refresh(folder, wh, user=OPERATOR)\n"
        "assert report.ok, report.summary()\n"
        "snap = wh.current()\n"
        "r = render(workspace.load(folder)[0].data, wh.tables(snap), snap.id)\n"
        "peak = next(int(l.split()[1]) for l in Path('/proc/self/status').read_text().splitlines() if l.startswith('VmHWM:'))\n"
        "kpi = r.component('revenue')\n"
        "print(json.dumps({'peak_mb': peak / 1024, 'units': kpi.result.rows[0][1], 'errors': r.errors}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(folder), str(tmp_path / "cache")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "XDG_CACHE_HOME": str(tmp_path / "xdg")},
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["errors"] == []
    assert out["units"] == pc.sum(snapshot_rows.column("units")).as_py()  # pyright: ignore[reportAttributeAccessIssue]  # pc has no stubs
    assert out["peak_mb"] < MEMORY_BOUND_MB, f"the render process peaked at {out['peak_mb']:.0f} MB"


# --------------------------------------------------------------------------- a runaway query


def test_statement_timeout_stops_a_runaway_query_and_the_source_keeps_working(orders_table):
    runaway = {
        "components": [
            {"id": "pairs", "type": "kpi", "title": "Pairs", "query": "SELECT count(*) AS value FROM orders a JOIN orders b ON a.units = b.units"},
        ]
    }
    rendered = _live(orders_table, {}, runaway, timeout_s=1)
    error = rendered.component("pairs").error
    assert error == "query failed: the query ran longer than 1 s in orders's database and was stopped"
    engine = server_engine("postgresql")
    try:
        with engine.connect() as connection:
            still_running = connection.exec_driver_sql(
                "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND pid <> pg_backend_pid() AND query LIKE %(pattern)s",
                {"pattern": f"%{orders_table}%JOIN%"},
            ).scalar()
    finally:
        engine.dispose()
    assert still_running == 0  # stopped in the database, not only given up on by the app
    # The pooled connection the timeout hit serves the next query.
    after = live.run(_source(orders_table), "SELECT count(*) AS n FROM orders WHERE order_id <= 10")
    assert after.rows == [(10,)]
