"""Crash safety (design decision 9, issue #11): `kill -9` at any moment loses nothing and needs no hand repair.

Each kill test runs the operation as users run it, in its own process (a small
helper script started with `python -c`), and kills it with SIGKILL after a
random delay spread over the operation's real duration (measured once first:
one kill in each of 25 slices of it, the order and the moment in each slice
drawn from a seeded RNG, so a failure can be replayed). Every other kill takes the
whole process group, git's own processes included; the others kill only the
Python process and leave its git children running, as when a server process
is killed by itself. After each kill a fresh ConfigRepo is opened and checked:
`git fsck` is clean, the published checkout equals `main` (nothing staged, no
merge left), every commit that was on a branch is still there, `main` is the
old or the new commit, and the next operation works without any hand steps.

The deterministic tests below recreate each leftover by hand (the served
checkout mid-merge, as issue #11 saw it, git's lock files, a draft half
saved or mid-merge, a worktree half checked out) and check that opening
repairs it and keeps what differed.
"""

from __future__ import annotations

import copy
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from lib.memory import workspace
from lib.memory.yamlio import parse
from lib.ops import publish
from lib.repo.configrepo import ConfigRepo
from lib.repo.gitops import Busy, _locked
from lib.repo.history import MAIN, read_file
from lib.roles.access import OPERATOR, User

from ..conftest import ROOT

pytestmark = pytest.mark.slow

OLIVIA = User("olivia", app_role="owner")  # owner of the demo workspaces
SCW = "supply-chain-weekly"
KILLS = 25  # per operation
SEED = 11

HELPER = r"""
import json, sys
from pathlib import Path
from lib.ops import publish

op, path = sys.argv[1], Path(sys.argv[2])
# Everything imported first, so that the kills hit the operation, not the imports.
if op == "refresh":
    from lib.data import refresh, snapshots as warehouse
    from lib.roles.access import OPERATOR
else:
    from lib.roles.access import User
    from lib.repo.configrepo import ConfigRepo
    if op == "publish":
        from lib.artifacts import checks
print("ready", flush=True)
arg = json.loads(sys.stdin.readline())  # go
if op == "refresh":
    report = refresh.refresh(path, warehouse.Warehouse.for_workspace(path), user=OPERATOR)
    assert report.ok and report.swapped, report.summary()
else:
    olivia = User("olivia", app_role="owner")
    repo = ConfigRepo(path)
    if op == "publish":
        publish.publish(repo, olivia, arg["slug"])
    elif op == "save":
        repo.save(olivia, arg["slug"], arg["files"], "Crash test save")
    elif op == "revert":
        repo.revert(olivia, arg["slug"], arg["version"])
print("done", flush=True)
"""


# --------------------------------------------------------------------------- helpers


@pytest.fixture
def child_env(config_repo, tmp_path, monkeypatch):
    """The environment of the helper processes: the fixture's git config, a cache in tmp."""
    monkeypatch.setenv("DASHMEM_CACHE_DIR", str(tmp_path / "cache"))
    return {**os.environ, "PYTHONPATH": str(ROOT)}


class Child:
    """One helper process for one operation: it imports, says "ready", and runs the operation on `go(arg)`."""

    def __init__(self, env: dict, tmp: Path, op: str, path: Path):
        self.log = tmp / f"child-{time.monotonic_ns()}.stderr"
        with open(self.log, "w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", HELPER, op, str(path)],
                cwd=ROOT,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                start_new_session=True,
            )
        assert self.proc.stdin is not None and self.proc.stdout is not None  # both pipes
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout

    def go(self, arg) -> None:
        assert self.stdout.readline().strip() == "ready", self.stderr()
        self.stdin.write(json.dumps(arg) + "\n")
        self.stdin.flush()
        self.started = time.monotonic()

    def stderr(self) -> str:
        self.proc.wait(timeout=60)
        return self.log.read_text()

    def finish(self, arg) -> float:
        """Run the operation to its end; the seconds it took."""
        self.go(arg)
        line = self.stdout.readline().strip()
        took = time.monotonic() - self.started
        assert line == "done", self.stderr()
        self.close()
        assert self.proc.returncode == 0, self.log.read_text()
        return took

    def kill(self, whole_group: bool) -> None:
        if whole_group:
            os.killpg(self.proc.pid, signal.SIGKILL)
        else:
            self.proc.send_signal(signal.SIGKILL)  # its git children live on, as orphans
        self.close()
        # killed, or done before the kill came; never failed on its own
        assert self.proc.returncode in (-signal.SIGKILL, 0), self.log.read_text()

    def close(self) -> None:
        self.proc.wait(timeout=60)
        self.stdin.close()
        self.stdout.close()


