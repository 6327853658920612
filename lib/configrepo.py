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

The lower-level functions (`history`, `diff`, `restore`, `commit_folder`)
work on any checkout, so the CLI uses them on plain clones too.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import git

from . import access, workspace
from .access import User
from .diagnostics import ValidationFailed, has_errors

MAIN = "main"
ACTION_TRAILER = "Dashmem-Action"
WORKSPACE_TRAILER = "Dashmem-Workspace"
UNDO_DEPTH = 10
SYSTEM = git.Actor("dashmem", "dashmem@localhost")

SAMPLE_CI = """\
# Validate every workspace on each pull request to this config repo.
# The validator ships with the app: pip install it, then run `python -m lib validate .`
name: validate-workspaces
on:
  pull_request:
  push:
    branches: [main]
jobs:
  validate:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"
      - name: Install the dashmem validator
        run: |
          git clone --depth 1 "$DASHMEM_APP_REPO" .dashmem
          pip install -r .dashmem/requirements.txt
        env:
          DASHMEM_APP_REPO: ${{ vars.DASHMEM_APP_REPO }}
      - name: Validate
        run: PYTHONPATH=.dashmem python -m lib validate . --json > validation.json || (cat validation.json; exit 1)
"""


class ConfigRepoError(RuntimeError):
    pass


class PublishConflict(ConfigRepoError):
    """Both sides changed the same lines; nothing was merged and both are kept."""

    def __init__(self, slug: str, branch: str, files: list[str]):
        self.files = files
        super().__init__(
            f"cannot publish {slug}: {', '.join(files) or 'some files'} changed on {MAIN} since "
            f"this draft started, on the same lines. Nothing was published; your draft "
            f"({branch}) and the published version are both kept. Update your draft from "
            f"{MAIN}, redo your edit on top, and publish again."
        )


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
        commit.tree  # a full-length sha is only looked up when read: make an unknown one fail here
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
    repo.git.add("--all", "--", folder)
    try:
        repo.git.diff("--cached", "--quiet", "--", folder)
        return None  # exit 0: nothing staged under folder
    except git.GitCommandError:
        pass
    repo.git.commit("-q", "-m", _message(subject, action, Path(folder).name), "--", folder, env=_actor_env(author))
    return repo.head.commit.hexsha


def restore(repo: git.Repo, folder: str, version: str, author: git.Actor, *, action: str = "revert", subject: str | None = None) -> str | None:
    """Make `folder` exactly as it was at `version`, as a new commit (history untouched)."""
    commit = resolve(repo, version)
    try:
        commit.tree / folder
    except KeyError:
        raise ConfigRepoError(f"{folder} does not exist at version {commit.hexsha[:10]}") from None
    root = Path(repo.working_tree_dir)
    if (root / folder).exists():
        repo.git.rm("-r", "-q", "--cached", "--ignore-unmatch", "--", folder)
        shutil.rmtree(root / folder)
    repo.git.checkout(commit.hexsha, "--", folder)
    subject = subject or f"Revert {Path(folder).name} to {commit.hexsha[:10]}"
    return commit_folder(repo, folder, author, subject, action)


@contextlib.contextmanager
def _locked(lock_path: Path, what: str, timeout: float = 15.0) -> Iterator[None]:
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+") as handle:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise Busy(f"{what} is busy with another change; try again in a moment") from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# --------------------------------------------------------------------------- the app's config repo


