"""Tracing attacked the way a hostile user (or model) would (docs/failure-modes.md 49): the switch flipped while
another thread resolves the tracer, an API key inside opted-in arguments and results, a tool name of a megabyte,
token counts at the top of the 64-bit range, credentials in the base URL. Before, ``configure_tracing(enabled=False)``
was lost when a dispatch on another thread was resolving the tracer at that moment (tracing stayed on); the
opted-in ``gen_ai.tool.call.arguments`` and ``result`` carried an API key the logs redact; an unknown tool's
name became the span's name whole (a megabyte); the ``invoke_agent`` span summed
counts past the 64-bit integers OpenTelemetry attributes are; and the password of ``https://user:pass@host``
reached the ``http.error`` log line."""

from __future__ import annotations

import asyncio
import json
import threading
from contextlib import aclosing

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from structlog.testing import capture_logs  # noqa: E402

import toolwire  # noqa: E402
import toolwire.logs  # noqa: E402
from toolwire import otel  # noqa: E402
from toolwire.harness import AsyncToolLoop, RetryPolicy, ToolLoop  # noqa: E402
from toolwire.sim import Fault, SimProvider  # noqa: E402

from ..bodies import body  # noqa: E402
from ..dialects import SIMULATED as PROVIDERS  # noqa: E402 - the loop runs against the simulated provider
from ..dialects import adapter  # noqa: E402
from ..otel_support import EXPORTER, finished  # noqa: E402

KEY = "sk-hostile-0123456789abcdefABCDEF"
FAST = RetryPolicy(attempts=3, deadline=20.0, initial=0.01, max_backoff=0.05, max_hint=2.0)
MAX = (1 << 63) - 1
MODES = ["sync", "async", "stream"]


@pytest.fixture(autouse=True)
def spans():
    otel.configure_tracing(None)
    EXPORTER.clear()
    yield EXPORTER
    otel.configure_tracing(None)
    EXPORTER.clear()


@pytest.fixture
def opted_in():
    toolwire.logs.configure_logging("json", "warning", log_arguments=True)
    yield
    toolwire.logs.configure_logging()


def lookup_demo_value(key: str) -> dict:
    """Look up one of the user's stored values: height or weight."""
    return {"key": key, "value": f"170 cm (looked up with {KEY})"}


def registry() -> toolwire.Registry:
    return toolwire.Registry([toolwire.Tool.from_function(lookup_demo_value, effect="read")])


def run(provider: str, base_url: str, mode: str, **options):
    """The prompt "How tall am I?" through ToolLoop.run, AsyncToolLoop.run or AsyncToolLoop.stream."""
    options = {"model": "m", "registry": registry(), "base_url": base_url, "api_key": KEY, "retry": FAST,
               "timeout": 5.0, **options}
    if mode == "sync":
        with ToolLoop(provider, **options) as loop:
            return loop.run("How tall am I?")

    async def main():
        async with AsyncToolLoop(provider, **options) as loop:
            if mode == "async":
                return await loop.run("How tall am I?")
            async with aclosing(loop.stream("How tall am I?")) as events:
                async for event in events:
                    pass
            return event.result

    return asyncio.run(main())


def span_strings() -> list[tuple[str, str]]:
    """(where, text) for every string of every finished span: names, attributes, events, status descriptions."""
    out: list[tuple[str, str]] = []
    for s in finished():
        out.append((s.name, s.name))
        if s.status.description:
            out.append((f"{s.name} status", s.status.description))
        items = [(f"{s.name} {k}", v) for k, v in (s.attributes or {}).items()]
        for e in s.events:
            out.append((f"{s.name} event", e.name))
            items += [(f"{s.name} {e.name} {k}", v) for k, v in (e.attributes or {}).items()]
        for where, value in items:
            for v in value if isinstance(value, (list, tuple)) else [value]:
                if isinstance(v, str):
                    out.append((where, v))
    return out


# ==== the switch ===================================================================================================
def test_switching_tracing_off_while_another_thread_resolves_the_tracer_keeps_it_off():
    """configure_tracing(enabled=False) called while a dispatch on another thread is getting its tracer from the
    provider: the dispatch finishes, and tracing is off afterwards (the late tracer is not installed)."""
    asked, release = threading.Event(), threading.Event()

    class Slow(TracerProvider):
        def get_tracer(self, *args, **kwargs):
            asked.set()
            release.wait(10)
            return super().get_tracer(*args, **kwargs)

    turn = toolwire.parse("anthropic", body("anthropic", [("toolu_1", "lookup_demo_value", {"key": "height"})]))
    results: list = []
    otel.configure_tracing(tracer_provider=Slow())
    worker = threading.Thread(target=lambda: results.extend(
        toolwire.Dispatcher(registry()).run(turn, conversation_id="c")))
    worker.start()
    assert asked.wait(10)
    otel.configure_tracing(enabled=False)
    release.set()
    worker.join(10)
    assert [r.kind.value for r in results] == ["ok"]
    assert not otel.enabled()
    EXPORTER.clear()
    toolwire.Dispatcher(registry()).run(turn, conversation_id="c2")
    assert finished() == []


