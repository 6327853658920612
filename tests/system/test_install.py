"""`pip install` of this checkout into a fresh virtualenv outside it, used as a user would (issue point 8).

The package installs as `dashmem` (the checkout's `lib/`), so it shadows no other top-level `lib`;
it ships its schemas and template workspaces; and an installed package keeps its state in the user's
folders (XDG), never in site-packages. The third-party dependencies come from this checkout's venv
(on PYTHONPATH, its site-packages only), so the test needs no network; the package itself never does.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from ..conftest import ROOT, WORKSPACES
from ..helpers.wheel import build_wheel

pytestmark = pytest.mark.slow  # builds a wheel and a virtualenv (about 10 s, once), then runs the CLI in fresh processes


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A fresh virtualenv (no system site-packages) with this checkout installed, not editable."""
    where = tmp_path_factory.mktemp("fresh")
    wheel = build_wheel(where)  # the wheel `pip install <checkout>` builds, from a copy (two builds at once collide in place)
    subprocess.run([sys.executable, "-m", "venv", str(where / "venv")], check=True, capture_output=True, timeout=300)
    subprocess.run(
        [str(where / "venv" / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return where / "venv"


def _site_packages(venv: Path) -> Path:
    (site,) = (venv / "lib").glob("python3*/site-packages")
    return site


@pytest.fixture
def home(tmp_path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    return home


def _env(venv: Path, home: Path) -> dict[str, str]:
    deps = sysconfig.get_paths()["purelib"]  # this checkout's venv: the dependencies, never the checkout itself
    assert not (Path(deps) / "lib").exists() and not (Path(deps) / "dashmem").exists()
    return {
        "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
        "PYTHONPATH": deps,
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }


def _run(venv: Path, home: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), cwd=cwd, env=_env(venv, home), capture_output=True, text=True, timeout=180)


def _files(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*") if "__pycache__" not in p.parts}


def test_it_installs_as_dashmem_with_its_schemas_and_templates_and_shadows_no_lib(venv, home, tmp_path):
    site = _site_packages(venv)
    assert (venv / "bin" / "dashmem").is_file()
    assert sorted(p.name for p in (site / "dashmem" / "_schemas").glob("*.json")) == sorted(p.name for p in (ROOT / "schemas").glob("*.json"))
    shipped = sorted(p.relative_to(site / "dashmem" / "_templates") for p in (site / "dashmem" / "_templates").rglob("*") if p.is_file())
    assert shipped == sorted(p.relative_to(WORKSPACES) for p in WORKSPACES.rglob("*") if p.is_file() and "schemas" not in p.relative_to(WORKSPACES).parts)
    # Every sub-package of lib/ is in the wheel.
    wings = sorted(p.parent.relative_to(ROOT / "lib") for p in (ROOT / "lib").rglob("__init__.py") if "__pycache__" not in p.parts)
    assert sorted(p.parent.relative_to(site / "dashmem") for p in (site / "dashmem").rglob("__init__.py")) == wings
    assert not (site / "lib").exists()

    cwd = tmp_path / "somewhere"
    cwd.mkdir()
    found = _run(venv, home, cwd, "python", "-c", "import dashmem.cli, dashmem.core.settings as s; print(dashmem.cli.__file__); print(s.CHECKOUT)")
    assert found.returncode == 0, found.stderr
    where, checkout = found.stdout.split()
    assert Path(where).is_relative_to(site) and checkout == "None"
    shadow = _run(venv, home, cwd, "python", "-c", "import lib")
    assert shadow.returncode != 0 and "No module named 'lib'" in shadow.stderr


def test_validate_and_refresh_a_workspace_from_any_folder(venv, home, tmp_path):
    ws = tmp_path / "elsewhere" / "supply-chain-weekly"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", ws)
    cwd = tmp_path / "somewhere"
    cwd.mkdir()
    venv_before, checkout_cache_before = _files(venv), _files(ROOT / ".data") if (ROOT / ".data").exists() else set()

    ok = _run(venv, home, cwd, "dashmem", "validate", str(ws))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    # A hint names the command as it is installed, not the checkout's `python -m lib`.
    broken = ws.parent / "broken"
    shutil.copytree(ws, broken)
    (broken / "sources.yaml").write_text("sources:\n  - {name: gates, type: nosuchtype}\n", encoding="utf-8")
    hinted = _run(venv, home, cwd, "dashmem", "refresh", str(broken))
    assert hinted.returncode != 0 and "`dashmem validate`" in hinted.stdout + hinted.stderr, hinted.stdout + hinted.stderr
    assert "python -m lib" not in hinted.stdout + hinted.stderr
    refreshed = _run(venv, home, cwd, "dashmem", "refresh", str(ws))
    assert refreshed.returncode == 0, refreshed.stdout + refreshed.stderr
    assert "switched to snapshot" in refreshed.stdout

    # The data went to the user's cache folder: not the venv, not this checkout.
    (snapshots,) = (home / ".cache" / "dashmem").glob("supply-chain-weekly-*")
    assert any(p.is_file() for p in snapshots.rglob("*"))
    assert not [p for p in _files(venv) - venv_before if p.name.startswith("supply-chain-weekly") or ".data" in p.parts]
    checkout_now = _files(ROOT / ".data") if (ROOT / ".data").exists() else set()
    assert not [p for p in checkout_now - checkout_cache_before if snapshots.name in p.parts]

    # `python -m dashmem` is the same command.
    again = _run(venv, home, cwd, "python", "-m", "dashmem", "validate", str(ws), "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["ok"], again.stdout + again.stderr


def test_a_new_config_repo_and_workspace_come_from_the_shipped_templates(venv, home, tmp_path):
    cwd = tmp_path / "somewhere"
    cwd.mkdir()
    created = _run(venv, home, cwd, "dashmem", "new", "fresh-dash", "--template", "gdp-explorer")
    assert created.returncode == 0, created.stdout + created.stderr
    assert (cwd / "fresh-dash" / "workspace.yaml").is_file() and (cwd / "fresh-dash" / "data" / "gdp.csv").is_file()

    # The app's config repo, by default, in the user's data folder: created from the shipped templates and schemas.
    synced = _run(venv, home, cwd, "dashmem", "sync")
    assert synced.returncode == 0, synced.stdout + synced.stderr
    repo = home / ".local" / "share" / "dashmem" / "config-repo"
    assert f"created {repo} from the templates" in synced.stdout
    assert {p.name for p in repo.iterdir()} >= {"gdp-explorer", "supply-chain-weekly", "schemas", ".github"}
    assert not (_site_packages(venv) / ".data").exists() and not (venv / "lib" / ".data").exists()
