"""Drafts: each person's edits to one workspace, on their own branch in their own worktree.

The branch `draft/<user>/<workspace>` is checked out under
`<repo>.drafts/<user>/<workspace>`, so concurrent drafts never share files.
Saving, revert and undo add commits as the person; `sync` brings published
changes in; an owner's `reject` renames the branch (`rejected/...`), never
deletes it.

Crash safety. Whatever writes a draft's worktree holds the draft's lock and
marks the draft while it writes (`writing`); a marker left behind means a
process died half-way, and `repair_draft` makes the worktree equal its branch
again, keeping what differed as a stash entry. It runs when the config repo is
opened and before a draft's worktree is handed out to be read (`open_draft`,
`list_drafts`), waiting for a writer still at it, so a reader sees one of the
draft's commits, never a change half made. A save, revert or undo commits
before it touches the worktree (`history.save_files`, `history.restore`): a
process killed before the branch moved leaves the worktree as it was, and one
killed after leaves it behind the new commit, which the repair brings it up
to. A failure of the disk (full) or of git is one plain sentence
(`failing_plainly`), with nothing written.

These functions are the implementation of `lib.repo.configrepo.ConfigRepo`'s draft
methods; `cr` is that ConfigRepo.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import shutil
from pathlib import Path
from typing import Any, Callable, Iterator

import git

from ..core.errors import DashmemError
from ..memory import workspace
from ..memory.kinds import KINDS
from ..memory.semantic_diff import Change
from ..roles import access
from ..roles.access import User
from . import proposals
from .branches import ConfigRepo, Draft, marker, parse_draft, reject_here, worktree, writing
from .gitops import (
    Busy,
    CheckoutBehind,
    ConfigRepoError,
    _git,
    actor_env,
    branch_heads,
    conflicted,
    forget_worktree,
    is_ancestor,
    keep_and_reset,
    rev,
    status,
    worktree_admin_dir,
    write_failure,
)
from .history import ACTION_TRAILER, MAIN, SCRATCH_PREFIX, WORKSPACE_TRAILER, FileDiff, commit_folder, message, restore, save_files, semantic_diff, trailer

_log = logging.getLogger(__name__)

UNDO_DEPTH = 10


class PublishConflict(ConfigRepoError):
    """Both sides changed the same lines; nothing was merged and both are kept."""

    def __init__(self, slug: str, branch: str, files: list[str], updating: bool = False):
        self.files = files
        changed = f"{', '.join(files) or 'some files'} changed in the published version since this draft started, on the same lines"
        if updating:  # bringing published changes into the draft, not publishing
            text = (
                f"could not update your draft of {slug} from the published version: {changed}. Nothing was changed; "
                "choose whether to keep your lines or the published ones where both changed."
            )
        else:
            text = (
                f"cannot publish {slug}: {changed}. Nothing was published; your draft and the published version are "
                "both kept. Update your draft from the published version, check your edit on top, and publish again."
            )
        super().__init__(text)


class DraftChanged(ConfigRepoError):
    """A save was based on an earlier state of the draft than the one it would be written over; nothing was written."""


def branch_name(user: User, slug: str) -> str:
    return f"draft/{user.name}/{workspace.check_slug(slug)}"


def actor(user: User) -> git.Actor:
    return git.Actor(user.display_name or user.name, user.git_email)


def git_env(user: User) -> dict[str, str]:
    return actor_env(actor(user))


# --------------------------------------------------------------------------- opening and listing drafts


def open_draft(cr: ConfigRepo, user: User, slug: str, action: str) -> tuple[Draft, dict[str, Any]]:
    """The user's draft, once `action` is allowed, with the access list that allowed it."""
    branch = branch_name(user, slug)
    meta = cr._access_meta(slug, branch)
    access.require(user, action, meta, slug)
    if not cr.has_branch(branch) and not cr.is_published(slug):
        # A branch from `main` would lack the workspace: every later use of that draft would fail.
        creators = sorted({parsed[0] for head in branch_heads(cr._git_dir, "draft/") if (parsed := parse_draft(head)) and parsed[1] == slug})
        whose = f"only on {' and '.join(creators)}'s draft" if creators else "nowhere but a draft"
        raise ConfigRepoError(
            f"{slug!r} is not published yet: it exists {whose}, which you can view and review but not edit. "
            "Publish it from Review (or ask its creator to), then edit your own draft of it."
        )
    where = worktree(cr, user.name, slug)
    draft = Draft(user.name, slug, branch, where)
    with cr._lock(), cr._lock(draft):
        if worktree_admin_dir(where) is None:  # never checked out, or its checkout died half-way
            forget_worktree(cr.path, cr._git_dir, where)
            (cr._git_dir / "refs" / "heads" / f"{branch}.lock").unlink(missing_ok=True)  # of a killed `worktree add -b`
            where.parent.mkdir(parents=True, exist_ok=True)
            if branch in cr.repo.heads:
                _git(cr.path, "worktree", "add", str(where), branch)
            else:
                _git(cr.path, "worktree", "add", "-b", branch, str(where), MAIN)
        else:
            repair_draft(cr, draft)  # a save, revert or sync of it that was killed half-way
    return draft, meta


