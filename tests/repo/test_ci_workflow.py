"""The CI gate a new config repo gets (lib/repo/ci_workflow.py): the workflow names a command that exists and
validates the whole checkout, and a new config repo carries it. Running the workflow's commands in a
clone is tests/system/test_ci_gate.py (slower: it builds and installs the package)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from lib import cli
from lib.repo import ci_workflow

from ..conftest import ROOT, WORKSPACES


def workflow() -> dict:
    return yaml.safe_load(ci_workflow.WORKFLOW)


def step(name_part: str) -> dict:
    [found] = [s for s in workflow()["jobs"]["validate"]["steps"] if name_part in s.get("name", "")]
    return found


def test_the_workflow_is_a_github_actions_file_at_the_path_github_reads():
    assert ci_workflow.PATH == ".github/workflows/validate.yml"
    data = workflow()
    assert data["name"] == "validate-workspaces"
    # PyYAML reads the key `on` as True (YAML 1.1); GitHub reads it as "on".
    assert data[True] == {"pull_request": None, "push": {"branches": ["main"]}}
    uses = [s["uses"] for s in data["jobs"]["validate"]["steps"] if "uses" in s]
    assert uses[0].startswith("actions/checkout@") and any(u.startswith("actions/setup-python@") for u in uses)


def test_the_python_it_sets_up_is_one_the_package_supports():
    [setup] = [s for s in workflow()["jobs"]["validate"]["steps"] if s.get("uses", "").startswith("actions/setup-python@")]
    version = setup["with"]["python-version"]
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert requires.startswith(">=")
    assert tuple(map(int, version.split("."))) >= tuple(map(int, requires[2:].split(".")))


def test_the_validate_command_is_the_packages_console_script():
    command = step("Validate")["run"].split(">")[0]
    program, *args = shlex.split(command)
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts[program] == "dashmem.cli:main"  # `dashmem` is what `pip install` puts on PATH (the package lib/ installs as)
    assert args == ["validate", ".", "--json"]


def test_the_cli_understands_the_workflows_arguments():
    args = shlex.split(step("Validate")["run"].split(">")[0])[1:]
    parsed = cli.build_parser().parse_args(args)
    assert (parsed.command, parsed.path, parsed.json) == ("validate", ".", True)  # the whole checkout, as JSON
    assert parsed.func is cli.cmd_validate


def test_a_failing_validation_fails_the_job_and_shows_the_report():
    run = step("Validate")["run"]
    # `||` runs only when validate exits non-zero: print the JSON report, then fail the step.
    assert run.endswith('|| (cat "$RUNNER_TEMP/validation.json"; exit 1)')
    assert '> "$RUNNER_TEMP/validation.json"' in run  # the report goes outside the checkout, not into the repo


def test_the_app_is_cloned_from_a_repository_variable_outside_the_checkout():
    install = step("Install")
    assert install["env"] == {"DASHMEM_APP_REPO": "${{ vars.DASHMEM_APP_REPO }}"}
    clone, pip = install["run"].strip().splitlines()
    assert shlex.split(clone) == ["git", "clone", "--depth", "1", "$DASHMEM_APP_REPO", "$RUNNER_TEMP/dashmem"]
    assert shlex.split(pip) == ["pip", "install", "$RUNNER_TEMP/dashmem"]
    assert "DASHMEM_APP_REPO" in ci_workflow.WORKFLOW.split("name:")[0]  # the header comment says what to set


def test_a_new_config_repo_commits_the_workflow_on_main(config_repo):
    published = config_repo.repo.git.show(f"main:{ci_workflow.PATH}", strip_newline_in_stdout=False)
    assert published == ci_workflow.WORKFLOW


def test_a_repository_variable_makes_the_gate_strict():
    validate = step("Validate")
    assert validate["env"] == {"DASHMEM_VALIDATE_STRICT": "${{ vars.DASHMEM_VALIDATE_STRICT }}"}
    assert "DASHMEM_VALIDATE_STRICT to true" in ci_workflow.WORKFLOW.split("name:")[0]  # the header comment says what to set


def as_github_runs(env: dict[str, str], variables: dict[str, str]) -> dict[str, str]:
    """A step's `env:` as GitHub gives it to the step: `${{ vars.NAME }}` is the repository variable, or empty when unset."""
    return {name: re.sub(r"\$\{\{\s*vars\.(\w+)\s*\}\}", lambda m: variables.get(m.group(1), ""), value) for name, value in env.items()}


@pytest.mark.slow  # runs the validate step twice, loading the workspace's data each time
def test_the_strict_gate_fails_a_pull_request_whose_data_cannot_load_and_the_default_one_passes_it(tmp_path):
    checkout, runner_temp = tmp_path / "config-repo", tmp_path / "runner"
    runner_temp.mkdir()
    shutil.copytree(WORKSPACES / "gdp-explorer", checkout / "gdp-explorer", symlinks=True)
    (checkout / "gdp-explorer" / "data" / "gdp.csv").unlink()  # as a pull request that moved the data away
    validate = step("Validate")
    base = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path), "RUNNER_TEMP": str(runner_temp)}
    base["XDG_CACHE_HOME"] = os.environ["XDG_CACHE_HOME"]
    outcomes = {}
    for variables in ({}, {"DASHMEM_VALIDATE_STRICT": "false"}, {"DASHMEM_VALIDATE_STRICT": "true"}):
        env = {**base, **as_github_runs(validate["env"], variables)}
        proc = subprocess.run(["bash", "-c", validate["run"]], cwd=checkout, env=env, capture_output=True, text=True, timeout=120)
        outcomes[variables.get("DASHMEM_VALIDATE_STRICT")] = proc.returncode, proc.stdout
    assert [code for code, _ in outcomes.values()] == [0, 0, 1], outcomes
    shown = outcomes["true"][1]  # the step prints the report when it fails
    assert '"id": "check.data_not_run"' in shown and '"level": "error"' in shown, shown
