"""Zero-token refresh: pull every source again, check it still fits, switch to it in one step.

No model is involved anywhere on this path. For each source the new table must
keep every column of the recorded schema (the data currently served, and
profile.yaml) with a compatible type, and every dashboard query must still
run on it. New columns are fine. If anything fails or no longer fits, nothing
is switched: the previous snapshot keeps being served, and the report says
which source, which columns went missing or changed type, and what they were
probably renamed to.
"""

from __future__ import annotations

import datetime as dt
import difflib
import functools
import hashlib
import json
import os
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Collection, Mapping

import pyarrow as pa

from ..core import settings
from ..core.diagnostics import ValidationFailed, has_errors
from ..core.errors import DashmemError
from ..core.fsutil import atomic_write
from ..memory import workspace
from ..memory.spec import queries, unset_params
from ..roles import access
from ..roles.access import User
from . import change_marker, coltypes, connectors, standins
from .connectors import REGISTRY, file_type
from .connectors.base import FetchContext, SourceError, UploadLimits, fetch, fetch_note, size_text
from .connectors.csv_source import NumberFormat, looks_like_date
from .live import catalogue_table, is_live
from .queries import bind
from .sandbox import QueryError, describe
from .snapshots import Snapshot, Warehouse, compact_strings

Progress = Callable[[float, str], object]  # what it returns is ignored (a page passes st.progress's bar.progress)


@dataclass
class SourceReport:
    name: str
    type: str
    status: str = "ok"  # ok | failed | incompatible
    rows_before: int | None = None
    rows_after: int | None = None
    seconds: float = 0.0
    message: str = ""
    missing: list[str] = field(default_factory=list)
    changed: list[dict[str, str]] = field(default_factory=list)  # {"column", "was", "now"}
    renames: dict[str, str] = field(default_factory=dict)  # missing column -> likely new name
    appended: int | None = None  # incremental sources: rows fetched past the last cursor and appended (None: a full load)


@dataclass
class RefreshReport:
    workspace: str
    swapped: bool = False
    snapshot: str | None = None
    previous: str | None = None
    seconds: float = 0.0
    sources: list[SourceReport] = field(default_factory=list)
    dashboard_errors: list[str] = field(default_factory=list)
    # The report's queries that fail on the new data: said, never blocking. Refresh serves the dashboard's
    # readers; a report is printed now and then, and its checks and its export show the same failure in place.
    report_warnings: list[str] = field(default_factory=list)
    unchanged: bool = False  # every source returned exactly the data already served: nothing to switch
    served: str | None = None  # the snapshot served when the refresh ended (another process may have switched since)
    checked_at: str | None = None  # when the sources were last found to fit (ISO 8601, UTC), changed or not
    write_error: str = ""  # the new snapshot could not be written (disk full, read-only): nothing switched
    model_calls: int = 0  # always 0: the point of this module

    @property
    def ok(self) -> bool:
        return (self.swapped or self.unchanged) and all(s.status == "ok" for s in self.sources) and not self.dashboard_errors

    @property
    def incompatible(self) -> list[SourceReport]:
        return [s for s in self.sources if s.status == "incompatible"]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}

    def headline(self) -> str:
        """One line for people: what the refresh did."""
        if self.swapped and self.served != self.snapshot:
            return "Refreshed, but another refresh finished at the same moment: its data is the one shown"
        if self.swapped:
            rows = ", ".join(f"{s.name} {_n(s.rows_after)} rows" for s in self.sources if s.rows_after is not None)
            return f"Refreshed: new data loaded ({rows}) in {self.seconds * 1000:.0f} ms, 0 model calls"
        if self.unchanged:
            return f"Checked the sources: the data has not changed ({self.seconds * 1000:.0f} ms, 0 model calls)"
        if self.write_error:
            return self.write_error[0].upper() + self.write_error[1:]
        failed = [s.name for s in self.sources if s.status == "failed"]
        misfit = [s.name for s in self.sources if s.status == "incompatible"]
        why = "; ".join(
            part
            for part in (
                f"could not load {', '.join(failed)}" if failed else "",
                f"{', '.join(misfit)} no longer fit{'s' if len(misfit) == 1 else ''} the dashboard" if misfit else "",
                f"{len(self.dashboard_errors)} dashboard part(s) would break" if self.dashboard_errors and not misfit else "",
            )
            if part
        )
        if self.previous:
            return f"Kept the previous data: {why or 'nothing to switch to'}"
        return f"No data loaded: {why or 'the workspace has no sources'}"

    def summary(self) -> str:
        lines = []
        for s in self.sources:
            rows = f"{_n(s.rows_before)} -> {_n(s.rows_after)} rows"
            lines.append(f"{s.name:<20} {s.status:<12} {rows:<24} {s.seconds * 1000:7.1f} ms  {s.message}")
            for col in s.missing:
                hint = f" (renamed to {s.renames[col]!r}?)" if col in s.renames else ""
                lines.append(f"{'':<20} missing column {col!r}{hint}")
            for ch in s.changed:
                lines.append(f"{'':<20} column {ch['column']!r} changed type {ch['was']} -> {ch['now']}")
                if ch.get("hint"):
                    lines.append(f"{'':<20}   {ch['hint']}")
        lines.extend(f"dashboard: {e}" for e in self.dashboard_errors)
        lines.extend(f"report (warning): {w}" for w in self.report_warnings)
        if self.write_error:
            lines.append(self.write_error)
        if self.swapped and self.served != self.snapshot:
            lines.append(
                f"wrote snapshot {self.snapshot} in {self.seconds * 1000:.0f} ms, 0 model calls; another refresh "
                f"finished at the same time and its snapshot {self.served} is the one served"
            )
        elif self.swapped:
            lines.append(f"switched to snapshot {self.snapshot} in {self.seconds * 1000:.0f} ms, 0 model calls")
        elif self.unchanged:
            lines.append(f"the data has not changed; still serving snapshot {self.previous} ({self.seconds * 1000:.0f} ms, 0 model calls)")
        elif self.previous:
            lines.append(f"kept the previous data (snapshot {self.previous}); nothing was switched")
        else:
            lines.append("no data loaded")
        return "\n".join(lines)


