"""`python -m lib ...` as a person or CI runs it: real processes, real git checkouts."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import git
import pytest

from ..conftest import ROOT, WORKSPACES

# Tests that run several `python -m lib` processes, or one that loads and checks real data: about 2.5-3.5 s
# each here, in the slow loop. The one-process error and validation tests stay in the fast loop.
PROCESSES = pytest.mark.slow


def run(*args, cwd=ROOT, check_rc=None):
    proc = subprocess.run(
        [sys.executable, "-m", "lib", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(cwd), "XDG_CACHE_HOME": os.environ["XDG_CACHE_HOME"], "GIT_CONFIG_NOSYSTEM": "1"},
        timeout=60,
    )
    if check_rc is not None:
        assert proc.returncode == check_rc, proc.stdout + proc.stderr
    return proc


@PROCESSES
def test_validate_shipped_workspaces_exits_0():
    proc = run("validate", "workspaces/", check_rc=0)
    assert "2 workspace(s), 0 error(s)" in proc.stdout


@PROCESSES
def test_validate_json_parses():
    proc = run("validate", "workspaces/", "--json", check_rc=0)
    report = json.loads(proc.stdout)
    assert report["ok"] is True and {Path(w["path"]).name for w in report["workspaces"]} == {"gdp-explorer", "supply-chain-weekly"}


@pytest.fixture
def broken(tmp_path):
    shutil.copytree(WORKSPACES, tmp_path / "ws", symlinks=True)
    task = tmp_path / "ws" / "supply-chain-weekly" / "task.yaml"
    task.write_text(task.read_text().replace("author: sam", "author: [sam]", 1))
    (tmp_path / "ws" / "gdp-explorer" / "output.yaml").write_text("data_injection: {mode: queries_at_render\n")
    return tmp_path / "ws"


def test_validate_broken_copy_exits_1_with_file_line_messages(broken):
    proc = run("validate", broken, check_rc=1)
    lines = proc.stdout.splitlines()
    assert any(re.search(r"supply-chain-weekly/task\.yaml:\d+: rules\[\d\]\.author: error: \[\"sam\"\] is not of type string", l) for l in lines), proc.stdout
    assert any(re.search(r"gdp-explorer/output\.yaml:\d+: error: malformed YAML", l) for l in lines), proc.stdout
    assert lines[-1] == "2 workspace(s), 2 error(s)"


def test_validate_broken_copy_json(broken):
    proc = run("validate", broken, "--json", check_rc=1)
    report = json.loads(proc.stdout)
    assert report["ok"] is False and report["errors"] == 2
    diags = [d for w in report["workspaces"] for d in w["diagnostics"]]
    assert {d["id"] for d in diags} == {"schema.type", "yaml.syntax"}
    assert all(d["file"] and d["line"] for d in diags)


def test_validate_missing_path(tmp_path):
    proc = run("validate", tmp_path / "nope", check_rc=1)
    assert "no such file" in proc.stderr


def run_strict(path, *args, strict_variable: str | None = None):
    """`validate PATH ARGS...`, with DASHMEM_VALIDATE_STRICT as the config repo's CI passes it (None: unset)."""
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(path), "XDG_CACHE_HOME": os.environ["XDG_CACHE_HOME"]}
    if strict_variable is not None:
        env["DASHMEM_VALIDATE_STRICT"] = strict_variable
    command = [sys.executable, "-m", "lib", "validate", str(path), *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env, timeout=60)


@pytest.fixture
def data_gone(tmp_path):
    """A copy of gdp-explorer whose CSV is missing: its data checks cannot run."""
    shutil.copytree(WORKSPACES / "gdp-explorer", tmp_path / "gdp-explorer", symlinks=True)
    (tmp_path / "gdp-explorer" / "data" / "gdp.csv").unlink()
    return tmp_path / "gdp-explorer"


