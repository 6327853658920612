"""Failed sign-ins slowed down (lib/roles/throttle.py), through `auth.try_sign_in` as the form calls it.

Issue #29: twelve wrong passwords in a row for olivia took 0.1-1.3 s each, with no wait, and the thirteenth,
the right one, signed in. Times are given (`now=`), so the waits are checked without sleeping through them.
"""

from __future__ import annotations

import logging
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import bcrypt
import pytest

from lib.roles import auth, throttle
from lib.roles.throttle import BY_CLIENT, BY_NAME

from ..conftest import ROOT

HASH = bcrypt.hashpw(b"pw", bcrypt.gensalt(rounds=4)).decode()  # a real (cheap) bcrypt hash
# A name without an account costs a bcrypt check of cost 12; these tests fail on accounts' names, at cost 4.
GUESSED = [f"user{i}" for i in range(max(BY_NAME.free, BY_CLIENT.free))]
USERS = {"usernames": {name: {"password": HASH, "roles": ["owner"]} for name in ("olivia", "sam", *GUESSED)}}
T0 = 1_900_000_000.0
A, B, C = "203.0.113.7", "198.51.100.20", "192.0.2.33"


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    """The app's cache folder, where the counts are kept."""
    monkeypatch.setenv("DASHMEM_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def waiting(result: auth.SignIn) -> bool:
    return not result.ok and result.message.startswith("Too many failed sign-ins")


def fail(name: str, times: int, client: str | None = None, now: float = T0) -> float:
    """`times` wrong passwords for `name`, each as soon as the wait before it is over; returns the time after the last."""
    counted = 0
    while counted < times:
        wait = throttle.Throttle.for_app().wait(name, client, now)
        if wait is not None:
            now += wait.seconds
            continue
        result = auth.try_sign_in(USERS, name, "not-the-password", client, now=now)
        assert not result.ok and result.message.startswith(auth.WRONG_PASSWORD), result
        counted += 1
        now += 0.5
    return now


def test_the_free_failures_cost_nothing_then_the_name_waits_even_with_the_right_password():
    now = T0
    for _ in range(BY_NAME.free):  # tried one after another, no wait between them
        assert throttle.Throttle.for_app().wait("olivia", None, now) is None
        now = fail("olivia", 1, now=now)
    refused = auth.try_sign_in(USERS, "olivia", "pw", None, now=now)
    assert waiting(refused) and "for this name" in refused.message, refused
    assert int(refused.message.split("try again in ")[1].split(" s")[0]) <= BY_NAME.first_wait
    assert auth.try_sign_in(USERS, "olivia", "pw", None, now=now + BY_NAME.first_wait).ok  # the wait over: signed in


def test_the_failure_that_starts_a_wait_says_so():
    now = fail("olivia", BY_NAME.free - 1)
    result = auth.try_sign_in(USERS, "olivia", "wrong", None, now=now)
    assert result.message.startswith(auth.WRONG_PASSWORD + " Too many failed sign-ins for this name; try again in "), result


def test_however_many_failures_the_real_user_signs_in_after_a_bounded_wait():
    now = fail("olivia", BY_NAME.free + 30)
    wait = throttle.Throttle.for_app().wait("olivia", None, now - 0.5)
    assert wait is not None and 0 < wait.seconds <= BY_NAME.longest_wait
    assert waiting(auth.try_sign_in(USERS, "olivia", "pw", None, now=now))
    assert auth.try_sign_in(USERS, "olivia", "pw", None, now=now + BY_NAME.longest_wait).ok
    # Signed in, the name's count starts again: the next wrong password is a free one.
    assert auth.try_sign_in(USERS, "olivia", "wrong", None, now=now + BY_NAME.longest_wait + 1).message == auth.WRONG_PASSWORD


def test_a_clock_set_back_never_makes_a_wait_longer_than_its_limit():
    now = fail("olivia", BY_CLIENT.free, client=A)  # both the name and the address wait
    for earlier in (now - 3600, now - 86400 * 30):
        assert throttle.Throttle.for_app().wait("olivia", None, earlier) == throttle.Wait(throttle.NAME, BY_NAME.longest_wait)
        assert throttle.Throttle.for_app().wait("sam", A, earlier) == throttle.Wait(throttle.CLIENT, BY_CLIENT.longest_wait)


def test_an_address_failing_on_many_names_waits_for_every_name_and_only_that_address_does():
    now = T0
    for i in range(BY_CLIENT.free):  # one wrong password each: no name comes near its own limit
        now = fail(GUESSED[i], 1, client=A, now=now)
    refused = auth.try_sign_in(USERS, "sam", "pw", A, now=now)
    assert waiting(refused) and "from your address" in refused.message, refused
    assert auth.try_sign_in(USERS, "sam", "pw", B, now=now).ok  # the same name from another address
    assert auth.try_sign_in(USERS, "sam", "pw", A, now=now + BY_CLIENT.longest_wait).ok  # and that address, once its wait is over


def test_a_name_failed_from_many_addresses_waits_from_every_address_and_other_names_do_not():
    now = T0
    for i in range(BY_NAME.free):  # each address fails once: none comes near its own limit
        now = fail("olivia", 1, client=f"198.51.100.{i + 1}", now=now)
    refused = auth.try_sign_in(USERS, "olivia", "pw", C, now=now)
    assert waiting(refused) and "for this name" in refused.message, refused
    assert auth.try_sign_in(USERS, "sam", "pw", "198.51.100.1", now=now).ok  # another name from one of those addresses


def test_a_stranger_does_not_hold_the_real_user_out_where_they_signed_in_before():
    assert auth.try_sign_in(USERS, "olivia", "pw", A, now=T0).ok  # olivia's usual address
    now = fail("olivia", BY_NAME.free + 5, client=B, now=T0 + 60)  # a stranger elsewhere guesses her password
    assert waiting(auth.try_sign_in(USERS, "olivia", "pw", C, now=now))  # from a new address she waits, as the stranger does
    assert auth.try_sign_in(USERS, "olivia", "pw", A, now=now).ok  # from her own she signs in at once
    assert waiting(auth.try_sign_in(USERS, "olivia", "pw", B, now=now))  # the stranger's address is still held


def test_signing_in_to_ones_own_account_buys_no_more_guesses_at_another():
    now = T0
    for i in range(BY_CLIENT.free - 1):
        now = fail(GUESSED[i], 1, client=A, now=now)
    assert auth.try_sign_in(USERS, "sam", "pw", A, now=now).ok  # the guesser's own account
    assert auth.try_sign_in(USERS, "olivia", "wrong", A, now=now + 1).message.startswith(auth.WRONG_PASSWORD + " Too many")


def test_a_name_without_an_account_is_counted_and_answered_like_one_with():
    def answers(name: str) -> list[str]:
        return [auth.try_sign_in(USERS, name, "wrong", None, now=T0 + i * 0.1).message for i in range(BY_NAME.free + 1)]

    assert answers("olivia") == answers("nobody")


def test_a_wait_is_logged_with_the_name_and_address_never_the_password(caplog):
    with caplog.at_level(logging.INFO, logger=throttle.__name__):
        now = fail("olivia", BY_NAME.free, client=A)
        auth.try_sign_in(USERS, "olivia", "pw", A, now=now)
    started = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert started and "'olivia'" in started[-1].getMessage() and "wait" in started[-1].getMessage()
    assert any("refused" in r.getMessage() and "'olivia'" in r.getMessage() and A in r.getMessage() for r in caplog.records)
    assert "not-the-password" not in caplog.text and "pw'" not in caplog.text


COUNT_ELSEWHERE = textwrap.dedent(
    """
    import pathlib, sys, time
    from lib.roles import throttle
    name, client, start, times, ready = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    if ready:  # say so, then wait for the word to start, so that two of these count at the same moment
        pathlib.Path(ready).touch()
        while pathlib.Path(ready).exists():
            time.sleep(0.002)
    for i in range(times):
        throttle.Throttle.for_app().failed(name, client or None, now=start + i * 0.001)
    """
)


def elsewhere(name: str, client: str, times: int, ready: Path | str = "") -> subprocess.Popen:
    """Another process of the app (another server, or this one after a restart) counting failures of `name`."""
    command = [sys.executable, "-c", COUNT_ELSEWHERE, name, client, str(T0), str(times), str(ready)]
    return subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, text=True)


