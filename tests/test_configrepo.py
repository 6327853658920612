"""The config repo: drafts, save, publish, conflicts, sync, revert, undo, history, roles.

Every test runs against a real git repository created from the shipped demo
workspaces (the `config_repo` fixture), with a real bare remote named origin.
"""
from __future__ import annotations

import copy
import multiprocessing
import os
import subprocess
import threading
from pathlib import Path

import git
import pytest

from lib import workspace
from lib.access import PermissionDenied, User
from lib.configrepo import (
    MAIN,
    UNDO_DEPTH,
    ConfigRepo,
    ConfigRepoError,
    PublishConflict,
    read_file,
)
from lib.diagnostics import ValidationFailed, has_errors
from lib.yamlio import parse

WORKSPACES = Path(__file__).resolve().parent.parent / "workspaces"  # the shipped templates

OLIVIA = User("olivia", app_role="owner")  # owner of both demo workspaces
SAM = User("sam", app_role="steward")  # steward of both; may publish only gdp-explorer
VERA = User("vera")  # matches only the '*' viewers entry

SCW = "supply-chain-weekly"  # stewards_can_publish: false
GDP = "gdp-explorer"  # stewards_can_publish: true


# --------------------------------------------------------------------------- helpers


def load_task(repo: ConfigRepo, user: User, slug: str) -> dict:
    """The task.yaml content of the user's draft (a copy that is safe to change)."""
    d = repo.draft(user, slug)
    ws, diags = workspace.load(d.workspace_path)
    assert not has_errors(diags), diags
    return copy.deepcopy(ws.data["task"])


def edit_rule(repo: ConfigRepo, user: User, slug: str, index: int, text: str, message: str | None = None) -> str | None:
    """Set the text of rule `index` on the user's draft and save it."""
    task = load_task(repo, user, slug)
    task["rules"][index]["text"] = text
    return repo.save(user, slug, {"task": task}, message or f"Edit rule {index}")


def rule_text(repo: ConfigRepo, ref: str, slug: str, index: int) -> str:
    """The text of rule `index` in task.yaml at a version or branch."""
    raw = read_file(repo.repo, ref, f"{slug}/task.yaml")
    assert raw is not None
    return parse(raw.decode("utf-8")).data["rules"][index]["text"]


def sha(repo: ConfigRepo, ref: str = MAIN) -> str:
    return repo.repo.commit(ref).hexsha


def commit_count(repo: ConfigRepo, ref: str) -> int:
    return int(repo.repo.git.rev_list("--count", ref))


def files_at(repo: ConfigRepo, version: str, folder: str) -> dict[str, bytes]:
    """Every file under `folder` at `version`, read with read_file, by path relative to the folder."""
    tree = repo.repo.commit(version).tree / folder
    paths = [b.path for b in tree.traverse() if b.type == "blob"]
    return {p[len(folder) + 1:]: read_file(repo.repo, version, p) for p in paths}


def files_on_disk(folder: Path) -> dict[str, bytes]:
    """Every file under a folder (skipping the worktree's .git link), by relative path."""
    folder = Path(folder)
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in folder.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(folder).parts
    }


def assert_main_clean(repo: ConfigRepo) -> None:
    """The published checkout has no uncommitted changes and is not mid-merge."""
    assert repo.repo.git.status("--porcelain") == ""
    assert not (Path(repo.repo.git_dir) / "MERGE_HEAD").exists()


def worktree_git_dir(draft_path: Path) -> Path:
    return Path(git.Repo(draft_path).git_dir)


# --------------------------------------------------------------------------- 1. creation


def test_create_repo_has_main_valid_demo_workspaces_schemas_and_ci(config_repo):
    repo = config_repo
    assert MAIN in repo.repo.heads
    assert repo.repo.active_branch.name == MAIN
    assert commit_count(repo, MAIN) == 1
    assert {GDP, SCW} <= set(repo.slugs())
    for slug in (GDP, SCW):
        diags = workspace.validate(repo.path / slug)
        assert not has_errors(diags), [d.format() for d in diags]
    # the schemas are real files (not the symlink the templates use) and committed
    schemas_dir = repo.path / "schemas"
    assert schemas_dir.is_dir() and not schemas_dir.is_symlink()
    assert (schemas_dir / "task.schema.json").is_file()
    assert read_file(repo.repo, MAIN, "schemas/task.schema.json") == (WORKSPACES / "schemas" / "task.schema.json").read_bytes()
    ci = read_file(repo.repo, MAIN, ".github/workflows/validate.yml")
    assert ci is not None and b"dashmem validate . --json" in ci
    # the demo data files come along with the YAML
    assert read_file(repo.repo, MAIN, f"{GDP}/data/gdp.csv") == (WORKSPACES / GDP / "data" / "gdp.csv").read_bytes()
    assert_main_clean(repo)


def test_open_existing_repo_does_not_create_a_second_commit(config_repo):
    before = sha(config_repo)
    again = ConfigRepo.open_or_create(config_repo.path, WORKSPACES)
    assert again.path == config_repo.path
    assert sha(again) == before
    assert commit_count(again, MAIN) == 1


def test_open_or_create_refuses_a_non_empty_folder_that_is_not_a_repo(tmp_path):
    target = tmp_path / "not-a-repo"
    target.mkdir()
    (target / "keep.txt").write_text("precious")
    with pytest.raises(ConfigRepoError, match="not empty"):
        ConfigRepo.open_or_create(target, WORKSPACES)
    assert (target / "keep.txt").read_text() == "precious"
    assert not (target / ".git").exists()


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
    assert "# local scribble" not in read_file(repo.repo, new_sha, f"{SCW}/task.yaml").decode()
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


# --------------------------------------------------------------------------- 4. conflicting publishes


