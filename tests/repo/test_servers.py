"""Several app servers sharing one config repo (issue #15, lib/repo/replica.py).

Each "server" is its own config repo (DASHMEM_CONFIG_REPO) replicating one bare
remote in a temporary folder (DASHMEM_CONFIG_REMOTE), and each runs in its own
processes: the real CLI (`python -m lib sync`, `publish`), a long-lived Python
process using the lib API as the app does (`Server`), and the app itself through
AppTest in a subprocess. Races between two servers' publishes are made certain,
not hoped for, with a pre-receive hook on the remote that holds every push to
`main` until both have arrived (`gate`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import git
import pytest

from ..conftest import ROOT

pytestmark = pytest.mark.slow

TIMEOUT_S = 180  # a hung process fails the test instead of hanging the run; not a timing assert
GDP, SCW = "gdp-explorer", "supply-chain-weekly"

# A long-lived process of one server: it opens the config repo as app.py does and then runs the Python
# statements the test sends, one JSON line each (its `result` variable is sent back), so caches and
# state live across steps as in a running app.
DRIVER = r"""
import copy, json, sys, traceback
from pathlib import Path
from lib.core import settings; from lib.memory import workspace
from lib.roles.access import User
from lib.repo.configrepo import ConfigRepo, MAIN
from lib.ops import publish

repo = ConfigRepo.open_or_create(settings.config_repo_path(), settings.templates_dir(), settings.get("DASHMEM_CONFIG_REMOTE"))
OLIVIA, SAM, VERA = User("olivia", app_role="owner"), User("sam", app_role="steward"), User("vera")

def edit_rule(user, slug, index, text):
    task = copy.deepcopy(workspace.load(repo.draft(user, slug).workspace_path)[0].data["task"])
    task["rules"][index]["text"] = text
    return repo.save(user, slug, {"task": task}, f"Edit rule {index}")

def rule(folder, index=0):
    return workspace.load(Path(folder))[0].data["task"]["rules"][index]["text"]

"""

# Both drivers then run what the test sends, one JSON line each, sending back its `result` variable.
LOOP = r"""
import json, sys, traceback
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    scope = {**globals(), "result": None}
    try:
        exec(json.loads(line), scope)
        print(json.dumps({"result": scope["result"]}, default=str), flush=True)
    except Exception as exc:
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}", "type": type(exc).__name__, "trace": traceback.format_exc()}), flush=True)
"""

# The app through AppTest, in its own process: `show(page, user)` runs the page as that user in a session
# that stays open (one per user), so a later call is the next page run of the same running app.
APP_DRIVER = r"""
from streamlit.testing.v1 import AppTest
sessions = {}

def show(page, user, slug="supply-chain-weekly"):
    at = sessions.get(user)
    if at is None:
        at = sessions[user] = AppTest.from_file("app.py", default_timeout=60)
        at.session_state["authentication_status"] = True
        at.session_state["username"] = user
        at.session_state["name"] = user
        at.session_state["slug"] = slug
        at.run()
    at.switch_page(page)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at

def click(at, label):
    next(b for b in at.button if b.label == label).click().run()
    assert not at.exception, [e.message for e in at.exception]
    return at
"""


# --------------------------------------------------------------------------- servers


def base_env(tmp: Path, name: str, remote: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DASHMEM_CONFIG_REPO": str(tmp / name / "config-repo"),
        "DASHMEM_CACHE_DIR": str(tmp / name / "cache"),
        "DASHMEM_CONFIG_REMOTE": str(remote),
        "DASHMEM_CONFIG_PULL_SECONDS": "0",
        "DASHMEM_COOKIE_KEY": "k" * 40,
        "GIT_CONFIG_GLOBAL": str(tmp / "gitconfig"),
        "GIT_CONFIG_NOSYSTEM": "1",
    }


def cli(env: dict, *args: str, rc: int | None = 0) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "lib", *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    if rc is not None:
        assert proc.returncode == rc, (proc.returncode, proc.stdout, proc.stderr)
    return proc


class Server:
    """One app server's long-lived process (see DRIVER), for as long as the test runs."""

    def __init__(self, env: dict, preamble: str = DRIVER):
        self.env = env
        self.repo_path = Path(env["DASHMEM_CONFIG_REPO"])
        self.proc = subprocess.Popen([sys.executable, "-c", preamble + LOOP], env=env, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self._read() == {"ready": True}

    def _read(self) -> dict:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"the server process exited ({self.proc.poll()})"
        return json.loads(line)

    def run(self, code: str):
        """Run `code` in the server's process; returns its `result`, or raises AssertionError with the server's error."""
        answer = self.ask(code)
        assert "error" not in answer, answer.get("trace")
        return answer["result"]

    def ask(self, code: str) -> dict:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(code) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=TIMEOUT_S)


