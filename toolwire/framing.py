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
    """

    __slots__ = ("_buf", "_max", "_started", "_skip_lf", "_data", "_event", "_id", "_retry", "_pending", "_dropped",
                 "_parts", "_plen")

    def __init__(self, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        self._max = max_message_bytes
        self._buf = b""  # bytes after the last complete line
        self._parts: list[bytes] = []  # later pieces of that unfinished line
        self._plen = 0
        self._started = False  # BOM check done
        self._skip_lf = False  # the previous chunk ended with CR: a leading LF belongs to it
        self._data: list[bytes] = []
        self._event: str | None = None
        self._id: str | None = None
        self._retry: int | None = None
        self._pending = 0  # bytes held for the message being built
        self._dropped = False

    @property
    def unterminated_last_line(self) -> bool:
        """True when ``close()`` found a last line without its line end (taken as a line all the same)."""
        return self._dropped

    @property
    def has_pending(self) -> bool:
        """True when bytes of an unfinished message are held."""
        return bool(self._buf or self._parts or self._data or self._event is not None)

    def feed(self, chunk: bytes) -> list[SSEMessage]:
        if not chunk:
            return []
        if self._skip_lf:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
                if not chunk:
                    return []
        if b"\r" in chunk:
            if chunk[-1:] == b"\r":
                self._skip_lf = True
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if not self._started:
            buf = self._buf + chunk
            if len(buf) < 3 and _BOM.startswith(buf):
                self._buf = buf
                return []
            self._started = True
            self._buf = b""
            chunk = buf[3:] if buf.startswith(_BOM) else buf
        end = chunk.rfind(b"\n")
        if end < 0:
            # no line end yet: keep the pieces, join them once when the line completes (linear, not quadratic)
            self._parts.append(chunk)
            self._plen += len(chunk)
            if self._plen + len(self._buf) + self._pending > self._max:
                raise _too_big("SSE message", self._plen + len(self._buf) + self._pending, self._max, chunk)
            return []
        if self._parts:
            buf = b"".join([self._buf, *self._parts, chunk])
            end += len(buf) - len(chunk)
            self._parts = []
            self._plen = 0
        elif self._buf:
            end += len(self._buf)
            buf = self._buf + chunk
        else:
            buf = chunk
        self._buf = buf[end + 1:]
        out: list[SSEMessage] = []
        lines = buf[:end].split(b"\n")
        data = self._data
        for line in lines:
            if not line:
                if data:
                    out.append(SSEMessage(b"\n".join(data), self._event, self._id, self._retry))
                    data = self._data = []
                self._event = self._retry = None  # the last event id persists, as the standard says
                self._pending = 0
                continue
            first = line[0]
            if first == 100 and line[:6] == b"data: ":  # 'd': the hot path
                data.append(line[6:])
                self._pending += len(line)
                if self._pending > self._max:
                    raise _too_big("SSE message", self._pending, self._max, line)
                continue
            if first == 58:  # ':' comment
                continue
            colon = line.find(b":")
            if colon < 0:
                field, value = line, b""
            else:
                field = line[:colon]
                value = line[colon + 2:] if line[colon + 1:colon + 2] == b" " else line[colon + 1:]
            if field == b"data":
                data.append(value)
                self._pending += len(line)
                if self._pending > self._max:
                    raise _too_big("SSE message", self._pending, self._max, line)
            elif field == b"event":
                self._event = value.decode("utf-8", "replace") or None  # empty: the default type
            elif field == b"id":
                if b"\x00" not in value:
                    self._id = value.decode("utf-8", "replace")
            elif field == b"retry":
                if value.isdigit():
                    self._retry = int(value)
            # other fields are ignored, as the standard says
        if self._pending + len(self._buf) > self._max:
            raise _too_big("SSE message", self._pending + len(self._buf), self._max, self._buf or b"".join(data[-1:]))
        return out

    def close(self) -> list[SSEMessage]:
        out: list[SSEMessage] = []
        if self._parts:
            self._buf = b"".join([self._buf, *self._parts])
            self._parts = []
            self._plen = 0
        if self._buf:
            # a last line without its line end: taken as a line (recorded servers often omit the final
            # newline); a payload cut inside it fails to decode downstream, so nothing cut is ever accepted
            self._dropped = True
            self._buf, line = b"", self._buf
            out.extend(self.feed(line + b"\n"))
        if self._data:
            out.append(SSEMessage(b"\n".join(self._data), self._event, self._id, self._retry))
        self._data = []
        self._event = self._retry = None
        self._pending = 0
        return out


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
            self._parts.append(chunk)
            self._plen += len(chunk)
            if self._plen > self._max and len(b"".join(self._parts).strip()) > self._max:
                raise _too_big("line", self._plen, self._max, chunk)
            return []
        if self._parts:
            head = b"".join(self._parts)
            buf = head + chunk
            end += len(head)
            self._parts, self._plen = [], 0
        else:
            buf = chunk
        rest = buf[end + 1:]
        if rest:
            self._parts, self._plen = [rest], len(rest)
            if len(rest) > self._max and len(rest.strip()) > self._max:
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
    arrive. Scalars at the top level are not supported (they are reported as a ``FramingError``). Only new bytes
    are scanned, and a value's pieces are joined once when it completes, so the cost is linear in the input.
    """

    __slots__ = ("_parts", "_plen", "_depth", "_in_str", "_esc", "_in_value", "_max", "_unwrap", "_in_array",
                 "_started", "_head", "_array_closed")

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
        return out

    def close(self) -> list[bytes]:
        # an unfinished value is incomplete: the caller learns it from has_pending before closing
        self._parts, self._plen = [], 0
        self._in_value = False
        return []
