"""Explore without a model (lib/artifacts/explore.py): the question builder's SQL against the data computed with pandas,
hostile input, the aggregations a column allows, and saving a question to a draft dashboard across processes."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import cast

import pandas as pd
import pytest

from lib.artifacts import explore
from lib.artifacts.explore import ExploreError, Filter, Question
from lib.artifacts.render import QueryCache, render
from lib.core.diagnostics import ValidationFailed
from lib.data import profile
from lib.data.refresh import refresh
from lib.data.snapshots import Warehouse
from lib.memory import workspace
from lib.roles.access import OPERATOR, PermissionDenied
from tests.helpers import current_id
from tests.helpers.app import on_page, signed_in
from tests.helpers.browser import ARTIFACTS, choose_workspace, sign_in
from tests.helpers.databases import MARIADB_URL, PG_URL

from ..configrepo_helpers import GDP, SAM, VERA
from ..conftest import DATASETS, ROOT, WORKSPACES

SUPERSTORE = "global_superstore_sample1000.csv"
TIMEOUT_S = 180  # a hung subprocess fails the test rather than hanging the run; not a timing assert


@pytest.fixture(scope="module")
def superstore(tmp_path_factory):
    """A workspace over the public Global Superstore sample (loaded and profiled), and the same CSV read by pandas."""
    csv = DATASETS / SUPERSTORE
    if not csv.exists():
        pytest.skip(f"public dataset {csv} not found")
    tmp = tmp_path_factory.mktemp("explore")
    old = os.environ.get("DASHMEM_DATA_DIRS")
    os.environ["DASHMEM_DATA_DIRS"] = str(csv.parent)
    folder = tmp / "superstore"
    workspace.save(folder, workspace.blank("Superstore", "alice", "2026-11-30"))
    workspace.save(folder, {"sources": {"sources": [{"name": "orders", "type": "csv", "path": str(csv)}]}})
    wh = Warehouse(tmp / "cache")
    assert refresh(folder, wh, user=OPERATOR).ok
    ws, _ = workspace.load(folder)
    workspace.save(folder, {"profile": profile.build(wh.tables(), ws.data["sources"]["sources"])})
    ws, _ = workspace.load(folder)
    frame = pd.read_csv(csv)
    for col in ("Order Date", "Ship Date"):
        frame[col] = pd.to_datetime(frame[col], format="%d-%m-%Y")
    yield ws, wh, frame
    if old is None:
        os.environ.pop("DASHMEM_DATA_DIRS", None)
    else:
        os.environ["DASHMEM_DATA_DIRS"] = old


def ask(superstore, question: Question):
    ws, wh, _ = superstore
    built, result = explore.run(question, ws.data, wh.tables(), current_id(wh), workspace_path=ws.path, cache=QueryCache())
    return built, result.table.to_pandas()


# --------------------------------------------------------------------------- what may be asked


def test_the_catalogue_offers_measures_breakdowns_times_from_the_profile(superstore):
    ws, _, _ = superstore
    orders = explore.catalogue(ws.data)["orders"]
    assert orders.measures == ["Sales", "Quantity", "Discount", "Profit", "Shipping Cost"]
    assert {"Category", "Market", "Segment", "Region"} <= set(orders.breakdowns)
    assert "Row ID" not in orders.breakdowns and "Sales" not in orders.breakdowns
    assert orders.times == ["Order Date", "Ship Date"]
    assert orders.grains("Order Date") == ("day", "week", "month", "quarter", "year")
    # Additive measures are summed; a discount (a rate) is not; identifiers and dates are only counted.
    assert "sum" in orders.aggregations("Sales") and "median" in orders.aggregations("Sales")
    assert "sum" not in orders.aggregations("Discount") and "avg" in orders.aggregations("Discount")
    assert orders.aggregations("Row ID") == ("count", "count_distinct")
    assert orders.aggregations("Order Date") == ("count", "count_distinct", "min", "max")
    assert orders.aggregations(None) == ("count",)
    assert "contains" in orders.operators("Country") and "contains" not in orders.operators("Sales")
    assert "between" in orders.operators("Order Date")


def test_sum_is_refused_on_an_identifier_and_a_year_column(superstore):
    ws, _, _ = superstore
    tables = explore.catalogue(ws.data)
    with pytest.raises(ExploreError, match="'sum' does not make sense for 'Row ID'.*count, count_distinct"):
        explore.build(Question("orders", "Row ID", "sum"), tables)
    gdp, _ = workspace.load(WORKSPACES / "gdp-explorer")
    gdp_tables = explore.catalogue(gdp.data)
    assert gdp_tables["gdp"].columns["Year"].role == "time"
    with pytest.raises(ExploreError, match="'sum' does not make sense for 'Year'"):
        explore.build(Question("gdp", "Year", "sum"), gdp_tables)
    with pytest.raises(ExploreError, match="'sum' does not make sense for 'Country Code'"):
        explore.build(Question("gdp", "Country Code", "sum"), gdp_tables)
    assert gdp_tables["gdp"].grains("Year") == ("year",)  # a numeric year is its own period


# --------------------------------------------------------------------------- SQL against pandas


@pytest.mark.parametrize("aggregation", explore.AGGREGATIONS)
def test_each_aggregation_of_a_measure_as_a_kpi(superstore, aggregation):
    _, _, frame = superstore
    built, got = ask(superstore, Question("orders", "Sales", aggregation))
    expected = {
        "count": frame["Sales"].count(),
        "count_distinct": frame["Sales"].nunique(),
        "sum": frame["Sales"].sum(),
        "avg": frame["Sales"].mean(),
        "min": frame["Sales"].min(),
        "max": frame["Sales"].max(),
        "median": frame["Sales"].median(),
    }[aggregation]
    assert list(got.columns) == ["value"] and len(got) == 1
    assert got["value"][0] == pytest.approx(expected)
    spec = explore.pick_chart(Question("orders", "Sales", aggregation), built)
    assert spec["type"] == "kpi"


def test_row_count_with_no_breakdown_is_a_kpi_card_that_renders(superstore):
    ws, wh, frame = superstore
    question = Question("orders")
    built, got = ask(superstore, question)
    assert got["value"][0] == len(frame) == 1000
    spec = explore.pick_chart(question, built)
    rendered = _render_one(ws, wh, spec)
    assert rendered.type == "kpi" and rendered.display == "1,000"


def test_a_breakdown_is_a_bar_chart_sorted_descending_with_the_top_n(superstore):
    ws, wh, frame = superstore
    question = Question("orders", "Profit", "sum", breakdown="Sub-Category", top=5)
    built, got = ask(superstore, question)
    expected = frame.groupby("Sub-Category")["Profit"].sum().sort_values(ascending=False).head(5)
    assert list(got["sub_category"]) == list(expected.index)
    assert list(got["value"]) == pytest.approx(list(expected.values))
    spec = explore.pick_chart(question, built, explore.run(question, ws.data, wh.tables(), current_id(wh))[1], ws.data)
    assert spec["type"] == "chart" and spec["mark"] == "bar" and spec["encoding"]["y"]["format"] == ",.2f"
    assert spec["encoding"]["x"] == {"field": "sub_category", "type": "nominal", "title": "Sub-Category", "sort": "-y"}
    comp = _render_one(ws, wh, spec)
    assert comp.error is None and comp.result is not None and comp.result.table.num_rows == 5


def test_a_time_grain_is_a_line_per_period(superstore):
    ws, wh, frame = superstore
    question = Question("orders", "Quantity", "sum", time="Order Date", grain="quarter")
    built, got = ask(superstore, question)
    expected = frame.groupby(frame["Order Date"].dt.to_period("Q"))["Quantity"].sum()
    assert [pd.Period(p, "Q") for p in got["period"]] == list(expected.index)
    assert list(got["value"]) == list(expected.values)
    spec = explore.pick_chart(question, built, None, ws.data)
    assert spec["mark"] == "line" and spec["encoding"]["x"]["type"] == "temporal" and spec["encoding"]["x"]["format"] == "%Y-Q%q"
    assert spec["encoding"]["y"]["format"] == ",d"  # a sum of whole numbers
    assert _render_one(ws, wh, spec).error is None


@pytest.mark.parametrize("grain,freq", [("day", "D"), ("week", "W-SUN"), ("month", "M"), ("year", "Y")])
def test_every_grain_counts_the_rows_of_its_periods(superstore, grain, freq):
    _, _, frame = superstore
    _, got = ask(superstore, Question("orders", time="Ship Date", grain=grain))
    expected = frame.groupby(frame["Ship Date"].dt.to_period(freq)).size()
    assert len(got) == len(expected)
    assert got["value"].sum() == 1000 and list(got["value"]) == list(expected.values)


def test_time_and_breakdown_draws_a_line_per_top_group(superstore):
    ws, wh, frame = superstore
    question = Question("orders", "Sales", "avg", breakdown="Market", time="Order Date", grain="year", top=3)
    built, got = ask(superstore, question)
    top = frame.groupby("Market")["Sales"].mean().sort_values(ascending=False).head(3).index
    kept = frame[frame["Market"].isin(top)]
    expected = kept.groupby([kept["Order Date"].dt.year, "Market"])["Sales"].mean()
    assert set(got["market"]) == set(top)
    got_map = {(pd.Timestamp(p).year, m): v for p, m, v in zip(got["period"], got["market"], got["value"])}
    assert got_map == pytest.approx(dict(expected.items()))
    spec = explore.pick_chart(question, built, None)
    assert spec["mark"] == "line" and spec["encoding"]["color"]["field"] == "market"
    assert _render_one(ws, wh, spec).error is None


FILTERS = [
    (Filter("Market", "=", "EU"), lambda f: f["Market"] == "EU"),
    (Filter("Market", "!=", "EU"), lambda f: f["Market"] != "EU"),
    (Filter("Quantity", "<", "3"), lambda f: f["Quantity"] < 3),
    (Filter("Quantity", "<=", 3), lambda f: f["Quantity"] <= 3),
    (Filter("Sales", ">", "1,000.5"), lambda f: f["Sales"] > 1000.5),
    (Filter("Discount", ">=", 0.2), lambda f: f["Discount"] >= 0.2),
    (Filter("Order Date", "between", ("2012-01-01", "2012-06-30")), lambda f: f["Order Date"].between("2012-01-01", "2012-06-30")),
    (Filter("Segment", "in", ["Consumer", "Home Office"]), lambda f: f["Segment"].isin(["Consumer", "Home Office"])),
    (Filter("Product Name", "contains", "TABLE"), lambda f: f["Product Name"].str.lower().str.contains("table", regex=False)),
    (Filter("Postal Code", "is empty"), lambda f: f["Postal Code"].isna()),
    (Filter("Postal Code", "is not empty"), lambda f: f["Postal Code"].notna()),
]


@pytest.mark.parametrize("flt,keep", FILTERS, ids=[f"{f.column} {f.op}" for f, _ in FILTERS])
def test_each_filter_operator_keeps_the_rows_pandas_keeps(superstore, flt, keep):
    _, _, frame = superstore
    question = Question("orders", "Sales", "sum", breakdown="Category", filters=(flt,))
    built, got = ask(superstore, question)
    expected = frame[keep(frame)].groupby("Category")["Sales"].sum()
    assert 0 < keep(frame).sum() < len(frame)  # the filter does filter
    assert dict(zip(got["category"], got["value"])) == pytest.approx(dict(expected.items()))
    values = [v for value in built.params.values() for v in (value if isinstance(value, list) else [value])]
    assert all(f"${name}" in built.sql for name in built.params) and not [v for v in values if isinstance(v, str) and v in built.sql]


def test_a_filter_offers_the_columns_values(superstore):
    ws, wh, frame = superstore
    values = explore.distinct_values(ws.data, wh.tables(), current_id(wh), "orders", "Market", workspace_path=ws.path)
    assert values == sorted(frame["Market"].dropna().unique())
    with pytest.raises(ExploreError, match="not a column of table 'orders'"):
        explore.distinct_values(ws.data, wh.tables(), current_id(wh), "orders", "Market; DROP TABLE orders")


def test_filters_combine_with_and(superstore):
    _, _, frame = superstore
    question = Question("orders", filters=(Filter("Market", "=", "US"), Filter("Segment", "in", ["Corporate"])))
    _, got = ask(superstore, question)
    assert got["value"][0] == ((frame["Market"] == "US") & (frame["Segment"] == "Corporate")).sum()


# --------------------------------------------------------------------------- hostile input


def test_a_column_not_in_the_profile_is_refused_before_any_sql(superstore):
    ws, _, _ = superstore
    tables = explore.catalogue(ws.data)
    hostile = 'Sales") FROM orders; DROP TABLE orders; --'
    for question in (
        Question("orders", hostile, "sum"),
        Question("orders", "Sales", "sum", breakdown=hostile),
        Question("orders", time=hostile),
        Question("orders", filters=(Filter(hostile, "=", "x"),)),
        Question("orders; DROP TABLE orders", "Sales", "sum"),
    ):
        with pytest.raises(ExploreError, match="not (a column of table 'orders'|in the data profile)"):
            explore.build(question, tables)
    with pytest.raises(ExploreError, match="operator 'LIKE' does not apply"):
        explore.build(Question("orders", filters=(Filter("Market", "LIKE", "%"),)), tables)
    with pytest.raises(ExploreError, match="'abc' is not a number"):
        explore.build(Question("orders", filters=(Filter("Sales", ">", "abc"),)), tables)
    with pytest.raises(ExploreError, match="not a date"):
        explore.build(Question("orders", filters=(Filter("Order Date", "between", ("2012-01-01", "1 OR 1=1")),)), tables)
    with pytest.raises(ExploreError, match="'Sales' is a measure, not a category to break down by"):
        explore.build(Question("orders", breakdown="Sales"), tables)
    with pytest.raises(ExploreError, match="grain 'decade'"):
        explore.build(Question("orders", time="Order Date", grain="decade"), tables)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e999", float("nan"), float("inf"), 10**40])
def test_a_number_that_is_not_finite_or_too_large_is_refused_not_saved_as_another_query(superstore, value):
    # A NaN ran bound (DuckDB's NaN equals NaN) but was saved as `= NULL`, infinity as the name of a column `inf`,
    # and a 40-digit integer reached DuckDB, which cannot bind it: the saved component said something else than what ran.
    ws, _, _ = superstore
    with pytest.raises(ExploreError, match=r"filter on 'Sales': .* is not a finite number"):
        explore.build(Question("orders", filters=(Filter("Sales", ">", value),)), explore.catalogue(ws.data))
    with pytest.raises(ExploreError, match="is not a"):
        explore.build(Question("orders", filters=(Filter("Sales", "between", (0, value)),)), explore.catalogue(ws.data))


def test_a_filter_value_of_ten_megabytes_or_a_list_of_a_hundred_thousand_is_refused_plainly(superstore):
    # Either ran, but a saved component carries its values as SQL text: 10 MB in dashboard.yaml, parsed at every render.
    ws, _, _ = superstore
    tables = explore.catalogue(ws.data)
    for flt in (
        Filter("Product Name", "contains", "x" * 10_000_000),
        Filter("Market", "=", "EU" * 5_000_001),
        Filter("Market", "in", ["EU", "x" * 20_000]),
        Filter("Market", "in", [f"m{i}" for i in range(100_000)]),
    ):
        with pytest.raises(ExploreError, match=r"filter on '(Product Name|Market)': .*at most"):
            explore.build(Question("orders", filters=(flt,)), tables)
    with pytest.raises(ExploreError, match="is not a number") as refused:  # and the message does not repeat the megabytes
        explore.build(Question("orders", filters=(Filter("Sales", ">", "1" * 10_000_000 + "x"),)), tables)
    assert len(str(refused.value)) < 300
    built = explore.build(Question("orders", filters=(Filter("Market", "in", ["EU"] * explore.MAX_VALUES),)), tables)
    assert len(built.params["f0"]) == explore.MAX_VALUES


def test_an_injection_attempt_in_a_filter_value_is_bound_not_pasted(superstore):
    ws, wh, frame = superstore
    hostile = "EU' OR '1'='1"
    question = Question("orders", filters=(Filter("Market", "=", hostile), Filter("Product Name", "contains", "'); DROP TABLE orders; --")))
    built, got = ask(superstore, question)
    assert hostile not in built.sql and "DROP" not in built.sql
    assert built.params == {"f0": hostile, "f1": "'); DROP TABLE orders; --"}
    assert got["value"][0] == 0  # no market is called that: the text was compared, not run
    # The saved form carries the value as an escaped literal: it runs and still matches nothing.
    assert "'EU'' OR ''1''=''1'" in built.literal_sql
    comp = _render_one(ws, wh, explore.pick_chart(question, built))
    assert comp.error is None and comp.display == "0"
    assert wh.tables()["orders"].num_rows == len(frame)


def test_a_quoted_column_name_is_quoted_and_results_match(tmp_path):
    """A column whose name holds a double quote and a dollar sign: quoted in the SQL, never read as a parameter."""
    import pyarrow as pa

    name = 'odd "name" $f0'
    files = {
        "profile": {
            "tables": [
                {
                    "name": "t",
                    "rows": 3,
                    "columns": [
                        {"name": name, "type": "VARCHAR", "role": "dimension", "distinct": 2},
                        {"name": "amount", "type": "BIGINT", "role": "measure", "aggregate": "sum"},
                    ],
                }
            ]
        }
    }
    tables = {"t": pa.table({name: ["a", "b", "a"], "amount": [1, 2, 3]})}
    question = Question("t", "amount", "sum", breakdown=name, filters=(Filter("amount", ">", 1),))
    built, result = explore.run(question, files, tables, "v1", cache=QueryCache())
    assert result.table.to_pylist() == [{"odd_name_f0": "a", "value": 3}, {"odd_name_f0": "b", "value": 2}]
    assert '"odd ""name"" $f0"' in built.literal_sql and "> 1" in built.literal_sql


# --------------------------------------------------------------------------- saving to the draft, across processes


def _render_one(ws, wh, spec):
    files = {**ws.data, "dashboard": {"title": "t", "components": [spec]}}
    return render(files, wh.tables(), current_id(wh), cache=QueryCache()).component(spec["id"])


SAVE = """
import json, sys
from pathlib import Path
from lib.artifacts import explore
from lib.roles.access import User
from lib.repo.configrepo import ConfigRepo
from lib.core.diagnostics import ValidationFailed
from lib.data.refresh import refresh
from lib.data.snapshots import Warehouse
repo = ConfigRepo.open_or_create(Path(sys.argv[1]), Path(sys.argv[2]))
user = User(sys.argv[3], app_role="steward")
question = explore.Question("gdp", "Value", "max", breakdown="Country Name", top=3, filters=(explore.Filter("Year", "=", 2020),))
path = repo.draft(user, "gdp-explorer").workspace_path
wh = Warehouse.for_workspace(path)
assert refresh(path, wh, user=user).ok
try:
    saved = explore.save_to_draft(repo, user, "gdp-explorer", question, wh.tables(), wh.current().id)
    print(json.dumps({"sha": saved.sha, "component": saved.component}))
