"""The `sql` connector's fetch beside `pandas.read_sql` and the driver floor, on SQLite, PostgreSQL and MariaDB.

    python -m bench.sql [--rows 500000] [--repeat 5] [--backends sqlite,postgresql,mariadb] [--query] [--keep]

One synthetic table of mixed types (integers with NULLs, doubles, NUMERIC(12,2),
short and long text with NULLs, dates, timestamps, booleans), the same rows in
each database. Every run is its own subprocess, so its peak RSS is its own:

- ours: `lib.data.connectors.base.fetch` of the table (engine, connect, query, pyarrow table; `--query` gives it
  the same `SELECT *` as a query instead, which keeps PostgreSQL on a client-side cursor);
- pandas: `pandas.read_sql` of `SELECT * FROM table` through a SQLAlchemy engine (engine, connect,
  query, DataFrame). That is less work than ours: it stops at a DataFrame of Python objects for
  decimals and dates, where ours converts every column to Arrow. So the same run also times
  `pa.Table.from_pandas` of that DataFrame, and "pandas+arrow" is the strictly equal work;
- floor: the bare DB-API driver, `cursor.execute` + `fetchall` (tuples, no columns at all).

Times are medians over --repeat runs, wall clock and the process's own CPU (user + system; the
database server's work is not in it, the driver's is); ratios are of wall times unless named cpu.
"peak MB" is the run's peak RSS and "+fetch MB" how far it rose above the RSS after imports. A server that does not answer is skipped, saying so.
The goal (issue part 6): SQL fetch within 1.3x of pandas.read_sql.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import io
import json
import random
import resource
import socket
import sqlite3
import statistics
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any, Callable

from .common import BENCH_CACHE, ROOT, print_table

GOAL = 1.3
SERVERS = {
    "postgresql": ("PostgreSQL", 5432, "postgresql+psycopg2://postgres@127.0.0.1:5432/test"),
    "mariadb": ("MariaDB", 3306, "mysql+pymysql://root@127.0.0.1:3306/test"),
}
COLUMNS = {
    "sqlite": "id INTEGER, qty INTEGER, price REAL, amount NUMERIC(12,2), category VARCHAR(20), note TEXT, day DATE, at TIMESTAMP, flag BOOLEAN",
    "postgresql": "id INTEGER, qty INTEGER, price DOUBLE PRECISION, amount NUMERIC(12,2), category VARCHAR(20), note TEXT, "
    "day DATE, at TIMESTAMP, flag BOOLEAN",
    "mariadb": "id INTEGER, qty INTEGER, price DOUBLE, amount DECIMAL(12,2), category VARCHAR(20), note TEXT, day DATE, at DATETIME, flag BOOLEAN",
}
METHODS = ("ours", "pandas", "floor")


def table_name(rows: int) -> str:
    return f"dm_bench_sql_{rows}"


def sqlite_path(rows: int) -> Path:
    return BENCH_CACHE / f"sql_{rows}.db"


def url_for(backend: str, rows: int) -> str:
    return f"sqlite:///{sqlite_path(rows)}" if backend == "sqlite" else SERVERS[backend][2]


def generate(rows: int) -> list[tuple]:
    """Deterministic rows: about 10 % NULL quantities, 20 % NULL notes, 200 categories, 4 years of days."""
    rng = random.Random(42)
    words = ["alpha", "beta", "gamma", "delta", "omega", "north", "south", "late", "early", "damaged"]
    start = dt.datetime(2021, 1, 1)
    out = []
    for i in range(rows):
        at = start + dt.timedelta(seconds=rng.randrange(4 * 365 * 86400))
        out.append(
            (
                i,
                None if rng.random() < 0.1 else rng.randrange(1, 500),
                round(rng.lognormvariate(3, 1), 6),
                f"{rng.randrange(0, 10_000_000) / 100:.2f}",
                f"cat_{rng.randrange(200)}",
                None if rng.random() < 0.2 else " ".join(rng.choice(words) for _ in range(rng.randrange(2, 8))),
                at.date().isoformat(),
                at.isoformat(sep=" "),
                rng.random() < 0.5,
            )
        )
    return out


def reachable(backend: str) -> str | None:
    """None if the backend can be used, else why not."""
    if backend == "sqlite":
        return None
    label, port, url = SERVERS[backend]
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        import sqlalchemy as sa

        engine = sa.create_engine(url, connect_args={"connect_timeout": 5})
        with engine.connect() as connection:
            connection.exec_driver_sql("SELECT 1")
        engine.dispose()
    except Exception as exc:  # any reason at all means: not usable here
        return f"{label} not reachable on 127.0.0.1:{port}: {' '.join(str(exc).split())[:120]}"
    return None


def ensure_table(backend: str, rows: int, data: list[tuple] | None) -> list[tuple] | None:
    """Create and fill the bench table unless it is there with the right row count; returns the rows if made."""
    import sqlalchemy as sa
    from sqlalchemy.exc import SQLAlchemyError

    name = table_name(rows)
    if backend == "sqlite":
        BENCH_CACHE.mkdir(parents=True, exist_ok=True)
        with sqlite3.connect(sqlite_path(rows)) as con:
            try:
                if con.execute(f"SELECT COUNT(*) FROM {name}").fetchone()[0] == rows:
                    return data
            except sqlite3.OperationalError:
                pass
            data = data or generate(rows)
            con.execute(f"DROP TABLE IF EXISTS {name}")
            con.execute(f"CREATE TABLE {name} ({COLUMNS[backend]})")
            con.executemany(f"INSERT INTO {name} VALUES ({', '.join('?' * 9)})", data)
        return data
    engine = sa.create_engine(url_for(backend, rows))
    try:
        with engine.connect() as connection:
            try:
                if connection.exec_driver_sql(f"SELECT COUNT(*) FROM {name}").scalar() == rows:
                    return data
            except SQLAlchemyError:
                connection.rollback()
        data = data or generate(rows)
        raw = engine.raw_connection()
        try:
            cursor = raw.cursor()
            cursor.execute(f"DROP TABLE IF EXISTS {name}")
            cursor.execute(f"CREATE TABLE {name} ({COLUMNS[backend]})")
            if backend == "postgresql":
                buffer = io.StringIO()
                csv.writer(buffer).writerows(data)  # None -> empty field -> NULL in COPY's CSV format
                buffer.seek(0)
                import psycopg2.extensions

                installed = psycopg2.extensions.get_wait_callback()  # COPY refuses to run beside dashmem's wait callback (sql_wait)
                psycopg2.extensions.set_wait_callback(None)
                try:
                    cursor.copy_expert(f"COPY {name} FROM STDIN WITH (FORMAT csv)", buffer)
                finally:
                    psycopg2.extensions.set_wait_callback(installed)
            else:
                for start in range(0, len(data), 5_000):  # PyMySQL sends each slice as one multi-row INSERT
                    cursor.executemany(f"INSERT INTO {name} VALUES ({', '.join(['%s'] * 9)})", data[start : start + 5_000])
            raw.commit()
        finally:
            raw.close()
    finally:
        engine.dispose()
    return data


def drop_table(backend: str, rows: int) -> None:
    import sqlalchemy as sa

    if backend == "sqlite":
        sqlite_path(rows).unlink(missing_ok=True)
        return
    engine = sa.create_engine(url_for(backend, rows))
    with engine.begin() as connection:
        connection.exec_driver_sql(f"DROP TABLE IF EXISTS {table_name(rows)}")
    engine.dispose()


# --- one run, in its own process ------------------------------------------------------------------------


def child(method: str, backend: str, rows: int, query_mode: bool) -> dict:
    """Time one fetch; the imports every method needs come first, so the RSS they cost is the same baseline."""
    import pandas as pd
    import pyarrow as pa
    import sqlalchemy as sa

    from lib.data.connectors.base import FetchContext, fetch

    url, name = url_for(backend, rows), table_name(rows)
    # The floor's DB-API driver is imported here too; each connects with its own arguments.
    connect: Callable[[], Any]
    if backend == "postgresql":
        import psycopg2

        connect = partial(psycopg2.connect, host="127.0.0.1", port=5432, user="postgres", dbname="test")
    elif backend == "mariadb":
        import pymysql

        connect = partial(pymysql.connect, host="127.0.0.1", port=3306, user="root", database="test")
    else:
        connect = partial(sqlite3.connect, sqlite_path(rows))
    baseline = memory_kb("VmRSS")
    times: dict[str, float] = {}
    cpu_start = cpu_seconds()
    start = time.perf_counter()
    if method == "ours":
        settings = {"query": f"SELECT * FROM {name}"} if query_mode else {"table": name}
        # The SQLite file lies in the bench cache, so that is the workspace folder it must be inside.
        result = fetch({"name": "bench", "type": "sql", "url": url, **settings}, FetchContext(workspace_path=BENCH_CACHE))
        times["ours"] = time.perf_counter() - start
        times["ours cpu"] = cpu_seconds() - cpu_start
        shape = (result.num_rows, result.num_columns)
    elif method == "pandas":
        engine = sa.create_engine(url)
        try:
            frame = pd.read_sql(f"SELECT * FROM {name}", engine)
        finally:
            engine.dispose()
        times["pandas"] = time.perf_counter() - start
        times["pandas cpu"] = cpu_seconds() - cpu_start
        result = pa.Table.from_pandas(frame, preserve_index=False)
        times["pandas+arrow"] = time.perf_counter() - start
        times["pandas+arrow cpu"] = cpu_seconds() - cpu_start
        shape = (result.num_rows, result.num_columns)
    else:
        connection = connect()
        try:
            cursor = connection.cursor()
            cursor.execute(f"SELECT * FROM {name}")
            result = cursor.fetchall()
        finally:
            connection.close()
        times["floor"] = time.perf_counter() - start
        times["floor cpu"] = cpu_seconds() - cpu_start
        shape = (len(result), len(result[0]) if result else 0)
    peak = memory_kb("VmHWM")
    return {"times": times, "peak_mb": peak / 1024, "grew_mb": (peak - baseline) / 1024, "shape": shape}


def memory_kb(field: str) -> int:
    """This process's RSS now (VmRSS) or its peak (VmHWM). Not ru_maxrss: Linux carries that across exec
    from the parent, so every child would report at least the parent's size."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def cpu_seconds() -> float:
    """User + system CPU of this process: what the method costs on the client, less swayed by other load."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_child(method: str, backend: str, rows: int, query_mode: bool) -> dict:
    command = [sys.executable, "-m", "bench.sql", "--child", method, "--backends", backend, "--rows", str(rows)]
    if query_mode:
        command.append("--query")
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{method} on {backend} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--backends", default="sqlite,postgresql,mariadb")
    parser.add_argument("--query", action="store_true", help="fetch ours in query mode (SELECT *) rather than table mode")
    parser.add_argument("--keep", action="store_true", help="keep the bench tables for the next run (dropped otherwise)")
    parser.add_argument("--child", choices=METHODS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if args.child:
        print(json.dumps(child(args.child, backends[0], args.rows, args.query)))
        return

    print(f"{args.rows:,} rows x 9 columns; median of {args.repeat} runs, each in its own process; ours in {'query' if args.query else 'table'} mode\n")
    rows_out, notes, data = [], [], None
    for backend in backends:
        why = reachable(backend)
        if why:
            notes.append(f"{backend}: skipped, {why}")
            continue
        setup = time.perf_counter()
        data = ensure_table(backend, args.rows, data)
        notes.append(f"{backend}: table ready in {time.perf_counter() - setup:.1f} s")
        runs: dict[str, list[dict]] = {m: [] for m in METHODS}
        try:
            for _ in range(args.repeat):  # interleaved, so a burst of load on the machine hits every method alike
                for method in METHODS:
                    runs[method].append(run_child(method, backend, args.rows, args.query))
        finally:
            if not args.keep:
                drop_table(backend, args.rows)
        shapes = {tuple(r["shape"]) for rs in runs.values() for r in rs}
        assert len(shapes) == 1, f"{backend}: the methods disagree on the shape: {shapes}"

        def med(method: str, key: str, runs: dict = runs) -> float:
            return statistics.median(r["times"][key] for r in runs[method])

        ours, pandas, pandas_arrow, floor = med("ours", "ours"), med("pandas", "pandas"), med("pandas", "pandas+arrow"), med("floor", "floor")
        for label, method, key in (
            ("ours (Arrow)", "ours", "ours"),
            ("pandas.read_sql (DataFrame)", "pandas", "pandas"),
            ("pandas.read_sql + from_pandas (Arrow)", "pandas", "pandas+arrow"),
            ("floor: cursor fetchall", "floor", "floor"),
        ):
            seconds, cpu = med(method, key), med(method, key + " cpu")
            rows_out.append(
                [
                    backend,
                    label,
                    seconds,
                    cpu,
                    f"{args.rows / seconds / 1000:,.0f}k",
                    ratio(seconds, pandas),
                    ratio(cpu, med("pandas", "pandas cpu")),
                    ratio(seconds, floor),
                    statistics.median(r["peak_mb"] for r in runs[method]),
                    statistics.median(r["grew_mb"] for r in runs[method]),
                ]
            )
        verdict = "met" if ours <= GOAL * pandas else "NOT met"
        rows_out.append(
            [
                backend,
                f"goal: SQL fetch within {GOAL}x of pandas.read_sql",
                "",
                "",
                "",
                f"{ratio(ours, pandas)} {verdict}",
                f"+arrow: {ratio(ours, pandas_arrow)}",
                "",
                "",
                "",
            ]
        )
    if rows_out:
        print_table(["db", "method", "wall s", "cpu s", "rows/s", "vs pandas", "cpu vs pandas", "vs floor", "peak MB", "+fetch MB"], rows_out)
    print()
    for note in notes:
        print(note)


if __name__ == "__main__":
    main()
