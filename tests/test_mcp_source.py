"""The MCP connector against a real MCP server (tests/mcp_server.py), over stdio and streamable HTTP."""

from __future__ import annotations

import asyncio
import shutil
import sys
import threading
import time
from pathlib import Path

import pytest
from mcp import types

from lib.connectors import fetch, mcp_source
from lib.connectors.base import FetchContext, SourceError
from tests.test_netguard import network  # noqa: F401  autouse: a connect outside loopback, or a real DNS lookup, fails the test

from .conftest import MCP_SERVER as SERVER
from .conftest import free_port


@pytest.fixture(autouse=True)
def loopback_allowed(monkeypatch):
    """The operator's opt-in that lets sources reach the test servers on 127.0.0.1 (refused by default)."""
    monkeypatch.setenv("DASHMEM_HTTP_ALLOW_NETWORKS", "127.0.0.0/8")
    monkeypatch.delenv("DASHMEM_ALLOW_PRIVATE_NETWORKS", raising=False)


# Each of these starts the MCP server (a Python process per stdio test, one HTTP server for the module),
# 1.5-2.5 s each here: the slow loop. One stdio round trip (test_dispatch_calls_a_stdio_tool_...) and the
# tests that refuse or fail before a server answers stay in the fast loop.
SERVER_STARTS = pytest.mark.slow

# The value tests/mcp_server.py expects in INVENTORY_TOKEN. Not imported from
# there: importing the server would configure this process's logging.
INVENTORY_TOKEN = "open-sesame-4711"


@pytest.fixture(autouse=True)
def allowed_commands(monkeypatch):
    """The operator's allow-list of stdio servers, as a deployment would set it."""
    monkeypatch.setenv("DASHMEM_MCP_COMMANDS", f"{sys.executable} servers/inventory.py; no-such-mcp-server-binary; {sys.executable} -c")


def test_a_command_the_operator_did_not_allow_never_runs(ctx, tmp_path, monkeypatch):
    marker = tmp_path / "pwned"
    source = stdio_source(tool="list_stock", command=["sh", "-c", f"touch {marker}"])
    with pytest.raises(SourceError, match="not allowed on this server"):
        fetch(source, ctx)
    assert not marker.exists()
    monkeypatch.delenv("DASHMEM_MCP_COMMANDS")
    with pytest.raises(SourceError, match="DASHMEM_MCP_COMMANDS"):
        fetch(stdio_source(tool="list_stock", arguments={"warehouse": "north"}), ctx)


@pytest.fixture
def ctx(tmp_path) -> FetchContext:
    """A workspace holding the server script at servers/inventory.py.

    A folder per test means a leftover server process can be told apart from
    other tests' servers by its working directory.
    """
    (tmp_path / "servers").mkdir()
    shutil.copy(SERVER, tmp_path / "servers" / "inventory.py")
    return FetchContext(workspace_path=tmp_path)


def stdio_source(**settings) -> dict:
    # A relative script path: the connector starts the server in the workspace folder.
    return {"name": "stock", "type": "mcp", "command": [sys.executable, "servers/inventory.py"], **settings}


def processes_in(folder: Path) -> list[int]:
    """Ids of live processes whose working directory is `folder` (the connector starts servers there)."""
    try:
        import psutil
    except ImportError:
        pids = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    cwd = (entry / "cwd").readlink()
                except OSError:  # ended while we looked, or not ours to inspect
                    continue
                if cwd == folder.resolve():
                    pids.append(int(entry.name))
        return pids
    return [p.pid for p in psutil.process_iter(["cwd"]) if p.info["cwd"] == str(folder.resolve())]


# --- stdio ---------------------------------------------------------------------------------------


