"""Real third-party MCP servers from PyPI, each in a venv of its own (`make mcp-servers`), serving the public GDP
table (13,979 rows) from a SQLite or DuckDB file in the test's folder, read by an `mcp` source and a refresh.

Each answers in a shape of its own (issue #30): mcp-server-sqlite a Python literal of dicts, mcp-server-duckdb a
literal of tuples without column names, mcp-alchemy `key: value` blocks, motherduck `columns` beside `rows` arrays
in a JSON string. Whatever the shape, the table served must be the source table: its columns, its rows, its values.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
import sqlalchemy as sa
import yaml

from lib.data.refresh import refresh
from lib.data.snapshots import Warehouse
from lib.roles.access import OPERATOR
from tests.helpers import listening, stop

from ..conftest import ROOT, WORKSPACES, free_port, server_engine

THIRDPARTY = ROOT / ".data" / "thirdparty"
COLUMNS = ["Country Name", "Country Code", "Year", "Value"]
SELECT_ALL = 'SELECT "Country Name", "Country Code", "Year", "Value" FROM gdp'

# A connect outside loopback, or a real DNS lookup, fails the test (tests/helpers/netguard.py). Each test starts a
# server process (1-6 s here, as tests/data/test_mcp_source.py's do): the slow loop; 120 s proves "does not hang".
pytestmark = [pytest.mark.usefixtures("network"), pytest.mark.slow, pytest.mark.timeout(120)]


def server_bin(package: str, program: str | None = None) -> Path:
    """The server's program in its own venv, or a skip naming the make target that installs it."""
    path = THIRDPARTY / package / "bin" / (program or package)
    if not (THIRDPARTY / package / ".installed").exists() or not path.exists():
        pytest.skip(f"{package} is not installed in {THIRDPARTY / package}; `make mcp-servers` installs it")
    return path


@pytest.fixture(autouse=True)
def loopback_allowed(monkeypatch):
    monkeypatch.setenv("DASHMEM_HTTP_ALLOW_NETWORKS", "127.0.0.0/8")


@pytest.fixture(scope="module")
def gdp(dataset) -> pa.Table:
    """The source table: the public GDP CSV as Arrow reads it."""
    return pacsv.read_csv(dataset("gdp.csv"))


@pytest.fixture
def workspace(tmp_path, gdp, dataset, monkeypatch) -> Path:
    """The shipped GDP explorer (its dashboard, profile and checks) with the public GDP table as a SQLite file in data/
    (and as DuckDB files, `duckdb_file`)."""
    folder = tmp_path / "gdp-explorer"
    shutil.copytree(WORKSPACES / "gdp-explorer", folder)
    shutil.copy(dataset("gdp.csv"), folder / "data" / "gdp.csv")
    engine = sa.create_engine(f"sqlite:///{folder / 'data' / 'gdp.sqlite'}")
    with engine.begin() as connection:
        connection.exec_driver_sql('CREATE TABLE gdp ("Country Name" TEXT, "Country Code" TEXT, "Year" INTEGER, "Value" REAL)')
        connection.execute(sa.text("INSERT INTO gdp VALUES (:n, :c, :y, :v)"), [dict(zip("ncyv", row.values())) for row in gdp.to_pylist()])
    engine.dispose()
    monkeypatch.setenv("DM_TEST_GDP_SQLITE", f"sqlite:///{folder / 'data' / 'gdp.sqlite'}")
    return folder


def duckdb_file(folder: Path, package: str) -> str:
    """data/<package>.duckdb holding the GDP table, written by the server's own duckdb (file formats differ between
    duckdb versions); its path in the workspace."""
    python = server_bin(package, "python")
    target = f"data/{package}.duckdb"
    script = f"import duckdb; duckdb.connect({target!r}).execute(\"CREATE OR REPLACE TABLE gdp AS SELECT * FROM read_csv('data/gdp.csv')\")"
    subprocess.run([str(python), "-c", script], cwd=folder, check=True, timeout=60)
    return target


