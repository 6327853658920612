"""One chat session with the model: compose, call, run tools, repeat; then forget.

`run_session` checks the person's role, composes the first request from the
workspace (lib.chat.compose), and loops: call the model, run the tool_use blocks
it returns (lib.chat.toolbox), send the tool results back, until the model
ends its turn or a limit (steps, tokens, wall time, malformed tool calls)
stops it. The result is an `Outcome`: the answer, the draft dashboard and
report with their diffs and checks, rule proposals, token usage. A failed model
call (an API error, a stream broken mid-reply, a wait past the time limit) ends
the session with `outcome.error` and keeps what it made until then, with the
tokens of the steps that completed. Nothing is saved here:
`apply_outcome` turns an accepted outcome into the files a caller saves with
`ConfigRepo.save` (`files_to_save` adds the Regenerate rule: a regenerated
dashboard is saved with the new data's profile).

Selective forgetting: the transcript (messages, tool inputs and results,
streamed text) lives only in local variables of `run_session`. It is not
written to disk, the config repo, a cache or a log, and it is gone when the
function returns; the Outcome carries the draft and the final answer, not the
conversation. `on_event` hands progress to the caller's UI, in memory.

A chat's next message is a new session, which a `Carried` links to the last
one, and only so: in edit mode it composes from the pending (unsaved) change's
files, so a follow-up builds on it and the new outcome holds both; in query
mode it carries the chat's previous question and answer as one earlier turn.
"""

from __future__ import annotations

import copy
import datetime as dt
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from ..artifacts import checks
from ..core.diagnostics import ERROR, Diagnostic
from ..data.engine import scope_for
from ..data.row_profile import scoped_profile
from ..memory import workspace
from ..roles import access
from ..roles.access import User
from .agent_tools import ARTIFACT_TOOLS
from .compose import ARTIFACTS, compose
from .model import ModelClient, ModelError, waiting_text
from .toolbox import Toolbox

EventCallback = Callable[[str, dict[str, Any]], None]

USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
STOP_NOTICES = {
    "max_tokens": "the model's reply reached max_tokens and was cut off; ask for a smaller change",
    "refusal": "the model declined to continue with this request",
    "model_context_window_exceeded": "the conversation outgrew the model's context window; start a new session",
}
# How a reply cut short is marked, by why it stopped.
PARTIAL_NOTES = {
    "max_tokens": "cut off at the output limit",
    "refusal": "the model declined to go on",
    "model_error": "broken off by the failure below",
}


@dataclass(frozen=True)
class Limits:
    max_steps: int = 8  # model calls per session
    max_tokens: int = 200_000  # cumulative input (fresh, cache read and cache write) plus output tokens
    max_seconds: float = 120.0  # wall time, checked before each model call
    max_invalid_tool_calls: int = 3  # malformed tool calls in a row before the session stops


@dataclass
class Outcome:
    mode: str
    answer: str = ""
    draft_dashboard: dict[str, Any] | None = None
    dashboard_diff: str = ""  # unified diff of the draft against the workspace's dashboard.yaml
    check_diagnostics: list[Diagnostic] = field(default_factory=list)
    draft_report: dict[str, Any] | None = None  # the same three for report.yaml (write_report)
    report_diff: str = ""
    report_diagnostics: list[Diagnostic] = field(default_factory=list)
    proposed_rules: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=lambda: {**{k: 0 for k in USAGE_KEYS}, "calls": 0})
    steps: int = 0
    stopped_reason: str = ""  # end_turn, max_tokens (reply cut), refusal, step_limit, token_limit, time_limit, invalid_tool_calls, model_error
    notice: str | None = None  # why a limit stopped the session, for the person
    error: str | None = None  # what went wrong when the session failed; the drafts made until then are kept
    texts: list[str] = field(default_factory=list)  # each step's text, in order (a step broken mid-reply: what arrived)
    partial: bool = False  # the last text was cut short (max_tokens, a refusal, a failure mid-reply)
    also_saves: dict[str, Any] = field(default_factory=dict)  # files a carried change saves besides its drafts (an auto-draft's new profile)

    @property
    def reply(self) -> str:
        """What the model said, one paragraph per step, a reply cut short marked as partial ("" when it said nothing)."""
        shown = "\n\n".join(t for t in self.texts if t)
        if shown and self.partial:
            shown += f" …\n\n*(partial reply: {PARTIAL_NOTES.get(self.stopped_reason, 'cut short')})*"
        return shown

    def carried(self) -> Carried:
        """What the chat's next edit session builds on while this outcome's change is pending: its drafts and proposals."""
        drafts = {"dashboard": (self.draft_dashboard, self.dashboard_diff), "report": (self.draft_report, self.report_diff)}
        files = {kind: copy.deepcopy(draft) for kind, (draft, diff) in drafts.items() if draft is not None and diff}
        return Carried(files={**copy.deepcopy(self.also_saves), **files}, rules=tuple(copy.deepcopy(self.proposed_rules)))

    @property
    def passes(self) -> bool:
        """A draft (dashboard, report or both) exists and no check on either reports an error."""
        drafted = self.draft_dashboard is not None or self.draft_report is not None
        return drafted and not any(d.level == ERROR for d in self.check_diagnostics + self.report_diagnostics)

    @property
    def has_changes(self) -> bool:
        return self.mode == "edit" and (bool(self.dashboard_diff) or bool(self.report_diff) or bool(self.proposed_rules) or bool(self.also_saves))


