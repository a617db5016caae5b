"""OpenTelemetry spans for dispatched tool calls, following the GenAI semantic conventions.

When the OpenTelemetry API (``opentelemetry-api``, the ``toolwire[otel]`` extra) is importable, every call a
``Dispatcher`` answers (``run`` or ``arun``) gets one ``execute_tool {tool name}`` span (kind INTERNAL) from
``opentelemetry.trace.get_tracer("toolwire")``: nothing for the application to call; the spans go wherever the
application's tracer provider sends them (none configured: OpenTelemetry's no-op, nearly free).

Attributes: ``gen_ai.operation.name`` (``execute_tool``), ``gen_ai.tool.name``, ``gen_ai.tool.call.id`` (when
the provider sent one), ``gen_ai.tool.type`` (``function``), ``gen_ai.tool.description`` (a declared tool), and
``error.type`` (the ``ToolResult`` kind) with an error status when the result is not ``ok``. The arguments
(``gen_ai.tool.call.arguments``, the text the model sent) and the result (``gen_ai.tool.call.result``) are recorded
only when the application opted in to argument values with ``toolwire.logs.configure_logging(log_arguments=True)``.
The call's path through the state machine is recorded as ``toolwire.transition`` events (``src``, ``dst``,
``trigger``, and ``position`` when a provider payload caused it), one per transition. The handler runs with the
span current, so the spans it starts are its children.

The harness loop adds an ``invoke_agent`` span per prompt and an inference span per model request
(``toolwire.harness.tracing``); the same switch governs them.

Off switch: the environment variable ``TOOLWIRE_OTEL=0`` (read at the first span), or
``toolwire.otel.configure_tracing(enabled=False)`` at any time. Nothing of OpenTelemetry is imported at
``import toolwire``; it is imported at the first dispatch or prompt, and when it is not installed nothing happens.
"""

from __future__ import annotations

import inspect
import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import msgspec

from . import _log
from .errors import UsageError

__all__ = ["configure_tracing", "enabled"]

_UNRESOLVED: Any = object()
#: the tracer in use; None when tracing is off or OpenTelemetry is not installed; _UNRESOLVED until first needed
_tracer: Any = _UNRESOLVED
_forced: bool | None = None  # configure_tracing's choice, else the environment decides


def configure_tracing(enabled: bool | None = True, *, tracer_provider: Any = None) -> None:
    """Turn the spans on (``True``, the default when OpenTelemetry is installed) or off (``False``); ``None`` goes
    back to the environment (``TOOLWIRE_OTEL=0`` turns them off). ``tracer_provider``: take the tracer from this
    provider (anything with OpenTelemetry's ``get_tracer``) instead of the global one. Anything else is a
    ``UsageError``. Safe to call while other threads dispatch: a tracer they were resolving under the previous
    settings is not kept."""
    global _tracer, _forced, _provider, _generation
    if enabled is not None and not isinstance(enabled, bool):
        raise UsageError(f"configure_tracing: enabled must be True, False or None, got {enabled!r}")
    if tracer_provider is not None and (isinstance(tracer_provider, type)
                                        or not callable(getattr(tracer_provider, "get_tracer", None))):
        raise UsageError("configure_tracing: tracer_provider must be an OpenTelemetry TracerProvider instance (with "
                         f"get_tracer), got {_kind(tracer_provider)}")
    with _lock:
        _forced = enabled
        _provider = tracer_provider
        _tracer = _UNRESOLVED
        _generation += 1


def _kind(value: Any) -> str:
    return f"the class {value.__name__}" if isinstance(value, type) else type(value).__name__


_provider: Any = None
#: guards the settings above; ``_generation`` counts ``configure_tracing`` calls, so a tracer resolved under
#: settings that changed meanwhile (on another thread) is used for the spans it was asked for, never kept
_lock = threading.Lock()
_generation = 0


def failed(stage: str, exc: BaseException) -> None:
    """The application's tracer provider or span processor raised at ``stage``: the span is dropped (or left
    as it is) and the dispatch or the conversation goes on; logged as ``otel.failed``."""
    _log.emit(_log.WARNING, "otel.failed", stage=stage, error=f"{type(exc).__name__}: {str(exc)[:200]}")


def _resolve() -> Any:
    global _tracer
    with _lock:
        generation, forced, chosen = _generation, _forced, _provider
    on = forced if forced is not None else os.environ.get("TOOLWIRE_OTEL", "1").strip().lower() not in (
        "0", "false", "no", "off")
    tracer = None
    if on:
        try:
            from opentelemetry import trace
        except ImportError:
            tracer = None
        else:
            from . import __version__
            try:
                provider = chosen if chosen is not None else trace.get_tracer_provider()
                tracer = provider.get_tracer("toolwire", __version__)
            except Exception as exc:  # noqa: BLE001 - a tracer provider never breaks a dispatch
                failed("get_tracer", exc)
                tracer = None
    with _lock:
        if generation == _generation:  # configure_tracing was not called meanwhile: keep it
            _tracer = tracer
    return tracer


def enabled() -> bool:
    """Whether dispatched calls and the loop's requests get spans (OpenTelemetry importable and tracing not
    switched off)."""
    return tracer() is not None


