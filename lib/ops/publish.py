"""Publishing a draft into `main`, crash-safely, and proposing one for an owner's review (and a pull request).

A publish never touches the published checkout until `main` has moved: the
merge is computed with git plumbing (`gitops.merge_tree`), checked on the
merged tree (a copy of the workspace folder in a scratch folder of the git
directory), committed with `commit_tree`, and `main` is moved with a
compare-and-swap `update-ref`; only then is the checkout brought up to it. A
process killed at any moment therefore leaves `main` at the old commit or the
new one, and what it left behind is repaired when the config repo is opened.

Publishing also loads the data the published version needs. Readers are served
the workspace's snapshot, which holds the tables of the sources loaded so far:
a version that adds a source (or changes one, or the data file it reads) would
otherwise be served without that table, and every component on it would fail
until somebody clicked Refresh. So the sources a publish adds or changes are
fetched from the merged tree while it is checked (the checks read them anyway),
a source that cannot be loaded refuses the publish with its reason, and once
`main` has moved their tables are served beside the others (`refresh.add_to_served`).
A publish killed between moving `main` and writing that snapshot leaves the tables
to the next Refresh; until then the components on them say the table is not loaded.

These functions are the implementation of `lib.repo.configrepo.ConfigRepo`'s
publish methods; `cr` is that ConfigRepo.
"""

from __future__ import annotations

import logging
import os
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import git
import pyarrow as pa

from ..artifacts.checks import validate_workspace
from ..core.diagnostics import ERROR, Diagnostic, ValidationFailed, has_errors
from ..data import refresh
from ..data.refresh import Progress, SourceReport
from ..data.snapshots import Warehouse
from ..memory import workspace
from ..memory.yamlio import parse
from ..repo import branches, drafts, proposals, replica
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


def publish(cr: ConfigRepo, user: User, slug: str, subject: str | None = None, *, progress: Progress | None = None) -> str:
    """Merge the user's draft of `slug` into `main` (see `ConfigRepo.publish`)."""
    branch = drafts.branch_name(user, slug)
    meta = cr._access_meta(slug, branch)
    access.require(user, "publish", meta, slug)
    if branch not in cr.repo.heads:
        raise ConfigRepoError(f"{user.name} has no draft of {slug} to publish")
    return merge_into_main(cr, user, slug, branch, subject or f"Publish {slug} from {user.name}'s draft", meta, progress)


def publish_branch(cr: ConfigRepo, user: User, slug: str, branch: str, subject: str | None = None, *, progress: Progress | None = None) -> str:
    """Publish a draft or proposal: owners any open one, stewards (where allowed) only their own.

    `progress(fraction, message)` hears each step (checking, loading a source, publishing); its last
    message says which sources' data was loaded for everyone, if any."""
    meta = cr._access_meta(slug, branch)
    access.require(user, "publish", meta, slug)
    if branch not in cr.repo.heads:
        raise ConfigRepoError(f"no branch {branch!r}")
    if branch.startswith("rejected/"):
        raise ConfigRepoError(f"{branch} was rejected; its author can redo the change on a new draft")
    if access.role_of(user, meta) != access.OWNER and branch != drafts.branch_name(user, slug):
        raise access.PermissionDenied(f"{user.name} may publish only their own draft of {slug}; an owner publishes others'")
    return merge_into_main(cr, user, slug, branch, subject or f"Publish {slug} from {branch}", meta, progress)


def merge_into_main(cr: ConfigRepo, user: User, slug: str, branch: str, subject: str, meta: dict[str, Any], progress: Progress | None = None) -> str:
    """Publish `branch` as a merge commit on `main`, crash-safely (see the module docstring).

    The published checkout is written only here, in `repair` and in a pull, always under the main lock.
    A replica of a shared remote (lib.repo.replica) pushes the merge first and moves `main` here only once
    the remote took it; when another server published meanwhile, it merges again on theirs and retries.
    """
    progress = progress or (lambda fraction, message: None)
    with cr._lock():
        cr._repair_served()  # leftovers of a publish killed in another process since this one opened
        for _attempt in range(replica.PUBLISH_TRIES if cr.shared else 1):
            if cr.shared:
                replica.fetch(cr)  # unreachable: refused here, before anything moved (the draft is kept)
                replica.follow_main(cr)
            old = rev(cr.path, f"refs/heads/{MAIN}")
            new, loaded = merge_commit(cr, user, slug, branch, subject, meta, old, progress)
            progress(0.8, "Publishing…")
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
                cr._follow_main()
            except git.GitCommandError as exc:  # published all the same: the next publish or opening finishes it
                _log.error("published %s as %s, but the published checkout could not be updated: %s", slug, new, exc)
            serve(cr, slug, loaded, progress)
            break
        else:
            raise ConfigRepoError(
                f"cannot publish {slug}: other servers published {replica.PUBLISH_TRIES} times while this one tried; "
                "nothing was published and your draft is kept; publish again"
            )
    proposals.clear(cr, branch)  # published: it no longer waits for an owner
    # Bring the draft up to the published state so the next edit starts from it.
    owner = (branches.parse_draft(branch) or (None,))[0]
    if owner:
        drafts.fast_forward(cr, Draft(owner, slug, branch, branches.worktree(cr, owner, slug)), new)
        if cr.shared:
            replica.push_draft(cr, branch)
    return new


