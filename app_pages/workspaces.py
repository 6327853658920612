"""Workspaces: what each remembers, create one from a template, import one memory category."""

from __future__ import annotations

import streamlit as st

from app_pages import state, ui
from lib.memory import schemas, workspace
from lib.memory.kinds import KINDS
from lib.roles import access, auth
from lib.roles.access import STEWARD

CATEGORY_TITLES = {kind: schemas.title(kind) for kind in KINDS}  # "Task specifications", ...; the kinds in lib/memory/kinds/
IMPORTABLE = ("task", "sources", "output")

user = st.session_state[state.USER]
repo = st.session_state[state.CONFIG_REPO]
st.title("Workspaces")
if st.session_state.get(state.WORKSPACES_DONE):
    st.success(st.session_state.pop(state.WORKSPACES_DONE))
st.caption("Each workspace keeps four kinds of memory plus its dashboard, versioned in the config repo. Chat transcripts and raw data are never kept.")

metas = st.session_state[state.METAS]  # app.py read them this run
mine = auth.visible(user, metas)
names = ui.workspace_names(metas)
for slug in mine:
    published = repo.is_published(slug)
    ws, diagnostics = workspace.load(repo.view_path(user, slug))
    role = access.role_of(user, metas[slug])
    with st.container(border=True):
        head, status = st.columns([4, 1])
        head.subheader(ws.name)
        head.write(metas[slug].get("description", ""))
        errors = [d for d in diagnostics if d.level == "error"]
        if errors:
            status.error(f"{len(errors)} validation error(s)")
        else:
            status.success("valid")
        status.caption(f"you: {role}" + ("" if published else " · not published yet"))
        if st.button("Open", key=f"open_{slug}"):
            st.session_state[state.SLUG] = slug
            st.switch_page("app_pages/dashboard.py")
        kinds = [k for k in workspace.FILES if k in ws.data]
        with st.expander("Memory"):
            tabs = st.tabs([CATEGORY_TITLES[k] for k in kinds])
            for tab, kind in zip(tabs, kinds):
                with tab:
                    st.code(ws.text(kind), language="yaml")
        versions = repo.history(slug, limit=1) if published else []
        st.caption("Last published: " + (f"{ui.when(versions[0].date)} by {versions[0].author} — {versions[0].message}" if versions else "never"))

if user.app_role in (STEWARD, "owner"):
    st.divider()
    left, right = st.columns(2)
    published_mine = [s for s in mine if repo.is_published(s)]
    with left.form("new_workspace"):
        st.subheader("New workspace")
        name = st.text_input("Name", placeholder="Team KPIs")
        slug = st.text_input("Folder name", placeholder="team-kpis", help="Lower-case letters, digits and dashes.")
        template = st.selectbox("Start from", [None] + published_mine, format_func=lambda s: "blank" if s is None else f"copy of {names[s]}")
        if st.form_submit_button("Create on my draft"):
            with ui.user_errors("Could not create the workspace"):
                draft = repo.new_workspace(user, slug.strip(), name.strip() or slug.strip(), template)
                # Rerun so the sidebar and this list show it now, opened, not after signing in again.
                st.session_state[state.SLUG] = draft.slug
                st.session_state[state.WORKSPACES_DONE] = (
                    f"Created **{name.strip() or slug.strip()}** as your draft. It is open now; publish it on the Review page to share it."
                )
                st.rerun()

    current = st.session_state.get(state.SLUG)
    with right.form("import_category"):
        st.subheader("Import one memory category")
        st.caption("Copy, for example, only the task rules or only the connectors of another workspace into your draft of this one.")
        target = st.selectbox("Into", mine, index=mine.index(current) if current in mine else 0, format_func=names.__getitem__)
        others = [s for s in published_mine if s != target] or published_mine  # never offer a copy into itself first
        source = st.selectbox("From", others, format_func=names.__getitem__)
        kind = st.selectbox("Category", IMPORTABLE, format_func=lambda k: CATEGORY_TITLES.get(k) or k)
        if st.form_submit_button("Import into my draft"):
            with ui.user_errors("Could not import"):
                sha, notes = repo.import_category(user, source, target, kind)
                done = "; ".join(notes)
                st.success(
                    f"Imported into your draft of {metas[target].get('name', target)}" + (f" as {sha[:10]}: {done}." if sha else f": nothing changed ({done}).")
                )