class Killer:
    """Runs one operation in helper processes, each killed at a random moment of its measured duration."""

    def __init__(self, env: dict, tmp: Path, op: str, path: Path, seed: int):
        self.env, self.tmp, self.op, self.path = env, tmp, op, path
        self.rng = random.Random(seed)
        self.duration = 0.0
        self.delays: list[float] = []
        self.next: Child | None = None

    def measure(self, arg) -> None:
        """The operation's real duration, once, unkilled (which also shows the helper works), and the delays of
        the kills: one at a random moment of each of KILLS equal slices of it (and somewhat past its end, as
        one run can take a third longer than another), in random order. Many operations only commit in their
        last few per cent."""
        self.duration = Child(self.env, self.tmp, self.op, self.path).finish(arg)
        span = 1.4 * self.duration / KILLS
        self.delays = [span * (k + self.rng.random()) for k in range(KILLS)]
        self.rng.shuffle(self.delays)

    def run_killed(self, arg, i: int) -> None:
        """Run the operation and kill it; every other kill takes the whole process group, git included.
        The next helper starts at once, and imports while the test checks what this one left."""
        child = self.next or Child(self.env, self.tmp, self.op, self.path)
        child.go(arg)
        time.sleep(self.delays[i])
        child.kill(whole_group=i % 2 == 0)
        self.next = Child(self.env, self.tmp, self.op, self.path) if i + 1 < KILLS else None


def wait_for_orphans(repo_path: Path, drafts: Sequence[tuple[str, str]] = ()) -> None:
    """Take (and drop) the main lock and the drafts' locks: a git that a killed process
    started under a lock holds it until it ends, so this waits for every such orphan."""
    git_dir = Path(repo_path) / ".git"
    with _locked(git_dir / "dashmem-main.lock", "the config repo", timeout=60):
        pass
    for user, slug in drafts:
        with _locked(git_dir / f"dashmem-{user}-{slug}.lock", "a draft", timeout=60):
            pass


HAND = {"GIT_AUTHOR_NAME": "by hand", "GIT_AUTHOR_EMAIL": "hand@x", "GIT_COMMITTER_NAME": "by hand", "GIT_COMMITTER_EMAIL": "hand@x"}


def g(path: Path, *args: str) -> str:
    """git run by hand (by a person, or to recreate what a killed process left)."""
    return subprocess.run(["git", *args], cwd=path, check=True, capture_output=True, text=True, env={**os.environ, **HAND}).stdout


