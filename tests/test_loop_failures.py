"""The loop's promise under everything a provider can send: the model's answer from a clean turn, or the
localized fallback; never an exception. Every case runs end to end over real loopback HTTP against the
simulated provider (its faults reproduce the provider's bytes), for every dialect, sync and async.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from structlog.testing import capture_logs

from toolwire.codecs import PROVIDERS
from toolwire.harness import LOCALES, AsyncToolLoop, FallbackReason, LoopResult, RetryPolicy, ToolLoop, fallback_message
from toolwire.harness.demo_tools import DemoWorld
from toolwire.logs import CATALOGUE
from toolwire.sim import SCENARIOS, Fault, SimProvider

FAST = RetryPolicy(attempts=4, deadline=30.0, initial=0.01, max_backoff=0.05, max_hint=2.0)
MODEL = "sim-model"
KEY = "sk-test-KEY-0f1e2d3c4b5a"
MODES = ["sync", "async"]
HEIGHT = SCENARIOS["height"].prompts["en"]  # the first response is a call
WEATHER = SCENARIOS["provider_down"].prompts["en"]  # the first response is text
WEATHER_TEXT = "I can't check the weather: I have no weather tool."


@pytest.fixture
def sim():
    provider = SimProvider(seed=11)
    with provider.serve():
        yield provider


def run(sim: SimProvider, provider: str, mode: str, prompt: str, *, world: DemoWorld | None = None,
        stream: bool = True, locale: str = "en", retry: RetryPolicy = FAST) -> LoopResult:
    """One conversation turn through the public loop, sync or async."""
    world = world if world is not None else DemoWorld()
    kw: dict[str, Any] = dict(model=MODEL, registry=world.registry(timeout=5.0), base_url=sim.base_url,
                              api_key=KEY, retry=retry, locale=locale, stream=stream, timeout=5.0,
                              conversation_id=f"{provider}-{mode}")
    if mode == "sync":
        with ToolLoop(provider, **kw) as loop:
            return loop.run(prompt)

    async def go() -> LoopResult:
        async with AsyncToolLoop(provider, **kw) as loop:
            return await loop.run(prompt)

    return asyncio.run(go())


def assert_fallback(result: LoopResult, reason: FallbackReason, locale: str = "en") -> None:
    assert result.fallback and result.reason is reason, (result.reason, result.answer)
    assert result.answer == fallback_message(reason, locale)


def assert_catalogued(logs: list[dict[str, Any]]) -> None:
    """Every event carries exactly its catalogued keys, at its catalogued level, and never the API key."""
    for entry in logs:
        spec = CATALOGUE[entry["event"]]
        assert set(entry) - {"event", "log_level"} == spec.keys, entry
        assert entry["log_level"] == spec.level
    assert KEY not in json.dumps(logs, default=str)


# ---- turns without calls that did not finish cleanly ----------------------------------------------------------------

#: (dialect, the raw unclean ending, the fallback it gets, requests made: one retry for a malformed call)
UNCLEAN = [
    ("openai-chat", "content_filter", FallbackReason.CONTENT_FILTERED, 1),
    ("openai-chat", "error", FallbackReason.PROVIDER_FAILED, 1),
    ("openai-responses", "content_filter", FallbackReason.CONTENT_FILTERED, 1),
    ("anthropic", "refusal", FallbackReason.CONTENT_FILTERED, 1),
    ("gemini", "SAFETY", FallbackReason.CONTENT_FILTERED, 1),
    ("gemini", "RECITATION", FallbackReason.CONTENT_FILTERED, 1),
    ("gemini", "MALFORMED_FUNCTION_CALL", FallbackReason.PROVIDER_FAILED, 2),
    ("gemini", "OTHER", FallbackReason.PROVIDER_FAILED, 1),
    ("gemini", "TOO_MANY_TOOL_CALLS", FallbackReason.PROVIDER_FAILED, 1),
    ("gemini-interactions", "cancelled", FallbackReason.PROVIDER_FAILED, 1),
    ("gemini-interactions", "blocked", FallbackReason.PROVIDER_FAILED, 1),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("partial", [False, True], ids=["no_content", "partial_text"])
@pytest.mark.parametrize("provider,reason,fallback,requests", UNCLEAN, ids=[f"{u[0]}:{u[1]}" for u in UNCLEAN])
def test_an_unclean_turn_without_calls_gets_the_fallback_not_its_text(sim, provider, reason, fallback, requests,
                                                                      partial, mode, toolwire_debug):
    """A filtered, refused, malformed or otherwise unclean ending is never the answer, even with text before it."""
    sim.plan([], then=Fault.finish(reason, partial=partial))
    world = DemoWorld()
    with capture_logs() as logs:
        result = run(sim, provider, mode, WEATHER if partial else HEIGHT, world=world)
    assert_fallback(result, fallback)
    assert len(sim.requests) == requests
    assert world.effects.count() == 0 and result.calls == []
    rejected = [e for e in logs if e["event"] == "loop.turn_rejected"]
    assert rejected and rejected[0]["finish_reason"] == ("incomplete" if provider == "openai-responses" else reason)
    assert_catalogued(logs)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_a_malformed_function_call_is_retried_once(sim, mode, stream):
    """Gemini's MALFORMED_FUNCTION_CALL gets one more attempt: the second sample calls the tool properly."""
    sim.plan([Fault.finish("MALFORMED_FUNCTION_CALL"), Fault.ok()])
    result = run(sim, "gemini", mode, HEIGHT, stream=stream)
    assert not result.fallback and "170 cm" in result.answer
    assert result.steps[0].attempts == 2 and [c.result_kind for c in result.calls] == ["ok"]


