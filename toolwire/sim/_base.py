"""What every dialect of the simulator provides, and the per-request state it works on."""

from __future__ import annotations

import binascii
import time
from dataclasses import dataclass, field
from email.message import Message
from typing import TYPE_CHECKING, Any

from ._core import ApiError, Conversation, Fault, Rand, Reply

if TYPE_CHECKING:  # pragma: no cover
    from ._server import SimProvider

__all__ = ["Ev", "Request", "Dialect", "STATUS_TEXT", "bearer", "partial_text", "base64_ok"]


def base64_ok(data: Any) -> bool:
    """Media data as the providers take it in JSON: standard base64, padded, nothing else."""
    if not isinstance(data, str) or not data.isascii():
        return False
    try:
        binascii.a2b_base64(data, strict_mode=True)
    except (binascii.Error, ValueError):
        return False
    return True


@dataclass
class Ev:
    """One streamed event's bytes; ``content`` marks the events that carry tool-call arguments (text when
    there are no calls): faults aim at them."""

    data: bytes
    content: bool = False


@dataclass
class Request:
    """One request being answered."""

    sim: SimProvider
    rand: Rand
    method: str
    path: str
    query: dict[str, list[str]]
    headers: Message
    body: Any = None
    #: the request body's bytes as received (a dialect that authenticates by a signature over them checks it here)
    raw: bytes = b""
    route: dict[str, Any] = field(default_factory=dict)
    model: str = ""
    stream: bool = False
    created: int = field(default_factory=lambda: int(time.time()))
    state: dict[str, Any] = field(default_factory=dict)  # the dialect's own per-request data

    def header(self, name: str) -> str:
        return (self.headers.get(name) or "").strip()

    def q(self, name: str) -> str:
        vals = self.query.get(name) or [""]
        return vals[0]


STATUS_TEXT = {
    400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
    408: "DEADLINE_EXCEEDED", 409: "ABORTED", 429: "RESOURCE_EXHAUSTED", 499: "CANCELLED", 500: "INTERNAL",
    501: "NOT_IMPLEMENTED", 502: "UNAVAILABLE", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED", 529: "UNAVAILABLE",
}


def partial_text(reply: Reply) -> str:
    """The first half of the reply's text (whole words), what a model said before its turn was stopped."""
    words = (reply.text or "").split(" ")
    return " ".join(words[:max(1, len(words) // 2)]) if reply.text else ""


def bearer(req: Request) -> bool:
    auth = req.header("authorization")
    return auth[:7].lower() == "bearer " and bool(auth[7:].strip())


class Dialect:
    """One provider API: routing, auth, request checks, and rendering the scripted model's reply.

    The simulator part of a dialect record (``toolwire.codecs.dialect.Dialect.sim`` names the class, which the
    simulator imports when it starts). ``name`` is the dialect id; ``demo_model`` the model name ``toolwire demo``
    asks for; ``overloaded_status`` the HTTP status of an overloaded server; ``body_indent`` the indentation of a
    whole (non-streaming) JSON body, as the real API sends it (None: compact)."""

    name = ""
    demo_model = "sim"
    overloaded_status = 503
    body_indent: int | None = None

    def route(self, method: str, path: str) -> dict[str, Any] | None:
        raise NotImplementedError

    def authorized(self, req: Request) -> bool:
        raise NotImplementedError

    def auth_error(self, req: Request) -> tuple[int, Any]:
        raise NotImplementedError

    def preflight(self, req: Request) -> None:
        """Header checks made before the body is read (raise ApiError)."""

    def error_body(self, err: ApiError, req: Request) -> Any:
        raise NotImplementedError

    def status_body(self, fault: Fault, req: Request) -> Any:
        """The body of a planned ``Fault.status``."""
        raise NotImplementedError

    def bad_json(self, req: Request, exc: Exception) -> ApiError:
        raise NotImplementedError

    def read(self, req: Request) -> Conversation:
        """Check the request as the provider does (raise ApiError) and return its conversation."""
        raise NotImplementedError

    def events(self, reply: Reply, req: Request, *, max_tokens: bool) -> list[Ev]:
        raise NotImplementedError

    def stream_error(self, kind: str, req: Request, seq: int) -> list[bytes]:
        """The dialect's in-stream error event(s); ``seq`` is the number of events already sent."""
        raise NotImplementedError

    def in_stream_error_status(self, kind: str, req: Request) -> tuple[int, Any]:
        """What a non-streaming request gets for ``Fault.in_stream_error``."""
        code = {"overloaded": self.overloaded_status, "rate_limit": 429, "server": 500}[kind]
        return code, self.status_body(Fault.status(code), req)

    def whole(self, reply: Reply, req: Request, *, max_tokens: bool) -> Any:
        raise NotImplementedError

    def ending_events(self, reply: Reply, req: Request, *, reason: str, partial: bool) -> list[Ev]:
        """A stream without calls that ends with the raw unclean ending ``reason`` (``Fault.finish``); with
        ``partial`` the first half of the reply's text comes before it."""
        raise NotImplementedError

    def ending_whole(self, reply: Reply, req: Request, *, reason: str, partial: bool) -> Any:
        """The non-streaming body of ``ending_events``."""
        raise NotImplementedError

    def content_type(self, req: Request) -> str:
        return "text/event-stream; charset=utf-8"

    def response_headers(self, req: Request) -> dict[str, str]:
        return {}

    def finish(self, reply: Reply, req: Request, *, outcome: str) -> None:
        """Remember what the provider stores after a response (``outcome``: ok, max_tokens, failed)."""
