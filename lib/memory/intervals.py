"""Intervals in the workspace's memory: `refresh.every` and a subscription's `every` (15m, 1h, 1d, 1w, or the
unit in words: 30 minutes, 1 hour, 2 days, 1 week), as workspace.schema.json's pattern allows them."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from ..core.errors import DashmemError
from . import schemas

UNITS = {"m": dt.timedelta(minutes=1), "h": dt.timedelta(hours=1), "d": dt.timedelta(days=1), "w": dt.timedelta(weeks=1)}
UNIT_NAMES = {"m": "min", "h": "h", "d": "d", "w": "wk"}


class ScheduleError(DashmemError, ValueError):
    """A `refresh.every` that is not an interval; the message names the file and the accepted forms."""


def parse_every(text: Any, where: str = "workspace.yaml: refresh.every") -> dt.timedelta:
    """The interval `text` (15m, 1h, 1d, 1w, or 1 hour, 2 days, 1 week) as a timedelta, else ScheduleError."""
    match = re.fullmatch(schemas.pattern("workspace", "refresh", "every"), text) if isinstance(text, str) else None
    if match is None:
        raise ScheduleError(
            f"{where}: {text!r} is not an interval; write a whole number and a unit, m, h, d or w (15m, 1h, 1d, 1w), "
            "or the unit in words (30 minutes, 1 hour, 2 days, 1 week)"
        )
    count, unit = re.fullmatch(r"(\d+) ?([a-z]+)", text).groups()  # pyright: ignore[reportOptionalMemberAccess]  # the pattern matched
    return int(count) * UNITS[unit[0]]


def show_interval(every: dt.timedelta) -> str:
    """`1 h`, `15 min`, `2 d`, `1 wk`: the largest unit that divides the interval."""
    for unit in ("w", "d", "h", "m"):
        count, rest = divmod(every, UNITS[unit])
        if not rest:
            return f"{count} {UNIT_NAMES[unit]}"
    return str(every)
