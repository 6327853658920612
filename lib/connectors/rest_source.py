"""`rest` sources: JSON records from an HTTP API, page after page, as one Arrow table.

Secret header values are resolved at fetch time and sent only to the origin
(scheme, host and port) of the configured url: a redirect or a next-page link
that leads elsewhere is followed without them, so a token never reaches a
host it was not meant for.
"""

from __future__ import annotations

import json
import time
from typing import Any, Iterator

import httpx
import pyarrow as pa

from .. import netguard
from ..secrets import is_reference
from .base import FetchContext, dig, records_to_table

DEFAULT_TIMEOUT_S = 30
DEFAULT_RETRIES = 3
DEFAULT_MAX_PAGES = 100
BACKOFF_BASE_S = 0.2  # waits 0.2, 0.4, 0.8 ... seconds between attempts
BACKOFF_CAP_S = 5.0

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
    with _client(source, ctx) as client:
        api = _Api(client, source, ctx)
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


def _client(source: dict, ctx: FetchContext) -> httpx.Client:
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
        timeout=source.get("timeout_s", DEFAULT_TIMEOUT_S),
        follow_redirects=True,
        event_hooks={"request": [keep_secrets_home]},  # runs for every request, redirects included
        # Every connection (first request, redirect hops, next pages) goes only to addresses checked
        # by lib/netguard.py; it raises netguard.Refused for anything else.
        transport=netguard.http_transport(),
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
    """One source's requests: retries with backoff, and errors worded for people."""

    def __init__(self, client: httpx.Client, source: dict, ctx: FetchContext):
        self.client = client
        self.ctx = ctx
        self.name = source["name"]
        self.method = source.get("method", "GET")
        self.body = source.get("body") if self.method == "POST" else None
        self.records_path = source.get("records_path") or ""
        self.timeout_s = source.get("timeout_s", DEFAULT_TIMEOUT_S)
        self.attempts = 1 + source.get("retries", DEFAULT_RETRIES)

    def get_json(self, url: httpx.URL, params: dict) -> tuple[Any, httpx.URL]:
        """The parsed JSON answer and the URL that gave it (after redirects).

        `params` are merged into the url's own query string here: httpx's `params=` would replace it.
        """
        shown = _shown(url)
        tries = f"{self.attempts} attempt{'s' if self.attempts != 1 else ''}"
        failure = f"no request was made to {shown}"  # only if attempts were under one
        for attempt in range(1, self.attempts + 1):
            if attempt > 1:
                time.sleep(min(BACKOFF_BASE_S * 2 ** (attempt - 2), BACKOFF_CAP_S))
            try:
                response = self.client.request(self.method, url.copy_merge_params(params), json=self.body)
            except netguard.Refused as exc:  # where this source may not go: no use retrying
                raise self.ctx.error(self.name, str(exc)) from None
            except httpx.TimeoutException:
                failure = f"request to {shown} timed out after {tries} ({self.timeout_s:g} s each)"
                continue
            except httpx.TransportError as exc:  # refused, reset, DNS: maybe passing
                failure = f"cannot reach {shown} after {tries}: {exc}"
                continue
            except httpx.RequestError as exc:  # too many redirects, undecodable body: no use retrying
                raise self.ctx.error(self.name, f"request to {shown} failed: {exc}") from None
            if response.status_code >= 500:
                failure = f"HTTP {response.status_code} from {shown} after {tries}: {_excerpt(response)}"
                continue
            if response.is_error:  # 4xx: the request itself is wrong, retrying cannot help
                raise self.ctx.error(self.name, f"HTTP {response.status_code} from {shown}: {_excerpt(response)}")
            try:
                return response.json(), response.url
            except ValueError as exc:
                raise self.ctx.error(self.name, f"response is not valid JSON: {exc} (from {shown}, starting {_excerpt(response)!r})") from None
        raise self.ctx.error(self.name, failure)

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


def _excerpt(response: httpx.Response) -> str:
    return " ".join(response.text[:200].split()) or "(empty body)"