def _assert_conflict_kept_both(repo, slug, exc, main_before, first_text, second_text):
    assert f"{slug}/task.yaml" in str(exc.value)
    assert exc.value.files == [f"{slug}/task.yaml"]
    assert sha(repo) == main_before
    assert_main_clean(repo)
    # both versions are kept: the first on main, the second on sam's draft
    main_task = read_file(repo.repo, MAIN, f"{slug}/task.yaml").decode()
    sam_task = read_file(repo.repo, f"draft/sam/{slug}", f"{slug}/task.yaml").decode()
    assert first_text in main_task and second_text not in main_task
    assert second_text in sam_task and first_text not in sam_task
    # and on disk: the published checkout and sam's worktree
    assert first_text in (repo.path / slug / "task.yaml").read_text()
    assert second_text in (repo.draft(SAM, slug).workspace_path / "task.yaml").read_text()


def test_owner_publishing_stewards_conflicting_draft_raises_and_keeps_both(config_repo):
    repo = config_repo
    edit_rule(repo, OLIVIA, SCW, 0, "Olivia: gates use the corporate palette.")
    edit_rule(repo, SAM, SCW, 0, "Sam: gates are coloured by site.")
    repo.publish(OLIVIA, SCW, "Olivia's palette")
    main_before = sha(repo)

    with pytest.raises(PublishConflict) as exc:
        repo.publish_branch(OLIVIA, SCW, repo.branch_name(SAM, SCW))

    _assert_conflict_kept_both(repo, SCW, exc, main_before,
                               "Olivia: gates use the corporate palette.", "Sam: gates are coloured by site.")


def test_steward_publishing_conflicting_draft_in_gdp_raises_and_keeps_both(config_repo):
    repo = config_repo
    edit_rule(repo, OLIVIA, GDP, 1, "Olivia: drop aggregates from rankings.")
    edit_rule(repo, SAM, GDP, 1, "Sam: show aggregates in a separate table.")
    repo.publish(OLIVIA, GDP)
    main_before = sha(repo)

    with pytest.raises(PublishConflict) as exc:
        repo.publish(SAM, GDP)

    _assert_conflict_kept_both(repo, GDP, exc, main_before,
                               "Olivia: drop aggregates from rankings.", "Sam: show aggregates in a separate table.")


# --------------------------------------------------------------------------- 5. non-overlapping publishes


def test_edits_to_far_apart_rules_both_publish(config_repo):
    repo = config_repo
    edit_rule(repo, OLIVIA, SCW, 0, "Olivia edited the first rule.")
    edit_rule(repo, SAM, SCW, 5, "Sam edited the last rule.")

    first = repo.publish(OLIVIA, SCW)
    second = repo.publish_branch(OLIVIA, SCW, repo.branch_name(SAM, SCW))

    assert first != second and sha(repo) == second
    assert repo.repo.commit(second).parents[0].hexsha == first
    assert rule_text(repo, MAIN, SCW, 0) == "Olivia edited the first rule."
    assert rule_text(repo, MAIN, SCW, 5) == "Sam edited the last rule."
    assert not has_errors(workspace.validate(repo.path / SCW))
    assert_main_clean(repo)


def test_edits_to_different_files_both_publish(config_repo):
    repo = config_repo
    edit_rule(repo, OLIVIA, GDP, 0, "Olivia's format rule.")
    d = repo.draft(SAM, GDP)
    meta = copy.deepcopy(workspace.load(d.workspace_path)[0].data["workspace"])
    meta["description"] = "Sam's clearer description."
    assert repo.save(SAM, GDP, {"workspace": meta}, "Describe better")

    repo.publish(OLIVIA, GDP)
    repo.publish(SAM, GDP)  # stewards may publish gdp-explorer

    assert rule_text(repo, MAIN, GDP, 0) == "Olivia's format rule."
    assert repo.meta(GDP)["description"] == "Sam's clearer description."
    assert (repo.path / GDP / "task.yaml").read_bytes() == read_file(repo.repo, MAIN, f"{GDP}/task.yaml")
    assert_main_clean(repo)


# --------------------------------------------------------------------------- 6. sync


def _conflicting_drafts(repo):
    """Sam's draft and main changed the same rule of gdp-explorer."""
    edit_rule(repo, SAM, GDP, 2, "Sam: latest means the newest complete year.")
    edit_rule(repo, OLIVIA, GDP, 2, "Olivia: latest means the most recent year in the data.")
    repo.publish(OLIVIA, GDP)


@pytest.mark.parametrize("prefer, expected", [
    ("mine", "Sam: latest means the newest complete year."),
    ("published", "Olivia: latest means the most recent year in the data."),
])
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
    repo.publish(SAM, GDP)
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
    published = repo.publish(OLIVIA, GDP)
    assert repo.sync(SAM, GDP) == published == sha(repo, repo.branch_name(SAM, GDP))


# --------------------------------------------------------------------------- 7. revert


def test_revert_restores_old_version_byte_for_byte_as_new_commit(config_repo):
    repo = config_repo
    v1 = edit_rule(repo, OLIVIA, GDP, 0, "Version one.")
    d = repo.draft(OLIVIA, GDP)
    meta = copy.deepcopy(workspace.load(d.workspace_path)[0].data["workspace"])
    meta["description"] = "Changed in version two."
    task = load_task(repo, OLIVIA, GDP)
    task["rules"][0]["text"] = "Version two."
    task["rules"].append({"id": "added-in-two", "text": "A rule added in version two.", "author": "olivia", "created": "2026-12-01"})
    (d.workspace_path / "data" / "extra.csv").write_text("a,b\n1,2\n")  # a data file that v1 did not have
    v2 = repo.save(OLIVIA, GDP, {"workspace": meta, "task": task}, "Version two")
    v3 = edit_rule(repo, OLIVIA, GDP, 0, "Version three.")
    published = repo.publish(OLIVIA, GDP)
    history_before = len(repo.history(GDP, ref=d.branch))
    count_before = commit_count(repo, d.branch)
    assert files_at(repo, v1, GDP) != files_at(repo, v3, GDP)

    new_sha = repo.revert(OLIVIA, GDP, v1)

    assert new_sha is not None and new_sha not in (v1, v2, v3) and sha(repo, d.branch) == new_sha
    expected = files_at(repo, v1, GDP)
    assert set(expected) >= {"task.yaml", "workspace.yaml", "data/gdp.csv"}
    assert "data/extra.csv" in files_at(repo, v3, GDP) and "data/extra.csv" not in expected
    assert files_at(repo, new_sha, GDP) == expected
    assert files_on_disk(d.workspace_path) == expected
    assert len(repo.history(GDP, ref=d.branch)) == history_before + 1
    assert commit_count(repo, d.branch) == count_before + 1
    for old in (v1, v2, v3, published):
        assert repo.repo.is_ancestor(old, new_sha)
    assert repo.repo.commit(new_sha).author.name == "olivia"
    # main is untouched until the revert is published; then main matches v1
    assert rule_text(repo, MAIN, GDP, 0) == "Version three."
    repo.publish(OLIVIA, GDP, "Back to version one")
    assert files_at(repo, MAIN, GDP) == expected
    assert files_on_disk(repo.path / GDP) == expected


