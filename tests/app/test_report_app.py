"""The Report page through AppTest, by role: what a viewer, a steward and an owner can read, export and change."""

from __future__ import annotations

import shutil

import pytest

from lib.memory import workspace
from lib.roles.access import PermissionDenied, User
from tests.helpers.app import on_page, signed_in
from tests.helpers.report import _with_region_column

from ..conftest import ROOT

REPORT = "app_pages/report.py"
DRAFT_REPORT = {
    "title": "Team KPIs draft report",
    "sections": [{"type": "heading", "text": "Work in progress"}, {"type": "prose", "markdown": "Nothing to show yet."}],
}


def _click(at, label: str):
    next(b for b in at.button if b.label == label).click().run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def test_a_viewer_reads_and_exports_the_report_but_cannot_change_it(env):
    at = on_page(signed_in("vera"), REPORT)
    assert "Supply chain weekly report" in [t.value for t in at.title]
    assert not [t for t in at.toggle if t.label == "Show my draft"]
    _click(at, "Export HTML")
    assert not at.error, [e.value for e in at.error]
    assert "Export HTML" not in [b.label for b in at.button]  # the download took its place
    repo = at.session_state["config_repo"]
    report = workspace.load(ROOT / "workspaces" / "supply-chain-weekly")[0].data["report"]
    with pytest.raises(PermissionDenied):
        repo.save(User("vera", app_role="viewer"), "supply-chain-weekly", {"report": {**report, "title": "Mine now"}}, "retitle")


def test_a_missing_chromium_is_a_plain_message_on_the_report_page(env, monkeypatch):
    monkeypatch.setenv("DASHMEM_CHROMIUM", str(env / "no-chromium"))
    at = _click(on_page(signed_in("vera"), REPORT), "Export PDF")
    shown = [e.value for e in at.error]
    assert any(v.startswith("PDF export needs Chromium") for v in shown), shown
    assert "Export PDF" in [b.label for b in at.button]


def _stewards_unpublished_report(at):
    repo = at.session_state["config_repo"]
    sam = User("sam", app_role="steward")
    repo.new_workspace(sam, "team-kpis", "Team KPIs")
    repo.save(sam, "team-kpis", {"report": DRAFT_REPORT}, "A first report")
    return repo


def test_a_report_on_a_stewards_unpublished_draft_is_not_shown_to_a_viewer(env):
    _stewards_unpublished_report(signed_in("sam"))
    viewer = signed_in("vera", "team-kpis")
    for page in (REPORT, "app_pages/dashboard.py"):  # the Report page keeps the workspace as the Dashboard page does
        shown = on_page(viewer, page)
        assert "Team KPIs draft report" not in [t.value for t in shown.title]
        assert not [m for m in shown.markdown if "Nothing to show yet" in m.value]


def test_an_owner_opening_a_stewards_unpublished_workspace_reads_the_stewards_draft_report_and_creates_nothing(env):
    repo = _stewards_unpublished_report(signed_in("sam"))
    owner = on_page(signed_in("olivia", "team-kpis"), REPORT)
    assert not owner.error, [e.value for e in owner.error]
    assert "Team KPIs draft report" in [t.value for t in owner.title]
    assert not repo.has_draft(User("olivia", app_role="owner"), "team-kpis")


def test_the_report_page_shows_the_refreshs_warning_that_the_report_no_longer_fits(env):
    from app_pages import state
    from lib.data.refresh import RefreshReport

    at = on_page(signed_in("vera"), REPORT)
    warning = 'query regions no longer fits the new data: it reads column "region", which the new data does not have'
    at.session_state[state.REFRESH_REPORT] = RefreshReport("supply-chain-weekly", swapped=True, report_warnings=[warning])
    at.run()
    assert [w.value for w in at.warning] == [f"The new data no longer fits parts of this report:\n- {warning}"]


