"""Reports (report.yaml): the schema, loading with the workspace, and rendering section by section."""

from __future__ import annotations

import copy
import shutil
from typing import cast

import pandas as pd
import pytest

from lib.artifacts.render import QueryCache
from lib.artifacts.report import render_report
from lib.data.refresh import refresh
from lib.data.snapshots import Warehouse
from lib.memory import schemas, workspace
from lib.memory.shapes import report_components
from lib.memory.yamlio import parse
from lib.ops import publish
from lib.roles.access import OPERATOR
from tests.helpers import current_id
from tests.helpers.app import on_page, signed_in
from tests.helpers.report import errors_for

from ..conftest import WORKSPACES

REPORT = WORKSPACES / "supply-chain-weekly" / "report.yaml"


@pytest.fixture
def supply(tmp_path):
    folder = tmp_path / "supply-chain-weekly"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", folder)
    wh = Warehouse(tmp_path / "cache")
    assert refresh(folder, wh, user=OPERATOR).ok
    return folder, wh


def draw(folder, wh, params=None, cache=None):
    ws, diags = workspace.load(folder)
    assert not workspace.has_errors(diags), [d.format() for d in diags]
    return render_report(ws.data, wh.tables(), current_id(wh), params or {}, cache=cache or QueryCache())


def gates(folder, week="this") -> pd.DataFrame:
    return pd.read_csv(folder / "data" / ("gates.csv" if week == "this" else "next_week/gates.csv"))


# ------------------------------------------------------------------ schema


def test_the_demo_report_is_valid_and_canonical():
    ws, diags = workspace.load(WORKSPACES / "supply-chain-weekly")
    assert not diags, [d.format() for d in diags]
    assert "report" in ws.data
    assert ws.text("report") == REPORT.read_text(encoding="utf-8")  # saving it changes no byte


def test_report_schema_borrows_the_dashboards_definitions_bundled():
    report, dashboard = schemas.load_schema("report"), schemas.load_schema("dashboard")
    for name in ("component", "kpi", "chart", "table", "filter", "sql", "color"):
        assert report["$defs"][name] == dashboard["$defs"][name], name  # one definition, copied at load, never re-typed
    assert report["$defs"]["theme"] == dashboard["properties"]["theme"]
    assert "dashboard.schema.json" in (schemas.SCHEMA_DIR / "report.schema.json").read_text()  # the file refers, it does not copy
    assert not any("schema.json" in str(v) for v in _refs(report))  # no reference is left to another file


def _refs(node):
    if isinstance(node, dict):
        if "$ref" in node:
            yield node["$ref"]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def test_bundling_refuses_two_definitions_with_one_name(tmp_path, monkeypatch):
    (tmp_path / "a.schema.json").write_text('{"$defs": {"color": {"type": "string"}}, "properties": {"x": {"$ref": "b.schema.json#/$defs/color"}}}')
    (tmp_path / "b.schema.json").write_text('{"$defs": {"color": {"type": "integer"}}}')
    monkeypatch.setattr(schemas, "SCHEMA_DIR", tmp_path)
    with pytest.raises(ValueError, match="color"):
        schemas._bundled(schemas._read_schema_file("a.schema.json"))


MINIMAL = """\
title: Weekly
queries:
  totals: SELECT sum(actual) AS units FROM gates
sections:
  - {type: heading, text: Overview}
  - {type: prose, markdown: "Units: {{totals.units}}"}
"""


def test_a_minimal_report_is_valid():
    assert errors_for(MINIMAL) == []


@pytest.mark.parametrize(
    "section, message, field",
    [
        ("{type: heading, text: Overview, level: 4}", "4", "sections[0].level"),
        ("{type: heading}", "missing required field 'text'", "sections[0]"),
        ("{type: prose, markdown: x, queries: {a: SELECT 1}}", "unknown field 'queries'", "sections[0].queries"),
        ("{type: page_break, text: x}", "unknown field 'text'", "sections[0].text"),
        ("{type: text, markdown: x}", "not an allowed value", "sections[0].type"),
        ("{type: kpis, components: [{id: c, type: chart, query: SELECT 1, mark: bar, encoding: {}}]}", "not allowed", "sections[0].components[0].type"),
        ("{id: c, type: chart, query: SELECT 1}", "missing required field 'mark'", "sections[0]"),
        ("{id: t, type: table, query: SELECT 1, data: [[1]]}", "unknown field 'data'", "sections[0].data"),
    ],
)
def test_a_broken_section_names_its_line_field_and_what_is_allowed(section, message, field):
    errs = errors_for(f"title: R\nsections:\n  - {section}\n")
    assert errs, section
    assert any(message in e.message and e.field == field and e.line == 3 for e in errs), [e.format() for e in errs]


