"""OpenTelemetry spans of the harness loop, following the GenAI semantic conventions (see ``toolwire.otel`` for
the switch: the same one turns these on and off).

For each prompt ``ToolLoop.run`` / ``AsyncToolLoop.run`` (and ``stream``) runs, one ``invoke_agent`` span (kind
INTERNAL, a child of the caller's current span), current while the prompt runs, so that everything below is in
its trace:

* one inference span per model request, ``{gen_ai.operation.name} {gen_ai.request.model}`` (``chat …``, or
  ``generate_content …`` for Gemini; kind CLIENT), covering all the attempts the retry policy made and the waits
  between them (the conventions: a request retried automatically is one logical operation). Each failed attempt
  that is retried adds a ``toolwire.retry`` event (``attempt``, ``delay`` in seconds, ``error.type``, and
  ``http.response.status_code`` when the provider answered with an HTTP error). The span is current while the
  attempts run, so an instrumented HTTP client's spans are its children;
* one ``execute_tool {tool name}`` span per call the loop dispatches (``toolwire.otel``), whose handler's own
  spans are its children, on the handler's thread or task too.

Without OpenTelemetry (or with tracing switched off) every function here returns at once and nothing is
imported. None of them raises: a span never breaks a conversation.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from .. import otel
from ..codecs.base import add
from ..codecs.telemetry import operation_name, provider_name, request_attributes, span_attributes
from ..types import Turn
from .errors import CallbackError, ProviderError

__all__ = ["start_agent", "end_agent", "start_request", "end_request", "retried", "enter", "leave"]


def _server(transport: Any) -> tuple[str | None, int | None]:
    """``server.address`` and ``server.port`` of the transport's URL (the scheme's port when it names none)."""
    url = getattr(transport, "url", None)
    if not isinstance(url, str):
        return None, None
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None, None
    if port is None:
        port = {"https": 443, "http": 80}.get(parts.scheme)
    return parts.hostname, port


def _error_type(exc: BaseException) -> str:
    """``error.type`` of an exception: a provider's failure by its type (``overloaded_error``, ``timeout``,
    ``stream_cut`` …), anything else by its class name."""
    if isinstance(exc, CallbackError):
        exc = exc.error
    if isinstance(exc, ProviderError) and isinstance(exc.type, str) and exc.type:
        return otel.provided(exc.type, 128)  # the provider's error type: its own text, of any length
    return type(exc).__qualname__


def _fail(span: Any, error_type: str, description: str | None = None) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute("error.type", error_type)
    span.set_status(Status(StatusCode.ERROR, description))


def enter(span: Any) -> Any:
    """Make ``span`` current (a token for ``leave``); None when there is no span."""
    if span is None:
        return None
    from opentelemetry import context, trace

    return context.attach(trace.set_span_in_context(span))


def leave(token: Any) -> None:
    if token is not None:
        from opentelemetry import context

        context.detach(token)


# ---- the prompt ----------------------------------------------------------------------------------------------
def start_agent(core: Any, transport: Any) -> Any:
    """The ``invoke_agent`` span of one prompt of ``core`` (a ``_Core``), started now; None when tracing is off."""
    tracer = otel.tracer()
    if tracer is None:
        return None
    try:
        from opentelemetry.trace import SpanKind

        host, _ = _server(transport)
        attributes = {"gen_ai.operation.name": "invoke_agent",
                      "gen_ai.provider.name": provider_name(core.provider, host),
                      "gen_ai.request.model": core.model, "gen_ai.conversation.id": core.conversation_id}
        return tracer.start_span("invoke_agent", kind=SpanKind.INTERNAL, attributes=attributes)
    except Exception as exc:  # noqa: BLE001 - a span never breaks a conversation
        otel.failed("start", exc)
        return None


def end_agent(span: Any, result: Any = None, exc: BaseException | None = None) -> None:
    """End the prompt's span: the tokens of every model response that reported them, summed; ``error.type`` the
    exception's, or the fallback's reason (``provider_failed``, ``content_filtered``, ``corrections_exhausted``,
    ``step_limit``) when the user got the fallback message instead of the model's answer."""
    if span is None:
        return
    try:
        if span.is_recording():
            if result is not None:
                steps = getattr(result, "steps", [])
                for name in ("input_tokens", "output_tokens"):
                    counts = [getattr(s.turn.token_usage, name) for s in steps if s.turn.token_usage is not None]
                    total = add(*counts)  # capped at the largest 64-bit count, as each response's counts are
                    if total is not None:
                        span.set_attribute(f"gen_ai.usage.{name}", total)
                if result.fallback and result.reason is not None:
                    _fail(span, result.reason.value, "the user got the fallback message")
            if exc is not None:
                _fail(span, _error_type(exc))
    except Exception as exc:  # noqa: BLE001
        otel.failed("finish", exc)
    otel.end(span)


