"""Untrusted SQL runs in worker processes that can be stopped, whatever the query does.

Why a process: DuckDB checks `interrupt()` between chunks of work, and its
memory limit covers its buffers, not one scalar call's result. A single call
that builds a 2 GB value (`repeat('x', 2e9)`, `lpad`, `printf('%2000000000d')`,
`range(2e9)`) ran for up to a minute at 4 GB against a 10 s limit, and even
binding such a query folds the constant first. Only a process can be stopped
mid-call, so every dashboard, model and viewer query, and every bind of one,
runs here.

How:
- A small pool of `python -m lib.data.query_worker` processes, each with its own
  locked-down DuckDB (no file or network access, configuration locked, a memory
  limit, one thread, working folder `/`, so settings reveal no server paths).
- Tables travel as references, not data: a snapshot's table is (file, offset,
  length) in its snapshot file, which the worker memory-maps once; a table held
  only in memory (a viewer's own CSV, data being checked before it is served) is
  written once to a private spill file and referenced the same way.
- The caller waits at most the time limit plus a second: past it, or past the
  memory cap (anonymous memory of the worker, read from /proc), the worker is
  killed and a fresh one started. Other sessions' queries use other workers, so
  an attack does not stall them: the pool grows up to DASHMEM_QUERY_WORKERS when all are busy.
- The worker answers with a JSON header and Arrow IPC bytes; the parent never
  unpickles anything a query produced.
"""

from __future__ import annotations

import atexit
import json
import os
import pickle
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from pathlib import Path
from typing import Any, Mapping

import pyarrow as pa

from ..core import settings
from ..core.errors import DashmemError
from .sandbox import connect, sandbox_cursor

GRACE_S = 1.0  # past the query's time limit, the worker is killed
ERROR_CHARS = 4000  # of DuckDB's message sent back: its candidate lists can be long, the sentence needs the start
_WORKER_ENV = {"PATH", "PYTHONPATH", "LANG", "TZ", "HOME", "TMPDIR", "VIRTUAL_ENV", "DASHMEM_QUERY_MEMORY"}
_FRAME = struct.Struct("<Q")


class WorkerError(DashmemError, RuntimeError):
    """The query could not be answered; the message says why in user terms."""


def memory_cap_bytes() -> int:
    """Memory one query may use (DASHMEM_QUERY_MEMORY, e.g. 2GB): DuckDB's limit, and the kill line."""
    return settings.get("DASHMEM_QUERY_MEMORY")


# --------------------------------------------------------------------------- table references


_ORIGINS: dict[int, tuple[weakref.ref, tuple[str, int, int]]] = {}
_ORIGINS_LOCK = threading.Lock()
_SPILL_DIR: Path | None = None


def remember_origin(table: pa.Table, path: Path, offset: int, length: int) -> None:
    """Say where a table's bytes are on disk (an Arrow IPC file inside `path`), so workers map it instead of copying it."""
    key = id(table)
    with _ORIGINS_LOCK:
        _ORIGINS[key] = (weakref.ref(table, lambda _ref, key=key: _forget(key)), (str(path), int(offset), int(length)))


def _forget(key: int) -> None:
    with _ORIGINS_LOCK:
        entry = _ORIGINS.get(key)
        if entry is not None and entry[0]() is None:
            del _ORIGINS[key]


def _origin(table: pa.Table) -> tuple[str, int, int] | None:
    with _ORIGINS_LOCK:
        entry = _ORIGINS.get(id(table))
    return entry[1] if entry is not None and entry[0]() is table else None


