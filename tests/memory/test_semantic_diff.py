"""lib.memory.semantic_diff: what a change means, per memory category, on the shipped demo workspaces as the base."""

from __future__ import annotations

import copy

import pytest

from lib.memory import semantic_diff, workspace
from lib.memory.semantic_diff import ATTENTION, INFO, Change, changes

from ..conftest import WORKSPACES


def demo(slug: str = "supply-chain-weekly") -> dict:
    ws, problems = workspace.load(WORKSPACES / slug)
    assert not [p for p in problems if p.level == "error"], problems
    return ws.data


@pytest.fixture
def base() -> dict:
    return demo()


def edited(base: dict, edit) -> list[Change]:
    new = copy.deepcopy(base)
    edit(new)
    return changes(base, new)


def kinds(found: list[Change]) -> list[tuple[str, str, str]]:
    return [(c.category, c.kind, c.id) for c in found]


def rule(data: dict, rule_id: str) -> dict:
    return next(r for r in data["task"]["rules"] if r["id"] == rule_id)


def component(data: dict, cid: str) -> dict:
    return next(c for c in data["dashboard"]["components"] if c["id"] == cid)


@pytest.mark.parametrize("slug", ["supply-chain-weekly", "gdp-explorer"])
def test_an_unchanged_workspace_has_no_changes(slug):
    assert changes(demo(slug), demo(slug)) == []


# --------------------------------------------------------------------------- task.yaml


def test_task_rules_added_removed_and_reworded(base):
    def edit(d):
        rule(d, "week-label")["text"] = "Label weeks as ISO 8601 weeks (2026-W47)."
        d["task"]["rules"] = [r for r in d["task"]["rules"] if r["id"] != "attainment-weighted"]
        d["task"]["rules"].append({"id": "no-pies", "text": "Never use pie charts.", "author": "sam", "created": "2026-12-01"})

    found = edited(base, edit)
    assert kinds(found) == [("task", "added", "no-pies"), ("task", "removed", "attainment-weighted"), ("task", "reworded", "week-label")]
    reworded = found[2]
    assert (reworded.old, reworded.new) == ("Label weeks as ISO weeks (2026-W47), not dates.", "Label weeks as ISO 8601 weeks (2026-W47).")
    assert found[0].new == "Never use pie charts." and found[1].old.startswith("Attainment over several rows")
    assert all(c.severity == INFO for c in found)


def test_a_rule_given_a_check_losing_one_or_with_another_check(base):
    check = {"kind": "category_color", "field": "gate", "value": "Supply", "color": "#1f77b4"}

    def edit(d):
        rule(d, "week-label")["check"] = check
        del rule(d, "gate-colors-orders")["check"]
        rule(d, "attainment-green")["check"]["value"] = 0.9

    found = edited(base, edit)
    assert kinds(found) == [
        ("task", "check_removed", "gate-colors-orders"),
        ("task", "check_changed", "attainment-green"),
        ("task", "check_added", "week-label"),
    ]
    by_id = {c.id: c for c in found}
    assert by_id["week-label"].new == check and by_id["week-label"].old is None
    assert by_id["attainment-green"].old["value"] == 0.95 and by_id["attainment-green"].new["value"] == 0.9
    assert "is now checked" in by_id["week-label"].describe() and "no longer checked" in by_id["gate-colors-orders"].describe()


def test_the_goal_and_a_confirmation_are_told_apart_from_the_text(base):
    def edit(d):
        d["task"]["goal"] = "Show the weekly gates."
        rule(d, "week-label")["last_confirmed"] = "2026-12-01"

    assert kinds(edited(base, edit)) == [("task", "goal", "goal"), ("task", "changed", "week-label.last_confirmed")]


# --------------------------------------------------------------------------- output.yaml


