"""The `rest` connector against datasette, a REST JSON API nobody here wrote (from PyPI, in a venv of its own made
by `make datasette`), serving the 51,290-row Global Superstore table from a SQLite file in the test's folder.

It is read whole in datasette's three JSON shapes (arrays beside `columns`, `_shape=objects`, `_shape=array`)
and both pagination styles (the `next_url` in the body, the RFC 8288 `Link` header); a truncated `?sql=` answer
and running out of `max_pages` fail the source through a real refresh, and the data served before stays served.
"""

from __future__ import annotations

import datetime as dt
import shutil
import sqlite3
from pathlib import Path

import pyarrow as pa
import pytest

from lib.data.connectors.base import FetchContext, SourceError, fetch, fetch_note
from lib.data.refresh import refresh
from lib.data.snapshots import Warehouse
from lib.memory import workspace
from lib.roles.access import OPERATOR

from ..conftest import WORKSPACES
from ..helpers import current_id, datasette

pytestmark = pytest.mark.usefixtures("network")


@pytest.fixture(autouse=True)
def loopback_allowed(monkeypatch):
    """The operator's opt-in that lets sources reach datasette on 127.0.0.1 (refused by default)."""
    monkeypatch.setenv("DASHMEM_HTTP_ALLOW_NETWORKS", "127.0.0.0/8")


@pytest.fixture(scope="module")
def store(tmp_path_factory, dataset):
    """datasette serving `orders`: its base URL, the SQLite file and the table's row count, read from the file."""
    datasette.datasette()  # skips, naming the make target, before the table is built
    folder = tmp_path_factory.mktemp("datasette")
    db = folder / "store.db"
    rows = datasette.superstore_db(dataset("global_superstore.csv"), db)
    with datasette.serve(db, folder) as url:
        yield {"url": url, "db": db, "rows": rows, "table": f"{url}/store/orders.json"}


def in_sqlite(store, sql: str):
    with sqlite3.connect(store["db"]) as db:
        return db.execute(sql).fetchone()


BODY_LINK = {"style": "next_link", "next_path": "next_url"}
LINK_HEADER = {"style": "next_link"}  # no next_path: the Link header's rel="next"


@pytest.mark.parametrize(
    ("query", "settings"),
    [
        ("_size=max", {"pagination": BODY_LINK}),  # rows as arrays beside `columns`, found without records_path
        ("_size=max", {"records_path": "rows", "pagination": LINK_HEADER}),  # as set by hand: the columns are found beside
        ("_size=max&_shape=objects", {"records_path": "rows", "pagination": BODY_LINK}),
        ("_size=max&_shape=array", {"pagination": LINK_HEADER}),  # a bare list: the Link header is its only next link
    ],
    ids=["arrays-and-columns-body-link", "arrays-and-columns-link-header", "objects-body-link", "array-link-header"],
)
def test_each_json_shape_and_pagination_style_reads_the_whole_table(store, tmp_path, query, settings):
    table = fetch({"name": "orders", "type": "rest", "url": f"{store['table']}?{query}", **settings}, FetchContext(workspace_path=tmp_path))
    assert table.num_rows == store["rows"]
    with sqlite3.connect(store["db"]) as db:
        columns = [row[1] for row in db.execute("PRAGMA table_info(orders)")]
        ids = sorted(row[0] for row in db.execute('SELECT "Row ID" FROM orders'))
    assert table.column_names == ["rowid", *columns]  # named columns, never one text column of arrays
    assert sorted(table.column("Row ID").to_pylist()) == ids  # every row once
    assert table.column("Sales").type == pa.float64()
    assert round(sum(table.column("Sales").to_pylist()), 2) == round(in_sqlite(store, "SELECT sum(Sales) FROM orders")[0], 2)
    # ISO dates sent as JSON text are dates, as a CSV's are: a time role, so the auto-draft draws a trend.
    assert table.column("Order Date").type == pa.date32()
    first, last = in_sqlite(store, 'SELECT min("Order Date"), max("Order Date") FROM orders')
    assert (min(table.column("Order Date").to_pylist()), max(table.column("Order Date").to_pylist())) == (
        dt.date.fromisoformat(first),
        dt.date.fromisoformat(last),
    )


def test_a_table_without_pagination_fails_rather_than_load_its_first_page(store, tmp_path):
    with pytest.raises(SourceError, match=r'links a next page \(Link header, rel="next"\) but the source has no pagination.*style: next_link'):
        fetch({"name": "orders", "type": "rest", "url": store["table"]}, FetchContext(workspace_path=tmp_path))