@dataclass(frozen=True)
class Carried:
    """All a chat's next session gets of the one before it; the conversation itself is not carried."""

    files: Mapping[str, Any] = field(default_factory=dict)  # edit mode: the pending change's files (kind -> content), composed from
    rules: tuple[Mapping[str, Any], ...] = ()  # edit mode: rules the pending change proposes, still to accept
    question: str = ""  # query mode: this chat's previous question ...
    answer: str = ""  # ... and the answer it got


def run_session(
    files: Mapping[str, Any],
    tables: Mapping[str, Any] | None,
    version: str,
    mode: str,
    message: str,
    client: ModelClient,
    *,
    user: User,
    slug: str = "",
    limits: Limits = Limits(),
    on_event: EventCallback | None = None,
    model: str | None = None,
    profile_budget: int | None = None,
    today: str | None = None,
    workspace_path: Path | None = None,
    carried: Carried | None = None,
) -> Outcome:
    """Run one session in `mode` ("edit" or "query") on the workspace `files` and its data `tables`.

    `workspace_path` is the workspace's folder, where a live source's relative path is resolved.
    `carried` links the session to the chat's previous one (see `Carried`): in edit mode the model sees, and
    changes, the pending change's files, and the outcome's diffs are against `files` (the saved draft), so it
    holds the pending change and this session's together.
    Raises PermissionDenied when the user's role does not allow the mode
    (edit needs steward or owner; query needs viewer). Model failures do not
    raise: they end the session with `outcome.error` set.
    """
    access.require(user, "edit" if mode == "edit" else "query", files.get("workspace") or {}, slug)
    carried = carried or Carried()
    emit = on_event or (lambda kind, payload: None)
    shown = {**files, **carried.files} if mode == "edit" else files  # what the model sees and changes
    # A user held to some rows (lib.data.row_filters) sends the model the profile of those rows only.
    scoped = {**shown, "profile": scoped_profile(shown.get("profile"), scope_for(user, files), tables, files)} if shown.get("profile") else shown
    request = copy.deepcopy(compose(scoped, mode, message, model=model, profile_budget=profile_budget, today=today).request)
    conversation = request["messages"]
    if mode == "query" and carried.question and carried.answer:
        _add_previous_turn(conversation, carried.question, carried.answer)
    toolbox = Toolbox(shown, tables, version, mode, user.name, today or dt.date.today().isoformat(), workspace_path=workspace_path, asker=user)
    outcome = Outcome(mode=mode)
    started = time.monotonic()
    deadline = started + limits.max_seconds
    invalid_in_a_row = 0
    streamed: list[str] = []  # the text of the step under way, as it arrives

    def on_text(text: str) -> None:
        streamed.append(text)
        emit("text", {"text": text})

    def on_wait(reason: str, seconds: int) -> None:
        emit("wait", {"reason": reason, "seconds": seconds, "text": waiting_text(reason, seconds)})

    while True:
        stop = _limit_reached(outcome, limits, time.monotonic() - started)
        if stop:
            outcome.stopped_reason, outcome.notice = stop
            break
        streamed.clear()
        emit("step", {"step": outcome.steps + 1})
        try:
            response = client.create(request, on_text=on_text if on_event else None, on_wait=on_wait, deadline=deadline)  # streams for a UI
        except ModelError as exc:
            outcome.stopped_reason, outcome.error = "model_error", exc.message
            partial = "".join(streamed).strip()
            if partial:  # shown as it arrived; kept, marked as cut short
                outcome.texts.append(partial)
                outcome.partial = True
            break
        outcome.steps += 1
        _add_usage(outcome.usage, response.get("usage") or {})
        emit("usage", dict(outcome.usage))
        content = [_as_param(block) for block in response.get("content") or []]
        text = "".join(b["text"] for b in content if b.get("type") == "text").strip()
        if text:
            outcome.answer = text
            outcome.texts.append(text)
        tool_uses = [b for b in content if b.get("type") == "tool_use"]
        if response.get("stop_reason") != "tool_use" or not tool_uses:
            outcome.stopped_reason = response.get("stop_reason") or "end_turn"
            outcome.notice = STOP_NOTICES.get(outcome.stopped_reason)
            outcome.partial = bool(text) and outcome.stopped_reason in ("max_tokens", "refusal")
            break
        conversation.append({"role": "assistant", "content": content})
        results = []
        for use in tool_uses:
            emit("tool_call", {"name": use.get("name")})
            result = toolbox.execute(use.get("name") or "", use.get("input"))  # no name: "no tool named ''"
            invalid_in_a_row = invalid_in_a_row + 1 if result.malformed else 0
            emit("tool_result", {"name": use.get("name"), "is_error": result.is_error, "malformed": result.malformed})
            block = {"type": "tool_result", "tool_use_id": use.get("id"), "content": result.content}
            if result.is_error:
                block["is_error"] = True
            results.append(block)
            if use.get("name") in ARTIFACT_TOOLS and not result.malformed:
                emit("draft", {"passes": not result.is_error, "kind": ARTIFACT_TOOLS[use.get("name") or ""]})
        if invalid_in_a_row >= limits.max_invalid_tool_calls:
            outcome.stopped_reason = "invalid_tool_calls"
            outcome.error = (
                f"stopped after {invalid_in_a_row} malformed tool calls in a row (the model kept sending "
                "input its tools cannot use); nothing was saved — try again or rephrase the request"
            )
            break
        conversation.append({"role": "user", "content": results})

    _finish(outcome, files, toolbox, carried)
    return outcome


