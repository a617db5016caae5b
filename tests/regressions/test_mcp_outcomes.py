"""What an MCP server's answer says about whether a call ran, against the real SDK server (``tests/mcp_server.py
--outcome-tools``) over stdio and streamable HTTP, in both protocol eras, for every dialect, sync and async.

A write whose handler raised after its effect is answered by the SDK with a JSON-RPC error of its own (code 0 on a
connection opened with ``initialize``, -32603 on a 2026-07-28 one): it may have run, so it is ``outcome_unknown``
(never "the server refused the call", which invites the model to do it again). Only invalid params (-32602, the
spec's answer for an unknown tool too) and method not found (-32601) say "not run" and read as a refusal; an
``isError: true`` result is the tool's own answer (``tool_error``)."""

from __future__ import annotations

import asyncio
import json
import subprocess

import pytest
from structlog.testing import capture_logs

pytest.importorskip("mcp")

import toolwire  # noqa: E402
from toolwire import Registry, ResultKind  # noqa: E402

from ..bodies import PROVIDERS, body, identified  # noqa: E402
from ..mcp_helpers import HttpServerProcess, stdio  # noqa: E402

MODES = ["run", "arun"]
ERAS = ["auto", "legacy"]  # the newest protocol the server speaks (2026-07-28), and the initialize handshake
TRANSPORTS = ["stdio", "http"]


@pytest.fixture(scope="module")
def http_process(tmp_path_factory):
    proc = HttpServerProcess(tmp_path_factory.mktemp("mcp-http") / "state", "--outcome-tools")
    proc.start()
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def servers(tmp_path_factory, http_process):
    """Per (transport, protocol era): the opened server and its registries for run (blocking handlers) and arun
    (async handlers), every tool trusted as its readOnlyHint says."""
    opened = {}
    try:
        for era in ERAS:
            state = tmp_path_factory.mktemp(f"mcp-stdio-{era}") / "state"
            for transport in TRANSPORTS:
                server = (stdio(state, "--outcome-tools", protocol=era, stderr=subprocess.DEVNULL)
                          if transport == "stdio" else http_process.server(protocol=era))
                server.open()
                opened[transport, era] = (server, {
                    "run": Registry(server.tools(trust_read_only=True)),
                    "arun": Registry(asyncio.run(server.atools(trust_read_only=True)))})
        yield opened
    finally:
        for server, _ in opened.values():
            server.close()


def _count(registry: Registry) -> int:
    """The server's effect counter, read through ``registry``'s own ``count`` handler (blocking or async)."""
    content = registry["count"].invoke({})
    if asyncio.iscoroutine(content):
        content = asyncio.run(content)
    return int(content.parts[0].text)


def _dispatch(dispatcher: toolwire.Dispatcher, provider: str, mode: str, name: str, conv: str):
    call_id = "call_1"
    turn = toolwire.parse(provider, body(provider, [(call_id, name, {})], response_id=f"resp-{conv}"))
    assert [c.name for c in turn.runnable_calls] == [name], turn
    extra = identified(provider, f"resp-{conv}")
    if mode == "arun":
        results = asyncio.run(dispatcher.arun(turn, conversation_id=conv, **extra))
    else:
        results = dispatcher.run(turn, conversation_id=conv, **extra)
    return turn, results[0]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_write_whose_handler_raised_after_its_effect_is_outcome_unknown_not_a_refusal(servers, transport, era,
                                                                                       provider, mode):
    """The SDK's own JSON-RPC error for a handler that raised after counting (code 0 after initialize, -32603 in
    2026-07-28) answers the write outcome_unknown in the result, the encoded answer and the events; the same call
    dispatched again runs nothing: one effect."""
    _, registries = servers[transport, era]
    registry = registries[mode]
    before = _count(registry)
    dispatcher = toolwire.Dispatcher(registry)
    conv = f"raise-{transport}-{era}-{provider}-{mode}"
    with capture_logs() as logs:
        turn, first = _dispatch(dispatcher, provider, mode, "raise_write", conv)
    assert first.kind is ResultKind.OUTCOME_UNKNOWN and first.is_error, first
    assert "refused" not in str(first.content), first.content
    encoded = json.dumps(toolwire.encode_results(turn, [first]))
    assert "refused" not in encoded and "may or may not have taken effect" in encoded, encoded
    events = {e["event"] for e in logs}
    assert "dispatch.outcome_unknown" in events and "dispatch.tool_error" not in events, events
    _, again = _dispatch(dispatcher, provider, mode, "raise_write", conv)
    assert again.kind is ResultKind.OUTCOME_UNKNOWN, again
    assert _count(registry) == before + 1


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_invalid_params_and_method_not_found_are_refusals_and_is_error_is_the_tools_answer(servers, transport, era,
                                                                                          provider, mode):
    """-32602 (an unknown tool, as the spec answers it), the SDK's -32602 for arguments that fail validation and
    -32601 say the call did not run: tool_error with the server's text; an isError result is the tool's own
    answer: tool_error with its content. None of them counts."""
    _, registries = servers[transport, era]
    registry = registries[mode]
    before = _count(registry)
    dispatcher = toolwire.Dispatcher(registry)
    conv = f"refuse-{transport}-{era}-{provider}-{mode}"
    expected = {"refuse_params": "Unknown tool: refuse_params", "refuse_method": "Method not found",
                "refuse_validation": "Invalid request parameters", "fails_write": "the notebook is locked"}
    for name, text in expected.items():
        _, result = _dispatch(dispatcher, provider, mode, name, f"{conv}-{name}")
        assert result.kind is ResultKind.TOOL_ERROR and result.is_error, (name, result)
        assert text in json.dumps(result.content), (name, result.content)
    assert _count(registry) == before
