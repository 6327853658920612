"""Auto-draft without a model: a first dashboard for every public dataset that passes every check."""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import cast

import pandas as pd
import pytest

from lib.artifacts import autodraft, checks
from lib.artifacts.components import chart
from lib.artifacts.render import QueryCache, render
from lib.artifacts.report import render_report
from lib.data import live, profile, standins
from lib.data.refresh import refresh
from lib.data.snapshots import Warehouse
from lib.memory import workspace
from lib.memory.shapes import report_components
from lib.roles.access import OPERATOR
from tests.helpers import current_id
from tests.helpers.tables import orders_csv_text

from ..conftest import WORKSPACES

PUBLIC = ["gdp.csv", "adult.csv", "global_superstore_sample1000.csv", "global_superstore.csv", "nyc311_sample5000.csv", "nyc311_api_1000.csv"]


def workspace_over(tmp_path, csv: Path):
    """A workspace over one CSV (from the `dataset` fixture), loaded and profiled."""
    os.environ["DASHMEM_DATA_DIRS"] = str(csv.parent)
    folder = tmp_path / csv.name.split(".")[0].replace("_", "-")
    workspace.save(folder, workspace.blank(csv.name, "alice", "2026-11-30"))
    workspace.save(folder, {"sources": {"sources": [{"name": "data", "type": "csv", "path": str(csv)}]}})
    wh = Warehouse(tmp_path / "cache")
    assert refresh(folder, wh, user=OPERATOR).ok
    ws, _ = workspace.load(folder)
    workspace.save(folder, {"profile": profile.build(wh.tables(), ws.data["sources"]["sources"])})
    return folder, wh


@pytest.mark.parametrize("csv_name", PUBLIC)
def test_autodraft_passes_every_check(tmp_path, csv_name, dataset):
    folder, wh = workspace_over(tmp_path, dataset(csv_name))
    ws, _ = workspace.load(folder)
    spec = autodraft.draft(ws.data)
    workspace.save(folder, {"dashboard": spec})
    ws, diags = workspace.load(folder)
    assert diags == []
    assert checks.run(ws, wh.tables(), current_id(wh)) == []
    kinds = [c["type"] for c in spec["components"]]
    assert kinds.count("kpi") >= 1 and "chart" in kinds and "table" in kinds and "text" in kinds
    rendered = render(ws.data, wh.tables(), current_id(wh), cache=QueryCache())
    assert rendered.errors == []
    assert "{{" not in rendered.component("insight").markdown
    assert [c.id for c in rendered.rows[0]] == [c["id"] for c in spec["components"] if c["type"] == "kpi"]
    # Only additive measures are summed; identifiers, codes and years never are.
    columns = {c["name"]: c for c in ws.data["profile"]["tables"][0]["columns"]}
    summed = re.findall(r'sum\("([^"]+)"\)', " ".join(c.get("query", "") for c in spec["components"]))
    assert all(columns[name].get("aggregate") == "sum" for name in summed), summed


def test_autodraft_has_a_trend_and_breakdowns_where_the_data_allows(tmp_path, dataset):
    folder, wh = workspace_over(tmp_path, dataset("global_superstore_sample1000.csv"))
    ws, _ = workspace.load(folder)
    spec = autodraft.draft(ws.data)
    ids = [c["id"] for c in spec["components"]]
    assert "trend" in ids and any(i.startswith("by_") for i in ids)
    trend = next(c for c in spec["components"] if c["id"] == "trend")
    assert trend["encoding"]["x"]["type"] == "temporal" and "date_trunc" in trend["query"]
    assert {f["type"] for f in spec["filters"]} == {"multiselect", "date_range"}


def test_autodraft_is_deterministic(tmp_path, dataset):
    folder, _ = workspace_over(tmp_path, dataset("adult.csv"))
    ws, _ = workspace.load(folder)
    assert workspace.render("dashboard", autodraft.draft(ws.data)) == workspace.render("dashboard", autodraft.draft(ws.data))


def test_autodraft_applies_the_workspace_rules(tmp_path):
    folder = tmp_path / "supply-chain-weekly"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", folder)
    wh = Warehouse(tmp_path / "cache")
    assert refresh(folder, wh, user=OPERATOR).ok
    ws, _ = workspace.load(folder)
    spec = autodraft.draft(ws.data)
    assert [c["title"] for c in spec["components"] if c["type"] == "kpi"] == ["Records", "Total actual", "Total target", "Average attainment"]
    by_gate = next(c for c in spec["components"] if c["id"] == "by_gate")
    assert by_gate["encoding"]["color"]["scale"] == {"domain": ["Supply", "Orders", "Process"], "range": ["#1f77b4", "#ff7f0e", "#9467bd"]}
    ws.data["dashboard"] = spec
    assert checks.run(ws, wh.tables(), current_id(wh)) == []


def test_autodraft_without_a_profile_says_what_to_do(tmp_path):
    ws_files = workspace.blank("Empty", "alice", "2026-11-30")
    with pytest.raises(ValueError, match="connect a source and refresh"):
        autodraft.draft(ws_files)


