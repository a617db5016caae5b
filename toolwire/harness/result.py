"""What a conversation turn of the harness loop gives back: ``LoopResult``, with a ``CallOutcome`` per call, a
``StepRecord`` per model turn and a ``WriteRecord`` per write that took effect or may have."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from ..registry import Registry, ResultKind, ToolResult
from ..types import Turn
from .fallback import FallbackReason, WriteOutcome

__all__ = ["LoopResult", "CallOutcome", "StepRecord", "WriteRecord", "WriteOutcome"]


class CallOutcome(msgspec.Struct, kw_only=True):
    """One call of the conversation: its path through the state machine and how it was answered."""

    name: str | None
    call_id: str | None
    states: list[str]
    result_kind: str


class StepRecord(msgspec.Struct, kw_only=True):
    """One model turn of the conversation and the results sent back for it. ``turn_id`` is the turn identity its
    calls were dispatched under: ``"req:"`` and a nonce minted when the model request was sent, unique per request
    (empty in a result recorded before it was kept). Dispatching ``turn`` again with this ``turn_id`` (and the
    conversation id) finds its writes in the ledger: nothing runs twice."""

    turn: Turn
    results: list[ToolResult]
    attempts: int
    turn_id: str = ""


class WriteRecord(msgspec.Struct, kw_only=True, frozen=True):
    """A write of the run whose effect happened (``outcome`` ``ok``) or may have (``outcome_unknown``), with
    the call's ``name`` and ``call_id``, how it was answered (``result_kind``: ``ok``, ``result_unusable``,
    ``outcome_unknown``) and the model turn that asked for it (``step``, from 0)."""

    name: str | None
    call_id: str | None
    outcome: WriteOutcome
    result_kind: str
    step: int


#: how a write was answered -> what became of its effect; every other kind ran nothing, or ran and said it did
#: nothing (``tool_error``, ``handler_failed``: the handler's own report)
_WRITE_OUTCOMES = {ResultKind.OK: WriteOutcome.OK, ResultKind.RESULT_UNUSABLE: WriteOutcome.OK,
                   ResultKind.OUTCOME_UNKNOWN: WriteOutcome.OUTCOME_UNKNOWN}


def write_records(results: Iterable[ToolResult], registry: Registry, step: int) -> tuple[WriteRecord, ...]:
    """The writes among ``results`` (answers to the calls of model turn ``step``) that took effect or may have:
    a result of a write tool of ``registry`` answered ``ok`` or ``result_unusable`` (the handler returned), and
    any ``outcome_unknown``. A result replayed from the ledger counts too: its effect happened, earlier."""
    records = []
    for r in results:
        outcome = _WRITE_OUTCOMES.get(r.kind)
        if outcome is None:
            continue
        tool = registry.get(r.name)
        if outcome is WriteOutcome.OK and (tool is None or tool.effect != "write"):
            continue
        records.append(WriteRecord(name=r.name, call_id=r.call_id, outcome=outcome, result_kind=r.kind.value,
                                   step=step))
    return tuple(records)


def writes_outcome(writes: Iterable[WriteRecord]) -> WriteOutcome | None:
    """What the fallback says of ``writes``: None when there are none, ``outcome_unknown`` when one may have
    taken effect, else ``ok``."""
    outcomes = {w.outcome for w in writes}
    if not outcomes:
        return None
    return WriteOutcome.OUTCOME_UNKNOWN if WriteOutcome.OUTCOME_UNKNOWN in outcomes else WriteOutcome.OK


class LoopResult(msgspec.Struct, kw_only=True):
    """What the user gets (``answer``: the model's, or the fallback message when ``fallback``) and what
    happened on the way (``steps``, ``calls``, ``writes``); ``reason`` says why a fallback was given. A fallback
    after a write that took effect (or may have) says so instead of asking to try again."""

    conversation_id: str
    answer: str
    fallback: bool
    reason: FallbackReason | None = None
    calls: list[CallOutcome] = msgspec.field(default_factory=list)
    steps: list[StepRecord] = msgspec.field(default_factory=list)
    history: list[Any] = msgspec.field(default_factory=list)
    #: the writes of this run that took effect or may have, in the order they were answered
    writes: tuple[WriteRecord, ...] = ()
    #: Gemini Interactions: the last interaction's id, which continues the conversation (it lives server-side)
    previous_id: str | None = None
