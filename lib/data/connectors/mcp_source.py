"""MCP source: call one tool, or read one resource, on an MCP server and turn its JSON rows into a table.

The server is either started as a `command` speaking stdio (in the workspace
folder, so relative script paths work, with `env` secrets in its environment)
or reached at a streamable-HTTP `url` (with `secret_headers`, and over HTTPS
with a client certificate and CAs from `tls`, see tls.py). `timeout_s` bounds
each attempt at the whole fetch: start, handshake, call and shutdown of the
server; `retry` says how often to attempt it (policy.py).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import ssl
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any, TextIO

import anyio
import httpx2
import pyarrow as pa
from mcp import ClientSession, StdioServerParameters, stdio_client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from ...core import settings
from .. import netguard
from . import http, tls
from .base import FetchContext, SourceError, records_to_table
from .policy import RetryPolicy, Transient

DEFAULT_TIMEOUT_S = 30

# Keys under which a tool commonly wraps its rows in an object (MCPServer uses "result").
ROW_KEYS = ("result", "rows", "data", "items", "records")

# Answers of an HTTP server (or a gateway before it) that say "not now" rather than "not this".
RETRYABLE_STATUS = frozenset({429, 502, 503, 504})

# The TLS alerts a server sends when it will not take the client's certificate.
# How much of the server's stderr to quote when it dies; the end holds the traceback.
STDERR_TAIL_CHARS = 1500


class NotRows(ValueError):
    """The server answered, but not with JSON rows."""


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
    # Each attempt is a whole session: start or connect, handshake, call, shutdown. A tool an MCP source
    # calls only reads (as a source should), so calling it again after a lost answer does no harm.
    return records_to_table(policy.run(lambda: _attempt(source, ctx, policy.timeout_s, ssl_context), name, ctx))


def _attempt(source: dict, ctx: FetchContext, timeout_s: float, ssl_context: ssl.SSLContext | None) -> list:
    name = source.get("name", "?")
    statuses: list[int] = []  # HTTP status of every answer: the SDK turns an HTTP error into an anonymous one
    # The server's stderr goes to a file, not the app's console, so a server
    # that dies can be explained with its own last words.
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as server_stderr:
        try:
            return _run_blocking(_fetch_records, source, ctx, timeout_s, server_stderr, ssl_context, statuses)
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
            transient = _transient(cause, source, timeout_s, server_stderr, statuses)
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


async def _fetch_records(
    source: dict, ctx: FetchContext, timeout_s: float, server_stderr: TextIO, ssl_context: ssl.SSLContext | None, statuses: list[int]
) -> list:
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
            statuses.append(response.status_code)

        hooks = {"response": [note_status]}
        async with httpx2.AsyncClient(headers=headers, timeout=timeout_s, transport=transport, event_hooks=hooks) as http_client:
            async with streamable_http_client(source["url"], http_client=http_client) as (read_stream, write_stream):
                return await _query(ClientSession(read_stream, write_stream), source, ctx)


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


async def _query(session: ClientSession, source: dict, ctx: FetchContext) -> list:
    name = source.get("name", "?")
    async with session:
        try:
            await session.initialize()
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED:  # a dying stdio server; explained with its stderr
                raise
            raise NoHandshake(exc.message) from None
        if source.get("resource"):
            return _resource_rows(await session.read_resource(source["resource"]))
        tool = source["tool"]
        available = await _tool_names(session)
        if tool not in available:
            raise ctx.error(name, f"MCP server has no tool {tool!r}; available tools: {', '.join(sorted(available)) or '(none)'}")
        result = await session.call_tool(tool, source.get("arguments") or {})
        if result.is_error:
            raise ctx.error(name, f"MCP tool {tool!r} failed: {_texts(result.content) or '(no message)'}")
        return _tool_rows(result)


async def _tool_names(session: ClientSession) -> list[str]:
    names: list[str] = []
    cursor = None
    while True:
        page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        names.extend(tool.name for tool in page.tools)
        cursor = page.next_cursor
        if not cursor:
            return names


def _tool_rows(result: types.CallToolResult) -> list:
    """Rows from a tool result, preferring structured content over the text items that mirror it."""
    structured = result.structured_content
    if isinstance(structured, list):
        return structured
    if isinstance(structured, dict):
        for key in ROW_KEYS:
            if isinstance(structured.get(key), list):
                return structured[key]
    # Without structured rows, servers send one JSON text item per row, or one holding them all.
    rows: list = []
    for block in result.content:
        if not isinstance(block, types.TextContent):
            raise NotRows(f"the tool returned {block.type} content, not JSON text")
        rows.extend(_json_rows(block.text))
    return rows


def _resource_rows(result: types.ReadResourceResult) -> list:
    rows: list = []
    for contents in result.contents:
        if isinstance(contents, types.BlobResourceContents):
            try:
                text = base64.b64decode(contents.blob).decode("utf-8")
            except ValueError:
                raise NotRows(f"resource {contents.uri} is binary, not JSON text") from None
        else:
            text = contents.text
        rows.extend(_json_rows(text))
    return rows


def _json_rows(text: str) -> list:
    """One JSON text as rows: an array is many rows, an object one row unless it wraps an array of them."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        raise NotRows(f"the result is not JSON: {_excerpt(text)}") from None
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        for key in ROW_KEYS:
            if isinstance(value.get(key), list):
                return value[key]
        return [value]
    raise NotRows(f"the result is a JSON {type(value).__name__}, not rows: {_excerpt(text)}")


def _texts(content: list) -> str:
    return " ".join(block.text for block in content if isinstance(block, types.TextContent)).strip()


def _excerpt(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"


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
    if isinstance(cause, NotRows):
        return f"{_target(source)} did not return JSON rows: {cause}"
    if isinstance(cause, OSError) and command:
        return f"cannot start {where} (working folder {ctx.workspace_path}): {cause}"
    if isinstance(cause, NoHandshake):
        hint = "" if command else " (check the URL's path; MCPServer serves /mcp)"
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
