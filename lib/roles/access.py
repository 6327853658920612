"""Roles, enforced here rather than only hidden in the UI.

A user's role in a workspace comes from its `access` lists: owners, stewards,
viewers, each naming users, `group:NAME` or `*`. The highest matching role
wins. Every writing function in `lib/` calls `require` before it touches
anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..core.errors import DashmemError
from ..memory import schemas

VIEWER, STEWARD, OWNER = "viewer", "steward", "owner"
_RANK = {None: 0, VIEWER: 1, STEWARD: 2, OWNER: 3}

# A user name as task.yaml's rule authors and workspace.yaml's access lists write it.
USER_NAME_RE = re.compile(schemas.pattern("task", "rule", "author"))


class PermissionDenied(DashmemError, PermissionError):
    pass


@dataclass(frozen=True)
class User:
    name: str
    display_name: str | None = None
    email: str | None = None
    groups: tuple[str, ...] = field(default_factory=tuple)
    app_role: str = VIEWER  # role across the app (from the credentials file): who may create workspaces
    # User attributes (the users file's `attributes:`, the user's own merged with their groups'), each a
    # tuple of values: what workspace.yaml's `row_filters` keep a user to (lib.data.row_filters).
    attributes: tuple[tuple[str, tuple[str, ...]], ...] = field(default_factory=tuple)

    def __post_init__(self):
        if not USER_NAME_RE.match(self.name) or ".." in self.name or self.name.endswith(".lock"):
            raise ValueError(f"invalid user name {self.name!r}: letters, digits and _ . @ - only")

    @property
    def git_email(self) -> str:
        return self.email or f"{self.name}@users.dashmem.invalid"


# Whoever runs the CLI or a cron job: they hold the files already, so the file system's
# permissions are the access control there (see docs/security.md). Not a user name: no
# sign-in can become it, whatever the credentials file says.
OPERATOR = User("operator", "command line", app_role=OWNER)


def role_of(user: User, workspace_meta: dict[str, Any]) -> str | None:
    """The user's highest role in a workspace, or None if they have no access."""
    if user is OPERATOR or user.app_role == OWNER:
        return OWNER  # the app's owners administer every workspace, including ones a steward just created
    access = (workspace_meta or {}).get("access") or {}
    principals = {user.name, "*"} | {f"group:{g}" for g in user.groups}
    best = None
    for role, key in ((VIEWER, "viewers"), (STEWARD, "stewards"), (OWNER, "owners")):
        if principals & set(access.get(key) or []):
            if _RANK[role] > _RANK[best]:
                best = role
    return best


# action -> least role that may do it
ACTIONS: dict[str, str] = {
    "view": VIEWER,
    "refresh": VIEWER,
    "query": VIEWER,
    "edit": STEWARD,
    "save": STEWARD,
    "undo": STEWARD,
    "revert": STEWARD,
    "propose": STEWARD,
    "pin_data": STEWARD,  # serve an earlier snapshot to everyone until the next refresh
    "full_reload": STEWARD,  # reload incremental sources whole: the heavy read a cursor exists to avoid
    "publish": OWNER,  # stewards too when the workspace policy says so
    "reject": OWNER,
    "manage_access": OWNER,
}


def can(user: User, action: str, workspace_meta: dict[str, Any]) -> bool:
    if action not in ACTIONS:
        raise KeyError(f"unknown action {action!r}")
    role = role_of(user, workspace_meta)
    if action == "publish" and role == STEWARD:
        return bool(((workspace_meta or {}).get("policy") or {}).get("stewards_can_publish", False))
    return _RANK[role] >= _RANK[ACTIONS[action]]


def require(user: User, action: str, workspace_meta: dict[str, Any], slug: str = "") -> None:
    if not can(user, action, workspace_meta):
        role = role_of(user, workspace_meta) or "no access"
        where = f" in workspace {slug!r}" if slug else ""
        hint = ""
        if action == "publish" and role == STEWARD:
            hint = "; this workspace's policy asks stewards to propose and an owner to publish"
        raise PermissionDenied(f"{user.name} ({role}) may not {action}{where}{hint}")


GOVERNING_KEYS = ("access", "policy", "row_filters", "row_filter_bypass")  # the parts of workspace.yaml that say who may do what


