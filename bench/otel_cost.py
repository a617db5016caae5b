"""Dispatch cost with OpenTelemetry tracing off, on with a no-op provider, and on with the SDK's in-memory exporter.

The same turn and tool as ``dispatch.py`` (100 calls to a trivial read tool, default ``Dispatcher``), measured
three ways, interleaved within each repeat so that the machine's noise hits them alike:

* ``off``: ``toolwire.otel.configure_tracing(enabled=False)``: no span at all;
* ``noop``: tracing on, the API's default tracer provider (no SDK configured: every span is a non-recording one),
  what an application that installed ``opentelemetry-api`` but configured nothing pays;
* ``sdk``: tracing on, an SDK ``TracerProvider`` with a ``SimpleSpanProcessor`` into an ``InMemorySpanExporter``
  (each span is built, its attributes and transition events recorded, and exported on the same thread; the
  exporter is cleared after each run, outside timing).

Reports µs per call (median) for each, and the ratios to ``off``. Skipped when ``opentelemetry-sdk`` is missing.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import toolwire

from . import dispatch

__all__ = ["available", "measure", "line"]


def available() -> bool:
    try:
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        return False
    from toolwire import otel
    return dispatch.available() and hasattr(otel, "configure_tracing")


def measure(repeats: int) -> dict[str, Any]:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from toolwire import otel

    exporter = InMemorySpanExporter()
    sdk = TracerProvider()
    sdk.add_span_processor(SimpleSpanProcessor(exporter))
    default = trace.get_tracer_provider()
    if isinstance(default, TracerProvider):  # someone configured the SDK globally: use the API's own no-op
        default = trace.NoOpTracerProvider()
    registry = dispatch._registry_cls()([toolwire.Tool.from_function(dispatch.lookup, effect="read")])
    turn = dispatch._turn()
    variants = {"off": (False, None), "noop": (True, default), "sdk": (True, sdk)}
    samples: dict[str, list[float]] = {k: [] for k in variants}
    spans: dict[str, int] = {}
    try:
        for r in range(repeats + 1):
            order = list(variants)
            order = order[r % 3:] + order[:r % 3]
            for name in order:
                enabled, provider = variants[name]
                otel.configure_tracing(enabled, tracer_provider=provider)
                d = toolwire.Dispatcher(registry)
                t0 = time.perf_counter()
                results = d.run(turn, conversation_id="c")
                elapsed = time.perf_counter() - t0
                if r == 0:  # warm-up; check the answers and the spans once, outside timing
                    if len(results) != dispatch.N_CALLS or any(x.is_error for x in results):
                        raise AssertionError(f"{name}: the dispatcher's answers are wrong")
                    spans[name] = len(exporter.get_finished_spans())
                    if name != "sdk" and spans[name]:
                        raise AssertionError(f"{name}: spans reached the SDK exporter")
                    if name == "sdk" and spans[name] != dispatch.N_CALLS:
                        raise AssertionError(f"sdk: {spans[name]} spans for {dispatch.N_CALLS} calls")
                else:
                    samples[name].append(elapsed / dispatch.N_CALLS * 1e6)
                exporter.clear()
    finally:
        otel.configure_tracing(None)
    out: dict[str, Any] = {"spans_exported": spans}
    for name, s in samples.items():
        out[name] = {"us_per_call_median": round(statistics.median(s), 2), "samples_us": [round(x, 2) for x in s]}
    off = out["off"]["us_per_call_median"]
    for name in ("noop", "sdk"):
        out[name]["ratio_to_off"] = round(out[name]["us_per_call_median"] / off, 2) if off else None
    return out


def line(m: dict[str, Any]) -> str:
    off, noop, sdk = m["off"], m["noop"], m["sdk"]
    return (f"otel: dispatch {off['us_per_call_median']:.1f} us per call with tracing off, "
            f"{noop['us_per_call_median']:.1f} us ({noop['ratio_to_off']:.2f}x) on with a no-op provider, "
            f"{sdk['us_per_call_median']:.1f} us ({sdk['ratio_to_off']:.2f}x) on with the SDK's in-memory exporter "
            f"({dispatch.N_CALLS} trivial read calls per turn, one execute_tool span each)")
