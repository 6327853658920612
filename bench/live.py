"""Live mode against snapshot mode and the database itself, on a generated PostgreSQL table of 1M and 5M rows.

    python -m bench.live [--sizes 1000000,5000000] [--repeat 5] [--big]     (PostgreSQL on 127.0.0.1:5432)
    python -m bench.live --engine spark [--rows 10000000] [--repeat 5]      (Spark Connect beside PostgreSQL: bench.live_spark)

The table (an order date, region and category, units, price, discount, revenue) is generated inside
PostgreSQL with generate_series. One config repo holds two workspaces with the same dashboard (a region
filter, a KPI, a chart, a filtered table) over the same table: `mode: live` and `mode: snapshot`. Each run
is a fresh process, as a user opening the dashboard:

- live: load the published workspace and its warehouse, first render (every query goes to PostgreSQL);
- snapshot: refresh (pull the rows, profile, write the snapshot: the same work a user pays before
  seeing the data) and first render over the snapshot;
- database: the exact statements and parameters the live render sent (its LIMITs included), run
  through a new psycopg2 connection, execute + fetch timed; the floor any live render pays.

The clock starts once the process is where the app's long-running server is after any page: the
modules it holds imported (pandas, altair, sqlglot, the driver) and a two-row dashboard drawn once
(chart schemas loaded, query workers started); that is printed apart. Everything of the workspace is
cold: its engine, connection, snapshot files, and no result cached.
Times are medians of --repeat runs, the three taking turns run by run. "peak MB" is the process's
peak RSS: VmHWM, which is what ru_maxrss of the child reports minus what Linux carries across exec
from the parent (see bench.sql). The snapshot side runs fewer times when one run is very slow; the
output says so. `--big` adds 20M rows when the disk has room for it.
The generated tables are dropped at the end, whatever happens.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from .common import ROOT, print_table

URL = "postgresql://postgres@127.0.0.1:5432/test"
ENGINE_URL = "postgresql+psycopg2://postgres@127.0.0.1:5432/test"
LIVE_SLUG, SNAPSHOT_SLUG = "live-bench", "snapshot-bench"
SLOW_SNAPSHOT_S = 60.0  # a snapshot run slower than this at one size makes the remaining runs at that size 3 in all
BIG = 20_000_000
BIG_BYTES_NEEDED = 12 * 2**30  # the 20M table in PostgreSQL (~1.6 GB) plus a snapshot and headroom
GOAL_5M = "live at 5M rows: app peak memory < 300 MB; first render <= 2x the database's own execution time of the same queries"
GOAL_FLAT = "memory stays flat as rows grow in live mode"
# Already imported in the app's long-running server process (Streamlit draws with altair and pandas; sqlglot and
# the driver after the first live query), so a user's first render does not pay for them; the process does.
APP_MODULES = (
    "pandas",
    "altair",
    "pyarrow",
    "duckdb",
    "sqlglot",
    "sqlglot.dialects.postgres",
    "sqlglot.dialects.duckdb",
    "psycopg2",
    "sqlalchemy.dialects.postgresql",
)
REGIONS = ["North", "South", "East", "West", "Central"]
CATEGORIES = ["Furniture", "Office", "Technology", "Garden", "Toys", "Books", "Food", "Sports"]

WHERE = "WHERE ($region IS NULL OR list_contains($region, region))"
DASHBOARD = {
    "title": "Orders",
    "filters": [{"id": "region", "type": "multiselect", "label": "Regions", "options_query": "SELECT DISTINCT region FROM orders ORDER BY 1"}],
    "components": [
        {
            "id": "revenue",
            "type": "kpi",
            "title": "Revenue",
            "query": f"SELECT sum(revenue) AS value, sum(units) AS units FROM orders {WHERE}",
            "format": ",.0f",
        },
        {
            "id": "by_category",
            "type": "chart",
            "title": "Revenue by category",
            "mark": "bar",
            "query": f"SELECT category, sum(revenue) AS revenue, count(*) AS orders FROM orders {WHERE} GROUP BY category ORDER BY category",
            "encoding": {"x": {"field": "category", "type": "nominal"}, "y": {"field": "revenue", "type": "quantitative"}},
        },
        {
            "id": "top_orders",
            "type": "table",
            "title": "Largest orders",
            "query": f"SELECT order_id, order_date, region, category, units, revenue FROM orders {WHERE} ORDER BY revenue DESC, order_id LIMIT 50",
        },
    ],
}


def create_orders_table(connection, name: str, rows: int) -> None:
    """`rows` orders generated in the database (no row passes through Python); deterministic, spread like real data.

    UNLOGGED: the table is dropped at the end, so writing it twice (WAL) would only slow the setup; it reads the same.
    """
    regions = ",".join(f"'{r}'" for r in REGIONS)
    categories = ",".join(f"'{c}'" for c in CATEGORIES)
    connection.exec_driver_sql(f"""
        CREATE UNLOGGED TABLE {name} AS
        SELECT g AS order_id,
               DATE '2025-01-01' + ((g * 7919) %% 730)::int AS order_date,
               (ARRAY[{regions}])[(g * 31) %% 5 + 1] AS region,
               (ARRAY[{categories}])[(g * 17 + g / 1000) %% 8 + 1] AS category,
               (1 + (g * 48271) %% 20)::int AS units,
               ((g * 2654435761) %% 100000) / 100.0::double precision AS price,
               ((g * 40503) %% 30) / 100.0::double precision AS discount,
               (1 + (g * 48271) %% 20) * (((g * 2654435761) %% 100000) / 100.0::double precision) * (1 - ((g * 40503) %% 30) / 100.0::double precision) AS revenue
        FROM generate_series(1::bigint, {rows}) g""")
    connection.exec_driver_sql(f"ANALYZE {name}")


# --------------------------------------------------------------------------- one run, in its own process


def peak_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("VmHWM not in /proc/self/status")


def warm_up() -> None:
    """What a server that has drawn any dashboard before holds: chart schemas loaded, query workers started."""
    import datetime as dt

    import pyarrow as pa

    from lib.artifacts.render import QueryCache, render

    rows = pa.table(
        {
            "order_id": [1, 2],
            "order_date": [dt.date(2025, 1, 1)] * 2,
            "region": ["North", "South"],
            "category": ["Toys", "Food"],
            "units": [1, 2],
            "price": [1.0, 2.0],
            "discount": [0.0, 0.1],
            "revenue": [1.0, 3.6],
        }
    )
    rendered = render({"dashboard": DASHBOARD}, {"orders": rows}, "warm-up", cache=QueryCache())
    assert not [c.error for c in rendered.components if c.error], "the warm-up render failed"


def child(mode: str, folder: Path, cache_root: Path) -> dict:
    """One cold open of the dashboard: the figures of this process only."""
    import sqlalchemy as sa
    from sqlalchemy import event

    from lib.artifacts.render import render
    from lib.data.refresh import refresh
    from lib.data.snapshots import Warehouse
    from lib.memory import workspace
    from lib.roles.access import OPERATOR

    sent: list[tuple[str, object]] = []
    received = [0]

    def record(conn, cursor, statement, parameters, context, executemany):
        sent.append((statement, parameters))
        if statement.lstrip().upper().startswith(("SELECT", "WITH")):
            received[0] += max(cursor.rowcount, 0)  # psycopg2's client-side cursor: the rows the server sent

    event.listen(sa.engine.Engine, "after_cursor_execute", record)
    # The app's server process holds these from its first page on; a user's first render does not import them.
    imported = time.perf_counter()
    for module in APP_MODULES:
        importlib.import_module(module)
    warm_up()
    imports_s = time.perf_counter() - imported
    started = time.perf_counter()
    refresh_s = 0.0
    wh = Warehouse.for_workspace(folder, cache_root)
    if mode == "snapshot":
        report = refresh(folder, wh, user=OPERATOR)
        if not report.ok:
            raise SystemExit(report.summary())
        refresh_s = time.perf_counter() - started
    ws, _ = workspace.load(folder)
    snapshot = wh.current()
    assert snapshot is not None
    rendered = render(ws.data, wh.tables(snapshot), snapshot.id)
    total = time.perf_counter() - started
    errors = [f"{c.id}: {c.error}" for c in rendered.components if c.error] + [f"{f.id}: {f.error}" for f in rendered.filters if f.error]
    results = {
        c.id: [[v if isinstance(v, (int, float)) else str(v) for v in row] for row in c.result.rows] for c in rendered.components if c.result is not None
    }
    return {
        "seconds": total,
        "refresh_s": refresh_s,
        "imports_s": imports_s,
        "peak_mb": peak_mb(),
        "errors": errors,
        "results": results,
        "statements": [[s, p] for s, p in sent if "dm_bench_live" in s],
        "rows_received": received[0],
    }


def differing(got: dict[str, list], expected: dict[str, list]) -> list[str]:
    """The components whose results differ; sums of doubles may differ in the last digits (another order of addition)."""

    def same(x: object, y: object) -> bool:
        if isinstance(x, float) or isinstance(y, float):
            return isinstance(x, (int, float)) and isinstance(y, (int, float)) and math.isclose(x, y, rel_tol=1e-9)
        return x == y

    return sorted(
        key
        for key in got.keys() | expected.keys()
        if len(got.get(key, [])) != len(expected.get(key, []))
        or not all(len(a) == len(b) and all(same(x, y) for x, y in zip(a, b)) for a, b in zip(got[key], expected[key]))
    )


def run_child(mode: str, folder: Path, cache_root: Path, env: dict[str, str]) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "bench.live", "--child", mode, "--folder", str(folder), "--cache", str(cache_root)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if done.returncode:
        raise SystemExit(f"the {mode} run failed:\n{done.stderr[-3000:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    if out["errors"]:
        raise SystemExit(f"the {mode} render reported errors: {out['errors']}")
    return out


def database_seconds(statements: list[list], database: str = "test") -> float:
    """The live render's own statements through a bare psycopg2 connection: execute + fetch, connecting not timed."""
    import psycopg2

    connection = psycopg2.connect(host="127.0.0.1", port=5432, user="postgres", dbname=database)
    try:
        cursor = connection.cursor()
        start = time.perf_counter()
        for statement, params in statements:
            cursor.execute(statement, params)
            cursor.fetchall()
        seconds = time.perf_counter() - start
        connection.rollback()
        return seconds
    finally:
        connection.close()


