"""One definition of "valid": the same files give the same verdict in any process and cache state.

Each command runs in a fresh process, as CI and people run them, on a plain
clone of a config repo.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import git
import pytest

from lib.artifacts import checks
from lib.memory import workspace

from ..conftest import ROOT

# Every test runs the CLI in fresh processes on a plain clone (that is the point: the same verdict in any
# process and cache state), several processes per test and up to 10 s each here: the slow loop.
pytestmark = pytest.mark.slow


def cli(*args, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lib", *map(str, args)], cwd=cwd, capture_output=True, text=True, env=env, timeout=120)


@pytest.fixture
def clone(config_repo, tmp_path):
    """A plain clone of a config repo, outside the app, as a reviewer or CI has it."""
    where = tmp_path / "clone"
    git.Repo.clone_from(str(config_repo.path), str(where))
    return where


@pytest.fixture
def env(tmp_path):
    """A user's environment: no DASHMEM_* settings, their own home and cache folder."""
    home = tmp_path / "home"
    home.mkdir()
    return {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"), "GIT_CONFIG_NOSYSTEM": "1"}


def _title_with_figure(ws_path: Path) -> None:
    """A dashboard title that states the latest year of the data as a literal: stale on the next refresh."""
    text = (ws_path / "dashboard.yaml").read_text(encoding="utf-8")
    (ws_path / "dashboard.yaml").write_text(text.replace("title: GDP explorer\n", "title: GDP explorer through 2023\n", 1), encoding="utf-8")


def _verdict(proc: subprocess.CompletedProcess) -> tuple[bool, list[tuple[str, str, str]]]:
    payload = json.loads(proc.stdout)
    diagnostics = [d for w in payload.get("workspaces", [payload]) for d in w["diagnostics"]]
    return payload["ok"], sorted((d["id"], d["level"], d["message"]) for d in diagnostics)


def test_verdict_is_the_same_before_and_after_data_is_cached(clone, env):
    ws = clone / "gdp-explorer"
    _title_with_figure(ws)
    first = cli("validate", ".", "--json", cwd=clone, env=env)
    checked = cli("check", "gdp-explorer", "--json", cwd=clone, env=env)
    refreshed = cli("refresh", "gdp-explorer", cwd=clone, env=env)  # the cache now holds this workspace's data
    again = cli("validate", ".", "--json", cwd=clone, env=env)

    assert refreshed.returncode == 0, refreshed.stderr
    assert first.returncode == again.returncode == 1
    assert _verdict(first) == _verdict(again)
    ok, diagnostics = _verdict(first)
    assert not ok and ("check.literal_values", "error") in {(i, level) for i, level, _ in diagnostics}
    assert checked.returncode == 1
    assert _verdict(checked)[1] == [d for d in diagnostics if d[0].startswith("check.")]


def test_valid_files_pass_in_every_process(clone, env):
    verdicts = [
        cli(*command, cwd=clone, env=env) for command in (("validate", ".", "--json"), ("check", "gdp-explorer", "--json"), ("validate", ".", "--json"))
    ]
    assert [p.returncode for p in verdicts] == [0, 0, 0], [p.stdout for p in verdicts]
    assert _verdict(verdicts[0]) == _verdict(verdicts[2])
    assert not any(i == "check.data_not_run" for i, _, _ in _verdict(verdicts[0])[1])


def test_data_that_cannot_be_loaded_is_said_not_passed(clone, env):
    (clone / "gdp-explorer" / "data" / "gdp.csv").unlink()
    proc = cli("validate", "gdp-explorer", "--json", cwd=clone, env=env)
    ok, diagnostics = _verdict(proc)
    notes = [m for i, level, m in diagnostics if i == "check.data_not_run" and level == "warning"]
    assert len(notes) == 1 and notes[0].startswith("data checks not run: ") and "gdp" in notes[0]
    assert not any(i in ("check.queries", "check.references", "check.literal_values", "check.renders") for i, _, _ in diagnostics)


def test_validation_ignores_what_the_cache_holds(ws_copy, tmp_path, monkeypatch):
    """Served data of an older shape must not change the verdict on the files."""
    import pyarrow as pa

    from lib.data.snapshots import Warehouse

    monkeypatch.setenv("DASHMEM_CACHE_DIR", str(tmp_path / "cache"))
    path = ws_copy("gdp-explorer")
    clean = checks.validate_workspace(path)
    # Something unrelated sits in the cache, as after a failed experiment: a gdp table without its columns.
    Warehouse.for_workspace(path).write_snapshot({"gdp": pa.table({"other": [1, 2, 3]})})
    assert checks.validate_workspace(path) == clean
    assert not workspace.has_errors(clean)


def test_cli_on_a_clone_caches_in_the_user_cache_not_the_app_checkout(clone, env):
    app_cache = ROOT / ".data" / "cache"
    before = set(os.listdir(app_cache)) if app_cache.exists() else set()
    proc = cli("refresh", "gdp-explorer", cwd=clone, env=env)
    assert proc.returncode == 0, proc.stderr
    after = set(os.listdir(app_cache)) if app_cache.exists() else set()
    assert not {n for n in after - before if n.startswith("gdp-explorer-")}
    cached = list((Path(env["XDG_CACHE_HOME"]) / "dashmem").glob("gdp-explorer-*/snapshots/*.snapshot"))
    assert len(cached) == 1
    query = cli("query", "gdp-explorer", "SELECT count(*) AS n FROM gdp", "--json", cwd=clone, env=env)
    assert json.loads(query.stdout)["rows"] == [{"n": 13979}]
