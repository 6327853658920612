"""A workspace's data: immutable snapshots on disk, served through a sandboxed DuckDB.

Storage. Each refresh writes a new snapshot folder holding one Arrow IPC file
per table plus a manifest, then switches the small `CURRENT` pointer with an
atomic rename. All of a workspace's tables therefore change in one step, a
failed refresh leaves the last good snapshot in place, and a cron `refresh`
never fights the running app for a write lock (DuckDB allows one writer per
file across processes). The last few snapshots are kept, so earlier data stays
available. Arrow IPC files are memory-mapped, so opening a snapshot costs
almost nothing and writing one is close to a memory copy.

Queries. Dashboards and the model query through `Warehouse.query`: one
in-memory DuckDB per process, opened with external access disabled and its
configuration locked (no files, COPY, ATTACH, INSTALL/LOAD). Each query gets
its own cursor with the snapshot's tables registered zero-copy, must be a
single SELECT (WITH … SELECT included), returns at most `max_rows` rows and
is interrupted after `timeout_s`.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import queue
import secrets as _random
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import duckdb
import pyarrow as pa

KEEP_SNAPSHOTS = 5
DEFAULT_MAX_ROWS = 10_000
DEFAULT_TIMEOUT_S = 10.0


class QueryError(ValueError):
    """A query was refused or failed; the message says why in user terms."""


class QueryRefused(QueryError):
    """The sandbox refused the statement before running it."""


@dataclass(frozen=True)
class Snapshot:
    id: str
    path: Path
    created: str
    tables: dict[str, dict[str, Any]]  # name -> {"rows": int, "columns": [[name, type], ...], "source": str}

    def columns(self, table: str) -> dict[str, str]:
        return {name: kind for name, kind in self.tables[table]["columns"]}


@dataclass
class QueryResult:
    table: pa.Table
    truncated: bool
    seconds: float
    columns: list[str] = field(default_factory=list)

    def to_pandas(self):
        return self.table.to_pandas()

    @property
    def rows(self) -> list[tuple]:
        return list(zip(*(self.table.column(i).to_pylist() for i in range(self.table.num_columns)))) if self.table.num_columns else []


# --------------------------------------------------------------------------- the process-wide sandbox

_SANDBOX_LOCK = threading.Lock()
_SANDBOX: duckdb.DuckDBPyConnection | None = None


def sandbox() -> duckdb.DuckDBPyConnection:
    """The process's locked-down DuckDB; every query runs on a cursor of it."""
    global _SANDBOX
    with _SANDBOX_LOCK:
        if _SANDBOX is None:
            _SANDBOX = duckdb.connect(":memory:", config={
                "enable_external_access": False,
                "autoload_known_extensions": False,
                "autoinstall_known_extensions": False,
                "memory_limit": os.environ.get("DASHMEM_QUERY_MEMORY", "4GB"),
                "lock_configuration": True,
            })
        return _SANDBOX


def check_statement(sql: str) -> None:
    """Accept exactly one SELECT statement; refuse anything else with a clear reason."""
    if not isinstance(sql, str) or not sql.strip():
        raise QueryRefused("the query is empty")
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(f"SQL syntax error: {_first_line(exc)}") from None
    if len(statements) != 1:
        raise QueryRefused(f"exactly one statement is allowed, got {len(statements)}")
    kind = statements[0].type
    if kind != duckdb.StatementType.SELECT:
        raise QueryRefused(f"only SELECT queries are allowed (WITH … SELECT included), not {kind.name}")


