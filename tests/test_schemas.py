"""Each workspace file kind: a valid file passes, invalid files fail with file, line, field and what is allowed."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from lib import schemas, workspace
from lib.yamlio import parse


def errors_for(kind: str, text: str, filename: str = "x.yaml"):
    return schemas.validate_document(kind, parse(text), filename)


def only_error(kind: str, text: str):
    errs = errors_for(kind, text, f"ws/{schemas.FILES[kind]}")
    assert len(errs) == 1, [e.format() for e in errs]
    return errs[0]


# ------------------------------------------------------------------ the schemas themselves


@pytest.mark.parametrize("kind", list(schemas.FILES))
def test_schema_is_valid_draft_2020_12(kind):
    Draft202012Validator.check_schema(schemas.load_schema(kind))


def _properties(node, path=""):
    """Every property definition in a schema, with its path."""
    if isinstance(node, dict):
        for name, sub in (node.get("properties") or {}).items():
            yield f"{path}.{name}", sub
            yield from _properties(sub, f"{path}.{name}")
        for key, value in node.items():
            if key not in ("properties", "if"):  # `if` holds conditions, not definitions
                yield from _properties(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from _properties(item, f"{path}[{i}]")


@pytest.mark.parametrize("kind", list(schemas.FILES))
def test_every_property_has_a_description_and_an_example(kind):
    root = schemas.load_schema(kind)
    missing = []
    for path, prop in _properties(root):
        if "$ref" in prop and set(prop) <= {"$ref"}:
            target = root
            for part in prop["$ref"][2:].split("/"):
                target = target[part]
            prop = target
        if "description" not in prop or "examples" not in prop:
            missing.append(path)
    assert not missing, f"{kind}: properties without description/examples: {missing}"


@pytest.mark.parametrize("kind", list(schemas.FILES))
def test_schema_examples_validate(kind):
    """The examples in the schema are themselves valid, so forms and docs can show them."""
    root = schemas.load_schema(kind)
    validator = Draft202012Validator(root)
    for example in root.get("examples", []):
        assert not list(validator.iter_errors(example))


# ------------------------------------------------------------------ workspace.yaml

VALID_WORKSPACE = """\
name: Team KPIs
description: Weekly KPIs.
access:
  owners: [alice]
  stewards: [bob, group:analysts]
  viewers: ['*']
policy: {stewards_can_publish: false}
"""


def test_workspace_valid():
    assert errors_for("workspace", VALID_WORKSPACE) == []


def test_workspace_missing_owner_names_line_and_field():
    text = VALID_WORKSPACE.replace("  owners: [alice]\n", "")
    err = only_error("workspace", text)
    assert err.file == "ws/workspace.yaml"
    assert err.line == 3  # the access mapping
    assert err.field == "access"
    assert "owners" in err.message


def test_workspace_bad_principal():
    err = only_error("workspace", VALID_WORKSPACE.replace("[alice]", "['alice smith']"))
    assert (err.line, err.field) == (4, "access.owners[0]")
    assert "group:" in err.allowed


def test_workspace_unknown_key_suggests_the_right_one():
    err = only_error("workspace", VALID_WORKSPACE.replace("description:", "descripton:"))
    assert (err.line, err.field) == (2, "descripton")
    assert "did you mean 'description'" in err.message
    assert "description" in err.allowed


# ------------------------------------------------------------------ task.yaml

VALID_TASK = """\
goal: Show gate attainment.
rules:
  - id: attainment-green
    text: Attainment >= 95 % is green.
    tags: [colour]
    author: alice
    created: '2026-11-02'
    last_confirmed: '2026-11-30'
    check: {kind: threshold_color, field: attainment, op: '>=', value: 0.95, color: '#2ca02c'}
