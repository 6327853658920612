"""The config repo (lib/repo/configrepo.py): creation, proposing drafts, roles, bad names, new workspaces.

Drafts, publishing and history have their own files (test_drafts, test_publish, test_history).
Every test runs against a real git repository created from the shipped demo workspaces (the
`config_repo` fixture), with a real bare remote named origin.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import git
import pytest

from lib.core.diagnostics import ValidationFailed, has_errors
from lib.memory import workspace
from lib.ops import publish
from lib.repo.configrepo import ConfigRepo
from lib.repo.gitops import SYSTEM, ConfigRepoError, actor_env
from lib.repo.history import MAIN, read_file
from lib.roles import access
from lib.roles.access import OWNER as OWNER_ROLE
from lib.roles.access import STEWARD as STEWARD_ROLE
from lib.roles.access import VIEWER as VIEWER_ROLE
from lib.roles.access import AccessChangeRefused, Grant, PermissionDenied, User
from tests.configrepo_helpers import (
    GDP,
    OLIVIA,
    SAM,
    SCW,
    VERA,
    WORKSPACES,
    assert_main_clean,
    commit_count,
    edit_rule,
    files_at,
    files_on_disk,
    load_task,
    rule_text,
    sha,
)

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


# --------------------------------------------------------------------------- opening repairs memory files, keeps data files

ROOT = WORKSPACES.parent
TIMEOUT_S = 120  # a hung subprocess fails the test instead of hanging the run; not a timing assert


def run(*args: str) -> str:
    """A command in a new process, as a restarted app or a person at the shell runs it; its stdout."""
    proc = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    return proc.stdout


def gates_totals(path: Path) -> tuple[int, str]:
    """The sum of `actual` and the last day of a gates CSV, read here with the csv module."""
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return sum(int(r["actual"]) for r in rows), max(r["day"] for r in rows)


def test_a_restart_keeps_next_weeks_data_file_in_place_and_the_next_refresh_serves_it(config_repo):
    """Issue #31, 5: a new gates.csv copied into the published data/ folder survives a restart's repair (which
    restores a stray edit of a memory file), and a Refresh in another process serves the new file's rows."""
    repo = config_repo
    folder = repo.published_path(SCW)
    run("-m", "lib", "refresh", str(folder))  # last week's data served
    new_file = folder / "data" / "next_week" / "gates.csv"
    assert gates_totals(new_file) != gates_totals(folder / "data" / "gates.csv")
    shutil.copyfile(new_file, folder / "data" / "gates.csv")
    output_before = (folder / "output.yaml").read_bytes()
    (folder / "output.yaml").write_text("# a stray edit a repair restores\n", encoding="utf-8")

    code = "import json, sys; from pathlib import Path; from lib.repo.configrepo import ConfigRepo; "
    code += "print(json.dumps(ConfigRepo.open_or_create(Path(sys.argv[1]), Path(sys.argv[2])).repaired))"
    repaired = json.loads(run("-c", code, str(repo.path), str(WORKSPACES)).splitlines()[-1])

    assert any("reset the published checkout" in what and f"kept {SCW}/data/gates.csv" in what for what in repaired), repaired
    assert (folder / "output.yaml").read_bytes() == output_before  # the memory file is restored ...
    assert (folder / "data" / "gates.csv").read_bytes() == new_file.read_bytes()  # ... the data file kept
    assert repo.data_files_in_place(SCW) == ["data/gates.csv"]
    assert ConfigRepo(repo.path).repaired == []  # a kept data file is nothing to repair on the next opening

    run("-m", "lib", "refresh", str(folder))
    served = json.loads(
        run("-m", "lib", "query", str(folder), 'SELECT CAST(sum(actual) AS BIGINT) AS s, CAST(max("day") AS VARCHAR) AS d FROM gates', "--json")
    )
    assert (served["rows"][0]["s"], served["rows"][0]["d"]) == gates_totals(new_file)


