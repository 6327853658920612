"""CSV files: parsed with pyarrow, which measured fastest here on small and large files.

The delimiter is sniffed when not given; header, encoding and pinned column
types come from the source. Paths resolve inside the workspace folder, the
uploads folder (`upload:NAME`), or a folder listed in DASHMEM_DATA_DIRS; any
other path is refused, so a workspace cannot read arbitrary server files.

An uploaded file (`ctx.limits`) is refused by its size before parsing, then parsed block by
block, counting rows and bytes, and stopped at the caps: a 200 MB file of one-digit lines is
100 million rows. It is read as a stream, never decompressed by its name's ending as a path
would be (`x.csv.gz`), so its size is what it decodes from.
"""

from __future__ import annotations

import codecs
import contextlib
import csv
import hashlib
import io
import os
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from ..coltypes import arrow_type
from .base import NOTE_KEY, FetchContext, SourceError, confined_path, parse_iso_dates

BLOCK_SIZE = 8 << 20  # most bytes per parsed block; types are inferred from the first block
STREAM_ABOVE_BYTES = 128 << 20  # files larger than this are parsed block by block if memory is short
# Peak memory of a whole-file read_csv, in file sizes: 1.03 GB for the 327 MB 1M x 44 CSV, where the
# streaming reader peaked at 0.57 GB (bench/snapshots.py's file, maxrss of each in a fresh process).
READ_WHOLE_PEAK = 3.5

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
    """Keep an uploaded file (CSV, Excel, Parquet) in a workspace's uploads folder; returns the `path` a source reads it by.

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
    """The file as a table. Without an `encoding` setting the file should be UTF-8; one that is
    not is read as Windows-1252 (a superset of Latin-1) when its bytes look like such text, and
    the table's schema metadata says so (base.py's `fetch_note`); otherwise it is refused, naming the
    byte offset of the first byte that is not UTF-8. A value is never kept as bytes."""
    try:
        return _fetch(source, ctx, source.get("encoding") or "utf-8")
    except SourceError:
        if source.get("encoding") or not _utf16_bom(resolve_path(source, ctx)):
            raise
        fallback, where = "utf-16", "it starts with a UTF-16 byte-order mark"
    except _NotUtf8 as exc:
        if source.get("encoding"):  # the source says UTF-8: believe it, and say where the file is not
            raise SourceError(source["name"], exc.message(source["path"], "the source's encoding is utf-8")) from None
        fallback = _single_byte_encoding(exc.path)
        if fallback is None:
            raise SourceError(source["name"], exc.message(source["path"], _why_not_single_byte(exc.path))) from None
        where = f"byte {exc.offset:,}, on line {exc.line:,}, is not valid UTF-8"
    table = _fetch(source, ctx, fallback)
    note = (
        f"{source['path']} is not UTF-8 ({where}): read it as {FALLBACK_NAMES[fallback]}; "
        f"set `encoding: {DECLARED[fallback]}` on the source to say so and silence this note"
    )
    return table.replace_schema_metadata({**(table.schema.metadata or {}), ENCODING_KEY: fallback.encode(), NOTE_KEY: note.encode()})


# Schema metadata of a table read in a fallback encoding: which one (and a sentence for people, base.py's NOTE_KEY).
ENCODING_KEY = b"dashmem.encoding"
FALLBACK_NAMES = {"cp1252": "Windows-1252 (Latin-1)", "utf-16": "UTF-16"}
DECLARED = {"cp1252": "latin-1", "utf-16": "utf-16"}  # the `encoding` setting (schema enum) closest to each


def _utf16_bom(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(2) in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
    except OSError:
        return False


class _NotUtf8(Exception):
    """The file was read as UTF-8 and is not: where its first invalid byte is."""

    def __init__(self, path: Path):
        self.path = path
        self.offset, self.line = _first_invalid_utf8(path)

    def message(self, shown: str, why: str) -> str:
        return (
            f"{shown} is not UTF-8 text: byte {self.offset:,} (line {self.line:,}) is not valid UTF-8, and {why}; "
            "set `encoding` on the source (latin-1 or utf-16), or save the file as UTF-8"
        )


@contextlib.contextmanager
def _mapped(path: Path):
    """The file's bytes, mapped rather than read: these scans run over whole files."""
    import mmap

    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:  # mmap refuses empty files
            yield b""
            return
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            yield data