def test_parameters_are_dashboard_filters():
    errs = errors_for(MINIMAL + "parameters:\n  - {id: site, type: dropdown}\n")
    assert [(e.field, e.line) for e in errs] == [("parameters[0].type", 8)]
    assert "multiselect" in (errs[0].allowed or "")


def test_duplicate_component_ids_across_sections_are_refused(tmp_path):
    text = REPORT.read_text().replace("id: worst_site_gates", "id: daily")
    folder = tmp_path / "supply-chain-weekly"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", folder)
    (folder / "report.yaml").write_text(text)
    diags = workspace.validate(folder)
    dup = [d for d in diags if d.id == "component id.duplicate"]
    assert len(dup) == 1 and dup[0].file is not None and dup[0].file.endswith("report.yaml"), [d.format() for d in diags]
    assert dup[0].line is not None
    assert "daily" in dup[0].message and "first at sections[" in dup[0].message and text.splitlines()[dup[0].line - 1].strip() == "id: daily"


# ------------------------------------------------------------------ rendering


def test_report_renders_every_section_in_order_with_this_weeks_figures(supply):
    folder, wh = supply
    df = gates(folder)
    r = draw(folder, wh)
    assert r.errors == []
    assert r.title == "Supply chain weekly report"
    raw = workspace.load(folder)[0].data["report"]["sections"]
    assert [s.type for s in r.sections] == [s["type"] for s in raw]
    assert r.sections[0].text == "Overview" and r.sections[0].level == 1
    kpis = r.sections[1].components
    assert [k.id for k in kpis] == ["kpi_attainment", "kpi_units", "kpi_missed"]
    attainment = df.actual.sum() / df.target.sum()
    assert kpis[0].value == pytest.approx(attainment)
    prose = r.sections[2].components[0].markdown
    assert f"{df.actual.sum():,.0f}" in prose and f"{attainment * 100:.1f}%" in prose
    assert df.week.max() in prose and "{{" not in prose
    best = cast(pd.DataFrame, df.groupby("site").sum(numeric_only=True)).eval("actual / target").idxmax()  # pandas' own types: any of its results
    assert f"**{best}**" in prose
    assert r.component("daily").vega is not None and r.component("movers").vega is not None
    table = r.component("worst_site_gates").shown
    assert len(table) == 10


def test_a_parameter_binds_like_a_dashboard_filter(supply):
    folder, wh = supply
    df = gates(folder)
    brno = df[df.site == "Brno"]
    r = draw(folder, wh, {"site": ["Brno"]})
    assert r.chosen_params == {"site": ["Brno"]}
    assert r.component("kpi_units").value == brno.actual.sum()
    assert f"{brno.actual.sum():,.0f}" in r.sections[2].components[0].markdown
    assert {row[0] for row in r.component("worst_site_gates").shown.rows} == {"Brno"}
    assert r.parameters[0].options == sorted(df.site.unique())


def test_a_query_shared_by_sections_runs_once_and_a_rerun_runs_none(supply):
    folder, wh = supply
    cache = QueryCache()
    first = draw(folder, wh, cache=cache)
    ws = workspace.load(folder)[0]
    report = ws.data["report"]
    sql_count = 1 + len(report["queries"]) + len(list(report_components(report)))
    assert first.queries_run == sql_count  # the options query, each named query once, each component once
    assert draw(folder, wh, cache=cache).queries_run == 0


def test_a_failing_section_shows_its_error_and_the_rest_render(supply):
    folder, wh = supply
    ws = workspace.load(folder)[0]
    ws.data["report"]["sections"][2]["markdown"] += "\n{{nosuch.value}}"
    ws.data["report"]["queries"]["week"] = "SELECT nonsense FROM gates"
    r = render_report(ws.data, wh.tables(), current_id(wh), {}, cache=QueryCache())
    errors = dict(r.errors)
    assert set(errors) == {"prose_3"}
    assert "query failed" in errors["prose_3"] or "no query" in errors["prose_3"]
    assert r.component("kpi_units").value is not None


# ------------------------------------------------------------------ versions: drafts, publish, history, semantic diff


