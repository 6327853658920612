"""sources.yaml: where each table comes from (files, SQL, REST, MCP), and the joins declared or rejected.

Secret fields hold references (`env:NAME`, `secrets:KEY`): checks refuse anything else in them,
Review shows the references and never another value, and the model sees references only.
"""

from __future__ import annotations

import copy
import functools
from typing import Any, Callable, Mapping

from ...core.diagnostics import ERROR, Diagnostic, format_path
from .. import credentials, relationships, schemas, secrets
from ..changes import ATTENTION, INFO, Category, Change, by_key, keyed_diff, leaf_changes, mapping
from ..yamlio import Document
from .base import Kind, counted, unique

# --------------------------------------------------------------------------- checks


def no_literal_secrets(doc: Document, shown: str) -> list[Diagnostic]:
    """Credentials written into a source (see `secrets.source_problems`), and references to the app's own."""
    out = []
    for i, source in enumerate(doc.data.get("sources") or []):
        for where, check_id, message in secrets.source_problems(source):
            path = ("sources", i) + where
            fix = (
                "a reference of the source's own, e.g. env:SALES_DB_PASSWORD"
                if check_id == "secret.reserved"
                else "the credential as a reference (env:NAME or secrets:KEY) in secret_headers (rest, mcp), password (sql), env (mcp) or tls (rest, mcp)"
            )
            out.append(Diagnostic(check_id, ERROR, message, shown, doc.line_of(path, key=check_id == "secret.header"), format_path(path), fix))
    return out


def relationship_tables(doc: Document, shown: str) -> list[Diagnostic]:
    """Declared and rejected joins name tables that sources make (their columns are checked against the profile on load)."""
    return relationships.reference_problems(doc, None, shown)


# --------------------------------------------------------------------------- semantic diff

SOURCES = Category(
    "sources",
    "Sources",
    4,
    "source",
    {
        "added": "source {id} added: {new}",
        "removed": "source {id} removed (was {old})",
        "changed": "source setting {id}: {old} -> {new}",
        "declared": "join declared: {id}",
        "undeclared": "join no longer declared: {id}",
        "rejected": "join candidate rejected: {id}",
        "unrejected": "join candidate no longer rejected: {id}",
    },
)

# A source's settings that decide where its data comes from: a change there is for a reviewer to see.
_WHERE_FROM = ("type", "url", "path", "table", "query", "mode", "command", "tool", "resource")


@functools.cache
def secret_fields() -> tuple[tuple[str, ...], ...]:
    """Where a source may hold a secret reference: the values schemas/sources.schema.json marks `x-secret`,
    a field itself (`password`), a field of an object (`tls.client_key`) or every value of a mapping (`env`).
    Read from the schema on first use, not on import."""
    return schemas.secret_fields("sources", "source")


def sources_changes(old: Any, new: Any) -> list[Change]:
    """sources.yaml: sources added or removed, their settings changed, joins declared or rejected."""

    old, new = mapping(old), mapping(new)
    secret_tops = {p[0] for p in secret_fields()}

    def shown(field: str, value: Any) -> Any:
        secret = field.split(".")[0] in secret_tops or credentials.is_secret_name(field.split(".")[-1])
        if isinstance(value, str) and not secret:
            return credentials.redact_url(value)  # a URL's password or ?token=, in any string setting
        if not secret or value is None or secrets.is_reference(value):
            return value
        return "(a value that is not a reference, not shown)"

    def where(source: dict) -> str:
        bits = [f"{k} {source[k]}" for k in ("type", "path", "url", "table", "mode", "tool", "resource") if isinstance(source.get(k), str)]
        return credentials.redact_url(", ".join(bits))

    out: list[Change] = []
    a, b = by_key(old.get("sources"), "name"), by_key(new.get("sources"), "name")
    added, removed, kept = keyed_diff(a, b)
    out += [SOURCES.change("added", name, None, where(b[name]), ATTENTION) for name in added]
    out += [SOURCES.change("removed", name, where(a[name]), None, ATTENTION) for name in removed]
    for name in kept:
        for c in leaf_changes(SOURCES, a[name], b[name]):
            field = c.id
            top = field.split(".")[0]
            severity = ATTENTION if top in _WHERE_FROM or top in secret_tops else INFO
            out.append(SOURCES.change("changed", f"{name}.{field}", shown(field, c.old), shown(field, c.new), severity))
    for key, on, off in (("relationships", "declared", "undeclared"), ("rejected_relationships", "rejected", "unrejected")):
        pairs_a = _pairs(old.get(key))
        pairs_b = _pairs(new.get(key))
        out += [SOURCES.change(on, p, None, p) for p in pairs_b if p not in pairs_a]
        out += [SOURCES.change(off, p, p, None) for p in pairs_a if p not in pairs_b]
    return out


