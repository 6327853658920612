"""Review: open drafts of this workspace with their diffs and check results; publish, reject, propose."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from app_pages import state, ui
from lib.artifacts import checks
from lib.memory import workspace
from lib.ops import publish
from lib.repo.drafts import PublishConflict
from lib.repo.publish_rules import publish_button
from lib.roles import access

ctx = ui.context("propose")  # drafts are for the people who write them


@st.cache_data(ttl=60, show_spinner="Checking the draft on its data…", max_entries=64)
def draft_checks(path: str, head: str) -> list:
    """The full validation of a draft at one saved version; kept a minute, as it fetches the sources' data."""
    return checks.validate_workspace(Path(path))


def publish_with_progress(branch: str) -> tuple[str, str]:
    """Publish `branch` with a progress bar (the checks, each source it adds loaded for everyone): the new
    version, and what the publish said last about the data it loaded ("" when it loaded none)."""
    box = st.empty()  # the progress shows while it runs; the success message says how it went
    said = publish.PUBLISHED
    try:
        with box.status("Publishing…", expanded=True):
            show = ui.progress_bar()

            def step(fraction: float, message: str) -> None:
                nonlocal said
                show(fraction, message)
                said = message

            sha = publish.publish_branch(ctx.repo, ctx.user, ctx.slug, branch, progress=step)
    finally:
        box.empty()
    return sha, "" if said == publish.PUBLISHED else said


st.title("Review")
policy = ctx.meta.get("policy") or {}
st.caption(
    "Owners publish drafts to everyone. "
    + ("Stewards may publish their own drafts in this workspace." if policy.get("stewards_can_publish") else "Stewards propose; an owner publishes.")
)

if st.session_state.get(state.REVIEW_DONE):
    st.success(st.session_state.pop(state.REVIEW_DONE))
# Rules due for review, as the person's draft has them (or the published ones, before a draft exists).
# Only for a published workspace: an owner reviewing someone's new one has no draft of it to confirm rules on.
if ctx.is_published:
    rules_at = ctx.draft_path() if ctx.has_draft() else ctx.repo.published_path(ctx.slug)
    ui.stale_rules_box(ctx, workspace.load(rules_at)[0].data, "review", state.REVIEW_DONE)
drafts = [d for d in ctx.repo.drafts(ctx.slug) if d["ahead"] > 0]
mine = ctx.repo.branch_name(ctx.user, ctx.slug)
if not drafts:
    st.info("No open drafts to review.")
waiting = [d for d in drafts if d["proposed"] and d["branch"] != mine]
if waiting and ctx.can("reject"):  # an owner: proposals wait for them
    st.warning(
        f"{len(waiting)} proposed draft{'s wait' if len(waiting) != 1 else ' waits'} for your review: "
        + ", ".join(f"{d['user']}'s" for d in waiting)
        + ". Publish or reject each below."
    )

