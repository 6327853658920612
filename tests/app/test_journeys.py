"""One browser journey per role (issue #12): Debian's chromium driven by Playwright against `streamlit run`.

Each journey works on a workspace with two sources, restarts the app server once
in the middle (same port, same environment; the sign-in cookie and `?ws=` bring
the person back), checks every page it opens for an exception, a traceback or
"Something went wrong", and after every save reads the config repo with git from
this process to check that the draft holds only the lines the person changed.

- steward (sam): adds a CSV source by uploading it on Sources, edits a task rule
  on Specs, edits the dashboard description in the YAML tab (check, preview,
  save), reverts and undoes on History, proposes on Review to a bare `origin`.
- owner (olivia): rejects a second steward's draft and publishes sam's on Review.
- all four steps in one server (issue #31): the steward adds a CSV source and auto-drafts beside the
  curated dashboard, proposes without a remote; the owner is told, adds a viewer group, publishes; the
  viewer sees the new components and no engine text; a restart with next week's file, then Refresh.
- viewer (vera): KPIs, the Sites filter, Refresh, HTML export, Chat without a key,
  a steward page opened by link.

The steward adds the second source through the upload form; the owner's and the
viewer's journeys get it set up beforehand through lib (the owner's as sam's
draft, the viewer's published). Skips where chromium is not installed.
Screenshots go to test-artifacts/journey-<role>-<step>.png.
"""

from __future__ import annotations

import csv
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from lib.ops import publish
from tests.helpers.browser import ARGS, ARTIFACTS, CHROMIUM

from ..conftest import ROOT, WORKSPACES

SLUG = "supply-chain-weekly"
NAME = "Supply chain weekly"
BRANCH_SAM = f"draft/sam/{SLUG}"
GATES = WORKSPACES / SLUG / "data" / "gates.csv"
T = 30_000  # ms: the longest any single step may take on a busy 2-core machine

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} not installed (make test installs it as root)")]


# --------------------------------------------------------------------------- the app server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class App:
    """`streamlit run app.py` on a fixed port; stop and start it again with the same environment."""

    def __init__(self, tmp: Path, users: Path | None = None):
        self.tmp = tmp
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config = tmp / "config-repo"
        self.cache = tmp / "cache"
        self.log_path = tmp / "server.log"
        self.env = {
            **os.environ,
            "DASHMEM_CONFIG_REPO": str(self.config),
            "DASHMEM_CACHE_DIR": str(self.cache),
            "DASHMEM_COOKIE_KEY": "j" * 40,
            "PYTHONPATH": str(ROOT),
        }
        if users:
            self.env["DASHMEM_USERS"] = str(users)
        self.env.pop("ANTHROPIC_API_KEY", None)
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        with self.log_path.open("a") as log:
            log.write(f"\n===== start {self.starts} =====\n")
            log.flush()
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "streamlit",
                    "run",
                    str(ROOT / "app.py"),
                    "--server.headless",
                    "true",
                    "--server.port",
                    str(self.port),
                    "--server.address",
                    "127.0.0.1",
                    "--browser.gatherUsageStats",
                    "false",
                ],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                if urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=1).read() == b"ok":
                    return
            except OSError:
                time.sleep(0.2)
        self.stop()
        pytest.fail("streamlit did not start:\n" + self.log()[-3000:])

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@pytest.fixture
def make_app(tmp_path, monkeypatch):
    """make_app(users=None) -> App, not started; this process's lib uses the same config repo and cache."""
    apps: list[App] = []
    monkeypatch.setenv("DASHMEM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("DASHMEM_CONFIG_REPO", str(tmp_path / "config-repo"))

    def make(users: Path | None = None) -> App:
        app = App(tmp_path, users)
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.stop()


@pytest.fixture
def page():
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
        context.set_default_timeout(T)
        yield context.new_page()
        browser.close()


# --------------------------------------------------------------------------- the browser side

ROLE_OF = {"sam": "steward", "stan": "steward", "vera": "viewer", "olivia": "owner"}


def shot(page, role: str, step: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"journey-{role}-{step}.png"), full_page=True)


def idle(page, timeout: int = T) -> None:
    """Wait until the script run the last action started has finished."""
    page.locator('[data-testid="stApp"][data-test-script-state="notRunning"]').wait_for(state="attached", timeout=timeout)
    page.wait_for_function(
        """() => { const app = document.querySelector('[data-testid="stApp"]');
                   return app && app.getAttribute('data-test-script-state') === 'notRunning'
                       && !document.querySelector('[data-testid="stSkeleton"]'); }""",
        timeout=timeout,
    )


