"""A 10-component dashboard live on a 10M-row table in Spark (Spark Connect) and in PostgreSQL, each against the
engine's own time for the same statements.

    python -m bench.live --engine spark [--rows 10000000] [--repeat 5]

Needs Java 17 and the Spark Connect server of `make spark` (tests/helpers/spark.py starts it on a free loopback
port, UI off, and stops it by PID at the end), and PostgreSQL on 127.0.0.1:5432 (a database of the bench's own,
created and dropped here). The same `orders` rows are generated inside each engine (no row passes through Python).
One config repo holds a live workspace per engine with the same dashboard (a region filter, four KPIs, four charts,
two tables). Each run is a fresh process, as a user opening the dashboard on an app server that has drawn pages
before (the modules and the Spark Connect client imported, a two-row dashboard drawn; printed apart):

- refresh: what Refresh costs on a live source, the catalogue call (and connecting); no row is copied;
- first render: every query goes to the engine; the statements and parameters it sent are recorded;
- the engine itself: those exact statements and parameters on a bare connection of the engine's own client
  (pyspark's `spark.sql(text, args)` + `toArrow()`, psycopg2's execute + fetch), one after another.

"peak MB" is the run's peak RSS (VmHWM). Medians of --repeat runs, app and engine taking turns.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from .common import ROOT, print_table
from .live import CATEGORIES, ENGINE_URL, REGIONS, URL, create_orders_table, database_seconds, differing, peak_mb, warm_up

GOAL = "Spark, 10M rows: first render <= 1.5x Spark's own time for the same statements; app peak memory < 300 MB; refresh (metadata only) < 1 s"
WHERE = "WHERE ($region IS NULL OR list_contains($region, region))"
DASHBOARD = {
    "title": "Orders",
    "filters": [{"id": "region", "type": "multiselect", "label": "Regions", "options_query": "SELECT DISTINCT region FROM orders ORDER BY 1"}],
    "components": [
        {"id": "revenue", "type": "kpi", "title": "Revenue", "query": f"SELECT sum(revenue) AS value FROM orders {WHERE}", "format": ",.0f"},
        {"id": "units", "type": "kpi", "title": "Units", "query": f"SELECT sum(units) AS value FROM orders {WHERE}", "format": ",.0f"},
        {"id": "orders", "type": "kpi", "title": "Orders", "query": f"SELECT count(*) AS value FROM orders {WHERE}", "format": ",.0f"},
        {"id": "discount", "type": "kpi", "title": "Average discount", "query": f"SELECT avg(discount) AS value FROM orders {WHERE}", "format": ".1%"},
        {
            "id": "by_category",
            "type": "chart",
            "title": "Revenue by category",
            "mark": "bar",
            "query": f"SELECT category, sum(revenue) AS revenue FROM orders {WHERE} GROUP BY category ORDER BY category",
            "encoding": {"x": {"field": "category", "type": "nominal"}, "y": {"field": "revenue", "type": "quantitative"}},
        },
        {
            "id": "by_region",
            "type": "chart",
            "title": "Orders by region",
            "mark": "bar",
            "query": f"SELECT region, count(*) AS orders FROM orders {WHERE} GROUP BY region ORDER BY region",
            "encoding": {"x": {"field": "region", "type": "nominal"}, "y": {"field": "orders", "type": "quantitative"}},
        },
        {
            "id": "monthly",
            "type": "chart",
            "title": "Revenue by month",
            "mark": "line",
            "query": f"SELECT date_trunc('month', order_date) AS month, sum(revenue) AS revenue FROM orders {WHERE} GROUP BY 1 ORDER BY 1",
            "encoding": {"x": {"field": "month", "type": "temporal"}, "y": {"field": "revenue", "type": "quantitative"}},
        },
        {
            "id": "units_mix",
            "type": "chart",
            "title": "Orders by units",
            "mark": "bar",
            "query": f"SELECT units, count(*) AS orders FROM orders {WHERE} GROUP BY units ORDER BY units",
            "encoding": {"x": {"field": "units", "type": "ordinal"}, "y": {"field": "orders", "type": "quantitative"}},
        },
        {
            "id": "top_orders",
            "type": "table",
            "title": "Largest orders",
            "query": f"SELECT order_id, order_date, region, category, units, revenue FROM orders {WHERE} ORDER BY revenue DESC, order_id LIMIT 50",
        },
        {
            "id": "category_region",
            "type": "table",
            "title": "Category by region",
            "query": f"SELECT category, region, count(*) AS orders, sum(revenue) AS revenue FROM orders {WHERE} GROUP BY category, region ORDER BY category, region",
        },
    ],
}
APP_MODULES = ("pandas", "pyarrow", "duckdb", "sqlglot", "sqlglot.dialects.spark", "sqlglot.dialects.postgres", "psycopg2", "sqlalchemy.dialects.postgresql")


def create_spark_orders(spark, rows: int) -> None:
    """bench.live's `orders` rows, generated inside Spark by the same formulas."""
    regions = ", ".join(f"'{r}'" for r in REGIONS)
    categories = ", ".join(f"'{c}'" for c in CATEGORIES)
    spark.sql("DROP TABLE IF EXISTS orders")
    spark.sql(f"""
        CREATE TABLE orders USING parquet AS
        SELECT g AS order_id,
               date_add(DATE'2025-01-01', CAST((g * 7919) % 730 AS INT)) AS order_date,
               element_at(array({regions}), CAST((g * 31) % 5 + 1 AS INT)) AS region,
               element_at(array({categories}), CAST((g * 17 + g DIV 1000) % 8 + 1 AS INT)) AS category,
               CAST(1 + (g * 48271) % 20 AS INT) AS units,
               CAST((g * 2654435761) % 100000 AS DOUBLE) / 100.0 AS price,
               CAST((g * 40503) % 30 AS DOUBLE) / 100.0 AS discount,
               (1 + (g * 48271) % 20) * (CAST((g * 2654435761) % 100000 AS DOUBLE) / 100.0) * (1 - CAST((g * 40503) % 30 AS DOUBLE) / 100.0) AS revenue
        FROM (SELECT id + 1 AS g FROM range({rows}))""")


