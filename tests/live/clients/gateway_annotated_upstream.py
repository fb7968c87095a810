"""An upstream MCP server whose tools declare annotations (tests/live/clients/test_gateway.py).

The official SDK's MCPServer: a read-only tool, a destructive one, one that writes without
destroying, and one that declares nothing. Each call appends `{"tool", "arguments"}` to the
file named by GATEWAY_TEST_LOG, as gateway_upstream.py does.

    python gateway_annotated_upstream.py        (stdio)
"""

import json
import os
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("reports")


def _log(tool: str, arguments: dict[str, Any]) -> str:
    with open(os.environ["GATEWAY_TEST_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps({"tool": tool, "arguments": arguments}) + "\n")
    return f"{tool} done with {json.dumps(arguments, sort_keys=True)}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True, openWorldHint=False))
def read_report(name: str) -> str:
    """Read the report `name`."""
    return _log("read_report", {"name": name})


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True))
def delete_report(name: str) -> str:
    """Delete the report `name`."""
    return _log("delete_report", {"name": name})


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False))
def archive_report(name: str) -> str:
    """Copy the report `name` to the archive (nothing is removed)."""
    return _log("archive_report", {"name": name})


@server.tool()
def purge_cache() -> str:
    """Empty the report cache (declares no annotations)."""
    return _log("purge_cache", {})


if __name__ == "__main__":
    server.run("stdio")
