"""Exactly once through the loop: a conversation that asks for the same write in two turns gets two effects, a
restart that replays the same turn gets one, and no secret reaches a log line. End to end over loopback HTTP
against the simulated provider, every dialect, sync and async.
"""

from __future__ import annotations

import asyncio
import io
import json
import sqlite3
from typing import Any

import pytest

from toolwire import Dispatcher, SQLiteLedger
from .dialects import SIMULATED as PROVIDERS  # the dialects the loop can call on the simulator
from toolwire.harness import AsyncToolLoop, RetryPolicy, ToolLoop
from toolwire.harness.demo_tools import DemoWorld
from toolwire.logs import configure_logging
from toolwire.sim import SCENARIOS, Fault, SimProvider

FAST = RetryPolicy(attempts=3, deadline=30.0, initial=0.01, max_backoff=0.05, max_hint=1.0)
SAVE = SCENARIOS["save_with_faults"].prompts["en"]
MODES = ["sync", "async"]
KEY = "sk-planted-LOOPKEY-9a8b7c6d5e4f3a2b1c0d"


@pytest.fixture
def sim():
    provider = SimProvider(seed=5)
    with provider.serve():
        yield provider


def conversation(sim: SimProvider, provider: str, mode: str, prompts: list[str], *, world: DemoWorld,
                 ledger_path: str, api_key: str = "sk-test-0000000000") -> list[Any]:
    """Run ``prompts`` one after the other in one conversation (one loop), sync or async."""
    kw: dict[str, Any] = dict(model="sim-model", registry=world.registry(timeout=5.0), base_url=sim.base_url,
                              api_key=api_key, retry=FAST, timeout=5.0, conversation_id="conv-1",
                              dispatcher=Dispatcher(world.registry(timeout=5.0), ledger=SQLiteLedger(ledger_path)))
    if mode == "sync":
        with ToolLoop(provider, **kw) as loop:
            return [loop.run(p) for p in prompts]

    async def go() -> list[Any]:
        async with AsyncToolLoop(provider, **kw) as loop:
            return [await loop.run(p) for p in prompts]

    return asyncio.run(go())


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_same_write_asked_in_two_turns_of_a_conversation_runs_twice(sim, provider, mode, tmp_path):
    """"Save my weight, 70 kg" twice in one conversation is two effects; each turn's call is its own instance,
    keyed by the identity minted for its model request."""
    world = DemoWorld()
    path = str(tmp_path / "l.db")
    results = conversation(sim, provider, mode, [SAVE, SAVE], world=world, ledger_path=path)
    assert [r.fallback for r in results] == [False, False], [r.answer for r in results]
    assert world.effects.count("save_measurement") == 2
    with sqlite3.connect(path) as conn:
        keys = [k for (k,) in conn.execute("SELECT call_key FROM toolwire_ledger WHERE status = 'completed'")]
    assert len(keys) == 2 and all(k.startswith('call:["turn:req:') for k in keys)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_planted_api_key_never_reaches_the_logs(sim, provider, mode, tmp_path):
    """A provider that echoes the API key in an error type, an error message, and right across the 500-character
    cut of the logged body excerpt: the key appears in no log line at debug level, nor in the answer."""
    body = {"error": {"type": KEY, "code": KEY, "message": f"Incorrect API key provided: {KEY}"}}
    straddle = ("x" * 490 + KEY + "y" * 100).encode()
    sim.plan([Fault.status(500, body=body), Fault.status(503, body=straddle)], then=Fault.status(401, body=body))
    out = io.StringIO()
    configure_logging("json", "debug", stream=out)
    world = DemoWorld()
    [result] = conversation(sim, provider, mode, [SAVE], world=world, ledger_path=str(tmp_path / "l.db"),
                            api_key=KEY)
    assert result.fallback
    text = out.getvalue()
    assert "http.error" in text and "loop.fallback" in text
    for fragment in (KEY, KEY[:16], KEY[-16:]):
        assert fragment not in text, fragment
    assert KEY not in json.dumps(result.answer) and KEY[:12] not in result.answer


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_unreadable_2xx_body_is_not_logged_without_log_arguments(sim, provider, tmp_path):
    """A 2xx body that cannot be parsed holds the model's calls: its excerpt is logged only with log_arguments."""
    from toolwire import parse  # noqa: F401 - the body below is what a provider would send, plus garbage
    from toolwire.harness.demo_tools import DemoWorld as World

    marker = "PII-MARKER-7731"
    data = {"openai-chat": {"id": "c", "object": "chat.completion", "choices": [{"index": 0, "finish_reason":
                            "tool_calls", "message": {"role": "assistant", "tool_calls": [{"id": "x", "type":
                            "function", "function": {"name": "save_measurement", "arguments": json.dumps(
                                {"kind": marker})}}]}}]}}.get(provider, {"note": marker})
    sim.plan([], then=Fault.raw(json.dumps(data).encode() + b" 5"))
    out = io.StringIO()
    configure_logging("json", "debug", stream=out)
    kw: dict[str, Any] = dict(model="sim-model", registry=World().registry(timeout=5.0), base_url=sim.base_url,
                              api_key="sk-test-0000000000", retry=FAST, timeout=5.0, stream=False)
    with ToolLoop(provider, **kw) as loop:
        assert loop.run(SAVE).fallback
    assert "http.unreadable_body" in out.getvalue() and marker not in out.getvalue()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_planted_api_key_is_in_no_error_message_or_type(sim, provider):
    """A 401 body that puts the API key in its error type and message: the transport's ProviderError (message
    and type) and the loop's result hold no trace of it."""
    from toolwire.harness import HTTPTransport, ProviderError

    body = {"error": {"type": KEY, "code": KEY, "message": f"Incorrect API key provided: {KEY}"}}
    sim.plan([Fault.status(401, body=body)])
    with HTTPTransport(provider, model="sim-model", base_url=sim.base_url, api_key=KEY, stream=False) as t:
        with pytest.raises(ProviderError) as info:
            t.request({"model": "sim-model"})
    err = info.value
    assert KEY not in str(err) and KEY not in str(err.type) and KEY[:16] not in repr(vars(err))