def _n(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def refresh(
    ws_path: Path,
    warehouse: Warehouse,
    *,
    user: User,
    uploads_dir: Path | None = None,
    progress: Progress | None = None,
    full: bool = False,
    now: dt.datetime | None = None,
    _before_switch: Callable[[], None] | None = None,
) -> RefreshReport:
    """Fetch all sources of the workspace at `ws_path` and switch to them if they all fit.

    `user` needs the right to refresh in the workspace (`access.OPERATOR` for
    the command line and cron); a refused user changes nothing. `full` loads
    incremental sources whole (rows updated or deleted in place included),
    which needs the steward's right `full_reload`. `now` is the time a
    success is recorded at (the clock schedules are judged by; default: now).
    """
    started = time.perf_counter()
    progress = progress or (lambda fraction, message: None)
    ws, diagnostics = workspace.load(ws_path, readonly=True)
    access.require(user, "full_reload" if full else "refresh", ws.get("workspace") or {}, Path(ws_path).name)
    report = RefreshReport(workspace=Path(ws_path).name)
    sources = (ws.get("sources") or {}).get("sources") or []
    if workspace.has_errors([d for d in diagnostics if d.file and d.file.endswith(workspace.FILES["sources"])]):
        report.dashboard_errors.append(f"sources.yaml does not validate; run `{settings.COMMAND} validate`")
        return report
    current = warehouse.current()
    report.previous = current.id if current else None
    old_tables = warehouse.tables(current) if current else {}
    recorded = _recorded_schema(current, ws.get("profile"))
    by_name = {s["name"]: s for s in sources}
    # A source whose settings the steward changed since its data was read is read afresh (the served types
    # would carry the old reading over), and a column's new type is then the steward's doing: the dashboard's
    # queries, checked below on the new data, decide whether it fits.
    resettled = {name for name, table in old_tables.items() if name in by_name and settings_changed(table.schema, by_name[name])}
    ctx = FetchContext(
        workspace_path=Path(ws_path),
        uploads_dir=uploads_dir or settings.uploads_dir(Path(ws_path).resolve().name),
        served={name: table.schema for name, table in old_tables.items() if name not in resettled},
    )

    fetched, report.sources = fetch_all(sources, ctx, current, progress, previous={n: t for n, t in old_tables.items() if n not in resettled}, full=full)

    progress(0.9, "Checking compatibility…")
    new_types = describe(fetched) if fetched else {}
    for entry in report.sources:
        if entry.status == "ok" and entry.name in recorded:
            served_types = current.columns(entry.name) if current and entry.name in current.tables else {}
            _compare(entry, recorded[entry.name], dict((c, t) for c, t in new_types[entry.name]), served_types, resettled=entry.name in resettled)
            _suggest_null_values(entry, by_name[entry.name], fetched[entry.name])
    configured = [s["name"] for s in sources]
    # Tables of sources that failed keep their last data; tables of removed sources go.
    candidate = {**{n: old_tables[n] for n in configured if n in old_tables}, **fetched}
    report.dashboard_errors.extend(dashboard_query_errors(ws.get("dashboard"), candidate, record=warehouse.folder / BOUND_RECORD))

    protect_old = current is not None
    if protect_old and (any(s.status != "ok" for s in report.sources) or report.dashboard_errors):
        report.seconds = time.perf_counter() - started
        progress(1.0, "Kept the previous data")
        return report
    if not fetched and candidate.keys() == old_tables.keys():
        report.seconds = time.perf_counter() - started
        return report
    if (
        current
        and candidate.keys() == old_tables.keys()
        and all(
            compact_strings(fetched[n]).equals(old_tables[n])
            and change_marker.same(fetched[n], old_tables[n])
            and standins.source_of(fetched[n]) == standins.source_of(old_tables[n])  # a stand-in stored before it was marked is stored again
            for n in fetched
        )
    ):
        # Same data: a new snapshot would only push a real earlier version out of the kept few.
        report.unchanged = True
        return _finish(report, warehouse, started, progress, "The data has not changed", now)
    # Only data about to be served can break the report; data kept out, or unchanged, leaves it as it was.
    report.report_warnings.extend(dashboard_query_errors(ws.get("report"), candidate, record=warehouse.folder / BOUND_RECORD))
    progress(0.95, "Switching to the new data…")
    types = {name: current.tables[name]["columns"] for name in candidate if current and name in current.tables}
    types.update(new_types)
    try:
        snapshot = warehouse.write_snapshot(candidate, {s["name"]: s["name"] for s in sources}, types, _before_switch=_before_switch)
    except OSError as exc:  # a full or read-only disk: nothing was switched, the last good data stays
        report.write_error = (
            f"could not store the new data in {warehouse.folder.name} ({exc.strerror or exc}); the previous data is still served"
            if current
            else f"could not store the data ({exc.strerror or exc})"
        )
        report.seconds = time.perf_counter() - started
        progress(1.0, "Could not store the new data")
        return report
    report.swapped, report.snapshot = True, snapshot.id
    return _finish(report, warehouse, started, progress, "Refreshed", now)


def _finish(report: RefreshReport, warehouse: Warehouse, started: float, progress: Progress, message: str, now: dt.datetime | None = None) -> RefreshReport:
    """Record a successful check (the time a viewer sees, even when nothing changed) and
    say which snapshot is served now: a refresh in another process may have switched after ours."""
    served = warehouse.current()
    report.served = served.id if served else None
    if report.ok:
        try:
            report.checked_at = warehouse.mark_checked(now)
        except OSError:
            pass  # a full disk: the data is fine, only the check time is not recorded
    report.seconds = time.perf_counter() - started
    progress(1.0, message)
    return report


def fetch_all(
    sources: list[dict[str, Any]],
    ctx: FetchContext,
    current=None,
    progress: Progress | None = None,
    previous: dict[str, pa.Table] | None = None,
    full: bool = False,
) -> tuple[dict[str, pa.Table], list[SourceReport]]:
    """Fetch every source; failures are reported per source, never raised.

    With the `previous` tables (those served now), an incremental source fetches only its new rows, unless `full`.
    """
    progress = progress or (lambda fraction, message: None)
    fetched: dict[str, pa.Table] = {}
    entries = []
    for i, source in enumerate(sources):
        name = source["name"]
        progress(i / max(len(sources), 1), f"Loading {name} ({source['type']})…")
        entry = SourceReport(name=name, type=source["type"])
        entry.rows_before = current.tables[name]["rows"] if current and name in current.tables else None
        t0 = time.perf_counter()
        try:
            grown = None if full else _fetch_incremental(source, ctx, (previous or {}).get(name), entry)
            if grown is not None:
                table = _with_settings(grown, source)
            else:
                raw = catalogue_table(source, ctx) if is_live(source) else fetch(source, ctx)  # a live source's rows stay put
                entry.message = fetch_note(raw) or ""  # how the source was read, e.g. a fallback encoding
                if is_live(source):
                    entry.message = "live: columns checked in the database's catalogue; no rows copied, queries run there"
                    if source.get("change_marker"):
                        raw = _with_marker(source, ctx, raw, (previous or {}).get(name), entry)
                table = _normalise(raw, source)
                _check_cursor(source, table)
                if full and (source.get("incremental") or {}).get("cursor"):
                    entry.message = "full reload (asked for): every row loaded again, rows updated or deleted in place included"
        except SourceError as exc:
            entry.status, entry.message = "failed", str(exc)
        except Exception as exc:  # a connector bug must not take the old data down with it
            entry.status, entry.message = "failed", ctx.redact(f"source {name!r}: unexpected {type(exc).__name__}: {exc}")
        else:
            fetched[name] = table
            entry.rows_after = table.num_rows
        entry.seconds = time.perf_counter() - t0
        entries.append(entry)
    return fetched, entries


def _with_marker(source: dict[str, Any], ctx: FetchContext, table: pa.Table, served: pa.Table | None, entry: SourceReport) -> pa.Table:
    """The live stand-in carrying its change marker's value now; the report says whether it moved."""
    value = change_marker.evaluate(source, ctx)
    was = change_marker.recorded(served)
    moved = "unchanged" if value == was else (f"was {was}" if was is not None else "first reading")
    entry.message += f"; change marker {change_marker.describe(source)} = {value} ({moved})"
    return change_marker.attach(table, value)


def _fetch_incremental(source: dict[str, Any], ctx: FetchContext, old: pa.Table | None, entry: SourceReport) -> pa.Table | None:
    """The previous table with the rows past its largest cursor value appended, or None for a full load.

    A full load is needed on the first refresh, when the previous table lacks the cursor or
    holds no cursor value, and when the new rows' columns are not the previous table's
    (a dropped, added or retyped column): the full table then goes through the compatibility
    check as any other, so the check always covers the whole table's schema.
    """
    cursor = (source.get("incremental") or {}).get("cursor")
    if not cursor or source.get("type") != "sql" or is_live(source) or old is None or cursor not in old.column_names:
        return None
    import pyarrow.compute as pc

    sql_source = connectors.module("sql")
    exact = sql_source.cursor_max(old, cursor)  # a decimal cursor, exact: its column holds doubles
    last = exact if exact is not None else pc.max(old.column(cursor)).as_py()  # pyright: ignore[reportAttributeAccessIssue]  # kernels made at import: no stubs
    if last is None:
        return None
    new = sql_source.fetch_after(source, ctx, last)  # not normalised: a batch of NULLs stays null-typed, not text
    past = sql_source.cursor_max(new, cursor)
    if new.column_names != old.column_names:
        return None
    if new.schema != old.schema:
        pinned = source.get("columns") or {}  # pinned types are the served ones: the cast below applies them
        if not all(n.name in pinned or _same_kind(n.type, o.type) for n, o in zip(new.schema, old.schema)):
            return None  # a column changed type: load everything and let the compatibility check judge
        try:
            new = new.cast(old.schema)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return None
    entry.appended = new.num_rows
    entry.message = f"incremental: {new.num_rows:,} new row(s) past {cursor} = {last!s} appended"
    grown = pa.concat_tables([old, new.replace_schema_metadata(old.schema.metadata)])
    return sql_source.with_cursor_max(grown, cursor, past if past is not None else exact)


def _same_kind(new: pa.DataType, old: pa.DataType) -> bool:
    """Whether new rows of type `new` are the served column's values, only typed by a smaller batch.

    A batch of NULLs only is typed null, whole numbers beside the served fractions are int64, and
    served text may be dictionary-encoded. Anything else (text where numbers were) is a change of
    type, which casting would hide from the compatibility check.
    """
    if new == old or pa.types.is_null(new):
        return True
    if pa.types.is_dictionary(old):
        return new == old.value_type
    return pa.types.is_integer(new) and pa.types.is_floating(old)


def _check_cursor(source: dict[str, Any], table: pa.Table) -> None:
    cursor = (source.get("incremental") or {}).get("cursor")
    if cursor and source.get("type") == "sql" and cursor not in table.column_names:
        raise SourceError(source["name"], f"incremental.cursor {cursor!r} is not a column of the table (columns: {', '.join(table.column_names)})")


def fetch_candidate(ws_path: Path, names: Collection[str] | None = None, progress: Progress | None = None) -> tuple[dict[str, pa.Table], list[SourceReport]]:
    """The workspace's sources (those in `names`, or all) as they are now, without switching to them
    (previews, Regenerate, the checks, and publish, which serves the ones a version adds with `add_to_served`)."""
    ws, _ = workspace.load(ws_path, readonly=True)
    ctx = FetchContext(workspace_path=Path(ws_path), uploads_dir=settings.uploads_dir(Path(ws_path).resolve().name))
    sources = (ws.get("sources") or {}).get("sources") or []
    return fetch_all([s for s in sources if names is None or s.get("name") in names], ctx, progress=progress)


def add_to_served(warehouse: Warehouse, sources: list[dict[str, Any]], fetched: Mapping[str, pa.Table]) -> Snapshot | None:
    """Serve `fetched`, the tables of sources a published version adds or changes, beside the tables served
    now of its other `sources`, as one new snapshot (removed sources' tables go, as in a refresh).

    Nothing is written, and None returned, while no data is served yet: the first page that shows the
    workspace loads all of it (`app_pages.ui.first_load`).
    """
    current = warehouse.current()
    if current is None or not fetched:
        return None
    served = warehouse.tables(current)
    names = [s["name"] for s in sources]
    candidate = {n: fetched[n] if n in fetched else served[n] for n in names if n in fetched or n in served}
    types = {n: current.tables[n]["columns"] for n in candidate if n not in fetched}
    types.update(describe({n: fetched[n] for n in candidate if n in fetched}))
    return warehouse.write_snapshot(candidate, {n: n for n in names}, types)


# The settings a table was read with, in its schema's metadata (kept in the snapshot): a change to them means
# the next refresh reads the source afresh (`settings_changed`).
READ_SETTINGS_KEY = b"dashmem.read_settings"
_NOT_READING = ("name", "description", "sample_values", "query_timeout_s", "timeout_s", "schedule")


def read_settings(source: Mapping[str, Any]) -> bytes:
    """What of a source decides how its data is read and typed: every setting but its name and description."""
    return json.dumps({k: v for k, v in source.items() if k not in _NOT_READING}, sort_keys=True, default=str).encode()


def settings_changed(schema: pa.Schema, source: Mapping[str, Any]) -> bool:
    """Whether the served table (its `schema`) was read with other settings than `source` has now; a table
    stored before the settings were recorded counts as unchanged."""
    stored = (schema.metadata or {}).get(READ_SETTINGS_KEY)
    return stored is not None and stored != read_settings(source)


def _with_settings(table: pa.Table, source: Mapping[str, Any]) -> pa.Table:
    return table.replace_schema_metadata({**(table.schema.metadata or {}), READ_SETTINGS_KEY: read_settings(source)})


def _normalise(table: pa.Table, source: dict[str, Any]) -> pa.Table:
    """Apply pinned column types, give all-empty columns a text type instead of NULL, and record the settings
    the table was read with."""
    return _with_settings(_pinned(table, source), source)


def _pinned(table: pa.Table, source: dict[str, Any]) -> pa.Table:
    pinned = source.get("columns") or {}
    if not pinned and not any(pa.types.is_null(t) for t in table.schema.types):
        return table
    fields = []
    for f in table.schema:
        if f.name in pinned:
            fields.append(pa.field(f.name, coltypes.arrow_type(pinned[f.name])))
        elif pa.types.is_null(f.type):
            fields.append(pa.field(f.name, pa.string()))
        else:
            fields.append(f)
    target = pa.schema(fields, metadata=table.schema.metadata)  # the metadata carries a live source's change marker
    if target == table.schema:
        return table
    try:
        return table.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise SourceError(source["name"], f"a pinned column type does not fit the data: {exc}") from None


def _recorded_schema(current, profile: dict | None) -> dict[str, dict[str, str]]:
    """table -> {column: type} that new data must keep.

    profile.yaml is the workspace's memory of the data's shape, so it decides
    for the tables it lists; after a Regenerate saves a new profile, data of
    the new shape is accepted. Tables it does not list keep the shape of the
    data currently served.
    """
    out: dict[str, dict[str, str]] = {}
    for table in (profile or {}).get("tables") or []:
        out[table["name"]] = {c["name"]: c["type"] for c in table["columns"]}
    if current:
        for name in current.tables:
            out.setdefault(name, current.columns(name))
    return out


def _compare(entry: SourceReport, old: dict[str, str], new: dict[str, str], served: Mapping[str, str] | None = None, *, resettled: bool = False) -> None:
    """Mark the entry incompatible where the new data lacks a column of `old` (the recorded shape) or changed its
    type. A type the served data already has was accepted by an earlier refresh; after the source's settings
    changed (`resettled`), a new type is what the steward asked for, and is said rather than refused."""
    added = [c for c in new if c not in old]
    resettled_types = []
    for col, was in old.items():
        if col not in new:
            entry.missing.append(col)
            guess = likely_rename(col, was, {c: new[c] for c in added})
            if guess:
                entry.renames[col] = guess
        elif coltypes.compatible(was, new[col]) or (served and col in served and coltypes.compatible(served[col], new[col])):
            continue
        elif resettled:
            resettled_types.append(f"{col} is now {new[col]} (was {was})")
        else:
            entry.changed.append({"column": col, "was": was, "now": new[col]})
    if resettled_types and not (entry.missing or entry.changed):
        note = "read with its new settings: " + ", ".join(resettled_types)
        entry.message = f"{entry.message}; {note}" if entry.message else note
    if entry.missing or entry.changed:
        entry.status = "incompatible"
        parts = []
        if entry.missing:
            parts.append("missing " + ", ".join(repr(c) for c in entry.missing))
        if entry.changed:
            parts.append("changed type " + ", ".join(repr(c["column"]) for c in entry.changed))
        entry.message = "; ".join(parts)


def _suggest_null_values(entry: SourceReport, source: dict[str, Any], table: pa.Table) -> None:
    """Say so when a number or date column of a file became text only because of a few placeholder
    values (`-`, `n/a`): the fix is one setting, `null_values`, which the report then names."""
    if not entry.changed or source.get("type") not in NULL_VALUES_TYPES:
        return
    hints = []
    for change in entry.changed:
        family = coltypes.family(change["was"])
        if family not in ("number", "time") or change["column"] not in table.column_names:
            continue
        hint = null_values_hint(source, change["column"], table.column(change["column"]), family)
        if hint:
            change["hint"] = hint
            hints.append(hint)
    if hints:
        entry.message = "; ".join([entry.message, *hints])


NULL_VALUES_TYPES = ("csv", "excel")  # the sources with a `null_values` setting
PLACEHOLDERS_MAX = 5  # more distinct values that are not numbers (or dates) are data, not placeholders


def null_values_hint(source: dict[str, Any], column: str, values: pa.ChunkedArray, family: str) -> str | None:
    """'column price became text only because of the values '-' (3 rows); add null_values: ['-'] to the source',
    when every value of the text column but a few distinct ones reads as a number (or a date); else None."""
    import pyarrow.compute as pc

    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
        return None
    counts = pc.value_counts(pc.drop_null(values))  # pyright: ignore[reportAttributeAccessIssue]  # pyarrow.compute makes its kernels at import: no stubs
    fmt = NumberFormat(source.get("decimal") or ".", source.get("thousands"))
    fits = fmt.reads if family == "number" else looks_like_date
    odd = [(v, n) for v, n in zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist()) if not fits(v.strip())]
    if not odd or len(odd) > PLACEHOLDERS_MAX or len(odd) == len(counts):
        return None
    odd.sort(key=lambda vn: (-vn[1], vn[0]))
    shown = ", ".join(f"{v!r} ({n:,} row{'s' if n != 1 else ''})" for v, n in odd)
    wanted = list(dict.fromkeys([*(source.get("null_values") or []), *(v for v, _ in odd)]))
    kind = "numbers" if family == "number" else "dates"
    return (
        f"column {column} became text only because of the value{'s' if len(odd) > 1 else ''} {shown}, the rest are {kind}; "
        f"if {'they mean' if len(odd) > 1 else 'it means'} a missing value, add null_values: {wanted!r} to the source"
    )


