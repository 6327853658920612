"""The MCP connector against a real MCP server (tests/mcp_server.py), over stdio and streamable HTTP."""

from __future__ import annotations

import asyncio
import datetime as dt
import shutil
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest
from mcp import types

from lib.data.connectors import mcp_source
from lib.data.connectors.base import FetchContext, SourceError, fetch, fetch_note
from lib.data.connectors.result_text import Reading

from ..conftest import MCP_SERVER as SERVER
from ..conftest import FlakyProxy, free_port, mcp_http_server

# A connect outside loopback, or a real DNS lookup, fails the test (tests/helpers/netguard.py).
pytestmark = pytest.mark.usefixtures("network")


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


QUICK = {"attempts": 3, "backoff_s": 0.05, "max_backoff_s": 0.1}  # the waits of the retry tests, kept short


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
        import psutil  # pyright: ignore[reportMissingModuleSource]  # optional, not installed here: /proc is read instead
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

    assert "available tools: deliveries, failing_tool, limited_stock, list_stock, many_rows, needs_token, slow_tool, stock_summary" in str(caught.value)


@SERVER_STARTS
def test_failing_tool_reports_the_servers_message(ctx):
    with pytest.raises(SourceError, match="MCP tool 'failing_tool' failed: .*inventory database is offline"):
        mcp_source.fetch(stdio_source(tool="failing_tool"), ctx)


@SERVER_STARTS
def test_tool_answering_prose_is_not_rows(ctx):
    with pytest.raises(SourceError, match=r"did not return rows: the answer is none of the formats read \(json, python, .*\): 2 warehouses"):
        mcp_source.fetch(stdio_source(tool="stock_summary"), ctx)


@SERVER_STARTS
def test_slow_tool_times_out_and_leaves_no_server_running(ctx):
    started = time.monotonic()

    with pytest.raises(SourceError, match=r"timed out after 1 attempt \(1 s each; raise timeout_s if the tool is just slow\)"):
        mcp_source.fetch(stdio_source(tool="slow_tool", arguments={"seconds": 30}, timeout_s=1, retry={"attempts": 1}), ctx)

    assert time.monotonic() - started < 8
    assert processes_in(ctx.workspace_path) == []


def test_missing_command_is_reported(ctx):
    source = stdio_source(tool="list_stock", command=["no-such-mcp-server-binary", "--stdio"])

    with pytest.raises(SourceError, match="cannot start MCP server command .*no-such-mcp-server-binary"):
        mcp_source.fetch(source, ctx)


def test_server_exiting_at_once_is_explained_with_its_stderr(ctx):
    source = stdio_source(tool="list_stock", command=[sys.executable, "-c", "import sys; sys.exit('no database configured')"], retry=QUICK)

    with pytest.raises(SourceError, match="exited or closed the connection before answering after 3 attempts; its last output: no database configured$"):
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
        mcp_source.fetch({"name": "stock", "type": "mcp", "url": url, "tool": "list_stock", "timeout_s": 5, "retry": QUICK}, ctx)


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


# --- large answers, and the legacy HTTP+SSE transport -------------------------------------------------------

BIG = {"tool": "many_rows", "arguments": {"count": 20_000}}  # about 2 MB of JSON: past the MCP client's default 1 MiB event


@SERVER_STARTS
def test_an_answer_over_a_mib_loads_over_streamable_http(mcp_http_url, ctx):
    table = mcp_source.fetch({"name": "stock", "type": "mcp", "url": mcp_http_url, **BIG}, ctx)

    assert table.num_rows == 20_000 and table.column("line").to_pylist()[-1] == 19_999


@SERVER_STARTS
def test_an_answer_over_our_limit_says_the_limit_is_ours_and_how_to_raise_it(mcp_http_url, ctx, monkeypatch):
    monkeypatch.setenv("DASHMEM_MCP_MAX_MESSAGE_BYTES", "1MB")

    with pytest.raises(SourceError) as caught:
        mcp_source.fetch({"name": "stock", "type": "mcp", "url": mcp_http_url, **BIG}, ctx)

    message = str(caught.value)
    assert message == (
        "source 'stock': the answer of MCP tool 'many_rows' is larger than the 1 MB this server takes in one MCP message "
        "(DASHMEM_MCP_MAX_MESSAGE_BYTES); an operator may raise it, or have the tool return fewer rows"
    )


