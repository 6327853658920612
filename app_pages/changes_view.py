"""The Dashboard page's "what changed" parts: Data as of (time travel), each KPI's earlier value, the Changes panel.

UI only: lib.artifacts.time_travel opens a kept snapshot read-only (for anyone who may
view), lib.artifacts.changes compares it with the load before it.
"""

from __future__ import annotations

from typing import Any, Mapping

import streamlit as st

from app_pages import ui
from lib.artifacts.changes import Changes, compare_tables, previous_of
from lib.artifacts.components import Component
from lib.artifacts.components.kpi import NAME as KPI
from lib.artifacts.time_travel import AsOf, open_as_of
from lib.data.snapshots import Snapshot, Warehouse, load_label

SERVED = "served"  # the "Data as of" option meaning the data everyone is served, whichever load that is


def data_as_of(ctx: ui.Context, wh: Warehouse, served: Snapshot) -> AsOf:
    """The "Data as of" choice (when more than one load is kept) and its banner; the data chosen, opened read-only.

    Only this session changes: what everyone is served stays `served` (pinning is the steward's "Earlier data").
    """
    kept = wh.snapshots()
    chosen_id = served.id
    # A load this session was looking at may be pruned by others' refreshes; Streamlit then quietly resets the
    # choice to the data served, so say it, or the figures would change under the reader without a word.
    shown = f"as_of_{ctx.slug}:shown"
    earlier = st.session_state.get(shown)
    if earlier not in (None, served.id) and earlier not in {s.id for s in kept}:
        st.info(
            f"The earlier load you were looking at is no longer kept (only the last {len(kept)} are): this is the data everyone is served.",
            icon=":material/history:",
        )
    if len(kept) > 1:
        newest = kept[0].id
        labels = {s.id: load_label(s) for s in kept}
        # The first option is whatever is served, not its id: whoever has not chosen follows the next refresh.
        choice = st.selectbox(
            "Data as of",
            [SERVED] + [s.id for s in kept if s.id != served.id],
            format_func=lambda i: f"{load_label(served)} ({'latest' if served.id == newest else 'served to everyone'})" if i == SERVED else labels[i],
            key=f"as_of_{ctx.slug}",
            help="Look at the dashboard as it was at an earlier load. Read-only and for you only: nobody else's view changes.",
        )
        chosen_id = served.id if choice in (None, SERVED) else choice
    as_of = None
    with ui.user_errors("Could not open that load"):
        as_of = open_as_of(wh, chosen_id, user=ctx.user, meta=ctx.meta, served=served)
    if as_of is None:  # no longer kept, or not allowed: the message is shown; the data served instead
        as_of = open_as_of(wh, served.id, user=ctx.user, meta=ctx.meta, served=served)
    st.session_state[shown] = None if as_of.version == served.id else as_of.version  # who follows the served data is told nothing
    if not as_of.is_latest:
        st.warning(as_of.banner(), icon=":material/history:")
    return as_of


def changes_for(ws: Any, as_of: AsOf, tables: Mapping[str, Any], version: str, chosen: Mapping[str, Any]) -> Changes | None:
    """The shown data against the load kept before it; None with a viewer's own file in place (it has no earlier load)."""
    if version != as_of.version:
        return None
    found = None
    with ui.user_errors("Could not compare with the previous load"):
        previous = previous_of(as_of.warehouse, as_of.snapshot)
        earlier = as_of.warehouse.tables(previous) if previous else None
        found = compare_tables(ws.data, as_of.snapshot, tables, previous, earlier, chosen, workspace_path=ws.path, engine=as_of.engine(ws.data, ws.path))
    return found


def kpi_was(found: Changes | None, comp: Component) -> None:
    """A KPI's value at the previous load beside it: "was 91.0% (−7.0 pts) on ..."."""
    if found is None or comp.type != KPI or comp.error:
        return
    text = found.was(comp.id)
    if text:
        st.caption(text)


def panel(found: Changes | None) -> None:
    """The biggest moves per component since the previous load, in an expander."""
    if found is None:
        return
    if found.previous is None:
        with st.expander("Changes since the previous load", icon=":material/compare_arrows:"):
            st.caption("Only one load is kept so far: there is nothing to compare with yet.")
        return
    moved = [c for c in found.ranked() if c.changed]
    with st.expander(f"Changes since the load of {found.previous['loaded']} ({len(moved)} component(s) moved)", icon=":material/compare_arrows:"):
        if not moved:
            st.caption("Nothing moved between the two loads" + (" for these filters." if found.filters else "."))
        for c in found.ranked():
            if not c.changed and not c.note:
                continue
            if c.kpi is not None and not c.note:
                move = c.kpi
                then_now = f"{move.before_display} → {move.after_display}" + (f" ({move.delta_display})" if move.delta_display else "")
                st.markdown(f"**{ui._md(c.title or c.component)}**: {ui._md(then_now)}")
                continue
            lines = [m.text for m in c.moves + c.appeared + c.disappeared]
            hidden = (c.changed_count - len(c.moves)) + (c.appeared_count - len(c.appeared)) + (c.disappeared_count - len(c.disappeared))
            if hidden > 0:
                lines.append(f"and {hidden} smaller change(s)")
            st.markdown(f"**{ui._md(c.title or c.component)}**: {ui._md(c.summary())}" + "".join(f"\n- {ui._md(line)}" for line in lines))
