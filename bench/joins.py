"""Join candidates: value containment (lib/memory/relationships.py) against name-only matching, and its cost at 1M rows.

Part 1, quality. Labelled table sets cut from the public datasets: keys renamed so
that names no longer match (a `buyer` column against a `client` one), one pair
whose names do match, decoys (small integers and scores inside an id range 1..N,
row numbers, dates and years beside a calendar) and many-to-many traps (a column
that repeats on both sides, names matching). Each set's true joins are listed; a
proposed pair counts as right when it is a true join (either way round). Precision
and recall over all sets, for value containment and for name-only matching (the
profile's former rule: matching names, the one side at least as varied, half the
values found, by `SELECT DISTINCT`).

Part 2, cost. 1M orders (the Superstore rows, repeated) against its customers and
products: `relationships.candidates` (a sample of the many side, one pass over the
one side) against the plain baseline, an exact `SELECT DISTINCT` containment query
in DuckDB for every pair the detector looks at. Profiles are computed beforehand
(the profile computes them anyway). Medians of 5 runs.

Run: python -m bench.joins [--runs N]
"""

from __future__ import annotations

import argparse
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from bench.common import DATASETS, median_time, print_table
from lib.data import profile
from lib.data.sandbox import quote_ident, sandbox_cursor
from lib.memory import relationships

GOAL = "goal (issue #16): precision and recall >= 0.9, no false positive on decoys"
COST_GOAL = "goal (issue #16): 1M-row tables well under a second"


def read(name: str) -> pa.Table:
    return pacsv.read_csv(DATASETS / name)


def dimension(table: pa.Table, key: str, keep: dict[str, str]) -> pa.Table:
    """One row per distinct `key`, renamed and with the first value of the other kept columns."""
    grouped = table.group_by(key, use_threads=False).aggregate([(c, "first") for c in keep if c != key])
    return grouped.select([f"{c}_first" if c != key else key for c in keep]).rename_columns(list(keep.values()))


def every(table: pa.Table, step: int) -> pa.Table:
    return table.take(pa.array(range(0, table.num_rows, step)))


# --------------------------------------------------------------------------- the labelled sets


