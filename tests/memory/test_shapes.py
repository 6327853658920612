"""lib/memory/shapes.py: the typed shapes of the files list exactly the fields their JSON Schemas allow."""

from __future__ import annotations

import pytest

from lib.memory import schemas, shapes
from lib.memory.workspace import load

from ..conftest import WORKSPACES


def schema_fields(where: str) -> set[str]:
    kind, _, definition = where.partition("#")
    root = schemas.load_schema(kind)
    node = root["$defs"][definition] if definition else root
    return set(node.get("properties") or {})


@pytest.mark.parametrize("name", sorted(shapes.SCHEMA_FIELDS))
def test_a_shape_has_the_fields_of_its_schema(name):
    shape, defs = shapes.SCHEMA_FIELDS[name]
    allowed = set().union(*(schema_fields(d) for d in defs))
    declared = set(shape.__annotations__)
    assert declared - allowed == set(), f"{name}: fields the schema does not allow"
    assert allowed - declared == set(), f"{name}: fields of the schema its shape lacks"


def test_required_fields_are_the_schemas():
    for name in ("dashboard", "report", "sources"):
        shape, _ = shapes.SCHEMA_FIELDS[name]
        assert set(shape.__required_keys__) == set(schemas.load_schema(name).get("required") or []), name


def test_a_loaded_workspace_hands_out_its_specs_typed():
    ws, found = load(WORKSPACES / "supply-chain-weekly")
    assert not [d for d in found if d.level == "error"]
    dashboard, sources = ws.dashboard, ws.sources
    assert dashboard is not None and dashboard is ws.data["dashboard"] and dashboard["components"]  # the same dict: nothing copied
    assert sources is not None and sources is ws.data["sources"] and sources["sources"][0]["name"]
    assert ws.report is ws.data.get("report")
