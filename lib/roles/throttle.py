"""Guessed passwords slowed down: failed sign-ins counted per user name and per client address.

Without it, anyone could try a password every fraction of a second for as long as they liked (issue #29).
The policy, in numbers (`BY_NAME`, `BY_CLIENT`):

- **Per user name**, whoever tries it: the first `BY_NAME.free` failures in a row cost nothing; from then on
  each failure makes the name wait before the next try, 5 s and doubling, but never more than a minute. A
  stranger therefore cannot lock the real user out for long, and the real user, signing in from an address
  where they signed in before (`KNOWN_FOR`), is not held by failures of that name at all: only their own
  address's count applies to them there.
- **Per client address**, whatever the names: `BY_CLIENT.free` failures, then 10 s doubling up to 5 minutes.
  This only slows whoever fails from that address, so it may grow longer.
- A refused try checks no password (no bcrypt, and it does not count as another failure); a name with no
  account is counted like any other, so the answers do not tell which names exist. A correct password clears
  the name's count (never the address's: signing in to one's own account must not buy more guesses at
  another's). Failures are forgotten after `FORGET_AFTER` with none since.

The client address is the TCP peer Streamlit saw (`st.context.ip_address`), which is None on loopback, e.g.
behind a reverse proxy on the same machine: then only the name is counted.

The counts are a small SQLite file in the app's cache folder (`PATH_IN_CACHE`), so they hold across the
sessions of a server, its processes and restarts (and several servers on one cache folder share them);
SQLite's locking keeps concurrent updates whole. A wall clock set back never makes a wait longer than its limit.
If the file cannot be used, sign-in is not refused for it: the problem is logged and the broken file set aside.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import sqlite3
import time
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from ..core import settings

_log = logging.getLogger(__name__)

PATH_IN_CACHE = "sign-in-failures.sqlite3"
FORGET_AFTER = 15 * 60  # seconds without a failure after which a count starts again from nothing
KNOWN_FOR = 30 * 86400  # an address a user signed in from is theirs, for the name's count, this long
LONGEST_NAME = 200  # characters of a typed name kept as its key (what anyone may type is bounded)

NAME, CLIENT = "name", "client"


@dataclass(frozen=True)
class Limit:
    """Failures in a row allowed for free, then a wait that doubles from `first_wait` up to `longest_wait` seconds."""

    free: int
    first_wait: float
    longest_wait: float

    def wait_after(self, failures: int) -> float:
        """Seconds to wait after the `failures`-th failure in a row (0 while they are free)."""
        if failures < self.free:
            return 0.0
        return min(self.longest_wait, self.first_wait * 2 ** min(failures - self.free, 32))


BY_NAME = Limit(free=5, first_wait=5, longest_wait=60)
BY_CLIENT = Limit(free=10, first_wait=10, longest_wait=300)
LIMITS = {NAME: BY_NAME, CLIENT: BY_CLIENT}


@dataclass(frozen=True)
class Wait:
    """A sign-in refused for now: by which count (`NAME` or `CLIENT`) and for how many more seconds."""

    by: str
    seconds: float

    def message(self) -> str:
        where = "for this name" if self.by == NAME else "from your address"
        return f"Too many failed sign-ins {where}; try again in {max(1, math.ceil(self.seconds))} s."


SCHEMA = """
CREATE TABLE IF NOT EXISTS failures (
    kind TEXT NOT NULL, key TEXT NOT NULL, count INTEGER NOT NULL, last REAL NOT NULL, until REAL NOT NULL,
    PRIMARY KEY (kind, key));
