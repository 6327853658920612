"""What every connector shares (lib/data/connectors/base.py): secrets by reference and their redaction, files
confined to allowed folders, JSON paths, JSON rows (objects, or arrays with their column names) as one Arrow
table with ISO dates as dates, what an answer says about being truncated, and the note a fetch leaves."""

from __future__ import annotations

import datetime as dt
import json
import os

import pyarrow as pa
import pytest

from lib.data.connectors import base, csv_source
from lib.data.connectors.base import (
    FetchContext,
    SourceError,
    column_names,
    confined_path,
    dig,
    fetch_note,
    flatten,
    parse_iso_dates,
    records_to_table,
    to_arrow_column,
    truncation,
    with_note,
)


@pytest.fixture
def ctx(tmp_path):
    (tmp_path / "ws").mkdir()
    return FetchContext(workspace_path=tmp_path / "ws")


# --------------------------------------------------------------------------- errors and secrets


def test_a_source_error_names_the_source():
    error = SourceError("orders", "timed out")
    assert str(error) == "source 'orders': timed out" and error.source == "orders"
    assert isinstance(error, RuntimeError)


def test_a_secret_resolves_by_reference_and_is_redacted_from_later_errors(ctx, monkeypatch):
    monkeypatch.setenv("SHOP_TOKEN", "Bearer tok-123456")
    assert ctx.secret("shop", "env:SHOP_TOKEN") == "Bearer tok-123456"
    error = ctx.error("shop", "401 for Bearer tok-123456; the server said: bad token tok-123456")
    assert str(error) == "source 'shop': 401 for ***; the server said: bad token ***"


def test_a_missing_secret_is_a_source_error_naming_the_reference_only(ctx, monkeypatch):
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    with pytest.raises(SourceError, match=r"^source 'shop': secret env:NOT_SET_ANYWHERE is not set"):
        ctx.secret("shop", "env:NOT_SET_ANYWHERE")
    assert ctx.resolved == []


def test_the_apps_own_credentials_are_no_source_secret(ctx, monkeypatch):
    monkeypatch.setenv("DASHMEM_COOKIE_KEY", "k" * 40)
    with pytest.raises(SourceError) as refused:
        ctx.secret("shop", "env:DASHMEM_COOKIE_KEY")
    assert "k" * 40 not in str(refused.value) and ctx.resolved == []


def test_a_literal_in_place_of_a_reference_is_refused_without_repeating_it(ctx):
    with pytest.raises(SourceError) as refused:
        ctx.secret("shop", "hunter2-password")
    assert "hunter2" not in str(refused.value)


def test_errors_before_any_secret_are_unchanged(ctx):
    assert str(ctx.error("s", "plain message")) == "source 's': plain message"


# --------------------------------------------------------------------------- files a source may read


def test_relative_paths_inside_the_workspace_are_allowed(ctx):
    (ctx.workspace_path / "data").mkdir()
    assert confined_path("s", "data/x.csv", ctx) == (ctx.workspace_path / "data" / "x.csv").resolve()


@pytest.mark.parametrize("raw", ["../secret.csv", "data/../../secret.csv", "/etc/passwd"])
def test_paths_outside_the_workspace_are_refused_with_the_setting_to_allow_them(ctx, raw, monkeypatch):
    monkeypatch.delenv("DASHMEM_DATA_DIRS", raising=False)
    with pytest.raises(SourceError, match="outside the workspace folder; list its folder in DASHMEM_DATA_DIRS"):
        confined_path("s", raw, ctx)


def test_a_symlink_out_of_the_workspace_is_judged_by_where_it_leads(ctx, tmp_path, monkeypatch):
    monkeypatch.delenv("DASHMEM_DATA_DIRS", raising=False)
    (tmp_path / "outside.csv").write_text("a\n1\n")
    os.symlink(tmp_path / "outside.csv", ctx.workspace_path / "link.csv")
    with pytest.raises(SourceError, match="outside the workspace"):
        confined_path("s", "link.csv", ctx)


def test_folders_listed_in_dashmem_data_dirs_are_allowed_and_only_they(ctx, tmp_path, monkeypatch):
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared-not").mkdir()
    (tmp_path / "other").mkdir()
    monkeypatch.setenv("DASHMEM_DATA_DIRS", os.pathsep.join([str(tmp_path / "other"), str(tmp_path / "shared")]))
    assert confined_path("s", str(tmp_path / "shared" / "x.csv"), ctx) == tmp_path / "shared" / "x.csv"
    with pytest.raises(SourceError):  # a sibling whose name starts the same is not inside
        confined_path("s", str(tmp_path / "shared-not" / "x.csv"), ctx)


