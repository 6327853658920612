"""Scheduled refresh (issue #18, item 6): `refresh: {every: ...}`, `python -m lib refresh --all`, its lock, and
the Dashboard page's next-refresh text and stale badge, with the last success written by another process."""

from __future__ import annotations

import csv
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from lib.memory import workspace
from lib.memory.intervals import ScheduleError, parse_every
from lib.ops import schedule
from tests.helpers.app import signed_in

from ..conftest import ROOT, WORKSPACES, LocalHTTPServer

TIMEOUT_S = 180  # a hung subprocess fails the test instead of hanging the run; not a timing assert
HOUR = dt.timedelta(hours=1)
ITEMS = [{"id": n, "name": f"item {n}"} for n in range(1, 8)]


# --------------------------------------------------------------------------- the interval and its schema


@pytest.mark.parametrize(
    "text, expected",
    [
        ("15m", dt.timedelta(minutes=15)),
        ("1h", HOUR),
        ("1d", dt.timedelta(days=1)),
        ("90m", dt.timedelta(minutes=90)),
        ("7d", dt.timedelta(days=7)),
        ("1w", dt.timedelta(days=7)),
        ("1 hour", HOUR),
        ("30 minutes", dt.timedelta(minutes=30)),
        ("2 days", dt.timedelta(days=2)),
        ("1 week", dt.timedelta(days=7)),
        ("2weeks", dt.timedelta(days=14)),
    ],
)
def test_accepted_intervals(text, expected):
    assert parse_every(text) == expected


@pytest.mark.parametrize(
    "text", ["1  hour", "1 h", "1H", "1 Hour", "0h", "01h", "1.5h", "h", "", "15", "1 fortnight", "60s", "-1h", 60, None, "1h\n", "1 week\n"]
)
def test_other_intervals_are_refused_naming_the_file_and_the_accepted_forms(text):
    with pytest.raises(ScheduleError) as caught:
        parse_every(text, "sales/workspace.yaml: refresh.every")
    message = str(caught.value)
    assert message.startswith("sales/workspace.yaml: refresh.every: ")
    assert repr(text) in message and "15m, 1h, 1d" in message


def write_meta(folder: Path, extra: str) -> Path:
    shutil.copytree(WORKSPACES / "gdp-explorer", folder)
    with open(folder / "workspace.yaml", "a", encoding="utf-8") as out:
        out.write(extra)
    return folder


@pytest.mark.parametrize(
    "extra, words",
    [
        ("refresh:\n  every: hourly\n", ['"hourly" does not have the required form', "m, h, d or w", '"15m"']),
        ("refresh:\n  every: 0h\n", ['"0h" does not have the required form']),
        ('refresh:\n  every: "1h\\n"\n', ["does not have the required form"]),  # `$` alone would let a newline through
        ("refresh: {}\n", ["every"]),
        ("refresh:\n  every: 1h\n  at: '03:00'\n", ["at"]),
        ("refresh: hourly\n", ["refresh"]),
    ],
)
def test_the_schema_refuses_a_schedule_with_the_line_and_what_is_allowed(tmp_path, extra, words):
    found = [d for d in workspace.validate(write_meta(tmp_path / "ws", extra)) if d.level == "error"]
    assert len(found) == 1, [d.format() for d in found]
    shown = found[0].format()
    assert "workspace.yaml:" in shown and "refresh" in shown
    for word in words:
        assert word in shown, shown


@pytest.mark.parametrize("every", ["15m", "1h", "1d", "1440m"])
def test_the_schema_accepts_what_the_parser_accepts(tmp_path, every):
    folder = write_meta(tmp_path / "ws", f"refresh:\n  every: {every}\n")
    assert not [d.format() for d in workspace.validate(folder) if d.level == "error"]
    assert schedule.every_of(workspace.load(folder)[0].get("workspace")) == parse_every(every)


# --------------------------------------------------------------------------- the schedule against a clock


