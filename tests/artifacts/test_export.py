"""Offline export: one standalone HTML file that loads nothing from the network, and a PNG per chart."""

from __future__ import annotations

import datetime as dt
import html
import json
import re
import struct
from html.parser import HTMLParser
from pathlib import Path

import pytest

from lib.artifacts import dashboard_export, export
from lib.artifacts.components.table import legend_text
from lib.artifacts.components.text import markdown_to_html
from lib.artifacts.render import Rendered, render
from lib.core.diagnostics import ValidationFailed
from lib.core.formats import contrast_ratio
from lib.data.snapshots import Warehouse
from lib.memory import workspace
from lib.roles.access import OPERATOR
from tests.helpers import current_id

from ..conftest import ROOT

DEMOS = ("gdp-explorer", "supply-chain-weekly")
CHROMIUM = Path("/usr/bin/chromium")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class PageResources(HTMLParser):
    """The URLs a page would load (<script src>, <link href>) and the contents of its <script> elements."""

    def __init__(self, text: str):
        super().__init__()
        self.urls: list[str] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._open_script: tuple[dict[str, str | None], list[str]] | None = None
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "script":
            self.urls.append(attrs.get("src") or "")
            self._open_script = (attrs, [])
        elif tag == "link":
            self.urls.append(attrs.get("href") or "")

    def handle_data(self, data):
        if self._open_script is not None:
            self._open_script[1].append(data)

    def handle_endtag(self, tag):
        if tag == "script" and self._open_script is not None:
            attrs, chunks = self._open_script
            self.scripts.append((attrs, "".join(chunks)))
            self._open_script = None

    @property
    def code(self) -> list[str]:
        """Scripts the browser runs (JSON data blocks are not run)."""
        return [text for attrs, text in self.scripts if attrs.get("type") in (None, "", "text/javascript", "module")]

    @property
    def chart_specs(self) -> list[dict]:
        [specs] = [json.loads(text) for attrs, text in self.scripts if attrs.get("id") == "chart-specs"]
        return specs


def as_json(value):
    """A query value as the chart data carries it: dates as ISO local midnight, like Altair's datetimes."""
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return f"{value.isoformat()}T00:00:00"
    return value


def export_demo(ws_path: Path, tmp_path: Path) -> tuple[Path, dict, Rendered]:
    """Export the workspace (loading its data on the way) and render it again to know what to expect."""
    warehouse = Warehouse(tmp_path / "cache")
    result = dashboard_export.export_workspace(ws_path, tmp_path / "out" / f"{ws_path.name}.html", None, warehouse, user=OPERATOR)
    ws, _ = workspace.load(ws_path)
    snapshot = warehouse.current()
    assert snapshot is not None
    return result["html"], result, render(ws.data, warehouse.tables(snapshot), snapshot.id)


@pytest.mark.parametrize("slug", DEMOS)
def test_html_is_standalone_and_carries_the_dashboard(slug, ws_copy, tmp_path):
    html_path, result, rendered = export_demo(ws_copy(slug), tmp_path)
    text = html_path.read_text(encoding="utf-8")
    page = PageResources(text)

    assert result["errors"] == [] and result["data_version"] in text
    assert page.urls and not any(re.search(r"https?://", url, re.IGNORECASE) for url in page.urls)
    assert len(page.code) == 1 and text.count(export.vega_bundle()) == 1
    assert html.escape(rendered.title) in text and html.escape(rendered.description) in text
    for comp in rendered.components:
        assert html.escape(comp.title) in text
    for kpi in (c for c in rendered.components if c.type == "kpi"):
        bar = f'<div class="kpi-bar" style="background: {kpi.color}"></div>' if kpi.color else ""
        assert kpi.display and f'{bar}<div class="kpi-value">{html.escape(kpi.display)}</div>' in text
    charts = [c for c in rendered.components if c.type == "chart"]
    assert len(page.chart_specs) == len(charts) == text.count("data-chart=")
    for chart, spec in zip(charts, page.chart_specs):  # the query result itself is inlined
        [inlined] = spec["datasets"].values()
        assert chart.result is not None
        queried = chart.result.table.to_pylist()
        assert len(inlined) == len(queried)
        for inlined_row, queried_row in zip(inlined, queried):
            assert {k: as_json(v) for k, v in queried_row.items()} == {k: inlined_row[k] for k in queried_row}


