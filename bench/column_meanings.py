"""How the auto-draft aggregates each labelled column, lib/data/colroles.py against the rules it replaced.

    python -m bench.column_meanings

Reads tests/data/column_meanings.yaml (real columns sampled from ../shared/datasets, then made ones),
profiles each column with lib/data/profile.py and compares the aggregation with its label. The baseline is
the previous rule, kept here verbatim: roles from name patterns (`_id$`, `zip`, ...) and a measure
averaged when its name matched a word list (`rate|age|price|...`), summed otherwise.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from .common import print_table

LABELLED = Path(__file__).resolve().parents[1] / "tests" / "data" / "column_meanings.yaml"
GOAL = "issue #16: never a sum of identifiers, years or codes; sum only additive measures (every label right)"

# The rules before lib/data/colroles.py (lib/data/profile.py `_role`, lib/artifacts/autodraft.py `AVERAGED`).
_ID_NAME = re.compile(r"(^id$|_id$|^id_|key$|code$|_no$|number$|^uuid)", re.IGNORECASE)
_NOT_MEASURE = re.compile(r"(zip|postal|postcode|bbl|fips|phone|latitude|longitude|^lat$|^lon$|^lng$|coordinate|computed_region|_code$|^code$)", re.IGNORECASE)
_TIME_NAME = re.compile(r"(^|[_\s])(year|yr|month|week|date|day|time)([_\s]|$)", re.IGNORECASE)
_AVERAGED = re.compile(r"(rate|ratio|share|pct|percent|attainment|score|age|price|avg|mean|margin|discount|latitude|longitude|temperature)", re.I)


def baseline(column: dict, rows: int) -> str:
    """The old rule's aggregation of a profiled column: sum, mean or none."""
    from lib.data import coltypes

    col, kind, fam = column["name"], column["type"], coltypes.family(column["type"])
    nonnull = rows * (1 - (column.get("null_share") or 0))
    distinct = column.get("distinct") or 0
    if fam != "number":
        return "none"
    if _TIME_NAME.search(col) and column.get("min") is not None and 1800 <= column["min"] and column["max"] <= 2200:
        return "none"
    unique = nonnull > 20 and distinct >= 0.95 * nonnull
    if _ID_NAME.search(col) and unique:
        return "none"
    if _NOT_MEASURE.search(col) or (_ID_NAME.search(col) and kind.upper() in ("BIGINT", "INTEGER")):
        return "none"
    return "mean" if _AVERAGED.search(col) else "sum"


def main() -> None:
    from lib.data import profile
    from tests.data.test_colroles import column_table

    cases = yaml.safe_load(LABELLED.read_text(encoding="utf-8"))
    tallies: dict[str, dict[str, int]] = {}
    for case in cases:
        group = "shared datasets" if case["from"].startswith("../shared/datasets/") else "made"
        column = profile.profile_table("t", column_table(case))["columns"][0]
        found = {"colroles": column.get("aggregate") or "none", "previous rule": baseline(column, len(case["values"]))}
        for who, aggregation in found.items():
            t = tallies.setdefault(f"{group}|{who}", {"n": 0, "right": 0, "wrong_sums": 0})
            t["n"] += 1
            t["right"] += aggregation == case["expected"]
            t["wrong_sums"] += aggregation == "sum" and case["expected"] != "sum"
    rows = []
    for group in ("shared datasets", "made"):
        new, old = tallies[f"{group}|colroles"], tallies[f"{group}|previous rule"]
        rows.append(
            [
                group,
                new["n"],
                f"{new['right']}/{new['n']} ({new['right'] / new['n']:.0%})",
                f"{old['right']}/{old['n']} ({old['right'] / old['n']:.0%})",
                new["wrong_sums"],
                old["wrong_sums"],
            ]
        )
    n = sum(t["n"] for k, t in tallies.items() if k.endswith("colroles"))
    right = {who: sum(t["right"] for k, t in tallies.items() if k.endswith(who)) for who in ("colroles", "previous rule")}
    wrong = {who: sum(t["wrong_sums"] for k, t in tallies.items() if k.endswith(who)) for who in ("colroles", "previous rule")}
    rows.append(
        [
            "all",
            n,
            f"{right['colroles']}/{n} ({right['colroles'] / n:.0%})",
            f"{right['previous rule']}/{n} ({right['previous rule'] / n:.0%})",
            wrong["colroles"],
            wrong["previous rule"],
        ]
    )
    print_table(["columns", "n", "accuracy colroles", "accuracy previous rule", "wrong sums colroles", "wrong sums previous rule"], rows)
    print(f"goal: {GOAL}")


if __name__ == "__main__":
    main()
