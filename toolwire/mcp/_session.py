"""One MCP server's session, kept on an event loop of its own (``_LoopThread``).

A *generation* is one connection: a task that enters the SDK's ``mcp.Client`` (for stdio this starts the server
process) and holds it open until it is told to stop, plus, on a 2026-07-28 connection, a
``subscriptions/listen`` stream for tool-list changes. Calls run as their own tasks on the same loop and share
the generation's JSON-RPC session.

A generation is replaced, never repaired: when a call finds the connection gone (the process exited, the HTTP
server closed), or a server that left a call unanswered does not answer a ping either, the generation is
stopped (stdio: stdin closed, then the process group terminated) and the next call opens a new one, with
``attempts`` tries. The call that was in flight is never sent again: its handler raises ``OutcomeUnknown`` (and
answers a retry of the same call without sending it, see ``_sent``).

Each generation's transport is watched by a ``Wire`` (``_wire``): it says when the server's side ended and why,
and takes the entries the SDK cannot read out of ``tools/list`` answers. Only public parts of the SDK are used.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from contextlib import suppress
from typing import Any

import anyio

from .. import _log
from ..errors import UsageError
from ..registry.content import Content, OutcomeUnknown, ToolError
from ._loop import LoopThread, describe
from ._results import content_from_result
from ._targets import Target
from ._wire import Wire, collect
from .errors import MCPConnectionError, MCPProtocolError, MCPUnreadableAnswer

__all__ = ["Session", "LoopThread", "describe"]

#: bounds on one ``tools/list`` walk: a server whose cursors never end cannot hang or exhaust a listing
MAX_PAGES = 256
MAX_TOOLS = 4096
#: seconds a stopping generation gets to wind down (stdio: 2 s after stdin closes, 2 s after SIGTERM) before its
#: task is cancelled
_STOP_GRACE = 15.0


class _Generation:
    """One connection to the server."""

    def __init__(self, number: int) -> None:
        self.number = number
        self.client: Any = None
        self.task: asyncio.Task[None] | None = None
        self.stop = asyncio.Event()
        self.ended = asyncio.Event()
        self.dead = False
        self.protocol: str | None = None
        self.wire = Wire()

    def why(self, default: str) -> str:
        """``default``, with what the transport knows of the end (an exit code, a message too large)."""
        reason = self.wire.reason
        return default if reason is None else f"{default}: {reason}"


class Session:
    """The server's connection, opened on demand and replaced after a failure (see the module docstring).

    Every coroutine here runs on one event loop (the ``LoopThread`` of the ``MCPServer``)."""

    def __init__(self, target: Target, *, connect_timeout: float, attempts: int, probe_timeout: float,
                 protocol: str, max_message_bytes: int, on_change: Callable[[int], None]) -> None:
        self.target = target
        self.max_message_bytes = max_message_bytes
        self.connect_timeout = connect_timeout
        self.attempts = attempts
        self.probe_timeout = probe_timeout
        self.protocol = protocol
        self.on_change = on_change
        self.gen: _Generation | None = None
        self.generations = 0
        self.closed = False
        self._lock: asyncio.Lock | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        #: what the last complete listing was, to notice a server that restarted with other tools
        self.fingerprint: str | None = None
        #: why the last try to connect failed, when the transport knows (the process exited with a code …)
        self.open_reason: str | None = None

    @property
    def server(self) -> str:
        return self.target.label

    @property
    def protocol_version(self) -> str | None:
        gen = self.gen
        return None if gen is None or gen.dead else gen.protocol

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ---- generations ----------------------------------------------------------------------------------------
    async def ensure(self) -> _Generation:
        """The live generation, opening one (``attempts`` tries) when there is none.

        Raises ``MCPConnectionError`` when every try failed, ``UsageError`` after ``close``."""
        if self.closed:
            raise UsageError(f"the MCP server {self.server} is closed")
        gen = self.gen
        if gen is not None and not gen.dead:
            return gen
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            gen = self.gen
            if gen is not None and not gen.dead:
                return gen
            if gen is not None:
                await self._stop(gen)
            cause = "no attempt was made"
            for attempt in range(1, self.attempts + 1):
                if self.closed:
                    raise UsageError(f"the MCP server {self.server} is closed")
                if attempt > 1:
                    await asyncio.sleep(min(0.2 * 2 ** (attempt - 2), 2.0))
                try:
                    gen = await self._open()
                except Exception as exc:  # noqa: BLE001 - whatever the transport raised, it is this try's failure
                    cause = _log.scrub(self.target.explain(exc))  # an error may quote a URL or a command
                    if self.open_reason is not None:
                        cause = f"{cause} ({self.open_reason})"
                    _log.emit(_log.WARNING, "mcp.connect_failed", server=self.server, attempt=attempt, error=cause)
                    continue
                reconnected = self.gen is not None
                self.gen = gen
                _log.emit(_log.INFO, "mcp.connected", server=self.server, protocol=gen.protocol,
                          generation=gen.number, attempt=attempt)
                if reconnected and self.fingerprint is not None:
                    await self._recheck(gen)
                return gen
            raise MCPConnectionError(
                f"cannot connect to the MCP server {self.server} ({self.attempts} attempt(s)): {cause}",
                server=self.server, attempts=self.attempts, cause=cause)

    async def _open(self) -> _Generation:
        self.open_reason = None
        self.generations += 1
        gen = _Generation(self.generations)
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        async def on_message(message: Any) -> None:
            await self._on_message(gen, message)

        gen.client = self.target.client(on_message, self.protocol, wire=gen.wire, limit=self.max_message_bytes)
        gen.task = asyncio.get_running_loop().create_task(self._own(gen, ready))
        try:
            await asyncio.wait_for(asyncio.shield(ready), self.connect_timeout)
        except BaseException as exc:
            gen.dead = True
            gen.stop.set()
            if not gen.ended.is_set():
                gen.task.cancel()
            with suppress(BaseException):
                await asyncio.wait_for(gen.ended.wait(), _STOP_GRACE)
            if isinstance(exc, TimeoutError):
                raise TimeoutError(f"no answer to the handshake within {self.connect_timeout:g} s") from None
            self.open_reason = gen.wire.reason
            raise
        return gen

    async def _own(self, gen: _Generation, ready: asyncio.Future[None]) -> None:
        """The generation's task: hold the client open until ``gen.stop``."""
        try:
            async with gen.client:
                gen.protocol = gen.wire.version = gen.client.protocol_version
                if not ready.done():
                    ready.set_result(None)
                async with anyio.create_task_group() as tg:
                    if self._listens(gen):
                        tg.start_soon(self._listen, gen)
                    await gen.stop.wait()
                    tg.cancel_scope.cancel()
        except BaseException as exc:  # noqa: BLE001 - the generation ends; how is logged or handed to ready
            if not ready.done():
                if isinstance(exc, Exception):
                    ready.set_exception(exc)
                else:
                    ready.cancel()
            elif not gen.stop.is_set():
                _log.emit(_log.WARNING, "mcp.disconnected", server=self.server, generation=gen.number,
                          reason=gen.why(describe(exc)))
            if not isinstance(exc, Exception):
                raise
        finally:
            gen.dead = True
            gen.ended.set()

    async def _stop(self, gen: _Generation) -> None:
        gen.dead = True
        gen.stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(gen.ended.wait()), _STOP_GRACE)
        except TimeoutError:
            if gen.task is not None:
                gen.task.cancel()

    def _lost(self, gen: _Generation, reason: str) -> None:
        """The connection of ``gen`` is gone: stop it; the next call opens a new one."""
        if gen.dead:
            return
        gen.dead = True
        _log.emit(_log.WARNING, "mcp.disconnected", server=self.server, generation=gen.number,
                  reason=gen.why(reason))
        self.spawn(self._stop(gen))

    async def close(self) -> None:
        self.closed = True
        gen = self.gen
        if gen is not None:
            await self._stop(gen)
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=_STOP_GRACE)

    # ---- tool-list changes --------------------------------------------------------------------------------------
    def _listens(self, gen: _Generation) -> bool:
        """A 2026-07-28 connection delivers list changes on a ``subscriptions/listen`` stream only."""
        session = gen.client.session
        caps = getattr(session, "server_capabilities", None)
        tools = getattr(caps, "tools", None)
        return bool(getattr(tools, "list_changed", False)) and str(gen.protocol or "") >= "2026-07-28"

    async def _listen(self, gen: _Generation) -> None:
        from mcp.client.subscriptions import SubscriptionLost
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED

        try:
            async with gen.client.listen(tools_list_changed=True) as subscription:
                async for _event in subscription:  # the notification itself reaches _on_message (tee)
                    pass
        except Exception as exc:  # noqa: BLE001 - a server without listen support, or a lost stream
            _log.emit(_log.DEBUG, "mcp.listen_ended", server=self.server, generation=gen.number,
                      reason=describe(exc))
            if isinstance(exc, SubscriptionLost) or (isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED):
                self._lost(gen, f"the connection closed ({describe(exc)})")

    async def _on_message(self, gen: _Generation, message: Any) -> None:
        method = getattr(message, "method", None)
        if method == "notifications/tools/list_changed" and not gen.dead:
            self.on_change(gen.number)

    async def _recheck(self, gen: _Generation) -> None:
        """After a reconnection, list the tools in the new session (the SDK checks results against the output
        schemas of the tools it listed): a server that came back with other tools counts as a list change."""
        try:
            entries = await self._pages(gen)
        except Exception:  # noqa: BLE001 - the next listing or call reports it
            return
        if fingerprint(entries) != self.fingerprint:
            self.fingerprint = fingerprint(entries)
            self.on_change(gen.number)

    # ---- requests -----------------------------------------------------------------------------------------------
    async def list_tools(self) -> list[dict[str, Any]]:
        """Every ``tools/list`` page, as MCP JSON entries (one reconnection if the connection is lost meanwhile).

        Raises ``MCPConnectionError``, or ``MCPProtocolError`` for a listing that does not end within the bounds
        or that the server answers with an error."""
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED
        from pydantic import ValidationError

        target = self.target
        for attempt in (1, 2):
            gen = await self.ensure()
            seq = target.status_seq
            try:
                entries = await self._pages(gen)
            except ValidationError as exc:
                raise MCPProtocolError(f"the MCP server {self.server} sent a tools/list page that is not valid MCP: "
                                       f"{describe(exc)}", server=self.server) from None
            except MCPError as exc:
                status = target.last_status if target.status_seq != seq else None
                if exc.error.message == _SDK_ERROR_STATUS and status is not None and (
                        status >= 500 or status in (408, 429)):
                    # a server still starting, a busy gateway: listing is safe to ask again, on a new session
                    self._lost(gen, f"tools/list was answered HTTP {status}")
                    if attempt == 2:
                        raise MCPConnectionError(f"the MCP server {self.server} answered tools/list with HTTP "
                                                 f"{status}", server=self.server, attempts=2,
                                                 cause=f"HTTP {status}") from None
                    await asyncio.sleep(_LIST_RETRY_PAUSE)
                    continue
                if exc.code != CONNECTION_CLOSED:
                    raise MCPProtocolError(f"the MCP server {self.server} answered tools/list with an error: "
                                           f"{exc.error.message} ({exc.code})", server=self.server) from None
                self._lost(gen, "the connection closed during tools/list")
                if gen.wire.too_large:  # not a lost connection: the page would be as large again
                    raise MCPProtocolError(gen.why(f"the MCP server {self.server} could not be listed"),
                                           server=self.server) from None
                if attempt == 2:
                    raise MCPConnectionError(gen.why(f"the MCP server {self.server} went away during tools/list"),
                                             server=self.server, attempts=2, cause=describe(exc)) from None
                continue
            except (MCPProtocolError, UsageError):
                raise
            except TimeoutError:
                raise MCPProtocolError(f"the MCP server {self.server} did not answer tools/list within "
                                       f"{self.connect_timeout:g} s", server=self.server) from None
            except Exception as exc:  # noqa: BLE001 - a transport failure: the connection is gone
                self._lost(gen, describe(exc))
                if attempt == 2:
                    raise MCPConnectionError(f"the MCP server {self.server} went away during tools/list",
                                             server=self.server, attempts=2, cause=describe(exc)) from None
                continue
            self.fingerprint = fingerprint(entries)
            return entries
        raise AssertionError("unreachable")  # pragma: no cover

    async def _pages(self, gen: _Generation) -> list[dict[str, Any]]:
        """Every page of the listing; an entry the SDK cannot read is taken out of its page by the generation's
        ``Wire`` and comes back here as ``{"name": …, INVALID: why}`` (left out by ``build_tools``)."""
        entries: list[dict[str, Any]] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(MAX_PAGES):
            with collect() as unreadable:
                page = await asyncio.wait_for(gen.client.list_tools(cursor=cursor), self.connect_timeout)
            entries.extend(t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in page.tools)
            entries.extend(unreadable)
            if len(entries) > MAX_TOOLS:
                raise MCPProtocolError(f"the MCP server {self.server} lists more than {MAX_TOOLS} tools",
                                       server=self.server)
            cursor = page.next_cursor
            if cursor is None:
                return entries
            if cursor in seen:
                raise MCPProtocolError(f"the MCP server {self.server} repeated the tools/list cursor {cursor!r}",
                                       server=self.server)
            seen.add(cursor)
        raise MCPProtocolError(f"the MCP server {self.server} did not end tools/list within {MAX_PAGES} pages",
                               server=self.server)

    async def call(self, name: str, args: Any, timeout: float) -> Content:
        """``tools/call`` ``name`` with ``args``, answered within ``timeout`` seconds (see ``_call_once``).

        A server that answers that it no longer knows the session (HTTP 404 to a request that carries its id: a
        restarted server) did not take the call: it is sent once more, on a new session."""
        try:
            return await self._call_once(name, args, timeout, resent=False)
        except _SessionGone as gone:
            self._lost(gone.gen, "the server no longer knows the session (HTTP 404)")
            return await self._call_once(name, args, timeout, resent=True)

    async def _call_once(self, name: str, args: Any, timeout: float, *, resent: bool) -> Content:
        """``tools/call`` ``name`` with ``args``, answered within ``timeout`` seconds.

        Returns the result's ``Content``; raises ``ToolError`` (an ``isError`` result: the tool's own answer; or a
        JSON-RPC error that says the call did not run: invalid params, method not found), ``OutcomeUnknown`` (the
        connection broke, no answer in time, or any other error answer, such as the SDK's own for a handler that
        raised: the call may have run), ``MCPConnectionError`` (no connection could be opened: nothing was sent)
        or an ``MCPProtocolError`` that is also an ``OutcomeUnknown`` (an answer that is not a valid result, or
        that could not be read: the call reached the server)."""
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED, PARSE_ERROR, REQUEST_TIMEOUT
        from pydantic import ValidationError

        gen = await self.ensure()
        if gen.wire.ended:
            # the server went away while idle (a stdio process killed between calls): nothing was sent yet, so
            # the call goes to a new session instead of being answered "may or may not have run"
            self._lost(gen, "the connection had closed before the call")
            gen = await self.ensure()
        target = self.target
        seq, unknown = target.status_seq, target.unknown_statuses
        try:
            result = await gen.client.call_tool(name, args, read_timeout_seconds=timeout)
        except asyncio.CancelledError:
            # the caller gave up (its own timeout): the SDK told the server; check that it still answers
            _log.emit(_log.INFO, "mcp.call_cancelled", server=self.server, tool=name)
            self.spawn(self.probe(gen, f"{name} was abandoned"))
            raise
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                self._lost(gen, f"the connection closed during {name}")
                why = gen.wire.reason or exc.error.message
                raise OutcomeUnknown(f"the MCP server {self.server} went away during {name} ({why}): the call may "
                                     "or may not have run") from None
            if exc.code == REQUEST_TIMEOUT:
                _log.emit(_log.WARNING, "mcp.call_timeout", server=self.server, tool=name, timeout=timeout)
                self.spawn(self.probe(gen, f"{name} was not answered within {timeout:g} s"))
                raise OutcomeUnknown(f"the MCP server {self.server} did not answer {name} within {timeout:g} s: "
                                     "the call may or may not have run") from None
            if exc.code == PARSE_ERROR:
                # the answer arrived and could not be read (this client sends only well-formed requests)
                raise MCPUnreadableAnswer(f"the answer of the MCP server {self.server} to {name} could not be read "
                                          f"({exc.error.message}): the call may or may not have run",
                                          server=self.server) from None
            if exc.error.message == _SDK_SESSION_GONE and not resent and target.unknown_statuses == unknown:
                raise _SessionGone(gen) from None
            if _may_have_run(exc.code, exc.error.message, target.unknown_statuses != unknown):
                status = "" if target.status_seq == seq else f", HTTP {target.last_status}"
                raise OutcomeUnknown(f"the MCP server {self.server} failed while handling {name} "
                                     f"({exc.error.message}: JSON-RPC error {exc.code}{status}): the call may or "
                                     "may not have run") from None
            raise ToolError(f"the MCP server refused the call: {exc.error.message} "
                            f"(JSON-RPC error {exc.code})") from None
        except (ValidationError, RuntimeError) as exc:
            raise MCPUnreadableAnswer(f"the MCP server {self.server} answered {name} with a result that is not "
                                      f"valid ({describe(exc)}): the call may or may not have run",
                                      server=self.server) from None
        except Exception as exc:  # noqa: BLE001 - a transport failure mid-call
            self._lost(gen, describe(exc))
            raise OutcomeUnknown(f"the connection to the MCP server {self.server} broke during {name} "
                                 f"({describe(exc)}): the call may or may not have run") from None
        return content_from_result(result)

    async def probe(self, gen: _Generation, why: str) -> None:
        """After a call was left unanswered: a server that does not answer a ping either is stopped (and a new
        session is opened for the next call)."""
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        if gen.dead:
            return
        try:
            await asyncio.wait_for(gen.client.session.send_ping(), self.probe_timeout)
            return
        except MCPError as exc:
            if exc.code not in (CONNECTION_CLOSED, REQUEST_TIMEOUT):
                return  # an error answer is an answer: the server is alive
            reason = describe(exc)
        except Exception as exc:  # noqa: BLE001 - no answer in time, or the transport failed
            reason = describe(exc) if not isinstance(exc, TimeoutError) else \
                f"no answer to a ping within {self.probe_timeout:g} s"
        if gen.dead:
            return
        gen.dead = True
        _log.emit(_log.WARNING, "mcp.session_reset", server=self.server, generation=gen.number,
                  reason=f"{why}; {reason}")
        await self._stop(gen)