except ValidationFailed as exc:
    print(json.dumps({"refused": [d.message for d in exc.diagnostics]}))
"""

READ = """
import json, sys
from pathlib import Path
from lib.memory import workspace
from lib.roles.access import User
from lib.repo.configrepo import ConfigRepo
from lib.data.refresh import refresh
from lib.artifacts.render import render
from lib.data.snapshots import Warehouse
repo = ConfigRepo.open_or_create(Path(sys.argv[1]), Path(sys.argv[2]))
user = User(sys.argv[3], app_role="steward")
path = repo.draft(user, "gdp-explorer").workspace_path
head = repo.repo.heads[repo.branch_name(user, "gdp-explorer")].commit.hexsha
ws, _ = workspace.load(path)
wh = Warehouse.for_workspace(path)
if wh.current() is None:
    assert refresh(path, wh, user=user).ok
ids = [c["id"] for c in ws.data["dashboard"]["components"]]
out = {"head": head, "ids": ids, "layout": ws.data["dashboard"].get("layout")}
if sys.argv[4:]:
    comp = render(ws.data, wh.tables(), wh.current().id).component(sys.argv[4])
    out["error"] = comp.error
    out["rows"] = comp.result.table.to_pylist()
print(json.dumps(out, default=str))
"""


def _py(env: dict, code: str, *args) -> dict:
    proc = subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture
def env(config_repo, tmp_path):
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "XDG_CACHE_HOME": str(tmp_path / "xdg"),
        "DASHMEM_CACHE_DIR": str(tmp_path / "cache"),
        "GIT_CONFIG_GLOBAL": str(tmp_path / "gitconfig"),
        "GIT_CONFIG_NOSYSTEM": "1",
    }


@pytest.mark.slow
def test_a_steward_saves_a_question_to_the_draft_and_another_process_reads_it(config_repo, env):
    args = (config_repo.path, WORKSPACES, "sam")
    before = _py(env, READ, *args)
    saved = _py(env, SAVE, *args)
    assert saved["component"] == "explore_value_by_country_name" and saved["sha"]
    again = _py(env, SAVE, *args)  # the same question twice: a second, unique id
    assert again["component"] == "explore_value_by_country_name_2"
    after = _py(env, READ, *args, saved["component"])
    assert after["ids"] == before["ids"] + [saved["component"], again["component"]]
    assert after["layout"][-2:] == [[saved["component"]], [again["component"]]]
    assert after["error"] is None
    maxima: dict[str, float] = {}
    with open(WORKSPACES / "gdp-explorer" / "data" / "gdp.csv", newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            if row["Year"] == "2020":
                maxima[row["Country Name"]] = max(maxima.get(row["Country Name"], float("-inf")), float(row["Value"]))
    expected = sorted(maxima.items(), key=lambda kv: -kv[1])[:3]
    assert [(r["country_name"], r["value"]) for r in after["rows"]] == [(k, pytest.approx(v)) for k, v in expected]
    assert config_repo.repo.git.log("-1", "--format=%s", "draft/sam/gdp-explorer").startswith("Add explore_value_by_country_name_2 from Explore")


@pytest.mark.slow
def test_a_question_failing_the_checks_saves_nothing(config_repo, env):
    """output.yaml allows no more components than the draft has: the check fails, nothing is saved."""
    ws, _ = workspace.load(config_repo.draft(SAM, GDP).workspace_path)
    output = json.loads(json.dumps(ws.data["output"]))
    output["layout"]["max_components"] = len(ws.data["dashboard"]["components"])
    config_repo.save(SAM, GDP, {"output": output}, "Cap the components")
    args = (config_repo.path, WORKSPACES, "sam")
    before = _py(env, READ, *args)
    refused = _py(env, SAVE, *args)
    assert any("output.yaml allows at most" in m for m in refused["refused"]), refused
    after = _py(env, READ, *args)
    assert after == before  # same branch head, same components
    draft = config_repo.draft(SAM, GDP)
    assert subprocess.run(["git", "-C", str(draft.path), "status", "--porcelain"], capture_output=True, text=True, check=True).stdout == ""


def test_a_viewer_may_not_save_a_question(config_repo):
    with pytest.raises(PermissionDenied, match="vera \\(viewer\\) may not save"):
        explore.save_to_draft(config_repo, VERA, GDP, Question("gdp", "Value", "sum"), None)
    assert not config_repo.has_draft(VERA, GDP)


def test_a_question_on_a_table_the_profile_lacks_or_failing_the_checks_saves_nothing(config_repo):
    head = config_repo.repo.heads["main"].commit.hexsha
    with pytest.raises(ExploreError, match="not in the data profile"):
        explore.save_to_draft(config_repo, SAM, GDP, Question("orders", "Sales", "sum"), None)
    with pytest.raises(ValidationFailed):
        explore.save_to_draft(config_repo, SAM, GDP, Question("gdp", "Value", "sum", filters=(Filter("Year", "=", 2020),)), {})
    assert config_repo.repo.heads["main"].commit.hexsha == head
    assert config_repo.repo.heads[config_repo.branch_name(SAM, GDP)].commit.hexsha == head


# --------------------------------------------------------------------------- saving while another save moves the draft


def _dashboard(repo, user=SAM, slug=GDP) -> dict:
    ws, _ = workspace.load(repo.draft(user, slug).workspace_path)
    return json.loads(json.dumps(ws.data["dashboard"]))


def _retitle(repo, title: str) -> None:
    """What a Chat save does: the whole dashboard written back, here with a new title."""
    dashboard = _dashboard(repo)
    dashboard["title"] = title
    assert repo.save(SAM, GDP, {"dashboard": dashboard}, f"Retitle: {title}")


def test_a_save_that_moves_the_draft_while_a_question_is_checked_is_kept_and_the_question_added_on_top(config_repo, monkeypatch):
    from lib.artifacts import checks

    real, calls = checks.run, []

    def run_while_another_tab_saves(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            _retitle(config_repo, "Renamed in another tab")
        return real(*args, **kwargs)

    monkeypatch.setattr(checks, "run", run_while_another_tab_saves)
    saved = explore.save_to_draft(config_repo, SAM, GDP, Question("gdp", "Value", "max", breakdown="Country Name", top=3), None)
    after = _dashboard(config_repo)
    assert after["title"] == "Renamed in another tab" and after["components"][-1]["id"] == saved.component
    assert len(calls) == 2  # checked again on the newest draft
    log = config_repo.repo.git.log("-2", "--format=%s", config_repo.branch_name(SAM, GDP)).splitlines()
    assert log[0].startswith(f"Add {saved.component} from Explore") and log[1] == "Retitle: Renamed in another tab"


def test_a_draft_that_keeps_moving_refuses_the_save_plainly_and_loses_nothing(config_repo, monkeypatch):
    from lib.artifacts import checks
    from lib.repo.drafts import DraftChanged

    real, titles = checks.run, []

    def run_while_another_tab_saves(*args, **kwargs):
        titles.append(f"Renamed {len(titles) + 1}")
        _retitle(config_repo, titles[-1])
        return real(*args, **kwargs)

    monkeypatch.setattr(checks, "run", run_while_another_tab_saves)
    before = _dashboard(config_repo)
    with pytest.raises(DraftChanged, match="changed while this was being saved.*nothing was saved, try again"):
        explore.save_to_draft(config_repo, SAM, GDP, Question("gdp", "Value", "max", breakdown="Country Name"), None)
    after = _dashboard(config_repo)
    assert len(titles) == explore.SAVE_ATTEMPTS and after["title"] == titles[-1]
    assert [c["id"] for c in after["components"]] == [c["id"] for c in before["components"]]


SAVE_AT_ONCE = """
import json, sys, time
from pathlib import Path
from lib.artifacts import explore
from lib.roles.access import User
from lib.repo.configrepo import ConfigRepo
from lib.data.snapshots import Warehouse
repo = ConfigRepo.open_or_create(Path(sys.argv[1]), Path(sys.argv[2]))
user = User(sys.argv[3], app_role="steward")
question = explore.Question("gdp", "Value", "max", breakdown="Country Name", top=3)
wh = Warehouse.for_workspace(repo.draft(user, "gdp-explorer").workspace_path)
while not Path(sys.argv[4]).exists():  # both processes start saving together
    time.sleep(0.01)
