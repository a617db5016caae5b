"""What an MCP server's answer says about whether a call ran, against the real SDK server (``tests/mcp_server.py
--outcome-tools``) over stdio and streamable HTTP, in both protocol eras, for every dialect, sync and async.

A write whose handler raised after its effect is answered by the SDK with a JSON-RPC error of its own (code 0 on a
connection opened with ``initialize``, -32603 on a 2026-07-28 one): it may have run, so it is ``outcome_unknown``
(never "the server refused the call", which invites the model to do it again). Only invalid params (-32602, the
spec's answer for an unknown tool too) and method not found (-32601) say "not run" and read as a refusal; an
``isError: true`` result is the tool's own answer (``tool_error``). A call the server may have run is never sent
again: a read in flight when the server died (or that the server answered with such an error) is answered
``handler_failed`` after one effect, not re-sent by the read's retries. Tools are writes unless the application
says otherwise: ``trust_read_only`` is False by default (a server's ``readOnlyHint`` is its claim)."""

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
def test_a_read_whose_handler_raised_is_handler_failed_after_one_effect(servers, transport, era, provider, mode):
    """A read (trusted readOnlyHint) that the server answers with the SDK's error for a raised handler may have
    run: handler_failed, not a refusal, and sent once, not again by the read's retries."""
    _, registries = servers[transport, era]
    registry = registries[mode]
    before = _count(registry)
    _, result = _dispatch(toolwire.Dispatcher(registry, backoff=0), provider, mode, "raise_read",
                          f"raise-read-{transport}-{era}-{provider}-{mode}")
    assert result.kind is ResultKind.HANDLER_FAILED, result
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


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_read_in_flight_when_its_server_dies_is_not_sent_again(tmp_path, provider, mode):
    """crash_read (a read by its trusted readOnlyHint) counts, then its server process exits: handler_failed, and
    the state file says it ran once (the read's retries did not send it to the new process)."""
    state = tmp_path / "state"
    with stdio(state, "--outcome-tools", stderr=subprocess.DEVNULL) as server:
        registry = Registry(server.tools(trust_read_only=True) if mode == "run"
                            else asyncio.run(server.atools(trust_read_only=True)))
        assert registry["crash_read"].effect == "read"
        _, result = _dispatch(toolwire.Dispatcher(registry, backoff=0), provider, mode, "crash_read",
                              f"crash-{provider}-{mode}")
        assert result.kind is ResultKind.HANDLER_FAILED, result
        assert _count(registry) == 1  # the next call opens a new process, which reads the state file
    assert state.read_text() == "1"


@pytest.mark.parametrize("mode", MODES)
def test_a_read_the_application_declared_is_not_sent_again_after_a_crash_either(tmp_path, mode):
    """A tool made a read by the application's effects (its server gives no hint to trust) is not re-sent after
    its server died mid-call: handler_failed, one effect."""
    state = tmp_path / "state"
    with stdio(state, "--outcome-tools", stderr=subprocess.DEVNULL) as server:
        effects = {"crash_read": "read"}
        registry = Registry(server.tools(effects=effects) if mode == "run"
                            else asyncio.run(server.atools(effects=effects)))
        assert registry["crash_read"].effect == "read"
        _, result = _dispatch(toolwire.Dispatcher(registry, backoff=0), "anthropic", mode, "crash_read", "declared")
        assert result.kind is ResultKind.HANDLER_FAILED, result
    assert state.read_text() == "1"


@pytest.mark.parametrize("mode", MODES)
def test_a_read_only_hint_is_not_trusted_unless_the_application_says_so(tmp_path, mode):
    """By default every MCP tool is a write, whatever its readOnlyHint (listed as effect_from "default"); the
    application's effects make a read, and trust_read_only=True takes the hints."""
    with stdio(tmp_path / "state", "--outcome-tools", stderr=subprocess.DEVNULL) as server:
        tools = server.tools() if mode == "run" else asyncio.run(server.atools())
        assert {t.effect for t in tools} == {"write"}
        listing = {x.name: x for x in server.listing}
        assert listing["echo"].read_only_hint is True
        assert (listing["echo"].effect, listing["echo"].effect_from) == ("write", "default")
        assert (listing["bump"].effect, listing["bump"].effect_from) == ("write", "annotation")
        declared = server.tools(effects={"echo": "read"}) if mode == "run" else \
            asyncio.run(server.atools(effects={"echo": "read"}))
        assert {t.name for t in declared if t.effect == "read"} == {"echo"}
        trusted = server.tools(trust_read_only=True) if mode == "run" else \
            asyncio.run(server.atools(trust_read_only=True))
        assert {"echo", "count", "crash_read"} <= {t.name for t in trusted if t.effect == "read"}


@pytest.mark.parametrize("mode", MODES)
def test_a_crashing_read_only_hinted_tool_is_a_write_by_default(tmp_path, mode):
    """crash_read claims readOnlyHint but counts: by default it is a write, so its crash is outcome_unknown, never
    run again, and it took effect once."""
    state = tmp_path / "state"
    with stdio(state, "--outcome-tools", stderr=subprocess.DEVNULL) as server:
        registry = Registry(server.tools() if mode == "run" else asyncio.run(server.atools()))
        dispatcher = toolwire.Dispatcher(registry)
        _, first = _dispatch(dispatcher, "openai-chat", mode, "crash_read", "default-write")
        _, again = _dispatch(dispatcher, "openai-chat", mode, "crash_read", "default-write")
        assert first.kind is again.kind is ResultKind.OUTCOME_UNKNOWN, (first, again)
    assert state.read_text() == "1"
