"""The metas cache of `ConfigRepo.workspaces_for` and `meta`: never stale, whoever changes the config repo.

`workspaces_for` runs on every page run and is cached by commit and blob shas
read from the repo. These tests warm the cache in this process, change the
config repo in another process (as a second app process or the CLI would), and
check this process sees the change on its next call: edits, new drafts, and,
above all, access changes.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import git
import pytest

from lib.repo import gitops
from lib.repo.configrepo import ConfigRepo, ReadOnlyDict
from lib.repo.history import MAIN
from lib.roles import auth
from lib.roles.access import User, role_of

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 180  # a hung subprocess fails the test instead of hanging the run; not a timing assert

OLIVIA = User("olivia", app_role="owner")
SAM = User("sam", app_role="steward")
VERA = User("vera")
GDP = "gdp-explorer"

# Runs in a second process: opens the config repo afresh and changes it as a user.
OTHER_PROCESS = """
import sys
from lib.roles.access import User
from lib.repo.configrepo import ConfigRepo
from lib.memory import workspace
from lib.ops import publish
repo = ConfigRepo(sys.argv[1])
olivia, sam = User("olivia", app_role="owner"), User("sam", app_role="steward")
action, slug = sys.argv[2], sys.argv[3]
if action == "rename":  # olivia publishes a new name
    meta = workspace.load(repo.draft(olivia, slug).workspace_path)[0].data["workspace"]
    meta["name"] = sys.argv[4]
    repo.save(olivia, slug, {"workspace": meta}, "Rename")
    publish.publish(repo, olivia, slug)
elif action == "private":  # olivia takes the '*' viewers off and publishes
    meta = workspace.load(repo.draft(olivia, slug).workspace_path)[0].data["workspace"]
    meta["access"]["viewers"] = []
    repo.save(olivia, slug, {"workspace": meta}, "Private")
    publish.publish(repo, olivia, slug)
elif action == "new":  # sam creates a workspace on his draft, not published
    repo.new_workspace(sam, slug, sys.argv[4])
elif action == "redescribe-draft":  # sam changes his unpublished workspace's description
    meta = workspace.load(repo.draft(sam, slug).workspace_path)[0].data["workspace"]
    meta["description"] = sys.argv[4]
    repo.save(sam, slug, {"workspace": meta}, "Describe")
