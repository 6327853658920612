"""A first dashboard without a model: deterministic, from the profile and the output constraints.

Used when no API key is set, and as a fast start when one is. The draft has
KPI cards for the main measures, a trend over the main date column,
breakdowns by the main categories, a detail table and an insight text whose
numbers are all placeholders, plus filters for the main category and the date
range. Colour and threshold rules from task.yaml are applied where their
field appears, so the draft passes every check in `lib/checks.py`.
"""
from __future__ import annotations

import re
from typing import Any, Mapping

from . import coltypes
from .errors import DashmemError
from .warehouse import quote_ident

MAX_KPIS = 3
MAX_BREAKDOWNS = 2
AVERAGED = re.compile(r"(rate|ratio|share|pct|percent|attainment|score|age|price|avg|mean|margin|discount|latitude|longitude|temperature)", re.I)
PREFERRED = re.compile(r"(sales|revenue|amount|value|profit|quantity|qty|actual|total|cost|volume|count|gdp)", re.I)


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
    measures = [c for c in table["columns"] if c.get("role") == "measure" and (c.get("null_share") or 0) < 0.5]
    return sorted(measures, key=lambda c: (not PREFERRED.search(c["name"]), bool(AVERAGED.search(c["name"])), table["columns"].index(c)))[:MAX_KPIS]


def pick_time(table: dict[str, Any]) -> dict[str, Any] | None:
    times = [c for c in table["columns"] if c.get("role") == "time" and (c.get("null_share") or 0) < 0.5 and (c.get("distinct") or 0) > 1]
    return sorted(times, key=lambda c: (coltypes.family(c["type"]) != "time", table["columns"].index(c)))[0] if times else None


def pick_categories(table: dict[str, Any]) -> list[dict[str, Any]]:
    cats = [c for c in table["columns"] if c.get("role") == "dimension" and 2 <= (c.get("distinct") or 0) <= 60
            and (c.get("null_share") or 0) < 0.3]
    return sorted(cats, key=lambda c: (abs((c.get("distinct") or 0) - 8), table["columns"].index(c)))[:MAX_BREAKDOWNS]


def _aggregate(measure: dict[str, Any]) -> str:
    return "avg" if AVERAGED.search(measure["name"]) else "sum"


def draft_files(files: Mapping[str, Any], tables: Mapping[str, Any] | None) -> dict[str, Any]:
    """profile.yaml (the workspace's, else built from `tables`) and a drafted dashboard.yaml.

    NothingToDraft (a ValueError) when there is neither a profile nor data to make one from.
    """
    from . import profile

    data_profile = files.get("profile")
    if not data_profile:
        if not tables:
            raise NothingToDraft("no data loaded: add a source on the Sources page (or `python -m lib source add`) first")
        data_profile = profile.build(tables, (files.get("sources") or {}).get("sources") or [])
    return {"profile": data_profile, "dashboard": draft({**files, "profile": data_profile})}


