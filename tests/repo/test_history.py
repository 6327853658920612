"""History (lib/repo/history.py, through ConfigRepo): revert, the list of versions, diffs, long histories.

Against a real git repository made from the shipped demo workspaces (the `config_repo` fixture).
"""

from __future__ import annotations

import copy
import os
import subprocess

import pytest

from lib.memory import workspace
from lib.memory.yamlio import parse
from lib.ops import publish
from lib.repo.configrepo import ConfigRepo
from lib.repo.drafts import UNDO_DEPTH
from lib.repo.gitops import ConfigRepoError
from lib.repo.history import MAIN
from lib.roles.access import User
from tests.configrepo_helpers import (
    GDP,
    OLIVIA,
    SAM,
    SCW,
    commit_count,
    edit_rule,
    files_at,
    files_on_disk,
    load_task,
    rule_text,
    sha,
)

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
    assert v1 is not None and v3 is not None  # each edit changed the rule
    published = publish.publish(repo, OLIVIA, GDP)
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
    publish.publish(repo, OLIVIA, GDP, "Back to version one")
    assert files_at(repo, MAIN, GDP) == expected
    assert files_on_disk(repo.path / GDP) == expected


def test_revert_to_unknown_version_raises(config_repo):
    with pytest.raises(ConfigRepoError, match="unknown version"):
        config_repo.revert(OLIVIA, GDP, "0" * 40)


# --------------------------------------------------------------------------- 9. history and diff


def test_history_lists_publishes_newest_first_for_that_workspace_only(config_repo):
    repo = config_repo
    olivia = User("olivia", display_name="Olivia Owner", email="olivia@example.com", app_role="owner")
    edit_rule(repo, olivia, GDP, 0, "First published text.")
    first = publish.publish(repo, olivia, GDP, "Publish first")
    edit_rule(repo, olivia, GDP, 0, "Second published text.")
    second = publish.publish(repo, olivia, GDP, "Publish second")

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
    before, after = sha(repo), publish.publish(repo, OLIVIA, GDP)

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


# --------------------------------------------------------------------------- reading long histories


def _history_read_commit_by_commit(repo: ConfigRepo, slug: str, ref: str, limit: int) -> list:
    """What `history` returned when it read each commit object through GitPython (the reference)."""
    from lib.repo.history import version

    return [version(c) for c in repo.repo.iter_commits(ref, paths=slug, max_count=limit, first_parent=(ref == MAIN))]


def test_history_reads_the_same_versions_as_commit_by_commit(config_repo):
    repo = config_repo
    edit_rule(repo, SAM, GDP, 0, "first change")
    publish.publish(repo, SAM, GDP)
    # A hand-made commit: a non-UTC offset, a name beyond ASCII, a subject, a body and dashmem's trailers.
    task = repo.path / GDP / "task.yaml"
    task.write_text(task.read_text() + "# by hand\n")
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Jörg Ünal",
        "GIT_AUTHOR_EMAIL": "j@example.org",
        "GIT_AUTHOR_DATE": "2024-03-01T10:00:00-0730",
        "GIT_COMMITTER_NAME": "Jörg Ünal",
        "GIT_COMMITTER_EMAIL": "j@example.org",
    }
    subprocess.run(
        ["git", "commit", "-q", "-a", "-F", "-"],
        cwd=repo.path,
        env=env,
        check=True,
        text=True,
        input="Änderung am Task\n\nwhy it changed\n\nDashmem-Action: save\nDashmem-Workspace: gdp-explorer\n",
    )
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
    from lib.repo.history import ACTION_TRAILER, WORKSPACE_TRAILER, trailer

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
    publish.publish(repo, SAM, GDP)
    assert repo.undo_stack(SAM, GDP) == _undo_stack_from_500_commits(repo, SAM, GDP) and len(repo.undo_stack(SAM, GDP)) == 1
    for i in range(UNDO_DEPTH + 3):  # more saves than the undo depth keeps
        edit_rule(repo, SAM, GDP, 1, f"many {i}")
    assert repo.undo_stack(SAM, GDP) == _undo_stack_from_500_commits(repo, SAM, GDP)
    assert len(repo.undo_stack(SAM, GDP)) == UNDO_DEPTH + 1


def _commit_files(repo, files: dict[str, str | None], subject: str) -> str:
    """Write (or delete, for None) files in the published checkout and commit them on main, as a hand edit would."""
    root = repo.path
    for rel, text in files.items():
        if text is None:
            (root / rel).unlink()
        else:
            (root / rel).write_text(text)
    repo.repo.git.add("-A", "--", *files)
    repo.repo.git.commit("-m", subject, env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x"})
    return repo.repo.head.commit.hexsha


def test_semantic_diff_between_versions_reads_only_the_files_that_changed(config_repo):
    first = config_repo.repo.head.commit.hexsha
    dash = (config_repo.path / "supply-chain-weekly" / "dashboard.yaml").read_text()
    # A profile broken by a commit is named as unreadable; later, broken on both sides and unchanged, it is not part of the change.
    _commit_files(config_repo, {"supply-chain-weekly/profile.yaml": "tables: [\n", "supply-chain-weekly/dashboard.yaml": None}, "break")
    broken = config_repo.repo.head.commit.hexsha
    found = config_repo.changes("supply-chain-weekly", first, broken)
    assert {(c.category, c.kind) for c in found} >= {("file", "unreadable"), ("dashboard", "removed")}
    assert [c.id for c in found if c.category == "file"] == ["profile.yaml"] and found[0].category == "file"
    assert "in the new version, line 2" in found[0].new
    assert {c.id for c in found if c.kind == "removed"} == {c["id"] for c in parse(dash).data["components"]}

    _commit_files(config_repo, {"supply-chain-weekly/dashboard.yaml": dash}, "restore the dashboard")
    found = config_repo.changes("supply-chain-weekly", broken, "HEAD")
    assert {c.category for c in found} == {"dashboard"}  # the still-broken profile is not mentioned and "added" in {c.kind for c in found}
    assert config_repo.changes("supply-chain-weekly", first, first) == []
