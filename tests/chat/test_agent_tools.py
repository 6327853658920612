"""The model's tools (lib/chat/agent_tools.py), called directly as a session calls them: schemas, malformed calls,
write_dashboard's feedback, propose_rule, and the text table run_sql answers with. Sessions that drive these
tools through a model are in tests/chat/test_agent.py."""

from __future__ import annotations

import copy
import datetime as dt
import json
import shutil

import pyarrow as pa
import pytest

from lib.chat import agent_tools, toolbox
from lib.chat.toolbox import Toolbox, change_summary, text_table
from lib.data.refresh import refresh
from lib.data.snapshots import Warehouse
from lib.memory import workspace
from lib.roles.access import OPERATOR
from tests.helpers import current_id

from ..conftest import ROOT, WORKSPACES

SCHEMAS = ROOT / "schemas"


@pytest.fixture
def files():
    ws, diags = workspace.load(WORKSPACES / "gdp-explorer")
    assert diags == []
    return copy.deepcopy(ws.data)


def box(files, mode="edit", tables=None) -> Toolbox:
    return Toolbox(files=files, tables=tables, version="v1", mode=mode, author="sam", today="2026-11-30")


# --------------------------------------------------------------------------- the schemas


def test_query_mode_offers_only_run_sql_and_edit_mode_all_four():
    assert [t["name"] for t in agent_tools.tool_schemas("query")] == ["run_sql"]
    assert [t["name"] for t in agent_tools.tool_schemas("edit")] == ["run_sql", "write_dashboard", "write_report", "propose_rule"]
    assert set(agent_tools.ARTIFACT_TOOLS.values()) <= set(workspace.FILES)  # each writes a workspace file kind


def test_tool_schemas_are_copies_a_caller_cannot_corrupt():
    agent_tools.tool_schemas("edit")[0]["input_schema"]["properties"].clear()
    assert "sql" in agent_tools.tool_schemas("edit")[0]["input_schema"]["properties"]


def test_the_proposal_schema_repeats_the_task_schemas_rule_shape_exactly():
    """Decision 12: facts of the JSON Schemas re-typed in Python are tested to match."""
    rule = json.loads((SCHEMAS / "task.schema.json").read_text())["$defs"]["rule"]["properties"]
    proposal = agent_tools.PROPOSE_RULE["input_schema"]["properties"]
    assert proposal["id"]["pattern"] == rule["id"]["pattern"]
    assert (proposal["text"]["minLength"], proposal["text"]["maxLength"]) == (rule["text"]["minLength"], rule["text"]["maxLength"])
    assert proposal["tags"]["items"]["pattern"] == rule["tags"]["items"]["pattern"]
    assert proposal["tags"]["uniqueItems"] == rule["tags"]["uniqueItems"]


def test_the_schemas_name_no_table_or_column_so_the_prompt_cache_survives_new_data(files):
    text = json.dumps(agent_tools.tool_schemas("edit"))
    columns = {c["name"] for t in files["profile"]["tables"] for c in t["columns"]}
    tables = {t["name"] for t in files["profile"]["tables"]}
    assert not [name for name in columns | tables if f'"{name}"' in text or f" {name} " in text]


# --------------------------------------------------------------------------- malformed calls


@pytest.mark.parametrize(
    "name,tool_input,says",
    [
        ("drop_table", {}, "there is no tool named 'drop_table'"),
        ("run_sql", "SELECT 1", "expected an object"),
        ("run_sql", {}, "'sql' is a required property"),
        ("run_sql", {"sql": 1}, "sql: 1 is not of type 'string'"),
        ("run_sql", {"sql": "SELECT 1", "limit": 5}, "Additional properties are not allowed"),
        ("propose_rule", {"id": "Not Kebab", "text": "x"}, "id: 'Not Kebab' does not match"),
    ],
)
def test_a_call_that_does_not_fit_its_tool_is_a_malformed_error_saying_why(files, name, tool_input, says):
    result = box(files).execute(name, tool_input)
    assert result.is_error and result.malformed
    assert says in result.content


def test_a_tool_of_the_other_mode_is_refused_as_unavailable_not_unknown(files):
    result = box(files, mode="query").execute("write_dashboard", {"yaml": "title: x"})
    assert result.malformed and result.content.startswith("write_dashboard is not available in query mode")
    assert "the tools here are: run_sql." in result.content


def test_run_sql_without_data_is_feedback_not_a_malformed_call(files):
    result = box(files).execute("run_sql", {"sql": "SELECT 1"})
    assert result.is_error and not result.malformed
    assert "connect a source and refresh" in result.content


