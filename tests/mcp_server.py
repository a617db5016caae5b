"""An MCP server for the tests, written with the MCP SDK's low-level server API.

Run over stdio (``python -m tests.mcp_server``) or streamable HTTP on loopback (``--http PORT``). Its tools cover
what toolwire.mcp must handle: every kind of content block, ``structuredContent``, ``isError``, a slow call, a
server that freezes or kills itself mid-call, a tool list that changes (with ``notifications/tools/list_changed``
in both protocol eras), input schemas and names a provider would reject, and enough tools to need several
``tools/list`` pages.

Options: ``--page-size N`` (tools per ``tools/list`` page), ``--endless-pages`` (every page names a next cursor),
``--state FILE`` (where the ``bump`` counter is kept, so it survives a restart), ``--token T`` (HTTP: answer 401
unless ``Authorization: Bearer T`` is sent), ``--outcome-tools`` (also list the tools of ``OUTCOME_TOOLS``: a write
whose handler raises after its effect, the SDK's refusals, an ``isError`` write, a read that counts then dies).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged

#: a 1x1 red PNG
PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")
OBJECT = {"type": "object", "properties": {}}
SECONDS = {"type": "object", "properties": {"seconds": {"type": "number"}}, "required": ["seconds"]}
READ = types.ToolAnnotations(read_only_hint=True)
PAGED = 12


def _tool(name: str, schema: dict[str, Any] | None = None, annotations: types.ToolAnnotations | None = None,
          description: str = "", **extra: Any) -> types.Tool:
    return types.Tool(name=name, description=description or f"the {name} test tool",
                      input_schema=schema if schema is not None else OBJECT, annotations=annotations, **extra)


def base_tools() -> list[types.Tool]:
    return [
        _tool("echo", {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}, READ,
              "Answer with the text it is given."),
        _tool("image", annotations=READ),
        _tool("resources", annotations=READ),
        _tool("structured", annotations=READ,
              output_schema={"type": "object", "properties": {"celsius": {"type": "number"}},
                             "required": ["celsius"]}),
        _tool("fails", annotations=READ),
        _tool("sleep", SECONDS, READ),
        _tool("sleep_write", SECONDS),
        _tool("freeze", SECONDS, READ),
        _tool("crash", annotations=READ),
        _tool("crash_write", annotations=types.ToolAnnotations(idempotent_hint=True)),
        _tool("bump", annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=False)),
        _tool("count", annotations=READ),
        _tool("pid", annotations=READ),
        _tool("add_tool"),
        _tool("anyof_root", {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                             "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}, READ),
        _tool("no_items", {"type": "object", "properties": {"tags": {"type": "array"}}}, READ),
        _tool("bad name!", annotations=READ),
        _tool("invalid_schema", {"type": "object", "properties": {"x": {"type": "strang"}}}, READ),
        *[_tool(f"page_{i:02d}", annotations=READ) for i in range(PAGED)],
    ]


def outcome_tools() -> list[types.Tool]:
    """Tools whose answers say whether a call ran: each counts in the ``--state`` file when it takes effect."""
    return [
        _tool("raise_write", description="Count, then raise (the SDK answers with a JSON-RPC error of its own)."),
        _tool("raise_read", annotations=READ, description="Count, then raise."),
        _tool("refuse_params", description="Refuse with invalid params (-32602), as for an unknown tool."),
        _tool("refuse_method", description="Refuse with method not found (-32601)."),
        _tool("refuse_validation", description="Raise a pydantic ValidationError (the SDK: invalid params)."),
        _tool("fails_write", description="Answer isError: true without counting."),
        _tool("crash_read", annotations=READ, description="Count, then exit: the server dies mid-call."),
    ]


OUTCOME_TOOLS = frozenset(t.name for t in outcome_tools())


class TestServer:
    def __init__(self, page_size: int, endless: bool, state: Path | None, outcomes: bool = False) -> None:
        self.page_size = page_size
        self.endless = endless
        self.state = state
        self.outcomes = outcomes
        self.extra = False
        self.bus = InMemorySubscriptionBus()
        self.server: Server[Any] = Server("toolwire-test", on_list_tools=self.list_tools, on_call_tool=self.call_tool,
                                          on_subscriptions_listen=ListenHandler(self.bus))

    def tools(self) -> list[types.Tool]:
        tools = base_tools()
        if self.outcomes:
            tools.extend(outcome_tools())
        if self.extra:
            tools.append(_tool("extra_tool", annotations=READ))
        return tools

    async def list_tools(self, ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        tools = self.tools()
        start = int(params.cursor) if params is not None and params.cursor else 0
        page = tools[start:start + self.page_size]
        more = start + self.page_size < len(tools)
        cursor = str(start + self.page_size) if more else None
        if self.endless:
            cursor = str(start % len(tools) + self.page_size)
        return types.ListToolsResult(tools=page, next_cursor=cursor)

    def _count(self) -> int:
        if self.state is None or not self.state.exists():
            return 0
        return int(self.state.read_text() or "0")

    def _bump(self) -> int:
        n = self._count() + 1
        if self.state is not None:
            self.state.write_text(str(n))
        return n

    def _outcome(self, name: str) -> types.CallToolResult:
        from mcp.shared.exceptions import MCPError

        if name in ("raise_write", "raise_read"):
            self._bump()
            raise RuntimeError("the disk filled up after the write")  # the SDK answers with its own JSON-RPC error
        if name == "refuse_params":
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {name}")
        if name == "refuse_method":
            raise MCPError(code=types.METHOD_NOT_FOUND, message="Method not found")
        if name == "refuse_validation":
            import pydantic

            pydantic.TypeAdapter(int).validate_python("not a number")
        if name == "fails_write":
            return types.CallToolResult(content=[types.TextContent(type="text", text="the notebook is locked")],
                                        is_error=True)
        assert name == "crash_read"
        self._bump()
        sys.stdout.flush()
        os._exit(3)

    async def call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        name, args = params.name, params.arguments or {}

        def text(value: str) -> types.CallToolResult:
            return types.CallToolResult(content=[types.TextContent(type="text", text=value)])

        if self.outcomes and name in OUTCOME_TOOLS:
            return self._outcome(name)
        if name == "echo":
            return text(str(args.get("text")))
        if name == "image":
            return types.CallToolResult(content=[types.TextContent(type="text", text="a red dot"),
                                                 types.ImageContent(type="image", data=PNG, mime_type="image/png")])
        if name == "resources":
            return types.CallToolResult(content=[
                types.EmbeddedResource(type="resource", resource=types.TextResourceContents(
                    uri="file:///notes.txt", mime_type="text/plain", text="remember the milk")),
                types.EmbeddedResource(type="resource", resource=types.BlobResourceContents(
                    uri="file:///dot.png", mime_type="image/png", blob=PNG)),
                types.ResourceLink(type="resource_link", uri="file:///big.csv", name="big.csv",
                                   description="a large table", mime_type="text/csv"),
            ])
        if name == "structured":
            data = {"celsius": 21.5}
            return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(data))],
                                        structured_content=data)
        if name == "fails":
            return types.CallToolResult(content=[types.TextContent(type="text", text="the sensor is unplugged")],
                                        is_error=True)
        if name in ("sleep", "sleep_write"):
            await anyio.sleep(float(args["seconds"]))
            return text("slept")
        if name == "freeze":
            time.sleep(float(args["seconds"]))  # blocks the whole server: nothing else is answered meanwhile
            return text("thawed")
        if name in ("crash", "crash_write"):
            if name == "crash_write" and self.state is not None:  # the effect happens, then the server dies
                self.state.write_text(str(self._count() + 1))
            sys.stdout.flush()
            os._exit(3)
        if name == "bump":
            n = self._count() + 1
            if self.state is not None:
                self.state.write_text(str(n))
            return text(str(n))
        if name == "count":
            return text(str(self._count()))
        if name == "pid":
            return text(str(os.getpid()))
        if name == "add_tool":
            self.extra = True
            await self.bus.publish(ToolsListChanged())  # 2026-07-28: delivered on subscriptions/listen streams
            await ctx.session.send_tool_list_changed()  # earlier protocol versions: on the connection itself
            return text("added extra_tool")
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"no tool {name}")], is_error=True)

    def options(self) -> Any:
        return self.server.create_initialization_options(NotificationOptions(tools_changed=True))


def _bearer_only(app: Any, token: str) -> Any:
    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization") != f"Bearer {token}".encode():
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"text/plain")]})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await app(scope, receive, send)
    return guarded


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, metavar="PORT")
    parser.add_argument("--page-size", type=int, default=8)
    parser.add_argument("--endless-pages", action="store_true")
    parser.add_argument("--state", type=Path)
    parser.add_argument("--token")
    parser.add_argument("--outcome-tools", action="store_true")
    parser.add_argument("--api-key")  # taken and ignored: a label test starts the server with credentials
    parser.add_argument("--endpoint")
    args = parser.parse_args(argv)
    test = TestServer(args.page_size, args.endless_pages, args.state, args.outcome_tools)
    if args.http is None:
        from mcp.server.stdio import stdio_server

        async def serve() -> None:
            async with stdio_server() as (read, write):
                await test.server.run(read, write, test.options())

        anyio.run(serve)
        return
    import uvicorn

    app: Any = test.server.streamable_http_app()
    if args.token:
        app = _bearer_only(app, args.token)
    uvicorn.run(app, host="127.0.0.1", port=args.http, log_level="warning")


if __name__ == "__main__":
    main()
