"""Connectors turn a source's settings into an Arrow table, one module per type.

    from lib.data.connectors.base import fetch, FetchContext
    table = fetch(source_config, FetchContext(workspace_path=...))

Each connector module defines `fetch(source, ctx) -> pyarrow.Table` and is
looked up by the source's `type` in `REGISTRY`; imports are lazy so that, say,
the SQL drivers load only when a SQL source is fetched. This package's own
module is the registry alone and imports nothing of the project: what fetching
needs (the context, the error, the dispatch by type) is in `base`, above it.

A new connector type is one module here, one line in `REGISTRY`, and the type
in schemas/sources.schema.json (the `type` enum of `$defs/source`, and its
settings as `$defs/<type>`); tests/memory/test_schemas.py checks that the registry and
the schema name the same types, in the same order.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType


@dataclass(frozen=True)
class Connector:
    module: str  # module in this package that defines fetch(source, ctx)
    label: str  # what the app calls the type
    extensions: tuple[str, ...] = ()  # a file source: the file name endings it reads (uploads are offered these)


REGISTRY: dict[str, Connector] = {
    "csv": Connector("csv_source", "CSV file", ("csv", "tsv", "txt")),
    "excel": Connector("excel_source", "Excel workbook", ("xlsx",)),
    "parquet": Connector("parquet_source", "Parquet file", ("parquet",)),
    "sql": Connector("sql_source", "SQL database"),
    "rest": Connector("rest_source", "REST API"),
    "mcp": Connector("mcp_source", "MCP server"),
}
TYPES = tuple(REGISTRY)
FILE_TYPES = tuple(kind for kind, c in REGISTRY.items() if c.extensions)


def file_type(file_name: str) -> str | None:
    """The file source type that reads a file of this name, by its ending; None if none does."""
    ending = file_name.rsplit(".", 1)[-1].lower() if "." in file_name else ""
    return next((kind for kind in FILE_TYPES if ending in REGISTRY[kind].extensions), None)


def module(kind: str) -> ModuleType:
    """The connector module of a source type, imported on first use (the SQL one loads SQLAlchemy, REST and MCP the
    HTTP clients): a refresh of file sources, or a dashboard over snapshots alone, never loads them."""
    return importlib.import_module(f"{__name__}.{REGISTRY[kind].module}")


__all__ = ["Connector", "FILE_TYPES", "REGISTRY", "TYPES", "file_type", "module"]