def test_publishing_keeps_a_data_file_put_in_place(config_repo):
    """Publishing brings the published checkout up to `main` (there the repair ran too, with `reset --hard`)."""
    repo = config_repo
    folder = repo.published_path(SCW)
    shutil.copyfile(folder / "data" / "next_week" / "gates.csv", folder / "data" / "gates.csv")
    edit_rule(repo, OLIVIA, SCW, 5, "Published while next week's file is in place.")
    publish.publish(repo, OLIVIA, SCW)
    assert "Published while next week's file" in (folder / "task.yaml").read_text()
    assert (folder / "data" / "gates.csv").read_bytes() == (folder / "data" / "next_week" / "gates.csv").read_bytes()
    assert repo.data_files_in_place(SCW) == ["data/gates.csv"]


def test_a_data_file_a_killed_publish_left_behind_main_is_brought_up_to_main(config_repo):
    """What no person put there is not kept: a checkout left at the previous committed gates.csv (a publish killed
    after moving `main`) gets `main`'s, as every memory file does."""
    repo = config_repo
    folder = repo.published_path(SCW)
    old = sha(repo)
    shutil.copyfile(folder / "data" / "next_week" / "gates.csv", folder / "data" / "gates.csv")
    repo.repo.git.commit("-q", "-am", "next week's data", env=actor_env(SYSTEM))
    new = sha(repo)
    repo.repo.git.reset("-q", "--hard", old)
    repo.repo.git.update_ref(f"refs/heads/{MAIN}", new, old)  # main moved, the checkout not yet

    reopened = ConfigRepo(repo.path)

    assert any("reset the published checkout" in what and "as it is" not in what for what in reopened.repaired), reopened.repaired
    assert (folder / "data" / "gates.csv").read_bytes() == (folder / "data" / "next_week" / "gates.csv").read_bytes()
    assert_main_clean(reopened)
    assert reopened.data_files_in_place(SCW) == []


# --------------------------------------------------------------------------- 10. propose


def test_propose_pushes_draft_branch_to_origin(config_repo):
    repo = config_repo
    edit_rule(repo, SAM, SCW, 5, "Sam proposes ISO weeks everywhere.")
    branch = repo.branch_name(SAM, SCW)

    assert publish.propose(repo, SAM, SCW) == branch

    remote = git.Repo(repo.repo.remotes.origin.url)
    assert remote.bare
    assert remote.commit(f"refs/heads/{branch}").hexsha == sha(repo, branch)
    # proposing again after another save updates the remote branch
    edit_rule(repo, SAM, SCW, 5, "Sam proposes ISO weeks, second try.")
    publish.propose(repo, SAM, SCW)
    assert remote.commit(f"refs/heads/{branch}").hexsha == sha(repo, branch)


def test_propose_without_a_remote_marks_the_draft_for_the_owners_and_pushes_nothing(config_repo):
    """Issue #31, 8: the default install has no remote; a proposal still reaches the workspace's owners."""
    repo = config_repo
    repo.repo.delete_remote("origin")
    edit_rule(repo, SAM, SCW, 5, "Nowhere to push this, and an owner sees it all the same.")
    branch = repo.branch_name(SAM, SCW)
    assert repo.proposals_for(OLIVIA) == {}

    assert publish.propose(repo, SAM, SCW) == branch

    assert repo.proposals_for(OLIVIA) == {SCW: [branch]}
    assert repo.proposals_for(SAM) == {}  # a steward of it, not an owner: nothing waits for them
    assert repo.proposals_for(VERA) == {}
    listed = next(d for d in repo.drafts(SCW) if d["branch"] == branch)
    assert listed["proposed"] is not None and listed["proposed"]["head"] == sha(repo, branch) and listed["proposed"]["by"] == "sam"
    assert not repo.has_remote("origin")


