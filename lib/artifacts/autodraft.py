"""A first dashboard, or report, without a model: deterministic, from the profile and the output constraints.

Used when no API key is set, and as a fast start when one is. The dashboard
draft has KPI cards for the main measures, a trend over the main date column,
breakdowns by the main categories, a detail table and an insight text whose
numbers are all placeholders, plus filters for the main category and the date
range. The report draft (`draft_report`) reads top to bottom from the same
picks: an overview paragraph, the key figures, the trend, the top movers
between the latest two periods, and the detail table, with the same filters
as its parameters. Colour and threshold rules from task.yaml are applied
where their field appears, so both drafts pass every check in `lib/artifacts/checks.py`.

`draft_into` drafts from the tables a steward chooses, one part per table, and either starts a new file or
adds to the current one (ADD): everything there is kept, the drafted components follow under ids of their own,
leaving out any that reads the same as one already there or finds no room under output.yaml's
`max_components`. Its `Change` says what is added, kept, left out and (starting anew) removed.
"""

from __future__ import annotations

import copy
import itertools
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..core import settings
from ..core.errors import DashmemError
from ..core.formats import format_number
from ..data import colroles, coltypes, profile, standins
from ..data.sandbox import QueryError, quote_ident
from ..memory import relationships
from ..memory.shapes import report_components
from ..memory.spec import PARAM_RE, PLACEHOLDER_RE
from ..memory.spec import queries as spec_queries
from ..memory.workspace import FILES
from .components import chart, kpi, table, text

MAX_KPIS = 3
MAX_BREAKDOWNS = 2
# How each grain's period reads, in KPI titles, chart axes, tooltips and the insight alike (strftime and
# d3-time-format agree on these; lib/core/formats.py adds d3's %q, the quarter).
PERIOD_FORMATS = {"hour": "%d %b %Y %H:00", "day": "%d %b %Y", "week": "week of %d %b %Y", "month": "%B %Y", "quarter": "%Y-Q%q", "year": "%Y"}
# What a draft leads with, among measures that add up: the outcome, not its inputs ("actual" before "target").
LEADING_WORDS = {"sales", "revenue", "amount", "value", "profit", "quantity", "qty", "actual", "total", "cost", "volume", "count", "gdp"}
_SQL_AGGREGATES = {colroles.SUM: "sum", colroles.MEAN: "avg", colroles.MEDIAN: "median"}
_TITLE_WORDS = {colroles.SUM: "Total", colroles.MEAN: "Average", colroles.MEDIAN: "Median"}


class NothingToDraft(DashmemError, ValueError):
    """There is nothing to draft from (no data, no profile, no table chosen) or to add to; the message says what to do first."""


def alias(name: str) -> str:
    """A column name usable as an encoding field: lower snake_case."""
    text = re.sub(r"[^0-9a-zA-Z]+", "_", name).strip("_").lower() or "value"
    return text if text[0].isalpha() else f"c_{text}"


def _label(name: str) -> str:
    return re.sub(r"[_\s]+", " ", name).strip().capitalize()


