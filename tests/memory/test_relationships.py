"""Relationships: candidates by value containment on the public datasets, and the joins stewards declare or reject."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pytest

from lib.core.diagnostics import ValidationFailed
from lib.data import profile
from lib.memory import relationships, workspace

from ..conftest import ROOT


@pytest.fixture(scope="module")
def superstore(datasets) -> pa.Table:
    return pacsv.read_csv(datasets / "global_superstore.csv")


def dimension(table: pa.Table, key: str, keep: dict[str, str]) -> pa.Table:
    """One row per distinct `key` (renamed as keep[key]) with the first value of the other `keep` columns."""
    grouped = table.group_by(key, use_threads=False).aggregate([(c, "first") for c in keep if c != key])
    return grouped.select([f"{c}_first" if c != key else key for c in keep]).rename_columns(list(keep.values()))


def found(tables: dict[str, pa.Table], skip=()) -> set[tuple[str, str]]:
    profiles = [profile.profile_table(name, t) for name, t in tables.items()]
    return {(r["left"], r["right"]) for r in relationships.candidates(tables, profiles, skip)}


def test_renamed_text_codes_are_found_by_their_values(superstore):
    """symbol vs ticker: the order's `buyer` codes all fall inside the unique `client` codes of another table."""
    orders = superstore.select(["Order ID", "Customer ID", "Product ID", "Sales"]).rename_columns(["order_ref", "buyer", "item", "sales"])
    clients = dimension(superstore, "Customer ID", {"Customer ID": "client", "Segment": "segment"})
    products = dimension(superstore, "Product ID", {"Product ID": "sku", "Category": "category"})
    assert found({"orders": orders, "clients": clients, "products": products}) == {("orders.buyer", "clients.client"), ("orders.item", "products.sku")}


def test_country_codes_join_a_country_table_under_another_name(datasets):
    gdp = pacsv.read_csv(datasets / "gdp.csv")
    countries = dimension(gdp, "Country Code", {"Country Code": "iso3", "Country Name": "label"})
    # Country names are unique as well: the dimension can be reached either way.
    assert found({"gdp": gdp, "countries": countries}) == {("gdp.Country Code", "countries.iso3"), ("gdp.Country Name", "countries.label")}


def test_renamed_integer_keys_are_found_and_small_integers_dates_and_scores_are_not(superstore):
    row_ids = pc.cast(superstore["Row ID"], pa.int64())
    # A table keyed by Row ID, and a table of events referencing every 7th row under another name.
    rows = pa.table({"rid": row_ids, "market": superstore["Market"]})
    picked = pc.take(row_ids, pa.array(range(0, superstore.num_rows, 7)))
    events = pa.table(
        {
            "line": picked,  # the key, renamed
            "qty": pc.take(superstore["Quantity"], pa.array(range(0, superstore.num_rows, 7))),  # 1..14: inside any id range
            "ordinal": pa.array(range(1, len(picked) + 1)),  # a row number: unique, dense, inside 1..51290
        }
    )
    found_pairs = found({"rows": rows, "events": events})
    assert ("events.line", "rows.rid") in found_pairs
    assert not {p for p in found_pairs if p[0] in ("events.qty", "events.ordinal")}, found_pairs


def test_ages_inside_an_id_range_are_not_a_key(datasets):
    adult = pacsv.read_csv(datasets / "adult.csv")
    ids = pa.table({"id": pa.array(range(1, 101)), "label": [f"p{i}" for i in range(1, 101)]})  # 17..90 all fall inside
    assert found({"adult": adult, "people": ids}) == set()


def test_dates_and_many_to_many_values_are_not_proposed(superstore):
    orders = superstore.select(["Order Date", "City", "Sales"]).rename_columns(["day", "town", "sales"])
    calendar = dimension(superstore, "Order Date", {"Order Date": "date", "Market": "market"})  # unique dates as text
    # City repeats across states and markets: a lookup on it would multiply rows.
    places = superstore.select(["City", "State"]).rename_columns(["city", "state"])
    assert found({"orders": orders, "calendar": calendar, "places": places}) == set()


def test_names_stay_a_signal_and_rejected_pairs_are_skipped(superstore):
    orders = superstore.select(["Customer ID", "Sales"])
    customers = dimension(superstore, "Customer ID", {"Customer ID": "Customer ID", "Segment": "Segment"})
    tables = {"orders": orders, "customers": customers}
    profiles = [profile.profile_table(n, t) for n, t in tables.items()]
    [rel] = relationships.candidates(tables, profiles)
    assert rel == {"left": "orders.Customer ID", "right": "customers.Customer ID", "overlap": 1.0, "evidence": "name and values"}
    assert relationships.candidates(tables, profiles, skip={("customers.Customer ID", "orders.Customer ID")}) == []


