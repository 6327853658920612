"""YAML in and out of workspace files.

Reading keeps the position of every node, so a validation error can name the
line of the offending field instead of dumping the whole document. Writing is
canonical: keys in the order the file's JSON Schema declares them, block
style, two-space indents, no line wrapping, and the `$schema` header line that
editors use. Saving a canonical file therefore changes no byte, and a change
to one field changes one line of the diff.
"""
from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any

import yaml

# Path of a value inside a document: keys and list indexes, e.g. ("rules", 2, "text").
JsonPath = tuple


class YamlSyntaxError(ValueError):
    """A file is not well-formed YAML; carries the 1-based line of the problem."""

    def __init__(self, message: str, line: int | None):
        super().__init__(message)
        self.line = line


@dataclass
class Document:
    """A parsed YAML document plus where each value and key sits in the text."""

    data: Any
    value_lines: dict[JsonPath, int] = field(default_factory=dict)
    key_lines: dict[JsonPath, int] = field(default_factory=dict)

    def line_of(self, path: JsonPath, *, key: bool = False) -> int | None:
        """Best line for `path`: the exact node, else its nearest ancestor."""
        path = tuple(path)
        if key and path in self.key_lines:
            return self.key_lines[path]
        while path:
            if path in self.value_lines:
                return self.value_lines[path]
            path = path[:-1]
        return self.value_lines.get((), 1)


_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser when the wheel has it: ~5x faster


class _SafeLoaderNoDates(_BaseLoader):
    """SafeLoader that keeps dates as ISO strings.

    JSON Schema has no date type; keeping `2026-11-30` a string means what is
    validated is what is saved, byte for byte.
    """


_SafeLoaderNoDates.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def parse(text: str) -> Document:
    """Parse one YAML document, recording 1-based lines for keys and values."""
    try:
        node = yaml.compose(text, Loader=_SafeLoaderNoDates)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise YamlSyntaxError(f"{exc.problem or exc}", line) from None
    except yaml.YAMLError as exc:  # pragma: no cover - PyYAML always marks syntax errors
        raise YamlSyntaxError(str(exc), None) from None
    doc = Document(data=None)
    if node is None:
        return doc
    loader = yaml.SafeLoader("")  # only its constructors are used, on nodes already tagged without dates
    doc.data = _construct(node, (), doc, loader)
    return doc


def _construct(node: yaml.Node, path: JsonPath, doc: Document, loader: yaml.SafeLoader) -> Any:
    doc.value_lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if key in out:
                raise YamlSyntaxError(f"duplicate key {key!r}", key_node.start_mark.line + 1)
            doc.key_lines[path + (key,)] = key_node.start_mark.line + 1
            out[key] = _construct(value_node, path + (key,), doc, loader)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_construct(item, path + (i,), doc, loader) for i, item in enumerate(node.value)]
    return loader.construct_object(node, deep=True)


# --------------------------------------------------------------------------- writing


class _CanonicalDumper(yaml.SafeDumper):
    """Block style, list items indented under their key, multi-line text as `|` blocks."""

    def increase_indent(self, flow: bool = False, indentless: bool = False):
        return super().increase_indent(flow, False)

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _represent_str(dumper: yaml.SafeDumper, value: str):
    # Multi-line text reads best as a `|` block; PyYAML falls back to quoting
    # by itself when a block could not carry the text faithfully.
    lines = value.split("\n")
    block = len(lines) > 1 and "\r" not in value and all(l == l.rstrip(" \t") for l in lines)
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if block else None)


def _represent_date(dumper: yaml.SafeDumper, value: _dt.date):
    return dumper.represent_scalar("tag:yaml.org,2002:str", value.isoformat())


# Short leaf collections (tags, a palette, a threshold) read best on one line;
# top-level sections stay in block style. Whether a collection goes on one
# line depends only on its content and depth, so the choice is stable.
_FLOW_MAX = 80


class _FlowList(list):
    pass


class _FlowDict(dict):
    pass


def _is_short_leaf(value: list | dict) -> bool:
    items = list(value.values() if isinstance(value, dict) else value)
    if not items or any(isinstance(v, (list, dict)) for v in items):
        return False
    if any(isinstance(v, str) and ("\n" in v or len(v) > 40) for v in items):
        return False
    return len(repr(value)) <= _FLOW_MAX


def _mark_flow(value: Any, depth: int = 0) -> Any:
    if isinstance(value, dict):
        inner = {k: _mark_flow(v, depth + 1) for k, v in value.items()}
        return _FlowDict(inner) if depth >= 2 and len(value) <= 4 and _is_short_leaf(value) else inner
    if isinstance(value, list):
        inner = [_mark_flow(v, depth + 1) for v in value]
        return _FlowList(inner) if depth >= 1 and _is_short_leaf(value) else inner
    return value


_CanonicalDumper.add_representer(
    _FlowList, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=True))
_CanonicalDumper.add_representer(
    _FlowDict, lambda d, v: d.represent_mapping("tag:yaml.org,2002:map", v.items(), flow_style=True))
_CanonicalDumper.add_representer(str, _represent_str)
_CanonicalDumper.add_representer(_dt.date, _represent_date)
_CanonicalDumper.add_representer(_dt.datetime, _represent_date)


def dump(data: Any, *, schema: dict | None = None, header: str | None = None) -> str:
    """Canonical text for `data`: schema key order, block style, optional header comment."""
    if schema is not None:
        data = order_keys(data, schema, schema)
    body = yaml.dump(
        _mark_flow(data),
        Dumper=_CanonicalDumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=10_000,
        indent=2,
    )
    if header:
        return f"{header}\n{body}"
    return body


def order_keys(value: Any, schema: dict | None, root: dict) -> Any:
    """Reorder mapping keys as the schema declares its properties.

    Keys the schema does not name keep their relative order after the known
    ones, so unknown (invalid) content is never dropped by a save.
    """
    schema = resolve_ref(schema, root)
    if isinstance(value, dict):
        declared = declared_properties(schema, root)
        names = list(declared)
        ordered = [k for k in names if k in value] + [k for k in value if k not in declared]
        extra_schema = schema.get("additionalProperties") if isinstance(schema, dict) else None
        return {
            k: order_keys(
                value[k],
                declared.get(k, extra_schema if isinstance(extra_schema, dict) else None),
                root,
            )
            for k in ordered
        }
    if isinstance(value, list):
        items = schema.get("items") if isinstance(schema, dict) else None
        return [order_keys(v, items if isinstance(items, dict) else None, root) for v in value]
    return value


def resolve_ref(schema: dict | None, root: dict) -> dict:
    while isinstance(schema, dict) and "$ref" in schema:
        ref = schema["$ref"]
        if not ref.startswith("#/"):
            break
        target: Any = root
        for part in ref[2:].split("/"):
            target = target[part]
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema or {}


def declared_properties(schema: dict, root: dict) -> dict[str, dict]:
    """Properties of a schema in declaration order, including its allOf/anyOf/oneOf/then branches."""
    out: dict[str, dict] = {}
    out.update(schema.get("properties", {}))
    for keyword in ("allOf", "anyOf", "oneOf"):
        for branch in schema.get(keyword, []):
            for name, sub in declared_properties(resolve_ref(branch, root), root).items():
                out.setdefault(name, sub)
    for keyword in ("then", "else"):
        if keyword in schema:
            for name, sub in declared_properties(resolve_ref(schema[keyword], root), root).items():
                out.setdefault(name, sub)
    return out
