"""One query engine: a component's or a person's SQL runs on the backend its tables live in.

Every query over a workspace's data goes through an `Engine`: the dashboard's
and the report's components and filters (lib.artifacts.render), Explain,
Show rows, Changes, time travel, Explore, the checks, the model's `run_sql`
tool and the CLI's `query`. The engine owns the one decision "does this SQL
name a live table?" (`live_source_of`) and sends the query

- to the snapshot, through the render cache (`QueryCache`, keyed by data
  version) and the sandboxed query workers (`lib.data.queries.run_query`), when
  it names only snapshot tables;
- to the live source's database (`lib.data.live`, its TTL cache) when it names
  the tables of exactly one live source; a query joining a live table with
  snapshot tables or another live source is refused naming them;
- nowhere over an earlier load (`earlier_load=True`, time travel and the
  earlier side of Changes): a live source keeps no earlier data, so its
  queries raise `NoEarlierData` rather than show today's rows as that load's.

Why one object bound to the data (`for_workspace(files, tables, version, ...)`)
rather than a router each caller picks: the callers used to choose between
the query cache, a live router and an earlier-data router themselves, and the
CLI's `query` chose none, so it counted a live table's empty stand-in and
answered 0. Now a caller says which workspace, data and load it means; where
the query runs is decided here only. `over(tables, version)` rebinds the same
routing to other data (a viewer's own file, the previous load). The snapshot
path below refuses a stand-in on its own (`lib.data.standins`), so a caller that
skips the engine fails loudly instead of reading a placeholder.

The render cache lives here (it was in lib.artifacts.render, which still
re-exports it): the engine is its only user.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import pyarrow as pa

from ..roles.access import OPERATOR, OWNER, STEWARD, User, role_of
from . import live, queries
from .row_filters import RowScope, Rule
from .sandbox import DEFAULT_MAX_ROWS, DEFAULT_TIMEOUT_S, QueryError, QueryRefused, QueryResult
from .standins import tables_named

NO_EARLIER_DATA = "no earlier data kept"


class NoEarlierData(QueryError):
    """A query of a live source over an earlier load: a live source keeps no earlier data."""


# --------------------------------------------------------------------------- the snapshot side's cache


class QueryCache:
    """Snapshot query results keyed by (data version, SQL, parameters, row cap); least recently used dropped first."""

    def __init__(self, size: int = 512):
        self.size = size
        self._items: OrderedDict[tuple, QueryResult] = OrderedDict()
        self._lock = threading.Lock()
        self.misses = 0

    def run(self, version: str, tables: Mapping[str, pa.Table], sql: str, params: Mapping[str, Any], *, max_rows: int, timeout_s: float) -> QueryResult:
        key = (version, sql, tuple(sorted((k, _hashable(v)) for k, v in params.items())), max_rows)
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        result = queries.run_query(tables, sql, params, max_rows=max_rows, timeout_s=timeout_s)
        with self._lock:
            self.misses += 1
            self._items[key] = result
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return result


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


CACHE = QueryCache()


# --------------------------------------------------------------------------- which backend a query belongs to


def live_source_of(sql: str, live_by_name: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The one live source a query runs on, None for a snapshot query; a query across engines is refused."""

    if not live_by_name or not any(re.search(rf"\b{re.escape(name)}\b", sql, re.IGNORECASE) for name in live_by_name):
        return None  # snapshot queries never depend on sqlglot parsing DuckDB's every syntax
    named = tables_named(sql)
    by_lower = {name.lower(): name for name in live_by_name}
    touched = sorted(by_lower[t] for t in named if t in by_lower)
    if not touched:
        return None
    others = sorted(t for t in named if t not in by_lower)
    if len(touched) > 1 or others:
        raise QueryRefused(
            "a query cannot join tables from different engines: "
            + ", ".join(f"{t} (live, in its database)" for t in touched)
            + "".join(f", {t} (snapshot)" for t in others)
            + "; query each live source on its own"
        )
    return touched[0]


# --------------------------------------------------------------------------- whose rows (lib.data.row_filters)

DEFAULT_BYPASS = (OWNER, STEWARD)  # the roles that see every row unless workspace.yaml's row_filter_bypass says otherwise


def scope_for(user: User | None, files: Mapping[str, Any]) -> RowScope | None:
    """The row filters `user` is held to in the workspace whose memory is `files`; None when they see every row
    (no rule, the operator, or a role that bypasses them)."""
    meta = files.get("workspace") or {}
    rules = meta.get("row_filters") or []
    if user is None or user is OPERATOR or not rules:
        return None
    bypass = meta.get("row_filter_bypass", list(DEFAULT_BYPASS))
    if role_of(user, meta) in bypass:
        return None
    attributes = dict(user.attributes)
    return RowScope(user.name, tuple(Rule(r["table"], r["column"], r["attribute"], attributes.get(r["attribute"])) for r in rules))


# --------------------------------------------------------------------------- the engine


