"""`rest` sources: JSON records from an HTTP API, page after page, as one Arrow table.

Secret header values are resolved at fetch time and sent only to the origin
(scheme, host and port) of the configured url: a redirect or a next-page link
that leads elsewhere is followed without them, so a token never reaches a
host it was not meant for.

`tls:` presents a client certificate (mutual TLS) and trusts private CAs, with the
settings and PEM-by-reference rules of lib/data/connectors/tls.py. A TLS failure is a
setting to fix, not a passing fault: it fails at once, saying what to check.

A fetch never reports part of the data as the whole: an answer that says it was
truncated fails the source (unless `allow_truncated`), and so does running out of
`max_pages` while the server still offers a next page, or a next page (RFC 8288
`Link` header) offered to a source without pagination. Rows that are arrays are
zipped with the column names listed beside them (base.py's `records_to_table`).
"""

from __future__ import annotations

import itertools
import json
import ssl
from dataclasses import dataclass
from typing import Any, Iterator

import httpx
import pyarrow as pa

from ...memory.secrets import is_reference
from .. import netguard
from . import http, tls
from .base import FetchContext, SourceError, column_names, dig, records_to_table, truncation, with_note
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
    "next_link": (),  # the link at next_path in the body, else the Link header's rel="next"
}


def fetch(source: dict, ctx: FetchContext) -> pa.Table:
    name = source["name"]
    paging = source.get("pagination") or {}
    _check_pagination(name, paging, ctx)
    context = _ssl_context(source, ctx)
    records: list = []
    columns: list[str] | None = None
    cut: list[str] = []  # what the pages that said they were truncated said (allow_truncated only)
    with _client(source, ctx, context) as client:
        api = _Api(client, source, ctx, context)
        for page in _pages(api, source, paging, records):
            if page.columns is not None and any(isinstance(r, list) for r in page.records):
                if columns is not None and page.columns != columns:
                    raise ctx.error(name, f"the response from {_shown(page.url)} lists other columns than the first page did")
                columns = page.columns
            records.extend(page.records)
            if page.truncated:
                cut.append(api.truncated(page, len(records)))
    table = records_to_table(records, source=name, columns=columns, keep_text=source.get("columns") or {})
    for note in cut:
        table = with_note(table, note)
    return table


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


@dataclass
class _Page:
    """One answer: its JSON, the URL that gave it (after redirects), the Link header's next page, and what it holds."""

    payload: Any
    url: httpx.URL
    linked: str | None  # RFC 8288 `Link: <...>; rel="next"` (the only next link datasette's `_shape=array` gives)
    records: list
    columns: list[str] | None  # the column names listed beside array rows
    truncated: str | None  # what the answer says about being cut short


def _pages(api: _Api, source: dict, paging: dict, fetched: list) -> Iterator[_Page]:
    """Each page in turn, to an empty page or the last one; `fetched` is the caller's rows so far (for the errors).

    Running out of max_pages while the server still offers a next page fails: the page and offset
    styles ask for one page more to know, the cursor and next_link styles know from the last page.
    """
    style = paging.get("style")
    url = httpx.URL(source["url"])
    params = dict(source.get("params") or {})
    size = paging.get("size")
    limit = paging.get("max_pages", DEFAULT_MAX_PAGES)
    position = paging.get("start", 1 if style == "page" else 0)  # used by the page and offset styles only
    if style in ("page", "offset"):
        if size and paging.get("size_param"):
            params[paging["size_param"]] = size
    for number in itertools.count(1):
        if style in ("page", "offset"):
            params[paging["param"]] = position
        page = api.get(url, params)
        if number > limit:  # asked only to learn whether there is more (page and offset styles)
            if page.records:
                raise api.too_many_pages(limit, page.url, len(fetched))
            return
        yield page
        if not style:
            if page.linked:
                raise api.unfollowed(page)
            return
        if not page.records:
            return
        if style == "page":
            position += 1
        elif style == "offset":
            position += len(page.records)
            if size and len(page.records) < size:
                return
        elif style == "cursor":
            cursor = dig(page.payload, paging["cursor_path"])
            if cursor is None or cursor == "":
                return
            params[paging["param"]] = cursor
        elif style == "next_link":
            next_link = (dig(page.payload, paging["next_path"]) if paging.get("next_path") else None) or page.linked
            if not next_link:
                return
            # The link is complete: it already carries whatever query the API wants for the next page.
            url, params = page.url.join(str(next_link)), {}
        if number == limit and style in ("cursor", "next_link"):
            raise api.too_many_pages(limit, page.url, len(fetched))


