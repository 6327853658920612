"""Publishing a draft into `main`, crash-safely, and proposing one for a pull request.

A publish never touches the published checkout until `main` has moved: the
merge is computed with git plumbing (`gitops.merge_tree`), checked on the
merged tree (a copy of the workspace folder in a scratch folder of the git
directory), committed with `commit_tree`, and `main` is moved with a
compare-and-swap `update-ref`; only then is the checkout brought up to it. A
process killed at any moment therefore leaves `main` at the old commit or the
new one, and what it left behind is repaired when the config repo is opened.

These functions are the implementation of `lib.repo.configrepo.ConfigRepo`'s
publish methods; `cr` is that ConfigRepo.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import git

from ..artifacts.checks import validate_workspace
from ..core.diagnostics import Diagnostic, ValidationFailed, has_errors
from ..memory import workspace
from ..memory.yamlio import parse
from ..repo import branches, drafts, replica
from ..repo.branches import Draft
from ..repo.configrepo import SCRATCH
from ..repo.drafts import PublishConflict
from ..repo.gitops import ConfigRepoError, _git, cas_update_ref, commit_tree, extract, is_ancestor, merge_tree, rev
from ..repo.history import MAIN, message
from ..roles import access
from ..roles.access import User

if TYPE_CHECKING:
    from ..repo.configrepo import ConfigRepo

_log = logging.getLogger(__name__)


def publish(cr: ConfigRepo, user: User, slug: str, subject: str | None = None) -> str:
    """Merge the user's draft of `slug` into `main` (see `ConfigRepo.publish`)."""
    branch = drafts.branch_name(user, slug)
    meta = cr._access_meta(slug, branch)
    access.require(user, "publish", meta, slug)
    if branch not in cr.repo.heads:
        raise ConfigRepoError(f"{user.name} has no draft of {slug} to publish")
    return merge_into_main(cr, user, slug, branch, subject or f"Publish {slug} from {user.name}'s draft", meta)


def publish_branch(cr: ConfigRepo, user: User, slug: str, branch: str, subject: str | None = None) -> str:
    """Publish a draft or proposal: owners any open one, stewards (where allowed) only their own."""
    meta = cr._access_meta(slug, branch)
    access.require(user, "publish", meta, slug)
    if branch not in cr.repo.heads:
        raise ConfigRepoError(f"no branch {branch!r}")
    if branch.startswith("rejected/"):
        raise ConfigRepoError(f"{branch} was rejected; its author can redo the change on a new draft")
    if access.role_of(user, meta) != access.OWNER and branch != drafts.branch_name(user, slug):
        raise access.PermissionDenied(f"{user.name} may publish only their own draft of {slug}; an owner publishes others'")
    return merge_into_main(cr, user, slug, branch, subject or f"Publish {slug} from {branch}", meta)


def merge_into_main(cr: ConfigRepo, user: User, slug: str, branch: str, subject: str, meta: dict[str, Any]) -> str:
    """Publish `branch` as a merge commit on `main`, crash-safely (see the module docstring).

    The published checkout is written only here, in `repair` and in a pull, always under the main lock.
    A replica of a shared remote (lib.repo.replica) pushes the merge first and moves `main` here only once
    the remote took it; when another server published meanwhile, it merges again on theirs and retries.
    """
    with cr._lock():
        cr._repair_served()  # leftovers of a publish killed in another process since this one opened
        for _attempt in range(replica.PUBLISH_TRIES if cr.shared else 1):
            if cr.shared:
                replica.fetch(cr)  # unreachable: refused here, before anything moved (the draft is kept)
                replica.follow_main(cr)
            old = rev(cr.path, f"refs/heads/{MAIN}")
            new = merge_commit(cr, user, slug, branch, subject, meta, old)
            if cr.shared and not replica.push_main(cr, new, old):
                continue  # another server published first: merge again on what it published
            # Compare-and-swap: `main` moves only from the commit this merge was made on.
            try:
                cas_update_ref(cr.path, f"refs/heads/{MAIN}", new, old, f"dashmem: publish {slug} from {branch}")
            except git.GitCommandError as exc:
                if cr.shared:  # on the remote already: the next pull brings this server up to it
                    _log.error("published %s as %s to the shared config repo, but %s here could not follow: %s", slug, new, MAIN, exc)
                    break
                raise ConfigRepoError(
                    f"cannot publish {slug}: {MAIN} changed while publishing, outside this app ({exc.stderr.strip()}); nothing was published, publish again"
                ) from None
            # Only now bring the published checkout to the new `main` (`repair` finishes this if killed here).
            try:
                _git(cr.path, "reset", "--hard", "-q")
            except git.GitCommandError as exc:  # published all the same: the next publish or opening finishes it
                _log.error("published %s as %s, but the published checkout could not be updated: %s", slug, new, exc)
            break
        else:
            raise ConfigRepoError(
                f"cannot publish {slug}: other servers published {replica.PUBLISH_TRIES} times while this one tried; "
                "nothing was published and your draft is kept; publish again"
            )
    # Bring the draft up to the published state so the next edit starts from it.
    owner = (branches.parse_draft(branch) or (None,))[0]
    if owner:
        drafts.fast_forward(cr, Draft(owner, slug, branch, branches.worktree(cr, owner, slug)), new)
        if cr.shared:
            replica.push_draft(cr, branch)
    return new


