"""Render time of a 10-component dashboard over a 1M-row table, cold and warm, beside DuckDB's own time.

    python -m bench.render [--rows N] [--repeat R] [--cron]

Cold: a new query cache (as after a refresh: every query runs). Warm: the
same data version and filters again (results come from the cache). Targets
(issue #4): under 1 s cold and under 0.2 s warm. The table is the generated
44-column table of bench.profile, loaded into a warehouse snapshot first.

DuckDB's floor (issue #28): the same 11 SQL statements (the filter's options
and every component's query, with the same parameter values) run by DuckDB
itself in this process, on every core, over the same Arrow table as read
from the snapshot, each result fetched as Arrow, one statement after another
as a script would. Goal: a cold render at most 1.3x that floor. Ours, beyond
the SQL, runs each query in a sandboxed worker process (time and memory
limits), builds the charts' specs and formats the figures; the ratio counts
all of it. Cold render and floor take turns run by run.

`--cron` times the cron path instead, as whole fresh processes: `python -m lib
export WS --html F` of that dashboard (the workspace refreshed once before, as
the scheduled refresh leaves it) against a fresh Python process in which
DuckDB runs the same 11 statements over the same table stored as a Parquet
file (zstd, what a script would keep). Goal (issue #28): at most 1.5x.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from .common import compile_checkout, print_table, wide_table_csv

WHERE = "WHERE ($cat IS NULL OR list_contains($cat, category_00))"
SPEC = {
    "title": "Wide table",
    "filters": [{"id": "cat", "type": "multiselect", "options_query": "SELECT DISTINCT category_00 FROM t ORDER BY 1"}],
    "components": [
        {"id": "k_rows", "type": "kpi", "title": "Rows", "query": f"SELECT count(*) AS value FROM t {WHERE}", "format": ",d"},
        {"id": "k_sum", "type": "kpi", "title": "Total", "query": f"SELECT sum(measure_00) AS value FROM t {WHERE}", "format": ",.0f"},
        {
            "id": "k_avg",
            "type": "kpi",
            "title": "Average",
            "query": f"SELECT avg(measure_01) AS value, avg(measure_02) AS previous FROM t {WHERE}",
            "compare_column": "previous",
            "format": ",.2f",
        },
        {
            "id": "trend",
            "type": "chart",
            "title": "Trend",
            "mark": "line",
            "query": f"SELECT date_trunc('month', date_0) AS month, sum(measure_00) AS total FROM t {WHERE} GROUP BY 1 ORDER BY 1",
            "encoding": {"x": {"field": "month", "type": "temporal"}, "y": {"field": "total", "type": "quantitative"}},
        },
        {
            "id": "by_cat",
            "type": "chart",
            "title": "By category",
            "mark": "bar",
            "query": f"SELECT category_03 AS cat3, sum(measure_03) AS total FROM t {WHERE} GROUP BY 1 ORDER BY 2 DESC LIMIT 15",
            "encoding": {"x": {"field": "cat3", "type": "nominal"}, "y": {"field": "total", "type": "quantitative"}},
        },
        {
            "id": "by_cat2",
            "type": "chart",
            "title": "Counts",
            "mark": "bar",
            "query": f"SELECT category_05 AS cat5, count(*) AS n FROM t {WHERE} GROUP BY 1 ORDER BY 2 DESC LIMIT 20",
            "encoding": {"x": {"field": "cat5", "type": "nominal"}, "y": {"field": "n", "type": "quantitative"}},
        },
        {
            "id": "scatter",
            "type": "chart",
            "title": "Two measures",
            "mark": "point",
            "query": f"SELECT category_07 AS c7, avg(measure_04) AS a, avg(measure_05) AS b FROM t {WHERE} GROUP BY 1",
            "encoding": {"x": {"field": "a", "type": "quantitative"}, "y": {"field": "b", "type": "quantitative"}},
        },
        {
            "id": "table",
            "type": "table",
            "title": "Top customers",
            "max_rows": 20,
            "query": f"SELECT customer_id, sum(measure_00) AS total, count(*) AS orders FROM t {WHERE} GROUP BY 1 ORDER BY 2 DESC LIMIT 20",
        },
        {
            "id": "mix",
            "type": "chart",
            "title": "Mix",
            "mark": "arc",
            "query": f"SELECT category_08 AS c8, sum(count_00) AS n FROM t {WHERE} GROUP BY 1",
            "encoding": {"theta": {"field": "n", "type": "quantitative"}, "color": {"field": "c8", "type": "nominal"}},
        },
        {
            "id": "text",
            "type": "text",
            "markdown": "Top category: **{{top.cat}}** with {{top.total|,.0f}}.",
            "queries": {"top": f"SELECT category_00 AS cat, sum(measure_00) AS total FROM t {WHERE} GROUP BY 1 ORDER BY 2 DESC LIMIT 1"},
        },
    ],
}


FLOOR_SCRIPT = r"""
import json, sys, duckdb
con = duckdb.connect()
con.sql("CREATE VIEW t AS SELECT * FROM read_parquet(" + json.dumps(sys.argv[1]).replace('"', "'") + ")")
for sql in json.loads(sys.argv[2]):
    con.sql(sql, params={"cat": None} if "$cat" in sql else None).to_arrow_table()
