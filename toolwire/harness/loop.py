"""The harness loop: request → stream → Turn → dispatch → repaired history → next request, until the model
answers without calls or a step bound is reached.

Failures, where they happen (docs/architecture.md, "Where the loop handles failures"):

* before or while the response streams: the attempt is thrown away whole (its partial calls never reach the
  dispatcher, docs/failure-modes.md 26) and retried per ``RetryPolicy``; permanent errors fail at once. Only a
  turn that finished cleanly is used: one that ended in an error, was cut, hit the token limit, was filtered
  or refused, ended in any other unclean way, or holds neither calls nor text is such a failure, calls or no
  calls (``_turn_failure`` says which are retried: a filter never, a malformed call or an empty answer once).
  A filter or refusal ends in the ``CONTENT_FILTERED`` fallback, everything else in ``PROVIDER_FAILED``.
* invalid arguments or an unknown tool: no handler runs; the error result goes back under the same call id and
  the model gets one correction round; a model that fails again gets the fallback.
* a handler: reads may be retried by the dispatcher, writes never re-run; the error result goes to the model.

The user always receives either the model's answer or a localized fallback message; technical details (HTTP
statuses, bodies, exceptions) go to the structured logs only, with the conversation id bound.

The conversation is written once, as a step generator (``_Core.conversation``, see ``registry._steps``): it
yields a model request or a dispatch and receives its outcome; ``ToolLoop`` performs the steps synchronously,
``AsyncToolLoop`` with awaits, ``toolwire.durable`` as DBOS steps. Events for user interfaces
(``toolwire.harness.events``) are emitted along the way. A run stopped from outside (an event callback that
raises, a ``stream()`` closed early, a cancelled task) never leaves a turn half dispatched: a request in flight
is abandoned (nothing of it runs), a dispatch under way finishes and its results enter the history first, and a
run that dispatched nothing leaves the history as it found it.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any, NamedTuple

import anyio
import msgspec
import structlog

from .. import _log
from ..codecs.declare import Approximation, ToolChoice, declare
from ..codecs.requests import (
    add_user,
    body_conflicts,
    http_part,
    merge_body,
    options_fragment,
    request_body,
    user_message,
)
from ..errors import UsageError
from ..registry import Dispatcher, Registry, ResultKind, ToolResult
from ..registry._steps import Steps, adrive, drive
from ..types import Event, FinishReason, Turn
from . import tracing
from .errors import CallbackError, ProviderError, callback
from .events import CallAnswered, LoopEvent, LoopFinished, RequestStarted, ResponseEvent, RetryScheduled
from .fallback import FallbackReason, fallback_message
from .result import CallOutcome, LoopResult, StepRecord, WriteOutcome, write_records, writes_outcome
from .retry import RetryPolicy
from .transport import AsyncHTTPTransport, HTTPTransport

__all__ = ["ToolLoop", "AsyncToolLoop", "LoopResult", "CallOutcome", "StepRecord"]

_CORRECTABLE = frozenset({ResultKind.INVALID_ARGUMENTS, ResultKind.UNKNOWN_TOOL})
#: the result kinds of a call whose handler never started


#: what toolwire records for input it could not use: most likely the same on a retry, but a proxy or a one-off
#: glitch can cause it, so one retry
_UNREADABLE = frozenset({"protocol_error", "framing_error", "message_too_large", "no_payload", "spliced_stream",
                         "limit_exceeded"})
#: raw finish reasons worth one more attempt: the model broke its own call; a new sample usually does not
_RETRY_ONCE_FINISHES = frozenset({"MALFORMED_FUNCTION_CALL"})
#: nesting (objects and arrays) past which a turn is refused: validating, replaying and re-sending it would walk
#: it recursively, and no tool's arguments legitimately go this deep
MAX_NESTING = 100


def _nested_deeper_than(value: Any, limit: int) -> bool:
    """True when ``value`` holds objects or arrays nested more than ``limit`` deep (walked without recursion)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Iterable[Any] = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth >= limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _turn_failure(turn: Turn) -> ProviderError | None:
    """Why ``turn`` cannot be used, or None: only a clean turn is dispatched or answered with.

    =====================================================  ====================  ===================================
    the turn                                               ``type``              retried
    =====================================================  ====================  ===================================
    an error the provider sent in the stream               the provider's        when the dialect calls it transient
    the stream ended early                                 ``stream_cut``        within the policy's budget
    input toolwire could not use (garbage, nothing known)  the parser's          once
    a token limit, in a call or in the answer              ``length``            within the policy's budget
    a content filter or refusal                            ``content_filter``    never (the same request is filtered
                                                                                 again)
    Gemini ``MALFORMED_FUNCTION_CALL``                     its reason, lowered   once
    any other unclean ending (Gemini ``OTHER``, an         ``unclean_finish``    never
    Interactions status toolwire does not know …)
    clean, but nested more than ``MAX_NESTING`` deep       ``nesting_too_deep``  once
    clean, but neither calls nor text (a paused turn       ``empty_answer``      once
    holding the server's calls is continued instead)
    =====================================================  ====================  ===================================
    """
    from ..codecs.capabilities import is_transient_error

    provider, raw = turn.provider, turn.raw_finish_reason
    if turn.error is not None:
        etype = str(turn.error.type)
        code = None if turn.error.code is None else str(turn.error.code)
        limit = 1 if etype in _UNREADABLE else None
        transient = etype == "stream_cut" or limit is not None or is_transient_error(provider, etype, code)
        return ProviderError(f"the {provider} stream failed ({etype})", provider=provider,
                             status=turn.error.status, type=etype, transient=transient, retry_limit=limit)
    if not turn.ended:
        return ProviderError(f"the {provider} stream did not end", provider=provider, status=None,
                             type="stream_cut", transient=True)
    if turn.finish_reason is FinishReason.LENGTH:
        # cut inside a call (never run) or inside the answer (incomplete): ask again, within the retry budget
        return ProviderError(f"the {provider} turn hit its token limit", provider=provider,
                             status=None, type="length", transient=True)
    if turn.finish_reason is FinishReason.CONTENT_FILTER:
        return ProviderError(f"the {provider} turn was filtered ({raw!r})", provider=provider, status=None,
                             type="content_filter", transient=False)
    if not turn.finished_cleanly:
        if raw in _RETRY_ONCE_FINISHES:
            return ProviderError(f"the {provider} turn ended with {raw!r}", provider=provider, status=None,
                                 type=raw.lower(), transient=True, retry_limit=1)
        return ProviderError(f"the {provider} turn ended with {raw!r}", provider=provider, status=None,
                             type="unclean_finish", transient=False)
    if _nested_deeper_than(turn.assistant_message, MAX_NESTING) or \
            any(_nested_deeper_than(c.args, MAX_NESTING) for c in turn.calls):
        return ProviderError(f"the {provider} turn is nested more than {MAX_NESTING} deep", provider=provider,
                             status=None, type="nesting_too_deep", transient=True, retry_limit=1)
    paused = turn.finish_reason is FinishReason.PAUSE and bool(turn.server_calls)  # the server's tools under way
    if not turn.choice_calls(0) and not turn.text.strip() and not paused:
        return ProviderError(f"the {provider} turn had neither calls nor text", provider=provider, status=None,
                             type="empty_answer", transient=True, retry_limit=1)
    return None


