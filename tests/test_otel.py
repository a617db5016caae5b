"""OpenTelemetry: one GenAI ``execute_tool`` span per dispatched call (toolwire.otel)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
import sys
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

import toolwire  # noqa: E402
import toolwire.logs  # noqa: E402
from toolwire import _log, otel  # noqa: E402
from toolwire.registry import Dispatcher, Registry, Tool  # noqa: E402

from .bodies import PROVIDERS, body  # noqa: E402
from .otel_support import EXPORTER  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
_tracer = trace.get_tracer("toolwire.tests")


@pytest.fixture(autouse=True)
def spans():
    otel.configure_tracing(None)
    EXPORTER.clear()
    yield EXPORTER
    otel.configure_tracing(None)
    _log.LOG_ARGUMENTS = False
    EXPORTER.clear()


def lookup(city: str) -> dict:
    """Look up the weather of a city."""
    with _tracer.start_as_current_span("inside lookup"):
        return {"city": city, "temp": 21}


async def alookup(city: str) -> dict:
    """Look up the weather of a city, asynchronously."""
    await asyncio.sleep(0)
    with _tracer.start_as_current_span("inside lookup"):
        return {"city": city, "temp": 21}


def broken(city: str) -> dict:
    """Always fails."""
    raise RuntimeError("down")


def registry(fn=lookup, **kw) -> Registry:
    return Registry([Tool.from_function(fn, effect="read", name="lookup", **kw)])


def tool_spans():
    return [s for s in EXPORTER.get_finished_spans() if s.name.startswith("execute_tool")]


def run(dispatcher, turn, mode):
    if mode == "sync":
        return dispatcher.run(turn, conversation_id="c")
    return asyncio.run(dispatcher.arun(turn, conversation_id="c"))


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_one_span_per_call_for_every_dialect(provider, mode):
    """Every dialect, sync and async: one execute_tool span per call, its attributes and transition events."""
    turn = toolwire.parse(provider, body(provider, [("call_1", "lookup", {"city": "Oslo"}),
                                                    ("call_2", "lookup", {"city": "Rome"})]))
    results = run(Dispatcher(registry()), turn, mode)
    assert [r.kind.value for r in results] == ["ok", "ok"]
    found = tool_spans()
    assert len(found) == 2
    for span, result in zip(sorted(found, key=lambda s: s.start_time), results):
        assert span.name == "execute_tool lookup"
        assert span.kind is SpanKind.INTERNAL
        expected = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
                    "gen_ai.tool.type": "function", "gen_ai.tool.description": "Look up the weather of a city."}
        if result.call_id:
            expected["gen_ai.tool.call.id"] = result.call_id
        assert dict(span.attributes) == expected
        assert span.status.status_code is StatusCode.UNSET
        events = [(e.name, e.attributes["src"], e.attributes["dst"], e.attributes["trigger"]) for e in span.events]
        assert events == [("toolwire.transition", t.src.value, t.dst.value, t.trigger) for t in result.history]
        assert events[-2:] == [("toolwire.transition", "complete", "dispatched", "dispatch"),
                               ("toolwire.transition", "dispatched", "answered", "answer")]
        assert span.start_time <= span.end_time


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_arguments_and_result_only_when_opted_in(mode):
    """gen_ai.tool.call.arguments and .result appear only with configure_logging(log_arguments=True)."""
    turn = lambda: toolwire.parse("openai-chat", body("openai-chat", [("call_1", "lookup", {"city": "Oslo"})]))  # noqa: E731
    run(Dispatcher(registry()), turn(), mode)
    (span,) = tool_spans()
    assert "gen_ai.tool.call.arguments" not in span.attributes
    assert "gen_ai.tool.call.result" not in span.attributes
    EXPORTER.clear()
    toolwire.logs.configure_logging(log_arguments=True)
    try:
        run(Dispatcher(registry()), turn(), mode)
    finally:
        toolwire.logs.configure_logging()
    (span,) = tool_spans()
    assert json.loads(span.attributes["gen_ai.tool.call.arguments"]) == {"city": "Oslo"}
    assert json.loads(span.attributes["gen_ai.tool.call.result"]) == {"city": "Oslo", "temp": 21}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_error_type_on_failure(mode):
    """A failed handler and an unknown tool: error.type is the result kind, with an error status."""
    turn = toolwire.parse("anthropic", body("anthropic", [("toolu_1", "lookup", {"city": "Oslo"}),
                                                          ("toolu_2", "nope", {})]))
    results = run(Dispatcher(registry(broken), read_retries=0), turn, mode)
    assert [r.kind.value for r in results] == ["handler_failed", "unknown_tool"]
    by_name = {s.attributes["gen_ai.tool.name"]: s for s in tool_spans()}
    assert by_name["lookup"].attributes["error.type"] == "handler_failed"
    assert by_name["lookup"].status.status_code is StatusCode.ERROR
    unknown = by_name["nope"]
    assert unknown.name == "execute_tool nope"
    assert unknown.attributes["error.type"] == "unknown_tool"
    assert "gen_ai.tool.description" not in unknown.attributes
    assert [e.attributes["trigger"] for e in unknown.events][-2:] == ["reject", "answer"]


@pytest.mark.parametrize("fn", [lookup, alookup])
@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("timeout", [None, 5.0])
def test_handler_span_is_a_child(fn, mode, timeout):
    """The handler's own span is a child of its execute_tool span, on the caller's thread or on a worker."""
    turn = toolwire.parse("openai-chat", body("openai-chat", [("call_1", "lookup", {"city": "Oslo"})]))
    with _tracer.start_as_current_span("app") as app:
        run(Dispatcher(registry(fn, timeout=timeout)), turn, mode)
    finished = EXPORTER.get_finished_spans()
    (tool_span,) = tool_spans()
    (inner,) = [s for s in finished if s.name == "inside lookup"]
    assert inner.parent is not None and inner.parent.span_id == tool_span.context.span_id
    assert tool_span.parent is not None and tool_span.parent.span_id == app.get_span_context().span_id
    assert inner.context.trace_id == tool_span.context.trace_id


def test_concurrent_reads_each_get_their_span():
    """Reads run concurrently: each handler's span is the child of its own call's span."""
    turn = toolwire.parse("openai-chat", body("openai-chat", [("a", "lookup", {"city": "Oslo"}),
                                                              ("b", "lookup", {"city": "Rome"})]))
    Dispatcher(registry(timeout=5.0), concurrent_reads=True).run(turn, conversation_id="c")
    by_id = {s.attributes["gen_ai.tool.call.id"]: s for s in tool_spans()}
    inner = [s for s in EXPORTER.get_finished_spans() if s.name == "inside lookup"]
    assert sorted(s.parent.span_id for s in inner) == sorted(s.context.span_id for s in by_id.values())


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_off_switch(mode, monkeypatch):
    """configure_tracing(enabled=False) and TOOLWIRE_OTEL=0 turn the spans off; None defers to the environment."""
    turn = lambda: toolwire.parse("openai-chat", body("openai-chat", [("call_1", "lookup", {"city": "Oslo"})]))  # noqa: E731
    otel.configure_tracing(enabled=False)
    assert not otel.enabled()
    assert [r.kind.value for r in run(Dispatcher(registry()), turn(), mode)] == ["ok"]
    assert tool_spans() == []
    otel.configure_tracing(None)
    monkeypatch.setenv("TOOLWIRE_OTEL", "0")
    otel.configure_tracing(None)
    run(Dispatcher(registry()), turn(), mode)
    assert tool_spans() == []
    monkeypatch.delenv("TOOLWIRE_OTEL")
    otel.configure_tracing(None)
    assert otel.enabled()
    run(Dispatcher(registry()), turn(), mode)
    assert len(tool_spans()) == 1


def test_explicit_tracer_provider():
    """configure_tracing(tracer_provider=...) sends the spans there instead of the global provider."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel.configure_tracing(tracer_provider=provider)
    turn = toolwire.parse("gemini", body("gemini", [(None, "lookup", {"city": "Oslo"})]))
    Dispatcher(registry()).run(turn, conversation_id="c")
    assert [s.name for s in exporter.get_finished_spans() if s.name.startswith("execute")] == ["execute_tool lookup"]
    assert tool_spans() == []


