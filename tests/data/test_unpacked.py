"""Big tables decompressed once into shared memory (lib/data/unpacked.py), mapped by every process and query worker.

As users run it: a refresh writes in one process, the app (or cron's export) reads in another, queries run in
worker processes; the copies folder is the real default (`/dev/shm`) in one test and a private folder elsewhere.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.compute as pc
import pytest

from lib.data import query_worker, unpacked
from lib.data.snapshots import KEEP_SNAPSHOTS, TABLE_SUFFIX, Warehouse
from tests.helpers.tables import big_table

from ..conftest import ROOT

WRITE = r"""
import sys
from lib.data.snapshots import Warehouse
from tests.helpers.tables import big_table
wh = Warehouse(sys.argv[1])
for seed in sys.argv[2:]:
    print(wh.write_snapshot({"big": big_table(int(seed))}).id)
"""

READ = r"""
import json, sys
from lib.data import query_worker
from lib.data.snapshots import Warehouse
wh = Warehouse(sys.argv[1])
big = wh.tables()["big"]
answer = wh.query("SELECT sum(x) AS s, count(*) AS n, count(DISTINCT cat) AS c FROM big").rows[0]
print(json.dumps({"origin": query_worker._origin(big)[0], "answer": answer}))
"""


def run(script: str, *args: object, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", script, *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def same(answer: list, seed: int) -> bool:
    """The query's (sum, rows, distinct) equal the table's own: sums agree to the last few digits (DuckDB and Arrow
    add in other orders), counts exactly."""
    table = big_table(seed)
    total = pc.sum(table["x"]).as_py()  # pyright: ignore[reportAttributeAccessIssue]  # pc has no stubs
    return math.isclose(answer[0], total, rel_tol=1e-12) and answer[1:] == [table.num_rows, 3]


@pytest.fixture
def copies(tmp_path, monkeypatch) -> Path:
    """A private DASHMEM_UNPACKED_DIR for this test (and the processes it starts, which inherit it)."""
    base = tmp_path / "shm"
    base.mkdir()
    monkeypatch.setenv("DASHMEM_UNPACKED_DIR", str(base))
    return base / f"dashmem-{os.getuid()}"


def copy_files(base: Path) -> list[Path]:
    return sorted(base.glob(f"*/*{unpacked.SUFFIX}"))


def test_the_refresh_writes_the_copy_and_another_process_maps_it_and_its_workers_query_it(tmp_path, copies):
    folder = tmp_path / "cache"
    run(WRITE, folder, 1)
    (copy,) = copy_files(copies)  # written by the refresh itself: the reader decompresses nothing
    seen = json.loads(run(READ, folder))
    assert seen["origin"] == str(copy) and same(seen["answer"], 1)
    stored = next(Warehouse(folder).root.glob(f"*{TABLE_SUFFIX}"))
    assert copy.stat().st_size > 1.5 * stored.stat().st_size  # the copy is the uncompressed table; the stored file stays small


def test_the_default_folder_is_shared_memory(tmp_path, monkeypatch):
    if not os.path.isdir("/dev/shm") or not os.access("/dev/shm", os.W_OK):
        pytest.skip("this machine has no writable /dev/shm")
    monkeypatch.delenv("DASHMEM_UNPACKED_DIR", raising=False)
    folder = tmp_path / "cache"
    run(WRITE, folder, 2)
    seen = json.loads(run(READ, folder))
    assert seen["origin"].startswith(f"/dev/shm/dashmem-{os.getuid()}/") and same(seen["answer"], 2)
    shutil.rmtree(folder)  # the warehouse is gone: the next process to use the folder deletes its copies
    unpacked._SWEPT.clear()
    unpacked.folder_for(tmp_path / "another")
    assert not Path(seen["origin"]).exists()


def test_off_reads_the_table_as_stored(tmp_path, copies):
    folder = tmp_path / "cache"
    off = {"DASHMEM_UNPACKED_DIR": "off"}
    run(WRITE, folder, 3, env=off)
    seen = json.loads(run(READ, folder, env=off))
    assert seen["origin"].endswith(TABLE_SUFFIX) and same(seen["answer"], 3)
    assert not copies.exists()


def test_a_folder_others_can_read_is_not_used(tmp_path, copies, caplog):
    copies.mkdir(mode=0o777)
    copies.chmod(0o777)
    folder = tmp_path / "cache"
    with caplog.at_level(logging.WARNING, logger="lib.data.unpacked"):
        Warehouse(folder).write_snapshot({"big": big_table(4)})
    assert "not a private folder" in caplog.text and not copy_files(copies.parent)
    seen = json.loads(run(READ, folder))
    assert seen["origin"].endswith(TABLE_SUFFIX) and same(seen["answer"], 4)


def test_without_room_for_the_copy_the_table_is_read_as_stored(tmp_path, copies, monkeypatch):
    monkeypatch.setattr(unpacked, "HEADROOM_BYTES", 1 << 60)
    wh = Warehouse(tmp_path / "cache")
    wh.write_snapshot({"big": big_table(5)})
    assert not copy_files(copies)
    from lib.data import snapshots

    snapshots._OPENED.clear()
    big = wh.tables()["big"]
    origin = query_worker._origin(big)
    assert origin is not None and origin[0].endswith(TABLE_SUFFIX)
    assert same(list(wh.query("SELECT sum(x) AS s, count(*) AS n, count(DISTINCT cat) AS c FROM big").rows[0]), 5)


def test_a_damaged_copy_is_made_again_from_the_stored_table(tmp_path, copies):
    folder = tmp_path / "cache"
    run(WRITE, folder, 6)
    (copy,) = copy_files(copies)
    copy.write_bytes(copy.read_bytes()[: copy.stat().st_size // 3])
    seen = json.loads(run(READ, folder))
    assert seen["origin"] == str(copy) and same(seen["answer"], 6)
    assert copy.stat().st_size > 3 * (copy.stat().st_size // 3)  # whole again


def test_a_copy_deleted_under_a_reader_is_made_again_by_the_next(tmp_path, copies):
    folder = tmp_path / "cache"
    run(WRITE, folder, 7)
    for copy in copy_files(copies):
        copy.unlink()
    seen = json.loads(run(READ, folder))  # decompressed from the stored table, then mapped
    assert Path(seen["origin"]).exists() and same(seen["answer"], 7)


def test_pruning_deletes_the_copies_no_kept_snapshot_names(tmp_path, copies):
    folder = tmp_path / "cache"
    seeds = list(range(10, 10 + KEEP_SNAPSHOTS + 3))
    run(WRITE, folder, *seeds)
    wh = Warehouse(folder)
    kept = {meta["hash"] for snapshot in wh.snapshots() for meta in snapshot.tables.values()}
    assert {p.name.removesuffix(unpacked.SUFFIX) for p in copy_files(copies)} == kept
    assert len(kept) < len(seeds)
    seen = json.loads(run(READ, folder))
    assert same(seen["answer"], seeds[-1])


def test_an_unchanged_table_keeps_its_one_copy(tmp_path, copies):
    folder = tmp_path / "cache"
    run(WRITE, folder, 20, 20, 20)
    assert len(copy_files(copies)) == 1


def test_a_gone_warehouses_copies_swept_by_two_processes_at_once_fail_neither(tmp_path, copies, monkeypatch):
    """Two processes sweeping the same gone warehouse's folder at once: the one that finds it deleted under it
    goes on. It raised FileNotFoundError, which a refresh reported as "could not store the data (No such file or
    directory)" though its snapshot was written (seen under parallel test workers)."""
    copies.mkdir(mode=0o700)
    gone = copies / "0123456789abcdef"
    gone.mkdir()  # a folder of copies whose OWNER is not readable: being made, or half made
    listed = os.scandir

    def scan_then_lose_it(path):
        entries = list(listed(path))
        if Path(path) == copies:
            monkeypatch.setattr(os, "scandir", listed)
            shutil.rmtree(gone)  # the other process deletes it meanwhile
        return iter(entries)

    monkeypatch.setattr(os, "scandir", scan_then_lose_it)
    unpacked._SWEPT.discard(copies)
    mine = unpacked.folder_for(tmp_path / "cache")
    assert mine is not None and mine.parent == copies and not gone.exists()
