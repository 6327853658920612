"""Generate the demo data of the `supply-chain-weekly` workspace.

Two weeks of daily gate volumes for six sites: `data/gates.csv` is the
current week (2026-W47), `data/next_week/gates.csv` the week after (2026-W48),
which the refresh demo swaps in. Deterministic: the same files every run.

    python scripts/make_supply_chain_data.py [WORKSPACE_DIR]
"""

from __future__ import annotations

import csv
import datetime as dt
import random
import sys
from pathlib import Path

SITES = ["Brno", "Leipzig", "Lyon", "Porto", "Poznan", "Rotterdam"]
GATES = ["Supply", "Orders", "Process"]
# Typical daily target per gate, and how well each site tends to do.
TARGETS = {"Supply": 1200, "Orders": 900, "Process": 1500}
SITE_SKILL = {"Brno": 0.97, "Leipzig": 0.99, "Lyon": 0.92, "Porto": 0.95, "Poznan": 0.9, "Rotterdam": 1.0}

COLUMNS = ["day", "week", "site", "gate", "target", "actual", "attainment"]


def week_rows(monday: dt.date, seed: int, drift: float) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for offset in range(7):
        day = monday + dt.timedelta(days=offset)
        weekend = day.weekday() >= 5
        for site in SITES:
            for gate in GATES:
                target = round(TARGETS[gate] * (0.5 if weekend else 1.0) * rng.uniform(0.9, 1.1))
                level = SITE_SKILL[site] + drift + rng.gauss(0, 0.04)
                actual = max(0, round(target * level))
                rows.append(
                    {
                        "day": day.isoformat(),
                        "week": f"{day.isocalendar().year}-W{day.isocalendar().week:02d}",
                        "site": site,
                        "gate": gate,
                        "target": target,
                        "actual": actual,
                        "attainment": f"{actual / target:.4f}",
                    }
                )
    return rows


def write(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def main(workspace: Path) -> None:
    write(workspace / "data" / "gates.csv", week_rows(dt.date(2026, 11, 16), seed=47, drift=0.0))
    write(workspace / "data" / "next_week" / "gates.csv", week_rows(dt.date(2026, 11, 23), seed=48, drift=-0.03))


if __name__ == "__main__":
    default = Path(__file__).resolve().parent.parent / "workspaces" / "supply-chain-weekly"
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else default)
