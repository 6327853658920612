"""Report: the workspace's report (report.yaml) in reading order, its parameters, one-click Refresh, PDF and HTML downloads."""

from __future__ import annotations

import streamlit as st

from app_pages import dashboard_view, report_view, state, ui
from lib.artifacts.render import filter_states
from lib.artifacts.report import render_report
from lib.data.engine import Engine
from lib.data.snapshots import Warehouse
from lib.memory import workspace

ctx = ui.context("view")
show_draft = (
    ctx.can("edit") and ctx.has_draft() and st.toggle("Show my draft", key="report_draft", help="Your unpublished edits, on data loaded for the draft.")
)
path = ctx.draft_path() if show_draft else ctx.published_path
ws, _ = workspace.load(path)
wh = Warehouse.for_workspace(path)
report = ws.get("report")
if not report:
    st.title(ws.name)
    st.info(
        "This workspace has no report. A report is a `report.yaml` beside the dashboard: an ordered document of headings, prose, KPI rows, charts and tables."
    )
    st.stop()

first = ui.first_load(path, wh, ws, ctx.user)
if first is not None:
    st.session_state[state.REFRESH_REPORT] = first

head, actions = st.columns([1, 1], vertical_alignment="bottom")
report_view.header(report.get("title") or ws.name, report.get("description") or "", head)
refresh_col, pdf_col, html_col = actions.columns(3)
if refresh_col.button("Refresh", type="primary", icon=":material/refresh:", disabled=not ctx.can("refresh"), width="stretch", key="report_refresh"):
    # The Dashboard's refresh: new data for both; what it says shows here as there.
    st.session_state[state.REFRESH_REPORT] = ui.run_refresh(path, wh, "Refreshing the data…", ctx.user)
loaded = st.session_state.get(state.REFRESH_REPORT)
if loaded is not None and loaded.workspace == ctx.slug and not loaded.ok:
    st.error(loaded.headline() + " The report shows the previous data; the Dashboard page has the details.")
if loaded is not None and loaded.workspace == ctx.slug and loaded.swapped and loaded.report_warnings:  # loaded all the same: the dashboard fits
    st.warning("The new data no longer fits parts of this report:\n" + "\n".join(f"- {w}" for w in loaded.report_warnings))
    if ctx.can("edit"):
        ui.regenerate_button(ctx, loaded, "report", has_report=True)

snapshot = wh.current()
if snapshot is None:
    st.warning("No data loaded yet. Add a source on the Sources page, then Refresh.")
    st.stop()
tables = wh.tables(snapshot)
actions.caption(f"Data loaded {ui.when(snapshot.created)}")
own = st.session_state.get(state.SWAPS)
if own is not None and (elsewhere := own.elsewhere(ctx.slug)):  # the Dashboard shows this session's own file
    st.info(elsewhere)

viewer = Engine.for_workspace(ws.data, tables, snapshot.id, workspace_path=ws.path, user=ctx.user)  # held to their rows
ui.rows_notice(ctx.user, ws.data)
ui.deliveries_note(ctx.meta, "report")
states = filter_states({"filters": report.get("parameters") or []}, tables, snapshot.id, viewer)
chosen = dashboard_view.filter_bar(states, lambda filter_id: f"p_{ctx.slug}_{filter_id}")
rendered = render_report(ws.data, tables, snapshot.id, chosen, workspace_path=ws.path, engine=viewer)


report_view.show(rendered)

exported_for = (ctx.slug, snapshot.id, repr(chosen))  # an export of other data or parameters is stale
prepared = st.session_state.get(state.REPORT_EXPORT)
files = prepared[1] if prepared and prepared[0] == exported_for else {}
for col, kind, label, mime in ((pdf_col, "pdf", "PDF", "application/pdf"), (html_col, "html", "HTML", "text/html")):
    if kind in files:
        col.download_button(f"Download {label}", files[kind], file_name=f"{ctx.slug}-report.{kind}", mime=mime, width="stretch", key=f"report_download_{kind}")
    elif col.button(f"Export {label}", icon=":material/download:", width="stretch", key=f"report_export_{kind}"):
        from lib.artifacts import report_export

        with ui.user_errors(f"Could not export the report as {label}"), st.spinner(f"Writing the {label}…"):
            html = report_export.to_html(rendered)
            made = {**files, "html": html.encode("utf-8")}
            if kind == "pdf":
                made["pdf"] = report_export.to_pdf(html)
            st.session_state[state.REPORT_EXPORT] = (exported_for, made)
            st.rerun()