def _first_invalid_utf8(path: Path, chunk: int = 8 << 20) -> tuple[int, int]:
    """(byte offset, 1-based line) of the first byte of the file that is not valid UTF-8."""
    with _mapped(path) as data:
        position = 0
        while position < len(data):
            piece = data[position : position + chunk]
            final = position + len(piece) >= len(data)
            try:
                _, used = codecs.utf_8_decode(piece, "strict", final)
            except UnicodeDecodeError as exc:
                offset = position + exc.start
                return offset, data[:offset].count(b"\n") + 1
            if used == 0:  # pragma: no cover - an incomplete sequence at the very end is an error when final
                break
            position += used
        return len(data), data[: len(data)].count(b"\n") + 1  # only pyarrow's own check failed


_UTF8_SEQUENCE = re.compile(rb"[\xc2-\xdf][\x80-\xbf]|[\xe0-\xef][\x80-\xbf]{2}|[\xf0-\xf4][\x80-\xbf]{3}")
# Bytes that no Windows-1252 text holds: control characters besides tab, line feed and
# carriage return, and the five bytes Windows-1252 leaves undefined.
_NOT_SINGLE_BYTE_TEXT = re.compile(rb"[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f\x81\x8d\x8f\x90\x9d]")


def _single_byte_encoding(path: Path) -> str | None:
    """'cp1252' when a file that is not UTF-8 reads as Windows-1252 text; None when it does not:
    it holds control bytes, or it mixes UTF-8 with another encoding (guessing would garble one of them)."""
    with _mapped(path) as data:
        if _NOT_SINGLE_BYTE_TEXT.search(data) or _UTF8_SEQUENCE.search(data):
            return None
    return "cp1252"


def _why_not_single_byte(path: Path) -> str:
    with _mapped(path) as data:
        if (mixed := _UTF8_SEQUENCE.search(data)) is not None:
            return f"the file also holds UTF-8 text (at byte {mixed.start():,}): it mixes encodings, so no single one reads it right"
        control = _NOT_SINGLE_BYTE_TEXT.search(data)
        return f"it does not read as Latin-1 text either (byte {control.start() if control else 0:,} is a control byte)"


