"""Row-level access on the pages (issue #34), through AppTest: a viewer held to Brno's rows sees Brno's figures
on the Dashboard, the Report and Explore and is told which rows those are; a viewer without the attribute is
told why they see none; the owner sees every site."""

from __future__ import annotations

import csv
import json

import pytest
import yaml

from lib.memory import workspace
from lib.ops import publish
from lib.roles.access import User
from tests.helpers.app import on_page, page_text, signed_in

from ..conftest import ROOT, WORKSPACES

SLUG = "supply-chain-weekly"
OLIVIA = User("olivia", app_role="owner")


@pytest.fixture
def filtered(env, monkeypatch):
    """The demo users plus `attributes: {site: [Brno]}` for vera and nico, a viewer without it; the published
    supply-chain workspace with gates filtered by site. Returns the rows of gates.csv."""
    users = yaml.safe_load((ROOT / "demo" / "users.yaml").read_text())
    users["usernames"]["vera"]["attributes"] = {"site": ["Brno"]}
    users["usernames"]["nico"] = {**users["usernames"]["vera"], "name": "Nico Viewer", "email": "nico@example.com"}
    del users["usernames"]["nico"]["attributes"]
    path = env / "users.yaml"
    path.write_text(yaml.safe_dump(users))
    monkeypatch.setenv("DASHMEM_USERS", str(path))
    at = signed_in("olivia")
    repo = at.session_state["config_repo"]
    meta = workspace.load(repo.draft(OLIVIA, SLUG).workspace_path)[0].data["workspace"]
    repo.save(OLIVIA, SLUG, {"workspace": {**meta, "row_filters": [{"table": "gates", "column": "site", "attribute": "site"}]}}, "Row filters")
    publish.publish(repo, OLIVIA, SLUG)
    with open(WORKSPACES / SLUG / "data" / "gates.csv") as fh:
        return list(csv.DictReader(fh))


def units(rows, site=None) -> str:
    return f"{sum(int(r['actual']) for r in rows if site is None or r['site'] == site):,}"


def test_a_viewer_held_to_brno_sees_brnos_figures_on_every_page_and_is_told_so(filtered):
    rows = filtered
    at = signed_in("vera")
    assert {m.label: m.value for m in at.metric}["Units through the gates"] == units(rows, "Brno")
    text = page_text(at)
    assert "Your rows only: gates whose site is Brno." in text
    assert "Porto" not in text and "Lyon" not in text
    for page in ("app_pages/report.py", "app_pages/explore.py"):
        text = page_text(on_page(at, page))
        assert "Your rows only: gates whose site is Brno." in text and "Porto" not in text and "Lyon" not in text, page


def test_a_viewer_without_the_attribute_is_told_why_and_the_owner_sees_every_site(filtered):
    rows = filtered
    nico = signed_in("nico")
    assert "nico sees no rows of gates" in page_text(nico) and "ask an owner" in page_text(nico)
    assert "Porto" not in page_text(nico) and not nico.exception
    olivia = signed_in("olivia")
    assert {m.label: m.value for m in olivia.metric}["Units through the gates"] == units(rows)
    assert "Your rows only" not in page_text(olivia)


def test_a_viewer_held_to_brno_asks_claude_and_the_model_gets_brnos_profile_only(filtered, claude):
    from lib.chat.model import message, text_block

    from ..helpers.model import MODEL

    claude.replies.append(message(text_block("Brno's gates are on target."), usage={"input_tokens": 900, "output_tokens": 8}, model=MODEL))
    at = on_page(signed_in("vera"), "app_pages/chat.py")
    at.chat_input[0].set_value("Which gate is weakest?").run()
    assert not at.exception and "Brno's gates are on target." in page_text(at)
    (request,) = claude.bodies
    sent = json.dumps(request)
    assert "Brno" in sent and "Porto" not in sent and "Lyon" not in sent
    assert f"table gates ({sum(r['site'] == 'Brno' for r in filtered)} rows)" in sent