class ConfigRepo:
    def __init__(self, path: Path):
        self.path = Path(path).resolve()
        self._local = threading.local()
        try:
            self._local.repo = git.Repo(self.path)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise ConfigRepoError(f"{self.path} is not a git repository") from None
        self.drafts_root = self.path.parent / f"{self.path.name}.drafts"

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
            (staging / ".github" / "workflows").mkdir(parents=True)
            (staging / ".github" / "workflows" / "validate.yml").write_text(SAMPLE_CI, encoding="utf-8")
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
        """What `user` sees of a workspace: the published folder, or for one not published yet, their draft."""
        return self.published_path(slug) if self.is_published(slug) else self.draft(user, slug).workspace_path

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
            if owner == user.name and slug not in metas:
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
            if branch not in self.repo.heads:
                raise
            return self.meta(slug, branch)

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
        with self._lock():
            if not (where / ".git").exists():
                if where.exists():
                    shutil.rmtree(where)
                self.repo.git.worktree("prune")
                where.parent.mkdir(parents=True, exist_ok=True)
                if branch in self.repo.heads:
                    self.repo.git.worktree("add", str(where), branch)
                else:
                    self.repo.git.worktree("add", "-b", branch, str(where), MAIN)
        return Draft(user.name, slug, branch, where), meta

    def drafts(self, slug: str | None = None) -> list[dict[str, Any]]:
        """Every draft branch (of workspace `slug`, if given) with how far it is ahead of and behind `main`."""
        out = []
        for head in self.repo.heads:
            owner, of = _parse_draft(head.name) or (None, None)
            if owner is None or (slug is not None and of != slug):
                continue
            behind, ahead = map(int, self.repo.git.rev_list("--left-right", "--count", f"{MAIN}...{head.name}").split())
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
        with self._lock(draft):
            before = _snapshot(draft.workspace_path)
            try:
                workspace.save(draft.workspace_path, files)
                return commit_folder(wt, slug, _actor(user), message or f"Edit {slug}", "save")
            except ValidationFailed:
                raise
            except BaseException:
                _restore_snapshot(draft.workspace_path, before)
                wt.git.reset("-q", "--", slug)
                raise

    def revert(self, user: User, slug: str, version: str) -> str | None:
        """Restore the workspace to `version` on the user's draft, as a new commit."""
        draft, _ = self._open_draft(user, slug, "revert")
        with self._lock(draft):
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
        with self._lock(draft):
            stack = self.undo_stack(user, slug)
            if len(stack) < 2:
                raise ConfigRepoError(f"nothing to undo in {slug}: the undo history keeps the last {UNDO_DEPTH} saved states of a draft")
            target = stack[-2]
            sha = restore(git.Repo(draft.path), slug, target, _actor(user), action="undo",
                          subject=f"Undo last change to {slug} (back to {target[:10]})")
            if sha is None:  # the state already equals the target: record the step anyway
                wt = git.Repo(draft.path)
                wt.git.commit("-q", "--allow-empty", "-m", _message(f"Undo last change to {slug}", "undo", slug), env=_git_env(user))
                sha = wt.head.commit.hexsha
            return sha

    def sync(self, user: User, slug: str, prefer: str | None = None) -> str | None:
        """Bring `main`'s published changes into the user's draft.

        On lines changed on both sides it refuses (`prefer=None`), or keeps the
        draft's lines (`prefer="mine"`) or the published ones (`"published"`).
        Either way both versions stay in history.
        """
        strategy = {None: [], "mine": ["-X", "ours"], "published": ["-X", "theirs"]}[prefer]
        draft = self.draft(user, slug)
        wt = git.Repo(draft.path)
        with self._lock(draft):
            if wt.is_ancestor(self.repo.heads[MAIN].commit, wt.head.commit):
                return None
            if wt.is_ancestor(wt.head.commit, self.repo.heads[MAIN].commit):
                wt.git.merge("--ff-only", "-q", MAIN)
                return wt.head.commit.hexsha
            try:
                wt.git.merge("--no-ff", "-q", *strategy, "-m", _message(f"Update draft of {slug} from {MAIN}", "sync", slug), MAIN,
                             env=_git_env(user))
            except git.GitCommandError:
                files = _conflicted(wt)
                wt.git.merge("--abort")
                raise PublishConflict(slug, draft.branch, files) from None
            return wt.head.commit.hexsha

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
        with self._lock():
            main_head = self.repo.heads[MAIN].commit
            if self.repo.is_ancestor(self.repo.heads[branch].commit, main_head):
                raise ConfigRepoError(f"nothing to publish: {branch} has no changes that are not on {MAIN}")
            # Roles were checked for `slug` only, so publish nothing outside its folder.
            outside = [p for p in self.repo.git.diff("--name-only", f"{MAIN}...{branch}").splitlines()
                       if not p.startswith(f"{slug}/")]
            if outside:
                raise ConfigRepoError(f"cannot publish {branch} as {slug}: it also changes {', '.join(outside)}; "
                                      f"publish each workspace on its own")
            if self.repo.is_dirty(untracked_files=True):
                raise ConfigRepoError(f"the published checkout at {self.path} has uncommitted changes; refusing to publish over them")
            try:
                self.repo.git.merge("--no-ff", "--no-commit", "-q", branch, env=_git_env(user))
            except git.GitCommandError:
                files = _conflicted(self.repo)
                self.repo.git.merge("--abort")
                raise PublishConflict(slug, branch, files) from None
            try:
                merged, diagnostics = workspace.load(self.path / slug)
                try:
                    published_meta = self.meta(slug)  # main before this merge
                except ConfigRepoError:
                    published_meta = {}  # a new workspace: its creator sets who may do what
                if published_meta:
                    # However the change got onto the branch (save, revert, undo, a push), only owners change who may do what.
                    access.require_governance_unchanged_or_owner(user, published_meta, merged.get("workspace") or {}, slug)
                require_valid = (meta.get("policy") or {}).get("require_valid_to_publish", True)
                if require_valid and has_errors(diagnostics):
                    raise ValidationFailed(diagnostics)
                self.repo.git.commit("-q", "-m", _message(subject, "publish", slug), env=_git_env(user))
            except BaseException:
                self.repo.git.merge("--abort")
                raise
            sha = self.repo.head.commit.hexsha
        # Bring the draft up to the published state so the next edit starts from it.
        owner = (_parse_draft(branch) or (None,))[0]
        wt_path = self._worktree(owner, slug) if owner else None
        if wt_path and (wt_path / ".git").exists():
            wt = git.Repo(wt_path)
            if wt.is_ancestor(wt.head.commit, self.repo.head.commit) and not wt.is_dirty():
                wt.git.merge("--ff-only", "-q", MAIN)
        return sha

    def reject(self, user: User, slug: str, branch: str) -> str:
        """An owner turns down a draft: it leaves the review list but is kept, renamed, never deleted."""
        access.require(user, "reject", self.meta(slug), slug)
        owner, of = _parse_draft(branch) or (None, None)
        if of != workspace.check_slug(slug) or branch not in self.repo.heads:
            raise ConfigRepoError(f"no draft {branch!r} of {slug}")
        kept = f"rejected/{owner}/{slug}/{dt.datetime.now(dt.timezone.utc).strftime('%Y%m%dT%H%M%S')}"
        with self._lock():
            where = self._worktree(owner, slug)
            if (where / ".git").exists():
                self.repo.git.worktree("remove", "--force", str(where))
            self.repo.git.branch("-m", branch, kept)
        return kept

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
                self.repo.git.worktree("add", "-b", branch, str(where), MAIN)
        draft = Draft(user.name, slug, branch, where)
        try:
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
        except BaseException:
            # Nothing was created: remove the empty branch and worktree so the name stays free.
            with self._lock():
                self.repo.git.worktree("remove", "--force", str(where))
                self.repo.git.branch("-D", branch)
            raise
        return draft

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

    # ---- internals

    def _lock(self, draft: Draft | None = None):
        name = f"dashmem-{draft.user}-{draft.slug}.lock" if draft else "dashmem-main.lock"
        return _locked(Path(self.repo.git_dir) / name, f"the draft of {draft.slug}" if draft else "the config repo")


def _actor(user: User) -> git.Actor:
    return git.Actor(user.display_name or user.name, user.git_email)


def _git_env(user: User) -> dict[str, str]:
    return _actor_env(_actor(user))


def _actor_env(actor: git.Actor) -> dict[str, str]:
    return {"GIT_AUTHOR_NAME": actor.name, "GIT_AUTHOR_EMAIL": actor.email,
            "GIT_COMMITTER_NAME": actor.name, "GIT_COMMITTER_EMAIL": actor.email}


def _conflicted(repo: git.Repo) -> list[str]:
    try:
        out = repo.git.diff("--name-only", "--diff-filter=U")
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
