"""Several choices (Chat ``n > 1``) or candidates (Gemini): when choice 0 is a clean text answer, that text is the
loop's answer, whatever the other choices hold (calls included: none of them runs). Over loopback HTTP, the
simulated provider answering planned bodies, sync and async, streamed and whole.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from toolwire.harness import AsyncToolLoop, LoopResult, RetryPolicy, ToolLoop
from toolwire.harness.demo_tools import DemoWorld
from toolwire.sim import Fault, SimProvider

from ..test_codec_gemini import fc
from ..test_codec_gemini import sse as gemini_sse
from ..wire import chunk, sse, tc

FAST = RetryPolicy(attempts=2, deadline=30.0, initial=0.01, max_backoff=0.05, max_hint=1.0)
MODES = ["sync", "async"]
TEXT = "You are 170 cm tall."
ARGS = {"key": "height"}


def chat(stream: bool) -> Fault:
    """Choice 0: text, ``stop``; choice 1: a call, ``tool_calls``."""
    if stream:
        return Fault.raw(sse(chunk(content=TEXT), chunk(tc(0, "call_b", "lookup_demo_value", json.dumps(ARGS)),
                                                        choice=1),
                             chunk(finish="stop"), chunk(finish="tool_calls", choice=1), "[DONE]"),
                         content_type="text/event-stream")
    return Fault.raw({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": TEXT}, "finish_reason": "stop"},
        {"index": 1, "message": {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_b", "type": "function",
             "function": {"name": "lookup_demo_value", "arguments": json.dumps(ARGS)}}]},
         "finish_reason": "tool_calls"}]})


def gemini(stream: bool) -> Fault:
    """Candidate 0: text, ``STOP``; candidate 1: a call, ``STOP``."""
    candidates = [{"index": 0, "content": {"role": "model", "parts": [{"text": TEXT}]}, "finishReason": "STOP"},
                  {"index": 1, "content": {"role": "model", "parts": [fc("lookup_demo_value", ARGS, id="g1")]},
                   "finishReason": "STOP"}]
    if stream:
        return Fault.raw(gemini_sse({"candidates": candidates}), content_type="text/event-stream")
    return Fault.raw({"candidates": candidates, "modelVersion": "m"})


#: the dialects whose responses hold several choices
BODIES = {"openai-chat": chat, "gemini": gemini}


@pytest.fixture
def sim():
    provider = SimProvider(seed=9)
    with provider.serve():
        yield provider


def run(sim: SimProvider, provider: str, mode: str, *, stream: bool, world: DemoWorld) -> LoopResult:
    kw: dict[str, Any] = dict(model="m", registry=world.registry(timeout=5.0), base_url=sim.base_url,
                              api_key="sk-test", retry=FAST, timeout=5.0, stream=stream, max_steps=3)
    if mode == "sync":
        with ToolLoop(provider, **kw) as loop:
            return loop.run("How tall am I?")

    async def go() -> LoopResult:
        async with AsyncToolLoop(provider, **kw) as loop:
            return await loop.run("How tall am I?")

    return asyncio.run(go())


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", BODIES)
def test_choice_0_text_is_the_answer_whatever_another_choice_calls(sim, provider, mode, stream):
    """Choice 0 answers in text, choice 1 asks for a call: one request, choice 0's text, nothing run."""
    sim.plan([], then=BODIES[provider](stream))
    world = DemoWorld()
    result = run(sim, provider, mode, stream=stream, world=world)
    assert not result.fallback and result.answer == TEXT, (result.reason, result.answer)
    assert len(sim.requests) == 1
    assert world.calls == {} and result.calls == [] and result.writes == ()
