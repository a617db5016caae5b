"""AWS event-stream framing (``application/vnd.amazon.eventstream``): bytes in, messages out, no I/O.

Amazon Bedrock's ``ConverseStream`` (and other AWS streaming APIs) send their response body as a sequence of
binary messages instead of Server-Sent Events. ``EventStreamDecoder`` has the shape of the framers in
``toolwire.framing`` (``feed(chunk) -> list`` and ``close() -> list``) and the same guarantees: any chunking of
the input gives the same messages, and no more than ``max_message_bytes`` of one pending message is ever held.

The format
----------

A message is self-delimiting; every integer is big-endian and unsigned unless said otherwise::

    offset  size  field
    0       4     total length: the whole message, these four bytes and the trailing checksum included
    4       4     headers length: the size of the headers section alone
    8       4     prelude checksum: CRC-32 of bytes 0-7
    12      H     headers (H = headers length)
    12+H    P     payload (P = total length - H - 16)
    T-4     4     message checksum: CRC-32 of bytes 0 to T-5, i.e. everything before it (T = total length)

The checksum is the common CRC-32 (the one of gzip and zlib, ``zlib.crc32``). The prelude has its own checksum
so that a damaged length is caught before anyone trusts it; this decoder checks it first and only then looks at
the lengths. The smallest possible message, with no headers and an empty payload, is 16 bytes.

The headers section is a run of headers, one after another, with nothing between them. One header is a 1-byte
name length, the name (UTF-8), a 1-byte value type and the value, whose encoding depends on the type:

====  ==========  ====================================================================
type  name        value
====  ==========  ====================================================================
0     bool true   nothing (the type alone says ``True``)
1     bool false  nothing (``False``)
2     byte        1 byte, signed
3     short       2 bytes, signed
4     integer     4 bytes, signed
5     long        8 bytes, signed
6     bytes       2-byte length, then that many bytes
7     string      2-byte length, then that many bytes of UTF-8
8     timestamp   8 bytes, signed: milliseconds since 1970-01-01T00:00:00Z
9     uuid        16 bytes
====  ==========  ====================================================================

A name appears at most once in a message. AWS's own decoders refuse a headers section over 128 KiB, and so does
this one. The headers AWS services use are strings: ``:message-type`` (``event``, ``exception`` or ``error``),
``:event-type`` for an event, ``:exception-type`` for a modelled exception (its payload says what went wrong),
``:error-code`` and ``:error-message`` for an unmodelled error, and ``:content-type`` (``application/json``
for Bedrock). A Bedrock ``ConverseStream`` event's payload is the JSON object of that event's member, not
wrapped in its name: an event typed ``contentBlockDelta`` carries ``{"contentBlockIndex":0,"delta":{…},
"p":"…"}``, where ``p`` is padding of random length that hides the size of the content.

Sources: the "Event stream encoding" pages of the AWS documentation (Amazon Lex V2, Amazon Transcribe) and the
reference decoder in botocore (``botocore/eventstream.py``).

Failures
--------

Everything the decoder refuses is an ``EventStreamError`` (a ``FramingError``) with a stable ``code``:
``crc_mismatch`` (either checksum: ``section`` says which), ``bad_prelude`` (a total length under 16 bytes, a
headers length that does not fit in the message), ``message_too_large`` (a total length over
``max_message_bytes``, or a headers length over 128 KiB, refused as soon as the 12 bytes of the prelude are
there, before any of the message is held), ``bad_header`` (a header that runs past its section, an unknown
value type, text that is not UTF-8, a name seen twice, a timestamp out of the range of ``datetime``) and
``truncated`` (``close()`` while a message is unfinished). Once a feed has failed, the stream's message
boundaries are lost: every later ``feed`` raises the same error again, and ``close()`` returns nothing.
"""

from __future__ import annotations

import datetime
import enum
import struct
import uuid
import zlib
from typing import Union

import msgspec