# --------------------------------------------------------------------------- the workspaces, through the project's own APIs


def make_config_repo(tmp: Path, table: str) -> tuple[dict[str, str], Path, Path]:
    """A config repo with the live and the snapshot workspace over `table`; the live one refreshed (its catalogue)."""
    import git

    from lib.data.refresh import refresh
    from lib.data.snapshots import Warehouse
    from lib.memory import workspace
    from lib.repo.configrepo import ConfigRepo
    from lib.roles.access import OPERATOR

    env = {"DASHMEM_CONFIG_REPO": str(tmp / "config-repo"), "DASHMEM_CACHE_DIR": str(tmp / "cache")}
    os.environ.update(env)
    repo = ConfigRepo.open_or_create(tmp / "config-repo", ROOT / "workspaces")
    for slug, mode in ((LIVE_SLUG, "live"), (SNAPSHOT_SLUG, "snapshot")):
        meta = workspace.blank(f"Orders ({mode})", "olivia", "2026-12-01")["workspace"]
        meta["access"]["viewers"] = ["*"]
        source = {"name": "orders", "type": "sql", "url": URL, "table": table, "mode": mode}
        workspace.save(repo.path / slug, {"workspace": meta, "sources": {"sources": [source]}, "dashboard": DASHBOARD})
    git.Repo(repo.path).git.add("--all")
    git.Repo(repo.path).git.commit("-q", "-m", "bench workspaces")
    live_folder, snapshot_folder = repo.published_path(LIVE_SLUG), repo.published_path(SNAPSHOT_SLUG)
    report = refresh(live_folder, Warehouse.for_workspace(live_folder, tmp / "cache"), user=OPERATOR)
    if not report.ok:
        raise SystemExit(report.summary())
    return {**os.environ, **env, "PYTHONPATH": str(ROOT)}, live_folder, snapshot_folder


