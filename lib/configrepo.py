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

The lower-level functions (`history`, `diff`, `restore`, `commit_folder`)
work on any checkout, so the CLI uses them on plain clones too.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import logging
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import git

from . import access, ci_workflow, workspace
from .access import User
from .diagnostics import Diagnostic, ValidationFailed, has_errors
from .errors import DashmemError

MAIN = "main"
ACTION_TRAILER = "Dashmem-Action"
WORKSPACE_TRAILER = "Dashmem-Workspace"
UNDO_DEPTH = 10
SYSTEM = git.Actor("dashmem", "dashmem@localhost")
SCRATCH = "dashmem-scratch"  # in the git folder: where a publish checks the merged workspace
GC_LOOSE_OBJECTS = 4000  # `repair` packs the repo once about this many loose objects piled up

_log = logging.getLogger(__name__)



class ConfigRepoError(DashmemError, RuntimeError):
    pass


class PublishConflict(ConfigRepoError):
    """Both sides changed the same lines; nothing was merged and both are kept."""

    def __init__(self, slug: str, branch: str, files: list[str], updating: bool = False):
        self.files = files
        changed = f"{', '.join(files) or 'some files'} changed in the published version since this draft started, on the same lines"
        if updating:  # bringing published changes into the draft, not publishing
            text = (f"could not update your draft of {slug} from the published version: {changed}. Nothing was changed; "
                    "choose whether to keep your lines or the published ones where both changed.")
        else:
            text = (f"cannot publish {slug}: {changed}. Nothing was published; your draft and the published version are "
                    "both kept. Update your draft from the published version, check your edit on top, and publish again.")
        super().__init__(text)


class Busy(ConfigRepoError):
    pass


@dataclass(frozen=True)
class Version:
    sha: str
    author: str
    email: str
    date: str  # ISO 8601 with offset
    message: str
    action: str | None

    @property
    def short(self) -> str:
        return self.sha[:10]


@dataclass(frozen=True)
class FileDiff:
    path: str  # relative to the workspace folder
    status: str  # added | deleted | modified
    patch: str  # unified diff


@dataclass(frozen=True)
class Draft:
    user: str
    slug: str
    branch: str
    path: Path  # the worktree root

    @property
    def workspace_path(self) -> Path:
        return self.path / self.slug


# --------------------------------------------------------------------------- helpers usable on any checkout