def test_publishing_a_proposed_draft_clears_it(config_repo):
    repo = config_repo
    edit_rule(repo, SAM, SCW, 5, "Proposed, then published.")
    branch = publish.propose(repo, SAM, SCW)
    publish.publish_branch(repo, OLIVIA, SCW, branch)
    assert repo.proposals_for(OLIVIA) == {}
    assert next(d for d in repo.drafts(SCW) if d["branch"] == branch)["proposed"] is None


def test_rejecting_a_proposed_draft_clears_it_and_a_new_draft_is_not_proposed(config_repo):
    repo = config_repo
    edit_rule(repo, SAM, SCW, 5, "Proposed, then rejected.")
    branch = publish.propose(repo, SAM, SCW)
    repo.reject(OLIVIA, SCW, branch)
    assert repo.proposals_for(OLIVIA) == {}
    edit_rule(repo, SAM, SCW, 5, "A new draft after the reject.")  # the same branch name again
    assert repo.has_branch(branch) and repo.proposals_for(OLIVIA) == {}


def test_a_proposal_made_in_one_process_waits_in_another_until_a_third_publishes_it(config_repo):
    repo = config_repo
    edit_rule(repo, SAM, SCW, 5, "Proposed from another process.")
    code = (
        "import sys; from pathlib import Path; from lib.ops import publish; from lib.repo.configrepo import ConfigRepo; from lib.roles.access import User; "
        "cr = ConfigRepo(Path(sys.argv[1])); "
        "print(publish.propose(cr, User('sam', app_role='steward'), sys.argv[2], remote='none') if sys.argv[3] == 'propose' "
        "else publish.publish_branch(cr, User('olivia', app_role='owner'), sys.argv[2], 'draft/sam/' + sys.argv[2]))"
    )
    run("-c", code, str(repo.path), SCW, "propose")
    assert ConfigRepo(repo.path).proposals_for(OLIVIA) == {SCW: [repo.branch_name(SAM, SCW)]}
    assert repo.proposals_for(OLIVIA) == {SCW: [repo.branch_name(SAM, SCW)]}  # the long-running one sees it too
    run("-c", code, str(repo.path), SCW, "publish")
    assert repo.proposals_for(OLIVIA) == {}


def test_a_failed_push_proposes_nothing(config_repo, tmp_path):
    repo = config_repo
    edit_rule(repo, SAM, SCW, 5, "The remote is gone.")
    repo.repo.git.remote("set-url", "origin", str(tmp_path / "no-such-remote.git"))
    with pytest.raises(ConfigRepoError, match="could not push .* it was not proposed") as refused:
        publish.propose(repo, SAM, SCW)
    assert "fatal" not in str(refused.value)  # git's words are for the log
    assert repo.proposals_for(OLIVIA) == {}


def test_propose_without_draft_raises(config_repo):
    with pytest.raises(ConfigRepoError, match="no draft"):
        publish.propose(config_repo, SAM, SCW)


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
            publish.publish(repo, VERA, slug)
        with pytest.raises(PermissionDenied):
            repo.revert(VERA, slug, main_before)
        with pytest.raises(PermissionDenied):
            repo.undo(VERA, slug)
        with pytest.raises(PermissionDenied):
            publish.propose(repo, VERA, slug)
    assert not any(h.name.startswith("draft/vera/") for h in repo.repo.heads)
    assert not (repo.drafts_root / "vera").exists()
    assert sha(repo) == main_before


def test_steward_cannot_publish_where_policy_forbids(config_repo):
    repo = config_repo
    edit_rule(repo, SAM, SCW, 5, "Sam's change waiting for an owner.")
    main_before = sha(repo)
    with pytest.raises(PermissionDenied, match="policy"):
        publish.publish(repo, SAM, SCW)
    with pytest.raises(PermissionDenied, match="policy"):
        publish.publish_branch(repo, SAM, SCW, repo.branch_name(SAM, SCW))
    assert sha(repo) == main_before
    # an owner may publish it
    publish.publish_branch(repo, OLIVIA, SCW, repo.branch_name(SAM, SCW))
    assert rule_text(repo, MAIN, SCW, 5) == "Sam's change waiting for an owner."


