"""The `excel` connector (lib/data/connectors/excel_source.py): real .xlsx workbooks written with openpyxl,
sheets, types as Excel stores them, placeholders, and damaged, encrypted and oversized files; uploads refused by
their archive and their sheet's dimension past the upload caps, before openpyxl parses them."""

from __future__ import annotations

import datetime as dt
import re
import time
import zipfile

import openpyxl
import pyarrow as pa
import pytest

from lib.data.connectors import excel_source, file_type
from lib.data.connectors.base import FetchContext, SourceError, UploadLimits, fetch, size_text


@pytest.fixture
def ctx(tmp_path):
    return FetchContext(workspace_path=tmp_path, uploads_dir=tmp_path / "uploads")


def workbook(path, sheets: dict[str, list[list]]):
    book = openpyxl.Workbook()
    assert book.active is not None  # a new workbook has one sheet
    book.remove(book.active)
    for title, rows in sheets.items():
        sheet = book.create_sheet(title)
        for row in rows:
            sheet.append(row)
    book.save(path)
    return path


def read(ctx, **settings) -> pa.Table:
    return fetch({"name": "budget", "type": "excel", "path": "budget.xlsx", **settings}, ctx)


BUDGET = [
    ["Region", "Month", "Plan", "Actual", "Approved", 2026],
    ["North", dt.datetime(2026, 1, 1), 1200, 1180.5, True, "a"],
    ["South", dt.datetime(2026, 2, 1), 900, None, False, "b"],
    ["East", dt.datetime(2026, 3, 1), 1500, 1620.25, True, None],
]


def test_the_first_sheet_with_excel_types(ctx):
    workbook(ctx.workspace_path / "budget.xlsx", {"Budget": BUDGET, "Notes": [["text"], ["hello"]]})
    table = read(ctx)
    assert table.column_names == ["Region", "Month", "Plan", "Actual", "Approved", "2026"]
    assert table.column("Month").type == pa.date32()  # midnight date-times are the dates Excel shows
    assert table.column("Month").to_pylist()[0] == dt.date(2026, 1, 1)
    assert table.column("Plan").to_pylist() == [1200, 900, 1500]
    assert table.column("Actual").to_pylist() == [1180.5, None, 1620.25]
    assert table.column("Approved").to_pylist() == [True, False, True]


def test_a_named_sheet_and_a_missing_one(ctx):
    workbook(ctx.workspace_path / "budget.xlsx", {"Budget": BUDGET, "Notes": [["text"], ["hello"]]})
    assert read(ctx, sheet="Notes").column("text").to_pylist() == ["hello"]
    with pytest.raises(SourceError, match=r"budget.xlsx has no sheet '2027'; its sheets are 'Budget', 'Notes'"):
        read(ctx, sheet="2027")


def test_numbers_mixed_with_text_become_text_and_null_values_unlock_them(ctx):
    rows = [["site", "units"], ["Brno", 12], ["Zlin", "-"], ["Olomouc", "n/a"], ["Ostrava", 7], ["Jihlava", "  "]]
    workbook(ctx.workspace_path / "budget.xlsx", {"S": rows})
    assert read(ctx).column("units").to_pylist() == ["12", "-", "n/a", "7", None]
    assert read(ctx, null_values=["-", "n/a"]).column("units").to_pylist() == [12, None, None, 7, None]


def test_empty_rows_and_unused_columns_at_the_edges_are_dropped_and_names_made_unique(ctx):
    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.append(["id", "id", None, "note"])
    sheet.append([1, 2, None, "x"])
    sheet.append([None, None, None, None])
    sheet.append([3, 4, None, None])
    sheet["F10"].number_format = "0.00"  # formatted, never filled
    book.save(ctx.workspace_path / "budget.xlsx")
    table = read(ctx)
    assert table.column_names == ["id", "id_2", "note"]
    assert table.num_rows == 2


def test_formulas_give_the_value_excel_last_computed(ctx, tmp_path):
    # openpyxl writes no computed values: a workbook saved by Excel has them. Write the cached value by hand.
    path = workbook(ctx.workspace_path / "budget.xlsx", {"S": [["a", "b"], [1, 2]]})
    book = openpyxl.load_workbook(path)
    assert book.active is not None
    book.active["B2"] = "=A2*2"
    book.save(path)
    assert read(ctx).column("b").to_pylist() == [None]  # never computed: missing, not the formula's text