def merge_commit(
    cr: ConfigRepo, user: User, slug: str, branch: str, subject: str, meta: dict[str, Any], old: str, progress: Progress | None = None
) -> tuple[str, Loaded]:
    """The checked merge commit of `branch` into `old` (no branch moves) and the data it adds, which `serve`
    serves once `main` is at the commit; raises what refuses the publish."""
    progress = progress or (lambda fraction, message: None)
    progress(0.05, "Merging the draft…")
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
    needed = sources_to_load(cr, slug, old, tree)
    diagnostics, loaded = validate_tree(cr, tree, slug, needed, check=require_valid, progress=progress)
    if has_errors(diagnostics):
        raise ValidationFailed(diagnostics)
    return commit_tree(cr.path, tree, [old, theirs], message(subject, "publish", slug), env=drafts.git_env(user)), loaded


def meta_in_tree(cr: ConfigRepo, tree: str, slug: str) -> dict[str, Any]:
    """workspace.yaml of `slug` in a tree ({} when it is missing or does not parse)."""
    return _file_in_tree(cr, tree, slug, "workspace")


def _file_in_tree(cr: ConfigRepo, tree: str, slug: str, kind: str) -> dict[str, Any]:
    """A memory file (`kind`) of `slug` in a tree or commit ({} when it is missing or does not parse)."""
    proc = _git(cr.path, "cat-file", "blob", f"{tree}:{slug}/{workspace.FILES[kind]}", ok=(0, 128))
    if proc.returncode != 0:
        return {}
    try:
        data = parse(proc.stdout).data
    except Exception:  # malformed YAML: the validity checks report it
        return {}
    return data if isinstance(data, dict) else {}


def _sources(files: dict[str, Any]) -> list[dict[str, Any]]:
    listed = files.get("sources")
    return [s for s in listed if isinstance(s, dict) and isinstance(s.get("name"), str)] if isinstance(listed, list) else []


# --------------------------------------------------------------------------- the data a published version needs


@dataclass
class Loaded:
    """What a publish loads for the published version: the tables of the sources it adds or changes."""

    sources: list[dict[str, Any]] = field(default_factory=list)  # every source of the published version
    tables: dict[str, pa.Table] = field(default_factory=dict)  # those it adds or changes, fetched from the merged tree
    reports: list[SourceReport] = field(default_factory=list)


def sources_to_load(cr: ConfigRepo, slug: str, old: str, tree: str) -> list[str]:
    """The sources of `slug` in `tree` that `old` (the published commit) does not serve as they are:
    added, changed, or reading a workspace file the merge changes. None while nothing is served yet:
    the first page that shows the workspace then loads all of its data (`app_pages.ui.first_load`)."""
    if Warehouse.for_workspace(cr.published_path(slug)).current() is None:
        return []
    before = {s["name"]: s for s in _sources(_file_in_tree(cr, old, slug, "sources"))}
    changed = set(_git(cr.path, "diff", "--name-only", old, tree, "--", f"{slug}/").stdout.splitlines())
    return [
        s["name"]
        for s in _sources(_file_in_tree(cr, tree, slug, "sources"))
        if before.get(s["name"]) != s or (isinstance(s.get("path"), str) and f"{slug}/{Path(s['path']).as_posix()}" in changed)
    ]


