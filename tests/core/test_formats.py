"""Number and value formatting (lib/core/formats.py) with d3-format strings, the syntax Vega-Lite charts use.

The expected strings of the d3 cases are d3-format's own documented results
(its README and the specification of `locale.format`), so that a KPI card shows
a number as the chart beside it does. Where lib/core/formats.py differs from d3, the
test documents the difference.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from lib.core.formats import contrast_ratio, format_number, format_value, readable_text_on


@pytest.mark.parametrize(
    "spec,value,expected",
    [
        (".0%", 0.123, "12%"),
        (".0%", 0.12, "12%"),
        ("$.2f", 3.5, "$3.50"),
        ("($.2f", -3.5, "($3.50)"),
        ("+20", 42, "                 +42"),
        (".2s", 42e6, "42M"),
        ("04d", 2, "0002"),
        ("04d", 123, "0123"),
        (".1f", 0.30000000000000004, "0.3"),
        (",.2f", 1240.1, "1,240.10"),
        (",d", 1234567, "1,234,567"),
    ],
)
def test_d3s_documented_examples(spec, value, expected):
    assert format_number(value, spec) == expected


def test_r_rounds_to_significant_digits_in_decimal_notation():
    assert format_number(4223, ",.2r") == "4,200"


def test_centre_alignment():
    assert format_number(42, "*^20") == "*********42*********"


def test_zero_padding_goes_after_the_sign():
    assert format_number(-2, "04d") == "−002"


def test_negative_numbers_use_a_real_minus_sign_and_parentheses_on_request():
    assert format_number(-1234.5, ",.1f") == "−1,234.5"  # U+2212, as d3 writes it
    assert format_number(-0.25, "(.0%") == "(25%)"


def test_a_negative_number_that_rounds_to_zero_has_no_sign():
    assert format_number(-0.0001, ".2f") == "0.00"  # d3 hides the sign of a negative zero
    assert format_number(-0.0001, "+.2f") == "+0.00"


def test_si_prefixes_from_nano_to_yotta():
    assert format_number(1.5e-9, ".2s") == "1.5n"
    assert format_number(0.0042, ".2s") == "4.2m"
    assert format_number(2.5e9, ".2s") == "2.5G"
    assert format_number(-42e6, ".2s") == "−42M"
    assert format_number(0, ".2s") == "0"


def test_comma_groups_thousands_in_f_and_d_and_percent():
    assert format_number(1234567.891, ",.2f") == "1,234,567.89"
    assert format_number(12345.6, ",.0%") == "1,234,560%"
    assert format_number(1234.5, "d") == "1234"  # no comma asked, none written


def test_width_pads_with_the_fill_character_on_the_side_the_alignment_says():
    assert format_number(42, "_<6d") == "42____"
    assert format_number(42, "_>6d") == "____42"
    assert format_number(42, "6d") == "    42"  # numbers align right by default
    assert format_number(123456, "3d") == "123456"  # width is a minimum, never a cut


def test_no_spec_gives_a_readable_default():
    assert format_number(1234) == "1,234"  # integers as integers
    assert format_number(1234.5) == "1,234.50"  # floats with two decimals
    assert format_number(2_500_000.0) == "2.5M"  # large floats with an SI prefix
    assert format_number(7, "") == "7"


@pytest.mark.parametrize("value,expected", [(float("inf"), "∞"), (float("-inf"), "−∞"), (float("nan"), "—")])
def test_what_division_by_zero_gives_is_shown_as_a_symbol_with_any_spec(value, expected):
    assert format_number(value, ",.2f") == expected
    assert format_number(value) == expected


@pytest.mark.parametrize("spec", ["%Y", "abc", "10.2.3f", ".2F"])
def test_an_unsupported_spec_is_an_error_naming_it(spec):
    with pytest.raises(ValueError, match="unsupported number format"):
        format_number(1.0, spec)


@pytest.mark.parametrize("spec", ["x", "b", "o"])
def test_a_d3_type_that_is_not_implemented_is_refused_not_shown_as_a_decimal(spec):
    with pytest.raises(ValueError, match="unsupported number format"):
        format_number(255, spec)


# --------------------------------------------------------------------------- any value a query returns


def test_format_value_by_type():
    assert format_value(None) == "—"
    assert format_value(float("nan")) == "—"
    assert format_value(True) == "yes" and format_value(False) == "no"  # not 1 and 0, although bools are ints
    assert format_value(Decimal("1234.5"), ",.1f") == "1,234.5"
    assert format_value(3, ".1f") == "3.0"
    assert format_value("text", ",.2f") == "text"  # text is never a number format's business


def test_dates_are_iso_unless_a_strftime_pattern_is_given():
    assert format_value(dt.date(2026, 11, 30)) == "2026-11-30"
    assert format_value(dt.date(2026, 11, 30), "%d %b %Y") == "30 Nov 2026"
    assert format_value(dt.date(2026, 11, 30), ".0%") == "2026-11-30"  # a number format on a date is ignored


def test_datetimes_drop_a_midnight_time_and_otherwise_show_minutes():
    assert format_value(dt.datetime(2026, 11, 30)) == "2026-11-30"
    assert format_value(dt.datetime(2026, 11, 30, 9, 5, 59)) == "2026-11-30 09:05"
    assert format_value(dt.datetime(2026, 11, 30, 9, 5), "%H:%M on %d.%m.") == "09:05 on 30.11."


# --------------------------------------------------------------------------- colours


def test_contrast_ratio_spans_1_to_21_and_is_symmetric():
    assert contrast_ratio("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast_ratio("#777777", "#777777") == pytest.approx(1.0)
    assert contrast_ratio("#ff9f1c", "#000000") == pytest.approx(contrast_ratio("#000000", "#ff9f1c"))


def test_contrast_ratio_matches_the_wcag_reference_value():
    # WCAG's example threshold: #767676 on white is the lightest grey that passes AA (4.54:1).
    assert contrast_ratio("#767676", "#ffffff") == pytest.approx(4.54, abs=0.01)
    assert contrast_ratio("#777777", "#ffffff") < 4.5


@pytest.mark.parametrize(
    "background,text",
    [
        ("#ff9f1c", "#000000"),  # the demo's amber
        ("#ffffff", "#000000"),
        ("#1f77b4", "#ffffff"),  # Vega's default blue
        ("#000000", "#ffffff"),
    ],
)
def test_readable_text_on_picks_the_better_contrast(background, text):
    assert readable_text_on(background) == text
    other = "#ffffff" if text == "#000000" else "#000000"
    assert contrast_ratio(text, background) > contrast_ratio(other, background)


def test_a_quarter_reads_as_d3_writes_it_and_a_literal_percent_q_stays():
    import datetime as dt

    from lib.core.formats import format_value

    assert [format_value(dt.date(2014, m, 1), "%Y-Q%q") for m in (1, 3, 4, 9, 10, 12)] == ["2014-Q1", "2014-Q1", "2014-Q2", "2014-Q3", "2014-Q4", "2014-Q4"]
    assert format_value(dt.datetime(2014, 12, 1, 0, 0), "%B %Y") == "December 2014"
    assert format_value(dt.date(2014, 12, 1), "%%q %q") == "%q 4"


@pytest.mark.parametrize("spec", ["9999999999", ">99999999,.2f", ".999999f", "0999999d", ".1000e"])
def test_a_width_or_precision_past_what_any_display_needs_is_refused_before_it_fills_the_memory(spec):
    """A hostile format in a spec ("{{q.c|9999999999}}" in a report's prose) would pad to gigabytes."""
    with pytest.raises(ValueError, match="unsupported number format.*width at most 100.*precision at most 20"):
        format_number(1.5, spec)


def test_the_largest_width_and_precision_still_format():
    assert format_number(1.5, ">100.20f") == " " * 78 + "1.50000000000000000000"


@pytest.mark.parametrize(
    "value,spec,shown",
    [
        (1, "d site", "1 site"),
        (6, "d site", "6 sites"),
        (1, "site", "1 site"),
        (0, "site", "0 sites"),
        (12345, ",d unit", "12,345 units"),
        (1.0, ".1f site", "1.0 sites"),  # the number as read: "1.0" is not "1"
        (3, "person/people", "3 people"),
        (1, "person/people", "1 person"),
        (2, "box", "2 boxes"),
        (2, "entry", "2 entries"),
        (2, "day", "2 days"),
        (2, "site gate", "2 site gates"),
        (0.953, ".1%", "95.3%"),  # a format alone: as format_value
        (dt.date(2026, 11, 16), "%d %b %Y", "16 Nov 2026"),  # a date's format has spaces, and no noun
        ("Lyon", "site", "Lyon"),  # a noun follows numbers only
        (None, "d site", "—"),
    ],
)
def test_a_placeholder_noun_agrees_with_its_number(value, spec, shown):
    from lib.core.formats import format_counted

    assert format_counted(value, spec) == shown


@pytest.mark.parametrize(
    "value,spec,shown",
    [(29.0, ",.1~f", "29"), (29.4, ",.1~f", "29.4"), (1500.0, ",.2~f", "1,500"), (0.5, ".1~%", "50%"), (0.125, ".2~%", "12.5%"), (1200.0, ".3~s", "1.2k")],
)
def test_d3s_trim_flag_drops_the_zeros_of_a_whole_figure_and_keeps_a_real_fraction(value, spec, shown):
    """Issue #33, 6: a whole figure without ".0" (d3's ~), as Vega-Lite's axes write it with the same format."""
    assert format_number(value, spec) == shown


def test_a_whole_float_without_a_format_is_shown_without_decimals():
    assert format_number(29.0) == "29" and format_value(4.0) == "4" and format_number(29.5) == "29.50"
