"""Incremental, bounded framers: bytes in, message payloads out. No I/O, no JSON decoding.

Three framers share one shape, ``feed(chunk) -> list`` and ``close() -> list``:

* ``SSEDecoder``: Server-Sent Events per the WHATWG rules (LF, CRLF and lone CR line ends, a CR and LF split
  across two chunks, ``data:`` with or without the space, several ``data:`` lines joined by ``\\n``, ``event:``,
  ``id:``, ``retry:``, comments, a UTF-8 BOM at the start, dispatch on the blank line).
* ``JSONLinesDecoder``: one payload per line (the format of many recorded fixtures).
* ``JSONBodyDecoder``: a single body, returned whole at ``close()``.
* ``JSONValuesDecoder``: a sequence of JSON values (objects one after another, or the elements of a top-level
  array delivered progressively, as Gemini's ``streamGenerateContent`` without ``alt=sse`` does).

The framers work on bytes and split only on ASCII bytes, so a multi-byte UTF-8 character split across chunks
is never cut: decoding happens once, on the whole payload, in the codec. Every framer refuses to hold more than
``max_message_bytes`` of one pending message and raises ``FramingError`` instead of growing without bound.
"""

from __future__ import annotations

import re

import msgspec

from .errors import FramingError

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "SSEMessage",
    "SSEDecoder",
    "JSONLinesDecoder",
    "JSONBodyDecoder",
    "JSONValuesDecoder",
]

DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024

_BOM = b"\xef\xbb\xbf"
#: CR and LF as byte values: ``13 in data`` is a plain ``memchr``, several times cheaper on a short message than
#: ``b"\r" in data``, which goes through the buffer protocol first
_CR, _LF = 13, 10

#: event names seen, decoded once (providers use a handful)
_EVENT_NAMES: dict[bytes, str | None] = {}
_MISSING = object()


class SSEMessage(msgspec.Struct, gc=False):
    """One dispatched Server-Sent Event.

    ``event`` is None when the message had no ``event:`` field (the WHATWG default type "message");
    ``data`` is the joined data lines, as bytes; ``id`` is the last event id seen so far in the stream (it
    persists across messages, as the standard says); ``retry`` is this message's reconnection time, if any.
    """

    data: bytes
    event: str | None = None
    id: str | None = None
    retry: int | None = None


def _too_big(kind: str, size: int, limit: int, data: bytes) -> FramingError:
    return FramingError(
        f"{kind} of {size} bytes exceeds the limit of {limit} bytes",
        data=data[:200], limit=limit, size=size, code="message_too_large",
    )


