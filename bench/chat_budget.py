"""What a chat session's first request costs with the workspace's profile budget, against the Chat page before it.

    python -m bench.chat_budget [--budget TOKENS] [--runs N]

Per public dataset, a query-mode request is composed twice from the same
workspace files (the supply-chain demo's memory with that dataset's profile):
once with no profile budget, as the Chat page composed before issue #16, and
once as compose does now, with the workspace policy's `profile_budget`
(default 1,500). Printed side by side: estimated profile and whole-request
tokens (lib/core/tokens.py, which errs high), their ratios, and the median compose
time of N runs as a ratio (fitting a budget searches over renderings). The
last columns say whether the budget holds every column name, which is when
compose warns.
"""

from __future__ import annotations

import argparse
import json
import time

from .common import print_table
from .tokens import dataset_profiles

GOAL = "issue #16 goal: every chat session's profile at most the workspace budget (default 1,500 tokens); a warning when the names do not fit"


def main(argv=None) -> None:
    from lib.chat import compose
    from lib.core import tokens
    from lib.memory import workspace

    from .common import ROOT

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--budget", type=int, default=None, help="the policy's profile_budget (default: the schema's)")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    if args.runs < 5:
        parser.error("--runs must be at least 5 (medians of >= 5 runs)")

    ws, _ = workspace.load(ROOT / "workspaces" / "supply-chain-weekly")
    meta = dict(ws.data["workspace"])
    if args.budget is not None:
        meta["policy"] = {**meta.get("policy", {}), "profile_budget": args.budget}
    rows = []
    for name, prof in dataset_profiles().items():
        files = {**ws.data, "workspace": meta, "profile": prof}
        question = "Which category grew most last year?"

        def before(files=files, question=question) -> compose.Composed:
            return compose.compose(files, "query", question, profile_budget=10**9)  # the Chat page passed no budget

        def now(files=files, question=question) -> compose.Composed:
            return compose.compose(files, "query", question)

        old, new = before(), now()
        times = {}
        for label, fn in (("before", before), ("now", now)):
            spent = []
            for _ in range(args.runs):
                start = time.perf_counter()
                fn()
                spent.append(time.perf_counter() - start)
            times[label] = sorted(spent)[len(spent) // 2]
        request_tokens = {label: tokens.estimate(json.dumps(c.request, ensure_ascii=False)) for label, c in (("before", old), ("now", new))}
        columns = sum(len(t["columns"]) for t in prof["tables"])
        rows.append(
            [
                name,
                columns,
                old.breakdown["profile"],
                new.breakdown["profile"],
                f"{new.profile_budget:,}",
                f"{new.breakdown['profile'] / old.breakdown['profile']:.2f}x",
                f"{request_tokens['now'] / request_tokens['before']:.2f}x",
                f"{times['now'] / times['before']:.2f}x",
                "yes" if not new.diagnostics else "no (warned)",
            ]
        )
    print(f"Chat session's first request (query mode), estimated tokens; compose time median of {args.runs} runs\n")
    print_table(
        [
            "dataset",
            "columns",
            "profile before",
            "profile now",
            "budget",
            "profile now/before",
            "request now/before",
            "compose time now/before",
            "all names fit",
        ],
        rows,
    )
    met = all(int(str(r[3]).replace(",", "")) <= int(str(r[4]).replace(",", "")) for r in rows)
    print(f"\n{GOAL}: {'met' if met else 'NOT met'} on {len(rows)} datasets")


if __name__ == "__main__":
    main()
