"""Events of a running conversation, for user interfaces: ``ToolLoop.run(prompt, on_event=...)`` calls back with
them, ``AsyncToolLoop.stream(prompt)`` yields them.

In the order they happen, for each model request of the conversation (``step``, from 0 for each prompt):

* ``RequestStarted(step, attempt)``: an attempt of the request is sent (``attempt`` 1, then 2, 3 … on retries).
* ``ResponseEvent(step, attempt, event)``: one event of the ``StreamParser`` reading that attempt's response, as
  it arrives: ``TextReceived`` (text deltas), ``CallAnnounced``, ``ArgumentsReceived`` (argument text, coalesced
  per network read), ``CallCompleted``, ``CallTruncated``, ``CallErrored``, ``ServerCallSeen``, ``StreamFailed``
  and ``TurnFinished`` (see ``toolwire.types``). They report facts as they arrive: only the turn the loop
  accepts is dispatched or answered with. An attempt that failed is followed by ``RetryScheduled`` and the next
  ``RequestStarted``, whose ``attempt`` tells the interface to drop what the failed attempt showed.
* ``RetryScheduled(step, attempt, delay, reason, status)``: attempt ``attempt`` failed (``reason``: the
  ``ProviderError.type``; ``status``: the HTTP status or None) and the next one is sent after ``delay`` seconds.
* ``CallAnswered(step, result)``: one per ``ToolResult`` of a dispatched turn, in call order, once the whole turn
  was dispatched and its results are in the history.
* ``LoopFinished(result)``: the conversation turn is over; ``result`` is the ``LoopResult`` ``run`` returns (the
  model's answer or the fallback).

Every event carries the ``conversation_id``. They are msgspec Structs (``msgspec.json.encode`` sends them to a
browser as they are).
"""

from __future__ import annotations

import msgspec

from ..registry import ToolResult
from ..types import Event
from .result import LoopResult

__all__ = ["LoopEvent", "RequestStarted", "ResponseEvent", "RetryScheduled", "CallAnswered", "LoopFinished"]


class LoopEvent(msgspec.Struct, frozen=True, kw_only=True):
    """Base class of the events of a conversation."""

    conversation_id: str


class RequestStarted(LoopEvent, frozen=True, kw_only=True):
    """Attempt ``attempt`` (1-based) of model request ``step`` is being sent."""

    step: int
    attempt: int


class ResponseEvent(LoopEvent, frozen=True, kw_only=True):
    """``event``, returned by the parser reading attempt ``attempt`` of model request ``step``."""

    step: int
    attempt: int
    event: Event


class RetryScheduled(LoopEvent, frozen=True, kw_only=True):
    """Attempt ``attempt`` of request ``step`` failed for ``reason`` (HTTP ``status``, or None); attempt
    ``attempt + 1`` is sent after ``delay`` seconds."""

    step: int
    attempt: int
    delay: float
    reason: str
    status: int | None = None


class CallAnswered(LoopEvent, frozen=True, kw_only=True):
    """A call of the turn of request ``step`` was answered (run, refused or not run: ``result.kind`` says)."""

    step: int
    result: ToolResult


class LoopFinished(LoopEvent, frozen=True, kw_only=True):
    """The conversation turn ended: ``result`` is what ``run`` returns."""

    result: LoopResult