@pytest.mark.parametrize("slug", DEMOS)
def test_the_export_marks_each_status_with_the_apps_shape_and_words(slug, ws_copy, tmp_path):
    """Issue #31, 11: the export coloured the KPI without its status and left a table's legend out."""
    html_path, _, rendered = export_demo(ws_copy(slug), tmp_path)
    text = html_path.read_text(encoding="utf-8")
    statuses = [c for c in rendered.components if c.type == "kpi" and c.status]
    legends = [c for c in rendered.components if c.type == "table" and c.legend]
    assert statuses or legends
    for kpi in statuses:  # the Dashboard's caption under the card
        assert f'<div class="kpi-status">{html.escape(kpi.status)}</div>' in text
    for table in legends:  # the Dashboard's cells and the caption under the table
        assert f'<p class="note legend">{html.escape(legend_text(table))}</p>' in text
        marked = [v for row in table.shown.rows for v in row if str(v)[:1] in table.legend]
        assert marked and all(f">{html.escape(v)}</td>" in text for v in marked)


class Styled(HTMLParser):
    """Each element with a style attribute, as (its style's properties, the text inside it)."""

    VOID = {"br", "img", "meta", "hr", "input", "link"}

    def __init__(self, text: str):
        super().__init__()
        self.found: list[tuple[dict[str, str], str]] = []
        self._open: list[tuple[str, dict[str, str] | None, list[str]]] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        if tag in self.VOID:
            return
        style = dict(attrs).get("style")
        props = {k.strip(): v.strip() for k, _, v in (p.partition(":") for p in (style or "").split(";")) if v.strip()} if style else None
        self._open.append((tag, props, []))

    def handle_data(self, data):
        for _, _, texts in self._open:
            texts.append(data)

    def handle_endtag(self, tag):
        while self._open:
            open_tag, props, texts = self._open.pop()
            if props is not None:
                self.found.append((props, "".join(texts)))
            if open_tag == tag:
                break


@pytest.mark.parametrize("slug", DEMOS)
def test_text_on_every_coloured_place_of_the_export_has_a_contrast_of_at_least_4_5(slug, ws_copy, tmp_path):
    """WCAG AA for text: a status colour is a cell's background under black or white text, or a bar with no
    text on it; never the colour of the text itself (the KPI's green on white was 3:1, amber 2:1)."""
    html_path, _, rendered = export_demo(ws_copy(slug), tmp_path)
    text = html_path.read_text(encoding="utf-8").replace(export.vega_bundle(), "")
    background = str(rendered.theme["background"])
    coloured = 0
    for props, inner in Styled(text).found:
        if "color" in props:
            coloured += 1
            assert contrast_ratio(props["color"], props.get("background", background)) >= 4.5, (props, inner)
        elif re.fullmatch(r"#[0-9a-fA-F]{6}", props.get("background", "")):
            assert not inner.strip(), (props, inner)  # a coloured bar carries no text
    assert coloured  # the table's marked cells
    assert contrast_ratio(str(rendered.theme["text"]), background) >= 4.5


def test_spec_text_is_escaped_not_injected(ws_copy, tmp_path):
    ws_path = ws_copy("supply-chain-weekly")
    ws, _ = workspace.load(ws_path)
    dashboard = ws.data["dashboard"]
    dashboard["title"] = "<script>alert(1)</script>"
    dashboard["description"] = 'Tom & Jerry\'s "best" <img src=x onerror=alert(2)>'
    dashboard["components"][0]["title"] = "</section><script>alert(3)</script>"
    workspace.save(ws_path, {"dashboard": dashboard})

    html_path, _, _ = export_demo(ws_path, tmp_path)
    text = html_path.read_text(encoding="utf-8")
    page = PageResources(text)

    outside_bundle = text.replace(export.vega_bundle(), "")  # vega-embed's own code builds <img> tooltips
    assert "<script>alert(" not in outside_bundle and "<img" not in outside_bundle
    assert "<title>&lt;script&gt;alert(1)&lt;/script&gt;</title>" in text
    assert "<h1>&lt;script&gt;alert(1)&lt;/script&gt;</h1>" in text
    assert "Tom &amp; Jerry&#x27;s &quot;best&quot; &lt;img src=x onerror=alert(2)&gt;" in text
    assert "&lt;/section&gt;&lt;script&gt;alert(3)&lt;/script&gt;" in text
    assert len(page.code) == 1  # the bundle; nothing from the spec became a script


