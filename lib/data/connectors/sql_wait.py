"""How long a database read may wait for the server's next bytes: a stalled connection ends, a slow query does not.

A statement time limit is enforced by the server, so it cannot end a query whose answer never comes: a
server that hangs, a proxy or load balancer that goes silent mid-query, a network that drops packets
while the socket stays open. Neither driver bounds that wait by itself (psycopg2 has no read timeout,
and PyMySQL's read timeout was lifted once connected), so one stalled source held a dashboard, a
refresh or a cron run for as long as the silence lasted. Here every wait for the server is bounded:

- by the source's `timeout_s` (in whole seconds, as libpq counts it) plus `MARGIN_S`, for connecting and for each answer of a snapshot read
  (a snapshot query whose first rows take longer needs a larger `timeout_s`; the error says so), and
- by the statement's own time limit plus `MARGIN_S` where one is set (`allow`: a live query, a live
  profile, a change marker), since the server answers, with rows or with its time-limit error, by then.

PostgreSQL (psycopg2) waits through `_wait`, psycopg2's documented wait callback (the driver then talks
to libpq without blocking and calls it whenever it must wait), which selects on the socket with the
bound. PyMySQL keeps its own per-read socket timeout, set to the bound. Either way the connection is
then broken and dropped, and the read fails with `stalled(exc)` true: it is not tried again, since a
silent server answers a second attempt no better and a query's whole retry budget would be spent.
"""

from __future__ import annotations

import math
import re
import select
import weakref
from typing import Any

MARGIN_S = 2.0
STALL_WORDS = "could not receive data from server: nothing for"  # psycopg2's own disconnect words, then ours
PYMYSQL_STALL = "(timed out)"  # PyMySQL's words when its read timeout ends a wait

# psycopg2 connections given a longer bound than their source's (`allow`), until they go back to the pool.
_ALLOWED: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()
_FACTORIES: dict[float, type] = {}  # bound -> the psycopg2 connection class that carries it
_installed = False


def install_psycopg2() -> None:
    """Make psycopg2 wait through `_wait` (once per process; connections without a connect_timeout wait as before)."""
    global _installed
    if not _installed:
        import psycopg2.extensions

        psycopg2.extensions.set_wait_callback(_wait)
        _installed = True


def connect_args(driver: str, timeout_s: float) -> dict[str, Any]:
    """What the driver needs at connect time for the bound. psycopg2's connections are made of a class that
    carries it (`connection_factory`), so that only dashmem's connections are bounded: the wait callback is
    the whole process's, and other code's psycopg2 connections wait as before."""
    if driver == "pymysql":
        return {"read_timeout": timeout_s + MARGIN_S, "write_timeout": timeout_s + MARGIN_S}
    if driver == "psycopg2":
        install_psycopg2()
        return {"connection_factory": _factory(math.ceil(timeout_s) + MARGIN_S)}  # libpq counts whole seconds
    return {}


def _factory(bound: float) -> type:
    if bound not in _FACTORIES:
        import psycopg2.extensions

        _FACTORIES[bound] = type("DashmemConnection", (psycopg2.extensions.connection,), {"dashmem_wait_s": bound})
    return _FACTORIES[bound]


def allow(dbapi_connection: Any, seconds: float, timeout_s: float) -> None:
    """Let this connection's waits last up to `seconds` (a statement's time limit) plus the margin, if longer than its source's."""
    bound = max(seconds, timeout_s) + MARGIN_S
    if hasattr(dbapi_connection, "_read_timeout"):  # PyMySQL applies it before each read
        dbapi_connection._read_timeout = dbapi_connection._write_timeout = bound
    elif hasattr(dbapi_connection, "dashmem_wait_s"):  # psycopg2, made by `_factory`
        _ALLOWED[dbapi_connection] = bound


def forget(dbapi_connection: Any, timeout_s: float) -> None:
    """Back to the source's own bound, as the connection returns to the pool."""
    if hasattr(dbapi_connection, "_read_timeout"):
        dbapi_connection._read_timeout = dbapi_connection._write_timeout = timeout_s + MARGIN_S
    elif hasattr(dbapi_connection, "dashmem_wait_s"):
        _ALLOWED.pop(dbapi_connection, None)


def stalled(exc: BaseException) -> bool:
    """Whether a read failed because the server stopped answering (a bound above ran out)."""
    text = str(getattr(exc, "orig", None) or exc)
    return STALL_WORDS in text or PYMYSQL_STALL in text


def waited(exc: BaseException, otherwise_s: float) -> float:
    """How long the wait that ran out lasted: psycopg2's (through `_wait`) says so; PyMySQL's is `otherwise_s`."""
    found = re.search(rf"{STALL_WORDS} ([0-9.]+) s", str(getattr(exc, "orig", None) or exc))
    return float(found.group(1)) if found else otherwise_s


def message(waited_s: float, if_slow: str) -> str:
    """What a person reads when a wait ran out, and what to change if the database was only slow."""
    return f"the database stopped answering: nothing came for {waited_s:g} s, so the read was stopped (if it is only slow, {if_slow})"


def _bound(conn: Any) -> float | None:
    allowed = _ALLOWED.get(conn)
    return allowed if allowed is not None else getattr(conn, "dashmem_wait_s", None)


def _wait(conn: Any) -> None:
    """psycopg2's wait callback: poll the connection, and wait for its socket at most the bound at a time."""
    import psycopg2
    from psycopg2.extensions import POLL_OK, POLL_READ, POLL_WRITE

    bound = _bound(conn)
    while True:
        state = conn.poll()
        if state == POLL_OK:
            return
        if state == POLL_READ:
            ready = select.select([conn.fileno()], [], [], bound)[0]
        elif state == POLL_WRITE:
            ready = select.select([], [conn.fileno()], [], bound)[1]
        else:
            raise psycopg2.OperationalError(f"bad state from poll: {state}")
        if not ready:  # psycopg2 then closes the connection: a half-read answer cannot be resumed
            raise psycopg2.OperationalError(f"{STALL_WORDS} {bound:g} s, so the wait was stopped")
