"""Print one HTML document to PDF, or draw it as one PNG picture, with headless Chromium, in a process of its own:
`python -m lib.artifacts.pdf_print`.

`lib.artifacts.report_export.to_pdf` starts this module with a time limit and, past it, ends the
whole process group: Playwright's print has no time limit of its own, and Chromium
must not outlive an export that failed, timed out or was interrupted. It also keeps
Playwright's sync API (and its event loop) out of the server's threads, so several
exports run at once. The job comes on stdin as JSON {"html", "chromium",
"charts_drawn", "before_print", "page": [width, height], "draw_timeout_s", "print_timeout_s", "output"};
the PDF (or, with "output": "png", the whole page as a PNG picture: a dashboard's copy by e-mail,
lib.artifacts.dashboard_export) goes to stdout. A failure
is one plain line on stderr, led by "timeout:" when the charts were not drawn in time, exit 2.

The process bounds itself: past "print_timeout_s", on SIGTERM, or when the process that
started it is gone, it kills every process below it and exits (status TIMED_OUT past the
limit). Chromium starts a session of its own, so ending this process's group would leave
it running, and only this process knows which Chromium is its own.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ..core import settings

log = logging.getLogger(__name__)

TIMED_OUT = 3  # the exit status when the print took longer than its time limit
STOP_WAIT_S = 3.0  # how long stopping waits for what it killed to be gone
PR_SET_CHILD_SUBREAPER = 36  # prctl(2)
STOP_GRACE_S = 5.0  # how long a printer past its time may take to end what it started
ROOT = Path(__file__).resolve().parents[2]  # the folder holding the package, for the printing process

# True once every chart holder holds its drawing (an <svg>) or the message that it could not be drawn.
CHARTS_DRAWN = """() => Array.from(document.querySelectorAll("[data-chart]")).every(
  (holder) => holder.querySelector("svg") !== null || holder.classList.contains("error"))"""


# --------------------------------------------------------------------------- the exporting process's side


def run(html: str, output: str, what: str, error: type[Exception], *, before_print: str = "", page_px: tuple[int, int] = (794, 1123)) -> bytes:
    """`html` printed to PDF (`output` "pdf") or drawn as one PNG picture ("png") by headless Chromium, once every
    chart is drawn, in a printing process of its own that is ended, with the Chromium it started, after
    DASHMEM_PDF_SECONDS. `what` names the document in messages ("the report"); `error` is raised, saying what is
    missing or what went wrong, when Playwright or Chromium is not installed, the charts are not drawn in time, or
    the print fails.
    """
    kind = output.upper()
    chromium = settings.get("DASHMEM_CHROMIUM")
    if not Path(chromium).is_file():
        raise error(f"{kind} export needs Chromium, and there is none at {chromium}: install it (apt-get install chromium) or set DASHMEM_CHROMIUM")
    if importlib.util.find_spec("playwright") is None:
        raise error(f"{kind} export needs the playwright package: pip install -r requirements.txt")
    print_timeout_s, draw_timeout_s = settings.get("DASHMEM_PDF_SECONDS"), settings.get("DASHMEM_PDF_DRAW_SECONDS")
    done = "printed" if output == "pdf" else "drawn as a picture"
    job = {
        "html": html,
        "chromium": str(chromium),
        "charts_drawn": CHARTS_DRAWN,
        "before_print": before_print,
        "page": list(page_px),
        "draw_timeout_s": draw_timeout_s,
        "print_timeout_s": print_timeout_s,
        "output": output,
    }
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    # The printer bounds itself and ends what it started (main below); its own session keeps a
    # Ctrl-C in a terminal from reaching it before this process has asked it to stop.
    proc = subprocess.Popen(
        [sys.executable, "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True
    )
    stuck = False
    try:
        out, err = proc.communicate(json.dumps(job).encode(), timeout=print_timeout_s + STOP_GRACE_S)
    except subprocess.TimeoutExpired:  # the printer did not even stop itself in time (a loaded machine): the same plain message
        _stop_printer(proc)
        out, err, stuck = b"", b"", True
    except BaseException:  # this export was interrupted: nothing of the print stays behind
        _stop_printer(proc)
        raise
    message = err.decode("utf-8", "replace").strip()
    if stuck or proc.returncode == TIMED_OUT:
        log.warning("%s of %s took over %s s; stopped", kind, what, print_timeout_s)
        raise error(
            f"{what} could not be {done} within {print_timeout_s:g} s (it may be too long, or the machine busy: DASHMEM_PDF_SECONDS sets the limit); nothing was written"
        )
    magic = b"%PDF-" if output == "pdf" else b"\x89PNG"
    if proc.returncode != 0 or not out.startswith(magic):
        log.error("%s of %s failed (exit %s): %s", kind, what, proc.returncode, message)
        if message.startswith("timeout:"):
            raise error(
                f"{what}'s charts were not drawn within {draw_timeout_s:g} s, so nothing was {done}; try again, or export the HTML (DASHMEM_PDF_DRAW_SECONDS sets the limit)"
            )
        last = message.splitlines()[-1] if message else f"exit status {proc.returncode}"
        raise error(f"Chromium could not {'print' if output == 'pdf' else 'draw'} {what}: {last}")
    return out


def _stop_printer(proc: subprocess.Popen) -> None:
    """Ask the printer to end what it started (SIGTERM); if it does not within STOP_GRACE_S, kill its group."""
    proc.terminate()
    try:
        proc.wait(STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


# --------------------------------------------------------------------------- the printing process


def print_pdf(
    html: str, chromium: str, charts_drawn: str, draw_timeout_s: float, before_print: str = "", page_px: tuple[int, int] = (794, 1123), output: str = "pdf"
) -> bytes:
    """The PDF of `html`, printed once `charts_drawn` holds, in an offline browser context; with `output` "png",
    the whole page drawn as one picture (screen media, `page_px`'s width, as tall as the page).

    The page is laid out `page_px` (width, height) large, the size printed on a page; `before_print`, a
    function of that height, runs on the page after the charts are drawn and before it is printed.
    """
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        try:
            # Offline, not only routed: a route sees no WebSocket, and the print must reach nothing beyond the HTML.
            context = browser.new_context(viewport={"width": page_px[0], "height": page_px[1]}, offline=True, service_workers="block")
            context.set_default_timeout(draw_timeout_s * 1000)
            context.route("**/*", _offline)
            context.route_web_socket("**/*", lambda socket: socket.close())
            page = context.new_page()
            page.emulate_media(media="screen" if output == "png" else "print")
            page.set_content(html, wait_until="load")
            page.wait_for_function(charts_drawn, timeout=draw_timeout_s * 1000)
            if before_print:
                page.evaluate(before_print, page_px[1])
            if output == "png":
                return page.screenshot(full_page=True, type="png", animations="disabled")
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


def _become_subreaper() -> None:
    """Adopt orphans: Chromium's crash handler forks twice, which would leave it outside this process's tree,
    beyond `_descendants` and so alive after `_stop`. As a child subreaper (Linux), it stays below this process."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the processes are still killed, the double-forked ones end with their client
        pass


def _alive(pid: int) -> bool:
    """Whether `pid` still runs (a zombie has ended: only its exit status waits to be collected)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


_STOPPING = threading.Event()  # set once the time is up (or SIGTERM came): the stopper alone decides the exit status


def _stop(status: int) -> None:
    """Kill everything this print started, then exit."""
    _STOPPING.set()
    _kill_all()
    os._exit(status)


def _unless_stopping() -> None:
    """Called on the print's own failure: when the stopper is at work, that failure is its doing (it killed the
    browser), so wait for it to end the process with its status rather than report a failure of our own."""
    if _STOPPING.is_set():
        time.sleep(STOP_WAIT_S + 5)


def _kill_all() -> None:
    """Kill everything below this process (Playwright's driver, Chromium and its helpers) and wait until it is gone.

    A process may fork while the others are being killed, so the tree is read again until nothing below
    this process runs (bounded by STOP_WAIT_S): the export reports the print stopped only once it has.
    """
    deadline = time.monotonic() + STOP_WAIT_S
    while time.monotonic() < deadline:
        running = [pid for pid in _descendants() if _alive(pid)]
        if not running:
            break
        for pid in running:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.02)


def _watch(deadline: float, parent: int) -> None:
    while time.monotonic() < deadline and os.getppid() == parent:
        time.sleep(0.2)
    _stop(TIMED_OUT if os.getppid() == parent else 1)


def main() -> int:
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    job = json.loads(sys.stdin.buffer.read())
    _become_subreaper()
    signal.signal(signal.SIGTERM, lambda *_: _stop(1))
    deadline = time.monotonic() + float(job["print_timeout_s"])
    threading.Thread(target=_watch, args=(deadline, os.getppid()), daemon=True).start()
    try:
        page_px = tuple(job.get("page") or (794, 1123))
        pdf = print_pdf(
            job["html"],
            job["chromium"],
            job["charts_drawn"],
            float(job["draw_timeout_s"]),
            job.get("before_print", ""),
            (int(page_px[0]), int(page_px[1])),
            job.get("output", "pdf"),
        )
    except PlaywrightTimeout as exc:
        _unless_stopping()
        print(f"timeout: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    except PlaywrightError as exc:
        _unless_stopping()
        print(str(exc).splitlines()[0], file=sys.stderr)
        return 2
    sys.stdout.buffer.write(pdf)
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    try:
        status = main()
    finally:  # the browser is closed (or failed); a helper it left behind (the crash handler) ends now, not some time later
        _unless_stopping()
        _kill_all()
    sys.exit(status)
