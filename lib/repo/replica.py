"""Several app servers sharing one config repo: each server's repo is a replica of a shared bare remote.

A replica's `origin` is the shared remote (DASHMEM_CONFIG_REMOTE), and its git
config says so (`dashmem.shared = origin`), so every process opening that repo,
the app or a CLI run, behaves the same whatever its environment.

Pull: `git fetch` of `main` and the draft branches, then `main` is
fast-forwarded to `origin/main` (a compare-and-swap `update-ref`, then the
published checkout is brought up to it, as a publish does) and each draft
branch is created, or fast-forwarded, from origin's. The app pulls at most every
DASHMEM_CONFIG_PULL_SECONDS per process before a page run; `python -m lib
sync` pulls on demand.

Publish pushes before `main` moves here: under the main lock (so publishes on
one server take turns), the merge is made on `origin/main` as just fetched and
pushed with `--force-with-lease` naming that commit, so the remote moves only
from the commit the merge was made on (its atomic ref update is what makes two
servers safe). If another server published meanwhile the push is refused; the
publish fetches, merges again and retries, at most PUBLISH_TRIES times. Local
`main` therefore only ever follows origin: a pull is always a fast-forward.

An unreachable remote refuses the publish (nothing is published anywhere, the
draft is kept): publishing locally and pushing later would let this server
serve a `main` no other server has, and a later push could conflict with
nobody there to resolve it. Drafts are per person, so a save is committed here
whatever the remote says and pushed when it can be (now, or at the next pull).

These functions are the implementation of `lib.repo.configrepo.ConfigRepo`'s
sharing methods; `cr` is that ConfigRepo.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from pathlib import Path

import git

from ..core import settings
from . import branches, gitops
from .branches import ConfigRepo, Draft
from .gitops import Busy, ConfigRepoError, _git, cas_update_ref, forget_worktree, is_ancestor, rev, status, worktree_admin_dir
from .history import MAIN

_log = logging.getLogger(__name__)

REMOTE = "origin"
CONFIG_KEY = "dashmem.shared"  # in the repo's git config: the remote this repo is a replica of
PUBLISH_TRIES = 5  # pushes a publish tries while other servers keep publishing first
# A remote that accepts the connection and then stalls must not hold a page run (and the lock) for ever:
# git gives up on HTTP(S) after STALL_S seconds without a byte, and on SSH after as long without an answer.
STALL_S = 30
ABSENT = "0" * 40  # the old value that means "the ref must not exist yet"
FETCH_REFSPECS = (
    f"+refs/heads/{MAIN}:refs/remotes/{REMOTE}/{MAIN}",
    f"+refs/heads/draft/*:refs/remotes/{REMOTE}/draft/*",
    f"+refs/heads/rejected/*:refs/remotes/{REMOTE}/rejected/*",
)


class RemoteUnreachable(ConfigRepoError):
    """The shared config repo could not be reached (or refused us for a reason other than a race)."""


def check_url(url: str) -> str:
    """The remote's URL or path, refused when it could be taken for an option or holds a password."""
    try:
        return settings.git_remote_url(url)
    except ValueError as exc:
        raise ConfigRepoError(str(exc)) from None


def is_shared(path: Path) -> bool:
    """Whether the repo at `path` is marked a replica of its `origin` (one `git config` read)."""
    return _git(path, "config", "--get", CONFIG_KEY, ok=(0, 1)).stdout.strip() == REMOTE


# --------------------------------------------------------------------------- becoming a replica


def remote_main(url: str) -> str | None:
    """The commit `main` is at in the remote, or None when the remote has no `main` yet (a new, empty repo)."""
    try:
        out = _network(Path.cwd(), "ls-remote", "--heads", "--", url, f"refs/heads/{MAIN}").stdout
    except git.GitCommandError as exc:
        raise RemoteUnreachable(f"cannot reach the shared config repo {url}: {_first_line(exc)}") from None
    return out.split()[0] if out.strip() else None


def clone(url: str, target: Path) -> None:
    """Clone the shared remote's `main` into `target` (a new folder) and mark it a replica."""
    try:
        _network(target.parent, "clone", "-q", "--origin", REMOTE, "--branch", MAIN, "--", url, str(target))
    except git.GitCommandError as exc:
        raise RemoteUnreachable(f"cannot clone the shared config repo {url}: {_first_line(exc)}") from None
    mark(target, url)


def mark(path: Path, url: str) -> None:
    """Make `origin` the shared remote `url` and mark the repo a replica of it."""
    remotes = _git(path, "remote").stdout.split()
    _git(path, "remote", "set-url" if REMOTE in remotes else "add", REMOTE, url)
    _git(path, "config", CONFIG_KEY, REMOTE)