@pytest.fixture
def remote(tmp_path) -> Path:
    path = tmp_path / "shared.git"
    git.Repo.init(path, bare=True, initial_branch="main")
    return path


@pytest.fixture
def envs(tmp_path, remote):
    """Two servers' environments; the first `sync` creates the shared repo from the templates, the second clones it."""
    a, b = base_env(tmp_path, "a", remote), base_env(tmp_path, "b", remote)
    assert "created" in cli(a, "sync").stdout
    assert "cloned" in cli(b, "sync").stdout
    return a, b


@pytest.fixture
def servers(envs):
    started = [Server(env) for env in envs]
    yield started
    for server in started:
        server.close()


def remote_main(remote: Path) -> str:
    return git.Repo(remote).commit("main").hexsha


def remote_rule(remote: Path, slug: str, ref: str = "main", index: int = 0) -> str:
    import yaml

    raw = git.Repo(remote).git.show(f"{ref}:{slug}/task.yaml")
    return yaml.safe_load(raw)["rules"][index]["text"]


def served_rule(server_repo: Path, slug: str, index: int = 0) -> str:
    """What a server serves: its published checkout's task.yaml, read from the disk."""
    import yaml

    return yaml.safe_load((server_repo / slug / "task.yaml").read_text(encoding="utf-8"))["rules"][index]["text"]


def gate(remote: Path, tmp: Path) -> Path:
    """Hold every push to the remote's `main` while `<tmp>/gate` exists; each arriving push leaves a file in
    `<tmp>/arrived`. Returns the gate file (remove it to let the pushes through)."""
    gate_file, arrived = tmp / "gate", tmp / "arrived"
    arrived.mkdir()
    gate_file.touch()
    hook = remote / "hooks" / "pre-receive"
    hook.write_text(
        "#!/bin/sh\n"
        "refs=$(cat)\n"
        'case "$refs" in *refs/heads/main*) ;; *) exit 0 ;; esac\n'
        f'touch "{arrived}/$$"\n'
        f'while [ -e "{gate_file}" ]; do sleep 0.05; done\n'
        "exit 0\n",
        encoding="utf-8",
    )
    hook.chmod(0o755)
    return gate_file


def wait_for(predicate, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not predicate():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def publish_both_at_once(remote: Path, tmp: Path, a: dict, b: dict, users: tuple[str, str], slugs: tuple[str, str]) -> list[subprocess.CompletedProcess]:
    """Both servers publish through the CLI; both pushes reach the remote before either is let through."""
    gate_file = gate(remote, tmp)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "lib", "publish", str(Path(env["DASHMEM_CONFIG_REPO"]) / slug), "--as", user],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for env, user, slug in ((a, users[0], slugs[0]), (b, users[1], slugs[1]))
    ]
    wait_for(lambda: len(list((tmp / "arrived").iterdir())) >= 2, "both publishes to push")
    gate_file.unlink()
    done = []
    for proc in procs:
        out, err = proc.communicate(timeout=TIMEOUT_S)
        assert "Traceback" not in out + err, err
        done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return done


# --------------------------------------------------------------------------- a publish on one server, served by the other


