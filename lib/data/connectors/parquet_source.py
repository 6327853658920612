"""Parquet files, read with pyarrow (all columns, on every core).

Nested columns are flattened as a JSON source's records are (base.flatten): a
struct's fields become `parent_child` columns, lists and maps become their JSON
text, so every column is one a dashboard query can group, filter and show.
Binary columns are refused by name: their bytes mean nothing on a dashboard.
Paths follow the CSV source's rules (workspace folder, `upload:NAME`, DASHMEM_DATA_DIRS).

An uploaded file (`ctx.limits`) is measured by its footer before any data is read: a 1 MB
file of constant columns can hold 40 million rows, which its encoded sizes do not show, so
the decoded size counts each value at its Arrow width. Its text columns are then read as
dictionaries and counted at their decoded length batch by batch, before they are decoded:
a dictionary of one long string, repeated, is tiny in the footer too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from .base import FetchContext, SourceError, UploadLimits, unique_name
from .csv_source import resolve_path

# The bytes one value of each Parquet physical type takes at least once decoded into Arrow (a
# BYTE_ARRAY its offset; FIXED_LEN_BYTE_ARRAY takes its declared length).
_WIDTH = {"BOOLEAN": 1 / 8, "INT32": 4, "INT64": 8, "INT96": 8, "FLOAT": 4, "DOUBLE": 8, "BYTE_ARRAY": 4}


def fetch(source: dict, ctx: FetchContext) -> pa.Table:
    import pyarrow.parquet as pq

    name, shown = source["name"], source["path"]
    path = resolve_path(source, ctx)
    try:
        table = pq.read_table(path) if ctx.limits is None else _read_within(name, shown, path, ctx.limits)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise SourceError(name, f"file not found: {shown}") from None
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OSError) as exc:
        why = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise SourceError(name, f"{shown} is not a readable Parquet file ({why})") from None
    return flatten(name, shown, table)


def _read_within(name: str, shown: str, path: Path, limits: UploadLimits) -> pa.Table:
    """The file, refused by its footer when it has more rows or decodes to more bytes than `limits`
    allow, else read in batches counted against them."""
    import pyarrow.parquet as pq

    footer = pq.ParquetFile(path)
    limits.check_rows(name, shown, footer.metadata.num_rows)
    limits.check_bytes(name, shown, decoded_at_least(footer.metadata), bound="at least")
    schema = footer.schema_arrow
    text = [f.name for f in schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)]
    reader = pq.ParquetFile(path, read_dictionary=text) if text else footer
    batches = list(limits.batches(name, shown, reader.iter_batches(), size=_decoded_size))
    if not batches:
        return schema.empty_table()
    return pa.Table.from_batches(batches).cast(schema)  # the text columns decoded, now that their size is known


def decoded_at_least(metadata) -> int:
    """The fewest bytes the file's columns can take once decoded into Arrow, from its footer alone:
    each value at its type's width, and text at least its uncompressed pages."""
    total = 0
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        for c in range(group.num_columns):
            chunk = group.column(c)
            kind = chunk.physical_type
            width = metadata.schema.column(c).length if kind == "FIXED_LEN_BYTE_ARRAY" else _WIDTH.get(kind, 0)
            pages = chunk.total_uncompressed_size if kind in ("BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY") else 0
            total += max(int(chunk.num_values * width), pages)
    return total


def _decoded_size(batch: pa.RecordBatch) -> int:
    """The batch's bytes with its dictionary text columns counted as decoded: each value's length, and its offset."""
    total = 0
    for column in batch.columns:
        if pa.types.is_dictionary(column.type) and pa.types.is_string(column.type.value_type):
            lengths = pc.take(pc.binary_length(column.dictionary), column.indices)  # pyright: ignore[reportAttributeAccessIssue]  # pyarrow.compute makes its kernels at import: no stubs
            total += (pc.sum(lengths).as_py() or 0) + 4 * len(column)  # pyright: ignore[reportAttributeAccessIssue]
        else:
            total += column.nbytes
    return total


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
