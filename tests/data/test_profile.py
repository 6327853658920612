"""Profiles: statistics, relationships, determinism and the token budget, on the public datasets."""

from __future__ import annotations

import datetime as dt
import os
import re
from pathlib import Path

import pyarrow as pa
import pytest

from lib.core import tokens
from lib.data import profile
from lib.data.connectors.base import FetchContext, fetch
from lib.memory import schemas, workspace
from lib.memory.yamlio import parse

PAPER_TOKENS = {"gdp.csv": 339, "adult.csv": 922, "global_superstore_sample1000.csv": 1584, "nyc311_sample5000.csv": 4486}


@pytest.fixture
def load(dataset, monkeypatch):
    """load('adult.csv') -> the public dataset as the CSV connector reads it (skips when it is missing)."""

    def read(name: str) -> pa.Table:
        path = dataset(name)
        monkeypatch.setenv("DASHMEM_DATA_DIRS", str(path.parent))
        return fetch({"name": "t", "type": "csv", "path": str(path)}, FetchContext(workspace_path=Path(".")))

    return read


def column(prof: dict, name: str) -> dict:
    return next(c for c in prof["tables"][0]["columns"] if c["name"] == name)


def test_statistics_match_an_independent_computation(load):
    table = load("adult.csv")
    prof = profile.build({"adult": table})
    frame = table.to_pandas()
    age = column(prof, "age")
    assert age["type"] == "BIGINT" and age["role"] == "measure"
    assert (age["min"], age["max"]) == (frame.age.min(), frame.age.max())
    assert age["mean"] == pytest.approx(frame.age.mean(), rel=1e-5)
    assert age["std"] == pytest.approx(frame.age.std(), rel=1e-5)
    assert age["quantiles"]["p50"] == pytest.approx(frame.age.quantile(0.5))
    assert age["distinct"] == frame.age.nunique()
    workclass = column(prof, "workclass")
    counts = frame.workclass.value_counts()
    assert workclass["top"][0] == {"value": counts.index[0], "count": int(counts.iloc[0])}
    assert workclass["other_count"] == len(frame) - sum(t["count"] for t in workclass["top"])
    assert workclass["rare"][-1] == counts.index[-1]
    assert prof["tables"][0]["rows"] == 32561


def test_dates_get_a_range_and_role_time():
    prof = profile.build(
        {
            "gates": fetch(
                {"name": "gates", "type": "csv", "path": "data/gates.csv", "columns": {"day": "DATE"}},
                FetchContext(workspace_path=Path(__file__).parents[2] / "workspaces" / "supply-chain-weekly"),
            )
        }
    )
    day = column(prof, "day")
    assert (day["type"], day["role"], day["min"], day["max"]) == ("DATE", "time", "2026-11-16", "2026-11-22")


def test_null_share_and_empty_columns():
    table = pa.table({"a": [1, None, 3, None], "b": pa.array([None] * 4, pa.string())})
    prof = profile.build({"t": table})
    assert column(prof, "a")["null_share"] == 0.5
    assert column(prof, "b")["null_share"] == 1.0 and column(prof, "b")["distinct"] == 0


def test_sample_values_can_be_switched_off():
    table = pa.table({"email": [f"person{i}@example.com" for i in range(100)], "plan": ["gold", "free"] * 50, "spend": list(range(100))})
    prof = profile.build({"customers": table}, [{"name": "customers", "type": "csv", "path": "x", "sample_values": False}])
    text = profile.text(prof)
    assert "example.com" not in text and "gold" not in text  # no values of text columns at all
    assert "spend BIGINT" in text and "mean 49.5" in text  # statistics stay
    on = profile.text(profile.build({"customers": table}))
    assert "example.com" in on and "gold" in on


def test_profile_is_deterministic_and_valid(load):
    table = load("global_superstore_sample1000.csv")
    first = workspace.render("profile", profile.build({"orders": table}))
    second = workspace.render("profile", profile.build({"orders": table}))
    assert first == second
    assert schemas.validate_document("profile", parse(first), "profile.yaml") == []
    assert re.fullmatch(r"[0-9a-f]{12}", profile.build({"orders": table})["data_version"])  # a fingerprint, not a timestamp
    assert "created" not in first and "20" + "26-" not in first.split("data_version")[-1]


def test_relationships_found_from_names_and_values():
    orders = pa.table({"order_id": list(range(100)), "customer_id": [i % 20 for i in range(100)], "amount": [1.0] * 100})
    customers = pa.table({"id": list(range(25)), "name": [f"c{i}" for i in range(25)]})
    prof = profile.build({"orders": orders, "customers": customers})
    rels = prof["relationships"]
    assert {"left": "orders.customer_id", "right": "customers.id", "overlap": 1.0, "evidence": "name and values"} in rels
    text = profile.text(prof)
    assert "orders.customer_id -> customers.id (100% of values match)" in text


