"""Connectors turn a source's settings into an Arrow table, one module per type.

    from lib.connectors import fetch, FetchContext
    table = fetch(source_config, FetchContext(workspace_path=...))

Each connector module defines `fetch(source, ctx) -> pyarrow.Table` and is
looked up by the source's `type`; imports are lazy so that, say, the SQL
drivers load only when a SQL source is fetched.
"""
from __future__ import annotations

import importlib

from .base import FetchContext, SourceError, records_to_table

TYPES = ("csv", "sql", "rest", "mcp")


def fetch(source: dict, ctx: FetchContext):
    kind = source.get("type")
    if kind not in TYPES:
        raise SourceError(source.get("name", "?"), f"unknown source type {kind!r}; known: {', '.join(TYPES)}")
    module = importlib.import_module(f"{__name__}.{kind}_source")
    return module.fetch(source, ctx)


__all__ = ["FetchContext", "SourceError", "fetch", "records_to_table", "TYPES"]
