"""Scheduled refresh: a workspace's `refresh: {every: 1h}` and `python -m lib refresh --all`.

cron or a systemd timer runs `refresh --all` on the app's config repo. It refreshes every published workspace,
one after another, into the same cache the app serves (`Warehouse.for_workspace`, keyed by the published
folder), so the app shows what cron loaded. The last successful refresh is the warehouse's CHECKED record
(a symlink replaced atomically by `refresh`), which any process reads: the Dashboard page judges the next
refresh and staleness from it, against a clock callers pass as `now`.

One `--all` run at a time per config repo: a second one while the first is going exits at once
(`RefreshBusy`) rather than waiting. The running one is already refreshing the same workspaces, so a queued
run would only repeat the work right after it; and when a source hangs, waiting runs from every cron tick
would pile up behind it. The lock is an flock, so a killed run never leaves it held.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..core import settings
from ..core.errors import DashmemError
from ..data.refresh import refresh
from ..data.snapshots import Warehouse
from ..memory import workspace
from ..memory.intervals import parse_every, show_interval
from ..repo.configrepo import ConfigRepo
from ..repo.gitops import ConfigRepoError
from ..roles.access import OPERATOR

_log = logging.getLogger(__name__)


class RefreshBusy(DashmemError, RuntimeError):
    """Another `refresh --all` of the same config repo is running; this one refreshed nothing."""


def every_of(meta: Mapping[str, Any] | None, where: str = "workspace.yaml: refresh.every") -> dt.timedelta | None:
    """The workspace's refresh interval (workspace.yaml's `refresh.every`), None when it has no schedule."""
    declared = (meta or {}).get("refresh")
    if not isinstance(declared, Mapping) or "every" not in declared:
        return None
    return parse_every(declared["every"], where)


@dataclass(frozen=True)
class Schedule:
    """A workspace's schedule as seen at `now`: when it was last refreshed successfully, when it is next due."""

    every: dt.timedelta | None
    last_success: dt.datetime | None
    now: dt.datetime

    @property
    def next_due(self) -> dt.datetime | None:
        """Last success + every; None without a schedule. Never refreshed: due now."""
        if self.every is None:
            return None
        return self.now if self.last_success is None else self.last_success + self.every

    @property
    def due(self) -> bool:
        """Whether a scheduled run should refresh it now (a workspace without a schedule always is)."""
        next_due = self.next_due
        return next_due is None or next_due <= self.now

    @property
    def stale(self) -> bool:
        """The last successful refresh is older than the interval (or there was none)."""
        if self.every is None:
            return False
        return self.last_success is None or self.now - self.last_success > self.every

    def next_text(self) -> str | None:
        """What the Dashboard page says about the next refresh, in the server's time zone."""
        next_due = self.next_due
        if self.every is None or next_due is None:
            return None
        every = show_interval(self.every)
        if self.last_success is None:
            return f"Refreshed every {every}: not refreshed successfully yet, due now"
        when = f"{next_due.astimezone():%Y-%m-%d %H:%M}"
        if next_due <= self.now:
            return f"Refreshed every {every}: the next scheduled refresh was due at {when}"
        return f"Refreshed every {every}: next scheduled refresh at {when}"

    def stale_text(self) -> str | None:
        """The stale-data badge's words, None when the data is fresh or there is no schedule."""
        if not self.stale or self.every is None:
            return None
        if self.last_success is None:
            return "Stale data: never refreshed successfully"
        return f"Stale data: last successful refresh {_ago(self.now - self.last_success)} ago, schedule every {show_interval(self.every)}"