saved = explore.save_to_draft(repo, user, "gdp-explorer", question, wh.tables(), wh.current().id)
print(json.dumps({"sha": saved.sha, "component": saved.component}))
"""


@pytest.mark.slow
def test_two_processes_saving_questions_at_once_keep_both(config_repo, env, tmp_path):
    ws, _ = workspace.load(config_repo.draft(SAM, GDP).workspace_path)
    output = json.loads(json.dumps(ws.data["output"]))
    output["layout"]["max_components"] = len(ws.data["dashboard"]["components"]) + 2  # room for both
    config_repo.save(SAM, GDP, {"output": output}, "Room for two more")
    args = (config_repo.path, WORKSPACES, "sam")
    before = _py(env, READ, *args)  # the draft exists and its data is loaded before the race
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SAVE_AT_ONCE, *map(str, args), str(go)], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    go.touch()
    outs = [p.communicate(timeout=TIMEOUT_S) for p in procs]
    assert all(p.returncode == 0 for p in procs), "\n".join(err for _, err in outs)
    saved = sorted(json.loads(out.strip().splitlines()[-1])["component"] for out, _ in outs)
    assert saved == ["explore_value_by_country_name", "explore_value_by_country_name_2"]
    after = _py(env, READ, *args)
    assert after["ids"] == before["ids"] + saved
    assert sorted(row[0] for row in after["layout"][-2:]) == saved


# --------------------------------------------------------------------------- a saved question follows the filter bar


@pytest.fixture
def supply_draft(config_repo, tmp_path):
    """Sam's draft of the supply-chain demo (a Sites multiselect over gates.site) and its data, loaded."""
    path = config_repo.draft(SAM, "supply-chain-weekly").workspace_path
    wh = Warehouse(tmp_path / "supply-cache")
    assert refresh(path, wh, user=OPERATOR).ok
    return path, wh.tables(), current_id(wh), pd.read_csv(WORKSPACES / "supply-chain-weekly" / "data" / "gates.csv")


