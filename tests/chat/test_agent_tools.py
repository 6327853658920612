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


def test_query_mode_offers_only_run_sql_and_edit_mode_all_six():
    assert [t["name"] for t in agent_tools.tool_schemas("query")] == ["run_sql"]
    assert [t["name"] for t in agent_tools.tool_schemas("edit")] == [
        "run_sql",
        "write_dashboard",
        "edit_dashboard",
        "write_report",
        "edit_report",
        "propose_rule",
    ]
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


# --------------------------------------------------------------------------- edit_dashboard, edit_report


def edit(tools: Toolbox, kind: str = "dashboard", **tool_input):
    return tools.execute(f"edit_{kind}", tool_input)


def added(content: str) -> list[str]:
    """The lines a diff in a tool's answer adds."""
    return [line for line in content.splitlines() if line.startswith("+") and not line.startswith("+++")]


def test_a_text_edit_of_the_current_dashboard_is_checked_and_answered_exactly_as_the_whole_write_would_be(supply):
    """The same validation, checks and diagnostics path: the edit's answer is the whole write's, byte for byte."""
    files = supply[0]
    tools = supply_box(supply)
    title = files["dashboard"]["title"]
    result = edit(tools, old_string=f"title: {title}\n", new_string="title: Gates this week\n")
    assert not result.is_error, result.content
    assert "Updated the draft dashboard.yaml" in result.content and "+title: Gates this week" in result.content
    assert f"-title: {title}" in result.content and added(result.content) == ["+title: Gates this week"]  # one line changed
    assert tools.draft == {**files["dashboard"], "title": "Gates this week"}

    whole = supply_box(supply).execute("write_dashboard", {"yaml": workspace.render("dashboard", tools.draft)})
    assert result.content == whole.content

    # An edit that breaks a query gets the checks' errors back, as the whole write of that spec does.
    [query_line] = [line for line in toolbox.shown_yaml("dashboard", tools.draft).splitlines() if "FROM gates" in line][:1]
    broken = edit(tools, old_string=query_line, new_string=query_line.replace("FROM gates", "FROM gatez"))
    assert broken.is_error and not broken.malformed and "check(s) failed" in broken.content
    again = supply_box(supply)
    again.execute("write_dashboard", {"yaml": workspace.render("dashboard", {**files["dashboard"], "title": "Gates this week"})})
    assert again.execute("write_dashboard", {"yaml": workspace.render("dashboard", tools.draft)}).content == broken.content
    assert tools.diagnostics == again.diagnostics and any(d.level == "error" for d in tools.diagnostics)


@pytest.mark.parametrize(
    "old, says",
    [
        ("type: kpi\n", "old_string occurs 3 times in dashboard.yaml; include more of the lines around it"),
        ("title: No such title\n", "old_string does not occur in dashboard.yaml; copy it exactly"),
        ("-   id: kpi_world", "old_string does not occur in dashboard.yaml (it occurs with other whitespace"),
        ("", "old_string is empty"),
    ],
)
def test_an_old_string_that_occurs_no_time_or_more_than_once_changes_nothing(files, old, says):
    tools = box(files)
    result = edit(tools, old_string=old, new_string="title: x\n")
    assert result.is_error and result.malformed and says in result.content and "Nothing changed." in result.content
    assert tools.draft is None and tools.drafts == {}


def test_occurrences_count_overlapping_matches():
    assert toolbox.occurrences("aaa", "aa") == 2 and toolbox.occurrences("abc", "x") == 0 and toolbox.occurrences("a-b-a", "a") == 2


def test_a_text_edit_matches_the_yaml_the_model_wrote_and_the_canonical_text_the_diffs_show(files):
    """The model's own YAML may differ from the canonical form (quoting, key order); both are found."""
    tools = box(files)
    own = "title: 'My GDP'\ncomponents:\n  - {id: k, type: kpi, title: 'World', query: 'SELECT 1 AS value FROM gdp'}\n"
    tools.execute("write_dashboard", {"yaml": own})
    assert added(edit(tools, old_string="title: 'World'", new_string="title: 'World GDP'").content) == ["+    title: World GDP"]
    assert tools.draft is not None and tools.draft["components"][0]["title"] == "World GDP"
    # Now the text last written is the model's edited one; a line copied from the diff (canonical) is found too.
    canonical = toolbox.shown_yaml("dashboard", tools.draft)
    assert "title: My GDP\n" in canonical and "title: My GDP\n" not in own
    assert not edit(tools, old_string="title: My GDP\n", new_string="title: Our GDP\n").malformed
    assert tools.draft["title"] == "Our GDP"