def _add_previous_turn(conversation: list[dict[str, Any]], question: str, answer: str) -> None:
    """The chat's previous question and its answer as an earlier exchange, before the new message."""
    opening = conversation[0]["content"]
    message = opening.pop()
    opening.append({"type": "text", "text": question})
    conversation.append({"role": "assistant", "content": [{"type": "text", "text": answer}]})
    conversation.append({"role": "user", "content": [message]})


def _limit_reached(outcome: Outcome, limits: Limits, elapsed: float) -> tuple[str, str] | None:
    if outcome.steps >= limits.max_steps:
        return "step_limit", f"stopped after {outcome.steps} model calls (the session limit); the draft so far is kept"
    used = sum(outcome.usage[k] for k in USAGE_KEYS)
    if used >= limits.max_tokens:
        return "token_limit", f"stopped after {used:,} tokens (the session limit is {limits.max_tokens:,}); the draft so far is kept"
    if elapsed >= limits.max_seconds:
        return "time_limit", f"stopped after {elapsed:.0f} s (the session limit is {limits.max_seconds:g} s); the draft so far is kept"
    return None


def _add_usage(total: dict[str, int], usage: Mapping[str, Any]) -> None:
    for key in USAGE_KEYS:
        total[key] += int(usage.get(key) or 0)
    total["calls"] += 1


def _as_param(block: Mapping[str, Any]) -> dict[str, Any]:
    """A response content block as it goes back into the conversation: only the fields the API accepts."""
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": block.get("text", "")}
    if kind == "tool_use":
        return {"type": "tool_use", "id": block.get("id"), "name": block.get("name"), "input": block.get("input")}
    return {k: v for k, v in block.items() if v is not None}  # thinking and others go back unchanged


