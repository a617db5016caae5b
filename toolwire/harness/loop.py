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
"""

from __future__ import annotations

import uuid
from typing import Any, Callable, Iterable

import msgspec
import structlog

from .. import _log
from ..codecs.declare import declare
from ..codecs.requests import request_body, user_message
from ..errors import UsageError
from ..registry import Dispatcher, Registry, ResultKind, ToolResult
from ..types import FinishReason, Turn
from .errors import ProviderError
from .fallback import FallbackReason, fallback_message
from .retry import RetryPolicy
from .transport import AsyncHTTPTransport, HTTPTransport

__all__ = ["ToolLoop", "AsyncToolLoop", "LoopResult", "CallOutcome", "StepRecord"]

_CORRECTABLE = frozenset({ResultKind.INVALID_ARGUMENTS, ResultKind.UNKNOWN_TOOL})


class CallOutcome(msgspec.Struct, kw_only=True):
    """One call of the conversation: its path through the state machine and how it was answered."""

    name: str | None
    call_id: str | None
    states: list[str]
    result_kind: str


class StepRecord(msgspec.Struct, kw_only=True):
    """One model turn of the conversation and the results sent back for it."""

    turn: Turn
    results: list[ToolResult]
    attempts: int


class LoopResult(msgspec.Struct, kw_only=True):
    """What the user gets (``answer``: the model's, or the fallback message when ``fallback``) and what
    happened on the way (``steps``, ``calls``); ``reason`` says why a fallback was given."""

    conversation_id: str
    answer: str
    fallback: bool
    reason: FallbackReason | None = None
    calls: list[CallOutcome] = msgspec.field(default_factory=list)
    steps: list[StepRecord] = msgspec.field(default_factory=list)
    history: list[Any] = msgspec.field(default_factory=list)
    #: Gemini Interactions: the last interaction's id, which continues the conversation (it lives server-side)
    previous_id: str | None = None


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
    clean, but neither calls nor text                      ``empty_answer``      once
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
    if not turn.calls and not turn.text.strip():
        return ProviderError(f"the {provider} turn had neither calls nor text", provider=provider, status=None,
                             type="empty_answer", transient=True, retry_limit=1)
    return None


def _fallback_reason(exc: ProviderError) -> FallbackReason:
    return FallbackReason.CONTENT_FILTERED if exc.type == "content_filter" else FallbackReason.PROVIDER_FAILED


class _Core:
    """Everything the sync and async loops share: history, requests, decisions. No I/O."""

    def __init__(self, provider: str, *, model: str, registry: Registry, dispatcher: Dispatcher | None,
                 system: str | None, stream: bool, locale: str, max_steps: int, retry: RetryPolicy | None,
                 conversation_id: str | None, max_tokens: int, history: Iterable[Any] | None,
                 echo_ids: bool = True) -> None:
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
        self.echo_ids = echo_ids  # Gemini: False for endpoints that reject functionResponse.id (Vertex Express)
        self.tools_fragment = declare(provider, list(registry)).fragment if len(registry) else None
        self.history: list[Any] = list(history or [])
        if self.history and provider != "gemini-interactions":
            # a stored conversation may come from anywhere: every call gets exactly one result, in the
            # provider's order, and malformed arguments a form the provider accepts, before it is sent again
            from ..history import repair_history

            self.history, report = repair_history(provider, self.history, echo_ids=echo_ids)
            if report.changed:
                _log.emit(_log.WARNING, "loop.history_repaired", conversation_id=self.conversation_id,
                          provider=provider, actions=[a.kind.value for a in report.actions])
        self.previous_id: str | None = None  # Interactions keep the conversation server-side
        self.log = {"conversation_id": self.conversation_id, "provider": provider}

    def start(self, prompt: str) -> LoopResult:
        self.history.append(user_message(self.provider, prompt))
        _log.emit(_log.INFO, "loop.start", steps=self.max_steps, **self.log)
        return LoopResult(conversation_id=self.conversation_id, answer="", fallback=False)

    def body(self) -> dict[str, Any]:
        return request_body(self.provider, model=self.model, history=self.history,
                            tools_fragment=self.tools_fragment, stream=self.stream, system=self.system,
                            max_tokens=self.max_tokens, previous_id=self.previous_id)

    def checked(self, turn: Turn, step: int, attempt: int) -> Turn:
        """``turn`` when it can be used; else the ``ProviderError`` that says why (logged, then raised)."""
        failure = _turn_failure(turn)
        if failure is not None:
            _log.emit(_log.WARNING, "loop.turn_rejected", step=step, attempt=attempt, type=failure.type,
                      finish_reason=turn.raw_finish_reason, transient=failure.transient, **self.log)
            raise failure
        return turn

    def request(self, transport: HTTPTransport, body: dict[str, Any], step: int) -> tuple[Turn, int]:
        """One model request over ``transport``, retried per the policy: the accepted turn and the attempts it
        took (raises the ``ProviderError`` that ends the conversation in a fallback)."""
        attempts = 0

        def attempt() -> Turn:
            nonlocal attempts
            attempts += 1
            _log.emit(_log.INFO, "loop.request", step=step, attempt=attempts, **self.log)
            return self.checked(transport.request(body), step, attempts)

        return self.retry.call(attempt, step=step, **self.log), attempts

    def turn_id(self, turn: Turn) -> str:
        """What identifies ``turn`` in this conversation for the ledger: the length of the history it answers
        (stable when the same conversation is replayed from the same stored history) and the response id."""
        return f"h{len(self.history)}:{turn.response_id or '-'}"

    def record_answer(self, turn: Turn) -> None:
        """Keep the model's final answer in the history, so the next prompt continues the conversation (a
        Responses turn is several items; Interactions keep the conversation server-side)."""
        from ..history import history_messages

        if self.provider == "gemini-interactions":
            self.previous_id = turn.response_id
            self.history = []
        elif turn.assistant_message is not None:
            self.history.extend(history_messages(turn, []))

    def record(self, result: LoopResult, turn: Turn, results: list[ToolResult], attempts: int) -> None:
        from ..history import history_messages

        result.steps.append(StepRecord(turn=turn, results=results, attempts=attempts))
        for r in results:
            result.calls.append(CallOutcome(name=r.name, call_id=r.call_id, states=r.states,
                                            result_kind=r.kind.value))
        entries = history_messages(turn, results, echo_ids=self.echo_ids)
        if self.provider == "gemini-interactions":
            # the server holds the conversation: send only the results, after this interaction
            self.previous_id = turn.response_id
            self.history = [e for e in entries if isinstance(e, dict) and e.get("type") == "function_result"]
        else:
            self.history.extend(entries)

    def finish(self, result: LoopResult, answer: str | None, reason: FallbackReason | None,
               error: BaseException | None = None) -> LoopResult:
        if reason is not None:
            result.fallback = True
            result.reason = reason
            result.answer = fallback_message(reason, self.locale)
            _log.emit(_log.WARNING, "loop.fallback", reason=reason.value,
                      error_type=getattr(error, "type", type(error).__name__ if error else None),
                      status=getattr(error, "status", None), **self.log)
        else:
            result.answer = answer or ""
            _log.emit(_log.INFO, "loop.answer", steps=len(result.steps), calls=len(result.calls), **self.log)
        result.history = list(self.history)
        result.previous_id = self.previous_id
        return result

    def drive(self, prompt: str, request: Callable[[dict[str, Any], int], tuple[Turn, int]],
              dispatch: Callable[[Turn, int], list[ToolResult]]) -> LoopResult:
        """The synchronous conversation for one prompt: ``request(body, step)`` returns a usable turn and the
        attempts it took (or raises ``ProviderError``); ``dispatch(turn, step)`` answers its calls. ``ToolLoop``
        and ``toolwire.durable`` supply both."""
        result = self.start(prompt)
        corrections = 0
        for step in range(self.max_steps):
            try:
                turn, attempts = request(self.body(), step)
            except ProviderError as exc:
                return self.finish(result, None, _fallback_reason(exc), exc)
            _log.emit(_log.INFO, "loop.turn", step=step, finish_reason=turn.raw_finish_reason,
                      calls=len(turn.calls), **self.log)
            if not turn.calls:
                result.steps.append(StepRecord(turn=turn, results=[], attempts=attempts))
                self.record_answer(turn)
                return self.finish(result, turn.text, None)
            results = dispatch(turn, step)
            self.record(result, turn, results, attempts)
            corrections, exhausted = self.after_dispatch(results, corrections)
            if exhausted:
                return self.finish(result, None, FallbackReason.CORRECTIONS_EXHAUSTED)
        return self.finish(result, None, FallbackReason.STEP_LIMIT)

    def after_dispatch(self, results: list[ToolResult], corrections: int) -> tuple[int, bool]:
        """Count correction rounds; True when the model failed again after its one correction round."""
        if any(r.kind in _CORRECTABLE for r in results):
            corrections += 1
            return corrections, corrections > 1
        return corrections, False


class ToolLoop:
    """A conversation with a model over real HTTP, running its tool calls through ``registry``.

    ``provider`` is a dialect id; ``model`` the model name; ``base_url`` points at the provider (or at
    ``toolwire.sim``); the API key comes from ``api_key`` or the usual environment variable. ``echo_ids=False``
    leaves Gemini's ``functionResponse.id`` out, for endpoints that reject it (Vertex Express). ``run(prompt)``
    returns a ``LoopResult`` and never raises for a provider's or a model's failure (the fallback message is
    the answer then); it raises ``UsageError`` for misuse.
    """

    def __init__(self, provider: str, *, model: str, registry: Registry, dispatcher: Dispatcher | None = None,
                 transport: HTTPTransport | None = None, base_url: str | None = None, api_key: str | None = None,
                 system: str | None = None, stream: bool = True, locale: str = "en", max_steps: int = 8,
                 retry: RetryPolicy | None = None, conversation_id: str | None = None, max_tokens: int = 1024,
                 timeout: float | None = None, history: Iterable[Any] | None = None,
                 echo_ids: bool = True) -> None:
        self.core = _Core(provider, model=model, registry=registry, dispatcher=dispatcher, system=system,
                          stream=stream, locale=locale, max_steps=max_steps, retry=retry,
                          conversation_id=conversation_id, max_tokens=max_tokens, history=history,
                          echo_ids=echo_ids)
        self.transport = transport or HTTPTransport(provider, model=model, base_url=base_url, api_key=api_key,
                                                    stream=stream, timeout=timeout)

    @property
    def conversation_id(self) -> str:
        return self.core.conversation_id

    def run(self, prompt: str) -> LoopResult:
        # every event of the conversation (parsing and dispatch included) carries its id where the
        # application's structlog merges context variables (toolwire.logs.configure_logging does)
        with structlog.contextvars.bound_contextvars(conversation_id=self.core.conversation_id):
            return self._run(prompt)

    def _run(self, prompt: str) -> LoopResult:
        core = self.core

        def request(body: dict[str, Any], step: int) -> tuple[Turn, int]:
            return core.request(self.transport, body, step)

        def dispatch(turn: Turn, step: int) -> list[ToolResult]:
            return core.dispatcher.run(turn, conversation_id=core.conversation_id, turn_id=core.turn_id(turn))

        return core.drive(prompt, request, dispatch)

    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> "ToolLoop":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncToolLoop:
    """The async twin of ``ToolLoop``: ``await loop.run(prompt)``; handlers run through ``Dispatcher.arun``."""

    def __init__(self, provider: str, *, model: str, registry: Registry, dispatcher: Dispatcher | None = None,
                 transport: AsyncHTTPTransport | None = None, base_url: str | None = None,
                 api_key: str | None = None, system: str | None = None, stream: bool = True, locale: str = "en",
                 max_steps: int = 8, retry: RetryPolicy | None = None, conversation_id: str | None = None,
                 max_tokens: int = 1024, timeout: float | None = None,
                 history: Iterable[Any] | None = None, echo_ids: bool = True) -> None:
        self.core = _Core(provider, model=model, registry=registry, dispatcher=dispatcher, system=system,
                          stream=stream, locale=locale, max_steps=max_steps, retry=retry,
                          conversation_id=conversation_id, max_tokens=max_tokens, history=history,
                          echo_ids=echo_ids)
        self.transport = transport or AsyncHTTPTransport(provider, model=model, base_url=base_url,
                                                         api_key=api_key, stream=stream, timeout=timeout)

    @property
    def conversation_id(self) -> str:
        return self.core.conversation_id

    async def run(self, prompt: str) -> LoopResult:
        with structlog.contextvars.bound_contextvars(conversation_id=self.core.conversation_id):
            return await self._run(prompt)

    async def _run(self, prompt: str) -> LoopResult:
        core = self.core
        result = core.start(prompt)
        corrections = 0
        for step in range(core.max_steps):
            body = core.body()
            attempts = 0

            async def attempt() -> Turn:
                nonlocal attempts
                attempts += 1
                _log.emit(_log.INFO, "loop.request", step=step, attempt=attempts, **core.log)
                return core.checked(await self.transport.request(body), step, attempts)

            try:
                turn = await core.retry.acall(attempt, step=step, **core.log)
            except ProviderError as exc:
                return core.finish(result, None, _fallback_reason(exc), exc)
            _log.emit(_log.INFO, "loop.turn", step=step, finish_reason=turn.raw_finish_reason,
                      calls=len(turn.calls), **core.log)
            if not turn.calls:
                result.steps.append(StepRecord(turn=turn, results=[], attempts=attempts))
                core.record_answer(turn)
                return core.finish(result, turn.text, None)
            results = await core.dispatcher.arun(turn, conversation_id=core.conversation_id,
                                                 turn_id=core.turn_id(turn))
            core.record(result, turn, results, attempts)
            corrections, exhausted = core.after_dispatch(results, corrections)
            if exhausted:
                return core.finish(result, None, FallbackReason.CORRECTIONS_EXHAUSTED)
        return core.finish(result, None, FallbackReason.STEP_LIMIT)

    async def aclose(self) -> None:
        await self.transport.aclose()

    async def __aenter__(self) -> "AsyncToolLoop":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