def test_next_refresh_staleness_and_due_follow_the_clock():
    last = dt.datetime(2026, 12, 1, 6, 0, tzinfo=dt.timezone.utc)
    meta = {"refresh": {"every": "1h"}}
    fresh = schedule.status(meta, last, now=last + dt.timedelta(minutes=30))
    assert fresh.next_due == last + HOUR and not fresh.stale and not fresh.due and fresh.stale_text() is None
    assert fresh.next_text() == f"Refreshed every 1 h: next scheduled refresh at {(last + HOUR).astimezone():%Y-%m-%d %H:%M}"
    late = schedule.status(meta, last, now=last + dt.timedelta(hours=3))
    assert late.stale and late.due
    assert late.stale_text() == "Stale data: last successful refresh 3 h ago, schedule every 1 h"
    assert late.next_text() == f"Refreshed every 1 h: the next scheduled refresh was due at {(last + HOUR).astimezone():%Y-%m-%d %H:%M}"
    never = schedule.status(meta, None, now=last)
    assert never.stale and never.due and never.stale_text() == "Stale data: never refreshed successfully"
    unscheduled = schedule.status({"name": "x"}, None, now=last)
    assert unscheduled.due and not unscheduled.stale and unscheduled.next_text() is None and unscheduled.stale_text() is None


# --------------------------------------------------------------------------- refresh --all, across processes


class HeldServer(LocalHTTPServer):
    """A REST endpoint that answers only once the test releases it, so a refresh can be held mid-run."""

    def __init__(self):
        self.arrived, self.release = threading.Event(), threading.Event()
        super().__init__()

    def answer(self, handler) -> None:
        self.arrived.set()
        self.release.wait(TIMEOUT_S)
        body = json.dumps(ITEMS).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)


def make_config_repo(tmp_path: Path, *, every: dict[str, str] | None = None, held_url: str | None = None) -> Path:
    """The app's config repo made from the demo workspaces plus one whose CSV is missing (and, with `held_url`,
    one with a REST source there); `every` gives workspaces a schedule."""
    from lib.repo.configrepo import ConfigRepo

    templates = tmp_path / "templates"
    for slug in ("gdp-explorer", "supply-chain-weekly"):
        shutil.copytree(WORKSPACES / slug, templates / slug)
    shutil.copytree(WORKSPACES / "supply-chain-weekly", templates / "broken-feed")
    sources = templates / "broken-feed" / "sources.yaml"
    sources.write_text(sources.read_text(encoding="utf-8").replace("data/gates.csv", "data/missing.csv"), encoding="utf-8")
    if held_url:
        shutil.copytree(WORKSPACES / "supply-chain-weekly", templates / "held-feed", ignore=shutil.ignore_patterns("dashboard.yaml", "profile.yaml"))
        (templates / "held-feed" / "sources.yaml").write_text(
            yaml.safe_dump({"sources": [{"name": "items", "type": "rest", "url": f"{held_url}/list", "timeout_s": TIMEOUT_S}]}), encoding="utf-8"
        )
    for slug, interval in (every or {}).items():
        with open(templates / slug / "workspace.yaml", "a", encoding="utf-8") as out:
            out.write(f"refresh:\n  every: {interval}\n")
    repo = tmp_path / "config-repo"
    ConfigRepo.open_or_create(repo, templates)
    return repo


@pytest.fixture
def app_env(tmp_path, monkeypatch):
    """What the app and its cron job share: the config repo's and the cache's locations."""
    monkeypatch.setenv("DASHMEM_CONFIG_REPO", str(tmp_path / "config-repo"))
    monkeypatch.setenv("DASHMEM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("DASHMEM_HTTP_ALLOW_NETWORKS", "127.0.0.0/8")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    return tmp_path


def lib_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "lib", *args], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=TIMEOUT_S
    )


def csv_rows(path: Path) -> int:
    with open(path, newline="", encoding="utf-8") as f:
        return sum(1 for _ in csv.reader(f)) - 1


def table_lines(stdout: str) -> dict[str, list[str]]:
    """The summary table's rows by workspace: [status, rows, seconds, message] (status may be two words)."""
    rows = {}
    for line in stdout.splitlines()[1:-1]:
        name, rest = line.split(None, 1)
        status = "not due" if rest.startswith("not due") else rest.split()[0]
        after = rest[len(status) :].split(None, 2)
        rows[name] = [status, *after]
    return rows


