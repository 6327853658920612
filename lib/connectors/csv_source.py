"""CSV files: parsed with pyarrow, which measured fastest here on small and large files.

The delimiter is sniffed when not given; header, encoding and pinned column
types come from the source. Paths resolve inside the workspace folder, the
uploads folder (`upload:NAME`), or a folder listed in DASHMEM_DATA_DIRS; any
other path is refused, so a workspace cannot read arbitrary server files.
"""
from __future__ import annotations

import csv
import hashlib
import io
import os
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from .base import FetchContext, SourceError, confined_path
from ..coltypes import arrow_type

BLOCK_SIZE = 8 << 20  # most bytes per parsed block; types are inferred from the first block
STREAM_ABOVE_BYTES = 128 << 20  # files larger than this are parsed block by block to bound memory

# Date formats seen in real exports besides ISO 8601 (which the parser handles
# itself): US dates with two- or four-digit years, day-first with dashes. Trying
# them on every text column made parsing ~2x slower, so they are tried only on
# columns whose first values look like dates, and kept only if every value parses.
DATE_FORMATS = [
    (re.compile(r"^\d{1,2}/\d{1,2}/\d{4} \d{1,2}:\d{2}:\d{2} [AP]M$"), "%m/%d/%Y %I:%M:%S %p"),
    (re.compile(r"^\d{1,2}/\d{1,2}/\d{4} \d{1,2}:\d{2}:\d{2}$"), "%m/%d/%Y %H:%M:%S"),
    (re.compile(r"^\d{1,2}/\d{1,2}/\d{2} \d{1,2}:\d{2}$"), "%m/%d/%y %H:%M"),
    (re.compile(r"^\d{1,2}/\d{1,2}/\d{4}$"), "%m/%d/%Y"),
    (re.compile(r"^\d{1,2}-\d{1,2}-\d{4}$"), "%d-%m-%Y"),
]


def resolve_path(source: dict, ctx: FetchContext) -> Path:
    name, raw = source["name"], source["path"]
    if raw.startswith("upload:"):
        upload = raw.split(":", 1)[1]
        if not ctx.uploads_dir or "/" in upload or upload.startswith("."):
            raise SourceError(name, f"invalid upload reference {raw!r}")
        return ctx.uploads_dir / upload
    return confined_path(name, raw, ctx)


def store_upload(folder: Path, file_name: str, content: bytes) -> str:
    """Keep an uploaded CSV in a workspace's uploads folder; returns the `path` a source reads it by.

    Named by its content, so an upload never replaces a file a published source already reads.
    """
    stored = hashlib.sha256(content).hexdigest()[:16] + "-" + re.sub(r"[^A-Za-z0-9_.-]", "_", Path(file_name).name)
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / stored).exists():
        (folder / stored).write_bytes(content)
    return f"upload:{stored}"


DELIMITERS = ",;\t|"


def sniff_delimiter(head: str, lines: int = 20) -> str:
    """The candidate that splits the first lines into the same number (>1) of fields, most fields first.

    csv.Sniffer measured ~50 ms on a 47-column file, longer than parsing it; this takes well under 1 ms.
    """
    rows = [line for _, line in zip(range(lines), io.StringIO(head, newline=""))]
    best, best_fields = ",", 1
    for candidate in (c for c in DELIMITERS if rows and c in rows[0]):  # a delimiter shows in the header line
        counts = {len(row) for row in csv.reader(rows[:-1] or rows, delimiter=candidate)}
        if len(counts) == 1 and (fields := counts.pop()) > best_fields:
            best, best_fields = candidate, fields
    return best


def _served_delimiter(header: str, served: pa.Schema | None) -> str | None:
    """The delimiter that splits the header line into the served data's columns, if one does.

    Cheaper than sniffing twenty lines, and it cannot pick a different delimiter for the same file.
    """
    if served is None:
        return None
    for candidate in DELIMITERS:
        if candidate in header:
            names = next(csv.reader([header], delimiter=candidate))
            if len(names) > 1 and set(served.names) <= set(names):
                return candidate
    return None


