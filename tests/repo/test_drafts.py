"""Drafts (lib/repo/drafts.py, through ConfigRepo): save, invalid saves, sync with main, undo.

Against a real git repository made from the shipped demo workspaces (the `config_repo` fixture).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import git
import pytest

from lib.core.diagnostics import ValidationFailed
from lib.memory import workspace
from lib.ops import publish
from lib.repo import gitops
from lib.repo.configrepo import ConfigRepo
from lib.repo.drafts import UNDO_DEPTH, PublishConflict
from lib.repo.gitops import ConfigRepoError
from lib.repo.history import MAIN, SCRATCH_PREFIX, read_file
from lib.roles.access import User
from tests.configrepo_helpers import (
    GDP,
    OLIVIA,
    SAM,
    SCW,
    WORKSPACES,
    assert_main_clean,
    commit_count,
    edit_rule,
    files_at,
    files_on_disk,
    load_task,
    rule_text,
    sha,
    worktree_git_dir,
)
from tests.helpers.disk import leave_free, make_room, small_disk

# --------------------------------------------------------------------------- 2. save


def test_save_commits_as_the_user_and_touches_only_the_workspace_folder(config_repo):
    repo = config_repo
    olivia = User("olivia", display_name="Olivia Owner", email="olivia@example.com", app_role="owner")
    main_before = sha(repo)
    branch = repo.branch_name(olivia, GDP)
    # stray changes elsewhere in the same worktree must not ride along
    d = repo.draft(olivia, GDP)
    (d.path / "notes.txt").write_text("scratch")
    other_task = d.path / SCW / "task.yaml"
    other_task.write_text(other_task.read_text() + "# local scribble\n")

    new_sha = edit_rule(repo, olivia, GDP, 0, "Show GDP in billions.", "Shorter format rule")

    assert new_sha is not None and sha(repo, branch) == new_sha
    commit = repo.repo.commit(new_sha)
    assert (commit.author.name, commit.author.email) == ("Olivia Owner", "olivia@example.com")
    assert commit.message.splitlines()[0] == "Shorter format rule"
    changed = repo.repo.git.diff("--name-only", f"{new_sha}~1", new_sha).splitlines()
    assert changed == [f"{GDP}/task.yaml"]
    task = read_file(repo.repo, new_sha, f"{SCW}/task.yaml")
    assert task is not None and "# local scribble" not in task.decode()
    assert read_file(repo.repo, new_sha, "notes.txt") is None
    assert rule_text(repo, branch, GDP, 0) == "Show GDP in billions."
    # main and its checkout are untouched by a draft save
    assert sha(repo) == main_before
    assert rule_text(repo, MAIN, GDP, 0).startswith("Show GDP in billions of US dollars")
    assert_main_clean(repo)


def test_save_uses_default_author_email_for_plain_user(config_repo):
    new_sha = edit_rule(config_repo, SAM, SCW, 5, "Label weeks as ISO weeks.")
    commit = config_repo.repo.commit(new_sha)
    assert (commit.author.name, commit.author.email) == ("sam", "sam@users.dashmem.invalid")


def test_save_unchanged_content_returns_none_and_makes_no_commit(config_repo):
    repo = config_repo
    edit_rule(repo, OLIVIA, GDP, 0, "First text.")
    branch = repo.branch_name(OLIVIA, GDP)
    head = sha(repo, branch)
    task = load_task(repo, OLIVIA, GDP)

    assert repo.save(OLIVIA, GDP, {"task": task}, "no-op") is None
    assert edit_rule(repo, OLIVIA, GDP, 0, "First text.") is None
    assert sha(repo, branch) == head
    assert git.Repo(repo.draft(OLIVIA, GDP).path).git.status("--porcelain") == ""


# --------------------------------------------------------------------------- 3. invalid save


def _drop_text(task):
    del task["rules"][0]["text"]


def _text_not_a_string(task):
    task["rules"][0]["text"] = 42


def _rules_not_a_list(task):
    task["rules"] = "be nice"


@pytest.mark.parametrize("break_task", [_drop_text, _text_not_a_string, _rules_not_a_list])
def test_save_invalid_content_raises_and_writes_nothing(config_repo, break_task):
    repo = config_repo
    edit_rule(repo, OLIVIA, SCW, 0, "A valid first save.")
    d = repo.draft(OLIVIA, SCW)
    head = sha(repo, d.branch)
    before = files_on_disk(d.path)

    task = load_task(repo, OLIVIA, SCW)
    task["goal"] = "This valid change must not be written either."
    break_task(task)
    with pytest.raises(ValidationFailed) as info:
        repo.save(OLIVIA, SCW, {"task": task}, "broken")

    assert info.value.diagnostics, "ValidationFailed should carry the errors"
    assert files_on_disk(d.path) == before
    assert sha(repo, d.branch) == head
    assert git.Repo(d.path).git.status("--porcelain", "--untracked-files=all") == ""


# --------------------------------------------------------------------------- 6. sync


def _conflicting_drafts(repo):
    """Sam's draft and main changed the same rule of gdp-explorer."""
    edit_rule(repo, SAM, GDP, 2, "Sam: latest means the newest complete year.")
    edit_rule(repo, OLIVIA, GDP, 2, "Olivia: latest means the most recent year in the data.")
    publish.publish(repo, OLIVIA, GDP)


