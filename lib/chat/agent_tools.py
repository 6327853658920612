"""The model's tools as the Messages API sees them: fixed schemas per mode, pure data.

The schemas never mention the workspace's tables or columns, so the tools
part of the prompt is byte-identical for every workspace and every data
version, and the prompt cache survives a data change. What the data looks
like reaches the model through the profile, and through `run_sql`.

    run_sql          one sandboxed SELECT, rows capped, a compact text table back
    write_dashboard  edit mode: the complete dashboard.yaml, validated at once (a new file, or most of it changed)
    write_report     edit mode: the complete report.yaml, validated at once
    edit_dashboard   edit mode: one component replaced by id, or one exact text replacement, validated the same way
    edit_report      edit mode: the same for report.yaml
    propose_rule     edit mode: a task rule proposal; collected, never written

`lib.chat.compose` puts them into the request; `lib.chat.toolbox` executes the calls a
session makes. This module imports only `schemas` (the rule fields come from task.schema.json).
"""

from __future__ import annotations

import copy
from typing import Any

from ..memory import schemas

SQL_MAX_ROWS = 50  # rows the model sees per query: enough to read a result, too few to copy a table

RUN_SQL = {
    "name": "run_sql",
    "description": (
        "Run one read-only SELECT (DuckDB SQL; WITH ... SELECT allowed) over the workspace's tables and get at most "
        f"{SQL_MAX_ROWS} rows back as a text table. Use it to check values and to test a query before it goes into "
        "the dashboard. Filter parameters ($id) are not bound here: test with literal values instead. The results "
        "are for you only: never copy their values into a dashboard spec."
    ),
    "input_schema": {
        "type": "object",
        "properties": {"sql": {"type": "string", "description": "Exactly one SELECT statement."}},
        "required": ["sql"],
        "additionalProperties": False,
    },
}

WRITE_DASHBOARD = {
    "name": "write_dashboard",
    "description": (
        "Replace the session's draft with this complete dashboard.yaml (YAML text following "
        "schemas/dashboard.schema.json; the whole spec, not a fragment). It is checked at once: schema, no inline "
        "data, queries run, columns exist, no data values written as literals, output constraints and task rules, "
        "rendering. You get back the diff against the previous draft and every problem found. Nothing is saved: a "
        "person reviews the draft. Use it for a new dashboard; to change one that exists, edit_dashboard sends only "
        "the part that changes."
    ),
    "input_schema": {
        "type": "object",
        "properties": {"yaml": {"type": "string", "description": "The complete dashboard.yaml."}},
        "required": ["yaml"],
        "additionalProperties": False,
    },
}

WRITE_REPORT = {
    "name": "write_report",
    "description": (
        "Replace the session's draft report with this complete report.yaml (YAML text following "
        "schemas/report.schema.json; the whole report, not a fragment): title, parameters, named queries and the "
        "sections in reading order. Use it when the person asks for a report, a written document printed on pages; "
        "write_dashboard is for the dashboard. It is checked at once: schema, no inline data, queries run, columns "
        "exist, no data values written as literals in prose, every placeholder shows a value, output constraints and "
        "task rules, rendering. You get back the diff against the previous draft and every problem found. Nothing "
        "is saved: a person reviews the draft. Use it for a new report; to change one that exists, edit_report sends "
        "only the part that changes."
    ),
    "input_schema": {
        "type": "object",
        "properties": {"yaml": {"type": "string", "description": "The complete report.yaml."}},
        "required": ["yaml"],
        "additionalProperties": False,
    },
}


def _edit_tool(kind: str, file: str, where: str) -> dict[str, Any]:
    """edit_dashboard or edit_report: a part of the file replaced, then checked as a whole write is."""
    return {
        "name": f"edit_{kind}",
        "description": (
            f"Change part of the session's draft {file} (or the current {file} when there is no draft yet) without "
            f"resending the whole file. Either give `component`, the YAML of one complete component whose id names "
            f"the component it replaces ({where}), or give `old_string` and `new_string`: old_string is replaced by "
            f"new_string, and it must occur exactly once in the YAML (copy it exactly, whitespace included, from the "
            f"YAML you wrote or were shown, or from a diff's lines; add lines around it until it is unique). To add a "
            f"component, replace a neighbouring piece with itself plus the new one (and the layout line). The whole "
            f"new {file} is checked as write_{kind} checks it, and you get back the diff and every problem found. "
            f"Nothing is saved: a person reviews the draft."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "component": {"type": "string", "description": "YAML of one complete component (a mapping with its id)."},
                "old_string": {"type": "string", "description": "The exact text to replace; it must occur exactly once."},
                "new_string": {"type": "string", "description": "The text to put in its place (may be empty to delete)."},
            },
            "additionalProperties": False,
        },
    }


EDIT_DASHBOARD = _edit_tool("dashboard", "dashboard.yaml", "an entry of components")
EDIT_REPORT = _edit_tool("report", "report.yaml", "a chart or table section, or a KPI in a kpis section")

# The fields of task.yaml's rule that the model writes, each with a description addressed to it; their
# constraints come from schemas/task.schema.json. The person's name and the dates are added on acceptance.
PROPOSED_RULE_FIELDS = {
    "id": "Unique id in lower-case kebab-case.",
    "text": "The rule in plain language.",
    "tags": "Kinds of rule, e.g. domain, format, quality.",
}
PROPOSE_RULE = {
    "name": "propose_rule",
    "description": (
        "Suggest a lasting task rule for task.yaml, such as a threshold, a colour or a naming or format preference "
        "the person stated. It is recorded as a proposal only; a person accepts or rejects it. Do not restate rules "
        "that task.yaml already has."
    ),
    "input_schema": {
        "type": "object",
        "properties": {name: {**schemas.constraints("task", "rule", name), "description": description} for name, description in PROPOSED_RULE_FIELDS.items()},
        "required": [name for name in schemas.node("task", "rule")["required"] if name in PROPOSED_RULE_FIELDS],
        "additionalProperties": False,
    },
}

TOOLS_BY_MODE = {"edit": (RUN_SQL, WRITE_DASHBOARD, EDIT_DASHBOARD, WRITE_REPORT, EDIT_REPORT, PROPOSE_RULE), "query": (RUN_SQL,)}
# The tools that write a workspace file (whole, or a part of it), and the file kind (lib.memory.kinds) each writes.
WRITE_TOOLS = {"write_dashboard": "dashboard", "write_report": "report"}
EDIT_TOOLS = {"edit_dashboard": "dashboard", "edit_report": "report"}
ARTIFACT_TOOLS = {**WRITE_TOOLS, **EDIT_TOOLS}


def tool_schemas(mode: str) -> list[dict[str, Any]]:
    """The tools offered in a mode, as the Messages API `tools` list (copies: callers may not edit the constants)."""
    return copy.deepcopy(list(TOOLS_BY_MODE[mode]))