def _pairs(items: Any) -> list[str]:
    return [f"{r.get('from')} -> {r.get('to')}" for r in items if isinstance(r, dict)] if isinstance(items, list) else []


# --------------------------------------------------------------------------- what the model sees


def without_secrets(sources: Mapping[str, Any] | None) -> Any:
    """sources.yaml as the model may see it: references stay, any literal secret becomes <hidden>.

    Validation already refuses literal secrets; this guards a workspace that
    was composed without being validated, because the prompt leaves the machine.
    """
    if not sources:
        return sources
    clean = copy.deepcopy(dict(sources))

    for source in clean.get("sources") or []:
        if not isinstance(source, dict):
            continue
        for path in secret_fields():
            _hide_literals(source, path, secrets.is_reference)
        if isinstance(source.get("url"), str):
            source["url"] = credentials.redact_url(source["url"], "<hidden>")
    return clean


def _hide_literals(node: Any, path: tuple[str, ...], is_reference: Callable[[Any], bool]) -> None:
    """Every value at `path` inside `node` (`*` for any key) that is not a reference becomes <hidden>, in place."""
    if not isinstance(node, dict):
        return
    head, rest = path[0], path[1:]
    for key in list(node) if head == schemas.ANY_KEY else [head] if head in node else []:
        if rest:
            _hide_literals(node[key], rest, is_reference)
        elif not is_reference(node[key]):
            node[key] = "<hidden>"


def merge_sources(current: Any, incoming: Any, source: str) -> tuple[dict[str, Any], list[str]]:
    """Importing sources adds the ones whose table name is free here; one defined the same way here already is
    skipped; one whose name a different source here holds is not imported (renaming a table would break what
    reads it), and the sentence says so. Relationships follow only between tables both imported or present."""
    current, incoming = dict(mapping(current)), mapping(incoming)
    listed = list(current.get("sources") or [])
    by_name = {s.get("name"): s for s in listed}
    added, same, clashing = [], [], []
    for src in incoming.get("sources") or []:
        name = src.get("name")
        if name not in by_name:
            listed.append(src)
            by_name[name] = src
            added.append(name)
        elif by_name[name] == src:
            same.append(name)
        else:
            clashing.append(name)
    notes = ["added " + counted(added, "source")]
    if same:
        notes.append(counted(same, "source", " already here, defined the same way"))
    if clashing:
        notes.append(f"not imported: {', '.join(clashing)}, as a different source here has that table name; rename one of them first")
    current["sources"] = listed
    rels = list(current.get("relationships") or [])
    for rel in incoming.get("relationships") or []:
        tables = {str(rel.get(side, "")).split(".", 1)[0] for side in ("from", "to")}
        if rel not in rels and tables <= set(by_name):
            rels.append(rel)
    if rels:
        current["relationships"] = rels
    return current, notes


KIND = Kind(
    name="sources",
    file="sources.yaml",
    schema="sources.schema.json",
    required=True,
    checks=(unique("sources", "name", "source name"), no_literal_secrets, relationship_tables),
    diff=sources_changes,
    review=SOURCES,
    model_heading="Tool configurations (sources.yaml)",
    model_empty="No sources are connected yet.",
    model_view=without_secrets,
    merge=merge_sources,
)
