"""Excel workbooks (.xlsx): one sheet as a table, read with openpyxl in read-only mode.

Read-only mode streams the sheet's XML row by row, so a sheet over MAX_CELLS is
refused before its values fill memory (pandas.read_excel, over the same openpyxl,
loads the whole sheet first). Cells keep the types Excel stored: numbers, dates,
booleans, text; a column that mixes numbers and text becomes text, as in a JSON
source. Text cells that are all dates ('2024-01-31', typed in or exported as text)
become a date column, as the same sheet saved as CSV is read. Formulas give the value Excel last computed. Paths follow the CSV
source's rules (workspace folder, `upload:NAME`, DASHMEM_DATA_DIRS).

Parsing is pure Python and holds the interpreter against every other session: a sheet over
MAX_CELLS was refused only after 87 s of it. So the sheet's `<dimension ref="A1:Z300000">`,
read from the archive with a bounded read, refuses it first. An uploaded workbook
(`ctx.limits`), whose sheet may lack a dimension or lie in it, is also refused by its
members' unzipped sizes (which zipfile holds each member to) and by the cells its sheet's
XML opens, counted at C speed, before openpyxl opens it.
"""

from __future__ import annotations

import datetime as dt
import posixpath
import re
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path
from typing import Any

import pyarrow as pa

from .base import FetchContext, SourceError, UploadLimits, to_arrow_column, unique_name
from .csv_source import parse_text_dates, resolve_path

# 5M cells held as Python values is about 1 GB at its peak; a bigger sheet is better exported as CSV.
MAX_CELLS = 5_000_000
_CFB_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # an OLE compound file: an encrypted .xlsx, or an old .xls
_ENCRYPTED = "EncryptionInfo".encode("utf-16-le")  # the stream an encrypted workbook's compound file holds
_INDEX_BYTES = 1 << 20  # the most of the workbook's index (workbook.xml, its relationships) read to find a sheet
_HEAD_BYTES = 64 << 10  # the most of a sheet read to find its dimension, which comes before its cells
_DIMENSION = re.compile(rb"""<(?:[\w.-]+:)?dimension\s[^>]*?\bref\s*=\s*["']([^"']+)["']""")
_RANGE = re.compile(r"([A-Za-z]{1,3})(\d{1,7})(?::([A-Za-z]{1,3})(\d{1,7}))?")
_RELATIONSHIPS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"


def fetch(source: dict, ctx: FetchContext) -> pa.Table:
    name, shown = source["name"], source["path"]
    path = resolve_path(source, ctx)
    _check_container(name, shown, path)
    _check_size(name, shown, path, source.get("sheet"), ctx.limits)
    from openpyxl import load_workbook  # heavy: only Excel sources pay for it

    try:
        book = load_workbook(path, read_only=True, data_only=True)
    except (zipfile.BadZipFile, KeyError, ValueError, TypeError, OSError, EOFError) as exc:
        raise SourceError(
            name, f"{shown} is not a readable .xlsx workbook (the file is damaged: {_first_line(exc)}); open and save it again in Excel"
        ) from None
    except Exception as exc:  # openpyxl raises its own InvalidFileException and parser errors on damaged XML
        raise SourceError(
            name, f"{shown} is not a readable .xlsx workbook ({type(exc).__name__}: {_first_line(exc)}); open and save it again in Excel"
        ) from None
    try:
        wanted = source.get("sheet")
        if wanted is not None and wanted not in book.sheetnames:
            raise SourceError(name, f"{shown} has no sheet {wanted!r}; its sheets are {', '.join(repr(s) for s in book.sheetnames)}")
        sheet = book[wanted] if wanted is not None else book.worksheets[0]
        if not hasattr(sheet, "iter_rows"):  # a chart sheet
            raise SourceError(name, f"sheet {sheet.title!r} of {shown} is a chart, not cells; name a sheet of data with `sheet`")
        try:
            rows = _rows(name, shown, sheet, ctx.limits)
        except (zipfile.BadZipFile, KeyError, ValueError, EOFError) as exc:
            raise SourceError(name, f"sheet {sheet.title!r} of {shown} is damaged ({_first_line(exc)}); open and save it again in Excel") from None
        except SourceError:
            raise
        except Exception as exc:  # the XML parser's own errors on a damaged sheet
            raise SourceError(
                name, f"sheet {sheet.title!r} of {shown} is damaged ({type(exc).__name__}: {_first_line(exc)}); open and save it again in Excel"
            ) from None
    finally:
        book.close()
    if not rows:
        raise SourceError(name, f"sheet {sheet.title!r} of {shown} is empty")
    return _table(rows, source)


