"""The model's tools as the Messages API sees them: fixed schemas per mode, pure data.

The schemas never mention the workspace's tables or columns, so the tools
part of the prompt is byte-identical for every workspace and every data
version, and the prompt cache survives a data change. What the data looks
like reaches the model through the profile, and through `run_sql`.

    run_sql          one sandboxed SELECT, rows capped, a compact text table back
    write_dashboard  edit mode: the complete dashboard.yaml, validated at once
    write_report     edit mode: the complete report.yaml, validated at once
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
        "person reviews the draft."
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
        "is saved: a person reviews the draft."
    ),
    "input_schema": {
        "type": "object",
        "properties": {"yaml": {"type": "string", "description": "The complete report.yaml."}},
        "required": ["yaml"],
        "additionalProperties": False,
    },
}

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

TOOLS_BY_MODE = {"edit": (RUN_SQL, WRITE_DASHBOARD, WRITE_REPORT, PROPOSE_RULE), "query": (RUN_SQL,)}
# The tools that write a workspace file, and the file kind (lib.memory.kinds) each writes.
ARTIFACT_TOOLS = {"write_dashboard": "dashboard", "write_report": "report"}


def tool_schemas(mode: str) -> list[dict[str, Any]]:
    """The tools offered in a mode, as the Messages API `tools` list (copies: callers may not edit the constants)."""
    return copy.deepcopy(list(TOOLS_BY_MODE[mode]))
