"""The app in a real browser: Debian's chromium driven by Playwright against `streamlit run`.

Skips, saying why, where chromium is not installed; `make test` installs it
(as root, from Debian's packages), so CI runs these. Screenshots go to
test-artifacts/.
"""

from __future__ import annotations

import re
import shutil
import time

from tests.helpers.browser import ARTIFACTS, BROWSER, choose_workspace, kpi_value, sign_in

from ..conftest import ROOT

pytestmark = BROWSER


def test_sign_in_open_dashboard_refresh_and_see_new_numbers(server, page):
    url, tmp = server
    sign_in(page, url, "vera", "vera-demo")
    choose_workspace(page, "Supply chain weekly")
    before = kpi_value(page, "Attainment this week")
    assert before.endswith("%")
    page.screenshot(path=str(ARTIFACTS / "browser-dashboard-before.png"), full_page=True)
    data = tmp / "config-repo" / "supply-chain-weekly" / "data"
    shutil.copy(data / "next_week" / "gates.csv", data / "gates.csv")  # next week's file arrives
    page.get_by_role("button", name="Refresh").click()
    deadline = time.monotonic() + 30
    after = before
    while time.monotonic() < deadline and after == before:
        time.sleep(0.3)
        after = kpi_value(page, "Attainment this week")
    page.screenshot(path=str(ARTIFACTS / "browser-dashboard-after-refresh.png"), full_page=True)
    assert after != before, "the KPI did not change after Refresh"
    page.get_by_text("Week **2026-W48**".replace("**", "")).first.wait_for(timeout=30_000)


def test_every_switch_of_workspace_in_the_sidebar_opens_the_one_chosen(server, page):
    """The box's identity followed the open workspace, so every other choice went to a box no longer shown."""
    url, _ = server
    sign_in(page, url, "vera", "vera-demo")
    for name in ("Supply chain weekly", "GDP explorer", "Supply chain weekly", "GDP explorer"):
        choose_workspace(page, name)
        picker = page.locator('[data-testid="stSidebar"]').get_by_role("combobox", name="Workspace")
        assert picker.input_value() == name


def test_deep_link_while_signed_out_shows_the_sign_in_form_then_the_page(server, page):
    url, _ = server
    page.goto(f"{url}/specs?ws=supply-chain-weekly")
    page.get_by_label("Username").wait_for(timeout=30_000)
    page.screenshot(path=str(ARTIFACTS / "browser-deep-link-signed-out.png"))
    assert page.get_by_role("textbox", name="Password").is_visible()
    assert page.get_by_text("Task rules").count() == 0
    page.get_by_label("Username").fill("sam")
    page.get_by_role("textbox", name="Password").fill("sam-demo")
    page.get_by_role("button", name="Login").click()
    page.get_by_role("heading", name="Specs").wait_for(timeout=30_000)
    page.get_by_text("Task rules").first.wait_for(timeout=30_000)
    page.screenshot(path=str(ARTIFACTS / "browser-deep-link-after-sign-in.png"))


def test_a_reload_keeps_the_sign_in_and_the_workspace(server, page):
    url, _ = server
    sign_in(page, url, "sam", "sam-demo")
    choose_workspace(page, "Supply chain weekly")
    page.reload()  # a new Streamlit session: the cookie signs in again, the URL names the workspace
    page.get_by_role("heading", name="Supply chain weekly").wait_for(timeout=30_000)
    page.goto(f"{url}/history?ws=supply-chain-weekly")
    page.get_by_role("heading", name="History").wait_for(timeout=30_000)
    page.get_by_text("Create config repo from templates").first.wait_for(state="attached", timeout=30_000)
    page.screenshot(path=str(ARTIFACTS / "browser-history-after-reload.png"))
    assert page.get_by_label("Username").count() == 0


def test_a_viewer_who_opens_a_steward_page_by_link_is_told_why(server, page):
    url, _ = server
    sign_in(page, url, "vera", "vera-demo")
    page.goto(f"{url}/sources?ws=supply-chain-weekly")
    page.get_by_text("page is for stewards and owners").wait_for(timeout=30_000)
    page.screenshot(path=str(ARTIFACTS / "browser-viewer-refused-page.png"))
    assert page.get_by_role("heading", name="Sources").count() == 0