def tracer() -> Any:
    """The tracer in use, or None when tracing is off or OpenTelemetry is not installed."""
    current = _tracer  # read once: another thread may reset it in between
    return _resolve() if current is _UNRESOLVED else current


#: the longest text of a provider's kept on a span (a call id, an undeclared tool's name, a response id)
MAX_TEXT = 256


def provided(text: str, limit: int = MAX_TEXT) -> str:
    """A string the provider or the model chose, as a span may carry it: at most ``limit`` characters, with every
    secret the logs redact redacted."""
    return _log.scrub(text[:limit])


def start(plans: Iterable[Any]) -> None:
    """Start one span per plan (``plan.span``), backdated to when the dispatcher took the call up.

    The span is ``execute_tool {name}``. A call naming no declared tool carries the model's text as its name, of
    any length: it is cut to 128 characters (and redacted like the logs) in the span's name and its
    ``gen_ai.tool.name``, as the call id is to 256."""
    chosen = tracer()
    if chosen is None:
        return
    from opentelemetry.trace import SpanKind
    now_ns, now = time.time_ns(), time.perf_counter()
    for p in plans:
        declared = p.tool is not None and p.tool.name == p.call.name
        name = (p.call.name or "") if declared else provided(p.call.name or "", 128)
        attributes: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                                      "gen_ai.tool.type": "function"}
        if p.call.call_id:
            attributes["gen_ai.tool.call.id"] = provided(p.call.call_id)
        try:
            p.span = chosen.start_span(f"execute_tool {name}".rstrip(), kind=SpanKind.INTERNAL, attributes=attributes,
                                       start_time=now_ns - int((now - p.started) * 1e9))
        except Exception as exc:  # noqa: BLE001 - a span processor of the application's raised: no span
            failed("start", exc)
            p.span = None


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return msgspec.json.encode(value).decode("utf-8")
    except Exception:  # noqa: BLE001 - a span attribute never breaks a dispatch
        return str(value)


def finish(p: Any, result: Any) -> None:
    """End ``p``'s span with its result and the call's transitions (never raises: the call was answered)."""
    span, p.span = p.span, None
    if span is None:
        return
    try:
        if span.is_recording():
            if p.tool is not None and p.tool.description:
                span.set_attribute("gen_ai.tool.description", p.tool.description)
            if _log.LOG_ARGUMENTS:  # opted in: the values, with the secrets the logs redact redacted as there
                span.set_attribute("gen_ai.tool.call.arguments", _log.scrub(p.call.raw_arguments or ""))
                span.set_attribute("gen_ai.tool.call.result", _log.scrub(_text(result.content)))
            for step in result.history:
                attributes = {"src": step.src.value, "dst": step.dst.value, "trigger": step.trigger}
                if step.position is not None:
                    attributes["position"] = step.position
                span.add_event("toolwire.transition", attributes)
            if result.kind.value != "ok":
                from opentelemetry.trace import Status, StatusCode
                span.set_attribute("error.type", result.kind.value)
                span.set_status(Status(StatusCode.ERROR))
    except Exception as exc:  # noqa: BLE001
        failed("finish", exc)
    end(span)


def end(span: Any) -> None:
    """``span.end()``; what a span processor raises there is logged, not raised."""
    try:
        span.end()
    except Exception as exc:  # noqa: BLE001
        failed("end", exc)


def abort(plans: Iterable[Any], exc: BaseException) -> None:
    """The dispatch raised: end the spans still open with the exception's type as ``error.type``."""
    for p in plans:
        span, p.span = getattr(p, "span", None), None
        if span is None:
            continue
        try:
            from opentelemetry.trace import Status, StatusCode
            span.set_attribute("error.type", type(exc).__qualname__)
            span.set_status(Status(StatusCode.ERROR))
        except Exception as error:  # noqa: BLE001 - the dispatch's own exception is the one to raise
            failed("finish", error)
        end(span)


def bind(span: Any, invoke: Callable[[], Any]) -> Callable[[], Any]:
    """``invoke`` run with ``span`` current (and, when it returns an awaitable, that awaited with it current)."""
    if span is None:
        return invoke
    from opentelemetry import context, trace
    try:
        if span is trace.get_current_span() and not span.is_recording():
            # what a no-op tracer (the API without an SDK) gives: the caller's own current span, already current
            # in the copy of the caller's context the handler runs in
            return invoke
    except Exception:  # noqa: BLE001 - a span of the application's whose is_recording raises: bind it
        pass

    def run() -> Any:
        ctx = trace.set_span_in_context(span)
        token = context.attach(ctx)
        try:
            value = invoke()
        finally:
            context.detach(token)
        try:
            awaitable = inspect.isawaitable(value)
        except Exception:  # noqa: BLE001 - a value whose type cannot be asked (a lazy proxy): not awaited
            awaitable = False
        if awaitable:
            return _awaited(ctx, value)
        return value

    return run


async def _awaited(ctx: Any, awaitable: Any) -> Any:
    from opentelemetry import context
    token = context.attach(ctx)
    try:
        return await awaitable
    finally:
        context.detach(token)
