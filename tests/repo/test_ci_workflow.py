"""The CI gate a new config repo gets (lib/repo/ci_workflow.py): the workflow names a command that exists and
validates the whole checkout, and a new config repo carries it. Running the workflow's commands in a
clone is tests/system/test_ci_gate.py (slower: it builds and installs the package)."""

from __future__ import annotations

import json
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
from lib.artifacts import checks
from lib.core.diagnostics import has_errors
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


def validate_command() -> str:
    """The `dashmem validate ...` of the Validate step, without its redirection."""
    [line] = [line for line in step("Validate")["run"].splitlines() if line.startswith("dashmem validate")]
    return line.split(">")[0]


def test_the_validate_command_is_the_packages_console_script():
    program, *args = shlex.split(validate_command())
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts[program] == "dashmem.cli:main"  # `dashmem` is what `pip install` puts on PATH (the package lib/ installs as)
    assert args == ["validate", ".", "--json"]


def test_the_cli_understands_the_workflows_arguments():
    args = shlex.split(validate_command())[1:]
    parsed = cli.build_parser().parse_args(args)
    assert (parsed.command, parsed.path, parsed.json) == ("validate", ".", True)  # the whole checkout, as JSON
    assert parsed.func is cli.cmd_validate


def test_the_jobs_token_may_only_read():
    assert workflow()["permissions"] == {"contents": "read"}
    assert "permissions" not in workflow()["jobs"]["validate"]  # no job widens it


def run_step(run: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """A step's `run:` as GitHub runs it on Linux (`bash -e`), in `cwd`."""
    return subprocess.run(["bash", "-e", "-c", run], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_without_dashmem_app_repo_the_install_fails_saying_what_to_set_and_clones_nothing(tmp_path):
    runner_temp = tmp_path / "runner"
    runner_temp.mkdir()
    install = step("Install")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "RUNNER_TEMP": str(runner_temp), **as_github_runs(install["env"], {})}
    proc = run_step(install["run"], tmp_path, env)
    assert proc.returncode == 1
    assert "::error title=DASHMEM_APP_REPO is not set::Set the repository variable DASHMEM_APP_REPO" in proc.stdout, proc.stdout + proc.stderr
    assert "fatal" not in proc.stderr and list(runner_temp.iterdir()) == []  # no `git clone ""`, no install


def test_the_report_is_printed_with_every_problem_as_an_annotation_and_a_count(tmp_path):
    folder = tmp_path / "gdp-explorer"
    shutil.copytree(WORKSPACES / "gdp-explorer", folder, symlinks=True)
    (folder / "data" / "gdp.csv").unlink()  # the data checks cannot run: a warning, and the gate passes
    diagnostics = checks.validate_workspace(folder)
    assert not has_errors(diagnostics) and diagnostics
    report = {"ok": True, "errors": 0, "workspaces": [{"path": str(folder), "ok": True, "diagnostics": [d.to_dict() for d in diagnostics]}]}
    lines = ci_workflow.log_lines(json.dumps(report))
    assert lines[0] == f"ok   {folder}"
    assert lines[1:-1] == [f"::{d.level} title={d.id}::{d.format()}" for d in diagnostics]
    assert any(line.startswith("::warning title=check.data_not_run::") and "data checks not run" in line for line in lines)
    assert lines[-1] == f"1 workspace(s), 0 error(s), {len(diagnostics)} warning(s)"


def test_a_line_break_in_a_message_stays_in_its_annotation():
    report = {"workspaces": [{"path": "w", "ok": False, "diagnostics": [{"id": "a,b:c", "level": "error", "message": "50% of\nrows"}]}]}
    assert ci_workflow.log_lines(json.dumps(report))[1] == "::error title=a%2Cb%3Ac::error: 50%25 of%0Arows"


def test_no_report_to_print_fails_the_step_saying_so(tmp_path):
    (tmp_path / "validation.json").write_text("Traceback (most recent call last):\n  ...", encoding="utf-8")
    for path in (tmp_path / "validation.json", tmp_path / "missing.json"):
        proc = subprocess.run([sys.executable, "-m", "dashmem.repo.ci_workflow", str(path)], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 1 and proc.stdout.startswith("::error title=No validation report::"), proc.stdout + proc.stderr


def test_the_validate_step_prints_the_report_and_keeps_validates_exit_code():
    lines = step("Validate")["run"].strip().splitlines()
    assert lines[1] == 'dashmem validate . --json > "$RUNNER_TEMP/validation.json" || status=$?'  # outside the checkout
    assert lines[2:] == ['python -m dashmem.repo.ci_workflow "$RUNNER_TEMP/validation.json"', "exit $status"]


def test_the_app_is_cloned_from_a_repository_variable_outside_the_checkout():
    install = step("Install")
    assert install["env"] == {"DASHMEM_APP_REPO": "${{ vars.DASHMEM_APP_REPO }}"}
    *check, clone, pip = install["run"].strip().splitlines()
    assert check[0] == 'if [ -z "$DASHMEM_APP_REPO" ]; then'
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
        proc = run_step(validate["run"], checkout, env)
        outcomes[variables.get("DASHMEM_VALIDATE_STRICT")] = proc.returncode, proc.stdout
    assert [code for code, _ in outcomes.values()] == [0, 0, 1], outcomes
    # The step prints the report either way: a green run shows its warning, the strict one the same as an error.
    assert "::warning title=check.data_not_run::" in outcomes[None][1] and "data checks not run" in outcomes[None][1], outcomes
    assert "::error title=check.data_not_run::" in outcomes["true"][1], outcomes
