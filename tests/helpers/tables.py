"""Tables the snapshot tests write, the same in every process that makes them."""

from __future__ import annotations

import pyarrow as pa

from lib.data.snapshots import OWN_FILE_BYTES


def big_table(seed: int = 1, rows: int = 300_000) -> pa.Table:
    """A table over OWN_FILE_BYTES (so it gets a file of its own), the same for the same seed in any process."""
    import numpy as np

    rng = np.random.default_rng(seed)
    table = pa.table(
        {
            "id": np.arange(rows),
            "x": np.round(rng.random(rows) * 1000, 2),
            "k": rng.integers(0, 9, rows),
            "cat": pa.array(np.array(["north", "south", "east"])[rng.integers(0, 3, rows)]),
        }
    )
    assert table.nbytes >= OWN_FILE_BYTES
    return table


def orders_csv_text(days: int = 60) -> str:
    """Daily orders per site and channel, amounts and quantities: a second source for the supply-chain demo."""
    import datetime as dt

    rows = ["day,site,channel,amount,quantity"]
    for d in range(days):
        for i, site in enumerate(["Brno", "Zagreb", "Lyon"]):
            for j, channel in enumerate(["web", "store"]):
                rows.append(f"{dt.date(2026, 9, 1) + dt.timedelta(days=d)},{site},{channel},{100 + d * 3 + i * 17 + j * 5}.5,{3 + (d + i + j) % 7}")
    return "\n".join(rows) + "\n"