def _check_container(name: str, shown: str, path: Path) -> None:
    """Refuse, with the reason, a file that is no .xlsx at all: missing, encrypted, an old .xls, something else."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(8)
            encrypted = head == _CFB_MAGIC and _ENCRYPTED in handle.read(1 << 20)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise SourceError(name, f"file not found: {shown}") from None
    except OSError as exc:
        raise SourceError(name, f"cannot read {shown}: {exc.strerror}") from None
    if encrypted:
        raise SourceError(
            name, f"{shown} is protected by a password, which dashmem cannot open; save a copy without the password (File > Info > Protect Workbook)"
        )
    if head == _CFB_MAGIC:
        raise SourceError(name, f"{shown} is an old-style .xls workbook; save it as .xlsx (Excel Workbook) or export the sheet as CSV")
    if not head.startswith(b"PK"):
        raise SourceError(name, f"{shown} is not an .xlsx workbook (an .xlsx file is a zip archive; this one is not)")


def _check_size(name: str, shown: str, path: Path, wanted: str | None, limits: UploadLimits | None) -> None:
    """Refuse, before openpyxl parses anything, a sheet whose dimension says it is over MAX_CELLS (or, for an
    upload, over the rows allowed); and an upload whose archive unzips to more than the bytes allowed, or whose
    sheet opens more than MAX_CELLS cells, counted in its unzipped XML whatever its dimension says."""
    try:
        with zipfile.ZipFile(path) as archive:
            if limits is not None:
                limits.check_bytes(name, shown, sum(member.file_size for member in archive.infolist()), "once unzipped")
            title, part = _sheet_part(archive, wanted)
            if part is None:
                return  # openpyxl finds the sheet, or says why not; its cells are counted as they are read
            area = _dimension(archive, part)
            if area is not None:
                ref, rows, columns = area
                _refuse_cells(name, f"sheet {title!r} of {shown}", rows * columns, f"by its dimension ({ref}: {rows:,} rows of {columns:,} columns)")
                if limits is not None:
                    limits.check_rows(name, f"sheet {title!r} of {shown}", rows)
            if limits is not None:
                _refuse_cells(name, f"sheet {title!r} of {shown}", _cells_in(archive, part), "in its XML")
    except (zipfile.BadZipFile, zipfile.LargeZipFile, KeyError, OSError, EOFError, ValueError):
        return  # openpyxl says what is wrong with it


def _refuse_cells(name: str, sheet: str, cells: int, how: str) -> None:
    if cells > MAX_CELLS:
        raise SourceError(name, f"{sheet} has {cells:,} cells {how}, more than the {MAX_CELLS:,} a sheet may have; export it as CSV, which has no such limit")


def _cells_in(archive: zipfile.ZipFile, part: str) -> int:
    """How many elements the sheet's XML opens whose name starts with `c` (each cell, and the few `col`s and
    `cfRule`s): counted in its unzipped bytes at C speed, 0.4 s for 120 MB where openpyxl took 33 s to parse it."""
    count, last = 0, b""
    with archive.open(part) as handle:
        while chunk := handle.read(8 << 20):
            count += chunk.count(b"<c") + chunk.count(b":c") + (last + chunk[:1] in (b"<c", b":c"))  # `<x:c`: a prefixed name
            last = chunk[-1:]
    return count


def _sheet_part(archive: zipfile.ZipFile, wanted: str | None) -> tuple[str | None, str | None]:
    """The title and archive member of the sheet named `wanted`, or of the first worksheet as openpyxl
    picks it, from the workbook's index read with bounded reads; (None, None) when it cannot be told."""
    try:
        book_part = "xl/workbook.xml"
        for rel in _parse(archive, "_rels/.rels"):
            if rel.get("Type", "").endswith("/officeDocument"):
                book_part = rel.get("Target", book_part).lstrip("/")
        folder, file = posixpath.split(book_part)
        targets = {
            rel.get("Id"): rel.get("Target", "")
            for rel in _parse(archive, posixpath.join(folder, "_rels", file + ".rels"))
            if rel.get("Type", "").endswith("/worksheet")
        }
        for sheet in _parse(archive, book_part).iter():
            if sheet.tag.rpartition("}")[2] != "sheet" or sheet.get(f"{{{_RELATIONSHIPS}}}id") not in targets:
                continue
            if wanted is None or sheet.get("name") == wanted:
                target = targets[sheet.get(f"{{{_RELATIONSHIPS}}}id")]
                return sheet.get("name"), target.lstrip("/") if target.startswith("/") else posixpath.normpath(posixpath.join(folder, target))
    except (KeyError, ET.ParseError, ValueError):
        pass
    return None, None


