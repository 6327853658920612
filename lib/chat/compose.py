"""Memory composition: exactly what the model gets, as a pure function of the workspace.

`compose(files, mode, message)` returns the Messages API request for the first
turn of a session. The same files, mode and message always give the same
bytes, so provider prompt caching can hit, and what the model saw can be
reviewed (`python -m lib compose PATH --message TEXT`).

Layout, most stable first (the API caches prefixes in the order tools, system,
messages):

    tools     fixed schemas per mode (lib/chat/agent_tools.py); no dataset columns
    system    1. base instructions for the mode        <- breakpoint (A)
              2. task specifications   (task.yaml)
              3. tool configurations   (sources.yaml; secrets only as references)
              4. output constraints    (output.yaml)   <- breakpoint (B)
    user      1. data profile (profile.yaml, compact)  <- breakpoint (C)
              2. current dashboard.yaml (edit mode, when there is one)
              3. current report.yaml (edit mode, when there is one)
                 <- breakpoint (D) on the last of 2 and 3 shown
              4. the person's message

Caching uses the API's automatic breakpoint (a top-level `cache_control`): the
API puts it on the last block of each request, so every step of a session reads
the previous step's prefix from the cache without the loop moving a marker by
hand. It takes one of the API's four breakpoints, which leaves three explicit
ones for what outlives a session: (D) lets the next session on an unchanged
dashboard and report pay full price for its question only, (C) the profile,
which outlives dashboard edits, (B) the workspace's memory, (A) the tools and
base instructions every workspace of a mode shares. A breakpoint caches only a
prefix of at least the model's minimum cacheable length (`cache_minimum`: 1,024
tokens for most models, 4,096 for Haiku 4.5 and Opus 4.5/4.6), so only the
candidates whose prefix is over it are marked, and when all four are, (A) is
the one left out (`place_breakpoints`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ..core import tokens
from ..core.diagnostics import WARNING, Diagnostic, ValidationFailed, has_errors
from ..core.settings import chat_max_tokens, model_id
from ..data import profile as profile_text
from ..memory import relationships, rule_review, schemas, workspace
from ..memory.kinds import KINDS
from .agent_tools import tool_schemas

MODES = ("edit", "query")
EPHEMERAL = {"type": "ephemeral"}
MAX_BREAKPOINTS = 4  # the API's limit per request, the automatic breakpoint included
EXPLICIT_BREAKPOINTS = MAX_BREAKPOINTS - 1

# The shortest prefix the API caches, in tokens, by model id prefix (Anthropic's prompt caching documentation,
# December 2026; where sources differ the larger figure is kept). A breakpoint on a shorter prefix caches nothing.
CACHE_MINIMUM_TOKENS = {
    "claude-haiku-4-5": 4096,
    "claude-opus-4-5": 4096,
    "claude-opus-4-6": 4096,
    "claude-opus-4-7": 4096,
    "claude-sonnet-4-6": 2048,
    "claude-haiku-3": 2048,
    "claude-opus-5": 512,
}
CACHE_MINIMUM_FALLBACK = 1024  # Sonnet 4, 4.5, 5, 5.5, Opus 4, 4.1, 4.8 and models not listed

_WORKSPACE_CONTEXT = """\
How this prompt is laid out
- The system prompt holds the workspace's memory: task specifications (task.yaml: the goal and the rules to follow), \
tool configurations (sources.yaml: where each table comes from; secrets appear only as env:/secrets: references), and \
output constraints (output.yaml: data injection, theme, number formats, layout).
- The first block of the user turn is the data profile: every table with its row count and its columns (type, role, \
statistics, frequent values). It describes the data; it is not the data, and its figures may be rounded or sampled.
"""

_CONTRACT_AND_SPEC = """\
The data-injection contract
- A dashboard is declarative YAML. Every number, label and series a reader sees comes from a SQL query that the \
renderer runs at render time on the latest data, so the dashboard stays right after a refresh with no model involved.
- Never copy values from the profile or from run_sql results into the spec: no inline data, no VALUES lists, no query \
that reads no table, no data values written in titles, labels or text. Thresholds and colours that task rules name \
are rules, not data, and belong in the spec.

