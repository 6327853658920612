"""Shared set-up of the config-repo tests (test_configrepo, test_drafts, test_publish, test_history):
the demo users and workspaces, and small readers of a repo's state."""

from __future__ import annotations

import copy
from pathlib import Path

import git

from lib.core.diagnostics import has_errors
from lib.memory import workspace
from lib.memory.yamlio import parse
from lib.repo.configrepo import ConfigRepo
from lib.repo.history import MAIN, read_file
from lib.roles.access import User

WORKSPACES = Path(__file__).resolve().parent.parent / "workspaces"  # the shipped templates

OLIVIA = User("olivia", app_role="owner")  # owner of both demo workspaces
SAM = User("sam", app_role="steward")  # steward of both; may publish only gdp-explorer
VERA = User("vera")  # matches only the '*' viewers entry

SCW = "supply-chain-weekly"  # stewards_can_publish: false
GDP = "gdp-explorer"  # stewards_can_publish: true


# --------------------------------------------------------------------------- helpers


def load_task(repo: ConfigRepo, user: User, slug: str) -> dict:
    """The task.yaml content of the user's draft (a copy that is safe to change)."""
    d = repo.draft(user, slug)
    ws, diags = workspace.load(d.workspace_path)
    assert not has_errors(diags), diags
    return copy.deepcopy(ws.data["task"])


def edit_rule(repo: ConfigRepo, user: User, slug: str, index: int, text: str, message: str | None = None) -> str | None:
    """Set the text of rule `index` on the user's draft and save it."""
    task = load_task(repo, user, slug)
    task["rules"][index]["text"] = text
    return repo.save(user, slug, {"task": task}, message or f"Edit rule {index}")


def rule_text(repo: ConfigRepo, ref: str, slug: str, index: int) -> str:
    """The text of rule `index` in task.yaml at a version or branch."""
    raw = read_file(repo.repo, ref, f"{slug}/task.yaml")
    assert raw is not None
    return parse(raw.decode("utf-8")).data["rules"][index]["text"]


def sha(repo: ConfigRepo, ref: str = MAIN) -> str:
    return repo.repo.commit(ref).hexsha


def commit_count(repo: ConfigRepo, ref: str) -> int:
    return int(repo.repo.git.rev_list("--count", ref))


def files_at(repo: ConfigRepo, version: str, folder: str) -> dict[str, bytes]:
    """Every file under `folder` at `version`, read with read_file, by path relative to the folder."""
    tree = repo.repo.commit(version).tree / folder
    files: dict[str, bytes] = {}
    for blob in tree.traverse():
        if isinstance(blob, git.Blob):
            path = str(blob.path)
            data = read_file(repo.repo, version, path)
            assert data is not None, path  # in the tree, so read_file finds it
            files[path[len(folder) + 1 :]] = data
    return files


def files_on_disk(folder: Path) -> dict[str, bytes]:
    """Every file under a folder (skipping the worktree's .git link), by relative path."""
    folder = Path(folder)
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file() and ".git" not in p.relative_to(folder).parts}


def assert_main_clean(repo: ConfigRepo) -> None:
    """The published checkout has no uncommitted changes and is not mid-merge."""
    assert repo.repo.git.status("--porcelain") == ""
    assert not (Path(repo.repo.git_dir) / "MERGE_HEAD").exists()


def worktree_git_dir(draft_path: Path) -> Path:
    return Path(git.Repo(draft_path).git_dir)
