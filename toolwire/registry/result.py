"""``ToolResult``: the answer to one call, and the kinds of answers."""

from __future__ import annotations

import enum
from typing import Any

import msgspec

from ..types import Transition
from .approval import ApprovalRequest
from .content import Part

__all__ = ["ResultKind", "ToolResult"]


class ResultKind(str, enum.Enum):
    """What happened to a call. Only ``ok`` means the handler ran and returned."""

    OK = "ok"
    INVALID_ARGUMENTS = "invalid_arguments"  # arguments did not parse or failed the schema; nothing ran
    UNKNOWN_TOOL = "unknown_tool"  # no tool of that exact name; nothing ran, nothing written
    DENIED = "denied"  # the policy refused it; nothing ran
    APPROVAL_REQUIRED = "approval_required"  # deferred until a verified approval; nothing ran
    HANDLER_FAILED = "handler_failed"  # the handler raised ("could not look"), after any read retries
    HANDLER_TIMEOUT = "handler_timeout"  # a read's handler did not return in time
    OUTCOME_UNKNOWN = "outcome_unknown"  # a write started earlier (or timed out) without a recorded completion
    RESULT_UNUSABLE = "result_unusable"  # the handler returned, but its value cannot be sent as JSON or text
    TOOL_ERROR = "tool_error"  # the handler raised ToolError: the tool ran and answers with an error to read
    NOT_RUN = "not_run"  # the turn did not finish cleanly, or the call was truncated/errored; nothing ran

    def __str__(self) -> str:  # pragma: no cover - cosmetic
        return self.value


class ToolResult(msgspec.Struct, kw_only=True):
    """One call's answer, under the call's own ids.

    ``content`` is a string or any JSON-able value (what the handler returned, or a message for the model);
    ``is_error`` is True for every kind but ``ok``; ``approval`` carries the signed request when ``kind`` is
    ``approval_required``.

    ``parts`` is set when the handler answered with ``Content`` (returned, or raised in a ``ToolError``): its
    parts in order, typed (``TextPart``, ``ImagePart`` …), after checking and capping. ``content`` is then the
    JSON form of the same answer: the ``structured`` object when the handler gave one, else the text of the parts
    with every part that is not text described in words. The encoders send the parts each provider accepts; the
    ledgers store and return them typed.
    """

    call_id: str | None
    local_id: str
    name: str | None
    content: Any
    is_error: bool
    kind: ResultKind
    approval: ApprovalRequest | None = None
    parts: list[Part] | None = None
    #: the call's whole path through the state machine, parsing and dispatch (``answered`` last when it ran
    #: or was rejected; a truncated or errored call's path ends there)
    history: list[Transition] = msgspec.field(default_factory=list)

    @property
    def states(self) -> list[str]:
        """The states the call went through, in order (``["announced", "accumulating", "complete", …]``)."""
        if not self.history:
            return []
        return [self.history[0].src.value] + [t.dst.value for t in self.history if t.dst is not t.src]
