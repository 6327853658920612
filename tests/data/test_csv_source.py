"""The `csv` connector (lib/data/connectors/csv_source.py): delimiters, headers, pinned types, dates, uploads.
Encodings and hostile files are in tests/system/test_hostile_files.py, random files in tests/system/test_fuzz.py, and
types kept across refreshes in tests/data/test_refresh.py."""

from __future__ import annotations

import datetime as dt
import gzip
import re

import pyarrow as pa
import pytest

from lib.data.connectors import csv_source as csv
from lib.data.connectors.base import FetchContext, SourceError, UploadLimits, fetch, size_text
from lib.data.connectors.csv_source import DATE_FORMAT_KEY, parse_dates, sniff_delimiter, store_upload


@pytest.fixture
def ctx(tmp_path):
    return FetchContext(workspace_path=tmp_path, uploads_dir=tmp_path / "uploads")


def read(ctx, text: str, **settings) -> pa.Table:
    (ctx.workspace_path / "f.csv").write_text(text, encoding="utf-8")
    return fetch({"name": "f", "type": "csv", "path": "f.csv", **settings}, ctx)


# --------------------------------------------------------------------------- delimiters


@pytest.mark.parametrize("delimiter", [",", ";", "\t", "|"])
def test_each_delimiter_is_sniffed(delimiter):
    head = delimiter.join(["a", "b", "c"]) + "\n" + delimiter.join(["1", "2", "3"]) + "\n"
    assert sniff_delimiter(head) == delimiter


def test_the_sniffer_prefers_the_delimiter_giving_consistent_fields_over_one_inside_values():
    # Semicolons split every line into 3; commas (decimal commas) split them unevenly.
    head = "region;amount;share\nnorth;1,5;0,25\nsouth;2;0,5\n"
    assert sniff_delimiter(head) == ";"


def test_a_quoted_delimiter_does_not_count():
    head = 'name,city\n"Smith; John",Berlin\n"Doe; Jane",Paris\n'
    assert sniff_delimiter(head) == ","


def test_a_single_column_falls_back_to_comma():
    assert sniff_delimiter("value\n1\n2\n") == ","


def test_a_semicolon_file_with_decimal_commas_reads_into_its_columns(ctx):
    table = read(ctx, "region;amount\nnorth;1,5\nsouth;2,25\n")
    assert table.column_names == ["region", "amount"]
    assert table.column("amount").to_pylist() == ["1,5", "2,25"]  # text: a comma is no decimal point to Arrow


def test_a_declared_delimiter_wins_over_the_sniffer(ctx):
    table = read(ctx, "a,b|c\n1,2|3\n", delimiter="|")
    assert table.column_names == ["a,b", "c"]


# --------------------------------------------------------------------------- headers and types


def test_without_a_header_columns_are_named_f0_f1(ctx):
    table = read(ctx, "1,x\n2,y\n", header=False)
    assert table.column_names == ["f0", "f1"] and table.num_rows == 2


def test_types_are_inferred_and_empty_cells_are_nulls(ctx):
    table = read(ctx, "n,x,s,b\n1,1.5,a,true\n,,,\n3,2,c,false\n")
    assert table.schema.types == [pa.int64(), pa.float64(), pa.string(), pa.bool_()]
    assert table.to_pydict() == {"n": [1, None, 3], "x": [1.5, None, 2.0], "s": ["a", None, "c"], "b": [True, None, False]}


def test_pinned_column_types_override_inference(ctx):
    table = read(ctx, "code,qty,day\n007,2,2026-11-30\n012,3,2026-12-01\n", columns={"code": "VARCHAR", "qty": "DOUBLE", "day": "DATE"})
    assert table.column("code").to_pylist() == ["007", "012"]  # leading zeros kept
    assert table.schema.field("qty").type == pa.float64()
    assert table.column("day").to_pylist() == [dt.date(2026, 11, 30), dt.date(2026, 12, 1)]


def test_a_value_that_does_not_fit_its_pinned_type_names_the_source_and_file(ctx):
    with pytest.raises(SourceError, match=r"^source 'f': cannot parse f\.csv"):
        read(ctx, "qty\n2\nmany\n", columns={"qty": "BIGINT"})


def test_a_row_with_too_many_fields_is_a_malformed_row(ctx):
    with pytest.raises(SourceError, match="malformed row"):
        read(ctx, "a,b\n1,2\n3,4,5\n")