def test_tables_text_blocks_widths_and_errors(ws_copy, tmp_path):
    ws_path = ws_copy("supply-chain-weekly")
    ws, _ = workspace.load(ws_path)
    dashboard = ws.data["dashboard"]
    dashboard["components"] += [
        {
            "id": "lowest",
            "type": "table",
            "title": "Lowest attainment",
            "query": "SELECT site, gate, attainment FROM gates ORDER BY attainment, site, gate LIMIT 3",
            "columns": {"attainment": {"label": "Attainment", "format": ".1%", "thresholds": [{"op": "<", "value": 2, "color": "#d62728"}]}},
        },
        {
            "id": "summary",
            "type": "text",
            "title": "Summary",
            "markdown": "# This week\nLowest gate: **{{worst.gate}}** at *{{worst.attainment|.1%}}*.\n\n"
            "- plain <b>tags</b> stay text\n- [the data](https://example.com/gates?week=48&site=all)\n"
            "- [no scripts](javascript:alert(1))",
            "queries": {"worst": "SELECT gate, sum(actual) / sum(target) AS attainment FROM gates GROUP BY gate ORDER BY 2 LIMIT 1"},
        },
        {"id": "broken", "type": "kpi", "title": "Broken", "query": "SELECT no_such_column AS value FROM gates"},
    ]
    dashboard["layout"].append([{"id": "lowest", "width": 2}, "summary"])  # "broken" is unplaced: it follows
    workspace.save(ws_path, {"dashboard": dashboard})

    html_path, result, rendered = export_demo(ws_path, tmp_path)
    text = html_path.read_text(encoding="utf-8")

    assert 'style="grid-template-columns: minmax(0, 2fr) minmax(0, 1fr)"' in text
    table = rendered.component("lowest")
    assert '<th>site</th><th>gate</th><th class="number">Attainment</th>' in text
    for value in table.shown.column("Attainment"):
        assert f'<td class="number" style="background: #d62728; color: #ffffff">{value}</td>' in text
    assert "<h3>This week</h3>" in text and re.search(r"<strong>\w+</strong> at <em>[\d.]+%</em>", text)
    assert "<li>plain &lt;b&gt;tags&lt;/b&gt; stay text</li>" in text
    assert '<li><a href="https://example.com/gates?week=48&amp;site=all">the data</a></li>' in text
    assert "<li>[no scripts](javascript:alert(1))</li>" in text and 'href="javascript' not in text
    assert [cid for cid, _ in result["errors"]] == ["broken"]
    broken = re.search(r'<section class="component kpi" id="broken"><h2>Broken</h2><div class="error" role="alert">([^<]*)</div>', text)
    assert broken and "no_such_column" in broken.group(1)


def test_an_invalid_dashboard_is_refused_and_nothing_is_written(ws_copy, tmp_path):
    ws_path = ws_copy("gdp-explorer")
    (ws_path / "dashboard.yaml").write_text("title: Broken\ncomponents: []\n", encoding="utf-8")
    out = tmp_path / "out"
    with pytest.raises(ValidationFailed, match="dashboard.yaml"):
        dashboard_export.export_workspace(ws_path, out / "page.html", out / "png", Warehouse(tmp_path / "cache"), user=OPERATOR)
    assert not out.exists()


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("one\ntwo\n\nthree", "<p>one two</p>\n<p>three</p>"),
        ("## Sub\n- a *b*\n- **c**\nafter", "<h4>Sub</h4>\n<ul><li>a <em>b</em></li><li><strong>c</strong></li></ul>\n<p>after</p>"),
        ("2 * 3 * 4 & #tag", "<p>2 * 3 * 4 &amp; #tag</p>"),
        ("[x](mailto:a@b.c) [y](data:text/html,hi)", '<p><a href="mailto:a@b.c">x</a> [y](data:text/html,hi)</p>'),
    ],
)
def test_markdown_subset(markdown, expected):
    assert markdown_to_html(markdown) == expected


