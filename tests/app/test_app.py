"""The Streamlit app through AppTest: real config repo, real data, each page and each role."""

from __future__ import annotations

import subprocess
import sys

import pytest
from streamlit.testing.v1 import AppTest

from app_pages import state
from lib.ops import publish
from tests.helpers.app import engine_text_in, on_page, page_text, signed_in
from tests.helpers.disk import leave_free, make_room, small_disk
from tests.helpers.tables import orders_csv_text

from ..conftest import ROOT

PAGES = ["app_pages/dashboard.py", "app_pages/report.py", "app_pages/chat.py", "app_pages/workspaces.py", "app_pages/history.py"]
STEWARD_PAGES = ["app_pages/sources.py", "app_pages/specs.py", "app_pages/review.py"]


# Multi-step AppTest scenarios (a save, a publish, a chat session, a new workspace; most across several pages
# or users): 2.5-5.5 s each here, so they run with the browser journeys in the slow loop. Sign-in, every
# page's render, the forms and the access checks stay in the fast loop.
JOURNEY = pytest.mark.slow


def test_signed_out_shows_the_sign_in_form(env):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    assert not at.exception
    assert [t.label for t in at.text_input] == ["Username", "Password"]
    at.switch_page("app_pages/specs.py").run()  # a deep link while signed out: the sign-in form, not the page
    assert [t.label for t in at.text_input] == ["Username", "Password"]
    assert not [t for t in at.tabs if t.label == "Task rules"] and "Specs" not in [t.value for t in at.title]


def test_sign_in_with_the_demo_steward(env):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    at.text_input[0].input("sam")
    at.text_input[1].input("sam-demo")
    at.button[0].click().run()
    at.run()
    assert at.session_state["authentication_status"] is True
    assert any("Sam Steward" in m.value for m in at.sidebar.markdown)


def test_wrong_password_is_refused(env):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    at.text_input[0].input("sam")
    at.text_input[1].input("wrong")
    at.button[0].click().run()
    assert any("Wrong user name or password" in e.value for e in at.error)


def test_wrong_passwords_in_a_row_make_the_name_wait_even_with_the_right_one(env):
    """Issue #29: twelve wrong passwords for olivia, then the right one, signed in, with no wait between tries."""
    from lib.roles import throttle

    def attempt(at: AppTest, name: str, password: str) -> list[str]:
        at.text_input[0].input(name)
        at.text_input[1].input(password)
        at.button[0].click().run()
        return [e.value for e in at.error]

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    shown = [attempt(at, "olivia", "guess") for _ in range(throttle.BY_NAME.free)][-1]
    assert any("Wrong user name or password" in m and "Too many failed sign-ins for this name; try again in" in m for m in shown), shown
    shown = attempt(at, "olivia", "olivia-demo")  # the right password, during the wait
    assert at.session_state["authentication_status"] is False
    assert any(m.startswith("Too many failed sign-ins for this name; try again in") for m in shown), shown
    assert [t.label for t in at.text_input] == ["Username", "Password"] and not at.exception
    attempt(at, "sam", "sam-demo")  # another name is not held by olivia's failures
    assert at.session_state["authentication_status"] is True and at.session_state["username"] == "sam"


@pytest.mark.parametrize("page", PAGES)
def test_viewer_pages_render(env, page):
    on_page(signed_in("vera"), page)


def test_viewer_cannot_reach_edit_pages(env):
    at = signed_in("vera")
    for page in STEWARD_PAGES:
        with pytest.raises(ValueError):
            at.switch_page(page)


@pytest.mark.parametrize("page", PAGES + STEWARD_PAGES)
def test_steward_pages_render(env, page):
    on_page(signed_in("sam"), page)


def test_dashboard_shows_the_numbers_and_refresh_reports(env):
    at = signed_in("vera")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Attainment this week"].endswith("%")
    assert [b.label for b in at.button if b.label == "Refresh"]
    next(b for b in at.button if b.label == "Refresh").click().run()
    assert not at.exception
    # One box that says what happened: the data was loaded when the page opened, so this refresh found it unchanged.
    assert [e.label for e in at.expander if e.label.startswith("Checked the sources: the data has not changed")]


def test_a_viewers_own_file_past_the_upload_caps_is_refused_naming_the_setting(env, monkeypatch):
    monkeypatch.setenv("DASHMEM_UPLOAD_MAX_ROWS", "100")
    gates = (ROOT / "workspaces" / "supply-chain-weekly" / "data" / "next_week" / "gates.csv").read_bytes()
    at = signed_in("vera")
    at.file_uploader(key="swap_file").set_value(("my gates.csv", gates, "text/csv")).run()
    assert not at.exception
    assert [e.value for e in at.error] == [
        "This file does not fit the dashboard: source 'gates': my gates.csv has more than 100 rows; uploads are limited to 100 rows (DASHMEM_UPLOAD_MAX_ROWS)"
    ]
    assert not [s for s in at.success if s.value.startswith("Showing your file")]
    fewer = b"".join(gates.splitlines(keepends=True)[:51])  # the header and 50 rows
    at.file_uploader(key="swap_file").set_value(("my gates.csv", fewer, "text/csv")).run()
    assert not at.error and any(s.value.startswith("Showing your file instead of **gates** (50 rows)") for s in at.success)


def test_a_viewers_file_that_cannot_stand_in_shows_only_its_error_not_an_earlier_file(env):
    """Issue #31, 13: after a file that fits, one that does not leaves the shared data shown, not the earlier file."""
    gates = (ROOT / "workspaces" / "supply-chain-weekly" / "data" / "gates.csv").read_bytes()
    at = signed_in("vera")
    at.file_uploader(key="swap_file").set_value(("my gates.csv", gates, "text/csv")).run()
    assert any(s.value.startswith("Showing your file instead of **gates**") for s in at.success)
    at.file_uploader(key="swap_file").set_value(("other.csv", b"site,actual\nBrno,3\n", "text/csv")).run()
    assert not at.exception
    assert [e.value for e in at.error] and all(e.value.startswith("This file does not fit the dashboard: ") for e in at.error)
    assert not [s for s in at.success if s.value.startswith("Showing your file")]


@JOURNEY
def test_steward_edits_a_rule_saves_finds_it_in_history_and_reverts(env):
    at = on_page(signed_in("sam"), "app_pages/specs.py")
    text_areas = [t for t in at.text_area if t.label == "Text" and (t.value or "").startswith("Gates are always")]
    text_areas[0].input("Gates are coloured Supply blue, Orders orange, Process purple - always.")
    next(b for b in at.button if b.label == "Save task rules").click().run()
    assert not at.exception
    assert any("Saved to your draft" in s.value for s in at.success), [e.value for e in at.error]
    at = on_page(at, "app_pages/history.py")
    at.radio[0].set_value("draft/sam/supply-chain-weekly").run()
    assert "Edit task rules" in at.dataframe[0].value["message"].tolist()
    # The two newest versions are compared: the saved edit, said in words above its YAML diff.
    assert any(m.value.startswith("**Task rules**") and "gate\\-colors reworded" in m.value for m in at.markdown), [m.value for m in at.markdown]
    next(b for b in at.button if b.label.startswith("Revert my draft")).click().run()
    assert any("Your draft now equals" in s.value for s in at.success)


def test_viewer_cannot_save_even_by_calling_lib(env):
    from lib.core import settings
    from lib.repo.configrepo import ConfigRepo
    from lib.roles.access import PermissionDenied, User

    at = signed_in("vera")
    repo: ConfigRepo = at.session_state["config_repo"]
    with pytest.raises(PermissionDenied):
        repo.save(User("vera", app_role="viewer"), "supply-chain-weekly", {}, "sneaky")
    assert settings.config_repo_path().exists()


@JOURNEY
def test_owner_can_publish_a_stewards_draft(env):
    at = on_page(signed_in("sam"), "app_pages/specs.py")
    goal = next(t for t in at.text_area if t.label == "Goal")
    goal.input("Show which gates missed target, where, and the trend.")
    next(b for b in at.button if b.label == "Save task rules").click().run()
    at = on_page(signed_in("olivia"), "app_pages/review.py")
    next(b for b in at.button if b.label == "Publish").click().run()
    assert not at.exception
    # One click only asks: nothing is published until the owner confirms.
    assert any("Publish sam's draft to everyone" in w.value and "task.yaml" in w.value for w in at.warning)
    repo = at.session_state["config_repo"]
    assert [d for d in repo.drafts("supply-chain-weekly") if d["ahead"]]
    next(b for b in at.button if b.label == "Yes, publish").click().run()
    assert any(s.value.startswith("Published sam's draft (task.yaml) as version") for s in at.success), [e.value for e in at.error]
    assert any("No open drafts" in i.value for i in at.info)


@JOURNEY
def test_a_draft_that_fails_its_checks_cannot_be_published_from_review(env):
    at = on_page(signed_in("sam"), "app_pages/specs.py")
    editor = next(t for t in at.text_area if t.label == "dashboard.yaml")
    assert editor.value is not None
    editor.input(editor.value.replace("FROM gates", "FROM gatez", 1))
    next(b for b in at.button if b.label == "Check and preview").click().run()
    next(c for c in at.checkbox if c.label.startswith("Save it with")).check().run()
    next(b for b in at.button if b.label == "Save to my draft").click().run()
    at = on_page(signed_in("olivia"), "app_pages/review.py")
    assert any("Checks: " in e.value and "error(s)" in e.value for e in at.error)
    publish = next(b for b in at.button if b.label == "Publish")
    assert publish.disabled and "fix the errors" in publish.help


