"""What a conversation turn of the harness loop gives back: ``LoopResult``, with a ``CallOutcome`` per call and a
``StepRecord`` per model turn."""

from __future__ import annotations

from typing import Any

import msgspec

from ..registry import ToolResult
from ..types import Turn
from .fallback import FallbackReason

__all__ = ["LoopResult", "CallOutcome", "StepRecord"]


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