def _saved_component(path: Path, cid: str) -> tuple[dict, dict]:
    ws, _ = workspace.load(path)
    return ws.data, next(c for c in ws.data["dashboard"]["components"] if c["id"] == cid)


def test_a_question_on_the_column_a_filter_drives_follows_the_filter_bar_instead_of_its_value(config_repo, supply_draft):
    path, tables, version, gates = supply_draft
    question = Question("gates", "actual", "sum", breakdown="gate", filters=(Filter("site", "=", "Brno"), Filter("actual", ">", 900)))
    saved = explore.save_to_draft(config_repo, SAM, "supply-chain-weekly", question, tables, version)
    assert saved.follows == ["site"]
    files, spec = _saved_component(path, saved.component)
    assert "$site" in spec["query"] and "Brno" not in spec["query"] and "900" in spec["query"]  # the other filter stays a literal
    big = gates[gates.actual > 900]
    for chosen, rows in (({"site": ["Lyon", "Porto"]}, big[big.site.isin(["Lyon", "Porto"])]), ({}, big)):
        comp = render(files, tables, version, chosen, cache=QueryCache()).component(saved.component)
        assert comp.error is None, comp.error
        assert comp.result is not None
        got = {r["gate"]: r["value"] for r in comp.result.table.to_pylist()}
        assert got == rows.groupby("gate").actual.sum().to_dict()


