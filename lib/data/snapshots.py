"""The snapshot store: a workspace's data as immutable snapshot files on disk.

Each refresh writes one new snapshot file holding every table (an Arrow IPC
file per table, back to back, then a JSON manifest) under a hidden name, and
renames it into place: the newest complete snapshot is the one served, so that
rename is the switch. All of a workspace's tables therefore change in one step,
a failed refresh leaves the last good snapshot in place, and a cron `refresh`
never fights the running app for a write lock (DuckDB allows one writer per
file across processes). The last few snapshots are kept, and a steward can
serve an earlier one until the next refresh (a `PINNED` symlink names it).
One file per snapshot for small tables and no separate pointer, because on a
small refresh creating, renaming and deleting files cost more than writing the
data. Tables are read with their IPC footer's offset in the whole file
(`_open_table`), in any process.

Tables are zstd-compressed Arrow IPC in record batches of BATCH_ROWS rows
(those under COMPRESS_FROM_BYTES are left uncompressed). bench/snapshots.py
picked it: 0.3x the bytes of the uncompressed format on 1M x 44; Parquet was
smaller still but slower to read back, lz4 faster to read but 1.6x the bytes.
A table of OWN_FILE_BYTES or more is kept in a file of its own next to the
snapshot (`<id>~<n>.table`), and one whose content hash equals a table of the
previous snapshot is a hard link to that table's file instead of a new copy:
the kept snapshots share it, and pruning one snapshot removes only its own
link, so a table still used by another is never deleted.
Snapshots written before compression (one uncompressed file) read as before.
A big table is also kept decompressed, once, in shared memory (`lib.data.unpacked`,
written by the refresh that writes it): every process and query worker maps that
copy instead of decompressing the table for itself.

Queries over a snapshot's tables go through the query engine (`lib.data.engine`)
and the sandbox (`lib.data.sandbox`).
"""

from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import json
import os
import secrets as _random
import shutil
import struct
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping

import pyarrow as pa

from ..core.fsutil import replace_symlink
from ..core.settings import cache_dir_for
from ..roles.access import require
from . import unpacked
from .queries import run_query
from .query_worker import remember_origin
from .sandbox import DEFAULT_MAX_ROWS, DEFAULT_TIMEOUT_S, QueryError, QueryResult, describe, first_line

if TYPE_CHECKING:
    from ..roles.access import User

KEEP_SNAPSHOTS = 5
DURABLE_AFTER_S = 60  # a file written longer ago than this has reached the disk (Linux writes back within 30 s)


@dataclass(frozen=True)
class Snapshot:
    id: str
    path: Path
    created: str
    # name -> {"rows", "columns": [[name, type], ...], "source", "offset", "length"}, and for a table in
    # its own file "file" (its name next to the snapshot) and "hash" (of its content, to share it)
    tables: dict[str, dict[str, Any]]

    def columns(self, table: str) -> dict[str, str]:
        return {name: kind for name, kind in self.tables[table]["columns"]}


# --------------------------------------------------------------------------- snapshots on disk

SUFFIX = ".snapshot"
ID_TIME_FORMAT = "%Y%m%dT%H%M%S.%fZ"  # snapshot ids start with their creation time, so they sort by it
ID_TIME_CHARS = len("20261130T061500.000000Z")
_TRAILER = struct.Struct("<Q8s")  # manifest length, magic: the last bytes of a complete snapshot file
_MAGIC = b"DMSNAP1\n"
_ALIGN = 64  # each table's IPC file starts on a 64-byte boundary, so memory-mapped buffers stay aligned
TABLE_SUFFIX = ".table"  # a big table's own file: `<snapshot id>~<n>.table`, maybe a hard link shared with other snapshots
OWN_FILE_BYTES = 4 << 20  # a table this big (in memory) gets its own file, which later snapshots can share
BATCH_ROWS = 128 << 10  # rows per compressed record batch: the CSV reader's small chunks compressed 2x worse and read 3x slower
COMPRESSION = "zstd"
COMPRESS_FROM_BYTES = 1 << 20  # smaller tables are stored as they are: compressing them cost more of a small refresh than it saved

