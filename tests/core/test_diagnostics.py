"""The one shape of every problem (lib/core/diagnostics.py): `file:line: field: level: message`, and its JSON."""

from __future__ import annotations

import dataclasses

import pytest

from lib.core.diagnostics import ERROR, WARNING, Diagnostic, ValidationFailed, format_path, has_errors


def test_a_full_diagnostic_prints_as_file_line_field_level_message():
    d = Diagnostic("schema.type", ERROR, "must be a number", file="task.yaml", line=7, field="rules[2].weight")
    assert d.location == "task.yaml:7"
    assert d.format() == "task.yaml:7: rules[2].weight: error: must be a number"


@pytest.mark.parametrize(
    "kwargs,expected",
    [
        ({"file": "task.yaml"}, "task.yaml: warning: stale"),  # no line: the file alone
        ({"field": "goal"}, "goal: warning: stale"),  # no file: the field leads
        ({"file": "task.yaml", "line": None, "field": "goal"}, "task.yaml: goal: warning: stale"),
        ({}, "warning: stale"),  # nothing to point at: no leading colon
        ({"line": 3}, "warning: stale"),  # a line without a file points nowhere
    ],
)
def test_missing_parts_are_left_out_not_printed_empty(kwargs, expected):
    assert Diagnostic("x", WARNING, "stale", **kwargs).format() == expected


def test_the_allowed_values_follow_the_message():
    d = Diagnostic("schema.enum", ERROR, "unknown type 'pie'", file="dashboard.yaml", line=4, field="components[0].type", allowed="kpi, chart, table, text")
    assert d.format().endswith("error: unknown type 'pie' (allowed: kpi, chart, table, text)")


def test_to_dict_carries_only_what_is_set():
    assert Diagnostic("a", ERROR, "m").to_dict() == {"id": "a", "level": "error", "message": "m"}
    full = Diagnostic("a", ERROR, "m", file="f.yaml", line=0, field="x", allowed="y")
    assert full.to_dict() == {"id": "a", "level": "error", "message": "m", "file": "f.yaml", "line": 0, "field": "x", "allowed": "y"}  # a 0 is a value, kept


def test_diagnostics_are_values_equal_by_content_and_hashable():
    a = Diagnostic("x", ERROR, "m", file="f", line=1)
    b = Diagnostic("x", ERROR, "m", file="f", line=1)
    assert a == b and len({a, b}) == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.level = WARNING  # type: ignore[misc]


def test_has_errors_counts_errors_only():
    warning = Diagnostic("w", WARNING, "m")
    assert not has_errors([])
    assert not has_errors([warning, warning])
    assert has_errors([warning, Diagnostic("e", ERROR, "m")])
    assert has_errors(d for d in [Diagnostic("e", ERROR, "m")])  # any iterable, a generator too


@pytest.mark.parametrize(
    "path,expected",
    [
        (("rules", 2, "text"), "rules[2].text"),
        ((), ""),
        ((0,), "[0]"),
        ((0, "a"), "[0].a"),
        (("components", 0, "encoding", "x", "field"), "components[0].encoding.x.field"),
        (("matrix", 1, 2), "matrix[1][2]"),
    ],
)
def test_format_path_writes_json_paths_as_people_read_them(path, expected):
    assert format_path(path) == expected


def test_validation_failed_keeps_only_errors_and_says_nothing_was_written():
    diags = [Diagnostic("w", WARNING, "just a warning"), Diagnostic("e1", ERROR, "first", file="a.yaml", line=2), Diagnostic("e2", ERROR, "second")]
    exc = ValidationFailed(diags)
    assert [d.id for d in exc.diagnostics] == ["e1", "e2"]
    text = str(exc)
    assert text.splitlines() == ["2 validation error(s), nothing was written:", "a.yaml:2: error: first", "error: second"]
    assert "just a warning" not in text
    assert isinstance(exc, ValueError)


def test_validation_failed_lists_at_most_twenty_but_counts_all():
    exc = ValidationFailed([Diagnostic(f"e{i}", ERROR, f"problem {i}") for i in range(25)])
    lines = str(exc).splitlines()
    assert lines[0].startswith("25 validation error(s)")
    assert len(lines) == 1 + 20 and lines[-1] == "error: problem 19"
    assert len(exc.diagnostics) == 25
