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
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from ..core.errors import DashmemError

# Path of a value inside a document: keys and list indexes, e.g. ("rules", 2, "text").
JsonPath = tuple


class YamlSyntaxError(DashmemError, ValueError):
    """A file is not well-formed YAML, or uses what workspace files refuse; carries the 1-based line.

    `kind` says which: `syntax` (not YAML, or a duplicate key), or a refusal:
    `anchor`, `alias`, `merge`, `tag`, `key`, `depth`, `too_large`.
    """

    def __init__(self, message: str, line: int | None, kind: str = "syntax"):
        super().__init__(message)
        self.line = line
        self.kind = kind
        self.size: int | None = None  # too_large: the text's size in bytes


# Workspace files are small (the largest demo file is 6 KB); anything far larger
# is a mistake or an attack, and is refused before a byte of it is parsed.
MAX_FILE_BYTES = 2 << 20  # 2 MiB
# Nesting deeper than this is no workspace file; it would also overflow the
# recursion of the schema validator and of copying.
MAX_DEPTH = 64


def too_large_message(size: int, name: str = "the text") -> str:
    """Why a file of `size` bytes is refused."""
    return (
        f"{name} is {_size(size)} ({size:,} bytes); workspace files may be at most {_size(MAX_FILE_BYTES)} "
        f"({MAX_FILE_BYTES:,} bytes), and larger ones are not parsed"
    )


def _size(n: int) -> str:
    return f"{n / (1 << 20):.1f} MB" if n >= 1 << 20 else f"{n / 1024:.1f} KB"


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


_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser when the wheel has it: ~5x faster


class _SafeLoaderNoDates(_BaseLoader):
    """SafeLoader that keeps dates as ISO strings.

    JSON Schema has no date type; keeping `2026-11-30` a string means what is
    validated is what is saved, byte for byte.
    """


_SafeLoaderNoDates.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


_TAG = "tag:yaml.org,2002:"
_MAP_TAGS = (None, "!", _TAG + "map")
_SEQ_TAGS = (None, "!", _TAG + "seq")
_SCALAR_TAGS = {_TAG + t for t in ("str", "int", "float", "bool", "null")}
_MERGE_TAG = _TAG + "merge"
_VALUE_TAG = _TAG + "value"  # a plain `=`: read as the text "="
_NO_KEY = object()
_LINE_BREAKS = re.compile(r"\r\n|[\r\n\x85\u2028\u2029]")


