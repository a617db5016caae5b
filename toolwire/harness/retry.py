"""The retry policy for model requests, on tenacity.

Transient failures are retried with exponential backoff and jitter, a bounded number of attempts and a total
deadline: timeouts, connection errors, the statuses each dialect's capabilities record lists as transient
(408, 409, 429, 5xx, 529 …), in-stream overloaded / rate-limit / server errors, and streams cut before their
end. A server's own delay (``Retry-After``, ``retry-after-ms``, Gemini ``RetryInfo.retryDelay``) is honoured
up to ``max_hint``; a server asking for longer is not retried. Permanent errors (400, 401, 403, 404, 422, quota
exhausted) fail at once. A failure that says its own ``retry_limit`` (a body that could not be read, a malformed
call, an empty answer: one retry) is retried at most that many times per request, within the same budget.
"""

from __future__ import annotations

import collections
import math
import random
import time
from typing import Any, Awaitable, Callable, TypeVar

import msgspec
import tenacity

from .. import _log
from ..errors import UsageError
from .errors import ProviderError

__all__ = ["RetryPolicy"]

T = TypeVar("T")
#: ``on_retry(attempt, delay, error)``: attempt ``attempt`` (1-based) failed with ``error``; the next starts after
#: ``delay`` seconds
OnRetry = Callable[[int, float, BaseException], None]


class RetryPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """``attempts`` in all (first try included); ``deadline`` seconds of wall clock for all of them and the waits
    between them; ``attempt_timeout`` seconds for each one; backoff ``initial`` × 2^n capped at ``max_backoff``,
    minus up to ``jitter`` of it at random; a server's delay up to ``max_hint``.

    Both time bounds hold while a response is read (the loop hands each attempt the time it has left, see
    ``HTTPTransport.request``'s ``time_limit``): an attempt past either is a ``timeout``. An attempt is retried
    only when its wait ends before the deadline."""

    attempts: int = 4
    deadline: float = 600.0
    attempt_timeout: float = 300.0
    initial: float = 0.5
    max_backoff: float = 8.0
    jitter: float = 0.25
    max_hint: float = 60.0

    def __post_init__(self) -> None:
        for name in ("deadline", "attempt_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value <= 0:
                raise UsageError(f"RetryPolicy.{name} must be a finite number of seconds above 0, got {value!r}")

    def attempt_limit(self, ends_at: float) -> float:
        """Seconds the attempt starting now may take: ``attempt_timeout``, cut at ``ends_at`` (the deadline, a
        ``time.monotonic()`` value)."""
        return max(0.0, min(float(self.attempt_timeout), ends_at - time.monotonic()))

    def retryable(self, exc: BaseException) -> bool:
        return (isinstance(exc, ProviderError) and exc.transient
                and (exc.retry_after is None or exc.retry_after <= self.max_hint))

    def delay(self, attempt: int, exc: BaseException | None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        hint = getattr(exc, "retry_after", None)
        if hint is not None:
            return max(0.0, min(float(hint), self.max_hint))
        base = min(self.max_backoff, self.initial * (2 ** (attempt - 1)))
        return base * (1.0 - self.jitter * random.random())

    def _kwargs(self, context: dict[str, Any], on_retry: OnRetry | None, ends_at: float | None) -> dict[str, Any]:
        retried: collections.Counter[str] = collections.Counter()  # retries so far, per failure type
        ends = ends_at if ends_at is not None else time.monotonic() + self.deadline
        waits: dict[int, float] = {}  # attempt number -> the wait after it, chosen when the retry was decided

        def retry(state: tenacity.RetryCallState) -> bool:
            exc = state.outcome.exception() if state.outcome else None
            if exc is None or not self.retryable(exc):
                return False
            limit = getattr(exc, "retry_limit", None)
            if limit is not None and retried[exc.type] >= limit:
                return False
            delay = self.delay(state.attempt_number, exc)
            if delay >= ends - time.monotonic():  # the next attempt would start at or past the deadline
                return False
            waits[state.attempt_number] = delay
            retried[exc.type] += 1
            return True

        def wait(state: tenacity.RetryCallState) -> float:
            if state.attempt_number in waits:
                return waits[state.attempt_number]
            exc = state.outcome.exception() if state.outcome else None
            return self.delay(state.attempt_number, exc)

        def before_sleep(state: tenacity.RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            _log.emit(_log.INFO, "loop.retry", attempt=state.attempt_number,
                      delay=round(state.next_action.sleep, 3) if state.next_action else None,
                      type=getattr(exc, "type", type(exc).__name__), status=getattr(exc, "status", None),
                      **context)
            if on_retry is not None:
                on_retry(state.attempt_number, state.next_action.sleep if state.next_action else 0.0, exc)

        return dict(
            stop=tenacity.stop_after_attempt(max(1, self.attempts)) | tenacity.stop_after_delay(self.deadline),
            wait=wait,
            retry=retry,
            before_sleep=before_sleep,
            reraise=True,
        )

    def call(self, fn: Callable[[], T], *, on_retry: OnRetry | None = None, ends_at: float | None = None,
             **context: Any) -> T:
        """Run ``fn`` until it returns, a permanent error, or the attempts or deadline run out (the last error
        is raised). ``on_retry(attempt, delay, error)`` is called before each wait: attempt ``attempt`` failed
        with ``error`` and the next one starts after ``delay`` seconds (what it raises propagates). A wait that
        would end at or past the deadline (``ends_at``, a ``time.monotonic()`` value; default ``deadline``
        seconds from now) is not started: the last error is raised instead. ``fn`` itself is not interrupted:
        give it ``attempt_limit(ends_at)`` as its own bound."""
        for attempt in tenacity.Retrying(**self._kwargs(context, on_retry, ends_at)):
            with attempt:
                return fn()
        raise AssertionError("unreachable")  # pragma: no cover

    async def acall(self, fn: Callable[[], Awaitable[T]], *, on_retry: OnRetry | None = None,
                    ends_at: float | None = None, **context: Any) -> T:
        """The async twin of ``call``."""
        async for attempt in tenacity.AsyncRetrying(**self._kwargs(context, on_retry, ends_at)):
            with attempt:
                return await fn()
        raise AssertionError("unreachable")  # pragma: no cover
