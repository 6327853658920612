"""Shared by the benchmarks: where the public datasets are, the generated wide table, and table printing."""

from __future__ import annotations

import compileall
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lib.core import settings  # after the path is set

DATASETS = settings.get("DASHMEM_DATASETS")
PUBLIC = ["gdp.csv", "adult.csv", "global_superstore_sample1000.csv", "global_superstore.csv", "nyc311_sample5000.csv", "nyc311_api_1000.csv"]
BENCH_CACHE = ROOT / ".data" / "bench"


def compile_checkout() -> None:
    """lib/ as bytecode before timing fresh processes, as an installed package (and `make run`) has it.

    Where PYTHONDONTWRITEBYTECODE is set (this kind of machine, many container images) Python never writes it, and
    each timed process would compile lib/ from source, 0.2 s that no installed user pays.
    """
    compileall.compile_dir(str(ROOT / "lib"), quiet=1, workers=0)


def public_datasets() -> list[Path]:
    missing = [name for name in PUBLIC if not (DATASETS / name).exists()]
    if missing:
        sys.exit(f"public datasets missing from {DATASETS}: {', '.join(missing)} (set DASHMEM_DATASETS)")
    return [DATASETS / name for name in PUBLIC]


def median_time(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for n, row in enumerate(cells):
        print("  ".join(c.rjust(w) if n and _numeric(c) else c.ljust(w) for c, w in zip(row, widths)).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _numeric(text: str) -> bool:
    return text.replace(",", "").replace(".", "").replace("x", "").replace("-", "").replace("%", "").strip().isdigit()


def wide_table_csv(rows: int = 1_000_000) -> Path:
    """A generated rows x 44 CSV (deterministic): ids, measures, categories, dates and free text."""
    path = BENCH_CACHE / f"wide_{rows}.csv"
    if path.exists():
        return path
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pacsv

    rng = np.random.default_rng(42)
    cols: dict[str, object] = {}
    cols["row_id"] = np.arange(rows)
    cols["order_id"] = rng.integers(0, rows // 3, rows)
    cols["customer_id"] = rng.integers(0, 50_000, rows)
    cols["product_code"] = pa.array([f"P-{i:05d}" for i in rng.integers(0, 5_000, rows)])
    for i in range(16):
        cols[f"measure_{i:02d}"] = np.round(rng.lognormal(3 + i % 4, 1, rows), 2)
    for i in range(8):
        cols[f"count_{i:02d}"] = rng.poisson(5 + i, rows)
    levels = [5, 8, 12, 20, 50, 100, 300, 1000, 3, 40]
    for i, k in enumerate(levels):
        names = np.array([f"cat{i}_{j}" for j in range(k)])
        cols[f"category_{i:02d}"] = pa.array(names[rng.zipf(1.5, rows) % k])
    start = np.datetime64("2020-01-01")
    for i in range(3):
        cols[f"date_{i}"] = pa.array(start + rng.integers(0, 1500, rows).astype("timedelta64[D]"))
    words = np.array(["alpha", "beta", "gamma", "delta", "omega", "north", "south", "late", "early", "damaged"])
    for i in range(3):
        picks = rng.integers(0, len(words), (rows, 3))
        cols[f"note_{i}"] = pa.array([" ".join(w) for w in words[picks]]) if i else pa.array([f"ref {n}" for n in rng.integers(0, rows, rows)])
    table = pa.table(cols)
    assert table.num_columns == 44, table.num_columns
    BENCH_CACHE.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    pacsv.write_csv(table, tmp)
    tmp.rename(path)
    return path


def interleaved_medians(cases: dict[object, dict[str, tuple[Callable[[], object], Callable[[], object]]]], repeat: int) -> dict[object, dict[str, float]]:
    """Median seconds of each (untimed setup, timed fn) of each case, the cases taking turns run by run,
    so a noisy moment of a shared machine falls on every case alike rather than on one."""
    times: dict[object, dict[str, list[float]]] = {case: {key: [] for key in fns} for case, fns in cases.items()}
    for _ in range(repeat):
        for case, fns in cases.items():
            for key, (setup, fn) in fns.items():
                setup()
                start = time.perf_counter()
                fn()
                times[case][key].append(time.perf_counter() - start)
    return {case: {key: statistics.median(v) for key, v in by_key.items()} for case, by_key in times.items()}


# --------------------------------------------------------------------------- the app in a real browser (bench.app, bench.load)

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
BENCH_SLUG = "wide-bench"
VIEWER = ("vera", "vera-demo")


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100), nearest rank: with few samples p95 is the slowest, never an interpolation below it."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, int(-(-len(ordered) * q // 100)) - 1))]


def bench_config_repo(tmp: Path, rows: int, spec: dict) -> dict[str, str]:
    """A config repo in `tmp` with the wide table's workspace (every user may view it), its data already loaded.

    Returns the environment the app server needs to serve it.
    """
    import os

    import git

    from lib.data.refresh import refresh
    from lib.data.snapshots import Warehouse
    from lib.memory import workspace
    from lib.repo.configrepo import ConfigRepo
    from lib.roles.access import OPERATOR

    csv = wide_table_csv(rows)
    env = {
        "DASHMEM_CONFIG_REPO": str(tmp / "config-repo"),
        "DASHMEM_CACHE_DIR": str(tmp / "cache"),
        "DASHMEM_COOKIE_KEY": "x" * 40,
        "DASHMEM_DATA_DIRS": str(csv.parent),
    }
    os.environ.update(env)
    os.environ.pop("ANTHROPIC_API_KEY", None)
    repo = ConfigRepo.open_or_create(tmp / "config-repo", ROOT / "workspaces")
    folder = repo.path / BENCH_SLUG
    files = workspace.blank("Wide bench", "olivia", "2026-11-30")
    files["workspace"]["access"]["viewers"] = ["*"]
    workspace.save(folder, {**files, "sources": {"sources": [{"name": "t", "type": "csv", "path": str(csv)}]}, "dashboard": spec})
    git.Repo(repo.path).git.add("--all")
    git.Repo(repo.path).git.commit("-q", "-m", "bench workspace")
    report = refresh(repo.published_path(BENCH_SLUG), Warehouse.for_workspace(repo.published_path(BENCH_SLUG)), user=OPERATOR)
    assert report.ok, report.headline()
    return env


class AppServer:
    """`streamlit run app.py` on a free local port, for the browser benches; a context manager."""

    def __init__(self, env: dict[str, str], log: Path, cpus: str | None = None):
        import os
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, **env, "PYTHONPATH": str(ROOT)}
        self.env.pop("ANTHROPIC_API_KEY", None)
        self.log = log
        self.cpus = cpus  # e.g. "0": the server runs on these cores only (taskset), its threads included
        self.proc = None

    def __enter__(self) -> "AppServer":
        import subprocess
        import urllib.request

        with self.log.open("a") as out:
            self.proc = subprocess.Popen(
                (["taskset", "-c", self.cpus] if self.cpus else [])
                + [
                    sys.executable,
                    "-m",
                    "streamlit",
                    "run",
                    str(ROOT / "app.py"),
                    "--server.headless",
                    "true",
                    "--server.port",
                    str(self.port),
                    "--server.address",
                    "127.0.0.1",
                    "--browser.gatherUsageStats",
                    "false",
                ],
                cwd=ROOT,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                if urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=1).read() == b"ok":
                    return self
            except OSError:
                time.sleep(0.2)
        self.__exit__()
        sys.exit("streamlit did not start:\n" + self.log.read_text(errors="replace")[-3000:])

    def __exit__(self, *exc) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except Exception:
                self.proc.kill()
                self.proc.wait(timeout=10)


# The dashboard is drawn when every chart has its canvas or SVG, the KPIs are there and the script run has finished.
DRAWN_JS = """([charts, metrics]) => {
    const app = document.querySelector('[data-testid="stApp"]');
    if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
    if (document.querySelectorAll('[data-testid="stMetric"]').length < metrics) return false;
    const drawn = document.querySelectorAll('[data-testid="stVegaLiteChart"] canvas, [data-testid="stVegaLiteChart"] svg.marks');
    return drawn.length >= charts;
}"""


async def open_dashboard(browser, url: str, charts: int, metrics: int, timeout_s: float, user: tuple[str, str] = VIEWER) -> float | None:
    """Seconds from navigation (a new browser context: no cookie) through signing in to the dashboard drawn; None if stuck."""
    context = await browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = await context.new_page()
        started = time.perf_counter()
        await page.goto(f"{url}/?ws={BENCH_SLUG}")
        await page.get_by_label("Username").fill(user[0], timeout=timeout_s * 1000)
        await page.get_by_role("textbox", name="Password").fill(user[1])
        await page.get_by_role("button", name="Login").click()
        await page.wait_for_function(DRAWN_JS, arg=[charts, metrics], timeout=timeout_s * 1000, polling=100)
        return time.perf_counter() - started
    except Exception:  # a playwright TimeoutError: the session is stuck
        return None
    finally:
        await context.close()


async def signed_in_page(browser, url: str, charts: int, metrics: int, timeout_s: float, user: tuple[str, str] = VIEWER):
    """A page of a new browser context signed in on the dashboard, its sign-in cookie kept; the caller closes its context.

    None if the sign-in did not reach the drawn dashboard within `timeout_s`.
    """
    context = await browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = await context.new_page()
        await page.goto(f"{url}/?ws={BENCH_SLUG}")
        await page.get_by_label("Username").fill(user[0], timeout=timeout_s * 1000)
        await page.get_by_role("textbox", name="Password").fill(user[1])
        await page.get_by_role("button", name="Login").click()
        await page.wait_for_function(DRAWN_JS, arg=[charts, metrics], timeout=timeout_s * 1000, polling=100)
        await page.wait_for_function("document.cookie.includes('dashmem_auth=')", timeout=timeout_s * 1000)
        return page
    except Exception:  # a playwright TimeoutError
        await context.close()
        return None


async def reload_dashboard(page, charts: int, metrics: int, timeout_s: float) -> float | None:
    """Seconds from a reload of a signed-in page (a new Streamlit session, signed in by the cookie) to the dashboard drawn; None if stuck."""
    try:
        started = time.perf_counter()
        await page.reload(timeout=timeout_s * 1000)
        await page.wait_for_function(DRAWN_JS, arg=[charts, metrics], timeout=timeout_s * 1000, polling=100)
        return time.perf_counter() - started
    except Exception:  # a playwright TimeoutError: the session is stuck
        return None


# Counts the script runs a page sees (each time the app's script state turns to "running"); an init script.
COUNT_RUNS_JS = """
window.__runs = 0;
new MutationObserver(() => {
  const app = document.querySelector('[data-testid="stApp"]');
  const now = app && app.getAttribute('data-test-script-state');
  if (now === 'running' && window.__last !== 'running') window.__runs += 1;
  window.__last = now;
}).observe(document, {subtree: true, attributes: true, attributeFilter: ['data-test-script-state']});
"""


def process_tree_cpu(root: int) -> float:
    """CPU seconds of a process and all its descendants, those still running and those already reaped (Linux /proc)."""
    import os

    children: dict[int, list[int]] = {}
    stats: dict[int, list[str]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                text = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) ", field 3 (state) is fields[0]
            stats[int(entry)] = fields
            children.setdefault(int(fields[1]), []).append(int(entry))
    tick = os.sysconf("SC_CLK_TCK")
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            # utime, stime, and cutime, cstime: the children it has waited for, which /proc no longer lists
            total += sum(int(v) for v in stats[pid][11:15]) / tick
        todo.extend(children.get(pid, []))
    return total