def _fetch(source: dict, ctx: FetchContext, encoding: str) -> pa.Table:
    name = source["name"]
    path = resolve_path(source, ctx)
    try:
        size, head, has_quotes = _look(path, encoding)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise SourceError(name, f"file not found: {source['path']}") from None
    except OSError as exc:
        raise SourceError(name, f"cannot read {source['path']}: {exc.strerror}") from None
    if ctx.limits is not None:
        ctx.limits.check_bytes(name, source["path"], size, "of text")
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

    numbers = NumberFormat.of(source)
    null_values = source.get("null_values")
    # Without `null_values`, Arrow's sentinels (NA, n/a, #N/A, ...) still mark missing numbers and dates,
    # but text keeps them as written: "NA" may be Namibia, "n/a" an answer. Empty text is missing (below).
    convert = dict(
        strings_can_be_null=null_values is not None,
        null_values=["", *null_values] if null_values is not None else pacsv.ConvertOptions().null_values,
        decimal_point=numbers.decimal,
    )
    if numbers.thousands:  # grouped numbers are text to Arrow: read pinned numbers as text and convert them below
        pinned = {col: pa.string() if numbers.converts(t) else t for col, t in pinned.items()}

    def read(column_types: dict[str, pa.DataType]) -> pa.Table:
        options = dict(read_options=read_options, parse_options=parse_options, convert_options=pacsv.ConvertOptions(column_types=column_types, **convert))
        if ctx.limits is not None:
            with pa.OSFile(str(path)) as stream:
                reader = pacsv.open_csv(stream, **options)
                batches = list(ctx.limits.batches(name, source["path"], reader))
            table = pa.Table.from_batches(batches, schema=reader.schema)
        elif not _stream(size):
            table = pacsv.read_csv(path, **options)  # multi-threaded: ~2x faster than streaming
        else:
            # The streaming reader holds one block at a time besides the result,
            # which roughly halves peak memory on large files compared with read_csv.
            reader = pacsv.open_csv(path, **options)
            table = pa.Table.from_batches(list(reader), schema=reader.schema)
        return table if null_values is not None else _empty_text_as_null(table)

    utf8 = codecs.lookup(encoding).name == "utf-8"
    try:
        # Grouped numbers are converted after parsing, which the served types cannot say: such a file is read afresh.
        if served is not None and not numbers.thousands and _columns(header, delimiter, has_header) == served.names:
            try:
                return _text_columns(_read_as_served(read, served, pinned), path, utf8)
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
                pass  # a value no longer fits its column's type: the new file decides the types afresh
        table = parse_dates(read(pinned), skip=set(pinned))
        if numbers.thousands:
            table = numbers.convert(name, table, {col: arrow_type(t) for col, t in (source.get("columns") or {}).items()})
        return _text_columns(table, path, utf8)
    except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeError) as exc:  # UnicodeError: a UTF-16 file without its byte-order mark
        if utf8 and (isinstance(exc, UnicodeDecodeError) or "invalid utf8" in str(exc).lower() or _has_invalid_utf8(path)):
            raise _NotUtf8(path) from None  # a binary file's bytes may first break a row: say what the file is
        message = _printable(str(exc).replace("\n", " "))
        if isinstance(exc, UnicodeError):
            message = f"not {encoding} text ({message})"
        if "column" in message.lower() and "expected" in message.lower():
            message = f"malformed row: {message}"
        if (bad := _CONVERSION_ERROR.search(message)) is not None:
            message = _conversion_hint(bad, _columns(header, delimiter, has_header), source) or message
        raise SourceError(name, f"cannot parse {source['path']}: {message}") from None


def _has_invalid_utf8(path: Path) -> bool:
    """Whether the file holds bytes that are not UTF-8 (a UTF-16 file is told apart by its byte-order mark, by `fetch`)."""
    return not _utf16_bom(path) and _first_invalid_utf8(path)[0] < path.stat().st_size


def _printable(text: str, longest: int = 300) -> str:
    """A parser's message as a person reads it: control bytes shown as `?`, and not endless."""
    shown = "".join(ch if ch.isprintable() else "?" for ch in text)
    return shown if len(shown) <= longest else shown[: longest - 1] + "…"


_CONVERSION_ERROR = re.compile(r"In CSV column #(?P<index>\d+): (Row #\d+: )?CSV conversion error to (?P<kind>\w+): invalid value '(?P<value>.*)'$")


def _conversion_hint(bad: re.Match, columns: list[str], source: dict) -> str | None:
    """A pinned (or served) column holding a value that is no such type: which column and value,
    and, when the value looks like a placeholder for a missing one, the setting that reads it so."""
    index, value = int(bad["index"]), bad["value"]
    column = columns[index] if index < len(columns) else f"#{index}"
    message = f"column {column!r} is typed {bad['kind']}, but holds {value!r}"
    if (value.strip() and not any(ch.isalnum() for ch in value)) or value.strip().lower() in _PLACEHOLDER_WORDS:
        wanted = list(dict.fromkeys([*(source.get("null_values") or []), value]))
        message += f"; if {value!r} means a missing value, add null_values: {wanted!r} to the source"
    return message


# Words that stand for a missing value (besides values with no letter or digit at all, such as '-' or '?').
_PLACEHOLDER_WORDS = {"na", "n/a", "n.a.", "none", "null", "nil", "missing", "unknown", "tbd", "tba", "pending", "#n/a", "#na", "#value!", "#ref!", "#div/0!"}


