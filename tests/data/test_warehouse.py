"""Snapshots and the sandboxed query API."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from lib.data.queries import bind, run_query
from lib.data.sandbox import QueryError, QueryRefused
from lib.data.snapshots import KEEP_SNAPSHOTS, SUFFIX, Warehouse
from lib.roles.access import OPERATOR

from ..conftest import ROOT

TABLES = {"sales": pa.table({"region": ["north", "south", "north"], "amount": [10.0, 20.0, 5.5]})}


@pytest.fixture
def wh(tmp_path):
    w = Warehouse(tmp_path / "cache")
    w.write_snapshot(TABLES)
    return w


def test_snapshot_round_trip_and_manifest(wh):
    snap = wh.current()
    assert snap.tables["sales"]["rows"] == 3
    assert snap.columns("sales") == {"region": "VARCHAR", "amount": "DOUBLE"}
    assert wh.query("SELECT region, sum(amount) AS total FROM sales GROUP BY 1 ORDER BY 1").rows == [("north", 15.5), ("south", 20.0)]


def test_named_parameters_are_bound_not_pasted(wh):
    result = wh.query("SELECT count(*) FROM sales WHERE region = $region", {"region": "north' OR 1=1 --"})
    assert result.rows == [(0,)]
    assert wh.query("SELECT count(*) FROM sales WHERE region = $region", {"region": "north"}).rows == [(2,)]


def test_row_cap_truncates_and_says_so(tmp_path):
    big = {"t": pa.table({"a": list(range(5000))})}
    result = run_query(big, "SELECT * FROM t", max_rows=100)
    assert result.truncated and result.table.num_rows == 100
    assert not run_query(big, "SELECT * FROM t", max_rows=5000).truncated


def test_time_limit_interrupts(wh):
    with pytest.raises(QueryError, match="longer than 0.3 s"):
        wh.query("SELECT count(*) FROM range(100000000000) a, range(1000) b", timeout_s=0.3)
    assert wh.query("SELECT 1").rows == [(1,)]  # the sandbox still works afterwards


ESCAPES = [
    ("SELECT * FROM read_csv('/etc/passwd')", QueryError, "not files or the network"),
    ("SELECT * FROM '/etc/passwd'", QueryError, "unknown table|not files or the network"),
    ("SELECT * FROM read_text('/etc/hostname')", QueryError, "not files or the network"),
    ("SELECT * FROM glob('/etc/*')", QueryError, "not files or the network"),
    ("COPY sales TO '/tmp/leak.csv'", QueryRefused, "COPY"),
    ("COPY (SELECT * FROM sales) TO '/tmp/leak.parquet' (FORMAT parquet)", QueryRefused, "COPY"),
    ("ATTACH '/tmp/other.db' AS other", QueryRefused, "ATTACH"),
    ("INSTALL httpfs", QueryRefused, "LOAD"),
    ("LOAD httpfs", QueryRefused, "LOAD"),
    ("PRAGMA database_list", QueryRefused, "PRAGMA"),
    ("SET enable_external_access = true", QueryRefused, "SET"),
    ("SELECT 1; DROP TABLE sales", QueryRefused, "exactly one statement"),
    ("DELETE FROM sales", QueryRefused, "DELETE"),
    ("DROP TABLE sales", QueryRefused, "DROP"),
    ("CREATE TABLE x AS SELECT 1", QueryRefused, "CREATE"),
    ("INSERT INTO sales VALUES ('x', 1)", QueryRefused, "INSERT"),
    ("EXPORT DATABASE '/tmp/dump'", QueryRefused, "EXPORT"),
    ("CALL pragma_version()", QueryRefused, "CALL"),
    ("", QueryRefused, "empty"),
]


@pytest.mark.parametrize("sql,error,needle", ESCAPES)
def test_sandbox_refuses_escape_attempts(wh, tmp_path, sql, error, needle):
    with pytest.raises(error, match=needle):
        wh.query(sql)
    assert not (tmp_path / "leak.csv").exists()
    assert wh.query("SELECT count(*) FROM sales").rows == [(3,)]  # nothing was changed


def test_sandbox_configuration_cannot_be_unlocked_even_by_a_select(wh):
    with pytest.raises(QueryError):
        wh.query("SELECT * FROM duckdb_extensions()")
    assert wh.query("SELECT current_setting('enable_external_access')").rows == [(False,)]


def test_syntax_errors_are_clear(wh):
    with pytest.raises(QueryError, match="syntax"):
        wh.query("SELEC 1")


def test_bind_checks_columns_without_running(wh):
    assert bind(TABLES, "SELECT region, sum(amount) AS total FROM sales GROUP BY 1") == [("region", "VARCHAR"), ("total", "DOUBLE")]
    with pytest.raises(QueryError, match="unknown column 'amout'"):
        bind(TABLES, "SELECT amout FROM sales")
    with pytest.raises(QueryRefused):
        bind(TABLES, "DROP TABLE sales")


def test_failure_between_write_and_switch_changes_nothing(wh):
    before = wh.current()

    def boom():
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        wh.write_snapshot({"sales": pa.table({"region": ["x"], "amount": [1.0]})}, _before_switch=boom)
    assert wh.current() == before
    assert [s.id for s in wh.snapshots()] == [before.id]  # the unswitched snapshot was removed
    assert wh.query("SELECT count(*) FROM sales").rows == [(3,)]


def test_keeps_the_last_snapshots_and_can_step_back(wh):
    ids = [wh.current().id]
    for i in range(KEEP_SNAPSHOTS + 2):
        ids.append(wh.write_snapshot({"sales": pa.table({"region": ["n"] * (i + 1), "amount": [1.0] * (i + 1)})}).id)
    kept = [s.id for s in wh.snapshots()]
    assert kept == list(reversed(ids))[:KEEP_SNAPSHOTS]
    wh.switch_to(kept[2], user=OPERATOR, meta={})
    assert wh.query("SELECT count(*) FROM sales").rows == [(wh.snapshot(kept[2]).tables["sales"]["rows"],)]
    assert sorted(os.listdir(wh.folder / "snapshots")) == sorted(f"{i}{SUFFIX}" for i in kept)  # one file each


def test_prune_deletes_a_crashed_writers_leftovers_but_not_a_writer_at_work(wh):

    root = wh.folder / "snapshots"
    crashed, at_work, earlier_version = (
        root / ".20200101T000000.000000Z-abcdef.tmp",
        root / ".20261130T000000.000000Z-fedcba.tmp",
        root / "20200101T000000.000000Z-123456",
    )
    import fcntl

    crashed.write_bytes(b"half a snapshot")  # a killed writer's: fresh, but nobody holds its lock
    at_work.write_bytes(b"being written")
    writer = os.open(at_work, os.O_RDONLY)
    fcntl.flock(writer, fcntl.LOCK_EX)  # a writer at work holds it
    earlier_version.mkdir()
    (earlier_version / "manifest.json").write_text("{}")
    try:
        newest = wh.write_snapshot({"sales": pa.table({"region": ["x"], "amount": [1.0]})})
    finally:
        os.close(writer)
    assert not crashed.exists() and not earlier_version.exists() and at_work.exists()
    assert [s.id for s in wh.snapshots()] == [newest.id, wh.snapshots()[1].id] and len(wh.snapshots()) == 2


def test_an_earlier_snapshot_is_served_until_the_next_refresh(wh):
    first = wh.current()
    second = wh.write_snapshot({"sales": pa.table({"region": ["x"], "amount": [1.0]})})
    assert wh.switch_to(first.id, user=OPERATOR, meta={}) and wh.current().id == first.id and wh.pin.is_symlink()
    assert Warehouse(wh.folder).query("SELECT count(*) FROM sales").rows == [(3,)]  # for every reader
    wh.switch_to(second.id, user=OPERATOR, meta={})  # the newest: no pin needed
    assert wh.current().id == second.id and not wh.pin.exists()
    wh.switch_to(first.id, user=OPERATOR, meta={})
    third = wh.write_snapshot({"sales": pa.table({"region": ["y"], "amount": [2.0]})})
    assert wh.current().id == third.id and not wh.pin.exists()


def test_another_process_sees_the_switch(wh):
    """A cron refresh in one process, the app in another: readers see the new snapshot at once."""
    wh.query("SELECT 1")
    code = (
        "import sys; sys.path.insert(0, %r)\n"
        "import pyarrow as pa\n"
        "from lib.data.snapshots import Warehouse\n"
        "Warehouse(%r).write_snapshot({'sales': pa.table({'region': ['x'] * 7, 'amount': [1.0] * 7})})\n"
    ) % (str(ROOT), str(wh.folder))
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    assert wh.query("SELECT count(*) FROM sales").rows == [(7,)]
    current = Warehouse(wh.folder).current()
    assert current is not None and current.tables["sales"]["rows"] == 7


def test_for_workspace_keys_by_folder(tmp_path):
    a = Warehouse.for_workspace(tmp_path / "one" / "ws", cache_root=tmp_path / "c")
    b = Warehouse.for_workspace(tmp_path / "two" / "ws", cache_root=tmp_path / "c")
    assert a.folder != b.folder and a.folder.name.startswith("ws-")
    assert Warehouse.for_workspace(tmp_path / "one" / "ws", cache_root=tmp_path / "c").folder == a.folder


def test_describe_names_types_exactly_as_duckdb_does(datasets, monkeypatch):
    """The shortcut from Arrow types must agree with DuckDB's own DESCRIBE on real files."""
    import datetime as dt
    from pathlib import Path

    import duckdb

    from lib.data.connectors.base import FetchContext, fetch
    from lib.data.sandbox import describe

    tables = {
        "mixed": pa.table(
            {
                "i": pa.array([1], pa.int32()),
                "b": [True],
                "s": ["x"],
                "f": [1.5],
                "d": [dt.date(2026, 1, 1)],
                "ts": pa.array([1], pa.timestamp("s")),
                "tn": pa.array([1], pa.timestamp("ns")),
                "cat": pa.array(["a"]).dictionary_encode(),
                "n": pa.array([None], pa.null()),
            }
        )
    }
    monkeypatch.setenv("DASHMEM_DATA_DIRS", str(datasets))
    for csv in sorted(datasets.glob("*.csv")):
        tables[csv.stem] = fetch({"name": "t", "type": "csv", "path": str(csv)}, FetchContext(workspace_path=Path(".")))
    con = duckdb.connect()
    for name, table in tables.items():
        con.register(name, table)
        expected = [[r[0], r[1]] for r in con.execute(f'DESCRIBE "{name}"').fetchall()]
        assert describe({name: table})[name] == expected, name