class SSEDecoder:
    """Incremental Server-Sent Events decoder.

    ``feed(chunk)`` returns the messages completed by ``chunk``; ``close()`` returns a last message whose
    closing blank line never came, its last line included even without a line end (recorded bodies often end
    that way; a payload cut inside that line does not decode, so it is never mistaken for a whole one).
    Raises ``FramingError`` when one pending message exceeds ``max_message_bytes``.

    Bytes are held until a blank line completes a message; the messages of a chunk are then cut out with one
    ``split`` and the usual shapes (``data: …`` and ``event: …\\ndata: …``) read without a loop over their
    lines. Pending pieces are joined once, when their message completes, so the cost stays linear.
    """

    __slots__ = ("_max", "_started", "_skip_lf", "_id", "_dropped", "_parts", "_plen", "_head", "_bare")

    def __init__(self, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES, *, bare: bool = False) -> None:
        self._max = max_message_bytes
        #: a message of one ``data:`` line and nothing else is returned as its data bytes, not as an
        #: ``SSEMessage`` (what ``StreamParser`` asks for: it needs no id, and most messages are of that kind)
        self._bare = bare
        self._parts: list[bytes] = []  # bytes after the last blank line (an unfinished message)
        self._plen = 0
        self._head = b""  # the first bytes, until the BOM check is done
        self._started = False
        self._skip_lf = False  # the previous chunk ended with CR: a leading LF belongs to it
        self._id: str | None = None  # the last event id persists across messages, as the standard says
        self._dropped = False

    @property
    def unterminated_last_line(self) -> bool:
        """True when ``close()`` found a last line without its line end (taken as a line all the same)."""
        return self._dropped

    @property
    def has_pending(self) -> bool:
        """True when bytes of an unfinished message are held."""
        return any(p.strip(b"\n") for p in self._parts)

    def feed(self, chunk: bytes) -> list[SSEMessage]:
        if not chunk:
            return []
        if self._skip_lf:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
                if not chunk:
                    return []
        if _CR in chunk:
            if self._started and chunk[-1:] != b"\r":
                messages = self._crlf(chunk)
                if messages is not None:
                    return messages
            if chunk[-1:] == b"\r":
                self._skip_lf = True
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if not self._started:
            chunk = self._head + chunk
            if len(chunk) < 3 and _BOM.startswith(chunk):
                self._head = chunk
                return []
            self._head = b""
            self._started = True
            if chunk.startswith(_BOM):
                chunk = chunk[3:]
                if not chunk:
                    return []
        parts = self._parts
        k = chunk.rfind(b"\n\n")
        if k < 0:
            if chunk[:1] == b"\n" and parts and parts[-1][-1:] == b"\n":
                k = -1  # the blank line straddles the chunks
            else:
                parts.append(chunk)
                self._plen += len(chunk)
                if self._plen > self._max:
                    raise _too_big("SSE message", self._plen, self._max, chunk[:200])
                return []
        cut = k + 2
        if parts:
            parts.append(chunk[:cut])
            complete = b"".join(parts)
        else:
            complete = chunk[:cut] if cut < len(chunk) else chunk
        rest = chunk[cut:]
        self._parts = [rest] if rest else []
        self._plen = len(rest)
        if self._plen > self._max:
            raise _too_big("SSE message", self._plen, self._max, rest[:200])
        return self._messages(complete.split(b"\n\n"), complete=True)

    def _crlf(self, chunk: bytes) -> list[SSEMessage] | None:
        """The messages of a chunk whose complete messages are one line each, every line ended by CRLF (as Gemini
        sends), cut on ``\\r\\n\\r\\n`` without rewriting the line ends of the whole chunk first; None when the chunk
        is not of that shape (``feed`` then takes the general path, nothing having changed). Cutting there first
        gives the same messages: a CRLF is one line end wherever it is, so ``\\r\\n\\r\\n`` is always a blank line,
        and a message that holds no CR and no LF reads the same either way."""
        texts = chunk.split(b"\r\n\r\n")
        if len(texts) < 2:
            return None
        rest = texts[-1]
        for i in range(len(texts) - 1):
            text = texts[i]
            if _CR in text or _LF in text:
                return None
        if _CR in rest:
            rest = rest.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if b"\n\n" in rest or rest[:1] == b"\n":
            return None  # a blank line of another kind after the last CRLF one
        parts = self._parts
        if parts:
            parts.append(texts[0])
            texts[0] = b"".join(parts)
        self._parts = [rest] if rest else []
        self._plen = len(rest)
        if self._plen > self._max:
            raise _too_big("SSE message", self._plen, self._max, rest[:200])
        return self._messages(texts, complete=True)

    def _messages(self, texts: list[bytes], *, complete: bool) -> list[SSEMessage]:
        """The messages of ``texts`` (each the lines of one message, without its blank line). With
        ``complete``, the last element is what follows the last blank line (empty) and is skipped."""
        out: list[SSEMessage] = []
        append = out.append
        cache = _EVENT_NAMES
        limit = self._max
        if complete:
            texts.pop()
        if len(texts) > 1 and not all(texts):
            # empty texts (runs of blank lines) dispatch nothing: dropped by one C-level pass, not one by one
            texts = list(filter(None, texts))
        sid = self._id
        bare = self._bare
        for msg in texts:
            if msg[:6] == b"data: " and _LF not in msg and len(msg) <= limit:
                # the usual message: one data line
                append(msg[6:] if bare else SSEMessage(msg[6:], None, sid))
                continue
            if msg[:1] == b"\n":
                msg = msg.lstrip(b"\n")  # extra blank lines dispatch nothing
                if not msg:
                    continue
            if len(msg) > limit:
                raise _too_big("SSE message", len(msg), limit, msg[:200])
            head = msg[:1]
            if head == b"d":
                if msg[:6] == b"data: " and b"\n" not in msg:
                    out.append(msg[6:] if bare else SSEMessage(msg[6:], None, self._id))
                    continue
            elif head == b"e" and msg[:7] == b"event: ":
                nl = msg.find(b"\n")
                if nl > 0 and msg[nl + 1:nl + 7] == b"data: " and msg.find(b"\n", nl + 1) < 0:
                    name = msg[7:nl]
                    event = cache.get(name, _MISSING)
                    if event is _MISSING:
                        event = name.decode("utf-8", "replace") or None
                        if len(cache) < 256:
                            cache[name] = event
                    out.append(SSEMessage(msg[nl + 7:], event, self._id))
                    continue
            message = self._general(msg)
            sid = self._id  # an id: field sets it for this message and the following ones
            if message is not None:
                out.append(message)
        return out

    def _general(self, msg: bytes) -> SSEMessage | None:
        """Any message, line by line, by the standard's rules."""
        data: list[bytes] = []
        event: str | None = None
        retry: int | None = None
        for line in msg.split(b"\n"):
            if not line or line[:1] == b":":  # a comment
                continue
            colon = line.find(b":")
            if colon < 0:
                field, value = line, b""
            else:
                field = line[:colon]
                value = line[colon + 2:] if line[colon + 1:colon + 2] == b" " else line[colon + 1:]
            if field == b"data":
                data.append(value)
            elif field == b"event":
                event = value.decode("utf-8", "replace") or None  # empty: the default type
            elif field == b"id":
                if b"\x00" not in value:
                    self._id = value.decode("utf-8", "replace")
            elif field == b"retry":
                if value.isdigit():
                    retry = int(value)
            # other fields are ignored, as the standard says
        if not data:
            return None  # a message without data lines is not dispatched
        return SSEMessage(b"\n".join(data), event, self._id, retry)

    def close(self) -> list[SSEMessage]:
        rest = b"".join(self._parts)
        self._parts = []
        self._plen = 0
        if not rest:
            return []
        if rest[-1:] != b"\n":
            self._dropped = True  # a last line without its line end: taken as a line
        return self._messages([rest.rstrip(b"\n")], complete=False)


