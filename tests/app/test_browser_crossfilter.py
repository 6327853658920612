"""Cross-filter in a real browser: a click on a bar filters the other components; Clear selection undoes it.

Reuses tests/app/test_browser.py's server (`streamlit run` on a temporary config repo) and Chromium.
"""

from __future__ import annotations

import re

import pandas as pd
import pytest

from lib.ops import publish
from tests.helpers import current_id
from tests.helpers.browser import ARTIFACTS, BROWSER, attainment, bar, choose_workspace, kpi_value, serve, sign_in
from tests.helpers.report import by_day

from ..conftest import WORKSPACES

pytestmark = BROWSER

GATES = WORKSPACES / "supply-chain-weekly" / "data" / "gates.csv"


def test_clicking_a_bar_filters_the_kpis_and_clear_selection_restores_them(server, page):
    url, _ = server
    df = pd.read_csv(GATES)
    site = sorted(df.site.unique())[0]
    sign_in(page, url, "vera", "vera-demo")
    choose_workspace(page, "Supply chain weekly")
    everything = attainment(df)
    assert kpi_value(page, "Attainment this week") == everything

    bar(page, site).click()
    page.get_by_role("button", name=re.compile("Clear selection")).wait_for(timeout=30_000)
    expected = attainment(df.loc[df.site == site])
    assert expected != everything  # the click must show a different figure, or the test proves nothing
    page.wait_for_function(
        "([label, value]) => [...document.querySelectorAll('[data-testid=stMetric]')].some(m => m.innerText.includes(label) && m.innerText.includes(value))",
        arg=["Attainment this week", expected],
        timeout=30_000,
    )
    assert kpi_value(page, "Attainment this week") == expected
    # The filter bar shows the value the click set.
    page.locator('[data-testid="stMultiSelect"]', has_text="Sites").get_by_text(site, exact=True).wait_for(timeout=30_000)
    page.screenshot(path=str(ARTIFACTS / "browser-crossfilter-selected.png"), full_page=True)

    # Show rows on the chart: the rows of that site, counted, with the SQL that read them (the value bound).
    clear, show_rows = (page.get_by_role("button", name=re.compile(name)) for name in ("Clear selection", "Show rows"))
    card = page.locator('[data-testid="stVerticalBlock"]').filter(has=clear).filter(has=show_rows).last  # the innermost: the chart's card
    card.get_by_role("button", name=re.compile("Show rows")).click()
    page.get_by_text(f"Rows behind the selected site = {site}").wait_for(timeout=30_000)
    page.get_by_text(f"{int((df.site == site).sum())} rows match").wait_for(timeout=30_000)
    page.get_by_text("$__mark_0_0").first.wait_for(timeout=30_000)
    page.screenshot(path=str(ARTIFACTS / "browser-crossfilter-rows.png"), full_page=True)
    page.keyboard.press("Escape")

    # Another bar replaces the selection (the chart was drawn afresh with the first one highlighted).
    other = sorted(df.site.unique())[-1]
    bar(page, other).click()
    expected = attainment(df.loc[df.site == other])
    page.wait_for_function(
        "([label, value]) => [...document.querySelectorAll('[data-testid=stMetric]')].some(m => m.innerText.includes(label) && m.innerText.includes(value))",
        arg=["Attainment this week", expected],
        timeout=30_000,
    )
    page.locator('[data-testid="stMultiSelect"]', has_text="Sites").get_by_text(other, exact=True).wait_for(timeout=30_000)

    page.get_by_role("button", name=re.compile("Clear selection")).click()
    page.wait_for_function(
        "([label, value]) => [...document.querySelectorAll('[data-testid=stMetric]')].some(m => m.innerText.includes(label) && m.innerText.includes(value))",
        arg=["Attainment this week", everything],
        timeout=30_000,
    )
    assert kpi_value(page, "Attainment this week") == everything
    page.get_by_role("button", name=re.compile("Clear selection")).wait_for(state="detached", timeout=30_000)