@pytest.fixture(scope="module")
def mcp_sse_url(tmp_path_factory):
    """tests/mcp_server.py over the legacy HTTP+SSE transport, one per test module."""
    with mcp_http_server(tmp_path_factory.mktemp("mcp-sse"), transport="--sse") as port:
        yield f"http://127.0.0.1:{port}/sse"


@SERVER_STARTS
def test_a_legacy_http_sse_server_answering_405_is_read_over_that_transport(mcp_sse_url, ctx):
    table = mcp_source.fetch({"name": "stock", "type": "mcp", "url": mcp_sse_url, "tool": "list_stock", "arguments": {"warehouse": "south"}}, ctx)

    assert table.column("sku").to_pylist() == ["BOLT-M8", "HINGE-40"]


@SERVER_STARTS
def test_an_answer_over_the_legacy_transports_limit_names_that_limit_and_is_not_retried(mcp_sse_url, ctx, caplog):
    with pytest.raises(SourceError) as caught:
        mcp_source.fetch({"name": "stock", "type": "mcp", "url": mcp_sse_url, "retry": QUICK, **BIG}, ctx)

    message = str(caught.value)
    assert "larger than the 1 MB the legacy HTTP+SSE transport takes here in one message" in message
    assert "streamable HTTP" in message and "exceeded" not in message
    assert "attempt" not in message  # a retried failure ends "after 3 attempts"
    assert not [r for r in caplog.records if r.exc_info]  # the SDK's traceback of it is left out of the log: the message says it


# --- truncation ---------------------------------------------------------------------------------------------


@SERVER_STARTS
def test_an_answer_the_server_says_is_cut_fails_with_the_servers_words(ctx):
    with pytest.raises(SourceError) as caught:
        mcp_source.fetch(stdio_source(tool="limited_stock"), ctx)

    assert str(caught.value) == (
        "source 'stock': MCP tool 'limited_stock' says its answer is incomplete (\"Results limited to 2 rows by the server's row limit.\"); "
        "2 rows came. Raise the server's limit or ask for fewer rows, or set allow_truncated: true to load partial data with a warning"
    )


@SERVER_STARTS
def test_allow_truncated_loads_the_cut_answer_with_a_note_for_the_refresh_report(ctx):
    table = mcp_source.fetch(stdio_source(tool="limited_stock", allow_truncated=True), ctx)

    assert table.column("sku").to_pylist() == ["BOLT-M6", "NUT-M6"]
    note = fetch_note(table)
    assert note is not None and note.startswith("partial data: MCP tool 'limited_stock' says its answer is incomplete")


@SERVER_STARTS
def test_iso_dates_and_timestamps_in_json_rows_load_as_dates_and_timestamps(ctx):
    table = mcp_source.fetch(stdio_source(tool="deliveries"), ctx)

    assert table.schema.field("due").type == pa.date32()
    shipped = table.schema.field("shipped_at").type  # a timestamp in UTC, of the unit the CSV path gives the same text
    assert pa.types.is_timestamp(shipped) and shipped.tz == "UTC"
    assert table.column("due").to_pylist() == [dt.date(2026, 1, 15), dt.date(2026, 2, 1)]
    assert table.column("shipped_at")[1].as_py() == dt.datetime(2026, 1, 29, 16, 5, 10, tzinfo=dt.timezone.utc)


def test_an_unknown_result_format_is_named_with_the_known_ones(ctx):
    with pytest.raises(SourceError, match="result_format 'xml' is not one of json, python, markdown, key_value, csv, tsv"):
        fetch(stdio_source(tool="list_stock", result_format="xml"), ctx)


# --- retries --------------------------------------------------------------------------------------