def test_a_quoted_value_may_hold_a_newline(ctx):
    table = read(ctx, 'id,note\n1,"two\nlines"\n2,plain\n')
    assert table.column("note").to_pylist() == ["two\nlines", "plain"]


def test_a_missing_file_and_a_folder_are_reported_as_not_found(ctx):
    with pytest.raises(SourceError, match="file not found: nope.csv"):
        fetch({"name": "f", "type": "csv", "path": "nope.csv"}, ctx)
    (ctx.workspace_path / "dir.csv").mkdir()
    with pytest.raises(SourceError, match="file not found: dir.csv"):
        fetch({"name": "f", "type": "csv", "path": "dir.csv"}, ctx)


def test_an_empty_file_is_an_error_not_an_empty_table(ctx):
    with pytest.raises(SourceError, match="cannot parse f.csv"):
        read(ctx, "")


# --------------------------------------------------------------------------- dates


@pytest.mark.parametrize(
    "values,fmt,expected",
    [
        (["11/30/2026", "12/01/2026"], "%m/%d/%Y", [dt.date(2026, 11, 30), dt.date(2026, 12, 1)]),
        (["30-11-2026", "01-12-2026"], "%d-%m-%Y", [dt.date(2026, 11, 30), dt.date(2026, 12, 1)]),
        (["11/30/2026 01:05:00 PM"], "%m/%d/%Y %I:%M:%S %p", [dt.datetime(2026, 11, 30, 13, 5)]),
        (["11/30/26 13:05"], "%m/%d/%y %H:%M", [dt.datetime(2026, 11, 30, 13, 5)]),
    ],
)
def test_export_date_formats_become_dates_and_record_their_format(values, fmt, expected):
    table = parse_dates(pa.table({"d": values}))
    assert table.column("d").to_pylist() == expected
    assert table.schema.field("d").metadata == {DATE_FORMAT_KEY: fmt.encode()}


def test_a_column_with_one_value_that_is_no_date_stays_text():
    values = ["11/30/2026", "12/01/2026", "soon"]
    assert parse_dates(pa.table({"d": values})).column("d").to_pylist() == values


def test_an_impossible_date_keeps_the_column_text():
    values = ["11/30/2026", "13/45/2026"]  # no 13th month: not a US date after all
    assert parse_dates(pa.table({"d": values})).schema.field("d").type == pa.string()


def test_skipped_and_non_text_columns_are_left_alone():
    table = pa.table({"d": ["11/30/2026"], "n": [1]})
    assert parse_dates(table, skip={"d"}).equals(table)


def test_iso_dates_are_parsed_by_the_reader_itself(ctx):
    table = read(ctx, "day,when\n2026-11-30,2026-11-30 13:05:00\n")
    assert table.schema.field("day").type == pa.date32()
    assert table.column("when").to_pylist() == [dt.datetime(2026, 11, 30, 13, 5)]


# --------------------------------------------------------------------------- uploads


def test_an_upload_is_stored_by_content_and_read_by_its_reference(ctx):
    ref = store_upload(ctx.uploads_dir, "../../My Data (v2).csv", b"a,b\n1,2\n")
    assert ref.startswith("upload:") and "/" not in ref and ref.endswith("-My_Data__v2_.csv")
    same = store_upload(ctx.uploads_dir, "My Data (v2).csv", b"a,b\n1,2\n")
    other = store_upload(ctx.uploads_dir, "My Data (v2).csv", b"a,b\n3,4\n")
    assert same == ref and other != ref  # new content never replaces a file a source reads
    table = fetch({"name": "u", "type": "csv", "path": ref}, ctx)
    assert table.to_pydict() == {"a": [1], "b": [2]}
    assert len(list(ctx.uploads_dir.iterdir())) == 2


@pytest.mark.parametrize("ref", ["upload:../f.csv", "upload:sub/f.csv", "upload:.hidden"])
def test_an_upload_reference_cannot_leave_the_uploads_folder(ctx, ref):
    with pytest.raises(SourceError, match="invalid upload reference"):
        csv.resolve_path({"name": "u", "path": ref}, ctx)


def test_an_upload_reference_without_an_uploads_folder_is_refused(tmp_path):
    with pytest.raises(SourceError, match="invalid upload reference"):
        csv.resolve_path({"name": "u", "path": "upload:f.csv"}, FetchContext(workspace_path=tmp_path))