def test_a_replacement_that_leaves_yaml_that_does_not_parse_changes_nothing(files):
    tools = box(files)
    result = edit(tools, old_string="title: GDP explorer\n", new_string="title: [unclosed\n")
    assert result.malformed and "after the replacement, the YAML does not parse" in result.content and tools.drafts == {}
    result = edit(tools, old_string="x" * 10, new_string="y")
    assert result.malformed


def test_a_component_replaced_by_id_and_an_unknown_id_names_the_ids(files):
    tools = box(files)
    component = {**files["dashboard"]["components"][1], "title": "World GDP (US$ bn)"}
    result = edit(tools, component=workspace.render("dashboard", component).split("\n", 1)[1])
    assert not result.malformed and "+    title: World GDP (US$ bn)" in result.content
    assert tools.draft is not None and tools.draft["components"][1] == component
    assert [c["id"] for c in tools.draft["components"]] == [c["id"] for c in files["dashboard"]["components"]]

    unknown = edit(tools, component="id: nowhere\ntype: kpi\ntitle: x\nquery: SELECT 1 AS value FROM gdp\n")
    assert unknown.malformed and "no component of dashboard.yaml has the id 'nowhere' (its ids: kpi_latest_year, kpi_world" in unknown.content
    assert "to add one, use old_string and new_string" in unknown.content and tools.draft["components"][1] == component
    for bad, says in [("- a list\n", "not a mapping with an id"), ("id: [x\n", "the component's the YAML does not parse")]:
        assert says in edit(tools, component=bad).content


@pytest.mark.parametrize(
    "tool_input, says",
    [
        ({}, "give either component, or old_string and new_string"),
        ({"component": "id: k", "old_string": "a", "new_string": "b"}, "give either component, or old_string and new_string"),
        ({"old_string": "a"}, "old_string and new_string go together"),
        ({"old_string": "a", "new_string": "a"}, "the edit changes nothing"),
        ({"old_string": 1, "new_string": "b"}, "old_string: 1 is not of type 'string'"),
    ],
)
def test_an_edit_call_that_does_not_fit_is_malformed(files, tool_input, says):
    result = box(files).execute("edit_dashboard", tool_input)
    assert result.is_error and result.malformed and says in result.content


def test_an_edit_needs_a_file_to_edit_and_is_refused_in_query_mode(files):
    without = {k: v for k, v in files.items() if k not in ("dashboard", "report")}
    result = edit(box(without), old_string="a", new_string="b")
    assert result.malformed and "there is no dashboard.yaml yet to edit; write the complete file with write_dashboard" in result.content
    assert (
        box(files, mode="query")
        .execute("edit_dashboard", {"old_string": "a", "new_string": "b"})
        .content.startswith("edit_dashboard is not available in query mode")
    )


def test_edit_report_replaces_a_kpi_of_a_kpis_section_and_a_chart_section_by_id(supply):
    files = supply[0]
    tools = supply_box(supply)
    kpi = {**files["report"]["sections"][1]["components"][1], "title": "Units shipped"}
    result = edit(tools, "report", component=json.dumps(kpi))  # JSON is YAML too
    assert not result.is_error, result.content
    assert "Updated the draft report.yaml" in result.content and "Units shipped" in result.content
    report = tools.drafts["report"]
    assert report["sections"][1]["components"][1] == kpi and tools.draft is None
    chart = {**files["report"]["sections"][4], "title": "Attainment by day"}
    assert not edit(tools, "report", component=json.dumps(chart)).is_error
    assert tools.drafts["report"]["sections"][4] == chart and tools.drafts["report"]["sections"][1]["components"][1] == kpi
    assert not [d for d in tools.found["report"] if d.level == "error"]
