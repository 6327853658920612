"""Shared by the pages: who is signed in, which workspace, and the role checks.

Not a page itself (app.py registers only the page files). Permission checks
here only decide what to show; lib/ enforces them again on every write.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import streamlit as st

from lib import access, workspace
from lib.access import PermissionDenied, User
from lib.configrepo import ConfigRepo
from lib.warehouse import Warehouse

if TYPE_CHECKING:
    from lib.refresh import RefreshReport


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
        """The published workspace; for one not published yet, the user's draft of it."""
        return self.repo.published_path(self.slug) if self.is_published else self.draft_path()

    def draft_path(self) -> Path:
        """The user's draft worktree of this workspace, created on first use (once per page run)."""
        if self._draft_path is None:
            self._draft_path = self.repo.draft(self.user, self.slug).workspace_path
        return self._draft_path

    def has_draft(self) -> bool:
        return self.repo.has_draft(self.user, self.slug)


def context(action: str = "view") -> Context:
    """The page's context, or stop the page with a clear message when the action is not allowed."""
    user: User | None = st.session_state.get("user")
    repo: ConfigRepo | None = st.session_state.get("config_repo")
    slug = st.session_state.get("slug")
    if user is None or repo is None:
        st.error("Please sign in.")
        st.stop()
    if not slug:
        st.info("You have no workspace yet. Ask an owner for access, or create one on the Workspaces page.")
        st.stop()
    metas = st.session_state.get("metas") or {}  # app.py read them this run
    ctx = Context(user, repo, slug, metas[slug] if slug in metas else repo.meta_for(user, slug))
    if not ctx.can(action):
        st.error(f"You are {ctx.role or 'not a member'} in this workspace; this page needs the right to {action}.")
        st.stop()
    return ctx


def run_refresh(path: Path, wh: Warehouse, label: str, user: User) -> "RefreshReport":
    """A refresh with a progress bar inside a status box that ends saying how it went."""
    from lib.refresh import refresh

    box = st.empty()  # the progress shows while it runs; the page's report box says how it went
    with box.status(label, expanded=True):
        bar = st.progress(0.0)
        try:
            report = refresh(path, wh, user=user, progress=lambda f, m: bar.progress(min(max(f, 0.0), 1.0), text=m))
        except PermissionDenied as exc:
            box.empty()
            st.error(str(exc))
            st.stop()
    box.empty()
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
    key = f"first_load_failed:{path}:{workspace.render('sources', ws.get('sources'))}"
    if key in st.session_state:
        return st.session_state[key]
    report = run_refresh(path, wh, "Loading the data for the first time…", user)
    if wh.current() is None:
        st.session_state[key] = report
    return report


def when(iso: str) -> str:
    """An ISO 8601 time as people read it, in the server's local time: "30 Nov 2026, 18:13"."""
    import datetime as dt

    try:
        return f"{dt.datetime.fromisoformat(iso).astimezone():%d %b %Y, %H:%M}"
    except ValueError:
        return iso


def show_diagnostics(diagnostics: list, *, max_items: int = 20) -> None:
    """Each finding as `task.yaml:12: rules[0].text: ...`: people see the file's name, not the server's folders."""
    import dataclasses

    for d in diagnostics[:max_items]:
        shown = dataclasses.replace(d, file=Path(d.file).name) if d.file else d
        (st.error if d.level == "error" else st.warning)(shown.format())


def show_diff(patches: list[Any]) -> None:
    if not patches:
        st.caption("No differences.")
    for patch in patches:
        with st.expander(f"{patch.path} ({patch.status})", expanded=True):
            st.code(patch.patch or "(binary or empty)", language="diff")


def text_diff(old: str, new: str, name: str) -> str:
    return workspace.text_diff(old, new, f"a/{name}", f"b/{name}")