def test_an_unfiltered_question_follows_the_bar_only_when_the_steward_asks(config_repo, supply_draft):
    path, tables, version, gates = supply_draft
    question = Question("gates", "actual", "sum")
    plain = explore.save_to_draft(config_repo, SAM, "supply-chain-weekly", question, tables, version)
    following = explore.save_to_draft(config_repo, SAM, "supply-chain-weekly", question, tables, version, follow_bar=True)
    assert plain.follows == [] and following.follows == ["site"]
    files, spec = _saved_component(path, plain.component)
    assert "$site" not in spec["query"]
    r = render(files, tables, version, {"site": ["Brno"]}, cache=QueryCache())
    assert r.component(plain.component).value == gates.actual.sum()
    assert r.component(following.component).value == gates[gates.site == "Brno"].actual.sum()


def test_a_filter_whose_column_is_not_certain_drives_nothing_and_other_operators_stay_literal():
    dashboard = {
        "filters": [
            {"id": "site", "type": "multiselect", "options_query": "SELECT DISTINCT site FROM gates ORDER BY 1"},
            {"id": "joined", "type": "select", "options_query": "SELECT DISTINCT g.site FROM gates g JOIN sites s ON g.site = s.name"},
            {"id": "upper", "type": "select", "options_query": "SELECT DISTINCT upper(gate) FROM gates"},
            {"id": "two", "type": "select", "options_query": "SELECT DISTINCT site, gate FROM gates"},
            {"id": "day", "type": "date_range", "bounds_query": "SELECT min(day), max(day) FROM gates"},
            {"id": "broken", "type": "select", "options_query": "SELECT FROM ("},
        ]
    }
    bar = explore.bar_filters(dashboard)
    assert [(b.id, b.table, b.column) for b in bar] == [("site", "gates", "site"), ("day", "gates", "day")]
    assert bar[1].condition("day") == '($day_from IS NULL OR "day" >= $day_from) AND ($day_to IS NULL OR "day" <= $day_to)'
    assert bar[0].condition("Site") == '($site IS NULL OR list_contains($site, "Site"))'
    assert not explore._follows(Filter("site", "contains", "Br"), bar[0]) and explore._follows(Filter("site", "in", ["Brno"]), bar[0])
    assert explore._follows(Filter("day", "between", ("2026-11-16", "2026-11-17")), bar[1]) and not explore._follows(Filter("day", "=", "2026-11-16"), bar[1])


