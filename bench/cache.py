"""Prompt-cache reuse between two new chat sessions in the same workspace, per public dataset.

    python -m bench.cache [--mode edit|query] [--budget TOKENS]

For each file: a workspace with one CSV source, its profile and an auto-drafted
dashboard. Two sessions start with different questions; for the first request
of each we print its size and how much of the second request's bytes repeat
the first's from the start (the identical prefix), serialised in the order the
API builds its cache prefix: tools, system, messages. The target is >= 80 %.
(Both requests share tools and system whole, so the share is the same in the
order system, tools, messages.) "cached" is the part the API can actually
reuse: everything up to the last cache breakpoint before the question (the
dashboard block in edit mode, the profile block in query mode), since cache
hits happen at breakpoints, not at any shared byte.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

from lib.roles.access import OPERATOR

from .common import print_table, public_datasets
from .refresh import make_workspace

QUESTIONS = ("Build a dashboard of the main measures over time and by category.", "Which category grew fastest last year, and where is it weakest?")
TARGET = 0.80


def in_cache_order(request: dict) -> str:
    return json.dumps({"tools": request["tools"], "system": request["system"], "messages": request["messages"]}, ensure_ascii=False)


def cached_bytes(request: dict) -> int:
    """Bytes up to and including the last cache breakpoint of the opening user turn."""
    text = in_cache_order(request)
    marked = [b for b in request["messages"][0]["content"] if "cache_control" in b][-1]
    block = json.dumps(marked, ensure_ascii=False)
    return len(text[: text.index(block) + len(block)].encode())


def prepared_workspace(root: Path, csv: Path) -> dict:
    from lib.artifacts import autodraft
    from lib.data import profile
    from lib.data.refresh import refresh
    from lib.data.snapshots import Warehouse
    from lib.memory import workspace

    folder = make_workspace(root, csv)
    wh = Warehouse(root / "cache" / folder.name)
    report = refresh(folder, wh, user=OPERATOR)
    assert report.ok, report.summary()
    files = workspace.load(folder)[0].data
    files["profile"] = profile.build(wh.tables(), files["sources"]["sources"])
    files["dashboard"] = autodraft.draft(files)
    workspace.save(folder, {"profile": files["profile"], "dashboard": files["dashboard"]})
    return workspace.load(folder)[0].data


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--mode", choices=["edit", "query"], default="edit")
    parser.add_argument("--budget", type=int, help="profile token budget (default: none)")
    args = parser.parse_args(argv)
    files_on_disk = public_datasets()
    os.environ["DASHMEM_DATA_DIRS"] = str(files_on_disk[0].parent)

    from lib.chat.compose import compose

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for csv in files_on_disk:
            files = prepared_workspace(Path(tmp), csv)
            first, second = (compose(files, args.mode, q, profile_budget=args.budget).request for q in QUESTIONS)
            a, b = in_cache_order(first).encode(), in_cache_order(second).encode()
            shared = len(os.path.commonprefix([a, b]))
            share = shared / len(b)
            rows.append([csv.name, len(a), len(b), shared, f"{share:.1%}", f"{cached_bytes(second) / len(b):.1%}", "yes" if share >= TARGET else "NO"])
    print_table(["file", "request 1 bytes", "request 2 bytes", "identical prefix", "prefix share", "cached", ">= 80 %"], rows)
    print(
        f"\n{args.mode} mode; prefix share = identical leading bytes of request 2 / its size (order: tools, system, "
        "messages);\ncached = bytes up to the last cache breakpoint before the question / size of request 2."
    )


if __name__ == "__main__":
    main()