def test_steward_can_publish_where_policy_allows(config_repo):
    repo = config_repo
    edit_rule(repo, SAM, GDP, 0, "Sam publishes this himself.")
    new_main = publish.publish(repo, SAM, GDP)
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
        publish.publish_branch(repo, SAM, GDP, repo.branch_name(SAM, SCW))
    assert sha(repo) == main_before
    assert "sneaks" not in rule_text(repo, MAIN, SCW, 5)
    assert_main_clean(repo)


def test_publish_with_nothing_new_raises(config_repo):
    repo = config_repo
    repo.draft(OLIVIA, GDP)
    with pytest.raises(ConfigRepoError, match="nothing to publish"):
        publish.publish(repo, OLIVIA, GDP)
    with pytest.raises(ConfigRepoError, match="no draft"):
        publish.publish(repo, OLIVIA, SCW)


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


@pytest.mark.parametrize(
    "template, error",
    [
        ("../config-repo/gdp-explorer", workspace.InvalidName),
        ("no-such-template", ConfigRepoError),
    ],
)
def test_bad_template_is_refused_and_creates_nothing(config_repo, template, error):
    repo = config_repo
    heads_before = sorted(h.name for h in repo.repo.heads)
    with pytest.raises(error):
        repo.new_workspace(OLIVIA, "copy-of-gdp", "Copy", template=template)
    assert sorted(h.name for h in repo.repo.heads) == heads_before
    assert not (repo.drafts_root / "olivia" / "copy-of-gdp").exists()


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
        f"team-kpis/{name}" for name in ("workspace.yaml", "task.yaml", "sources.yaml", "output.yaml")
    )
    # not published yet
    assert sha(repo) == main_before
    assert not (repo.path / "team-kpis").exists()


def test_new_workspace_from_template_copies_data_and_starts_with_its_creator_as_the_only_owner(config_repo):
    repo = config_repo
    template_access = repo.meta(GDP)["access"]
    d = repo.new_workspace(SAM, "gdp-copy", "GDP copy", template=GDP)

    ws, diags = workspace.load(d.workspace_path)
    assert not has_errors(diags), [x.format() for x in diags]
    assert ws.data["workspace"]["name"] == "GDP copy"
    # Not the template's lists: its owners, stewards and viewers were given the template, not this copy.
    assert ws.data["workspace"]["access"] == {"owners": [SAM.name], "stewards": [], "viewers": []}
    assert template_access["owners"] != [SAM.name] and template_access["viewers"]  # the template had other people in them
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
    task = {"goal": "Track the team's KPIs.", "rules": [{"id": "weekly", "text": "Report weekly.", "author": "olivia", "created": "2026-12-01"}]}
    assert repo.save(OLIVIA, "team-kpis", {"task": task}, "First rule") is not None

    publish.publish(repo, OLIVIA, "team-kpis")

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
    assert (
        repo.save(
            olivia,
            "gdp-explorer",
            {
                "workspace": {
                    **workspace.load(repo.draft(olivia, "gdp-explorer").workspace_path)[0].data["workspace"],
                    "policy": {"stewards_can_publish": False},
                }
            },
            "tighten",
        )
        is not None
    )


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
    with_ref = {
        "sources": {
            "sources": sources["sources"]
            + [{"name": "orders", "type": "sql", "url": "postgresql://reporting@127.0.0.1/test", "password": "env:REPORTING_DB_PASSWORD", "table": "orders"}]
        }
    }
    assert repo.save(olivia, "gdp-explorer", with_ref, "Connect orders") is not None
    head = repo.repo.heads["draft/olivia/gdp-explorer"].commit.hexsha
    literal = {
        "sources": {
            "sources": sources["sources"]
            + [{"name": "orders", "type": "sql", "url": "postgresql://reporting@127.0.0.1/test", "password": secret, "table": "orders"}]
        }
    }
    with pytest.raises(ValidationFailed) as info:
        repo.save(olivia, "gdp-explorer", literal, "Oops")
    assert secret not in str(info.value)
    in_url = {
        "sources": {
            "sources": sources["sources"] + [{"name": "orders", "type": "sql", "url": f"postgresql://reporting:{secret}@127.0.0.1/test", "table": "orders"}]
        }
    }
    with pytest.raises(ValidationFailed) as info:
        repo.save(olivia, "gdp-explorer", in_url, "Oops again")
    assert secret not in str(info.value)
    assert repo.repo.heads["draft/olivia/gdp-explorer"].commit.hexsha == head
    publish.publish(repo, olivia, "gdp-explorer")
    everything = _all_repo_bytes(repo.path) + _all_repo_bytes(repo.drafts_root)
    assert b"env:REPORTING_DB_PASSWORD" in everything
    assert secret.encode() not in everything


