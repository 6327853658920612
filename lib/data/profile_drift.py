"""Whether profile.yaml still describes the data served, and regenerating it when it does not.

A refresh that fits the dashboard may still change what the model should be
told: a new column (which the model never hears of until someone profiles
again), or a column whose values moved a lot. `drift` compares the served
snapshot with profile.yaml and lists what changed, by these thresholds:

    new table or column   any table or column the profile does not list
    null share            moved by NULL_SHARE_SHIFT (10 percentage points) or more
    range                 min or max now outside the recorded range by more than
                          RANGE_GROWTH (25 %) of its width (numbers and times;
                          a recorded range of width 0: any change)
    top values            a value the profile does not list among a column's
                          top values now holds NEW_TOP_SHARE (5 %) of the rows or more

Row counts alone do not count: every refresh changes them. A live table's
snapshot is an empty stand-in, so for it only new columns are looked for
(its statistics live in its database; lib/data/live_profile.py).

Nothing is stored: the verdict is computed from the snapshot (the one every
process serves) and profile.yaml (the file every process reads), so it is the
same in any process and after a restart, and it cannot itself go stale. It is
memoised per process on the pair (snapshot, profile.yaml's content).

`update_in_draft` regenerates the profile from the served data with
`profile.build`, the function behind `python -m lib profile --write`, and saves
it to the person's draft (the steward role is checked there). The joins a
steward declared or rejected are in sources.yaml, which it never writes.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from ..memory.workspace import load
from . import profile
from .sandbox import describe
from .snapshots import Warehouse

if TYPE_CHECKING:
    import pyarrow as pa

    from ..repo.configrepo import ConfigRepo
    from ..roles.access import User
    from .snapshots import Snapshot

NULL_SHARE_SHIFT = 0.10
RANGE_GROWTH = 0.25
NEW_TOP_SHARE = 0.05


@dataclass(frozen=True)
class Drift:
    table: str
    column: str | None  # None: the whole table is new
    kind: str  # new_table | new_column | null_share | range | top_values
    message: str


# --------------------------------------------------------------------------- comparing two profiles


def compare(recorded: Mapping[str, Any] | None, current: Mapping[str, Any], *, stats_for: set[str] | None = None) -> list[Drift]:
    """What `current` (a profile of the served data) shows that `recorded` (profile.yaml) does not.

    `stats_for` names the tables whose statistics are compared (default: all);
    for the others only new columns are looked for.
    """
    known = {t["name"]: t for t in (recorded or {}).get("tables") or []}
    out: list[Drift] = []
    for table in current.get("tables") or []:
        name = table["name"]
        old = known.get(name)
        if old is None:
            out.append(Drift(name, None, "new_table", f"table {name} is new ({len(table['columns'])} columns); the model has not been told about it"))
            continue
        old_columns = {c["name"]: c for c in old.get("columns") or []}
        for column in table["columns"]:
            was = old_columns.get(column["name"])
            if was is None:
                out.append(Drift(name, column["name"], "new_column", f"{name}.{column['name']} ({column['type']}) is a new column"))
            elif stats_for is None or name in stats_for:
                out.extend(_column_shift(name, was, column, table.get("rows") or 0))
    return out


def _column_shift(table: str, was: Mapping[str, Any], now: Mapping[str, Any], rows: int) -> list[Drift]:
    where = f"{table}.{now['name']}"
    out = []
    before, after = was.get("null_share") or 0, now.get("null_share") or 0
    if abs(after - before) >= NULL_SHARE_SHIFT:
        out.append(Drift(table, now["name"], "null_share", f"{where}: missing values moved from {before:.0%} to {after:.0%} of rows"))
    grown = _range_growth(was, now)
    if grown:
        out.append(Drift(table, now["name"], "range", f"{where}: the range moved from {was['min']}..{was['max']} to {now['min']}..{now['max']}{grown}"))
    listed = {json.dumps(t["value"]) for t in was.get("top") or []}
    if listed and rows:
        new_values = [t for t in now.get("top") or [] if json.dumps(t["value"]) not in listed and t["count"] / rows >= NEW_TOP_SHARE]
        if new_values:
            shown = ", ".join(f"{t['value']!s} ({t['count'] / rows:.0%})" for t in new_values[:3])
            out.append(Drift(table, now["name"], "top_values", f"{where}: frequent values the profile does not list: {shown}"))
    return out


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):  # times are written in ISO form
        try:
            return dt.datetime.fromisoformat(value).timestamp() if "T" in value or ":" in value else float(dt.date.fromisoformat(value).toordinal()) * 86400
        except ValueError:
            return None
    return None


def _range_growth(was: Mapping[str, Any], now: Mapping[str, Any]) -> str:
    """'' when the range did not move past the threshold, else a few words on how far it moved."""
    lo, hi, new_lo, new_hi = (_as_number(x) for x in (was.get("min"), was.get("max"), now.get("min"), now.get("max")))
    if lo is None or hi is None or new_lo is None or new_hi is None:
        return ""
    width = hi - lo
    beyond = max(lo - new_lo, new_hi - hi, 0.0)
    if width <= 0:
        return " (it was a single value)" if beyond > 0 or new_hi != new_lo else ""
    return f" ({beyond / width:.0%} of the old width beyond it)" if beyond / width > RANGE_GROWTH else ""


# --------------------------------------------------------------------------- the served data against profile.yaml

_MEMO: dict[tuple[str, str], list[Drift]] = {}
_MEMO_LOCK = threading.Lock()
_MEMO_MAX = 64


def _is_live(source: Mapping[str, Any]) -> bool:
    return source.get("type") == "sql" and source.get("mode") == "live"


def drift(files: Mapping[str, Any], snapshot: Snapshot, tables: Mapping[str, pa.Table]) -> list[Drift]:
    """How the served `tables` (of `snapshot`) differ from the workspace's profile.yaml; [] when it still fits.

    A workspace without a profile has nothing to go stale (the Sources page offers to profile it).
    """

    recorded = files.get("profile")
    if not recorded or not recorded.get("tables"):
        return []
    key = (str(snapshot.path), hashlib.sha256(json.dumps(recorded, sort_keys=True, default=str).encode()).hexdigest())
    with _MEMO_LOCK:
        if key in _MEMO:
            return list(_MEMO[key])
    sources = {s["name"]: s for s in (files.get("sources") or {}).get("sources") or []}
    live = {name for name in tables if _is_live(sources.get(name, {}))}
    # A live table is not profiled here (that queries its database); its columns come from the snapshot.
    # The others are profiled with their values, in memory only, so a frequent value the recorded profile does
    # not list is seen; where a source keeps no values (sample_values: false) its profile lists none to compare.
    current = {
        "tables": [
            {"name": name, "rows": tables[name].num_rows, "columns": [{"name": c, "type": kind} for c, kind in describe({name: tables[name]})[name]]}
            if name in live
            else profile.profile_table(name, tables[name], sample_values=sources.get(name, {}).get("sample_values", True))
            for name in sorted(tables)
        ]
    }
    found = compare(recorded, current, stats_for=set(tables) - live)
    with _MEMO_LOCK:
        if len(_MEMO) >= _MEMO_MAX:
            _MEMO.clear()
        _MEMO[key] = found
    return list(found)


def served_drift(ws_path: Path) -> list[Drift]:
    """`drift` of the workspace folder's served snapshot against its profile.yaml ([] without data)."""

    ws, _ = load(Path(ws_path), readonly=True)
    wh = Warehouse.for_workspace(Path(ws_path))
    snapshot = wh.current()
    if snapshot is None:
        return []
    return drift(ws.data, snapshot, wh.tables(snapshot))


# --------------------------------------------------------------------------- updating the profile


def update_in_draft(repo: ConfigRepo, user: User, slug: str, tables: Mapping[str, pa.Table]) -> str | None:
    """Regenerate profile.yaml from `tables` (the data served) on the user's draft, as one commit; its sha, or None if unchanged.

    Opening and saving the draft check the steward role, so a viewer gets PermissionDenied and nothing is written.
    """

    path = repo.draft(user, slug).workspace_path
    ws, _ = load(path)
    new = profile.build_for(tables, ws.get("sources"), path)
    return repo.save(user, slug, {"profile": new}, "Update the data profile from the data served")