@PROCESSES
def test_validate_strict_fails_when_the_data_checks_could_not_run_and_says_which_check(data_gone):
    lenient = run_strict(data_gone)
    assert lenient.returncode == 0 and "warning: data checks not run" in lenient.stdout, lenient.stdout + lenient.stderr
    strict = run_strict(data_gone, "--strict")
    assert strict.returncode == 1, strict.stdout + strict.stderr
    [line] = [l for l in strict.stdout.splitlines() if "check.data_not_run" in l]
    assert "sources.yaml" in line and "error: data checks not run" in line and "gdp" in line, strict.stdout
    assert "Traceback" not in strict.stdout + strict.stderr
    # CI asks for it through the repository variable, which reaches `validate` as DASHMEM_VALIDATE_STRICT.
    for value, failed in (("true", True), ("True", True), ("false", False), ("", False)):
        report = run_strict(data_gone, "--json", strict_variable=value)
        levels = [d["level"] for w in json.loads(report.stdout)["workspaces"] for d in w["diagnostics"] if d["id"] == "check.data_not_run"]
        assert (report.returncode, levels) == ((1, ["error"]) if failed else (0, ["warning"])), (value, report.stdout)


@PROCESSES
def test_validate_strict_passes_when_the_data_checks_ran_clean():
    proc = run_strict(WORKSPACES, "--strict", strict_variable="true")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "check.data_not_run" not in proc.stdout and proc.stdout.splitlines()[-1].endswith(", 0 error(s)")


def test_a_strict_variable_that_is_neither_true_nor_false_fails_naming_it(data_gone):
    proc = run_strict(data_gone, strict_variable="maybe")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    [line] = proc.stderr.splitlines()
    assert line.startswith("error: DASHMEM_VALIDATE_STRICT is 'maybe'") and "allowed: " in line and "true" in line, proc.stderr


@PROCESSES
def test_new_creates_a_valid_workspace_and_refuses_traversal(tmp_path):
    run("new", tmp_path / "team-kpis", "--owner", "alice", check_rc=0)
    run("validate", tmp_path / "team-kpis", check_rc=0)
    proc = run("new", tmp_path / "team-kpis", check_rc=1)
    assert "already exists" in proc.stderr
    proc = run("new", "../escape", cwd=tmp_path, check_rc=1)
    assert "without '..'" in proc.stderr and not (tmp_path.parent / "escape").exists()
    proc = run("new", tmp_path / "Bad Name", check_rc=1)
    assert "invalid workspace name" in proc.stderr and not (tmp_path / "Bad Name").exists()


def test_new_from_template(tmp_path):
    run("new", tmp_path / "gdp-copy", "--template", "gdp-explorer", "--name", "GDP copy", check_rc=0)
    assert (tmp_path / "gdp-copy" / "data" / "gdp.csv").exists()
    assert "name: GDP copy" in (tmp_path / "gdp-copy" / "workspace.yaml").read_text()


@pytest.fixture
def plain_checkout(config_repo, tmp_path):
    """A plain clone of a config repo, as a platform engineer would have."""
    clone = git.Repo.clone_from(config_repo.path, tmp_path / "checkout")
    with clone.config_writer() as cw:
        cw.set_value("user", "name", "Platform Pat")
        cw.set_value("user", "email", "pat@example.com")
    return clone


def _commit_edit(clone: git.Repo, text: str) -> str:
    assert clone.working_tree_dir is not None  # a clone with a work tree
    task = Path(clone.working_tree_dir) / "gdp-explorer" / "task.yaml"
    task.write_text(task.read_text().replace("Let anyone compare", text, 1))
    clone.index.add([str(task)])
    return clone.index.commit(f"edit: {text}").hexsha


def test_history_diff_and_revert_on_a_plain_checkout(plain_checkout):
    path = Path(plain_checkout.working_tree_dir) / "gdp-explorer"
    first = plain_checkout.head.commit.hexsha
    original = (path / "task.yaml").read_bytes()
    _commit_edit(plain_checkout, "Help anyone compare")

    history = json.loads(run("history", path, "--json", check_rc=0).stdout)
    assert [h["message"] for h in history][:2] == ["edit: Help anyone compare", "Create config repo from templates"]

    diff = run("diff", path, first, "HEAD", "--file", "task.yaml", check_rc=0).stdout
    assert "-goal: Let anyone compare" in diff and "+goal: Help anyone compare" in diff

    out = run("revert", path, first, check_rc=0).stdout
    assert out.startswith("reverted gdp-explorer to")
    assert (path / "task.yaml").read_bytes() == original
    head = plain_checkout.head.commit
    assert head.author.email == "pat@example.com" and len(list(plain_checkout.iter_commits())) == 3
    assert "Dashmem-Action: revert" in head.message