def test_a_damaged_newest_snapshot_is_passed_over(wh):
    first = wh.current()
    second = wh.write_snapshot({"sales": pa.table({"region": ["x"], "amount": [1.0]})})
    second.path.write_bytes(second.path.read_bytes()[:-20])  # cut short, as by a full disk
    assert wh.current() == first
    assert wh.query("SELECT count(*) FROM sales").rows == [(3,)]


def test_a_clock_that_went_back_still_serves_the_newest_write(wh):
    served = wh.current()
    future = served.path.with_name("20991231T235959.999999Z-abcdef.snapshot")
    served.path.rename(future)  # as if written before the clock was set back
    newest = wh.write_snapshot({"sales": pa.table({"region": ["x"], "amount": [1.0]})})
    assert newest.id > "20991231T235959.999999Z" and wh.current().id == newest.id
    assert wh.query("SELECT count(*) FROM sales").rows == [(1,)]


def test_a_pin_set_while_a_refresh_wrote_does_not_hide_the_new_data(wh):
    from lib.core.fsutil import replace_symlink as _point

    first = wh.current()
    second = wh.write_snapshot({"sales": pa.table({"region": ["x"], "amount": [1.0]})})
    third = wh.write_snapshot({"sales": pa.table({"region": ["y"], "amount": [2.0]})})
    _point(wh.pin, f"{first.id}@{second.id}")  # a steward chose `first` while `second` was newest; `third` landed meanwhile
    assert wh.current().id == third.id


