"""lib.repo.gitops and lib.repo.history on their own: real git repositories in temporary folders, no ConfigRepo."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import git
import pytest

from lib.repo import gitops, history
from lib.repo.gitops import Busy, ConfigRepoError

from ..conftest import import_each_alone

ROOT = Path(__file__).resolve().parents[2]
AUTHOR = git.Actor("Ada", "ada@example.com")


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A repository on `main` with one commit of `ws/a.txt` and `ws/b.txt`."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    path = tmp_path / "repo"
    (path / "ws").mkdir(parents=True)
    (path / "ws" / "a.txt").write_text("one\ntwo\nthree\n")
    (path / "ws" / "b.txt").write_text("b\n")
    git.Repo.init(path, initial_branch="main")
    gitops._git(path, "add", "--all")
    gitops._git(path, "commit", "-q", "-m", "first", env=gitops.actor_env(AUTHOR))
    return path


def commit(path: Path, rel: str, text: str, subject: str) -> str:
    (path / rel).write_text(text)
    gitops._git(path, "commit", "-q", "-am", subject, env=gitops.actor_env(AUTHOR))
    return gitops.rev(path, "HEAD")


def test_git_raises_on_an_unexpected_exit_status_and_accepts_the_allowed_ones(repo):
    with pytest.raises(git.GitCommandError):
        gitops._git(repo, "rev-parse", "--verify", "no-such-branch")
    assert gitops._git(repo, "rev-parse", "--verify", "-q", "no-such-branch", ok=(0, 1)).returncode == 1


def test_a_git_run_under_a_lock_inherits_the_lock_and_runs_without_auto_gc(repo, tmp_path):
    lock = tmp_path / "locks" / "dashmem-main.lock"
    assert gitops._git(repo, "config", "--get", "gc.auto", ok=(0, 1)).stdout == ""
    with gitops._locked(lock, "the test repo"):
        assert gitops._held()  # this thread holds one lock
        assert gitops._git(repo, "config", "--get", "gc.auto").stdout.strip() == "0"
        # The lock's descriptor is passed on: a child that waits keeps the lock held past us.
        fd = gitops._held()[0]
        assert gitops._git(repo, "-c", "alias.fds=!ls /proc/self/fd", "fds").stdout.split().count(str(fd)) == 1
    assert gitops._held() == []


def test_a_lock_held_elsewhere_times_out_as_busy(tmp_path):
    lock = tmp_path / "dashmem-main.lock"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sys, time; from pathlib import Path; from lib.repo.gitops import _locked\n"
                "with _locked(Path(sys.argv[1]), 'x'):\n    print('held', flush=True); time.sleep(30)\n"
            ),
            str(lock),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(Busy, match="the config repo is busy"):
            with gitops._locked(lock, "the config repo", timeout=0.2):
                pass
    finally:
        holder.kill()
        holder.wait()
    with gitops._locked(lock, "the config repo", timeout=1):  # free once its holder died
        pass


def test_merge_tree_merges_without_a_checkout_and_reports_conflicts(repo):
    base = gitops.rev(repo, "HEAD")
    gitops._git(repo, "checkout", "-q", "-b", "left")
    left = commit(repo, "ws/a.txt", "ONE\ntwo\nthree\n", "left edits line 1")
    gitops._git(repo, "checkout", "-q", "-b", "right", base)
    right = commit(repo, "ws/a.txt", "one\ntwo\nTHREE\n", "right edits line 3")
    gitops._git(repo, "checkout", "-q", "-b", "clash", base)
    clash = commit(repo, "ws/a.txt", "uno\ntwo\nthree\n", "clash edits line 1 too")
    status_before = gitops.status(repo)

    tree, conflicts = gitops.merge_tree(repo, left, right)
    assert conflicts == [] and gitops._git(repo, "show", f"{tree}:ws/a.txt").stdout == "ONE\ntwo\nTHREE\n"
    assert gitops.merge_tree(repo, left, clash) == ("", ["ws/a.txt"])
    assert gitops.rev(repo, "HEAD") == clash and gitops.status(repo) == status_before  # no checkout was touched

    merged = gitops.commit_tree(repo, tree, [left, right], "merge\n", env=gitops.actor_env(AUTHOR))
    assert gitops.is_ancestor(repo, left, merged) and gitops.is_ancestor(repo, right, merged)
    assert not gitops.is_ancestor(repo, merged, left)


def test_update_ref_moves_a_branch_only_from_the_commit_the_caller_saw(repo):
    old = gitops.rev(repo, "main")
    tree = gitops._git(repo, "rev-parse", "main^{tree}").stdout.strip()
    new = gitops.commit_tree(repo, tree, [old], "next\n", env=gitops.actor_env(AUTHOR))
    other = gitops.commit_tree(repo, tree, [old], "someone else's\n", env=gitops.actor_env(AUTHOR))
    gitops.cas_update_ref(repo, "refs/heads/main", new, old, "test")
    assert gitops.rev(repo, "main") == new
    with pytest.raises(git.GitCommandError):
        gitops.cas_update_ref(repo, "refs/heads/main", other, old, "test")  # main moved since `old`
    assert gitops.rev(repo, "main") == new


def test_repair_checkout_removes_stale_locks_and_keeps_what_differed_in_the_stash(repo):
    git_dir = repo / ".git"
    (git_dir / "index.lock").write_text("")
    (git_dir / "refs" / "heads" / "main.lock").write_text("")
    (git_dir / "dashmem-main.lock").write_text("")  # ours: never a stale git lock
    (git_dir / "scratch" / "publish-x").mkdir(parents=True)
    (repo / "ws" / "a.txt").write_text("half written\n")
    (repo / "ws" / "untracked.txt").write_text("mine\n")

    assert {p.name for p in gitops.served_lock_files(git_dir, "main")} == {"index.lock", "main.lock"}
    done = gitops.repair_checkout(repo, git_dir, "main", "scratch")

    assert len(done) == 4 and any("reset the published checkout" in d for d in done)
    assert gitops.served_lock_files(git_dir, "main") == [] and (git_dir / "dashmem-main.lock").exists()
    assert gitops.scratch_entries(git_dir, "scratch") == []
    assert (repo / "ws" / "a.txt").read_text() == "one\ntwo\nthree\n"
    assert (repo / "ws" / "untracked.txt").read_text() == "mine\n"  # untracked files stay
    assert gitops._git(repo, "show", "stash@{0}:ws/a.txt").stdout == "half written\n"
    assert gitops.repair_checkout(repo, git_dir, "main", "scratch") == []  # nothing left to repair


def test_worktree_admin_dir_tells_a_complete_checkout_from_a_killed_one(repo, tmp_path):
    where = tmp_path / "wt"
    gitops._git(repo, "worktree", "add", "-q", "-b", "draft", str(where), "main")
    admin = gitops.worktree_admin_dir(where)
    assert admin is not None and (admin / "HEAD").is_file()
    (admin / "locked").write_text("initializing")  # what `worktree add` leaves when killed mid-checkout
    assert gitops.worktree_admin_dir(where) is None
    assert gitops.worktree_admin_dir(tmp_path / "nowhere") is None

    gitops.forget_worktree(repo, repo / ".git", where)
    assert not where.exists() and list((repo / ".git" / "worktrees").glob("*")) == []
    assert "draft" in git.Repo(repo).heads  # the branch stays
    gitops._git(repo, "worktree", "add", "-q", str(where), "draft")  # and the path can be checked out again


def test_extract_writes_a_folder_as_it_is_in_a_tree(repo, tmp_path):
    first = gitops.rev(repo, "HEAD")
    commit(repo, "ws/b.txt", "changed\n", "edit b")
    gitops.extract(repo, first, "ws", tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out" / "ws").iterdir()) == ["a.txt", "b.txt"]
    assert (tmp_path / "out" / "ws" / "b.txt").read_text() == "b\n"
    gitops.extract(repo, first, "missing", tmp_path / "none")  # a folder not in the tree: nothing written
    assert not (tmp_path / "none").exists()


def test_gc_packs_loose_objects(repo):
    for i in range(3):
        commit(repo, "ws/b.txt", f"{i}\n", f"edit {i}")
    count = lambda: int(dict(line.split(": ") for line in gitops._git(repo, "count-objects", "-v").stdout.splitlines())["count"])  # noqa: E731
    assert count() > 0
    (repo / ".git" / "packed-refs.lock").write_text("")  # a killed gc's
    gitops.gc(repo, repo / ".git", "main")
    assert count() == 0 and not (repo / ".git" / "packed-refs.lock").exists()
    assert gitops.loose_objects(repo / ".git") == 0


# --------------------------------------------------------------------------- lib.repo.history on a plain checkout


def test_commit_folder_history_diff_and_restore_on_a_plain_checkout(repo):
    r = git.Repo(repo)
    first = gitops.rev(repo, "HEAD")
    assert history.commit_folder(r, "ws", AUTHOR, "nothing", "save") is None  # nothing changed
    (repo / "ws" / "a.txt").write_text("one\n2\nthree\n")
    (repo / "ws" / "c.txt").write_text("new\n")
    second = history.commit_folder(r, "ws", AUTHOR, "Edit ws", "save")
    assert second is not None

    versions = history.history(r, "ws")
    assert [v.sha for v in versions] == [second, first]
    assert versions[0].action == "save" and versions[0].author == "Ada" and versions[0].message == "Edit ws"
    assert history.trailer(r.commit(second), history.WORKSPACE_TRAILER) == "ws"
    diffs = {d.path: d for d in history.diff(r, "ws", first, second)}
    assert {p: d.status for p, d in diffs.items()} == {"a.txt": "modified", "c.txt": "added"}
    assert "-two\n+2\n" in diffs["a.txt"].patch
    assert history.read_file(r, first, "ws/c.txt") is None and history.read_file(r, second, "ws/c.txt") == b"new\n"

    third = history.restore(r, "ws", first, AUTHOR)
    assert third not in (first, second) and history.history(r, "ws")[0].action == "revert"
    assert not (repo / "ws" / "c.txt").exists() and (repo / "ws" / "a.txt").read_text() == "one\ntwo\nthree\n"
    assert len(history.history(r, "ws")) == 3  # history is never rewritten


def test_unknown_versions_and_folders_are_config_repo_errors(repo, tmp_path):
    r = git.Repo(repo)
    with pytest.raises(ConfigRepoError, match="unknown version 'nope'"):
        history.resolve(r, "nope")
    with pytest.raises(ConfigRepoError, match="unknown version"):
        history.resolve(r, "0" * 40)
    with pytest.raises(ConfigRepoError, match="does not exist"):
        history.restore(r, "nope", "HEAD", AUTHOR)
    outside = tmp_path / "plain"
    outside.mkdir()
    with pytest.raises(ConfigRepoError, match="not inside a git repository"):
        history.find_repo(outside)
    assert history.find_repo(repo / "ws")[1] == "ws"


def test_a_bare_repo_is_a_clear_error_not_a_type_error(tmp_path):
    """A bare clone has no working tree: the CLI says so instead of 'TypeError: ... NoneType'."""
    bare = tmp_path / "bare.git"
    git.Repo.init(bare, bare=True)
    with pytest.raises(ConfigRepoError, match="bare"):
        history.find_repo(bare)
    run = subprocess.run(
        [sys.executable, "-m", "lib", "history", str(bare)], cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    assert run.returncode != 0
    assert "bare" in run.stderr and "TypeError" not in run.stderr


def test_each_module_imports_on_its_own():
    """Any of the config repo modules may be imported first."""
    import_each_alone(["lib.repo.gitops", "lib.repo.history", "lib.repo.drafts", "lib.ops.publish", "lib.repo.configrepo"])
