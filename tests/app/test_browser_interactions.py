"""Issue #18's interactions, a journey per role on one server, in Chromium.

- viewer (vera): Explore without a model, a click on a bar that filters the KPIs, Show rows behind it,
  Explain on a KPI, and the dashboard as of the earlier load;
- steward (sam): a question from Explore saved to the draft (following the filter bar), seen on the
  draft dashboard, and on Review as "component ... added" in the semantic diff.

Every figure asserted is computed here, with pandas, from the loads the server serves. The server runs on
a config repo whose supply-chain workspace has two loads kept (the second with other figures), made
before it starts. Reuses tests/app/test_browser.py's server and Chromium.
"""

from __future__ import annotations

import re

import pytest

from tests.helpers.browser import ARTIFACTS, BROWSER, attainment, bar, choose_workspace, kpi_value, serve, sign_in

from ..conftest import WORKSPACES

pytestmark = BROWSER

SLUG = "supply-chain-weekly"
HAS_METRIC = (
    "([label, value]) => [...document.querySelectorAll('[data-testid=stMetric]')].some(m => m.innerText.includes(label) && m.innerText.includes(value))"
)


@pytest.fixture(scope="module")
def loads(tmp_path_factory):
    """The server's URL and the two loads of the published workspace, oldest first, as pandas frames."""
    import pyarrow as pa

    from lib.data.refresh import refresh
    from lib.data.snapshots import Warehouse
    from lib.repo.configrepo import ConfigRepo
    from lib.roles.access import OPERATOR

    tmp = tmp_path_factory.mktemp("browser-interactions")
    repo = ConfigRepo.open_or_create(tmp / "config-repo", WORKSPACES)
    path = repo.published_path(SLUG)
    wh = Warehouse.for_workspace(path, tmp / "cache")  # the cache the server is given (DASHMEM_CACHE_DIR)
    assert refresh(path, wh, user=OPERATOR).ok
    first = wh.tables(wh.current())["gates"]
    # A second load, as a refresh writes it: Brno's gates moved.
    frame = first.to_pandas()
    frame["actual"] = [a - 150 if s == "Brno" else a for a, s in zip(frame.actual, frame.site)]
    wh.write_snapshot({"gates": pa.Table.from_pandas(frame, schema=first.schema, preserve_index=False)})
    frames = [first.to_pandas(), frame]
    for served in serve(tmp):
        yield served[0], frames


def choose(page, label: str, option: str, sql: str) -> None:
    """Pick an Explore option, then wait for the rerun's SQL to hold `sql`, so the next choice sees the new widgets."""
    box = page.locator('[data-testid="stSelectbox"]').filter(has=page.get_by_text(label, exact=True))
    for _ in range(300):  # a rerun may briefly show the old widget beside the new one: wait until it is one
        if box.count() == 1:
            break
        page.wait_for_timeout(100)
    box.click()
    page.get_by_role("option", name=option, exact=True).click()
    page.locator('[data-testid="stCode"]', has_text=sql).wait_for(timeout=30_000)


def card(page, *has):
    """The innermost block holding every locator in `has`: a component's card with its buttons."""
    block = page.locator('[data-testid="stVerticalBlock"]')
    for locator in has:
        block = block.filter(has=locator)
    return block.last