def test_refused_host_is_the_first_look_by_name(monkeypatch):
    monkeypatch.delenv("DASHMEM_HTTP_ALLOW", raising=False)
    assert "metadata" in (base.refused_host("metadata.google.internal") or "")
    assert "169.254.169.254" in (base.refused_host("169.254.169.254") or "")
    assert base.refused_host("api.example.com") is None  # its addresses are checked when connecting
    monkeypatch.setenv("DASHMEM_HTTP_ALLOW", "*.example.org")
    assert "DASHMEM_HTTP_ALLOW" in (base.refused_host("api.example.com") or "")
    assert base.refused_host("api.example.org") is None


# --------------------------------------------------------------------------- JSON


DATA = {"data": {"items": [{"id": 1}, {"id": 2}]}, "results": [{"rows": ["r"]}]}


@pytest.mark.parametrize(
    "path,expected",
    [
        ("", DATA),
        (None, DATA),
        ("data.items", [{"id": 1}, {"id": 2}]),
        ("data.items.1.id", 2),
        ("results.0.rows", ["r"]),
        ("data.items.5", None),  # past the end
        ("data.missing.deeper", None),
        ("data.items.x", None),  # a name into a list
        ("results.0.rows.0.more", None),  # into a string
    ],
)
def test_dig_follows_a_dotted_path(path, expected):
    assert dig(DATA, path) == expected


def test_flatten_joins_nested_names_and_keeps_lists_as_json_text():
    record = {"id": 1, "address": {"city": "London", "geo": {"lat": 51.5}}, "tags": ["b", {"z": 1, "a": 2}], "n": None}
    flat = flatten(record)
    assert list(flat) == ["id", "address_city", "address_geo_lat", "tags", "n"]
    assert flat["address_geo_lat"] == 51.5 and flat["n"] is None
    assert json.loads(flat["tags"]) == ["b", {"a": 2, "z": 1}] and flat["tags"] == '["b", {"a": 2, "z": 1}]'


def test_records_with_differing_keys_become_one_table_in_first_seen_order():
    table = records_to_table([{"a": 1, "nested": {"x": "p"}}, {"b": True, "a": 2}, {"nested": {"y": 3}}])
    assert table.column_names == ["a", "nested_x", "b", "nested_y"]
    assert table.to_pydict() == {"a": [1, 2, None], "nested_x": ["p", None, None], "b": [None, True, None], "nested_y": [None, None, 3]}
    assert table.schema.field("a").type == pa.int64() and table.schema.field("b").type == pa.bool_()


def test_a_column_mixing_numbers_and_text_becomes_text_in_jsons_spelling():
    table = records_to_table([{"v": 1.5}, {"v": "n/a"}, {"v": True}, {"v": None}])
    assert table.schema.field("v").type == pa.string()
    assert table.column("v").to_pylist() == ["1.5", "n/a", "true", None]


def test_records_that_are_not_objects_are_a_value_column_and_none_is_an_empty_table():
    assert records_to_table([1, 2]).to_pydict() == {"value": [1, 2]}
    assert records_to_table([]).num_columns == 0


def test_to_arrow_column_keeps_arrows_type_when_it_can():
    assert to_arrow_column([1, None, 3]).type == pa.int64()
    assert to_arrow_column([1, 2**70]).type == pa.string()  # too big for any integer type: text, not a failure
    assert to_arrow_column([1, 2**70]).to_pylist() == ["1", str(2**70)]


# --------------------------------------------------------------------------- rows that are arrays


def test_array_rows_are_zipped_with_their_column_names_in_order():
    table = records_to_table([[1, "Ada", {"city": "London"}], [2, "Grace", {"city": "Arlington"}]], columns=["id", "name", "address"])
    assert table.column_names == ["id", "name", "address_city"]  # a nested object flattens as in an object row
    assert table.to_pylist() == [{"id": 1, "name": "Ada", "address_city": "London"}, {"id": 2, "name": "Grace", "address_city": "Arlington"}]


def test_array_rows_without_column_names_are_refused_never_stored_as_a_column_of_arrays():
    with pytest.raises(SourceError, match=r"^source 'gdp': row 1 is an array of values and no column names came with it; set columns_path"):
        records_to_table([[1, "a"], [2, "b"]], source="gdp")


