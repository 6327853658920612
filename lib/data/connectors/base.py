"""What every connector shares: the fetch context, the error type, JSON rows to Arrow (records or arrays with their
column names, ISO dates as dates), what an answer says about being cut short, the note a fetch leaves for the
refresh report; and `fetch`, which hands a source to the connector of its type (the registry in this package's
`__init__`)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Container, Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from ...core import settings
from ...core.errors import DashmemError
from ...memory import credentials, secrets
from .. import netguard
from . import REGISTRY, TYPES, module


class SourceError(DashmemError, RuntimeError):
    """A source could not be fetched. The message names the source and never holds a secret value."""

    def __init__(self, source: str, message: str):
        self.source = source
        super().__init__(f"source {source!r}: {message}")


@dataclass(frozen=True)
class UploadLimits:
    """What one uploaded file may decode to: a 1 MB Parquet file of constant columns became a
    40-million-row table and 2 GB of memory in a viewer's session, and every session may upload.

    A connector measures a file by its metadata (Parquet's row counts and column sizes, an .xlsx
    archive's member sizes and its sheet's dimension, a CSV's size) and refuses it before reading
    its data; where metadata can understate (a dictionary of long strings, a sheet without a
    dimension) it also counts while reading, in batches, and stops at the cap.
    """

    rows: int
    bytes: int

    @classmethod
    def from_settings(cls) -> UploadLimits:
        return cls(settings.get("DASHMEM_UPLOAD_MAX_ROWS"), settings.get("DASHMEM_UPLOAD_MAX_BYTES"))

    def check_rows(self, source: str, shown: str, rows: int, *, counting: bool = False) -> None:
        """Refuse `rows` over the cap; `counting`: counted while reading, and the read stopped there."""
        if rows > self.rows:
            has = f"more than {self.rows:,}" if counting else f"{rows:,}"
            raise SourceError(source, f"{shown} has {has} rows; uploads are limited to {self.rows:,} rows (DASHMEM_UPLOAD_MAX_ROWS)")

    def check_bytes(self, source: str, shown: str, size: int, what: str = "of data once decoded", *, bound: str = "") -> None:
        """Refuse `size` over the cap. `what` is what was measured; `bound` says how: "" (measured), "at least"
        (metadata's lower bound), "more than" (counted while reading, and the read stopped there)."""
        if size > self.bytes:
            has = f"more than {size_text(self.bytes)}" if bound == "more than" else f"{bound} {size_text(size)}".lstrip()
            raise SourceError(source, f"{shown} is {has} {what}; uploads are limited to {size_text(self.bytes)} (DASHMEM_UPLOAD_MAX_BYTES)")

    def batches(
        self, source: str, shown: str, batches: Iterable[pa.RecordBatch], size: Callable[[pa.RecordBatch], int] = lambda b: b.nbytes
    ) -> Iterator[pa.RecordBatch]:
        """The batches, counted as they come: past either cap the read stops, holding at most one batch over it."""
        rows = decoded = 0
        for batch in batches:
            rows += batch.num_rows
            decoded += size(batch)
            self.check_rows(source, shown, rows, counting=True)
            self.check_bytes(source, shown, decoded, bound="more than")
            yield batch


def size_text(size: int) -> str:
    """Bytes as a person reads them: `256 MB`, `1.9 GB` (binary units, as the settings take them)."""
    for unit, factor in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if size >= factor:
            value = size / factor
            return f"{value:,.0f} {unit}" if value >= 100 or value == int(value) else f"{value:,.1f} {unit}"
    return f"{size:,} bytes"


@dataclass
class FetchContext:
    workspace_path: Path  # relative file paths in sources.yaml are relative to this folder
    uploads_dir: Path | None = None  # where `upload:NAME` files live (outside git)
    resolved: list[str] = field(default_factory=list)  # secret values resolved during this fetch, for redaction
    # Arrow schema of each source's data served now (on refresh): a connector may take
    # it as its first guess of the types, which it must still check against the new data.
    served: dict[str, pa.Schema] = field(default_factory=dict)
    # A file uploaded in the app is read within these caps, checked from its metadata before its data
    # is read; None for the workspace's own sources, which a refresh reads whole.
    limits: UploadLimits | None = None

    def secret(self, source: str, ref: str) -> str:
        try:
            value = secrets.resolve(ref)
        except secrets.SecretMissing as exc:
            raise SourceError(source, str(exc)) from None
        self.resolved.append(value)
        # "Bearer abc": a server that echoes only the token "abc" must not get it past the redaction either.
        self.resolved.extend(value.split()[-1:])
        return value

    def redact(self, text: str) -> str:
        return credentials.redact(text, self.resolved)

    def error(self, source: str, message: str) -> SourceError:
        """A SourceError whose text has every secret resolved so far scrubbed out."""
        return SourceError(source, self.redact(message))


def fetch(source: dict, ctx: FetchContext) -> pa.Table:
    """The source's data as an Arrow table, fetched by the connector of its `type`."""
    kind = source.get("type")
    if not isinstance(kind, str) or kind not in REGISTRY:
        raise SourceError(source.get("name", "?"), f"unknown source type {kind!r}; known: {', '.join(TYPES)}")
    return module(kind).fetch(source, ctx)


def confined_path(source: str, raw: str, ctx: FetchContext) -> Path:
    """A file a source may read: inside the workspace folder or a folder listed in DASHMEM_DATA_DIRS.

    Stewards write sources; without this, a source could read any file the server can.
    """
    base = Path(ctx.workspace_path).resolve()
    path = Path(raw)
    full = (base / path).resolve() if not path.is_absolute() else path.resolve()
    allowed = (base,) + settings.get("DASHMEM_DATA_DIRS")
    if not any(full == root or root in full.parents for root in allowed):
        raise SourceError(source, f"path {raw!r} is outside the workspace folder; list its folder in DASHMEM_DATA_DIRS to allow it")
    return full


def refused_host(host: str) -> str | None:
    """Why a source may not contact `host` by its name alone, or None.

    Only a first look: lib/data/netguard.py checks every address a host resolves to
    when REST and MCP sources connect, on every redirect hop and next-page link.
    """

    return netguard.refused_name(host)


def dig(data: Any, dotted: str | None) -> Any:
    """Follow a dotted path (`data.items`, `results.0.rows`) into parsed JSON; '' or None is the root."""
    if not dotted:
        return data
    for part in dotted.split("."):
        if isinstance(data, list) and part.isdigit():
            data = data[int(part)] if int(part) < len(data) else None
        elif isinstance(data, dict):
            data = data.get(part)
        else:
            return None
    return data


def flatten(record: dict, prefix: str = "", out: dict | None = None) -> dict:
    """Nested objects become `parent_child` columns; lists are kept as JSON text."""
    out = {} if out is None else out
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flatten(value, f"{name}_", out)
        elif isinstance(value, list):
            out[name] = json.dumps(value, ensure_ascii=False, sort_keys=True)
        else:
            out[name] = value
    return out


def records_to_table(records: Iterable[object], *, source: str = "?", columns: list[str] | None = None, keep_text: Container[str] = ()) -> pa.Table:
    """JSON rows as one Arrow table: objects (possibly nested, possibly with differing keys), or arrays
    zipped with `columns` (`{"columns": [...], "rows": [[...], ...]}`, datasette's default shape).

    Columns appear in first-seen order. A column whose values mix types that Arrow cannot unify (say
    numbers and text) becomes text rather than failing. Rows that are arrays with no column names are
    refused (SourceError of `source`): kept as they came, they were one text column of JSON arrays, on
    which the profile, the auto-draft and the checks all passed. ISO 8601 dates and timestamps, which
    JSON can only send as text, become date and timestamp columns as a CSV's do (`parse_iso_dates`),
    except the columns in `keep_text` (a source's pinned types, applied afterwards).
    """
    rows: list[dict] = []
    names = _distinct(columns) if columns is not None else None
    for number, record in enumerate(records, 1):
        if isinstance(record, dict):
            rows.append(flatten(record))
        elif isinstance(record, list):
            if names is None:
                raise SourceError(
                    source, f"row {number:,} is an array of values and no column names came with it; set columns_path to the list of column names"
                )
            if len(record) != len(names):
                raise SourceError(source, f"row {number:,} has {len(record):,} values for {len(names):,} columns ({', '.join(names[:10])})")
            rows.append(flatten(dict(zip(names, record))))
        else:
            rows.append({"value": record})
    found: dict[str, None] = dict.fromkeys(names if names is not None and not rows else ())  # an answer of no rows keeps its columns
    for row in rows:
        for key in row:
            found.setdefault(key, None)
    arrays = {name: to_arrow_column([row.get(name) for row in rows]) for name in found}
    return parse_iso_dates(pa.table(arrays), keep_text) if arrays else pa.table({})


def column_names(value: object) -> list[str] | None:
    """The column names an answer lists beside array rows: strings, or objects with a `name` (as
    `[{"name": "age", "type": "INTEGER"}]`); None when `value` is no such list."""
    if not isinstance(value, list) or not value:
        return None
    names = [c.get("name") if isinstance(c, dict) else c for c in value]
    return [str(n) for n in names] if all(isinstance(n, (str, int)) and not isinstance(n, bool) for n in names) else None


def _distinct(names: list[str]) -> list[str]:
    taken: list[str] = []
    for name in names:
        taken.append(unique_name(name, taken))
    return taken


def truncation(answer: object) -> str | None:
    """What an answer says about having been cut short, or None: `truncated: true` (datasette's `?sql=`,
    MotherDuck's MCP server), with the `warning` or `message` beside it when there is one."""
    if not isinstance(answer, dict) or answer.get("truncated") not in (True, "true", "True"):
        return None
    said = next((answer[k].strip() for k in ("warning", "message", "note") if isinstance(answer.get(k), str) and answer[k].strip()), "")
    return "truncated: true" + (f", {' '.join(said.split())[:200]!r}" if said else "")


# ISO 8601 as JSON carries it: a day, or a day and a time (`T` or a space), seconds and fractions optional, a zone
# (`Z`, `+02:00`) optional. Only a column whose first value starts like one is tried; Arrow's parser then decides.
_ISO_START = re.compile(r"\d{4}-\d{2}-\d{2}")
_DAY_ONLY = r"^\d{4}-\d{2}-\d{2}$"
# The types tried in turn, as Arrow's CSV reader infers them: whole seconds, then fractions; naive, then with a zone (in UTC).
_MOMENTS = [pa.timestamp(unit, tz) for unit in ("s", "us", "ns") for tz in (None, "UTC")]


def parse_iso_dates(table: pa.Table, keep_text: Container[str] = ()) -> pa.Table:
    """Text columns whose every value is an ISO 8601 date as dates (date32), or timestamps where some hold a time.

    JSON has no date type, so REST and MCP answers send dates as text; as text they had no time role and the
    auto-draft drew no trend. Empty text in such a column is a missing date, as in a CSV; a column with
    anything else (a value that is not a date, naive times beside zoned ones) stays text.
    """
    for i, column in enumerate(table.schema):
        if column.name in keep_text or not pa.types.is_string(column.type):
            continue
        values = _iso_dates(table.column(i))
        if values is not None:
            table = table.set_column(i, pa.field(column.name, values.type), values)
    return table


def _iso_dates(column: pa.ChunkedArray) -> pa.ChunkedArray | None:
    text = pc.if_else(pc.equal(column, ""), pa.scalar(None, pa.string()), column)  # pyright: ignore[reportAttributeAccessIssue]  # kernels made at import: no stubs
    present = pc.drop_null(text)  # pyright: ignore[reportAttributeAccessIssue]
    if len(present) == 0 or not _ISO_START.match(present[0].as_py()):
        return None
    kinds = [pa.date32()] if pc.all(pc.match_substring_regex(present, _DAY_ONLY)).as_py() else _MOMENTS  # pyright: ignore[reportAttributeAccessIssue]
    for kind in kinds:
        try:
            return text.cast(kind)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue
    return None


# Schema metadata of a fetched table: a sentence for people about how it was read (a file in a fallback encoding,
# a truncated answer the source allows), shown beside the source on the refresh report.
NOTE_KEY = b"dashmem.note"


def with_note(table: pa.Table, note: str) -> pa.Table:
    """The table carrying `note` (after any note it has) for the refresh report."""
    earlier = fetch_note(table)
    text = f"{earlier}; {note}" if earlier else note
    return table.replace_schema_metadata({**(table.schema.metadata or {}), NOTE_KEY: text.encode()})


def fetch_note(table: pa.Table) -> str | None:
    """What a fetch has to tell about how it read the source (a fallback encoding, a truncated answer), if anything."""
    note = (table.schema.metadata or {}).get(NOTE_KEY)
    return note.decode("utf-8", "replace") if note else None


def unique_name(name: str, taken: Container[str]) -> str:
    """`name`, or `name_2`, `name_3`... when a file repeats a column name (Arrow tables need distinct names)."""
    if name not in taken:
        return name
    n = 2
    while f"{name}_{n}" in taken:
        n += 1
    return f"{name}_{n}"


def to_arrow_column(values: list) -> pa.Array:
    """Values as one Arrow column of the type Arrow infers; a column mixing types it
    cannot unify (say numbers and text, which SQLite and JSON allow) becomes text."""
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return pa.array([None if v is None else _as_text(v) for v in values], type=pa.string())


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (bool, int, float, dict, list)):  # JSON's own spelling: true, 1.5, {"a": 1}
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return str(value)  # dates, bytes, anything a database driver returns
