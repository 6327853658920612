"""lib.data.sandbox's own helpers: the one way a locked-down DuckDB and its cursors are opened."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

from lib.data import sandbox
from lib.data.sandbox import QueryError, QueryRefused

from ..conftest import import_each_alone

TABLES = {"t": pa.table({"x": [1, 2, 3], "s": ["a", "b", "a"]})}


def test_connect_gives_a_database_that_cannot_touch_files_or_change_its_settings(tmp_path):
    secret = tmp_path / "secret.csv"
    secret.write_text("a\n1\n")
    con = sandbox.connect("256MB", threads=1)
    try:
        assert con.execute("SELECT current_setting('threads'), current_setting('enable_external_access')").fetchone() == (1, False)
        with pytest.raises(duckdb.Error):
            con.execute(f"SELECT * FROM read_csv('{secret}')")
        with pytest.raises(duckdb.Error):
            con.execute(f"COPY (SELECT 1) TO '{tmp_path / 'out.csv'}'")
        with pytest.raises(duckdb.Error):
            con.execute("SET enable_external_access = true")  # the configuration is locked
        with pytest.raises(duckdb.Error):
            con.execute("SET threads = 4")
    finally:
        con.close()
    assert not (tmp_path / "out.csv").exists()


def test_sandbox_cursor_registers_tables_and_closes_with_the_block():
    with sandbox.sandbox_cursor(TABLES) as cursor:
        assert cursor.execute("SELECT s, sum(x) FROM t GROUP BY s ORDER BY s").fetchall() == [("a", 4), ("b", 2)]
    with pytest.raises(duckdb.Error):
        cursor.execute("SELECT 1")  # closed
    with sandbox.sandbox_cursor() as other:  # a fresh cursor sees none of another's tables
        with pytest.raises(duckdb.Error):
            other.execute("SELECT * FROM t")


def test_sandbox_cursor_opens_on_a_given_connection():
    con = sandbox.connect("128MB")
    try:
        with sandbox.sandbox_cursor(TABLES, connection=con) as cursor:
            assert cursor.execute("SELECT count(*) FROM t").fetchone() == (3,)
    finally:
        con.close()


def test_the_process_sandbox_is_one_locked_database():
    assert sandbox.sandbox() is sandbox.sandbox()
    with pytest.raises(duckdb.Error):
        sandbox.sandbox().cursor().execute("SET enable_external_access = true")


def test_only_a_single_select_passes_the_statement_check():
    sandbox.check_statement("WITH a AS (SELECT 1 AS x) SELECT x FROM a")
    with pytest.raises(QueryRefused, match="empty"):
        sandbox.check_statement("  ")
    with pytest.raises(QueryRefused, match="exactly one statement"):
        sandbox.check_statement("SELECT 1; SELECT 2")
    with pytest.raises(QueryRefused, match="only SELECT"):
        sandbox.check_statement("CREATE TABLE x (a INT)")
    with pytest.raises(QueryError, match="syntax error"):
        sandbox.check_statement("SELEC 1")


def test_describe_names_common_types_and_asks_duckdb_for_the_rest():
    unusual = pa.table({"m": pa.array([{"k": 1}], type=pa.struct([("k", pa.int64())]))})
    assert sandbox.describe({"t": TABLES["t"], "u": unusual}) == {"t": [["x", "BIGINT"], ["s", "VARCHAR"]], "u": [["m", "STRUCT(k BIGINT)"]]}
    assert sandbox.quote_ident('a"b') == '"a""b"'


def test_each_module_imports_on_its_own():
    """Any of the query modules may be imported first."""
    import_each_alone([f"lib.data.{module}" for module in ("sandbox", "queries", "snapshots", "query_worker")])