@JOURNEY
def test_chat_without_a_key_offers_auto_draft(env):
    at = on_page(signed_in("sam"), "app_pages/chat.py")
    assert any("No Anthropic API key" in i.value for i in at.info)
    next(b for b in at.button if b.label == "Auto-draft").click().run()
    assert not at.exception
    assert at.code and "dashboard.yaml" in at.code[0].value
    # The proposal is checked and drawn before it is saved, not shown only as a YAML diff.
    assert any("The checks pass" in s.value for s in at.success) and any(e.label == "Preview" for e in at.expander)
    assert at.metric


@JOURNEY
def test_chat_auto_drafts_a_report_checks_it_and_saves_it_to_the_draft(env):
    from lib.memory import workspace
    from lib.roles.access import User

    at = on_page(signed_in("sam"), "app_pages/chat.py")
    next(r for r in at.radio if r.label == "Draft").set_value("report").run()
    next(r for r in at.radio if r.label.startswith("The workspace has a report")).set_value("new").run()  # a first report, in place of the demo's
    next(b for b in at.button if b.label == "Auto-draft").click().run()
    assert not at.exception, [e.message for e in at.exception]
    [diff] = [c.value for c in at.code]
    assert diff.startswith("--- a/report.yaml") and "dashboard.yaml" not in diff
    assert "+description: 'First draft from the data profile of `gates`" in diff, diff
    assert any(s.value == "The report's checks pass." for s in at.success)
    next(b for b in at.button if b.label == "Save to my draft").click().run()
    assert any("Saved to your draft" in s.value for s in at.success)
    repo = at.session_state["config_repo"]
    assert repo.history("supply-chain-weekly", ref="draft/sam/supply-chain-weekly")[0].message == "Auto-draft the report"
    saved = workspace.load(repo.draft(User("sam", app_role="steward"), "supply-chain-weekly").workspace_path)[0]
    assert any(s.get("id") == "movers" for s in saved.data["report"]["sections"])
    # Review says what the report change means and publishes it like any other file.
    at = on_page(signed_in("olivia"), "app_pages/review.py")
    [meaning] = [m.value.replace("\\", "") for m in at.markdown if m.value.startswith("**Report**")]  # without Markdown's escapes
    assert "report query overview added" in meaning and "report component kpi_records added" in meaning
    next(b for b in at.button if b.label == "Publish").click().run()
    next(b for b in at.button if b.label == "Yes, publish").click().run()
    assert any(s.value.startswith("Published sam's draft (report.yaml) as version") for s in at.success), [e.value for e in at.error]


@JOURNEY
def test_auto_draft_after_a_new_source_adds_to_the_curated_dashboard_and_report(env):
    """Issue #31 item 6: with an orders source added to sam's draft (loaded and profiled), the auto-draft starts from the
    new table and adds to the curated dashboard and report, keeping all they have; starting a new one says first what it removes."""
    from lib.core import settings
    from lib.data import profile
    from lib.data.connectors.csv_source import store_upload
    from lib.data.refresh import refresh
    from lib.data.snapshots import Warehouse
    from lib.memory import workspace
    from lib.roles.access import OPERATOR, User

    sam, slug = User("sam", app_role="steward"), "supply-chain-weekly"
    at = signed_in("sam")
    repo = at.session_state["config_repo"]
    draft = repo.draft(sam, slug).workspace_path
    ws, _ = workspace.load(draft)
    curated = {kind: ws.data[kind] for kind in ("dashboard", "report")}
    stored = store_upload(settings.uploads_dir(slug), "orders.csv", orders_csv_text().encode())
    sources = ws.data["sources"]
    repo.save(sam, slug, {"sources": {**sources, "sources": [*sources["sources"], {"name": "orders", "type": "csv", "path": stored}]}}, "Add source orders")
    wh = Warehouse.for_workspace(draft)  # as Refresh on the draft's dashboard, then Update the profile on Sources, do
    assert refresh(draft, wh, user=OPERATOR).ok
    ws, _ = workspace.load(draft)
    repo.save(sam, slug, {"profile": profile.build_for(wh.tables(), ws.data["sources"], draft)}, "Update the data profile")

    at = on_page(at, "app_pages/chat.py")
    [tables] = [m for m in at.multiselect if m.label == "Draft from"]
    assert tables.value == ["orders"] and set(tables.options) == {"gates", "orders"}  # the new table, by default
    next(r for r in at.radio if r.label == "Draft").set_value("both").run()
    [mode] = [r for r in at.radio if r.label == "The workspace has a dashboard and a report"]
    assert mode.value == "add"
    next(b for b in at.button if b.label == "Auto-draft").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    summary = {m.value.split("**")[1]: m.value.replace("\\", "") for m in at.markdown if m.value.startswith(("**dashboard.yaml**", "**report.yaml**"))}
    assert "components added to the dashboard: Records (kpi_records), Total amount (kpi_amount)" in summary["dashboard.yaml"], summary
    assert "Kept as they are: 8 components, 1 filter." in summary["dashboard.yaml"]
    assert "Kept as they are: 6 components, 1 filter, 4 headings, 2 paragraphs." in summary["report.yaml"]
    assert not [w for w in at.warning if "removes" in w.value]
    # The long YAML diff is behind an expander, below the summary.
    assert any(e.label == "The YAML diff" for e in at.expander) and "orders" in at.code[0].value
    next(b for b in at.button if b.label == "Save to my draft").click().run()
    assert any("Saved to your draft" in s.value for s in at.success), [e.value for e in at.error]
    assert repo.history(slug, ref=f"draft/sam/{slug}")[0].message == "Auto-draft from orders added to the dashboard and the report"
    saved = workspace.load(draft)[0].data
    old, new = curated["dashboard"]["components"], saved["dashboard"]["components"]
    assert new[: len(old)] == old and len(new) > len(old) and all('"orders"' in c.get("query", "") for c in new[len(old) :] if c.get("query"))
    sections = curated["report"]["sections"]
    assert saved["report"]["sections"][: len(sections)] == sections and len(saved["report"]["sections"]) > len(sections)

    # Starting a new one instead: what it would remove is named before anything is saved.
    next(r for r in at.radio if r.label == "The workspace has a dashboard and a report").set_value("new").run()
    next(b for b in at.button if b.label == "Auto-draft").click().run()
    [warning] = [w.value.replace("\\", "") for w in at.warning if "Starting a new dashboard" in w.value]
    assert all(f"({c['id']})" in warning for c in old), warning  # every curated component (the new one keeps what it drafts the same)
    assert any("Starting a new report removes" in w.value for w in at.warning)
    assert workspace.load(draft)[0].data["dashboard"]["components"] == new  # nothing saved yet
    next(b for b in at.button if b.label == "Discard").click().run()
    assert workspace.load(draft)[0].data["dashboard"]["components"] == new


@pytest.fixture
def scripted_claude(env, monkeypatch):
    """An API key is 'set' and the page's client is a scripted model (the real SDK path is tested in test_model)."""
    from lib.chat import model

    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    script: list = []
    monkeypatch.setattr(model, "AnthropicClient", lambda *a, **k: model.ScriptedModel(script))
    return script


@JOURNEY
def test_chat_edit_session_shows_a_diff_and_saves_to_the_draft(scripted_claude):
    from lib.chat.model import message, text_block, tool_use_block
    from lib.memory import workspace

    spec = workspace.load(ROOT / "workspaces" / "supply-chain-weekly")[0].data["dashboard"]
    spec = {**spec, "title": "Supply chain weekly, refined"}
    scripted_claude.extend(
        [
            message(
                tool_use_block("t1", "write_dashboard", {"yaml": workspace.render("dashboard", spec)}),
                usage={"input_tokens": 100, "output_tokens": 50, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 900},
            ),
            message(
                text_block("I renamed the dashboard."),
                usage={"input_tokens": 20, "output_tokens": 10, "cache_read_input_tokens": 900, "cache_creation_input_tokens": 0},
            ),
        ]
    )
    at = on_page(signed_in("sam"), "app_pages/chat.py")
    at.chat_input[0].set_value("Rename the dashboard").run()
    assert not at.exception, [e.message for e in at.exception]
    assert any("+title: Supply chain weekly, refined" in c.value for c in at.code)
    assert any("The checks pass" in s.value for s in at.success) and any(e.label == "Preview" for e in at.expander)
    assert any("cache read 900" in c.value for c in at.caption)
    next(b for b in at.button if b.label == "Save to my draft").click().run()
    assert any("Saved to your draft" in s.value for s in at.success)
    repo = at.session_state["config_repo"]
    assert repo.history("supply-chain-weekly", ref="draft/sam/supply-chain-weekly")[0].message == "Dashboard change from a Claude session"