def _restrict_gdp_to_owner(repo):
    olivia = User("olivia", app_role="owner")
    d = repo.draft(olivia, "gdp-explorer")
    meta = workspace.load(d.workspace_path)[0].data["workspace"]
    meta["access"] = {"owners": ["olivia"], "stewards": ["sam"], "viewers": ["olivia"]}
    repo.save(olivia, "gdp-explorer", {"workspace": meta}, "restrict")
    publish.publish(repo, olivia, "gdp-explorer")
    return olivia, meta


def test_revert_cannot_smuggle_an_access_change_into_main(config_repo):
    repo = config_repo
    sam = User("sam", app_role="steward")
    before = repo.history("gdp-explorer")[-1].sha  # the template version: viewers ['*']
    olivia, meta = _restrict_gdp_to_owner(repo)
    repo.revert(sam, "gdp-explorer", before)  # a steward's revert brings the old access list back
    with pytest.raises(PermissionDenied, match="manage_access"):
        publish.publish(repo, sam, "gdp-explorer")
    assert repo.meta("gdp-explorer")["access"]["viewers"] == ["olivia"]
    assert not repo.repo.is_dirty(untracked_files=True)


def test_stewards_publish_only_their_own_draft_and_nobody_publishes_a_rejected_one(config_repo):
    repo = config_repo
    sam, ann, olivia = User("sam", app_role="steward"), User("ann", app_role="steward"), User("olivia", app_role="owner")
    d = repo.draft(olivia, "gdp-explorer")
    meta = workspace.load(d.workspace_path)[0].data["workspace"]
    meta["access"]["stewards"] = ["sam", "ann"]
    repo.save(olivia, "gdp-explorer", {"workspace": meta}, "add ann")
    publish.publish(repo, olivia, "gdp-explorer")
    d = repo.draft(ann, "gdp-explorer")
    task = workspace.load(d.workspace_path)[0].data["task"]
    task["goal"] = "WIP, not ready"
    repo.save(ann, "gdp-explorer", {"task": task}, "wip")
    with pytest.raises(PermissionDenied, match="only their own draft"):
        publish.publish_branch(repo, sam, "gdp-explorer", "draft/ann/gdp-explorer")
    kept = repo.reject(olivia, "gdp-explorer", "draft/ann/gdp-explorer")
    with pytest.raises(ConfigRepoError, match="was rejected"):
        publish.publish_branch(repo, olivia, "gdp-explorer", kept)
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


