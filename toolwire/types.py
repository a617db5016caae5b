"""Canonical, provider-agnostic data: the calls of a turn, the turn itself, and the events a parser returns.

Every dialect is translated into these types by its codec; nothing here knows a provider field name.
"""

from __future__ import annotations

import enum
from typing import Any, TypeAlias

import msgspec

__all__ = [
    "Message",
    "AssistantMessage",
    "CallState",
    "CallKind",
    "FinishReason",
    "ProblemCode",
    "Problem",
    "StreamError",
    "TokenUsage",
    "Transition",
    "ToolCall",
    "ServerCall",
    "Choice",
    "Turn",
    "Event",
    "CallAnnounced",
    "ArgumentsReceived",
    "CallCompleted",
    "CallTruncated",
    "CallErrored",
    "ServerCallSeen",
    "TextReceived",
    "TurnFinished",
    "StreamFailed",
]


#: One provider-native JSON object of a conversation: a Chat or Anthropic message, a Gemini content, a Responses
#: input item, an Interactions step. Histories are lists of them (``history_messages``, ``encode_results``).
Message: TypeAlias = dict[str, Any]

#: What ``Turn.assistant_message`` / ``Choice.assistant_message`` hold: one ``Message`` (Chat and Anthropic: the
#: assistant message; Gemini: the model content; Interactions: ``{"id": …, "steps": [...]}``), or a list of them
#: for Responses (the output items, reasoning included, in order).
AssistantMessage: TypeAlias = Message | list[Message]


class CallState(str, enum.Enum):
    """The states of one call (see ``toolwire.statemachine.table`` for the transitions)."""

    ANNOUNCED = "announced"
    ACCUMULATING = "accumulating"
    COMPLETE = "complete"
    TRUNCATED = "truncated"
    ERRORED = "errored"
    REJECTED = "rejected"
    DISPATCHED = "dispatched"
    ANSWERED = "answered"

    def __str__(self) -> str:  # pragma: no cover - cosmetic
        return self.value


class CallKind(str, enum.Enum):
    """What the application executes: a JSON-argument function, a free-text custom tool, or a provider-defined
    tool that runs on the application's side (Responses ``local_shell_call`` and friends)."""

    FUNCTION = "function"
    CUSTOM = "custom"
    BUILTIN = "builtin"


class FinishReason(str, enum.Enum):
    """Canonical reason a turn (or one choice of it) ended."""

    TOOL_CALLS = "tool_calls"
    STOP = "stop"
    LENGTH = "length"
    CONTENT_FILTER = "content_filter"
    PAUSE = "pause"
    ERROR = "error"
    OTHER = "other"


#: Finish reasons after which the calls of a turn may run.
CLEAN_FINISHES = frozenset({FinishReason.TOOL_CALLS, FinishReason.STOP, FinishReason.PAUSE})


class ProblemCode(str, enum.Enum):
    """Why a call cannot run as it is."""

    INVALID_JSON = "invalid_json"  # arguments ended cleanly but do not parse
    NOT_AN_OBJECT = "not_an_object"  # arguments parse but are not a JSON object
    CUT_BY_LENGTH = "cut_by_length"  # the turn hit its token limit inside (or right at the end of) this call
    CUT_BY_FILTER = "cut_by_filter"  # a content filter / refusal ended the turn
    STREAM_ERROR = "stream_error"  # the provider reported an error while this call was open
    STREAM_CUT = "stream_cut"  # the stream ended before the call's terminator
    PROTOCOL_ERROR = "protocol_error"  # the provider's events made no sense for this call
    CONFLICTING_ID = "conflicting_id"
    CONFLICTING_NAME = "conflicting_name"
    MISSING_NAME = "missing_name"
    FINAL_MISMATCH = "final_mismatch"  # the provider's authoritative final value differs from the deltas
    FRAGMENT_AFTER_END = "fragment_after_end"
    LIMIT_EXCEEDED = "limit_exceeded"  # the response went past one of toolwire's limits (see toolwire.limits)


class Problem(msgspec.Struct, frozen=True, gc=False):
    """A typed reason attached to a call: ``code`` is stable, ``message`` is for people."""

    code: ProblemCode
    message: str