def test_output_constraints_old_to_new(base):
    def edit(d):
        d["output"]["theme"]["primary"] = "#000000"
        d["output"]["theme"]["palette"].append("#2ca02c")
        del d["output"]["layout"]["max_per_row"]
        d["output"]["number_formats"]["currency"] = "$,.2f"

    found = {c.id: c for c in edited(base, edit)}
    assert set(found) == {"theme.primary", "theme.palette", "layout.max_per_row", "number_formats.currency"}
    assert (found["theme.primary"].kind, found["theme.primary"].old, found["theme.primary"].new) == ("changed", "#1f77b4", "#000000")
    assert found["theme.palette"].new[-1] == "#2ca02c"  # a palette is one constraint, not one per colour
    assert (found["layout.max_per_row"].kind, found["layout.max_per_row"].old) == ("removed", 4)
    assert (found["number_formats.currency"].kind, found["number_formats.currency"].new) == ("added", "$,.2f")
    assert found["theme.primary"].describe() == "output constraint theme.primary: '#1f77b4' -> '#000000'"


# --------------------------------------------------------------------------- sources.yaml


def test_sources_added_removed_and_moved_elsewhere_need_attention(base):
    orders = {"name": "orders", "type": "sql", "url": "postgresql://reporting@db/sales", "password": "env:SALES_PW", "table": "orders"}

    def edit(d):
        d["sources"]["sources"][0]["path"] = "data/gates-v2.csv"
        d["sources"]["sources"][0]["description"] = "Gates, one row per day."
        d["sources"]["sources"].append(orders)

    found = {c.id: c for c in edited(base, edit)}
    assert found["orders"].kind == "added" and found["orders"].severity == ATTENTION
    assert found["orders"].new == "type sql, url postgresql://reporting@db/sales, table orders"
    assert (found["gates.path"].old, found["gates.path"].new, found["gates.path"].severity) == ("data/gates.csv", "data/gates-v2.csv", ATTENTION)
    assert found["gates.description"].severity == INFO

    after = copy.deepcopy(base)
    after["sources"]["sources"].append(orders)
    live = copy.deepcopy(after)
    live["sources"]["sources"][1] |= {"mode": "live", "table": "public.orders"}
    found = {c.id: c for c in changes(after, live)}
    assert (found["orders.mode"].old, found["orders.mode"].new, found["orders.mode"].severity) == (None, "live", ATTENTION)
    assert (found["orders.table"].old, found["orders.table"].new) == ("orders", "public.orders")
    assert [c.kind for c in changes(live, base)] == ["removed"]


def test_a_secret_field_shows_references_but_never_a_literal(base):
    old = copy.deepcopy(base)
    old["sources"]["sources"].append({"name": "orders", "type": "sql", "url": "postgresql://reporting@db/sales", "password": "env:OLD_PW", "table": "t"})
    new = copy.deepcopy(old)
    new["sources"]["sources"][1]["password"] = "env:NEW_PW"
    assert [(c.id, c.old, c.new, c.severity) for c in changes(old, new)] == [("orders.password", "env:OLD_PW", "env:NEW_PW", ATTENTION)]

    hostile = copy.deepcopy(old)  # a draft that would never validate still must not have its secret repeated here
    hostile["sources"]["sources"][1]["password"] = "hunter2-literal"
    hostile["sources"]["sources"][1]["url"] = "postgresql://reporting:s3cret@db/sales"
    hostile["sources"]["sources"].append({"name": "tickets", "type": "rest", "url": "https://api.example.com/t?api_key=k3y", "params": {"token": "t0ken"}})
    stepwise = copy.deepcopy(hostile)
    stepwise["sources"]["sources"][2]["params"]["token"] = "t0ken-2"
    found = changes(old, hostile) + changes(hostile, stepwise)
    text = semantic_diff.format_text(found) + str([c.to_dict() for c in found])
    for literal in ("hunter2", "s3cret", "k3y", "t0ken"):
        assert literal not in text
    assert {"orders.password", "orders.url", "tickets", "tickets.params.token"} <= {c.id for c in found}


