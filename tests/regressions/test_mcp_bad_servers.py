"""MCP servers that misbehave: a tool schema a provider refuses, a server killed between calls, a server that
lists a name twice or answers with data a provider would refuse (failure mode "MCP servers that misbehave")."""

from __future__ import annotations

import os
import signal
import time

import pytest

pytest.importorskip("mcp")

import toolwire  # noqa: E402
from toolwire import Content, ImagePart, TextPart, ToolError  # noqa: E402
from toolwire.codecs import PROVIDERS  # noqa: E402
from toolwire.mcp import content_from_result  # noqa: E402
from toolwire.mcp._listing import build_tools  # noqa: E402

from ..mcp_helpers import stdio  # noqa: E402


def test_one_tool_schema_a_provider_refuses_does_not_fail_every_request(tmp_path):
    """With a tool whose inputSchema OpenAI refuses (an array without items) and one Anthropic refuses (anyOf at
    the root) on the server, every dialect still declares the tool set: those two are left out and reported."""
    with stdio(tmp_path / "state") as server:
        tools = server.tools()
        for dialect in PROVIDERS:
            toolwire.declare(dialect, tools)
        assert {"no_items", "anyof_root"} <= {s.name for s in server.skipped}


def test_a_server_killed_between_calls_runs_the_next_write_once(tmp_path):
    """A stdio server killed while idle: the next write is sent over a new session and runs once (it is not
    answered "may or may not have run", since nothing had been sent)."""
    with stdio(tmp_path / "state") as server:
        registry = toolwire.Registry(server.tools())
        pid = int(registry["pid"].invoke({}).parts[0].text)
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)  # the SDK sees the pipe close
        assert registry["bump"].invoke({}).parts == [TextPart(text="1")]
        assert registry["count"].invoke({}).parts == [TextPart(text="1")]


def test_a_name_listed_twice_keeps_the_first_entry():
    """A server that lists a name twice (two pages overlapping): the second entry is left out, not a
    DuplicateToolError for the whole listing."""
    entry = {"name": "find", "inputSchema": {"type": "object", "properties": {}}}
    tools, listed, skipped = build_tools([entry, dict(entry, description="again")], lambda n: (lambda args: None),
                                         server="s", effects={}, timeout=5.0, prefix="")
    assert [t.name for t in tools] == ["find"] and [(s.name, s.reason) for s in skipped] == [("find", "duplicate")]


def test_result_data_a_provider_would_refuse_is_replaced_by_a_note():
    """An image that is not base64, a block of an unknown type, and a non-object structuredContent become text
    parts saying so; an error result without content still says it is an error."""
    content = content_from_result({"content": [
        {"type": "image", "data": "not base64!", "mimeType": "image/png"},
        {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
        {"type": "hologram"},
        "just a string",
    ], "structuredContent": [1, 2]})
    assert isinstance(content.parts[0], TextPart) and "not valid base64" in content.parts[0].text
    assert content.parts[1] == ImagePart(data="iVBORw0KGgo=", mime_type="image/png")
    assert "hologram" in content.parts[2].text and "not an object" in content.parts[3].text
    assert content.parts[4] == TextPart(text="[1, 2]") and content.structured is None
    with pytest.raises(ToolError) as info:
        content_from_result({"content": [], "isError": True})
    assert isinstance(info.value.content, Content) and "error" in info.value.content.parts[0].text


def test_an_entry_the_sdk_cannot_read_leaves_out_that_tool_only():
    """A server (written without the SDK) lists a tool whose inputSchema is an array and an entry without a name
    next to a good one: the SDK refuses the whole page, toolwire reads it entry by entry, leaves the two out with
    their reason, and the good tool lists and answers."""
    import sys

    from toolwire.mcp import MCPServer

    from ..conftest import ROOT

    with MCPServer.stdio(sys.executable, ["-m", "tests.raw_mcp_server"], cwd=ROOT, connect_timeout=20.0) as server:
        registry = toolwire.Registry(server.tools())
        assert registry.names == ("echo",)
        assert [(s.name, s.reason) for s in server.skipped] == [("tags", "schema"), ("None", "schema")]
        assert "'object'" in server.skipped[0].detail and "inputSchema" in server.skipped[0].detail
        assert "not a valid MCP tool" in server.skipped[1].detail
        assert registry["echo"].invoke({"text": "fine"}).parts == [TextPart(text="fine")]
