"""Entry point: sign-in, the workspace picker, and the pages each role may see.

Pages live in app_pages/ (not pages/) and are registered with st.navigation on
every run, so no page is ever served without this file's sign-in running
first; a deep link opened while signed out shows the sign-in form.
"""
from __future__ import annotations

import time
import urllib.parse
from pathlib import Path

import streamlit as st
import streamlit_authenticator as stauth

from app_pages import state, ui
from lib import auth, settings
from lib.access import OWNER, STEWARD
from lib.configrepo import ConfigRepo

# A local icon file: a Material icon or an emoji favicon would be fetched from a CDN, and the app must work offline.
st.set_page_config(page_title="dashmem", page_icon=str(Path(__file__).with_name("app_icon.png")), layout="wide")
COOKIE_SETTLE_S = 0.8


@st.cache_resource(show_spinner="Opening the config repo…")
def config_repo(path: str, templates: str) -> ConfigRepo:
    return ConfigRepo.open_or_create(Path(path), Path(templates))


def sign_in_page() -> None:
    st.title("dashmem")
    st.caption("Shared, selective, persistent memory for dashboards built with Claude.")
    st.info("Demo users: **olivia** / olivia-demo (owner), **sam** / sam-demo (steward), **vera** / vera-demo (viewer).")


credentials = authenticator = None  # stay None only when the sign-in could not start (the message is shown)
with ui.user_errors("Could not start the sign-in") as caught:  # an AuthConfigError says what the operator should set
    credentials = auth.load_credentials()
    authenticator = stauth.Authenticate(credentials, "dashmem_auth", auth.cookie_key(), 7, auto_hash=False,
                                        login_sleep_time=0)  # pyright: ignore[reportArgumentType]  # the stub says Dict; the code takes seconds
if caught.failed or credentials is None or authenticator is None:
    st.stop()

repo = config_repo(str(settings.config_repo_path()), str(settings.templates_dir()))
st.session_state[state.CONFIG_REPO] = repo

USE_PAGES = [
    ("app_pages/dashboard.py", "Dashboard", ":material/monitoring:"),
    ("app_pages/chat.py", "Chat", ":material/chat:"),
    ("app_pages/workspaces.py", "Workspaces", ":material/folder_open:"),
    ("app_pages/history.py", "History", ":material/history:"),
]
BUILD_PAGES = [
    ("app_pages/sources.py", "Sources", ":material/database:"),
    ("app_pages/specs.py", "Specs", ":material/tune:"),
    ("app_pages/review.py", "Review", ":material/rate_review:"),
]


def page_list(entries: list[tuple[str, str, str]]) -> list:
    return [st.Page(path, title=title, icon=icon, default=(path == USE_PAGES[0][0])) for path, title, icon in entries]


if not st.session_state.get(state.AUTH_STATUS):
    # Every page is registered, so a deep link keeps its URL, but none runs:
    # the sign-in form shows instead, and after signing in the rerun opens the page the link named.
    st.navigation(page_list(USE_PAGES + BUILD_PAGES), position="hidden")
    sign_in_page()
    authenticator.login(location="main", key="sign-in")
    if st.session_state.get(state.AUTH_STATUS) is False:
        st.error("Wrong user name or password.")
    if st.session_state.get(state.AUTH_STATUS):
        time.sleep(COOKIE_SETTLE_S)  # the browser stores the sign-in cookie before the rerun replaces the page
        st.rerun()
    st.stop()

user = auth.user_for(st.session_state[state.USERNAME], credentials)
st.session_state[state.USER] = user

metas = st.session_state[state.METAS] = repo.workspaces_for(user)  # the pages read them from here this run
visible = auth.visible(user, metas)
with st.sidebar:
    st.markdown(f"**{user.display_name or user.name}** · {user.app_role}")
    if visible:
        # The workspace is in the URL (?ws=...), so links and reloads open the same one.
        current = st.session_state.get(state.SLUG) or st.query_params.get("ws")
        index = visible.index(current) if current in visible else 0
        st.session_state[state.SLUG] = st.selectbox("Workspace", visible, index=index, format_func=lambda s: metas[s].get("name", s))
        st.query_params["ws"] = st.session_state[state.SLUG]
    else:
        st.session_state[state.SLUG] = None
    authenticator.logout("Sign out", location="sidebar", key="sign-out")

pages = {"Use": page_list(USE_PAGES)}
if user.app_role in (STEWARD, OWNER):
    pages["Build"] = page_list(BUILD_PAGES)
else:
    # A link to a page this role does not have opens the dashboard; say why instead of redirecting without a word.
    asked = urllib.parse.urlparse(st.context.url or "").path.rstrip("/").rsplit("/", 1)[-1]
    refused = {Path(path).stem: title for path, title, _ in BUILD_PAGES}.get(asked)
    if refused:
        st.warning(f"The **{refused}** page is for stewards and owners, and you are signed in as a viewer, so the dashboard "
                   "opened instead. Ask a workspace owner if you need to edit this workspace.")
# Nobody sees a traceback: what a page does not catch itself is shown here, as the pages show theirs
# (st.rerun, st.stop and st.switch_page are BaseExceptions and pass through).
with ui.user_errors():
    st.navigation(pages).run()
