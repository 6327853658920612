"""Data time travel: a dashboard as of any kept snapshot, for everyone who can view it, read-only.

A workspace keeps its last few snapshots (`lib.data.snapshots`). Pinning one
(`Warehouse.switch_to`) is a steward's action: it changes what everyone is
served until the next refresh. Opening the dashboard as of a kept snapshot is
the reader's counterpart: a viewer may do it, and it changes nothing on disk
and nothing anyone else sees. That is enforced here, not only in the page:

- `open_as_of` hands out an `AsOf` holding the snapshot's tables (Arrow tables
  are immutable) and a `ReadOnlyWarehouse`, the reading half of the store,
  whose writing methods raise `ReadOnlyData`;
- its `render` runs through the query engine of an earlier load
  (`earlier_engine`, lib.data.engine with `earlier_load`): snapshot tables
  through the render cache (keyed by the snapshot's id, so the latest data's
  entries are untouched), and a live source's queries refused with
  `NoEarlierData`, because a live source keeps no earlier data (its rows are
  read from its database when shown, so "as of" an earlier load would show
  today's figures).

`lib.changes` uses the same engine for the previous snapshot's values. Whatever
else reads an earlier load's data takes `AsOf.engine` too (Show rows,
`lib.artifacts.drilldown`; Explain, `lib.artifacts.explain`; the Changes panel's side of that load,
`lib.changes.compare_tables`), so none of it reads today's rows of a live source.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping

from ..core.errors import DashmemError
from ..data.engine import NO_EARLIER_DATA, Engine, earlier_engine
from ..data.snapshots import loaded_at
from ..roles.access import require
from .render import render

if TYPE_CHECKING:
    import pyarrow as pa

    from ..data.snapshots import Snapshot, Warehouse
    from ..roles.access import User
    from .render import Rendered


class TimeTravelError(DashmemError, ValueError):
    """The snapshot asked for is not kept (any more); the message says which loads are."""


class ReadOnlyData(DashmemError, PermissionError):
    """Something tried to change data through a view of an earlier load, which is read-only."""


class ReadOnlyWarehouse:
    """The reading half of a `Warehouse`: kept snapshots, their tables and queries; every other attribute raises `ReadOnlyData`.

    Housekeeping that `current()` does (deleting a killed writer's files) is left out too: reading
    an earlier load must not depend on, or change, the state of the latest one.
    """

    _READS = frozenset({"folder", "snapshot", "snapshots", "tables", "query"})

    def __init__(self, warehouse: Warehouse):
        object.__setattr__(self, "_warehouse", warehouse)

    def __getattr__(self, name: str) -> Any:
        if name in self._READS:
            return getattr(self._warehouse, name)
        raise ReadOnlyData(f"data opened as of an earlier load is read-only ({name} is not allowed here); nothing was changed")

    def __setattr__(self, name: str, value: Any) -> None:
        raise ReadOnlyData("data opened as of an earlier load is read-only; nothing was changed")


@dataclass(frozen=True)
class AsOf:
    """One kept snapshot opened for reading, and the snapshot everyone is served (`latest`)."""

    snapshot: Snapshot
    latest: Snapshot | None
    tables: Mapping[str, pa.Table]
    warehouse: ReadOnlyWarehouse
    user: User | None = None  # who is looking: their row filters hold for every query of this view (lib.data.row_filters)

    @property
    def version(self) -> str:
        return self.snapshot.id

    @property
    def is_latest(self) -> bool:
        return self.latest is not None and self.snapshot.id == self.latest.id

    def banner(self) -> str:
        """What the page says above a dashboard shown as of an earlier load; "" on the latest."""
        if self.is_latest:
            return ""
        served = f" (loaded {loaded_at(self.latest)})" if self.latest else ""
        return f"You are looking at the data loaded {loaded_at(self.snapshot)}, not what everyone sees{served}: read-only, for your session only."

    def as_of_note(self) -> str:
        """What an export of this view says of its data: the load it shows, and whether it is the one everyone is served."""
        text = f"Data as of the load of {loaded_at(self.snapshot)}"
        if self.is_latest or self.latest is None:
            return text
        return f"{text}, an earlier load kept: everyone is served the load of {loaded_at(self.latest)}"

    def engine(self, files: Mapping[str, Any], workspace_path: Path | None = None) -> Engine | None:
        """What runs queries over this load for render, Explain, Show rows and Changes: None (the workspace's own
        engine) on the latest, else the engine of an earlier load, which refuses live sources (`NoEarlierData`);
        for a user held to some rows, the engine of their rows either way."""
        if self.is_latest:
            engine = Engine.for_workspace(files, workspace_path=workspace_path, user=self.user)
            return engine if engine.rows is not None else None
        return earlier_engine(files, workspace_path).as_user(self.user)

    def render(
        self,
        files: Mapping[str, Any],
        chosen_filters: Mapping[str, Any] | None = None,
        *,
        workspace_path: Path | None = None,
        tables: Mapping[str, pa.Table] | None = None,
        version: str | None = None,
    ) -> Rendered:
        """The dashboard over this snapshot's tables; a component reading a live source says there is no earlier data.

        `tables` and `version` stand in for the snapshot's when a viewer put a file of their own in place of a table.
        """

        tables, version = (self.tables, self.version) if tables is None else (tables, version or self.version)
        if self.is_latest:  # the data everyone sees: live sources as usual
            return render(files, tables, version, chosen_filters, workspace_path=workspace_path, engine=self.engine(files, workspace_path))
        rendered = render(files, tables, version, chosen_filters, workspace_path=workspace_path, engine=self.engine(files, workspace_path))
        for comp in rendered.components:
            if comp.error and NO_EARLIER_DATA in comp.error:
                comp.error = comp.error[comp.error.index(NO_EARLIER_DATA) :]  # not "query failed": nothing is wrong
        return rendered


__all__ = ["AsOf", "ReadOnlyData", "TimeTravelError", "open_as_of"]


def open_as_of(warehouse: Warehouse, snapshot_id: str | None, *, user: User, meta: Mapping[str, Any], served: Snapshot | None = None) -> AsOf:
    """The workspace's data as of kept snapshot `snapshot_id` (None: the one served), for anyone who may view it (`meta` is workspace.yaml).

    `served` is the snapshot everyone is served, when the caller has it (`Warehouse.current()` otherwise).
    """

    require(user, "view", dict(meta))
    served = served if served is not None else warehouse.current()
    reader = ReadOnlyWarehouse(warehouse)
    kept = reader.snapshots()
    if served is None and not kept:
        raise TimeTravelError("no data loaded yet: refresh first")
    wanted = snapshot_id or (served.id if served else None)
    chosen = next((s for s in kept if s.id == wanted), None) if wanted else None
    if chosen is None:
        if served is not None and served.id == wanted:
            chosen = served
        else:
            times = ", ".join(loaded_at(s) for s in kept) or "none"
            raise TimeTravelError(f"that load is no longer kept (the last {len(kept)} are: {times}); showing it is not possible")
    return AsOf(chosen, served, MappingProxyType(dict(reader.tables(chosen))), reader, user)
