"""The app in a real browser: Debian's chromium, driven by Playwright against `streamlit run`
(the `server` and `page` fixtures in tests/conftest.py are built from these)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pandas as pd
import pytest

from . import ROOT

CHROMIUM = "/usr/bin/chromium"


ARTIFACTS = ROOT / "test-artifacts"


ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(tmp: Path):
    """`streamlit run` on the config repo `tmp/config-repo` (made from the demo workspaces unless it exists); yields (url, tmp)."""
    port = free_port()
    env = {
        **os.environ,
        "DASHMEM_CONFIG_REPO": str(tmp / "config-repo"),
        "DASHMEM_CACHE_DIR": str(tmp / "cache"),
        "DASHMEM_COOKIE_KEY": "b" * 40,
        "DASHMEM_RUN_LOG": str(tmp / "runs.jsonl"),  # test_the_run_log_times_each_script_run_in_the_server
        "PYTHONPATH": str(ROOT),
    }
    env.pop("ANTHROPIC_API_KEY", None)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            str(ROOT / "app.py"),
            "--server.headless",
            "true",
            "--server.port",
            str(port),
            "--server.address",
            "127.0.0.1",
            "--browser.gatherUsageStats",
            "false",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    wait_until_serving(proc, url)
    yield url, tmp
    proc.terminate()
    proc.wait(timeout=20)


def sign_in(page, url: str, user: str, password: str) -> None:
    page.goto(url)
    page.get_by_label("Username").fill(user)
    page.get_by_role("textbox", name="Password").fill(password)
    page.get_by_role("button", name="Login").click()
    page.get_by_text(f"· {'steward' if user == 'sam' else 'viewer' if user == 'vera' else 'owner'}").wait_for(timeout=30_000)
    # The sign-in cookie is written by a script in the page; a new page (a link, a reload) signs in by it.
    page.wait_for_function("document.cookie.includes('dashmem_auth=')", timeout=30_000)


def wait_until_serving(proc: subprocess.Popen, url: str) -> None:
    """Wait (60 s at most) for the Streamlit server `proc` to answer its health check; fail with its output if it does not."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=1).read() == b"ok":
                return
        except OSError:
            time.sleep(0.3)
    proc.kill()
    assert proc.stdout is not None
    pytest.fail("streamlit did not start: " + proc.stdout.read().decode(errors="replace")[-2000:])


def choose_workspace(page, name: str) -> None:
    page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').click()
    page.get_by_role("option", name=name).click()
    page.get_by_role("heading", name=name).wait_for(timeout=30_000)


def kpi_value(page, label: str) -> str:
    metric = page.locator('[data-testid="stMetric"]', has_text=label)
    metric.wait_for(timeout=30_000)
    return metric.locator('[data-testid="stMetricValue"]').inner_text()


# Every module of browser tests: slow, and skipped (saying why) where chromium is not installed.
BROWSER = [pytest.mark.slow, pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} not installed (make test installs it as root)")]


def attainment(frame: pd.DataFrame) -> str:
    """The KPI's figure as the dashboard formats it (.1%), computed here from the CSV."""
    return f"{frame.actual.sum() / frame.target.sum() * 100:.1f}%"


def bar(page, site: str):
    """The bar of `site` in "Attainment by site": Vega gives each mark an ARIA label naming its fields."""
    chart = page.locator('[data-testid="stVegaLiteChart"]', has=page.locator('[aria-label*="Site: "]'))
    chart.first.wait_for(timeout=30_000)
    return chart.first.locator(f'[role="graphics-symbol"][aria-label*="Site: {site};"]').first
