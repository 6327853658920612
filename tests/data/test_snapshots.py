"""The snapshot store on disk: compressed tables, tables shared between snapshots, pruning, old snapshots, crashes.

State crosses processes the way it does for users: a refresh writes in one
process, the app reads (and the next refresh prunes) in another.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import signal
import struct
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from lib.data.snapshots import KEEP_SNAPSHOTS, OWN_FILE_BYTES, SUFFIX, TABLE_SUFFIX, Warehouse, compact_strings, content_hash
from tests.helpers.tables import big_table

from ..conftest import ROOT

DATASETS = ["gdp.csv", "adult.csv", "global_superstore.csv", "nyc311_sample5000.csv", "nyc311_api_1000.csv"]


def run(script: str, *args: object) -> str:
    """Run `script` in a fresh Python process (this checkout first on the path); its stdout."""
    proc = subprocess.run(
        [sys.executable, "-c", script, *map(str, args)], cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


WRITE = r"""
import sys, json, pyarrow as pa
from lib.data.snapshots import Warehouse
from tests.helpers.tables import big_table
wh = Warehouse(sys.argv[1])
for small in sys.argv[3:]:
    snapshot = wh.write_snapshot({"big": big_table(int(sys.argv[2])), "small": pa.table({"n": [int(small)]})})
    print(snapshot.id)
"""

READ = r"""
import sys, json
from lib.data.snapshots import Warehouse
wh = Warehouse(sys.argv[1])
current = wh.current()
tables = wh.tables(current)
print(json.dumps({"id": current.id, "kept": [s.id for s in wh.snapshots()],
                  "rows": {n: t.num_rows for n, t in tables.items()},
                  "sum": wh.query("SELECT sum(x) AS s, max(n) AS n FROM big, small").rows[0]}))