def test_a_one_to_one_key_is_reported_once():
    accounts = pa.table({"account_code": [f"A{i:03d}" for i in range(40)], "owner": [f"o{i}" for i in range(40)]})
    settings = pa.table({"account_code": [f"A{i:03d}" for i in range(40)], "tier": ["gold"] * 40})
    rels = profile.build({"accounts": accounts, "settings": settings}).get("relationships") or []
    assert [(r["left"], r["right"]) for r in rels] == [("accounts.account_code", "settings.account_code")]


@pytest.mark.parametrize("name,paper", PAPER_TOKENS.items())
def test_profile_tokens_at_or_below_the_papers(name, paper, load):
    prof = profile.build({"t": load(name)})
    assert tokens.estimate(profile.text(prof)) <= paper


@pytest.mark.parametrize("name", ["nyc311_sample5000.csv", "nyc311_api_1000.csv"])
def test_wide_tables_fit_1000_tokens_naming_every_column(name, load):
    table = load(name)
    prof = profile.build({"t": table})
    text = profile.text(prof, budget=1000)
    assert tokens.estimate(text) <= 1000
    for field in table.schema:
        assert field.name in text
    full = profile.text(prof)
    assert tokens.estimate(full) > 1000  # the budget really did drop detail


def test_budget_keeps_referenced_columns_longest(load):
    table = load("nyc311_sample5000.csv")
    prof = profile.build({"t": table})
    text = profile.text(prof, budget=1500, keep={"Complaint Type"})
    line = next(l for l in text.splitlines() if l.strip().startswith("Complaint Type"))
    other = next(l for l in text.splitlines() if l.strip().startswith("Descriptor"))
    assert "rare " in line and "rare " not in other  # rare values go first, but not for the kept column


# --------------------------------------------------------------------------- wide tables, batches, the budget ceiling


def wide(rows: int, cols: int, seed: int = 0) -> pa.Table:
    from bench.profile import synthetic_wide

    return synthetic_wide(rows, cols, seed)


