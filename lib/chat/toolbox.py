"""The model's tools at work inside one session: executing the calls, keeping the draft and the proposals.

The schemas the model sees are in `lib.chat.agent_tools`; this module runs them.

    run_sql          one SELECT through the query engine (lib.data.engine: sandboxed on the snapshot, or read-only in a
                     live source's database), rows capped, a compact text table back
    write_dashboard  edit mode: parse, validate (schema + lib.artifacts.checks on the current data), keep as the
                     session's draft even when invalid, and return the diff plus every problem found
    write_report     edit mode: the same for report.yaml (lib.artifacts.checks with kind="report")
    edit_dashboard   edit mode: one component replaced by id, or one exact text replacement (old_string must occur
    edit_report      exactly once), on the draft or else the current file; the result then goes the way of a
                     whole write (parsed, kept as the draft, checked, the diff and the problems back)
    propose_rule     edit mode: a task rule proposal, validated against task.yaml's rule shape; collected,
                     never written

A call that does not fit its tool (missing or mistyped input, YAML that does
not parse, an old_string that occurs no time or more than once, a tool the mode
does not offer) comes back as an `is_error` result
that says what was wrong, marked `malformed`, so the agent can bound retries.
Failed checks and failed SQL are ordinary feedback, not malformed calls.
"""

from __future__ import annotations

import copy
import datetime as dt
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

import yaml
from jsonschema import Draft202012Validator

from ..artifacts import checks
from ..core.diagnostics import ERROR, Diagnostic
from ..data.engine import Engine, QueryCache
from ..data.sandbox import QueryError
from ..memory import schemas, workspace
from ..memory.yamlio import YamlSyntaxError, parse
from ..roles.access import User
from .agent_tools import ARTIFACT_TOOLS, EDIT_TOOLS, SQL_MAX_ROWS, TOOLS_BY_MODE, WRITE_TOOLS
from .compose import shown_yaml

SQL_TIMEOUT_S = 10.0
CELL_CHARS = 80
RESULT_CHARS = 8000
YAML_MAX_CHARS = 200_000


@dataclass
class ToolResult:
    content: str
    is_error: bool = False
    malformed: bool = False  # the call did not fit the tool; counts towards the session's retry bound


