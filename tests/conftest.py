"""Shared fixtures: real git repos in temporary folders, the shipped workspaces, the public datasets."""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WORKSPACES = ROOT / "workspaces"
# The real public CSVs, outside this repository; DASHMEM_DATASETS points elsewhere (as for bench/).
# Tests reach them through the `datasets` and `dataset` fixtures, which skip when they are missing.
DATASETS = Path(os.environ.get("DASHMEM_DATASETS", ROOT.parent / "shared" / "datasets"))


@pytest.fixture(autouse=True)
def _user_cache(tmp_path_factory, monkeypatch):
    """The user's cache folder (where the CLI caches data of workspaces outside the app's
    config repo) is a temporary one, so tests never write into the home folder."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("user-cache")))


@pytest.fixture(scope="session")
def datasets() -> Path:
    """The folder of public datasets; the test is skipped, saying where it looked, when it is missing."""
    if not DATASETS.is_dir():
        pytest.skip(f"public datasets folder {DATASETS} not found (set DASHMEM_DATASETS)")
    return DATASETS


@pytest.fixture(scope="session")
def dataset(datasets):
    """One public dataset by file name: dataset('gdp.csv') -> Path; skips the test when that file is missing."""

    def path(name: str) -> Path:
        found = datasets / name
        if not found.exists():
            pytest.skip(f"public dataset {name} not found in {datasets}")
        return found

    return path


@pytest.fixture
def ws_copy(tmp_path):
    """A writable copy of a shipped demo workspace: ws_copy('gdp-explorer') -> Path."""

    def make(slug: str) -> Path:
        target = tmp_path / "copies" / slug
        shutil.copytree(WORKSPACES / slug, target)
        return target

    return make


@pytest.fixture
def config_repo(tmp_path, monkeypatch):
    """A fresh config repo created from the shipped templates, plus a bare remote named origin."""
    from lib.configrepo import ConfigRepo

    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    repo = ConfigRepo.open_or_create(tmp_path / "config-repo", WORKSPACES)
    import git

    git.Repo.init(tmp_path / "remote.git", bare=True, initial_branch="main")
    repo.repo.create_remote("origin", str(tmp_path / "remote.git"))
    return repo
