"""Delivery: subscriptions (the report or the dashboard by e-mail, on a schedule) and alerts on a KPI's figure.

Sent after a scheduled refresh (`python -m lib refresh --all --due`) or by `python -m lib deliver PATH`,
never by the model: a delivery renders the spec over the data, as a page does, and costs no tokens.

- `mail`: the mail server (DASHMEM_SMTP_HOST and the settings beside it), every exchange time-limited, every failure a plain sentence.
- `recipients`: who `to:` names, each checked for view access at send time; outside addresses only if
  `policy.external_recipients` allows them.
- `record`: what was sent, to whom, of which load, in a SQLite file in the workspace's cache (never in git);
  a delivery is claimed there before it is sent, so two runs at once never send it twice.
- `alerts`: a KPI's condition, per filter value when asked, and whether it holds now against before.
- `run`: one workspace's due deliveries.
"""
