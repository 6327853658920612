"""A steward's draft and its data (lib/ops/draft_data.py): adding a source saves it, loads it into the draft's
snapshot and profiles it in one step; one that cannot be loaded stays saved and leaves profile.yaml as it was.

Against a real config repo (the `config_repo` fixture), real CSV files and the draft's real snapshots.
"""

from __future__ import annotations

import pytest

from lib.core.errors import DashmemError
from lib.data.refresh import refresh
from lib.data.snapshots import Warehouse
from lib.memory import workspace
from lib.ops import draft_data
from lib.repo.history import MAIN
from tests.configrepo_helpers import SAM, SCW, commit_count

SITES = "code,country\nBrno,CZ\nLeipzig,DE\nLyon,FR\nPorto,PT\nPoznan,PL\nRotterdam,NL\nGdansk,PL\n"


@pytest.fixture
def draft(config_repo, tmp_path, monkeypatch):
    """sam's draft of the supply-chain demo, with sites.csv (whose codes are gates' sites) in its data folder."""
    monkeypatch.setenv("DASHMEM_CACHE_DIR", str(tmp_path / "cache"))
    path = config_repo.draft(SAM, SCW).workspace_path
    (path / "data" / "sites.csv").write_text(SITES, encoding="utf-8")
    return path


def added(config_repo, source: dict) -> tuple[draft_data.DraftData, list[str]]:
    steps: list[str] = []
    done = draft_data.add_source(config_repo, SAM, SCW, source, progress=lambda fraction, message: steps.append(message))
    return done, steps


def test_adding_a_csv_source_loads_it_into_the_drafts_data_and_profiles_it_with_its_join_candidates(config_repo, draft):
    wh = Warehouse.for_workspace(draft)
    assert refresh(draft, wh, user=SAM).swapped  # the draft's data, as after a look at the draft's dashboard
    before = workspace.load(draft)[0].data["profile"]
    commits = commit_count(config_repo, config_repo.branch_name(SAM, SCW))
    main = config_repo.repo.commit(MAIN).hexsha

    done, steps = added(config_repo, {"name": "sites", "type": "csv", "path": "data/sites.csv"})

    assert done.ok and not done.problem, done.problem
    served = wh.current()
    assert served is not None and sorted(served.tables) == ["gates", "sites"]  # beside the data loaded already
    assert wh.tables(served)["sites"].num_rows == len(SITES.splitlines()) - 1
    saved = workspace.load(draft)[0].data
    assert [s["name"] for s in saved["sources"]["sources"]] == ["gates", "sites"]
    tables = {t["name"]: t for t in saved["profile"]["tables"]}
    assert sorted(tables) == ["gates", "sites"] and tables["sites"]["rows"] == 7
    assert tables["gates"] == next(t for t in before["tables"] if t["name"] == "gates")  # the other table's profile is kept
    assert {"left": "gates.site", "right": "sites.code"}.items() <= next(r for r in done.relationships if r["left"] == "gates.site").items()
    assert done.relationships == saved["profile"]["relationships"]
    headline = done.headline()
    assert headline.startswith("Added **sites** to your draft: 7 rows loaded and profiled") and "gates.site → sites.code" in headline
    # Each step said, in order: saved, loading, profiling, join candidates, saved the profile.
    said = [
        next(i for i, m in enumerate(steps) if m.startswith(lead))
        for lead in ("Saved sites", "Loading sites", "Profiling sites", "Looking for join", "Profile saved")
    ]
    assert said == sorted(said), steps
    assert commit_count(config_repo, config_repo.branch_name(SAM, SCW)) == commits + 2  # the source, then its profile
    assert config_repo.repo.commit(MAIN).hexsha == main  # the draft only


def test_on_the_drafts_first_load_every_source_is_loaded_with_the_new_one(config_repo, draft):
    wh = Warehouse.for_workspace(draft)
    assert wh.current() is None
    done, _ = added(config_repo, {"name": "sites", "type": "csv", "path": "data/sites.csv"})
    served = wh.current()
    assert done.ok and served is not None and sorted(served.tables) == ["gates", "sites"], done.problem


def test_a_source_that_cannot_be_loaded_stays_saved_says_what_to_check_and_leaves_the_profile_as_it_was(config_repo, draft):
    wh = Warehouse.for_workspace(draft)
    refresh(draft, wh, user=SAM)
    profile_file = draft / workspace.FILES["profile"]
    before = profile_file.read_bytes()

    done, steps = added(config_repo, {"name": "orders", "type": "csv", "path": "data/orders.csv"})

    assert not done.ok and done.profile is None
    assert done.problem.startswith("Added **orders** to your draft, but could not load its data: file not found: data/orders.csv")
    assert "Check the file (upload it again, or check its path)" in done.problem and "Traceback" not in done.problem
    assert steps[-1] == "Could not load the data"
    assert [s["name"] for s in workspace.load(draft)[0].data["sources"]["sources"]] == ["gates", "orders"]  # saved all the same
    assert profile_file.read_bytes() == before  # nothing half-written
    served = wh.current()
    assert served is not None and list(served.tables) == ["gates"]

    # Updating the profile then says which source failed, and saves nothing either.
    updated = draft_data.update_profile(config_repo, SAM, SCW)
    assert not updated.ok and "file not found: data/orders.csv" in updated.problem
    assert profile_file.read_bytes() == before
    # Once the file is there, updating the profile profiles it.
    (draft / "data" / "orders.csv").write_text("site,orders\nBrno,3\nPorto,4\n", encoding="utf-8")
    updated = draft_data.update_profile(config_repo, SAM, SCW)
    assert updated.ok, updated.problem
    assert sorted(t["name"] for t in workspace.load(draft)[0].data["profile"]["tables"]) == ["gates", "orders"]


def test_a_table_name_taken_is_refused_and_nothing_is_saved(config_repo, draft):
    head = config_repo.draft_head(SAM, SCW)
    with pytest.raises(DashmemError, match="A source named 'gates' exists already"):
        draft_data.add_source(config_repo, SAM, SCW, {"name": "gates", "type": "csv", "path": "data/sites.csv"})
    assert config_repo.draft_head(SAM, SCW) == head