SCRIPT = """
import sys
{prelude}
import toolwire
assert "opentelemetry" not in sys.modules or sys.modules["opentelemetry"] is None, "imported at import time"
from toolwire.registry import Dispatcher, Registry, Tool
def lookup(city: str) -> dict:
    return {{"city": city}}
turn = toolwire.parse("anthropic", {body!r})
results = Dispatcher(Registry([Tool.from_function(lookup, effect="read")])).run(turn, conversation_id="c")
assert [r.kind.value for r in results] == ["ok"], results
import toolwire.otel
print("enabled", toolwire.otel.enabled())
print("imported", sys.modules.get("opentelemetry") is not None)
"""


@pytest.mark.parametrize("prelude, env, enabled, imported", [
    ("sys.modules['opentelemetry'] = None", {}, False, False),
    ("", {"TOOLWIRE_OTEL": "0"}, False, False),
    ("", {}, True, True),
])
def test_import_and_dispatch_in_a_fresh_process(prelude, env, enabled, imported):
    """Without OpenTelemetry, or switched off, nothing of it is imported; with it, it is imported at dispatch."""
    import os
    script = SCRIPT.format(prelude=prelude, body=body("anthropic", [("toolu_1", "lookup", {"city": "Oslo"})]))
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**{k: v for k, v in os.environ.items() if k != "TOOLWIRE_OTEL"}, **env})
    assert out.returncode == 0, out.stderr
    assert f"enabled {enabled}" in out.stdout
    assert f"imported {imported}" in out.stdout


