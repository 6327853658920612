"""`rest` sources: JSON records from an HTTP API, page after page, as one Arrow table.

Secret header values are resolved at fetch time and sent only to the origin
(scheme, host and port) of the configured url: a redirect or a next-page link
that leads elsewhere is followed without them, so a token never reaches a
host it was not meant for.

`tls:` presents a client certificate (mutual TLS) and trusts private CAs, with the
settings and PEM-by-reference rules of lib/data/connectors/tls.py. A TLS failure is a
setting to fix, not a passing fault: it fails at once, saying what to check.
"""

from __future__ import annotations

import json
import ssl
from typing import Any, Iterator

import httpx
import pyarrow as pa

from ...memory.secrets import is_reference
from .. import netguard
from . import http, tls
from .base import FetchContext, dig, records_to_table
from .policy import RetryPolicy, Transient

DEFAULT_TIMEOUT_S = 30
DEFAULT_MAX_PAGES = 100

# Answers that say "not now" rather than "not this": too many requests, and a gateway whose backend
# is down, overloaded or slow. A 500 is the server failing at this very request; it fails at once.
RETRYABLE_STATUS = frozenset({429, 502, 503, 504})

# The settings each pagination style cannot do without.
PAGINATION_NEEDS = {
    "page": ("param",),
    "offset": ("param",),
    "cursor": ("param", "cursor_path"),
    "next_link": ("next_path",),
}


def fetch(source: dict, ctx: FetchContext) -> pa.Table:
    name = source["name"]
    paging = source.get("pagination") or {}
    _check_pagination(name, paging, ctx)
    context = _ssl_context(source, ctx)
    with _client(source, ctx, context) as client:
        api = _Api(client, source, ctx, context)
        records = [record for page in _pages(api, source, paging) for record in page]
    return records_to_table(records)


def _check_pagination(name: str, paging: dict, ctx: FetchContext) -> None:
    if not paging:
        return
    style = paging.get("style")
    if style not in PAGINATION_NEEDS:
        raise ctx.error(name, f"unknown pagination style {style!r}; known: {', '.join(PAGINATION_NEEDS)}")
    missing = [setting for setting in PAGINATION_NEEDS[style] if not paging.get(setting)]
    if missing:
        raise ctx.error(name, f"pagination style {style!r} needs {' and '.join(missing)}")


def _ssl_context(source: dict, ctx: FetchContext) -> ssl.SSLContext | None:
    """The context of `tls:` (a client certificate, private CAs), or None for httpx's default."""
    if not source.get("tls"):
        return None
    if not str(source.get("url", "")).lower().startswith("https://"):
        raise ctx.error(source["name"], "tls needs an https:// url (a client certificate is for a server reached over HTTPS)")
    return tls.client_context(source["name"], source["tls"], ctx)


def _client(source: dict, ctx: FetchContext, ssl_context: ssl.SSLContext | None) -> httpx.Client:
    name = source["name"]
    secret_headers = {}
    for header, ref in (source.get("secret_headers") or {}).items():
        if not is_reference(ref):  # checked here so that a pasted token is never echoed
            raise ctx.error(name, f"secret header {header} must be a secret reference (env:NAME or secrets:KEY), not the value itself")
        secret_headers[header] = ctx.secret(name, ref)
    try:
        home = _origin(httpx.URL(source["url"]))
    except httpx.InvalidURL as exc:
        raise ctx.error(name, f"url is not valid: {exc}") from None

    def keep_secrets_home(request: httpx.Request) -> None:
        if _origin(request.url) != home:
            for header in secret_headers:
                request.headers.pop(header, None)

    return httpx.Client(
        headers={**(source.get("headers") or {}), **secret_headers},
        timeout=RetryPolicy.of(source, DEFAULT_TIMEOUT_S).timeout_s,
        follow_redirects=True,
        event_hooks={"request": [keep_secrets_home]},  # runs for every request, redirects included
        # Every connection (first request, redirect hops, next pages) goes only to addresses checked
        # by lib/data/netguard.py; it raises netguard.Refused for anything else.
        transport=http.http_transport(ssl_context),
    )


def _origin(url: httpx.URL) -> tuple:
    return url.scheme, url.host, url.port


def _pages(api: _Api, source: dict, paging: dict) -> Iterator[list]:
    """The records of each page in turn, stopping at an empty page, the last page or max_pages."""
    style = paging.get("style")
    url = httpx.URL(source["url"])
    params = dict(source.get("params") or {})
    size = paging.get("size")
    position = paging.get("start", 1 if style == "page" else 0)  # used by the page and offset styles only
    if style in ("page", "offset"):
        if size and paging.get("size_param"):
            params[paging["size_param"]] = size
    for _ in range(paging.get("max_pages", DEFAULT_MAX_PAGES) if style else 1):
        if style in ("page", "offset"):
            params[paging["param"]] = position
        payload, answered_url = api.get_json(url, params)
        records = api.records_in(payload, answered_url)
        yield records
        if not records:
            return
        if style == "page":
            position += 1
        elif style == "offset":
            position += len(records)
            if size and len(records) < size:
                return
        elif style == "cursor":
            cursor = dig(payload, paging["cursor_path"])
            if cursor is None or cursor == "":
                return
            params[paging["param"]] = cursor
        elif style == "next_link":
            next_link = dig(payload, paging["next_path"])
            if not next_link:
                return
            # The link is complete: it already carries whatever query the API wants for the next page.
            url, params = answered_url.join(str(next_link)), {}


