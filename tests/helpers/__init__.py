"""Helpers the test modules share: plain functions, classes and constants, imported normally.

No test module imports another (tests/system/test_suite.py checks it); fixtures the modules share are in
tests/conftest.py, which builds them from these helpers.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORKSPACES = ROOT / "workspaces"  # the shipped templates