@PROCESSES
def test_publish_a_branch_on_a_plain_checkout(plain_checkout):
    path = Path(plain_checkout.working_tree_dir) / "gdp-explorer"
    plain_checkout.git.checkout("-b", "draft/sam/gdp-explorer")
    _commit_edit(plain_checkout, "Help anyone compare")
    plain_checkout.git.checkout("main")
    proc = run("publish", path, "--as", "vera", "--branch", "draft/sam/gdp-explorer", check_rc=1)
    assert "vera (viewer) may not publish" in proc.stderr
    run("publish", path, "--as", "olivia", "--branch", "draft/sam/gdp-explorer", check_rc=0)
    assert "Help anyone compare" in (path / "task.yaml").read_text()
    assert len(plain_checkout.head.commit.parents) == 2  # a merge: both histories kept


# One process saves an owner's draft through the config repo, as the app does; others diff it as CI or a person would.
_EDIT_DRAFT = """
import sys
from pathlib import Path
from lib.memory import workspace
from lib.roles.access import User
from lib.repo.configrepo import ConfigRepo

repo = ConfigRepo.open_or_create(Path(sys.argv[1]), None)
olivia = User("olivia", app_role="owner")
data = workspace.load(repo.draft(olivia, "supply-chain-weekly").workspace_path)[0].data
rule = next(r for r in data["task"]["rules"] if r["id"] == "week-label")
rule["text"] = "Label weeks as ISO 8601 weeks (2026-W47)."
rule["check"] = {"kind": "category_color", "field": "gate", "value": "Orders", "color": "#ff7f0e"}
data["workspace"]["access"]["viewers"] = ["vera"]
data["output"]["theme"]["primary"] = "#000000"
by_site = next(c for c in data["dashboard"]["components"] if c["id"] == "by_site")
by_site["query"] = by_site["query"].replace("ORDER BY attainment DESC", "ORDER BY attainment")
print(repo.save(olivia, "supply-chain-weekly", {k: data[k] for k in ("task", "workspace", "output", "dashboard")}, "Tighten week labels"))
"""


