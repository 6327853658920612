"""The main job at the speed of its engine (issue #28): a CSV to its profile as whole fresh processes, ours against pandas and DuckDB.

    python -m bench.e2e [--quick] [--sizes 10k,100k,1M] [--big] [--runs 5]

For each size (10k, 100k and 1M rows by default; 5M with --big or in --sizes;
--quick: 10k and 100k, 3 runs) the generated rows x 44 table of
bench/common.py (`wide_table_csv`) is written as a CSV, and three sides turn
it into its statistics, each as whole processes started fresh:

- ours, the user's path: a workspace made with the command line (`python -m
  lib new`, then `python -m lib source add` of one CSV source, then a first
  `python -m lib refresh`, none of it timed), then, timed, two processes one
  after the other, as cron and then the app or a user would run them:
  `python -m lib refresh WS` (parse the CSV, check it, write the snapshot and
  switch to it) and `python -m lib profile WS` (read the snapshot, compute the
  profile, print the model-facing text);
- A, pandas: `python -c` running `read_csv` (the date columns parsed, the
  ones our first refresh found to be dates, as in bench/profile.py) and then
  `pandas_profile` of bench/profile.py (the same statistics as ours), printing
  the row count and the number of statistics so nothing is skipped;
- B, DuckDB: `python -c` running DuckDB's own
  `SUMMARIZE SELECT * FROM read_csv('F')`, printing the count it found.

Every timed refresh does the whole work. A refresh always parses its file
(there is no mtime shortcut in lib/data/refresh.py); it only skips writing a
snapshot when the parsed data equals the data served (compact_strings(...).equals
against the current snapshot: "the data has not changed"). So before each run
the workspace's CSV path is switched (a hard link swapped in atomically) to the
other of two versions: the file as generated and the file without its last row.
Every refresh therefore loads changed data, writes a new snapshot and switches
to it (checked: "switched to snapshot" in its output), as cron does when the
data moved; and `lib profile` has no cache, it recomputes from the snapshot
each time (checked: the row count it prints is the new version's). The
alternatives read the same path, so all three read the same bytes, from the
page cache.

Measured per process: wall time, CPU time (user + system of the process and
its reaped descendants, from os.wait4) and peak RSS (ru_maxrss from os.wait4;
Linux carries the parent's peak into a child across exec, so this bench keeps
its own process small, importing neither pandas nor Arrow, and prints that
floor). Ours: wall and CPU summed over the two processes, peak RSS the larger
of the two. Medians of --runs runs (default 5); ratios are medians of the
per-run ratios. The three sides take turns run by run, the first of them
rotating, so a loaded moment of the shared machine falls on all alike.

Goals (issue #28): ours/pandas <= 1.0 at every size; ours/DuckDB SUMMARIZE
<= 1.0 at 1M and 5M rows; the refresh's peak RSS <= 1.5x the CSV file's size
at 1M and 5M rows, all on wall time, CPU ratios printed beside.
Not the same work: ours also parses types and dates its own way, checks,
writes a snapshot and renders the profile; DuckDB's SUMMARIZE computes no
value counts and 3 quantiles, approximately. The output says, per size, which
figures are approximate on each side (ours: from the thresholds in
lib/data/profile.py, read at run time).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .common import BENCH_CACHE, ROOT, compile_checkout, print_table

DEFAULT_SIZES = "10k,100k,1M"
QUICK_SIZES = "10k,100k"
BIG = 5_000_000
SIDES = ("ours", "pandas", "duckdb")
LABELS = {
    "ours": "ours: lib refresh + lib profile",
    "pandas": "A pandas: read_csv + pandas_profile",
    "duckdb": "B DuckDB: SUMMARIZE read_csv",
}
GOAL_PANDAS = 1.0  # ours/pandas wall, every size
GOAL_DUCKDB = 1.0  # ours/DuckDB wall, from GOAL_FROM_ROWS rows
GOAL_RSS = 1.5  # refresh peak RSS / CSV bytes, from GOAL_FROM_ROWS rows
GOAL_FROM_ROWS = 1_000_000

PANDAS_SCRIPT = """\
import sys
import pandas as pd
from bench.profile import pandas_profile
path, dates = sys.argv[1], [d for d in sys.argv[2].split(",") if d]
frame = pd.read_csv(path, parse_dates=dates, low_memory=False)
stats = pandas_profile(frame)
print(f"{len(frame)} rows x {frame.shape[1]} columns, {len(stats)} statistics")
"""

DUCKDB_SCRIPT = """\
import sys
import duckdb
path = sys.argv[1].replace("'", "''")
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")
rel = con.sql(f"SUMMARIZE SELECT * FROM read_csv('{path}')")
rows = rel.fetchall()
count = rows[0][rel.columns.index("count")]
print(f"{count} rows x {len(rows)} columns summarized")
"""

# What the first refresh stored: the date and time columns, which pandas is asked to parse as well.
DATES_SCRIPT = """\
import sys
import pyarrow as pa
from lib.data.snapshots import Warehouse
(table,) = Warehouse.for_workspace(sys.argv[1]).tables().values()
print(",".join(f.name for f in table.schema if pa.types.is_date(f.type) or pa.types.is_timestamp(f.type)))
"""

# The thresholds beyond which our profile approximates, as lib/data/profile.py holds them (None if gone).
THRESHOLDS = ("EXACT_DISTINCT_MAX_ROWS", "EXACT_QUANTILE_MAX_ROWS", "QUANTILE_SAMPLE_ROWS")
THRESHOLDS_SCRIPT = f"""\
import json
from lib.data import profile
print(json.dumps({{name: getattr(profile, name, None) for name in {THRESHOLDS!r}}}))
"""


# --------------------------------------------------------------------------- one process, measured


@dataclass
class Run:
    wall: float
    cpu: float
    rss_mb: float
    stdout: str
    stderr: str
    returncode: int


def timed_process(command: list[str], env: dict[str, str]) -> Run:
    """Wall time, CPU time and peak RSS of one whole process (and its reaped descendants), from os.wait4."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        out.seek(0)
        err.seek(0)
        return Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out.read(), err.read(), proc.returncode)


