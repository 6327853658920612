"""A small inventory MCP server that the MCP connector tests talk to for real.

    python tests/mcp_server.py              # stdio (how a `command` source starts it)
    python tests/mcp_server.py --http PORT  # streamable HTTP on 127.0.0.1:PORT, endpoint /mcp
    python tests/mcp_server.py --http PORT --tls DIR  # the same over HTTPS, requiring a client certificate
    python tests/mcp_server.py --crash-first-start    # stdio; the first start in a folder exits at once
    python tests/mcp_server.py --sse PORT   # the legacy HTTP+SSE transport on 127.0.0.1:PORT, endpoint /sse

Its data is fixed so tests can assert exact values; each tool exercises one
path of the connector (rows, failures, slowness, an environment secret).
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import sys
from pathlib import Path

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

# The value `needs_token` expects in INVENTORY_TOKEN; tests pass it by secret reference.
EXPECTED_TOKEN = "open-sesame-4711"

STOCK = {
    "north": [
        {"sku": "BOLT-M6", "qty": 120, "location": {"aisle": "A1", "bin": 3}},
        {"sku": "NUT-M6", "qty": 80, "location": {"aisle": "A1", "bin": 4}},
        {"sku": "WASHER-6", "qty": 0, "location": {"aisle": "B2", "bin": 1}},
    ],
    "south": [
        {"sku": "BOLT-M8", "qty": 45, "location": {"aisle": "C3", "bin": 7}},
        {"sku": "HINGE-40", "qty": 12, "location": {"aisle": "D1", "bin": 2}},
    ],
}

server = MCPServer("inventory", log_level="WARNING")


@server.tool()
def list_stock(warehouse: str) -> list[dict]:
    """Stock lines of one warehouse, with the storage location nested."""
    if warehouse not in STOCK:
        raise ToolError(f"unknown warehouse {warehouse!r}; known: {', '.join(STOCK)}")
    return STOCK[warehouse]


@server.tool()
def failing_tool() -> list[dict]:
    """Always fails, the way a tool reports a problem it anticipated."""
    raise ToolError("inventory database is offline")


@server.tool()
async def slow_tool(seconds: float) -> list[dict]:
    """Answers after `seconds`; for time limits."""
    await anyio.sleep(seconds)
    return [{"waited_s": seconds}]


@server.tool()
def needs_token() -> list[dict]:
    """Rows only for a caller that started the server with the right INVENTORY_TOKEN."""
    if os.environ.get("INVENTORY_TOKEN") != EXPECTED_TOKEN:
        raise ToolError("INVENTORY_TOKEN is missing or wrong")
    return [{"sku": "SAFE-01", "qty": 1}]


@server.tool()
def stock_summary() -> str:
    """Prose, not rows; a source pointing at it must fail clearly."""
    return f"{len(STOCK)} warehouses, {sum(len(rows) for rows in STOCK.values())} stock lines"


@server.tool()
def many_rows(count: int) -> list[dict]:
    """`count` rows of about 100 bytes each, for answers larger than a transport's message limit."""
    return [{"line": i, "sku": f"SKU-{i:08d}", "note": "x" * 64} for i in range(count)]


@server.tool()
def deliveries() -> list[dict]:
    """Rows with ISO 8601 dates and timestamps, which JSON can only send as strings."""
    return [
        {"sku": "BOLT-M6", "due": "2026-01-15", "shipped_at": "2026-01-12T08:30:00Z"},
        {"sku": "NUT-M6", "due": "2026-02-01", "shipped_at": "2026-01-29T17:05:10+01:00"},
    ]


@server.tool()
def limited_stock() -> dict:
    """The first stock lines only, saying so the way database servers do (a flag and a warning beside the rows)."""
    return {"rows": STOCK["north"][:2], "truncated": True, "warning": "Results limited to 2 rows by the server's row limit."}


@server.resource("inventory://stock", mime_type="application/json")
def all_stock() -> str:
    """Every stock line of every warehouse, as one JSON array."""
    return json.dumps([{"warehouse": name, **row} for name, rows in STOCK.items() for row in rows])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT instead of stdio")
    parser.add_argument(
        "--tls", type=Path, metavar="DIR", help="with --http: serve HTTPS with DIR/server.pem, requiring a client certificate signed by DIR/client-ca.pem"
    )
    parser.add_argument("--sse", type=int, metavar="PORT", help="serve the legacy HTTP+SSE transport on 127.0.0.1:PORT instead of stdio")
    parser.add_argument("--crash-first-start", action="store_true", help="exit at once the first time it starts in this working folder")
    parser.add_argument("--count-starts", action="store_true", help="append a line to starts.log in the working folder on each start")
    args = parser.parse_args()
    if args.count_starts:
        with open("starts.log", "a") as log:
            log.write("started\n")
    if args.crash_first_start and not os.path.exists("crashed-once"):
        Path("crashed-once").touch()
        sys.exit("inventory database not reachable yet")
    if args.sse is not None:
        server.run("sse", host="127.0.0.1", port=args.sse)
    elif args.http is None:
        server.run()
    elif args.tls is None:
        server.run("streamable-http", host="127.0.0.1", port=args.http)
    else:
        import uvicorn

        uvicorn.run(
            server.streamable_http_app(host="127.0.0.1"),
            host="127.0.0.1",
            port=args.http,
            log_level="warning",
            ssl_certfile=str(args.tls / "server.pem"),
            ssl_keyfile=str(args.tls / "server.pem"),
            ssl_ca_certs=str(args.tls / "client-ca.pem"),
            ssl_cert_reqs=ssl.CERT_REQUIRED,
        )


if __name__ == "__main__":
    main()