def _ago(delta: dt.timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    if minutes < 120:
        return f"{minutes} min"
    if minutes < 48 * 60:
        return f"{minutes // 60} h"
    return f"{minutes // (24 * 60)} d"


def status(meta: Mapping[str, Any] | None, last_success: dt.datetime | None, now: dt.datetime | None = None) -> Schedule:
    """The schedule of a workspace (its workspace.yaml `meta`) whose last successful refresh was `last_success`."""
    return Schedule(every_of(meta), last_success, now or utcnow())


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


# --------------------------------------------------------------------------- refresh --all


@dataclass
class Outcome:
    """One workspace's line in the summary."""

    workspace: str
    status: str  # refreshed | unchanged | failed | not due
    rows: int | None = None  # rows served after the run, all tables together
    seconds: float = 0.0
    message: str = ""
    next_due: str | None = None  # ISO 8601 UTC, workspaces with a schedule


@dataclass
class RunSummary:
    repo: str
    outcomes: list[Outcome] = field(default_factory=list)
    note: str = ""  # why the app may not serve what this run loaded (another cache)
    pulled: list[str] = field(default_factory=list)  # what the pull before the run brought from the shared remote, in words

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == "failed"]

    @property
    def ok(self) -> bool:
        return not self.failed

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "repo": self.repo, "note": self.note, "pulled": self.pulled, "workspaces": [asdict(o) for o in self.outcomes]}

    def table(self) -> str:
        header = ("workspace", "status", "rows", "seconds", "message")
        rows = [(o.workspace, o.status, "-" if o.rows is None else f"{o.rows:,}", f"{o.seconds:.2f}", o.message) for o in self.outcomes]
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
        lines = ["  ".join(cell.ljust(w) if i != 2 else cell.rjust(w) for i, (cell, w) in enumerate(zip(r[:4], widths))) + "  " + r[4] for r in [header, *rows]]
        counts = {s: sum(1 for o in self.outcomes if o.status == s) for s in ("refreshed", "unchanged", "not due", "failed")}
        lines.append(f"{len(self.outcomes)} workspace(s): " + ", ".join(f"{n} {s}" for s, n in counts.items()))
        return "\n".join(line.rstrip() for line in lines)


def refresh_all(repo_path: Path, *, due_only: bool = False, now: dt.datetime | None = None) -> RunSummary:
    """Refresh every published workspace of the config repo at `repo_path`, one at a time.

    A workspace that fails is reported and the others are still refreshed. With
    `due_only`, a workspace whose schedule is not yet due is left alone. Raises
    RefreshBusy at once when another run holds the repo's lock.

    A config repo several app servers share (lib.repo.replica) is pulled first, so
    the run refreshes what was published on any of them; when the remote cannot
    be reached, it refreshes what this server has and says so in the note.
    """

    repo = ConfigRepo(Path(repo_path))
    summary = RunSummary(repo=str(repo.path), note=cache_note(repo.path))
    with run_lock(repo.path):
        if repo.shared:
            try:
                summary.pulled = repo.pull()
            except ConfigRepoError as exc:
                _log.warning("refresh --all without a pull: %s", exc)
                summary.note = "; ".join(n for n in (summary.note, f"refreshed what this server has: {exc}") if n)
        budget_s = settings.get("DASHMEM_REFRESH_BUDGET_S")
        for slug in repo.slugs():
            summary.outcomes.append(_within_budget(repo.published_path(slug), due_only, now, budget_s))
    return summary


def _within_budget(ws_path: Path, due_only: bool, now: dt.datetime | None, budget_s: float) -> Outcome:
    """One workspace's refresh, waited for at most `budget_s` (DASHMEM_REFRESH_BUDGET_S).

    Past it, the workspace is reported failed with what it was doing, and the run goes on with the others and
    ends, releasing its lock; the refresh left behind runs in a daemon thread, which the run's exit stops. A
    refresh stopped at any point keeps the data served before (a switch is one rename, lib.data.snapshots),
    as after a kill; the next run tries it again."""
    done: list[Outcome] = []
    doing = ["starting"]

    def progress(fraction: float, message: str) -> None:
        doing[0] = message.rstrip("…").strip()
        doing[0] = doing[0][:1].lower() + doing[0][1:]

    worker = threading.Thread(target=lambda: done.append(_refresh_one(ws_path, due_only, now, progress)), name=f"refresh {ws_path.name}", daemon=True)
    started = time.perf_counter()
    worker.start()
    worker.join(budget_s)
    if done:
        return done[0]
    _log.error("refresh --all: %s still running after %g s (%s); going on without it", ws_path.name, budget_s, doing[0])
    return Outcome(
        workspace=ws_path.name,
        status="failed",
        seconds=time.perf_counter() - started,
        message=f"stopped waiting after {budget_s:g} s (DASHMEM_REFRESH_BUDGET_S) while {doing[0]}; kept the previous data, the next run tries again",
    )