def labelled_sets() -> list[dict[str, Any]]:
    """[{name, tables, true: {(a, b)}, decoys: {(a, b)}}]: decoys are pairs a careless rule would propose."""
    store, gdp, adult, nyc = read("global_superstore.csv"), read("gdp.csv"), read("adult.csv"), read("nyc311_sample5000.csv")
    out = []

    orders = store.select(["Order ID", "Customer ID", "Product ID", "City", "Order Date", "Quantity", "Row ID", "Sales"]).rename_columns(
        ["order_ref", "buyer", "item", "city", "day", "qty", "line", "sales"]
    )
    out.append(
        {
            "name": "superstore, renamed keys",
            "tables": {
                "orders": orders,
                "clients": dimension(store, "Customer ID", {"Customer ID": "client", "Segment": "segment"}),
                "products": dimension(store, "Product ID", {"Product ID": "sku", "Category": "category"}),
                "calendar": dimension(store, "Order Date", {"Order Date": "date", "Market": "market"}),
                "places": store.select(["City", "State"]).rename_columns(["city", "state"]),  # many-to-many: cities repeat
                "bins": pa.table({"bin_id": pa.array(range(1, 101)), "shelf": [f"s{i % 7}" for i in range(100)]}),
            },
            "true": {("orders.buyer", "clients.client"), ("orders.item", "products.sku")},
            "decoys": {("orders.day", "calendar.date"), ("orders.city", "places.city"), ("orders.qty", "bins.bin_id")},
        }
    )
    returns = every(store.select(["Row ID", "Ship Mode"]), 9).rename_columns(["returned_line", "mode"])
    out.append(
        {
            "name": "superstore, integer key and row numbers",
            "tables": {
                "orders": store.select(["Row ID", "Customer ID", "Sales"]).rename_columns(["row_no", "customer_id", "sales"]),
                "returns": returns.append_column("seq", pa.array(range(1, returns.num_rows + 1))),
                "customers": dimension(store, "Customer ID", {"Customer ID": "customer_id", "Segment": "segment"}),
            },
            "true": {("returns.returned_line", "orders.row_no"), ("orders.customer_id", "customers.customer_id")},
            "decoys": {("returns.seq", "orders.row_no")},
        }
    )
    out.append(
        {
            "name": "gdp and a country table",
            "tables": {
                "gdp": gdp,
                "countries": dimension(gdp, "Country Code", {"Country Code": "iso3", "Country Name": "label"}),
                "years": pa.table({"yr": pa.array(range(1950, 2031)), "decade": [f"{y // 10 * 10}s" for y in range(1950, 2031)]}),
            },
            "true": {("gdp.Country Code", "countries.iso3"), ("gdp.Country Name", "countries.label")},
            "decoys": {("gdp.Year", "years.yr")},
        }
    )
    out.append(
        {
            "name": "adult, lookups and scores",
            "tables": {
                "adult": adult,
                "nations": dimension(adult, "native-country", {"native-country": "nation", "race": "sample_race"}),
                "schooling": dimension(adult, "education", {"education": "level", "education-num": "years"}),
                "people": pa.table({"id": pa.array(range(1, 101)), "label": [f"p{i}" for i in range(1, 101)]}),
                "staff": adult.select(["occupation", "sex"]).slice(0, 2000),  # many-to-many: occupation repeats
            },
            "true": {("adult.native-country", "nations.nation"), ("adult.education", "schooling.level")},
            "decoys": {
                ("adult.age", "people.id"),
                ("adult.hours-per-week", "people.id"),
                ("adult.education-num", "people.id"),
                ("adult.occupation", "staff.occupation"),
            },
        }
    )
    tickets = every(nyc.select(["Unique Key", "Status"]), 3).rename_columns(["ticket", "state"])
    out.append(
        {
            "name": "nyc311, agencies and follow-ups",
            "tables": {
                "requests": nyc.select(["Unique Key", "Agency", "Complaint Type", "Created Date", "Borough"]),
                "agencies": dimension(nyc, "Agency", {"Agency": "code", "Agency Name": "title"}),
                "followups": tickets,
            },
            "true": {("requests.Agency", "agencies.code"), ("followups.ticket", "requests.Unique Key")},
            "decoys": set(),
        }
    )
    return out


# --------------------------------------------------------------------------- the rules compared


