"""The JSON Schemas of workspace files, and schema validation with readable errors.

jsonschema's own messages name neither the line nor what would have been
accepted; `validate_document` turns each error into a `Diagnostic` with the
file, the YAML line of the offending node, the field path, and what is allowed.

The schemas ship with the code, so whether they are themselves valid JSON
Schemas is checked once, at test time (`metaschema_problems`, run by
tests/memory/test_schemas.py), not in every process: that check cost a cold
`python -m lib refresh` about 0.17 s. jsonschema is imported on the first
validation, so commands that validate nothing never load it, and a document
already found valid is not validated again: `validate_document` remembers the
valid ones by a hash of their data, their schema and the installed jsonschema,
as an empty file in the cache (`valid-documents/`), so the processes cron and
users start (refresh, profile, query) skip importing jsonschema and building
validators, about 70 ms each. Only valid results are remembered; a document
with problems is validated every time, so its diagnostics are always fresh.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import importlib.util
import json
import os
import pickle
import random
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core import settings
from ..core.diagnostics import ERROR, Diagnostic, format_path
from ..core.settings import CHECKOUT, PACKAGE_DIR
from .credentials import is_secret_name, redact_url
from .yamlio import Document, declared_properties, resolve_ref

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError

# The checkout's schemas/ folder; an installed package carries the same files as dashmem/_schemas (pyproject.toml).
SCHEMA_DIR = CHECKOUT / "schemas" if CHECKOUT else PACKAGE_DIR / "_schemas"


@functools.cache
def load_schema(kind: str) -> dict:
    """The kind's schema, bundled: what it borrows from another schema file is copied into its `$defs`."""
    return _bundled(_read_schema_file(f"{kind}.schema.json"))


def _read_schema_file(name: str) -> dict:
    return json.loads((SCHEMA_DIR / name).read_text(encoding="utf-8"))


def _bundled(root: dict) -> dict:
    """`root` with every reference into another schema file (`dashboard.schema.json#/$defs/component`)
    replaced by a local one (`#/$defs/component`) to a copy of its target, and so on for what the copies refer to.

    The report schema reuses the dashboard's components this way. The rest of this module,
    lib/memory/yamlio.py's key order and the forms follow local references only, and a bundled
    schema needs no resolver of files. A copied definition keeps the last step of its pointer as its name;
    two different targets with one name are a mistake in the schema files, raised here (and so by the tests).
    """
    defs = root.get("$defs") or {}
    origin: dict[str, str] = {}  # a copied definition's name -> the file#pointer it came from
    foreign: dict[str, dict] = {}

    def localise(node: Any, source: str) -> None:
        if isinstance(node, list):
            for item in node:
                localise(item, source)
            return
        if not isinstance(node, dict):
            return
        ref = node.get("$ref")
        if isinstance(ref, str) and not (ref.startswith("#") and not source):
            file, _, pointer = ref.partition("#")
            file = file or source
            other = foreign.setdefault(file, _read_schema_file(file))
            name = pointer.rsplit("/", 1)[-1]
            where = f"{file}#{pointer}"
            if origin.get(name, where) != where or (name not in origin and name in defs):
                raise ValueError(f"schema bundling: {where} and another definition are both named {name!r}")
            if name not in origin:
                target: Any = other
                for part in pointer.strip("/").split("/"):
                    target = target[part]
                origin[name] = where
                defs[name] = copied = copy.deepcopy(target)
                localise(copied, file)
            node["$ref"] = f"#/$defs/{name}"
        for key, value in list(node.items()):
            if key != "$ref":
                localise(list(value.values()) if key == "$defs" else value, source)

    localise(root, "")
    if defs:
        root["$defs"] = defs
    return root


@functools.cache
def _validator(kind: str) -> "Draft202012Validator":
    """The kind's validator, built on first use and kept; the schema itself is not checked here (see the module doc)."""
    from jsonschema import Draft202012Validator

    return Draft202012Validator(load_schema(kind))


def metaschema_problems(folder: Path = SCHEMA_DIR) -> dict[str, str]:
    """file name -> why it is not a valid draft 2020-12 schema, for every `*.schema.json` in `folder`.

    Empty when all are valid. Run at test time (and by anyone editing a schema), not per process.
    """
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    problems: dict[str, str] = {}
    for file in sorted(Path(folder).glob("*.schema.json")):
        try:
            Draft202012Validator.check_schema(json.loads(file.read_text(encoding="utf-8")))
        except json.JSONDecodeError as exc:
            problems[file.name] = f"not JSON: {exc}"
        except SchemaError as exc:
            where = "/".join(map(str, exc.absolute_path)) or "(top level)"
            problems[file.name] = f"{where}: {exc.message}"
    return problems


