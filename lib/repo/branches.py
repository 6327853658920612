"""Draft branches as the config repo and its replicas both see them: names, worktrees, the marker a writer leaves.

`draft/<user>/<workspace>` is checked out under `<repo>.drafts/<user>/<workspace>`. What lives here is
what `drafts.py` (saving, undo, sync) and `replica.py` (following another server's drafts) share, so
neither needs the other; `ConfigRepo` below is the config repo as both see it.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ContextManager, Iterator, Protocol

import git

from ..core.diagnostics import ValidationFailed
from ..roles import access
from .gitops import CheckoutBehind, ConfigRepoError, _git

if TYPE_CHECKING:
    from .history import FileDiff


@dataclass(frozen=True)
class Draft:
    user: str
    slug: str
    branch: str
    path: Path  # the worktree root

    @property
    def workspace_path(self) -> Path:
        return self.path / self.slug


class ConfigRepo(Protocol):
    """The config repo as the draft and replica functions use it: `lib.repo.configrepo.ConfigRepo`, whose methods
    these functions implement, seen from below (so this module names nothing above it)."""

    path: Path  # the published checkout
    drafts_root: Path  # where draft worktrees live
    shared: bool  # a replica of a remote several app servers share (lib.repo.replica)
    _last_pull: float
    _pulling: Any  # a threading.Lock

    @property
    def repo(self) -> git.Repo: ...
    @property
    def _git_dir(self) -> Path: ...
    def _lock(self, draft: Draft | None = None, timeout: float = 15.0) -> ContextManager[Any]: ...
    def meta(self, slug: str, ref: str = ...) -> dict[str, Any]: ...
    def _access_meta(self, slug: str, branch: str) -> dict[str, Any]: ...
    def is_published(self, slug: str) -> bool: ...
    def published_path(self, slug: str) -> Path: ...
    def has_branch(self, branch: str) -> bool: ...
    def has_remote(self, remote: str = "origin") -> bool: ...
    def diff(self, slug: str, a: str, b: str) -> list[FileDiff]: ...
    def _repair_served(self) -> list[str]: ...
    def _follow_main(self) -> None: ...


def parse_draft(branch: str) -> tuple[str, str] | None:
    """(user, slug) of a draft branch `draft/<user>/<slug>`, else None."""
    parts = branch.split("/")
    return (parts[1], parts[2]) if len(parts) == 3 and parts[0] == "draft" else None


def worktree(cr: ConfigRepo, user_name: str, slug: str) -> Path:
    """Where a person's draft of a workspace is checked out (the worktree root)."""
    return cr.drafts_root / user_name / slug


def reject_here(cr: ConfigRepo, owner: str, slug: str, branch: str, kept: str) -> None:
    """Rename the draft `branch` to `kept` in this repo, removing its worktree (a reject, here or on another server)."""
    where = worktree(cr, owner, slug)
    with cr._lock(), cr._lock(Draft(owner, slug, branch, where)):
        if (where / ".git").exists():
            _git(cr.path, "worktree", "remove", "--force", str(where))
        _git(cr.path, "branch", "-m", branch, kept)


def marker(cr: ConfigRepo, draft: Draft) -> Path:
    return cr._git_dir / f"dashmem-{draft.user}-{draft.slug}.writing"


@contextlib.contextmanager
def writing(cr: ConfigRepo, draft: Draft, what: str) -> Iterator[None]:
    """Mark the draft's worktree as being written (call under the draft's lock).

    A marker left behind means a process died while writing; `repair` then
    makes the worktree equal its branch again. Refusals leave the worktree
    as it was and remove the marker; other errors, and a commit whose worktree
    fell behind it (`CheckoutBehind`), leave it for `repair`.
    """
    mark = marker(cr, draft)
    try:
        mark.write_text(what, encoding="utf-8")
    except OSError:  # a full disk: nothing was written yet, so nothing is left behind either
        mark.unlink(missing_ok=True)
        raise
    clean = False
    try:
        yield
        clean = True
    except CheckoutBehind:
        raise
    except (ValidationFailed, ConfigRepoError, access.PermissionDenied):
        clean = True  # refused before writing, or undone by the operation itself
        raise
    finally:
        if clean:
            mark.unlink(missing_ok=True)
