"""An MCP server written by hand (no SDK), for what the SDK's own server refuses to send: newline-delimited
JSON-RPC over stdio, the ``initialize`` handshake (``server/discover`` is answered "method not found", so
clients fall back to it), and a ``tools/list`` whose entries break the MCP schema (an ``inputSchema`` whose root
is an array, an entry without a name) next to a good tool, ``echo``."""

from __future__ import annotations

import json
import sys

TOOLS = [
    {"name": "tags", "description": "takes a bare array",
     "inputSchema": {"type": "array", "items": {"type": "string"}}},
    {"description": "no name at all", "inputSchema": {"type": "object"}},
    {"name": "echo", "description": "echo",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
     "annotations": {"readOnlyHint": True}},
]


def answer(request_id: object, result: object = None, error: dict | None = None) -> None:
    message = {"jsonrpc": "2.0", "id": request_id}
    message.update({"error": error} if error is not None else {"result": result})
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if "id" not in message:
            continue  # a notification
        method, params = message.get("method"), message.get("params") or {}
        if method == "initialize":
            answer(message["id"], {"protocolVersion": params.get("protocolVersion", "2025-06-18"),
                                   "capabilities": {"tools": {}}, "serverInfo": {"name": "raw", "version": "1"}})
        elif method == "tools/list":
            answer(message["id"], {"tools": TOOLS})
        elif method == "tools/call":
            text = str((params.get("arguments") or {}).get("text"))
            answer(message["id"], {"content": [{"type": "text", "text": text}]})
        elif method == "ping":
            answer(message["id"], {})
        else:
            answer(message["id"], error={"code": -32601, "message": "Method not found"})


if __name__ == "__main__":
    main()
