"""YAML in and out of workspace files (lib/memory/yamlio.py): positions of every node, refusals with their line and
kind, and the canonical writer. Whole hostile files through the CLI are in tests/system/test_hostile_files.py;
random input is in tests/system/test_fuzz.py."""

from __future__ import annotations

import pytest
import yaml

from lib.memory import yamlio
from lib.memory.yamlio import MAX_DEPTH, MAX_FILE_BYTES, YamlSyntaxError, dump, order_keys, parse

TEXT = """\
# yaml-language-server: $schema=../schemas/task.schema.json
goal: weekly supply report
rules:
  - id: green
    text: Green at >= 95 %
    created: 2026-11-30
  - id: amber
    text: |
      Amber below that.
      Red below 80.
tags: [a, b]
"""


# --------------------------------------------------------------------------- reading, with lines


def test_parse_reads_plain_data_as_pyyaml_does_but_keeps_dates_as_text():
    doc = parse(TEXT)
    expected = yaml.safe_load(TEXT)
    expected["rules"][0]["created"] = "2026-11-30"  # JSON Schema has no date type: what is validated is what is saved
    assert doc.data == expected


def test_every_value_and_key_has_its_line():
    doc = parse(TEXT)
    assert doc.value_lines[("goal",)] == 2
    assert doc.key_lines[("rules",)] == 3
    assert doc.value_lines[("rules", 0)] == 4
    assert doc.value_lines[("rules", 0, "created")] == 6
    assert doc.value_lines[("rules", 1, "text")] == 8  # a block scalar starts at its `|`
    assert doc.key_lines[("rules", 1, "text")] == 8
    assert doc.value_lines[("tags", 1)] == 11


def test_line_of_falls_back_to_the_nearest_ancestor():
    doc = parse(TEXT)
    assert doc.line_of(("rules", 1, "author")) == 7  # missing field: the rule it belongs in
    assert doc.line_of(("rules", 9, "text")) == 4  # missing item: the list, which starts at its first item
    assert doc.line_of(("nothing",)) == 2  # the document starts after the comment
    assert doc.line_of(("rules", 1, "text"), key=True) == 8


def test_line_of_a_key_differs_from_its_value_when_the_value_is_a_block():
    doc = parse("a:\n  b: 1\n")
    assert doc.line_of(("a",), key=True) == 1
    assert doc.line_of(("a",)) == 2  # the mapping value starts on the next line


@pytest.mark.parametrize(
    "text,value",
    [
        ("a: =\n", "="),
        ("a: ~\n", None),
        ("a: 0x1F\n", 31),
        ("a: 1e3\n", "1e3"),
        ("a: yes\n", True),
        ("a: !!str 12\n", "12"),
        ("a: !!int '7'\n", 7),
    ],
)
def test_scalars_resolve_as_the_safe_loader_resolves_them(text, value):
    assert parse(text).data == {"a": value} == yaml.safe_load(text.replace("=", "'='"))


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    "text,kind,line",
    [
        ("a: 1\nb: &x 2\nc: *x\n", "anchor", 2),  # refused where the anchor is, before any alias is read
        ("a: 1\nb: [1,\n  *x]\n", "alias", 3),
        ("base: {x: 1}\nother:\n  <<: {x: 2}\n  y: 3\n", "merge", 3),
        ("a: 1\nb: !!python/object:os.system {}\n", "tag", 2),
        ("a:\n  - !custom 1\n", "tag", 2),
        ("a: 1\n? [x, y]\n: 2\n", "key", 2),
        ("a: 1\nb: 2\na: 3\n", "syntax", 3),  # a duplicate key
        ("a: 1\n---\nb: 2\n", "syntax", 2),  # a second document
        ("a: [1, 2\nb: 3\n", "syntax", 2),
        ("a: 1\nb: \x07\n", "syntax", 2),  # a control character
    ],
)
def test_each_refusal_has_its_kind_and_line(text, kind, line):
    with pytest.raises(YamlSyntaxError) as refused:
        parse(text)
    assert (refused.value.kind, refused.value.line) == (kind, line)


