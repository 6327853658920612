"""What a profile records and how far it goes: the limits, rounding and summary fields every profile shares.

Both ways of profiling a table use these, so a table profiles to the same
figures whether DuckDB and Arrow read its snapshot (`lib.data.profile`) or its
own database answers for it (`lib.data.live_profile`).
"""

from __future__ import annotations

import math
import os
from typing import Any, Mapping

from . import colroles
from .colroles import EXACT_DISTINCT_MAX_ROWS

TOP_K = 5
RARE_K = 3
SAMPLES_K = 3
CATEGORICAL_MAX_DISTINCT = 10_000  # above this, value counts are not worth a scan
# EXACT_DISTINCT_MAX_ROWS (colroles.py, which reads the counts too): beyond it HyperLogLog estimates them.
EXACT_QUANTILE_MAX_ROWS = 200_000  # beyond this, quantiles come from an evenly spaced sample
QUANTILE_SAMPLE_ROWS = 100_000  # of about this many rows
QUANTILES = {"p05": 0.05, "p25": 0.25, "p50": 0.5, "p75": 0.75, "p95": 0.95}
# Batches: memory stays flat as tables get wider.
SCAN_MAX_COLUMNS = 64  # columns per aggregate query
SCAN_VALUES_PER_QUERY = 4_000_000  # values an aggregate query with exact quantiles may hold (8 bytes each)
COUNT_HELD_VALUES = 1_000_000  # distinct values held at most (plus one column's) while counting
# Arrow counts this many columns at a time, on a side thread beside the aggregates (DuckDB's threads, numpy):
# one core is left to those. On 2 cores, two counting threads only contended with them: 1M x 44 took 0.39 s
# of CPU (0.245 s wall) against 0.33 s (0.204 s) with one (bench.profile).
COUNT_THREADS = max(1, min(4, (os.cpu_count() or 1) - 1))
THREADS_MIN_ROWS = 100_000  # the side thread and the counting threads work in tables of at least this many rows
# Columns of up to this many rows are copied into one chunk before the passes whose result does not depend on
# the chunks (min/max, sorts, distinct counts): a snapshot of a wide table holds ~800-row chunks, and the calls
# per chunk cost more than the copy (bench.profile, 20k x 1000). Means and sums stay on the chunks as they are.
CONTIGUOUS_MAX_ROWS = 100_000
ROUTE_SAMPLE_ROWS = 2_048  # rows sampled to decide whether a text column is worth counting value by value (not nearly all distinct)
# Up to this many rows every text column is counted value by value, unsampled: its distinct count is exact
# anyway (EXACT_DISTINCT_MAX_ROWS), and Arrow's value counts cost no more than its count_distinct, so the
# sample could only add its own cost (a third of the 20k x 1000 profile step, bench.profile).
ROUTE_MIN_ROWS = EXACT_DISTINCT_MAX_ROWS


def _round(value: Any) -> Any:
    """Six significant digits: stable across platforms, plenty for a model."""
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return None
        return float(f"{value:.6g}")
    return value


def _scalar(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return _round(value)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def summary_fields(family: str, s: Mapping[str, Any], scalar: Any = _scalar) -> dict[str, Any]:
    """A column's range (numbers and times) and mean, std and quantiles (numbers), rounded, from its statistics `s`."""
    out: dict[str, Any] = {}
    if family in ("number", "time") and s.get("min") is not None:
        out["min"], out["max"] = scalar(s["min"]), scalar(s["max"])
    if family == "number" and s.get("mean") is not None:
        out["mean"] = _round(float(s["mean"]))
        if s.get("std") is not None:
            out["std"] = _round(float(s["std"]))
        if s.get("quantiles"):
            out["quantiles"] = {k: _round(float(v)) for k, v in zip(QUANTILES, s["quantiles"]) if v is not None}
    return out


def column_meaning(col: str, kind: str, s: dict[str, Any], rows: int) -> dict[str, Any]:
    """A column's role, and for a measure how it adds up ("aggregate": sum, mean or median), from lib/data/colroles.py."""
    meaning = colroles.classify(col, kind, s, rows)
    return {"role": meaning.role, "aggregate": meaning.aggregate} if meaning.aggregate else {"role": meaning.role}
