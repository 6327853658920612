"""What a change means, the generic part: the `Change` record, its severities and sentences, and the
helpers the memory kinds (lib/memory/kinds/) build their semantic diffs from.

Each kind's diff reports its changes under one `Category`, which says how Review titles them and
how each kind of change reads as a sentence ("task rule {id} reworded: {old} -> {new}");
lib/memory/semantic_diff.py puts the kinds' diffs together.

Pure: no git, no files, no Streamlit.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields
from typing import Any, Mapping

INFO = "info"
ATTENTION = "attention"  # access, publishing policy, where data comes from: what a reviewer must not miss

FALLBACK_SENTENCE = "{what} {id}: {old} -> {new}"


@dataclass(frozen=True, eq=False)
class Category:
    """A group of changes as Review shows it: its heading, its place among the others, its sentences."""

    name: str  # Change.category: "task"; "access" for workspace.yaml
    title: str  # Review's heading over the group: "Task rules"
    rank: int  # the groups' order on Review and in `diff --semantic`: a file left out first, who may do what, the figures' shape last
    what: str  # what a sentence calls the thing changed: "task rule"
    sentences: Mapping[str, str]  # Change.kind -> template with {what}, {id}, {old}, {new}

    def change(self, kind: str, id: str, old: Any = None, new: Any = None, severity: str = INFO) -> Change:
        return Change(self.name, kind, id, old, new, severity, self)


@dataclass(frozen=True)
class Change:
    category: str  # a Category's name
    kind: str  # added | removed | reworded | check_added | check_removed | check_changed | changed | requery | granted | revoked | declared | ...
    id: str  # what changed: a rule id, `source.field`, a component id, `theme.primary`, a role
    old: Any = None
    new: Any = None
    severity: str = INFO
    wording: Category | None = field(default=None, compare=False, repr=False)  # how it reads; not part of the record

    def to_dict(self) -> dict[str, Any]:
        record = {f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self) if f.name != "wording"}
        return {**record, "text": self.describe()}

    def describe(self) -> str:
        """One sentence for a person; values are shortened, the YAML diff below has them whole."""
        wording = self.wording
        template = (wording.sentences.get(self.kind) if wording else None) or FALLBACK_SENTENCE
        old, new = short_pair(self.old, self.new)
        return template.format(what=wording.what if wording else self.category, id=self.id, old=old, new=new)


# A file one version cannot parse: not a memory kind's change, shown before all of them.
FILE = Category("file", "Files", 0, "file", {"unreadable": "{id} could not be read, so its meaning is not summarised: {new}"})


def unreadable(kind_file: str, problem: str) -> Change:
    """A file one version cannot parse: said once, instead of reading it as emptied."""
    return FILE.change("unreadable", kind_file, None, problem, ATTENTION)


# --------------------------------------------------------------------------- helpers for the kinds' diffs


def short_pair(old: Any, new: Any, limit: int = 90) -> tuple[str, str]:
    """Both sides shortened; two long texts are shown from a little before where they first differ, so the change shows."""
    if not (isinstance(old, str) and isinstance(new, str)):
        return short(old, limit), short(new, limit)
    a, b = " ".join(old.split()), " ".join(new.split())
    if max(len(a), len(b)) <= limit:
        return repr(a), repr(b)
    same = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    start = max(0, same - 30)
    cut = lambda t: ("…" if start else "") + t[start:]  # noqa: E731
    return short(cut(a), limit), short(cut(b), limit)


def short(value: Any, limit: int = 90) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, str):
        text = " ".join(value.split())  # SQL and prose over several lines read as one here
        text = repr(text) if len(text) <= limit else repr(text[: limit - 1] + "…")
        return text
    text = _compact(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _compact(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_compact(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_compact(v) for v in value) + "]"
    return str(value)


def mapping(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def by_key(items: Any, key: str) -> dict[str, dict]:
    """A list of mappings keyed by one field; entries without it (invalid files) are left out, not guessed."""
    out: dict[str, dict] = {}
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and isinstance(item.get(key), str | int):
            out.setdefault(str(item[key]), item)
    return out


def keyed_diff(old: dict[str, Any], new: dict[str, Any]) -> tuple[list[str], list[str], list[str]]:
    """Keys added, removed and kept (in new's order, then old's)."""
    added = [k for k in new if k not in old]
    removed = [k for k in old if k not in new]
    kept = [k for k in new if k in old]
    return added, removed, kept


def same_sql(a: Any, b: Any) -> bool:
    """SQL that differs only in whitespace runs the same query."""
    norm = lambda v: " ".join(v.split()) if isinstance(v, str) else v  # noqa: E731
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(norm(a[k]) == norm(b[k]) for k in a)
    return norm(a) == norm(b)


def leaves(value: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted paths of a mapping's leaves; lists are leaves (a palette is one setting)."""
    if not isinstance(value, dict):
        return {prefix: value} if prefix else {}
    out: dict[str, Any] = {}
    for key, sub in value.items():
        out.update(leaves(sub, f"{prefix}.{key}" if prefix else str(key)))
    return out


def leaf_changes(category: Category, old: Any, new: Any, *, prefix: str = "", severity: str = INFO) -> list[Change]:
    """Each leaf added, removed or changed, in new's order then old's."""
    a, b = leaves(old, prefix), leaves(new, prefix)
    out = []
    for path in [*b, *(p for p in a if p not in b)]:
        if path not in a:
            out.append(category.change("added", path, None, b[path], severity))
        elif path not in b:
            out.append(category.change("removed", path, a[path], None, severity))
        elif a[path] != b[path]:
            out.append(category.change("changed", path, a[path], b[path], severity))
    return out
