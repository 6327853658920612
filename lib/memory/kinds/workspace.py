"""workspace.yaml: the workspace's name and description, who may view, edit and publish it, and its policy."""

from __future__ import annotations

from typing import Any, Mapping

from ...core.diagnostics import WARNING, Diagnostic, format_path
from ..changes import ATTENTION, Category, Change, leaf_changes, mapping
from ..yamlio import Document
from .base import Kind


def access_has_owner(doc: Document, shown: str) -> list[Diagnostic]:
    owners = (doc.data.get("access") or {}).get("owners") or []
    if owners == ["*"]:
        path = ("access", "owners")
        return [Diagnostic("access.everyone_owner", WARNING, "every signed-in user is an owner", shown, doc.line_of(path), format_path(path), "named owners")]
    return []


def subscription_formats(doc: Document, shown: str) -> list[Diagnostic]:
    """A subscription's `format:` its artifact cannot go as: said, with what it goes as instead."""
    out = []
    for i, sub in enumerate(doc.data.get("subscriptions") or []):
        if isinstance(sub, dict) and sub.get("format") is not None and sub.get("send") in FORMATS and sub["format"] not in FORMATS[sub["send"]]:
            path = ("subscriptions", i, "format")
            allowed = " or ".join(FORMATS[sub["send"]])
            message = f"a {sub['send']} goes as {allowed}, not {sub['format']}: it is sent as {format_of(sub)}"
            out.append(Diagnostic("subscription.format", WARNING, message, shown, doc.line_of(path), format_path(path), allowed))
    return out


ACCESS = Category(
    "access",
    "Access",
    1,
    "access",
    {
        "granted": "{new} added to {id}",
        "revoked": "{old} removed from {id}",
        "policy": "publishing policy {id}: {old} -> {new}",
        "changed": "workspace {id}: {old} -> {new}",
        "row_filter": "row filter on {id}: {old} -> {new}",
        "row_filter_bypass": "roles that see every row: {old} -> {new}",
        "subscribed": "sends by e-mail: {new}",
        "unsubscribed": "no longer sends by e-mail: {old}",
        "alert_added": "alerts by e-mail: {new}",
        "alert_removed": "no longer alerts by e-mail: {old}",
    },
)


def access_changes(old: Any, new: Any) -> list[Change]:
    """workspace.yaml: who may view, edit and publish (each principal granted or revoked), and the policy."""
    old, new = mapping(old), mapping(new)
    out: list[Change] = []
    a, b = mapping(old.get("access")), mapping(new.get("access"))
    for role in [*b, *(r for r in a if r not in b)]:
        before = [p for p in a.get(role) or [] if isinstance(p, str)]
        after = [p for p in b.get(role) or [] if isinstance(p, str)]
        out += [ACCESS.change("granted", role, None, p, ATTENTION) for p in after if p not in before]
        out += [ACCESS.change("revoked", role, p, None, ATTENTION) for p in before if p not in after]
    for c in leaf_changes(ACCESS, old.get("policy"), new.get("policy"), severity=ATTENTION):
        out.append(ACCESS.change("policy", c.id, c.old, c.new, ATTENTION))
    rules_a = {r.get("table"): f"{r.get('column')} by attribute {r.get('attribute')}" for r in old.get("row_filters") or [] if isinstance(r, dict)}
    rules_b = {r.get("table"): f"{r.get('column')} by attribute {r.get('attribute')}" for r in new.get("row_filters") or [] if isinstance(r, dict)}
    for table in [*rules_b, *(t for t in rules_a if t not in rules_b)]:
        if rules_a.get(table) != rules_b.get(table):
            out.append(ACCESS.change("row_filter", str(table), rules_a.get(table, "none"), rules_b.get(table, "none"), ATTENTION))
    if old.get("row_filter_bypass") != new.get("row_filter_bypass"):
        shown = ["owner, steward (default)" if v is None else ", ".join(v) or "none" for v in (old.get("row_filter_bypass"), new.get("row_filter_bypass"))]
        out.append(ACCESS.change("row_filter_bypass", "row_filter_bypass", shown[0], shown[1], ATTENTION))
    # Who receives what by e-mail (lib.delivery) is an access change too: the data leaves the app.
    for key, words, added, removed in (
        ("subscriptions", subscription_words, "subscribed", "unsubscribed"),
        ("alerts", alert_words, "alert_added", "alert_removed"),
    ):
        before = [words(x) for x in old.get(key) or [] if isinstance(x, dict)]
        after = [words(x) for x in new.get(key) or [] if isinstance(x, dict)]
        out += [ACCESS.change(added, w, None, w, ATTENTION) for w in after if w not in before]
        out += [ACCESS.change(removed, w, w, None, ATTENTION) for w in before if w not in after]
    for field in ("name", "description", "tags"):
        if old.get(field) != new.get(field):
            out.append(ACCESS.change("changed", field, old.get(field), new.get(field)))
    return out


# What a subscription may send each artifact as, the first being what it goes as when `format:` is not given.
FORMATS = {"report": ("pdf", "html"), "dashboard": ("html", "png")}


def format_of(sub: Mapping[str, Any]) -> str:
    """What a subscription is sent as: its `format:` where its artifact can go so, else that artifact's first."""
    allowed = FORMATS.get(str(sub.get("send")), ("pdf",))
    return sub["format"] if sub.get("format") in allowed else allowed[0]


def _to(x: Mapping[str, Any]) -> str:
    return ", ".join(str(t) for t in x.get("to") or []) or "nobody"


def subscription_words(x: Mapping[str, Any]) -> str:
    fmt = format_of(x)
    params = ", ".join(f"{k}={v}" for k, v in (x.get("params") or {}).items())
    return f"{x.get('send')} ({fmt}{', ' + params if params else ''}) every {x.get('every')} to {_to(x)}"


def alert_words(x: Mapping[str, Any]) -> str:
    per = f" at each {x['per']}" if x.get("per") else ""
    to = [*(str(t) for t in x.get("to") or []), *([f"webhook {x['webhook']}"] if x.get("webhook") else [])]
    return f"{x.get('component')} {x.get('when')}{per} to {', '.join(to) or 'nobody'}"


def for_model(meta: Any) -> dict[str, Any]:
    """Name and description say what the workspace is for; the access lists and the policy are not the model's business."""
    meta = mapping(meta)
    return {key: meta[key] for key in ("name", "description") if key in meta}


KIND = Kind(
    name="workspace",
    file="workspace.yaml",
    schema="workspace.schema.json",
    required=True,
    checks=(access_has_owner, subscription_formats),
    diff=access_changes,
    review=ACCESS,
    model_heading="Workspace",  # one line, "Workspace: <name>", then the description
    model_empty="(unnamed)",  # the name of a workspace that has none
    model_view=for_model,
)
