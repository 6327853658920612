"""The config repo's CI gate, run as CI runs it: the app installed as a package, in a plain clone.

The package is built from this checkout and installed (not editable) into a
folder of its own, so nothing is found through the checkout: the schemas must
ship inside it (`dashmem/_schemas`). The workflow's own validate command is run in a clone that
also holds a clone of the app, which it must not walk into.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import git
import pytest
import yaml

from lib.repo import ci_workflow

from ..conftest import ROOT
from ..helpers.wheel import build_wheel

# These build a wheel of this checkout and pip-install it (about 4 s, once), then run the CLI and the
# workflow's commands in fresh processes: slow loop. The workflow text itself is tested in
# tests/repo/test_ci_workflow.py, in the fast loop.
INSTALLS = pytest.mark.slow


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """`pip install` of this checkout into its own folder; returns the folder (its bin/ holds `dashmem`)."""
    where = tmp_path_factory.mktemp("installed")
    wheel = build_wheel(where)  # the wheel `pip install <checkout>` builds, from a copy (two builds at once collide in place)
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--target", str(where / "site"), str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return where / "site"


def _env(installed: Path, home: Path, runner_temp: Path | None = None) -> dict[str, str]:
    env = {
        "PATH": f"{installed / 'bin'}:/usr/bin:/bin",
        "PYTHONPATH": str(installed),
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    if runner_temp:
        env["RUNNER_TEMP"] = str(runner_temp)
    return env


@pytest.fixture
def clone(config_repo, tmp_path):
    where = tmp_path / "clone"
    git.Repo.clone_from(str(config_repo.path), str(where))
    return where


@INSTALLS
def test_installed_package_carries_its_schemas(installed):
    assert sorted(p.name for p in (installed / "dashmem" / "_schemas").glob("*.schema.json")) == sorted(
        p.name for p in (ROOT / "schemas").glob("*.schema.json")
    )
    assert (installed / "bin" / "dashmem").is_file()
    assert (installed / "dashmem" / "_templates" / "gdp-explorer" / "workspace.yaml").is_file()
    assert not (installed / "lib").exists()  # installed as `dashmem`: no top-level `lib` to shadow another


@INSTALLS
def test_dashmem_validate_in_a_plain_clone(installed, clone, tmp_path):
    env = _env(installed, tmp_path)
    ok = subprocess.run(["dashmem", "validate", ".", "--json"], cwd=clone, env=env, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    payload = json.loads(ok.stdout)
    assert payload["ok"] and {Path(w["path"]).name for w in payload["workspaces"]} == {"gdp-explorer", "supply-chain-weekly"}
    # The module came from the installed package, not from this checkout.
    where = subprocess.run([sys.executable, "-c", "import dashmem; print(dashmem.__file__)"], cwd=clone, env=env, capture_output=True, text=True, check=True)
    assert where.stdout.strip().startswith(str(installed))


def _workflow_step(clone: Path, name: str) -> str:
    workflow = yaml.safe_load((clone / ci_workflow.PATH).read_text(encoding="utf-8"))
    (step,) = [s for s in workflow["jobs"]["validate"]["steps"] if s.get("name") == name]
    return step["run"]


@INSTALLS
def test_the_workflow_gate_fails_a_failing_dashboard_and_ignores_the_apps_clone(installed, clone, tmp_path):
    assert (clone / ci_workflow.PATH).read_text(encoding="utf-8") == ci_workflow.WORKFLOW
    runner_temp = tmp_path / "runner"
    runner_temp.mkdir()
    # As the old workflow did: the app cloned inside the config repo's checkout, with a broken template of its own.
    app_clone = clone / ".dashmem"
    shutil.copytree(ROOT / "workspaces", app_clone / "workspaces", symlinks=True)
    git.Repo.init(app_clone)
    (app_clone / "workspaces" / "gdp-explorer" / "task.yaml").write_text("goal: [unclosed\n", encoding="utf-8")
    also_nested = clone / "vendor-app"
    shutil.copytree(app_clone, also_nested, symlinks=True)

    validate = _workflow_step(clone, "Validate")
    env = _env(installed, tmp_path, runner_temp)
    # setup-python's `python`, which `pip install` installed the app for: here the interpreter the package was installed with.
    (tmp_path / "setup-python").mkdir()
    (tmp_path / "setup-python" / "python").symlink_to(sys.executable)
    env["PATH"] = f"{tmp_path / 'setup-python'}:{env['PATH']}"
    passing = subprocess.run(["bash", "-e", "-c", validate], cwd=clone, env=env, capture_output=True, text=True, timeout=120)
    assert passing.returncode == 0, passing.stdout + passing.stderr
    report = json.loads((runner_temp / "validation.json").read_text(encoding="utf-8"))
    assert len(report["workspaces"]) == 2 and report["ok"]
    assert passing.stdout.splitlines()[-1].startswith("2 workspace(s), 0 error(s)"), passing.stdout  # the report, printed on green too

    # A title stating a figure of the data: valid YAML and schema, but it fails a data check. The gate must catch it.
    dashboard = clone / "gdp-explorer" / "dashboard.yaml"
    dashboard.write_text(dashboard.read_text(encoding="utf-8").replace("title: GDP explorer\n", "title: GDP explorer through 2023\n", 1), encoding="utf-8")
    failing = subprocess.run(["bash", "-e", "-c", validate], cwd=clone, env=env, capture_output=True, text=True, timeout=120)
    assert failing.returncode == 1
    report = json.loads((runner_temp / "validation.json").read_text(encoding="utf-8"))
    ids = [d["id"] for w in report["workspaces"] for d in w["diagnostics"] if d["level"] == "error"]
    assert ids == ["check.literal_values"]
    assert [line.split("::")[1] for line in failing.stdout.splitlines() if line.startswith("::error")] == ["error title=check.literal_values"], failing.stdout


def test_the_workflow_installs_the_app_outside_the_checkout():
    install = [s for s in yaml.safe_load(ci_workflow.WORKFLOW)["jobs"]["validate"]["steps"] if "dashmem" in s.get("name", "")][0]["run"]
    assert '"$RUNNER_TEMP/dashmem"' in install and "pip install" in install
    assert not any(token.startswith((".dashmem", "./")) for token in install.split())