@SERVER_STARTS
def test_a_stdio_server_that_dies_on_its_first_start_is_started_again(ctx):
    source = stdio_source(tool="list_stock", arguments={"warehouse": "north"}, retry=QUICK)
    source["command"] = [*source["command"], "--crash-first-start"]
    assert mcp_source.fetch(source, ctx).num_rows == 3
    assert (ctx.workspace_path / "crashed-once").exists()


@SERVER_STARTS
def test_a_tools_own_failure_is_not_retried(ctx):
    source = stdio_source(tool="failing_tool", retry=QUICK)
    source["command"] = [*source["command"], "--count-starts"]
    with pytest.raises(SourceError, match="inventory database is offline"):
        mcp_source.fetch(source, ctx)
    assert (ctx.workspace_path / "starts.log").read_text().count("started") == 1


@SERVER_STARTS
@pytest.mark.parametrize("mode", ["reset", "http503"])
def test_an_http_server_behind_a_failing_gateway_is_reached_on_a_later_attempt(mcp_http_url, ctx, mode):
    port = int(mcp_http_url.rsplit(":", 1)[1].split("/")[0])
    proxy = FlakyProxy(("127.0.0.1", port), failures=1, mode=mode)
    try:
        source = {"name": "stock", "type": "mcp", "url": f"http://127.0.0.1:{proxy.port}/mcp", "tool": "list_stock", "arguments": {"warehouse": "south"}}
        table = mcp_source.fetch({**source, "retry": QUICK}, ctx)
    finally:
        proxy.stop()
    assert table.column("sku").to_pylist() == ["BOLT-M8", "HINGE-40"] and proxy.connections > 1


def test_an_http_503_is_named_when_the_attempts_run_out(ctx):
    proxy = FlakyProxy(None, failures=99, mode="http503")
    try:
        with pytest.raises(SourceError, match=rf"HTTP 503 from MCP server at http://127.0.0.1:{proxy.port}/mcp after 2 attempts"):
            mcp_source.fetch(
                {"name": "stock", "type": "mcp", "url": f"http://127.0.0.1:{proxy.port}/mcp", "tool": "t", "retry": {"attempts": 2, "backoff_s": 0}}, ctx
            )
    finally:
        proxy.stop()


def test_an_http_server_that_never_answers_times_out_on_every_attempt(ctx):
    proxy = FlakyProxy(None, mode="silent")
    url = f"http://127.0.0.1:{proxy.port}/mcp"
    try:
        with pytest.raises(SourceError, match=rf"MCP server at {url} timed out after 2 attempts \(1 s each"):
            mcp_source.fetch({"name": "stock", "type": "mcp", "url": url, "tool": "t", "timeout_s": 1, "retry": {"attempts": 2, "backoff_s": 0}}, ctx)
    finally:
        proxy.stop()
    assert proxy.connections >= 2


# --- HTTPS with client certificates (mutual TLS) --------------------------------------------------


@pytest.fixture(scope="module")
def mtls(tmp_path_factory):
    """The test MCP server over HTTPS requiring a client certificate signed by its client CA (certificates by trustme)."""
    import trustme

    folder = tmp_path_factory.mktemp("mcp-tls")
    server_ca, client_ca, stranger_ca = trustme.CA(), trustme.CA(), trustme.CA()
    server_ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(folder / "server.pem"))
    client_ca.cert_pem.write_to_path(str(folder / "client-ca.pem"))
    client, stranger = client_ca.issue_cert("dashmem@example.com"), stranger_ca.issue_cert("dashmem@example.com")
    with mcp_http_server(folder, "--tls", str(folder)) as port:
        yield {
            "url": f"https://127.0.0.1:{port}/mcp",
            "ca": server_ca.cert_pem.bytes().decode(),
            "cert": client.cert_chain_pems[0].bytes().decode(),
            "key": client.private_key_pem.bytes().decode(),
            "stranger_cert": stranger.cert_chain_pems[0].bytes().decode(),
            "stranger_key": stranger.private_key_pem.bytes().decode(),
        }


TLS_REFS = {"client_cert": "env:DM_TEST_MCP_CERT", "client_key": "env:DM_TEST_MCP_KEY", "ca_bundle": "env:DM_TEST_MCP_CA"}