def _fallback_reason(exc: ProviderError) -> FallbackReason:
    return FallbackReason.CONTENT_FILTERED if exc.type == "content_filter" else FallbackReason.PROVIDER_FAILED


class _Request(NamedTuple):
    """A step of the conversation: one model request (retried per the policy)."""

    body: dict[str, Any]
    step: int


class _Dispatch(NamedTuple):
    """A step of the conversation: the calls of an accepted turn through the dispatcher, under the turn identity
    its request was given."""

    turn: Turn
    step: int
    turn_id: str


def new_turn_id() -> str:
    """A turn identity for one model request: ``"req:"`` and 32 hex digits of a random nonce (uuid4), minted when
    the request is sent. Never derived from the history, whose length repeats (a new session of a conversation
    id, a windowed or repaired history), nor from the response id, which many servers do not send."""
    return "req:" + uuid.uuid4().hex


Emit = Callable[[LoopEvent], None]


def _ignore(event: LoopEvent) -> None:
    return None


def _perform(request: Callable[[dict[str, Any], int], Any], dispatch: Callable[[Turn, str], Any]
             ) -> Callable[[_Request | _Dispatch], Any]:
    """The performer of a conversation's steps, from a ``request(body, step)`` and a ``dispatch(turn, turn_id)``."""
    def perform(s: _Request | _Dispatch) -> Any:
        return request(s.body, s.step) if isinstance(s, _Request) else dispatch(s.turn, s.turn_id)
    return perform


def _emitter(on_event: Callable[[LoopEvent], Any] | None) -> Emit:
    if on_event is None:
        return _ignore
    if not callable(on_event):
        raise UsageError(f"on_event must be a callable taking a LoopEvent, got {type(on_event).__name__}")
    return callback(on_event)


