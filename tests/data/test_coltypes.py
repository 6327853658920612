"""Column types (lib/data/coltypes.py), checked against DuckDB itself: its names for Arrow types, and the Arrow
types it returns for each name sources.yaml may pin."""

from __future__ import annotations

import json

import duckdb
import pyarrow as pa
import pytest

from lib.data import coltypes

from ..conftest import ROOT

PINNABLE = ["VARCHAR", "BOOLEAN", "BIGINT", "INTEGER", "DOUBLE", "DATE", "TIMESTAMP", "TIME"]


@pytest.mark.parametrize("name", PINNABLE)
def test_arrow_type_is_what_duckdb_returns_for_a_column_of_that_type(name):
    relation = duckdb.sql(f"SELECT CAST(NULL AS {name}) AS c")
    assert relation is not None  # a SELECT: rows
    returned = relation.arrow().schema.field("c").type
    assert coltypes.arrow_type(name) == returned


def test_every_type_sources_yaml_may_pin_has_an_arrow_type():
    """Decision 12: the schema's list of column types and coltypes' table are one fact; test they match."""
    enum = json.loads((ROOT / "schemas" / "sources.schema.json").read_text())["$defs"]["column_type"]["enum"]
    assert set(enum) == set(PINNABLE) | {"DECIMAL"}
    for name in enum:
        assert isinstance(coltypes.arrow_type(name), pa.DataType)


def test_arrow_type_ignores_case_and_reads_decimals_as_doubles():
    assert coltypes.arrow_type("bigint") == pa.int64()
    assert coltypes.arrow_type("Decimal") == pa.float64()


def test_arrow_type_of_a_name_sources_cannot_pin_is_an_error():
    with pytest.raises(KeyError):
        coltypes.arrow_type("HUGEINT")


ARROW = [
    pa.string(),
    pa.large_string(),
    pa.bool_(),
    pa.int8(),
    pa.int16(),
    pa.int32(),
    pa.int64(),
    pa.uint8(),
    pa.uint16(),
    pa.uint32(),
    pa.uint64(),
    pa.float32(),
    pa.float64(),
    pa.date32(),
    pa.timestamp("s"),
    pa.timestamp("ms"),
    pa.timestamp("us"),
    pa.timestamp("ns"),
    pa.time64("us"),
    pa.dictionary(pa.int32(), pa.string()),
]


@pytest.mark.parametrize("arrow", ARROW, ids=str)
def test_duckdb_name_is_what_duckdb_describes_for_an_arrow_column(arrow):
    values = pa.array([None], pa.string()).dictionary_encode() if pa.types.is_dictionary(arrow) else pa.array([None], arrow)
    table = pa.table({"c": values})
    con = duckdb.connect()
    con.register("t", table)
    [(_, described, *_)] = con.execute("DESCRIBE t").fetchall()
    assert coltypes.duckdb_name(arrow) == described


def test_duckdb_name_of_an_uncommon_type_is_none_not_a_guess():
    assert coltypes.duckdb_name(pa.list_(pa.int64())) is None
    assert coltypes.duckdb_name(pa.decimal128(10, 2)) is None


@pytest.mark.parametrize(
    "name,family",
    [
        ("INTEGER", "number"),
        ("decimal(18,3)", "number"),
        ("DECIMAL (10, 2)", "number"),
        ("UBIGINT", "number"),
        ("REAL", "number"),
        ("VARCHAR", "text"),
        ("uuid", "text"),
        ("DATE", "time"),
        ("TIMESTAMP WITH TIME ZONE", "time"),
        ("TIMESTAMP_NS", "time"),
        ("BOOLEAN", "boolean"),
        ("TIME", "other"),  # a time of day is no point on a time axis
        ("INTEGER[]", "other"),
        ("STRUCT(a INTEGER)", "other"),
        ("MAP(VARCHAR, INTEGER)", "other"),
        ("BLOB", "other"),
    ],
)
def test_family(name, family):
    assert coltypes.family(name) == family


@pytest.mark.parametrize(
    "old,new",
    [
        ("INTEGER", "DOUBLE"),  # an integer column that gains decimals
        ("BIGINT", "DECIMAL(18,2)"),
        ("VARCHAR", "varchar"),
        ("DATE", "TIMESTAMP"),
        ("INTEGER[]", "INTEGER[]"),  # the very same type, even outside the families
    ],
)
def test_a_dashboard_survives_a_change_within_a_family(old, new):
    assert coltypes.compatible(old, new)


@pytest.mark.parametrize(
    "old,new",
    [
        ("INTEGER", "VARCHAR"),  # numbers turned text: sums and axes break
        ("VARCHAR", "DATE"),
        ("BOOLEAN", "INTEGER"),
        ("INTEGER[]", "VARCHAR[]"),  # 'other' is no family: two different list types are not compatible
        ("TIME", "BLOB"),
    ],
)
def test_a_change_across_families_is_not_compatible(old, new):
    assert not coltypes.compatible(old, new)
