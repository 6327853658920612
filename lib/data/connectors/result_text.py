"""A tool's answer as a table: the text and data shapes real servers send, read as data only.

Servers nobody here wrote answer a query in many shapes (issue #30): the reference SQLite MCP server
sends a Python literal of dicts, the DuckDB one a literal of tuples without column names, mcp-alchemy
`key: value` blocks, motherduck an object of `columns` beside `rows` arrays inside a JSON string. Each
is read here into rows with their column names, and typed: numbers from text, ISO dates and
timestamps as dates, so a table of JSON arrays or of digits as text is never what gets stored.

The formats (`result_format` pins one when guessing would read a text wrongly), tried in this order:

- `json`: an array of objects, or an object wrapping them (`rows`, `data`, ... or `records_path`),
  or `columns` beside `rows` arrays (or `columns_path`); also a JSON string holding such JSON
- `python`: a Python literal of the same, parsed into a syntax tree of which only constants,
  containers and a few value constructors (`datetime.date(...)`, `Decimal('...')`) are read;
  nothing is ever evaluated
- `markdown`: a pipe table with its `|---|` line
- `key_value`: blocks of `key: value` lines, one per row, optionally headed (`1. row`)
- `csv`, `tsv`: a header line, then rows of as many fields

A server that says its answer is incomplete (a `truncated: true` flag, a warning that results were
limited, a trailing "(output truncated)") is heard: `Rows.truncated` quotes it, for the connector
to fail the source or, where the source allows it, warn.
"""

from __future__ import annotations

import ast
import csv
import datetime as dt
import decimal
import io
import json
import re
import uuid
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv

from ...memory import schemas
from .base import dig, records_to_table
from .csv_source import parse_dates, parse_text_dates

# The values of `result_format`, in the order a guess tries them (the schema documents that order).
FORMATS: tuple[str, ...] = schemas.enum("sources", "mcp", "result_format")

# Keys under which an answer commonly wraps its rows in an object (MCPServer and FastMCP use "result").
ROW_KEYS = ("result", "rows", "data", "items", "records", "results", "values")
# Keys that name the columns beside rows given as arrays.
COLUMN_KEYS = ("columns", "column_names", "columnNames", "fields", "headers", "header", "names", "schema")

# A flag beside the rows saying they are not all of them (compared without `_` and case).
TRUNCATION_FLAGS = frozenset({"truncated", "istruncated", "resulttruncated", "resultstruncated", "hasmore", "incomplete"})
# Keys whose text may say so in words.
NOTE_KEYS = frozenset({"warning", "warnings", "message", "messages", "note", "notes", "notice", "info"})
TRUNCATION_WORDS = re.compile(
    r"truncat|limited to|\blimit(ed)? of \d|(showing|only|returned|returning) (the )?first \d|more rows|rows? (limit|cap)|output (size )?limit|results? (were|was|have been|are) (limited|cut|capped)",
    re.IGNORECASE,
)

# Text read as missing in the text formats (mcp-alchemy writes NULL for None).
TEXT_NULLS = ["", "NULL", "null"]

_ROW_HEADER = re.compile(r"^\s*(\d+\s*[.)]?\s*rows?|rows?\s*#?\s*\d+|record\s*#?\s*\d+|#\s*\d+|[-=*]{3,}.*)\s*:?\s*$", re.IGNORECASE)
_KEY_VALUE = re.compile(r"^\s*(?P<key>[^\n]+?):(?:[ \t]+(?P<value>.*))?$")
_MD_RULE = re.compile(r"^\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?$")


class NotRows(ValueError):
    """The server answered, but not with rows this module can read; the message says what it sent."""


@dataclass(frozen=True)
class Reading:
    """How a source says to read its answers (the settings of `$defs/mcp` of the same names)."""

    format: str | None = None  # one of FORMATS, or None to guess
    records_path: str | None = None  # dotted path to the rows in a JSON answer
    columns_path: str | None = None  # dotted path to the column names of rows given as arrays
    column_names: tuple[str, ...] | None = None  # names for rows given as arrays with no names anywhere

    @classmethod
    def of(cls, source: dict) -> Reading:
        names = source.get("column_names")
        return cls(source.get("result_format"), source.get("records_path"), source.get("columns_path"), tuple(names) if names else None)


