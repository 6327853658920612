"""Chat: create and refine the dashboard or the report with Claude (edit mode), or ask about the data (query mode).

A session starts from the workspace's memory, never from an old transcript.
The conversation shown here lives in this browser session only and is never
saved; what an edit session produces is a draft change you save or discard.
A follow-up sent before saving builds on that change (lib.chat.agent.Carried),
and one in query mode on this chat's previous question and answer.
"""

from __future__ import annotations

import streamlit as st

from app_pages import dashboard_view, report_view, state, ui
from lib.artifacts import autodraft
from lib.chat.agent import Carried, estimate_cost, files_to_save, run_session
from lib.chat.compose import budget_warnings
from lib.chat.model import AnthropicClient, api_key_available
from lib.core import settings
from lib.data import profile
from lib.data.refresh import fetch_candidate
from lib.data.snapshots import Warehouse
from lib.memory import workspace

ctx = ui.context("query")
can_edit = ctx.can("edit")
# Pending changes and Regenerate requests belong to one workspace; switching must not carry them over.
OUTCOME, PREFILL = state.chat_outcome(ctx.slug), state.chat_prefill(ctx.slug)
REGENERATE_KIND = state.chat_regenerate_kind(ctx.slug)  # what the Regenerate request is for: "dashboard" or "report"
st.title("Chat")
modes = ["edit", "query"] if can_edit else ["query"]
default = st.session_state.get(state.CHAT_MODE, modes[0])
mode = st.radio(
    "Mode",
    modes,
    index=modes.index(default) if default in modes else 0,
    horizontal=True,
    format_func=lambda m: "Edit the dashboard" if m == "edit" else "Ask about the data",
    help="Edit mode writes a draft change you save or discard; query mode never changes anything.",
)
st.session_state[state.CHAT_MODE] = mode
path = ctx.draft_path() if mode == "edit" else ctx.published_path
ws, _ = workspace.load(path)
wh = Warehouse.for_workspace(path)
first = ui.first_load(path, wh, ws, ctx.user)
if first is not None and wh.current() is None:
    st.error("Could not load the data:\n\n" + first.summary())
# Every session holds the profile to the workspace's budget; say so when that hides columns from Claude.
ui.show_diagnostics(budget_warnings(ws.data))


def save_outcome(files: dict, message: str, base: str | None) -> None:
    """Save the proposal; `base` is the draft's head when it was made, so a save made since is never written over."""
    with ui.user_errors("Could not save to your draft"):
        sha = ctx.repo.save(ctx.user, ctx.slug, files, message, base=base)
        st.success(f"Saved to your draft as {sha[:10]}. Publish it on the Review page." if sha else "Nothing changed.")
        st.session_state.pop(OUTCOME, None)


DRAFT_CHOICES = {"dashboard": "A dashboard", "report": "A report", "both": "Both"}
MODE_CHOICES = {autodraft.ADD: "Add to it", autodraft.NEW: "Start a new one in its place"}


