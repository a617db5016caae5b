"""The demo's MCP server: a notebook over stdio, written with the MCP SDK's ``MCPServer``.

``python -m toolwire.harness.demo_mcp_server`` (needs ``toolwire[mcp]``). ``add_note`` is a write (the server
gives no ``readOnlyHint``); ``list_notes`` is a read (``readOnlyHint: true``). Each answers with text and
``structuredContent``. The notes live in the process: every demo run starts its own server.
"""

from __future__ import annotations

from typing import Any


def build() -> Any:
    from mcp.server.mcpserver import MCPServer
    from mcp_types import ToolAnnotations

    server = MCPServer("toolwire-demo-notes")
    notes: list[str] = []

    @server.tool(annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=False))
    def add_note(text: str) -> dict[str, Any]:
        """Add a note to the user's notebook."""
        notes.append(text)
        return {"id": len(notes), "text": text}

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def list_notes() -> dict[str, Any]:
        """Read every note in the user's notebook, oldest first."""
        return {"notes": list(notes)}

    return server


def main() -> None:
    build().run("stdio")


if __name__ == "__main__":
    main()
