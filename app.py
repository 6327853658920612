"""Entry point: sign-in, the workspace picker, and the pages each role may see.

Pages live in app_pages/ (not pages/) and are registered with st.navigation on
every run, so no page is ever served without this file's sign-in running
first; a deep link opened while signed out shows the sign-in form.
"""
from __future__ import annotations

import logging
import secrets
import time
import urllib.parse
from pathlib import Path

import streamlit as st
import streamlit_authenticator as stauth

from lib import auth, settings
from lib.access import OWNER, STEWARD
from lib.configrepo import ConfigRepo

# A local icon file: a Material icon or an emoji favicon would be fetched from a CDN, and the app must work offline.
st.set_page_config(page_title="dashmem", page_icon=str(Path(__file__).with_name("app_icon.png")), layout="wide")
COOKIE_SETTLE_S = 0.8
log = logging.getLogger("dashmem.app")


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


if not st.session_state.get("authentication_status"):
    # Every page is registered, so a deep link keeps its URL, but none runs:
    # the sign-in form shows instead, and after signing in the rerun opens the page the link named.
    st.navigation(page_list(USE_PAGES + BUILD_PAGES), position="hidden")
    sign_in_page()
    authenticator.login(location="main", key="sign-in")
    if st.session_state.get("authentication_status") is False:
        st.error("Wrong user name or password.")
    if st.session_state.get("authentication_status"):
        time.sleep(COOKIE_SETTLE_S)  # the browser stores the sign-in cookie before the rerun replaces the page
        st.rerun()
    st.stop()

user = auth.user_for(st.session_state["username"], credentials)
st.session_state["user"] = user

metas = st.session_state["metas"] = repo.workspaces_for(user)  # the pages read them from here this run
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
try:
    st.navigation(pages).run()
except Exception:  # st.rerun, st.stop and st.switch_page are BaseExceptions and pass through
    # Nobody sees a traceback: a plain message here, the details in the server log under the same reference.
    reference = f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
    log.exception("page failed (reference %s)", reference)
    st.error(f"Something went wrong on this page. Your saved work is not affected. Reload the page to try again; "
             f"if it keeps happening, tell the app's operator the reference **{reference}** (the details are in the server log).")
