"""A deterministic stand-in for Claude in the ablation study, behind lib.chat.model's ModelClient interface.

Without an API key the study still runs end to end, with this client in the
model's place. Its numbers show the mechanism (what each condition puts in
the prompt, and what the checks make of the dashboard that results), never
how Claude behaves; the study's output says so.

It reads only the request it is sent, and plays one session in three calls:

1. Explore: one `run_sql` (the row count), as the base instructions ask.
2. Write: start from the dashboard the request shows (the current-dashboard
   block of an edit session, else the last `write_dashboard` of a replayed
   conversation) and keep it, as a model told to refine it would. Without
   one, draft from the profile the request shows (lib.artifacts.autodraft). Without
   either it cannot know the columns and says so instead of writing. Then it
   applies each item of the formatting specification whose colour code
   appears anywhere in the request (in the person's words, a task rule, the
   theme, or a dashboard that already carries it), and only those.
3. Answer in one sentence.

Usage: input tokens are lib.core.tokens' offline estimate of the request, output
tokens that of the reply. It reports no cache reads or writes: it has no cache.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any, Mapping

from lib.artifacts import autodraft
from lib.chat.model import TextCallback, WaitCallback, message, text_block, tool_use_block
from lib.core import tokens
from lib.memory import workspace
from lib.memory.yamlio import parse

from .ablation_task import BACKGROUND_RULE, THRESHOLD_RULE, FormattingSpec

TABLE = "data"  # every study workspace names its one source `data`
EXPLORE_SQL = f"SELECT count(*) AS row_count FROM {TABLE}"
PROFILE_HEADING = "# Data profile (profile.yaml"  # lib.chat.compose's profile block (without one: "No data profile yet")
DASHBOARD_HEADING = "# Current dashboard (dashboard.yaml)"  # lib.chat.compose's dashboard block in edit mode


class ScriptedAnalyst:
    """Plays the model for one session over data with this profile (used only when the request shows it)."""

    def __init__(self, spec: FormattingSpec, profile: Mapping[str, Any]):
        self.spec = spec
        self.profile = profile

    def create(
        self, request: dict[str, Any], on_text: TextCallback | None = None, on_wait: WaitCallback | None = None, deadline: float | None = None
    ) -> dict[str, Any]:
        messages = request["messages"]
        answered = _answered_tool(messages)
        next_id = f"toolu_scripted_{_count_tool_uses(messages) + 1}"
        if answered is None:
            content = [text_block("Checking the data first."), tool_use_block(next_id, "run_sql", {"sql": EXPLORE_SQL})]
        elif answered == "run_sql":
            dashboard = self.dashboard_for(request)
            if dashboard:
                spec_yaml = workspace.render("dashboard", dashboard)
                content = [tool_use_block(next_id, "write_dashboard", {"yaml": spec_yaml})]
            else:
                content = [text_block("I cannot see the data's columns, so I cannot write a dashboard yet.")]
        else:
            content = [text_block("The dashboard is written and its checks have run.")]
        if on_text is not None:
            for block in content:
                if block["type"] == "text":
                    on_text(block["text"])
        shown = {key: request[key] for key in ("system", "tools", "messages")}
        usage = {
            "input_tokens": tokens.estimate(json.dumps(shown, ensure_ascii=False)),
            "output_tokens": tokens.estimate(json.dumps(content, ensure_ascii=False)),
        }
        return message(*content, usage=usage)

    def dashboard_for(self, request: dict[str, Any]) -> dict[str, Any] | None:
        dashboard = _shown_dashboard(request["messages"])
        if dashboard is None and _shows_profile(request["messages"]):
            dashboard = autodraft.draft({"workspace": {"name": self.spec.dataset}, "profile": self.profile})
        if dashboard is None:
            return None
        seen = json.dumps(request, ensure_ascii=False).lower()
        known = {rule for rule, colour in self.spec.colour_codes.items() if colour.lower() in seen}
        return apply_specification(dashboard, self.spec, known)


def apply_specification(dashboard: dict[str, Any], spec: FormattingSpec, known: set[str]) -> dict[str, Any]:
    """The dashboard with the known specification items applied: the background in its theme, the threshold on
    every KPI card and table column that shows the threshold's field, and on every chart whose colour encodes it."""
    out = copy.deepcopy(dashboard)
    if BACKGROUND_RULE in known:
        out["theme"] = {**(out.get("theme") or {}), "background": spec.background}
    if THRESHOLD_RULE in known:
        threshold = {"op": spec.threshold_op, "value": spec.threshold_value, "color": spec.threshold_color}
        field = spec.threshold_field.lower()
        column = autodraft.alias(spec.threshold_field)
        for comp in out.get("components") or []:
            names = f"{comp.get('id', '')} {comp.get('title', '')}".lower()
            if comp.get("type") == "kpi" and field in names:
                _add(comp.setdefault("thresholds", []), threshold)
            elif comp.get("type") == "table" and _table_shows(comp, column):
                settings = comp.setdefault("columns", {}).setdefault(column, {"label": spec.threshold_field})
                _add(settings.setdefault("thresholds", []), threshold)
            elif comp.get("type") == "chart" and str(((comp.get("encoding") or {}).get("color") or {}).get("field", "")).lower() in (field, column.lower()):
                _add(comp["encoding"]["color"].setdefault("thresholds", []), threshold)
    return out


