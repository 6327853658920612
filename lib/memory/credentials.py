"""What looks like a credential, and scrubbing one out of text: names, URLs, resolved values.

Needs no settings and no secret store, so the schema checks (`schemas.py`) and every message that may hold
a URL use it; `secrets.py` resolves references and refuses literal secrets in a source with it.
"""

from __future__ import annotations

import re
from typing import Any, Iterable


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
    query (or fragment, or `;name=value` path) parameter with a value. The messages name parameters, never values."""
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
        # Spark Connect takes its parameters in the path: sc://host:15002/;use_ssl=true;token=...
        path_parameters = "&".join(parts.path.split(";")[1:])
        names = [
            name
            for query in (parts.query, parts.fragment, path_parameters)
            for name, value in parse_qsl(query, keep_blank_values=True)
            if value and is_secret_name(name)
        ]
        if names:
            listed = ", ".join(dict.fromkeys(names))
            out.append(f"the url's query string holds a credential ({listed}), which would be committed to git as written")
    return out
