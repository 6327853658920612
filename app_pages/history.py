"""History: published versions and your draft's, a diff between any two, revert and undo."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app_pages import state, ui
from lib.repo.history import MAIN

ctx = ui.context("view")
st.title("History")
if st.session_state.get(state.HISTORY_DONE):
    st.success(st.session_state.pop(state.HISTORY_DONE))

refs = [MAIN]
if ctx.has_draft():
    refs.append(ctx.repo.branch_name(ctx.user, ctx.slug))
ref = st.radio("Versions of", refs, horizontal=True, format_func=lambda r: "published" if r == MAIN else "my draft")
versions = ctx.repo.history(ctx.slug, ref=ref, limit=200)
if not versions:
    st.info("No versions yet.")
    st.stop()

st.dataframe(
    pd.DataFrame([{"version": v.short, "date": ui.when(v.date), "author": v.author, "message": v.message, "action": v.action or ""} for v in versions]),
    hide_index=True,
    width="stretch",
)

labels = {v.sha: f"{v.short} · {ui.when(v.date)} · {v.author} · {v.message}" for v in versions}
shas = [v.sha for v in versions]
left, right = st.columns(2)
# Keyed by the list shown, so switching between published and my draft starts again from its two newest versions.
older = left.selectbox("Compare", shas, index=min(1, len(shas) - 1), format_func=labels.__getitem__, key=f"diff_a:{ref}:{shas[0]}")
newer = right.selectbox("with", shas, index=0, format_func=labels.__getitem__, key=f"diff_b:{ref}:{shas[0]}")
ui.show_changes(ctx.repo.changes(ctx.slug, older, newer))
ui.show_diff(ctx.repo.diff(ctx.slug, older, newer))

if ctx.can("revert"):
    st.divider()
    st.subheader("Go back")
    target = st.selectbox("Restore the workspace to", shas, format_func=labels.__getitem__, key="revert_to")
    left, right = st.columns(2)
    if left.button("Revert my draft to this version", help="A new commit on your draft; history is kept. Publish it on the Review page."):
        with ui.user_errors("Could not revert your draft"):
            sha = ctx.repo.revert(ctx.user, ctx.slug, target)
            # Shown after the rerun, so the table above already lists the new commit.
            st.session_state[state.HISTORY_DONE] = f"Your draft now equals {target[:10]}" + (f" (commit {sha[:10]})." if sha else " (it already did).")
            st.rerun()
    if ctx.has_draft():
        stack = ctx.repo.undo_stack(ctx.user, ctx.slug)
        if right.button(f"Undo my last saved change ({max(len(stack) - 1, 0)} available)", disabled=len(stack) < 2):
            with ui.user_errors("Could not undo"):
                ctx.repo.undo(ctx.user, ctx.slug)
                st.session_state[state.HISTORY_DONE] = "Undone: your draft is back at its previous saved state."
                st.rerun()