"""


def cron(rows: int, repeat: int) -> None:
    """A fresh `export --html` against a fresh DuckDB process running the same SQL over the table as Parquet."""
    import json
    import subprocess
    import sys

    import pyarrow.parquet as pq

    from lib.data.snapshots import Warehouse
    from lib.memory.spec import queries

    from .common import BENCH_SLUG, ROOT, bench_config_repo

    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, **bench_config_repo(Path(tmp), rows, SPEC), "PYTHONPATH": str(ROOT)}
        ws = Path(tmp) / "config-repo" / BENCH_SLUG
        parquet = Path(tmp) / "t.parquet"
        pq.write_table(Warehouse.for_workspace(ws).tables()["t"], parquet, compression="zstd")
        statements = json.dumps([sql for _, _, sql in queries(SPEC)])
        ours_cmd = [sys.executable, "-m", "lib", "export", str(ws), "--html", str(Path(tmp) / "out.html")]
        floor_cmd = [sys.executable, "-c", FLOOR_SCRIPT, str(parquet), statements]
        ours, floor = [], []
        for _ in range(repeat):
            for cmd, into in ((ours_cmd, ours), (floor_cmd, floor)):
                start = time.perf_counter()
                done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tmp)
                if done.returncode:
                    sys.exit(f"{cmd[2]} failed: {done.stderr or done.stdout}")
                into.append(time.perf_counter() - start)
        ratio = statistics.median(o / f for o, f in zip(ours, floor))
        print_table(
            ["rows", "export --html s", "DuckDB process s", "ratio", "goal <= 1.5x"],
            [[rows, round(statistics.median(ours), 3), round(statistics.median(floor), 3), f"{ratio:.2f}x", "met" if ratio <= 1.5 else "not met"]],
        )
        print(f"\nfresh processes, median of {repeat}, taking turns; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cron", action="store_true", help="fresh export --html processes against fresh DuckDB processes")
    args = parser.parse_args(argv)
    compile_checkout()
    if args.cron:
        cron(args.rows, args.repeat)
        return

    import duckdb

    from lib.artifacts.render import QueryCache, render
    from lib.data.connectors.base import FetchContext, fetch
    from lib.data.snapshots import Warehouse
    from lib.memory.spec import params_for, queries

    csv = wide_table_csv(args.rows)
    with tempfile.TemporaryDirectory() as tmp:
        wh = Warehouse(Path(tmp))
        wh.write_snapshot({"t": fetch({"name": "t", "type": "csv", "path": str(csv)}, FetchContext(workspace_path=csv.parent))})
        snapshot = wh.current()
        assert snapshot is not None
        tables, version = wh.tables(), snapshot.id
        files = {"dashboard": SPEC, "output": {"data_injection": {"mode": "queries_at_render"}}}
        rows = []
        statements = [sql for _, _, sql in queries(SPEC)]
        floor_db = duckdb.connect()
        floor_db.register("t", tables["t"])
        for label, chosen in (("no filter", {}), ("filtered", {"cat": ["cat0_1", "cat0_2"]})):
            cold, warm, floor = [], [], []
            values = {"cat": chosen.get("cat")}
            first = None
            for _ in range(args.repeat):
                start = time.perf_counter()
                for sql in statements:
                    floor_db.sql(sql, params=params_for(sql, values)).to_arrow_table()
                floor.append(time.perf_counter() - start)
                cache = QueryCache()
                start = time.perf_counter()
                first = render(files, tables, version, chosen, cache=cache)
                cold.append(time.perf_counter() - start)
                assert not first.errors, first.errors
                start = time.perf_counter()
                again = render(files, tables, version, chosen, cache=cache)
                warm.append(time.perf_counter() - start)
                assert again.queries_run == 0
            assert first is not None, "--repeat is at least 1"
            ratio = statistics.median(c / f for c, f in zip(cold, floor))
            rows.append(
                [
                    label,
                    len(SPEC["components"]),
                    first.queries_run,
                    round(statistics.median(cold), 3),
                    round(statistics.median(floor), 3),
                    f"{ratio:.2f}x",
                    "met" if ratio <= 1.3 else "not met",
                    round(statistics.median(warm), 4),
                    "yes" if statistics.median(cold) < 1 else "NO",
                    "yes" if statistics.median(warm) < 0.2 else "NO",
                ]
            )
    print_table(["case", "components", "queries (cold)", "cold s", "DuckDB s", "cold / DuckDB", "goal <= 1.3x", "warm s", "cold < 1 s", "warm < 0.2 s"], rows)
    print(
        f"\n{args.rows:,} rows x 44 columns; median of {args.repeat}; cold = new query cache, warm = same version and filters;"
        f" DuckDB = the same {len(statements)} statements run by DuckDB itself on {os.cpu_count()} cores (the ratio is the median of each run's pair)."
        f"\nload average {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