def tls_source(mtls, monkeypatch, cert="cert", key="key", refs=TLS_REFS) -> dict:
    monkeypatch.setenv("DM_TEST_MCP_CERT", mtls[cert])
    monkeypatch.setenv("DM_TEST_MCP_KEY", mtls[key])
    monkeypatch.setenv("DM_TEST_MCP_CA", mtls["ca"])
    return {"name": "stock", "type": "mcp", "url": mtls["url"], "tool": "list_stock", "arguments": {"warehouse": "north"}, "tls": dict(refs), "retry": QUICK}


@SERVER_STARTS
def test_the_right_client_certificate_is_accepted_and_the_tools_table_loaded(mtls, ctx, monkeypatch):
    table = fetch(tls_source(mtls, monkeypatch), ctx)
    assert table.column("sku").to_pylist() == ["BOLT-M6", "NUT-M6", "WASHER-6"]


@SERVER_STARTS
def test_a_client_certificate_from_another_ca_is_refused_with_a_plain_message(mtls, ctx, monkeypatch):
    with pytest.raises(SourceError) as caught:
        fetch(tls_source(mtls, monkeypatch, cert="stranger_cert", key="stranger_key"), ctx)
    message = str(caught.value)
    assert message.startswith(f"source 'stock': MCP server at {mtls['url']} refused the TLS client certificate")
    assert "attempt" not in message and "BEGIN" not in message and "Traceback" not in message  # not retried, no PEM, no traceback


@SERVER_STARTS
def test_no_client_certificate_is_refused_with_a_plain_message(mtls, ctx, monkeypatch):
    with pytest.raises(SourceError) as caught:
        fetch(tls_source(mtls, monkeypatch, refs={"ca_bundle": "env:DM_TEST_MCP_CA"}), ctx)
    message = str(caught.value)
    assert message.startswith(f"source 'stock': MCP server at {mtls['url']} requires a TLS client certificate")
    assert "tls.client_cert" in message and "attempt" not in message


@SERVER_STARTS
def test_a_server_certificate_from_an_unknown_ca_is_not_trusted(mtls, ctx, monkeypatch):
    source = tls_source(mtls, monkeypatch)
    monkeypatch.setenv("DM_TEST_MCP_CA", mtls["stranger_cert"])  # a CA bundle that did not sign the server's certificate
    with pytest.raises(SourceError, match=rf"MCP server at {mtls['url']}: its TLS certificate is not trusted .*tls.ca_bundle"):
        fetch(source, ctx)


def test_tls_material_that_is_not_pem_is_named_without_echo(ctx, monkeypatch):
    monkeypatch.setenv("DM_TEST_MCP_CERT", "not-a-certificate-4711")
    monkeypatch.setenv("DM_TEST_MCP_KEY", "not-a-key-4711")
    monkeypatch.setenv("DM_TEST_MCP_CA", "not-a-ca-4711")
    source = {"name": "stock", "type": "mcp", "url": "https://127.0.0.1:1/mcp", "tool": "t", "tls": dict(TLS_REFS)}
    with pytest.raises(SourceError, match="tls.ca_bundle .*PEM") as caught:
        fetch(source, ctx)
    assert "4711" not in str(caught.value)
    monkeypatch.delenv("DM_TEST_MCP_CA")
    with pytest.raises(SourceError, match="tls.client_cert and tls.client_key .*PEM") as caught:
        fetch({**source, "tls": {k: v for k, v in TLS_REFS.items() if k != "ca_bundle"}}, ctx)
    assert "4711" not in str(caught.value)


def test_tls_settings_need_an_https_url(ctx):
    source = {"name": "stock", "type": "mcp", "url": "http://127.0.0.1:1/mcp", "tool": "t", "tls": dict(TLS_REFS)}
    with pytest.raises(SourceError, match="tls needs an https:// url"):
        fetch(source, ctx)


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
    assert mcp_source._rows(result, Reading()).table.to_pylist() == [{"sku": "A", "qty": 1}, {"sku": "B", "qty": 2}]
