"""What one scheduled `refresh --all` costs against the obvious cron setup it replaces (issue #18, item 6).

    python -m bench.refresh_all [--workspaces 8] [--repeat 5]

A config repo of N published workspaces (the two demo ones and copies of them). Side by side, medians of
`--repeat` runs, the two taking turns run by run, as a ratio to the baseline doing the same work: one process
per workspace (`python -m lib refresh WS`, one cron line each, run one after another) against one
`python -m lib refresh --all REPO` (one process, one lock). Both on data already loaded (what nearly every
scheduled run finds: checked, unchanged) and on a first load (cache emptied before each run).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .common import ROOT, compile_checkout, interleaved_medians, print_table

GOAL = "issue #18 item 6 states no time goal; expected: --all no slower than one process per workspace (<= 1.0x)"


def _config_repo(tmp: Path, count: int) -> Path:
    from lib.repo.configrepo import ConfigRepo

    templates = tmp / "templates"
    demos = ["gdp-explorer", "supply-chain-weekly"]
    for n in range(count):
        slug = demos[n % 2] if n < 2 else f"{demos[n % 2]}-{n}"
        shutil.copytree(ROOT / "workspaces" / demos[n % 2], templates / slug)
    return ConfigRepo.open_or_create(tmp / "config-repo", templates).path


def _run(args: list[str], env: dict[str, str]) -> None:
    done = subprocess.run([sys.executable, "-m", "lib", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=600)
    if done.returncode != 0:  # a failed refresh is quick: timing it would flatter whichever side failed
        sys.exit(f"`python -m lib {' '.join(args)}` failed:\n{done.stdout}{done.stderr}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--workspaces", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    compile_checkout()
    with tempfile.TemporaryDirectory(prefix="bench-refresh-all-") as folder:
        tmp = Path(folder)
        cache = tmp / "cache"
        env = {**os.environ, "PYTHONPATH": str(ROOT), "DASHMEM_CONFIG_REPO": str(tmp / "config-repo"), "DASHMEM_CACHE_DIR": str(cache)}
        os.environ.update({k: env[k] for k in ("DASHMEM_CONFIG_REPO", "DASHMEM_CACHE_DIR")})
        repo = _config_repo(tmp, args.workspaces)
        slugs = sorted(p.name for p in repo.iterdir() if (p / "workspace.yaml").exists())

        def per_workspace() -> None:
            for slug in slugs:
                _run(["refresh", str(repo / slug)], env)

        def all_at_once() -> None:
            _run(["refresh", "--all", str(repo)], env)

        def nothing() -> None:
            pass

        def empty_cache() -> None:
            shutil.rmtree(cache, ignore_errors=True)

        all_at_once()  # the data loaded once: the "unchanged" case checks it
        medians = interleaved_medians(
            {
                "data loaded (unchanged)": {"per workspace": (nothing, per_workspace), "--all": (nothing, all_at_once)},
                "first load (cache empty)": {"per workspace": (empty_cache, per_workspace), "--all": (empty_cache, all_at_once)},
            },
            args.repeat,
        )
    print(f"refresh of {len(slugs)} published workspaces, median of {args.repeat} runs each (seconds)")
    print_table(
        ["case", "one process per workspace (baseline)", "refresh --all", "ratio --all / baseline"],
        [[case, m["per workspace"], m["--all"], f"{m['--all'] / m['per workspace']:.2f}x"] for case, m in medians.items()],
    )
    print(f"goal: {GOAL}")


if __name__ == "__main__":
    main()