class StreamError(msgspec.Struct, frozen=True):
    """A turn-level failure: an error the provider sent, or input toolwire could not understand.

    ``type`` is the provider's error type when it sent one (``overloaded_error``, ``server_error`` …) or one of
    toolwire's own (``protocol_error``, ``stream_cut``, ``framing_error``, ``spliced_stream``).
    """

    type: str
    message: str
    code: str | None = None
    status: int | None = None
    raw: Any = None


class TokenUsage(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """The tokens a response used, as its provider reported them, in one meaning for every dialect (the
    OpenTelemetry GenAI conventions'): ``input_tokens`` counts every input token, cached ones included;
    ``output_tokens`` every generated token, reasoning (thinking) included; ``cache_read_input_tokens`` and
    ``cache_creation_input_tokens`` are the parts of the input read from or written to the provider's cache;
    ``reasoning_output_tokens`` the part of the output spent on reasoning. A count the provider did not report is
    None. ``Turn.usage`` keeps the provider's own object."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    reasoning_output_tokens: int | None = None


class Transition(msgspec.Struct, frozen=True, gc=False):
    """One step of a call's path through the state machine: ``position`` is the number (1-based) of the
    provider payload that caused it, or None outside a stream."""

    trigger: str
    src: CallState
    dst: CallState
    position: int | None = None


class ToolCall(msgspec.Struct, kw_only=True, frozen=True):
    """One call, canonical.

    ``call_id`` is the provider's id (None when it sent none: some Gemini models); ``local_id`` is always present,
    unique in the turn and stable across runs for the same input. ``args`` is the parsed argument object, or None
    when the arguments did not parse (``problem`` says why); ``raw_arguments`` is exactly the text that arrived.
    ``provider_meta`` holds opaque data that must round-trip (signatures, item ids, callers).
    """

    provider: str
    local_id: str
    call_id: str | None
    index: int
    name: str | None
    kind: CallKind = CallKind.FUNCTION
    args: dict[str, Any] | None = None
    raw_arguments: str = ""
    state: CallState = CallState.ANNOUNCED
    problem: Problem | None = None
    choice: int = 0
    provider_meta: dict[str, Any] = msgspec.field(default_factory=dict)
    history: list[Transition] = msgspec.field(default_factory=list)
    announced_at: int | None = None

    @property
    def runnable(self) -> bool:
        """True when the call itself is whole and well-formed (the turn may still forbid running it)."""
        return (self.state is CallState.COMPLETE and self.problem is None
                and (self.args is not None or self.kind is CallKind.CUSTOM))


class ServerCall(msgspec.Struct, kw_only=True):
    """A tool use the provider executes itself (never dispatchable); kept for inspection and replay."""

    provider: str
    call_id: str | None
    name: str | None
    type: str
    index: int
    input: Any = None
    choice: int = 0


class Choice(msgspec.Struct, kw_only=True):
    """Per-choice summary when a provider returns several choices/candidates (``n > 1``).

    ``assistant_message`` is this choice's provider-native message (an ``AssistantMessage``): the history
    continues with the choice whose calls were run, so each choice needs its own replay
    (``Turn.assistant_message`` is choice 0's). ``finish_reasons`` / ``raw_finish_reasons`` are every end the
    choice reported, as for ``Turn``; ``finish_reason`` is the worst of them.
    """

    index: int
    finish_reason: FinishReason | None = None
    raw_finish_reason: str | None = None
    text: str = ""
    assistant_message: AssistantMessage | None = None
    finish_reasons: tuple[FinishReason, ...] = ()
    raw_finish_reasons: tuple[str | None, ...] = ()


class Turn(msgspec.Struct, kw_only=True, weakref=True):
    """Everything one model response said: its calls in order, text, how it ended, and what to replay.

    ``assistant_message`` is the provider-native message to put back into the history verbatim (thinking
    blocks and signatures included): one ``Message``, or for Responses the list of output items; None in
    streaming mode (``keep_calls=False``). ``history_messages`` turns it into the list of messages to append
    for every dialect. ``finished_cleanly`` is True only when the turn ended with a clean finish
    reason and no error; a turn that did not finish cleanly is never dispatched by default. A response may
    report more than one end (a finish repeated with another word, a status a non-terminal event states):
    ``finish_reasons`` (canonical) and ``raw_finish_reasons`` (the provider's words, None where it gave none)
    list every one, each once, in the order they arrived, and ``finish_reason`` / ``raw_finish_reason`` are the
    worst of them (error, then content filter, other, length, pause, then the clean ones; a tie goes to the
    later), so one unclean end anywhere makes the turn unclean. ``usage`` is the
    provider's usage object as it arrived (the last one, or for Anthropic the usage of the message's start updated
    by its final delta's); ``token_usage`` is the same as a ``TokenUsage``, or None when the provider reported
    none. ``request_id`` is the provider's id of the HTTP response, read from its headers by the harness
    transports for a dialect whose body carries no response id (``HTTP.response_id``); None otherwise.
    """

    provider: str
    calls: list[ToolCall] = msgspec.field(default_factory=list)
    server_calls: list[ServerCall] = msgspec.field(default_factory=list)
    text: str = ""
    finish_reason: FinishReason | None = None
    raw_finish_reason: str | None = None
    finish_reasons: tuple[FinishReason, ...] = ()
    raw_finish_reasons: tuple[str | None, ...] = ()
    error: StreamError | None = None
    response_id: str | None = None
    model: str | None = None
    usage: Any = None
    token_usage: TokenUsage | None = None
    choices: list[Choice] = msgspec.field(default_factory=list)
    assistant_message: AssistantMessage | None = None
    request_id: str | None = None
    #: False for a snapshot (``StreamParser.turn`` before ``close()``): such a turn never counts as finished
    ended: bool = True

    @property
    def finished_cleanly(self) -> bool:
        """True when the response ended and its first choice (the only one, usually) finished cleanly."""
        return self.choice_finished_cleanly(0)

    def choice_finished_cleanly(self, choice: int = 0) -> bool:
        """True when the response ended without an error and choice ``choice`` finished with a clean reason."""
        if self.error is not None or not self.ended:
            return False
        if not self.choices:
            return choice == 0 and self.finish_reason in CLEAN_FINISHES
        for c in self.choices:
            if c.index == choice:
                return c.finish_reason in CLEAN_FINISHES
        return False

    def choice_calls(self, choice: int = 0) -> list[ToolCall]:
        """The calls of choice ``choice``, in order."""
        return [c for c in self.calls if c.choice == choice]

    @property
    def runnable_calls(self) -> list[ToolCall]:
        """The calls that may run: none unless the turn finished cleanly, then the whole, well-formed calls of
        its first choice (``Dispatcher.run(..., choice=N)`` picks another)."""
        if not self.finished_cleanly:
            return []
        return [c for c in self.calls if c.choice == 0 and c.runnable]


# ---- events returned by StreamParser.feed()/close(): past-tense facts ------------------------------------


class Event(msgspec.Struct, frozen=True, kw_only=True):
    """Base class of the events a ``StreamParser`` returns."""


class CallAnnounced(Event, frozen=True, kw_only=True):
    local_id: str
    call_id: str | None
    name: str | None
    kind: CallKind
    index: int
    choice: int = 0


class ArgumentsReceived(Event, frozen=True, kw_only=True):
    """Argument text received for a call since the previous event about it (fragments coalesced per feed)."""

    local_id: str
    call_id: str | None
    text: str


class CallCompleted(Event, frozen=True, kw_only=True):
    call: ToolCall


class CallTruncated(Event, frozen=True, kw_only=True):
    call: ToolCall


class CallErrored(Event, frozen=True, kw_only=True):
    call: ToolCall


class ServerCallSeen(Event, frozen=True, kw_only=True):
    server_call: ServerCall


class TextReceived(Event, frozen=True, kw_only=True):
    text: str
    choice: int = 0


class TurnFinished(Event, frozen=True, kw_only=True):
    turn: Turn


class StreamFailed(Event, frozen=True, kw_only=True):
    error: StreamError