def name_only(tables: dict[str, pa.Table], profiles: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """The former rule: names that match (or table singular + column), the one side at least as varied,
    at least half of the distinct values found, by an exact SELECT DISTINCT containment query."""
    cols = [(p["name"], c) for p in profiles for c in p["columns"]]
    found = set()
    cursor = sandbox_cursor(tables)
    try:
        for lt, lc in cols:
            for rt, rc in cols:
                if lt == rt or lc["type"] != rc["type"] or not relationships.names_match(lt, lc["name"], rt, rc["name"]):
                    continue
                if (rc.get("distinct") or 0) < (lc.get("distinct") or 0):
                    continue
                total, matched = _containment(cursor, lt, lc["name"], rt, rc["name"])
                if total > 1 and matched / total >= 0.5:
                    found.add((f"{lt}.{lc['name']}", f"{rt}.{rc['name']}"))
    finally:
        cursor.close()
    return found


def _containment(cursor, lt: str, lc: str, rt: str, rc: str) -> tuple[int, int]:
    sql = (
        f"WITH l AS (SELECT DISTINCT {quote_ident(lc)} AS v FROM {quote_ident(lt)} WHERE {quote_ident(lc)} IS NOT NULL), "
        f"r AS (SELECT DISTINCT {quote_ident(rc)} AS v FROM {quote_ident(rt)}) SELECT count(*), count(r.v) FROM l LEFT JOIN r ON l.v = r.v"
    )
    return cursor.execute(sql).fetchall()[0]


def score(proposed: set[tuple[str, str]], truth: set[tuple[str, str]], decoys: set[tuple[str, str]]) -> tuple[int, int, int]:
    """(right, wrong, decoys hit), a pair matching either way round."""

    def either(pair: tuple[str, str], pairs: set[tuple[str, str]]) -> bool:
        return pair in pairs or (pair[1], pair[0]) in pairs

    right = sum(either(p, truth) for p in proposed)
    return right, len(proposed) - right, sum(either(p, decoys) for p in proposed)


def quality() -> None:
    rows, totals = [], {"containment": [0, 0, 0], "name only": [0, 0, 0]}
    truths = 0
    for case in labelled_sets():
        tables = case["tables"]
        profiles = [profile.profile_table(name, t) for name, t in tables.items()]
        ours = {(r["left"], r["right"]) for r in relationships.candidates(tables, profiles)}
        theirs = name_only(tables, profiles)
        truths += len(case["true"])
        for label, proposed in (("containment", ours), ("name only", theirs)):
            right, wrong, decoys = score(proposed, case["true"], case["decoys"])
            totals[label] = [a + b for a, b in zip(totals[label], (right, wrong, decoys))]
            missed = len(case["true"]) - right
            rows.append([case["name"], label, len(case["true"]), right, wrong, decoys, missed])
    print("Join candidates on labelled table sets from ../shared/datasets")
    print_table(["set", "rule", "true joins", "found right", "wrong", "decoys proposed", "missed"], rows)
    print()
    summary = []
    for label, (right, wrong, decoys) in totals.items():
        precision = right / (right + wrong) if right + wrong else 0.0
        summary.append([label, f"{precision:.2f}", f"{right / truths:.2f}", decoys])
    print_table(["rule", "precision", "recall", "false positives on decoys"], summary)
    print(GOAL)


# --------------------------------------------------------------------------- cost at 1M rows


def cost(runs: int) -> None:
    store = read("global_superstore.csv")
    rows = 1_000_000
    big = store.take(pa.array([i % store.num_rows for i in range(rows)]))
    tables = {
        "orders": big.select(["Customer ID", "Product ID", "Quantity", "Order Date", "Sales"]).rename_columns(["buyer", "item", "qty", "day", "sales"]),
        "clients": dimension(store, "Customer ID", {"Customer ID": "client", "Segment": "segment"}),
        "products": dimension(store, "Product ID", {"Product ID": "sku", "Category": "category"}),
        "ledger": pa.table({"entry": pc.add(pa.array(range(rows)), 1), "note": pa.array([f"n{i % 13}" for i in range(rows)])}),  # pyright: ignore[reportAttributeAccessIssue]  # pc has no stubs
    }
    profiles = [profile.profile_table(name, t) for name, t in tables.items()]
    pairs = relationships.pairs_to_check(tables, profiles)
    cursor = sandbox_cursor(tables)

    def baseline() -> set[tuple[str, str]]:
        found = set()
        for many, one in pairs:
            (lt, lc), (rt, rc) = relationships.split(many), relationships.split(one)
            total, matched = _containment(cursor, lt, lc, rt, rc)
            if total and matched / total >= relationships.MIN_CONTAINMENT:
                found.add((many, one))
        return found

    def ours() -> set[tuple[str, str]]:
        return {(r["left"], r["right"]) for r in relationships.candidates(tables, profiles)}

    try:
        agree = ours() == baseline()
        ours_s, base_s = median_time(ours, runs), median_time(baseline, runs)
    finally:
        cursor.close()
    print()
    print(f"Cost on {rows:,} orders against customers, products and a {rows:,}-row ledger ({len(pairs)} pairs looked at; medians of {runs})")
    print_table(
        ["method", "seconds", "ratio to baseline", "same pairs found"],
        [
            ["relationships.candidates (sample + one pass)", ours_s, f"{ours_s / base_s:.2f}x", "yes" if agree else "NO"],
            ["SELECT DISTINCT containment per pair (baseline)", base_s, "1.00x", "-"],
        ],
    )
    print(COST_GOAL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    quality()
    cost(max(5, args.runs))


if __name__ == "__main__":
    main()