def branch_tips(path: Path) -> dict[str, str]:
    out = g(path, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads")
    return dict(line.split() for line in out.splitlines())


def branch_commits(path: Path) -> set[str]:
    return set(g(path, "rev-list", "--branches").split())


def assert_fsck_clean(path: Path) -> None:
    proc = subprocess.run(["git", "fsck", "--no-dangling", "--no-progress"], cwd=path, capture_output=True, text=True)
    assert proc.returncode == 0 and not proc.stdout.strip() and "error" not in proc.stderr, proc.stdout + proc.stderr


def assert_checkout_equals(path: Path, ref: str) -> None:
    """Index and files of the checkout at `path` are exactly the commit its HEAD names, HEAD is `ref`, no merge is left."""
    assert g(path, "status", "--porcelain", "--untracked-files=all") == ""
    assert g(path, "rev-parse", "HEAD") == g(path, "rev-parse", ref)
    admin = Path(g(path, "rev-parse", "--absolute-git-dir").strip())
    leftovers = [
        p.name
        for p in admin.iterdir()
        if p.name == "MERGE_HEAD" or p.name.endswith(".writing") or (p.name.endswith(".lock") and not p.name.startswith("dashmem-"))
    ]
    leftovers += [p.name for p in (admin / "dashmem-scratch").glob("*")]  # a killed publish's copy of the workspace
    assert leftovers == []


def assert_nothing_lost(path: Path, tips_before: dict[str, str], commits_before: set[str]) -> None:
    tips = branch_tips(path)
    for ref, sha in tips_before.items():
        assert ref in tips, f"{ref} is gone"
        assert subprocess.run(["git", "merge-base", "--is-ancestor", sha, tips[ref]], cwd=path).returncode == 0, f"{ref} no longer contains {sha}"
    assert commits_before <= branch_commits(path)


def task_with_rule(repo: ConfigRepo, slug: str, text: str) -> dict:
    task = copy.deepcopy(workspace.load(repo.draft(OLIVIA, slug).workspace_path)[0].data["task"])
    task["rules"][0]["text"] = text
    return task


def rule_at(path: Path, ref: str, slug: str) -> str:
    raw = subprocess.run(["git", "show", f"{ref}:{slug}/task.yaml"], cwd=path, capture_output=True, check=True).stdout
    return parse(raw.decode()).data["rules"][0]["text"]


# --------------------------------------------------------------------------- kill -9 at random moments


def test_publish_killed_at_any_moment_leaves_main_old_or_new_and_the_next_publish_works(config_repo, child_env, tmp_path):
    repo, path = config_repo, config_repo.path
    killer = Killer(child_env, tmp_path, "publish", path, SEED)
    repo.save(OLIVIA, SCW, {"task": task_with_rule(repo, SCW, "Measured publish.")}, "measure")
    killer.measure({"slug": SCW})
    landed = 0
    for i in range(KILLS):
        text = f"Published in round {i}."
        tip = repo.save(OLIVIA, SCW, {"task": task_with_rule(repo, SCW, text)}, f"round {i}")
        old = branch_tips(path)[f"refs/heads/{MAIN}"]
        tips, commits = branch_tips(path), branch_commits(path)

        killer.run_killed({"slug": SCW}, i)
        wait_for_orphans(path, [("olivia", SCW)])

        assert_fsck_clean(path)
        repo = ConfigRepo(path)  # a fresh open repairs what the kill left
        assert_fsck_clean(path)
        assert_checkout_equals(path, MAIN)
        assert_nothing_lost(path, tips, commits)
        main = branch_tips(path)[f"refs/heads/{MAIN}"]
        if main != old:  # the new commit, whole: the merge of the old main and the draft
            landed += 1
            assert g(path, "rev-parse", f"{main}^1", f"{main}^2").split() == [old, tip]
            assert rule_at(path, MAIN, SCW) == text
        else:
            assert rule_at(path, MAIN, SCW) != text
            new = publish.publish(repo, OLIVIA, SCW)  # the next publish works, with no hand steps
            assert g(path, "rev-parse", f"{new}^1", f"{new}^2").split() == [old, tip]
            assert_checkout_equals(path, MAIN)
        assert (path / SCW / "task.yaml").read_bytes() == read_file(repo.repo, MAIN, f"{SCW}/task.yaml")
    print(f"{landed} of {KILLS} killed publishes had moved main (a publish takes {killer.duration:.2f} s)")


def test_save_killed_at_any_moment_keeps_the_draft_whole_and_the_next_save_works(config_repo, child_env, tmp_path):
    repo, path = config_repo, config_repo.path
    killer = Killer(child_env, tmp_path, "save", path, SEED + 1)
    draft = repo.draft(OLIVIA, SCW)
    killer.measure({"slug": SCW, "files": {"task": task_with_rule(repo, SCW, "Measured.")}})
    landed = 0
    for i in range(KILLS):
        text = f"Saved in round {i}."
        files = {"task": task_with_rule(repo, SCW, text), "output": copy.deepcopy(workspace.load(draft.workspace_path)[0].data["output"])}
        files["output"]["notes"] = [f"Note of round {i}."]  # two files change
        main_before = branch_tips(path)[f"refs/heads/{MAIN}"]
        tip = branch_tips(path)[f"refs/heads/{draft.branch}"]
        tips, commits = branch_tips(path), branch_commits(path)

        killer.run_killed({"slug": SCW, "files": files}, i)
        wait_for_orphans(path, [("olivia", SCW)])

        assert_fsck_clean(path)
        repo = ConfigRepo(path)
        draft = repo.draft(OLIVIA, SCW)
        assert_fsck_clean(path)
        assert_checkout_equals(path, MAIN)
        assert_checkout_equals(draft.path, draft.branch)
        assert_nothing_lost(path, tips, commits)
        assert branch_tips(path)[f"refs/heads/{MAIN}"] == main_before
        now = branch_tips(path)[f"refs/heads/{draft.branch}"]
        if now != tip:  # the save landed, whole: both files
            landed += 1
            assert g(path, "rev-parse", f"{now}^").strip() == tip
            assert rule_at(path, now, SCW) == text and f"Note of round {i}." in g(path, "show", f"{now}:{SCW}/output.yaml")
        else:
            assert rule_at(path, now, SCW) != text
        again = task_with_rule(repo, SCW, f"Saved again in round {i}.")  # the next save works, and saves exactly that
        assert repo.save(OLIVIA, SCW, {"task": again}, "again")
        assert workspace.load(draft.workspace_path)[0].data["task"] == again
        assert_checkout_equals(draft.path, draft.branch)
    print(f"{landed} of {KILLS} killed saves had committed (a save takes {killer.duration:.2f} s)")


def test_revert_killed_at_any_moment_keeps_the_draft_whole_and_the_next_revert_works(config_repo, child_env, tmp_path):
    repo, path = config_repo, config_repo.path
    killer = Killer(child_env, tmp_path, "revert", path, SEED + 2)
    draft = repo.draft(OLIVIA, SCW)
    # Two versions that differ in a rule and in a data file, so that a revert rewrites both.
    plain = repo.save(OLIVIA, SCW, {"task": task_with_rule(repo, SCW, "Version without extra data.")}, "plain")
    (draft.workspace_path / "data" / "extra.csv").write_text("a,b\n" + "".join(f"{n},{n * n}\n" for n in range(20000)))
    with_data = repo.save(OLIVIA, SCW, {"task": task_with_rule(repo, SCW, "Version with extra data.")}, "with data")
    killer.measure({"slug": SCW, "version": plain})
    folder_tree = lambda ref: g(path, "rev-parse", f"{ref}:{SCW}").strip()  # noqa: E731
    landed = 0
    for i in range(KILLS):
        target = with_data if i % 2 == 0 else plain  # the draft is at the other one
        tip = branch_tips(path)[f"refs/heads/{draft.branch}"]
        tips, commits = branch_tips(path), branch_commits(path)

        killer.run_killed({"slug": SCW, "version": target}, i)
        wait_for_orphans(path, [("olivia", SCW)])

        assert_fsck_clean(path)
        repo = ConfigRepo(path)
        draft = repo.draft(OLIVIA, SCW)
        assert_fsck_clean(path)
        assert_checkout_equals(path, MAIN)
        assert_checkout_equals(draft.path, draft.branch)
        assert_nothing_lost(path, tips, commits)
        now = branch_tips(path)[f"refs/heads/{draft.branch}"]
        if now != tip:  # the revert landed, whole
            landed += 1
            assert g(path, "rev-parse", f"{now}^").strip() == tip
            assert folder_tree(now) == folder_tree(target)
        else:
            assert folder_tree(now) != folder_tree(target)
            assert repo.revert(OLIVIA, SCW, target)  # the next revert works
        assert folder_tree(draft.branch) == folder_tree(target)
        assert_checkout_equals(draft.path, draft.branch)
    print(f"{landed} of {KILLS} killed reverts had committed (a revert takes {killer.duration:.2f} s)")


# --------------------------------------------------------------------------- kill -9 at each step, then a new reader (issue #29, item 9)

# A save or revert, paused at one step before it is killed: before its K-th git command starts (the git is a
# shell script that waits there), or before its K-th os.replace. Counting starts on "go", so the steps are the
# operation's own.
STEP_HELPER = r"""
import json, os, sys, time
from pathlib import Path
import git
from lib.repo.configrepo import ConfigRepo
from lib.roles.access import User

path, steps = Path(sys.argv[1]), Path(sys.argv[2])
olivia = User("olivia", app_role="owner")
print("ready", flush=True)
go = json.loads(sys.stdin.readline())
counts = {"git": 0, "replace": 0}
kind, _, at = go["pause"].partition(":")
(steps / "pause").write_text(at if kind == "git" else "0")
(steps / "count").write_text("0")
os.environ["STEPS"] = str(steps)
git.Git.GIT_PYTHON_GIT_EXECUTABLE = str(steps / "git")
real_replace = os.replace

def replace(*args, **kwargs):
    counts["replace"] += 1
    if kind == "replace" and counts["replace"] == int(at):
        print("paused", flush=True)
        time.sleep(3600)
    return real_replace(*args, **kwargs)

os.replace = replace
repo = ConfigRepo(path)
if go["op"] == "save":
    repo.save(olivia, go["slug"], go["files"], "Step test save")
else:
    repo.revert(olivia, go["slug"], go["version"])
print(json.dumps({"done": True, "git": int((steps / "count").read_text()), "replace": counts["replace"]}), flush=True)
"""

# The git the helper runs: counts the commands, and before the one to pause at says so and waits for `go`.
STEP_GIT = """#!/bin/sh
n=$(( $(cat "$STEPS/count") + 1 ))
echo $n > "$STEPS/count"
if [ "$n" = "$(cat "$STEPS/pause")" ]; then
    echo "$*" > "$STEPS/paused.tmp" && mv "$STEPS/paused.tmp" "$STEPS/paused"
    while [ ! -e "$STEPS/go" ]; do sleep 0.01; done
fi
exec git "$@"
"""

# A new process reading the draft as the Review page does (the drafts of a workspace, then each one's files).
READER = r"""
import hashlib, json, sys
from pathlib import Path
path, slug = Path(sys.argv[1]), sys.argv[2]
from lib.repo.configrepo import ConfigRepo
print("ready", flush=True)
sys.stdin.readline()
repo = ConfigRepo(path)
print("opened", flush=True)
[d] = [d for d in repo.drafts(slug) if d["user"] == "olivia"]
folder = d["workspace_path"]
blobs = {}
for p in sorted(folder.rglob("*")):
    if p.is_file():
        data = p.read_bytes()
        blobs[f"{slug}/{p.relative_to(folder).as_posix()}"] = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
print(json.dumps({"head": d["head"], "blobs": blobs}), flush=True)
"""


class Stepper:
    """Runs one operation in helper processes killed at each of its steps, each followed by a new reader process.

    Both kinds of process are started ahead (they import while the test checks the round before), so a round
    costs the operation and the read."""

    def __init__(self, env: dict, tmp: Path, path: Path, slug: str):
        self.env, self.tmp, self.path, self.slug = env, tmp, path, slug
        self.steps = tmp / "steps"
        self.steps.mkdir()
        (self.steps / "git").write_text(STEP_GIT)
        (self.steps / "git").chmod(0o755)
        self.child, self.reader = self._start(STEP_HELPER, str(path), str(self.steps)), self._start(READER, str(path), slug)

    def _start(self, script: str, *args: str) -> subprocess.Popen:
        err = open(self.tmp / f"step-{time.monotonic_ns()}.stderr", "w")
        proc = subprocess.Popen(
            [sys.executable, "-c", script, *args],
            cwd=ROOT,
            env=self.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            start_new_session=True,
        )
        err.close()
        return proc

    @staticmethod
    def _say(proc: subprocess.Popen, line: str) -> None:
        assert proc.stdin is not None
        proc.stdin.write(line + "\n")
        proc.stdin.flush()

    @staticmethod
    def _hear(proc: subprocess.Popen) -> str:
        assert proc.stdout is not None
        return proc.stdout.readline().strip()

    def measure(self, arg: dict) -> tuple[int, int]:
        """How many git commands and renames the operation runs, unpaused."""
        child, self.child = self.child, self._start(STEP_HELPER, str(self.path), str(self.steps))
        assert self._hear(child) == "ready"
        self._say(child, json.dumps({**arg, "pause": ""}))
        out = json.loads(self._hear(child))
        child.wait(timeout=60)
        return out["git"], out["replace"]

    def kill_at(self, arg: dict, pause: str, orphan: bool) -> dict:
        """Run the operation paused at `pause` and kill it there: with `orphan`, only the Python process, so the
        paused git runs on (holding the draft's lock) once the reader has opened the repo; otherwise the whole
        process group, git included. Then the new reader reads the draft; what it read."""
        for name in ("go", "paused"):
            (self.steps / name).unlink(missing_ok=True)
        child, reader = self.child, self.reader
        assert self._hear(child) == "ready" and self._hear(reader) == "ready"
        self._say(child, json.dumps({**arg, "pause": pause}))
        if pause.startswith("git"):  # (an operation with fewer steps this time ends without pausing)
            deadline = time.monotonic() + 60
            while not (self.steps / "paused").exists() and child.poll() is None:
                assert time.monotonic() < deadline, f"never paused at {pause}"
                time.sleep(0.01)
        else:
            self._hear(child)  # "paused", or the line it ends with
        if child.poll() is None:
            if orphan:
                child.kill()
            else:
                os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=60)
        self.child = self._start(STEP_HELPER, str(self.path), str(self.steps))
        self._say(reader, "")
        assert self._hear(reader) == "opened"
        (self.steps / "go").write_text("")  # an orphan git goes on now, while the reader reads
        line = self._hear(reader)
        reader.wait(timeout=60)
        assert line, "the reader failed"
        self.reader = self._start(READER, str(self.path), self.slug)
        return json.loads(line)

    def close(self) -> None:
        for proc in (self.child, self.reader):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)


