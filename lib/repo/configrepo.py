"""The config repo: workspace memory in git, with drafts, publish, history and revert.

Layout: the config repo is an ordinary git repository whose `main` branch is
what is published; its own working tree always has `main` checked out and is
what viewers see. Each person's edits to one workspace live on the branch
`draft/<user>/<workspace>`, checked out in its own worktree under
`<repo>.drafts/<user>/<workspace>`, so concurrent drafts never share files.

Nothing here rewrites history: saving, undo and revert all add commits;
publishing is a `--no-ff` merge that is refused, with both sides kept, when
the same lines changed on both sides. Writers take a file lock, so two
processes publishing at once are serialised rather than interleaved.

Crash safety. A publish never touches the published checkout until `main` has
moved: the merge is computed with git plumbing (`merge-tree --write-tree`),
checked on the merged tree (a copy of the workspace folder in a temporary
folder), committed with `commit-tree`, and `main` is moved with a
compare-and-swap `update-ref`; only then is the checkout brought up to it. A
process killed at any moment therefore leaves `main` at the old commit or the
new one. What a killed process can leave behind (git's own lock files, a
checkout half brought up to `main`, a draft mid-merge or half-saved) is
repaired when the config repo is opened (`ConfigRepo.repair`), before a
publish, and for a draft before it is handed out; whatever differs from the
commits is first kept as a stash entry (`git stash list`), so nothing is lost.
Every git command run under one of our locks inherits the lock's file
descriptor, so the lock stays held while any git process started under it
still runs, even when the Python process that took it was killed: whoever gets
the lock knows that git lock files in its domain were left by dead processes.

Reading is cached by what git names things, never by an in-process flag:
the published workspace.yaml files by `main`'s commit, a draft's by its
branch's commit, each parse by its blob (`_MetaCache`). Branch refs are read
from their files on every call, so whatever another process commits is seen
on the next one, and a page run with nothing changed costs one read of the
refs however many workspaces there are. The cached metas are shared, so they
are read-only (`ReadOnlyDict`).

This module is the public facade: `ConfigRepo`, its exceptions and data types.
The work is done in
- `lib.repo.gitops`: running git under our locks, merge/commit/update-ref plumbing, lock and checkout repair;
- `lib.repo.history`: versions, diffs, commit and restore of a folder in any checkout
  (`history`, `diff`, `restore`, `commit_folder`; the CLI uses them on plain clones too);
- `lib.repo.drafts`: draft branches and worktrees, save, revert, undo, sync, the list of drafts;
- `lib.ops.publish`: publishing into `main` and proposing a draft for review.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import logging
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import git

from ..core.diagnostics import ValidationFailed, has_errors
from ..memory import rule_review, workspace
from ..memory.semantic_diff import Change
from ..memory.yamlio import parse
from ..roles import access
from ..roles.access import User
from . import branches, ci_workflow, drafts, gitops, proposals, replica
from .branches import Draft
from .gitops import SYSTEM, Busy, ConfigRepoError, _locked, actor_env, rev
from .history import MAIN, FileDiff, Version, diff, history, message, resolve, semantic_diff

SCRATCH = "dashmem-scratch"  # in the git folder: where a publish checks the merged workspace
GC_LOOSE_OBJECTS = 4000  # `repair` packs the repo once about this many loose objects piled up

_log = logging.getLogger(__name__)


def _refuse(self, *args: Any, **kwargs: Any) -> None:
    raise TypeError("workspace metadata read from the config repo is shared and read-only; change a copy.deepcopy of it")


class ReadOnlyDict(dict):
    """A dict that refuses changes: parsed workspace.yaml shared by every caller (and every session) until it
    changes in git, so a page that changed it in place would change, say, the access list everyone is judged by.
    Copies (`copy.copy`, `copy.deepcopy`, `dict(...)`) are plain, changeable dicts."""

    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _refuse  # type: ignore[assignment]

    def __copy__(self) -> dict:
        return dict(self)

    def __deepcopy__(self, memo: dict) -> dict:
        return {key: copy.deepcopy(value, memo) for key, value in self.items()}

    def __reduce__(self):  # pickles (e.g. into a session store) as a plain dict
        return (dict, (dict(self),))


class ReadOnlyList(list):
    """A list that refuses changes (see `ReadOnlyDict`); its copies are plain lists."""

    __setitem__ = __delitem__ = __iadd__ = __imul__ = append = extend = insert = remove = pop = clear = sort = reverse = _refuse  # type: ignore[assignment]

    def __copy__(self) -> list:
        return list(self)

    def __deepcopy__(self, memo: dict) -> list:
        return [copy.deepcopy(value, memo) for value in self]

    def __reduce__(self):
        return (list, (list(self),))


def _read_only(data: Any) -> Any:
    if isinstance(data, dict):
        return ReadOnlyDict((key, _read_only(value)) for key, value in data.items())
    if isinstance(data, list):
        return ReadOnlyList(_read_only(value) for value in data)
    return data


@dataclass
class _Published:
    """What `main` at one commit publishes: slug -> the blob of its workspace.yaml, and (once all parse) their metas."""

    sha: str
    blobs: dict[str, str]  # slug -> blob sha
    _metas: dict[str, Any] | None = None

    def metas(self, cr: "ConfigRepo") -> dict[str, Any]:
        if self._metas is None:
            self._metas = {slug: cr._metas.parsed(cr, blob) for slug, blob in self.blobs.items()}
        return self._metas


class _MetaCache:
    """Parsed workspace.yaml files, keyed by what git names them, so nothing is ever stale.

    Keys are commit and blob shas read from the repo on each call, never an
    in-process flag: a publish, save or access change by any process makes a
    new commit, so the next call reads it. Shared by the threads (sessions)
    using one ConfigRepo; each thread reads git through its own handle
    (`cr.repo`), so only shas, never GitPython objects, are kept.
    """

    MAX_ENTRIES = 4096  # parsed files and draft lookups kept; about 200 bytes to a few kB each

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._published: _Published | None = None
        self._parsed: dict[str, Any] = {}  # blob sha -> read-only data
        self._draft_blobs: dict[tuple[str, str], str | None] = {}  # (commit sha, slug) -> blob sha of its workspace.yaml
        self._folder_blobs: dict[str, str | None] = {}  # tree sha of a folder -> blob sha of its workspace.yaml

    def published(self, cr: "ConfigRepo", main: str) -> _Published:
        current = self._published
        if current is not None and current.sha == main:
            return current
        # Only the root tree is read whole; a folder whose tree is unchanged since an earlier `main` is not
        # read again, so after a publish only the published workspace's folder is.
        blobs = {}
        for folder in cr.repo.commit(main).tree.trees:
            if workspace.SLUG_RE.match(folder.name):
                blob = self._folder_blobs.get(folder.hexsha, _UNKNOWN)
                if blob is _UNKNOWN:
                    blob = _entry(cr.repo, folder.hexsha, workspace.FILES["workspace"])
                    with self._lock:
                        self._bound(self._folder_blobs)
                        self._folder_blobs[folder.hexsha] = blob
                if blob is not None:
                    blobs[folder.name] = blob
        current = _Published(main, dict(sorted(blobs.items())))
        with self._lock:
            self._published = current
        return current

    def draft_blob(self, cr: "ConfigRepo", commit: str, slug: str) -> str | None:
        key = (commit, slug)
        if key not in self._draft_blobs:
            blob = _entry(cr.repo, commit, f"{slug}/{workspace.FILES['workspace']}")
            with self._lock:
                self._bound(self._draft_blobs)
                self._draft_blobs[key] = blob
        return self._draft_blobs[key]

    def parsed(self, cr: "ConfigRepo", blob: str) -> Any:
        data = self._parsed.get(blob)
        if data is None:
            raw = cr.repo.odb.stream(bytes.fromhex(blob)).read()
            data = _read_only(parse(raw.decode("utf-8")).data or {})
            with self._lock:
                self._bound(self._parsed)
                self._parsed[blob] = data
        return data

    def _bound(self, entries: dict) -> None:
        if len(entries) >= self.MAX_ENTRIES:
            entries.clear()  # rare: thousands of distinct versions read; they are read again when asked


_UNKNOWN = object()


def _entry(repo: git.Repo, tree_ish: str, path: str) -> str | None:
    """The blob sha of the file `path` in a commit or tree, or None: one question to the `git cat-file
    --batch-check` process the repo handle keeps running (no process per file, no tree parsed in Python)."""
    try:
        sha, kind, _size = repo.git.get_object_header(f"{tree_ish}:{path}")
    except ValueError:  # git answers "missing"
        return None
    if kind != b"blob":
        return None
    return sha.decode("ascii") if isinstance(sha, bytes) else sha  # bytes at run time, whatever GitPython's stubs say


def _create_from_templates(staging: Path, templates: Path) -> None:
    """A new config repo in the empty folder `staging`: the schemas, the template workspaces and the CI workflow, committed."""
    repo = git.Repo.init(staging, initial_branch=MAIN)
    schemas_src = Path(workspace.schemas.SCHEMA_DIR)
    shutil.copytree(schemas_src, staging / "schemas")
    for ws_path in workspace.find_workspaces(templates):
        workspace.copy_template(ws_path, staging / ws_path.name)
    (staging / ci_workflow.PATH).parent.mkdir(parents=True)
    (staging / ci_workflow.PATH).write_text(ci_workflow.WORKFLOW, encoding="utf-8")
    repo.git.add("--all")
    repo.git.commit("-q", "-m", message("Create config repo from templates", "create", "*"), env=actor_env(SYSTEM))
    repo.close()


class ConfigRepo:
    REPAIR_WAIT_S = 5.0  # opening waits this long for a live writer before leaving the repair to it

    def __init__(self, path: Path):
        self.path = Path(path).resolve()
        self._local = threading.local()
        try:
            self._local.repo = git.Repo(self.path)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise ConfigRepoError(f"{self.path} is not a git repository") from None
        self._common_git_dir = Path(self._local.repo.git_dir)
        self.drafts_root = self.path.parent / f"{self.path.name}.drafts"
        self._metas = _MetaCache()
        self.shared = replica.is_shared(self.path)  # a replica of a remote several app servers share (lib.repo.replica)
        self._last_pull = -float("inf")  # time.monotonic() of this process's last pull (`pull_if_due`)
        self._pulling = threading.Lock()
        self.repaired: list[str] = self.repair()  # what opening found left behind and repaired

    @property
    def repo(self) -> git.Repo:
        """This thread's handle on the repo. The app shares one ConfigRepo between sessions
        (threads), and a git.Repo is not thread-safe: its `git cat-file` pipes get interleaved."""
        repo = getattr(self._local, "repo", None)
        if repo is None:
            repo = self._local.repo = git.Repo(self.path)
        return repo

    # ---- creation

    @classmethod
    def open_or_create(cls, path: Path, templates: Path, remote: str | None = None) -> "ConfigRepo":
        """Open the config repo, creating it from the template workspaces on first run.

        With `remote` (DASHMEM_CONFIG_REMOTE), the repo is a replica of that shared
        remote: a first run clones it (or, when it is empty, creates the repo from
        the templates and pushes it there), and a repo made before is attached to it.
        """
        path = Path(path).resolve()
        url = replica.check_url(remote) if remote else None
        if (path / ".git").exists():
            cr = cls(path)
            if url:
                try:
                    replica.attach(cr, url)
                except replica.RemoteUnreachable as exc:  # a restart during an outage serves what this server has
                    _log.warning("opened the config repo at %s without pulling: %s", path, exc)
            return cr
        if path.exists() and any(path.iterdir()):
            raise ConfigRepoError(f"{path} exists, is not empty and is not a git repository")
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
        try:
            if url and replica.remote_main(url) is not None:
                replica.clone(url, staging)
            else:
                _create_from_templates(staging, templates)
                if url and not replica.push_new(staging, url):  # another server created it meanwhile: take theirs
                    shutil.rmtree(staging)
                    staging.mkdir()
                    replica.clone(url, staging)
                elif url:
                    replica.mark(staging, url)
            if path.exists():
                path.rmdir()
            os.replace(staging, path)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        cr = cls(path)
        if url:
            try:
                replica.pull(cr)  # the drafts (a clone brings `main` only)
            except replica.RemoteUnreachable as exc:
                _log.warning("opened the config repo at %s without its drafts: %s", path, exc)
        return cr

    # ---- reading

    def slugs(self) -> list[str]:
        """The workspaces in the published checkout: its top-level folders that hold one."""
        return sorted(p.name for p in self.path.iterdir() if p.is_dir() and workspace.is_workspace(p))

    def is_published(self, slug: str) -> bool:
        return workspace.is_workspace(self.published_path(slug))

    def published_path(self, slug: str) -> Path:
        return self.path / workspace.check_slug(slug)

    def view_path(self, user: User, slug: str) -> Path:
        """What `user` sees of a workspace: the published folder; for one not published yet, their draft,
        or (for an app owner reviewing it) its creator's."""
        if self.is_published(slug):
            return self.published_path(slug)
        if not self.has_draft(user, slug):
            theirs = next((d["workspace_path"] for d in self.drafts(slug) if d["workspace_path"].exists()), None)
            if theirs is not None:
                access.require(user, "view", self._access_meta(slug, self.branch_name(user, slug)), slug)
                return theirs
        return self.draft(user, slug).workspace_path

    def meta(self, slug: str, ref: str = MAIN) -> dict[str, Any]:
        """workspace.yaml as published (roles are always judged by the published access list).

        Read-only (`ReadOnlyDict`): it is shared with every other caller until the file changes in git.
        """
        path = f"{workspace.check_slug(slug)}/{workspace.FILES['workspace']}"
        if ref == MAIN:
            blob = self._metas.published(self, self._main_sha()).blobs.get(slug)
        else:
            blob = _entry(self.repo, resolve(self.repo, ref).hexsha, path)
        if blob is None:
            raise ConfigRepoError(f"no workspace {slug!r} on {ref}")
        return self._metas.parsed(self, blob)

    def meta_for(self, user: User, slug: str) -> dict[str, Any]:
        """workspace.yaml that decides the user's role: the published one, or their draft's for a new workspace."""
        return self._access_meta(slug, self.branch_name(user, slug))

    def workspaces_for(self, user: User) -> dict[str, dict[str, Any]]:
        """slug -> workspace.yaml of every published workspace, plus the user's own not yet published ones.

        Runs on every page run, so it is cached by what git says: the published
        metas by `main`'s commit, a draft's by its branch's commit, each file's
        parse by its blob. With nothing changed it costs reading the branch
        refs; whoever commits, in any process, moves a ref and so is seen on the
        next call. The metas are read-only (`ReadOnlyDict`), shared between calls.
        """
        # The app's owners also see workspaces others created and have not published, to review them.
        prefix = "draft/" if user.app_role == access.OWNER else f"draft/{user.name}/"
        heads = gitops.branch_heads(self._git_dir, prefix)
        published = self._metas.published(self, self._main_sha())
        metas = dict(published.metas(self))
        for branch, sha in heads.items():
            owner, slug = branches.parse_draft(branch) or (None, None)
            if owner is not None and slug is not None and slug not in metas:
                blob = self._metas.draft_blob(self, sha, slug)
                if blob is not None:
                    metas[slug] = self._metas.parsed(self, blob)
        return metas

    def _main_sha(self) -> str:
        sha = gitops.branch_sha(self._git_dir, MAIN)
        if sha is None:
            raise ConfigRepoError(f"the config repo at {self.path} has no {MAIN} branch")
        return sha

    def _access_meta(self, slug: str, branch: str) -> dict[str, Any]:
        """The published access list; for a workspace not yet on `main` (made with
        `new_workspace`, which needs the app-wide steward role), the one on its draft branch."""
        try:
            return self.meta(slug)
        except ConfigRepoError:
            if self.has_branch(branch):
                return self.meta(slug, branch)
            # Someone else's new workspace (an app owner reviewing it): its creator's draft says who may do what.
            for head in gitops.branch_heads(self._git_dir, "draft/"):
                if (branches.parse_draft(head) or (None, None))[1] == slug:
                    return self.meta(slug, head)
            raise

    def history(self, slug: str, ref: str = MAIN, limit: int = 100) -> list[Version]:
        return history(self.repo, workspace.check_slug(slug), ref, limit)

    def diff(self, slug: str, a: str, b: str) -> list[FileDiff]:
        return diff(self.repo, workspace.check_slug(slug), a, b)

    def changes(self, slug: str, a: str, b: str) -> list[Change]:
        """What changed in the workspace's meaning between two versions (lib.memory.semantic_diff)."""
        return semantic_diff(self.repo, workspace.check_slug(slug), a, b)

    # ---- several app servers (lib.repo.replica)

    def pull(self, wait: float = 15.0) -> list[str]:
        """Fetch from the shared remote and bring `main` and the drafts up to it; returns what changed.

        Raises `replica.RemoteUnreachable` when the remote cannot be reached (nothing here changes).
        """
        if not self.shared:
            raise ConfigRepoError(f"the config repo at {self.path} is not shared with other servers; set DASHMEM_CONFIG_REMOTE to share it")
        return replica.pull(self, wait)

    def pull_if_due(self, every_s: float) -> list[str]:
        """`pull` before serving, at most every `every_s` seconds per process; never raises for an unreachable remote."""
        return replica.pull_if_due(self, every_s) if self.shared else []

    def _share(self, user: User, slug: str, sha: str | None) -> str | None:
        """After a draft moved to `sha`: push it, so the other servers show it after their next pull."""
        if self.shared and sha is not None:
            replica.push_draft(self, self.branch_name(user, slug))
        return sha

    # ---- drafts (lib.repo.drafts)

    def branch_name(self, user: User, slug: str) -> str:
        return drafts.branch_name(user, slug)

    def has_draft(self, user: User, slug: str) -> bool:
        return self.has_branch(self.branch_name(user, slug))

    def has_branch(self, branch: str) -> bool:
        """Whether the branch exists: one ref file read (pages ask on every run; listing every branch grows with them)."""
        return gitops.branch_sha(self._git_dir, branch) is not None

    def proposals_for(self, user: User) -> dict[str, list[str]]:
        """slug -> the drafts proposed for review (lib.repo.proposals) in each workspace where `user` is an owner:
        what waits for them on Review. Cheap enough for every page run (a folder listing, the cached metas)."""
        found: dict[str, list[str]] = {}
        for branch in proposals.waiting(self):
            slug = (branches.parse_draft(branch) or ("", ""))[1]
            try:
                owner = access.role_of(user, self._access_meta(slug, branch)) == access.OWNER
            except ConfigRepoError:
                continue  # a workspace gone from every branch
            if owner:
                found.setdefault(slug, []).append(branch)
        return found

    def has_remote(self, remote: str = "origin") -> bool:
        return remote in [r.name for r in self.repo.remotes]

    def draft_diff(self, slug: str, branch: str) -> list[FileDiff]:
        """What a draft branch changes in the workspace since it left `main`."""
        return drafts.draft_diff(self, slug, branch)

    def draft_changes(self, slug: str, branch: str) -> list[Change]:
        """What a draft branch changes in the workspace's meaning since it left `main` (lib.memory.semantic_diff)."""
        return drafts.draft_changes(self, slug, branch)

    def draft(self, user: User, slug: str) -> Draft:
        """The user's draft of a workspace, created from `main` on first use."""
        return drafts.open_draft(self, user, slug, "edit")[0]

    def drafts(self, slug: str | None = None) -> list[dict[str, Any]]:
        """Every draft branch (of workspace `slug`, if given) with how far it is ahead of and behind `main`."""
        return drafts.list_drafts(self, slug)

    def save(self, user: User, slug: str, files: dict[str, Any], message: str, base: str | None = None) -> str | None:
        """Validate and write files to the user's draft and commit them as the user.

        Returns the commit sha, or None if the content equals what is saved.
        Raises `ValidationFailed` (nothing written) on invalid content. With `base` (the
        draft's head when the files were read, `draft_head`), raises `DraftChanged`
        (nothing written) when another save moved the draft since: a read-change-write
        would otherwise drop that save's change.
        """
        return self._share(user, slug, drafts.save(self, user, slug, files, message, base))

    def draft_head(self, user: User, slug: str) -> str:
        """The commit the user's draft of `slug` is at (opening the draft first)."""
        return git.Repo(self.draft(user, slug).path).head.commit.hexsha

    def revert(self, user: User, slug: str, version: str) -> str | None:
        """Restore the workspace to `version` on the user's draft, as a new commit."""
        return self._share(user, slug, drafts.revert(self, user, slug, version))

    def undo_stack(self, user: User, slug: str) -> list[str]:
        """Shas of saved states on the draft, oldest first; the last is the current state."""
        return drafts.undo_stack(self, user, slug)

    def undo(self, user: User, slug: str) -> str:
        """Step the draft back to the previous saved state, as a new commit."""
        sha = drafts.undo(self, user, slug)
        self._share(user, slug, sha)
        return sha

    def sync(self, user: User, slug: str, prefer: str | None = None) -> str | None:
        """Bring `main`'s published changes into the user's draft.

        On lines changed on both sides it refuses (`prefer=None`), or keeps the
        draft's lines (`prefer="mine"`) or the published ones (`"published"`).
        Either way both versions stay in history.
        """
        return self._share(user, slug, drafts.sync(self, user, slug, prefer))

    def reject(self, user: User, slug: str, branch: str) -> str:
        """An owner turns down a draft: it leaves the review list but is kept, renamed, never deleted."""
        sha = rev(self.path, f"refs/heads/{branch}") if self.shared and branch in self.repo.heads else None
        kept = drafts.reject(self, user, slug, branch)
        if sha is not None:
            replica.push_rejected(self, branch, kept, sha)
        return kept

    def new_workspace(self, user: User, slug: str, name: str, template: str | None = None) -> Draft:
        """Create a workspace on the user's draft (from a template workspace or blank)."""
        draft = drafts.new_workspace(self, user, slug, name, template)
        self._share(user, slug, draft.branch)
        return draft

    def import_category(self, user: User, source: str, target: str, kind: str) -> tuple[str | None, list[str]]:
        """Bring one memory category (task, sources or output) of a published workspace into the user's draft of
        another, merged where it can be (lib.repo.drafts.import_category): the commit and what was done."""
        sha, notes = drafts.import_category(self, user, source, target, kind)
        return self._share(user, target, sha), notes

    def confirm_rules(self, user: User, slug: str, rule_ids: Iterable[str], today: dt.date | str | None = None) -> str | None:
        """Mark task rules as still holding on the user's draft, as one commit; returns its sha (None: nothing changed).

        Roles are the draft's: opening and saving it need the steward role, so a viewer gets
        PermissionDenied and nothing is written (staleness itself: lib.memory.rule_review).
        """
        ids = list(dict.fromkeys(rule_ids))
        if not ids:
            return None
        ws, found = workspace.load(self.draft(user, slug).workspace_path)
        task_problems = [d for d in found if d.file and d.file.endswith(workspace.FILES["task"])]
        if has_errors(task_problems):
            raise ValidationFailed(task_problems)
        task = rule_review.confirmed(ws.get("task") or {}, ids, today)
        return self.save(user, slug, {"task": task}, f"Confirm task rule{'s' if len(ids) > 1 else ''} still hold: {', '.join(ids)}")

    def access_lists(self, user: User, slug: str) -> dict[str, list[str]]:
        """Who holds each role as the user's draft has it (the published lists while they have no draft), for
        anyone who may view the workspace: each role's list key (owners, stewards, viewers) -> its entries."""
        lists = (self.as_drafted(user, slug).get("workspace") or {}).get("access") or {}
        return {key: list(lists.get(key) or []) for key in access.ROLE_LISTS.values()}

    def as_drafted(self, user: User, slug: str) -> workspace.Workspace:
        """The workspace as the user's draft holds it (as published while they have no draft, which is not made),
        for anyone who may view it."""
        access.require(user, "view", self.meta_for(user, slug), slug)
        path = self.draft(user, slug).workspace_path if self.has_draft(user, slug) else self.view_path(user, slug)
        return workspace.load(path, readonly=True)[0]

    def meta_to_change(self, user: User, slug: str, action: str) -> tuple[str, workspace.Workspace, dict[str, Any]]:
        """What a change of the draft's workspace.yaml starts from, once `user` may do `action` under the published
        lists: the draft's head (pass it to `save` as `base`, so a save from another tab meanwhile refuses this
        one rather than being undone), the draft's workspace, and a copy of its workspace.yaml to change.
        ValidationFailed when workspace.yaml does not validate as it stands."""
        access.require(user, action, self._access_meta(slug, self.branch_name(user, slug)), slug)
        base = self.draft_head(user, slug)
        ws, found = workspace.load(self.draft(user, slug).workspace_path)
        meta_problems = [d for d in found if d.file and d.file.endswith(workspace.FILES["workspace"])]
        if has_errors(meta_problems):
            raise ValidationFailed(meta_problems)
        return base, ws, copy.deepcopy(ws.get("workspace") or {})

    def change_access(self, user: User, slug: str, add: Iterable[access.Grant] = (), remove: Iterable[access.Grant] = ()) -> tuple[str | None, list[str]]:
        """Add and remove people and groups per role on the user's draft, as one commit that Review shows as an access
        change and publishing publishes like any other: the commit's sha (None: nothing changed) and a sentence per change.

        Only an owner may (`manage_access` under the published lists, checked before the draft is opened, and again
        by `save`); the owners' list keeps at least one entry (`access.changed_access`); nothing is written when refused.
        """
        add, remove = list(add), list(remove)
        base, _, meta = self.meta_to_change(user, slug, "manage_access")
        meta["access"], done = access.changed_access(meta.get("access"), add, remove)
        if not done:
            return None, []
        sha = self.save(user, slug, {"workspace": meta}, f"Access to {slug}: {'; '.join(done)}", base=base)
        return sha, done

    # Publishing and proposing are lib.ops.publish: they run the checks, which sit above the config repo.

    # ---- repairing what a killed process left behind

    def repair(self) -> list[str]:
        """Repair what processes killed half-way left in the config repo; returns what was repaired.

        Looks, cheaply (one `git status` of the published checkout, and a few
        file checks per draft), for git lock files left by a killed git, a
        half-done merge, tracked files of the published checkout that differ
        from `main`, a draft whose save, revert, undo or update died half-way
        (each marks the draft while it writes), a draft checkout that died
        half-way, and the scratch copy of a workspace a killed publish was
        checking. Only if it finds any does it take the locks and repair: the
        published checkout is made equal to `main`, a draft's worktree equal to
        its branch. What differed is first kept as a stash entry (`git stash
        list`), so nothing, committed or not, is lost. A draft in use by a live
        process right now is left to that process; it is repaired before it is
        handed out next. Runs when the config repo is opened.
        """
        done: list[str] = []
        if self._leftovers():
            try:
                with self._lock(timeout=self.REPAIR_WAIT_S):
                    done += self._repair_served()
                    for draft in drafts.draft_worktrees(self):
                        try:
                            with self._lock(draft, timeout=0):
                                done += drafts.repair_draft(self, draft)
                        except Busy:
                            continue
            except Busy:  # a publish repairs the published checkout first, and a draft is repaired when next opened
                _log.warning("the config repo at %s is busy; repair left to the process that holds it", self.path)
            if done:
                _log.warning("repaired the config repo at %s: %s", self.path, "; ".join(done))
        self._maybe_gc()
        return done

    @property
    def _git_dir(self) -> Path:
        return self._common_git_dir

    def _leftovers(self) -> list[Path]:
        """What looks left behind, checked without any lock (a live writer can make a false alarm)."""
        found = gitops.served_lock_files(self._git_dir, MAIN) + gitops.scratch_entries(self._git_dir, SCRATCH)
        differing = gitops.differing(self.path, optional_locks=False)
        if (self._git_dir / "MERGE_HEAD").exists() or any(not self._placed_by_hand(name) for _code, name in differing):
            found.append(self.path)
        found += [draft.path for draft in drafts.draft_worktrees(self) if drafts.looks_left_behind(self, draft)]
        return found

    def _repair_served(self) -> list[str]:
        """Make the published checkout's index and memory files equal `main` (untracked files stay, and so does a data
        file a person put in place, `_placed_by_hand`). Call under the main lock."""
        return gitops.repair_checkout(self.path, self._git_dir, MAIN, SCRATCH, keep=self._placed_by_hand)

    def _follow_main(self) -> None:
        """Bring the published checkout up to `main` once it moved (a publish, a pull), keeping the data files
        a person put in place. Call under the main lock."""
        kept = [name for _code, name in gitops.differing(self.path) if self._placed_by_hand(name)]
        gitops.reset_to_head(self.path, kept)

    def _placed_by_hand(self, path: str) -> bool:
        """Whether the published checkout's file `path` (relative to it) is a data file a person put in place: a
        workspace's file other than its memory files, with content no commit gave it. A repair keeps it; the
        memory files, and a file a killed publish left behind `main`, are restored."""
        return workspace.is_data_file(path) and gitops.placed_by_hand(self.path, path)

    def data_files_notice(self, slug: str) -> str | None:
        """What a steward is told when data files of the published workspace differ from the committed ones, or None."""
        files = self.data_files_in_place(slug)
        if not files:
            return None
        listed = ", ".join(f"`{name}`" for name in files)
        return (
            f"{listed} in the published folder {'differs' if len(files) == 1 else 'differ'} from the committed "
            f"{'file' if len(files) == 1 else 'files'}: someone put a new one in place. Refresh serves it to everyone, and "
            "a restart keeps it; History still holds the committed version."
        )

    def data_files_in_place(self, slug: str) -> list[str]:
        """The data files of a published workspace that differ from the committed ones, because a person put
        them in place (next week's CSV): paths relative to the workspace folder. A Refresh serves them, while
        the published version's history still holds the committed ones, so stewards are told (Sources)."""
        prefix = f"{workspace.check_slug(slug)}/"
        return sorted(
            name[len(prefix) :] for _code, name in gitops.differing(self.path, optional_locks=False) if name.startswith(prefix) and self._placed_by_hand(name)
        )

    def _maybe_gc(self) -> None:
        """Pack the repo once loose objects piled up, under every lock (git's auto-gc is off under our locks)."""
        if gitops.loose_objects(self._git_dir) < GC_LOOSE_OBJECTS:
            return
        try:
            with contextlib.ExitStack() as stack:
                stack.enter_context(self._lock(timeout=0))
                for draft in drafts.all_drafts(self):
                    stack.enter_context(self._lock(draft, timeout=0))
                gitops.gc(self.path, self._git_dir, MAIN)
        except Busy:
            return  # someone is writing; another opening packs it
        except git.GitCommandError as exc:
            _log.warning("git gc of %s failed: %s", self.path, exc)

    # ---- internals

    def _lock(self, draft: Draft | None = None, timeout: float = 15.0):
        name = f"dashmem-{draft.user}-{draft.slug}.lock" if draft else "dashmem-main.lock"
        return _locked(self._git_dir / name, f"the draft of {draft.slug}" if draft else "the config repo", timeout)


# The implementation modules import the names above from here, so they are imported last.