def list_drafts(cr: ConfigRepo, slug: str | None = None) -> list[dict[str, Any]]:
    """Every draft branch (of workspace `slug`, if given) with how far it is ahead of and behind `main`."""
    for draft in draft_worktrees(cr):
        if (slug is None or draft.slug == slug) and looks_left_behind(cr, draft):
            repaired_before_reading(cr, draft)  # the caller reads its worktree next (Review checks the files)
    out = []
    for head in cr.repo.heads:
        parsed = parse_draft(head.name)
        if parsed is None or (slug is not None and parsed[1] != slug):
            continue
        owner, of = parsed
        ahead = int(cr.repo.git.rev_list("--count", f"{MAIN}..{head.name}"))
        # Published changes to this workspace the draft lacks (changes to other workspaces do not matter to it).
        behind = int(cr.repo.git.rev_list("--count", f"{head.name}..{MAIN}", "--", of))
        out.append(
            {
                "branch": head.name,
                "user": owner,
                "slug": of,
                "ahead": ahead,
                "behind": behind,
                "head": head.commit.hexsha,
                "date": head.commit.authored_datetime.isoformat(),
                "workspace_path": worktree(cr, owner, of) / of,
                "proposed": proposals.proposed(cr, head.name),  # when its steward asked an owner to review it, or None
            }
        )
    return sorted(out, key=lambda d: (d["slug"], d["user"]))


def draft_diff(cr: ConfigRepo, slug: str, branch: str) -> list[FileDiff]:
    """What a draft branch changes in the workspace since it left `main`."""
    return cr.diff(slug, cr.repo.merge_base(MAIN, branch)[0].hexsha, branch)


def draft_changes(cr: ConfigRepo, slug: str, branch: str) -> list[Change]:
    """What a draft branch changes in the workspace's meaning since it left `main` (lib.memory.semantic_diff)."""
    return semantic_diff(cr.repo, workspace.check_slug(slug), cr.repo.merge_base(MAIN, branch)[0].hexsha, branch)


# --------------------------------------------------------------------------- writing a draft


def save(cr: ConfigRepo, user: User, slug: str, files: dict[str, Any], message_: str, base: str | None = None) -> str | None:
    """Validate and write files to the user's draft and commit them as the user (see `ConfigRepo.save`)."""
    doing = f"could not save {slug}"
    with failing_plainly(cr, doing, "nothing was saved"):
        draft, meta = open_draft(cr, user, slug, "save")
        if "workspace" in files:
            access.require_governance_unchanged_or_owner(user, meta, files["workspace"], slug)
        wt = git.Repo(draft.path)

        def commit() -> str | None:
            texts = {target.name: text for target, text in workspace.changed_files(draft.workspace_path, files)}  # ValidationFailed: nothing written
            return save_files(wt, slug, texts, actor(user), message_ or f"Edit {slug}", "save")

        with cr._lock(draft):
            # Compared under the lock that every writer of this draft takes, so no save can slip in between.
            if base is not None and wt.head.commit.hexsha != base:
                raise DraftChanged(f"your draft of {slug} changed while this was being saved (another tab or a chat saved to it); nothing was saved, try again")
            return _commit_marked(cr, draft, "save", doing, "nothing was saved", commit)


def revert(cr: ConfigRepo, user: User, slug: str, version: str) -> str | None:
    """Restore the workspace to `version` on the user's draft, as a new commit."""
    doing = f"could not revert {slug}"
    with failing_plainly(cr, doing, "nothing was changed"):
        draft, _ = open_draft(cr, user, slug, "revert")
        with cr._lock(draft):
            return _commit_marked(cr, draft, "revert", doing, "nothing was changed", lambda: restore(git.Repo(draft.path), slug, version, actor(user)))