def assert_clean(page, where: str, app: App) -> None:
    """No exception element, no traceback, no 'Something went wrong' on the page."""
    idle(page)
    body = page.locator("body").inner_text()
    problems = []
    if page.locator('[data-testid="stException"]').count():
        problems.append("an exception element")
    if "Traceback" in body:
        problems.append("'Traceback'")
    if "Something went wrong" in body:
        problems.append("'Something went wrong'")
    assert not problems, f"{where}: the page shows {', '.join(problems)}:\n{body[:2000]}\n--- server log (tail) ---\n{app.log()[-3000:]}"


def sign_in(page, url: str, user: str, password: str) -> None:
    page.goto(url)
    page.get_by_label("Username").fill(user)
    page.get_by_role("textbox", name="Password").fill(password)
    page.get_by_role("button", name="Login").click()
    page.get_by_text(f"· {ROLE_OF[user]}").wait_for()
    page.wait_for_function("document.cookie.includes('dashmem_auth=')")  # a new page signs in by it


def choose_workspace(page, name: str) -> None:
    page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').click()
    page.get_by_role("option", name=name).click()
    page.get_by_role("heading", name=name).first.wait_for()


def open_page(page, app: App, path: str, heading: str) -> None:
    page.goto(f"{app.url}/{path}?ws={SLUG}")
    page.get_by_role("heading", name=heading, exact=True).first.wait_for()
    idle(page)


def restart_and_reload(page, app: App, user: str, heading: str) -> None:
    """Stop the server, start it again on the same port, reload: still signed in, same workspace."""
    before = page.url
    app.restart()
    page.reload()
    page.get_by_role("heading", name=heading, exact=True).first.wait_for()
    idle(page)
    assert page.get_by_label("Username").count() == 0, "the reload after a restart shows the sign-in form"
    assert page.get_by_text(f"· {ROLE_OF[user]}").count() == 1
    assert f"ws={SLUG}" in page.url and page.url.split("?")[0] == before.split("?")[0], (before, page.url)
    assert page.locator('[data-testid="stSidebar"]').get_by_role("combobox", name="Workspace").input_value() == NAME


def pick(page, label: str, option) -> None:
    """Choose an option of a selectbox (a click alone does not always open it: the arrow key does)."""
    box = page.locator('[data-testid="stSelectbox"]', has_text=label).get_by_role("combobox")
    box.click()
    if box.get_attribute("aria-expanded") != "true":
        box.press("ArrowDown")
    page.get_by_role("option", name=option).click()
    idle(page)


def kpi_value(page, label: str) -> str:
    idle(page)  # during a run the previous run's elements linger beside the new ones
    metric = page.locator('[data-testid="stMetric"]', has_text=label)
    metric.wait_for()
    return metric.locator('[data-testid="stMetricValue"]').inner_text().strip()


