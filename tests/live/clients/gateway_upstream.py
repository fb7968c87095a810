"""The upstream MCP server of the gateway's live test (tests/live/clients/test_gateway.py).

The official SDK's MCPServer (FastMCP in mcp 1.x) with a few tools; each call appends one
JSON line `{"tool", "arguments"}` to the file named by GATEWAY_TEST_LOG, so the test sees
exactly what reached the tool. A resource and a prompt show the gateway passes them through.

    python gateway_upstream.py        (stdio, the way an MCP client starts it)
    python gateway_upstream.py PORT   (streamable HTTP on 127.0.0.1:PORT, path /mcp)
"""

import json
import os
import sys
from typing import Any

from mcp.server.mcpserver import MCPServer

server = MCPServer("billing-db")


def _log(tool: str, arguments: dict[str, Any]) -> str:
    with open(os.environ["GATEWAY_TEST_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps({"tool": tool, "arguments": arguments}) + "\n")
    return f"{tool} done with {json.dumps(arguments, sort_keys=True)}"


@server.tool()
def read_rows(table: str, limit: int = 10) -> str:
    """Read up to `limit` rows of `table`."""
    return _log("read_rows", {"table": table, "limit": limit})


@server.tool()
def delete_rows(table: str, where: str, env: str = "prod") -> str:
    """Delete the rows of `table` matching `where` in environment `env`."""
    return _log("delete_rows", {"table": table, "where": where, "env": env})


@server.tool()
def drop_database(name: str) -> str:
    """Drop the whole database `name`."""
    return _log("drop_database", {"name": name})


@server.tool()
def shutdown() -> str:
    """Stop the database server."""
    return _log("shutdown", {})


@server.resource("billing://schema")
def schema() -> str:
    """The database's schema."""
    return "CREATE TABLE invoices (id int, total numeric);"


@server.prompt()
def audit(table: str) -> str:
    """A prompt to audit a table."""
    return f"Audit the table {table}."


if __name__ == "__main__":
    if len(sys.argv) > 1:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
    else:
        server.run("stdio")
