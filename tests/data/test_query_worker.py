"""Hostile SQL: every sandboxed query ends within its time limit plus a second, with memory bounded,
and an innocent query in another session keeps answering during the attack.

DuckDB's interrupt does not stop one scalar call that builds a huge value, and its
memory limit does not cover it: these ran for up to a minute at 4 GB before queries
moved into worker processes that are killed (lib/data/query_worker.py). The bounds below
are the product's promise (limit + 1 s), checked with a margin for a busy machine.
"""

from __future__ import annotations

import os
import threading
import time

import pyarrow as pa
import pytest

from lib.data import query_worker, sandbox
from lib.data.queries import bind, run_query
from lib.data.sandbox import QueryError

pytestmark = pytest.mark.slow

LIMIT_S = 2.0
MARGIN_S = 8.0  # the machine is shared and noisy (6.2 s seen at load average 11, a new worker starting included):
# what is asserted is "stopped", not a benchmark; unstopped, these ran for up to a minute

ATTACKS = {
    "repeat": "SELECT length(repeat('x', 2000000000)) AS n",
    "lpad": "SELECT length(lpad('x', 2000000000, 'y')) AS n",
    "printf width": "SELECT length(printf('%2000000000d', 1)) AS n",
    "format width": "SELECT length(format('{:>2000000000}', 1)) AS n",
    "range list": "SELECT len(range(2000000000)) AS n",
    "list_resize": "SELECT len(list_resize([1], 2000000000)) AS n",
    "doubling CTE": "WITH RECURSIVE r(s, n) AS (SELECT 'x', 0 UNION ALL SELECT s || s, n + 1 FROM r WHERE n < 40) SELECT max(length(s)) FROM r",
    "10 GB string_agg": "SELECT length(string_agg(repeat('x', 10000), '')) FROM range(1000000)",
    "cross join": "SELECT count(*) FROM range(100000000) a, range(100000000) b WHERE a.range + b.range = 7",
}

TABLES = {"t": pa.table({"a": list(range(1000)), "b": [f"v{i % 7}" for i in range(1000)]})}


@pytest.fixture(autouse=True)
def small_memory(monkeypatch):
    monkeypatch.setenv("DASHMEM_QUERY_MEMORY", "512MB")
    query_worker._POOL.close()  # workers start again with this memory limit
    yield
    query_worker._POOL.close()


@pytest.mark.parametrize("name", list(ATTACKS))
def test_each_attack_is_stopped_within_its_limit(name):
    started = time.monotonic()
    with pytest.raises(QueryError, match="was stopped"):
        run_query(TABLES, ATTACKS[name], timeout_s=LIMIT_S)
    assert time.monotonic() - started < LIMIT_S + query_worker.GRACE_S + MARGIN_S
    # The service is still there for the next query.
    assert run_query(TABLES, "SELECT count(*) AS n FROM t").rows == [(1000,)]


def test_binding_a_query_that_folds_a_huge_constant_is_stopped_too(monkeypatch):
    monkeypatch.setattr(sandbox, "BIND_TIMEOUT_S", LIMIT_S)
    started = time.monotonic()
    with pytest.raises(QueryError, match="was stopped"):
        bind(TABLES, "SELECT length(repeat('x', 2000000000)) AS n, len(range(2000000000)) AS r FROM t")
    assert time.monotonic() - started < LIMIT_S + query_worker.GRACE_S + MARGIN_S


def test_an_innocent_query_keeps_answering_during_an_attack():
    attack_done = threading.Event()
    outcome = []

    def attack():
        try:
            run_query(TABLES, ATTACKS["repeat"], timeout_s=6.0)
        except QueryError as exc:
            outcome.append(str(exc))
        finally:
            attack_done.set()

    thread = threading.Thread(target=attack)
    thread.start()
    time.sleep(0.5)  # the attack is under way in its worker
    answers = [run_query(TABLES, "SELECT b, count(*) AS n FROM t GROUP BY b ORDER BY b").rows for _ in range(5)]
    still_attacking = not attack_done.is_set()
    thread.join()
    assert still_attacking, "the innocent queries should have been answered while the attack was still running"
    assert all(rows == answers[0] for rows in answers) and sum(n for _, n in answers[0]) == 1000
    assert outcome and "was stopped" in outcome[0]


