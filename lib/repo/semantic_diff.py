"""What a change to a workspace means, before the YAML lines that make it.

`changes(old, new)` takes two parsed versions of one workspace (memory kind -> data, as
`Workspace.data` holds them; a kind that is absent is an empty file) and returns `Change`
records: a task rule reworded, a component that now runs other SQL, a viewer added. One small
function per memory category builds them, so each can be read and tested alone; Review and
`python -m lib diff --semantic` show their `describe()` above the per-file diff.

Pure: no git, no files, no Streamlit. The profile is summarised by shape only (tables and
columns added, removed or retyped): its figures change on every refresh and say nothing a
reviewer decides on. Secret fields hold references (`env:NAME`), which are shown; anything
else in a secret field is never repeated.
"""

from __future__ import annotations

import difflib
from dataclasses import asdict, dataclass
from typing import Any, Callable

from ..memory import schemas, secrets
from ..memory.spec import report_components

INFO = "info"
ATTENTION = "attention"  # access, publishing policy, where data comes from: what a reviewer must not miss

# Categories in the order a reviewer reads them: a file left out of the summary, then who may do what,
# the figures' shape last.
CATEGORY_TITLES = {
    "file": "Files",
    "access": "Access",
    "task": "Task rules",
    "output": "Output constraints",
    "sources": "Sources",
    "dashboard": "Dashboard",
    "report": "Report",
    "profile": "Data profile",
}


@dataclass(frozen=True)
class Change:
    category: str  # a key of CATEGORY_TITLES
    kind: str  # added | removed | reworded | check_added | check_removed | check_changed | changed | requery | granted | revoked | declared | ...
    id: str  # what changed: a rule id, `source.field`, a component id, `theme.primary`, a role
    old: Any = None
    new: Any = None
    severity: str = INFO

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "text": self.describe()}

    def describe(self) -> str:
        """One sentence for a person; values are shortened, the YAML diff below has them whole."""
        template = _SENTENCES.get((self.category, self.kind)) or _SENTENCES.get(("*", self.kind)) or "{what} {id}: {old} -> {new}"
        old, new = _short_pair(self.old, self.new)
        return template.format(what=_WHAT.get(self.category, self.category), id=self.id, old=old, new=new)


_WHAT = {
    "access": "access",
    "task": "task rule",
    "output": "output",
    "sources": "source",
    "dashboard": "component",
    "report": "report",
    "profile": "profile",
    "file": "file",
}
_SENTENCES = {
    ("access", "granted"): "{new} added to {id}",
    ("access", "revoked"): "{old} removed from {id}",
    ("access", "policy"): "publishing policy {id}: {old} -> {new}",
    ("access", "changed"): "workspace {id}: {old} -> {new}",
    ("task", "added"): "task rule {id} added: {new}",
    ("task", "removed"): "task rule {id} removed: {old}",
    ("task", "reworded"): "task rule {id} reworded: {old} -> {new}",
    ("task", "check_added"): "task rule {id} is now checked: {new}",
    ("task", "check_removed"): "task rule {id} is no longer checked (was {old})",
    ("task", "check_changed"): "task rule {id} check changed: {old} -> {new}",
    ("task", "goal"): "task goal changed: {old} -> {new}",
    ("task", "changed"): "task rule {id} changed: {old} -> {new}",
    ("output", "added"): "output constraint {id} set to {new}",
    ("output", "removed"): "output constraint {id} removed (was {old})",
    ("output", "changed"): "output constraint {id}: {old} -> {new}",
    ("sources", "added"): "source {id} added: {new}",
    ("sources", "removed"): "source {id} removed (was {old})",
    ("sources", "changed"): "source setting {id}: {old} -> {new}",
    ("sources", "declared"): "join declared: {id}",
    ("sources", "undeclared"): "join no longer declared: {id}",
    ("sources", "rejected"): "join candidate rejected: {id}",
    ("sources", "unrejected"): "join candidate no longer rejected: {id}",
    ("dashboard", "added"): "component {id} added: {new}",
    ("dashboard", "removed"): "component {id} removed (was {old})",
    ("dashboard", "requery"): "component {id} runs different SQL: {old} -> {new}",
    ("dashboard", "changed"): "component {id} changed: {old} -> {new}",
    ("dashboard", "filter_added"): "filter {id} added: {new}",
    ("dashboard", "filter_removed"): "filter {id} removed (was {old})",
    ("dashboard", "filter_changed"): "filter {id} changed: {old} -> {new}",
    ("dashboard", "title"): "dashboard {id}: {old} -> {new}",
    ("dashboard", "layout"): "dashboard layout changed",
    ("report", "added"): "report component {id} added: {new}",
    ("report", "removed"): "report component {id} removed (was {old})",
    ("report", "requery"): "report component {id} runs different SQL: {old} -> {new}",
    ("report", "changed"): "report component {id} changed: {old} -> {new}",
    ("report", "filter_added"): "report parameter {id} added: {new}",
    ("report", "filter_removed"): "report parameter {id} removed (was {old})",
    ("report", "filter_changed"): "report parameter {id} changed: {old} -> {new}",
    ("report", "title"): "report {id}: {old} -> {new}",
    ("report", "query_added"): "report query {id} added: {new}",
    ("report", "query_removed"): "report query {id} removed (was {old})",
    ("report", "query_changed"): "report query {id} runs different SQL: {old} -> {new}",
    ("report", "reworded"): "report {id} reworded: {old} -> {new}",
    ("report", "section_added"): "report section {id} added at sections[{new}]",  # old and new: positions in `sections`
    ("report", "section_removed"): "report section {id} removed from sections[{old}]",
    ("report", "section_moved"): "report section {id} moved: sections[{old}] -> sections[{new}]",
    ("profile", "table_added"): "profile: table {id} added",
    ("profile", "table_removed"): "profile: table {id} removed",
    ("profile", "column_added"): "profile: column {id} added ({new})",
    ("profile", "column_removed"): "profile: column {id} removed (was {old})",
    ("profile", "retyped"): "profile: column {id} type {old} -> {new}",
    ("file", "unreadable"): "{id} could not be read, so its meaning is not summarised: {new}",
}


