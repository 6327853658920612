"""Who is signed in: the credentials file, app roles, and the `User` the rest of lib/ checks.

Credentials live in a YAML file outside the config repo (DASHMEM_USERS,
default: the demo users in demo/users.yaml), in streamlit-authenticator's
format with bcrypt-hashed passwords. A user's `roles` are both their app role
(the highest of owner, steward, viewer) and their groups, so a workspace can
grant `group:analysts`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import yaml

from ..core import settings
from ..core.errors import DashmemError
from . import throttle
from .access import OWNER, STEWARD, VIEWER, User, role_of

APP_ROLES = (OWNER, STEWARD, VIEWER)
MIN_COOKIE_KEY_BYTES = 32


class AuthConfigError(DashmemError, RuntimeError):
    pass


def users_path() -> Path:
    return settings.get("DASHMEM_USERS")


def load_credentials(path: Path | None = None) -> dict[str, Any]:
    """The credentials dict, checked: every user has a bcrypt hash and known roles.

    Returns a fresh copy each time: streamlit-authenticator writes login state
    into the dict it is given, and must never write back to the file.
    """
    path = path or users_path()
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        raise AuthConfigError(f"no credentials file at {path}; set DASHMEM_USERS") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise AuthConfigError(f"cannot read the credentials file {path}: {exc}") from None
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" (line {where.line + 1})" if where is not None else ""
        raise AuthConfigError(f"{path}: not valid YAML{at}") from None
    users = data.get("usernames") if isinstance(data, dict) else None
    if not isinstance(users, dict) or not users:
        raise AuthConfigError(f"{path}: expected a `usernames:` mapping with at least one user")
    for name, entry in users.items():
        if not isinstance(entry, dict):
            raise AuthConfigError(f"{path}: user {name!r} should be a mapping with at least `password:`")
        password = str(entry.get("password", ""))
        if not password.startswith("$2"):
            raise AuthConfigError(f"{path}: user {name!r} has no bcrypt-hashed password (plain passwords are refused)")
        try:
            User(name)  # validates the user name
        except ValueError as exc:
            raise AuthConfigError(f"{path}: {exc}") from None
    groups = data.get("groups") or {}
    if not isinstance(groups, dict):
        raise AuthConfigError(f"{path}: `groups:` should map a group name to its `attributes:`")
    for name, entry in [*users.items(), *groups.items()]:
        attrs = entry.get("attributes") if isinstance(entry, dict) else None
        if attrs is not None and not (isinstance(attrs, dict) and all(isinstance(v, (str, int, float, list)) for v in attrs.values())):
            raise AuthConfigError(f"{path}: {name!r}: `attributes:` should map a name to a value or a list of values, e.g. `site: [Brno, Porto]`")
    return copy.deepcopy({"usernames": users, "groups": groups})


def app_role(roles: list[str] | None) -> str:
    roles = roles or []
    for role in APP_ROLES:
        if role in roles:
            return role
    return VIEWER


def user_for(username: str, credentials: dict[str, Any]) -> User:
    entry = credentials["usernames"][username]
    roles = list(entry.get("roles") or [])
    return User(username, entry.get("name"), entry.get("email"), tuple(roles), app_role(roles), attributes_of(entry, roles, credentials))


def attributes_of(entry: Mapping[str, Any], roles: list[str], credentials: Mapping[str, Any]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """A user's attributes: their own `attributes:` and those of each of their groups (the file's top-level
    `groups: {NAME: {attributes: ...}}`), values of one attribute joined; a value is a string or a list of them."""
    merged: dict[str, list[str]] = {}
    groups = credentials.get("groups") or {}
    sources = [entry.get("attributes")] + [(groups.get(g) or {}).get("attributes") if isinstance(groups.get(g), dict) else None for g in roles]
    for attrs in sources:
        if not isinstance(attrs, dict):
            continue
        for name, value in attrs.items():
            values = value if isinstance(value, list) else [value]
            held = merged.setdefault(str(name), [])
            held.extend(str(v) for v in values if v is not None and str(v) not in held)
    return tuple(sorted((name, tuple(values)) for name, values in merged.items()))


def cookie_key() -> str:
    """The login cookie's signing key, from DASHMEM_COOKIE_KEY or Streamlit secrets `auth.cookie_key`."""
    key = settings.get("DASHMEM_COOKIE_KEY")
    if not key or len(key.encode()) < MIN_COOKIE_KEY_BYTES:
        raise AuthConfigError("set a cookie key of at least 32 bytes: DASHMEM_COOKIE_KEY, or [auth] cookie_key in .streamlit/secrets.toml")
    return key


