"""report.yaml written by someone hostile (or careless): markup in prose and in data, sizes past reason."""

from __future__ import annotations

from lib.artifacts import report_export
from tests.helpers.report import errors_for, needs_chromium, pages_text, rendered_report


def test_thousands_of_sections_are_a_schema_error_naming_the_field():
    sections = "".join("  - {type: page_break}\n" for _ in range(3000))
    errs = errors_for(f"title: R\nsections:\n{sections}")
    assert any(e.field == "sections" and e.line == 3 and "too long (allowed: maxItems 500)" in e.format() for e in errs), [e.format() for e in errs[:3]]


def test_a_paragraph_past_twenty_thousand_characters_is_a_schema_error_naming_its_line():
    errs = errors_for(f"title: R\nsections:\n  - type: heading\n    text: H\n  - type: prose\n    markdown: {'word ' * 5000}\n")
    assert any(e.field == "sections[1].markdown" and e.line == 6 and "too long (allowed: maxLength 20000)" in e.format() for e in errs), [
        e.format() for e in errs[:3]
    ]


HOSTILE_PROSE = "<script>alert(1)</script> <img src=x onerror=alert(2)> [a](javascript:alert(3)) Value {{hostile.c}}."


def _hostile(report):
    report["queries"]["hostile"] = "SELECT '<b>x</b><img src=y onerror=alert(4)>' AS c FROM gates LIMIT 1"
    report["sections"] = [{"type": "prose", "markdown": HOSTILE_PROSE}]


def test_markup_in_prose_and_in_a_placeholders_value_is_escaped_text_in_the_html(supply):
    folder, wh = supply
    html = report_export.to_html(rendered_report(folder, wh, _hostile))
    main = html[html.index("<main>") : html.index("</main>")]
    assert "<script>" not in main and "<img" not in main and "<b>" not in main and "href" not in main
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in main and "&lt;b&gt;x&lt;/b&gt;" in main


@needs_chromium
def test_markup_in_a_placeholders_value_is_printed_as_the_text_it_is(supply):
    folder, wh = supply
    text = " ".join("\n".join(pages_text(report_export.to_pdf(report_export.to_html(rendered_report(folder, wh, _hostile))))).split())
    assert "Value <b>x</b>" in text and "<img src=y onerror=alert(4)>." in text and "<script>alert(1)</script>" in text