def test_dispatch_calls_a_stdio_tool_and_flattens_nested_rows(ctx):
    table = fetch(stdio_source(tool="list_stock", arguments={"warehouse": "north"}), ctx)

    assert table.column_names == ["sku", "qty", "location_aisle", "location_bin"]
    assert table.to_pylist() == [
        {"sku": "BOLT-M6", "qty": 120, "location_aisle": "A1", "location_bin": 3},
        {"sku": "NUT-M6", "qty": 80, "location_aisle": "A1", "location_bin": 4},
        {"sku": "WASHER-6", "qty": 0, "location_aisle": "B2", "location_bin": 1},
    ]
    assert processes_in(ctx.workspace_path) == []


@SERVER_STARTS
def test_arguments_select_the_data(ctx):
    table = mcp_source.fetch(stdio_source(tool="list_stock", arguments={"warehouse": "south"}), ctx)

    assert table.column("sku").to_pylist() == ["BOLT-M8", "HINGE-40"]
    assert table.column("location_aisle").to_pylist() == ["C3", "D1"]


@SERVER_STARTS
def test_reads_a_resource_of_json_rows(ctx):
    table = mcp_source.fetch(stdio_source(resource="inventory://stock"), ctx)

    assert table.num_rows == 5
    assert table.column("warehouse").to_pylist() == ["north"] * 3 + ["south"] * 2
    assert "location_bin" in table.column_names


@SERVER_STARTS
def test_env_secret_reaches_the_server_by_reference(ctx, monkeypatch):
    monkeypatch.setenv("DM_TEST_INVENTORY_TOKEN", INVENTORY_TOKEN)

    table = mcp_source.fetch(stdio_source(tool="needs_token", env={"INVENTORY_TOKEN": "env:DM_TEST_INVENTORY_TOKEN"}), ctx)

    assert table.to_pylist() == [{"sku": "SAFE-01", "qty": 1}]


def test_missing_env_secret_names_the_reference_but_no_value(ctx, monkeypatch):
    monkeypatch.setenv("DM_TEST_OTHER_SECRET", "visible-value-123")
    monkeypatch.delenv("DM_TEST_INVENTORY_TOKEN", raising=False)
    source = stdio_source(
        tool="needs_token",
        env={"OTHER": "env:DM_TEST_OTHER_SECRET", "INVENTORY_TOKEN": "env:DM_TEST_INVENTORY_TOKEN"},
    )

    with pytest.raises(SourceError) as caught:
        mcp_source.fetch(source, ctx)

    assert "env:DM_TEST_INVENTORY_TOKEN" in str(caught.value)
    assert "visible-value-123" not in str(caught.value)


@SERVER_STARTS
def test_unknown_tool_lists_the_available_ones(ctx):
    with pytest.raises(SourceError, match="no tool 'list_stocks'") as caught:
        mcp_source.fetch(stdio_source(tool="list_stocks"), ctx)

    assert "available tools: failing_tool, list_stock, needs_token, slow_tool, stock_summary" in str(caught.value)


@SERVER_STARTS
def test_failing_tool_reports_the_servers_message(ctx):
    with pytest.raises(SourceError, match="MCP tool 'failing_tool' failed: .*inventory database is offline"):
        mcp_source.fetch(stdio_source(tool="failing_tool"), ctx)


@SERVER_STARTS
def test_tool_answering_prose_is_not_rows(ctx):
    with pytest.raises(SourceError, match="did not return JSON rows: the result is not JSON: 2 warehouses"):
        mcp_source.fetch(stdio_source(tool="stock_summary"), ctx)


@SERVER_STARTS
def test_slow_tool_times_out_and_leaves_no_server_running(ctx):
    started = time.monotonic()

    with pytest.raises(SourceError, match="timed out after 1 s"):
        mcp_source.fetch(stdio_source(tool="slow_tool", arguments={"seconds": 30}, timeout_s=1), ctx)

    assert time.monotonic() - started < 8
    assert processes_in(ctx.workspace_path) == []


def test_missing_command_is_reported(ctx):
    source = stdio_source(tool="list_stock", command=["no-such-mcp-server-binary", "--stdio"])

    with pytest.raises(SourceError, match="cannot start MCP server command .*no-such-mcp-server-binary"):
        mcp_source.fetch(source, ctx)