def _empty_text_as_null(table: pa.Table) -> pa.Table:
    """Empty text values as missing ones, as they were before text kept Arrow's null sentinels:
    an empty cell is missing whatever the column's type."""
    for i, field in enumerate(table.schema):
        if pa.types.is_string(field.type):
            column = table.column(i)
            # No Python scalar here: converting one imports pandas, which a refresh otherwise never loads.
            empty = pc.invert(pc.binary_length(column).cast(pa.bool_()))  # pyright: ignore[reportAttributeAccessIssue]  # pyarrow.compute makes its kernels at import: no stubs
            if pc.any(empty).as_py():  # pyright: ignore[reportAttributeAccessIssue]
                table = table.set_column(i, field, pc.if_else(empty, pa.nulls(len(column), field.type), column))  # pyright: ignore[reportAttributeAccessIssue]
    return table


class NumberFormat:
    """How a source writes numbers: its decimal mark and thousands separator (`1.234,56` in much of Europe).

    Arrow reads a decimal comma itself; numbers with a thousands separator come out as
    text, and a text column whose every value is such a number is converted here.
    """

    def __init__(self, decimal: str = ".", thousands: str | None = None):
        self.decimal, self.thousands = decimal, thousands
        if thousands is not None:
            t, d = re.escape(thousands), re.escape(decimal)
            self.pattern = rf"^[+-]?(\d{{1,3}}({t}\d{{3}})+|\d+)({d}\d+)?$"

    def reads(self, text: str) -> bool:
        """Whether `text` is a number written this way (a sign, digits, the decimal mark, groups if there is a separator)."""
        if self.thousands is not None:
            return re.match(self.pattern, text) is not None
        return re.match(rf"^[+-]?(\d+({re.escape(self.decimal)}\d*)?|{re.escape(self.decimal)}\d+)([eE][+-]?\d+)?$", text) is not None

    @classmethod
    def of(cls, source: dict) -> NumberFormat:
        decimal, thousands = source.get("decimal") or ".", source.get("thousands")
        if thousands is not None and thousands == decimal:
            raise SourceError(
                source["name"], f"thousands and decimal are both {decimal!r}; a number needs two different marks (say thousands: '.' and decimal: ',')"
            )
        return cls(decimal, thousands)

    @staticmethod
    def converts(kind: pa.DataType) -> bool:
        return pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind)

    def convert(self, name: str, table: pa.Table, pinned: dict[str, pa.DataType]) -> pa.Table:
        """Text columns that hold only numbers in this format, as numbers; a pinned number column that does not is an error."""
        for i, field in enumerate(table.schema):
            if not pa.types.is_string(field.type) or (field.name in pinned and not self.converts(pinned[field.name])):
                continue
            column = table.column(i)
            first = _first_text(column, 64)
            if field.name not in pinned and (first is None or re.match(self.pattern, first) is None):
                continue  # most text columns are not numbers: their first value says so before a scan
            fits = pc.match_substring_regex(column, self.pattern)  # pyright: ignore[reportAttributeAccessIssue]  # pyarrow.compute makes its kernels at import: no stubs
            if fits.null_count != len(column) and not pc.all(fits).as_py():  # pyright: ignore[reportAttributeAccessIssue]
                if field.name in pinned:
                    bad = pc.filter(column, pc.invert(fits))[0].as_py()  # pyright: ignore[reportAttributeAccessIssue]
                    raise SourceError(
                        name,
                        f"column {field.name!r} is pinned to a number type, but holds {bad!r}, which is not a number written with thousands {self.thousands!r} and decimal {self.decimal!r}",
                    )
                continue
            plain = pc.replace_substring(column, self.thousands, "")  # pyright: ignore[reportAttributeAccessIssue]
            if self.decimal != ".":
                plain = pc.replace_substring(plain, self.decimal, ".")  # pyright: ignore[reportAttributeAccessIssue]
            fractions = pc.any(pc.match_substring(plain, ".")).as_py()  # pyright: ignore[reportAttributeAccessIssue]
            kind = pinned.get(field.name) or (pa.float64() if fractions else pa.int64())
            table = table.set_column(i, pa.field(field.name, kind), plain.cast(kind))
        return table