def test_a_publish_on_one_server_is_served_by_the_other_after_its_next_pull(servers, remote):
    a, b = servers
    start = remote_main(remote)
    shown_before = b.run(f"result = repo.workspaces_for(VERA)[{SCW!r}]['name']")
    a.run(f"edit_rule(OLIVIA, {GDP!r}, 0, 'Published on server A.')")
    a.run(
        f"meta = copy.deepcopy(repo.meta({SCW!r})); meta['name'] = 'Supply chain (renamed on A)'; repo.save(OLIVIA, {SCW!r}, {{'workspace': meta}}, 'rename')"
    )
    published = [a.run(f"result = publish.publish(repo, OLIVIA, {slug!r})") for slug in (GDP, SCW)]

    assert remote_main(remote) == published[-1] != start  # the publish is on the shared remote
    assert served_rule(a.repo_path, GDP) == "Published on server A."
    # Server B serves what it had until it pulls ...
    assert served_rule(b.repo_path, GDP) != "Published on server A."
    assert b.run(f"result = repo.workspaces_for(VERA)[{SCW!r}]['name']") == shown_before
    # ... and after its next pull its cached metas (keyed by main's sha) and its checkout show A's publish.
    assert any(line.startswith("main ") for line in b.run("result = repo.pull_if_due(0)"))
    assert b.run(f"result = repo.workspaces_for(VERA)[{SCW!r}]['name']") == "Supply chain (renamed on A)"
    assert served_rule(b.repo_path, GDP) == "Published on server A."
    assert b.run(f"result = rule(repo.published_path({GDP!r}))") == "Published on server A."
    assert b.run("result = repo.repo.commit(MAIN).hexsha") == published[-1]
    assert b.run("result = repo.repo.git.status('--porcelain')") == ""


def test_the_pull_interval_limits_fetches_and_sync_pulls_on_demand(envs, remote, tmp_path):
    a_env, b_env = envs
    b_env = {**b_env, "DASHMEM_CONFIG_PULL_SECONDS": "3600"}
    a, b = Server(a_env), Server(b_env)
    try:
        b.run("result = repo.pull_if_due(3600)")  # the process's first pull: the next is due in an hour
        a.run(f"edit_rule(OLIVIA, {GDP!r}, 0, 'Second publish.'); publish.publish(repo, OLIVIA, {GDP!r})")
        assert b.run("result = repo.pull_if_due(3600)") == []  # not due: no fetch
        assert served_rule(b.repo_path, GDP) != "Second publish."
        # `python -m lib sync` on server B (another process) pulls now; B's running process sees it at once.
        out = cli(b_env, "sync").stdout
        assert "main " in out and "up to date" not in out
        assert b.run(f"result = rule(repo.published_path({GDP!r}))") == "Second publish."
        assert b.run(f"result = repo.meta({GDP!r})['name']") == "GDP explorer"
        assert "up to date" in cli(b_env, "sync").stdout
        # A shorter interval takes effect at once (the interval is counted from the last pull, not fixed then).
        a.run(f"edit_rule(OLIVIA, {GDP!r}, 0, 'Third publish.'); publish.publish(repo, OLIVIA, {GDP!r})")
        assert any(line.startswith("main ") for line in b.run("result = repo.pull_if_due(0)"))
        assert served_rule(b.repo_path, GDP) == "Third publish."
    finally:
        a.close()
        b.close()


# --------------------------------------------------------------------------- two servers publishing at once


def test_two_servers_publishing_different_workspaces_at_once_both_land(servers, remote, tmp_path):
    a, b = servers
    start = remote_main(remote)
    a.run(f"edit_rule(OLIVIA, {GDP!r}, 0, 'From server A.')")
    b.run(f"edit_rule(OLIVIA, {SCW!r}, 0, 'From server B.')")
    done = publish_both_at_once(remote, tmp_path, a.env, b.env, ("olivia", "olivia"), (GDP, SCW))
    assert [p.returncode for p in done] == [0, 0], [p.stderr for p in done]

    # Nothing lost: both on the shared main, as two publish merges one after the other; the later one was
    # refused once (the remote had moved), merged again on the first and pushed.
    assert remote_rule(remote, GDP) == "From server A." and remote_rule(remote, SCW) == "From server B."
    chain = list(git.Repo(remote).iter_commits("main", first_parent=True))
    assert len(chain) == 3 and chain[-1].hexsha == start
    assert all(len(c.parents) == 2 for c in chain[:2])
    for server in (a, b):
        server.run("result = repo.pull_if_due(0)")
        assert served_rule(server.repo_path, GDP) == "From server A."
        assert served_rule(server.repo_path, SCW) == "From server B."
        assert server.run("result = repo.repo.commit(MAIN).hexsha") == chain[0].hexsha


