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

from .dialects import SIMULATED as PROVIDERS  # the dialects the loop can call on the simulator
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

def test_a_retry_limit_caps_the_retries_of_its_own_failure_type_only():
    """A failure with ``retry_limit=1`` is retried once per request; other failures in between do not count."""
    from toolwire.harness import ProviderError

    def err(type_: str, limit: int | None) -> ProviderError:
        return ProviderError(type_, provider="gemini", status=None, type=type_, transient=True, retry_limit=limit)

    failures = [err("empty_answer", 1), err("stream_cut", None), err("empty_answer", 1), err("stream_cut", None)]
    calls = []

    def attempt() -> None:
        calls.append(1)
        raise failures[len(calls) - 1]

    with pytest.raises(ProviderError) as info:
        RetryPolicy(attempts=10, initial=0.0, max_backoff=0.0).call(attempt)
    assert len(calls) == 3 and info.value.type == "empty_answer"


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
              "gemini": "SAFETY", "gemini-interactions": "cancelled",
              "bedrock-converse": "guardrail_intervened"}[provider]
    sim.plan([Fault.ok()], then=Fault.finish(reason, partial=True))
    result = run(sim, provider, mode, HEIGHT)
    expected = FallbackReason.PROVIDER_FAILED if provider == "gemini-interactions" else FallbackReason.CONTENT_FILTERED
    assert_fallback(result, expected)
    assert [c.result_kind for c in result.calls] == ["ok"]  # the read ran; its answer never came
    assert "170" not in result.answer


@pytest.mark.parametrize("mode", MODES)
def test_a_blocked_gemini_prompt_gets_the_content_filter_fallback(sim, mode):
    """Gemini's ``promptFeedback.blockReason`` (no candidates at all) is a filter like any other."""
    blocked = {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
               "usageMetadata": {"promptTokenCount": 9, "totalTokenCount": 9}, "modelVersion": MODEL}
    sim.plan([], then=Fault.raw(blocked))
    result = run(sim, "gemini", mode, HEIGHT, stream=False)
    assert_fallback(result, FallbackReason.CONTENT_FILTERED)
    assert len(sim.requests) == 1


