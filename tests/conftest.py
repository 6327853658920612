"""Shared fixtures: real git repos in temporary folders, the shipped workspaces, the public datasets."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WORKSPACES = ROOT / "workspaces"
DATASETS = ROOT.parent / "shared" / "datasets"


@pytest.fixture(autouse=True)
def _user_cache(tmp_path_factory, monkeypatch):
    """The user's cache folder (where the CLI caches data of workspaces outside the app's
    config repo) is a temporary one, so tests never write into the home folder."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("user-cache")))


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