def require_governance_unchanged_or_owner(user: User, before: dict[str, Any], after: dict[str, Any], slug: str = "") -> None:
    """Only an owner (manage_access under `before`) may change who may do what.

    Otherwise a steward could make themselves an owner, or allow themselves to publish.
    """
    if any((after or {}).get(k) != (before or {}).get(k) for k in GOVERNING_KEYS):
        require(user, "manage_access", before, slug)


def require_app_role(user: User, least: str, what: str) -> None:
    if _RANK[user.app_role] < _RANK[least]:
        raise PermissionDenied(f"{user.name} ({user.app_role}) may not {what}; it needs the {least} role")


# --------------------------------------------------------------------------- changing the access lists

ROLE_LISTS = {OWNER: "owners", STEWARD: "stewards", VIEWER: "viewers"}  # a role -> its list in workspace.yaml's access
# Who a list may name: a user name, `group:NAME` or `*` (the schema's rule, not re-typed here).
PRINCIPAL_RE = re.compile(schemas.pattern("workspace", "principals", schemas.ITEMS))


class AccessChangeRefused(DashmemError, ValueError):
    """An access change that cannot be made as asked (an unknown role, a malformed name, the last owner); nothing changed."""


@dataclass(frozen=True)
class Grant:
    """One entry of one role's list: `steward:sam`, `viewer:group:ops`, `owner:*`."""

    role: str
    principal: str

    @classmethod
    def parse(cls, text: str) -> "Grant":
        """`ROLE:NAME` as the command line and the form take it; a plain sentence saying what is allowed otherwise."""
        role, sep, principal = text.strip().partition(":")
        role = role.strip().lower()
        role = {plural: singular for singular, plural in ROLE_LISTS.items()}.get(role, role)  # "stewards:sam" reads as meant
        if not sep or role not in ROLE_LISTS:
            raise AccessChangeRefused(f"{text.strip()!r}: give ROLE:NAME, where ROLE is {', '.join(ROLE_LISTS)} (e.g. steward:sam or viewer:group:ops)")
        return cls.of(role, principal)

    @classmethod
    def of(cls, role: str, principal: str) -> "Grant":
        principal = principal.strip()
        if role not in ROLE_LISTS:
            raise AccessChangeRefused(f"{role!r} is not a role: choose one of {', '.join(ROLE_LISTS)}")
        if not PRINCIPAL_RE.match(principal):
            raise AccessChangeRefused(
                f"{principal!r} cannot be in an access list: give a user name (letters, digits and _ . @ -, up to 64), "
                "group:NAME for everyone in a group, or * for everyone signed in"
            )
        return cls(role, principal)

    def __str__(self) -> str:
        return f"{self.role}:{self.principal}"


def changed_access(lists: dict[str, Any] | None, add: Sequence[Grant] = (), remove: Sequence[Grant] = ()) -> tuple[dict[str, Any], list[str]]:
    """workspace.yaml's `access` with `remove` taken out and `add` put in, and a sentence per change made.

    Adding an entry a list holds already changes nothing; removing one it does not hold is refused (a typo
    should not pass as done). The owners' list keeps at least one entry: a workspace nobody owns has nobody
    who may change its access again. The lists are independent: adding sam as a steward leaves sam a viewer
    too, which grants nothing more (the highest role wins).
    """
    out = {key: list(value) if isinstance(value, list) else value for key, value in (lists or {}).items()}
    done: list[str] = []
    for grant in remove:
        key = ROLE_LISTS[grant.role]
        held = out.get(key) or []
        if grant.principal not in held:
            listed = ", ".join(held) or "nobody"
            raise AccessChangeRefused(f"{grant.principal} is not among the {key} (they are: {listed}); nothing was changed")
        out[key] = [p for p in held if p != grant.principal]
        done.append(f"removed {grant.principal} from the {key}")
    for grant in add:
        key = ROLE_LISTS[grant.role]
        held = out.get(key) or []
        if grant.principal not in held:
            out[key] = [*held, grant.principal]
            done.append(f"added {grant.principal} to the {key}")
    if not out.get(ROLE_LISTS[OWNER]):
        raise AccessChangeRefused("a workspace keeps at least one owner: add another owner before removing the last one; nothing was changed")
    return out, done
