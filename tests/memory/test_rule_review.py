"""Task rules that age: stale after the workspace's review period, reported by check/validate, confirmed on a draft."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from lib.artifacts import checks
from lib.chat import compose
from lib.core.diagnostics import WARNING
from lib.memory import rule_review, workspace
from lib.roles.access import PermissionDenied

from ..configrepo_helpers import GDP, SAM, VERA, load_task
from ..conftest import ROOT, WORKSPACES

# The demo rules were created on 2026-11-02 and 2026-11-09; two were confirmed on 2026-11-30.
LATE = "2027-03-01"  # > 90 days after 2026-11-30 and the creation days: every demo rule is stale
MID = "2027-02-05"  # > 90 days after 2026-11-02 (never confirmed), < 90 days after 2026-11-30 and 2026-11-09


def files_of(slug: str) -> dict:
    ws, diagnostics = workspace.load(WORKSPACES / slug)
    assert diagnostics == []
    return ws.data


def test_a_rule_is_stale_after_the_review_period_since_its_last_confirmation_or_its_creation():
    files = files_of("supply-chain-weekly")
    assert rule_review.stale_rules(files, "2026-12-01") == []
    stale = rule_review.stale_rules(files, MID)
    assert [s.id for s in stale] == ["gate-colors-orders", "gate-colors-process"]  # created 2026-11-02, never confirmed
    assert stale[0].confirmed == "2026-11-02" and stale[0].days == 95
    assert [s.id for s in rule_review.stale_rules(files, LATE)] == [r["id"] for r in files["task"]["rules"]]


def test_the_review_period_comes_from_the_workspace_policy_and_defaults_to_90_days():
    files = files_of("supply-chain-weekly")
    assert rule_review.review_days(files["workspace"]) == 90
    short = {**files, "workspace": {**files["workspace"], "policy": {"rule_review_days": 25}}}
    assert {s.id for s in rule_review.stale_rules(short, "2026-12-01")} == {"gate-colors-orders", "gate-colors-process"}  # 29 days; the 2026-11-09 ones 22


def test_the_review_period_is_schema_validated(ws_copy):
    folder = ws_copy("gdp-explorer")
    text = (folder / "workspace.yaml").read_text()
    (folder / "workspace.yaml").write_text(text.replace("  require_valid_to_publish: true\n", "  require_valid_to_publish: true\n  rule_review_days: 0\n"))
    found = workspace.validate(folder)
    assert [(d.level, d.field, d.line) for d in found] == [("error", "policy.rule_review_days", 12)]


def test_validate_reports_each_stale_rule_as_a_warning_with_file_line_and_rule_id(ws_copy):
    folder = ws_copy("supply-chain-weekly")
    found = [d for d in checks.validate_workspace(folder, today=MID) if d.id == "task.rule_stale"]
    lines = (folder / "task.yaml").read_text().splitlines()
    assert [(d.level, d.field) for d in found] == [(WARNING, "rules[gate-colors-orders].created"), (WARNING, "rules[gate-colors-process].created")]
    for d in found:
        assert d.file is not None and d.file.endswith("task.yaml")
        assert d.line is not None and lines[d.line - 1].strip() == "created: '2026-11-02'"
        assert "95 days ago" in d.message and "every 90 days" in d.message
    assert not any(d.level == "error" for d in checks.validate_workspace(folder, today=MID))  # a warning never blocks


def test_check_and_validate_on_the_command_line_show_stale_rules_and_still_succeed(ws_copy, tmp_path):
    folder = ws_copy("gdp-explorer")
    task = (folder / "task.yaml").read_text()
    # A rule written long ago and confirmed long ago, as a user would find it after a quiet year.
    (folder / "task.yaml").write_text(task.replace("created: '2026-11-02'", "created: '2024-01-10'", 1))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DASHMEM_CACHE_DIR": str(tmp_path / "cache")}
    for command in ("validate", "check"):
        done = subprocess.run([sys.executable, "-m", "lib", command, str(folder), "--json"], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        payload = json.loads(done.stdout)
        diagnostics = payload["workspaces"][0]["diagnostics"] if command == "validate" else payload["diagnostics"]
        stale = [d for d in diagnostics if d["id"] == "task.rule_stale"]
        assert len(stale) == 1 and stale[0]["level"] == "warning" and stale[0]["file"].endswith("task.yaml") and stale[0]["line"] > 1
        assert stale[0]["field"].startswith("rules[") and "2024-01-10" in stale[0]["message"]


def test_the_model_is_told_which_rules_are_unconfirmed_in_one_short_line():
    files = files_of("supply-chain-weekly")
    fresh = compose.compose(files, "edit", "hi", today="2026-12-01").request["system"][1]["text"]
    assert "Unconfirmed" not in fresh
    task = compose.compose(files, "edit", "hi", today=MID).request["system"][1]["text"]
    marker = [line for line in task.splitlines() if line.startswith("Unconfirmed rules")]
    assert len(marker) == 1 and marker[0].endswith(": gate-colors-orders, gate-colors-process")
    assert len(marker[0]) < 200  # a marker, not the rules again


def test_confirming_sets_last_confirmed_to_today_and_only_on_the_named_rules():
    task = files_of("supply-chain-weekly")["task"]
    out = rule_review.confirmed(task, ["week-label"], "2027-02-05")
    assert [r.get("last_confirmed") for r in out["rules"]] == ["2026-11-30", None, None, "2026-11-30", None, "2027-02-05"]
    assert "last_confirmed" not in task["rules"][5]  # the input is not changed
    with pytest.raises(rule_review.UnknownRule, match="'gone'"):
        rule_review.confirmed(task, ["gone"], "2027-02-05")


def test_still_holds_commits_to_the_stewards_draft_and_a_viewer_is_refused(config_repo):
    sha = config_repo.confirm_rules(SAM, GDP, ["latest-year"], "2027-02-05")
    assert sha
    rules = {r["id"]: r for r in load_task(config_repo, SAM, GDP)["rules"]}
    assert rules["latest-year"]["last_confirmed"] == "2027-02-05"
    assert config_repo.repo.commit(f"draft/sam/{GDP}").message.startswith("Confirm task rule still hold")
    published = workspace.load(config_repo.published_path(GDP))[0].data["task"]["rules"]
    assert "last_confirmed" not in {r["id"]: r for r in published}["latest-year"]  # the draft only, until published
    assert config_repo.confirm_rules(SAM, GDP, ["latest-year"], "2027-02-05") is None  # nothing changed
    with pytest.raises(PermissionDenied):
        config_repo.confirm_rules(VERA, GDP, ["latest-year"], "2027-02-05")
    assert not config_repo.has_draft(VERA, GDP)


def test_a_stale_rule_warning_survives_a_restart_and_a_confirmation_clears_it(ws_copy):
    """Nothing is remembered outside the files: a fresh process sees what the files say."""
    folder = ws_copy("supply-chain-weekly")
    script = (
        "import json, sys\nfrom lib.artifacts import checks\n"
        "print(json.dumps([d.field for d in checks.validate_workspace(sys.argv[1], today=sys.argv[2]) if d.id == 'task.rule_stale']))\n"
    )

    def stale_in_a_new_process() -> list[str]:
        done = subprocess.run(
            [sys.executable, "-c", script, str(folder), MID], env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    assert stale_in_a_new_process() == ["rules[gate-colors-orders].created", "rules[gate-colors-process].created"]
    ws, _ = workspace.load(folder)
    workspace.save(folder, {"task": rule_review.confirmed(ws.data["task"], ["gate-colors-orders"], MID)})
    assert stale_in_a_new_process() == ["rules[gate-colors-process].created"]
    shutil.rmtree(folder)