def committed_blobs(path: Path, ref: str, slug: str) -> dict[str, str]:
    out = g(path, "ls-tree", "-r", ref, "--", f"{slug}/")
    return {line.split("\t")[1]: line.split()[2] for line in out.splitlines()}


def assert_read_old_or_new(path: Path, draft_branch: str, slug: str, read: dict, old: str, is_new) -> str:
    """The reader read one commit of the draft, old or new (`is_new(sha)` says it is the new one, whole), and
    after its read the worktree is clean and equals that commit."""
    wait_for_orphans(path, [("olivia", slug)])
    head = branch_tips(path)[f"refs/heads/{draft_branch}"]
    assert read["head"] == head, "the reader saw the branch before it moved"
    assert head == old or (g(path, "rev-parse", f"{head}^").strip() == old and is_new(head)), "neither the old commit nor the new one"
    assert read["blobs"] == committed_blobs(path, head, slug), "the reader read files that are not the commit's"
    worktree = path.parent / f"{path.name}.drafts" / "olivia" / slug
    assert g(worktree, "status", "--porcelain", "--untracked-files=all") == "", "the draft has an uncommitted change after the read"
    return head


@pytest.mark.timeout(300)
def test_a_save_killed_at_each_step_leaves_the_draft_old_or_new_and_committed_for_the_next_reader(config_repo, child_env, tmp_path):
    repo, path = config_repo, config_repo.path
    draft = repo.draft(OLIVIA, SCW)
    stepper = Stepper(child_env, tmp_path, path, SCW)
    try:
        files = lambda text: {"task": task_with_rule(repo, SCW, text)}  # noqa: E731
        gits, renames = stepper.measure({"op": "save", "slug": SCW, "files": files("Measured.")})
        pauses = [(f"git:{k}", orphan) for k in range(1, gits + 1) for orphan in (True, False)] + [(f"replace:{k}", False) for k in range(1, renames + 1)]
        landed = 0
        for i, (pause, orphan) in enumerate(pauses):
            text = f"Saved in round {i}."
            old = branch_tips(path)[f"refs/heads/{draft.branch}"]
            read = stepper.kill_at({"op": "save", "slug": SCW, "files": files(text)}, pause, orphan)
            now = assert_read_old_or_new(path, draft.branch, SCW, read, old, lambda sha, text=text: rule_at(path, sha, SCW) == text)
            landed += now != old
    finally:
        stepper.close()
    print(f"{landed} of {len(pauses)} saves killed at each of their steps had committed")