def test_joins_declared_and_rejected(base):
    def edit(d):
        d["sources"]["relationships"] = [{"from": "gates.site", "to": "sites.site"}]
        d["sources"]["rejected_relationships"] = [{"from": "gates.day", "to": "calendar.day"}]

    found = edited(base, edit)
    assert kinds(found) == [("sources", "declared", "gates.site -> sites.site"), ("sources", "rejected", "gates.day -> calendar.day")]
    new = copy.deepcopy(base)
    edit(new)
    assert kinds(changes(new, base)) == [("sources", "undeclared", "gates.site -> sites.site"), ("sources", "unrejected", "gates.day -> calendar.day")]


# --------------------------------------------------------------------------- dashboard.yaml


def test_components_added_removed_and_requerying(base):
    def edit(d):
        comps = d["dashboard"]["components"]
        component(d, "by_site")["query"] = component(d, "by_site")["query"].replace("ORDER BY attainment DESC", "ORDER BY attainment ASC")
        component(d, "kpi_volume")["title"] = "Units"  # not a new query
        component(d, "insight")["queries"]["wk"] += " LIMIT 1"
        d["dashboard"]["components"] = [c for c in comps if c["id"] != "daily"]
        d["dashboard"]["components"].append({"id": "rows", "type": "kpi", "title": "Rows", "query": "SELECT count(*) AS value FROM gates"})

    found = edited(base, edit)
    assert kinds(found) == [
        ("dashboard", "added", "rows"),
        ("dashboard", "removed", "daily"),
        ("dashboard", "changed", "kpi_volume"),
        ("dashboard", "requery", "by_site"),
        ("dashboard", "requery", "insight"),
    ]
    by_site = found[3]
    # Long SQL is shown from just before where it differs, so the change itself is on screen.
    assert "DESC" in by_site.describe() and "ASC'" in by_site.describe()
    assert found[2].old == {"title": "Units through the gates"} and found[2].new == {"title": "Units"}
    assert found[0].new == "kpi Rows" and found[1].old == "chart Daily attainment by gate"


def test_sql_reflowed_is_not_a_new_query(base):
    def edit(d):
        c = component(d, "by_gate")
        c["query"] = "  " + "\n".join(c["query"].split(" ")) + "\n"

    assert edited(base, edit) == []


def test_filters_added_removed_and_changed(base):
    def edit(d):
        d["dashboard"]["filters"][0]["label"] = "Site"
        d["dashboard"]["filters"].append({"id": "gate", "type": "select", "label": "Gate", "options_query": "SELECT DISTINCT gate FROM gates"})

    found = edited(base, edit)
    assert kinds(found) == [("dashboard", "filter_added", "gate"), ("dashboard", "filter_changed", "site")]
    assert found[1].old == {"label": "Sites"} and found[1].new == {"label": "Site"}
    new = copy.deepcopy(base)
    new["dashboard"]["filters"] = []
    assert kinds(changes(base, new)) == [("dashboard", "filter_removed", "site")]


# --------------------------------------------------------------------------- workspace.yaml: access


def test_access_granted_and_revoked_and_policy_need_attention(base):
    def edit(d):
        d["workspace"]["access"]["stewards"] = ["sam", "mallory"]
        d["workspace"]["access"]["viewers"] = ["vera"]
        d["workspace"]["policy"]["stewards_can_publish"] = True

    found = edited(base, edit)
    assert [(c.kind, c.id, c.old, c.new) for c in found] == [
        ("granted", "stewards", None, "mallory"),
        ("revoked", "stewards", "group:analysts", None),
        ("granted", "viewers", None, "vera"),
        ("revoked", "viewers", "*", None),
        ("policy", "stewards_can_publish", False, True),
    ]
    assert all(c.category == "access" and c.severity == ATTENTION for c in found)
    assert found[0].describe() == "'mallory' added to stewards"