_OPENED: dict[Path, dict[str, pa.Table]] = {}  # snapshot file -> its tables, memory-mapped
_IN_MEMORY: list[Path] = []  # the entry of _OPENED holding the tables this process just wrote, in memory
_MANIFESTS: dict[tuple[Path, int, int], Snapshot] = {}  # (file, size, mtime) -> its manifest, read once
_OPENED_LOCK = threading.Lock()
KEEP_IN_MEMORY_BYTES = 32 << 20  # a snapshot this small stays in memory after writing, instead of being mapped


def _remember_manifest(identity: tuple[Path, int, int], snapshot: Snapshot) -> None:
    with _OPENED_LOCK:
        _MANIFESTS[identity] = snapshot
        for stale in list(_MANIFESTS)[: -4 * KEEP_SNAPSHOTS]:
            del _MANIFESTS[stale]


def _remember(path: Path, tables: dict[str, pa.Table], in_memory: bool = False) -> None:
    with _OPENED_LOCK:
        _OPENED[path] = tables
        if in_memory:
            # Only the newest stays in memory; an older one is memory-mapped again if asked for.
            _IN_MEMORY.append(path)
            for stale in _IN_MEMORY[:-1]:
                _OPENED.pop(stale, None)
            del _IN_MEMORY[:-1]
        for stale in list(_OPENED)[: -2 * KEEP_SNAPSHOTS]:  # the few most recent snapshots stay open
            del _OPENED[stale]


