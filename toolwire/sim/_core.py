"""Shared pieces of the simulated provider: faults, the request log, request errors, the canonical conversation
the scripted model reads, signatures for replayed state, ids and argument fragmentation."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import random
import string
from dataclasses import dataclass, field
from typing import Any, Mapping

__all__ = [
    "Fault",
    "RecordedRequest",
    "ApiError",
    "Call",
    "Result",
    "Conversation",
    "Reply",
    "Signer",
    "Rand",
    "fragments",
    "text_fragments",
    "dumps",
]

_ALNUM = string.ascii_letters + string.digits
_LOWER = string.ascii_lowercase + string.digits


def dumps(obj: Any, *, indent: int | None = None) -> bytes:
    """JSON as the providers send it: compact (or indented), UTF-8, non-ASCII kept."""
    if indent is None:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()
    return json.dumps(obj, ensure_ascii=False, indent=indent).encode()


# ---- faults and the request log ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fault:
    """One planned misbehaviour for one request. Build with the class methods; ``kind`` names it.

    * ``status(code, body=None, retry_after=None, retry_after_ms=None, retry_delay=None)``: answer with HTTP
      ``code`` and the dialect's error body (``body`` replaces it: a dict is sent as JSON, str/bytes verbatim);
      ``retry_after`` (seconds) and ``retry_after_ms`` become the ``retry-after`` / ``retry-after-ms`` headers,
      ``retry_delay`` (seconds) a ``google.rpc.RetryInfo`` detail in Google error bodies.
    * ``cut(at=0.5)``: close the connection after ``at`` of the response, counted over the bytes that carry
      the tool calls (text when there are none): mid-call, no terminator.
    * ``in_stream_error(kind="overloaded")``: after part of the call was streamed, the dialect's in-stream error
      (``"overloaded"``, ``"rate_limit"`` or ``"server"``); a non-streaming request gets the matching HTTP error.
    * ``slow_first_byte(seconds)``: wait before the status line, then answer normally.
    * ``max_tokens()``: the response ends with the dialect's length finish reason inside a call's arguments.
    * ``finish(reason, partial=False)``: the response ends, without calls, with the raw unclean ending ``reason``
      where the dialect puts it: the Chat ``finish_reason`` (``content_filter``), the Responses
      ``incomplete_details.reason`` of a ``response.incomplete`` (``content_filter``), the Anthropic
      ``stop_reason`` (``refusal``), the Gemini ``finishReason`` (``SAFETY``, ``MALFORMED_FUNCTION_CALL`` …,
      with no content) or the Interactions ``status`` (``cancelled``, ``failed``). ``partial`` streams the first
      half of the model's text before that ending.
    * ``raw(body, status=200, content_type=..., headers=None)``: answer with exactly ``body`` (bytes, str, or a
      dict sent as JSON) under ``status``: garbage, HTML, an empty body, an endless line.
    * ``reset(at=0.5)``: like ``cut``, but the connection is reset (TCP RST) instead of closed.
    * ``wire(data)``: write ``data`` to the socket instead of an HTTP response, then close the connection: a
      status line that is none, broken chunked encoding, a Content-Length that lies (recorded with status 0).
    * ``arguments(value)``: the model's calls carry ``value`` as their arguments (any JSON value: nested deeper
      than any parser should follow, huge, not an object), rendered by the dialect as usual.
    * ``ok()``: no fault.

    ``status(...)`` and ``raw(...)`` take ``headers`` (a mapping sent verbatim, e.g. a ``retry-after`` no client
    can read).
    """

    kind: str = "ok"
    code: int | None = None
    body: Any = None
    retry_after: float | None = None
    retry_after_ms: float | None = None
    retry_delay: float | None = None
    at: float = 0.5
    error_kind: str = "overloaded"
    seconds: float = 0.0
    reason: str | None = None
    partial: bool = False
    headers: tuple[tuple[str, str], ...] = ()
    content_type: str | None = None

    @classmethod
    def status(cls, code: int, body: Any = None, retry_after: float | None = None,
               retry_after_ms: float | None = None, retry_delay: float | None = None,
               headers: Mapping[str, str] | None = None) -> Fault:
        return cls(kind="status", code=int(code), body=body, retry_after=retry_after,
                   retry_after_ms=retry_after_ms, retry_delay=retry_delay, headers=_header_pairs(headers))

    @classmethod
    def cut(cls, at: float = 0.5) -> Fault:
        if not 0.0 <= at <= 1.0:
            raise ValueError("cut(at=...) is a fraction between 0 and 1")
        return cls(kind="cut", at=float(at))

    @classmethod
    def reset(cls, at: float = 0.5) -> Fault:
        if not 0.0 <= at <= 1.0:
            raise ValueError("reset(at=...) is a fraction between 0 and 1")
        return cls(kind="reset", at=float(at))

    @classmethod
    def wire(cls, data: bytes) -> Fault:
        if not isinstance(data, bytes):
            raise TypeError("wire(data) takes bytes")
        return cls(kind="wire", body=data)

    @classmethod
    def arguments(cls, value: Any) -> Fault:
        return cls(kind="arguments", body=value)

    @classmethod
    def finish(cls, reason: str, *, partial: bool = False) -> Fault:
        if not isinstance(reason, str) or not reason:
            raise ValueError("finish(reason) is the dialect's raw finish reason, a non-empty string")
        return cls(kind="finish", reason=reason, partial=bool(partial))

    @classmethod
    def raw(cls, body: bytes | str | dict[str, Any] | list[Any], *, status: int = 200,
            content_type: str = "application/json", headers: Mapping[str, str] | None = None) -> Fault:
        if not isinstance(body, (bytes, str, dict, list)):
            raise TypeError("raw(body) takes bytes, str, or a dict or list sent as JSON")
        return cls(kind="raw", code=int(status), body=body, content_type=content_type,
                   headers=_header_pairs(headers))

    @classmethod
    def in_stream_error(cls, kind: str = "overloaded") -> Fault:
        if kind not in ("overloaded", "rate_limit", "server"):
            raise ValueError("in_stream_error kind is 'overloaded', 'rate_limit' or 'server'")
        return cls(kind="in_stream_error", error_kind=kind)

    @classmethod
    def slow_first_byte(cls, seconds: float) -> Fault:
        return cls(kind="slow_first_byte", seconds=float(seconds))

    @classmethod
    def max_tokens(cls) -> Fault:
        return cls(kind="max_tokens")

    @classmethod
    def ok(cls) -> Fault:
        return cls(kind="ok")


def _header_pairs(headers: Mapping[str, str] | None) -> tuple[tuple[str, str], ...]:
    return tuple((str(k), str(v)) for k, v in (headers or {}).items())


@dataclass(frozen=True)
class RecordedRequest:
    """One request the simulator received: ``body`` is the parsed JSON (None when it was not JSON),
    ``status`` the HTTP status it answered, ``fault`` the planned fault it consumed (None when the plan was
    empty), ``error`` the message of a 4xx the request checks produced, ``scenario`` the scenario its
    conversation plays (known only while plans for one conversation exist)."""

    dialect: str | None
    method: str
    path: str
    body: Any
    status: int
    fault: Fault | None
    query: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    scenario: str | None = None


class ApiError(Exception):
    """A request the real provider would refuse: the dialect turns it into its own error body."""

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None,
                 kind: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.kind = kind


# ---- the canonical conversation the scripted model reads -----------------------------------------------------


@dataclass
class Call:
    """A tool call the model made earlier in the conversation."""

    id: str | None
    name: str
    args: Any


@dataclass
class Result:
    """A tool result the application sent: ``value`` is the parsed JSON when the content was JSON."""

    call_id: str | None
    name: str | None
    value: Any
    is_error: bool | None = None  # None: the dialect has no flag, decided from the content


@dataclass
class Conversation:
    """The conversation in canonical form: entries ``("user", text)``, ``("text", text)`` (the model's),
    ``("calls", [Call])`` and ``("results", [Result])``, in order."""

    entries: list[tuple[str, Any]] = field(default_factory=list)
    parallel: bool = True

    def add(self, kind: str, value: Any) -> None:
        if kind in ("calls", "results") and self.entries and self.entries[-1][0] == kind:
            self.entries[-1][1].extend(value)
        else:
            self.entries.append((kind, list(value) if kind in ("calls", "results") else value))


@dataclass
class Reply:
    """What the scripted model says: text, or tool calls ``(name, args)``."""

    text: str | None = None
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


# ---- signatures of replayed state (thinking, reasoning, thought signatures) -----------------------------------


class Signer:
    """Opaque, verifiable tokens: the simulator checks replayed state without remembering it."""

    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def _mac(self, nonce: bytes, bound: str) -> bytes:
        return hmac.new(self._secret, nonce + b"\x00" + bound.encode(), hashlib.sha256).digest()[:24]

    def sign(self, bound: str, nonce: bytes, *, prefix: bytes = b"", urlsafe: bool = False) -> str:
        raw = prefix + nonce + self._mac(nonce, bound)
        enc = base64.urlsafe_b64encode if urlsafe else base64.b64encode
        return enc(raw).decode()

    def verify(self, token: Any, bound: str, *, prefix: bytes = b"") -> bool | None:
        """True when ``token`` was signed for ``bound``; False when it was not; None when it is not base64."""
        if not isinstance(token, str) or not token:
            return None
        try:  # proto bytes in JSON: the standard and the URL-safe alphabets are both accepted
            std = token.strip().rstrip("=").replace("-", "+").replace("_", "/")
            raw = base64.b64decode(std + "=" * (-len(std) % 4), validate=True)
        except (ValueError, TypeError):
            return None
        if not raw.startswith(prefix) or len(raw) != len(prefix) + 12 + 24:
            return False
        nonce = raw[len(prefix):len(prefix) + 12]
        return hmac.compare_digest(raw[len(prefix) + 12:], self._mac(nonce, bound))


class Rand:
    """A per-request random source: ids, fragment sizes, write grouping (deterministic for a seeded simulator)."""

    def __init__(self, seed: Any) -> None:
        self.rng = random.Random(seed)

    def token(self, n: int, alphabet: str = _ALNUM) -> str:
        return "".join(self.rng.choice(alphabet) for _ in range(n))

    def lower(self, n: int) -> str:
        return self.token(n, _LOWER)

    def hex(self, n: int) -> str:
        return self.token(n, "0123456789abcdef")

    def nonce(self) -> bytes:
        return bytes(self.rng.getrandbits(8) for _ in range(12))


# ---- fragmentation -------------------------------------------------------------------------------------------


def _token_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of the inside of every JSON string literal and of every number, in ``text``."""
    spans = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            spans.append((i + 1, min(j, n)))
            i = j + 1
        elif ch in "-0123456789":
            j = i
            while j < n and text[j] in "-+.eE0123456789":
                j += 1
            spans.append((i, j))
            i = j
        else:
            i += 1
    return spans


def fragments(text: str, rand: Rand, *, max_len: int = 7) -> list[str]:
    """Split argument JSON the way models stream it: short pieces, cutting inside every string literal and
    number of two characters or more (never at an escape's backslash)."""
    if len(text) <= 1:
        return [text] if text else []
    cuts: set[int] = set()
    for start, end in _token_spans(text):
        if end - start >= 2:
            cuts.add(start + (end - start) // 2)
    pos = 0
    while True:
        pos += rand.rng.randint(1, max_len)
        if pos >= len(text):
            break
        cuts.add(pos)
    # never split right after a backslash (keeps each fragment's escapes whole, like a tokenizer would)
    ordered = sorted(c for c in cuts if 0 < c < len(text) and text[c - 1] != "\\")
    out, prev = [], 0
    for c in ordered:
        out.append(text[prev:c])
        prev = c
    out.append(text[prev:])
    return [f for f in out if f]


def text_fragments(text: str, rand: Rand) -> list[str]:
    """Split answer text into deltas of one to three words."""
    words = text.split(" ")
    out: list[str] = []
    i = 0
    while i < len(words):
        k = rand.rng.randint(1, 3)
        piece = " ".join(words[i:i + k])
        out.append(piece if i + k >= len(words) else piece + " ")
        i += k
    return [f for f in out if f] or [text]