@pytest.mark.slow
def test_all_refreshes_every_published_workspace_and_a_broken_one_fails_alone(app_env):
    repo = make_config_repo(app_env)
    run = lib_cli("refresh", "--all", str(repo))
    assert run.returncode == 1, run.stderr
    rows = table_lines(run.stdout)
    assert set(rows) == {"broken-feed", "gdp-explorer", "supply-chain-weekly"}
    assert rows["broken-feed"][0] == "failed" and "no data loaded" in rows["broken-feed"][3] and "missing.csv" in rows["broken-feed"][3]
    gdp_rows, gate_rows = csv_rows(WORKSPACES / "gdp-explorer/data/gdp.csv"), csv_rows(WORKSPACES / "supply-chain-weekly/data/gates.csv")
    assert rows["gdp-explorer"][:2] == ["refreshed", f"{gdp_rows:,}"] and rows["supply-chain-weekly"][:2] == ["refreshed", f"{gate_rows:,}"]
    assert run.stdout.splitlines()[-1] == "3 workspace(s): 2 refreshed, 0 unchanged, 0 not due, 1 failed"
    assert "Traceback" not in run.stdout + run.stderr and not run.stderr

    # Another process reads what cron loaded, from the cache the app serves (not the user's own).
    query = lib_cli("query", str(repo / "gdp-explorer"), "SELECT count(*) AS n FROM gdp", "--json")
    assert query.returncode == 0, query.stderr
    assert json.loads(query.stdout)["rows"] == [{"n": gdp_rows}]
    assert list((app_env / "cache").glob("gdp-explorer-*/snapshots/*"))

    again = lib_cli("refresh", "--all", str(repo), "--json")
    assert again.returncode == 1
    by_name = {w["workspace"]: w for w in json.loads(again.stdout)["workspaces"]}
    assert [by_name[n]["status"] for n in ("broken-feed", "gdp-explorer", "supply-chain-weekly")] == ["failed", "unchanged", "unchanged"]
    assert by_name["gdp-explorer"]["rows"] == gdp_rows and "missing.csv" in by_name["broken-feed"]["message"]


@pytest.mark.slow
def test_due_leaves_a_workspace_alone_until_its_schedule_is_due(app_env):
    from lib.data.snapshots import Warehouse

    repo = make_config_repo(app_env, every={"supply-chain-weekly": "1h"})
    assert lib_cli("refresh", "--all", str(repo)).returncode == 1  # broken-feed fails, the others load
    wh = Warehouse.for_workspace(repo / "supply-chain-weekly")
    last = wh.last_checked()
    assert last is not None

    early = schedule.refresh_all(repo, due_only=True, now=last + dt.timedelta(minutes=30))
    by_name = {o.workspace: o for o in early.outcomes}
    assert by_name["supply-chain-weekly"].status == "not due"
    assert by_name["supply-chain-weekly"].next_due == (last + HOUR).isoformat(timespec="seconds")
    assert by_name["gdp-explorer"].status == "unchanged"  # no schedule: every run refreshes it
    assert wh.last_checked() == last

    later = last + dt.timedelta(hours=2)
    due = {o.workspace: o for o in schedule.refresh_all(repo, due_only=True, now=later).outcomes}
    assert due["supply-chain-weekly"].status == "unchanged" and wh.last_checked() == later.replace(microsecond=0)
    assert due["supply-chain-weekly"].next_due == (later + HOUR).replace(microsecond=0).isoformat()

    # The CLI's --due on the real clock: refreshed at `later` (2 h from now is in the future), so not due.
    cli = lib_cli("refresh", "--all", "--due", str(repo))
    assert table_lines(cli.stdout)["supply-chain-weekly"][0] == "not due"


