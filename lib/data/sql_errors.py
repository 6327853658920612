"""DuckDB's errors as sentences for a person: the one translation of the engine's own text.

DuckDB says what went wrong in its terms: `Binder Error: Referenced column "actal" not found in FROM
clause!`, `Catalog Error: Table with name orders does not exist!`, with lists of candidate function
signatures and a caret under the query. Nobody reading a dashboard, a check, Show rows or the model's
answer should have to read that. Every query DuckDB refuses or fails on reaches the person through a
`QueryError`, and its message is written here (`translate`): what the query names that does not fit
(the column, the table, the function, the value), what it may name instead (the columns of only the
tables the query reads), and what to do. The engine's text goes to the log, for whoever runs the server.

The caller says where (a component, a filter, a check's file and line): this module knows only the
query and the tables it was run over. Text that is not DuckDB's (the sandbox's own refusals, a time
limit) passes through unchanged.
"""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from .coltypes import family

log = logging.getLogger(__name__)

# The classes of DuckDB's exceptions as their messages start ("Binder Error: ...", DuckDB's ExceptionType names),
# and how a person reads each when no more particular sentence below fits.
_CANNOT_RUN = "the query cannot run"
_INSIDE = "the query hit a problem inside DuckDB; try again, and report it with the query if it stays"
CLASSES = {
    "Binder": "the query does not fit the data",
    "Catalog": "the query names something the data does not have",
    "Parser": "SQL syntax error",
    "Syntax": "SQL syntax error",
    "Conversion": "a value cannot be converted",
    "Invalid Input": "the query cannot use a value",
    "Invalid": "the query cannot use a value",
    "Out of Range": "a number is out of range for its type",
    "Divide by Zero": "the query divides by zero",
    "Decimal": "a decimal number does not fit its type",
    "Mismatch Type": "the types do not match",
    "Invalid type": "the types do not match",
    "Unknown Type": "the query names a type DuckDB does not know",
    "Not implemented": "DuckDB cannot do this",
    "Permission": "the query may read only the workspace's tables",
    "HTTP": "the query may read only the workspace's tables",
    "IO": "the data could not be read",
    "Serialization": "the data could not be read",
    "Out of Memory": "the query needed more memory than allowed",
    "Object Size": "a value grew too large",
    "Parameter Not Resolved": "a value the query needs is missing",
    "Parameter Not Allowed": "the query cannot use a parameter there",
    "Missing Extension": "the query uses something DuckDB does not have here",
    "Constraint": _CANNOT_RUN,
    "Dependency": _CANNOT_RUN,
    "Sequence": _CANNOT_RUN,
    "TransactionContext": _CANNOT_RUN,
    "Planner": _CANNOT_RUN,
    "Optimizer": _CANNOT_RUN,
    "Expression": _CANNOT_RUN,
    "Executor": _CANNOT_RUN,
    "INTERRUPT": "the query was stopped",
    "INTERNAL": _INSIDE,
    "FATAL": _INSIDE,
}
_CLASS = re.compile(r"^\s*(?P<cls>" + "|".join(sorted(map(re.escape, CLASSES), key=len, reverse=True)) + r") Error: ?(?P<rest>.*)", re.DOTALL)
COLUMNS_SHOWN = 40  # columns listed as what a query may read; more are cut with "..."


@dataclass(frozen=True)
class Translated:
    """A failure as a person reads it, and, for the checks, what it is about."""

    message: str
    table: str | None = None  # a table the query names that is not loaded
    column: str | None = None  # a column none of the tables the query reads has
    allowed: tuple[str, ...] = ()  # what it may name instead: the loaded tables, or the columns of the tables it reads
    engine: bool = False  # the text was DuckDB's (and went to the log)


def is_engine_text(text: str) -> bool:
    """Whether `text` is one of DuckDB's messages (it starts with its class of error)."""
    return _CLASS.match(text or "") is not None


