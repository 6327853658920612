"""Running git for the config repo: the `_git` helper under dashmem's locks, plumbing, and lock repair.

Every git command run under one of our locks (`_locked`) inherits the lock's
file descriptor, so the lock stays held while any git process started under it
still runs, even when the Python process that took it was killed: whoever gets
the lock knows that git lock files in its domain were left by dead processes,
and may delete them (`served_lock_files`, `repair_checkout`).

The plumbing a crash-safe publish is made of lives here too: `merge_tree`
(a merge computed without a checkout), `commit_tree`, and `cas_update_ref`
(a branch moved only from the commit the caller saw).

Nothing here knows about workspaces or drafts; lib.repo.configrepo is the public
facade, lib.repo.drafts and lib.ops.publish build on this.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fcntl
import os
import shutil
import subprocess
import tarfile
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

import git

from ..core.errors import DashmemError


class ConfigRepoError(DashmemError, RuntimeError):
    pass


class Busy(ConfigRepoError):
    pass


class CheckoutBehind(ConfigRepoError):
    """The commit was made and its branch moved, but the checkout's files could not all be brought up to it.

    Nothing is lost: the commit holds the change, and repairing the checkout makes it equal its branch again.
    """

    def __init__(self, sha: str, reason: str):
        self.sha = sha
        super().__init__(f"saved as {sha[:10]}, but the checkout's files could not all be brought up to it ({reason}); they are when it is next opened")


# What git says when the disk is full or a quota is reached (it names the file it could not write).
_GIT_DISK_FULL = {"No space left on device": errno.ENOSPC, "Out of diskspace": errno.ENOSPC, "Disk quota exceeded": errno.EDQUOT}
NEARLY_FULL = 1 << 20  # bytes free under which a git that failed to write is taken to have run out of space


def write_failure(exc: BaseException, where: Path) -> tuple[str, bool] | None:
    """Why a write to the repo at `where` failed, said for a person, and whether its disk is full;
    None when `exc` is neither an OSError nor a git that failed.

    git's own words (which file, which command) are for the log, not for the person. Some of git's
    failures to write do not say why ("couldn't write '...lock'"): on a disk with less than
    `NEARLY_FULL` bytes free, that is taken as the disk being full.
    """
    if isinstance(exc, OSError):
        return exc.strerror or str(exc), exc.errno in (errno.ENOSPC, errno.EDQUOT)
    if not isinstance(exc, git.GitCommandError):
        return None
    said = str(exc.stderr)
    for words, code in _GIT_DISK_FULL.items():
        if words in said:
            return os.strerror(code), True
    try:
        nearly_full = shutil.disk_usage(where).free < NEARLY_FULL
    except OSError:
        nearly_full = False
    if nearly_full:
        return os.strerror(errno.ENOSPC), True
    if "Read-only file system" in said:
        return os.strerror(errno.EROFS), False
    if "Permission denied" in said:
        return "git may not write to the config repo (permission denied)", False
    return "git could not write to the config repo", False


SYSTEM = git.Actor("dashmem", "dashmem@localhost")  # the author of what dashmem itself commits or stashes

# --------------------------------------------------------------------------- running git under our locks

_HELD = threading.local()  # .fds: file descriptors of the dashmem locks this thread holds


def _held() -> list[int]:
    fds = getattr(_HELD, "fds", None)
    if fds is None:
        fds = _HELD.fds = []
    return fds


def _git(
    cwd: Path | str, *args: str, env: dict[str, str] | None = None, input: str | bytes | None = None, ok: tuple[int, ...] = (0,), text: bool = True
) -> subprocess.CompletedProcess:
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
    proc = subprocess.run(
        cmd,
        cwd=str(cwd),
        env=full_env,
        input=input,
        capture_output=True,
        pass_fds=fds,
        text=text,
        encoding="utf-8" if text else None,
        errors="replace" if text else None,
    )
    if proc.returncode not in ok:
        raise git.GitCommandError(cmd, proc.returncode, proc.stderr, proc.stdout)
    return proc


@contextlib.contextmanager
def _locked(lock_path: Path, what: str, timeout: float = 15.0) -> Iterator[None]:
    """Hold an exclusive flock on `lock_path` (waiting up to `timeout` seconds, else `configrepo.Busy`)."""
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


def actor_env(actor: git.Actor) -> dict[str, str]:
    """The environment that makes `actor` a commit's author and committer."""
    name, email = actor.name or "", actor.email or ""  # git refuses an empty name with a message that says so
    return {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email}


# --------------------------------------------------------------------------- small queries


