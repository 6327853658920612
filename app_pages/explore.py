"""Explore: ask the data a question without a model (lib/artifacts/explore.py), and, as a steward, keep it on the dashboard.

Everyone who can view the workspace picks a measure, an aggregation, a
breakdown, a time grain and filters from the data profile; the page shows the
SQL it runs and the chart, drawn like any dashboard component. Stewards and
owners can save it to their draft dashboard; lib.artifacts.explore runs the checks first
and saves nothing when they fail.
"""

from __future__ import annotations

import streamlit as st

from app_pages import dashboard_view, state, ui
from lib.artifacts import explore
from lib.artifacts.explore import Filter, Question
from lib.artifacts.render import render
from lib.data.snapshots import Warehouse
from lib.memory import workspace

ctx = ui.context("view")
st.title("Explore")
st.caption("Ask the data a question from its profile: no model and no API key needed. Nothing you do here changes the workspace.")
if st.session_state.get(state.EXPLORE_SAVED):
    st.success(st.session_state.pop(state.EXPLORE_SAVED))

path = ctx.published_path
ws, _ = workspace.load(path)
wh = Warehouse.for_workspace(path)
ui.first_load(path, wh, ws, ctx.user)
snapshot = wh.current()
if snapshot is None:
    st.warning("No data loaded yet. Stewards add a source on the Sources page; then Refresh on the Dashboard.")
    st.stop()
tables, version = wh.tables(snapshot), snapshot.id
ui.rows_notice(ctx.user, ws.data)
catalogue = explore.catalogue(ws.data)
if not catalogue:
    st.info("This workspace has no data profile yet, so there is nothing to choose from. Stewards profile the data on the Sources page.")
    st.stop()

key = f"explore:{ctx.slug}"
name = st.selectbox("Table", list(catalogue), key=f"{key}:table")
table = catalogue[name]
key = f"{key}:{name}"  # the choices below belong to this table
measure_col, agg_col, by_col, time_col, grain_col = st.columns(5)
measure = measure_col.selectbox(
    "Measure",
    [None, *table.measures, *table.countables],
    format_func=lambda m, e=ui.label_apart("Number of rows", [*table.measures, *table.countables]): e if m is None else m,
    key=f"{key}:measure",
    help="Numeric measures first, then identifiers and categories (which can be counted)",
)
aggregation = agg_col.selectbox("Aggregation", table.aggregations(measure), format_func=explore.AGGREGATION_TITLES.__getitem__, key=f"{key}:agg:{measure}")
breakdown = by_col.selectbox(
    "Breakdown", [None, *table.breakdowns], format_func=lambda b, e=ui.label_apart("None", table.breakdowns): e if b is None else b, key=f"{key}:by"
)
time = time_col.selectbox("Time", [None, *table.times], format_func=lambda t, e=ui.label_apart("None", table.times): e if t is None else t, key=f"{key}:time")
grains = table.grains(time) if time else ()
grain = grain_col.selectbox("Time grain", grains, index=min(2, len(grains) - 1) if grains else None, key=f"{key}:grain:{time}", disabled=not time)