@pytest.mark.parametrize("slug", DEMOS)
def test_every_chart_gives_a_png(slug, ws_copy, tmp_path):
    ws_path = ws_copy(slug)
    result = dashboard_export.export_workspace(ws_path, None, tmp_path / "png", Warehouse(tmp_path / "cache"), user=OPERATOR)
    ws, _ = workspace.load(ws_path)
    charts = [c["id"] for c in ws.data["dashboard"]["components"] if c["type"] == "chart"]
    assert result["html"] is None and [p.name for p in result["pngs"]] == [f"{cid}.png" for cid in charts]
    for path in result["pngs"]:
        data = path.read_bytes()
        assert data.startswith(PNG_SIGNATURE) and data[12:16] == b"IHDR"
        width, height = struct.unpack(">II", data[16:24])
        assert width > 100 and height > 100
    assert not list((tmp_path / "png").glob(".*.tmp"))  # written atomically: no temp files left


@pytest.mark.slow  # starts a browser
@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no browser at {CHROMIUM}")
@pytest.mark.parametrize("slug", DEMOS)
def test_html_draws_its_charts_offline_in_a_browser(slug, ws_copy, tmp_path):
    from playwright.sync_api import sync_playwright

    html_path, _, rendered = export_demo(ws_copy(slug), tmp_path)
    charts = [c.id for c in rendered.components if c.type == "chart"]
    network: list[str] = []
    page_errors: list[str] = []
    screenshot = ROOT / "test-artifacts" / f"export-{slug}.png"
    screenshot.parent.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
        )
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.route(re.compile(r"^https?://"), lambda route: (network.append(route.request.url), route.abort()))
            page.on("pageerror", lambda error: page_errors.append(str(error)))
            page.goto(html_path.as_uri())
            for cid in charts:
                drawn = page.locator(f"#{cid} .vega-embed svg, #{cid} .vega-embed canvas")
                drawn.first.wait_for(timeout=20_000)
                assert drawn.count() >= 1
                box = drawn.first.bounding_box()
                assert box is not None and box["width"] > 100
            page.screenshot(path=str(screenshot), full_page=True)
        finally:
            browser.close()
    assert page_errors == [] and network == []
    assert screenshot.stat().st_size > 0


def test_the_footer_says_which_filters_the_export_used(tmp_path):
    import shutil

    from lib.artifacts.export import to_html
    from lib.artifacts.render import QueryCache, render
    from lib.data.refresh import refresh
    from lib.data.snapshots import Warehouse
    from lib.memory import workspace

    from ..conftest import WORKSPACES

    folder = tmp_path / "supply-chain-weekly"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", folder)
    wh = Warehouse(tmp_path / "cache")
    assert refresh(folder, wh, user=OPERATOR).ok
    ws, _ = workspace.load(folder)
    filtered = to_html(render(ws.data, wh.tables(), current_id(wh), {"site": ["Lyon", "Porto"]}, cache=QueryCache()))
    assert "filtered by Sites: Lyon, Porto" in filtered
    assert "no filters" in to_html(render(ws.data, wh.tables(), current_id(wh), {}, cache=QueryCache()))


# --------------------------------------------------------------------------- what changed, and data as of an earlier load