def push_new(path: Path, url: str) -> bool:
    """Push a just-created repo's `main` to an empty remote; False when another server created it first."""
    proc = _network(path, "push", "-q", "--porcelain", f"--force-with-lease=refs/heads/{MAIN}:", "--", url, f"refs/heads/{MAIN}:refs/heads/{MAIN}", ok=(0, 1))
    if proc.returncode == 0:
        return True
    if _rejected(proc):
        return False
    raise RemoteUnreachable(f"cannot push the new config repo to {url}: {_first_line(proc)}")


def attach(cr: ConfigRepo, url: str) -> list[str]:
    """Make an existing config repo a replica of `url` (or follow a changed URL); then pull (returns what it changed)."""
    with cr._lock():
        current = _git(cr.path, "remote", "get-url", REMOTE, ok=(0, 2, 128)).stdout.strip()
        if current != url or not cr.shared:
            if current and current != url:
                _log.warning("the config repo at %s now follows %s (its origin was %s)", cr.path, url, current)
            mark(cr.path, url)
        if remote_main(url) is None and not push_new(cr.path, url):  # a new, empty remote: this repo starts it
            _log.warning("another server started %s meanwhile; this server follows it", url)
    cr.shared = True
    return pull(cr)


# --------------------------------------------------------------------------- pulling


def fetch(cr: ConfigRepo) -> None:
    """Fetch `main`, the drafts and the rejected drafts from origin (pruning those origin no longer has)."""
    try:
        _network(cr.path, "fetch", "-q", "--prune", "--no-tags", REMOTE, *FETCH_REFSPECS)
    except git.GitCommandError as exc:
        raise RemoteUnreachable(f"cannot reach the shared config repo ({remote_url(cr)}): {_first_line(exc)}") from None


def pull(cr: ConfigRepo, wait: float = 15.0) -> list[str]:
    """Fetch, fast-forward `main` and the drafts to origin's; returns what changed here, in words.

    Raises RemoteUnreachable (nothing here changed) or Busy (a publish held the lock longer than `wait`).
    """
    with cr._lock(timeout=wait):
        before = _tracking(cr)
        fetch(cr)
        done = follow_main(cr)
    done += follow_drafts(cr, before)
    return done


def pull_if_due(cr: ConfigRepo, every_s: float) -> list[str]:
    """`pull`, at most once every `every_s` seconds in this process, and by one thread at a time.

    For serving: a remote that cannot be reached, or a publish holding the
    lock, leaves the page to be served from what this server has (logged).
    """
    now = time.monotonic()
    if now - cr._last_pull < every_s or not cr._pulling.acquire(blocking=False):
        return []
    try:
        if now - cr._last_pull < every_s:  # another thread pulled meanwhile
            return []
        last, cr._last_pull = cr._last_pull, now
        try:
            return pull(cr, wait=0)
        except Busy:
            cr._last_pull = last  # a publish is under way here; it pulls itself, so try again on the next page run
            return []
        except ConfigRepoError as exc:
            _log.warning("serving what this server has: %s", exc)
            return []
    finally:
        cr._pulling.release()


def follow_main(cr: ConfigRepo) -> list[str]:
    """Bring local `main` (and the published checkout) to `origin/main`. Call under the main lock, after a fetch."""
    theirs = _tracking_sha(cr, MAIN)
    ours = rev(cr.path, f"refs/heads/{MAIN}")
    if theirs is None or theirs == ours:
        return []
    if is_ancestor(cr.path, theirs, ours):
        # Only a repo that published before it became a replica gets here: offer what it has.
        push_main(cr, ours, theirs)
        return [f"pushed {MAIN} {ours[:10]}, published here before this server shared its config repo"]
    done = []
    if not is_ancestor(cr.path, ours, theirs):
        # Someone rewrote origin's history by hand: follow it, keeping what this server had.
        kept = f"diverged/{MAIN}/{_stamp()}"
        _git(cr.path, "branch", kept, ours)
        done.append(f"{MAIN} here and on origin had diverged; kept this server's as {kept}")
    cr._repair_served()
    cas_update_ref(cr.path, f"refs/heads/{MAIN}", theirs, ours, f"dashmem: pull {MAIN} from {REMOTE}")
    cr._follow_main()
    return done + [f"{MAIN} {ours[:10]} -> {theirs[:10]}"]


