"""An Anthropic response that stops with ``pause_turn`` is not the answer: the loop sends the paused turn back as
it came (the assistant message last, nothing added) so the model continues it, within the step limit. Over
loopback HTTP, the simulated provider answering planned bodies, sync and async, streamed and whole.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from toolwire.harness import AsyncToolLoop, FallbackReason, LoopResult, RetryPolicy, ToolLoop, fallback_message
from toolwire.harness.demo_tools import DemoWorld
from toolwire.sim import Fault, SimProvider

from ..wire import anthropic_events, sse

FAST = RetryPolicy(attempts=2, deadline=30.0, initial=0.01, max_backoff=0.05, max_hint=1.0)
MODES = ["sync", "async"]
SEARCH = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
          "fragments": ['{"query": "weather in Lisbon"}']}
PAUSED_TEXT = "Let me search for that."
FINAL_TEXT = "It is sunny in Lisbon."


def _message(blocks: list[dict], stop_reason: str, message_id: str) -> dict:
    content = []
    for b in blocks:
        if b["type"] == "text":
            content.append({"type": "text", "text": b["text"]})
        else:
            content.append({"type": b["type"], "id": b["id"], "name": b["name"],
                            "input": json.loads("".join(b["fragments"]))})
    return {"id": message_id, "type": "message", "role": "assistant", "model": "claude-x", "content": content,
            "stop_reason": stop_reason, "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}


def body(blocks: list[dict], stop_reason: str, message_id: str, stream: bool) -> Fault:
    if stream:
        return Fault.raw(sse(*anthropic_events(blocks, stop_reason, message_id=message_id), events=True),
                         content_type="text/event-stream")
    return Fault.raw(_message(blocks, stop_reason, message_id))


def paused(stream: bool, n: int = 1) -> Fault:
    return body([{"type": "text", "text": PAUSED_TEXT}, SEARCH], "pause_turn", f"msg_p{n}", stream)


def answered(stream: bool) -> Fault:
    return body([{"type": "text", "text": FINAL_TEXT}], "end_turn", "msg_end", stream)


@pytest.fixture
def sim():
    provider = SimProvider(seed=7)
    with provider.serve():
        yield provider


def run(sim: SimProvider, mode: str, *, stream: bool, max_steps: int = 8) -> LoopResult:
    kw: dict[str, Any] = dict(model="claude-x", registry=DemoWorld().registry(timeout=5.0), base_url=sim.base_url,
                              api_key="sk-ant-test", retry=FAST, timeout=5.0, stream=stream, max_steps=max_steps)
    if mode == "sync":
        with ToolLoop("anthropic", **kw) as loop:
            return loop.run("What is the weather in Lisbon?")

    async def go() -> LoopResult:
        async with AsyncToolLoop("anthropic", **kw) as loop:
            return await loop.run("What is the weather in Lisbon?")

    return asyncio.run(go())


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("mode", MODES)
def test_a_paused_turn_is_sent_back_and_the_continued_turn_is_the_answer(sim, mode, stream):
    """pause_turn, then end_turn: the answer is the continued turn's text, not the paused one's; the second
    request ends with the paused assistant message, its blocks as they came, and adds no user message."""
    sim.plan([paused(stream), answered(stream)])
    result = run(sim, mode, stream=stream)
    assert not result.fallback and result.answer == FINAL_TEXT, result.answer
    assert [s.turn.raw_finish_reason for s in result.steps] == ["pause_turn", "end_turn"]
    first, second = (r.body for r in sim.requests)
    assert second["messages"][:-1] == first["messages"]
    last = second["messages"][-1]
    assert last["role"] == "assistant"
    assert [b["type"] for b in last["content"]] == ["text", "server_tool_use"]
    assert last["content"][0]["text"] == PAUSED_TEXT
    assert last["content"][1]["id"] == "srvtoolu_1" and last["content"][1]["input"] == {"query": "weather in Lisbon"}


@pytest.mark.parametrize("mode", MODES)
def test_a_model_that_always_pauses_ends_in_the_step_limit_fallback(sim, mode):
    """Every response is pause_turn: after max_steps requests the step-limit fallback, never the paused text."""
    sim.plan([], then=paused(True))
    result = run(sim, mode, stream=True, max_steps=3)
    assert result.fallback and result.reason is FallbackReason.STEP_LIMIT, result.answer
    assert result.answer == fallback_message(FallbackReason.STEP_LIMIT) and PAUSED_TEXT not in result.answer
    assert len(sim.requests) == 3


@pytest.mark.parametrize("mode", MODES)
def test_a_paused_turn_without_text_is_continued_not_taken_for_an_empty_answer(sim, mode):
    """A paused turn holding only the server tool's call is no empty answer: it is sent back once, unchanged."""
    sim.plan([body([SEARCH], "pause_turn", "msg_p1", True), answered(True)])
    result = run(sim, mode, stream=True)
    assert not result.fallback and result.answer == FINAL_TEXT, result.answer
    assert len(sim.requests) == 2
    last = sim.requests[1].body["messages"][-1]
    assert last["role"] == "assistant" and [b["type"] for b in last["content"]] == ["server_tool_use"]