def run_query(tables: Mapping[str, pa.Table], sql: str, params: Mapping[str, Any] | None = None, *,
              max_rows: int = DEFAULT_MAX_ROWS, timeout_s: float = DEFAULT_TIMEOUT_S) -> QueryResult:
    """Run one sandboxed SELECT over the given Arrow tables."""
    check_statement(sql)
    if max_rows < 1:
        raise QueryRefused("max_rows must be at least 1")
    start = time.perf_counter()
    cursor = sandbox().cursor()
    timer = threading.Timer(timeout_s, cursor.interrupt)
    try:
        for name, table in tables.items():
            cursor.register(name, table)
        timer.start()
        try:
            relation = cursor.sql(sql, params=dict(params) if params else None)
            reader = relation.to_arrow_reader(min(max_rows + 1, 100_000))
            batches, count = [], 0
            for batch in reader:
                batches.append(batch)
                count += batch.num_rows
                if count > max_rows:
                    break
        except duckdb.InterruptException:
            raise QueryError(f"query took longer than {timeout_s:g} s and was stopped") from None
        except duckdb.Error as exc:
            if timer.finished.is_set() and "interrupt" in str(exc).lower():
                raise QueryError(f"query took longer than {timeout_s:g} s and was stopped") from None
            raise QueryError(_first_line(exc)) from None
        result = pa.Table.from_batches(batches, schema=reader.schema) if batches else reader.schema.empty_table()
    finally:
        timer.cancel()
        cursor.close()
    truncated = result.num_rows > max_rows
    if truncated:
        result = result.slice(0, max_rows)
    result = _plain_numbers(result)
    return QueryResult(result, truncated, time.perf_counter() - start, result.column_names)


def _plain_numbers(table: pa.Table) -> pa.Table:
    """DuckDB sums integers into HUGEINT, which arrives as decimal; dashboards want plain numbers."""
    for i, f in enumerate(table.schema):
        if pa.types.is_decimal(f.type):
            target = pa.int64() if f.type.scale == 0 else pa.float64()
            try:
                table = table.set_column(i, f.name, table.column(i).cast(target))
            except pa.ArrowInvalid:  # beyond int64: a double keeps the magnitude
                table = table.set_column(i, f.name, table.column(i).cast(pa.float64()))
    return table


_BOUND: dict[tuple, list[tuple[str, str]]] = {}


def bind(tables: Mapping[str, pa.Table], sql: str, params: Mapping[str, Any] | None = None) -> list[tuple[str, str]]:
    """Check a SELECT against the tables without running it; returns its output (column, type) pairs.

    Binding resolves every table and column, so a renamed or dropped column
    fails here in milliseconds, however large the data. A binding depends only
    on the tables' schemas, so successful ones are remembered per schema:
    the refresh of data with the same shape binds nothing again.
    """
    key = (sql, tuple(sorted(params or {})), tuple(sorted((name, t.schema.to_string(show_schema_metadata=False)) for name, t in tables.items())))
    if key in _BOUND:
        return _BOUND[key]
    result = _bind(tables, sql, params)
    if len(_BOUND) > 2048:
        _BOUND.clear()
    _BOUND[key] = result
    return result