def test_a_corrupt_workbook_is_a_clear_error(ctx):
    path = workbook(ctx.workspace_path / "budget.xlsx", {"S": BUDGET})
    path.write_bytes(path.read_bytes()[:2000])  # cut off mid-archive
    with pytest.raises(SourceError, match=r"budget.xlsx is not a readable .xlsx workbook .*open and save it again in Excel"):
        read(ctx)


def test_a_zip_that_is_no_workbook_and_a_text_file_named_xlsx(ctx):
    with zipfile.ZipFile(ctx.workspace_path / "budget.xlsx", "w") as archive:
        archive.writestr("hello.txt", "not a workbook")
    with pytest.raises(SourceError, match="is not a readable .xlsx workbook"):
        read(ctx)
    (ctx.workspace_path / "budget.xlsx").write_text("a,b\n1,2\n")
    with pytest.raises(SourceError, match=r"is not an .xlsx workbook \(an .xlsx file is a zip archive"):
        read(ctx)


def test_a_damaged_sheet_inside_a_sound_archive(ctx):
    path = workbook(ctx.workspace_path / "budget.xlsx", {"S": BUDGET})
    parts = {}
    with zipfile.ZipFile(path) as archive:
        for item in archive.namelist():
            parts[item] = archive.read(item)
    parts["xl/worksheets/sheet1.xml"] = parts["xl/worksheets/sheet1.xml"][:300]
    with zipfile.ZipFile(path, "w") as archive:
        for item, data in parts.items():
            archive.writestr(item, data)
    with pytest.raises(SourceError, match=r"(sheet 'S' of budget.xlsx is damaged|not a readable .xlsx workbook)"):
        read(ctx)


def _compound_file(*streams: str) -> bytes:
    """The start of an OLE compound file whose directory names these streams (UTF-16), as Office writes them."""
    header = excel_source._CFB_MAGIC + bytes(504)
    directory = b"".join(name.encode("utf-16-le").ljust(64, b"\0") + bytes(64) for name in ("Root Entry", *streams))
    return header + directory + bytes(4096)


def test_a_password_protected_workbook_and_an_old_xls_say_what_to_do(ctx):
    (ctx.workspace_path / "budget.xlsx").write_bytes(_compound_file("EncryptionInfo", "EncryptedPackage"))
    with pytest.raises(SourceError, match="protected by a password.*save a copy without the password"):
        read(ctx)
    (ctx.workspace_path / "budget.xlsx").write_bytes(_compound_file("Workbook", "SummaryInformation"))
    with pytest.raises(SourceError, match=r"old-style .xls workbook; save it as .xlsx"):
        read(ctx)


def test_a_huge_sheet_is_refused_before_it_fills_memory(ctx, monkeypatch):
    monkeypatch.setattr(excel_source, "MAX_CELLS", 1_000)
    path = workbook(ctx.workspace_path / "budget.xlsx", {"Big": [[f"c{i}" for i in range(10)]] + [list(range(10))] * 200})
    with pytest.raises(
        SourceError, match=r"sheet 'Big' of budget.xlsx has 2,010 cells by its dimension \(A1:J201: 201 rows of 10 columns\), more than the 1,000"
    ):
        read(ctx)
    without_dimension(path)  # then the cells are counted as they are read
    with pytest.raises(SourceError, match=r"sheet 'Big' of budget.xlsx has more than 1,000 cells .*export it as CSV"):
        read(ctx)


def without_dimension(path, dimension: str | None = None):
    """The workbook with its sheets' `<dimension>` taken out, or replaced by one saying `dimension`."""
    with zipfile.ZipFile(path) as archive:
        parts = {item: archive.read(item) for item in archive.namelist()}
    for item in parts:
        if item.startswith("xl/worksheets/sheet"):
            parts[item] = re.sub(rb"<dimension [^>]*/>", f'<dimension ref="{dimension}"/>'.encode() if dimension else b"", parts[item])
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for item, data in parts.items():
            archive.writestr(item, data)
    return path


