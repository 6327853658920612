"""profile.yaml going out of date: new columns and shifted distributions after a compatible refresh; updating it on a draft."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from lib.data import profile, profile_drift
from lib.memory import workspace
from lib.roles.access import PermissionDenied

from ..configrepo_helpers import SAM, SCW, VERA
from ..conftest import ROOT


def column(name: str, **stats) -> dict:
    return {"name": name, "type": "DOUBLE", **stats}


def one_table(*columns: dict, rows: int = 100) -> dict:
    return {"tables": [{"name": "t", "rows": rows, "columns": list(columns)}]}


def kinds(found: list) -> list[tuple[str | None, str]]:
    return [(d.column, d.kind) for d in found]


def test_an_unchanged_profile_has_no_drift_and_row_counts_alone_do_not_count():
    recorded = one_table(column("x", null_share=0.0, min=0, max=10))
    assert profile_drift.compare(recorded, one_table(column("x", null_share=0.0, min=0, max=10), rows=5000)) == []


def test_new_tables_and_new_columns_are_drift():
    recorded = one_table(column("x"))
    current = {"tables": [*one_table(column("x"), column("y"))["tables"], {"name": "u", "rows": 3, "columns": [column("z")]}]}
    assert kinds(profile_drift.compare(recorded, current)) == [("y", "new_column"), (None, "new_table")]


@pytest.mark.parametrize(
    "before, after, drifted",
    [
        (0.0, 0.09, False),
        (0.0, 0.10, True),  # NULL_SHARE_SHIFT: 10 percentage points
        (0.5, 0.35, True),
        (0.2, 0.25, False),
    ],
)
def test_null_share_drifts_at_ten_points(before, after, drifted):
    found = profile_drift.compare(one_table(column("x", null_share=before)), one_table(column("x", null_share=after)))
    assert kinds(found) == ([("x", "null_share")] if drifted else [])


@pytest.mark.parametrize(
    "new_min, new_max, drifted",
    [
        (0, 125, False),  # 25 % of the width beyond: not more than RANGE_GROWTH
        (0, 126, True),
        (-30, 100, True),
        (10, 90, False),  # a narrower range is still described by the profile's
    ],
)
def test_range_drifts_past_a_quarter_of_its_width(new_min, new_max, drifted):
    found = profile_drift.compare(one_table(column("x", min=0, max=100)), one_table(column("x", min=new_min, max=new_max)))
    assert kinds(found) == ([("x", "range")] if drifted else [])


def test_time_ranges_compare_as_times():
    recorded = one_table(column("d", min="2026-01-01", max="2026-01-31"))
    assert profile_drift.compare(recorded, one_table(column("d", min="2026-01-01", max="2026-02-06"))) == []  # 6 of 30 days
    assert kinds(profile_drift.compare(recorded, one_table(column("d", min="2026-01-01", max="2026-03-01")))) == [("d", "range")]


def test_a_frequent_value_the_profile_does_not_list_is_drift():
    recorded = one_table(column("site", top=[{"value": "Brno", "count": 50}, {"value": "Lyon", "count": 50}]))
    small = one_table(column("site", top=[{"value": "Brno", "count": 48}, {"value": "Lyon", "count": 48}, {"value": "Oslo", "count": 4}]))
    assert profile_drift.compare(recorded, small) == []  # 4 %: under NEW_TOP_SHARE
    big = one_table(column("site", top=[{"value": "Brno", "count": 45}, {"value": "Lyon", "count": 45}, {"value": "Oslo", "count": 10}]))
    found = profile_drift.compare(recorded, big)
    assert kinds(found) == [("site", "top_values")] and "Oslo (10%)" in found[0].message


# --------------------------------------------------------------------------- across processes


def run(args: list[str], env: dict, cwd: Path) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


DRIFT = "import json, sys\nfrom lib.data import profile_drift\nprint(json.dumps([[d.column, d.kind] for d in profile_drift.served_drift(sys.argv[1])]))\n"


def test_a_compatible_refresh_in_one_process_marks_the_profile_out_of_date_in_another_and_after_a_restart(ws_copy, tmp_path):
    folder = ws_copy("supply-chain-weekly")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DASHMEM_CACHE_DIR": str(tmp_path / "cache")}
    run(["-m", "lib", "refresh", str(folder)], env, tmp_path)
    assert json.loads(run(["-c", DRIFT, str(folder)], env, tmp_path).stdout) == []  # the shipped profile fits the shipped data

    data = folder / "data" / "gates.csv"
    rows = list(csv.reader(data.open(newline="")))
    rows[0].append("shift")
    for i, row in enumerate(rows[1:]):
        row.append("night" if i % 2 else "day")
        if i % 4 == 0:
            row[6] = ""  # attainment: a quarter of the rows now missing
    with data.open("w", newline="") as out:
        csv.writer(out).writerows(rows)
    refreshed = run(["-m", "lib", "refresh", str(folder)], env, tmp_path)
    assert "switched to snapshot" in refreshed.stdout  # compatible: served to everyone

    expected = [["attainment", "null_share"], ["shift", "new_column"]]
    assert json.loads(run(["-c", DRIFT, str(folder)], env, tmp_path).stdout) == expected
    assert json.loads(run(["-c", DRIFT, str(folder)], env, tmp_path).stdout) == expected  # a restart: nothing was held in memory

    # Updating the profile (what the Dashboard page's button saves) makes it fit again, in any process.
    script = (
        "import sys\nfrom pathlib import Path\nfrom lib.data import profile; from lib.memory import workspace\nfrom lib.data.snapshots import Warehouse\n"
        "path = Path(sys.argv[1]); ws, _ = workspace.load(path); wh = Warehouse.for_workspace(path)\n"
        "new = profile.build_for(wh.tables(wh.current()), ws.data['sources'], path)\n"
        "workspace.save(path, {'profile': new})\n"
    )
    run(["-c", script, str(folder)], env, tmp_path)
    assert json.loads(run(["-c", DRIFT, str(folder)], env, tmp_path).stdout) == []
    written = workspace.load(folder)[0].data["profile"]
    assert "shift" in [c["name"] for c in written["tables"][0]["columns"]]


def test_a_new_frequent_value_after_a_refresh_is_drift_in_another_process(ws_copy, tmp_path):
    """The served data is profiled with its values for the comparison (it used to be profiled without them,
    so a frequent new value never showed); nothing is stored by it."""
    folder = ws_copy("supply-chain-weekly")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DASHMEM_CACHE_DIR": str(tmp_path / "cache")}
    run(["-m", "lib", "refresh", str(folder)], env, tmp_path)
    recorded = (folder / "profile.yaml").read_bytes()
    assert "Oslo" not in recorded.decode()
    data = folder / "data" / "gates.csv"
    rows = list(csv.reader(data.open(newline="")))
    site = rows[0].index("site")
    for i, row in enumerate(rows[1:]):
        if i % 5 == 0:
            row[site] = "Oslo"  # a fifth of the rows: a site the profile does not list
    with data.open("w", newline="") as out:
        csv.writer(out).writerows(rows)
    assert "switched to snapshot" in run(["-m", "lib", "refresh", str(folder)], env, tmp_path).stdout
    found = json.loads(run(["-c", DRIFT, str(folder)], env, tmp_path).stdout)
    assert ["site", "top_values"] in found, found
    assert (folder / "profile.yaml").read_bytes() == recorded  # the check stores nothing


def test_a_source_that_keeps_no_values_gets_no_value_drift(tmp_path):
    """sample_values: false keeps values out of profile.yaml, so there is nothing listed to compare with."""
    table = pa.table({"site": ["A"] * 50 + ["B"] * 50})
    recorded = {"tables": [profile.profile_table("t", table, sample_values=False)]}
    now = {"tables": [profile.profile_table("t", pa.table({"site": ["A"] * 50 + ["Z"] * 50}))]}
    assert [k for k in kinds(profile_drift.compare(recorded, now)) if k[1] == "top_values"] == []


# --------------------------------------------------------------------------- updating on a draft


def test_update_profile_saves_the_served_datas_profile_on_the_stewards_draft_keeping_decided_joins(config_repo):
    draft = config_repo.draft(SAM, SCW).workspace_path
    ws, _ = workspace.load(draft)
    site_codes = [f"S{i:03d}" for i in range(40)]
    tables = {
        "gates": pa.table({"site": site_codes * 2, "shift": ["day", "night"] * 40, "dock": [f"D{i % 30:02d}" for i in range(80)]}),
        "sites": pa.table({"site": site_codes}),
        "docks": pa.table({"code": [f"D{i:02d}" for i in range(30)]}),
    }
    added = [{"name": name, "type": "csv", "path": f"data/{name}.csv"} for name in ("sites", "docks")]
    sources = {
        **ws.data["sources"],
        "sources": ws.data["sources"]["sources"] + added,
        "relationships": [{"from": "gates.site", "to": "sites.site"}],
        "rejected_relationships": [{"from": "gates.dock", "to": "docks.code"}],
    }
    assert {(r["left"], r["right"]) for r in profile.build(tables).get("relationships") or []} >= {("gates.site", "sites.site"), ("gates.dock", "docks.code")}
    config_repo.save(SAM, SCW, {"sources": sources}, "a declared and a rejected join")

    with pytest.raises(PermissionDenied):
        profile_drift.update_in_draft(config_repo, VERA, SCW, tables)
    assert not config_repo.has_draft(VERA, SCW)

    sha = profile_drift.update_in_draft(config_repo, SAM, SCW, tables)
    assert sha and config_repo.repo.commit(f"draft/sam/{SCW}").message.startswith("Update the data profile")
    saved = workspace.load(draft)[0].data["profile"]
    assert sorted(t["name"] for t in saved["tables"]) == ["docks", "gates", "sites"]
    gates = next(t for t in saved["tables"] if t["name"] == "gates")
    assert [c["name"] for c in gates["columns"]] == ["site", "shift", "dock"]
    assert not saved.get("relationships")  # the declared join is in sources.yaml, the rejected one is not proposed again
    assert workspace.load(draft)[0].data["sources"]["relationships"] == [{"from": "gates.site", "to": "sites.site"}]
    assert profile_drift.update_in_draft(config_repo, SAM, SCW, tables) is None  # unchanged: no empty commit
    published = workspace.load(config_repo.published_path(SCW))[0].data["profile"]
    assert "shift" not in [c["name"] for c in published["tables"][0]["columns"]]  # the draft only, until published
