"""Spec helpers (lib/memory/spec.py): queries, their parameters, placeholders and the theme, without the renderer."""

from __future__ import annotations

import subprocess
import sys

from lib.memory.kinds.output import DEFAULT_THEME, theme_for
from lib.memory.spec import PARAM_RE, PLACEHOLDER_RE, params_for, queries, unset_params

from ..conftest import ROOT

DASHBOARD = {
    "title": "Sales",
    "filters": [
        {"id": "region", "type": "select", "options_query": "SELECT DISTINCT region FROM sales"},
        {"id": "day", "type": "date_range", "bounds_query": "SELECT min(day), max(day) FROM sales"},
        {"id": "plain", "type": "select"},
    ],
    "components": [
        {"id": "total", "type": "kpi", "query": "SELECT sum(amount) AS value FROM sales WHERE ($region IS NULL OR region = $region)"},
        {"id": "note", "type": "text", "markdown": "{{top.region}}", "queries": {"top": "SELECT region FROM sales", "low": "SELECT 1 FROM sales"}},
    ],
}


def test_queries_lists_every_query_with_its_path_and_owner():
    found = list(queries(DASHBOARD))
    assert [(path, where) for path, where, _ in found] == [
        (("filters", 0, "options_query"), "filter 'region'"),
        (("filters", 1, "bounds_query"), "filter 'day'"),
        (("components", 0, "query"), "component 'total'"),
        (("components", 1, "queries", "top"), "component 'note' query 'top'"),
        (("components", 1, "queries", "low"), "component 'note' query 'low'"),
    ]
    assert found[2][2] == DASHBOARD["components"][0]["query"]
    assert list(queries({})) == []


def test_queries_skips_what_is_not_sql():
    dashboard = {"components": [{"id": "odd", "type": "kpi", "query": ["not", "a", "string"]}]}
    assert list(queries(dashboard)) == []


def test_parameters_are_exactly_those_a_query_names():
    sql = "SELECT * FROM t WHERE ($site IS NULL OR site = $site) AND day >= $day_from AND day <= $day_to"
    assert unset_params(sql) == {"site": None, "day_from": None, "day_to": None}
    assert params_for(sql, {"site": "Berlin", "other": 3, "day_from": "2026-01-01"}) == {"site": "Berlin", "day_from": "2026-01-01", "day_to": None}
    assert unset_params("SELECT 1") == {}
    assert PARAM_RE.findall("$a, $_b2, $3c") == ["a", "_b2"]


def test_placeholders_name_a_query_a_column_and_an_optional_format():
    matches = [m.groups() for m in PLACEHOLDER_RE.finditer("{{top.site}} has {{ top.share | .0% }} and {{latest.change|+.1%}}; {{Bad.x}}")]
    assert matches == [("top", "site", None), ("top", "share", ".0%"), ("latest", "change", "+.1%")]


def test_theme_is_defaults_then_output_then_dashboard():
    output = {"theme": {"background": "#000000", "text": "#eeeeee"}}
    dashboard = {"theme": {"background": "#111111"}}
    theme = theme_for(dashboard, output)
    assert theme["background"] == "#111111" and theme["text"] == "#eeeeee" and theme["palette"] == DEFAULT_THEME["palette"]
    assert theme_for({}, None) == DEFAULT_THEME


def test_refresh_and_checks_do_not_import_the_chart_libraries():
    def loaded(imports: str, modules: tuple[str, ...]) -> list[str]:
        code = f"import sys, {imports}; print(' '.join(m for m in {modules!r} if m in sys.modules))"
        return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()

    # The checks render a dashboard's queries (lib.artifacts.render is light); drawing charts is not their job.
    assert loaded("lib.data.refresh, lib.artifacts.checks", ("altair", "streamlit", "vl_convert")) == []
    # Composing a request needs the tool schemas only, not the code that runs the tools.
    assert loaded("lib.chat.compose", ("lib.chat.toolbox", "lib.artifacts.checks", "lib.artifacts.render", "lib.artifacts.components")) == []
