"""What changed since the previous load: each KPI's earlier value, and the biggest moves per component.

A refresh that finds new data writes a new snapshot and keeps the last few
(`lib.data.snapshots`), so the load before the one shown is still on disk. This
module runs each component's query on both, with the same filter values and
row caps as the render, through the render cache (keyed by each snapshot's
id: after a render the current side costs nothing, and the earlier side is
computed once), and compares:

- a KPI: its value then and now, the delta in the KPI's format (points for a
  percentage) and the relative change, by which KPIs are ranked;
- a chart or a table: rows matched on their non-measure columns (categories,
  dates, years), each measure compared row by row. The biggest relative
  changes come first (a change from 0 counts as the biggest, then by
  absolute size), top N per component, then the rows that appeared or
  disappeared, in plain words ("Brno Supply Attainment 93.0% → 88.1%").
  A change too small to show in the component's format is not counted.

Which columns are measures: a chart's quantitative channels, a table's
number columns; in both, a number column that `lib.data.colroles` reads as time or
an identifier (a year, a code) is a key instead. Formats come from the
component (a KPI's `format`; a table column's; a chart tooltip's, then its
channel's) and then output.yaml's `number_formats.default` for fractions, as
the render does.

A component reading a live source has no earlier value: a live source keeps
no earlier data (the engine of an earlier load, `lib.data.engine.earlier_engine`, refuses it), and no
component has one while only one load is kept. Text blocks are not compared.
Nothing here writes anything; the Dashboard page and `python -m lib changes`
show it.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import pyarrow as pa

from ..core.formats import format_number, format_value
from ..data import colroles, coltypes
from ..data.engine import NO_EARLIER_DATA, Engine, NoEarlierData, earlier_engine
from ..data.sandbox import QueryError
from ..data.snapshots import loaded_at
from ..memory.spec import params_for
from .components.base import result_column
from .components.chart import NAME as CHART
from .components.kpi import NAME as KPI
from .components.kpi import value_column
from .components.table import NAME as TABLE
from .render import filter_params, filter_states

if TYPE_CHECKING:
    from ..data.sandbox import QueryResult
    from ..data.snapshots import Snapshot

TOP = 5  # moves listed per component
COMPARED = (KPI, CHART, TABLE)  # the kinds whose figures a load can move
ARROW = "→"
ONLY_ONE_LOAD = f"{NO_EARLIER_DATA}: only one load so far"


@dataclass
class Move:
    """One value then and now: a KPI's, or one measure of one row of a chart or table."""

    key: dict[str, str]  # the row's key columns (labels) and their values as shown; {} for a KPI
    measure: str  # its label
    kind: str  # "changed", "unchanged" (a KPI), "appeared" or "disappeared"
    before: Any
    after: Any
    before_display: str
    after_display: str
    delta_display: str  # "+1,234", "−4.9 pts"; "" when not a number
    relative: float | None  # (after - before) / |before|; None when not a number or before is 0
    text: str  # the move in plain words


@dataclass
class ComponentChanges:
    component: str
    type: str
    title: str
    kpi: Move | None = None  # a KPI's value then and now, changed or not
    moves: list[Move] = field(default_factory=list)  # the biggest changes, at most `top`
    appeared: list[Move] = field(default_factory=list)  # rows not in the earlier result, at most `top`
    disappeared: list[Move] = field(default_factory=list)  # rows no longer in the result, at most `top`
    changed_count: int = 0  # values that differ, all of them
    appeared_count: int = 0
    disappeared_count: int = 0
    note: str = ""  # why it is not compared ("no earlier data kept: ..."), else ""

    @property
    def changed(self) -> bool:
        return bool(self.changed_count or self.appeared_count or self.disappeared_count)

    def summary(self) -> str:
        if self.note:
            return self.note
        parts = [f"{n} {what}" for n, what in ((self.changed_count, "changed"), (self.appeared_count, "new"), (self.disappeared_count, "gone")) if n]
        return ", ".join(parts) if parts else "no change"