@dataclass
class Toolbox:
    """One session's tool state: the draft dashboard and report, their checks and the rule proposals. Memory only."""

    files: Mapping[str, Any]
    tables: Mapping[str, Any] | None
    version: str
    mode: str
    author: str
    today: str = field(default_factory=lambda: dt.date.today().isoformat())
    workspace_path: Path | None = None  # where a live source's relative path (sqlite:///local.db) is resolved
    drafts: dict[str, dict[str, Any]] = field(default_factory=dict)  # file kind ("dashboard", "report") -> its draft
    found: dict[str, list[Diagnostic]] = field(default_factory=dict)  # file kind -> the checks' results on its draft
    proposals: list[dict[str, Any]] = field(default_factory=list)
    asker: User | None = None  # who the session is for: their row filters hold for run_sql (lib.data.row_filters)

    def __post_init__(self):
        kinds = set(ARTIFACT_TOOLS.values())
        # Canonical text of each draft, for the diffs; and the text the model last saw or wrote whole, which an
        # old_string is looked for in first (the model's own YAML may differ from the canonical form in layout).
        self._draft_texts = {kind: workspace.render(kind, self.files[kind]) if self.files.get(kind) else "" for kind in kinds}
        self._known_texts = {kind: shown_yaml(kind, self.files[kind]) if self.files.get(kind) else "" for kind in kinds}
        self._validators = {t["name"]: Draft202012Validator(t["input_schema"]) for t in TOOLS_BY_MODE["edit"]}

    @property
    def draft(self) -> dict[str, Any] | None:
        """The draft dashboard, if the session wrote one."""
        return self.drafts.get("dashboard")

    @property
    def diagnostics(self) -> list[Diagnostic]:
        """The checks' results on the draft dashboard."""
        return self.found.get("dashboard", [])

    def execute(self, name: str, tool_input: Any) -> ToolResult:
        offered = {t["name"] for t in TOOLS_BY_MODE[self.mode]}
        if name not in offered:
            known = name in self._validators
            why = f"{name} is not available in {self.mode} mode" if known else f"there is no tool named {name!r}"
            return ToolResult(f"{why}; the tools here are: {', '.join(sorted(offered))}.", True, True)
        problem = self._input_problem(name, tool_input)
        if problem:
            return ToolResult(problem, True, True)
        if name == "run_sql":
            return self._run_sql(tool_input["sql"])
        if name in WRITE_TOOLS:
            return self._write(name, WRITE_TOOLS[name], tool_input["yaml"])
        if name in EDIT_TOOLS:
            return self._edit(name, EDIT_TOOLS[name], tool_input)
        return self._propose_rule(tool_input)

    def _input_problem(self, name: str, tool_input: Any) -> str | None:
        if not isinstance(tool_input, dict):
            return f"invalid input for {name}: expected an object with the fields of its input_schema"
        errors = sorted(self._validators[name].iter_errors(tool_input), key=lambda e: list(map(str, e.absolute_path)))
        if not errors:
            return None
        lines = [f"- {'.'.join(map(str, e.absolute_path)) or '(input)'}: {e.message}" for e in errors[:5]]
        schema = self._validators[name].schema  # a tool's input_schema is an object, never a bare true/false
        properties = schema["properties"] if isinstance(schema, Mapping) else {}
        fields = ", ".join(f"{k}: {v.get('type')}" for k, v in properties.items())
        return f"invalid input for {name}; expected {{{fields}}}:\n" + "\n".join(lines)

    # ---- run_sql

    def _run_sql(self, sql: str) -> ToolResult:
        if not self.tables:
            return ToolResult("no data is loaded for this workspace, so there is nothing to query; a person must connect a source and refresh first.", True)
        try:
            # The workspace's query engine: snapshot tables in the sandbox, a live source's in its database, as a dashboard reads them.
            engine = Engine.for_workspace(
                self.files, self.tables, self.version, workspace_path=self.workspace_path, cache=QueryCache(size=1), user=self.asker
            )  # uncached, as before
            result = engine.run(sql, max_rows=SQL_MAX_ROWS, timeout_s=SQL_TIMEOUT_S)
        except QueryError as exc:
            return ToolResult(f"the query failed: {exc}", True)
        return ToolResult(text_table(result.columns, result.rows, result.truncated))

    # ---- write_dashboard, write_report

    def _write(self, tool: str, kind: str, text: str) -> ToolResult:
        """Parse, keep as the draft of `kind` (even when invalid), check, and answer with the diff and the problems."""
        spec, problem = _read_spec(kind, text)
        if problem or spec is None:
            return ToolResult(f"{tool}: {problem}. Nothing changed; send the complete {workspace.FILES[kind]} again.", True, True)
        return self._accept(kind, spec, text)

    # ---- edit_dashboard, edit_report

    def _edit(self, tool: str, kind: str, tool_input: dict[str, Any]) -> ToolResult:
        """One component replaced by id, or one exact text replacement; the result is then accepted as a whole write is."""
        file = workspace.FILES[kind]
        current = self.drafts.get(kind) if kind in self.drafts else self.files.get(kind)
        if not current:
            return ToolResult(f"{tool}: there is no {file} yet to edit; write the complete file with write_{kind} first.", True, True)
        by_component, by_text = "component" in tool_input, "old_string" in tool_input or "new_string" in tool_input
        if by_component == by_text:
            return ToolResult(f"{tool}: give either component, or old_string and new_string (not both, not neither). Nothing changed.", True, True)
        if by_text and not ("old_string" in tool_input and "new_string" in tool_input):
            return ToolResult(f"{tool}: old_string and new_string go together; give both. Nothing changed.", True, True)
        if by_component:
            spec, text, problem = self._replace_component(kind, current, tool_input["component"])
        else:
            spec, text, problem = self._replace_text(kind, current, tool_input["old_string"], tool_input["new_string"])
        if problem or spec is None:
            return ToolResult(f"{tool}: {problem}. Nothing changed.", True, True)
        return self._accept(kind, spec, text)

    def _replace_text(self, kind: str, current: dict[str, Any], old: str, new: str) -> tuple[dict[str, Any] | None, str, str | None]:
        file = workspace.FILES[kind]
        if not old:
            return None, "", "old_string is empty; give the exact text to replace"
        if old == new:
            return None, "", "old_string and new_string are the same, so the edit changes nothing"
        # The text the model last saw or wrote whole first, then the canonical form the diffs show.
        for text in dict.fromkeys([self._known_texts[kind], shown_yaml(kind, current)]):
            count = occurrences(text, old)
            if count > 1:
                return None, "", f"old_string occurs {count} times in {file}; include more of the lines around it so that it occurs exactly once"
            if count == 1:
                at = text.find(old)
                edited = text[:at] + new + text[at + len(old) :]
                break
        else:
            hint = ""
            if occurrences(_spaced(self._known_texts[kind]), _spaced(old)) or occurrences(_spaced(shown_yaml(kind, current)), _spaced(old)):
                hint = " (it occurs with other whitespace: copy indentation, spaces and line breaks exactly)"
            return None, "", f"old_string does not occur in {file}{hint}; copy it exactly from the YAML you wrote or were shown"
        spec, problem = _read_spec(kind, edited)
        if problem:
            return None, "", f"after the replacement, {problem}"
        return spec, edited, None

    def _replace_component(self, kind: str, current: dict[str, Any], text: str) -> tuple[dict[str, Any] | None, str, str | None]:
        file = workspace.FILES[kind]
        component, problem = _read_yaml(text)
        if problem:
            return None, "", f"the component's {problem}"
        if not isinstance(component, dict) or not isinstance(component.get("id"), str):
            return None, "", "the component is not a mapping with an id (id, type, title, query, ...)"
        spec = copy.deepcopy(current)
        places = [(items, i) for items, i, found in _components(spec) if found.get("id") == component["id"]]
        if len(places) != 1:
            ids = ", ".join(str(found.get("id")) for _, _, found in _components(spec)) or "none"
            if places:
                return None, "", f"{len(places)} components of {file} have the id {component['id']!r}; use old_string and new_string"
            return None, "", f"no component of {file} has the id {component['id']!r} (its ids: {ids}); to add one, use old_string and new_string"
        items, i = places[0]
        items[i] = component
        return spec, shown_yaml(kind, spec), None

    def _accept(self, kind: str, spec: dict[str, Any], text: str) -> ToolResult:
        """Keep `spec` as the draft of `kind` (even when invalid), check it, and answer with the diff and the problems."""
        file = workspace.FILES[kind]
        new_text = workspace.render(kind, spec)
        before, self._draft_texts[kind] = self._draft_texts[kind], new_text
        self._known_texts[kind] = text
        self.drafts[kind] = spec
        ws = workspace.Workspace(path=self.workspace_path or Path("session"), data={**self.files, kind: spec})
        found = self.found[kind] = checks.run(ws, self.tables, self.version, file=file, kind=kind)
        errors = [d for d in found if d.level == ERROR]
        report = [change_summary(before, new_text, file)]
        if errors:
            report.append(f"{len(errors)} check(s) failed; fix them and write the whole spec again:")
        elif found:
            report.append("All checks passed, with warnings:")
        else:
            report.append("All checks passed.")
        report.extend(_for_model(d) for d in found)
        return ToolResult("\n".join(report), is_error=bool(errors))

    # ---- propose_rule

    def _propose_rule(self, tool_input: dict[str, Any]) -> ToolResult:
        rule: dict[str, Any] = {"id": tool_input["id"], "text": tool_input["text"]}
        if tool_input.get("tags"):
            rule["tags"] = list(tool_input["tags"])
        rule.update(author=self.author, created=self.today)
        taken = {r.get("id") for r in (self.files.get("task") or {}).get("rules") or []} | {p["id"] for p in self.proposals}
        if rule["id"] in taken:
            return ToolResult(f"a rule with id {rule['id']!r} already exists or was proposed; choose another id, or leave the existing rule as it is.", True)
        doc = parse(workspace.render("task", {"rules": [rule]}))
        problems = schemas.validate_document("task", doc, "task.yaml")
        if problems:
            return ToolResult("propose_rule: " + "; ".join(f"{d.field}: {d.message}" for d in problems), True, True)
        self.proposals.append(rule)
        return ToolResult(f"Recorded proposal {rule['id']!r}. It is not part of task.yaml until a person accepts it.")


