"""Data-profile size in tokens per public dataset, beside the paper's figures (its Table 3).

    python -m bench.tokens [--budget 1000]

For each file: tokens of the raw CSV, of its header plus first 50 rows (the
paper's truncation baseline), and of our model-facing profile, by default and
under a token budget. Tokens come from Anthropic's count_tokens API when
ANTHROPIC_API_KEY is set, otherwise from the offline estimate in lib/tokens.py;
the output says which.
"""
from __future__ import annotations

import argparse
import os

from .common import print_table, public_datasets

# Paper, Table 3: summary tokens by table width (columns -> tokens).
PAPER_SUMMARY = {4: 339, 15: 922, 24: 1584, 44: 4486}
PAPER_MEANS = {"raw": 789_100, "first 50 rows": 4_400, "summary": 1_800}


def paper_figure(columns: int) -> int | None:
    """The paper's summary size for this width; the NYC 311 files (41, 47 columns) stand for its 44."""
    if columns in PAPER_SUMMARY:
        return PAPER_SUMMARY[columns]
    return PAPER_SUMMARY[44] if 40 <= columns <= 48 else None


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=1000)
    args = parser.parse_args(argv)
    files = public_datasets()
    os.environ["DASHMEM_DATA_DIRS"] = str(files[0].parent)

    from pathlib import Path

    from lib import profile, tokens
    from lib.connectors import FetchContext, fetch

    method = tokens.count("x")[1]
    rows, totals = [], {"raw": [], "first 50 rows": [], "summary": []}
    for csv in files:
        text = csv.read_text(encoding="utf-8")
        head = "".join(text.splitlines(keepends=True)[:51])
        table = fetch({"name": "data", "type": "csv", "path": str(csv)}, FetchContext(workspace_path=Path(".")))
        prof = profile.build({"data": table})
        raw_t, head_t = tokens.count(text)[0], tokens.count(head)[0]
        full_t, budget_t = tokens.count(profile.text(prof))[0], tokens.count(profile.text(prof, budget=args.budget))[0]
        paper = paper_figure(table.num_columns)
        totals["raw"].append(raw_t)
        totals["first 50 rows"].append(head_t)
        totals["summary"].append(full_t)
        rows.append([csv.name, table.num_columns, raw_t, head_t, full_t, budget_t, paper if paper else "-",
                     f"{full_t / paper:.0%}" if paper else "-", f"{raw_t / full_t:,.0f}x", f"{head_t / full_t:.1f}x"])
    print_table(["file", "cols", "raw CSV", "first 50 rows", "our profile", f"profile @{args.budget}", "paper profile",
                 "ours/paper", "raw/profile", "head/profile"], rows)
    print()
    means = [[k, round(sum(v) / len(v)), PAPER_MEANS[k]] for k, v in totals.items()]
    print_table(["strategy", "our mean", "paper mean"], means)
    print(f"\ntokens: {method}. The paper's 44-column figure is set beside both NYC 311 files (41 and 47 columns).")


if __name__ == "__main__":
    main()
