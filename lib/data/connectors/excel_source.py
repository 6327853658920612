"""Excel workbooks (.xlsx): one sheet as a table, read with openpyxl in read-only mode.

Read-only mode streams the sheet's XML row by row, so a sheet over MAX_CELLS is
refused before its values fill memory (pandas.read_excel, over the same openpyxl,
loads the whole sheet first). Cells keep the types Excel stored: numbers, dates,
booleans, text; a column that mixes numbers and text becomes text, as in a JSON
source. Formulas give the value Excel last computed. Paths follow the CSV
source's rules (workspace folder, `upload:NAME`, DASHMEM_DATA_DIRS).
"""

from __future__ import annotations

import datetime as dt
import zipfile
from pathlib import Path
from typing import Any

import pyarrow as pa

from .base import FetchContext, SourceError, to_arrow_column, unique_name
from .csv_source import resolve_path

# 5M cells held as Python values is about 1 GB at its peak; a bigger sheet is better exported as CSV.
MAX_CELLS = 5_000_000
_CFB_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # an OLE compound file: an encrypted .xlsx, or an old .xls
_ENCRYPTED = "EncryptionInfo".encode("utf-16-le")  # the stream an encrypted workbook's compound file holds


def fetch(source: dict, ctx: FetchContext) -> pa.Table:
    name, shown = source["name"], source["path"]
    path = resolve_path(source, ctx)
    _check_container(name, shown, path)
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
            rows = _rows(name, shown, sheet)
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


def _rows(name: str, shown: str, sheet) -> list[tuple]:
    """The sheet's rows with a value in them (empty formatted rows dropped), at most MAX_CELLS cells."""
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
    return pa.table(dict(zip(names, arrays)))


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
