"""Chat sessions end to end: the real anthropic SDK over a fake transport, real data, a real config repo.

The scripted replies play the model; everything else is the product: compose,
the SDK's HTTP request, tools on DuckDB, the checks, apply_outcome and
ConfigRepo.save/publish.
"""

from __future__ import annotations

import copy
import json
import logging
import subprocess
import time
import zlib
from pathlib import Path

import httpx2
import pandas as pd
import pyarrow as pa
import pytest

from lib.artifacts import checks
from lib.artifacts.render import QueryCache
from lib.artifacts.report import render_report
from lib.chat import agent
from lib.chat.agent import Limits, Outcome, apply_outcome, estimate_cost, files_to_save, regenerate_message, run_session
from lib.chat.model import ScriptedModel, message, text_block, tool_use_block
from lib.core import tokens
from lib.data import profile
from lib.data.refresh import RefreshReport, SourceReport, refresh
from lib.data.snapshots import Warehouse
from lib.memory import workspace
from lib.ops import publish
from lib.roles.access import OPERATOR, PermissionDenied, User
from tests.helpers import current_id
from tests.helpers.model import MODEL, FakeAPI, broken_stream, error_response, raises
from tests.helpers.report import _with_region_column

ALICE = User("alice", app_role="steward")  # creates the workspace, so its owner
SAM = User("sam")  # steward of supply-chain-weekly
VERA = User("vera")  # nobody in particular: a viewer through '*'
SLUG = "superstore"
CSV = "global_superstore_sample1000.csv"

SALES_SPEC = {
    "title": "Superstore sales",
    "description": "Sales and profit by category and market.",
    "components": [
        {"id": "kpi_sales", "type": "kpi", "title": "Total sales", "query": 'SELECT sum("Sales") AS value FROM data', "format": ",.0f"},
        {"id": "kpi_profit", "type": "kpi", "title": "Total profit", "query": 'SELECT sum("Profit") AS value FROM data', "format": ",.0f"},
        {
            "id": "by_category",
            "type": "chart",
            "title": "Sales by category",
            "query": 'SELECT "Category" AS category, sum("Sales") AS sales FROM data GROUP BY 1 ORDER BY 2 DESC',
            "mark": "bar",
            "encoding": {
                "x": {"field": "category", "type": "nominal", "title": "Category"},
                "y": {"field": "sales", "type": "quantitative", "title": "Sales", "format": ",.0f"},
            },
        },
        {
            "id": "by_market",
            "type": "table",
            "title": "Sales by market",
            "query": 'SELECT "Market" AS market, sum("Sales") AS sales, sum("Profit") AS profit FROM data GROUP BY 1 ORDER BY 2 DESC',
            "max_rows": 10,
            "columns": {"market": {"label": "Market"}, "sales": {"label": "Sales", "format": ",.0f"}},
        },
    ],
    "layout": [["kpi_sales", "kpi_profit"], ["by_category", "by_market"]],
}
TREND = {
    "id": "trend",
    "type": "chart",
    "title": "Sales by month",
    "query": 'SELECT date_trunc(\'month\', "Order Date") AS month, sum("Sales") AS sales FROM data GROUP BY 1 ORDER BY 1',
    "mark": "line",
    "encoding": {
        "x": {"field": "month", "type": "temporal", "title": "Month"},
        "y": {"field": "sales", "type": "quantitative", "title": "Sales", "format": ",.0f"},
    },
}
SALES_REPORT = {
    "title": "Superstore sales report",
    "description": "Sales and profit, by category and by market.",
    "queries": {"totals": 'SELECT sum("Sales") AS sales, sum("Profit") / sum("Sales") AS margin, count(DISTINCT "Market") AS markets FROM data'},
    "sections": [
        {"type": "heading", "text": "Overview", "level": 1},
        {"type": "prose", "markdown": "Sales came to **{{totals.sales|,.0f}}** across {{totals.markets}} markets, at a margin of {{totals.margin|.1%}}.\n"},
        {"type": "kpis", "components": SALES_SPEC["components"][:2]},
        SALES_SPEC["components"][2],
        {"type": "page_break"},
        {"type": "heading", "text": "Markets", "level": 2},
        SALES_SPEC["components"][3],
    ],
}
WITH_TREND = {**SALES_SPEC, "components": SALES_SPEC["components"] + [TREND], "layout": SALES_SPEC["layout"] + [[{"id": "trend", "width": 2}]]}


def as_yaml(spec: dict, kind: str = "dashboard") -> str:
    return workspace.render(kind, spec)


def usage(fresh=0, out=0, read=0, write=0) -> dict:
    return {"input_tokens": fresh, "output_tokens": out, "cache_read_input_tokens": read, "cache_creation_input_tokens": write}


def reply(*blocks, u=None) -> dict:
    return message(*blocks, usage=u or usage(50, 20), model=MODEL)


@pytest.fixture
def superstore(config_repo, tmp_path, monkeypatch, dataset):
    """A workspace over the public Superstore sample, created, loaded, profiled and published in a real config repo."""
    csv = dataset(CSV)
    monkeypatch.setenv("DASHMEM_DATA_DIRS", str(csv.parent))
    monkeypatch.setenv("DASHMEM_CACHE_DIR", str(tmp_path / "cache"))
    draft = config_repo.new_workspace(ALICE, SLUG, "Superstore")
    config_repo.save(ALICE, SLUG, {"sources": {"sources": [{"name": "data", "type": "csv", "path": str(csv)}]}}, "Connect data")
    wh = Warehouse.for_workspace(draft.workspace_path)
    assert refresh(draft.workspace_path, wh, user=OPERATOR).ok
    sources = workspace.load(draft.workspace_path)[0].data["sources"]["sources"]
    config_repo.save(ALICE, SLUG, {"profile": profile.build(wh.tables(), sources)}, "Profile the data")
    publish.publish(config_repo, ALICE, SLUG)
    return config_repo, draft.workspace_path, wh


def csv_of(files: dict) -> str:
    return files["sources"]["sources"][0]["path"]


def load(folder: Path) -> dict:
    ws, diagnostics = workspace.load(folder)
    assert diagnostics == []
    return ws.data


def session(files, wh, mode, text, client, user=ALICE, **options):
    return run_session(files, wh.tables(), current_id(wh), mode, text, client, user=user, slug=SLUG, model=MODEL, **options)


def tool_results(body: dict) -> list[dict]:
    return [b for b in body["messages"][-1]["content"] if b["type"] == "tool_result"]


# --------------------------------------------------------------------------- create, then refine


