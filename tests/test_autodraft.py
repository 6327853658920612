"""Auto-draft without a model: a first dashboard for every public dataset that passes every check."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from lib import autodraft, checks, profile, workspace
from lib.access import OPERATOR
from lib.refresh import refresh
from lib.render import QueryCache, render
from lib.warehouse import Warehouse

from .conftest import WORKSPACES

PUBLIC = ["gdp.csv", "adult.csv", "global_superstore_sample1000.csv", "global_superstore.csv", "nyc311_sample5000.csv", "nyc311_api_1000.csv"]


def workspace_over(tmp_path, csv: Path):
    """A workspace over one CSV (from the `dataset` fixture), loaded and profiled."""
    os.environ["DASHMEM_DATA_DIRS"] = str(csv.parent)
    folder = tmp_path / csv.name.split(".")[0].replace("_", "-")
    workspace.save(folder, workspace.blank(csv.name, "alice", "2026-11-30"))
    workspace.save(folder, {"sources": {"sources": [{"name": "data", "type": "csv", "path": str(csv)}]}})
    wh = Warehouse(tmp_path / "cache")
    assert refresh(folder, wh, user=OPERATOR).ok
    ws, _ = workspace.load(folder)
    workspace.save(folder, {"profile": profile.build(wh.tables(), ws.data["sources"]["sources"])})
    return folder, wh


@pytest.mark.parametrize("csv_name", PUBLIC)
def test_autodraft_passes_every_check(tmp_path, csv_name, dataset):
    folder, wh = workspace_over(tmp_path, dataset(csv_name))
    ws, _ = workspace.load(folder)
    spec = autodraft.draft(ws.data)
    workspace.save(folder, {"dashboard": spec})
    ws, diags = workspace.load(folder)
    assert diags == []
    assert checks.run(ws, wh.tables(), wh.current().id) == []
    kinds = [c["type"] for c in spec["components"]]
    assert kinds.count("kpi") >= 1 and "chart" in kinds and "table" in kinds and "text" in kinds
    rendered = render(ws.data, wh.tables(), wh.current().id, cache=QueryCache())
    assert rendered.errors == []
    assert "{{" not in rendered.component("insight").markdown
    assert [c.id for c in rendered.rows[0]] == [c["id"] for c in spec["components"] if c["type"] == "kpi"]


def test_autodraft_has_a_trend_and_breakdowns_where_the_data_allows(tmp_path, dataset):
    folder, wh = workspace_over(tmp_path, dataset("global_superstore_sample1000.csv"))
    ws, _ = workspace.load(folder)
    spec = autodraft.draft(ws.data)
    ids = [c["id"] for c in spec["components"]]
    assert "trend" in ids and any(i.startswith("by_") for i in ids)
    trend = next(c for c in spec["components"] if c["id"] == "trend")
    assert trend["encoding"]["x"]["type"] == "temporal" and "date_trunc" in trend["query"]
    assert {f["type"] for f in spec["filters"]} == {"multiselect", "date_range"}


def test_autodraft_is_deterministic(tmp_path, dataset):
    folder, _ = workspace_over(tmp_path, dataset("adult.csv"))
    ws, _ = workspace.load(folder)
    assert workspace.render("dashboard", autodraft.draft(ws.data)) == workspace.render("dashboard", autodraft.draft(ws.data))


def test_autodraft_applies_the_workspace_rules(tmp_path):
    folder = tmp_path / "supply-chain-weekly"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", folder)
    wh = Warehouse(tmp_path / "cache")
    assert refresh(folder, wh, user=OPERATOR).ok
    ws, _ = workspace.load(folder)
    spec = autodraft.draft(ws.data)
    by_gate = next(c for c in spec["components"] if c["id"] == "by_gate")
    assert by_gate["encoding"]["color"]["scale"] == {"domain": ["Supply", "Orders", "Process"], "range": ["#1f77b4", "#ff7f0e", "#9467bd"]}
    ws.data["dashboard"] = spec
    assert checks.run(ws, wh.tables(), wh.current().id) == []


def test_autodraft_without_a_profile_says_what_to_do(tmp_path):
    ws_files = workspace.blank("Empty", "alice", "2026-11-30")
    with pytest.raises(ValueError, match="connect a source and refresh"):
        autodraft.draft(ws_files)


def test_a_declared_join_offers_a_breakdown_by_the_joined_tables_category(tmp_path, dataset):
    """orders.buyer -> clients.client declared: sales by clients.segment, equal to the sums computed directly."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    store = pacsv.read_csv(dataset("global_superstore_sample1000.csv"))
    data = tmp_path / "data"
    data.mkdir()
    pacsv.write_csv(store.select(["Order Date", "Customer ID", "Sales"]).rename_columns(["day", "buyer", "sales"]), data / "orders.csv")
    grouped = store.group_by("Customer ID", use_threads=False).aggregate([("Segment", "first")])
    clients = pa.table({"client": grouped["Customer ID"], "segment": grouped["Segment_first"]})
    pacsv.write_csv(clients, data / "clients.csv")
    os.environ["DASHMEM_DATA_DIRS"] = str(data)
    folder = tmp_path / "shop"
    workspace.save(folder, workspace.blank("Shop", "alice", "2026-11-30"))
    srcs = [{"name": n, "type": "csv", "path": str(data / f"{n}.csv")} for n in ("orders", "clients")]
    workspace.save(folder, {"sources": {"sources": srcs, "relationships": [{"from": "orders.buyer", "to": "clients.client"}]}})
    wh = Warehouse(tmp_path / "cache")
    assert refresh(folder, wh, user=OPERATOR).ok
    ws, _ = workspace.load(folder)
    workspace.save(folder, {"profile": profile.build(wh.tables(), srcs, decided=ws.data["sources"])})
    ws, _ = workspace.load(folder)
    spec = autodraft.draft(ws.data)
    workspace.save(folder, {"dashboard": spec})
    ws, diags = workspace.load(folder)
    assert diags == []
    assert checks.run(ws, wh.tables(), wh.current().id) == []
    joined = next((c for c in spec["components"] if c["id"] == "by_clients_segment"), None)
    assert joined, [c["id"] for c in spec["components"]]
    assert any(joined["id"] in [cell if isinstance(cell, str) else cell["id"] for cell in row] for row in spec["layout"])
    rendered = render(ws.data, wh.tables(), wh.current().id, cache=QueryCache())
    assert rendered.errors == []
    shown = {r["segment"]: r["sales"] for r in rendered.component("by_clients_segment").result.table.to_pylist()}
    by_client = dict(zip(clients["client"].to_pylist(), clients["segment"].to_pylist()))
    expected: dict[str, float] = {}
    for buyer, sales in zip(store["Customer ID"].to_pylist(), store["Sales"].to_pylist()):
        expected[by_client[buyer]] = expected.get(by_client[buyer], 0.0) + sales
    assert shown.keys() == expected.keys() and all(abs(shown[k] - expected[k]) < 1e-6 * abs(expected[k]) for k in expected)


