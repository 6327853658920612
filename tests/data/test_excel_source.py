"""The `excel` connector (lib/data/connectors/excel_source.py): real .xlsx workbooks written with openpyxl,
sheets, types as Excel stores them, placeholders, and damaged, encrypted and oversized files."""

from __future__ import annotations

import datetime as dt
import zipfile

import openpyxl
import pyarrow as pa
import pytest

from lib.data.connectors import excel_source, file_type
from lib.data.connectors.base import FetchContext, SourceError, fetch


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
    workbook(ctx.workspace_path / "budget.xlsx", {"Big": [[f"c{i}" for i in range(10)]] + [list(range(10))] * 200})
    with pytest.raises(SourceError, match=r"sheet 'Big' of budget.xlsx has more than 1,000 cells .*export it as CSV"):
        read(ctx)


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