@pytest.mark.parametrize("text", ["a: &x 1\n", "a: *x\n", "<<: {a: 1}\n"])
def test_anchors_aliases_and_merge_keys_are_explained(text):
    with pytest.raises(YamlSyntaxError, match=r"anchors \(&\), aliases \(\*\) and merge keys \(<<\) are refused"):
        parse(text)


def test_a_merge_key_written_as_a_value_or_quoted_is_plain_text():
    assert parse("a: <<\n'<<': 1\n").data == {"a": "<<", "<<": 1}


def test_nesting_is_allowed_up_to_the_limit_and_refused_past_it():
    def nested(levels: int) -> str:
        return "[" * levels + "]" * levels

    assert parse(nested(MAX_DEPTH)).data is not None
    with pytest.raises(YamlSyntaxError) as refused:
        parse(nested(MAX_DEPTH + 1))
    assert refused.value.kind == "depth" and refused.value.line == 1


def test_the_size_cap_counts_bytes_not_characters():
    half = MAX_FILE_BYTES // 2
    with pytest.raises(YamlSyntaxError) as refused:
        parse("a: " + "é" * half)  # fewer characters than the cap, more bytes
    assert refused.value.kind == "too_large" and refused.value.line is None
    assert refused.value.size == 3 + 2 * half
    assert parse("a: " + "e" * half).data == {"a": "e" * half}  # as many characters in ASCII load


def test_the_too_large_message_names_both_sizes():
    message = yamlio.too_large_message(50 << 20, "task.yaml")
    assert message.startswith("task.yaml is 50.0 MB (52,428,800 bytes)")
    assert "at most 2.0 MB (2,097,152 bytes)" in message
    assert yamlio.too_large_message(3 * 1024).startswith("the text is 3.0 KB")


def test_an_empty_document_is_none():
    assert parse("").data is None
    assert parse("# only a comment\n").data is None


# --------------------------------------------------------------------------- writing


SCHEMA = {
    "type": "object",
    "properties": {
        "goal": {"type": "string"},
        "rules": {"type": "array", "items": {"$ref": "#/$defs/rule"}},
    },
    "$defs": {"rule": {"properties": {"id": {}, "text": {}, "author": {}}}},
}


def test_dump_orders_keys_as_the_schema_declares_and_keeps_unknown_ones_after():
    data = {"rules": [{"text": "t", "extra": 1, "id": "r1"}], "zzz": True, "goal": "g"}
    text = dump(data, schema=SCHEMA)
    assert text == "goal: g\nrules:\n  - {id: r1, text: t, extra: 1}\nzzz: true\n"  # a short rule fits one line
    assert parse(text).data == data  # reordered, nothing dropped


def test_dump_puts_the_header_first_and_round_trips():
    header = "# yaml-language-server: $schema=../schemas/task.schema.json"
    text = dump({"goal": "g"}, header=header)
    assert text.splitlines()[0] == header
    assert parse(text).data == {"goal": "g"}


def test_dump_is_stable_a_second_save_changes_no_byte():
    data = parse(TEXT).data
    once = dump(data, schema=SCHEMA)
    assert dump(parse(once).data, schema=SCHEMA) == once


def test_multi_line_text_is_a_block_and_odd_line_breaks_are_escaped():
    assert dump({"t": "one\ntwo"}) == "t: |-\n  one\n  two\n"
    odd = dump({"t": "a\u2028b"})
    assert "\u2028" not in odd and parse(odd).data == {"t": "a\u2028b"}


def test_short_leaf_lists_go_on_one_line_long_ones_do_not():
    assert dump({"a": {"tags": ["x", "y"]}}) == "a:\n  tags: [x, y]\n"
    long = ["word" * 10, "more" * 10, "text" * 10]
    assert "\n    - " in dump({"a": {"tags": long}})


def test_a_long_line_is_never_wrapped():
    text = dump({"t": "word " * 100 + "end"})
    assert len(text.splitlines()) == 1


def test_order_keys_follows_refs_and_the_branches_of_all_of():
    root = {"allOf": [{"properties": {"b": {}}}, {"$ref": "#/$defs/x"}], "properties": {"c": {}}, "$defs": {"x": {"properties": {"a": {}}}}}
    assert list(order_keys({"a": 1, "b": 2, "c": 3, "d": 4}, root, root)) == ["c", "b", "a", "d"]
