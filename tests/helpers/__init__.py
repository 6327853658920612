"""Helpers the test modules share: plain functions, classes and constants, imported normally.

No test module imports another (tests/system/test_suite.py checks it); fixtures the modules share are in
tests/conftest.py, which builds them from these helpers.
"""

from __future__ import annotations

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
