"""Dashboard page load in a real browser with N concurrent sessions, and the page's rerun cost in AppTest.

    python -m bench.app [--rows N] [--rounds R] [--sessions 1,4,8] [--skip-browser] [--skip-apptest]

Browser (issue #14, "several users"): `streamlit run app.py` serves a
workspace over the generated 44-column table (its data loaded beforehand)
with bench.render's 10-component dashboard (3 KPIs, 5 charts, a table, a
text). One Chromium opens N new contexts at once (no cookie); each navigates,
signs in and waits until every chart is drawn. The page-load time is from
navigation to the last chart drawn. For each N it runs R rounds; p50 and p95
are over the N x R loads; a load that does not finish within --timeout is
counted as stuck. Goal: p95 with 8 sessions no more than 3x the
single-session figure, and no session stuck.

AppTest (the chart cache): the page script's warm rerun, median of
--repeat, with charts built, validated and converted on every rerun (the
baseline, as before the cache) and with them kept per query result.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from .common import BENCH_SLUG, CHROMIUM, CHROMIUM_ARGS, ROOT, AppServer, bench_config_repo, open_dashboard, percentile, print_table, process_tree_cpu
from .render import SPEC

CHARTS = sum(1 for c in SPEC["components"] if c["type"] == "chart")
METRICS = sum(1 for c in SPEC["components"] if c["type"] == "kpi")
GOAL_RATIO = 3.0


async def page_loads(url: str, sessions: int, rounds: int, timeout_s: float, server_pid: int) -> tuple[list[float], int, float, float]:
    """(load times of the sessions that got there, sessions stuck, server CPU s, browser CPU s) over `rounds` rounds."""
    from playwright.async_api import async_playwright

    times: list[float] = []
    stuck = 0
    async with async_playwright() as p:
        # The server is a child of this process: the client side (Chromium, Playwright) is the rest of this tree.
        server_before, all_before = process_tree_cpu(server_pid), process_tree_cpu(os.getpid())
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for _ in range(rounds):
                got = await asyncio.gather(*(open_dashboard(browser, url, CHARTS, METRICS, timeout_s) for _ in range(sessions)))
                times += [t for t in got if t is not None]
                stuck += sum(1 for t in got if t is None)
            server_cpu = process_tree_cpu(server_pid) - server_before
            browser_cpu = process_tree_cpu(os.getpid()) - all_before - server_cpu
        finally:
            await browser.close()
    return times, stuck, server_cpu, browser_cpu


def browser_bench(tmp: Path, args) -> None:
    env = bench_config_repo(tmp, args.rows, SPEC)
    counts = [int(n) for n in args.sessions.split(",")]
    rows, figures = [], {}
    with AppServer(env, tmp / "server.log") as server:
        # The server's first page: nothing cached.
        cold, cold_stuck, server_cpu, browser_cpu = asyncio.run(page_loads(server.url, 1, 1, args.timeout, server.proc.pid))
        rows.append(["1 (cold server)", 1, round(cold[0], 2) if cold else "stuck", "", "", cold_stuck, round(server_cpu, 2), round(browser_cpu, 2), ""])
        for n in counts:
            times, stuck, server_cpu, browser_cpu = asyncio.run(page_loads(server.url, n, args.rounds, args.timeout, server.proc.pid))
            figures[n] = (percentile(times, 50), percentile(times, 95)) if times else (float("nan"), float("nan"))
            loads = len(times) + stuck
            floor = n * (server_cpu + browser_cpu) / loads / (os.cpu_count() or 1)  # all N loads' CPU spread over every core
            rows.append(
                [
                    n,
                    loads,
                    round(figures[n][0], 2),
                    round(figures[n][1], 2),
                    round(max(times), 2) if times else "",
                    stuck,
                    round(server_cpu / loads, 2),
                    round(browser_cpu / loads, 2),
                    round(floor, 2),
                ]
            )
    print_table(["sessions at once", "page loads", "p50 s", "p95 s", "max s", "stuck", "server CPU s/load", "browser CPU s/load", "CPU floor s"], rows)
    low, high = min(counts), max(counts)
    if low in figures and high in figures and low != high:
        ratio_p50 = figures[high][1] / figures[low][0]
        ratio_p95 = figures[high][1] / figures[low][1]
        print(
            f"\np95 with {high} sessions / single-session p50: {ratio_p50:.2f}x; / single-session p95: {ratio_p95:.2f}x"
            f"   (goal: <= {GOAL_RATIO:.0f}x, and no session stuck)"
        )
    print(
        f"{args.rows:,} rows x 44 columns, {len(SPEC['components'])} components ({CHARTS} charts); one Chromium, a new context per"
        f" session, time from navigation through sign-in to the last chart drawn; {args.rounds} round(s) per row; stuck ="
        f" not drawn within {args.timeout:.0f} s. CPU s/load: CPU time of the app server (and its query workers), and of"
        f" Chromium with Playwright, per page load; both share this machine's {os.cpu_count()} cores, so N loads at once"
        f" cannot take less than N x (server + browser CPU) / cores (the CPU floor), whatever the app does."
    )


def apptest_bench(tmp: Path, args) -> None:
    """Warm reruns with the chart caches on, and with them off (every rerun builds, validates and converts)."""
    from streamlit.testing.v1 import AppTest

    from app_pages import dashboard_view
    from lib.components import chart

    if not (tmp / "config-repo").exists():  # the browser bench made it already when it ran
        bench_config_repo(tmp, args.rows, SPEC)
    os.chdir(ROOT)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
    at.session_state["authentication_status"] = True
    at.session_state["username"] = "vera"
    at.session_state["slug"] = BENCH_SLUG
    start = time.perf_counter()
    at.run()
    first = time.perf_counter() - start
    assert not at.exception, at.exception
    assert len(at.metric) == METRICS, "the dashboard did not render"

    def reruns() -> list[float]:
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            at.run()
            times.append(time.perf_counter() - start)
        assert not at.exception, at.exception
        return times

    built, size, specs_size = chart.BUILT, chart.BUILT.size, dashboard_view._SPECS_SIZE
    try:
        chart.BUILT.size, dashboard_view._SPECS_SIZE = 0, 0  # nothing kept: the work st.altair_chart did on every rerun
        chart.BUILT._items.clear()
        dashboard_view._SPECS.clear()
        uncached = reruns()
    finally:
        chart.BUILT.size, dashboard_view._SPECS_SIZE = size, specs_size
    at.run()  # fills the caches
    cached = reruns()
    assert chart.BUILT is built
    base, now = statistics.median(uncached), statistics.median(cached)
    print_table(
        ["case", "components", "seconds", "vs baseline"],
        [
            ["first open (data loaded, nothing cached)", len(SPEC["components"]), round(first, 3), ""],
            [f"warm rerun, charts rebuilt each time (baseline), median of {args.repeat}", len(SPEC["components"]), round(base, 3), "1.00x"],
            [f"warm rerun, charts kept per query result, median of {args.repeat}", len(SPEC["components"]), round(now, 3), f"{now / base:.2f}x"],
        ],
    )
    print(f"\nCharts' share of a warm rerun before the cache: {(base - now) / base:.0%} (the audit measured about 70 %).")
    print(f"{args.rows:,} rows x 44 columns; AppTest runs the page script as the server does, without a browser.")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5, help="rounds of N sessions at once per N (browser)")
    parser.add_argument("--sessions", default="1,4,8", help="concurrent session counts (browser)")
    parser.add_argument("--timeout", type=float, default=120, help="seconds after which a session counts as stuck")
    parser.add_argument("--repeat", type=int, default=10, help="warm reruns per case (AppTest)")
    parser.add_argument("--skip-browser", action="store_true")
    parser.add_argument("--skip-apptest", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        if not args.skip_browser:
            if not Path(CHROMIUM).exists():
                raise SystemExit(f"{CHROMIUM} is not installed (make test installs it); use --skip-browser")
            browser_bench(Path(tmp), args)
        if not args.skip_apptest:
            print()
            apptest_bench(Path(tmp), args)


if __name__ == "__main__":
    main()
