"""Print one HTML document to PDF with headless Chromium, in a process of its own: `python -m lib.pdf_print`.

`lib.report_export.to_pdf` starts this module with a time limit and, past it, ends the
whole process group: Playwright's print has no time limit of its own, and Chromium
must not outlive an export that failed, timed out or was interrupted. It also keeps
Playwright's sync API (and its event loop) out of the server's threads, so several
exports run at once. The job comes on stdin as JSON {"html", "chromium",
"charts_drawn", "draw_timeout_s", "print_timeout_s"}; the PDF goes to stdout. A failure
is one plain line on stderr, led by "timeout:" when the charts were not drawn in time, exit 2.

The process bounds itself: past "print_timeout_s", on SIGTERM, or when the process that
started it is gone, it kills every process below it and exits (status TIMED_OUT past the
limit). Chromium starts a session of its own, so ending this process's group would leave
it running, and only this process knows which Chromium is its own.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

TIMED_OUT = 3  # the exit status when the print took longer than its time limit


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


def _descendants() -> list[int]:
    """This process's children, theirs, and so on, from /proc (Linux), the deepest last."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    found: list[int] = []
    frontier = {os.getpid()}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier and pid not in found}
        found.extend(sorted(frontier))
    return found


def _stop(status: int) -> None:
    """Kill everything this print started (Playwright's driver, Chromium and its helpers), then exit."""
    for pid in _descendants():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    os._exit(status)


def _watch(deadline: float, parent: int) -> None:
    while time.monotonic() < deadline and os.getppid() == parent:
        time.sleep(0.2)
    _stop(TIMED_OUT if os.getppid() == parent else 1)


def main() -> int:
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    job = json.loads(sys.stdin.buffer.read())
    signal.signal(signal.SIGTERM, lambda *_: _stop(1))
    deadline = time.monotonic() + float(job["print_timeout_s"])
    threading.Thread(target=_watch, args=(deadline, os.getppid()), daemon=True).start()
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