def finished(proc: subprocess.Popen) -> None:
    assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""


def test_the_counts_hold_across_processes_and_restarts():
    finished(elsewhere("olivia", "", BY_NAME.free))
    assert waiting(auth.try_sign_in(USERS, "olivia", "pw", None, now=T0 + 1))


def test_failures_counted_by_two_processes_at_once_are_all_counted(cache, tmp_path):
    each, ready = 200, [tmp_path / "ready-1", tmp_path / "ready-2"]
    procs = [elsewhere("olivia", A, each, flag) for flag in ready]
    deadline = time.monotonic() + 60
    while not all(flag.exists() for flag in ready) and time.monotonic() < deadline and all(p.poll() is None for p in procs):
        time.sleep(0.01)
    for flag in ready:  # go
        flag.unlink()
    for proc in procs:
        finished(proc)
    with sqlite3.connect(cache / throttle.PATH_IN_CACHE) as db:
        counts = dict(db.execute("SELECT kind, count FROM failures").fetchall())
    assert counts == {throttle.NAME: 2 * each, throttle.CLIENT: 2 * each}


def test_a_damaged_counts_file_is_set_aside_and_sign_in_goes_on(cache, caplog):
    cache.mkdir(parents=True)
    (cache / throttle.PATH_IN_CACHE).write_bytes(b"not a database\x00" * 300)
    with caplog.at_level(logging.ERROR, logger=throttle.__name__):
        assert auth.try_sign_in(USERS, "olivia", "pw", None, now=T0).ok
    assert [p.name for p in cache.glob(throttle.PATH_IN_CACHE + ".broken-*")] and "set aside" in caplog.text
    now = fail("olivia", BY_NAME.free)  # the new file counts again
    assert waiting(auth.try_sign_in(USERS, "olivia", "pw", None, now=now))


def test_a_file_that_cannot_be_written_slows_nothing_down_and_says_why_in_the_log(cache, caplog):
    cache.mkdir(parents=True)
    (cache / throttle.PATH_IN_CACHE).mkdir()  # a folder where the file should be: sqlite cannot open it
    with caplog.at_level(logging.ERROR, logger=throttle.__name__):
        for i in range(BY_NAME.free + 2):
            assert auth.try_sign_in(USERS, "olivia", "wrong", None, now=T0 + i).message == auth.WRONG_PASSWORD
        assert auth.try_sign_in(USERS, "olivia", "pw", None, now=T0 + 10).ok
    assert "cannot read" in caplog.text and "cannot write" in caplog.text


@pytest.mark.parametrize(
    ("address", "key"),
    [
        ("203.0.113.7", "203.0.113.7"),
        ("::ffff:203.0.113.7", "203.0.113.7"),  # an IPv4 client on a dual-stack socket
        ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),  # one host commonly holds a whole /64
        ("2001:db8:1:2:bbbb::9", "2001:db8:1:2::/64"),
        ("not an address", None),
        (None, None),
    ],
)
def test_a_client_is_counted_by_its_address_or_its_ipv6_network(address, key):
    assert throttle.client_key(address) == key