def test_a_report_is_drafted_published_diffed_and_reverted_like_any_workspace_file(config_repo):
    from lib.memory import semantic_diff
    from tests.configrepo_helpers import OLIVIA, SCW, files_at, sha

    repo = config_repo
    assert "report.yaml" in files_at(repo, "main", SCW)  # the template's report came with the new config repo
    draft = repo.draft(OLIVIA, SCW)
    report = workspace.load(draft.workspace_path)[0].data["report"]
    report["sections"][0]["text"] = "This week"
    report["queries"]["week"] = report["queries"]["week"].replace("max(week)", "any_value(week)")
    report["sections"].append({"type": "prose", "markdown": "Best site: {{best.site}}."})
    before = sha(repo)
    saved = repo.save(OLIVIA, SCW, {"report": report}, "Report: reword the overview")
    assert saved is not None
    changes = repo.draft_changes(SCW, draft.branch)
    assert [c.kind for c in changes if c.category == "report"] == ["query_changed", "reworded", "section_added"]
    after = publish.publish(repo, OLIVIA, SCW)
    assert [(d.path, d.status) for d in repo.diff(SCW, before, after)] == [("report.yaml", "modified")]
    assert "This week" in files_at(repo, "main", SCW)["report.yaml"].decode()
    assert repo.history(SCW)[0].sha == after
    text = semantic_diff.format_text(repo.changes(SCW, before, after))
    assert "Report:" in text and "report query week runs different SQL" in text

    repo.revert(OLIVIA, SCW, before)
    publish.publish(repo, OLIVIA, SCW, "Back")
    assert files_at(repo, "main", SCW)["report.yaml"] == files_at(repo, before, SCW)["report.yaml"]


def test_semantic_diff_of_a_report_names_reworded_prose_and_a_requeried_component():
    from lib.memory.semantic_diff import changes

    old = workspace.load(WORKSPACES / "supply-chain-weekly")[0].data["report"]
    new = copy.deepcopy(old)
    new["sections"][2]["markdown"] = "Week {{week.week}}."
    new["sections"][4]["query"] = "SELECT 1 AS attainment"
    found = [(c.category, c.kind, c.id) for c in changes({"report": old}, {"report": new})]
    assert found == [("report", "requery", "daily"), ("report", "reworded", "prose sections[2]")]


# ------------------------------------------------------------------ checks: the same ids, located in report.yaml


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report-checks")
    folder = tmp / "supply-chain-weekly"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", folder)
    wh = Warehouse(tmp / "cache")
    assert refresh(folder, wh, user=OPERATOR).ok
    ws, _ = workspace.load(folder)
    return ws, wh.tables(), current_id(wh)


def check_report(loaded, mutate=None, level=None) -> list:
    from lib.artifacts import checks

    ws, tables, version = loaded
    changed = workspace.Workspace(ws.path, copy.deepcopy(ws.data), {})
    if mutate:
        mutate(changed.data["report"], changed.data)
    found = checks.run(changed, tables, version, kind="report")
    assert all(d.file == "report.yaml" for d in found), [d.format() for d in found]  # located in report.yaml
    return [d for d in found if level is None or d.level == level]


def section(report, sid):
    return next(s for s in report["sections"] if s.get("id") == sid)


def line_of(loaded, mutate, field):
    """The line `field` is on in the canonical text of the mutated report (what the checks locate in)."""
    ws = loaded[0]
    data = copy.deepcopy(ws.data["report"])
    mutate(data, None)
    doc = parse(workspace.render("report", data))
    from lib.core.diagnostics import format_path

    paths = {}

    def walk(node, path):
        paths[format_path(path)] = path
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, path + (k,))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, path + (i,))

    walk(data, ())
    return doc.line_of(paths[field])


def test_the_demo_report_passes_every_check(loaded):
    assert check_report(loaded) == []


def test_report_schema_check(loaded):
    mutate = lambda r, _: section(r, "daily").update(mark="pie")  # noqa: E731
    [d] = check_report(loaded, mutate)
    assert d.id == "check.schema" and d.field == "sections[4].mark" and "bar" in (d.allowed or "")
    assert d.line == line_of(loaded, mutate, "sections[4].mark")


def test_report_inline_data_check_reads_named_queries_and_sections(loaded):
    def mutate(r, _):
        r["queries"]["week"] = "SELECT '2026-W47' AS week, 0.97 AS attainment"
        section(r, "movers")["query"] = "SELECT * FROM (VALUES ('Brno Supply', 'Supply', 0.1)) t(site_gate, gate, change)"

    found = [d for d in check_report(loaded, mutate) if d.id == "check.inline_data"]
    assert [d.field for d in found] == ["queries.week", "sections[7].query"]
    assert "query 'week'" in found[0].message and "reads no table" in found[0].message
    assert "component 'movers'" in found[1].message and "VALUES" in found[1].message
    assert found[0].line == line_of(loaded, mutate, "queries.week")


