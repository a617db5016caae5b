"""What every dialect codec provides, and the table of dialects.

A codec owns everything about one dialect: its wire Structs (msgspec, decoders built once at import), the
mapping from wire events to calls on the ``Assembler``, and the provider-native assistant message to replay.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import msgspec

from .. import _log
from ..framing import SSEDecoder
from ..limits import _NOT_OPENERS, ENVELOPE_DEPTH, json_depth_exceeds
from ..statemachine.assembler import Assembler
from ..types import ProblemCode, StreamError, TokenUsage

__all__ = ["Codec", "Framing", "SSE", "BlockIndexes", "decode_error_message", "add", "count", "details", "usage_from",
           "cache_split_usage"]


#: the largest count kept: OpenTelemetry attributes are 64-bit integers
_MAX_COUNT = (1 << 63) - 1


def count(raw: Mapping[str, Any], *keys: str) -> int | None:
    """The sum of the token counts at ``keys`` in ``raw`` that are there (None when none is): a value that is not a
    non-negative integer (a bool, a string, a float, a number too large) counts as not there."""
    total: int | None = None
    for key in keys:
        value = raw.get(key)
        if type(value) is int and 0 <= value <= _MAX_COUNT:
            total = value if total is None else min(_MAX_COUNT, total + value)
    return total


def add(*values: int | None) -> int | None:
    """The sum of the counts that are not None (None when all are)."""
    known = [v for v in values if v is not None]
    return min(_MAX_COUNT, sum(known)) if known else None


def details(raw: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """The object at ``key`` in ``raw`` (``prompt_tokens_details`` …), or an empty one."""
    value = raw.get(key)
    return value if isinstance(value, Mapping) else {}


def cache_split_usage(raw: Mapping[str, Any], *, uncached: str, cache_read: str, cache_write: str,
                      output: str) -> TokenUsage:
    """The usage of a provider whose input count (``uncached``) leaves the cache out: the whole input adds the cache
    reads and writes (Anthropic, Bedrock Converse)."""
    plain = count(raw, uncached)
    return TokenUsage(
        input_tokens=None if plain is None else count(raw, uncached, cache_read, cache_write),
        output_tokens=count(raw, output),
        cache_read_input_tokens=count(raw, cache_read),
        cache_creation_input_tokens=count(raw, cache_write))


class BlockIndexes:
    """The content-block indexes started so far, in constant space while they come in order (0, 1, 2 …), as they
    do: a streaming mode that forgets a block once it stopped must still refuse its index again."""

    __slots__ = ("next", "others")

    def __init__(self) -> None:
        self.next = 0  # every index below this one was started
        self.others: set[int] = set()  # the ones started out of order

    def add(self, index: int) -> None:
        if index != self.next:
            self.others.add(index)
            return
        index += 1
        while index in self.others:
            self.others.discard(index)
            index += 1
        self.next = index

    def __contains__(self, index: int) -> bool:
        return 0 <= index < self.next or index in self.others


def usage_from(raw: Any, read: Callable[[Mapping[str, Any]], TokenUsage | None]) -> TokenUsage | None:
    """``read(raw)`` when ``raw`` is an object and says anything, else None (never raises)."""
    if type(raw) is not dict and not isinstance(raw, Mapping):  # (a dict, usually: no ABC check for it)
        return None
    try:
        usage = read(raw)
    except Exception:  # noqa: BLE001 - usage is a provider's report, never a reason to fail a turn
        return None
    if usage is None or usage == _EMPTY:
        return None
    return usage


_EMPTY = TokenUsage()


def decode_error_message(exc: Exception) -> str:
    """msgspec's message, which keeps the JSON path (``Expected `int`, got `str` - at `$.index```)."""
    return str(exc)