# --------------------------------------------------------------------------- one run, in its own process


def child(folder: Path, cache_root: Path, engine: str) -> dict:
    import importlib

    from lib.artifacts.render import render
    from lib.data.connectors import spark_connect
    from lib.data.refresh import refresh
    from lib.data.snapshots import Warehouse
    from lib.memory import workspace
    from lib.roles.access import OPERATOR

    imported = time.perf_counter()
    for module in APP_MODULES:
        importlib.import_module(module)
    spark_connect._client()  # the app server holds the Spark Connect client once any Spark page was drawn
    warm_up()
    imports_s = time.perf_counter() - imported
    sent: list[list] = []
    if engine == "spark":
        asked = spark_connect.query

        def recording(source, text, args, **kw):
            sent.append([text, dict(args)])
            return asked(source, text, args, **kw)

        spark_connect.query = recording
    else:
        import sqlalchemy as sa
        from sqlalchemy import event

        def record(conn, cursor, statement, parameters, context, executemany):
            if "dm_bench_" in statement:
                sent.append([statement, parameters])

        event.listen(sa.engine.Engine, "after_cursor_execute", record)
    wh = Warehouse.for_workspace(folder, cache_root)
    started = time.perf_counter()
    report = refresh(folder, wh, user=OPERATOR)
    refresh_s = time.perf_counter() - started
    if not report.ok:
        raise SystemExit(report.summary())
    ws, _ = workspace.load(folder)
    snapshot = wh.current()
    assert snapshot is not None
    started = time.perf_counter()
    rendered = render(ws.data, wh.tables(snapshot), snapshot.id)
    render_s = time.perf_counter() - started
    errors = [f"{c.id}: {c.error}" for c in rendered.components if c.error] + [f"{f.id}: {f.error}" for f in rendered.filters if f.error]
    results = {
        c.id: [[v if isinstance(v, (int, float)) else str(v) for v in row] for row in c.result.rows] for c in rendered.components if c.result is not None
    }
    return {
        "render_s": render_s,
        "refresh_s": refresh_s,
        "imports_s": imports_s,
        "peak_mb": peak_mb(),
        "errors": errors,
        "results": results,
        "statements": sent,
    }


