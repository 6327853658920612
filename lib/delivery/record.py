"""What was delivered: a SQLite file beside the workspace's snapshots in the cache (never in git).

A delivery is claimed before it is sent (a row for workspace, what, slot and recipient, status `sending`);
a second run at the same time finds the row and sends nothing. A failed one is marked `failed` with the
reason and is claimed again by the next run; one a killed run left `sending` is not sent again (at most once).
An alert's state (does its condition hold, since which load) is kept per alert, row scope and subject.
A person's own choice about a subscription (send it to me too, or not to me) is kept here as well: it is
theirs, not the workspace's memory, so a viewer makes it without a change to workspace.yaml.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS deliveries (
    what TEXT NOT NULL, slot TEXT NOT NULL, recipient TEXT NOT NULL,
    status TEXT NOT NULL, snapshot TEXT, detail TEXT, at TEXT NOT NULL,
    PRIMARY KEY (what, slot, recipient)
);
CREATE TABLE IF NOT EXISTS choices (
    subscription TEXT NOT NULL, user TEXT NOT NULL, choice TEXT NOT NULL, at TEXT NOT NULL,
    PRIMARY KEY (subscription, user)
);
CREATE TABLE IF NOT EXISTS alert_states (
    alert TEXT NOT NULL, scope TEXT NOT NULL, subject TEXT NOT NULL,
    holds INTEGER NOT NULL, since TEXT, snapshot TEXT,
    PRIMARY KEY (alert, scope, subject)
);
"""


@dataclass(frozen=True)
class Delivery:
    what: str
    slot: str
    recipient: str
    status: str  # sending | sent | failed | skipped
    snapshot: str | None
    detail: str
    at: str


_READY: set[Path] = set()  # files this process has made sure of the tables of (WAL mode is kept in the file)


class Record:
    def __init__(self, path: Path):
        self.path = Path(path)

    @contextlib.contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        if self.path not in _READY:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        try:
            if self.path not in _READY:
                db.execute("PRAGMA journal_mode=WAL")
                db.executescript(SCHEMA)
                _READY.add(self.path)
            yield db
        finally:
            db.close()

    def due(self, what: str, slot: str, recipients: list[str]) -> list[str]:
        """Those of `recipients` the delivery has not gone to yet (no row, or a failed one), without taking it."""
        if not self.path.exists():
            return list(recipients)
        with self._db() as db:
            gone = {r for (r,) in db.execute("SELECT recipient FROM deliveries WHERE what=? AND slot=? AND status != 'failed'", (what, slot))}
        return [r for r in recipients if r not in gone]

    def claim(self, what: str, slot: str, recipient: str, snapshot: str | None) -> bool:
        """Take the delivery for this run: True when nobody sent or is sending it (a failed one is taken again)."""
        now = _now()
        with self._db() as db:
            db.execute("BEGIN IMMEDIATE")
            row = db.execute("SELECT status FROM deliveries WHERE what=? AND slot=? AND recipient=?", (what, slot, recipient)).fetchone()
            if row is not None and row[0] != "failed":
                db.execute("COMMIT")
                return False
            db.execute(
                "INSERT OR REPLACE INTO deliveries VALUES (?, ?, ?, 'sending', ?, '', ?)",
                (what, slot, recipient, snapshot, now),
            )
            db.execute("COMMIT")
            return True

    def done(self, what: str, slot: str, recipient: str, status: str, detail: str = "") -> None:
        with self._db() as db:
            db.execute(
                "UPDATE deliveries SET status=?, detail=?, at=? WHERE what=? AND slot=? AND recipient=?", (status, detail, _now(), what, slot, recipient)
            )

    def deliveries(self, limit: int = 200) -> list[Delivery]:
        """The newest deliveries first."""
        if not self.path.exists():
            return []
        with self._db() as db:
            rows = db.execute("SELECT what, slot, recipient, status, snapshot, detail, at FROM deliveries ORDER BY at DESC LIMIT ?", (limit,)).fetchall()
        return [Delivery(*row) for row in rows]

    def choose(self, subscription: str, user: str, choice: str | None) -> None:
        """`user` wants `subscription` ("in"), does not ("out"), or leaves it to its `to:` (None)."""
        with self._db() as db:
            if choice is None:
                db.execute("DELETE FROM choices WHERE subscription=? AND user=?", (subscription, user))
            else:
                db.execute("INSERT OR REPLACE INTO choices VALUES (?, ?, ?, ?)", (subscription, user, choice, _now()))

    def choices(self, subscription: str) -> dict[str, str]:
        """user -> "in" or "out", for those who chose."""
        if not self.path.exists():
            return {}
        with self._db() as db:
            return dict(db.execute("SELECT user, choice FROM choices WHERE subscription=?", (subscription,)).fetchall())

    def turn(self, alert: str, scope: str, subject: str, holds: bool, snapshot: str) -> tuple[bool, str]:
        """Record whether the alert's condition holds now: (whether that changed, the load it changed on). A first
        evaluation that holds counts as a change, one that does not hold as none; the caller tells the recipients
        of a change, and tries again those it failed to tell (`retry`) while the state lasts."""
        with self._db() as db:
            db.execute("BEGIN IMMEDIATE")
            row = db.execute("SELECT holds, snapshot FROM alert_states WHERE alert=? AND scope=? AND subject=?", (alert, scope, subject)).fetchone()
            changed = (row is None and holds) or (row is not None and bool(row[0]) != holds)
            if row is None or changed:
                db.execute("INSERT OR REPLACE INTO alert_states VALUES (?, ?, ?, ?, ?, ?)", (alert, scope, subject, int(holds), _now(), snapshot))
                row = (int(holds), snapshot)
            db.execute("COMMIT")
            return changed, row[1]

    def retry(self, what: str, slot: str, recipient: str) -> bool:
        """Take a delivery that failed before for this run: True only for one marked `failed`."""
        with self._db() as db:
            db.execute("BEGIN IMMEDIATE")
            row = db.execute("SELECT status FROM deliveries WHERE what=? AND slot=? AND recipient=?", (what, slot, recipient)).fetchone()
            if row is None or row[0] != "failed":
                db.execute("COMMIT")
                return False
            db.execute("UPDATE deliveries SET status='sending', at=? WHERE what=? AND slot=? AND recipient=?", (_now(), what, slot, recipient))
            db.execute("COMMIT")
            return True

    def holding(self) -> list[tuple[str, str, str, str | None]]:
        """(alert, scope, subject, since) of every alert whose condition holds now."""
        if not self.path.exists():
            return []
        with self._db() as db:
            return db.execute("SELECT alert, scope, subject, since FROM alert_states WHERE holds=1 ORDER BY since").fetchall()


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
