"""Reading a tool's answer into a table: each text and data shape real servers send, typed, and heard when cut short.

The texts here are written the way the servers of tests/data/test_mcp_servers.py write them (str() of a
list of dicts or tuples, mcp-alchemy's blocks, motherduck's JSON), small enough to assert values.
"""

from __future__ import annotations

import ast
import datetime as dt
import decimal
import json

import pyarrow as pa
import pytest

from lib.data.connectors import result_text
from lib.data.connectors.result_text import FORMATS, NotRows, Reading, from_texts, from_value, literal
from lib.memory import schemas

ROWS = [{"country": "Chad", "year": 2020, "gdp": 10.5}, {"country": "Peru", "year": 2021, "gdp": None}]
TYPES = {"country": pa.string(), "year": pa.int64(), "gdp": pa.float64()}


def read(text: str, **reading) -> result_text.Rows:
    return from_texts([text], Reading(**reading))


def assert_rows(rows: result_text.Rows, expected=ROWS, types=TYPES) -> None:
    assert rows.table.to_pylist() == expected
    assert {field.name: field.type for field in rows.table.schema} == types


# --- each format, guessed ---------------------------------------------------------------------------------


def markdown_of(rows: list[dict]) -> str:
    header = list(rows[0])
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join("" if row[k] is None else str(row[k]) for k in header) + " |" for row in rows]
    return "\n".join(lines)


def key_value_of(rows: list[dict]) -> str:
    blocks = ["\n".join([f"{i}. row", *(f"{k}: {'NULL' if v is None else v}" for k, v in row.items())]) for i, row in enumerate(rows, 1)]
    return "\n\n".join(blocks) + f"\n\nResult: {len(rows)} rows"


def delimited(rows: list[dict], delimiter: str) -> str:
    return "\n".join([delimiter.join(rows[0]), *(delimiter.join("" if v is None else str(v) for v in row.values()) for row in rows)])