# --- through a refresh: a failure keeps the data served -----------------------------------------------


@pytest.fixture(scope="module")
def loaded_once(store, tmp_path_factory):
    """A workspace whose one source is the whole table, refreshed once per module: (folder, warehouse folder)."""
    tmp_path = tmp_path_factory.mktemp("loaded")
    folder = tmp_path / "ws"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", folder)
    shutil.rmtree(folder / "data")
    for name in ("dashboard.yaml", "profile.yaml"):
        (folder / name).unlink()
    set_source(folder, url=f"{store['table']}?_size=max", pagination=BODY_LINK)
    wh = Warehouse(tmp_path / "cache")
    with pytest.MonkeyPatch.context() as env:  # loopback_allowed, which is per test, is not in effect yet
        env.setenv("DASHMEM_HTTP_ALLOW_NETWORKS", "127.0.0.0/8")
        first = refresh(folder, wh, user=OPERATOR)
    assert first.ok, first.summary()
    assert served_rows(wh) == store["rows"]
    return folder, tmp_path / "cache"


@pytest.fixture
def loaded(loaded_once, store, tmp_path):
    """A copy of that refreshed workspace and its warehouse, the test's own to change: (folder, warehouse).
    Fetching the whole table through datasette was a third of the module's CPU, once for each test."""
    folder, cache = tmp_path / "ws", tmp_path / "cache"
    shutil.copytree(loaded_once[0], folder)
    shutil.copytree(loaded_once[1], cache, symlinks=True)  # CURRENT and CHECKED are relative links
    wh = Warehouse(cache)
    assert served_rows(wh) == store["rows"]
    return folder, wh


def set_source(folder: Path, **settings) -> None:
    ws, _ = workspace.load(folder)
    ws.data["sources"] = {"sources": [{"name": "orders", "type": "rest", **settings}]}
    workspace.save(folder, ws.data)


def served_rows(wh: Warehouse) -> int:
    return wh.query("SELECT count(*) AS n FROM orders").rows[0][0]


def test_the_whole_table_is_served_with_its_dates_as_dates(loaded, store):
    _, wh = loaded
    snapshot = wh.current()
    assert snapshot is not None
    types = dict(snapshot.tables["orders"]["columns"])
    assert types["Order Date"] == "DATE" and types["Ship Date"] == "DATE" and types["Quantity"] == "BIGINT"


def test_a_truncated_answer_fails_the_source_and_the_old_data_stays_served(loaded, store):
    folder, wh = loaded
    served = current_id(wh)
    set_source(folder, url=f"{store['url']}/store.json?sql=select+rowid,+*+from+orders")  # datasette's ?sql= stops at 1,000 rows
    report = refresh(folder, wh, user=OPERATOR)
    [source] = report.sources
    assert not report.ok and not report.swapped and source.status == "failed"
    assert "says it is truncated (truncated: true)" in source.message and "allow_truncated: true" in source.message
    assert current_id(wh) == served and served_rows(wh) == store["rows"]

    # Allowed, it passes, and the report says what was loaded.
    set_source(folder, url=f"{store['url']}/store.json?sql=select+rowid,+*+from+orders", allow_truncated=True)
    report = refresh(folder, wh, user=OPERATOR)
    [source] = report.sources
    assert report.ok, report.summary()
    assert source.status == "ok" and source.message.startswith("warning: ") and "truncated" in source.message
    assert source.message in report.summary()
    assert served_rows(wh) == source.rows_after < store["rows"]


def test_running_out_of_max_pages_fails_the_source_naming_the_setting_and_the_old_data_stays_served(loaded, store):
    folder, wh = loaded
    served = current_id(wh)
    set_source(folder, url=store["table"], pagination={**BODY_LINK, "max_pages": 5})  # datasette's 100-row pages
    report = refresh(folder, wh, user=OPERATOR)
    [source] = report.sources
    assert not report.ok and source.status == "failed"
    assert "stopped at pagination.max_pages (5 pages, 500 rows) while the server still offers a next page" in source.message
    assert "Raise pagination.max_pages" in source.message
    assert current_id(wh) == served and served_rows(wh) == store["rows"]


def test_a_truncation_allowed_is_a_note_of_the_fetched_table(store, tmp_path):
    source = {"name": "orders", "type": "rest", "url": f"{store['url']}/store.json?sql=select+*+from+orders+limit+5000", "allow_truncated": True}
    table = fetch(source, FetchContext(workspace_path=tmp_path))
    note = fetch_note(table)
    assert note is not None and f"loaded the {table.num_rows:,} rows it gave" in note
