"""A business user's daily page load (issue #14): opening or reloading the dashboard while signed in.

A reload is a new Streamlit session; the sign-in cookie (a JWT signed with the cookie key, lib.roles.auth)
signs it in. Checking that cookie is an HMAC, so it must never cost a bcrypt password check (about
0.4 s of server CPU at cost 12): only the Login click does. The server counts its bcrypt calls
(tests/counting_bcrypt.py). Skips where chromium is not installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.browser import ARGS, ARTIFACTS, CHROMIUM, free_port, sign_in, wait_until_serving

from ..conftest import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} not installed (make test installs it as root)")]

IDLE = "() => document.querySelector('[data-testid=\"stApp\"]')?.getAttribute('data-test-script-state') === 'notRunning'"


@pytest.fixture(scope="module")
def counting_server(tmp_path_factory):
    """`streamlit run app.py` on the demo workspaces, counting its bcrypt calls; yields (url, the count file)."""
    tmp = tmp_path_factory.mktemp("signed-in")
    counts = tmp / "bcrypt-calls.txt"
    port = free_port()
    env = {
        **os.environ,
        "DASHMEM_CONFIG_REPO": str(tmp / "config-repo"),
        "DASHMEM_CACHE_DIR": str(tmp / "cache"),
        "DASHMEM_COOKIE_KEY": "c" * 40,
        "COUNT_BCRYPT_TO": str(counts),
        "DASHMEM_RUN_LOG": str(tmp / "runs.jsonl"),
        "PYTHONPATH": str(ROOT),
    }
    env.pop("ANTHROPIC_API_KEY", None)
    command = [sys.executable, "-m", "tests.counting_bcrypt", "run", str(ROOT / "app.py"), "--server.headless", "true"]
    command += ["--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"]
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    wait_until_serving(proc, url)
    yield url, counts, tmp / "runs.jsonl"
    proc.terminate()
    proc.wait(timeout=20)


def bcrypt_calls(counts: Path) -> list[str]:
    return counts.read_text(encoding="utf-8").split() if counts.exists() else []


def test_a_reload_or_a_new_tab_signed_in_by_the_cookie_checks_no_password(counting_server):
    from playwright.sync_api import sync_playwright

    url, counts, _ = counting_server
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            page = context.new_page()
            sign_in(page, url, "vera", "vera-demo")
            page.wait_for_function(IDLE, timeout=30_000)
            assert bcrypt_calls(counts) == ["checkpw"], "the Login click checks the password once"
            page.reload()  # a new Streamlit session, signed in by the cookie
            page.get_by_text("· viewer").wait_for(timeout=30_000)
            tab = context.new_page()  # a new tab on the same link
            tab.goto(f"{url}/?ws=supply-chain-weekly")
            tab.get_by_role("heading", name="Supply chain weekly").wait_for(timeout=30_000)
            for opened in (page, tab):
                opened.wait_for_function(IDLE, timeout=30_000)
                assert opened.get_by_label("Username").count() == 0
            tab.screenshot(path=str(ARTIFACTS / "signed-in-new-tab.png"))
            assert bcrypt_calls(counts) == ["checkpw"], "a page load signed in by the cookie ran bcrypt"
        finally:
            browser.close()


def test_a_reload_signed_in_by_the_cookie_is_one_script_run_of_a_new_session(counting_server):
    """bench.app's signed-in scenario times a reload on the server as its new session's runs (DASHMEM_RUN_LOG):
    one run, that signs in by the cookie and draws the whole dashboard, with nothing asked after it."""
    from playwright.sync_api import sync_playwright

    from bench.app import session_runs
    from lib.core import runlog

    url, _, log = counting_server
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
            sign_in(page, url, "vera", "vera-demo")
            page.wait_for_function(IDLE, timeout=30_000)
            before = len(runlog.read(log))
            page.reload()
            page.get_by_text("· viewer").wait_for(timeout=30_000)
            page.wait_for_function(IDLE, timeout=30_000)
            page.wait_for_timeout(1500)  # a second run (a component's late value, a rerun) would be asked within this
            deadline = time.monotonic() + 10  # the line is written just after the run's last message is queued
            while time.monotonic() < deadline and not any(r["ended"] == "finished" for r in runlog.read(log)[before:]):
                time.sleep(0.1)
            runs = runlog.read(log)[before:]
        finally:
            browser.close()
    assert [r["ended"] for r in runs] == ["finished"], runs
    [(asked, seconds)] = session_runs(runs)
    assert asked == runs[0]["asked"] and seconds > 0, runs
