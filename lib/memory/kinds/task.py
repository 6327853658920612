"""task.yaml: the goal and the task rules the model follows, each with an id and maybe a check."""

from __future__ import annotations

from typing import Any

from ..changes import Category, Change, by_key, keyed_diff, mapping
from .base import Kind, unique

RULES = Category(
    "task",
    "Task rules",
    2,
    "task rule",
    {
        "added": "task rule {id} added: {new}",
        "removed": "task rule {id} removed: {old}",
        "reworded": "task rule {id} reworded: {old} -> {new}",
        "check_added": "task rule {id} is now checked: {new}",
        "check_removed": "task rule {id} is no longer checked (was {old})",
        "check_changed": "task rule {id} check changed: {old} -> {new}",
        "goal": "task goal changed: {old} -> {new}",
        "changed": "task rule {id} changed: {old} -> {new}",
    },
)


def task_changes(old: Any, new: Any) -> list[Change]:
    """task.yaml: the goal, and each rule by id: added, removed, reworded, its check added, removed or changed."""
    old, new = mapping(old), mapping(new)
    out: list[Change] = []
    if old.get("goal") != new.get("goal"):
        out.append(RULES.change("goal", "goal", old.get("goal"), new.get("goal")))
    a, b = by_key(old.get("rules"), "id"), by_key(new.get("rules"), "id")
    added, removed, kept = keyed_diff(a, b)
    out += [RULES.change("added", rid, None, b[rid].get("text")) for rid in added]
    out += [RULES.change("removed", rid, a[rid].get("text"), None) for rid in removed]
    for rid in kept:
        before, after = a[rid], b[rid]
        if before.get("text") != after.get("text"):
            out.append(RULES.change("reworded", rid, before.get("text"), after.get("text")))
        check_a, check_b = before.get("check"), after.get("check")
        if check_a != check_b:
            kind = "check_added" if check_a is None else "check_removed" if check_b is None else "check_changed"
            out.append(RULES.change(kind, rid, check_a, check_b))
        for field in ("tags", "last_confirmed"):
            if before.get(field) != after.get(field):
                out.append(RULES.change("changed", f"{rid}.{field}", before.get(field), after.get(field)))
    return out


KIND = Kind(
    name="task",
    file="task.yaml",
    schema="task.schema.json",
    required=True,
    checks=(unique("rules", "id", "rule id"),),
    diff=task_changes,
    review=RULES,
    model_heading="Task specifications (task.yaml)",
    model_empty="No task rules yet.",
)