# --------------------------------------------------------------------------- the comparison


def measure(engine, rows: int, repeat: int) -> dict:
    name = f"dm_bench_live_{uuid.uuid4().hex[:8]}"
    made = time.perf_counter()
    with engine.begin() as connection:
        create_orders_table(connection, name, rows)
    made = time.perf_counter() - made
    try:
        with tempfile.TemporaryDirectory(prefix="dm-bench-live-") as tmp:
            env, live_folder, snapshot_folder = make_config_repo(Path(tmp), name)
            live_runs, snapshot_runs, database_runs = [], [], []
            snapshot_target = repeat
            for n in range(repeat):
                live_runs.append(run_child("live", live_folder, Path(tmp) / "cache", env))
                if n < snapshot_target:
                    fresh = Path(tmp) / f"snapshot-cache-{n}"  # each run pulls the rows again, as a first refresh does
                    snapshot_runs.append(run_child("snapshot", snapshot_folder, fresh, env))
                    shutil.rmtree(fresh, ignore_errors=True)
                    if snapshot_runs[-1]["seconds"] > SLOW_SNAPSHOT_S:
                        snapshot_target = min(repeat, 3)
                database_runs.append(database_seconds(live_runs[-1]["statements"]))
            differ = differing(live_runs[0]["results"], snapshot_runs[0]["results"])
            if differ:
                raise SystemExit(f"at {rows:,} rows the live and the snapshot dashboard disagree in {differ}")
    finally:
        with engine.begin() as connection:
            connection.exec_driver_sql(f"DROP TABLE IF EXISTS {name}")

    def med(runs: list[dict], key: str) -> float:
        return statistics.median(r[key] for r in runs)

    return {
        "rows": rows,
        "made_s": made,
        "database_s": statistics.median(database_runs),
        "live_s": med(live_runs, "seconds"),
        "live_mb": med(live_runs, "peak_mb"),
        "imports_s": med(live_runs, "imports_s"),
        "live_received": live_runs[0]["rows_received"],
        "live_statements": len(live_runs[0]["statements"]),
        "snapshot_s": med(snapshot_runs, "seconds"),
        "snapshot_refresh_s": med(snapshot_runs, "refresh_s"),
        "snapshot_mb": med(snapshot_runs, "peak_mb"),
        "runs": repeat,
        "snapshot_runs": len(snapshot_runs),
    }