SHAPES = {
    "json": json.dumps(ROWS),
    "json-wrapped": json.dumps({"data": ROWS, "count": 2}),
    "json-in-json": json.dumps(json.dumps(ROWS)),
    "columns-and-rows": json.dumps({"success": True, "columns": list(ROWS[0]), "rows": [list(r.values()) for r in ROWS], "rowCount": 2}),
    "column-descriptions": json.dumps({"schema": [{"name": k, "type": "?"} for k in ROWS[0]], "data": [list(r.values()) for r in ROWS]}),
    "python-dicts": str(ROWS),
    "markdown": "Query results:\n\n" + markdown_of(ROWS) + "\n\n2 rows",
    "key-value": key_value_of(ROWS),
    "csv": delimited(ROWS, ","),
    "tsv": delimited(ROWS, "\t"),
}
FORMAT_OF = {
    "json-wrapped": "json",
    "json-in-json": "json",
    "columns-and-rows": "json",
    "column-descriptions": "json",
    "python-dicts": "python",
    "key-value": "key_value",
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_every_shape_real_servers_send_is_read_into_the_same_typed_rows(shape):
    rows = read(SHAPES[shape])

    assert_rows(rows)
    assert rows.format == FORMAT_OF.get(shape, shape) and rows.truncated is None


def test_rows_as_arrays_are_never_stored_as_a_column_of_arrays():
    with pytest.raises(NotRows, match="arrays without column names; name them with column_names"):
        read(str([tuple(r.values()) for r in ROWS]))  # mcp-server-duckdb: a literal of tuples

    assert_rows(read(str([tuple(r.values()) for r in ROWS]), column_names=("country", "year", "gdp")))


def test_column_names_found_elsewhere_are_followed_by_columns_path_and_records_path():
    answer = json.dumps({"meta": {"fields": list(ROWS[0])}, "page": {"items": [list(r.values()) for r in ROWS]}})

    with pytest.raises(NotRows, match="arrays without column names"):
        read(answer, records_path="page.items")
    assert_rows(read(answer, records_path="page.items", columns_path="meta.fields"))
    with pytest.raises(NotRows, match="records_path 'page.rows' is not in the answer \\(keys: meta, page\\)"):
        read(answer, records_path="page.rows")
    with pytest.raises(NotRows, match="rows are arrays of 3 values but 2 column names"):
        read(answer, records_path="page.items", column_names=("a", "b"))


def test_structured_content_wrapping_a_json_string_is_read_as_that_answer():
    """motherduck (FastMCP) sends {"result": "<its JSON answer as text>"} as structured content."""
    inner = json.loads(SHAPES["columns-and-rows"])
    assert_rows(from_value({"result": json.dumps(inner)}, Reading()))
    assert_rows(from_value({"result": key_value_of(ROWS)}, Reading()))  # mcp-alchemy's text, wrapped the same way


def test_a_one_row_object_stays_one_row_even_with_a_list_in_it():
    rows = read(json.dumps({"sku": "A", "items": [1, 2]}))

    assert rows.table.to_pylist() == [{"sku": "A", "items": "[1, 2]"}]


# --- when a format is pinned, and when none fits -------------------------------------------------------


def test_a_pinned_format_reads_what_a_guess_would_take_for_prose():
    text = "Status: open\nOwner: sam"  # two keys: guessed as one key_value row
    assert read(text).table.to_pylist() == [{"Status": "open", "Owner": "sam"}]

    assert read("status: open", format="key_value").table.to_pylist() == [{"status": "open"}]
    with pytest.raises(NotRows, match="none of the formats"):
        read("status: open")  # one key, no heading: a message, not a table


def test_a_pinned_format_that_does_not_fit_says_which_it_expected():
    with pytest.raises(NotRows, match=r"not a markdown table \(result_format: markdown\): a,b 1,2"):
        read("a,b\n1,2", format="markdown")


@pytest.mark.parametrize(
    "answer",
    ["Database error: no such table: gdp", "Error: (sqlite3.OperationalError) no such table: gdp", "2 warehouses, 5 stock lines", "42"],
)
def test_an_answer_in_words_names_every_format_and_quotes_the_answer(answer):
    with pytest.raises(NotRows) as caught:
        read(answer)
    message = str(caught.value)
    assert all(kind in message for kind in FORMATS)
    assert answer in message and "result_format" in message


def test_the_formats_are_the_schemas_and_each_has_a_reader():
    assert FORMATS == schemas.enum("sources", "mcp", "result_format")
    assert set(result_text.READERS) == set(FORMATS)


def test_a_broken_json_item_beside_good_ones_fails_rather_than_being_skipped():
    with pytest.raises(NotRows):
        from_texts([json.dumps(ROWS[0]), '{"country": "Peru", "year": 20'], Reading())


# --- Python literals are data, never code ----------------------------------------------------------------


def test_a_literal_with_database_values_is_read_by_its_constructors():
    text = "[(Decimal('1.50'), datetime.date(2020, 1, 2), datetime.datetime(2020, 1, 2, 3, 4, 5), -3, nan, None, True)]"

    assert literal(text)[0][:4] == (decimal.Decimal("1.50"), dt.date(2020, 1, 2), dt.datetime(2020, 1, 2, 3, 4, 5), -3)
    rows = read(text, column_names=tuple("abcdefg"))
    assert [f.type for f in rows.table.schema][:4] == [pa.decimal128(3, 2), pa.date32(), pa.timestamp("us"), pa.int64()]


def test_a_literal_reads_the_same_rewritten_as_json_as_from_its_syntax_tree():
    """The fast path (the literal rewritten as JSON) and the syntax tree agree, on the strings that make a rewrite hard."""
    value = [
        {"quote": "it's", "double": 'say "hi"', "both": 'it\'s "x"', "escapes": "tab\there\\ \x00 é", "words": "None (True, False) nan"},
        {"one": (1,), "empty": (), "none": None, "flags": [True, False], "float": -1.5e-300, "big": 2**70, "nested": {"a": [("b", 2)]}},
        (dt.date(2020, 1, 2), dt.datetime(2020, 1, 2, 3, 4, 5, 6)),
    ]
    text = str(value)

    rewritten = json.loads(result_text._as_json(text))
    assert literal(text) == rewritten
    from_tree = result_text._literal_node(ast.parse(text, mode="eval").body)
    assert rewritten[:2] == json.loads(json.dumps(from_tree[:2]))  # tuples as lists, as rows read them
    assert rewritten[2] == ["2020-01-02", "2020-01-02T03:04:05.000006"]  # ISO text, typed as dates afterwards


@pytest.mark.parametrize(
    "code",
    [
        "[__import__('os').system('touch {marker}')]",
        "[open('{marker}', 'w')]",
        "[(lambda: open('{marker}', 'w'))()]",
        "[datetime.date.__class__.__subclasses__()]",
        "[Decimal(open('{marker}', 'w'))]",
        "[{{**__builtins__}}]",
    ],
)
def test_code_in_a_literal_is_never_run(code, tmp_path):
    marker = tmp_path / "ran"
    text = code.format(marker=marker)

    with pytest.raises(ValueError):
        literal(text)
    with pytest.raises(NotRows):
        read(text)
    assert not marker.exists()


# --- truncation ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer, said",
    [
        (json.dumps({"rows": ROWS, "truncated": True, "warning": "Results limited to 2 rows due to 50KB output size limit."}), "Results limited to 2 rows"),
        (json.dumps({"rows": ROWS, "truncated": True}), "truncated: true"),
        (json.dumps({"data": ROWS, "has_more": True}), "has_more: true"),
        (json.dumps({"data": ROWS, "message": "Only the first 2 rows are shown"}), "Only the first 2 rows"),
        (json.dumps({"result": {"rows": ROWS, "isTruncated": True}}), "isTruncated: true"),
        (key_value_of(ROWS).replace("Result: 2 rows", "Result: showing first 2 rows (output truncated)"), "(output truncated)"),
        (markdown_of(ROWS) + "\n\n_Output truncated at 2 rows._", "Output truncated"),
        (delimited(ROWS, ",") + "\n\n... more rows not shown", "more rows"),
    ],
    ids=["flag-and-warning", "flag", "has-more", "words", "nested", "key-value-trailer", "markdown-note", "csv-note"],
)
def test_an_answer_that_says_it_was_cut_is_heard(answer, said):
    rows = read(answer)

    assert rows.truncated is not None and said in rows.truncated
    assert rows.table.num_rows == 2


