"""The stream assembler: feeds canonical call events into call FSMs, applies end-of-stream rules, builds a Turn.

Codecs (one per dialect) translate wire events into calls on this object: ``open_call``, ``CallRecord.append``,
``complete``, ``finish_choice``, ``stream_error`` … The assembler knows no provider field names. Its rules:

* A call is completed only by ``complete()``, which a codec calls on its dialect's terminator; the arguments
  are parsed then, once. Arguments that do not parse leave the call ``complete`` with ``args`` None and a typed
  problem (it will be rejected, never run).
* ``open_call(initial=)``: arguments given with a call's start are its whole value, unless they are a
  placeholder (``{}`` or nothing), which is not kept; fragments that follow replace whatever came at the start.
  A codec appends each non-empty fragment to ``CallRecord.fragments``, the fast path.
* ``end_choice()`` is the dialect's end of a choice: with ``finish_terminates_calls`` (a dialect whose finish is
  its calls' terminator, as Chat's) a clean finish completes the calls still open; with
  ``length_cuts_last_item`` a token limit also truncates the call of the choice's last item (``item()``) when
  it had already closed; then ``finish_choice()``, and a clean end while a call is still open
  (``fail_unterminated``) is a protocol error on the whole turn.
* ``finish_choice()`` with a length or content-filter reason truncates the open calls of that choice; an error
  truncates every open call and puts the stream in a terminal state (later payloads are ignored).
* A choice may report several ends (a finish repeated with another word, an end a non-terminal event states:
  ``saw_end()``): it keeps every one, each once, and its finish is the worst of them (``_SEVERITY``), so one
  unclean end anywhere makes the choice unclean whatever clean end comes before or after it. The end rules
  above apply to that worst end.
* ``end_of_stream()`` truncates every call still open and records ``stream_cut`` when no terminal event came.
* ``stream_ended()`` records the stream's terminator (Chat ``[DONE]``, Anthropic's message stop event …): a payload
  after it is never read as the dialect's data (``Codec.feed_payloads`` makes it a protocol error).
* ``admit_choice()``: a codec asks it before reading a choice it has not seen; past ``max_choices`` the turn
  records ``limit_exceeded`` and the codec reads no more of the payload.

Costs: nothing here walks every open call or every choice on each event. ``take_events`` (once per ``feed()``)
reports the fragments of the calls that got some since the last report (``touched``, filled by the calls
themselves: see ``toolwire.statemachine.call``; with at most ``WALK_OPEN`` calls open it looks at each of them
instead, which costs less than a guarded append per call and feed), in the calls' order, and the text of the choices that got some
(their first text since the last report lists them); a choice's end looks at that choice's open calls only. So
the cost of an event does not grow with the calls or choices already open.
"""

from __future__ import annotations

import operator
from typing import Any

import msgspec

from .. import _log
from ..errors import InvalidTransition
from ..types import (
    ArgumentsReceived,
    CallAnnounced,
    CallCompleted,
    CallErrored,
    CallKind,
    CallState,
    CallTruncated,
    Choice,
    Event,
    FinishReason,
    ProblemCode,
    ServerCall,
    ServerCallSeen,
    StreamError,
    StreamFailed,
    TextReceived,
    TokenUsage,
    ToolCall,
    Turn,
)
from ..limits import (
    _NOT_OPENERS,
    DEFAULT_MAX_ARGUMENT_CHARS,
    DEFAULT_MAX_CALLS,
    DEFAULT_MAX_CHOICES,
    DEFAULT_MAX_DEPTH,
    json_depth_exceeds,
)
from .call import CallRecord
from .table import MACHINE

__all__ = ["Assembler"]

_new_record = CallRecord.new  # (every argument in order: see there)

_json_decode = msgspec.json.decode
# enum members read once (a member read through its class costs ~60 ns on CPython 3.11, more than the test itself)
_ACC = CallState.ACCUMULATING
_ANN = CallState.ANNOUNCED
_COMPLETE = CallState.COMPLETE
_TRUNCATED = CallState.TRUNCATED
_OPEN = (CallState.ANNOUNCED, CallState.ACCUMULATING)
_CUSTOM = CallKind.CUSTOM
_LENGTH = FinishReason.LENGTH
_FILTER = FinishReason.CONTENT_FILTER
_ABNORMAL = (FinishReason.ERROR, FinishReason.OTHER)
#: arguments given with a call's start that stand for "nothing yet": not kept as the call's value
_PLACEHOLDERS = ("", "{}")