def test_an_edit_session_creates_a_dashboard_and_a_second_refines_the_saved_one(superstore):
    repo, folder, wh = superstore
    api = FakeAPI(
        [
            reply(
                text_block("Checking the categories."),
                tool_use_block("t1", "run_sql", {"sql": 'SELECT "Category", count(*) AS n FROM data GROUP BY 1 ORDER BY 1'}),
                u=usage(fresh=900, out=60, write=3100),
            ),
            reply(tool_use_block("t2", "write_dashboard", {"yaml": as_yaml(SALES_SPEC)}), u=usage(fresh=200, out=700, read=3100, write=400)),
            reply(text_block("I built KPIs for sales and profit, sales by category and a market table."), u=usage(fresh=150, out=40, read=3500)),
        ]
    )
    files = load(folder)
    assert "dashboard" not in files
    outcome = session(files, wh, "edit", "Build a sales dashboard by category and market", api.client())

    assert outcome.error is None and outcome.stopped_reason == "end_turn" and outcome.steps == 3
    assert outcome.passes and outcome.check_diagnostics == []
    assert outcome.answer.startswith("I built KPIs")
    assert "+title: Superstore sales" in outcome.dashboard_diff
    assert outcome.usage == {"input_tokens": 1250, "output_tokens": 800, "cache_read_input_tokens": 6600, "cache_creation_input_tokens": 3500, "calls": 3}
    first, second, third = api.bodies
    assert [t["name"] for t in first["tools"]] == ["run_sql", "write_dashboard", "edit_dashboard", "write_report", "edit_report", "propose_rule"]
    [sql_result] = tool_results(second)
    assert sql_result["tool_use_id"] == "t1" and "Furniture" in sql_result["content"] and "is_error" not in sql_result
    [write_result] = tool_results(third)
    assert "Created the draft dashboard.yaml" in write_result["content"] and "All checks passed." in write_result["content"]
    # The API's automatic breakpoint moves to the newest block by itself: the loop marks no tool result ...
    assert all(b["cache_control"] == {"type": "ephemeral"} for b in api.bodies)
    assert "cache_control" not in sql_result_of(third) and "cache_control" not in write_result
    assert all(json.dumps(b).count('"cache_control"') <= 4 for b in api.bodies)  # ... and keeps the API's limit

    to_save = apply_outcome(files, outcome, [])
    assert list(to_save) == ["dashboard"]
    repo.save(ALICE, SLUG, to_save, "Dashboard from a chat session")
    saved = workspace.load(folder)[0]
    assert saved.data["dashboard"] == SALES_SPEC
    assert checks.run(saved, wh.tables(), current_id(wh)) == []

    # The second session starts from the saved spec and changes only what it asks.
    api = FakeAPI(
        [
            reply(tool_use_block("t3", "write_dashboard", {"yaml": as_yaml(WITH_TREND)})),
            reply(text_block("Added a monthly sales trend below the breakdowns.")),
        ]
    )
    files = load(folder)
    outcome = session(files, wh, "edit", "add a trend chart", api.client())
    shown = api.bodies[0]["messages"][0]["content"]
    assert shown[1]["text"].startswith("# Current dashboard (dashboard.yaml)")
    assert as_yaml(SALES_SPEC).split("\n", 1)[1] in shown[1]["text"]
    assert shown[-1]["text"] == "add a trend chart"
    assert outcome.passes and "+  - id: trend" in outcome.dashboard_diff
    assert not [line for line in outcome.dashboard_diff.splitlines() if line.startswith("-  - id:")]
    assert "Updated the draft dashboard.yaml" in tool_results(api.bodies[1])[0]["content"]
    # The composed breakpoints stay where compose put them; the automatic one follows the conversation.
    opening = api.bodies[1]["messages"][0]["content"]
    assert opening == api.bodies[0]["messages"][0]["content"] and "cache_control" in opening[-2]
    assert "cache_control" not in tool_results(api.bodies[1])[0]
    assert [json.dumps(b).count('"cache_control"') for b in api.bodies] == [4, 4]

    repo.save(ALICE, SLUG, apply_outcome(files, outcome, []), "Add a trend")
    saved = workspace.load(folder)[0]
    assert [c["id"] for c in saved.data["dashboard"]["components"]] == ["kpi_sales", "kpi_profit", "by_category", "by_market", "trend"]
    assert checks.run(saved, wh.tables(), current_id(wh)) == []


def sql_result_of(body: dict) -> dict:
    return next(
        b for turn in body["messages"] if turn["role"] == "user" for b in turn["content"] if b.get("type") == "tool_result" and b["tool_use_id"] == "t1"
    )


# --------------------------------------------------------------------------- a big dashboard, edited by patch

DIMENSIONS = ("Category", "Sub-Category", "Market", "Region", "Segment", "Ship Mode", "Order Priority", "Country", "State", "City")
MEASURES = ("Sales", "Profit", "Quantity", "Shipping Cost", "Discount")


def big_dashboard(lines: int = 400) -> dict:
    """A valid dashboard over the Superstore sample of at least `lines` lines: a bar chart per dimension and measure."""
    spec: dict = {"title": "Superstore in detail", "components": [], "layout": []}
    for dimension in DIMENSIONS:
        for measure in MEASURES:
            x, y = dimension.lower().replace("-", "_").replace(" ", "_"), measure.lower().replace(" ", "_")
            spec["components"].append(
                {
                    "id": f"{y}_by_{x}",
                    "type": "chart",
                    "title": f"{measure} by {dimension.lower()}",
                    "query": f'SELECT "{dimension}" AS {x}, sum("{measure}") AS {y} FROM data GROUP BY 1 ORDER BY 2 DESC LIMIT 10',
                    "mark": "bar",
                    "encoding": {
                        "x": {"field": x, "type": "nominal", "title": dimension},
                        "y": {"field": y, "type": "quantitative", "title": measure, "format": ",.0f"},
                    },
                }
            )
            spec["layout"] = [[c["id"] for c in spec["components"][i : i + 2]] for i in range(0, len(spec["components"]), 2)]
            if as_yaml(spec).count("\n") >= lines:
                return spec
    raise AssertionError("not enough charts for the lines asked")