def rev(cwd: Path, ref: str) -> str:
    """The commit `ref` names (full sha)."""
    return _git(cwd, "rev-parse", "--verify", "-q", f"{ref}^{{commit}}").stdout.strip()


def branch_sha(git_dir: Path, name: str) -> str | None:
    """The commit the branch `name` points at, read from its ref file (else `packed-refs`), with no git process.

    The app reads it on every page run; git writes each ref file whole (a lock
    file renamed over it), so a read sees the old sha or the new one, and a
    commit made by any process shows on the next call.
    """
    sha = _loose_ref(os.path.join(git_dir, "refs", "heads", name))
    return sha if sha is not None else _packed_heads(git_dir).get(name)


def branch_heads(git_dir: Path, prefix: str = "") -> dict[str, str]:
    """Branch name -> commit sha of every branch whose name starts with `prefix`, sorted by name
    (read like `branch_sha`: only the folder of ref files the prefix names is listed)."""
    heads = {name: sha for name, sha in _packed_heads(git_dir).items() if name.startswith(prefix)}
    root = os.path.join(git_dir, "refs", "heads")
    for folder, _subfolders, files in os.walk(os.path.join(root, prefix.rpartition("/")[0])):
        for file in files:
            name = os.path.relpath(os.path.join(folder, file), root).replace(os.sep, "/")
            if name.startswith(prefix) and not file.endswith(".lock"):
                sha = _loose_ref(os.path.join(folder, file))
                if sha is not None:
                    heads[name] = sha
    return dict(sorted(heads.items()))


def _loose_ref(path: str) -> str | None:
    try:
        with open(path, "rb") as handle:
            sha = handle.read(64).strip().decode("ascii", "replace")
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None  # no such branch, or deleted meanwhile
    return sha if len(sha) == 40 and all(c in "0123456789abcdef" for c in sha) else None


_PACKED: dict[str, tuple[tuple[int, int, int], dict[str, str]]] = {}  # packed-refs file -> (its stat, its branches)


def _packed_heads(git_dir: Path) -> dict[str, str]:
    """The branches in `packed-refs`, parsed again only when the file was replaced (git rewrites it whole)."""
    path = os.path.join(git_dir, "packed-refs")
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return {}
    key = (st.st_ino, st.st_mtime_ns, st.st_size)
    cached = _PACKED.get(path)
    if cached and cached[0] == key:
        return cached[1]
    heads = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except FileNotFoundError:
        return {}
    for line in text.splitlines():
        sha, _, ref = line.partition(" ")
        if ref.startswith("refs/heads/") and len(sha) == 40:
            heads[ref[len("refs/heads/") :]] = sha
    _PACKED[path] = (key, heads)
    return heads


def is_ancestor(cwd: Path, a: str, b: str) -> bool:
    return _git(cwd, "merge-base", "--is-ancestor", a, b, ok=(0, 1)).returncode == 0


def status(cwd: Path, *, optional_locks: bool = True, untracked: bool = True) -> str:
    """`git status --porcelain` of a checkout: empty when index and files equal HEAD.

    Without `optional_locks` it does not refresh the index on disk, so it may run
    without our lock while another process writes (it then writes nothing).
    """
    return _git(
        cwd, "status", "--porcelain", f"--untracked-files={'normal' if untracked else 'no'}", env=None if optional_locks else {"GIT_OPTIONAL_LOCKS": "0"}
    ).stdout


def differing(cwd: Path, *, optional_locks: bool = True) -> list[tuple[str, str]]:
    """(status, path) of each tracked file of a checkout whose index or file differs from HEAD
    (`git status --porcelain -z`, untracked files left out; a rename gives its new path)."""
    out = _git(cwd, "status", "--porcelain", "-z", "--untracked-files=no", env=None if optional_locks else {"GIT_OPTIONAL_LOCKS": "0"}).stdout
    entries, found = iter(out.split("\0")), []
    for entry in entries:
        if len(entry) > 3:
            found.append((entry[:2], entry[3:]))
            if "R" in entry[:2] or "C" in entry[:2]:
                next(entries, None)  # the path it was renamed or copied from
    return found


def placed_by_hand(cwd: Path, path: str) -> bool:
    """Whether the file `path` of the checkout `cwd` holds content no commit of HEAD's history gave it: a file
    a person put there (next week's CSV), not one a checkout left behind its branch (a killed publish)."""
    try:
        blob = _git(cwd, "hash-object", "--", path).stdout.strip()
    except git.GitCommandError:
        return False  # gone or unreadable: nothing of theirs to keep
    raw = _git(cwd, "log", "HEAD", "--format=", "--raw", "--no-abbrev", "--no-renames", "--", path).stdout
    committed = {sha for line in raw.splitlines() if line.startswith(":") for sha in line.split("\t")[0].split()[2:4]}
    return blob not in committed