def test_an_image_in_prose_or_in_a_value_is_shown_as_text_so_no_viewers_browser_fetches_it(env):
    """Markdown images would make every reader's browser call the URL (with a figure in it, if the URL holds a
    placeholder). The app shows them as text, as the HTML export does."""
    at = signed_in("sam")
    repo = at.session_state["config_repo"]
    sam = User("sam", app_role="steward")
    report = {
        "title": "Pixel report ![p](http://127.0.0.1:9/report-title.png)",
        "queries": {"q": "SELECT count(*) AS n, '![v](http://127.0.0.1:9/value.png)' AS pic FROM gates"},
        "sections": [
            {"type": "heading", "text": "Heading ![h](http://127.0.0.1:9/heading.png)"},
            {"type": "table", "id": "t", "title": "Table ![c](http://127.0.0.1:9/title.png)", "query": "SELECT count(*) AS n FROM gates WHERE false"},
            {"type": "prose", "markdown": "Rows ![t](http://127.0.0.1:9/track.png?n={{q.n}}) and {{q.pic}} ![r][ref]\n\n[ref]: http://127.0.0.1:9/ref.png"},
        ],
    }
    draft = repo.new_workspace(sam, "pixels", "Pixels")
    (draft.workspace_path / "data").mkdir()
    shutil.copy(ROOT / "workspaces" / "supply-chain-weekly" / "data" / "gates.csv", draft.workspace_path / "data")
    sources = workspace.load(ROOT / "workspaces" / "supply-chain-weekly")[0].data["sources"]
    repo.save(sam, "pixels", {"report": report, "sources": sources}, "report")
    shown = on_page(signed_in("sam", "pixels"), REPORT)
    prose = [m.value for m in shown.markdown if "Rows" in m.value]
    assert prose and not any("![" in value for value in prose), prose
    assert "track.png" in prose[0]  # shown, as text
    titles = [m.value for m in shown.markdown if "heading.png" in m.value or "title.png" in m.value]
    assert len(titles) == 2 and not any("![" in value for value in titles), titles
    [title] = [t.value for t in shown.title if "report-title.png" in t.value]
    assert "![" not in title, title


def test_the_dashboard_pages_refresh_says_too_that_the_new_data_no_longer_fits_the_report(env):
    """Who refreshes from the Dashboard page hears it there: the report is printed later, by someone else."""

    at = on_page(signed_in("sam"), "app_pages/dashboard.py")
    path = at.session_state["config_repo"].published_path("supply-chain-weekly")
    _with_region_column(path)
    next(b for b in at.button if b.label == "Refresh").click().run()
    assert not at.exception and not [w for w in at.warning if "report" in w.value], [w.value for w in at.warning]
    shutil.copy(path / "data" / "next_week" / "gates.csv", path / "data" / "gates.csv")  # next week's file has no region
    next(b for b in at.button if b.label == "Refresh").click().run()
    assert not at.exception, [e.message for e in at.exception]
    said = [w.value for w in at.warning if "report" in w.value]
    assert said and 'query regions no longer fits the new data: it reads column "region"' in said[0] and "Report page" in said[0], [w.value for w in at.warning]
    assert not at.error, [e.value for e in at.error]  # the dashboard's readers got the new data
    next(b for b in at.button if b.label == "Auto-draft a report on the new data").click().run()  # no key: the auto-draft
    assert not at.exception, [e.message for e in at.exception]
    assert at.session_state["chat_prefill:supply-chain-weekly"].startswith("The data changed shape, and the report no longer fits it.")
    (kind,) = [r for r in at.radio if r.label == "Draft"]  # on Chat: the auto-draft on the new data, of a report
    assert kind.value == "report" and any(h.value.endswith("on the new data") for h in at.subheader)
    at = on_page(at, "app_pages/chat.py")  # AppTest stays on the page it was given: go where switch_page went
    (kind,) = [r for r in at.radio if r.label == "Draft"]
    assert kind.value == "report"
    next(b for b in at.button if b.label == "Auto-draft").click().run()
    assert not at.exception, [e.message for e in at.exception]
    shown = " ".join(m.value for m in at.markdown)
    assert "report.yaml" in " ".join(c.value for c in at.code) and "Overview" in shown, shown[:500]