def _bind(tables: Mapping[str, pa.Table], sql: str, params: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    check_statement(sql)
    cursor = sandbox().cursor()
    try:
        for name, table in tables.items():
            cursor.register(name, table)
        relation = cursor.sql(sql, params=dict(params) if params else None)
        return list(zip(relation.columns, map(str, relation.types)))
    except duckdb.Error as exc:
        raise QueryError(_first_line(exc)) from None
    finally:
        cursor.close()


def describe(tables: Mapping[str, pa.Table]) -> dict[str, list[list[str]]]:
    """DuckDB column types of Arrow tables, without scanning them.

    Common types are named from the Arrow schema directly (a DuckDB round trip
    cost about 1 ms a table, a sixth of a small refresh); anything else asks DuckDB.
    """
    from .coltypes import duckdb_name

    out, unusual = {}, {}
    for name, table in tables.items():
        names = [duckdb_name(f.type) for f in table.schema]
        if all(names):
            out[name] = [[f.name, n] for f, n in zip(table.schema, names)]
        else:
            unusual[name] = table
    if unusual:
        cursor = sandbox().cursor()
        try:
            for name, table in unusual.items():
                cursor.register(name, table)
                out[name] = [[row[0], row[1]] for row in cursor.execute(f'DESCRIBE "{name}"').fetchall()]
        finally:
            cursor.close()
    return {name: out[name] for name in tables}


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


# --------------------------------------------------------------------------- snapshots on disk

_OPENED: dict[Path, dict[str, pa.Table]] = {}  # snapshot folder -> its tables, memory-mapped or (small) in memory
_OPENED_LOCK = threading.Lock()
KEEP_IN_MEMORY_BYTES = 32 << 20


def _remember(path: Path, tables: dict[str, pa.Table]) -> None:
    with _OPENED_LOCK:
        _OPENED[path] = tables
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
        from .settings import cache_dir

        ws_path = Path(ws_path).resolve()
        digest = hashlib.sha256(str(ws_path).encode()).hexdigest()[:10]
        return cls(Path(cache_root or cache_dir()) / f"{ws_path.name}-{digest}")

    @property
    def pointer(self) -> Path:
        return self.folder / "CURRENT"

    def current_id(self) -> str | None:
        """The id the pointer names (a symlink; a plain file from earlier versions is read too)."""
        try:
            return os.readlink(self.pointer)
        except FileNotFoundError:
            return None
        except OSError:  # not a symlink
            return self.pointer.read_text(encoding="utf-8").strip()

    def current(self) -> Snapshot | None:
        snapshot_id = self.current_id()
        if snapshot_id is None:
            return None
        try:
            return self.snapshot(snapshot_id)
        except (OSError, ValueError, KeyError):  # a crash lost it: serve the newest snapshot still readable
            kept = self.snapshots()
            return kept[0] if kept else None

    def snapshot(self, snapshot_id: str) -> Snapshot:
        path = self.folder / "snapshots" / snapshot_id
        manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
        return Snapshot(snapshot_id, path, manifest["created"], manifest["tables"])

    def snapshots(self) -> list[Snapshot]:
        """Kept snapshots, newest first."""
        root = self.folder / "snapshots"
        ids = sorted((p.name for p in root.iterdir() if not p.name.startswith(".") and (p / "manifest.json").exists()), reverse=True) if root.exists() else []
        out = []
        for i in ids:
            try:
                out.append(self.snapshot(i))
            except (OSError, ValueError, KeyError):
                continue  # half-written by a crash; pruned later
        return out

    def tables(self, snapshot: Snapshot | None = None) -> dict[str, pa.Table]:
        """The snapshot's tables, memory-mapped once per process."""
        snapshot = snapshot or self.current()
        if snapshot is None:
            return {}
        with _OPENED_LOCK:
            opened = _OPENED.get(snapshot.path)
        if opened is None:
            opened = {}
            for name in snapshot.tables:
                with pa.memory_map(str(snapshot.path / f"{name}.arrow"), "r") as source:
                    opened[name] = pa.ipc.open_file(source).read_all()
            _remember(snapshot.path, opened)
        return opened

    def query(self, sql: str, params: Mapping[str, Any] | None = None, *, max_rows: int = DEFAULT_MAX_ROWS,
              timeout_s: float = DEFAULT_TIMEOUT_S, snapshot: Snapshot | None = None) -> QueryResult:
        return run_query(self.tables(snapshot), sql, params, max_rows=max_rows, timeout_s=timeout_s)

    def write_snapshot(self, tables: Mapping[str, pa.Table], sources: Mapping[str, str] | None = None,
                       column_types: Mapping[str, list[list[str]]] | None = None, *, _before_switch=None) -> Snapshot:
        """Write all tables as a new snapshot and make it current in one atomic switch.

        `_before_switch` is a test hook called after the files are written and
        before the pointer moves, to prove that a failure there changes nothing.
        """
        created = dt.datetime.now(dt.timezone.utc)
        snapshot_id = created.strftime("%Y%m%dT%H%M%S.%fZ") + "-" + _random.token_hex(3)
        root = self.folder / "snapshots"
        staging = root / f".{snapshot_id}.tmp"
        try:
            staging.mkdir()
        except FileNotFoundError:  # the first snapshot
            root.mkdir(parents=True, exist_ok=True)
            staging.mkdir()
        try:
            types = dict(column_types) if column_types else describe(tables)
            manifest_tables, written = {}, {}
            for name, table in tables.items():
                table = written[name] = compact_strings(table)
                # Buffered: the IPC writer makes a small write per column buffer.
                with pa.output_stream(str(staging / f"{name}.arrow"), buffer_size=1 << 20) as sink:
                    with pa.ipc.new_file(sink, table.schema) as writer:
                        writer.write_table(table)
                manifest_tables[name] = {"rows": table.num_rows, "columns": types[name], "source": (sources or {}).get(name, name)}
            manifest = {"created": created.isoformat(), "tables": manifest_tables}
            (staging / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
            final = root / snapshot_id
            os.replace(staging, final)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        try:
            if _before_switch:
                _before_switch()
            _point(self.pointer, snapshot_id)
        except BaseException:
            shutil.rmtree(final, ignore_errors=True)
            raise
        if sum(t.nbytes for t in written.values()) <= KEEP_IN_MEMORY_BYTES:
            _remember(final, written)  # small data: the next refresh and queries skip re-opening the files
        self._prune(snapshot_id)
        return Snapshot(snapshot_id, final, manifest["created"], manifest_tables)

    def switch_to(self, snapshot_id: str) -> Snapshot:
        """Serve an earlier kept snapshot again (step back to earlier data)."""
        snapshot = self.snapshot(snapshot_id)
        _point(self.pointer, snapshot_id)
        return snapshot

    def _prune(self, current: str) -> None:
        """Drop all but the newest KEEP_SNAPSHOTS.

        A dropped snapshot is renamed out of sight at once and deleted in the
        background: deleting its files took a tenth of a small refresh. A
        process that exits first leaves a `.….old` folder, deleted next time.
        """
        root = self.folder / "snapshots"
        names = os.listdir(root)
        ids = sorted((n for n in names if not n.startswith(".")), reverse=True)
        doomed = [root / n for n in names if n.endswith(".old")]
        for old in ids[KEEP_SNAPSHOTS:]:  # ids sort by creation time
            if old != current:
                hidden = root / f".{old}.{_random.token_hex(3)}.old"
                try:
                    os.replace(root / old, hidden)
                except OSError:
                    continue  # another process pruned it
                doomed.append(hidden)
        for stale in (root / n for n in names if n.endswith(".tmp")):
            try:
                if time.time() - stale.stat().st_mtime > 3600:  # a crashed writer's leftovers
                    doomed.append(stale)
            except OSError:
                continue
        for folder in doomed:
            _deleter().put(folder)


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
            if len(probe) and pc.count_distinct(probe).as_py() <= max_ratio * len(probe):
                encoded = pc.dictionary_encode(column)
                table = table.set_column(i, field_.with_type(encoded.type), encoded)
    return table


_DELETER: "queue.SimpleQueue[Path] | None" = None


def _deleter() -> "queue.SimpleQueue[Path]":
    """The queue of a background thread that deletes dropped snapshot folders (started once:
    starting a thread per refresh cost more than the deletion it saved)."""
    global _DELETER
    with _SANDBOX_LOCK:
        if _DELETER is None:
            _DELETER = queue.SimpleQueue()
            threading.Thread(target=_delete_forever, args=(_DELETER,), name="delete-snapshots", daemon=True).start()
        return _DELETER


def _delete_forever(folders: "queue.SimpleQueue[Path]") -> None:
    while True:
        shutil.rmtree(folders.get(), ignore_errors=True)


def _point(pointer: Path, snapshot_id: str) -> None:
    """Make `pointer` name `snapshot_id`, atomically.

    A symlink swapped in by rename: on ext4, renaming a new regular file over
    an old one forces a data flush (about 0.2 ms, a tenth of a small refresh);
    a symlink carries no data. No fsync: snapshots are a cache of the sources,
    and a pointer lost in a crash falls back to the newest readable snapshot
    (see `current`).
    """
    tmp = pointer.with_name(f".{pointer.name}.{_random.token_hex(4)}.tmp")
    os.symlink(snapshot_id, tmp)
    try:
        os.replace(tmp, pointer)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