def test_revert_to_unknown_version_raises(config_repo):
    with pytest.raises(ConfigRepoError, match="unknown version"):
        config_repo.revert(OLIVIA, GDP, "0" * 40)


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


# --------------------------------------------------------------------------- 9. history and diff


def test_history_lists_publishes_newest_first_for_that_workspace_only(config_repo):
    repo = config_repo
    olivia = User("olivia", display_name="Olivia Owner", email="olivia@example.com", app_role="owner")
    edit_rule(repo, olivia, GDP, 0, "First published text.")
    first = repo.publish(olivia, GDP, "Publish first")
    edit_rule(repo, olivia, GDP, 0, "Second published text.")
    second = repo.publish(olivia, GDP, "Publish second")

    versions = repo.history(GDP)
    assert [v.sha for v in versions] == [second, first, versions[-1].sha]
    assert versions[-1].action == "create"
    assert [v.message for v in versions[:2]] == ["Publish second", "Publish first"]
    assert all(v.author == "Olivia Owner" and v.email == "olivia@example.com" for v in versions[:2])
    assert all(v.action == "publish" for v in versions[:2])

    other = repo.history(SCW)
    assert {first, second}.isdisjoint(v.sha for v in other)
    assert [v.action for v in other] == ["create"]


def test_diff_between_versions_shows_changed_lines_of_task_only(config_repo):
    repo = config_repo
    old_text = rule_text(repo, MAIN, GDP, 2)
    edit_rule(repo, OLIVIA, GDP, 2, "Latest means the newest year in the data.")
    before, after = sha(repo), repo.publish(OLIVIA, GDP)

    diffs = repo.diff(GDP, before, after)

    assert [(d.path, d.status) for d in diffs] == [("task.yaml", "modified")]
    patch_lines = diffs[0].patch.splitlines()
    removed = [l for l in patch_lines if l.startswith("-") and not l.startswith("---")]
    added = [l for l in patch_lines if l.startswith("+") and not l.startswith("+++")]
    assert len(removed) == 1 and "Latest" in removed[0] and "most recent year present" in removed[0]
    assert old_text.startswith('"Latest" means the most recent year present')
    assert added == ["+    text: Latest means the newest year in the data."]
    assert repo.diff(SCW, before, after) == []
    assert repo.diff(GDP, after, after) == []


# --------------------------------------------------------------------------- 10. propose


def test_propose_pushes_draft_branch_to_origin(config_repo):
    repo = config_repo
    edit_rule(repo, SAM, SCW, 5, "Sam proposes ISO weeks everywhere.")
    branch = repo.branch_name(SAM, SCW)

    assert repo.propose(SAM, SCW) == branch

    remote = git.Repo(repo.repo.remotes.origin.url)
    assert remote.bare
    assert remote.commit(f"refs/heads/{branch}").hexsha == sha(repo, branch)
    # proposing again after another save updates the remote branch
    edit_rule(repo, SAM, SCW, 5, "Sam proposes ISO weeks, second try.")
    repo.propose(SAM, SCW)
    assert remote.commit(f"refs/heads/{branch}").hexsha == sha(repo, branch)


def test_propose_without_remote_raises_clear_error(config_repo):
    repo = config_repo
    edit_rule(repo, SAM, SCW, 5, "Nowhere to push this.")
    with pytest.raises(ConfigRepoError, match="no remote 'upstream'"):
        repo.propose(SAM, SCW, remote="upstream")
    repo.repo.delete_remote("origin")
    with pytest.raises(ConfigRepoError, match="no remote 'origin'"):
        repo.propose(SAM, SCW)


def test_propose_without_draft_raises(config_repo):
    with pytest.raises(ConfigRepoError, match="no draft"):
        config_repo.propose(SAM, SCW)


# --------------------------------------------------------------------------- 11. roles


def test_viewer_cannot_draft_save_publish_revert_or_undo(config_repo):
    repo = config_repo
    task = load_task(repo, OLIVIA, GDP)
    main_before = sha(repo)
    for slug in (GDP, SCW):
        with pytest.raises(PermissionDenied):
            repo.draft(VERA, slug)
        with pytest.raises(PermissionDenied):
            repo.save(VERA, slug, {"task": task}, "sneaky")
        with pytest.raises(PermissionDenied):
            repo.publish(VERA, slug)
        with pytest.raises(PermissionDenied):
            repo.revert(VERA, slug, main_before)
        with pytest.raises(PermissionDenied):
            repo.undo(VERA, slug)
        with pytest.raises(PermissionDenied):
            repo.propose(VERA, slug)
    assert not any(h.name.startswith("draft/vera/") for h in repo.repo.heads)
    assert not (repo.drafts_root / "vera").exists()
    assert sha(repo) == main_before


def test_steward_cannot_publish_where_policy_forbids(config_repo):
    repo = config_repo
    edit_rule(repo, SAM, SCW, 5, "Sam's change waiting for an owner.")
    main_before = sha(repo)
    with pytest.raises(PermissionDenied, match="policy"):
        repo.publish(SAM, SCW)
    with pytest.raises(PermissionDenied, match="policy"):
        repo.publish_branch(SAM, SCW, repo.branch_name(SAM, SCW))
    assert sha(repo) == main_before
    # an owner may publish it
    repo.publish_branch(OLIVIA, SCW, repo.branch_name(SAM, SCW))
    assert rule_text(repo, MAIN, SCW, 5) == "Sam's change waiting for an owner."


