"""The "updated data" of the ablation study: V2 made from V1, deterministically.

V2 has V1's columns and types, its rows in a shuffled order, and every
measure perturbed by a uniform factor in [-15 %, +15 %]. Only columns the
profile calls measures move: a year, a ZIP code or a row key moved by 15 % is
not updated data but noise, and would change what the column means. Nulls
stay null. Integers stay integers: the change is truncated towards zero, so
it never exceeds 15 % of the value and the column keeps its type (and so its
place in the recorded schema a refresh compares against).
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

SEED = 20261130
SPREAD = 0.15


def measure_columns(profile: dict) -> list[str]:
    """Numeric columns the profile gives the role `measure`, in table order."""
    return [c["name"] for table in profile.get("tables") or [] for c in table["columns"] if c.get("role") == "measure"]


def updated_version(table: pa.Table, measures: Iterable[str], seed: int = SEED, spread: float = SPREAD) -> pa.Table:
    """V2 of `table`: rows shuffled, each value of each measure scaled by 1 + U(-spread, spread)."""
    rng = np.random.default_rng(seed)
    shuffled = table.take(pa.array(rng.permutation(table.num_rows)))
    for name in measures:
        index = shuffled.schema.get_field_index(name)
        kind = shuffled.schema.field(index).type
        column = shuffled.column(index)
        # One draw per row for every measure, nulls included, so the draws do not depend on where nulls are.
        factor = rng.uniform(-spread, spread, shuffled.num_rows)
        missing = pc.is_null(column).to_numpy(zero_copy_only=False)  # pyright: ignore[reportAttributeAccessIssue]  # pyarrow.compute makes its kernels at import: no stubs
        values = column.to_numpy(zero_copy_only=False)
        if pa.types.is_integer(kind):
            values = np.where(missing, 0, values).astype(np.int64)
            moved = values + np.trunc(values * factor).astype(np.int64)
        else:
            moved = np.where(missing, 0.0, values).astype(np.float64) * (1 + factor)
        shuffled = shuffled.set_column(index, shuffled.schema.field(index), pa.array(moved, mask=missing).cast(kind))
    return shuffled