def test_a_patch_edit_of_a_400_line_dashboard_goes_through_the_sdk_well_under_the_output_cap(superstore, monkeypatch):
    """Issue #32, item 1: the model changes two things of a 400-line dashboard by sending a few dozen tokens, not the file."""
    monkeypatch.delenv("DASHMEM_CHAT_MAX_TOKENS", raising=False)
    repo, folder, wh = superstore
    big = big_dashboard()
    whole = as_yaml(big)
    assert whole.count("\n") >= 400
    repo.save(ALICE, SLUG, {"dashboard": big}, "A big dashboard")
    files = load(folder)
    renamed, remarked = big["components"][9], {**big["components"][20], "mark": "point"}
    patch = {"old_string": f"    title: {renamed['title']}\n", "new_string": f"    title: {renamed['title']} (largest first)\n"}
    replace = {"component": as_yaml(remarked).split("\n", 1)[1]}
    api = FakeAPI(
        [
            reply(text_block("Renaming the chart."), tool_use_block("t1", "edit_dashboard", patch), u=usage(900, tokens.estimate(json.dumps(patch)))),
            reply(tool_use_block("t2", "edit_dashboard", replace), u=usage(200, tokens.estimate(json.dumps(replace)), read=900)),
            reply(text_block("Renamed one chart and drew another with points.")),
        ]
    )
    events: list[tuple[str, dict]] = []
    outcome = session(files, wh, "edit", "Rename one chart, draw another with points", api.client(), on_event=lambda k, p: events.append((k, p)))

    assert outcome.error is None and outcome.stopped_reason == "end_turn" and outcome.passes, outcome.check_diagnostics
    cap = api.bodies[0]["max_tokens"]
    assert cap == 16_000 and all(b["stream"] is True for b in api.bodies)  # the setting's default, streamed
    # What the model sent, as it went back to the API: each edit is a tiny share of the cap, where the whole
    # file as write_dashboard's argument would not even have fitted the old cap of 4,096 tokens.
    sent = [b["input"] for turn in api.bodies[-1]["messages"] if turn["role"] == "assistant" for b in turn["content"] if b["type"] == "tool_use"]
    assert sent == [patch, replace]
    assert [tokens.estimate(json.dumps(tool_input)) for tool_input in sent] == [tokens.estimate(json.dumps(patch)), tokens.estimate(json.dumps(replace))]
    assert all(tokens.estimate(json.dumps(tool_input)) < cap / 50 for tool_input in sent)
    assert tokens.estimate(json.dumps({"yaml": whole})) > 4096
    first, second = (tool_results(b)[0] for b in api.bodies[1:])
    assert "Updated the draft dashboard.yaml" in first["content"] and "All checks passed." in first["content"]
    assert f"+    title: {renamed['title']} (largest first)" in first["content"] and "+    mark: point" in second["content"]
    assert ("draft", {"passes": True, "kind": "dashboard"}) in events

    changed = [line for line in outcome.dashboard_diff.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    assert changed == [f"-    title: {renamed['title']}", f"+    title: {renamed['title']} (largest first)", "-    mark: bar", "+    mark: point"]
    repo.save(ALICE, SLUG, apply_outcome(files, outcome, []), "Two small changes")
    saved = workspace.load(folder)[0]
    assert saved.data["dashboard"]["components"][20] == remarked and len(saved.data["dashboard"]["components"]) == len(big["components"])
    assert checks.run(saved, wh.tables(), current_id(wh)) == []


def test_a_draft_that_fails_the_checks_is_kept_and_the_errors_go_back_to_the_model(superstore):
    repo, folder, wh = superstore
    broken = {
        **SALES_SPEC,
        "components": [{"id": "kpi_sales", "type": "kpi", "title": "Total sales", "query": 'SELECT sum("Salez") AS value FROM data'}],
        "layout": [["kpi_sales"]],
    }
    scripted = ScriptedModel(
        [reply(tool_use_block("t1", "write_dashboard", {"yaml": as_yaml(broken)})), reply(text_block("The query names a column that does not exist."))]
    )
    events: list[tuple[str, dict]] = []
    outcome = session(load(folder), wh, "edit", "One KPI please", scripted, on_event=lambda k, p: events.append((k, p)))
    assert ("tool_call", {"name": "write_dashboard"}) in events and ("draft", {"passes": False, "kind": "dashboard"}) in events
    result = tool_results(scripted.requests[1])[0]
    assert result["is_error"] is True and "check.references" in result["content"] and "did you mean 'Sales'" in result["content"]
    assert outcome.draft_dashboard == broken and not outcome.passes
    assert any(d.id == "check.references" for d in outcome.check_diagnostics)


def test_a_report_session_gets_the_errors_back_fixes_them_and_the_saved_report_passes_and_renders(superstore):
    """write_report: a broken report goes back with its checks (ids, fields), the fix passes, saving writes report.yaml only."""
    repo, folder, wh = superstore
    broken = copy.deepcopy(SALES_REPORT)
    broken["sections"][1]["markdown"] = "Sales came to **{{totals.revenue|,.0f}}** in {{totals.markets}} markets.\n"
    broken["sections"][3] = {**broken["sections"][3], "query": 'SELECT "Categry" AS category, sum("Sales") AS sales FROM data GROUP BY 1'}
    api = FakeAPI(
        [
            reply(tool_use_block("t1", "write_report", {"yaml": as_yaml(broken, "report")})),
            reply(text_block("Fixing the column names."), tool_use_block("t2", "write_report", {"yaml": as_yaml(SALES_REPORT, "report")})),
            reply(text_block("I wrote a sales report: an overview, key figures, sales by category and a market table.")),
        ]
    )
    events: list[tuple[str, dict]] = []
    files = load(folder)
    outcome = session(files, wh, "edit", "Write a sales report", api.client(), on_event=lambda k, p: events.append((k, p)))

    first_result = tool_results(api.bodies[1])[0]
    assert first_result["is_error"] is True and "Created the draft report.yaml" in first_result["content"]
    assert "- error [check.placeholders] sections[1].markdown:" in first_result["content"]
    assert "query 'totals' has no column 'revenue' (allowed: sales, margin, markets)" in first_result["content"]
    assert "sections[3].query:" in first_result["content"] and "Categry" in first_result["content"]
    second_result = tool_results(api.bodies[2])[0]
    assert "is_error" not in second_result and "Updated the draft report.yaml" in second_result["content"] and "All checks passed." in second_result["content"]
    assert [p for k, p in events if k == "draft"] == [{"passes": False, "kind": "report"}, {"passes": True, "kind": "report"}]

    assert outcome.error is None and outcome.passes and outcome.report_diagnostics == []
    assert outcome.draft_report == SALES_REPORT and outcome.draft_dashboard is None and outcome.dashboard_diff == ""
    assert "+title: Superstore sales report" in outcome.report_diff and outcome.report_diff.startswith("--- a/report.yaml")
    to_save = apply_outcome(files, outcome, [])
    assert list(to_save) == ["report"]
    repo.save(ALICE, SLUG, to_save, "Report from a chat session")
    saved = workspace.load(folder)[0]
    assert saved.data["report"] == SALES_REPORT and "dashboard" not in saved.data
    assert checks.run(saved, wh.tables(), current_id(wh), kind="report") == []
    rendered = render_report(saved.data, wh.tables(), current_id(wh), cache=QueryCache())
    assert rendered.errors == []
    raw = pd.read_csv(csv_of(files))  # computed apart from the product
    sales, markets = raw["Sales"].sum(), raw["Market"].nunique()
    prose = next(s for s in rendered.sections if s.type == "prose").components[0]
    assert prose.markdown.startswith(f"Sales came to **{sales:,.0f}** across {markets} markets, at a margin of ")

    # The next session is shown the saved report (after the profile) and refines it: a good report at the first write.
    refined = copy.deepcopy(SALES_REPORT)
    refined["sections"].insert(4, {"type": "heading", "text": "By category", "level": 2})
    api = FakeAPI([reply(tool_use_block("t3", "write_report", {"yaml": as_yaml(refined, "report")})), reply(text_block("Added a heading."))])
    files = load(folder)
    outcome = session(files, wh, "edit", "Give the category chart a heading", api.client())
    shown = api.bodies[0]["messages"][0]["content"]
    assert shown[1]["text"].startswith("# Current report (report.yaml)") and as_yaml(SALES_REPORT, "report").split("\n", 1)[1] in shown[1]["text"]
    assert shown[1]["cache_control"] == {"type": "ephemeral"} and [json.dumps(b).count('"cache_control"') for b in api.bodies] == [4, 4]
    assert outcome.passes and "is_error" not in tool_results(api.bodies[1])[0]
    assert [line for line in outcome.report_diff.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")] == [
        "+  - {type: heading, text: By category, level: 2}"
    ]
    after = repo.save(ALICE, SLUG, apply_outcome(files, outcome, []), "Report: a heading")
    assert after is not None
    before = repo.history(SLUG, ref=repo.draft(ALICE, SLUG).branch)[1].sha
    assert [c.describe() for c in repo.changes(SLUG, before, after)] == ["report section heading 'By category' added at sections[4]"]


def test_garbage_for_write_report_is_malformed_changes_nothing_and_the_retry_bound_holds(superstore):
    repo, folder, wh = superstore
    api = FakeAPI(
        [
            reply(tool_use_block("t1", "write_report", {"yaml": "- not\n- a mapping\n"})),
            reply(tool_use_block("t2", "write_report", {"markdown": "# A report"})),
            reply(tool_use_block("t3", "write_report", {"yaml": "title: [unclosed"})),
            reply(text_block("never reached")),
        ]
    )
    files = load(folder)
    outcome = session(files, wh, "edit", "Write a report", api.client(), limits=Limits(max_invalid_tool_calls=3))
    assert len(api.bodies) == 3  # the third malformed call ends the session before its result is sent
    not_mapping, missing = (tool_results(body)[0] for body in api.bodies[1:])
    assert not_mapping["is_error"] is True and "not a mapping (expected title, queries, sections" in not_mapping["content"]
    assert "invalid input for write_report" in missing["content"] and "'yaml' is a required property" in missing["content"]
    assert outcome.stopped_reason == "invalid_tool_calls" and outcome.draft_report is None and not outcome.has_changes
    assert apply_outcome(files, outcome, []) == {}


# --------------------------------------------------------------------------- failures


@pytest.mark.parametrize(
    "failure, words",
    [
        (error_response(429, "rate_limit_error", {"retry-after": "12"}), "rate limited (429) — try again in a moment"),
        (error_response(500, "api_error"), "the Anthropic API had an internal error (500)"),
        (raises(httpx2.ReadTimeout), "timed out after 60 s"),
        (raises(httpx2.ConnectError), "cannot reach the Anthropic API"),
    ],
)
def test_api_errors_end_the_session_clearly_and_commit_nothing(config_repo, tmp_path, failure, words):
    folder = config_repo.published_path("supply-chain-weekly")
    wh = Warehouse(tmp_path / "cache")
    assert refresh(folder, wh, user=OPERATOR).ok
    heads = {h.name: h.commit.hexsha for h in config_repo.repo.heads}
    files = load(folder)
    # One good step that writes a draft, then the failure: the draft must not be saved either.
    api = FakeAPI([reply(tool_use_block("t1", "write_dashboard", {"yaml": as_yaml(files["dashboard"])})), failure])
    outcome = run_session(files, wh.tables(), current_id(wh), "edit", "Tidy up", api.client(), user=SAM, slug="supply-chain-weekly", model=MODEL)
    assert outcome.stopped_reason == "model_error" and words in outcome.error
    assert outcome.steps == 1
    assert apply_outcome(files, outcome, []) == {}
    assert {h.name: h.commit.hexsha for h in config_repo.repo.heads} == heads
    assert not config_repo.repo.is_dirty(untracked_files=True)


def test_malformed_tool_input_goes_back_as_an_error_and_the_corrected_call_succeeds(superstore):
    repo, folder, wh = superstore
    api = FakeAPI(
        [
            reply(tool_use_block("t1", "write_dashboard", {"yaml": "title: [unclosed\ncomponents: {"})),
            reply(tool_use_block("t2", "run_sql", {"query": "SELECT 1"})),
            reply(tool_use_block("t3", "write_dashboard", {"yaml": as_yaml(SALES_SPEC)})),
            reply(text_block("Fixed.")),
        ]
    )
    outcome = session(load(folder), wh, "edit", "Build it", api.client())
    bad_yaml, missing_key, good = (tool_results(body)[0] for body in api.bodies[1:])
    assert bad_yaml["is_error"] is True and "does not parse" in bad_yaml["content"]
    assert missing_key["is_error"] is True and "invalid input for run_sql" in missing_key["content"]
    assert "'sql' is a required property" in missing_key["content"]
    assert "is_error" not in good and "All checks passed." in good["content"]
    assert outcome.error is None and outcome.passes and outcome.stopped_reason == "end_turn"


def test_the_retry_bound_stops_a_model_that_keeps_sending_garbage(superstore):
    repo, folder, wh = superstore
    garbage = [reply(tool_use_block(f"t{i}", "write_dashboard", {"yml": "title: x"})) for i in range(10)]
    scripted = ScriptedModel(garbage)
    outcome = session(load(folder), wh, "edit", "Build it", scripted, limits=Limits(max_invalid_tool_calls=3))
    assert outcome.stopped_reason == "invalid_tool_calls" and outcome.steps == 3 and len(scripted.requests) == 3
    assert outcome.error is not None and "3 malformed tool calls in a row" in outcome.error and "nothing was saved" in outcome.error
    assert outcome.draft_dashboard is None and apply_outcome(load(folder), outcome, []) == {}


def test_limits_stop_the_session_cleanly_with_a_message(superstore):
    repo, folder, wh = superstore
    explore = [reply(tool_use_block(f"t{i}", "run_sql", {"sql": "SELECT count(*) AS n FROM data"}), u=usage(fresh=5000, out=100)) for i in range(10)]
    outcome = session(load(folder), wh, "edit", "Explore", ScriptedModel(explore), limits=Limits(max_steps=2))
    assert outcome.stopped_reason == "step_limit" and outcome.steps == 2 and outcome.notice is not None and "2 model calls" in outcome.notice
    assert outcome.error is None
    outcome = session(load(folder), wh, "edit", "Explore", ScriptedModel(explore), limits=Limits(max_tokens=10_000))
    assert outcome.stopped_reason == "token_limit" and outcome.steps == 2 and outcome.notice is not None and "10,200 tokens" in outcome.notice
    outcome = session(load(folder), wh, "edit", "Explore", ScriptedModel(explore), limits=Limits(max_seconds=0))
    assert outcome.stopped_reason == "time_limit" and outcome.steps == 0


def test_streamed_text_reaches_on_event_through_the_sdk(superstore):
    repo, folder, wh = superstore
    api = FakeAPI([reply(text_block("Sales are highest in APAC."))])
    events: list[tuple[str, dict]] = []
    outcome = session(load(folder), wh, "query", "Where are sales highest?", api.client(), on_event=lambda kind, payload: events.append((kind, payload)))
    assert api.bodies[0]["stream"] is True
    assert "".join(p["text"] for k, p in events if k == "text") == "Sales are highest in APAC."
    assert ("usage", {**usage(50, 20), "calls": 1}) in events
    assert outcome.answer == "Sales are highest in APAC."


# --------------------------------------------------------------------------- issue #32: failures keep the draft, follow-ups, waits


def test_a_stream_broken_mid_reply_after_a_good_draft_ends_plainly_keeps_the_draft_and_counts_the_steps_done(superstore):
    repo, folder, wh = superstore
    api = FakeAPI(
        [
            reply(text_block("Writing the dashboard."), tool_use_block("t1", "write_dashboard", {"yaml": as_yaml(SALES_SPEC)}), u=usage(900, 700, 0, 3100)),
            broken_stream(reply(text_block("I built KPIs for sales and profit."), u=usage(150, 40, 3500))),
        ]
    )
    files = load(folder)
    events: list[tuple[str, dict]] = []
    outcome = session(files, wh, "edit", "Build a sales dashboard", api.client(max_retries=2), on_event=lambda k, p: events.append((k, p)))

    assert outcome.stopped_reason == "model_error" and len(api.requests) == 2  # the broken reply is not sent again
    assert outcome.error is not None and "broke in the middle of its reply" in outcome.error and "Traceback" not in outcome.error
    assert outcome.steps == 1 and outcome.usage == {**usage(900, 700, 0, 3100), "calls": 1}  # the completed step's tokens
    assert outcome.texts == ["Writing the dashboard.", "I built KPIs for sales and profit."] and outcome.partial
    assert outcome.reply.startswith("Writing the dashboard.\n\nI built KPIs for sales and profit. …") and "partial reply" in outcome.reply
    assert [p["step"] for k, p in events if k == "step"] == [1, 2]
    # What the session made before the break is a proposal that passes its checks, and saving it saves it.
    assert outcome.passes and outcome.has_changes
    to_save = apply_outcome(files, outcome, [])
    assert to_save == {"dashboard": SALES_SPEC}
    repo.save(ALICE, SLUG, to_save, "Dashboard from a chat session that broke off")
    saved = workspace.load(folder)[0]
    assert saved.data["dashboard"] == SALES_SPEC and checks.run(saved, wh.tables(), current_id(wh)) == []


def test_529_three_times_after_a_good_draft_says_overloaded_once_with_the_attempts_and_the_draft_can_be_saved(superstore):
    repo, folder, wh = superstore
    api = FakeAPI([reply(tool_use_block("t1", "write_dashboard", {"yaml": as_yaml(SALES_SPEC)}))] + [error_response(529, "overloaded_error")] * 3)
    files = load(folder)
    events: list[tuple[str, dict]] = []
    outcome = session(files, wh, "edit", "Build a sales dashboard", api.client(max_retries=2), on_event=lambda k, p: events.append((k, p)))
    assert len(api.requests) == 4 and outcome.steps == 1
    assert outcome.error is not None and outcome.error.startswith("the Anthropic API is overloaded (529) after 3 attempts"), outcome.error
    waits = [p for k, p in events if k == "wait"]
    assert waits and all(p["reason"] == "overloaded" and p["text"] == f"waiting for the API (overloaded), {p['seconds']} s" for p in waits)
    assert outcome.passes and apply_outcome(files, outcome, []) == {"dashboard": SALES_SPEC}
    assert repo.save(ALICE, SLUG, apply_outcome(files, outcome, []), "Saved after a 529")
    assert workspace.load(folder)[0].data["dashboard"] == SALES_SPEC


def test_retry_after_600_ends_the_session_at_once_with_a_plain_message_and_never_past_its_time_limit(superstore, monkeypatch):
    repo, folder, wh = superstore
    files = load(folder)
    for cap, words in (("30", "asks to wait 10 minutes"), ("900", "would pass the session's time limit")):
        monkeypatch.setenv("DASHMEM_CHAT_MAX_WAIT_S", cap)
        api = FakeAPI([error_response(429, "rate_limit_error", {"retry-after": "600"}), reply(text_block("never reached"))])
        started = time.monotonic()
        outcome = session(files, wh, "edit", "Build it", api.client(max_retries=2))
        assert time.monotonic() - started < 10 and len(api.requests) == 1
        assert outcome.stopped_reason == "model_error" and outcome.error is not None and words in outcome.error, outcome.error
        assert outcome.steps == 0 and not outcome.has_changes


def test_a_follow_up_before_saving_builds_on_the_pending_change_and_the_outcome_holds_both(superstore):
    """ "Add a trend", then "now retitle it" and "and write a report" before saving: each composes from the pending
    change, not from the saved draft, and the last outcome saves all three changes together."""
    repo, folder, wh = superstore
    repo.save(ALICE, SLUG, {"dashboard": SALES_SPEC}, "The saved dashboard")
    saved_files = load(folder)
    first = FakeAPI(
        [
            reply(
                tool_use_block("t1", "write_dashboard", {"yaml": as_yaml(WITH_TREND)}),
                tool_use_block("t2", "propose_rule", {"id": "monthly", "text": "Show trends by month."}),
            ),
            reply(text_block("Added a monthly trend.")),
        ]
    )
    pending = session(saved_files, wh, "edit", "Add a trend", first.client())
    assert "+  - id: trend" in pending.dashboard_diff

    retitled = {**WITH_TREND, "title": "Superstore sales, with the trend"}
    second = FakeAPI([reply(tool_use_block("t3", "write_dashboard", {"yaml": as_yaml(retitled)})), reply(text_block("Retitled."))])
    follow = session(saved_files, wh, "edit", "Now retitle it", second.client(), carried=pending.carried())
    shown = second.bodies[0]["messages"][0]["content"]
    assert shown[1]["text"].startswith("# Current dashboard (dashboard.yaml)") and "id: trend" in shown[1]["text"]  # the pending change
    assert shown[-1]["text"] == "Now retitle it"
    assert "The draft is unchanged" not in tool_results(second.bodies[1])[0]["content"]
    assert "-title: Superstore sales\n" in follow.dashboard_diff and "+  - id: trend" in follow.dashboard_diff  # against the saved draft
    assert [r["id"] for r in follow.proposed_rules] == ["monthly"]  # the pending proposal's rule is still offered

    third = FakeAPI([reply(tool_use_block("t4", "write_report", {"yaml": as_yaml(SALES_REPORT, "report")})), reply(text_block("Wrote a report."))])
    last = session(saved_files, wh, "edit", "And write a report", third.client(), carried=follow.carried())
    assert last.draft_dashboard == retitled and last.check_diagnostics == []  # carried untouched, checked again
    assert last.draft_report == SALES_REPORT and last.passes
    repo.save(ALICE, SLUG, apply_outcome(saved_files, last, ["monthly"]), "Three changes from one chat")
    saved = workspace.load(folder)[0].data
    assert saved["dashboard"] == retitled and saved["report"] == SALES_REPORT
    assert [r["id"] for r in saved["task"]["rules"]][-1] == "monthly"


def test_a_follow_up_that_fails_at_once_still_offers_the_pending_change(superstore):
    repo, folder, wh = superstore
    files = load(folder)
    pending = session(
        files,
        wh,
        "edit",
        "Build it",
        FakeAPI([reply(tool_use_block("t1", "write_dashboard", {"yaml": as_yaml(SALES_SPEC)})), reply(text_block("Done."))]).client(),
    )
    failed = session(files, wh, "edit", "Now make it blue", FakeAPI([error_response(529, "overloaded_error")]).client(), carried=pending.carried())
    assert failed.error is not None and failed.steps == 0
    assert failed.has_changes and apply_outcome(files, failed, []) == {"dashboard": SALES_SPEC}  # the first change is not lost


def test_a_query_follow_up_carries_this_chats_previous_question_and_answer_only(superstore):
    repo, folder, wh = superstore
    files = load(folder)
    first = FakeAPI([reply(text_block("Sales are highest in APAC."))])
    answered = session(files, wh, "query", "Where are sales highest?", first.client())
    second = FakeAPI([reply(text_block("APAC has 12 countries in the sample."))])
    carried = agent.Carried(question="Where are sales highest?", answer=answered.answer)
    session(files, wh, "query", "How many countries does it have?", second.client(), carried=carried)
    turns = second.bodies[0]["messages"]
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert turns[0]["content"][0]["text"].startswith("# Data profile") and turns[0]["content"][-1]["text"] == "Where are sales highest?"
    assert turns[1]["content"] == [{"type": "text", "text": "Sales are highest in APAC."}]
    assert turns[2]["content"] == [{"type": "text", "text": "How many countries does it have?"}]
    # A new chat (nothing carried) starts from the workspace alone.
    third = FakeAPI([reply(text_block("ok"))])
    session(files, wh, "query", "How many countries does it have?", third.client())
    assert len(third.bodies[0]["messages"]) == 1 and "Sales are highest in APAC" not in json.dumps(third.bodies[0])


@pytest.mark.parametrize("stop, note", [("max_tokens", "cut off at the output limit"), ("refusal", "the model declined to go on")])
def test_steps_texts_are_separated_and_a_reply_cut_short_is_marked_partial(superstore, stop, note):
    repo, folder, wh = superstore
    api = FakeAPI(
        [
            reply(text_block("Counting the rows first."), tool_use_block("t1", "run_sql", {"sql": "SELECT count(*) AS n FROM data"})),
            message(text_block("The data has 1,000 rows, and the largest"), stop_reason=stop, usage=usage(50, 20), model=MODEL),
        ]
    )
    outcome = session(load(folder), wh, "query", "How big is the data?", api.client())
    assert outcome.stopped_reason == stop and outcome.partial and outcome.notice
    assert outcome.reply == f"Counting the rows first.\n\nThe data has 1,000 rows, and the largest …\n\n*(partial reply: {note})*"
    whole = session(load(folder), wh, "query", "How big?", FakeAPI([reply(text_block("1,000 rows."))]).client())
    assert whole.reply == "1,000 rows." and not whole.partial


# --------------------------------------------------------------------------- roles and modes


def test_a_viewer_can_query_but_not_edit_and_query_mode_saves_nothing(config_repo, tmp_path):
    folder = config_repo.published_path("supply-chain-weekly")
    wh = Warehouse(tmp_path / "cache")
    assert refresh(folder, wh, user=OPERATOR).ok
    files = load(folder)
    with pytest.raises(PermissionDenied, match="vera"):
        run_session(files, wh.tables(), current_id(wh), "edit", "Change it", ScriptedModel([]), user=VERA, slug="supply-chain-weekly")
    scripted = ScriptedModel(
        [
            reply(tool_use_block("t1", "run_sql", {"sql": "SELECT site, sum(actual) / sum(target) AS attainment FROM gates GROUP BY 1 ORDER BY 2 LIMIT 1"})),
            reply(tool_use_block("t2", "write_dashboard", {"yaml": as_yaml(files["dashboard"])})),
            reply(tool_use_block("t3", "propose_rule", {"id": "x", "text": "y"})),
            reply(text_block("The weakest site is shown above.")),
        ]
    )
    outcome = run_session(files, wh.tables(), current_id(wh), "query", "Which site is weakest?", scripted, user=VERA, slug="supply-chain-weekly", model=MODEL)
    assert [t["name"] for t in scripted.requests[0]["tools"]] == ["run_sql"]
    sql, write, propose = (tool_results(r)[0] for r in scripted.requests[1:])
    assert "attainment" in sql["content"] and "(1 row)" in sql["content"] and "is_error" not in sql
    assert write["is_error"] is True and "write_dashboard is not available in query mode" in write["content"]
    assert propose["is_error"] is True and "not available in query mode" in propose["content"]
    assert outcome.error is None and outcome.draft_dashboard is None and outcome.proposed_rules == []
    assert not outcome.has_changes and apply_outcome(files, outcome, []) == {}


def test_run_sql_and_the_checks_find_a_live_sqlite_file_named_relative_to_the_workspace(tmp_path):
    """`sqlite:///local.db` is in the workspace folder, not the server's working directory, in chat as in render."""
    import shutil
    import sqlite3

    from ..conftest import ROOT, WORKSPACES

    folder = tmp_path / "ws"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", folder)
    with sqlite3.connect(folder / "local.db") as connection:
        connection.execute("CREATE TABLE orders (region TEXT, sales INTEGER)")
        connection.executemany("INSERT INTO orders VALUES (?, ?)", [("north", 1200), ("south", 3400)])
    files = load(folder)
    files["sources"] = {"sources": [{"name": "orders", "type": "sql", "url": "sqlite:///local.db", "table": "orders", "mode": "live", "cache_ttl_s": 0}]}
    # A live table is an empty stand-in with the catalogue's columns; the rows stay in local.db.
    tables = {"orders": pa.table({"region": pa.array([], pa.string()), "sales": pa.array([], pa.int64())})}
    spec = {
        "title": "Orders",
        "components": [{"id": "total", "type": "kpi", "title": "Total sales", "query": "SELECT sum(sales) AS value FROM orders", "format": ",.0f"}],
        "layout": [["total"]],
    }
    scripted = ScriptedModel(
        [
            reply(tool_use_block("t1", "run_sql", {"sql": "SELECT sum(sales) AS total FROM orders"})),
            reply(tool_use_block("t2", "write_dashboard", {"yaml": as_yaml(spec)})),
            reply(text_block("Done.")),
        ]
    )
    assert not (ROOT / "local.db").exists()  # the working directory holds no such file: only the workspace's counts
    outcome = run_session(files, tables, "v1", "edit", "Total sales", scripted, user=SAM, slug="supply-chain-weekly", model=MODEL, workspace_path=folder)
    sql, write = (tool_results(r)[0] for r in scripted.requests[1:])
    assert "is_error" not in sql and "4600" in sql["content"], sql["content"]
    assert write.get("is_error") is not True and "All checks passed" in write["content"], write["content"]
    assert outcome.passes and outcome.error is None


def test_proposed_rules_are_collected_and_only_accepted_ones_are_saved(superstore):
    repo, folder, wh = superstore
    scripted = ScriptedModel(
        [
            reply(tool_use_block("t1", "propose_rule", {"id": "Bad Id", "text": "x"})),
            reply(
                tool_use_block("t2", "propose_rule", {"id": "profit-red", "text": "Negative profit is shown red.", "tags": ["colour"]}),
                tool_use_block("t3", "propose_rule", {"id": "sales-no-decimals", "text": "Sales have no decimals.", "tags": ["format"]}),
            ),
            reply(text_block("Proposed two rules.")),
        ]
    )
    files = load(folder)
    outcome = session(files, wh, "edit", "Loss is red; no decimals on sales", scripted, today="2026-11-30")
    assert tool_results(scripted.requests[1])[0]["is_error"] is True
    assert [r["id"] for r in outcome.proposed_rules] == ["profit-red", "sales-no-decimals"]
    assert outcome.proposed_rules[0] == {
        "id": "profit-red",
        "text": "Negative profit is shown red.",
        "tags": ["colour"],
        "author": "alice",
        "created": "2026-11-30",
    }
    assert workspace.load(folder)[0].data["task"]["rules"] == []  # proposals are never written by the session
    to_save = apply_outcome(files, outcome, ["profit-red"])
    assert list(to_save) == ["task"] and [r["id"] for r in to_save["task"]["rules"]] == ["profit-red"]
    repo.save(ALICE, SLUG, to_save, "Accept a proposed rule")
    assert [r["id"] for r in workspace.load(folder)[0].data["task"]["rules"]] == ["profit-red"]
    with pytest.raises(KeyError, match="no proposed rule"):
        apply_outcome(files, outcome, ["made-up"])


def test_a_regenerated_dashboard_is_saved_with_the_new_datas_profile_and_nothing_else_is():
    new_profile = {"tables": [{"name": "gates", "rows": 3, "columns": []}]}
    files = {"dashboard": {"title": "old"}, "task": {"rules": []}, "profile": new_profile}
    drafted = Outcome(mode="edit", draft_dashboard={"title": "new"}, dashboard_diff="-old\n+new", proposed_rules=[{"id": "r1", "text": "a rule"}])
    saved = files_to_save(files, drafted, [], regenerated=True)
    assert saved == {"dashboard": {"title": "new"}, "profile": new_profile} and saved["profile"] is not new_profile
    assert files_to_save(files, drafted, []) == {"dashboard": {"title": "new"}}  # an ordinary session keeps the profile
    rules_only = Outcome(mode="edit", proposed_rules=[{"id": "r1", "text": "a rule"}])
    assert list(files_to_save(files, rules_only, ["r1"], regenerated=True)) == ["task"]  # no dashboard: no new profile
    failed = Outcome(mode="edit", draft_dashboard={"title": "new"}, dashboard_diff="-old\n+new", error="the model stopped")
    # A session that failed after drafting offers its draft (issue #32: a Save that saved nothing), with the profile.
    assert files_to_save(files, failed, [], regenerated=True) == {"dashboard": {"title": "new"}, "profile": new_profile}
    with pytest.raises(ValueError, match="new data's profile"):
        files_to_save({**files, "profile": None}, drafted, [], regenerated=True)


# --------------------------------------------------------------------------- selective forgetting


def test_nothing_of_a_session_is_persisted_anywhere(superstore, tmp_path, caplog):
    """The message's phrase and a tool result's phrase are nowhere after save and publish: files, git objects, logs."""
    caplog.set_level(logging.DEBUG)
    repo, folder, wh = superstore
    said, seen = "ZEBRA-PLUM-4471", "QUOKKA-9931"
    api = FakeAPI(
        [
            reply(tool_use_block("t1", "run_sql", {"sql": f"SELECT '{seen}' AS marker FROM data LIMIT 1"})),
            reply(
                text_block("Noted the marker."),
                tool_use_block("t2", "write_dashboard", {"yaml": as_yaml(SALES_SPEC)}),
                tool_use_block("t3", "propose_rule", {"id": "sales-first", "text": "Sales come before profit."}),
            ),
            reply(text_block("Done: a sales dashboard.")),
        ]
    )
    files = load(folder)
    outcome = session(files, wh, "edit", f"Build a sales dashboard. Codeword {said}.", api.client())
    assert said in json.dumps(api.bodies[0]) and seen in json.dumps(api.bodies[1])  # the model did see both
    assert outcome.passes and outcome.draft_dashboard is not None
    for phrase in (said, seen):
        assert phrase not in as_yaml(outcome.draft_dashboard) and phrase not in json.dumps(outcome.proposed_rules)

    repo.save(ALICE, SLUG, apply_outcome(files, outcome, ["sales-first"]), "Dashboard from a chat session")
    publish.publish(repo, ALICE, SLUG)
    assert workspace.load(repo.published_path(SLUG))[0].data["dashboard"] == SALES_SPEC

    kept = "Sales come before profit."  # the accepted rule: persisted, so the search below must find it
    assert {"git grep over all refs", "git log -p --all", "git objects"} <= set(persisted_in(tmp_path, repo.path, kept))
    for phrase in (said, seen):
        assert persisted_in(tmp_path, repo.path, phrase) == []
        assert phrase not in caplog.text
    assert (tmp_path / "cache").is_dir() and any((tmp_path / "cache").rglob("*.snapshot"))


def persisted_in(root: Path, repo_path: Path, phrase: str) -> list[str]:
    """Every place under `root` (config repo, drafts, remote, cache) and in the repo's git objects holding `phrase`."""
    needle, hits = phrase.encode(), []
    for path in root.rglob("*"):
        if not path.is_file():
            continue
        data = path.read_bytes()
        if "objects" in path.parts and len(path.parent.name) == 2:  # a loose git object: zlib-compressed
            data += zlib.decompress(data)
        if needle in data:
            hits.append(str(path))
    git = lambda *args: subprocess.run(["git", *args], cwd=repo_path, capture_output=True, check=False).stdout  # noqa: E731
    if needle in git("cat-file", "--batch-all-objects", "--batch"):  # packed and unreachable objects too
        hits.append("git objects")
    refs = git("for-each-ref", "--format=%(refname)").decode().split()
    if git("grep", "-F", phrase, *refs):
        hits.append("git grep over all refs")
    if needle in git("log", "-p", "--all"):
        hits.append("git log -p --all")
    return hits


# --------------------------------------------------------------------------- regenerate, cost


def test_regenerate_message_names_missing_and_changed_columns_and_renames(tmp_path, monkeypatch):
    folder = tmp_path / "sales"
    workspace.save(folder, workspace.blank("Sales", "alice", "2026-11-30"))
    (folder / "sales.csv").write_text("region,amount,units\nNorth,10.5,1\nSouth,20.25,2\n", encoding="utf-8")
    workspace.save(
        folder,
        {
            "sources": {"sources": [{"name": "sales", "type": "csv", "path": "sales.csv"}]},
            "dashboard": {
                "title": "Sales",
                "components": [{"id": "total", "type": "kpi", "title": "Total", "query": "SELECT sum(amount) AS value FROM sales"}],
            },
        },
    )
    wh = Warehouse(tmp_path / "cache")
    assert refresh(folder, wh, user=OPERATOR).ok
    (folder / "sales.csv").write_text("region,amount_eur,units\nNorth,10.5,one\nSouth,20.25,two\n", encoding="utf-8")
    report = refresh(folder, wh, user=OPERATOR)
    assert not report.ok and report.incompatible
    text = regenerate_message(report)
    assert "column 'amount' is missing; probably renamed to 'amount_eur'" in text
    assert "column 'units' changed type from BIGINT to VARCHAR" in text
    assert "dashboard: component total" in text

    hand_made = RefreshReport(workspace="x", sources=[SourceReport(name="t", type="csv", status="failed", message="file not found")])
    assert "could not be loaded (file not found)" in regenerate_message(hand_made)
    assert "report.yaml" not in text
    assert "The workspace's report.yaml reads the same tables: update its queries the same way with write_report" in regenerate_message(report, has_report=True)


def test_regenerate_message_for_new_data_that_breaks_only_the_report_asks_for_the_report(tmp_path):
    import shutil

    from ..conftest import WORKSPACES

    folder = tmp_path / "supply-chain-weekly"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", folder)
    _with_region_column(folder)
    wh = Warehouse(tmp_path / "cache")
    assert refresh(folder, wh, user=OPERATOR).ok
    shutil.copy(folder / "data" / "next_week" / "gates.csv", folder / "data" / "gates.csv")  # no region column
    loaded = refresh(folder, wh, user=OPERATOR)
    assert loaded.ok and loaded.swapped and loaded.report_warnings
    text = regenerate_message(loaded, has_report=True)
    assert text.startswith("The data changed shape, and the report no longer fits it. Update report.yaml with write_report")
    assert "dashboard no longer fits" not in text and "no column changes were reported" not in text
    assert '- report: query regions no longer fits the new data: it reads column "region"' in text


def test_estimate_cost_uses_the_price_table():
    spent = {"input_tokens": 1_000_000, "output_tokens": 100_000, "cache_read_input_tokens": 2_000_000, "cache_creation_input_tokens": 400_000, "calls": 4}
    assert estimate_cost(spent, "claude-sonnet-4-5") == pytest.approx(3.00 + 1.50 + 0.60 + 1.50)
    assert estimate_cost(spent, "claude-haiku-4-5-20251001") == pytest.approx(1.00 + 0.50 + 0.20 + 0.50)
    assert estimate_cost(spent, "claude-opus-4-5") == pytest.approx(5.00 + 2.50 + 1.00 + 2.50)
    assert estimate_cost(spent, "claude-sonnet-5-5") == pytest.approx(2.00 + 1.00 + 0.40 + 1.00)
    assert estimate_cost(spent, "some-future-model") == estimate_cost(spent, "claude-sonnet-4-5")
    assert agent.PRICES_AS_OF == "2026-11-30"


def test_a_session_holds_the_profile_to_the_workspace_budget_and_names_unconfirmed_rules_as_of_its_day(config_repo, tmp_path):
    """What the Chat page runs: no budget passed, so the workspace policy's applies; `today` decides which rules are stale."""
    folder = config_repo.published_path("supply-chain-weekly")
    wh = Warehouse(tmp_path / "cache")
    assert refresh(folder, wh, user=OPERATOR).ok
    files = load(folder)
    files["workspace"] = {**files["workspace"], "policy": {**files["workspace"]["policy"], "profile_budget": 60}}
    scripted = ScriptedModel([reply(text_block("ok"))])
    run_session(files, wh.tables(), current_id(wh), "query", "Which site?", scripted, user=VERA, slug="supply-chain-weekly", model=MODEL, today="2027-02-05")
    request = scripted.requests[0]
    assert "Unconfirmed rules" in request["system"][1]["text"] and "gate-colors-orders, gate-colors-process" in request["system"][1]["text"]
    from lib.core import tokens

    assert tokens.estimate(request["messages"][0]["content"][0]["text"]) <= 60