def test_steward_can_publish_where_policy_allows(config_repo):
    repo = config_repo
    edit_rule(repo, SAM, GDP, 0, "Sam publishes this himself.")
    new_main = repo.publish(SAM, GDP)
    assert sha(repo) == new_main
    assert repo.repo.commit(new_main).author.name == "sam"
    assert rule_text(repo, MAIN, GDP, 0) == "Sam publishes this himself."
    assert "Sam publishes this himself." in (repo.path / GDP / "task.yaml").read_text()


def test_publish_branch_cannot_carry_changes_to_another_workspace(config_repo):
    """Sam may publish gdp-explorer but not supply-chain-weekly: naming gdp-explorer
    while handing over his supply-chain draft must not publish it."""
    repo = config_repo
    edit_rule(repo, SAM, SCW, 5, "Sam sneaks this past the owner.")
    main_before = sha(repo)
    with pytest.raises((PermissionDenied, ConfigRepoError), match=f"{SCW}|only their own draft"):
        repo.publish_branch(SAM, GDP, repo.branch_name(SAM, SCW))
    assert sha(repo) == main_before
    assert "sneaks" not in rule_text(repo, MAIN, SCW, 5)
    assert_main_clean(repo)


def test_publish_with_nothing_new_raises(config_repo):
    repo = config_repo
    repo.draft(OLIVIA, GDP)
    with pytest.raises(ConfigRepoError, match="nothing to publish"):
        repo.publish(OLIVIA, GDP)
    with pytest.raises(ConfigRepoError, match="no draft"):
        repo.publish(OLIVIA, SCW)


@pytest.mark.parametrize("user", [VERA, User("olivia")], ids=["vera", "olivia-with-viewer-app-role"])
def test_viewer_app_role_cannot_create_workspace(config_repo, user):
    with pytest.raises(PermissionDenied, match="create workspaces"):
        config_repo.new_workspace(user, "team-kpis", "Team KPIs")
    assert not any(h.name.endswith("/team-kpis") for h in config_repo.repo.heads)
    assert not (config_repo.drafts_root / user.name / "team-kpis").exists()


# --------------------------------------------------------------------------- 12. bad names


@pytest.mark.parametrize("bad", ["../x", "..", "x/../../x", "/tmp/x", "X", "with space", "", "-x"])
def test_bad_workspace_names_are_refused_and_create_nothing(config_repo, tmp_path, bad):
    repo = config_repo
    listing_before = sorted(p.name for p in tmp_path.iterdir())
    heads_before = sorted(h.name for h in repo.repo.heads)

    with pytest.raises(workspace.InvalidName):
        repo.new_workspace(OLIVIA, bad, "X")
    with pytest.raises(workspace.InvalidName):
        repo.draft(OLIVIA, bad)

    assert not (tmp_path / "x").exists()
    assert not (repo.path.parent / "config-repo.drafts" / "x").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == listing_before
    assert sorted(h.name for h in repo.repo.heads) == heads_before
    assert_main_clean(repo)


@pytest.mark.parametrize("template, error", [
    ("../config-repo/gdp-explorer", workspace.InvalidName),
    ("no-such-template", ConfigRepoError),
])
def test_bad_template_is_refused_and_creates_nothing(config_repo, template, error):
    repo = config_repo
    heads_before = sorted(h.name for h in repo.repo.heads)
    with pytest.raises(error):
        repo.new_workspace(OLIVIA, "copy-of-gdp", "Copy", template=template)
    assert sorted(h.name for h in repo.repo.heads) == heads_before
    assert not (repo.drafts_root / "olivia" / "copy-of-gdp").exists()


# --------------------------------------------------------------------------- 13. invalid draft


@pytest.mark.parametrize("broken", [
    "rules: [\n  - id: oops\n",  # not YAML
    "goal: fine\nrules:\n  - id: no-text\n    author: olivia\n    created: '2026-12-01'\n",  # rule without text
], ids=["malformed-yaml", "missing-text"])
def test_publishing_invalid_draft_is_refused_and_main_unchanged(config_repo, broken):
    repo = config_repo
    d = repo.draft(OLIVIA, SCW)
    (d.workspace_path / "task.yaml").write_text(broken, encoding="utf-8")
    wt = git.Repo(d.path)
    wt.git.add("--all")
    wt.git.commit("-q", "-m", "Broken by hand", env={"GIT_AUTHOR_NAME": "olivia", "GIT_AUTHOR_EMAIL": "o@x",
                                                     "GIT_COMMITTER_NAME": "olivia", "GIT_COMMITTER_EMAIL": "o@x"})
    main_before = sha(repo)
    main_files = files_on_disk(repo.path / SCW)

    with pytest.raises(ValidationFailed):
        repo.publish(OLIVIA, SCW)

    assert sha(repo) == main_before
    assert files_on_disk(repo.path / SCW) == main_files
    assert_main_clean(repo)
    assert read_file(repo.repo, d.branch, f"{SCW}/task.yaml") == broken.encode()


def _title_with_a_figure_from_the_data(repo: ConfigRepo) -> tuple[dict, str]:
    """The draft's dashboard with the total of `actual` (what the volume card shows) written into its title."""
    import csv

    with open(WORKSPACES / SCW / "data" / "gates.csv", newline="") as handle:
        figure = f"{sum(int(row['actual']) for row in csv.DictReader(handle)):,}"
    dashboard = copy.deepcopy(workspace.load(repo.draft(OLIVIA, SCW).workspace_path)[0].data["dashboard"])
    card = next(c for c in dashboard["components"] if c["id"] == "kpi_volume")
    card["title"] = f"Units through the gates ({figure} this week)"
    return dashboard, figure


