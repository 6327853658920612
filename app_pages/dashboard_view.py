"""Drawing a rendered dashboard, and the authoring loop's preview: checks and the dashboard before saving.

Used by the Dashboard page, the Specs page's YAML editor and the Chat page's
proposals (a Claude session's or the auto-draft's), so a person sees what a
change looks like and what the checks say before it is saved.
"""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any, Callable, Mapping, cast

import pandas as pd
import pyarrow as pa
import streamlit as st

from app_pages import ui
from lib.artifacts import checks
from lib.artifacts.components import Component, chart, kpi, table, text
from lib.artifacts.components.base import COLOR_RE as COLOR
from lib.artifacts.explain import Explanation
from lib.artifacts.render import Rendered, render
from lib.core.diagnostics import ERROR, Diagnostic
from lib.core.formats import readable_text_on
from lib.data.engine import NO_EARLIER_DATA
from lib.memory import workspace


def show(rendered: Rendered, explain: Callable[[Component], None] | None = None, draw: Mapping[str, Callable[[Component], None]] | None = None) -> None:
    """Every component of a rendered dashboard, row by row; `explain(comp)` draws what goes under it (its popovers).

    `draw` replaces the drawing of some kinds (the Dashboard page's cross-filtering charts: app_pages/crossfilter.py).
    """
    for row in rendered.rows:
        columns = st.columns([c.width for c in row])
        for column, comp in zip(columns, row):
            with column.container(border=True):
                _component(comp, draw)
                if explain is not None:
                    explain(comp)


def filter_bar(states: list, key: Callable[[str], str]) -> dict[str, Any]:
    """One widget per filter (a report's parameters too), side by side; returns the choices, keyed by filter id.

    `key(filter_id)` is the widget's session key: it keeps each workspace's (and page's) choices apart.
    """
    chosen: dict[str, Any] = {}
    if not states:
        return chosen
    for col, filt in zip(st.columns(len(states)), states):
        with col:
            widget = key(filt.id)
            if filt.error and filt.error.startswith(NO_EARLIER_DATA):  # nothing is wrong: an earlier load of a live source
                st.caption(f"{filt.label}: {filt.error}")
            elif filt.error:
                st.error(f"{filt.label}: {filt.error}")
            elif filt.type == "multiselect":
                chosen[filt.id] = st.multiselect(filt.label, filt.options, key=widget)
            elif filt.type == "select":
                everything = ui.label_apart("All", filt.options)
                chosen[filt.id] = st.selectbox(filt.label, [None] + filt.options, key=widget, format_func=lambda v, e=everything: e if v is None else str(v))
            elif filt.bounds and None not in filt.bounds:
                low, high = filt.bounds
                if filt.type == "number_range":
                    chosen[filt.id] = st.slider(filt.label, low, high, (low, high), key=widget)
                else:
                    low, high = cast(dt.date, pd.Timestamp(low).date()), cast(dt.date, pd.Timestamp(high).date())  # bounds hold no None, so never NaT
                    picked = st.date_input(filt.label, (low, high), min_value=low, max_value=high, key=widget)
                    chosen[filt.id] = tuple(picked) if isinstance(picked, (list, tuple)) and len(picked) == 2 else None
    return chosen


def explanation(e: Explanation) -> None:
    """Where a component's figures come from (lib.artifacts.explain), drawn inside its popover."""
    st.markdown(f"**Where {'these figures come' if e.type != kpi.NAME else 'this number comes'} from**")
    chosen = ", ".join(f"{k} = {v}" for k, v in e.filters.items())
    st.caption(f"Filters: {chosen or 'none chosen (all rows)'}")
    data = e.data
    if data.get("snapshot_id"):
        loaded = dt.datetime.fromisoformat(data["loaded"]).astimezone()
        st.caption(f"Data: snapshot `{data['snapshot_id']}`, loaded {loaded:%Y-%m-%d %H:%M:%S}" + (" (with your own file)" if data.get("replaced") else ""))
    for name in data.get("live") or []:
        st.caption(f"Data: **{name}** is live, read from its database when the query runs (a result is reused for up to {data['live_cache_s'][name]} s)")
    st.dataframe(
        pd.DataFrame([{"table": s.table, "source": s.source, "type": s.type, "location": s.location, "rows": "live" if s.live else s.rows} for s in e.sources]),
        hide_index=True,
        width="stretch",
    )
    for q in e.queries:
        st.markdown(f"{q.label}, as it runs (the values travel as parameters):")
        st.code(q.sql.strip(), language="sql", wrap_lines=True)
        st.caption("Parameters: " + (", ".join(f"${k} = {v!r}" for k, v in q.params.items()) or "none"))
        if q.params:
            st.markdown("With the values written in, for reading (never run like this):")
            st.code(q.readable.strip(), language="sql", wrap_lines=True)
        if q.error:
            st.error(q.error)
        elif q.sample_sql:
            st.markdown(f"Rows behind it: {q.sample_matching:,} match; the first {len(q.sample_rows)}:")
            st.dataframe(pd.DataFrame(q.sample_rows), hide_index=True, width="stretch")
        else:
            st.caption(f"Rows behind it: not derivable ({q.sample_note})")
    if e.rules:
        st.markdown("Task rules about it:\n" + "\n".join(f"- **{r.id}** ({r.why}): {r.text}" for r in e.rules))
    else:
        st.caption("No task rule is about it.")