def ranked_tables(profile: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The profile's tables, the one a draft leads with first: the most measures, then the most rows."""
    return sorted(profile.get("tables") or [], key=lambda t: (sum(c.get("role") == "measure" for c in t["columns"]), t["rows"], t["name"]), reverse=True)


def main_table(profile: Mapping[str, Any]) -> dict[str, Any] | None:
    """The table with the most measures, then the most rows."""
    ranked = ranked_tables(profile)
    return ranked[0] if ranked else None


def pick_measures(table: dict[str, Any]) -> list[dict[str, Any]]:
    """Up to MAX_KPIS measures: additive ones (totals) first, those named as outcomes (LEADING_WORDS) first among them."""
    measures = [c for c in table["columns"] if c.get("role") == "measure" and (c.get("null_share") or 0) < 0.5]

    def rank(c: dict[str, Any]) -> tuple[bool, bool, int]:
        return not _meaning(table, c).additive, not set(colroles.words(c["name"])[0]) & LEADING_WORDS, table["columns"].index(c)

    return sorted(measures, key=rank)[:MAX_KPIS]


def pick_time(table: dict[str, Any]) -> dict[str, Any] | None:
    times = [c for c in table["columns"] if c.get("role") == "time" and (c.get("null_share") or 0) < 0.5 and (c.get("distinct") or 0) > 1]
    return sorted(times, key=lambda c: (coltypes.family(c["type"]) != "time", table["columns"].index(c)))[0] if times else None


def pick_categories(table: dict[str, Any]) -> list[dict[str, Any]]:
    cats = [c for c in table["columns"] if c.get("role") == "dimension" and 2 <= (c.get("distinct") or 0) <= 60 and (c.get("null_share") or 0) < 0.3]
    return sorted(cats, key=lambda c: (abs((c.get("distinct") or 0) - 8), table["columns"].index(c)))[:MAX_BREAKDOWNS]


def _meaning(table: Mapping[str, Any], column: Mapping[str, Any]) -> colroles.Meaning:
    return colroles.of_profile_column(column, int(table.get("rows") or 0))


def _aggregate(table: Mapping[str, Any], measure: dict[str, Any], live: bool = False) -> str:
    """How a measure is aggregated: sum, mean or median, but the mean on a live table (MariaDB has no median aggregate)."""
    aggregate = _meaning(table, measure).aggregate or colroles.MEAN
    return colroles.MEAN if live and aggregate == colroles.MEDIAN else aggregate


DRAFTABLE = ("dashboard", "report")  # the files the auto-draft writes


def draft_files(files: Mapping[str, Any], tables: Mapping[str, Any] | None, kinds: tuple[str, ...] = ("dashboard",)) -> dict[str, Any]:
    """profile.yaml (the workspace's, else built from `tables`) and a drafted dashboard.yaml, report.yaml or both (`kinds`),
    each a new one from the main table (`draft_into` drafts from chosen tables, or adds to the current ones).

    NothingToDraft (a ValueError) when there is neither a profile nor data to make one from.
    """
    return draft_into(files, tables, kinds).files


ADD, NEW = "add", "new"  # add to the current dashboard or report, or start a new one in its place
MODES = (ADD, NEW)


def draft_into(
    files: Mapping[str, Any],
    tables: Mapping[str, Any] | None,
    kinds: tuple[str, ...] = ("dashboard",),
    *,
    names: Sequence[str] | None = None,
    mode: str = NEW,
    workspace_path: Any = None,
) -> Drafted:
    """The auto-draft of `kinds` from the tables `names` lists (the main table when None), and what it changes.

    `mode` ADD keeps every filter, component and section the workspace's dashboard.yaml (report.yaml) has and
    appends the drafted ones under ids of their own, leaving out those that read the same as one already there
    and those past output.yaml's `max_components`; NEW drafts a file in place of the current one. The profile
    is the workspace's, or built from `tables` when it has none or lacks a table `names` lists. NothingToDraft
    (a ValueError) when there is nothing to draft from.
    """
    unknown = [k for k in kinds if k not in DRAFTABLE]
    if unknown or not kinds:
        raise ValueError(f"the auto-draft writes {' and '.join(DRAFTABLE)}, not {', '.join(unknown) or 'nothing'}")
    if mode not in MODES:
        raise ValueError(f"the auto-draft adds ({ADD!r}) or starts a new one ({NEW!r}), not {mode!r}")
    data_profile = files.get("profile")
    profiled = {t["name"] for t in (data_profile or {}).get("tables") or []}
    if not data_profile or (tables and names and set(names) - profiled and set(names) <= set(tables)):
        if not tables:
            raise NothingToDraft(f"no data loaded: add a source on the Sources page (or `{settings.COMMAND} source add`) first")
        data_profile = profile.build_for(tables, files.get("sources"), workspace_path)  # the chosen table's profile, with the others'
    with_profile = {**files, "profile": data_profile}
    drafters = {"dashboard": _draft_dashboard, "report": _draft_report}
    out: dict[str, Any] = {"profile": data_profile}
    changes: dict[str, Change] = {}
    for kind in (k for k in DRAFTABLE if k in kinds):
        current = files.get(kind) if isinstance(files.get(kind), Mapping) and files.get(kind) else None
        if mode == ADD and current is not None and not _addable(current):
            raise NothingToDraft(
                f"{FILES[kind]} is not in a shape the auto-draft can add to: correct it on the Specs page "
                "(its checks say where), or start a new one in its place"
            )
        spec, left = drafters[kind](with_profile, names, current if mode == ADD else None)
        out[kind] = spec
        changes[kind] = _change(kind, mode, current, spec, left, _max_components(files))
    return Drafted(out, changes, [t["name"] for t in _chosen(with_profile, names)])


def _addable(spec: Mapping[str, Any]) -> bool:
    """Whether a dashboard's (report's) lists are lists of objects, so that drafted ones can follow what is there."""
    lists = [spec.get(key, []) for key in ("filters", "components", "layout", "parameters", "sections")]
    if not all(isinstance(items, list) for items in lists) or not isinstance(spec.get("queries", {}), Mapping):
        return False
    rows_ok = all(isinstance(row, list) for row in spec.get("layout", []))
    items_ok = all(isinstance(item, Mapping) for key in ("filters", "components", "parameters", "sections") for item in spec.get(key, []))
    cards_ok = items_ok and all(isinstance(s.get("components", []), list) for s in spec.get("sections", []))
    return rows_ok and items_ok and cards_ok


def offered_tables(files: Mapping[str, Any], tables: Mapping[str, Any] | None = None, more: Sequence[str] = ()) -> list[str]:
    """The tables a steward may draft from: the profile's, the lead first, then loaded ones (`tables`) and `more` it lacks."""
    ranked = [t["name"] for t in ranked_tables(files.get("profile") or {})]
    return ranked + sorted({*(tables or {}), *more} - set(ranked))


def unread_tables(files: Mapping[str, Any], names: Sequence[str]) -> list[str]:
    """Those of `names` that no query of the workspace's dashboard or report reads: a newly added source's table."""
    read: set[str] = set()
    for kind in DRAFTABLE:
        for _, _, sql in spec_queries(files.get(kind) or {}):
            try:
                read |= standins.tables_named(sql)
            except QueryError:
                continue  # a query that does not parse reads nothing here; the checks say what is wrong with it
    return [n for n in names if n.lower() not in read]


def default_tables(files: Mapping[str, Any], names: Sequence[str]) -> list[str]:
    """What to draft from unless the steward chooses: the tables nothing shows yet (a new source's), else all of them."""
    return unread_tables(files, names) or list(names)


@dataclass
class _Plan:
    """What a draft is built from: the main table, the columns picked from its profile, the workspace's rules."""

    title: str
    table: dict[str, Any]
    measures: list[dict[str, Any]]
    time: dict[str, Any] | None
    categories: list[dict[str, Any]]
    formats: Mapping[str, Any]
    rules: list[dict[str, Any]]  # the machine checks of task.yaml's rules
    per_row: int
    where_sql: str = ""  # the filters' WHERE clause, shared by every query
    live: bool = False  # the table is queried in its source database, not in a snapshot

    @property
    def name(self) -> str:
        return self.table["name"]

    @property
    def lead(self) -> dict[str, Any] | None:
        """The measure the trend, breakdowns and insight show: the first picked, else the record count."""
        return self.measures[0] if self.measures else None

    @property
    def lead_expr(self) -> str:
        return self.expr(self.lead) if self.lead else "count(*)"

    def expr(self, measure: dict[str, Any]) -> str:
        """SQL for a measure over a group: summed if it adds up, else averaged (or its median)."""
        return f"{_SQL_AGGREGATES[_aggregate(self.table, measure, self.live)]}({quote_ident(measure['name'])})"

    def measure_title(self, measure: dict[str, Any]) -> str:
        """'Total sales', 'Average miles per gallon', 'Median price'."""
        return f"{_TITLE_WORDS[_aggregate(self.table, measure, self.live)]} {_label(measure['name']).lower()}"

    @property
    def lead_adds_up(self) -> bool:
        """Whether the lead figure of a group is part of a whole (a sum, a count), so a share of it means something."""
        return self.lead is None or _aggregate(self.table, self.lead, self.live) == colroles.SUM

    @property
    def lead_alias(self) -> str:
        return alias(self.lead["name"]) if self.lead else "records"

    @property
    def lead_title(self) -> str:
        return self.measure_title(self.lead) if self.lead else "Records"

    def fmt_for(self, measure: dict[str, Any] | None) -> str:
        formats = self.formats
        if measure is None:
            return formats.get("default", ",.0f")
        additive = _meaning(self.table, measure).additive
        if not additive and (measure.get("max") or 0) <= 1.5 and (measure.get("min") or 0) >= 0:  # a share
            return formats.get("percent", ".1%")
        if max(abs(measure.get("max") or 0), abs(measure.get("min") or 0)) >= 1e7:
            currency = formats.get("currency") or ""
            return currency if "$" in currency else ".3s"  # 1.23G reads better than 1,234,567,890
        return formats.get("default", ",.0f" if additive else ",.1~f")  # ~: a whole average without ".0"


def draft(files: Mapping[str, Any], names: Sequence[str] | None = None) -> dict[str, Any]:
    """dashboard.yaml content for a workspace (its profile, output constraints and task rules): drafted from the
    main table, or from each table `names` lists (the lead first), their ids kept apart."""
    return _draft_dashboard(files, names, None)[0]


def _dashboard_part(plan: _Plan, files: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[list[Any]]]:
    """The filters, components and layout rows drafted from one table."""
    filters, plan.where_sql = _filters(plan)
    kpis = _kpis(plan)
    trend = _trend(plan)
    breakdowns = _breakdowns(plan)
    if len(breakdowns) < plan.per_row:
        breakdowns += _joined_breakdown(plan, files)
    detail = _detail_table(plan)
    insight = _insight_text(plan)
    components = [*kpis, *([trend] if trend else []), *breakdowns, detail, insight]
    return filters, components, _layout(plan, kpis, trend, breakdowns, detail, insight)


def _chosen(files: Mapping[str, Any], names: Sequence[str] | None) -> list[dict[str, Any]]:
    """The profile's tables to draft from: `names` (the lead first), else the main table; NothingToDraft without them."""
    data_profile = files.get("profile") or {}
    if names is None:
        table = main_table(data_profile)
        if table is None:
            raise NothingToDraft("no data profile yet: connect a source and refresh before drafting a dashboard")
        return [table]
    if not names:
        raise NothingToDraft("choose at least one table to draft from")
    ranked = ranked_tables(data_profile)
    missing = sorted(set(names) - {t["name"] for t in ranked})
    if missing:
        raise NothingToDraft(
            f"no data profile of {', '.join(missing)}: load the data and update the profile on the Sources page "
            f"(or `{settings.COMMAND} profile`) before drafting from it"
        )
    return [t for t in ranked if t["name"] in names]


def _plan(files: Mapping[str, Any], table: dict[str, Any] | None = None) -> _Plan:
    """What to show of `table` (the main table by default); NothingToDraft without a profile."""
    table = table or main_table(files.get("profile") or {})
    if table is None:
        raise NothingToDraft("no data profile yet: connect a source and refresh before drafting a dashboard")
    output = files.get("output") or {}
    return _Plan(
        title=(files.get("workspace") or {}).get("name", "Dashboard"),
        table=table,
        measures=pick_measures(table),
        time=pick_time(table),
        categories=pick_categories(table),
        formats=output.get("number_formats") or {},
        rules=[r["check"] for r in (files.get("task") or {}).get("rules") or [] if r.get("check")],
        per_row=int((output.get("layout") or {}).get("max_per_row", 4)),
        live=any(s.get("name") == table.get("source") and s.get("mode") == "live" for s in (files.get("sources") or {}).get("sources") or []),
    )


def _filters(plan: _Plan) -> tuple[list[dict[str, Any]], str]:
    """A multiselect on the main category and a date range on the main date, and the WHERE clause binding them."""
    name, time = plan.name, plan.time
    filters: list[dict[str, Any]] = []
    where: list[str] = []
    if plan.categories:
        cat = plan.categories[0]
        fid = f"f_{alias(cat['name'])}"[:60]
        filters.append(
            {
                "id": fid,
                "type": "multiselect",
                "label": _label(cat["name"]),
                "options_query": f"SELECT DISTINCT {quote_ident(cat['name'])} FROM {quote_ident(name)} WHERE {quote_ident(cat['name'])} IS NOT NULL ORDER BY 1",
            }
        )
        where.append(f"(${fid} IS NULL OR list_contains(${fid}, {quote_ident(cat['name'])}))")
    if time and coltypes.family(time["type"]) == "time":
        fid = f"f_{alias(time['name'])}"[:60]
        filters.append(
            {
                "id": fid,
                "type": "date_range",
                "label": _label(time["name"]),
                "bounds_query": f"SELECT min({quote_ident(time['name'])}), max({quote_ident(time['name'])}) FROM {quote_ident(name)}",
            }
        )
        where.append(f"(${fid}_from IS NULL OR {quote_ident(time['name'])} >= ${fid}_from) AND (${fid}_to IS NULL OR {quote_ident(time['name'])} <= ${fid}_to)")
    return filters, (" WHERE " + " AND ".join(where)) if where else ""


def _kpis(plan: _Plan) -> list[dict[str, Any]]:
    """The record count and a card per picked measure, as many as fit in the first row."""
    source = f"FROM {quote_ident(plan.name)}{plan.where_sql}"
    kpis = [kpi.new("kpi_records", "Records", f"SELECT count(*) AS value {source}", format=",d")]
    for m in plan.measures:
        kpis.append(
            kpi.new(
                f"kpi_{alias(m['name'])}"[:63],
                plan.measure_title(m),
                f"SELECT {plan.expr(m)} AS value {source}",
                format=plan.fmt_for(m),
                thresholds=_thresholds(plan.rules, m["name"]),
            )
        )
    return kpis[: plan.per_row]


def _trend(plan: _Plan) -> dict[str, Any] | None:
    """The lead measure over the main time column, when there is one."""
    time = plan.time
    if not time:
        return None
    grain = _grain(time)
    lead_alias, lead_title, fmt = plan.lead_alias, plan.lead_title, plan.fmt_for(plan.lead)
    x: dict[str, Any] = {"field": "period", "type": "ordinal", "title": _label(time["name"])}
    period_tip: dict[str, Any] = {"field": "period", "title": _label(time["name"])}
    if grain:  # a date truncated to a grain: labelled as that period ("December 2014", "2014-Q4")
        x = {**x, "type": "temporal", "title": f"{_label(time['name'])} ({grain})", "format": PERIOD_FORMATS[grain]}
        period_tip = {**period_tip, "type": "temporal", "format": PERIOD_FORMATS[grain]}
    return chart.new(
        "trend",
        f"{lead_title} over time",
        f"SELECT {_period(time)} AS period, {plan.lead_expr} AS {lead_alias} FROM {quote_ident(plan.name)}{plan.where_sql} GROUP BY 1 ORDER BY 1",
        "line",
        {
            "x": x,
            "y": {"field": lead_alias, "type": "quantitative", "title": lead_title, "format": fmt},
            "tooltip": [period_tip, {"field": lead_alias, "title": lead_title, "format": fmt}],
        },
    )


def _breakdowns(plan: _Plan) -> list[dict[str, Any]]:
    """A bar chart of the lead measure per main category, coloured as the task rules ask."""
    lead_alias, lead_title = plan.lead_alias, plan.lead_title
    out = []
    for cat in plan.categories:
        cat_alias = alias(cat["name"])
        color: dict[str, Any] = {"field": cat_alias, "type": "nominal", "title": _label(cat["name"])}
        domain, colors = _category_colors(plan.rules, cat["name"])
        if domain:
            color["scale"] = {"domain": domain, "range": colors}
        out.append(
            chart.new(
                f"by_{alias(cat['name'])}"[:63],
                f"{lead_title} by {_label(cat['name']).lower()}",
                (
                    f"SELECT {quote_ident(cat['name'])} AS {cat_alias}, {plan.lead_expr} AS {lead_alias} FROM {quote_ident(plan.name)}{plan.where_sql} "
                    f"GROUP BY 1 ORDER BY 2 DESC LIMIT 15"
                ),
                "bar",
                {
                    "x": {"field": cat_alias, "type": "nominal", "title": _label(cat["name"]), "sort": "-y"},
                    "y": {"field": lead_alias, "type": "quantitative", "title": lead_title, "format": plan.fmt_for(plan.lead)},
                    "color": color,
                },
            )
        )
    return out


def _joined_breakdown(plan: _Plan, files: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The lead measure by a category of a table that a declared join (sources.yaml) reaches from the main table."""

    tables = {t["name"]: t for t in (files.get("profile") or {}).get("tables") or []}
    # A query runs on the snapshots or on one live source's database, never across the two.
    live = {s["name"] for s in (files.get("sources") or {}).get("sources") or [] if s.get("mode") == "live"}
    for rel in relationships.declared(files.get("sources")):
        (many, key), (one, one_key) = relationships.split(rel["from"]), relationships.split(rel["to"])
        if many != plan.name or one not in tables or one == plan.name or {many, one} & live:
            continue
        dims = [c for c in pick_categories(tables[one]) if c["name"] != one_key]
        if not dims:
            continue
        dim, dim_alias, lead_alias = dims[0]["name"], alias(dims[0]["name"]), plan.lead_alias
        # The main table's filters apply before the join; its columns are qualified, as both tables may share names.
        lead = f"{_SQL_AGGREGATES[_aggregate(plan.table, plan.lead)]}(m.{quote_ident(plan.lead['name'])})" if plan.lead else "count(*)"
        title = f"{plan.lead_title} by {_label(one).lower()} {_label(dim).lower()}"
        sql = (
            f"SELECT d.{quote_ident(dim)} AS {dim_alias}, {lead} AS {lead_alias} "
            f"FROM (SELECT * FROM {quote_ident(plan.name)}{plan.where_sql}) AS m JOIN {quote_ident(one)} AS d ON m.{quote_ident(key)} = d.{quote_ident(one_key)} "
            f"GROUP BY 1 ORDER BY 2 DESC LIMIT 15"
        )
        encoding = {
            "x": {"field": dim_alias, "type": "nominal", "title": _label(dim), "sort": "-y"},
            "y": {"field": lead_alias, "type": "quantitative", "title": plan.lead_title, "format": plan.fmt_for(plan.lead)},
            "color": {"field": dim_alias, "type": "nominal", "title": _label(dim)},
        }
        return [chart.new(f"by_{alias(one)}_{dim_alias}"[:63], title, sql, "bar", encoding)]
    return []


def _detail_table(plan: _Plan) -> dict[str, Any]:
    """The measures per main category (else sample rows), with the task rules' thresholds."""
    name, where_sql = plan.name, plan.where_sql
    group = plan.categories[0] if plan.categories else None
    if group:
        select = ", ".join(
            [f"{quote_ident(group['name'])} AS {alias(group['name'])}"]
            + [f"{plan.expr(m)} AS {alias(m['name'])}" for m in plan.measures]
            + ["count(*) AS records"]
        )
        table_sql = f"SELECT {select} FROM {quote_ident(name)}{where_sql} GROUP BY 1 ORDER BY 2 DESC LIMIT 50"  # the first measure, or the record count
    else:
        shown = [c["name"] for c in plan.table["columns"][:8]]
        table_sql = f"SELECT {', '.join(quote_ident(c) + ' AS ' + alias(c) for c in shown)} FROM {quote_ident(name)}{where_sql} LIMIT 50"
    columns_conf: dict[str, Any] = {}
    for m in plan.measures:
        conf: dict[str, Any] = {"label": _label(m["name"]), "format": plan.fmt_for(m)}
        if thresholds := _thresholds(plan.rules, m["name"]):
            conf["thresholds"] = thresholds
        columns_conf[alias(m["name"])] = conf
    return table.new("detail", f"Detail by {_label(group['name']).lower()}" if group else "Sample rows", table_sql, max_rows=50, columns=columns_conf)


def _insight_text(plan: _Plan) -> dict[str, Any]:
    group = plan.categories[0] if plan.categories else None
    markdown, queries = _insight(
        plan.name,
        plan.lead,
        plan.lead_expr,
        plan.lead_title,
        group,
        plan.time,
        _period(plan.time),
        plan.where_sql,
        plan.fmt_for(plan.lead),
        plan.lead_adds_up,
        plan.live,
    )
    return text.new("insight", "What stands out", markdown, queries)


def _layout(plan: _Plan, kpis, trend, breakdowns, detail, insight) -> list[list[Any]]:
    """KPIs first, the trend, the breakdowns (as many as fit in a row), then the table beside the insight."""
    rows: list[list[Any]] = [[k["id"] for k in kpis]]
    if trend:
        rows.append([{"id": trend["id"], "width": 2}])
    if breakdowns:
        rows.append([c["id"] for c in breakdowns][: plan.per_row])
    rows.append([{"id": detail["id"], "width": 2}, insight["id"]])
    return rows


def _grain(time: dict[str, Any] | None) -> str | None:
    """The period a date column's trend is bucketed by, for a line of a readable length; None for a
    numeric period (a year, a week number), which is its own period."""
    if time is None or coltypes.family(time["type"]) != "time":
        return None
    span = _span_days(time)
    if span is None:
        return "month"
    for grain, longer_than in (("year", 3650), ("quarter", 1826), ("month", 120), ("week", 28), ("day", 2)):
        if span > longer_than:
            return grain
    return "hour"


def _period(time: dict[str, Any] | None) -> str | None:
    """SQL for the trend's period: the time column truncated to its grain."""
    if time is None:
        return None
    grain = _grain(time)
    return f"date_trunc('{grain}', {quote_ident(time['name'])})" if grain else quote_ident(time["name"])


def _span_days(column: dict[str, Any]) -> int | None:
    import datetime as dt

    try:
        low = dt.date.fromisoformat(str(column["min"])[:10])
        high = dt.date.fromisoformat(str(column["max"])[:10])
    except (KeyError, ValueError):
        return None
    return (high - low).days


def _thresholds(rules: list[dict[str, Any]], field_name: str) -> list[dict[str, Any]]:
    """The workspace's threshold-colour rules on a field, as dashboard thresholds."""
    return [
        {"op": r["op"], "value": r["value"], "color": r["color"]}
        for r in rules
        if r["kind"] == "threshold_color" and r.get("field", "").lower() == field_name.lower()
    ]


def _category_colors(rules: list[dict[str, Any]], field_name: str) -> tuple[list[Any], list[str]]:
    pairs = [(r["value"], r["color"]) for r in rules if r["kind"] == "category_color" and r.get("field", "").lower() == field_name.lower()]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def _as_label(group: Mapping[str, Any]) -> str:
    """A group's value is a label: a whole-number group (a year, a code, cylinders) is written as it is, 2017 and
    not "2,017" (the placeholder's format `d`, no thousands); any other keeps the default."""
    return "|d" if re.search(r"INT", str(group.get("type") or "").upper()) else ""


def _insight(name, lead, lead_expr, lead_title, group, time, period, where_sql, fmt, adds_up: bool = True, live: bool = False) -> tuple[str, dict[str, str]]:
    """The insight text and its named queries. A share of the whole only for a lead that adds up: a group's
    average or median is no part of a whole."""
    lines, queries = [], {}
    lead_alias = alias(lead["name"]) if lead else "records"
    if group:
        g = alias(group["name"])
        share = f", {lead_expr} / sum({lead_expr}) OVER () AS share" if adds_up else ""
        queries["top"] = (
            f"SELECT {quote_ident(group['name'])} AS {g}, {lead_expr} AS {lead_alias}{share} "
            f"FROM {quote_ident(name)}{where_sql} GROUP BY 1 ORDER BY 2 DESC LIMIT 1"
        )
        queries["bottom"] = (
            f"SELECT {quote_ident(group['name'])} AS {g}, {lead_expr} AS {lead_alias} FROM {quote_ident(name)}{where_sql} GROUP BY 1 ORDER BY 2 ASC LIMIT 1"
        )
        lines.append(
            f"- **{{{{top.{g}{_as_label(group)}}}}}** leads {_label(group['name']).lower()} by {lead_title.lower()} "
            f"with {{{{top.{lead_alias}|{fmt}}}}}" + (" ({{top.share|.0%}} of the whole)." if adds_up else ".")
        )
        lines.append(f"- Lowest: **{{{{bottom.{g}{_as_label(group)}}}}}** with {{{{bottom.{lead_alias}|{fmt}}}}}.")
    if time:
        numeric = coltypes.family(time["type"]) != "time"
        grain = _grain(time)
        queries["latest"] = _latest_query(name, time, grain, period, lead_expr, lead_alias, where_sql, live)
        shown_period = f"{{{{latest.period|{PERIOD_FORMATS[grain]}}}}}" if grain and not numeric else "{{latest.period|d}}"
        lines.append(
            f"- Latest {_label(time['name']).lower()} ({shown_period}): {{{{latest.{lead_alias}|{fmt}}}}}, {{{{latest.change|+.1%}}}} on the one before"
            + (", like for like." if grain and not live else ".")
        )
    if not lines:
        queries["size"] = f"SELECT count(*) AS records FROM {quote_ident(name)}{where_sql}"
        lines.append("- {{size.records|,d}} records.")
    return "\n".join(lines) + "\n", queries


_GRAIN_STEP = {"hour": "1 hour", "day": "1 day", "week": "7 days", "month": "1 month", "quarter": "3 months", "year": "1 year"}


def _latest_query(name: str, time: dict[str, Any], grain: str | None, period: str | None, lead_expr: str, lead_alias: str, where_sql: str, live: bool) -> str:
    """The latest period's lead figure and its change on the period before. For a date column the latest
    period may be partial (data ending on 19 January): it is compared with the same span of the period before
    (1-19 December), not with all of it, which read as a fall in every group. A numeric period (a year column)
    is whole; a live table keeps the plain comparison, in SQL every database takes."""
    if grain is None or live:
        return (
            f"WITH p AS (SELECT {period} AS period, {lead_expr} AS v FROM {quote_ident(name)}{where_sql} GROUP BY 1) "
            f"SELECT period, v AS {lead_alias}, (v - lag(v) OVER (ORDER BY period)) / nullif(abs(lag(v) OVER (ORDER BY period)), 0) AS change "
            f"FROM p ORDER BY period DESC LIMIT 1"
        )
    t, step = quote_ident(time["name"]), _GRAIN_STEP[grain]
    return (
        f"WITH f AS (SELECT *, CAST({t} AS TIMESTAMP) AS at__ FROM {quote_ident(name)}{where_sql}), "
        f"b AS (SELECT date_trunc('{grain}', max(at__)) AS period, max(at__) AS last__ FROM f), "
        f"s AS (SELECT b.period, (SELECT {lead_expr} FROM f WHERE at__ >= b.period AND at__ <= b.last__) AS v, "
        f"(SELECT {lead_expr} FROM f WHERE at__ >= b.period - INTERVAL '{step}' AND at__ <= b.last__ - INTERVAL '{step}') AS before__ FROM b) "
        f"SELECT period, v AS {lead_alias}, (v - before__) / nullif(abs(before__), 0) AS change FROM s"
    )


# --------------------------------------------------------------------------- the report


def draft_report(files: Mapping[str, Any], names: Sequence[str] | None = None) -> dict[str, Any]:
    """report.yaml content for a workspace: the dashboard draft's picks, written as a document.

    Overview prose (every figure a placeholder), the key figures, the trend at
    the time column's grain, the top movers (the categories whose lead measure
    changed most between the latest two periods) when there is a time column
    and a category, the breakdowns by the main categories, then the detail
    table after a page break. From the main table, or one such part per table `names` lists.
    """
    return _draft_report(files, names, None)[0]


def _report_part(plan: _Plan) -> dict[str, Any]:
    """report.yaml content drafted from one table: its title, description, parameters, queries and sections."""
    parameters, plan.where_sql = _filters(plan)
    queries, overview = _overview(plan)
    sections: list[dict[str, Any]] = [
        {"type": "heading", "text": "Overview", "level": 1},
        {"type": "prose", "markdown": overview},
        {"type": "kpis", "components": _kpis(plan)[:_MAX_REPORT_KPIS]},
    ]
    trend = _trend(plan)
    if trend:
        sections += [{"type": "heading", "text": "Trend", "level": 2}, trend]
    group, time = _mover_category(plan), plan.time
    movers = _movers(plan, time, group) if time and group else None
    if movers and group:
        queries["movers"] = movers["query"]
        sections += [
            {"type": "heading", "text": "Top movers", "level": 2},
            {"type": "prose", "markdown": _movers_text(plan, group)},
            movers,
        ]
    breakdowns = _breakdowns(plan)
    if breakdowns:
        sections += [{"type": "heading", "text": "Breakdown", "level": 2}, *breakdowns]
    sections += [{"type": "page_break"}, {"type": "heading", "text": "Detail", "level": 2}, _detail_table(plan)]
    report: dict[str, Any] = {
        "title": f"{plan.title} report",
        "description": f"First draft from the data profile of `{plan.name}`: the overview, key figures, "
        + ("the trend, " if trend else "")
        + ("the top movers, " if movers else "")
        + ("breakdowns " if breakdowns else "")
        + "and the detail.",
    }
    if parameters:
        report["parameters"] = parameters
    return {**report, "queries": queries, "sections": sections}


_MAX_REPORT_KPIS = 6  # a KPI row in report.schema.json holds at most six cards


def _signed(fmt: str) -> str:
    """The format with a sign, for a change ("+1,234"), when the format has room for one."""

    try:
        format_number(1.0, "+" + fmt)
    except ValueError:
        return fmt
    return "+" + fmt


def _overview(plan: _Plan) -> tuple[dict[str, str], str]:
    """The named queries and the overview paragraph: the lead measure's total, the span, the latest period, the leader."""
    name, where_sql, time = quote_ident(plan.name), plan.where_sql, plan.time
    fmt = plan.fmt_for(plan.lead)
    select = ["count(*) AS records"]
    if plan.lead:
        select.append(f"{plan.lead_expr} AS {plan.lead_alias}")
    numeric_time = time is not None and coltypes.family(time["type"]) != "time"
    if time:
        select += [f"min({quote_ident(time['name'])}) AS first_seen", f"max({quote_ident(time['name'])}) AS last_seen"]
    queries = {"overview": f"SELECT {', '.join(select)} FROM {name}{where_sql}"}
    day = "d" if numeric_time else PERIOD_FORMATS["day"]
    span = f", from {{{{overview.first_seen|{day}}}}} to {{{{overview.last_seen|{day}}}}}" if time else ""
    if plan.lead:
        lines = [f"{plan.lead_title} came to **{{{{overview.{plan.lead_alias}|{fmt}}}}}** over {{{{overview.records|,d}}}} records{span}."]
    else:
        lines = [f"The data holds **{{{{overview.records|,d}}}}** records{span}."]
    group = plan.categories[0] if plan.categories else None
    _, insight_queries = _insight(
        plan.name, plan.lead, plan.lead_expr, plan.lead_title, group, time, _period(time), where_sql, fmt, plan.lead_adds_up, plan.live
    )
    lead = plan.lead_title.lower()
    if group:  # the dashboard insight's queries: the leading category, and the latest period against the one before
        queries["top"] = insight_queries["top"]
        g = alias(group["name"])
        lines.append(
            f"By {_label(group['name']).lower()}, **{{{{top.{g}{_as_label(group)}}}}}** leads with {{{{top.{plan.lead_alias}|{fmt}}}}}"
            + (", {{top.share|.0%}} of the whole." if plan.lead_adds_up else ".")
        )
    if time:
        queries["latest"] = insight_queries["latest"]
        grain = _grain(time)
        shown = f"{{{{latest.period|{PERIOD_FORMATS[grain]}}}}}" if grain and not numeric_time else "{{latest.period|d}}"
        period = _period_word(time)
        lines.append(
            f"In the latest {period} ({shown}) {lead} came to {{{{latest.{plan.lead_alias}|{fmt}}}}}, {{{{latest.change|+.1%}}}} on the {period} before"
            + (", like for like (the same span of it)." if grain and not plan.live else ".")
        )
    return queries, " ".join(lines) + "\n"


def _movers(plan: _Plan, time: dict[str, Any], group: dict[str, Any]) -> dict[str, Any]:
    """A table of the values of `group` whose lead measure changed most between the latest two periods of `time`, biggest move first."""
    cat, lead_alias, fmt = alias(group["name"]), plan.lead_alias, plan.fmt_for(plan.lead)
    # ORDER BY names no output alias inside an expression: PostgreSQL (a live source) allows aliases only bare.
    sql = (
        f"WITH p AS (SELECT {_period(time)} AS period, {quote_ident(group['name'])} AS {cat}, {plan.lead_expr} AS v "
        f"FROM {quote_ident(plan.name)}{plan.where_sql} GROUP BY 1, 2), "
        "latest_two AS (SELECT period FROM (SELECT DISTINCT period FROM p) AS d ORDER BY period DESC LIMIT 2), "
        "b AS (SELECT min(period) AS earlier, max(period) AS later FROM latest_two), "
        f"m AS (SELECT p.{cat} AS {cat}, sum(CASE WHEN p.period = b.later THEN v END) AS {lead_alias}, "
        "sum(CASE WHEN p.period = b.earlier THEN v END) AS previous "
        "FROM p CROSS JOIN b WHERE b.earlier < b.later AND p.period IN (b.earlier, b.later) "
        # Only what both periods show: a category missing from one has no change to speak of (a country not yet reported).
        "GROUP BY 1 HAVING count(DISTINCT p.period) = 2) "
        f"SELECT {cat}, {lead_alias}, previous, {lead_alias} - previous AS change FROM m ORDER BY abs({lead_alias} - previous) DESC, 1 LIMIT 10"
    )
    grain = _period_word(time)
    return table.new(
        "movers",
        f"Top movers: {plan.lead_title.lower()} by {_label(group['name']).lower()}, latest {grain} against the one before",
        sql,
        max_rows=10,
        columns={
            cat: {"label": _label(group["name"])},
            lead_alias: {"label": f"Latest {grain}", "format": fmt},
            "previous": {"label": f"{grain.capitalize()} before", "format": fmt},
            "change": {"label": "Change", "format": _signed(fmt)},
        },
    )


MAX_MOVER_VALUES = 5000  # a category with more values than this is an identifier in all but name


def _mover_category(plan: _Plan) -> dict[str, Any] | None:
    """The main category, else the dimension with the most values (countries, products): movers read well by either."""
    if plan.categories:
        return plan.categories[0]
    columns = plan.table["columns"]
    many = [c for c in columns if c.get("role") == "dimension" and 2 <= (c.get("distinct") or 0) <= MAX_MOVER_VALUES and (c.get("null_share") or 0) < 0.3]
    return max(many, key=lambda c: (c.get("distinct") or 0, -columns.index(c))) if many else None


def _period_word(time: dict[str, Any]) -> str:
    """What one period is called: its grain ("month"), or a numeric period's own name ("year")."""
    return _grain(time) or _label(time["name"]).lower()


def _movers_text(plan: _Plan, group: dict[str, Any]) -> str:
    cat, period = alias(group["name"]), _period_word(plan.time) if plan.time else "period"
    return (
        f"The biggest move in {plan.lead_title.lower()} between the latest two {period}s: **{{{{movers.{cat}{_as_label(group)}}}}}**, "
        f"{{{{movers.change|{_signed(plan.fmt_for(plan.lead))}}}}} (from {{{{movers.previous|{plan.fmt_for(plan.lead)}}}}} "
        f"to {{{{movers.{plan.lead_alias}|{plan.fmt_for(plan.lead)}}}}}).\n"
    )


# --------------------------------------------------------------------------- adding to what is there

COMPONENT_KINDS = (kpi.NAME, chart.NAME, table.NAME, text.NAME)


@dataclass(frozen=True)
class Part:
    """One piece of a dashboard or report as a change summary names it: a component, a filter, a heading, a paragraph."""

    kind: str  # a component kind (kpi, chart, table, text), "filter" (a report's parameter too), "heading" or "prose"
    id: str  # the component's or filter's id; "" for a heading or a paragraph
    title: str  # its title, a filter's label, a heading's text, a paragraph's first words

    @property
    def is_component(self) -> bool:
        return self.kind in COMPONENT_KINDS

    def __str__(self) -> str:
        if self.kind == "heading":
            return f"heading “{self.title}”"
        if self.kind == "prose":
            return f"paragraph “{self.title}”"
        return f"{self.title} ({self.id})" if self.title and self.title != self.id else self.id


@dataclass
class Change:
    """What an auto-draft does to dashboard.yaml or report.yaml (`file`), to read before anything is saved."""

    file: str  # "dashboard" or "report"
    mode: str  # ADD or NEW
    added: list[Part]
    removed: list[Part]
    kept: list[Part]
    already_there: list[Part] = field(default_factory=list)  # drafted, left out: one already there reads the same
    no_room: list[Part] = field(default_factory=list)  # drafted, left out: past output.yaml's max_components
    max_components: int | None = None

    @property
    def added_components(self) -> list[Part]:
        return [p for p in self.added if p.is_component]

    @property
    def removed_components(self) -> list[Part]:
        return [p for p in self.removed if p.is_component]

    def summary(self) -> list[str]:
        """The change in sentences: what is added (the components by name), kept and left out."""
        added, others = self.added_components, [p for p in self.added if not p.is_component]
        lines = [f"{_n(len(added), 'component')} added to the {self.file}: {_names(added)}." if added else f"No component added to the {self.file}."]
        filters, sections = [p for p in others if p.kind == "filter"], [p for p in others if p.kind != "filter"]
        if others:
            lines.append("With them: " + "; ".join(t for t in (_names(filters), _tally(sections)) if t) + ".")
        if self.kept:
            lines.append(f"Kept as they are: {_tally(self.kept)}." if self.mode == ADD else f"Unchanged: {_names(self.kept)}.")
        if self.already_there:
            lines.append(f"Left out, as the {self.file} already has a component reading the same: {_names(self.already_there)}.")
        if self.no_room:
            lines.append(f"Left out for room (output.yaml allows at most {self.max_components} components): {_names(self.no_room)}.")
        return lines

    def warning(self) -> str | None:
        """What starting a new one removes, named; None when nothing is."""
        if not self.removed:
            return None
        return f"Starting a new {self.file} removes {_tally(self.removed)} it has now: {_names(self.removed)}."


@dataclass
class Drafted:
    """An auto-draft: the files to save (the profile and each drafted file), what each changes, the tables drafted from."""

    files: dict[str, Any]
    changes: dict[str, Change]
    tables: list[str]


@dataclass
class _Left:
    """The drafted components left out of a file, and why."""

    already_there: list[Part] = field(default_factory=list)
    no_room: list[Part] = field(default_factory=list)


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _names(parts: Sequence[Part]) -> str:
    return ", ".join(str(p) for p in parts)


def _tally(parts: Sequence[Part]) -> str:
    """'8 components, 1 filter, 4 headings'."""
    nouns = [("component", lambda p: p.is_component), ("filter", lambda p: p.kind == "filter")]
    nouns += [("heading", lambda p: p.kind == "heading"), ("paragraph", lambda p: p.kind == "prose")]
    return ", ".join(_n(n, noun) for noun, test in nouns if (n := sum(1 for p in parts if test(p))))


def _part(component: Mapping[str, Any]) -> Part:
    return Part(str(component.get("type") or ""), str(component.get("id") or ""), str(component.get("title") or ""))


def _gist(markdown: Any, length: int = 60) -> str:
    """A paragraph's first words, without its markup."""
    words = " ".join(re.sub(r"[*`#>]|^\s*-\s+", "", PLACEHOLDER_RE.sub("…", str(markdown or "")), flags=re.MULTILINE).split())
    return words if len(words) <= length else words[: length - 1].rstrip() + "…"


def _pieces(kind: str, spec: Mapping[str, Any]) -> list[tuple[Part, Any]]:
    """Each filter, component and (a report's) section as a Part, beside what it is in the file."""
    out: list[tuple[Part, Any]] = []
    for f in spec.get("filters" if kind == "dashboard" else "parameters") or []:
        if isinstance(f, Mapping):
            out.append((Part("filter", str(f.get("id") or ""), str(f.get("label") or "")), f))
    if kind == "dashboard":
        return out + [(_part(c), c) for c in spec.get("components") or [] if isinstance(c, Mapping)]
    for section in spec.get("sections") or []:
        if not isinstance(section, Mapping):
            continue
        what = section.get("type")
        if what == "kpis":
            out += [(_part(c), c) for c in section.get("components") or [] if isinstance(c, Mapping)]
        elif what == "heading":
            out.append((Part("heading", "", str(section.get("text") or "")), section))
        elif what == "prose":
            out.append((Part("prose", "", _gist(section.get("markdown"))), section))
        elif what != "page_break":
            out.append((_part(section), section))
    return out


def _change(kind: str, mode: str, current: Mapping[str, Any] | None, spec: Mapping[str, Any], left: _Left, limit: int | None) -> Change:
    """Kept: what the new file has as it was; removed: what it no longer has; added: what it has anew."""
    new = _pieces(kind, spec)
    kept, removed = [], []
    for part, body in _pieces(kind, current or {}):
        same = next((i for i, (p, b) in enumerate(new) if p.kind == part.kind and b == body), None)
        if same is None:
            removed.append(part)
        else:
            kept.append(part)
            new.pop(same)
    return Change(kind, mode, [p for p, _ in new], removed, kept, left.already_there, left.no_room, limit)


def _max_components(files: Mapping[str, Any]) -> int | None:
    limit = ((files.get("output") or {}).get("layout") or {}).get("max_components")
    return int(limit) if limit else None


def _fresh(wanted: str, taken: set[str], table_name: str) -> str:
    """`wanted`, else `wanted_<table>`, then `_2`, `_3`, ...: the first id not `taken`, which it then is."""
    suffix = alias(table_name)[:15]
    candidates = itertools.chain([wanted, f"{wanted[:45]}_{suffix}"], (f"{wanted[:40]}_{suffix}_{n}" for n in itertools.count(2)))
    chosen = next(c for c in candidates if c not in taken)
    taken.add(chosen)
    return chosen


def _renamed_params(sql: str, names: Mapping[str, str]) -> str:
    """`sql` with each filter's `$id` (`$id_from`, `$id_to` of a range) named as `names` says."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in names:
            return "$" + names[name]
        for end in ("_from", "_to"):
            if name.endswith(end) and name[: -len(end)] in names:
                return "$" + names[name[: -len(end)]] + end
        return match.group(0)

    return PARAM_RE.sub(one, sql)


def _with_params(component: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    out = copy.deepcopy(dict(component))
    if isinstance(out.get("query"), str):
        out["query"] = _renamed_params(out["query"], names)
    if isinstance(out.get("queries"), Mapping):
        out["queries"] = {k: _renamed_params(v, names) if isinstance(v, str) else v for k, v in out["queries"].items()}
    return out


def _sqls(component: Mapping[str, Any]) -> list[str]:
    found = [component["query"]] if isinstance(component.get("query"), str) else []
    return found + [v for v in (component.get("queries") or {}).values() if isinstance(v, str)]


def _used(filter_id: str, params: set[str]) -> bool:
    return bool({filter_id, f"{filter_id}_from", f"{filter_id}_to"} & params)


def _normal(sql: str) -> str:
    """A query's text compared loosely: case, quotes, spacing and which filter a parameter is aside."""
    return " ".join(PARAM_RE.sub("$", sql.replace('"', "")).split()).lower()


def _reading(sql: str, value_column: str | None = None) -> Any:
    """What a query reads, its filters aside: its SELECT list (a KPI's value column alone) over its FROM, joins,
    CTEs and GROUP BY; the loose text where it is no single SELECT."""
    from sqlglot import exp

    try:
        tree = standins.parse(sql)
    except QueryError:
        return _normal(sql)
    if not isinstance(tree, exp.Select):
        return _normal(tree.sql(dialect="duckdb"))
    chosen = [e for e in tree.expressions if value_column is None or e.alias_or_name.lower() == value_column] or tree.expressions[:1]
    picked = sorted(_normal((e.this if isinstance(e, exp.Alias) else e).sql(dialect="duckdb")) for e in chosen)
    rest = tree.copy()
    for key in ("where", "order", "limit", "offset"):
        rest.set(key, None)
    rest.set("expressions", [exp.Star()])
    return (tuple(picked), _normal(rest.sql(dialect="duckdb")))


def _reads(component: Mapping[str, Any]) -> set[Any]:
    """What makes another component a duplicate of this one: the same query, or the same measure read the same way."""
    kind = component.get("type")
    out: set[Any] = set()
    query = component.get("query")
    if isinstance(query, str):
        value = str(component.get("value_column") or "value").lower() if kind == kpi.NAME else None
        out |= {(kind, _reading(query, value)), (kind, "text", _normal(query))}
    queries = [v for v in (component.get("queries") or {}).values() if isinstance(v, str)]
    if queries:
        out.add((kind, frozenset(_reading(q) for q in queries)))
    return out


def _priority(components: Sequence[Mapping[str, Any]]) -> list[int]:
    """The order drafted components get the room left: two KPI cards, the charts and tables, the other cards, the text."""
    kpis = [i for i, c in enumerate(components) if c.get("type") == kpi.NAME]
    texts = [i for i, c in enumerate(components) if c.get("type") == text.NAME]
    others = [i for i in range(len(components)) if i not in kpis and i not in texts]
    return kpis[:2] + others + kpis[2:] + texts


def _same_filter(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Two filters of a kind offering the same: values of one column of one table (`site` of `gates`), or the same options."""
    if a.get("type") != b.get("type") or a.get("options") != b.get("options"):
        return False
    return all((key in a) == (key in b) and (key not in a or _reading(str(a[key])) == _reading(str(b[key]))) for key in ("options_query", "bounds_query"))


def _merge_filters(existing: Sequence[Mapping[str, Any]], drafted: Sequence[Mapping[str, Any]], table_name: str) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """Each drafted filter's id in the file (an existing filter that asks the same, else an id of its own) and the new filters."""
    taken = {str(f.get("id")) for f in existing}
    names: dict[str, str] = {}
    new: list[dict[str, Any]] = []
    for f in drafted:
        same = next((e for e in existing if _same_filter(e, f)), None)
        if same is not None:
            names[f["id"]] = str(same.get("id"))
            continue
        names[f["id"]] = _fresh(f["id"], taken, table_name)
        new.append({**f, "id": names[f["id"]]})
    return names, new


def _pick(drafted: Sequence[Mapping[str, Any]], there: list[Mapping[str, Any]], room: int | None, left: _Left) -> tuple[set[int], int | None]:
    """Which drafted components go in: none reading the same as one `there`, as many as `room` allows; the rest in `left`."""
    reads: set[Any] = set().union(*(_reads(c) for c in there)) if there else set()
    chosen: set[int] = set()
    for i in _priority(drafted):
        component = drafted[i]
        mine = _reads(component)
        if mine & reads:
            left.already_there.append(_part(component))
        elif room is not None and room <= 0:
            left.no_room.append(_part(component))
        else:
            chosen.add(i)
            reads |= mine
            room = None if room is None else room - 1
    return chosen, room


def _room(files: Mapping[str, Any], count: int) -> int | None:
    limit = _max_components(files)
    return None if limit is None else max(limit - count, 0)


def _draft_dashboard(files: Mapping[str, Any], names: Sequence[str] | None, base: Mapping[str, Any] | None) -> tuple[dict[str, Any], _Left]:
    """dashboard.yaml drafted from the tables `names` lists: `base`'s content with the drafted components after it, or a new one."""
    plans = [_plan(files, t) for t in _chosen(files, names)]
    spec: dict[str, Any] = copy.deepcopy(dict(base)) if base is not None else {"title": plans[0].title, "description": ""}
    had_filters = "filters" in spec
    with_layout = "layout" in spec or not spec.get("components")  # else the layout places none and each component has a row
    spec.setdefault("filters", [])
    spec.setdefault("components", [])
    if with_layout:
        spec.setdefault("layout", [])
    left = _Left()
    room = _room(files, len(spec["components"]))
    for plan in plans:
        filters, components, layout = _dashboard_part(plan, files)
        ids_of, new_filters = _merge_filters(spec["filters"], filters, plan.name)
        drafted = [_with_params(c, ids_of) for c in components]
        chosen, room = _pick(drafted, spec["components"], room, left)
        taken = {str(c.get("id")) for c in spec["components"]}
        ids: dict[str, str] = {}
        for i in sorted(chosen):
            ids[drafted[i]["id"]] = _fresh(drafted[i]["id"], taken, plan.name)
            spec["components"].append({**drafted[i], "id": ids[drafted[i]["id"]]})
        for row in layout if with_layout else []:
            cells = [ids[c] if isinstance(c, str) else {**c, "id": ids[c["id"]]} for c in row if (c if isinstance(c, str) else c["id"]) in ids]
            if cells:
                spec["layout"].append(cells)
        params = {p for i in chosen for sql in _sqls(drafted[i]) for p in PARAM_RE.findall(sql)}
        spec["filters"] += [f for f in new_filters if _used(f["id"], params)]
    if not spec["filters"] and not had_filters:
        del spec["filters"]
    if base is None:
        shown = ", ".join(f"`{p.name}`" for p in plans)
        spec["description"] = (
            f"First draft from the data profile of {shown}: key figures, {'a trend, ' if any(p.time for p in plans) else ''}breakdowns and details."
            if spec.get("filters")
            else f"First draft from the data profile of {shown}."
        )
    return spec, left


def _draft_report(files: Mapping[str, Any], names: Sequence[str] | None, base: Mapping[str, Any] | None) -> tuple[dict[str, Any], _Left]:
    """report.yaml drafted from the tables `names` lists: `base`'s sections with the drafted ones after them, or a new one."""
    plans = [_plan(files, t) for t in _chosen(files, names)]
    parts = [_report_part(plan) for plan in plans]
    spec: dict[str, Any] = copy.deepcopy(dict(base)) if base is not None else {"title": parts[0]["title"], "description": parts[0]["description"]}
    had = {key: key in spec for key in ("parameters", "queries")}
    spec.setdefault("parameters", [])
    spec.setdefault("queries", {})
    spec.setdefault("sections", [])
    left = _Left()
    room = _room(files, sum(1 for _ in report_components(spec)))
    for plan, part in zip(plans, parts):
        room = _add_report_part(spec, plan.name, part, room, left)
    for key, was_there in had.items():
        if not spec[key] and not was_there:
            del spec[key]
    if base is None and len(plans) > 1:
        spec["description"] = (
            f"First draft from the data profiles of {', '.join(f'`{p.name}`' for p in plans)}: for each, the overview, key figures and the detail."
        )
    return spec, left


def _add_report_part(spec: dict[str, Any], table_name: str, part: Mapping[str, Any], room: int | None, left: _Left) -> int | None:
    """Append to `spec` the sections drafted from one table that add something, under ids and query names of their own."""
    ids_of, new_params = _merge_filters(spec["parameters"], part.get("parameters") or [], table_name)
    sections = [dict(s) if s.get("type") not in ("kpis", chart.NAME, table.NAME) else s for s in part["sections"]]
    places: list[tuple[int, int | None]] = []  # where each drafted component stands: (section, card) or (section, None)
    drafted: list[dict[str, Any]] = []
    for i, section in enumerate(sections):
        if section.get("type") == "kpis":
            for j, card in enumerate(section.get("components") or []):
                places.append((i, j))
                drafted.append(_with_params(card, ids_of))
        elif section.get("type") in (chart.NAME, table.NAME):
            places.append((i, None))
            drafted.append(_with_params(section, ids_of))
    chosen, room = _pick(drafted, [c for _, c in report_components(spec)], room, left)
    if not chosen:
        return room  # nothing new to say about this table
    taken = {str(c.get("id")) for _, c in report_components(spec)}
    going = {places[i]: drafted[i] for i in chosen}
    out: list[dict[str, Any]] = []
    for i, section in enumerate(sections):
        if section.get("type") == "kpis":
            cards = [{**c, "id": _fresh(c["id"], taken, table_name)} for j in range(len(section.get("components") or [])) if (c := going.get((i, j)))]
            if cards:
                out.append({**section, "components": cards})
        elif section.get("type") in (chart.NAME, table.NAME):
            if (c := going.get((i, None))) is not None:
                out.append({**c, "id": _fresh(c["id"], taken, table_name)})
        else:
            out.append(section)
    out = _tidy(out)
    if spec["sections"]:  # the part follows what is there: it opens with the table's name, not a second "Overview"
        first = next((s for s in out if s.get("type") == "heading"), None)
        if first is not None:
            first["text"] = _label(table_name)
    taken_queries = set(spec["queries"])
    query_names = {name: _fresh(name, taken_queries, table_name) for name in part.get("queries") or {}}
    read: set[str] = set()
    for section in out:
        if section.get("type") == "prose":
            section["markdown"] = PLACEHOLDER_RE.sub(lambda m: m.group(0).replace(m.group(1), query_names.get(m.group(1), m.group(1)), 1), section["markdown"])
            read |= {m.group(1) for m in PLACEHOLDER_RE.finditer(section["markdown"])}
    queries = {query_names[name]: _renamed_params(sql, ids_of) for name, sql in (part.get("queries") or {}).items() if query_names[name] in read}
    spec["sections"] += out
    spec["queries"].update(queries)
    params = {p for sql in [*queries.values(), *(s for c in going.values() for s in _sqls(c))] for p in PARAM_RE.findall(sql)}
    spec["parameters"] += [f for f in new_params if _used(f["id"], params)]
    return room


def _tidy(sections: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """No heading with nothing under it, no page break first, last or after another."""
    kept = []
    for k, section in enumerate(sections):
        if section.get("type") == "heading":
            level, content = section.get("level", 1), False
            for later in sections[k + 1 :]:
                if later.get("type") == "heading" and later.get("level", 1) <= level:
                    break
                if later.get("type") not in ("heading", "page_break"):
                    content = True
                    break
            if not content:
                continue
        kept.append(section)
    out: list[dict[str, Any]] = []
    for section in kept:
        if section.get("type") == "page_break" and (not out or out[-1].get("type") == "page_break"):
            continue
        out.append(section)
    while out and out[-1].get("type") == "page_break":
        out.pop()
    return out