"""


def table_files(wh: Warehouse) -> list[Path]:
    return sorted(wh.root.glob(f"*{TABLE_SUFFIX}"))


# --------------------------------------------------------------------------- exact round trip, compressed


def typed_table(rows: int = 50_000) -> pa.Table:
    """Every kind of value a source gives, nulls in each column."""

    def with_nulls(values):
        return [None if i % 7 == 3 else v for i, v in enumerate(values)]

    base = dt.datetime(2024, 3, 1, 12, 30, 15, 123456)
    return pa.table(
        {
            "i": pa.array(with_nulls(range(rows)), pa.int64()),
            "f": pa.array(with_nulls(i / 3 for i in range(rows)), pa.float64()),
            "d": pa.array(with_nulls(decimal.Decimal(i) / 100 for i in range(rows)), pa.decimal128(12, 2)),
            "ts": pa.array(with_nulls(base + dt.timedelta(seconds=i) for i in range(rows)), pa.timestamp("us")),
            "tz": pa.array(with_nulls(base + dt.timedelta(minutes=i) for i in range(rows)), pa.timestamp("us", tz="UTC")),
            "day": pa.array(with_nulls(dt.date(2020, 1, 1) + dt.timedelta(days=i % 3000) for i in range(rows)), pa.date32()),
            "b": pa.array(with_nulls(i % 2 == 0 for i in range(rows)), pa.bool_()),
            "cat": pa.array(with_nulls(f"c{i % 5}" for i in range(rows))),
            "text": pa.array(with_nulls(f"free text {i} é ☃" for i in range(rows))),
            "empty": pa.nulls(rows),
        }
    )


def public_table(path: Path) -> pa.Table:
    import pyarrow.csv as pacsv

    from lib.data.connectors.csv_source import parse_dates

    return parse_dates(pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(strings_can_be_null=True)))


def test_compressed_tables_round_trip_exactly_in_another_process(tmp_path, dataset):
    tables = {name.removesuffix(".csv"): public_table(dataset(name)) for name in DATASETS}
    tables["typed"] = typed_table()
    tables["typed_big"] = pa.concat_tables([typed_table()] * 4)  # in a file of its own
    assert tables["typed_big"].nbytes >= OWN_FILE_BYTES
    wh = Warehouse(tmp_path / "cache")
    snapshot = wh.write_snapshot(tables)
    assert snapshot.tables["typed_big"].get("file") and not snapshot.tables["typed"].get("file")

    # Another process reads it back and writes what it read, uncompressed, for comparison here.
    out = tmp_path / "read"
    run(
        "import sys, pyarrow as pa\nfrom pathlib import Path\nfrom lib.data.snapshots import Warehouse\n"
        "out = Path(sys.argv[2]); out.mkdir()\n"
        "for name, table in Warehouse(sys.argv[1]).tables().items():\n"
        "    with pa.OSFile(str(out / (name + '.arrow')), 'wb') as sink, pa.ipc.new_file(sink, table.schema) as w:\n"
        "        w.write_table(table)\n",
        wh.folder,
        out,
    )
    for name, table in tables.items():
        with pa.memory_map(str(out / f"{name}.arrow")) as source:
            read = pa.ipc.open_file(source).read_all()
        expected = compact_strings(table)
        assert read.schema.equals(expected.schema, check_metadata=True), name
        assert read.equals(expected), name
        assert read.to_pylist()[:50] == table.to_pylist()[:50], name  # the same Python values, dictionary or not


def test_tables_are_stored_compressed(tmp_path):
    table = big_table(rows=400_000)
    wh = Warehouse(tmp_path / "cache")
    snapshot = wh.write_snapshot({"big": table})
    stored = (wh.root / snapshot.tables["big"]["file"]).stat().st_size
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, compact_strings(table).schema) as writer:
        writer.write_table(compact_strings(table))
    assert stored <= 0.5 * sink.tell()  # against the uncompressed IPC the previous format wrote


# --------------------------------------------------------------------------- unchanged tables shared


def test_an_unchanged_table_is_shared_not_written_again(tmp_path):
    folder = tmp_path / "cache"
    (first,) = run(WRITE, folder, 1, 10).split()
    (second,) = run(WRITE, folder, 1, 20).split()  # the same big table, made afresh in another process
    wh = Warehouse(folder)
    a, b = wh.snapshot(first).tables["big"], wh.snapshot(second).tables["big"]
    assert a["hash"] == b["hash"] and a["file"] != b["file"]
    assert (wh.root / a["file"]).stat().st_ino == (wh.root / b["file"]).stat().st_ino  # one copy on disk
    (third,) = run(WRITE, folder, 2, 30).split()  # the big table changed: a new copy
    c = wh.snapshot(third).tables["big"]
    assert c["hash"] != a["hash"] and (wh.root / c["file"]).stat().st_ino != (wh.root / a["file"]).stat().st_ino
    assert (wh.root / a["file"]).stat().st_nlink == 2


def test_a_table_passed_back_unchanged_is_shared_without_hashing_it_again(tmp_path, monkeypatch):
    wh = Warehouse(tmp_path / "cache")
    first = wh.write_snapshot({"big": big_table(), "small": pa.table({"n": [1]})})
    from lib.data import snapshots

    reopened = Warehouse(wh.folder)
    snapshots._OPENED.clear()
    old = reopened.tables()
    monkeypatch.setattr(snapshots, "content_hash", lambda table: pytest.fail("hashed a table read from a snapshot"))
    second = reopened.write_snapshot({"big": old["big"], "small": pa.table({"n": [2]})})  # as refresh does for a failed source
    assert (wh.root / second.tables["big"]["file"]).stat().st_ino == (wh.root / first.tables["big"]["file"]).stat().st_ino


def test_content_hash_follows_content():
    table = big_table()
    assert content_hash(table) == content_hash(big_table())
    changed = table.set_column(1, "x", pa.chunked_array([table.column("x").to_numpy().copy()]))
    assert content_hash(changed) == content_hash(table.combine_chunks())
    values = table.column("x").to_numpy().copy()
    values[12345] += 0.01
    assert content_hash(table.set_column(1, "x", pa.array(values))) != content_hash(table.combine_chunks())
    assert content_hash(table.rename_columns(["id", "y", "k", "cat"])) != content_hash(table)


# --------------------------------------------------------------------------- pruning keeps what is shared


def test_pruning_in_another_process_keeps_a_shared_table_and_deletes_the_rest(tmp_path):
    folder = tmp_path / "cache"
    (first,) = run(WRITE, folder, 1, 0).split()
    # Another process writes enough snapshots to prune the first, whose big table all of them share.
    later = run(WRITE, folder, 1, *range(1, KEEP_SNAPSHOTS + 2)).split()
    wh = Warehouse(folder)
    assert not (wh.root / f"{first}{SUFFIX}").exists()
    assert [s.id for s in wh.snapshots()] == list(reversed(later))[:KEEP_SNAPSHOTS]
    files = table_files(wh)
    assert len(files) == KEEP_SNAPSHOTS and len({f.stat().st_ino for f in files}) == 1  # one shared copy
    assert files[0].stat().st_nlink == KEEP_SNAPSHOTS
    # A third process reads the newest, and every kept one.
    seen = json.loads(run(READ, folder))
    assert seen["rows"] == {"big": 300_000, "small": 1} and seen["sum"][1] == KEEP_SNAPSHOTS + 1
    expected_sum = float(pc.sum(big_table(1).column("x")).as_py())  # pyright: ignore[reportAttributeAccessIssue]  # pc has no stubs
    assert seen["sum"][0] == pytest.approx(expected_sum)
    for snapshot in wh.snapshots():
        assert Warehouse(folder).tables(snapshot)["big"].num_rows == 300_000
    # The big table changes: once no kept snapshot uses the old copy, it goes.
    run(WRITE, folder, 2, *range(10, 10 + KEEP_SNAPSHOTS))
    files = table_files(wh)
    assert len(files) == KEEP_SNAPSHOTS and all(f.stat().st_nlink == KEEP_SNAPSHOTS for f in files)
    assert {f.name.partition("~")[0] for f in files} == {s.id for s in wh.snapshots()}


def test_a_pruned_snapshot_stays_readable_to_a_process_that_had_opened_it(tmp_path):
    folder = tmp_path / "cache"
    run(WRITE, folder, 1, 0)
    reader = Warehouse(folder)
    opened = reader.current()
    assert opened is not None
    tables = reader.tables(opened)
    run(WRITE, folder, 3, *range(1, KEEP_SNAPSHOTS + 2))  # prunes the one opened here
    assert not opened.path.exists()
    assert tables["big"].num_rows == 300_000 and tables["big"].column("id")[299_999].as_py() == 299_999


# --------------------------------------------------------------------------- snapshots written before compression


def write_old_format(root: Path, snapshot_id: str, tables: dict[str, pa.Table]) -> Path:
    """A snapshot as the previous version wrote it: uncompressed IPC files back to back, then the manifest."""
    from lib.data.sandbox import describe

    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{snapshot_id}{SUFFIX}"
    manifest = {}
    with pa.output_stream(str(path)) as sink:
        for name, table in tables.items():
            table = compact_strings(table)
            start = sink.tell()
            with pa.ipc.new_file(sink, table.schema) as writer:
                writer.write_table(table)
            length = sink.tell() - start
            sink.write(b"\0" * (-sink.tell() % 64))
            manifest[name] = {"rows": table.num_rows, "columns": describe({name: table})[name], "source": name, "offset": start, "length": length}
        body = json.dumps({"created": "2026-11-30T06:15:00+00:00", "tables": manifest}).encode()
        sink.write(body)
        sink.write(struct.pack("<Q8s", len(body), b"DMSNAP1\n"))
    return path


def test_a_snapshot_in_the_old_format_is_still_read_among_new_ones(tmp_path, dataset):
    folder = tmp_path / "cache"
    old_tables = {"gdp": public_table(dataset("gdp.csv")), "big": big_table(1), "small": pa.table({"n": [0]})}
    write_old_format(folder / "snapshots", "20261130T061500.000000Z-abcdef", old_tables)
    seen = json.loads(run(READ, folder))
    assert seen["id"] == "20261130T061500.000000Z-abcdef" and seen["rows"]["gdp"] == old_tables["gdp"].num_rows
    assert Warehouse(folder).tables()["gdp"].equals(old_tables["gdp"])
    # New snapshots are written next to it, the old one is served when stepped back to, and pruned in turn.
    run(WRITE, folder, 1, 1)
    wh = Warehouse(folder)
    assert wh.tables(wh.snapshot("20261130T061500.000000Z-abcdef"))["big"].equals(compact_strings(big_table(1)))
    later = run(WRITE, folder, 1, *range(2, KEEP_SNAPSHOTS + 2)).split()
    # Pruned as any other, but for the rule that the newest snapshot older than a minute stays (it is on disk).
    assert [s.id for s in Warehouse(folder).snapshots()] == list(reversed(later))[:KEEP_SNAPSHOTS] + ["20261130T061500.000000Z-abcdef"]
    assert Warehouse(folder).tables(wh.snapshot("20261130T061500.000000Z-abcdef"))["small"].column("n")[0].as_py() == 0


# --------------------------------------------------------------------------- crashes leave nothing half-written


def test_a_failure_before_the_switch_leaves_no_table_file(tmp_path):
    wh = Warehouse(tmp_path / "cache")
    before = wh.write_snapshot({"big": big_table(1), "small": pa.table({"n": [1]})})

    def boom():
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        wh.write_snapshot({"big": big_table(2), "small": pa.table({"n": [2]})}, _before_switch=boom)
    with pytest.raises(OSError):  # the shared (linked) table too
        wh.write_snapshot({"big": big_table(1), "small": pa.table({"n": [3]})}, _before_switch=boom)
    assert sorted(os.listdir(wh.root)) == sorted([f"{before.id}{SUFFIX}", before.tables["big"]["file"]])
    assert wh.current() == before and (wh.root / before.tables["big"]["file"]).stat().st_nlink == 1


def test_a_killed_writers_table_files_go_at_the_next_start_and_not_while_it_writes(tmp_path):
    folder = tmp_path / "cache"
    run(WRITE, folder, 1, 0)
    script = (
        "import sys, time, pyarrow as pa\nfrom lib.data.snapshots import Warehouse\nfrom tests.helpers.tables import big_table\n"
        "def hang():\n    print('written', flush=True); time.sleep(120)\n"
        "Warehouse(sys.argv[1]).write_snapshot({'big': big_table(2), 'again': big_table(1), 'small': pa.table({'n': [9]})},"
        " _before_switch=hang)\n"
    )
    writer = subprocess.Popen(
        [sys.executable, "-c", script, str(folder)], cwd=ROOT, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    assert writer.stdout is not None
    try:
        assert writer.stdout.readline().strip() == "written"
        wh = Warehouse(folder)
        assert len(table_files(wh)) == 3  # the served snapshot's, and the writer's two (one new, one linked)
        run(WRITE, folder, 1, 1)  # another refresh prunes meanwhile: the writer's files are kept
        assert len(table_files(wh)) == 4
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait()
    seen = json.loads(run(READ, folder))  # a new process's first look cleans up
    assert seen["rows"] == {"big": 300_000, "small": 1}
    kept = {s.id for s in Warehouse(folder).snapshots()}
    assert {f.name.partition("~")[0] for f in table_files(wh)} == kept and len(table_files(wh)) == len(kept)
    assert not list(wh.root.glob(".*"))


def test_a_damaged_table_file_is_passed_over_for_the_previous_snapshot(tmp_path):
    folder = tmp_path / "cache"
    first, second = run(WRITE, folder, 1, 1, 2).split()
    (third,) = run(WRITE, folder, 2, 3).split()
    wh = Warehouse(folder)
    damaged = wh.root / wh.snapshot(third).tables["big"]["file"]
    damaged.write_bytes(damaged.read_bytes()[: damaged.stat().st_size // 2])
    seen = json.loads(run(READ, folder))
    assert seen["id"] == second and seen["sum"][1] == 2