def test_report_queries_and_references_checks(loaded):
    def mutate(r, _):
        r["sections"][1]["components"][0]["query"] = "SELECT sum(actual) FROM gates GROUP BY"
        r["queries"]["best"] = "SELECT sitee FROM gates"
        section(r, "daily")["encoding"]["y"]["field"] = "attainmnt"

    found = check_report(loaded, mutate, "error")
    queries = [d for d in found if d.id == "check.queries"]
    assert [d.field for d in queries] == ["sections[1].components[0].query"] and "component 'kpi_attainment'" in queries[0].message
    refs = [(d.field, d.message) for d in found if d.id == "check.references"]
    assert ("queries.best", "query 'best': unknown column 'sitee'; did you mean 'site'?") in refs
    assert any(f == "sections[4].encoding.y.field" and "'attainmnt'" in m and "did you mean 'attainment'" in m for f, m in refs)
    lines = {d.field: d.line for d in found if d.id in ("check.queries", "check.references")}
    for field in ("sections[1].components[0].query", "queries.best", "sections[4].encoding.y.field"):
        assert lines[field] == line_of(loaded, mutate, field), field
    renders = [d.message for d in found if d.id == "check.renders"]
    assert not [m for m in renders if "kpi_attainment" in m or "prose" in m]  # what does not bind is said once, by the checks above


def test_report_literal_values_check_reads_headings_and_prose(loaded):
    from lib.data.queries import run_query

    tables = loaded[1]
    units = run_query(tables, "SELECT sum(actual) FROM gates").rows[0][0]

    def mutate(r, _):
        r["sections"][2]["markdown"] += f"\nThat is {units:,} units.\n"
        r["sections"][3]["text"] = f"Through the week: {units:,} units"

    found = [d for d in check_report(loaded, mutate) if d.id == "check.literal_values"]
    assert [d.field for d in found] == ["sections[2].markdown", "sections[3].text"]
    assert "placeholder in prose" in found[0].message and f"{units:,}" in found[0].message
    assert found[1].line == line_of(loaded, mutate, "sections[3].text")


def test_report_literal_values_allow_rule_thresholds(loaded):
    found = check_report(loaded, lambda r, _: r["sections"][2].update(markdown=r["sections"][2]["markdown"] + "\nGreen means 95% or more.\n"))
    assert found == []


def test_report_output_constraints(loaded):
    def mutate(r, data):
        r["theme"] = {"background": "#000000"}
        section(r, "daily")["encoding"]["color"]["scale"]["range"] = ["#ff0000", "#ff7f0e", "#9467bd"]
        r["sections"].insert(0, r["sections"].pop(4))  # a chart before the KPI row
        r["sections"][2]["components"] += copy.deepcopy(r["sections"][2]["components"])  # six cards in a row; output.yaml allows four
        for i, card in enumerate(r["sections"][2]["components"]):
            card["id"] = f"{card['id']}_{i}"

    found = [d for d in check_report(loaded, mutate) if d.id == "check.output_constraints"]
    by_field = {d.field: d for d in found}
    assert by_field["theme.background"].allowed == "#ffffff"
    assert "'Supply'" in by_field["sections[0].encoding.color.scale"].message and "gate-colors" in by_field["sections[0].encoding.color.scale"].message
    assert "KPI cards first" in by_field["sections[0]"].message and by_field["sections[0]"].level == "warning"
    assert "6 cards" in by_field["sections[2].components"].message
    assert by_field["sections[2].components"].line == line_of(loaded, mutate, "sections[2].components")


def test_report_threshold_rule_applies_to_its_kpi_cards(loaded):
    def mutate(r, _):
        r["sections"][1]["components"][0]["thresholds"] = [{"op": ">=", "value": 0.9, "color": "#2ca02c"}]

    [d] = [d for d in check_report(loaded, mutate) if d.id == "check.output_constraints"]
    assert "component 'kpi_attainment'" in d.message and "attainment-green" in d.message and d.field == "sections[1].components[0].thresholds"


def test_report_renders_check(loaded):
    def mutate(r, _):
        r["sections"][1]["components"][1]["format"] = "%%%"

    [d] = [d for d in check_report(loaded, mutate, "error") if d.id == "check.renders"]
    assert "component 'kpi_units' does not render" in d.message and d.field == "sections[1].components[1]"
    assert d.line == line_of(loaded, mutate, "sections[1].components[1]")