@dataclass(frozen=True)
class Engine:
    """Runs SQL over one workspace's data: `tables` of data version `version`, live sources in their databases.

    `cache` is the snapshot side's (the render cache by default); `live_cache` the live side's
    (`live.LIVE_CACHE`, looked up when a query runs). `earlier_load` marks the data of a load other
    than the one everyone is served: a live source's query then raises `NoEarlierData`.
    """

    files: Mapping[str, Any]
    tables: Mapping[str, pa.Table] = field(default_factory=dict)
    version: str = "none"
    workspace_path: Path | None = None
    cache: Any = CACHE
    live_cache: Any = None
    earlier_load: bool = False
    live: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    rows: RowScope | None = None  # the row filters of the user asking (lib.data.row_filters); None: every row

    @classmethod
    def for_workspace(
        cls,
        files: Mapping[str, Any],
        tables: Mapping[str, pa.Table] | None = None,
        version: str = "none",
        *,
        workspace_path: Path | None = None,
        cache: Any = None,
        earlier_load: bool = False,
        user: User | None = None,
    ) -> Engine:
        """The engine of the workspace whose memory is `files` (sources.yaml names the live sources), over `tables`,
        for `user`: their row filters (workspace.yaml's `row_filters`) hold for every query; None runs unfiltered."""
        return cls(
            files,
            dict(tables or {}),
            version,
            Path(workspace_path) if workspace_path is not None else None,
            CACHE if cache is None else cache,
            None,
            earlier_load,
            live.live_sources(files),
            scope_for(user, files),
        )

    @classmethod
    def of(cls, runner: Any, files: Mapping[str, Any], tables: Mapping[str, pa.Table], version: str, workspace_path: Path | None = None) -> Engine:
        """`runner` as an engine over `tables`: an Engine rebound to them, a bare QueryCache as the snapshot cache
        of `files`' engine (the callers that pass one), None the default engine of `files`."""
        if isinstance(runner, Engine):
            return runner.over(tables, version)
        return cls.for_workspace(files, tables, version, workspace_path=workspace_path, cache=runner)

    def as_user(self, user: User | None) -> Engine:
        """The same engine for `user`: their row filters instead of this engine's."""
        return dataclasses.replace(self, rows=scope_for(user, self.files))

    def row_notes(self) -> list[str]:
        """Why the user sees no rows of a filtered table (a missing attribute), in plain words."""
        return self.rows.notes() if self.rows is not None else []

    def over(self, tables: Mapping[str, pa.Table], version: str) -> Engine:
        """The same routing and caches over other data (a viewer's own file, another load)."""
        return dataclasses.replace(self, tables=tables, version=version)

    def earlier(self, tables: Mapping[str, pa.Table], version: str) -> Engine:
        """This engine's user and caches over an earlier load (`tables` of `version`), whose live queries are refused:
        what the Changes panel compares the shown data with, held to the same rows."""
        return dataclasses.replace(self, tables=tables, version=version, earlier_load=True, live_cache=None)

    # ---- routing

    def source_of(self, sql: str) -> str | None:
        """The live source `sql` runs in, None when it runs on the snapshot; QueryRefused for a query across both."""
        return live_source_of(sql, self.live)

    def _live_cache(self) -> live.LiveCache:
        return self.live_cache if self.live_cache is not None else live.LIVE_CACHE

    @property
    def misses(self) -> int:
        """Queries run so far (not served from a cache), by this engine's caches: what a render counts."""
        return self.cache.misses + (self._live_cache().round_trips if self.live else 0)

    # ---- running

    def run(self, sql: str, params: Mapping[str, Any] | None = None, *, max_rows: int = DEFAULT_MAX_ROWS, timeout_s: float = DEFAULT_TIMEOUT_S) -> QueryResult:
        """One SELECT on its backend: the snapshot (sandboxed, cached per data version) or its live source's database."""
        params = dict(params or {})
        name = self.source_of(sql)
        if name is None:
            if self.rows is None:
                return self.cache.run(self.version, self.tables, sql, params, max_rows=max_rows, timeout_s=timeout_s)
            # The filtered tables under their own names: the other rows are not there to reach (lib.data.row_filters).
            tables = self.rows.apply(self.tables)
            return self.cache.run(f"{self.version}|{self.rows.key}", tables, sql, params, max_rows=max_rows, timeout_s=timeout_s)
        if self.earlier_load:
            raise NoEarlierData(f"{NO_EARLIER_DATA}: {name} is a live source, read from its database only when shown")
        where = self.rows.live_where(name) if self.rows is not None else None
        return self._live_cache().run(
            self.live[name], self.version, sql, params, max_rows=max_rows, timeout_s=timeout_s, workspace_path=self.workspace_path, where=where
        )

    def bind(self, sql: str, params: Mapping[str, Any] | None = None) -> list[tuple[str, str]]:
        """The query's output (column, type) pairs without running it. A live table binds against its stand-in,
        which has the database's columns: binding reads no rows, so it answers nothing from the placeholder."""
        return queries.bind(self.tables, sql, params)


def earlier_engine(files: Mapping[str, Any], workspace_path: Path | None = None) -> Engine:
    """The query engine over a load other than the one served: snapshot tables through the render cache
    (keyed by that load's id), a live source's queries refused, since its database holds only today's rows."""
    return Engine.for_workspace(files, workspace_path=workspace_path, earlier_load=True)