def test_publishing_a_draft_whose_dashboard_checks_fail_is_refused_naming_the_check(config_repo):
    """Publish runs the full checks, on the data, on the merged workspace, not only the schemas: a figure
    from the data typed into a title would go stale at the next refresh (check.literal_values)."""
    repo = config_repo
    dashboard, figure = _title_with_a_figure_from_the_data(repo)
    repo.save(OLIVIA, SCW, {"dashboard": dashboard}, "A figure in a title")  # saving checks the schemas only
    main_before = sha(repo)

    with pytest.raises(ValidationFailed) as info:
        repo.publish(OLIVIA, SCW)

    assert [d.id for d in info.value.diagnostics] == ["check.literal_values"]
    assert figure in str(info.value) and f"{SCW}/dashboard.yaml:" in str(info.value)
    assert "dashmem-scratch" not in str(info.value)  # files named as in the repo, not the temporary copy
    assert sha(repo) == main_before
    assert figure not in (repo.path / SCW / "dashboard.yaml").read_text()
    assert_main_clean(repo)


def test_publish_checks_the_data_of_an_uploaded_source_of_the_workspace(config_repo, tmp_path, monkeypatch):
    """The merged workspace is checked in a folder named after it, so its uploads (kept per workspace
    name, outside git) are found: the data checks run on them, and find the figure in the title."""
    from lib import settings
    from lib.connectors.csv_source import store_upload

    monkeypatch.setenv("DASHMEM_CACHE_DIR", str(tmp_path / "cache"))
    repo = config_repo
    upload = store_upload(settings.uploads_dir(SCW), "gates.csv", (WORKSPACES / SCW / "data" / "gates.csv").read_bytes())
    d = repo.draft(OLIVIA, SCW)
    sources = copy.deepcopy(workspace.load(d.workspace_path)[0].data["sources"])
    sources["sources"][0]["path"] = upload
    dashboard, figure = _title_with_a_figure_from_the_data(repo)
    repo.save(OLIVIA, SCW, {"sources": sources, "dashboard": dashboard}, "Read the uploaded file; a figure in a title")
    (d.workspace_path / "data" / "gates.csv").unlink()  # only the upload has the data now
    repo.save(OLIVIA, SCW, {}, "drop the committed copy")

    with pytest.raises(ValidationFailed) as info:
        repo.publish(OLIVIA, SCW)
    assert [d.id for d in info.value.diagnostics] == ["check.literal_values"]

    dashboard["components"][1]["title"] = "Units through the gates"
    repo.save(OLIVIA, SCW, {"dashboard": dashboard}, "no figure")
    repo.publish(OLIVIA, SCW)
    assert read_file(repo.repo, MAIN, f"{SCW}/sources.yaml").decode().count(upload) == 1
    assert_main_clean(repo)


def test_a_workspace_whose_policy_does_not_require_validity_publishes_with_failing_checks(config_repo):
    repo = config_repo
    d = repo.draft(OLIVIA, SCW)
    meta = copy.deepcopy(workspace.load(d.workspace_path)[0].data["workspace"])
    meta["policy"]["require_valid_to_publish"] = False
    repo.save(OLIVIA, SCW, {"workspace": meta}, "validity is advisory here")
    repo.publish(OLIVIA, SCW)
    dashboard, figure = _title_with_a_figure_from_the_data(repo)
    repo.save(OLIVIA, SCW, {"dashboard": dashboard}, "A figure in a title")

    repo.publish(OLIVIA, SCW)

    assert figure in (repo.path / SCW / "dashboard.yaml").read_text()
    assert_main_clean(repo)


# --------------------------------------------------------------------------- 14. concurrent publishes


def _prepare_two_drafts(repo):
    edit_rule(repo, OLIVIA, GDP, 0, "Concurrent change to gdp.")
    edit_rule(repo, OLIVIA, SCW, 0, "Concurrent change to supply chain.")


def _assert_both_published(repo, start, results):
    assert sorted(results) == sorted([(GDP, "ok"), (SCW, "ok")]), results
    assert rule_text(repo, MAIN, GDP, 0) == "Concurrent change to gdp."
    assert rule_text(repo, MAIN, SCW, 0) == "Concurrent change to supply chain."
    # two publish merges, one after the other, on main's first-parent line
    chain = list(repo.repo.iter_commits(MAIN, first_parent=True))
    assert len(chain) == 3 and chain[-1].hexsha == start
    assert all(len(c.parents) == 2 for c in chain[:2])
    assert_main_clean(repo)
    assert "Concurrent change to gdp." in (repo.path / GDP / "task.yaml").read_text()
    assert "Concurrent change to supply chain." in (repo.path / SCW / "task.yaml").read_text()


def _publish_in_process(path, slug, barrier, results):
    repo = ConfigRepo(path)
    barrier.wait(timeout=30)
    try:
        repo.publish(OLIVIA, slug)
        results.put((slug, "ok"))
    except Exception as exc:  # reported to the parent
        results.put((slug, repr(exc)))


def test_two_processes_publishing_at_once_are_serialised(config_repo):
    repo = config_repo
    _prepare_two_drafts(repo)
    start = sha(repo)
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_publish_in_process, args=(repo.path, slug, barrier, results)) for slug in (GDP, SCW)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    _assert_both_published(repo, start, [results.get(timeout=5) for _ in procs])


def test_two_threads_sharing_one_config_repo_publish_at_once(config_repo):
    """The app keeps one ConfigRepo for all sessions (st.cache_resource), so two
    users publishing at once are two threads on the same object; a third
    thread keeps reading, like a viewer browsing the history meanwhile."""
    repo = config_repo
    _prepare_two_drafts(repo)
    start = sha(repo)
    barrier, results, stop, read_errors = threading.Barrier(3), [], threading.Event(), []

    def publish(slug):
        barrier.wait(timeout=30)
        try:
            repo.publish(OLIVIA, slug)
            results.append((slug, "ok"))
        except Exception as exc:
            results.append((slug, repr(exc)))

    def browse():
        barrier.wait(timeout=30)
        while not stop.is_set():
            try:
                assert repo.meta(GDP)["name"] == "GDP explorer"
                assert repo.history(SCW)
            except Exception as exc:
                read_errors.append(repr(exc))
                return

    threads = [threading.Thread(target=publish, args=(slug,), daemon=True) for slug in (GDP, SCW)]
    reader = threading.Thread(target=browse, daemon=True)
    for t in threads + [reader]:
        t.start()
    for t in threads:
        t.join(timeout=20)
    stop.set()
    reader.join(timeout=20)
    assert not any(t.is_alive() for t in threads + [reader]), "a publish or read hung"
    assert read_errors == []
    _assert_both_published(repo, start, results)