class JSONLinesDecoder:
    """One payload per line. Blank lines are skipped; a last line without a line end is still a payload."""

    __slots__ = ("_parts", "_plen", "_max", "_started")

    def __init__(self, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        self._max = max_message_bytes
        self._parts: list[bytes] = []  # pieces of the unfinished line, joined once when it completes
        self._plen = 0
        self._started = False

    @property
    def has_pending(self) -> bool:
        return any(p.strip() for p in self._parts)

    def feed(self, chunk: bytes) -> list[bytes]:
        if not self._started:
            chunk = b"".join(self._parts) + chunk
            self._parts, self._plen = [], 0
            if len(chunk) < 3 and _BOM.startswith(chunk):
                self._parts, self._plen = [chunk], len(chunk)
                return []
            self._started = True
            if chunk.startswith(_BOM):
                chunk = chunk[3:]
        end = chunk.rfind(b"\n")
        if end < 0:
            if not self._parts:
                chunk = chunk.lstrip()  # white space before a line's first byte is never kept
                if not chunk:
                    return []
            self._parts.append(chunk)
            self._plen += len(chunk)
            if self._plen > self._max:  # white space inside a line counts like anything else
                raise _too_big("line", self._plen, self._max, chunk)
            return []
        if self._parts:
            head = b"".join(self._parts)
            buf = head + chunk
            end += len(head)
            self._parts, self._plen = [], 0
        else:
            buf = chunk
        rest = buf[end + 1:].lstrip()
        if rest:
            self._parts, self._plen = [rest], len(rest)
            if len(rest) > self._max:
                raise _too_big("line", len(rest), self._max, rest)
        out = []
        for line in buf[:end].split(b"\n"):
            line = line.strip()
            if line:
                if len(line) > self._max:
                    raise _too_big("line", len(line), self._max, line)
                out.append(line)
        return out

    def close(self) -> list[bytes]:
        line = b"".join(self._parts).strip()
        self._parts, self._plen = [], 0
        return [line] if line else []


class JSONBodyDecoder:
    """A single body, returned whole by ``close()``; raises ``FramingError`` past ``max_message_bytes``."""

    __slots__ = ("_parts", "_size", "_max")

    def __init__(self, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        self._max = max_message_bytes
        self._parts: list[bytes] = []
        self._size = 0

    @property
    def has_pending(self) -> bool:
        return self._size > 0

    def feed(self, chunk: bytes) -> list[bytes]:
        self._size += len(chunk)
        if self._size > self._max:
            raise _too_big("body", self._size, self._max, chunk)
        self._parts.append(chunk)
        return []

    def close(self) -> list[bytes]:
        body = b"".join(self._parts)
        self._parts = []
        self._size = 0
        if body.startswith(_BOM):
            body = body[3:]
        body = body.strip()
        return [body] if body else []


_OUTSIDE = re.compile(rb'["\[\]{}]')
_INSIDE = re.compile(rb'["\\]')
_SPACE_OR_COMMA = b" \t\r\n,"


class JSONValuesDecoder:
    """A sequence of top-level JSON values, found by bracket depth (strings and escapes respected).

    With ``unwrap_array`` (the default), a top-level array is not one value: each of its elements is returned as
    soon as it is complete, so an array streamed progressively (``[{…}\\n,{…}\\n]``) yields its elements as they
    arrive; ``array_end`` tells which values came after the first such array closed. Scalars at the top level
    are not supported (they are reported as a ``FramingError``). Only new bytes are scanned, and a value's pieces
    are joined once when it completes, so the cost is linear in the input.
    """

    __slots__ = ("_parts", "_plen", "_depth", "_in_str", "_esc", "_in_value", "_max", "_unwrap", "_in_array",
                 "_started", "_head", "_array_closed", "emitted", "array_end")

    def __init__(self, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES, *, unwrap_array: bool = True) -> None:
        self._max = max_message_bytes
        self._unwrap = unwrap_array
        self._parts: list[bytes] = []  # pieces of the value in progress from earlier chunks
        self._plen = 0
        self._depth = 0
        self._in_str = False
        self._esc = False  # the previous chunk ended inside a string right after a backslash
        self._in_value = False
        self._in_array = False  # inside an unwrapped top-level array
        self._array_closed = False
        self._started = False
        self._head = b""  # first bytes, until the BOM check is done
        self.emitted = 0  # values returned so far
        #: how many values had been returned when the first top-level array closed (None: it has not):
        #: the values from that number on came after the array's end
        self.array_end: int | None = None

    @property
    def has_pending(self) -> bool:
        return self._in_value or (self._in_array and not self._array_closed)

    def feed(self, chunk: bytes) -> list[bytes]:
        if not self._started:
            chunk = self._head + chunk
            if len(chunk) < 3 and _BOM.startswith(chunk):
                self._head = chunk
                return []
            self._head = b""
            self._started = True
            if chunk.startswith(_BOM):
                chunk = chunk[3:]
        out: list[bytes] = []
        n = len(chunk)
        pos = 0
        vstart = 0
        while pos < n:
            if not self._in_value:
                # between values: skip white space and commas, find the next value's first byte
                while pos < n and chunk[pos] in _SPACE_OR_COMMA:
                    pos += 1
                if pos >= n:
                    break
                c = chunk[pos]
                if c == 91 and self._unwrap and not self._in_array:  # '[' opens the top-level array
                    self._in_array = True
                    self._array_closed = False
                    pos += 1
                    continue
                if c == 93 and self._in_array:  # ']' closes it
                    self._in_array = False
                    self._array_closed = True
                    if self.array_end is None:
                        self.array_end = self.emitted + len(out)
                    pos += 1
                    continue
                if c not in (123, 91):  # '{' or '['
                    raise FramingError(f"expected a JSON object or array, got {chr(c)!r}",
                                       data=chunk[pos:pos + 200], code="not_json")
                self._in_value = True
                self._depth = 0
                vstart = pos
            if self._esc:
                self._esc = False
                pos += 1  # the escaped byte
                continue
            if self._in_str:
                m = _INSIDE.search(chunk, pos)
                if m is None:
                    pos = n
                    break
                pos = m.end()
                if m.group() == b"\\":
                    if pos >= n:
                        self._esc = True
                        break
                    pos += 1
                else:
                    self._in_str = False
                continue
            m = _OUTSIDE.search(chunk, pos)
            if m is None:
                pos = n
                break
            pos = m.end()
            c = m.group()
            if c == b'"':
                self._in_str = True
            elif c in (b"{", b"["):
                self._depth += 1
            else:
                self._depth -= 1
                if self._depth == 0:
                    piece = chunk[vstart:pos]
                    size = self._plen + len(piece)
                    if size > self._max:
                        raise _too_big("JSON value", size, self._max, piece[:200])
                    out.append(b"".join([*self._parts, piece]) if self._parts else piece)
                    self._parts, self._plen = [], 0
                    self._in_value = False
        if self._in_value:
            piece = chunk[vstart:]
            self._parts.append(piece)
            self._plen += len(piece)
            if self._plen > self._max:
                raise _too_big("JSON value", self._plen, self._max, piece[:200])
        self.emitted += len(out)
        return out

    def close(self) -> list[bytes]:
        # an unfinished value is incomplete: the caller learns it from has_pending before closing
        self._parts, self._plen = [], 0
        self._in_value = False
        return []
