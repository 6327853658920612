"""Task rules that age: a rule nobody has confirmed within the workspace's review period is stale.

A rule is confirmed on the day in its `last_confirmed`, or, never confirmed,
on the day it was `created`. Once more days than the workspace policy's
`rule_review_days` (schemas/workspace.schema.json, default 90) have passed,
the rule is stale: `check` and `validate` report it as the warning
`task.rule_stale` (file, line, rule id), the Specs and Review pages flag it
with a "still holds" button (`ConfigRepo.confirm_rules`), and the model is told the
rule is unconfirmed (lib/chat/compose.py). Staleness never blocks anything: an
old rule may be perfectly right, someone just has to say so.
"""

from __future__ import annotations

import copy
import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from ..core.diagnostics import WARNING, Diagnostic
from ..core.errors import DashmemError
from . import schemas
from .workspace import shown_file

if TYPE_CHECKING:
    from .workspace import Workspace


class UnknownRule(DashmemError, KeyError):
    """A rule to confirm is not in task.yaml (renamed or deleted meanwhile); nothing was saved."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


@dataclass(frozen=True)
class StaleRule:
    index: int  # position in task.yaml's rules
    id: str
    confirmed: str  # the day it was last confirmed (or created), YYYY-MM-DD
    days: int  # days since then


def review_days(meta: Mapping[str, Any] | None) -> int:
    """The workspace's review period in days (policy.rule_review_days, else the schema's default)."""
    value = ((meta or {}).get("policy") or {}).get("rule_review_days")
    return value if isinstance(value, int) and value > 0 else schemas.default("workspace", "policy", "rule_review_days")


def _day(value: Any) -> dt.date | None:
    try:
        return dt.date.fromisoformat(str(value))
    except ValueError:
        return None


def as_day(today: dt.date | str | None) -> dt.date:
    if today is None:
        return dt.date.today()
    return today if isinstance(today, dt.date) else dt.date.fromisoformat(today)


def stale_rules(files: Mapping[str, Any], today: dt.date | str | None = None) -> list[StaleRule]:
    """The rules of `files` (workspace kind -> content) not confirmed within the review period, in file order."""
    period = review_days(files.get("workspace"))
    day = as_day(today)
    out = []
    for i, rule in enumerate((files.get("task") or {}).get("rules") or []):
        if not isinstance(rule, Mapping):
            continue
        confirmed = _day(rule.get("last_confirmed") or rule.get("created"))
        if confirmed is None:
            continue  # the schema reports a missing or malformed date
        days = (day - confirmed).days
        if days > period:
            out.append(StaleRule(i, str(rule.get("id")), confirmed.isoformat(), days))
    return out


def diagnostics(ws: Workspace, today: dt.date | str | None = None) -> list[Diagnostic]:
    """A `task.rule_stale` warning per stale rule, at the line of the date that makes it stale."""

    found = stale_rules(ws.data, today)
    if not found:
        return []
    period = review_days(ws.get("workspace"))
    doc = ws.docs.get("task")
    rules = (ws.get("task") or {}).get("rules") or []
    out = []
    for stale in found:
        key = "last_confirmed" if rules[stale.index].get("last_confirmed") else "created"
        never = "" if key == "last_confirmed" else " (never confirmed since it was written)"
        out.append(
            Diagnostic(
                "task.rule_stale",
                WARNING,
                f"task rule '{stale.id}' was last confirmed on {stale.confirmed}{never}, {stale.days} days ago; this workspace asks "
                f"for a review every {period} days (policy.rule_review_days). Confirm it still holds on the Specs or Review page, "
                "or change or delete it",
                shown_file(ws.path, "task"),
                doc.line_of(("rules", stale.index, key)) if doc is not None else None,
                f"rules[{stale.id}].{key}",
                f"a last_confirmed within the last {period} days",
            )
        )
    return out


def confirmed(task: Mapping[str, Any], rule_ids: Iterable[str], today: dt.date | str | None = None) -> dict[str, Any]:
    """task.yaml content with `last_confirmed` set to today on the named rules (a copy)."""
    wanted = list(dict.fromkeys(rule_ids))
    out = copy.deepcopy(dict(task))
    known = {rule.get("id"): rule for rule in out.get("rules") or []}
    missing = [rid for rid in wanted if rid not in known]
    if missing:
        raise UnknownRule(f"no task rule {', '.join(repr(r) for r in missing)} in task.yaml (renamed or deleted meanwhile?); nothing was confirmed")
    day = as_day(today).isoformat()
    for rid in wanted:
        known[rid]["last_confirmed"] = day
    return out