CREATE TABLE IF NOT EXISTS known (name TEXT NOT NULL, client TEXT NOT NULL, last REAL NOT NULL, PRIMARY KEY (name, client));
"""


class Throttle:
    """The failure counts in the SQLite file at `path` (created on first use)."""

    def __init__(self, path: Path):
        self.path = Path(path)

    @classmethod
    def for_app(cls) -> Throttle:
        """The counts every session and process of this app shares, in its cache folder (DASHMEM_CACHE_DIR)."""
        return cls(settings.cache_dir() / PATH_IN_CACHE)

    def wait(self, name: str, client: str | None, now: float | None = None) -> Wait | None:
        """Whether a sign-in as `name` from `client` must wait now (checked before any password)."""
        now = time.time() if now is None else now
        client = client_key(client)
        try:
            with closing(self._connect()) as db:
                waits = [Wait(kind, _left(until, now, LIMITS[kind])) for kind, until in self._locks(db, name, client, now)]
        except sqlite3.Error:
            _log.exception("sign-in throttle: cannot read %s; this sign-in is not slowed down", self.path)
            return None
        longest = max(waits, key=lambda w: w.seconds, default=None)
        if longest is not None:
            _log.info(
                "sign-in as %r from %s refused for %.0f s more (too many failures %s)",
                name,
                client or "loopback",
                longest.seconds,
                "of the name" if longest.by == NAME else "from the address",
            )
        return longest

    def failed(self, name: str, client: str | None, now: float | None = None) -> Wait | None:
        """Count a failed sign-in; the wait it starts, if it starts one (logged)."""
        now = time.time() if now is None else now
        client = client_key(client)
        started: list[Wait] = []
        try:
            with closing(self._connect()) as db, db:  # one transaction: two processes never lose each other's count
                db.execute("BEGIN IMMEDIATE")
                for kind, key in _keys(name, client):
                    row = db.execute("SELECT count, last FROM failures WHERE kind = ? AND key = ?", (kind, key)).fetchone()
                    count = 1 if row is None or now - row[1] > FORGET_AFTER else row[0] + 1
                    wait = LIMITS[kind].wait_after(count)
                    db.execute("INSERT OR REPLACE INTO failures VALUES (?, ?, ?, ?, ?)", (kind, key, count, now, now + wait))
                    if wait:
                        started.append(Wait(kind, wait))
                        _log.warning(
                            "sign-in: %d failures in a row %s %r; the next try waits %.0f s", count, "for the name" if kind == NAME else "from", key, wait
                        )
                db.execute("DELETE FROM failures WHERE last < ? AND until < ?", (now - FORGET_AFTER, now))
        except sqlite3.Error:
            _log.exception("sign-in throttle: cannot write %s; this failure is not counted", self.path)
            return None
        return max(started, key=lambda w: w.seconds, default=None)

    def succeeded(self, name: str, client: str | None, now: float | None = None) -> None:
        """A correct password: the name's count starts again, and `client` is an address this user signs in from."""
        now = time.time() if now is None else now
        client = client_key(client)
        try:
            with closing(self._connect()) as db, db:
                db.execute("BEGIN IMMEDIATE")
                db.execute("DELETE FROM failures WHERE kind = ? AND key = ?", (NAME, _name_key(name)))
                if client:
                    db.execute("INSERT OR REPLACE INTO known VALUES (?, ?, ?)", (_name_key(name), client, now))
                    db.execute("DELETE FROM known WHERE last < ?", (now - KNOWN_FOR,))
        except sqlite3.Error:
            _log.exception("sign-in throttle: cannot write %s; the failures of %r are not cleared", self.path, name)

    # ----------------------------------------------------------------------- the file

    def _locks(self, db: sqlite3.Connection, name: str, client: str | None, now: float) -> list[tuple[str, float]]:
        """(kind, until) of each count of this sign-in still waiting; the name's is waived on an address the user signed in from."""
        locks = []
        for kind, key in _keys(name, client):
            row = db.execute("SELECT until FROM failures WHERE kind = ? AND key = ? AND until > ?", (kind, key, now)).fetchone()
            if row is None:
                continue
            if (
                kind == NAME
                and client
                and db.execute("SELECT 1 FROM known WHERE name = ? AND client = ? AND last > ?", (key, client, now - KNOWN_FOR)).fetchone()
            ):
                continue
            locks.append((kind, row[0]))
        return locks

    def _connect(self) -> sqlite3.Connection:
        """The open file, its tables made; a file that is not a database (or a damaged one) is set aside, logged, and started afresh."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=5, isolation_level=None)
        try:
            db.executescript(SCHEMA)
            return db
        except sqlite3.OperationalError:  # locked past the timeout, read-only, disk full: the file itself may be fine
            db.close()
            raise
        except sqlite3.DatabaseError:
            db.close()
        aside = self.path.with_name(f"{self.path.name}.broken-{int(time.time())}")
        self.path.replace(aside)
        _log.error("sign-in throttle: %s was not a usable database; set aside as %s, counting afresh", self.path, aside.name)
        db = sqlite3.connect(self.path, timeout=5, isolation_level=None)
        try:
            db.executescript(SCHEMA)
        except sqlite3.Error:
            db.close()
            raise
        return db


def _name_key(name: str) -> str:
    return (name or "")[:LONGEST_NAME]


def client_key(address: object) -> str | None:
    """The address a client's failures are counted under: an IPv4 address, or the /64 network of an IPv6 one
    (one host commonly holds a whole /64); None for anything that is not an IP address."""
    if not isinstance(address, str):
        return None
    try:
        ip = ipaddress.ip_address(address.strip())
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    if isinstance(ip, ipaddress.IPv6Address):
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


def _keys(name: str, client: str | None) -> list[tuple[str, str]]:
    keys = [(NAME, _name_key(name))]
    if client:
        keys.append((CLIENT, client))
    return keys


def _left(until: float, now: float, limit: Limit) -> float:
    """Seconds of a wait still to go, never more than its limit (a clock set back must not lengthen it)."""
    return min(until - now, limit.longest_wait)
