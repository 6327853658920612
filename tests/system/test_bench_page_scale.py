"""bench.page_scale's dashboards do what its figures claim: n components, each its own cache entry, same work."""

from __future__ import annotations

from bench.page_scale import spec_with
from bench.render import SPEC
from lib.memory import workspace
from tests.helpers import ROOT


def test_a_grown_dashboard_has_n_components_with_own_ids_and_own_sql_and_validates():
    grown = spec_with(50)
    ids = [c["id"] for c in grown["components"]]
    assert len(ids) == 50 and len(set(ids)) == 50
    texts = [c.get("query") or str(sorted((c.get("queries") or {}).values())) for c in grown["components"]]
    assert len(set(texts)) == 50  # no two share a query cache entry
    base = {c["id"]: c for c in SPEC["components"]}
    for c in grown["components"]:  # each repeats one of the ten, doing its work
        original = base[c["id"].rsplit("_", 1)[0]]
        assert c["type"] == original["type"] and (c.get("query") or "").startswith(original.get("query") or "")
    diags = workspace.validate_content(ROOT / "workspaces" / "supply-chain-weekly", {"dashboard": grown})
    assert not [d for d in diags if d.level == "error"], diags


def test_a_small_dashboard_is_the_first_components_unchanged():
    small = spec_with(5)
    assert [c["query"] for c in small["components"]] == [c["query"] for c in SPEC["components"][:5]]