# --------------------------------------------------------------------------- facts the code reads from the schemas
# The schemas are the one source of these facts (enums, patterns, defaults, titles,
# secret-bearing fields); code derives them here instead of re-typing them.

ITEMS, ANY_KEY = "[]", "*"  # path steps: a list's items; any key of a mapping (additionalProperties)


def node(kind: str, *path: str) -> dict:
    """The subschema at `path` in a kind's schema, with `$ref`s resolved.

    Steps are property names (including those of `allOf`/`then` branches), `ITEMS`
    for a list's items and `ANY_KEY` for a mapping's values. A first step that is not
    a top-level property but a `$defs` entry starts there:
    `node("sources", "source", "type")` is `$defs/source/properties/type`.
    """
    root = load_schema(kind)
    current = root
    steps = list(path)
    if steps and steps[0] not in declared_properties(root, root) and steps[0] in root.get("$defs", {}):
        current = root["$defs"][steps.pop(0)]
    for step in steps:
        current = resolve_ref(current, root)
        if step == ITEMS:
            current = current.get("items")
        elif step == ANY_KEY:
            current = current.get("additionalProperties")
        else:
            current = declared_properties(current, root).get(step)
        if not isinstance(current, dict):
            raise KeyError(f"{kind} schema has nothing at {'/'.join(path)}")
    return resolve_ref(current, root)


def enum(kind: str, *path: str) -> tuple:
    """The allowed values at `path`, in the schema's order."""
    return tuple(node(kind, *path)["enum"])


def pattern(kind: str, *path: str) -> str:
    """The regular expression a string at `path` must match."""
    return node(kind, *path)["pattern"]


def default(kind: str, *path: str) -> Any:
    """The schema's default at `path` (a copy: callers may change it)."""
    return copy.deepcopy(node(kind, *path)["default"])


_ANNOTATIONS = {"title", "description", "examples", "default", "$comment"}


def constraints(kind: str, *path: str) -> dict:
    """The subschema at `path` with `$ref`s resolved and annotations (descriptions, examples,
    defaults, titles, `x-` keywords) left out: what a value must satisfy, to embed elsewhere
    (a tool's input schema)."""
    root = load_schema(kind)

    def strip(schema: Any) -> Any:
        if isinstance(schema, list):
            return [strip(item) for item in schema]
        if not isinstance(schema, dict):
            return schema
        schema = resolve_ref(schema, root)
        out = {}
        for key, value in schema.items():
            if key in _ANNOTATIONS or key.startswith("x-"):
                continue
            if key in ("properties", "$defs", "patternProperties"):
                out[key] = {name: strip(sub) for name, sub in value.items()}
            else:
                out[key] = strip(value) if isinstance(value, (dict, list)) else value
        return out

    return strip(node(kind, *path))


def title(kind: str) -> str:
    """The memory category's title, as the UI and the prompt name it ("Task specifications")."""
    return load_schema(kind)["title"]


SECRET_KEYWORD = "x-secret"  # marks a schema node whose value is a secret (a reference, never the value)


def secret_fields(kind: str, *path: str) -> tuple[tuple[str, ...], ...]:
    """Paths (relative to `path`) of every value the schema marks `"x-secret": true`, in schema order.

    `secret_fields("sources", "source")` is `(("password",), ("secret_headers", "*"), ("env", "*"))`:
    a source's `password`, and every value of its `secret_headers` and `env` mappings.
    """
    root = load_schema(kind)
    found: dict[tuple[str, ...], None] = {}

    def walk(schema: Any, at: tuple[str, ...], seen: frozenset) -> None:
        if not isinstance(schema, dict):
            return
        ref = schema.get("$ref")
        if ref in seen:
            return  # a recursive definition: its fields were found on the way in
        seen = seen | {ref} if ref else seen
        schema = resolve_ref(schema, root)
        if schema.get(SECRET_KEYWORD) is True:
            found.setdefault(at)
            return
        for name, sub in declared_properties(schema, root).items():
            walk(sub, at + (name,), seen)
        if isinstance(schema.get("additionalProperties"), dict):
            walk(schema["additionalProperties"], at + (ANY_KEY,), seen)
        if isinstance(schema.get("items"), dict):
            walk(schema["items"], at + (ITEMS,), seen)

    walk(node(kind, *path) if path else root, (), frozenset())
    return tuple(found)


def header(kind: str) -> str:
    """First line of every workspace file, so editors validate and complete it."""
    return f"# yaml-language-server: $schema=../schemas/{kind}.schema.json"


VALID_DIR = "valid-documents"  # in the cache folder: an empty file per document found valid
VALID_KEEP = 5_000  # markers kept when the folder is pruned (now and then, past twice as many)


