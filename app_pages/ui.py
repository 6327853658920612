"""Shared by the pages: who is signed in, which workspace, the role checks, and how errors are shown.

Not a page itself (app.py registers only the page files). Permission checks
here only decide what to show; lib/ enforces them again on every write.

Errors: a page wraps each action in `with ui.user_errors("Could not publish"):`.
A lib.core.errors.DashmemError shows its own message (written for the person); any
other exception shows a plain generic message with a reference, and its
traceback goes to the server log under that reference. Nobody sees a traceback.
"""

from __future__ import annotations

import logging
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, Mapping

import streamlit as st

from app_pages import state
from lib.chat.agent import regenerate_message
from lib.chat.model import api_key_available
from lib.core.diagnostics import ERROR, ValidationFailed
from lib.core.errors import DashmemError
from lib.data import refresh as refreshing
from lib.data.engine import scope_for
from lib.data.snapshots import Warehouse
from lib.memory import rule_review, workspace
from lib.memory.kinds.workspace import alert_words, subscription_words
from lib.memory.semantic_diff import ATTENTION, CATEGORIES
from lib.repo.configrepo import ConfigRepo
from lib.roles import access
from lib.roles.access import User

if TYPE_CHECKING:
    from lib.data.refresh import RefreshReport

log = logging.getLogger("dashmem.app")


def report_unexpected(exc: BaseException, action: str | None = None, *, out: Any = None) -> str:
    """Show the generic message for an error nobody wrote a message for, log its traceback; returns the text shown.

    The message names a reference that is also in the log line, so an operator
    finds the details; it never holds the exception's text or type.
    """
    reference = f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
    log.error("%s failed (reference %s)", action or "page", reference, exc_info=(type(exc), exc, exc.__traceback__))
    lead = f"{action}. Something went wrong" if action else "Something went wrong on this page"
    text = (
        f"{lead}. Your saved work is not affected. Reload the page to try again; if it keeps happening, tell the "
        f"app's operator the reference **{reference}** (the details are in the server log)."
    )
    (out or st).error(text)
    return text


class user_errors:  # a class, named like the context managers of contextlib
    """A context manager that shows what went wrong in an action, so no exception reaches the person as a traceback.

    `with ui.user_errors("Could not publish") as caught: ...`:
    - a DashmemError shows its message as it is (`st.error(str(exc))`) and is logged at INFO;
      with `invalid="Not saved: ..."`, a ValidationFailed shows that line and then each finding;
    - any other Exception shows the generic message (led by `action`) and its traceback is logged;
    - st.rerun, st.stop and st.switch_page (BaseExceptions) pass through untouched.
    Either error is swallowed: `caught.failed` / `caught.error` tell the code after the block.
    `out` replaces the `st` module that shows the message (tests pass a fake).
    """

    def __init__(self, action: str | None = None, *, invalid: str | None = None, out: Any = None):
        self.action = action
        self.invalid = invalid
        self.out = out
        self.error: Exception | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None

    def __enter__(self) -> "user_errors":
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> bool:
        if exc is None or not isinstance(exc, Exception):
            return False
        self.error = exc
        out = self.out or st
        if isinstance(exc, DashmemError):
            log.info("%s: %s: %s", self.action or "page", type(exc).__name__, exc)
            if self.invalid is not None and isinstance(exc, ValidationFailed):
                out.error(self.invalid)
                show_diagnostics(exc.diagnostics, out=out)
            else:
                out.error(exc.user_message)
        else:
            report_unexpected(exc, self.action, out=out)
        return True


@dataclass
class Context:
    user: User
    repo: ConfigRepo
    slug: str
    meta: dict[str, Any]
    _draft_path: Path | None = field(default=None, repr=False)

    @property
    def role(self) -> str | None:
        return access.role_of(self.user, self.meta)

    def can(self, action: str) -> bool:
        return access.can(self.user, action, self.meta)

    @property
    def is_published(self) -> bool:
        return self.repo.is_published(self.slug)

    @property
    def published_path(self) -> Path:
        """The published workspace; for one not published yet, the user's draft of it, or (an owner
        reviewing a steward's new workspace) its creator's draft, never a new draft that would lack it."""
        return self.repo.published_path(self.slug) if self.is_published else self.repo.view_path(self.user, self.slug)

    def draft_path(self) -> Path:
        """The user's draft worktree of this workspace, created on first use (once per page run)."""
        if self._draft_path is None:
            self._draft_path = self.repo.draft(self.user, self.slug).workspace_path
        return self._draft_path

    def has_draft(self) -> bool:
        return self.repo.has_draft(self.user, self.slug)