def parse(text: str) -> Document:
    """Parse one YAML document, recording 1-based lines for keys and values.

    Workspace files are plain data, and the canonical saver writes nothing else,
    so this refuses, with the line, what only an attack or a hand edit would
    bring: anchors and aliases (a "billion laughs" expands a few hundred bytes
    into gigabytes; `&g [*g]` is infinite), merge keys (`<<`), tags other than
    the plain scalar ones, non-scalar mapping keys, nesting deeper than
    MAX_DEPTH, and text over MAX_FILE_BYTES. The document is built straight from
    the parser's events, so nothing refused is ever constructed: a bomb costs
    only the bytes it has.
    """
    if len(text) > MAX_FILE_BYTES // 4 and (size := len(text.encode("utf-8", "surrogatepass"))) > MAX_FILE_BYTES:
        error = YamlSyntaxError(too_large_message(size), None, "too_large")
        error.size = size
        raise error
    loader = _SafeLoaderNoDates(text)
    try:
        return _build(loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise YamlSyntaxError(f"{exc.problem or exc}", mark.line + 1 if mark else 1) from None
    except yaml.reader.ReaderError as exc:  # a control character: no mark, only an offset
        raise YamlSyntaxError(
            f"unacceptable character #x{exc.character:04x}: control characters are not allowed", _line_at(text, exc.position, utf8=_C_PARSER)
        ) from None
    except yaml.YAMLError as exc:  # pragma: no cover - PyYAML marks every other error
        raise YamlSyntaxError(str(exc).splitlines()[0] if str(exc) else "not YAML", 1) from None
    except UnicodeEncodeError as exc:  # a lone surrogate (text from a widget, never from a file)
        raise YamlSyntaxError("text holds a character that is not valid Unicode", _line_at(text, exc.start)) from None
    finally:
        loader.dispose()


_C_PARSER = _BaseLoader is not yaml.SafeLoader  # libyaml reports byte offsets, the pure-Python reader characters


def _line_at(text: str, position: int, *, utf8: bool = False) -> int:
    prefix = text.encode("utf-8", "surrogatepass")[:position].decode("utf-8", "ignore") if utf8 else text[:position]
    return len(_LINE_BREAKS.findall(prefix)) + 1


def _refuse(kind: str, what: str, event: yaml.Event) -> YamlSyntaxError:
    return YamlSyntaxError(
        f"{what} not allowed in workspace files: anchors (&), aliases (*) and merge keys (<<) "
        "are refused (dashmem never writes them); write the value out in full"
        if kind in ("anchor", "alias", "merge")
        else what,
        event.start_mark.line + 1,
        kind,
    )


def _build(loader: yaml.SafeLoader) -> Document:
    """The document from the loader's events: an explicit stack, so no depth can overflow Python's."""
    doc = Document(data=None)
    # One frame per open collection: [container, path, is_mapping, pending key or _NO_KEY]
    stack: list[list] = []
    documents = 0
    scalar = yaml.ScalarNode
    while loader.check_event():
        event = loader.get_event()
        kind = type(event)
        if kind is yaml.AliasEvent:
            raise _refuse("alias", f"alias *{event.anchor} is", event)
        if kind is yaml.DocumentStartEvent:
            documents += 1
            if documents > 1:
                raise YamlSyntaxError("expected a single document in the stream, but found another document", event.start_mark.line + 1)
            continue
        if kind in (yaml.StreamStartEvent, yaml.StreamEndEvent, yaml.DocumentEndEvent):
            continue
        if kind is yaml.SequenceEndEvent or kind is yaml.MappingEndEvent:
            value = stack.pop()[0]
            if stack:
                _attach(stack[-1], value, doc, event)
            else:
                doc.data = value
            continue
        if event.anchor is not None:
            raise _refuse("anchor", f"anchor &{event.anchor} is", event)
        line = event.start_mark.line + 1
        parent = stack[-1] if stack else None
        is_key = parent is not None and parent[2] and parent[3] is _NO_KEY
        if kind is yaml.ScalarEvent:
            tag = event.tag
            if tag is None or tag == "!":
                tag = loader.resolve(scalar, event.value, event.implicit)
            if tag == _MERGE_TAG and is_key:
                raise _refuse("merge", "merge key << is", event)
            value = _scalar(loader, tag, event)
            if parent is None:
                doc.value_lines[()] = line
                doc.data = value
            elif is_key:
                _attach(parent, value, doc, event)
            else:
                doc.value_lines[_child(parent)] = line
                _attach(parent, value, doc, event)
            continue
        # a sequence or mapping starts
        mapping = kind is yaml.MappingStartEvent
        if event.tag not in (_MAP_TAGS if mapping else _SEQ_TAGS):
            raise YamlSyntaxError(
                f"tag {_short_tag(event.tag)} is not allowed in workspace files: they hold plain mappings, lists, text, numbers, true/false and null",
                line,
                "tag",
            )
        if is_key:
            raise YamlSyntaxError(f"a mapping key must be plain text or a number, not a {'mapping' if mapping else 'list'}", line, "key")
        if len(stack) >= MAX_DEPTH:
            raise YamlSyntaxError(f"nested more than {MAX_DEPTH} levels deep; workspace files never are", line, "depth")
        path = _child(parent) if parent is not None else ()
        doc.value_lines[path] = line
        stack.append([{} if mapping else [], path, mapping, _NO_KEY])
    return doc


def _child(frame: list) -> JsonPath:
    """The path of the next value in an open collection."""
    return frame[1] + ((frame[3],) if frame[2] else (len(frame[0]),))


def _attach(frame: list, value: Any, doc: Document, event: yaml.Event) -> None:
    container_, path, mapping, key = frame
    if not mapping:
        container_.append(value)
    elif key is _NO_KEY:  # `value` is a key (a scalar: collections were refused as keys)
        if value in container_:
            raise YamlSyntaxError(f"duplicate key {value!r}", event.start_mark.line + 1)
        doc.key_lines[path + (value,)] = event.start_mark.line + 1
        frame[3] = value
    else:
        container_[key] = value
        frame[3] = _NO_KEY


def _scalar(loader: yaml.SafeLoader, tag: str, event: yaml.ScalarEvent) -> Any:
    if tag == _TAG + "str" or tag == _VALUE_TAG or tag == _MERGE_TAG:
        return event.value
    if tag == _TAG + "null":
        return None
    if tag not in _SCALAR_TAGS:
        raise YamlSyntaxError(
            f"tag {_short_tag(tag)} is not allowed in workspace files: they hold plain mappings, lists, text, numbers, true/false and null",
            event.start_mark.line + 1,
            "tag",
        )
    node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
    try:
        return loader.yaml_constructors[tag](loader, node)
    except Exception:  # `!!int abc`, `!!bool maybe`
        # The value is not repeated: it may be a password pasted in the wrong place.
        raise YamlSyntaxError(f"the value is not a valid {_short_tag(tag)}", event.start_mark.line + 1) from None


def _short_tag(tag: str | None) -> str:
    return "!!" + tag[len(_TAG) :] if tag and tag.startswith(_TAG) else str(tag)


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
    if _OTHER_BREAKS.search(value):
        # NEL and the Unicode line and paragraph separators are line breaks to a YAML reader:
        # written raw (allow_unicode) they read back as a space or a newline. Escaped, they survive.
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')
    lines = value.split("\n")
    block = len(lines) > 1 and "\r" not in value and all(l == l.rstrip(" \t") for l in lines)
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if block else None)


_OTHER_BREAKS = re.compile("[\x85\u2028\u2029]")


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


_CanonicalDumper.add_representer(_FlowList, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=True))
_CanonicalDumper.add_representer(_FlowDict, lambda d, v: d.represent_mapping("tag:yaml.org,2002:map", v.items(), flow_style=True))
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