def follow_drafts(cr: ConfigRepo, before: dict[str, str]) -> list[str]:
    """Create or fast-forward each draft branch from origin's; push those only this server has moved on.

    A draft that origin no longer has, and that was last seen there at the
    commit this server has, was rejected on another server: it is renamed here
    too (as there, never deleted). Drafts changed on two servers since they
    last met are left as they are, both kept, and said so.
    """
    done = []
    after = _tracking(cr)
    for name, theirs in after.items():
        if name.startswith("draft/") and _branch(cr, name) != theirs:
            try:
                done += _follow_draft(cr, name, theirs)
            except git.GitCommandError as exc:  # another process here moved it meanwhile: the next pull looks again
                _log.warning("left the draft %s for the next pull: %s", name, _first_line(exc))
    for name, seen in before.items():
        parsed = branches.parse_draft(name)
        if parsed is None or name in after or _branch(cr, name) != seen:
            continue
        kept = next((r for r, sha in after.items() if r.startswith(f"rejected/{parsed[0]}/{parsed[1]}/") and sha == seen), None)
        if kept is not None:
            try:
                branches.reject_here(cr, parsed[0], parsed[1], name, kept)
                done.append(f"{name} was rejected on another server (kept as {kept})")
            except git.GitCommandError as exc:
                _log.warning("left the draft %s, rejected on another server, for the next pull: %s", name, _first_line(exc))
    for name in drafts_only_here(cr, after):
        if push_draft(cr, name):
            done.append(f"pushed {name}")
    return done


def _follow_draft(cr: ConfigRepo, name: str, theirs: str) -> list[str]:
    """Bring one draft branch here to origin's `theirs` (or origin to ours, when only ours moved on)."""
    ours = _branch(cr, name)
    if ours is None:
        cas_update_ref(cr.path, f"refs/heads/{name}", theirs, ABSENT, f"dashmem: pull {name} from {REMOTE}")
        _check_out(cr, name)
        return [f"new draft {name}"]
    if is_ancestor(cr.path, ours, theirs):
        return _fast_forward_draft(cr, name, ours, theirs)
    if is_ancestor(cr.path, theirs, ours):
        return [f"pushed {name}"] if push_draft(cr, name) else []
    _log.warning("the draft %s was changed here and on another server; both are kept (%s here, %s on %s)", name, ours[:10], theirs[:10], REMOTE)
    return [f"{name} differs here and on {REMOTE}; both kept"]


def drafts_only_here(cr: ConfigRepo, tracking: dict[str, str]) -> list[str]:
    """Draft branches origin never had: saved here while the remote could not be reached (or before sharing)."""
    return [name for name in gitops.branch_heads(cr._git_dir, "draft/") if name not in tracking and not _in_main(cr, name)]


def _check_out(cr: ConfigRepo, name: str) -> None:
    """Check a draft pulled from another server out here, as where it was made, so Review can run its checks."""
    user, slug = branches.parse_draft(name) or ("", "")
    where = branches.worktree(cr, user, slug)
    try:
        with cr._lock(timeout=0), cr._lock(Draft(user, slug, name, where), timeout=0):
            if worktree_admin_dir(where) is None:
                forget_worktree(cr.path, cr._git_dir, where)
                where.parent.mkdir(parents=True, exist_ok=True)
                _git(cr.path, "worktree", "add", "-q", str(where), name)
    except Busy:
        pass  # checked out when it is next opened


def _fast_forward_draft(cr: ConfigRepo, name: str, ours: str, theirs: str) -> list[str]:
    user, slug = branches.parse_draft(name) or ("", "")
    where = branches.worktree(cr, user, slug)
    if worktree_admin_dir(where) is None:
        cas_update_ref(cr.path, f"refs/heads/{name}", theirs, ours, f"dashmem: pull {name} from {REMOTE}")
        return [f"{name} {ours[:10]} -> {theirs[:10]}"]
    draft = Draft(user, slug, name, where)
    try:
        with cr._lock(draft, timeout=0), branches.writing(cr, draft, "pull"):
            if status(where, untracked=False):  # files changed by hand in the draft: theirs, not ours to overwrite
                return [f"{name} left at {ours[:10]}: its folder has changes not saved"]
            _git(where, "merge", "--ff-only", "-q", theirs)
    except Busy:
        return [f"{name} left for the next pull: it is being written"]
    return [f"{name} {ours[:10]} -> {theirs[:10]}"]


# --------------------------------------------------------------------------- pushing


def push_main(cr: ConfigRepo, new: str, old: str) -> bool:
    """Move origin's `main` from `old` to `new`; False when origin is no longer at `old` (another server published).

    `--force-with-lease` with the expected commit is a compare-and-swap on the
    remote: it refuses unless `main` there is still `old`, atomically.
    """
    proc = _network(
        cr.path,
        "push",
        "-q",
        "--porcelain",
        f"--force-with-lease=refs/heads/{MAIN}:{old}",
        REMOTE,
        f"{new}:refs/heads/{MAIN}",
        ok=(0, 1),
    )
    if proc.returncode == 0:
        return True
    if _rejected(proc):
        return False
    # Refused on the remote's side: its ref update (a compare-and-swap there too) fails when another server's
    # push got in between our lease check and it. Only origin's `main` having moved says it was that race.
    fetch(cr)
    if _tracking_sha(cr, MAIN) != old:
        return False
    raise RemoteUnreachable(f"cannot push to the shared config repo ({remote_url(cr)}): {_first_line(proc)}")