def conflicted(cwd: Path) -> list[str]:
    """Files with merge conflicts in the checkout `cwd` (none if git cannot say)."""
    try:
        out = _git(cwd, "diff", "--name-only", "--diff-filter=U").stdout
    except git.GitCommandError:
        return []
    return [line for line in out.splitlines() if line]


def extract(cwd: Path, tree: str, folder: str, target: Path) -> None:
    """Write `folder` as it is in `tree` (data files included) under `target`."""
    if _git(cwd, "cat-file", "-e", f"{tree}:{folder}", ok=(0, 1, 128)).returncode != 0:
        return
    cmd = [git.Git.GIT_PYTHON_GIT_EXECUTABLE or "git", "archive", "--format=tar", tree, "--", folder]
    with subprocess.Popen(cmd, cwd=str(cwd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=tuple(_held())) as proc:
        with tarfile.open(fileobj=proc.stdout, mode="r|") as archive:
            archive.extractall(target, filter="data")
        stderr = proc.stderr.read() if proc.stderr else b""  # a pipe (stderr=PIPE above)
    if proc.returncode != 0:
        raise git.GitCommandError(cmd, proc.returncode, stderr)


# --------------------------------------------------------------------------- plumbing: merging without a checkout


def merge_tree(cwd: Path, ours: str, theirs: str) -> tuple[str, list[str]]:
    """The tree of merging `theirs` into `ours`, computed without touching any checkout.

    Returns (tree, []) on a clean merge, and ("", conflicted files) when the same
    lines changed on both sides.
    """
    proc = _git(cwd, "merge-tree", "--write-tree", "--name-only", "-z", "--no-messages", ours, theirs, ok=(0, 1))
    tree, *rest = proc.stdout.split("\0")
    if proc.returncode == 1:
        return "", list(dict.fromkeys(name for name in rest if name))
    return tree.strip(), []


def commit_tree(cwd: Path, tree: str, parents: list[str], message: str, env: dict[str, str] | None = None) -> str:
    """A new commit of `tree` with `parents` (no branch moves); returns its sha."""
    args = [arg for parent in parents for arg in ("-p", parent)]
    return _git(cwd, "commit-tree", tree, *args, "-F", "-", input=message, env=env).stdout.strip()


def cas_update_ref(cwd: Path, ref: str, new: str, old: str, reason: str) -> None:
    """Move `ref` to `new` only if it still is `old` (compare-and-swap); `git.GitCommandError` if it moved."""
    _git(cwd, "update-ref", "-m", reason, ref, new, old)


# --------------------------------------------------------------------------- repairing what a killed git left


def served_lock_files(git_dir: Path, main: str) -> list[Path]:
    """git lock files that only commands run under the main lock create (ours are `dashmem-*.lock`)."""
    gd = git_dir
    found = [p for p in gd.glob("*.lock") if not p.name.startswith("dashmem-")]  # index, HEAD, ORIG_HEAD, packed-refs, ...
    found += [p for p in (gd / "refs" / "heads" / f"{main}.lock", gd / "refs" / "stash.lock") if p.exists()]
    return found + list((gd / "refs" / "heads" / "rejected").rglob("*.lock"))


def scratch_entries(git_dir: Path, scratch: str) -> list[Path]:
    """What is in the scratch folder `scratch` of the git folder (where a publish checks a merged workspace)."""
    try:
        return list((git_dir / scratch).iterdir())
    except FileNotFoundError:
        return []


def repair_checkout(path: Path, git_dir: Path, main: str, scratch: str, keep: Callable[[str], bool] = lambda path: False) -> list[str]:
    """Make the checkout at `path` (which has `main` checked out) equal `main`, but for the files `keep` names
    (paths relative to the checkout: a data file a person put in place); returns what was repaired.

    Removes git lock files and the scratch copies only commands under the main
    lock make, aborts a half-done merge, and keeps what differed in tracked
    files as a stash entry before resetting (untracked files stay). A kept file
    stays as it is in the checkout, and the index as in `main`. Call under the
    main lock.
    """
    done = []
    for stale in served_lock_files(git_dir, main):  # we hold the lock, so the git that made it is dead
        stale.unlink(missing_ok=True)
        done.append(f"removed {stale.relative_to(git_dir)}, left by a killed git")
    if (git_dir / "MERGE_HEAD").exists():
        _git(path, "merge", "--abort", ok=(0, 128))
        done.append("aborted a half-done merge in the published checkout")
    for stale in scratch_entries(git_dir, scratch):  # only a publish, under this lock, writes there
        shutil.rmtree(stale, ignore_errors=True)
        done.append(f"removed {stale.name}, a killed publish's copy of a workspace")
    found = differing(path)
    kept = sorted({name for _code, name in found if keep(name)})
    if any(name not in kept for _code, name in found):
        keep_and_reset(path, f"the published checkout {path}", untracked=False, keep=kept)
        done.append(
            f"reset the published checkout to {main} (what differed is kept in `git stash list`)" + (f"; kept {', '.join(kept)} as it is" if kept else "")
        )
    elif kept and _git(path, "diff", "--cached", "--quiet", ok=(0, 1)).returncode:
        _git(path, "reset", "-q")  # only the index differed (a staged copy): it equals `main` again, the files stay
    return done


def keep_and_reset(where: Path, what: str, *, untracked: bool, keep: list[str] | None = None) -> None:
    """Keep what differs from HEAD in the checkout `where` as a stash entry, then make it equal HEAD
    (with `untracked`, untracked files are kept in the entry and removed too; the files in `keep` stay as
    they are, with the index as in HEAD)."""
    stamp = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    message = f"dashmem repair {stamp}: what differed from the last commit in {what}"
    env = actor_env(SYSTEM)
    if (
        not keep
        and untracked
        and _git(where, "stash", "push", "--include-untracked", "-q", "-m", message, env=env, ok=(0, 1, 128)).returncode == 0
        and not status(where)
    ):
        return
    # Tracked files only, or a state `stash push` cannot take: keep what `stash create` can, then reset regardless.
    sha = _git(where, "stash", "create", message, env=env, ok=(0, 1, 128)).stdout.strip()
    if sha:
        _git(where, "stash", "store", "-q", "-m", message, sha, env=env)
    reset_to_head(where, keep or [])


def reset_to_head(where: Path, keep: list[str]) -> None:
    """Make the checkout `where` equal HEAD (`reset --hard`), but for the files in `keep`, which stay as they are
    (with the index as in HEAD: the next `git status` shows them as changed)."""
    if not keep:
        _git(where, "reset", "--hard", "-q")
        return
    # The index to HEAD, then every file but the kept ones back to HEAD: `checkout` leaves a file it is not named alone.
    _git(where, "reset", "-q")
    restore = [name for _code, name in differing(where) if name not in keep]
    if restore:
        _git(where, "checkout", "HEAD", "--", *restore)


def worktree_admin_dir(where: Path) -> Path | None:
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
    admin = Path(line[len("gitdir: ") :])
    admin = admin if admin.is_absolute() else (where / admin).resolve()
    if not (admin / "HEAD").is_file() or (admin / "locked").exists():
        return None
    return admin


def forget_worktree(repo_path: Path, git_dir: Path, where: Path) -> None:
    """Remove a worktree folder and git's record of it (its branch stays). Call under the main lock."""
    dotgit = (where / ".git").resolve()
    if where.exists():
        shutil.rmtree(where)
    for admin in (git_dir / "worktrees").glob("*"):
        try:
            recorded = Path((admin / "gitdir").read_text(encoding="utf-8").strip())
        except OSError:
            continue
        if recorded == dotgit or recorded.resolve() == dotgit:
            shutil.rmtree(admin)  # `worktree prune` keeps a `locked` one, and `worktree add` then refuses the path
    _git(repo_path, "worktree", "prune")


def loose_objects(git_dir: Path) -> int:
    """About how many loose objects the repo holds (git's own estimate: one fan-out folder times 256)."""
    try:
        return len(os.listdir(git_dir / "objects" / "17")) * 256
    except FileNotFoundError:
        return 0


def gc(path: Path, git_dir: Path, main: str) -> None:
    """Pack the repo. Call holding every dashmem lock of it: then every git lock file is a killed gc's leftover."""
    gd = git_dir
    for stale in (
        list(gd.glob("objects/info/commit-graph*.lock"))
        + list(gd.glob("objects/info/commit-graphs/*.lock"))
        + list((gd / "refs" / "heads").rglob("*.lock"))
        + served_lock_files(gd, main)
    ):
        stale.unlink(missing_ok=True)  # every lock is ours: a killed gc's leftovers
    # What repairs kept (the stash) never expires; git would drop those entries after 30 to 90 days.
    _git(path, "-c", "gc.refs/stash.reflogExpire=never", "-c", "gc.refs/stash.reflogExpireUnreachable=never", "gc", "--quiet")
