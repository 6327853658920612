"""Loading, validating and saving a workspace folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from lib.core.diagnostics import ValidationFailed, has_errors
from lib.memory import workspace
from lib.memory.yamlio import dump, parse

from ..conftest import WORKSPACES

DEMOS = ["gdp-explorer", "supply-chain-weekly"]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("slug", DEMOS)
def test_demo_workspace_validates(slug):
    ws, diags = workspace.load(WORKSPACES / slug)
    assert not has_errors(diags), [d.format() for d in diags]
    assert ws.name and ws.get("task")["rules"]


@pytest.mark.parametrize("slug", DEMOS)
def test_demo_files_are_canonical_so_saving_changes_no_byte(slug, ws_copy):
    folder = ws_copy(slug)
    before = snapshot(folder)
    mtimes = {p: p.stat().st_mtime_ns for p in folder.iterdir() if p.is_file()}
    ws, _ = workspace.load(folder)
    changed = workspace.save(folder, ws.data)
    assert changed == []
    assert snapshot(folder) == before
    assert {p: p.stat().st_mtime_ns for p in folder.iterdir() if p.is_file()} == mtimes


def test_one_field_change_is_a_one_line_diff(ws_copy):
    folder = ws_copy("supply-chain-weekly")
    old = (folder / "task.yaml").read_text().splitlines()
    ws, _ = workspace.load(folder)
    ws.data["task"]["rules"][1]["text"] = "Orders is always orange (#ff7f0e)."
    assert workspace.save(folder, {"task": ws.data["task"]}) == ["task.yaml"]
    new = (folder / "task.yaml").read_text().splitlines()
    assert len(old) == len(new)
    assert [i for i, (a, b) in enumerate(zip(old, new)) if a != b] == [old.index("    text: Orders is orange (#ff7f0e).")]


def test_key_order_follows_the_schema_not_the_input():
    text = "Attainment of 95 % or more is shown green."
    schema_ordered = workspace.render("task", {"rules": [{"created": "2026-01-01", "author": "a", "text": text, "id": "r"}], "goal": "g"})
    assert schema_ordered.splitlines()[1:] == ["goal: g", "rules:", "  - id: r", f"    text: {text}", "    author: a", "    created: '2026-01-01'"]


def test_multiline_text_round_trips_as_a_block():
    data = {"goal": "line one\nline two\n", "rules": []}
    text = workspace.render("task", data)
    assert "goal: |\n  line one\n  line two\n" in text
    assert parse(text).data == data


def test_dates_stay_strings():
    doc = parse("created: 2026-11-30\n")
    assert doc.data == {"created": "2026-11-30"}


def test_malformed_yaml_names_file_and_line(ws_copy):
    folder = ws_copy("gdp-explorer")
    (folder / "task.yaml").write_text("goal: x\nrules:\n  - id: a\n   text: [unclosed\n")
    diags = workspace.validate(folder)
    [d] = [d for d in diags if d.id == "yaml.syntax"]
    assert (d.file or "").endswith("gdp-explorer/task.yaml") and d.line == 4
    assert "malformed YAML" in d.message


def test_duplicate_keys_are_an_error_not_a_silent_overwrite(ws_copy):
    folder = ws_copy("gdp-explorer")
    (folder / "output.yaml").write_text("data_injection: {mode: queries_at_render}\ntheme: {}\ntheme: {}\n")
    [d] = workspace.validate(folder)
    assert d.id == "yaml.syntax" and d.line == 3 and "duplicate key" in d.message


def test_missing_file(ws_copy):
    folder = ws_copy("gdp-explorer")
    (folder / "sources.yaml").unlink()
    [d] = workspace.validate(folder)
    assert d.id == "file.missing" and (d.file or "").endswith("sources.yaml")


def test_not_utf8(ws_copy):
    folder = ws_copy("gdp-explorer")
    (folder / "task.yaml").write_bytes("goal: x\nrules: []\ntags: [caf\xe9]\n".encode("latin-1"))
    [d] = workspace.validate(folder)
    assert d.id == "file.encoding" and d.line == 3 and "byte 28" in d.message  # the line too, like every YAML error


def test_unknown_key_and_wrong_type_each_name_file_line_field(ws_copy):
    folder = ws_copy("supply-chain-weekly")
    text = (folder / "output.yaml").read_text()
    text = text.replace("  max_rows_per_query: 5000", "  max_rows_per_query: lots").replace("layout:", "layuot:")
    (folder / "output.yaml").write_text(text)
    diags = workspace.validate(folder)
    lines = {d.field: (d.line, d.message) for d in diags}
    assert lines["data_injection.max_rows_per_query"][0] == 4
    assert "not of type integer" in lines["data_injection.max_rows_per_query"][1]
    layout_line = text.splitlines().index("layuot:") + 1
    assert lines["layuot"] == (layout_line, "unknown field 'layuot'; did you mean 'layout'?")


def test_save_of_invalid_content_writes_nothing(ws_copy):
    folder = ws_copy("supply-chain-weekly")
    before = snapshot(folder)
    ws, _ = workspace.load(folder)
    task = ws.data["task"]
    task["rules"][0]["author"] = 42
    ws.data["output"]["theme"]["background"] = "#fff"  # valid file written in the same call...
    ws.data["output"]["theme"]["background"] = "#ffffff"
    ws.data["output"]["notes"].append("A new note")
    with pytest.raises(ValidationFailed) as info:
        workspace.save(folder, {"output": ws.data["output"], "task": task})  # ...is not written either
    assert "task.yaml" in str(info.value) and "rules[0].author" in str(info.value)
    assert snapshot(folder) == before
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("bad", ["../x", "x/../../y", "a/b", "", "Upper", "-lead", "with space", "x" * 64])
def test_workspace_names_cannot_traverse_paths(bad):
    with pytest.raises(workspace.InvalidName):
        workspace.check_slug(bad)


def test_save_refuses_a_folder_that_is_not_a_workspace_name(tmp_path):
    with pytest.raises(workspace.InvalidName):
        workspace.save(tmp_path / "..", workspace.blank("X", "alice", "2026-11-30"))
    with pytest.raises(workspace.InvalidName):
        workspace.save(tmp_path / "Bad Name", workspace.blank("X", "alice", "2026-11-30"))
    assert list(tmp_path.iterdir()) == []


def test_blank_workspace_validates(tmp_path):
    folder = tmp_path / "team-kpis"
    workspace.save(folder, workspace.blank("Team KPIs", "alice", "2026-11-30"))
    assert workspace.validate(folder) == []
    assert sorted(p.name for p in folder.iterdir()) == ["output.yaml", "sources.yaml", "task.yaml", "workspace.yaml"]


def test_every_file_starts_with_the_schema_header(tmp_path):
    folder = tmp_path / "w"
    workspace.save(folder, workspace.blank("W", "alice", "2026-11-30"))
    for kind, name in workspace.FILES.items():
        if (folder / name).exists():
            assert (folder / name).read_text().splitlines()[0] == f"# yaml-language-server: $schema=../schemas/{kind}.schema.json"


def test_find_workspaces_below_a_folder_skips_non_workspaces():
    found = workspace.find_workspaces(WORKSPACES)
    assert [p.name for p in found] == DEMOS


def test_copy_template_is_all_or_nothing(tmp_path):
    target = tmp_path / "copy"
    workspace.copy_template(WORKSPACES / "gdp-explorer", target, name="Copy")
    assert (target / "data" / "gdp.csv").read_bytes() == (WORKSPACES / "gdp-explorer" / "data" / "gdp.csv").read_bytes()
    assert workspace.load(target)[0].name == "Copy"
    with pytest.raises(FileExistsError):
        workspace.copy_template(WORKSPACES / "gdp-explorer", target)
    assert [p.name for p in tmp_path.iterdir()] == ["copy"]  # no staging folder left behind
    with pytest.raises(ValidationFailed, match="name"):
        workspace.copy_template(WORKSPACES / "gdp-explorer", tmp_path / "long", name="x" * 81)
    assert [p.name for p in tmp_path.iterdir()] == ["copy"]  # a name that does not fit writes nothing


def test_supply_chain_demo_data_matches_its_generator(tmp_path):
    import runpy

    module = runpy.run_path(str(WORKSPACES.parent / "scripts" / "make_supply_chain_data.py"))
    module["main"](tmp_path)
    for rel in ["data/gates.csv", "data/next_week/gates.csv"]:
        assert (tmp_path / rel).read_bytes() == (WORKSPACES / "supply-chain-weekly" / rel).read_bytes()
    assert (tmp_path / "data/gates.csv").read_bytes() != (tmp_path / "data/next_week/gates.csv").read_bytes()


def test_dump_is_stable_under_repeated_round_trips():
    data = {"a": [1, 2], "b": {"c": "x: y", "d": ["#1f77b4"]}, "e": "it's", "f": None, "g": True}
    once = dump(data)
    assert dump(parse(once).data) == once
    assert parse(once).data == data