def test_an_array_row_of_the_wrong_length_is_refused_naming_the_row():
    with pytest.raises(SourceError, match=r"row 2 has 1 values for 2 columns \(id, name\)"):
        records_to_table([[1, "a"], [2]], source="gdp", columns=["id", "name"])


def test_repeated_column_names_are_made_distinct_and_no_rows_keep_the_columns():
    assert records_to_table([[1, 2]], columns=["n", "n"]).column_names == ["n", "n_2"]
    assert records_to_table([], columns=["id", "name"]).column_names == ["id", "name"]
    assert records_to_table([{"a": 1}], columns=["x", "y"]).column_names == ["a"]  # objects name their own columns


@pytest.mark.parametrize(
    ("listed", "names"),
    [
        (["age", "workclass"], ["age", "workclass"]),
        ([{"name": "age", "type": "INTEGER"}, {"name": "workclass"}], ["age", "workclass"]),
        ([], None),
        ("age", None),
        ([{"type": "INTEGER"}], None),
        ([True], None),
    ],
)
def test_column_names_are_strings_or_objects_with_a_name(listed, names):
    assert column_names(listed) == names


# --------------------------------------------------------------------------- ISO dates and timestamps in JSON text

DATES_AS_TEXT = {
    "day": ["2024-01-31", "2024-02-29", None],
    "moment": ["2024-01-31 10:00:00", "2024-02-29T23:59:59", None],
    "zoned": ["2024-01-31T10:00:00Z", "2024-02-29T23:59:59+02:00", None],
}


def test_iso_dates_and_timestamps_in_json_text_get_the_types_a_csv_gets(tmp_path):
    table = records_to_table([dict(zip(DATES_AS_TEXT, values)) for values in zip(*DATES_AS_TEXT.values())])
    lines = [",".join(DATES_AS_TEXT)] + [",".join(v or "" for v in values) for values in zip(*DATES_AS_TEXT.values())]
    (tmp_path / "same.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    from_csv = csv_source.fetch({"name": "same", "path": "same.csv"}, FetchContext(workspace_path=tmp_path))
    assert table.schema.types == from_csv.schema.types == [pa.date32(), pa.timestamp("s"), pa.timestamp("s", "UTC")]
    assert table.to_pylist() == from_csv.to_pylist()


@pytest.mark.parametrize(
    ("values", "kind"),
    [
        (["2024-01-31T10:00:00.25", "2024-01-31"], pa.timestamp("us")),  # fractions of a second, and a day among moments
        (["2024-01-31", ""], pa.date32()),  # empty text in a date column is a missing date
        (["2024-01-31", "soon"], pa.string()),
        (["2024-13-45"], pa.string()),  # shaped like a date, but no date
        (["2024-01-31T10:00:00Z", "2024-01-31T10:00:00"], pa.string()),  # zoned beside naive: no one type
        (["20240131"], pa.string()),
        (["", None], pa.string()),
    ],
)
def test_a_text_column_becomes_dates_only_when_every_value_is_one(values, kind):
    assert records_to_table([{"v": v} for v in values]).schema.field("v").type == kind


def test_empty_text_becomes_a_missing_date_and_pinned_columns_stay_text():
    assert records_to_table([{"d": "2024-01-31"}, {"d": ""}]).column("d").to_pylist() == [dt.date(2024, 1, 31), None]
    table = parse_iso_dates(pa.table({"d": ["2024-01-31"], "e": ["2024-01-31"]}), keep_text={"e"})
    assert table.schema.field("d").type == pa.date32() and table.schema.field("e").type == pa.string()


# --------------------------------------------------------------------------- truncation and notes


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ({"truncated": True, "rows": []}, "truncated: true"),
        ({"truncated": True, "warning": "Results limited to 922 rows.\n Use LIMIT"}, "truncated: true, 'Results limited to 922 rows. Use LIMIT'"),
        ({"truncated": "true", "message": "cut"}, "truncated: true, 'cut'"),
        ({"truncated": False, "warning": "slow query"}, None),
        ({"rows": []}, None),
        ([{"truncated": True}], None),  # a record's field, not the answer's
    ],
)
def test_truncation_is_what_the_answer_says_about_being_cut_short(answer, said):
    assert truncation(answer) == said


def test_notes_add_up_in_the_tables_metadata():
    table = pa.table({"a": [1]})
    assert fetch_note(table) is None
    noted = with_note(with_note(table, "first"), "second")
    assert fetch_note(noted) == "first; second" and noted.equals(table)
