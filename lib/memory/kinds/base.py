"""`Kind`: everything the code knows about one memory kind, and the small pieces kinds share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ...core.diagnostics import ERROR, Diagnostic, format_path
from ..changes import Category, Change, by_key, keyed_diff, mapping, same_sql
from ..yamlio import Document

# A semantic check: what JSON Schema cannot say about a valid document. (document, file name shown) -> findings.
Check = Callable[[Document, str], list[Diagnostic]]
# A semantic diff: (old content, new content; None for an absent file) -> what the change means.
Diff = Callable[[Any, Any], list[Change]]
# Importing a kind from another workspace: (this workspace's content or None, the imported content, the other
# workspace's slug) -> (the merged content, sentences saying what was added, kept apart, skipped or replaced).
Merge = Callable[[Any, Any, str], tuple[Any, list[str]]]


def as_is(content: Any) -> Any:
    """What the model sees of most kinds: the whole content."""
    return content


@dataclass(frozen=True)
class Kind:
    """One memory kind: its file, its schema, its checks, what a change to it means, and what the model sees of it.

    The fields are read where the operation lives: lib/memory/workspace.py loads and checks files,
    lib/memory/semantic_diff.py puts the diffs together for Review, lib/chat/compose.py writes the
    model's prompt (and decides which part of it each kind goes in).
    """

    name: str  # "task": the key of `Workspace.data` and of the registry
    file: str  # "task.yaml", in a workspace folder
    schema: str  # "task.schema.json", in schemas/
    required: bool  # a workspace must have the file (a profile, a dashboard and a report come later)
    checks: tuple[Check, ...]  # run, in order, on a document that passed its schema
    diff: Diff
    review: Category  # the group Review shows the diff's changes in, with its title and sentences
    model_heading: str  # the prompt's heading over the kind's section ("Task specifications (task.yaml)")
    model_empty: str  # the section's text when the kind has no content ("No task rules yet."); "" for none
    model_view: Callable[[Any], Any] = as_is  # the content as the model may see it (secrets out, access lists out)
    model_empty_heading: str | None = None  # the heading over `model_empty`, when not `model_heading`
    merge: Merge | None = None  # how an import from another workspace merges; None: it replaces the file


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def counted(names: list[str], word: str, how: str = "") -> str:
    """'3 task rules (a, b, c)', '1 source already here (x)': how many, the word, how they fared, which."""
    return f"{plural(len(names), word)}{how}" + (f" ({', '.join(names)})" if names else "")


def unique(list_key: str, item_key: str, what: str) -> Check:
    """A check that every item of the list `list_key` has its own `item_key`."""

    def check(doc: Document, shown: str) -> list[Diagnostic]:
        seen: dict[Any, int] = {}
        out = []
        for i, item in enumerate(doc.data.get(list_key) or []):
            value = item.get(item_key)
            if value in seen:
                path = (list_key, i, item_key)
                out.append(
                    Diagnostic(
                        f"{what}.duplicate",
                        ERROR,
                        f"duplicate {what} {value!r} (first at {list_key}[{seen[value]}])",
                        shown,
                        doc.line_of(path),
                        format_path(path),
                        f"a unique {item_key}",
                    )
                )
            else:
                seen[value] = i
        return out

    check.__name__ = f"unique_{what}"
    return check


def artifact_changes(old: Any, new: Any, category: Category) -> list[Change]:
    """What changed in an artifact's spec (a dashboard, or a report seen as one): components added, removed or
    requerying (their SQL changed), other edits; filters; title; layout; reported under `category`."""
    old, new = mapping(old), mapping(new)
    out: list[Change] = []
    for field in ("title", "description"):
        if old.get(field) != new.get(field):
            out.append(category.change("title", field, old.get(field), new.get(field)))
    a, b = by_key(old.get("components"), "id"), by_key(new.get("components"), "id")
    added, removed, kept = keyed_diff(a, b)
    label = lambda c: f"{c.get('type', '?')} {c.get('title') or ''}".strip()  # noqa: E731
    out += [category.change("added", cid, None, label(b[cid])) for cid in added]
    out += [category.change("removed", cid, label(a[cid]), None) for cid in removed]
    for cid in kept:
        before, after = a[cid], b[cid]
        for sql_field in ("query", "queries"):
            if not same_sql(before.get(sql_field), after.get(sql_field)):
                out.append(category.change("requery", cid, before.get(sql_field), after.get(sql_field)))
        rest = sorted(k for k in {*before, *after} - {"query", "queries"} if before.get(k) != after.get(k))
        if rest:
            out.append(category.change("changed", cid, {k: before.get(k) for k in rest}, {k: after.get(k) for k in rest}))
    fa, fb = by_key(old.get("filters"), "id"), by_key(new.get("filters"), "id")
    added, removed, kept = keyed_diff(fa, fb)
    out += [category.change("filter_added", fid, None, fb[fid].get("label") or fb[fid].get("type")) for fid in added]
    out += [category.change("filter_removed", fid, fa[fid].get("label") or fa[fid].get("type"), None) for fid in removed]
    for fid in kept:
        if fa[fid] != fb[fid]:
            fields = sorted(k for k in {*fa[fid], *fb[fid]} if fa[fid].get(k) != fb[fid].get(k))
            out.append(category.change("filter_changed", fid, {k: fa[fid].get(k) for k in fields}, {k: fb[fid].get(k) for k in fields}))
    if old.get("layout") != new.get("layout") and old.get("layout") is not None and new.get("layout") is not None:
        out.append(category.change("layout", "layout"))
    return out
