"""One query engine (lib/data/engine.py): a live table's SQL runs in its database, and nothing answers from its stand-in.

A live `sql` source's table in the snapshot is an empty stand-in (its columns only). These tests
build live workspaces over real tables in the local PostgreSQL and MariaDB (a server that is not
running skips with the reason) and check that every way of running SQL on the workspace either
answers from the database or refuses in one plain line: the CLI's `query` in a fresh process,
the snapshot store's own `Warehouse.query`, and the engine itself over the latest and an earlier load.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

from lib.data import live, queries
from lib.data.refresh import refresh
from lib.data.sandbox import QueryError
from lib.data.snapshots import Warehouse
from lib.memory import workspace
from lib.roles.access import OPERATOR

from ..conftest import ROOT, WORKSPACES, server_engine
from ..helpers.databases import MARIADB_URL, PG_URL

ROWS = 1_234
URLS = {"postgresql": PG_URL, "mariadb": MARIADB_URL}  # the worker's own databases (tests/helpers/databases.py)


@pytest.fixture(scope="module", params=["postgresql", "mariadb"])
def events_table(request):
    """(admin engine, table name, live url): ROWS rows of (id, amount) in PostgreSQL or MariaDB; dropped afterwards."""
    engine = server_engine(request.param)
    name = f"dm_engine_{uuid.uuid4().hex[:10]}"
    with engine.begin() as connection:
        connection.exec_driver_sql(f"CREATE TABLE {name} (id BIGINT, amount BIGINT)")
        connection.execute(sa.text(f"INSERT INTO {name} VALUES (:id, :amount)"), [{"id": i, "amount": (i * 37) % 1000} for i in range(ROWS)])
    yield engine, name, URLS[request.param]
    with engine.begin() as connection:
        connection.exec_driver_sql(f"DROP TABLE IF EXISTS {name}")
    engine.dispose()


def _database_sum(engine: sa.Engine, table: str) -> int:
    with engine.connect() as connection:
        return int(connection.exec_driver_sql(f"SELECT sum(amount) FROM {table}").scalar_one())


def _live_workspace(tmp_path: Path, table: str, url: str) -> Path:
    """A workspace whose one source, `events`, is the live table; a one-KPI dashboard over it, no report."""
    folder = tmp_path / "live-events"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", folder)
    shutil.rmtree(folder / "data")
    (folder / "report.yaml").unlink()
    (folder / "profile.yaml").unlink()
    ws, _ = workspace.load(folder)
    ws.data["sources"] = {"sources": [{"name": "events", "type": "sql", "url": url, "table": table, "mode": "live", "cache_ttl_s": 0}]}
    ws.data["dashboard"] = {
        "title": "Events",
        "components": [{"id": "events", "type": "kpi", "title": "Events", "query": "SELECT count(*) AS value FROM events"}],
        "layout": [["events"]],
    }
    ws.data.pop("report", None)
    ws.data.pop("profile", None)
    workspace.save(folder, ws.data)
    return folder


def _cli(*args, timeout: int = 120) -> subprocess.CompletedProcess:
    """`python -m lib ARGS` as a fresh process, as a person runs it."""
    return subprocess.run(
        [sys.executable, "-m", "lib", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(ROOT), "XDG_CACHE_HOME": os.environ["XDG_CACHE_HOME"]},
    )


# --------------------------------------------------------------------------- the CLI's query


def test_cli_query_answers_a_live_table_from_its_database(events_table, tmp_path):
    admin, table, url = events_table
    folder = _live_workspace(tmp_path, table, url)
    refreshed = _cli("refresh", folder)
    assert refreshed.returncode == 0, refreshed.stdout + refreshed.stderr

    counted = _cli("query", folder, "select count(*) as n from events", "--json")
    assert counted.returncode == 0, counted.stderr
    assert json.loads(counted.stdout)["rows"] == [{"n": ROWS}]  # not 0: the stand-in is empty

    summed = _cli("query", folder, "select sum(amount) as total from events", "--json")
    assert summed.returncode == 0, summed.stderr
    assert json.loads(summed.stdout)["rows"] == [{"total": _database_sum(admin, table)}]  # not NULL

    text = _cli("query", folder, "select count(*) as n from events")
    assert text.returncode == 0 and str(ROWS) in text.stdout, text.stdout + text.stderr


def test_cli_query_joining_a_live_table_with_a_snapshot_one_fails_in_one_line(events_table, tmp_path):
    _, table, url = events_table
    folder = _live_workspace(tmp_path, table, url)
    assert _cli("refresh", folder).returncode == 0
    proc = _cli("query", folder, "select count(*) from events, (select 1 as x) t where t.x = 1 and events.id in (select 1)")
    assert proc.returncode == 0  # a subquery is no other table: it still runs in the database
    mixed = _cli("query", folder, "select 1 from events join nowhere using (id)")
    assert mixed.returncode != 0 and mixed.stdout == ""
    assert len(mixed.stderr.strip().splitlines()) == 1 and "Traceback" not in mixed.stderr, mixed.stderr
    assert "events (live" in mixed.stderr


# --------------------------------------------------------------------------- nothing answers from a stand-in


def test_the_snapshot_path_refuses_a_query_naming_a_live_stand_in(events_table, tmp_path):
    _, table, url = events_table
    folder = _live_workspace(tmp_path, table, url)
    wh = Warehouse.for_workspace(folder, tmp_path / "cache")
    assert refresh(folder, wh, user=OPERATOR).ok
    assert wh.tables()["events"].num_rows == 0  # the stand-in: columns only

    for run in (
        lambda sql: wh.query(sql),
        lambda sql: queries.run_query(wh.tables(), sql),
    ):
        with pytest.raises(QueryError) as caught:
            run("SELECT count(*) FROM events")
        message = str(caught.value)
        assert "events" in message and "live" in message and "\n" not in message, message
        with pytest.raises(QueryError, match="live"):
            run('WITH e AS (SELECT amount FROM "EVENTS") SELECT sum(amount) FROM e')
        assert run("SELECT 41 + 1 AS answer").rows == [(42,)]  # a query naming no stand-in runs as always
        assert run("SELECT 'events' AS word").rows == [("events",)]  # a name in a string is no table


def test_the_engine_routes_the_latest_load_and_refuses_an_earlier_one(events_table, tmp_path):
    from lib.data.engine import Engine, NoEarlierData  # here, so the tests above fail on what they check before the engine exists

    admin, table, url = events_table
    folder = _live_workspace(tmp_path, table, url)
    wh = Warehouse.for_workspace(folder, tmp_path / "cache")
    assert refresh(folder, wh, user=OPERATOR).ok
    ws, _ = workspace.load(folder)
    snapshot = wh.current()
    assert snapshot is not None
    live.LIVE_CACHE = live.LiveCache()

    engine = Engine.for_workspace(ws.data, wh.tables(snapshot), snapshot.id, workspace_path=folder)
    assert engine.source_of("SELECT count(*) FROM events") == "events"
    assert engine.run("SELECT count(*) AS n, sum(amount) AS total FROM events").rows == [(ROWS, _database_sum(admin, table))]
    assert engine.bind("SELECT amount FROM events") == [("amount", "BIGINT")]

    earlier = Engine.for_workspace(ws.data, wh.tables(snapshot), snapshot.id, workspace_path=folder, earlier_load=True)
    with pytest.raises(NoEarlierData, match="no earlier data kept: events is a live source"):
        earlier.run("SELECT count(*) FROM events")