def _commit_marked(cr: ConfigRepo, draft: Draft, what: str, doing: str, outcome: str, commit: Callable[[], str | None]) -> str | None:
    """Run `commit` (a save, revert or undo: `history.save_files` or `restore`) with the draft marked as written
    (`writing`; call under the draft's lock). A failure of the disk or of git is one plain sentence. A commit
    whose worktree files could not all be renamed after it is a success: the change is committed, and the
    marker stays, so the worktree is repaired when the draft is next opened."""
    try:
        with writing(cr, draft, what), failing_plainly(cr, doing, outcome):
            return commit()
    except CheckoutBehind as behind:
        _log.warning("the draft %s: %s", draft.branch, behind)
        return behind.sha


@contextlib.contextmanager
def failing_plainly(cr: ConfigRepo, doing: str, outcome: str) -> Iterator[None]:
    """A draft write that fails on the disk (full, read-only) or in git says so in one sentence, led by `doing`
    ("could not save x"); git's own words go to the log. Draft writes commit before they touch the worktree
    (`history.save_files`), so `outcome` ("nothing was saved") is true of every failure caught here."""
    try:
        yield
    except DashmemError:  # written for the person already (PermissionDenied is an OSError too)
        raise
    except (OSError, git.GitCommandError) as exc:
        found = write_failure(exc, cr.path)
        if found is None:  # pragma: no cover - write_failure knows both kinds
            raise
        reason, disk_full = found
        _log.warning("%s: %s", doing, exc)
        hint = " The disk that holds the config repo is full: free some space on it (or ask the app's operator to) and try again." if disk_full else ""
        raise ConfigRepoError(f"{doing}: {reason}; {outcome}.{hint}") from exc


def undo_stack(cr: ConfigRepo, user: User, slug: str) -> list[str]:
    """Shas of saved states on the draft, oldest first; the last is the current state."""
    branch = branch_name(user, slug)
    if branch not in cr.repo.heads:
        return []
    # Undo starts afresh at the newest commit that is not a save, revert or undo (main's history, a publish, a
    # sync), so only the commits from there on are read, walking first parents through the repo handle's
    # object reader (no process), not the draft's whole first-parent history.
    chain = [cr.repo.commit(branch)]
    while trailer(chain[-1], ACTION_TRAILER) in ("save", "revert", "undo") and chain[-1].parents and len(chain) < 500:
        chain.append(chain[-1].parents[0])
    stack: list[str] = []
    for commit in reversed(chain):
        action = trailer(commit, ACTION_TRAILER)
        touched = trailer(commit, WORKSPACE_TRAILER) == slug
        if touched and action in ("save", "revert"):
            stack.append(commit.hexsha)
            del stack[: max(0, len(stack) - (UNDO_DEPTH + 1))]
        elif touched and action == "undo":
            if len(stack) > 1:
                stack.pop()
        elif action not in ("save", "revert", "undo"):
            stack = [commit.hexsha]  # main's history, a publish or a sync: undo starts afresh
    return stack


def undo(cr: ConfigRepo, user: User, slug: str) -> str:
    """Step the draft back to the previous saved state, as a new commit."""
    doing = f"could not undo the last change to {slug}"
    with failing_plainly(cr, doing, "nothing was changed"):
        draft, _ = open_draft(cr, user, slug, "undo")

        def commit() -> str | None:
            stack = undo_stack(cr, user, slug)
            if len(stack) < 2:
                raise ConfigRepoError(f"nothing to undo in {slug}: the undo history keeps the last {UNDO_DEPTH} saved states of a draft")
            target = stack[-2]
            # `empty`: when the state already equals the target, an empty commit records the step anyway.
            return restore(
                git.Repo(draft.path), slug, target, actor(user), action="undo", subject=f"Undo last change to {slug} (back to {target[:10]})", empty=True
            )

        with cr._lock(draft):
            sha = _commit_marked(cr, draft, "undo", doing, "nothing was changed", commit)
    assert sha is not None  # `empty` always commits
    return sha


def sync(cr: ConfigRepo, user: User, slug: str, prefer: str | None = None) -> str | None:
    """Bring `main`'s published changes into the user's draft (see `ConfigRepo.sync`)."""
    strategy = {None: [], "mine": ["-X", "ours"], "published": ["-X", "theirs"]}[prefer]
    draft = open_draft(cr, user, slug, "edit")[0]
    with cr._lock(draft), writing(cr, draft, "sync"):
        head, main = rev(draft.path, "HEAD"), rev(cr.path, f"refs/heads/{MAIN}")
        if is_ancestor(cr.path, main, head):
            return None
        if is_ancestor(cr.path, head, main):
            _git(draft.path, "merge", "--ff-only", "-q", main)
            return main
        try:
            _git(draft.path, "merge", "--no-ff", "-q", *strategy, "-m", message(f"Update draft of {slug} from {MAIN}", "sync", slug), main, env=git_env(user))
        except git.GitCommandError:
            files = conflicted(draft.path)
            _git(draft.path, "merge", "--abort", ok=(0, 128))
            raise PublishConflict(slug, draft.branch, files, updating=True) from None
        return rev(draft.path, "HEAD")


