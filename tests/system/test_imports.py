"""What a cold `python -m lib <command>` loads: cron and CI start a new process for every command.

Each test runs the real command in a fresh interpreter with `-X importtime`, which
lists every module the process imported, and asserts on that list (never on times).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import ROOT, WORKSPACES

# Refresh parses CSV with pyarrow and checks with DuckDB; none of these is on its path.
NOT_FOR_REFRESH = ("git", "streamlit", "anthropic", "altair", "pandas", "httpx", "httpx2", "httpcore", "sqlalchemy", "sqlglot", "mcp", "vl_convert", "jinja2")


def imported_by(*args: str, cwd: Path, cache: Path) -> tuple[set[str], subprocess.CompletedProcess]:
    """Top-level packages a cold `python -m lib ARGS` imported, and the finished process."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "lib", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(cache), "DASHMEM_CACHE_DIR": str(cache)},
    )
    modules = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    modules.discard("imported package")  # the header line
    return {m.split(".")[0] for m in modules}, proc


@pytest.fixture
def workspace_copy(tmp_path):
    target = tmp_path / "supply-chain-weekly"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", target)
    return target


@pytest.mark.slow
def test_refresh_imports_neither_git_nor_the_ui_nor_the_http_clients(workspace_copy, tmp_path):
    packages, proc = imported_by("refresh", str(workspace_copy), cwd=tmp_path, cache=tmp_path / "cache")
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    assert "switched to snapshot" in proc.stdout
    assert {"pyarrow", "duckdb", "lib"} <= packages  # the importtime listing was read
    assert not packages & set(NOT_FOR_REFRESH), sorted(packages & set(NOT_FOR_REFRESH))

    # The next cron run, data of the same shape: the dashboard's bindings are recorded, so not even DuckDB loads.
    data = workspace_copy / "data" / "gates.csv"
    data.write_text("".join(data.read_text().splitlines(keepends=True)[:-1]))
    packages, proc = imported_by("refresh", str(workspace_copy), cwd=tmp_path, cache=tmp_path / "cache")
    assert proc.returncode == 0 and "switched to snapshot" in proc.stdout, proc.stdout + proc.stderr[-2000:]
    assert "pyarrow" in packages
    assert not packages & {"duckdb", *NOT_FOR_REFRESH}, sorted(packages & {"duckdb", *NOT_FOR_REFRESH})


@pytest.mark.slow
def test_settings_command_loads_no_data_or_validation_libraries(tmp_path):
    packages, proc = imported_by("settings", cwd=ROOT, cache=tmp_path / "cache")
    assert proc.returncode == 0 and "DASHMEM_CACHE_DIR" in proc.stdout, proc.stderr[-2000:]
    assert {"lib", "argparse"} <= packages
    heavy = {"pyarrow", "duckdb", "jsonschema", "numpy", "git", "pandas", "streamlit"}
    assert not packages & heavy, sorted(packages & heavy)