from ..errors import FramingError
from ..framing import DEFAULT_MAX_MESSAGE_BYTES

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "MAX_HEADERS_BYTES",
    "MIN_MESSAGE_BYTES",
    "HeaderType",
    "HeaderValue",
    "EventStreamMessage",
    "EventStreamError",
    "EventStreamDecoder",
    "encode_message",
]

#: the smallest message: prelude (8), prelude checksum (4), message checksum (4)
MIN_MESSAGE_BYTES = 16
#: the largest headers section AWS's decoders accept
MAX_HEADERS_BYTES = 128 * 1024

_PRELUDE = 12
_PRELUDE_UNPACK = struct.Struct(">III").unpack_from
_U32_UNPACK = struct.Struct(">I").unpack_from
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


class HeaderType(enum.IntEnum):
    """The value type byte of a header."""

    BOOL_TRUE = 0
    BOOL_FALSE = 1
    BYTE = 2
    SHORT = 3
    INTEGER = 4
    LONG = 5
    BYTES = 6
    STRING = 7
    TIMESTAMP = 8
    UUID = 9


#: a decoded header value: bool (types 0, 1), int (2-5), bytes (6), str (7), an aware UTC datetime (8), UUID (9)
HeaderValue = Union[bool, int, bytes, str, datetime.datetime, uuid.UUID]

#: fixed-size integer types: type byte -> (size, signed big-endian unpacker)
_FIXED: dict[int, tuple[int, struct.Struct]] = {
    2: (1, struct.Struct(">b")),
    3: (2, struct.Struct(">h")),
    4: (4, struct.Struct(">i")),
    5: (8, struct.Struct(">q")),
    8: (8, struct.Struct(">q")),
}


class EventStreamMessage(msgspec.Struct, gc=False):
    """One event-stream message: its headers, by name, and its payload bytes (not decoded).

    The properties read the headers AWS services set; each is None when the header is missing or not a string.
    """

    headers: dict[str, HeaderValue]
    payload: bytes

    def _text(self, name: str) -> str | None:
        value = self.headers.get(name)
        return value if isinstance(value, str) else None

    @property
    def message_type(self) -> str | None:
        """``:message-type``: ``event``, ``exception`` or ``error``."""
        return self._text(":message-type")

    @property
    def event_type(self) -> str | None:
        """``:event-type``, the event's name (``messageStart``, ``contentBlockDelta``, …)."""
        return self._text(":event-type")

    @property
    def exception_type(self) -> str | None:
        """``:exception-type``, the modelled exception's name (``validationException``, …)."""
        return self._text(":exception-type")

    @property
    def error_code(self) -> str | None:
        """``:error-code`` of an unmodelled error."""
        return self._text(":error-code")

    @property
    def error_message(self) -> str | None:
        """``:error-message`` of an unmodelled error."""
        return self._text(":error-message")

    @property
    def content_type(self) -> str | None:
        """``:content-type`` of the payload (``application/json`` for Bedrock)."""
        return self._text(":content-type")


class EventStreamError(FramingError):
    """The event stream cannot be split into messages.

    Attributes besides those of ``FramingError``: ``offset`` (where the message at fault starts, counted in
    bytes from the first byte fed), ``section`` (``prelude``, ``headers``, ``message`` or None: the part of the
    message at fault) and ``messages`` (the messages the failing ``feed`` completed before it failed, so that
    no whole message is lost whatever the chunking).
    """

    def __init__(self, message: str, *, code: str, offset: int, section: str | None = None,
                 data: bytes | None = None, limit: int | None = None, size: int | None = None) -> None:
        super().__init__(message, data=data, limit=limit, size=size, code=code)
        self.offset = offset
        self.section = section
        self.messages: list[EventStreamMessage] = []


#: parsed headers sections, by their bytes: a stream repeats a handful of them (one per event type)
_HEADERS_SEEN: dict[bytes, dict[str, HeaderValue]] = {}
_HEADERS_SEEN_MAX = 256
_HEADERS_SEEN_SIZE = 512
#: decoded header names and string values (short, and few distinct ones)
_TEXT_SEEN: dict[bytes, str] = {}
_TEXT_SEEN_MAX = 1024