class Framing(msgspec.Struct, frozen=True, kw_only=True):
    """How a dialect's streamed response body is cut into messages (``Codec.framing``).

    ``name`` is the parser's format for it: ``StreamParser(provider, format=name)``, which the harness transport
    asks for on every streamed response (``"sse"``, or a name of the dialect's own for a binary framing).
    ``make(max_message_bytes)`` returns a new framer with the shape of those in ``toolwire.framing``:
    ``feed(chunk) -> list`` and ``close() -> list``, never holding more than ``max_message_bytes`` of one
    message (``FramingError``), and optionally ``has_pending``. With ``events``, its items carry ``.event`` (a
    name or None) and ``.data`` (the payload bytes), as ``SSEMessage`` does; without, they are the payload
    bytes. ``sniff(head)`` lets ``format="auto"`` recognise a binary framing from an input's first bytes: True
    (it is this framing), False (it is not), None (too few bytes to tell yet); without it, ``auto`` never
    picks this framing."""

    name: str
    make: Callable[[int], Any]
    events: bool = True
    sniff: Callable[[bytes], bool | None] | None = None


#: Server-Sent Events (``toolwire.framing.SSEDecoder``): the framing of every streamed dialect but a binary one
SSE = Framing(name="sse", make=SSEDecoder)