@dataclass
class Changes:
    current: dict[str, str]  # {"id", "created" (ISO 8601, UTC), "loaded" (local time, as shown)} of the snapshot shown
    previous: dict[str, str] | None  # the one loaded before it; None when it is the only one kept
    components: list[ComponentChanges]
    filters: dict[str, Any] = field(default_factory=dict)

    def of(self, component_id: str) -> ComponentChanges | None:
        return next((c for c in self.components if c.component == component_id), None)

    def was(self, component_id: str) -> str:
        """What a KPI card says beside its value: "was 91.0% (−7.0 pts)"; why not; "" for no KPI or no earlier load."""
        found = self.of(component_id)
        if found is None or self.previous is None:
            return ""
        if found.note:
            return found.note
        move = found.kpi
        if move is None:
            return ""
        if move.kind == "unchanged":
            return f"unchanged since {self.previous['loaded']}"
        return f"was {move.before_display}" + (f" ({move.delta_display})" if move.delta_display else "") + f" on {self.previous['loaded']}"

    def ranked(self) -> list[ComponentChanges]:
        """Components with changes first: KPIs by the size of their relative change, then the others in spec order."""
        kpis = sorted((c for c in self.components if c.kpi and c.changed), key=lambda c: _score(c.kpi), reverse=True)
        rest = [c for c in self.components if c not in kpis]
        return kpis + [c for c in rest if c.changed] + [c for c in rest if not c.changed]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def text(self) -> str:
        if self.previous is None:
            return f"data loaded {self.current['loaded']} (snapshot {self.current['id']}): {ONLY_ONE_LOAD}, nothing to compare with"
        lines = [f"changes from the load of {self.previous['loaded']} (snapshot {self.previous['id']}) to {self.current['loaded']} ({self.current['id']})"]
        if self.filters:
            lines.append("filters: " + ", ".join(f"{k} = {v}" for k, v in self.filters.items()))
        for c in self.ranked():
            head = f"{c.type} {c.component}" + (f" ({c.title})" if c.title else "")
            if c.kpi is not None and not c.note:
                move = c.kpi
                then_now = f"{move.before_display} {ARROW} {move.after_display}" + (f" ({move.delta_display})" if move.delta_display else "")
                lines.append(f"{head}: " + (f"unchanged at {move.after_display}" if move.kind == "unchanged" else then_now))
                continue
            lines.append(f"{head}: {c.summary()}")
            lines += [f"  {m.text}" for m in c.moves]
            lines += [f"  {m.text}" for m in c.appeared]
            lines += [f"  {m.text}" for m in c.disappeared]
            hidden = (c.changed_count - len(c.moves)) + (c.appeared_count - len(c.appeared)) + (c.disappeared_count - len(c.disappeared))
            if hidden > 0:
                lines.append(f"  and {hidden} smaller change(s)")
        return "\n".join(lines)


# --------------------------------------------------------------------------- which snapshots


def previous_of(warehouse: Any, snapshot: Snapshot) -> Snapshot | None:
    """The kept snapshot loaded just before `snapshot` (ids sort by load time); None when it is the oldest kept.

    `warehouse` is a Warehouse or a lib.artifacts.time_travel.ReadOnlyWarehouse."""
    return next((s for s in warehouse.snapshots() if s.id < snapshot.id), None)


def compare(
    files: Mapping[str, Any],
    warehouse: Any,
    snapshot: Snapshot | None = None,
    chosen_filters: Mapping[str, Any] | None = None,
    *,
    workspace_path: Path | None = None,
    top: int = TOP,
) -> Changes:
    """The changes between `snapshot` (default: the one served) and the load kept before it."""
    served = warehouse.current()
    current = snapshot or served
    if current is None:
        raise QueryError("no data loaded yet: refresh first")
    previous = previous_of(warehouse, current)
    # Only the load everyone is served may read a live source's database: it holds today's rows, no earlier load's.
    earlier_load = served is None or current.id != served.id
    return compare_tables(
        files,
        current,
        warehouse.tables(current),
        previous,
        warehouse.tables(previous) if previous else None,
        chosen_filters,
        workspace_path=workspace_path,
        top=top,
        engine=earlier_engine(files, workspace_path) if earlier_load else None,
    )