def test_configure_tracing_refuses_a_tracer_provider_class():
    """The class TracerProvider (not an instance) has a get_tracer attribute too: refused, not taken."""
    with pytest.raises(toolwire.UsageError):
        otel.configure_tracing(tracer_provider=TracerProvider)


# ==== secrets =======================================================================================================
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_opted_in_arguments_and_results_on_spans_never_hold_the_api_key(provider, mode, opted_in):
    """With log_arguments=True, the arguments the model sent and the result the handler gave reach the span, with
    the API key redacted as the logs redact it; without the opt-in they are not there at all."""
    sim = SimProvider(seed=5)
    with sim.serve() as url:
        sim.plan([Fault.arguments({"key": f"height {KEY}"})])
        result = run(provider, url, mode)
    assert not result.fallback
    calls = [s for s in finished() if s.name == "execute_tool lookup_demo_value"]
    assert calls and all("gen_ai.tool.call.arguments" in s.attributes for s in calls)
    assert any("[redacted]" in s.attributes["gen_ai.tool.call.result"] for s in calls)
    assert [where for where, text in span_strings() if KEY in text or KEY[:12] in text] == []


@pytest.mark.parametrize("provider", PROVIDERS)
def test_credentials_in_the_base_url_reach_no_log_line_and_no_span(provider):
    """``http://user:password@host`` as the base URL: the password is in no log event and no span. The dialects
    whose key is the Authorization header refuse such a URL (Basic credentials would replace the key)."""
    if provider in ("openai-chat", "openai-responses", "bedrock-converse"):
        with pytest.raises(toolwire.UsageError, match="user info") as err:
            run(provider, "http://someone:pa55-w0rd-secret@127.0.0.1:9", "sync")
        assert "pa55-w0rd-secret" not in str(err.value)
        return
    toolwire.logs.configure_logging("json", "debug")
    sim = SimProvider(seed=5)
    try:
        with sim.serve() as url, capture_logs() as logs:
            sim.plan([Fault.status(503), Fault.status(400)])
            run(provider, url.replace("http://", "http://someone:pa55-w0rd-secret@"), "sync")
    finally:
        toolwire.logs.configure_logging()
    assert [e for e in logs if e["event"] == "http.error"]
    assert [e["event"] for e in logs if "pa55-w0rd-secret" in json.dumps(e, default=str)] == []
    assert [where for where, text in span_strings() if "pa55-w0rd-secret" in text] == []


# ==== sizes =========================================================================================================
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_unknown_tool_name_of_a_megabyte_is_cut_on_its_span(mode):
    """A model calls a tool named with a megabyte of text (and a call id of 100 kB): the execute_tool span's name,
    tool name and call id are cut; a declared tool's span keeps its name."""
    turn = toolwire.parse("openai-chat", body("openai-chat", [
        ("c" * 100_000, "x" * 1_000_000, {"key": "height"}), ("call_2", "lookup_demo_value", {"key": "height"})]))
    dispatcher = toolwire.Dispatcher(registry())
    results = (dispatcher.run(turn, conversation_id="c") if mode == "sync"
               else asyncio.run(dispatcher.arun(turn, conversation_id="c")))
    assert [r.kind.value for r in results] == ["unknown_tool", "ok"]
    unknown, known = finished()
    assert unknown.name == "execute_tool " + "x" * 128
    assert unknown.attributes["gen_ai.tool.name"] == "x" * 128
    assert unknown.attributes["error.type"] == "unknown_tool"
    assert unknown.attributes["gen_ai.tool.call.id"] == "c" * 256
    assert known.name == "execute_tool lookup_demo_value"
    assert known.attributes["gen_ai.tool.name"] == "lookup_demo_value"


def _with_usage(provider: str, data: bytes) -> bytes:
    """A whole response body of ``provider`` with its usage object at the top of the 64-bit range."""
    return adapter(provider).with_usage(data, MAX)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_prompt_token_sums_stay_64_bit_counts(provider, mode):
    """Two responses each reporting 2**63 - 1 tokens: every span's count is a 64-bit integer (the sum is capped
    there, as each response's counts are)."""
    sim = SimProvider(seed=5)
    with sim.serve() as url:
        sim.plan([Fault.raw(_with_usage(provider, body(provider, [("call_1", "lookup_demo_value",
                                                                   {"key": "height"})], response_id="r1"))),
                  Fault.raw(_with_usage(provider, body(provider, [], text="170 cm.", response_id="r2")))])
        result = run(provider, url, mode, stream=False)
    assert not result.fallback and result.answer == "170 cm."
    counts = {(s.name, k): v for s in finished() for k, v in (s.attributes or {}).items()
              if k.startswith("gen_ai.usage.")}
    assert counts[("invoke_agent", "gen_ai.usage.input_tokens")] == MAX
    assert all(0 <= v <= MAX for v in counts.values()), counts