def three_loads(tmp_path: Path):
    """A workspace whose targets were loaded three times: 3,000, then 3,500, then 4,000 in all."""
    import pyarrow as pa

    folder = tmp_path / "ws"
    folder.mkdir()
    files = {
        "dashboard": {
            "title": "Targets",
            "components": [{"id": "target", "type": "kpi", "title": "Target", "query": "SELECT sum(target) AS value FROM targets", "format": ",d"}],
        }
    }
    wh = Warehouse(tmp_path / "cache")
    for first in (1000, 1500, 2000):
        wh.write_snapshot({"targets": pa.table({"target": [first, 2000]})})
    return folder, files, wh


def kpi_section(page: str, cid: str) -> str:
    section = re.search(rf'<section class="component kpi" id="{cid}">(.*?)</section>', page, re.S)
    assert section, f"no KPI {cid} in the page"
    return html.unescape(re.sub(r"<[^>]+>", " ", section.group(1)))


def test_the_export_shows_each_kpis_value_at_the_previous_load_as_the_page_does(tmp_path):
    from lib.artifacts.changes import compare_tables, previous_of
    from lib.artifacts.time_travel import open_as_of
    from lib.data.snapshots import loaded_at
    from lib.roles.access import User

    folder, files, wh = three_loads(tmp_path)
    viewer, meta = User("vera", app_role="viewer"), {"access": {"viewers": ["vera"]}}
    latest = open_as_of(wh, None, user=viewer, meta=meta)
    previous = previous_of(wh, latest.snapshot)
    changes = compare_tables(files, latest.snapshot, latest.tables, previous, wh.tables(previous), {}, workspace_path=folder)
    assert changes.was("target").startswith("was 3,500 (+500) on ")  # what the page shows beside the card
    page = export.to_html(latest.render(files, workspace_path=folder), changes, latest.as_of_note())
    section = kpi_section(page, "target")
    assert "4,000" in section and changes.was("target") in section
    assert f"Data as of the load of {loaded_at(latest.snapshot)}" in html.unescape(page) and "earlier load" not in page
    assert "was " not in kpi_section(export.to_html(latest.render(files, workspace_path=folder)), "target")  # none without changes

    # Time travel to the middle load: its figure, its own previous value, and the file says which load it is.
    middle = open_as_of(wh, wh.snapshots()[1].id, user=viewer, meta=meta)
    first = previous_of(middle.warehouse, middle.snapshot)
    assert first is not None
    changes = compare_tables(files, middle.snapshot, middle.tables, first, middle.warehouse.tables(first), {}, workspace_path=folder)
    page = html.unescape(export.to_html(middle.render(files, workspace_path=folder), changes, middle.as_of_note()))
    section = kpi_section(page, "target")
    assert "3,500" in section and "was 3,000 (+500) on " in section and "4,000" not in section
    assert f"Data as of the load of {loaded_at(middle.snapshot)}, an earlier load kept: everyone is served the load of {loaded_at(latest.snapshot)}" in page


def test_the_cli_export_says_which_load_and_what_each_kpi_was(ws_copy, tmp_path):
    import csv

    from lib.data.refresh import refresh
    from lib.data.snapshots import loaded_at

    folder = ws_copy("supply-chain-weekly")
    wh = Warehouse(tmp_path / "cache")
    assert refresh(folder, wh, user=OPERATOR).ok
    data = folder / "data" / "gates.csv"
    with data.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        r["actual"] = str(int(r["actual"]) + 10)
    with data.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert refresh(folder, wh, user=OPERATOR).ok
    out = tmp_path / "export.html"
    dashboard_export.export_workspace(folder, out, None, wh, user=OPERATOR)
    page = html.unescape(out.read_text(encoding="utf-8"))
    before = sum(int(r["actual"]) - 10 for r in rows)
    assert f"was {before:,} (" in kpi_section(page, "kpi_volume")
    snapshot = wh.current()
    assert snapshot is not None and f"Data as of the load of {loaded_at(snapshot)}" in page