def test_two_servers_publishing_conflicting_edits_one_lands_the_other_keeps_its_draft(servers, remote, tmp_path):
    a, b = servers
    a.run(f"edit_rule(OLIVIA, {GDP!r}, 0, 'Olivia on server A.')")
    b.run(f"edit_rule(SAM, {GDP!r}, 0, 'Sam on server B.')")  # gdp-explorer lets stewards publish their own drafts
    done = publish_both_at_once(remote, tmp_path, a.env, b.env, ("olivia", "sam"), (GDP, GDP))
    assert sorted(p.returncode for p in done) == [0, 1], [p.stderr for p in done]
    won, lost = (0, 1) if done[0].returncode == 0 else (1, 0)
    texts, servers_ = ("Olivia on server A.", "Sam on server B."), (a, b)
    drafts = ("draft/olivia/gdp-explorer", "draft/sam/gdp-explorer")

    message = done[lost].stderr
    assert message.startswith("error: cannot publish gdp-explorer:") and "gdp-explorer/task.yaml" in message
    assert "your draft and the published version are both kept" in message
    assert remote_rule(remote, GDP) == texts[won]
    # The loser's draft is kept as it was, on its server and on the shared remote.
    loser = servers_[lost]
    assert loser.run(f"result = rule(repo.draft({('OLIVIA', 'SAM')[lost]}, {GDP!r}).workspace_path)") == texts[lost]
    assert remote_rule(remote, GDP, drafts[lost]) == texts[lost]
    assert loser.run("result = repo.repo.git.status('--porcelain')") == ""
    # Its server serves the winner's publish after it pulls, and the loser can take it into the draft.
    loser.run("repo.pull_if_due(0)")
    assert served_rule(loser.repo_path, GDP) == texts[won]
    answer = loser.ask(f"repo.sync({('OLIVIA', 'SAM')[lost]}, {GDP!r})")
    assert answer.get("type") == "PublishConflict"


# --------------------------------------------------------------------------- drafts travel between servers


def test_a_draft_saved_on_one_server_is_shown_and_continued_on_the_other(servers, remote):
    a, b = servers
    a.run(f"edit_rule(SAM, {GDP!r}, 0, 'Started on server A.')")
    assert remote_rule(remote, GDP, f"draft/sam/{GDP}") == "Started on server A."  # pushed when saved
    b.run("repo.pull_if_due(0)")
    # Checked out on B too, so an owner reviewing it there sees its checks (Review runs them on its folder).
    assert b.run(f"result = [(d['branch'], d['workspace_path'].exists()) for d in repo.drafts({GDP!r})]") == [[f"draft/sam/{GDP}", True]]
    assert b.run(f"result = repo.has_draft(SAM, {GDP!r})")
    assert b.run(f"result = rule(repo.draft(SAM, {GDP!r}).workspace_path)") == "Started on server A."
    b.run(f"edit_rule(SAM, {GDP!r}, 1, 'Continued on server B.')")
    # Server A's checkout of the draft is brought up to it by its next pull.
    assert any(f"draft/sam/{GDP}" in line for line in a.run("result = repo.pull_if_due(0)"))
    assert a.run(f"result = rule(repo.draft(SAM, {GDP!r}).workspace_path, 1)") == "Continued on server B."
    assert a.run(f"result = repo.undo_stack(SAM, {GDP!r})[-1]") == b.run(f"result = repo.repo.commit('draft/sam/{GDP}').hexsha")
    # An owner publishes it from server A; server B serves it after its pull.
    a.run(f"publish.publish_branch(repo, OLIVIA, {GDP!r}, 'draft/sam/{GDP}')")
    b.run("repo.pull_if_due(0)")
    assert served_rule(b.repo_path, GDP, 1) == "Continued on server B."