@pytest.mark.parametrize(
    "prefer, expected",
    [
        ("mine", "Sam: latest means the newest complete year."),
        ("published", "Olivia: latest means the most recent year in the data."),
    ],
)
def test_sync_with_preference_resolves_conflict(config_repo, prefer, expected):
    repo = config_repo
    _conflicting_drafts(repo)
    branch = repo.branch_name(SAM, GDP)
    draft_before = sha(repo, branch)

    new_head = repo.sync(SAM, GDP, prefer=prefer)

    assert new_head == sha(repo, branch) != draft_before
    assert rule_text(repo, branch, GDP, 2) == expected
    assert repo.repo.is_ancestor(sha(repo), new_head)  # main is now in the draft
    assert repo.repo.is_ancestor(draft_before, new_head)  # and so is sam's own work
    d = repo.draft(SAM, GDP)
    assert git.Repo(d.path).git.status("--porcelain") == ""
    assert not (worktree_git_dir(d.path) / "MERGE_HEAD").exists()
    # the synced draft now publishes cleanly
    publish.publish(repo, SAM, GDP)
    assert rule_text(repo, MAIN, GDP, 2) == expected


def test_sync_without_preference_raises_and_leaves_draft_unchanged(config_repo):
    repo = config_repo
    _conflicting_drafts(repo)
    d = repo.draft(SAM, GDP)
    head = sha(repo, d.branch)
    before = files_on_disk(d.path)

    with pytest.raises(PublishConflict) as exc:
        repo.sync(SAM, GDP)

    assert f"{GDP}/task.yaml" in str(exc.value)
    assert str(exc.value).startswith("could not update your draft") and "cannot publish" not in str(exc.value)
    assert sha(repo, d.branch) == head
    assert files_on_disk(d.path) == before
    assert git.Repo(d.path).git.status("--porcelain") == ""
    assert not (worktree_git_dir(d.path) / "MERGE_HEAD").exists()


def test_sync_when_draft_is_behind_fast_forwards_and_when_up_to_date_returns_none(config_repo):
    repo = config_repo
    repo.draft(SAM, GDP)
    assert repo.sync(SAM, GDP) is None  # nothing new on main
    edit_rule(repo, OLIVIA, GDP, 0, "Published while sam's draft was idle.")
    published = publish.publish(repo, OLIVIA, GDP)
    assert repo.sync(SAM, GDP) == published == sha(repo, repo.branch_name(SAM, GDP))


# --------------------------------------------------------------------------- 8. undo


def test_undo_steps_back_ten_saved_states_then_refuses(config_repo):
    repo = config_repo
    texts = [f"Undo step text number {i}." for i in range(1, 13)]
    for text in texts:
        assert edit_rule(repo, SAM, SCW, 4, text) is not None
    branch = repo.branch_name(SAM, SCW)
    assert rule_text(repo, branch, SCW, 4) == texts[-1]
    d = repo.draft(SAM, SCW)

    for k in range(1, UNDO_DEPTH + 1):
        count_before = commit_count(repo, branch)
        head_before = sha(repo, branch)
        undo_sha = repo.undo(SAM, SCW)
        assert undo_sha == sha(repo, branch)
        assert commit_count(repo, branch) == count_before + 1
        assert repo.repo.commit(undo_sha).parents[0].hexsha == head_before
        expected = texts[-1 - k]
        assert rule_text(repo, branch, SCW, 4) == expected, f"after undo {k}"
        assert workspace.load(d.workspace_path)[0].data["task"]["rules"][4]["text"] == expected

    assert rule_text(repo, branch, SCW, 4) == texts[1]
    head = sha(repo, branch)
    with pytest.raises(ConfigRepoError, match="10"):
        repo.undo(SAM, SCW)
    assert sha(repo, branch) == head


def test_undo_with_nothing_saved_raises(config_repo):
    with pytest.raises(ConfigRepoError, match="nothing to undo"):
        config_repo.undo(SAM, GDP)


# --------------------------------------------------------------------------- a workspace not published yet


def test_a_draft_of_someone_elses_unpublished_workspace_is_refused_and_nothing_is_created(config_repo):
    """Branched from `main`, it would lack the workspace; the owner views the creator's draft instead."""
    repo = config_repo
    creator = User("sam", app_role="steward")
    made = repo.new_workspace(creator, "team-kpis", "Team KPIs")
    branches = sorted(h.name for h in repo.repo.heads)
    with pytest.raises(ConfigRepoError, match="'team-kpis' is not published yet: it exists only on sam's draft"):
        repo.draft(OLIVIA, "team-kpis")
    with pytest.raises(ConfigRepoError, match="not published yet"):
        repo.save(OLIVIA, "team-kpis", {"task": {"rules": []}}, "An edit")
    assert sorted(h.name for h in repo.repo.heads) == branches and not repo.has_draft(OLIVIA, "team-kpis")
    assert repo.view_path(OLIVIA, "team-kpis") == made.workspace_path  # what the owner sees: sam's draft
    assert repo.draft(creator, "team-kpis").workspace_path == made.workspace_path  # its creator edits it as before