def compatibility(recorded: dict[str, str], table: pa.Table, name: str = "data", source: dict[str, Any] | None = None) -> list[str]:
    """Why `table` cannot stand in for a table with the `recorded` columns; empty when it can.
    With the `source` that read it, a column turned text by placeholders names the setting that fixes it."""
    entry = SourceReport(name=name, type="")
    _compare(entry, recorded, dict((c, t) for c, t in describe({name: table})[name]))
    if source is not None:
        _suggest_null_values(entry, source, table)
    problems = [f"missing column {c!r}" + (f" (renamed to {entry.renames[c]!r}?)" if c in entry.renames else "") for c in entry.missing]
    problems += [f"column {c['column']!r} is {c['now']}, was {c['was']}" + (f" ({c['hint']})" if c.get("hint") else "") for c in entry.changed]
    return problems


def read_own_file(content: bytes, file_name: str, name: str, recorded: dict[str, str]) -> tuple[pa.Table | None, list[str]]:
    """A viewer's own CSV, Excel or Parquet file (by its name's ending) to look at in place of table
    `name` (this session only, never stored), and why it cannot stand in for the data with the
    `recorded` columns (empty when it can). It is read within the upload caps (UploadLimits):
    a file over them is refused from its metadata, before its data is read."""
    import tempfile

    kind = file_type(file_name)
    if kind is None:
        endings = ", ".join(f".{e}" for c in REGISTRY.values() for e in c.extensions)
        return None, [f"{Path(file_name).name!r} is not a file dashmem reads; it reads {endings}"]
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / f"upload.{REGISTRY[kind].extensions[0]}"
        file.write_bytes(content)
        source = {"name": name, "type": kind, "path": str(file)}
        try:
            table = _normalise(fetch(source, FetchContext(workspace_path=Path(tmp), limits=UploadLimits.from_settings())), source)
        except SourceError as exc:
            return None, [str(exc).replace(str(file), Path(file_name).name)]
    problems = compatibility(recorded, table, name, source)
    return (None if problems else table), problems


