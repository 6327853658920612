"""Streamlit form fields generated from a JSON Schema, with its descriptions as help text.

`fields(root, schema, value, key)` draws one widget per property (recursing
into nested objects) and returns the edited value. Keys the schema does not
describe are kept as they were, and empty optional fields are left out, so a
save through a form changes only what the person changed.
"""

from __future__ import annotations

import json
from typing import Any

import streamlit as st
import yaml

from lib.memory import schemas
from lib.memory.yamlio import YamlSyntaxError, declared_properties, parse, resolve_ref

COLOR_PATTERN = schemas.pattern("dashboard", "color")  # the same in every schema (tests/memory/test_schemas.py)
LONG_TEXT = {"text", "description", "goal", "markdown"}


def fields(root: dict, schema: dict, value: Any, key: str, skip: tuple[str, ...] = ()) -> Any:
    schema = resolve_ref(schema, root)
    value = dict(value or {})
    props = declared_properties(schema, root)
    required = set(schema.get("required") or [])
    out = {k: v for k, v in value.items() if k not in props}  # unknown keys survive untouched
    for name, sub in props.items():
        if name in skip:
            if name in value:
                out[name] = value[name]
            continue
        edited = field(root, sub, value.get(name), f"{key}.{name}", name, name in required)
        if name not in value and name not in required and edited == resolve_ref(sub, root).get("default", object()):
            continue  # an untouched optional field: never write its default into the file
        if edited not in (None, "", [], {}):
            out[name] = edited
    return out


def field(root: dict, schema: dict, value: Any, key: str, name: str, required: bool = False) -> Any:
    schema = resolve_ref(schema, root)
    label = schema.get("title") or human_label(name)
    help_text = schema.get("description")
    examples = schema.get("examples") or []
    placeholder = json.dumps(examples[0], ensure_ascii=False) if examples and not isinstance(examples[0], str) else (examples[0] if examples else None)
    kind = schema.get("type")
    if "enum" in schema:
        options = ([None] if not required else []) + list(schema["enum"])
        index = options.index(value) if value in options else 0
        return st.selectbox(label, options, index=index, key=key, help=help_text, format_func=lambda v: "—" if v is None else str(v))
    if "const" in schema:
        st.text_input(label, value=str(schema["const"]), key=key, help=help_text, disabled=True)
        return schema["const"]
    if kind == "boolean":
        return st.checkbox(label, value=bool(value if value is not None else schema.get("default", False)), key=key, help=help_text)
    if kind in ("integer", "number"):
        step = 1 if kind == "integer" else None
        number = st.number_input(
            label, value=value if value is not None else None, step=step, key=key, help=help_text, placeholder=str(schema.get("default", placeholder or ""))
        )
        if number is None:
            return None
        # A whole number stays an int (a saved `10` must not come back as `10.0`).
        return int(number) if kind == "integer" or (float(number).is_integer() and not isinstance(value, float)) else float(number)
    if kind == "string" and schema.get("pattern") == COLOR_PATTERN:
        enabled = st.checkbox(f"Set {_lower_first(label)}", value=value is not None, key=key + ".on") if not required else True
        if not enabled:
            return None
        return st.color_picker(label, value=value or "#1f77b4", key=key, help=help_text)
    if kind == "string":
        widget = st.text_area if name in LONG_TEXT else st.text_input
        return widget(label, value=value or "", key=key, help=help_text, placeholder=placeholder).strip() or None
    if kind == "array" and _scalar_items(root, schema):
        # One item per line: an item may contain commas.
        text = st.text_area(label + " (one per line)", value="\n".join(map(str, value or [])), key=key, help=help_text)
        items = [line.strip() for line in text.splitlines() if line.strip()]
        return items if [str(v) for v in value or []] != items else value  # unchanged keeps its types
    if kind == "object" and (schema.get("properties") or schema.get("allOf")):
        if not required:
            # An optional group stays absent unless the person turns it on: drawing its
            # widgets would otherwise fill it with their defaults on every save.
            if not st.checkbox(f"Set {_lower_first(label)}", value=value is not None, key=key + ".on", help=help_text):
                return None
        st.markdown(f"**{label}**" + (f" — {help_text}" if help_text else ""))
        return fields(root, schema, value, key)
    # Anything richer (lists of objects, free mappings) is edited as YAML.
    text = st.text_area(
        label,
        value=yaml.safe_dump(value, sort_keys=False, allow_unicode=True) if value else "",
        key=key,
        help=(help_text + " " if help_text else "") + "Written as YAML.",
        placeholder=f"for example: {placeholder}" if placeholder else None,
    )
    try:  # read as the workspace loader reads files: dates stay text, errors name the line
        return parse(text).data if text.strip() else None
    except YamlSyntaxError as exc:
        st.error(f"{label}: not valid YAML at line {exc.line}: {exc}")
        return value


_WORDS = {
    "s": "(seconds)",
    "ms": "(ms)",
    "kpis": "KPIs",
    "kpi": "KPI",
    "url": "URL",
    "id": "ID",
    "sql": "SQL",
    "mcp": "MCP",
    "api": "API",
    "csv": "CSV",
    "max": "maximum",
    "min": "minimum",
}


def human_label(key: str) -> str:
    """A field's label when its schema has no title: `query_timeout_s` -> "Query timeout (seconds)", `kpis_first` -> "KPIs first"."""
    words = [_WORDS.get(word, word) for word in key.split("_")]
    text = " ".join(words)
    return text[0].upper() + text[1:] if text else key


def _lower_first(label: str) -> str:
    return label[0].lower() + label[1:] if label[1:2].islower() else label


def _scalar_items(root: dict, schema: dict) -> bool:
    items = resolve_ref(schema.get("items") or {}, root)
    return items.get("type") in ("string", "number", "integer")
