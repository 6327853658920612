"""task.yaml: the goal and the task rules the model follows, each with an id and maybe a check."""

from __future__ import annotations

from typing import Any

from ..changes import Category, Change, by_key, keyed_diff, mapping
from .base import Kind, counted, unique

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


def merge_rules(current: Any, incoming: Any, source: str) -> tuple[dict[str, Any], list[str]]:
    """Importing task rules adds them to this workspace's: its goal stays (taken from the other only when this
    one has none); a rule already here (same id, same text) is skipped; one whose id is taken by another rule
    is added under `<id>-<source>`, so both are kept apart."""
    current, incoming = dict(mapping(current)), mapping(incoming)
    rules = list(current.get("rules") or [])
    ids = {r.get("id") for r in rules}
    texts = {(r.get("id"), r.get("text")) for r in rules}
    added, skipped, renamed = [], [], []
    for rule in incoming.get("rules") or []:
        rid = rule.get("id")
        if (rid, rule.get("text")) in texts:
            skipped.append(rid)
            continue
        new_id, n = rid, 1
        while new_id in ids:
            new_id = f"{rid}-{source}" if n == 1 else f"{rid}-{source}-{n}"
            n += 1
        if new_id != rid:
            renamed.append(f"{rid} -> {new_id}")
        rules.append({**rule, "id": new_id})
        ids.add(new_id)
        added.append(new_id)
    notes = ["added " + counted(added, "task rule")]
    if renamed:
        notes.append(f"kept apart from rules with the same id here: {', '.join(renamed)}")
    if skipped:
        notes.append(counted(skipped, "rule", " already here, not added again"))
    if current.get("goal"):
        if incoming.get("goal") and incoming.get("goal") != current.get("goal"):
            notes.append("kept this workspace's goal")
    elif incoming.get("goal"):
        current["goal"] = incoming["goal"]
        notes.append(f"took the goal of {source}, as this workspace had none")
    current.setdefault("goal", "")
    current["rules"] = rules
    return current, notes


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
    merge=merge_rules,
)