# What a spec's top level holds, for the message when the YAML is not a mapping.
_TOP_LEVEL = {"dashboard": "title, components", "report": "title, queries, sections"}


def _read_spec(kind: str, text: str) -> tuple[dict[str, Any] | None, str | None]:
    """The model's YAML of a whole file, parsed, or None and what is wrong with it."""
    spec, problem = _read_yaml(text)
    if problem:
        return None, problem
    if not isinstance(spec, dict):
        return None, f"the YAML is not a mapping (expected {_TOP_LEVEL[kind]}, ...)"
    return spec, None


def _components(spec: dict[str, Any]) -> Iterator[tuple[list[Any], int, dict[str, Any]]]:
    """(list, index, component) for every component with an id: a dashboard's components, a report's chart and table
    sections and the KPIs of its kpis sections."""
    for key in ("components", "sections"):
        items = spec.get(key)
        if not isinstance(items, list):
            continue
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                continue
            if "id" in item:
                yield items, i, item
            inner = item.get("components")
            if isinstance(inner, list):
                yield from ((inner, j, c) for j, c in enumerate(inner) if isinstance(c, dict) and "id" in c)


def occurrences(text: str, piece: str) -> int:
    """How many times `piece` occurs in `text`, overlapping occurrences counted ("aa" occurs twice in "aaa")."""
    count, at = 0, text.find(piece)
    while at != -1:
        count += 1
        at = text.find(piece, at + 1)
    return count


