"""Workspaces: what each workspace remembers, file by file, with its validation status."""
from __future__ import annotations

import streamlit as st

from lib import workspace
from lib.configrepo import ConfigRepo

repo: ConfigRepo = st.session_state["config_repo"]

CATEGORY_TITLES = {
    "workspace": "Workspace",
    "task": "Task specifications",
    "sources": "Tool configurations",
    "output": "Output constraints",
    "profile": "Data schemas",
    "dashboard": "Dashboard",
}

st.title("Workspaces")
st.caption(f"Published versions from the config repo at `{repo.path}`")

slugs = repo.slugs()
if not slugs:
    st.info("The config repo has no workspaces yet.")
    st.stop()

for slug in slugs:
    ws, diagnostics = workspace.load(repo.published_path(slug))
    meta = ws.get("workspace") or {}
    with st.container(border=True):
        head, status = st.columns([4, 1])
        head.subheader(ws.name)
        head.write(meta.get("description", ""))
        errors = [d for d in diagnostics if d.level == "error"]
        if errors:
            status.error(f"{len(errors)} validation error(s)")
        else:
            status.success("valid")
        for d in diagnostics:
            st.warning(d.format())
        kinds = [k for k in workspace.FILES if k in ws.data]
        tabs = st.tabs([CATEGORY_TITLES[k] for k in kinds])
        for tab, kind in zip(tabs, kinds):
            with tab:
                st.code(ws.text(kind), language="yaml")
        versions = repo.history(slug, limit=5)
        st.caption("Last published: " + (f"{versions[0].date[:16]} by {versions[0].author} — {versions[0].message}" if versions else "never"))