def context(action: str = "view") -> Context:
    """The page's context, or stop the page with a clear message when the action is not allowed."""
    user: User | None = st.session_state.get(state.USER)
    repo: ConfigRepo | None = st.session_state.get(state.CONFIG_REPO)
    slug = st.session_state.get(state.SLUG)
    if user is None or repo is None:
        st.error("Please sign in.")
        st.stop()
    if not slug:
        st.info("You have no workspace yet. Ask an owner for access, or create one on the Workspaces page.")
        st.stop()
    metas = st.session_state.get(state.METAS) or {}  # app.py read them this run
    ctx = Context(user, repo, slug, metas[slug] if slug in metas else repo.meta_for(user, slug))
    if not ctx.can(action):
        st.error(f"You are {ctx.role or 'not a member'} in this workspace; this page needs the right to {action}.")
        st.stop()
    return ctx


def progress_bar() -> Callable[[float, str], None]:
    """A progress bar here, and the callback lib's long jobs report their steps to (fraction, what is being done)."""
    bar = st.progress(0.0)

    def show(fraction: float, message: str) -> None:
        bar.progress(min(max(fraction, 0.0), 1.0), text=message)

    return show


def run_refresh(path: Path, wh: Warehouse, label: str, user: User, full: bool = False) -> "RefreshReport":
    """A refresh with a progress bar inside a status box that ends saying how it went."""

    box = st.empty()  # the progress shows while it runs; the page's report box says how it went
    report = None
    with user_errors("Could not refresh the data"):
        try:
            with box.status(label, expanded=True):
                report = refreshing.refresh(path, wh, user=user, full=full, progress=progress_bar())
        finally:
            box.empty()
    if report is None:  # refused (a PermissionDenied) or failed; the message is shown
        st.stop()
    return report


def first_load(path: Path, wh: Warehouse, ws: workspace.Workspace, user: User) -> "RefreshReport | None":
    """Load a workspace's data the first time a page shows it; None when there is nothing to load.

    A first load that fails is remembered for this session and these sources, so
    that it is not tried again, waiting on the sources, at every click; the
    Refresh button tries again.
    """
    sources = (ws.get("sources") or {}).get("sources")
    if not sources or wh.current() is not None:
        return None
    key = state.first_load_failed(path, workspace.render("sources", ws.get("sources")))
    if key in st.session_state:
        return st.session_state[key]
    report = run_refresh(path, wh, "Loading the data for the first time…", user)
    if wh.current() is None:
        st.session_state[key] = report
    return report


def rows_notice(user: User, files: Mapping[str, Any]) -> None:
    """Which rows `user` is held to (workspace.yaml's row_filters): a caption naming them, and a notice for each
    table they see no row of, saying why and who can change it."""
    scope = scope_for(user, files)
    if scope is None:
        return
    for note in scope.notes():
        st.info(note, icon=":material/lock:")
    held = scope.held()
    if held:
        st.caption("Your rows only: " + "; ".join(held) + ".")


def deliveries_note(meta: Mapping[str, Any], send: str) -> None:
    """A caption naming the subscriptions that send this page's artifact (`send`: report or dashboard) by e-mail."""
    subs = [subscription_words(x) for x in meta.get("subscriptions") or [] if isinstance(x, dict) and x.get("send") == send]
    if subs:
        st.caption("By e-mail: " + "; ".join(subs) + ". Turn it on or off for yourself on the Deliveries page.")


def alerts_of(meta: Mapping[str, Any]) -> dict[str, list[str]]:
    """The alerts of workspace.yaml in words, by the component they watch."""
    out: dict[str, list[str]] = {}
    for x in meta.get("alerts") or []:
        if isinstance(x, dict):
            out.setdefault(str(x.get("component")), []).append(alert_words(x))
    return out


def label_apart(label: str, options: list) -> str:
    """`label` for a choice that is no option ("All", "None"), in brackets while an option is shown so.

    Streamlit keeps a choice by its label: an option shown the same would be the same choice.
    """
    shown = {str(o) for o in options}
    while label in shown:
        label = f"({label})"
    return label


