"""Profiles of live SQL tables, computed by aggregate queries in the source database.

A live table's stand-in in the snapshot is empty (see lib/data/live.py), so
`profile.profile_table` over it would say nothing. Here the same figures are
asked of the database itself, and only aggregates come back (a row per query,
plus at most TOP_K + RARE_K + RARE_K value counts per categorical column):

- row count, and per batch of columns (SCAN_MAX_COLUMNS, so wide tables work)
  non-null count, distinct count, min/max, mean and std;
- quantiles with `percentile_cont`: exact up to EXACT_QUANTILE_MAX_ROWS rows,
  above that on a sample of about QUANTILE_SAMPLE_ROWS rows (PostgreSQL
  `TABLESAMPLE SYSTEM`, MariaDB/MySQL `WHERE RAND(seed) < share`);
- distinct counts: PostgreSQL has no built-in approximate distinct, so
  `count(DISTINCT)` is exact; Spark's `approx_count_distinct` (HyperLogLog)
  is used above the exact size; MariaDB has none either, and its
  `count(DISTINCT)` is run on that bounded sample above the same row count,
  scaled up for nearly unique columns, so it is approximate (a categorical
  column's count is then redone exactly);
- top and rare values of text and boolean columns with few distinct values,
  by GROUP BY in the database.

The result has the shape `profile.profile_table` gives, plus `approximate`:
which figures came from a sample. Sample values are left out: a database
table has no "first rows" to take them from without reading rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import pyarrow as pa

from ..core.errors import DashmemError
from . import coltypes, live
from .connectors import spark_connect, sql_wait
from .connectors.base import FetchContext, SourceError
from .live import _plain as plain
from .profile_rules import (
    CATEGORICAL_MAX_DISTINCT,
    EXACT_QUANTILE_MAX_ROWS,
    QUANTILE_SAMPLE_ROWS,
    QUANTILES,
    RARE_K,
    SCAN_MAX_COLUMNS,
    TOP_K,
    _round,
    _scalar,
    column_meaning,
    summary_fields,
)
from .sandbox import describe, first_line

if TYPE_CHECKING:
    import sqlalchemy as sa

PROFILE_TIMEOUT_S = 600.0  # a profile scans whole tables; a dashboard query's limit would cut it short


def profile_live_table(name: str, source: Mapping[str, Any], stand_in: pa.Table, *, workspace_path: Path | None = None) -> dict[str, Any]:
    """The profile of live source `source`'s table, named `name`, with the column types of its empty stand-in."""
    types = describe({name: stand_in})[name]

    limit_s = float(source.get("query_timeout_s") or PROFILE_TIMEOUT_S)
    if spark_connect.is_spark(source):
        # Maps, arrays, structs and intervals have no statistics a profile shows (nor a distinct count in Spark).
        skipped = spark_connect.unsupported_columns(stand_in)
        ctx = FetchContext(workspace_path=workspace_path or Path.cwd())
        try:
            return _profile(spark_connect.Connection(source, limit_s, ctx.secret), name, source, [t for t in types if t[0] not in skipped])  # pyright: ignore[reportArgumentType]  # the calls of a connection the profile makes
        except (spark_connect.SparkFailure, SourceError) as exc:
            raise LiveProfileError(f"{source['name']}: cannot profile the live table: {str(exc).removeprefix(source['name'] + ': ')}") from None
    from sqlalchemy.exc import SQLAlchemyError

    def attempt() -> dict[str, Any]:
        engine = live._engine(source, workspace_path)
        with engine.connect() as connection:
            # Each statement's limit, and so how long a stalled connection is waited for: the source's query_timeout_s when set.
            live._read_only(connection, engine.dialect.name, limit_s, source)
            try:
                return _profile(connection, name, source, types)
            finally:
                connection.rollback()  # nothing is ever committed

    try:
        return live.with_reconnects(source, attempt)  # a dropped connection scans again from the start, on a new one
    except SourceError as exc:
        raise LiveProfileError(str(exc)) from None
    except SQLAlchemyError as exc:
        reason = first_line(getattr(exc, "orig", None) or exc)
        if sql_wait.stalled(exc):
            reason = sql_wait.message(sql_wait.waited(exc, limit_s + sql_wait.MARGIN_S), "raise the source's query_timeout_s")
        raise LiveProfileError(f"{source['name']}: cannot profile the live table: {reason}{live._tried(exc)}") from None


