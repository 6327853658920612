"""DuckDB's errors as sentences (lib/data/sql_errors.py): each class of the engine's error, raised by real DuckDB,
reads as a sentence that names what does not fit and what to do, and no engine text reaches the person."""

from __future__ import annotations

import logging

import duckdb
import pyarrow as pa
import pytest

from lib.data import sql_errors
from lib.data.queries import bind, run_query
from lib.data.sandbox import QueryError, check_statement
from lib.data.standins import tables_named

# The class names DuckDB's messages start with; none may reach a person.
ENGINE_TEXT = ("Binder Error", "Catalog Error", "Parser Error", "Conversion Error", "Invalid Input Error", "Out of Range Error", "Permission Error")

TABLES = {
    "gates": pa.table({"day": ["2026-11-16"], "site": ["Brno"], "gate": ["Supply"], "target": [1164], "actual": [1083]}),
    "orders": pa.table({"site": ["Brno"], "orders": [12], "region": ["CZ"]}),
}
COLUMNS = {name: table.schema.names for name, table in TABLES.items()}


def engine_text(sql: str) -> str:
    """DuckDB's own message for `sql` over the tables (in-process, as the query worker gets it)."""
    con = duckdb.connect()
    for name, table in TABLES.items():
        con.register(name, table)
    with pytest.raises(duckdb.Error) as raised:
        con.sql(sql).fetchall()
    return str(raised.value)


def reads(sql: str) -> set[str] | None:
    """The tables the query reads, as lib.data.queries works them out for the translation."""
    try:
        return tables_named(sql)
    except QueryError:
        return None


# (class, query, words the sentence must hold: what does not fit, and what to do)
CASES = [
    ("Binder Error", "SELECT sum(actal) FROM gates", ["'actal'", "did you mean 'actual'", "gates", "Correct the column name"]),
    ("Binder Error", "SELECT g.actal FROM gates g", ["'actal'", "did you mean 'actual'"]),
    ("Binder Error", "SELECT site, actual FROM gates GROUP BY site", ["'actual'", "GROUP BY", "aggregate"]),
    ("Binder Error", "SELECT avg(site) FROM gates", ["avg()", "text", "CAST"]),
    ("Binder Error", "SELECT gates.site FROM gates JOIN orders o ON gates.site = o.site WHERE site = 'Brno'", ["'site'", "gates.site", "o.site"]),
    ("Catalog Error", "SELECT count(*) FROM gatez", ["'gatez'", "did you mean 'gates'", "refresh"]),
    ("Catalog Error", "SELECT medain(actual) FROM gates", ["medain()", "did you mean"]),
    ("Parser Error", "SELECT site FROM gates WHERE", ["syntax error", "line 1"]),
    ("Conversion Error", "SELECT CAST(site AS INTEGER) FROM gates", ["'Brno'", "column 'site'", "a number", "TRY_CAST"]),
    ("Conversion Error", "SELECT CAST(day || 'x' AS DATE) FROM gates", ["'2026-11-16x'", "date", "TRY_CAST"]),
    ("Invalid Input Error", "SELECT count(*) FROM gates WHERE site = $site", ["$site", "no value"]),
    ("Invalid Input Error", "SELECT strptime(day, '%d/%m/%Y') FROM gates", ["'2026-11-16'", "'%d/%m/%Y'"]),
    ("Out of Range Error", "SELECT 9223372036854775807 + actual FROM gates", ["too large", "DOUBLE"]),
]


@pytest.mark.parametrize("cls,sql,words", CASES, ids=[f"{c[0]}: {c[1]}" for c in CASES])
def test_each_class_of_engine_error_reads_as_a_sentence_naming_what_does_not_fit(cls, sql, words):
    raw = engine_text(sql)
    assert raw.startswith(cls)  # the engine's own text, as it comes
    said = sql_errors.translate(raw, COLUMNS, reads(sql))
    assert said.engine and not any(name in said.message for name in ENGINE_TEXT), said.message
    missing = [w for w in words if w.lower() not in said.message.lower()]
    assert not missing, said.message
    assert "LINE 1" not in said.message and "Candidate" not in said.message  # nor its caret block and candidate lists


def test_a_file_or_the_network_is_refused_in_plain_words_naming_what_may_be_read():
    """In the sandbox (external access disabled), reading a file is DuckDB's Permission Error."""
    with pytest.raises(QueryError) as raised:
        run_query(TABLES, "SELECT * FROM read_csv('/etc/passwd')")
    assert "Permission Error" not in str(raised.value) and "/etc/passwd" not in str(raised.value)
    assert "gates" in str(raised.value) and "orders" in str(raised.value)


def test_an_unknown_column_offers_the_columns_of_only_the_tables_the_query_reads():
    with pytest.raises(QueryError) as one:
        bind(TABLES, "SELECT sum(actal) FROM gates")
    assert one.value.column == "actal" and one.value.table is None
    assert set(one.value.allowed) == set(COLUMNS["gates"])  # not orders' columns: the query does not read orders
    assert "region" not in str(one.value) and "did you mean 'actual'" in str(one.value)

    with pytest.raises(QueryError) as both:
        bind(TABLES, "WITH o AS (SELECT * FROM orders) SELECT regoin FROM gates JOIN o USING (site)")
    assert both.value.column == "regoin" and "did you mean 'region'" in str(both.value)
    assert set(both.value.allowed) == set(COLUMNS["gates"]) | set(COLUMNS["orders"])


def test_an_unknown_table_names_the_loaded_tables_and_what_to_do():
    with pytest.raises(QueryError) as raised:
        run_query(TABLES, "SELECT count(*) FROM shipments")
    assert raised.value.table == "shipments" and raised.value.column is None
    assert set(raised.value.allowed) == set(TABLES) and "refresh" in str(raised.value)
    assert "Catalog Error" not in str(raised.value)


def test_a_syntax_error_found_before_the_query_runs_is_a_sentence_too():
    with pytest.raises(QueryError) as raised:
        check_statement("SELEC 1")
    assert str(raised.value).startswith("SQL syntax error") and "Parser Error" not in str(raised.value)


def test_text_that_is_not_the_engines_passes_unchanged():
    for text in ("query took longer than 10 s and was stopped", "the query needed more memory than allowed and was stopped", ""):
        said = sql_errors.translate(text, COLUMNS)
        assert said.message == text and not said.engine and said.table is None and said.column is None


def test_the_engines_own_text_goes_to_the_log(caplog):
    raw = engine_text("SELECT sum(actal) FROM gates")
    with caplog.at_level(logging.INFO, logger=sql_errors.__name__):
        said = sql_errors.translate(raw, COLUMNS, ["gates"])
    assert raw.strip() in caplog.text and raw.strip() not in said.message


def test_an_unknown_class_of_engine_error_still_reads_without_the_engines_class_name():
    said = sql_errors.translate("Not implemented Error: this kind of window frame", COLUMNS)
    assert said.engine and "Error:" not in said.message and "window frame" in said.message
