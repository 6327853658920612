"""The snapshot store: a workspace's data as immutable snapshot files on disk.

Each refresh writes one new snapshot file holding every table (an Arrow IPC
file per table, back to back, then a JSON manifest) under a hidden name, and
renames it into place: the newest complete snapshot is the one served, so that
rename is the switch. All of a workspace's tables therefore change in one step,
a failed refresh leaves the last good snapshot in place, and a cron `refresh`
never fights the running app for a write lock (DuckDB allows one writer per
file across processes). The last few snapshots are kept, and a steward can
serve an earlier one until the next refresh (a `PINNED` symlink names it).
Snapshots are memory-mapped, so opening one costs almost nothing, and writing
one is close to a memory copy. One file per snapshot and no separate pointer,
because on a small refresh creating, renaming and deleting files cost more than
writing the data. Tables are read with their IPC footer's offset in the whole
file (`_open_table`), in any process.

Queries over a snapshot's tables go through the sandbox (`lib.sandbox`);
`lib.warehouse` is the public facade of both.
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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping

import pyarrow as pa

from .fsutil import replace_symlink
from .sandbox import DEFAULT_MAX_ROWS, DEFAULT_TIMEOUT_S, QueryResult, describe, first_line, run_query

if TYPE_CHECKING:
    from .access import User

KEEP_SNAPSHOTS = 5
DURABLE_AFTER_S = 60  # a file written longer ago than this has reached the disk (Linux writes back within 30 s)


@dataclass(frozen=True)
class Snapshot:
    id: str
    path: Path
    created: str
    tables: dict[str, dict[str, Any]]  # name -> {"rows", "columns": [[name, type], ...], "source", "offset", "length"}

    def columns(self, table: str) -> dict[str, str]:
        return {name: kind for name, kind in self.tables[table]["columns"]}



# --------------------------------------------------------------------------- snapshots on disk

SUFFIX = ".snapshot"
ID_TIME_FORMAT = "%Y%m%dT%H%M%S.%fZ"  # snapshot ids start with their creation time, so they sort by it
ID_TIME_CHARS = len("20261130T061500.000000Z")
_TRAILER = struct.Struct("<Q8s")  # manifest length, magic: the last bytes of a complete snapshot file
_MAGIC = b"DMSNAP1\n"
_ALIGN = 64  # each table's IPC file starts on a 64-byte boundary, so memory-mapped buffers stay aligned

_OPENED: dict[Path, dict[str, pa.Table]] = {}  # snapshot file -> its tables, memory-mapped
_IN_MEMORY: list[Path] = []  # the entry of _OPENED holding the tables this process just wrote, in memory
_MANIFESTS: dict[tuple[Path, int, int], Snapshot] = {}  # (file, size, mtime) -> its manifest, read once
_OPENED_LOCK = threading.Lock()
KEEP_IN_MEMORY_BYTES = 32 << 20  # a snapshot this small stays in memory after writing, instead of being mapped


def _remember_manifest(identity: tuple[Path, int, int], snapshot: Snapshot) -> None:
    with _OPENED_LOCK:
        _MANIFESTS[identity] = snapshot
        for stale in list(_MANIFESTS)[:-4 * KEEP_SNAPSHOTS]:
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
        for stale in list(_OPENED)[:-2 * KEEP_SNAPSHOTS]:  # the few most recent snapshots stay open
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
        from .settings import cache_dir_for

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

    def mark_checked(self) -> str:
        """Record that a refresh just found the sources fitting (changed or not); returns the time (ISO 8601, UTC)."""
        now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        self.folder.mkdir(parents=True, exist_ok=True)
        replace_symlink(self.checked_file, now)
        return now

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

    def current(self) -> Snapshot | None:
        """The pinned snapshot, else the newest readable one.

        Readable means its tables open, not only its manifest: a damaged file is
        set aside and passed over, so every process serves the last good data.
        Opening is memory-mapping, done once per process and kept.
        """
        from .warehouse import QueryError  # the facade's exception (it imports this module)

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
        return sorted((n[:-len(SUFFIX)] for n in names if n.endswith(SUFFIX) and not n.startswith(".")), reverse=True)

    def tables(self, snapshot: Snapshot | None = None) -> dict[str, pa.Table]:
        """The snapshot's tables (the current one's by default), memory-mapped once per process."""
        from .warehouse import QueryError

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
        from .warehouse import QueryError

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
            opened = {name: _open_table(mapped, meta, snapshot.path) for name, meta in snapshot.tables.items()}
        except (pa.ArrowInvalid, OSError, KeyError, TypeError, ValueError) as exc:
            _set_aside(snapshot.path)
            raise QueryError(f"the data loaded at {snapshot.created[:19].replace('T', ' ')} is damaged and cannot be read "
                             f"({first_line(exc)}); refresh to load it again") from None
        _remember(snapshot.path, opened)
        return opened

    def query(self, sql: str, params: Mapping[str, Any] | None = None, *, max_rows: int = DEFAULT_MAX_ROWS,
              timeout_s: float = DEFAULT_TIMEOUT_S, snapshot: Snapshot | None = None) -> QueryResult:
        return run_query(self.tables(snapshot), sql, params, max_rows=max_rows, timeout_s=timeout_s)

    def write_snapshot(self, tables: Mapping[str, pa.Table], sources: Mapping[str, str] | None = None,
                       column_types: Mapping[str, list[list[str]]] | None = None, *, _before_switch=None) -> Snapshot:
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
        try:
            types = dict(column_types) if column_types else describe(tables)
            manifest_tables, written = {}, {}
            # Buffered: the IPC writer makes a small write per column buffer.
            with pa.output_stream(str(staging), buffer_size=1 << 20) as sink:
                for name, table in tables.items():
                    table = written[name] = compact_strings(table)
                    start = sink.tell()
                    with pa.ipc.new_file(sink, table.schema) as writer:
                        writer.write_table(table)
                    length = sink.tell() - start
                    sink.write(b"\0" * (-sink.tell() % _ALIGN))
                    manifest_tables[name] = {"rows": table.num_rows, "columns": types[name],
                                             "source": (sources or {}).get(name, name), "offset": start, "length": length}
                manifest = {"created": created.isoformat(), "tables": manifest_tables}
                body = json.dumps(manifest).encode()
                sink.write(body)
                sink.write(_TRAILER.pack(len(body), _MAGIC))
            if _before_switch:
                _before_switch()
            os.replace(staging, final)  # the switch: readers serve the newest complete snapshot
        except BaseException:
            staging.unlink(missing_ok=True)
            raise
        finally:
            os.close(writing)
        # The new snapshot ends any pin (see `pinned_id`); the file goes for tidiness. The
        # snapshot pinned until now is spared this once: a reader may be about to open it.
        spare = self._pinned_id(ids)
        self.pin.unlink(missing_ok=True)
        if sum(t.nbytes for t in written.values()) <= KEEP_IN_MEMORY_BYTES:
            from .query_worker import remember_origin

            for name, table in written.items():  # query workers map the same bytes from the file
                remember_origin(table, final, manifest_tables[name]["offset"], manifest_tables[name]["length"])
            _remember(final, written, in_memory=True)  # the next refresh and queries skip mapping the file
        self._prune(spare)
        snapshot = Snapshot(snapshot_id, final, manifest["created"], manifest_tables)
        stat = final.stat()
        _remember_manifest((final, stat.st_size, stat.st_mtime_ns), snapshot)  # the next refresh reads none
        return snapshot

    def switch_to(self, snapshot_id: str, *, user: "User", meta: Mapping[str, Any]) -> Snapshot:
        """Serve a kept snapshot (step back to earlier data) until the next refresh writes a new one.

        It changes what everyone sees, so it needs the right to pin data in the
        workspace whose access list is `meta` (workspace.yaml).
        """
        from .access import require

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
            elif not name.endswith(SUFFIX):
                _delete(self.root / name)  # a damaged snapshot set aside, or what an earlier version of this app kept here


def _open_table(mapped: pa.Buffer, meta: Mapping[str, Any], path: Path) -> pa.Table:
    """One table of a snapshot file.

    Each table's IPC file was written into the one snapshot stream, so the
    block offsets in its footer count from the start of the snapshot file, not
    from the table's own start: open it in the whole file, naming where its
    footer ends. (Reading a slice that starts at the table worked only for
    the first table, and every other table failed in any process that had not
    written it.)
    """
    from .query_worker import remember_origin

    end = int(meta["offset"]) + int(meta["length"])
    if not 0 < end <= mapped.size:
        raise pa.ArrowInvalid(f"table data ends at byte {end}, past the end of the file")
    table = pa.ipc.open_file(mapped, footer_offset=end).read_all()
    remember_origin(table, path, int(meta["offset"]), int(meta["length"]))  # query workers map it from there
    return table


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
