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
    the call's ``name`` and ``call_id``, how it was answered (``result_kind``: ``ok`` and ``result_unusable``
    took effect; ``outcome_unknown``, ``handler_timeout``, ``handler_failed`` and ``tool_error`` may have) and the
    model turn that asked for it (``step``, from 0)."""

    name: str | None
    call_id: str | None
    outcome: WriteOutcome
    result_kind: str
    step: int


#: the kinds a write is answered with when its handler never started: nothing of it can have taken effect
_NOTHING_RAN = frozenset({ResultKind.INVALID_ARGUMENTS, ResultKind.UNKNOWN_TOOL, ResultKind.DENIED,
                          ResultKind.APPROVAL_REQUIRED, ResultKind.NOT_RUN})
#: the handler returned (or its stored result was replayed): the effect happened
_DONE = frozenset({ResultKind.OK, ResultKind.RESULT_UNUSABLE})


def write_records(results: Iterable[ToolResult], registry: Registry, step: int) -> tuple[WriteRecord, ...]:
    """The writes among ``results`` (answers to the calls of model turn ``step``) that took effect or may have.
    The one rule the fallback and ``LoopResult.writes`` share: a write tool's call answered ``ok`` or
    ``result_unusable`` (the handler returned; a result replayed from the ledger counts too, its effect happened
    earlier) took effect; any other answer except those that run nothing (``invalid_arguments``,
    ``unknown_tool``, ``denied``, ``approval_required``, ``not_run``) may have: ``outcome_unknown``,
    ``handler_timeout``, and a handler that started and raised (``handler_failed``, ``tool_error``: it may have
    changed something before it raised). Any ``outcome_unknown`` counts, whatever its tool."""
    records = []
    for r in results:
        tool = registry.get(r.name) if r.name is not None else None
        is_write = tool is not None and tool.effect == "write"
        if r.kind is ResultKind.OUTCOME_UNKNOWN:
            outcome = WriteOutcome.OUTCOME_UNKNOWN
        elif not is_write or r.kind in _NOTHING_RAN:
            continue
        else:
            outcome = WriteOutcome.OK if r.kind in _DONE else WriteOutcome.OUTCOME_UNKNOWN
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