def test_a_draft_rejected_on_one_server_leaves_the_review_list_of_the_other(servers, remote):
    a, b = servers
    a.run(f"edit_rule(SAM, {SCW!r}, 0, 'Not wanted.')")
    b.run("repo.pull_if_due(0)")
    assert [d["branch"] for d in b.run(f"result = repo.drafts({SCW!r})")] == [f"draft/sam/{SCW}"]
    kept = a.run(f"result = repo.reject(OLIVIA, {SCW!r}, 'draft/sam/{SCW}')")
    assert f"refs/heads/{kept}" in git.Repo(remote).git.for_each_ref("refs/heads/")
    b.run("repo.pull_if_due(0)")
    assert b.run(f"result = repo.drafts({SCW!r})") == []
    assert b.run(f"result = repo.repo.git.show('{kept}:{SCW}/task.yaml')").count("Not wanted.") == 1  # kept, not deleted


# --------------------------------------------------------------------------- the remote cannot be reached


def test_an_unreachable_remote_refuses_the_publish_keeps_the_draft_and_serves_on(servers, remote, tmp_path):
    a, b = servers
    start = remote_main(remote)
    away = tmp_path / "shared-away.git"
    remote.rename(away)
    try:
        a.run(f"edit_rule(OLIVIA, {GDP!r}, 0, 'Written while the remote was away.')")  # saved here all the same
        answer = a.ask(f"publish.publish(repo, OLIVIA, {GDP!r})")
        assert answer["type"] == "RemoteUnreachable" and "cannot reach the shared config repo" in answer["error"]
        assert a.run("result = repo.repo.commit(MAIN).hexsha") == start  # nothing published here either
        assert a.run("result = repo.repo.git.status('--porcelain')") == ""
        assert a.run(f"result = rule(repo.draft(OLIVIA, {GDP!r}).workspace_path)") == "Written while the remote was away."
        assert a.run("result = repo.pull_if_due(0)") == []  # serving goes on from what the server has
        assert served_rule(a.repo_path, GDP) != "Written while the remote was away."
        proc = cli(a.env, "sync", rc=1)
        assert proc.stderr.startswith("error: cannot reach the shared config repo") and len(proc.stderr.strip().splitlines()) == 1
        proc = cli(a.env, "publish", str(a.repo_path / GDP), "--as", "olivia", rc=1)
        assert "cannot reach the shared config repo" in proc.stderr
    finally:
        away.rename(remote)
    # Back: the draft saved meanwhile is pushed by the next pull, and the publish goes through.
    a.run("repo.pull_if_due(0)")
    assert remote_rule(remote, GDP, f"draft/olivia/{GDP}") == "Written while the remote was away."
    sha = a.run(f"result = publish.publish(repo, OLIVIA, {GDP!r})")
    assert remote_main(remote) == sha
    b.run("repo.pull_if_due(0)")
    assert served_rule(b.repo_path, GDP) == "Written while the remote was away."


def test_a_push_the_remote_refuses_for_another_reason_is_a_plain_message_and_publishes_nothing(servers, remote):
    a, _ = servers
    start = remote_main(remote)
    hook = remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'main is frozen for the audit' >&2\nexit 1\n", encoding="utf-8")
    hook.chmod(0o755)
    a.run(f"edit_rule(OLIVIA, {GDP!r}, 0, 'Refused by the remote.')")
    answer = a.ask(f"publish.publish(repo, OLIVIA, {GDP!r})")
    assert answer["type"] == "RemoteUnreachable", answer
    assert "cannot push to the shared config repo" in answer["error"] and "pre-receive hook declined" in answer["error"]
    assert remote_main(remote) == start and a.run("result = repo.repo.commit(MAIN).hexsha") == start
    assert a.run(f"result = rule(repo.draft(OLIVIA, {GDP!r}).workspace_path)") == "Refused by the remote."
    assert served_rule(a.repo_path, GDP) != "Refused by the remote."


