"""OpenTelemetry: one GenAI ``execute_tool`` span per dispatched call (toolwire.otel)."""

from __future__ import annotations

import asyncio
import json
import subprocess
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

ROOT = Path(__file__).resolve().parent.parent
EXPORTER = InMemorySpanExporter()
_tracer = trace.get_tracer("toolwire.tests")


def _global_provider() -> TracerProvider:
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        trace.set_tracer_provider(TracerProvider())
        provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    return provider


_global_provider().add_span_processor(SimpleSpanProcessor(EXPORTER))


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
    turn = toolwire.parse("openai-chat", body("openai-chat", [("a", "lookup", {"city": "Oslo"}),
                                                              ("b", "lookup", {"city": "Rome"})]))
    Dispatcher(registry(timeout=5.0), concurrent_reads=True).run(turn, conversation_id="c")
    by_id = {s.attributes["gen_ai.tool.call.id"]: s for s in tool_spans()}
    inner = [s for s in EXPORTER.get_finished_spans() if s.name == "inside lookup"]
    assert sorted(s.parent.span_id for s in inner) == sorted(s.context.span_id for s in by_id.values())


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_off_switch(mode, monkeypatch):
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
    import os
    script = SCRIPT.format(prelude=prelude, body=body("anthropic", [("toolu_1", "lookup", {"city": "Oslo"})]))
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**{k: v for k, v in os.environ.items() if k != "TOOLWIRE_OTEL"}, **env})
    assert out.returncode == 0, out.stderr
    assert f"enabled {enabled}" in out.stdout
    assert f"imported {imported}" in out.stdout


def refusing(city: str) -> dict:
    """Answers with an error the model reads."""
    raise toolwire.ToolError("no such city")


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_error_type_of_a_tool_error(mode):
    """A handler raising ToolError: the span's error.type is tool_error (one attempt, never retried)."""
    turn = toolwire.parse("gemini", body("gemini", [("call_1", "lookup", {"city": "Oslo"})]))
    [result] = run(Dispatcher(registry(refusing), read_retries=2, backoff=0), turn, mode)
    assert result.kind.value == "tool_error"
    (span,) = tool_spans()
    assert span.attributes["error.type"] == "tool_error"
    assert span.status.status_code is StatusCode.ERROR
