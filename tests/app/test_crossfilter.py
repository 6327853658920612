"""Cross-filter and drill-down: a chart's `select` (schema and checks), its point selection, and the rows behind a mark.

Real DuckDB over the supply-chain demo's data; every figure is computed again from the CSV with pandas.
"""

from __future__ import annotations

import copy
import shutil

import pandas as pd
import pytest

from lib.artifacts import checks
from lib.artifacts.components import chart
from lib.artifacts.drilldown import DrilldownError, drilldown, rows_sql
from lib.artifacts.export import to_html
from lib.artifacts.render import QueryCache, render
from lib.core.diagnostics import ERROR, WARNING
from lib.data.refresh import refresh
from lib.data.snapshots import Warehouse
from lib.memory import schemas, workspace
from lib.roles.access import OPERATOR
from tests.helpers import current_id
from tests.helpers.report import by_day, by_id, cli

from ..conftest import WORKSPACES

SITE_QUERY = "SELECT site, sum(actual) / sum(target) AS attainment FROM gates WHERE ($site IS NULL OR list_contains($site, site)) GROUP BY site"


@pytest.fixture(scope="module")
def supply(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("crossfilter")
    folder = tmp / "supply-chain-weekly"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", folder)
    wh = Warehouse(tmp / "cache")
    assert refresh(folder, wh, user=OPERATOR).ok
    ws, _ = workspace.load(folder)
    return ws, wh.tables(), current_id(wh)


@pytest.fixture(scope="module")
def gates() -> pd.DataFrame:
    return pd.read_csv(WORKSPACES / "supply-chain-weekly" / "data" / "gates.csv")


def changed(supply, mutate) -> workspace.Workspace:
    ws = supply[0]
    out = workspace.Workspace(ws.path, copy.deepcopy(ws.data), {})
    mutate(out.data["dashboard"])
    return out


def found(supply, mutate) -> list:
    _, tables, version = supply
    return [d for d in checks.run(changed(supply, mutate), tables, version) if d.id in ("check.selections", "check.references", "check.schema")]


# --------------------------------------------------------------------------- schema and checks


def test_the_demo_declares_a_select_and_passes_every_check(supply):
    ws, tables, version = supply
    assert by_id(ws.data["dashboard"], "by_site")["select"] == {"field": "site", "filter": "site"}
    assert checks.run(ws, tables, version) == []


@pytest.mark.parametrize(
    "select, ok",
    [
        ({"field": "site", "filter": "site"}, True),
        ([{"field": "site", "filter": "site"}, {"field": "gate", "filter": "gate"}], True),
        ([], False),
        ({"field": "site"}, False),
        ({"field": "site", "filter": "site", "color": "red"}, False),
        ({"field": "site", "filter": "Not An Id"}, False),
        ("site", False),
    ],
)
def test_the_schema_takes_one_pair_or_a_list_of_pairs(select, ok):
    dashboard = {"title": "t", "components": [{"id": "c", "type": "chart", "query": "SELECT 1 AS a FROM t", "mark": "bar", "encoding": {}, "select": select}]}
    assert (not list(schemas._validator("dashboard").iter_errors(dashboard))) is ok


def test_a_select_naming_no_filter_is_an_error_at_its_line(supply):
    [d] = found(supply, lambda dash: by_id(dash, "by_site").update(select={"field": "site", "filter": "sites"}))
    assert d.id == "check.selections" and d.level == ERROR and d.line
    assert "'sites'" in d.message and "did you mean 'site'" in d.message and d.field.endswith("select.filter")


def test_a_range_filter_cannot_take_a_clicked_value(supply):
    def mutate(dash):
        dash["filters"].append({"id": "period", "type": "date_range", "bounds_query": "SELECT min(day), max(day) FROM gates"})
        by_id(dash, "by_site")["select"] = [{"field": "site", "filter": "site"}, {"field": "site", "filter": "period"}]

    [d] = found(supply, mutate)
    assert d.id == "check.selections" and d.level == ERROR and "date_range" in d.message and "multiselect" in (d.allowed or "")
    assert d.field.endswith("select[1].filter") or d.field.endswith("select.1.filter")


def test_a_select_field_not_in_the_query_is_an_error(supply):
    [d] = found(supply, lambda dash: by_id(dash, "by_site").update(select={"field": "gate", "filter": "site"}))
    assert d.id == "check.references" and d.level == ERROR and "select field 'gate'" in d.message and "site" in (d.allowed or "")


def test_a_temporal_field_drives_a_date_filter_by_the_text_of_its_values(supply, gates):
    """A browser reports a clicked date as an instant in its own time zone; the selection projects the value's text instead."""
    import datetime as dt

    ws, tables, version = supply
    assert found(supply, by_day) == []
    files = changed(supply, by_day).data
    daily = render(files, tables, version, {}, cache=QueryCache()).component("daily")
    assert daily.vega is not None
    [param] = daily.vega["params"]
    key = chart.select_key("day")
    assert param["select"] == {"type": "point", "fields": [key]} and chart.selected_field(key) == "day"
    rows = next(iter(daily.vega["datasets"].values()))
    assert {r[key] for r in rows} == set(gates.day)  # each point carries its day as the CSV writes it

    day = sorted(gates.day.unique())[1]
    r = render(files, tables, version, {"day": dt.date.fromisoformat(day)}, cache=QueryCache())
    vega = r.component("daily").vega
    assert vega is not None and vega["params"][0]["value"] == [{key: day}]
    one = gates[gates.day == day]
    assert r.component("kpi_attainment").value == pytest.approx(one.actual.sum() / one.target.sum())
    d = drilldown(files, tables, version, "daily", {"day": dt.date.fromisoformat(day)})
    assert d.marks == {"day": [dt.date.fromisoformat(day)]} and d.matching == len(one)


def test_a_filter_no_other_query_uses_is_a_warning(supply):
    def mutate(dash):
        dash["filters"].append({"id": "gate", "type": "select", "options_query": "SELECT DISTINCT gate FROM gates"})
        by_id(dash, "by_gate")["select"] = {"field": "gate", "filter": "gate"}

    [d] = found(supply, mutate)
    assert d.id == "check.selections" and d.level == WARNING and "$gate" in d.message


# --------------------------------------------------------------------------- render


def test_the_chart_carries_a_point_selection_and_highlights_the_chosen_site(supply, gates):
    ws, tables, version = supply
    plain = render(ws.data, tables, version, {}, cache=QueryCache()).component("by_site")
    assert plain.vega is not None
    [param] = plain.vega["params"]
    assert param["name"] == chart.SELECTION and param["select"] == {"type": "point", "fields": ["site"]} and "value" not in param
    assert plain.vega["encoding"]["opacity"] == {"condition": {"param": chart.SELECTION, "value": 1.0}, "value": 0.3}

    site = sorted(gates.site.unique())[1]
    r = render(ws.data, tables, version, {"site": [site]}, cache=QueryCache())
    by_site = r.component("by_site")
    assert by_site.vega is not None and by_site.vega["params"][0]["value"] == [{"site": site}]
    # The chart keeps every site to click; the other components follow the filter.
    assert by_site.result is not None
    assert sorted(by_site.result.table.column("site").to_pylist()) == sorted(gates.site.unique())
    one = gates[gates.site == site]
    assert r.component("kpi_attainment").value == pytest.approx(one.actual.sum() / one.target.sum())
    by_gate = r.component("by_gate").result
    assert by_gate is not None and by_gate.table.num_rows == one.gate.nunique()


def test_explain_shows_the_chart_query_as_it_ran_without_its_driven_filter(supply):
    from lib.artifacts.explain import explain

    ws, tables, version = supply
    e = explain(ws.data, tables, None, "by_site", {"site": ["Brno"]}, version=version)
    assert e.queries[0].params == {"site": None} and len(e.queries[0].result_rows) == 5  # every site, as drawn (RESULT_ROWS of them)
    assert explain(ws.data, tables, None, "kpi_attainment", {"site": ["Brno"]}, version=version).queries[0].params == {"site": ["Brno"]}


def test_the_built_chart_is_reused_per_selection(supply):
    ws, tables, version = supply
    cache = QueryCache()
    first = render(ws.data, tables, version, {"site": ["Brno"]}, cache=cache).component("by_site")
    again = render(ws.data, tables, version, {"site": ["Brno"]}, cache=cache).component("by_site")
    other = render(ws.data, tables, version, {"site": ["Lyon"]}, cache=cache).component("by_site")
    assert again.chart is first.chart  # same query result, same selection: not built again
    assert other.result is first.result and other.chart is not first.chart
    assert other.vega is not None and other.vega["params"][0]["value"] == [{"site": "Lyon"}]


def test_the_export_keeps_the_highlight_and_says_filters_are_fixed(supply):
    ws, tables, version = supply
    page = to_html(render(ws.data, tables, version, {"site": ["Brno"]}, cache=QueryCache()))
    assert "The filters are fixed in this file" in page
    assert page.count("The filters are fixed in this file") == 1  # only the chart with select says it
    assert '"value": [{"site": "Brno"}]' in page or '"value":[{"site":"Brno"}]' in page


# --------------------------------------------------------------------------- drill-down


def test_show_rows_of_a_selected_bar_are_the_rows_of_that_site(supply, gates):
    ws, tables, version = supply
    site = sorted(gates.site.unique())[0]
    d = drilldown(ws.data, tables, version, "by_site", {"site": [site]})
    expected = gates[gates.site == site]
    assert d.marks == {"site": [site]} and d.matching == len(expected) and not d.capped
    assert sorted(r["actual"] for r in d.rows) == sorted(expected.actual)
    assert {r["site"] for r in d.rows} == {site}
    assert site not in d.sql and "$__mark_0_0" in d.sql and d.params["__mark_0_0"] == site  # bound, never pasted
    assert f"'{site}'" in d.readable


def test_show_rows_of_a_kpi_follow_the_filters_and_say_when_capped(supply, gates):
    ws, tables, version = supply
    sites = sorted(gates.site.unique())[:2]
    d = drilldown(ws.data, tables, version, "kpi_attainment", {"site": sites}, cap=5)
    assert d.marks == {} and d.matching == int(gates.site.isin(sites).sum()) and len(d.rows) == 5 and d.capped
    assert d.params == {"site": sites}
    everything = drilldown(ws.data, tables, version, "site_gate", {})
    assert everything.matching == len(gates) and len(everything.rows) == min(len(gates), 200)


@pytest.mark.parametrize("cap", [0, -1, 5001, 10**20])
def test_show_rows_refuses_a_cap_beyond_its_bound(supply, cap):
    # `rows --max-rows 100000000000` read every row of the table into Python: the cap must bound memory, not widen it.
    ws, tables, version = supply
    with pytest.raises(DrilldownError, match="between 1 and 5,000"):
        drilldown(ws.data, tables, version, "site_gate", {}, cap=cap)


def test_two_selected_fields_narrow_by_both(supply, gates):
    ws, tables, version = supply

    def mutate(dash):
        dash["filters"].append({"id": "gate", "type": "select", "options_query": "SELECT DISTINCT gate FROM gates"})
        dash["components"].append(
            {
                "id": "grid",
                "type": "chart",
                "query": "SELECT site, gate, sum(actual) AS actual FROM gates WHERE ($gate IS NULL OR gate = $gate) GROUP BY site, gate",
                "mark": "rect",
                "encoding": {"x": {"field": "site", "type": "nominal"}, "y": {"field": "gate", "type": "nominal"}},
                "select": [{"field": "site", "filter": "site"}, {"field": "gate", "filter": "gate"}],
            }
        )

    files = changed(supply, mutate).data
    d = drilldown(files, tables, version, "grid", {"site": ["Brno", "Lyon"], "gate": "Orders"})
    expected = gates[gates.site.isin(["Brno", "Lyon"]) & (gates.gate == "Orders")]
    assert d.matching == len(expected) and sorted(r["actual"] for r in d.rows) == sorted(expected.actual)
    grid = render(files, tables, version, {"site": ["Brno"], "gate": "Orders"}, cache=QueryCache()).component("grid")
    assert grid.error is None and grid.vega is not None and grid.vega["params"][0]["value"] == [{"site": "Brno", "gate": "Orders"}]


def test_rows_that_cannot_be_derived_say_why():
    with pytest.raises(DrilldownError, match="subquery"):
        rows_sql("SELECT count(*) AS value FROM (SELECT site FROM gates GROUP BY site)")
    with pytest.raises(DrilldownError, match="aggregate"):
        rows_sql(SITE_QUERY, {"attainment": [0.9]})
    with pytest.raises(DrilldownError, match="not a column"):
        rows_sql(SITE_QUERY, {"gate": ["Orders"]})
    sql, count, params = rows_sql("SELECT date_trunc('week', day) AS wk, sum(actual) AS a FROM gates GROUP BY 1", {"wk": ["2026-11-16"]})
    assert "DATE_TRUNC('WEEK', day) = $__mark_0_0" in sql and params == {"__mark_0_0": "2026-11-16"} and count.startswith("SELECT COUNT(*)")


def test_show_rows_of_an_unknown_component_names_the_known_ones(supply):
    ws, tables, version = supply
    with pytest.raises(DrilldownError, match="by_site"):
        drilldown(ws.data, tables, version, "nope", {})
    with pytest.raises(DrilldownError, match="single query"):
        drilldown(ws.data, tables, version, "insight", {})


# --------------------------------------------------------------------------- the Dashboard page (AppTest; the click itself: test_browser_crossfilter.py)


def test_a_chosen_site_shows_as_selected_and_clear_selection_restores_the_figures(monkeypatch, tmp_path, gates):
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from ..conftest import ROOT

    monkeypatch.setenv("DASHMEM_CONFIG_REPO", str(tmp_path / "config-repo"))
    monkeypatch.setenv("DASHMEM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("DASHMEM_COOKIE_KEY", "k" * 40)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.chdir(ROOT)
    st.cache_resource.clear()
    st.cache_data.clear()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.session_state["authentication_status"] = True
    at.session_state["username"] = at.session_state["name"] = "vera"
    at.session_state["slug"] = "supply-chain-weekly"
    at.run()
    assert not at.exception, at.exception

    def attainment() -> str:
        return next(m.value for m in at.metric if m.label == "Attainment this week")

    everything = attainment()
    assert not [b for b in at.button if b.label == "Clear selection"]
    assert any("Click a mark to filter the dashboard by Sites" in c.value for c in at.caption)
    site = sorted(gates.site.unique())[-1]
    next(m for m in at.multiselect if m.label == "Sites").select(site).run()
    one = gates[gates.site == site]
    assert attainment() == f"{one.actual.sum() / one.target.sum() * 100:.1f}%" != everything
    assert any(f"Selected Sites: {site}" in c.value for c in at.caption)

    next(b for b in at.button if b.label == "Clear selection").click().run()
    assert not at.exception, at.exception
    assert attainment() == everything
    assert next(m for m in at.multiselect if m.label == "Sites").value == []
    assert not [b for b in at.button if b.label == "Clear selection"]


def test_a_clicked_value_becomes_the_filters_own_option():
    """The browser sends JSON numbers and text; the filter bar takes only its options, each once, in click order."""
    from lib.artifacts.render import FilterState
    from lib.memory.spec import matching_options, selected_points

    sites = FilterState("site", "multiselect", "Sites", options=["Brno", "Lyon", "Porto"])
    assert matching_options(sites.options, ["Lyon", "Nowhere", "Brno", "Lyon"]) == ["Lyon", "Brno"]
    years = FilterState("year", "select", "Year", options=[2023, 2024])
    assert matching_options(years.options, [2024.0]) == [2024] and matching_options(years.options, ["2023"]) == [2023]
    assert selected_points([{"site": "Brno"}, "junk"]) == [{"site": "Brno"}] and selected_points({}) == [] and selected_points(None) == []


def test_a_forged_selection_of_many_points_reads_the_options_once_and_keeps_only_options():
    """The selection event is the browser's to write: 200,000 points (or nested objects) must not cost points x options."""
    from lib.artifacts.render import FilterState
    from lib.memory.spec import matching_options

    class Counted(list):
        passes = 0

        def __iter__(self):
            Counted.passes += 1
            return super().__iter__()

    sites = FilterState("site", "multiselect", "Sites", options=Counted(f"site{i}" for i in range(1000)))
    sent = [f"x{i}" for i in range(200_000)] + [{"site": ["site1"]}, ["site2"], None, float("nan"), "site7", 3, "site7"]
    assert matching_options(sites.options, sent) == ["site7"]
    assert Counted.passes <= 2  # not once per value sent


def test_a_clicked_days_text_becomes_the_date_option_of_that_day_and_nothing_else():
    import datetime as dt

    from lib.artifacts.render import FilterState
    from lib.memory.spec import matching_options

    days = FilterState("day", "multiselect", "Day", options=[dt.date(2026, 11, 16), dt.date(2026, 11, 17)])
    assert matching_options(days.options, ["2026-11-17", "2026-11-16"]) == [dt.date(2026, 11, 17), dt.date(2026, 11, 16)]
    # A day's text at midnight is that day (date_trunc over a DATE); no other hour, zone or epoch number is.
    assert matching_options(days.options, ["2026-11-17 00:00:00"]) == [dt.date(2026, 11, 17)]
    assert matching_options(days.options, ["2026-11-16T23:00:00", "2026-11-17T00:00:00+01:00", 1763251200000, "junk"]) == []
    stamps = FilterState("at", "select", "At", options=[dt.datetime(2026, 11, 16, 6, 30)])
    assert (
        matching_options(stamps.options, ["2026-11-16 06:30:00"]) == [dt.datetime(2026, 11, 16, 6, 30)]
        and matching_options(stamps.options, ["2026-11-16"]) == []
    )


# --------------------------------------------------------------------------- `python -m lib rows`, in its own processes


@pytest.mark.slow
def test_cli_rows_of_a_selected_bar_with_a_filter_are_those_rows_of_the_csv(tmp_path, gates):
    import json

    folder = tmp_path / "supply-chain-weekly"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", folder)
    cache = tmp_path / "cache"
    proc = cli("rows", folder, "by_site", "--select", "site=Brno", "--json", cache=cache)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)
    brno = gates[gates.site == "Brno"]
    assert out["ok"] and out["marks"] == {"site": ["Brno"]} and out["matching"] == len(brno) and not out["capped"]
    assert sorted(r["actual"] for r in out["rows"]) == sorted(brno.actual) and "Brno" not in out["sql"]
    kpi = cli("rows", folder, "kpi_attainment", "--filter", "site=Lyon", "--filter", "site=Porto", "--max-rows", "3", cache=cache)
    assert kpi.returncode == 0, kpi.stderr
    expected = int(gates.site.isin(["Lyon", "Porto"]).sum())
    assert f"{expected:,} match, the first 3 shown" in kpi.stdout and "$site = ['Lyon', 'Porto']" in kpi.stdout
    assert len(kpi.stdout.strip().splitlines()) == 3 + 4  # heading, sql, parameters, columns, then the 3 rows
    for args, message in [
        (["by_site", "--select", "gate=Orders"], "a field the component's marks select (site)"),
        (["kpi_attainment", "--select", "site=Brno"], "none: it has no select"),
        (["by_site", "--select", "site=Atlantis"], "'Atlantis' is not one of its options"),
        (["nope"], "no component 'nope'"),
        (["nope", "--select", "site=Brno"], "no component 'nope' in this dashboard; its components: kpi_attainment"),
        (["site_gate", "--max-rows", "100000000000"], "between 1 and 5,000"),
    ]:
        bad = cli("rows", folder, *args, cache=cache)
        assert bad.returncode == 1 and bad.stdout == "" and message in bad.stderr and "Traceback" not in bad.stderr, bad.stderr


def test_show_rows_and_explore_on_a_live_sqlite_source_bind_hostile_values(tmp_path):
    """Values with quotes, `$1`, NUL, LIKE wildcards and SQL text, in a live source's own database: each one matched as text."""
    import sqlite3

    import pyarrow as pa

    from lib.artifacts import explore

    hostile = ["it's", 'a"b', "x'; DROP TABLE orders; --", "$1", "日本", "a\x00b", "%", "_"]
    with sqlite3.connect(tmp_path / "local.db") as connection:
        connection.execute("CREATE TABLE orders (region TEXT, sales INTEGER)")
        connection.executemany("INSERT INTO orders VALUES (?, ?)", [(h, i) for i, h in enumerate(hostile)] + [("north", 100)])
    query = "SELECT region, sum(sales) AS s FROM orders WHERE ($region IS NULL OR list_contains($region, region)) GROUP BY region"
    files = {
        "sources": {"sources": [{"name": "orders", "type": "sql", "url": "sqlite:///local.db", "table": "orders", "mode": "live", "cache_ttl_s": 0}]},
        "dashboard": {
            "title": "Orders",
            "filters": [{"id": "region", "type": "multiselect", "options_query": "SELECT DISTINCT region FROM orders ORDER BY 1"}],
            "components": [
                {
                    "id": "by_region",
                    "type": "chart",
                    "query": query,
                    "mark": "bar",
                    "encoding": {"x": {"field": "region", "type": "nominal"}, "y": {"field": "s", "type": "quantitative"}},
                    "select": {"field": "region", "filter": "region"},
                }
            ],
        },
        "profile": {
            "tables": [
                {
                    "name": "orders",
                    "rows": 9,
                    "columns": [
                        {"name": "region", "type": "VARCHAR", "role": "dimension", "distinct": 9},
                        {"name": "sales", "type": "BIGINT", "role": "measure", "aggregate": "sum"},
                    ],
                }
            ]
        },
    }
    empty = {"orders": pa.table({"region": pa.array([], "string"), "sales": pa.array([], "int64")})}  # what refresh keeps of a live table
    for i, value in enumerate(hostile):
        d = drilldown(files, empty, "v1", "by_region", {"region": [value]}, workspace_path=tmp_path)
        assert d.matching == 1 and d.rows == [{"region": value, "sales": i}] and d.params["__mark_0_0"] == value
        built, result = explore.run(
            explore.Question("orders", "sales", "sum", filters=(explore.Filter("region", "=", value),)),
            files,
            empty,
            "v1",
            workspace_path=tmp_path,
            cache=QueryCache(),
        )
        assert result.table.to_pylist() == [{"value": i}] and built.params == {"f0": value}
    assert drilldown(files, empty, "v1", "by_region", {"region": hostile}, workspace_path=tmp_path).matching == len(hostile)
    with sqlite3.connect(tmp_path / "local.db") as connection:
        assert connection.execute("SELECT count(*) FROM orders").fetchone() == (len(hostile) + 1,)
