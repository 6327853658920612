"""What a column means: its role (measure, dimension, time, identifier, text) and, for a measure,
how it may be aggregated, decided from its name and its values. The one place the profile and the
auto-draft take this from.

Additive measures (amounts, counts, quantities, sales) add up across rows: `sum`. Intensive ones
(rates, shares, prices, per-unit values, scores, ages, temperatures) do not: `mean`, or `median`
when a long right tail would drag the mean. Identifiers, codes and years are never aggregated.

The name is read as words (snake_case, camelCase, spaces, dashes; a unit in parentheses or after
a slash is read on its own), so "Row ID", "rowId" and "row_id" mean the same and "Package" does
not contain "age". The values decide where the name says nothing: a bounded 0..1 column is a
share, whole numbers within 1900..2100 are years, a few repeated whole numbers are a code.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Mapping

from . import coltypes

SUM, MEAN, MEDIAN = "sum", "mean", "median"
AGGREGATES = (SUM, MEAN, MEDIAN)
# Up to this many rows, the profile's distinct counts are exact; beyond, HyperLogLog estimates them (within
# about 2 %). Exact counts (DuckDB's count(DISTINCT) or Arrow's count_distinct) measured ~20x HyperLogLog's time
# at 1M rows, which made the 1M x 44 profile step 2x slower (bench.profile): cheap only on smaller tables.
EXACT_DISTINCT_MAX_ROWS = 100_000
ESTIMATED_ALL_DISTINCT = 0.95  # an estimated count this close to the rows counts as every value distinct
CODE_MAX_DISTINCT = 12  # a whole-number column with at most this many values, each repeated, is a code
SKEWED = 1.5  # mean above this many times the median: a few large values would dominate an average


@dataclass(frozen=True)
class Meaning:
    role: str  # measure, dimension, time, identifier or text
    aggregate: str | None = None  # sum, mean or median, for a measure only

    @property
    def additive(self) -> bool:
        return self.aggregate == SUM

    def describe(self) -> str:
        """'measure (intensive, mean)', 'measure (additive, sum)', or the role alone."""
        if self.aggregate is None:
            return self.role
        return f"{self.role} ({'additive' if self.additive else 'intensive'}, {self.aggregate})"


# Words that label or locate rather than measure: anywhere in the name.
_IDENTIFYING = {
    "id",
    "ids",
    "uuid",
    "guid",
    "zip",
    "zipcode",
    "postal",
    "postcode",
    "phone",
    "fax",
    "bbl",
    "fips",
    "isbn",
    "sku",
    "ssn",
    "latitude",
    "longitude",
    "lat",
    "lon",
    "lng",
    "coordinate",
    "coordinates",
    "coord",
    "geoid",
}
# Words that identify when they end the name: "Order No", "Phone Number", "Unique Key", "Country Code".
_IDENTIFYING_LAST = {"key", "code", "no", "nr", "number", "num", "ref", "hash"}
_YEAR = {"year", "yr", "fy", "yyyy"}
_CYCLE = {"month", "week", "weekday", "dow", "day", "hour", "minute", "quarter", "qtr"}
# Said outright: an average or a rate is intensive whatever else the name says ("average sales").
_INTENSIVE_STRONG = {
    "per",
    "avg",
    "average",
    "mean",
    "median",
    "rate",
    "rates",
    "ratio",
    "pct",
    "percent",
    "percentage",
    "share",
    "proportion",
    "fraction",
    "margin",
    "attainment",
}
# Said outright: a total or a count adds up ("total price", "number of orders", "discount amount").
_ADDITIVE_STRONG = {"total", "sum", "count", "counts", "cnt", "amount", "amt", "qty", "quantity", "quantities"}
_INTENSIVE = {
    "price",
    "prices",
    "score",
    "scores",
    "rating",
    "ratings",
    "grade",
    "index",
    "age",
    "tenure",
    "temperature",
    "temp",
    "humidity",
    "pressure",
    "speed",
    "velocity",
    "mpg",
    "kpl",
    "horsepower",
    "hp",
    "displacement",
    "acceleration",
    "efficiency",
    "density",
    "discount",
    "probability",
    "likelihood",
    "yield",
    "growth",
    "level",
    "bmi",
    "height",
    "weight",
    "length",
    "width",
    "depth",
    "duration",
    "latency",
    "elapsed",
    "delay",
    "wait",
    "days",
    "accuracy",
    "utilization",
    "occupancy",
    "satisfaction",
    "balance",
    "capacity",
    "size",
    "fare",
    "fares",
}
_ADDITIVE = {
    "sales",
    "sale",
    "revenue",
    "revenues",
    "turnover",
    "income",
    "profit",
    "profits",
    "loss",
    "losses",
    "gain",
    "gains",
    "cost",
    "costs",
    "spend",
    "spending",
    "expense",
    "expenses",
    "fee",
    "fees",
    "tax",
    "taxes",
    "payment",
    "payments",
    "paid",
    "sold",
    "units",
    "orders",
    "visits",
    "views",
    "clicks",
    "impressions",
    "sessions",
    "downloads",
    "volume",
    "gdp",
    "value",
    "population",
    "deaths",
    "cases",
    "births",
    "bookings",
    "shipments",
    "tons",
    "tonnes",
    "calls",
    "complaints",
    "incidents",
    "trips",
    "riders",
    "passengers",
    "customers",
    "users",
    "items",
    "hits",
    "budget",
    "funding",
    "donations",
    "emissions",
    "consumption",
    "production",
    "exports",
    "imports",
    "wages",
    "salary",
    "salaries",
    "pieces",
    "stock",
    "inventory",
    "tip",
    "tips",
    "actual",
    "actuals",
    "target",
    "targets",
    "forecast",
    "planned",
}
# Units read from "(%)", "[°C]", "km/h": the same vocabulary, plus symbols.
_INTENSIVE_UNITS = {"%", "°c", "°f", "c", "f", "degc", "degf", "celsius", "fahrenheit", "mph", "kmh", "km/h", "m/s", "rpm", "ppm", "bps"}
_ADDITIVE_UNITS = {"#", "count", "n", "units", "pcs"}

_PARENS = re.compile(r"[(\[]([^)\]]*)[)\]]")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def words(name: str) -> tuple[list[str], list[str]]:
    """The words of a column name and of its units: 'Unit Price (USD)' -> (['unit', 'price'], ['usd'])."""
    units = [u.strip().lower() for u in _PARENS.findall(name) if u.strip()]
    bare = _PARENS.sub(" ", name)
    if "%" in bare:
        units.append("%")
    if "#" in bare:
        units.append("#")
    if "/" in bare:  # 'miles/gallon', 'km/h': a quantity per another
        units.append("per")
    split = _CAMEL.sub(" ", bare)
    return [w for w in re.split(r"[^0-9A-Za-z]+", split.lower()) if w], units


def classify(name: str, duckdb_type: str, stats: Mapping[str, Any], rows: int | None = None) -> Meaning:
    """The column's role and, for a measure, its aggregation.

    `stats` are the profile's figures for the column: nonnull, distinct, min, max, mean and
    quantiles (a p05..p95 dict or the same five values in a list); any may be missing.
    """
    fam = coltypes.family(duckdb_type)
    ws, units = words(name)
    wordset = set(ws)
    nonnull = int(stats.get("nonnull") or 0)
    distinct = int(stats.get("distinct") or 0)
    rows = nonnull if rows is None else rows
    low, high = _number(stats.get("min")), _number(stats.get("max"))
    unique = nonnull > 20 and distinct >= 0.95 * nonnull
    identifying = bool(wordset & _IDENTIFYING) or (bool(ws) and ws[-1] in _IDENTIFYING_LAST) or ws[:1] == ["id"] or {"computed", "region"} <= wordset

    if fam == "time":
        return Meaning("time")
    if fam == "boolean":
        return Meaning("dimension")
    if fam == "text":
        if identifying:
            return Meaning("identifier")
        if distinct <= max(50, rows // 20):
            return Meaning("dimension")
        return Meaning("identifier" if unique else "text")
    if fam != "number":
        return Meaning("text")

    whole = _whole(duckdb_type, stats)
    if wordset & _YEAR and not wordset & (_INTENSIVE_STRONG | _ADDITIVE_STRONG) and low is not None and high is not None:
        if 1800 <= low and high <= 2200 or (whole and 0 <= low and high <= 99):
            return Meaning("time")  # a year (or a two-digit one): a period, never a sum
    if identifying and not wordset & (_ADDITIVE_STRONG | _INTENSIVE_STRONG):
        return Meaning("identifier")
    if (ws[:1] in (["number"], ["n"], ["no"]) and "of" in wordset) or ws[:1] == ["num"]:
        return Meaning("measure", SUM)  # 'number of orders', 'num_children'
    if whole and wordset & _CYCLE and not wordset & (_ADDITIVE_STRONG | _INTENSIVE_STRONG) and high is not None and high <= 60:
        return Meaning("dimension")  # month 1..12, hour 0..23: a place in a cycle, not an amount

    kind = _kind_from_words(wordset, units)
    if kind is None:
        kind = _kind_from_values(duckdb_type, stats, whole, low, high, nonnull, distinct)
        if kind in ("time", "dimension", "identifier"):
            return Meaning(kind)
    if kind == SUM:
        return Meaning("measure", SUM)
    return Meaning("measure", MEDIAN if _skewed(stats, low) else MEAN)


def _kind_from_words(wordset: set[str], units: list[str]) -> str | None:
    """'sum' or 'mean' when the name (or its unit) says, else None."""
    unit_words = {w for u in units for w in [u, *re.split(r"[^0-9a-z%#°/]+", u)] if w}
    if wordset & _INTENSIVE_STRONG or unit_words & (_INTENSIVE_UNITS | _INTENSIVE_STRONG):
        return MEAN
    if wordset & _ADDITIVE_STRONG or unit_words & _ADDITIVE_UNITS:
        return SUM
    if "unit" in wordset and wordset & {"cost", "costs", "price", "value", "revenue", "profit"}:
        return MEAN  # 'unit cost': per unit
    if wordset & _INTENSIVE:
        return MEAN
    if wordset & _ADDITIVE:
        return SUM
    return None


def _kind_from_values(duckdb_type: str, stats: Mapping[str, Any], whole: bool, low, high, nonnull: int, distinct: int) -> str:
    """Where the name says nothing: years, codes and row numbers are not measures; anything else is averaged,
    because an average of something additive misleads less than a total of something that is not."""
    if low is None or high is None:
        return MEAN
    if whole and 1900 <= low and high <= 2100:
        return "time"
    if low >= 0 and high <= 1:
        return MEAN  # a share, or a 0/1 flag whose mean is the share of rows that have it
    if whole and 0 < distinct <= CODE_MAX_DISTINCT and nonnull >= 3 * distinct and low >= 0:
        return "dimension"  # a few repeated whole numbers: categories written as codes
    close = 0.999 if nonnull <= EXACT_DISTINCT_MAX_ROWS else ESTIMATED_ALL_DISTINCT
    if whole and nonnull > 20 and distinct >= nonnull * close and high - low + 1 <= nonnull * 1.001:
        return "identifier"  # 1..n: a row number (min and max are exact, so the range is the evidence)
    return MEAN


def _whole(duckdb_type: str, stats: Mapping[str, Any]) -> bool:
    """Whole numbers: an integer type, or a decimal column whose range and quantiles are all whole."""
    base = duckdb_type.upper().split("(")[0].strip()
    if base in ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT"):
        return True
    figures = [_number(stats.get("min")), _number(stats.get("max")), *_quantiles(stats)]
    return all(f is not None and float(f).is_integer() for f in figures)


def _quantiles(stats: Mapping[str, Any]) -> list[float | None]:
    q = stats.get("quantiles")
    if isinstance(q, Mapping):
        return [_number(v) for v in q.values()]
    if isinstance(q, (list, tuple)):
        return [_number(v) for v in q]
    return []


def _skewed(stats: Mapping[str, Any], low: float | None) -> bool:
    """A long right tail over non-negative values: the median says more than the mean."""
    mean = _number(stats.get("mean"))
    q = stats.get("quantiles")
    p50 = _number(q.get("p50")) if isinstance(q, Mapping) else _number(q[2]) if isinstance(q, (list, tuple)) and len(q) == 5 else None
    return low is not None and low >= 0 and mean is not None and p50 is not None and p50 > 0 and mean > SKEWED * p50


def _number(value: Any) -> float | None:
    """A finite number, else None (dates, text and missing figures)."""
    if value is None or isinstance(value, (bool, str)):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def of_profile_column(column: Mapping[str, Any], rows: int) -> Meaning:
    """The meaning of a profile.yaml column entry: its recorded aggregate, else classified from its figures
    (profiles written before aggregates were recorded)."""
    role = column.get("role") or "text"
    if role != "measure":
        return Meaning(role)
    if column.get("aggregate") in AGGREGATES:
        return Meaning("measure", column["aggregate"])
    stats = {**column, "nonnull": round(rows * (1 - (column.get("null_share") or 0)))}
    found = classify(column["name"], column.get("type") or "DOUBLE", stats, rows)
    return found if found.role == "measure" else Meaning("measure", MEAN)
