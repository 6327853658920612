"""The app's start reaches nothing off loopback (issue #29).

Every start tried a connection to 8.8.8.8 (Streamlit's probe for the machine's network address, to print a
"Network URL") and, headless as `make run` serves it, fetched checkip.amazonaws.com for an "External URL".
`browser.serverAddress` in the committed .streamlit/config.toml stops both. The server is started as `make run`
starts it (no `--server.address`: that flag alone would stop the probes and hide them from this test),
under an audit hook that logs every address it tries (tests/outbound_log.py).
"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys
import time

import pytest

from tests.helpers.browser import free_port, wait_until_serving

from ..conftest import ROOT

pytestmark = pytest.mark.slow  # a `streamlit run` of its own


def off_loopback(where) -> bool:
    """Whether a logged address (a host name, an IP, an (address, port) pair, a Unix socket path) is off this machine."""
    host = where[0] if isinstance(where, list) else where
    if not isinstance(host, str) or host in ("", "localhost") or host.startswith("/"):
        return False
    try:
        ip = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return True  # a name to look up, other than localhost
    return not (ip.is_loopback or ip.is_unspecified)


def test_a_start_as_make_run_serves_it_tries_no_address_off_loopback(tmp_path):
    log, banner = tmp_path / "outbound.jsonl", tmp_path / "server.out"
    port = free_port()
    env = {
        **os.environ,
        "DASHMEM_CONFIG_REPO": str(tmp_path / "config-repo"),
        "DASHMEM_CACHE_DIR": str(tmp_path / "cache"),
        "DASHMEM_COOKIE_KEY": "o" * 40,
        "OUTBOUND_LOG_TO": str(log),
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
    }
    # `make run`'s command, on a free port.
    command = [sys.executable, "-m", "tests.outbound_log", "run", "app.py", "--server.headless", "true", "--server.port", str(port)]
    with banner.open("wb") as out:
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_until_serving(proc, f"http://127.0.0.1:{port}")
        deadline = time.monotonic() + 30  # the start-up banner is printed once the addresses it shows are known
        while "URL: " not in banner.read_text(errors="replace") and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    shown = banner.read_text(errors="replace")
    assert "URL: " in shown, shown[-2000:]
    lines = log.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "hook installed"
    tried = [json.loads(line) for line in lines[1:]]
    off = [t for t in tried if off_loopback(t[1])]
    assert off == [], f"tried off loopback: {off}; the server said:\n{shown[-2000:]}"
    assert "Network URL" not in shown and "External URL" not in shown