# --------------------------------------------------------------------------- 15. new workspaces


def test_new_blank_workspace_is_valid_on_the_creators_draft(config_repo):
    repo = config_repo
    main_before = sha(repo)

    d = repo.new_workspace(OLIVIA, "team-kpis", "Team KPIs")

    assert d.branch == "draft/olivia/team-kpis" and d.branch in repo.repo.heads
    assert d.path == repo.drafts_root / "olivia" / "team-kpis"
    assert d.workspace_path == d.path / "team-kpis"
    ws, diags = workspace.load(d.workspace_path)
    assert not has_errors(diags), [x.format() for x in diags]
    assert ws.data["workspace"]["name"] == "Team KPIs"
    assert ws.data["workspace"]["access"]["owners"] == ["olivia"]
    assert ws.data["task"]["rules"] == []
    head = repo.repo.commit(d.branch)
    assert head.author.name == "olivia"
    assert sorted(repo.repo.git.diff("--name-only", f"{d.branch}~1", d.branch).splitlines()) == sorted(
        f"team-kpis/{name}" for name in ("workspace.yaml", "task.yaml", "sources.yaml", "output.yaml"))
    # not published yet
    assert sha(repo) == main_before
    assert not (repo.path / "team-kpis").exists()


def test_new_workspace_from_template_copies_data_and_lists_creator_as_owner(config_repo):
    repo = config_repo
    d = repo.new_workspace(SAM, "gdp-copy", "GDP copy", template=GDP)

    ws, diags = workspace.load(d.workspace_path)
    assert not has_errors(diags), [x.format() for x in diags]
    assert ws.data["workspace"]["name"] == "GDP copy"
    assert ws.data["workspace"]["access"]["owners"] == ["sam", "olivia"]
    assert (d.workspace_path / "data" / "gdp.csv").read_bytes() == (repo.path / GDP / "data" / "gdp.csv").read_bytes()
    committed = files_at(repo, d.branch, "gdp-copy")
    template = files_at(repo, MAIN, GDP)
    assert set(committed) == set(template)
    for name in set(template) - {"workspace.yaml"}:
        assert committed[name] == template[name], name
    assert repo.repo.commit(d.branch).author.name == "sam"


def test_new_workspace_can_be_edited_and_published_by_its_creator(config_repo):
    repo = config_repo
    d = repo.new_workspace(OLIVIA, "team-kpis", "Team KPIs")
    task = {"goal": "Track the team's KPIs.", "rules": [
        {"id": "weekly", "text": "Report weekly.", "author": "olivia", "created": "2026-12-01"}]}
    assert repo.save(OLIVIA, "team-kpis", {"task": task}, "First rule") is not None

    repo.publish(OLIVIA, "team-kpis")

    assert "team-kpis" in repo.slugs()
    assert rule_text(repo, MAIN, "team-kpis", 0) == "Report weekly."
    assert not has_errors(workspace.validate(repo.path / "team-kpis"))
    assert files_on_disk(repo.path / "team-kpis") == files_on_disk(d.workspace_path)
    assert_main_clean(repo)


def test_new_workspace_with_existing_name_raises(config_repo):
    repo = config_repo
    heads_before = sorted(h.name for h in repo.repo.heads)
    with pytest.raises(ConfigRepoError, match="already exists"):
        repo.new_workspace(OLIVIA, GDP, "Another GDP")
    assert sorted(h.name for h in repo.repo.heads) == heads_before


def test_owner_rejects_a_draft_which_is_kept_under_a_new_name(config_repo):
    repo = config_repo
    sam, olivia = User("sam", app_role="steward"), User("olivia", app_role="owner")
    d = repo.draft(sam, "supply-chain-weekly")
    ws, _ = workspace.load(d.workspace_path)
    ws.data["task"]["rules"][0]["text"] = "Rejected idea."
    sha = repo.save(sam, "supply-chain-weekly", {"task": ws.data["task"]}, "an idea")
    with pytest.raises(PermissionDenied):
        repo.reject(sam, "supply-chain-weekly", "draft/sam/supply-chain-weekly")
    kept = repo.reject(olivia, "supply-chain-weekly", "draft/sam/supply-chain-weekly")
    assert kept.startswith("rejected/sam/supply-chain-weekly/")
    assert "draft/sam/supply-chain-weekly" not in repo.repo.heads
    assert repo.repo.heads[kept].commit.hexsha == sha  # nothing lost
    assert not (repo.drafts_root / "sam" / "supply-chain-weekly").exists()
    assert [d for d in repo.drafts() if d["slug"] == "supply-chain-weekly"] == []


def test_steward_cannot_change_access_or_policy(config_repo):
    repo = config_repo
    sam, olivia = User("sam", app_role="steward"), User("olivia", app_role="owner")
    d = repo.draft(sam, "gdp-explorer")
    meta = workspace.load(d.workspace_path)[0].data["workspace"]
    grab = {**meta, "access": {**meta["access"], "owners": meta["access"]["owners"] + ["sam"]}}
    with pytest.raises(PermissionDenied, match="manage_access"):
        repo.save(sam, "gdp-explorer", {"workspace": grab}, "make me owner")
    assert repo.save(sam, "gdp-explorer", {"workspace": {**meta, "description": "Better words."}}, "describe") is not None
    assert repo.save(olivia, "gdp-explorer", {"workspace": {**workspace.load(repo.draft(olivia, "gdp-explorer").workspace_path)[0].data["workspace"],
                                                            "policy": {"stewards_can_publish": False}}}, "tighten") is not None