def _spaced(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _read_yaml(text: str) -> tuple[Any, str | None]:
    """The model's YAML, parsed, or None and what is wrong with it."""
    if len(text) > YAML_MAX_CHARS:
        return None, f"the YAML is {len(text):,} characters; a spec is far smaller (limit {YAML_MAX_CHARS:,})"
    try:
        # Anchors and aliases can expand exponentially when constructed; a spec never needs them.
        if any(isinstance(event, yaml.AliasEvent) for event in yaml.parse(text, Loader=yaml.SafeLoader)):
            return None, "YAML anchors and aliases (&name, *name) are not accepted; write the spec out in full"
        return parse(text).data, None
    except YamlSyntaxError as exc:
        return None, f"the YAML does not parse (line {exc.line}): {exc}"
    except yaml.YAMLError as exc:
        return None, f"the YAML does not parse: {exc}"


def _for_model(d: Diagnostic) -> str:
    """A check result by field path: line numbers would point into the canonical file, not the model's text."""
    where = f" {d.field}:" if d.field else ""
    allowed = f" (allowed: {d.allowed})" if d.allowed else ""
    return f"- {d.level} [{d.id}]{where} {d.message}{allowed}"


def change_summary(before: str, after: str, file: str = "dashboard.yaml") -> str:
    """The unified diff between two drafts of `file`, or a one-line note for a new or unchanged spec."""
    if not before:
        return f"Created the draft {file} ({after.count(chr(10))} lines)."
    if before == after:
        return "The draft is unchanged."
    diff = workspace.text_diff(before, after, f"{file} (previous draft)", f"{file} (new draft)")
    return f"Updated the draft {file}:\n```diff\n{diff}```"


def text_table(columns: list[str], rows: list[tuple], truncated: bool) -> str:
    """A compact, aligned text table with a row count line; cells and the whole text are capped."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    lines = [" | ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip(), "-+-".join("-" * w for w in widths)]
    lines.extend(" | ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells)
    count = f"({len(rows)} row{'s' if len(rows) != 1 else ''}{f'; more rows exist, only the first {SQL_MAX_ROWS} are shown' if truncated else ''})"
    text = "\n".join(lines)
    if len(text) > RESULT_CHARS:
        text = text[:RESULT_CHARS].rsplit("\n", 1)[0] + "\n… (cut: aggregate in SQL to see less)"
    return f"{text}\n{count}"


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, float):
        text = format(value, ".10g")
    elif hasattr(value, "isoformat"):
        text = value.isoformat()
    else:
        text = str(value)
    text = text.replace("\n", " ")
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "…"
