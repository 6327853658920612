"""The Deliveries page (issue #36) through AppTest: a viewer sees the demo workspace's subscription and alert,
asks for the report and gets it at the next send, then asks not to; the choice is theirs, not workspace.yaml's."""

from __future__ import annotations

from lib.delivery import run as delivery
from lib.memory import workspace
from lib.roles import auth
from lib.roles.access import User
from tests.helpers.app import on_page, page_text, signed_in

SLUG = "supply-chain-weekly"


def test_a_viewer_subscribes_and_unsubscribes_and_the_workspace_does_not_change(env):
    at = on_page(signed_in("vera"), "app_pages/deliveries.py")
    text = page_text(at)
    assert "report (pdf) every 1 week to olivia" in text and "kpi_attainment < 85% to olivia" in text
    assert "Sent lately" not in text  # stewards and owners only
    (toggle,) = at.toggle
    assert toggle.label == "Send it to me" and toggle.value is False
    repo = at.session_state["config_repo"]
    path = repo.published_path(SLUG)
    meta = workspace.load(path)[0].data["workspace"]
    credentials = auth.load_credentials()
    vera = User("vera")
    before = (path / "workspace.yaml").read_bytes()
    toggle.set_value(True).run()
    assert not at.exception
    assert [o.mine for o in delivery.offers(path, meta, vera, credentials)] == [True]
    assert at.toggle[0].value is True
    at.toggle[0].set_value(False).run()
    assert [o.mine for o in delivery.offers(path, meta, vera, credentials)] == [False]
    assert (path / "workspace.yaml").read_bytes() == before


def test_olivia_who_is_named_may_unsubscribe_and_a_steward_sees_what_was_sent(env):
    at = on_page(signed_in("olivia"), "app_pages/deliveries.py")
    assert at.toggle[0].value is True
    at.toggle[0].set_value(False).run()
    repo = at.session_state["config_repo"]
    path = repo.published_path(SLUG)
    meta = workspace.load(path)[0].data["workspace"]
    assert [o.mine for o in delivery.offers(path, meta, User("olivia", app_role="owner"), auth.load_credentials())] == [False]
    sam = on_page(signed_in("sam"), "app_pages/deliveries.py")
    assert "Sent lately" in page_text(sam) and "Nothing sent yet" in page_text(sam)


def test_the_dashboard_shows_a_kpis_alert_and_the_report_its_subscription(env):
    at = signed_in("vera")
    assert "Alert: kpi_attainment < 85% to olivia" in page_text(at)
    report = page_text(on_page(at, "app_pages/report.py"))
    assert "By e-mail: report (pdf) every 1 week to olivia" in report
