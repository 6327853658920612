"""Entry point: sign-in, the workspace picker, and the pages each role may see.

Pages live in app_pages/ (not pages/) and are registered with st.navigation on
every run, so no page is ever served without this file's sign-in running
first; a deep link opened while signed out shows the sign-in form.

Sign-in is a plain form checked with lib.roles.auth (bcrypt), failures slowed down per name and
per client address (lib.roles.throttle); a signed JWT cookie
(lib.roles.auth.session_token) signs the browser in again in new sessions. The
cookie is read from the request (st.context.cookies) and written by a line of
JavaScript in the page, never by a component: streamlit-authenticator's
cookie manager was an iframe component on every run whose value arrived
late and forced extra script runs, up to five per sign-in, each interrupting
the dashboard being drawn; with several sessions at once they piled up until
some never got past sign-in (issue #14, bench.app). The run that accepts the
password draws the page at once, with no sleep and no second run.
"""

from __future__ import annotations

import datetime as dt
import urllib.parse
from pathlib import Path

import streamlit as st

from app_pages import state, ui
from lib.core import settings
from lib.repo.configrepo import ConfigRepo
from lib.roles import auth
from lib.roles.access import OWNER, STEWARD

# A local icon file: a Material icon or an emoji favicon would be fetched from a CDN, and the app must work offline.
st.set_page_config(page_title="dashmem", page_icon=str(Path(__file__).with_name("app_icon.png")), layout="wide")
if settings.get("DASHMEM_RUN_LOG"):  # each script run's server-side time, for bench.app
    from lib.core import runlog

    runlog.install(settings.get("DASHMEM_RUN_LOG"))


@st.cache_resource(show_spinner="Opening the config repo…")
def config_repo(path: str, templates: str, remote: str | None) -> ConfigRepo:
    return ConfigRepo.open_or_create(Path(path), Path(templates), remote)


def sign_in_page() -> None:
    st.title("dashmem")
    st.caption("Shared, selective, persistent memory for dashboards built with Claude.")
    st.info("Demo users: **olivia** / olivia-demo (owner), **sam** / sam-demo (steward), **vera** / vera-demo (viewer).")


def signed_in_by_cookie(credentials: dict, key: str) -> bool:
    """A new session (a reload, a new tab) whose browser sent a valid sign-in cookie is signed in by it."""
    if st.session_state.get(state.SIGNED_OUT):  # the browser may still send the cookie this session was opened with
        return False
    name = auth.token_user(st.context.cookies.get(auth.COOKIE_NAME), key, credentials)
    if name:
        st.session_state[state.AUTH_STATUS], st.session_state[state.USERNAME] = True, name
    return name is not None


def sign_in_form(credentials: dict, key: str) -> bool:
    """The sign-in form; True when this run's submission signed the person in (the form is then gone)."""
    holder = st.empty()
    with holder.container():
        sign_in_page()
        with st.form("sign-in", clear_on_submit=True):  # signing out later shows an empty form
            st.subheader("Login")
            name = st.text_input("Username", autocomplete="off")
            password = st.text_input("Password", type="password", autocomplete="off")
            submitted = st.form_submit_button("Login")
    if not submitted:
        return False
    # Failures slow down the next tries of that name and of this address (lib/roles/throttle.py);
    # st.context.ip_address is the connection's peer, None on loopback.
    attempt = auth.try_sign_in(credentials, name, password, st.context.ip_address)
    if not attempt.ok:
        st.session_state[state.AUTH_STATUS] = False
        st.error(attempt.message)
        return False
    st.session_state[state.AUTH_STATUS], st.session_state[state.USERNAME] = True, name
    st.session_state[state.SIGN_IN_COOKIE] = auth.session_token(name, key)
    st.session_state.pop(state.SIGNED_OUT, None)
    holder.empty()
    return True


def write_cookie(value: str, expires: float, where=st.sidebar) -> None:
    """Set (or, expired, delete) the sign-in cookie in the browser: a script in the page, no iframe, no rerun.

    The value is a JWT (base64url and dots) or empty, so it needs no quoting.
    """
    when = dt.datetime.fromtimestamp(expires, dt.timezone.utc).strftime("%a, %d %b %Y %H:%M:%S GMT")
    with where:
        st.html(
            f"<script>document.cookie = '{auth.COOKIE_NAME}={value}; path=/; expires={when}; SameSite=Strict';</script>",
            unsafe_allow_javascript=True,
            width="content",
        )


credentials = cookie_key = None  # stay None only when the sign-in could not start (the message is shown)
with ui.user_errors("Could not start the sign-in") as caught:  # an AuthConfigError says what the operator should set
    credentials = auth.load_credentials()
    cookie_key = auth.cookie_key()
if caught.failed or credentials is None or cookie_key is None:
    st.stop()