def find_repo(path: Path) -> tuple[git.Repo, str]:
    """The git repo containing PATH and PATH's folder relative to its root."""
    path = Path(path).resolve()
    try:
        repo = git.Repo(path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise ConfigRepoError(f"{path} is not inside a git repository") from None
    root = Path(repo.working_tree_dir).resolve()
    return repo, path.relative_to(root).as_posix()


def _message(subject: str, action: str, slug: str) -> str:
    return f"{subject}\n\n{ACTION_TRAILER}: {action}\n{WORKSPACE_TRAILER}: {slug}\n"


def _trailer(commit: git.Commit, key: str) -> str | None:
    for line in reversed(commit.message.splitlines()):
        if line.startswith(f"{key}: "):
            return line.split(": ", 1)[1].strip()
    return None


def _version(commit: git.Commit) -> Version:
    return Version(
        sha=commit.hexsha,
        author=commit.author.name,
        email=commit.author.email,
        date=commit.authored_datetime.isoformat(),
        message=commit.message.splitlines()[0] if commit.message else "",
        action=_trailer(commit, ACTION_TRAILER),
    )


def history(repo: git.Repo, folder: str, ref: str = MAIN, limit: int = 100) -> list[Version]:
    """Versions of one folder on `ref`, newest first.

    On `main` each publish is one merge commit, so follow the first parent:
    the list is what was published, not every draft save behind it.
    """
    commits = repo.iter_commits(ref, paths=folder, max_count=limit, first_parent=(ref == MAIN))
    return [_version(c) for c in commits]


def resolve(repo: git.Repo, version: str) -> git.Commit:
    try:
        commit = repo.commit(version)
        _ = commit.tree  # a full-length sha is only looked up when read: make an unknown one fail here
        return commit
    except (git.BadName, ValueError):
        raise ConfigRepoError(f"unknown version {version!r}") from None


def read_file(repo: git.Repo, version: str, path: str) -> bytes | None:
    try:
        return (resolve(repo, version).tree / path).data_stream.read()
    except KeyError:
        return None


def _parse_draft(branch: str) -> tuple[str, str] | None:
    """(user, slug) of a draft branch `draft/<user>/<slug>`, else None."""
    parts = branch.split("/")
    return (parts[1], parts[2]) if len(parts) == 3 and parts[0] == "draft" else None


def diff(repo: git.Repo, folder: str, a: str, b: str) -> list[FileDiff]:
    """Per-file unified diffs of one folder between two versions."""
    ca, cb = resolve(repo, a), resolve(repo, b)
    out = []
    for change in ca.diff(cb, paths=folder):
        old = change.a_blob.data_stream.read().decode("utf-8", "replace") if change.a_blob else ""
        new = change.b_blob.data_stream.read().decode("utf-8", "replace") if change.b_blob else ""
        name = (change.b_path or change.a_path)
        rel = name[len(folder) + 1:] if name.startswith(folder + "/") else name
        status = "added" if change.new_file else "deleted" if change.deleted_file else "modified"
        patch = workspace.text_diff(old, new, f"a/{name}@{ca.hexsha[:10]}", f"b/{name}@{cb.hexsha[:10]}")
        out.append(FileDiff(rel, status, patch))
    return sorted(out, key=lambda d: d.path)


def commit_folder(repo: git.Repo, folder: str, author: git.Actor, subject: str, action: str) -> str | None:
    """Stage everything under `folder` and commit only it; None when nothing changed."""
    root = repo.working_tree_dir
    _git(root, "add", "--all", "--", folder)
    if _git(root, "diff", "--cached", "--quiet", "--", folder, ok=(0, 1)).returncode == 0:
        return None  # nothing staged under folder
    _git(root, "commit", "-q", "-F", "-", "--", folder, input=_message(subject, action, Path(folder).name), env=_actor_env(author))
    return _git(root, "rev-parse", "HEAD").stdout.strip()


def restore(repo: git.Repo, folder: str, version: str, author: git.Actor, *, action: str = "revert", subject: str | None = None) -> str | None:
    """Make `folder` exactly as it was at `version`, as a new commit (history untouched)."""
    commit = resolve(repo, version)
    try:
        commit.tree / folder
    except KeyError:
        raise ConfigRepoError(f"{folder} does not exist at version {commit.hexsha[:10]}") from None
    root = Path(repo.working_tree_dir)
    if (root / folder).exists():
        _git(root, "rm", "-r", "-q", "--cached", "--ignore-unmatch", "--", folder)
        shutil.rmtree(root / folder)
    _git(root, "checkout", commit.hexsha, "--", folder)
    subject = subject or f"Revert {Path(folder).name} to {commit.hexsha[:10]}"
    return commit_folder(repo, folder, author, subject, action)


# --------------------------------------------------------------------------- running git under our locks

_HELD = threading.local()  # .fds: file descriptors of the dashmem locks this thread holds


def _held() -> list[int]:
    fds = getattr(_HELD, "fds", None)
    if fds is None:
        fds = _HELD.fds = []
    return fds


def _git(cwd: Path | str, *args: str, env: dict[str, str] | None = None, input: str | bytes | None = None,
         ok: tuple[int, ...] = (0,), text: bool = True) -> subprocess.CompletedProcess:
    """Run one git command in `cwd`; raises `git.GitCommandError` on an exit status not in `ok`.

    Under a dashmem lock the command inherits the lock's file descriptor (and
    so do the git processes it starts), so the lock stays held while it runs,
    even if the Python process that took the lock is killed meanwhile. Auto-gc
    is off there: a detached gc outlives the command and takes lock files in
    every domain (`repair` packs the repo under all locks instead).
    """
    fds = tuple(_held())
    cmd = [git.Git.GIT_PYTHON_GIT_EXECUTABLE or "git"]
    if fds:
        cmd += ["-c", "gc.auto=0", "-c", "maintenance.auto=false"]
    cmd += list(args)
    full_env = {**os.environ, "GIT_EDITOR": "true", "GIT_TERMINAL_PROMPT": "0", **(env or {})}
    proc = subprocess.run(cmd, cwd=str(cwd), env=full_env, input=input, capture_output=True, pass_fds=fds,
                          text=text, encoding="utf-8" if text else None, errors="replace" if text else None)
    if proc.returncode not in ok:
        raise git.GitCommandError(cmd, proc.returncode, proc.stderr, proc.stdout)
    return proc


@contextlib.contextmanager
def _locked(lock_path: Path, what: str, timeout: float = 15.0) -> Iterator[None]:
    """Hold an exclusive flock on `lock_path` (waiting up to `timeout` seconds, else `Busy`)."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+") as handle:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise Busy(f"{what} is busy with another change; try again in a moment") from None
                time.sleep(0.05)
        held = _held()
        held.append(handle.fileno())
        try:
            yield
        finally:
            held.remove(handle.fileno())
            fcntl.flock(handle, fcntl.LOCK_UN)


# --------------------------------------------------------------------------- the app's config repo


class ConfigRepo:
    REPAIR_WAIT_S = 5.0  # opening waits this long for a live writer before leaving the repair to it

    def __init__(self, path: Path):
        self.path = Path(path).resolve()
        self._local = threading.local()
        try:
            self._local.repo = git.Repo(self.path)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise ConfigRepoError(f"{self.path} is not a git repository") from None
        self.drafts_root = self.path.parent / f"{self.path.name}.drafts"
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
    def open_or_create(cls, path: Path, templates: Path) -> "ConfigRepo":
        """Open the config repo, creating it from the template workspaces on first run."""
        path = Path(path).resolve()
        if (path / ".git").exists():
            return cls(path)
        if path.exists() and any(path.iterdir()):
            raise ConfigRepoError(f"{path} exists, is not empty and is not a git repository")
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
        try:
            repo = git.Repo.init(staging, initial_branch=MAIN)
            schemas_src = Path(workspace.schemas.SCHEMA_DIR)
            shutil.copytree(schemas_src, staging / "schemas")
            for ws_path in workspace.find_workspaces(templates):
                workspace.copy_template(ws_path, staging / ws_path.name)
            (staging / ci_workflow.PATH).parent.mkdir(parents=True)
            (staging / ci_workflow.PATH).write_text(ci_workflow.WORKFLOW, encoding="utf-8")
            repo.git.add("--all")
            repo.git.commit("-q", "-m", _message("Create config repo from templates", "create", "*"), env=_actor_env(SYSTEM))
            repo.close()
            if path.exists():
                path.rmdir()
            os.replace(staging, path)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return cls(path)

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
        """workspace.yaml as published (roles are always judged by the published access list)."""
        from .yamlio import parse

        raw = read_file(self.repo, ref, f"{workspace.check_slug(slug)}/{workspace.FILES['workspace']}")
        if raw is None:
            raise ConfigRepoError(f"no workspace {slug!r} on {ref}")
        return parse(raw.decode("utf-8")).data or {}

    def meta_for(self, user: User, slug: str) -> dict[str, Any]:
        """workspace.yaml that decides the user's role: the published one, or their draft's for a new workspace."""
        return self._access_meta(slug, self.branch_name(user, slug))

    def workspaces_for(self, user: User) -> dict[str, dict[str, Any]]:
        """slug -> workspace.yaml of every published workspace, plus the user's own not yet published ones."""
        metas = {slug: self.meta(slug) for slug in self.slugs()}
        for head in self.repo.heads:
            owner, slug = _parse_draft(head.name) or (None, None)
            # The app's owners also see workspaces others created and have not published, to review them.
            if owner is not None and (owner == user.name or user.app_role == access.OWNER) and slug not in metas:
                try:
                    metas[slug] = self.meta(slug, head.name)
                except ConfigRepoError:
                    continue
        return metas

    def _access_meta(self, slug: str, branch: str) -> dict[str, Any]:
        """The published access list; for a workspace not yet on `main` (made with
        `new_workspace`, which needs the app-wide steward role), the one on its draft branch."""
        try:
            return self.meta(slug)
        except ConfigRepoError:
            if branch in self.repo.heads:
                return self.meta(slug, branch)
            # Someone else's new workspace (an app owner reviewing it): its creator's draft says who may do what.
            for head in self.repo.heads:
                if (_parse_draft(head.name) or (None, None))[1] == slug:
                    return self.meta(slug, head.name)
            raise

    def history(self, slug: str, ref: str = MAIN, limit: int = 100) -> list[Version]:
        return history(self.repo, workspace.check_slug(slug), ref, limit)

    def diff(self, slug: str, a: str, b: str) -> list[FileDiff]:
        return diff(self.repo, workspace.check_slug(slug), a, b)

    # ---- drafts

    def branch_name(self, user: User, slug: str) -> str:
        return f"draft/{user.name}/{workspace.check_slug(slug)}"

    def has_draft(self, user: User, slug: str) -> bool:
        return self.branch_name(user, slug) in self.repo.heads

    def has_remote(self, remote: str = "origin") -> bool:
        return remote in [r.name for r in self.repo.remotes]

    def _worktree(self, user_name: str, slug: str) -> Path:
        """Where a person's draft of a workspace is checked out (the worktree root)."""
        return self.drafts_root / user_name / slug

    def draft_diff(self, slug: str, branch: str) -> list[FileDiff]:
        """What a draft branch changes in the workspace since it left `main`."""
        return self.diff(slug, self.repo.merge_base(MAIN, branch)[0].hexsha, branch)

    def draft(self, user: User, slug: str) -> Draft:
        """The user's draft of a workspace, created from `main` on first use."""
        return self._open_draft(user, slug, "edit")[0]

    def _open_draft(self, user: User, slug: str, action: str) -> tuple[Draft, dict[str, Any]]:
        """The user's draft, once `action` is allowed, with the access list that allowed it."""
        branch = self.branch_name(user, slug)
        meta = self._access_meta(slug, branch)
        access.require(user, action, meta, slug)
        where = self._worktree(user.name, slug)
        draft = Draft(user.name, slug, branch, where)
        with self._lock(), self._lock(draft):
            if self._admin_dir(where) is None:  # never checked out, or its checkout died half-way
                self._forget_worktree(where)
                (self._git_dir / "refs" / "heads" / f"{branch}.lock").unlink(missing_ok=True)  # of a killed `worktree add -b`
                where.parent.mkdir(parents=True, exist_ok=True)
                if branch in self.repo.heads:
                    _git(self.path, "worktree", "add", str(where), branch)
                else:
                    _git(self.path, "worktree", "add", "-b", branch, str(where), MAIN)
            else:
                self._repair_draft(draft)  # a save, revert or sync of it that was killed half-way
        return draft, meta

    def drafts(self, slug: str | None = None) -> list[dict[str, Any]]:
        """Every draft branch (of workspace `slug`, if given) with how far it is ahead of and behind `main`."""
        out = []
        for head in self.repo.heads:
            owner, of = _parse_draft(head.name) or (None, None)
            if owner is None or (slug is not None and of != slug):
                continue
            ahead = int(self.repo.git.rev_list("--count", f"{MAIN}..{head.name}"))
            # Published changes to this workspace the draft lacks (changes to other workspaces do not matter to it).
            behind = int(self.repo.git.rev_list("--count", f"{head.name}..{MAIN}", "--", of))
            out.append({"branch": head.name, "user": owner, "slug": of, "ahead": ahead, "behind": behind,
                        "head": head.commit.hexsha, "date": head.commit.authored_datetime.isoformat(),
                        "workspace_path": self._worktree(owner, of) / of})
        return sorted(out, key=lambda d: (d["slug"], d["user"]))

    def save(self, user: User, slug: str, files: dict[str, Any], message: str) -> str | None:
        """Validate and write files to the user's draft and commit them as the user.

        Returns the commit sha, or None if the content equals what is saved.
        Raises `ValidationFailed` (nothing written) on invalid content.
        """
        draft, meta = self._open_draft(user, slug, "save")
        if "workspace" in files:
            access.require_governance_unchanged_or_owner(user, meta, files["workspace"], slug)
        wt = git.Repo(draft.path)
        with self._lock(draft), self._writing(draft, "save"):
            before = _snapshot(draft.workspace_path)
            try:
                workspace.save(draft.workspace_path, files)
                return commit_folder(wt, slug, _actor(user), message or f"Edit {slug}", "save")
            except ValidationFailed:
                raise
            except BaseException as failure:
                try:
                    _restore_snapshot(draft.workspace_path, before)
                    _git(draft.path, "reset", "-q", "--", slug)
                except Exception as cleanup:  # the original cause matters more; the repair on next open finishes the job
                    _log.warning("cleaning up after a failed save of %s: %s", slug, cleanup)
                if isinstance(failure, OSError):
                    raise ConfigRepoError(f"could not save {slug}: {failure.strerror or failure}; nothing was saved") from failure
                raise

    def revert(self, user: User, slug: str, version: str) -> str | None:
        """Restore the workspace to `version` on the user's draft, as a new commit."""
        draft, _ = self._open_draft(user, slug, "revert")
        with self._lock(draft), self._writing(draft, "revert"):
            return restore(git.Repo(draft.path), slug, version, _actor(user))

    def undo_stack(self, user: User, slug: str) -> list[str]:
        """Shas of saved states on the draft, oldest first; the last is the current state."""
        branch = self.branch_name(user, slug)
        if branch not in self.repo.heads:
            return []
        chain = list(self.repo.iter_commits(branch, first_parent=True, max_count=500))
        stack: list[str] = []
        for commit in reversed(chain):
            action = _trailer(commit, ACTION_TRAILER)
            touched = _trailer(commit, WORKSPACE_TRAILER) == slug
            if touched and action in ("save", "revert"):
                stack.append(commit.hexsha)
                del stack[: max(0, len(stack) - (UNDO_DEPTH + 1))]
            elif touched and action == "undo":
                if len(stack) > 1:
                    stack.pop()
            elif action not in ("save", "revert", "undo"):
                stack = [commit.hexsha]  # main's history, a publish or a sync: undo starts afresh
        return stack

    def undo(self, user: User, slug: str) -> str:
        """Step the draft back to the previous saved state, as a new commit."""
        draft, _ = self._open_draft(user, slug, "undo")
        with self._lock(draft), self._writing(draft, "undo"):
            stack = self.undo_stack(user, slug)
            if len(stack) < 2:
                raise ConfigRepoError(f"nothing to undo in {slug}: the undo history keeps the last {UNDO_DEPTH} saved states of a draft")
            target = stack[-2]
            sha = restore(git.Repo(draft.path), slug, target, _actor(user), action="undo",
                          subject=f"Undo last change to {slug} (back to {target[:10]})")
            if sha is None:  # the state already equals the target: record the step anyway
                _git(draft.path, "commit", "-q", "--allow-empty", "-F", "-", input=_message(f"Undo last change to {slug}", "undo", slug),
                     env=_git_env(user))
                sha = _git(draft.path, "rev-parse", "HEAD").stdout.strip()
            return sha

    def sync(self, user: User, slug: str, prefer: str | None = None) -> str | None:
        """Bring `main`'s published changes into the user's draft.

        On lines changed on both sides it refuses (`prefer=None`), or keeps the
        draft's lines (`prefer="mine"`) or the published ones (`"published"`).
        Either way both versions stay in history.
        """
        strategy = {None: [], "mine": ["-X", "ours"], "published": ["-X", "theirs"]}[prefer]
        draft = self.draft(user, slug)
        with self._lock(draft), self._writing(draft, "sync"):
            head, main = _rev(draft.path, "HEAD"), _rev(self.path, f"refs/heads/{MAIN}")
            if _is_ancestor(self.path, main, head):
                return None
            if _is_ancestor(self.path, head, main):
                _git(draft.path, "merge", "--ff-only", "-q", main)
                return main
            try:
                _git(draft.path, "merge", "--no-ff", "-q", *strategy, "-m", _message(f"Update draft of {slug} from {MAIN}", "sync", slug), main,
                     env=_git_env(user))
            except git.GitCommandError:
                files = _conflicted(draft.path)
                _git(draft.path, "merge", "--abort", ok=(0, 128))
                raise PublishConflict(slug, draft.branch, files, updating=True) from None
            return _rev(draft.path, "HEAD")

    def publish(self, user: User, slug: str, message: str | None = None) -> str:
        """Merge the user's draft of `slug` into `main`.

        Refuses, leaving both sides intact, when the draft is invalid (and the
        policy requires validity) or when the same lines changed on both sides.
        """
        branch = self.branch_name(user, slug)
        meta = self._access_meta(slug, branch)
        access.require(user, "publish", meta, slug)
        if branch not in self.repo.heads:
            raise ConfigRepoError(f"{user.name} has no draft of {slug} to publish")
        return self._merge_into_main(user, slug, branch, message or f"Publish {slug} from {user.name}'s draft", meta)

    def publish_branch(self, user: User, slug: str, branch: str, message: str | None = None) -> str:
        """Publish a draft or proposal: owners any open one, stewards (where allowed) only their own."""
        meta = self._access_meta(slug, branch)
        access.require(user, "publish", meta, slug)
        if branch not in self.repo.heads:
            raise ConfigRepoError(f"no branch {branch!r}")
        if branch.startswith("rejected/"):
            raise ConfigRepoError(f"{branch} was rejected; its author can redo the change on a new draft")
        if access.role_of(user, meta) != access.OWNER and branch != self.branch_name(user, slug):
            raise access.PermissionDenied(f"{user.name} may publish only their own draft of {slug}; an owner publishes others'")
        return self._merge_into_main(user, slug, branch, message or f"Publish {slug} from {branch}", meta)

    def _merge_into_main(self, user: User, slug: str, branch: str, subject: str, meta: dict[str, Any]) -> str:
        """Publish `branch` as a merge commit on `main`, crash-safely (see the module docstring).

        The published checkout is written only here and in `repair`, always under the main lock.
        """
        with self._lock():
            self._repair_served()  # leftovers of a publish killed in another process since this one opened
            old = _rev(self.path, f"refs/heads/{MAIN}")
            theirs = _rev(self.path, f"refs/heads/{branch}")
            if _is_ancestor(self.path, theirs, old):
                raise ConfigRepoError(f"nothing to publish: {branch} has no changes that are not on {MAIN}")
            # Roles were checked for `slug` only, so publish nothing outside its folder.
            outside = [p for p in _git(self.path, "diff", "--name-only", f"{old}...{theirs}").stdout.splitlines()
                       if not p.startswith(f"{slug}/")]
            if outside:
                raise ConfigRepoError(f"cannot publish {branch} as {slug}: it also changes {', '.join(outside)}; "
                                      f"publish each workspace on its own")
            tree = self._merge_tree(slug, branch, old, theirs)
            try:
                published_meta = self.meta(slug, old)
            except ConfigRepoError:
                published_meta = {}  # a new workspace: its creator sets who may do what
            if published_meta:
                # However the change got onto the branch (save, revert, undo, a push), only owners change who may do what.
                access.require_governance_unchanged_or_owner(user, published_meta, self._meta_in_tree(tree, slug), slug)
            require_valid = (meta.get("policy") or {}).get("require_valid_to_publish", True)
            if require_valid:
                diagnostics = self._validate_tree(tree, slug)
                if has_errors(diagnostics):
                    raise ValidationFailed(diagnostics)
            new = _git(self.path, "commit-tree", tree, "-p", old, "-p", theirs, "-F", "-",
                       input=_message(subject, "publish", slug), env=_git_env(user)).stdout.strip()
            # Compare-and-swap: `main` moves only from the commit this merge was made on.
            try:
                _git(self.path, "update-ref", "-m", f"dashmem: publish {slug} from {branch}", f"refs/heads/{MAIN}", new, old)
            except git.GitCommandError as exc:
                raise ConfigRepoError(f"cannot publish {slug}: {MAIN} changed while publishing, outside this app "
                                      f"({exc.stderr.strip()}); nothing was published, publish again") from None
            # Only now bring the published checkout to the new `main` (`repair` finishes this if killed here).
            try:
                _git(self.path, "reset", "--hard", "-q")
            except git.GitCommandError as exc:  # published all the same: the next publish or opening finishes it
                _log.error("published %s as %s, but the published checkout could not be updated: %s", slug, new, exc)
        # Bring the draft up to the published state so the next edit starts from it.
        owner = (_parse_draft(branch) or (None,))[0]
        if owner:
            self._fast_forward_draft(Draft(owner, slug, branch, self._worktree(owner, slug)), new)
        return new

    def _merge_tree(self, slug: str, branch: str, ours: str, theirs: str) -> str:
        """The tree of merging `theirs` into `ours`, computed without a checkout; `PublishConflict` on conflicts."""
        proc = _git(self.path, "merge-tree", "--write-tree", "--name-only", "-z", "--no-messages", ours, theirs, ok=(0, 1))
        tree, *rest = proc.stdout.split("\0")
        if proc.returncode == 1:
            files = list(dict.fromkeys(name for name in rest if name))
            raise PublishConflict(slug, branch, files)
        return tree.strip()

    def _meta_in_tree(self, tree: str, slug: str) -> dict[str, Any]:
        """workspace.yaml of `slug` in a tree ({} when it is missing or does not parse)."""
        from .yamlio import parse

        proc = _git(self.path, "cat-file", "blob", f"{tree}:{slug}/{workspace.FILES['workspace']}", ok=(0, 128))
        if proc.returncode != 0:
            return {}
        try:
            data = parse(proc.stdout).data
        except Exception:  # malformed YAML: the validity checks report it
            return {}
        return data if isinstance(data, dict) else {}

    def _validate_tree(self, tree: str, slug: str) -> list[Diagnostic]:
        """The full checks (`checks.validate_workspace`) of the workspace folder as it is in `tree`.

        The folder, data files included, is written to `<tmp>/<slug>`: the folder's
        name is part of the workspace (names, upload caches), so it must be the slug.
        """
        from dataclasses import replace

        from .checks import validate_workspace

        scratch = self._git_dir / SCRATCH  # not /tmp: `repair` removes what a killed publish left here
        scratch.mkdir(exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="publish-", dir=scratch) as tmp:
            _extract(self.path, tree, slug, Path(tmp))
            folder = Path(tmp) / slug
            if not folder.is_dir():
                folder.mkdir()  # the merge deletes the workspace: validation says what is missing
            diagnostics = validate_workspace(folder)
            prefix = str(Path(tmp).resolve()) + os.sep
            # Messages name the files as they are in the config repo, not in the temporary folder.
            return [replace(d, file=d.file.replace(prefix, "", 1)) if d.file and prefix in d.file else d for d in diagnostics]

    def _fast_forward_draft(self, draft: Draft, new: str) -> None:
        if self._admin_dir(draft.path) is None:
            return
        try:
            with self._lock(draft), self._writing(draft, "update after publishing"):
                head = _rev(draft.path, "HEAD")
                if head != new and _is_ancestor(self.path, head, new) and not _status(draft.path, untracked=False):
                    try:
                        _git(draft.path, "merge", "--ff-only", "-q", new)
                    except git.GitCommandError as exc:  # git refused before writing (a file of the person's in the way)
                        _log.warning("could not bring the draft %s up to %s: %s", draft.branch, MAIN, exc)
        except Busy:  # published all the same; the draft catches up on its next sync
            _log.warning("could not bring the draft %s up to %s: it is busy", draft.branch, MAIN)

    def reject(self, user: User, slug: str, branch: str) -> str:
        """An owner turns down a draft: it leaves the review list but is kept, renamed, never deleted."""
        access.require(user, "reject", self.meta(slug), slug)
        owner, of = _parse_draft(branch) or (None, None)
        if of != workspace.check_slug(slug) or branch not in self.repo.heads:
            raise ConfigRepoError(f"no draft {branch!r} of {slug}")
        kept = f"rejected/{owner}/{slug}/{dt.datetime.now(dt.timezone.utc).strftime('%Y%m%dT%H%M%S')}"
        where = self._worktree(owner, slug)
        with self._lock(), self._lock(Draft(owner, slug, branch, where)):
            if (where / ".git").exists():
                _git(self.path, "worktree", "remove", "--force", str(where))
            _git(self.path, "branch", "-m", branch, kept)
        return kept

    def remote_url(self, remote: str = "origin") -> str | None:
        return next((r.url for r in self.repo.remotes if r.name == remote), None)

    def set_remote(self, user: User, url: str, remote: str = "origin") -> None:
        """Where proposals are pushed for pull requests (an app owner's setting). Credentials never go in
        the URL: use an SSH key or a git credential helper on the server."""
        access.require_app_role(user, access.OWNER, "set where proposals are pushed")
        url = url.strip()
        if not url or any(c.isspace() for c in url) or url.startswith("-"):
            raise ConfigRepoError("give the remote as one URL or path, for example git@github.com:acme/dashboards-config.git")
        if re.match(r"^[a-z][a-z0-9+.-]*://[^/@]*:[^/@]*@", url, re.IGNORECASE):
            raise ConfigRepoError("the URL holds a password; use an SSH key or a git credential helper on the server instead")
        with self._lock():
            if self.has_remote(remote):
                self.repo.git.remote("set-url", remote, url)
            else:
                self.repo.git.remote("add", remote, url)

    def propose(self, user: User, slug: str, remote: str = "origin") -> str:
        """Push the user's draft branch to `remote` so a pull request can be opened."""
        branch = self.branch_name(user, slug)
        access.require(user, "propose", self._access_meta(slug, branch), slug)
        if branch not in self.repo.heads:
            raise ConfigRepoError(f"{user.name} has no draft of {slug} to propose")
        if not self.has_remote(remote):
            raise ConfigRepoError(f"the config repo has no remote {remote!r}; add one to propose changes for review")
        try:
            self.repo.git.push(remote, f"refs/heads/{branch}:refs/heads/{branch}")
        except git.GitCommandError as exc:
            raise ConfigRepoError(f"could not push {branch} to {remote}: {exc.stderr.strip()}") from None
        return branch

    def new_workspace(self, user: User, slug: str, name: str, template: str | None = None) -> Draft:
        """Create a workspace on the user's draft (from a template workspace or blank)."""
        access.require_app_role(user, access.STEWARD, "create workspaces")
        workspace.check_slug(slug)
        branch = self.branch_name(user, slug)
        where = self._worktree(user.name, slug)
        if (self.path / slug).exists() or branch in self.repo.heads or where.exists():
            raise ConfigRepoError(f"a workspace named {slug!r} already exists (published or as your draft)")
        if template:
            if not workspace.is_workspace(self.path / workspace.check_slug(template)):
                raise ConfigRepoError(f"no workspace {template!r} to use as a template")
            access.require(user, "view", self.meta(template), template)  # copying reads its memory and data
        with self._lock():
            if branch not in self.repo.heads:
                _git(self.path, "worktree", "add", "-b", branch, str(where), MAIN)
        draft = Draft(user.name, slug, branch, where)
        try:
            with self._lock(draft), self._writing(draft, "new workspace"):
                self._write_new_workspace(user, draft, name, template)
        except BaseException:
            # Nothing was created: remove the empty branch and worktree so the name stays free.
            with self._lock():
                _git(self.path, "worktree", "remove", "--force", str(where))
                _git(self.path, "branch", "-D", branch)
            raise
        return draft

    def _write_new_workspace(self, user: User, draft: Draft, name: str, template: str | None) -> None:
        slug = draft.slug
        if template:
            workspace.copy_template(self.path / workspace.check_slug(template), draft.workspace_path, name=name)
            meta = workspace.load(draft.workspace_path)[0].data["workspace"]
            owners = meta["access"]["owners"]
            if user.name not in owners:
                meta["access"]["owners"] = [user.name] + owners
            workspace.save(draft.workspace_path, {"workspace": meta})
        else:
            workspace.save(draft.workspace_path, workspace.blank(name, user.name, dt.date.today().isoformat()))
        commit_folder(git.Repo(draft.path), slug, _actor(user), f"Create {slug}", "save")

    def import_category(self, user: User, source: str, target: str, kind: str) -> str | None:
        """Copy one memory category (task, sources or output) of a published workspace into the user's draft of another."""
        if kind not in ("task", "sources", "output"):
            raise ConfigRepoError(f"only task rules, sources or output constraints can be imported, not {kind!r}")
        if source == target:
            raise ConfigRepoError("choose two different workspaces")
        access.require(user, "view", self.meta(source), source)
        content = workspace.load(self.published_path(source))[0].get(kind)
        if content is None:
            raise ConfigRepoError(f"{source} has no {workspace.FILES[kind]}")
        return self.save(user, target, {kind: content}, f"Import {workspace.FILES[kind]} from {source}")

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
                    for draft in self._draft_worktrees():
                        try:
                            with self._lock(draft, timeout=0):
                                done += self._repair_draft(draft)
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
        return Path(self.repo.git_dir)

    def _leftovers(self) -> list[str]:
        """What looks left behind, checked without any lock (a live writer can make a false alarm)."""
        found = self._served_locks() + self._scratch()
        if (self._git_dir / "MERGE_HEAD").exists() or _status(self.path, optional_locks=False, untracked=False):
            found.append(self.path)
        for draft in self._draft_worktrees():
            admin = self._admin_dir(draft.path)
            if admin is None or self._draft_locks(draft, admin) or (admin / "MERGE_HEAD").exists() \
                    or self._marker(draft).exists():
                found.append(draft.path)
        return found

    def _served_locks(self) -> list[Path]:
        """git lock files that only commands run under the main lock create (ours are `dashmem-*.lock`)."""
        gd = self._git_dir
        found = [p for p in gd.glob("*.lock") if not p.name.startswith("dashmem-")]  # index, HEAD, ORIG_HEAD, packed-refs, ...
        found += [p for p in (gd / "refs" / "heads" / f"{MAIN}.lock", gd / "refs" / "stash.lock") if p.exists()]
        return found + list((gd / "refs" / "heads" / "rejected").rglob("*.lock"))

    def _scratch(self) -> list[Path]:
        try:
            return list((self._git_dir / SCRATCH).iterdir())
        except FileNotFoundError:
            return []

    def _draft_locks(self, draft: Draft, admin: Path) -> list[Path]:
        """git lock files of one draft: its worktree's (index, HEAD, a partial commit's index) and its branch's."""
        branch_lock = self._git_dir / "refs" / "heads" / f"{draft.branch}.lock"
        return list(admin.glob("*.lock")) + ([branch_lock] if branch_lock.exists() else [])

    def _repair_served(self) -> list[str]:
        """Make the published checkout's index and tracked files equal `main` (untracked files stay). Call under the main lock."""
        done = []
        for stale in self._served_locks():  # we hold the lock, so the git that made it is dead
            stale.unlink(missing_ok=True)
            done.append(f"removed {stale.relative_to(self._git_dir)}, left by a killed git")
        if (self._git_dir / "MERGE_HEAD").exists():
            _git(self.path, "merge", "--abort", ok=(0, 128))
            done.append("aborted a half-done merge in the published checkout")
        for stale in self._scratch():  # only a publish, under this lock, writes there
            shutil.rmtree(stale, ignore_errors=True)
            done.append(f"removed {stale.name}, a killed publish's copy of a workspace")
        if _status(self.path, untracked=False):
            _keep_and_reset(self.path, f"the published checkout {self.path}", untracked=False)
            done.append(f"reset the published checkout to {MAIN} (what differed is kept in `git stash list`)")
        return done

    def _repair_draft(self, draft: Draft) -> list[str]:
        """Make a draft's worktree equal its branch. Call under the main lock and the draft's."""
        admin = self._admin_dir(draft.path)
        if admin is None:
            if not draft.path.exists():
                return []
            self._forget_worktree(draft.path)  # checked out again when next opened
            return [f"removed the half-made checkout of {draft.branch}"]
        done = []
        for stale in self._draft_locks(draft, admin):
            stale.unlink(missing_ok=True)
            done.append(f"removed {stale.name} of {draft.branch}, left by a killed git")
        if (admin / "MERGE_HEAD").exists():
            _git(draft.path, "merge", "--abort", ok=(0, 128))
            done.append(f"aborted a half-done update of {draft.branch}")
        marker = self._marker(draft)
        if marker.exists():
            # Only then: files a person put in their draft by hand are theirs, and the next save commits them.
            if _status(draft.path):
                # Untracked files too: a save's temporary files, which the next save would commit.
                _keep_and_reset(draft.path, f"the draft {draft.branch}", untracked=True)
                done.append(f"reset the worktree of {draft.branch} to its last commit, as a {marker.read_text().strip() or 'change'} "
                            f"died half-way (what differed is kept in `git stash list`)")
            marker.unlink()
        return done

    def _marker(self, draft: Draft) -> Path:
        return self._git_dir / f"dashmem-{draft.user}-{draft.slug}.writing"

    @contextlib.contextmanager
    def _writing(self, draft: Draft, what: str) -> Iterator[None]:
        """Mark the draft's worktree as being written (call under the draft's lock).

        A marker left behind means a process died while writing; `repair` then
        makes the worktree equal its branch again. Refusals leave the worktree
        as it was and remove the marker; other errors leave it for `repair`.
        """
        marker = self._marker(draft)
        marker.write_text(what, encoding="utf-8")
        clean = False
        try:
            yield
            clean = True
        except (ValidationFailed, ConfigRepoError, access.PermissionDenied):
            clean = True  # refused before writing, or undone by the operation itself
            raise
        finally:
            if clean:
                marker.unlink(missing_ok=True)

    def _draft_worktrees(self) -> list[Draft]:
        """Every draft branch that has a worktree folder."""
        out = []
        for head in self.repo.heads:
            user, slug = _parse_draft(head.name) or (None, None)
            if user is not None and self._worktree(user, slug).exists():
                out.append(Draft(user, slug, head.name, self._worktree(user, slug)))
        return out

    def _admin_dir(self, where: Path) -> Path | None:
        """The git folder of the worktree at `where`, if that is a complete checkout, else None.

        `git worktree add` marks the worktree `locked` until its checkout is
        done, and dashmem never locks one otherwise: a `locked` file means a
        checkout that was killed half-way.
        """
        try:
            line = (where / ".git").read_text(encoding="utf-8").strip()
        except OSError:
            return None
        if not line.startswith("gitdir: "):
            return None
        admin = Path(line[len("gitdir: "):])
        admin = admin if admin.is_absolute() else (where / admin).resolve()
        if not (admin / "HEAD").is_file() or (admin / "locked").exists():
            return None
        return admin

    def _forget_worktree(self, where: Path) -> None:
        """Remove a worktree folder and git's record of it (its branch stays). Call under the main lock."""
        dotgit = (where / ".git").resolve()
        if where.exists():
            shutil.rmtree(where)
        for admin in (self._git_dir / "worktrees").glob("*"):
            try:
                recorded = Path((admin / "gitdir").read_text(encoding="utf-8").strip())
            except OSError:
                continue
            if recorded == dotgit or recorded.resolve() == dotgit:
                shutil.rmtree(admin)  # `worktree prune` keeps a `locked` one, and `worktree add` then refuses the path
        _git(self.path, "worktree", "prune")

    def _maybe_gc(self) -> None:
        """Pack the repo once loose objects piled up, under every lock (git's auto-gc is off under our locks)."""
        try:
            loose = len(os.listdir(self._git_dir / "objects" / "17")) * 256  # git's own estimate: one fan-out folder
        except FileNotFoundError:
            loose = 0
        if loose < GC_LOOSE_OBJECTS:
            return
        drafts = [Draft(user, slug, head.name, self._worktree(user, slug)) for head in self.repo.heads
                  for user, slug in [_parse_draft(head.name) or (None, None)] if user is not None]
        try:
            with contextlib.ExitStack() as stack:
                stack.enter_context(self._lock(timeout=0))
                for draft in drafts:
                    stack.enter_context(self._lock(draft, timeout=0))
                gd = self._git_dir
                for stale in (list(gd.glob("objects/info/commit-graph*.lock")) + list(gd.glob("objects/info/commit-graphs/*.lock"))
                              + list((gd / "refs" / "heads").rglob("*.lock")) + self._served_locks()):
                    stale.unlink(missing_ok=True)  # every lock is ours: a killed gc's leftovers
                # What repairs kept (the stash) never expires; git would drop those entries after 30 to 90 days.
                _git(self.path, "-c", "gc.refs/stash.reflogExpire=never", "-c", "gc.refs/stash.reflogExpireUnreachable=never",
                     "gc", "--quiet")
        except Busy:
            return  # someone is writing; another opening packs it
        except git.GitCommandError as exc:
            _log.warning("git gc of %s failed: %s", self.path, exc)

    # ---- internals

    def _lock(self, draft: Draft | None = None, timeout: float = 15.0):
        name = f"dashmem-{draft.user}-{draft.slug}.lock" if draft else "dashmem-main.lock"
        return _locked(self._git_dir / name, f"the draft of {draft.slug}" if draft else "the config repo", timeout)


def _actor(user: User) -> git.Actor:
    return git.Actor(user.display_name or user.name, user.git_email)


def _git_env(user: User) -> dict[str, str]:
    return _actor_env(_actor(user))


def _actor_env(actor: git.Actor) -> dict[str, str]:
    return {"GIT_AUTHOR_NAME": actor.name, "GIT_AUTHOR_EMAIL": actor.email,
            "GIT_COMMITTER_NAME": actor.name, "GIT_COMMITTER_EMAIL": actor.email}


def _rev(cwd: Path, ref: str) -> str:
    return _git(cwd, "rev-parse", "--verify", "-q", f"{ref}^{{commit}}").stdout.strip()


def _is_ancestor(cwd: Path, a: str, b: str) -> bool:
    return _git(cwd, "merge-base", "--is-ancestor", a, b, ok=(0, 1)).returncode == 0


def _status(cwd: Path, *, optional_locks: bool = True, untracked: bool = True) -> str:
    """`git status --porcelain` of a checkout: empty when index and files equal HEAD.

    Without `optional_locks` it does not refresh the index on disk, so it may run
    without our lock while another process writes (it then writes nothing).
    """
    return _git(cwd, "status", "--porcelain", f"--untracked-files={'normal' if untracked else 'no'}",
                env=None if optional_locks else {"GIT_OPTIONAL_LOCKS": "0"}).stdout


def _keep_and_reset(where: Path, what: str, *, untracked: bool) -> None:
    """Keep what differs from HEAD in the checkout `where` as a stash entry, then make it equal HEAD
    (with `untracked`, untracked files are kept in the entry and removed too)."""
    stamp = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    message = f"dashmem repair {stamp}: what differed from the last commit in {what}"
    env = _actor_env(SYSTEM)
    if untracked and _git(where, "stash", "push", "--include-untracked", "-q", "-m", message, env=env, ok=(0, 1, 128)).returncode == 0 \
            and not _status(where):
        return
    # Tracked files only, or a state `stash push` cannot take: keep what `stash create` can, then reset regardless.
    sha = _git(where, "stash", "create", message, env=env, ok=(0, 1, 128)).stdout.strip()
    if sha:
        _git(where, "stash", "store", "-q", "-m", message, sha, env=env)
    _git(where, "reset", "--hard", "-q")


def _extract(cwd: Path, tree: str, folder: str, target: Path) -> None:
    """Write `folder` as it is in `tree` (data files included) under `target`."""
    if _git(cwd, "cat-file", "-e", f"{tree}:{folder}", ok=(0, 1, 128)).returncode != 0:
        return
    cmd = [git.Git.GIT_PYTHON_GIT_EXECUTABLE or "git", "archive", "--format=tar", tree, "--", folder]
    with subprocess.Popen(cmd, cwd=str(cwd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=tuple(_held())) as proc:
        with tarfile.open(fileobj=proc.stdout, mode="r|") as archive:
            archive.extractall(target, filter="data")
        stderr = proc.stderr.read()
    if proc.returncode != 0:
        raise git.GitCommandError(cmd, proc.returncode, stderr)


def _conflicted(cwd: Path) -> list[str]:
    try:
        out = _git(cwd, "diff", "--name-only", "--diff-filter=U").stdout
    except git.GitCommandError:
        return []
    return [line for line in out.splitlines() if line]


def _snapshot(folder: Path) -> dict[str, bytes]:
    if not folder.exists():
        return {}
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _restore_snapshot(folder: Path, snapshot: dict[str, bytes]) -> None:
    for p in list(folder.rglob("*")) if folder.exists() else []:
        if p.is_file() and str(p.relative_to(folder)) not in snapshot:
            p.unlink()
    for rel, data in snapshot.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)
