"""Dashboard page rerun time in the real Streamlit script runner (AppTest), 10 components.

    python -m bench.app [--rows N] [--repeat R]

A workspace over the generated wide table with bench.render's 10-component
dashboard is added to a fresh config repo. The first run loads the data; then
each rerun is what a viewer's click (a filter change, a widget) costs: the
whole page script, the render (results cached per data version) and the
element tree.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from .common import ROOT, print_table, wide_table_csv
from .render import SPEC


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args(argv)
    csv = wide_table_csv(args.rows)

    import git
    from streamlit.testing.v1 import AppTest

    from lib import workspace
    from lib.configrepo import ConfigRepo

    with tempfile.TemporaryDirectory() as tmp:
        os.environ.update({"DASHMEM_CONFIG_REPO": f"{tmp}/config-repo", "DASHMEM_CACHE_DIR": f"{tmp}/cache",
                           "DASHMEM_COOKIE_KEY": "x" * 40, "DASHMEM_DATA_DIRS": str(csv.parent)})
        os.environ.pop("ANTHROPIC_API_KEY", None)
        repo = ConfigRepo.open_or_create(Path(tmp) / "config-repo", ROOT / "workspaces")
        folder = repo.path / "wide-bench"
        workspace.save(folder, workspace.blank("Wide bench", "olivia", "2026-11-30"))
        meta = workspace.blank("Wide bench", "olivia", "2026-11-30")["workspace"]
        meta["access"]["viewers"] = ["*"]
        workspace.save(folder, {"workspace": meta, "sources": {"sources": [{"name": "t", "type": "csv", "path": str(csv)}]},
                                "dashboard": SPEC})
        git.Repo(repo.path).git.add("--all")
        git.Repo(repo.path).git.commit("-q", "-m", "bench workspace")

        os.chdir(ROOT)
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
        at.session_state["authentication_status"] = True
        at.session_state["username"] = "vera"
        at.session_state["slug"] = "wide-bench"
        start = time.perf_counter()
        at.run()
        first = time.perf_counter() - start
        assert not at.exception, at.exception
        assert len(at.metric) == 3, "the dashboard did not render"
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            at.run()
            times.append(time.perf_counter() - start)
        shutil.rmtree(Path(tmp) / "cache", ignore_errors=True)
    print_table(["case", "components", "seconds"], [
        ["first open (loads 1 source, renders)", len(SPEC["components"]), round(first, 3)],
        [f"rerun, median of {args.repeat}", len(SPEC["components"]), round(statistics.median(times), 3)],
        ["rerun, slowest", len(SPEC["components"]), round(max(times), 3)],
    ])
    print(f"\n{args.rows:,} rows x 44 columns; AppTest runs the page script as the server does, without a browser.")


if __name__ == "__main__":
    main()
