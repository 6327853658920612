"""The `parquet` connector (lib/data/connectors/parquet_source.py): files written with pyarrow, nested
columns flattened (struct fields as parent_child, lists and maps as JSON text), hostile files refused."""

from __future__ import annotations

import datetime as dt
import decimal
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lib.data.connectors.base import FetchContext, SourceError, fetch
from lib.data.sandbox import describe


@pytest.fixture
def ctx(tmp_path):
    return FetchContext(workspace_path=tmp_path, uploads_dir=tmp_path / "uploads")


def read(ctx) -> pa.Table:
    return fetch({"name": "orders", "type": "parquet", "path": "orders.parquet"}, ctx)


def test_flat_columns_keep_their_types(ctx):
    table = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int32()),
            "amount": pa.array([decimal.Decimal("1.50"), None, decimal.Decimal("3.25")], pa.decimal128(9, 2)),
            "at": pa.array([dt.datetime(2026, 1, 1, 8), dt.datetime(2026, 1, 2), None], pa.timestamp("ms", tz="UTC")),
            "site": pa.array(["a", "b", "a"]).dictionary_encode(),
        }
    )
    pq.write_table(table, ctx.workspace_path / "orders.parquet", row_group_size=2)  # two row groups
    got = read(ctx)
    assert got.num_rows == 3 and got.column("id").to_pylist() == [1, 2, 3]
    assert got.column("amount").to_pylist()[0] == decimal.Decimal("1.50")
    assert dict(describe({"orders": got})["orders"])["id"] == "INTEGER"  # DuckDB reads every column


def test_nested_columns_are_flattened_and_a_missing_struct_leaves_its_fields_missing(ctx):
    customer = pa.array([{"name": "Ann", "address": {"city": "Brno"}}, None, {"name": "Cy", "address": None}])
    table = pa.table(
        {
            "id": [1, 2, 3],
            "customer": customer,
            "tags": pa.array([["new", "vip"], [], None]),
            "extra": pa.array([[("k", 1)], None, [("a", 2), ("b", 3)]], pa.map_(pa.string(), pa.int64())),
        }
    )
    pq.write_table(table, ctx.workspace_path / "orders.parquet")
    got = read(ctx)
    assert got.column_names == ["id", "customer_name", "customer_address_city", "tags", "extra"]
    assert got.column("customer_name").to_pylist() == ["Ann", None, "Cy"]
    assert got.column("customer_address_city").to_pylist() == ["Brno", None, None]
    assert [json.loads(v) if v else v for v in got.column("tags").to_pylist()] == [["new", "vip"], [], None]
    assert json.loads(got.column("extra").to_pylist()[2]) == {"a": 2, "b": 3}
    assert all(t in ("BIGINT", "VARCHAR") for _, t in describe({"orders": got})["orders"])


def test_a_flattened_name_that_exists_already_is_made_unique(ctx):
    table = pa.table({"customer_name": ["x"], "customer": pa.array([{"name": "Ann"}])})
    pq.write_table(table, ctx.workspace_path / "orders.parquet")
    assert read(ctx).column_names == ["customer_name", "customer_name_2"]


def test_a_binary_column_is_refused_by_name(ctx):
    pq.write_table(pa.table({"id": [1], "blob": pa.array([b"\x00\x01"])}), ctx.workspace_path / "orders.parquet")
    with pytest.raises(SourceError, match=r"column 'blob' holds binary data"):
        read(ctx)


def test_damaged_and_foreign_files_are_clear_errors(ctx):
    path = ctx.workspace_path / "orders.parquet"
    pq.write_table(pa.table({"id": list(range(1000))}), path)
    path.write_bytes(path.read_bytes()[:-20])  # the footer cut off
    with pytest.raises(SourceError, match=r"orders.parquet is not a readable Parquet file"):
        read(ctx)
    path.write_text("id,name\n1,a\n")
    with pytest.raises(SourceError, match=r"orders.parquet is not a readable Parquet file"):
        read(ctx)
    path.unlink()
    with pytest.raises(SourceError, match="file not found: orders.parquet"):
        read(ctx)


def test_a_path_outside_the_workspace_and_the_data_dirs_is_refused(ctx, tmp_path, monkeypatch):
    outside = tmp_path.parent / f"{tmp_path.name}-data"
    outside.mkdir()
    pq.write_table(pa.table({"id": [1]}), outside / "orders.parquet")
    with pytest.raises(SourceError, match="outside the workspace folder"):
        fetch({"name": "orders", "type": "parquet", "path": str(outside / "orders.parquet")}, ctx)
    monkeypatch.setenv("DASHMEM_DATA_DIRS", str(outside))
    assert fetch({"name": "orders", "type": "parquet", "path": str(outside / "orders.parquet")}, ctx).num_rows == 1
