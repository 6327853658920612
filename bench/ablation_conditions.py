"""The memory conditions of the ablation study, and the requests each one sends in Phase 2.

Every condition is built from two ingredients, kept in `CONDITIONS`:

- `workspace_parts`: which workspace files lib.chat.compose gets. Composition is
  the product's own, unchanged; a condition only leaves files out. The
  workspace's name and access list always stay, since they carry no task
  knowledge and the session's role check needs them.
- `context`: memory kept outside the workspace, added by `SessionClient` to
  every request of the session: the Phase 1 transcript replayed before the
  composed turn, or a summary or an instructions file in the system prompt.

So `no_memory` is what compose makes of the profile alone, and the three
history conditions are `no_memory` plus one thing each, so they differ from it
in that thing only. `selective_memory` is the whole workspace, and each
leave-one-out condition is the whole workspace without one of the four
categories; they all keep the Phase 1 dashboard, which is the artifact rather
than a category (note that it carries the specification's colours too). The
Phase 2 message is the same everywhere.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from lib.chat.agent import Outcome
from lib.chat.model import ModelClient, TextCallback, WaitCallback

from .ablation_task import FormattingSpec

# The workspace files a condition may keep: the four memory categories, and the dashboard Phase 1 left.
TASK, SOURCES, OUTPUT, PROFILE, DASHBOARD = "task", "sources", "output", "profile", "dashboard"
MEMORY_PARTS = (TASK, SOURCES, OUTPUT, PROFILE, DASHBOARD)
EVERYTHING = frozenset(MEMORY_PARTS)

TRANSCRIPT, SUMMARY, INSTRUCTIONS = "transcript", "summary", "instructions"
REFERENCE = "selective_memory"  # the condition every other one is tested against


@dataclass(frozen=True)
class Condition:
    name: str
    workspace_parts: frozenset[str]
    context: str | None  # TRANSCRIPT, SUMMARY, INSTRUCTIONS or None
    carries: str  # what the prompt carries besides the base instructions and the message, for the tables


CONDITIONS: tuple[Condition, ...] = (
    Condition("no_memory", frozenset({PROFILE}), None, "profile"),
    Condition("full_history", frozenset({PROFILE}), TRANSCRIPT, "profile + Phase 1 transcript"),
    Condition("summarized_history", frozenset({PROFILE}), SUMMARY, "profile + summary of Phase 1"),
    Condition("instructions_file", frozenset({PROFILE}), INSTRUCTIONS, "profile + instructions file"),
    Condition(REFERENCE, EVERYTHING, None, "workspace: task, sources, output, profile, dashboard"),
    Condition("loo_task", EVERYTHING - {TASK}, None, "workspace without task rules"),
    Condition("loo_data", EVERYTHING - {PROFILE}, None, "workspace without the profile"),
    Condition("loo_tools", EVERYTHING - {SOURCES}, None, "workspace without sources"),
    Condition("loo_output", EVERYTHING - {OUTPUT}, None, "workspace without output constraints"),
)
BY_NAME = {c.name: c for c in CONDITIONS}


def phase2_files(condition: Condition, memory: Mapping[str, Any]) -> dict[str, Any]:
    """The workspace files compose() gets in this condition."""
    kept = {part: memory[part] for part in MEMORY_PARTS if part in condition.workspace_parts and part in memory}
    return {"workspace": memory["workspace"], **kept}


# --------------------------------------------------------------------------- memory outside the workspace


@dataclass(frozen=True)
class Phase1:
    """What the first session left behind, for the conditions that remember it some other way."""

    message: str
    outcome: Outcome
    transcript: list[dict[str, Any]]  # the messages a continued conversation would send again
    completed: bool  # the Phase 1 dashboard passes every check and honours the specification on V1


def summary_of(spec: FormattingSpec, phase1: Phase1) -> str:
    """A short summary of Phase 1, written deterministically from its outcome and the person's specification.

    A model-written summary would cost one more model call per Phase 1 and could drop or garble the
    specification; this one states the specification verbatim, so the condition is judged at its best.
    """
    lines = [
        "# Summary of the earlier session",
        f"- The person asked for a dashboard of {spec.dataset}.",
        "- Their formatting specification: " + " ".join(spec.sentences),
    ]
    dashboard = phase1.outcome.draft_dashboard
    if dashboard:
        components = dashboard.get("components") or []
        parts = "; ".join(f"{c.get('id')} ({c.get('type')}: {c.get('title')})" for c in components)
        lines.append(f"- The dashboard built then: {parts}.")
    else:
        lines.append("- No dashboard was built.")
    return "\n".join(lines) + "\n"


def instructions_file(spec: FormattingSpec) -> str:
    """A hand-written, CLAUDE.md-style instructions file stating the specification, as a team might keep one."""
    return f"# Instructions file (CLAUDE.md)\nDashboards over {spec.dataset} follow these rules in every session.\n" + "".join(
        f"- {sentence}\n" for sentence in spec.sentences
    )


def phase2_context(condition: Condition, spec: FormattingSpec, phase1: Phase1) -> tuple[list[str], list[dict[str, Any]]]:
    """(system texts, replayed messages) that this condition adds outside the workspace."""
    if condition.context == TRANSCRIPT:
        return [], phase1.transcript
    if condition.context == SUMMARY:
        return [summary_of(spec, phase1)], []
    if condition.context == INSTRUCTIONS:
        return [instructions_file(spec)], []
    return [], []


# --------------------------------------------------------------------------- the session's client


@dataclass
class SessionClient:
    """Between lib.chat.agent's loop and the model: adds a condition's outside memory to each request, records traffic.

    System texts go right after the base instructions (the base keeps its cache breakpoint, the workspace memory
    its own); replayed messages go before the composed turn. The loop itself, its tools, checks and limits are
    the product's, so conditions differ only in the bytes the model is sent.
    """

    model: ModelClient
    extra_system: Sequence[str] = ()
    history: Sequence[dict[str, Any]] = ()
    sent: list[dict[str, Any]] = field(default_factory=list)
    received: list[dict[str, Any]] = field(default_factory=list)

    def create(
        self, request: dict[str, Any], on_text: TextCallback | None = None, on_wait: WaitCallback | None = None, deadline: float | None = None
    ) -> dict[str, Any]:
        outgoing = copy.deepcopy(request)
        if self.extra_system:
            base, *rest = outgoing["system"]
            outgoing["system"] = [base, *({"type": "text", "text": text} for text in self.extra_system), *rest]
        if self.history:
            outgoing["messages"] = copy.deepcopy(list(self.history)) + outgoing["messages"]
        self.sent.append(outgoing)
        # Always streamed: a reply near the output cap takes minutes, which a plain request's read timeout would
        # cut, and the SDK's retry would bill it again; streamed, bytes keep arriving until the reply is whole.
        response = self.model.create(outgoing, on_text=on_text or _ignore_text, on_wait=on_wait, deadline=deadline)
        self.received.append(response)
        return response

    def transcript(self) -> list[dict[str, Any]]:
        """The session as messages: the last request's conversation plus the model's final text.

        Cache breakpoints are dropped, so a replay adds none to the API's limit of four. Tool calls in the final
        reply are dropped too: the loop stopped before running them, and a tool call without its result is
        refused by the API.
        """
        if not self.sent:
            return []
        messages = copy.deepcopy(self.sent[-1]["messages"])
        answered = len(self.received) == len(self.sent)  # the last call may have failed
        reply = (self.received[-1].get("content") or []) if answered else []
        final = [{"type": "text", "text": b["text"]} for b in reply if b.get("type") == "text"]
        if final:
            messages.append({"role": "assistant", "content": final})
        for turn in messages:
            if isinstance(turn["content"], list):
                for block in turn["content"]:
                    block.pop("cache_control", None)
        return messages


def _ignore_text(text: str) -> None:
    """The text a streamed reply sends as it arrives: the bench reads the whole reply at the end instead."""