def offer_autodraft(new_data: bool = False) -> None:
    """The auto-draft, on the data served, or (after a refresh that found data no longer fitting) on the new data:
    from the tables the steward chooses, added to the current dashboard or report or in their place."""
    st.subheader("Auto-draft a dashboard or a report" + (" on the new data" if new_data else ""))
    st.caption(
        "A first dashboard from the data profile and your output constraints, made without a model: "
        "KPIs, a trend, breakdowns, a table and an insight text. A report reads the same picks as a document: "
        "an overview paragraph, key figures, the trend, the top movers and a table."
        + (
            " It is drafted on the data the sources give now, which the refresh did not switch to; saving it "
            "also saves the new data's profile, so the next Refresh accepts the new shape."
            if new_data
            else ""
        )
    )
    kind_key, tables_key, mode_key = f"autodraft_kind:{ctx.slug}", f"autodraft_tables:{ctx.slug}", f"autodraft_mode:{ctx.slug}"
    asked = st.session_state.pop(REGENERATE_KIND, None)  # once: the choice is the steward's after that
    if new_data and asked in DRAFT_CHOICES:
        st.session_state[kind_key] = asked  # what no longer fits is what to draft
        st.session_state[mode_key] = autodraft.NEW  # and the current one no longer fits the data: drafted anew
    choice = st.radio("Draft", list(DRAFT_CHOICES), format_func=DRAFT_CHOICES.get, horizontal=True, key=kind_key)
    kinds = autodraft.DRAFTABLE if choice == "both" else (choice,)
    sources = [str(s.get("name")) for s in (ws.get("sources") or {}).get("sources") or []]
    offered = autodraft.offered_tables(ws.data, wh.tables(), sources if new_data else ())
    # The tables nothing shows yet (a source just added), else all; a choice stays the steward's while it is offered.
    st.session_state[tables_key] = [t for t in st.session_state.get(tables_key, autodraft.default_tables(ws.data, offered)) if t in offered]
    names = st.multiselect(
        "Draft from", offered, key=tables_key, help="Each table chosen gets KPI cards, charts and tables of its own; the one with the most measures leads."
    )
    current = [kind for kind in kinds if ws.get(kind)]
    mode = autodraft.NEW
    if current:
        st.session_state.setdefault(mode_key, autodraft.ADD)
        mode = st.radio(
            f"The workspace has a {' and a '.join(current)}",
            list(MODE_CHOICES),
            format_func=MODE_CHOICES.get,
            horizontal=True,
            key=mode_key,
            help="Adding keeps every component and section it has and appends the drafted ones; "
            "a new one replaces it (you see what it removes before anything is saved).",
        )
    if st.button("Auto-draft", type="primary", icon=":material/auto_awesome:"):
        with ui.user_errors("Could not draft a dashboard"):
            if new_data:
                with st.status("Fetching the new data…"):
                    tables, _ = fetch_candidate(path)
            else:
                tables = wh.tables()
            # On new data the old profile describes the old shape: profile the new data instead.
            drafted = autodraft.draft_into({**ws.data, "profile": None} if new_data else ws.data, tables, kinds, names=names, mode=mode, workspace_path=path)
            diffs = []
            for kind in kinds:
                old = workspace.render(kind, ws.get(kind)) if ws.get(kind) else ""
                diffs.append(ui.text_diff(old, workspace.render(kind, drafted.files[kind]), workspace.FILES[kind]))
            st.session_state[OUTCOME] = {
                "kind": "autodraft",
                "files": drafted.files,
                "changes": drafted.changes,
                "tables": drafted.tables,
                "mode": mode,
                "new_data": new_data,
                "diff": "\n".join(d for d in diffs if d),
                "base": ctx.repo.draft_head(ctx.user, ctx.slug),
            }
            st.session_state.pop(PREFILL, None)
            st.session_state.pop(REGENERATE_KIND, None)


def show_autodraft_change(pending: dict) -> None:
    """What the auto-draft changes, before anything is saved: the summary, a warning naming what a new one removes,
    and the YAML diff behind an expander."""
    for change in pending.get("changes", {}).values():
        st.markdown(f"**{workspace.FILES[change.file]}**\n" + "".join(f"\n- {ui._md(line)}" for line in change.summary()))
        if warning := change.warning():
            st.warning(ui._md(warning))
    with st.expander("The YAML diff"):
        st.code(pending["diff"] or "(no change)", language="diff")


if not api_key_available():
    if can_edit:
        st.info(
            "No Anthropic API key is set on this server, so chat with Claude is off; the auto-draft below works "
            "without one, and **Explore** asks the data your own questions and saves the answer to your draft dashboard. "
            "The operator can set `ANTHROPIC_API_KEY` (or `anthropic.api_key` in `.streamlit/secrets.toml`)."
        )
    else:
        st.info(
            "Chat with Claude is not set up on this server. Ask the data your own questions on the **Explore** page: "
            "pick a measure, a breakdown, a time grain and filters, and see the SQL and a chart. You can still open the **Dashboard**, use its filters, "
            "click **Refresh** for the latest data, try it with your own CSV, and export it as HTML; "
            "**History** shows how the workspace changed. Ask your workspace owner if you need chat."
        )
    st.page_link("app_pages/explore.py", label="Open Explore", icon=":material/query_stats:")
    if can_edit and mode == "edit":
        offer_autodraft(new_data=bool(st.session_state.get(PREFILL)))
elif can_edit and mode == "edit" and not (ws.get("dashboard") and ws.get("report")):
    with st.expander("Fast start without the model"):
        offer_autodraft()


def show_turn(turn: dict) -> None:
    """One turn of the chat: the text, and for a reply what stopped it, each shown once."""
    if turn["text"]:
        st.markdown(turn["text"])
    if turn.get("error"):
        st.error(turn["error"])
    if turn.get("notice"):
        st.warning(turn["notice"])