def visible(user: User, metas: dict[str, dict[str, Any]]) -> list[str]:
    """Workspace slugs the user has any role in, in name order."""
    return sorted((slug for slug, meta in metas.items() if role_of(user, meta)), key=lambda s: metas[s].get("name", s).lower())


# --------------------------------------------------------------------------- signing in, and the cookie that keeps a person signed in

COOKIE_NAME = "dashmem_auth"
COOKIE_DAYS = 7


def check_password(credentials: dict[str, Any], username: str, password: str) -> bool:
    """Whether `password` is the user's (bcrypt); an unknown user is refused the same way."""
    import bcrypt

    entry = credentials["usernames"].get(username) if username else None
    # An unknown user costs one bcrypt check too, so the time taken does not tell who has an account.
    hashed = str(entry["password"]) if entry else _UNKNOWN_USER_HASH
    matches = bcrypt.checkpw(password.encode(), hashed.encode())
    return bool(entry) and bool(password) and matches


WRONG_PASSWORD = "Wrong user name or password."


@dataclass(frozen=True)
class SignIn:
    """What one press of Login came to: `ok`, or the plain sentence the form shows instead."""

    ok: bool
    message: str = ""


def try_sign_in(credentials: dict[str, Any], username: str, password: str, client: str | None, *, now: float | None = None) -> SignIn:
    """Check a sign-in as the form submits it, slowed down by the failures before it (lib/roles/throttle.py).

    `client` is the address it comes from (None on loopback). While the name or the address must wait, the
    password is not checked at all, so even the right one is refused until the wait is over.
    """
    guard = throttle.Throttle.for_app()
    wait = guard.wait(username, client, now)
    if wait is not None:
        return SignIn(False, wait.message())
    if check_password(credentials, username, password):
        guard.succeeded(username, client, now)
        return SignIn(True)
    started = guard.failed(username, client, now)
    return SignIn(False, f"{WRONG_PASSWORD} {started.message()}" if started else WRONG_PASSWORD)


# A bcrypt hash (cost 12, as streamlit-authenticator's Hasher makes) of a random password nobody knows.
_UNKNOWN_USER_HASH = "$2b$12$C6UzMDM.H6dfI/f/IKcEeO5rU9m/tI4S0Uq3Jm1M6mJ7b9rWfM2e."


def session_token(username: str, key: str, days: float = COOKIE_DAYS, *, now: float | None = None) -> tuple[str, float]:
    """(the sign-in cookie's value, its expiry as a Unix time): a JWT signed with the cookie key.

    The claims are streamlit-authenticator's ({username, exp_date}), so cookies it set before keep working.
    """
    import time

    import jwt

    expires = (time.time() if now is None else now) + days * 86400
    return jwt.encode({"username": username, "exp_date": expires}, key, algorithm="HS256"), expires


def token_user(token: str | None, key: str, credentials: dict[str, Any], *, now: float | None = None) -> str | None:
    """The user a sign-in cookie names, if its signature holds, it has not expired and the user still exists."""
    import time

    import jwt

    if not token:
        return None
    try:
        claims = jwt.decode(token, key, algorithms=["HS256"])
    except jwt.PyJWTError:
        return None
    name, expires = claims.get("username"), claims.get("exp_date")
    if not isinstance(expires, (int, float)) or expires <= (time.time() if now is None else now):
        return None
    return name if isinstance(name, str) and name in credentials["usernames"] else None