def table_ref(table: pa.Table) -> tuple[str, int, int]:
    """(file, offset, length) of the table's IPC bytes, spilling a table that lives only in memory once."""
    found = _origin(table)
    if found is not None:
        return found
    global _SPILL_DIR
    with _ORIGINS_LOCK:
        if _SPILL_DIR is None:
            _SPILL_DIR = Path(tempfile.mkdtemp(prefix="dashmem-query-"))  # 0700: this user only
            atexit.register(shutil.rmtree, _SPILL_DIR, True)
    handle, name = tempfile.mkstemp(suffix=".arrow", dir=_SPILL_DIR)
    os.close(handle)
    with pa.OSFile(name, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    size = os.path.getsize(name)
    weakref.finalize(table, _unlink, name)
    remember_origin(table, Path(name), 0, size)
    return name, 0, size


def _unlink(name: str) -> None:
    try:
        os.unlink(name)
    except OSError:
        pass


# --------------------------------------------------------------------------- the parent's side


class _Worker:
    def __init__(self) -> None:
        root = str(Path(__file__).resolve().parents[2])  # the folder holding the package
        # Only what Python and DuckDB need: the app's secrets (API key, cookie key, source passwords) stay out.
        env = {k: v for k, v in os.environ.items() if k in _WORKER_ENV or k.startswith(("LC_", "OPENBLAS_"))}
        env["PYTHONPATH"] = root + os.pathsep + os.environ.get("PYTHONPATH", "")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", __name__, str(memory_cap_bytes())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd="/",
            start_new_session=True,
        )

    def ask(self, request: dict[str, Any], deadline_s: float) -> tuple[dict[str, Any], bytes]:
        body = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
        stdin, out = self.proc.stdin, self.proc.stdout
        if stdin is None or out is None:  # both are pipes (stdin=PIPE, stdout=PIPE above)
            raise WorkerError("the query service has no pipes; try again")
        try:
            stdin.write(_FRAME.pack(len(body)) + body)
            stdin.flush()
        except (BrokenPipeError, OSError):
            raise WorkerError("the query service stopped; try again") from None
        deadline = time.monotonic() + deadline_s
        cap = memory_cap_bytes()
        while True:
            ready, _, _ = select.select([out], [], [], 0.05)
            if ready:
                break
            if self.proc.poll() is not None:
                raise WorkerError("the query used more memory than allowed and was stopped")
            if time.monotonic() > deadline:
                self.kill()
                raise WorkerError(f"query took longer than {request['timeout_s']:g} s and was stopped")
            if _anonymous_memory(self.proc.pid) > cap + (256 << 20):
                self.kill()
                raise WorkerError(f"the query needed more than {cap >> 20:,} MB of memory and was stopped")
        header = json.loads(_read_frame(out))
        payload = _read_frame(out)
        return header, payload

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        self.proc.wait()


def _read_frame(stream) -> bytes:
    raw = stream.read(_FRAME.size)
    if len(raw) != _FRAME.size:
        raise WorkerError("the query service stopped; try again")
    (length,) = _FRAME.unpack(raw)
    data = stream.read(length)
    if len(data) != length:
        raise WorkerError("the query service stopped; try again")
    return data