def fast_forward(cr: ConfigRepo, draft: Draft, new: str) -> None:
    """Bring a draft up to the commit it was just published as, so the next edit starts from it."""
    if worktree_admin_dir(draft.path) is None:
        return
    try:
        with cr._lock(draft), writing(cr, draft, "update after publishing"):
            head = rev(draft.path, "HEAD")
            if head != new and is_ancestor(cr.path, head, new) and not status(draft.path, untracked=False):
                try:
                    _git(draft.path, "merge", "--ff-only", "-q", new)
                except git.GitCommandError as exc:  # git refused before writing (a file of the person's in the way)
                    _log.warning("could not bring the draft %s up to %s: %s", draft.branch, MAIN, exc)
    except Busy:  # published all the same; the draft catches up on its next sync
        _log.warning("could not bring the draft %s up to %s: it is busy", draft.branch, MAIN)


def reject(cr: ConfigRepo, user: User, slug: str, branch: str) -> str:
    """An owner turns down a draft: it leaves the review list but is kept, renamed, never deleted."""
    access.require(user, "reject", cr.meta(slug), slug)
    checked = workspace.check_slug(slug)
    parsed = parse_draft(branch)
    if parsed is None or parsed[1] != checked or branch not in cr.repo.heads:
        raise ConfigRepoError(f"no draft {branch!r} of {slug}")
    owner = parsed[0]
    kept = f"rejected/{owner}/{slug}/{dt.datetime.now(dt.timezone.utc).strftime('%Y%m%dT%H%M%S')}"
    reject_here(cr, owner, slug, branch, kept)
    proposals.clear(cr, branch)
    return kept


def new_workspace(cr: ConfigRepo, user: User, slug: str, name: str, template: str | None = None) -> Draft:
    """Create a workspace on the user's draft (from a template workspace or blank)."""
    access.require_app_role(user, access.STEWARD, "create workspaces")
    workspace.check_slug(slug)
    branch = branch_name(user, slug)
    where = worktree(cr, user.name, slug)
    if (cr.path / slug).exists() or branch in cr.repo.heads or where.exists():
        raise ConfigRepoError(f"a workspace named {slug!r} already exists (published or as your draft)")
    if template:
        if not workspace.is_workspace(cr.path / workspace.check_slug(template)):
            raise ConfigRepoError(f"no workspace {template!r} to use as a template")
        access.require(user, "view", cr.meta(template), template)  # copying reads its memory and data
    with cr._lock():
        if branch not in cr.repo.heads:
            _git(cr.path, "worktree", "add", "-b", branch, str(where), MAIN)
    draft = Draft(user.name, slug, branch, where)
    try:
        with cr._lock(draft), writing(cr, draft, "new workspace"):
            _write_new_workspace(cr, user, draft, name, template)
    except BaseException:
        # Nothing was created: remove the empty branch and worktree so the name stays free.
        with cr._lock():
            _git(cr.path, "worktree", "remove", "--force", str(where))
            _git(cr.path, "branch", "-D", branch)
        raise
    return draft


def _write_new_workspace(cr: ConfigRepo, user: User, draft: Draft, name: str, template: str | None) -> None:
    slug = draft.slug
    if template:
        workspace.copy_template(cr.path / workspace.check_slug(template), draft.workspace_path, name=name)
        meta = workspace.load(draft.workspace_path)[0].data["workspace"]
        # Its creator's alone, as a blank one is: the template's people were given the template, not the copy,
        # and its owners would otherwise decide who may see a workspace they never made. The owner adds people.
        meta["access"] = workspace.blank(name, user.name, "")["workspace"]["access"]
        workspace.save(draft.workspace_path, {"workspace": meta})
    else:
        workspace.save(draft.workspace_path, workspace.blank(name, user.name, dt.date.today().isoformat()))
    commit_folder(git.Repo(draft.path), slug, actor(user), f"Create {slug}", "save")


