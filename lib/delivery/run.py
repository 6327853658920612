"""One workspace's deliveries: its subscriptions that are due, and its alerts, after a refresh or on their own.

A subscription is sent at most once per period of its `every` (weeks start on Monday, days at midnight UTC),
to each recipient the first time a run finds that period's data good: the last refresh succeeded and the
report's (or the dashboard's) checks pass. Otherwise its owners get one short note a period saying why
nothing went out. Each recipient's copy is rendered through the engine of their rows (lib.data.row_filters),
once per set of rows; one recipient that fails does not stop the others.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from ..artifacts import checks
from ..artifacts.dashboard_export import export_workspace
from ..artifacts.explain import ExplainError, parse_filters
from ..artifacts.render import filter_states
from ..artifacts.report_export import export_report
from ..core import settings
from ..core.diagnostics import ERROR
from ..core.errors import DashmemError
from ..data.engine import Engine, scope_for
from ..data.snapshots import Snapshot, Warehouse, loaded_at
from ..memory import workspace
from ..memory.intervals import parse_every
from ..memory.kinds.workspace import format_of, subscription_words
from ..roles import access, auth
from ..roles.access import OPERATOR, User
from . import alerts as alerting
from . import webhook
from .mail import MailError, Server
from .recipients import OUTSIDE, Recipient, expand, of_subscription, owners, receives
from .record import Record

_log = logging.getLogger(__name__)

ORIGIN = dt.datetime(1970, 1, 5, tzinfo=dt.timezone.utc)  # a Monday at midnight UTC: where periods start
MIME = {"pdf": ("application", "pdf"), "html": ("text", "html"), "png": ("image", "png")}


class DeliveryError(DashmemError, ValueError):
    """A subscription that cannot be rendered as written: a parameter it names, a part that fails."""


@dataclass
class Sent:
    """One message of the run: what, to whom, and whether it went."""

    what: str  # "report (pdf)", "alert on kpi_attainment", "not-sent note"
    to: str
    status: str  # sent | failed
    detail: str = ""


@dataclass
class Deliveries:
    workspace: str
    sent: list[Sent] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # recipients left out, alerts not evaluated, no mail server

    @property
    def ok(self) -> bool:
        return not any(s.status == "failed" for s in self.sent)

    def lines(self) -> list[str]:
        out = [f"{self.workspace}: {s.what} to {s.to}: {s.status}" + (f" ({s.detail})" if s.detail else "") for s in self.sent]
        return out + [f"{self.workspace}: {p}" for p in self.problems]


def period_of(now: dt.datetime, every: dt.timedelta) -> str:
    """The start of the period of length `every` that `now` falls in (ISO 8601, UTC)."""
    return (ORIGIN + ((now - ORIGIN) // every) * every).isoformat(timespec="minutes")


def subscription_key(sub: Mapping[str, Any]) -> str:
    text = json.dumps({k: sub.get(k) for k in ("send", "format", "every", "params")}, sort_keys=True, default=str)
    return "subscription:" + hashlib.sha256(text.encode()).hexdigest()[:12]


def record_of(ws_path: Path) -> Record:
    """The workspace's delivery record, beside its snapshots in the cache."""
    return Record(Warehouse.for_workspace(ws_path).folder / "deliveries.sqlite")


def deliver(
    ws_path: Path,
    *,
    data_ok: bool = True,
    why_not: str = "",
    now: dt.datetime | None = None,
    every_one: bool = False,
    server: Server | None = None,
) -> Deliveries:
    """Send the workspace's due subscriptions and its alerts that changed; `data_ok` False (the refresh failed,
    `why_not` says how) sends only the owners' note. `every_one` sends every subscription now, due or not."""
    ws_path = Path(ws_path)
    out = Deliveries(ws_path.name)
    ws, _ = workspace.load(ws_path, readonly=True)
    meta = ws.get("workspace") or {}
    subscriptions, watched = meta.get("subscriptions") or [], meta.get("alerts") or []
    if not subscriptions and not watched:
        return out
    server = server or Server.from_settings()
    if server is None:
        out.problems.append(f"{len(subscriptions)} subscription(s) and {len(watched)} alert(s), but DASHMEM_SMTP_HOST is not set: nothing was sent")
        return out
    now = now or dt.datetime.now(dt.timezone.utc)
    credentials = auth.load_credentials()
    wh = Warehouse.for_workspace(ws_path)
    snapshot = wh.current()
    record = record_of(ws_path)
    job = _Job(ws_path, ws, meta, wh, snapshot, record, server, out, credentials)
    if snapshot is None:
        data_ok, why_not = False, why_not or "no data is loaded yet"
    for sub in subscriptions:
        try:
            job.subscription(sub, now, data_ok, why_not, every_one)
        except DashmemError as exc:
            out.problems.append(f"{sub.get('send')} every {sub.get('every')}: {exc}")
    if data_ok and snapshot is not None:
        for alert in watched:
            try:
                job.alert(alert)
            except DashmemError as exc:
                out.problems.append(str(exc))
    return out