def push_draft(cr: ConfigRepo, branch: str) -> bool:
    """Push a draft branch (a fast-forward only, so a newer save on another server is never overwritten).

    Best effort: the draft is saved here whatever happens, and the next pull
    pushes it again; returns whether origin has it now.
    """
    proc = _network(cr.path, "push", "-q", "--porcelain", REMOTE, f"refs/heads/{branch}:refs/heads/{branch}", ok=(0, 1, 128))
    if proc.returncode != 0:
        _log.warning("the draft %s is saved on this server only for now: %s", branch, _first_line(proc))
        return False
    _git(cr.path, "update-ref", f"refs/remotes/{REMOTE}/{branch}", f"refs/heads/{branch}")
    return True


def push_rejected(cr: ConfigRepo, branch: str, kept: str, sha: str) -> None:
    """Share an owner's reject: origin keeps the draft as `kept` and drops `branch`, in one atomic push."""
    proc = _network(
        cr.path,
        "push",
        "-q",
        "--porcelain",
        "--atomic",
        f"--force-with-lease=refs/heads/{branch}",
        REMOTE,
        f"{sha}:refs/heads/{kept}",
        f":refs/heads/{branch}",
        ok=(0, 1, 128),
    )
    if proc.returncode != 0:
        _log.warning("rejected %s on this server only for now (the other servers still list it): %s", branch, _first_line(proc))


# --------------------------------------------------------------------------- small helpers


def _network(cwd: Path, *args: str, ok: tuple[int, ...] = (0,)):
    """A git command that talks to the remote, bounded when the remote stalls (see STALL_S).

    An operator's own GIT_SSH_COMMAND (or GIT_SSH) is kept; ours only adds timeouts to plain ssh.
    """
    import os

    env = {}
    if not (os.environ.get("GIT_SSH_COMMAND") or os.environ.get("GIT_SSH")):
        env["GIT_SSH_COMMAND"] = f"ssh -o BatchMode=yes -o ConnectTimeout={STALL_S} -o ServerAliveInterval={STALL_S} -o ServerAliveCountMax=1"
    guard = ("-c", "http.lowSpeedLimit=1", "-c", f"http.lowSpeedTime={STALL_S}")
    return _git(cwd, *guard, *args, env=env, ok=ok)


def remote_url(cr: ConfigRepo) -> str:
    return _git(cr.path, "remote", "get-url", REMOTE, ok=(0, 2, 128)).stdout.strip() or REMOTE


def _tracking(cr: ConfigRepo) -> dict[str, str]:
    """Branch name on origin -> commit, as last fetched."""
    out = _git(cr.path, "for-each-ref", "--format=%(objectname) %(refname)", f"refs/remotes/{REMOTE}/").stdout
    prefix = f"refs/remotes/{REMOTE}/"
    return {ref[len(prefix) :]: sha for sha, _, ref in (line.partition(" ") for line in out.splitlines()) if ref.startswith(prefix)}


def _tracking_sha(cr: ConfigRepo, name: str) -> str | None:
    proc = _git(cr.path, "rev-parse", "--verify", "-q", f"refs/remotes/{REMOTE}/{name}^{{commit}}", ok=(0, 1))
    return proc.stdout.strip() or None


def _branch(cr: ConfigRepo, name: str) -> str | None:
    return gitops.branch_sha(cr._git_dir, name)


def _in_main(cr: ConfigRepo, name: str) -> bool:
    """Whether the draft's commits are all in origin's `main` (then it has nothing of its own to share)."""
    main = _tracking_sha(cr, MAIN)
    sha = _branch(cr, name)
    return bool(main and sha and is_ancestor(cr.path, sha, main))


def _rejected(proc) -> bool:
    """Whether a `push --porcelain` failed because the remote ref moved (a race), not because it cannot be reached."""
    return any(line.startswith("!") and ("stale info" in line or "fetch first" in line or "non-fast-forward" in line) for line in proc.stdout.splitlines())


def _first_line(failure) -> str:
    """What git said went wrong, in one line: a push's refusal as it reported it, else its first error line."""
    refused = [line.split("\t")[-1].strip() for line in (getattr(failure, "stdout", "") or "").splitlines() if line.startswith("!")]
    if refused:
        return refused[0]  # e.g. "[remote rejected] (pre-receive hook declined)"
    text = (getattr(failure, "stderr", "") or "").strip() or (getattr(failure, "stdout", "") or "").strip()
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("hint:")]
    return next((line for line in lines if line.startswith(("fatal:", "error:", "!"))), lines[0] if lines else "git failed")


def _stamp() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
