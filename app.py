"""Entry point: opens the config repo and registers the pages with st.navigation.

Pages live in app_pages/ (not pages/) so that Streamlit never serves a page
without running this file first.
"""
from __future__ import annotations

import streamlit as st

from lib import settings
from lib.configrepo import ConfigRepo

st.set_page_config(page_title="dashmem", page_icon=":bar_chart:", layout="wide")


@st.cache_resource(show_spinner="Opening the config repo…")
def config_repo(path: str, templates: str) -> ConfigRepo:
    return ConfigRepo.open_or_create(path, templates)


st.session_state["config_repo"] = config_repo(str(settings.config_repo_path()), str(settings.templates_dir()))

pages = [
    st.Page("app_pages/workspaces.py", title="Workspaces", icon=":material/folder_open:", default=True),
]
st.navigation(pages).run()
