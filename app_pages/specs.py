"""Specs: task rules, output constraints and theme in forms generated from the schemas; YAML views; save to your draft."""

from __future__ import annotations

import datetime as dt

import streamlit as st

from app_pages import dashboard_view, schema_form, state, ui
from lib.data.snapshots import Warehouse
from lib.memory import schemas, workspace
from lib.memory.yamlio import YamlSyntaxError, parse

ctx = ui.context("edit")
st.title("Specs")
st.caption("Edits are saved as commits on your draft branch; publish them on the Review page.")
ws, diagnostics = workspace.load(ctx.draft_path())
ui.show_diagnostics(diagnostics)


def save(files: dict, message: str, clear: tuple[str, ...] = ()) -> None:
    """Save to the draft; on success forget the pending edit the `clear` keys hold (kept when saving fails)."""
    sha = None  # stays None when saving failed (the message is shown) or there was nothing to save
    with ui.user_errors("Could not save to your draft", invalid="Not saved: the change does not validate.") as caught:
        sha = ctx.repo.save(ctx.user, ctx.slug, files, message)
    if caught.failed:
        return
    if sha:
        st.session_state[state.SPECS_SAVED] = f"Saved to your draft as {sha[:10]}: {message}"
        for key in clear:
            st.session_state.pop(key, None)
        st.rerun()
    else:
        st.info("Nothing changed, so nothing was saved.")


if st.session_state.get(state.SPECS_SAVED):
    st.success(st.session_state.pop(state.SPECS_SAVED))

# The open tab is kept in session state (key + on_change), so a message drawn above the tabs on one
# rerun cannot make Streamlit reopen the first tab while the person works in another.
task_tab, output_tab, dashboard_tab, yaml_tab = st.tabs(
    ["Task rules", "Output constraints", "Dashboard YAML", "All files"], key="specs_tabs", on_change="rerun"
)

with task_tab:
    ui.stale_rules_box(ctx, ws.data, "specs", state.SPECS_SAVED)
    root = schemas.load_schema("task")
    rule_schema = root["$defs"]["rule"]
    task = ws.get("task") or {"rules": []}
    today = dt.date.today().isoformat()
    with st.form("task_form"):
        goal = st.text_area("Goal", value=task.get("goal", ""), help=root["properties"]["goal"]["description"])
        rules = []
        for i, rule in enumerate(task.get("rules") or []):
            with st.expander(f"`{rule['id']}` — {rule['text'][:80]}", expanded=False):
                edited = schema_form.fields(root, rule_schema, rule, f"rule{i}", skip=("id", "author", "created", "last_confirmed"))
                edited = {"id": rule["id"], **{k: v for k, v in edited.items() if k != "id"}}
                c1, c2 = st.columns(2)
                confirmed = c1.checkbox(f"Confirm it still holds (last: {rule.get('last_confirmed', 'never')})", key=f"confirm{i}")
                delete = c2.checkbox("Delete this rule", key=f"delete{i}")
                if confirmed:
                    edited["last_confirmed"] = today
                if not delete:
                    rules.append(edited)
        st.markdown("**Add a rule**")
        new_id = st.text_input("Id", placeholder="attainment-green", help=rule_schema["properties"]["id"]["description"])
        new_text = st.text_area("Text", placeholder="Attainment >= 95 % is shown green.", help=rule_schema["properties"]["text"]["description"])
        if st.form_submit_button("Save task rules", type="primary"):
            if new_id.strip() or new_text.strip():
                rules.append({"id": new_id.strip(), "text": new_text.strip(), "author": ctx.user.name, "created": today})
            content: dict = {**task, "rules": rules}
            content["goal"] = (goal or "").strip()
            save({"task": content}, "Edit task rules")

with output_tab:
    root = schemas.load_schema("output")
    output = ws.get("output") or {}
    with st.form("output_form"):
        edited = schema_form.fields(root, root, output, "output")
        if st.form_submit_button("Save output constraints", type="primary"):
            save({"output": edited}, "Edit output constraints")

with dashboard_tab:
    current = workspace.render("dashboard", ws.get("dashboard")) if ws.get("dashboard") else ""
    CANDIDATE = state.dashboard_candidate(ctx.slug)
    # The typed text lives under its own key, never passed back as `value=`: a widget whose value argument
    # changes between reruns is a new widget to Streamlit, which then drops what was typed into the old one
    # (a corrected text checked after a failed Check came back as the old text).
    TYPED = f"{CANDIDATE}:typed"
    if TYPED not in st.session_state:
        st.session_state[TYPED] = st.session_state.get(CANDIDATE, current)
    with st.form("dashboard_form"):
        text = st.text_area(
            "dashboard.yaml",
            key=TYPED,
            height=480,
            help="Every component names a SQL query; see docs/dashboards.md for the spec and its checks.",
        )
        if st.form_submit_button("Check and preview", type="primary"):
            st.session_state[CANDIDATE] = text
    if CANDIDATE in st.session_state:
        candidate_text = st.session_state[CANDIDATE]
        try:  # read as the workspace loader reads files: dates stay text, errors name the line
            candidate = parse(candidate_text).data if candidate_text.strip() else None
        except YamlSyntaxError as exc:
            st.error(f"Malformed YAML at line {exc.line}: {exc}")
            candidate = None
        if candidate is None:
            st.error("Nothing to save: the dashboard is empty or does not parse.")
            if st.button("Discard the edit"):
                for key in (CANDIDATE, TYPED):
                    st.session_state.pop(key, None)
                st.rerun()
        elif candidate == ws.get("dashboard"):
            st.info("No change from the saved dashboard.")
        else:
            st.code(
                ui.text_diff(current, workspace.render("dashboard", candidate) if isinstance(candidate, dict) else candidate_text, "dashboard.yaml"),
                language="diff",
            )
            path = ctx.draft_path()
            wh = Warehouse.for_workspace(path)
            ui.first_load(path, wh, ws, ctx.user)
            served = wh.current()
            found = dashboard_view.preview(ws, candidate, wh.tables(served) if served else None, served.id if served else "")
            do_save, discard = dashboard_view.save_buttons(found, "specs_dashboard")
            if do_save:
                save({"dashboard": candidate}, "Edit the dashboard", clear=(CANDIDATE, TYPED))
            if discard:
                for key in (CANDIDATE, TYPED):
                    st.session_state.pop(key, None)
                st.rerun()

with yaml_tab:
    for kind, name in workspace.FILES.items():
        if kind in ws.data:
            with st.expander(name):
                st.code(ws.text(kind), language="yaml")
