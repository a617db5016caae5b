"""MCP servers as tool sources (``pip install 'toolwire[mcp]'``; built on the official ``mcp`` SDK).

::

    from toolwire.mcp import MCPServer

    with MCPServer.stdio("python", ["-m", "my_server"]) as server:
        registry = server.registry(effects={"delete_file": "write"})
        ...  # Dispatcher(registry) / ToolLoop(..., registry=registry)

``MCPServer`` connects over stdio (a command) or streamable HTTP (a URL with headers), lists every tool (following
``tools/list`` pagination) and builds ``Tool`` objects whose handlers send ``tools/call`` with a timeout. See the
README, "MCP servers", for effects, results, list changes, bad servers and reconnection.

``import toolwire`` never imports this package, nor ``mcp``.
"""

from __future__ import annotations

from ._listing import ListedTool, SkippedTool
from ._results import content_from_result
from .errors import MCPConnectionError, MCPProtocolError, MCPServerError, MCPUnreadableAnswer
from .server import MCPServer

__all__ = [
    "MCPServer",
    "SkippedTool",
    "ListedTool",
    "content_from_result",
    "MCPServerError",
    "MCPConnectionError",
    "MCPProtocolError",
    "MCPUnreadableAnswer",
]