def _split_json_values(text: str) -> list[str] | None:
    """Split ``text`` into consecutive top-level JSON objects; None if it is not such a sequence."""
    values: list[str] = []
    depth = 0
    in_str = False
    esc = False
    start = -1
    for i, ch in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch in "{[":
            if depth == 0:
                if ch != "{":
                    return None
                start = i
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth < 0:
                return None
            if depth == 0:
                values.append(text[start:i + 1])
        elif depth == 0 and not ch.isspace():
            return None
    if depth != 0 or in_str:
        return None
    return values


def recover_resent_arguments(frags: list[str]) -> tuple[str, str] | None:
    """Recognise a server that resent the arguments instead of appending (failure mode 2 in docs/failure-modes.md).

    Returns ``(arguments, how)`` when every non-empty fragment starts with the previous one (cumulative resend:
    the last fragment is the whole value) or the fragments are whole JSON objects each contained in the last
    (``{}`` then the full object). Returns None otherwise. Only called when the plain concatenation is not JSON.
    """
    parts = [f for f in frags if f.strip()]
    if len(parts) >= 2 and all(parts[i + 1].startswith(parts[i]) for i in range(len(parts) - 1)):
        try:
            _json_decode(parts[-1])
        except msgspec.DecodeError:
            return None
        return parts[-1], "cumulative"
    values = _split_json_values("".join(frags))
    if values and len(values) >= 2:
        try:
            objs = [_json_decode(v) for v in values]
        except msgspec.DecodeError:
            return None
        last = objs[-1]
        if all(isinstance(o, dict) for o in objs) and all(
            all(k in last and last[k] == v for k, v in o.items()) for o in objs[:-1]
        ):
            return values[-1], "duplicate_objects"
    return None


_ENDED_CLEANLY = (FinishReason.TOOL_CALLS, FinishReason.STOP)
_TOOL_CALLS, _STOP = _ENDED_CLEANLY

#: how bad an end is: of the ends a choice reports, the worst is its finish (a tie goes to the later one). The
#: clean ends are 0; an error or a filter says the content itself is not to be trusted, an unknown word may be
#: anything, a token limit cut what was said.
_SEVERITY = {FinishReason.TOOL_CALLS: 0, FinishReason.STOP: 0, FinishReason.PAUSE: 1, FinishReason.LENGTH: 2,
             FinishReason.OTHER: 3, FinishReason.CONTENT_FILTER: 4, FinishReason.ERROR: 5}

#: the different ends a choice lists before it lists only reasons it has not listed yet
_MAX_ENDS = 16


#: up to this many open calls, ``take_events`` looks at each (cheaper than a guarded append per call per feed)
WALK_OPEN = 16

_seq = operator.attrgetter("seq")  # a call's number (the order its arguments are reported in)
_rank = operator.attrgetter("rank")  # a choice's (the order its text is reported in)