def _bad_header(why: str, section: bytes, offset: int) -> EventStreamError:
    return EventStreamError(f"bad event-stream header: {why}", code="bad_header", offset=offset,
                            section="headers", data=section)


def _text(raw: bytes, what: str, section: bytes, offset: int) -> str:
    text = _TEXT_SEEN.get(raw)
    if text is None:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise _bad_header(f"{what} is not UTF-8", section, offset) from None
        if len(raw) <= 64:
            if len(_TEXT_SEEN) >= _TEXT_SEEN_MAX:
                _TEXT_SEEN.clear()  # start over: the texts a stream repeats come back at once
            _TEXT_SEEN[raw] = text
    return text


def _parse_headers(section: bytes, offset: int) -> dict[str, HeaderValue]:
    """The headers of a headers section (``offset``: where its message starts in the stream, for errors)."""
    out: dict[str, HeaderValue] = {}
    end = len(section)
    i = 0
    while i < end:
        j = i + 1 + section[i]
        if j >= end:
            raise _bad_header(f"the header at byte {i} of the section runs past its end", section, offset)
        name = _text(section[i + 1:j], "a header name", section, offset)
        kind = section[j]
        i = j + 1
        value: HeaderValue
        if kind == 7 or kind == 6:
            if i + 2 > end:
                raise _bad_header(f"the length of header {name!r} runs past the section", section, offset)
            size = (section[i] << 8) | section[i + 1]
            i += 2
            if i + size > end:
                raise _bad_header(f"the value of header {name!r} runs past the section", section, offset)
            raw = section[i:i + size]
            i += size
            value = _text(raw, f"the value of header {name!r}", section, offset) if kind == 7 else raw
        elif kind == 0:
            value = True
        elif kind == 1:
            value = False
        elif kind == 9:
            if i + 16 > end:
                raise _bad_header(f"the value of header {name!r} runs past the section", section, offset)
            value = uuid.UUID(bytes=section[i:i + 16])
            i += 16
        elif kind in _FIXED:
            size, unpacker = _FIXED[kind]
            if i + size > end:
                raise _bad_header(f"the value of header {name!r} runs past the section", section, offset)
            number: int = unpacker.unpack_from(section, i)[0]
            i += size
            if kind == 8:
                try:
                    value = _EPOCH + datetime.timedelta(milliseconds=number)
                except OverflowError:
                    raise _bad_header(f"timestamp {number} of header {name!r} is out of range", section,
                                      offset) from None
            else:
                value = number
        else:
            raise _bad_header(f"header {name!r} has the unknown value type {kind}", section, offset)
        if name in out:
            raise _bad_header(f"header {name!r} appears twice", section, offset)
        out[name] = value
    return out


def _headers(section: bytes, offset: int) -> dict[str, HeaderValue]:
    """The headers of ``section``, a fresh dict each time (sections seen before are not parsed again)."""
    seen = _HEADERS_SEEN.get(section)
    if seen is not None:
        return seen.copy()
    headers = _parse_headers(section, offset)
    if len(section) <= _HEADERS_SEEN_SIZE:
        if len(_HEADERS_SEEN) >= _HEADERS_SEEN_MAX:
            _HEADERS_SEEN.clear()  # start over rather than keep sections that may never come back
        _HEADERS_SEEN[section] = headers.copy()
    return headers


def _message_of(section: bytes, payload: bytes, offset: int) -> EventStreamMessage:
    """The message of a headers section and a payload (``offset``: where it starts in the stream, for errors)."""
    return EventStreamMessage(_headers(section, offset) if section else {}, payload)


def _message_with(headers: dict[str, HeaderValue], payload: bytes) -> EventStreamMessage:
    """The message of a section parsed before (``headers``: its entry in ``_HEADERS_SEEN``) and a payload:
    what ``_message_of`` gives, which copies that entry too."""
    return EventStreamMessage(headers.copy(), payload)


_UNSEEN = object()


