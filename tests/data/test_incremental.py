"""Incremental refresh of `sql` sources (`incremental: {cursor: column}`) against real SQLite and PostgreSQL.

A refresh after the first fetches only the rows past the largest cursor value
already loaded, as a bind parameter, and appends them; a changed table falls
back to a full load that the compatibility check judges. PostgreSQL tests skip,
with the reason, when the local server does not answer.
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

from lib.data.refresh import refresh
from lib.data.snapshots import Warehouse
from lib.memory import schemas, workspace
from lib.memory.yamlio import parse
from lib.roles.access import OPERATOR
from tests.helpers import current_id
from tests.helpers.databases import PG_URL

from ..conftest import ROOT, WORKSPACES, server_engine, statements_sent


class Backend:
    """One database holding the source table: the url sources.yaml names and a way to run statements."""

    def __init__(self, kind: str, folder: Path, table: str):
        self.kind, self.folder, self.table = kind, folder, table
        # PostgreSQL is reached (or skipped with the reason) as in test_sql_source; SQLite is a file in the workspace.
        self.engine = sa.create_engine(f"sqlite:///{folder / 'events.db'}") if kind == "sqlite" else server_engine("postgresql")

    def run(self, *statements: str) -> None:
        with self.engine.begin() as connection:
            for statement in statements:
                connection.exec_driver_sql(statement)

    def drop(self) -> None:
        self.run(f"DROP TABLE IF EXISTS {self.table}")
        self.engine.dispose()


def _workspace(folder: Path, source: dict) -> None:
    """A workspace with one source and no dashboard or profile (nothing else to fit)."""
    shutil.copytree(WORKSPACES / "supply-chain-weekly", folder)
    shutil.rmtree(folder / "data")
    for name in ("dashboard.yaml", "profile.yaml"):
        (folder / name).unlink()
    ws, _ = workspace.load(folder)
    ws.data["sources"] = {"sources": [source]}
    workspace.save(folder, ws.data)


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path):
    folder = tmp_path / "ws"
    table = f"dm_incr_{uuid.uuid4().hex[:10]}"
    url = "sqlite:///events.db" if request.param == "sqlite" else PG_URL
    _workspace(folder, {"name": "events", "type": "sql", "url": url, "table": table, "incremental": {"cursor": "id"}})
    backend = Backend(request.param, folder, table)
    backend.run(
        f"CREATE TABLE {table} (id INTEGER, kind VARCHAR(20), amount DOUBLE PRECISION)",
        f"INSERT INTO {table} VALUES (1, 'a', 1.5), (2, 'b', 2.5), (3, 'a', 3.5)",
    )
    yield backend
    backend.drop()


def _params(parameters) -> list:
    return list(parameters.values()) if isinstance(parameters, dict) else list(parameters or ())


def test_rows_inserted_between_refreshes_are_appended_and_only_they_are_fetched(db, tmp_path):
    wh = Warehouse(tmp_path / "cache")
    first = refresh(db.folder, wh, user=OPERATOR)
    assert first.ok and first.swapped, first.summary()
    assert first.sources[0].appended is None and first.sources[0].rows_after == 3  # the first refresh loads everything

    db.run(f"INSERT INTO {db.table} VALUES (4, 'b', 4.5), (5, NULL, 5.5)")
    with statements_sent() as sent:
        second = refresh(db.folder, wh, user=OPERATOR)
    assert second.ok and second.swapped, second.summary()
    entry = second.sources[0]
    assert (entry.appended, entry.rows_before, entry.rows_after) == (2, 3, 5)
    assert "2 new row(s)" in entry.message and "appended" in second.summary()
    reads = [(s, p) for s, p in sent if db.table in s]
    assert len(reads) == 1
    statement, parameters = reads[0]
    assert "WHERE" in statement and "> 3" not in statement  # the last value is bound, not spliced in
    assert _params(parameters) == [3]
    table = wh.tables()["events"]
    assert sorted(table.column("id").to_pylist()) == [1, 2, 3, 4, 5]
    assert table.column("kind").to_pylist()[-1] is None

    third = refresh(db.folder, wh, user=OPERATOR)  # nothing new: the served data stays
    assert third.ok and third.unchanged and third.sources[0].appended == 0


def test_a_dropped_column_still_fails_the_compatibility_check(db, tmp_path):
    wh = Warehouse(tmp_path / "cache")
    assert refresh(db.folder, wh, user=OPERATOR).ok
    db.run(f"ALTER TABLE {db.table} DROP COLUMN amount", f"INSERT INTO {db.table} VALUES (4, 'b')")
    report = refresh(db.folder, wh, user=OPERATOR)
    entry = report.sources[0]
    assert not report.ok and not report.swapped
    assert entry.status == "incompatible" and entry.missing == ["amount"] and entry.appended is None
    assert wh.tables()["events"].num_rows == 3  # the previous data is still served


def test_a_cursor_that_is_not_a_column_is_a_clear_source_error(db, tmp_path):
    ws, _ = workspace.load(db.folder)
    ws.data["sources"]["sources"][0]["incremental"] = {"cursor": "inserted_at"}
    workspace.save(db.folder, ws.data)
    report = refresh(db.folder, Warehouse(tmp_path / "cache"), user=OPERATOR)
    assert report.sources[0].status == "failed"
    assert "incremental.cursor 'inserted_at' is not a column" in report.sources[0].message


def test_refreshes_in_separate_processes_append(db, tmp_path):
    """One `python -m lib refresh` loads, another appends what was inserted in between, a third process reads it."""
    env = {"PYTHONPATH": str(ROOT), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "DASHMEM_CACHE_DIR": str(tmp_path / "cache")}

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "lib", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)

    first = cli("refresh", str(db.folder), "--json")
    assert first.returncode == 0, first.stdout + first.stderr
    db.run(f"INSERT INTO {db.table} VALUES (4, 'b', 4.5), (5, 'c', 5.5)")
    second = cli("refresh", str(db.folder), "--json")
    assert second.returncode == 0, second.stdout + second.stderr
    entry = json.loads(second.stdout)["sources"][0]
    assert (entry["appended"], entry["rows_after"]) == (2, 5)
    read = cli("query", str(db.folder), "SELECT count(*) AS n, max(id) AS top FROM events", "--json")
    assert read.returncode == 0, read.stdout + read.stderr
    assert '"n"' in read.stdout and "5" in read.stdout


# --------------------------------------------------------------------------- the schema


SOURCES = """sources:
  - name: events
    type: sql
    url: sqlite:///events.db
    table: events
    incremental: {cursor: id}
