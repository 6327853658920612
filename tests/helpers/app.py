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


# The class names DuckDB's messages start with: no page may show one (lib/data/sql_errors.py translates them).
ENGINE_TEXT = ("Binder Error", "Catalog Error", "Parser Error", "Conversion Error", "Invalid Input Error", "Out of Range Error")


def page_text(at: AppTest) -> str:
    """Everything the page shows as text, main and sidebar: every string of every element (messages, markdown,
    captions, labels, code), and the bytes of its data (a dataframe's cells travel as Arrow), read as text."""
    out: list[str] = []

    def strings(message) -> None:
        for field, value in message.ListFields():
            values = value if field.is_repeated else [value]
            for item in values:
                if field.type == field.TYPE_MESSAGE:
                    strings(item)
                elif field.type == field.TYPE_STRING:
                    out.append(item)
                elif field.type == field.TYPE_BYTES:
                    out.append(item.decode("utf-8", "replace"))

    def walk(node) -> None:
        proto = getattr(node, "proto", None)
        if proto is not None:
            strings(proto)
        for child in (getattr(node, "children", None) or {}).values():
            walk(child)

    walk(at.main)
    walk(at.sidebar)
    out += [e.message for e in at.exception]
    return "\n".join(out)


def engine_text_in(at: AppTest) -> list[str]:
    """The engine's class names the page shows (none, when every failure reads as a sentence)."""
    text = page_text(at)
    return [name for name in ENGINE_TEXT if name in text]
