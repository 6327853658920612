"""Versions of a workspace folder in any git checkout: history, diff, read, commit, restore.

These work on the app's config repo and on a plain clone alike (the CLI uses
them on both). Nothing here rewrites history: `commit_folder` and `restore`
add commits. Each commit dashmem makes carries two trailers, the action
(`Dashmem-Action: save|revert|undo|sync|publish|create`) and the workspace,
which the undo stack and the History page read back.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import git

from ..memory import semantic_diff as semantic
from ..memory import workspace
from ..memory.semantic_diff import Change
from ..memory.yamlio import YamlSyntaxError, parse
from .gitops import ConfigRepoError, _git, actor_env

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


def restore(repo: git.Repo, folder: str, version: str, author: git.Actor, *, action: str = "revert", subject: str | None = None) -> str | None:
    """Make `folder` exactly as it was at `version`, as a new commit (history untouched)."""
    commit = resolve(repo, version)
    try:
        _ = commit.tree / folder  # raises KeyError when the folder is not in that version
    except KeyError:
        raise _error(f"{folder} does not exist at version {commit.hexsha[:10]}") from None
    root = work_tree(repo)
    if (root / folder).exists():
        _git(root, "rm", "-r", "-q", "--cached", "--ignore-unmatch", "--", folder)
        shutil.rmtree(root / folder)
    _git(root, "checkout", commit.hexsha, "--", folder)
    subject = subject or f"Revert {Path(folder).name} to {commit.hexsha[:10]}"
    return commit_folder(repo, folder, author, subject, action)
