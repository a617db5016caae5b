"""The sans-I/O entry points: ``StreamParser`` (``feed``/``close``/``turn``) and ``parse``.

Bytes in, events and a ``Turn`` out; no I/O. Use any transport (httpx, aiohttp, an SDK's raw response, a file).
"""

from __future__ import annotations

from typing import Any, Iterable

from .codecs import codec_for, dialect_for
from .codecs.base import Framing
from .errors import FramingError, UsageError
from .framing import (
    DEFAULT_MAX_MESSAGE_BYTES,
    JSONBodyDecoder,
    JSONLinesDecoder,
    JSONValuesDecoder,
    SSEDecoder,
)
from .limits import DEFAULT_MAX_ARGUMENT_CHARS, DEFAULT_MAX_CALLS, DEFAULT_MAX_CHOICES, DEFAULT_MAX_DEPTH
from .types import Event, StreamError, Turn, TurnFinished

__all__ = ["StreamParser", "parse", "FORMATS"]

FORMATS = ("auto", "sse", "jsonl", "json")


class StreamParser:
    """Incremental parser for one model response of dialect ``provider``.

    ``format`` is ``"sse"`` (the default: a streamed response), ``"jsonl"`` (one provider event per line),
    ``"json"`` (a whole non-streaming body) or ``"auto"`` (decided from the first bytes: ``{`` or ``[`` start a
    sequence of JSON values, anything else is SSE). A dialect whose streamed responses have a framing of their own
    (``Codec.framing``, a binary one) also takes that framing's name, and ``auto`` recognises it when the framing
    can tell from the first bytes. The default stays ``"sse"`` for every dialect: a Bedrock Converse stream needs
    ``format="eventstream"`` (or ``"auto"``); read as SSE it ends in a ``no_payload`` error that says so.

    ``feed(chunk)`` returns the events the chunk completed; ``close()`` applies the end-of-stream rules and
    returns the last events, ending with ``TurnFinished``; ``turn`` is the Turn (final after ``close()``).

    Raises ``UsageError`` for an unknown provider or format, or when fed after ``close()``; ``FramingError``
    when one pending message exceeds ``max_message_bytes``, or when a binary framing's bytes are damaged or end
    inside a message (the parser is then closed, its turn records the error, and the exception's ``events`` are
    the last events, ending with ``TurnFinished``). Mistakes in the provider's data never raise: they are recorded on the turn and its calls.

    ``keep_calls=False`` is a streaming mode for gateways: each call is forgotten once its end event
    (``CallCompleted`` / ``CallTruncated`` / ``CallErrored``) was returned, so memory is bounded by the calls
    still open rather than the whole response (Anthropic keeps only each ended call's id, to refuse a replayed
    block; Gemini keeps each payload that carried a whole part, about its own size, because the default mode's
    replay of those parts is checked at close in both modes, so that both fail alike); the final Turn then holds only calls still open at close and no assistant message. Both modes
    report the same finish reason, error and call end events. (Chat Completions calls all end at the choice's
    finish_reason, so there they are held until it arrives.) A fragment for a call the streaming mode already
    forgot is a protocol error on the turn; the default mode also reports that call ``errored`` again.
    """

    def __init__(self, provider: str, *, format: str = "sse",
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES, keep_calls: bool = True,
                 max_depth: int = DEFAULT_MAX_DEPTH, max_argument_chars: int = DEFAULT_MAX_ARGUMENT_CHARS,
                 max_calls: int = DEFAULT_MAX_CALLS, max_choices: int = DEFAULT_MAX_CHOICES) -> None:
        if format not in FORMATS and format != _own_framing_name(provider):
            raise UsageError(f"unknown format {format!r}; expected one of: {', '.join(FORMATS)}")
        # the usual case (plain ints, at least 1) in one test; anything else is checked one by one
        if not (type(max_message_bytes) is int and type(max_depth) is int and type(max_argument_chars) is int
                and type(max_calls) is int and type(max_choices) is int
                and min(max_message_bytes, max_depth, max_argument_chars, max_calls, max_choices) >= 1):
            _check_limits(max_message_bytes=max_message_bytes, max_depth=max_depth,
                          max_argument_chars=max_argument_chars, max_calls=max_calls, max_choices=max_choices)
        self.provider = provider
        self.format = format
        self._codec = codec_for(provider)
        framing = self._codec.framing
        #: the dialect's own framing, when it is not SSE (None: SSE, as for every text dialect)
        self._framing: Framing | None = None if framing.name == "sse" else framing
        self._events = True  # the framer's items carry an event name and data (SSE), or are the payloads
        self._raw: list[bytes] = []  # ``auto``: the first bytes, while the dialect's framing cannot tell yet
        asm = self._codec.asm
        asm.keep_calls = keep_calls
        asm.max_depth, asm.max_argument_chars, asm.max_calls = max_depth, max_argument_chars, max_calls
        asm.max_choices = max_choices
        self._max = max_message_bytes
        self._framer: Any = None if format == "auto" else self._make_framer(format)
        self._sniff: list[bytes] = []  # leading white space seen while the format is detected
        self._sniffed = 0
        self._closed = False
        self._fed = 0  # bytes fed (what a ``no_payload`` error says it found nothing in)
        self._turn: Turn | None = None

    def _make_framer(self, fmt: str) -> Any:
        self._events = fmt == "sse"
        if fmt == "sse":
            return SSEDecoder(self._max, bare=True)
        if fmt == "jsonl":
            return JSONLinesDecoder(self._max)
        if fmt == "json":
            return JSONBodyDecoder(self._max)
        own = self._framing
        if own is not None and fmt == own.name:
            self._events = own.events
            return own.make(self._max)
        return JSONValuesDecoder(self._max)

    @property
    def detected_format(self) -> str | None:
        """The format in use (for ``auto``: None until the first significant byte arrived)."""
        if self._framer is None:
            return None
        known = {SSEDecoder: "sse", JSONLinesDecoder: "jsonl", JSONBodyDecoder: "json",
                 JSONValuesDecoder: "json-values"}.get(type(self._framer))
        return known if known is not None or self._framing is None else self._framing.name

    def _own_framing(self, chunk: bytes) -> bytes | None:
        """``auto`` with a dialect whose framing can recognise itself: the bytes to go on with once it can tell
        (the dialect's framer is then in place when it is that framing), None while it cannot tell yet."""
        own = self._framing
        assert own is not None and own.sniff is not None
        self._raw.append(chunk)
        head = b"".join(self._raw) if len(self._raw) > 1 else chunk
        verdict = own.sniff(head)
        if verdict is None and len(head) <= self._max:
            return None
        self._raw = []
        if verdict:
            self._framer = self._make_framer(own.name)
        else:
            self._framing = None  # not its framing: decided as for every dialect
        return head

    def feed(self, chunk: bytes | bytearray | memoryview | str) -> list[Event]:
        """Feed the next piece of the response; return the events it completed."""
        if self._closed:
            raise UsageError("feed() after close()")
        if type(chunk) is not bytes:
            chunk = chunk.encode("utf-8") if isinstance(chunk, str) else bytes(chunk)
        self._fed += len(chunk)
        framer = self._framer
        if framer is None and self._framing is not None and self._framing.sniff is not None:
            whole = self._own_framing(chunk)
            if whole is None:
                return []
            chunk, framer = whole, self._framer
        if framer is None:
            # only the new chunk is looked at: white space already seen is kept in pieces, never re-scanned
            head = chunk.lstrip(b"\xef\xbb\xbf \t\r\n")
            if not head:
                self._sniff.append(chunk)
                self._sniffed += len(chunk)
                if self._sniffed > self._max:
                    self._fail_framing(FramingError("input is only white space", limit=self._max,
                                                    size=self._sniffed, code="message_too_large"))
                return []
            framer = self._framer = self._make_framer("values" if head[:1] in (b"{", b"[") else "sse")
            if self._sniff:
                chunk = b"".join(self._sniff) + chunk
                self._sniff, self._sniffed = [], 0
        try:
            payloads = framer.feed(chunk)
        except FramingError as exc:
            self._fail_framing(exc)
        codec = self._codec
        if payloads:
            if type(framer) is JSONValuesDecoder and framer.array_end is not None:
                self._feed_values(framer, payloads)
            else:
                codec.feed_payloads(payloads, self._events)
        return codec.asm.take_events()

    def _feed_values(self, framer: JSONValuesDecoder, payloads: list[bytes]) -> None:
        """A response sent as one JSON array ends with it: the values after the array's end are payloads after
        the stream's terminator."""
        codec = self._codec
        cut = max(0, framer.array_end - (framer.emitted - len(payloads)))
        if cut:
            codec.feed_payloads(payloads[:cut], False)
        if cut < len(payloads):
            codec.asm.stream_ended("the end of the top-level JSON array")
            codec.feed_payloads(payloads[cut:], False)

    def _fail_framing(self, exc: FramingError) -> None:
        exc.provider = self.provider
        asm = self._codec.asm
        asm.stream_error(StreamError(type="framing_error", message=str(exc), code=exc.code))
        exc.events = self._finish()  # the calls it truncated and the TurnFinished, which no call can return now
        raise exc

    def close(self) -> list[Event]:
        """End of input: apply the end-of-stream rules; return the last events, ending with TurnFinished."""
        if self._closed:
            return []
        framer = self._framer
        codec = self._codec
        early: list[Event] = []
        if framer is None and self._raw:  # ``auto`` ended before the dialect's framing could tell
            self._raw, head = [], b"".join(self._raw)
            self._framing = None
            early = self.feed(head)
            framer = self._framer
        if framer is not None:
            values = type(framer) is JSONValuesDecoder
            pending = values and framer.has_pending  # (asked before close() takes what is pending)
            try:
                payloads = framer.close()
            except FramingError as exc:  # a binary framing cut inside a message
                self._fail_framing(exc)
            codec.asm.closing = type(framer) is not JSONBodyDecoder
            if payloads:  # (feed_payloads does nothing with none)
                codec.feed_payloads(payloads, self._events)
            if pending and not codec.asm.failed:
                codec.asm.protocol_error("the input ended inside a JSON value")
        finished = self._finish()
        return early + finished if early else finished

    def _no_payload_message(self) -> str:
        """Why no payload was found: the input was empty, or held no message of the format it was read as (with
        the dialect's own framing named when it was read as SSE: a Bedrock stream given ``format="sse"``)."""
        message = f"no {self.provider} payload found in the input"
        if self._codec.asm.position:
            return message
        if not self._fed:
            return message + " (it is empty)"
        fmt = self.detected_format
        if fmt is None:
            return message + f" (only white space in its {self._fed} bytes)"
        message += f" (no {fmt} message in its {self._fed} bytes)"
        own = _own_framing_name(self.provider)
        if own is not None and fmt != own:
            message += f"; {self.provider} streams are framed as {own!r}: pass format={own!r} or 'auto'"
        return message

    def _finish(self) -> list[Event]:
        codec = self._codec
        asm = codec.asm
        if not self._closed:
            self._closed = True
            if asm.understood == 0 and asm.error is None:
                asm.stream_error(StreamError(type="no_payload", message=self._no_payload_message()))
            try:
                codec.on_close()
            except Exception as exc:  # noqa: BLE001 - the provider's data, not the caller, is at fault
                codec.payload_failed(exc, b"")
            try:
                message, messages = codec.assistant_message(), codec.choice_messages()
            except Exception as exc:  # noqa: BLE001 - e.g. a text block that started with a number
                codec.payload_failed(exc, b"")
                message, messages = None, {}
            if not asm.keep_calls:
                # the streaming mode forgot its ended calls, so it has no message to replay (documented); the
                # message is still built above, so that what building it finds wrong fails both modes alike
                message, messages = None, {}
            self._turn = asm.build_turn(message, token_usage=codec.token_usage())
            if self._turn.choices:
                for choice in self._turn.choices:
                    choice.assistant_message = messages.get(choice.index)
            asm.release()
        events = asm.take_events()
        events.append(TurnFinished(turn=self._turn))
        return events

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def usable(self) -> bool:
        """False when nothing in the input could be understood as this dialect's data."""
        asm = self._codec.asm
        return asm.understood > 0 and (asm.error is None or asm.error.type != "framing_error")

    @property
    def turn(self) -> Turn:
        """The Turn: final after ``close()``; before it, a snapshot of what has arrived so far."""
        if self._turn is not None:
            return self._turn
        return self._codec.asm.build_turn(None, ended=False, token_usage=self._codec.token_usage())