def test_access_comes_first_whatever_else_changed(base):
    def edit(d):
        rule(d, "week-label")["text"] = "ISO weeks."
        d["workspace"]["access"]["owners"].append("sam")

    assert [c.category for c in edited(base, edit)] == ["access", "task"]


# --------------------------------------------------------------------------- profile.yaml


def test_the_profile_is_summarised_by_shape_never_by_figures(base):
    def refreshed(d):
        table = d["profile"]["tables"][0]
        table["rows"] = 252
        for col in table["columns"]:
            col["distinct"] = 1 + (col.get("distinct") or 0)
            if "min" in col:
                col["min"] = col["max"]

    assert edited(base, refreshed) == []

    def reshaped(d):
        table = d["profile"]["tables"][0]
        table["columns"] = [c for c in table["columns"] if c["name"] != "week"]
        table["columns"].append({"name": "shift", "type": "VARCHAR", "role": "dimension", "null_share": 0.0, "distinct": 3})
        next(c for c in table["columns"] if c["name"] == "target")["type"] = "DOUBLE"
        d["profile"]["tables"].append({"name": "sites", "source": "sites", "rows": 6, "columns": []})

    found = edited(base, reshaped)
    assert kinds(found) == [
        ("profile", "table_added", "sites"),
        ("profile", "column_added", "gates.shift"),
        ("profile", "column_removed", "gates.week"),
        ("profile", "retyped", "gates.target"),
    ]
    assert "126" not in semantic_diff.format_text(found) and "2026-W47" not in semantic_diff.format_text(found)


# --------------------------------------------------------------------------- files appearing, hostile shapes


def test_a_file_that_appears_is_all_additions(base):
    old = copy.deepcopy(base)
    del old["dashboard"], old["profile"]
    found = changes(old, base)
    assert {c.kind for c in found if c.category == "dashboard"} >= {"added", "filter_added", "title"}
    assert ("profile", "table_added", "gates") in kinds(found)


@pytest.mark.parametrize(
    "broken",
    [
        {"task": {"rules": "not a list"}},
        {"task": {"rules": [None, 3, {"text": "no id"}]}},
        {"dashboard": {"components": [{"type": "kpi"}], "filters": {"id": "x"}}},
        {"sources": {"sources": [{"name": ["x"]}], "relationships": [None, "a->b"]}},
        {"workspace": {"access": {"owners": [None, {"x": 1}], "viewers": "everyone"}, "policy": None}},
        {"profile": {"tables": [{"name": "t", "columns": "none"}]}},
        {"output": "not a mapping"},
    ],
)
def test_a_file_of_the_wrong_shape_gives_what_it_can_and_never_raises(base, broken):
    new = copy.deepcopy(base) | broken
    found = changes(base, new) + changes(new, base)
    assert all(isinstance(c.describe(), str) for c in found)


def test_format_text_groups_and_marks_what_needs_attention(base):
    new = copy.deepcopy(base)
    new["workspace"]["access"]["viewers"] = ["vera"]
    rule(new, "week-label")["text"] = "ISO weeks."
    assert semantic_diff.format_text(changes(base, new)).splitlines() == [
        "Access:",
        "  ! 'vera' added to viewers",
        "  ! '*' removed from viewers",
        "Task rules:",
        "  - task rule week-label reworded: 'Label weeks as ISO weeks (2026-W47), not dates.' -> 'ISO weeks.'",
    ]
    assert semantic_diff.format_text([]) == "no changes in meaning"


# --------------------------------------------------------------------------- report.yaml


def section_at(data: dict, sid: str) -> int:
    return next(i for i, s in enumerate(data["report"]["sections"]) if s.get("id") == sid)


