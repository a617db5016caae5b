"""toolwire.mcp against real MCP servers: tests/mcp_server.py started as a stdio subprocess and as an HTTP
server on loopback, through the sync (``with``, ``tools()``) and async (``async with``, ``atools()``) paths."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

import pytest
from structlog.testing import capture_logs

pytest.importorskip("mcp")

import toolwire  # noqa: E402
from toolwire import Content, Dispatcher, ImagePart, LinkPart, OutcomeUnknown, Registry  # noqa: E402
from toolwire import ResourcePart, TextPart, ToolError  # noqa: E402
from toolwire.mcp import MCPConnectionError, MCPProtocolError, MCPServer  # noqa: E402

from .bodies import body  # noqa: E402
from .conftest import ROOT  # noqa: E402
from .mcp_helpers import TOKEN, HttpServerProcess, stdio  # noqa: E402
from .mcp_server import PAGED, PNG  # noqa: E402

#: tools the test server lists that every dialect accepts
GOOD = {"echo", "image", "resources", "structured", "fails", "sleep", "sleep_write", "freeze", "crash",
        "crash_write", "bump", "count", "pid", "add_tool", *(f"page_{i:02d}" for i in range(PAGED))}


@pytest.fixture
def server(tmp_path):
    """The test server over stdio, opened; closed (its process stopped) afterwards."""
    with stdio(tmp_path / "state") as srv:
        yield srv


@pytest.fixture
def http(tmp_path):
    """The test server as an HTTP process on a free loopback port, stopped afterwards."""
    proc = HttpServerProcess(tmp_path / "state")
    proc.start()
    yield proc
    proc.stop()


def text_of(content: Content) -> str:
    return "".join(p.text for p in content.parts if isinstance(p, TextPart))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_until(predicate, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def dispatch(registry: Registry, calls, provider: str = "openai-chat", mode: str = "run", **options):
    turn = toolwire.parse(provider, body(provider, [(f"call_{i}", n, a) for i, (n, a) in enumerate(calls)]))
    dispatcher = Dispatcher(registry, **options)
    if mode == "arun":
        return asyncio.run(dispatcher.arun(turn, conversation_id="c"))
    return dispatcher.run(turn, conversation_id="c")


# ---- listing -------------------------------------------------------------------------------------------------

def test_every_page_is_listed_and_bad_tools_are_left_out_with_their_reason(server, toolwire_debug):
    """tools() follows the cursor over every page (5 tools a page); a name, a schema, and schemas that a provider
    refuses are left out, each with its reason and the dialects that refuse it, and logged."""
    with capture_logs() as logs:
        tools = server.tools()
    assert {t.name for t in tools} == GOOD
    assert {(s.name, s.reason, s.dialects) for s in server.skipped} == {
        ("bad name!", "name", ()),
        ("invalid_schema", "schema", ()),
        ("anyof_root", "provider", ("anthropic",)),
        ("no_items", "provider", ("openai-chat", "openai-responses")),
    }
    assert {e["tool"] for e in logs if e["event"] == "mcp.tool_skipped"} == {s.name for s in server.skipped}
    assert [e for e in logs if e["event"] == "mcp.tools_listed"][0]["tools"] == len(GOOD)


def test_dialects_narrow_what_is_left_out(server):
    """A tool only the OpenAI dialects refuse is kept when the application declares for Anthropic only."""
    names = {t.name for t in server.tools(dialects=["gemini"])}
    assert {"no_items", "anyof_root"} <= names
    assert "no_items" in {t.name for t in server.tools(dialects=["anthropic"])}
    assert "no_items" not in {t.name for t in server.tools(dialects=["openai-chat"])}


def test_effects_come_from_read_only_hints_and_the_application_overrides_them(server):
    """With trust_read_only=True readOnlyHint true is a read, anything else a write; the application's effects
    win; by default only the application makes a read; idempotentHint is kept in the listing."""
    tools = {t.name: t for t in server.tools(trust_read_only=True)}
    assert (tools["echo"].effect, tools["bump"].effect, tools["add_tool"].effect) == ("read", "write", "write")
    listing = {x.name: x for x in server.listing}
    assert (listing["echo"].effect_from, listing["bump"].effect_from, listing["add_tool"].effect_from) == \
        ("annotation", "annotation", "default")
    assert listing["crash_write"].idempotent_hint is True and listing["bump"].destructive_hint is False
    overridden = {t.name: t.effect for t in server.tools(effects={"echo": "write", "bump": "read"},
                                                         trust_read_only=True)}
    assert (overridden["echo"], overridden["bump"]) == ("write", "read")
    distrust = {t.name: t.effect for t in server.tools(effects={"count": "read"})}
    assert {n for n, e in distrust.items() if e == "read"} == {"count"}
    assert {x.name: x.effect_from for x in server.listing}["echo"] == "default"


def test_an_effect_for_a_name_the_server_does_not_list_is_logged(server):
    """A misspelled name in effects is logged (the server's own hint stays in force for the real tool)."""
    with capture_logs() as logs:
        server.tools(effects={"ecko": "write"})
    assert [e["tool"] for e in logs if e["event"] == "mcp.effect_unused"] == ["ecko"]


def test_a_prefix_keeps_two_servers_apart_in_one_registry(server, tmp_path):
    """The same server twice: without a prefix the registry refuses the second copy of each name; with one both
    fit, and the prefixed tool calls the server's own name."""
    with stdio(tmp_path / "other") as other:
        with pytest.raises(toolwire.DuplicateToolError):
            Registry([*server.tools(), *other.tools()])
        registry = Registry([*server.tools(trust_read_only=True),
                             *other.tools(prefix="b_", effects={"b_echo": "write"}, trust_read_only=True)])
        assert registry["b_echo"].effect == "write" and registry["echo"].effect == "read"
        assert text_of(registry["b_echo"].invoke({"text": "hi"})) == "hi"


def test_a_listing_that_never_ends_is_a_protocol_error(tmp_path):
    """A server whose cursors never end is stopped at the page bound with MCPProtocolError, not followed
    forever."""
    with stdio(None, "--endless-pages") as srv:
        with pytest.raises(MCPProtocolError, match="tools/list"):
            srv.tools()


# ---- results ---------------------------------------------------------------------------------------------------

def test_content_blocks_and_structured_content_become_content(server):
    """Text, image, embedded text and blob resources, a resource link and structuredContent arrive as parts in
    order and as Content.structured."""
    tools = Registry(server.tools())
    assert tools["echo"].invoke({"text": "héllo"}) == Content(parts=[TextPart(text="héllo")])
    assert tools["image"].invoke({}).parts == [TextPart(text="a red dot"), ImagePart(data=PNG, mime_type="image/png")]
    assert tools["resources"].invoke({}).parts == [
        ResourcePart(uri="file:///notes.txt", mime_type="text/plain", text="remember the milk"),
        ResourcePart(uri="file:///dot.png", mime_type="image/png", blob=PNG),
        LinkPart(uri="file:///big.csv", name="big.csv", description="a large table", mime_type="text/csv")]
    structured = tools["structured"].invoke({})
    assert structured.structured == {"celsius": 21.5} and text_of(structured) == '{"celsius": 21.5}'


def test_is_error_raises_tool_error_with_the_content(server):
    """An isError result raises ToolError carrying the server's content."""
    with pytest.raises(ToolError) as info:
        Registry(server.tools())["fails"].invoke({})
    assert info.value.content == Content(parts=[TextPart(text="the sensor is unplugged")])


# ---- crashes, hangs, reconnection ---------------------------------------------------------------------------------

def test_a_crash_mid_call_is_outcome_unknown_and_the_next_call_starts_a_new_process(server):
    """The process exits during the call: OutcomeUnknown (never re-sent); the next call starts a new process."""
    tools = Registry(server.tools())
    first = int(text_of(tools["pid"].invoke({})))
    with pytest.raises(OutcomeUnknown, match="may or may not"):
        tools["crash"].invoke({})
    second = int(text_of(tools["pid"].invoke({})))
    assert second != first
    assert wait_until(lambda: not alive(first))


def test_a_write_whose_server_crashed_is_not_run_again(server):
    """crash_write takes effect and kills its server: the handler says the outcome is unknown, and the effect
    happened exactly once (nothing re-sent it over the new session)."""
    tools = Registry(server.tools())
    with pytest.raises(OutcomeUnknown):
        tools["crash_write"].invoke({})
    assert text_of(tools["count"].invoke({})) == "1"


@pytest.mark.parametrize("mode", ["run", "arun"])
def test_a_read_that_hangs_is_handler_timeout_and_the_session_keeps_working(tmp_path, mode, toolwire_debug):
    """A read the server never answers is answered handler_timeout at the tool's timeout; the request is
    cancelled on the wire, the server still answers, and the next call uses the same process."""
    with stdio(tmp_path / "state") as srv:
        tools = srv.tools(timeout=0.5, trust_read_only=True) if mode == "run" else asyncio.run(_atools_closed(srv))
        registry = Registry(tools)
        pid = _pid(registry, mode)
        with capture_logs() as logs:
            results = dispatch(registry, [("sleep", {"seconds": 30})], mode=mode)
            assert [r.kind for r in results] == [toolwire.ResultKind.HANDLER_TIMEOUT]
            # the request is given up on the wire (an async handler is cancelled by the dispatcher at once; a
            # blocking one is left to its wire timeout, a second later), and the server pinged
            event = "mcp.call_timeout" if mode == "run" else "mcp.call_cancelled"
            assert wait_until(lambda: any(e["event"] == event for e in logs))
        assert _pid(registry, mode) == pid
        assert "mcp.session_reset" not in {e["event"] for e in logs}


async def _atools_closed(srv: MCPServer):
    return await srv.atools(timeout=0.5, trust_read_only=True)


def result_text(result: toolwire.ToolResult) -> str:
    """The text a dispatched call answered with: its typed parts' text where the dispatcher keeps parts, else
    its content (the text itself, or a Content's JSON form)."""
    parts = getattr(result, "parts", None)
    if parts is not None:
        return "".join(p.text for p in parts if isinstance(p, TextPart))
    if isinstance(result.content, dict):
        return "".join(p.get("text", "") for p in result.content.get("parts", []))
    return str(result.content)


def _pid(registry: Registry, mode: str) -> int:
    results = dispatch(registry, [("pid", {})], mode=mode)
    assert results[0].kind is toolwire.ResultKind.OK, results[0].content
    return int(result_text(results[0]))


def test_a_server_that_freezes_is_replaced_after_a_timeout(tmp_path, toolwire_debug):
    """A server blocked whole (it answers nothing, not even a ping) is stopped after the call times out, and the
    next call gets a new process."""
    with stdio(tmp_path / "state", probe_timeout=0.5) as srv:
        # only the frozen call has the short timeout: on a loaded machine a new process may take longer than that
        short = Registry(srv.tools(timeout=0.5, trust_read_only=True))
        registry = Registry(srv.tools(timeout=30))
        pid = int(text_of(registry["pid"].invoke({})))
        with capture_logs() as logs:
            results = dispatch(short, [("freeze", {"seconds": 30})])
            assert [r.kind for r in results] == [toolwire.ResultKind.HANDLER_TIMEOUT]
            assert wait_until(lambda: not alive(pid), 20.0)
        assert "mcp.session_reset" in {e["event"] for e in logs}
        assert int(text_of(registry["pid"].invoke({}))) != pid


def test_a_write_that_hangs_is_outcome_unknown_and_never_run_again(server):
    """A write the server never answers is outcome_unknown at its timeout; dispatching the same turn again runs
    nothing."""
    registry = Registry(server.tools(timeout=0.5))
    turn = toolwire.parse("openai-chat", body("openai-chat", [("call_w", "sleep_write", {"seconds": 30})]))
    dispatcher = Dispatcher(registry)
    first = dispatcher.run(turn, conversation_id="c")
    assert [r.kind for r in first] == [toolwire.ResultKind.OUTCOME_UNKNOWN]


def test_closing_stops_the_server_process(tmp_path):
    """Leaving `with` stops the stdio server's process; a handler of the closed server raises, runs nothing."""
    with stdio(tmp_path / "state") as srv:
        registry = Registry(srv.tools())
        pid = int(text_of(registry["pid"].invoke({})))
    assert wait_until(lambda: not alive(pid))
    with pytest.raises(toolwire.UsageError, match="not open"):
        registry["pid"].invoke({})


# ---- list changes -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("protocol", ["auto", "legacy"])
def test_list_changed_gives_a_new_snapshot_and_leaves_the_old_registry_alone(tmp_path, protocol):
    """notifications/tools/list_changed (on a listen stream in 2026-07-28, on the connection before) sets
    changed and calls on_change; the registry built before is unchanged and still works; registry() gives a new
    one with the new tool."""
    seen = []
    with stdio(tmp_path / "state", protocol=protocol, on_change=seen.append) as srv:
        old = srv.registry()
        assert not srv.changed and "extra_tool" not in old
        old["add_tool"].invoke({})
        assert wait_until(lambda: srv.changed and seen == [srv])
        assert "extra_tool" not in old and text_of(old["echo"].invoke({"text": "still"})) == "still"
        new = srv.registry()
        assert "extra_tool" in new and not srv.changed
        assert srv.protocol_version == ("2025-11-25" if protocol == "legacy" else "2026-07-28")


# ---- HTTP ---------------------------------------------------------------------------------------------------------

def test_http_with_a_bearer_header_lists_and_calls(http):
    """Over streamable HTTP with the token in a header: the same tools and results as over stdio."""
    with http.server() as srv:
        registry = Registry(srv.tools())
        assert set(registry.names) == GOOD
        assert text_of(registry["echo"].invoke({"text": "over http"})) == "over http"
        assert srv.name == http.url


def test_a_refused_token_is_a_connection_error_that_never_shows_the_token(http):
    """A wrong token: MCPConnectionError naming the URL, with neither token in its message nor in any log."""
    wrong = "wrong-token-0a9b8c7d6e"
    with capture_logs() as logs:
        with pytest.raises(MCPConnectionError) as info:
            http.server(token=wrong, reconnect_attempts=2).open()
    assert http.url in str(info.value) and info.value.attempts == 2
    text = str(info.value) + repr(logs)
    assert wrong not in text and TOKEN not in text


def test_http_server_crash_mid_call_then_restart(http):
    """The HTTP server process dies during a call: OutcomeUnknown; once it is back, the next call reconnects."""
    with http.server(reconnect_attempts=2) as srv:
        registry = Registry(srv.tools())
        with pytest.raises(OutcomeUnknown):
            registry["crash"].invoke({})
        assert http.wait_exit() == 3
        with pytest.raises(MCPConnectionError):
            registry["echo"].invoke({"text": "nobody there"})
        http.start()
        assert text_of(registry["echo"].invoke({"text": "back"})) == "back"


def test_async_with_and_atools_over_http(http):
    """async with / atools(): async handlers, awaited by Dispatcher.arun."""
    async def main():
        async with http.server() as srv:
            registry = await srv.aregistry()
            assert all(t.is_async for t in registry)
            turn = toolwire.parse("anthropic", body("anthropic", [("t1", "echo", {"text": "a"}),
                                                                  ("t2", "count", {})]))
            return await Dispatcher(registry).arun(turn, conversation_id="c")

    results = asyncio.run(main())
    assert [r.kind for r in results] == [toolwire.ResultKind.OK] * 2


# ---- misuse and unreachable servers -------------------------------------------------------------------------------

def test_a_command_that_does_not_exist_is_a_connection_error(tmp_path):
    """A command that cannot be started: MCPConnectionError after every attempt, naming the command."""
    srv = MCPServer.stdio(str(tmp_path / "no-such-server"), ["--flag"], reconnect_attempts=2)
    with pytest.raises(MCPConnectionError) as info:
        srv.open()
    assert "no-such-server --flag" in str(info.value) and info.value.attempts == 2
    assert "FileNotFoundError" in info.value.cause


def test_a_refused_port_is_a_connection_error():
    """Nothing listens on the URL: MCPConnectionError."""
    from .mcp_helpers import free_port

    with pytest.raises(MCPConnectionError, match="127.0.0.1"):
        MCPServer.http(f"http://127.0.0.1:{free_port()}/mcp", reconnect_attempts=1).open()


@pytest.mark.parametrize("make, message", [
    (lambda: MCPServer.stdio("python", "-m server"), "sequence of strings"),
    (lambda: MCPServer.http("ftp://example.com"), "http"),
    (lambda: MCPServer.parse("   "), "empty"),
    (lambda: MCPServer.parse("python -m x", headers={"A": "b"}), "HTTP"),
    (lambda: MCPServer.stdio("python", reconnect_attempts=0), "reconnect_attempts"),
    (lambda: MCPServer.stdio("python", protocol="2024"), "protocol"),
    (lambda: MCPServer.stdio("python", connect_timeout=float("nan")), "connect_timeout"),
])
def test_bad_options_are_usage_errors(make, message):
    """Misuse is a UsageError saying what is wrong."""
    with pytest.raises(toolwire.UsageError, match=message):
        make()


def test_tools_of_a_server_that_is_not_open_is_a_usage_error(tmp_path):
    """tools() before `with` raises UsageError; bad tools() options too."""
    srv = stdio(tmp_path / "state")
    with pytest.raises(toolwire.UsageError, match="not open"):
        srv.tools()
    with srv:
        for options in ({"timeout": None}, {"timeout": 0}, {"effects": {"echo": "delete"}}, {"dialects": ["x"]},
                        {"dialects": "openai-chat"}, {"prefix": 3}):
            with pytest.raises(toolwire.UsageError):
                srv.tools(**options)
        with pytest.raises(toolwire.UsageError, match="already open"):
            srv.open()


def test_import_toolwire_does_not_import_the_mcp_sdk():
    """import toolwire (and even import toolwire.mcp) leaves the mcp SDK unimported."""
    code = "import sys, toolwire, toolwire.mcp; print('mcp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_public_surface_of_toolwire_mcp_is_pinned():
    """toolwire.mcp.__all__ is the documented surface, and its errors derive from ToolwireError."""
    import toolwire.mcp as tm

    assert set(tm.__all__) == {"MCPServer", "SkippedTool", "ListedTool", "content_from_result", "MCPServerError",
                               "MCPConnectionError", "MCPProtocolError", "MCPUnreadableAnswer"}
    for name in ("MCPServerError", "MCPConnectionError", "MCPProtocolError", "MCPUnreadableAnswer"):
        assert issubclass(getattr(tm, name), toolwire.ToolwireError)
    assert issubclass(tm.MCPUnreadableAnswer, tm.MCPProtocolError)
    assert issubclass(tm.MCPUnreadableAnswer, toolwire.OutcomeUnknown)


@pytest.mark.parametrize("mode", ["run", "arun"])
def test_parallel_reads_of_one_turn_each_get_their_own_answer(server, mode):
    """Eight reads of one turn run at once over one session: each call gets the answer to its own request."""
    tools = server.tools() if mode == "run" else asyncio.run(server.atools())
    calls = [("echo", {"text": f"answer {i}"}) for i in range(8)]
    results = dispatch(Registry(tools), calls, mode=mode)
    assert [result_text(r) for r in results] == [f"answer {i}" for i in range(8)]
