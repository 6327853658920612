"""Each dashboard check passes on the demos and fails on a crafted bad spec, naming component and field."""

from __future__ import annotations

import copy
import shutil

import pytest

from lib.artifacts import checks
from lib.core.diagnostics import ERROR
from lib.data.refresh import refresh
from lib.data.snapshots import Warehouse
from lib.memory import workspace
from lib.roles.access import OPERATOR
from tests.helpers import current_id

from ..conftest import WORKSPACES


@pytest.fixture(scope="module")
def supply(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("checks")
    folder = tmp / "supply-chain-weekly"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", folder)
    wh = Warehouse(tmp / "cache")
    assert refresh(folder, wh, user=OPERATOR).ok
    ws, _ = workspace.load(folder)
    return ws, wh.tables(), current_id(wh)


def run_with(supply, mutate) -> list:
    ws, tables, version = supply
    changed = workspace.Workspace(ws.path, copy.deepcopy(ws.data), {})
    mutate(changed.data["dashboard"], changed.data)
    return [d for d in checks.run(changed, tables, version) if d.level == ERROR]


def component(dashboard, cid):
    return next(c for c in dashboard["components"] if c["id"] == cid)


def index(supply, cid) -> int:
    return [c["id"] for c in supply[0].data["dashboard"]["components"]].index(cid)


@pytest.mark.parametrize("slug", ["gdp-explorer", "supply-chain-weekly"])
def test_demo_dashboards_pass_every_check(slug, tmp_path):
    folder = tmp_path / slug
    shutil.copytree(WORKSPACES / slug, folder)
    wh = Warehouse(tmp_path / "cache")
    assert refresh(folder, wh, user=OPERATOR).ok
    ws, _ = workspace.load(folder)
    assert checks.run(ws, wh.tables(), current_id(wh)) == []


def test_schema_check(supply):
    [d] = run_with(supply, lambda dash, _: component(dash, "by_gate").update(mark="pie"))
    assert d.id == "check.schema" and d.field.endswith(".mark") and "bar" in d.allowed and d.line


def test_inline_data_check_catches_values_and_tableless_queries(supply):
    def mutate(dash, _):
        component(dash, "kpi_attainment")["query"] = "SELECT 0.97 AS value"
        component(dash, "by_gate")["query"] = "SELECT * FROM (VALUES ('Supply', 0.9)) t(gate, attainment)"

    errors = run_with(supply, mutate)
    inline = [d for d in errors if d.id == "check.inline_data"]
    assert len(inline) == 2
    assert "component 'kpi_attainment'" in inline[0].message and inline[0].field.endswith("].query")
    assert "VALUES" in inline[1].message and "component 'by_gate'" in inline[1].message


def test_queries_check(supply):
    [d] = [e for e in run_with(supply, lambda dash, _: component(dash, "by_gate").update(query="SELECT gate FROM gates GROUP BY")) if e.id == "check.queries"]
    assert "component 'by_gate'" in d.message and d.field == f"components[{index(supply, 'by_gate')}].query"


def test_queries_check_refuses_writes(supply):
    errors = run_with(supply, lambda dash, _: component(dash, "by_gate").update(query="DELETE FROM gates"))
    assert any(e.id == "check.queries" and "only SELECT" in e.message for e in errors)


def test_references_check_unknown_column_with_suggestion(supply):
    errors = run_with(supply, lambda dash, _: component(dash, "kpi_attainment").update(query="SELECT sum(Actuals) / sum(target) AS value FROM gates"))
    [d] = [e for e in errors if e.id == "check.references"]
    assert "component 'kpi_attainment'" in d.message and "unknown column 'Actuals'" in d.message and "did you mean 'actual'" in d.message


def test_references_check_unknown_table_case_insensitive_suggestion(supply):
    errors = run_with(supply, lambda dash, _: component(dash, "kpi_attainment").update(query="SELECT count(*) AS value FROM gate"))
    [d] = [e for e in errors if e.id == "check.references"]
    assert "unknown table 'gate'" in d.message and "did you mean 'gates'" in d.message


def test_references_check_encoding_field_and_type(supply):
    def mutate(dash, _):
        enc = component(dash, "by_gate")["encoding"]
        enc["x"]["field"] = "gates"
        enc["y"] = {"field": "gate", "type": "quantitative"}
        component(dash, "by_gate")["query"] = "SELECT gate, sum(actual) / sum(target) AS attainment FROM gates GROUP BY gate"

    errors = [e for e in run_with(supply, mutate) if e.id == "check.references"]
    messages = " | ".join(e.message for e in errors)
    assert "encoding.x field 'gates' is not a column of its query; did you mean 'gate'?" in messages
    assert "encoding.y field 'gate' is VARCHAR, not usable as quantitative" in messages
    i = index(supply, "by_gate")
    assert {e.field for e in errors} >= {f"components[{i}].encoding.x.field", f"components[{i}].encoding.y.field"}


def test_references_check_text_placeholder(supply):
    def mutate(dash, _):
        dash["components"].append(
            {
                "id": "note",
                "type": "text",
                "markdown": "Best: {{best.sitee}}",
                "queries": {"best": "SELECT site FROM gates GROUP BY site ORDER BY sum(actual) DESC LIMIT 1"},
            }
        )

    [d] = [e for e in run_with(supply, mutate) if e.id == "check.references"]
    assert "component 'note'" in d.message and "has no column 'sitee'" in d.message and "did you mean 'site'" in d.message


def test_literal_values_check(supply):
    ws, tables, version = supply
    from lib.data.queries import run_query

    value = run_query(tables, "SELECT sum(actual) / sum(target) FROM gates").rows[0][0]
    title = f"Attainment {value * 100:.1f}% this week"
    errors = run_with(supply, lambda dash, _: component(dash, "kpi_attainment").update(title=title))
    [d] = [e for e in errors if e.id == "check.literal_values"]
    assert "component 'kpi_attainment'" in d.message and d.field == "components[0].title" and "placeholder" in d.message


def test_literal_values_check_allows_rule_thresholds(supply):
    errors = run_with(supply, lambda dash, _: dash.update(description="Green at 95% attainment or more."))
    assert not [e for e in errors if e.id == "check.literal_values"]


def test_output_constraints_category_colour(supply):
    def mutate(dash, _):
        component(dash, "by_gate")["encoding"]["color"]["scale"]["range"] = ["#ff0000", "#ff7f0e", "#9467bd"]

    errors = [e for e in run_with(supply, mutate) if e.id == "check.output_constraints"]
    assert len(errors) == 1
    assert "component 'by_gate'" in errors[0].message and "'Supply'" in errors[0].message and "gate-colors" in errors[0].message
    assert errors[0].field == f"components[{index(supply, 'by_gate')}].encoding.color.scale"


def test_output_constraints_threshold_rule(supply):
    errors = run_with(supply, lambda dash, _: component(dash, "kpi_attainment").update(thresholds=[{"op": ">=", "value": 0.9, "color": "#2ca02c"}]))
    [d] = [e for e in errors if e.id == "check.output_constraints"]
    assert "component 'kpi_attainment'" in d.message and "attainment-green" in d.message and d.field == "components[0].thresholds"


def test_output_constraints_background(supply):
    errors = run_with(supply, lambda dash, _: dash.update(theme={"background": "#000000"}))
    [d] = [e for e in errors if e.id == "check.output_constraints"]
    assert d.field == "theme.background" and d.allowed == "#ffffff"


def test_renders_check(supply):
    errors = run_with(supply, lambda dash, _: component(dash, "kpi_attainment").update(query="SELECT 'n/a' AS label FROM gates LIMIT 1"))
    # a text value where a KPI needs a number: the references check names it, and it still renders as text
    assert any(e.id == "check.references" and "not usable as kpi" in e.message for e in errors)

    def broken_format(dash, _):
        component(dash, "kpi_attainment")["format"] = "%%%"

    errors = run_with(supply, broken_format)
    [d] = [e for e in errors if e.id == "check.renders"]
    assert "component 'kpi_attainment' does not render" in d.message and "unsupported number format" in d.message


def test_data_checks_are_skipped_without_data(supply):
    ws, _, _ = supply
    result = checks.run(ws, None)
    assert [d.id for d in result] == ["check.skipped"] and result[0].level == "warning"


def test_inline_data_check_ignores_column_and_query_names(supply):
    def mutate(dash, _):
        dash["components"].append(
            {
                "id": "links",
                "type": "table",
                "query": "SELECT site AS url, count(*) AS data FROM gates GROUP BY 1",
                "columns": {"url": {"label": "Page"}, "data": {"label": "Rows"}},
            }
        )
        dash["components"].append({"id": "note", "type": "text", "markdown": "Top: {{data.url}}", "queries": {"data": "SELECT site AS url FROM gates LIMIT 1"}})
        dash["layout"].append(["links", "note"])

    assert [e for e in run_with(supply, mutate) if e.id == "check.inline_data"] == []


def test_a_division_by_zero_renders_as_infinity_not_a_crash(supply):
    errors = run_with(supply, lambda dash, _: component(dash, "kpi_attainment").update(query="SELECT sum(actual) / 0 AS value FROM gates", format=",d"))
    assert not [e for e in errors if e.id == "check.renders"]
    from lib.core.formats import format_number

    assert format_number(float("inf"), ",d") == "∞" and format_number(float("-inf")) == "−∞" and format_number(float("nan")) == "—"


def test_validate_workspace_runs_the_checks_despite_warnings(tmp_path, monkeypatch):
    """A warning in workspace.yaml must not switch the dashboard checks off (the Review page relied on this)."""
    monkeypatch.setenv("DASHMEM_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "supply-chain-weekly"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", folder)
    meta = workspace.load(folder)[0].data["workspace"]
    workspace.save(folder, {"workspace": {**meta, "access": {**meta["access"], "owners": ["*"]}}})
    dashboard = workspace.load(folder)[0].data["dashboard"]
    dashboard["components"][0]["query"] = "SELECT no_such_column AS value FROM gates"
    workspace.save(folder, {"dashboard": dashboard})
    assert refresh(folder, Warehouse.for_workspace(folder), user=OPERATOR).dashboard_errors  # loaded, though the query fails
    found = checks.validate_workspace(folder)
    assert any(d.level != ERROR for d in found)
    assert any(d.level == ERROR and d.id.startswith("check.") and "no_such_column" in d.message for d in found)


def test_each_broken_query_is_reported_once(supply):
    """Binding catches what can be caught without running; what fails only while running shows when rendering."""
    errors = run_with(supply, lambda dash, _: component(dash, "by_gate").update(query="SELECT gate FROM gates GROUP BY"))
    assert [e.id for e in errors if "by_gate" in e.message] == ["check.queries"]
    at_run_time = "SELECT CAST(gate AS INTEGER) AS value FROM gates"  # binds; 'Supply' is no integer
    errors = run_with(supply, lambda dash, _: component(dash, "kpi_attainment").update(query=at_run_time))
    [d] = [e for e in errors if "kpi_attainment" in e.message]
    assert d.id == "check.renders" and "Supply" in d.message


def test_a_rule_check_without_its_field_is_reported_not_a_crash(supply):
    """The schema accepts a check with only kind and colour; the Review page once died on it (KeyError 'field')."""
    ws, tables, version = supply
    changed = workspace.Workspace(ws.path, copy.deepcopy(ws.data), {})
    rules = changed.data["task"]["rules"]
    rules.append({**rules[0], "id": "half-a-check", "check": {"kind": "threshold_color", "color": "#2ca02c"}})
    found = checks.run(changed, tables, version)
    [note] = [d for d in found if "half-a-check" in d.message]
    assert note.level == "warning" and "cannot be verified" in note.message and "field" in note.message and note.file == "task.yaml"
    assert not [d for d in found if d.level == ERROR]


def test_a_check_that_breaks_is_an_error_naming_it_and_the_others_still_run(supply, monkeypatch):
    def broken(ctx):
        raise RuntimeError("boom")

    broken.__name__ = "check_references"
    monkeypatch.setattr(checks, "ON_DATA", [broken if c is checks.check_references else c for c in checks.ON_DATA])
    from lib.data.queries import run_query

    value = run_query(supply[1], "SELECT sum(actual) / sum(target) FROM gates").rows[0][0]
    errors = run_with(supply, lambda dash, _: component(dash, "kpi_attainment").update(title=f"Attainment {value * 100:.1f}%"))
    assert [e.id for e in errors if e.id == "check.references"] == ["check.references"]
    [broke] = [e for e in errors if e.id == "check.references"]
    assert "could not finish" in broke.message and "RuntimeError: boom" in broke.message
    assert any(e.id == "check.literal_values" for e in errors)  # a later check still ran
