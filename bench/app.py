"""Dashboard page load in a real browser with N concurrent sessions, and the page's rerun cost in AppTest.

    python -m bench.app [--rows N] [--rounds R] [--sessions 1,4,8] [--no-pin] [--skip-browser] [--skip-apptest]

Browser (issue #14, "several users"): `streamlit run app.py` serves a
workspace over the generated 44-column table (its data loaded beforehand)
with bench.render's 10-component dashboard (3 KPIs, 5 charts, a table, a
text). One Chromium opens N new contexts at once (no cookie); each navigates,
signs in and waits until every chart is drawn. The page-load time is from
navigation to the last chart drawn. For each N it runs R rounds; p50 and p95
are over the N x R loads; a load that does not finish within --timeout is
counted as stuck. Goal: p95 with 8 sessions no more than 3x the
single-session figure, and no session stuck.

Server side (--pin, on by default with 2 or more cores): the browser
figures above also time Chromium drawing the page, and 8 Chromium sessions
used about 7.6 s of CPU per page load against the server's 1.0 s on the same
2 cores, so they measured mostly the browser. Two things separate the
server's part: the server runs on core 0 only and Chromium with Playwright on
the others (`taskset`), so the browsers cannot take the server's CPU; and the
server logs each script run (DASHMEM_RUN_LOG, lib/runlog.py) from the
browser's request (the `rerun_script` message) to the run's last message
queued for the browser (its `script_finished`). For each session the
measured run is the one its Login click asks for: the password check
(bcrypt, cost 12) and the whole dashboard. The log times the server alone;
the pinning keeps its CPU its own (other processes on the machine still
share core 0). Goal as above, on these server-side times. It also prints
the CPU floor: N sign-ins asked at once need N x the server's CPU per load,
so while one sign-in is CPU-bound (bcrypt and the page take about all of its
time in CPU) the ratio cannot fall much below N / cores.

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


def sign_in_runs(runs: list[dict]) -> list[float]:
    """Server seconds of each session's sign-in run: its last finished run (the Login click's: the password
    check and the dashboard), from the request to the last message queued."""
    last: dict[str, dict] = {}
    for run in runs:
        if run["ended"] == "finished":
            last[run["session"]] = run
    return [run["done"] - run["asked"] for run in last.values()]


def browser_bench(tmp: Path, args) -> None:
    from lib import runlog

    env = bench_config_repo(tmp, args.rows, SPEC)
    log = tmp / "runs.jsonl"
    env["DASHMEM_RUN_LOG"] = str(log)
    counts = [int(n) for n in args.sessions.split(",")]
    pin = args.pin and (os.cpu_count() or 1) >= 2
    rows, figures, server_rows, server_figures = [], {}, [], {}
    with AppServer(env, tmp / "server.log", cpus="0" if pin else None) as server:
        if pin:  # this process, Playwright and Chromium (its children) on the other cores
            os.sched_setaffinity(0, set(range(1, os.cpu_count() or 2)))
        # The server's first page: nothing cached.
        cold, cold_stuck, server_cpu, browser_cpu = asyncio.run(page_loads(server.url, 1, 1, args.timeout, server.proc.pid))
        rows.append(["1 (cold server)", 1, round(cold[0], 2) if cold else "stuck", "", "", cold_stuck, round(server_cpu, 2), round(browser_cpu, 2), ""])
        for n in counts:
            before = len(runlog.read(log))
            times, stuck, server_cpu, browser_cpu = asyncio.run(page_loads(server.url, n, args.rounds, args.timeout, server.proc.pid))
            on_server = sign_in_runs(runlog.read(log)[before:])
            server_figures[n] = (percentile(on_server, 50), percentile(on_server, 95)) if on_server else (float("nan"), float("nan"))
            server_cores = 1 if pin else (os.cpu_count() or 1)
            per_load = server_cpu / max(1, len(times) + stuck)
            # N sign-ins asked at once need N x (server CPU per load) on the server's cores: the last cannot be done sooner.
            floor = n * per_load / min(n, server_cores)
            server_rows.append([n, len(on_server), round(server_figures[n][0], 3), round(server_figures[n][1], 3), stuck, round(per_load, 3), round(floor, 2)])
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
        + (" The server ran on core 0, the browsers on the others." if pin else "")
    )
    print()
    low_p95 = server_figures.get(low, (float("nan"),) * 2)[1]
    for row in server_rows:
        row.insert(4, f"{row[3] / low_p95:.2f}x" if low_p95 == low_p95 and low_p95 > 0 else "")
        row.append(f"<= {GOAL_RATIO:.0f}x, none stuck")
    headers = ["sessions at once", "sign-ins logged", "server p50 s", "server p95 s", "p95 / 1-session p95", "stuck", "server CPU s/load", "CPU floor s"]
    print_table(headers + ["goal"], server_rows)
    print(
        "\nServer side: per session, its Login click's script run as the server logged it (DASHMEM_RUN_LOG), from the"
        " request to the run's last message queued: the password check (bcrypt) and the whole dashboard, no drawing."
        + (" Server pinned to core 0, browsers to the others (taskset)." if pin else " Not pinned (--no-pin, or one core).")
        + " CPU floor: N sign-ins asked at once need N x the server's CPU per load on its cores, so the last of them"
        " cannot be done sooner; when one sign-in is CPU-bound (its time close to its CPU), the ratio cannot fall"
        " much below N / cores, whatever the app does: 8 on one core, 4 on two."
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
    parser.add_argument("--no-pin", dest="pin", action="store_false", help="do not pin the server to core 0 and the browsers to the others")
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
