"""Shared by the benchmarks: where the public datasets are, the generated wide table, and table printing."""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lib import settings  # after the path is set

DATASETS = settings.get("DASHMEM_DATASETS")
PUBLIC = ["gdp.csv", "adult.csv", "global_superstore_sample1000.csv", "global_superstore.csv",
          "nyc311_sample5000.csv", "nyc311_api_1000.csv"]
BENCH_CACHE = ROOT / ".data" / "bench"


def public_datasets() -> list[Path]:
    missing = [name for name in PUBLIC if not (DATASETS / name).exists()]
    if missing:
        sys.exit(f"public datasets missing from {DATASETS}: {', '.join(missing)} (set DASHMEM_DATASETS)")
    return [DATASETS / name for name in PUBLIC]


def median_time(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for n, row in enumerate(cells):
        print("  ".join(c.rjust(w) if n and _numeric(c) else c.ljust(w) for c, w in zip(row, widths)).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _numeric(text: str) -> bool:
    return text.replace(",", "").replace(".", "").replace("x", "").replace("-", "").replace("%", "").strip().isdigit()


def wide_table_csv(rows: int = 1_000_000) -> Path:
    """A generated rows x 44 CSV (deterministic): ids, measures, categories, dates and free text."""
    path = BENCH_CACHE / f"wide_{rows}.csv"
    if path.exists():
        return path
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pacsv

    rng = np.random.default_rng(42)
    cols: dict[str, object] = {}
    cols["row_id"] = np.arange(rows)
    cols["order_id"] = rng.integers(0, rows // 3, rows)
    cols["customer_id"] = rng.integers(0, 50_000, rows)
    cols["product_code"] = pa.array([f"P-{i:05d}" for i in rng.integers(0, 5_000, rows)])
    for i in range(16):
        cols[f"measure_{i:02d}"] = np.round(rng.lognormal(3 + i % 4, 1, rows), 2)
    for i in range(8):
        cols[f"count_{i:02d}"] = rng.poisson(5 + i, rows)
    levels = [5, 8, 12, 20, 50, 100, 300, 1000, 3, 40]
    for i, k in enumerate(levels):
        names = np.array([f"cat{i}_{j}" for j in range(k)])
        cols[f"category_{i:02d}"] = pa.array(names[rng.zipf(1.5, rows) % k])
    start = np.datetime64("2020-01-01")
    for i in range(3):
        cols[f"date_{i}"] = pa.array(start + rng.integers(0, 1500, rows).astype("timedelta64[D]"))
    words = np.array(["alpha", "beta", "gamma", "delta", "omega", "north", "south", "late", "early", "damaged"])
    for i in range(3):
        picks = rng.integers(0, len(words), (rows, 3))
        cols[f"note_{i}"] = pa.array([" ".join(w) for w in words[picks]]) if i else pa.array([f"ref {n}" for n in rng.integers(0, rows, rows)])
    table = pa.table(cols)
    assert table.num_columns == 44, table.num_columns
    BENCH_CACHE.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    pacsv.write_csv(table, tmp)
    tmp.rename(path)
    return path


def interleaved_medians(cases: dict[object, dict[str, tuple[Callable[[], object], Callable[[], object]]]],
                        repeat: int) -> dict[object, dict[str, float]]:
    """Median seconds of each (untimed setup, timed fn) of each case, the cases taking turns run by run,
    so a noisy moment of a shared machine falls on every case alike rather than on one."""
    times: dict[object, dict[str, list[float]]] = {case: {key: [] for key in fns} for case, fns in cases.items()}
    for _ in range(repeat):
        for case, fns in cases.items():
            for key, (setup, fn) in fns.items():
                setup()
                start = time.perf_counter()
                fn()
                times[case][key].append(time.perf_counter() - start)
    return {case: {key: statistics.median(v) for key, v in by_key.items()} for case, by_key in times.items()}
