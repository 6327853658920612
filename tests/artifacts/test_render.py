"""The renderer: every component kind, inspected (values, Altair objects, colours), filters and caching."""

from __future__ import annotations

import shutil
import threading
from typing import cast

import pandas as pd
import pyarrow as pa
import pytest

from lib.artifacts.components.base import STATUS_MARKS
from lib.artifacts.render import QueryCache, render
from lib.data.refresh import refresh
from lib.data.snapshots import Warehouse
from lib.memory import workspace
from lib.roles.access import OPERATOR

from ..conftest import WORKSPACES


@pytest.fixture
def supply(tmp_path):
    folder = tmp_path / "supply-chain-weekly"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", folder)
    wh = Warehouse(tmp_path / "cache")
    assert refresh(folder, wh, user=OPERATOR).ok
    return folder, wh


def draw(folder, wh, filters=None, cache=None):
    ws, _ = workspace.load(folder)
    return render(ws.data, wh.tables(), wh.current().id, filters or {}, cache=cache or QueryCache())


def frame(folder, week="this") -> pd.DataFrame:
    path = folder / "data" / ("gates.csv" if week == "this" else "next_week/gates.csv")
    return pd.read_csv(path)


def test_kpi_value_colour_and_delta(supply):
    folder, wh = supply
    df = frame(folder)
    r = draw(folder, wh)
    kpi = r.component("kpi_attainment")
    expected = df.actual.sum() / df.target.sum()
    assert kpi.value == pytest.approx(expected)
    assert kpi.display == f"{expected * 100:.1f}%"
    assert kpi.color == ("#2ca02c" if expected >= 0.95 else "#ff9f1c" if expected >= 0.85 else "#d62728")
    volume = r.component("kpi_volume")
    assert volume.value == df.actual.sum() and volume.compare == df.target.sum()
    # The delta says what it is a difference from: the compare column's name, or the spec's compare_label.
    assert volume.delta_display == f"{(df.actual.sum() - df.target.sum()) / df.target.sum() * 100:+.1f}%".replace("-", "−") + " vs target"
    missed = r.component("kpi_gates_missed")
    per = cast(pd.DataFrame, df.groupby(["site", "gate"]).sum(numeric_only=True))  # pandas' own types: any of its results
    assert missed.value == int(((per.actual / per.target) < 0.95).sum())


def chart_rows(comp) -> list[dict]:
    """The rows a rendered chart draws, as its Vega-Lite spec inlines them."""
    assert comp.vega is not None, comp.error
    [rows] = comp.vega["datasets"].values()
    assert comp.vega["data"] == {"name": next(iter(comp.vega["datasets"]))}
    return rows


def test_chart_is_vega_lite_with_the_query_data_and_gate_colours(supply):
    folder, wh = supply
    df = frame(folder)
    comp = draw(folder, wh).component("by_gate")
    spec = comp.vega
    assert spec is not None, comp.error
    assert spec["$schema"].startswith("https://vega.github.io/schema/vega-lite/v")
    assert spec["mark"]["type"] == "bar"
    assert spec["encoding"]["x"]["field"] == "gate" and spec["encoding"]["y"]["field"] == "attainment"
    assert spec["encoding"]["color"]["scale"] == {"domain": ["Supply", "Orders", "Process"], "range": ["#1f77b4", "#ff7f0e", "#9467bd"]}
    assert spec["config"]["background"] == "#ffffff"
    values = {row["gate"]: row["attainment"] for row in chart_rows(comp)}
    per = cast(pd.DataFrame, df.groupby("gate").sum(numeric_only=True))
    assert values == pytest.approx((per.actual / per.target).to_dict())
    # the page sends the same spec, its data as the Arrow table of the same rows
    sent = comp.chart.streamlit_spec()
    [data] = sent.pop("datasets").values()
    table = pa.ipc.open_stream(data).read_all()
    assert sent == {k: v for k, v in spec.items() if k != "datasets"} and table.to_pylist() == chart_rows(comp)


def test_threshold_colours_on_a_chart(supply):
    folder, wh = supply
    comp = draw(folder, wh).component("by_site")
    for row in chart_rows(comp):
        attainment, colour = row["attainment"], row["__color"]
        assert colour == ("#2ca02c" if attainment >= 0.95 else "#d62728" if attainment < 0.85 else "#ff9f1c")
    assert comp.vega is not None and comp.vega["encoding"]["color"]["scale"] is None  # colours are the values themselves