@pytest.mark.slow
def test_a_second_all_run_while_one_is_going_exits_at_once_and_refreshes_nothing(app_env):
    from lib.data.snapshots import Warehouse

    server = HeldServer()
    try:
        repo = make_config_repo(app_env, held_url=server.url)
        first = subprocess.Popen(
            [sys.executable, "-m", "lib", "refresh", "--all", str(repo)],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert server.arrived.wait(TIMEOUT_S), "the first run never reached the held source"
            second = lib_cli("refresh", "--all", str(repo))
            as_json = lib_cli("refresh", "--all", str(repo), "--json")
        finally:
            server.release.set()
            out, err = first.communicate(timeout=TIMEOUT_S)
        after = lib_cli("refresh", "--all", str(repo))  # the lock went with the first run
    finally:
        server.stop()
    assert second.returncode == 1 and not second.stdout
    assert f"another `refresh --all` of {repo} is running (process {first.pid}, started " in second.stderr
    assert "this run refreshed nothing" in second.stderr and "Traceback" not in second.stderr
    assert as_json.returncode == 1 and json.loads(as_json.stdout)["ok"] is False and "is running" in json.loads(as_json.stdout)["error"]

    assert first.returncode == 1, err  # broken-feed
    rows = table_lines(out)
    assert rows["held-feed"][:2] == ["refreshed", str(len(ITEMS))] and rows["broken-feed"][0] == "failed"
    # Only the first run loaded anything: one snapshot per workspace.
    for slug in ("gdp-explorer", "held-feed", "supply-chain-weekly"):
        assert len(Warehouse.for_workspace(repo / slug).snapshots()) == 1, slug
    assert after.returncode == 1 and "is running" not in after.stderr and table_lines(after.stdout)["held-feed"][0] == "unchanged"


@pytest.mark.slow
def test_a_workspace_that_hangs_fails_after_its_budget_and_the_run_goes_on_and_ends(app_env, monkeypatch):
    """As cron runs it: one workspace's source never answers; past DASHMEM_REFRESH_BUDGET_S that workspace
    is reported failed with what it was doing, the others are refreshed, and the run ends, its lock released."""
    server = HeldServer()
    monkeypatch.setenv("DASHMEM_REFRESH_BUDGET_S", "3")
    try:
        repo = make_config_repo(app_env, held_url=server.url)
        run = lib_cli("refresh", "--all", str(repo))
        assert server.arrived.is_set()
        after = lib_cli("refresh", "--all", str(repo), "--json")  # not "another run is going": the lock went with the run
    finally:
        server.release.set()
        server.stop()
    assert run.returncode == 1 and "Traceback" not in run.stdout + run.stderr
    rows = table_lines(run.stdout)
    assert rows["held-feed"][0] == "failed" and float(rows["held-feed"][2]) < TIMEOUT_S / 2
    assert "stopped waiting after 3 s (DASHMEM_REFRESH_BUDGET_S) while loading items (rest)" in rows["held-feed"][3]
    assert "kept the previous data" in rows["held-feed"][3]
    assert rows["gdp-explorer"][0] == "refreshed" and rows["supply-chain-weekly"][0] == "refreshed"
    assert "is running" not in after.stdout + after.stderr
    assert {w["workspace"]: w["status"] for w in json.loads(after.stdout)["workspaces"]}["gdp-explorer"] == "unchanged"


def test_the_lock_is_per_config_repo_and_released_when_its_holder_ends(app_env):
    repo = make_config_repo(app_env)
    with schedule.run_lock(repo):
        with pytest.raises(schedule.RefreshBusy, match="this run refreshed nothing"):
            schedule.refresh_all(repo)
        with schedule.run_lock(app_env / "another-repo"):
            pass
    assert schedule.refresh_all(repo, due_only=True, now=dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc)).outcomes


def test_a_repo_that_is_not_the_apps_says_the_app_will_not_serve_it(tmp_path, monkeypatch):
    monkeypatch.delenv("DASHMEM_CACHE_DIR", raising=False)
    monkeypatch.setenv("DASHMEM_CONFIG_REPO", str(tmp_path / "app-repo"))
    assert schedule.cache_note(tmp_path / "app-repo") == ""
    note = schedule.cache_note(tmp_path / "clone")
    assert "is not the app's config repo" in note and "DASHMEM_CONFIG_REPO" in note


def test_refresh_without_a_path_or_with_due_alone_is_a_plain_usage_message(app_env):
    assert lib_cli("refresh").stderr.strip() == "error: give the workspace folder to refresh, or --all CONFIG_REPO for every published workspace"
    due = lib_cli("refresh", "--due", str(app_env))
    assert due.returncode == 1 and "--due applies to --all" in due.stderr