# The first rows of the UCI Auto MPG table (Quinlan 1993), with the names the dashboard showed.
CARS_HEADER = "Name,Miles per gallon,Cylinders,Displacement,Horsepower,Weight,Acceleration,Model year,Origin"
CARS_ROWS = """chevrolet chevelle malibu,18,8,307,130,3504,12.0,70,1
buick skylark 320,15,8,350,165,3693,11.5,70,1
plymouth satellite,18,8,318,150,3436,11.0,70,1
amc rebel sst,16,8,304,150,3433,12.0,70,1
ford torino,17,8,302,140,3449,10.5,70,1
ford galaxie 500,15,8,429,198,4341,10.0,70,1
chevrolet impala,14,8,454,220,4354,9.0,70,1
plymouth fury iii,14,8,440,215,4312,8.5,70,1
pontiac catalina,14,8,455,225,4425,10.0,70,1
amc ambassador dpl,15,8,390,190,3850,8.5,70,1
toyota corona mark ii,24,4,113,95,2372,15.0,70,3
plymouth duster,22,6,198,95,2833,15.5,70,1
amc hornet,18,6,199,97,2774,15.5,70,1
ford maverick,21,6,200,85,2587,16.0,70,1
datsun pl510,27,4,97,88,2130,14.5,70,3
volkswagen 1131 deluxe sedan,26,4,97,46,1835,20.5,70,2
peugeot 504,25,4,110,87,2672,17.5,70,2
audi 100 ls,24,4,107,90,2430,14.5,70,2
saab 99e,25,4,104,95,2375,17.5,70,2
bmw 2002,26,4,121,113,2234,12.5,70,2
amc gremlin,21,6,199,90,2648,15.0,70,1
ford f250,10,8,360,215,4615,14.0,70,1
chevy c20,10,8,307,200,4376,15.0,70,1
dodge d200,11,8,318,210,4382,13.5,70,1
hi 1200d,9,8,304,193,4732,18.5,70,1
datsun pl510,27,4,97,88,2130,14.5,71,3
chevrolet vega 2300,28,4,140,90,2264,15.5,71,1
toyota corona,25,4,113,95,2228,14.0,71,3
amc gremlin,19,6,232,100,2634,13.0,71,1
plymouth satellite custom,16,6,225,105,3439,15.5,71,1
"""


def cars_csv(tmp_path) -> Path:
    path = tmp_path / "data" / "cars.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(CARS_HEADER + "\n" + CARS_ROWS, encoding="utf-8")
    return path


def test_a_cars_table_is_averaged_not_summed(tmp_path):
    folder, wh = workspace_over(tmp_path, cars_csv(tmp_path))
    ws, _ = workspace.load(folder)
    spec = autodraft.draft(ws.data)
    titles = [c["title"] for c in spec["components"]]
    assert not [t for t in titles if t.startswith("Total")], titles
    assert [c["title"] for c in spec["components"] if c["type"] == "kpi"] == [
        "Records",
        "Average miles per gallon",
        "Average displacement",
        "Average horsepower",
    ]
    queries = " ".join(c.get("query", "") for c in spec["components"])
    assert "sum(" not in queries and 'avg("Miles per gallon")' in queries
    assert not any(c["id"] in ("kpi_cylinders", "kpi_origin", "kpi_model_year") for c in spec["components"])  # codes and years
    trend = next(c for c in spec["components"] if c["id"] == "trend")
    assert '"Model year" AS period' in trend["query"]
    ws.data["dashboard"] = spec
    assert checks.run(ws, wh.tables(), current_id(wh)) == []
    kpis = {c.id: c.display for c in render(ws.data, wh.tables(), current_id(wh), cache=QueryCache()).rows[0]}
    mpg = [float(line.split(",")[1]) for line in CARS_ROWS.splitlines()]
    assert kpis["kpi_miles_per_gallon"] == f"{sum(mpg) / len(mpg):,.1f}".removesuffix(".0") != f"{sum(mpg):,.1f}"  # a whole average without ".0"


def test_a_profile_written_before_aggregates_were_recorded_still_drafts_averages(tmp_path):
    """profile.yaml written by one process without `aggregate` (an older profile), drafted in another."""
    csv = cars_csv(tmp_path)
    folder = tmp_path / "cars"
    env = {**os.environ, "DASHMEM_DATA_DIRS": str(csv.parent), "PYTHONPATH": str(Path(__file__).parents[2])}
    write = f"""
from pathlib import Path
from lib.data import profile; from lib.memory import workspace
from lib.roles.access import OPERATOR
from lib.data.refresh import refresh
from lib.data.snapshots import Warehouse
folder = Path({str(folder)!r})
workspace.save(folder, workspace.blank("Cars", "alice", "2026-11-30"))
workspace.save(folder, {{"sources": {{"sources": [{{"name": "data", "type": "csv", "path": {str(csv)!r}}}]}}}})
wh = Warehouse(Path({str(tmp_path / "cache")!r}))
assert refresh(folder, wh, user=OPERATOR).ok
built = profile.build(wh.tables())
for table in built["tables"]:
    for column in table["columns"]:
        column.pop("aggregate", None)
workspace.save(folder, {{"profile": built}})
"""
    draft = f"""
from pathlib import Path
from lib.artifacts import autodraft; from lib.memory import workspace
folder = Path({str(folder)!r})
ws, diags = workspace.load(folder)
assert diags == [], diags
workspace.save(folder, {{"dashboard": autodraft.draft(ws.data)}})
"""
    for script in (write, draft):
        done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    assert "aggregate" not in (folder / "profile.yaml").read_text(encoding="utf-8")
    ws, diags = workspace.load(folder)
    assert diags == []
    kpis = [c for c in ws.data["dashboard"]["components"] if c["type"] == "kpi"]
    assert [k["title"] for k in kpis][1:] == ["Average miles per gallon", "Average displacement", "Average horsepower"]


def test_the_latest_month_reads_as_a_month_in_text_axis_and_tooltip(tmp_path, dataset):
    folder, wh = workspace_over(tmp_path, dataset("global_superstore_sample1000.csv"))
    ws, _ = workspace.load(folder)
    ws.data["dashboard"] = spec = autodraft.draft(ws.data)
    trend = next(c for c in spec["components"] if c["id"] == "trend")
    assert "date_trunc('month'" in trend["query"]
    assert trend["encoding"]["x"]["format"] == "%B %Y" and trend["encoding"]["tooltip"][0]["format"] == "%B %Y"
    rendered = render(ws.data, wh.tables(), current_id(wh), cache=QueryCache())
    assert rendered.errors == []
    latest = wh.tables()["data"].column("Order Date").to_pylist()
    newest = max(d for d in latest if d is not None)
    assert f"Latest order date ({newest:%B %Y})" in rendered.component("insight").markdown
    vega = chart.vega_lite_spec(rendered.component("trend"))
    assert vega["encoding"]["x"]["axis"]["format"] == "%B %Y"