def test_a_prose_item_beside_rows_is_a_note_read_for_truncation():
    rows = from_texts([json.dumps(row) for row in ROWS] + ["Showing the first 2 of 5,000 rows"], Reading())

    assert_rows(rows)
    assert rows.truncated == "Showing the first 2 of 5,000 rows"


def test_flags_that_are_off_and_rows_with_such_fields_are_not_truncation():
    assert read(json.dumps({"rows": ROWS, "truncated": False, "warning": None})).truncated is None
    assert read(json.dumps([{"note": "truncated text", "truncated": True}])).truncated is None  # a column of the data


# --- dates ---------------------------------------------------------------------------------------------------


def test_iso_dates_and_timestamps_become_dates_and_timestamps():
    answer = [
        {"day": "2024-05-27", "at": "2024-05-27T02:08:51.000", "zoned": "2024-05-27T02:08:51Z", "us": "05/27/2024", "mixed": "2024-05-27"},
        {"day": "2024-05-28", "at": "2024-05-28 10:00", "zoned": "2024-05-28T12:00:00+02:00", "us": "05/28/2024", "mixed": "soon"},
    ]

    rows = read(json.dumps(answer))

    types = {field.name: field.type for field in rows.table.schema}
    assert types["day"] == pa.date32() and types["us"] == pa.date32()  # ISO, and the CSV source's other formats
    assert pa.types.is_timestamp(types["at"]) and types["at"].tz is None  # the unit is the CSV path's for the same text
    assert pa.types.is_timestamp(types["zoned"]) and types["zoned"].tz == "UTC"
    assert types["mixed"] == pa.string()  # one value is no date: the column stays text
    assert rows.table.column("zoned")[1].as_py() == dt.datetime(2024, 5, 28, 10, tzinfo=dt.timezone.utc)


def test_numbers_sent_as_json_strings_stay_text():
    rows = read(json.dumps([{"zip": "01234", "n": 1}, {"zip": "10001", "n": 2}]))

    assert rows.table.column("zip").to_pylist() == ["01234", "10001"]
