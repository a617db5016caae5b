"""OpenTelemetry spans of the harness loop (toolwire.harness.tracing), every dialect, sync and async, over real
loopback HTTP against the simulated provider: one ``invoke_agent`` span per prompt, one inference span per model
request (retries as events on it), the ``execute_tool`` spans of the calls and the handlers' own spans below."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from contextlib import aclosing
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace  # noqa: E402
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402
from structlog.testing import capture_logs  # noqa: E402

import toolwire  # noqa: E402
import toolwire.logs  # noqa: E402
from toolwire import otel  # noqa: E402
from .dialects import SIMULATED as PROVIDERS  # noqa: E402 - the dialects the loop can call on the simulator
from toolwire.harness import AsyncToolLoop, RetryPolicy, ToolLoop  # noqa: E402
from toolwire.harness.events import RequestStarted, ResponseEvent, RetryScheduled  # noqa: E402
from toolwire.sim import Fault, SimProvider  # noqa: E402

from .otel_support import EXPORTER, finished, named, only, parent_of  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FAST = RetryPolicy(attempts=5, deadline=20.0, initial=0.01, max_backoff=0.05, max_hint=2.0)
MODEL = "sim-model"
PROMPT = "How tall am I?"
OPERATION = {"openai-chat": "chat", "openai-responses": "chat", "anthropic": "chat", "gemini": "generate_content",
             "gemini-interactions": "chat", "bedrock-converse": "chat"}
PROVIDER_NAME = {"openai-chat": "openai", "openai-responses": "openai", "anthropic": "anthropic",
                 "gemini": "gcp.gemini", "gemini-interactions": "gcp.gemini", "bedrock-converse": "aws.bedrock"}
_tracer = trace.get_tracer("toolwire.tests")


def lookup_demo_value(key: str) -> dict:
    """Look up one of the user's stored values: height or weight."""
    with _tracer.start_as_current_span("inside lookup"):
        return {"key": key, "value": {"height": "170 cm", "weight": "70 kg"}.get(key)}


@pytest.fixture(autouse=True)
def spans():
    otel.configure_tracing(None)
    EXPORTER.clear()
    yield EXPORTER
    otel.configure_tracing(None)
    EXPORTER.clear()


@pytest.fixture
def sim():
    """A simulated provider of its own for each test, stopped at its end."""
    provider = SimProvider(seed=11)
    with provider.serve() as base_url:
        provider.base_url = base_url
        yield provider


def options(provider: str, sim, timeout: float | None) -> dict:
    registry = toolwire.Registry([toolwire.Tool.from_function(lookup_demo_value, effect="read", timeout=timeout)])
    # a temperature where the dialect's request has one (Anthropic's has none: its max_tokens is always sent)
    extra = {} if provider == "anthropic" else {"temperature": 0.25}
    return dict(model=MODEL, registry=registry, base_url=sim.base_url, api_key="sim-key", retry=FAST, timeout=5.0,
                conversation_id=f"otel-{provider}", **extra)


def run_prompt(provider: str, sim, mode: str, *, timeout: float | None = 5.0, on_event=None):
    """Run PROMPT through ToolLoop.run, AsyncToolLoop.run or AsyncToolLoop.stream, under the span "app"; the
    result and the app span."""
    with _tracer.start_as_current_span("app") as app:
        if mode == "sync":
            with ToolLoop(provider, **options(provider, sim, timeout)) as loop:
                return loop.run(PROMPT, on_event=on_event), app

        async def main():
            async with AsyncToolLoop(provider, **options(provider, sim, timeout)) as loop:
                if mode == "async":
                    return await loop.run(PROMPT, on_event=on_event)
                async with aclosing(loop.stream(PROMPT)) as events:
                    async for event in events:
                        if on_event is not None:
                            on_event(event)
                return event.result

        return asyncio.run(main()), app


def inference_spans(provider: str):
    return named(f"{OPERATION[provider]} {MODEL}")