def draft(files: Mapping[str, Any]) -> dict[str, Any]:
    """dashboard.yaml content for a workspace (its profile, output constraints and task rules)."""
    profile = files.get("profile") or {}
    table = main_table(profile)
    title = (files.get("workspace") or {}).get("name", "Dashboard")
    if table is None:
        raise NothingToDraft("no data profile yet: connect a source and refresh before drafting a dashboard")
    output = files.get("output") or {}
    formats = output.get("number_formats") or {}
    rules = [r["check"] for r in (files.get("task") or {}).get("rules") or [] if r.get("check")]
    layout_rules = output.get("layout") or {}
    per_row = int(layout_rules.get("max_per_row", 4))
    name = table["name"]
    measures = pick_measures(table)
    time = pick_time(table)
    categories = pick_categories(table)

    filters: list[dict[str, Any]] = []
    where: list[str] = []
    if categories:
        cat = categories[0]
        fid = f"f_{alias(cat['name'])}"[:60]
        filters.append({"id": fid, "type": "multiselect", "label": _label(cat["name"]),
                        "options_query": f"SELECT DISTINCT {quote_ident(cat['name'])} FROM {quote_ident(name)} WHERE {quote_ident(cat['name'])} IS NOT NULL ORDER BY 1"})
        where.append(f"(${fid} IS NULL OR list_contains(${fid}, {quote_ident(cat['name'])}))")
    if time and coltypes.family(time["type"]) == "time":
        fid = f"f_{alias(time['name'])}"[:60]
        filters.append({"id": fid, "type": "date_range", "label": _label(time["name"]),
                        "bounds_query": f"SELECT min({quote_ident(time['name'])}), max({quote_ident(time['name'])}) FROM {quote_ident(name)}"})
        where.append(f"(${fid}_from IS NULL OR {quote_ident(time['name'])} >= ${fid}_from) AND (${fid}_to IS NULL OR {quote_ident(time['name'])} <= ${fid}_to)")
    where_sql = (" WHERE " + " AND ".join(where)) if where else ""

    def fmt_for(measure: dict[str, Any] | None) -> str:
        if measure is None:
            return formats.get("default", ",.0f")
        if AVERAGED.search(measure["name"]) and (measure.get("max") or 0) <= 1.5 and (measure.get("min") or 0) >= 0:
            return formats.get("percent", ".1%")
        if max(abs(measure.get("max") or 0), abs(measure.get("min") or 0)) >= 1e7:
            return formats.get("currency") if "$" in formats.get("currency", "") else ".3s"  # 1.23G reads better than 1,234,567,890
        return formats.get("default", ",.1f" if _aggregate(measure) == "avg" else ",.0f")

    components: list[dict[str, Any]] = []
    kpis = [{"id": "kpi_records", "type": "kpi", "title": "Records", "query": f"SELECT count(*) AS value FROM {quote_ident(name)}{where_sql}",
             "format": ",d"}]
    for m in measures:
        agg = _aggregate(m)
        kpi = {"id": f"kpi_{alias(m['name'])}"[:63], "type": "kpi", "title": f"{'Average' if agg == 'avg' else 'Total'} {_label(m['name']).lower()}",
               "query": f"SELECT {agg}({quote_ident(m['name'])}) AS value FROM {quote_ident(name)}{where_sql}", "format": fmt_for(m)}
        if thresholds := _thresholds(rules, m["name"]):
            kpi["thresholds"] = thresholds
        kpis.append(kpi)
    kpis = kpis[:per_row]
    components.extend(kpis)

    lead = measures[0] if measures else None
    lead_expr = f"{_aggregate(lead)}({quote_ident(lead['name'])})" if lead else "count(*)"
    lead_alias = alias(lead["name"]) if lead else "records"
    lead_title = _label(lead["name"]) if lead else "Records"
    rows_layout: list[list[Any]] = [[k["id"] for k in kpis]]

    period = _period(time)
    if time:
        is_date = coltypes.family(time["type"]) == "time"
        components.append({
            "id": "trend", "type": "chart", "title": f"{lead_title} over time",
            "query": f"SELECT {period} AS period, {lead_expr} AS {lead_alias} FROM {quote_ident(name)}{where_sql} GROUP BY 1 ORDER BY 1",
            "mark": "line",
            "encoding": {"x": {"field": "period", "type": "temporal" if is_date else "ordinal", "title": _label(time["name"])},
                         "y": {"field": lead_alias, "type": "quantitative", "title": lead_title, "format": fmt_for(lead)},
                         "tooltip": [{"field": "period", "title": _label(time["name"])},
                                     {"field": lead_alias, "title": lead_title, "format": fmt_for(lead)}]},
        })
        rows_layout.append([{"id": "trend", "width": 2}])

    breakdown_ids = []
    for cat in categories:
        cid = f"by_{alias(cat['name'])}"[:63]
        cat_alias = alias(cat["name"])
        color: dict[str, Any] = {"field": cat_alias, "type": "nominal", "title": _label(cat["name"])}
        domain, colors = _category_colors(rules, cat["name"])
        if domain:
            color["scale"] = {"domain": domain, "range": colors}
        components.append({
            "id": cid, "type": "chart", "title": f"{lead_title} by {_label(cat['name']).lower()}",
            "query": (f"SELECT {quote_ident(cat['name'])} AS {cat_alias}, {lead_expr} AS {lead_alias} FROM {quote_ident(name)}{where_sql} "
                      f"GROUP BY 1 ORDER BY 2 DESC LIMIT 15"),
            "mark": "bar",
            "encoding": {"x": {"field": cat_alias, "type": "nominal", "title": _label(cat["name"]), "sort": "-y"},
                         "y": {"field": lead_alias, "type": "quantitative", "title": lead_title, "format": fmt_for(lead)},
                         "color": color},
        })
        breakdown_ids.append(cid)
    if breakdown_ids:
        rows_layout.append(breakdown_ids[:per_row])

    group = categories[0] if categories else None
    table_cols = measures
    if group:
        select = ", ".join([f"{quote_ident(group['name'])} AS {alias(group['name'])}"] +
                           [f"{_aggregate(m)}({quote_ident(m['name'])}) AS {alias(m['name'])}" for m in table_cols] + ["count(*) AS records"])
        table_sql = f"SELECT {select} FROM {quote_ident(name)}{where_sql} GROUP BY 1 ORDER BY 2 DESC LIMIT 50"  # the first measure, or the record count
    else:
        shown = [c["name"] for c in table["columns"][:8]]
        table_sql = f"SELECT {', '.join(quote_ident(c) + ' AS ' + alias(c) for c in shown)} FROM {quote_ident(name)}{where_sql} LIMIT 50"
    columns_conf: dict[str, Any] = {}
    for m in table_cols:
        conf: dict[str, Any] = {"label": _label(m["name"]), "format": fmt_for(m)}
        if thresholds := _thresholds(rules, m["name"]):
            conf["thresholds"] = thresholds
        columns_conf[alias(m["name"])] = conf
    table_component: dict[str, Any] = {"id": "detail", "type": "table", "title": f"Detail by {_label(group['name']).lower()}" if group else "Sample rows",
                                       "query": table_sql, "max_rows": 50}
    if columns_conf:
        table_component["columns"] = columns_conf
    components.append(table_component)

    text, queries = _insight(name, lead, lead_expr, lead_title, group, time, period, where_sql, fmt_for(lead))
    components.append({"id": "insight", "type": "text", "title": "What stands out", "markdown": text, "queries": queries})
    rows_layout.append([{"id": "detail", "width": 2}, "insight"])

    return {
        "title": title,
        "description": f"First draft from the data profile of `{name}`: key figures, {'a trend, ' if time else ''}breakdowns and details.",
        "filters": filters,
        "components": components,
        "layout": rows_layout,
    } if filters else {
        "title": title,
        "description": f"First draft from the data profile of `{name}`.",
        "components": components,
        "layout": rows_layout,
    }