def test_no_joined_breakdown_reaches_across_a_live_source():
    """A query runs on the snapshots or on one live database: a join of a snapshot table with a live one cannot run."""
    seg = {"name": "segment", "type": "VARCHAR", "role": "dimension", "distinct": 3, "null_share": 0}
    prof = {
        "tables": [
            {"name": "clients", "rows": 600, "columns": [{"name": "client", "type": "VARCHAR", "role": "identifier", "distinct": 600}, seg]},
            {
                "name": "orders",
                "rows": 1000,
                "columns": [{"name": "buyer", "type": "VARCHAR", "role": "identifier"}, {"name": "sales", "type": "DOUBLE", "role": "measure"}],
            },
        ]
    }
    clients = {"name": "clients", "type": "sql", "url": "postgresql://reporting@db/sales", "table": "clients"}
    files = {
        "profile": prof,
        "sources": {
            "sources": [{"name": "orders", "type": "csv", "path": "o.csv"}, clients],
            "relationships": [{"from": "orders.buyer", "to": "clients.client"}],
        },
    }
    assert "by_clients_segment" in [c["id"] for c in autodraft.draft(files)["components"]]
    files["sources"]["sources"][1] = {**clients, "mode": "live"}
    assert "by_clients_segment" not in [c["id"] for c in autodraft.draft(files)["components"]]
