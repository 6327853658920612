"""Every `st.session_state` key the app and its pages share, in one place.

A key is a constant here (or a function, for keys kept per workspace), with
what it holds and who sets it. Session state lives in one browser session
only; nothing here is ever written to the config repo. Widget keys (the
`key=` of one widget, read only by Streamlit) stay beside their widget.
"""

from __future__ import annotations

# --- who is signed in, and which workspace ----------------------------------------------------------------
AUTH_STATUS = "authentication_status"  # True/False/None: set by app.py's sign-in (the form or the cookie)
USERNAME = "username"  # the signed-in user name: set by app.py's sign-in; app.py turns it into USER
SIGN_IN_COOKIE = "sign_in_cookie"  # (cookie value, expiry): set by app.py when the form signs in; app.py writes it to the browser
SIGNED_OUT = "signed_out"  # True after Sign out: app.py then ignores (and deletes) the cookie this session was opened with
USER = "user"  # lib.roles.access.User of the signed-in person: set by app.py on every run; ui.context reads it
CONFIG_REPO = "config_repo"  # the lib.repo.configrepo.ConfigRepo: set by app.py on every run; ui.context and Workspaces read it
METAS = "metas"  # {slug: workspace.yaml meta} the user may see, read once per run by app.py; the pages read it
SLUG = "slug"  # the open workspace's slug (or None): set by app.py's picker, and by Workspaces (Open, Create)
WORKSPACE_PICKER = "workspace_picker"  # the sidebar's Workspace box, kept in step with SLUG by app.py

# --- Dashboard -------------------------------------------------------------------------------------------
REFRESH_REPORT = "refresh_report"  # the last lib.data.refresh.RefreshReport: set by Dashboard (Refresh, first load)
SWAPS = "swaps"  # lib.data.refresh.OwnFiles: a viewer's own files in place of tables, set by Dashboard (Report says it does not use them); this session only
EXPORT_HTML = "export_html"  # ((slug, data version, filters), html text): the prepared export, set by Dashboard

# --- Report ----------------------------------------------------------------------------------------------
REPORT_EXPORT = "report_export"  # ((slug, data version, parameters), {"html": bytes, "pdf": bytes}): set by Report's export buttons

# --- Chat ------------------------------------------------------------------------------------------------
CHAT_MODE = "chat_mode"  # "edit" or "query": set by Chat's mode switch, and by Dashboard's Regenerate ("edit")
CHAT_TRANSCRIPT = "chat_transcript"  # {(slug, mode): [turns]}: what Chat shows; this browser session only, never saved
CHAT_USAGE = "chat_usage"  # token counts and calls of this browser session: added up by Chat


def chat_outcome(slug: str) -> str:
    """The proposed change not saved yet (a session's outcome or an auto-draft): set by Chat, cleared on save or discard."""
    return f"chat_outcome:{slug}"


def chat_prefill(slug: str) -> str:
    """The Regenerate request after a refresh found data that no longer fits: set by Dashboard, used up by Chat."""
    return f"chat_prefill:{slug}"


def chat_regenerate_kind(slug: str) -> str:
    """What the Regenerate request is for, "dashboard" or "report": set with `chat_prefill`, read by Chat."""
    return f"chat_regenerate_kind:{slug}"


# --- one-shot success messages, shown after the rerun that follows a change -----------------------------
HISTORY_DONE = "history_done"  # set by History (revert, undo); popped and shown by History
REVIEW_DONE = "review_done"  # set by Review (publish, reject, remote saved); popped and shown by Review
SOURCES_DONE = "sources_done"  # set by Sources (a source added, loaded and profiled); popped and shown by Sources
SOURCES_PROBLEM = "sources_problem"  # set by Sources (a source added whose data could not be loaded or profiled); popped and shown by Sources
RELATIONSHIP_DONE = "relationship_done"  # set by Sources (a join confirmed, rejected or removed); popped and shown by Sources
SPECS_SAVED = "specs_saved"  # set by Specs (a save); popped and shown by Specs
PROFILE_UPDATED = "profile_updated"  # set by Dashboard (Update profile); popped and shown by Dashboard
DELIVERIES_DONE = "deliveries_done"  # set by Deliveries (a subscription or alert changed on the draft); popped and shown by Deliveries
WORKSPACES_DONE = "workspaces_done"  # set by Workspaces (created); popped and shown by Workspaces

EXPLORE_SAVED = "explore_saved"  # set by Explore (a question saved to the draft dashboard); popped and shown by Explore

# --- Review, Sources, Specs ------------------------------------------------------------------------------
CONFIRM_PUBLISH = "confirm_publish"  # the branch whose Publish was clicked and awaits "Yes, publish": set by Review
ADD_SOURCE_FORM = "add_source_form"  # a counter in the add-source form's key, so each addition gets a fresh form: Sources


def explain_popover(slug: str, component_id: str) -> str:
    """Whether a component's "Explain" popover is open (Streamlit keeps it): Dashboard works out the explanation only then."""
    return f"explain:{slug}:{component_id}"


def rows_popover(slug: str, component_id: str) -> str:
    """Whether a component's "Show rows" popover is open: Dashboard reads the rows behind it only then."""
    return f"rows:{slug}:{component_id}"


def filter_widget(slug: str, filter_id: str) -> str:
    """A filter bar widget's value: set by its widget on Dashboard, and by a chart's cross-filter click or Clear selection."""
    return f"f_{slug}_{filter_id}"


def explore_filters(slug: str, table: str) -> str:
    """The ids of the filter rows Explore shows for a table: added and removed by Explore's buttons."""
    return f"explore_filters:{slug}:{table}"


def sync_conflict(slug: str) -> str:
    """The message of an "Update from published" that conflicted, until the person picks a side: set by Review."""
    return f"sync_conflict:{slug}"


def dashboard_candidate(slug: str) -> str:
    """The dashboard.yaml text being checked in Specs' editor, until saved or discarded: set by Specs."""
    return f"dashboard_candidate:{slug}"


def first_load_failed(path: object, sources_text: str) -> str:
    """The RefreshReport of a first load that failed for this draft/published path and these sources: set by ui.first_load."""
    return f"first_load_failed:{path}:{sources_text}"