def _text_columns(table: pa.Table, path: Path, utf8: bool) -> pa.Table:
    """The table, if no column came out as bytes. The parser keeps a column whose values are
    not valid UTF-8 as binary, which would reach the dashboard as `b'K\\xf6ln'`."""
    if any(pa.types.is_binary(t) or pa.types.is_large_binary(t) for t in table.schema.types):
        if utf8:
            raise _NotUtf8(path)
        raise pa.ArrowInvalid("a column holds bytes that are not text")  # pragma: no cover - other encodings decode to text
    return table


def _stream(size: int) -> bool:
    """Whether to parse block by block: a big file whose whole-file read would take over half the free memory.

    Streaming parses on one core, which made a 1M-row file load 1.8x slower than
    read_csv on two (issue #14), so it is kept for when memory is what is short.
    """
    return size > STREAM_ABOVE_BYTES and size * READ_WHOLE_PEAK > available_memory() // 2


def available_memory() -> int:
    """Bytes of memory the system can give without swapping (MemAvailable), or 0 if unknown (then big files stream)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return 0


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


def parse_dates(table: pa.Table, skip: frozenset[str] | set[str] = frozenset(), probe: int = 50) -> pa.Table:
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
        if values is not None and fmt is not None:
            table = table.set_column(i, _date_field(field.name, values.type, fmt), values)
    return table


def parse_text_dates(table: pa.Table, skip: frozenset[str] | set[str] = frozenset()) -> pa.Table:
    """Text columns of dates as a CSV's are read: ISO 8601 text as dates and timestamps (`base.parse_iso_dates`),
    then the other DATE_FORMATS (`parse_dates`); for sources whose values arrive as text, not parsed from a CSV
    (an Excel sheet's text cells, an MCP tool's answer). Columns in `skip` (pinned types) are left as they are."""
    return parse_dates(parse_iso_dates(table, skip), skip=skip)


def _to_dates(column: pa.ChunkedArray, fmt: str) -> pa.ChunkedArray | None:
    """The text column parsed with `fmt`, or None when a value does not fit it (the column stays text).

    strptime reads a two-digit year for %Y as year 26, so such years count as not fitting.
    """
    try:
        values = pc.strptime(column, format=fmt, unit="s")  # pyright: ignore[reportAttributeAccessIssue]  # pyarrow.compute makes its kernels at import: no stubs
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if "%Y" in fmt and values.null_count < len(values) and pc.min(pc.year(values)).as_py() < 1000:  # pyright: ignore[reportAttributeAccessIssue]  # pyarrow.compute makes its kernels at import: no stubs
        return None
    if "%H" not in fmt and "%I" not in fmt:
        values = values.cast(pa.date32())  # a day, not a moment
    return values


_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?$")


def looks_like_date(text: str) -> bool:
    """Whether `text` is a date the reader would parse (ISO 8601 or one of DATE_FORMATS)."""
    return _ISO_DATE.match(text) is not None or any(pattern.match(text) for pattern, _ in DATE_FORMATS)


def _date_field(name: str, kind: pa.DataType, fmt: str) -> pa.Field:
    return pa.field(name, kind, metadata={DATE_FORMAT_KEY: fmt.encode()})


def _first_text(column: pa.ChunkedArray, rows: int) -> str | None:
    """The first non-empty value among the first `rows`: usually row 0, so no copy is made."""
    for chunk in column.chunks[:1]:
        for j in range(min(len(chunk), 4)):
            if value := chunk[j].as_py():
                return value
    present = pc.drop_null(column.slice(0, rows))  # pyright: ignore[reportAttributeAccessIssue]  # a mostly-empty column: look further (pc has no stubs)
    return next((v for v in present.slice(0, 16).to_pylist() if v), None) if len(present) else None
