"""Secret references: `env:NAME` or `secrets:KEY` (Streamlit secrets), resolved at fetch time.

Workspace files only ever hold references. Resolved values live in memory for
the duration of one fetch, and `redact` scrubs them out of any error text
before it is shown, logged or returned.
"""

from __future__ import annotations

import os
import re
from typing import Any

from ..core import settings
from ..core.errors import DashmemError
from .credentials import is_secret_name, url_problems

# Same forms as `secret_ref` in schemas/sources.schema.json.
REF_RE = re.compile(r"^(?:env:([A-Za-z_][A-Za-z0-9_]*)|secrets:([A-Za-z0-9_][A-Za-z0-9_.-]*))$")


# The app's own credentials (the sign-in cookie key, the Anthropic key) are never
# a source's secret: a steward could otherwise send them to a server they control.
RESERVED_ENV_PREFIXES = ("DASHMEM_", "ANTHROPIC_")
RESERVED_SECRET_SECTIONS = ("auth", "anthropic")


class SecretMissing(DashmemError, KeyError):
    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


def reserved(kind: str, key: str) -> str | None:
    """Why a reference names the app's own credentials, or None. Depends on the reference only,
    so `validate` refuses it whatever server runs it."""
    if kind == "env" and key.upper().startswith(RESERVED_ENV_PREFIXES):
        return f"env:{key} belongs to the app itself; sources may not use it"
    if kind == "secrets" and (key.split(".")[0].lower() in RESERVED_SECRET_SECTIONS or key.upper().startswith(RESERVED_ENV_PREFIXES)):
        return f"secrets:{key} belongs to the app itself; sources may not use it"
    return None


def refused(kind: str, key: str) -> str | None:
    """Why a source may not use this reference, or None.

    DASHMEM_SECRET_ALLOW (comma-separated prefixes, e.g. `SRC_,sources.`)
    narrows the references sources may use to those prefixes.
    """
    reason = reserved(kind, key)
    if reason:
        return reason
    allow = settings.get("DASHMEM_SECRET_ALLOW")
    if allow and not any(key.startswith(prefix) for prefix in allow):
        return f"{kind}:{key} is not among the references this server allows sources to use (DASHMEM_SECRET_ALLOW)"
    return None


def is_reference(value: Any) -> bool:
    return isinstance(value, str) and bool(REF_RE.match(value))


def resolve(ref: str) -> str:
    """A source's secret: the value a reference points to, if sources may use it.

    Raises SecretMissing naming the reference only, never a value.
    """
    kind, key = _parse(ref)
    reason = refused(kind, key)
    if reason:
        raise SecretMissing(reason)
    return lookup(ref)


def lookup(ref: str) -> str:
    """The value behind a reference, for the app's own credentials (no source policy applies)."""
    kind, key = _parse(ref)
    if kind == "env":
        value = os.environ.get(key)
        if value is None:
            raise SecretMissing(f"secret {ref} is not set: define the environment variable {key}")
        return value
    value = settings.streamlit_secret(key)
    if value is None:
        raise SecretMissing(f"secret {ref} is not set: add `{key}` to .streamlit/secrets.toml")
    return str(value)


def first_set(*refs: str) -> str | None:
    """The first of the app's own references that holds a non-empty value, if any."""
    for ref in refs:
        try:
            value = lookup(ref)
        except SecretMissing:
            continue
        if value:
            return value
    return None


def _parse(ref: str) -> tuple[str, str]:
    match = REF_RE.match(ref or "") if isinstance(ref, str) else None
    if not match:
        # Never repeat the value: it may be a real password pasted in the wrong place.
        raise SecretMissing("a secret setting holds a literal value, not a reference (use env:NAME or secrets:KEY)")
    env_name, secrets_key = match.groups()
    return ("env", env_name) if env_name else ("secrets", secrets_key)


def _literal(value: Any) -> bool:
    """A value that is a credential written out (not empty, not a reference, not a switch)."""
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, str):
        return bool(value.strip()) and not is_reference(value.strip())
    return isinstance(value, (int, float))


def _holds_literal(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_holds_literal(v) for v in value.values())
    if isinstance(value, list):
        return any(_holds_literal(v) for v in value)
    return _literal(value)


def _walk_literals(value: Any, path: tuple) -> list[tuple[tuple, str]]:
    """(path, name) of every literal value under a secret-looking name, at any depth."""
    out = []
    if isinstance(value, dict):
        for key, item in value.items():
            found = _walk_literals(item, path + (key,))  # the innermost name first: `auth: {client_secret: ...}`
            if not found and is_secret_name(key) and _holds_literal(item):
                found = [(path + (key,), str(key))]
            out.extend(found)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out.extend(_walk_literals(item, path + (i,)))
    return out


def _references(value: Any, path: tuple) -> list[tuple[tuple, str]]:
    if isinstance(value, str):
        return [(path, value.strip())] if is_reference(value.strip()) else []
    if isinstance(value, dict):
        return [found for key, item in value.items() for found in _references(item, path + (key,))]
    if isinstance(value, list):
        return [found for i, item in enumerate(value) for found in _references(item, path + (i,))]
    return []


def source_problems(source: Any) -> list[tuple[tuple, str, str]]:
    """Why one source (as in sources.yaml) would commit a credential or reach for the app's own:
    (path inside the source, diagnostic id, message). Messages never hold a value.

    Literal `password` and `secret_headers` values are the schema's to refuse (it
    only accepts references there); this covers what the schema cannot say.
    """
    if not isinstance(source, dict):
        return []
    out: list[tuple[tuple, str, str]] = []
    for message in url_problems(source.get("url")):
        out.append((("url",), "secret.in_url", message))
    headers = source.get("headers")
    if isinstance(headers, dict):
        for name in headers:
            if is_secret_name(name):
                out.append((("headers", name), "secret.header", f"header {name} carries a credential; credentials go in secret_headers, as references"))
    for section in ("params", "body", "arguments"):
        for path, name in _walk_literals(source.get(section), (section,)):
            out.append((path, "secret.literal", f"{name} holds a credential written out, which would be committed to git as written"))
    for path, ref in _references(source, ()):
        kind, key = _parse(ref)
        reason = reserved(kind, key)
        if reason:
            out.append((path, "secret.reserved", f"{reason} (the app's sign-in cookie key and model API key are never a source's)"))
    return out