class OwnFiles:
    """The viewer's own files a session shows in place of tables, by (workspace, table); never stored.

    A file offered for a table replaces the one shown for it, also when the new one is refused:
    the table then shows the shared data again, beside the new file's error.

    A session keeps at most DASHMEM_UPLOAD_MAX_BYTES of them in all: a file replaces the one held
    for its table, and the oldest others go when a new one would take the session past the cap, so
    uploading file after file, table after table, never accumulates. A refused file is remembered
    by its digest, so the page's reruns while it stays in the uploader do not read it again.
    """

    def __init__(self) -> None:
        self._held: dict[tuple[str, str], tuple[str, pa.Table]] = {}  # oldest first
        self._refused: dict[tuple[str, str], tuple[str, list[str]]] = {}

    def offer(self, slug: str, name: str, content: bytes, file_name: str, recorded: dict[str, str]) -> tuple[list[str], str | None]:
        """Take a file for table `name` of workspace `slug` (read by `read_own_file` unless it is the one held or
        refused already): why it cannot stand in (empty when it does), and a sentence naming the tables whose
        files went to make room, if any did."""
        key, digest = (slug, name), hashlib.sha256(content).hexdigest()[:12]
        if self._held.get(key, ("",))[0] == digest:
            return [], None
        # Another file for this table replaces the one held, read or refused: a refused file never leaves the
        # earlier one shown beside its error, as if the page showed the file just chosen.
        self._held.pop(key, None)
        if self._refused.get(key, ("",))[0] == digest:
            return self._refused[key][1], None
        table, problems = read_own_file(content, file_name, name, recorded)
        if table is not None:
            try:
                UploadLimits.from_settings().check_bytes(name, Path(file_name).name, table.nbytes, "of data as a table")
            except SourceError as exc:
                table, problems = None, [str(exc)]
        if table is None:
            self._refused[key] = (digest, problems)
            return problems, None
        self._refused.pop(key, None)
        cap, gone = settings.get("DASHMEM_UPLOAD_MAX_BYTES"), []
        while self._held and sum(t.nbytes for _, t in self._held.values()) + table.nbytes > cap:
            oldest = next(iter(self._held))
            del self._held[oldest]
            gone.append(oldest[1] if oldest[0] == slug else f"{oldest[1]} ({oldest[0]})")
        self._held[key] = (digest, table)
        if not gone:
            return [], None
        return [], (
            f"No longer showing your file for {', '.join(gone)}: one session keeps at most {size_text(cap)} of viewers' own files (DASHMEM_UPLOAD_MAX_BYTES)."
        )

    def held(self, slug: str) -> dict[str, tuple[str, pa.Table]]:
        """table -> (digest, table) of the files shown in workspace `slug`."""
        return {name: kept for (s, name), kept in self._held.items() if s == slug}

    def drop(self, slug: str, name: str) -> None:
        self._held.pop((slug, name), None)

    def elsewhere(self, slug: str) -> str:
        """For a page that reads the shared data (the Report): the sentence saying the Dashboard shows this
        session's own files instead, or "" when it shows none."""
        names = sorted(self.held(slug))
        if not names:
            return ""
        listed = ", ".join(f"**{n}**" for n in names)
        return (
            f"This report shows the shared data. Your own file in place of {listed} is shown on the Dashboard only"
            " (this session); the report and its exports read the data everyone sees."
        )

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for _, t in self._held.values())


