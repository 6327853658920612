"""Readable charts in a real browser (issue #31, 7 and 12): the Sources profile of the demo table, read from the
SVG Vega draws, and what a screen reader is told of the Dashboard's charts and buttons (Chromium's own
accessibility tree, through the DevTools protocol). Screenshots go to test-artifacts/."""

from __future__ import annotations

import re

from tests.helpers.browser import ARTIFACTS, BROWSER, choose_workspace, kpi_value, sign_in

pytestmark = BROWSER

# The words Material icons are drawn from: a button's name that reads one out was "info Explain expand_more".
ICON_WORDS = re.compile(r"\b(info|expand_more|expand_less|refresh|download|table_rows|check_circle|warning|error|history|compare_arrows|schedule)\b")


def accessible(page) -> list[tuple[str, str]]:
    """(role, name) of every node of the page's accessibility tree that is not ignored."""
    cdp = page.context.new_cdp_session(page)
    try:
        nodes = cdp.send("Accessibility.getFullAXTree")["nodes"]
    finally:
        cdp.detach()
    return [(n.get("role", {}).get("value", ""), n.get("name", {}).get("value", "")) for n in nodes if not n.get("ignored")]


def profile_charts(page) -> list[dict]:
    """Each chart of the Sources profile as drawn: its aria-label, its bars' boxes and its axis labels' boxes."""
    return page.evaluate(
        """() => Array.from(document.querySelectorAll('[data-testid=stVegaLiteChart]')).map((chart) => {
          const svg = chart.querySelector('svg');
          const box = (e) => { const r = e.getBoundingClientRect(); return {x: r.x, y: r.y, w: r.width, h: r.height}; };
          const axis = (name) => Array.from(svg.querySelectorAll(`[aria-label^="${name}"] text`))
            .filter((t) => t.textContent.trim()).map((t) => ({text: t.textContent, ...box(t)}));
          return {
            label: chart.getAttribute('aria-label') || '',
            bars: Array.from(svg.querySelectorAll('[aria-roledescription=bar]')).map(box),
            x: axis('X-axis'), y: axis('Y-axis'),
          };
        })"""
    )


def overlap(a: dict, b: dict) -> bool:
    return a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"] and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"]


def standing(bars: list[dict]) -> None:
    """Histogram bars rise from one baseline, the fullest most of the plot's height (not a line at each count)."""
    bottoms = {round(b["y"] + b["h"]) for b in bars}
    assert len(bottoms) <= 2 and max(b["h"] for b in bars) >= 60, bars[:3]  # the plot is 110 px high


def test_the_sources_profile_draws_every_bar_and_label_readably(server, page):
    url, _ = server
    sign_in(page, url, "sam", "sam-demo")
    page.goto(f"{url}/sources?ws=supply-chain-weekly")
    page.get_by_role("heading", name="Data profile").wait_for(timeout=60_000)
    charts = page.locator('[data-testid="stVegaLiteChart"] svg')
    charts.nth(6).wait_for(timeout=60_000)  # gates has seven columns, a chart each
    page.get_by_role("heading", name="Data profile").scroll_into_view_if_needed()
    page.wait_for_timeout(1000)
    page.screenshot(path=str(ARTIFACTS / "browser-sources-profile.png"))
    drawn = {c["label"].split(":")[0]: c for c in profile_charts(page)}
    assert set(drawn) == {"day", "week", "site", "gate", "target", "actual", "attainment"}, list(drawn)

    for name in ("target", "actual", "attainment"):  # numbers: a histogram whose bars have a width and stand on the axis
        chart = drawn[name]
        assert chart["label"].startswith(f"{name}: histogram of 126 values, from ") and " in " in chart["label"]
        assert len(chart["bars"]) >= 10 and all(b["w"] >= 3 for b in chart["bars"]), (name, chart["bars"][:3])
        standing(chart["bars"])

    day = drawn["day"]  # a date: a bar per day, ticks on days
    assert len(day["bars"]) == 7 and all(b["w"] >= 20 for b in day["bars"]), day["bars"]
    standing(day["bars"])
    assert day["x"] and not [t["text"] for t in day["x"] if re.search(r"\b(AM|PM)\b|\d:\d\d", t["text"])], day["x"]
    assert "from 2026-11-16 to 2026-11-22" in day["label"]

    for name, values in (("site", 6), ("gate", 3), ("week", 1)):  # categories: a bar and a label per value, none overlapping
        chart = drawn[name]
        labels = [t for t in chart["y"] if t["text"] != "rows"]
        assert len(chart["bars"]) == values and all(b["h"] >= 10 for b in chart["bars"]), (name, chart["bars"])
        assert len(labels) == values and not [(a["text"], b["text"]) for i, a in enumerate(labels) for b in labels[i + 1 :] if overlap(a, b)]
        assert chart["label"].startswith(f"{name}: bar chart of its {values} most frequent value")

    filled = page.locator('[data-testid="stProgress"] [role="progressbar"]')
    assert filled.count() == 7 and {filled.nth(i).get_attribute("aria-valuenow") for i in range(7)} == {"100"}  # "100% filled" is drawn full


def test_a_dashboard_chart_is_named_with_its_data_range_and_no_button_reads_out_an_icon(server, page):
    url, _ = server
    sign_in(page, url, "vera", "vera-demo")
    choose_workspace(page, "Supply chain weekly")
    kpi_value(page, "Attainment this week")
    page.locator('[data-testid="stVegaLiteChart"] svg').nth(2).wait_for(timeout=30_000)
    tree = accessible(page)
    charts = [name for role, name in tree if role == "graphics-document"]
    assert len(charts) == 3, charts
    daily = next(name for name in charts if name.startswith("Daily attainment by gate: line chart of 21 rows"))
    assert re.search(r"; Attainment from \d+% \(2026-11-\d\d\) to \d+% \(2026-11-\d\d\); Day from 2026-11-16 to 2026-11-22$", daily), daily
    assert any(name.startswith("Attainment by site: bar chart of 6 rows; Attainment from ") for name in charts), charts

    buttons = [name for role, name in tree if role == "button"]
    assert buttons.count("Explain") >= 6 and "Refresh" in buttons and "Export HTML" in buttons, buttons
    assert not [name for name in buttons if ICON_WORDS.search(name)], buttons

    page.get_by_role("button", name="Explain", exact=True).first.click()  # the first KPI's
    page.get_by_text("Where this number comes from").wait_for(timeout=30_000)
    page.get_by_text("This component's query, as it runs").wait_for(timeout=30_000)
    assert page.get_by_text("Query `query`").count() == 0 and page.get_by_text("Query query").count() == 0
    page.screenshot(path=str(ARTIFACTS / "browser-dashboard-explain-named.png"), full_page=True)
