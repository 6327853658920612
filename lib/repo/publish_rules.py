"""When a draft's Publish button is offered, and when it may be clicked.

The Review page asks `publish_button`; `ConfigRepo.publish_branch` enforces
the same rules again on every publish (roles there, the checks' verdict on the
merged files), so this decides only what to show:

- shown to who may publish in the workspace (owners; stewards where the
  policy's `stewards_can_publish` says so), and then, for a steward, only on
  their own draft: an owner publishes anyone's;
- disabled while the draft's checks find errors, if the policy's
  `require_valid_to_publish` (default true) asks for valid drafts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from ..core.diagnostics import ERROR, Diagnostic
from ..roles import access
from ..roles.access import User

BLOCKED_HELP = "This workspace publishes only drafts whose checks pass; fix the errors above first."


@dataclass(frozen=True)
class PublishButton:
    shown: bool  # the person may publish this draft
    enabled: bool  # and may click it now
    help: str | None = None  # why it is disabled, when it is


def publish_button(user: User, meta: dict[str, Any], *, own: bool, diagnostics: Iterable[Diagnostic] | None) -> PublishButton:
    """The Publish button of one draft for `user`: `own` when it is their draft; `diagnostics` the draft's checks (None: not run)."""
    shown = access.can(user, "publish", meta) and (own or access.role_of(user, meta) == access.OWNER)
    if not shown:
        return PublishButton(False, False)
    errors = any(d.level == ERROR for d in diagnostics or ())
    blocked = errors and bool(((meta or {}).get("policy") or {}).get("require_valid_to_publish", True))
    return PublishButton(True, not blocked, BLOCKED_HELP if blocked else None)