@JOURNEY
def test_a_chat_change_saved_after_another_save_to_the_draft_saves_nothing_and_loses_nothing(scripted_claude):
    """Claude read the draft, then another save moved it (Explore in another tab): saving the session's whole
    dashboard over it would drop that save, so it is refused with a plain message and the other save stays."""
    import copy

    from lib.chat.model import message, text_block, tool_use_block
    from lib.memory import workspace
    from lib.roles.access import User

    spec = workspace.load(ROOT / "workspaces" / "supply-chain-weekly")[0].data["dashboard"]
    scripted_claude.extend(
        [
            message(tool_use_block("t1", "write_dashboard", {"yaml": workspace.render("dashboard", {**spec, "title": "Renamed by Claude"})})),
            message(text_block("I renamed the dashboard.")),
        ]
    )
    at = on_page(signed_in("sam"), "app_pages/chat.py")
    at.chat_input[0].set_value("Rename the dashboard").run()
    assert any("+title: Renamed by Claude" in c.value for c in at.code)
    repo, sam = at.session_state["config_repo"], User("sam", app_role="steward")
    meanwhile = copy.deepcopy(workspace.load(repo.draft(sam, "supply-chain-weekly").workspace_path)[0].data["dashboard"])
    meanwhile["description"] = "Saved from another tab while Claude worked."
    repo.save(sam, "supply-chain-weekly", {"dashboard": meanwhile}, "Another tab")
    next(b for b in at.button if b.label == "Save to my draft").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert any("changed while this was being saved" in e.value and "nothing was saved" in e.value for e in at.error), [e.value for e in at.error]
    saved = workspace.load(repo.draft(sam, "supply-chain-weekly").workspace_path)[0].data["dashboard"]
    assert saved["description"] == "Saved from another tab while Claude worked." and saved["title"] != "Renamed by Claude"
    assert repo.history("supply-chain-weekly", ref="draft/sam/supply-chain-weekly")[0].message == "Another tab"


@JOURNEY
def test_chat_session_that_writes_a_report_shows_its_diff_and_checks_and_saves_it(scripted_claude):
    from lib.chat.model import message, text_block, tool_use_block
    from lib.memory import workspace

    report = workspace.load(ROOT / "workspaces" / "supply-chain-weekly")[0].data["report"]
    report = {**report, "title": "Supply chain weekly report, refined"}
    scripted_claude.extend(
        [
            message(tool_use_block("t1", "write_report", {"yaml": workspace.render("report", report)})),
            message(text_block("I renamed the report.")),
        ]
    )
    at = on_page(signed_in("sam"), "app_pages/chat.py")
    at.chat_input[0].set_value("Rename the report").run()
    assert not at.exception, [e.message for e in at.exception]
    assert any("+title: Supply chain weekly report, refined" in c.value and "a/report.yaml" in c.value for c in at.code)
    assert any(s.value == "The report's checks pass." for s in at.success)
    next(b for b in at.button if b.label == "Save to my draft").click().run()
    repo = at.session_state["config_repo"]
    assert repo.history("supply-chain-weekly", ref="draft/sam/supply-chain-weekly")[0].message == "Report change from a Claude session"


def test_chat_query_mode_for_a_viewer_answers_and_offers_nothing_to_save(scripted_claude):
    from lib.chat.model import message, text_block, tool_use_block

    scripted_claude.extend(
        [
            message(tool_use_block("q1", "run_sql", {"sql": "SELECT site FROM gates GROUP BY site ORDER BY sum(actual) / sum(target) LIMIT 1"})),
            message(text_block("The weakest site this week is the one the query returned.")),
        ]
    )
    at = on_page(signed_in("vera"), "app_pages/chat.py")
    assert [r.options for r in at.radio] == [["query"]] or [r.value for r in at.radio] == ["query"]
    at.chat_input[0].set_value("Which site is weakest?").run()
    assert not at.exception
    assert not [b for b in at.button if b.label == "Save to my draft"]
    repo = at.session_state["config_repo"]
    assert "draft/vera/supply-chain-weekly" not in repo.repo.heads


@JOURNEY
def test_steward_creates_a_workspace_and_works_on_it_before_publishing(env):
    at = on_page(signed_in("sam"), "app_pages/workspaces.py")
    name = next(t for t in at.text_input if t.label == "Name")
    folder = next(t for t in at.text_input if t.label == "Folder name")
    name.input("Team KPIs")
    folder.input("team-kpis")
    next(b for b in at.button if b.label == "Create on my draft").click().run()
    assert any("Created **Team KPIs**" in s.value for s in at.success), [e.value for e in at.error]
    # At once, without another run or signing in again: listed, and open in the sidebar.
    assert "Team KPIs" in [s.value for s in at.subheader]
    assert at.sidebar.selectbox[0].value == "team-kpis"
    at = on_page(at, "app_pages/sources.py")
    assert any("No profile yet" in i.value for i in at.info)
    at = on_page(at, "app_pages/dashboard.py")
    assert any("no dashboard yet" in i.value for i in at.info)
    at = on_page(signed_in("vera"), "app_pages/workspaces.py")
    assert "Team KPIs" not in [s.value for s in at.subheader]  # not published: only its creator sees it


def test_a_failed_first_load_is_not_retried_at_every_click(env, monkeypatch):
    """Each rerun would otherwise wait on the unreachable sources again; the Refresh button retries."""
    import lib.data.refresh
    from lib.data.refresh import RefreshReport, SourceReport

    calls = []

    def unreachable(path, wh, **kwargs):
        calls.append(path)
        return RefreshReport(workspace=path.name, sources=[SourceReport("gates", "csv", status="failed", message="source 'gates': timed out")])

    monkeypatch.setattr(lib.data.refresh, "refresh", unreachable)
    at = signed_in("vera")
    assert len(calls) == 1
    at.run()
    assert len(calls) == 1
    assert any("timed out" in str(df.value) for df in at.dataframe)  # the report says why
    next(b for b in at.button if b.label == "Refresh").click().run()
    assert len(calls) == 2


@pytest.mark.parametrize("slug", ["supply-chain-weekly", "gdp-explorer"])
@pytest.mark.parametrize("form", ["Save task rules", "Save output constraints"])
def test_a_form_submitted_unchanged_saves_nothing(env, slug, form):
    """Generated forms write only what the person changed: no defaults filled in, numbers and lists round-trip."""
    at = on_page(signed_in("sam", slug), "app_pages/specs.py")
    next(b for b in at.button if b.label == form).click().run()
    assert not at.exception
    assert any("Nothing changed" in i.value for i in at.info), ([s.value for s in at.success], [e.value for e in at.error])