@dataclass
class _Job:
    ws_path: Path
    ws: Any
    meta: Mapping[str, Any]
    wh: Warehouse
    snapshot: Snapshot | None
    record: Record
    server: Server
    out: Deliveries
    credentials: Mapping[str, Any]
    checked: dict[str, str] = field(default_factory=dict)  # kind -> its failing checks in words, once a run

    @property
    def title(self) -> str:
        return str(self.meta.get("name") or self.ws_path.name)

    def link(self, component: str | None = None) -> str:
        base = settings.get("DASHMEM_APP_URL")
        if not base:
            return "the Dashboard page of the app" if component is None else f"Explain on {component!r} on the Dashboard page of the app"
        return f"{base.rstrip('/')}/?ws={self.ws_path.name}" + (f"&explain={component}" if component else "")

    # ---- subscriptions

    def subscription(self, sub: Mapping[str, Any], now: dt.datetime, data_ok: bool, why_not: str, every_one: bool) -> None:
        kind = sub["send"]
        fmt = format_of(sub)
        what = f"{kind} ({fmt})"
        every = parse_every(sub["every"], f"{self.ws_path.name}/workspace.yaml: subscriptions: every")
        slot = f"now:{now.isoformat(timespec='seconds')}" if every_one else period_of(now, every)
        key = subscription_key(sub)
        recipients, problems = of_subscription(sub["to"], self.record.choices(key), self.meta, self.credentials)
        self.out.problems += [f"{what}: {p}" for p in problems]
        if not self.record.due(key, slot, [p.address for p in recipients]):
            return  # this period's copies are out (or it goes to nobody): no checks, no note
        if data_ok:
            failing = self.failing_checks(kind)
            if failing:
                data_ok, why_not = False, f"its checks fail: {failing}"
        if not data_ok:
            self.not_sent(key, slot, what, why_not)
            return
        assert self.snapshot is not None
        made: dict[str, bytes] = {}  # a copy per set of rows
        for person in recipients:
            if not self.record.claim(key, slot, person.address, self.snapshot.id):
                continue
            try:
                scope = scope_for(person.user, self.ws.data)
                rows = scope.key if scope else "all"
                if rows not in made:
                    made[rows] = self.render(kind, fmt, sub.get("params") or {}, person)
                self.send(self.copy_message(kind, fmt, made[rows], person), person, key, slot, what)
            except DashmemError as exc:
                self.record.done(key, slot, person.address, "failed", str(exc))
                self.out.sent.append(Sent(what, person.address, "failed", str(exc)))

    def failing_checks(self, kind: str) -> str:
        """The report's or dashboard's failing checks in words ("" when they pass), run once per kind a run."""
        if kind not in self.checked:
            self.checked[kind] = self._failing(kind)
        return self.checked[kind]

    def _failing(self, kind: str) -> str:
        if not self.ws.get(kind):
            return f"the workspace has no {workspace.FILES[kind]}"
        assert self.snapshot is not None
        found = [d for d in checks.run(self.ws, self.wh.tables(self.snapshot), self.snapshot.id, kind=kind) if d.level == ERROR]
        return "; ".join(d.message for d in found[:3]) + (f" (and {len(found) - 3} more)" if len(found) > 3 else "")

    def render(self, kind: str, fmt: str, params: Mapping[str, Any], person: Recipient) -> bytes:
        assert self.snapshot is not None
        spec = self.ws.get(kind) or {}
        tables = self.wh.tables(self.snapshot)
        engine = Engine.for_workspace(self.ws.data, tables, self.snapshot.id, workspace_path=self.ws_path, user=person.user)
        filters = (spec.get("parameters") if kind == "report" else spec.get("filters")) or []
        pairs = [f"{fid}={v}" for fid, value in params.items() for v in (value if isinstance(value, list) else [value])]
        try:
            chosen = parse_filters({"filters": filters}, filter_states({"filters": filters}, tables, self.snapshot.id, engine), pairs)
        except ExplainError as exc:
            raise DeliveryError(f"params: {exc}") from None
        with tempfile.TemporaryDirectory(prefix="dashmem-delivery-") as tmp:
            target = Path(tmp) / f"out.{fmt}"
            if kind == "report":
                written = export_report(
                    self.ws_path, target if fmt == "html" else None, target if fmt == "pdf" else None, self.wh, chosen, user=OPERATOR, viewer=person.user
                )
            else:
                html, picture = (target, None) if fmt == "html" else (None, target)
                written = export_workspace(self.ws_path, html, None, self.wh, user=OPERATOR, viewer=person.user, chosen=chosen, picture_out=picture)
            if written["errors"]:
                raise DeliveryError("parts of it could not be rendered: " + "; ".join(f"{cid}: {e}" for cid, e in written["errors"][:3]))
            return target.read_bytes()

    def copy_message(self, kind: str, fmt: str, content: bytes, person: Recipient) -> EmailMessage:
        assert self.snapshot is not None
        day = loaded_at(self.snapshot)[:10]
        message = _message(
            person,
            f"{self.title}: the {kind} of {day}",
            f"The {kind} of {self.title}, on the data loaded {loaded_at(self.snapshot)}, is attached ({fmt.upper()}).\n\n"
            f"Open it in the app: {self.link()}\n\n"
            f"You get this as a subscriber ({person.named}); turn it off for yourself on the Deliveries page.\n",
        )
        maintype, subtype = MIME[fmt]
        message.add_attachment(content, maintype=maintype, subtype=subtype, filename=f"{self.ws_path.name}-{kind}-{day}.{fmt}")
        return message

    def not_sent(self, key: str, slot: str, what: str, why: str) -> None:
        for owner in owners(self.meta, self.credentials):
            if not self.record.claim(f"not-sent:{key}", slot, owner.address, self.snapshot.id if self.snapshot else None):
                continue
            message = _message(
                owner,
                f"{self.title}: the {what.split(' ')[0]} was not sent",
                f"The {what} of {self.title} due for the period from {slot} was not sent: {why}.\n\n"
                f"It goes out with the first refresh that succeeds and passes its checks. {self.link()}\n",
            )
            self.send(message, owner, f"not-sent:{key}", slot, "not-sent note")

    # ---- alerts

    def alert(self, alert: Mapping[str, Any]) -> None:
        assert self.snapshot is not None
        condition = alerting.Condition.parse(alert["when"])
        spec = alerting.kpi_of(self.ws.data, alert["component"])
        key = alerting.key(alert)
        recipients, problems = expand(alert.get("to") or [], self.meta, self.credentials)
        self.out.problems += [f"alert on {alert['component']}: {p}" for p in problems]
        tables = self.wh.tables(self.snapshot)
        groups: dict[str, list[Recipient]] = {}
        for person in recipients:
            scope = scope_for(person.user, self.ws.data)
            groups.setdefault(scope.key if scope else "all", []).append(person)
        hook = alert.get("webhook")
        if hook:  # told the figure a user without attributes sees (no rows of a filtered table)
            groups.setdefault(f"webhook:{hook}", []).append(Recipient(hook, OUTSIDE, "webhook"))
        for rows, people in groups.items():
            engine = Engine.for_workspace(self.ws.data, tables, self.snapshot.id, workspace_path=self.ws_path, user=people[0].user)
            for figure in alerting.figures(alert, self.ws.data, engine):
                holds = condition.holds(figure.value)
                changed, since = self.record.turn(key, rows, figure.subject, holds, self.snapshot.id)
                slot = f"{figure.subject}|{'holds' if holds else 'cleared'}|{since}"
                for person in people:
                    taken = self.record.claim(key, slot, person.address, self.snapshot.id) if changed else self.record.retry(key, slot, person.address)
                    if not taken:
                        continue
                    if person.named == "webhook":
                        self.post(alert, spec, condition, figure, holds, person, key, slot)
                    else:
                        self.send(self.alert_message(spec, condition, figure, holds, person), person, key, slot, f"alert on {alert['component']}")

    def alert_message(self, spec: Mapping[str, Any], condition: alerting.Condition, figure: alerting.Figure, holds: bool, person: Recipient) -> EmailMessage:
        assert self.snapshot is not None
        name = str(spec.get("title") or spec["id"])
        where = f" ({figure.subject})" if figure.subject else ""
        threshold = condition.words(spec.get("format"))
        if holds:
            subject = f"{self.title}: {name}{where} is {figure.shown}, {threshold}"
            first = f"{name}{where} is {figure.shown}, {threshold}, on the data loaded {loaded_at(self.snapshot)}."
        else:
            subject = f"{self.title}: {name}{where} is no longer {threshold} ({figure.shown})"
            first = f"{name}{where} is {figure.shown} on the data loaded {loaded_at(self.snapshot)}: no longer {threshold}."
        body = f"{first}\n\nWhere the figure comes from: {self.link(str(spec['id']))}\n\nYou are told once when the condition starts to hold and once when it clears.\n"
        return _message(person, subject, body)

    def post(
        self,
        alert: Mapping[str, Any],
        spec: Mapping[str, Any],
        condition: alerting.Condition,
        figure: alerting.Figure,
        holds: bool,
        hook: Recipient,
        key: str,
        slot: str,
    ) -> None:
        assert self.snapshot is not None
        payload = {
            "workspace": self.ws_path.name,
            "component": spec["id"],
            "figure": str(spec.get("title") or spec["id"]),
            "subject": figure.subject,
            "value": figure.value if isinstance(figure.value, (int, float, str, bool)) or figure.value is None else str(figure.value),
            "shown": figure.shown,
            "when": alert["when"],
            "threshold": condition.words(spec.get("format")),
            "holds": holds,
            "load": {"snapshot": self.snapshot.id, "loaded": loaded_at(self.snapshot)},
            "link": self.link(str(spec["id"])),
        }
        what = f"alert on {alert['component']} (webhook)"
        try:
            webhook.post(hook.address, payload)
        except webhook.WebhookError as exc:
            self.record.done(key, slot, hook.address, "failed", str(exc))
            self.out.sent.append(Sent(what, hook.address, "failed", str(exc)))
            return
        self.record.done(key, slot, hook.address, "sent")
        self.out.sent.append(Sent(what, hook.address, "sent"))

    def send(self, message: EmailMessage, person: Recipient, key: str, slot: str, what: str) -> None:
        try:
            self.server.send(message)
        except MailError as exc:
            self.record.done(key, slot, person.address, "failed", str(exc))
            self.out.sent.append(Sent(what, person.address, "failed", str(exc)))
            _log.warning("delivery of %s %s to %s failed: %s", self.ws_path.name, what, person.address, exc)
            return
        self.record.done(key, slot, person.address, "sent")
        self.out.sent.append(Sent(what, person.address, "sent"))


