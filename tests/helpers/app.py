"""The Streamlit app through AppTest (the `env` fixture in tests/conftest.py gives it its own config repo and cache)."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from . import ROOT


def signed_in(user: str, slug: str = "supply-chain-weekly") -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.session_state["authentication_status"] = True
    at.session_state["username"] = user
    at.session_state["name"] = user
    at.session_state["slug"] = slug
    at.run()
    assert not at.exception, at.exception
    return at


def on_page(at: AppTest, page: str) -> AppTest:
    at.switch_page(page)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at
