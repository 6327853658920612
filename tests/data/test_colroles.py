"""Column meaning: roles and aggregations from names and values, checked on a labelled list of real columns."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from lib.data import colroles, coltypes, profile

LABELLED = Path(__file__).parents[1] / "data" / "column_meanings.yaml"
CASES = yaml.safe_load(LABELLED.read_text(encoding="utf-8"))


def column_table(case: dict) -> pa.Table:
    """The case's values as a one-column table of its DuckDB type, as a source would deliver them."""
    kind = case["type"]
    values = case["values"]
    if kind == "DATE":
        array = pa.array([dt.date.fromisoformat(v) for v in values], pa.date32())
    elif kind == "TIMESTAMP":
        array = pa.array([dt.datetime.fromisoformat(v) for v in values], pa.timestamp("us"))
    else:
        array = pa.array(values, coltypes.arrow_type(kind))
    return pa.table({case["name"]: array})


def profiled(case: dict) -> dict:
    return profile.profile_table("t", column_table(case))["columns"][0]


def test_the_labelled_list_is_big_enough_and_mostly_real():
    real = [c for c in CASES if c["from"].startswith("../shared/datasets/")]
    assert len(CASES) >= 60 and len(real) >= 40
    assert {c["expected"] for c in CASES} == {"sum", "mean", "median", "none"}


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_each_labelled_column_is_aggregated_as_labelled(case):
    column = profiled(case)
    assert (column.get("aggregate") or "none") == case["expected"], f"{case['name']} ({case['from']}): {column}"
    if "role" in case:
        assert column["role"] == case["role"]
    if case["expected"] == "none":
        assert column["role"] != "measure"


def test_accuracy_on_the_labelled_list_is_total():
    hits = sum((profiled(c).get("aggregate") or "none") == c["expected"] for c in CASES)
    assert hits == len(CASES), f"{hits}/{len(CASES)}"


@pytest.mark.parametrize("name", ["Row ID", "row_id", "rowId", "RowID", "ROW-ID", "row id"])
def test_identifiers_are_found_however_the_name_is_written(name):
    rows = list(range(500, 0, -1))  # unique, not 1..n in order: only the name can tell
    column = profile.profile_table("t", pa.table({name: pa.array(rows, pa.int64())}))["columns"][0]
    assert column["role"] == "identifier" and "aggregate" not in column


def test_a_text_identifier_that_repeats_is_still_an_identifier():
    # Global Superstore's "Order ID": orders have several lines, so it is not unique.
    ids = [f"CA-2014-{100000 + i // 3}" for i in range(1000)]
    column = profile.profile_table("t", pa.table({"Order ID": ids}))["columns"][0]
    assert column["role"] == "identifier"


def test_words_split_cases_separators_and_units():
    assert colroles.words("Unit Price (USD)") == (["unit", "price"], ["usd"])
    assert colroles.words("avgSessionDuration") == (["avg", "session", "duration"], [])
    assert colroles.words("hours-per-week")[0] == ["hours", "per", "week"]
    assert colroles.words("Humidity %") == (["humidity"], ["%"])
    assert colroles.words("miles/gallon") == (["miles", "gallon"], ["per"])
    assert colroles.words("Package")[0] == ["package"]  # no 'age' inside


@pytest.mark.parametrize("name", ["", "()", "%%%", "(((", "名前", "x" * 5000, "\x00", "Year (", ")Year"])
def test_hostile_names_get_a_role_not_a_crash(name):
    meaning = colroles.classify(name, "DOUBLE", {"nonnull": 3, "distinct": 3, "min": 1.5, "max": 2.5, "mean": 2.0})
    assert meaning.role in ("measure", "dimension", "time", "identifier", "text")


@pytest.mark.parametrize(
    "stats",
    [{}, {"min": "2014-01-01", "max": "2014-02-01"}, {"min": float("nan"), "max": float("inf"), "mean": None}, {"quantiles": "p50"}, {"quantiles": [None] * 5}],
)
def test_odd_figures_are_read_as_unknown(stats):
    assert colroles.classify("score", "DOUBLE", stats) == colroles.Meaning("measure", "mean")


def test_the_profile_records_the_aggregate_and_the_model_sees_it():
    table = pa.table({"Sales": [10.0, 20.0, 5.5] * 10, "Discount": [0.1, 0.0, 0.2] * 10, "Region": ["N", "S", "E"] * 10})
    built = profile.build({"orders": table})
    columns = {c["name"]: c for c in built["tables"][0]["columns"]}
    assert (columns["Sales"]["aggregate"], columns["Discount"]["aggregate"]) == ("sum", "mean")
    assert "aggregate" not in columns["Region"]
    text = profile.text(built)
    assert "Sales DOUBLE measure (additive, sum)" in text and "Discount DOUBLE measure (intensive, mean)" in text


def test_a_profile_with_a_wrong_aggregate_is_refused_naming_the_field(tmp_path):
    from lib.memory import workspace

    folder = tmp_path / "ws"
    workspace.save(folder, workspace.blank("Cars", "alice", "2026-11-30"))
    bad = {"tables": [{"name": "cars", "rows": 3, "columns": [{"name": "mpg", "type": "DOUBLE", "role": "measure", "aggregate": "total"}]}]}
    (folder / "profile.yaml").write_text(yaml.safe_dump(bad), encoding="utf-8")
    _, diags = workspace.load(folder)
    problems = [d for d in diags if (d.file or "").endswith("profile.yaml")]
    assert [(d.level, d.field, d.line, d.allowed) for d in problems] == [("error", "tables[0].columns[0].aggregate", 3, "one of sum, mean, median")]


def test_a_row_number_past_the_exact_distinct_limit_is_still_an_identifier():
    """Above 100,000 rows the distinct count is a HyperLogLog estimate (195,166 for 200,000 ids 1..200,000):
    the column was averaged as a measure, and so proposed as neither a key nor ignored by the auto-draft."""
    import pyarrow as pa

    from lib.data import profile

    table = pa.table({"cid": pa.array(range(1, 200_001)), "score": pa.array([i % 997 * 1.5 for i in range(200_000)])})
    columns = {c["name"]: c for c in profile.profile_table("customers", table)["columns"]}
    assert columns["cid"]["distinct"] != 200_000  # estimated
    assert columns["cid"]["role"] == "identifier" and columns["score"]["role"] == "measure"
