"""Entry point: sign-in, the workspace picker, and the pages each role may see.

Pages live in app_pages/ (not pages/) and are registered with st.navigation on
every run, so no page is ever served without this file's sign-in running
first; a deep link opened while signed out shows the sign-in form.
"""
from __future__ import annotations

import time

import streamlit as st
import streamlit_authenticator as stauth

from lib import auth, settings
from lib.access import OWNER, STEWARD
from lib.configrepo import ConfigRepo

st.set_page_config(page_title="dashmem", page_icon=":material/dashboard:", layout="wide")
COOKIE_SETTLE_S = 0.8


@st.cache_resource(show_spinner="Opening the config repo…")
def config_repo(path: str, templates: str) -> ConfigRepo:
    return ConfigRepo.open_or_create(path, templates)


def sign_in_page() -> None:
    st.title("dashmem")
    st.caption("Shared, selective, persistent memory for dashboards built with Claude.")
    st.info("Demo users: **olivia** / olivia-demo (owner), **sam** / sam-demo (steward), **vera** / vera-demo (viewer).")


try:
    credentials = auth.load_credentials()
    authenticator = stauth.Authenticate(credentials, "dashmem_auth", auth.cookie_key(), 7, auto_hash=False, login_sleep_time=0)
except auth.AuthConfigError as exc:
    st.error(str(exc))
    st.stop()

repo = config_repo(str(settings.config_repo_path()), str(settings.templates_dir()))
st.session_state["config_repo"] = repo

PAGE_PATHS = ["dashboard", "chat", "workspaces", "history", "sources", "specs", "review"]

if not st.session_state.get("authentication_status"):
    # Every page's URL leads to the sign-in form while signed out, so a deep link
    # asks for credentials and then opens the page it names.
    st.navigation([st.Page(sign_in_page, title="Sign in", url_path=p, default=(p == "dashboard")) for p in PAGE_PATHS],
                  position="hidden").run()
    authenticator.login(location="main", key="sign-in")
    if st.session_state.get("authentication_status") is False:
        st.error("Wrong user name or password.")
    if st.session_state.get("authentication_status"):
        time.sleep(COOKIE_SETTLE_S)  # the browser stores the sign-in cookie before the rerun replaces the page
        st.rerun()
    st.stop()

user = auth.user_for(st.session_state["username"], credentials)
st.session_state["user"] = user

metas = repo.workspaces_for(user)
visible = auth.visible(user, metas)
with st.sidebar:
    st.markdown(f"**{user.display_name or user.name}** · {user.app_role}")
    if visible:
        # The workspace is in the URL (?ws=...), so links and reloads open the same one.
        current = st.session_state.get("slug") or st.query_params.get("ws")
        index = visible.index(current) if current in visible else 0
        st.session_state["slug"] = st.selectbox("Workspace", visible, index=index, format_func=lambda s: metas[s].get("name", s))
        st.query_params["ws"] = st.session_state["slug"]
    else:
        st.session_state["slug"] = None
    authenticator.logout("Sign out", location="sidebar", key="sign-out")

pages = {
    "Use": [
        st.Page("app_pages/dashboard.py", title="Dashboard", icon=":material/monitoring:", default=True),
        st.Page("app_pages/chat.py", title="Chat", icon=":material/chat:"),
        st.Page("app_pages/workspaces.py", title="Workspaces", icon=":material/folder_open:"),
        st.Page("app_pages/history.py", title="History", icon=":material/history:"),
    ],
}
if user.app_role in (STEWARD, OWNER):
    pages["Build"] = [
        st.Page("app_pages/sources.py", title="Sources", icon=":material/database:"),
        st.Page("app_pages/specs.py", title="Specs", icon=":material/tune:"),
        st.Page("app_pages/review.py", title="Review", icon=":material/rate_review:"),
    ]
st.navigation(pages).run()