# ---- one model request ---------------------------------------------------------------------------------------
def start_request(core: Any, transport: Any, body: dict[str, Any]) -> Any:
    """The inference span of one model request (all its attempts), started now; None when tracing is off."""
    tracer = otel.tracer()
    if tracer is None:
        return None
    try:
        from opentelemetry.trace import SpanKind

        dialect = core.provider
        host, port = _server(transport)
        operation = operation_name(dialect)
        attributes: dict[str, Any] = {"gen_ai.operation.name": operation,
                                      "gen_ai.provider.name": provider_name(dialect, host),
                                      "gen_ai.request.model": core.model,
                                      "gen_ai.conversation.id": core.conversation_id}
        if host:
            attributes["server.address"] = host
            if port is not None:
                attributes["server.port"] = port
        attributes.update(request_attributes(dialect, body))
        if core.stream:
            attributes["gen_ai.request.stream"] = True
        attributes.update(span_attributes(dialect))
        return tracer.start_span(f"{operation} {core.model}", kind=SpanKind.CLIENT, attributes=attributes)
    except Exception as exc:  # noqa: BLE001
        otel.failed("start", exc)
        return None


def retried(span: Any, attempt: int, delay: float, exc: BaseException) -> None:
    """Attempt ``attempt`` of the request failed with ``exc``; the next starts after ``delay`` seconds."""
    if span is None:
        return
    try:
        attributes: dict[str, Any] = {"attempt": attempt, "delay": round(float(delay), 3),
                                      "error.type": _error_type(exc)}
        status = getattr(exc, "status", None)
        if isinstance(status, int):
            attributes["http.response.status_code"] = status
        span.add_event("toolwire.retry", attributes)
    except Exception as exc:  # noqa: BLE001
        otel.failed("event", exc)


def _response(span: Any, turn: Turn) -> None:
    """The response attributes of ``turn``: id, model, the finish reason of each choice (``error`` for one that
    ended without any), and the tokens the provider reported."""
    if turn.response_id:
        span.set_attribute("gen_ai.response.id", otel.provided(turn.response_id))
    if turn.model:
        span.set_attribute("gen_ai.response.model", otel.provided(turn.model))
    # the provider's own words, cut and redacted like every string it chose (a few choices are kept, not thousands)
    reasons = ([otel.provided(c.raw_finish_reason or "error", 64) for c in turn.choices[:128]] if turn.choices
               else [otel.provided(turn.raw_finish_reason or "error", 64)])
    span.set_attribute("gen_ai.response.finish_reasons", reasons)
    usage = turn.token_usage
    if usage is not None:
        for attribute, value in (("gen_ai.usage.input_tokens", usage.input_tokens),
                                 ("gen_ai.usage.output_tokens", usage.output_tokens),
                                 ("gen_ai.usage.cache_read.input_tokens", usage.cache_read_input_tokens),
                                 ("gen_ai.usage.cache_creation.input_tokens", usage.cache_creation_input_tokens),
                                 ("gen_ai.usage.reasoning.output_tokens", usage.reasoning_output_tokens)):
            if value is not None:
                span.set_attribute(attribute, value)


def end_request(span: Any, turn: Turn | None, exc: BaseException | None = None) -> None:
    """End a request's span: the response attributes of the last attempt's turn (when one arrived), and on
    failure ``error.type`` (the ``ProviderError``'s type, or the exception's class) with an error status."""
    if span is None:
        return
    try:
        if span.is_recording():
            if turn is not None:
                _response(span, turn)
            if exc is not None:
                status = getattr(exc, "status", None)
                if isinstance(exc, ProviderError) and isinstance(status, int):
                    span.set_attribute("http.response.status_code", status)
                _fail(span, _error_type(exc), otel.provided(str(exc), 512) if isinstance(exc, ProviderError) else None)
    except Exception as exc:  # noqa: BLE001
        otel.failed("finish", exc)
    otel.end(span)