class _ChoiceState:
    __slots__ = ("text", "emitted", "finish", "raw_finish", "ends", "ended", "calls", "index", "rank")

    def __init__(self, index: int = 0, rank: int = 0) -> None:
        self.index = index
        self.rank = rank  # the order the choice appeared in (its text is reported in that order)
        self.text: list[str] = []
        self.emitted = 0
        self.finish: FinishReason | None = None  # the worst end seen
        self.raw_finish: str | None = None
        self.ends: list[tuple[FinishReason, str | None]] = []  # every end seen, each once, in order
        self.ended = False  # the choice's own end arrived (``finish_choice``)
        self.calls = 0  # client calls announced in this choice (server calls do not count)

    def saw(self, reason: FinishReason, raw: str | None) -> FinishReason:
        """Record an end; return the worst end seen. Past ``_MAX_ENDS`` different ends, only an end of a reason
        not listed yet is added (a stream repeating ever new words stays bounded; every reason is listed)."""
        end = (reason, raw)
        ends = self.ends
        if end not in ends and (len(ends) < _MAX_ENDS or all(r is not reason for r, _ in ends)):
            ends.append(end)
        finish = self.finish
        if finish is None or _SEVERITY[reason] >= _SEVERITY[finish]:
            finish = self.finish = reason
            self.raw_finish = raw
        return finish

    def canonical(self, reason: FinishReason | None) -> FinishReason | None:
        """The canonical finish reason, by one rule for every dialect: a choice that ended cleanly is
        ``tool_calls`` when it announced at least one client call (in any state) and ``stop`` otherwise,
        whatever word the provider used (``stop`` after tool calls, Gemini's ``STOP``, Anthropic's ``end_turn``
        around programmatic calls …); ``pause`` and the unclean reasons are kept as they are."""
        if reason in _ENDED_CLEANLY:
            return _TOOL_CALLS if self.calls else _STOP
        return reason

    @property
    def finish_reason(self) -> FinishReason | None:
        """The worst end seen, canonical (``canonical``)."""
        return self.canonical(self.finish)

    @property
    def finish_reasons(self) -> tuple[FinishReason, ...]:
        canonical = self.canonical
        return tuple(canonical(reason) for reason, _ in self.ends)  # type: ignore[misc]

    @property
    def raw_finish_reasons(self) -> tuple[str | None, ...]:
        return tuple(raw for _, raw in self.ends)