def run_child(folder: Path, cache_root: Path, engine: str, env: dict[str, str]) -> dict:
    command = [sys.executable, "-m", "bench.live_spark", "--child", engine, str(folder), str(cache_root)]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode:
        raise SystemExit(f"the {engine} run failed:\n{done.stderr[-3000:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    if out["errors"]:
        raise SystemExit(f"the {engine} render reported errors: {out['errors']}")
    return out


def spark_seconds(spark, statements: list[list]) -> float:
    start = time.perf_counter()
    for text, args in statements:
        spark.sql(text, args=args or None).toArrow()
    return time.perf_counter() - start


# --------------------------------------------------------------------------- the comparison


def make_config_repo(tmp: Path, spark_url: str, pg_url: str, pg_table: str) -> tuple[dict[str, str], dict[str, Path]]:
    import os

    import git

    from lib.memory import workspace
    from lib.repo.configrepo import ConfigRepo

    env = {"DASHMEM_CONFIG_REPO": str(tmp / "config-repo"), "DASHMEM_CACHE_DIR": str(tmp / "cache")}
    os.environ.update(env)
    repo = ConfigRepo.open_or_create(tmp / "config-repo", ROOT / "workspaces")
    sources = {
        "spark": {"name": "orders", "type": "sql", "url": spark_url, "table": "orders", "mode": "live"},
        "postgresql": {"name": "orders", "type": "sql", "url": pg_url, "table": pg_table, "mode": "live"},
    }
    for engine, source in sources.items():
        meta = workspace.blank(f"Orders ({engine})", "olivia", "2026-12-01")["workspace"]
        meta["access"]["viewers"] = ["*"]
        workspace.save(repo.path / f"orders-{engine}", {"workspace": meta, "sources": {"sources": [source]}, "dashboard": DASHBOARD})
    git.Repo(repo.path).git.add("--all")
    git.Repo(repo.path).git.commit("-q", "-m", "bench workspaces")
    return {**os.environ, **env, "PYTHONPATH": str(ROOT)}, {engine: repo.published_path(f"orders-{engine}") for engine in sources}


def main(rows: int, repeat: int) -> None:
    import sqlalchemy as sa

    from lib.data.connectors import spark_connect
    from tests.helpers import spark as spark_helper

    why = spark_helper.missing()
    if why:
        raise SystemExit(f"cannot start a Spark Connect server: {why}")
    if repeat < 5:
        print(f"note: --repeat {repeat} is below the 5 runs the figures below should be medians of")
    database = f"dm_bench_spark_{uuid.uuid4().hex[:8]}"  # the bench's own PostgreSQL database, never the tests'
    admin = sa.create_engine(ENGINE_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.exec_driver_sql(f"CREATE DATABASE {database}")
    pg_url, pg_engine_url = URL.rsplit("/", 1)[0] + f"/{database}", ENGINE_URL.rsplit("/", 1)[0] + f"/{database}"
    with tempfile.TemporaryDirectory(prefix="dm-bench-spark-") as tmp:
        server = spark_helper.Server(Path(tmp))
        try:
            started = time.perf_counter()
            server.wait_until_serving()
            up_s = time.perf_counter() - started
            spark = spark_connect.connect(server.url)
            started = time.perf_counter()
            create_spark_orders(spark, rows)
            spark_made = time.perf_counter() - started
            pg = sa.create_engine(pg_engine_url)
            started = time.perf_counter()
            with pg.begin() as connection:
                create_orders_table(connection, "dm_bench_orders", rows)
            pg_made = time.perf_counter() - started
            pg.dispose()
            print(f"{rows:,} rows: Spark Connect server up in {up_s:.0f} s; table made in Spark in {spark_made:.0f} s, in PostgreSQL in {pg_made:.0f} s")
            env, folders = make_config_repo(Path(tmp), server.url, pg_url, "dm_bench_orders")
            runs: dict[str, list[dict]] = {"spark": [], "postgresql": []}
            floors: dict[str, list[float]] = {"spark": [], "postgresql": []}
            for n in range(repeat):
                for engine in ("spark", "postgresql"):
                    run = run_child(folders[engine], Path(tmp) / f"cache-{engine}-{n}", engine, env)
                    runs[engine].append(run)
                    floors[engine].append(spark_seconds(spark, run["statements"]) if engine == "spark" else database_seconds(run["statements"], database))
            differ = differing(runs["spark"][0]["results"], runs["postgresql"][0]["results"])
            if differ:
                raise SystemExit(f"Spark and PostgreSQL disagree in {differ}")
        finally:
            server.stop()
            admin.dispose()
            admin = sa.create_engine(ENGINE_URL, isolation_level="AUTOCOMMIT")
            with admin.connect() as connection:
                connection.exec_driver_sql(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
            admin.dispose()

    def med(engine: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[engine])

    table = []
    for engine, label in (("spark", "Spark"), ("postgresql", "PostgreSQL")):
        floor = statistics.median(floors[engine])
        statements = len(runs[engine][0]["statements"])
        table.append([label, f"the engine: the same {statements} statements, its own client", f"{floor:.3f}", "1.00x", "-", repeat])
        table.append(
            [
                label,
                "first render (fresh process)",
                f"{med(engine, 'render_s'):.3f}",
                f"{med(engine, 'render_s') / floor:.2f}x",
                f"{med(engine, 'peak_mb'):.0f}",
                repeat,
            ]
        )
        table.append([label, "refresh: the catalogue, no rows", f"{med(engine, 'refresh_s'):.3f}", "-", "-", repeat])
    print(
        f"\nmedians of {repeat} runs, each a fresh process; getting a process where a running app server is took {med('spark', 'imports_s'):.2f} s (not in the times)\n"
    )
    print_table(["engine", "what", "seconds", "/ engine", "peak MB", "runs"], table)
    ratio = med("spark", "render_s") / statistics.median(floors["spark"])
    memory, refresh_s = med("spark", "peak_mb"), med("spark", "refresh_s")
    print(f"\ngoal: {GOAL}")
    print(
        f"  measured: {ratio:.2f}x ({'met' if ratio <= 1.5 else 'NOT met'}); {memory:.0f} MB ({'met' if memory < 300 else 'NOT met'}); "
        f"refresh {refresh_s:.2f} s ({'met' if refresh_s < 1 else 'NOT met'})"
    )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(child(Path(sys.argv[3]), Path(sys.argv[4]), sys.argv[2]), default=str))
    else:
        import argparse

        parser = argparse.ArgumentParser(description="python -m bench.live --engine spark: " + (__doc__ or "").split("\n\n")[0])
        parser.add_argument("--rows", type=int, default=10_000_000)
        parser.add_argument("--repeat", type=int, default=5)
        args = parser.parse_args()
        main(args.rows, args.repeat)