@functools.cache
def _schema_fingerprint(kind: str) -> bytes:
    """What a kind's validity depends on besides the document: its bundled schema and the jsonschema installed."""
    return hashlib.sha256(json.dumps([kind, load_schema(kind), jsonschema_stamp()], sort_keys=True).encode()).digest()


def _valid_marker(kind: str, data: Any) -> Path | None:
    """The cache file that says `data` is a valid `kind` document; None where the data cannot be hashed."""
    return valid_marker(_schema_fingerprint(kind), data)


def valid_marker(fingerprint: bytes, data: Any) -> Path | None:
    """The cache file that says `data` is valid under the schema `fingerprint` stands for; None where it cannot be hashed.

    Also used for other schemas than the workspace's (the Vega-Lite one: lib.artifacts.components.vegalite).
    """
    try:
        # pickle tells a date from the string of it and 1 from 1.0 and True, which JSON would not; it is only hashed.
        body = pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, ValueError, AttributeError, RecursionError):
        return None
    digest = hashlib.sha256(fingerprint + body).hexdigest()
    return settings.cache_dir() / VALID_DIR / digest[:2] / digest[2:]


def jsonschema_stamp() -> str:
    """The installed jsonschema, as a fingerprint part: where it is and when it was installed (found without importing it)."""
    spec = importlib.util.find_spec("jsonschema")
    origin = spec.origin if spec and spec.origin else ""
    return f"{origin}|{os.stat(origin).st_mtime_ns}" if origin else ""


def remember_valid(marker: Path) -> None:
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
        if random.random() < 0.01:
            _prune_valid(marker.parent.parent)
    except OSError:
        pass  # a read-only cache only costs the next process a validation


def _prune_valid(folder: Path) -> None:
    """Keep the VALID_KEEP newest markers once there are more than twice as many."""
    markers = [entry for sub in os.scandir(folder) if sub.is_dir() for entry in os.scandir(sub.path)]
    if len(markers) <= 2 * VALID_KEEP:
        return
    markers.sort(key=lambda entry: entry.stat().st_mtime, reverse=True)
    for entry in markers[VALID_KEEP:]:
        try:
            os.unlink(entry.path)
        except OSError:
            pass


def validate_document(kind: str, doc: Document, filename: str) -> list[Diagnostic]:
    if doc.data is None:
        return [Diagnostic("schema.empty", ERROR, "file is empty", filename, 1, None, "a mapping of fields")]
    marker = _valid_marker(kind, doc.data)
    if marker is not None and marker.exists():
        return []
    found = _validated(kind, doc, filename)
    if not found and marker is not None:
        remember_valid(marker)
    return found


def _validated(kind: str, doc: Document, filename: str) -> list[Diagnostic]:
    root = load_schema(kind)
    errors = sorted(_validator(kind).iter_errors(doc.data), key=lambda e: (list(map(str, e.absolute_path)), e.validator))
    # When a type-specific branch fails (say an unknown `type`), its fields
    # also show up as "unevaluated"; those echoes would bury the real error.
    failing = [tuple(e.absolute_path) for e in errors if e.validator != "unevaluatedProperties"]
    out: list[Diagnostic] = []
    for error in errors:
        path = tuple(error.absolute_path)
        echo = error.validator == "unevaluatedProperties" and any(p[: len(path)] == path for p in failing)
        out.extend(_explain(error, doc, filename, root, echo=echo))
    # One problem reported once, even when several schema branches saw it.
    unique: dict[tuple, Diagnostic] = {}
    for d in out:
        unique.setdefault((d.line, d.field, d.message), d)
    return sorted(unique.values(), key=lambda d: (d.line or 0, d.field or ""))