"""


def in_other_process(repo: ConfigRepo, *args: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", OTHER_PROCESS, str(repo.path), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr


def test_a_publish_by_another_process_is_seen_on_the_next_call(config_repo):
    repo = config_repo
    before = repo.workspaces_for(VERA)
    assert before[GDP]["name"] == "GDP explorer"
    assert repo.workspaces_for(VERA)[GDP] is before[GDP]  # warm: the same parsed meta, not read again

    in_other_process(repo, "rename", GDP, "World GDP")

    assert repo.workspaces_for(VERA)[GDP]["name"] == "World GDP"
    assert repo.meta(GDP)["name"] == "World GDP"
    assert before[GDP]["name"] == "GDP explorer"  # what a page already holds is a snapshot, not changed under it


def test_an_access_change_by_another_process_takes_effect_at_once(config_repo):
    repo = config_repo
    assert GDP in auth.visible(VERA, repo.workspaces_for(VERA))
    assert role_of(VERA, repo.meta(GDP)) == "viewer"

    in_other_process(repo, "private", GDP)

    assert GDP not in auth.visible(VERA, repo.workspaces_for(VERA))
    assert role_of(VERA, repo.meta(GDP)) is None
    assert role_of(VERA, repo.meta_for(VERA, GDP)) is None
    assert GDP in auth.visible(OLIVIA, repo.workspaces_for(OLIVIA))


def test_a_new_unpublished_draft_appears_to_its_author_and_the_app_owners_only(config_repo):
    repo = config_repo
    for user in (SAM, OLIVIA, VERA):
        assert "ops-review" not in repo.workspaces_for(user)

    in_other_process(repo, "new", "ops-review", "Ops review")

    assert repo.workspaces_for(SAM)["ops-review"]["name"] == "Ops review"
    assert repo.workspaces_for(OLIVIA)["ops-review"]["name"] == "Ops review"
    assert "ops-review" not in repo.workspaces_for(VERA)
    assert "ops-review" not in repo.workspaces_for(User("tom", app_role="steward"))

    in_other_process(repo, "redescribe-draft", "ops-review", "weekly ops numbers")
    assert repo.workspaces_for(SAM)["ops-review"]["description"] == "weekly ops numbers"


def test_a_draft_made_in_this_process_appears_too(config_repo):
    repo = config_repo
    repo.workspaces_for(SAM)
    repo.new_workspace(SAM, "ops-review", "Ops review")
    assert repo.workspaces_for(SAM)["ops-review"]["name"] == "Ops review"


def test_cached_metas_are_read_only_and_their_copies_are_not(config_repo):
    """The metas are shared by every session; changing one in place would change the access list everyone is judged by."""
    repo = config_repo
    meta = repo.workspaces_for(VERA)[GDP]
    assert isinstance(meta, dict) and isinstance(meta, ReadOnlyDict)
    with pytest.raises(TypeError, match="read-only"):
        meta["access"]["viewers"].append("mallory")
    with pytest.raises(TypeError, match="read-only"):
        meta["access"]["owners"] = ["mallory"]
    with pytest.raises(TypeError, match="read-only"):
        meta.update(name="x")
    assert repo.meta(GDP)["access"]["owners"] == ["olivia"]

    mine = copy.deepcopy(meta)
    mine["access"]["viewers"].append("mallory")  # a plain copy may be changed
    assert type(mine) is dict and type(mine["access"]["viewers"]) is list
    assert repo.meta(GDP)["access"]["viewers"] == ["*"]


def test_a_main_with_a_folder_that_is_no_workspace_is_read_as_before(config_repo):
    repo = config_repo
    assert sorted(repo.workspaces_for(VERA)) == sorted(repo.slugs())
    assert "schemas" not in repo.workspaces_for(OLIVIA)


def test_packed_refs_are_read_like_loose_ones(config_repo):
    repo = config_repo
    repo.draft(SAM, GDP)
    loose = gitops.branch_heads(Path(repo.repo.git_dir))
    git.Repo(repo.path).git.pack_refs("--all")
    assert gitops.branch_heads(Path(repo.repo.git_dir)) == loose
    assert set(loose) == {MAIN, f"draft/sam/{GDP}"}
    assert loose[MAIN] == repo.repo.heads[MAIN].commit.hexsha
    assert gitops.branch_heads(Path(repo.repo.git_dir), "draft/sam/") == {f"draft/sam/{GDP}": loose[f"draft/sam/{GDP}"]}
    assert gitops.branch_heads(Path(repo.repo.git_dir), "draft/vera/") == {}
    assert repo.has_draft(SAM, GDP) and not repo.has_draft(OLIVIA, GDP)  # a packed branch is found like a loose one

    in_other_process(repo, "rename", GDP, "World GDP")  # a new loose main over the packed one
    assert gitops.branch_heads(Path(repo.repo.git_dir))[MAIN] == git.Repo(repo.path).heads[MAIN].commit.hexsha
    assert repo.workspaces_for(VERA)[GDP]["name"] == "World GDP"


def test_a_stray_folder_in_the_published_checkout_is_not_a_published_workspace(config_repo):
    """A folder with a workspace.yaml in the published checkout but not on `main` (dropped there by hand, or
    a checkout a killed publish left behind) used to be listed and then fail every page run for everyone."""
    repo = config_repo
    stray = repo.path / "stray"
    stray.mkdir()
    (stray / "workspace.yaml").write_text((repo.path / GDP / "workspace.yaml").read_text())
    assert "stray" not in repo.workspaces_for(VERA)
    assert "stray" not in repo.workspaces_for(OLIVIA)
    assert GDP in repo.workspaces_for(VERA)


def test_sessions_reading_in_threads_while_another_process_publishes_see_old_or_new_never_a_mix(config_repo):
    """The app shares one ConfigRepo (and so one cache) between sessions, which are threads."""
    import threading

    repo = config_repo
    seen: list[str] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            try:
                seen.append(repo.workspaces_for(VERA)[GDP]["name"])
            except BaseException as exc:  # reported below
                errors.append(exc)
                return
            stop.wait(0.002)  # a page run now and then, not a busy loop starving the publishing process

    readers = [threading.Thread(target=read) for _ in range(3)]
    for thread in readers:
        thread.start()
    try:
        in_other_process(repo, "rename", GDP, "World GDP")
    finally:
        stop.set()
        for thread in readers:
            thread.join(timeout=TIMEOUT_S)
    assert not errors, errors
    assert set(seen) <= {"GDP explorer", "World GDP"} and seen
    assert repo.workspaces_for(VERA)[GDP]["name"] == "World GDP"