def test_importing_task_rules_adds_them_beside_this_workspaces_and_keeps_its_goal(config_repo):
    repo = config_repo
    olivia = User("olivia", app_role="owner")
    gdp_path = repo.published_path("gdp-explorer")
    own = workspace.load(gdp_path)[0].data["task"]
    theirs = workspace.load(repo.published_path("supply-chain-weekly"))[0].data["task"]
    sha, notes = repo.import_category(olivia, "supply-chain-weekly", "gdp-explorer", "task")
    assert sha
    merged = workspace.load(repo.draft(olivia, "gdp-explorer").workspace_path)[0].data["task"]
    assert merged["goal"] == own["goal"]  # the goal was not replaced
    assert merged["rules"][: len(own["rules"])] == own["rules"]  # every rule of its own kept, first
    assert [r["text"] for r in merged["rules"][len(own["rules"]) :]] == [r["text"] for r in theirs["rules"]]
    assert len({r["id"] for r in merged["rules"]}) == len(merged["rules"])
    assert notes[0] == f"added {len(theirs['rules'])} task rules ({', '.join(r['id'] for r in theirs['rules'])})"
    assert "kept this workspace's goal" in notes

    again, notes = repo.import_category(olivia, "supply-chain-weekly", "gdp-explorer", "task")
    assert again is None and notes[0] == "added 0 task rules"  # nothing added twice
    assert f"{len(theirs['rules'])} rules already here" in notes[1]


def test_an_imported_rule_whose_id_is_taken_is_kept_apart(config_repo):
    repo = config_repo
    olivia = User("olivia", app_role="owner")
    theirs = workspace.load(repo.published_path("supply-chain-weekly"))[0].data["task"]
    taken = theirs["rules"][0]["id"]
    task = workspace.load(repo.draft(olivia, "gdp-explorer").workspace_path)[0].data["task"]
    task["rules"].append({**theirs["rules"][0], "text": "Another rule with that id."})
    repo.save(olivia, "gdp-explorer", {"task": task}, "a rule with a taken id")
    _, notes = repo.import_category(olivia, "supply-chain-weekly", "gdp-explorer", "task")
    merged = workspace.load(repo.draft(olivia, "gdp-explorer").workspace_path)[0].data["task"]
    by_id = {r["id"]: r["text"] for r in merged["rules"]}
    assert by_id[taken] == "Another rule with that id." and by_id[f"{taken}-supply-chain-weekly"] == theirs["rules"][0]["text"]
    assert f"{taken} -> {taken}-supply-chain-weekly" in notes[1]


def test_importing_sources_adds_free_names_and_refuses_a_taken_one_by_name(config_repo):
    repo = config_repo
    olivia = User("olivia", app_role="owner")
    own = workspace.load(repo.published_path("gdp-explorer"))[0].data["sources"]["sources"]
    theirs = workspace.load(repo.published_path("supply-chain-weekly"))[0].data["sources"]["sources"]
    clash = {**theirs[0], "description": "Not the same source."}
    sources = workspace.load(repo.draft(olivia, "gdp-explorer").workspace_path)[0].data["sources"]
    sources["sources"] = [*own, clash]
    repo.save(olivia, "gdp-explorer", {"sources": sources}, "a source with a taken name")
    _, notes = repo.import_category(olivia, "supply-chain-weekly", "gdp-explorer", "sources")
    merged = workspace.load(repo.draft(olivia, "gdp-explorer").workspace_path)[0].data["sources"]["sources"]
    assert merged[: len(own) + 1] == [*own, clash]  # this workspace's sources kept, the clashing one untouched
    assert [s["name"] for s in merged[len(own) + 1 :]] == [s["name"] for s in theirs[1:]]
    assert any(n.startswith(f"not imported: {theirs[0]['name']}") for n in notes), notes


def test_importing_output_constraints_replaces_them_and_says_so(config_repo):
    repo = config_repo
    olivia = User("olivia", app_role="owner")
    sha, notes = repo.import_category(olivia, "supply-chain-weekly", "gdp-explorer", "output")
    assert sha and notes == ["replaced output.yaml with that of supply-chain-weekly: its settings are one whole, so they are not merged"]
    draft_output = workspace.load(repo.draft(olivia, "gdp-explorer").workspace_path)[0].data["output"]
    assert draft_output == workspace.load(repo.published_path("supply-chain-weekly"))[0].data["output"]


