"""Dashboard: the published dashboard (or your draft), filters, one-click Refresh, export."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import streamlit as st

from app_pages import changes_view, crossfilter, dashboard_view, state, ui
from lib.artifacts.explain import explain
from lib.artifacts.render import filter_states
from lib.data import refresh as refreshing
from lib.data.connectors import FILE_TYPES, REGISTRY
from lib.data.engine import Engine
from lib.data.snapshots import Warehouse, load_label
from lib.memory import workspace
from lib.ops import schedule

ctx = ui.context("view")
show_draft = (
    ctx.can("edit") and ctx.has_draft() and st.toggle("Show my draft", key="dashboard_draft", help="Your unpublished edits, on data loaded for the draft.")
)
path = ctx.draft_path() if show_draft else ctx.published_path
ws, _ = workspace.load(path)
wh = Warehouse.for_workspace(path)


first = ui.first_load(path, wh, ws, ctx.user)
if first is not None:
    st.session_state[state.REFRESH_REPORT] = first

dashboard = ws.get("dashboard")
head, actions = st.columns([3, 2], vertical_alignment="bottom")
head.title((dashboard or {}).get("title") or ws.name)
if dashboard and dashboard.get("description"):
    head.caption(dashboard["description"])
snapshot = wh.current()
refresh_col, export_col = actions.columns(2)
clicked = refresh_col.button("Refresh", type="primary", icon=":material/refresh:", disabled=not ctx.can("refresh"), width="stretch")
incremental = any(s.get("incremental") for s in (ws.get("sources") or {}).get("sources") or [])
full = (
    incremental
    and ctx.can("full_reload")
    and refresh_col.checkbox("Full reload", key=f"full_reload_{ctx.slug}", help="Load incremental sources whole, to pick up rows updated or deleted in place")
)
if clicked:
    st.session_state[state.REFRESH_REPORT] = ui.run_refresh(path, wh, "Refreshing the data…", ctx.user, full=bool(full))
    snapshot = wh.current()
if snapshot:
    created = dt.datetime.fromisoformat(snapshot.created)
    checked = wh.last_checked()
    # The check time moves on every successful Refresh, also when the data had not changed.
    unchanged_since = checked is not None and checked - created > dt.timedelta(seconds=1)
    actions.caption(
        f"Last refreshed {max(checked or created, created).astimezone():%Y-%m-%d %H:%M:%S}"
        + (f" (data unchanged since {created.astimezone():%Y-%m-%d %H:%M:%S})" if unchanged_since else "")
        + " · "
        + ", ".join(f"{n}: {t['rows']:,} rows" for n, t in snapshot.tables.items())
    )

with ui.user_errors("Could not read the refresh schedule"):
    # Judged on the last successful refresh any process recorded: cron's `refresh --all` as well as this page's button.
    scheduled = schedule.status(ws.get("workspace"), wh.last_checked())
    if scheduled.next_text():
        actions.caption(scheduled.next_text())
    if scheduled.stale_text():
        actions.badge(scheduled.stale_text() or "", icon=":material/schedule:", color="orange")

report: refreshing.RefreshReport | None = st.session_state.get(state.REFRESH_REPORT)
if report and report.workspace == ctx.slug:
    # One box: what happened in a line, then the details.
    warned = report.swapped and bool(report.report_warnings)
    icon = ":material/error:" if not report.ok else ":material/warning:" if warned else ":material/check_circle:"
    with st.expander(report.headline(), expanded=not report.ok or warned, icon=icon):
        problems = []
        for s in report.incompatible:
            renames = ", ".join(f"{old} → {new}?" for old, new in s.renames.items())
            problems.append(
                f"**{s.name}** no longer fits the dashboard: missing {', '.join(s.missing) or 'none'}"
                + (f"; changed type: {', '.join(c['column'] for c in s.changed)}" if s.changed else "")
                + (f". Likely renames: {renames}" if renames else "")
            )
        problems += [f"**{s.name}** could not be loaded: {s.message}" for s in report.sources if s.status == "failed"]
        problems += [error[0].upper() + error[1:] for error in report.dashboard_errors]
        if problems:
            st.error("\n".join(f"- {p}" for p in problems) + "\n\nThe dashboard keeps showing the previous data.")
        if warned:  # loaded all the same: the dashboard fits, the report does not
            st.warning(
                "The new data no longer fits parts of the report (the Report page shows each in place):\n" + "\n".join(f"- {w}" for w in report.report_warnings)
            )
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "source": s.name,
                        "type": s.type,
                        "status": s.status,
                        "rows before": s.rows_before,
                        "rows after": s.rows_after,
                        "ms": round(s.seconds * 1000, 1),
                        "message": s.message,
                    }
                    for s in report.sources
                ]
            ),
            hide_index=True,
            width="stretch",
        )
        if ctx.can("edit") and ((not report.ok and report.incompatible) or warned):
            ui.regenerate_button(ctx, report, "report" if report.ok else "dashboard", has_report=bool(ws.get("report")))
        st.caption(f"{report.seconds * 1000:.0f} ms · {report.model_calls} model calls")

kept = wh.snapshots()
if snapshot is not None and ctx.can("edit") and len(kept) > 1:
    with st.expander("Earlier data"):
        st.caption("The last few loads are kept. Serving an earlier one changes what everyone sees until the next Refresh.")
        serving = snapshot.id
        st.caption(f"Served to everyone now: {load_label(snapshot)}.")
        labels = {s.id: load_label(s) for s in kept}
        # Keyed, and labelled by the load alone, so the box stays one widget while loads come and go: a refresh
        # or a serve meanwhile keeps the choice (Streamlit keeps it by its label).
        chosen_id = st.selectbox("Loaded at", list(labels), format_func=labels.__getitem__, key=f"serve_earlier:{ctx.slug}")
        if st.button("Serve this data", disabled=chosen_id == serving):
            with ui.user_errors("Could not serve that data"):
                wh.switch_to(chosen_id, user=ctx.user, meta=ctx.meta)
                st.rerun()

if st.session_state.get(state.PROFILE_UPDATED):
    st.success(st.session_state.pop(state.PROFILE_UPDATED))
if snapshot is not None and ctx.can("edit") and ws.get("profile"):
    # Stewards hear when the data served has moved away from what the model is told about it.
    from lib.data import profile_drift

    drifted = []
    with ui.user_errors("Could not compare the data profile with the data"), st.spinner("Comparing the data profile with the data…"):
        drifted = profile_drift.drift(ws.data, snapshot, wh.tables(snapshot))
    if drifted:
        with st.container(border=True):
            st.warning(
                "The data profile is out of date: Claude is told about the data as it was when it was profiled.\n"
                + "\n".join(f"- {d.message}" for d in drifted[:8])
                + (f"\n- and {len(drifted) - 8} more" if len(drifted) > 8 else "")
            )
            if st.button("Update profile", icon=":material/update:", help="Profiles the data served now and saves profile.yaml to your draft"):
                with ui.user_errors("Could not update the profile"), st.spinner("Profiling the data…"):
                    sha = profile_drift.update_in_draft(ctx.repo, ctx.user, ctx.slug, wh.tables(snapshot))
                    st.session_state[state.PROFILE_UPDATED] = (
                        f"Saved the new profile to your draft as {sha[:10]}; publish it on Review." if sha else "Your draft already has this profile."
                    )
                    st.rerun()

if not dashboard:
    st.info("This workspace has no dashboard yet. Stewards can create one on the Chat page (with Claude, or the auto-draft without a key).")
    st.stop()
if snapshot is None:
    st.warning("No data loaded yet. Add a source on the Sources page, then Refresh.")
    st.stop()

as_of = changes_view.data_as_of(ctx, wh, snapshot)  # the load chosen to look at, opened read-only (lib.artifacts.time_travel)
ui.rows_notice(ctx.user, ws.data)
snapshot = as_of.snapshot
tables = dict(as_of.tables)  # the tables of the snapshot the caption and cache key name
version = snapshot.id

# A viewer may look at the dashboard over their own, schema-compatible file, for this session only.
with st.expander("Try it with your own data (this session only)"):
    sources = [s["name"] for s in (ws.get("sources") or {}).get("sources") or [] if s["name"] in snapshot.tables]
    target = st.selectbox("Replace the data of", sources, key="swap_target") if sources else None
    upload = st.file_uploader("CSV, Excel (.xlsx) or Parquet file", type=[e for k in FILE_TYPES for e in REGISTRY[k].extensions], key="swap_file")
    own = st.session_state.setdefault(state.SWAPS, refreshing.OwnFiles())
    if upload is not None and target:
        with ui.user_errors("Could not read your file"):
            problems, made_room = own.offer(ctx.slug, target, upload.getvalue(), upload.name, snapshot.columns(target))
            if problems:
                st.error("This file does not fit the dashboard: " + "; ".join(problems))
            if made_room:
                st.info(made_room)
    for name, (digest, table) in own.held(ctx.slug).items():
        tables[name] = table
        version = f"{version}+{name}:{digest}"
        st.success(f"Showing your file instead of **{name}** ({table.num_rows:,} rows). Nothing is saved.")
        if st.button("Back to the shared data", key=f"unswap_{name}"):
            own.drop(ctx.slug, name)
            st.rerun()

# Filters bar
# A live table's options come from its database, but not on an earlier load: today's values are not that load's.
states = filter_states(dashboard, tables, version, as_of.engine(ws.data, ws.path) or Engine.for_workspace(ws.data, workspace_path=ws.path))
chosen = dashboard_view.filter_bar(states, lambda filter_id: state.filter_widget(ctx.slug, filter_id))

rendered = as_of.render(ws.data, chosen, workspace_path=ws.path, tables=tables, version=version)
changed = changes_view.changes_for(ws, as_of, tables, version, chosen)

# An alert's e-mail links to its figure's Explain (`?ws=SLUG&explain=COMPONENT`, lib.delivery): opened at the top.
asked = next((c for c in rendered.components if c.id == st.query_params.get("explain")), None)
if asked is not None:
    with st.expander(f"Where {asked.title or asked.id} comes from", expanded=True, icon=":material/info:"), ui.user_errors("Could not explain this"):
        dashboard_view.explanation(
            explain(ws.data, tables, snapshot, asked.id, chosen, workspace_path=ws.path, version=version, engine=as_of.engine(ws.data, ws.path))
        )


def explain_popover(comp) -> None:
    """The component's "Explain" popover; the explanation is worked out only while it is open."""
    popover = st.popover("Explain", icon=":material/info:", on_change="rerun", key=state.explain_popover(ctx.slug, comp.id), help="Where this comes from")
    if popover.open:
        with popover, ui.user_errors("Could not explain this"):
            dashboard_view.explanation(
                explain(ws.data, tables, snapshot, comp.id, chosen, workspace_path=ws.path, version=version, engine=as_of.engine(ws.data, ws.path))
            )