def _add(thresholds: list[dict[str, Any]], threshold: dict[str, Any]) -> None:
    if threshold not in thresholds:
        thresholds.append(dict(threshold))


def _table_shows(comp: Mapping[str, Any], column: str) -> bool:
    named = {key.lower() for key in comp.get("columns") or {}}
    selected = re.search(rf'\bAS\s+"?{re.escape(column)}"?(?![\w])', comp.get("query", ""), re.IGNORECASE)
    return column in named or selected is not None


# --------------------------------------------------------------------------- reading the request


def _texts(messages: list[dict[str, Any]]) -> list[str]:
    """Every text block of the person's turns."""
    return [
        block["text"]
        for turn in messages
        if turn["role"] == "user" and isinstance(turn["content"], list)
        for block in turn["content"]
        if block.get("type") == "text"
    ]


def _shows_profile(messages: list[dict[str, Any]]) -> bool:
    return any(text.startswith(PROFILE_HEADING) for text in _texts(messages))


def _shown_dashboard(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The current-dashboard block of the request, else the last dashboard written in a replayed conversation."""
    for text in reversed(_texts(messages)):
        if text.startswith(DASHBOARD_HEADING) and "```yaml\n" in text:
            return parse(text.split("```yaml\n", 1)[1].rsplit("```", 1)[0]).data
    for turn in reversed(messages):
        if turn["role"] == "assistant":
            for block in reversed(turn["content"]):
                if block.get("type") == "tool_use" and block.get("name") == "write_dashboard":
                    return parse(block["input"]["yaml"]).data
    return None


def _answered_tool(messages: list[dict[str, Any]]) -> str | None:
    """The tool whose result ends the request, or None when the request ends with the person's message."""
    last = messages[-1]
    results = [b for b in last["content"] if isinstance(b, dict) and b.get("type") == "tool_result"] if isinstance(last["content"], list) else []
    if not results or len(messages) < 2:
        return None
    calls = {b.get("id"): b.get("name") for b in messages[-2]["content"] if b.get("type") == "tool_use"}
    return calls.get(results[-1].get("tool_use_id"))


def _count_tool_uses(messages: list[dict[str, Any]]) -> int:
    return sum(
        1
        for turn in messages
        if turn["role"] == "assistant" and isinstance(turn["content"], list)
        for block in turn["content"]
        if block.get("type") == "tool_use"
    )
