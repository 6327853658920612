"""Each workspace file kind: a valid file passes, invalid files fail with file, line, field and what is allowed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from lib.memory import schemas, workspace
from lib.memory.kinds import KINDS
from lib.memory.kinds import sources as kinds_sources
from lib.memory.yamlio import parse
from tests.helpers import ROOT


def errors_for(kind: str, text: str, filename: str = "x.yaml"):
    return schemas.validate_document(kind, parse(text), filename)


def only_error(kind: str, text: str):
    errs = errors_for(kind, text, f"ws/{workspace.FILES[kind]}")
    assert len(errs) == 1, [e.format() for e in errs]
    return errs[0]


# ------------------------------------------------------------------ the schemas themselves


@pytest.mark.parametrize("kind", list(workspace.FILES))
def test_schema_is_valid_draft_2020_12(kind):
    Draft202012Validator.check_schema(schemas.load_schema(kind))


def test_every_schema_file_passes_the_metaschema_check():
    # Processes no longer check the schemas when they validate; this is where it happens.
    assert schemas.metaschema_problems() == {}
    checked = {p.name for p in schemas.SCHEMA_DIR.glob("*.schema.json")}
    assert checked >= {f"{kind}.schema.json" for kind in workspace.FILES}


def test_metaschema_check_catches_an_invalid_schema_file(tmp_path):
    for kind in workspace.FILES:
        (tmp_path / f"{kind}.schema.json").write_text(json.dumps(schemas.load_schema(kind)))
    broken = schemas.load_schema("task")
    broken["properties"]["rules"]["minItems"] = -1  # a count below zero is no schema
    (tmp_path / "task.schema.json").write_text(json.dumps(broken))
    (tmp_path / "output.schema.json").write_text('{"type": "object",')
    problems = schemas.metaschema_problems(tmp_path)
    assert set(problems) == {"task.schema.json", "output.schema.json"}
    assert problems["task.schema.json"].startswith("properties/rules/minItems:"), problems
    assert problems["output.schema.json"].startswith("not JSON"), problems


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


@pytest.mark.parametrize("kind", list(workspace.FILES))
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


@pytest.mark.parametrize("kind", list(workspace.FILES))
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
    assert "group:" in (err.allowed or "")


def test_workspace_unknown_key_suggests_the_right_one():
    err = only_error("workspace", VALID_WORKSPACE.replace("description:", "descripton:"))
    assert (err.line, err.field) == (2, "descripton")
    assert "did you mean 'description'" in err.message
    assert "description" in (err.allowed or "")


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
    assert "YYYY-MM-DD" in (err.allowed or "")


def test_task_bad_check_colour_is_enum_error_with_choices():
    err = only_error("task", VALID_TASK.replace("kind: threshold_color", "kind: sparkle"))
    assert err.field == "rules[0].check.kind"
    assert "category_color" in (err.allowed or "")


def test_task_duplicate_rule_id_is_reported_on_the_second():
    text = VALID_TASK + "  - {id: attainment-green, text: again, author: bob, created: '2026-11-03'}\n"
    ws_errors = KINDS["task"].checks[0](parse(text), "ws/task.yaml")
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
    assert "env:NAME" in (err.allowed or "")
    assert "hunter2" not in err.format()  # a secret typed in the wrong place is never echoed


def test_sources_password_inside_url_is_refused():
    err = only_error("sources", VALID_SOURCES.replace("reporting@", "reporting:hunter2@"))
    assert (err.line, err.field) == (8, "sources[1].url")
    assert "password" in (err.allowed or "")
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
    assert "query" in (err.allowed or "") and "delimiter" not in (err.allowed or "")


def test_sources_sql_needs_exactly_one_of_query_or_table():
    err = only_error("sources", VALID_SOURCES.replace("    table: public.orders\n", ""))
    assert err.field == "sources[1]"
    assert "query, table" in err.message


def test_sources_unknown_type():
    err = only_error("sources", VALID_SOURCES.replace("type: mcp", "type: ftp"))
    assert (err.line, err.field) == (19, "sources[3].type")
    assert "csv, excel, parquet, sql, rest, mcp" in (err.allowed or "")


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
    assert "queries_at_render" in (err.allowed or "")


def test_output_bad_colour():
    err = only_error("output", VALID_OUTPUT.replace("'#ffffff'", "white"))
    assert (err.line, err.field) == (2, "theme.background")
    assert "#RRGGBB" in (err.allowed or "")


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
    errs = [d for check in KINDS["dashboard"].checks for d in check(doc, "d.yaml")]
    assert len(errs) == 1 and errs[0].line == 16 and "kpi_x" in errs[0].message


def test_dashboard_chart_without_encoding():
    err = only_error(
        "dashboard", VALID_DASHBOARD.replace("    encoding:\n      x: {field: gate, type: nominal}\n      y: {field: actual, type: quantitative}\n", "")
    )
    assert (err.line, err.field) == (8, "components[1]")
    assert "encoding" in err.message


def test_empty_file_is_an_error():
    err = only_error("task", "")
    assert err.line == 1 and "empty" in err.message


def test_schema_header_points_at_the_shipped_schema():
    # From <config-repo>/<workspace>/task.yaml the header resolves to <config-repo>/schemas/.
    header = schemas.header("task")
    target = header.split("$schema=")[1]
    assert (Path(__file__).parents[2] / "workspaces" / "gdp-explorer" / target).resolve() == (schemas.SCHEMA_DIR / "task.schema.json").resolve()
    json.loads((schemas.SCHEMA_DIR / "task.schema.json").read_text())


@pytest.mark.parametrize("kind", list(workspace.FILES))
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


# ------------------------------------------------------------------ facts the code takes from the schemas
# Each fact below lives in a schema; the code derives it (lib/memory/schemas.py) or is tested against it here,
# so a schema change that the code does not follow fails one of these tests.


def test_schema_lookups_follow_properties_defs_refs_and_branches():
    assert schemas.node("sources", "source", "type") == schemas.load_schema("sources")["$defs"]["source"]["properties"]["type"]
    assert schemas.node("sources", "sources", schemas.ITEMS) == schemas.node("sources", "source")  # $ref resolved
    assert schemas.node("sources", "source", "password")["pattern"].startswith("^(env:")  # a `then` branch's field
    assert schemas.node("sources", "rest", "secret_headers", schemas.ANY_KEY) == schemas.node("sources", "secret_ref")
    with pytest.raises(KeyError):
        schemas.node("sources", "source", "no_such_field")


def test_connector_registry_names_exactly_the_schemas_source_types():
    import importlib

    from lib.data import connectors

    schema_types = schemas.enum("sources", "source", "type")
    assert connectors.TYPES == tuple(connectors.REGISTRY) == schema_types  # same types, same order in the UI
    root = schemas.load_schema("sources")
    branches = [b["if"]["properties"]["type"]["const"] for b in root["$defs"]["source"]["allOf"]]
    assert tuple(branches) == schema_types  # each type's settings apply to it
    for kind, connector in connectors.REGISTRY.items():
        assert kind in root["$defs"], f"no $defs/{kind} with the settings of a {kind} source"
        assert callable(importlib.import_module(f"lib.data.connectors.{connector.module}").fetch)
        assert connector.label


def test_cli_source_types_are_the_schemas(capsys):
    from lib import cli

    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["source", "add", "ws", "t", "--type", "ftp"])
    allowed = ", ".join(map(repr, schemas.enum("sources", "source", "type")))
    assert f"(choose from {allowed})" in capsys.readouterr().err


def test_colour_pattern_is_one_pattern_in_every_schema_and_in_the_code():
    from app_pages import dashboard_view, schema_form
    from lib.artifacts import export

    colour = schemas.pattern("dashboard", "color")
    assert schemas.pattern("output", "color") == schemas.pattern("task", "color") == colour
    assert export.COLOR_RE.pattern == dashboard_view.COLOR.pattern == schema_form.COLOR_PATTERN == colour
    # The form draws a colour picker where a field's pattern is the colour pattern: every colour field gets one.
    for path in (("theme", "background"), ("theme", "text"), ("theme", "primary"), ("theme", "palette", schemas.ITEMS)):
        assert schemas.node("output", *path)["pattern"] == schema_form.COLOR_PATTERN, path
    assert schemas.node("task", "check", "color")["pattern"] == schema_form.COLOR_PATTERN


def test_component_id_pattern_of_the_export_is_the_schemas():
    from lib.artifacts import export

    assert export.COMPONENT_ID_RE.pattern == schemas.pattern("dashboard", "id")
    assert schemas.node("dashboard", "component", "id")["pattern"] == export.COMPONENT_ID_RE.pattern


@pytest.mark.parametrize(
    "name", ["alice", "Bob.Smith", "a@b.c", "x_y-z", "9lives", "a" * 64, "", "-dash", ".dot", "a b", "a/b", "a" * 65, "ünï", "group:ops", "*"]
)
def test_user_names_the_app_accepts_are_the_ones_the_schemas_accept(name):
    import re

    from lib.roles.access import USER_NAME_RE, User

    author = schemas.pattern("task", "rule", "author")
    assert USER_NAME_RE.pattern == author
    in_schema = re.search(author, name) is not None
    assert (USER_NAME_RE.match(name) is not None) == in_schema
    if in_schema and ".." not in name and not name.endswith(".lock"):
        User(name)  # accepted
    else:
        with pytest.raises(ValueError):
            User(name)
    # An access list takes a user name, `group:` and a name, or `*`.
    core = author.removeprefix("^").removesuffix("$")
    assert schemas.pattern("workspace", "principals", schemas.ITEMS) == f"^(\\*|(group:)?{core})$"


def test_propose_rule_input_is_task_yamls_rule_shape():
    from lib.chat import agent_tools

    tool = agent_tools.PROPOSE_RULE["input_schema"]
    rule = schemas.node("task", "rule")
    assert set(tool["properties"]) <= set(rule["properties"])
    for name, prop in tool["properties"].items():
        assert {k: v for k, v in prop.items() if k != "description"} == schemas.constraints("task", "rule", name)
        assert prop["description"]
    assert tool["required"] == [name for name in rule["required"] if name in tool["properties"]]
    # What the model may send, completed with author and date, is a valid rule; the schema's limits hold in the tool.
    validator = Draft202012Validator(tool)
    proposal = {"id": "green-at-95", "text": "Attainment >= 95 % is green.", "tags": ["format"]}
    assert validator.is_valid(proposal)
    full = {"rules": [{**proposal, "author": "alice", "created": "2026-01-02"}]}
    assert not schemas.validate_document("task", parse(json.dumps(full)), "task.yaml")
    assert not validator.is_valid({**proposal, "id": "Not Kebab"})
    assert not validator.is_valid({**proposal, "text": "x" * (rule["properties"]["text"]["maxLength"] + 1)})


def test_constraints_leave_out_annotations_and_resolve_refs():
    tags = schemas.constraints("task", "rule", "tags")
    assert tags == {"type": "array", "items": {"type": "string", "pattern": "^[a-z0-9][a-z0-9-]*$"}, "uniqueItems": True}
    assert schemas.constraints("task", "rule", "created") == {"type": "string", "pattern": schemas.pattern("task", "date")}
    assert "x-secret" not in schemas.constraints("sources", "sql", "password")


def test_category_titles_are_the_schema_titles_in_the_prompt():
    from lib.chat import compose

    from ..conftest import WORKSPACES

    titles = [schemas.title(kind) for kind in workspace.FILES]
    assert len(set(titles)) == len(titles) and all(titles)
    ws, _ = workspace.load(WORKSPACES / "supply-chain-weekly")
    task, sources, output = (b["text"] for b in compose.compose(ws.data, "edit", "hi").request["system"][1:])
    assert f"# {schemas.title('task')} ({workspace.FILES['task']})" in task
    assert sources.startswith(f"# {schemas.title('sources')} ({workspace.FILES['sources']})")
    assert output.startswith(f"# {schemas.title('output')} ({workspace.FILES['output']})")


def test_category_titles_page_takes_them_from_the_schemas():
    page = (Path(__file__).parents[2] / "app_pages" / "workspaces.py").read_text()
    assert "CATEGORY_TITLES = {kind: schemas.title(kind) for kind in KINDS}" in page


def test_default_theme_is_the_output_schemas_default():
    from lib.memory.kinds import output as render  # the theme lives with output.yaml's kind

    theme = schemas.node("output", "theme")
    assert render.DEFAULT_THEME == schemas.default("output", "theme")
    assert Draft202012Validator({**theme, "$defs": schemas.load_schema("output")["$defs"]}).is_valid(render.DEFAULT_THEME)
    assert set(render.DEFAULT_THEME) == set(theme["properties"])  # a default for every theme key
    assert set(schemas.node("dashboard", "theme")["properties"]) <= set(theme["properties"])  # overrides have one too
    assert render.theme_for({}, None) == render.DEFAULT_THEME
    schemas.default("output", "theme")["palette"].clear()  # a copy each time
    assert render.DEFAULT_THEME["palette"] and schemas.default("output", "theme")["palette"]


def test_rule_check_kinds_in_checks_are_the_schemas():
    from lib.artifacts import checks

    assert set(checks.RULE_CHECK_NEEDS) == set(schemas.enum("task", "check", "kind"))
    fields = schemas.node("task", "check")["properties"]
    assert all(need in fields for needs in checks.RULE_CHECK_NEEDS.values() for need in needs)


# -------------------------------------------------- the prompt's summary of the dashboard spec


def _summary() -> str:
    from lib.chat import compose

    text = compose._CONTRACT_AND_SPEC
    return text[text.index("The dashboard spec") :]


# What the summary says about each part of the spec: (path in dashboard.schema.json, fields it names there).
SUMMARY_NAMES = [
    ((), ("title", "description", "theme", "filters", "components", "layout")),
    (("component",), ("id", "type", "title")),
    (("kpi",), ("query", "value_column", "compare_column", "delta", "format", "thresholds")),
    (("threshold",), ("op", "value", "color")),
    (("chart",), ("query", "mark", "encoding")),
    (("chart", "encoding"), ("x", "y", "color", "theta", "size", "tooltip")),
    (("channel",), ("field", "type", "title", "format", "sort", "scale", "thresholds")),
    (("channel", "scale"), ("domain", "range")),
    (("table",), ("query", "max_rows", "columns")),
    (("table", "columns", schemas.ANY_KEY), ("label", "format", "thresholds")),
    (("text",), ("markdown", "queries")),
    (("filter",), ("id", "type", "label", "options_query", "bounds_query")),
]


@pytest.mark.parametrize("path,names", SUMMARY_NAMES, ids=lambda v: "/".join(v) if isinstance(v, tuple) else None)
def test_prompt_summary_names_only_fields_that_exist_and_every_required_one(path, names):
    import re

    text = _summary()
    props = schemas.node("dashboard", *path).get("properties") if path else schemas.load_schema("dashboard")["properties"]
    required = (schemas.node("dashboard", *path) if path else schemas.load_schema("dashboard")).get("required", [])
    for name in names:
        assert name in props, f"the prompt names {name} under {path or 'the top level'}, which the schema lacks"
        assert re.search(rf"(?<![\w$]){re.escape(name)}(?!\w)", text), f"{name} is not in the summary"
    assert set(required) <= set(names), f"required fields the summary leaves out: {set(required) - set(names)}"


@pytest.mark.parametrize("path", [("component", "type"), ("chart", "mark"), ("channel", "type"), ("filter", "type")])
def test_prompt_summary_lists_every_allowed_value(path):
    text = _summary()
    missing = [v for v in schemas.enum("dashboard", *path) if v not in text]
    assert not missing, f"{'/'.join(path)}: the summary leaves out {missing}"


def test_prompt_summary_names_only_allowed_values():
    text = _summary()
    assert "delta: absolute|relative" in text and {"absolute", "relative"} <= set(schemas.enum("dashboard", "kpi", "delta"))
    listed = text.split("Filters: [{id, type: ", 1)[1].split(",", 1)[0].split("|")
    assert listed == list(schemas.enum("dashboard", "filter", "type"))
    marks = text.split("mark (", 1)[1].split(")", 1)[0].split(", ")
    assert marks == list(schemas.enum("dashboard", "chart", "mark"))
    channel_types = text.split("), type (", 1)[1].split(")", 1)[0].split(", ")
    assert sorted(channel_types) == sorted(schemas.enum("dashboard", "channel", "type"))
    kinds = text.split("a type (", 1)[1].split(")", 1)[0].split(", ")
    assert kinds == list(schemas.enum("dashboard", "component", "type"))


# -------------------------------------------------- secret-bearing fields: marked `x-secret` in the schema


def test_secret_fields_are_found_by_the_schemas_keyword():
    assert schemas.secret_fields("sources", "source") == (
        ("password",),
        ("secret_headers", "*"),
        *(("tls", field) for field in ("client_cert", "client_key", "client_key_password", "ca_bundle")),  # rest's, then mcp's
        ("env", "*"),
    )
    assert all(not schemas.secret_fields(kind) for kind in workspace.FILES if kind != "sources")
    # Only the keyword marks a secret: a field holding a reference is the secret_ref definition.
    root = schemas.load_schema("sources")
    assert root["$defs"]["secret_ref"][schemas.SECRET_KEYWORD] is True
    Draft202012Validator.check_schema(root)  # the custom keyword keeps the schema valid against its metaschema


def test_every_secret_field_takes_only_a_reference():
    import re

    from lib.memory.secrets import REF_RE

    for path in schemas.secret_fields("sources", "source"):
        schema = schemas.node("sources", "source", *path)
        assert schema["pattern"] == schemas.pattern("sources", "secret_ref"), path
    samples = ["env:A", "env:_x1", "secrets:a.b-c", "secrets:9", "env:1A", "env:", "secrets:.x", "hunter2", "env:A B", "ENV:A", "secrets:a/b", " env:A"]
    pattern = schemas.pattern("sources", "secret_ref")
    for sample in samples:
        assert bool(REF_RE.match(sample)) == bool(re.search(pattern, sample)), sample


def test_the_prompt_hides_a_literal_in_every_secret_field():
    source: dict = {"name": "s", "type": "mcp"}
    for path in schemas.secret_fields("sources", "source"):
        node = source
        for key in path[:-1]:  # fields of objects (`tls.client_key`) at any depth
            node = node.setdefault("KEY" if key == schemas.ANY_KEY else key, {})
        if path[-1] == schemas.ANY_KEY:
            node.update({"KEY": "hunter2", "REF": "env:OK"})
        else:
            node[path[-1]] = "hunter2"
    shown = json.dumps(kinds_sources.without_secrets({"sources": [source]}))
    assert "hunter2" not in shown and "env:OK" in shown


@pytest.mark.parametrize("path", schemas.secret_fields("sources", "source"), ids="/".join)
def test_a_literal_in_any_secret_field_is_refused_without_echo(path):
    source: dict[str, Any] = {"name": "s", "type": {"password": "sql", "secret_headers": "rest", "env": "mcp", "tls": "mcp"}[path[0]]}
    source.update(
        {"sql": {"url": "sqlite:///x.db", "table": "t"}, "rest": {"url": "https://example.com"}, "mcp": {"url": "https://example.com/mcp", "tool": "t"}}[
            source["type"]
        ]
    )
    # A name that does not say "credential": only the schema's keyword tells that the value is secret.
    if len(path) == 1:
        source[path[0]] = "hunter2secret"
    elif path[1] == schemas.ANY_KEY:
        source[path[0]] = {"REGION": "hunter2secret"}
    else:
        source[path[0]] = {path[1]: "hunter2secret"}
    errs = errors_for("sources", json.dumps({"sources": [source]}))
    assert errs and not any("hunter2secret" in e.format() for e in errs)


def test_the_fix_for_a_literal_credential_names_every_secret_field():
    text = "sources:\n- {name: s, type: rest, url: 'https://example.com', headers: {Authorization: Bearer x}}\n"
    import re

    diags = kinds_sources.no_literal_secrets(parse(text), "sources.yaml")
    assert diags
    named = {field: kinds.split(", ") for field, kinds in re.findall(r"(\w+) \(([a-z, ]+)\)", diags[0].allowed or "")}
    for kind in schemas.enum("sources", "source", "type"):
        for path in schemas.secret_fields("sources", kind):
            assert kind in named.get(path[0], []), (kind, path, diags[0].allowed)


# ------------------------------------------------------------------ valid documents are remembered, problems never

KNOWN_VALID = "title: Weekly\nqueries:\n  totals: SELECT 1 AS n\nsections:\n  - {type: heading, text: Overview}\n"


def test_a_valid_document_is_remembered_and_the_next_process_loads_it_without_jsonschema(tmp_path, monkeypatch):
    monkeypatch.setenv("DASHMEM_CACHE_DIR", str(tmp_path / "cache"))
    assert schemas.validate_document("report", parse(KNOWN_VALID), "ws/report.yaml") == []
    assert len(list((tmp_path / "cache" / schemas.VALID_DIR).rglob("*"))) == 2  # one marker in its folder
    script = (
        "import sys; from lib.memory import schemas; from lib.memory.yamlio import parse; "
        f"assert schemas.validate_document('report', parse({KNOWN_VALID!r}), 'r.yaml') == []; "
        "print('jsonschema' in sys.modules)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DASHMEM_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr
    env["DASHMEM_CACHE_DIR"] = str(tmp_path / "other-cache")  # no marker there: validated, so jsonschema loads
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "True", out.stderr


def test_a_document_with_problems_is_never_remembered_and_keeps_its_diagnostics(tmp_path, monkeypatch):
    monkeypatch.setenv("DASHMEM_CACHE_DIR", str(tmp_path / "cache"))
    bad = KNOWN_VALID.replace("{type: heading, text: Overview}", "{type: heading, txt: Overview}")
    first = [d.format() for d in schemas.validate_document("report", parse(bad), "ws/report.yaml")]
    second = [d.format() for d in schemas.validate_document("report", parse(bad), "ws/report.yaml")]
    assert first and first == second
    assert not (tmp_path / "cache" / schemas.VALID_DIR).exists()


def test_a_number_and_the_string_of_it_are_different_documents(tmp_path, monkeypatch):
    # `2024` and `"2024"` are one text to a person and two values to the schema: only the string is a title.
    monkeypatch.setenv("DASHMEM_CACHE_DIR", str(tmp_path / "cache"))
    as_string = KNOWN_VALID.replace("title: Weekly", 'title: "2024"')
    as_number = KNOWN_VALID.replace("title: Weekly", "title: 2024")
    assert schemas.validate_document("report", parse(as_string), "ws/report.yaml") == []
    problems = schemas.validate_document("report", parse(as_number), "ws/report.yaml")
    assert [d.field for d in problems] == ["title"]


def test_a_changed_schema_validates_a_remembered_document_again(tmp_path, monkeypatch):
    monkeypatch.setenv("DASHMEM_CACHE_DIR", str(tmp_path / "cache"))
    doc = parse("name: x\n")
    looser, stricter = {"type": "object"}, {"type": "object", "properties": {"name": {"type": "integer"}}}
    monkeypatch.setattr(schemas, "load_schema", lambda kind: looser)
    monkeypatch.setattr(schemas, "_validator", lambda kind: Draft202012Validator(looser))
    schemas._schema_fingerprint.cache_clear()
    assert schemas.validate_document("task", doc, "task.yaml") == []
    monkeypatch.setattr(schemas, "load_schema", lambda kind: stricter)
    monkeypatch.setattr(schemas, "_validator", lambda kind: Draft202012Validator(stricter))
    schemas._schema_fingerprint.cache_clear()
    assert [d.field for d in schemas.validate_document("task", doc, "task.yaml")] == ["name"]
    schemas._schema_fingerprint.cache_clear()


def test_a_cache_that_cannot_be_written_only_costs_a_validation(tmp_path, monkeypatch):
    blocked = tmp_path / "cache"
    blocked.write_text("a file where the cache folder would be")  # no marker can be made under it, even by root
    monkeypatch.setenv("DASHMEM_CACHE_DIR", str(blocked))
    assert schemas.validate_document("report", parse(KNOWN_VALID), "ws/report.yaml") == []
    assert schemas.validate_document("report", parse(KNOWN_VALID), "ws/report.yaml") == []
    assert blocked.read_text() == "a file where the cache folder would be"


def test_the_remembered_documents_are_pruned_to_the_newest(tmp_path, monkeypatch):
    monkeypatch.setattr(schemas, "VALID_KEEP", 3)
    folder = tmp_path / schemas.VALID_DIR
    for n in range(8):
        marker = folder / f"{n:02x}" / f"marker{n}"
        marker.parent.mkdir(parents=True)
        marker.touch()
        os.utime(marker, (1_000_000 + n, 1_000_000 + n))
    schemas._prune_valid(folder)
    assert sorted(p.name for p in folder.rglob("marker*")) == ["marker5", "marker6", "marker7"]
