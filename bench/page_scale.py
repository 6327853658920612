"""The Dashboard page's own server time as the config repo and the dashboard grow (issue #28, goal 6).

    python -m bench.page_scale [--rows N] [--runs 5] [--reruns 5]

What is timed is the page run itself: the script Streamlit runs for a viewer (app.py, its sidebar, the
Dashboard page with every component drawn), in AppTest, which runs the script as the server does without a
browser (one discovery of the installed components per process, as a server makes, not one per
session as AppTest would). Each case is a fresh process (`python -m bench.page_scale --case ...`), as a restarted server is;
the cases take turns run by run, so a noisy moment of the shared machine falls on every case alike. Per
process, after one untimed first run (the data loaded, the caches shared by sessions filled, as on a
server that has served the page once):

- new session: a new AppTest's first run, which is what a reload or a new tab costs the server (the
  queries and charts come from the caches shared by sessions);
- warm rerun: the same session run again, what a filter click or a Refresh check costs;
- cold queries: a new session after the query and chart caches were emptied, which a new data version
  costs (every component's query runs again).

Two axes: workspaces in the config repo (2 and 200; the viewer may see all of them, the one shown is the
same) and components on the dashboard (5 and 50: bench.render's ten components repeated with their own ids
and their own SQL text, so none shares another's cache entry and each does the same work). Goals: the page
at 200 workspaces at most 1.5x the page at 2, and at 50 components at most 10x (linear) the page at 5.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .common import BENCH_SLUG, ROOT, bench_config_repo, print_table
from .render import SPEC

CASES = {"workspaces": (2, 200), "components": (5, 50)}
GOALS = {"workspaces": 1.5, "components": 10.0}
BASE = {"workspaces": 10, "components": 2}  # the other axis' size in each case: 10 components; 2 workspaces


def spec_with(n: int) -> dict:
    """bench.render's dashboard with `n` components: its ten, repeated with own ids and own SQL text."""
    spec = copy.deepcopy(SPEC)
    base = list(SPEC["components"])
    spec["components"] = []
    for i in range(n):
        c = copy.deepcopy(base[i % len(base)])
        c["id"] = f"{c['id']}_{i}"
        if i >= len(base):  # the same work under another cache key
            if "query" in c:
                c["query"] = c["query"] + f" -- copy {i}"
            for key in c.get("queries") or {}:
                c["queries"][key] = c["queries"][key] + f" -- copy {i}"
        spec["components"].append(c)
    return spec


def set_workspaces(config: Path, total: int) -> None:
    """`total` workspaces every viewer may see in the config repo, committed to main: the bench's, the
    supply-chain demo, and blank ones (the GDP demo is removed, so the smallest case has two)."""
    import git

    from lib.memory import workspace

    repo = git.Repo(config)
    repo.git.rm("-r", "-q", "gdp-explorer")
    for i in range(total - 2):
        files = workspace.blank(f"Team {i:03d}", "olivia", "2026-11-30")
        files["workspace"]["access"]["viewers"] = ["*"]
        workspace.save(config / f"team-{i:03d}", files)
    repo.git.add("--all")
    repo.git.commit("-q", "-m", f"{total} workspaces")


def make_case(root: Path, axis: str, size: int, rows: int) -> dict[str, str]:
    """A config repo for one case, its data loaded; the environment the page process needs."""
    tmp = root / f"{axis}-{size}"
    tmp.mkdir(parents=True)
    components = size if axis == "components" else BASE["workspaces"]
    env = bench_config_repo(tmp, rows, spec_with(components))
    set_workspaces(tmp / "config-repo", size if axis == "workspaces" else BASE["components"])
    return env


