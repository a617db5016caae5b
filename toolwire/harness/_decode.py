"""Bounded decoding of a response body's ``Content-Encoding``.

httpx inflates each network chunk whole, however much it expands to; the transports read the raw bytes instead
(``iter_raw``) and decode them here, at most ``STEP`` bytes of output per step, counting the decoded bytes
against a cap. ``gzip`` (``x-gzip``) and ``deflate`` are accepted (``ACCEPT_ENCODING`` asks for those only);
``identity`` or no header passes the bytes through, counted likewise. Stacked codings (``gzip, gzip``), any other
coding, or bytes that do not decode raise ``BodyDecodeError``; a body over the cap raises ``BodyTooLarge``. What is
held at any time is one raw chunk and one step of output, whatever the ratio of the compression.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

__all__ = ["ACCEPT_ENCODING", "STEP", "BodyDecodeError", "BodyTooLarge", "Decoder"]

#: what the transports ask for: only codings decoded here, step by step
ACCEPT_ENCODING = "gzip, deflate"
#: the most decoded bytes produced by one step
STEP = 64 * 1024


class BodyDecodeError(ValueError):
    """A body whose ``Content-Encoding`` is stacked, unknown, or whose bytes do not decode."""


class BodyTooLarge(ValueError):
    """A body that decodes to more than its cap."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the body decodes to more than {limit} bytes")
        self.limit = limit


def _codings(header: str | None) -> list[str]:
    return [c for c in (p.strip().lower() for p in (header or "").split(",")) if c and c != "identity"]


class Decoder:
    """Decodes one body. ``feed(raw)`` yields its decoded bytes in pieces of at most ``STEP`` bytes; ``close()``
    checks that a compressed body ended. Past ``limit`` decoded bytes ``BodyTooLarge`` is raised, before the
    piece that crosses it is handed out. ``truncate=True`` stops at ``limit`` instead (the last piece is cut)
    and sets ``full``."""

    def __init__(self, content_encoding: str | None, limit: int, *, truncate: bool = False) -> None:
        codings = _codings(content_encoding)
        if len(codings) > 1:
            raise BodyDecodeError(f"stacked content encodings are refused ({content_encoding!r})")
        self.coding = codings[0] if codings else None
        if self.coding not in (None, "gzip", "x-gzip", "deflate"):
            raise BodyDecodeError(f"content encoding {self.coding!r} is not accepted")
        self.limit = limit
        self.truncate = truncate
        self.size = 0
        self.full = False
        self._z = zlib.decompressobj(zlib.MAX_WBITS if self.coding == "deflate" else zlib.MAX_WBITS | 16)
        self._first = True  # deflate: the first bytes decide between zlib-wrapped and raw
        self._head = b""  # deflate: the first byte while it comes alone (the zlib header is two bytes)

    @staticmethod
    def _gzip() -> zlib._Decompress:
        return zlib.decompressobj(zlib.MAX_WBITS | 16)

    def _count(self, piece: bytes) -> bytes:
        room = self.limit - self.size
        if len(piece) > room:
            if not self.truncate:
                raise BodyTooLarge(self.limit)
            piece, self.full = piece[:room], True
        self.size += len(piece)
        if self.size >= self.limit and self.truncate:
            self.full = True
        return piece

    def feed(self, raw: bytes) -> Iterator[bytes]:
        if self.full:
            return
        if self.coding is None:
            for i in range(0, len(raw), STEP):
                yield self._count(raw[i:i + STEP])
                if self.full:
                    return
            return
        data = raw
        if self.coding == "deflate" and self._first:
            # the zlib header is two bytes: decide between zlib-wrapped and raw only once both are here
            data = self._head + raw
            if len(data) < 2:
                self._head = data
                return
            self._head = b""
        while data and not self.full:
            z = self._z
            if z.eof:
                # a gzip body may hold several members (RFC 1952); anything after a deflate stream is damage
                if self.coding in ("deflate", "raw-deflate"):
                    raise BodyDecodeError("bytes after the end of the deflate stream")
                z = self._z = self._gzip()
            try:
                out = z.decompress(data, STEP)
            except zlib.error as exc:
                if self.coding == "deflate" and self._first:  # a raw deflate stream, as some servers send
                    self.coding, self._first = "raw-deflate", False
                    self._z = zlib.decompressobj(-zlib.MAX_WBITS)
                    continue
                raise BodyDecodeError(f"the body does not decode as {self.coding}: {exc}") from None
            self._first = False
            data = z.unconsumed_tail or z.unused_data
            if out:
                yield self._count(out)
            elif not z.eof and not z.unconsumed_tail:
                break  # the input is used up and more is needed

    def close(self) -> None:
        """Raise ``BodyDecodeError`` when a compressed body stopped before its end."""
        if self._head or (self.coding is not None and not self.full and not self._z.eof and not self._first):
            raise BodyDecodeError(f"the {self.coding} body ends before its end")