def compare_tables(
    files: Mapping[str, Any],
    current: Snapshot,
    tables: Mapping[str, pa.Table],
    previous: Snapshot | None,
    previous_tables: Mapping[str, pa.Table] | None,
    chosen_filters: Mapping[str, Any] | None = None,
    *,
    workspace_path: Path | None = None,
    top: int = TOP,
    engine: Engine | None = None,
) -> Changes:
    """`compare` over tables already open: the Dashboard page has the current ones.

    `engine` runs the current load's queries instead of the workspace's: over an earlier load it is
    `AsOf.engine`, which refuses a live source's, so nothing of today's database is read for it.
    """
    if top < 0:  # a negative slice would list all but the last few and call the rest "smaller changes"
        raise QueryError(f"the moves listed per component (--top) must be 0 or more (got {top})")

    dashboard = files.get("dashboard") or {}
    output = files.get("output") or {}
    injection = output.get("data_injection") or {}
    max_rows = int(injection.get("max_rows_per_query", 10_000))
    timeout_s = float(injection.get("query_timeout_s", 10))
    formats = output.get("number_formats") or {}
    now_runner = Engine.of(engine, files, tables, current.id, workspace_path)
    earlier_runner = now_runner.earlier(previous_tables or {}, previous.id if previous else "none")  # the same user's rows
    states = filter_states(dashboard, tables, current.id, now_runner, timeout_s)
    params = filter_params(states, chosen_filters or {})

    found: list[ComponentChanges] = []
    for spec in dashboard.get("components") or []:
        kind = spec.get("type")
        if kind not in COMPARED or not isinstance(spec.get("query"), str):
            continue
        comp = ComponentChanges(str(spec["id"]), kind, str(spec.get("title", "")))
        found.append(comp)
        sql = spec["query"]
        bound = params_for(sql, params)
        cap = min(max_rows, int(spec.get("max_rows", max_rows))) if kind == TABLE else max_rows  # as the render asks, so its cache entry serves
        try:
            now = now_runner.run(sql, bound, max_rows=cap, timeout_s=timeout_s)
        except NoEarlierData as exc:
            comp.note = str(exc)
            continue
        except QueryError as exc:
            comp.note = f"not compared: the query fails ({exc})"
            continue
        if previous is None or previous_tables is None:
            comp.note = ONLY_ONE_LOAD
            continue
        try:
            before = earlier_runner.run(sql, bound, max_rows=cap, timeout_s=timeout_s)
        except NoEarlierData as exc:
            comp.note = str(exc)
            continue
        except QueryError as exc:
            comp.note = (
                f"not compared: the earlier load ({loaded_at(previous)}) has no table {exc.table}, whose source was added since; the next load compares it"
                if exc.table and exc.table.lower() not in {name.lower() for name in previous_tables}
                else f"not compared: the query does not run on the earlier data ({exc})"
            )
            continue
        try:
            if kind == KPI:
                _compare_kpi(comp, spec, now, before, formats)
            else:
                _compare_rows(comp, spec, now, before, formats, top)
        except (KeyError, ValueError, TypeError, ArithmeticError) as exc:  # as the render: a spec that does not fit its result
            comp.note = f"not compared: {exc}"
    chosen = {k: v for k, v in (chosen_filters or {}).items() if v not in (None, "", [], ())}
    return Changes(
        {"id": current.id, "created": current.created, "loaded": loaded_at(current)},
        {"id": previous.id, "created": previous.created, "loaded": loaded_at(previous)} if previous else None,
        found,
        chosen,
    )


# --------------------------------------------------------------------------- KPIs


def _compare_kpi(comp: ComponentChanges, spec: Mapping[str, Any], now: QueryResult, before: QueryResult, formats: Mapping[str, Any]) -> None:
    fmt = spec.get("format") or formats.get("default")
    after_value, before_value = _kpi_value(spec, now), _kpi_value(spec, before)
    label = comp.title or comp.component
    move = _move({}, label, before_value, after_value, fmt)
    comp.kpi = move
    if move.kind == "changed":
        comp.moves = [move]
        comp.changed_count = 1


def _kpi_value(spec: Mapping[str, Any], result: QueryResult) -> Any:
    """The KPI's value as its card shows it (lib.artifacts.components.kpi): the first row's value column."""

    if result.table.num_rows == 0:
        return None
    column = result_column(result, spec["value_column"]) if spec.get("value_column") else value_column(spec, result.columns)
    return result.table.column(column)[0].as_py() if column else None