def carried_from(pending: dict) -> Carried:
    """What a follow-up builds on while a proposal is pending: its files (and a session's proposed rules)."""
    if pending["kind"] == "autodraft":
        return Carried(files=pending["files"])
    return pending["outcome"].carried()


# The transcript of this browser session: shown, never written anywhere.
transcript = st.session_state.setdefault(state.CHAT_TRANSCRIPT, {}).setdefault((ctx.slug, mode), [])
for turn in transcript:
    with st.chat_message(turn["role"]):
        show_turn(turn)

usage_total = st.session_state.setdefault(
    state.CHAT_USAGE, {"input_tokens": 0, "output_tokens": 0, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0, "calls": 0}
)
prefill = st.session_state.get(PREFILL) if mode == "edit" else None
message, regenerate = None, False
if api_key_available():
    if prefill:
        st.warning(f"The last refresh found data that no longer fits the {st.session_state.get(REGENERATE_KIND) or 'dashboard'}.")
        edited = st.text_area("Regenerate request", value=prefill, height=160)
        if st.button("Regenerate with Claude", type="primary"):
            message, regenerate = edited, True
            st.session_state.pop(PREFILL, None)
            st.session_state.pop(REGENERATE_KIND, None)
    typed = st.chat_input("Ask Claude to build or change the dashboard or the report" if mode == "edit" else "Ask about this dashboard's data")
    message = message or typed
    st.caption(
        "Each message starts a session from the workspace's memory and, while a proposed change is not saved, from that "
        "change: a follow-up builds on it. Claude does not see this conversation, and it is not kept: it lives in this "
        "browser tab only."
        if mode == "edit"
        else "Claude sees this chat's previous question and its answer, nothing older. The conversation is not kept: it lives in this browser tab only."
    )

if message:
    transcript.append({"role": "user", "text": message})
    with st.chat_message("user"):
        st.markdown(message)
    served = wh.current()
    files, tables, version = dict(ws.data), wh.tables(served) if served else {}, served.id if served else ""
    base = ctx.repo.draft_head(ctx.user, ctx.slug) if mode == "edit" else None  # the draft Claude reads
    before = st.session_state.get(OUTCOME) if mode == "edit" and can_edit and not regenerate else None
    if before:  # a follow-up builds on the pending change, which is saved over the draft it was made on
        carried = carried_from(before)
        base = before.get("base")
        regenerate = bool(before.get("regenerated") or before.get("new_data"))  # made on the new data: so is the follow-up
    else:
        asked = next((t for t in reversed(transcript[:-1]) if t["role"] == "assistant" and t.get("answer")), None)
        carried = Carried(question=asked["question"], answer=asked["answer"]) if mode == "query" and asked else None
    if regenerate:
        # Regenerate works on the new data, which the refresh did not switch to.
        with st.status("Fetching the new data…"):
            tables, _ = fetch_candidate(path)
            files["profile"] = profile.build_for(tables, ws.get("sources"), path)
            version = "candidate"
    with st.chat_message("assistant"):
        stream = st.empty()
        steps = st.empty()
        streamed: list[list[str]] = [[]]  # each step's text, shown a paragraph apart

        def on_event(kind: str, payload: dict) -> None:
            if kind == "step" and streamed[-1]:
                streamed.append([])
            elif kind == "text":
                streamed[-1].append(payload["text"])
                stream.markdown("\n\n".join("".join(step) for step in streamed if step))
            elif kind == "wait":
                steps.caption(payload["text"])
            elif kind == "tool_call":
                steps.caption(f"using {payload['name']}…")
            elif kind == "draft":
                written = "report" if payload.get("kind") == "report" else "draft"
                steps.caption(f"{written} written — " + ("passes every check" if payload["passes"] else "checks found problems; revising"))

        outcome = None  # stays None only when the session failed (the message is shown)
        with ui.user_errors("Could not ask Claude") as caught:  # a ModelError says what failed: the key, a limit, the network
            client = AnthropicClient()
            outcome = run_session(
                files, tables, version, mode, message, client, user=ctx.user, slug=ctx.slug, on_event=on_event, workspace_path=path, carried=carried
            )
        if caught.failed or outcome is None:
            st.stop()
        steps.empty()
        stream.empty()
        said = outcome.reply or ("" if outcome.error or outcome.notice else "(no answer)")
        turn = {"role": "assistant", "text": said, "error": outcome.error, "notice": outcome.notice, "question": message, "answer": outcome.answer}
        show_turn(turn)
        transcript.append(turn)
    for key in usage_total:
        usage_total[key] += outcome.usage.get(key, 0)
    if mode == "edit" and outcome.has_changes:
        st.session_state[OUTCOME] = {"kind": "session", "outcome": outcome, "files": files, "regenerated": regenerate, "base": base}
    elif before:
        st.session_state.pop(OUTCOME, None)  # a follow-up that undid the pending change leaves nothing to save

