"""Cross-filter and Show rows on the Dashboard page: a click on a chart's mark sets the filter it stands for.

lib.artifacts.components.chart gives a chart with `select` a point selection
(`chart.SELECTION`) that highlights the marks its filters chose; here it is
drawn with `on_select`. The callback runs before the rerun, when the filter
bar's widgets do not exist yet, so it may set their session state: the filter
bar shows the value (and clears it), and every component whose query uses the
filter re-queries with it bound.

The chart's widget key carries its filters' current values. When they change
by any route (a click, the filter bar, Clear selection) the chart is drawn
afresh, its chosen marks highlighted from its spec, so the next click on any
mark is a change the callback hears.
"""

from __future__ import annotations

import functools
import hashlib
import logging
from typing import Any, Callable, Mapping, Sequence

import pandas as pd
import streamlit as st

from app_pages import dashboard_view, state, ui
from lib.artifacts.components import Component
from lib.artifacts.components import chart as chart_kind
from lib.artifacts.components.chart import NAME as CHART
from lib.artifacts.components.chart import SELECTION
from lib.artifacts.components.kpi import NAME as KPI
from lib.artifacts.components.table import NAME as TABLE
from lib.artifacts.drilldown import CAP, drilldown
from lib.artifacts.render import FilterState
from lib.data.engine import Engine
from lib.memory.spec import POINT_FILTERS, matching_options, selected_points, selection_values, selections

log = logging.getLogger("dashmem.app")


def driven(comp: Component, states: Sequence[FilterState]) -> list[tuple[str, FilterState]]:
    """(field, filter) of each pair of the chart's `select` whose filter exists, takes a point value and has its options."""
    by_id = {s.id: s for s in states}
    return [(name, by_id[fid]) for _, name, fid in selections(comp.spec) if fid in by_id and by_id[fid].type in POINT_FILTERS and not by_id[fid].error]


def drawers(slug: str, states: Sequence[FilterState]) -> dict[str, Callable[[Component], None]]:
    """The kinds this module draws on the Dashboard page (dashboard_view.show's `draw`)."""
    return {chart_kind.NAME: lambda comp: chart(comp, slug, states)}


def chart(comp: Component, slug: str, states: Sequence[FilterState]) -> None:
    """A chart; one with `select` is drawn clickable, with what it selected and a "Clear selection" button."""
    pairs = driven(comp, states)
    if not pairs:
        dashboard_view.DRAW[comp.type](comp)
        return
    current = {f.id: selection_values(st.session_state.get(state.filter_widget(slug, f.id))) for _, f in pairs}
    digest = hashlib.sha256(repr(sorted(current.items())).encode()).hexdigest()[:12]
    key = f"crossfilter:{slug}:{comp.id}:{digest}"
    if comp.title:
        st.markdown(f"**{comp.title}**")
    st.vega_lite_chart(
        comp.chart.streamlit_spec(),
        width="stretch",
        theme=None,
        key=key,
        on_select=functools.partial(_selected, key, slug, pairs),
        selection_mode=[SELECTION],
    )
    labels = " and ".join(f.label for _, f in pairs)
    chosen = "; ".join(f"{f.label}: {', '.join(str(v) for v in current[f.id])}" for _, f in pairs if current[f.id])
    if not chosen:
        st.caption(
            f"Click a mark to filter the dashboard by {labels}" + (" (shift-click adds more)." if any(f.type == "multiselect" for _, f in pairs) else ".")
        )
        return
    text, clear = st.columns([3, 1], vertical_alignment="center")
    text.caption(f"Selected {chosen}: the other components show only this.")
    clear.button("Clear selection", icon=":material/filter_alt_off:", key=f"{key}:clear", on_click=_clear, args=(slug, [f for _, f in pairs]))


def _selected(key: str, slug: str, pairs: list[tuple[str, FilterState]]) -> None:
    """The chart's selection changed: each driven filter takes the selected marks' values (no mark: all)."""
    try:
        event = st.session_state.get(key) or {}
        points = selected_points((event.get("selection") or {}).get(SELECTION))
        for name, filt in pairs:
            values = matching_options(filt.options, [v for p in points for k, v in p.items() if chart_kind.selected_field(k).lower() == name.lower()])
            st.session_state[state.filter_widget(slug, filt.id)] = values if filt.type == "multiselect" else (values[0] if values else None)
    except Exception:  # a callback's exception would reach the page as a traceback; the filters simply stay as they were
        log.exception("cross-filter selection on %s could not be applied", key)


def _clear(slug: str, filters: list[FilterState]) -> None:
    for filt in filters:
        st.session_state[state.filter_widget(slug, filt.id)] = [] if filt.type == "multiselect" else None


def rows_popover(
    comp: Component,
    slug: str,
    files: Mapping[str, Any],
    tables: Mapping[str, Any],
    version: str,
    chosen: Mapping[str, Any],
    workspace_path: Any,
    *,
    engine: Engine | None = None,
) -> None:
    """The component's "Show rows" popover: the rows behind it (or behind its selected marks), worked out only while it is open.

    `engine` is the load's (lib.artifacts.time_travel.AsOf.engine): over an earlier load, a live source's database is not read.
    """
    if comp.type not in (CHART, TABLE, KPI) or comp.error:
        return
    popover = st.popover("Show rows", icon=":material/table_rows:", on_change="rerun", key=state.rows_popover(slug, comp.id), help="The rows behind this")
    if popover.open:
        with popover, ui.user_errors("Could not show the rows behind this"):
            rows(drilldown(files, tables, version, comp.id, chosen, workspace_path=workspace_path, engine=engine))


def rows(d: Any) -> None:
    """A lib.artifacts.drilldown.Drilldown: what it shows, the table (capped), and its SQL."""
    what = "; ".join(f"{name} = {', '.join(str(v) for v in values)}" for name, values in d.marks.items())
    st.markdown(f"**Rows behind {'the selected ' + what if what else 'this'}**")
    if d.capped:
        st.caption(f"{d.matching:,} rows match; the first {len(d.rows):,} are shown (at most {CAP}).")
    else:
        st.caption(f"{d.matching:,} row{'s' if d.matching != 1 else ''} match.")
    st.dataframe(pd.DataFrame(d.rows, columns=d.columns), hide_index=True, width="stretch")
    st.markdown("The SQL that read them (the values travel as parameters):")
    st.code(d.sql, language="sql", wrap_lines=True)
    if d.params:
        st.caption("Parameters: " + ", ".join(f"${k} = {v!r}" for k, v in d.params.items()))
        st.markdown("With the values written in, for reading (never run like this):")
        st.code(d.readable, language="sql", wrap_lines=True)


def component_actions(*actions: Callable[[Component], None]) -> Callable[[Component], None]:
    """One callable that draws each of a component's action popovers side by side."""

    def draw(comp: Component) -> None:
        with st.container(horizontal=True):
            for action in actions:
                action(comp)

    return draw
