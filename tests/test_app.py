"""The Streamlit app through AppTest: real config repo, real pages."""
from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from .conftest import ROOT


@pytest.fixture
def app(tmp_path, monkeypatch):
    import streamlit as st

    monkeypatch.setenv("DASHMEM_CONFIG_REPO", str(tmp_path / "config-repo"))
    monkeypatch.setenv("DASHMEM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(ROOT)
    st.cache_resource.clear()
    st.cache_data.clear()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=30)
    return at


def test_workspaces_page_lists_demo_workspaces_and_their_memory(app, tmp_path):
    app.run()
    assert not app.exception, app.exception
    assert [s.value for s in app.subheader] == ["GDP explorer", "Supply chain weekly"]
    assert [s.value for s in app.success] == ["valid", "valid"]
    tab_labels = [t.label for t in app.tabs]
    assert tab_labels.count("Task specifications") == 2 and "Dashboard" in tab_labels
    codes = [c.value for c in app.code]
    assert any("Gates are always coloured the same way" in c for c in codes)
    assert (tmp_path / "config-repo" / ".git").is_dir()  # created on first run from the templates