def validate_tree(
    cr: ConfigRepo, tree: str, slug: str, needed: list[str] | None = None, *, check: bool = True, progress: Progress | None = None
) -> tuple[list[Diagnostic], Loaded]:
    """The full checks (`checks.validate_workspace`) of the workspace folder as it is in `tree` (unless not
    `check`), and the sources in `needed` fetched from it: each that cannot be loaded is an error.

    The folder, data files included, is written to `<tmp>/<slug>`: the folder's
    name is part of the workspace (names, upload caches), so it must be the slug.
    The checks fetch every source; the needed ones are kept from that fetch, not read twice.
    """
    progress = progress or (lambda fraction, message: None)
    needed = needed or []
    scratch = cr._git_dir / SCRATCH  # not /tmp: `repair` removes what a killed publish left here
    scratch.mkdir(exist_ok=True)
    fetched: list[tuple[dict[str, pa.Table], list[SourceReport]]] = []

    def fetch(path: Path, names: list[str] | None = None) -> tuple[dict[str, pa.Table], list[SourceReport]]:
        fetched.append(refresh.fetch_candidate(path, names, progress=lambda f, m: progress(0.1 + 0.5 * f, m)))
        progress(0.6, "Checking the dashboard and the report on the data…" if check else "Loaded the data it adds")
        return fetched[-1]

    with tempfile.TemporaryDirectory(prefix="publish-", dir=scratch) as tmp:
        extract(cr.path, tree, slug, Path(tmp))
        folder = Path(tmp) / slug
        if not folder.is_dir():
            folder.mkdir()  # the merge deletes the workspace: validation says what is missing
        progress(0.1, "Checking the draft…")
        diagnostics = validate_workspace(folder, fetch=fetch) if check else []
        ws, problems = workspace.load(folder, readonly=True)
        if needed and not fetched and not has_errors(diagnostics + problems):  # not checked, or no dashboard to check
            fetch(folder, needed)
        prefix = str(Path(tmp).resolve()) + os.sep
    tables, reports = fetched[-1] if fetched else ({}, [])
    listed = _sources(ws.get("sources") or {})
    loaded = Loaded(listed, reports=[r for r in reports if r.name in needed])
    loaded.tables = {r.name: tables[r.name] for r in loaded.reports if r.status == "ok"}
    at = {s["name"]: i for i, s in enumerate(listed)}
    doc = ws.docs.get("sources")
    diagnostics += [
        Diagnostic(
            NOT_LOADED,
            ERROR,
            f"source '{r.name}' cannot be loaded, and the published dashboard needs its data: {r.message.removeprefix(f'source {r.name!r}: ')}; "
            "nothing was published: fix the source or its file, then publish again",
            f"{slug}/{workspace.FILES['sources']}",
            doc.line_of(("sources", at[r.name])) if doc is not None and r.name in at else None,
        )
        for r in loaded.reports
        if r.status != "ok"
    ]
    # Messages name the files as they are in the config repo, not in the temporary folder.
    return [replace(d, file=d.file and d.file.replace(prefix, ""), message=d.message.replace(prefix, "")) for d in diagnostics], loaded


NOT_LOADED = "publish.data_not_loaded"
PUBLISHED = "Published"  # the last progress message of a publish that loaded no data


def serve(cr: ConfigRepo, slug: str, loaded: Loaded, progress: Progress) -> None:
    """Serve the data a publish loaded beside the data served now, once `main` is at the published version.

    Published already: a snapshot that cannot be written (a full disk) is logged and the next Refresh loads it."""
    if not loaded.tables:
        progress(1.0, PUBLISHED)
        return
    progress(0.9, f"Storing the data of {', '.join(loaded.tables)} for everyone…")
    try:
        refresh.add_to_served(Warehouse.for_workspace(cr.published_path(slug)), loaded.sources, loaded.tables)
    except OSError as exc:
        _log.error("published %s, but the data of %s could not be stored: %s", slug, ", ".join(loaded.tables), exc)
        progress(1.0, f"The data of {', '.join(loaded.tables)} could not be stored ({exc.strerror or exc}); Refresh on the Dashboard loads it")
        return
    rows = ", ".join(
        f"{r.name} ({r.rows_after:,} row{'s' if r.rows_after != 1 else ''})" for r in loaded.reports if r.name in loaded.tables and r.rows_after is not None
    )
    progress(1.0, f"The data it adds is loaded for everyone: {rows}")


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
    """Propose the user's draft for an owner's review: marked as proposed in the config repo, so the
    workspace's owners see it waiting on Review and in the sidebar, in every process, until it is published
    or rejected; with `remote`, it is pushed there first, so a pull request can be opened."""
    branch = drafts.branch_name(user, slug)
    access.require(user, "propose", cr._access_meta(slug, branch), slug)
    if branch not in cr.repo.heads:
        raise ConfigRepoError(f"{user.name} has no draft of {slug} to propose")
    if cr.has_remote(remote):
        try:
            cr.repo.git.push(remote, f"refs/heads/{branch}:refs/heads/{branch}")
        except git.GitCommandError as exc:
            _log.warning("could not push %s to %s: %s", branch, remote, exc)
            raise ConfigRepoError(
                f"could not push {branch} to {remote} ({remote_url(cr, remote)}): git could not reach it or was refused there; "
                "it was not proposed. Check the remote under 'Where proposals go' on Review (an app owner sets it), then propose again"
            ) from None
    proposals.mark(cr, branch, rev(cr.path, f"refs/heads/{branch}"), user.name)
    return branch