def checked(command: list[str], env: dict[str, str]) -> str:
    """Stdout of an untimed helper process; exits with its output if it fails."""
    proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"{' '.join(command[:4])}... failed:\n{proc.stdout}{proc.stderr}")
    return proc.stdout


def own_peak_mb() -> float:
    """This process's peak RSS (VmHWM): the floor of every child's ru_maxrss (Linux carries it across exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# --------------------------------------------------------------------------- one size, set up once


@dataclass
class Case:
    rows: int
    csv_bytes: int
    versions: list[Path]  # the file as generated, and without its last row
    rows_of: dict[Path, int]
    live: Path  # the path the workspace's source reads; a hard link to one of the versions
    workspace: Path
    dates: list[str]
    env: dict[str, str]
    runs: dict[str, list[Run]] = field(default_factory=dict)  # "refresh", "profile", "pandas", "duckdb"


def label(rows: int) -> str:
    return f"{rows // 1_000_000}M" if rows >= 1_000_000 and rows % 1_000_000 == 0 else f"{rows // 1000}k" if rows % 1000 == 0 else str(rows)


def parse_sizes(text: str) -> list[int]:
    sizes = []
    for part in text.split(","):
        part = part.strip().lower().replace("_", "")
        if part:
            scale = {"k": 1_000, "m": 1_000_000}.get(part[-1], 1)
            sizes.append(int(float(part[:-1] if scale > 1 else part) * scale))
    return sizes


def without_last_row(src: Path, dst: Path) -> None:
    """`src` but its last line, copied in the kernel (this process stays small whatever the file's size)."""
    size = src.stat().st_size
    with src.open("rb") as f:
        f.seek(max(0, size - 65536))
        tail = f.read()
    cut = size - len(tail) + tail.rstrip(b"\r\n").rfind(b"\n") + 1
    with src.open("rb") as fin, dst.open("wb") as fout:
        left = cut
        while left:
            left -= os.copy_file_range(fin.fileno(), fout.fileno(), left)


def switch(case: Case, version: Path) -> None:
    """Point the workspace's CSV path at `version`, atomically (a hard link swapped in)."""
    tmp = case.live.with_name(case.live.name + ".next")
    tmp.unlink(missing_ok=True)
    os.link(version, tmp)
    os.replace(tmp, case.live)


def prepare(rows: int, root: Path) -> Case:
    """The CSV (generated in its own process), its two versions, a workspace whose one source reads it, loaded once."""
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(ROOT)}
    csv = Path(checked([sys.executable, "-c", f"from bench.common import wide_table_csv; print(wide_table_csv({rows}))"], base).strip())
    folder = root / label(rows)
    (folder / "live").mkdir(parents=True)
    versions = [folder / "v1.csv", folder / "v2.csv"]
    try:
        os.link(csv, versions[0])
    except OSError:
        shutil.copy(csv, versions[0])
    without_last_row(versions[0], versions[1])
    env = {
        **base,
        "HOME": str(folder),
        "DASHMEM_CACHE_DIR": str(folder / "cache"),
        "DASHMEM_DATA_DIRS": str(folder / "live"),
    }
    case = Case(
        rows,
        csv.stat().st_size,
        versions,
        {versions[0]: rows, versions[1]: rows - 1},
        folder / "live" / "wide.csv",
        folder / f"wide-{label(rows).lower()}",
        [],
        env,
    )
    switch(case, versions[0])
    lib = [sys.executable, "-m", "lib"]
    checked(lib + ["new", str(case.workspace), "--name", f"Wide {label(rows)}", "--owner", "bench"], env)
    checked(lib + ["source", "add", str(case.workspace), "t", "--type", "csv", "--path", str(case.live)], env)
    first = checked(lib + ["refresh", str(case.workspace)], env)
    assert "switched to snapshot" in first, first
    case.dates = [d for d in checked([sys.executable, "-c", DATES_SCRIPT, str(case.workspace)], env).strip().split(",") if d]
    return case