class Warehouse:
    """The snapshots of one workspace (or of one person's draft of it) in `folder`."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    @classmethod
    def for_workspace(cls, ws_path: Path, cache_root: Path | None = None) -> "Warehouse":
        """The cache of the workspace folder at `ws_path`: one per folder, outside git.

        The key includes a hash of the folder's absolute path, so the app and a
        CLI run on the same folder share data while two checkouts never do.
        """

        ws_path = Path(ws_path).resolve()
        digest = hashlib.sha256(str(ws_path).encode()).hexdigest()[:10]
        return cls(Path(cache_root or cache_dir_for(ws_path)) / f"{ws_path.name}-{digest}")

    @property
    def pin(self) -> Path:
        return self.folder / "PINNED"

    @property
    def root(self) -> Path:
        return self.folder / "snapshots"

    @property
    def checked_file(self) -> Path:
        return self.folder / "CHECKED"

    def mark_checked(self, now: dt.datetime | None = None) -> str:
        """Record that a refresh just found the sources fitting (changed or not); returns the time (ISO 8601, UTC).

        `now` is the clock (tests move it; schedules are judged against this time)."""
        stamp = (now or dt.datetime.now(dt.timezone.utc)).astimezone(dt.timezone.utc).isoformat(timespec="seconds")
        self.folder.mkdir(parents=True, exist_ok=True)
        replace_symlink(self.checked_file, stamp)
        return stamp

    def last_checked(self) -> dt.datetime | None:
        """When a refresh last found the sources fitting, from any process; None if never."""
        try:
            return dt.datetime.fromisoformat(os.readlink(self.checked_file))
        except (OSError, ValueError):
            return None

    def _pinned_id(self, ids: list[str] | None = None) -> str | None:
        """The earlier snapshot a steward chose to serve, while no newer one has been written.

        The pin names the snapshot that was newest when it was set, so any later
        write ends it, even one that raced with setting it.
        """
        try:
            pinned, _, newest_then = os.readlink(self.pin).partition("@")
        except OSError:
            return None
        ids = self._ids() if ids is None else ids
        return pinned if ids and ids[0] == newest_then else None

    def clean_abandoned(self) -> None:
        """Delete staging files of writers that were killed (nobody holds their lock), once per folder and process."""
        if self.root in _CLEANED:
            return
        _CLEANED.add(self.root)
        try:
            names = os.listdir(self.root)
        except FileNotFoundError:
            return
        for name in names:
            if name.startswith(".") and name.endswith(".tmp"):
                _delete_if_abandoned(self.root / name)
        for name in names:
            if name.endswith(TABLE_SUFFIX):
                self._delete_if_orphan(name)

    def current(self) -> Snapshot | None:
        """The pinned snapshot, else the newest readable one.

        Readable means its tables open, not only its manifest: a damaged file is
        set aside and passed over, so every process serves the last good data.
        Opening is memory-mapping, done once per process and kept.
        """

        self.clean_abandoned()  # a killed refresh's half-written file goes at the next start, not an hour later
        ids = self._ids()
        pinned = self._pinned_id(ids)
        for snapshot in self._readable(([pinned] if pinned else []) + ids):
            try:
                self._open(snapshot)
            except (FileNotFoundError, QueryError):
                continue
            return snapshot
        return None

    def snapshot(self, snapshot_id: str) -> Snapshot:
        path = self.root / f"{snapshot_id}{SUFFIX}"
        stat = path.stat()
        identity = (path, stat.st_size, stat.st_mtime_ns)  # written once, so this only changes if damaged
        with _OPENED_LOCK:
            known = _MANIFESTS.get(identity)
        if known is None:
            manifest = _read_manifest(path)
            known = Snapshot(snapshot_id, path, manifest["created"], manifest["tables"])
            _remember_manifest(identity, known)
        return known

    def snapshots(self) -> list[Snapshot]:
        """Kept snapshots, newest first."""
        return list(self._readable(self._ids()))

    def _readable(self, ids: list[str]) -> Iterator[Snapshot]:
        """The snapshots of `ids` that can be read, in order; a damaged or vanished file is passed over."""
        for snapshot_id in ids:
            try:
                yield self.snapshot(snapshot_id)
            except (OSError, ValueError, KeyError):
                continue

    def _ids(self, names: list[str] | None = None) -> list[str]:
        """Snapshot ids on disk, newest first (ids sort by creation time)."""
        if names is None:
            try:
                names = os.listdir(self.root)
            except FileNotFoundError:
                return []
        return sorted((n[: -len(SUFFIX)] for n in names if n.endswith(SUFFIX) and not n.startswith(".")), reverse=True)

    def tables(self, snapshot: Snapshot | None = None) -> dict[str, pa.Table]:
        """The snapshot's tables (the current one's by default), memory-mapped once per process."""

        for _ in range(3):
            chosen = snapshot or self.current()
            if chosen is None:
                return {}
            try:
                return self._open(chosen)
            except FileNotFoundError:
                if snapshot is not None:
                    raise QueryError("this data was replaced by newer loads while it was being opened; reload the page") from None
                # pruned by another process since `current()` named it: ask again
            except QueryError:
                if snapshot is not None:
                    raise
                # damaged and now set aside: the next newest readable one is served
        raise QueryError("the data kept changing while it was being opened; reload the page")

    def _open(self, snapshot: Snapshot) -> dict[str, pa.Table]:
        """A snapshot's tables, mapped once per process.

        FileNotFoundError when another process pruned it; QueryError, with the
        file set aside so no process serves it again, when its data is damaged.
        """

        with _OPENED_LOCK:
            opened = _OPENED.get(snapshot.path)
        if opened is not None:
            return opened
        try:
            with pa.memory_map(str(snapshot.path), "r") as source:
                mapped = source.read_buffer()  # zero-copy; the mapping lives as long as the tables use it
        except FileNotFoundError:
            raise
        except OSError as exc:  # unreadable (permissions, I/O): served by no one, but not deleted
            raise QueryError(f"the data loaded at {snapshot.created[:19].replace('T', ' ')} cannot be read ({first_line(exc)})") from None
        try:
            copies = unpacked.folder_for(self.folder) if any(meta.get("file") for meta in snapshot.tables.values()) else None
            opened = {name: _open_table(mapped, meta, snapshot.path, copies) for name, meta in snapshot.tables.items()}
        except FileNotFoundError:
            raise  # a table file pruned with its snapshot by another process since the manifest was read
        except (pa.ArrowInvalid, OSError, KeyError, TypeError, ValueError) as exc:
            _set_aside(snapshot.path)
            raise QueryError(
                f"the data loaded at {snapshot.created[:19].replace('T', ' ')} is damaged and cannot be read ({first_line(exc)}); refresh to load it again"
            ) from None
        _remember(snapshot.path, opened)
        return opened

    def query(
        self,
        sql: str,
        params: Mapping[str, Any] | None = None,
        *,
        max_rows: int = DEFAULT_MAX_ROWS,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        snapshot: Snapshot | None = None,
    ) -> QueryResult:
        return run_query(self.tables(snapshot), sql, params, max_rows=max_rows, timeout_s=timeout_s)

    def write_snapshot(
        self,
        tables: Mapping[str, pa.Table],
        sources: Mapping[str, str] | None = None,
        column_types: Mapping[str, list[list[str]]] | None = None,
        *,
        _before_switch=None,
    ) -> Snapshot:
        """Write all tables as a new snapshot and make it current in one atomic switch.

        `_before_switch` is a test hook called after the file is written and
        before it is renamed into place, to prove that a failure there changes nothing.
        """
        created = dt.datetime.now(dt.timezone.utc)
        ids = self._ids()
        newest = ids[0] if ids else None
        if newest and newest[:ID_TIME_CHARS] >= created.strftime(ID_TIME_FORMAT):
            # The clock went back (or another writer got the same microsecond): the newest
            # snapshot is the one served, so this one must still sort after it.
            created = dt.datetime.strptime(newest[:ID_TIME_CHARS], ID_TIME_FORMAT).replace(tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=1)
        snapshot_id = created.strftime(ID_TIME_FORMAT) + "-" + _random.token_hex(3)
        self.root.mkdir(parents=True, exist_ok=True)
        staging = self.root / f".{snapshot_id}.tmp"
        final = self.root / f"{snapshot_id}{SUFFIX}"
        # Held while writing: a staging file nobody holds is a killed writer's, and any process may delete it.
        writing = os.open(staging, os.O_CREAT | os.O_WRONLY, 0o644)
        fcntl.flock(writing, fcntl.LOCK_EX)
        own_files: list[Path] = []
        try:
            types = dict(column_types) if column_types else describe(tables)
            shareable = self._shareable(newest)
            manifest_tables, written, origins = {}, {}, {}
            # Buffered: the IPC writer makes a small write per column buffer.
            with pa.output_stream(str(staging), buffer_size=1 << 20) as sink:
                for index, (name, table) in enumerate(tables.items()):
                    known = content_hash_of(table)
                    table = written[name] = compact_strings(table)
                    meta = {"rows": table.num_rows, "columns": types[name], "source": (sources or {}).get(name, name)}
                    if table.nbytes >= OWN_FILE_BYTES:
                        digest = known or content_hash(table)
                        own = self.root / f"{snapshot_id}~{index}{TABLE_SUFFIX}"
                        own_files.append(own)
                        length = _link_or_write(own, shareable.get(digest), table)
                        meta.update(file=own.name, hash=digest, offset=0, length=length)
                        origins[name] = (own, 0, length)
                    else:
                        start = sink.tell()
                        _write_ipc(sink, table)
                        length = sink.tell() - start
                        sink.write(b"\0" * (-sink.tell() % _ALIGN))
                        meta.update(offset=start, length=length)
                        origins[name] = (final, start, length)
                    manifest_tables[name] = meta
                manifest = {"created": created.isoformat(), "format": 2, "tables": manifest_tables}
                body = json.dumps(manifest).encode()
                sink.write(body)
                sink.write(_TRAILER.pack(len(body), _MAGIC))
            if _before_switch:
                _before_switch()
            os.replace(staging, final)  # the switch: readers serve the newest complete snapshot
        except BaseException:
            staging.unlink(missing_ok=True)
            for own in own_files:
                own.unlink(missing_ok=True)
            raise
        finally:
            os.close(writing)
        copies = unpacked.folder_for(self.folder) if any(meta.get("file") for meta in manifest_tables.values()) else None
        for name, meta in manifest_tables.items():
            if meta.get("file"):  # the next process to open it maps this copy instead of decompressing the table
                unpacked.write_copy(copies, meta.get("hash"), written[name])
        # The new snapshot ends any pin (see `pinned_id`); the file goes for tidiness. The
        # snapshot pinned until now is spared this once: a reader may be about to open it.
        spare = self._pinned_id(ids)
        self.pin.unlink(missing_ok=True)
        if sum(t.nbytes for t in written.values()) <= KEEP_IN_MEMORY_BYTES:
            for name, table in written.items():  # query workers map the same bytes from the file
                remember_origin(table, *origins[name])
                _remember_hash(table, manifest_tables[name].get("hash"))
            _remember(final, written, in_memory=True)  # the next refresh and queries skip mapping the file
        self._prune(spare)
        snapshot = Snapshot(snapshot_id, final, manifest["created"], manifest_tables)
        stat = final.stat()
        _remember_manifest((final, stat.st_size, stat.st_mtime_ns), snapshot)  # the next refresh reads none
        return snapshot

    def _shareable(self, snapshot_id: str | None) -> dict[str, Path]:
        """Content hash -> file of each table in its own file in snapshot `snapshot_id` (the newest before this write)."""
        if snapshot_id is None:
            return {}
        try:
            previous = self.snapshot(snapshot_id)
        except (OSError, ValueError, KeyError):
            return {}
        return {meta["hash"]: self.root / meta["file"] for meta in previous.tables.values() if meta.get("file") and meta.get("hash")}

    def switch_to(self, snapshot_id: str, *, user: "User", meta: Mapping[str, Any]) -> Snapshot:
        """Serve a kept snapshot (step back to earlier data) until the next refresh writes a new one.

        It changes what everyone sees, so it needs the right to pin data in the
        workspace whose access list is `meta` (workspace.yaml).
        """

        require(user, "pin_data", dict(meta))
        snapshot = self.snapshot(snapshot_id)
        ids = self._ids()
        if snapshot_id == ids[0]:
            self.pin.unlink(missing_ok=True)
        else:
            replace_symlink(self.pin, f"{snapshot_id}@{ids[0]}")
        return snapshot

    def _prune(self, spare: str | None = None) -> None:
        """Delete all but the newest KEEP_SNAPSHOTS (and `spare`), and a crashed writer's leftovers.

        A process that still has a deleted snapshot memory-mapped keeps reading it:
        the file's data lives until its last mapping goes. Snapshots are written
        without fsync (it would cost more than the whole refresh), so a power cut
        can empty the files of the last half minute; the newest snapshot older
        than DURABLE_AFTER_S is therefore kept too, and served if all newer ones
        turn out damaged.
        """
        names = os.listdir(self.root)
        ids = self._ids(names)
        settled = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=DURABLE_AFTER_S)).strftime(ID_TIME_FORMAT)
        durable = next((i for i in ids if i[:ID_TIME_CHARS] < settled), None)
        for old in ids[KEEP_SNAPSHOTS:]:
            if old not in (spare, durable):
                _delete(self.root / f"{old}{SUFFIX}")
        for name in names:
            if name.startswith(".") and name.endswith(".tmp"):
                _delete_if_abandoned(self.root / name)
            elif name.endswith(TABLE_SUFFIX):
                self._delete_if_orphan(name)
            elif not name.endswith(SUFFIX):
                _delete(self.root / name)  # a damaged snapshot set aside, or what an earlier version of this app kept here
        if any(name.endswith(TABLE_SUFFIX) for name in names):
            kept = {meta["hash"] for snapshot in self._readable(self._ids()) for meta in snapshot.tables.values() if meta.get("hash")}
            unpacked.sweep(unpacked.folder_for(self.folder), kept)  # the decompressed copies of tables no kept snapshot names

    def _delete_if_orphan(self, table_file: str) -> None:
        """Delete a table file whose snapshot is gone (pruned, set aside, or its writer killed).

        Other snapshots sharing the table hold links of their own, so their data stays.
        The writer's staging lock is checked before the snapshot's name: the rename
        that switches happens while the lock is held, so one of the two is always seen.
        """
        owner = table_file.partition("~")[0]
        staging = self.root / f".{owner}.tmp"
        if staging.exists() and _writer_at_work(staging):
            return
        if not (self.root / f"{owner}{SUFFIX}").exists():
            _delete(self.root / table_file)


def _open_table(mapped: pa.Buffer, meta: Mapping[str, Any], path: Path, copies: Path | None = None) -> pa.Table:
    """One table of a snapshot file; a big one from its decompressed copy in `copies` (`lib.data.unpacked`), made if missing.

    Each table's IPC file was written into the one snapshot stream, so the
    block offsets in its footer count from the start of the snapshot file, not
    from the table's own start: open it in the whole file, naming where its
    footer ends. (Reading a slice that starts at the table worked only for
    the first table, and every other table failed in any process that had not
    written it.)
    """

    if meta.get("file"):  # a big table, in its own file next to the snapshot
        path = path.with_name(Path(meta["file"]).name)
        if path.stat().st_size != int(meta["length"]):  # cut short (or pruned: FileNotFoundError), whatever a copy says
            raise pa.ArrowInvalid(f"the table file holds {path.stat().st_size} bytes where {int(meta['length'])} were written")
        found = unpacked.unpack(copies, meta.get("hash"), path)
        if found is not None:
            table, copy, size = found
            remember_origin(table, copy, 0, size)  # query workers map the same copy
            _remember_hash(table, meta.get("hash"))
            return table
        with pa.memory_map(str(path), "r") as source:
            mapped = source.read_buffer()
    end = int(meta["offset"]) + int(meta["length"])
    if not 0 < end <= mapped.size:
        raise pa.ArrowInvalid(f"table data ends at byte {end}, past the end of the file")
    table = pa.ipc.open_file(mapped, footer_offset=end).read_all()
    remember_origin(table, path, int(meta["offset"]), int(meta["length"]))  # query workers map it from there
    _remember_hash(table, meta.get("hash"))  # passed back to the next write unchanged (a failed source's), it is shared unhashed
    return table


def _write_ipc(sink: Any, table: pa.Table) -> None:
    """The table as one Arrow IPC file, in record batches of BATCH_ROWS rows, compressed unless it is small."""
    options = pa.ipc.IpcWriteOptions(compression=COMPRESSION if table.nbytes >= COMPRESS_FROM_BYTES else None)
    with pa.ipc.new_file(sink, table.schema, options=options) as writer:
        for start in range(0, max(table.num_rows, 1), BATCH_ROWS):
            # Merged: each of the parser's small chunks would be compressed on its own.
            writer.write_table(table.slice(start, BATCH_ROWS).combine_chunks())


def _link_or_write(own: Path, shared: Path | None, table: pa.Table) -> int:
    """Put the table at `own`: a hard link to `shared` (the same content, already on disk) if it still exists, else written.

    Returns the file's size. Written straight to `own`: the snapshot naming it is
    not switched yet, so a killed writer's file is an orphan that pruning deletes.
    """
    if shared is not None:
        try:
            os.link(shared, own)
            return own.stat().st_size
        except OSError:
            pass  # pruned meanwhile, or a file system without hard links: written again
    with pa.output_stream(str(own), buffer_size=1 << 20) as sink:
        _write_ipc(sink, table)
        return sink.tell()


_HASHES: dict[int, tuple[weakref.ref, str]] = {}  # id(table) -> its content hash, for tables read from a snapshot
_HASHES_LOCK = threading.Lock()


def _remember_hash(table: pa.Table, digest: str | None) -> None:
    if not digest:
        return
    key = id(table)

    def forget(_ref, key=key):
        with _HASHES_LOCK:
            entry = _HASHES.get(key)
            if entry is not None and entry[0]() is None:
                del _HASHES[key]

    with _HASHES_LOCK:
        _HASHES[key] = (weakref.ref(table, forget), digest)


def content_hash_of(table: pa.Table) -> str | None:
    """The content hash recorded when `table` was read from a snapshot, if it was."""
    with _HASHES_LOCK:
        entry = _HASHES.get(id(table))
    return entry[1] if entry is not None and entry[0]() is table else None


def content_hash(table: pa.Table) -> str:
    """SHA-256 of the table's schema and every buffer of every chunk, columns hashed on all cores.

    Equal hashes mean equal content; equal content laid out differently (other
    chunks) hashes differently, which only costs a copy that could have been shared.
    """
    from concurrent.futures import ThreadPoolExecutor

    def column_digest(column: pa.ChunkedArray) -> bytes:
        digest = hashlib.sha256()  # hashlib releases the GIL on big buffers, so columns hash in parallel
        for chunk in column.chunks:
            parts = [chunk.indices, chunk.dictionary] if pa.types.is_dictionary(chunk.type) else [chunk]
            for part in parts:
                digest.update(f"{part.type}|{part.offset}|{len(part)}|".encode())
                for buffer in part.buffers():
                    digest.update(b"-" if buffer is None else buffer)
                    digest.update(b"|")
        return digest.digest()

    whole = hashlib.sha256(table.schema.serialize().to_pybytes())
    whole.update(str(table.num_rows).encode())
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        for part in pool.map(column_digest, table.columns):
            whole.update(part)
    return whole.hexdigest()


def _set_aside(path: Path) -> None:
    """Rename a snapshot that cannot be read so it is no longer served (kept for a post-mortem until pruned)."""
    try:
        os.replace(path, path.with_name(f".{path.name}.damaged"))
    except OSError:
        pass  # another process set it aside or pruned it first


def _read_manifest(path: Path) -> dict[str, Any]:
    """A snapshot file's manifest; ValueError if the file is incomplete or damaged."""
    with open(path, "rb") as handle:
        try:
            handle.seek(-_TRAILER.size, os.SEEK_END)
            length, magic = _TRAILER.unpack(handle.read(_TRAILER.size))
            if magic != _MAGIC:
                raise ValueError(f"{path.name} is not a complete snapshot")
            handle.seek(-_TRAILER.size - length, os.SEEK_END)
        except OSError:
            raise ValueError(f"{path.name} is not a complete snapshot") from None
        return json.loads(handle.read(length))


