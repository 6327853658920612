"""Refresh and the report: a report that no longer fits the new data is said (a warning), and never blocks the dashboard's data."""

from __future__ import annotations

import json
import shutil

import pytest

from lib.data.refresh import refresh
from lib.data.snapshots import Warehouse
from lib.roles.access import OPERATOR
from tests.helpers.report import _python_env, _run, _with_region_column

from ..conftest import WORKSPACES


@pytest.fixture
def supply(tmp_path):
    folder = tmp_path / "supply-chain-weekly"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", folder)
    _with_region_column(folder)
    return folder


def test_new_data_that_breaks_only_the_report_is_loaded_with_a_warning_naming_the_query(supply, tmp_path):
    wh = Warehouse(tmp_path / "cache")
    first = refresh(supply, wh, user=OPERATOR)
    assert first.ok and first.report_warnings == []
    shutil.copy(supply / "data" / "next_week" / "gates.csv", supply / "data" / "gates.csv")  # next week's file has no region
    loaded = refresh(supply, wh, user=OPERATOR)
    assert loaded.swapped and loaded.ok and loaded.dashboard_errors == []  # the dashboard's readers get the new data
    assert loaded.report_warnings == ['query regions no longer fits the new data: it reads column "region", which the new data does not have']
    assert 'report (warning): query regions no longer fits the new data: it reads column "region"' in loaded.summary()


def test_the_warning_reaches_the_command_line_and_the_next_process_export_shows_the_failure_in_place(supply, tmp_path):
    env = _python_env(tmp_path)
    assert _run(["refresh", str(supply)], env, tmp_path).returncode == 0
    shutil.copy(supply / "data" / "next_week" / "gates.csv", supply / "data" / "gates.csv")
    refreshed = _run(["refresh", str(supply), "--json"], env, tmp_path)  # one process loads the new data...
    assert refreshed.returncode == 0, refreshed.stderr
    said = json.loads(refreshed.stdout)
    assert (
        said["ok"]
        and said["swapped"]
        and said["report_warnings"] == ['query regions no longer fits the new data: it reads column "region", which the new data does not have']
    )
    out = tmp_path / "r.html"
    exported = _run(["export", str(supply), "--report", "--html", str(out)], env, tmp_path)  # ...another exports the report
    assert exported.returncode == 1 and "region" in exported.stderr and "Traceback" not in exported.stderr
    html = out.read_text()
    assert 'role="alert"' in html and "region" in html and "Regions:" not in html