def _crc_error(data: bytes, start: int, total: int, offset: int) -> EventStreamError:
    """The message at ``data[start:start + total]`` whose checksum does not match its bytes."""
    end = start + total - 4
    expected = _U32_UNPACK(data, end)[0]
    computed = zlib.crc32(data[start:end])
    return EventStreamError(
        f"event-stream message checksum mismatch: the message says {expected:#010x}, its bytes give "
        f"{computed:#010x}", code="crc_mismatch", offset=offset, section="message",
        data=data[start:start + min(total, 200)])


def _prelude_error(prelude: bytes, limit: int, offset: int) -> EventStreamError:
    """What is wrong with ``prelude`` (12 bytes), known to be wrong."""
    total, hlen, expected = _PRELUDE_UNPACK(prelude)
    computed = zlib.crc32(prelude[:8])
    if computed != expected:
        return EventStreamError(
            f"event-stream prelude checksum mismatch: the prelude says {expected:#010x}, its bytes give "
            f"{computed:#010x}", code="crc_mismatch", offset=offset, section="prelude", data=prelude)
    if total > limit:
        return EventStreamError(
            f"event-stream message of {total} bytes exceeds the limit of {limit} bytes", code="message_too_large",
            offset=offset, section="prelude", data=prelude, limit=limit, size=total)
    if total < MIN_MESSAGE_BYTES:
        return EventStreamError(
            f"event-stream total length {total} is under the minimum of {MIN_MESSAGE_BYTES} bytes",
            code="bad_prelude", offset=offset, section="prelude", data=prelude, size=total)
    if hlen > total - MIN_MESSAGE_BYTES:
        return EventStreamError(
            f"event-stream headers length {hlen} does not fit in a message of {total} bytes", code="bad_prelude",
            offset=offset, section="prelude", data=prelude, size=hlen)
    return EventStreamError(
        f"event-stream headers of {hlen} bytes exceed the limit of {MAX_HEADERS_BYTES} bytes",
        code="message_too_large", offset=offset, section="prelude", data=prelude, limit=MAX_HEADERS_BYTES,
        size=hlen)


