"""Managing a workspace's subscriptions and alerts on a draft: the Deliveries page's forms, and scripts.

A change is checked against the draft as it stands (the report or dashboard it sends and its parameters or
filters, the KPI an alert watches, who can view the workspace and has an address, the outside addresses
the workspace's policy allows, the operator's webhooks), then saved as one commit to the user's draft,
which Review shows as an access change and publishing makes count. Stewards and owners may; a viewer
chooses only for themselves (`run.choose`). What is refused says why, and nothing is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..artifacts.components.kpi import NAME as KPI
from ..memory import workspace
from ..memory.intervals import ScheduleError, parse_every
from ..memory.kinds.workspace import FORMATS, alert_words, subscription_words
from ..repo.configrepo import ConfigRepo
from ..roles.access import User
from . import alerts as alerting
from . import webhook
from .recipients import choices as recipient_choices
from .recipients import expand
from .run import DeliveryError


def subscription(send: str, fmt: str, every: str, to: Sequence[str], params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A subscription as workspace.yaml holds it, its keys in the schema's order."""
    entry: dict[str, Any] = {"to": [str(t).strip() for t in to if str(t).strip()], "send": send, "format": fmt, "every": " ".join(str(every).split())}
    if params:
        entry["params"] = dict(params)
    return entry


def alert(component: str, when: str, to: Sequence[str] = (), per: str | None = None, webhook_url: str | None = None) -> dict[str, Any]:
    """An alert as workspace.yaml holds it."""
    entry: dict[str, Any] = {"component": component, "when": " ".join(str(when).split())}
    if per:
        entry["per"] = per
    if webhook_url and webhook_url.strip():
        entry["webhook"] = webhook_url.strip()
    recipients = [str(t).strip() for t in to if str(t).strip()]
    if recipients:
        entry["to"] = recipients
    return entry


def params_from(text: str) -> dict[str, Any]:
    """`site=Brno, week=2026-W47` as a subscription's `params:` (a key given twice holds a list, as for a multiselect)."""
    out: dict[str, Any] = {}
    for pair in (p.strip() for p in str(text or "").split(",")):
        if not pair:
            continue
        key, eq, value = pair.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not key or not value:
            raise DeliveryError(f"params: {pair!r} is not ID=VALUE (e.g. site=Brno; separate several with commas)")
        if key in out:
            out[key] = [*(out[key] if isinstance(out[key], list) else [out[key]]), value]
        else:
            out[key] = value
    return out


@dataclass(frozen=True)
class Choices:
    """What the forms offer, from the draft: each way to send (its label -> (artifact, format)), the KPIs (id ->
    title), the filters an alert can be per, and who can be named in `to:` (`recipients.choices`)."""

    sends: dict[str, tuple[str, str]]
    kpis: dict[str, str]
    per_filters: list[str]
    people: list[str]


def choices(files: Mapping[str, Any], credentials: Mapping[str, Any]) -> Choices:
    sends = {
        f"the {kind} as {'a PNG picture' if fmt == 'png' else fmt.upper()}": (kind, fmt)
        for kind, formats in FORMATS.items()
        if files.get(kind)
        for fmt in formats
    }
    components = (files.get("dashboard") or {}).get("components") or []
    kpis = {str(c["id"]): str(c.get("title") or c["id"]) for c in components if c.get("type") == KPI}
    return Choices(sends, kpis, per_filters(files), recipient_choices(files.get("workspace") or {}, credentials))


def per_filters(files: Mapping[str, Any]) -> list[str]:
    """The dashboard's filters an alert's `per:` may name."""
    return [str(f.get("id")) for f in (files.get("dashboard") or {}).get("filters") or [] if f.get("type") in alerting.PER_TYPES]