def test_a_six_year_series_is_drafted_by_quarter_labelled_2020_q4(tmp_path):
    import datetime as dt

    path = tmp_path / "data" / "orders.csv"
    path.parent.mkdir(parents=True)
    start = dt.date(2015, 1, 1)
    lines = ["order_date,region,amount"] + [f"{start + dt.timedelta(days=7 * i)},{'NSEW'[i % 4]},{10 + i % 13}" for i in range(313)]  # to 2020-12-31
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    folder, wh = workspace_over(tmp_path, path)
    ws, _ = workspace.load(folder)
    ws.data["dashboard"] = spec = autodraft.draft(ws.data)
    trend = next(c for c in spec["components"] if c["id"] == "trend")
    assert "date_trunc('quarter'" in trend["query"] and trend["encoding"]["x"]["format"] == "%Y-Q%q"
    assert checks.run(ws, wh.tables(), current_id(wh)) == []
    rendered = render(ws.data, wh.tables(), current_id(wh), cache=QueryCache())
    assert "Latest order date (2020-Q4)" in rendered.component("insight").markdown


@pytest.mark.parametrize("kind", ["postgresql", "mariadb"])
def test_a_long_tailed_measure_of_a_live_table_is_drafted_as_a_mean_its_database_can_run(tmp_path, kind):
    """Median is the right figure for a long tail, but MariaDB has no median aggregate: a live draft averages."""
    import uuid

    from ..conftest import SERVERS, server_engine

    engine = server_engine(kind)
    name = f"dm_autodraft_{uuid.uuid4().hex[:10]}"
    days = [1, 1, 2, 1, 3, 2, 1, 45, 60, 2, 1, 1, 90, 2, 3, 2] * 5
    with engine.begin() as connection:
        connection.exec_driver_sql(f"CREATE TABLE {name} (region VARCHAR(10), days_to_resolve INTEGER)")
        connection.exec_driver_sql(f"INSERT INTO {name} VALUES " + ", ".join(f"('{'NSEW'[i % 4]}', {d})" for i, d in enumerate(days)))
    try:
        url = SERVERS[kind][2].replace("+psycopg2", "").replace("+pymysql", "")
        folder = tmp_path / "tickets"
        workspace.save(folder, workspace.blank("Tickets", "alice", "2026-11-30"))
        workspace.save(folder, {"sources": {"sources": [{"name": "tickets", "type": "sql", "url": url, "table": name, "mode": "live", "cache_ttl_s": 0}]}})
        wh = Warehouse(tmp_path / "cache")
        assert refresh(folder, wh, user=OPERATOR).ok
        ws, _ = workspace.load(folder)
        built = profile.build(wh.tables(), ws.data["sources"]["sources"], workspace_path=folder)
        column = next(c for c in built["tables"][0]["columns"] if c["name"] == "days_to_resolve")
        assert column["aggregate"] == "median"
        workspace.save(folder, {"profile": built})
        ws, _ = workspace.load(folder)
        spec = autodraft.draft(ws.data)
        card = next(c for c in spec["components"] if c["id"] == "kpi_days_to_resolve")
        assert card["title"] == "Average days to resolve" and 'avg("days_to_resolve")' in card["query"]
        source = ws.data["sources"]["sources"][0]
        unfiltered = card["query"].split(" WHERE ")[0]
        assert live.run(source, unfiltered).rows == [(pytest.approx(sum(days) / len(days)),)]
        if kind == "postgresql":  # the draft's multiselect filter (list_contains) does not run on MariaDB yet
            ws.data["dashboard"] = spec
            rendered = render(ws.data, wh.tables(), current_id(wh), cache=QueryCache())
            assert rendered.errors == []
            assert rendered.component("kpi_days_to_resolve").display == f"{sum(days) / len(days):,.1f}"
    finally:
        with engine.begin() as connection:
            connection.exec_driver_sql(f"DROP TABLE IF EXISTS {name}")
        engine.dispose()


def test_a_long_tailed_measure_of_a_snapshot_is_drafted_as_a_median(tmp_path):
    path = tmp_path / "data" / "tickets.csv"
    path.parent.mkdir(parents=True)
    days = [1, 1, 2, 1, 3, 2, 1, 45, 60, 2, 1, 1, 90, 2, 3, 2] * 5
    path.write_text("region,days_to_resolve\n" + "".join(f"{'NSEW'[i % 4]},{d}\n" for i, d in enumerate(days)), encoding="utf-8")
    folder, wh = workspace_over(tmp_path, path)
    ws, _ = workspace.load(folder)
    ws.data["dashboard"] = spec = autodraft.draft(ws.data)
    card = next(c for c in spec["components"] if c["id"] == "kpi_days_to_resolve")
    assert card["title"] == "Median days to resolve" and 'median("days_to_resolve")' in card["query"]
    assert checks.run(ws, wh.tables(), current_id(wh)) == []
    rendered = render(ws.data, wh.tables(), current_id(wh), cache=QueryCache())
    assert rendered.component("kpi_days_to_resolve").display == "2"  # the median, a whole figure without ".0"