def test_nothing_is_fetched_from_outside_this_server(server, page):
    """The app works offline: every request the browser makes goes to the app's own server."""
    from urllib.parse import urlparse

    url, _ = server
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    sign_in(page, url, "sam", "sam-demo")
    choose_workspace(page, "Supply chain weekly")
    kpi_value(page, "Attainment this week")
    page.goto(f"{url}/sources?ws=supply-chain-weekly")
    page.get_by_role("heading", name="Sources").wait_for(timeout=30_000)
    page.wait_for_timeout(1500)
    outside = sorted({u for u in requested if urlparse(u).scheme in ("http", "https", "ws", "wss") and urlparse(u).hostname not in ("127.0.0.1", "localhost")})
    assert requested and not outside, outside


def test_a_viewer_opens_explain_on_a_kpi_and_reads_its_sql_and_source(server, page):
    url, _ = server
    sign_in(page, url, "vera", "vera-demo")
    choose_workspace(page, "Supply chain weekly")
    kpi_value(page, "Attainment this week")
    page.get_by_role("button", name=re.compile("Explain")).first.click()  # the first component's: Attainment this week
    page.get_by_text("Where this number comes from").wait_for(timeout=30_000)
    page.locator('[data-testid="stCode"]', has_text="SELECT sum(actual) / sum(target) AS value FROM gates").first.wait_for(timeout=30_000)
    page.get_by_text("file data/gates.csv").first.wait_for(state="attached", timeout=30_000)
    page.screenshot(path=str(ARTIFACTS / "browser-dashboard-explain.png"), full_page=True)