@PROCESSES
def test_diff_semantic_of_a_draft_saved_by_another_process(config_repo):
    saved = subprocess.run(
        [sys.executable, "-c", _EDIT_DRAFT, str(config_repo.path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
    )
    assert saved.returncode == 0 and re.fullmatch(r"[0-9a-f]{40}\n", saved.stdout), saved.stdout + saved.stderr
    draft = Path(f"{config_repo.path}.drafts") / "olivia" / "supply-chain-weekly" / "supply-chain-weekly"
    assert draft.is_dir()

    out = json.loads(run("diff", draft, "main", "--semantic", "--json", check_rc=0).stdout)
    assert [(c["category"], c["kind"], c["id"], c["severity"]) for c in out["changes"]] == [
        ("access", "granted", "viewers", "attention"),
        ("access", "revoked", "viewers", "attention"),
        ("task", "reworded", "week-label", "info"),
        ("task", "check_added", "week-label", "info"),
        ("output", "changed", "theme.primary", "info"),
        ("dashboard", "requery", "by_site", "info"),
    ]
    assert sorted(f["path"] for f in out["files"]) == ["dashboard.yaml", "output.yaml", "task.yaml", "workspace.yaml"]

    text = run("diff", draft, "main", "--semantic", check_rc=0).stdout
    meaning, _, detail = text.partition("\n\n")
    assert meaning.splitlines()[:3] == ["Access:", "  ! 'vera' added to viewers", "  ! '*' removed from viewers"]
    assert "  - task rule week-label reworded: 'Label weeks as ISO weeks (2026-W47), not dates.' -> 'Label weeks as ISO 8601 weeks (2026-W47).'" in meaning
    assert "  - output constraint theme.primary: '#1f77b4' -> '#000000'" in meaning
    assert detail.startswith("--- a/supply-chain-weekly/dashboard.yaml@") and "+    text: Label weeks as ISO 8601 weeks (2026-W47)." in detail

    only_task = json.loads(run("diff", draft, "main", "--semantic", "--json", "--file", "task.yaml", check_rc=0).stdout)
    assert {c["category"] for c in only_task["changes"]} == {"task"} and [f["path"] for f in only_task["files"]] == ["task.yaml"]


@PROCESSES
def test_diff_semantic_names_a_file_it_cannot_read_and_still_reads_the_others(plain_checkout):
    path = Path(plain_checkout.working_tree_dir) / "gdp-explorer"
    first = plain_checkout.head.commit.hexsha
    (path / "output.yaml").write_text("theme: {background: '#fff'\n")
    _commit_edit(plain_checkout, "Help anyone compare")  # commits task.yaml; add output.yaml to the same commit
    plain_checkout.index.add([str(path / "output.yaml")])
    plain_checkout.index.commit("break output.yaml")
    proc = run("diff", path, first, "--semantic", check_rc=0)
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = proc.stdout.split("\n\n")[0].splitlines()
    assert lines[0] == "Files:"  # first: the summary below it is missing that file
    assert any(line.startswith("  ! output.yaml could not be read") and "in the new version, line 2" in line for line in lines), lines
    assert any(line.startswith("  - task goal changed:") for line in lines)
    assert not any("output constraint" in line for line in lines)  # not read as emptied


@PROCESSES
def test_autodraft_json_prints_only_the_check_results_on_stdout(tmp_path):
    folder = tmp_path / "supply-chain-weekly"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", folder)
    (folder / "dashboard.yaml").unlink()
    proc = run("autodraft", folder, "--json", cwd=tmp_path, check_rc=0)
    assert json.loads(proc.stdout)["ok"] is True
    assert "wrote dashboard.yaml" in proc.stderr and (folder / "dashboard.yaml").is_file()


@pytest.mark.parametrize(
    "args, message",
    [
        (("history", "workspaces/gdp-explorer", "--ref", "nope"), "error: unknown version 'nope'"),
        (("compose", "workspaces/gdp-explorer", "--message", ""), "error: give the message to compose with --message TEXT"),
    ],
)
def test_bad_arguments_are_one_line_not_a_traceback(args, message):
    proc = run(*args, check_rc=1)
    assert proc.stderr.startswith(message) and "Traceback" not in proc.stderr + proc.stdout


def _user_facing_errors():
    from lib.artifacts.export import ExportError
    from lib.data.connectors.base import SourceError
    from lib.data.sandbox import QueryRefused
    from lib.memory.secrets import SecretMissing
    from lib.roles.access import PermissionDenied

    return [
        PermissionDenied("sam (steward) may not publish in workspace 'x'"),
        QueryRefused("only SELECT queries are allowed (WITH … SELECT included), not DROP"),
        ExportError("x has no dashboard.yaml to export"),
        SecretMissing("secret env:DB_PW is not set: define the environment variable DB_PW"),
        SourceError("orders", "the file does not exist"),
    ]


@pytest.mark.parametrize("exc", _user_facing_errors(), ids=lambda e: type(e).__name__)
def test_any_user_facing_error_is_its_message_on_one_line(exc, monkeypatch, capsys):
    from lib import cli

    def fails(args):
        raise exc

    monkeypatch.setattr(cli, "cmd_history", fails)
    assert cli.main(["history", "workspaces/gdp-explorer"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err == f"error: {exc}\n" and "Traceback" not in err
    assert cli.main(["history", "workspaces/gdp-explorer", "--json"]) == 1
    assert json.loads(capsys.readouterr().out) == {"ok": False, "error": str(exc)}


def test_an_unexpected_error_is_one_line_naming_its_type_unless_debugging(monkeypatch, capsys):
    from lib import cli

    def fails(args):
        raise RuntimeError("internal detail\nsecond line")

    monkeypatch.setattr(cli, "cmd_history", fails)
    monkeypatch.delenv("DASHMEM_DEBUG", raising=False)
    assert cli.main(["history", "workspaces/gdp-explorer"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: history failed: RuntimeError: internal detail (run again with DASHMEM_DEBUG=1")
    monkeypatch.setenv("DASHMEM_DEBUG", "1")
    with pytest.raises(RuntimeError):
        cli.main(["history", "workspaces/gdp-explorer"])


# ------------------------------------------------------------------ refresh from cron: a cold process each time

# Runs `python -m lib ARGS` as `run` does and prints, last, how many query workers the process started.
_COUNTING_WORKERS = """
import runpy, sys
sys.argv = ["lib", *sys.argv[1:]]
try:
    runpy.run_module("lib", run_name="__main__", alter_sys=True)
except SystemExit as exc:
    code = exc.code
workers = sys.modules.get("lib.data.query_worker")
print("query workers started:", workers._POOL.count if workers else 0)
sys.exit(code)
"""


def run_counting_workers(*args, cache: Path):
    proc = subprocess.run(
        [sys.executable, "-c", _COUNTING_WORKERS, *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(cache), "DASHMEM_CACHE_DIR": str(cache)},
        timeout=120,
    )
    workers = int(proc.stdout.rsplit("query workers started:", 1)[1])
    return proc, workers


@PROCESSES
def test_cold_refreshes_bind_the_dashboard_once_per_data_shape(tmp_path):
    ws = tmp_path / "supply-chain-weekly"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", ws)
    data = ws / "data" / "gates.csv"
    lines = data.read_text().splitlines(keepends=True)
    cache = tmp_path / "cache"

    proc, workers = run_counting_workers("refresh", ws, cache=cache)
    assert proc.returncode == 0 and "switched to snapshot" in proc.stdout, proc.stdout + proc.stderr
    assert workers >= 1  # the first refresh binds the dashboard's queries in a worker
    (record,) = cache.glob("*/BOUND")

    data.write_text("".join(lines[:-1]))  # new data, same shape: a later process checks it without a worker
    proc, workers = run_counting_workers("refresh", ws, cache=cache)
    assert proc.returncode == 0 and "switched to snapshot" in proc.stdout, proc.stdout + proc.stderr
    assert workers == 0

    # A column the dashboard reads is gone: a new shape, bound again, and the report says what breaks.
    header = lines[0].rstrip("\n").split(",")
    drop = header.index("actual")
    data.write_text("".join(",".join(c for i, c in enumerate(line.rstrip("\n").split(",")) if i != drop) + "\n" for line in lines))
    proc, workers = run_counting_workers("refresh", ws, "--json", cache=cache)
    report = json.loads(proc.stdout.rsplit("query workers started:", 1)[0])
    assert proc.returncode == 1 and workers >= 1
    assert any('reads column "actual"' in e for e in report["dashboard_errors"]), report["dashboard_errors"]
    assert not report["swapped"]

    # A damaged record only means binding again.
    data.write_text("".join(lines))
    record.write_text('{"not": "a list"')
    proc, workers = run_counting_workers("refresh", ws, cache=cache)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert workers >= 1 and json.loads(record.read_text())


@PROCESSES
def test_output_piped_into_a_reader_that_stops_early_ends_quietly(tmp_path):
    """`python -m lib query ... --json | head` is how people look at output: the closed pipe is no traceback."""
    ws = tmp_path / "gdp"
    shutil.copytree(WORKSPACES / "gdp-explorer", ws)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DASHMEM_CACHE_DIR": str(tmp_path / "cache")}
    subprocess.run([sys.executable, "-m", "lib", "refresh", str(ws)], env=env, cwd=ROOT, check=True, capture_output=True, timeout=300)
    proc = subprocess.Popen(
        [sys.executable, "-m", "lib", "query", str(ws), "SELECT * FROM gdp", "--json", "--max-rows", "20000"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    head = proc.stdout.read(10)  # what `head -c 10` reads, then it exits
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.wait(timeout=300)
    assert head.startswith(b"{")
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert proc.returncode != 0  # like any program whose reader went away: not a success either


# --------------------------------------------------------------------------- access


@PROCESSES
def test_access_changes_an_owners_draft_which_publishes_like_any_change(config_repo):
    path = config_repo.path / "supply-chain-weekly"
    main = config_repo.repo.commit("main").hexsha
    refused = run("access", path, "--as", "sam", "--add", "owner:sam", check_rc=1)
    assert "sam (steward) may not manage_access" in refused.stderr and "Traceback" not in refused.stderr
    last = run("access", path, "--as", "olivia", "--remove", "owner:olivia", check_rc=1)
    assert "at least one owner" in last.stderr
    assert {h.commit.hexsha for h in config_repo.repo.heads} == {main}  # no commit by either (a draft opened is main)

    changed = json.loads(run("access", path, "--as", "olivia", "--add", "steward:bob", "--remove", "viewer:*", "--json", check_rc=0).stdout)
    assert changed["ok"] and len(changed["changed"]) == 2 and changed["commit"]
    assert config_repo.repo.commit("draft/olivia/supply-chain-weekly").hexsha == changed["commit"]
    listed = run("access", path, "--as", "olivia", check_rc=0).stdout  # the draft's lists
    assert re.search(r"^stewards:\s.*\bbob\b", listed, re.M) and re.search(r"^viewers:\s+\(nobody\)", listed, re.M), listed
    assert "bob" not in run("access", path, check_rc=0).stdout  # the published file: not yet

    run("publish", path, "--as", "olivia", check_rc=0)
    published = json.loads(run("access", path, "--json", check_rc=0).stdout)["access"]
    assert "bob" in published["stewards"] and published["viewers"] == []


def test_access_on_a_plain_folder_edits_its_workspace_yaml_and_refuses_plainly(tmp_path):
    shutil.copytree(WORKSPACES, tmp_path / "ws", symlinks=True)
    folder = tmp_path / "ws" / "gdp-explorer"
    before = (folder / "workspace.yaml").read_bytes()
    for args, says in (
        (["--remove", "owner:olivia"], "at least one owner"),
        (["--add", "boss:ann"], "owner, steward, viewer"),
        (["--remove", "steward:ann"], "ann is not among the stewards"),
    ):
        proc = run("access", folder, *args, check_rc=1)
        assert says in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert (folder / "workspace.yaml").read_bytes() == before
    proc = run("access", folder, "--add", "viewer:group:ops", check_rc=0)
    assert "added group:ops to the viewers" in proc.stdout
    assert "group:ops" in (folder / "workspace.yaml").read_text(encoding="utf-8")


def test_one_shot_commands_start_their_query_worker_before_their_first_query(tmp_path, monkeypatch, capsys):
    """`query`, `explain`, `rows`, `check`, `changes` and `export` start their workers as they begin (beside their
    imports and loading), so none waits for one to start at its first query."""
    from lib import cli
    from lib.core import settings
    from lib.data import query_worker

    ws = tmp_path / "supply-chain-weekly"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", ws)
    monkeypatch.setenv("DASHMEM_CACHE_DIR", str(tmp_path / "cache"))
    assert cli.main(["refresh", str(ws)]) == 0
    seen: list[int] = []
    real_ask = query_worker._Pool.ask

    def ask(pool, request, deadline_s):
        if not seen or seen[-1] != -1:
            seen.append(pool.count)  # workers running or starting when the command's first query comes
            seen.append(-1)
        return real_ask(pool, request, deadline_s)

    monkeypatch.setattr(query_worker._Pool, "ask", ask)
    commands = {
        "query": ["query", str(ws), "SELECT count(*) AS n FROM gates"],
        "explain": ["explain", str(ws), "kpi_attainment"],
        "rows": ["rows", str(ws), "by_site"],
        "check": ["check", str(ws)],
        "changes": ["changes", str(ws)],
        "export": ["export", str(ws), "--html", str(tmp_path / "out.html")],
    }
    first: dict[str, int] = {}
    for name, argv in commands.items():
        query_worker._POOL.close()
        seen.clear()
        code = cli.main(argv)
        assert code in (0, 1) and seen, (name, code, capsys.readouterr())
        first[name] = seen[0]
    query_worker._POOL.close()
    per_core = min(os.cpu_count() or 1, settings.get("DASHMEM_QUERY_WORKERS"))
    assert first == {"query": 1, "explain": 1, "rows": 1, "check": per_core, "changes": per_core, "export": per_core}
