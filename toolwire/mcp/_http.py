"""The streamable HTTP transport of the MCP SDK, on an HTTP client that bounds what a server may make toolwire
hold: an answer that is not an event stream is read up to ``limit`` bytes (a ``StreamError`` past it, which the
SDK turns into an error answer for its request; logged as ``mcp.message_too_large``), each event of a stream up to
``limit`` bytes (the SDK's ``max_sse_event_size``), and a body is never decompressed (``Accept-Encoding:
identity``; an answer sent compressed all the same, an event stream too, is refused unread: that request fails).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import httpx2  # the MCP SDK's HTTP client

from .. import _log

__all__ = ["http_transport"]

#: seconds a read may wait on an event stream; each call has its own deadline besides
SSE_READ_TIMEOUT = 300.0


class TooLarge(httpx2.StreamError):
    """An answer over ``max_message_bytes``."""


class Bounded(httpx2.AsyncByteStream):
    """A response body that raises ``TooLarge`` past ``limit`` bytes."""

    def __init__(self, inner: Any, limit: int, label: str) -> None:
        self._inner = inner
        self._limit = limit
        self._label = label

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        async for chunk in self._inner:
            size += len(chunk)
            if size > self._limit:
                _log.emit(_log.WARNING, "mcp.message_too_large", server=self._label, limit=self._limit)
                raise TooLarge(f"the MCP server's answer is larger than max_message_bytes ({self._limit} bytes)")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class Compressed(httpx2.StreamError):
    """An answer sent with a content encoding, though ``identity`` was asked for."""


class Refused(httpx2.AsyncByteStream):
    """A compressed response body: raises ``Compressed`` before a byte of it is read."""

    def __init__(self, inner: Any, label: str) -> None:
        self._inner = inner
        self._label = label

    async def __aiter__(self) -> AsyncIterator[bytes]:
        raise Compressed(f"the MCP server {self._label} sent a compressed answer; only identity is accepted")
        yield b""  # pragma: no cover - makes this an async generator

    async def aclose(self) -> None:
        await self._inner.aclose()


@asynccontextmanager
async def http_transport(url: str, *, headers: Mapping[str, str], auth: tuple[str, str] | None, timeout: float,
                         limit: int, label: str, on_error_status: Callable[[int], None]) -> AsyncIterator[Any]:
    """The SDK's ``(read, write)`` streams for ``url``; ``on_error_status`` hears each HTTP status of 400 or more."""
    from mcp.client.streamable_http import streamable_http_client

    async def on_response(response: httpx2.Response) -> None:
        if response.status_code >= 400:
            on_error_status(response.status_code)
        if response.headers.get("content-encoding", "identity").strip().lower() not in ("", "identity"):
            # asked for identity, sent compressed all the same: refused unread, never expanded (an event stream
            # too: inflating it would keep the session's loop busy for as long as it expands)
            del response.headers["content-encoding"]
            response.stream = Refused(response.stream, label)
            return
        if response.headers.get("content-type", "").lower().startswith("text/event-stream"):
            return  # the SDK bounds each event
        response.stream = Bounded(response.stream, limit, label)

    client = httpx2.AsyncClient(headers={"Accept-Encoding": "identity", **headers},
                                timeout=httpx2.Timeout(timeout, read=SSE_READ_TIMEOUT),
                                auth=httpx2.BasicAuth(*auth) if auth is not None else None,
                                event_hooks={"response": [on_response]})
    async with client:
        async with streamable_http_client(url, http_client=client, max_sse_event_size=limit) as streams:
            yield streams