def test_viewer_explores_cross_filters_shows_rows_explains_and_looks_at_the_earlier_load(loads, page):
    url, (first, latest) = loads
    sign_in(page, url, "vera", "vera-demo")
    choose_workspace(page, "Supply chain weekly")
    assert kpi_value(page, "Attainment this week") == attainment(latest)
    assert attainment(first) != attainment(latest)

    # Cross-filter: a click on Brno's bar narrows the KPIs to Brno.
    bar(page, "Brno").click()
    page.wait_for_function(HAS_METRIC, arg=["Attainment this week", attainment(latest[latest.site == "Brno"])], timeout=30_000)

    # Show rows behind the selected bar: Brno's rows, counted.
    clear = page.get_by_role("button", name=re.compile("Clear selection"))
    card(page, clear, page.get_by_role("button", name=re.compile("Show rows"))).get_by_role("button", name=re.compile("Show rows")).click()
    page.get_by_text("Rows behind the selected site = Brno").wait_for(timeout=30_000)
    page.get_by_text(f"{int((latest.site == 'Brno').sum())} rows match").wait_for(timeout=30_000)
    page.keyboard.press("Escape")

    # Explain on the KPI: its SQL, and the site chosen by the click bound as a parameter.
    metric = page.locator('[data-testid="stMetric"]', has_text="Attainment this week")
    explain = page.get_by_role("button", name=re.compile("Explain"))
    card(page, metric, explain).get_by_role("button", name=re.compile("Explain")).click()
    page.get_by_text("Where this number comes from").wait_for(timeout=30_000)
    page.locator('[data-testid="stCode"]', has_text="SELECT sum(actual) / sum(target) AS value FROM gates").first.wait_for(timeout=30_000)
    page.get_by_text("$site = ['Brno']").first.wait_for(timeout=30_000)
    page.screenshot(path=str(ARTIFACTS / "browser-interactions-viewer-explain.png"), full_page=True)
    page.keyboard.press("Escape")
    page.get_by_role("button", name=re.compile("Clear selection")).click()
    page.wait_for_function(HAS_METRIC, arg=["Attainment this week", attainment(latest)], timeout=30_000)

    # Data as of the earlier load: its figures, under a banner; read-only, for this session only.
    as_of = page.locator('[data-testid="stSelectbox"]', has_text="Data as of")
    options = page.get_by_role("option")
    for _ in range(3):  # a click that lands while the page reruns opens nothing
        as_of.click()
        try:
            options.first.wait_for(timeout=5_000)
            break
        except Exception:
            page.keyboard.press("Escape")
    options.filter(has_not_text="latest").first.click()
    page.get_by_text("not what everyone sees").wait_for(timeout=30_000)
    page.wait_for_function(HAS_METRIC, arg=["Attainment this week", attainment(first)], timeout=30_000)
    page.screenshot(path=str(ARTIFACTS / "browser-interactions-viewer-as-of.png"), full_page=True)

    # Explore without a model: sum of actual by site, as pandas sums the latest load.
    page.get_by_role("link", name="Explore").click()
    page.get_by_role("heading", name="Explore").wait_for(timeout=30_000)
    choose(page, "Measure", "actual", 'count("actual")')
    choose(page, "Aggregation", "Sum", 'sum("actual")')
    choose(page, "Breakdown", "site", 'SELECT "site" AS "site", sum("actual") AS value FROM "gates" GROUP BY 1 ORDER BY value DESC')
    chart = page.locator('[data-testid="stVegaLiteChart"]').first
    chart.wait_for(timeout=30_000)
    brno = int(latest[latest.site == "Brno"].actual.sum())
    chart.locator(f'[role="graphics-symbol"][aria-label*="{brno:,}"]').first.wait_for(timeout=30_000)
    assert page.get_by_role("button", name="Save to draft dashboard").count() == 0


def test_steward_saves_a_question_to_the_draft_sees_it_on_the_draft_dashboard_and_on_review(loads, page):
    url, (first, _) = loads
    sign_in(page, url, "sam", "sam-demo")
    choose_workspace(page, "Supply chain weekly")
    page.get_by_role("link", name="Explore").click()
    page.get_by_role("heading", name="Explore").wait_for(timeout=30_000)
    choose(page, "Measure", "actual", 'count("actual")')
    choose(page, "Aggregation", "Sum", 'sum("actual")')
    choose(page, "Breakdown", "gate", 'SELECT "gate" AS "gate", sum("actual") AS value FROM "gates" GROUP BY 1 ORDER BY value DESC')
    page.get_by_text("Follow the dashboard's filter bar").click()
    page.get_by_role("button", name="Save to draft dashboard").click()
    page.get_by_text(re.compile(r"Saved explore_actual_by_gate to your draft dashboard.*follows the filter bar's site")).wait_for(timeout=60_000)

    # The draft dashboard shows it, on the draft's own data (loaded from the CSV files: the first load's figures).
    page.get_by_role("link", name="Dashboard").click()
    page.get_by_text("Show my draft").click()
    page.get_by_text("Sum of actual by gate").first.wait_for(timeout=60_000)
    marks = page.locator('[data-testid="stVegaLiteChart"] [role="graphics-symbol"]')
    marks.first.wait_for(timeout=30_000)
    for gate, total in first.groupby("gate").actual.sum().items():
        marks.and_(page.locator(f'[aria-label="gate: {gate}; Sum of actual: {int(total):,}"]')).first.wait_for(timeout=30_000)
    page.screenshot(path=str(ARTIFACTS / "browser-interactions-steward-draft.png"), full_page=True)

    # Review: the draft's meaning first, the new component among it.
    page.get_by_role("link", name="Review").click()
    page.get_by_role("heading", name="sam's draft (yours)").wait_for(timeout=30_000)
    page.get_by_text(re.compile("component explore_actual_by_gate added")).first.wait_for(timeout=30_000)
    page.screenshot(path=str(ARTIFACTS / "browser-interactions-steward-review.png"), full_page=True)
