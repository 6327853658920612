"""The component registry (lib/artifacts/components/): one module per kind, covering exactly the kinds the schema allows.

Each kind renders a small example over real DuckDB queries (the sandboxed
query workers), exports it as HTML, and passes every check.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from lib.artifacts import checks, export
from lib.artifacts.components import KINDS, ComponentKind, kind_of
from lib.artifacts.render import QueryCache, render
from lib.memory import schemas, workspace

from ..conftest import ROOT

SALES = pa.table(
    {
        "region": ["north", "south", "east"],
        "day": [dt.date(2026, 1, 1), dt.date(2026, 1, 2), dt.date(2026, 1, 3)],
        "amount": [120.5, 80.0, 42.25],
    }
)

# One small, schema-valid component per kind; a new kind needs an example here.
EXAMPLES = {
    "kpi": {
        "id": "total",
        "type": "kpi",
        "title": "Total sales",
        "query": "SELECT sum(amount) AS value, sum(amount) - 10 AS previous FROM sales",
        "compare_column": "previous",
        "format": ",.2f",
        "thresholds": [{"op": ">=", "value": 100, "color": "#2ca02c"}],
    },
    "chart": {
        "id": "by_region",
        "type": "chart",
        "title": "Sales by region",
        "query": "SELECT region, sum(amount) AS amount FROM sales GROUP BY 1",
        "mark": "bar",
        "encoding": {"x": {"field": "region", "type": "nominal"}, "y": {"field": "amount", "type": "quantitative"}},
    },
    "table": {
        "id": "detail",
        "type": "table",
        "title": "Detail",
        "query": "SELECT region, day, amount FROM sales ORDER BY amount DESC",
        "columns": {"amount": {"label": "Amount", "format": ",.2f", "thresholds": [{"op": "<", "value": 50, "color": "#d62728"}]}},
    },
    "text": {
        "id": "note",
        "type": "text",
        "title": "Leader",
        "markdown": "**{{top.region}}** leads with {{top.amount|,.2f}}.",
        "queries": {"top": "SELECT region, amount FROM sales ORDER BY amount DESC LIMIT 1"},
    },
}


def schema_kinds() -> list[str]:
    return schemas.load_schema("dashboard")["$defs"]["component"]["properties"]["type"]["enum"]


def test_the_registry_has_exactly_the_kinds_of_the_schema():
    assert sorted(KINDS) == sorted(schema_kinds())
    assert sorted(EXAMPLES) == sorted(KINDS)
    for name, kind in KINDS.items():
        assert isinstance(kind, ComponentKind) and kind.name == name
        # The kind's fields are the schema's, read from it.
        assert kind.spec_fields == schemas.load_schema("dashboard")["$defs"][name]["properties"]
        assert set(schemas.load_schema("dashboard")["$defs"][name].get("required", [])) <= set(EXAMPLES[name])


def test_kind_of_finds_a_spec_or_a_rendered_component():
    assert kind_of({"type": "chart"}) is KINDS["chart"]
    with pytest.raises(KeyError):
        kind_of({"type": "sparkline"})


def test_the_dashboard_page_draws_every_kind():
    from app_pages.dashboard_view import DRAW

    assert DRAW.keys() == KINDS.keys()


def test_lib_components_need_neither_streamlit_nor_altair():
    code = "import sys, lib.artifacts.components, lib.artifacts.render, lib.artifacts.checks, lib.artifacts.export; print('streamlit' in sys.modules, 'altair' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


@pytest.fixture(scope="module")
def rendered():
    files = {"dashboard": {"title": "Sales", "components": list(EXAMPLES.values())}}
    return render(files, {"sales": SALES}, "v1", cache=QueryCache())


def test_every_example_passes_every_check():
    ws = workspace.Workspace(Path("examples"), {"dashboard": {"title": "Sales", "components": list(EXAMPLES.values())}})
    assert checks.run(ws, {"sales": SALES}, "v1") == []


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_each_kind_renders_and_exports(rendered, name):
    comp = rendered.component(EXAMPLES[name]["id"])
    assert comp.error is None and comp.type == name and kind_of(comp) is KINDS[name]
    chart_specs: list[dict] = []
    body = KINDS[name].to_html(comp, chart_specs)
    if name == "kpi":
        assert comp.value == pytest.approx(242.75) and comp.color == "#2ca02c" and comp.delta_display and comp.status
        assert html.escape(comp.display) in body and "background: #2ca02c" in body and html.escape(comp.status) in body
    elif name == "chart":
        assert comp.vega["mark"]["type"] == "bar" and comp.chart is not None
        assert body == '<div class="chart" data-chart="0"></div>' and len(chart_specs) == 1
        values = next(iter(chart_specs[0]["datasets"].values()))
        assert sorted(v["region"] for v in values) == ["east", "north", "south"]
    elif name == "table":
        assert comp.shown.columns == ["region", "day", "Amount"] and len(comp.shown) == 3
        assert comp.cell_colors == {(2, "Amount"): "#d62728"} and comp.legend
        assert "<table>" in body and "background: #d62728" in body and 'class="number"' in body
    elif name == "text":
        assert comp.markdown == "**north** leads with 120.50."
        assert body == "<p><strong>north</strong> leads with 120.50.</p>"
    assert f'id="{comp.id}"' in export._component_html(comp, [])


def test_the_whole_example_exports_as_one_page(rendered):
    page = export.to_html(rendered)
    for spec in EXAMPLES.values():
        assert f'<section class="component {spec["type"]}" id="{spec["id"]}">' in page
    assert 'id="chart-specs"' in page


def test_a_failing_component_shows_its_error_in_place():
    broken = {**EXAMPLES["kpi"], "query": "SELECT nothing FROM sales"}
    result = render({"dashboard": {"title": "Sales", "components": [broken]}}, {"sales": SALES}, "v1", cache=QueryCache())
    comp = result.component("total")
    assert comp.error is not None and comp.error.startswith("query failed:")
    assert '<div class="error" role="alert">' in export._component_html(comp, [])


# --------------------------------------------------------------------------- built charts are kept while their query result is


def test_a_warm_rerender_reuses_the_built_chart_and_a_change_rebuilds_it():
    from lib.artifacts.components import chart

    files = {"dashboard": {"title": "Sales", "components": [EXAMPLES["chart"]]}}
    cache = QueryCache()
    first = render(files, {"sales": SALES}, "v1", cache=cache).component("by_region")
    builds = chart.BUILT.builds
    again = render(files, {"sales": SALES}, "v1", cache=cache).component("by_region")
    assert chart.BUILT.builds == builds, "a rerun on cached results built the chart again"
    assert again.chart is first.chart and again.vega == first.vega

    # What the chart shows changes: each of these builds it anew, and the result is what a fresh build gives.
    more = pa.table({"region": ["west"], "day": [dt.date(2026, 1, 4)], "amount": [7.0]})
    new_data = render(files, {"sales": pa.concat_tables([SALES, more])}, "v2", cache=cache).component("by_region")
    themed = render({"dashboard": {**files["dashboard"], "theme": {"primary": "#123456"}}}, {"sales": SALES}, "v1", cache=cache).component("by_region")
    retitled = {**EXAMPLES["chart"], "encoding": {**EXAMPLES["chart"]["encoding"], "y": {"field": "amount", "type": "quantitative", "title": "Sum"}}}
    relabelled = render({"dashboard": {"title": "Sales", "components": [retitled]}}, {"sales": SALES}, "v1", cache=cache).component("by_region")
    assert chart.BUILT.builds == builds + 3
    assert new_data.vega is not None and themed.vega is not None and first.vega is not None and relabelled.vega is not None
    assert "west" in {v["region"] for v in next(iter(new_data.vega["datasets"].values()))}
    assert themed.vega["mark"]["color"] == "#123456" and first.vega["mark"]["color"] != "#123456"
    assert relabelled.vega["encoding"]["y"]["title"] == "Sum"
    fresh = render(files, {"sales": SALES}, "v1", cache=QueryCache()).component("by_region")
    assert fresh.chart is not first.chart and fresh.vega == first.vega


def test_an_invalid_chart_is_not_kept_and_fails_every_time():
    bad = {**EXAMPLES["chart"], "encoding": {"x": {"field": "region", "type": "nominal"}, "y": {"field": "amount", "type": "bogus"}}}
    files = {"dashboard": {"title": "Sales", "components": [bad]}}
    cache = QueryCache()
    for _ in range(2):
        error = render(files, {"sales": SALES}, "v1", cache=cache).component("by_region").error
        assert error is not None and error.startswith("cannot render:")


def test_the_page_sends_the_charts_vega_lite_with_its_data_as_arrow_the_same_on_every_rerun():
    """The Dashboard page's element carries the chart's own spec (the export's, less the inlined rows) and its data as
    an Arrow dataset of the same rows, dates as the timestamps of their midnights; a rerun sends the same element."""
    from streamlit.testing.v1 import AppTest

    def script():
        import datetime as dt

        import pyarrow as pa
        import streamlit as st

        from app_pages import dashboard_view
        from lib.artifacts.render import QueryCache, render

        sales = pa.table({"day": [dt.date(2026, 1, 1), dt.date(2026, 1, 2)], "region": ["north", "south"], "amount": [1.5, 2.0]})
        spec = {
            "id": "c",
            "type": "chart",
            "title": "T",
            "query": "SELECT day, region, amount::DECIMAL(9, 2) AS amount FROM sales",
            "mark": "line",
            "encoding": {
                "x": {"field": "day", "type": "temporal"},
                "y": {"field": "amount"},
                "color": {"field": "region", "type": "nominal"},
            },
        }
        comp = render({"dashboard": {"title": "S", "components": [spec]}}, {"sales": sales}, "v1", cache=QueryCache()).component("c")
        st.session_state["vega"] = comp.vega
        dashboard_view._chart(comp)
        dashboard_view._chart(comp)

    at = AppTest.from_function(script, default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    charts = [e.proto for e in at.main if getattr(e, "type", "") == "arrow_vega_lite_chart" or e.proto.__class__.__name__ == "VegaLiteChart"]
    assert len(charts) == 2, [type(e) for e in at.main]
    assert charts[1] == charts[0]
    vega = at.session_state["vega"]
    [(name, rows)] = vega["datasets"].items()
    sent_spec = json.loads(charts[0].spec)
    assert sent_spec.pop("autosize") == {"type": "fit", "contains": "padding"}  # Streamlit's own, for width="stretch"
    assert sent_spec == {k: v for k, v in vega.items() if k != "datasets"}
    assert vega["encoding"]["y"]["type"] == "quantitative", "a decimal measure without a type is a number"
    [dataset] = charts[0].datasets
    sent = pa.ipc.open_stream(dataset.data.data).read_all()
    assert dataset.name == name and sent.schema.field("amount").type == pa.float64()
    assert sent.column("day").to_pylist() == [dt.datetime(2026, 1, 1), dt.datetime(2026, 1, 2)]
    assert [{**r, "day": r["day"].isoformat()} for r in sent.to_pylist()] == rows
    assert rows[0] == {"day": "2026-01-01T00:00:00", "region": "north", "amount": 1.5}


def test_inert_images_turns_every_markdown_image_into_text_and_leaves_links():
    from lib.artifacts.components.text import inert_images

    shown = inert_images("![a](http://x/p.png) [link](https://x) ![b][ref] !not")
    assert shown == "!\\[a](http://x/p.png) [link](https://x) !\\[b][ref] !not"


@pytest.mark.parametrize("everything", ["All", "(All)"])
def test_a_select_filter_tells_a_value_named_all_from_every_value(everything):
    """Streamlit keeps a choice by its label: an option shown as "All" would be taken for no filter at all."""
    from streamlit.testing.v1 import AppTest

    def script():
        import streamlit as st

        from app_pages import dashboard_view
        from lib.artifacts.render import FilterState

        values = st.session_state.setdefault("values", [])
        chosen = dashboard_view.filter_bar([FilterState("region", "select", "Region", values)], key=lambda i: f"f:{i}")
        st.text(repr(chosen))

    at = AppTest.from_function(script, default_timeout=60)
    at.session_state["values"] = [everything, "All ", "East"]
    at.run()
    (select,) = at.selectbox
    assert len(set(select.options)) == len(select.options), select.options
    for value in [everything, "All ", "East", None]:
        select.set_value(value).run()
        assert not at.exception, at.exception
        assert at.text[0].value == repr({"region": value})


def test_component_kinds_are_not_spelled_outside_components():
    """`kpi`, `chart`, `table`, `text` as a component's type are each kind's `NAME`, written once in its module:
    elsewhere a comparison with a spec's type (or a tuple of kinds) uses the names, so renaming or adding a kind
    is one module (comparisons of other things, such as a column family "text", are not a kind's type)."""
    import ast

    names = set(KINDS) - {"text"}  # "text" is also the model API's text block and a column family
    found = []
    for path in [*sorted((ROOT / "lib").rglob("*.py")), *sorted((ROOT / "app_pages").glob("*.py"))]:
        if path.is_relative_to(ROOT / "lib" / "artifacts" / "components"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Compare):
                continue
            sides = [node.left, *node.comparators]
            typed = any(
                (isinstance(s, ast.Attribute) and s.attr == "type")
                or (
                    isinstance(s, ast.Call)
                    and isinstance(s.func, ast.Attribute)
                    and s.func.attr == "get"
                    and s.args
                    and getattr(s.args[0], "value", None) == "type"
                )
                or (isinstance(s, ast.Subscript) and getattr(s.slice, "value", None) == "type")
                or (isinstance(s, ast.Name) and s.id == "kind")
                for s in sides
            )
            literal = [s.value for s in sides if isinstance(s, ast.Constant) and s.value in names]
            literal += [
                e.value for s in sides if isinstance(s, (ast.Tuple, ast.Set, ast.List)) for e in s.elts if isinstance(e, ast.Constant) and e.value in names
            ]
            if typed and literal:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {literal}")
    assert not found, found


# --------------------------------------------------------------------------- status shapes: direction x threshold

SUPPLY = [{"op": ">=", "value": 0.95, "color": "#2ca02c"}, {"op": "<", "value": 0.85, "color": "#d62728"}, {"op": ">=", "value": 0.85, "color": "#ff9f1c"}]
GDP = [{"op": "<", "value": 0, "color": "#d62728"}, {"op": ">=", "value": 0, "color": "#2ca02c"}]


def _t(*pairs: tuple[str, float]) -> list[dict]:
    return [{"op": op, "value": value, "color": "#777777"} for op, value in pairs]


@pytest.mark.parametrize(
    "thresholds,value,fmt,status",
    [
        (SUPPLY, 0.97, ".1%", "▲ at or above 95.0%"),
        (SUPPLY, 0.80, ".1%", "▼ below 85.0%"),
        (SUPPLY, 0.90, ".1%", "■ at or above 85.0% and below 95.0%"),  # amber is the band between, not a second "at or above"
        (GDP, -0.02, "+.1%", "▼ below 0.0%"),  # negative growth: down, not the first shape of the list (▲)
        (GDP, 0.03, "+.1%", "▲ at or above 0.0%"),
        (_t(("<=", 10), (">", 10)), 10, "d", "▼ at or below 10"),
        (_t((">", 10), ("<=", 10)), 11, "d", "▲ above 10"),
        (_t(("==", 0), (">", 0), ("<", 0)), 0, "d", "● equal to 0"),
        (_t(("==", 0), (">", 0), ("<", 0)), 3, "d", "▲ above 0"),
        (_t(("==", 0), (">", 0), ("<", 0)), -3, "d", "▼ below 0"),
        (_t((">", 100), (">", 50), (">", 0), ("<=", 0)), 75, "d", "■ above 50 and at or below 100"),
        (_t((">", 100), (">", 50), (">", 0), ("<=", 0)), 25, "d", "◆ above 0 and at or below 50"),  # a shape per band between
        (_t(("<", 10), ("<", 20), (">=", 20)), 15, "d", "■ at or above 10 and below 20"),
    ],
)
def test_the_status_shape_follows_the_thresholds_direction_and_the_words_its_band(thresholds, value, fmt, status):
    from lib.artifacts.components.base import threshold_status

    assert threshold_status(value, thresholds, fmt) == status


@pytest.mark.parametrize(
    "ops",
    [
        ((">=", 0.95), ("<", 0.85), (">=", 0.85)),
        (("<", 0), (">=", 0)),
        ((">", 5), ("<", -5), ("==", 0), (">=", -5)),
        (("<=", 1), ("<=", 2), ("<=", 3), (">", 3)),
        (("==", 2), (">=", 1), ("<", 1)),
    ],
)
def test_an_up_shape_marks_the_values_that_run_up_without_end_and_a_down_shape_those_that_run_down(ops):
    """Over a grid of values: a value marked ▲ has every larger value in its band (but for single values of
    their own, ●), one marked ▼ every smaller one, and no two bands share a shape."""
    from lib.artifacts.components.base import AT, DOWN, UP, threshold_marks, threshold_met

    thresholds = _t(*ops)
    grid = [x / 4 for x in range(-40, 41)]
    marks = threshold_marks(thresholds)
    # each value's (threshold met, its shape); every value of the grid meets one of these thresholds
    band: dict[float, tuple[int, str]] = {}
    for v in grid:
        met = threshold_met(v, thresholds)
        assert met is not None
        band[v] = (thresholds.index(met), marks[thresholds.index(met)])
    for v, (index, mark) in band.items():
        if mark == UP:
            assert all(band[w][0] == index or band[w][1] == AT for w in grid if w > v), (v, marks)
        if mark == DOWN:
            assert all(band[w][0] == index or band[w][1] == AT for w in grid if w < v), (v, marks)
    shown = [mark for _, mark in set(band.values())]
    assert len(shown) == len(set(shown)) and "" not in shown


def test_a_table_legend_says_each_band_once_in_the_thresholds_order():
    files = {
        "dashboard": {
            "title": "Sales",
            "components": [
                {
                    "id": "t",
                    "type": "table",
                    "title": "Regions",
                    "query": "SELECT region, amount / 100 AS share FROM sales ORDER BY amount",
                    "columns": {"share": {"label": "Share", "format": ".0%", "thresholds": SUPPLY}},
                }
            ],
        }
    }
    table = render(files, {"sales": SALES}, "v1", cache=QueryCache()).component("t")
    assert table.error is None
    # 42 %, 80 %, 120 %: below 85 %, below 85 %, at or above 95 %
    assert table.shown.column("Share") == ["▼ 42%", "▼ 80%", "▲ 120%"]
    assert table.legend == {"▲": "Share at or above 95%", "▼": "Share below 85%"}


def test_a_chart_checked_once_is_known_valid_over_new_data_and_an_invalid_one_is_checked_every_time(tmp_path, monkeypatch):
    from lib.artifacts.components import vegalite

    monkeypatch.setenv("DASHMEM_CACHE_DIR", str(tmp_path / "cache"))
    spec = {"data": {"name": "data-1"}, "mark": {"type": "bar"}, "encoding": {"x": {"field": "a", "type": "nominal"}}, "description": "A: 3 rows"}
    assert vegalite.problem(spec) is None
    checked = []
    real = vegalite._validator

    def counting():
        checked.append(1)
        return real()

    monkeypatch.setattr(vegalite, "_validator", counting)
    assert vegalite.problem({**spec, "data": {"name": "data-2"}, "description": "A: 4 rows"}) is None
    assert checked == [], "the same chart over new data was checked again"
    bad = {**spec, "encoding": {"x": {"field": "a", "type": "bogus"}}}
    assert vegalite.problem(bad) and vegalite.problem(bad) and len(checked) == 2
    assert "encoding.x" in (vegalite.problem(bad) or "")


@pytest.mark.parametrize("alias", ["avg. amount", "amount[eur]"])
def test_a_column_named_with_a_dot_or_brackets_is_drawn_and_titled_as_named(alias):
    """Vega-Lite reads "avg. amount" as the member " amount" of "avg": the chart drew no bars at all, in the
    page and in the export. Drawn here by Vega itself (vl-convert), as a browser draws it."""
    import re

    import vl_convert

    spec = {
        "id": "c",
        "type": "chart",
        "title": "T",
        "query": f'SELECT region, amount AS "{alias}" FROM sales',
        "mark": "bar",
        "encoding": {"x": {"field": "region", "type": "nominal"}, "y": {"field": alias, "type": "quantitative"}, "tooltip": [{"field": alias}]},
    }
    comp = render({"dashboard": {"title": "S", "components": [spec]}}, {"sales": SALES}, "v1", cache=QueryCache()).component("c")
    assert comp.error is None and comp.vega is not None
    svg = vl_convert.vegalite_to_svg({**comp.vega, "width": 300})
    assert len(re.findall(r'aria-roledescription="bar"', svg)) == SALES.num_rows
    assert f"Y-axis titled '{alias}'" in html.unescape(svg)  # the column's name, not its escaped field
    [rows] = comp.vega["datasets"].values()
    assert all(alias in row for row in rows)  # the data keeps the column's own name