pending = st.session_state.get(OUTCOME)
if pending and can_edit:
    st.divider()
    st.subheader("Proposed change (not saved yet)")
    served = wh.current()
    served_tables, served_version = (wh.tables(served), served.id) if served else (None, "")
    found = []
    if pending["kind"] == "autodraft":
        show_autodraft_change(pending)
        to_save = pending["files"]
        drafted_kinds = " and the ".join(kind for kind in autodraft.DRAFTABLE if kind in to_save)
        if pending.get("mode") == autodraft.ADD:
            message_text = f"Auto-draft from {', '.join(pending.get('tables') or [])} added to the {drafted_kinds}"
        else:
            message_text = "Auto-draft the " + drafted_kinds
        accepted = []
        tables, version = served_tables, served_version
        if pending.get("new_data"):  # drafted on the new data, which is not served yet: check it there
            with st.status("Checking it on the new data…"):
                tables, _ = fetch_candidate(path)
            version = "candidate"
        if "dashboard" in to_save:
            found = dashboard_view.preview(ws, to_save["dashboard"], tables, version)
        if "report" in to_save:
            found = found + report_view.preview(ws, to_save["report"], tables, version)
    else:
        outcome = pending["outcome"]
        accepted = []
        if outcome.error:
            st.warning(
                "The session stopped before Claude finished (the reason is above). What it wrote until then is below, checked: save it, discard it, or ask again."
            )
        if outcome.proposed_rules:
            st.markdown("**Rules Claude proposes** (tick those to keep in the workspace's task rules)")
            for rule in outcome.proposed_rules:
                if st.checkbox(f"`{rule['id']}` — {rule['text']}", key=f"accept_{rule['id']}"):
                    accepted.append(rule["id"])
        # A regenerated dashboard is saved with the new data's profile (lib.chat.agent.files_to_save says why).
        to_save = files_to_save(pending["files"], outcome, accepted, regenerated=bool(pending.get("regenerated")))
        message_text = "Report change from a Claude session" if outcome.report_diff and not outcome.dashboard_diff else "Dashboard change from a Claude session"
        if outcome.dashboard_diff:
            st.code(outcome.dashboard_diff, language="diff")
            if pending.get("regenerated"):  # checked by the session on the new data, which is not served yet
                found = outcome.check_diagnostics
                (st.success if outcome.passes else st.error)("The draft passes every check." if outcome.passes else "The draft fails some checks:")
                ui.show_diagnostics(found)
            elif to_save.get("dashboard"):
                found = dashboard_view.preview(ws, to_save["dashboard"], served_tables, served_version)
        if outcome.report_diff:
            st.code(outcome.report_diff, language="diff")
            if pending.get("regenerated"):  # checked by the session on the new data
                found = found + outcome.report_diagnostics
                ui.show_diagnostics(outcome.report_diagnostics)
            elif to_save.get("report"):
                found = found + report_view.preview(ws, to_save["report"], served_tables, served_version)
    if to_save:
        do_save, discard = dashboard_view.save_buttons(found, f"chat:{ctx.slug}")
    else:  # a Save that saves nothing is never offered
        st.info("Nothing to save yet: tick a rule above to keep it, or discard the proposal.")
        do_save, discard = False, st.button("Discard", key=f"chat:{ctx.slug}:discard")
    if do_save:
        save_outcome(to_save, message_text + (f" (+{len(accepted)} rule(s))" if accepted else ""), pending.get("base"))
    if discard:
        st.session_state.pop(OUTCOME, None)
        st.rerun()

if usage_total["calls"]:
    model = settings.model_id()
    st.caption(
        f"This browser session: {usage_total['calls']} model call(s) · input {usage_total['input_tokens']:,} · "
        f"output {usage_total['output_tokens']:,} · cache read {usage_total['cache_read_input_tokens']:,} · "
        f"cache write {usage_total['cache_creation_input_tokens']:,} tokens · about ${estimate_cost(usage_total, model):.4f}"
    )
