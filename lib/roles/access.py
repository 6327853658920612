"""Roles, enforced here rather than only hidden in the UI.

A user's role in a workspace comes from its `access` lists: owners, stewards,
viewers, each naming users, `group:NAME` or `*`. The highest matching role
wins. Every writing function in `lib/` calls `require` before it touches
anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

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


GOVERNING_KEYS = ("access", "policy")  # the parts of workspace.yaml that say who may do what


def require_governance_unchanged_or_owner(user: User, before: dict[str, Any], after: dict[str, Any], slug: str = "") -> None:
    """Only an owner (manage_access under `before`) may change who may do what.

    Otherwise a steward could make themselves an owner, or allow themselves to publish.
    """
    if any((after or {}).get(k) != (before or {}).get(k) for k in GOVERNING_KEYS):
        require(user, "manage_access", before, slug)


def require_app_role(user: User, least: str, what: str) -> None:
    if _RANK[user.app_role] < _RANK[least]:
        raise PermissionDenied(f"{user.name} ({user.app_role}) may not {what}; it needs the {least} role")