def component(comp: Component) -> None:
    """One rendered component (a KPI card, a chart, a table, a text block), or its error, as the Dashboard draws it."""
    _component(comp)


def _component(comp: Component, draw: Mapping[str, Callable[[Component], None]] | None = None) -> None:
    if comp.error:
        st.markdown(text.inert_images(f"**{comp.title or comp.id}**"))
        st.error(comp.error)
    else:
        ((draw or {}).get(comp.type) or DRAW[comp.type])(comp)


def _heading(comp: Component) -> None:
    if comp.title:
        st.markdown(text.inert_images(f"**{comp.title}**"))


def _kpi(comp: Component) -> None:
    if comp.color and COLOR.match(comp.color):  # only a #rrggbb colour goes into HTML
        st.markdown(f"<div style='height:4px;border-radius:2px;background:{comp.color}'></div>", unsafe_allow_html=True)
    # st.metric reads the direction from a leading ASCII minus.
    st.metric(comp.title or comp.id, comp.display, comp.delta_display.replace("−", "-") or None)
    if comp.status:
        st.caption(comp.status)


def _chart(comp: Component) -> None:
    _heading(comp)
    st.vega_lite_chart(comp.chart.streamlit_spec(), width="stretch", theme=None)


def _table(comp: Component) -> None:
    _heading(comp)
    colors = comp.cell_colors

    def paint(frame: pd.DataFrame) -> pd.DataFrame:
        styles = pd.DataFrame("", index=frame.index, columns=frame.columns)
        for (r, c), color in colors.items():
            if COLOR.match(color):
                styles.loc[r, c] = f"color: {readable_text_on(color)}; background-color: {color}"
        return styles

    st.dataframe(comp.shown.to_pandas().style.apply(paint, axis=None), hide_index=True, width="stretch")
    if comp.legend:
        st.caption(table.legend_text(comp))


def _text(comp: Component) -> None:
    _heading(comp)
    st.markdown(text.inert_images(comp.markdown))


# How the page draws each kind of the registry (lib.artifacts.components.KINDS), so lib stays free of Streamlit.
# tests/artifacts/test_components.py checks that every registered kind has one.
DRAW: dict[str, Callable[[Component], None]] = {kpi.NAME: _kpi, chart.NAME: _chart, table.NAME: _table, text.NAME: _text}


def preview(ws: workspace.Workspace, dashboard: dict[str, Any], tables: Mapping[str, pa.Table] | None, version: str) -> list[Diagnostic]:
    """The checks' findings on a proposed dashboard, then the dashboard itself, over the data shown; returns the findings.

    The preview uses the data this draft already has loaded; publishing and CI
    run the same checks on the data the sources give at that moment.
    """
    candidate = workspace.Workspace(ws.path, {**copy.copy(ws.data), "dashboard": dashboard}, {})
    found = checks.run(candidate, tables, f"preview:{version}")
    ui.show_check_verdict(found, "dashboard")
    if any(d.id == "check.schema" and d.level == ERROR for d in found):
        st.info("The preview shows once the dashboard validates: fix the errors above and check again.")
    elif tables is not None:  # only a spec that validated is rendered: the renderers assume its shape
        with st.expander("Preview", expanded=True):
            show(render(candidate.data, tables, f"preview:{version}", workspace_path=ws.path))
    return found


def save_buttons(found: list[Diagnostic], key: str) -> tuple[bool, bool]:
    """(save, discard) clicks; saving a dashboard with errors needs an explicit choice first."""
    errors = sum(1 for d in found if d.level == ERROR)
    allowed = not errors or st.checkbox(f"Save it with {errors} error(s) anyway (publishing will refuse it until they are fixed)", key=f"{key}:anyway")
    save_col, discard_col = st.columns(2)
    save = save_col.button("Save to my draft", type="primary", disabled=not allowed, key=f"{key}:save")
    discard = discard_col.button("Discard", key=f"{key}:discard")
    return save, discard