def wait_kpi(page, label: str, expected: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    value = None
    while time.monotonic() < deadline:
        value = kpi_value(page, label)
        if value == expected:
            return
        page.wait_for_timeout(200)
    raise AssertionError(f"KPI {label!r} shows {value!r}, expected {expected!r}")


# --------------------------------------------------------------------------- the config repo side


def git_out(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def changes(config: Path, a: str, b: str) -> dict[str, tuple[list[str], list[str]]]:
    """{file: (removed lines, added lines)} of the workspace between two versions, each list sorted."""
    out: dict[str, tuple[list[str], list[str]]] = {}
    current = None
    for line in git_out(config, "diff", "--unified=0", "--no-color", a, b, "--", SLUG).splitlines():
        if line.startswith("diff --git "):
            current = line.split(" b/", 1)[1][len(SLUG) + 1 :]
            out[current] = ([], [])
        elif line.startswith(("---", "+++", "@@", "index ", "new file", "deleted file")):
            continue
        elif current and line.startswith("-"):
            out[current][0].append(line[1:])
        elif current and line.startswith("+"):
            out[current][1].append(line[1:])
    return {f: (sorted(r), sorted(a_)) for f, (r, a_) in out.items()}


def draft_changes(config: Path, branch: str) -> dict[str, tuple[list[str], list[str]]]:
    """What the draft branch changes since it left main (what ConfigRepo.draft_diff shows)."""
    base = git_out(config, "merge-base", "main", branch).strip()
    return changes(config, base, branch)


def expect(*parts: dict) -> dict[str, tuple[list[str], list[str]]]:
    merged: dict[str, tuple[list[str], list[str]]] = {}
    for part in parts:
        for f, (removed, added) in part.items():
            r, a = merged.setdefault(f, ([], []))
            r.extend(removed)
            a.extend(added)
    return {f: (sorted(r), sorted(a)) for f, (r, a) in merged.items()}


def sites_csv(folder: Path) -> Path:
    """A small second source: one row per site of gates.csv."""
    with GATES.open() as f:
        sites = sorted({row["site"] for row in csv.DictReader(f)})
    path = folder / "sites.csv"
    path.write_text("site,region,manager\n" + "".join(f"{s},R{i % 2 + 1},M{i}\n" for i, s in enumerate(sites)))
    return path


def attainment(site: str | None = None) -> str:
    """The 'Attainment this week' KPI as the dashboard must show it, computed from the CSV here."""
    with GATES.open() as f:
        rows = [r for r in csv.DictReader(f) if site is None or r["site"] == site]
    return f"{sum(int(r['actual']) for r in rows) / sum(int(r['target']) for r in rows):.1%}"


def lib_second_source(app: App, user, csv_path: Path) -> dict:
    """Add the sites source to `user`'s draft through lib, as the upload form would; returns the source."""
    from lib.data.connectors.csv_source import store_upload
    from lib.repo.configrepo import ConfigRepo

    repo = ConfigRepo.open_or_create(app.config, WORKSPACES)
    stored = store_upload(app.cache / "uploads" / SLUG, csv_path.name, csv_path.read_bytes())
    source = {"name": "sites", "type": "csv", "path": stored}
    sources = git_out(app.config, "show", f"main:{SLUG}/sources.yaml")
    current = yaml.safe_load(sources)["sources"]
    assert repo.save(user, SLUG, {"sources": {"sources": current + [source]}}, "Add source sites")
    return source


def lib_edit_rule(app: App, user, rule_id: str, text: str) -> None:
    from lib.memory import workspace
    from lib.repo.configrepo import ConfigRepo

    repo = ConfigRepo(app.config)
    ws, _ = workspace.load(repo.draft(user, SLUG).workspace_path)
    task = ws.get("task")
    task["rules"] = [{**r, "text": text} if r["id"] == rule_id else r for r in task["rules"]]
    assert repo.save(user, SLUG, {"task": task}, f"Edit rule {rule_id}")


def rule_line(rule_id: str, text: str | None = None) -> str:
    """The `text:` line of a rule in task.yaml as saved (the original text unless `text` is given)."""
    lines = (WORKSPACES / SLUG / "task.yaml").read_text().splitlines()
    at = lines.index(f"  - id: {rule_id}")
    original = lines[at + 1]
    assert original.startswith("    text: "), original
    return original if text is None else f"    text: {text}"


# --------------------------------------------------------------------------- the journeys


def test_steward_journey(make_app, page, tmp_path):
    bugs: list[str] = []  # what the journey found wrong but could walk around, to go on; asserted at the end
    app = make_app()
    app.start()
    csv_path = sites_csv(tmp_path)
    sign_in(page, app.url, "sam", "sam-demo")
    choose_workspace(page, NAME)
    kpi_value(page, "Attainment this week")
    assert_clean(page, "Dashboard", app)
    shot(page, "steward", "01-dashboard")

    # The server created the config repo; give it a remote for proposals.
    remote = tmp_path / "remote.git"
    git_out(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    git_out(app.config, "remote", "add", "origin", str(remote))

    # Sources: upload a second CSV and add it to the draft.
    open_page(page, app, "sources", "Sources")
    assert_clean(page, "Sources", app)
    form = page.locator('[data-testid="stForm"]', has=page.get_by_role("button", name="Add to my draft"))
    form.get_by_role("textbox", name="Table name", exact=True).fill("sites")
    form.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(csv_path))
    form.get_by_text("sites.csv").first.wait_for()
    form.get_by_role("textbox", name="Description", exact=True).fill("One row per site with its region and manager.")
    shot(page, "steward", "02-sources-filled")
    form.get_by_role("button", name="Add to my draft").click()
    # One click: the source is saved, loaded into the draft's data and profiled, and its profile shows at once.
    page.get_by_text("Added sites to your draft: 6 rows loaded and profiled").wait_for()
    page.get_by_role("heading", name="sites · 6 rows").wait_for()
    assert page.get_by_text(re.compile(r"^gates\.site → sites\.site · candidate")).count() == 1, page.locator("body").inner_text()[-3000:]
    assert_clean(page, "Sources after adding", app)
    shot(page, "steward", "03-sources-added")
    found = re.search(r"path: (upload:\S+)", git_out(app.config, "show", f"{BRANCH_SAM}:{SLUG}/sources.yaml"))
    assert found, "the draft's sources.yaml names the uploaded file"
    stored = found.group(1)
    profiled = draft_changes(app.config, BRANCH_SAM)["profile.yaml"]
    assert "  - name: sites" in profiled[1] and all(line.startswith(("data_version:", "relationships:")) for line in profiled[0]), profiled
    added_source = {
        "sources.yaml": ([], ["  - name: sites", "    type: csv", "    description: One row per site with its region and manager.", f"    path: {stored}"]),
        "profile.yaml": profiled,
    }
    assert draft_changes(app.config, BRANCH_SAM) == expect(added_source)
    assert (app.cache / "uploads" / SLUG / stored.split(":", 1)[1]).read_bytes() == csv_path.read_bytes()

    # Specs: change one task rule's text.
    open_page(page, app, "specs", "Specs")
    assert_clean(page, "Specs", app)
    new_rule = "Label weeks as ISO weeks (2026-W47), never as dates."
    rule = page.locator('[data-testid="stExpander"]').filter(has=page.locator("summary", has_text="week-label"))
    rule.locator("summary").click()
    rule.get_by_role("textbox", name="Text", exact=True).fill(new_rule)
    page.get_by_role("button", name="Save task rules").click()
    page.get_by_text("Saved to your draft as").wait_for()
    assert_clean(page, "Specs after saving task rules", app)
    shot(page, "steward", "04-specs-rule-saved")
    edited_rule = {"task.yaml": ([rule_line("week-label")], [rule_line("week-label", new_rule)])}
    assert draft_changes(app.config, BRANCH_SAM) == expect(added_source, edited_rule)

    # Specs, Dashboard YAML: change the description, check and preview, save.
    page.get_by_role("tab", name="Dashboard YAML").click()
    editor = page.get_by_role("textbox", name="dashboard.yaml", exact=True)
    editor.wait_for()
    yaml_text = editor.input_value()
    old_desc = next(line for line in yaml_text.splitlines() if line.startswith("description: "))
    new_desc = "description: Gate attainment (actual / target) by gate and site this week; green gates met the attainment rule."
    editor.fill(yaml_text.replace(old_desc, new_desc))
    page.get_by_role("button", name="Check and preview").click()
    page.get_by_text(re.compile(r"^The checks (pass|found)")).first.wait_for(state="attached")
    idle(page)
    selected = page.get_by_role("tab", selected=True).inner_text().strip()
    if selected != "Dashboard YAML":
        # Bug: the "Saved to your draft" notice above the tabs is gone on this rerun, so st.tabs is a new
        # element and opens its first tab; the checks and preview are hidden in the Dashboard YAML tab.
        shot(page, "steward", "05-bug-tab-jumped")
        bugs.append(
            f"Specs: after 'Save task rules', clicking 'Check and preview' in the Dashboard YAML tab shows "
            f"the {selected!r} tab instead; the checks and the preview are hidden until the person clicks "
            f"'Dashboard YAML' again"
        )
        page.get_by_role("tab", name="Dashboard YAML").click()
    page.get_by_text(re.compile(r"^The checks (pass|found)")).first.wait_for()
    shot(page, "steward", "05-specs-yaml-preview")
    assert page.get_by_text(re.compile(r"^The checks pass")).count() == 1, page.locator("body").inner_text()[:3000]
    preview = page.locator('[data-testid="stExpander"]', has_text="Preview")
    assert preview.locator('[data-testid="stMetric"]').count() >= 3
    assert page.get_by_text("this week; green gates met").count() >= 1  # the diff of the candidate
    assert_clean(page, "Specs preview", app)
    # The editor checks what was typed: a broken text fails; corrected, the next Check passes (it used to
    # check the old text again, as the text area was a new widget once its value argument changed).
    editor.fill(yaml_text.replace(old_desc, new_desc).replace("FROM gates", "FROM gatez", 1))
    page.get_by_role("button", name="Check and preview").click()
    page.get_by_text(re.compile(r"^The checks found")).first.wait_for()
    idle(page)
    editor.fill(yaml_text.replace(old_desc, new_desc))
    page.get_by_role("button", name="Check and preview").click()
    page.get_by_text(re.compile(r"^The checks pass")).first.wait_for()
    idle(page)
    assert "gatez" not in page.locator("body").inner_text(), "the corrected text was not the one checked"
    page.get_by_role("button", name="Save to my draft").click()
    page.get_by_text("Saved to your draft as").wait_for()
    assert_clean(page, "Specs after saving the dashboard", app)
    selected = page.get_by_role("tab", selected=True).inner_text().strip()
    if selected != "Dashboard YAML":  # the same bug: now the notice appeared above the tabs
        bugs.append(f"Specs: 'Save to my draft' in the Dashboard YAML tab saves, then shows the {selected!r} tab instead of the one the person saved from")
    shot(page, "steward", "06-specs-yaml-saved")
    edited_desc = {"dashboard.yaml": ([old_desc], [new_desc])}
    assert draft_changes(app.config, BRANCH_SAM) == expect(added_source, edited_rule, edited_desc)

    # The server restarts; a reload keeps the person signed in and the workspace.
    restart_and_reload(page, app, "sam", "Specs")
    assert_clean(page, "Specs after the restart", app)
    shot(page, "steward", "07-after-restart")

    # History: my draft, its diff, revert to an older version, then undo.
    open_page(page, app, "history", "History")
    assert_clean(page, "History", app)
    page.locator('[data-testid="stRadio"]').get_by_text("my draft", exact=True).click()
    page.get_by_text("Edit the dashboard").first.wait_for(state="attached")  # a cell of the versions table
    idle(page)
    diff = page.locator('[data-testid="stExpander"]', has_text="dashboard.yaml (modified)")
    diff.wait_for()
    assert "this week; green gates met" in diff.inner_text()
    assert_clean(page, "History, my draft", app)
    shot(page, "steward", "08-history-my-draft")
    pick(page, "Restore the workspace to", re.compile(r"· Sam Steward · Edit task rules$"))
    page.get_by_role("button", name="Revert my draft to this version").click()
    page.get_by_text("Your draft now equals").wait_for()
    assert_clean(page, "History after revert", app)
    shot(page, "steward", "09-history-reverted")
    assert draft_changes(app.config, BRANCH_SAM) == expect(added_source, edited_rule)
    page.get_by_role("button", name=re.compile(r"^Undo my last saved change")).click()
    page.get_by_text("Undone: your draft is back").wait_for()
    assert_clean(page, "History after undo", app)
    shot(page, "steward", "10-history-undone")
    assert draft_changes(app.config, BRANCH_SAM) == expect(added_source, edited_rule, edited_desc)

    # Review: the draft with its checks; propose it to origin.
    open_page(page, app, "review", "Review")
    page.get_by_role("heading", name="sam's draft (yours)").wait_for()
    page.get_by_text("Checks pass").first.wait_for()
    assert_clean(page, "Review", app)
    page.get_by_role("button", name="Propose for review (and push for a pull request)").click()
    page.get_by_text("Proposed: the workspace's owners see your draft waiting for their review.").wait_for()  # and pushed: below
    assert_clean(page, "Review after proposing", app)
    shot(page, "steward", "11-review-proposed")
    pushed = git_out(remote, "rev-parse", f"refs/heads/{BRANCH_SAM}").strip()
    assert pushed == git_out(app.config, "rev-parse", BRANCH_SAM).strip()
    assert "Traceback" not in app.log(), app.log()[-4000:]
    assert not bugs, "\n".join(bugs)


def draft_box(page, user: str):
    """The bordered box of one person's draft on the Review page (the innermost block holding its heading)."""
    return (
        page.locator('[data-testid="stVerticalBlock"]')
        .filter(has=page.get_by_role("heading", name=f"{user}'s draft"))
        .filter(has=page.get_by_role("button", name="Reject"))
        .last
    )


def users_with_stan(tmp_path: Path) -> Path:
    """demo/users.yaml plus a second steward, stan (sam's password), in the analysts group."""
    users = yaml.safe_load((ROOT / "demo" / "users.yaml").read_text())
    users["usernames"]["stan"] = {**users["usernames"]["sam"], "name": "Stan Steward", "email": "stan@example.com"}
    path = tmp_path / "users.yaml"
    path.write_text(yaml.safe_dump(users, sort_keys=False))
    return path


def test_owner_journey(make_app, page, tmp_path):
    from lib.roles.access import User

    app = make_app(users_with_stan(tmp_path))
    sam = User("sam", "Sam Steward", "sam@example.com", ("steward", "analysts"), "steward")
    stan = User("stan", "Stan Steward", "stan@example.com", ("steward", "analysts"), "steward")
    # Two drafts exist before the owner looks: sam's (a second source and a rule) and stan's (another rule).
    source = lib_second_source(app, sam, sites_csv(tmp_path))
    sam_rule = "Label weeks as ISO weeks (2026-W47), never as dates."
    lib_edit_rule(app, sam, "week-label", sam_rule)
    lib_edit_rule(app, stan, "attainment-weighted", "Attainment over several rows is always sum(actual) / sum(target).")
    main_before = git_out(app.config, "rev-parse", "main").strip()
    sam_changes = draft_changes(app.config, BRANCH_SAM)
    assert sam_changes == expect(
        {"sources.yaml": ([], sam_changes["sources.yaml"][1])}, {"task.yaml": ([rule_line("week-label")], [rule_line("week-label", sam_rule)])}
    )
    added = "\n".join(sam_changes["sources.yaml"][1])
    assert "name: sites" in added and source["path"] in added and added.count("- ") == 1, added

    app.start()
    sign_in(page, app.url, "olivia", "olivia-demo")
    choose_workspace(page, NAME)
    kpi_value(page, "Attainment this week")
    assert_clean(page, "Dashboard", app)
    shot(page, "owner", "01-dashboard")

    open_page(page, app, "review", "Review")
    page.get_by_role("heading", name="sam's draft").wait_for()
    page.get_by_role("heading", name="stan's draft").wait_for()
    assert page.get_by_text("Checks pass").count() == 2, page.locator("body").inner_text()[:3000]
    assert_clean(page, "Review", app)
    shot(page, "owner", "02-review-two-drafts")

    # Reject stan's draft: it leaves the list, is kept under rejected/, main does not move.
    draft_box(page, "stan").get_by_role("button", name="Reject").click()
    page.get_by_text("Rejected stan's draft").wait_for()
    assert_clean(page, "Review after rejecting", app)
    shot(page, "owner", "03-review-rejected")
    heads = git_out(app.config, "for-each-ref", "--format=%(refname:short)", "refs/heads").split()
    assert f"draft/stan/{SLUG}" not in heads and any(h.startswith(f"rejected/stan/{SLUG}/") for h in heads), heads
    assert git_out(app.config, "rev-parse", "main").strip() == main_before
    assert page.get_by_role("heading", name="stan's draft").count() == 0

    # The server restarts in the middle of the review.
    restart_and_reload(page, app, "olivia", "Review")
    page.get_by_role("heading", name="sam's draft").wait_for()
    assert page.get_by_role("heading", name="stan's draft").count() == 0
    assert_clean(page, "Review after the restart", app)
    shot(page, "owner", "04-after-restart")

    # Publish sam's draft, confirming.
    draft_box(page, "sam").get_by_role("button", name="Publish", exact=True).click()
    page.get_by_text("Publish sam's draft to everyone").wait_for()
    shot(page, "owner", "05-review-confirm")
    page.get_by_role("button", name="Yes, publish").click()
    page.get_by_text("Published sam's draft").wait_for()
    assert_clean(page, "Review after publishing", app)
    shot(page, "owner", "06-review-published")
    main_after = git_out(app.config, "rev-parse", "main").strip()
    assert main_after != main_before
    assert changes(app.config, main_before, "main") == sam_changes  # main holds exactly sam's lines
    assert rule_line("week-label", sam_rule) in (app.config / SLUG / "task.yaml").read_text().splitlines()
    assert "name: sites" in (app.config / SLUG / "sources.yaml").read_text()

    # Everyone sees it: History lists the publish, the dashboard still draws.
    open_page(page, app, "history", "History")
    page.get_by_text(f"Publish {SLUG} from {BRANCH_SAM}").first.wait_for(state="attached")
    assert_clean(page, "History", app)
    shot(page, "owner", "07-history-published")
    open_page(page, app, "", NAME)
    kpi_value(page, "Attainment this week")
    assert_clean(page, "Dashboard after publishing", app)
    assert "Traceback" not in app.log(), app.log()[-4000:]


def test_viewer_journey(make_app, page, tmp_path):
    from lib.repo.configrepo import ConfigRepo
    from lib.roles.access import User

    app = make_app()
    sam = User("sam", "Sam Steward", "sam@example.com", ("steward", "analysts"), "steward")
    olivia = User("olivia", "Olivia Owner", "olivia@example.com", ("owner",), "owner")
    lib_second_source(app, sam, sites_csv(tmp_path))  # the published workspace has two sources
    publish.publish_branch(ConfigRepo(app.config), olivia, SLUG, BRANCH_SAM)
    assert "name: sites" in git_out(app.config, "show", f"main:{SLUG}/sources.yaml")

    app.start()
    sign_in(page, app.url, "vera", "vera-demo")
    choose_workspace(page, NAME)
    assert kpi_value(page, "Attainment this week") == attainment()
    assert kpi_value(page, "Units through the gates")
    assert kpi_value(page, "Site-gates below target")
    assert page.get_by_text(re.compile(r"gates: 126 rows, sites: 6 rows")).count() == 1  # both sources are served
    assert_clean(page, "Dashboard", app)
    shot(page, "viewer", "01-dashboard")

    # The Sites filter: the KPI follows, and equals the CSV's own sum(actual) / sum(target) for that site.
    page.locator('[data-testid="stMultiSelect"]', has_text="Sites").click()
    page.get_by_role("option", name="Brno").click()
    page.keyboard.press("Escape")
    wait_kpi(page, "Attainment this week", attainment("Brno"))
    assert_clean(page, "Dashboard filtered", app)
    shot(page, "viewer", "02-dashboard-filtered")

    # Refresh: a one-line headline says what happened.
    first_load = page.locator('[data-testid="stExpander"] summary', has_text="Refreshed: new data loaded")
    first_load.wait_for()  # the first load's report, before the click
    page.get_by_role("button", name="Refresh").click()
    # The data has not changed since the first load, so the new headline says it checked.
    headline = page.locator('[data-testid="stExpander"] summary', has_text="Checked the sources")
    headline.wait_for()
    assert first_load.count() == 0
    text = headline.locator('[data-testid="stMarkdownContainer"]').inner_text().strip()
    assert re.fullmatch(r"(Checked the sources|Refreshed)[^\n]*, 0 model calls\)?", text), text
    assert_clean(page, "Dashboard refreshed", app)
    shot(page, "viewer", "03-dashboard-refreshed")

    # The server restarts; a reload keeps the viewer signed in on the workspace.
    restart_and_reload(page, app, "vera", NAME)
    assert kpi_value(page, "Attainment this week") == attainment()
    assert_clean(page, "Dashboard after the restart", app)
    shot(page, "viewer", "04-after-restart")

    # Export HTML, then download it.
    page.get_by_role("button", name="Export HTML").click()
    download_button = page.get_by_role("button", name="Download the HTML file")
    download_button.wait_for()
    with page.expect_download() as info:
        download_button.click()
    target = tmp_path / "export.html"
    info.value.save_as(target)
    html = target.read_text()
    assert info.value.suggested_filename == f"{SLUG}.html"
    assert html.lstrip().lower().startswith("<!doctype html") and "Attainment this week" in html
    assert_clean(page, "Dashboard after export", app)
    shot(page, "viewer", "05-dashboard-exported")

    # Chat without a key: what a viewer can do instead.
    open_page(page, app, "chat", "Chat")
    page.get_by_text("Chat with Claude is not set up on this server").wait_for()
    assert page.get_by_text("Edit the dashboard").count() == 0
    assert_clean(page, "Chat", app)
    shot(page, "viewer", "06-chat")

    # A steward page by link: the reason, and the dashboard instead.
    page.goto(f"{app.url}/sources?ws={SLUG}")
    page.get_by_text("page is for stewards and owners").wait_for()
    assert page.get_by_role("heading", name="Sources").count() == 0
    assert_clean(page, "Sources by link", app)
    shot(page, "viewer", "07-sources-refused")
    assert "Traceback" not in app.log(), app.log()[-4000:]


ENGINE_TEXT = re.compile(r"(Binder|Catalog|Parser|Conversion|Invalid Input|Out of Range) Error|psycopg2\.|pymysql\.|duckdb\.")


def attainment_of(path: Path) -> str:
    with path.open() as f:
        rows = list(csv.DictReader(f))
    return f"{sum(int(r['actual']) for r in rows) / sum(int(r['target']) for r in rows):.1%}"


def component_ids(text: str, file: str) -> list[str]:
    doc = yaml.safe_load(text)
    return [c["id"] for c in doc["components"]] if file == "dashboard.yaml" else [s["id"] for s in doc.get("sections") or []]


def test_four_roles_hand_over_a_new_source(make_app, page, tmp_path):
    """Issue #31's journey in one server: the steward adds a CSV source and auto-drafts beside the curated
    dashboard, proposes (no remote); the owner sees the draft waiting, changes who may view, publishes both;
    the viewer's dashboard renders the new components with no engine text; the server restarts with next
    week's gates.csv put in the published workspace's data folder, and the viewer's next Refresh serves it."""
    app = make_app()
    app.start()
    csv_path = sites_csv(tmp_path)
    published_ids = component_ids((WORKSPACES / SLUG / "dashboard.yaml").read_text(), "dashboard.yaml")

    # The steward: add the source (loaded and profiled at once), auto-draft from it, added to the dashboard.
    sign_in(page, app.url, "sam", "sam-demo")
    choose_workspace(page, NAME)
    kpi_value(page, "Attainment this week")
    open_page(page, app, "sources", "Sources")
    form = page.locator('[data-testid="stForm"]', has=page.get_by_role("button", name="Add to my draft"))
    form.get_by_role("textbox", name="Table name", exact=True).fill("sites")
    form.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(csv_path))
    form.get_by_text("sites.csv").first.wait_for()
    form.get_by_role("button", name="Add to my draft").click()
    page.get_by_text("Added sites to your draft: 6 rows loaded and profiled").wait_for()
    assert_clean(page, "Sources after adding", app)
    shot(page, "handover", "01-steward-source-added")

    open_page(page, app, "chat", "Chat")
    page.get_by_role("heading", name=re.compile("^Auto-draft a dashboard or a report")).wait_for()
    page.locator('[data-testid="stRadio"]', has_text="Draft").get_by_text("A dashboard", exact=True).click()
    idle(page)
    drafted_from = page.locator('[data-testid="stMultiSelect"]', has_text="Draft from")
    assert "sites" in drafted_from.inner_text() and "gates" not in drafted_from.inner_text(), drafted_from.inner_text()
    assert page.get_by_role("radio", name="Add to it").is_checked()
    page.get_by_role("button", name="Auto-draft").click()
    page.get_by_text("Proposed change (not saved yet)").wait_for()
    idle(page)
    body = page.locator("body").inner_text()
    assert "removes" not in body.lower() or "removes nothing" in body.lower(), body[-3000:]
    assert_clean(page, "Chat, the auto-draft shown", app)
    shot(page, "handover", "02-steward-autodraft")
    page.get_by_role("button", name="Save to my draft").click()
    page.get_by_text("Saved to your draft").first.wait_for()
    drafted = component_ids(git_out(app.config, "show", f"{BRANCH_SAM}:{SLUG}/dashboard.yaml"), "dashboard.yaml")
    assert drafted[: len(published_ids)] == published_ids, drafted  # every curated component kept, in order
    new_ids = drafted[len(published_ids) :]
    assert new_ids and len(set(drafted)) == len(drafted), drafted
    new_dashboard = yaml.safe_load(git_out(app.config, "show", f"{BRANCH_SAM}:{SLUG}/dashboard.yaml"))
    new_titles = [c["title"] for c in new_dashboard["components"] if c["id"] in new_ids and c.get("title")]
    assert new_titles, new_dashboard["components"]

    open_page(page, app, "review", "Review")
    page.get_by_role("heading", name="sam's draft (yours)").wait_for()
    page.get_by_role("button", name="Propose for review").click()
    page.get_by_text("Proposed: the workspace's owners see your draft waiting for their review.").wait_for()
    assert_clean(page, "Review after proposing", app)
    shot(page, "handover", "03-steward-proposed")
    page.context.clear_cookies()

    # The owner: told a draft waits, adds a viewer group, publishes sam's draft and then her access change.
    sign_in(page, app.url, "olivia", "olivia-demo")
    page.locator('[data-testid="stSidebar"]').get_by_text("1 proposed draft waits for your review").wait_for()
    open_page(page, app, "review", "Review")
    page.get_by_text("1 proposed draft waits for your review: sam's").wait_for()
    access_form = page.locator('[data-testid="stForm"]', has=page.get_by_role("button", name="Add to my draft"))
    pick(page, "Role", "viewer")
    access_form.get_by_role("textbox", name="Person or group").fill("group:finance")
    access_form.get_by_role("button", name="Add to my draft").click()
    page.get_by_text("Saved to your draft:").first.wait_for()
    assert_clean(page, "Review after the access change", app)
    shot(page, "handover", "04-owner-access-changed")
    draft_box(page, "sam").get_by_role("button", name="Publish", exact=True).click()
    page.get_by_role("button", name="Yes, publish").click()
    page.get_by_text("Published sam's draft").wait_for(timeout=90_000)  # it loads the sites source for everyone
    assert_clean(page, "Review after publishing sam's draft", app)
    own = (
        page.locator('[data-testid="stVerticalBlock"]')
        .filter(has=page.get_by_role("heading", name="olivia's draft (yours)"))
        .filter(has=page.get_by_role("button", name="Publish", exact=True))
        .last
    )
    own.get_by_role("button", name="Publish", exact=True).click()
    page.get_by_role("button", name="Yes, publish").click()
    page.get_by_text("Published olivia's draft").wait_for(timeout=90_000)
    assert_clean(page, "Review after publishing the access change", app)
    shot(page, "handover", "05-owner-published")
    published = yaml.safe_load(git_out(app.config, "show", f"main:{SLUG}/workspace.yaml"))
    assert "group:finance" in published["access"]["viewers"], published["access"]
    assert component_ids(git_out(app.config, "show", f"main:{SLUG}/dashboard.yaml"), "dashboard.yaml") == drafted
    page.context.clear_cookies()

    # The viewer: the published dashboard with the new components, no engine text.
    sign_in(page, app.url, "vera", "vera-demo")
    choose_workspace(page, NAME)
    assert kpi_value(page, "Attainment this week") == attainment_of(GATES)
    idle(page)
    shot(page, "handover", "06-viewer-dashboard")
    for title in new_titles:
        page.get_by_text(title, exact=True).filter(visible=True).first.wait_for()
    assert_clean(page, "Viewer's dashboard", app)
    body = page.locator("body").inner_text()
    assert not ENGINE_TEXT.search(body), ENGINE_TEXT.search(body)

    # Next week's file arrives in the published workspace's data folder; the server restarts; Refresh serves it.
    next_week = WORKSPACES / SLUG / "data" / "next_week" / "gates.csv"
    assert attainment_of(next_week) != attainment_of(GATES)
    (app.config / SLUG / "data" / "gates.csv").write_bytes(next_week.read_bytes())
    restart_and_reload(page, app, "vera", NAME)
    page.get_by_role("button", name="Refresh").click()
    wait_kpi(page, "Attainment this week", attainment_of(next_week), timeout_s=60)
    assert (app.config / SLUG / "data" / "gates.csv").read_bytes() == next_week.read_bytes()  # the repair kept it
    assert_clean(page, "Viewer's dashboard after the restart and Refresh", app)
    body = page.locator("body").inner_text()
    assert not ENGINE_TEXT.search(body), ENGINE_TEXT.search(body)
    shot(page, "handover", "07-viewer-next-week")
    assert "Traceback" not in app.log(), app.log()[-4000:]