def test_a_million_rows_cost_one_sample_and_one_pass():
    """1M orders against 200k customers: found, and deterministic (the sample is evenly spaced)."""
    n = 1_000_000
    orders = pa.table({"buyer": pc.cast(pc.multiply(pa.array(range(n)), 7), pa.int64()), "amount": pa.array([1.5] * n)})  # pyright: ignore[reportAttributeAccessIssue]  # pc has no stubs
    orders = orders.set_column(0, "buyer", pc.cast(pc.add(pc.divide(orders["buyer"], 35), 1), pa.int64()))  # pyright: ignore[reportAttributeAccessIssue]  # 1..200,000 (pc has no stubs)
    customers = pa.table({"cid": pa.array(range(1, 200_001)), "tier": pa.array([f"t{i % 5}" for i in range(200_000)])})
    tables = {"orders": orders, "customers": customers}
    profiles = [profile.profile_table(name, t) for name, t in tables.items()]
    first = relationships.candidates(tables, profiles)
    assert first == relationships.candidates(tables, profiles)
    assert [(r["left"], r["right"], r["evidence"]) for r in first] == [("orders.buyer", "customers.cid", "values")]


# --------------------------------------------------------------------------- declared and rejected


def test_merged_lists_declared_first_and_leaves_out_rejected():
    prof = {
        "tables": [],
        "relationships": [
            {"left": "a.x", "right": "b.y", "overlap": 1.0, "evidence": "values"},
            {"left": "a.z", "right": "c.w", "overlap": 0.95, "evidence": "values"},
        ],
    }
    sources = relationships.reject(relationships.confirm({"sources": []}, "a.x", "b.y"), "c.w", "a.z")  # rejected either way round
    assert relationships.merged(prof, sources) == [{"left": "a.x", "right": "b.y", "evidence": "declared", "overlap": 1.0}]
    assert relationships.forget(sources, "b.y", "a.x") == {"sources": [], "rejected_relationships": [{"from": "c.w", "to": "a.z"}]}
    assert relationships.without_table(sources, "c") == {"sources": [], "relationships": [{"from": "a.x", "to": "b.y"}]}
    text = profile.text({**prof, "relationships": relationships.merged(prof, sources)})
    assert "a.x -> b.y (declared, 100% of values match)" in text and "c.w" not in text


def test_a_join_on_a_table_no_source_makes_is_refused_with_file_line_and_choices(tmp_path):
    folder = tmp_path / "shop"
    workspace.save(folder, workspace.blank("Shop", "alice", "2026-11-30"))
    sources = {"sources": [{"name": "orders", "type": "csv", "path": "o.csv"}], "relationships": [{"from": "orders.buyer", "to": "clents.id"}]}
    with pytest.raises(ValidationFailed) as caught:
        workspace.save(folder, {"sources": sources})
    [diag] = caught.value.diagnostics
    assert diag.line is not None
    line = workspace.render("sources", sources).splitlines()[diag.line - 1]
    assert (diag.id, diag.field) == ("relationship.unknown_table", "relationships[0].to") and "to: clents.id" in line
    assert (diag.file or "").endswith("shop/sources.yaml")
    assert "'clents'" in diag.message and diag.allowed == "orders"
    assert workspace.load(folder)[0].data["sources"] == {"sources": []}  # nothing half-written
    bad = {"sources": [{"name": "orders", "type": "csv", "path": "o.csv"}], "relationships": [{"from": "orders", "to": "clients.id"}]}
    with pytest.raises(ValidationFailed) as caught:
        workspace.save(folder, {"sources": bad})
    assert caught.value.diagnostics[0].field == "relationships[0].from"


def test_a_declared_column_missing_from_the_profile_is_an_error_naming_the_columns(tmp_path):
    folder = tmp_path / "shop"
    workspace.save(folder, workspace.blank("Shop", "alice", "2026-11-30"))
    srcs = [{"name": "orders", "type": "csv", "path": "o.csv"}, {"name": "clients", "type": "csv", "path": "c.csv"}]
    prof = {
        "tables": [
            {"name": "clients", "rows": 2, "columns": [{"name": "client", "type": "VARCHAR"}]},
            {"name": "orders", "rows": 2, "columns": [{"name": "buyer", "type": "VARCHAR"}]},
        ]
    }
    workspace.save(folder, {"sources": {"sources": srcs, "relationships": [{"from": "orders.buyer", "to": "clients.clinet"}]}, "profile": prof})
    diags = workspace.load(folder)[1]
    assert [(d.id, d.field, d.allowed) for d in diags] == [("relationship.unknown_column", "relationships[0].to", "client")]
    assert (diags[0].file or "").endswith("shop/sources.yaml") and diags[0].line