def test_a_new_server_cannot_start_without_the_remote_and_says_so(tmp_path):
    env = base_env(tmp_path, "c", tmp_path / "no-such-remote.git")
    proc = cli(env, "sync", rc=1)
    assert proc.stderr.startswith("error: cannot reach the shared config repo") and "no-such-remote.git" in proc.stderr
    assert not Path(env["DASHMEM_CONFIG_REPO"]).exists()  # nothing half-made left behind
    assert list((tmp_path / "c").glob(".config-repo.*")) == []


def test_a_remote_that_accepts_and_then_stalls_is_given_up_on_not_waited_for(monkeypatch):
    """A hung git host must not hold a page run, and the lock it pulls under, for ever (found in review: no timeout)."""
    import threading

    from lib.repo import replica

    from ..conftest import FlakyProxy

    monkeypatch.setattr(replica, "STALL_S", 2)
    hung = FlakyProxy(None, mode="silent")
    outcome: list[BaseException | None] = []

    def ask() -> None:
        try:
            replica.remote_main(f"http://127.0.0.1:{hung.port}/config.git")
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001  # handed to the test's thread
            outcome.append(exc)

    try:
        worker = threading.Thread(target=ask, daemon=True)
        worker.start()
        worker.join(120)  # a hang detector, not a timing figure: without the guard this never returns
        assert not worker.is_alive(), "git waited on a stalled remote"
    finally:
        hung.stop()
    [error] = outcome
    assert isinstance(error, replica.RemoteUnreachable) and "cannot reach the shared config repo" in str(error)


def test_a_remote_url_with_a_password_is_refused_naming_the_setting(tmp_path):
    env = base_env(tmp_path, "c", tmp_path / "x.git")
    env["DASHMEM_CONFIG_REMOTE"] = "https://bot:hunter2@git.example.com/acme/config.git"
    proc = cli(env, "sync", rc=1)
    assert "DASHMEM_CONFIG_REMOTE" in proc.stderr and "password" in proc.stderr and "hunter2" not in proc.stderr


# --------------------------------------------------------------------------- the app: two running apps


def test_two_running_apps_a_publish_in_one_is_served_by_the_other(envs, remote):
    a_env, b_env = envs
    a, b = Server(a_env, APP_DRIVER), Server(b_env, APP_DRIVER)
    try:
        history = "[r['message'] for r in show('app_pages/history.py', 'vera').dataframe[0].value.to_dict('records')]"
        before = b.run(f"result = {history}")
        a.run(
            "at = show('app_pages/specs.py', 'sam')\n"
            "next(t for t in at.text_area if t.label == 'Goal').input('Published from app server A.')\n"
            "click(at, 'Save task rules')\n"
            "at = show('app_pages/review.py', 'olivia')\n"
            "click(at, 'Publish'); click(at, 'Yes, publish')\n"
            'assert any(s.value.startswith("Published sam\'s draft") for s in at.success), [e.value for e in at.error]'
        )
        import yaml

        assert yaml.safe_load(git.Repo(remote).git.show(f"main:{SCW}/task.yaml"))["goal"] == "Published from app server A."
        # App B's next page run pulls (DASHMEM_CONFIG_PULL_SECONDS=0) and shows A's publish in the history.
        after = b.run(f"result = {history}")
        assert after[1:] == before and after[0].startswith(f"Publish {SCW} from draft/sam/{SCW}")
    finally:
        a.close()
        b.close()


def test_setting_the_remote_on_an_existing_server_shares_its_config_repo(tmp_path, remote):
    """A server that ran alone (its own config repo) is given DASHMEM_CONFIG_REMOTE: it pushes what it published."""
    alone = base_env(tmp_path, "alone", remote)
    alone.pop("DASHMEM_CONFIG_REMOTE")
    server = Server(alone)
    try:
        server.run(f"edit_rule(OLIVIA, {GDP!r}, 0, 'Published before sharing.'); publish.publish(repo, OLIVIA, {GDP!r})")
        assert server.run("result = repo.shared") is False
    finally:
        server.close()
    shared = {**alone, "DASHMEM_CONFIG_REMOTE": str(remote)}
    cli(shared, "sync")
    assert remote_rule(remote, GDP) == "Published before sharing."
    other = base_env(tmp_path, "other", remote)
    assert "cloned" in cli(other, "sync").stdout
    assert served_rule(Path(other["DASHMEM_CONFIG_REPO"]), GDP) == "Published before sharing."


