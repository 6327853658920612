"""Secret references: `env:NAME` or `secrets:KEY` (Streamlit secrets), resolved at fetch time.

Workspace files only ever hold references. Resolved values live in memory for
the duration of one fetch, and `redact` scrubs them out of any error text
before it is shown, logged or returned.
"""

from __future__ import annotations

import os
import re
from typing import Any, Iterable

from ..core import settings
from ..core.errors import DashmemError

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


def redact(text: str, values: Iterable[str]) -> str:
    """Replace every resolved secret value in `text` with ***."""
    for value in sorted((v for v in values if v), key=len, reverse=True):
        if len(value) >= 3:
            text = text.replace(value, "***")
    return text


_URL_PASSWORD = re.compile(r'(://[^/@:\s"]*):[^"\n]*@')  # up to the last @: passwords may hold @ and spaces
_QUERY_PARAM = re.compile(r'([?&#;]([^=&#;?\s"]+)=)([^&#;\s"]*)')


def redact_url(text: str, mask: str = "***") -> str:
    """Text with any credential in a URL (`user:password@`, `?password=`, `?access_token=`, `&key=` ...) replaced by `mask`."""
    text = _URL_PASSWORD.sub(lambda m: f"{m.group(1)}:{mask}@", text)
    return _QUERY_PARAM.sub(lambda m: f"{m.group(1)}{mask}" if m.group(3) and is_secret_name(m.group(2)) else m.group(0), text)


# --------------------------------------------------------------------------- literal secrets in a source
# Sources are committed to git and shown in reviews, so a credential typed as a
# literal value anywhere in one is refused by validation, not only at fetch time.

# Names that say "credential" wherever they appear inside a name (compared without case or separators) ...
_SECRET_PARTS = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "apikey",
    "accesskey",
    "privatekey",
    "clientkey",
    "appkey",
    "subscriptionkey",
    "masterkey",
    "signingkey",
    "sessionkey",
    "authkey",
    "credential",
    "accesstoken",
    "authtoken",
    "bearertoken",
    "refreshtoken",
    "idtoken",
    "privatetoken",
    "cookie",
    "authorization",
)
# ... as one word of a name (`X-Auth-Token`, `pageToken`; not `max_tokens`) ...
_SECRET_WORDS = {"token", "pwd", "sig", "signature", "jwt"}
# ... or as the whole name (`?key=`, `?auth=`; not `sort_key`, `author`).
_SECRET_NAMES = {"key", "auth", "pass", "bearer", "sid"}
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def is_secret_name(name: Any) -> bool:
    """Whether a parameter, header or field name says its value is a credential."""
    if not isinstance(name, str):
        return False
    flat = re.sub(r"[^a-z0-9]", "", name.lower())
    if flat in _SECRET_NAMES or any(part in flat for part in _SECRET_PARTS):
        return True
    return any(word.lower() in _SECRET_WORDS for word in _WORD.findall(name))


_URL_USERINFO_PASSWORD = re.compile(r"(?i)^[a-z][a-z0-9+.-]*://[^/?#@\s]*:(?![0-9]*(?:[/?#]|$))[^@\s]+@")


def url_problems(url: Any) -> list[str]:
    """Credentials written into a URL: a password in `user:password@`, or a secret-looking
    query (or fragment) parameter with a value. The messages name parameters, never values."""
    from urllib.parse import parse_qsl, urlsplit

    if not isinstance(url, str):
        return []
    out = []
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:  # not a URL a client would take; the schema and the connector say so
        parts, password = None, None
    if password or _URL_USERINFO_PASSWORD.match(url):
        out.append("the url holds a password (user:password@host), which would be committed to git as written")
    if parts is not None:
        names = [name for query in (parts.query, parts.fragment) for name, value in parse_qsl(query, keep_blank_values=True) if value and is_secret_name(name)]
        if names:
            listed = ", ".join(dict.fromkeys(names))
            out.append(f"the url's query string holds a credential ({listed}), which would be committed to git as written")
    return out


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
