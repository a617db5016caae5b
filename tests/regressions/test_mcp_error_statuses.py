"""An MCP server over HTTP whose answer to a ``tools/call`` is an HTTP 5xx or 408 (a gateway that timed out, a
server that crashed mid-call) or its own JSON-RPC "Internal error" may have run the call: a write is answered
``outcome_unknown`` and never run again, not ``tool_error`` (which invites the model to call it again: a second
effect). Only an HTTP 4xx, or a JSON-RPC refusal, is a refusal (failure mode 58). Every dialect, sync and async."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("mcp")

import toolwire  # noqa: E402
from toolwire import Registry, ResultKind  # noqa: E402
from toolwire.mcp import MCPServer  # noqa: E402

from ..bodies import body  # noqa: E402
from ..mcp_helpers import HostileHttp  # noqa: E402

DIALECTS = ["openai-chat", "openai-responses", "anthropic", "gemini", "gemini-interactions", "bedrock-converse"]


@pytest.fixture(scope="module")
def server():
    srv = HostileHttp()
    yield srv
    srv.stop()


def _dispatch(d: toolwire.Dispatcher, provider: str, mode: str, name: str, args: dict, conv: str):
    call_id = None if provider == "gemini" else "call_1"
    turn = toolwire.parse(provider, body(provider, [(call_id, name, args)]))
    assert [c.name for c in turn.runnable_calls] == [name], turn
    extra = {"turn_id": "t1"} if provider == "bedrock-converse" else {}
    if mode == "arun":
        return asyncio.run(d.arun(turn, conversation_id=conv, **extra))[0]
    return d.run(turn, conversation_id=conv, **extra)[0]


def _count(registry: Registry) -> int:
    return int(registry["count"].invoke({}).parts[0].text)


@pytest.mark.parametrize("mode", ["run", "arun"])
@pytest.mark.parametrize("provider", DIALECTS)
@pytest.mark.parametrize("status", [500, 502, 503, 504, 408])
def test_a_write_answered_with_an_http_5xx_is_outcome_unknown_and_never_runs_again(server, provider, mode, status):
    """The write ran on the server, then the answer was an HTTP error status that may follow a run: the call is
    outcome_unknown, and dispatching the same call again does not run it a second time."""
    with MCPServer.http(server.url, reconnect_attempts=2) as mcp:
        registry = Registry(mcp.tools(timeout=30.0))
        before = _count(registry)
        conv = f"c-{provider}-{mode}-{status}"
        d = toolwire.Dispatcher(registry)
        first = _dispatch(d, provider, mode, "bump_then_status", {"status": status}, conv)
        assert first.kind is ResultKind.OUTCOME_UNKNOWN and first.is_error, first
        assert f"HTTP {status}" in first.content, first.content
        again = _dispatch(d, provider, mode, "bump_then_status", {"status": status}, conv)
        assert again.kind is ResultKind.OUTCOME_UNKNOWN, again
        assert _count(registry) == before + 1


@pytest.mark.parametrize("mode", ["run", "arun"])
@pytest.mark.parametrize("provider", DIALECTS)
def test_a_write_answered_with_a_json_rpc_internal_error_is_outcome_unknown(server, provider, mode):
    """A server's own JSON-RPC -32603 (at HTTP 200) after the write ran: outcome_unknown, not tool_error."""
    with MCPServer.http(server.url, reconnect_attempts=2) as mcp:
        registry = Registry(mcp.tools(timeout=30.0))
        res = _dispatch(toolwire.Dispatcher(registry), provider, mode, "bump_then_internal_error", {}, f"i-{provider}-{mode}")
        assert res.kind is ResultKind.OUTCOME_UNKNOWN, res


@pytest.mark.parametrize("mode", ["run", "arun"])
@pytest.mark.parametrize("provider", DIALECTS)
def test_a_refusal_is_still_a_tool_error(server, provider, mode):
    """A JSON-RPC refusal at HTTP 400 and a bare HTTP 4xx are refusals: tool_error, nothing ran."""
    with MCPServer.http(server.url, reconnect_attempts=2) as mcp:
        registry = Registry(mcp.tools(timeout=30.0))
        before = _count(registry)
        res = _dispatch(toolwire.Dispatcher(registry), provider, mode, "refuse_write", {}, f"r-{provider}-{mode}")
        assert res.kind is ResultKind.TOOL_ERROR and "bad arguments" in res.content, res
        res = _dispatch(toolwire.Dispatcher(registry), provider, mode, "bump_then_status", {"status": 429}, f"s-{provider}-{mode}")
        assert res.kind is ResultKind.TOOL_ERROR, res
        assert _count(registry) == before + 1  # the 429 case counted (the server chose to), the refusal did not


@pytest.mark.parametrize("mode", ["run", "arun"])
def test_a_read_answered_with_an_http_5xx_is_an_error_result(server, mode):
    """A read answered with HTTP 502 is an error result for the model (handler_failed), never a crash."""
    with MCPServer.http(server.url, reconnect_attempts=2) as mcp:
        registry = Registry(mcp.tools(timeout=30.0, trust_read_only=True))
        res = _dispatch(toolwire.Dispatcher(registry), "anthropic", mode, "status_read", {"status": 502}, f"read-{mode}")
        assert res.is_error and res.kind is ResultKind.HANDLER_FAILED, res


