"""Several people using the dashboard at once: N sessions each clicking Refresh repeatedly, in real Chromium.

    python -m bench.load [--rows N] [--sessions 1,2,4,8] [--clicks K]

Where bench.app times opening the page (navigation, sign-in, first draw),
this times what happens after: N signed-in sessions (one Chromium, a context
each, over bench.render's 10-component dashboard of the generated 44-column
table) each click Refresh K times, all at once; a click's time runs from the
click until its script run has finished and every chart is drawn again. A
Refresh re-reads the source (the CSV of --rows rows) and finds it unchanged,
so it is the heavy click a viewer can make. For each N: the median and p95
click time, its ratio to one session's median, and the clicks done per second
by all sessions together; with 2 cores, an N-fold ratio beyond N/2 means
sessions wait on each other rather than on the CPU. A click not drawn within
--timeout counts as stuck. Goal (issue #14): no session stuck, and p95 with 8
sessions no more than 3x the single-session figure.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from .common import BENCH_SLUG, CHROMIUM, CHROMIUM_ARGS, COUNT_RUNS_JS, DRAWN_JS, VIEWER, AppServer, bench_config_repo, percentile, print_table
from .render import SPEC

CHARTS = sum(1 for c in SPEC["components"] if c["type"] == "chart")
METRICS = sum(1 for c in SPEC["components"] if c["type"] == "kpi")
GOAL_RATIO = 3.0


async def session(browser, url: str, clicks: int, timeout_s: float, start: asyncio.Event) -> tuple[list[float], int]:
    """(seconds per Refresh click drawn, clicks stuck) for one signed-in session."""
    context = await browser.new_context(viewport={"width": 1400, "height": 1000})
    await context.add_init_script(COUNT_RUNS_JS)
    page = await context.new_page()
    page.set_default_timeout(timeout_s * 1000)
    times, stuck = [], 0
    try:
        await page.goto(f"{url}/?ws={BENCH_SLUG}")
        await page.get_by_label("Username").fill(VIEWER[0])
        await page.get_by_role("textbox", name="Password").fill(VIEWER[1])
        await page.get_by_role("button", name="Login").click()
        await page.wait_for_function(DRAWN_JS, arg=[CHARTS, METRICS], polling=100)
        await start.wait()  # every session is on the dashboard before anyone clicks
        for _ in range(clicks):
            before = await page.evaluate("window.__runs")
            started = time.perf_counter()
            await page.get_by_role("button", name="Refresh").click()
            try:
                await page.wait_for_function(
                    f"([charts, metrics]) => window.__runs > {before} && ({DRAWN_JS})([charts, metrics])", arg=[CHARTS, METRICS], polling=100
                )
                times.append(time.perf_counter() - started)
            except Exception:  # a Playwright timeout: this click never came back
                stuck += 1
    except Exception:  # never got to the dashboard: every click counts as stuck
        stuck = clicks - len(times)
    finally:
        await context.close()
    return times, stuck


async def sweep_point(url: str, sessions: int, clicks: int, timeout_s: float) -> tuple[list[float], int, float]:
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            start = asyncio.Event()
            tasks = [asyncio.create_task(session(browser, url, clicks, timeout_s, start)) for _ in range(sessions)]
            # Wait until every session has signed in and drawn the page: they then click together.
            while not start.is_set() and not all(t.done() for t in tasks):
                await asyncio.sleep(0.5)
                if sum(len(c.pages) for c in browser.contexts) == sessions and await _all_drawn(browser):
                    start.set()
            started = time.perf_counter()
            done = await asyncio.gather(*tasks)
            wall = time.perf_counter() - started
        finally:
            await browser.close()
    return [t for times, _ in done for t in times], sum(s for _, s in done), wall


async def _all_drawn(browser) -> bool:
    try:
        for context in browser.contexts:
            for page in context.pages:
                if not await page.evaluate(f"({DRAWN_JS})([{CHARTS}, {METRICS}])"):
                    return False
    except Exception:  # a session gave up and closed its page meanwhile
        return False
    return True


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=100_000, help="rows of the generated table (1,000,000 for the audit's case)")
    parser.add_argument("--sessions", default="1,2,4,8")
    parser.add_argument("--clicks", type=int, default=5, help="Refresh clicks per session")
    parser.add_argument("--timeout", type=float, default=120, help="seconds after which a click counts as stuck")
    args = parser.parse_args(argv)
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"{CHROMIUM} is not installed (make test installs it)")
    counts = [int(n) for n in args.sessions.split(",")]
    rows, single = [], None
    with tempfile.TemporaryDirectory() as tmp:
        env = bench_config_repo(Path(tmp), args.rows, SPEC)
        with AppServer(env, Path(tmp) / "server.log") as server:
            for n in counts:
                times, stuck, wall = asyncio.run(sweep_point(server.url, n, args.clicks, args.timeout))
                p50 = statistics.median(times) if times else float("nan")
                p95 = percentile(times, 95) if times else float("nan")
                single = single or (p50 if n == 1 else None)
                rows.append([n, len(times) + stuck, round(p50, 2), round(p95, 2), f"{p95 / single:.2f}x" if single else "", round(len(times) / wall, 2), stuck])
    print_table(["sessions at once", "clicks", "p50 s", "p95 s", "p95 / 1-session p50", "clicks/s (all)", "stuck"], rows)
    print(f"\nGoal: p95 with {max(counts)} sessions <= {GOAL_RATIO:.0f}x the single-session figure, and no session stuck.")
    print(
        f"{args.rows:,} rows x 44 columns, {len(SPEC['components'])} components; each click is Refresh (re-reads the CSV, data"
        f" unchanged) until every chart is drawn again; {args.clicks} clicks per session."
    )


if __name__ == "__main__":
    main()