# --------------------------------------------------------------------------- a full disk (issue #29, item 8)


@pytest.fixture
def repo_on_a_small_disk(tmp_path, monkeypatch):
    """A config repo (one demo workspace) with its drafts on a tmpfs of 2 MB, which the test fills."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    with small_disk(tmp_path / "disk", 2 << 20) as disk:
        templates = tmp_path / "templates"
        shutil.copytree(WORKSPACES / SCW, templates / SCW)
        yield ConfigRepo.open_or_create(disk / "config-repo", templates), disk


def left_behind(repo: ConfigRepo, draft_path: Path) -> list[str]:
    """What a write of the draft could leave: a marker, git's lock files, scratch folders, temporary files."""
    admin, common = worktree_git_dir(draft_path), Path(repo.repo.git_dir)
    found = [p.name for p in admin.iterdir() if p.name.endswith(".lock") or p.name.startswith(SCRATCH_PREFIX)]
    found += [p.name for p in common.glob("*.writing")] + [p.name for p in (common / "refs").rglob("*.lock")]
    return found + [name for name in files_on_disk(draft_path) if name.endswith(".tmp")]


@pytest.mark.parametrize("op", ["save", "revert"])
def test_a_save_or_revert_on_a_full_disk_says_so_plainly_and_writes_nothing_however_little_is_free(repo_on_a_small_disk, op):
    repo, disk = repo_on_a_small_disk
    draft = repo.draft(OLIVIA, SCW)
    first = sha(repo, draft.branch)
    task = load_task(repo, OLIVIA, SCW)
    for rule in task["rules"]:  # text that does not compress, so that git's objects of it take several blocks
        rule["text"] = os.urandom(600).hex()
    if op == "revert":  # revert to the first version from one that differs in task.yaml and a data file
        (draft.workspace_path / "data" / "extra.csv").write_text("a,b\n" + "".join(f"{n},{n * n}\n" for n in range(3000)))
        assert repo.save(OLIVIA, SCW, {"task": task}, "a version to revert from")
    attempt = {"save": lambda: repo.save(OLIVIA, SCW, {"task": task}, "edit"), "revert": lambda: repo.revert(OLIVIA, SCW, first)}[op]
    block = os.statvfs(disk).f_frsize

    messages = set()
    for blocks in range(64):  # from nothing free up, one block at a time, until it fits: every write fails once on the way
        tip, files = sha(repo, draft.branch), files_on_disk(draft.path)
        leave_free(disk, blocks * block)
        try:
            new = attempt()
            break
        except ConfigRepoError as exc:
            messages.add(str(exc))
        finally:
            make_room(disk)
        assert sha(repo, draft.branch) == tip and files_on_disk(draft.path) == files  # nothing written
        assert gitops.status(draft.path, optional_locks=False) == "" and left_behind(repo, draft.path) == []
    else:
        pytest.fail(f"the {op} did not fit in 64 free blocks")
    assert blocks > 2, "it should have failed at 0 bytes free and at a few blocks"
    [message] = messages  # the same plain sentence, whichever write ran out of space
    assert message.startswith(f"could not {op} {SCW}: No space left on device; nothing was") and "free some space" in message and str(disk) not in message, (
        message
    )
    assert new and sha(repo, draft.branch) == new and repo.repo.commit(new).parents[0].hexsha == tip
    assert gitops.status(draft.path) == "" and left_behind(repo, draft.path) == []
    if op == "save":
        assert load_task(repo, OLIVIA, SCW) == task
    else:
        assert files_on_disk(draft.workspace_path) == files_at(repo, first, SCW)


def test_a_save_whose_worktree_cannot_take_its_file_is_saved_and_the_draft_repaired_when_next_read(config_repo, caplog):
    """After the commit point only renames remain; one that fails (a folder made by hand where task.yaml goes)
    leaves the save committed and the draft marked, so the next reader finds it repaired to that commit."""
    repo = config_repo
    draft = repo.draft(OLIVIA, SCW)
    task = load_task(repo, OLIVIA, SCW)
    task["rules"][0]["text"] = "Saved past a folder in the way."
    (draft.workspace_path / "task.yaml").unlink()
    (draft.workspace_path / "task.yaml").mkdir()  # empty, so git does not see it

    new = repo.save(OLIVIA, SCW, {"task": task}, "edit")

    assert new and sha(repo, draft.branch) == new and rule_text(repo, new, SCW, 0) == "Saved past a folder in the way."
    assert any("could not all be brought up" in r.getMessage() for r in caplog.records)
    [listed] = [d for d in repo.drafts(SCW) if d["user"] == OLIVIA.name]  # Review reads the draft's files next
    assert listed["head"] == new and gitops.status(draft.path) == ""
    assert load_task(repo, OLIVIA, SCW) == task and left_behind(repo, draft.path) == []