def import_category(cr: ConfigRepo, user: User, source: str, target: str, kind: str) -> tuple[str | None, list[str]]:
    """Bring one memory category (task, sources or output) of a published workspace into the user's draft of
    another: merged where the kind knows how (task rules added beside this workspace's, sources whose names are
    free), else replaced, and said so. Returns the commit (None: nothing changed) and what was done, in sentences."""
    if kind not in ("task", "sources", "output"):
        raise ConfigRepoError(f"only task rules, sources or output constraints can be imported, not {kind!r}")
    if source == target:
        raise ConfigRepoError("choose two different workspaces")
    access.require(user, "view", cr.meta(source), source)
    content = workspace.load(cr.published_path(source))[0].get(kind)
    if content is None:
        raise ConfigRepoError(f"{source} has no {workspace.FILES[kind]}")
    merge = KINDS[kind].merge
    base = None
    if merge is None:
        notes = [f"replaced {workspace.FILES[kind]} with that of {source}: its settings are one whole, so they are not merged"]
    else:
        draft, _ = open_draft(cr, user, target, "save")
        base = git.Repo(draft.path).head.commit.hexsha  # merged with this version: a save in between refuses it
        content, notes = merge(workspace.load(draft.workspace_path)[0].get(kind), content, source)
    return save(cr, user, target, {kind: content}, f"Import {workspace.FILES[kind]} from {source}", base=base), notes


# --------------------------------------------------------------------------- repairing a draft a killed process left


def draft_worktrees(cr: ConfigRepo) -> list[Draft]:
    """Every draft branch that has a worktree folder."""
    out = []
    for head in cr.repo.heads:
        parsed = parse_draft(head.name)
        if parsed is None:
            continue
        user, slug = parsed
        if worktree(cr, user, slug).exists():
            out.append(Draft(user, slug, head.name, worktree(cr, user, slug)))
    return out


def all_drafts(cr: ConfigRepo) -> list[Draft]:
    """Every draft branch, whether or not it has a worktree."""
    return [Draft(user, slug, head.name, worktree(cr, user, slug)) for head in cr.repo.heads for user, slug in filter(None, [parse_draft(head.name)])]


def draft_locks(cr: ConfigRepo, draft: Draft, admin: Path) -> list[Path]:
    """git lock files of one draft: its worktree's (index, HEAD, a partial commit's index) and its branch's."""
    branch_lock = cr._git_dir / "refs" / "heads" / f"{draft.branch}.lock"
    return list(admin.glob("*.lock")) + ([branch_lock] if branch_lock.exists() else [])


def looks_left_behind(cr: ConfigRepo, draft: Draft) -> bool:
    """Whether the draft looks half-written, checked without any lock (a live writer can make a false alarm)."""
    admin = worktree_admin_dir(draft.path)
    return admin is None or bool(draft_locks(cr, draft, admin)) or (admin / "MERGE_HEAD").exists() or marker(cr, draft).exists()


def repaired_before_reading(cr: ConfigRepo, draft: Draft) -> None:
    """Repair a draft that looks half-written, waiting for a writer that is still at it, before its worktree is read:
    whoever reads a draft sees one of its commits, never what a killed save or revert had half done."""
    with cr._lock(), cr._lock(draft):
        done = repair_draft(cr, draft)
    if done:
        _log.warning("repaired the draft %s before reading it: %s", draft.branch, "; ".join(done))


def repair_draft(cr: ConfigRepo, draft: Draft) -> list[str]:
    """Make a draft's worktree equal its branch. Call under the main lock and the draft's."""
    admin = worktree_admin_dir(draft.path)
    if admin is None:
        if not draft.path.exists():
            return []
        forget_worktree(cr.path, cr._git_dir, draft.path)  # checked out again when next opened
        return [f"removed the half-made checkout of {draft.branch}"]
    done = []
    for stale in draft_locks(cr, draft, admin):
        stale.unlink(missing_ok=True)
        done.append(f"removed {stale.name} of {draft.branch}, left by a killed git")
    if (admin / "MERGE_HEAD").exists():
        _git(draft.path, "merge", "--abort", ok=(0, 128))
        done.append(f"aborted a half-done update of {draft.branch}")
    for scratch in admin.glob(f"{SCRATCH_PREFIX}*"):  # a killed commit's temporary files and index (history._Commit)
        shutil.rmtree(scratch, ignore_errors=True)
        done.append(f"removed {scratch.name} of {draft.branch}, left by a killed save")
    mark = marker(cr, draft)
    if mark.exists():
        # Only then: files a person put in their draft by hand are theirs, and the next save commits them.
        if status(draft.path):
            # Untracked files too: a save's temporary files, which the next save would commit.
            keep_and_reset(draft.path, f"the draft {draft.branch}", untracked=True)
            done.append(
                f"reset the worktree of {draft.branch} to its last commit, as a {mark.read_text().strip() or 'change'} "
                f"died half-way (what differed is kept in `git stash list`)"
            )
        mark.unlink()
    return done
