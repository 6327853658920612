"""Chat: create and refine the dashboard with Claude (edit mode), or ask about it (query mode).

A session starts from the workspace's memory, never from an old transcript;
the transcript lives in this browser session only. What an edit session
produces is a draft change you save or discard.
"""
from __future__ import annotations

import streamlit as st

from app_pages import ui
from lib import autodraft, profile, workspace
from lib.access import PermissionDenied
from lib.configrepo import ConfigRepoError
from lib.diagnostics import ValidationFailed

ctx = ui.context("query")
can_edit = ctx.can("edit")
st.title("Chat")
modes = ["edit", "query"] if can_edit else ["query"]
default = st.session_state.get("chat_mode", modes[0])
mode = st.radio("Mode", modes, index=modes.index(default) if default in modes else 0, horizontal=True,
                format_func=lambda m: "Edit the dashboard" if m == "edit" else "Ask about the data",
                help="Edit mode writes a draft change you save or discard; query mode never changes anything.")
path = ctx.draft_path() if mode == "edit" else ctx.published_path
ws, diagnostics = ui.load(path)
wh = ui.warehouse(path)

try:
    from lib.model import api_key_available
except ImportError:  # TEMPORARY until lib/model.py lands
    def api_key_available() -> bool:
        return False

if not api_key_available():
    st.info("No Anthropic API key is set, so chat is off. Everything else works without one. "
            "Set `ANTHROPIC_API_KEY` (or `anthropic.api_key` in `.streamlit/secrets.toml`) to chat with Claude.")
    if can_edit:
        st.subheader("Auto-draft a dashboard")
        st.caption("A first dashboard from the data profile and your output constraints, made without a model: "
                   "KPIs, a trend, breakdowns, a table and an insight text.")
        if st.button("Auto-draft", type="primary", icon=":material/auto_awesome:"):
            if wh.current() is None:
                from lib.refresh import refresh

                with st.status("Loading the data…"):
                    refresh(path, wh)
            files = dict(ws.data)
            try:
                if not files.get("profile"):
                    if wh.current() is None:
                        raise ValueError("no data loaded: add a source on the Sources page first")
                    files["profile"] = profile.build(wh.tables(), (ws.get("sources") or {}).get("sources") or [])
                draft = autodraft.draft(files)
                old = workspace.render("dashboard", ws.get("dashboard")) if ws.get("dashboard") else ""
                st.session_state["chat_outcome"] = {"dashboard": draft, "profile": files["profile"],
                                                    "diff": ui.text_diff(old, workspace.render("dashboard", draft), "dashboard.yaml")}
            except ValueError as exc:
                st.error(str(exc))
        outcome = st.session_state.get("chat_outcome")
        if outcome:
            st.code(outcome["diff"] or "(no change)", language="diff")
            save_col, discard_col = st.columns(2)
            if save_col.button("Save to my draft", type="primary"):
                try:
                    sha = ctx.repo.save(ctx.user, ctx.slug, {"dashboard": outcome["dashboard"], "profile": outcome["profile"]},
                                        "Auto-draft the dashboard")
                    st.success(f"Saved as {sha[:10]}." if sha else "Nothing changed.")
                    del st.session_state["chat_outcome"]
                except (ValidationFailed, ConfigRepoError, PermissionDenied) as exc:
                    st.error(str(exc))
            if discard_col.button("Discard"):
                del st.session_state["chat_outcome"]
                st.rerun()
    st.stop()

st.warning("Chat with Claude is being wired up.")