def test_all_on_a_folder_that_is_no_config_repo_is_a_plain_message(app_env):
    run = lib_cli("refresh", "--all", str(app_env))
    assert run.returncode == 1 and "is not a git repository" in run.stderr and "Traceback" not in run.stderr


# --------------------------------------------------------------------------- the Dashboard page


@pytest.mark.slow
def test_the_dashboard_shows_the_next_refresh_and_a_stale_badge_from_what_cron_recorded(env):
    from lib.data.snapshots import Warehouse

    repo = make_config_repo(env, every={"supply-chain-weekly": "1h"})
    hours_ago = dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=3)
    # cron, in its own process, three hours ago (the clock moved through lib, not by sleeping)
    late = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import datetime as dt, pathlib; from lib.ops import schedule; schedule.refresh_all(pathlib.Path({str(repo)!r}), now=dt.datetime.fromisoformat({hours_ago.isoformat()!r}))",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert late.returncode == 0, late.stderr

    def badges(at) -> list[str]:
        return [m.value for m in at.markdown if "Stale data" in m.value]

    def captions(at) -> list[str]:
        return [c.value for c in at.caption if c.value.startswith("Refreshed every")]

    at = signed_in("vera")
    assert len(badges(at)) == 1 and "Stale data: last successful refresh 3 h ago, schedule every 1 h" in badges(at)[0]
    due_at = (hours_ago.replace(microsecond=0) + HOUR).astimezone()
    assert captions(at) == [f"Refreshed every 1 h: the next scheduled refresh was due at {due_at:%Y-%m-%d %H:%M}"]

    # cron again, now: the open page shows it on its next run.
    assert lib_cli("refresh", "--all", str(repo)).returncode == 1  # broken-feed fails; supply-chain-weekly is checked
    last = Warehouse.for_workspace(repo / "supply-chain-weekly").last_checked()
    assert last is not None and last > hours_ago
    at.run()
    assert not at.exception and badges(at) == []
    assert captions(at) == [f"Refreshed every 1 h: next scheduled refresh at {(last + HOUR).astimezone():%Y-%m-%d %H:%M}"]


@pytest.mark.slow
def test_a_run_killed_mid_refresh_leaves_no_lock_and_no_half_snapshot(app_env):
    from lib.data.snapshots import Warehouse

    server = HeldServer()
    try:
        repo = make_config_repo(app_env, held_url=server.url)
        first = subprocess.Popen(
            [sys.executable, "-m", "lib", "refresh", "--all", str(repo)],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        assert server.arrived.wait(TIMEOUT_S), "the run never reached the held source"
        first.kill()  # cron's run killed (a reboot, an OOM kill) while it holds the lock
        first.wait(TIMEOUT_S)
        server.release.set()
        after = lib_cli("refresh", "--all", str(repo))
    finally:
        server.release.set()
        server.stop()
    assert "is running" not in after.stderr
    rows = table_lines(after.stdout)
    assert rows["held-feed"][:2] == ["refreshed", str(len(ITEMS))]
    assert len(Warehouse.for_workspace(repo / "held-feed").snapshots()) == 1


def test_a_schedule_that_bypassed_validation_fails_its_workspace_alone_with_the_file_named(app_env):
    import git

    repo = make_config_repo(app_env)
    meta = repo / "supply-chain-weekly" / "workspace.yaml"
    meta.write_text(meta.read_text(encoding="utf-8") + "refresh:\n  every: hourly\n", encoding="utf-8")
    checkout = git.Repo(repo)
    checkout.git.commit(
        "-qam",
        "a hand edit straight onto main",
        env={"GIT_AUTHOR_NAME": "ops", "GIT_AUTHOR_EMAIL": "ops@x", "GIT_COMMITTER_NAME": "ops", "GIT_COMMITTER_EMAIL": "ops@x"},
    )
    outcomes = {o.workspace: o for o in schedule.refresh_all(repo, due_only=True).outcomes}
    assert outcomes["supply-chain-weekly"].status == "failed"
    assert outcomes["supply-chain-weekly"].message.startswith("supply-chain-weekly/workspace.yaml: refresh.every: 'hourly' is not an interval")
    assert outcomes["gdp-explorer"].status == "refreshed"
