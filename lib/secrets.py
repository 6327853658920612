"""Secret references: `env:NAME` or `secrets:KEY` (Streamlit secrets), resolved at fetch time.

Workspace files only ever hold references. Resolved values live in memory for
the duration of one fetch, and `redact` scrubs them out of any error text
before it is shown, logged or returned.
"""
from __future__ import annotations

import os
import re
from typing import Any, Iterable

# Same forms as `secret_ref` in schemas/sources.schema.json.
REF_RE = re.compile(r"^(?:env:([A-Za-z_][A-Za-z0-9_]*)|secrets:([A-Za-z0-9_][A-Za-z0-9_.-]*))$")


# The app's own credentials (the sign-in cookie key, the Anthropic key) are never
# a source's secret: a steward could otherwise send them to a server they control.
RESERVED_ENV_PREFIXES = ("DASHMEM_", "ANTHROPIC_")
RESERVED_SECRET_SECTIONS = ("auth", "anthropic")


class SecretMissing(KeyError):
    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


def refused(kind: str, key: str) -> str | None:
    """Why a source may not use this reference, or None.

    DASHMEM_SECRET_ALLOW (comma-separated prefixes, e.g. `SRC_,sources.`)
    narrows the references sources may use to those prefixes.
    """
    if kind == "env" and key.upper().startswith(RESERVED_ENV_PREFIXES):
        return f"env:{key} belongs to the app itself; sources may not use it"
    if kind == "secrets" and (key.split(".")[0].lower() in RESERVED_SECRET_SECTIONS or key.upper().startswith(RESERVED_ENV_PREFIXES)):
        return f"secrets:{key} belongs to the app itself; sources may not use it"
    allow = [p.strip() for p in os.environ.get("DASHMEM_SECRET_ALLOW", "").split(",") if p.strip()]
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
    value = _streamlit_secret(key)
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


def _streamlit_secret(dotted: str) -> Any:
    try:
        import streamlit as st

        node: Any = st.secrets
        for part in dotted.split("."):
            node = node[part]
        return node
    except Exception:  # no secrets file, or no such key: treated as unset
        return None


def redact(text: str, values: Iterable[str]) -> str:
    """Replace every resolved secret value in `text` with ***."""
    for value in sorted((v for v in values if v), key=len, reverse=True):
        if len(value) >= 3:
            text = text.replace(value, "***")
    return text


_URL_PASSWORD = re.compile(r'(://[^/@:\s"]*):[^"\n]*@')  # up to the last @: passwords may hold @ and spaces
_QUERY_PASSWORD = re.compile(r"(?i)([?&](?:password|passwd|pwd)=)[^&\s\"]*")


def redact_url(text: str, mask: str = "***") -> str:
    """Text with any password in a URL (`user:password@`, `?password=`) replaced by `mask`."""
    text = _URL_PASSWORD.sub(lambda m: f"{m.group(1)}:{mask}@", text)
    return _QUERY_PASSWORD.sub(lambda m: f"{m.group(1)}{mask}", text)
