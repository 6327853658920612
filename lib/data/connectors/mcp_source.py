"""MCP source: call one tool, or read one resource, on an MCP server and turn the rows it answers into a table.

The server is either started as a `command` speaking stdio (in the workspace
folder, so relative script paths work, with `env` secrets in its environment)
or reached at a streamable-HTTP `url` (with `secret_headers`, and over HTTPS
with a client certificate and CAs from `tls`, see tls.py); a server that
answers 405 there is tried over the legacy HTTP+SSE transport. `timeout_s` bounds
each attempt at the whole fetch: start, handshake, call and shutdown of the
server; `retry` says how often to attempt it (policy.py).

The answer is read by result_text.py (JSON, Python literals, markdown, `key: value`
blocks, CSV/TSV; `result_format` pins one). One that the server says is incomplete
fails the source, unless `allow_truncated: true`, which loads it with a note on the
refresh report.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import ssl
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import IO, Any, TextIO

import anyio
import httpx2
import pyarrow as pa
from mcp import ClientSession, StdioServerParameters, stdio_client, types
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from ...core import settings
from .. import netguard
from . import http, tls
from .base import FetchContext, SourceError, size_text, with_note
from .policy import RetryPolicy, Transient
from .result_text import FORMATS, NotRows, Reading, Rows, excerpt, from_texts, from_value, wraps_rows

DEFAULT_TIMEOUT_S = 30

# The legacy HTTP+SSE client of the mcp SDK buffers at most this much of one server-sent event, and takes no
# other limit (mcp.shared._httpx_utils.sse_within_origin); streamable HTTP takes DASHMEM_MCP_MAX_MESSAGE_BYTES.
LEGACY_SSE_EVENT_BYTES = 1 << 20

Result = types.CallToolResult | types.ReadResourceResult


class _ReportedHere(logging.Filter):
    """Leaves out the SDK's traceback of an answer over the event limit: the source's error says it, in words."""

    def filter(self, record: logging.LogRecord) -> bool:
        failure = record.exc_info[1] if record.exc_info else None
        return not (isinstance(failure, httpx2.SSEError) and _over_event_limit(failure))


logging.getLogger("mcp.client.sse").addFilter(_ReportedHere())

# Answers of an HTTP server (or a gateway before it) that say "not now" rather than "not this".
RETRYABLE_STATUS = frozenset({429, 502, 503, 504})

# The TLS alerts a server sends when it will not take the client's certificate.
# How much of the server's stderr to quote when it dies; the end holds the traceback.
STDERR_TAIL_CHARS = 1500


@dataclass
class _Exchange:
    """What an attempt saw of the HTTP exchange: the status of every answer (the SDK turns an HTTP error
    into an anonymous one), and whether it went on over the legacy HTTP+SSE transport."""

    statuses: list[int] = field(default_factory=list)
    legacy: bool = False


class NoHandshake(RuntimeError):
    """Something answered, but refused or did not understand the MCP handshake."""


def fetch(source: dict, ctx: FetchContext) -> pa.Table:
    name = source.get("name", "?")
    policy = RetryPolicy.of(source, DEFAULT_TIMEOUT_S)
    ssl_context = None
    if source.get("tls"):
        if source.get("command") or not str(source.get("url", "")).startswith("https://"):
            raise ctx.error(name, "tls needs an https:// url (a client certificate is for a server reached over HTTPS)")
        ssl_context = tls.client_context(name, source["tls"], ctx)
    if source.get("result_format") and source["result_format"] not in FORMATS:
        raise ctx.error(name, f"result_format {source['result_format']!r} is not one of {', '.join(FORMATS)}")
    # Each attempt is a whole session: start or connect, handshake, call, shutdown. A tool an MCP source
    # calls only reads (as a source should), so calling it again after a lost answer does no harm.
    result = policy.run(lambda: _attempt(source, ctx, policy.timeout_s, ssl_context), name, ctx)
    return _table(result, source, ctx)


def _table(result: Result, source: dict, ctx: FetchContext) -> pa.Table:
    """The answer as a table; one the server says is incomplete fails, or with `allow_truncated` carries a note."""
    name = source.get("name", "?")
    try:
        rows = _rows(result, Reading.of(source))
    except NotRows as exc:
        raise ctx.error(name, f"{_target(source)} did not return rows: {exc}") from None
    if rows.truncated is None:
        return rows.table
    said = f'{_target(source)} says its answer is incomplete ("{excerpt(rows.truncated)}"); {rows.table.num_rows:,} rows came'
    if not source.get("allow_truncated"):
        raise ctx.error(name, f"{said}. Raise the server's limit or ask for fewer rows, or set allow_truncated: true to load partial data with a warning")
    note = f"partial data: {said} (allow_truncated: true)"
    return with_note(rows.table, ctx.redact(note))


def _attempt(source: dict, ctx: FetchContext, timeout_s: float, ssl_context: ssl.SSLContext | None) -> Result:
    name = source.get("name", "?")
    exchange = _Exchange()
    # The server's stderr goes to a file, not the app's console, so a server
    # that dies can be explained with its own last words.
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as server_stderr:
        try:
            return _run_blocking(_fetch_result, source, ctx, timeout_s, server_stderr, ssl_context, exchange)
        except SourceError:
            raise
        except BaseException as exc:  # anyio raises a BaseExceptionGroup when a cancellation is among the failures
            cause = _root_cause(exc)
            if isinstance(cause, SourceError):
                raise cause from None
            if isinstance(cause, netguard.Refused):
                raise ctx.error(name, str(cause)) from None
            if isinstance(cause, KeyboardInterrupt | SystemExit):
                raise
            if isinstance(cause, httpx2.TransportError) and tls.ssl_error_in(cause) is None and str(source.get("url", "")).startswith("https://"):
                refused = tls.refusal(source["url"], ssl_context or httpx2.create_ssl_context(), min(timeout_s, 10))
                if refused is not None:  # a TLS refusal that reached the HTTP client as a lost connection
                    raise ctx.error(name, tls.problem(refused, _where(source), ssl_context is not None and bool(source["tls"].get("client_cert")))) from None
            if isinstance(cause, httpx2.SSEError) and _over_event_limit(cause):
                raise ctx.error(name, _too_large(source, exchange.legacy)) from None
            transient = _transient(cause, source, timeout_s, server_stderr, exchange.statuses)
            if transient is not None:
                raise transient from None
            raise ctx.error(name, _explain(cause, source, ctx)) from None


def _run_blocking(async_fn, *args) -> Any:
    """Run the async client to completion from synchronous code.

    anyio.run starts a fresh event loop, which works in any thread without one
    (Streamlit's script threads). A caller already inside an event loop cannot
    start a second one in the same thread, so it gets a worker thread instead.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return anyio.run(async_fn, *args)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(anyio.run, async_fn, *args).result()


async def _fetch_result(
    source: dict, ctx: FetchContext, timeout_s: float, server_stderr: TextIO, ssl_context: ssl.SSLContext | None, exchange: _Exchange
) -> Result:
    name = source.get("name", "?")
    with anyio.fail_after(timeout_s):
        if source.get("command"):
            transport = stdio_client(_stdio_parameters(source, ctx), errlog=server_stderr)
            async with transport as (read_stream, write_stream):
                return await _query(ClientSession(read_stream, write_stream), source, ctx)
        headers = {header: ctx.secret(name, ref) for header, ref in (source.get("secret_headers") or {}).items()}
        # Every connection the SDK opens (POSTs, the GET stream, redirects it follows) goes only to
        # addresses checked by lib/data/netguard.py; it raises netguard.Refused for anything else.
        transport = http.async_http_transport(ssl_context)

        async def note_status(response: httpx2.Response) -> None:
            exchange.statuses.append(response.status_code)

        hooks = {"response": [note_status]}
        limit = settings.get("DASHMEM_MCP_MAX_MESSAGE_BYTES")
        try:
            async with httpx2.AsyncClient(headers=headers, timeout=timeout_s, transport=transport, event_hooks=hooks) as http_client:
                async with streamable_http_client(source["url"], http_client=http_client, max_sse_event_size=limit) as (read_stream, write_stream):
                    return await _query(ClientSession(read_stream, write_stream), source, ctx)
        except Exception:
            if exchange.statuses[:1] != [405]:
                raise
        # 405 to the first POST: a server of the legacy HTTP+SSE transport, whose url is its GET /sse stream.
        exchange.statuses.clear()
        exchange.legacy = True

        def legacy_client(headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None, auth: httpx2.Auth | None = None) -> httpx2.AsyncClient:
            return httpx2.AsyncClient(headers=headers, timeout=timeout, auth=auth, transport=http.async_http_transport(ssl_context), event_hooks=hooks)

        async with sse_client(source["url"], headers=headers, timeout=timeout_s, sse_read_timeout=timeout_s, httpx_client_factory=legacy_client) as (
            read_stream,
            write_stream,
        ):
            return await _query(ClientSession(read_stream, write_stream), source, ctx, exchange)


def allowed_command(command: list[str]) -> bool:
    """Whether the server operator allows this stdio command (DASHMEM_MCP_COMMANDS).

    Each entry (separated by `;`) is a command prefix, e.g.
    `python servers/inventory.py; npx -y @acme/mcp-server`; a source's command
    must start with one of them, word for word. Without the setting no stdio
    command runs: a source's command would otherwise run anything the server can.
    """
    entries = settings.get("DASHMEM_MCP_COMMANDS")
    return any(command[: len(prefix)] == prefix for prefix in entries)


def _stdio_parameters(source: dict, ctx: FetchContext) -> StdioServerParameters:
    name = source.get("name", "?")
    if not allowed_command(list(source["command"])):
        raise ctx.error(
            name,
            f"the command {source['command'][0]!r} is not allowed on this server; an operator lists the MCP servers sources may start in DASHMEM_MCP_COMMANDS",
        )
    env = {"PATH": _server_path()}
    env.update({var: ctx.secret(name, ref) for var, ref in (source.get("env") or {}).items()})
    program, *args = source["command"]
    return StdioServerParameters(command=program, args=args, env=env, cwd=ctx.workspace_path)


def _server_path() -> str:
    """The app's PATH, with the app's virtual environment first when it runs in one.

    Then `python` in a command means the interpreter that has `mcp` installed,
    even when the app was started without activating its environment.
    """
    path = os.environ.get("PATH", os.defpath)
    if sys.prefix != sys.base_prefix:
        return os.pathsep.join([os.path.dirname(sys.executable), path])
    return path


async def _query(session: ClientSession, source: dict, ctx: FetchContext, exchange: _Exchange | None = None) -> Result:
    name = source.get("name", "?")
    async with session:
        try:
            await session.initialize()
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED:  # a dying stdio server; explained with its stderr
                raise
            raise NoHandshake(exc.message) from None
        try:
            if source.get("resource"):
                return await session.read_resource(source["resource"])
            tool = source["tool"]
            available = await _tool_names(session)
            if tool not in available:
                raise ctx.error(name, f"MCP server has no tool {tool!r}; available tools: {', '.join(sorted(available)) or '(none)'}")
            result = await session.call_tool(tool, source.get("arguments") or {})
        except MCPError as exc:
            if _over_event_limit(exc):
                raise ctx.error(name, _too_large(source, bool(exchange and exchange.legacy))) from None
            raise
        if result.is_error:
            if _over_event_limit(result):
                raise ctx.error(name, _too_large(source, bool(exchange and exchange.legacy)))
            raise ctx.error(name, f"MCP tool {tool!r} failed: {_texts(result.content) or '(no message)'}")
        return result


def _over_event_limit(failure: Exception | types.CallToolResult) -> bool:
    """Whether the MCP client dropped the answer for its size (the SDK reports it as the tool's failure, or a lost stream)."""
    text = failure.message if isinstance(failure, MCPError) else _texts(failure.content) if isinstance(failure, types.CallToolResult) else str(failure)
    return "Server-sent event exceeded the" in text


def _too_large(source: dict, legacy: bool) -> str:
    """Our limit on one MCP answer, worded as ours: the tool did answer."""
    if legacy:
        return (
            f"the answer of {_target(source)} is larger than the {size_text(LEGACY_SSE_EVENT_BYTES)} the legacy HTTP+SSE transport "
            "takes here in one message (a fixed limit of its MCP client); serve the tool over streamable HTTP, or have it return fewer rows"
        )
    limit = settings.get("DASHMEM_MCP_MAX_MESSAGE_BYTES")
    return (
        f"the answer of {_target(source)} is larger than the {size_text(limit)} this server takes in one MCP message "
        "(DASHMEM_MCP_MAX_MESSAGE_BYTES); an operator may raise it, or have the tool return fewer rows"
    )


async def _tool_names(session: ClientSession) -> list[str]:
    names: list[str] = []
    cursor = None
    while True:
        page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        names.extend(tool.name for tool in page.tools)
        cursor = page.next_cursor
        if not cursor:
            return names


def _rows(result: Result, reading: Reading) -> Rows:
    if isinstance(result, types.ReadResourceResult):
        return from_texts([_resource_text(contents) for contents in result.contents], reading)
    # Structured rows are preferred over the text items that mirror them.
    structured = result.structured_content
    if isinstance(structured, list) or (isinstance(structured, dict) and wraps_rows(structured)):
        return from_value(structured, reading)
    texts = []
    for block in result.content:
        if not isinstance(block, types.TextContent):
            raise NotRows(f"the tool returned {block.type} content, not text")
        texts.append(block.text)
    if not texts and isinstance(structured, dict):
        return from_value(structured, reading)  # one object, with no text beside it: one row
    return from_texts(texts, reading)


def _resource_text(contents: types.TextResourceContents | types.BlobResourceContents) -> str:
    if isinstance(contents, types.BlobResourceContents):
        try:
            return base64.b64decode(contents.blob).decode("utf-8")
        except ValueError:
            raise NotRows(f"resource {contents.uri} is binary, not text") from None
    return contents.text


def _texts(content: list) -> str:
    return " ".join(block.text for block in content if isinstance(block, types.TextContent)).strip()


def _root_cause(exc: BaseException) -> BaseException:
    """The failure itself: anyio task groups wrap it in (nested) exception groups, beside cancellations."""
    while isinstance(exc, BaseExceptionGroup):
        real = [inner for inner in exc.exceptions if not isinstance(inner, asyncio.CancelledError)]
        exc = (real or list(exc.exceptions))[0]
    return exc


def _where(source: dict) -> str:
    command = source.get("command")
    return f"MCP server command {command}" if command else f"MCP server at {source.get('url')}"


def _transient(cause: BaseException, source: dict, timeout_s: float, server_stderr: IO[str], statuses: list[int]) -> Transient | None:
    """The failure as one worth another attempt, or None: a timeout, a connection refused or lost, an
    HTTP 429/502/503/504, a stdio server that exited before answering. TLS refusals are not."""
    where = _where(source)
    retry_status = [status for status in statuses if status in RETRYABLE_STATUS]
    if retry_status:
        return Transient(f"HTTP {retry_status[-1]} from {where}")
    if isinstance(cause, TimeoutError):
        return Transient(f"{where} timed out", f" ({timeout_s:g} s each; raise timeout_s if the tool is just slow)")
    if tls.ssl_error_in(cause) is not None:
        return None
    if isinstance(cause, httpx2.TransportError):
        return Transient(f"cannot reach {where}", f": {cause or type(cause).__name__}")
    if isinstance(cause, MCPError) and cause.code == types.CONNECTION_CLOSED and source.get("command"):
        return Transient(f"{where} exited or closed the connection before answering", _stderr_tail(server_stderr))
    return None


def _explain(cause: BaseException, source: dict, ctx: FetchContext) -> str:
    """A message for the person who configured the source, naming what to check (failures `_transient` let pass)."""
    command = source.get("command")
    where = _where(source)
    tls_error = tls.ssl_error_in(cause)
    if tls_error is not None:
        return tls.problem(tls_error, where, bool((source.get("tls") or {}).get("client_cert")))
    if isinstance(cause, OSError) and command:
        return f"cannot start {where} (working folder {ctx.workspace_path}): {cause}"
    if isinstance(cause, NoHandshake):
        hint = "" if command else " (check the URL's path; MCPServer serves /mcp, and /sse over the legacy HTTP+SSE transport)"
        return f"{where} did not complete the MCP handshake: {cause}{hint}"
    if isinstance(cause, httpx2.HTTPError):
        return f"cannot reach {where}: {cause or type(cause).__name__}"
    if isinstance(cause, MCPError):
        return f"{_target(source)} failed: {cause.message}"
    return f"{where}: {type(cause).__name__}: {cause}"


def _target(source: dict) -> str:
    if source.get("resource"):
        return f"MCP resource {source['resource']!r}"
    return f"MCP tool {source.get('tool')!r}"


def _stderr_tail(server_stderr: IO[str]) -> str:
    server_stderr.flush()
    server_stderr.seek(0)
    text = server_stderr.read().strip()
    if not text:
        return ""
    return "; its last output: " + text[-STDERR_TAIL_CHARS:]