"""


def _errors(text: str):
    return schemas.validate_document("sources", parse(text), "ws/sources.yaml")


def test_schema_accepts_a_cursor_on_a_sql_table():
    assert _errors(SOURCES) == []


@pytest.mark.parametrize("incremental", ["{cursor: null}", "{}"])
def test_a_null_or_absent_cursor_is_a_schema_error_naming_file_and_field(incremental):
    errs = _errors(SOURCES.replace("{cursor: id}", incremental))
    assert errs, incremental
    assert all(e.file == "ws/sources.yaml" for e in errs)
    assert any("sources[0].incremental" in (e.field or "") for e in errs), [e.format() for e in errs]
    assert any("cursor" in e.format() for e in errs)


def test_incremental_is_refused_on_csv_query_and_live_sources():
    csv = "sources:\n  - name: events\n    type: csv\n    path: data/e.csv\n    incremental: {cursor: id}\n"
    assert any(e.field == "sources[0].incremental" for e in _errors(csv))  # a CSV is re-read whole
    assert _errors(SOURCES.replace("table: events", "query: SELECT * FROM events"))
    assert _errors(SOURCES + "    mode: live\n")


def test_new_rows_of_another_type_force_a_full_load_that_the_check_judges(tmp_path):
    """SQLite lets a column hold text where numbers were: casting the new rows would hide it, so everything is loaded."""
    folder = tmp_path / "ws"
    _workspace(folder, {"name": "events", "type": "sql", "url": "sqlite:///events.db", "table": "events", "incremental": {"cursor": "id"}})
    backend = Backend("sqlite", folder, "events")
    backend.run("CREATE TABLE events (id INTEGER, qty)", "INSERT INTO events VALUES (1, 10), (2, 20)")
    wh = Warehouse(tmp_path / "cache")
    assert refresh(folder, wh, user=OPERATOR).ok
    backend.run("UPDATE events SET qty = 'n/a' WHERE id = 1", "INSERT INTO events VALUES (3, '30')")
    report = refresh(folder, wh, user=OPERATOR)
    entry = report.sources[0]
    assert entry.appended is None  # not appended: a full load
    assert entry.status == "incompatible" and entry.changed and entry.changed[0]["column"] == "qty"
    assert wh.tables()["events"].column("qty").to_pylist() == [10, 20]
    backend.engine.dispose()


# --------------------------------------------------------------------------- a full reload on demand


def test_a_full_reload_sees_rows_updated_and_deleted_in_place(db, tmp_path):
    wh = Warehouse(tmp_path / "cache")
    assert refresh(db.folder, wh, user=OPERATOR).ok
    db.run(f"UPDATE {db.table} SET amount = 99.5 WHERE id = 2", f"DELETE FROM {db.table} WHERE id = 3", f"INSERT INTO {db.table} VALUES (4, 'c', 4.5)")
    appended = refresh(db.folder, wh, user=OPERATOR)  # incremental: only the new row, the old ones as they were
    assert appended.sources[0].appended == 1
    assert sorted(wh.tables()["events"].column("id").to_pylist()) == [1, 2, 3, 4]

    with statements_sent() as sent:
        full = refresh(db.folder, wh, user=OPERATOR, full=True)
    assert full.ok and full.swapped, full.summary()
    entry = full.sources[0]
    assert entry.appended is None and "full reload" in entry.message
    assert not any("WHERE" in s for s, _ in sent if db.table in s)  # the whole table, no cursor
    table = wh.tables()["events"]
    assert sorted(zip(table.column("id").to_pylist(), table.column("amount").to_pylist())) == [(1, 1.5), (2, 99.5), (4, 4.5)]


def test_only_stewards_may_ask_for_a_full_reload(db, tmp_path):
    from lib.core.errors import DashmemError
    from lib.roles.access import User

    wh = Warehouse(tmp_path / "cache")
    viewer = User("vera")
    assert refresh(db.folder, wh, user=viewer).ok  # viewers refresh
    served = current_id(wh)
    with pytest.raises(DashmemError, match="full"):
        refresh(db.folder, wh, user=viewer, full=True)
    assert current_id(wh) == served
    assert refresh(db.folder, wh, user=User("sam"), full=True).ok


def test_full_reload_from_the_command_line(db, tmp_path):
    env = {"PYTHONPATH": str(ROOT), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "DASHMEM_CACHE_DIR": str(tmp_path / "cache")}

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "lib", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)

    assert cli("refresh", str(db.folder)).returncode == 0
    db.run(f"UPDATE {db.table} SET kind = 'z' WHERE id = 1")
    full = cli("refresh", str(db.folder), "--full", "--json")
    assert full.returncode == 0, full.stdout + full.stderr
    entry = json.loads(full.stdout)["sources"][0]
    assert entry["appended"] is None and entry["rows_after"] == 3 and "full reload" in entry["message"]
    read = cli("query", str(db.folder), "SELECT kind FROM events WHERE id = 1", "--json")
    assert read.returncode == 0 and '"z"' in read.stdout, read.stdout + read.stderr


# --------------------------------------------------------------------------- a NUMERIC cursor stays exact


def test_a_numeric_cursor_past_2_53_is_bound_exactly_and_appends_no_row_twice(tmp_path):
    from decimal import Decimal

    folder = tmp_path / "ws"
    table = f"dm_incr_{uuid.uuid4().hex[:10]}"
    _workspace(folder, {"name": "events", "type": "sql", "url": PG_URL, "table": table, "incremental": {"cursor": "id"}})
    backend = Backend("postgresql", folder, table)
    big = 2**53 + 1  # a double holds 2**53 and 2**53 + 2, not this
    try:
        backend.run(f"CREATE TABLE {table} (id NUMERIC(30,0), kind VARCHAR(20))", f"INSERT INTO {table} VALUES ({2**53 - 1}, 'a'), ({big}, 'b')")
        wh = Warehouse(tmp_path / "cache")
        assert refresh(folder, wh, user=OPERATOR).ok
        with statements_sent() as sent:
            again = refresh(folder, wh, user=OPERATOR)
        assert again.ok and again.sources[0].appended == 0, again.summary()  # not the row at 2**53 + 1 once more
        assert again.unchanged and wh.tables()["events"].num_rows == 2
        assert [_params(p) for s, p in sent if table in s] == [[Decimal(big)]]
        assert f"id = {big}" in again.sources[0].message

        backend.run(f"INSERT INTO {table} VALUES ({big + 2}, 'c'), ({10**29 + 7}, 'd')")
        grown = refresh(folder, wh, user=OPERATOR)
        assert grown.ok and grown.sources[0].appended == 2, grown.summary()
        with statements_sent() as sent:
            last = refresh(folder, wh, user=OPERATOR)
        assert last.sources[0].appended == 0 and wh.tables()["events"].num_rows == 4
        assert [_params(p) for s, p in sent if table in s] == [[Decimal(10**29 + 7)]]
    finally:
        backend.drop()