def with_source(folder: Path, monkeypatch, source: dict) -> None:
    """sources.yaml holding the one `gdp` source, and its server allowed to start (DASHMEM_MCP_COMMANDS)."""
    (folder / "sources.yaml").write_text(yaml.safe_dump({"sources": [{"name": "gdp", "type": "mcp", **source}]}, sort_keys=False))
    if "command" in source:
        monkeypatch.setenv("DASHMEM_MCP_COMMANDS", source["command"][0])


def served(wh: Warehouse) -> pa.Table:
    current = wh.current()
    assert current is not None
    return wh.tables(current)["gdp"]


def assert_is_the_source_table(table: pa.Table, gdp: pa.Table) -> None:
    """Same columns, same number of rows, same values (compared in one order; floats exactly, as each server spells them)."""
    assert table.column_names == COLUMNS
    assert table.num_rows == gdp.num_rows
    order = [("Country Code", "ascending"), ("Year", "ascending")]
    got, want = table.select(COLUMNS).sort_by(order), gdp.sort_by(order)
    for name in COLUMNS:
        assert got.column(name).to_pylist() == want.column(name).to_pylist(), name


# --- each server reads the whole table ---------------------------------------------------------------


def sqlite_source(folder: Path) -> dict:
    return {"command": [str(server_bin("mcp-server-sqlite")), "--db-path", "data/gdp.sqlite"], "tool": "read_query", "arguments": {"query": SELECT_ALL}}


def motherduck_source(folder: Path, *limits: str) -> dict:
    command = [str(server_bin("mcp-server-motherduck")), "--db-path", duckdb_file(folder, "mcp-server-motherduck"), *limits]
    return {"command": command, "tool": "execute_query", "arguments": {"sql": SELECT_ALL}}


def alchemy_source(folder: Path) -> dict:
    env = {"DB_URL": "env:DM_TEST_GDP_SQLITE", "EXECUTE_QUERY_MAX_CHARS": "env:DM_TEST_ALCHEMY_MAX_CHARS"}
    return {"command": [str(server_bin("mcp-alchemy"))], "env": env, "tool": "execute_query", "arguments": {"query": SELECT_ALL}}


def duckdb_source(folder: Path) -> dict:
    command = [str(server_bin("mcp-server-duckdb")), "--db-path", duckdb_file(folder, "mcp-server-duckdb"), "--readonly"]
    # Its answer is a literal of tuples: the column names come from the source.
    return {"command": command, "tool": "query", "arguments": {"query": SELECT_ALL}, "column_names": COLUMNS}


WHOLE = {
    "mcp-server-sqlite": sqlite_source,
    "mcp-server-motherduck": lambda folder: motherduck_source(folder, "--max-rows", "100000", "--max-chars", "100000000"),
    "mcp-alchemy": alchemy_source,
    "mcp-server-duckdb": duckdb_source,
}


@pytest.mark.parametrize("server", list(WHOLE))
def test_a_refresh_through_each_server_serves_the_whole_source_table(server, workspace, gdp, tmp_path, monkeypatch):
    monkeypatch.setenv("DM_TEST_ALCHEMY_MAX_CHARS", "100000000")  # mcp-alchemy cuts its answer at 4,000 characters by default
    with_source(workspace, monkeypatch, WHOLE[server](workspace))
    wh = Warehouse(tmp_path / "cache")

    started = time.monotonic()
    report = refresh(workspace, wh, user=OPERATOR)

    assert report.ok, report.summary()
    [entry] = report.sources
    assert (entry.status, entry.rows_after) == ("ok", gdp.num_rows)
    assert_is_the_source_table(served(wh), gdp)
    assert time.monotonic() - started < 60  # does not hang


