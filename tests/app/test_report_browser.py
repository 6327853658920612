"""The Report page in a real browser (Debian's chromium through Playwright): open it, change a parameter, export the PDF."""

from __future__ import annotations

import io
import time

import pandas as pd
import pytest

from tests.helpers.browser import ARTIFACTS, BROWSER, choose_workspace, kpi_value, sign_in

from ..conftest import WORKSPACES

pytestmark = BROWSER

pypdf = pytest.importorskip("pypdf")


def wait_for_value(page, label: str, expected: str, timeout_s: float = 30) -> str:
    deadline = time.monotonic() + timeout_s
    value = kpi_value(page, label)
    while value != expected and time.monotonic() < deadline:
        time.sleep(0.3)
        value = kpi_value(page, label)
    return value


def test_a_viewer_opens_the_report_changes_a_parameter_and_downloads_the_pdf(server, page):
    url, _ = server
    df = pd.read_csv(WORKSPACES / "supply-chain-weekly" / "data" / "gates.csv")
    brno = df[df.site == "Brno"]
    sign_in(page, url, "vera", "vera-demo")
    choose_workspace(page, "Supply chain weekly")
    page.get_by_role("link", name="Report").click()
    page.get_by_role("heading", name="Supply chain weekly report").wait_for(timeout=30_000)
    assert wait_for_value(page, "Units through the gates", f"{df.actual.sum():,.0f}") == f"{df.actual.sum():,.0f}"

    page.locator('[data-testid="stMultiSelect"]').first.click()
    page.get_by_role("option", name="Brno").click()
    page.keyboard.press("Escape")
    assert wait_for_value(page, "Units through the gates", f"{brno.actual.sum():,.0f}") == f"{brno.actual.sum():,.0f}"
    page.get_by_text(f"{brno.actual.sum():,.0f} units went through the gates").wait_for(timeout=30_000)
    page.screenshot(path=str(ARTIFACTS / "browser-report-brno.png"), full_page=True)

    page.get_by_role("button", name="Export PDF").click()
    download_button = page.get_by_role("button", name="Download PDF")
    download_button.wait_for(timeout=60_000)
    with page.expect_download(timeout=60_000) as info:
        download_button.click()
    download = info.value
    assert download.suggested_filename == "supply-chain-weekly-report.pdf"
    pdf = open(download.path(), "rb").read()
    assert pdf.startswith(b"%PDF-")
    text = " ".join(" ".join((p.extract_text() or "") for p in pypdf.PdfReader(io.BytesIO(pdf)).pages).split())
    assert f"{brno.actual.sum():,.0f} units went through the gates against a target of {brno.target.sum():,.0f}" in text  # the parameter chosen on the page
    assert "Sites: Brno" in text and "Page 1 of" in text