def test_the_pinned_snapshot_survives_the_prune_of_the_write_that_ends_the_pin(wh):
    oldest = wh.current()
    for i in range(KEEP_SNAPSHOTS - 1):
        wh.write_snapshot({"sales": pa.table({"region": ["n"] * (i + 1), "amount": [1.0] * (i + 1)})})
    wh.switch_to(oldest.id, user=OPERATOR, meta={})
    newest = wh.write_snapshot({"sales": pa.table({"region": ["z"], "amount": [9.0]})})
    assert wh.current().id == newest.id and oldest.path.exists()  # a reader that named it can still open it
    wh.write_snapshot({"sales": pa.table({"region": ["z"], "amount": [8.0]})})
    assert not oldest.path.exists() and len(wh.snapshots()) == KEEP_SNAPSHOTS


def test_the_newest_snapshot_old_enough_to_be_on_disk_outlives_a_burst_of_refreshes(wh):
    """Snapshots are not fsynced: after a power cut the last half minute's may be empty, so one older stays."""
    settled = wh.current()
    older = settled.path.with_name(f"20200101T000000.000000Z-abcdef{SUFFIX}")
    settled.path.rename(older)
    burst = [wh.write_snapshot({"sales": pa.table({"region": ["n"] * (i + 1), "amount": [1.0] * (i + 1)})}).id for i in range(KEEP_SNAPSHOTS + 2)]
    assert [s.id for s in wh.snapshots()] == list(reversed(burst))[:KEEP_SNAPSHOTS] + [older.name.removesuffix(SUFFIX)]
    for snap in wh.snapshots()[:KEEP_SNAPSHOTS]:
        snap.path.write_bytes(b"")  # what a power cut can leave of a file not yet written back
    assert wh.current().id == older.name.removesuffix(SUFFIX)
    assert wh.query("SELECT count(*) FROM sales").rows == [(3,)]


def test_a_killed_refreshs_staging_file_goes_at_the_next_start(tmp_path):
    """Not an hour later: a new process's first look at the data deletes what a killed writer left."""
    import signal
    import subprocess
    import sys

    folder = tmp_path / "wh"
    script = (
        "import sys, time, pyarrow as pa\n"
        "from lib.data import snapshots as warehouse\n"
        "wh = warehouse.Warehouse(sys.argv[1])\n"
        "def hang():\n    print('written', flush=True); time.sleep(60)\n"
        "wh.write_snapshot({'t': pa.table({'x': list(range(100000))})}, _before_switch=hang)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script, str(folder)], stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2])
    assert proc.stdout is not None and proc.stdout.readline().strip() == "written"
    staging = list((folder / "snapshots").glob(".*.tmp"))
    assert len(staging) == 1
    Warehouse(folder).clean_abandoned()  # another process while the writer lives: kept
    assert staging[0].exists()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    fresh = subprocess.run(
        [sys.executable, "-c", "import sys; from lib.data.snapshots import Warehouse; print(Warehouse(sys.argv[1]).current())", str(folder)],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        check=True,
    )
    assert fresh.stdout.strip() == "None" and not staging[0].exists()
