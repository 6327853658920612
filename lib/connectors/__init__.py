"""Connectors turn a source's settings into an Arrow table, one module per type.

    from lib.connectors import fetch, FetchContext
    table = fetch(source_config, FetchContext(workspace_path=...))

Each connector module defines `fetch(source, ctx) -> pyarrow.Table` and is
looked up by the source's `type` in `REGISTRY`; imports are lazy so that, say,
the SQL drivers load only when a SQL source is fetched.

A new connector type is one module here, one line in `REGISTRY`, and the type
in schemas/sources.schema.json (the `type` enum of `$defs/source`, and its
settings as `$defs/<type>`); tests/test_schemas.py checks that the registry and
the schema name the same types, in the same order.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from .base import FetchContext, SourceError, records_to_table


@dataclass(frozen=True)
class Connector:
    module: str  # module in this package that defines fetch(source, ctx)
    label: str  # what the app calls the type


REGISTRY: dict[str, Connector] = {
    "csv": Connector("csv_source", "CSV file"),
    "sql": Connector("sql_source", "SQL database"),
    "rest": Connector("rest_source", "REST API"),
    "mcp": Connector("mcp_source", "MCP server"),
}
TYPES = tuple(REGISTRY)


def fetch(source: dict, ctx: FetchContext):
    kind = source.get("type")
    connector = REGISTRY.get(kind) if isinstance(kind, str) else None
    if connector is None:
        raise SourceError(source.get("name", "?"), f"unknown source type {kind!r}; known: {', '.join(TYPES)}")
    module = importlib.import_module(f"{__name__}.{connector.module}")
    return module.fetch(source, ctx)


__all__ = ["Connector", "FetchContext", "REGISTRY", "SourceError", "fetch", "records_to_table", "TYPES"]