@pytest.mark.timeout(300)
def test_a_revert_killed_at_each_step_leaves_the_draft_old_or_new_and_committed_for_the_next_reader(config_repo, child_env, tmp_path):
    repo, path = config_repo, config_repo.path
    draft = repo.draft(OLIVIA, SCW)
    plain = repo.save(OLIVIA, SCW, {"task": task_with_rule(repo, SCW, "Version without extra data.")}, "plain")
    (draft.workspace_path / "data" / "extra.csv").write_text("a,b\n" + "".join(f"{n},{n * n}\n" for n in range(2000)))
    with_data = repo.save(OLIVIA, SCW, {"task": task_with_rule(repo, SCW, "Version with extra data.")}, "with data")
    folder_tree = lambda ref: g(path, "rev-parse", f"{ref}:{SCW}").strip()  # noqa: E731
    stepper = Stepper(child_env, tmp_path, path, SCW)
    try:
        # Its steps differ with the files it writes: the most of both ways (to plain from with_data, and back).
        steps = [stepper.measure({"op": "revert", "slug": SCW, "version": version}) for version in (plain, with_data)]
        gits, renames = max(n for n, _ in steps), max(n for _, n in steps)
        pauses = [(f"git:{k}", orphan) for k in range(1, gits + 1) for orphan in (True, False)] + [(f"replace:{k}", False) for k in range(1, renames + 1)]
        landed = 0
        for pause, orphan in pauses:
            old = branch_tips(path)[f"refs/heads/{draft.branch}"]
            target = with_data if folder_tree(old) == folder_tree(plain) else plain  # the draft is at the other one
            read = stepper.kill_at({"op": "revert", "slug": SCW, "version": target}, pause, orphan)
            now = assert_read_old_or_new(path, draft.branch, SCW, read, old, lambda sha, target=target: folder_tree(sha) == folder_tree(target))
            landed += now != old
    finally:
        stepper.close()
    print(f"{landed} of {len(pauses)} reverts killed at each of their steps had committed")