def _all_repo_bytes(repo_path: Path) -> bytes:
    """Every file under the repo, with loose git objects decompressed, plus every commit's patch."""
    import zlib

    chunks = []
    for p in repo_path.rglob("*"):
        if p.is_file():
            data = p.read_bytes()
            if "objects" in p.parts:
                try:
                    data = zlib.decompress(data)
                except zlib.error:
                    pass
            chunks.append(data)
    if (repo_path / ".git").is_dir():
        chunks.append(git.Repo(repo_path).git.log("-p", "--all").encode())
    return b"\n".join(chunks)


def test_a_source_password_is_saved_only_as_a_reference(config_repo, monkeypatch):
    repo = config_repo
    olivia = User("olivia", app_role="owner")
    secret = "s3cr3t-Pa55word-9921"
    monkeypatch.setenv("REPORTING_DB_PASSWORD", secret)
    d = repo.draft(olivia, "gdp-explorer")
    sources = workspace.load(d.workspace_path)[0].data["sources"]
    with_ref = {"sources": {"sources": sources["sources"] + [{"name": "orders", "type": "sql", "url": "postgresql://reporting@127.0.0.1/test",
                                                  "password": "env:REPORTING_DB_PASSWORD", "table": "orders"}]}}
    assert repo.save(olivia, "gdp-explorer", with_ref, "Connect orders") is not None
    head = repo.repo.heads["draft/olivia/gdp-explorer"].commit.hexsha
    literal = {"sources": {"sources": sources["sources"] + [{"name": "orders", "type": "sql", "url": "postgresql://reporting@127.0.0.1/test",
                                                 "password": secret, "table": "orders"}]}}
    with pytest.raises(ValidationFailed) as info:
        repo.save(olivia, "gdp-explorer", literal, "Oops")
    assert secret not in str(info.value)
    in_url = {"sources": {"sources": sources["sources"] + [{"name": "orders", "type": "sql", "url": f"postgresql://reporting:{secret}@127.0.0.1/test",
                                                "table": "orders"}]}}
    with pytest.raises(ValidationFailed) as info:
        repo.save(olivia, "gdp-explorer", in_url, "Oops again")
    assert secret not in str(info.value)
    assert repo.repo.heads["draft/olivia/gdp-explorer"].commit.hexsha == head
    repo.publish(olivia, "gdp-explorer")
    everything = _all_repo_bytes(repo.path) + _all_repo_bytes(repo.drafts_root)
    assert b"env:REPORTING_DB_PASSWORD" in everything
    assert secret.encode() not in everything


def _restrict_gdp_to_owner(repo):
    olivia = User("olivia", app_role="owner")
    d = repo.draft(olivia, "gdp-explorer")
    meta = workspace.load(d.workspace_path)[0].data["workspace"]
    meta["access"] = {"owners": ["olivia"], "stewards": ["sam"], "viewers": ["olivia"]}
    repo.save(olivia, "gdp-explorer", {"workspace": meta}, "restrict")
    repo.publish(olivia, "gdp-explorer")
    return olivia, meta


def test_revert_cannot_smuggle_an_access_change_into_main(config_repo):
    repo = config_repo
    sam = User("sam", app_role="steward")
    before = repo.history("gdp-explorer")[-1].sha  # the template version: viewers ['*']
    olivia, meta = _restrict_gdp_to_owner(repo)
    repo.revert(sam, "gdp-explorer", before)  # a steward's revert brings the old access list back
    with pytest.raises(PermissionDenied, match="manage_access"):
        repo.publish(sam, "gdp-explorer")
    assert repo.meta("gdp-explorer")["access"]["viewers"] == ["olivia"]
    assert not repo.repo.is_dirty(untracked_files=True)


def test_stewards_publish_only_their_own_draft_and_nobody_publishes_a_rejected_one(config_repo):
    repo = config_repo
    sam, ann, olivia = User("sam", app_role="steward"), User("ann", app_role="steward"), User("olivia", app_role="owner")
    d = repo.draft(olivia, "gdp-explorer")
    meta = workspace.load(d.workspace_path)[0].data["workspace"]
    meta["access"]["stewards"] = ["sam", "ann"]
    repo.save(olivia, "gdp-explorer", {"workspace": meta}, "add ann")
    repo.publish(olivia, "gdp-explorer")
    d = repo.draft(ann, "gdp-explorer")
    task = workspace.load(d.workspace_path)[0].data["task"]
    task["goal"] = "WIP, not ready"
    repo.save(ann, "gdp-explorer", {"task": task}, "wip")
    with pytest.raises(PermissionDenied, match="only their own draft"):
        repo.publish_branch(sam, "gdp-explorer", "draft/ann/gdp-explorer")
    kept = repo.reject(olivia, "gdp-explorer", "draft/ann/gdp-explorer")
    with pytest.raises(ConfigRepoError, match="was rejected"):
        repo.publish_branch(olivia, "gdp-explorer", kept)
    assert "WIP" not in repo.published_path("gdp-explorer").joinpath("task.yaml").read_text()


def test_copying_a_template_needs_access_to_it(config_repo):
    repo = config_repo
    olivia, _ = _restrict_gdp_to_owner(repo)
    outsider = User("zed", app_role="steward")
    with pytest.raises(PermissionDenied):
        repo.new_workspace(outsider, "my-copy", "Copy", template="gdp-explorer")
    assert "draft/zed/my-copy" not in repo.repo.heads
    with pytest.raises(PermissionDenied):
        repo.import_category(outsider, "gdp-explorer", "supply-chain-weekly", "task")


def test_creating_a_workspace_never_overwrites_your_unpublished_one(config_repo):
    repo = config_repo
    sam = User("sam", app_role="steward")
    repo.new_workspace(sam, "team-kpis", "Team KPIs")
    d = repo.draft(sam, "team-kpis")
    task = workspace.load(d.workspace_path)[0].data["task"]
    task["goal"] = "Keep me"
    repo.save(sam, "team-kpis", {"task": task}, "goal")
    with pytest.raises(ConfigRepoError, match="already exists"):
        repo.new_workspace(sam, "team-kpis", "Team KPIs")
    assert workspace.load(d.workspace_path)[0].data["task"]["goal"] == "Keep me"


