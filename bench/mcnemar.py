"""The exact McNemar test for paired pass/fail outcomes, without scipy.

Two conditions run on the same cells (dataset, run). Only the discordant
cells carry information: b where the first passes and the second fails, c
the other way round. Under the null hypothesis each discordant cell is a fair
coin, so min(b, c) follows Binomial(b + c, 1/2); the two-sided p-value is
twice its lower tail, capped at 1.
"""

from __future__ import annotations

from math import comb
from typing import Sequence


def discordant(first: Sequence[bool], second: Sequence[bool]) -> tuple[int, int]:
    """(b, c): cells where only `first` passed, and cells where only `second` passed."""
    if len(first) != len(second):
        raise ValueError(f"paired outcomes differ in length: {len(first)} and {len(second)}")
    b = sum(1 for x, y in zip(first, second) if x and not y)
    c = sum(1 for x, y in zip(first, second) if y and not x)
    return b, c


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact p-value for b and c discordant pairs; 1.0 when there are none."""
    if b < 0 or c < 0:
        raise ValueError("discordant counts cannot be negative")
    n = b + c
    if n == 0:
        return 1.0
    # Integer arithmetic up to the last step keeps the tail exact for any n.
    tail = sum(comb(n, k) for k in range(min(b, c) + 1))
    return min(1.0, 2 * tail / 2**n)
