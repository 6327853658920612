"""Data profiles: the "data schemas" memory, computed in DuckDB and Arrow in batches of columns.

Numbers, times and text that is nearly all distinct get aggregate queries
over a bounded batch of columns (distinct count, exact up to
EXACT_DISTINCT_MAX_ROWS rows and by HyperLogLog beyond, min/max, mean, std,
quantiles); above EXACT_QUANTILE_MAX_ROWS rows, Arrow and numpy compute the
min/max, mean, std and sampled quantiles of int and float columns instead,
the same figures at a fraction of the cost. Text and boolean columns that
repeat values are counted by Arrow, one hash pass each, or by the indices of
a dictionary-encoded column (top values, the rest, rare values, and the
exact distinct count), while DuckDB aggregates the other columns. Memory
is bounded by one batch, so it stays flat as tables widen (see `_scan`).
Samples come from the first rows, which costs no scan. Nothing is loaded
into pandas.

`build` returns the content of profile.yaml: sorted, rounded, no timestamps,
so the same data always gives the same bytes. `text` renders the compact,
model-facing version under a token budget (see `text` for the order in which
detail is dropped).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction
from pathlib import Path
from typing import Any, Iterable, Mapping, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..core import tokens
from ..memory import relationships
from . import colroles, coltypes
from .live_profile import profile_live_table
from .profile_rules import (
    CATEGORICAL_MAX_DISTINCT,
    CONTIGUOUS_MAX_ROWS,
    COUNT_HELD_VALUES,
    COUNT_THREADS,
    EXACT_DISTINCT_MAX_ROWS,
    EXACT_QUANTILE_MAX_ROWS,
    QUANTILE_SAMPLE_ROWS,
    QUANTILES,
    RARE_K,
    ROUTE_MIN_ROWS,
    ROUTE_SAMPLE_ROWS,
    SAMPLES_K,
    SCAN_MAX_COLUMNS,
    SCAN_VALUES_PER_QUERY,
    THREADS_MIN_ROWS,
    TOP_K,
    _round,
    _scalar,
    column_meaning,
    summary_fields,
)
from .sandbox import describe, quote_ident, sandbox_cursor

# --------------------------------------------------------------------------- computing


def profile_table(name: str, table: pa.Table, *, source: str | None = None, sample_values: bool = True) -> dict[str, Any]:
    types = describe({name: table})[name]
    rows = table.num_rows
    limit = min(CATEGORICAL_MAX_DISTINCT, max(20, rows // 2))
    cursor = sandbox_cursor({name: table})
    try:
        stats, counts = _scan(cursor, name, table, types, limit, sample_values)
    finally:
        cursor.close()
    head = table.slice(0, 1000)
    columns = []
    for col, kind in types:
        s = stats[col]
        entry: dict[str, Any] = {"name": col, "type": kind, **column_meaning(col, kind, s, rows)}
        entry["null_share"] = _round(1 - s["nonnull"] / rows) if rows else 0
        entry["distinct"] = s["distinct"]
        entry.update(summary_fields(coltypes.family(kind), s))
        if col in counts:
            found = counts[col]
            entry["distinct"] = found.distinct
            # A handful of values is shown whole; otherwise the head, the rest's count and a few rare ones.
            few = found.distinct <= TOP_K + RARE_K
            top = found.head if few else found.head[:TOP_K]
            entry["top"] = [{"value": _scalar(v), "count": c} for v, c in top]
            entry["other_count"] = int(s["nonnull"] - sum(c for _, c in top))
            if not few:
                entry["rare"] = [_scalar(v) for v, _ in found.tail]
        if sample_values and col not in counts:
            samples = _samples(head.column(col))
            if samples:
                entry["samples"] = samples
        columns.append(entry)
    head_fields = {"name": name, "source": source} if source else {"name": name}
    return {**head_fields, "rows": rows, "columns": columns}


class _Counts(NamedTuple):
    """A categorical column's value counts: how many distinct values, the first and the last ones
    in order (most frequent first, ties by value), which is all a profile shows of them."""

    distinct: int
    head: list[tuple[Any, int]]  # the first TOP_K + RARE_K
    tail: list[tuple[Any, int]]  # the last RARE_K


def _batches(items: list, size: int) -> Iterable[list]:
    size = max(1, size)
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _countable(column: pa.ChunkedArray) -> bool:
    """Arrow can count this column's values itself, giving the same Python values DuckDB would."""
    t = column.type
    if pa.types.is_dictionary(t):  # counted on its indices, the cheap way, then decoded
        t = t.value_type
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_boolean(t)