def test_import_one_category(config_repo):
    repo = config_repo
    olivia = User("olivia", app_role="owner")
    sha = repo.import_category(olivia, "supply-chain-weekly", "gdp-explorer", "task")
    assert sha
    draft_task = workspace.load(repo.draft(olivia, "gdp-explorer").workspace_path)[0].data["task"]
    assert draft_task == workspace.load(repo.published_path("supply-chain-weekly"))[0].data["task"]


def test_a_failed_new_workspace_leaves_the_name_free(config_repo):
    repo = config_repo
    sam = User("sam", app_role="steward")
    with pytest.raises(ValidationFailed):
        repo.new_workspace(sam, "team-kpis", "T" * 81)
    assert "draft/sam/team-kpis" not in repo.repo.heads
    assert repo.new_workspace(sam, "team-kpis", "Team KPIs").workspace_path.is_dir()


def test_a_save_that_fails_on_a_full_disk_says_so_even_when_its_cleanup_fails_too(config_repo, monkeypatch):
    import errno

    from lib import drafts as module  # where a save runs git
    from lib import workspace as ws_module

    repo = config_repo
    repo.draft(SAM, SCW)

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    real_git = module._git

    def git_fails_on_reset(path, *args, **kwargs):
        if args and args[0] == "reset":
            raise git.GitCommandError(["git", "reset"], 128, b"fatal: Unable to create index.lock")
        return real_git(path, *args, **kwargs)

    monkeypatch.setattr(ws_module, "save", full)
    monkeypatch.setattr(module, "_git", git_fails_on_reset)
    with pytest.raises(ConfigRepoError) as exc:
        repo.save(SAM, SCW, {"task": {"goal": "x", "rules": []}}, "edit")
    assert str(exc.value) == f"could not save {SCW}: No space left on device; nothing was saved"


# --------------------------------------------------------------------------- reading long histories


def _history_read_commit_by_commit(repo: ConfigRepo, slug: str, ref: str, limit: int) -> list:
    """What `history` returned when it read each commit object through GitPython (the reference)."""
    from lib.history import version

    return [version(c) for c in repo.repo.iter_commits(ref, paths=slug, max_count=limit, first_parent=(ref == MAIN))]


def test_history_reads_the_same_versions_as_commit_by_commit(config_repo):
    repo = config_repo
    edit_rule(repo, SAM, GDP, 0, "first change")
    repo.publish(SAM, GDP)
    # A hand-made commit: a non-UTC offset, a name beyond ASCII, a subject, a body and dashmem's trailers.
    task = repo.path / GDP / "task.yaml"
    task.write_text(task.read_text() + "# by hand\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "Jörg Ünal", "GIT_AUTHOR_EMAIL": "j@example.org",
           "GIT_AUTHOR_DATE": "2024-03-01T10:00:00-0730", "GIT_COMMITTER_NAME": "Jörg Ünal", "GIT_COMMITTER_EMAIL": "j@example.org"}
    subprocess.run(["git", "commit", "-q", "-a", "-F", "-"], cwd=repo.path, env=env, check=True, text=True,
                   input="Änderung am Task\n\nwhy it changed\n\nDashmem-Action: save\nDashmem-Workspace: gdp-explorer\n")
    edit_rule(repo, SAM, GDP, 0, "second change on the draft")
    branch = repo.branch_name(SAM, GDP)
    for ref in (MAIN, branch):
        for limit in (1, 2, 100):
            assert repo.history(GDP, ref, limit) == _history_read_commit_by_commit(repo, GDP, ref, limit)
    newest = repo.history(GDP)[0]
    assert (newest.author, newest.date, newest.message, newest.action) == ("Jörg Ünal", "2024-03-01T10:00:00-07:30", "Änderung am Task", "save")
    assert repo.history("no-such-workspace") == []



def _undo_stack_from_500_commits(repo: ConfigRepo, user: User, slug: str) -> list[str]:
    """What `undo_stack` returned when it read the newest 500 first-parent commits every time (the reference)."""
    from lib.history import ACTION_TRAILER, WORKSPACE_TRAILER, trailer

    stack: list[str] = []
    for commit in reversed(list(repo.repo.iter_commits(repo.branch_name(user, slug), first_parent=True, max_count=500))):
        action, touched = trailer(commit, ACTION_TRAILER), trailer(commit, WORKSPACE_TRAILER) == slug
        if touched and action in ("save", "revert"):
            stack.append(commit.hexsha)
            del stack[: max(0, len(stack) - (UNDO_DEPTH + 1))]
        elif touched and action == "undo":
            if len(stack) > 1:
                stack.pop()
        elif action not in ("save", "revert", "undo"):
            stack = [commit.hexsha]
    return stack


def test_the_undo_stack_reads_only_back_to_where_undo_starts_afresh_and_says_the_same(config_repo):
    repo = config_repo
    assert repo.undo_stack(SAM, GDP) == []
    for i in range(3):
        edit_rule(repo, SAM, GDP, 0, f"edit {i}")
    edit_rule(repo, SAM, SCW, 0, "another workspace's draft")  # a save of another workspace on its own branch
    repo.undo(SAM, GDP)
    edit_rule(repo, SAM, GDP, 0, "after the undo")
    assert repo.undo_stack(SAM, GDP) == _undo_stack_from_500_commits(repo, SAM, GDP)
    assert len(repo.undo_stack(SAM, GDP)) == 4
    repo.publish(SAM, GDP)
    assert repo.undo_stack(SAM, GDP) == _undo_stack_from_500_commits(repo, SAM, GDP) and len(repo.undo_stack(SAM, GDP)) == 1
    for i in range(UNDO_DEPTH + 3):  # more saves than the undo depth keeps
        edit_rule(repo, SAM, GDP, 1, f"many {i}")
    assert repo.undo_stack(SAM, GDP) == _undo_stack_from_500_commits(repo, SAM, GDP)
    assert len(repo.undo_stack(SAM, GDP)) == UNDO_DEPTH + 1