def test_a_report_section_added_or_removed_is_one_change_not_a_shifted_outline(base):
    found = edited(base, lambda d: d["report"]["sections"].insert(1, {"type": "heading", "text": "In short", "level": 2}))
    assert kinds(found) == [("report", "section_added", "heading 'In short'")]
    assert found[0].describe() == "report section heading 'In short' added at sections[1]"

    found = edited(base, lambda d: d["report"]["sections"].append({"type": "prose", "markdown": "Best site: {{best.site}}."}))
    assert [c.describe() for c in found] == ["report section prose 'Best site: {{best.site}}.' added at sections[11]"]

    found = edited(base, lambda d: d["report"]["sections"].remove({"type": "page_break"}))
    assert [c.describe() for c in found] == ["report section page_break removed from sections[8]"]


def test_a_report_chart_added_or_removed_is_a_component_change_and_named_once(base):
    def drop_daily(d):
        del d["report"]["sections"][section_at(d, "daily")]

    assert kinds(edited(base, drop_daily)) == [("report", "removed", "daily")]
    card = {"id": "kpi_target", "type": "kpi", "title": "Target", "query": "SELECT sum(target) AS value FROM gates", "format": ",.0f"}
    found = edited(base, lambda d: d["report"]["sections"][1]["components"].append(card))
    assert kinds(found) == [("report", "added", "kpi_target")]  # the KPI row is the same row, with one card more
    table = {"id": "by_site", "type": "table", "title": "By site", "query": "SELECT site, sum(actual) AS units FROM gates GROUP BY 1"}
    assert [c.describe() for c in edited(base, lambda d: d["report"]["sections"].append(table))] == ["report component by_site added: 'table By site'"]


def test_a_report_section_that_runs_other_sql_is_a_requery_and_whitespace_is_not(base):
    def requery(d):
        d["report"]["sections"][section_at(d, "daily")]["query"] = "SELECT day, gate, avg(attainment) AS attainment FROM gates GROUP BY 1, 2"

    found = edited(base, requery)
    assert kinds(found) == [("report", "requery", "daily")]
    assert found[0].describe().startswith("report component daily runs different SQL: ")

    def card_requery(d):
        d["report"]["sections"][1]["components"][0]["query"] = "SELECT avg(attainment) AS value FROM gates"

    assert kinds(edited(base, card_requery)) == [("report", "requery", "kpi_attainment")]

    def named_query(d):
        d["report"]["queries"]["best"] = d["report"]["queries"]["best"].replace("DESC", "ASC")

    assert kinds(edited(base, named_query)) == [("report", "query_changed", "best")]

    def reflow(d):
        d["report"]["queries"]["best"] = "  " + d["report"]["queries"]["best"].replace(" ", "\n  ", 3)
        d["report"]["sections"][section_at(d, "daily")]["query"] += "\n"

    assert edited(base, reflow) == []


def test_report_sections_moved_and_reworded_in_one_edit(base):
    def edit(d):
        sections = d["report"]["sections"]
        sections[0]["text"] = "This week"
        sections.append(sections.pop(section_at(d, "movers")))  # the movers chart goes to the end

    found = edited(base, edit)
    assert [c.describe() for c in found] == [
        "report heading sections[0] reworded: 'Overview' -> 'This week'",
        "report section chart movers moved: sections[7] -> sections[10]",
    ]


def test_a_new_report_reads_as_its_components_queries_and_plain_sections(base):
    without = {k: v for k, v in base.items() if k != "report"}
    found = changes(without, base)
    ids = {c.id for c in found if c.kind == "added"}
    assert {"kpi_attainment", "daily", "movers", "worst_site_gates"} <= ids
    assert {c.id for c in found if c.kind == "query_added"} == set(base["report"]["queries"])
    assert [c.kind for c in found if c.id == "heading 'Overview'"] == ["section_added"]
    # and a removed report the other way round, never an error on a half-written one
    assert {c.kind for c in changes(base, without) if c.category == "report"} >= {"removed", "query_removed", "section_removed"}
    assert changes({"report": {"sections": "not a list"}}, {"report": {"sections": [None, 3]}}) is not None