# --------------------------------------------------------------------------- big files: whole-file read unless memory is short


def test_a_big_file_is_parsed_whole_when_memory_allows_and_streamed_when_it_is_short(ctx, monkeypatch):
    """Streaming parses on one core (issue #14: 1.8x slower on 1M rows); it is kept for when memory is short.
    Both ways give the same table, dates, quoted newlines and all."""
    import pyarrow.csv as pacsv

    rows = ["id,amount,day,note"] + [f'{i},{i / 4},03/{i % 28 + 1:02d}/2024,"line {i}\nsecond"' for i in range(20_000)]
    (ctx.workspace_path / "big.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    size = (ctx.workspace_path / "big.csv").stat().st_size
    monkeypatch.setattr(csv, "STREAM_ABOVE_BYTES", size // 2)  # "big": a real 128 MB file would slow the suite
    streamed = []
    real_open_csv = pacsv.open_csv
    monkeypatch.setattr(pacsv, "open_csv", lambda *a, **k: streamed.append(1) or real_open_csv(*a, **k))

    source = {"name": "big", "type": "csv", "path": "big.csv"}
    monkeypatch.setattr(csv, "available_memory", lambda: 64 * size)
    whole = fetch(source, ctx)
    assert not streamed
    monkeypatch.setattr(csv, "available_memory", lambda: 2 * size)
    by_block = fetch(source, ctx)
    assert streamed
    assert whole.equals(by_block) and whole.num_rows == 20_000
    assert whole.schema.field("day").type == pa.date32() and whole.column("note")[7].as_py() == "line 7\nsecond"


def test_available_memory_is_read_from_the_system():
    assert 0 < csv.available_memory() < 1 << 50


# --------------------------------------------------------------------------- missing values and number formats


def test_text_keeps_sentinels_as_written_while_numbers_treat_them_as_missing(ctx):
    # "NA" is Namibia in a country column; in a number column it is a missing value.
    table = read(ctx, "country,answer,sales\nNA,n/a,10\nDE,,NA\nFR,yes,12\n")
    assert table.column("country").to_pylist() == ["NA", "DE", "FR"]
    assert table.column("answer").to_pylist() == ["n/a", None, "yes"]  # an empty cell is still missing
    assert table.column("sales").to_pylist() == [10, None, 12]


def test_declared_null_values_are_missing_in_every_column_and_unlock_numbers(ctx):
    text = "site,price,note\nBrno,-,n/a\nOlomouc,12.5,late\nZlin,#N/A,-\n"
    assert pa.types.is_string(read(ctx, text).schema.field("price").type)  # '-' is no number to Arrow
    table = read(ctx, text, null_values=["-", "n/a", "#N/A"])
    assert table.column("price").to_pylist() == [None, 12.5, None]
    assert table.column("note").to_pylist() == [None, "late", None]


def test_declared_null_values_replace_the_default_sentinels(ctx):
    table = read(ctx, "code,qty\nNA,1\nUS,-\n", null_values=["-"])
    assert table.column("code").to_pylist() == ["NA", "US"]
    assert table.column("qty").to_pylist() == [1, None]


def test_european_numbers_with_thousands_dots_and_decimal_commas(ctx):
    text = "region;amount;units;code\nnorth;1.234,56;1.200;007\nsouth;12,5;3;010\neast;-1.000.000,25;1.000.000;020\n"
    table = read(ctx, text, thousands=".", decimal=",")
    assert table.column("amount").to_pylist() == [1234.56, 12.5, -1000000.25]
    assert table.column("units").type == pa.int64() and table.column("units").to_pylist() == [1200, 3, 1000000]
    assert table.column("region").to_pylist() == ["north", "south", "east"]


def test_us_thousands_commas_in_quoted_values(ctx):
    table = read(ctx, 'item,revenue\nA,"1,234.50"\nB,"987"\nC,\n', thousands=",")
    assert table.column("revenue").to_pylist() == [1234.5, 987.0, None]


def test_a_column_with_one_value_that_is_not_a_grouped_number_stays_text(ctx):
    table = read(ctx, "id;amount\n1;1.234,5\n2;about 3\n", thousands=".", decimal=",")
    assert table.column("amount").to_pylist() == ["1.234,5", "about 3"]


def test_a_decimal_comma_alone_is_read_by_the_parser(ctx):
    table = read(ctx, "region;amount\nnorth;1,5\nsouth;2,25\n", decimal=",")
    assert table.column("amount").to_pylist() == [1.5, 2.25]


def test_a_pinned_number_column_with_thousands_converts_or_names_the_bad_value(ctx):
    table = read(ctx, "k;v\na;1.234\nb;5\n", thousands=".", decimal=",", columns={"v": "DOUBLE"})
    assert table.column("v").type == pa.float64() and table.column("v").to_pylist() == [1234.0, 5.0]
    with pytest.raises(SourceError, match=r"column 'v' is pinned to a number type, but holds 'lots'"):
        read(ctx, "k;v\na;1.234\nb;lots\n", thousands=".", decimal=",", columns={"v": "DOUBLE"})


def test_the_same_mark_for_thousands_and_decimal_is_refused(ctx):
    with pytest.raises(SourceError, match="thousands and decimal are both ','"):
        read(ctx, "a\n1\n", thousands=",", decimal=",")


def test_the_settings_are_validated_by_the_schema_naming_line_and_field():
    from lib.memory.schemas import validate_document
    from lib.memory.yamlio import parse

    def errors(settings: str) -> list:
        text = f"sources:\n  - name: f\n    type: csv\n    path: f.csv\n{settings}"
        return [d for d in validate_document("sources", parse(text), "sources.yaml") if d.level == "error"]

    assert errors("    null_values: ['-', n/a]\n    thousands: '.'\n    decimal: ','\n") == []
    for bad, field in (("null_values: '-'", "null_values"), ("null_values: ['']", "null_values"), ("thousands: x", "thousands"), ("decimal: ';'", "decimal")):
        found = errors(f"    {bad}\n")
        assert found and found[0].line == 5 and field in (found[0].field or ""), (bad, found)


# --------------------------------------------------------------------------- uploads, within their caps


def test_an_upload_is_read_within_the_caps_and_stopped_at_them(ctx):
    rows = ["id,amount,day,note"] + [f'{i},{i / 4},03/{i % 28 + 1:02d}/2024,"line {i}\nsecond"' for i in range(20_000)]
    (ctx.workspace_path / "big.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    source = {"name": "big", "type": "csv", "path": "big.csv"}
    size = (ctx.workspace_path / "big.csv").stat().st_size

    def upload(rows: int = 2_000_000, size: int = 256 << 20) -> pa.Table:
        return fetch(source, FetchContext(workspace_path=ctx.workspace_path, limits=UploadLimits(rows=rows, bytes=size)))

    assert upload().equals(fetch(source, ctx))  # within the caps: the same table, dates and quoted newlines and all
    with pytest.raises(SourceError, match=r"^source 'big': big.csv has more than 1,000 rows; uploads are limited to 1,000 rows \(DASHMEM_UPLOAD_MAX_ROWS\)$"):
        upload(rows=1_000)
    with pytest.raises(SourceError, match=rf"big.csv is {re.escape(size_text(size))} of text; uploads are limited to 64 KB \(DASHMEM_UPLOAD_MAX_BYTES\)"):
        upload(size=64 << 10)
    # One-digit lines: a file of a few MB, four times its size once parsed, stopped at the cap while parsing.
    (ctx.workspace_path / "big.csv").write_text("n\n" + "1\n" * 2_000_000, encoding="utf-8")
    with pytest.raises(SourceError, match=r"big.csv is more than 4 MB of data once decoded; uploads are limited to 4 MB"):
        upload(rows=10_000_000, size=4 << 20)


def test_a_compressed_upload_is_never_decompressed_by_its_name(ctx):
    # A path ending .gz is decompressed by the parser; an upload's bytes are read as they are.
    # gzip's header holds a time: whatever its bytes, the upload is refused as what it is, not as a broken row.
    for mtime in (0, 1_796_181_548, 2_000_000_000):  # the middle one's header bytes broke a row before the UTF-8 check
        (ctx.workspace_path / "f.csv.gz").write_bytes(gzip.compress(b"n\n" + b"1\n" * 100_000, mtime=mtime))
        source = {"name": "f", "type": "csv", "path": "f.csv.gz"}
        assert fetch(source, ctx).num_rows == 100_000  # a source of the workspace, as before
        with pytest.raises(SourceError, match=r"f.csv.gz is not UTF-8 text"):
            fetch(source, FetchContext(workspace_path=ctx.workspace_path, limits=UploadLimits(rows=2_000_000, bytes=256 << 20)))