def _anonymous_memory(pid: int) -> int:
    """Bytes of the process's own memory (not the snapshot files it maps), from /proc; 0 where unknown."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class _Pool:
    def __init__(self) -> None:
        self.idle: list[_Worker] = []
        self.count = 0
        self.starting = 0  # workers start_early() is starting: a query waits for one rather than start another
        self.generation = 0  # counts close(): a worker that finishes starting after one is stopped, not kept
        self.lock = threading.Condition()

    def start_early(self, count: int) -> None:
        """Start workers in the background until `count` run or are starting (within DASHMEM_QUERY_WORKERS), so they are
        ready when the first queries come."""
        with self.lock:
            more = max(0, min(count, settings.get("DASHMEM_QUERY_WORKERS")) - self.count)
            self.count += more
            self.starting += more
            generation = self.generation
        for _ in range(more):
            threading.Thread(target=self._start_one, args=(generation,), name="query-worker-start", daemon=True).start()

    def _start_one(self, generation: int) -> None:
        worker = None
        try:
            worker = _Worker()
        except Exception:  # OSError, say: the first query starts a worker itself and says what went wrong
            pass
        with self.lock:
            if worker is not None and generation == self.generation:
                self.idle.append(worker)
                self.starting -= 1
                self.lock.notify_all()
                return
        if worker is not None:
            worker.kill()  # made after the pool was closed: stopped before it stops counting as starting
        with self.lock:
            self.starting -= 1
            self.count -= 1
            self.lock.notify_all()

    def _take(self) -> _Worker:
        with self.lock:
            while True:
                while self.idle:
                    worker = self.idle.pop()
                    if worker.alive():
                        return worker
                    self.count -= 1
                if self.starting:
                    self.lock.wait(0.1)
                    continue
                if self.count < settings.get("DASHMEM_QUERY_WORKERS"):
                    self.count += 1
                    break
                self.lock.wait(0.1)
        try:
            return _Worker()
        except BaseException:
            with self.lock:
                self.count -= 1
            raise

    def _give_back(self, worker: _Worker) -> None:
        with self.lock:
            if worker.alive():
                self.idle.append(worker)
            else:
                self.count -= 1
            self.lock.notify()

    def ask(self, request: dict[str, Any], deadline_s: float) -> tuple[dict[str, Any], bytes]:
        worker = self._take()
        try:
            return worker.ask(request, deadline_s)
        except BaseException:
            if worker.alive():
                worker.kill()  # a reply half read, or a caller interrupted: never reuse it
            raise
        finally:
            self._give_back(worker)

    def close(self) -> None:
        """Stop the idle workers (busy ones stop when their query ends and they are not taken back)."""
        with self.lock:
            workers, self.idle = self.idle, []
            self.count -= len(workers)
            self.generation += 1
            self.lock.notify_all()
        for worker in workers:
            worker.kill()


_POOL = _Pool()
atexit.register(_POOL.close)


def start_early(count: int = 1) -> None:
    """Start `count` query workers now, beside the caller's own work (loading data, importing the renderer): a command
    that will query soon then does not wait a worker's start-up (about 0.2 s: Python, Arrow and DuckDB) before its
    first query. Safe to call more than once; a worker that cannot start is started (and its error said) by the query."""
    _POOL.start_early(count)


def _refs(tables: Mapping[str, pa.Table]) -> dict[str, tuple[str, int, int]]:
    return {name: table_ref(table) for name, table in tables.items()}


def run(tables: Mapping[str, pa.Table], sql: str, params: Mapping[str, Any] | None, max_rows: int, timeout_s: float) -> tuple[pa.Table, bool]:
    """Run one SELECT (already checked to be one) in a worker; (result, truncated) or WorkerError."""
    request = {"kind": "query", "tables": _refs(tables), "sql": sql, "params": dict(params) if params else None, "max_rows": max_rows, "timeout_s": timeout_s}
    header, payload = _POOL.ask(request, timeout_s + GRACE_S)
    if "error" in header:
        raise WorkerError(header["error"])
    return pa.ipc.open_stream(payload).read_all(), bool(header["truncated"])


def bind(tables: Mapping[str, pa.Table], sql: str, params: Mapping[str, Any] | None, timeout_s: float) -> list[tuple[str, str]]:
    """Output (column, type) pairs of a SELECT, bound in a worker (binding folds constants, so it can be an attack too)."""
    request = {"kind": "bind", "tables": _refs(tables), "sql": sql, "params": dict(params) if params else None, "timeout_s": timeout_s}
    header, _ = _POOL.ask(request, timeout_s + GRACE_S)
    if "error" in header:
        raise WorkerError(header["error"])
    return [tuple(pair) for pair in header["columns"]]


# --------------------------------------------------------------------------- the worker's side


def _serve(memory_limit: int) -> None:
    con = connect(f"{max(memory_limit >> 20, 64)}MB", threads=1, secret_directory="/nonexistent")
    mapped: dict[str, pa.Buffer] = {}
    opened: dict[tuple[str, int, int], Any] = {}
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer

    def table(ref: tuple[str, int, int]) -> Any:  # a Table, or a pyarrow Dataset scanned lazily
        if ref not in opened:
            path, offset, length = ref
            if path.endswith(".arrow") and offset == 0 and os.path.getsize(path) == length:
                # Uncompressed in a file of its own (a big table's decompressed copy, lib/data/unpacked.py, or a
                # table spilled from memory): mapped, zero-copy, and shared with every process mapping it.
                with pa.memory_map(path, "r") as source:
                    opened[ref] = pa.ipc.open_file(source.read_buffer()).read_all()
                return opened[ref]
            if offset == 0 and os.path.getsize(path) == length:
                # A table in a file of its own (the big ones, compressed): scanned lazily, so a
                # query decompresses only the columns it reads, a batch at a time (9x faster for
                # one column of 1M x 44 than decompressing the table, and memory stays one batch).
                import pyarrow.dataset as ds

                opened[ref] = ds.dataset(path, format="ipc")
                return opened[ref]
            if path not in mapped:
                with pa.memory_map(path, "r") as source:
                    mapped[path] = source.read_buffer()
            opened[ref] = pa.ipc.open_file(mapped[path], footer_offset=offset + length).read_all()
        return opened[ref]

    while True:
        raw = stdin.read(_FRAME.size)
        if len(raw) != _FRAME.size:
            return  # the parent went away
        request = pickle.loads(stdin.read(_FRAME.unpack(raw)[0]))  # from the parent process only
        header, payload = _answer(con, request, table)
        body = json.dumps(header).encode()
        stdout.write(_FRAME.pack(len(body)) + body + _FRAME.pack(len(payload)) + payload)
        stdout.flush()
        if len(opened) > 256:
            opened.clear()
            mapped.clear()


def _answer(con, request: dict[str, Any], table) -> tuple[dict[str, Any], bytes]:
    import duckdb

    cursor = sandbox_cursor(connection=con)
    timer = threading.Timer(request["timeout_s"], cursor.interrupt)
    timer.start()
    try:
        for name, ref in request["tables"].items():
            cursor.register(name, table(tuple(ref)))
        relation = cursor.sql(request["sql"], params=request["params"])
        if request["kind"] == "bind":
            return {"columns": list(zip(relation.columns, map(str, relation.types)))}, b""
        max_rows = request["max_rows"]
        reader = relation.to_arrow_reader(min(max_rows + 1, 100_000))
        batches, count = [], 0
        for batch in reader:
            batches.append(batch)
            count += batch.num_rows
            if count > max_rows:
                break
        result = pa.Table.from_batches(batches, schema=reader.schema) if batches else reader.schema.empty_table()
        truncated = result.num_rows > max_rows
        if truncated:
            result = result.slice(0, max_rows)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, result.schema) as writer:
            writer.write_table(result)
        return {"truncated": truncated}, sink.getvalue().to_pybytes()
    except duckdb.InterruptException:
        return {"error": f"query took longer than {request['timeout_s']:g} s and was stopped"}, b""
    except duckdb.OutOfMemoryException:
        return {"error": "the query needed more memory than allowed and was stopped"}, b""
    except duckdb.Error as exc:
        if timer.finished.is_set() and "interrupt" in str(exc).lower():
            return {"error": f"query took longer than {request['timeout_s']:g} s and was stopped"}, b""
        # All of it (the parent translates it for a person, lib.data.sql_errors, and logs it), within a bound.
        text = str(exc).strip()[:ERROR_CHARS]
        return {"error": text or type(exc).__name__}, b""
    except (OSError, pa.ArrowInvalid) as exc:
        return {"error": f"the data could not be read ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"}, b""
    finally:
        timer.cancel()
        cursor.close()


if __name__ == "__main__":
    _serve(int(sys.argv[1]))