def test_table_formats_and_cell_colours(supply):
    folder, wh = supply
    table = draw(folder, wh).component("site_gate")
    assert table.shown.columns == ["Site", "Gate", "Target", "Actual", "Attainment"]
    df = frame(folder)
    per = cast(pd.DataFrame, df.groupby(["site", "gate"]).sum(numeric_only=True)).reset_index()
    per["att"] = per.actual / per.target
    worst = per.sort_values("att").iloc[0]
    first = dict(zip(table.shown.columns, table.shown.rows[0]))
    assert (first["Site"], first["Gate"]) == (worst.site, worst.gate)
    assert first["Target"] == f"{worst.target:,}"
    # The status shows as a shape beside the number, explained in the legend: never by colour alone.
    mark, number = first["Attainment"].split(" ")
    assert number == f"{worst.att * 100:.1f}%" and mark in STATUS_MARKS
    # Amber is the band between 85 % and 95 %: its words say both ends, its shape neither up nor down.
    assert (mark, table.legend[mark]) == (("▼", "Attainment below 85.0%") if worst.att < 0.85 else ("■", "Attainment at or above 85.0% and below 95.0%"))
    assert table.cell_colors[(0, "Attainment")] == ("#d62728" if worst.att < 0.85 else "#ff9f1c")
    assert len(table.shown) == 18


def test_text_placeholders_follow_the_data(supply):
    folder, wh = supply
    text = draw(folder, wh).component("insight").markdown
    df = frame(folder)
    per = cast(pd.DataFrame, df.groupby(["site", "gate"]).sum(numeric_only=True))
    worst_site, worst_gate = (per.actual / per.target).idxmin()
    assert "Week **2026-W47**" in text
    assert f"**{worst_site} {worst_gate}**" in text
    assert "{{" not in text


def test_a_kpi_delta_names_what_it_is_compared_with(supply):
    folder, wh = supply
    ws, _ = workspace.load(folder)
    volume = next(c for c in ws.data["dashboard"]["components"] if c["id"] == "kpi_volume")
    volume["compare_label"] = "this week's target"
    workspace.save(folder, {"dashboard": ws.data["dashboard"]})
    shown = draw(folder, wh).component("kpi_volume").delta_display
    assert shown.endswith("% vs this week's target") and shown[0] in "+−"


def test_text_says_1_site_and_6_sites(supply):
    """Issue #31, 14: "across 1 sites" with one site chosen; a placeholder's noun agrees with its number."""
    folder, wh = supply
    df = frame(folder)
    assert f"across {df.site.nunique()} sites." in draw(folder, wh).component("insight").markdown
    assert "across 1 site." in draw(folder, wh, {"site": ["Lyon"]}).component("insight").markdown


def test_each_chart_describes_its_data_range_in_its_own_format(supply):
    """The text alternative (Vega-Embed's aria-label): the title, the measure's low and high as the chart shows
    them (the tooltip's .1%, not 0.9453) with their category, and a time axis's first and last day."""
    folder, wh = supply
    df = frame(folder)
    r = draw(folder, wh)
    per_gate = cast(pd.DataFrame, df.groupby("gate").sum(numeric_only=True))
    att = (per_gate.actual / per_gate.target).sort_values()
    by_gate, daily = ((r.component(c).vega or {})["description"] for c in ("by_gate", "daily"))
    assert by_gate.startswith("Attainment by gate: bar chart of 3 rows")
    assert f"Attainment from {att.iloc[0] * 100:.1f}% ({att.index[0]}) to {att.iloc[-1] * 100:.1f}% ({att.index[-1]})" in by_gate
    assert f"Day from {df.day.min()} to {df.day.max()}" in daily and "00:00" not in daily


def test_next_week_changes_numbers_and_text_without_touching_the_spec(supply):
    folder, wh = supply
    spec = (folder / "dashboard.yaml").read_bytes()
    before = draw(folder, wh)
    shutil.copy(folder / "data" / "next_week" / "gates.csv", folder / "data" / "gates.csv")
    assert refresh(folder, wh, user=OPERATOR).ok
    after = draw(folder, wh)
    assert (folder / "dashboard.yaml").read_bytes() == spec
    assert after.component("kpi_attainment").display != before.component("kpi_attainment").display
    assert after.component("insight").markdown != before.component("insight").markdown
    assert "Week **2026-W48**" in after.component("insight").markdown
    df = frame(folder, "next")
    assert after.component("kpi_attainment").value == pytest.approx(df.actual.sum() / df.target.sum())


def test_multiselect_filter_is_bound_as_a_parameter(supply):
    folder, wh = supply
    df = frame(folder)
    r = draw(folder, wh, {"site": ["Lyon", "Porto"]})
    subset = df[df.site.isin(["Lyon", "Porto"])]
    assert r.component("kpi_attainment").value == pytest.approx(subset.actual.sum() / subset.target.sum())
    assert r.filters[0].options == sorted(df.site.unique())
    hostile = draw(folder, wh, {"site": ["Lyon') OR 1=1 --"]})
    assert hostile.component("kpi_attainment").value is None  # no site has that name: bound, not pasted