repo = None
with ui.user_errors("Could not open the config repo") as caught:  # e.g. a shared remote that cannot be reached on first start
    repo = config_repo(str(settings.config_repo_path()), str(settings.templates_dir()), settings.get("DASHMEM_CONFIG_REMOTE"))
    # Several app servers: what another one published is served from here after this pull (lib.repo.replica).
    repo.pull_if_due(settings.get("DASHMEM_CONFIG_PULL_SECONDS"))
if caught.failed or repo is None:
    st.stop()
st.session_state[state.CONFIG_REPO] = repo

USE_PAGES = [
    ("app_pages/dashboard.py", "Dashboard", ":material/monitoring:"),
    ("app_pages/explore.py", "Explore", ":material/query_stats:"),
    ("app_pages/report.py", "Report", ":material/description:"),
    ("app_pages/deliveries.py", "Deliveries", ":material/outgoing_mail:"),
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


if not st.session_state.get(state.AUTH_STATUS) and not signed_in_by_cookie(credentials, cookie_key):
    if not sign_in_form(credentials, cookie_key):
        if st.session_state.get(state.SIGNED_OUT):
            write_cookie("", 0, st.container())  # signed out: the browser forgets the cookie (no sidebar on this page)
        # Every page is registered, so a deep link keeps its URL, but none runs:
        # the sign-in form shows instead, and signing in opens the page the link named.
        st.navigation(page_list(USE_PAGES + BUILD_PAGES), position="hidden")
        st.stop()

user = auth.user_for(st.session_state[state.USERNAME], credentials)
st.session_state[state.USER] = user

metas = st.session_state[state.METAS] = repo.workspaces_for(user)  # the pages read them from here this run
visible = auth.visible(user, metas)
if state.SIGN_IN_COOKIE in st.session_state:
    # Drawn on every run of the session, so no rerun can drop it unwritten, and first, so the browser
    # has the cookie before the page shows signed in (a link opened at once in a new tab signs in by it).
    write_cookie(*st.session_state[state.SIGN_IN_COOKIE])
with st.sidebar:
    st.markdown(f"**{user.display_name or user.name}** · {user.app_role}")
    if visible:
        # The workspace is in the URL (?ws=...), so links and reloads open the same one.
        current = st.session_state.get(state.SLUG) or st.query_params.get("ws")
        # Keyed, so the box stays one widget whichever workspace is open (unkeyed, its identity followed
        # the open one, and the next choice went to a box the browser no longer showed: every other
        # switch was lost). A choice sets SLUG in its callback; Workspaces' Open and Create set SLUG too.
        wanted = current if current in visible else visible[0]  # a workspace gone (or no longer shared) opens the first
        if st.session_state.get(state.WORKSPACE_PICKER) != wanted:
            st.session_state[state.WORKSPACE_PICKER] = wanted
        st.session_state[state.SLUG] = st.selectbox(
            "Workspace",
            visible,
            key=state.WORKSPACE_PICKER,
            on_change=lambda: st.session_state.update({state.SLUG: st.session_state[state.WORKSPACE_PICKER]}),
            format_func=ui.workspace_names(metas).__getitem__,
        )
        st.query_params["ws"] = st.session_state[state.SLUG]
    else:
        st.session_state[state.SLUG] = None
    # Drafts their stewards proposed, in the workspaces this person owns: they wait on Review (lib.repo.proposals).
    proposed = {slug: len(branches) for slug, branches in repo.proposals_for(user).items() if slug in visible}
    if proposed:
        total = sum(proposed.values())
        st.warning(
            f"{total} proposed draft{'s wait' if total != 1 else ' waits'} for your review (open Review): "
            + ", ".join(f"{ui.workspace_names(metas)[slug]} ({n})" for slug, n in sorted(proposed.items()))
        )
    if st.button("Sign out", key="sign-out"):
        for key in (state.AUTH_STATUS, state.USERNAME, state.SIGN_IN_COOKIE):
            st.session_state.pop(key, None)
        st.session_state[state.SIGNED_OUT] = True
        st.rerun()

pages = {"Use": page_list(USE_PAGES)}
if user.app_role in (STEWARD, OWNER):
    pages["Build"] = page_list(BUILD_PAGES)
else:
    # A link to a page this role does not have opens the dashboard; say why instead of redirecting without a word.
    asked = urllib.parse.urlparse(st.context.url or "").path.rstrip("/").rsplit("/", 1)[-1]
    refused = {Path(path).stem: title for path, title, _ in BUILD_PAGES}.get(asked)
    if refused:
        st.warning(
            f"The **{refused}** page is for stewards and owners, and you are signed in as a viewer, so the dashboard "
            "opened instead. Ask a workspace owner if you need to edit this workspace."
        )
# Nobody sees a traceback: what a page does not catch itself is shown here, as the pages show theirs
# (st.rerun, st.stop and st.switch_page are BaseExceptions and pass through).
with ui.user_errors():
    st.navigation(pages).run()