def check_agent(provider: str, result, app) -> object:
    """The prompt's invoke_agent span: under the app span, one trace for everything."""
    agent = only("invoke_agent")
    assert agent.kind is SpanKind.INTERNAL
    assert parent_of(agent) == app.get_span_context().span_id
    assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert agent.attributes["gen_ai.provider.name"] == PROVIDER_NAME[provider]
    assert agent.attributes["gen_ai.request.model"] == MODEL
    assert agent.attributes["gen_ai.conversation.id"] == f"otel-{provider}"
    assert {s.context.trace_id for s in finished()} == {app.get_span_context().trace_id}
    return agent


def check_request(provider: str, span, agent, sim) -> None:
    """What every inference span of the loop says before its response: name, kind, parent, request attributes."""
    assert span.name == f"{OPERATION[provider]} {MODEL}"
    assert span.kind is SpanKind.CLIENT
    assert parent_of(span) == agent.context.span_id
    a = span.attributes
    assert a["gen_ai.operation.name"] == OPERATION[provider]
    assert a["gen_ai.provider.name"] == PROVIDER_NAME[provider]
    assert a["gen_ai.request.model"] == MODEL
    assert a["gen_ai.conversation.id"] == f"otel-{provider}"
    assert a["server.address"] == "127.0.0.1"
    assert a["server.port"] == int(sim.base_url.rsplit(":", 1)[1])
    assert a["gen_ai.request.stream"] is True
    if provider == "anthropic":
        assert a["gen_ai.request.max_tokens"] == 1024 and "gen_ai.request.temperature" not in a
    else:
        assert a["gen_ai.request.temperature"] == 0.25
    assert a.get("openai.api.type") == {"openai-chat": "chat_completions",
                                        "openai-responses": "responses"}.get(provider)


def check_response(span, turn) -> None:
    """The response attributes of an inference span are those of the turn the loop accepted."""
    a = span.attributes
    assert a.get("gen_ai.response.id") == turn.response_id  # None: the API gives its responses no id (Bedrock)
    assert a.get("gen_ai.response.model") == turn.model
    assert list(a["gen_ai.response.finish_reasons"]) == [turn.raw_finish_reason]
    usage = turn.token_usage
    assert usage is not None and usage.input_tokens > 0 and usage.output_tokens > 0  # the simulator reports usage
    assert a["gen_ai.usage.input_tokens"] == usage.input_tokens
    assert a["gen_ai.usage.output_tokens"] == usage.output_tokens
    for attribute, value in (("gen_ai.usage.cache_read.input_tokens", usage.cache_read_input_tokens),
                             ("gen_ai.usage.cache_creation.input_tokens", usage.cache_creation_input_tokens),
                             ("gen_ai.usage.reasoning.output_tokens", usage.reasoning_output_tokens)):
        assert a.get(attribute) == value
    assert "error.type" not in a
    assert span.status.status_code is StatusCode.UNSET


MODES = ["sync", "async", "stream"]