def _decoded(values: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """Dictionary-encoded values as plain ones (a no-op for others)."""
    return values.cast(values.type.value_type) if pa.types.is_dictionary(values.type) else values


def _scan(cursor, name: str, table: pa.Table, types: list[list[str]], limit: int, sample_values: bool) -> tuple[dict[str, dict[str, Any]], dict[str, _Counts]]:
    """Every column's statistics and the value counts of the categorical columns, in batches of columns.

    - Text and boolean columns that Arrow can count and that repeat values
      (an evenly spaced sample of ROUTE_SAMPLE_ROWS rows is at most 90%
      distinct; every such column up to ROUTE_MIN_ROWS rows) are counted by
      Arrow, one column per thread; the value counts give their exact distinct
      count too.
    - Every other column is aggregated by DuckDB (distinct count, exact up to EXACT_DISTINCT_MAX_ROWS rows,
      min/max, mean, std, quantiles) in queries over at most SCAN_MAX_COLUMNS
      columns and SCAN_VALUES_PER_QUERY values held for exact quantiles.
    - A column of the second kind that turns out categorical is then counted
      on its own (by Arrow, or by DuckDB for other text types).

    The sample only decides which way a column is computed, never the result.
    Memory is bounded by one batch, however many columns the table has.
    """
    rows = table.num_rows
    stats: dict[str, dict[str, Any]] = {col: {"nonnull": rows - table.column(col).null_count} for col, _ in types}
    family = {kind: coltypes.family(kind) for _, kind in types}
    candidates = [col for col, kind in types if sample_values and family[kind] in ("text", "boolean") and _countable(table.column(col))]
    # A shared dictionary this small cannot fill 90% of the sample with distinct values: no sample needed.
    dictionaries = {col: _shared_dictionary(table.column(col)) for col in candidates}
    few_values = {col for col, d in dictionaries.items() if d is not None and len(d) <= ROUTE_SAMPLE_ROWS * 0.9}
    candidates = [col for col in candidates if col not in few_values]
    if rows > max(ROUTE_MIN_ROWS, ROUTE_SAMPLE_ROWS * 8) and candidates:
        step = rows // ROUTE_SAMPLE_ROWS
        repeating = {
            col
            for col in candidates
            if pc.count_distinct(_decoded(_strided(table.column(col), step, ROUTE_SAMPLE_ROWS))).as_py() <= ROUTE_SAMPLE_ROWS * 0.9  # pyright: ignore[reportAttributeAccessIssue]  # pyarrow.compute makes its kernels at import: no stubs
        }
    else:
        repeating = set(candidates)
    repeating |= few_values

    counted, aggregated = [], []
    for col, kind in types:
        if col in repeating:
            counted.append(col)
        else:
            aggregated.append((col, kind))
    if rows >= THREADS_MIN_ROWS and counted and aggregated:
        # Arrow counts (on its own threads) while DuckDB aggregates the other columns: neither waits for
        # the other's single-threaded stretches. They write the statistics of different columns.
        with ThreadPoolExecutor(max_workers=1) as side:
            counting = side.submit(_count_values, table, counted, limit, stats)
            _aggregate(cursor, name, table, aggregated, stats, family)
            counts = counting.result()
    else:
        counts = _count_values(table, counted, limit, stats)
        _aggregate(cursor, name, table, aggregated, stats, family)
    later = [col for col, kind in aggregated if sample_values and family[kind] in ("text", "boolean") and 0 < stats[col]["distinct"] <= limit]
    counts.update(_count_values(table, [col for col in later if _countable(table.column(col))], limit, {}))
    for col in later:
        if col not in counts:
            counts[col] = _duckdb_value_counts(cursor, name, col)
    return stats, counts


def _strided(column: pa.ChunkedArray, step: int, count: int) -> pa.ChunkedArray:
    """Rows 0, step, 2 x step, ... (`count` of them at most), taken chunk by chunk: a take over the whole
    table of many chunks cost 86 ms at 1M x 44, this 1 ms a column."""
    parts, offset = [], 0
    for chunk in column.iterchunks():
        start = -offset % step
        offset += len(chunk)
        wanted = np.arange(start, min(len(chunk), count * step - (offset - len(chunk))), step)
        if len(wanted):
            parts.append(chunk.take(pa.array(wanted)))
    return pa.chunked_array(parts, type=column.type)


def _count_values(table: pa.Table, columns: list[str], limit: int, stats: dict[str, dict[str, Any]]) -> dict[str, _Counts]:
    """Value counts of Arrow-countable columns whose distinct count is at most `limit`;
    sets stats[col]["distinct"] of those in `stats`.

    Distinct values are held for a few columns at a time, at most about COUNT_HELD_VALUES; those of a
    column with more than `limit` (nearly all distinct text, counted here up to ROUTE_MIN_ROWS rows) are
    dropped as soon as they are counted.
    """
    out: dict[str, _Counts] = {}
    if not columns:
        return out
    pending: list[tuple[str, pa.Table]] = []

    def flush() -> None:
        # Exact at any size: the value counts hold each distinct value once.
        for col, values in pending:
            n = values.num_rows
            if col in stats:
                stats[col]["distinct"] = n
            if 0 < n <= limit:
                out[col] = _arrow_counts(values)
        pending.clear()

    threads = COUNT_THREADS if table.num_rows >= THREADS_MIN_ROWS and len(columns) > 1 else 1
    pool = ThreadPoolExecutor(max_workers=threads) if threads > 1 else None
    try:
        for chunk in _batches(columns, threads):
            found = pool.map(lambda c: _value_counts(table.column(c)), chunk) if pool else map(lambda c: _value_counts(table.column(c)), chunk)
            for col, values in zip(chunk, found):
                if values.num_rows <= limit:
                    pending.append((col, values))
                elif col in stats:  # too many values to show: only their number is kept, not the values
                    stats[col]["distinct"] = values.num_rows
            if sum(values.num_rows for _, values in pending) >= COUNT_HELD_VALUES or len(pending) >= SCAN_MAX_COLUMNS:
                flush()
        if pending:
            flush()
    finally:
        if pool:
            pool.shutdown()
    return out


def _shared_dictionary(column: pa.ChunkedArray) -> pa.Array | None:
    """The dictionary every chunk of a dictionary-encoded column shares (as a snapshot's encoding makes them), else None."""
    if not pa.types.is_dictionary(column.type) or not column.num_chunks:
        return None
    first = column.chunk(0).dictionary
    # Chunks read from one IPC file point at the same dictionary buffers: comparing addresses spares comparing values.
    addresses = [b.address if b else 0 for b in first.buffers()]
    same = all([b.address if b else 0 for b in c.dictionary.buffers()] == addresses or c.dictionary.equals(first) for c in column.iterchunks())
    return first if same else None


def _value_counts(column: pa.ChunkedArray) -> pa.Table:
    """(v, n): each distinct non-null value and its count."""
    dictionary = _shared_dictionary(column)
    if dictionary is not None:
        # One dictionary for the whole column: its indices are small integers, and counting them with
        # bincount costs a third of hashing them (bench.profile); the values are looked up once.
        indices = [c.indices for c in column.iterchunks()]
        counts = np.zeros(len(dictionary), np.int64)
        for i in indices:  # chunk by chunk: no copy of the whole column's indices
            counts += np.bincount(_numpy_view(i.drop_null() if i.null_count else i), minlength=len(dictionary))
        seen = counts > 0
        values = pa.table({"v": dictionary.filter(pa.array(seen)), "n": pa.array(counts[seen], pa.int64())})
    elif pa.types.is_boolean(column.type):
        # Two values: their counts are a sum away, a twentieth of value_counts' time on a chunked column.
        trues = pc.sum(column).as_py() or 0  # pyright: ignore[reportAttributeAccessIssue]  # pyarrow.compute makes its kernels at import: no stubs
        pairs = [(v, n) for v, n in ((False, len(column) - column.null_count - trues), (True, trues)) if n]
        return pa.table({"v": pa.array([v for v, _ in pairs], pa.bool_()), "n": pa.array([n for _, n in pairs], pa.int64())})
    else:
        found = pc.value_counts(column)  # pyright: ignore[reportAttributeAccessIssue]  # pyarrow.compute makes its kernels at import: no stubs
        values = pa.table({"v": _decoded(found.field("values")), "n": found.field("counts")})
    return values.filter(pc.is_valid(values["v"])) if values["v"].null_count else values  # pyright: ignore[reportAttributeAccessIssue]


def _arrow_counts(values: pa.Table) -> _Counts:
    # Arrow orders strings by their UTF-8 bytes, which is Python's order of str; False before True.
    head = pc.select_k_unstable(values, TOP_K + RARE_K, [("n", "descending"), ("v", "ascending")])  # pyright: ignore[reportAttributeAccessIssue]  # pyarrow.compute makes its kernels at import: no stubs
    tail = pc.select_k_unstable(values, RARE_K, [("n", "ascending"), ("v", "descending")])  # pyright: ignore[reportAttributeAccessIssue]

    def pairs(idx: pa.Array) -> list[tuple[Any, int]]:
        chosen = values.take(idx)
        return list(zip(chosen["v"].to_pylist(), chosen["n"].to_pylist()))

    return _Counts(values.num_rows, pairs(head), pairs(tail)[::-1])


def _duckdb_value_counts(cursor, name: str, col: str) -> _Counts:
    q = quote_ident(col)
    result = cursor.execute(f"SELECT {q}, count(*) FROM {quote_ident(name)} WHERE {q} IS NOT NULL GROUP BY {q}").fetchall()
    ordered = sorted(((v, int(n)) for v, n in result), key=lambda vc: (-vc[1], str(vc[0])))
    return _Counts(len(ordered), ordered[: TOP_K + RARE_K], ordered[-RARE_K:])


def _aggregate(cursor, name: str, table: pa.Table, columns: list[tuple[str, str]], stats: dict[str, dict[str, Any]], family: Mapping[str, str]) -> None:
    """Distinct count, min/max, mean, std and quantiles of `columns`, a batch of columns per query.

    Arrow and numpy compute the int and float columns' min/max, mean, std
    and quantiles, dates' range, and up to EXACT_DISTINCT_MAX_ROWS rows the
    exact distinct counts of the columns Arrow can count: a pass each, where
    the same aggregates cost DuckDB over Arrow data several times more
    (count(DISTINCT) was two thirds of a 10k-row profile; bench.profile).
    DuckDB aggregates the rest: timestamps' range, HyperLogLog distinct counts
    beyond that size, and the columns holding NaN or infinity, which it orders
    and averages its own way.
    Exact quantiles need a sort per column, which dominated the profile of
    large tables; above EXACT_QUANTILE_MAX_ROWS they come from an evenly
    spaced, deterministic sample of QUANTILE_SAMPLE_ROWS rows instead.
    """
    rows = table.num_rows
    exact = rows <= EXACT_QUANTILE_MAX_ROWS
    step = 1 if exact else max(1, rows // QUANTILE_SAMPLE_ROWS)
    numbers = [col for col, kind in columns if family[kind] == "number"]
    by_arrow: set[str] = set()
    counted: set[str] = set()
    for col in numbers:
        found = _arrow_number_stats(table.column(col))
        if found is not None:
            # The sorted values count the distinct ones exactly where floats hold every value exactly.
            exact_distinct = rows <= EXACT_DISTINCT_MAX_ROWS and step == 1 and (found["min"] is None or max(abs(found["min"]), abs(found["max"])) < 2**53)
            quantiles, distinct = _sampled_quantiles(_contiguous(table.column(col)), step, distinct=exact_distinct)
            stats[col].update(found, quantiles=quantiles)
            if exact_distinct:
                stats[col]["distinct"] = distinct
                counted.add(col)
            by_arrow.add(col)
    for col, kind in columns:
        if family[kind] == "time" and pa.types.is_date32(table.column(col).type):
            # Arrow's min_max gives the datetime.date DuckDB's min and max give, at a twentieth of their cost
            # over a wide Arrow table (bench.profile, 20k x 1000).
            found = pc.min_max(_contiguous(table.column(col))).as_py()  # pyright: ignore[reportAttributeAccessIssue]  # pyarrow.compute makes its kernels at import: no stubs
            stats[col].update(min=found["min"], max=found["max"])
            by_arrow.add(col)
    if rows <= EXACT_DISTINCT_MAX_ROWS:
        for col, _ in columns:
            if col in counted:
                continue
            found = _arrow_distinct(table.column(col))
            if found is not None:
                stats[col]["distinct"] = found
                counted.add(col)
    in_duckdb = [col for col in numbers if col not in by_arrow]
    # Exact quantiles keep every value of their column until the query ends.
    per_query = min(SCAN_MAX_COLUMNS, SCAN_VALUES_PER_QUERY // max(1, rows)) if exact and in_duckdb else SCAN_MAX_COLUMNS
    for batch in _batches(columns, per_query):
        select, layout = [], []
        for col, kind in batch:
            fam = family[kind]
            q = quote_ident(col)
            parts = {}
            if col not in counted:
                # count(DISTINCT) costs a hash table per column, ~20x HyperLogLog's time on large
                # tables; on small ones it is cheap, and HyperLogLog's error showed: 121 distinct in 120 rows.
                parts["distinct"] = f"count(DISTINCT {q})" if rows <= EXACT_DISTINCT_MAX_ROWS else f"approx_count_distinct({q})"
            if fam in ("number", "time") and col not in by_arrow:
                parts["min"], parts["max"] = f"min({q})", f"max({q})"
            if fam == "number" and col not in by_arrow:
                parts["mean"] = f"avg({q}::DOUBLE)"
                parts["std"] = f"stddev_samp({q}::DOUBLE)"
                if exact:
                    parts["quantiles"] = f"quantile_cont({q}::DOUBLE, {list(QUANTILES.values())})"
            for key, expr in parts.items():
                select.append(expr)
                layout.append((col, key))
        if select:
            row = cursor.execute(f"SELECT {', '.join(select)} FROM {quote_ident(name)}").fetchall()[0]
            for (col, key), value in zip(layout, row):
                stats[col][key] = value
        for col, _ in batch:  # an estimate may overshoot; never more distinct values than values
            stats[col]["distinct"] = min(stats[col]["distinct"], stats[col]["nonnull"])
    if not exact and in_duckdb:
        picked = -(-rows // step)  # rows 0, step, 2 x step, ...
        for batch in _batches(in_duckdb, min(SCAN_MAX_COLUMNS, SCAN_VALUES_PER_QUERY // picked)):
            cursor.register("__quantile_sample", pa.table({c: _strided(table.column(c), step, picked) for c in batch}))
            try:
                exprs = [f"quantile_cont({quote_ident(c)}::DOUBLE, {list(QUANTILES.values())})" for c in batch]
                for col, value in zip(batch, cursor.execute(f"SELECT {', '.join(exprs)} FROM __quantile_sample").fetchall()[0]):
                    stats[col]["quantiles"] = value
            finally:
                cursor.unregister("__quantile_sample")


def _contiguous(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """The column in one chunk when it is small (see CONTIGUOUS_MAX_ROWS), else as it is."""
    if column.num_chunks > 1 and len(column) <= CONTIGUOUS_MAX_ROWS:
        return pa.chunked_array([column.combine_chunks()], type=column.type)
    return column


def _arrow_distinct(column: pa.ChunkedArray) -> int | None:
    """The exact number of distinct non-null values as DuckDB's count(DISTINCT) gives it, for the types Arrow
    counts alike (None for others: DuckDB counts those)."""
    t = column.type
    if pa.types.is_floating(t):
        # DuckDB counts -0.0 and 0.0 as one value, Arrow as two; adding 0.0 turns -0.0 into 0.0 and changes nothing else.
        # (NaN never gets here: a float column holding NaN is left to DuckDB, see _arrow_number_stats.)
        if pc.any(pc.is_nan(column)).as_py():  # pyright: ignore[reportAttributeAccessIssue]  # pyarrow.compute makes its kernels at import: no stubs
            return None
        column = pc.add(column, 0.0)  # pyright: ignore[reportAttributeAccessIssue]
    elif not (pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_date(t) or pa.types.is_boolean(t)):
        return None
    return pc.count_distinct(_contiguous(column)).as_py()  # pyright: ignore[reportAttributeAccessIssue]


def _arrow_number_stats(column: pa.ChunkedArray) -> dict[str, Any] | None:
    """min, max, mean and std (sample) of an integer or float column as DuckDB's aggregates give them;
    None for other types and for columns holding NaN or infinity, which DuckDB orders and averages its own way."""
    integers = pa.types.is_integer(column.type)
    if not (integers or pa.types.is_floating(column.type)):
        return None
    low, high = _min_max(_contiguous(column))
    values = column
    if integers and low is not None and max(abs(low), abs(high)) * len(column) >= 2**62:
        values = column.cast(pa.float64(), safe=False)  # an int64 sum could overflow: as DuckDB's avg(x::DOUBLE)
    mean = pc.mean(values).as_py()  # pyright: ignore[reportAttributeAccessIssue]  # pyarrow.compute makes its kernels at import: no stubs
    if mean is not None and not math.isfinite(mean):
        return None
    return {"min": low, "max": high, "mean": mean, "std": pc.stddev(values, ddof=1).as_py()}  # pyright: ignore[reportAttributeAccessIssue]


def _min_max(column: pa.ChunkedArray) -> tuple[Any, Any]:
    """(min, max) of a number column, None for all-null. numpy reduces a float chunk without nulls
    several times faster than Arrow's NaN-aware min_max (NaN, if any, is caught by the mean)."""
    found = []
    for chunk in column.iterchunks():
        if not len(chunk) or chunk.null_count == len(chunk):
            continue
        if chunk.null_count or not pa.types.is_floating(chunk.type):
            pair = pc.min_max(chunk).as_py()  # pyright: ignore[reportAttributeAccessIssue]
            found.append((pair["min"], pair["max"]))
        else:
            values = _numpy_view(chunk)
            found.append((values.min().item(), values.max().item()))
    return (min(lo for lo, _ in found), max(hi for _, hi in found)) if found else (None, None)


_NUMPY_FLOATS = {pa.float16(): np.float16, pa.float32(): np.float32, pa.float64(): np.float64}


def _numpy_view(chunk: pa.Array) -> np.ndarray:
    """The values of an integer or floating-point Arrow array without nulls, as a numpy view of its buffer.

    Arrow's own `to_numpy` imports pandas on its first call, even where it copies nothing: 0.3 s of a
    command-line profile, which otherwise never needs pandas.
    """
    dtype = np.dtype(_NUMPY_FLOATS.get(chunk.type) or str(chunk.type))
    return np.frombuffer(chunk.buffers()[1], dtype=dtype, count=len(chunk), offset=chunk.offset * dtype.itemsize)


def _sampled_quantiles(column: pa.ChunkedArray, step: int, distinct: bool = False) -> tuple[list[float] | None, int | None]:
    """(quantile_cont of QUANTILES, with `distinct` the number of distinct values) over rows 0, step,
    2 x step, ... (nulls left out) of a column without NaN, strided in numpy chunk by chunk: no copy of the
    column, no table registered with DuckDB. Counting distinct values sorts the sample, which gives the
    quantiles too, in about the time Arrow's hash count alone took (bench.profile, 20k x 200)."""
    parts, offset = [], 0
    for chunk in column.iterchunks():
        start = -offset % step
        offset += len(chunk)
        if start < len(chunk):
            if pa.types.is_integer(chunk.type) or pa.types.is_floating(chunk.type):
                if chunk.null_count:  # nulls become NaN, by Arrow (a cast rounds as numpy's conversion did)
                    chunk = pc.fill_null(chunk.cast(pa.float64(), safe=False), math.nan)
                picked = _numpy_view(chunk)[start::step]
            else:
                picked = chunk.to_numpy(zero_copy_only=False)[start::step]  # nulls become NaN
            parts.append(picked.astype(np.float64, copy=False))
    sample = np.concatenate(parts) if parts else np.zeros(0)
    sample = sample[~np.isnan(sample)]
    if not len(sample):
        return None, 0
    # DuckDB's quantile_cont step for step: lo * (1 - d) + hi * d, its multiply and add fused (one rounding), as
    # its build computes it. numpy's interpolation differed in the last bit in 7 of 200 quantiles, which moved
    # values sitting on a rounding boundary, as quarter points between two-decimal values often do.
    positions = [(len(sample) - 1) * q for q in QUANTILES.values()]
    wanted = sorted({math.floor(p) for p in positions} | {math.ceil(p) for p in positions})
    integers = distinct and pa.types.is_integer(column.type)
    lowest = sample.min() if integers else 0.0
    if integers and sample.max() - lowest <= 8 * len(sample):
        picked, count = _ranked_integers(sample, lowest, wanted)
    elif distinct:
        picked = np.sort(sample)
        count = int(np.count_nonzero(np.diff(picked))) + 1  # -0.0 and 0.0 count once, as in DuckDB
    else:
        picked, count = np.partition(sample, wanted), None
    out = []
    for p in positions:
        low, high, d = float(picked[math.floor(p)]), float(picked[math.ceil(p)]), p - math.floor(p)
        out.append(low if low == high else float(Fraction(low) * Fraction(1 - d) + Fraction(high * d)))
    return out, count


def _ranked_integers(sample: np.ndarray, lowest: float, ranks: list[int]) -> tuple[dict[int, float], int]:
    """({rank: the value at that rank in sorted order}, the number of distinct values) of integers held as floats,
    spanning a few values a row from `lowest`: counted value by value (bincount), the values the sort would give in
    a quarter of its time (bench.profile, 20k rows spanning 100k values). The counts are cumulated block by block,
    then within the block a rank falls in: numpy's cumsum and flatnonzero over the whole span cost more than the sort."""
    block = 1024
    span = int(sample.max() - lowest) + 1
    counts = np.bincount((sample - lowest).astype(np.int64), minlength=-(-span // block) * block).reshape(-1, block)
    through = np.cumsum(counts.sum(axis=1))  # values up to the end of each block
    found = {}
    for rank, b in zip(ranks, np.searchsorted(through, ranks, side="right").tolist()):
        before = int(through[b - 1]) if b else 0
        found[rank] = lowest + b * block + int(np.searchsorted(np.cumsum(counts[b]), rank - before, side="right"))
    return found, int(np.count_nonzero(counts))


def _samples(column: pa.ChunkedArray | pa.Array | list[Any]) -> list[Any]:
    """The first SAMPLES_K distinct non-empty values (of the column's first 1,000 rows)."""
    if not isinstance(column, list):  # an Arrow column (ChunkedArray or Array)
        # Most columns find their samples in the first rows: convert those first, the rest only if needed.
        found = _samples(column.slice(0, 16).to_pylist())
        return found if len(found) == SAMPLES_K or len(column) <= 16 else _samples(column.to_pylist())
    seen: list[Any] = []
    for v in column:
        if v is not None and v != "" and v not in seen:
            seen.append(v)
            if len(seen) == SAMPLES_K:
                break
    return [_scalar(v) if not isinstance(v, str) else v[:60] for v in seen]


_ID_NAME = re.compile(r"(^id$|_id$|^id_|key$|code$|_no$|number$|^uuid)", re.IGNORECASE)  # join-key candidates by name


def build(
    tables: Mapping[str, pa.Table],
    sources: Iterable[dict[str, Any]] = (),
    workspace_path: os.PathLike | None = None,
    decided: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """profile.yaml content for a workspace's tables; a live source's table is profiled in its database
    (its snapshot table is an empty stand-in), see lib/data/live_profile.py.

    `decided` is the sources.yaml document: the joins its stewards declared or rejected are not
    proposed as candidates (declared ones stay in sources.yaml, which this never writes)."""
    return assemble(tables, profile_tables(tables, sorted(tables), sources, workspace_path), decided)


def profile_tables(
    tables: Mapping[str, pa.Table], names: Iterable[str], sources: Iterable[dict[str, Any]] = (), workspace_path: os.PathLike | None = None
) -> list[dict[str, Any]]:
    """The profiles of the tables `names` (of `tables`), in that order, each as its source says (a live one in its database)."""
    by_name = {s["name"]: s for s in sources}

    def one(name: str) -> dict[str, Any]:
        source = by_name.get(name, {})
        if source.get("type") == "sql" and source.get("mode") == "live":
            return profile_live_table(name, source, tables[name], workspace_path=Path(workspace_path) if workspace_path else None)
        return profile_table(name, tables[name], source=name if name in by_name else None, sample_values=source.get("sample_values", True))

    return [one(name) for name in names]


def assemble(tables: Mapping[str, pa.Table], profiles: Iterable[dict[str, Any]], decided: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """profile.yaml content from the tables' `profiles` (sorted by table): the join candidates found in
    `tables`, but for the pairs `decided` (the sources.yaml document) declares or rejects, and the data version."""
    profiles = sorted(profiles, key=lambda p: p["name"])
    out: dict[str, Any] = {"tables": profiles}
    rels = relationships.candidates(tables, profiles, skip=_decided_pairs(decided)) if len(tables) > 1 else []
    if rels:
        out["relationships"] = rels
    out["data_version"] = fingerprint(profiles)
    return out


def build_for(tables: Mapping[str, pa.Table], sources_doc: Mapping[str, Any] | None, workspace_path: os.PathLike | None = None) -> dict[str, Any]:
    """profile.yaml content for a workspace whose sources.yaml document is `sources_doc` (None when it has none).

    The one way callers build a workspace's profile: the sources come from the document, and the joins
    stewards declared or rejected there are not proposed again (see `build`)."""
    return build(tables, list((sources_doc or {}).get("sources") or []), workspace_path, decided=sources_doc)


def _decided_pairs(sources: Mapping[str, Any] | None) -> set[tuple[str, str]]:
    return relationships.rejected(sources) | {(r["from"], r["to"]) for r in relationships.declared(sources)}


def histogram_sql(table: str, column: str, family: str, bins: int = 20, *, days: bool = False) -> str:
    """One SELECT giving (bin_start, bin_end, rows) of a number or time column in `bins` equal-width bins, for charts.

    Each bin runs from its start to its end, so a chart draws it as wide as it is. Times are binned on their
    epoch seconds and come back as timestamps; with `days` (a DATE column) the bins are whole days (as many
    days each as `bins` bins over the span need) and come back as dates. A column of one value gets one bin
    around it (a day wide for a time).
    """
    t, c = quote_ident(table), quote_ident(column)
    if days:
        epoch = "DATE '1970-01-01'"
        return (
            f"WITH v AS (SELECT date_diff('day', {epoch}, {c}) AS x FROM {t} WHERE {c} IS NOT NULL), "
            f"b AS (SELECT min(x) AS lo, greatest(ceil((max(x) - min(x) + 1) / {bins}), 1) AS w FROM v) "
            f"SELECT {epoch} + CAST(lo + bin * w AS INTEGER) AS bin_start, {epoch} + CAST(lo + (bin + 1) * w AS INTEGER) AS bin_end, rows FROM ("
            f"SELECT lo, w, floor((x - lo) / w) AS bin, count(*) AS rows FROM v, b GROUP BY ALL) ORDER BY bin_start"
        )
    value, half = (f"epoch({c})", 43200) if family == "time" else (f"CAST({c} AS DOUBLE)", 0.5)
    at = "to_timestamp({})" if family == "time" else "{}"
    return (
        f"WITH v AS (SELECT {value} AS x FROM {t} WHERE {c} IS NOT NULL), "
        f"b AS (SELECT CASE WHEN max(x) = min(x) THEN min(x) - {half} ELSE min(x) END AS lo, "
        f"CASE WHEN max(x) = min(x) THEN max(x) + {half} ELSE max(x) END AS hi FROM v) "
        f"SELECT {at.format(f'lo + (hi - lo) * bin / {bins}')} AS bin_start, {at.format(f'lo + (hi - lo) * (bin + 1) / {bins}')} AS bin_end, rows FROM ("
        f"SELECT lo, hi, least(floor((x - lo) / (hi - lo) * {bins}), {bins - 1}) AS bin, count(*) AS rows "
        f"FROM v, b GROUP BY ALL) ORDER BY bin_start"
    )


def fingerprint(profiles: list[dict[str, Any]]) -> str:
    shape = [(p["name"], p["rows"], [(c["name"], c["type"]) for c in p["columns"]]) for p in profiles]
    return hashlib.sha256(json.dumps(shape).encode()).hexdigest()[:12]


# --------------------------------------------------------------------------- the model-facing text

# Detail is dropped in this order when the text is over budget, first for
# columns the dashboard does not use, then for those it does. Table names,
# row counts, column names and types are never dropped.
DROP_ORDER = ("rare", "samples", "quantiles", "std", "top_tail", "mean", "null_share", "distinct", "top", "minmax", "role")


def text(profile: Mapping[str, Any], budget: int | None = None, keep: Iterable[str] = ()) -> str:
    """Compact profile text for the model; with a `budget`, at most that many tokens by `tokens.estimate`.

    `keep` names columns (as `table.column` or bare `column`) that the
    dashboard references; they keep their detail longest.

    Over budget, detail is dropped in DROP_ORDER, first for the other
    columns, then for the kept ones; each kind of detail goes column by
    column (the last columns first), only as far as the budget needs, so a
    budget just short of the full text loses a little detail, not a whole
    kind of it. Then every table becomes one line of column names and
    types. If even that is over, the joins go and columns are left out, the
    kept ones last ("+N more columns"); then tables are listed without their
    columns, as many as fit ("+N more tables"). A budget too small for even
    "+N more tables" gives an empty text. The budget is a hard ceiling: the
    result is never estimated above it.
    """
    keep = set(keep)
    drops: dict[tuple[str, str], frozenset[str]] = {}
    if budget is None:
        return _render(profile, drops)
    lines: dict[tuple, Any] = {}
    counted: dict[str, tuple[int, ...]] = {}

    def within(drops_: Mapping[tuple[str, str], frozenset[str]]) -> bool:
        return tokens.estimate_lines(_render_lines(profile, drops_, lines=lines), counted) <= budget

    if within(drops):
        return _render(profile, drops, lines=lines)
    columns = [(t["name"], c["name"]) for t in profile.get("tables", []) for c in t["columns"]]
    is_kept = {key: key[1] in keep or f"{key[0]}.{key[1]}" in keep for key in columns}
    for group in ([k for k in reversed(columns) if not is_kept[k]], [k for k in reversed(columns) if is_kept[k]]):
        for item in DROP_ORDER:

            def dropping(n: int, item: str = item, group: list = group, base: dict = drops) -> dict[tuple[str, str], frozenset[str]]:
                more = dict(base)
                for key in group[:n]:
                    more[key] = more.get(key, frozenset()) | {item}
                return more

            everywhere = dropping(len(group))
            if not within(everywhere):
                drops = everywhere
                continue
            # The fewest columns losing this detail that fit (the estimate is monotone in what is dropped).
            # (Dropping nothing more is over budget here: the text so far did not fit.)
            fewest = (_largest(lambda n: not within(dropping(n)), len(group)) or 0) + 1
            while fewest < len(group) and not within(dropping(fewest)):
                fewest += 1
            return _render(profile, dropping(fewest), lines=lines)
    rendered = _render(profile, drops, names_only=True)
    if tokens.estimate(rendered) <= budget:
        return rendered
    return _fit_names(profile, keep, budget)


def names_text(profile: Mapping[str, Any]) -> str:
    """The shortest text `text` shows every table and column name in: a budget below its tokens leaves some out."""
    every = frozenset(DROP_ORDER)
    bare = _render(profile, {(t["name"], c["name"]): every for t in profile.get("tables", []) for c in t["columns"]})
    return min(bare, _render(profile, {}, names_only=True), key=tokens.estimate)


def _largest(fits, high: int) -> int | None:
    """The largest n in 0..high with fits(n), assuming fits is (nearly) monotone; None if not even fits(0)."""
    if not fits(0):
        return None
    low = 0
    while low < high:
        mid = (low + high + 1) // 2
        if fits(mid):
            low = mid
        else:
            high = mid - 1
    return low


def _rows(table: Mapping[str, Any]) -> str:
    """A table's row count as the profile text says it; None where the rows are filtered for the reader and not shown
    (`lib.data.row_profile.scoped_profile`)."""
    return f"{table['rows']} rows" if table.get("rows") is not None else "row count not shown: only your rows are queried"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _fit_names(profile: Mapping[str, Any], keep: set[str], budget: int) -> str:
    """The last resorts of `text`: some column names, then some table names, then nothing."""
    tables = list(profile.get("tables", []))
    order = [
        (t, c)
        for kept in (True, False)
        for t, table in enumerate(tables)
        for c, col in enumerate(table["columns"])
        if (col["name"] in keep or f"{table['name']}.{col['name']}" in keep) == kept
    ]

    def with_columns(n: int) -> str:
        shown = set(order[:n])
        lines = []
        for t, table in enumerate(tables):
            lines.append(f"table {table['name']} ({_rows(table)})")
            names = [f"{c['name']} {c['type']}" for i, c in enumerate(table["columns"]) if (t, i) in shown]
            hidden = len(table["columns"]) - len(names)
            if hidden:
                names.append(f"+{hidden} more columns" if names else _count(hidden, "column"))
            if names:
                lines.append("  " + ", ".join(names))
        return "\n".join(lines) + "\n"

    def tables_only(n: int) -> str:
        lines = [f"table {t['name']} ({_rows(t)}, {_count(len(t['columns']), 'column')})" for t in tables[:n]]
        if len(tables) > n:
            lines.append(f"+{len(tables) - n} more tables" if n else _count(len(tables), "table"))
        return "\n".join(lines) + "\n"

    def within(rendered: str) -> bool:
        return tokens.estimate(rendered) <= budget

    n = _largest(lambda n: within(with_columns(n)), len(order))
    if n is not None:
        return with_columns(n)
    n = _largest(lambda n: within(tables_only(n)), len(tables))
    return tables_only(n) if n is not None else ""


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e7 else f"{value:.5g}"
    if isinstance(value, str):
        value = value if len(value) <= 40 else value[:39] + "…"
        return json.dumps(value, ensure_ascii=False) if (not value or "," in value or ";" in value or value != value.strip()) else value
    return str(value)


def _join_note(rel: Mapping[str, Any]) -> str:
    """Why a join is listed: declared by a steward (see relationships.merged), or how well the values match."""
    match = f"{rel['overlap']:.0%} of values match" if rel.get("overlap") is not None else ""
    if rel.get("evidence") == "declared":
        return "declared" + (f", {match}" if match else "")
    return match


def _render(
    profile: Mapping[str, Any],
    drops: Mapping[tuple[str, str], frozenset[str]],
    names_only: bool = False,
    lines: dict[tuple, Any] | None = None,
) -> str:
    """The profile text, without the detail `drops` names for each (table, column)."""
    return "\n".join(_render_lines(profile, drops, names_only, lines)) + "\n"


def _render_lines(
    profile: Mapping[str, Any],
    drops: Mapping[tuple[str, str], frozenset[str]],
    names_only: bool = False,
    lines: dict[tuple, Any] | None = None,
) -> list[str]:
    """`_render`'s lines. `lines` keeps each column's line by what it drops: fitting a budget renders the profile a
    few dozen times with the detail of a few columns changed each time (at 1,000 columns, a quarter of a second a
    render, most of it formatting lines already formatted and estimating text already estimated)."""
    out = []
    nothing: frozenset[str] = frozenset()
    for table in profile.get("tables", []):
        out.append(f"table {table['name']} ({_rows(table)})")
        if names_only:
            out.append("  " + ", ".join(f"{c['name']} {c['type']}" for c in table["columns"]))
            continue
        for c in table["columns"]:
            drop = drops.get((table["name"], c["name"]), nothing)
            if lines is None:
                out.append(_column_line(c, drop))
                continue
            key = (table["name"], c["name"], drop)
            line = lines.get(key)
            if line is None:
                pieces = lines.get((table["name"], c["name"]))
                if pieces is None:
                    pieces = lines[(table["name"], c["name"])] = _column_pieces(c)
                line = lines[key] = _column_line(c, drop, pieces)
            out.append(line)
    rels = profile.get("relationships") or []
    if rels:
        out.append("joins")
        out.extend(f"  {r['left']} -> {r['right']} ({_join_note(r)})" for r in rels)
    return out


def _column_line(c: Mapping[str, Any], drop: frozenset[str], pieces: tuple | None = None) -> str:
    """One column's line of the profile text, without the detail `drop` names (from `_column_pieces`, when given)."""
    head, role, details, top, top_short = pieces if pieces is not None else _column_pieces(c)
    parts = [head + (role if "role" not in drop else "")]
    for item, piece in details:
        if item == "top":
            if "top" not in drop:
                parts.append(top_short if "top_tail" in drop else top)
        elif item not in drop:
            parts.append(piece)
    return "  " + "; ".join(parts)


def _column_pieces(c: Mapping[str, Any]) -> tuple:
    """The formatted pieces of a column's line, each under the detail that drops it, in the line's order."""
    role = f" {colroles.Meaning(c['role'], c.get('aggregate')).describe()}" if c.get("role") else ""
    details: list[tuple[str, str]] = []
    if c.get("null_share"):
        details.append(("null_share", f"null {c['null_share']:.0%}" if c["null_share"] >= 0.01 else "null <1%"))
    if "distinct" in c:
        details.append(("distinct", f"{c['distinct']} distinct"))
    if "min" in c:
        details.append(("minmax", f"{_fmt(c['min'])}..{_fmt(c['max'])}"))
    if "mean" in c:
        details.append(("mean", f"mean {_fmt(c['mean'])}"))
    if "std" in c:
        details.append(("std", f"sd {_fmt(c['std'])}"))
    if c.get("quantiles"):
        details.append(("quantiles", "q " + "/".join(_fmt(v) for v in c["quantiles"].values())))
    top = top_short = ""
    if c.get("top"):

        def top_text(shown: list) -> str:
            rest = c.get("other_count", 0) + sum(t["count"] for t in c["top"][len(shown) :])
            return "top " + ", ".join(f"{_fmt(t['value'])} {t['count']}" for t in shown) + (f", other {rest}" if rest else "")

        top, top_short = top_text(c["top"]), top_text(c["top"][:2])
        details.append(("top", ""))
    if c.get("rare"):
        details.append(("rare", "rare " + ", ".join(_fmt(v) for v in c["rare"])))
    if c.get("samples"):
        details.append(("samples", "e.g. " + ", ".join(_fmt(v) for v in c["samples"])))
    return f"{c['name']} {c['type']}", role, details, top, top_short