# --------------------------------------------------------------------------- charts and tables


@dataclass(frozen=True)
class _Column:
    name: str  # in the query result
    label: str
    format: str | None


def _compare_rows(comp: ComponentChanges, spec: Mapping[str, Any], now: QueryResult, before: QueryResult, formats: Mapping[str, Any], top: int) -> None:
    keys, measures = _roles(spec, now)
    if not measures:
        comp.note = "not compared: it shows no measure"
        return
    missing = [c.name for c in keys + measures if c.name not in before.columns]
    if missing:
        comp.note = f"not compared: the earlier data has no column {', '.join(missing)}"
        return
    if not keys and (now.table.num_rows > 1 or before.table.num_rows > 1):
        comp.note = "not compared row by row: no category, date or year column to match its rows by"
        return
    default = formats.get("default")
    rows_now, rows_before = _by_key(now, keys), _by_key(before, keys)
    if rows_now is None or rows_before is None:
        comp.note = f"not compared row by row: its rows repeat the same {', '.join(k.label for k in keys)}"
        return
    changed: list[Move] = []
    for key, row in rows_now.items():
        if key not in rows_before:
            continue
        shown_key = _shown_key(keys, key)
        for m in measures:
            a, b = rows_before[key][m.name], row[m.name]
            move = _move(shown_key, m.label, a, b, m.format or _default_for(a, b, default))
            if move.kind == "changed":
                changed.append(move)
    changed.sort(key=_score, reverse=True)
    appeared = [k for k in rows_now if k not in rows_before]
    gone = [k for k in rows_before if k not in rows_now]
    comp.moves, comp.changed_count = changed[:top], len(changed)
    comp.appeared_count, comp.disappeared_count = len(appeared), len(gone)
    comp.appeared = [_row_move(keys, k, measures, rows_now[k], "appeared", default) for k in appeared[:top]]
    comp.disappeared = [_row_move(keys, k, measures, rows_before[k], "disappeared", default) for k in gone[:top]]


def _roles(spec: Mapping[str, Any], result: QueryResult) -> tuple[list[_Column], list[_Column]]:
    """(keys, measures) of a chart or table result: what matches rows, and what is compared."""

    keys: list[_Column] = []
    measures: list[_Column] = []
    seen: set[str] = set()

    def add(name: str, label: str, fmt: str | None, quantitative: bool) -> None:
        if name in seen:
            return
        seen.add(name)
        if quantitative and _is_number(result, name) and not _is_key_number(result, name):
            measures.append(_Column(name, label, fmt))
        else:
            keys.append(_Column(name, label, fmt))

    if spec.get("type") == CHART:
        encoding = spec.get("encoding") or {}
        tips = {str(t.get("field", "")).lower(): t for t in encoding.get("tooltip") or [] if isinstance(t, dict)}
        for channel, ch in encoding.items():
            if channel == "tooltip" or not isinstance(ch, dict) or not ch.get("field"):
                continue
            name = result_column(result, ch["field"])
            tip = tips.get(name.lower(), {})
            quantitative = ch.get("type") == "quantitative" or (ch.get("type") is None and bool(ch.get("thresholds")))
            add(name, ch.get("title") or tip.get("title") or name, tip.get("format") or ch.get("format"), quantitative)
    else:
        columns = {k.lower(): v for k, v in (spec.get("columns") or {}).items()}
        for name in result.columns:
            conf = columns.get(name.lower()) or {}
            add(name, conf.get("label") or name, conf.get("format"), True)
    return keys, measures


def _is_number(result: QueryResult, name: str) -> bool:
    kind = result.table.schema.field(name).type
    return pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind)


def _is_key_number(result: QueryResult, name: str) -> bool:
    """A number column that reads as time or an identifier (a year, a code): it names rows, it is not compared."""

    column = result.table.column(name)
    values = [v for v in column.to_pylist() if v is not None]
    if not values:
        return False
    stats = {"nonnull": len(values), "distinct": len(set(values)), "min": min(values), "max": max(values)}
    return colroles.classify(name, coltypes.duckdb_name(column.type) or "DOUBLE", stats).role in ("time", "identifier")


