"""Column types: the DuckDB names used in sources.yaml and profiles, their Arrow
equivalents, and which changes a dashboard survives.
"""

from __future__ import annotations

import pyarrow as pa

_ARROW = {
    "VARCHAR": pa.string(),
    "BOOLEAN": pa.bool_(),
    "BIGINT": pa.int64(),
    "INTEGER": pa.int32(),
    "DOUBLE": pa.float64(),
    "DECIMAL": pa.float64(),  # pinned decimals are read as doubles: dashboards aggregate, not account
    "DATE": pa.date32(),
    "TIMESTAMP": pa.timestamp("us"),
    "TIME": pa.time64("us"),
}

_FAMILIES = {
    "number": (
        "TINYINT",
        "SMALLINT",
        "INTEGER",
        "BIGINT",
        "HUGEINT",
        "UTINYINT",
        "USMALLINT",
        "UINTEGER",
        "UBIGINT",
        "UHUGEINT",
        "FLOAT",
        "DOUBLE",
        "DECIMAL",
        "REAL",
    ),
    "text": ("VARCHAR", "UUID", "JSON"),
    "time": ("DATE", "TIMESTAMP", "TIMESTAMP WITH TIME ZONE", "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS"),
    "boolean": ("BOOLEAN",),
}


def arrow_type(duckdb_name: str) -> pa.DataType:
    return _ARROW[duckdb_name.upper()]


def family(duckdb_type: str) -> str:
    """'number', 'text', 'time', 'boolean' or 'other' (lists, structs, time of day...)."""
    base = duckdb_type.upper().split("(")[0].strip()
    for name, members in _FAMILIES.items():
        if base in members:
            return name
    return "other"


def compatible(old: str, new: str) -> bool:
    """A dashboard written for `old` still works on `new`: same family (an int may become a double)."""
    return old.upper() == new.upper() or (family(old) == family(new) and family(old) != "other")


_FROM_ARROW = {
    pa.string(): "VARCHAR",
    pa.large_string(): "VARCHAR",
    pa.bool_(): "BOOLEAN",
    pa.int8(): "TINYINT",
    pa.int16(): "SMALLINT",
    pa.int32(): "INTEGER",
    pa.int64(): "BIGINT",
    pa.uint8(): "UTINYINT",
    pa.uint16(): "USMALLINT",
    pa.uint32(): "UINTEGER",
    pa.uint64(): "UBIGINT",
    pa.float32(): "FLOAT",
    pa.float64(): "DOUBLE",
    pa.date32(): "DATE",
    pa.null(): '"NULL"',
    pa.timestamp("s"): "TIMESTAMP_S",
    pa.timestamp("ms"): "TIMESTAMP_MS",
    pa.timestamp("us"): "TIMESTAMP",
    pa.timestamp("ns"): "TIMESTAMP_NS",
    pa.time64("us"): "TIME",
}


def duckdb_name(arrow: pa.DataType) -> str | None:
    """The name DuckDB gives an Arrow type when it scans it, for the common types; None otherwise."""
    if pa.types.is_dictionary(arrow):
        arrow = arrow.value_type
    return _FROM_ARROW.get(arrow)


def plain_numbers(table: pa.Table) -> pa.Table:
    """DuckDB sums integers into HUGEINT, which arrives as decimal; dashboards want plain numbers."""
    for i, f in enumerate(table.schema):
        if pa.types.is_decimal(f.type):
            target = pa.int64() if f.type.scale == 0 else pa.float64()
            try:
                table = table.set_column(i, f.name, table.column(i).cast(target))
            except pa.ArrowInvalid:  # beyond int64: a double keeps the magnitude
                table = table.set_column(i, f.name, table.column(i).cast(pa.float64()))
    return table