def test_an_in_stream_error_echoing_a_registered_key_is_scrubbed_on_the_turn():
    """A registered API key echoed in a provider's in-stream error never reaches the Turn's error."""
    from toolwire import _log

    _log.add_secret(KEY)
    stream = (b'event: error\ndata: {"type":"error","error":{"type":"' + KEY.encode() + b'","message":"bad key '
              + KEY.encode() + b'"}}\n\n')
    turn = __import__("toolwire").parse("anthropic", stream)
    assert turn.error is not None and KEY not in turn.error.type and KEY not in turn.error.message


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_loop_keys_each_turn_by_the_identity_of_its_model_request(sim, provider, mode, tmp_path):
    """Every turn the loop dispatches is keyed by the identity minted for its model request (kept in
    ``StepRecord.turn_id``), never by the position in the history nor by the response id alone."""
    world, path = DemoWorld(), str(tmp_path / "l.db")
    kw: dict[str, Any] = dict(model="sim-model", registry=world.registry(timeout=5.0), base_url=sim.base_url,
                              api_key="sk-test-0000000000", retry=FAST, timeout=5.0, conversation_id="conv-1",
                              dispatcher=Dispatcher(world.registry(timeout=5.0), ledger=SQLiteLedger(path)))
    if mode == "sync":
        with ToolLoop(provider, **kw) as loop:
            result = loop.run(SAVE)
    else:
        async def go() -> Any:
            async with AsyncToolLoop(provider, **kw) as loop:
                return await loop.run(SAVE)

        result = asyncio.run(go())
    assert not result.fallback, result.answer
    ids = [s.turn_id for s in result.steps if s.results]
    assert ids and all(i.startswith("req:") for i in ids) and len(set(ids)) == len(ids), ids
    with sqlite3.connect(path) as conn:
        keys = [k for (k,) in conn.execute("SELECT call_key FROM toolwire_ledger WHERE status = 'completed'")]
    assert keys and all(any(f'"turn:{tid}"' in k for tid in ids) for k in keys), (keys, ids)