The dashboard spec (schemas/dashboard.schema.json)
- Top level: title, description, theme (only to restate output.yaml's theme), filters, components, layout.
- Every component has an id (lower snake_case, unique), a type (kpi, chart, table, text) and a title, and names its \
SQL query:
  - kpi: query returning one row; the value in column `value` (or value_column); compare_column with \
delta: absolute|relative; format (d3-format such as ",.0f" or ".1%"); thresholds: [{op, value, color}].
  - chart: query, mark (bar, line, area, point, arc, rect, tick), encoding {x, y, color, theta, size, tooltip: [...]}; \
each channel has field (a column of the query's output), type (quantitative, temporal, nominal, ordinal), title, \
format, sort; color may carry scale {domain, range} or thresholds. Optional select: {field, filter} makes a click on a mark set that select or multiselect filter for the other components (cross-filter).
  - table: query, max_rows, columns {column: {label, format, thresholds}}.
  - text: markdown with placeholders {{query.column}} or {{query.column|format}}, filled from the first row of the \
named queries in queries: {name: SQL}. Write every figure in text as a placeholder.
- Queries: one SELECT (WITH ... SELECT allowed) in DuckDB SQL over the workspace's tables; double-quote names with \
spaces or capitals. Filters: [{id, type: select|multiselect|date_range|number_range, label, options_query or \
bounds_query}] arrive in queries as $id (a multiselect is a list: list_contains($id, col)), and as $id_from and $id_to \
for ranges; an unset filter is NULL, so write ($id IS NULL OR col = $id).
- layout: rows of component ids, or {id, width}, top to bottom.
"""

_REPORT_SPEC = """\
The report spec (schemas/report.schema.json), report.yaml
- A report is a document read top to bottom and printed on pages, under the same contract. Top level: title, \
description, theme, parameters (shaped and bound exactly like dashboard filters: $id, $id_from, $id_to), queries \
{name: SQL} that prose placeholders read the first row of, and sections, in reading order:
  - heading: text (plain words, no placeholders) and level 1, 2 or 3;
  - prose: markdown; every figure is a placeholder {{query.column}} or {{query.column|format}} naming a query in \
queries and a column of its output;
  - kpis: components, a row of kpi components as on a dashboard;
  - chart, table: one dashboard chart or table component (id, title, query, ...);
  - page_break.
- Component ids (KPI cards, charts, tables) are unique across the report; headings, prose and page breaks have none.
"""

BASE_EDIT = f"""\
You build and refine a dashboard, and when asked a report, for a dashmem workspace. You act only through the tools, \
and nothing you do is saved until a person accepts it.

{_WORKSPACE_CONTEXT}- In this mode the user turn then shows the current dashboard.yaml and report.yaml, those there \
are, and ends with the person's request.

{_CONTRACT_AND_SPEC}
{_REPORT_SPEC}
How to work
1. Explore only as far as needed with run_sql (read-only, one SELECT, few rows back). Take table and column names \
from the profile.
2. To change a dashboard or report that exists (the current one shown, or your draft), use edit_dashboard or \
edit_report: replace one component by its id, or replace an exact piece of the YAML (old_string must occur exactly \
once; copy it from the YAML you have seen, with enough lines around it to be unique). Change only what the request \
asks; keep ids, rule colours and theme. Write the complete YAML with write_dashboard or write_report only for a new \
file, or when most of it changes.
3. Read the diff and the check results that come back. If any check fails, fix it with another edit; stop when the \
checks pass.
4. When the person states a lasting rule or preference that task.yaml lacks, you may suggest it with propose_rule; \
a person decides whether to keep it.
5. End with a short plain-language summary of what you built or changed. Do not repeat the YAML.
"""

BASE_QUERY = f"""\
You answer questions about the data of a dashmem workspace. You can read data with run_sql only; you cannot change \
the dashboard or the workspace.

{_WORKSPACE_CONTEXT}- In this mode the user turn then ends with the person's question.

How to answer
- Answer from query results, not from guesses or from the profile's rounded statistics: run_sql for exact figures.
- Keep queries small: aggregate in SQL and ask for few rows. Take table and column names from the profile; \
double-quote names with spaces or capitals.
- Follow the task rules and output constraints (terms, thresholds, number formats) in your answer.
- Say which table and columns you used and, in a sentence, how you computed the figures. If the data cannot answer \
the question, say so.
"""

BASES = {"edit": BASE_EDIT, "query": BASE_QUERY}
# The kinds in the system prompt after the base instructions, and the artifacts edit mode shows in the
# user turn, in this order. What the model sees of each (heading, fallback, content) is its kind's
# (lib/memory/kinds/); where it goes is this module's, for the prompt cache (see the module docstring).
SYSTEM_KINDS = ("task", "sources", "output")
ARTIFACTS = ("dashboard", "report")
ARTIFACT_HEADINGS = {kind: KINDS[kind].model_heading for kind in ARTIFACTS}


@dataclass(frozen=True)
class Composed:
    """The first request of a session and where its tokens go."""

    mode: str
    request: dict[str, Any]  # exactly the Messages API request: model, max_tokens, cache_control, system, tools, messages
    breakdown: dict[str, int]  # estimated tokens per part (lib.core.tokens.estimate)
    profile_budget: int | None = None  # the budget the profile block was held to
    diagnostics: tuple[Diagnostic, ...] = ()  # warnings about what the model gets (a budget too small for the names)

    @property
    def total_tokens(self) -> int:
        return sum(self.breakdown.values())


def compose(
    files: Mapping[str, Any],
    mode: str,
    message: str,
    *,
    model: str | None = None,
    profile_budget: int | None = None,
    max_tokens: int | None = None,
    today: dt.date | str | None = None,
) -> Composed:
    """The Messages API request for a session's first turn. Pure: same input (and day), same bytes.

    The profile is held to `profile_budget`, by default the workspace policy's
    (`profile_budget_of`). `today` (default: the current day) decides which
    task rules are marked unconfirmed (lib/memory/rule_review.py). `max_tokens`,
    the output cap of each reply, defaults to DASHMEM_CHAT_MAX_TOKENS.
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
    if not isinstance(message, str) or not message.strip():
        raise ValueError("the message is empty")
    dashboard, report = files.get("dashboard"), files.get("report")
    budget = profile_budget if profile_budget is not None else profile_budget_of(files)
    parts = {
        "base": BASES[mode],
        "task": _task_block(files, today),
        "sources": _kind_section("sources", files),
        "output": _kind_section("output", files),
        "profile": _profile_block(_with_decided_joins(files), [dashboard, report], budget),
    }
    system = [_text(parts[name]) for name in ("base", *SYSTEM_KINDS)]
    user = [_text(parts["profile"])]
    if mode == "edit":
        for kind in ARTIFACTS:
            if files.get(kind):
                parts[kind] = _kind_section(kind, files)
                user.append(_text(parts[kind]))
    parts["message"] = message
    user.append(_text(message))

    tools = tool_schemas(mode)
    model = model or model_id()
    breakdown = {name: tokens.estimate(text) for name, text in parts.items()}
    breakdown.setdefault("dashboard", 0)
    breakdown.setdefault("report", 0)
    breakdown["tools"] = tokens.estimate(json.dumps(tools, ensure_ascii=False))
    # The candidate breakpoints (see the module docstring) and the estimated prefix each ends.
    prefix = breakdown["tools"] + breakdown["base"]
    candidates = [(system[0], prefix), (system[-1], prefix + sum(breakdown[k] for k in SYSTEM_KINDS))]
    prefix = candidates[-1][1] + breakdown["profile"]
    candidates.append((user[0], prefix))
    if len(user) > 2:  # the dashboard and the report share one (the cache looks back from the report's to the dashboard's)
        candidates.append((user[-2], prefix + breakdown["dashboard"] + breakdown["report"]))
    for block in place_breakpoints([tokens_before for _, tokens_before in candidates], model):
        candidates[block][0]["cache_control"] = dict(EPHEMERAL)

    request = {
        "model": model,
        "max_tokens": max_tokens if max_tokens is not None else chat_max_tokens(),
        "cache_control": dict(EPHEMERAL),  # the automatic breakpoint: the last block of every request
        "system": system,
        "tools": tools,
        "messages": [{"role": "user", "content": user}],
    }
    order = ("base", "task", "sources", "output", "profile", "dashboard", "report", "message", "tools")
    found = tuple(_budget_warnings(files.get("profile"), budget))
    return Composed(mode, request, {name: breakdown[name] for name in order}, budget, found)


def to_json(composed: Composed) -> str:
    """{system, tools, messages} as the CLI prints them: what the model sees, in a reviewable form."""
    request = composed.request
    shown = {"system": request["system"], "tools": request["tools"], "messages": request["messages"]}
    return json.dumps(shown, indent=2, ensure_ascii=False)


def summary(composed: Composed) -> str:
    """One line: estimated tokens per part, for stderr next to the JSON."""
    parts = ", ".join(f"{name} {count}" for name, count in composed.breakdown.items())
    line = f"{composed.mode} mode, {composed.request['model']}: ~{composed.total_tokens} tokens ({parts}; {tokens.ESTIMATE_METHOD})"
    if composed.profile_budget is not None:
        line += f"; profile {composed.breakdown['profile']}/{composed.profile_budget} tokens of its budget"
    return line


def compose_workspace(path: str | Path, message: str, mode: str = "edit") -> Composed:
    """The request for the workspace at `path`.

    Raises ValidationFailed when the workspace does not validate: composing
    from half-loaded memory would show the model something nobody reviewed.
    """

    ws, diagnostics = workspace.load(Path(path))
    if has_errors(diagnostics):
        raise ValidationFailed(diagnostics)
    composed = compose(ws.data, mode, message)
    # The warnings name the workspace's own file and line, as every diagnostic does.
    doc = ws.docs.get("workspace")
    line = doc.line_of(("policy", "profile_budget")) if doc is not None else None
    located = tuple(dataclasses.replace(d, file=workspace.shown_file(Path(path), "workspace"), line=line) for d in composed.diagnostics)
    return dataclasses.replace(composed, diagnostics=located)


def compose_cli(path: str | Path, message: str, mode: str = "edit") -> str:
    """What `python -m lib compose PATH --message TEXT [--mode edit|query]` prints."""
    return to_json(compose_workspace(path, message, mode))


# --------------------------------------------------------------------------- blocks


def cache_minimum(model: str) -> int:
    """The model's minimum cacheable prefix in tokens, by its longest known id prefix (dated ids included)."""
    matches = [name for name in CACHE_MINIMUM_TOKENS if model == name or model.startswith(name + "-")]
    return CACHE_MINIMUM_TOKENS[max(matches, key=len)] if matches else CACHE_MINIMUM_FALLBACK


def place_breakpoints(prefixes: list[int], model: str) -> list[int]:
    """Which candidate breakpoints to mark, given the estimated tokens of the prefix each ends (in order).

    Only a prefix the API would cache is marked: its typical size (the estimate
    without its safety margin, which only ever counts high) at least the model's
    minimum. At most EXPLICIT_BREAKPOINTS, the latest kept: the first, (A), pays
    only when another workspace runs in the same mode within the cache's five
    minutes, the later ones on every next session in this workspace.
    """
    floor = cache_minimum(model)
    over = [i for i, estimated in enumerate(prefixes) if estimated / tokens.SAFETY >= floor]
    return over[-EXPLICIT_BREAKPOINTS:]


def breakpoints_of(request: Mapping[str, Any]) -> int:
    """The cache breakpoints a request uses: its blocks' `cache_control` markers plus the automatic one."""
    return json.dumps(request, ensure_ascii=False).count('"cache_control"')


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def shown_yaml(kind: str, content: Any) -> str:
    """A file as the model is shown it: canonical YAML without the editor's `$schema` header line."""
    text = workspace.render(kind, content)
    first, _, rest = text.partition("\n")
    return rest if first.startswith("# yaml-language-server:") else text


def _section(heading: str, kind: str, content: Any, empty: str) -> str:
    if not content:
        return f"# {heading}\n{empty}\n"
    return f"# {heading}\n```yaml\n{shown_yaml(kind, content)}```\n"


def _kind_section(kind: str, files: Mapping[str, Any]) -> str:
    """A kind's section as its module says the model sees it: its heading, its content or its fallback."""
    about = KINDS[kind]
    return _section(about.model_heading, kind, about.model_view(files.get(kind)), about.model_empty)


def _task_block(files: Mapping[str, Any], today: dt.date | str | None) -> str:
    meta = files.get("workspace") or {}
    ws_kind = KINDS["workspace"]
    shown = ws_kind.model_view(meta)  # name and description; not the access lists
    about = f"{ws_kind.model_heading}: {shown.get('name', ws_kind.model_empty)}\n"
    if shown.get("description"):
        about += f"{shown['description']}\n"
    block = about + "\n" + _kind_section("task", files)
    stale = rule_review.stale_rules(files, today)
    if stale:  # one line: the ids, not the rules again
        block += (
            f"Unconfirmed rules (no person has confirmed them for over {rule_review.review_days(meta)} days; follow them, "
            f"and say so if the data seems to contradict one): {', '.join(s.id for s in stale)}\n"
        )
    return block


def profile_budget_of(files: Mapping[str, Any]) -> int:
    """The workspace policy's profile budget in tokens (policy.profile_budget, else the schema's default)."""
    value = ((files.get("workspace") or {}).get("policy") or {}).get("profile_budget")
    return value if isinstance(value, int) and value > 0 else schemas.default("workspace", "policy", "profile_budget")


def budget_warnings(files: Mapping[str, Any], profile_budget: int | None = None) -> list[Diagnostic]:
    """The warnings `compose` gives about the profile budget, without composing (the Chat page shows them up front)."""
    return _budget_warnings(files.get("profile"), profile_budget if profile_budget is not None else profile_budget_of(files))


def _budget_warnings(profile: Mapping[str, Any] | None, budget: int | None) -> list[Diagnostic]:
    """A warning when the budget cannot hold every table and column name: the model cannot query what it is not shown."""
    if budget is None or not profile or not profile.get("tables"):
        return []
    needed = tokens.estimate(_PROFILE_HEADING) + tokens.estimate(profile_text.names_text(profile))  # as _profile_block splits the budget
    if budget >= needed:
        return []
    columns = sum(len(t["columns"]) for t in profile["tables"])
    return [
        Diagnostic(
            "compose.profile_budget",
            WARNING,
            f"the profile budget of {budget} tokens is below the {needed} that the names of the {len(profile['tables'])} table(s) and "
            f"{columns} column(s) need, so the model is not shown some of them and cannot query them; raise policy.profile_budget "
            f"in workspace.yaml to at least {needed}",
            KINDS["workspace"].file,
            None,
            "policy.profile_budget",
            f"at least {needed}",
        )
    ]


_PROFILE_HEADING = f"# {KINDS['profile'].model_heading}\n"


def _with_decided_joins(files: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The profile with sources.yaml's declared joins (marked declared) and without the rejected candidates."""

    prof = files.get("profile")
    if not prof or not prof.get("tables"):
        return prof
    return {**prof, "relationships": relationships.merged(prof, files.get("sources"))}


def _profile_block(profile: Mapping[str, Any] | None, artifacts: list[Mapping[str, Any] | None], budget: int | None) -> str:
    if not profile or not profile.get("tables"):
        kind = KINDS["profile"]
        return f"# {kind.model_empty_heading or kind.model_heading}\n{kind.model_empty}\n"
    keep = list(dict.fromkeys(name for artifact in artifacts for name in referenced_columns(profile, artifact)))
    heading = _PROFILE_HEADING
    if budget is not None:  # the budget is the whole block's, as the model is charged for it
        budget = max(0, budget - tokens.estimate(heading))
    return heading + profile_text.text(profile, budget, keep)


def referenced_columns(profile: Mapping[str, Any], dashboard: Mapping[str, Any] | None) -> list[str]:
    """`table.column` for every profiled column the dashboard (or report) mentions, so the budget keeps their detail longest."""
    if not dashboard:
        return []
    spec_text = json.dumps(dashboard, ensure_ascii=False)
    out = []
    for table in profile.get("tables") or []:
        for column in table["columns"]:
            name = column["name"]
            # A bare word match, or the double-quoted form a name with spaces needs (escaped as \" in JSON).
            if re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", spec_text) or f'\\"{name}\\"' in spec_text:
                out.append(f"{table['name']}.{name}")
    return out
