"""What sharing one config repo between app servers costs (issue #15, lib/repo/replica.py).

    python -m bench.replica [--repeat 5]

Side by side, medians of `--repeat` runs, as ratios to the baseline doing the same work on a config repo
that is not shared:
- a page run's config-repo work (`workspaces_for`) with `pull_if_due` before it, when no pull is due
  (what nearly every page run pays), and when one is due with nothing new (one `git fetch`);
- a publish (merge, full checks, commit) on a replica, which also fetches and pushes, against the same
  publish on a repo of its own.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import tempfile
import time
from pathlib import Path

from lib.ops import publish

from .common import ROOT, median_time, print_table

GOAL = "issue #15: pull cheaply, a git fetch at most every N seconds per process; publish pushes with a lock"
SLUG = "supply-chain-weekly"


def _open(root: Path, remote: Path | None):
    from lib.repo.configrepo import ConfigRepo

    return ConfigRepo.open_or_create(root, ROOT / "workspaces", str(remote) if remote else None)


def _publish_times(repo, repeat: int) -> list[float]:
    from lib.memory import workspace
    from lib.roles.access import User

    olivia = User("olivia", app_role="owner")
    times = []
    for n in range(repeat):
        task = copy.deepcopy(workspace.load(repo.draft(olivia, SLUG).workspace_path)[0].data["task"])
        task["rules"][0]["text"] = f"Benchmark edit {n}."
        repo.save(olivia, SLUG, {"task": task}, f"edit {n}")
        start = time.perf_counter()
        publish.publish(repo, olivia, SLUG)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    repeat = max(5, args.repeat)
    import git

    from lib.roles.access import User

    with tempfile.TemporaryDirectory(prefix="bench-replica-") as tmp:
        tmp_path = Path(tmp)
        os.environ["GIT_CONFIG_GLOBAL"] = str(tmp_path / "gitconfig")
        os.environ["GIT_CONFIG_NOSYSTEM"] = "1"
        os.environ["DASHMEM_CACHE_DIR"] = str(tmp_path / "cache")
        remote = tmp_path / "shared.git"
        git.Repo.init(remote, bare=True, initial_branch="main")
        alone, shared = _open(tmp_path / "alone" / "config-repo", None), _open(tmp_path / "shared" / "config-repo", remote)
        _open(tmp_path / "other" / "config-repo", remote)  # a second server, so the remote has company
        vera = User("vera")

        page_alone = median_time(lambda: alone.workspaces_for(vera), repeat * 20)
        shared.pull_if_due(3600)  # the first pull of the process; the next is due in an hour
        page_not_due = median_time(lambda: (shared.pull_if_due(3600), shared.workspaces_for(vera)), repeat * 20)
        page_due = median_time(lambda: (shared.pull_if_due(0), shared.workspaces_for(vera)), repeat)

        publish_alone = statistics.median(_publish_times(alone, repeat))
        publish_shared = statistics.median(_publish_times(shared, repeat))

    print(GOAL)
    print_table(
        ["work", "baseline (not shared)", "shared config repo", "ratio"],
        [
            ["page run, no pull due", "workspaces_for", "pull_if_due + workspaces_for", f"{page_not_due / page_alone:.2f}x"],
            ["page run, pull due, nothing new", "workspaces_for", "git fetch + workspaces_for", f"{page_due / page_alone:.1f}x"],
            ["publish (merge, checks, commit)", "local publish", "fetch + publish + push", f"{publish_shared / publish_alone:.2f}x"],
        ],
    )
    print(f"\nmedians of {repeat} runs ({repeat * 20} for the page runs with no pull due); the baseline page run reads cached")
    print("metas (no git process), so a due pull is large beside it: it is paid once per DASHMEM_CONFIG_PULL_SECONDS per process")


if __name__ == "__main__":
    main()