@dataclass
class Rows:
    table: pa.Table
    format: str  # the format the answer was read as
    truncated: str | None = None  # the server's own words (or flag) saying the answer is incomplete


@dataclass
class _Part:
    """What one piece of an answer held: rows as JSON-like values, or a table already typed from text."""

    format: str
    records: list | None = None
    table: pa.Table | None = None
    truncated: str | None = None


def from_texts(texts: list[str], reading: Reading) -> Rows:
    """Rows from an answer's text items: one JSON row per item, or one item holding them all.

    An item that is prose beside items that are rows (a server's "Showing the first 100 rows") is a
    note: it is read for a truncation warning, not as data.
    """
    parts: list[_Part] = []
    notes: list[str] = []
    failures: list[NotRows] = []
    for text in texts:
        try:
            parts.append(_from_text(text, reading))
        except NotRows as exc:
            if text.strip()[:1] in ("[", "{", "(", "|"):  # meant as rows; a broken one is never skipped
                raise
            notes.append(text)
            failures.append(exc)
    if not parts:
        raise failures[0] if failures else NotRows("the answer holds no text")
    return _joined(parts, next((said for said in map(_said_truncated, notes) if said), None))


def from_value(value: Any, reading: Reading, format: str = "json") -> Rows:
    """Rows from an answer already parsed (a tool's structured content)."""
    return _joined([_from_value(value, reading, format)])


def _joined(parts: list[_Part], noted: str | None = None) -> Rows:
    """One table of the parts; `noted`: a note beside them said the answer was cut."""
    truncated = next((p.truncated for p in parts if p.truncated), None) or noted
    tables = [p for p in parts if p.table is not None]
    if tables and len(parts) > 1:
        raise NotRows(f"the answer holds {len(parts)} items and {tables[0].format} text among them; one table in one item, or one JSON row per item, is read")
    if tables:
        return Rows(_with_dates(tables[0].table), tables[0].format, truncated)
    records = [record for part in parts for record in part.records or []]
    return Rows(_with_dates(records_to_table(records)), parts[0].format, truncated)


def _from_text(text: str, reading: Reading) -> _Part:
    formats = (reading.format,) if reading.format else FORMATS
    for kind in formats:
        part = READERS[kind](text, reading, reading.format is not None)
        if part is not None:
            return part
    if reading.format:
        raise NotRows(f"the answer is not {_FORMAT_NAMES[reading.format]} (result_format: {reading.format}): {excerpt(text)}")
    raise NotRows(f"the answer is none of the formats read ({', '.join(FORMATS)}; result_format says which when one is misread): {excerpt(text)}")


# --------------------------------------------------------------------------- JSON and Python literals


def _json(text: str, reading: Reading, pinned: bool) -> _Part | None:
    try:
        value = json.loads(text)
    except ValueError:  # json.JSONDecodeError, and a number too large to read
        return None
    if isinstance(value, str) and value.strip()[:1] in ("[", "{"):  # JSON text holding JSON text
        return _json(value, reading, pinned)
    if not isinstance(value, (list, dict)) and not pinned:
        return None  # a bare number or string is an answer in words, not rows
    return _from_value(value, reading, "json")


def _python(text: str, reading: Reading, pinned: bool) -> _Part | None:
    if text.strip()[:1] not in ("[", "(", "{"):
        return None
    try:
        value = literal(text)
    except (ValueError, SyntaxError, RecursionError, MemoryError):
        return None
    return _from_value(value, reading, "python")