def _explain(error: "ValidationError", doc: Document, filename: str, root: dict, *, echo: bool = False) -> list[Diagnostic]:
    """Readable diagnostics for one schema error; `echo` marks unevaluated fields that a failing branch already explains."""
    path = tuple(error.absolute_path)
    field = format_path(path) or "(top level)"
    schema = error.schema if isinstance(error.schema, dict) else {}
    kind = error.validator
    given: Any = error.validator_value  # the stubs allow Unset; an error the validator raised always has it
    value = error.instance

    hidden = _holds_secret(schema, root) or any(is_secret_name(part) for part in path)
    if hidden:
        value = "<hidden>"  # a literal secret typed where a reference belongs, or under a credential's name: never echo it

    def diag(message: str, allowed: str | None = None, *, at: tuple = path, key: bool = False, name: str | None = None):
        return Diagnostic(f"schema.{kind}", ERROR, message, filename, doc.line_of(at, key=key), name or field, allowed)

    if kind in ("additionalProperties", "unevaluatedProperties"):
        unexpected = re.findall(r"'([^']*)'", error.message.split("(", 1)[-1]) if "(" in error.message else []
        allowed_keys = _allowed_keys(schema, value, root)
        known_anywhere = declared_properties(resolve_ref(schema, root), root)
        unexpected = [k for k in unexpected if k not in allowed_keys]
        if echo:
            unexpected = [k for k in unexpected if k not in known_anywhere]
        if not unexpected:
            return []
        return [
            diag(
                f"unknown field '{key}'" + _did_you_mean(key, allowed_keys),
                ", ".join(allowed_keys) or "no further fields",
                at=path + (key,),
                key=True,
                name=format_path(path + (key,)),
            )
            for key in unexpected
        ]
    if kind == "required":
        missing = given
        absent = [k for k in missing if isinstance(value, dict) and k not in value]
        return [diag(f"missing required field '{k}'", _describe(_property_schema(schema, k, root)), key=True) for k in absent]
    if kind == "type":
        expected = given
        expected = " or ".join(expected) if isinstance(expected, list) else expected
        return [diag(f"{_show(value)} is not of type {expected}", expected)]
    if kind == "enum":
        return [diag(f"{_show(value)} is not an allowed value", "one of " + ", ".join(map(str, given)))]
    if kind == "const":
        return [diag(f"{_show(value)} is not allowed", f"only {error.validator_value!r}")]
    if kind == "pattern":
        return [diag(f"{_show(value)} does not have the required form", _describe(schema) or f"pattern {error.validator_value}")]
    if kind == "not":
        return [diag(f"{_show(value)} is not allowed here", _describe(schema))]
    if kind == "propertyNames":
        return [diag(f"field name {_show(value)} is not allowed here", _describe(schema))]
    if kind == "oneOf":
        choices = [b.get("required") for b in given if isinstance(b, dict)]
        if all(isinstance(c, list) and len(c) == 1 for c in choices):
            names = [c[0] for c in choices if isinstance(c, list)]  # all are, as just checked
            present = [n for n in names if isinstance(value, dict) and n in value]
            verb = "set only one of" if present else "set one of"
            return [diag(f"{verb} {', '.join(names)}", "exactly one of " + ", ".join(names))]
        best = min(error.context, key=lambda e: len(list(e.absolute_path)), default=None)
        if best is not None:
            return _explain(best, doc, filename, root)
    if kind == "uniqueItems":
        return [diag("contains duplicate entries", "each entry once")]
    if hidden:  # jsonschema's own messages below quote the value
        return [diag(f"the value does not satisfy {kind} {error.validator_value!r}"[:200], _describe(schema))]
    if kind in ("minItems", "maxItems", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        return [diag(error.message.replace(repr(value), _show(value)), f"{kind} {error.validator_value}")]
    return [diag(redact_url(error.message), _describe(schema))]


def _allowed_keys(schema: dict, instance: Any, root: dict) -> list[str]:
    """Keys valid at this place, honouring `if/then` branches that apply to the instance."""
    from jsonschema import Draft202012Validator

    schema = resolve_ref(schema, root)
    keys = list(schema.get("properties", {}))
    for branch in schema.get("allOf", []):
        branch = resolve_ref(branch, root)
        condition = branch.get("if")
        if condition is not None:
            if Draft202012Validator(condition).is_valid(instance) and "then" in branch:
                keys += [k for k in declared_properties(resolve_ref(branch["then"], root), root) if k not in keys]
        else:
            keys += [k for k in declared_properties(branch, root) if k not in keys]
    return keys


def _property_schema(schema: dict, name: str, root: dict) -> dict:
    return resolve_ref(declared_properties(resolve_ref(schema, root), root).get(name, {}), root)


def _describe(schema: dict) -> str | None:
    if not isinstance(schema, dict):
        return None
    text = schema.get("description")
    examples = schema.get("examples")
    if text and examples:
        return f"{text} e.g. {json.dumps(examples[0], ensure_ascii=False)}"
    return text


def _holds_secret(schema: dict, root: dict) -> bool:
    """Whether the schema marks this value as a secret (`"x-secret": true`), so errors never echo it."""
    return isinstance(schema, dict) and resolve_ref(schema, root).get(SECRET_KEYWORD) is True


def _show(value: Any) -> str:
    if value == "<hidden>":
        return "a literal value"
    text = redact_url(json.dumps(value, ensure_ascii=False, default=str))
    return text if len(text) <= 60 else text[:57] + "..."


def _did_you_mean(key: str, choices: list[str]) -> str:
    import difflib

    close = difflib.get_close_matches(key, choices, n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""