def merge_commit(cr: ConfigRepo, user: User, slug: str, branch: str, subject: str, meta: dict[str, Any], old: str) -> str:
    """The checked merge commit of `branch` into `old` (no branch moves); raises what refuses the publish."""
    theirs = rev(cr.path, f"refs/heads/{branch}")
    if is_ancestor(cr.path, theirs, old):
        raise ConfigRepoError(f"nothing to publish: {branch} has no changes that are not on {MAIN}")
    # Roles were checked for `slug` only, so publish nothing outside its folder.
    outside = [p for p in _git(cr.path, "diff", "--name-only", f"{old}...{theirs}").stdout.splitlines() if not p.startswith(f"{slug}/")]
    if outside:
        raise ConfigRepoError(f"cannot publish {branch} as {slug}: it also changes {', '.join(outside)}; publish each workspace on its own")
    tree, conflicts = merge_tree(cr.path, old, theirs)
    if conflicts or not tree:
        raise PublishConflict(slug, branch, conflicts)
    try:
        published_meta = cr.meta(slug, old)
    except ConfigRepoError:
        published_meta = {}  # a new workspace: its creator sets who may do what
    if published_meta:
        # However the change got onto the branch (save, revert, undo, a push), only owners change who may do what.
        access.require_governance_unchanged_or_owner(user, published_meta, meta_in_tree(cr, tree, slug), slug)
    require_valid = (meta.get("policy") or {}).get("require_valid_to_publish", True)
    if require_valid:
        diagnostics = validate_tree(cr, tree, slug)
        if has_errors(diagnostics):
            raise ValidationFailed(diagnostics)
    return commit_tree(cr.path, tree, [old, theirs], message(subject, "publish", slug), env=drafts.git_env(user))


def meta_in_tree(cr: ConfigRepo, tree: str, slug: str) -> dict[str, Any]:
    """workspace.yaml of `slug` in a tree ({} when it is missing or does not parse)."""

    proc = _git(cr.path, "cat-file", "blob", f"{tree}:{slug}/{workspace.FILES['workspace']}", ok=(0, 128))
    if proc.returncode != 0:
        return {}
    try:
        data = parse(proc.stdout).data
    except Exception:  # malformed YAML: the validity checks report it
        return {}
    return data if isinstance(data, dict) else {}


def validate_tree(cr: ConfigRepo, tree: str, slug: str) -> list[Diagnostic]:
    """The full checks (`checks.validate_workspace`) of the workspace folder as it is in `tree`.

    The folder, data files included, is written to `<tmp>/<slug>`: the folder's
    name is part of the workspace (names, upload caches), so it must be the slug.
    """
    from dataclasses import replace

    scratch = cr._git_dir / SCRATCH  # not /tmp: `repair` removes what a killed publish left here
    scratch.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="publish-", dir=scratch) as tmp:
        extract(cr.path, tree, slug, Path(tmp))
        folder = Path(tmp) / slug
        if not folder.is_dir():
            folder.mkdir()  # the merge deletes the workspace: validation says what is missing
        diagnostics = validate_workspace(folder)
        prefix = str(Path(tmp).resolve()) + os.sep
        # Messages name the files as they are in the config repo, not in the temporary folder.
        return [replace(d, file=d.file.replace(prefix, "", 1)) if d.file and prefix in d.file else d for d in diagnostics]


# --------------------------------------------------------------------------- proposing: pushing a draft for a pull request


def remote_url(cr: ConfigRepo, remote: str = "origin") -> str | None:
    return next((r.url for r in cr.repo.remotes if r.name == remote), None)


def set_remote(cr: ConfigRepo, user: User, url: str, remote: str = "origin") -> None:
    """Where proposals are pushed for pull requests (an app owner's setting). Credentials never go in
    the URL: use an SSH key or a git credential helper on the server."""
    access.require_app_role(user, access.OWNER, "set where proposals are pushed")
    url = replica.check_url(url)
    if cr.shared and remote == replica.REMOTE:
        raise ConfigRepoError(f"this config repo is shared by several app servers through {remote}; DASHMEM_CONFIG_REMOTE sets it, and proposals go there")
    with cr._lock():
        if cr.has_remote(remote):
            cr.repo.git.remote("set-url", remote, url)
        else:
            cr.repo.git.remote("add", remote, url)


def propose(cr: ConfigRepo, user: User, slug: str, remote: str = "origin") -> str:
    """Push the user's draft branch to `remote` so a pull request can be opened."""
    branch = drafts.branch_name(user, slug)
    access.require(user, "propose", cr._access_meta(slug, branch), slug)
    if branch not in cr.repo.heads:
        raise ConfigRepoError(f"{user.name} has no draft of {slug} to propose")
    if not cr.has_remote(remote):
        raise ConfigRepoError(f"the config repo has no remote {remote!r}; add one to propose changes for review")
    try:
        cr.repo.git.push(remote, f"refs/heads/{branch}:refs/heads/{branch}")
    except git.GitCommandError as exc:
        raise ConfigRepoError(f"could not push {branch} to {remote}: {exc.stderr.strip()}") from None
    return branch