@pytest.mark.parametrize("timeout", [5.0, None])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_prompt_is_one_trace_of_agent_requests_calls_and_handlers(provider, mode, timeout, sim):
    """invoke_agent under the caller's span; under it one inference span per model request and one execute_tool
    span per call; the handler's span under its call's, on a worker thread (timeout) or not."""
    result, app = run_prompt(provider, sim, mode, timeout=timeout)
    assert not result.fallback and "170 cm" in result.answer
    agent = check_agent(provider, result, app)
    requests = inference_spans(provider)
    assert len(requests) == len(result.steps) == 2
    for span, step in zip(requests, result.steps):
        check_request(provider, span, agent, sim)
        check_response(span, step.turn)
        assert [e for e in span.events if e.name == "toolwire.retry"] == []
    (tool,) = named("execute_tool")
    assert tool.name == "execute_tool lookup_demo_value"
    assert parent_of(tool) == agent.context.span_id
    assert tool.attributes["gen_ai.tool.call.id"] == result.calls[0].call_id or result.calls[0].call_id is None
    (inner,) = named("inside lookup")
    assert parent_of(inner) == tool.context.span_id
    # the requests and the call in the order they happened, within the prompt's span
    assert requests[0].end_time <= tool.start_time and tool.end_time <= requests[1].start_time
    assert agent.start_time <= requests[0].start_time and requests[1].end_time <= agent.end_time
    for name in ("input_tokens", "output_tokens"):
        assert agent.attributes[f"gen_ai.usage.{name}"] == sum(
            getattr(s.turn.token_usage, name) for s in result.steps)
    assert "error.type" not in agent.attributes and agent.status.status_code is StatusCode.UNSET
    # nothing of the arguments without log_arguments, never the API key or the prompt
    assert "gen_ai.tool.call.arguments" not in tool.attributes
    everything = json.dumps([[dict(s.attributes), [dict(e.attributes) for e in s.events], s.status.description]
                             for s in finished()], default=str)
    assert '"key"' not in everything and "sim-key" not in everything and PROMPT not in everything


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_retries_are_events_on_the_request_span(provider, mode, sim):
    """An HTTP 503, then an error in the stream, then a good response: one inference span for the request, one
    toolwire.retry event per failed attempt (attempt, error.type, the HTTP status when there was one), matching
    the RetryScheduled events, and the response attributes of the attempt that was accepted."""
    sim.plan([Fault.status(503), Fault.in_stream_error("overloaded")])
    retries: list[RetryScheduled] = []
    result, app = run_prompt(provider, sim, mode,
                             on_event=lambda e: retries.append(e) if isinstance(e, RetryScheduled) else None)
    assert not result.fallback and result.steps[0].attempts == 3
    agent = check_agent(provider, result, app)
    first, second = inference_spans(provider)
    check_request(provider, first, agent, sim)
    check_response(first, result.steps[0].turn)
    events = [e for e in first.events if e.name == "toolwire.retry"]
    assert [(e.attributes["attempt"], e.attributes["error.type"], e.attributes.get("http.response.status_code"))
            for e in events] == [(r.attempt, r.reason, r.status) for r in retries]
    assert [r.attempt for r in retries] == [1, 2] and retries[0].status == 503 and retries[1].reason
    assert all(e.attributes["delay"] >= 0 for e in events)
    assert [e.name for e in second.events] == []


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_request_that_fails_for_good_is_an_error_span(provider, mode, sim):
    """HTTP 401 (permanent): the inference span has error.type (the provider's error type), the status code and an
    error status, no response attributes; the prompt's span says the user got the fallback; no call ran."""
    sim.plan([Fault.status(401)])
    with capture_logs() as logs:
        result, app = run_prompt(provider, sim, mode)
    assert result.fallback and result.steps == []
    agent = check_agent(provider, result, app)
    (span,) = inference_spans(provider)
    check_request(provider, span, agent, sim)
    (fallback,) = [e for e in logs if e["event"] == "loop.fallback"]
    assert span.attributes["error.type"] == fallback["error_type"] and fallback["error_type"]
    assert span.attributes["http.response.status_code"] == 401
    assert span.status.status_code is StatusCode.ERROR
    assert not any(k.startswith("gen_ai.response.") or k.startswith("gen_ai.usage.") for k in span.attributes)
    assert [e.name for e in span.events] == []
    assert agent.attributes["error.type"] == "provider_failed"
    assert agent.status.status_code is StatusCode.ERROR
    assert named("execute_tool") == []


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_request_whose_every_attempt_fails_reports_the_last_one(provider, mode, sim):
    """Every attempt ends in an error in the stream: one toolwire.retry event per attempt but the last, error.type
    the provider's error type, and the response attributes of the last attempt's turn (a finish reason it never
    got reported as error)."""
    sim.plan([], then=Fault.in_stream_error("overloaded"))
    retries: list[RetryScheduled] = []
    turns: list[toolwire.Turn] = []

    def on_event(event) -> None:
        if isinstance(event, RetryScheduled):
            retries.append(event)
        elif isinstance(event, ResponseEvent) and isinstance(event.event, toolwire.TurnFinished):
            turns.append(event.event.turn)

    result, app = run_prompt(provider, sim, mode, on_event=on_event)
    assert result.fallback
    agent = check_agent(provider, result, app)
    (span,) = inference_spans(provider)
    check_request(provider, span, agent, sim)
    assert span.attributes["error.type"] == retries[-1].reason
    assert span.status.status_code is StatusCode.ERROR
    assert len(turns) == 5 and turns[-1].error is not None
    assert list(span.attributes["gen_ai.response.finish_reasons"]) == [turns[-1].raw_finish_reason or "error"]
    assert span.attributes.get("gen_ai.response.id") == turns[-1].response_id
    assert [e.attributes["attempt"] for e in span.events if e.name == "toolwire.retry"] == [1, 2, 3, 4]
    assert {e.attributes["error.type"] for e in span.events} == {retries[-1].reason}
    assert agent.attributes["error.type"] == "provider_failed"
    assert named("execute_tool") == []


