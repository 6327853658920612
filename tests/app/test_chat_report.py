"""The Chat page draws a proposed report (Claude's or the auto-draft's) before it is saved, as the Report page draws a saved one.

Claude is the real SDK client over the fake HTTP transport of tests/chat/test_model.py; the data is the demo's gates.csv,
and the figures the page shows are checked against sums taken here from the CSV itself.
"""

from __future__ import annotations

import csv

from lib.chat.model import message, text_block, tool_use_block
from lib.memory import workspace
from lib.roles.access import User
from tests.helpers.app import on_page, signed_in
from tests.helpers.model import MODEL, FakeAPI

from ..conftest import ROOT

CHAT = "app_pages/chat.py"
SLUG = "supply-chain-weekly"
GATES = ROOT / "workspaces" / SLUG / "data" / "gates.csv"
REPORT_PREVIEW = "Report preview"


def gates_sum(column: str) -> int:
    with GATES.open(newline="") as f:
        return sum(int(row[column]) for row in csv.DictReader(f))


def proposed_report(*extra_sections: dict) -> dict:
    """A report unlike the demo's, so what the page draws can only come from the proposal."""
    sections = [
        {"type": "heading", "text": "Volumes through the gates", "level": 1},
        {
            "type": "kpis",
            "components": [
                {"type": "kpi", "id": "kpi_planned", "title": "Units planned", "query": "SELECT sum(target) AS value FROM gates", "format": ",.0f"},
            ],
        },
        {"type": "prose", "markdown": "The gates let **{{week.units|,.0f}}** units through."},
    ]
    return {
        "title": "Gate volumes, as Claude proposes",
        "queries": {"week": "SELECT sum(actual) AS units FROM gates"},
        "sections": sections + list(extra_sections),
    }


def reply(*blocks) -> dict:
    return message(*blocks, usage={"input_tokens": 50, "output_tokens": 20}, model=MODEL)


def ask_for(api: FakeAPI, report: dict):
    api.replies.extend([reply(tool_use_block("t1", "write_report", {"yaml": workspace.render("report", report)})), reply(text_block("Here is the report."))])
    at = on_page(signed_in("sam"), CHAT)
    at.chat_input[0].set_value("Write a report on the gates' volumes").run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def draft_report(at) -> dict:
    repo = at.session_state["config_repo"]
    return workspace.load(repo.draft(User("sam", app_role="steward"), SLUG).workspace_path)[0].data["report"]


def drawn(at):
    """The proposed report as the page draws it, below the proposal's diff and checks."""
    assert not at.exception, [e.message for e in at.exception]
    [preview] = [e for e in at.expander if e.label == REPORT_PREVIEW]
    return preview


def test_a_report_claude_proposes_is_drawn_before_it_is_saved(claude):
    at = ask_for(claude, proposed_report())
    preview = drawn(at)
    assert [t.value for t in preview.title] == ["Gate volumes, as Claude proposes"]
    shown = [m.value for m in preview.markdown]
    assert "## Volumes through the gates" in shown and f"The gates let **{gates_sum('actual'):,}** units through." in shown, shown
    assert [(m.label, m.value) for m in preview.metric] == [("Units planned", f"{gates_sum('target'):,}")]
    # Drawn, not saved: the draft still holds the demo's report until Save.
    assert draft_report(at)["title"] == "Supply chain weekly report"
    next(b for b in at.button if b.label == "Save to my draft").click().run()
    assert draft_report(at)["title"] == "Gate volumes, as Claude proposes"


def test_the_auto_drafted_report_is_drawn(env):
    at = on_page(signed_in("sam"), CHAT)
    next(r for r in at.radio if r.label == "Draft").set_value("report").run()
    next(r for r in at.radio if r.label.startswith("The workspace has a report")).set_value("new").run()  # a first report, in place of the demo's
    next(b for b in at.button if b.label == "Auto-draft").click().run()
    preview = drawn(at)
    assert [t.value for t in preview.title] == ["Supply chain weekly report"]
    assert {"## Overview", "### Trend", "### Top movers"} <= {m.value for m in preview.markdown}
    metrics = {m.label: m.value for m in preview.metric}
    assert metrics["Total actual"] == f"{gates_sum('actual'):,}" and metrics["Total target"] == f"{gates_sum('target'):,}"
    assert not preview.error, [e.value for e in preview.error]


def test_a_broken_section_of_a_proposed_report_shows_its_error_in_place_and_the_rest_draws(claude):
    broken = {"type": "table", "id": "by_region", "title": "Units by region", "query": "SELECT region, sum(actual) AS units FROM gates GROUP BY 1"}
    at = ask_for(claude, proposed_report(broken))
    preview = drawn(at)
    assert [(m.label, m.value) for m in preview.metric] == [("Units planned", f"{gates_sum('target'):,}")]
    shown = [m.value for m in preview.markdown]
    assert shown[-1] == "**Units by region**" and f"The gates let **{gates_sum('actual'):,}** units through." in shown, shown
    [error] = [e.value for e in preview.error]  # under the broken section's title, in its place
    assert "unknown column 'region'" in error and "Binder Error" not in error and "Traceback" not in error, error
    assert any(e.value.startswith("The checks found 1 error(s)") for e in at.error)  # and the checks say so above