def _profile(connection: sa.Connection, name: str, source: Mapping[str, Any], types: list[list[str]]) -> dict[str, Any]:
    backend = connection.dialect.name
    quote = connection.dialect.identifier_preparer.quote
    table = ".".join(quote(part) for part in source["table"].split("."))
    rows = int(connection.exec_driver_sql(f"SELECT count(*) FROM {table}").scalar_one())
    sampled = rows > EXACT_QUANTILE_MAX_ROWS
    approximate: set[str] = set()
    family = {col: coltypes.family(kind) for col, kind in types}
    stats: dict[str, dict[str, Any]] = {col: {} for col, _ in types}
    # MariaDB/MySQL have no approximate distinct: above the sample size, count(DISTINCT) runs on a bounded sample.
    distinct_from = _random_sample(table, rows) if sampled and backend not in ("postgresql", "spark") else None
    # Spark has HyperLogLog: above the exact size its approx_count_distinct (about 5 % error), a categorical column's count redone exactly.
    estimated = sampled and backend == "spark"
    for start in range(0, len(types), SCAN_MAX_COLUMNS):
        batch = types[start : start + SCAN_MAX_COLUMNS]
        select, layout = [], []
        for col, _ in batch:
            q = quote(col)
            parts = {"nonnull": f"count({q})"}
            if estimated:
                parts["distinct"] = f"approx_count_distinct({q})"
            elif distinct_from is None:
                parts["distinct"] = f"count(DISTINCT {q})"
            if family[col] in ("number", "time"):
                parts["min"], parts["max"] = f"min({q})", f"max({q})"
            if family[col] == "number":
                parts["mean"], parts["std"] = f"avg({q})", f"stddev_samp({q})"
            for key, expr in parts.items():
                select.append(expr)
                layout.append((col, key))
        row = connection.exec_driver_sql(f"SELECT {', '.join(select)} FROM {table}").one()
        for (col, key), value in zip(layout, row):
            stats[col][key] = value
        if estimated:
            approximate.add("distinct")
        if distinct_from is not None:
            approximate.add("distinct")
            exprs = [f"count({quote(col)})" for col, _ in batch] + [f"count(DISTINCT {quote(col)})" for col, _ in batch]
            found = connection.exec_driver_sql(f"SELECT {', '.join(exprs)} FROM {distinct_from}").one()
            for (col, _), seen, distinct in zip(batch, found[: len(batch)], found[len(batch) :]):
                stats[col]["distinct"] = _scaled_distinct(int(distinct), int(seen), int(stats[col]["nonnull"]))
    numbers = [col for col, _ in types if family[col] == "number"]
    if numbers:
        if sampled:
            approximate.add("quantiles")
        _quantiles(connection, backend, table, numbers, rows, quote, stats)

    limit = min(CATEGORICAL_MAX_DISTINCT, max(20, rows // 2))
    counts: dict[str, tuple[int, list[tuple[Any, int]], list[tuple[Any, int]]]] = {}
    for col, _ in types:
        # A source that switches sample values off shows no values at all, as profile.profile_table does.
        if source.get("sample_values", True) and family[col] in ("text", "boolean") and 0 < int(stats[col]["distinct"] or 0) <= limit:
            head, tail = _value_counts(connection, table, quote(col))
            # A sampled distinct count decided the column is categorical; the figure shown is exact.
            distinct = _distinct_of(connection, table, quote(col)) if distinct_from is not None or estimated else int(stats[col]["distinct"])
            counts[col] = (distinct, head, tail)

    columns = []
    for col, kind in types:
        s = stats[col]
        s["nonnull"], s["distinct"] = int(s["nonnull"]), int(s["distinct"] or 0)
        if col in counts:
            s["distinct"] = counts[col][0]
        entry: dict[str, Any] = {"name": col, "type": kind, **column_meaning(col, kind, s, rows)}
        entry["null_share"] = _round(1 - s["nonnull"] / rows) if rows else 0
        entry["distinct"] = s["distinct"]
        entry.update(summary_fields(family[col], s, scalar=lambda v: _scalar(_plain(v))))
        if col in counts:
            distinct, head, tail = counts[col]
            few = distinct <= TOP_K + RARE_K
            top = head if few else head[:TOP_K]
            entry["top"] = [{"value": _scalar(v), "count": c} for v, c in top]
            entry["other_count"] = int(s["nonnull"] - sum(c for _, c in top))
            if not few:
                entry["rare"] = [_scalar(v) for v, _ in tail]
        columns.append(entry)
    out: dict[str, Any] = {"name": name, "source": source["name"], "rows": rows, "columns": columns}
    if approximate:
        out["approximate"] = sorted(approximate)
    return out


def _quantiles(connection: sa.Connection, backend: str, table: str, numbers: list[str], rows: int, quote, stats: dict[str, dict[str, Any]]) -> None:
    """percentile_cont of each number column: over all rows up to EXACT_QUANTILE_MAX_ROWS, else over a sample."""
    fractions = list(QUANTILES.values())
    if backend == "postgresql":
        # TABLESAMPLE SYSTEM reads whole pages, a percentage of them: about QUANTILE_SAMPLE_ROWS rows, never a full scan.
        sample = f" TABLESAMPLE SYSTEM ({min(100.0, 100.0 * QUANTILE_SAMPLE_ROWS / rows):.6f}) REPEATABLE (15)" if rows > EXACT_QUANTILE_MAX_ROWS else ""
        array = "ARRAY[" + ", ".join(str(f) for f in fractions) + "]::double precision[]"
        for start in range(0, len(numbers), SCAN_MAX_COLUMNS):
            batch = numbers[start : start + SCAN_MAX_COLUMNS]
            exprs = [f"percentile_cont({array}) WITHIN GROUP (ORDER BY CAST({quote(c)} AS double precision))" for c in batch]
            for col, value in zip(batch, connection.exec_driver_sql(f"SELECT {', '.join(exprs)} FROM {table}{sample}").one()):
                stats[col]["quantiles"] = value
        return
    if backend == "spark":
        # Spark's exact `percentile` holds every value in memory; above EXACT_QUANTILE_MAX_ROWS its approximation (accuracy 10,000).
        array = "array(" + ", ".join(str(f) for f in fractions) + ")"
        for start in range(0, len(numbers), SCAN_MAX_COLUMNS):
            batch = numbers[start : start + SCAN_MAX_COLUMNS]
            function = "percentile_approx({}, {}, 10000)" if rows > EXACT_QUANTILE_MAX_ROWS else "percentile({}, {})"
            exprs = [function.format(f"CAST({quote(c)} AS DOUBLE)", array) for c in batch]
            for col, value in zip(batch, connection.exec_driver_sql(f"SELECT {', '.join(exprs)} FROM {table}").one()):
                stats[col]["quantiles"] = value
        return
    # MariaDB has percentile_cont only as a window function: one row back per column (LIMIT 1).
    source = _random_sample(table, rows) if rows > EXACT_QUANTILE_MAX_ROWS else table
    for col in numbers:
        q = quote(col)
        exprs = [f"percentile_cont({f}) WITHIN GROUP (ORDER BY {q}) OVER ()" for f in fractions]
        row = connection.exec_driver_sql(f"SELECT {', '.join(exprs)} FROM {source} WHERE {q} IS NOT NULL LIMIT 1").first()
        stats[col]["quantiles"] = list(row) if row is not None else None


def _random_sample(table: str, rows: int) -> str:
    """About QUANTILE_SAMPLE_ROWS rows drawn evenly from the whole table (the first rows would follow
    its physical order: a sequential key's quantiles came out 40% low). RAND with a seed repeats."""
    return f"(SELECT * FROM {table} WHERE RAND(15) < {QUANTILE_SAMPLE_ROWS / rows:.9f}) AS s"


def _scaled_distinct(distinct: int, seen: int, nonnull: int) -> int:
    """The table's distinct count estimated from a sample's: a column nearly unique in the sample is taken as
    unique at the same rate in the table; one that repeats is taken to have shown all its values."""
    if seen == 0:
        return 0
    if distinct >= 0.9 * seen:
        return round(distinct * nonnull / seen)
    return distinct


def _value_counts(connection: sa.Connection, table: str, q: str) -> tuple[list[tuple[Any, int]], list[tuple[Any, int]]]:
    """(head, tail) of a categorical column's value counts, counted in the database, most frequent first."""
    where = f"FROM {table} WHERE {q} IS NOT NULL GROUP BY {q}"
    head = [
        (_plain(v), int(n)) for v, n in connection.exec_driver_sql(f"SELECT {q}, count(*) {where} ORDER BY count(*) DESC, {q} LIMIT {TOP_K + RARE_K}").all()
    ]
    tail = [(_plain(v), int(n)) for v, n in connection.exec_driver_sql(f"SELECT {q}, count(*) {where} ORDER BY count(*), {q} DESC LIMIT {RARE_K}").all()]
    return head, tail[::-1]


def _distinct_of(connection: sa.Connection, table: str, q: str) -> int:
    return int(connection.exec_driver_sql(f"SELECT count(DISTINCT {q}) FROM {table}").scalar_one())


def _plain(value: Any) -> Any:

    return plain(value)


class LiveProfileError(DashmemError):
    """The live table could not be profiled (unreachable, no such table, refused); says which source."""