def _period(time: dict[str, Any] | None) -> str | None:
    """SQL for the trend's period: the time column truncated to a grain that gives a readable line."""
    if time is None:
        return None
    if coltypes.family(time["type"]) != "time":
        return quote_ident(time["name"])  # a numeric year or week number is its own period
    span = _span_days(time)
    grain = "month" if span is None or span > 120 else "day" if span > 2 else "hour"
    if span is not None and span > 3650:
        grain = "year"
    return f"date_trunc('{grain}', {quote_ident(time['name'])})"


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
    return [{"op": r["op"], "value": r["value"], "color": r["color"]} for r in rules
            if r["kind"] == "threshold_color" and r.get("field", "").lower() == field_name.lower()]


def _category_colors(rules: list[dict[str, Any]], field_name: str) -> tuple[list[Any], list[str]]:
    pairs = [(r["value"], r["color"]) for r in rules if r["kind"] == "category_color" and r.get("field", "").lower() == field_name.lower()]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def _insight(name, lead, lead_expr, lead_title, group, time, period, where_sql, fmt) -> tuple[str, dict[str, str]]:
    lines, queries = [], {}
    lead_alias = alias(lead["name"]) if lead else "records"
    if group:
        g = alias(group["name"])
        queries["top"] = (f"SELECT {quote_ident(group['name'])} AS {g}, {lead_expr} AS {lead_alias}, "
                          f"{lead_expr} / sum({lead_expr}) OVER () AS share FROM {quote_ident(name)}{where_sql} GROUP BY 1 ORDER BY 2 DESC LIMIT 1")
        queries["bottom"] = f"SELECT {quote_ident(group['name'])} AS {g}, {lead_expr} AS {lead_alias} FROM {quote_ident(name)}{where_sql} GROUP BY 1 ORDER BY 2 ASC LIMIT 1"
        lines.append(f"- **{{{{top.{g}}}}}** leads {_label(group['name']).lower()} by {lead_title.lower()} "
                     f"with {{{{top.{lead_alias}|{fmt}}}}} ({{{{top.share|.0%}}}} of the whole).")
        lines.append(f"- Lowest: **{{{{bottom.{g}}}}}** with {{{{bottom.{lead_alias}|{fmt}}}}}.")
    if time:
        numeric = coltypes.family(time["type"]) != "time"
        queries["latest"] = (f"WITH p AS (SELECT {period} AS period, {lead_expr} AS v FROM {quote_ident(name)}{where_sql} GROUP BY 1) "
                             f"SELECT period, v AS {lead_alias}, (v - lag(v) OVER (ORDER BY period)) / nullif(abs(lag(v) OVER (ORDER BY period)), 0) AS change "
                             f"FROM p ORDER BY period DESC LIMIT 1")
        shown_period = "{{latest.period|d}}" if numeric else "{{latest.period}}"
        lines.append(f"- Latest {_label(time['name']).lower()} ({shown_period}): {{{{latest.{lead_alias}|{fmt}}}}}, "
                     f"{{{{latest.change|+.1%}}}} on the one before.")
    if not lines:
        queries["size"] = f"SELECT count(*) AS records FROM {quote_ident(name)}{where_sql}"
        lines.append("- {{size.records|,d}} records.")
    return "\n".join(lines) + "\n", queries
