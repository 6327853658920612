"""Delivery (issue #36): subscriptions and alerts sent by a scheduled run to a real SMTP server on loopback.

The server is aiosmtpd's, started in this process; the scheduled run is `python -m lib refresh --all REPO
--due` in a fresh process, as cron starts it, with an Anthropic API key pointing at a local HTTP server that
counts requests: a delivery must make none. The messages are read back off the server, the PDF with pypdf.
"""

from __future__ import annotations

import contextlib
import csv
import http.server
import io
import json
import os
import socket
import subprocess
import sys
import threading
import time
from email.message import EmailMessage

import pytest
import yaml

from lib.delivery.mail import MailError, Server
from lib.delivery.recipients import expand
from lib.delivery.run import period_of
from lib.memory import workspace
from lib.ops import publish
from lib.roles.access import User
from tests.helpers import ROOT, WORKSPACES
from tests.helpers.browser import free_port
from tests.helpers.mail import Inbox

aiosmtpd = pytest.importorskip("aiosmtpd", reason="aiosmtpd (requirements-dev.txt) runs the SMTP server these tests send to")
pypdf = pytest.importorskip("pypdf")

from aiosmtpd.controller import Controller  # noqa: E402
from aiosmtpd.smtp import AuthResult, LoginPassword  # noqa: E402

OLIVIA = User("olivia", app_role="owner")
SCW, GDP = "supply-chain-weekly", "gdp-explorer"