def _finish(outcome: Outcome, files: Mapping[str, Any], toolbox: Toolbox, carried: Carried) -> None:
    """The session's drafts, diffs and checks, with the carried change's drafts the session did not write again."""
    new_ids = {rule["id"] for rule in toolbox.proposals}
    outcome.proposed_rules = [dict(rule) for rule in carried.rules if rule.get("id") not in new_ids] + [dict(rule) for rule in toolbox.proposals]
    if outcome.mode == "edit":
        outcome.also_saves = {kind: copy.deepcopy(content) for kind, content in carried.files.items() if kind not in ARTIFACTS and content != files.get(kind)}
    for kind in ARTIFACTS:
        draft, found = toolbox.drafts.get(kind), toolbox.found.get(kind, [])
        if draft is None and outcome.mode == "edit" and carried.files.get(kind):  # the pending change's, untouched: checked here
            draft = carried.files[kind]
            ws = workspace.Workspace(path=toolbox.workspace_path or Path("session"), data=dict(toolbox.files))
            found = checks.run(ws, toolbox.tables, toolbox.version, file=workspace.FILES[kind], kind=kind)
        if draft is None:
            continue
        if kind == "dashboard":
            outcome.draft_dashboard, outcome.check_diagnostics = copy.deepcopy(draft), list(found)
            outcome.dashboard_diff = _diff(files, kind, draft)
        else:
            outcome.draft_report, outcome.report_diagnostics = copy.deepcopy(draft), list(found)
            outcome.report_diff = _diff(files, kind, draft)


def _diff(files: Mapping[str, Any], kind: str, draft: Mapping[str, Any]) -> str:
    """The unified diff of a draft against the workspace's file of that kind ("" when they are the same)."""
    name = workspace.FILES[kind]
    before = workspace.render(kind, files[kind]) if files.get(kind) else ""
    return workspace.text_diff(before, workspace.render(kind, draft), f"a/{name}", f"b/{name}")


def apply_outcome(files: Mapping[str, Any], outcome: Outcome, accepted_rule_ids: list[str] | tuple[str, ...] = ()) -> dict[str, Any]:
    """The files to save for an accepted edit session: {"dashboard": ..., "report": ..., "task": ...}, only those that change.

    A session that ended with an error still offers the drafts it made before (the caller shows their
    checks); query sessions have nothing to save and give {}. Unknown rule ids raise KeyError. The
    caller saves with `ConfigRepo.save(user, slug, files, message)`, which validates first.
    """
    if outcome.mode != "edit":
        return {}
    proposals = {rule["id"]: rule for rule in outcome.proposed_rules}
    unknown = [rid for rid in accepted_rule_ids if rid not in proposals]
    if unknown:
        raise KeyError(f"no proposed rule with id {', '.join(map(repr, unknown))}; proposed: {', '.join(proposals) or 'none'}")
    out: dict[str, Any] = copy.deepcopy(outcome.also_saves)
    if outcome.draft_dashboard is not None and outcome.dashboard_diff:
        out["dashboard"] = copy.deepcopy(outcome.draft_dashboard)
    if outcome.draft_report is not None and outcome.report_diff:
        out["report"] = copy.deepcopy(outcome.draft_report)
    if accepted_rule_ids:
        task = copy.deepcopy(files.get("task") or {"rules": []})
        task.setdefault("rules", []).extend(copy.deepcopy(proposals[rid]) for rid in accepted_rule_ids)
        out["task"] = task
    return out


def files_to_save(
    files: Mapping[str, Any], outcome: Outcome, accepted_rule_ids: list[str] | tuple[str, ...] = (), *, regenerated: bool = False
) -> dict[str, Any]:
    """What saving an edit session writes: `apply_outcome`, plus the Regenerate rule.

    A Regenerate session (after a refresh found data that no longer fits) ran
    on the new data, which the refresh did not switch to, and `files` carries
    that data's profile. A dashboard from it is saved together with that
    profile: profile.yaml decides the shape the next Refresh accepts, so the
    new dashboard and the new data are accepted together. A Regenerate that
    changed no dashboard (rules only) leaves the profile alone, and so does an
    ordinary session.
    """
    out = apply_outcome(files, outcome, accepted_rule_ids)
    if regenerated and "dashboard" in out:
        if not files.get("profile"):
            raise ValueError("a regenerated dashboard is saved with the new data's profile, and `files` has none")
        out["profile"] = copy.deepcopy(files["profile"])
    return out