def translate(raw: str, columns: Mapping[str, Sequence[str]] | None = None, read: Collection[str] | None = None) -> Translated:
    """DuckDB's message `raw` as a sentence for a person; any other text unchanged.

    `columns` are the loaded tables and their columns; `read` the tables the query reads (any case),
    None where that is not known (then every loaded table counts).
    """
    match = _CLASS.match(raw or "")
    if match is None:
        return Translated(raw)
    log.info("DuckDB: %s", raw.strip())
    cls, rest = match["cls"], match["rest"]
    detail = _detail(rest)
    columns = dict(columns or {})
    by_lower = {name.lower(): name for name in columns}
    reads = [by_lower[t.lower()] for t in (read or ()) if t.lower() in by_lower] if read is not None else list(columns)
    reads = list(dict.fromkeys(reads)) or list(columns)
    for rule in _RULES:
        found = rule(cls, rest, detail, columns, reads)
        if found is not None:
            return Translated(found.message, found.table, found.column, found.allowed, engine=True)
    return Translated(f"{CLASSES[cls]}: {detail}", engine=True)


# --------------------------------------------------------------------------- the particular sentences


def _detail(rest: str) -> str:
    """The engine's first line without its trailing '!' and its caret block, for the general sentence."""
    first = rest.strip().splitlines()[0].strip() if rest.strip() else "no details"
    return first.rstrip("!").strip()


def _near(name: str, choices: Sequence[str]) -> str | None:
    close = [c for c in choices if c.lower() == name.lower()] or difflib.get_close_matches(name, list(choices), n=1, cutoff=0.5)
    return close[0] if close else None


def _listed(names: Sequence[str]) -> str:
    shown = ", ".join(names[:COLUMNS_SHOWN])
    return shown + (", ..." if len(names) > COLUMNS_SHOWN else "")


def _columns_of(columns: Mapping[str, Sequence[str]], reads: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(c for t in reads for c in columns.get(t, ())))


def _unknown_column(name: str, columns: Mapping[str, Sequence[str]], reads: Sequence[str]) -> Translated:
    allowed = _columns_of(columns, reads)
    near = _near(name, allowed)
    where = f"table {reads[0]}" if len(reads) == 1 else f"the tables it reads ({', '.join(reads)})" if reads else "the data"
    text = f"unknown column '{name}': {where} {'has' if len(reads) == 1 else 'have'} no such column"
    text += f"; did you mean '{near}'?" if near else "."
    if allowed:
        text += f" Columns: {_listed(allowed)}."
    return Translated(text + " Correct the column name in the query.", column=name, allowed=tuple(allowed))


