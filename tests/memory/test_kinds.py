"""lib.memory.kinds: one module per memory kind, and a registry whose every entry is complete.

Adding a kind or a field touches that kind's module and its schema only; these tests say what
an entry must have, and that the per-operation dicts it replaced are gone or derived from it.
"""

from __future__ import annotations

import string
from pathlib import Path

import pytest

from lib.chat import compose
from lib.memory import changes, schemas, semantic_diff, workspace
from lib.memory.kinds import KINDS, Kind

from ..conftest import ROOT, WORKSPACES

NAMES = list(KINDS)


def test_the_registry_lists_every_kind_in_file_order():
    assert NAMES == ["workspace", "task", "sources", "output", "profile", "dashboard", "report"]
    assert all(isinstance(kind, Kind) and kind.name == name for name, kind in KINDS.items())


@pytest.mark.parametrize("name", NAMES)
def test_each_kind_is_complete(name):
    kind = KINDS[name]
    module = ROOT / "lib" / "memory" / "kinds" / f"{name}.py"
    assert module.is_file() and kind.diff.__module__ == f"lib.memory.kinds.{name}"  # its own module says what a change means
    # File and schema: schemas/<kind>.schema.json, which load_schema(kind) reads, and the file's editor header names.
    assert kind.file == f"{name}.yaml"
    assert kind.schema == f"{name}.schema.json" and (schemas.SCHEMA_DIR / kind.schema).is_file()
    assert schemas.load_schema(name)["title"] and schemas.header(name).endswith(f"/schemas/{kind.schema}")
    # Checks and diff: callables; an unchanged or absent file means nothing changed.
    assert isinstance(kind.checks, tuple) and all(callable(check) for check in kind.checks)
    assert kind.diff(None, None) == []
    # Review: its group has a title, a place and sentences that name only what a Change holds.
    review = kind.review
    assert review.title and review.what and review.sentences and review.rank > changes.FILE.rank
    fields = {"what", "id", "old", "new"}
    for template in review.sentences.values():
        assert {field for _, field, _, _ in string.Formatter().parse(template) if field} <= fields, template
    # The model: a heading over its section and a fallback text (empty only for the artifacts, not shown when empty).
    assert kind.model_heading and isinstance(kind.model_empty, str) and callable(kind.model_view)
    assert bool(kind.model_empty) != (name in compose.ARTIFACTS)


def test_review_groups_are_in_the_order_a_reviewer_reads_them():
    shown = [(c.name, c.title) for c in semantic_diff.CATEGORIES]
    assert shown == [
        ("file", "Files"),
        ("access", "Access"),
        ("task", "Task rules"),
        ("output", "Output constraints"),
        ("sources", "Sources"),
        ("dashboard", "Dashboard"),
        ("report", "Report"),
        ("profile", "Data profile"),
    ]
    assert len({c.rank for c in semantic_diff.CATEGORIES}) == len(shown)


@pytest.mark.parametrize("slug", sorted(p.name for p in WORKSPACES.iterdir() if (p / "workspace.yaml").is_file()))
def test_every_change_a_kind_reports_has_its_own_sentence(slug):
    ws, _ = workspace.load(WORKSPACES / slug)
    found = semantic_diff.changes({}, ws.data) + semantic_diff.changes(ws.data, {})
    assert found
    for change in found:
        assert change.wording is not None and change.kind in change.wording.sentences, change
        assert change.wording is next(k.review for k in KINDS.values() if k.review.name == change.category)


def test_the_model_sees_each_kind_under_its_heading_or_its_fallback():
    ws, _ = workspace.load(WORKSPACES / "supply-chain-weekly")
    full = compose.to_json(compose.compose(ws.data, "edit", "hi"))
    empty = compose.to_json(compose.compose({}, "edit", "hi"))
    for name in ("task", "sources", "output", *(k for k in compose.ARTIFACTS if ws.data.get(k))):
        assert f"# {KINDS[name].model_heading}" in full, name
    for name in ("task", "sources", "output", "profile"):
        assert KINDS[name].model_empty in empty, name
    assert f"{KINDS['workspace'].model_heading}: {KINDS['workspace'].model_empty}" in empty


def test_what_the_model_sees_of_a_kind_is_said_once_in_its_module():
    """Headings and fallbacks live in the kind's module, not again in the code that composes the prompt."""
    product = [p for folder in ("lib", "app_pages") for p in (ROOT / folder).rglob("*.py") if "kinds" not in p.parts]
    texts = {p: p.read_text(encoding="utf-8") for p in product}
    for kind in KINDS.values():
        for said in (kind.model_heading, kind.model_empty):
            if len(said) > 12:  # not "Workspace", "(unnamed)" or ""
                assert not [str(p.relative_to(ROOT)) for p, text in texts.items() if said in text], said


def test_the_old_parallel_dicts_are_gone_or_derived():
    assert not hasattr(schemas, "FILES")
    assert not hasattr(workspace, "SEMANTIC_CHECKS")
    assert not hasattr(semantic_diff, "CATEGORY_DIFFS") and not hasattr(semantic_diff, "CATEGORY_TITLES")
    assert not (ROOT / "lib" / "repo" / "semantic_diff.py").exists()  # moved down to lib/memory
    assert workspace.FILES == {name: kind.file for name, kind in KINDS.items()}
    assert list(workspace.FILES) == NAMES
    assert workspace.REQUIRED == tuple(name for name, kind in KINDS.items() if kind.required) == ("workspace", "task", "sources", "output")
    for name, text in ((p.name, p.read_text(encoding="utf-8")) for p in Path(ROOT / "lib").rglob("*.py")):
        assert "SEMANTIC_CHECKS" not in text and "CATEGORY_DIFFS" not in text, name