def test_mcp_alchemy_reads_the_table_from_postgresql_too(workspace, gdp, tmp_path, monkeypatch):
    engine = server_engine("postgresql")
    server_bin("mcp-alchemy")
    with engine.begin() as connection:
        connection.exec_driver_sql("DROP TABLE IF EXISTS gdp")
        connection.exec_driver_sql('CREATE TABLE gdp ("Country Name" TEXT, "Country Code" TEXT, "Year" BIGINT, "Value" DOUBLE PRECISION)')
        connection.execute(sa.text("INSERT INTO gdp VALUES (:n, :c, :y, :v)"), [dict(zip("ncyv", row.values())) for row in gdp.to_pylist()])
    try:
        monkeypatch.setenv("DM_TEST_GDP_SQLITE", engine.url.render_as_string(hide_password=False))
        monkeypatch.setenv("DM_TEST_ALCHEMY_MAX_CHARS", "100000000")
        with_source(workspace, monkeypatch, alchemy_source(workspace))
        wh = Warehouse(tmp_path / "cache")
        report = refresh(workspace, wh, user=OPERATOR)
        assert report.ok, report.summary()
        assert_is_the_source_table(served(wh), gdp)
    finally:
        with engine.begin() as connection:
            connection.exec_driver_sql("DROP TABLE IF EXISTS gdp")
        engine.dispose()


def test_iso_dates_and_timestamps_from_sqlite_arrive_as_dates_and_timestamps(dataset, tmp_path, monkeypatch):
    """SQLite keeps dates as ISO text, and mcp-server-sqlite sends them as strings: they load as DATE and TIMESTAMP."""
    calls = pacsv.read_csv(dataset("nyc311_api_1000.csv"), convert_options=pacsv.ConvertOptions(column_types={"created_date": pa.string()}))
    folder = tmp_path / "calls"
    shutil.copytree(WORKSPACES / "gdp-explorer", folder, ignore=shutil.ignore_patterns("dashboard.yaml", "profile.yaml", "data"))
    (folder / "data").mkdir()
    engine = sa.create_engine(f"sqlite:///{folder / 'data' / 'calls.sqlite'}")
    with engine.begin() as connection:
        connection.exec_driver_sql("CREATE TABLE calls (unique_key INTEGER, created_date TEXT, complaint_type TEXT)")
        rows = calls.select(["unique_key", "created_date", "complaint_type"]).to_pylist()
        connection.execute(sa.text("INSERT INTO calls VALUES (:unique_key, :created_date, :complaint_type)"), rows)
    engine.dispose()
    query = "SELECT unique_key, created_date, date(created_date) AS created_day, complaint_type FROM calls"
    source = {"command": [str(server_bin("mcp-server-sqlite")), "--db-path", "data/calls.sqlite"], "tool": "read_query", "arguments": {"query": query}}
    (folder / "sources.yaml").write_text(yaml.safe_dump({"sources": [{"name": "calls", "type": "mcp", **source}]}, sort_keys=False))
    monkeypatch.setenv("DASHMEM_MCP_COMMANDS", source["command"][0])
    wh = Warehouse(tmp_path / "cache")

    report = refresh(folder, wh, user=OPERATOR)

    assert report.ok, report.summary()
    current = wh.current()
    assert current is not None
    types = current.columns("calls")
    assert (types["created_date"], types["created_day"], types["complaint_type"]) == ("TIMESTAMP", "DATE", "VARCHAR")
    loaded = wh.tables(current)["calls"]
    assert loaded.num_rows == calls.num_rows
    first = calls.column("created_date")[0].as_py()
    assert loaded.column("created_date")[0].as_py().isoformat(timespec="milliseconds") == first
    assert str(loaded.column("created_day")[0].as_py()) == first[:10]


# --- an answer the server cut short ----------------------------------------------------------------------


def test_a_truncated_answer_fails_the_source_and_the_previous_data_stays_served(workspace, gdp, tmp_path, monkeypatch):
    wh = Warehouse(tmp_path / "cache")
    with_source(workspace, monkeypatch, WHOLE["mcp-server-motherduck"](workspace))
    assert refresh(workspace, wh, user=OPERATOR).ok
    first = wh.current()
    assert first is not None

    with_source(workspace, monkeypatch, motherduck_source(workspace))  # its default limits: 1,024 rows, 50,000 characters
    report = refresh(workspace, wh, user=OPERATOR)

    assert not report.ok and not report.swapped
    [entry] = report.sources
    assert entry.status == "failed"
    assert "MCP tool 'execute_query' says its answer is incomplete" in entry.message
    assert "Results limited to" in entry.message and "allow_truncated" in entry.message  # the server's words, and the way out
    assert wh.current() == first
    assert served(wh).num_rows == gdp.num_rows
    assert "kept the previous data" in report.summary()


