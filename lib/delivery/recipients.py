"""Who a subscription's or an alert's `to:` names: users of the users file (by name or `group:NAME`) and outside
addresses the workspace's `policy.external_recipients` allows. Each is checked for view access when it is sent,
not only when it was written: someone removed from the workspace since gets nothing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..roles import access, auth
from ..roles.access import User

# The user an outside address is read as: it holds no attribute, so a table with row filters shows it no row.
OUTSIDE = User("outside-recipient")


@dataclass(frozen=True)
class Recipient:
    address: str  # where it goes
    user: User  # whose rows it shows (their row filters); OUTSIDE for an address outside the users file
    named: str  # how `to:` names it: a user name, or the address


def expand(to: Sequence[str], meta: Mapping[str, Any], credentials: Mapping[str, Any]) -> tuple[list[Recipient], list[str]]:
    """(recipients, problems): `to`'s entries as addresses, once each, and a sentence for each entry left out."""
    users = credentials.get("usernames") or {}
    found: dict[str, Recipient] = {}
    problems: list[str] = []

    def add_user(name: str) -> None:
        user = auth.user_for(name, dict(credentials))
        if not access.can(user, "view", dict(meta)):
            problems.append(f"{name} may not view this workspace, so gets nothing")
        elif not user.email:
            problems.append(f"{name} has no email: in the users file, so gets nothing")
        else:
            found.setdefault(user.email.lower(), Recipient(user.email, user, name))

    for entry in to:
        if entry.startswith("group:"):
            group = entry.removeprefix("group:")
            members = sorted(n for n, e in users.items() if group in ((e or {}).get("roles") or []))
            if not members:
                problems.append(f"{entry}: nobody in the users file is in group {group}")
            for name in members:
                add_user(name)
        elif entry in users:
            add_user(entry)
        elif "@" in entry:
            if allowed_outside(entry, meta):
                found.setdefault(entry.lower(), Recipient(entry, OUTSIDE, entry))
            else:
                problems.append(f"{entry} is not in the users file and policy.external_recipients does not allow it")
        else:
            problems.append(f"{entry} is not a user of the users file ({auth.users_path()})")
    return list(found.values()), problems


def of_subscription(
    to: Sequence[str], choices: Mapping[str, str], meta: Mapping[str, Any], credentials: Mapping[str, Any]
) -> tuple[list[Recipient], list[str]]:
    """`expand(to)` with people's own choices (`Record.choices`): those who asked for it added, those who
    asked not to get it left out, whatever group named them."""
    joined = [name for name, choice in choices.items() if choice == "in" and name not in to]
    found, problems = expand([*to, *joined], meta, credentials)
    return [r for r in found if choices.get(r.user.name) != "out"], problems


def receives(user_name: str, to: Sequence[str], choices: Mapping[str, str], meta: Mapping[str, Any], credentials: Mapping[str, Any]) -> bool:
    """Whether the next send of a subscription with `to` and `choices` goes to `user_name`."""
    found, _ = of_subscription(to, choices, meta, credentials)
    return any(r.user.name == user_name for r in found)


def allowed_outside(address: str, meta: Mapping[str, Any]) -> bool:
    """Whether an owner allowed `address` (the whole address, or its @domain) in policy.external_recipients."""
    allowed = {a.lower() for a in ((meta.get("policy") or {}).get("external_recipients") or [])}
    address = address.lower()
    return address in allowed or "@" + address.rpartition("@")[2] in allowed


def owners(meta: Mapping[str, Any], credentials: Mapping[str, Any]) -> list[Recipient]:
    """The workspace's owners who have an address: whom a "not sent" note goes to."""
    names = [n for n in ((meta.get("access") or {}).get("owners") or []) if n != "*"]
    found, _ = expand(names, meta, credentials)
    return found


def choices(meta: Mapping[str, Any], credentials: Mapping[str, Any]) -> list[str]:
    """What a form may offer for `to:`: each user of the users file who can view the workspace and has an address,
    then `group:NAME` for each group that has such a member (the app's roles, owner, steward and viewer, are no groups)."""
    users = credentials.get("usernames") or {}
    names: list[str] = []
    groups: set[str] = set()
    for name in sorted(users):
        user = auth.user_for(name, dict(credentials))
        if user.email and access.can(user, "view", dict(meta)):
            names.append(name)
            groups.update(r for r in (users[name] or {}).get("roles") or [] if r not in auth.APP_ROLES)
    return names + [f"group:{g}" for g in sorted(groups)]