def fetch(source: dict, ctx: FetchContext) -> pa.Table:
    name = source["name"]
    path = resolve_path(source, ctx)
    encoding = source.get("encoding", "utf-8")
    try:
        size, head, has_quotes = _look(path, encoding)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise SourceError(name, f"file not found: {source['path']}") from None
    except OSError as exc:
        raise SourceError(name, f"cannot read {source['path']}: {exc.strerror}") from None
    served = ctx.served.get(name)
    header = head.split("\n", 1)[0].rstrip("\r").lstrip("\ufeff")  # the parser drops a byte-order mark too
    delimiter = source.get("delimiter") or _served_delimiter(header, served) or sniff_delimiter(head)
    pinned = {col: arrow_type(t) for col, t in (source.get("columns") or {}).items()}
    # Two blocks or more let both cores parse (1.6x faster on a 3.5 MB file than one
    # 8 MB block); the first block, at least half the file up to 8 MB, decides the types.
    block_size = max(256 << 10, min(BLOCK_SIZE, size // 2 + 1))
    has_header = source.get("header", True)
    read_options = pacsv.ReadOptions(encoding=encoding, autogenerate_column_names=not has_header, block_size=block_size)
    # Quote-aware splitting costs 20-30 %; only a file with quotes can hold a newline in a value.
    parse_options = pacsv.ParseOptions(delimiter=delimiter, newlines_in_values=has_quotes)

    def read(column_types: dict[str, pa.DataType]) -> pa.Table:
        options = dict(read_options=read_options, parse_options=parse_options,
                       convert_options=pacsv.ConvertOptions(column_types=column_types, strings_can_be_null=True))
        if size <= STREAM_ABOVE_BYTES:
            return pacsv.read_csv(path, **options)  # multi-threaded: ~2x faster than streaming
        # The streaming reader holds one block at a time besides the result,
        # which roughly halves peak memory on large files compared with read_csv.
        reader = pacsv.open_csv(path, **options)
        return pa.Table.from_batches(list(reader), schema=reader.schema)

    try:
        if served is not None and _columns(header, delimiter, has_header) == served.names:
            try:
                return _read_as_served(read, served, pinned)
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
                pass  # a value no longer fits its column's type: the new file decides the types afresh
        return parse_dates(read(pinned), skip=set(pinned))
    except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeDecodeError) as exc:
        message = str(exc).replace("\n", " ")
        if "column" in message.lower() and "expected" in message.lower():
            message = f"malformed row: {message}"
        raise SourceError(name, f"cannot parse {source['path']}: {message}") from None


def _columns(header: str, delimiter: str, has_header: bool) -> list[str]:
    """The column names the header line gives (f0, f1, … for a file without one, as the parser names them)."""
    fields = next(csv.reader([header], delimiter=delimiter), [])
    return fields if has_header else [f"f{i}" for i in range(len(fields))]


DATE_FORMAT_KEY = b"dashmem.date_format"  # field metadata: the format a date column was parsed with


def _read_as_served(read, served: pa.Schema, pinned: dict[str, pa.DataType]) -> pa.Table:
    """Parse a file that has the columns of the data served now, taking their types as given.

    Inferring the types again was a third of a small file's parse. So a column of
    codes that happen to be all digits this week stays text, as served. Date
    columns are converted with their recorded format. A value that does not fit
    raises ArrowInvalid, and the caller lets the new file decide afresh.
    """
    types, dates = {}, {}
    for i, f in enumerate(served):
        date_format = (f.metadata or {}).get(DATE_FORMAT_KEY)
        if date_format and f.name not in pinned:
            types[f.name], dates[i] = pa.string(), date_format.decode()
        elif pa.types.is_dictionary(f.type):  # categories are stored dictionary-encoded
            types[f.name] = f.type.value_type
        elif not pa.types.is_null(f.type):
            types[f.name] = f.type
    table = read({**types, **pinned})
    for i, fmt in dates.items():
        values = _to_dates(table.column(i), fmt)
        if values is None:
            raise pa.ArrowInvalid(f"column {served.field(i).name!r} no longer parses as {fmt}")
        table = table.set_column(i, _date_field(served.field(i).name, values.type, fmt), values)
    return table


def _look(path: Path, encoding: str, head_bytes: int = 64 << 10) -> tuple[int, str, bool]:
    """The file's size, its first bytes as text (to sniff), and whether it holds a quote, in one open."""
    import mmap

    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size == 0:
            return 0, "", False
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return size, data[:head_bytes].decode(encoding, errors="replace"), data.find(b'"') != -1


def parse_dates(table: pa.Table, skip: set[str] = frozenset(), probe: int = 50) -> pa.Table:
    """Convert text columns whose values all match one of DATE_FORMATS to timestamps.

    A converted column records its format in the field's metadata, so the next
    refresh parses it with that format directly (see `_read_as_served`).
    """
    for i, field in enumerate(table.schema):
        if field.name in skip or not pa.types.is_string(field.type):
            continue
        # Most text columns are not dates: their first value rules them out before
        # the probe is copied into Python (that copy was a tenth of a small refresh).
        first = _first_text(table.column(i), probe * 4)
        if first is None or not any(pattern.match(first) for pattern, _ in DATE_FORMATS):
            continue
        head = [v for v in table.column(i).slice(0, probe * 4).to_pylist() if v][:probe]
        fmt = next((fmt for pattern, fmt in DATE_FORMATS if all(pattern.match(v) for v in head)), None)
        values = _to_dates(table.column(i), fmt) if fmt else None
        if values is not None:
            table = table.set_column(i, _date_field(field.name, values.type, fmt), values)
    return table


def _to_dates(column: pa.ChunkedArray, fmt: str) -> pa.ChunkedArray | None:
    """The text column parsed with `fmt`, or None when a value does not fit it (the column stays text).

    strptime reads a two-digit year for %Y as year 26, so such years count as not fitting.
    """
    try:
        values = pc.strptime(column, format=fmt, unit="s")
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if "%Y" in fmt and values.null_count < len(values) and pc.min(pc.year(values)).as_py() < 1000:
        return None
    if "%H" not in fmt and "%I" not in fmt:
        values = values.cast(pa.date32())  # a day, not a moment
    return values


def _date_field(name: str, kind: pa.DataType, fmt: str) -> pa.Field:
    return pa.field(name, kind, metadata={DATE_FORMAT_KEY: fmt.encode()})


def _first_text(column: pa.ChunkedArray, rows: int) -> str | None:
    """The first non-empty value among the first `rows`: usually row 0, so no copy is made."""
    for chunk in column.chunks[:1]:
        for j in range(min(len(chunk), 4)):
            if value := chunk[j].as_py():
                return value
    present = pc.drop_null(column.slice(0, rows))  # a mostly-empty column: look further
    return next((v for v in present.slice(0, 16).to_pylist() if v), None) if len(present) else None