_COLUMN_NOT_FOUND = re.compile(r'Referenced column "?(?P<name>.+?)"? not found')
_NOT_IN_ALIAS = re.compile(r'(?:Values list|Table) "(?P<alias>[^"]+)" does not have a column named "(?P<name>[^"]+)"')
_NOT_IN_JOIN = re.compile(r'Column "(?P<name>[^"]+)" does not exist on (?:left|right) side of join')
_BEFORE_DEFINED = re.compile(r'Column "(?P<name>[^"]+)" referenced that exists in the SELECT clause')
_TABLE_MISSING = re.compile(r"Table with name (?P<name>.+?) does not exist")
_PREFIX_MISSING = re.compile(r'Referenced table "(?P<name>[^"]+)" not found')
_FUNCTION_MISSING = re.compile(r"(?P<kind>Scalar|Aggregate|Table|Macro|Pragma)? ?Function with name (?P<name>\S+?) does not exist")
_DID_YOU_MEAN = re.compile(r'Did you mean "(?P<name>[^"]+)"')
_GROUP_BY = re.compile(r'column "(?P<name>[^"]+)" must appear in the GROUP BY clause')
_NO_MATCH = re.compile(r"No function matches the given name and argument types '(?P<name>.+?)\((?P<args>.*?)\)'")
_AMBIGUOUS = re.compile(r'Ambiguous reference to column name "(?P<name>[^"]+)"(?: \(use: (?P<use>.+?)\))?$', re.MULTILINE)
_SYNTAX_NEAR = re.compile(r'syntax error at or near "(?P<near>.*?)"')
_SYNTAX_END = re.compile(r"syntax error at end of input")
_LINE = re.compile(r"LINE (?P<line>\d+):")
_CONVERT = re.compile(r"Could not convert string '(?P<value>.*?)' to (?P<type>\w+)(?: when casting from source column (?P<column>\S+))?")
_CAST_RANGE = re.compile(r"Type (?P<from>\w+) with value (?P<value>\S+) can't be cast because the value is out of range for the destination type (?P<to>\w+)")
_DATE_FORMAT = re.compile(r'invalid (?P<what>date|timestamp|time)\w* field format: "(?P<value>.*?)", expected format is \((?P<format>[^)]*)\)')
_PARSE_FORMAT = re.compile(r'Could not parse string "(?P<value>.*?)" according to format specifier "(?P<format>.*?)"')
_NO_VALUES = re.compile(r"Values were not provided for the following parameters: (?P<names>.+)")
_OVERFLOW = re.compile(r"Overflow in (?P<what>.+?) of (?P<type>\w+)")
_FILES = re.compile(r"file system operations are disabled|has been disabled by configuration|Cannot access (file|directory)", re.IGNORECASE)
_KINDS_OF_VALUE = {"number": "a number", "text": "text", "time": "a date or time", "boolean": "true or false"}


def _plain_type(name: str) -> str:
    """A DuckDB type as a person says it: 'a number', 'text', 'a date or time'; other types by their name."""
    base = name.strip().strip('"').upper().removesuffix("_LITERAL").replace("STRING", "VARCHAR")
    if re.fullmatch(r"U?INT\d+|FLOAT\d*", base):  # the names DuckDB's casts give (INT32, UINT8, FLOAT8)
        base = "BIGINT"
    return _KINDS_OF_VALUE.get(family(base), "a NULL" if base == "NULL" else base)


def _columns(cls: str, rest: str, detail: str, columns: Mapping[str, Sequence[str]], reads: Sequence[str]) -> Translated | None:
    for pattern in (_COLUMN_NOT_FOUND, _NOT_IN_ALIAS, _NOT_IN_JOIN):
        if cls == "Binder" and (m := pattern.search(rest)):
            return _unknown_column(m["name"], columns, reads)
    if cls == "Binder" and (m := _BEFORE_DEFINED.search(rest)):
        name = m["name"]
        return Translated(
            f"column '{name}' is a name the query gives in its SELECT list, used before it is defined (in WHERE or GROUP BY); "
            f"repeat its expression there, or select it in a subquery first",
            column=name,
            allowed=tuple(_columns_of(columns, reads)),
        )
    if cls == "Binder" and (m := _AMBIGUOUS.search(rest)):
        use = f": write {m['use']}" if m["use"] else ": put its table's name or alias before it (table.column)"
        return Translated(f"column '{m['name']}' is in more than one table the query reads{use}")
    if cls == "Binder" and (m := _GROUP_BY.search(rest)):
        name = m["name"]
        return Translated(
            f"column '{name}' is neither in GROUP BY nor inside an aggregate such as sum(); "
            f"add it to GROUP BY, or aggregate it (any_value({name}) when any one value will do)"
        )
    return None


def _tables(cls: str, rest: str, detail: str, columns: Mapping[str, Sequence[str]], reads: Sequence[str]) -> Translated | None:
    if cls == "Catalog" and (m := _TABLE_MISSING.search(rest)):
        name = m["name"].strip('"')
        loaded = sorted(columns)
        near = _near(name, loaded)
        text = f"unknown table '{name}': no data of that name is loaded" + (f"; did you mean '{near}'?" if near else ".")
        text += f" Tables: {', '.join(loaded)}." if loaded else ""
        text += " Correct the table name in the query, or, if it is a source added since the data was loaded, refresh to load it."
        return Translated(text, table=name, allowed=tuple(loaded))
    if cls == "Binder" and (m := _PREFIX_MISSING.search(rest)):
        return Translated(
            f"'{m['name']}' before a dot names no table or alias of the query (it reads {', '.join(reads) or 'no table'}); "
            "correct the name before the dot, or give the table that alias in FROM"
        )
    return None