#: a clean ending with nothing in it, in each dialect's own words
EMPTY = {
    "openai-chat": lambda: Fault.finish("stop"),
    "openai-responses": lambda: Fault.raw({"id": "resp_empty", "object": "response", "status": "completed",
                                           "output": [], "usage": None}, content_type="application/json"),
    "anthropic": lambda: Fault.finish("end_turn"),
    "gemini": lambda: Fault.finish("STOP"),
    "gemini-interactions": lambda: Fault.finish("completed"),
    "bedrock-converse": lambda: Fault.finish("end_turn"),
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


# ---- bodies and headers no parser can use ---------------------------------------------------------------------------

DEEP = b"[" * 1000 + b"]" * 1000
ENDLESS = b"data: " + b"x" * (17 * 1024 * 1024)  # one line past the framer's 16 MiB cap, and no newline
HTML = b"<!DOCTYPE html><html><body><h1>502 Bad Gateway</h1><p>upstream " + KEY.encode() + b"</p></body></html>"

#: name -> (the fault, stream?, requests made while it persists: 1 = not retried, 2 = retried once)
BAD_BODIES = {
    "nested_401_error_body": (lambda: Fault.status(401, body=b'{"error": ' + DEEP + b"}"), True, 1),
    "nested_error_inside_an_error_object": (
        lambda: Fault.status(403, body=b'{"error": {"type": ' + DEEP + b', "message": "no"}}'), True, 1),
    "endless_line": (lambda: Fault.raw(ENDLESS, content_type="text/event-stream"), True, 2),
    "trailing_garbage": (lambda: Fault.raw(b'{"a":1} 5'), False, 2),
    "json_scalar": (lambda: Fault.raw(b"5"), False, 2),
    "nested_json_body": (lambda: Fault.raw(b'{"candidates": ' + DEEP + b', "choices": ' + DEEP + b"}"), False, 2),
    "nested_sse_payload": (lambda: Fault.raw(b"data: {\"x\": " + DEEP + b"}\n\n", content_type="text/event-stream"),
                           True, 2),
    "html_200_streaming": (lambda: Fault.raw(HTML, content_type="text/html"), True, 2),
    "html_200_whole": (lambda: Fault.raw(HTML, content_type="text/html"), False, 2),
    "empty_200": (lambda: Fault.raw(b""), True, 2),
    "not_utf8_200": (lambda: Fault.raw(b"\xff\xfe\x80data: \xc3\x28{\"\xff\": 1}\n\n", content_type="text/event-stream"),
                     True, 2),
    "not_gzip_but_says_so": (lambda: Fault.raw(b"plainly not gzip", headers={"content-encoding": "gzip"}), True, 2),
    "redirect_with_html": (lambda: Fault.raw(HTML, status=302, content_type="text/html",
                                             headers={"location": "http://127.0.0.1:9/elsewhere"}), True, 1),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("name", BAD_BODIES)
def test_a_body_no_parser_can_use_ends_in_the_fallback_not_an_exception(sim, name, provider, mode, toolwire_debug):
    """Nesting past any recursion limit, a 17 MiB line, trailing garbage, HTML, nothing, not UTF-8, not gzip: the
    fallback, after at most one retry, with the details in the logs only."""
    fault, stream, requests = BAD_BODIES[name]
    sim.plan([], then=fault())
    with capture_logs() as logs:
        result = run(sim, provider, mode, HEIGHT, stream=stream)
    assert_fallback(result, FallbackReason.PROVIDER_FAILED)
    assert len(sim.requests) == requests
    assert_catalogued(logs)
    [fallback] = [e for e in logs if e["event"] == "loop.fallback"]
    assert fallback["error_type"]  # the cause is in the logs, not in the answer


RETRIED_ONCE = [name for name, (_, _, requests) in BAD_BODIES.items() if requests == 2]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("name", RETRIED_ONCE)
def test_an_unusable_body_once_is_retried_and_answered(sim, name, provider, mode):
    """A one-off unusable body (a proxy's page, a garbled response) costs one retry, not the answer."""
    fault, stream, _ = BAD_BODIES[name]
    sim.plan([fault(), Fault.ok()])
    result = run(sim, provider, mode, WEATHER, stream=stream)
    assert not result.fallback and result.answer == WEATHER_TEXT
    assert result.steps[0].attempts == 2


#: (header, value, retried?) on a 429: an unreadable value is ignored, a wait past the policy's cap is not waited
RETRY_AFTER = [
    ("retry-after", "soon", True),
    ("retry-after", "Fri, 99 Abc 2024 99:99:99 GMT", True),
    ("retry-after", "-5", True),
    ("retry-after-ms", "NaN", True),
    ("retry-after-ms", "lots", True),
    ("retry-after", "1e400", True),  # no RFC 9110 value: ignored, the usual backoff
    ("retry-after", "99999999999999999999999", False),
    ("retry-after", "Fri, 31 Dec 9999 23:59:59 GMT", False),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("header,value,retried", RETRY_AFTER, ids=[f"{h}={v}" for h, v, _ in RETRY_AFTER])
def test_a_retry_after_header_no_one_can_honour_never_raises(sim, header, value, retried, provider, mode):
    """Garbage (anything but ASCII digits or an HTTP-date) is ignored: the usual backoff applies; a huge or
    far-future wait is not retried: the fallback."""
    sim.plan([Fault.status(429, headers={header: value}), Fault.ok()])
    result = run(sim, provider, mode, WEATHER)
    if retried:
        assert not result.fallback and result.answer == WEATHER_TEXT
        assert len(sim.requests) == 2
    else:
        assert_fallback(result, FallbackReason.PROVIDER_FAILED)
        assert len(sim.requests) == 1


#: name -> (error body, headers)
ERROR_BODIES = {
    "not_utf8": (b"\xff\xfe\x00\x80 upstream \xc3\x28", {}),
    "html": (HTML, {}),
    "nested": (b'{"error": ' + DEEP + b"}", {}),
    "truncated_json": (b'{"error": {"message": "overloa', {}),
    "not_gzip_but_says_so": (b'{"error": {"message": "overloaded"}}', {"content-encoding": "gzip"}),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("name", ERROR_BODIES)
def test_a_transient_status_with_an_unreadable_body_is_still_retried(sim, name, provider, mode):
    """A 503 is transient whatever its body says (or fails to say): it is retried, and the answer comes; a 401
    with the same body is not."""
    body, headers = ERROR_BODIES[name]
    sim.plan([Fault.status(503, body=body, headers=headers), Fault.ok()])
    result = run(sim, provider, mode, WEATHER)
    assert not result.fallback and result.answer == WEATHER_TEXT
    assert len(sim.requests) == 2
    sim.reset()
    sim.plan([Fault.status(401, body=body, headers=headers), Fault.ok()])
    assert_fallback(run(sim, provider, mode, WEATHER), FallbackReason.PROVIDER_FAILED)
    assert len(sim.requests) == 1


@pytest.mark.parametrize("mode", MODES)
def test_a_huge_error_body_is_read_only_in_part(sim, mode, toolwire_debug):
    """A 401 with 24 MiB of body is not read whole: the fallback, one request, a short excerpt in the log."""
    sim.plan([Fault.status(401, body=b'{"error": {"message": "' + b"x" * (24 * 1024 * 1024) + b'"}}')])
    with capture_logs() as logs:
        result = run(sim, "anthropic", mode, HEIGHT)
    assert_fallback(result, FallbackReason.PROVIDER_FAILED)
    assert len(sim.requests) == 1
    [error] = [e for e in logs if e["event"] == "http.error"]
    assert error["status"] == 401 and len(error["body"]) <= 500


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_connection_reset_mid_body_is_retried(sim, provider, stream, mode):
    """A TCP reset halfway through the response is transient: retried, and nothing partial runs."""
    sim.plan([Fault.reset(at=0.5), Fault.ok()])
    world = DemoWorld()
    result = run(sim, provider, mode, HEIGHT, world=world, stream=stream)
    assert not result.fallback and "170 cm" in result.answer
    assert result.steps[0].attempts == 2 and [c.result_kind for c in result.calls] == ["ok"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_connection_reset_on_every_attempt_gets_the_fallback(sim, provider, mode):
    """Resets on every attempt: the retry budget, then the fallback."""
    sim.plan([], then=Fault.reset(at=0.3))
    result = run(sim, provider, mode, HEIGHT)
    assert_fallback(result, FallbackReason.PROVIDER_FAILED)
    assert len(sim.requests) == FAST.attempts


TRANSPORT_BODIES = ["nested_401_error_body", "endless_line", "trailing_garbage", "nested_json_body",
                    "nested_sse_payload", "not_gzip_but_says_so", "redirect_with_html"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", TRANSPORT_BODIES)
def test_the_transport_raises_only_a_typed_provider_error(sim, name, mode):
    """Underneath the loop, the transport turns every unusable body into a classified ``ProviderError``."""
    from toolwire.harness import AsyncHTTPTransport, HTTPTransport, ProviderError

    fault, stream, requests = BAD_BODIES[name]
    sim.plan([fault()])
    body = {"model": MODEL, "messages": [{"role": "user", "content": HEIGHT}], "stream": stream}
    if name in ("nested_json_body", "nested_sse_payload"):
        # nesting past the parser's depth limit is recorded on the turn (the loop then rejects the turn)
        if mode == "sync":
            with HTTPTransport("openai-chat", model=MODEL, base_url=sim.base_url, api_key=KEY, stream=stream) as t:
                turn = t.request(body)
        else:
            async def fetch() -> Any:
                async with AsyncHTTPTransport("openai-chat", model=MODEL, base_url=sim.base_url, api_key=KEY,
                                              stream=stream) as t:
                    return await t.request(body)

            turn = asyncio.run(fetch())
        assert turn.error is not None and turn.error.type == "limit_exceeded" and not turn.finished_cleanly
        return
    if mode == "sync":
        with HTTPTransport("openai-chat", model=MODEL, base_url=sim.base_url, api_key=KEY, stream=stream) as t:
            with pytest.raises(ProviderError) as info:
                t.request(body)
    else:
        async def go() -> None:
            async with AsyncHTTPTransport("openai-chat", model=MODEL, base_url=sim.base_url, api_key=KEY,
                                          stream=stream) as t:
                await t.request(body)

        with pytest.raises(ProviderError) as info:
            asyncio.run(go())
    err = info.value
    assert err.transient == (requests == 2) and err.type
    assert err.retry_limit == (1 if requests == 2 else None)
    assert KEY not in str(err) and "xxxx" not in str(err)


def nested(depth: int) -> dict[str, Any]:
    value: Any = "height"
    for _ in range(depth):
        value = [value]
    return {"key": value}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_arguments_nested_too_deep_to_replay_get_the_fallback(sim, provider, stream, mode, toolwire_debug):
    """Arguments nested 500 levels deep are refused by the parser's depth limit before any handler runs: one
    retry, then the fallback."""
    sim.plan([], then=Fault.arguments(nested(500)))
    world = DemoWorld()
    with capture_logs() as logs:
        result = run(sim, provider, mode, HEIGHT, world=world, stream=stream)
    assert_fallback(result, FallbackReason.PROVIDER_FAILED)
    assert len(sim.requests) == 2 and result.calls == []
    assert [e["type"] for e in logs if e["event"] == "loop.turn_rejected"] == ["limit_exceeded"] * 2
    assert_catalogued(logs)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_arguments_nested_within_reason_are_dispatched(sim, provider, mode):
    """Nesting well inside the limit is the tool's business: the call is dispatched (and refused by its schema)."""
    sim.plan([Fault.arguments(nested(40))])
    result = run(sim, provider, mode, HEIGHT)
    assert result.calls and result.calls[0].result_kind == "invalid_arguments"


#: name -> (bytes instead of an HTTP response, requests made while it persists)
WIRE = {
    "no_status_line": (b"SPEAK FRIEND AND ENTER\r\n\r\n", FAST.attempts),
    "nul_in_a_header": (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nX-Bad: a\x00b\r\n"
                        b"Content-Length: 2\r\n\r\nhi", FAST.attempts),
    "header_past_any_limit": (b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 200_000 + b"\r\nContent-Length: 0\r\n\r\n",
                              FAST.attempts),
    "broken_chunking": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nZZZ\r\nhello\r\n0\r\n\r\n",
                        FAST.attempts),
    "content_length_lies": (b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\ndata: {}\n\n", FAST.attempts),
    "status_999": (b"HTTP/1.1 999 Weird\r\nContent-Length: 2\r\n\r\n{}", FAST.attempts),  # past 5xx: transient
    "status_299": (b"HTTP/1.1 299 Odd\r\nContent-Length: 2\r\n\r\n{}", 2),
    "no_content_204": (b"HTTP/1.1 204 No Content\r\n\r\n", 2),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("name", WIRE)
def test_bytes_that_are_no_http_response_end_in_the_fallback(sim, name, provider, mode):
    """Below the body, at the HTTP level: a broken response is a connection failure and a status past 5xx a server
    error (both the retry budget); a 2xx with nothing usable in it is retried once."""
    data, requests = WIRE[name]
    sim.plan([], then=Fault.wire(data))
    result = run(sim, provider, mode, HEIGHT)
    assert_fallback(result, FallbackReason.PROVIDER_FAILED)
    assert len(sim.requests) == requests


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_provider_that_is_not_there_gets_the_fallback(provider, mode):
    """Nothing listening at the base URL: connection refused on every attempt, then the fallback."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again before the loop connects: nothing listens there

    class Nowhere:
        base_url = f"http://127.0.0.1:{port}"

    result = run(Nowhere(), provider, mode, HEIGHT)  # type: ignore[arg-type]
    assert_fallback(result, FallbackReason.PROVIDER_FAILED)
    assert result.steps == []
