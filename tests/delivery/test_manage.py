"""Managing subscriptions and alerts on a draft (issue #36): what a steward adds is checked against the draft,
saved there as one commit that Review shows as an access change, and sent once published; what cannot go
out as written is refused with the field and the reason, and nothing is written."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys

import pytest
import yaml

from lib.delivery import manage
from lib.delivery.recipients import choices
from lib.delivery.run import DeliveryError
from lib.memory import workspace
from lib.ops import publish
from lib.roles import auth
from lib.roles.access import PermissionDenied, User
from tests.helpers import ROOT
from tests.helpers.report import needs_chromium

OLIVIA, SAM, VERA = User("olivia", app_role="owner"), User("sam", app_role="steward", groups=("analysts",)), User("vera")
SCW = "supply-chain-weekly"


@pytest.fixture
def users(tmp_path, monkeypatch):
    """The demo users plus zoe, who is in the users file but not named by the workspace once viewers are listed."""
    data = yaml.safe_load((ROOT / "demo" / "users.yaml").read_text())
    data["usernames"]["zoe"] = {**data["usernames"]["vera"], "name": "Zoe", "email": "zoe@example.com"}
    data["usernames"]["nomail"] = {k: v for k, v in data["usernames"]["vera"].items() if k != "email"}
    path = tmp_path / "users.yaml"
    path.write_text(yaml.safe_dump(data))
    monkeypatch.setenv("DASHMEM_USERS", str(path))
    return auth.load_credentials()


def _viewers_only(repo, *names: str) -> None:
    meta = workspace.load(repo.draft(OLIVIA, SCW).workspace_path)[0].data["workspace"]
    repo.save(OLIVIA, SCW, {"workspace": {**meta, "access": {**meta["access"], "viewers": list(names)}}}, "Viewers named")
    publish.publish(repo, OLIVIA, SCW)


def _draft_meta(repo, user: User) -> dict:
    return workspace.load(repo.draft(user, SCW).workspace_path)[0].data["workspace"]


def test_a_steward_adds_a_subscription_and_an_alert_review_shows_them_and_the_published_workspace_waits(config_repo, users):
    published = (config_repo.published_path(SCW) / "workspace.yaml").read_bytes()
    sub = manage.subscription("dashboard", "png", "1  day", ["vera", "group:analysts"], manage.params_from("site=Brno, site=Porto"))
    assert sub == {"to": ["vera", "group:analysts"], "send": "dashboard", "format": "png", "every": "1 day", "params": {"site": ["Brno", "Porto"]}}
    alert = manage.alert("kpi_gates_missed", ">= 10", ["sam"], per="site")
    sha, done = manage.change(config_repo, SAM, SCW, users, add_subscriptions=[sub], add_alerts=[alert])
    assert sha and done == [
        "subscription added: dashboard (png, site=['Brno', 'Porto']) every 1 day to vera, group:analysts",
        "alert added: kpi_gates_missed >= 10 at each site to sam",
    ]
    meta = _draft_meta(config_repo, SAM)
    assert meta["subscriptions"][-1] == sub and meta["alerts"][-1] == alert
    assert meta["subscriptions"][0]["to"] == ["olivia"]  # what was there stays
    assert (config_repo.published_path(SCW) / "workspace.yaml").read_bytes() == published
    kinds = [c.kind for c in config_repo.draft_changes(SCW, config_repo.branch_name(SAM, SCW))]
    assert kinds.count("subscribed") == 1 and kinds.count("alert_added") == 1
    # The same again changes nothing and makes no commit.
    assert manage.change(config_repo, SAM, SCW, users, add_subscriptions=[sub]) == (None, [])
    # Removing it is one more commit, and Review no longer lists it.
    sha, done = manage.change(config_repo, SAM, SCW, users, remove_subscriptions=[sub])
    assert sha and done == ["subscription removed: " + done[0].split(": ", 1)[1]]
    assert sub not in _draft_meta(config_repo, SAM)["subscriptions"]
    assert "subscribed" not in [c.kind for c in config_repo.draft_changes(SCW, config_repo.branch_name(SAM, SCW))]


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        (manage.subscription("report", "png", "1 week", ["vera"]), "format: a report goes as pdf or html, not png"),
        (manage.subscription("report", "pdf", "fortnightly", ["vera"]), "fortnightly"),
        (manage.subscription("report", "pdf", "1 week", ["nobody"]), "to: nobody is not a user of the users file"),
        (manage.subscription("report", "pdf", "1 week", ["zoe"]), "to: zoe may not view this workspace, so gets nothing"),
        (manage.subscription("report", "pdf", "1 week", ["nomail"]), "to: nomail has no email: in the users file"),
        (manage.subscription("report", "pdf", "1 week", ["ops@elsewhere.org"]), "policy.external_recipients does not allow it"),
        (manage.subscription("report", "pdf", "1 week", ["vera"], {"region": "EU"}), "params: 'region' is not a parameter of the report"),
        (manage.subscription("dashboard", "html", "1 week", ["vera"], {"week": "1"}), "params: 'week' is not a filter of the dashboard"),
        (manage.alert("by_gate", "< 90%", ["vera"]), "it is a chart, and alerts watch KPIs"),
        (manage.alert("kpi_nothing", "< 90%", ["vera"]), "dashboard.yaml has no component with that id"),
        (manage.alert("kpi_attainment", "below 90", ["vera"]), "write an operator"),
        (manage.alert("kpi_attainment", "< 90%", ["vera"], per="day"), "per: 'day' is not a select or multiselect filter"),
        (manage.alert("kpi_attainment", "< 90%"), "to: name who is told"),
        (manage.alert("kpi_attainment", "< 90%", webhook_url="https://hooks.example.com/x"), "is not one DASHMEM_ALERT_WEBHOOKS allows"),
    ],
)
def test_what_cannot_go_out_as_written_is_refused_with_its_field_and_nothing_is_written(config_repo, users, entry, says):
    _viewers_only(config_repo, "vera", "nomail")
    head = config_repo.draft_head(SAM, SCW)
    key = "add_alerts" if "component" in entry else "add_subscriptions"
    with pytest.raises(DeliveryError) as refused:
        manage.change(config_repo, SAM, SCW, users, **{key: [entry]})
    assert says in str(refused.value) and "cannot be added" in str(refused.value)
    assert config_repo.draft_head(SAM, SCW) == head


def test_a_viewer_may_not_change_them_and_the_form_offers_only_who_can_view(config_repo, users):
    _viewers_only(config_repo, "vera")
    with pytest.raises(PermissionDenied):
        manage.change(config_repo, VERA, SCW, users, add_subscriptions=[manage.subscription("report", "pdf", "1 week", ["vera"])])
    assert not config_repo.has_draft(VERA, SCW)
    offered = choices(config_repo.meta(SCW), users)
    assert offered == ["olivia", "sam", "vera", "group:analysts"]
    assert "zoe" not in offered and "nomail" not in offered


def test_an_outside_address_needs_the_owners_allow_list(config_repo, users):
    sub = manage.subscription("report", "html", "1 week", ["board@partner.example"])
    with pytest.raises(DeliveryError, match="policy.external_recipients does not allow it"):
        manage.change(config_repo, SAM, SCW, users, add_subscriptions=[sub])
    meta = _draft_meta(config_repo, OLIVIA)
    config_repo.save(OLIVIA, SCW, {"workspace": {**meta, "policy": {**meta["policy"], "external_recipients": ["@partner.example"]}}}, "Allow partner")
    publish.publish(config_repo, OLIVIA, SCW)
    config_repo.sync(SAM, SCW)
    sha, _ = manage.change(config_repo, SAM, SCW, users, add_subscriptions=[sub])
    assert sha


def test_a_dashboard_subscription_written_as_pdf_is_flagged_where_it_stands(tmp_path):
    folder = tmp_path / SCW
    shutil.copytree(ROOT / "workspaces" / SCW, folder)
    text = (folder / "workspace.yaml").read_text()
    (folder / "workspace.yaml").write_text(text.replace("send: report\n    format: pdf", "send: dashboard\n    format: pdf"))
    _, found = workspace.load(folder)
    (flag,) = [d for d in found if d.id == "subscription.format"]
    assert flag.level == "warning" and flag.field == "subscriptions[0].format" and flag.line == 15
    assert flag.message == "a dashboard goes as html or png, not pdf: it is sent as html"


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


@needs_chromium
def test_a_dashboard_sent_as_a_picture_arrives_as_one_png_of_the_recipients_dashboard(config_repo, users, smtp, tmp_path):
    inbox, port = smtp
    sub = manage.subscription("dashboard", "png", "1 week", ["vera"], {"site": "Brno"})
    manage.change(config_repo, SAM, SCW, users, add_subscriptions=[sub])
    publish.publish_branch(config_repo, OLIVIA, SCW, config_repo.branch_name(SAM, SCW))  # the owner publishes it, as Review does
    assert sub in config_repo.meta(SCW)["subscriptions"]
    path = config_repo.published_path(SCW)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DASHMEM_CACHE_DIR": str(tmp_path / "cache"), "DASHMEM_SMTP_HOST": "127.0.0.1"}
    env |= {"DASHMEM_SMTP_PORT": str(port), "DASHMEM_SMTP_TLS": "none", "DASHMEM_USERS": os.environ["DASHMEM_USERS"]}
    assert subprocess.run([sys.executable, "-m", "lib", "refresh", str(path)], cwd=ROOT, env=env, capture_output=True, timeout=120).returncode == 0
    sent = subprocess.run([sys.executable, "-m", "lib", "deliver", str(path), "--now"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert sent.returncode == 0, sent.stdout + sent.stderr
    assert "dashboard (png) to vera@example.com: sent" in sent.stdout
    (message,) = inbox.to("vera@example.com")
    (attachment,) = list(message.iter_attachments())
    assert attachment.get_content_type() == "image/png" and attachment.get_filename().endswith(".png")
    width, height = _png_size(attachment.get_content())
    assert width == 1280 and height > 800  # the whole dashboard, as tall as it is
