"""HTTP transports for REST and MCP sources that connect only where `lib.data.netguard` allows.

httpcore network backends under the httpx (REST) and httpx2 (MCP's streamable HTTP) transports: each
connection a client opens, redirects and next-page links included, goes to an address `netguard` has
just checked, never to the name (see `lib.data.netguard` for the rules).
"""

from __future__ import annotations

import socket
import ssl
from typing import Any

import anyio
import anyio.to_thread
import httpcore
import httpcore2
import httpx
import httpx2

from ..netguard import Refused, _bare, check, checked_addresses, refused_name, resolve


class _GuardedBackend(httpcore.NetworkBackend):
    """httpcore's own backend, connecting only to checked addresses (REST sources, httpx).

    One backend serves one client, that is one fetch: each (host, port) is
    resolved and checked once and its connections all go to those addresses.
    """

    def __init__(self):
        self.inner = httpcore.SyncBackend()
        self.pinned: dict[tuple[str, int], list[str]] = {}

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        key = (_bare(host), port)
        if key not in self.pinned:
            try:
                self.pinned[key] = check(host, port)
            except socket.gaierror as exc:
                raise httpcore.ConnectError(f"cannot resolve {_bare(host)}: {exc.strerror or exc}") from None
        last: Exception | None = None
        for address in self.pinned[key]:
            try:
                return self.inner.connect_tcp(address, port, timeout=timeout, local_address=local_address, socket_options=socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        raise last  # type: ignore[misc]  # checked_addresses never returns an empty list

    def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise Refused("unix sockets are not reachable by sources; refused")

    def sleep(self, seconds):
        self.inner.sleep(seconds)


class _GuardedAsyncBackend(httpcore2.AsyncNetworkBackend):
    """The same for httpcore2 under anyio (MCP sources over streamable HTTP, httpx2)."""

    def __init__(self):
        self.inner: httpcore2.AsyncNetworkBackend = httpcore2.AnyIOBackend()  # pyright: ignore[reportAttributeAccessIssue]  # httpcore2 also declares a stand-in for when anyio is missing
        self.pinned: dict[tuple[str, int], list[str]] = {}
        self.resolving: anyio.Lock | None = None  # connections open concurrently (the POSTs, the GET stream)

    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        key = (_bare(host), port)
        self.resolving = self.resolving or anyio.Lock()
        async with self.resolving:  # one lookup per host, even for connections opened at the same time
            if key not in self.pinned:
                reason = refused_name(host)  # before any lookup: a metadata name is never resolved
                if reason:
                    raise Refused(reason)
                try:
                    answers = await anyio.to_thread.run_sync(resolve, host, port, abandon_on_cancel=True)
                    self.pinned[key] = checked_addresses(host, answers)
                except socket.gaierror as exc:
                    raise httpcore2.ConnectError(f"cannot resolve {_bare(host)}: {exc.strerror or exc}") from None
        last: Exception | None = None
        for address in self.pinned[key]:
            try:
                return await self.inner.connect_tcp(address, port, timeout=timeout, local_address=local_address, socket_options=socket_options)
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as exc:
                last = exc
        raise last  # type: ignore[misc]

    async def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise Refused("unix sockets are not reachable by sources; refused")

    async def sleep(self, seconds):
        await self.inner.sleep(seconds)


def http_transport(ssl_context: ssl.SSLContext | None = None) -> httpx.HTTPTransport:
    """An httpx transport that connects only where sources may (no proxy; TLS verified as httpx does by default).

    `ssl_context` replaces the default one (a client certificate, private CAs: lib/data/connectors/tls.py).
    """
    transport = httpx.HTTPTransport()
    _replace_pool(
        transport,
        httpcore.ConnectionPool,
        httpcore.ConnectionPool(
            ssl_context=ssl_context or httpx.create_ssl_context(),
            network_backend=_GuardedBackend(),
            **POOL_LIMITS,
        ),
    )
    return transport


def async_http_transport(ssl_context: ssl.SSLContext | None = None) -> httpx2.AsyncHTTPTransport:
    """The same for httpx2's AsyncClient, which the MCP SDK's streamable HTTP client takes.

    `ssl_context` replaces the default one (a client certificate, private CAs: lib/data/connectors/tls.py).
    """
    transport = httpx2.AsyncHTTPTransport()
    _replace_pool(
        transport,
        httpcore2.AsyncConnectionPool,
        httpcore2.AsyncConnectionPool(
            ssl_context=ssl_context or httpx2.create_ssl_context(),
            network_backend=_GuardedAsyncBackend(),
            **POOL_LIMITS,
        ),
    )
    return transport


# httpx's default limits, which its transports would have given their pools.
POOL_LIMITS = {"max_connections": 100, "max_keepalive_connections": 20, "keepalive_expiry": 5.0}


def _replace_pool(transport: Any, expected: type, pool: Any) -> None:
    """Put `pool` where the transport keeps its connection pool.

    httpx's transports take no network backend, but they build an httpcore pool
    (which does) and send every request through `_pool`. Fail loudly rather than
    connect unchecked if a later httpx keeps it elsewhere.
    """
    if not isinstance(getattr(transport, "_pool", None), expected):
        raise RuntimeError(f"{type(transport).__module__} keeps its connection pool elsewhere; lib/data/netguard.py needs updating")
    transport._pool = pool