def parse(provider: str, data: bytes | str | Iterable[bytes], *, format: str = "auto",
          max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES, max_depth: int = DEFAULT_MAX_DEPTH,
          max_argument_chars: int = DEFAULT_MAX_ARGUMENT_CHARS, max_calls: int = DEFAULT_MAX_CALLS,
          max_choices: int = DEFAULT_MAX_CHOICES) -> Turn:
    """Parse one whole response of dialect ``provider`` and return its Turn.

    ``data`` is bytes, str, or an iterable of byte chunks. ``format`` as for ``StreamParser`` (default
    ``"auto"``). Raises ``UsageError`` for an unknown provider or format, ``FramingError`` when a message exceeds
    ``max_message_bytes``; everything wrong in the provider's data is recorded on the Turn instead.
    """
    parser = StreamParser(provider, format=format, max_message_bytes=max_message_bytes, max_depth=max_depth,
                          max_argument_chars=max_argument_chars, max_calls=max_calls, max_choices=max_choices)
    if isinstance(data, (bytes, bytearray, memoryview, str)):
        parser.feed(data)
    else:
        for chunk in data:
            parser.feed(chunk)
    parser.close()
    return parser.turn


def _check_limits(**limits: Any) -> None:
    """Raise ``UsageError`` for a limit that is not an int (a bool is not one) of at least 1."""
    for name, value in limits.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UsageError(f"{name} must be an int >= 1, got {value!r}")


def _own_framing_name(provider: str) -> str | None:
    """The name of ``provider``'s own streamed framing, or None (an unknown provider, or SSE)."""
    try:
        name = dialect_for(provider).codec.framing.name
    except UsageError:
        return None
    return None if name == "sse" else name
