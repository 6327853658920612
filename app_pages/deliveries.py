"""Deliveries: the workspace's subscriptions (the report or dashboard by e-mail) and alerts (lib.delivery).

Everyone who can view the workspace sees them and chooses for themselves whether a subscription goes to
them (kept in the delivery record, not in workspace.yaml, so a viewer changes nothing of the workspace).
Stewards and owners also see what was sent lately, and add and remove subscriptions and alerts in forms
(lib.delivery.manage checks each against their draft and saves it there); Review shows such a change as an
access change, and it counts once published.
"""

from __future__ import annotations

import streamlit as st

from app_pages import state, ui
from lib.core import settings
from lib.delivery import manage
from lib.delivery import run as delivery
from lib.memory.kinds.workspace import alert_words, subscription_words
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
    st.info("This workspace has no subscriptions. Stewards and owners add them below, on their draft.")
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

if ctx.can("edit"):
    st.divider()
    st.subheader("Change subscriptions and alerts")
    st.caption(
        "A change goes to your draft: Review shows it as an access change (the data leaves the app), and it counts "
        "once published. Who is named must be able to view the workspace and have an email: in the users file."
    )
    if done := st.session_state.pop(state.DELIVERIES_DONE, None):
        st.success(done)
    changes: dict[str, list] = {}
    with ui.user_errors("Could not read your draft"):
        files = ctx.repo.as_drafted(ctx.user, ctx.slug).data
        offered = manage.choices(files, credentials)
        sends, kpis, people = offered.sends, offered.kpis, offered.people
        add_sub, add_alert = st.columns(2)
        with add_sub.form("deliveries_add_subscription", clear_on_submit=True):
            st.markdown("**A subscription**")
            what = st.selectbox("Send", list(sends), key="deliveries_send", disabled=not sends)
            every = st.text_input("Every", value="1 week", help="1 day, 1 week, 12 hours, 2d... (the forms of refresh.every)", key="deliveries_every")
            to = st.multiselect("To", people, key="deliveries_sub_to", placeholder="people or groups")
            others = st.text_input("Other addresses", key="deliveries_sub_others", placeholder="ops@example.com (the policy must allow them)")
            params = st.text_input("Parameters or filters", key="deliveries_params", placeholder="site=Brno, week=2026-W47")
            if st.form_submit_button("Add to my draft", disabled=not sends):
                kind, fmt = sends[what]
                recipients = [*to, *(a.strip() for a in others.split(",") if a.strip())]
                changes["add_subscriptions"] = [manage.subscription(kind, fmt, every, recipients, manage.params_from(params))]
        with add_alert.form("deliveries_add_alert", clear_on_submit=True):
            st.markdown("**An alert**")
            kpi = st.selectbox("On the KPI", list(kpis), format_func=lambda k: f"{kpis[k]} ({k})", key="deliveries_kpi", disabled=not kpis)
            when = st.text_input("When", value="< 90%", help="an operator (<, <=, >, >=, ==, !=) and a number; 90% is 0.9", key="deliveries_when")
            per = st.selectbox("For each value of", ["", *offered.per_filters], format_func=lambda f: f or "(the figure as a whole)", key="deliveries_per")
            alert_to = st.multiselect("To", people, key="deliveries_alert_to", placeholder="people or groups")
            hook = st.text_input(
                "Webhook",
                key="deliveries_webhook",
                placeholder="https://...",
                disabled=not settings.get("DASHMEM_ALERT_WEBHOOKS"),
                help="a URL that starts with one of DASHMEM_ALERT_WEBHOOKS (the operator's list)",
            )
            if st.form_submit_button("Add to my draft", disabled=not kpis):
                changes["add_alerts"] = [manage.alert(kpi, when, alert_to, per or None, hook)]
        draft_meta = files.get("workspace") or {}
        held_subs, held_alerts = draft_meta.get("subscriptions") or [], draft_meta.get("alerts") or []
        if held_subs or held_alerts:
            with st.form("deliveries_remove"):
                gone_subs = st.multiselect(
                    "Remove subscriptions", range(len(held_subs)), format_func=lambda i: subscription_words(held_subs[i]), key="deliveries_gone_subs"
                )
                gone_alerts = st.multiselect(
                    "Remove alerts", range(len(held_alerts)), format_func=lambda i: alert_words(held_alerts[i]), key="deliveries_gone_alerts"
                )
                if st.form_submit_button("Remove from my draft"):
                    changes["remove_subscriptions"] = [held_subs[i] for i in gone_subs]
                    changes["remove_alerts"] = [held_alerts[i] for i in gone_alerts]
        for sub in held_subs:
            for problem in manage.subscription_problems(sub, files, credentials):
                st.warning(f"{subscription_words(sub)}: {problem}")
        for alert in held_alerts:
            for problem in manage.alert_problems(alert, files, credentials):
                st.warning(f"{alert_words(alert)}: {problem}")
    if changes:
        with ui.user_errors("Could not change the deliveries", invalid="Not saved: nothing changed."):
            sha, done = manage.change(ctx.repo, ctx.user, ctx.slug, credentials, **changes)
            if not done:
                st.info("Nothing to change: " + ("choose what to remove." if "remove_alerts" in changes else "your draft already has it."))
            else:
                st.session_state[state.DELIVERIES_DONE] = f"Saved to your draft: {'; '.join(done)}. Review shows it; publish it to make it count."
                st.rerun()
