"""The Sources page's profile charts (lib/artifacts/profile_charts.py) over the demo workspace's real data:
the histogram queries run in the warehouse's DuckDB, the charts are read as the Vega-Lite they send, each
checked against Vega-Lite's schema."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from lib.artifacts import profile_charts
from lib.data import profile
from lib.memory import workspace


def columns(folder) -> dict[str, dict]:
    prof = workspace.load(folder)[0].data["profile"]
    return {c["name"]: c for c in prof["tables"][0]["columns"]}


def chart_of(wh, name: str, column: dict) -> tuple[dict, pa.Table | None]:
    sql = profile_charts.histogram_query(name, column)
    rows = wh.query(sql, max_rows=50).table if sql else None
    chart = profile_charts.column_chart(column, rows)
    assert chart is not None
    return chart.inline(), rows


@pytest.mark.parametrize("name", ["target", "actual", "attainment"])
def test_a_number_histogram_draws_each_bin_as_wide_as_it_is(supply, name):
    """Issue #31, 7: the bars were drawn at `bin: binned` without an end, zero pixels wide."""
    folder, wh = supply
    spec, rows = chart_of(wh, "gates", columns(folder)[name])
    assert rows is not None
    assert spec["mark"]["type"] == "bar" and spec["mark"]["orient"] == "vertical"  # bars standing on the axis, not flat lines
    assert spec["encoding"]["x"]["field"] == "bin_start" and spec["encoding"]["x2"]["field"] == "bin_end"
    starts, ends = rows.column("bin_start").to_pylist(), rows.column("bin_end").to_pylist()
    assert all(end > start for start, end in zip(starts, ends))
    assert all(ends[i] <= starts[i + 1] for i in range(len(starts) - 1))  # bins side by side, none overlapping
    values = [r[name] for r in wh.query(f"SELECT {name} FROM gates").table.to_pylist()]
    assert sum(rows.column("rows").to_pylist()) == len(values)
    assert starts[0] == pytest.approx(min(values)) and ends[-1] == pytest.approx(max(values))


def test_a_date_histogram_has_a_bar_per_day_and_ticks_on_days(supply):
    folder, wh = supply
    spec, rows = chart_of(wh, "gates", columns(folder)["day"])
    assert rows is not None
    days = sorted({r["day"] for r in wh.query("SELECT DISTINCT day FROM gates").table.to_pylist()})
    assert rows.column("bin_start").to_pylist() == days  # whole days, one bar each, not 20 bins of 7 h
    assert all(end - start == dt.timedelta(days=1) for start, end in zip(rows.column("bin_start").to_pylist(), rows.column("bin_end").to_pylist()))
    axis = spec["encoding"]["x"]["axis"]
    assert spec["encoding"]["x"]["type"] == "temporal" and spec["encoding"]["x2"]["field"] == "bin_end"
    assert axis["tickCount"]["interval"] == "day" and "%H" not in axis["format"] and "%I" not in axis["format"]  # no "12 PM"


@pytest.mark.parametrize(
    "span_days,interval",
    [(6, "day"), (40, "day"), (200, "month"), (3000, "year")],
)
def test_date_ticks_fall_on_days_months_or_years_by_the_span(span_days, interval):
    import duckdb

    con = duckdb.connect()
    con.execute(f"CREATE TABLE t AS SELECT DATE '2020-01-01' + CAST(i AS INTEGER) AS d FROM range(0, {span_days + 1}) r(i)")
    column = {"name": "d", "type": "DATE"}
    rows = con.sql(profile.histogram_sql("t", "d", "time", days=True)).to_arrow_table()
    assert rows.num_rows <= profile_charts.BINS and sum(rows.column("rows").to_pylist()) == span_days + 1
    chart = profile_charts.column_chart(column, rows)
    assert chart is not None
    axis = chart.spec["encoding"]["x"]["axis"]
    assert axis["tickCount"]["interval"] == interval
    assert (span_days / axis["tickCount"]["step"]) / {"day": 1, "month": 30.44, "year": 365.25}[interval] <= 8.5  # about eight ticks at most


@pytest.mark.parametrize("name", ["site", "gate", "week"])
def test_frequent_values_are_horizontal_bars_with_a_row_per_label(supply, name):
    """Issue #31, 7: "Supply" drawn over "Orders": 60 px for the bars and the axis under them left the bars none."""
    folder, wh = supply
    column = columns(folder)[name]
    spec, _ = chart_of(wh, "gates", column)
    shown = column["top"][: profile_charts.TOP]
    assert spec["encoding"]["y"]["type"] == "nominal" and spec["encoding"]["x"]["type"] == "quantitative"  # labels beside their bars
    assert spec["height"] == profile_charts.STEP * len(shown) and profile_charts.STEP >= 20  # a row for each label, whatever their number
    assert spec["autosize"]["type"] == "fit-x"  # the height is the bars', not the bars' and the axis's
    assert spec["encoding"]["y"]["axis"]["labelLimit"] > 0
    values = next(iter(spec["datasets"].values()))
    assert [v["value"] for v in values] == [str(t["value"]) for t in shown] and [v["rows"] for v in values] == [t["count"] for t in shown]


def test_every_chart_names_its_column_and_the_range_of_its_data(supply):
    folder, wh = supply
    found = {name: chart_of(wh, "gates", column)[0]["description"] for name, column in columns(folder).items()}
    day = found["day"]
    assert day.startswith("day: histogram of 126 values") and "from 2026-11-16 to 2026-11-22" in day
    targets = [r["target"] for r in wh.query("SELECT target FROM gates").table.to_pylist()]
    assert found["target"].startswith("target: histogram") and f"from {min(targets):,} to {max(targets):,}" in found["target"]
    assert found["site"].startswith("site: bar chart of its 6 most frequent values") and "(21 rows)" in found["site"]


@pytest.mark.parametrize(
    "null_share,share,words",
    [
        (0, 1.0, "100% filled"),
        (0.0, 1.0, "100% filled"),
        (0.001, 0.999, "over 99% filled"),
        (0.25, 0.75, "75% filled"),
        (0.999, 0.001, "under 1% filled"),
        (1, 0.0, "0% filled"),
    ],
)
def test_filled_is_a_share_from_0_to_1_and_says_when_it_is_not_all(null_share, share, words):
    """A full column's share was the int 1, which Streamlit's progress bar reads as 1 %."""
    got, said = profile_charts.filled({"null_share": null_share, "distinct": 7})
    assert isinstance(got, float) and got == pytest.approx(share)
    assert said == f"{words} · 7 distinct"


def test_a_column_of_one_value_gets_one_bar_around_it():
    import duckdb

    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT 5 AS n FROM range(3)")
    rows = con.sql(profile.histogram_sql("t", "n", "number")).to_arrow_table()
    assert rows.num_rows == 1 and rows.column("bin_start")[0].as_py() <= 5 < rows.column("bin_end")[0].as_py()
    assert rows.column("rows").to_pylist() == [3]
    assert profile_charts.column_chart({"name": "n", "type": "INTEGER"}, rows) is not None