def _refresh_one(ws_path: Path, due_only: bool, now: dt.datetime | None, progress=None) -> Outcome:

    outcome = Outcome(workspace=ws_path.name, status="failed")
    started = time.perf_counter()
    wh = Warehouse.for_workspace(ws_path)
    try:
        ws, _ = workspace.load(ws_path, readonly=True)
        meta = ws.get("workspace")
        where = f"{ws_path.name}/{workspace.FILES['workspace']}: refresh.every"
        before = Schedule(every_of(meta, where), wh.last_checked(), now or utcnow())
        if due_only and not before.due:
            outcome.status, outcome.message = "not due", f"next refresh due at {_iso(before.next_due)}"
            outcome.next_due = _iso(before.next_due)
        else:
            report = refresh(ws_path, wh, user=OPERATOR, now=now, progress=progress)
            outcome.status = "failed" if not report.ok else "refreshed" if report.swapped else "unchanged"
            outcome.message = _what_went_wrong(report) if not report.ok else f"serving snapshot {report.served}"
            after = Schedule(before.every, wh.last_checked(), now or utcnow())
            outcome.next_due = _iso(after.next_due) if after.every else None
    except DashmemError as exc:
        outcome.message = str(exc)
    except Exception as exc:  # one broken workspace never stops the others; the log has the traceback
        _log.exception("refresh --all: %s failed", ws_path.name)
        first = (str(exc).strip().splitlines() or [""])[0]
        outcome.message = f"{type(exc).__name__}{': ' + first if first else ''}"
    current = wh.current()
    outcome.rows = sum(t["rows"] for t in current.tables.values()) if current else None
    outcome.seconds = time.perf_counter() - started
    return outcome


def _what_went_wrong(report) -> str:
    parts = [f"{s.name}: {s.message or s.status}" for s in report.sources if s.status != "ok"]
    parts += report.dashboard_errors
    if report.write_error:
        parts.append(report.write_error)
    kept = "kept the previous data" if report.previous else "no data loaded"
    return f"{kept}: " + "; ".join(parts) if parts else report.headline()


def _iso(when: dt.datetime | None) -> str | None:
    return when.astimezone(dt.timezone.utc).isoformat(timespec="seconds") if when else None


def cache_note(repo_path: Path) -> str:
    """Why the app would not serve what a refresh of `repo_path` loads, or "" when it would."""
    if settings.setting("DASHMEM_CACHE_DIR").is_set() or Path(repo_path).resolve() == settings.config_repo_path().resolve():
        return ""
    return (
        f"{repo_path} is not the app's config repo (DASHMEM_CONFIG_REPO is {settings.config_repo_path()}), so its data "
        "goes to your own cache, which the app does not serve; set DASHMEM_CONFIG_REPO (or DASHMEM_CACHE_DIR) as the app has it"
    )


def lock_path(repo_path: Path) -> Path:
    repo_path = Path(repo_path).resolve()
    digest = hashlib.sha256(str(repo_path).encode()).hexdigest()[:10]
    return settings.cache_dir_for(repo_path) / f"refresh-all-{repo_path.name}-{digest}.lock"


@contextmanager
def run_lock(repo_path: Path) -> Iterator[None]:
    """Hold the config repo's `refresh --all` lock, or raise RefreshBusy at once (see the module's note)."""
    path = lock_path(repo_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip()
            raise RefreshBusy(
                f"another `refresh --all` of {repo_path} is running ({holder or 'process unknown'}); "
                "this run refreshed nothing and stops, the running one refreshes every workspace"
            ) from None
        try:
            handle.truncate(0)
            handle.write(f"process {os.getpid()}, started {utcnow().isoformat(timespec='seconds')}")
            handle.flush()
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