def likely_rename(column: str, kind: str, candidates: dict[str, str]) -> str | None:
    """The new column that most plausibly is `column` renamed: similar name, compatible type."""

    def norm(s: str) -> str:
        return re.sub(r"[^a-z0-9]", "", s.lower())

    best, best_score = None, 0.0
    for name, new_kind in candidates.items():
        score = difflib.SequenceMatcher(None, norm(column), norm(name)).ratio()
        if norm(column) in norm(name) or norm(name) in norm(column):
            score = max(score, 0.75)
        if coltypes.compatible(kind, new_kind):
            score += 0.2
        if score > best_score:
            best, best_score = name, score
    return best if best_score >= 0.65 else None


BOUND_RECORD = "BOUND"  # in a workspace's cache folder: dashboard queries known to bind, see `dashboard_query_errors`
_BOUND_KEPT = 512  # bindings remembered per workspace; more only means binding some again


def dashboard_query_errors(dashboard: dict | None, tables: dict[str, pa.Table], record: Path | None = None) -> list[str]:
    """Bind each dashboard (or report) query to the candidate tables (filters unset); one plain line per
    component, filter, parameter or named query whose queries fail, saying what it reads that is gone.

    Binding runs in a query worker (it folds constants, so a query can be an attack
    already there), and starting one cost a cold `python -m lib refresh` more than the
    rest of the refresh. A binding depends only on the SQL, its parameter names, the
    tables' schemas and DuckDB's version, so with a `record` file the successful ones
    are written down and a later process with the same dashboard and data shape binds
    nothing. Failures are never recorded: they are bound again, and reported, every time.
    """
    problems: dict[str, list[str]] = {}
    shapes = sorted((name, t.schema.to_string(show_schema_metadata=False)) for name, t in tables.items())
    known = _read_bound(record)
    learned = []
    for path, _, sql in queries(dashboard or {}):
        params = unset_params(sql)
        key = hashlib.sha256(json.dumps([_binder(), sql, sorted(params), shapes]).encode()).hexdigest()
        if key in known:
            continue
        try:
            bind(tables, sql, params)
        except QueryError as exc:
            reasons = problems.setdefault(_where(dashboard or {}, path).split(".")[0], [])
            reason = _plain_reason(exc)
            if reason not in reasons:
                reasons.append(reason)
        else:
            learned.append(key)
    if record is not None and learned:
        _write_bound(record, [k for k in known if k not in learned] + learned)
    return [f"{where} no longer fits the new data: {'; '.join(reasons)}" for where, reasons in problems.items()]