def fingerprint(entries: list[dict[str, Any]]) -> str:
    """A digest of a listing (names, schemas, annotations), to compare two listings."""
    import hashlib
    import json

    text = json.dumps(sorted(entries, key=lambda e: str(e.get("name"))), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


#: the pause before tools/list is asked again after a transient HTTP status
_LIST_RETRY_PAUSE = 0.2

# what the MCP SDK's HTTP client reports, as a JSON-RPC error of its own, for an answer that is no JSON-RPC message
_SDK_ERROR_STATUS = "Server returned an error response"  # INTERNAL_ERROR: an HTTP status of 400 or more (not 404)
_SDK_ACCEPTED = "server answered a request with 202 Accepted"  # INVALID_REQUEST
_SDK_CONTENT_TYPE = "Unexpected content type"  # INVALID_REQUEST: a 2xx answer that is neither JSON nor SSE
_SDK_SESSION_GONE = "Session terminated"  # INVALID_REQUEST: HTTP 404 to a request that carried the session's id


class _SessionGone(Exception):
    """The server answered a call that it no longer knows ``gen``'s session: the call was not taken."""

    def __init__(self, gen: Any) -> None:
        super().__init__("session gone")
        self.gen = gen


def _may_have_run(code: int, message: str, unknown_status: bool) -> bool:
    """Whether a JSON-RPC error answering a ``tools/call`` leaves its outcome unknown rather than refused.

    Refusals, which say the call did not run: invalid params (-32602: arguments the server refuses, and an unknown
    tool, as the specification answers it), method not found (-32601), an invalid request (-32600) from the
    server itself, and an HTTP 4xx (other than 404 to the session, see ``call``) with no 5xx meanwhile. Any other
    error may follow a run: the SDK's own answer for a handler that raised (code 0 on a connection opened with
    ``initialize``, -32603 on a 2026-07-28 one, with the exception's text or "Internal server error"), a code a
    server made up, an HTTP 5xx or 408 during the call (a gateway that timed out, a server that crashed: whatever
    the body says), and a 2xx answer that carries no result (202 Accepted, a body of another type): the server
    took the call."""
    from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND

    if unknown_status:
        return True
    if code == INTERNAL_ERROR and message == _SDK_ERROR_STATUS:
        return False  # an HTTP 4xx: the server turned the request away
    if code == INVALID_REQUEST:
        return message == _SDK_ACCEPTED or message.startswith(_SDK_CONTENT_TYPE)
    return code not in (INVALID_PARAMS, METHOD_NOT_FOUND)