def test_without_a_current_span_the_prompt_is_the_root_of_its_trace(sim):
    """No span of the caller's: invoke_agent is a root, and the requests, the call and the handler share its
    trace."""
    with ToolLoop("anthropic", **options("anthropic", sim, 5.0)) as loop:
        loop.run(PROMPT)
    agent = only("invoke_agent")
    assert agent.parent is None
    assert {s.context.trace_id for s in finished()} == {agent.context.trace_id}
    assert len(finished()) == 5  # invoke_agent, 2 requests, execute_tool, the handler's


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_arguments_reach_the_spans_only_when_opted_in(mode, sim):
    """With configure_logging(log_arguments=True) the call's span holds its arguments; the loop's spans never
    hold the conversation's text."""
    toolwire.logs.configure_logging(log_arguments=True)
    try:
        run_prompt("openai-chat", sim, mode)
    finally:
        toolwire.logs.configure_logging()
    (tool,) = named("execute_tool")
    assert json.loads(tool.attributes["gen_ai.tool.call.arguments"]) == {"key": "height"}
    loop_spans = [s for s in finished() if not s.name.startswith(("execute_tool", "inside", "app"))]
    assert PROMPT not in json.dumps([dict(s.attributes) for s in loop_spans], default=str)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_off_switch_turns_the_loop_spans_off(mode, sim, monkeypatch):
    """configure_tracing(enabled=False) or TOOLWIRE_OTEL=0: the loop runs the same and makes no span of its own;
    the handler's span is still the child of the caller's (the caller's context reaches the handler)."""
    for switch in ("configure_tracing", "environment"):
        if switch == "configure_tracing":
            otel.configure_tracing(enabled=False)
        else:
            monkeypatch.setenv("TOOLWIRE_OTEL", "0")
            otel.configure_tracing(None)
        EXPORTER.clear()
        result, app = run_prompt("gemini", sim, mode)
        assert not result.fallback
        assert [s.name for s in finished()] == ["app", "inside lookup"]
        assert parent_of(only("inside lookup")) == app.get_span_context().span_id


SCRIPT = """
import sys
sys.modules["opentelemetry"] = None  # not installed
import toolwire
from toolwire.harness import ToolLoop
from toolwire.sim import SimProvider


def lookup_demo_value(key: str) -> dict:
    \"\"\"Look up one of the user's stored values: height or weight.\"\"\"
    return {"key": key, "value": "170 cm"}


registry = toolwire.Registry([toolwire.Tool.from_function(lookup_demo_value, effect="read")])
with SimProvider().serve() as url:
    for provider in [d.id for d in toolwire.codecs.dialects_with("sim") if d.http is not None]:
        with ToolLoop(provider, model="m", registry=registry, base_url=url, api_key="k") as loop:
            result = loop.run("How tall am I?")
        assert not result.fallback and result.steps[0].turn.token_usage is not None, (provider, result)
import toolwire.otel
print("enabled", toolwire.otel.enabled())
print("imported", [m for m in sys.modules if m.startswith("opentelemetry") and sys.modules[m] is not None])
"""