_CLEANED: set[Path] = set()


def _writer_at_work(staging: Path) -> bool:
    """Whether a live writer holds the staging file's lock."""
    try:
        handle = os.open(staging, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(handle)
    return False


def _delete_if_abandoned(staging: Path) -> None:
    """Delete a staging file whose writer is gone: its lock is free (a live writer holds it to the end)."""
    try:
        handle = os.open(staging, os.O_RDONLY)
    except OSError:
        return
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return  # a writer at work
    finally:
        os.close(handle)
    _delete(staging)


def _delete(path: Path) -> None:
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    except OSError:
        pass  # another process deleted it first


def compact_strings(table: pa.Table, probe_rows: int = 10_000, max_ratio: float = 0.2, min_rows: int = 100_000) -> pa.Table:
    """Dictionary-encode text columns that repeat a lot (categories).

    A category stored once per distinct value makes snapshots smaller, so
    memory-mapping them touches less memory, and DuckDB groups them faster.
    The first rows decide, so columns of mostly unique text are not encoded.
    """
    import pyarrow.compute as pc

    if table.num_rows < min_rows:  # small tables gain nothing worth the encoding time
        return table
    for i, field_ in enumerate(table.schema):
        if pa.types.is_string(field_.type) or pa.types.is_large_string(field_.type):
            column = table.column(i)
            probe = column.slice(0, probe_rows)
            if len(probe) and pc.count_distinct(probe).as_py() <= max_ratio * len(probe):  # pyright: ignore[reportAttributeAccessIssue]  # pyarrow.compute makes its kernels at import: no stubs
                encoded = pc.dictionary_encode(column)  # pyright: ignore[reportAttributeAccessIssue]
                table = table.set_column(i, field_.with_type(encoded.type), encoded)
    return table


# --------------------------------------------------------------------------- a load as people see it


def loaded_at(snapshot: Snapshot) -> str:
    """When a snapshot was loaded, in the server's local time: "2026-11-30 18:13:05"."""
    return f"{dt.datetime.fromisoformat(snapshot.created).astimezone():%Y-%m-%d %H:%M:%S}"


def load_label(snapshot: Snapshot) -> str:
    """A load as a choice in a list: its time and the end of its id, "2026-11-30 18:13:05 · load 3f2a1b".

    The id is needed: loads a second apart show the same time, and Streamlit remembers a
    choice by its label, so equal labels would be one choice (a pruned load's label too).
    """
    return f"{loaded_at(snapshot)} · load {snapshot.id.rpartition('-')[2]}"