def _parse(archive: zipfile.ZipFile, part: str) -> ET.Element:
    """A small part of the workbook as XML; ValueError when it is bigger than _INDEX_BYTES."""
    with archive.open(part) as handle:
        text = handle.read(_INDEX_BYTES + 1)
    if len(text) > _INDEX_BYTES:
        raise ValueError(f"{part} is over {_INDEX_BYTES:,} bytes")
    return ET.fromstring(text)  # expat refuses entity expansion past its amplification limit (billion laughs)


def _dimension(archive: zipfile.ZipFile, part: str) -> tuple[str, int, int] | None:
    """The sheet's `<dimension ref=...>` as (ref, rows, columns), from its first _HEAD_BYTES; None without one."""
    try:
        with archive.open(part) as handle:
            head = handle.read(_HEAD_BYTES)
    except KeyError:
        return None
    found = _DIMENSION.search(head)
    shape = _RANGE.fullmatch(found.group(1).decode("ascii", "replace").strip()) if found else None
    if shape is None or found is None:
        return None
    first_col, first_row, last_col, last_row = shape.groups()
    last_col, last_row = last_col or first_col, last_row or first_row
    rows = int(last_row) - int(first_row) + 1
    columns = _column_number(last_col) - _column_number(first_col) + 1
    return (found.group(1).decode("ascii", "replace"), rows, columns) if rows > 0 and columns > 0 else None


def _column_number(letters: str) -> int:
    number = 0
    for letter in letters.upper():
        number = number * 26 + ord(letter) - ord("A") + 1
    return number


def _rows(name: str, shown: str, sheet, limits: UploadLimits | None = None) -> list[tuple]:
    """The sheet's rows with a value in them (empty formatted rows dropped), at most MAX_CELLS cells
    (and, for an upload, at most the rows `limits` allow)."""
    rows, cells = [], 0
    for row in sheet.iter_rows(values_only=True):
        cells += len(row)
        if cells > MAX_CELLS:
            raise SourceError(
                name,
                f"sheet {sheet.title!r} of {shown} has more than {MAX_CELLS:,} cells (over {len(rows):,} rows of {len(row):,} columns); "
                "export it as CSV, which has no such limit",
            )
        if any(v is not None and v != "" for v in row):
            rows.append(row)
            if limits is not None:
                limits.check_rows(name, f"sheet {sheet.title!r} of {shown}", len(rows), counting=True)
    return rows


def _table(rows: list[tuple], source: dict) -> pa.Table:
    width = max(len(r) for r in rows)
    has_header = source.get("header", True)
    header, body = (rows[0], rows[1:]) if has_header else ((), rows)
    nulls: set[str] = set(source.get("null_values") or ())
    names: list[str] = []
    arrays = []
    for i in range(width):
        values = [_cell(r[i] if i < len(r) else None, nulls) for r in body]
        title = _name(header[i] if i < len(header) else None)
        if title is None and all(v is None for v in values):
            continue  # a formatted but unused column at the sheet's edge
        names.append(unique_name(title or f"column_{i + 1}", names))
        arrays.append(_column(values))
    # Dates typed in as text ('2024-01-31') are dates, as the same sheet saved as CSV gives; pinned columns keep their type.
    return parse_text_dates(pa.table(dict(zip(names, arrays))), skip=set(source.get("columns") or {}))


def _cell(value: Any, nulls: set[str]) -> Any:
    if isinstance(value, str):
        value = value.strip()
        return None if value == "" or value in nulls else value
    return value


def _name(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # a year heading, 2024, is stored as 2024.0
    if isinstance(value, dt.datetime) and value.time() == dt.time():
        value = value.date()
    text = str(value).strip()
    return text or None


def _column(values: list[Any]) -> pa.Array:
    """Values as one Arrow column; date-times that are all midnight are dates, as Excel shows them."""
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, dt.datetime) and v.time() == dt.time() for v in present):
        return pa.array([v.date() if v is not None else None for v in values], pa.date32())
    if any(isinstance(v, dt.timedelta) for v in present):  # a duration cell: its text, which every tool reads
        values = [str(v) if v is not None else None for v in values]
    return to_arrow_column(values)


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:200]