def test_the_chart_bundle_is_built_once_per_machine_and_read_back_by_later_processes(tmp_path, monkeypatch):
    """Bundling Vega took most of a cron export (2 s of 4); the bundle is kept in the cache folder, named by the
    versions it was built from, and a later process reads it instead of building it."""
    monkeypatch.setenv("DASHMEM_CACHE_DIR", str(tmp_path / "cache"))
    export.vega_bundle.cache_clear()
    built = export.vega_bundle()
    (cached,) = (tmp_path / "cache" / "vega").glob("bundle-*.js")
    assert cached.read_text(encoding="utf-8") == built and "vega" in built and "</script" not in built.lower()
    cached.write_text("/* read back */", encoding="utf-8")  # a later process: the file, not a new build
    export.vega_bundle.cache_clear()
    assert export.vega_bundle() == "/* read back */"
    export.vega_bundle.cache_clear()


@pytest.mark.parametrize("slug", ["supply-chain-weekly", "gdp-explorer"])
def test_a_cron_export_imports_neither_altair_nor_pandas_and_checks_a_known_chart_from_the_cache(slug, ws_copy, tmp_path):
    """Altair and pandas cost a fresh `export --html` about 0.6 s of its 2 s: the charts are written as Vega-Lite
    from Arrow and the tables as text, so neither is imported. A chart checked against Vega-Lite's schema
    before is known valid from the cache: the second export loads neither jsonschema nor the schema."""
    import os
    import subprocess
    import sys

    folder = ws_copy(slug)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DASHMEM_CACHE_DIR": str(tmp_path / "cache")}

    def run(*args: str) -> subprocess.CompletedProcess:
        done = subprocess.run([sys.executable, "-X", "importtime", "-m", "lib", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr[-3000:]
        return done

    def imported(done: subprocess.CompletedProcess) -> set[str]:
        return {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:") and "|" in line}

    run("refresh", str(folder))
    pages = [tmp_path / "first.html", tmp_path / "second.html"]
    first, second = (run("export", str(folder), "--html", str(page)) for page in pages)
    assert not {"altair", "pandas"} & imported(first), sorted({"altair", "pandas"} & imported(first))
    assert "jsonschema" not in imported(second)
    found = [re.search(r'<script type="application/json" id="chart-specs">(.*?)</script>', p.read_text(encoding="utf-8"), re.S) for p in pages]
    specs = [json.loads(f[1]) for f in found if f is not None]
    assert len(specs) == 2 and specs[0] == specs[1] and specs[0] and all(spec["datasets"][spec["data"]["name"]] for spec in specs[0])


def test_a_cache_folder_that_cannot_be_written_still_gives_the_bundle(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("DASHMEM_CACHE_DIR", str(blocker))
    export.vega_bundle.cache_clear()
    try:
        assert "vega" in export.vega_bundle()
    finally:
        export.vega_bundle.cache_clear()


@pytest.mark.skipif(not Path("/usr/bin/chromium").is_file(), reason="Debian's chromium is not installed (apt-get install chromium)")
def test_the_cli_draws_the_whole_dashboard_as_one_picture_and_without_chromium_writes_nothing(ws_copy, tmp_path):
    import os
    import subprocess
    import sys

    folder = ws_copy("supply-chain-weekly")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DASHMEM_CACHE_DIR": str(tmp_path / "cache")}

    def run(*args: str, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "lib", "export", str(folder), *args], cwd=ROOT, env={**env, **extra}, capture_output=True, text=True, timeout=180
        )

    picture, page = tmp_path / "dash.png", tmp_path / "dash.html"
    missing = run("--picture", str(picture), "--html", str(page), DASHMEM_CHROMIUM=str(tmp_path / "no-chromium"))
    assert missing.returncode != 0 and "Traceback" not in missing.stderr
    assert "PNG export needs Chromium, and there is none at" in missing.stderr and not picture.exists() and not page.exists()
    drawn = run("--picture", str(picture))
    assert drawn.returncode == 0, drawn.stderr
    assert "(the dashboard as one PNG picture; data " in drawn.stdout
    data = picture.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert width == dashboard_export.PICTURE_WIDTH_PX and height > 1000  # the whole dashboard: KPIs, charts and the table
    refused = run("--picture", str(picture), "--report")
    assert refused.returncode != 0 and "--png and --picture write a dashboard's" in refused.stderr