# --------------------------------------------------------------------------- the runs


def run_side(case: Case, side: str, version: Path) -> None:
    rows = case.rows_of[version]
    if side == "ours":
        refresh = timed_process([sys.executable, "-m", "lib", "refresh", str(case.workspace)], case.env)
        assert refresh.returncode == 0 and "switched to snapshot" in refresh.stdout, refresh.stdout + refresh.stderr
        profile = timed_process([sys.executable, "-m", "lib", "profile", str(case.workspace)], case.env)
        found = re.search(r"^table t \(([\d,]+) rows\)", profile.stdout, re.M)
        assert profile.returncode == 0 and found and int(found.group(1).replace(",", "")) == rows, profile.stdout[:300] + profile.stderr
        case.runs.setdefault("refresh", []).append(refresh)
        case.runs.setdefault("profile", []).append(profile)
        return
    if side == "pandas":
        run = timed_process([sys.executable, "-c", PANDAS_SCRIPT, str(case.live), ",".join(case.dates)], case.env)
    else:
        run = timed_process([sys.executable, "-c", DUCKDB_SCRIPT, str(case.live)], case.env)
    assert run.returncode == 0 and re.search(rf"^{rows} rows", run.stdout, re.M), run.stdout[-2000:] + run.stderr[-2000:]
    case.runs.setdefault(side, []).append(run)


def measure(case: Case, runs: int) -> None:
    for i in range(runs):
        version = case.versions[(i + 1) % 2]  # the first refresh loaded versions[0]: every run loads changed data
        switch(case, version)
        order = SIDES[i % 3 :] + SIDES[: i % 3]
        for side in order:
            print(f"  {label(case.rows)} run {i + 1}/{runs}: {side}…", file=sys.stderr)
            run_side(case, side, version)