def test_a_remote_given_as_a_relative_path_means_the_same_folder_wherever_git_runs(tmp_path, monkeypatch):
    from lib.repo.gitops import ConfigRepoError
    from lib.repo.replica import check_url

    monkeypatch.chdir(tmp_path)
    assert check_url("shared/config.git") == str(tmp_path / "shared" / "config.git")
    assert check_url("git@github.com:acme/config.git") == "git@github.com:acme/config.git"
    assert check_url("ssh://git@git.example.com/acme/config.git") == "ssh://git@git.example.com/acme/config.git"
    for bad in ("--upload-pack=touch x", "two words", "https://bot:secret@git.example.com/x.git"):
        with pytest.raises(ConfigRepoError):
            check_url(bad)


def test_a_publish_killed_while_its_push_is_on_the_way_is_finished_by_the_next_pull(servers, remote, tmp_path):
    """Killed after the push left but before `main` moved here: the remote has the publish, this server's `main`
    is the old commit (never half-way), and the next pull brings it up; the git push, which holds the lock it
    inherited, finishes first."""
    a, b = servers
    start = remote_main(remote)
    a.run(f"edit_rule(OLIVIA, {GDP!r}, 0, 'Published by a process that was killed.')")
    gate_file = gate(remote, tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "lib", "publish", str(a.repo_path / GDP), "--as", "olivia"], env=a.env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    wait_for(lambda: any((tmp_path / "arrived").iterdir()), "the publish to push")
    proc.kill()
    proc.communicate(timeout=TIMEOUT_S)
    assert a.run("result = repo.repo.commit(MAIN).hexsha") == start
    gate_file.unlink()
    out = cli(a.env, "sync").stdout  # waits for the lock the orphaned push still holds
    assert remote_main(remote) != start and remote_rule(remote, GDP) == "Published by a process that was killed."
    assert a.run("result = repo.repo.commit(MAIN).hexsha") == remote_main(remote), out
    assert served_rule(a.repo_path, GDP) == "Published by a process that was killed."
    assert a.run("result = repo.repo.git.status('--porcelain')") == ""
    b.run("repo.pull_if_due(0)")
    assert served_rule(b.repo_path, GDP) == "Published by a process that was killed."


# --------------------------------------------------------------------------- scheduled refresh on a replica


def test_refresh_all_on_a_server_pulls_first_so_it_refreshes_what_another_server_published(envs, remote, tmp_path):
    a_env, b_env = envs
    b_env = {**b_env, "DASHMEM_CONFIG_PULL_SECONDS": "3600"}  # B's app would not pull for an hour
    a = Server(a_env)
    try:
        a.run(
            f"meta = copy.deepcopy(repo.meta({GDP!r})); meta['refresh'] = {{'every': '1h'}}; repo.save(OLIVIA, {GDP!r}, {{'workspace': meta}}, 'schedule'); "
            f"publish.publish(repo, OLIVIA, {GDP!r})"
        )
    finally:
        a.close()
    run = cli(b_env, "refresh", "--all", b_env["DASHMEM_CONFIG_REPO"], "--json")
    by_name = {w["workspace"]: w for w in json.loads(run.stdout)["workspaces"]}
    assert by_name[GDP]["status"] == "refreshed" and by_name[GDP]["next_due"]  # the schedule A published, seen on B
    assert by_name[SCW]["next_due"] is None
    assert any(line.startswith("main ") for line in json.loads(run.stdout)["pulled"])
    assert "pulled: main " in run.stderr

    # With the remote unreachable, the run refreshes what B has and says why it did not pull.
    away = tmp_path / "shared-away.git"
    remote.rename(away)
    try:
        run = cli(b_env, "refresh", "--all", b_env["DASHMEM_CONFIG_REPO"])
    finally:
        away.rename(remote)
    assert "3 workspace(s)" not in run.stdout and "2 workspace(s): 0 refreshed, 2 unchanged" in run.stdout
    assert "note: " in run.stderr and "refreshed what this server has" in run.stderr and "cannot reach the shared config repo" in run.stderr
