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
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from ..core import settings
from ..core.errors import DashmemError
from ..core.formats import format_number
from ..data import colroles, coltypes, profile
from ..data.sandbox import quote_ident
from ..memory import relationships
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
    """There is no data and no profile to draft a dashboard from; the message says what to do first."""


def alias(name: str) -> str:
    """A column name usable as an encoding field: lower snake_case."""
    text = re.sub(r"[^0-9a-zA-Z]+", "_", name).strip("_").lower() or "value"
    return text if text[0].isalpha() else f"c_{text}"


def _label(name: str) -> str:
    return re.sub(r"[_\s]+", " ", name).strip().capitalize()


def main_table(profile: Mapping[str, Any]) -> dict[str, Any] | None:
    """The table with the most measures, then the most rows."""
    tables = profile.get("tables") or []
    if not tables:
        return None
    return max(tables, key=lambda t: (sum(c.get("role") == "measure" for c in t["columns"]), t["rows"], t["name"]))


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
    """profile.yaml (the workspace's, else built from `tables`) and a drafted dashboard.yaml, report.yaml or both (`kinds`).

    NothingToDraft (a ValueError) when there is neither a profile nor data to make one from.
    """

    unknown = [k for k in kinds if k not in DRAFTABLE]
    if unknown or not kinds:
        raise ValueError(f"the auto-draft writes {' and '.join(DRAFTABLE)}, not {', '.join(unknown) or 'nothing'}")
    data_profile = files.get("profile")
    if not data_profile:
        if not tables:
            raise NothingToDraft(f"no data loaded: add a source on the Sources page (or `{settings.COMMAND} source add`) first")
        data_profile = profile.build_for(tables, files.get("sources"))
    drafters = {"dashboard": draft, "report": draft_report}
    return {"profile": data_profile, **{kind: drafters[kind]({**files, "profile": data_profile}) for kind in DRAFTABLE if kind in kinds}}


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
        return formats.get("default", ",.0f" if additive else ",.1f")


def draft(files: Mapping[str, Any]) -> dict[str, Any]:
    """dashboard.yaml content for a workspace (its profile, output constraints and task rules)."""
    plan = _plan(files)
    filters, plan.where_sql = _filters(plan)
    kpis = _kpis(plan)
    trend = _trend(plan)
    breakdowns = _breakdowns(plan)
    if len(breakdowns) < plan.per_row:
        breakdowns += _joined_breakdown(plan, files)
    detail = _detail_table(plan)
    insight = _insight_text(plan)
    components = [*kpis, *([trend] if trend else []), *breakdowns, detail, insight]
    layout = _layout(plan, kpis, trend, breakdowns, detail, insight)
    if not filters:
        return {"title": plan.title, "description": f"First draft from the data profile of `{plan.name}`.", "components": components, "layout": layout}
    return {
        "title": plan.title,
        "description": f"First draft from the data profile of `{plan.name}`: key figures, {'a trend, ' if plan.time else ''}breakdowns and details.",
        "filters": filters,
        "components": components,
        "layout": layout,
    }


def _plan(files: Mapping[str, Any]) -> _Plan:
    """The main table and what to show of it; ValueError without a profile."""
    table = main_table(files.get("profile") or {})
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
        plan.name, plan.lead, plan.lead_expr, plan.lead_title, group, plan.time, _period(plan.time), plan.where_sql, plan.fmt_for(plan.lead)
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