class _Core:
    """Everything the sync and async loops share: history, requests, decisions. No I/O."""

    def __init__(self, provider: str, *, model: str, registry: Registry, dispatcher: Dispatcher | None,
                 system: str | None, stream: bool, locale: str, max_steps: int, retry: RetryPolicy | None,
                 conversation_id: str | None, max_tokens: int, history: Iterable[Any] | None,
                 echo_ids: bool = True, tool_choice: ToolChoice | None = None, strict: bool = False,
                 parallel: bool | None = None, temperature: float | None = None,
                 reasoning_effort: str | None = None, extra_body: Mapping[str, Any] | None = None) -> None:
        fallback_message(FallbackReason.PROVIDER_FAILED, locale)  # an unknown locale fails now
        if max_steps < 1:
            raise UsageError("max_steps must be at least 1")
        self.provider = provider
        self.model = model
        self.registry = registry
        self.dispatcher = dispatcher if dispatcher is not None else Dispatcher(registry)
        self.system = system
        self.stream = stream
        self.locale = locale
        self.max_steps = max_steps
        self.retry = retry if retry is not None else RetryPolicy()
        self.conversation_id = conversation_id or f"conv-{uuid.uuid4().hex[:12]}"
        self.max_tokens = max_tokens
        self.echo_ids = echo_ids  # Gemini: False for endpoints that refuse a call id in a result (Vertex Express)
        #: the server keeps the conversation (Interactions): a request carries the new input only, after previous_id
        self.server_history = http_part(provider).keeps_history
        self.log = {"conversation_id": self.conversation_id, "provider": provider}
        self.warnings: tuple[Approximation, ...] = ()
        self.tools_fragment, self.later_tools_fragment = self._tools(tool_choice, strict, parallel)
        self.extra = self._extra(temperature, reasoning_effort, extra_body)
        self.history: list[Any] = list(history or [])
        if self.history and not self.server_history:
            # a stored conversation may come from anywhere: every call gets exactly one result, in the
            # provider's order, and malformed arguments a form the provider accepts, before it is sent again
            from ..history import repair_history

            self.history, report = repair_history(provider, self.history, echo_ids=echo_ids)
            if report.changed:
                _log.emit(_log.WARNING, "loop.history_repaired", conversation_id=self.conversation_id,
                          provider=provider, actions=[a.kind.value for a in report.actions])
        self.previous_id: str | None = None  # the last response, where the server keeps the conversation
        self.running = False  # a prompt is being run (see ``conversation``)

    # ---- request options ------------------------------------------------------------------------------------
    def _tools(self, choice: ToolChoice | None, strict: bool, parallel: bool | None
               ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """The tools fragment of the first request of each prompt, and of the later ones: a choice that forces a
        call (``required``, ``tool``) applies to the first only, the later ones get it as ``auto`` (same allowed
        tools and parallel setting), else the model could never answer in text."""
        if choice is not None and not isinstance(choice, ToolChoice):
            raise UsageError(f"tool_choice must be a toolwire.ToolChoice, got {type(choice).__name__}")
        if not isinstance(strict, bool):
            raise UsageError("strict must be True or False")
        if parallel is not None and not isinstance(parallel, bool):
            raise UsageError("parallel must be True, False or None")
        if not len(self.registry):
            if choice is not None or strict or parallel is not None:
                raise UsageError("tool_choice, strict and parallel need tools: the registry is empty")
            return None, None
        choice = choice if choice is not None else ToolChoice()
        if parallel is not None:
            if choice.parallel is not None and choice.parallel != parallel:
                raise UsageError(f"parallel={parallel} contradicts tool_choice's parallel={choice.parallel}")
            choice = msgspec.structs.replace(choice, parallel=parallel)
        first = self._declare(choice, strict)
        if choice.mode not in ("required", "tool"):
            return first, first
        return first, self._declare(ToolChoice(mode="auto", allowed=choice.allowed, parallel=choice.parallel),
                                    strict)

    def _declare(self, choice: ToolChoice, strict: bool) -> dict[str, Any]:
        declaration = declare(self.provider, list(self.registry), choice=choice, strict=strict)
        # what the dialect cannot express is sent as its nearest equivalent, and said so
        self.warnings += tuple(w for w in declaration.warnings if w not in self.warnings)
        return declaration.fragment

    def _extra(self, temperature: float | None, reasoning_effort: str | None,
               extra_body: Mapping[str, Any] | None) -> dict[str, Any]:
        """The fields merged into every request body: the options in the dialect's own places, then
        ``extra_body``, which may add fields but never change one toolwire sets."""
        extra = options_fragment(self.provider, temperature=temperature, reasoning_effort=reasoning_effort)
        if extra_body is None:
            return extra
        if not isinstance(extra_body, Mapping) or not all(isinstance(k, str) for k in extra_body):
            raise UsageError("extra_body must be a mapping of field names to JSON values")
        try:  # as the transport will send it: NaN and infinities are not JSON
            json.dumps(extra_body, allow_nan=False)
        except (TypeError, ValueError, OverflowError, RecursionError) as exc:
            raise UsageError(f"extra_body is not JSON: {exc}") from None
        probe = request_body(self.provider, model=self.model, history=[user_message(self.provider, "")],
                             tools_fragment=self.tools_fragment, stream=self.stream, system=self.system or "-",
                             max_tokens=self.max_tokens, previous_id="-", extra=extra)
        clashes = body_conflicts(probe, extra_body)
        if clashes:
            raise UsageError(f"extra_body sets {', '.join(clashes)}, which toolwire sets itself (from the "
                             "conversation or an option of the loop): use the option instead")
        return merge_body(extra, extra_body)

    # ---- the conversation -----------------------------------------------------------------------------------
    def start(self, prompt: str) -> LoopResult:
        add_user(self.provider, self.history, prompt, alone=not self.history)
        _log.emit(_log.INFO, "loop.start", steps=self.max_steps, **self.log)
        return LoopResult(conversation_id=self.conversation_id, answer="", fallback=False)

    def body(self, step: int = 0) -> dict[str, Any]:
        return request_body(self.provider, model=self.model, history=self.history,
                            tools_fragment=self.tools_fragment if step == 0 else self.later_tools_fragment,
                            stream=self.stream, system=self.system, max_tokens=self.max_tokens,
                            previous_id=self.previous_id, extra=self.extra)

    def checked(self, turn: Turn, step: int, attempt: int) -> Turn:
        """``turn`` when it can be used; else the ``ProviderError`` that says why (logged, then raised)."""
        failure = _turn_failure(turn)
        if failure is not None:
            _log.emit(_log.WARNING, "loop.turn_rejected", step=step, attempt=attempt, type=failure.type,
                      finish_reason=turn.raw_finish_reason, transient=failure.transient, **self.log)
            raise failure
        return turn

    def attempt_started(self, step: int, attempt: int, emit: Emit) -> Callable[[Event], None] | None:
        """Log and announce attempt ``attempt`` of request ``step``; the parser events' callback for it."""
        _log.emit(_log.INFO, "loop.request", step=step, attempt=attempt, **self.log)
        if emit is _ignore:
            return None
        emit(RequestStarted(conversation_id=self.conversation_id, step=step, attempt=attempt))
        return lambda event: emit(ResponseEvent(conversation_id=self.conversation_id, step=step, attempt=attempt,
                                                event=event))

    def retrying(self, step: int, emit: Emit, span: Any = None) -> Callable[[int, float, BaseException], None] | None:
        """The retry policy's ``on_retry`` for request ``step``: a ``RetryScheduled`` event, and a ``toolwire.retry``
        event on the request's span (``toolwire.harness.tracing``)."""
        if emit is _ignore and span is None:
            return None

        def on_retry(attempt: int, delay: float, exc: BaseException) -> None:
            tracing.retried(span, attempt, delay, exc)
            if emit is not _ignore:
                emit(RetryScheduled(conversation_id=self.conversation_id, step=step, attempt=attempt,
                                    delay=round(delay, 3), reason=str(getattr(exc, "type", type(exc).__name__)),
                                    status=getattr(exc, "status", None)))
        return on_retry

    def request(self, transport: HTTPTransport, body: dict[str, Any], step: int,
                emit: Emit = _ignore) -> tuple[Turn, int, str]:
        """One model request over ``transport``, retried per the policy: the accepted turn, the attempts it
        took and the turn identity minted for this request (``new_turn_id``; raises the ``ProviderError`` that
        ends the conversation in a fallback). One inference span covers all the attempts
        (``toolwire.harness.tracing``)."""
        turn_id = new_turn_id()
        attempts = 0
        last: Turn | None = None  # the last attempt's turn, for the span
        ends = time.monotonic() + self.retry.deadline  # every attempt of this request, read to its end, by then

        def attempt() -> Turn:
            nonlocal attempts, last
            attempts += 1
            last = None
            on_event = self.attempt_started(step, attempts, emit)
            last = transport.request(body, on_event=on_event, time_limit=self.retry.attempt_limit(ends))
            return self.checked(last, step, attempts)

        span = tracing.start_request(self, transport, body)
        token = tracing.enter(span)
        try:
            turn = self.retry.call(attempt, on_retry=self.retrying(step, emit, span), ends_at=ends, step=step,
                                   **self.log)
        except BaseException as exc:
            tracing.end_request(span, last, exc)
            raise
        finally:
            tracing.leave(token)
        tracing.end_request(span, turn)
        return turn, attempts, turn_id

    async def arequest(self, transport: AsyncHTTPTransport, body: dict[str, Any], step: int,
                       emit: Emit = _ignore) -> tuple[Turn, int, str]:
        """The async twin of ``request``."""
        turn_id = new_turn_id()
        attempts = 0
        last: Turn | None = None
        ends = time.monotonic() + self.retry.deadline

        async def attempt() -> Turn:
            nonlocal attempts, last
            attempts += 1
            last = None
            on_event = self.attempt_started(step, attempts, emit)
            last = await transport.request(body, on_event=on_event, time_limit=self.retry.attempt_limit(ends))
            return self.checked(last, step, attempts)

        span = tracing.start_request(self, transport, body)
        token = tracing.enter(span)
        try:
            turn = await self.retry.acall(attempt, on_retry=self.retrying(step, emit, span), ends_at=ends,
                                          step=step, **self.log)
        except BaseException as exc:
            tracing.end_request(span, last, exc)
            raise
        finally:
            tracing.leave(token)
        tracing.end_request(span, turn)
        return turn, attempts, turn_id

    def record_answer(self, turn: Turn) -> None:
        """Keep the model's final answer in the history, so the next prompt continues the conversation (a
        Responses turn is several items; Interactions keep the conversation server-side)."""
        from ..history import history_messages

        if self.server_history:
            self.previous_id = turn.response_id
            self.history = []
        elif turn.assistant_message is not None:
            self.history.extend(history_messages(turn, []))

    def record(self, result: LoopResult, turn: Turn, results: list[ToolResult], attempts: int,
               turn_id: str) -> None:
        from ..history import encode_results, history_messages

        result.steps.append(StepRecord(turn=turn, results=results, attempts=attempts, turn_id=turn_id))
        for r in results:
            result.calls.append(CallOutcome(name=r.name, call_id=r.call_id, states=r.states,
                                            result_kind=r.kind.value))
        result.writes += write_records(results, self.dispatcher.registry, len(result.steps) - 1)
        if self.server_history:
            # the server holds the conversation: send only the results, after this response
            self.history = encode_results(turn, results, echo_ids=self.echo_ids)
            self.previous_id = turn.response_id
        else:
            self.history.extend(history_messages(turn, results, echo_ids=self.echo_ids))

    def finish(self, result: LoopResult, answer: str | None, reason: FallbackReason | None,
               error: BaseException | None = None) -> LoopResult:
        if reason is not None:
            result.fallback = True
            result.reason = reason
            # after a write that took effect (or may have), never "try again": it says the action was done, by the
            # same rule as ``result.writes``
            outcome = writes_outcome(result.writes)
            result.answer = fallback_message(reason, self.locale, writes=outcome)
            _log.emit(_log.WARNING, "loop.fallback", reason=reason.value,
                      error_type=getattr(error, "type", type(error).__name__ if error else None),
                      status=getattr(error, "status", None), **self.log)
        else:
            result.answer = answer or ""
            _log.emit(_log.INFO, "loop.answer", steps=len(result.steps), calls=len(result.calls), **self.log)
        result.history = list(self.history)
        result.previous_id = self.previous_id
        return result

    def conversation(self, prompt: str, emit: Emit = _ignore) -> Steps[LoopResult]:
        """The conversation for one prompt, as a step generator: it yields ``_Request`` (answered with the
        accepted turn and its attempts, or a ``ProviderError`` raised into it) and ``_Dispatch`` (answered with
        the results). Stopped from outside before anything was dispatched, it puts the history back as it was.
        One at a time per loop: a second while one runs (from a callback, or concurrently) is a ``UsageError``,
        since both would change the one history."""
        if self.running:
            raise UsageError("a prompt of this loop is still running: a loop runs one prompt at a time (from an "
                             "on_event callback or a concurrent task, use another loop)")
        self.running = True
        try:
            return (yield from self._conversation(prompt, emit))
        finally:
            self.running = False

    def _conversation(self, prompt: str, emit: Emit) -> Steps[LoopResult]:
        saved = (list(self.history), self.previous_id)
        dispatched = False
        try:
            result = self.start(prompt)
            corrections = 0
            for step in range(self.max_steps):
                try:
                    turn, attempts, turn_id = yield _Request(self.body(step), step)
                except ProviderError as exc:
                    return self.finish(result, None, _fallback_reason(exc), exc)
                _log.emit(_log.INFO, "loop.turn", step=step, finish_reason=turn.raw_finish_reason,
                          calls=len(turn.calls), **self.log)
                if not turn.choice_calls(0):  # choice 0 answers; other choices' calls never run
                    result.steps.append(StepRecord(turn=turn, results=[], attempts=attempts, turn_id=turn_id))
                    self.record_answer(turn)
                    if turn.finish_reason is FinishReason.PAUSE:
                        continue  # paused (Anthropic pause_turn): sent back as it came, the model continues it
                    return self.finish(result, turn.text, None)
                results = yield _Dispatch(turn, step, turn_id)
                dispatched = True  # its effects happened: the history keeps them, whatever comes next
                self.record(result, turn, results, attempts, turn_id)
                for r in results:
                    emit(CallAnswered(conversation_id=self.conversation_id, step=step, result=r))
                corrections, exhausted = self.after_dispatch(results, corrections)
                if exhausted:
                    return self.finish(result, None, FallbackReason.CORRECTIONS_EXHAUSTED)
            return self.finish(result, None, FallbackReason.STEP_LIMIT)
        except BaseException:
            if not dispatched:
                self.history, self.previous_id = saved
            raise

    def drive(self, prompt: str, request: Callable[[dict[str, Any], int], tuple[Turn, int, str]],
              dispatch: Callable[[Turn, str], list[ToolResult]], emit: Emit = _ignore) -> LoopResult:
        """The synchronous conversation for one prompt: ``request(body, step)`` returns a usable turn, the
        attempts it took and the turn identity of the request (or raises ``ProviderError``); ``dispatch(turn,
        turn_id)`` answers its calls under that identity. ``ToolLoop`` and ``toolwire.durable`` supply both."""
        result = drive(self.conversation(prompt, emit), _perform(request, dispatch))
        emit(LoopFinished(conversation_id=self.conversation_id, result=result))
        return result

    async def adrive(self, prompt: str,
                     request: Callable[[dict[str, Any], int], Awaitable[tuple[Turn, int, str]]],
                     dispatch: Callable[[Turn, str], Awaitable[list[ToolResult]]], emit: Emit = _ignore
                     ) -> LoopResult:
        """The async twin of ``drive``."""
        result = await adrive(self.conversation(prompt, emit), _perform(request, dispatch))
        emit(LoopFinished(conversation_id=self.conversation_id, result=result))
        return result

    def after_dispatch(self, results: list[ToolResult], corrections: int) -> tuple[int, bool]:
        """Count correction rounds; True when the model failed again after its one correction round."""
        if any(r.kind in _CORRECTABLE for r in results):
            corrections += 1
            return corrections, corrections > 1
        return corrections, False


async def _uninterrupted(awaitable: Awaitable[Any]) -> tuple[Any, bool]:
    """Await ``awaitable`` to its end even when the calling task is cancelled meanwhile: its result, and whether
    a (native) cancellation arrived, which the caller raises once the result is safe. An anyio cancel scope's
    cancellation waits outside the shield and arrives at the caller's next await."""
    task = asyncio.ensure_future(awaitable)
    cancelled = False
    with anyio.CancelScope(shield=True):
        while not task.done():
            try:
                await asyncio.shield(task)
            except asyncio.CancelledError:
                cancelled = True
    return task.result(), cancelled


_END = object()


class ToolLoop:
    """A conversation with a model over real HTTP, running its tool calls through ``registry``.

    ``provider`` is a dialect id; ``model`` the model name; ``base_url`` points at the provider (or at
    ``toolwire.sim``); the API key comes from ``api_key`` or the usual environment variable. ``echo_ids=False``
    leaves the call id out of Gemini's function responses, for endpoints that refuse it (Vertex Express).
    ``run(prompt)`` returns a ``LoopResult`` and never raises for a provider's or a model's failure (the fallback
    message is the answer then); it raises ``UsageError`` for misuse.

    Request options, sent in each dialect's own fields: ``tool_choice`` (a ``toolwire.ToolChoice``; one that
    forces a call applies to the first request of each prompt, the later ones get it as ``auto``), ``strict``
    (strict tool schemas, as ``declare`` does it), ``parallel`` (allow or forbid parallel calls; None leaves the
    provider's default), ``temperature``, ``reasoning_effort`` (see ``toolwire.codecs.requests.REASONING_EFFORTS``)
    and ``extra_body`` (more fields merged into every request body; it may add fields, objects merge key by key,
    but it may not change a field toolwire sets). A value a dialect does not accept is a ``UsageError`` here; one
    it can only approximate is sent as its nearest equivalent and listed in ``warnings``.
    """

    def __init__(self, provider: str, *, model: str, registry: Registry, dispatcher: Dispatcher | None = None,
                 transport: HTTPTransport | None = None, base_url: str | None = None, api_key: str | None = None,
                 system: str | None = None, stream: bool = True, locale: str = "en", max_steps: int = 8,
                 retry: RetryPolicy | None = None, conversation_id: str | None = None, max_tokens: int = 1024,
                 timeout: float | None = None, history: Iterable[Any] | None = None,
                 echo_ids: bool = True, tool_choice: ToolChoice | None = None, strict: bool = False,
                 parallel: bool | None = None, temperature: float | None = None,
                 reasoning_effort: str | None = None, extra_body: Mapping[str, Any] | None = None) -> None:
        self.core = _Core(provider, model=model, registry=registry, dispatcher=dispatcher, system=system,
                          stream=stream, locale=locale, max_steps=max_steps, retry=retry,
                          conversation_id=conversation_id, max_tokens=max_tokens, history=history,
                          echo_ids=echo_ids, tool_choice=tool_choice, strict=strict, parallel=parallel,
                          temperature=temperature, reasoning_effort=reasoning_effort, extra_body=extra_body)
        self.transport = transport or HTTPTransport(provider, model=model, base_url=base_url, api_key=api_key,
                                                    stream=stream, timeout=timeout)

    @property
    def conversation_id(self) -> str:
        return self.core.conversation_id

    @property
    def warnings(self) -> tuple[Approximation, ...]:
        """What the dialect cannot express of ``tool_choice``, ``strict`` and ``parallel`` and is sent as its nearest
        equivalent (``toolwire.Approximation``: ``code``, ``detail``), as ``declare`` reports it."""
        return self.core.warnings

    def run(self, prompt: str, *, on_event: Callable[[LoopEvent], Any] | None = None,
            data: Any = None) -> LoopResult:
        """Run one prompt to the model's answer (or the fallback).

        ``on_event(event)`` is called on this thread with every event of the conversation
        (``toolwire.harness.events``), ending with ``LoopFinished``. What it raises stops the run and propagates
        from ``run`` unchanged, never half-way through a dispatch: a model request under way is abandoned
        (nothing of it runs); results are announced only once the whole turn is dispatched and in the history;
        and a run stopped before it dispatched anything leaves the history as it was, so the same prompt can be
        run again. ``data``: any object, handed to the handlers that ask for a ``ToolContext``
        (``ToolContext.data``)."""
        emit = _emitter(on_event)
        core = self.core

        def request(body: dict[str, Any], step: int) -> tuple[Turn, int, str]:
            return core.request(self.transport, body, step, emit)

        def dispatch(turn: Turn, turn_id: str) -> list[ToolResult]:
            return core.dispatcher.run(turn, conversation_id=core.conversation_id, turn_id=turn_id, data=data)

        # every event of the conversation (parsing and dispatch included) carries its id where the
        # application's structlog merges context variables (toolwire.logs.configure_logging does); the prompt's
        # span is current throughout, so the requests' and the calls' spans are its children
        span = tracing.start_agent(core, self.transport)
        token = tracing.enter(span)
        try:
            with structlog.contextvars.bound_contextvars(conversation_id=core.conversation_id):
                try:
                    result = core.drive(prompt, request, dispatch, emit)
                except CallbackError as exc:
                    raise exc.error from None
        except BaseException as exc:
            tracing.end_agent(span, None, exc)
            raise
        finally:
            tracing.leave(token)
        tracing.end_agent(span, result)
        return result

    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> "ToolLoop":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncToolLoop:
    """The async twin of ``ToolLoop``: ``await loop.run(prompt)``, or ``async for event in loop.stream(prompt)``;
    handlers run through ``Dispatcher.arun``. Takes the same request options as ``ToolLoop``."""

    def __init__(self, provider: str, *, model: str, registry: Registry, dispatcher: Dispatcher | None = None,
                 transport: AsyncHTTPTransport | None = None, base_url: str | None = None,
                 api_key: str | None = None, system: str | None = None, stream: bool = True, locale: str = "en",
                 max_steps: int = 8, retry: RetryPolicy | None = None, conversation_id: str | None = None,
                 max_tokens: int = 1024, timeout: float | None = None,
                 history: Iterable[Any] | None = None, echo_ids: bool = True,
                 tool_choice: ToolChoice | None = None, strict: bool = False, parallel: bool | None = None,
                 temperature: float | None = None, reasoning_effort: str | None = None,
                 extra_body: Mapping[str, Any] | None = None) -> None:
        self.core = _Core(provider, model=model, registry=registry, dispatcher=dispatcher, system=system,
                          stream=stream, locale=locale, max_steps=max_steps, retry=retry,
                          conversation_id=conversation_id, max_tokens=max_tokens, history=history,
                          echo_ids=echo_ids, tool_choice=tool_choice, strict=strict, parallel=parallel,
                          temperature=temperature, reasoning_effort=reasoning_effort, extra_body=extra_body)
        self.transport = transport or AsyncHTTPTransport(provider, model=model, base_url=base_url,
                                                         api_key=api_key, stream=stream, timeout=timeout)

    @property
    def conversation_id(self) -> str:
        return self.core.conversation_id

    @property
    def warnings(self) -> tuple[Approximation, ...]:
        """What the dialect cannot express of ``tool_choice``, ``strict`` and ``parallel`` and is sent as its nearest
        equivalent (``toolwire.Approximation``: ``code``, ``detail``), as ``declare`` reports it."""
        return self.core.warnings

    async def run(self, prompt: str, *, on_event: Callable[[LoopEvent], Any] | None = None,
                  data: Any = None) -> LoopResult:
        """As ``ToolLoop.run`` (``on_event`` is a plain callable, called on the event loop). Cancelled while a
        turn is being dispatched, the dispatch finishes and its results enter the history before the
        cancellation propagates."""
        return await self._run(prompt, _emitter(on_event), data, None)

    async def _run(self, prompt: str, emit: Emit, data: Any, gate: Callable[[], Awaitable[Any]] | None
                   ) -> LoopResult:
        """``run``; ``gate()``, when given, is awaited before each model request and each dispatch starts."""
        core = self.core
        cancelled = False

        async def request(body: dict[str, Any], step: int) -> tuple[Turn, int, str]:
            if cancelled:  # the dispatch before it was cancelled: stop now that its results are recorded
                raise asyncio.CancelledError
            if gate is not None:
                await gate()
            return await core.arequest(self.transport, body, step, emit)

        async def dispatch(turn: Turn, turn_id: str) -> list[ToolResult]:
            nonlocal cancelled
            if gate is not None:
                await gate()
            results, cancelled = await _uninterrupted(core.dispatcher.arun(
                turn, conversation_id=core.conversation_id, turn_id=turn_id, data=data))
            return results

        span = tracing.start_agent(core, self.transport)
        token = tracing.enter(span)
        try:
            with structlog.contextvars.bound_contextvars(conversation_id=core.conversation_id):
                try:
                    result = await core.adrive(prompt, request, dispatch, emit)
                except CallbackError as exc:
                    raise exc.error from None
            if cancelled:
                raise asyncio.CancelledError
        except BaseException as exc:
            tracing.end_agent(span, None, exc)
            raise
        finally:
            tracing.leave(token)
        tracing.end_agent(span, result)
        return result

    async def stream(self, prompt: str, *, data: Any = None) -> AsyncIterator[LoopEvent]:
        """Run ``prompt`` and yield its events as they happen (``toolwire.harness.events``), ending with
        ``LoopFinished``; what ``run`` would raise is raised here.

        The run keeps pace with the consumer: a model request or a dispatch starts only once the consumer has
        taken every event before it and asks for the next. Closing the iterator early (``break`` under
        ``contextlib.aclosing``, ``aclose()``, or the consumer's task cancelled) stops the run and waits for it to
        end: the response being read is closed and nothing of it runs, a dispatch under way finishes and is
        recorded first, no request or dispatch starts after the consumer left, and no task is left behind."""
        events: asyncio.Queue[Any] = asyncio.Queue()
        wanted = asyncio.Event()  # the consumer took every event and waits for the next
        # stopped through an anyio cancel scope, not Task.cancel(): httpx's transport shields its own clean-up
        # (returning the connection to its pool) from anyio cancellation only
        scope = anyio.CancelScope()

        def emit(event: LoopEvent) -> None:
            wanted.clear()
            events.put_nowait(event)

        async def produce() -> LoopResult | None:
            with scope:
                return await self._run(prompt, emit, data, wanted.wait)
            return None  # stopped by the consumer

        task = asyncio.ensure_future(produce())
        task.add_done_callback(lambda _: events.put_nowait(_END))
        try:
            while True:
                if events.empty():
                    wanted.set()
                event = await events.get()
                if event is _END:
                    break
                yield event
            await task
        finally:
            scope.cancel()
            await asyncio.wait([task])
            if not task.cancelled():
                task.exception()  # retrieved: what it raised after the consumer left is not reported again

    async def aclose(self) -> None:
        await self.transport.aclose()

    async def __aenter__(self) -> "AsyncToolLoop":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
