"""Parquet files, read with pyarrow (all columns, on every core).

Nested columns are flattened as a JSON source's records are (base.flatten): a
struct's fields become `parent_child` columns, lists and maps become their JSON
text, so every column is one a dashboard query can group, filter and show.
Binary columns are refused by name: their bytes mean nothing on a dashboard.
Paths follow the CSV source's rules (workspace folder, `upload:NAME`, DASHMEM_DATA_DIRS).
"""

from __future__ import annotations

import json

import pyarrow as pa

from .base import FetchContext, SourceError, unique_name
from .csv_source import resolve_path


def fetch(source: dict, ctx: FetchContext) -> pa.Table:
    import pyarrow.parquet as pq

    name, shown = source["name"], source["path"]
    path = resolve_path(source, ctx)
    try:
        table = pq.read_table(path)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise SourceError(name, f"file not found: {shown}") from None
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OSError) as exc:
        why = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise SourceError(name, f"{shown} is not a readable Parquet file ({why})") from None
    return flatten(name, shown, table)


def flatten(name: str, shown: str, table: pa.Table) -> pa.Table:
    """Nested columns as flat ones: struct fields as `parent_child`, lists and maps as JSON text."""
    columns: dict[str, pa.ChunkedArray] = {}

    def add(column_name: str, values: pa.ChunkedArray) -> None:
        kind = values.type
        if pa.types.is_struct(kind):
            for i in range(kind.num_fields):
                # flatten(), not field(): a missing struct makes its fields missing too
                child = pa.chunked_array([chunk.flatten()[i] for chunk in values.chunks], kind.field(i).type)
                add(f"{column_name}_{kind.field(i).name}", child)
        elif pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind) or pa.types.is_map(kind):
            text = [None if v is None else json.dumps(_plain(v), ensure_ascii=False, sort_keys=True, default=str) for v in values.to_pylist()]
            columns[unique_name(column_name, columns)] = pa.chunked_array([pa.array(text, pa.string())])
        elif pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_fixed_size_binary(kind):
            raise SourceError(name, f"{shown}: column {column_name!r} holds binary data, which a dashboard cannot show; write the file without it")
        else:
            columns[unique_name(column_name, columns)] = values

    for field, values in zip(table.schema, table.columns):
        add(field.name, values)
    return pa.table(columns)


def _plain(value):
    """A nested value as JSON-able Python: a map arrives as (key, value) pairs and becomes an object."""
    if isinstance(value, list) and value and all(isinstance(v, tuple) and len(v) == 2 for v in value):
        return {str(k): _plain(v) for k, v in value}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value