for d in drafts:
    branch = d["branch"]
    own = branch == mine
    with st.container(border=True):
        st.subheader(f"{d['user']}'s draft" + (" (yours)" if own else ""))
        proposed = f" · proposed for review {ui.when(d['proposed']['at'])}" if d["proposed"] else ""
        st.caption(
            f"`{branch}` · {d['ahead']} change(s) not published · {d['behind']} published change(s) not in it · last saved {ui.when(d['date'])}{proposed}"
        )
        st.markdown("**What it changes**")
        ui.show_changes(ctx.repo.draft_changes(ctx.slug, branch))
        st.markdown("**The YAML, line by line**")
        ui.show_diff(ctx.repo.draft_diff(ctx.slug, branch))
        found = None
        if d["workspace_path"].exists():
            found = draft_checks(str(d["workspace_path"]), d["head"])  # the same verdict publish and CI reach
            errors = [x for x in found if x.level == "error"]
            (st.error if errors else st.success)(f"Checks: {len(errors)} error(s)" if errors else "Checks pass")
            ui.show_diagnostics(found)
        offer = publish_button(ctx.user, ctx.meta, own=own, diagnostics=found)
        buttons = st.columns(4)
        if offer.shown:
            if buttons[0].button("Publish", key=f"publish_{branch}", type="primary", disabled=not offer.enabled, help=offer.help):
                st.session_state[state.CONFIRM_PUBLISH] = branch
            if st.session_state.get(state.CONFIRM_PUBLISH) == branch:
                files = sorted({p.path for p in ctx.repo.draft_diff(ctx.slug, branch)})
                st.warning(f"Publish {d['user']}'s draft to everyone who sees this workspace? It changes {', '.join(files) or 'nothing'}.")
                yes, no = st.columns(2)
                if yes.button("Yes, publish", key=f"confirm_{branch}", type="primary"):
                    st.session_state.pop(state.CONFIRM_PUBLISH, None)
                    # A PublishConflict, failing checks or a source that cannot be loaded say what to do.
                    with ui.user_errors("Could not publish", invalid="Not published: nothing changed for anyone."):
                        sha, said = publish_with_progress(branch)
                        st.session_state[state.REVIEW_DONE] = (
                            f"Published {d['user']}'s draft ({', '.join(files)}) as version {sha[:10]}. Everyone now sees it; History lists it."
                            + (f" {said}." if said else "")
                        )
                        st.rerun()
                if no.button("Cancel", key=f"cancel_{branch}"):
                    st.session_state.pop(state.CONFIRM_PUBLISH, None)
                    st.rerun()
        if ctx.can("reject") and not own:
            if buttons[1].button("Reject", key=f"reject_{branch}"):
                with ui.user_errors("Could not reject the draft"):
                    ctx.repo.reject(ctx.user, ctx.slug, branch)
                    st.session_state[state.REVIEW_DONE] = (
                        f"Rejected {d['user']}'s draft. It is kept in history but will not be published; they can start a new draft."
                    )
                    st.rerun()
        if own:
            pushes = ctx.repo.has_remote("origin")
            label = ("Propose again" if d["proposed"] else "Propose for review") + (" (and push for a pull request)" if pushes else "")
            if buttons[2].button(label, key="propose", help="The workspace's owners see it waiting on Review and in the sidebar"):
                with ui.user_errors("Could not propose the draft"):
                    pushed = publish.propose(ctx.repo, ctx.user, ctx.slug)
                    st.session_state[state.REVIEW_DONE] = "Proposed: the workspace's owners see your draft waiting for their review." + (
                        f" Pushed `{pushed}` to origin too; a pull request can be opened there." if pushes else ""
                    )
                    st.rerun()
            if d["behind"] and buttons[3].button("Update from published", key="sync"):
                with ui.user_errors("Could not update your draft"):
                    try:
                        ctx.repo.sync(ctx.user, ctx.slug)
                        st.rerun()
                    except PublishConflict as exc:  # not an error to show once: the person picks a side below
                        st.session_state[state.sync_conflict(ctx.slug)] = str(exc)
            if st.session_state.get(state.sync_conflict(ctx.slug)):
                st.error(st.session_state[state.sync_conflict(ctx.slug)])
                keep = st.radio(
                    "Where both changed the same lines, keep",
                    ["mine", "published"],
                    horizontal=True,
                    format_func=lambda x: "my lines" if x == "mine" else "the published lines",
                )
                if st.button("Update, keeping " + ("my lines" if keep == "mine" else "the published lines")):
                    with ui.user_errors("Could not update your draft"):
                        ctx.repo.sync(ctx.user, ctx.slug, prefer=keep)
                        del st.session_state[state.sync_conflict(ctx.slug)]
                        st.rerun()

if ctx.can("manage_access"):  # lib refuses anyone else too (ConfigRepo.change_access)
    st.divider()
    st.subheader("Who may do what")
    st.caption(
        "Add or remove people (their user name), groups (group:NAME) or everyone signed in (*) per role. "
        "A change goes to your draft, shows above as an access change, and takes effect when it is published."
    )
    with ui.user_errors("Could not read who may do what"):
        lists = ctx.repo.access_lists(ctx.user, ctx.slug)
        for key in access.ROLE_LISTS.values():
            st.markdown(f"**{key.capitalize()}**: " + (", ".join(f"`{p}`" for p in lists[key]) or "nobody"))
        add_form, remove_form = st.columns(2)
        with add_form.form("access_add", clear_on_submit=True):
            role = st.selectbox("Role", list(access.ROLE_LISTS), key="access_add_role")
            who = st.text_input("Person or group", placeholder="sam, group:analysts or *", key="access_add_who")
            adding = st.form_submit_button("Add to my draft")
        with remove_form.form("access_remove"):
            held = [str(access.Grant(role, p)) for role, key in access.ROLE_LISTS.items() for p in lists[key]]
            chosen = st.multiselect("Remove", held, key="access_remove_chosen", placeholder="role:name")
            removing = st.form_submit_button("Remove from my draft")
        if adding or removing:
            with ui.user_errors("Could not change who may do what", invalid="Not saved: nothing changed."):
                if adding:
                    sha, done = ctx.repo.change_access(ctx.user, ctx.slug, add=[access.Grant.of(role, who)])
                else:
                    sha, done = ctx.repo.change_access(ctx.user, ctx.slug, remove=[access.Grant.parse(text) for text in chosen])
                if not done:
                    st.info("Nothing to change: " + ("they already have that role." if adding else "choose whom to remove."))
                else:
                    st.session_state[state.REVIEW_DONE] = (
                        f"Saved to your draft: {'; '.join(done)}. It shows above as an access change; publish it to make it count."
                    )
                    st.rerun()

if ctx.user.app_role == "owner":
    st.divider()
    with st.form("remote"):
        st.subheader("Where proposals go")
        st.caption(
            "Proposing pushes a draft branch to this git remote, where the platform team opens a pull request. "
            "Give an SSH or HTTPS URL without a password (the server uses its SSH key or git credential helper), "
            "or a path to a bare repository."
        )
        url = st.text_input("Remote URL", value=publish.remote_url(ctx.repo) or "", placeholder="git@github.com:acme/dashboards-config.git")
        if st.form_submit_button("Save the remote"):
            with ui.user_errors("Could not save the remote"):
                publish.set_remote(ctx.repo, ctx.user, url)
                st.session_state[state.REVIEW_DONE] = "Saved: proposals are pushed there now."
                st.rerun()