@pytest.mark.parametrize(
    ("first", "last", "grain", "latest"),
    [
        ("2000-01-01", "2014-12-31", "year", "2014"),
        ("2014-01-01", "2014-12-31", "month", "December 2014"),
        ("2014-11-01", "2014-12-31", "week", "week of 29 Dec 2014"),
        ("2014-12-20", "2014-12-31", "day", "31 Dec 2014"),
    ],
)
def test_each_grain_labels_its_latest_period_the_same_in_text_and_axis(tmp_path, first, last, grain, latest):
    import datetime as dt

    low, high = dt.date.fromisoformat(first), dt.date.fromisoformat(last)
    step = max(1, (high - low).days // 200)
    days = [low + dt.timedelta(days=i) for i in range(0, (high - low).days + 1, step)]
    if days[-1] != high:
        days.append(high)
    path = tmp_path / "data" / "sales.csv"
    path.parent.mkdir(parents=True)
    path.write_text("sold_on,region,amount\n" + "".join(f"{d},{'NSEW'[i % 4]},{5 + i % 7}\n" for i, d in enumerate(days)), encoding="utf-8")
    folder, wh = workspace_over(tmp_path, path)
    ws, _ = workspace.load(folder)
    ws.data["dashboard"] = spec = autodraft.draft(ws.data)
    trend = next(c for c in spec["components"] if c["id"] == "trend")
    assert f"date_trunc('{grain}'" in trend["query"] and trend["encoding"]["x"]["title"] == f"Sold on ({grain})"
    assert checks.run(ws, wh.tables(), current_id(wh)) == []
    rendered = render(ws.data, wh.tables(), current_id(wh), cache=QueryCache())
    assert f"Latest sold on ({latest})" in rendered.component("insight").markdown
    assert chart.vega_lite_spec(rendered.component("trend"))["encoding"]["x"]["axis"]["format"] == trend["encoding"]["x"]["format"]


def test_a_declared_join_offers_a_breakdown_by_the_joined_tables_category(tmp_path, dataset):
    """orders.buyer -> clients.client declared: sales by clients.segment, equal to the sums computed directly."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    store = pacsv.read_csv(dataset("global_superstore_sample1000.csv"))
    data = tmp_path / "data"
    data.mkdir()
    pacsv.write_csv(store.select(["Order Date", "Customer ID", "Sales"]).rename_columns(["day", "buyer", "sales"]), data / "orders.csv")
    grouped = store.group_by("Customer ID", use_threads=False).aggregate([("Segment", "first")])
    clients = pa.table({"client": grouped["Customer ID"], "segment": grouped["Segment_first"]})
    pacsv.write_csv(clients, data / "clients.csv")
    os.environ["DASHMEM_DATA_DIRS"] = str(data)
    folder = tmp_path / "shop"
    workspace.save(folder, workspace.blank("Shop", "alice", "2026-11-30"))
    srcs = [{"name": n, "type": "csv", "path": str(data / f"{n}.csv")} for n in ("orders", "clients")]
    workspace.save(folder, {"sources": {"sources": srcs, "relationships": [{"from": "orders.buyer", "to": "clients.client"}]}})
    wh = Warehouse(tmp_path / "cache")
    assert refresh(folder, wh, user=OPERATOR).ok
    ws, _ = workspace.load(folder)
    workspace.save(folder, {"profile": profile.build(wh.tables(), srcs, decided=ws.data["sources"])})
    ws, _ = workspace.load(folder)
    spec = autodraft.draft(ws.data)
    workspace.save(folder, {"dashboard": spec})
    ws, diags = workspace.load(folder)
    assert diags == []
    assert checks.run(ws, wh.tables(), current_id(wh)) == []
    joined = next((c for c in spec["components"] if c["id"] == "by_clients_segment"), None)
    assert joined, [c["id"] for c in spec["components"]]
    assert any(joined["id"] in [cell if isinstance(cell, str) else cell["id"] for cell in row] for row in spec["layout"])
    rendered = render(ws.data, wh.tables(), current_id(wh), cache=QueryCache())
    assert rendered.errors == []
    result = rendered.component("by_clients_segment").result
    assert result is not None
    shown = {r["segment"]: r["sales"] for r in result.table.to_pylist()}
    by_client = dict(zip(clients["client"].to_pylist(), clients["segment"].to_pylist()))
    expected: dict[str, float] = {}
    for buyer, sales in zip(store["Customer ID"].to_pylist(), store["Sales"].to_pylist()):
        expected[by_client[buyer]] = expected.get(by_client[buyer], 0.0) + sales
    assert shown.keys() == expected.keys() and all(abs(shown[k] - expected[k]) < 1e-6 * abs(expected[k]) for k in expected)


def test_no_joined_breakdown_reaches_across_a_live_source():
    """A query runs on the snapshots or on one live database: a join of a snapshot table with a live one cannot run."""
    seg = {"name": "segment", "type": "VARCHAR", "role": "dimension", "distinct": 3, "null_share": 0}
    prof = {
        "tables": [
            {"name": "clients", "rows": 600, "columns": [{"name": "client", "type": "VARCHAR", "role": "identifier", "distinct": 600}, seg]},
            {
                "name": "orders",
                "rows": 1000,
                "columns": [{"name": "buyer", "type": "VARCHAR", "role": "identifier"}, {"name": "sales", "type": "DOUBLE", "role": "measure"}],
            },
        ]
    }
    clients = {"name": "clients", "type": "sql", "url": "postgresql://reporting@db/sales", "table": "clients"}
    files = {
        "profile": prof,
        "sources": {
            "sources": [{"name": "orders", "type": "csv", "path": "o.csv"}, clients],
            "relationships": [{"from": "orders.buyer", "to": "clients.client"}],
        },
    }
    assert "by_clients_segment" in [c["id"] for c in autodraft.draft(files)["components"]]
    files["sources"]["sources"][1] = {**clients, "mode": "live"}
    assert "by_clients_segment" not in [c["id"] for c in autodraft.draft(files)["components"]]


# --------------------------------------------------------------------------- the report


def drafted_report(folder: Path, wh):
    """The drafted report saved into the workspace, loaded back, checked and rendered."""
    ws, _ = workspace.load(folder)
    spec = autodraft.draft_report(ws.data)
    workspace.save(folder, {"report": spec})
    ws, diags = workspace.load(folder)
    assert diags == [], [d.format() for d in diags]
    found = checks.run(ws, wh.tables(), current_id(wh), kind="report")
    rendered = render_report(ws.data, wh.tables(), current_id(wh), cache=QueryCache())
    return spec, found, rendered


def prose_of(rendered) -> list[str]:
    return [s.components[0].markdown for s in rendered.sections if s.type == "prose"]


@pytest.mark.parametrize("csv_name", PUBLIC)
def test_the_drafted_report_passes_every_check_and_renders_with_values(tmp_path, csv_name, dataset):
    folder, wh = workspace_over(tmp_path, dataset(csv_name))
    spec, found, rendered = drafted_report(folder, wh)
    assert found == [], [d.format() for d in found]
    assert rendered.errors == []
    kinds = [s["type"] for s in spec["sections"]]
    assert kinds[:3] == ["heading", "prose", "kpis"] and kinds[-3:] == ["page_break", "heading", "table"]
    for text in prose_of(rendered):
        assert "{{" not in text and "—" not in text  # every placeholder filled, none empty
    # The prose carries no figure of its own: every digit comes from a placeholder.
    for section in spec["sections"]:
        if section["type"] in ("prose", "heading"):
            words = re.sub(r"\{\{[^}]*\}\}", "", section.get("markdown") or section.get("text"))
            assert not re.search(r"\d", words), words


@pytest.mark.parametrize("slug", ["supply-chain-weekly", "gdp-explorer"])
def test_the_drafted_report_passes_every_check_on_the_demo_workspaces(tmp_path, slug):
    folder = tmp_path / slug
    shutil.copytree(WORKSPACES / slug, folder)
    wh = Warehouse(tmp_path / "cache")
    assert refresh(folder, wh, user=OPERATOR).ok
    spec, found, rendered = drafted_report(folder, wh)
    assert found == [] and rendered.errors == []
    assert "movers" in spec["queries"] and any(s.get("id") == "trend" for s in spec["sections"])


def test_the_report_has_an_overview_key_figures_a_trend_the_top_movers_and_a_table(tmp_path, dataset):
    """The movers are computed apart from the product: the latest two months, per market, from the CSV."""
    csv = dataset("global_superstore_sample1000.csv")
    folder, wh = workspace_over(tmp_path, csv)
    spec, found, rendered = drafted_report(folder, wh)
    assert found == []
    outline = [s.get("text") or s.get("id") or s["type"] for s in spec["sections"]]
    assert outline[:4] == ["Overview", "prose", "kpis", "Trend"] and "Top movers" in outline and "movers" in outline
    assert [p["id"] for p in spec["parameters"]] == ["f_market", "f_order_date"]  # the dashboard's filters, as parameters
    trend = next(s for s in spec["sections"] if s.get("id") == "trend")
    assert "date_trunc('month'" in trend["query"] and trend["encoding"]["x"]["format"] == "%B %Y"

    raw = pd.read_csv(csv, parse_dates=["Order Date"], dayfirst=True)
    raw["month"] = raw["Order Date"].dt.to_period("M")
    before, latest = sorted(raw["month"].unique())[-2:]
    by = raw[raw["month"].isin([before, latest])].pivot_table(index="Market", columns="month", values="Sales", aggfunc="sum").dropna()
    by["change"] = by[latest] - by[before]
    ranked = by.reindex(cast(pd.Series, by["change"]).abs().sort_values(ascending=False).index)  # a column: pandas' own types say frame or series
    movers = rendered.component("movers").result
    assert movers is not None
    shown = movers.to_pandas()
    assert list(shown["market"]) == list(ranked.index)
    assert shown["change"].round(2).tolist() == ranked["change"].round(2).tolist()
    overview, mover_text = prose_of(rendered)
    top = ranked.iloc[0]
    assert f"**{ranked.index[0]}**, {'+' if top['change'] > 0 else '−'}{abs(top['change']):,.0f}" in mover_text
    assert overview.startswith(f"Total sales came to **{raw['Sales'].sum():,.0f}** over 1,000 records, from 06 Jan 2011 to 31 Dec 2014.")
    assert "In the latest month (December 2014)" in overview

    # A parameter narrows every section: the movers of one market only.
    narrowed = render_report(workspace.load(folder)[0].data, wh.tables(), current_id(wh), {"f_market": ["EU"]}, cache=QueryCache())
    movers = narrowed.component("movers").result
    assert movers is not None and movers.to_pandas()["market"].tolist() == ["EU"]


def test_the_report_draft_is_deterministic_and_drafts_with_the_dashboard(tmp_path, dataset):
    folder, wh = workspace_over(tmp_path, dataset("adult.csv"))
    ws, _ = workspace.load(folder)
    assert workspace.render("report", autodraft.draft_report(ws.data)) == workspace.render("report", autodraft.draft_report(ws.data))
    both = autodraft.draft_files(ws.data, wh.tables(), ("dashboard", "report"))
    assert list(both) == ["profile", "dashboard", "report"]
    assert list(autodraft.draft_files(ws.data, wh.tables(), ("report",))) == ["profile", "report"]
    with pytest.raises(ValueError, match="not chart"):
        autodraft.draft_files(ws.data, wh.tables(), ("chart",))
    # No time column in adult.csv: no trend and no movers, and the report says only what it has.
    spec = both["report"]
    assert not any(s.get("id") in ("trend", "movers") for s in spec["sections"]) and "movers" not in spec["queries"]
    assert "trend" not in spec["description"] and "movers" not in spec["description"]


@pytest.mark.parametrize("draft", ["report", "both"])
def test_the_cli_drafts_a_report_and_refuses_to_replace_one_without_force(tmp_path, draft):
    folder = tmp_path / "supply-chain-weekly"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", folder)
    env = {**os.environ, "PYTHONPATH": str(WORKSPACES.parent), "DASHMEM_CACHE_DIR": str(tmp_path / "cache")}
    cli = [sys.executable, "-m", "lib", "autodraft", str(folder), "--draft", draft]
    refused = subprocess.run(cli, capture_output=True, text=True, env=env, timeout=120)
    assert refused.returncode == 1 and f"{'dashboard' if draft == 'both' else 'report'}.yaml exists; use --force" in refused.stderr
    before = (folder / "report.yaml").read_text()
    done = subprocess.run(cli + ["--force"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "wrote" in done.stderr and "report.yaml" in done.stderr and done.stdout.strip().endswith("all checks passed")
    assert (folder / "report.yaml").read_text() != before
    assert ("dashboard.yaml" in done.stderr) == (draft == "both")


def test_a_report_drafted_on_a_live_postgresql_table_renders_there_with_the_same_movers(tmp_path):
    """The movers' SQL (a CTE, CASE sums, HAVING) is DuckDB's dialect; on a live source it is transpiled and run in PostgreSQL."""
    import datetime as dt
    import uuid

    from ..conftest import SERVERS, server_engine

    engine = server_engine("postgresql")
    name = f"dm_report_{uuid.uuid4().hex[:10]}"
    rows = [(dt.date(2026, 9, 1) + dt.timedelta(days=d), region, (d + 1) * (3 - i) ** 2) for d in range(0, 150, 3) for i, region in enumerate("NSEW")]
    with engine.begin() as connection:
        connection.exec_driver_sql(f"CREATE TABLE {name} (day DATE, region VARCHAR(10), sales INTEGER)")
        connection.exec_driver_sql(f"INSERT INTO {name} VALUES " + ", ".join(f"('{d}', '{r}', {s})" for d, r, s in rows))
    try:
        url = SERVERS["postgresql"][2].replace("+psycopg2", "")
        folder = tmp_path / "sales"
        workspace.save(folder, workspace.blank("Sales", "alice", "2026-11-30"))
        workspace.save(folder, {"sources": {"sources": [{"name": "sales", "type": "sql", "url": url, "table": name, "mode": "live", "cache_ttl_s": 0}]}})
        wh = Warehouse(tmp_path / "cache")
        assert refresh(folder, wh, user=OPERATOR).ok
        ws, _ = workspace.load(folder)
        workspace.save(folder, {"profile": profile.build(wh.tables(), ws.data["sources"]["sources"], workspace_path=folder)})
        spec, found, rendered = drafted_report(folder, wh)
        assert found == [] and rendered.errors == []
        assert "date_trunc('month'" in spec["queries"]["movers"]  # five months of days: by month
        frame = pd.DataFrame(rows, columns=["day", "region", "sales"])
        frame["month"] = pd.to_datetime(frame["day"]).dt.to_period("M")
        before, latest = sorted(frame["month"].unique())[-2:]
        by = frame[frame["month"].isin([before, latest])].pivot_table(index="region", columns="month", values="sales", aggfunc="sum")
        change = cast(pd.Series, by[latest] - by[before]).sort_values(key=abs, ascending=False)  # a column: pandas' own types say frame or series
        movers = rendered.component("movers").result
        assert movers is not None
        shown = movers.to_pandas()
        assert list(shown["region"]) == list(change.index) and [float(v) for v in shown["change"]] == [float(v) for v in change]
    finally:
        with engine.begin() as connection:
            connection.exec_driver_sql(f"DROP TABLE IF EXISTS {name}")
        engine.dispose()


# --------------------------------------------------------------------------- adding to a curated dashboard (issue #31, item 6)


@pytest.fixture
def with_orders(supply):
    """The supply-chain demo with an orders source added, loaded and profiled: (folder, warehouse)."""
    folder, wh = supply
    (folder / "data" / "orders.csv").write_text(orders_csv_text())
    ws, _ = workspace.load(folder)
    sources = ws.data["sources"]
    workspace.save(folder, {"sources": {**sources, "sources": [*sources["sources"], {"name": "orders", "type": "csv", "path": "data/orders.csv"}]}})
    assert refresh(folder, wh, user=OPERATOR).ok
    ws, _ = workspace.load(folder)
    workspace.save(folder, {"profile": profile.build_for(wh.tables(), ws.data["sources"], folder)})
    return folder, wh


def saved_and_checked(folder: Path, wh, drafted: autodraft.Drafted, warnings: bool = False) -> dict:
    """The drafted files saved into the workspace; every check of each passes (with `warnings`, warnings allowed)."""
    workspace.save(folder, {kind: drafted.files[kind] for kind in drafted.changes})
    ws, diags = workspace.load(folder)
    assert diags == [], [d.format() for d in diags]
    for kind in drafted.changes:
        found = [d for d in checks.run(ws, wh.tables(), current_id(wh), kind=kind) if not warnings or d.level == "error"]
        assert found == [], [d.format() for d in found]
    return ws.data


def component_ids(spec: dict) -> list[str]:
    if "sections" in spec:
        return [c["id"] for _, c in report_components(spec)]
    return [c["id"] for c in spec["components"]]


def test_a_new_sources_table_is_what_the_draft_starts_from(with_orders):
    folder, wh = with_orders
    ws, _ = workspace.load(folder)
    offered = autodraft.offered_tables(ws.data, wh.tables())
    assert set(offered) == {"gates", "orders"}
    assert autodraft.unread_tables(ws.data, offered) == ["orders"]  # nothing on the dashboard or report reads it yet
    assert autodraft.default_tables(ws.data, offered) == ["orders"]
    # Without a new table: all of them.
    assert autodraft.default_tables(ws.data, ["gates"]) == ["gates"]


def test_auto_draft_adds_to_the_curated_dashboard_and_report_keeping_all_they_have(with_orders):
    folder, wh = with_orders
    ws, _ = workspace.load(folder)
    before = {kind: copy.deepcopy(ws.data[kind]) for kind in ("dashboard", "report")}
    drafted = autodraft.draft_into(ws.data, wh.tables(), ("dashboard", "report"), names=["orders"], mode=autodraft.ADD)
    assert drafted.tables == ["orders"]
    dashboard, report = drafted.files["dashboard"], drafted.files["report"]
    old = before["dashboard"]
    # Every filter, component and layout row kept as it was, in its place; the drafted ones after them.
    assert dashboard["title"] == old["title"] and dashboard["description"] == old["description"]
    assert dashboard["components"][: len(old["components"])] == old["components"]
    assert dashboard["filters"][: len(old["filters"])] == old["filters"]
    assert dashboard["layout"][: len(old["layout"])] == old["layout"]
    added = dashboard["components"][len(old["components"]) :]
    assert added and all(standins.tables_named(c.get("query") or next(iter(c["queries"].values()))) == {"orders"} for c in added)
    ids = component_ids(dashboard)
    assert len(ids) == len(set(ids)) and len(ids) <= ws.data["output"]["layout"]["max_components"]
    placed = [cell if isinstance(cell, str) else cell["id"] for row in dashboard["layout"] for cell in row]
    assert sorted(placed) == sorted(ids)
    # The report: its sections kept as they were, the drafted part after them, opening with the table's name.
    old_report = before["report"]
    assert report["sections"][: len(old_report["sections"])] == old_report["sections"]
    assert report["queries"] | old_report["queries"] == report["queries"] and all(report["queries"][k] == v for k, v in old_report["queries"].items())
    new_sections = report["sections"][len(old_report["sections"]) :]
    assert new_sections[0] == {"type": "heading", "text": "Orders", "level": 1}
    ids = component_ids(report)
    assert len(ids) == len(set(ids)) and len(ids) > len(list(report_components(old_report)))
    # What the steward reads before saving: nothing removed, everything kept, the added components by name.
    change = drafted.changes["dashboard"]
    assert change.removed == [] and change.warning() is None
    assert [p.id for p in change.added_components] == [c["id"] for c in added]
    assert [p.id for p in change.kept if p.is_component] == [c["id"] for c in old["components"]]
    assert change.summary()[0].startswith(f"{len(added)} components added to the dashboard: ")
    assert drafted.changes["report"].removed == []
    # Past output.yaml's max_components, the rest is named as left out, not added.
    assert change.no_room and "allows at most 12 components" in " ".join(change.summary())
    saved_and_checked(folder, wh, drafted)


def test_drafting_the_same_table_again_adds_nothing_that_is_already_there(with_orders):
    folder, wh = with_orders
    ws, _ = workspace.load(folder)
    workspace.save(folder, {"output": {**ws.data["output"], "layout": {**ws.data["output"]["layout"], "max_components": 40}}})
    ws, _ = workspace.load(folder)
    first = autodraft.draft_into(ws.data, wh.tables(), ("dashboard", "report"), names=["orders"], mode=autodraft.ADD)
    files = saved_and_checked(folder, wh, first)
    again = autodraft.draft_into(files, wh.tables(), ("dashboard", "report"), names=["orders"], mode=autodraft.ADD)
    for kind in ("dashboard", "report"):
        assert again.files[kind] == files[kind], kind
        assert again.changes[kind].added == [] and again.changes[kind].no_room == []
        # Named as drafted (before an id of their own was found for them): the same components, by title.
        assert sorted(p.title for p in again.changes[kind].already_there) == sorted(p.title for p in first.changes[kind].added_components)
    # A drafted card reading a measure the curated dashboard already shows is left out too ("Units through the gates").
    gates = autodraft.draft_into(files, wh.tables(), ("dashboard",), names=["gates"], mode=autodraft.ADD).changes["dashboard"]
    assert "kpi_actual" in [p.id for p in gates.already_there] and "kpi_actual" not in component_ids(files["dashboard"])


def test_starting_a_new_dashboard_names_everything_it_would_remove(with_orders):
    folder, wh = with_orders
    ws, _ = workspace.load(folder)
    old = ws.data["dashboard"]
    drafted = autodraft.draft_into(ws.data, wh.tables(), ("dashboard", "report"), names=["orders"], mode=autodraft.NEW)
    change = drafted.changes["dashboard"]
    assert [p.id for p in change.removed_components] == [c["id"] for c in old["components"]]
    assert [p.id for p in change.removed if p.kind == "filter"] == [f["id"] for f in old["filters"]]
    assert change.kept == [] and [p.id for p in change.added_components] == component_ids(drafted.files["dashboard"])
    warning = change.warning()
    assert warning is not None and warning.startswith("Starting a new dashboard removes 8 components, 1 filter")
    assert all(f"({c['id']})" in warning for c in old["components"])
    # The report: every section it has that the new one does not is named.
    report_change = drafted.changes["report"]
    old_sections = ws.data["report"]["sections"]
    removed = [str(p) for p in report_change.removed]
    assert all(f"({c['id']})" in " ".join(removed) for _, c in report_components(ws.data["report"]))
    assert "heading “Site-gates to look at”" in removed and any(p.kind == "prose" for p in report_change.removed)
    assert {p.kind for p in report_change.kept} <= {"heading"}  # an "Overview" heading the new one has too, say
    assert len([p for p in report_change.removed if p.kind == "prose"]) == len([s for s in old_sections if s["type"] == "prose"])
    saved_and_checked(folder, wh, drafted, warnings=True)  # the gate rules apply to nothing on the orders: warnings


def test_two_tables_drafted_at_once_keep_their_ids_apart(with_orders):
    folder, wh = with_orders
    ws, _ = workspace.load(folder)
    workspace.save(folder, {"output": {**ws.data["output"], "layout": {**ws.data["output"]["layout"], "max_components": 40}}})
    ws, _ = workspace.load(folder)
    drafted = autodraft.draft_into(ws.data, wh.tables(), ("dashboard", "report"), names=["orders", "gates"], mode=autodraft.NEW)
    lead, second = drafted.tables
    assert lead == autodraft.ranked_tables(ws.data["profile"])[0]["name"]  # the lead first: the one with the most measures
    for kind in ("dashboard", "report"):
        ids = component_ids(drafted.files[kind])
        assert len(ids) == len(set(ids)) and "trend" in ids and f"trend_{second}" in ids, ids
    filters = [f["id"] for f in drafted.files["dashboard"]["filters"]]
    assert len(filters) == len(set(filters)) and "f_site" in filters and f"f_site_{second}" in filters
    saved_and_checked(folder, wh, drafted)


def test_a_chosen_table_the_profile_lacks_is_profiled_for_the_draft(with_orders):
    folder, wh = with_orders
    ws, _ = workspace.load(folder)
    files = {**ws.data, "profile": {**ws.data["profile"], "tables": [t for t in ws.data["profile"]["tables"] if t["name"] != "orders"]}}
    drafted = autodraft.draft_into(files, wh.tables(), ("dashboard",), names=["orders"], mode=autodraft.ADD)
    assert "orders" in [t["name"] for t in drafted.files["profile"]["tables"]]
    with pytest.raises(autodraft.NothingToDraft, match="no data profile of nowhere"):
        autodraft.draft_into(files, wh.tables(), ("dashboard",), names=["nowhere"], mode=autodraft.ADD)


def test_the_cli_adds_to_the_curated_dashboard_from_a_chosen_table(with_orders, tmp_path):
    folder, _ = with_orders
    before = workspace.load(folder)[0].data["dashboard"]
    env = {**os.environ, "PYTHONPATH": str(WORKSPACES.parent), "DASHMEM_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-m", "lib", "autodraft", str(folder), "--table", "orders", "--add"], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "dashboard.yaml: 4 components added to the dashboard: Records (kpi_records)" in done.stderr
    assert "Kept as they are: 8 components, 1 filter." in done.stderr and done.stdout.strip().endswith("all checks passed")
    after = workspace.load(folder)[0].data["dashboard"]
    assert after["components"][: len(before["components"])] == before["components"] and len(after["components"]) == 12


def test_a_dashboard_not_in_shape_to_add_to_says_so_and_a_new_one_replaces_it(with_orders):
    folder, wh = with_orders
    ws, _ = workspace.load(folder)
    files = {**ws.data, "dashboard": {**ws.data["dashboard"], "components": {"not": "a list"}}}
    with pytest.raises(autodraft.NothingToDraft, match=r"dashboard\.yaml is not in a shape the auto-draft can add to: correct it on the Specs page"):
        autodraft.draft_into(files, wh.tables(), ("dashboard",), names=["orders"], mode=autodraft.ADD)
    drafted = autodraft.draft_into(files, wh.tables(), ("dashboard",), names=["orders"], mode=autodraft.NEW)
    assert [p.kind for p in drafted.changes["dashboard"].removed] == ["filter"]  # the one piece in shape to name


def test_a_lead_measure_that_does_not_add_up_is_never_given_a_share_of_the_whole(tmp_path):
    """Cars by cylinders: the average miles per gallon of one group is no share of a whole ("4 leads with 29.4,
    26 % of the whole"). A summed lead keeps its share."""
    rows = [f"car {i},{[4, 6, 8][i % 3]},{[29.4, 19.8, 14.9][i % 3] + i % 5 * 0.1:.1f},{1990 + i % 10}-01-01" for i in range(300)]
    csv = tmp_path / "cars.csv"
    csv.write_text("name,cylinders,miles_per_gallon,model_year\n" + "\n".join(rows) + "\n")
    folder, wh = workspace_over(tmp_path, csv)
    ws, _ = workspace.load(folder)
    columns = {c["name"]: c for c in ws.data["profile"]["tables"][0]["columns"]}
    assert columns["miles_per_gallon"].get("aggregate") in ("mean", "median")
    files = autodraft.draft_files(ws.data, wh.tables(), ("dashboard", "report"))
    texts = [c.get("markdown", "") for c in files["dashboard"]["components"]]
    texts += [s.get("markdown", "") for s in files["report"].get("sections") or []]
    assert any("miles per gallon" in t.lower() for t in texts), texts
    assert not [t for t in texts if "of the whole" in t], texts
    workspace.save(folder, files)
    ws, diags = workspace.load(folder)
    assert checks.run(ws, wh.tables(), current_id(wh)) == []


def test_a_partial_last_period_is_compared_with_the_same_span_of_the_one_before(tmp_path):
    """Data ending on 19 January: January's 19 days against all of December read as a 39 % fall in every
    region; against 1-19 December the same daily rate is no change."""
    import datetime as dt

    start = dt.date(2025, 1, 1)
    days = [start + dt.timedelta(days=i) for i in range((dt.date(2026, 1, 19) - start).days + 1)]
    csv = tmp_path / "daily.csv"
    csv.write_text("day,region,units\n" + "".join(f"{d.isoformat()},{r},10\n" for d in days for r in ("North", "South")))
    folder, wh = workspace_over(tmp_path, csv)
    ws, _ = workspace.load(folder)
    files = autodraft.draft_files(ws.data, wh.tables(), ("dashboard", "report"))
    workspace.save(folder, files)
    ws, _ = workspace.load(folder)
    rendered = render(ws.data, wh.tables(), current_id(wh), cache=QueryCache())
    insight = rendered.component("insight").markdown
    report = render_report(ws.data, wh.tables(), current_id(wh), cache=QueryCache())
    prose = " ".join(c.markdown for s in report.sections for c in s.components if getattr(c, "markdown", None))
    for text in (insight, prose):
        assert "January 2026" in text and "+0.0%" in text and "−38" not in text and "-38" not in text, text


def test_report_prose_shows_a_year_as_a_year_and_a_whole_figure_without_a_decimal(tmp_path):
    """Issue #33, 6: a group that is a year read "2,017 leads ... with 30.0"; a year is written as a year and
    a whole figure without ".0", while a figure with a fraction keeps its digit."""
    rows = [f"car {i},{2015 + i % 4},{['US', 'EU', 'JP', 'KR'][i % 4]},{[30.0, 25.0, 22.0, 18.5][i % 4]}" for i in range(200)]
    csv = tmp_path / "cars.csv"
    csv.write_text("name,model_year,origin,miles_per_gallon\n" + "\n".join(rows) + "\n")
    folder, wh = workspace_over(tmp_path, csv)
    ws, _ = workspace.load(folder)
    files = autodraft.draft_files(ws.data, wh.tables(), ("dashboard", "report"))
    workspace.save(folder, files)
    ws, _ = workspace.load(folder)
    rendered = render(ws.data, wh.tables(), current_id(wh), cache=QueryCache())
    insight = rendered.component("insight").markdown
    report = render_report(ws.data, wh.tables(), current_id(wh), cache=QueryCache())
    prose = " ".join(c.markdown for s in report.sections for c in s.components if getattr(c, "markdown", None))
    for text in (insight, prose):
        assert "2,01" not in text and "30.0" not in text and "25.0" not in text, text
        assert "2015" in text or "2018" in text, text
        assert re.search(r"\b(30|25)\b", text) and "18.5" in text, text