def test_memory_is_bounded_per_query_and_the_app_process_does_not_grow():
    def rss() -> int:
        with open(f"/proc/{os.getpid()}/status", encoding="ascii") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) * 1024

    before = rss()
    with pytest.raises(QueryError, match="memory|was stopped"):
        run_query(TABLES, ATTACKS["repeat"], timeout_s=30.0)  # the memory cap, not the clock, stops this one
    assert rss() - before < 256 << 20


def test_the_sandbox_reveals_no_server_paths():
    rows = run_query(TABLES, "SELECT name, value FROM duckdb_settings()", max_rows=1000).rows
    cwd, home = os.getcwd(), os.path.expanduser("~")
    leaking = [(name, value) for name, value in rows if value and (cwd in value or (home != "/" and home in value))]
    assert not leaking, leaking


def test_queries_on_snapshot_tables_map_the_file_instead_of_copying(tmp_path):
    from lib.data.snapshots import Warehouse

    wh = Warehouse(tmp_path / "wh")
    wh.write_snapshot({"a": pa.table({"x": [1, 2, 3]}), "b": pa.table({"y": ["p", "q"]})})
    fresh = Warehouse(tmp_path / "wh")  # as another process would: opened from the file
    tables = fresh.tables()
    current, origin = fresh.current(), query_worker._origin(tables["b"])
    assert current is not None and origin is not None and origin[0] == str(current.path)
    spilled = set(query_worker._SPILL_DIR.glob("*.arrow")) if query_worker._SPILL_DIR else set()
    assert fresh.query("SELECT count(*) FROM a JOIN b ON true").rows == [(6,)]
    assert (set(query_worker._SPILL_DIR.glob("*.arrow")) if query_worker._SPILL_DIR else set()) == spilled


def test_query_workers_do_not_hold_the_apps_secrets(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-for-workers")
    monkeypatch.setenv("DASHMEM_COOKIE_KEY", "c" * 40)
    query_worker._POOL.close()
    assert run_query(TABLES, "SELECT 1 AS one").rows == [(1,)]
    worker = query_worker._POOL.idle[0]
    with open(f"/proc/{worker.proc.pid}/environ", "rb") as environ:
        names = {entry.split(b"=", 1)[0].decode() for entry in environ.read().split(b"\0") if entry}
    assert "ANTHROPIC_API_KEY" not in names and "DASHMEM_COOKIE_KEY" not in names and "PATH" in names


@pytest.fixture
def slow_start(monkeypatch):
    """Workers take half a second to be made, so a query or a close comes while they are starting; lists each made."""
    made: list[query_worker._Worker] = []
    real_init = query_worker._Worker.__init__

    def init(self):
        time.sleep(0.5)
        real_init(self)
        made.append(self)

    monkeypatch.setattr(query_worker._Worker, "__init__", init)
    return made


def test_workers_started_early_answer_the_first_queries_and_no_more_are_started(monkeypatch, slow_start):
    """`start_early` (the CLI's export, check, query...) starts workers beside the command's own work; a query that
    comes while they start waits for one instead of starting another, and calling it again, or asking for more than
    DASHMEM_QUERY_WORKERS, starts none beyond the limit."""
    monkeypatch.setenv("DASHMEM_QUERY_WORKERS", "2")
    query_worker.start_early(3)
    query_worker.start_early(1)
    assert query_worker._POOL.count == 2 and query_worker._POOL.starting == 2
    assert run_query(TABLES, "SELECT count(*) AS n FROM t").rows == [(1000,)]  # came while both were starting
    done = []
    threads = [threading.Thread(target=lambda: done.append(run_query(TABLES, "SELECT sum(a) AS s FROM t").rows)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert done == [[(499500,)]] * 4
    assert len(slow_start) == 2 and query_worker._POOL.count == 2
    assert {w.proc.pid for w in query_worker._POOL.idle} == {w.proc.pid for w in slow_start}


def test_workers_still_starting_when_the_pool_is_closed_are_stopped(slow_start):
    """A command that ends (or fails) before its early workers are up leaves none behind: closing the pool stops them."""
    query_worker.start_early(2)
    assert query_worker._POOL.starting == 2
    query_worker._POOL.close()
    deadline = time.monotonic() + 60
    while query_worker._POOL.starting and time.monotonic() < deadline:
        time.sleep(0.02)
    while any(w.proc.poll() is None for w in slow_start) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(slow_start) == 2 and all(w.proc.poll() is not None for w in slow_start)  # made after the close, then stopped
    assert query_worker._POOL.idle == [] and query_worker._POOL.count == 0
    assert run_query(TABLES, "SELECT 1 AS one").rows == [(1,)]  # the pool works on
