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


def _submit(at, label: str, index: int = 0):
    [b for b in at.button if b.label == label][index].click().run()
    assert not at.exception
    return at


def test_a_steward_adds_a_subscription_and_an_alert_in_the_forms_and_removes_them_again(env):
    at = on_page(signed_in("sam"), "app_pages/deliveries.py")
    assert "Change subscriptions and alerts" in page_text(at)
    at.selectbox(key="deliveries_send").set_value("the dashboard as a PNG picture")
    at.text_input(key="deliveries_every").input("1 day")
    at.multiselect(key="deliveries_sub_to").set_value(["vera", "group:analysts"])
    at.text_input(key="deliveries_params").input("site=Brno")
    _submit(at, "Add to my draft", 0)
    text = page_text(at)
    assert "Saved to your draft: subscription added: dashboard (png, site=Brno) every 1 day to vera, group:analysts" in text, text
    repo = at.session_state["config_repo"]
    sam = User("sam", app_role="steward")
    draft = workspace.load(repo.draft(sam, SLUG).workspace_path)[0].data["workspace"]
    assert draft["subscriptions"][-1] == {"to": ["vera", "group:analysts"], "send": "dashboard", "format": "png", "every": "1 day", "params": {"site": "Brno"}}
    published = workspace.load(repo.published_path(SLUG))[0].data["workspace"]
    assert len(published["subscriptions"]) == 1  # it counts once an owner publishes it

    at.selectbox(key="deliveries_kpi").set_value("kpi_volume")
    at.text_input(key="deliveries_when").input("< 100000")
    at.selectbox(key="deliveries_per").set_value("site")
    at.multiselect(key="deliveries_alert_to").set_value(["sam"])
    _submit(at, "Add to my draft", 1)
    assert "alert added: kpi_volume < 100000 at each site to sam" in page_text(at)

    # Someone who cannot receive it is refused in words, and nothing is saved.
    head = repo.draft_head(sam, SLUG)
    at.text_input(key="deliveries_sub_others").input("ceo@elsewhere.org")
    _submit(at, "Add to my draft", 0)
    assert "policy.external_recipients does not allow it" in page_text(at) and repo.draft_head(sam, SLUG) == head

    at.multiselect(key="deliveries_gone_subs").set_value([1])
    at.multiselect(key="deliveries_gone_alerts").set_value([1])
    _submit(at, "Remove from my draft")
    assert "subscription removed" in page_text(at) and "alert removed" in page_text(at)
    draft = workspace.load(repo.draft(sam, SLUG).workspace_path)[0].data["workspace"]
    assert len(draft["subscriptions"]) == 1 and len(draft["alerts"]) == 1


def test_a_viewer_sees_no_forms(env):
    at = on_page(signed_in("vera"), "app_pages/deliveries.py")
    assert "Change subscriptions and alerts" not in page_text(at) and not [b for b in at.button if b.label == "Add to my draft"]
