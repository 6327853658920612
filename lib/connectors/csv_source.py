"""CSV files: parsed with pyarrow, which measured fastest here on small and large files.

The delimiter is sniffed when not given; header, encoding and pinned column
types come from the source. Paths resolve inside the workspace folder, the
uploads folder (`upload:NAME`), or a folder listed in DASHMEM_DATA_DIRS; any
other path is refused, so a workspace cannot read arbitrary server files.
"""
from __future__ import annotations

import csv
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv

from .base import FetchContext, SourceError
from ..coltypes import arrow_type

# Formats seen in real exports (US dates with two-digit years, day-first with dashes),
# tried after ISO 8601. A column converts only if every value parses.
TIMESTAMP_FORMATS = [pacsv.ISO8601, "%m/%d/%Y %H:%M:%S", "%m/%d/%Y %I:%M:%S %p", "%m/%d/%y %H:%M", "%m/%d/%Y", "%d-%m-%Y"]


def resolve_path(source: dict, ctx: FetchContext) -> Path:
    name, raw = source["name"], source["path"]
    if raw.startswith("upload:"):
        upload = raw.split(":", 1)[1]
        if not ctx.uploads_dir or "/" in upload or upload.startswith("."):
            raise SourceError(name, f"invalid upload reference {raw!r}")
        return ctx.uploads_dir / upload
    path = Path(raw)
    base = Path(ctx.workspace_path).resolve()
    full = (base / path).resolve() if not path.is_absolute() else path.resolve()
    allowed = [base] + [Path(p).resolve() for p in os.environ.get("DASHMEM_DATA_DIRS", "").split(os.pathsep) if p]
    if not any(full == root or root in full.parents for root in allowed):
        raise SourceError(name, f"path {raw!r} is outside the workspace folder; list its folder in DASHMEM_DATA_DIRS to allow it")
    return full


def sniff_delimiter(path: Path, encoding: str) -> str:
    with open(path, "r", encoding=encoding, errors="replace", newline="") as handle:
        sample = handle.read(64 * 1024)
    try:
        return csv.Sniffer().sniff(sample, delimiters=",;\t|").delimiter
    except csv.Error:
        return ","


def fetch(source: dict, ctx: FetchContext) -> pa.Table:
    name = source["name"]
    path = resolve_path(source, ctx)
    if not path.is_file():
        raise SourceError(name, f"file not found: {source['path']}")
    encoding = source.get("encoding", "utf-8")
    delimiter = source.get("delimiter") or sniff_delimiter(path, encoding)
    pinned = {col: arrow_type(t) for col, t in (source.get("columns") or {}).items()}
    try:
        return pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(encoding=encoding, autogenerate_column_names=not source.get("header", True)),
            parse_options=pacsv.ParseOptions(delimiter=delimiter, newlines_in_values=True),
            convert_options=pacsv.ConvertOptions(column_types=pinned, timestamp_parsers=TIMESTAMP_FORMATS, strings_can_be_null=True),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeDecodeError) as exc:
        message = str(exc).replace("\n", " ")
        if "column" in message.lower() and "expected" in message.lower():
            message = f"malformed row: {message}"
        raise SourceError(name, f"cannot parse {source['path']}: {message}") from None