def _insight(name, lead, lead_expr, lead_title, group, time, period, where_sql, fmt) -> tuple[str, dict[str, str]]:
    lines, queries = [], {}
    lead_alias = alias(lead["name"]) if lead else "records"
    if group:
        g = alias(group["name"])
        queries["top"] = (
            f"SELECT {quote_ident(group['name'])} AS {g}, {lead_expr} AS {lead_alias}, "
            f"{lead_expr} / sum({lead_expr}) OVER () AS share FROM {quote_ident(name)}{where_sql} GROUP BY 1 ORDER BY 2 DESC LIMIT 1"
        )
        queries["bottom"] = (
            f"SELECT {quote_ident(group['name'])} AS {g}, {lead_expr} AS {lead_alias} FROM {quote_ident(name)}{where_sql} GROUP BY 1 ORDER BY 2 ASC LIMIT 1"
        )
        lines.append(
            f"- **{{{{top.{g}}}}}** leads {_label(group['name']).lower()} by {lead_title.lower()} "
            f"with {{{{top.{lead_alias}|{fmt}}}}} ({{{{top.share|.0%}}}} of the whole)."
        )
        lines.append(f"- Lowest: **{{{{bottom.{g}}}}}** with {{{{bottom.{lead_alias}|{fmt}}}}}.")
    if time:
        numeric = coltypes.family(time["type"]) != "time"
        queries["latest"] = (
            f"WITH p AS (SELECT {period} AS period, {lead_expr} AS v FROM {quote_ident(name)}{where_sql} GROUP BY 1) "
            f"SELECT period, v AS {lead_alias}, (v - lag(v) OVER (ORDER BY period)) / nullif(abs(lag(v) OVER (ORDER BY period)), 0) AS change "
            f"FROM p ORDER BY period DESC LIMIT 1"
        )
        grain = _grain(time)
        shown_period = f"{{{{latest.period|{PERIOD_FORMATS[grain]}}}}}" if grain and not numeric else "{{latest.period|d}}"
        lines.append(
            f"- Latest {_label(time['name']).lower()} ({shown_period}): {{{{latest.{lead_alias}|{fmt}}}}}, {{{{latest.change|+.1%}}}} on the one before."
        )
    if not lines:
        queries["size"] = f"SELECT count(*) AS records FROM {quote_ident(name)}{where_sql}"
        lines.append("- {{size.records|,d}} records.")
    return "\n".join(lines) + "\n", queries


# --------------------------------------------------------------------------- the report


def draft_report(files: Mapping[str, Any]) -> dict[str, Any]:
    """report.yaml content for a workspace: the dashboard draft's picks, written as a document.

    Overview prose (every figure a placeholder), the key figures, the trend at
    the time column's grain, the top movers (the categories whose lead measure
    changed most between the latest two periods) when there is a time column
    and a category, the breakdowns by the main categories, then the detail
    table after a page break.
    """
    plan = _plan(files)
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
    _, insight_queries = _insight(plan.name, plan.lead, plan.lead_expr, plan.lead_title, group, time, _period(time), where_sql, fmt)
    lead = plan.lead_title.lower()
    if group:  # the dashboard insight's queries: the leading category, and the latest period against the one before
        queries["top"] = insight_queries["top"]
        g = alias(group["name"])
        lines.append(
            f"By {_label(group['name']).lower()}, **{{{{top.{g}}}}}** leads with {{{{top.{plan.lead_alias}|{fmt}}}}}, {{{{top.share|.0%}}}} of the whole."
        )
    if time:
        queries["latest"] = insight_queries["latest"]
        grain = _grain(time)
        shown = f"{{{{latest.period|{PERIOD_FORMATS[grain]}}}}}" if grain and not numeric_time else "{{latest.period|d}}"
        period = _period_word(time)
        lines.append(
            f"In the latest {period} ({shown}) {lead} came to {{{{latest.{plan.lead_alias}|{fmt}}}}}, {{{{latest.change|+.1%}}}} on the {period} before."
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
        f"The biggest move in {plan.lead_title.lower()} between the latest two {period}s: **{{{{movers.{cat}}}}}**, "
        f"{{{{movers.change|{_signed(plan.fmt_for(plan.lead))}}}}} (from {{{{movers.previous|{plan.fmt_for(plan.lead)}}}}} "
        f"to {{{{movers.{plan.lead_alias}|{plan.fmt_for(plan.lead)}}}}}).\n"
    )