def subscription_problems(sub: Mapping[str, Any], files: Mapping[str, Any], credentials: Mapping[str, Any]) -> list[str]:
    """Why `sub` cannot go out as written, in sentences (none: it can); `files` is the workspace's, its meta included."""
    meta = files.get("workspace") or {}
    send = str(sub.get("send"))
    out: list[str] = []
    if send not in FORMATS:
        return [f"send: {send!r} is not one of report, dashboard"]
    spec = files.get(send)
    if not spec:
        out.append(f"send: the workspace has no {workspace.FILES[send]} to send")
    if sub.get("format") is not None and sub["format"] not in FORMATS[send]:
        out.append(f"format: a {send} goes as {' or '.join(FORMATS[send])}, not {sub['format']}")
    try:
        parse_every(sub.get("every"), "every")
    except ScheduleError as exc:
        out.append(str(exc))
    out += _recipient_problems(sub.get("to") or [], meta, credentials)
    known = [str(f.get("id")) for f in ((spec or {}).get("parameters" if send == "report" else "filters") or [])]
    for key in sub.get("params") or {}:
        if key not in known:
            what = "parameter of the report" if send == "report" else "filter of the dashboard"
            out.append(f"params: {key!r} is not a {what} ({', '.join(known) or 'it has none'})")
    return out


def alert_problems(entry: Mapping[str, Any], files: Mapping[str, Any], credentials: Mapping[str, Any]) -> list[str]:
    """Why the alert cannot be evaluated or sent as written (none: it can)."""
    meta = files.get("workspace") or {}
    out: list[str] = []
    try:
        alerting.kpi_of(files, str(entry.get("component")))
    except alerting.AlertError as exc:
        out.append(str(exc))
    try:
        alerting.Condition.parse(str(entry.get("when", "")))
    except alerting.AlertError as exc:
        out.append(str(exc))
    per = entry.get("per")
    choosable = per_filters(files)
    if per and per not in choosable:
        out.append(f"per: {per!r} is not a select or multiselect filter of the dashboard ({', '.join(choosable) or 'it has none'})")
    if not entry.get("to") and not entry.get("webhook"):
        out.append("to: name who is told (a user, group:NAME or an allowed address), or give a webhook")
    out += _recipient_problems(entry.get("to") or [], meta, credentials) if entry.get("to") else []
    url = entry.get("webhook")
    if url and not webhook.allowed(str(url)):
        out.append(f"webhook: {url} is not one DASHMEM_ALERT_WEBHOOKS allows; the operator lists the URLs alerts may post to")
    return out


def _recipient_problems(to: Sequence[str], meta: Mapping[str, Any], credentials: Mapping[str, Any]) -> list[str]:
    if not to:
        return ["to: name at least one recipient"]
    found, problems = expand(to, meta, credentials)
    return [f"to: {p}" for p in problems] + ([] if found or problems else ["to: it would reach nobody"])


def change(
    repo: ConfigRepo,
    user: User,
    slug: str,
    credentials: Mapping[str, Any],
    *,
    add_subscriptions: Iterable[Mapping[str, Any]] = (),
    remove_subscriptions: Iterable[Mapping[str, Any]] = (),
    add_alerts: Iterable[Mapping[str, Any]] = (),
    remove_alerts: Iterable[Mapping[str, Any]] = (),
) -> tuple[str | None, list[str]]:
    """Add and remove subscriptions and alerts on the user's draft as one commit: its sha (None: nothing changed)
    and a sentence per change. Each added entry is checked first (DeliveryError, nothing written, when one
    cannot go out as written); an entry removed is matched by its content."""
    base, ws, meta = repo.meta_to_change(user, slug, "edit")
    files = ws.data
    done: list[str] = []
    for key, adding, removing, problems_of, words, noun in (
        ("subscriptions", list(add_subscriptions), list(remove_subscriptions), subscription_problems, subscription_words, "subscription"),
        ("alerts", list(add_alerts), list(remove_alerts), alert_problems, alert_words, "alert"),
    ):
        entries = list(meta.get(key) or [])
        for entry in removing:
            if dict(entry) in entries:
                entries.remove(dict(entry))
                done.append(f"{noun} removed: {words(entry)}")
        for entry in adding:
            problems = problems_of(entry, {**files, "workspace": meta}, credentials)
            if problems:
                raise DeliveryError(f"the {noun} {words(entry)} cannot be added: " + "; ".join(problems))
            if dict(entry) not in entries:
                entries.append(dict(entry))
                done.append(f"{noun} added: {words(entry)}")
        if entries:
            meta[key] = entries
        else:
            meta.pop(key, None)
    if not done:
        return None, []
    sha = repo.save(user, slug, {"workspace": meta}, f"Deliveries of {slug}: {'; '.join(done)}", base=base)
    return sha, done