class _Api:
    """One source's requests: retried as its policy says (lib/data/connectors/policy.py), errors worded for people."""

    def __init__(self, client: httpx.Client, source: dict, ctx: FetchContext, ssl_context: ssl.SSLContext | None):
        self.client = client
        self.ctx = ctx
        self.name = source["name"]
        self.method = source.get("method", "GET")
        self.body = source.get("body") if self.method == "POST" else None
        self.records_path = source.get("records_path") or ""
        self.policy = RetryPolicy.of(source, DEFAULT_TIMEOUT_S)
        self.ssl_context = ssl_context
        self.sent_certificate = bool((source.get("tls") or {}).get("client_cert"))

    def get_json(self, url: httpx.URL, params: dict) -> tuple[Any, httpx.URL]:
        """The parsed JSON answer and the URL that gave it (after redirects).

        `params` are merged into the url's own query string here: httpx's `params=` would replace it.
        """
        return self.policy.run(lambda: self._attempt(url, params), self.name, self.ctx)

    def _attempt(self, url: httpx.URL, params: dict) -> tuple[Any, httpx.URL]:
        shown = _shown(url)
        try:
            response = self.client.request(self.method, url.copy_merge_params(params), json=self.body)
        except netguard.Refused as exc:  # where this source may not go: no use retrying
            raise self.ctx.error(self.name, str(exc)) from None
        except httpx.TimeoutException:
            raise Transient(f"request to {shown} timed out", f" ({self.policy.timeout_s:g} s each)") from None
        except httpx.TransportError as exc:  # refused, reset, DNS: maybe passing, unless TLS is what failed
            refused = self._tls_refusal(exc, url)
            if refused is not None:
                raise self.ctx.error(self.name, tls.problem(refused, f"the server at {shown}", self.sent_certificate)) from None
            raise Transient(f"cannot reach {shown}", f": {exc}") from None
        except httpx.RequestError as exc:  # too many redirects, undecodable body: no use retrying
            raise self.ctx.error(self.name, f"request to {shown} failed: {exc}") from None
        if response.status_code in RETRYABLE_STATUS:
            raise Transient(f"HTTP {response.status_code} from {shown}", f": {_excerpt(response)}", _retry_after_s(response))
        if response.is_error:  # the request itself is wrong, or the server fails at it: retrying cannot help
            raise self.ctx.error(self.name, f"HTTP {response.status_code} from {shown}: {_excerpt(response)}")
        try:
            return response.json(), response.url
        except ValueError as exc:
            raise self.ctx.error(self.name, f"response is not valid JSON: {exc} (from {shown}, starting {_excerpt(response)!r})") from None

    def _tls_refusal(self, exc: httpx.TransportError, url: httpx.URL) -> ssl.SSLError | str | None:
        """The TLS failure behind a transport error: named by the error, or (TLS 1.3, where a server
        refuses a client certificate after the handshake, as a lost connection) found by asking again."""
        named = tls.ssl_error_in(exc)
        if named is not None or url.scheme != "https":
            return named
        return tls.refusal(str(url), self.ssl_context or httpx.create_ssl_context(), min(self.policy.timeout_s, 10))

    def records_in(self, payload: Any, answered_url: httpx.URL) -> list:
        records = dig(payload, self.records_path)
        if isinstance(records, list):
            return records
        shown = _shown(answered_url)
        if self.records_path and records is None:
            raise self.ctx.error(self.name, f"records_path {self.records_path!r} not found in the response from {shown}")
        found = f"an object with keys {', '.join(list(records)[:10])}" if isinstance(records, dict) else json.dumps(records)[:60]
        what = f"records_path {self.records_path!r} in the response from {shown} leads to" if self.records_path else f"the response from {shown} is"
        raise self.ctx.error(self.name, f"{what} {found}, not a list of records; set records_path to the list")


def _shown(url: httpx.URL) -> str:
    """The URL without query string or credentials: either may hold something that must not be shown."""
    return str(url.copy_with(query=None, fragment=None, userinfo=b""))


def _retry_after_s(response: httpx.Response) -> float | None:
    """The seconds a Retry-After header asks for (the HTTP-date form is left to the backoff)."""
    try:
        return max(0.0, float(response.headers.get("Retry-After", "")))
    except ValueError:
        return None


def _excerpt(response: httpx.Response) -> str:
    return " ".join(response.text[:200].split()) or "(empty body)"
