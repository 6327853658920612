"""Live profile against snapshot profile: the same table in PostgreSQL profiled where it lives
(lib/data/live_profile.py, aggregates only) or pulled whole and profiled by profile.build.

Both sides produce the profile of the same rows; the snapshot side's time includes
pulling the rows (what a profile of a snapshot source costs when the data is new).
Run: python -m bench.live_profile [rows ...]   (default 1000000; PostgreSQL on 127.0.0.1:5432)
"""

from __future__ import annotations

import statistics
import sys
import time
import uuid
from pathlib import Path

from bench.common import print_table

URL = "postgresql://postgres@127.0.0.1:5432/test"
REPEAT = 5
GOAL = "goal (issue #15): live profile pulls no rows; app memory flat as rows grow"


def _make(engine, rows: int) -> str:
    name = f"dm_bench_lprof_{uuid.uuid4().hex[:8]}"
    with engine.begin() as c:
        c.exec_driver_sql(f"""CREATE TABLE {name} AS SELECT g AS id, (g * 7919) %% 1000 AS amount, ((g * 31) %% 997) / 10.0 AS price,
            DATE '2026-01-01' + (g %% 300)::int AS day, 'grade_' || floor(sqrt(g %% 400))::int AS grade, 'u' || g AS code_text
            FROM generate_series(1::bigint, {rows}) g""")
        c.exec_driver_sql(f"ANALYZE {name}")
    return name


def _seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(sizes: list[int]) -> None:
    import sqlalchemy as sa

    from lib.data import live, profile
    from lib.data.connectors import sql_source
    from lib.data.connectors.base import FetchContext

    engine = sa.create_engine("postgresql+psycopg2://postgres@127.0.0.1:5432/test")
    ctx = FetchContext(workspace_path=Path.cwd())
    out = []
    for rows in sizes:
        name = _make(engine, rows)
        try:
            source = {"name": "t", "type": "sql", "url": URL, "table": name, "mode": "live"}
            stand_in = live.catalogue_table(source, ctx)

            def pushed(stand_in=stand_in, source=source):
                return profile.build({"t": stand_in}, [source])

            def pulled(source=source):
                return profile.build({"t": sql_source.fetch({**source, "mode": "snapshot"}, ctx)}, [{**source, "mode": "snapshot"}])

            live_t, snap_t = [], []
            for _ in range(REPEAT):  # interleaved: the machine's load hits both sides alike
                live_t.append(_seconds(pushed))
                snap_t.append(_seconds(pulled))
            live_s, snap_s = statistics.median(live_t), statistics.median(snap_t)
            out.append([rows, f"{live_s:.2f}", f"{snap_s:.2f}", f"{snap_s / live_s:.2f}x"])
        finally:
            with engine.begin() as c:
                c.exec_driver_sql(f"DROP TABLE IF EXISTS {name}")
    print(f"medians of {REPEAT} runs, interleaved; {GOAL}")
    print_table(["rows", "live profile s", "pull + snapshot profile s", "snapshot / live"], out)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1_000_000])