def test_report_placeholders_check(loaded):
    def mutate(r, _):
        r["sections"][2]["markdown"] = "A {{weeks.week}} B {{week.wek}} C {{empty.site}} D {{nulls.value}} E {{week.units|,.0f}}"
        r["queries"]["empty"] = "SELECT site FROM gates WHERE false"
        r["queries"]["nulls"] = "SELECT max(CASE WHEN false THEN actual END) AS value FROM gates"

    found = [d for d in check_report(loaded, mutate) if d.id == "check.placeholders"]
    assert [(d.level, d.message) for d in found] == [
        ("error", "placeholder {{weeks.week}} in sections[2] names no query; did you mean 'week'?"),
        ("error", "placeholder {{week.wek}} in sections[2]: query 'week' has no column 'wek'; did you mean 'week'?"),
        ("warning", "placeholder {{empty.site}} in sections[2] shows no value: query 'empty' returns no rows"),
        ("warning", "placeholder {{nulls.value}} in sections[2] shows no value: column 'value' is NULL in the first row"),
    ]
    assert all(d.field == "sections[2].markdown" and d.line == line_of(loaded, mutate, "sections[2].markdown") for d in found)
    assert not [d for d in check_report(loaded, mutate) if d.id == "check.renders"]  # the placeholder check says why


def test_placeholder_queries_are_checked_without_data(loaded):
    from lib.artifacts import checks

    ws = workspace.Workspace(loaded[0].path, copy.deepcopy(loaded[0].data), {})
    ws.data["report"]["sections"][2]["markdown"] = "{{nosuch.value}}"
    found = checks.run(ws, None, kind="report")
    assert [d.id for d in found] == ["check.placeholders", "check.skipped"]


def test_validate_covers_report_yaml_with_its_lines(tmp_path):
    import subprocess
    import sys

    folder = tmp_path / "supply-chain-weekly"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", folder)
    text = REPORT.read_text().replace("{{best.site}}", "{{best.sitee}}")
    (folder / "report.yaml").write_text(text)
    proc = subprocess.run([sys.executable, "-m", "lib", "validate", str(folder)], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    line = next(i for i, l in enumerate(text.splitlines(), 1) if "markdown: |" in l and "{{best.sitee}}" in text.split("\n", i)[-1][:600])
    assert f"supply-chain-weekly/report.yaml:{line}" in proc.stdout and "'sitee'" in proc.stdout, proc.stdout


# ------------------------------------------------------------------ the Report page (AppTest)


def test_the_report_page_reads_in_order_binds_a_parameter_and_exports_html(env):
    at = on_page(signed_in("vera"), "app_pages/report.py")  # a viewer of the workspace
    assert [t.value for t in at.title] == ["Supply chain weekly report"]
    df = pd.read_csv(WORKSPACES / "supply-chain-weekly" / "data" / "gates.csv")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Units through the gates"] == f"{df.actual.sum():,.0f}"
    headings = [m.value for m in at.markdown if m.value.startswith("#")]
    assert headings == ["## Overview", "### Through the week", "### Top movers", "## Site-gates to look at"]
    assert any(f"{df.actual.sum():,.0f} units went through the gates" in m.value for m in at.markdown)

    at.multiselect[0].select("Brno").run()
    brno = df[df.site == "Brno"]
    assert {m.label: m.value for m in at.metric}["Units through the gates"] == f"{brno.actual.sum():,.0f}"
    assert any(f"{brno.actual.sum():,.0f} units went through the gates" in m.value for m in at.markdown)

    next(b for b in at.button if b.label == "Export HTML").click().run()
    assert not at.exception
    assert not [b for b in at.button if b.label == "Export HTML"]  # the download button stands in its place


def test_the_report_page_says_when_there_is_no_report(env):
    at = on_page(signed_in("vera", "gdp-explorer"), "app_pages/report.py")
    assert any("has no report" in i.value for i in at.info) and not at.error


def test_check_runs_on_a_report_only_workspace(tmp_path):
    import subprocess
    import sys

    folder = tmp_path / "supply-chain-weekly"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", folder)
    (folder / "dashboard.yaml").unlink()
    units = f"{pd.read_csv(folder / 'data' / 'gates.csv').actual.sum():,}"
    text = REPORT.read_text().replace("text: Overview,", f"text: 'Overview: {units} units',")
    (folder / "report.yaml").write_text(text)
    proc = subprocess.run([sys.executable, "-m", "lib", "check", str(folder)], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    line = next(i for i, l in enumerate(text.splitlines(), 1) if units in l)
    assert proc.returncode == 1 and f"supply-chain-weekly/report.yaml:{line}: sections[0].text: error: the heading in sections[0]: '{units}'" in proc.stdout, (
        proc.stdout + proc.stderr
    )