# --------------------------------------------------------------------------- across processes


def shop(tmp_path: Path, superstore: pa.Table) -> Path:
    """A workspace of three CSV sources cut from the Superstore table, under names that do not match."""
    data = tmp_path / "data"
    data.mkdir()
    sample = superstore.slice(0, 5000)
    pacsv.write_csv(
        sample.select(["Order ID", "Customer ID", "Product ID", "Sales"]).rename_columns(["order_ref", "buyer", "item", "sales"]), data / "orders.csv"
    )
    pacsv.write_csv(dimension(superstore, "Customer ID", {"Customer ID": "client", "Segment": "segment"}), data / "clients.csv")
    pacsv.write_csv(dimension(superstore, "Product ID", {"Product ID": "sku", "Category": "category"}), data / "products.csv")
    folder = tmp_path / "shop"
    workspace.save(folder, workspace.blank("Shop", "alice", "2026-11-30"))
    srcs = [{"name": n, "type": "csv", "path": str(data / f"{n}.csv")} for n in ("orders", "clients", "products")]
    workspace.save(folder, {"sources": {"sources": srcs}})
    return folder


def run(code: str, env: dict[str, str]) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def cli(args: list[str], env: dict[str, str]) -> None:
    done = subprocess.run([sys.executable, "-m", "lib", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_declared_and_rejected_joins_survive_a_profile_regenerated_in_another_process(tmp_path, superstore):
    folder = shop(tmp_path, superstore)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DASHMEM_DATA_DIRS": str(tmp_path / "data"), "DASHMEM_CACHE_DIR": str(tmp_path / "cache")}
    cli(["refresh", str(folder)], env)
    cli(["profile", str(folder), "--write"], env)
    before = workspace.load(folder)[0].data["profile"]["relationships"]
    assert {(r["left"], r["right"]) for r in before} == {("orders.buyer", "clients.client"), ("orders.item", "products.sku")}
    # A steward's decisions, written by one process...
    run(
        "from pathlib import Path; from lib.memory import relationships as r; from lib.memory import workspace as w\n"
        f"p = Path({str(folder)!r}); s = w.load(p)[0].data['sources']\n"
        "w.save(p, {'sources': r.reject(r.confirm(s, 'orders.buyer', 'clients.client'), 'orders.item', 'products.sku')})\n",
        env,
    )
    # ...the profile regenerated by another...
    cli(["profile", str(folder), "--write"], env)
    # ...and what a third one composes for the model.
    shown = json.loads(
        run(
            "import json; from lib.chat import compose; from lib.memory import workspace as w\n"
            f"ws = w.load(__import__('pathlib').Path({str(folder)!r}))[0]\n"
            "c = compose.compose(ws.data, 'edit', 'Sales by segment')\n"
            "print(json.dumps({'sources': ws.data['sources'], 'profile': ws.data['profile'], 'user': c.request['messages'][0]['content'][0]['text']}))\n",
            env,
        )
    )
    assert shown["sources"]["relationships"] == [{"from": "orders.buyer", "to": "clients.client"}]
    assert shown["sources"]["rejected_relationships"] == [{"from": "orders.item", "to": "products.sku"}]
    assert "relationships" not in shown["profile"]  # neither proposed again: one is declared, one rejected
    assert "orders.buyer -> clients.client (declared)" in shown["user"]
    assert "products.sku" not in shown["user"].split("joins")[-1]


def test_a_measure_is_never_a_key_even_under_the_same_name():
    """Iowa's electricity tables: `net_generation` in both, an amount, unique in the yearly table; it was
    proposed as a join `net_generation -> net_generation`. The plant ids still join."""
    plants = pa.table({"plant_id": list(range(1000, 1400)), "net_generation": [17_000 + 37 * i for i in range(400)]})
    monthly = pa.table(
        {
            "plant_id": [1000 + i % 400 for i in range(4000)],
            "month": [1 + i % 12 for i in range(4000)],
            "net_generation": [17_000 + 37 * (i % 400) for i in range(4000)],
        }
    )
    profiles = [profile.profile_table("plants", plants), profile.profile_table("monthly", monthly)]
    roles = {(p["name"], c["name"]): c.get("role") for p in profiles for c in p["columns"]}
    assert roles[("plants", "net_generation")] == "measure" and roles[("monthly", "net_generation")] == "measure"
    pairs = {(r["left"], r["right"]) for r in relationships.candidates({"plants": plants, "monthly": monthly}, profiles)}
    assert ("monthly.plant_id", "plants.plant_id") in pairs
    assert not [p for p in pairs if "net_generation" in p[0] or "net_generation" in p[1]], pairs
