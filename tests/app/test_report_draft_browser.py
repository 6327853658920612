"""The report auto-draft in a real browser (Debian's chromium through Playwright): draft it on the Chat page without
a key, save it to the draft, and read it on the Report page with figures computed apart from the product."""

from __future__ import annotations

from typing import cast

import pandas as pd

from tests.helpers.browser import ARTIFACTS, BROWSER, choose_workspace, sign_in

from ..conftest import WORKSPACES

pytestmark = BROWSER


def test_a_steward_drafts_a_report_without_a_key_saves_it_and_reads_its_top_movers(server, page):
    url, _ = server
    gates = pd.read_csv(WORKSPACES / "supply-chain-weekly" / "data" / "gates.csv")
    earlier, later = sorted(gates.day.unique())[-2:]
    by_site = gates[gates.day.isin([earlier, later])].pivot_table(index="site", columns="day", values="actual", aggfunc="sum")
    change = cast(pd.Series, by_site[later] - by_site[earlier]).sort_values(key=abs, ascending=False)  # a column: pandas' own types say frame or series
    site, moved = change.index[0], change.iloc[0]

    sign_in(page, url, "sam", "sam-demo")
    choose_workspace(page, "Supply chain weekly")
    page.get_by_role("link", name="Chat").click()
    page.get_by_text("A report", exact=True).click()
    page.get_by_text("Start a new one in its place", exact=True).click()  # a first report, in place of the demo's
    page.get_by_role("button", name="Auto-draft").click()
    page.get_by_text("The report's checks pass.").wait_for(timeout=60_000)
    page.get_by_role("button", name="Save to my draft").click()
    page.get_by_text("Saved to your draft").wait_for(timeout=60_000)

    page.get_by_role("link", name="Report").click()
    page.get_by_text("Show my draft").click()
    page.get_by_role("heading", name="Top movers").wait_for(timeout=60_000)
    sign = "+" if moved > 0 else "−"
    page.get_by_text(f"between the latest two days: {site}, {sign}{abs(moved):,.0f}").wait_for(timeout=30_000)
    page.get_by_text(f"Total actual came to {gates.actual.sum():,.0f} over {len(gates):,} records").wait_for(timeout=30_000)
    page.screenshot(path=str(ARTIFACTS / "browser-report-autodraft.png"), full_page=True)