# Filters: a row each, kept in the session until removed.
rows: list[int] = st.session_state.setdefault(state.explore_filters(ctx.slug, name), [])
filters: list[Filter] = []
for row in list(rows):
    column_box, op_box, value_box, remove_box = st.columns([3, 2, 4, 1], vertical_alignment="bottom")
    column = column_box.selectbox("Filter on", list(table.columns), key=f"{key}:f{row}:col")
    op = op_box.selectbox("Operator", table.operators(column), key=f"{key}:f{row}:op:{column}")
    family = table.columns[column].family
    value = None
    fkey = f"{key}:f{row}:value:{column}:{op}"
    if op == explore.IN:
        with ui.user_errors("Could not read the column's values"):
            options = explore.distinct_values(ws.data, tables, version, name, column, workspace_path=ws.path, user=ctx.user)
            value = value_box.multiselect("Values", options, key=fkey)
    elif op == explore.BETWEEN and family == "time":
        picked = value_box.date_input("Between", value=[], key=fkey)
        value = tuple(picked) if isinstance(picked, (list, tuple)) and len(picked) == 2 else None
    elif op == explore.BETWEEN:
        low_box, high_box = value_box.columns(2)
        value = (low_box.text_input("From", key=f"{fkey}:low"), high_box.text_input("To", key=f"{fkey}:high"))
    elif op not in (explore.IS_NULL, explore.NOT_NULL):
        value = value_box.date_input("Date", value=None, key=fkey) if family == "time" else value_box.text_input("Value", key=fkey)
    if remove_box.button("Remove", key=f"{key}:f{row}:remove", icon=":material/close:"):
        rows.remove(row)
        st.rerun()
    incomplete = value is None or value == "" or value == [] or (isinstance(value, tuple) and "" in value)
    if op in (explore.IS_NULL, explore.NOT_NULL) or not incomplete:
        filters.append(Filter(column, op, value))
if st.button("Add a filter", icon=":material/filter_alt:", key=f"{key}:add"):
    rows.append(max(rows, default=-1) + 1)
    st.rerun()

question = Question(name, measure, aggregation, breakdown, time, grain if time else None, tuple(filters))
answer = None
with ui.user_errors("Could not answer this question") as caught:  # an ExploreError says what does not fit
    built, result = explore.run(question, ws.data, tables, version, workspace_path=ws.path, user=ctx.user)
    answer = built, result
if caught.failed or answer is None:
    st.stop()
built, result = answer

st.markdown("**The SQL it runs** (filter values travel as parameters, never as SQL text)")
st.code(built.sql, language="sql", wrap_lines=True)
if built.params:
    st.caption("Parameters: " + ", ".join(f"${k} = {v!r}" for k, v in built.params.items()))
if result.truncated:
    st.warning(f"Only the first {result.table.num_rows:,} rows are shown; add a filter or a coarser grain.")

spec = explore.pick_chart(question, built, result, ws.data, "explore")
rendered = render({**ws.data, "dashboard": {"title": built.title, "components": [spec]}}, tables, version, workspace_path=ws.path)
dashboard_view.show(rendered)
with st.expander("Result rows"):
    st.dataframe(result.table.to_pandas(), hide_index=True, width="stretch")

if ctx.can("save"):
    st.divider()
    st.caption(
        "Adds this chart to the end of your draft dashboard; the checks run first and nothing is saved if they fail. Publish it on Review. "
        "A filter on a column the dashboard's filter bar drives is saved as that filter, so the chart follows the bar."
    )
    follow_bar = st.checkbox(
        "Follow the dashboard's filter bar",
        key=f"{key}:follow",
        help="The saved chart is narrowed by every filter of the bar that drives a column of this table, as the dashboard's other charts are.",
    )
    if st.button("Save to draft dashboard", type="primary", icon=":material/add_chart:", key=f"{key}:save"):
        with ui.user_errors("Could not save to your draft", invalid="Not saved: the dashboard with this chart fails these checks:"):
            draft_wh = Warehouse.for_workspace(ctx.draft_path())
            served = draft_wh.current()
            # The checks run on the draft's own data when it has some loaded, else on the data explored here.
            check_tables, check_version = (draft_wh.tables(served), served.id) if served else (tables, version)
            saved = explore.save_to_draft(ctx.repo, ctx.user, ctx.slug, question, check_tables, check_version, follow_bar=follow_bar)
            follows = f" It follows the filter bar's {', '.join(saved.follows)}." if saved.follows else ""
            st.session_state[state.EXPLORE_SAVED] = (
                f"Saved **{saved.component}** to your draft dashboard"
                + (f" as {saved.sha[:10]}." if saved.sha else ".")
                + follows
                + " Publish it on the Review page."
            )
            st.rerun()
