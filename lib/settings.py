"""Where the app keeps its state. Everything comes from the environment.

DASHMEM_CONFIG_REPO  the git config repo (default: .data/config-repo in the project, git-ignored)
DASHMEM_CACHE_DIR    data snapshots, uploads and other caches (default: .data/cache for the app's own
                     config repo; for a workspace anywhere else, the user's cache folder,
                     $XDG_CACHE_HOME/dashmem or ~/.cache/dashmem, never the app's checkout)
DASHMEM_TEMPLATES    template workspaces for a new config repo (default: the project's workspaces/)
"""
from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def _path(var: str, default: Path) -> Path:
    value = os.environ.get(var)
    return Path(value).expanduser().resolve() if value else default


def config_repo_path() -> Path:
    return _path("DASHMEM_CONFIG_REPO", PROJECT_ROOT / ".data" / "config-repo")


def cache_dir() -> Path:
    """The app's cache: snapshots of the config repo's workspaces and drafts, and uploads."""
    return _path("DASHMEM_CACHE_DIR", PROJECT_ROOT / ".data" / "cache")


def user_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base).expanduser() if base else Path.home() / ".cache") / "dashmem"


def cache_dir_for(ws_path: Path) -> Path:
    """Where the data of the workspace at `ws_path` is cached.

    DASHMEM_CACHE_DIR when set. Otherwise the app's cache for a workspace of the
    app's config repo (or of one of its drafts), so the app and a CLI run on it
    share data; and for a workspace anywhere else (a clone of a config repo,
    CI), the user's cache folder, so the CLI never writes into the app's checkout.
    """
    if os.environ.get("DASHMEM_CACHE_DIR"):
        return cache_dir()
    ws_path = Path(ws_path).resolve()
    repo = config_repo_path()
    for root in (repo, repo.with_name(repo.name + ".drafts")):
        if ws_path.is_relative_to(root):
            return cache_dir()
    return user_cache_dir()


def templates_dir() -> Path:
    return _path("DASHMEM_TEMPLATES", PROJECT_ROOT / "workspaces")


DEFAULT_MODEL = "claude-sonnet-5-5"


def model_id() -> str:
    """The Claude model sessions use (DASHMEM_MODEL), defaulting to a current Sonnet."""
    return os.environ.get("DASHMEM_MODEL", DEFAULT_MODEL)


def uploads_dir(slug: str) -> Path:
    """Files uploaded for a workspace's CSV sources (`upload:NAME`): per workspace, shared by
    its published version and every draft, outside git."""
    return cache_dir() / "uploads" / slug