@pytest.mark.parametrize("mode", MODES)
def test_a_malformed_call_retry_stays_within_the_policy_budget(sim, mode):
    """With a single attempt allowed, a malformed call is not retried at all."""
    sim.plan([Fault.finish("MALFORMED_FUNCTION_CALL"), Fault.ok()])
    result = run(sim, "gemini", mode, HEIGHT, retry=RetryPolicy(attempts=1, initial=0.01))
    assert_fallback(result, FallbackReason.PROVIDER_FAILED)
    assert len(sim.requests) == 1


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_filtered_turn_after_a_tool_round_gets_the_fallback(sim, provider, mode):
    """The ending that follows the tool results is checked as strictly as the first one."""
    reason = {"openai-chat": "content_filter", "openai-responses": "content_filter", "anthropic": "refusal",
              "gemini": "SAFETY", "gemini-interactions": "cancelled"}[provider]
    sim.plan([Fault.ok()], then=Fault.finish(reason, partial=True))
    result = run(sim, provider, mode, HEIGHT)
    expected = FallbackReason.PROVIDER_FAILED if provider == "gemini-interactions" else FallbackReason.CONTENT_FILTERED
    assert_fallback(result, expected)
    assert [c.result_kind for c in result.calls] == ["ok"]  # the read ran; its answer never came
    assert "170" not in result.answer


#: a clean ending with nothing in it, in each dialect's own words
EMPTY = {
    "openai-chat": lambda: Fault.finish("stop"),
    "openai-responses": lambda: Fault.raw({"id": "resp_empty", "object": "response", "status": "completed",
                                           "output": [], "usage": None}, content_type="application/json"),
    "anthropic": lambda: Fault.finish("end_turn"),
    "gemini": lambda: Fault.finish("STOP"),
    "gemini-interactions": lambda: Fault.finish("completed"),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_empty_answer_is_asked_again_once_then_gets_the_fallback(sim, provider, mode):
    """A clean turn with neither calls nor text is no answer: one more attempt, then the fallback."""
    stream = provider != "openai-responses"  # its empty response is a whole body
    sim.plan([], then=EMPTY[provider]())
    result = run(sim, provider, mode, HEIGHT, stream=stream)
    assert_fallback(result, FallbackReason.PROVIDER_FAILED)
    assert len(sim.requests) == 2
    sim.reset()
    sim.plan([EMPTY[provider](), Fault.ok()])
    result = run(sim, provider, mode, WEATHER, stream=stream)
    assert not result.fallback and result.answer == WEATHER_TEXT


@pytest.mark.parametrize("locale", LOCALES)
def test_the_content_filter_fallback_is_localized(sim, locale):
    """Every locale has the content-filter message, and it carries no diagnostics."""
    message = fallback_message(FallbackReason.CONTENT_FILTERED, locale)
    assert message and message not in {fallback_message(r, locale) for r in FallbackReason
                                       if r is not FallbackReason.CONTENT_FILTERED}
    sim.plan([Fault.finish("refusal")])
    result = run(sim, "anthropic", "sync", SCENARIOS["height"].prompts[locale], locale=locale)
    assert_fallback(result, FallbackReason.CONTENT_FILTERED, locale)
    assert "refusal" not in result.answer.lower()
