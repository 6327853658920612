"""Big snapshot tables decompressed once, in shared memory, for every process and query worker to map.

A big table is stored zstd-compressed in its own file (`lib.data.snapshots`: 0.3x
the CSV on disk). Read as stored, every process that opened it decompressed the
whole table into its own memory (1.4 s and 287 MB at 1M x 44), and every query
worker decompressed again, for each query, the columns it scanned: a dashboard's
queries took 3x DuckDB's time over the same table in memory. Now the refresh
that writes a big table (or else the first process that opens it) also writes
it uncompressed, once, into this user's folder under DASHMEM_UNPACKED_DIR
(`/dev/shm`, shared memory, by default), and every process and worker
memory-maps that copy: nothing is decompressed again, however many processes
read it, and its memory is the machine's shared memory, one copy, not each
process's own.

A copy is named by the table's content hash, in a folder per warehouse, and
written under a hidden name then renamed, so a reader sees a whole copy or
none. A warehouse's prune deletes the copies its kept snapshots no longer name,
and each process, the first time it uses the folder, deletes the folders of
warehouses that are gone (a deleted cache, a test's temporary one: each folder
names its warehouse in `OWNER`); a process that still maps a deleted copy keeps
reading it. Where the folder
cannot be used (missing, someone else's, not private, or too little room for
the table) the table is read as stored, as before: nothing fails for want of it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import shutil
import stat
import time
from pathlib import Path

import pyarrow as pa

from ..core import settings

log = logging.getLogger(__name__)

SUFFIX = ".arrow"
HEADROOM_BYTES = 256 << 20  # a copy is written only if this much room is left beside it afterwards
ABANDONED_AFTER_S = 600  # a hidden half-written copy older than this is a killed writer's
OWNER = "OWNER"  # in each warehouse's folder of copies: the warehouse folder's path
_SWEPT: set[Path] = set()  # the folders this process has swept of gone warehouses' copies


def folder_for(warehouse_folder: Path) -> Path | None:
    """This warehouse's folder of copies (made on first use), or None when DASHMEM_UNPACKED_DIR is off or unusable."""
    base = settings.get("DASHMEM_UNPACKED_DIR")
    if base is None:
        return None
    mine = base / f"dashmem-{os.getuid()}"
    try:
        mine.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(mine)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        log.warning("not using %s for decompressed tables: it is not a private folder of this user", mine)
        return None
    if mine not in _SWEPT:
        _SWEPT.add(mine)
        _sweep_gone_warehouses(mine)
    owner = str(Path(warehouse_folder).resolve())
    folder = mine / hashlib.sha256(owner.encode()).hexdigest()[:16]
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        if not (folder / OWNER).exists():
            (folder / OWNER).write_text(owner, encoding="utf-8")
    except OSError:
        return None
    return folder


def _sweep_gone_warehouses(mine: Path) -> None:
    """Delete the folders of copies whose warehouse folder no longer exists."""
    try:
        folders = [entry for entry in os.scandir(mine) if entry.is_dir(follow_symlinks=False)]
    except OSError:
        return
    for entry in folders:
        try:
            owner = Path(entry.path, OWNER).read_text(encoding="utf-8")
        except OSError:  # being made right now (the owner is written just after the folder), or left half made
            try:
                owner = "" if time.time() - entry.stat().st_mtime > ABANDONED_AFTER_S else entry.path
            except OSError:  # deleted meanwhile by another process sweeping too
                continue
        if not os.path.isdir(owner):
            shutil.rmtree(entry.path, ignore_errors=True)


def open_copy(folder: Path | None, digest: str | None) -> tuple[pa.Table, Path, int] | None:
    """The table's decompressed copy, memory-mapped: (table, file, size); None when there is none."""
    if folder is None or not digest:
        return None
    path = folder / f"{digest}{SUFFIX}"
    try:
        with pa.memory_map(str(path), "r") as source:
            mapped = source.read_buffer()  # zero-copy; the mapping lives as long as the table uses it
        table = pa.ipc.open_file(mapped).read_all()
    except FileNotFoundError:
        return None
    except (OSError, pa.ArrowInvalid) as exc:  # a damaged copy goes; the stored table is still there
        log.warning("a decompressed copy of a table could not be read (%s); it is made again", exc)
        _unlink(path)
        return None
    return table, path, mapped.size


def write_copy(folder: Path | None, digest: str | None, table: pa.Table | pa.RecordBatchReader) -> bool:
    """Write the table (or every batch a reader yields) as the decompressed copy named `digest`; False when not written."""
    if folder is None or not digest:
        return False
    final = folder / f"{digest}{SUFFIX}"
    if final.exists():
        return True
    size = table.nbytes if isinstance(table, pa.Table) else 0
    try:
        room = os.statvfs(folder)
    except OSError:
        return False
    if room.f_bavail * room.f_frsize < size + HEADROOM_BYTES:
        log.info("no room in %s for a decompressed table of %d MB; it is read as stored", folder, size >> 20)
        return False
    staging = folder / f".{digest}.{secrets.token_hex(4)}.tmp"
    try:
        with pa.OSFile(str(staging), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            if isinstance(table, pa.Table):
                writer.write_table(table)
            else:
                for batch in table:
                    writer.write_batch(batch)
        os.replace(staging, final)
    except (OSError, pa.ArrowInvalid) as exc:  # full meanwhile, or gone: read as stored
        log.info("a decompressed copy could not be written (%s); the table is read as stored", exc)
        _unlink(staging)
        return False
    return True


def unpack(folder: Path | None, digest: str | None, stored: Path) -> tuple[pa.Table, Path, int] | None:
    """The copy of the table stored (compressed) in `stored`, decompressed into `folder` batch by batch if it is
    not there yet, then mapped; None where no copy can be made (the caller reads the stored file)."""
    found = open_copy(folder, digest)
    if found is not None or folder is None:
        return found
    try:
        with pa.memory_map(str(stored), "r") as source:
            reader = pa.ipc.open_file(source)
            batches = (reader.get_batch(i) for i in range(reader.num_record_batches))
            written = write_copy(folder, digest, pa.RecordBatchReader.from_batches(reader.schema, batches))
    except FileNotFoundError:
        raise  # pruned by another process: the caller knows what that means
    except (OSError, pa.ArrowInvalid):
        return None  # damaged: the caller reads the stored file and says so
    return open_copy(folder, digest) if written else None


def sweep(folder: Path | None, keep: set[str]) -> None:
    """Delete the copies of `folder` whose tables no kept snapshot names, and half-written ones long abandoned."""
    if folder is None:
        return
    try:
        names = os.listdir(folder)
    except OSError:
        return
    now = time.time()
    for name in names:
        path = folder / name
        if name.startswith(".") and name.endswith(".tmp"):
            try:
                if now - path.stat().st_mtime > ABANDONED_AFTER_S:
                    _unlink(path)
            except OSError:
                pass
        elif name.endswith(SUFFIX) and name[: -len(SUFFIX)] not in keep:
            _unlink(path)


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