# The calls a literal may hold (how repr() writes values database drivers return), and what builds each.
_CONSTRUCTORS: dict[str, Any] = {
    "datetime.date": dt.date,
    "datetime.datetime": dt.datetime,
    "datetime.time": dt.time,
    "datetime.timedelta": dt.timedelta,
    "date": dt.date,
    "datetime": dt.datetime,
    "time": dt.time,
    "timedelta": dt.timedelta,
    "Decimal": decimal.Decimal,
    "decimal.Decimal": decimal.Decimal,
    "UUID": uuid.UUID,
    "uuid.UUID": uuid.UUID,
}
_NAMES = {"nan": float("nan"), "inf": float("inf"), "None": None, "True": True, "False": False}


def literal(text: str) -> Any:
    """The value a Python literal spells: constants, lists, tuples, dicts, sets, negative numbers, and the value
    constructors of `_CONSTRUCTORS` with constant arguments. Never evaluated: any other name, call, attribute or
    operator raises ValueError.

    Most literals servers send are JSON in Python's spelling, and rewritten as JSON they parse in C: 11 MB of
    the adult table's rows (str() of a list of dicts) in 3 s, where Python's syntax tree took 18 s and 2 GB.
    What the rewrite cannot say (a Decimal, a set, a key that is a number) is read from the syntax tree.
    """
    try:
        return json.loads(_as_json(text))
    except ValueError:  # json.JSONDecodeError: not JSON once rewritten
        pass
    return _literal_node(ast.parse(text.strip(), mode="eval").body)


_PY_STRING = re.compile(r"""('(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")""")
_PY_WORD = re.compile(r"\b(None|True|False|nan|inf)\b|,(\s*[)\]}])|([()])|\b(?:datetime\.)?(date|datetime)\((\d+(?:,\s*\d+){2,6})\)")
_JSON_WORD = {"None": "null", "True": "true", "False": "false", "nan": "NaN", "inf": "Infinity", "(": "[", ")": "]"}


def _as_json(text: str) -> str:
    """A Python literal rewritten as JSON text, token by token outside its strings; nothing is evaluated, and
    anything that is not a literal stays as it is, which JSON then refuses."""
    parts = _PY_STRING.split(text)
    code = _PY_WORD.sub(_json_word, "\0".join(parts[0::2])).split("\0")  # the text between strings, rewritten at once
    parts[0::2] = code
    parts[1::2] = [_json_string(token) for token in parts[1::2]]
    return "".join(parts)


def _json_word(match: re.Match) -> str:
    word, closing, paren, kind, numbers = match.groups()
    if closing is not None:  # a trailing comma, as in a tuple of one: (1,)
        return closing.replace(")", "]")
    if kind is not None:  # datetime.date(2020, 1, 2) -> "2020-01-02", typed as a date afterwards
        return json.dumps(_CONSTRUCTORS[kind](*map(int, numbers.split(","))).isoformat())
    return _JSON_WORD[word or paren]


def _json_string(token: str) -> str:
    if "\\" not in token and (token[0] == '"' or '"' not in token):
        return '"' + token[1:-1] + '"'
    return json.dumps(ast.literal_eval(token), ensure_ascii=False)  # one string token: escapes, quotes of the other kind