def side_figures(case: Case, side: str) -> list[tuple[float, float, float]]:
    """(wall, cpu, peak RSS MB) per run; ours sums its two processes' times and takes the larger peak."""
    if side == "ours":
        return [(r.wall + p.wall, r.cpu + p.cpu, max(r.rss_mb, p.rss_mb)) for r, p in zip(case.runs["refresh"], case.runs["profile"])]
    return [(r.wall, r.cpu, r.rss_mb) for r in case.runs[side]]


def med(values) -> float:
    return statistics.median(list(values))


# --------------------------------------------------------------------------- what is approximate, per side


def approximations(rows: int, thresholds: dict[str, int | None]) -> str:
    distinct, quantile, sample = (thresholds.get(k) for k in THRESHOLDS)
    if distinct is None or quantile is None:
        return "unknown: " + ", ".join(k for k in THRESHOLDS if thresholds.get(k) is None) + " not found in lib/data/profile.py"
    parts = []
    if rows > distinct:
        parts.append(f"distinct counts of numbers, dates, near-unique text (HyperLogLog: above {distinct:,} rows)")
    if rows > quantile:
        step = max(1, rows // sample) if sample else None
        parts.append(f"quantiles (every {step}th row: above {quantile:,} rows)")
    return "; ".join(parts) if parts else "none: every figure exact"


# --------------------------------------------------------------------------- the tables


def ratio(a: float, b: float) -> float:
    return a / b if b else float("inf")


def report(case: Case, runs: int, thresholds: dict[str, int | None]) -> dict:
    figures = {side: side_figures(case, side) for side in SIDES}
    medians = {side: tuple(med(f[k] for f in figures[side]) for k in range(3)) for side in SIDES}
    per_run = {
        alt: (med(ratio(o[0], a[0]) for o, a in zip(figures["ours"], figures[alt])), med(ratio(o[1], a[1]) for o, a in zip(figures["ours"], figures[alt])))
        for alt in ("pandas", "duckdb")
    }
    refresh_rss = med(r.rss_mb for r in case.runs["refresh"])
    rss_ratio = refresh_rss * 1024 * 1024 / case.csv_bytes
    big = case.rows >= GOAL_FROM_ROWS

    print(f"\n== {label(case.rows)} rows x 44 columns: CSV {case.csv_bytes / 1e6:,.0f} MB, medians of {runs} runs")
    print_table(
        ["side", "wall s", "CPU s", "peak RSS MB", "ours / side, wall", "ours / side, CPU"],
        [
            [LABELS[side], round(medians[side][0], 3), round(medians[side][1], 3), round(medians[side][2])]
            + (["", ""] if side == "ours" else [f"{per_run[side][0]:.2f}x", f"{per_run[side][1]:.2f}x"])
            for side in SIDES
        ],
    )

    def status(ok: bool, applies: bool) -> str:
        return ("met" if ok else "not met") if applies else "(no goal at this size)"

    goals = [
        [f"ours / pandas, wall <= {GOAL_PANDAS:.1f}x (every size)", f"{per_run['pandas'][0]:.2f}x", status(per_run["pandas"][0] <= GOAL_PANDAS, True)],
        [f"ours / DuckDB SUMMARIZE, wall <= {GOAL_DUCKDB:.1f}x (1M, 5M)", f"{per_run['duckdb'][0]:.2f}x", status(per_run["duckdb"][0] <= GOAL_DUCKDB, big)],
        [f"refresh peak RSS <= {GOAL_RSS:.1f}x the CSV (1M, 5M)", f"{rss_ratio:.2f}x ({refresh_rss:,.0f} MB)", status(rss_ratio <= GOAL_RSS, big)],
    ]
    print()
    print_table(["goal (issue #28)", "figure", "status"], goals)
    print(f"approximate on our side at {case.rows:,} rows: {approximations(case.rows, thresholds)}")
    return {
        "rows": case.rows,
        "refresh": [med(r.wall for r in case.runs["refresh"]), med(r.cpu for r in case.runs["refresh"]), refresh_rss],
        "profile": [med(r.wall for r in case.runs["profile"]), med(r.cpu for r in case.runs["profile"]), med(r.rss_mb for r in case.runs["profile"])],
        "share": med(r.wall / (r.wall + p.wall) for r, p in zip(case.runs["refresh"], case.runs["profile"])),
        "approx": approximations(case.rows, thresholds),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", help=f"rows, comma-separated, e.g. 10k,100k,1M,5M (default {DEFAULT_SIZES})")
    parser.add_argument("--big", action="store_true", help="add 5M rows (slow: minutes per run, GBs of memory and disk)")
    parser.add_argument("--runs", type=int, help="runs per side and size, each a fresh process (median); default 5")
    parser.add_argument("--quick", action="store_true", help=f"a smoke run: {QUICK_SIZES}, 3 runs")
    args = parser.parse_args(argv)
    compile_checkout()
    sizes = parse_sizes(args.sizes or (QUICK_SIZES if args.quick else DEFAULT_SIZES))
    if args.big and BIG not in sizes:
        sizes.append(BIG)
    runs = args.runs or (3 if args.quick else 5)
    load_start = os.getloadavg()
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in load_start)} ({os.cpu_count()} cores)")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(ROOT)}
    thresholds = json.loads(checked([sys.executable, "-c", THRESHOLDS_SCRIPT], env))
    checked([sys.executable, "-c", "import pandas, duckdb, bench.profile, lib.data.profile"], env)  # libraries into the page cache
    splits = []
    BENCH_CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=BENCH_CACHE, prefix="e2e-") as tmp:
        for rows in sizes:
            print(f"preparing {label(rows)} rows…", file=sys.stderr)
            case = prepare(rows, Path(tmp))
            measure(case, runs)
            splits.append(report(case, runs, thresholds))
            shutil.rmtree(Path(tmp) / label(rows), ignore_errors=True)  # the versions and snapshots of a big size

    print("\n== ours, split: `lib refresh` (parse, check, write the snapshot, switch) then `lib profile` (read it, profile, render)")
    print_table(
        ["rows", "refresh wall s", "profile wall s", "refresh share of wall", "refresh CPU s", "profile CPU s", "refresh peak MB", "profile peak MB"],
        [
            [
                label(s["rows"]),
                round(s["refresh"][0], 3),
                round(s["profile"][0], 3),
                f"{s['share']:.0%}",
                round(s["refresh"][1], 3),
                round(s["profile"][1], 3),
                round(s["refresh"][2]),
                round(s["profile"][2]),
            ]
            for s in splits
        ],
    )
    print("\n== exactness: which figures are approximate on each side (not compared value by value)")
    print_table(["rows", "ours (thresholds read from lib/data/profile.py)"], [[label(s["rows"]), s["approx"]] for s in splits])
    print("ours: value counts (top, rare values) and the distinct counts they give, counts, min/max, mean and std stay exact.")
    print("pandas: every figure exact (value_counts, nunique, quantile over all rows).")
    print("DuckDB SUMMARIZE: approx_unique (HyperLogLog) and q25/q50/q75 approximate at every size; no value counts (top/rare values), 3 quantiles not 5.")
    load_end = os.getloadavg()
    print(
        f"\nload average at start {' '.join(f'{x:.2f}' for x in load_start)}, at end {' '.join(f'{x:.2f}' for x in load_end)} "
        f"(1, 5, 15 min), on {os.cpu_count()} cores. Wall and CPU: medians of {runs} runs, each side a fresh process (ours two),\n"
        "the sides taking turns run by run; ratios are medians of the per-run ratios. CPU = user + system of the process tree\n"
        "(os.wait4). Peak RSS = the child's ru_maxrss; each includes a floor Linux carries across exec from this process, whose\n"
        f"peak RSS is {own_peak_mb():.0f} MB. Every refresh loaded changed data and switched snapshots; every profile recomputed."
    )


if __name__ == "__main__":
    main()