def _functions(cls: str, rest: str, detail: str, columns: Mapping[str, Sequence[str]], reads: Sequence[str]) -> Translated | None:
    if cls == "Catalog" and (m := _FUNCTION_MISSING.search(rest)):
        kind = "table function" if m["kind"] == "Table" else "function"
        near = _DID_YOU_MEAN.search(rest)
        text = f"unknown {kind} {m['name']}()" + (f"; did you mean {near['name']}()?" if near else "")
        return Translated(text + " Correct the function's name (the query runs in DuckDB's SQL dialect).")
    if cls == "Binder" and (m := _NO_MATCH.search(rest)):
        name, args = m["name"].strip('"'), [a for a in m["args"].split(", ") if a]
        given = " and ".join(_plain_type(a) for a in args) or "no arguments"
        if re.fullmatch(r"\W+", name):
            return Translated(f"the operator {name} does not apply to {given}; cast the values to matching types first, e.g. CAST(column AS DOUBLE)")
        return Translated(f"{name}() cannot take {given}; cast the argument to the type it needs, e.g. CAST(column AS DOUBLE), or use another function")
    return None


def _syntax(cls: str, rest: str, detail: str, columns: Mapping[str, Sequence[str]], reads: Sequence[str]) -> Translated | None:
    if cls not in ("Parser", "Syntax"):
        return None
    line = _LINE.search(rest)
    at = f" (line {line['line']})" if line else ""
    if m := _SYNTAX_NEAR.search(rest):
        return Translated(f"SQL syntax error near '{m['near']}'{at}: check the commas, brackets, quotes and keywords around it")
    if _SYNTAX_END.search(rest):
        return Translated("SQL syntax error: the query ends too early; check for a missing bracket, value or closing quote")
    return Translated(f"SQL syntax error{at}: {detail}")


def _values(cls: str, rest: str, detail: str, columns: Mapping[str, Sequence[str]], reads: Sequence[str]) -> Translated | None:
    if m := _CONVERT.search(rest):
        where = f" in column '{m['column']}'" if m["column"] else ""
        return Translated(
            f"the value '{m['value']}'{where} is not {_plain_type(m['type'])}; convert only values that fit, "
            "e.g. TRY_CAST(... AS ...), which gives NULL where one does not"
        )
    if m := _CAST_RANGE.search(rest):
        return Translated(f"the value {m['value']} is too large for {m['to']}; cast to DOUBLE instead, or TRY_CAST, which gives NULL where it does not fit")
    if m := _DATE_FORMAT.search(rest):
        return Translated(f"'{m['value']}' is not a {m['what']} in the form {m['format']}; use strptime(value, format) for other forms, or TRY_CAST")
    if m := _PARSE_FORMAT.search(rest):
        return Translated(f"the text '{m['value']}' does not match the date format '{m['format']}'; correct the format, or use try_strptime")
    if m := _NO_VALUES.search(rest):
        names = ", ".join("$" + n.strip() for n in m["names"].split(","))
        return Translated(f"the query uses {names}, which has no value here: name a filter or parameter of the dashboard, or write the value in")
    if cls == "Out of Range" and (m := _OVERFLOW.search(rest)):
        return Translated(f"a number grew too large for its type ({m['type']}) in {m['what']}; cast it to DOUBLE or HUGEINT before the arithmetic")
    if _FILES.search(rest):
        return Translated(f"the query may read only the workspace's tables ({', '.join(sorted(columns)) or 'none loaded'}), not files or the network")
    return None


_RULES = (_columns, _tables, _functions, _syntax, _values)