# ---- every way a call ends, sync and async ----------------------------------------------------------------------
SECRET = "Oslo-5f1c9a"  # an argument value: it must never reach a span unless the application opted in
RELEASE = threading.Event()  # lets the handler of a timed-out call end, once the test is done


def slow(city: str) -> dict:
    """Answers only after the test is over."""
    RELEASE.wait(30)
    return {"city": city}


def refusing(city: str) -> dict:
    """Answers with an error the model reads."""
    raise toolwire.ToolError("no such city")


def deny_all(call, context):
    return toolwire.Decision.deny("not today")


#: outcome → (tool the registry declares as ``lookup``, its timeout, the policy, the call's name and arguments,
#: the result kind, whether the handler ran)
OUTCOMES = {
    "ok": (lookup, None, None, "lookup", {"city": SECRET}, "ok", True),
    "invalid_arguments": (lookup, None, None, "lookup", {"town": SECRET}, "invalid_arguments", False),
    "unknown_tool": (lookup, None, None, "nope", {"city": SECRET}, "unknown_tool", False),
    "denied": (lookup, None, deny_all, "lookup", {"city": SECRET}, "denied", False),
    "handler_failed": (broken, None, None, "lookup", {"city": SECRET}, "handler_failed", True),
    "handler_timeout": (slow, 0.2, None, "lookup", {"city": SECRET}, "handler_timeout", True),
    "tool_error": (refusing, None, None, "lookup", {"city": SECRET}, "tool_error", True),
}


@pytest.fixture
def release_handlers():
    RELEASE.clear()
    yield
    RELEASE.set()  # the timed-out handler's thread ends now, whatever the test did


def _everything(span) -> str:
    return json.dumps([dict(span.attributes), [(e.name, dict(e.attributes)) for e in span.events]], default=str)


@pytest.mark.usefixtures("release_handlers")
@pytest.mark.parametrize("opted_in", [False, True])
@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("outcome", list(OUTCOMES))
def test_every_outcome_has_its_span_under_the_callers(outcome, mode, opted_in):
    """Ok, invalid arguments, unknown tool, denied, handler failure and timeout, tool error, sync and async: one
    execute_tool span (INTERNAL) under the caller's span, error.type the result kind, arguments only when opted
    in."""
    fn, timeout, policy, name, args, kind, ran = OUTCOMES[outcome]
    turn = toolwire.parse("anthropic", body("anthropic", [("toolu_1", name, args)]))
    dispatcher = Dispatcher(registry(fn, timeout=timeout), policy=policy, read_retries=0)
    if opted_in:
        toolwire.logs.configure_logging(log_arguments=True)
    try:
        with _tracer.start_as_current_span("app") as app:
            (result,) = run(dispatcher, turn, mode)
    finally:
        toolwire.logs.configure_logging()
    assert result.kind.value == kind
    (span,) = tool_spans()
    assert span.name == f"execute_tool {name}"
    assert span.kind is SpanKind.INTERNAL
    assert span.parent is not None and span.parent.span_id == app.get_span_context().span_id
    assert span.context.trace_id == app.get_span_context().trace_id
    assert span.attributes["gen_ai.operation.name"] == "execute_tool"
    assert span.attributes["gen_ai.tool.name"] == name
    assert span.attributes["gen_ai.tool.call.id"] == "toolu_1"
    if kind == "ok":
        assert "error.type" not in span.attributes
        assert span.status.status_code is StatusCode.UNSET
    else:
        assert span.attributes["error.type"] == kind
        assert span.status.status_code is StatusCode.ERROR
    triggers = [e.attributes["trigger"] for e in span.events]
    assert triggers[-2:] == (["dispatch", "answer"] if ran else ["reject", "answer"])
    if opted_in:
        assert json.loads(span.attributes["gen_ai.tool.call.arguments"]) == args
        assert "gen_ai.tool.call.result" in span.attributes
    else:
        assert SECRET not in _everything(span)
        assert "gen_ai.tool.call.arguments" not in span.attributes
        assert "gen_ai.tool.call.result" not in span.attributes


def test_a_dispatch_cancelled_under_way_ends_its_spans_with_the_cancellation():
    """arun cancelled while an async handler runs: the dispatch raises CancelledError and every call's span still
    ends, error.type the exception's class, with an error status."""
    started = asyncio.Event()

    async def hang(city: str) -> dict:
        """Never answers."""
        started.set()
        await asyncio.sleep(30)
        return {"city": city}

    turn = toolwire.parse("openai-chat", body("openai-chat", [("call_1", "lookup", {"city": "Oslo"}),
                                                              ("call_2", "lookup", {"city": "Rome"})]))

    async def main() -> None:
        task = asyncio.ensure_future(Dispatcher(registry(hang)).arun(turn, conversation_id="c"))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    found = tool_spans()
    assert len(found) == 2
    for span in found:
        assert span.attributes["error.type"] == "CancelledError"
        assert span.status.status_code is StatusCode.ERROR