_PARTS = {
    "[Content_Types].xml": '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/>'
    '<Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
    '<Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/></Types>',
    "_rels/.rels": '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>',
    "xl/workbook.xml": '<?xml version="1.0" encoding="UTF-8"?><workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" '
    'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="Data" sheetId="1" r:id="rId1"/></sheets></workbook>',
    "xl/_rels/workbook.xml.rels": '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/></Relationships>',
}


def big_sheet(path, rows: int, columns: int, dimension: str | None):
    """A workbook of one sheet of `rows` x `columns` numbers, its XML written straight into the archive (openpyxl
    would take minutes), with the `<dimension>` given (true, false, or none)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for item, text in _PARTS.items():
            archive.writestr(item, text)
        with archive.open("xl/worksheets/sheet1.xml", "w", force_zip64=True) as sheet:
            sheet.write(b'<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">')
            sheet.write(f'<dimension ref="{dimension}"/>'.encode() if dimension else b"")
            sheet.write(b"<sheetData>")
            row = b"<row>" + b"<c><v>1</v></c>" * columns + b"</row>"
            for start in range(0, rows, 1000):
                sheet.write(row * min(1000, rows - start))
            sheet.write(b"</sheetData></worksheet>")
    return path


def upload_ctx(ctx, rows: int = 2_000_000, size: int = 256 << 20) -> FetchContext:
    return FetchContext(workspace_path=ctx.workspace_path, limits=UploadLimits(rows=rows, bytes=size))


def test_a_sheet_over_the_cell_cap_is_refused_by_its_dimension_before_parsing(ctx):
    # 7.8 million cells, under 1 MB on disk: parsing took openpyxl 20-90 s before the cell count stopped it.
    rows, columns = 300_000, 26
    big_sheet(ctx.workspace_path / "budget.xlsx", rows, columns, f"A1:Z{rows}")
    started = time.perf_counter()
    with pytest.raises(
        SourceError, match=rf"sheet 'Data' of budget.xlsx has {rows * columns:,} cells by its dimension \(A1:Z{rows}: {rows:,} rows of 26 columns\)"
    ):
        read(ctx)
    assert time.perf_counter() - started < 2


@pytest.mark.parametrize("dimension", [None, "A1:B2"], ids=["no dimension", "a false one"])
def test_an_uploaded_sheet_is_refused_by_the_cells_in_its_xml_whatever_its_dimension_says(ctx, dimension):
    rows, columns = 300_000, 26
    big_sheet(ctx.workspace_path / "budget.xlsx", rows, columns, dimension)
    started = time.perf_counter()
    with pytest.raises(SourceError, match=rf"sheet 'Data' of budget.xlsx has {rows * columns:,} cells in its XML, more than the 5,000,000"):
        fetch({"name": "budget", "type": "excel", "path": "budget.xlsx"}, upload_ctx(ctx))
    assert time.perf_counter() - started < 2


def test_an_upload_that_unzips_past_the_byte_cap_is_refused_before_opening(ctx):
    path = big_sheet(ctx.workspace_path / "budget.xlsx", 100_000, 10, None)
    with zipfile.ZipFile(path) as archive:
        unzipped = sum(member.file_size for member in archive.infolist())
    assert path.stat().st_size < (4 << 20) < unzipped
    with pytest.raises(
        SourceError, match=rf"budget.xlsx is {re.escape(size_text(unzipped))} once unzipped; uploads are limited to 4 MB \(DASHMEM_UPLOAD_MAX_BYTES\)"
    ):
        fetch({"name": "budget", "type": "excel", "path": "budget.xlsx"}, upload_ctx(ctx, size=4 << 20))


def test_an_uploads_rows_are_capped_by_its_dimension_and_while_it_is_read(ctx):
    path = workbook(ctx.workspace_path / "budget.xlsx", {"S": [["n"]] + [[i] for i in range(200)]})
    source = {"name": "budget", "type": "excel", "path": "budget.xlsx"}
    with pytest.raises(SourceError, match=r"sheet 'S' of budget.xlsx has 201 rows; uploads are limited to 100 rows \(DASHMEM_UPLOAD_MAX_ROWS\)"):
        fetch(source, upload_ctx(ctx, rows=100))
    without_dimension(path)
    with pytest.raises(SourceError, match=r"sheet 'S' of budget.xlsx has more than 100 rows; uploads are limited to 100 rows"):
        fetch(source, upload_ctx(ctx, rows=100))
    assert fetch(source, upload_ctx(ctx, rows=201)).num_rows == 200  # the header is a row of the sheet, not of the table


def test_an_upload_within_the_caps_reads_as_the_source_does(ctx):
    workbook(ctx.workspace_path / "budget.xlsx", {"Notes": [["x"]], "Plan": BUDGET})
    source = {"name": "budget", "type": "excel", "path": "budget.xlsx", "sheet": "Plan"}
    assert fetch(source, upload_ctx(ctx)).equals(fetch(source, ctx))
    first = {"name": "budget", "type": "excel", "path": "budget.xlsx"}  # the first sheet, found in the workbook's index as openpyxl finds it
    assert fetch(first, upload_ctx(ctx)).equals(fetch(first, ctx))


def test_missing_files_empty_sheets_and_paths_outside_the_workspace(ctx, tmp_path):
    with pytest.raises(SourceError, match="file not found: budget.xlsx"):
        read(ctx)
    workbook(ctx.workspace_path / "budget.xlsx", {"Empty": []})
    with pytest.raises(SourceError, match="sheet 'Empty' of budget.xlsx is empty"):
        read(ctx)
    outside = workbook(tmp_path.parent / "elsewhere.xlsx", {"S": BUDGET})
    with pytest.raises(SourceError, match="outside the workspace folder"):
        fetch({"name": "budget", "type": "excel", "path": str(outside)}, ctx)


def test_an_uploaded_workbook_is_read_by_its_reference(ctx):
    from lib.data.connectors.csv_source import store_upload

    path = workbook(ctx.workspace_path / "local.xlsx", {"S": BUDGET})
    ref = store_upload(ctx.uploads_dir, "budget.xlsx", path.read_bytes())
    assert fetch({"name": "b", "type": "excel", "path": ref}, ctx).num_rows == 3


def test_file_types_are_found_by_their_ending():
    assert [file_type(n) for n in ("a.CSV", "b.xlsx", "c.parquet", "d.xls", "e")] == ["csv", "excel", "parquet", None, None]


def test_a_date_column_stored_as_text_is_read_as_the_same_csv_reads_it(ctx):
    """Issue #31, 13: dates typed (or exported) into a sheet as text ('2024-01-31') are dates, as in the CSV."""
    rows = [
        ["day", "moment", "us_day", "site", "orders", "note"],
        ["2024-01-31", "2024-01-31 08:30:00", "01/31/2024", "Brno", 12, "2024-01-31 or so"],
        ["2024-02-01", "2024-02-01 17:05:00", "02/01/2024", "Porto", 7, "later"],
        ["", None, None, "Lyon", 3, None],
    ]
    workbook(ctx.workspace_path / "budget.xlsx", {"Orders": rows})
    text = "\n".join(",".join("" if v is None else str(v) for v in row) for row in rows) + "\n"
    (ctx.workspace_path / "budget.csv").write_text(text, encoding="utf-8")
    sheet = read(ctx)
    as_csv = fetch({"name": "budget", "type": "csv", "path": "budget.csv"}, ctx)
    assert sheet.schema.types == as_csv.schema.types, (sheet.schema, as_csv.schema)
    assert sheet.column("day").type == pa.date32() and sheet.column("moment").type == pa.timestamp("s")
    assert sheet.column("day").to_pylist() == as_csv.column("day").to_pylist() == [dt.date(2024, 1, 31), dt.date(2024, 2, 1), None]
    assert sheet.column("us_day").to_pylist() == as_csv.column("us_day").to_pylist()
    assert sheet.column("note").type == pa.string()  # text that only starts like a date stays text
    # A column pinned to text keeps the text as written.
    pinned = read(ctx, columns={"day": "VARCHAR"})
    assert pinned.column("day").to_pylist()[:2] == ["2024-01-31", "2024-02-01"]