def test_refresh_killed_at_any_moment_serves_the_old_or_the_new_snapshot_and_the_next_refresh_works(ws_copy, tmp_path, monkeypatch):
    from lib.data.refresh import refresh
    from lib.data.snapshots import Warehouse

    monkeypatch.setenv("DASHMEM_CACHE_DIR", str(tmp_path / "cache"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    ws = ws_copy(SCW)
    killer = Killer(env, tmp_path, "refresh", ws, SEED + 3)
    csv = ws / "data" / "gates.csv"
    header, *rows = csv.read_text().splitlines()
    base = int(rows[0].split(",")[5])

    def write_round(n: int) -> None:
        """The data of round n: every row's actual volume raised by n, so that each refresh brings new data."""
        out = [header]
        for row in rows:
            cells = row.split(",")
            cells[5] = str(int(cells[5]) + n)
            out.append(",".join(cells))
        csv.write_text("\n".join(out) + "\n")

    def first_actual(tables) -> int:
        return tables["gates"].column("actual")[0].as_py()

    write_round(0)
    assert refresh(ws, Warehouse.for_workspace(ws), user=OPERATOR).ok
    write_round(1)
    killer.measure(None)
    landed = 0
    for i in range(KILLS):
        n = 2 + 2 * i
        before = Warehouse.for_workspace(ws).current()
        assert before is not None
        old_actual = first_actual(Warehouse.for_workspace(ws).tables(before))
        write_round(n)

        killer.run_killed(None, i)

        served = Warehouse.for_workspace(ws)  # read as any other process would
        current = served.current()
        assert current is not None
        tables = served.tables(current)
        assert set(tables) == {"gates"} and tables["gates"].num_rows == len(rows)
        if current.id == before.id:
            assert first_actual(tables) == old_actual
        else:  # the new snapshot, whole
            landed += 1
            assert current.id > before.id and first_actual(tables) == base + n
        write_round(n + 1)
        report = refresh(ws, Warehouse.for_workspace(ws), user=OPERATOR)  # the next refresh works
        assert report.ok and report.swapped, report.summary()
        assert first_actual(Warehouse.for_workspace(ws).tables()) == base + n + 1
    print(f"{landed} of {KILLS} killed refreshes had switched (a refresh takes {killer.duration:.2f} s)")


# --------------------------------------------------------------------------- leftovers made by hand, repaired on open


def test_a_published_checkout_left_mid_merge_is_repaired_on_open_and_publishing_works(config_repo):
    """Issue #11 exactly: the state a publish killed inside `git merge --no-ff --no-commit` left."""
    repo = config_repo
    task = task_with_rule(repo, SCW, "Half-published change.")
    branch_tip = repo.save(OLIVIA, SCW, {"task": task}, "change")
    main_before = branch_tips(repo.path)[f"refs/heads/{MAIN}"]
    g(repo.path, "merge", "--no-ff", "--no-commit", "-q", repo.branch_name(OLIVIA, SCW))
    assert (repo.path / ".git" / "MERGE_HEAD").exists() and "Half-published" in (repo.path / SCW / "task.yaml").read_text()

    reopened = ConfigRepo(repo.path)

    assert_checkout_equals(repo.path, MAIN)
    assert "Half-published" not in (repo.path / SCW / "task.yaml").read_text()
    assert branch_tips(repo.path)[f"refs/heads/{MAIN}"] == main_before
    published = publish.publish(reopened, OLIVIA, SCW)
    assert g(repo.path, "rev-parse", f"{published}^1", f"{published}^2").split() == [main_before, branch_tip]
    assert "Half-published" in (repo.path / SCW / "task.yaml").read_text()
    assert_checkout_equals(repo.path, MAIN)


def test_a_published_checkout_behind_main_is_brought_to_main_and_what_differed_is_kept(config_repo):
    """A publish killed after moving `main` and before updating the checkout; plus a stray edit, kept as a stash,
    and a file that is not git's, left alone."""
    repo = config_repo
    repo.save(OLIVIA, SCW, {"task": task_with_rule(repo, SCW, "Moved main only.")}, "change")
    old = branch_tips(repo.path)[f"refs/heads/{MAIN}"]
    new = publish.publish(repo, OLIVIA, SCW)
    g(repo.path, "reset", "-q", "--hard", old)  # the checkout and main as they were ...
    g(repo.path, "update-ref", f"refs/heads/{MAIN}", new, old)  # ... then main moved, the checkout not yet
    (repo.path / SCW / "output.yaml").write_text("# someone's edit\n", encoding="utf-8")
    (repo.path / SCW / "notes.txt").write_text("an untracked file\n", encoding="utf-8")

    reopened = ConfigRepo(repo.path)

    assert any("reset the published checkout" in what for what in reopened.repaired), reopened.repaired
    assert (repo.path / SCW / "notes.txt").read_text() == "an untracked file\n"  # not git's: left alone
    (repo.path / SCW / "notes.txt").unlink()
    assert_checkout_equals(repo.path, MAIN)
    assert branch_tips(repo.path)[f"refs/heads/{MAIN}"] == new
    assert "Moved main only." in (repo.path / SCW / "task.yaml").read_text()
    stash = g(repo.path, "stash", "list")
    assert "dashmem repair" in stash
    assert f"{SCW}/output.yaml" in g(repo.path, "stash", "show", "--name-only", "stash@{0}")
    assert g(repo.path, "show", f"stash@{{0}}:{SCW}/output.yaml") == "# someone's edit\n"


def test_git_lock_files_left_by_a_killed_git_are_removed_on_open(config_repo):
    repo = config_repo
    draft = repo.draft(OLIVIA, SCW)
    repo.save(OLIVIA, SCW, {"task": task_with_rule(repo, SCW, "After the locks.")}, "change")
    gd = repo.path / ".git"
    admin = Path(g(draft.path, "rev-parse", "--absolute-git-dir").strip())
    stale = [
        gd / "index.lock",
        gd / "HEAD.lock",
        gd / "refs" / "heads" / "main.lock",
        gd / "packed-refs.lock",
        admin / "index.lock",
        gd / "refs" / "heads" / "draft" / "olivia" / f"{SCW}.lock",
    ]
    for lock in stale:
        lock.write_text("")

    reopened = ConfigRepo(repo.path)

    assert [p for p in stale if p.exists()] == []
    assert (gd / "dashmem-main.lock").exists()  # our own flock files stay
    publish.publish(reopened, OLIVIA, SCW)
    reopened.save(OLIVIA, SCW, {"task": task_with_rule(reopened, SCW, "Saved after the locks.")}, "again")
    assert_checkout_equals(repo.path, MAIN)


def test_a_git_still_running_for_a_killed_process_keeps_its_lock_and_its_lock_files(config_repo, child_env, tmp_path, monkeypatch):
    """A save whose Python is killed while its `git update-ref` (the commit point) runs: that git holds the
    draft's lock until it ends, so nobody takes its lock files (the index's, the branch's) for stale, and when
    it ends the save has landed whole; the next opening brings the worktree up to it."""
    repo, path = config_repo, config_repo.path
    monkeypatch.setattr(ConfigRepo, "REPAIR_WAIT_S", 0.5)
    draft = repo.draft(OLIVIA, SCW)
    fifo = tmp_path / "hook-fifo"
    os.mkfifo(fifo)
    hook = path / ".git" / "hooks" / "reference-transaction"  # runs inside `git update-ref`, with the branch locked
    hook.write_text(f"#!/bin/sh\n[ \"$1\" = prepared ] && read line < '{fifo}'\nexit 0\n")
    hook.chmod(0o755)
    child = Child(child_env, tmp_path, "save", path)
    child.go({"slug": SCW, "files": {"task": task_with_rule(repo, SCW, "Committed by an orphan.")}})
    for _ in range(1200):  # until the hook waits on the fifo
        try:
            writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError:
            time.sleep(0.05)
    else:
        pytest.fail("the save never reached its commit: " + child.stderr())
    child.kill(whole_group=False)  # the Python process only: its `git update-ref` waits on in the hook
    index_lock = Path(g(draft.path, "rev-parse", "--absolute-git-dir").strip()) / "index.lock"
    branch_lock = path / ".git" / "refs" / "heads" / f"{draft.branch}.lock"
    assert index_lock.exists() and branch_lock.exists()

    with pytest.raises(Busy):
        with _locked(path / ".git" / f"dashmem-olivia-{SCW}.lock", "the draft", timeout=0.5):
            pass
    assert ConfigRepo(path).repaired == []  # opening leaves a live git's lock files alone
    assert index_lock.exists() and branch_lock.exists()

    os.write(writer, b"go on\n")
    os.close(writer)
    wait_for_orphans(path, [("olivia", SCW)])  # the branch moves, and the lock is free
    hook.unlink()
    draft = ConfigRepo(path).draft(OLIVIA, SCW)
    assert_checkout_equals(draft.path, draft.branch)
    assert rule_at(path, draft.branch, SCW) == "Committed by an orphan."


def test_a_draft_half_saved_is_restored_to_its_last_commit_when_opened(config_repo):
    repo = config_repo
    draft = repo.draft(OLIVIA, SCW)
    saved = repo.save(OLIVIA, SCW, {"task": task_with_rule(repo, SCW, "Last saved.")}, "saved")
    # what a save killed after writing one file and a temporary file, before committing, leaves
    (repo.path / ".git" / f"dashmem-olivia-{SCW}.writing").write_text("save")
    (draft.workspace_path / "task.yaml").write_text("rules: [half written\n")
    (draft.workspace_path / ".output.yaml.x1.tmp").write_text("partial")

    draft = repo.draft(OLIVIA, SCW)

    assert_checkout_equals(draft.path, draft.branch)
    assert branch_tips(repo.path)[f"refs/heads/{draft.branch}"] == saved
    assert workspace.load(draft.workspace_path)[0].data["task"]["rules"][0]["text"] == "Last saved."
    assert not (repo.path / ".git" / f"dashmem-olivia-{SCW}.writing").exists()
    assert g(repo.path, "show", f"stash@{{0}}:{SCW}/task.yaml") == "rules: [half written\n"  # kept all the same


def test_files_put_in_a_draft_by_hand_are_kept_for_the_next_save(config_repo):
    """Without a write in progress, what differs in a draft is the person's: opening leaves it."""
    repo = config_repo
    draft = repo.draft(OLIVIA, SCW)
    (draft.workspace_path / "data" / "extra.csv").write_text("a,b\n1,2\n")

    ConfigRepo(repo.path)
    draft = repo.draft(OLIVIA, SCW)

    assert (draft.workspace_path / "data" / "extra.csv").exists()
    sha = repo.save(OLIVIA, SCW, {"task": task_with_rule(repo, SCW, "With extra data.")}, "extra")
    assert read_file(repo.repo, sha, f"{SCW}/data/extra.csv") == b"a,b\n1,2\n"


def test_a_draft_left_mid_merge_is_repaired_on_open(config_repo):
    """An update of the draft from main (`sync`) killed inside its merge."""
    repo = config_repo
    draft = repo.draft(OLIVIA, SCW)
    mine = repo.save(OLIVIA, SCW, {"task": task_with_rule(repo, SCW, "Mine.")}, "mine")
    sam = User("sam", app_role="steward")
    gdp_task = copy.deepcopy(workspace.load(repo.draft(sam, "gdp-explorer").workspace_path)[0].data["task"])
    gdp_task["goal"] = "Published meanwhile."
    repo.save(sam, "gdp-explorer", {"task": gdp_task}, "meanwhile")
    publish.publish(repo, sam, "gdp-explorer")
    g(draft.path, "merge", "--no-ff", "--no-commit", "-q", MAIN)
    assert (Path(g(draft.path, "rev-parse", "--absolute-git-dir").strip()) / "MERGE_HEAD").exists()

    ConfigRepo(repo.path)

    assert_checkout_equals(draft.path, draft.branch)
    assert branch_tips(repo.path)[f"refs/heads/{draft.branch}"] == mine
    assert repo.sync(OLIVIA, SCW)
    assert "Published meanwhile." in (draft.path / "gdp-explorer" / "task.yaml").read_text()


def test_a_draft_checkout_killed_half_way_is_checked_out_again(config_repo):
    """`git worktree add` killed during its checkout leaves the worktree marked `locked`, half its files missing."""
    repo = config_repo
    draft = repo.draft(OLIVIA, SCW)
    saved = repo.save(OLIVIA, SCW, {"task": task_with_rule(repo, SCW, "Kept on the branch.")}, "saved")
    admin = Path(g(draft.path, "rev-parse", "--absolute-git-dir").strip())
    (admin / "locked").write_text("initializing")
    for f in list(draft.workspace_path.iterdir())[:3]:
        f.unlink() if f.is_file() else None

    draft = repo.draft(OLIVIA, SCW)

    assert_checkout_equals(draft.path, draft.branch)
    assert branch_tips(repo.path)[f"refs/heads/{draft.branch}"] == saved
    assert workspace.load(draft.workspace_path)[0].data["task"]["rules"][0]["text"] == "Kept on the branch."


def test_opening_a_sound_repo_changes_nothing(config_repo):
    repo = config_repo
    repo.save(OLIVIA, SCW, {"task": task_with_rule(repo, SCW, "Sound.")}, "sound")
    tips = branch_tips(repo.path)
    assert ConfigRepo(repo.path).repaired == []
    assert branch_tips(repo.path) == tips and g(repo.path, "stash", "list") == ""


def test_opening_packs_loose_objects_under_every_lock_keeping_what_repairs_kept(config_repo, monkeypatch):
    """git's auto-gc is off under our locks (a detached gc would take lock files of every kind); opening packs instead."""
    import lib.repo.configrepo as configrepo

    repo = config_repo
    draft = repo.draft(OLIVIA, SCW)
    repo.save(OLIVIA, SCW, {"task": task_with_rule(repo, SCW, "Before packing.")}, "save")
    (repo.path / SCW / "output.yaml").write_text("# an edit repair keeps\n", encoding="utf-8")
    loose = lambda: int(dict(line.split(": ") for line in g(repo.path, "count-objects", "-v").splitlines())["count"])  # noqa: E731
    monkeypatch.setattr(configrepo, "GC_LOOSE_OBJECTS", 0)  # as if they had piled up
    with _locked(repo.path / ".git" / f"dashmem-olivia-{SCW}.lock", "the draft", timeout=1):
        reopened = ConfigRepo(repo.path)  # repairs, but does not pack while a draft is being written
        assert loose() > 0
    assert any("reset the published checkout" in what for what in reopened.repaired)

    ConfigRepo(repo.path)

    assert loose() == 0
    assert_fsck_clean(repo.path)
    assert_checkout_equals(draft.path, draft.branch)
    assert g(repo.path, "show", f"stash@{{0}}:{SCW}/output.yaml") == "# an edit repair keeps\n"