def test_a_source_that_allows_truncation_loads_the_part_with_a_warning_on_the_report(workspace, tmp_path, monkeypatch):
    source = motherduck_source(workspace)
    with_source(workspace, monkeypatch, {**source, "allow_truncated": True})
    wh = Warehouse(tmp_path / "cache")

    report = refresh(workspace, wh, user=OPERATOR)

    assert report.ok, report.summary()
    [entry] = report.sources
    assert entry.rows_after is not None and 0 < entry.rows_after < 13_979
    assert entry.message.startswith("partial data: MCP tool 'execute_query' says its answer is incomplete")
    assert entry.message in report.summary()
    assert served(wh).num_rows == entry.rows_after


def test_mcp_alchemys_cut_text_answer_fails_the_source_naming_its_words(workspace, tmp_path, monkeypatch):
    with_source(workspace, monkeypatch, alchemy_source(workspace))
    monkeypatch.setenv("DM_TEST_ALCHEMY_MAX_CHARS", "4000")  # its default

    report = refresh(workspace, wh := Warehouse(tmp_path / "cache"), user=OPERATOR)

    [entry] = report.sources
    assert entry.status == "failed" and "(output truncated)" in entry.message
    assert wh.current() is None


# --- over HTTP -----------------------------------------------------------------------------------------


def served_over_http(command: list[str], folder: Path, port: int, env: dict | None = None) -> subprocess.Popen:
    log = folder / f"server-{port}.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(command, cwd=folder, stdout=out, stderr=subprocess.STDOUT, env=env)
    listening(process, port, log)
    return process


def test_an_answer_over_a_mib_arrives_whole_over_streamable_http(workspace, gdp, tmp_path, monkeypatch):
    """motherduck's indented JSON of the table is about 1.2 MB: one server-sent event past the MCP client's default 1 MiB."""
    port = free_port()
    command = [*motherduck_source(workspace, "--max-rows", "100000", "--max-chars", "100000000")["command"], "--transport", "http", "--port", str(port)]
    process = served_over_http(command, workspace, port)
    try:
        with_source(workspace, monkeypatch, {"url": f"http://127.0.0.1:{port}/mcp", "tool": "execute_query", "arguments": {"sql": SELECT_ALL}})
        wh = Warehouse(tmp_path / "cache")
        report = refresh(workspace, wh, user=OPERATOR)
        assert report.ok, report.summary()
        assert_is_the_source_table(served(wh), gdp)

        monkeypatch.setenv("DASHMEM_MCP_MAX_MESSAGE_BYTES", "1MB")
        report = refresh(workspace, wh, user=OPERATOR)
        [entry] = report.sources
        assert entry.status == "failed"
        assert "is larger than the 1 MB this server takes in one MCP message (DASHMEM_MCP_MAX_MESSAGE_BYTES)" in entry.message
        assert "failed" not in entry.message.split(":", 1)[1]  # the tool answered; the limit is ours
    finally:
        stop(process)


def test_a_legacy_http_sse_server_is_read_at_its_sse_url(workspace, gdp, tmp_path, monkeypatch):
    port = free_port()
    env = {"PATH": str(server_bin("mcp-alchemy").parent), "DB_URL": f"sqlite:///{workspace / 'data' / 'gdp.sqlite'}", "EXECUTE_QUERY_MAX_CHARS": "100000000"}
    process = served_over_http([str(server_bin("mcp-alchemy")), "--transport", "sse", "--port", str(port)], workspace, port, env)
    try:
        source = {"url": f"http://127.0.0.1:{port}/sse", "tool": "execute_query", "arguments": {"query": SELECT_ALL + ' WHERE "Year" = 2020'}}
        with_source(workspace, monkeypatch, source)
        wh = Warehouse(tmp_path / "cache")
        report = refresh(workspace, wh, user=OPERATOR)
        assert report.ok, report.summary()
        assert served(wh).num_rows == len([y for y in gdp.column("Year").to_pylist() if y == 2020])
    finally:
        stop(process)
