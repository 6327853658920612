"""Deliveries: the workspace's subscriptions (the report or dashboard by e-mail) and alerts (lib.delivery).

Everyone who can view the workspace sees them and chooses for themselves whether a subscription goes to
them (kept in the delivery record, not in workspace.yaml, so a viewer changes nothing of the workspace).
Stewards and owners also see what was sent lately; they change subscriptions and alerts in workspace.yaml
on the Specs page, and Review shows such a change as an access change.
"""

from __future__ import annotations

import streamlit as st

from app_pages import ui
from lib.delivery import run as delivery
from lib.memory.kinds.workspace import alert_words
from lib.roles import auth

ctx = ui.context("view")
st.title("Deliveries")
st.caption(
    "Reports and dashboards sent by e-mail after the scheduled refresh, and alerts on a KPI's figure. "
    "No model is involved: they are rendered from the specs, as the pages are."
)
path = ctx.published_path
credentials = auth.load_credentials()

st.subheader("Subscriptions")
offers = delivery.offers(path, ctx.meta, ctx.user, credentials)
if not offers:
    st.info("This workspace has no subscriptions. Stewards and owners add them to workspace.yaml (`subscriptions:`) on the Specs page.")
for offer in offers:
    with st.container(border=True):
        st.markdown(offer.words)
        if offer.why_not:
            st.caption(f"It cannot come to you: {offer.why_not}.")
            continue
        want = st.toggle("Send it to me", value=offer.mine, key=f"deliveries:{ctx.slug}:{offer.key}")
        if want != offer.mine:
            with ui.user_errors("Could not change your subscription"):
                delivery.choose(path, ctx.meta, offer.key, ctx.user, want, credentials)
                st.success("Subscribed: it comes to you from its next send" if want else "Unsubscribed: it no longer comes to you")

st.subheader("Alerts")
alerts = ctx.meta.get("alerts") or []
if not alerts:
    st.info("No alerts. An alert tells its recipients once when a KPI's figure crosses a threshold, and once when it is back.")
for alert in alerts:
    st.markdown(f"- {alert_words(alert)}")

if ctx.can("edit"):
    st.subheader("Sent lately")
    sent = delivery.record_of(path).deliveries(limit=50)
    if sent:
        st.dataframe(
            [{"when": d.at, "what": d.what.split(":")[0], "to": d.recipient, "status": d.status, "detail": d.detail} for d in sent],
            hide_index=True,
            width="stretch",
        )
    else:
        st.caption("Nothing sent yet: `python -m lib refresh --all --due` sends what is due after it refreshes, through DASHMEM_SMTP_HOST.")