class Codec:
    """Base class of a dialect codec, and the contract a codec meets.

    A codec reads one dialect's payloads (``on_payload``) and says what they mean through canonical operations on
    its ``Assembler`` (``self.asm``), which knows no field name. The rules every dialect shares are applied here
    and in the assembler; a codec reaches each through one hook:

    1. **Payloads.** ``feed_payloads`` numbers each payload (``asm.position``), refuses one nested deeper than the
       limits allow, skips everything once the stream failed, hands a payload after the stream's terminator to
       ``after_end`` (a protocol error unless ``ignorable_after_end``), turns an exception a payload provokes into
       a protocol error (``payload_failed``), and counts the payloads ``on_payload`` handles as understood. A
       payload that is not the dialect's calls ``unrecognised(exc, data)`` (it does not decode or has no shape
       the dialect knows: a protocol error) or ``skip(reason)`` (a shape that says nothing, such as a chunk
       without choices): neither counts. An input in which nothing was understood ends in ``no_payload``.
    2. **Calls.** ``asm.open_call(..., initial=)`` announces a call; arguments its start carries are its value
       unless they are a placeholder (``{}`` or nothing), and fragments that follow replace them. Every non-empty
       argument fragment goes to ``rec.fragments.append(text)``, the fast path (the fragment list itself while the
       call accumulates; otherwise a guard whose ``append`` takes the checked path, which starts accumulating on
       the first fragment and fails a call that already ended). A call is complete only on the
       dialect's terminator: ``asm.complete(rec, final=)`` (``final``: a whole value the provider sends at the
       end, checked against the fragments) or ``asm.terminate(rec)`` for an indexed block or step (a call
       still without a name fails). Server-side calls are opened with ``server=True``.
    3. **The end of a choice.** On the dialect's end-of-turn event, ``asm.end_choice(choice, reason, raw, where)``
       with the canonical ``FinishReason`` and the provider's word: a token limit, a filter or an error truncates
       the calls still open; with ``finish_terminates_calls`` (the dialect's finish is its calls' terminator) a
       clean finish completes them; otherwise a clean end that leaves a call open is a protocol error on the
       turn; with ``length_cuts_last_item`` a token limit also truncates the call of the choice's last item
       (``asm.item(index, rec)`` reports each item) even when it had closed, since the limit cut right after it.
       ``asm.stream_ended(name)`` records the stream's terminator.
    4. **The end of the turn.** At close (``on_close``) the turn is finished when ``ended()`` says the dialect's
       end-of-turn event arrived (default: every choice that appeared ended), after ``at_close()`` applied any
       rule of the dialect's own; the assembler then truncates what is still open and records ``stream_cut`` for
       a turn that never finished.
    5. **Errors.** An error the provider reports is ``asm.stream_error(StreamError(...))``; a payload that
       contradicts the stream is ``asm.protocol_error(message, data)``. Nothing a provider sends raises.
    6. **Replay and usage.** ``assistant_message`` (and ``choice_messages`` for several choices) give the
       provider-native message the history replays, verbatim; ``read_usage`` reads the usage object into a
       ``TokenUsage``.

    The class attributes say the rest: ``provider`` (the dialect id), ``framing`` (how a streamed body is framed),
    ``recover_resends`` (recognise servers that resend arguments instead of appending), and the two end rules.
    """

    provider: ClassVar[str]
    #: how a streamed response body of this dialect is framed; whole bodies are JSON
    framing: ClassVar[Framing] = SSE
    #: the name of ``framing`` (the parser format of a streamed response)
    stream_format: ClassVar[str] = "sse"
    #: recover arguments from servers that resend instead of appending (OpenAI-compatible servers)
    recover_resends: ClassVar[bool] = False
    #: the end of a choice is the terminator of its calls (a clean finish completes the calls still open)
    finish_terminates_calls: ClassVar[bool] = False
    #: a token limit also cuts the call of a choice's last item when that call had already closed
    length_cuts_last_item: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.stream_format = cls.framing.name

    def __init__(self) -> None:
        self.asm = Assembler(self.provider, recover_resends=self.recover_resends,
                             finish_terminates_calls=self.finish_terminates_calls,
                             length_cuts_last_item=self.length_cuts_last_item)
        self._unrecognised_at = 0  # the position of the last payload that did not count

    def on_payload(self, event: str | None, data: bytes) -> None:
        """Handle one payload (an SSE message's data, a JSON line, or a whole body).

        Called by ``feed_payloads`` (see the class docstring)."""
        raise NotImplementedError

    def unrecognised(self, exc: Exception, data: bytes) -> None:
        """The payload being handled is not the dialect's (it does not decode, or has no shape the dialect
        knows): a protocol error (``bad_payload``), and it does not count as understood."""
        self.not_understood()
        self.bad_payload(exc, data)

    def skip(self, reason: str, **fields: Any) -> None:
        """The payload being handled says nothing the dialect knows: logged (debug), not counted as understood."""
        self.not_understood()
        if _log.enabled(_log.DEBUG):
            _log.emit(_log.DEBUG, "payload.skipped", provider=self.provider, reason=reason,
                      position=self.asm.position, **fields)

    def not_understood(self) -> None:
        """The payload being handled does not count as understood (``unrecognised`` and ``skip`` call it)."""
        asm = self.asm
        if self._unrecognised_at != asm.position:  # once per payload
            self._unrecognised_at = asm.position
            asm.understood -= 1

    def feed_payloads(self, payloads: list[Any], sse: bool) -> None:
        """Hand framed payloads to ``on_payload`` in order: ``asm.position`` numbers them (traces cite it),
        nothing more is handled once the stream is in its terminal error state, a payload after the stream's
        terminator goes to ``after_end`` instead, and the ones ``on_payload`` handles count as understood
        unless it says otherwise. ``sse``: an item that is not bytes carries ``.event`` and ``.data`` (the others are
        payload bytes)."""
        asm = self.asm
        on_payload = self.on_payload
        deepest = asm.max_depth + ENVELOPE_DEPTH
        # bytes with no more than ``deepest`` opening brackets in all cannot nest deeper (json_depth_exceeds' own
        # first test, made here in one C pass without the call). Every payload is tested, however short: some are
        # never decoded (one after the terminator, a ``[DONE]`` sentinel, an exception frame's text), so a payload
        # too short to be deep JSON is not thereby harmless
        for item in payloads:
            asm.position += 1
            if asm.failed:
                continue
            if sse and type(item) is not bytes:
                event, data = item.event, item.data
            else:
                event, data = None, item  # a bare payload (the SSE decoder's usual message, or unframed)
            if (type(data) is not bytes or len(data.translate(None, _NOT_OPENERS)) > deepest) \
                    and json_depth_exceeds(data, deepest):
                asm.limit_exceeded(f"a {self.provider} payload nests deeper than {deepest} levels (max_depth "
                                   f"{asm.max_depth} plus the envelope's {ENVELOPE_DEPTH})")
                continue
            if type(data) is bytes and not data.isascii() and data[:6] != b"[DONE]":
                # JSON text is UTF-8 (RFC 8259): msgspec skips the strings of fields no Struct names without
                # checking them, so bytes that are not UTF-8 there would otherwise pass in some dialects. A ``[DONE]``
                # sentinel is not JSON and is read by its first six bytes alone, whatever follows them
                try:
                    data.decode()
                except UnicodeDecodeError as exc:
                    if exc.end == len(data) and exc.reason == "unexpected end of data":
                        pass  # a payload cut inside a character (a stream that ended early): the cut's own rules
                    else:
                        asm.protocol_error(f"a {self.provider} payload is not UTF-8 (byte {exc.start}: "
                                           f"{exc.reason}), so it is not JSON", data)
                        continue
            try:
                if asm.ended_by is not None:
                    self.after_end(event, data)
                else:
                    asm.understood += 1
                    on_payload(event, data)
            except Exception as exc:  # noqa: BLE001 - whatever a payload does, it is the provider's mistake
                self.payload_failed(exc, data)

    def payload_failed(self, exc: Exception, data: bytes) -> None:
        """A payload made the codec fail in a way it did not foresee (a value of an unexpected type deep in
        it, text that is not UTF-8 …): a protocol error on the turn, never an exception for the caller."""
        _log.emit(_log.WARNING, "payload.failed", provider=self.provider, error=type(exc).__name__,
                  position=self.asm.position)
        self.asm.protocol_error(f"{self.provider} payload could not be understood ({type(exc).__name__}: "
                                f"{str(exc)[:200]})", data)

    def after_end(self, event: str | None, data: bytes) -> None:
        """A payload after the stream's terminator. Whatever it says (a call, text, another finish), the turn
        already ended, so it is a protocol error on the turn and nothing in it is read; only a payload that
        cannot say anything (``ignorable_after_end``: a repeated sentinel, a keep-alive) is skipped."""
        asm = self.asm
        if self.ignorable_after_end(event, data):
            if _log.enabled(_log.DEBUG):
                _log.emit(_log.DEBUG, "payload.skipped", provider=self.provider,
                          reason="keep-alive after the stream's terminator", type=event, position=asm.position)
            return
        asm.protocol_error(f"a payload arrived after the stream's terminator ({asm.ended_by})", data)

    def ignorable_after_end(self, event: str | None, data: bytes) -> bool:
        """True for a payload that carries nothing and may follow the terminator (none by default)."""
        return False

    def on_close(self) -> None:
        """The byte stream ended: the dialect's own end rules (``at_close``), whether the turn finished
        (``ended``), then the assembler's end-of-stream rules."""
        asm = self.asm
        self.at_close()
        if not asm.failed:
            asm.finished = self.ended()
        asm.end_of_stream()

    def at_close(self) -> None:
        """End rules of the dialect's own, applied when the byte stream ended (none by default)."""

    def ended(self) -> bool:
        """True when the dialect's end-of-turn event arrived: by default, when every choice that appeared got
        its finish (``asm.end_choice``)."""
        return self.asm.choices_ended()

    def assistant_message(self) -> Any:
        """The provider-native assistant message that replays this turn in the history."""
        return None

    def token_usage(self) -> TokenUsage | None:
        """The usage the provider reported (``asm.usage``) as a ``TokenUsage``, or None: ``usage_from`` reads it
        with the dialect's ``read_usage``; whatever the provider put there, this never raises."""
        return usage_from(self.asm.usage, self.read_usage)

    @staticmethod
    def read_usage(raw: Mapping[str, Any]) -> TokenUsage | None:
        """The dialect's reading of its usage object (field names in the codec); None: it has none."""
        return None

    def choice_messages(self) -> dict[int, Any]:
        """The assistant message of each choice, by index, for dialects that return several (Chat ``n > 1``,
        Gemini candidates): the history continues with whichever choice was run. Empty for the others."""
        return {}

    # helpers shared by codecs
    def bad_payload(self, exc: Exception, data: bytes) -> None:
        """A payload (or a part of one) that does not decode: a protocol error, or a cut when it is the last
        payload, taken from a line the stream ended inside."""
        asm = self.asm
        if asm.closing:
            # the last payload, taken from a line the stream ended inside: a cut, not garbage
            asm.stream_error(StreamError(type="stream_cut", message="the stream ended inside a payload"),
                             ProblemCode.STREAM_CUT)
            return
        asm.protocol_error(f"{self.provider} payload could not be decoded: {decode_error_message(exc)}", data)

    @staticmethod
    def to_text(value: Any) -> str:
        """Arguments some servers send as an object instead of a string become JSON text."""
        if isinstance(value, str):
            return value
        return msgspec.json.encode(value).decode()