@functools.cache
def _binder() -> list:
    """What decides a binding: the DuckDB build and our sandbox's rules, as their files' names, sizes
    and times (another version is other files), found without importing DuckDB, which a refresh whose
    bindings are all recorded never needs."""
    import importlib.util

    here = Path(__file__).resolve().parent
    files = [here / "sandbox.py", here / "queries.py", here / "query_worker.py"]
    for module in ("duckdb", "_duckdb"):
        spec = importlib.util.find_spec(module)
        if spec is not None and spec.origin:
            files.append(Path(spec.origin))
    identity = []
    for file in files:
        try:
            stat = os.stat(file)
        except OSError:
            continue
        identity.append([str(file), stat.st_size, stat.st_mtime_ns])
    return identity


def _read_bound(record: Path | None) -> dict[str, None]:
    """The recorded binding keys, oldest first; none when there is no record or it cannot be read."""
    if record is None:
        return {}
    try:
        keys = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # never written, or damaged: bind everything again
    return dict.fromkeys(k for k in keys if isinstance(k, str)) if isinstance(keys, list) else {}


def _write_bound(record: Path, keys: list[str]) -> None:
    """Replace the record with the newest `_BOUND_KEPT` keys; a cache, so a failure to write only costs binding again."""

    try:
        record.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(record, json.dumps(keys[-_BOUND_KEPT:]), fsync=False)
    except OSError:
        pass