@contextlib.contextmanager
def _http_server(on_post):
    """A local HTTP server whose POSTs `on_post(request handler)` answers with a status; yields its base URL."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.send_response(on_post(self))
            self.end_headers()

        def log_message(self, format, *args):  # noqa: A002  (the base class's name)
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


@pytest.fixture
def model_api():
    """An HTTP server standing in for api.anthropic.com that counts the requests it gets (there must be none)."""
    hits: list[str] = []
    with _http_server(lambda request: hits.append(request.path) or 500) as base:
        yield base, hits


def _with(repo, slug: str, **meta_changes) -> None:
    meta = workspace.load(repo.draft(OLIVIA, slug).workspace_path)[0].data["workspace"]
    repo.save(OLIVIA, slug, {"workspace": {**meta, **meta_changes}}, "Deliveries")
    publish.publish(repo, OLIVIA, slug)


def _gates():
    with open(WORKSPACES / SCW / "data" / "gates.csv") as fh:
        return list(csv.DictReader(fh))


def test_a_scheduled_run_sends_the_report_one_alert_and_one_not_sent_note_and_nothing_twice(config_repo, smtp, model_api, tmp_path):
    inbox, port = smtp
    base_url, hits = model_api
    rows = _gates()
    attainment = sum(int(r["actual"]) for r in rows) / sum(int(r["target"]) for r in rows)
    threshold = round(attainment + 0.05, 2)  # the figure is below it: the alert holds
    _with(
        config_repo,
        SCW,
        subscriptions=[{"to": ["vera", "sam"], "send": "report", "format": "pdf", "every": "1 week"}],
        alerts=[{"component": "kpi_attainment", "when": f"< {threshold}", "to": ["olivia"]}],
    )
    _with(config_repo, GDP, subscriptions=[{"to": ["vera"], "send": "dashboard", "every": "1d"}])
    # This week's file for gdp-explorer arrives broken: its refresh fails and keeps nothing new.
    (config_repo.published_path(GDP) / "data" / "gdp.csv").write_bytes(b"\x00\xff not a csv \x00\n" * 50)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DASHMEM_CACHE_DIR": str(tmp_path / "cache"),
        "DASHMEM_SMTP_HOST": "127.0.0.1",
        "DASHMEM_SMTP_PORT": str(port),
        "DASHMEM_SMTP_TLS": "none",
        "DASHMEM_SMTP_FROM": "dashmem@example.com",
        "DASHMEM_APP_URL": "https://dash.example.com",
        "ANTHROPIC_API_KEY": "sk-test",
        "ANTHROPIC_BASE_URL": base_url,
    }

    def run():
        return subprocess.run(
            [sys.executable, "-m", "lib", "refresh", "--all", str(config_repo.path), "--due"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
        )

    first = run()
    assert first.returncode == 1, first.stdout + first.stderr  # gdp-explorer's refresh failed
    assert "Traceback" not in first.stderr
    reports = {addr: inbox.to(addr) for addr in ("vera@example.com", "sam@example.com")}
    assert all(len(found) == 1 for found in reports.values()), first.stdout
    for (message,) in reports.values():
        assert message["Subject"].startswith("Supply chain weekly: the report of ")
        (attachment,) = list(message.iter_attachments())
        assert attachment.get_content_type() == "application/pdf"
        text = "".join(page.extract_text() for page in pypdf.PdfReader(io.BytesIO(attachment.get_content())).pages)
        assert f"{sum(int(r['actual']) for r in rows):,}" in text  # the report's units figure
    to_olivia = inbox.to("olivia@example.com")
    assert sorted(m["Subject"] for m in to_olivia) == sorted(
        [f"Supply chain weekly: Attainment this week is {attainment:.1%}, below {threshold:.1%}", "GDP explorer: the dashboard was not sent"]
    ), [m["Subject"] for m in to_olivia]
    alert = next(m for m in to_olivia if "Attainment" in m["Subject"])
    body = alert.get_content()
    assert f"{attainment:.1%}" in body and "on the data loaded" in body and "https://dash.example.com/?ws=supply-chain-weekly&explain=kpi_attainment" in body
    note = next(m for m in to_olivia if "not sent" in m["Subject"]).get_content()
    assert "was not sent" in note and "gdp" in note.lower()
    assert not inbox.to("vera@example.com")[1:] and len(inbox.messages) == 4
    for line in ("supply-chain-weekly: report (pdf) to vera@example.com: sent", "gdp-explorer: not-sent note to olivia@example.com: sent"):
        assert line in first.stdout, first.stdout

    again = run()  # the same period, the same state: nothing is sent twice
    assert again.returncode == 1 and len(inbox.messages) == 4, again.stdout
    assert hits == []  # no model call


def test_two_runs_at_once_send_each_copy_once(config_repo, smtp, tmp_path, monkeypatch):
    inbox, port = smtp
    _with(config_repo, SCW, subscriptions=[{"to": ["vera"], "send": "report", "format": "html", "every": "1d"}])
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DASHMEM_CACHE_DIR": str(tmp_path / "cache"), "DASHMEM_SMTP_HOST": "127.0.0.1"}
    env |= {"DASHMEM_SMTP_PORT": str(port), "DASHMEM_SMTP_TLS": "none"}
    path = config_repo.published_path(SCW)
    assert subprocess.run([sys.executable, "-m", "lib", "refresh", str(path)], cwd=ROOT, env=env, capture_output=True, timeout=120).returncode == 0
    runs = [subprocess.Popen([sys.executable, "-m", "lib", "deliver", str(path)], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True) for _ in range(3)]
    outputs = [p.communicate(timeout=120)[0] for p in runs]
    assert len(inbox.to("vera@example.com")) == 1, outputs
    assert sum("to vera@example.com: sent" in o for o in outputs) == 1
    forced = subprocess.run([sys.executable, "-m", "lib", "deliver", str(path), "--now"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert forced.returncode == 0 and len(inbox.to("vera@example.com")) == 2, forced.stdout + forced.stderr


# --------------------------------------------------------------------------- the mail server's failures, in words


def _server(port: int, **changes) -> Server:
    return Server(
        **{"host": "127.0.0.1", "port": port, "tls": "none", "user": None, "password_ref": None, "sender": "d@example.com", "timeout_s": 3.0, **changes}
    )


def _message(to: str = "vera@example.com") -> EmailMessage:
    message = EmailMessage()
    message["To"], message["Subject"] = to, "hello"
    message.set_content("hi")
    return message


def test_a_refused_connection_is_one_sentence():
    with pytest.raises(MailError, match="refused the connection"):
        _server(free_port()).send(_message())


def test_a_server_that_stalls_ends_within_the_time_limit():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)  # accepts, then never says hello
    started = time.monotonic()
    with pytest.raises(MailError, match="did not answer within 1 s"):
        _server(listener.getsockname()[1], timeout_s=1.0).send(_message())
    assert time.monotonic() - started < 5
    listener.close()


def test_a_refused_recipient_is_named_and_the_others_still_get_theirs(smtp):
    inbox, port = smtp
    inbox.refuse = {"nobody@example.com"}
    with pytest.raises(MailError, match="refused the recipient nobody@example.com"):
        _server(port).send(_message("nobody@example.com"))
    _server(port).send(_message())
    assert len(inbox.to("vera@example.com")) == 1


def test_a_refused_login_names_the_settings(monkeypatch):
    class Authenticator:
        def __call__(self, server, session, envelope, mechanism, auth_data):
            ok = isinstance(auth_data, LoginPassword) and auth_data.password == b"right"
            return AuthResult(success=ok, handled=False)  # handled=False: the server answers 535 itself

    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port(), authenticator=Authenticator(), auth_require_tls=False)
    controller.start()
    try:
        monkeypatch.setenv("SMTP_PW", "wrong")
        with pytest.raises(MailError, match="refused the login of ops.*DASHMEM_SMTP_PASSWORD"):
            _server(controller.port, user="ops", password_ref="env:SMTP_PW").send(_message())
        monkeypatch.setenv("SMTP_PW", "right")
        _server(controller.port, user="ops", password_ref="env:SMTP_PW").send(_message())
        assert len(inbox.messages) == 1
    finally:
        controller.stop()


def test_a_password_written_out_is_refused_as_a_setting(monkeypatch):
    from lib.core import settings

    monkeypatch.setenv("DASHMEM_SMTP_PASSWORD", "hunter2")
    with pytest.raises(settings.SettingError, match="not a reference") as caught:
        settings.get("DASHMEM_SMTP_PASSWORD")
    assert "hunter2" not in str(caught.value)


# --------------------------------------------------------------------------- recipients and periods


def test_recipients_need_view_access_an_address_and_outside_addresses_an_owners_allow_list(tmp_path):
    users = yaml.safe_load((ROOT / "demo" / "users.yaml").read_text())
    meta = {"name": "x", "access": {"owners": ["olivia"], "stewards": ["group:analysts"], "viewers": ["vera"]}}
    users["usernames"]["nico"] = {**users["usernames"]["vera"], "email": "nico@example.com"}
    found, problems = expand(["vera", "group:analysts", "nico", "ops@partner.org", "zed"], meta, users)
    assert sorted(r.address for r in found) == ["sam@example.com", "vera@example.com"]
    assert any("nico may not view" in p for p in problems) and any("ops@partner.org is not in the users file" in p for p in problems)
    assert any("zed is not a user" in p for p in problems)
    allowed = {**meta, "policy": {"external_recipients": ["@partner.org"]}}
    found, _ = expand(["ops@partner.org"], allowed, users)
    assert [(r.address, r.user.name) for r in found] == [("ops@partner.org", "outside-recipient")]  # held to no rows of a filtered table


def test_periods_start_on_mondays_and_at_midnight():
    import datetime as dt

    week, day = dt.timedelta(weeks=1), dt.timedelta(days=1)
    wednesday = dt.datetime(2026, 12, 2, 15, 30, tzinfo=dt.timezone.utc)
    assert period_of(wednesday, week) == "2026-11-30T00:00+00:00"
    assert period_of(wednesday, day) == "2026-12-02T00:00+00:00"
    assert period_of(wednesday + dt.timedelta(days=5), week) == "2026-12-07T00:00+00:00"


def test_the_alerts_link_opens_the_figures_explain_on_the_dashboard(env):
    from streamlit.testing.v1 import AppTest

    from tests.helpers.app import page_text

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.session_state["authentication_status"] = True
    at.session_state["username"] = at.session_state["name"] = "vera"
    at.session_state["slug"] = SCW
    at.query_params["ws"], at.query_params["explain"] = SCW, "kpi_attainment"
    at.run()
    assert not at.exception, at.exception
    assert [e.label for e in at.expander if e.label == "Where Attainment this week comes from"]
    assert "SELECT sum(actual) / sum(target) AS value FROM gates" in page_text(at)


def test_review_marks_a_change_of_subscriptions_or_alerts_for_attention():
    from lib.memory.changes import ATTENTION
    from lib.memory.kinds.workspace import access_changes

    meta = {"name": "x", "access": {"owners": ["olivia"]}}
    sub = {"to": ["vera"], "send": "report", "format": "pdf", "every": "1 week", "params": {"site": "Brno"}}
    changes = access_changes(meta, {**meta, "subscriptions": [sub], "alerts": [{"component": "kpi_a", "when": "< 0.9", "per": "site", "to": ["olivia"]}]})
    assert [(c.category, c.id, c.severity) for c in changes] == [
        ("access", "report (pdf, site=Brno) every 1 week to vera", ATTENTION),
        ("access", "kpi_a < 0.9 at each site to olivia", ATTENTION),
    ], changes
    removed = access_changes({**meta, "subscriptions": [sub]}, meta)
    assert len(removed) == 1 and removed[0].new is None and removed[0].severity == ATTENTION


def test_peoples_own_choices_add_and_remove_them_whatever_to_says():
    from lib.delivery.recipients import of_subscription

    users = yaml.safe_load((ROOT / "demo" / "users.yaml").read_text())
    meta = {"name": "x", "access": {"owners": ["olivia"], "stewards": ["group:analysts"], "viewers": ["vera"]}}
    found, _ = of_subscription(["vera", "group:analysts"], {"sam": "out", "olivia": "in"}, meta, users)
    assert sorted(r.user.name for r in found) == ["olivia", "vera"]
    users["usernames"]["zed"] = {**users["usernames"]["vera"], "email": "zed@example.com"}
    found, problems = of_subscription(["vera"], {"zed": "in"}, meta, users)  # asking does not grant view access
    assert [r.user.name for r in found] == ["vera"] and any("zed may not view" in p for p in problems)


def test_each_recipients_copy_and_alert_are_their_rows_and_an_alert_clears_once(config_repo, smtp, tmp_path, monkeypatch):
    from lib.data.refresh import refresh
    from lib.data.snapshots import Warehouse
    from lib.delivery.run import deliver
    from lib.roles.access import OPERATOR

    inbox, port = smtp
    users = yaml.safe_load((ROOT / "demo" / "users.yaml").read_text())
    users["usernames"]["vera"]["attributes"] = {"site": ["Brno"]}
    (tmp_path / "users.yaml").write_text(yaml.safe_dump(users))
    monkeypatch.setenv("DASHMEM_USERS", str(tmp_path / "users.yaml"))
    monkeypatch.setenv("DASHMEM_CACHE_DIR", str(tmp_path / "cache"))
    rows = _gates()
    brno = [r for r in rows if r["site"] == "Brno"]
    brno_attainment = sum(int(r["actual"]) for r in brno) / sum(int(r["target"]) for r in brno)
    _with(
        config_repo,
        SCW,
        row_filters=[{"table": "gates", "column": "site", "attribute": "site"}],
        subscriptions=[{"to": ["vera", "olivia"], "send": "report", "format": "html", "every": "1d"}],
        alerts=[{"component": "kpi_attainment", "when": f"< {brno_attainment + 0.001:.4f}", "per": "site", "to": ["vera"]}],
    )
    path = config_repo.published_path(SCW)
    assert refresh(path, Warehouse.for_workspace(path), user=OPERATOR).ok
    server = _server(port)

    done = deliver(path, server=server)
    assert done.ok, done.lines()
    (vera_copy,) = [m for m in inbox.to("vera@example.com") if "report" in m["Subject"]]
    (olivia_copy,) = inbox.to("olivia@example.com")
    vera_html = next(vera_copy.iter_attachments()).get_content()
    olivia_html = next(olivia_copy.iter_attachments()).get_content()
    assert "Brno" in vera_html and "Porto" not in vera_html and "Lyon" not in vera_html
    assert "Porto" in olivia_html
    (alert,) = [m for m in inbox.to("vera@example.com") if "Attainment" in m["Subject"]]
    assert f"(Sites = Brno) is {brno_attainment:.1%}" in alert["Subject"]  # her site only: the others are not her rows

    # Brno gets better: the next refresh's alert clears, once.
    better = [{**r, "actual": str(int(r["target"]) * 2)} if r["site"] == "Brno" else r for r in rows]
    with open(path / "data" / "gates.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(better)
    assert refresh(path, Warehouse.for_workspace(path), user=OPERATOR).swapped
    deliver(path, server=server)
    cleared = [m for m in inbox.to("vera@example.com") if "no longer" in m["Subject"]]
    assert len(cleared) == 1 and "Sites = Brno" in cleared[0]["Subject"]
    count = len(inbox.messages)
    deliver(path, server=server)
    assert len(inbox.messages) == count  # the report went out today already, and the alert stays cleared


def test_a_live_postgresql_sources_copies_and_exports_are_each_recipients_rows(smtp, tmp_path, monkeypatch):
    """The same on a live source: each copy's SQL reaches PostgreSQL held to the recipient's rows."""
    import uuid

    import sqlalchemy as sa

    from lib.artifacts.dashboard_export import export_workspace
    from lib.data.refresh import refresh
    from lib.data.snapshots import Warehouse
    from lib.delivery.run import deliver
    from lib.roles.access import OPERATOR

    from ..helpers.databases import server_engine
    from ..helpers.live import _source, _workspace

    inbox, port = smtp
    users = yaml.safe_load((ROOT / "demo" / "users.yaml").read_text())
    users["usernames"]["vera"]["attributes"] = {"site": ["Brno"]}
    users["usernames"]["nico"] = {**users["usernames"]["vera"], "email": "nico@example.com", "attributes": {}}
    (tmp_path / "users.yaml").write_text(yaml.safe_dump(users))
    monkeypatch.setenv("DASHMEM_USERS", str(tmp_path / "users.yaml"))
    monkeypatch.setenv("DASHMEM_CACHE_DIR", str(tmp_path / "cache"))
    engine = server_engine("postgresql")
    name = f"dm_deliver_{uuid.uuid4().hex[:10]}"
    rows = _gates()
    with engine.begin() as connection:
        connection.exec_driver_sql(
            f"CREATE TABLE {name} (day DATE, week TEXT, site TEXT, gate TEXT, target BIGINT, actual BIGINT, attainment DOUBLE PRECISION)"
        )
        connection.execute(sa.text(f"INSERT INTO {name} VALUES (:day, :week, :site, :gate, :target, :actual, :attainment)"), rows)
    try:
        folder = _workspace(tmp_path, _source(name), "live-ws")
        ws, _ = workspace.load(folder)
        ws.data["workspace"]["row_filters"] = [{"table": "gates", "column": "site", "attribute": "site"}]
        ws.data["workspace"]["subscriptions"] = [{"to": ["vera", "olivia"], "send": "dashboard", "every": "1d"}]
        ws.data["workspace"].pop("alerts", None)
        workspace.save(folder, ws.data)
        wh = Warehouse.for_workspace(folder)
        assert refresh(folder, wh, user=OPERATOR).ok
        done = deliver(folder, server=_server(port))
        assert done.ok and not done.problems, done.lines()
        (vera_copy,) = inbox.to("vera@example.com")
        (olivia_copy,) = inbox.to("olivia@example.com")
        vera_html, olivia_html = (next(m.iter_attachments()).get_content() for m in (vera_copy, olivia_copy))
        assert "Brno" in vera_html and not any(site in vera_html for site in ("Porto", "Lyon", "Leipzig"))
        assert all(site in olivia_html for site in ("Brno", "Porto", "Lyon"))
        units = {
            who: f"{sum(int(r['actual']) for r in rows if keep(r)):,}" for who, keep in (("vera", lambda r: r["site"] == "Brno"), ("olivia", lambda r: True))
        }
        assert units["vera"] in vera_html and units["olivia"] in olivia_html
        nico_html = tmp_path / "nico.html"
        export_workspace(folder, nico_html, None, wh, user=OPERATOR, viewer=User("nico"))  # as `export --as nico`
        assert not any(site in nico_html.read_text() for site in ("Brno", "Porto", "Lyon"))
    finally:
        with engine.begin() as connection:
            connection.exec_driver_sql(f"DROP TABLE IF EXISTS {name}")
        engine.dispose()


@pytest.fixture
def hook_server():
    """A local HTTP server that takes webhook posts: (base URL, the JSON bodies it got)."""
    got: list[dict] = []
    with _http_server(lambda request: got.append(json.loads(request.rfile.read(int(request.headers["Content-Length"])))) or 204) as base:
        yield base, got


def test_an_alert_posts_to_an_allowed_webhook_once_and_never_to_one_not_allowed(config_repo, hook_server, smtp, tmp_path, monkeypatch):
    from lib.data.refresh import refresh
    from lib.data.snapshots import Warehouse
    from lib.delivery.run import deliver
    from lib.roles.access import OPERATOR

    base, got = hook_server
    _, port = smtp
    monkeypatch.setenv("DASHMEM_CACHE_DIR", str(tmp_path / "cache"))
    rows = _gates()
    attainment = sum(int(r["actual"]) for r in rows) / sum(int(r["target"]) for r in rows)
    hook, other = f"{base}/hooks/ops", f"{base}/elsewhere"
    _with(
        config_repo,
        SCW,
        subscriptions=[],
        alerts=[
            {"component": "kpi_attainment", "when": f"< {attainment + 0.05:.2f}", "webhook": hook},
            {"component": "kpi_attainment", "when": "< 2", "webhook": other},
        ],
    )
    path = config_repo.published_path(SCW)
    assert refresh(path, Warehouse.for_workspace(path), user=OPERATOR).ok
    monkeypatch.setenv("DASHMEM_ALERT_WEBHOOKS", f"{base}/hooks/")

    refused = deliver(path, server=_server(port))  # loopback: the address checks of REST sources refuse it
    assert got == [] and any("may not be reached" in s.detail for s in refused.sent), refused.lines()

    monkeypatch.setenv("DASHMEM_ALLOW_PRIVATE_NETWORKS", "1")
    done = deliver(path, server=_server(port))
    (posted,) = got
    assert posted["component"] == "kpi_attainment" and posted["holds"] is True and posted["shown"] == f"{attainment:.1%}"
    assert posted["workspace"] == SCW and posted["load"]["snapshot"]
    assert any("is not one DASHMEM_ALERT_WEBHOOKS allows" in s.detail for s in refused.sent + done.sent)
    deliver(path, server=_server(port))
    assert len(got) == 1  # no repeat while it holds


@pytest.mark.parametrize("mode", ["starttls", "tls"])
def test_starttls_and_tls_reach_a_server_with_a_trusted_certificate_and_refuse_an_untrusted_one(mode, tmp_path, monkeypatch):
    import ssl

    import trustme

    ca, stranger = trustme.CA(), trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    inbox = Inbox()
    if mode == "starttls":
        controller = Controller(inbox, hostname="127.0.0.1", port=free_port(), tls_context=context, require_starttls=True)
    else:  # TLS from the first byte, as on port 465
        controller = Controller(inbox, hostname="127.0.0.1", port=free_port(), ssl_context=context)
    controller.start()
    try:
        trusted, untrusted = tmp_path / "ca.pem", tmp_path / "stranger.pem"
        ca.cert_pem.write_to_path(str(trusted))
        stranger.cert_pem.write_to_path(str(untrusted))
        monkeypatch.setenv("SSL_CERT_FILE", str(untrusted))  # the default context's trust store: not this server's CA
        with pytest.raises(MailError, match="TLS handshake .* failed"):
            _server(controller.port, tls=mode).send(_message())
        monkeypatch.setenv("SSL_CERT_FILE", str(trusted))
        _server(controller.port, tls=mode).send(_message())
        assert len(inbox.to("vera@example.com")) == 1
    finally:
        controller.stop()


def test_a_refresh_that_fails_after_this_periods_copies_went_out_sends_no_not_sent_note(config_repo, smtp, tmp_path, monkeypatch):
    from lib.data.refresh import refresh
    from lib.data.snapshots import Warehouse
    from lib.delivery.run import deliver
    from lib.roles.access import OPERATOR

    inbox, port = smtp
    monkeypatch.setenv("DASHMEM_CACHE_DIR", str(tmp_path / "cache"))
    _with(config_repo, SCW, subscriptions=[{"to": ["vera"], "send": "report", "format": "html", "every": "1 week"}], alerts=[])
    path = config_repo.published_path(SCW)
    assert refresh(path, Warehouse.for_workspace(path), user=OPERATOR).ok
    assert deliver(path, server=_server(port)).ok and len(inbox.to("vera@example.com")) == 1
    later = deliver(path, data_ok=False, why_not="gates: the file is missing", server=_server(port))  # same week
    assert later.sent == [] and inbox.to("olivia@example.com") == [], later.lines()