# --------------------------------------------------------------------------- write_dashboard


@pytest.mark.parametrize(
    "text,says",
    [
        ("title: [unclosed\n", "the YAML does not parse"),
        ("a: &x 1\nb: *x\n", "anchors and aliases"),
        ("- just\n- a list\n", "not a mapping"),
        ("x" * (toolbox.YAML_MAX_CHARS + 1), "limit 200,000"),
    ],
)
def test_yaml_that_cannot_be_a_spec_changes_nothing(files, text, says):
    tools = box(files)
    result = tools.execute("write_dashboard", {"yaml": text})
    assert result.is_error and result.malformed and says in result.content
    assert "Nothing changed" in result.content and tools.draft is None


def test_writing_the_current_dashboard_again_is_unchanged_and_a_change_is_a_diff(files):
    tools = box(files)
    same = tools.execute("write_dashboard", {"yaml": workspace.render("dashboard", files["dashboard"])})
    assert same.content.startswith("The draft is unchanged.")
    changed = dict(files["dashboard"], title="A new title")
    result = tools.execute("write_dashboard", {"yaml": workspace.render("dashboard", changed)})
    assert "```diff" in result.content and "+title: A new title" in result.content
    assert tools.draft is not None and tools.draft["title"] == "A new title"


def test_an_invalid_spec_is_kept_as_the_draft_with_its_problems_by_field(files):
    tools = box(files)
    broken = dict(files["dashboard"], components=[{"id": "k", "type": "pie", "query": "SELECT 1"}])
    result = tools.execute("write_dashboard", {"yaml": workspace.render("dashboard", broken)})
    assert result.is_error and not result.malformed  # failed checks are feedback, not a malformed call
    assert "check(s) failed" in result.content and "- error [" in result.content and "components[0]" in result.content
    assert tools.draft == broken and any(d.level == "error" for d in tools.diagnostics)


def test_change_summary_for_a_new_spec_counts_its_lines():
    assert change_summary("", "a: 1\nb: 2\n") == "Created the draft dashboard.yaml (2 lines)."
    assert change_summary("", "a: 1\n", "report.yaml") == "Created the draft report.yaml (1 lines)."
    assert change_summary("a: 1\n", "a: 1\n") == "The draft is unchanged."


# --------------------------------------------------------------------------- write_report


@pytest.fixture(scope="module")
def supply(tmp_path_factory):
    """supply-chain-weekly's files and its loaded data (it ships a report.yaml)."""
    folder = tmp_path_factory.mktemp("supply") / "supply-chain-weekly"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", folder)
    wh = Warehouse(folder.parent / "cache")
    assert refresh(folder, wh, user=OPERATOR).ok
    ws, diags = workspace.load(folder)
    assert diags == []
    return ws.data, wh.tables(), current_id(wh)


def supply_box(supply) -> Toolbox:
    files, tables, version = supply
    return Toolbox(files=copy.deepcopy(files), tables=tables, version=version, mode="edit", author="sam", today="2026-11-30")


def test_writing_the_current_report_again_passes_and_a_change_is_a_diff_of_report_yaml(supply):
    tools = supply_box(supply)
    files = supply[0]
    same = tools.execute("write_report", {"yaml": workspace.render("report", files["report"])})
    assert not same.is_error, same.content
    assert same.content.startswith("The draft is unchanged.\nAll checks passed")
    changed = copy.deepcopy(files["report"])
    changed["sections"][0]["text"] = "This week"
    result = tools.execute("write_report", {"yaml": workspace.render("report", changed)})
    assert not result.is_error and "Updated the draft report.yaml" in result.content
    assert "-  - {type: heading, text: Overview, level: 1}\n+  - {type: heading, text: This week, level: 1}" in result.content
    assert tools.drafts["report"] == changed and tools.draft is None  # the dashboard draft is untouched


def test_a_broken_report_is_kept_with_its_problems_by_id_and_field(supply):
    tools = supply_box(supply)
    broken = copy.deepcopy(supply[0]["report"])
    broken["sections"].append({"type": "prose", "markdown": "Units: {{week.unitz|,.0f}}, and {{nowhere.x}}."})
    broken["sections"].append({"type": "heading", "text": "Too deep", "level": 4})
    result = tools.execute("write_report", {"yaml": workspace.render("report", broken)})
    assert result.is_error and not result.malformed
    assert "check(s) failed" in result.content and "- error [check.schema] sections[" in result.content
    assert tools.drafts["report"] == broken and any(d.file == "report.yaml" for d in tools.found["report"])
    broken["sections"].pop()  # the schema passes now: the placeholders are checked against the data
    result = tools.execute("write_report", {"yaml": workspace.render("report", broken)})
    assert result.is_error and "2 check(s) failed" in result.content
    assert "- error [check.placeholders] sections[11].markdown: placeholder {{nowhere.x}}" in result.content
    assert "query 'week' has no column 'unitz'; did you mean 'units'?" in result.content


