"""Print one HTML document to PDF with headless Chromium, in a process of its own: `python -m lib.pdf_print`.

`lib.report_export.to_pdf` starts this module with a time limit and, past it, ends the
whole process group: Playwright's print has no time limit of its own, and Chromium
must not outlive an export that failed, timed out or was interrupted. It also keeps
Playwright's sync API (and its event loop) out of the server's threads, so several
exports run at once. The job comes on stdin as JSON {"html", "chromium",
"charts_drawn", "draw_timeout_s"}; the PDF goes to stdout. A failure is one plain
line on stderr, led by "timeout:" when the charts were not drawn in time, exit 2.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def print_pdf(html: str, chromium: str, charts_drawn: str, draw_timeout_s: float) -> bytes:
    """The PDF of `html`, printed once `charts_drawn` holds, in an offline browser context."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        try:
            # Offline, not only routed: a route sees no WebSocket, and the print must reach nothing beyond the HTML.
            context = browser.new_context(viewport={"width": 794, "height": 1123}, offline=True, service_workers="block")  # A4 at 96 dpi
            context.set_default_timeout(draw_timeout_s * 1000)
            context.route("**/*", _offline)
            context.route_web_socket("**/*", lambda socket: socket.close())
            page = context.new_page()
            page.emulate_media(media="print")
            page.set_content(html, wait_until="load")
            page.wait_for_function(charts_drawn, timeout=draw_timeout_s * 1000)
            return page.pdf(prefer_css_page_size=True, print_background=True, display_header_footer=False)
        finally:
            browser.close()


def _offline(route: Any) -> None:
    """The document is standalone: any request it makes (there should be none) is refused, never sent."""
    if route.request.url.startswith(("about:", "data:")):
        route.continue_()
    else:
        route.abort()


def main() -> int:
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    job = json.loads(sys.stdin.buffer.read())
    try:
        pdf = print_pdf(job["html"], job["chromium"], job["charts_drawn"], float(job["draw_timeout_s"]))
    except PlaywrightTimeout as exc:
        print(f"timeout: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    except PlaywrightError as exc:
        print(str(exc).splitlines()[0], file=sys.stderr)
        return 2
    sys.stdout.buffer.write(pdf)
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