"""


def test_task_valid():
    assert errors_for("task", VALID_TASK) == []


def test_task_wrong_type_names_line_field_and_allowed():
    err = only_error("task", VALID_TASK.replace("author: alice", "author: 42"))
    assert (err.line, err.field) == (6, "rules[0].author")
    assert "42 is not of type string" in err.message
    assert err.allowed == "string"
    assert err.format().startswith("ws/task.yaml:6: rules[0].author: error:")


def test_task_bad_date():
    err = only_error("task", VALID_TASK.replace("'2026-11-02'", "'02/11/2026'"))
    assert (err.line, err.field) == (7, "rules[0].created")
    assert "YYYY-MM-DD" in err.allowed


def test_task_bad_check_colour_is_enum_error_with_choices():
    err = only_error("task", VALID_TASK.replace("kind: threshold_color", "kind: sparkle"))
    assert err.field == "rules[0].check.kind"
    assert "category_color" in err.allowed


def test_task_duplicate_rule_id_is_reported_on_the_second():
    text = VALID_TASK + "  - {id: attainment-green, text: again, author: bob, created: '2026-11-03'}\n"
    ws_errors = workspace.SEMANTIC_CHECKS["task"][0](parse(text), "ws/task.yaml")
    assert len(ws_errors) == 1
    assert (ws_errors[0].line, ws_errors[0].field) == (10, "rules[1].id")


# ------------------------------------------------------------------ sources.yaml

VALID_SOURCES = """\
sources:
  - name: gates
    type: csv
    path: data/gates.csv
    columns: {day: DATE}
  - name: orders
    type: sql
    url: postgresql://reporting@127.0.0.1:5432/sales
    password: env:SALES_DB_PASSWORD
    table: public.orders
  - name: tickets
    type: rest
    url: https://api.example.com/v1/tickets
    headers: {Accept: application/json}
    secret_headers: {Authorization: 'secrets:tickets.token'}
    records_path: data.items
    pagination: {style: cursor, param: cursor, cursor_path: meta.next}
  - name: stock
    type: mcp
    command: [python, server.py]
    tool: list_stock
    arguments: {warehouse: north}
"""


def test_sources_valid():
    assert errors_for("sources", VALID_SOURCES) == []


def test_sources_literal_password_is_refused():
    err = only_error("sources", VALID_SOURCES.replace("env:SALES_DB_PASSWORD", "hunter2"))
    assert (err.line, err.field) == (9, "sources[1].password")
    assert "env:NAME" in err.allowed
    assert "hunter2" not in err.format()  # a secret typed in the wrong place is never echoed


def test_sources_password_inside_url_is_refused():
    err = only_error("sources", VALID_SOURCES.replace("reporting@", "reporting:hunter2@"))
    assert (err.line, err.field) == (8, "sources[1].url")
    assert "password" in err.allowed
    assert "hunter2" not in err.format() and "reporting:***@" in err.message


def test_sources_authorization_header_must_be_secret():
    text = VALID_SOURCES.replace("{Accept: application/json}", "{Authorization: Bearer abc}")
    errs = errors_for("sources", text, "ws/sources.yaml")
    assert errs and all(e.line == 14 for e in errs)
    assert any("secret_headers" in (e.allowed or "") for e in errs)


def test_sources_setting_of_another_type_is_unknown():
    err = only_error("sources", VALID_SOURCES.replace("    table: public.orders\n", "    table: public.orders\n    delimiter: ';'\n"))
    assert (err.line, err.field) == (11, "sources[1].delimiter")
    assert "unknown field" in err.message
    assert "query" in err.allowed and "delimiter" not in err.allowed


def test_sources_sql_needs_exactly_one_of_query_or_table():
    err = only_error("sources", VALID_SOURCES.replace("    table: public.orders\n", ""))
    assert err.field == "sources[1]"
    assert "query, table" in err.message


def test_sources_unknown_type():
    err = only_error("sources", VALID_SOURCES.replace("type: mcp", "type: ftp"))
    assert (err.line, err.field) == (19, "sources[3].type")
    assert "csv, sql, rest, mcp" in err.allowed


# ------------------------------------------------------------------ output.yaml

VALID_OUTPUT = """\
data_injection: {mode: queries_at_render, max_rows_per_query: 5000}
theme: {background: '#ffffff', palette: ['#1f77b4']}
number_formats: {percent: .1%}
layout: {kpis_first: true}
"""


def test_output_valid():
    assert errors_for("output", VALID_OUTPUT) == []


def test_output_inline_data_mode_is_refused():
    err = only_error("output", VALID_OUTPUT.replace("queries_at_render", "inline"))
    assert (err.line, err.field) == (1, "data_injection.mode")
    assert "queries_at_render" in err.allowed


def test_output_bad_colour():
    err = only_error("output", VALID_OUTPUT.replace("'#ffffff'", "white"))
    assert (err.line, err.field) == (2, "theme.background")
    assert "#RRGGBB" in err.allowed


# ------------------------------------------------------------------ profile.yaml

VALID_PROFILE = """\
tables:
  - name: gdp
    source: gdp
    rows: 13979
    columns:
      - {name: Year, type: BIGINT, null_share: 0, distinct: 63, min: 1960, max: 2022}
      - name: Country Name
        type: VARCHAR
        top: [{value: Aruba, count: 60}]
        other_count: 13919
