"""The `parquet` connector (lib/data/connectors/parquet_source.py): files written with pyarrow, nested
columns flattened (struct fields as parent_child, lists and maps as JSON text), hostile files refused, uploads
refused by their footer past the upload caps."""

from __future__ import annotations

import datetime as dt
import decimal
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lib.data.connectors.base import FetchContext, SourceError, UploadLimits, fetch
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


# --------------------------------------------------------------------------- uploads, within their caps


def read_upload(ctx, rows: int = 2_000_000, size: int = 256 << 20) -> pa.Table:
    limited = FetchContext(workspace_path=ctx.workspace_path, limits=UploadLimits(rows=rows, bytes=size))
    return fetch({"name": "orders", "type": "parquet", "path": "orders.parquet"}, limited)


def test_an_upload_of_millions_of_constant_rows_is_refused_by_its_footer(ctx):
    # 4 million rows of constant columns: a few hundred kB on disk, 68 MB once read.
    constant = pa.table({"id": pa.array(np.full(1_000_000, 7, dtype=np.int64)), "site": pa.array(["Brno"] * 1_000_000)})
    with pq.ParquetWriter(ctx.workspace_path / "orders.parquet", constant.schema, compression="zstd") as writer:
        for _ in range(4):
            writer.write_table(constant)
    assert (ctx.workspace_path / "orders.parquet").stat().st_size < 1 << 20
    with pytest.raises(
        SourceError, match=r"^source 'orders': orders.parquet has 4,000,000 rows; uploads are limited to 1,000,000 rows \(DASHMEM_UPLOAD_MAX_ROWS\)$"
    ):
        read_upload(ctx, rows=1_000_000)
    # Within the rows allowed, the values' decoded widths count, which the footer's encoded sizes do not show.
    with pytest.raises(
        SourceError, match=r"orders.parquet is at least [\d.]+ MB of data once decoded; uploads are limited to 16 MB \(DASHMEM_UPLOAD_MAX_BYTES\)"
    ):
        read_upload(ctx, rows=10_000_000, size=16 << 20)
    assert read(ctx).num_rows == 4_000_000  # a source of the workspace is read whole, as before


def test_a_dictionary_of_one_long_string_is_counted_decoded_before_it_is_decoded(ctx):
    # 100,000 rows of one 1 kB string: 100 MB decoded, a few kB in the footer and on disk.
    long_text = pa.table({"id": pa.array(np.arange(100_000)), "note": pa.array(["x" * 1000]).take(pa.array(np.zeros(100_000, dtype=np.int64)))})
    pq.write_table(long_text, ctx.workspace_path / "orders.parquet", compression="zstd")
    with pytest.raises(SourceError, match=r"orders.parquet is more than 16 MB of data once decoded; uploads are limited to 16 MB"):
        read_upload(ctx, size=16 << 20)
    assert read_upload(ctx, size=128 << 20).equals(read(ctx))  # under the cap: decoded, the same table as ever


def test_an_upload_within_the_caps_reads_as_the_source_does(ctx):
    table = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int32()),
            "site": pa.array(["a", "b", "a"]).dictionary_encode(),
            "name": ["Ann", None, "Cy"],
            "flag": [True, False, None],
            "customer": pa.array([{"name": "Ann", "city": "Brno"}, None, {"name": "Cy", "city": None}]),
            "tags": pa.array([["new", "vip"], [], None]),
        }
    )
    pq.write_table(table, ctx.workspace_path / "orders.parquet", row_group_size=2)
    got = read_upload(ctx)
    assert got.equals(read(ctx)) and got.schema.field("name").type == pa.string()
    pq.write_table(table.slice(0, 0), ctx.workspace_path / "orders.parquet")
    assert read_upload(ctx).num_rows == 0