@pytest.mark.slow
def test_a_1000_column_table_profiles_within_the_default_memory_limit_after_another():
    """The issue's failure: DuckDB ran out of its default 4 GB on a 1,000-column x 20k-row table
    (one GROUPING SETS query over ~500 text columns), and at 200 columns in a process that had profiled before."""
    import subprocess
    import sys

    script = (
        "from bench.profile import synthetic_wide\n"
        "from lib.data import profile\n"
        "profile.build({'first': synthetic_wide(20_000, 200, seed=1)})\n"
        "prof = profile.build({'wide': synthetic_wide(20_000, 1000)})\n"
        "cols = prof['tables'][0]['columns']\n"
        "print(len(cols), sum('top' in c for c in cols), sum('quantiles' in c for c in cols))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "DASHMEM_QUERY_MEMORY"}  # the default limit
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-c", script], cwd=root, env={**env, "PYTHONPATH": str(root)}, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    columns, with_top, with_quantiles = map(int, proc.stdout.split())
    assert columns == 1000 and with_top > 200 and with_quantiles == 300


def test_batches_threads_and_routing_do_not_change_the_profile(monkeypatch):
    """Column batches, the counting threads and the sampled routing decide how, never what."""
    tables = {"t": wide(6_000, 60, seed=5), "u": wide(300, 12, seed=6)}
    expected = workspace.render("profile", profile.build(tables))
    monkeypatch.setattr(profile, "SCAN_MAX_COLUMNS", 1)
    monkeypatch.setattr(profile, "COUNT_HELD_VALUES", 1)
    monkeypatch.setattr(profile, "THREADS_MIN_ROWS", 0)
    monkeypatch.setattr(profile, "COUNT_THREADS", 2)  # a pool of counting threads, whatever the machine's cores
    monkeypatch.setattr(profile, "ROUTE_SAMPLE_ROWS", 16)  # routes some text columns to HyperLogLog first
    monkeypatch.setattr(profile, "ROUTE_MIN_ROWS", 0)
    assert workspace.render("profile", profile.build(tables)) == expected
    monkeypatch.setattr(profile, "ROUTE_SAMPLE_ROWS", 10**9)  # every text column counted by Arrow
    monkeypatch.setattr(profile, "COUNT_THREADS", 1)
    assert workspace.render("profile", profile.build(tables)) == expected


def test_odd_text_types_profile_like_plain_text():
    """Dictionary-encoded and large strings (counted by DuckDB and Arrow respectively) give the profile plain strings give."""
    plain = wide(3_000, 6, seed=7)
    odd = pa.table(
        {
            name: (col.dictionary_encode() if i % 2 else col.cast(pa.large_string())) if pa.types.is_string(col.type) else col
            for i, (name, col) in enumerate(zip(plain.column_names, plain.columns))
        }
    )
    assert profile.build({"t": odd}) == profile.build({"t": plain})


def test_dictionary_encoded_text_is_routed_and_counted_like_plain_text(monkeypatch):
    """Dictionary columns (as a loader may keep repeating text) go through the sampled routing and
    Arrow's counting on their indices, and still give exactly the profile plain strings give."""
    plain = wide(6_000, 30, seed=11)
    encoded = pa.table({name: col.dictionary_encode() if pa.types.is_string(col.type) else col for name, col in zip(plain.column_names, plain.columns)})
    assert any(pa.types.is_dictionary(t) for t in encoded.schema.types)
    monkeypatch.setattr(profile, "ROUTE_SAMPLE_ROWS", 64)  # 6,000 rows > 8 x 64: the routing samples
    monkeypatch.setattr(profile, "ROUTE_MIN_ROWS", 0)
    monkeypatch.setattr(profile, "THREADS_MIN_ROWS", 0)
    assert profile.build({"t": encoded}) == profile.build({"t": plain})


def chunked(table: pa.Table, sizes: list[int]) -> pa.Table:
    """The table cut into chunks of these sizes (the rest in a last one), as a snapshot read back holds it."""
    parts, start = [], 0
    for size in sizes + [table.num_rows]:
        parts.append(table.slice(start, size))
        start += size
    return pa.concat_tables(parts)


@pytest.mark.parametrize("sampled", [False, True])
def test_number_statistics_and_distinct_counts_from_arrow_match_duckdb(monkeypatch, sampled):
    """min/max, mean, std and quantiles of int and float columns come from Arrow and numpy, and (up to 100k
    rows) distinct counts from Arrow: the profile is the one DuckDB's aggregates give, with nulls, -0.0 beside
    0.0, NaN (left to DuckDB), an all-null column, int64 values whose sum would overflow, uneven chunks,
    exact quantiles (integers spanning a few values a row counted value by value), and (`sampled`) quantiles of an
    evenly spaced sample."""
    import math

    rows = 5_000
    if sampled:
        monkeypatch.setattr(profile, "EXACT_QUANTILE_MAX_ROWS", 1_000)  # 5,000 rows count as a large table
        monkeypatch.setattr(profile, "QUANTILE_SAMPLE_ROWS", 700)  # a sample of every 7th row
    numbers = pa.table(
        {
            "qty": pa.array([None if i % 11 == 0 else (i * 7919) % 1000 - 300 for i in range(rows)], pa.int64()),
            "price": pa.array([None if i % 13 == 0 else -0.0 if i % 17 == 0 else round(math.sin(i) * 1e4, 2) for i in range(rows)]),
            "ratio": pa.array([(i % 97) / 7 for i in range(rows)], pa.float32()),
            "small": pa.array([i % 5 for i in range(rows)], pa.int8()),
            "spread": pa.array([None if i % 19 == 0 else (i * 7919) % 30011 - 5000 for i in range(rows)], pa.int32()),  # ~30 blocks of counts
            "huge": pa.array([10**15 + i * 1000 for i in range(rows)], pa.int64()),  # exact as doubles; their int64 sum would overflow
            "with_nan": pa.array([float("nan") if i == 77 else i / 3 for i in range(rows)]),
            "nothing": pa.nulls(rows, pa.float64()),
            "code": pa.array([f"c{i % 450}" for i in range(rows)]),
        }
    )
    table = chunked(numbers, [1, 999, 1234, 0, 2000])
    arrow_stats, by_arrow_columns = profile._arrow_number_stats, []

    def spy(values: pa.ChunkedArray):
        found = arrow_stats(values)
        by_arrow_columns.append(found is not None)
        return found

    monkeypatch.setattr(profile, "_arrow_number_stats", spy)
    monkeypatch.setattr(profile, "ROUTE_SAMPLE_ROWS", 10)  # code goes to the aggregates (and is counted after)
    monkeypatch.setattr(profile, "ROUTE_MIN_ROWS", 0)
    by_arrow = profile.build({"t": table})
    assert by_arrow_columns.count(True) == 7  # all but with_nan
    monkeypatch.setattr(profile, "_arrow_number_stats", lambda column: None)  # every statistic by DuckDB, as before
    monkeypatch.setattr(profile, "_arrow_distinct", lambda column: None)
    assert by_arrow == profile.build({"t": table})
    assert column(by_arrow, "qty")["quantiles"] and "quantiles" not in column(by_arrow, "nothing")
    assert column(by_arrow, "price")["distinct"] == len({v for v in numbers.column("price").to_pylist() if v is not None})  # -0.0 == 0.0


def test_dictionary_columns_are_counted_on_their_indices_like_plain_text(monkeypatch):
    """A dictionary shared by every chunk (as a snapshot holds one) is counted with its indices, null
    slots and unused entries left out; chunks with dictionaries of their own are counted by value."""
    rows = 4_000
    words = [None if i % 17 == 0 else f"w{(i * 31) % 300:03d}" for i in range(rows)]
    plain = pa.table({"shared": pa.array(words), "own": pa.array(words), "wide": pa.array([f"k{i % 2500}" for i in range(rows)])})
    dictionary = pa.array([f"w{j:03d}" for j in range(400)] + ["unused"])  # 100 entries no row uses
    lookup = {w: j for j, w in enumerate(dictionary.to_pylist())}

    def shared(part: list) -> pa.DictionaryArray:
        return pa.DictionaryArray.from_arrays(pa.array([None if w is None else lookup[w] for w in part], pa.int32()), dictionary)

    cuts = [(0, 1_500), (1_500, 1_501), (1_501, rows)]
    encoded = pa.table(
        {
            "shared": pa.chunked_array([shared(words[a:b]) for a, b in cuts]),
            "own": pa.chunked_array([pa.array(words[a:b]).dictionary_encode() for a, b in cuts]),
            "wide": pa.chunked_array([pa.array(plain.column("wide").to_pylist()[a:b]).dictionary_encode() for a, b in cuts]),
        }
    )
    assert profile._shared_dictionary(encoded.column("shared")) is not None
    assert profile._shared_dictionary(encoded.column("own")) is None
    monkeypatch.setattr(profile, "ROUTE_SAMPLE_ROWS", 64)  # 4,000 rows > 8 x 64: the routing samples
    monkeypatch.setattr(profile, "ROUTE_MIN_ROWS", 0)
    assert profile.build({"t": encoded}) == profile.build({"t": plain})


def test_date_ranges_and_boolean_counts_from_arrow_match_duckdb():
    """Dates' min/max (Arrow's min_max) are DuckDB's, and booleans' value counts (a sum) are the ones
    counting each value gives: with nulls, uneven chunks, an all-null column and a column of one value."""
    import duckdb

    rows = 3_000
    values = pa.table(
        {
            "day": pa.array([None if i % 7 == 0 else dt.date(2019, 1, 1) + dt.timedelta(days=(i * 7919) % 2000) for i in range(rows)], pa.date32()),
            "no_day": pa.nulls(rows, pa.date32()),
            "flag": pa.array([None if i % 5 == 0 else i % 3 == 0 for i in range(rows)]),
            "always": pa.array([True] * rows),
            "no_flag": pa.nulls(rows, pa.bool_()),
        }
    )
    table = chunked(values, [1, 999, 0, 1500])
    prof = profile.build({"t": table})
    con = duckdb.connect()
    con.register("v", table)
    [(low, high)] = con.execute("SELECT min(day), max(day) FROM v").fetchall()
    con.close()
    assert (column(prof, "day")["min"], column(prof, "day")["max"]) == (low.isoformat(), high.isoformat())
    assert "min" not in column(prof, "no_day") and column(prof, "no_day")["distinct"] == 0
    flags = values.column("flag").to_pylist()
    expected = sorted(((v, flags.count(v)) for v in (False, True)), key=lambda vc: -vc[1])
    assert [(t["value"], t["count"]) for t in column(prof, "flag")["top"]] == expected
    assert column(prof, "flag")["distinct"] == 2 and column(prof, "flag")["other_count"] == 0
    assert column(prof, "always")["top"] == [{"value": True, "count": rows}] and column(prof, "always")["distinct"] == 1
    assert "top" not in column(prof, "no_flag") and column(prof, "no_flag")["distinct"] == 0


def test_strided_rows_are_the_rows_a_take_gives():
    values = pa.chunked_array([list(range(0, 7)), list(range(7, 20)), [], list(range(20, 33))])
    for step, count in [(3, 5), (3, 100), (1, 4), (5, 7), (4, 1), (40, 3)]:
        expected = values.take(pa.array(list(range(0, 33))[0 : step * count : step]))
        assert profile._strided(values, step, count).to_pylist() == expected.to_pylist(), (step, count)


_WIDE_PROFILES: dict[int, dict] = {}


def wide_profile(cols: int) -> dict:
    if cols not in _WIDE_PROFILES:
        _WIDE_PROFILES[cols] = profile.build({"t": wide(300, cols), "other": wide(40, 6, seed=3)})
    return _WIDE_PROFILES[cols]


@pytest.mark.parametrize("cols", [1, 5, 44, 200, pytest.param(1000, marks=pytest.mark.slow)])
def test_the_budget_is_a_hard_ceiling(cols):
    prof = wide_profile(cols)
    budgets = list(range(0, 41)) + [50, 75, 100, 150, 250, 400, 600, 1000, 1500, 2500, 4000, 10_000, 100_000]
    keeps = ((), {"t.text_0000"}, {"amount_0004", "other.text_0001"})
    for n, budget in enumerate(budgets):
        # Every budget with every kept set; at 1,000 columns (a quarter of a second a rendering) each budget with one
        # of them in turn, so each set still meets small, middle and large budgets.
        for keep in keeps if cols < 1000 else (keeps[n % len(keeps)],):
            rendered = profile.text(prof, budget=budget, keep=keep)
            assert tokens.estimate(rendered) <= budget, (cols, budget, keep)
    assert profile.text(prof, budget=0) == ""  # not even "2 tables" fits
    assert profile.text(prof, budget=tokens.estimate("2 tables\n")) == "2 tables\n"
    full = profile.text(prof)
    assert profile.text(prof, budget=tokens.estimate(full)) == full


def test_past_the_names_only_form_columns_then_tables_are_left_out():
    prof = wide_profile(200)
    text = profile.text(prof, budget=1000)  # the case: 1,193 tokens before
    assert tokens.estimate(text) <= 1000
    assert "more columns" in text and "text_0000 VARCHAR" in text
    kept = profile.text(prof, budget=300, keep={"t.day_0198"})
    assert "day_0198 DATE" in kept and tokens.estimate(kept) <= 300  # a kept column is left out last
    tables = profile.text(prof, budget=25)
    assert tables.startswith("table ") and tokens.estimate(tables) <= 25


# --------------------------------------------------------------------------- distinct counts


@pytest.mark.parametrize("rows", [120, 500, 5_000, 100_000])
def test_distinct_counts_are_exact_up_to_100k_rows(rows):
    # 120 rows showed "121 distinct" and "125 distinct" when every count was HyperLogLog's estimate.
    table = pa.table(
        {
            "price": pa.array([i * 1.5 for i in range(rows)]),
            "id": pa.array([f"k{i}" for i in range(rows)]),
            "site": pa.array([f"s{i % 60}" for i in range(rows)]),
            "when": pa.array([dt.datetime(2026, 1, 1) + dt.timedelta(minutes=i // 2) for i in range(rows)]),
        }
    )
    distinct = {c["name"]: c["distinct"] for c in profile.profile_table("t", table)["columns"]}
    assert distinct == {"price": rows, "id": rows, "site": 60, "when": rows // 2}


def test_an_estimated_distinct_count_never_exceeds_the_values(monkeypatch):
    monkeypatch.setattr(profile, "EXACT_DISTINCT_MAX_ROWS", 100)  # estimate as on a large table
    table = pa.table({"price": pa.array([i * 1.5 for i in range(500)] + [None] * 20)})  # HyperLogLog says 509 here
    [column] = profile.profile_table("t", table)["columns"]
    assert column["distinct"] <= 500


NO_PANDAS = r"""
import runpy, sys
sys.argv = ["lib", "profile", sys.argv[1]]
try:
    runpy.run_module("lib", run_name="__main__")
finally:
    print("pandas loaded" if "pandas" in sys.modules else "no pandas", file=sys.stderr)
"""


def test_the_command_line_profile_never_loads_pandas(tmp_path):
    """Arrow's `to_numpy` imports pandas on its first call, 0.3 s of every `profile` (and `compose`) command; the
    profile reads number columns as numpy views of their buffers instead, so the command never loads pandas."""
    import shutil
    import subprocess
    import sys

    from ..conftest import ROOT, WORKSPACES

    folder = tmp_path / "supply-chain-weekly"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", folder)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DASHMEM_CACHE_DIR": str(tmp_path / "cache")}
    assert subprocess.run([sys.executable, "-m", "lib", "refresh", str(folder)], env=env, capture_output=True, timeout=120).returncode == 0
    out = subprocess.run([sys.executable, "-c", NO_PANDAS, str(folder)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert "table gates" in out.stdout, out.stdout + out.stderr
    assert out.stderr.strip().endswith("no pandas"), out.stderr