def _literal_node(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        values = [_literal_node(item) for item in node.elts]
        return tuple(values) if isinstance(node, ast.Tuple) else values
    if isinstance(node, ast.Dict):
        if any(key is None for key in node.keys):
            raise ValueError("a ** in a dict literal")
        return {_literal_node(key): _literal_node(value) for key, value in zip(node.keys, node.values) if key is not None}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        number = _literal_node(node.operand)
        if isinstance(number, bool) or not isinstance(number, (int, float, decimal.Decimal)):
            raise ValueError("a sign before something that is not a number")
        return -number if isinstance(node.op, ast.USub) else number
    if isinstance(node, ast.Name) and node.id in _NAMES:
        return _NAMES[node.id]
    if isinstance(node, ast.Call) and not node.keywords:
        build = _CONSTRUCTORS.get(_dotted(node.func))
        args = [_literal_node(arg) for arg in node.args]
        if build is not None and all(isinstance(arg, (int, float, str)) for arg in args):
            try:
                return build(*args)
            except (TypeError, ValueError, ArithmeticError) as exc:
                raise ValueError(f"{_dotted(node.func)}{tuple(args)}: {exc}") from None
    raise ValueError(f"{type(node).__name__} is not a literal value")


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return "?"


def _from_value(value: Any, reading: Reading, format: str) -> _Part:
    """Rows from parsed JSON or a literal: a list of rows, or an object wrapping them (and perhaps saying they were cut)."""
    if reading.records_path:
        found = dig(value, reading.records_path)
        if found is None:
            raise NotRows(f"records_path {reading.records_path!r} is not in the answer ({_keys_of(value)})")
        said = _truncation_along(value, reading.records_path)
        if isinstance(found, str):
            return _also_cut(_from_text(found, Reading(reading.format, None, reading.columns_path, reading.column_names)), said)
        return _part(format, _rows_of(found, value, reading), said)
    if isinstance(value, list | tuple):
        return _part(format, _rows_of(value, value, reading), None)
    if not isinstance(value, dict):
        raise NotRows(f"the answer is a {type(value).__name__}, not rows: {excerpt(repr(value))}")
    key = _row_key(value)
    if key is None:
        return _part(format, [value], None)  # one object: one row
    said, inner = _truncation_in(value), value[key]
    if isinstance(inner, str):  # {"result": "<the answer as text>"}: the answer is that text
        return _also_cut(_from_text(inner, Reading(reading.format, None, reading.columns_path, reading.column_names)), said)
    if isinstance(inner, dict):  # one more level of wrapping ({"result": {"columns": ..., "rows": ...}})
        return _also_cut(_from_value(inner, reading, format), said)
    return _part(format, _rows_of(inner, value, reading), said)


def _also_cut(part: _Part, said: str | None) -> _Part:
    return _Part(part.format, part.records, part.table, said or part.truncated)


def wraps_rows(value: dict) -> bool:
    """Whether an object holds rows (or the answer's text) rather than being one row itself."""
    return _row_key(value) is not None


def _part(format: str, records: list, truncated: str | None) -> _Part:
    return _Part(format, records=records, truncated=truncated)


def _row_key(value: dict) -> str | None:
    """The key holding the rows of a wrapping object, or None when the object is a row itself.

    A list of rows (objects or arrays) under a row key makes the object a wrapper. Anything else
    under one (a list of single values, a text, an object) is the answer itself only when nothing
    but notes and flags is beside it: {"result": "..."} is how FastMCP wraps a text, while
    {"sku": "A", "items": [1, 2]} is a row with a list in it.
    """
    for key in ROW_KEYS:
        inner = value.get(key)
        if isinstance(inner, list) and (not inner or all(isinstance(row, dict | list | tuple) for row in inner)):
            return key
    others = [key for key in value if _flag_name(key) not in TRUNCATION_FLAGS and str(key).lower() not in NOTE_KEYS]
    if len(others) == 1 and others[0] in ROW_KEYS and isinstance(value[others[0]], str | dict | list):
        return others[0]
    return None


def _rows_of(rows: Any, root: Any, reading: Reading) -> list:
    """A list of rows as records: objects as they are, arrays zipped with their column names."""
    if not isinstance(rows, list | tuple):
        return [rows] if isinstance(rows, dict) else _not_a_list(rows)
    if not rows:
        return []
    arrays = [isinstance(row, list | tuple) for row in rows]
    if not any(arrays):
        if any(not isinstance(row, dict) for row in rows) and any(isinstance(row, dict) for row in rows):
            raise NotRows("the rows mix objects and single values")
        return list(rows)
    if not all(arrays):
        raise NotRows("the rows mix arrays and objects")
    names = _column_names(root, reading)
    widths = {len(row) for row in rows}
    if len(widths) > 1:
        raise NotRows(f"the rows are arrays of different lengths ({', '.join(map(str, sorted(widths)))})")
    width = widths.pop()
    if len(names) != width:
        raise NotRows(f"the rows are arrays of {width} values but {len(names)} column names were found ({', '.join(names)})")
    return [dict(zip(names, row)) for row in rows]


def _not_a_list(rows: Any) -> list:
    raise NotRows(f"the rows are a {type(rows).__name__}, not a list: {excerpt(repr(rows))}")


def _column_names(root: Any, reading: Reading) -> list[str]:
    if reading.column_names:
        return list(reading.column_names)
    if reading.columns_path:
        found = dig(root, reading.columns_path)
        names = _names(found)
        if names is None:
            raise NotRows(f"columns_path {reading.columns_path!r} is not a list of column names in the answer ({_keys_of(root)})")
        return names
    if isinstance(root, dict):
        for key in COLUMN_KEYS:
            names = _names(root.get(key))
            if names is not None:
                return names
    raise NotRows("the rows are arrays without column names; name them with column_names (a list), or with columns_path where the answer holds them")


def _names(value: Any) -> list[str] | None:
    """Column names from a list of names, or of column descriptions ({"name": ..., "type": ...})."""
    if not isinstance(value, list) or not value:
        return None
    if all(isinstance(item, str) for item in value):
        return list(value)
    if all(isinstance(item, dict) for item in value):
        for key in ("name", "title", "id", "label"):
            if all(isinstance(item.get(key), str) for item in value):
                return [item[key] for item in value]
    return None


def _keys_of(value: Any) -> str:
    return f"keys: {', '.join(map(str, value))}" if isinstance(value, dict) else f"a {type(value).__name__}"


# --------------------------------------------------------------------------- truncation


def _flag_name(key: Any) -> str:
    return str(key).replace("_", "").replace("-", "").lower()


def _truncation_in(value: dict) -> str | None:
    """The words or flag of an object beside the rows saying they are not all of them, or None."""
    flagged = next((key for key, flag in value.items() if _flag_name(key) in TRUNCATION_FLAGS and flag in (True, "true", "True", 1)), None)
    for key, note in value.items():
        if str(key).lower() in NOTE_KEYS:
            for text in note if isinstance(note, list) else [note]:
                if isinstance(text, str) and (flagged or TRUNCATION_WORDS.search(text)):
                    return text
    return f"{flagged}: true" if flagged else None


def _truncation_along(root: Any, path: str) -> str | None:
    """A flag on any object along `path`, the root included: the rows may sit deep inside the object that says they were cut."""
    parts = path.split(".")
    for depth in range(len(parts)):
        node = dig(root, ".".join(parts[:depth]))
        if isinstance(node, dict) and (said := _truncation_in(node)):
            return said
    return None


def _said_truncated(note: str) -> str | None:
    match = TRUNCATION_WORDS.search(note)
    return " ".join(note.split()) if match else None


# --------------------------------------------------------------------------- text tables


def _markdown(text: str, reading: Reading, pinned: bool) -> _Part | None:
    lines = text.strip().splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip().startswith("|")), None)
    if start is None or start + 1 >= len(lines) or not _MD_RULE.match(lines[start + 1].strip()):
        return None
    end = start + 2
    while end < len(lines) and lines[end].strip().startswith("|"):
        end += 1
    header = _cells(lines[start])
    rows = [_cells(line) for line in lines[start + 2 : end]]
    if any(len(row) != len(header) for row in rows):
        return None
    notes = "\n".join(lines[:start] + lines[end:])
    return _Part("markdown", table=_typed_text(header, rows), truncated=_said_truncated(notes))