class EventStreamDecoder:
    """Incremental, bounded decoder of AWS event-stream messages.

    ``feed(chunk)`` returns the messages ``chunk`` completed, ``close()`` ends the stream (raising
    ``EventStreamError`` with code ``truncated`` when it ends inside a message). Messages that lie whole inside a
    chunk are read from it in place; only the bytes of one unfinished message are held, in the pieces they
    arrived in, and joined once when the message completes, so the cost stays linear whatever the chunking.
    A message announced over ``max_message_bytes`` is refused as soon as its 12-byte prelude is there.
    """

    __slots__ = ("_max", "_parts", "_plen", "_total", "_hlen", "_start", "_seen", "_failed")

    #: What each checked message becomes (a subclass may build another object from the same bytes).
    #: ``_build(headers section, payload, offset)`` is the authority: it reads the section (raising
    #: ``bad_header``) and builds the message. A section it read before may be a key of ``_known``, whose value
    #: gives the same message as ``_make(value, payload)`` without reading the section again: a stream repeats a
    #: handful of sections, one per event type, and this spares a call per message.
    _build = staticmethod(_message_of)
    _known: dict[bytes, object] = _HEADERS_SEEN  # type: ignore[assignment]
    _make = staticmethod(_message_with)

    def __init__(self, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        self._max = max_message_bytes
        self._parts: list[bytes] = []  # the pieces of the unfinished message
        self._plen = 0  # their size
        self._total = 0  # the unfinished message's total length, once its prelude is checked (else 0)
        self._hlen = 0
        self._start = 0  # where the unfinished message starts in the stream
        self._seen = 0  # bytes fed before the current chunk
        self._failed: EventStreamError | None = None

    @property
    def has_pending(self) -> bool:
        """True when bytes of an unfinished message are held."""
        return self._plen > 0

    @property
    def buffered_bytes(self) -> int:
        """How many bytes of an unfinished message are held (never more than ``max_message_bytes``)."""
        return self._plen

    def feed(self, chunk: bytes | bytearray | memoryview) -> list[EventStreamMessage]:
        """Return the messages ``chunk`` completed. Raises ``EventStreamError`` on bytes that are not an event
        stream; the messages completed before the fault are in its ``messages``."""
        if self._failed is not None:
            raise self._failed
        if not chunk:
            return []
        data = chunk if isinstance(chunk, bytes) else bytes(chunk)
        n = len(data)
        if self._total and self._plen + n < self._total:
            # inside a message whose prelude was checked, not finishing it: only hold the piece
            self._parts.append(data)
            self._plen += n
            self._seen += n
            return []
        out: list[EventStreamMessage] = []
        try:
            self._feed(data, out)
        except EventStreamError as exc:
            exc.messages = out
            self._fail(exc)
            raise
        return out

    def _feed(self, chunk: bytes, out: list[EventStreamMessage]) -> None:
        n = len(chunk)
        seen = self._seen  # where chunk[0] is in the stream
        self._seen = seen + n
        pos = 0
        if self._plen:
            pos = self._fill(chunk, out)
            if self._plen:
                return  # the chunk did not finish the pending message
        pos = self._split(chunk, pos, seen, out)
        if pos < n:
            rest = chunk[pos:] if pos else chunk
            self._parts.append(rest)
            self._plen = len(rest)
            self._start = seen + pos

    def _split(self, chunk: bytes, pos: int, seen: int, out: list) -> int:
        """Append to ``out`` the messages that lie whole in ``chunk`` from ``pos`` on, each checked (prelude, then
        message checksum) before anything in it is read; return where the first unfinished one starts (its
        prelude checked and its lengths kept when the prelude is whole). ``seen``: where ``chunk`` starts in
        the stream."""
        n = len(chunk)
        limit = self._max
        crc32 = zlib.crc32
        unpack = _PRELUDE_UNPACK
        u32 = _U32_UNPACK
        build, known, make = self._build, self._known, self._make
        while n - pos >= _PRELUDE:
            total, hlen, pcrc = unpack(chunk, pos)
            if crc32(chunk[pos:pos + 8]) != pcrc or not MIN_MESSAGE_BYTES <= total <= limit \
                    or hlen > total - MIN_MESSAGE_BYTES or hlen > MAX_HEADERS_BYTES:
                raise _prelude_error(chunk[pos:pos + _PRELUDE], limit, seen + pos)
            end = pos + total - 4  # where the message checksum is
            if end + 4 > n:
                self._total, self._hlen = total, hlen  # checked: what is held stays under the limit
                break
            # (a copy of the message, freed before the payload is copied: the peak stays what the payload takes)
            if crc32(chunk[pos:end]) != u32(chunk, end)[0]:
                raise _crc_error(chunk, pos, total, seen + pos)
            hend = pos + _PRELUDE + hlen
            section = chunk[pos + _PRELUDE:hend]
            value = known.get(section, _UNSEEN)
            payload = chunk[hend:end]
            out.append(make(value, payload) if value is not _UNSEEN else build(section, payload, seen + pos))
            pos = end + 4
        return pos

    def _fill(self, chunk: bytes, out: list[EventStreamMessage]) -> int:
        """Take from ``chunk`` what the pending message still needs (its prelude first); return how much."""
        n = len(chunk)
        pos = 0
        if not self._total:
            need = _PRELUDE - self._plen
            if n < need:
                self._add(chunk)
                return n
            self._add(chunk[:need])
            pos = need
            prelude = b"".join(self._parts)
            self._parts = [prelude]
            total, hlen, pcrc = _PRELUDE_UNPACK(prelude)
            if zlib.crc32(prelude[:8]) != pcrc or total > self._max or total < MIN_MESSAGE_BYTES \
                    or hlen > total - MIN_MESSAGE_BYTES or hlen > MAX_HEADERS_BYTES:
                raise _prelude_error(prelude, self._max, self._start)
            self._total, self._hlen = total, hlen
        need = self._total - self._plen
        if n - pos < need:
            self._add(chunk[pos:] if pos else chunk)
            return n
        self._add(chunk[pos:pos + need])
        pos += need
        data = b"".join(self._parts)
        self._parts, self._plen, self._total = [], 0, 0
        self._split(data, 0, self._start, out)  # exactly one message, whose prelude was checked
        return pos

    def _add(self, piece: bytes) -> None:
        self._parts.append(piece)
        self._plen += len(piece)  # within the total length once the prelude is checked: need is what is taken

    def _fail(self, exc: EventStreamError) -> None:
        self._failed = exc
        self._parts, self._plen, self._total = [], 0, 0

    def close(self) -> list[EventStreamMessage]:
        """End the stream. Raises ``EventStreamError`` (``truncated``) when it ends inside a message."""
        if self._failed is not None:
            return []
        held, start, total = self._plen, self._start, self._total
        head = b"".join(self._parts)[:200]
        self._parts, self._plen, self._total = [], 0, 0
        self._seen = 0
        if held:
            expected = f"of the {total} announced" if total else "of a message whose prelude is unfinished"
            raise EventStreamError(
                f"event stream ends inside a message: {held} bytes {expected}", code="truncated", offset=start,
                section="message" if total else "prelude", data=head, size=held)
        return []


# ---- encoding ------------------------------------------------------------------------------------------------------
def _encode_header(name: str, value: HeaderValue) -> bytes:
    raw_name = name.encode("utf-8")
    if len(raw_name) > 255:
        raise ValueError(f"event-stream header name {name[:40]!r}... is longer than 255 bytes of UTF-8")
    head = bytes([len(raw_name)]) + raw_name
    if isinstance(value, bool):
        return head + bytes([HeaderType.BOOL_TRUE if value else HeaderType.BOOL_FALSE])
    if isinstance(value, str) or isinstance(value, (bytes, bytearray)):
        kind = HeaderType.STRING if isinstance(value, str) else HeaderType.BYTES
        raw = value.encode("utf-8") if isinstance(value, str) else bytes(value)
        if len(raw) > 0xFFFF:
            raise ValueError(f"event-stream header {name!r} holds more than 65535 bytes")
        return head + bytes([kind]) + struct.pack(">H", len(raw)) + raw
    if isinstance(value, int):
        if -2 ** 31 <= value < 2 ** 31:
            return head + bytes([HeaderType.INTEGER]) + struct.pack(">i", value)
        return head + bytes([HeaderType.LONG]) + struct.pack(">q", value)
    if isinstance(value, datetime.datetime):
        millis = (value - _EPOCH) // datetime.timedelta(milliseconds=1)
        return head + bytes([HeaderType.TIMESTAMP]) + struct.pack(">q", millis)
    if isinstance(value, uuid.UUID):
        return head + bytes([HeaderType.UUID]) + value.bytes
    raise TypeError(f"event-stream header {name!r}: no header type for a {type(value).__name__}")


def encode_message(headers: dict[str, HeaderValue], payload: bytes = b"") -> bytes:
    """One event-stream message (the inverse of ``EventStreamDecoder``): ``headers`` in their order, each typed
    by its Python value (bool, int as a 4-byte integer or else an 8-byte long, bytes, str, an aware
    ``datetime`` as a timestamp, ``UUID``), then ``payload``, with both checksums. Raises ``ValueError`` for a
    header that does not fit the format, ``TypeError`` for a value no header type holds."""
    section = b"".join(_encode_header(name, value) for name, value in headers.items())
    if len(section) > MAX_HEADERS_BYTES:
        raise ValueError(f"event-stream headers of {len(section)} bytes exceed {MAX_HEADERS_BYTES} bytes")
    total = MIN_MESSAGE_BYTES + len(section) + len(payload)
    prelude = struct.pack(">II", total, len(section))
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + section + bytes(payload)
    return message + struct.pack(">I", zlib.crc32(message))