@pytest.mark.parametrize("mode", ["run", "arun"])
@pytest.mark.parametrize("status", [500, 502, 503, 408])
@pytest.mark.parametrize("code", [-32602, -32601, -32600, -32000, 1])
def test_a_write_answered_5xx_with_a_json_rpc_error_body_is_outcome_unknown(server, mode, status, code):
    """A 5xx or 408 whose body is a JSON-RPC error (of any code) after the write ran: outcome_unknown; the status
    says the call may have run whatever the body claims."""
    with MCPServer.http(server.url, reconnect_attempts=2) as mcp:
        registry = Registry(mcp.tools(timeout=30.0))
        res = _dispatch(toolwire.Dispatcher(registry), "openai-chat", mode, "bump_then_status_error",
                        {"status": status, "code": code}, f"e-{mode}-{status}-{code}")
        assert res.kind is ResultKind.OUTCOME_UNKNOWN, res


@pytest.mark.parametrize("mode", ["run", "arun"])
@pytest.mark.parametrize("tool", ["bump_then_202", "bump_then_html"])
def test_a_write_the_server_took_without_a_result_is_outcome_unknown(server, mode, tool):
    """A write answered 202 Accepted, or 200 with a body that is no JSON-RPC message: the server took the call, so
    it is outcome_unknown, not "refused"."""
    with MCPServer.http(server.url, reconnect_attempts=2) as mcp:
        registry = Registry(mcp.tools(timeout=30.0))
        res = _dispatch(toolwire.Dispatcher(registry), "anthropic", mode, tool, {}, f"t-{mode}-{tool}")
        assert res.kind is ResultKind.OUTCOME_UNKNOWN, res


def test_an_internal_error_is_outcome_unknown_even_when_another_call_is_refused_meanwhile(server):
    """The server's own -32603 for a write arrives while a concurrent read is refused with HTTP 400: the write is
    still outcome_unknown (the refusal of another call says nothing about this one)."""
    import threading

    with MCPServer.http(server.url, reconnect_attempts=2) as mcp:
        registry = Registry(mcp.tools(timeout=30.0))
        box: dict = {}
        writer = threading.Thread(target=lambda: box.setdefault("w", _dispatch(
            toolwire.Dispatcher(registry), "gemini", "run", "bump_then_internal_error", {"delay": 0.8}, "race-w")))
        writer.start()
        import time

        time.sleep(0.3)
        read = _dispatch(toolwire.Dispatcher(registry), "gemini", "run", "status_read", {"status": 400}, "race-r")
        writer.join(30)
        assert read.is_error
        assert box["w"].kind is ResultKind.OUTCOME_UNKNOWN, box["w"]


@pytest.mark.parametrize("mode", ["run", "arun"])
@pytest.mark.parametrize("provider", DIALECTS)
def test_a_write_after_the_server_forgot_the_session_runs_once_on_a_new_session(server, provider, mode):
    """A restarted server answers the old session's requests with 404: it did not take the call, so the write is
    sent again on a new session and runs exactly once (every later call works too), instead of every call being
    refused until the MCPServer is reopened."""
    with MCPServer.http(server.url, reconnect_attempts=2) as mcp:
        registry = Registry(mcp.tools(timeout=30.0))
        before = _count(registry)
        assert registry["restart"].invoke({}).parts[0].text == "restarted"
        res = _dispatch(toolwire.Dispatcher(registry), provider, mode, "bump", {}, f"gone-{provider}-{mode}")
        assert res.kind is ResultKind.OK and not res.is_error, res
        assert _count(registry) == before + 1


@pytest.mark.parametrize("status", [502, 503, 429])
def test_a_listing_answered_with_a_transient_http_status_is_tried_again(server, status):
    """tools/list answered once with HTTP 502/503/429 (a server still starting, a busy gateway) is listed again on a
    new session, like a failed initialize; answered so every time, it is an MCPConnectionError naming the status."""
    from toolwire.mcp import MCPConnectionError

    with MCPServer.http(server.url, reconnect_attempts=2) as mcp:
        Registry(mcp.tools(timeout=30.0))["fail_next_lists"].invoke({"count": 1, "status": status})
    with MCPServer.http(server.url, reconnect_attempts=2) as mcp:
        assert "bump" in [t.name for t in mcp.tools(timeout=30.0)]
    with MCPServer.http(server.url, reconnect_attempts=2) as mcp:
        Registry(mcp.tools(timeout=30.0))["fail_next_lists"].invoke({"count": 2, "status": status})  # every try
    with MCPServer.http(server.url, reconnect_attempts=2) as mcp:
        with pytest.raises(MCPConnectionError) as err:
            mcp.tools(timeout=30.0)
        assert f"HTTP {status}" in str(err.value) + err.value.cause