def rows_popover(comp) -> None:
    crossfilter.rows_popover(comp, ctx.slug, ws.data, tables, version, chosen, ws.path, engine=as_of.engine(ws.data, ws.path))


popovers = crossfilter.component_actions(explain_popover, rows_popover)


alerts = ui.alerts_of(ctx.meta)


def beside(comp) -> None:
    changes_view.kpi_was(changed, comp)
    for words in alerts.get(comp.id, []):
        st.caption(f":material/notifications: Alert: {words}")
    popovers(comp)


ui.deliveries_note(ctx.meta, "dashboard")
changes_view.panel(changed)
dashboard_view.show(rendered, beside, crossfilter.drawers(ctx.slug, rendered.filters))

with st.expander("About this view"):
    loaded = dt.datetime.fromisoformat(snapshot.created).astimezone()
    st.caption(
        f"Drawn in {rendered.seconds * 1000:.0f} ms · {rendered.queries_run} queries run (the rest from the cache) · "
        f"data loaded {loaded:%d %b %Y, %H:%M}" + (" · with your own file" if version != snapshot.id else "")
    )

if export_col.button("Export HTML", icon=":material/download:", width="stretch", help="A standalone file with the data embedded; it opens offline."):
    from lib.artifacts import export

    st.session_state[state.EXPORT_HTML] = (
        (ctx.slug, version, repr(chosen)),
        export.to_html(rendered, changed, as_of.as_of_note() + (", with your own file in place of a table" if version != snapshot.id else "")),
    )
prepared = st.session_state.get(state.EXPORT_HTML)
if prepared and prepared[0] == (ctx.slug, version, repr(chosen)):  # an export of other data or filters is stale
    export_col.download_button("Download the HTML file", prepared[1], file_name=f"{ctx.slug}.html", mime="text/html", width="stretch")