def test_the_loop_runs_without_opentelemetry_and_imports_nothing_of_it():
    """A fresh process where OpenTelemetry cannot be imported: every dialect's loop runs, tracing is off."""
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={k: v for k, v in os.environ.items() if k != "TOOLWIRE_OTEL"})
    assert out.returncode == 0, out.stderr
    assert "enabled False" in out.stdout
    assert "imported []" in out.stdout


class Stop(Exception):
    """What an application's event callback raises to stop a run."""


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_run_stopped_by_its_callback_ends_every_span_and_restores_the_context(mode, sim):
    """on_event raises as the second request starts: the request's and the prompt's spans end with error.type the
    callback's exception, and the caller's span is current again."""
    def on_event(event) -> None:
        if isinstance(event, RequestStarted) and event.step == 1:
            raise Stop()

    with pytest.raises(Stop):
        with _tracer.start_as_current_span("app") as app:
            try:
                run_prompt("openai-responses", sim, mode, on_event=on_event)
            finally:
                assert trace.get_current_span() is app
    agent = only("invoke_agent")
    first, second = inference_spans("openai-responses")
    assert "error.type" not in first.attributes
    for span in (second, agent):
        assert span.attributes["error.type"] == "Stop"
        assert span.status.status_code is StatusCode.ERROR
    assert trace.get_current_span() is trace.INVALID_SPAN


def test_a_cancelled_run_ends_its_spans_with_the_cancellation(sim):
    """AsyncToolLoop.run cancelled while the model request waits for its first byte: the request's and the prompt's
    spans end (error.type CancelledError), and the task's context is the caller's again."""
    sim.plan([Fault.slow_first_byte(3.0)])

    async def main() -> None:
        sent = asyncio.Event()
        async with AsyncToolLoop("anthropic", **options("anthropic", sim, 5.0)) as loop:
            with _tracer.start_as_current_span("app") as app:
                task = asyncio.ensure_future(loop.run(PROMPT, on_event=lambda e: sent.set()))
                await sent.wait()  # the first request is under way: the simulator holds its answer for 3 s
                await asyncio.sleep(0.1)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                assert trace.get_current_span() is app

    asyncio.run(main())
    (request,) = inference_spans("anthropic")
    for span in (request, only("invoke_agent")):
        assert span.attributes["error.type"] == "CancelledError"
        assert span.status.status_code is StatusCode.ERROR


def test_concurrent_prompts_of_two_loops_keep_their_own_traces(sim):
    """Two AsyncToolLoops running at once on one event loop: each prompt's spans are under its own caller's span."""
    async def one(provider: str):
        with _tracer.start_as_current_span(f"app {provider}") as app:
            async with AsyncToolLoop(provider, **options(provider, sim, 5.0)) as loop:
                await loop.run(PROMPT)
            return app.get_span_context().trace_id

    async def main():
        return await asyncio.gather(one("openai-chat"), one("gemini-interactions"))

    traces = dict(zip(("openai-chat", "gemini-interactions"), asyncio.run(main())))
    for provider, trace_id in traces.items():
        mine = [s for s in finished() if s.context.trace_id == trace_id]
        assert sorted(s.name.split()[0] for s in mine) == ["app", "chat", "chat", "execute_tool", "inside",
                                                           "invoke_agent"]
        assert {s.attributes.get("gen_ai.provider.name") for s in mine} - {None} == {PROVIDER_NAME[provider]}
