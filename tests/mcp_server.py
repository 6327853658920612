"""A small inventory MCP server that the MCP connector tests talk to for real.

    python tests/mcp_server.py              # stdio (how a `command` source starts it)
    python tests/mcp_server.py --http PORT  # streamable HTTP on 127.0.0.1:PORT, endpoint /mcp

Its data is fixed so tests can assert exact values; each tool exercises one
path of the connector (rows, failures, slowness, an environment secret).
"""

from __future__ import annotations

import argparse
import json
import os

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


@server.resource("inventory://stock", mime_type="application/json")
def all_stock() -> str:
    """Every stock line of every warehouse, as one JSON array."""
    return json.dumps([{"warehouse": name, **row} for name, rows in STOCK.items() for row in rows])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT instead of stdio")
    args = parser.parse_args()
    if args.http is None:
        server.run()
    else:
        server.run("streamable-http", host="127.0.0.1", port=args.http)


if __name__ == "__main__":
    main()
