"""Between a transport and the MCP SDK's session: what toolwire needs to see of the messages, through the SDK's
public ``Transport`` contract (a pair of streams) only.

``Wire`` wraps a transport's streams and

- notes when the server's side of the connection has ended (``ended``), so that a call is not sent over a
  connection that is already gone;
- takes out of each ``tools/list`` answer the entries the SDK cannot read (an ``inputSchema`` whose root is an
  array, an entry without a name …), so that one bad entry does not make the SDK refuse the whole page; each is
  handed to the listing that asked for it (``collect``), which reports it as a skipped tool.
"""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, contextmanager
from types import TracebackType
from typing import Any

import anyio

from ._listing import INVALID
from ._loop import describe

__all__ = ["Wire", "collect"]

#: the entries left out of the tools/list answers of the listing running in this context
_COLLECTOR: contextvars.ContextVar[list[dict[str, Any]] | None] = contextvars.ContextVar(
    "toolwire_mcp_collector", default=None)
#: tools/list requests whose answers are checked, at most (older ones are forgotten: their answers pass unchecked)
_TRACKED = 64


@contextmanager
def collect() -> Any:
    """Within this block, the entries left out of the ``tools/list`` answers to requests sent from it are
    appended to the list it yields."""
    found: list[dict[str, Any]] = []
    token = _COLLECTOR.set(found)
    try:
        yield found
    finally:
        _COLLECTOR.reset(token)


def _key(request_id: Any) -> str:
    return str(request_id)


class Wire:
    """One connection's view of the messages (see the module docstring)."""

    def __init__(self) -> None:
        #: the server's side of the connection has ended (the SDK's session saw the end of its messages)
        self.ended = False
        #: why, when the transport knows (the process exited with a code, a message was too large …)
        self.reason: str | None = None
        #: the connection ended because a message was over max_message_bytes (the same request would be again)
        self.too_large = False
        #: the negotiated protocol version, once known (it decides how a listing is validated)
        self.version: str | None = None
        self._listings: dict[str, list[dict[str, Any]] | None] = {}

    @asynccontextmanager
    async def around(self, transport: Any) -> AsyncIterator[tuple[Any, Any]]:
        """``transport`` (an async context manager yielding ``(read, write)``) with both streams watched."""
        async with transport as (read, write):
            yield _Read(read, self), _Write(write, self)

    # ---- outbound ------------------------------------------------------------------------------------------------
    def sent(self, item: Any) -> None:
        message = getattr(item, "message", None)
        request_id = getattr(message, "id", None)
        if getattr(message, "method", None) == "tools/list" and request_id is not None:
            if len(self._listings) >= _TRACKED:
                self._listings.pop(next(iter(self._listings)))
            self._listings[_key(request_id)] = _COLLECTOR.get()

    # ---- inbound -------------------------------------------------------------------------------------------------
    def received(self, item: Any) -> Any:
        import mcp_types as types

        message = getattr(item, "message", None)
        if not isinstance(message, types.JSONRPCResponse | types.JSONRPCError) or not self._listings:
            return item
        key = _key(message.id)
        if key not in self._listings:
            return item
        collector = self._listings.pop(key)
        if not isinstance(message, types.JSONRPCResponse):
            return item
        kept = self._check_listing(message.result, collector)
        if kept is None:
            return item
        from mcp.shared.message import SessionMessage

        answer = types.JSONRPCResponse(jsonrpc="2.0", id=message.id, result=kept)
        return SessionMessage(message=answer, metadata=item.metadata)

    def _check_listing(self, result: Any, collector: list[dict[str, Any]] | None) -> dict[str, Any] | None:
        """``result`` without the entries the SDK cannot read (each appended to ``collector``), or None when it
        needs no change (or is not a listing at all: the SDK reports that)."""
        tools = result.get("tools") if isinstance(result, dict) else None
        if not isinstance(tools, list) or self._unreadable(result) is None:
            return None
        if self._unreadable({**result, "tools": []}) is not None:
            return None  # the page itself is not valid (its cursor, say), whatever its entries: the SDK says so
        kept: list[Any] = []
        for entry in tools:
            why = _tool_unreadable(entry) or self._unreadable({**result, "tools": [entry]})
            if why is None:
                kept.append(entry)
                continue
            name = entry.get("name") if isinstance(entry, dict) else None
            if collector is not None:
                collector.append({"name": name if isinstance(name, str) else repr(name),
                                  INVALID: f"the entry is not a valid MCP tool: {why}"})
        return {**result, "tools": kept}

    def _unreadable(self, result: dict[str, Any]) -> str | None:
        """None when the SDK reads ``result`` as a ``tools/list`` result of this connection's protocol version,
        else why not."""
        import mcp_types as types
        from mcp_types import methods
        from pydantic import ValidationError

        if self.version is not None:
            try:
                methods.parse_server_result("tools/list", self.version, result)
                return None
            except ValidationError as exc:
                return describe(exc)
            except (KeyError, ValueError):  # a version the SDK's tables do not know: its models decide
                pass
        try:
            types.ListToolsResult.model_validate(result, by_name=False)
        except ValidationError as exc:
            return describe(exc)
        return None


def _tool_unreadable(entry: Any) -> str | None:
    """None when the SDK reads ``entry`` as a tool, else why not."""
    import mcp_types as types
    from pydantic import ValidationError

    try:
        types.Tool.model_validate(entry, by_name=False)
    except ValidationError as exc:
        return describe(exc)
    return None


class _Read:
    """The transport's read stream, watched (``ReadStream`` of the SDK: receive, iteration, close)."""

    def __init__(self, inner: Any, wire: Wire) -> None:
        self._inner = inner
        self._wire = wire

    @property
    def last_context(self) -> contextvars.Context | None:
        """The sender's context of the last item, where the transport's stream carries one (streamable HTTP)."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            item = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._wire.ended = True
            raise
        return self._wire.received(item)

    def __aiter__(self) -> _Read:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _Read:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()


class _Write:
    """The transport's write stream, watched (``WriteStream`` of the SDK)."""

    def __init__(self, inner: Any, wire: Wire) -> None:
        self._inner = inner
        self._wire = wire

    async def send(self, item: Any) -> None:
        self._wire.sent(item)
        await self._inner.send(item)

    def close(self) -> None:
        close = getattr(self._inner, "close", None)
        if callable(close):
            close()

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _Write:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()
