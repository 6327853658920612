"""A live source's change marker (lib/data/change_marker.py) against the real local PostgreSQL and MariaDB.

Rows change in the database -> refresh -> a new data version -> the dashboard
shows the new figure at once, though its cached result had minutes to live;
nothing changed -> the same version, no new snapshot.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest

from lib.artifacts.render import QueryCache, render
from lib.data.refresh import refresh
from lib.data.snapshots import Warehouse
from lib.memory import schemas, workspace
from lib.memory.yamlio import parse
from lib.roles.access import OPERATOR
from tests.helpers import current_id
from tests.helpers.databases import MARIADB_URL, PG_URL

from ..conftest import WORKSPACES, server_engine

URLS = {"postgresql": PG_URL, "mariadb": MARIADB_URL}
TOTAL = "SELECT sum(amount) AS value FROM orders WHERE ($site IS NULL OR list_contains($site, site))"
DASHBOARD = {
    "title": "Orders",
    "filters": [{"id": "site", "type": "multiselect", "label": "Sites", "options_query": "SELECT DISTINCT site FROM orders ORDER BY 1"}],
    "components": [{"id": "total", "type": "kpi", "title": "Total", "query": TOTAL}],
    "layout": [["total"]],
}


class LiveTable:
    """An `orders` table in one of the local servers; dropped afterwards."""

    def __init__(self, kind: str):
        self.kind, self.url = kind, URLS[kind]
        self.engine = server_engine(kind)
        self.name = f"dm_marker_{uuid.uuid4().hex[:10]}"
        self.run(
            f"CREATE TABLE {self.name} (id INTEGER, site VARCHAR(20), amount BIGINT, updated_at TIMESTAMP NULL)",
            f"INSERT INTO {self.name} VALUES (1, 'Brno', 10, '2026-01-01 08:00:00'), (2, 'Lyon', 20, '2026-01-01 09:00:00')",
        )

    def run(self, *statements: str) -> None:
        with self.engine.begin() as connection:
            for statement in statements:
                connection.exec_driver_sql(statement)

    def drop(self) -> None:
        self.run(f"DROP TABLE IF EXISTS {self.name}")
        self.engine.dispose()


@pytest.fixture(params=["postgresql", "mariadb"])
def orders(request):
    table = LiveTable(request.param)
    yield table
    table.drop()


def live_workspace(folder: Path, source: dict, dashboard: dict = DASHBOARD) -> Path:
    """The demo workspace with one live source named `orders` and a small dashboard over it."""
    shutil.copytree(WORKSPACES / "supply-chain-weekly", folder)
    shutil.rmtree(folder / "data")
    (folder / "profile.yaml").unlink()
    ws, _ = workspace.load(folder)
    ws.data["sources"] = {"sources": [{"name": "orders", "type": "sql", "mode": "live", "cache_ttl_s": 300, **source}]}
    ws.data["dashboard"] = dashboard
    workspace.save(folder, ws.data)
    return folder


def total(folder: Path, wh: Warehouse, chosen: dict | None = None) -> object:
    """The dashboard's KPI as a viewer sees it now: the served snapshot's version, the shared live cache."""
    ws, _ = workspace.load(folder)
    snapshot = wh.current()
    assert snapshot is not None
    rendered = render(ws.data, wh.tables(snapshot), snapshot.id, chosen, cache=QueryCache(), workspace_path=folder)
    component = rendered.component("total")
    assert component.error is None, component.error
    return component.value


@pytest.mark.parametrize(
    "marker",
    [{"max": "updated_at"}, {"row_count": True}, {"query": "SELECT max(updated_at) AS changed, count(*) AS n FROM orders"}],
    ids=["max", "row_count", "query"],
)
def test_a_moved_marker_is_a_new_data_version_and_the_new_figure_shows_at_once(orders, marker, tmp_path):
    folder = live_workspace(tmp_path / "ws", {"url": orders.url, "table": orders.name, "change_marker": marker})
    wh = Warehouse(tmp_path / "cache")
    first = refresh(folder, wh, user=OPERATOR)
    assert first.ok and first.swapped, first.summary()
    assert "change marker" in first.sources[0].message
    version = current_id(wh)
    assert total(folder, wh) == 30

    again = refresh(folder, wh, user=OPERATOR)  # nothing changed in the database
    assert again.ok and again.unchanged and not again.swapped, again.summary()
    assert current_id(wh) == version and len(wh.snapshots()) == 1
    assert "(unchanged)" in again.sources[0].message

    if "row_count" in marker:
        orders.run(f"INSERT INTO {orders.name} VALUES (3, 'Brno', 80, '2026-01-02 08:00:00')")
    else:
        orders.run(f"UPDATE {orders.name} SET amount = 90, updated_at = '2026-01-02 08:00:00' WHERE id = 1")
    assert total(folder, wh) == 30  # the same version: the cached result (300 s to live) is still served

    moved = refresh(folder, wh, user=OPERATOR)
    assert moved.ok and moved.swapped, moved.summary()
    assert current_id(wh) != version
    assert "was " in moved.sources[0].message
    assert total(folder, wh) == 110  # the new version: asked again in the database, no TTL wait
    assert total(folder, wh, {"site": ["Brno"]}) == 90


def test_a_marker_that_fails_keeps_the_served_data_and_says_why(orders, tmp_path):
    folder = live_workspace(tmp_path / "ws", {"url": orders.url, "table": orders.name, "change_marker": {"max": "updated_at"}})
    wh = Warehouse(tmp_path / "cache")
    assert refresh(folder, wh, user=OPERATOR).ok
    served = current_id(wh)
    ws, _ = workspace.load(folder)
    ws.data["sources"]["sources"][0]["change_marker"] = {"query": "DELETE FROM orders"}
    workspace.save(folder, ws.data)
    report = refresh(folder, wh, user=OPERATOR)
    entry = report.sources[0]
    assert not report.ok and entry.status == "failed"
    assert "change_marker query" in entry.message and "SELECT" in entry.message
    assert current_id(wh) == served
    with orders.engine.connect() as connection:
        assert connection.exec_driver_sql(f"SELECT count(*) FROM {orders.name}").scalar() == 2


# --------------------------------------------------------------------------- the schema

SOURCE = "sources:\n  - name: orders\n    type: sql\n    url: sqlite:///o.db\n    table: orders\n    mode: live\n    change_marker: {marker}\n"


def _errors(text: str) -> list[str]:
    return [e.format() for e in schemas.validate_document("sources", parse(text), "ws/sources.yaml")]


@pytest.mark.parametrize("marker", ["{max: updated_at}", "{row_count: true}", "{query: 'SELECT max(updated_at) FROM orders'}"])
def test_the_schema_takes_each_marker_on_a_live_source(marker):
    assert _errors(SOURCE.format(marker=marker)) == []


@pytest.mark.parametrize(
    "marker, says",
    [
        ("{}", "change_marker: error: {} should be non-empty"),
        ("{max: updated_at, row_count: true}", "change_marker: error: {'max': 'updated_at', 'row_count': True} has too many properties"),
        ("{row_count: false}", "change_marker.row_count: error: false is not allowed"),
        ("{rows: 1}", "unknown field 'rows' (allowed: max, row_count, query)"),
        ("{max: 'updated at'}", "change_marker.max: error"),
    ],
)
def test_a_bad_marker_is_an_error_naming_file_line_and_field(marker, says):
    errors = _errors(SOURCE.format(marker=marker))
    assert any(e.startswith("ws/sources.yaml:7: sources[0].change_marker") and says in e for e in errors), errors


def test_a_marker_on_a_snapshot_source_is_refused():
    errors = _errors(SOURCE.format(marker="{max: updated_at}").replace("    mode: live\n", ""))
    assert any("sources[0]" in e and "mode" in e for e in errors), errors
