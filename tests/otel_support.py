"""The tests' OpenTelemetry SDK: one global ``TracerProvider`` recording into ``EXPORTER`` (an in-memory exporter)
for the test modules that check spans. Imported only by them: ``pytest.importorskip`` first."""

from __future__ import annotations

from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

__all__ = ["EXPORTER", "finished", "named", "parent_of", "only"]


def _global_provider() -> TracerProvider:
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        trace.set_tracer_provider(TracerProvider())
        provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    return provider


EXPORTER = InMemorySpanExporter()
_global_provider().add_span_processor(SimpleSpanProcessor(EXPORTER))


def finished() -> list[ReadableSpan]:
    """The spans ended since the exporter was last cleared, by start time."""
    return sorted(EXPORTER.get_finished_spans(), key=lambda s: s.start_time or 0)


def named(prefix: str) -> list[ReadableSpan]:
    return [s for s in finished() if s.name == prefix or s.name.startswith(prefix + " ")]


def only(prefix: str) -> ReadableSpan:
    found = named(prefix)
    assert len(found) == 1, [s.name for s in finished()]
    return found[0]


def parent_of(span: ReadableSpan) -> Any:
    """The span id of ``span``'s parent, or None for a root."""
    return None if span.parent is None else span.parent.span_id
