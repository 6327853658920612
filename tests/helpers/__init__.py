"""Helpers the test modules share: plain functions, classes and constants, imported normally.

No test module imports another (tests/system/test_suite.py checks it); fixtures the modules share are in
tests/conftest.py, which builds them from these helpers.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lib.data.snapshots import Warehouse

ROOT = Path(__file__).resolve().parents[2]
WORKSPACES = ROOT / "workspaces"  # the shipped templates


def current_id(wh: Warehouse) -> str:
    """The id of the warehouse's current snapshot: the test has loaded data, so there is one."""
    snapshot = wh.current()
    assert snapshot is not None, f"no snapshot in {wh.root}"
    return snapshot.id


def listening(process: subprocess.Popen, port: int, log: Path, within_s: float = 30) -> None:
    """Wait until the server `process` accepts connections on 127.0.0.1:`port`; fail the test with its log if it
    exits first or does not listen within `within_s`."""
    import socket
    import time

    import pytest

    deadline = time.monotonic() + within_s
    while True:
        if process.poll() is not None:
            pytest.fail(f"server exited: {log.read_text()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                pytest.fail(f"server did not listen on port {port} within {within_s:g} s: {log.read_text()}")
            time.sleep(0.1)


def stop(process: subprocess.Popen) -> None:
    """End a server the test started: politely, then for good."""
    process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