def _plain_reason(error: QueryError) -> str:
    if error.column:
        return f'it reads column "{error.column}", which the new data does not have'
    if error.table:
        return f"it reads table {error.table}, which is no longer loaded"
    return f"its query no longer runs ({str(error).splitlines()[0][:200]})"


_KINDS = {"filters": "filter", "parameters": "parameter"}


def _where(spec: dict, path: tuple) -> str:
    """`component kpi_sales`, `component insight.queries.top`, `filter site.options_query`, a report's
    `parameter site.options_query` or `query totals`: short, for a report line."""
    kind, index, *rest = path
    if kind == "queries":  # a report's named query
        return f"query {index}"
    item = spec[kind][index]
    if kind == "sections" and rest[:1] == ["components"]:  # a KPI card in a report's KPI row
        item, rest = item["components"][rest[1]], rest[2:]
    label = f"{_KINDS.get(kind, 'component')} {item.get('id')}"
    if rest and rest[0] == "queries":
        return f"{label}.queries.{rest[1]}"
    return f"{label}.{rest[0]}" if kind in ("filters", "parameters") else label


# --------------------------------------------------------------------------- the data an export reads


def loaded_for_export(ws_path: Path, kind: str, warehouse: Warehouse | None, *, user: User, error: type[DashmemError]) -> tuple[Any, Warehouse, Any]:
    """(workspace, warehouse, snapshot) to export the workspace's `kind` file ("dashboard", "report") from
    (lib.artifacts.dashboard_export, report_export).

    Raises ValidationFailed when that file or output.yaml is invalid, and `error` when there is no such file
    or no data. Data is loaded first only if the workspace has none yet (which needs `user` to have the right
    to refresh); otherwise the newest snapshot is read as it is, whichever process wrote it.
    """
    ws, diagnostics = workspace.load(ws_path)
    rendered_files = (workspace.FILES[kind], workspace.FILES["output"])
    problems = [d for d in diagnostics if d.file and d.file.endswith(rendered_files)]
    if has_errors(problems):
        raise ValidationFailed(problems)
    if not ws.get(kind):
        raise error(f"{ws_path.name} has no {workspace.FILES[kind]} to export")
    warehouse = warehouse or Warehouse.for_workspace(ws_path)
    snapshot = warehouse.current()
    if snapshot is None:
        loaded = refresh(ws_path, warehouse, user=user)
        snapshot = warehouse.current()
        if snapshot is None:
            raise error(f"no data could be loaded for {ws_path.name}:\n{loaded.summary()}")
    return ws, warehouse, snapshot