def test_number_range_filter(tmp_path):
    folder = tmp_path / "gdp-explorer"
    shutil.copytree(WORKSPACES / "gdp-explorer", folder)
    wh = Warehouse(tmp_path / "cache")
    assert refresh(folder, wh, user=OPERATOR).ok
    r = draw(folder, wh, {"year": (2000, 2010)})
    years = [row["year"] for row in chart_rows(r.component("world_trend"))]
    assert min(years) == 2000 and max(years) == 2010
    assert r.filters[0].bounds == (1960, 2023)
    assert draw(folder, wh).component("kpi_latest_year").display == "2023"


def test_results_are_cached_per_data_version(supply):
    folder, wh = supply
    cache = QueryCache()
    first = draw(folder, wh, cache=cache)
    assert first.queries_run == 12  # one per component, one per text query, one for the filter options
    again = draw(folder, wh, cache=cache)
    assert again.queries_run == 0
    shutil.copy(folder / "data" / "next_week" / "gates.csv", folder / "data" / "gates.csv")
    assert refresh(folder, wh, user=OPERATOR).ok
    assert draw(folder, wh, cache=cache).queries_run == 12


def test_a_failing_component_does_not_take_the_others_down(supply):
    folder, wh = supply
    ws, _ = workspace.load(folder)
    ws.data["dashboard"]["components"][1]["query"] = "SELECT nope FROM gates"
    r = render(ws.data, wh.tables(), wh.current().id, cache=QueryCache())
    error = r.component("kpi_volume").error
    assert error is not None and error.startswith("query failed:")
    assert r.component("kpi_attainment").error is None and r.component("kpi_attainment").display


def test_independent_components_query_at_the_same_time_and_keep_their_places(supply, monkeypatch):
    """A render does not wait for one component's query before starting the next one's: two queries meet inside
    the worker pool at once (a barrier two must reach together; one after the other, the first would time out)."""
    from lib.artifacts import render as render_module
    from lib.data import query_worker

    folder, wh = supply
    monkeypatch.setattr(render_module.os, "cpu_count", lambda: 2)  # the same on any machine: two at a time
    both = threading.Barrier(2, timeout=20)
    met: list[bool] = []
    ask = query_worker._Pool.ask

    def meeting(self, request, deadline_s):
        if request["kind"] == "query" and threading.current_thread().name.startswith("render") and not met:  # a component's, not the filters' options
            both.wait()  # BrokenBarrierError, and the component's error, if no second query arrives meanwhile
            met.append(True)
        return ask(self, request, deadline_s)

    monkeypatch.setattr(query_worker._Pool, "ask", meeting)
    r = draw(folder, wh)
    assert met and not both.broken
    assert not [c.id for row in r.rows for c in row if c.error], "every component rendered"
    assert [[c.id for c in row] for row in r.rows] == [[c.id for c in row] for row in draw(folder, wh).rows]
    assert r.component("kpi_volume").display and r.component("daily").vega


def test_one_core_renders_one_component_after_another(supply, monkeypatch):
    from lib.artifacts import render as render_module

    monkeypatch.setattr(render_module.os, "cpu_count", lambda: 1)
    monkeypatch.setattr(render_module, "ThreadPoolExecutor", None)  # would fail if a pool were made
    folder, wh = supply
    assert not [c.id for row in draw(folder, wh).rows for c in row if c.error]


def test_layout_rows_and_widths(supply):
    folder, wh = supply
    r = draw(folder, wh)
    assert [[(c.id, c.width) for c in row] for row in r.rows] == [
        [("kpi_attainment", 1), ("kpi_volume", 1), ("kpi_gates_missed", 1)],
        [("by_gate", 1), ("daily", 2)],
        [("by_site", 2), ("insight", 1)],
        [("site_gate", 1)],
    ]


def test_charts_have_a_text_alternative_and_kpis_say_their_status_in_words(supply):
    folder, wh = supply
    rendered = draw(folder, wh)
    for comp in rendered.components:
        if comp.type == "chart":
            assert comp.vega is not None
            description = comp.vega["description"]
            assert description.startswith(f"{comp.spec['title']}: {comp.spec['mark']} chart of ")
    by_gate = rendered.component("by_gate")
    assert by_gate.vega is not None and " from " in by_gate.vega["description"] and "(" in by_gate.vega["description"]
    kpi = rendered.component("kpi_attainment")
    assert kpi.color and kpi.status.split(" ", 1)[1] in ("at or above 95.0%", "below 85.0%", "at or above 85.0%")


def test_cell_text_keeps_wcag_aa_contrast_on_every_threshold_colour():
    from lib.core.formats import contrast_ratio, readable_text_on

    for colour in ("#2ca02c", "#d62728", "#ff9f1c", "#1f77b4", "#ffdd57", "#111111"):
        assert contrast_ratio(readable_text_on(colour), colour) >= 4.5