class _Api:
    """One source's requests: retried as its policy says (lib/data/connectors/policy.py), errors worded for people."""

    def __init__(self, client: httpx.Client, source: dict, ctx: FetchContext, ssl_context: ssl.SSLContext | None):
        self.client = client
        self.ctx = ctx
        self.name = source["name"]
        self.method = source.get("method", "GET")
        self.body = source.get("body") if self.method == "POST" else None
        self.records_path = source.get("records_path") or ""
        self.columns_path = source.get("columns_path") or ""
        self.allow_truncated = bool(source.get("allow_truncated"))
        self.policy = RetryPolicy.of(source, DEFAULT_TIMEOUT_S)
        self.ssl_context = ssl_context
        self.sent_certificate = bool((source.get("tls") or {}).get("client_cert"))

    def get(self, url: httpx.URL, params: dict) -> _Page:
        """The page at `url` with `params`, merged into the url's own query string here (httpx's `params=` would replace it)."""
        payload, answered_url, linked = self.policy.run(lambda: self._attempt(url, params), self.name, self.ctx)
        return self.page(payload, answered_url, linked)

    def _attempt(self, url: httpx.URL, params: dict) -> tuple[Any, httpx.URL, str | None]:
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
            return response.json(), response.url, response.links.get("next", {}).get("url")
        except ValueError as exc:
            raise self.ctx.error(self.name, f"response is not valid JSON: {exc} (from {shown}, starting {_excerpt(response)!r})") from None

    def _tls_refusal(self, exc: httpx.TransportError, url: httpx.URL) -> ssl.SSLError | str | None:
        """The TLS failure behind a transport error: named by the error, or (TLS 1.3, where a server
        refuses a client certificate after the handshake, as a lost connection) found by asking again."""
        named = tls.ssl_error_in(exc)
        if named is not None or url.scheme != "https":
            return named
        return tls.refusal(str(url), self.ssl_context or httpx.create_ssl_context(), min(self.policy.timeout_s, 10))

    def page(self, payload: Any, answered_url: httpx.URL, linked: str | None) -> _Page:
        """What one answer holds: its records (at records_path), the column names beside array rows, and
        whether it says it was truncated (which fails the source unless it allows that)."""
        shown = _shown(answered_url)
        path = self.records_path
        if not path and isinstance(payload, dict) and isinstance(payload.get("rows"), list) and column_names(payload.get("columns")) is not None:
            path = "rows"  # {"columns": [...], "rows": [...]}: datasette's default shape and its ?sql= answers
        records = dig(payload, path)
        if not isinstance(records, list):
            if self.records_path and records is None:
                raise self.ctx.error(self.name, f"records_path {self.records_path!r} not found in the response from {shown}")
            found = f"an object with keys {', '.join(list(records)[:10])}" if isinstance(records, dict) else json.dumps(records)[:60]
            what = f"records_path {self.records_path!r} in the response from {shown} leads to" if self.records_path else f"the response from {shown} is"
            raise self.ctx.error(self.name, f"{what} {found}, not a list of records; set records_path to the list")
        around = dig(payload, path.rpartition(".")[0]) if path else None  # the object holding the records
        if self.columns_path:
            columns = column_names(dig(payload, self.columns_path))
            if columns is None:
                raise self.ctx.error(self.name, f"columns_path {self.columns_path!r} in the response from {shown} is not a list of column names")
        else:
            columns = column_names(around.get("columns")) if isinstance(around, dict) else None
        said = truncation(around) or truncation(payload)
        page = _Page(payload, answered_url, linked, records, columns, said)
        if said and not self.allow_truncated:
            raise self.ctx.error(
                self.name,
                f"the response from {shown} says it is truncated ({said}): the data would be incomplete. Ask for the rows "
                "page by page (pagination) instead, or set allow_truncated: true to load what it gives",
            )
        return page

    def truncated(self, page: _Page, rows: int) -> str:
        """The refresh report's warning for a truncated answer the source allows."""
        return f"warning: the response from {_shown(page.url)} says it is truncated ({page.truncated}); loaded the {rows:,} rows it gave, as allow_truncated allows"

    def too_many_pages(self, limit: int, url: httpx.URL, rows: int) -> SourceError:
        return self.ctx.error(
            self.name,
            f"stopped at pagination.max_pages ({limit:,} page{'s' if limit != 1 else ''}, {rows:,} rows) while the server still offers a next page "
            f"after {_shown(url)}: the data would be incomplete. Raise pagination.max_pages, or ask for larger pages",
        )

    def unfollowed(self, page: _Page) -> SourceError:
        return self.ctx.error(
            self.name,
            f'the response from {_shown(page.url)} links a next page (Link header, rel="next") but the source has no pagination, '
            "so only the first page would load; set pagination to {style: next_link} to follow the links",
        )


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