# --------------------------------------------------------------------------- the Explore page


@pytest.fixture
def app_env(tmp_path, monkeypatch):
    """As tests/app/test_app.py's `env`: a fresh config repo and cache, no API key."""
    import streamlit as st

    monkeypatch.setenv("DASHMEM_CONFIG_REPO", str(tmp_path / "config-repo"))
    monkeypatch.setenv("DASHMEM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("DASHMEM_COOKIE_KEY", "k" * 40)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.chdir(ROOT)
    st.cache_resource.clear()
    st.cache_data.clear()
    return tmp_path


def _select(at, label: str, value) -> None:
    next(s for s in at.selectbox if s.label == label).set_value(value).run()
    assert not at.exception, [e.message for e in at.exception]


def test_a_viewer_without_a_key_explores_sees_the_sql_and_a_chart_and_cannot_save(app_env):
    at = on_page(signed_in("vera", "supply-chain-weekly"), "app_pages/chat.py")
    assert any("Explore" in i.value for i in at.info)  # the Chat page's no-key message points to Explore
    at = on_page(at, "app_pages/explore.py")
    assert [t.value for t in at.title] == ["Explore"]
    _select(at, "Measure", "actual")
    _select(at, "Aggregation", "sum")
    _select(at, "Breakdown", "site")
    sql = at.code[0].value
    assert sql.startswith('SELECT "site" AS "site", sum("actual") AS value FROM "gates"') and "ORDER BY value DESC" in sql
    assert len(at.get("vega_lite_chart")) == 1
    frame = at.dataframe[0].value
    expected = cast(pd.Series, pd.read_csv(WORKSPACES / "supply-chain-weekly" / "data" / "gates.csv").groupby("site")["actual"].sum())
    assert dict(zip(frame["site"], frame["value"])) == expected.to_dict()
    assert not [b for b in at.button if b.label == "Save to draft dashboard"]
    # A filter: sites in a chosen list, bound as a parameter.
    next(b for b in at.button if b.label == "Add a filter").click().run()
    _select(at, "Filter on", "gate")
    _select(at, "Operator", "=")
    next(t for t in at.text_input if t.label == "Value").input("Orders' OR 'x'='x").run()
    assert "$f0" in at.code[0].value and "OR 'x'" not in at.code[0].value
    assert at.dataframe[0].value.empty  # no gate has that name: compared as text
    _select(at, "Operator", "in")
    values = next(m for m in at.multiselect if m.label == "Values")
    assert values.options == ["Orders", "Process", "Supply"]
    values.set_value(["Orders", "Supply"]).run()
    assert 'list_contains($f0, "gate")' in at.code[0].value
    gates = pd.read_csv(WORKSPACES / "supply-chain-weekly" / "data" / "gates.csv")
    kept = gates[gates["gate"].isin(["Orders", "Supply"])]
    frame = at.dataframe[0].value
    assert dict(zip(frame["site"], frame["value"])) == cast(pd.Series, kept.groupby("site")["actual"].sum()).to_dict()
    # Sum is not offered for a year-like or identifier column; a single value is a KPI card.
    _select(at, "Measure", None)
    assert [s for s in at.selectbox if s.label == "Aggregation"][0].options == ["Count"]
    _select(at, "Breakdown", None)
    assert [m.value for m in at.metric] == [f"{len(kept):,}"]


@pytest.mark.slow
def test_a_steward_saves_an_exploration_to_the_draft_dashboard(app_env):
    at = on_page(signed_in("sam", "supply-chain-weekly"), "app_pages/explore.py")
    _select(at, "Measure", "actual")
    _select(at, "Aggregation", "sum")
    _select(at, "Breakdown", "gate")
    _select(at, "Time", "day")
    next(c for c in at.checkbox if c.label == "Follow the dashboard's filter bar").check().run()
    next(b for b in at.button if b.label == "Save to draft dashboard").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("Saved **explore_actual_by_gate_per_month**" in s.value and "follows the filter bar's site" in s.value for s in at.success), [
        s.value for s in at.success
    ]
    from lib.repo.configrepo import ConfigRepo

    repo = ConfigRepo.open_or_create(app_env / "config-repo", WORKSPACES)
    ws, _ = workspace.load(repo.draft(SAM, "supply-chain-weekly").workspace_path)
    saved = ws.data["dashboard"]["components"][-1]
    assert saved["id"] == "explore_actual_by_gate_per_month" and saved["mark"] == "line"
    assert "($site IS NULL OR" in saved["query"]  # it follows the Sites filter, as the dashboard's own charts do
    # The workspace's colour rule for gates is applied, so the checks pass.
    assert saved["encoding"]["color"]["scale"]["domain"] == ["Supply", "Orders", "Process"]


# --------------------------------------------------------------------------- live sources


LIVE_ROWS = [
    {
        "day": f"2026-{1 + g % 11:02d}-{1 + g % 27:02d}",
        "site": ["Brno", "Lyon", "Porto", "Leeds"][g % 4],
        "gate": ["Supply", "Orders", "Process"][g % 3],
        "actual": 800 + g % 97,
    }
    for g in range(600)
]
LIVE_PROFILE = {
    "tables": [
        {
            "name": "gates",
            "source": "gates",
            "rows": len(LIVE_ROWS),
            "columns": [
                {"name": "day", "type": "DATE", "role": "time"},
                {"name": "site", "type": "VARCHAR", "role": "dimension"},
                {"name": "gate", "type": "VARCHAR", "role": "dimension"},
                {"name": "actual", "type": "BIGINT", "role": "measure", "aggregate": "sum"},
            ],
        }
    ]
}


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def live_gates(request, tmp_path):
    """LIVE_ROWS as a live `gates` source in SQLite, PostgreSQL or MariaDB (skipped when the server is not running)."""
    import sqlalchemy as sa

    from ..conftest import server_engine

    kind = request.param
    if kind == "sqlite":
        engine, table, url = sa.create_engine(f"sqlite:///{tmp_path / 'local.db'}"), "gates", "sqlite:///local.db"
    else:
        engine, table = server_engine(kind), f"dm_explore_{os.getpid()}_{id(request)}"
        url = {"postgresql": PG_URL, "mariadb": MARIADB_URL}[kind]
    with engine.begin() as connection:
        connection.exec_driver_sql(f"CREATE TABLE {table} (day DATE, site VARCHAR(20), gate VARCHAR(20), actual BIGINT)")
        connection.execute(sa.text(f"INSERT INTO {table} VALUES (:day, :site, :gate, :actual)"), LIVE_ROWS)
    yield {"name": "gates", "type": "sql", "url": url, "table": table, "mode": "live", "cache_ttl_s": 0}
    with engine.begin() as connection:
        connection.exec_driver_sql(f"DROP TABLE IF EXISTS {table}")
    engine.dispose()


@pytest.mark.parametrize("grain", explore.GRAINS)
def test_a_live_source_answers_as_its_snapshot_would(live_gates, tmp_path, grain):
    """The question runs in the source's database (read-only, values bound) and gives the snapshot's answer."""
    import datetime as dt

    import pyarrow as pa

    question = Question(
        "gates",
        "actual",
        "sum",
        breakdown="site",
        time="day",
        grain=grain,
        filters=(Filter("gate", "in", ["Supply", "Orders"]), Filter("site", "contains", "R"), Filter("day", "between", ("2026-02-01", "2026-10-15"))),
        top=2,
    )
    live_files = {"profile": LIVE_PROFILE, "sources": {"sources": [live_gates]}}
    assert "median" not in explore.catalogue(live_files)["gates"].aggregations("actual")
    _, got = explore.run(question, live_files, {}, "v1", workspace_path=tmp_path, cache=QueryCache())
    snapshot = {"gates": pa.Table.from_pylist([{**r, "day": dt.date.fromisoformat(r["day"])} for r in LIVE_ROWS])}
    _, expected = explore.run(question, {"profile": LIVE_PROFILE}, snapshot, "v1", cache=QueryCache())

    def rows(result):
        return [(str(r["period"])[:10], r["site"], int(r["value"])) for r in result.table.to_pylist()]

    assert rows(got) == rows(expected) and rows(got)


# --------------------------------------------------------------------------- in a real browser


@pytest.mark.slow
@pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="/usr/bin/chromium not installed")
def test_a_viewer_explores_in_chromium(server, page):
    url, _ = server
    sign_in(page, url, "vera", "vera-demo")
    choose_workspace(page, "Supply chain weekly")
    page.get_by_role("link", name="Explore").click()
    page.get_by_role("heading", name="Explore").wait_for(timeout=30_000)

    def choose(label: str, option: str, sql: str) -> None:
        """Pick an option, then wait for the rerun to show SQL holding `sql` and to end, so the next choice sees only the
        new widgets (a widget whose key changed stays on the page, stale, until the run that replaced it ends)."""
        page.locator('[data-testid="stSelectbox"]', has_text=label).click()
        page.get_by_role("option", name=option, exact=True).click()
        page.locator('[data-testid="stCode"]', has_text=sql).wait_for(timeout=30_000)
        page.locator('[data-testid="stApp"][data-test-script-state="notRunning"]').wait_for(state="attached", timeout=30_000)

    choose("Measure", "actual", 'count("actual")')
    choose("Aggregation", "Sum", 'sum("actual")')
    choose("Breakdown", "site", 'SELECT "site" AS "site", sum("actual") AS value FROM "gates" GROUP BY 1 ORDER BY value DESC')
    page.locator('[data-testid="stVegaLiteChart"]').first.wait_for(timeout=30_000)
    assert page.get_by_role("button", name="Save to draft dashboard").count() == 0
    page.screenshot(path=str(ARTIFACTS / "browser-explore.png"), full_page=True)


def test_hostile_values_typed_into_explore_get_a_plain_message_and_the_page_stays(app_env):
    at = on_page(signed_in("vera", "supply-chain-weekly"), "app_pages/explore.py")
    _select(at, "Measure", "actual")
    _select(at, "Aggregation", "sum")
    next(b for b in at.button if b.label == "Add a filter").click().run()
    _select(at, "Filter on", "gate")
    _select(at, "Operator", "=")
    value = next(t for t in at.text_input if t.label == "Value")
    value.input("x" * 1_000_000).run()  # a megabyte pasted into the box
    assert not at.exception, [e.message for e in at.exception]
    assert any("at most 10,000" in e.value for e in at.error), [e.value for e in at.error]
    _select(at, "Filter on", "actual")
    _select(at, "Operator", ">")
    for typed in ("nan", "-inf", "1" * 60):
        next(t for t in at.text_input if t.label == "Value").input(typed).run()
        assert not at.exception, [e.message for e in at.exception]
        assert any("is not a finite number" in e.value for e in at.error), (typed, [e.value for e in at.error])
    next(t for t in at.text_input if t.label == "Value").input("100").run()
    assert not at.error and at.metric  # a fitting value answers again
