"""Incremental refresh against a full reload of the same PostgreSQL table.

    python -m bench.incremental [--rows N] [--new M] [--runs R]

A generated table of N rows in the local PostgreSQL (127.0.0.1:5432, db test,
user postgres). Two workspaces read it, one with `incremental: {cursor: id}`,
one without; each has its own snapshot cache. Each run inserts M rows, then
refreshes both (in turns, so neither always goes first): both end serving the
same N + k*M rows, checked. Warm (in this process, drivers loaded); the first
refresh of each, a full load on both sides, is not timed. Prints medians and
the full/incremental ratio.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from lib.data.refresh import refresh
from lib.data.snapshots import Warehouse
from lib.memory import workspace
from lib.roles.access import OPERATOR

ROOT = Path(__file__).resolve().parent.parent
PG = "postgresql://postgres@127.0.0.1:5432/test"
GOAL = "goal (issue #15): a refresh fetches only the rows past the last cursor; time should follow the new rows, not the table"


def _workspace(folder: Path, table: str, incremental: bool) -> None:
    shutil.copytree(ROOT / "workspaces" / "supply-chain-weekly", folder)
    shutil.rmtree(folder / "data")
    for name in ("dashboard.yaml", "profile.yaml"):
        (folder / name).unlink()
    source: dict[str, Any] = {"name": "events", "type": "sql", "url": PG, "table": table}
    if incremental:
        source["incremental"] = {"cursor": "id"}
    ws, _ = workspace.load(folder)
    ws.data["sources"] = {"sources": [source]}
    workspace.save(folder, ws.data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--new", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    engine = sa.create_engine("postgresql+psycopg2://postgres@127.0.0.1:5432/test")
    table = f"dm_bench_incr_{uuid.uuid4().hex[:8]}"
    insert = f"INSERT INTO {table} SELECT g, DATE '2026-01-01' + (g %% 365), 'site_' || (g %% 7), (g %% 1000) * 1.5 FROM generate_series(%(lo)s, %(hi)s) g"
    with engine.begin() as c:
        c.exec_driver_sql(f"CREATE TABLE {table} (id BIGINT, day DATE, site TEXT, amount DOUBLE PRECISION)")
        c.exec_driver_sql(insert, {"lo": 1, "hi": args.rows})
    tmp = Path(tempfile.mkdtemp(prefix="bench-incr-"))
    try:
        sides = {}
        for label, inc in (("incremental", True), ("full reload", False)):
            folder = tmp / label.replace(" ", "-")
            _workspace(folder, table, inc)
            sides[label] = (folder, Warehouse(tmp / f"cache-{inc}"))
            assert refresh(folder, sides[label][1], user=OPERATOR).ok  # the first load: full on both sides
        times: dict[str, list[float]] = {label: [] for label in sides}
        top = args.rows
        for run in range(args.runs):
            with engine.begin() as c:
                c.exec_driver_sql(insert, {"lo": top + 1, "hi": top + args.new})
            top += args.new
            order = list(sides) if run % 2 == 0 else list(reversed(sides))
            for label in order:
                folder, wh = sides[label]
                t0 = time.perf_counter()
                report = refresh(folder, wh, user=OPERATOR)
                times[label].append(time.perf_counter() - t0)
                assert report.ok and report.sources[0].rows_after == top, report.summary()
        inc, full = (statistics.median(times[k]) for k in ("incremental", "full reload"))
        print(f"rows {args.rows:,} + {args.new:,} new per refresh, {args.runs} runs, warm, medians")
        print(f"{'side':<14}{'median s':>10}{'rows fetched':>14}")
        print(f"{'incremental':<14}{inc:>10.3f}{args.new:>14,}")
        print(f"{'full reload':<14}{full:>10.3f}{top:>14,}")
        print(f"full / incremental: {full / inc:.1f}x")
        print(GOAL)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        with engine.begin() as c:
            c.exec_driver_sql(f"DROP TABLE IF EXISTS {table}")
        engine.dispose()


if __name__ == "__main__":
    main()