def test_editing_the_goal_changes_only_the_goal_lines(env):
    at = on_page(signed_in("sam"), "app_pages/specs.py")
    next(t for t in at.text_area if t.label == "Goal").input("Show which gates missed target, and where.")
    next(b for b in at.button if b.label == "Save task rules").click().run()
    assert any("Saved to your draft" in s.value for s in at.success), [e.value for e in at.error]
    repo = at.session_state["config_repo"]
    [patch] = repo.draft_diff("supply-chain-weekly", "draft/sam/supply-chain-weekly")
    changed = [line for line in patch.patch.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert patch.path == "task.yaml" and changed and all("goal" in line or line.startswith(("+  ", "-  ")) for line in changed), changed
    assert not [line for line in changed if "check" in line or "kind" in line or "color" in line]


def test_a_page_that_fails_shows_a_plain_message_not_a_traceback(env, monkeypatch, caplog):
    from lib.repo.configrepo import ConfigRepo

    def broken(*args, **kwargs):
        raise RuntimeError("internal detail /srv/secret/path")

    monkeypatch.setattr(ConfigRepo, "history", broken)
    at = signed_in("vera")
    at.switch_page("app_pages/history.py")
    at.run()
    assert not at.exception
    [message] = [e.value for e in at.error if "Something went wrong" in e.value]
    assert "reference" in message and "/srv/secret/path" not in message and "RuntimeError" not in message
    assert any("internal detail" in r.getMessage() or (r.exc_info and "internal detail" in str(r.exc_info[1])) for r in caplog.records)


def test_history_of_my_draft_compares_its_newest_versions_and_lists_a_revert_at_once(env):
    at = on_page(signed_in("sam"), "app_pages/specs.py")
    next(t for t in at.text_area if t.label == "Goal").input("Show which gates missed target, and where.")
    next(b for b in at.button if b.label == "Save task rules").click().run()
    at = on_page(at, "app_pages/history.py")
    at.radio[0].set_value("draft/sam/supply-chain-weekly").run()
    assert not [c for c in at.caption if c.value == "No differences."]
    assert any("missed target, and where" in c.value for c in at.code)
    before = len(at.dataframe[0].value)
    next(b for b in at.button if b.label.startswith("Revert my draft")).click().run()
    assert any("Your draft now equals" in s.value for s in at.success)
    assert len(at.dataframe[0].value) == before + 1 and at.dataframe[0].value["message"].iloc[0].startswith("Revert")


@JOURNEY
def test_the_dashboard_editor_shows_checks_and_a_preview_before_saving(env):
    at = on_page(signed_in("sam"), "app_pages/specs.py")
    editor = next(t for t in at.text_area if t.label == "dashboard.yaml")
    assert editor.value is not None
    editor.input(editor.value.replace("Gate attainment (actual / target)", "Attainment (actual over target)", 1))
    next(b for b in at.button if b.label == "Check and preview").click().run()
    assert not at.exception
    assert any("The checks pass" in s.value for s in at.success) and any(e.label == "Preview" for e in at.expander)
    assert at.metric, "the preview draws the dashboard"
    next(b for b in at.button if b.label == "Save to my draft").click().run()
    assert any("Saved to your draft" in s.value for s in at.success)


@JOURNEY
def test_saving_a_dashboard_that_fails_its_checks_needs_an_explicit_choice(env):
    at = on_page(signed_in("sam"), "app_pages/specs.py")
    editor = next(t for t in at.text_area if t.label == "dashboard.yaml")
    assert editor.value is not None
    editor.input(editor.value.replace("FROM gates", "FROM gatez", 1))
    next(b for b in at.button if b.label == "Check and preview").click().run()
    assert any("error(s) in this dashboard" in e.value for e in at.error)
    assert any("gatez" in e.value for e in at.error)
    assert next(b for b in at.button if b.label == "Save to my draft").disabled
    next(c for c in at.checkbox if c.label.startswith("Save it with")).check().run()
    next(b for b in at.button if b.label == "Save to my draft").click().run()
    assert any("Saved to your draft" in s.value for s in at.success)
    draft = at.session_state["config_repo"].drafts("supply-chain-weekly")[0]["workspace_path"]
    assert "FROM gatez" in (draft / "dashboard.yaml").read_text(encoding="utf-8")


@JOURNEY
def test_a_text_corrected_after_a_failed_check_is_the_text_checked_next(env):
    """The editor checks what was typed: a corrected text after a failed Check is checked at once, not the old one."""
    at = on_page(signed_in("sam"), "app_pages/specs.py")
    editor = next(t for t in at.text_area if t.label == "dashboard.yaml")
    good = editor.value
    assert good is not None
    editor.input(good.replace("FROM gates", "FROM gatez", 1))
    next(b for b in at.button if b.label == "Check and preview").click().run()
    assert any("gatez" in e.value for e in at.error)
    at.run()  # any rerun in between (a click elsewhere on the page)
    editor = next(t for t in at.text_area if t.label == "dashboard.yaml")
    editor.input(good.replace("Gate attainment (actual / target)", "Attainment (actual over target)", 1))
    next(b for b in at.button if b.label == "Check and preview").click().run()
    assert not any("gatez" in e.value for e in at.error), "the old text was checked again"
    assert any("The checks pass" in s.value for s in at.success)
    assert any("Attainment (actual over target)" in c.value for c in at.code), "the diff shows the corrected text"


@JOURNEY
def test_a_value_the_schema_refuses_gets_its_located_error_and_no_preview(env):
    """`mark: bars` is named with its line and what is allowed; the page does not try to draw it."""
    at = on_page(signed_in("sam"), "app_pages/specs.py")
    editor = next(t for t in at.text_area if t.label == "dashboard.yaml")
    assert editor.value is not None and "mark: bar" in editor.value
    editor.input(editor.value.replace("mark: bar", "mark: bars", 1))
    next(b for b in at.button if b.label == "Check and preview").click().run()
    assert not at.exception
    assert any("bars" in e.value and "dashboard.yaml:" in e.value for e in at.error)
    assert not any("Something went wrong" in e.value for e in at.error)
    assert any("preview shows once the dashboard validates" in i.value for i in at.info)
    assert not any(e.label == "Preview" for e in at.expander)


@JOURNEY
def test_without_a_key_a_schema_change_leads_to_an_auto_draft_on_the_new_data(env):
    import pyarrow.csv as pacsv

    from lib.roles.access import User

    at = signed_in("sam")
    draft = at.session_state["config_repo"].draft(User("sam", app_role="steward"), "supply-chain-weekly")
    at = on_page(at, "app_pages/dashboard.py")
    at.toggle[0].set_value(True).run()  # my draft, its data loaded as it is now
    assert not at.error
    data = draft.workspace_path / "data"  # next week's file renames a column
    table = pacsv.read_csv(data / "next_week" / "gates.csv")
    pacsv.write_csv(table.rename_columns([c if c != "actual" else "actual_units" for c in table.column_names]), data / "gates.csv")
    next(b for b in at.button if b.label == "Refresh").click().run()
    [box] = [e for e in at.expander if e.label.startswith("Kept the previous data")]
    assert "gates no longer fits the dashboard" in box.label
    problems = [e.value for e in at.error]
    assert len(problems) == 1 and "actual_units?" in problems[0] and "Binder Error" not in problems[0]
    next(b for b in at.button if b.label == "Auto-draft a dashboard on the new data").click().run()
    assert not at.exception
    at = on_page(at, "app_pages/chat.py")  # AppTest does not follow a page's own switch_page on later runs
    assert any("on the new data" in h.value for h in at.subheader)
    next(b for b in at.button if b.label == "Auto-draft").click().run()
    assert any("The checks pass" in s.value for s in at.success), [e.value for e in at.error]
    assert "actual_units" in at.code[0].value
    next(b for b in at.button if b.label == "Save to my draft").click().run()
    assert any("Saved to your draft" in s.value for s in at.success)
    # The saved dashboard and the new data's profile: the next Refresh accepts the new shape.
    at = on_page(at, "app_pages/dashboard.py")
    at.toggle[0].set_value(True).run()
    next(b for b in at.button if b.label == "Refresh").click().run()
    assert [e.label for e in at.expander if e.label.startswith("Refreshed: new data loaded")], [e.label for e in at.expander]
    assert not at.error


def test_a_viewer_without_a_key_is_told_what_they_can_do(env):
    at = on_page(signed_in("vera"), "app_pages/chat.py")
    [note] = [i.value for i in at.info if "Chat with Claude is not set up" in i.value]
    assert "Refresh" in note and "ANTHROPIC_API_KEY" not in note


@JOURNEY
def test_a_steward_adds_a_csv_source_and_sees_its_profile_and_join_candidates_at_once(env):
    """Issue #31, 10: one click on Add loads and profiles the source in the draft, no Dashboard, Refresh or Update in between."""
    from lib.memory import workspace

    sites = b"code,country\nBrno,CZ\nLeipzig,DE\nLyon,FR\nPorto,PT\nPoznan,PL\nRotterdam,NL\nGdansk,PL\n"
    at = on_page(signed_in("sam"), "app_pages/sources.py")
    charts = len(at.get("vega_lite_chart"))
    next(t for t in at.text_input if t.label == "Table name").input("sites")
    at.file_uploader[0].set_value(("sites.csv", sites, "text/csv"))
    next(b for b in at.button if b.label == "Add to my draft").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    [done] = [s.value for s in at.success if s.value.startswith("Added **sites** to your draft")]
    assert "7 rows loaded and profiled" in done and "gates.site → sites.code" in done, done
    shown = " ".join(m.value for m in at.markdown)
    assert "#### sites · 7 rows" in shown and "`gates.site` → `sites.code` · candidate" in shown, shown
    assert at.button(key="rel_confirm:gates.site:sites.code")  # the candidate can be confirmed at once
    assert len(at.get("vega_lite_chart")) == charts + 2  # a chart for each of its two columns, read from the draft's data
    path = at.session_state["config_repo"].draft(at.session_state["user"], "supply-chain-weekly").workspace_path
    assert "sites" in [t["name"] for t in workspace.load(path)[0].data["profile"]["tables"]]


def test_adding_a_source_whose_file_cannot_be_read_keeps_it_and_says_what_to_check(env):
    at = on_page(signed_in("sam"), "app_pages/sources.py")
    next(t for t in at.text_input if t.label == "Table name").input("orders")
    at.file_uploader[0].set_value(("orders.csv", b"\x00\x01\x02 not text \xff\xfe", "text/csv"))
    next(b for b in at.button if b.label == "Add to my draft").click().run()
    assert not at.exception
    [problem] = [e.value for e in at.error]
    assert problem.startswith("Added **orders** to your draft, but could not load its data") and "Check the file" in problem, problem
    assert "Traceback" not in problem and "orders ·" not in " ".join(m.value for m in at.markdown)


def test_a_sources_form_shows_its_own_types_fields_and_saves_nothing_unchanged(env):
    at = on_page(signed_in("sam"), "app_pages/sources.py")
    labels = {w.label for w in list(at.text_input) + list(at.checkbox) + list(at.selectbox) + list(at.text_area) + list(at.number_input)}
    assert any(label.startswith("Path") for label in labels) and any(label.startswith("Delimiter") for label in labels)
    assert not [label for label in labels if label.startswith(("Url", "Records path", "Command", "Tool", "Query"))], labels
    next(b for b in at.button if b.label == "Save").click().run()
    assert not at.exception and not at.error
    repo = at.session_state["config_repo"]
    assert not [d for d in repo.drafts("supply-chain-weekly") if d["ahead"]]


def test_the_profile_has_a_readable_chart_per_column(env):
    at = on_page(signed_in("sam"), "app_pages/sources.py")
    from lib.memory import workspace

    prof = workspace.load(ROOT / "workspaces" / "supply-chain-weekly")[0].data["profile"]
    columns = [c for t in prof["tables"] for c in t["columns"]]
    assert len(at.get("vega_lite_chart")) == len(columns)
    assert len([p for p in at.get("progress")]) == len(columns)


def test_a_full_column_is_drawn_full_on_the_profile(env):
    """Issue #31, 7: "100% filled" drew an empty bar: the share 1 went to st.progress as an int, read as 1 %."""
    at = on_page(signed_in("sam"), "app_pages/sources.py")
    bars = at.get("progress")
    assert bars and all(p.proto.text.startswith("100% filled") for p in bars)  # every demo column is full
    assert [p.proto.value for p in bars] == [100] * len(bars)


def test_the_report_says_it_shows_the_shared_data_while_the_dashboard_shows_your_own_file(env):
    at = on_page(signed_in("vera"), "app_pages/report.py")
    assert not [i for i in at.info if "shared data" in i.value]
    at = on_page(at, "app_pages/dashboard.py")
    gates = (ROOT / "workspaces" / "supply-chain-weekly" / "data" / "next_week" / "gates.csv").read_bytes()
    at.file_uploader(key="swap_file").set_value(("my gates.csv", gates, "text/csv")).run()
    assert any(s.value.startswith("Showing your file instead of **gates**") for s in at.success)
    at = on_page(at, "app_pages/report.py")
    assert not at.exception
    assert [i.value for i in at.info if "shared data" in i.value] == [
        "This report shows the shared data. Your own file in place of **gates** is shown on the Dashboard only"
        " (this session); the report and its exports read the data everyone sees."
    ]


def test_importing_a_category_never_defaults_to_copying_a_workspace_into_itself(env):
    at = on_page(signed_in("sam"), "app_pages/workspaces.py")
    into = next(b for b in at.selectbox if b.label == "Into")
    source = next(b for b in at.selectbox if b.label == "From")
    assert into.value != source.value


def test_importing_task_rules_on_the_page_says_what_it_added_and_keeps_the_goal(env):
    at = on_page(signed_in("olivia", "gdp-explorer"), "app_pages/workspaces.py")
    into = next(b for b in at.selectbox if b.label == "Into")
    into.select_index(next(i for i, o in enumerate(into.options) if "gdp" in o.lower())).run()
    source = next(b for b in at.selectbox if b.label == "From")
    source.select_index(next(i for i, o in enumerate(source.options) if "supply" in o.lower())).run()
    category = next(b for b in at.selectbox if b.label == "Category")
    category.select_index(next(i for i, o in enumerate(category.options) if "task" in o.lower())).run()
    next(b for b in at.button if b.label == "Import into my draft").click().run()
    assert not at.exception
    done = " ".join(m.value for m in at.success)
    assert "Imported into your draft" in done and "added " in done and "task rules" in done, done
    assert "kept this workspace's goal" in done, done


@JOURNEY
def test_an_owner_sets_the_remote_and_a_steward_then_proposes(env, tmp_path):
    import git as gitpython

    bare = tmp_path / "proposals.git"
    gitpython.Repo.init(bare, bare=True, initial_branch="main")
    at = on_page(signed_in("sam"), "app_pages/specs.py")
    next(t for t in at.text_area if t.label == "Goal").input("Show which gates missed target, and where.")
    next(b for b in at.button if b.label == "Save task rules").click().run()
    at = on_page(at, "app_pages/review.py")
    assert not [t for t in at.text_input if t.label == "Remote URL"]  # a steward cannot set it
    owner = on_page(signed_in("olivia"), "app_pages/review.py")
    next(t for t in owner.text_input if t.label == "Remote URL").input("https://bob:hunter2@git.example/x.git")
    next(b for b in owner.button if b.label == "Save the remote").click().run()
    assert any("holds a password" in e.value for e in owner.error) and not any("hunter2" in e.value for e in owner.error)
    next(t for t in owner.text_input if t.label == "Remote URL").input(str(bare))
    next(b for b in owner.button if b.label == "Save the remote").click().run()
    assert any("proposals are pushed there" in s.value for s in owner.success)
    at = on_page(signed_in("sam"), "app_pages/review.py")
    next(b for b in at.button if b.label.startswith("Propose")).click().run()
    assert any("Pushed" in s.value for s in at.success), [e.value for e in at.error]
    assert "draft/sam/supply-chain-weekly" in [h.name for h in gitpython.Repo(bare).heads]


@JOURNEY
def test_an_owner_sees_how_many_proposed_drafts_wait_in_the_sidebar_and_on_review_without_a_remote(env):
    """Issue #31, 8: the default install has no remote; a steward's proposal reaches the owner all the same."""
    at = on_page(signed_in("sam"), "app_pages/specs.py")
    next(t for t in at.text_area if t.label == "Goal").input("Show which gates missed target, and where.")
    next(b for b in at.button if b.label == "Save task rules").click().run()
    at = on_page(at, "app_pages/review.py")
    assert not any("Proposals need a shared remote" in c.value for c in at.caption)
    next(b for b in at.button if b.label == "Propose for review").click().run()
    assert any("owners see your draft waiting" in s.value for s in at.success), [e.value for e in at.error]
    assert not any("wait" in w.value for w in at.sidebar.warning)  # a steward: nothing waits for them

    owner = signed_in("olivia")
    assert any("1 proposed draft waits for your review" in w.value and "(1)" in w.value for w in owner.sidebar.warning), [
        w.value for w in owner.sidebar.warning
    ]
    owner = on_page(owner, "app_pages/review.py")
    assert any("1 proposed draft waits for your review: sam's" in w.value for w in owner.main.warning), [w.value for w in owner.main.warning]
    assert any("proposed for review" in c.value for c in owner.caption)
    next(b for b in owner.button if b.label == "Reject").click().run()
    assert not any("wait" in w.value for w in owner.sidebar.warning)
    assert not any("waits for your review" in w.value for w in owner.main.warning)


def test_a_steward_is_told_on_sources_when_a_data_file_differs_from_the_committed_one(env):
    """Issue #31, 5: next week's gates.csv copied into the published folder is named on Sources, plainly."""
    at = on_page(signed_in("sam"), "app_pages/sources.py")
    assert not any("differs from the committed" in i.value for i in at.info)
    folder = env / "config-repo" / "supply-chain-weekly" / "data"
    (folder / "gates.csv").write_bytes((folder / "next_week" / "gates.csv").read_bytes())
    at.run()
    assert any("`data/gates.csv` in the published folder differs from the committed file" in i.value for i in at.info), [i.value for i in at.info]


@JOURNEY
def test_the_apps_owners_see_a_workspace_a_steward_created_and_not_published(env):
    at = on_page(signed_in("sam"), "app_pages/workspaces.py")
    next(t for t in at.text_input if t.label == "Name").input("Team KPIs")
    next(t for t in at.text_input if t.label == "Folder name").input("team-kpis")
    next(b for b in at.button if b.label == "Create on my draft").click().run()
    owner = on_page(signed_in("olivia"), "app_pages/workspaces.py")
    assert "Team KPIs" in [s.value for s in owner.subheader]
    owner = on_page(signed_in("olivia", "team-kpis"), "app_pages/review.py")
    next(b for b in owner.button if b.label == "Publish").click().run()
    next(b for b in owner.button if b.label == "Yes, publish").click().run()
    assert any(s.value.startswith("Published sam's draft") for s in owner.success), [e.value for e in owner.error]
    assert owner.session_state["config_repo"].is_published("team-kpis")


def test_an_owner_opening_a_stewards_unpublished_workspace_sees_the_stewards_draft_and_creates_nothing(env):
    from lib.memory import workspace
    from lib.roles.access import User

    at = signed_in("sam")
    repo = at.session_state["config_repo"]
    sam = User("sam", app_role="steward")
    draft = repo.new_workspace(sam, "team-kpis", "Team KPIs")
    dashboard = {
        "title": "Team KPIs board",
        "components": [{"id": "note", "type": "text", "title": "Note", "markdown": "Work in progress."}],
        "layout": [["note"]],
    }
    repo.save(sam, "team-kpis", {"dashboard": dashboard}, "A first dashboard")
    owner = on_page(signed_in("olivia", "team-kpis"), "app_pages/dashboard.py")
    assert not owner.error, [e.value for e in owner.error]
    assert "Team KPIs board" in [t.value for t in owner.title]
    assert not [t for t in owner.toggle if t.label == "Show my draft"]  # sam's draft, not one of olivia's
    owner.run()  # and again: a second run finds the same, and still creates nothing
    assert not owner.exception and not owner.error, [e.value for e in owner.error]
    assert not repo.has_draft(User("olivia", app_role="owner"), "team-kpis")
    assert workspace.load(draft.workspace_path)[0].data["dashboard"]["title"] == "Team KPIs board"
    chat = on_page(owner, "app_pages/chat.py")  # editing is on sam's draft only: a plain message, nothing created
    assert not chat.exception and not repo.has_draft(User("olivia", app_role="owner"), "team-kpis")
    assert any("'team-kpis' is not published yet: it exists only on sam's draft" in e.value for e in chat.error), [e.value for e in chat.error]


@JOURNEY
def test_messages_name_files_not_the_servers_folders(env):
    at = on_page(signed_in("sam"), "app_pages/specs.py")
    editor = next(t for t in at.text_area if t.label == "dashboard.yaml")
    assert editor.value is not None
    editor.input(editor.value.replace("FROM gates", "FROM gatez", 1))
    next(b for b in at.button if b.label == "Check and preview").click().run()
    next(c for c in at.checkbox if c.label.startswith("Save it with")).check().run()
    next(b for b in at.button if b.label == "Save to my draft").click().run()
    at = on_page(at, "app_pages/review.py")  # checks the draft's files where they are on the server
    shown = [e.value for e in at.error if "gatez" in e.value]
    assert shown and all(v.startswith("dashboard.yaml:") and "config-repo" not in v and "drafts" not in v for v in shown), shown


def test_a_steward_can_ask_the_refresh_button_for_a_full_reload_and_a_viewer_cannot(env, monkeypatch):
    """A workspace whose `gates` come incrementally from SQLite: the Full reload box is a steward's, and reloads whole."""
    import csv
    import shutil
    import sqlite3

    from lib.memory import workspace

    data = env / "data"
    data.mkdir()
    with open(ROOT / "workspaces" / "supply-chain-weekly" / "data" / "gates.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    database = data / "gates.db"
    with sqlite3.connect(database) as connection:
        connection.execute("CREATE TABLE gates (id INTEGER, day DATE, week TEXT, site TEXT, gate TEXT, target INTEGER, actual INTEGER, attainment REAL)")
        connection.executemany(
            "INSERT INTO gates VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [(i, r["day"], r["week"], r["site"], r["gate"], int(r["target"]), int(r["actual"]), float(r["attainment"])) for i, r in enumerate(rows)],
        )
    templates = env / "templates"
    shutil.copytree(ROOT / "workspaces" / "supply-chain-weekly", templates / "supply-chain-weekly")
    shutil.rmtree(templates / "supply-chain-weekly" / "data")
    (templates / "supply-chain-weekly" / "profile.yaml").unlink()
    ws, _ = workspace.load(templates / "supply-chain-weekly")
    ws.data["sources"] = {"sources": [{"name": "gates", "type": "sql", "url": f"sqlite:///{database}", "table": "gates", "incremental": {"cursor": "id"}}]}
    workspace.save(templates / "supply-chain-weekly", ws.data)
    monkeypatch.setenv("DASHMEM_TEMPLATES", str(templates))
    monkeypatch.setenv("DASHMEM_DATA_DIRS", str(data))

    viewer = signed_in("vera")
    assert not [c for c in viewer.checkbox if c.label == "Full reload"]

    at = signed_in("sam")
    with sqlite3.connect(database) as connection:
        connection.execute("UPDATE gates SET actual = 0 WHERE id = 0")  # in place: an incremental refresh cannot see it
    next(b for b in at.button if b.label == "Refresh").click().run()
    assert not at.exception, at.exception
    assert any("incremental" in str(df.value) for df in at.dataframe)
    next(c for c in at.checkbox if c.label == "Full reload").check().run()
    next(b for b in at.button if b.label == "Refresh").click().run()
    assert not at.exception, at.exception
    assert any("full reload" in str(df.value) for df in at.dataframe), [str(df.value) for df in at.dataframe]
    assert [e.label for e in at.expander if e.label.startswith("Refreshed: new data loaded")], [e.label for e in at.expander]


def test_a_multiselect_over_a_live_table_offers_the_databases_values(env, monkeypatch):
    """The filter's options query runs in the database, not on the live table's empty stand-in in the snapshot."""
    import shutil
    import sqlite3

    from lib.memory import workspace

    templates = env / "templates"
    folder = templates / "supply-chain-weekly"
    shutil.copytree(ROOT / "workspaces" / "supply-chain-weekly", folder)
    shutil.rmtree(folder / "data")
    (folder / "profile.yaml").unlink()
    data = env / "data"
    data.mkdir()
    with sqlite3.connect(data / "orders.db") as connection:
        connection.execute("CREATE TABLE orders (site TEXT, sales INTEGER)")
        connection.executemany("INSERT INTO orders VALUES (?, ?)", [("Brno", 5), ("Lyon", 7), ("Brno", 1)])
    ws, _ = workspace.load(folder)
    ws.data["sources"] = {"sources": [{"name": "orders", "type": "sql", "url": f"sqlite:///{data / 'orders.db'}", "table": "orders", "mode": "live"}]}
    ws.data["dashboard"] = {
        "title": "Orders",
        "filters": [{"id": "site", "type": "multiselect", "label": "Sites", "options_query": "SELECT DISTINCT site FROM orders ORDER BY 1"}],
        "components": [
            {
                "id": "total",
                "type": "kpi",
                "title": "Sales",
                "query": "SELECT sum(sales) AS value FROM orders WHERE ($site IS NULL OR list_contains($site, site))",
            }
        ],
        "layout": [["total"]],
    }
    workspace.save(folder, ws.data)
    monkeypatch.setenv("DASHMEM_TEMPLATES", str(templates))
    monkeypatch.setenv("DASHMEM_DATA_DIRS", str(data))

    at = signed_in("vera")
    sites = next(m for m in at.multiselect if m.label == "Sites")
    assert sites.options == ["Brno", "Lyon"]
    sites.select("Lyon").run()
    assert not at.exception, at.exception
    assert [m.value for m in at.metric] == ["7"]


@JOURNEY
def test_a_steward_confirms_and_rejects_join_candidates_on_the_sources_page(env, monkeypatch):
    """Candidates from an updated profile; Confirm declares, Reject stops proposing; both outlive the next profile update."""
    from lib.memory import workspace
    from lib.roles.access import User

    extra = env / "extra"
    extra.mkdir()
    (extra / "sites.csv").write_text("code,country\nBrno,CZ\nLeipzig,DE\nLyon,FR\nPorto,PT\nPoznan,PL\nRotterdam,NL\nGdansk,PL\n")
    (extra / "teams.csv").write_text("team,lead\nSupply,ana\nOrders,ben\nProcess,cy\nInbound,dee\nOutbound,eve\nQuality,fay\n")
    monkeypatch.setenv("DASHMEM_DATA_DIRS", str(extra))
    at = signed_in("sam")
    repo = at.session_state["config_repo"]
    sam = User("sam", app_role="steward")
    path = repo.draft(sam, "supply-chain-weekly").workspace_path
    sources = workspace.load(path)[0].data["sources"]
    added = [{"name": n, "type": "csv", "path": str(extra / f"{n}.csv")} for n in ("sites", "teams")]
    repo.save(sam, "supply-chain-weekly", {"sources": {**sources, "sources": sources["sources"] + added}}, "Add sites and teams")

    def update_profile(at: AppTest) -> AppTest:
        next(b for b in at.button if b.label == "Update the profile from the current data").click().run()
        assert not at.exception and not at.error, [e.value for e in at.error]
        return at

    at = update_profile(on_page(at, "app_pages/sources.py"))
    found = {(r["left"], r["right"]) for r in workspace.load(path)[0].data["profile"]["relationships"]}
    assert {("gates.site", "sites.code"), ("gates.gate", "teams.team")} <= found, found
    at.button(key="rel_confirm:gates.site:sites.code").click().run()
    assert any("Declare the join gates.site -> sites.code" in s.value for s in at.success)
    at.button(key="rel_reject:gates.gate:teams.team").click().run()
    saved = workspace.load(path)[0].data["sources"]
    assert saved["relationships"] == [{"from": "gates.site", "to": "sites.code"}]
    assert saved["rejected_relationships"] == [{"from": "gates.gate", "to": "teams.team"}]
    assert [s["name"] for s in saved["sources"]] == ["gates", "sites", "teams"]  # the connectors untouched
    # A new session updates the profile again: the decisions stand, and neither pair is proposed as a candidate.
    at = update_profile(on_page(signed_in("sam"), "app_pages/sources.py"))
    found = {(r["left"], r["right"]) for r in workspace.load(path)[0].data["profile"].get("relationships") or []}
    assert not found & {("gates.site", "sites.code"), ("gates.gate", "teams.team")}
    shown = " ".join(m.value for m in at.markdown)
    assert "`gates.site` → `sites.code` · **declared**" in shown and "`gates.gate` → `teams.team` · rejected" in shown
    assert not [b for b in at.button if b.key == "rel_confirm:gates.gate:teams.team"]
    # Saving a connector keeps the decisions.
    next(b for b in at.button if b.label == "Save").click().run()
    assert workspace.load(path)[0].data["sources"]["relationships"] == [{"from": "gates.site", "to": "sites.code"}]


@JOURNEY
def test_removing_a_source_drops_the_joins_that_name_its_table(env, monkeypatch):
    from lib.memory import workspace
    from lib.roles.access import User

    extra = env / "extra"
    extra.mkdir()
    (extra / "sites.csv").write_text("code,country\nBrno,CZ\nLeipzig,DE\n")
    monkeypatch.setenv("DASHMEM_DATA_DIRS", str(extra))
    at = signed_in("sam")
    repo = at.session_state["config_repo"]
    sam = User("sam", app_role="steward")
    path = repo.draft(sam, "supply-chain-weekly").workspace_path
    sources = workspace.load(path)[0].data["sources"]
    with_sites = {
        **sources,
        "sources": sources["sources"] + [{"name": "sites", "type": "csv", "path": str(extra / "sites.csv")}],
        "relationships": [{"from": "gates.site", "to": "sites.code"}],
    }
    repo.save(sam, "supply-chain-weekly", {"sources": with_sites}, "Add sites")
    at = on_page(at, "app_pages/sources.py")
    [remove] = [b for b in at.button if b.label == "Remove this source" and "edit_1" in b.form_id]
    remove.click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert workspace.load(path)[0].data["sources"] == sources  # the source and the join naming it, gone together


# --------------------------------------------------------------------------- memory that ages, budgets in chat (issue #16)


def test_a_stale_rule_is_flagged_on_specs_and_review_and_still_holds_confirms_it_on_the_draft(env):
    from lib.memory import workspace
    from lib.roles.access import User

    at = signed_in("sam")
    repo, sam = at.session_state["config_repo"], User("sam", app_role="steward")
    task = workspace.load(repo.draft(sam, "supply-chain-weekly").workspace_path)[0].data["task"]
    task["rules"][5]["created"] = "2024-01-08"  # week-label: written long ago, never confirmed
    repo.save(sam, "supply-chain-weekly", {"task": task}, "an old rule")
    for page in ("app_pages/review.py", "app_pages/specs.py"):
        at = on_page(at, page)
        assert any("1 task rule(s) not confirmed for over 90 days" in w.value for w in at.warning), page
    next(b for b in at.button if b.label == "Still holds").click().run()
    assert any("Confirmed `week-label` on your draft" in s.value for s in at.success), [e.value for e in at.error]
    assert not any("not confirmed for over" in w.value for w in at.warning)
    rules = workspace.load(repo.draft(sam, "supply-chain-weekly").workspace_path)[0].data["task"]["rules"]
    assert rules[5]["last_confirmed"] == __import__("datetime").date.today().isoformat()


def test_the_dashboard_tells_stewards_the_profile_is_out_of_date_and_updates_it_on_their_draft(env):
    import pyarrow as pa
    import pyarrow.csv as pacsv

    from lib.memory import workspace
    from lib.roles.access import User

    at = signed_in("sam")
    draft = at.session_state["config_repo"].draft(User("sam", app_role="steward"), "supply-chain-weekly")
    at = on_page(at, "app_pages/dashboard.py")
    at.toggle[0].set_value(True).run()  # my draft, its data loaded as it is now
    assert not any("profile is out of date" in w.value for w in at.warning)
    data = draft.workspace_path / "data" / "gates.csv"  # a compatible refresh: one new column
    table = pacsv.read_csv(data)
    pacsv.write_csv(table.append_column("shift", pa.array(["day", "night"] * (table.num_rows // 2))), data)
    next(b for b in at.button if b.label == "Refresh").click().run()
    [box] = [w.value for w in at.warning if "profile is out of date" in w.value]
    assert "gates.shift (VARCHAR) is a new column" in box
    next(b for b in at.button if b.label == "Update profile").click().run()
    assert any("Saved the new profile to your draft" in s.value for s in at.success), [e.value for e in at.error]
    assert not any("profile is out of date" in w.value for w in at.warning)
    columns = workspace.load(draft.workspace_path)[0].data["profile"]["tables"][0]["columns"]
    assert "shift" in [c["name"] for c in columns]
    viewer = on_page(signed_in("vera"), "app_pages/dashboard.py")
    assert not [b for b in viewer.button if b.label == "Update profile"]


def test_chat_warns_when_the_workspace_budget_cannot_hold_the_column_names(env):
    from lib.memory import workspace
    from lib.roles.access import User

    at = signed_in("olivia")
    repo, olivia = at.session_state["config_repo"], User("olivia", app_role="owner")
    meta = workspace.load(repo.draft(olivia, "supply-chain-weekly").workspace_path)[0].data["workspace"]
    at = on_page(at, "app_pages/chat.py")
    assert not any("policy.profile_budget" in w.value for w in at.warning)
    repo.save(olivia, "supply-chain-weekly", {"workspace": {**meta, "policy": {**meta["policy"], "profile_budget": 50}}}, "a tight budget")
    at = on_page(at, "app_pages/chat.py")
    assert any("policy.profile_budget" in w.value and "budget of 50 tokens" in w.value for w in at.warning), [w.value for w in at.warning]


@JOURNEY
def test_review_shows_what_a_draft_means_above_its_yaml_diff(env):
    from lib.memory import workspace
    from lib.roles.access import User

    at = signed_in("olivia")
    repo = at.session_state["config_repo"]
    olivia = User("olivia", app_role="owner")
    data = workspace.load(repo.draft(olivia, "supply-chain-weekly").workspace_path)[0].data
    next(r for r in data["task"]["rules"] if r["id"] == "week-label")["text"] = "Label weeks as ISO 8601 weeks, see [ISO](http://evil.example)."
    data["workspace"]["access"]["stewards"].append("mallory")
    repo.save(olivia, "supply-chain-weekly", {"task": data["task"], "workspace": data["workspace"]}, "Let mallory edit")
    at = on_page(at, "app_pages/review.py")

    shown = [(e.type, getattr(e, "value", None) or getattr(e, "label", "")) for e in at.main if e.type in ("markdown", "warning", "code", "expander")]
    texts = [str(v) for _, v in shown]
    meaning = texts.index("**What it changes**")
    yaml_at = texts.index("**The YAML, line by line**")
    warning = next(i for i, t in enumerate(texts) if t.startswith("Check these before publishing"))
    rule = next(i for i, t in enumerate(texts) if "week\\-label reworded" in t)
    first_patch = next(i for i, (kind, _) in enumerate(shown) if kind == "code")
    assert meaning < warning < yaml_at < first_patch and meaning < rule < yaml_at, shown
    assert "mallory" in texts[warning] and "added to stewards" in texts[warning]
    assert "ISO 8601 weeks" in texts[rule] and texts[rule].startswith("**Task rules**")
    assert "\\[ISO\\]\\(http\\://evil\\.example\\)" in texts[rule]  # a draft's text is shown as written, never as a link
    assert {e.label for e in at.expander} >= {"task.yaml (modified)", "workspace.yaml (modified)"}


def test_the_served_app_watches_no_files_and_collects_no_garbage_after_each_run():
    """As `streamlit run app.py` reads .streamlit/config.toml: no per-session file watchers, no full GC per
    script run (about 15 % of the server's CPU with 4 sessions signing in at once, issue #14)."""
    show = "from streamlit import config; print(config.get_option('server.fileWatcherType'), config.get_option('runner.postScriptGC'))"
    proc = subprocess.run([sys.executable, "-c", show], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.stdout.split() == ["none", "False"], proc.stderr[-2000:]


def test_two_workspaces_with_the_same_name_are_two_choices_in_the_sidebar(env):
    """Streamlit keeps a choice by its label: a second "Supply chain weekly" opened the first one."""
    from lib.roles.access import User

    at = signed_in("olivia")
    repo = at.session_state["config_repo"]
    olivia = User("olivia", app_role="owner")
    repo.new_workspace(olivia, "supply-emea", "Supply chain weekly", template="supply-chain-weekly")
    publish.publish(repo, olivia, "supply-emea")
    at.run()
    (picker,) = [s for s in at.selectbox if s.label == "Workspace"]
    assert len(set(picker.options)) == len(picker.options), picker.options
    for slug in ("supply-emea", "supply-chain-weekly", "supply-emea"):
        picker.set_value(slug).run()
        assert not at.exception, [e.message for e in at.exception]
        assert at.session_state["slug"] == slug
        (picker,) = [s for s in at.selectbox if s.label == "Workspace"]


def test_a_workspace_no_longer_visible_opens_the_first_one_not_a_name_as_a_slug(env):
    at = signed_in("vera")
    at.session_state["slug"] = "no-such-workspace"  # as a workspace deleted, or no longer shared, while a session had it open
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    (picker,) = [s for s in at.selectbox if s.label == "Workspace"]
    assert at.session_state["slug"] == picker.value == "gdp-explorer"  # the first the viewer may open
    picker.set_value("supply-chain-weekly").run()
    assert at.session_state["slug"] == "supply-chain-weekly"


@JOURNEY
def test_a_save_on_a_full_disk_shows_what_happened_and_what_to_do(env, monkeypatch):
    with small_disk(env / "disk", 8 << 20) as disk:
        monkeypatch.setenv("DASHMEM_CONFIG_REPO", str(disk / "config-repo"))
        at = on_page(signed_in("sam"), "app_pages/specs.py")
        next(t for t in at.text_area if t.label == "Goal").input("Show which gates missed target, and where.")
        leave_free(disk, 0)
        try:
            next(b for b in at.button if b.label == "Save task rules").click().run()
        finally:
            make_room(disk)
        assert not at.exception
        shown = [e.value for e in at.error]
        assert [m for m in shown if "No space left on device" in m and "nothing was saved" in m and "free some space" in m and "config-repo" not in m], shown
        assert not [m for m in shown if "Something went wrong" in m], shown


# --------------------------------------------------------------------------- no engine text on any page (lib/data/sql_errors.py)

SHOW_ROWS_FAILS = """  - id: brno_volume
    type: kpi
    title: Brno volume
    query: SELECT site AS place, sum(actual) AS value FROM gates WHERE place = 'Brno' GROUP BY place
    format: ',d'
layout:
"""  # renders (DuckDB reads the SELECT's alias in WHERE), but the rows behind it, SELECT * FROM gates WHERE place = ..., do not


def broken_queries(dashboard_yaml: str) -> str:
    """The demo dashboard with a query broken each way DuckDB refuses one, and a card whose Show rows fails."""
    breaks = [
        ("SELECT sum(actual) / sum(target) AS value FROM gates", "SELECT sum(actal) / sum(target) AS value FROM gates"),  # Binder: a column
        ("SELECT sum(actual) AS value, sum(target) AS target FROM gates", "SELECT sum(actual) AS value, sum(target) AS target FROM gatez"),  # Catalog
        ("SELECT count(*) AS value FROM (", "SELECT count(*) + CAST(min(site) AS INTEGER) AS value FROM ("),  # Conversion, when it runs
        ("GROUP BY gate ORDER BY gate", "GROUP BY gate ORDER BY gate gate"),  # Parser
        ("layout:\n", SHOW_ROWS_FAILS),
        ("  - [site_gate]", "  - [site_gate]\n  - [brno_volume]"),
    ]
    for old, new in breaks:
        assert old in dashboard_yaml, old
        dashboard_yaml = dashboard_yaml.replace(old, new, 1)
    return dashboard_yaml


@JOURNEY
def test_broken_queries_read_as_sentences_on_specs_dashboard_show_rows_and_review(env):
    """Specs preview, the Dashboard (a steward's draft), Show rows and Review show each failing query as a sentence
    naming the column or table and what to do, never DuckDB's text; the located check lists only gates' columns."""
    at = on_page(signed_in("sam"), "app_pages/specs.py")
    editor = next(t for t in at.text_area if t.label == "dashboard.yaml")
    assert editor.value is not None
    editor.input(broken_queries(editor.value))
    next(b for b in at.button if b.label == "Check and preview").click().run()
    assert engine_text_in(at) == [], page_text(at)
    errors = "\n".join(e.value for e in at.error)
    assert "unknown column 'actal'; did you mean 'actual'?" in errors and "unknown table 'gatez'" in errors
    assert "syntax error" in errors.lower()
    next(c for c in at.checkbox if c.label.startswith("Save it with")).check().run()
    next(b for b in at.button if b.label == "Save to my draft").click().run()
    assert any("Saved to your draft" in s.value for s in at.success)

    at = on_page(at, "app_pages/dashboard.py")
    at.toggle[0].set_value(True).run()  # my draft, on its data
    assert engine_text_in(at) == [], page_text(at)
    shown = "\n".join(e.value for e in at.error)
    assert "'actal'" in shown and "'gatez'" in shown and "is not a number" in shown  # each card says what does not fit
    at.session_state[state.rows_popover("supply-chain-weekly", "brno_volume")] = True
    at.run()
    assert not at.exception and engine_text_in(at) == [], page_text(at)
    assert any("'place'" in e.value for e in at.error)  # the rows behind it cannot be read, and it says which column

    at = on_page(signed_in("olivia"), "app_pages/review.py")
    assert any("Checks: " in e.value for e in at.error)
    assert engine_text_in(at) == [], page_text(at)
    assert "did you mean 'actual'" in page_text(at)


@JOURNEY
def test_data_that_no_longer_fits_reads_as_sentences_on_dashboard_changes_report_and_explore(env):
    """The published data loses a column the dashboard, the report and the profile name (a load the steward
    has not caught up with): every page says which column and what to do, never DuckDB's text."""

    from lib.data.snapshots import Warehouse

    at = signed_in("vera")  # the first view loads the published data
    repo = at.session_state["config_repo"]
    wh = Warehouse.for_workspace(repo.published_path("supply-chain-weekly"))
    gates = wh.tables()["gates"]
    wh.write_snapshot({"gates": gates.rename_columns(["actual_units" if c == "actual" else c for c in gates.column_names])})
    at.run()
    assert not at.exception and engine_text_in(at) == [], page_text(at)
    assert any("'actual'" in e.value and "actual_units" in e.value for e in at.error)
    assert any(e.label.startswith("Changes since the load of") for e in at.expander)  # two loads: the Changes panel compares them
    assert "not compared" in page_text(at)

    at = on_page(at, "app_pages/report.py")
    assert engine_text_in(at) == [], page_text(at)

    at = on_page(at, "app_pages/explore.py")
    next(s for s in at.selectbox if s.label == "Measure").set_value("actual").run()
    assert not at.exception and engine_text_in(at) == [], page_text(at)
    assert any("'actual'" in e.value for e in at.error)


@JOURNEY
def test_publishing_a_draft_that_adds_a_source_loads_it_from_review_or_says_why_it_cannot(env):
    """sam's draft adds a CSV source and a card on it; olivia's publish is refused, with the reason, while its file
    is missing, then publishes and loads it; vera's dashboard shows the card with its figure and no error."""
    import copy

    from lib.memory import workspace
    from lib.roles.access import User

    at = signed_in("vera")  # the published data is loaded, as after any first view
    repo = at.session_state["config_repo"]
    sam, slug = User("sam", app_role="steward"), "supply-chain-weekly"
    draft = repo.draft(sam, slug)
    files = workspace.load(draft.workspace_path)[0].data
    sources, dashboard = copy.deepcopy(files["sources"]), copy.deepcopy(files["dashboard"])
    sources["sources"].append({"name": "orders", "type": "csv", "path": "data/orders.csv"})
    dashboard["components"].append({"id": "kpi_orders", "type": "kpi", "title": "Orders", "query": "SELECT sum(orders) AS value FROM orders", "format": ",d"})
    dashboard["layout"].append(["kpi_orders"])
    repo.save(sam, slug, {"sources": sources, "dashboard": dashboard}, "Orders, and a card on them")

    def publish_on_review() -> AppTest:
        review = on_page(signed_in("olivia"), "app_pages/review.py")
        next(b for b in review.button if b.label == "Publish").click().run()
        next(b for b in review.button if b.label == "Yes, publish").click().run()
        assert not review.exception
        return review

    review = publish_on_review()
    refused = "\n".join(e.value for e in review.error)
    assert "Not published" in refused and "'orders'" in refused and "data/orders.csv" in refused, refused
    assert not any(s.value.startswith("Published") for s in review.success)

    (draft.workspace_path / "data" / "orders.csv").write_text("day,site,orders\n2026-11-16,Brno,1200\n2026-11-17,Porto,34\n", encoding="utf-8")
    repo.save(sam, slug, {}, "The orders file")
    review = publish_on_review()
    [done] = [s.value for s in review.success if s.value.startswith("Published sam's draft")]
    assert "loaded for everyone" in done and "orders (2 rows)" in done

    viewer = signed_in("vera")
    assert not viewer.error, [e.value for e in viewer.error]
    assert {m.label: m.value for m in viewer.metric}["Orders"] == f"{1200 + 34:,}"  # the sum of the file's orders


def test_an_owner_adds_and_removes_people_per_role_on_review_and_a_steward_gets_no_such_form(env):
    from lib.roles.access import User

    steward = on_page(signed_in("sam"), "app_pages/review.py")
    assert "Who may do what" not in [h.value for h in steward.subheader]  # and lib refuses a steward anyway (tests/repo)

    at = on_page(signed_in("olivia"), "app_pages/review.py")
    repo = at.session_state["config_repo"]
    at.selectbox(key="access_add_role").set_value("steward")
    at.text_input(key="access_add_who").input("bob")
    next(b for b in at.button if b.label == "Add to my draft").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert any("added bob to the stewards" in s.value for s in at.success), [s.value for s in at.success]
    warning = next(w.value for w in at.warning if w.value.startswith("Check these before publishing"))
    assert "bob" in warning and "added to stewards" in warning  # Review marks it as an access change
    assert "bob" in repo.access_lists(User("olivia", app_role="owner"), "supply-chain-weekly")["stewards"]
    assert "bob" not in (repo.meta("supply-chain-weekly")["access"].get("stewards") or [])  # the draft only, until published

    at.multiselect(key="access_remove_chosen").set_value(["owner:olivia"])
    next(b for b in at.button if b.label == "Remove from my draft").click().run()
    assert not at.exception and any("at least one owner" in e.value for e in at.error), [e.value for e in at.error]
    at.text_input(key="access_add_who").input("bob smith")
    next(b for b in at.button if b.label == "Add to my draft").click().run()
    assert not at.exception and any("user name" in e.value for e in at.error), [e.value for e in at.error]
    assert repo.access_lists(User("olivia", app_role="owner"), "supply-chain-weekly")["owners"] == ["olivia"]

    at.multiselect(key="access_remove_chosen").set_value(["steward:bob"])
    next(b for b in at.button if b.label == "Remove from my draft").click().run()
    assert any("removed bob from the stewards" in s.value for s in at.success), [s.value for s in at.success]