def test_a_failed_new_workspace_leaves_the_name_free(config_repo):
    repo = config_repo
    sam = User("sam", app_role="steward")
    with pytest.raises(ValidationFailed):
        repo.new_workspace(sam, "team-kpis", "T" * 81)
    assert "draft/sam/team-kpis" not in repo.repo.heads
    assert repo.new_workspace(sam, "team-kpis", "Team KPIs").workspace_path.is_dir()


# --------------------------------------------------------------------------- owners manage access


def test_an_owners_access_change_is_saved_to_the_draft_shown_as_an_access_change_and_published(config_repo):
    repo = config_repo
    bob = User("bob")
    assert access.role_of(bob, repo.meta(SCW)) == VIEWER_ROLE  # the demo's viewers list is '*'
    published = sha(repo)

    commit, done = repo.change_access(OLIVIA, SCW, add=[Grant(STEWARD_ROLE, "bob"), Grant(VIEWER_ROLE, "group:ops")], remove=[Grant(VIEWER_ROLE, "*")])

    assert commit is not None and len(done) == 3
    assert sha(repo) == published  # the draft, not main: nobody's role changed yet
    assert repo.repo.commit(repo.branch_name(OLIVIA, SCW)).hexsha == commit
    lists = repo.access_lists(OLIVIA, SCW)
    assert "bob" in lists["stewards"] and lists["viewers"] == ["group:ops"]
    changes = repo.draft_changes(SCW, repo.branch_name(OLIVIA, SCW))
    assert {(c.category, c.kind, c.id) for c in changes} >= {
        ("access", "granted", "stewards"),
        ("access", "granted", "viewers"),
        ("access", "revoked", "viewers"),
    }
    assert all(c.severity == "attention" for c in changes if c.category == "access")  # Review's "check these before publishing"
    assert access.role_of(VERA, repo.meta(SCW)) == VIEWER_ROLE

    publish.publish(repo, OLIVIA, SCW)

    assert access.role_of(bob, repo.meta(SCW)) == STEWARD_ROLE
    assert access.role_of(VERA, repo.meta(SCW)) is None  # '*' is gone from the published lists
    assert_main_clean(repo)


def test_a_steward_may_not_change_access_and_nothing_is_written(config_repo):
    repo = config_repo
    heads = {h.name: h.commit.hexsha for h in repo.repo.heads}
    with pytest.raises(PermissionDenied, match=r"sam \(steward\) may not manage_access"):
        repo.change_access(SAM, SCW, add=[Grant(OWNER_ROLE, "sam")])
    assert {h.name: h.commit.hexsha for h in repo.repo.heads} == heads
    assert repo.access_lists(SAM, SCW)["owners"] == ["olivia"]


def test_the_last_owner_cannot_be_removed_and_the_draft_is_left_as_it_was(config_repo):
    repo = config_repo
    before = repo.draft_head(OLIVIA, SCW)
    with pytest.raises(AccessChangeRefused, match="at least one owner"):
        repo.change_access(OLIVIA, SCW, remove=[Grant(OWNER_ROLE, "olivia")])
    assert repo.draft_head(OLIVIA, SCW) == before
    # Handing over is allowed: another owner first, then the old one out, in one change.
    commit, _ = repo.change_access(OLIVIA, SCW, add=[Grant(OWNER_ROLE, "sam")], remove=[Grant(OWNER_ROLE, "olivia")])
    assert commit is not None and repo.access_lists(OLIVIA, SCW)["owners"] == ["sam"]


def test_an_access_change_that_changes_nothing_commits_nothing(config_repo):
    repo = config_repo
    before = repo.draft_head(OLIVIA, SCW)
    assert repo.change_access(OLIVIA, SCW, add=[Grant(OWNER_ROLE, "olivia")]) == (None, [])
    assert repo.draft_head(OLIVIA, SCW) == before