@dataclass(frozen=True)
class Offer:
    """A subscription as the Deliveries page shows it to one person."""

    key: str
    words: str  # "report (pdf) every 1 week to vera, sam"
    mine: bool  # the next send goes to them
    why_not: str  # why it cannot go to them ("" when it can): no address in the users file


def offers(ws_path: Path, meta: Mapping[str, Any], user: User, credentials: Mapping[str, Any]) -> list[Offer]:
    """The workspace's subscriptions, each with whether it goes to `user` (their choice or its `to:`)."""
    record = record_of(ws_path)
    email_of = ((credentials.get("usernames") or {}).get(user.name) or {}).get("email")
    out = []
    for sub in meta.get("subscriptions") or []:
        key = subscription_key(sub)
        mine = receives(user.name, sub.get("to") or [], record.choices(key), meta, credentials)
        why = "" if email_of else f"the users file has no email: for {user.name}; ask whoever runs the app to add it"
        out.append(Offer(key, subscription_words(sub), mine, why))
    return out


def choose(ws_path: Path, meta: Mapping[str, Any], key: str, user: User, want: bool, credentials: Mapping[str, Any]) -> None:
    """`user` asks for the subscription `key` (want) or not: their own choice, kept in the delivery record.
    Anyone who may view the workspace may; where `to:` already says the same, the choice is dropped."""
    access.require(user, "view", dict(meta))
    sub = next((s for s in meta.get("subscriptions") or [] if subscription_key(s) == key), None)
    if sub is None:
        raise DeliveryError("that subscription is no longer in workspace.yaml; reload the page")
    record = record_of(ws_path)
    choices = {k: v for k, v in record.choices(key).items() if k != user.name}
    by_default = receives(user.name, sub.get("to") or [], choices, meta, credentials)
    record.choose(key, user.name, None if by_default == want else ("in" if want else "out"))


def _message(person: Recipient, subject: str, body: str) -> EmailMessage:
    message = EmailMessage()
    message["To"], message["Subject"] = person.address, subject
    message.set_content(body)
    return message


def deliver_all(paths: Sequence[tuple[Path, bool, str]], *, now: dt.datetime | None = None) -> list[Deliveries]:
    """`deliver` for each (published workspace folder, did its refresh succeed, why not) of a scheduled run."""
    server = Server.from_settings()
    return [deliver(path, data_ok=ok, why_not=why, now=now, server=server) for path, ok, why in paths]