def workspace_names(metas: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Each workspace's name as a choice, its slug beside it where another workspace has the same name.

    Streamlit keeps a choice by its label, so two workspaces shown the same were one choice.
    """
    names = {slug: str(meta.get("name") or slug) for slug, meta in metas.items()}
    shared = {n for n in names.values() if list(names.values()).count(n) > 1}
    return {slug: f"{name} ({slug})" if name in shared else name for slug, name in names.items()}


def regenerate_button(ctx: Context, report: "RefreshReport", kind: str, *, has_report: bool) -> None:
    """After a refresh found data that no longer fits the dashboard or (`kind` "report") only the report:
    the button that opens Chat with the Regenerate request (or, without a key, the auto-draft on the new data)."""

    label = "Regenerate with Claude" if api_key_available() else f"Auto-draft a {kind} on the new data"
    if st.button(label, icon=":material/auto_awesome:", key=f"regenerate_{kind}"):
        st.session_state[state.chat_prefill(ctx.slug)] = regenerate_message(report, has_report=has_report)
        st.session_state[state.chat_regenerate_kind(ctx.slug)] = kind
        st.session_state[state.CHAT_MODE] = "edit"
        st.switch_page("app_pages/chat.py")


def when(iso: str) -> str:
    """An ISO 8601 time as people read it, in the server's local time: "30 Nov 2026, 18:13"."""
    import datetime as dt

    try:
        return f"{dt.datetime.fromisoformat(iso).astimezone():%d %b %Y, %H:%M}"
    except ValueError:
        return iso


def show_diagnostics(diagnostics: list, *, max_items: int = 20, out: Any = None) -> None:
    """Each finding as `task.yaml:12: rules[0].text: ...`: people see the file's name, not the server's folders."""
    import dataclasses

    out = out or st
    for d in diagnostics[:max_items]:
        shown = dataclasses.replace(d, file=Path(d.file).name) if d.file else d
        (out.error if d.level == "error" else out.warning)(shown.format())


def show_check_verdict(found: list, what: str, passed: str = "The checks pass") -> None:
    """The checks' findings on a proposed `what` ("dashboard", "report"): how many errors, or that they pass, then each."""

    errors = [d for d in found if d.level == ERROR]
    if errors:
        st.error(f"The checks found {len(errors)} error(s) in this {what}:")
    else:
        st.success(passed + (" (with warnings)." if found else "."))
    show_diagnostics(found)


def show_diff(patches: list[Any]) -> None:
    if not patches:
        st.caption("No differences.")
    for patch in patches:
        with st.expander(f"{patch.path} ({patch.status})", expanded=True):
            st.code(patch.patch or "(binary or empty)", language="diff")


def show_changes(changes: list[Any]) -> None:
    """What a change means (lib.memory.semantic_diff), by category; access and where data comes from as warnings."""

    if not changes:
        st.caption("No change in meaning (formatting or order only).")
        return
    attention = [c for c in changes if c.severity == ATTENTION]
    if attention:
        st.warning("Check these before publishing:\n" + "\n".join(f"- {_md(c.describe())}" for c in attention))
    for category in CATEGORIES:
        rest = [c for c in changes if c.category == category.name and c.severity != ATTENTION]
        if rest:
            st.markdown(f"**{category.title}**\n" + "\n".join(f"- {_md(c.describe())}" for c in rest))


def _md(text: str) -> str:
    """Text from a workspace shown literally: no markdown, HTML, $-maths or bare-URL links from a draft's author."""
    return "".join("\\" + ch if ch in "\\`*_{}[]()#+-.!|<>$~:" else ch for ch in text)


def text_diff(old: str, new: str, name: str) -> str:
    return workspace.text_diff(old, new, f"a/{name}", f"b/{name}")


def stale_rules_box(ctx: Context, files: dict[str, Any], key: str, done_key: str) -> None:
    """Task rules due for review, each with a one-click "Still holds" that confirms it on the person's draft.

    lib.memory.rule_review decides which rules are stale and checks the steward role when saving;
    the message of a confirmation goes to `done_key` for the page to show after the rerun.
    """

    stale = rule_review.stale_rules(files)
    if not stale:
        return
    rules = (files.get("task") or {}).get("rules") or []
    with st.container(border=True):
        st.warning(
            f"{len(stale)} task rule(s) not confirmed for over {rule_review.review_days(files.get('workspace'))} days. "
            "Claude is told they are unconfirmed. Do they still hold?"
        )
        for item in stale:
            text_col, button_col = st.columns([5, 1], vertical_alignment="center")
            text_col.markdown(f"`{item.id}` — {rules[item.index].get('text', '')}  \n*last confirmed {item.confirmed}, {item.days} days ago*")
            if button_col.button("Still holds", key=f"{key}_holds_{item.id}", disabled=not ctx.can("save"), help="Sets last_confirmed to today on your draft"):
                with user_errors("Could not confirm the rule"):
                    sha = ctx.repo.confirm_rules(ctx.user, ctx.slug, [item.id])
                    st.session_state[done_key] = (
                        f"Confirmed `{item.id}` on your draft as {sha[:10]}; publish it on Review." if sha else f"`{item.id}` was already confirmed today."
                    )
                    st.rerun()