def _cells(line: str) -> list[str]:
    inner = line.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") and not inner.endswith("\\|") else inner
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", inner)]


def _key_value(text: str, reading: Reading, pinned: bool) -> _Part | None:
    """`key: value` lines, a block per row: blocks part at blank lines or at a row heading (`1. row`).

    Guessed only when a block has two keys or more, or a heading: "Error: no such table" is a
    message, not a one-row table. A block sharing no key with the first (`Result: 41 rows`) is a note.
    """
    blocks: list[list[str]] = [[]]
    headed = False
    for line in text.strip().splitlines():
        if not line.strip() or _ROW_HEADER.match(line):
            headed = headed or bool(line.strip())
            if blocks[-1]:
                blocks.append([])
            continue
        blocks[-1].append(line)
    records: list[dict[str, str]] = []
    notes: list[str] = []
    for block in (b for b in blocks if b):
        record: dict[str, str] = {}
        last = None
        for line in block:
            match = _KEY_VALUE.match(line)
            if match and match["key"].strip():
                last = match["key"].strip()
                record[last] = match["value"] or ""
            elif last is not None:  # a value that runs on to the next line
                record[last] += "\n" + line
            else:
                record = {}
                break
        if record and (not records or set(record) & set(records[0])):
            records.append(record)
        else:
            notes.append("\n".join(block))
    if not records or (not headed and not pinned and len(records[0]) < 2):
        return None
    columns = list(dict.fromkeys(key for record in records for key in record))
    return _Part("key_value", table=_typed_text(columns, [[r.get(c, "") for c in columns] for r in records]), truncated=_said_truncated("\n".join(notes)))