def _by_key(result: QueryResult, keys: Sequence[_Column]) -> dict[tuple, dict[str, Any]] | None:
    """The result's rows by their key values, in result order; None when a key repeats."""
    rows: dict[tuple, dict[str, Any]] = {}
    for row in result.table.to_pylist():
        key = tuple(row[k.name] for k in keys)
        if key in rows:
            return None
        rows[key] = row
    return rows


def _shown_key(keys: Sequence[_Column], key: tuple) -> dict[str, str]:
    return {k.label: format_value(v, k.format) for k, v in zip(keys, key)}


def _row_move(keys: Sequence[_Column], key: tuple, measures: Sequence[_Column], row: Mapping[str, Any], kind: str, default: str | None) -> Move:
    """A row that appeared (its values now) or disappeared (its values then), its first measure as the value."""
    shown_key = _shown_key(keys, key)
    values = ", ".join(f"{m.label} {format_value(row[m.name], m.format or _default_for(row[m.name], None, default))}" for m in measures[:3])
    name = " ".join(shown_key.values()) or "the row"
    first = measures[0]
    value = row[first.name]
    shown = format_value(value, first.format or _default_for(value, None, default))
    if kind == "appeared":
        return Move(shown_key, first.label, kind, None, value, "—", shown, "", None, f"{name}: new ({values})")
    return Move(shown_key, first.label, kind, value, None, shown, "—", "", None, f"{name}: no longer shown (was {values})")


# --------------------------------------------------------------------------- one value then and now


def _move(key: dict[str, str], label: str, before: Any, after: Any, fmt: str | None) -> Move:
    before_display, after_display = format_value(before, fmt), format_value(after, fmt)
    name = " ".join([*key.values(), label])
    if _same(before, after) or before_display == after_display:  # a change too small to show in the component's format is none
        return Move(
            key, label, "unchanged", before, after, before_display, after_display, "", 0.0 if _numeric(after) else None, f"{name} unchanged at {after_display}"
        )
    delta_display, relative = "", None
    if _numeric(before) and _numeric(after):
        whole = isinstance(after, int) and isinstance(before, int)  # a count's delta is shown as a count, not "+6.00"
        delta_display = _signed(after - before if whole else float(after) - float(before), fmt)
        relative = (float(after) - float(before)) / abs(float(before)) if float(before) else None
    detail = f" ({delta_display})" if delta_display else ""
    return Move(
        key, label, "changed", before, after, before_display, after_display, delta_display, relative, f"{name} {before_display} {ARROW} {after_display}{detail}"
    )


def _same(a: Any, b: Any) -> bool:
    if _numeric(a) and _numeric(b):
        return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=1e-12)  # sums in another order differ in the last bit
    return a == b


def _numeric(value: Any) -> bool:
    from decimal import Decimal

    return isinstance(value, (int, float, Decimal)) and not isinstance(value, bool) and math.isfinite(float(value))


def _score(move: Move | None) -> tuple[float, float]:
    """Biggest first: the relative change (a change from 0 counts as infinite), then the absolute one."""
    if move is None or move.kind != "changed":
        return (-1.0, 0.0)
    if move.relative is not None:
        relative = abs(move.relative)
    else:
        relative = math.inf if _numeric(move.after) else 0.0
    absolute = abs(float(move.after) - float(move.before)) if _numeric(move.after) and _numeric(move.before) else 0.0
    return (relative, absolute)


def _default_for(before: Any, after: Any, default: str | None) -> str | None:
    """output.yaml's default number format, for fractions only: what the table and KPI cards show."""
    return default if isinstance(after, float) or isinstance(before, float) else None


def _signed(delta: float | int, fmt: str | None) -> str:
    """A difference in the value's format, signed; a percentage's in points ("−4.9 pts")."""
    if fmt and fmt.endswith("%"):
        digits = re.search(r"\.(\d+)%$", fmt)
        return format_number(delta * 100, f"+.{digits.group(1) if digits else 0}f") + " pts"
    if fmt and fmt[0] not in "+-( " and not re.match(r".?[<>^=]", fmt):
        return format_value(delta, "+" + fmt)
    text = format_value(delta, fmt)
    return "+" + text if delta > 0 and not text.startswith("+") else text