def regenerate_message(report, *, has_report: bool = False) -> str:
    """The request for a "Regenerate" edit session after a refresh found data that no longer fits.

    `report` is a lib.data.refresh.RefreshReport: either the dashboard no longer fits (the refresh kept
    serving the old data) or only the report does (the new data is served, with warnings).
    `has_report`: the workspace has a report.yaml, which reads the same tables as the dashboard.
    The session needs the new data's tables and profile.
    """
    if report.ok and report.report_warnings:
        lines = [
            "The data changed shape, and the report no longer fits it. Update report.yaml with write_report so that "
            "every query runs on the new data and the report says the same things as before. Keep its sections, "
            "headings, prose and parameters unless a change is needed. What changed:"
        ]
    else:
        lines = [
            "The data changed shape, and the dashboard no longer fits it. Update dashboard.yaml so that every "
            "query runs on the new data and the dashboard shows the same things as before. Keep ids, titles, rule "
            "colours and layout unless a change is needed. What changed:"
        ]
    for source in report.sources:
        for column in source.missing:
            guess = source.renames.get(column)
            hint = f"; probably renamed to {guess!r}" if guess else "; no likely new name was found"
            lines.append(f"- table {source.name}: column {column!r} is missing{hint}")
        for change in source.changed:
            lines.append(f"- table {source.name}: column {change['column']!r} changed type from {change['was']} to {change['now']}")
        if source.status == "failed":
            lines.append(f"- table {source.name}: could not be loaded ({source.message})")
    lines.extend(f"- dashboard: {error}" for error in report.dashboard_errors)
    lines.extend(f"- report: {warning}" for warning in report.report_warnings)
    if len(lines) == 1:
        lines.append("- no column changes were reported; check every query against the profile")
    if has_report and not (report.ok and report.report_warnings):
        lines.append("The workspace's report.yaml reads the same tables: update its queries the same way with write_report, keeping its sections and text.")
    return "\n".join(lines)


# --------------------------------------------------------------------------- cost

# USD per million tokens: input, output, cache read, cache write (5-minute TTL).
# Taken from Anthropic's pricing pages as of 2026-11-30; an estimate, since
# prices change and batch, long-context and data-residency rates differ.
PRICES_PER_MTOK: dict[str, tuple[float, float, float, float]] = {
    "claude-haiku-4-5": (1.00, 5.00, 0.10, 1.25),
    "claude-sonnet-4": (3.00, 15.00, 0.30, 3.75),  # also Sonnet 4.5 and 4.6 by prefix
    "claude-sonnet-5": (2.00, 10.00, 0.20, 2.50),  # also Sonnet 5.5 by prefix
    "claude-opus-4-1": (15.00, 75.00, 1.50, 18.75),
    "claude-opus-4-5": (5.00, 25.00, 0.50, 6.25),
    "claude-opus-4-6": (5.00, 25.00, 0.50, 6.25),
    "claude-opus-4-7": (5.00, 25.00, 0.50, 6.25),
    "claude-opus-4-8": (5.00, 25.00, 0.50, 6.25),
    "claude-opus-5": (5.00, 25.00, 0.50, 6.25),
}
PRICES_AS_OF = "2026-11-30"
FALLBACK_PRICE = PRICES_PER_MTOK["claude-sonnet-4"]  # an unknown model is priced as a Sonnet 4.x


def price_of(model: str) -> tuple[float, float, float, float]:
    """Prices for a model id, by its longest known prefix (dated ids such as claude-haiku-4-5-20251001 included)."""
    matches = [name for name in PRICES_PER_MTOK if model == name or model.startswith(name + "-")]
    return PRICES_PER_MTOK[max(matches, key=len)] if matches else FALLBACK_PRICE


def estimate_cost(usage: Mapping[str, int], model: str) -> float:
    """Estimated USD for a session's usage (see PRICES_PER_MTOK for the date and the caveats)."""
    input_price, output_price, read_price, write_price = price_of(model)
    return (
        usage.get("input_tokens", 0) * input_price
        + usage.get("output_tokens", 0) * output_price
        + usage.get("cache_read_input_tokens", 0) * read_price
        + usage.get("cache_creation_input_tokens", 0) * write_price
    ) / 1_000_000