class Assembler:
    """Collects one turn's calls. Used by codecs; applications use ``StreamParser`` / ``parse``."""

    def __init__(self, provider: str, *, recover_resends: bool = False, keep_calls: bool = True,
                 finish_terminates_calls: bool = False, length_cuts_last_item: bool = False) -> None:
        self.provider = provider
        self.recover_resends = recover_resends
        #: the end of a choice is the terminator of its calls (``end_choice``)
        self.finish_terminates_calls = finish_terminates_calls
        #: a token limit also cuts the call of a choice's last item when it had closed (``end_choice``)
        self.length_cuts_last_item = length_cuts_last_item
        self._last: dict[int, tuple[int, CallRecord | None]] = {}  # per choice: its item of the highest index
        #: limits (see ``toolwire.limits``): over one, the turn records a ``limit_exceeded`` error
        self.max_depth = DEFAULT_MAX_DEPTH
        self.max_argument_chars = DEFAULT_MAX_ARGUMENT_CHARS
        self.max_calls = DEFAULT_MAX_CALLS
        self.max_choices = DEFAULT_MAX_CHOICES
        #: False: a call is forgotten once its end event was emitted (memory bounded by the open calls);
        #: the Turn then holds only calls still open at close, and no assistant message
        self.keep_calls = keep_calls
        self.records: list[CallRecord] = []
        self._open: dict[int, CallRecord] = {}  # id(rec) -> rec, for the calls still open, in order
        self._open_in: dict[int, dict[int, CallRecord]] = {}  # the same, per choice
        #: the calls given fragments since the last ``take_events`` (each adds itself: see ``CallRecord``)
        self.touched: list[CallRecord] = []
        self._guarding = False  # more than WALK_OPEN calls were open at the last report: they are guarded
        self._texts: list[_ChoiceState] = []  # the choices given text since the last ``take_events``
        self._ordinal = 0
        self.events: list[Event] = []
        self.choices: dict[int, _ChoiceState] = {}
        self.error: StreamError | None = None
        self.failed = False  # terminal error state: later payloads are ignored
        self.finished = False  # the dialect's end-of-turn event arrived (set at close, ``Codec.ended``)
        self.ended_by: str | None = None  # the stream's terminator, once it arrived: nothing may follow it
        self.response_id: str | None = None
        self.model: str | None = None
        self.usage: Any = None
        self.position = 0  # number of payloads seen
        self.understood = 0  # payloads recognised as this dialect's
        self.closing = False  # payloads now come from the input's unterminated end
        self._count: dict[int, int] = {}

    # ---- calls ----------------------------------------------------------------------------------------
    def open_call(self, *, call_id: str | None, name: str | None, kind: CallKind = CallKind.FUNCTION,
                  choice: int = 0, server: bool = False, server_type: str | None = None,
                  meta: dict[str, Any] | None = None, initial: str | None = None) -> CallRecord:
        """Announce a new call and return its record. ``initial``: the argument text its start carried, its whole
        value unless it is a placeholder (``{}`` or nothing); fragments that follow replace it."""
        n = self._ordinal
        self._ordinal = n + 1
        counts = self._count
        index = counts.get(choice, 0)
        counts[choice] = index + 1
        rec = _new_record(self.provider, f"tw-{n}", call_id or None, name or None, kind, index, choice, server,
                          server_type, meta, None, self)
        rec.seq = n
        if initial is not None and initial.strip() not in _PLACEHOLDERS:
            rec.initial = initial
        if self.keep_calls:
            self.records.append(rec)
        if not server:
            st = self.choices.get(choice)
            (st if st is not None else self.choice(choice)).calls += 1
        key = id(rec)
        self._open[key] = rec
        in_choice = self._open_in.get(choice)
        if in_choice is None:
            in_choice = self._open_in[choice] = {}
        in_choice[key] = rec
        self.events.append(CallAnnounced(local_id=rec.local_id, call_id=rec.call_id, name=rec.name,
                                         kind=kind, index=index, choice=choice))
        if n >= self.max_calls:
            self.limit_exceeded(f"the response announced more than {self.max_calls} calls (max_calls)")
        return rec

    def limit_exceeded(self, message: str) -> None:
        """The response went past one of toolwire's limits: the turn fails, its open calls are truncated."""
        self.stream_error(StreamError(type="limit_exceeded", message=message), ProblemCode.LIMIT_EXCEEDED)

    def _over_limits(self, rec: CallRecord, raw: str) -> str | None:
        if len(raw) > self.max_argument_chars:
            return (f"the arguments of call {rec.call_id or rec.local_id} are longer than "
                    f"{self.max_argument_chars} characters (max_argument_chars)")
        if json_depth_exceeds(raw, self.max_depth):
            return (f"the arguments of call {rec.call_id or rec.local_id} nest deeper than {self.max_depth} levels "
                    "(max_depth)")
        return None

    def complete(self, rec: CallRecord, final: str | None = None, *, utf8: bytes | None = None) -> None:
        """The dialect's terminator for ``rec`` arrived: finish it and parse its arguments once.

        ``final`` is the provider's authoritative whole value (Responses ``.done``), compared with the deltas.
        ``utf8``: the bytes ``rec.initial`` was decoded from (``initial == utf8.decode()``), when the codec has
        them; used only while they are the whole arguments (no fragment, no ``final``). The depth test and the
        JSON decoding then read them instead of the text: the same results (an ASCII bracket is the same one byte
        in the text's UTF-8, and msgspec decodes a str through its UTF-8 form, so values and error positions are
        the same), without encoding non-ASCII text back to UTF-8 (a test compares the two paths).
        """
        if len(rec.frags) > rec.emitted:  # (``_flush_args``'s own test, without the call when nothing is new)
            self._flush_args(rec)
        rec.finish()
        raw = rec.text()
        if final is not None:
            rec.final = final
            if rec.frags and raw != final:
                rec.raw = raw
                rec.fail(ProblemCode.FINAL_MISMATCH,
                         f"the provider's final arguments ({len(final)} chars) differ from the streamed ones "
                         f"({len(raw)} chars)")
                self._ended(rec)
                return
            raw = final
        rec.raw = raw
        if utf8 is None or final is not None or rec.frags:
            src: str | bytes = raw
            openers = raw.count
        else:
            src = utf8
            openers = None
        if len(raw) <= self.max_argument_chars and (
                rec.kind is _CUSTOM  # free text: only its length is limited
                # json_depth_exceeds' own first test (on bytes: one pass, as json_depth_exceeds makes it)
                or (openers("[") + openers("{") if openers is not None
                    else len(src.translate(None, _NOT_OPENERS))) <= self.max_depth):
            over = None
        else:
            over = self._over_limits(rec, raw)
        if over is not None:
            rec.args = None
            rec.truncate(ProblemCode.LIMIT_EXCEEDED, over)
            self._ended(rec)
            self.limit_exceeded(over)
            return
        self._parse(rec, src)
        self._ended(rec)

    def terminate(self, rec: CallRecord | None) -> None:
        """The terminator of an indexed block or step arrived (an Anthropic block's or an Interactions step's
        stop event): complete ``rec`` if it is still open. Streamed fragments replace the placeholder value
        given at the start (``input: {}``, ``arguments: {}``); a client call still without a name fails."""
        if rec is None or not rec.is_open:
            return
        if rec.frags and rec.initial is not None:
            rec.initial = None
        if rec.name is None and not rec.server:
            self.fail(rec, ProblemCode.MISSING_NAME, "the call ended without a tool name")
        else:
            self.complete(rec)

    def _parse(self, rec: CallRecord, src: str | bytes | None = None) -> None:
        """Parse ``rec.raw`` (``src``: the same text, or its UTF-8 bytes; see ``complete``)."""
        if rec.kind is _CUSTOM:
            rec.args = None
            return
        raw = rec.raw
        if not raw.strip():
            rec.args = {}  # no-argument tools stream nothing (Anthropic: one empty fragment only)
            return
        try:
            value = _json_decode(raw if src is None else src)
        except msgspec.DecodeError as exc:
            recovered = recover_resent_arguments(rec.frags) if self.recover_resends else None
            if recovered is None:
                rec.args = None
                rec.problem = _problem(ProblemCode.INVALID_JSON, f"arguments are not valid JSON: {exc}")
                return
            raw, how = recovered
            rec.meta["reassembled"] = how
            rec.raw = raw
            value = _json_decode(raw)
        if isinstance(value, dict):
            rec.args = value
        else:
            rec.args = None
            rec.problem = _problem(ProblemCode.NOT_AN_OBJECT,
                                   f"arguments are a JSON {type(value).__name__}, not an object")

    def truncate(self, rec: CallRecord, code: ProblemCode, message: str) -> None:
        self._flush_args(rec)
        if rec.is_open:
            rec.raw = rec.text()
        rec.truncate(code, message)
        if rec.kind is not _CUSTOM:
            rec.args = None
        self._ended(rec)

    def fail(self, rec: CallRecord, code: ProblemCode, message: str) -> None:
        self._flush_args(rec)
        if rec.is_open:
            rec.raw = rec.text()
        rec.fail(code, message)
        rec.args = None
        self._ended(rec)

    def append_or_fail(self, rec: CallRecord, fragment: str) -> None:
        """``rec.append`` for codecs: a fragment after the terminator fails the call instead of raising."""
        try:
            rec.append(fragment)
        except InvalidTransition:
            if rec.state is CallState.COMPLETE:
                self.fail(rec, ProblemCode.FRAGMENT_AFTER_END, "argument fragment received after the call ended")
            self.protocol_error(f"argument fragment for call {rec.call_id or rec.local_id} in state "
                                f"{rec.state.value}")

    def open_records(self, choice: int | None = None) -> list[CallRecord]:
        """The calls still open (of ``choice``, when given: only that choice's are looked at), in order."""
        if not self._open:  # the usual case at a choice's end and at close: every call already ended
            return []
        if choice is None:
            return [r for r in self._open.values() if r.is_open]
        in_choice = self._open_in.get(choice)
        return [r for r in in_choice.values() if r.is_open] if in_choice else []

    def truncate_open(self, code: ProblemCode, message: str, choice: int | None = None) -> None:
        for rec in self.open_records(choice):
            self.truncate(rec, code, message)

    def fail_open(self, code: ProblemCode, message: str) -> None:
        for rec in self.open_records():
            self.fail(rec, code, message)

    def _ended(self, rec: CallRecord) -> None:
        if self._open.pop(id(rec), None) is not None:
            in_choice = self._open_in.get(rec.choice)
            if in_choice is not None:
                in_choice.pop(id(rec), None)
            frags = rec.frags
            if frags:  # ``raw`` holds the arguments from now on (a call given whole has none to let go)
                rec.emitted = len(frags)
                rec.frags = []
            if not self.keep_calls:
                rec.release()
        if rec.server:
            if rec.state is _COMPLETE:
                self.events.append(ServerCallSeen(server_call=self._server_call(rec)))
            return
        state = rec.state
        call = rec.to_call()
        if state is _COMPLETE:
            self.events.append(CallCompleted(call=call))
        elif state is _TRUNCATED:
            self.events.append(CallTruncated(call=call))
        else:
            self.events.append(CallErrored(call=call))

    def _flush_args(self, rec: CallRecord) -> None:
        n = len(rec.frags)
        if n > rec.emitted:
            text = "".join(rec.frags[rec.emitted:]) if n - rec.emitted > 1 else rec.frags[-1]
            rec.emitted = n
            rec.nchars += len(text)
            self.events.append(ArgumentsReceived(local_id=rec.local_id, call_id=rec.call_id, text=text))

    # ---- text, choices, the turn's end ---------------------------------------------------------------
    def choice(self, index: int) -> _ChoiceState:
        st = self.choices.get(index)
        if st is None:
            st = self.choices[index] = _ChoiceState(index, len(self.choices))
        return st

    def admit_choice(self, index: int) -> bool:
        """A codec is about to read choice ``index``: True when it is known or within ``max_choices`` (it is then
        known); otherwise the turn records ``limit_exceeded`` (nothing in it runs) and the codec reads no more."""
        if index in self.choices:
            return True
        if len(self.choices) >= self.max_choices:
            self.limit_exceeded(f"the response has more than {self.max_choices} choices (max_choices)")
            return False
        self.choice(index)
        return True

    def add_text(self, text: str, choice: int = 0) -> None:
        st = self.choices.get(choice)
        if st is None:
            st = self.choice(choice)
        parts = st.text
        if len(parts) == st.emitted:  # its first text since the last report
            self._texts.append(st)
        parts.append(text)

    def saw_end(self, choice: int, reason: FinishReason, raw: str | None) -> None:
        """An end of ``choice`` that a payload states without being the choice's end (an Anthropic
        message's delta, a lifecycle event's status …): recorded among its ends, where the worst one wins when
        the choice ends; nothing is cut now."""
        self.choice(choice).saw(reason, raw)

    def finish_choice(self, choice: int, reason: FinishReason, raw: str | None) -> None:
        """Record how ``choice`` ended and truncate what a non-clean finish cut. ``tool_calls`` and ``stop`` both
        mean "ended cleanly": which of the two the turn reports is decided by the calls (``_ChoiceState``). The
        rule applied is the worst end the choice saw, this one included (an end repeated later is recorded the
        same way)."""
        st = self.choice(choice)
        reason = st.saw(reason, raw)
        raw = st.raw_finish
        st.ended = True
        if reason is _LENGTH:
            self.truncate_open(ProblemCode.CUT_BY_LENGTH, f"the turn hit its token limit ({raw})", choice)
        elif reason is _FILTER:
            self.truncate_open(ProblemCode.CUT_BY_FILTER, f"the turn was stopped by a filter ({raw})", choice)
        elif reason in _ABNORMAL:
            self.truncate_open(ProblemCode.STREAM_ERROR, f"the turn ended abnormally ({raw})", choice)

    def item(self, index: int, rec: CallRecord | None, choice: int = 0) -> None:
        """Item ``index`` (a content block, a part, a step) of ``choice`` started; ``rec`` is the call it is, if
        any. The item with the highest index is the choice's last (see ``length_cuts_last_item``)."""
        last = self._last.get(choice)
        if last is None or index >= last[0]:
            self._last[choice] = (index, rec)

    def end_choice(self, choice: int, reason: FinishReason, raw: str | None, where: str) -> None:
        """The dialect's end of ``choice`` (``where`` names it for messages) arrived with ``reason``: the end rules
        of the module docstring, in order (a cut of the last item, the calls a clean finish terminates, the
        finish, then the calls a clean end left open). The rules follow the worst end the choice saw (this one
        included), so a clean end after an unclean one cuts what the unclean one would."""
        st = self.choice(choice)
        reason = st.saw(reason, raw)
        raw = st.raw_finish
        if reason is _LENGTH and self.length_cuts_last_item:
            last = self._last.get(choice)
            rec = last[1] if last is not None else None
            if rec is not None and rec.state is _COMPLETE:
                self.truncate(rec, ProblemCode.CUT_BY_LENGTH, f"the turn hit its token limit ({raw}) in this call")
        if self.finish_terminates_calls and reason in _ENDED_CLEANLY:
            for rec in self.open_records(choice):
                if rec.name is None:
                    self.fail(rec, ProblemCode.MISSING_NAME, "the call ended without a tool name")
                else:
                    self.complete(rec)
        self.finish_choice(choice, reason, raw)
        self.fail_unterminated(where, choice)

    def choices_ended(self) -> bool:
        """True when at least one choice appeared and every one has its finish (``end_choice``)."""
        for st in self.choices.values():
            if not st.ended:
                return False
        return bool(self.choices)

    def stream_error(self, error: StreamError, code: ProblemCode = ProblemCode.STREAM_ERROR) -> None:
        """The provider reported an error (or sent garbage): open calls end, later payloads are ignored."""
        if self.error is None:
            if _log.has_secrets(error.type, error.message):  # an in-stream error that echoes the API key
                error = msgspec.structs.replace(error, type=_log.scrub(error.type), message=_log.scrub(error.message))
            self.error = error
            self.events.append(StreamFailed(error=error))
            _log.emit(_log.WARNING, "stream.error", provider=self.provider, type=error.type,
                      message=error.message, position=self.position)
        self.failed = True
        if code is ProblemCode.PROTOCOL_ERROR:
            self.fail_open(code, error.message)
        else:
            self.truncate_open(code, error.message)

    def protocol_error(self, message: str, data: bytes | str | None = None) -> None:
        from ..errors import excerpt

        self.stream_error(StreamError(type="protocol_error", message=message, raw=excerpt(data) or None),
                          ProblemCode.PROTOCOL_ERROR)

    def fail_unterminated(self, end: str, choice: int | None = None) -> None:
        """The turn (or ``choice``) ended cleanly at ``end`` while calls were still open. Their terminators never
        came, so the provider's events contradict each other: a protocol error on the whole turn, which runs
        none of its calls (the open ones are errored), rather than a cut of those calls alone."""
        open_calls = self.open_records(choice)
        if open_calls:
            ids = ", ".join(r.call_id or r.local_id for r in open_calls)
            self.protocol_error(f"{end} arrived before the terminator of call {ids}")

    def stream_ended(self, terminator: str) -> None:
        """The stream's terminator arrived: any payload after it is a protocol error, never a call."""
        if self.ended_by is None:
            self.ended_by = terminator

    def end_of_stream(self) -> None:
        """The byte stream closed: every call still open is truncated; a missing end event is ``stream_cut``."""
        if not self.finished and self.error is None:
            self.stream_error(StreamError(type="stream_cut", message="the stream ended before the turn finished"),
                              ProblemCode.STREAM_CUT)
        self.truncate_open(ProblemCode.STREAM_CUT, "the stream ended before the call's terminator")

    # ---- events and the Turn -------------------------------------------------------------------------
    def take_events(self) -> list[Event]:
        """The events since the last call: the arguments of the calls given fragments since then (one event per
        call, in the calls' order) and the text of the choices given some, after the other events.

        With few calls open (``WALK_OPEN`` at most), they are all looked at, and their ``fragments`` stay the list
        (no guarded append per feed, the usual case); with more, only the calls in ``touched`` are, each pointed
        back at its guard so that its next fragment lists it again (the first such report looks at every open
        call once, to guard them). Either way the work is bounded by ``WALK_OPEN`` plus the calls given
        fragments."""
        opened = self._open
        touched = self.touched
        if touched:
            self.touched = []
        if len(opened) <= WALK_OPEN:
            self._guarding = False
            if opened:
                self._report(opened.values(), False)
        elif self._guarding:
            if touched:
                if len(touched) > 1:
                    touched.sort(key=_seq)
                self._report(touched, True)
        else:
            self._guarding = True
            self._report(list(opened.values()), True)
        texts = self._texts
        if texts:
            self._texts = []
            if len(texts) > 1:
                texts.sort(key=_rank)
            for st in texts:
                if len(st.text) > st.emitted:
                    text = "".join(st.text[st.emitted:])
                    st.emitted = len(st.text)
                    self.events.append(TextReceived(text=text, choice=st.index))
        events, self.events = self.events, []
        return events

    def _report(self, recs: Any, guard: bool) -> None:
        """Report the new fragments of ``recs`` (calls, in order; those no longer accumulating are passed over);
        ``guard``: point each accumulating call's ``fragments`` at its guard."""
        compact = not self.recover_resends
        over: CallRecord | None = None
        for rec in recs:
            if rec.state is not _ACC:
                continue  # announced, or ended since (its end reported its arguments)
            if guard:
                rec.fragments = rec._guard  # its next fragment adds it to ``touched`` again
            start = rec.emitted
            if len(rec.frags) > start:
                self._flush_args(rec)
                if compact and len(rec.frags) - start > 1:
                    # the fragments of this feed become one string: a few-byte fragment costs ~50 bytes as its
                    # own object. (Chat keeps its fragments: recovering a resend needs their boundaries.)
                    rec.frags[start:] = [self.events[-1].text]
                    rec.emitted = len(rec.frags)
                if rec.nchars > self.max_argument_chars and over is None:
                    over = rec
        if over is not None:
            self.limit_exceeded(f"the arguments of call {over.call_id or over.local_id} are longer than "
                                f"{self.max_argument_chars} characters (max_argument_chars)")

    def _server_call(self, rec: CallRecord) -> ServerCall:
        return ServerCall(provider=self.provider, call_id=rec.call_id, name=rec.name,
                          type=rec.server_type or "server_tool", index=rec.index,
                          input=rec.args if rec.args is not None else (rec.raw or None), choice=rec.choice)

    def build_turn(self, assistant_message: Any = None, *, ended: bool = True,
                   token_usage: TokenUsage | None = None) -> Turn:
        first = self.choices.get(0) or (next(iter(self.choices.values())) if self.choices else None)
        records = self.records if self.keep_calls else list(self._open.values())
        calls: list[ToolCall] = []
        server: list[ServerCall] = []
        for r in records:
            if r.server:
                server.append(self._server_call(r))
            else:
                calls.append(r.to_call())
        # listed whenever the turn's own finish reason does not say it all: several choices, or one that is not 0
        several = len(self.choices) > 1 or (self.choices and 0 not in self.choices)
        choices = [Choice(index=i, finish_reason=st.finish_reason, raw_finish_reason=st.raw_finish,
                          finish_reasons=st.finish_reasons, raw_finish_reasons=st.raw_finish_reasons,
                          text="".join(st.text))
                   for i, st in sorted(self.choices.items())] if several else []
        return Turn(
            provider=self.provider, calls=calls, server_calls=server,
            text="".join(first.text) if first else "",
            finish_reason=first.finish_reason if first else None,
            raw_finish_reason=first.raw_finish if first else None,
            finish_reasons=first.finish_reasons if first else (),
            raw_finish_reasons=first.raw_finish_reasons if first else (),
            error=self.error, response_id=self.response_id, model=self.model, usage=self.usage,
            token_usage=token_usage,
            choices=choices, assistant_message=assistant_message, ended=ended,
        )

    def release(self) -> None:
        """Detach every call from the shared Machine (called once the stream is closed) and from this assembler:
        nothing is parsed any more, and without the record's reference back (``owner``) the turn's records and
        the assembler hold no reference cycle, so they are freed as soon as the parser is, not by a later pass of
        the garbage collector."""
        detach = MACHINE.remove_model  # (what ``CallRecord.release`` does, without its call per record)
        for rec in self._open.values():
            detach(rec)
            rec.owner = None
        for rec in self.records:
            detach(rec)
            rec.owner = None
        for _, rec in self._last.values():  # (in streaming mode, a choice's last item may be a forgotten call)
            if rec is not None:
                rec.owner = None
        if not self.records or not _log.enabled(_log.INFO):
            return
        for rec in self.records:
            if not rec.server:
                extra = {"arguments": rec.raw} if _log.LOG_ARGUMENTS else {}
                _log.emit(_log.INFO, "call.parsed", provider=self.provider, call_id=rec.call_id,
                          local_id=rec.local_id, name=rec.name, state=rec.state.value,
                          problem=rec.problem.code.value if rec.problem else None,
                          fragments=max(rec.emitted, len(rec.frags)), bytes=len(rec.raw), **extra)


def _problem(code: ProblemCode, message: str):
    from ..types import Problem

    return Problem(code, message)
