"""Profiles of live SQL tables pushed down to the real local PostgreSQL and MariaDB (lib/data/live_profile.py).

Each test generates a table in the database, profiles it live, and compares
with `profile.build` over the same rows loaded as a snapshot (through the SQL
connector, as a `mode: snapshot` source would). Exact figures must be equal;
approximate ones (distinct counts that DuckDB estimates by HyperLogLog, and
quantiles from a sample) within the tolerances below. Rows fetched from the
database are counted on the driver cursor: only aggregates come back.
A server that is not running skips its tests with the reason.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from lib.data import live, profile
from lib.data.connectors import sql_source
from lib.data.connectors.base import FetchContext
from lib.data.live_profile import LiveProfileError
from lib.memory.schemas import _validator
from tests.helpers.databases import MARIADB_URL, PG_URL
from tests.helpers.live import CONNECTION_ID, _drop_connection, _source, _url_of_its_own, _workspace

from ..conftest import server_engine

DISTINCT_TOLERANCE = 0.10  # relative: the snapshot's distinct count is DuckDB's HyperLogLog estimate (5.4% off here at 250k)
QUANTILE_TOLERANCE = 0.02  # of the column's range: quantiles of a sample against quantiles of a sample


def _generated_sql(name: str, rows: int, backend: str) -> str:
    """Numbers, a date, a nullable number, low-cardinality text with distinct counts per value (no ties) and unique text."""
    # Value k of `grade` occurs about (k+1)^2 times as often as value 0: counts never tie.
    if backend == "postgresql":
        return f"""CREATE TABLE {name} AS SELECT g AS id, (g * 7919) % 1000 AS amount, ((g * 31) % 997) / 10.0 AS price,
            DATE '2026-01-01' + (g % 300) AS day, CASE WHEN g % 10 = 0 THEN NULL ELSE g % 50 END AS maybe,
            'grade_' || floor(sqrt(g % 400))::int AS grade, 'u' || g AS code_text, (g % 3 = 0) AS flag
            FROM generate_series(1, {rows}) g"""
    return f"""CREATE TABLE {name} AS WITH RECURSIVE seq(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM seq WHERE g < {rows})
        SELECT g AS id, (g * 7919) % 1000 AS amount, ((g * 31) % 997) / 10.0 AS price,
            DATE '2026-01-01' + INTERVAL (g % 300) DAY AS day, CASE WHEN g % 10 = 0 THEN NULL ELSE g % 50 END AS maybe,
            CONCAT('grade_', FLOOR(SQRT(g % 400))) AS grade, CONCAT('u', g) AS code_text FROM seq"""


def _make(engine: sa.Engine, rows: int) -> str:
    name = f"dm_lprof_{uuid.uuid4().hex[:10]}"
    with engine.begin() as connection:
        if engine.dialect.name != "postgresql":
            connection.exec_driver_sql(f"SET SESSION max_recursive_iterations = {rows + 10}")
            connection.exec_driver_sql("SET SESSION cte_max_recursion_depth = 4294967295") if not engine.dialect.is_mariadb else None  # pyright: ignore[reportAttributeAccessIssue]
        connection.exec_driver_sql(_generated_sql(name, rows, engine.dialect.name).replace("%", "%%"))
    return name


def _drop(engine: sa.Engine, name: str) -> None:
    with engine.begin() as connection:
        connection.exec_driver_sql(f"DROP TABLE IF EXISTS {name}")


class _RowsFetched:
    """Rows the driver reported for every statement run through SQLAlchemy while active (all engines)."""

    def __init__(self):
        self.rows = 0
        self.statements = 0

    def _count(self, conn, cursor, statement, parameters, context, executemany):
        if cursor.description is not None:  # a statement that returns rows
            self.statements += 1
            self.rows += max(0, cursor.rowcount)

    def __enter__(self):
        event.listen(sa.engine.Engine, "after_cursor_execute", self._count)
        return self

    def __exit__(self, *exc):
        event.remove(sa.engine.Engine, "after_cursor_execute", self._count)


def _both(url: str, table: str, tmp_path: Path) -> tuple[dict, dict]:
    """(live profile, snapshot profile) of the same database table, through profile.build."""
    ctx = FetchContext(workspace_path=tmp_path)
    live_source = {"name": "t", "type": "sql", "url": url, "table": table, "mode": "live"}
    stand_in = live.catalogue_table(live_source, ctx)
    with _RowsFetched() as fetched:
        pushed = profile.build({"t": stand_in}, [live_source], workspace_path=tmp_path)
    snapshot_source = {"name": "t", "type": "sql", "url": url, "table": table, "mode": "snapshot"}
    copied = sql_source.fetch(snapshot_source, ctx)
    local = profile.build({"t": copied}, [snapshot_source])
    pushed["_fetched"] = (fetched.rows, fetched.statements)
    return pushed, local


def _compare(pushed: dict, local: dict) -> None:
    problems = [e.message for e in _validator("profile").iter_errors({k: v for k, v in pushed.items() if k != "_fetched"})]
    assert not problems
    (p,), (s,) = pushed["tables"], local["tables"]
    assert p["rows"] == s["rows"]
    approximate = set(p.get("approximate", []))
    assert [(c["name"], c["type"]) for c in p["columns"]] == [(c["name"], c["type"]) for c in s["columns"]]
    for pc, sc in zip(p["columns"], s["columns"]):
        where = f"column {pc['name']}"
        for key in ("null_share", "min", "max", "top", "other_count", "rare", "role"):
            assert pc.get(key) == sc.get(key), f"{where}: {key} {pc.get(key)!r} != {sc.get(key)!r}"
        for key in ("mean", "std"):
            assert (key in pc) == (key in sc), where
            if key in pc:
                assert pc[key] == pytest.approx(sc[key], rel=1e-5), f"{where}: {key}"
        # A categorical column's count is exact on both sides; otherwise the snapshot's is HyperLogLog,
        # the live one exact (PostgreSQL) or from a sample (MariaDB, listed as approximate).
        assert pc["distinct"] == pytest.approx(sc["distinct"], rel=0 if "top" in sc else DISTINCT_TOLERANCE), where
        if "quantiles" in sc:
            span = float(sc["max"]) - float(sc["min"])
            assert pc["quantiles"].keys() == sc["quantiles"].keys()
            for q, value in sc["quantiles"].items():
                tolerance = QUANTILE_TOLERANCE * span if "quantiles" in approximate else 1e-6 * max(1.0, abs(value))
                assert abs(pc["quantiles"][q] - value) <= tolerance, f"{where}: {q} {pc['quantiles'][q]} vs {value}"


@pytest.fixture(scope="module")
def pg():
    engine = server_engine("postgresql")
    yield engine
    engine.dispose()


@pytest.fixture(scope="module")
def mariadb():
    engine = server_engine("mariadb")
    yield engine
    engine.dispose()


@pytest.mark.parametrize("rows", [5_000, 250_000], ids=["exact", "sampled"])
def test_postgres_profile_matches_snapshot_profile(pg, tmp_path, rows):
    name = _make(pg, rows)
    try:
        pushed, local = _both(PG_URL, name, tmp_path)
    finally:
        _drop(pg, name)
    _compare(pushed, local)
    table = pushed["tables"][0]
    assert table.get("approximate", []) == (["quantiles"] if rows > profile.EXACT_QUANTILE_MAX_ROWS else [])
    fetched_rows, statements = pushed["_fetched"]
    # One row per aggregate query, a few per categorical column's value counts: never the table's rows.
    assert fetched_rows <= statements * (profile.TOP_K + profile.RARE_K), pushed["_fetched"]
    assert fetched_rows < 200


@pytest.mark.parametrize("rows", [5_000, 250_000], ids=["exact", "sampled"])
def test_mariadb_profile_matches_snapshot_profile(mariadb, tmp_path, rows):
    name = _make(mariadb, rows)
    try:
        pushed, local = _both(MARIADB_URL, name, tmp_path)
    finally:
        _drop(mariadb, name)
    _compare(pushed, local)
    expected = ["distinct", "quantiles"] if rows > profile.EXACT_QUANTILE_MAX_ROWS else []
    assert pushed["tables"][0].get("approximate", []) == expected
    fetched_rows, statements = pushed["_fetched"]
    assert fetched_rows <= statements * (profile.TOP_K + profile.RARE_K), pushed["_fetched"]
    assert fetched_rows < 200


def test_a_300_column_table_is_profiled_in_batches(pg, tmp_path):
    name = f"dm_lprof_wide_{uuid.uuid4().hex[:8]}"
    width = 300
    columns = ", ".join(f"(g * {i + 1}) % {i + 7} AS c{i:03d}" for i in range(width))
    with pg.begin() as connection:
        connection.exec_driver_sql(f"CREATE TABLE {name} AS SELECT {columns.replace('%', '%%')} FROM generate_series(1, 2000) g")
    try:
        with _RowsFetched() as fetched:
            pushed, local = _both(PG_URL, name, tmp_path)
    finally:
        _drop(pg, name)
    assert len(pushed["tables"][0]["columns"]) == width
    _compare(pushed, local)
    # Several aggregate queries of at most SCAN_MAX_COLUMNS columns, not one per column nor one for all.
    assert fetched.statements >= width // profile.SCAN_MAX_COLUMNS


def test_a_missing_table_is_a_clear_error(pg, tmp_path):
    from lib.core.errors import DashmemError

    source = {"name": "gone", "type": "sql", "url": PG_URL, "table": "dm_lprof_no_such_table", "mode": "live"}
    stand_in = __import__("pyarrow").table({"x": [1]}).slice(0, 0)
    with pytest.raises(LiveProfileError, match="gone: cannot profile the live table") as caught:
        profile.build({"gone": stand_in}, [source], workspace_path=tmp_path)
    assert isinstance(caught.value, DashmemError)


def test_cli_profile_of_a_live_workspace_is_computed_in_the_database(pg, tmp_path):
    """`python -m lib profile --write` in one process, profile.yaml read in another: the live table's real figures."""
    import subprocess
    import sys

    from ..conftest import ROOT

    name = _make(pg, 5_000)
    try:
        folder = _workspace(tmp_path, _source(name), "live-profile")
        done = subprocess.run([sys.executable, "-m", "lib", "profile", str(folder), "--write"], cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert "table gates (5000 rows)" in done.stdout
        read = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys, json; from lib.memory import workspace; ws, _ = workspace.load(sys.argv[1]); print(json.dumps(ws.get('profile')))",
                str(folder),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert read.returncode == 0, read.stderr
    finally:
        _drop(pg, name)
    import json

    (table,) = json.loads(read.stdout)["tables"]
    by_name = {c["name"]: c for c in table["columns"]}
    assert table["rows"] == 5_000 and "approximate" not in table
    assert by_name["id"]["min"] == 1 and by_name["id"]["max"] == 5_000 and by_name["id"]["distinct"] == 5_000
    assert by_name["maybe"]["null_share"] == 0.1
    assert by_name["grade"]["top"][0] == {"value": "grade_19", "count": 468}  # 39 of every 400 rows (g % 400 in 361..399), 12 cycles


@pytest.mark.parametrize("server", ["pg", "mariadb"])
def test_live_profiling_scans_again_on_a_new_connection_when_its_connection_was_dropped(server, request, tmp_path, caplog):
    admin = request.getfixturevalue(server)
    url = {"pg": PG_URL, "mariadb": MARIADB_URL}[server]
    table = _make(admin, 2_000)
    try:
        source = {"name": "t", "type": "sql", "url": _url_of_its_own(url, "dm_lprof_reconnect"), "table": table, "mode": "live"}
        stand_in = live.catalogue_table(source, FetchContext(workspace_path=tmp_path))
        with live._engine(source, tmp_path).connect() as pooled:  # the connection the live pool keeps (a live query may not ask its id)
            dropped = pooled.exec_driver_sql(f"SELECT {CONNECTION_ID[admin.dialect.name]}").scalar_one()
        _drop_connection(admin, dropped)  # the pooled connection the profile would take is dead
        caplog.set_level("INFO", logger="lib.data.live")
        built = profile.build({"t": stand_in}, [source], workspace_path=tmp_path)
        assert built["tables"][0]["rows"] == 2_000
        assert len([r for r in caplog.records if "trying again" in r.getMessage()]) == 1
    finally:
        _drop(admin, table)