def test_a_viewer_opens_an_earlier_load_and_sees_its_figure_under_a_banner(server, page):
    import csv

    from lib.core.formats import format_value

    url, tmp = server
    sign_in(page, url, "vera", "vera-demo")
    choose_workspace(page, "Supply chain weekly")
    kpi_value(page, "Attainment this week")
    data = tmp / "config-repo" / "supply-chain-weekly" / "data"
    shutil.copy(data / "next_week" / "gates.csv", data / "gates.csv")  # a second load (unchanged if an earlier test made it)
    page.get_by_role("button", name="Refresh").click()
    choice = page.locator('[data-testid="stSelectbox"]', has_text="Data as of")
    choice.wait_for(timeout=30_000)
    page.get_by_text(re.compile(r"^was \d")).first.wait_for(timeout=30_000)  # each KPI's value at the previous load
    latest = kpi_value(page, "Attainment this week")
    choice.click()
    page.get_by_role("option").last.click()  # the oldest kept load: the demo's own file
    page.get_by_text("not what everyone sees").wait_for(timeout=30_000)
    with (ROOT / "workspaces" / "supply-chain-weekly" / "data" / "gates.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    expected = format_value(sum(int(r["actual"]) for r in rows) / sum(int(r["target"]) for r in rows), ".1%")
    deadline = time.monotonic() + 30
    shown = latest
    while time.monotonic() < deadline and shown != expected:
        time.sleep(0.3)
        shown = kpi_value(page, "Attainment this week")
    page.screenshot(path=str(ARTIFACTS / "browser-dashboard-data-as-of.png"), full_page=True)
    assert shown == expected != latest


def test_the_run_log_times_each_script_run_in_the_server(server, page):
    """DASHMEM_RUN_LOG (bench.app's server-side measure): a sign-in is two runs of one session, the form and
    then the signed-in page, each logged from the browser's request to its last message queued."""
    from lib.core import runlog

    url, tmp = server
    log = tmp / "runs.jsonl"
    page.goto(url)  # the server's first run installs the log (the runs asked for before it are not logged)
    page.get_by_label("Username").wait_for(timeout=30_000)
    before = len(runlog.read(log))
    sign_in(page, url, "vera", "vera-demo")  # a new session
    page.wait_for_function("document.querySelector('[data-testid=\"stApp\"]').getAttribute('data-test-script-state') === 'notRunning'")
    deadline = time.monotonic() + 30  # the line is written just after the browser is sent the run's end
    while time.monotonic() < deadline and len([r for r in runlog.read(log)[before:] if r["ended"] == "finished"]) < 2:
        time.sleep(0.1)
    runs = runlog.read(log)[before:]
    assert len({r["session"] for r in runs}) == 1, runs
    assert len([r for r in runs if r["ended"] == "finished"]) >= 2, runs
    assert all(r["asked"] <= r["done"] for r in runs), runs


def test_a_viewer_subscribes_to_the_report_on_the_deliveries_page_and_unsubscribes(server, page, monkeypatch):
    from lib.delivery import run as delivery
    from lib.memory import workspace
    from lib.roles import auth
    from lib.roles.access import User

    url, tmp = server
    monkeypatch.setenv("DASHMEM_CACHE_DIR", str(tmp / "cache"))  # the server's cache, where its delivery record is
    path = tmp / "config-repo" / "supply-chain-weekly"  # made by the server when someone first signs in

    def mine() -> list[bool]:
        meta = workspace.load(path)[0].data["workspace"]
        return [o.mine for o in delivery.offers(path, meta, User("vera"), auth.load_credentials())]

    sign_in(page, url, "vera", "vera-demo")
    assert mine() == [False]
    page.goto(f"{url}/deliveries?ws=supply-chain-weekly")
    page.get_by_text("report (pdf) every 1 week to olivia").wait_for(timeout=30_000)
    switch = page.get_by_role("switch", name="Send it to me")
    assert not switch.is_checked()
    page.get_by_text("Send it to me").click()  # its label: the input itself is drawn by the label
    page.get_by_text("Subscribed: it comes to you from its next send").wait_for(timeout=30_000)
    assert mine() == [True]
    page.screenshot(path=str(ARTIFACTS / "browser-deliveries-subscribed.png"), full_page=True)
    page.reload()
    page.get_by_text("report (pdf) every 1 week to olivia").wait_for(timeout=30_000)
    assert switch.is_checked()  # kept across a reload: it is in the delivery record
    page.get_by_text("Send it to me").click()  # its label: the input itself is drawn by the label
    page.get_by_text("Unsubscribed: it no longer comes to you").wait_for(timeout=30_000)
    assert mine() == [False]


def test_a_steward_adds_a_subscription_in_the_form_and_review_shows_it_as_an_access_change(server, page):
    from lib.memory import workspace
    from lib.repo.configrepo import ConfigRepo
    from lib.roles.access import User

    url, tmp = server
    sign_in(page, url, "sam", "sam-demo")
    page.goto(f"{url}/deliveries?ws=supply-chain-weekly")
    form = page.locator('[data-testid="stForm"]', has_text="A subscription")
    form.wait_for(timeout=30_000)
    form.locator('[data-testid="stSelectbox"]', has_text="Send").click()
    page.get_by_role("option", name="the report as HTML", exact=True).click()
    form.locator('[data-testid="stMultiSelect"]', has_text="To").click()
    page.keyboard.type("vera")
    page.get_by_role("option", name="vera", exact=True).click()
    page.keyboard.press("Escape")
    form.locator('[data-testid="stMultiSelect"]', has_text="To").get_by_text("vera", exact=True).wait_for(timeout=30_000)
    form.get_by_role("button", name="Add to my draft").click()
    page.get_by_text("Saved to your draft: subscription added: report (html) every 1 week to vera").wait_for(timeout=30_000)
    repo = ConfigRepo(tmp / "config-repo")
    draft = workspace.load(repo.draft(User("sam", app_role="steward"), "supply-chain-weekly").workspace_path)[0].data["workspace"]
    assert {"to": ["vera"], "send": "report", "format": "html", "every": "1 week"} in draft["subscriptions"]
    page.goto(f"{url}/review?ws=supply-chain-weekly")
    page.get_by_text("sends by e-mail: 'report (html) every 1 week to vera'").first.wait_for(timeout=30_000)
    page.screenshot(path=str(ARTIFACTS / "browser-deliveries-steward.png"), full_page=True)
