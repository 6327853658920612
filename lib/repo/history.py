"""Versions of a workspace folder in any git checkout: history, diff, read, commit, restore.

These work on the app's config repo and on a plain clone alike (the CLI uses
them on both). Nothing here rewrites history: `commit_folder` and `restore`
add commits. Each commit dashmem makes carries two trailers, the action
(`Dashmem-Action: save|revert|undo|sync|publish|create`) and the workspace,
which the undo stack and the History page read back.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

import git

from ..core.fsutil import write_temp
from ..memory import semantic_diff as semantic
from ..memory import workspace
from ..memory.semantic_diff import Change
from ..memory.yamlio import YamlSyntaxError, parse
from .gitops import Busy, CheckoutBehind, ConfigRepoError, _git, actor_env, cas_update_ref, commit_tree

MAIN = "main"  # the published branch
ACTION_TRAILER = "Dashmem-Action"
WORKSPACE_TRAILER = "Dashmem-Workspace"


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


def _error(text: str) -> Exception:
    return ConfigRepoError(text)


def find_repo(path: Path) -> tuple[git.Repo, str]:
    """The git repo containing PATH and PATH's folder relative to its root."""
    path = Path(path).resolve()
    try:
        repo = git.Repo(path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise _error(f"{path} is not inside a git repository") from None
    root = work_tree(repo).resolve()
    return repo, path.relative_to(root).as_posix()


def work_tree(repo: git.Repo) -> Path:
    """The checkout's root folder; a bare repository has none to read workspaces from."""
    if repo.working_tree_dir is None:
        raise _error(f"{repo.git_dir} is a bare repository: clone it to get a checkout")
    return Path(repo.working_tree_dir)


def message(subject: str, action: str, slug: str) -> str:
    """A commit message with dashmem's trailers."""
    return f"{subject}\n\n{ACTION_TRAILER}: {action}\n{WORKSPACE_TRAILER}: {slug}\n"


def trailer(commit: git.Commit, key: str) -> str | None:
    """The value of the trailer `key` in the commit's message, if any."""
    return _trailer_in(_text(commit.message), key)


def _trailer_in(text: str, key: str) -> str | None:
    for line in reversed(text.splitlines()):
        if line.startswith(f"{key}: "):
            return line.split(": ", 1)[1].strip()
    return None


def _text(message: str | bytes) -> str:
    """A commit message as text (GitPython gives bytes only when it cannot decode it)."""
    return message if isinstance(message, str) else message.decode("utf-8", "replace")


def version(commit: git.Commit) -> Version:
    return Version(
        sha=commit.hexsha,
        author=commit.author.name or "",
        email=commit.author.email or "",
        date=commit.authored_datetime.isoformat(),
        message=_text(commit.message).splitlines()[0] if commit.message else "",
        action=trailer(commit, ACTION_TRAILER),
    )


def history(repo: git.Repo, folder: str, ref: str = MAIN, limit: int = 100) -> list[Version]:
    """Versions of one folder on `ref`, newest first.

    On `main` each publish is one merge commit, so follow the first parent:
    the list is what was published, not every draft save behind it. One
    `git log` reads them all (reading each commit object through GitPython
    costs a round trip per commit, about twice git's own time).
    """
    fields = ("%H", "%an", "%ae", "%aI", "%B")
    args = ["log", "-z", f"--max-count={int(limit)}", f"--format={'%x00'.join(fields)}"]
    if ref == MAIN:
        args.append("--first-parent")
    out = _git(str(repo.working_tree_dir or repo.git_dir), *args, "--end-of-options", ref, "--", folder).stdout
    parts = out.split("\0")
    if len(parts) % len(fields) == 1 and parts[-1] == "":
        parts.pop()  # the terminator after the last commit
    versions = []
    for i in range(0, len(parts) - len(fields) + 1, len(fields)):
        sha, author, email, date, body = parts[i : i + len(fields)]
        versions.append(
            Version(
                sha=sha.strip(), author=author, email=email, date=date, message=body.splitlines()[0] if body else "", action=_trailer_in(body, ACTION_TRAILER)
            )
        )
    return versions


def resolve(repo: git.Repo, version: str) -> git.Commit:
    try:
        commit = repo.commit(version)
        _ = commit.tree  # a full-length sha is only looked up when read: make an unknown one fail here
        return commit
    except (git.BadName, ValueError):
        raise _error(f"unknown version {version!r}") from None


def read_file(repo: git.Repo, version: str, path: str) -> bytes | None:
    try:
        return (resolve(repo, version).tree / path).data_stream.read()
    except KeyError:
        return None


def diff(repo: git.Repo, folder: str, a: str, b: str) -> list[FileDiff]:
    """Per-file unified diffs of one folder between two versions."""
    ca, cb = resolve(repo, a), resolve(repo, b)
    out = []
    for change in ca.diff(cb, paths=folder):
        old = change.a_blob.data_stream.read().decode("utf-8", "replace") if change.a_blob else ""
        new = change.b_blob.data_stream.read().decode("utf-8", "replace") if change.b_blob else ""
        name = change.b_path or change.a_path or ""  # a diff entry has at least one side
        rel = name[len(folder) + 1 :] if name.startswith(folder + "/") else name
        status = "added" if change.new_file else "deleted" if change.deleted_file else "modified"
        patch = workspace.text_diff(old, new, f"a/{name}@{ca.hexsha[:10]}", f"b/{name}@{cb.hexsha[:10]}")
        out.append(FileDiff(rel, status, patch))
    return sorted(out, key=lambda d: d.path)


def workspace_at(repo: git.Repo, folder: str, version: str, kinds: Iterable[str] | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    """One version's workspace files parsed (kind -> data; only KINDS if given), and those that cannot be read (file -> why)."""

    tree = resolve(repo, version).tree
    data: dict[str, Any] = {}
    problems: dict[str, str] = {}
    for kind in workspace.FILES if kinds is None else kinds:
        filename = workspace.FILES[kind]
        try:
            raw = (tree / f"{folder}/{filename}").data_stream.read()
        except KeyError:
            continue  # absent in this version: an empty file to compare with
        try:
            data[kind] = parse(raw.decode("utf-8")).data
        except UnicodeDecodeError as exc:
            problems[filename] = f"not UTF-8 text (byte {exc.start})"
        except YamlSyntaxError as exc:
            problems[filename] = f"line {exc.line}: {exc}" if exc.line else str(exc)
    return data, problems


def _blob(tree: git.Tree, path: str) -> str | None:
    try:
        return (tree / path).hexsha
    except KeyError:
        return None


def semantic_diff(repo: git.Repo, folder: str, a: str, b: str) -> list[Change]:
    """What changed in meaning in one folder's workspace between two versions (see lib.memory.semantic_diff).

    Only files whose bytes differ are parsed (a draft rarely touches the large profile). A file
    either version cannot parse is reported as unreadable and left out of both sides, so it is
    not mistaken for one emptied or written from nothing.
    """
    ta, tb = resolve(repo, a).tree, resolve(repo, b).tree
    changed = [k for k, f in workspace.FILES.items() if _blob(ta, f"{folder}/{f}") != _blob(tb, f"{folder}/{f}")]
    old, old_problems = workspace_at(repo, folder, a, changed)
    new, new_problems = workspace_at(repo, folder, b, changed)
    broken = {**old_problems, **new_problems}
    for kind, filename in workspace.FILES.items():
        if filename in broken:
            old.pop(kind, None)
            new.pop(kind, None)
    side = {f: "new" for f in new_problems} | {f: "old" for f in old_problems if f not in new_problems}
    notes = [semantic.unreadable(f, f"in the {side[f]} version, {why}") for f, why in sorted(broken.items())]
    return notes + semantic.changes(old, new)


def commit_folder(repo: git.Repo, folder: str, author: git.Actor, subject: str, action: str) -> str | None:
    """Stage everything under `folder` and commit only it; None when nothing changed."""
    root = work_tree(repo)
    _git(root, "add", "--all", "--", folder)
    if _git(root, "diff", "--cached", "--quiet", "--", folder, ok=(0, 1)).returncode == 0:
        return None  # nothing staged under folder
    # The message goes in the arguments, not on stdin: a commit whose Python is killed while its git runs (the
    # git holds the lock and finishes on its own) must not find its message unwritten and abort as empty.
    _git(root, "commit", "-q", "-m", message(subject, action, Path(folder).name), "--", folder, env=actor_env(author))
    return _git(root, "rev-parse", "HEAD").stdout.strip()


def restore(
    repo: git.Repo, folder: str, version: str, author: git.Actor, *, action: str = "revert", subject: str | None = None, empty: bool = False
) -> str | None:
    """Make `folder` exactly as it was at `version`, as a new commit (history untouched); None when it already is
    (with `empty`, an empty commit records the step anyway). Crash-safe like `save_files`.

    Files of the folder that the version does not change stay as they are in the checkout.
    """
    commit = resolve(repo, version)
    try:
        _ = commit.tree / folder  # raises KeyError when the folder is not in that version
    except KeyError:
        raise _error(f"{folder} does not exist at version {commit.hexsha[:10]}") from None
    subject = subject or f"Revert {Path(folder).name} to {commit.hexsha[:10]}"
    with _Commit(repo, folder) as change:
        change.git("rm", "-r", "-q", "--cached", "--ignore-unmatch", "--", folder)
        change.git("read-tree", f"--prefix={folder}/", f"{commit.hexsha}:{folder}")
        return change.finish(author, subject, action, empty=empty, from_tree=True)


def save_files(repo: git.Repo, folder: str, files: Mapping[str, str | bytes], author: git.Actor, subject: str, action: str = "save") -> str | None:
    """Commit `files` (names inside `folder` -> content; text as UTF-8) with whatever else differs in the folder
    (files a person put there by hand), then put them in the checkout; None when nothing differs.

    Crash-safe and safe on a full disk, for a checkout whose writers hold a lock (`_Commit`).
    """
    with _Commit(repo, folder) as change:
        change.git("add", "--all", "--", folder)  # the folder as the checkout has it, hand-made changes included
        change.stage({f"{folder}/{name}": content for name, content in files.items()})
        return change.finish(author, subject, action)


SCRATCH_PREFIX = "dashmem-commit-"  # in a checkout's git folder: what a commit in the making prepares


class _Commit:
    """One commit of a checkout's branch, made beside the checkout; the checkout is brought to it after.

    Everything that takes disk space is written first, none of it in the checkout: the new files as
    temporary files in a scratch folder of the checkout's git folder, their blobs, the tree and the commit,
    and a new index (a copy of the checkout's, so its stat information stays). Then the branch moves, with
    a compare-and-swap `update-ref`: that is the commit point. Only then does the checkout change, by
    renames alone, which need no space: the files, then the index (held as `index.lock`, git's own lock,
    from before the commit point, so no other git writes it meanwhile).

    So a failure before the commit point (a full disk: git's objects, the index, a temporary file, the ref's
    lock file) leaves the branch and the checkout exactly as they were, and so does a process killed there;
    only a kill during the renames leaves a checkout behind its branch, which `repair` brings up to it.
    """

    def __init__(self, repo: git.Repo, folder: str):
        self.root = work_tree(repo)
        self.admin = Path(repo.git_dir)  # the checkout's own git folder (a worktree's, for a draft)
        self.folder = folder
        self.moves: dict[str, str] = {}  # path in the checkout -> temporary file with its new content
        self.removals: list[str] = []

    def __enter__(self) -> "_Commit":
        # The commit, its tree, and the branch HEAD names ("HEAD" itself when detached): one git process.
        self.head, self.head_tree, self.ref = _git(self.root, "rev-parse", "HEAD", "HEAD^{tree}", "--symbolic-full-name", "HEAD").stdout.split()
        # Beside the index: on the checkout's disk too, as drafts and clones have it (else the renames fail: `CheckoutBehind`).
        self.scratch = self.admin / f"{SCRATCH_PREFIX}{os.urandom(6).hex()}"
        self.scratch.mkdir()
        try:
            self.index = self.scratch / "index"
            if (self.admin / "index").is_file():
                shutil.copy2(self.admin / "index", self.index)  # with its time, which git's check of racy entries reads
            self.git("read-tree", "-m", self.head)  # the index of HEAD, keeping the stat information of entries that match
        except BaseException:
            shutil.rmtree(self.scratch, ignore_errors=True)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)

    def git(self, *args: str, input: str | None = None) -> str:
        """A git command on the new index (never the checkout's)."""
        return _git(self.root, *args, env={"GIT_INDEX_FILE": str(self.index)}, input=input).stdout

    def stage(self, files: Mapping[str, str | bytes]) -> None:
        """Put these files (paths in the checkout -> content) in the new index, and ready them for the checkout."""
        for path, content in files.items():
            self.moves[path] = write_temp(self.scratch / Path(path).name, content)
        if not files:
            return
        blobs = _git(self.root, "hash-object", "-w", "--stdin-paths", input="\n".join(self.moves[path] for path in files) + "\n").stdout.split()
        self.git("update-index", "--add", "--index-info", input="".join(f"100644 {blob}\t{path}\n" for blob, path in zip(blobs, files)))

    def finish(self, author: git.Actor, subject: str, action: str, *, empty: bool = False, from_tree: bool = False) -> str | None:
        """Commit the new index, move the branch, bring the checkout to it; the commit's sha (None: nothing changed).

        With `from_tree` the checkout gets what the new tree changes in the folder (a restore); otherwise the
        staged files (a save: the rest of the folder is in the checkout already).
        """
        tree = self.git("write-tree").strip()
        if tree == self.head_tree and not empty:
            return None
        if from_tree:
            self._ready_changes(self.head_tree, tree)
        for path in self.moves:
            (self.root / path).parent.mkdir(parents=True, exist_ok=True)  # an empty folder: nothing a reader sees
        sha = commit_tree(self.root, tree, [self.head], message(subject, action, Path(self.folder).name), env=actor_env(author))
        held = self.admin / "index.lock"
        try:
            os.link(self.index, held)  # git's own lock of the index: no other git writes it until the rename below
        except FileExistsError:
            raise Busy("another git is writing the index of this checkout; nothing was changed, try again in a moment") from None
        try:
            cas_update_ref(self.root, self.ref, sha, self.head, f"dashmem {action}: {subject}")
        except BaseException:
            held.unlink(missing_ok=True)
            raise
        try:  # the commit point is passed: renames only from here
            for path, tmp in self.moves.items():
                os.replace(tmp, self.root / path)
            for path in self.removals:
                (self.root / path).unlink(missing_ok=True)
            os.replace(held, self.admin / "index")
        except OSError as exc:
            held.unlink(missing_ok=True)
            raise CheckoutBehind(sha, exc.strerror or str(exc)) from exc
        return sha

    def _ready_changes(self, old_tree: str, tree: str) -> None:
        """Temporary files for what the folder gains or changes between the two trees, and what it loses."""
        out = _git(self.root, "diff-tree", "-r", "-z", "--no-renames", old_tree, tree, "--", self.folder).stdout.split("\0")
        for meta, path in zip(out[0::2], out[1::2]):
            _old_mode, mode, _old, blob, status = meta.lstrip(":").split()
            if status == "D":
                self.removals.append(path)
                continue
            if mode == "160000":  # a submodule's commit: nothing to write
                continue
            data = _git(self.root, "cat-file", "blob", blob, text=False).stdout
            if mode == "120000":
                tmp = str(self.scratch / f"link-{len(self.moves)}")
                os.symlink(os.fsdecode(data), tmp)
            else:
                tmp = write_temp(self.scratch / Path(path).name, data)
                if mode == "100755":
                    os.chmod(tmp, os.stat(tmp).st_mode | ((os.stat(tmp).st_mode & 0o444) >> 2))  # x where r, as git checks one out
            self.moves[path] = tmp