def _short_pair(old: Any, new: Any, limit: int = 90) -> tuple[str, str]:
    """Both sides shortened; two long texts are shown from a little before where they first differ, so the change shows."""
    if not (isinstance(old, str) and isinstance(new, str)):
        return _short(old, limit), _short(new, limit)
    a, b = " ".join(old.split()), " ".join(new.split())
    if max(len(a), len(b)) <= limit:
        return repr(a), repr(b)
    same = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    start = max(0, same - 30)
    cut = lambda t: ("…" if start else "") + t[start:]  # noqa: E731
    return _short(cut(a), limit), _short(cut(b), limit)


def _short(value: Any, limit: int = 90) -> str:
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


def _mapping(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _by_key(items: Any, key: str) -> dict[str, dict]:
    """A list of mappings keyed by one field; entries without it (invalid files) are left out, not guessed."""
    out: dict[str, dict] = {}
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and isinstance(item.get(key), str | int):
            out.setdefault(str(item[key]), item)
    return out


def _keyed_diff(old: dict[str, Any], new: dict[str, Any]) -> tuple[list[str], list[str], list[str]]:
    """Keys added, removed and kept (in new's order, then old's)."""
    added = [k for k in new if k not in old]
    removed = [k for k in old if k not in new]
    kept = [k for k in new if k in old]
    return added, removed, kept


def _same_sql(a: Any, b: Any) -> bool:
    """SQL that differs only in whitespace runs the same query."""
    norm = lambda v: " ".join(v.split()) if isinstance(v, str) else v  # noqa: E731
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(norm(a[k]) == norm(b[k]) for k in a)
    return norm(a) == norm(b)


def _leaves(value: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted paths of a mapping's leaves; lists are leaves (a palette is one setting)."""
    if not isinstance(value, dict):
        return {prefix: value} if prefix else {}
    out: dict[str, Any] = {}
    for key, sub in value.items():
        out.update(_leaves(sub, f"{prefix}.{key}" if prefix else str(key)))
    return out


def _leaf_changes(category: str, old: Any, new: Any, *, prefix: str = "", severity: str = INFO) -> list[Change]:
    a, b = _leaves(old, prefix), _leaves(new, prefix)
    out = []
    for path in [*b, *(p for p in a if p not in b)]:
        if path not in a:
            out.append(Change(category, "added", path, None, b[path], severity))
        elif path not in b:
            out.append(Change(category, "removed", path, a[path], None, severity))
        elif a[path] != b[path]:
            out.append(Change(category, "changed", path, a[path], b[path], severity))
    return out


# --------------------------------------------------------------------------- one function per category


def access_changes(old: Any, new: Any) -> list[Change]:
    """workspace.yaml: who may view, edit and publish (each principal granted or revoked), and the policy."""
    old, new = _mapping(old), _mapping(new)
    out: list[Change] = []
    a, b = _mapping(old.get("access")), _mapping(new.get("access"))
    for role in [*b, *(r for r in a if r not in b)]:
        before = [p for p in a.get(role) or [] if isinstance(p, str)]
        after = [p for p in b.get(role) or [] if isinstance(p, str)]
        out += [Change("access", "granted", role, None, p, ATTENTION) for p in after if p not in before]
        out += [Change("access", "revoked", role, p, None, ATTENTION) for p in before if p not in after]
    for c in _leaf_changes("access", old.get("policy"), new.get("policy"), severity=ATTENTION):
        out.append(Change("access", "policy", c.id, c.old, c.new, ATTENTION))
    for field in ("name", "description", "tags"):
        if old.get(field) != new.get(field):
            out.append(Change("access", "changed", field, old.get(field), new.get(field)))
    return out


def task_changes(old: Any, new: Any) -> list[Change]:
    """task.yaml: the goal, and each rule by id: added, removed, reworded, its check added, removed or changed."""
    old, new = _mapping(old), _mapping(new)
    out: list[Change] = []
    if old.get("goal") != new.get("goal"):
        out.append(Change("task", "goal", "goal", old.get("goal"), new.get("goal")))
    a, b = _by_key(old.get("rules"), "id"), _by_key(new.get("rules"), "id")
    added, removed, kept = _keyed_diff(a, b)
    out += [Change("task", "added", rid, None, b[rid].get("text")) for rid in added]
    out += [Change("task", "removed", rid, a[rid].get("text"), None) for rid in removed]
    for rid in kept:
        before, after = a[rid], b[rid]
        if before.get("text") != after.get("text"):
            out.append(Change("task", "reworded", rid, before.get("text"), after.get("text")))
        check_a, check_b = before.get("check"), after.get("check")
        if check_a != check_b:
            kind = "check_added" if check_a is None else "check_removed" if check_b is None else "check_changed"
            out.append(Change("task", kind, rid, check_a, check_b))
        for field in ("tags", "last_confirmed"):
            if before.get(field) != after.get(field):
                out.append(Change("task", "changed", f"{rid}.{field}", before.get(field), after.get(field)))
    return out


def output_changes(old: Any, new: Any) -> list[Change]:
    """output.yaml: each constraint (data injection, theme, formats, layout, notes) old -> new."""
    return _leaf_changes("output", _mapping(old), _mapping(new))


# A source's settings that decide where its data comes from: a change there is for a reviewer to see.
_WHERE_FROM = ("type", "url", "path", "table", "query", "mode", "command", "tool", "resource")


def sources_changes(old: Any, new: Any) -> list[Change]:
    """sources.yaml: sources added or removed, their settings changed, joins declared or rejected."""

    old, new = _mapping(old), _mapping(new)
    secret_paths = schemas.secret_fields("sources", "source")
    secret_tops = {p[0] for p in secret_paths}

    def shown(field: str, value: Any) -> Any:
        secret = field.split(".")[0] in secret_tops or secrets.is_secret_name(field.split(".")[-1])
        if isinstance(value, str) and not secret:
            return secrets.redact_url(value)  # a URL's password or ?token=, in any string setting
        if not secret or value is None or secrets.is_reference(value):
            return value
        return "(a value that is not a reference, not shown)"

    def where(source: dict) -> str:
        bits = [f"{k} {source[k]}" for k in ("type", "path", "url", "table", "mode", "tool", "resource") if isinstance(source.get(k), str)]
        return secrets.redact_url(", ".join(bits))

    out: list[Change] = []
    a, b = _by_key(old.get("sources"), "name"), _by_key(new.get("sources"), "name")
    added, removed, kept = _keyed_diff(a, b)
    out += [Change("sources", "added", name, None, where(b[name]), ATTENTION) for name in added]
    out += [Change("sources", "removed", name, where(a[name]), None, ATTENTION) for name in removed]
    for name in kept:
        for c in _leaf_changes("sources", a[name], b[name]):
            field = c.id
            top = field.split(".")[0]
            severity = ATTENTION if top in _WHERE_FROM or top in secret_tops else INFO
            out.append(Change("sources", "changed", f"{name}.{field}", shown(field, c.old), shown(field, c.new), severity))
    for key, on, off in (("relationships", "declared", "undeclared"), ("rejected_relationships", "rejected", "unrejected")):
        pairs_a = _pairs(old.get(key))
        pairs_b = _pairs(new.get(key))
        out += [Change("sources", on, p, None, p) for p in pairs_b if p not in pairs_a]
        out += [Change("sources", off, p, p, None) for p in pairs_a if p not in pairs_b]
    return out


def _pairs(items: Any) -> list[str]:
    return [f"{r.get('from')} -> {r.get('to')}" for r in items if isinstance(r, dict)] if isinstance(items, list) else []


def dashboard_changes(old: Any, new: Any) -> list[Change]:
    """dashboard.yaml: components added, removed or requerying (their SQL changed), other edits; filters; title; layout."""
    old, new = _mapping(old), _mapping(new)
    out: list[Change] = []
    for field in ("title", "description"):
        if old.get(field) != new.get(field):
            out.append(Change("dashboard", "title", field, old.get(field), new.get(field)))
    a, b = _by_key(old.get("components"), "id"), _by_key(new.get("components"), "id")
    added, removed, kept = _keyed_diff(a, b)
    label = lambda c: f"{c.get('type', '?')} {c.get('title') or ''}".strip()  # noqa: E731
    out += [Change("dashboard", "added", cid, None, label(b[cid])) for cid in added]
    out += [Change("dashboard", "removed", cid, label(a[cid]), None) for cid in removed]
    for cid in kept:
        before, after = a[cid], b[cid]
        for sql_field in ("query", "queries"):
            if not _same_sql(before.get(sql_field), after.get(sql_field)):
                out.append(Change("dashboard", "requery", cid, before.get(sql_field), after.get(sql_field)))
        rest = sorted(k for k in {*before, *after} - {"query", "queries"} if before.get(k) != after.get(k))
        if rest:
            out.append(Change("dashboard", "changed", cid, {k: before.get(k) for k in rest}, {k: after.get(k) for k in rest}))
    fa, fb = _by_key(old.get("filters"), "id"), _by_key(new.get("filters"), "id")
    added, removed, kept = _keyed_diff(fa, fb)
    out += [Change("dashboard", "filter_added", fid, None, fb[fid].get("label") or fb[fid].get("type")) for fid in added]
    out += [Change("dashboard", "filter_removed", fid, fa[fid].get("label") or fa[fid].get("type"), None) for fid in removed]
    for fid in kept:
        if fa[fid] != fb[fid]:
            fields = sorted(k for k in {*fa[fid], *fb[fid]} if fa[fid].get(k) != fb[fid].get(k))
            out.append(Change("dashboard", "filter_changed", fid, {k: fa[fid].get(k) for k in fields}, {k: fb[fid].get(k) for k in fields}))
    if old.get("layout") != new.get("layout") and old.get("layout") is not None and new.get("layout") is not None:
        out.append(Change("dashboard", "layout", "layout"))
    return out


def profile_changes(old: Any, new: Any) -> list[Change]:
    """profile.yaml by shape only: tables and columns added, removed or retyped; never its figures."""
    a, b = _by_key(_mapping(old).get("tables"), "name"), _by_key(_mapping(new).get("tables"), "name")
    added, removed, kept = _keyed_diff(a, b)
    out = [Change("profile", "table_added", t, None, None) for t in added]
    out += [Change("profile", "table_removed", t, None, None) for t in removed]
    for t in kept:
        ca, cb = _by_key(a[t].get("columns"), "name"), _by_key(b[t].get("columns"), "name")
        cols_added, cols_removed, cols_kept = _keyed_diff(ca, cb)
        out += [Change("profile", "column_added", f"{t}.{c}", None, cb[c].get("type")) for c in cols_added]
        out += [Change("profile", "column_removed", f"{t}.{c}", ca[c].get("type"), None) for c in cols_removed]
        out += [Change("profile", "retyped", f"{t}.{c}", ca[c].get("type"), cb[c].get("type")) for c in cols_kept if ca[c].get("type") != cb[c].get("type")]
    return out


def report_changes(old: Any, new: Any) -> list[Change]:
    """report.yaml: its components and parameters as a dashboard's are compared; its named queries;
    its sections aligned (`_section_changes`): added, removed, moved, headings and prose reworded."""

    old, new = _mapping(old), _mapping(new)

    def as_dashboard(report: dict) -> dict:
        return {
            "title": report.get("title"),
            "description": report.get("description"),
            "components": [spec for _, spec in report_components(report)],
            "filters": report.get("parameters"),
        }

    out = [Change("report", c.kind, c.id, c.old, c.new, c.severity) for c in dashboard_changes(as_dashboard(old), as_dashboard(new))]
    qa, qb = _mapping(old.get("queries")), _mapping(new.get("queries"))
    out += [Change("report", "query_added", name, None, qb[name]) for name in qb if name not in qa]
    out += [Change("report", "query_removed", name, qa[name], None) for name in qa if name not in qb]
    out += [Change("report", "query_changed", name, qa[name], qb[name]) for name in qa if name in qb and not _same_sql(qa[name], qb[name])]
    return out + _section_changes(old, new)


def _section_changes(old: dict, new: dict) -> list[Change]:
    """The document's outline, aligned section by section (difflib), so one inserted heading is one change
    and not a shifted outline: sections added, removed or moved; headings and prose reworded in place.

    A chart, table or KPI row that comes or goes is already a component added or removed;
    here it is named only when it moves.
    """
    a, b = _outline(old), _outline(new)
    matcher = difflib.SequenceMatcher(a=[key for key, _, _ in a], b=[key for key, _, _ in b], autojunk=False)
    out: list[Change] = []
    gone: list[int] = []  # positions in `a` of sections no longer where they were
    came: list[int] = []  # positions in `b` of sections new where they are
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        kinds_a, kinds_b = [a[i][1] for i in range(i1, i2)], [b[j][1] for j in range(j1, j2)]
        if tag == "replace" and kinds_a == kinds_b and set(kinds_a) <= {"heading", "prose"}:
            out += [Change("report", "reworded", f"{b[j][1]} sections[{j}]", a[i][2], b[j][2]) for i, j in zip(range(i1, i2), range(j1, j2))]
            continue
        gone += range(i1, i2)
        came += range(j1, j2)
    for j in came:
        key, kind, says = b[j]
        i = next((i for i in gone if a[i][0] == key), None)
        if i is not None:
            gone.remove(i)
            out.append(Change("report", "section_moved", _section_label(kind, says), i, j))
        elif kind in _PLAIN_SECTIONS:
            out.append(Change("report", "section_added", _section_label(kind, says), None, j))
    out += [Change("report", "section_removed", _section_label(a[i][1], a[i][2]), i, None) for i in gone if a[i][1] in _PLAIN_SECTIONS]
    return out


_PLAIN_SECTIONS = ("heading", "prose", "page_break")  # the sections that are no component (they have no id)


def _section_label(kind: str, says: Any) -> str:
    """ "heading 'Overview'", "prose 'Week {{week.week}} …'", "chart daily", "page_break"."""
    if says is None:
        return kind
    return f"{kind} {_short(says, 60)}" if kind in ("heading", "prose") else f"{kind} {says}"


def _outline(report: dict) -> list[tuple[str, str, Any]]:
    """Each section as (key, type, what it says): a heading's text, prose's markdown, a component's id
    (a KPI row's card ids). The key is what aligns one version's sections with the other's."""
    sections = report.get("sections")
    out: list[tuple[str, str, Any]] = []
    for s in sections if isinstance(sections, list) else []:
        s = _mapping(s)
        kind = str(s.get("type", "?"))
        if kind == "kpis":
            cards = s.get("components")
            says: Any = ", ".join(str(_mapping(c).get("id")) for c in cards) if isinstance(cards, list) else None
        elif kind in ("heading", "prose"):
            says = s.get("text") if kind == "heading" else s.get("markdown")
        else:
            says = s.get("id")
        out.append((f"{kind}\0{says}", kind, says))
    return out


CATEGORY_DIFFS: dict[str, Callable[[Any, Any], list[Change]]] = {
    "workspace": access_changes,
    "task": task_changes,
    "output": output_changes,
    "sources": sources_changes,
    "dashboard": dashboard_changes,
    "report": report_changes,
    "profile": profile_changes,
}


def changes(old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    """Every meaningful change from OLD to NEW (memory kind -> parsed data), access first."""
    out: list[Change] = []
    for kind, diff in CATEGORY_DIFFS.items():
        out += diff(old.get(kind), new.get(kind))
    order = list(CATEGORY_TITLES)
    return sorted(out, key=lambda c: order.index(c.category))  # stable: within a category, the functions' order


def unreadable(kind_file: str, problem: str) -> Change:
    """A file one version cannot parse: said once, instead of reading it as emptied."""
    return Change("file", "unreadable", kind_file, None, problem, ATTENTION)


def format_text(found: list[Change]) -> str:
    """The changes grouped by category, for the command line; attention items marked with `!`."""
    if not found:
        return "no changes in meaning"
    lines: list[str] = []
    for category, title in CATEGORY_TITLES.items():
        group = [c for c in found if c.category == category]
        if group:
            lines.append(f"{title}:")
            lines += [f"  {'!' if c.severity == ATTENTION else '-'} {c.describe()}" for c in group]
    return "\n".join(lines)