@pytest.mark.parametrize(
    "text,says",
    [
        ("title: [unclosed\n", "the YAML does not parse"),
        ("- a\n- list\n", "expected title, queries, sections"),
        ("x" * (toolbox.YAML_MAX_CHARS + 1), "limit 200,000"),
    ],
)
def test_yaml_that_cannot_be_a_report_changes_nothing(files, text, says):
    tools = box(files)
    result = tools.execute("write_report", {"yaml": text})
    assert result.is_error and result.malformed and says in result.content
    assert "send the complete report.yaml again" in result.content and tools.drafts == {}


def test_write_report_is_refused_in_query_mode(files):
    result = box(files, mode="query").execute("write_report", {"yaml": "title: x"})
    assert result.malformed and result.content.startswith("write_report is not available in query mode")


# --------------------------------------------------------------------------- propose_rule


def test_a_proposal_is_recorded_with_author_and_date_never_written(files):
    tools = box(files)
    before = copy.deepcopy(files)
    result = tools.execute("propose_rule", {"id": "growth-green", "text": "Growth above 3 % is green.", "tags": ["format"]})
    assert not result.is_error and "not part of task.yaml until a person accepts it" in result.content
    assert tools.proposals == [{"id": "growth-green", "text": "Growth above 3 % is green.", "tags": ["format"], "author": "sam", "created": "2026-11-30"}]
    assert files == before


def test_a_proposal_may_not_reuse_an_id_of_the_task_or_of_an_earlier_proposal(files):
    tools = box(files)
    existing = files["task"]["rules"][0]["id"]
    assert tools.execute("propose_rule", {"id": existing, "text": "x"}).is_error
    assert not tools.execute("propose_rule", {"id": "new-one", "text": "x"}).is_error
    again = tools.execute("propose_rule", {"id": "new-one", "text": "y"})
    assert again.is_error and not again.malformed and "already exists or was proposed" in again.content
    assert [p["id"] for p in tools.proposals] == ["new-one"]


def test_today_defaults_to_the_real_date(files):
    tools = Toolbox(files=files, tables=None, version="v1", mode="edit", author="sam")
    assert tools.today == dt.date.today().isoformat()


# --------------------------------------------------------------------------- the table run_sql returns


def test_text_table_aligns_columns_and_counts_rows():
    text = text_table(["region", "n"], [("north", 12), ("south-east", None)], truncated=False)
    assert text.splitlines() == ["region     | n", "-----------+-----", "north      | 12", "south-east | NULL", "(2 rows)"]
    assert text_table(["x"], [(1.5,)], truncated=True).endswith(f"(1 row; more rows exist, only the first {agent_tools.SQL_MAX_ROWS} are shown)")


def test_text_table_cuts_long_cells_and_long_results():
    cell = text_table(["t"], [("x" * 200 + "\nnext",)], False).splitlines()[2]
    assert len(cell) == toolbox.CELL_CHARS and cell.endswith("…") and "\n" not in cell
    rows = [(i, "y" * 70) for i in range(500)]
    text = text_table(["i", "y"], rows, False)
    assert len(text) < toolbox.RESULT_CHARS + 100 and "(cut: aggregate in SQL to see less)" in text
    assert text.endswith("(500 rows)")


def test_text_table_writes_dates_as_iso_and_floats_without_noise():
    text = text_table(["d", "f"], [(dt.date(2026, 11, 30), 0.1 + 0.2)], False)
    assert "2026-11-30 | 0.3" in text


def test_run_sql_answers_with_at_most_the_row_cap(files):
    """One real sandboxed query (a worker process): rows capped, as the text table."""
    tables = {"t": pa.table({"n": list(range(200))})}
    result = box(files, tables=tables).execute("run_sql", {"sql": "SELECT n FROM t ORDER BY n"})
    assert not result.is_error
    lines = result.content.splitlines()
    assert lines[2] == "0" and lines[-2] == str(agent_tools.SQL_MAX_ROWS - 1)
    assert "more rows exist" in lines[-1]
    failed = box(files, tables=tables).execute("run_sql", {"sql": "DELETE FROM t"})
    assert failed.is_error and not failed.malformed and failed.content.startswith("the query failed:")
