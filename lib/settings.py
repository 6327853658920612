"""Where the app keeps its state. Everything comes from the environment.

DASHMEM_CONFIG_REPO  the git config repo (default: .data/config-repo in the project, git-ignored)
DASHMEM_CACHE_DIR    DuckDB files, uploads and other caches (default: .data/cache)
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
    return _path("DASHMEM_CACHE_DIR", PROJECT_ROOT / ".data" / "cache")


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
