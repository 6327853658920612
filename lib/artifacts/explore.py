"""Explore without a model: a question builder over a workspace's profile, in the spirit of Metabase's.

A viewer with no API key picks a table, a measure and its aggregation, a
breakdown, a time grain and filters, all offered from profile.yaml (roles and
additivity from `lib.data.colroles`, as the profile recorded them). This module

- says what may be asked (`catalogue`): per table the measures and the
  aggregations each allows (a sum only where the measure adds up; never on an
  identifier or a year), the breakdowns (dimensions), the time columns and
  their grains, and the filter operators of each column;
- writes the SQL of a `Question` (`build`): every table and column name is
  checked against the profile and quoted, every filter value is a `$name`
  parameter, never text in the SQL;
- runs it like a dashboard query (`run`): through the workspace's query engine
  (`lib.data.engine`), so in the sandbox, read-only, or read-only in a live source's
  database, with a row cap;
- picks a chart for the result (`pick_chart`): a time grain draws a line, a
  breakdown a bar chart sorted by value (top N), a single value a KPI card;
  the spec is an ordinary dashboard component, drawn by the same renderer;
- saves it (`save_to_draft`, stewards and owners): the component appended to
  the person's draft dashboard, the workspace checks run on the result first,
  and nothing saved if any check fails with an error.

A saved component cannot keep parameters of its own (a dashboard binds only
its filters' values), so its SQL carries the filter values as literals, built
as sqlglot literals (typed and escaped by the SQL generator, never by string
pasting) and shown to the steward before saving.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..core.diagnostics import ERROR, ValidationFailed
from ..core.errors import DashmemError
from ..data import colroles, coltypes
from ..data.engine import Engine
from ..data.sandbox import QueryResult, quote_ident
from ..memory import workspace
from ..repo.drafts import DraftChanged
from ..roles import access
from . import checks
from .autodraft import PERIOD_FORMATS, _category_colors, _thresholds, alias
from .components import chart, kpi

if TYPE_CHECKING:
    from pathlib import Path

    import pyarrow as pa

    from ..core.diagnostics import Diagnostic
    from ..repo.configrepo import ConfigRepo
    from ..roles.access import User

COUNT, COUNT_DISTINCT, SUM, AVG, MIN, MAX, MEDIAN = "count", "count_distinct", "sum", "avg", "min", "max", "median"
AGGREGATIONS = (COUNT, COUNT_DISTINCT, SUM, AVG, MIN, MAX, MEDIAN)
_SQL = {COUNT: "count", SUM: "sum", AVG: "avg", MIN: "min", MAX: "max", MEDIAN: "median"}
AGGREGATION_TITLES = {COUNT: "Count", COUNT_DISTINCT: "Distinct", SUM: "Sum", AVG: "Average", MIN: "Minimum", MAX: "Maximum", MEDIAN: "Median"}
GRAINS = ("day", "week", "month", "quarter", "year")
ROWS = None  # the measure "number of rows": count(*)

# Filter operators, a small fixed set. Which apply depends on the column's type family.
EQ, NE, LT, LE, GT, GE, IN, BETWEEN, CONTAINS, IS_NULL, NOT_NULL = "=", "!=", "<", "<=", ">", ">=", "in", "between", "contains", "is empty", "is not empty"
_COMPARE = (EQ, NE, LT, LE, GT, GE, BETWEEN)
OPERATORS = {"number": _COMPARE + (IS_NULL, NOT_NULL), "time": _COMPARE + (IS_NULL, NOT_NULL), "text": (EQ, NE, IN, CONTAINS, IS_NULL, NOT_NULL)}
OPERATORS["boolean"] = (EQ, NE, IS_NULL, NOT_NULL)
OPERATORS["other"] = (IS_NULL, NOT_NULL)

TOP_N = 15  # bars (or lines) a breakdown shows: the largest values
MAX_ROWS = 5000  # the row cap of an exploration's result, below the workspace's own cap when that is lower
DISTINCT_VALUES = 200  # options offered for a filter value
# A saved component carries its filter values as SQL text (see the module's docstring): bounded, so a pasted
# megabyte does not land in dashboard.yaml and get parsed at every render.
MAX_VALUE_CHARS = 10_000  # characters of one filter value
MAX_VALUES = 1_000  # values of one `in` filter


class ExploreError(DashmemError, ValueError):
    """A question names something the profile does not have, or a filter value does not fit its column."""


# --------------------------------------------------------------------------- what may be asked


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    role: str
    additive: bool = False  # a measure whose values add up across rows (colroles)

    @property
    def family(self) -> str:
        return coltypes.family(self.type)


@dataclass
class TableChoices:
    name: str
    rows: int
    columns: dict[str, Column]
    live: bool = False  # queried in its source database (no median there: MariaDB lacks it)

    @property
    def measures(self) -> list[str]:
        """Numeric columns that make sense to aggregate (the profile's measures)."""
        return [c.name for c in self.columns.values() if c.role == "measure"]

    @property
    def countables(self) -> list[str]:
        """Columns worth counting the distinct values of: identifiers and dimensions."""
        return [c.name for c in self.columns.values() if c.role in ("identifier", "dimension")]

    @property
    def breakdowns(self) -> list[str]:
        return [c.name for c in self.columns.values() if c.role == "dimension"]

    @property
    def times(self) -> list[str]:
        return [c.name for c in self.columns.values() if c.role == "time"]

    def column(self, name: str | None, what: str) -> Column:
        if name not in self.columns:
            known = ", ".join(self.columns) or "none"
            raise ExploreError(f"{what} {name!r} is not a column of table {self.name!r} in the data profile; its columns: {known}")
        return self.columns[name]

    def aggregations(self, measure: str | None) -> tuple[str, ...]:
        """What a column may be aggregated with: a sum only for an additive measure; identifiers, codes,
        dimensions and years are counted, never summed or averaged."""
        if measure is None:
            return (COUNT,)
        col = self.column(measure, "measure")
        if col.role == "measure":
            allowed = (COUNT, COUNT_DISTINCT) + ((SUM,) if col.additive else ()) + (AVG, MIN, MAX) + (() if self.live else (MEDIAN,))
            return allowed
        if col.role == "time":
            return (COUNT, COUNT_DISTINCT, MIN, MAX)
        return (COUNT, COUNT_DISTINCT)

    def grains(self, time: str) -> tuple[str, ...]:
        """A date is truncated to a grain; a numeric period (a year) is its own, so only 'year'."""
        col = self.column(time, "time column")
        if col.role != "time":
            raise ExploreError(f"{time!r} is not a time column of {self.name!r}; its time columns: {', '.join(self.times) or 'none'}")
        return GRAINS if col.family == "time" else ("year",)

    def operators(self, column: str) -> tuple[str, ...]:
        return OPERATORS[self.column(column, "filter column").family]


def catalogue(files: Mapping[str, Any]) -> dict[str, TableChoices]:
    """The tables of the workspace's profile and what may be asked of each."""
    live = {s.get("name") for s in (files.get("sources") or {}).get("sources") or [] if isinstance(s, dict) and s.get("mode") == "live"}
    out: dict[str, TableChoices] = {}
    for table in (files.get("profile") or {}).get("tables") or []:
        rows = int(table.get("rows") or 0)
        columns = {}
        for c in table.get("columns") or []:
            meaning = colroles.of_profile_column(c, rows)
            columns[c["name"]] = Column(c["name"], str(c.get("type") or "VARCHAR"), meaning.role, meaning.additive)
        out[table["name"]] = TableChoices(table["name"], rows, columns, table.get("source") in live or table["name"] in live)
    return out


# --------------------------------------------------------------------------- the question and its SQL


@dataclass(frozen=True)
class Filter:
    column: str
    op: str
    value: Any = None  # a (low, high) pair for `between`, a list for `in`, nothing for the empty tests


@dataclass(frozen=True)
class Question:
    table: str
    measure: str | None = ROWS
    aggregation: str = COUNT
    breakdown: str | None = None
    time: str | None = None
    grain: str | None = None
    filters: tuple[Filter, ...] = ()
    top: int = TOP_N


@dataclass
class Built:
    sql: str
    params: dict[str, Any]
    value: str = "value"  # the result's column names
    period: str | None = None
    grain: str | None = None
    period_is_date: bool = False  # a date truncated to a grain, not a numeric period such as a year
    group: str | None = None
    literal_sql: str = ""  # the same query with the values as SQL literals: what a saved component carries
    title: str = ""
    follows: list[str] = field(default_factory=list)  # ids of the dashboard filters whose `$id` the query binds (BarFilter)


def build(question: Question, tables: Mapping[str, TableChoices], bar: Sequence[BarFilter] = (), follow_bar: bool = False) -> Built:
    """The SQL of a question; every name checked against the profile and quoted, every value a parameter.

    `bar` (a dashboard's filters, `bar_filters`) is for the query a saved component carries: a
    question's `=`/`in` (or `between`, for a range) on a column that a filter of the bar drives
    is written as that filter's `$id` condition, as the dashboard's own queries are, so the
    component follows the bar; with `follow_bar`, so does every column of the table that the
    bar drives and the question leaves unfiltered.
    """
    table = tables.get(question.table)
    if table is None:
        raise ExploreError(f"table {question.table!r} is not in the data profile; its tables: {', '.join(tables) or 'none'}")
    if question.aggregation not in table.aggregations(question.measure):
        allowed = ", ".join(table.aggregations(question.measure))
        what = "the row count" if question.measure is None else repr(question.measure)
        raise ExploreError(f"{question.aggregation!r} does not make sense for {what}; it may be aggregated with: {allowed}")
    if not 1 <= question.top <= 1000:
        raise ExploreError("the number of groups shown must be between 1 and 1000")

    value_expr = _value_expr(question)
    select: list[str] = []
    built = Built("", {})
    group_col = None
    if question.time is not None:
        time_col = table.column(question.time, "time column")
        grain = question.grain or ("month" if time_col.family == "time" else "year")
        if grain not in table.grains(question.time):
            raise ExploreError(f"grain {grain!r} does not apply to {question.time!r}; its grains: {', '.join(table.grains(question.time))}")
        question = replace(question, grain=grain)
        built.grain = grain
        period = f"date_trunc('{grain}', {quote_ident(time_col.name)})" if time_col.family == "time" else quote_ident(time_col.name)
        select.append(f"{period} AS period")
        built.period, built.period_is_date = "period", time_col.family == "time"
    if question.breakdown is not None:
        group_col = table.column(question.breakdown, "breakdown")
        if group_col.role not in ("dimension", "identifier", "time") and group_col.family not in ("text", "boolean"):
            raise ExploreError(f"{group_col.name!r} is a {group_col.role}, not a category to break down by; its categories: {', '.join(table.breakdowns)}")
        built.group = _group_alias(group_col.name)
        select.append(f"{quote_ident(group_col.name)} AS {quote_ident(built.group)}")
    select.append(f"{value_expr} AS value")

    # Unquoted names are case-insensitive in SQL: a filter's `site` drives the profile's `Site`.
    names = {c.lower(): c for c in table.columns}
    driven = {names[b.column.lower()]: b for b in bar if b.table.lower() == table.name.lower() and b.column.lower() in names}
    kept = [f for f in question.filters if not _follows(f, driven.get(f.column))]
    conditions, params = _where(kept, table)
    followed = {f.column: driven[f.column] for f in question.filters if f not in kept}
    if follow_bar:
        filtered = {f.column for f in question.filters}
        followed |= {column: b for column, b in driven.items() if column not in filtered}
    conditions += [b.condition(column) for column, b in followed.items()]
    built.follows = [b.id for b in followed.values()]
    built.params = params
    where = " AND ".join(conditions)
    source = f"FROM {quote_ident(table.name)}" + (f" WHERE {where}" if where else "")
    n_groups = len(select) - 1
    group_by = f" GROUP BY {', '.join(str(i) for i in range(1, n_groups + 1))}" if n_groups else ""
    if built.period and group_col is not None:
        # A line per group, for the top groups by the measure over the whole span: a join onto them, not
        # `IN (... LIMIT n)`, which MariaDB does not run.
        top_col = next(n for n in (f"explore_top{'_' * i}" for i in range(len(table.columns) + 1)) if n not in table.columns)
        top = f"SELECT {quote_ident(group_col.name)} AS {quote_ident(top_col)} {source} GROUP BY 1 ORDER BY {value_expr} DESC LIMIT {question.top}"
        joined = f"FROM {quote_ident(table.name)} JOIN ({top}) AS explore_groups ON {quote_ident(group_col.name)} = {quote_ident(top_col)}"
        scoped = joined + (f" WHERE {where}" if where else "")
        built.sql = f"SELECT {', '.join(select)} {scoped}{group_by} ORDER BY 1, 2"
    elif built.period:
        built.sql = f"SELECT {', '.join(select)} {source}{group_by} ORDER BY 1"
    elif group_col is not None:
        built.sql = f"SELECT {', '.join(select)} {source}{group_by} ORDER BY value DESC LIMIT {question.top}"
    else:
        built.sql = f"SELECT {', '.join(select)} {source}"
    built.literal_sql = _with_literals(built.sql, params)
    built.title = title(question)
    return built


def _value_expr(question: Question) -> str:
    if question.measure is None:
        return "count(*)"
    col = quote_ident(question.measure)
    if question.aggregation == COUNT_DISTINCT:
        return f"count(DISTINCT {col})"
    return f"{_SQL[question.aggregation]}({col})"


def _group_alias(name: str) -> str:
    """The breakdown's column in the result (and the chart's field); never one of the result's own names."""
    text = alias(name)
    return f"{text}_group" if text in ("value", "period") else text


def title(question: Question) -> str:
    """'Sum of sales by region per month', 'Number of rows'."""
    if question.measure is None:
        head = "Number of rows"
    elif question.aggregation == COUNT_DISTINCT:
        head = f"Distinct {_label(question.measure)}"
    else:
        head = f"{AGGREGATION_TITLES[question.aggregation]} of {_label(question.measure)}"
    if question.breakdown:
        head += f" by {_label(question.breakdown)}"
    if question.time:
        head += f" per {question.grain or 'period'}"
    return head


def _label(name: str) -> str:
    return re.sub(r"[_\s]+", " ", name).strip().lower()


# --------------------------------------------------------------------------- the dashboard's filter bar


@dataclass(frozen=True)
class BarFilter:
    """A filter of the dashboard and the one column it narrows: the column its options (or bounds) are read from."""

    id: str
    type: str
    table: str
    column: str

    def condition(self, column: str) -> str:
        """The condition the dashboard's own queries use for it on `column` (its name in the profile): true while it is unset."""
        col, fid = quote_ident(column), self.id
        if self.type == "multiselect":
            return f"(${fid} IS NULL OR list_contains(${fid}, {col}))"
        if self.type == "select":
            return f"(${fid} IS NULL OR {col} = ${fid})"
        return f"(${fid}_from IS NULL OR {col} >= ${fid}_from) AND (${fid}_to IS NULL OR {col} <= ${fid}_to)"


def bar_filters(dashboard: Mapping[str, Any]) -> list[BarFilter]:
    """The dashboard's filters whose options_query (a select's) or bounds_query (a range's) reads one column of one table.

    `SELECT DISTINCT site FROM gates ORDER BY 1` drives gates.site; `SELECT min("Year"), max("Year") FROM gdp`
    drives gdp.Year. A filter whose query is anything else (a join, an expression, a subquery) drives no
    column that is known for certain, so nothing follows it.
    """
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import ParseError

    out = []
    for f in dashboard.get("filters") or []:
        kind = f.get("type")
        sql = f.get("options_query") if kind in ("select", "multiselect") else f.get("bounds_query")
        if not isinstance(sql, str) or not isinstance(f.get("id"), str):
            continue
        try:
            tree = sqlglot.parse_one(sql, read="duckdb")
        except ParseError:
            continue
        source = tree.args.get("from_") or tree.args.get("from")
        if not isinstance(tree, exp.Select) or source is None or not isinstance(source.this, exp.Table) or tree.args.get("joins"):
            continue
        wanted = (exp.Min, exp.Max) if kind in ("date_range", "number_range") else ()
        columns = set()
        for projection in tree.expressions:
            node = projection.this if isinstance(projection, exp.Alias) else projection
            if wanted and isinstance(node, wanted):
                node = node.this
            columns.add(node.name if isinstance(node, exp.Column) and not node.table else None)
        if len(columns) == 1 and None not in columns:
            out.append(BarFilter(f["id"], kind, source.this.name, columns.pop()))
    return out


def _follows(f: Filter, bar: BarFilter | None) -> bool:
    """Whether a question's filter is what the bar's filter chooses: a value or values of its column, or a range of it."""
    if bar is None:
        return False
    return (bar.type in ("select", "multiselect") and f.op in (EQ, IN)) or (bar.type in ("date_range", "number_range") and f.op == BETWEEN)


# --------------------------------------------------------------------------- filters


def _where(filters: Sequence[Filter], table: TableChoices) -> tuple[list[str], dict[str, Any]]:
    """Conditions with `$f0`, `$f1`, ... for the values, and the values."""
    conditions, params = [], {}
    for i, f in enumerate(filters):
        col = table.column(f.column, "filter column")
        if f.op not in OPERATORS[col.family]:
            raise ExploreError(f"filter on {col.name!r}: operator {f.op!r} does not apply to it; its operators: {', '.join(OPERATORS[col.family])}")
        ident, name = quote_ident(col.name), f"f{i}"
        if f.op == IS_NULL:
            conditions.append(f"{ident} IS NULL")
        elif f.op == NOT_NULL:
            conditions.append(f"{ident} IS NOT NULL")
        elif f.op == BETWEEN:
            low, high = _pair(col, f.value)
            params[f"{name}_from"], params[f"{name}_to"] = low, high
            conditions.append(f"{ident} BETWEEN ${name}_from AND ${name}_to")
        elif f.op == IN:
            sent = f.value if isinstance(f.value, (list, tuple)) else [f.value]
            if len(sent) > MAX_VALUES:
                raise ExploreError(f"filter on {col.name!r}: {len(sent):,} values; 'in' takes at most {MAX_VALUES:,}")
            items = [_coerce(col, v) for v in sent]
            if not items:
                raise ExploreError(f"filter on {col.name!r}: choose at least one value")
            params[name] = items
            conditions.append(f"list_contains(${name}, {ident})")
        elif f.op == CONTAINS:
            params[name] = _short(col, str(f.value if f.value is not None else ""))
            conditions.append(f"strpos(lower({ident}), lower(${name})) > 0")
        else:
            params[name] = _coerce(col, f.value)
            conditions.append(f"{ident} {'<>' if f.op == NE else f.op} ${name}")
    return conditions, params


def _pair(col: Column, value: Any) -> tuple[Any, Any]:
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise ExploreError(f"filter on {col.name!r}: 'between' takes two values, a low and a high one")
    return _coerce(col, value[0]), _coerce(col, value[1])


def _coerce(col: Column, value: Any) -> Any:
    """A filter value as its column's type, so it compares as the column does; a clear error when it cannot be."""
    if value is None or (isinstance(value, str) and not value.strip() and col.family != "text"):
        raise ExploreError(f"filter on {col.name!r}: enter a value (or use 'is empty')")
    try:
        if col.family == "number":
            if isinstance(value, bool):
                raise ValueError
            if isinstance(value, (int, float)):
                return _finite(col, value)
            text = str(value).strip().replace(",", "")
            return _finite(col, int(text) if re.fullmatch(r"[+-]?\d+", text) else float(text))
        if col.family == "time":
            if isinstance(value, dt.datetime):
                return value
            if isinstance(value, dt.date):
                return value if col.type.upper() == "DATE" else dt.datetime.combine(value, dt.time())
            text = str(value).strip()
            return dt.date.fromisoformat(text) if col.type.upper() == "DATE" and len(text) <= 10 else dt.datetime.fromisoformat(text)
        if col.family == "boolean":
            if isinstance(value, bool):
                return value
            return {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}[str(value).strip().lower()]
    except ExploreError:  # already says what does not fit (a ValueError too)
        raise
    except (ValueError, KeyError):
        kind = {"number": "a number", "time": "a date (YYYY-MM-DD)", "boolean": "true or false"}[col.family]
        shown = str(value) if len(str(value)) <= 60 else f"{str(value)[:40]}… ({len(str(value)):,} characters)"
        raise ExploreError(f"filter on {col.name!r}: {shown!r} is not {kind}") from None
    return _short(col, value if isinstance(value, str) else str(value))


def _short(col: Column, text: str) -> str:
    if len(text) > MAX_VALUE_CHARS:
        raise ExploreError(f"filter on {col.name!r}: a value of {len(text):,} characters; at most {MAX_VALUE_CHARS:,}")
    return text


def _finite(col: Column, number: int | float) -> int | float:
    """A number a query can both bind and carry as a literal: a NaN saves as NULL and infinity as a column
    name `inf`, and DuckDB binds no integer beyond 128 bits, so the saved component would say something else."""
    if (isinstance(number, float) and not math.isfinite(number)) or (isinstance(number, int) and abs(number) >= 2**127):
        raise ExploreError(f"filter on {col.name!r}: {str(number)!r} is not a finite number DuckDB can compare")
    return number


def _with_literals(sql: str, params: Mapping[str, Any]) -> str:
    """`sql` with each `$name` parameter replaced, in sqlglot's parse tree, by its value as a literal node,
    which sqlglot's generator quotes and escapes: no value is ever pasted into the text."""
    import sqlglot
    from sqlglot import exp

    def literal(value: Any) -> exp.Expr:
        if isinstance(value, (list, tuple)):
            return exp.Array(expressions=[literal(v) for v in value])
        if isinstance(value, dt.datetime):
            return exp.cast(exp.Literal.string(value.isoformat(sep=" ")), "TIMESTAMP")
        if isinstance(value, dt.date):
            return exp.cast(exp.Literal.string(value.isoformat()), "DATE")
        return exp.convert(value)

    tree = sqlglot.parse_one(sql, read="duckdb")
    for node in list(tree.find_all(exp.Placeholder, exp.Parameter)):
        if node.name in params:  # a dashboard filter's `$id` (build's `bar`) stays a parameter
            node.replace(literal(params[node.name]))
    return tree.sql(dialect="duckdb")


# --------------------------------------------------------------------------- running it


def _limits(files: Mapping[str, Any]) -> tuple[int, float]:
    injection = (files.get("output") or {}).get("data_injection") or {}
    return min(int(injection.get("max_rows_per_query", MAX_ROWS)), MAX_ROWS), float(injection.get("query_timeout_s", 10))


def run(
    question: Question,
    files: Mapping[str, Any],
    tables: Mapping[str, pa.Table],
    version: str,
    *,
    workspace_path: Path | None = None,
    cache: Any = None,
    user: access.User | None = None,
) -> tuple[Built, QueryResult]:
    """Build the question's SQL and run it as a dashboard query runs: through the query engine
    (sandboxed and read-only, or read-only in a live source's database), with the row cap, as `user`: their row
    filters (workspace.yaml's `row_filters`) hold."""

    built = build(question, catalogue(files))
    max_rows, timeout_s = _limits(files)
    engine = Engine.for_workspace(files, tables, version, workspace_path=workspace_path, cache=cache, user=user)
    return built, engine.run(built.sql, built.params, max_rows=max_rows, timeout_s=timeout_s)


def distinct_values(
    files: Mapping[str, Any],
    tables: Mapping[str, pa.Table],
    version: str,
    table: str,
    column: str,
    *,
    workspace_path: Path | None = None,
    user: access.User | None = None,
) -> list[Any]:
    """The first values of a column, for a filter's choices; through the same query path as `run`."""

    choices = catalogue(files).get(table)
    if choices is None:
        raise ExploreError(f"table {table!r} is not in the data profile")
    ident = quote_ident(choices.column(column, "filter column").name)
    sql = f"SELECT DISTINCT {ident} FROM {quote_ident(table)} WHERE {ident} IS NOT NULL ORDER BY 1 LIMIT {DISTINCT_VALUES}"
    engine = Engine.for_workspace(files, tables, version, workspace_path=workspace_path, user=user)
    result = engine.run(sql, {}, max_rows=DISTINCT_VALUES, timeout_s=_limits(files)[1])
    return result.table.column(0).to_pylist() if result.table.num_columns else []


# --------------------------------------------------------------------------- the chart


def pick_chart(
    question: Question, built: Built, result: QueryResult | None = None, files: Mapping[str, Any] | None = None, cid: str = "explore"
) -> dict[str, Any]:
    """A dashboard component for the answer: a line over a time grain, bars sorted by value for a
    breakdown, a KPI card for a single value (also when a breakdown or grain left only one row).

    The spec's query is `built.literal_sql`, which runs without parameters; the renderer draws it like
    any dashboard component. Colour and threshold rules of task.yaml are applied where their field appears.
    """
    rules = [r["check"] for r in ((files or {}).get("task") or {}).get("rules") or [] if isinstance(r, dict) and r.get("check")]
    fmt = _format(question, files or {})
    value_title = built.title.split(" by ")[0].split(" per ")[0]
    single = result is not None and result.table.num_rows == 1
    if (built.period is None and built.group is None) or single:
        thresholds = _thresholds(rules, question.measure) if question.measure else []
        sql = built.literal_sql
        if single and (built.period or built.group):  # one group only: its value alone
            sql = f"SELECT value FROM ({built.literal_sql}) AS answer"
        return kpi.new(cid, built.title, sql, format=fmt, thresholds=thresholds)
    y = {"field": "value", "type": "quantitative", "title": value_title, "format": fmt}
    tooltip: list[dict[str, Any]] = []
    encoding: dict[str, Any] = {}
    if built.period:
        grain = built.grain or "year"
        x: dict[str, Any] = {"field": "period", "type": "temporal" if built.period_is_date else "ordinal", "title": f"{question.time} ({grain})"}
        if built.period_is_date:
            x["format"] = PERIOD_FORMATS[grain]
        encoding = {"x": x, "y": y}
        tooltip.append({k: v for k, v in x.items() if k != "title"} | {"title": str(question.time)})
        mark = "line"
    else:
        encoding = {"x": {"field": built.group, "type": "nominal", "title": str(question.breakdown), "sort": "-y"}, "y": y}
        mark = "bar"
    if built.group:
        color: dict[str, Any] = {"field": built.group, "type": "nominal", "title": str(question.breakdown)}
        domain, colors = _category_colors(rules, str(question.breakdown))
        if domain:
            color["scale"] = {"domain": domain, "range": colors}
        if mark == "line" or domain:
            encoding["color"] = color
        tooltip.append({"field": built.group, "title": str(question.breakdown)})
    tooltip.append({"field": "value", "title": value_title, "format": fmt})
    encoding["tooltip"] = tooltip
    return chart.new(cid, built.title, built.literal_sql, mark, encoding)


def _format(question: Question, files: Mapping[str, Any]) -> str:
    """Counts and sums or extremes of whole numbers as whole numbers; other values as output.yaml's default format."""
    if question.measure is None or question.aggregation in (COUNT, COUNT_DISTINCT):
        return ",d"
    column = catalogue(files).get(question.table)
    whole = column is not None and question.measure in column.columns and column.columns[question.measure].type.upper() in _WHOLE
    if whole and question.aggregation in (SUM, MIN, MAX):
        return ",d"
    return ((files.get("output") or {}).get("number_formats") or {}).get("default") or ",.2f"


_WHOLE = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT"}


# --------------------------------------------------------------------------- saving it


SAVE_ATTEMPTS = 3  # saves onto a draft that keeps moving under it before the person is asked to try again


@dataclass
class Saved:
    sha: str | None
    component: str
    diagnostics: list[Diagnostic]  # warnings the checks left (errors refuse the save)
    follows: list[str] = field(default_factory=list)  # the dashboard filters the component follows


def save_to_draft(
    repo: ConfigRepo, user: User, slug: str, question: Question, tables: Mapping[str, pa.Table] | None, version: str = "", *, follow_bar: bool = False
) -> Saved:
    """Append the question's component to the user's draft dashboard, after the workspace checks pass on it.

    Stewards and owners only. The checks (lib/artifacts/checks.py) run on the draft's dashboard with the component
    added, over `tables` (the data the person explored); with any error nothing is saved and
    ValidationFailed lists the findings. The component follows the dashboard's filter bar where
    it can (`build`'s `bar`; every column the bar drives with `follow_bar`); `Saved.follows` says which.
    """

    access.require(user, "save", repo.meta_for(user, slug), slug)
    races = 0
    while True:
        # The whole dashboard is written back, so it is saved only onto the draft it was read from: when
        # another save (a second tab, a chat) moved the draft meanwhile, the question is added again onto
        # the newest draft, and after SAVE_ATTEMPTS such races the person is asked to try again.
        base = repo.draft_head(user, slug)
        ws, _ = workspace.load(repo.draft(user, slug).workspace_path)
        dashboard = _plain(ws.get("dashboard") or {}) or {"title": ws.name, "components": []}
        built = build(question, catalogue(ws.data), bar_filters(dashboard), follow_bar)
        taken = {str(c.get("id")) for c in dashboard.get("components") or []}
        cid = unique_id(question, taken)
        # A chart even when today's data leaves one group: the dashboard keeps the question's shape as the data changes.
        spec = pick_chart(question, built, None, ws.data, cid)
        dashboard["components"] = [*(dashboard.get("components") or []), spec]
        if dashboard.get("layout"):
            dashboard["layout"] = [*dashboard["layout"], [cid]]
        candidate = workspace.Workspace(ws.path, {**ws.data, "dashboard": dashboard}, {})
        found = checks.run(candidate, tables, f"explore:{version}")
        if any(d.level == ERROR for d in found):
            raise ValidationFailed(found)
        try:
            sha = repo.save(user, slug, {"dashboard": dashboard}, f"Add {cid} from Explore: {built.title}", base=base)
        except DraftChanged:
            races += 1
            if races == SAVE_ATTEMPTS:
                raise
            continue
        return Saved(sha, cid, found, built.follows)


def unique_id(question: Question, taken: set[str]) -> str:
    """'explore_sales_by_region', then '_2', '_3' ... while the id is taken."""
    parts = ["explore", alias(question.measure) if question.measure else "rows"]
    if question.breakdown:
        parts += ["by", alias(question.breakdown)]
    if question.time:
        parts += ["per", question.grain or "period"]
    base = "_".join(parts)[:56]
    cid, n = base, 1
    while cid in taken:
        n += 1
        cid = f"{base}_{n}"
    return cid


def _plain(data: Any) -> Any:
    """A parsed file as plain dicts and lists (the config repo hands out read-only views)."""
    if isinstance(data, Mapping):
        return {k: _plain(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [_plain(v) for v in data]
    return data