def test_server_exiting_at_once_is_explained_with_its_stderr(ctx):
    source = stdio_source(tool="list_stock", command=[sys.executable, "-c", "import sys; sys.exit('no database configured')"])

    with pytest.raises(SourceError, match="exited or closed the connection before answering.*no database configured"):
        mcp_source.fetch(source, ctx)


# --- streamable HTTP -----------------------------------------------------------------------------


@SERVER_STARTS
def test_http_tool_call_with_secret_header(mcp_http_url, ctx, monkeypatch):
    monkeypatch.setenv("DM_TEST_MCP_AUTH", "Bearer test-token")
    source = {
        "name": "stock",
        "type": "mcp",
        "url": mcp_http_url,
        "secret_headers": {"Authorization": "env:DM_TEST_MCP_AUTH"},
        "tool": "list_stock",
        "arguments": {"warehouse": "south"},
    }

    table = fetch(source, ctx)

    assert table.column("sku").to_pylist() == ["BOLT-M8", "HINGE-40"]
    assert table.column("location_bin").to_pylist() == [7, 2]


@SERVER_STARTS
def test_http_resource_read(mcp_http_url, ctx):
    table = mcp_source.fetch({"name": "stock", "type": "mcp", "url": mcp_http_url, "resource": "inventory://stock"}, ctx)

    assert table.num_rows == 5


@SERVER_STARTS
def test_http_wrong_path_points_at_the_endpoint(mcp_http_url, ctx):
    wrong = mcp_http_url.removesuffix("/mcp") + "/api"

    with pytest.raises(SourceError, match="did not complete the MCP handshake.*serves /mcp"):
        mcp_source.fetch({"name": "stock", "type": "mcp", "url": wrong, "tool": "list_stock"}, ctx)


def test_unreachable_url_is_reported(ctx):
    url = f"http://127.0.0.1:{free_port()}/mcp"  # nothing listens there

    with pytest.raises(SourceError, match=f"cannot reach MCP server at {url}"):
        mcp_source.fetch({"name": "stock", "type": "mcp", "url": url, "tool": "list_stock", "timeout_s": 5}, ctx)


@SERVER_STARTS
def test_fetch_works_from_a_plain_thread_and_from_inside_an_event_loop(mcp_http_url, ctx):
    source = {"name": "stock", "type": "mcp", "url": mcp_http_url, "tool": "list_stock", "arguments": {"warehouse": "north"}}
    results = []

    # A Streamlit script thread: no event loop of its own.
    worker = threading.Thread(target=lambda: results.append(mcp_source.fetch(source, ctx).num_rows))
    worker.start()
    worker.join(timeout=20)

    async def from_async_code():
        results.append(mcp_source.fetch(source, ctx).num_rows)

    asyncio.run(from_async_code())

    assert results == [3, 3]


# --- result shapes -------------------------------------------------------------------------------


def text(value: str) -> types.TextContent:
    return types.TextContent(type="text", text=value)


@pytest.mark.parametrize(
    "result",
    [
        types.CallToolResult(content=[text('{"sku": "A", "qty": 1}'), text('{"sku": "B", "qty": 2}')]),
        types.CallToolResult(content=[text('[{"sku": "A", "qty": 1}, {"sku": "B", "qty": 2}]')]),
        types.CallToolResult(content=[text('{"rows": [{"sku": "A", "qty": 1}, {"sku": "B", "qty": 2}]}')]),
        types.CallToolResult(content=[], structured_content={"rows": [{"sku": "A", "qty": 1}, {"sku": "B", "qty": 2}]}),
        # Structured content wins over text items that disagree with it.
        types.CallToolResult(content=[text("stale")], structured_content=[{"sku": "A", "qty": 1}, {"sku": "B", "qty": 2}]),
    ],
    ids=["text-per-row", "text-array", "text-wrapped", "structured-wrapped", "structured-preferred"],
)
def test_rows_are_read_from_every_common_result_shape(result):
    assert mcp_source._tool_rows(result) == [{"sku": "A", "qty": 1}, {"sku": "B", "qty": 2}]
