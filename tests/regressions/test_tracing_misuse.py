"""Tracing that must never break what it traces (docs/failure-modes.md 46): a span processor of the application's
that raises when a span starts or ends, a tracer provider that fails, and configure_tracing given what it cannot
use. Before, a processor raising in ``on_end`` made ``Dispatcher.run`` raise after a write had taken effect (the
caller lost the result), one raising in ``on_start`` made it raise before anything ran, a provider without
``get_tracer`` failed the first dispatch with an AttributeError, and ``configure_tracing(enabled="no")`` turned
tracing on."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import SpanProcessor, TracerProvider  # noqa: E402
from structlog.testing import capture_logs  # noqa: E402

import toolwire  # noqa: E402
from toolwire import otel  # noqa: E402
from toolwire.harness import AsyncToolLoop, RetryPolicy, ToolLoop  # noqa: E402
from toolwire.sim import SimProvider  # noqa: E402

from ..bodies import body  # noqa: E402


class Raising(SpanProcessor):
    """A span processor with a bug: it raises where ``where`` says."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.ended = 0

    def on_start(self, span, parent_context=None):
        if self.where == "start":
            raise RuntimeError("processor bug on start")

    def on_end(self, span):
        self.ended += 1
        if self.where == "end":
            raise RuntimeError("processor bug on end")


class FailingProvider:
    def get_tracer(self, *args, **kwargs):
        raise RuntimeError("no tracer today")


@pytest.fixture(autouse=True)
def reset_tracing():
    yield
    otel.configure_tracing(None)


def _provider(where: str) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(Raising(where))
    return provider


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("where", ["start", "end"])
def test_a_span_processor_that_raises_never_breaks_a_dispatch(where, mode):
    """The write runs once and its result comes back; the processor's failure is logged as otel.failed."""
    effects: list[str] = []

    def save(city: str) -> dict:
        """Save a city."""
        effects.append(city)
        return {"saved": city}

    otel.configure_tracing(tracer_provider=_provider(where))
    turn = toolwire.parse("openai-chat", body("openai-chat", [("call_1", "save", {"city": "Oslo"})]))
    dispatcher = toolwire.Dispatcher(toolwire.Registry([toolwire.Tool.from_function(save, effect="write")]))
    with capture_logs() as logs:
        if mode == "sync":
            results = dispatcher.run(turn, conversation_id="c")
        else:
            results = asyncio.run(dispatcher.arun(turn, conversation_id="c"))
    assert [r.kind.value for r in results] == ["ok"] and effects == ["Oslo"]
    failures = [e for e in logs if e["event"] == "otel.failed"]
    assert failures and {e["stage"] for e in failures} == {where}
    assert all("processor bug" in e["error"] for e in failures)


def lookup_demo_value(key: str) -> dict:
    """Look up one of the user's stored values: height or weight."""
    return {"key": key, "value": "170 cm"}


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("where", ["start", "end"])
def test_a_span_processor_that_raises_never_breaks_a_conversation(where, mode):
    """The loop's prompt, request and call spans all fail in the processor: the model's answer still arrives."""
    otel.configure_tracing(tracer_provider=_provider(where))
    registry = toolwire.Registry([toolwire.Tool.from_function(lookup_demo_value, effect="read")])
    options = dict(model="m", registry=registry, api_key="k", retry=RetryPolicy(initial=0.01, max_backoff=0.02))
    with SimProvider().serve() as url, capture_logs() as logs:
        if mode == "sync":
            with ToolLoop("anthropic", base_url=url, **options) as loop:
                result = loop.run("How tall am I?")
        else:
            async def main():
                async with AsyncToolLoop("anthropic", base_url=url, **options) as loop:
                    return await loop.run("How tall am I?")
            result = asyncio.run(main())
    assert not result.fallback and "170 cm" in result.answer
    stages = {e["stage"] for e in logs if e["event"] == "otel.failed"}
    assert stages == {where}


def test_a_tracer_provider_that_fails_leaves_tracing_off():
    """get_tracer raising: logged once, no spans, the dispatch answers."""
    otel.configure_tracing(tracer_provider=FailingProvider())
    turn = toolwire.parse("anthropic", body("anthropic", [("toolu_1", "lookup_demo_value", {"key": "height"})]))
    registry = toolwire.Registry([toolwire.Tool.from_function(lookup_demo_value, effect="read")])
    with capture_logs() as logs:
        assert not otel.enabled()
        results = toolwire.Dispatcher(registry).run(turn, conversation_id="c")
    assert [r.kind.value for r in results] == ["ok"]
    assert [(e["event"], e["stage"]) for e in logs if e["event"] == "otel.failed"] == [("otel.failed", "get_tracer")]


@pytest.mark.parametrize("kwargs", [
    {"enabled": "no"}, {"enabled": 0}, {"enabled": "false"},
    {"tracer_provider": object()}, {"tracer_provider": "console"},
])
def test_configure_tracing_refuses_what_it_cannot_use(kwargs):
    """A string or number for enabled, a tracer provider without get_tracer: UsageError, nothing changed."""
    otel.configure_tracing(enabled=False)
    with pytest.raises(toolwire.UsageError):
        otel.configure_tracing(**kwargs)
    assert not otel.enabled()