def disk_room() -> int:
    return shutil.disk_usage(ROOT).free


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--sizes", default="1000000,5000000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--big", action="store_true", help="add 20M rows, if the disk has room")
    parser.add_argument(
        "--engine", choices=("postgresql", "spark"), default="postgresql", help="spark: bench.live_spark, 10 components over --rows in Spark and PostgreSQL"
    )
    parser.add_argument("--rows", type=int, default=10_000_000, help="with --engine spark: the table's rows")
    parser.add_argument("--child", choices=("live", "snapshot"), help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--cache", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.folder, args.cache), default=str))
        return
    if args.engine == "spark":  # bench.live_spark builds on this module's table and helpers; it runs as its own process
        os.execv(sys.executable, [sys.executable, "-m", "bench.live_spark", "--rows", str(args.rows), "--repeat", str(args.repeat)])
    if args.repeat < 5:
        print(f"note: --repeat {args.repeat} is below the 5 runs the figures below should be medians of")
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    notes = []
    if args.big:
        if disk_room() >= BIG_BYTES_NEEDED:
            sizes.append(BIG)
        else:
            notes.append(f"20M rows skipped: {disk_room() / 2**30:.1f} GB free, {BIG_BYTES_NEEDED / 2**30:.0f} GB wanted")

    import sqlalchemy as sa
    from sqlalchemy.exc import OperationalError

    engine = sa.create_engine(ENGINE_URL)
    try:
        with engine.connect() as connection:
            connection.exec_driver_sql("SELECT 1")
    except OperationalError as exc:
        raise SystemExit(f"PostgreSQL not reachable at {ENGINE_URL}: {str(exc).splitlines()[0]}") from None
    figures = []
    for rows in sizes:
        found = measure(engine, rows, args.repeat)
        figures.append(found)
        print(
            f"{rows:,} rows: table generated in PostgreSQL in {found['made_s']:.1f} s; live sent {found['live_statements']} queries and received "
            f"{found['live_received']} rows; getting the process where a running app server is took {found['imports_s']:.2f} s (not in the times)"
        )
        if found["snapshot_runs"] < found["runs"]:
            notes.append(f"snapshot at {rows:,} rows: {found['snapshot_runs']} runs, not {found['runs']} (over {SLOW_SNAPSHOT_S:.0f} s a run)")
    engine.dispose()

    table = []
    for f in figures:
        db = f["database_s"]
        table.append([f"{f['rows']:,}", "database: the same SQL through psycopg2", f"{db:.3f}", "1.00x", "-", f["runs"]])
        table.append([f"{f['rows']:,}", "live: first render", f"{f['live_s']:.3f}", f"{f['live_s'] / db:.2f}x", f"{f['live_mb']:.0f}", f["runs"]])
        table.append(
            [
                f"{f['rows']:,}",
                f"snapshot: refresh ({f['snapshot_refresh_s']:.1f} s) + first render",
                f"{f['snapshot_s']:.3f}",
                f"{f['snapshot_s'] / db:.2f}x",
                f"{f['snapshot_mb']:.0f}",
                f["snapshot_runs"],
            ]
        )
    print("\nmedians, each run a fresh process, the three taking turns; ratios to the database's own time at the same size\n")
    print_table(["rows", "what", "seconds", "/ database", "peak MB", "runs"], table)
    print()
    at_5m = next((f for f in figures if f["rows"] == 5_000_000), None)
    if at_5m:
        memory_ok = at_5m["live_mb"] < 300
        ratio = at_5m["live_s"] / at_5m["database_s"]
        print(f"goal: {GOAL_5M}")
        print(
            f"  measured: {at_5m['live_mb']:.0f} MB ({'met' if memory_ok else 'NOT met'}); "
            f"{ratio:.2f}x the database's time ({'met' if ratio <= 2 else 'NOT met'}); snapshot mode {at_5m['snapshot_mb']:.0f} MB, "
            f"{at_5m['snapshot_s'] / at_5m['live_s']:.1f}x live's time"
        )
    if len(figures) > 1:
        low, high = figures[0], figures[-1]
        growth = high["live_mb"] / low["live_mb"]
        print(f"goal: {GOAL_FLAT}")
        print(
            f"  measured: live peak {low['live_mb']:.0f} MB at {low['rows']:,} rows, {high['live_mb']:.0f} MB at {high['rows']:,} ({growth:.2f}x for "
            f"{high['rows'] / low['rows']:.0f}x the rows; {'met' if growth < 1.1 else 'NOT met'}); snapshot {low['snapshot_mb']:.0f} MB -> {high['snapshot_mb']:.0f} MB"
        )
    for note in notes:
        print(f"note: {note}")


if __name__ == "__main__":
    main()