def test_the_exported_html_still_highlights_a_clicked_bar_offline(tmp_path, page):
    import shutil

    from lib.artifacts.export import to_html
    from lib.artifacts.render import QueryCache, render
    from lib.data.refresh import refresh
    from lib.data.snapshots import Warehouse
    from lib.memory import workspace
    from lib.roles.access import OPERATOR

    folder = tmp_path / "supply-chain-weekly"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", folder)
    wh = Warehouse(tmp_path / "cache")
    assert refresh(folder, wh, user=OPERATOR).ok
    ws, _ = workspace.load(folder)
    out = tmp_path / "export.html"
    out.write_text(to_html(render(ws.data, wh.tables(), current_id(wh), {}, cache=QueryCache())), encoding="utf-8")
    sites = sorted(pd.read_csv(GATES).site.unique())
    network: list[str] = []
    page.route(re.compile(r"^https?://"), lambda route: (network.append(route.request.url), route.abort()))
    page.goto(out.as_uri())
    bars = {s: page.locator(f'#by_site [role="graphics-symbol"][aria-label*="Site: {s};"]').first for s in sites}
    bars[sites[0]].wait_for(timeout=20_000)
    page.get_by_text("The filters are fixed in this file").wait_for(timeout=5_000)

    def faded(site: str) -> bool:
        return bars[site].evaluate("e => Number(getComputedStyle(e).opacity) * Number(e.getAttribute('opacity') ?? 1) < 0.5")

    assert not any(faded(s) for s in sites)
    bars[sites[0]].click()
    page.wait_for_function(
        "label => [...document.querySelectorAll('#by_site [role=graphics-symbol]')].some(e => (e.getAttribute('aria-label') || '').includes(label) && Number(e.getAttribute('opacity') ?? 1) < 0.5)",
        arg=f"Site: {sites[1]};",
        timeout=30_000,
    )
    assert not faded(sites[0]) and all(faded(s) for s in sites[1:])
    assert network == []


# --------------------------------------------------------------------------- a click on a date (a daily line's point)


@pytest.fixture(scope="module")
def day_server(tmp_path_factory):
    """The app on a config repo whose published supply-chain dashboard has a Day filter that the daily line's points drive."""
    import copy

    from lib.memory import workspace
    from lib.repo.configrepo import ConfigRepo

    from ..configrepo_helpers import OLIVIA, SCW

    tmp = tmp_path_factory.mktemp("browser-day")
    repo = ConfigRepo.open_or_create(tmp / "config-repo", WORKSPACES)
    ws, _ = workspace.load(repo.draft(OLIVIA, SCW).workspace_path)
    dashboard = copy.deepcopy(ws.data["dashboard"])
    by_day(dashboard)
    assert repo.save(OLIVIA, SCW, {"dashboard": dashboard}, "A Day filter the daily line drives")
    publish.publish(repo, OLIVIA, SCW, "Publish the Day filter")
    yield from serve(tmp)


def test_clicking_a_day_on_the_daily_line_sets_the_day_filter_to_that_date(day_server, page):
    """Chromium in a time zone far from UTC, so a date read as an instant would land on the day before or after."""
    url, _ = day_server
    df = pd.read_csv(GATES)
    day = sorted(df.day.unique())[1]
    for zone in ("America/Los_Angeles", "Pacific/Kiritimati"):  # UTC-8 and UTC+14
        context = page.context.browser.new_context(viewport={"width": 1400, "height": 1000}, timezone_id=zone)
        tab = context.new_page()
        sign_in(tab, url, "vera", "vera-demo")
        choose_workspace(tab, "Supply chain weekly")
        everything = kpi_value(tab, "Attainment this week")
        chart = tab.locator('[data-testid="stVegaLiteChart"]', has=tab.locator('[aria-label*="Day: "]')).first
        chart.wait_for(timeout=30_000)
        # Vega labels each point with its fields as the axis formats them; the first point of that day (any gate) will do.
        label = pd.Timestamp(day).strftime("%b %d, %Y").replace(" 0", " ")
        point = chart.locator(f'[role="graphics-symbol"][aria-label*="Day: {label}"]').first
        point.click()
        expected = attainment(df.loc[df.day == day])
        assert expected != everything
        tab.wait_for_function(
            "([label, value]) => [...document.querySelectorAll('[data-testid=stMetric]')].some(m => m.innerText.includes(label) && m.innerText.includes(value))",
            arg=["Attainment this week", expected],
            timeout=30_000,
        )
        tab.wait_for_function(  # the filter bar's Day shows it (the selectbox's text or its input's value)
            "day => [...document.querySelectorAll('[data-testid=stSelectbox]')].some(b => b.innerText.includes('Day') && (b.innerText.includes(day) || [...b.querySelectorAll('input')].some(i => i.value === day)))",
            arg=day,
            timeout=30_000,
        )
        tab.get_by_text(f"Selected Day: {day}").wait_for(timeout=30_000)
        tab.screenshot(path=str(ARTIFACTS / f"browser-crossfilter-day-{zone.split('/')[1]}.png"), full_page=True)
        context.close()