def page_run(reruns: int) -> dict[str, float]:
    """In this process (its environment names the config repo): the medians of the three kinds of page run."""
    from streamlit.testing.v1 import AppTest

    from lib.artifacts.components import chart
    from lib.data import engine

    shared: list = []  # the server discovers the installed components once; AppTest would for every new session

    def session() -> AppTest:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
        if shared:
            at._bidi_component_manager = shared[0]
        at.session_state["authentication_status"] = True
        at.session_state["username"] = "vera"
        at.session_state["name"] = "vera"
        at.session_state["slug"] = BENCH_SLUG
        return at

    def timed(at: AppTest) -> float:
        start = time.perf_counter()
        at.run()
        took = time.perf_counter() - start
        if at.exception:
            raise SystemExit(f"the page failed: {at.exception[0].message}")
        return took

    os.chdir(ROOT)
    first = session()
    timed(first)  # untimed: data loaded, shared caches filled
    shared.append(first._bidi_component_manager)
    shown = len(first.metric)
    if first.error:
        raise SystemExit("the page shows an error: " + "; ".join(e.value for e in first.error))
    new_session = [timed(session()) for _ in range(reruns)]
    warm = [timed(first) for _ in range(reruns)]
    cold = []
    for _ in range(reruns):
        with engine.CACHE._lock:
            engine.CACHE._items.clear()
        chart.BUILT._items.clear()
        cold.append(timed(session()))
    return {"new session": statistics.median(new_session), "warm rerun": statistics.median(warm), "cold queries": statistics.median(cold), "kpis": shown}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=100_000, help="rows of the generated 44-column table")
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per case (median); at least 5")
    parser.add_argument("--reruns", type=int, default=5, help="page runs of each kind per process (median)")
    parser.add_argument("--case", help=argparse.SUPPRESS)  # internal: one process's page runs, as JSON
    args = parser.parse_args(argv)
    if args.case:
        print(json.dumps(page_run(args.reruns)))
        return
    runs = max(args.runs, 5)
    kinds = ("new session", "warm rerun", "cold queries")
    with tempfile.TemporaryDirectory() as tmp:
        envs = {}
        for axis, sizes in CASES.items():
            for size in sizes:
                print(f"  making the config repo: {size} {axis}…", file=sys.stderr)
                envs[(axis, size)] = make_case(Path(tmp), axis, size, args.rows)
        seen: dict[tuple[str, int], list[dict[str, float]]] = {case: [] for case in envs}
        for run in range(runs):
            for case, env in envs.items():
                print(f"  run {run + 1}/{runs}: {case[1]} {case[0]}…", file=sys.stderr)
                out = subprocess.run(
                    [sys.executable, "-m", "bench.page_scale", "--case", "x", "--reruns", str(args.reruns)],
                    cwd=ROOT,
                    env={**os.environ, **env, "PYTHONPATH": str(ROOT)},
                    capture_output=True,
                    text=True,
                    check=True,
                )
                seen[case].append(json.loads(out.stdout.strip().splitlines()[-1]))
    med = {case: {k: statistics.median(r[k] for r in results) for k in kinds} for case, results in seen.items()}
    load = os.getloadavg()[0]
    for axis, (small, big) in CASES.items():
        print(f"\n== {axis}: {small} -> {big} ({args.rows:,} rows x 44 columns; medians of {runs} processes x {args.reruns} page runs)")
        rows = [[f"{size} {axis}", *(round(med[(axis, size)][k], 3) for k in kinds), int(seen[(axis, size)][0]["kpis"])] for size in (small, big)]
        rows.append([f"{big} / {small}", *(f"{med[(axis, big)][k] / med[(axis, small)][k]:.2f}x" for k in kinds), ""])
        print_table([axis, *(f"{k} s" for k in kinds), "KPIs drawn"], rows)
        goal = GOALS[axis]
        verdicts = ", ".join(
            f"{k} {med[(axis, big)][k] / med[(axis, small)][k]:.2f}x: {'met' if med[(axis, big)][k] / med[(axis, small)][k] <= goal else 'NOT met'}"
            for k in kinds
        )
        print(f"goal (issue #28): the page at {big} {axis} at most {goal:g}x that at {small} -> {verdicts}")
    print(f"\nload average (1 min) at the end: {load:.2f}")


if __name__ == "__main__":
    main()