def _csv(text: str, reading: Reading, pinned: bool, delimiter: str = ",") -> _Part | None:
    body, _, notes = text.strip("\r\n").partition("\n\n")  # prose after a blank line is a note, not rows; a trailing tab is an empty value
    lines = body.splitlines()
    if not lines or (delimiter not in lines[0] and not pinned):
        return None
    rows = list(csv.reader(io.StringIO(body), delimiter=delimiter))
    header, rows = rows[0], rows[1:]
    if (len(header) < 2 or not rows) and not pinned:
        return None
    if any(len(row) != len(header) for row in rows):
        return None
    return _Part("tsv" if delimiter == "\t" else "csv", table=_typed_text(header, rows), truncated=_said_truncated(notes))


def _tsv(text: str, reading: Reading, pinned: bool) -> _Part | None:
    return _csv(text, reading, pinned, "\t")


def _typed_text(header: list[str], rows: list[list[str]]) -> pa.Table:
    """Text cells as a typed table, by the same inference a CSV source gets (pyarrow's, then its date formats).

    The cells are written out as CSV and read back with pyarrow: one home for typing text, numbers,
    booleans, ISO dates and timestamps included. Empty and NULL cells are missing.
    """
    names = _unique(header)
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    if not rows:
        return pa.table({name: pa.array([], pa.string()) for name in names})
    convert = pacsv.ConvertOptions(null_values=TEXT_NULLS, strings_can_be_null=True)
    read = pacsv.ReadOptions(column_names=names)
    parse = pacsv.ParseOptions(newlines_in_values=True)
    table = pacsv.read_csv(io.BytesIO(out.getvalue().encode("utf-8")), read_options=read, parse_options=parse, convert_options=convert)
    return parse_dates(table)


def _unique(header: list[str]) -> list[str]:
    names: list[str] = []
    for i, name in enumerate(header):
        name = name.strip() or f"column_{i + 1}"
        base, n = name, 2
        while name in names:
            name, n = f"{base}_{n}", n + 1
        names.append(name)
    return names


READERS = {"json": _json, "python": _python, "markdown": _markdown, "key_value": _key_value, "csv": _csv, "tsv": _tsv}
_FORMAT_NAMES = {
    "json": "JSON rows",
    "python": "a Python literal of rows",
    "markdown": "a markdown table",
    "key_value": "key: value records",
    "csv": "CSV with a header line",
    "tsv": "TSV with a header line",
}


# --------------------------------------------------------------------------- dates


def _with_dates(table: pa.Table) -> pa.Table:
    """ISO 8601 text as dates and timestamps (base.parse_iso_dates, as REST answers are read), then the CSV source's
    other date formats; any other value keeps its column text."""
    return parse_text_dates(table)


def excerpt(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"