relationships:
  - {left: gdp.Country Code, right: countries.code, overlap: 0.98}
"""


def test_profile_valid():
    assert errors_for("profile", VALID_PROFILE) == []


def test_profile_negative_rows():
    err = only_error("profile", VALID_PROFILE.replace("rows: 13979", "rows: -1"))
    assert (err.line, err.field) == (4, "tables[0].rows")
    assert err.allowed == "minimum 0"


def test_profile_null_share_above_one():
    err = only_error("profile", VALID_PROFILE.replace("null_share: 0,", "null_share: 3,"))
    assert (err.line, err.field) == (6, "tables[0].columns[0].null_share")


# ------------------------------------------------------------------ dashboard.yaml

VALID_DASHBOARD = """\
title: Gates
components:
  - id: kpi
    type: kpi
    title: Attainment
    query: SELECT sum(actual) / sum(target) AS value FROM gates
    format: .1%
  - id: by_gate
    type: chart
    query: SELECT gate, sum(actual) AS actual FROM gates GROUP BY gate
    mark: bar
    encoding:
      x: {field: gate, type: nominal}
      y: {field: actual, type: quantitative}
layout:
  - [kpi, {id: by_gate, width: 2}]
"""


def test_dashboard_valid():
    assert errors_for("dashboard", VALID_DASHBOARD) == []


def test_dashboard_inline_data_is_invalid():
    text = VALID_DASHBOARD.replace("    mark: bar\n", "    mark: bar\n    data: {values: [{gate: Supply, actual: 3}]}\n")
    err = only_error("dashboard", text)
    assert (err.line, err.field) == (12, "components[1].data")
    assert "unknown field 'data'" in err.message


def test_dashboard_unknown_layout_reference():
    text = VALID_DASHBOARD.replace("[kpi, ", "[kpi_x, ")
    doc = parse(text)
    assert schemas.validate_document("dashboard", doc, "d.yaml") == []
    errs = [d for check in workspace.SEMANTIC_CHECKS["dashboard"] for d in check(doc, "d.yaml")]
    assert len(errs) == 1 and errs[0].line == 16 and "kpi_x" in errs[0].message


def test_dashboard_chart_without_encoding():
    err = only_error("dashboard", VALID_DASHBOARD.replace("    encoding:\n      x: {field: gate, type: nominal}\n      y: {field: actual, type: quantitative}\n", ""))
    assert (err.line, err.field) == (8, "components[1]")
    assert "encoding" in err.message


def test_empty_file_is_an_error():
    err = only_error("task", "")
    assert err.line == 1 and "empty" in err.message


def test_schema_header_points_at_the_shipped_schema():
    # From <config-repo>/<workspace>/task.yaml the header resolves to <config-repo>/schemas/.
    header = schemas.header("task")
    target = header.split("$schema=")[1]
    assert (Path(__file__).parent.parent / "workspaces" / "gdp-explorer" / target).resolve() == (schemas.SCHEMA_DIR / "task.schema.json").resolve()
    json.loads((schemas.SCHEMA_DIR / "task.schema.json").read_text())


@pytest.mark.parametrize("kind", list(schemas.FILES))
def test_every_example_in_a_schema_validates_against_its_own_definition(kind):
    """Examples drive forms and docs, so each must be valid where it stands."""
    root = schemas.load_schema(kind)
    bad = []

    def walk(node, path):
        if isinstance(node, dict):
            if "examples" in node and ("type" in node or "properties" in node or "$ref" in node or "enum" in node):
                sub = {**node, "$defs": root.get("$defs", {})}
                sub.pop("examples")
                for example in node["examples"]:
                    if list(Draft202012Validator(sub).iter_errors(example)):
                        bad.append((path, example))
            for key, value in node.items():
                if key not in ("examples", "if"):
                    walk(value, f"{path}/{key}")
        elif isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, f"{path}[{i}]")

    walk(root, kind)
    assert not bad, bad


@pytest.mark.parametrize("url", ["postgresql://u:pa/ss@h/db", "postgresql://u@h/db?password=hunter2", "mysql://u@h/db?x=1&PWD=hunter2"])
def test_sources_every_form_of_password_in_a_url_is_refused_and_masked(url):
    text = VALID_SOURCES.replace("postgresql://reporting@127.0.0.1:5432/sales", url)
    err = only_error("sources", text)
    assert err.field == "sources[1].url"
    assert "hunter2" not in err.format() and "pa/ss" not in err.format()
