"""``MCPServer``: an MCP server's tools as ``toolwire.Tool`` objects, for a closed registry.

The session lives on a background event-loop thread owned by the ``MCPServer`` object, whether it is opened
with ``with`` or ``async with``; ``tools()`` gives handlers that block (for ``Dispatcher.run`` and ``ToolLoop``)
and ``atools()`` handlers that await (for ``Dispatcher.arun`` and ``AsyncToolLoop``). Each handler sends one
``tools/call`` and maps the answer (see ``_results``); how failures are answered is in the README, "MCP
servers".
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
import os
import shlex
import threading
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, TextIO

from .. import _log
from ..codecs import PROVIDERS
from ..errors import UsageError
from ..registry.content import Content, OutcomeUnknown
from ..registry.context import ToolContext
from ..registry.registry import Registry
from ..registry.tool import DEFAULT_TIMEOUT, Tool
from ._listing import ListedTool, SkippedTool, build_tools, check_effects
from ._sent import SentCalls
from ._session import LoopThread, Session, describe
from ._targets import HttpTarget, StdioTarget, Target, check_protocol, command_label

__all__ = ["MCPServer"]

#: seconds a call may outlive its tool's timeout on the wire: the dispatcher answers at the timeout, then the
#: request is cancelled and, if the server stays silent, the session is replaced
CALL_GRACE = 1.0
#: the default bound on one message from a server (a stdio line, an HTTP answer, an event of a stream)
MAX_MESSAGE_BYTES = 16 * 1024 * 1024


def _positive(name: str, value: object, *, allow_none: bool = False) -> float | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (value > 0 and math.isfinite(value)):
        raise UsageError(f"{name} must be a positive number of seconds, not {value!r}")
    return float(value)


def _require_sdk() -> None:
    try:
        import mcp  # noqa: F401 - the official MCP SDK
    except ImportError as exc:
        raise UsageError(f"toolwire.mcp needs the MCP SDK: pip install 'toolwire[mcp]' ({exc})") from None


class MCPServer:
    """One MCP server: its tools for a registry, the session behind their handlers, and list changes.

    Create it with ``MCPServer.stdio(command, args)`` or ``MCPServer.http(url, headers=...)`` (or
    ``MCPServer.parse(text)``), open it with ``with server:`` or ``async with server:`` (which connects, or
    raises ``MCPConnectionError``), then take ``server.tools()`` / ``server.registry()`` (blocking handlers) or
    ``await server.atools()`` / ``await server.aregistry()`` (async handlers). Closing it stops the session (a
    stdio server's process with it); handlers of a closed server answer ``handler_failed``.

    Options: ``connect_timeout`` (seconds for the handshake and for each ``tools/list`` page),
    ``reconnect_attempts`` (tries to open a session, each time one is needed), ``probe_timeout`` (seconds a
    server that left a call unanswered gets to answer a ping before its session is replaced), ``protocol``
    (``"auto"``: the newest protocol the server speaks; ``"legacy"``: the ``initialize`` handshake),
    ``max_message_bytes`` (16 MiB: the most one message of the server may hold; a larger one ends the
    connection, or over HTTP fails its request) and ``on_change`` (called with the server, in a thread of its
    own, when the server says its tool list changed; notifications that arrive while it runs make one more call
    after it, not one each).
    """

    def __init__(self, target: Target, *, connect_timeout: float = 30.0, reconnect_attempts: int = 3,
                 probe_timeout: float = 5.0, protocol: str = "auto", max_message_bytes: int = MAX_MESSAGE_BYTES,
                 on_change: Callable[[MCPServer], None] | None = None) -> None:
        _require_sdk()
        if not isinstance(target, Target):
            raise UsageError("create an MCPServer with MCPServer.stdio(...), MCPServer.http(...) or "
                             "MCPServer.parse(...)")
        if isinstance(reconnect_attempts, bool) or not isinstance(reconnect_attempts, int) or \
                not 1 <= reconnect_attempts <= 100:
            raise UsageError(f"reconnect_attempts must be an int from 1 to 100, not {reconnect_attempts!r}")
        if on_change is not None and not callable(on_change):
            raise UsageError("on_change must be callable")
        if isinstance(max_message_bytes, bool) or not isinstance(max_message_bytes, int) or max_message_bytes < 1024:
            raise UsageError(f"max_message_bytes must be an int of at least 1024, not {max_message_bytes!r}")
        self._target = target
        self._options = {"connect_timeout": _positive("connect_timeout", connect_timeout),
                         "attempts": reconnect_attempts,
                         "probe_timeout": _positive("probe_timeout", probe_timeout),
                         "protocol": check_protocol(protocol),
                         "max_message_bytes": max_message_bytes}
        self._on_change = on_change
        self._notify = threading.Lock()
        self._notifying = False  # an on_change thread is running
        self._notify_again = False  # and the list changed again meanwhile
        self._thread: LoopThread | None = None
        self._session: Session | None = None
        self._changed = False
        self._skipped: tuple[SkippedTool, ...] = ()
        self._listing: tuple[ListedTool, ...] = ()
        self._guard = threading.Lock()
        #: calls that may have run on the server: a read's retry does not send them again (see ``_sent``)
        self._sent = SentCalls(target.label)

    # ---- constructors -----------------------------------------------------------------------------------------
    @classmethod
    def stdio(cls, command: str, args: Sequence[str] = (), *, env: Mapping[str, str] | None = None,
              cwd: str | os.PathLike[str] | None = None, stderr: TextIO | int | None = None,
              **options: Any) -> MCPServer:
        """A server started as ``command args…`` and spoken to over its stdin and stdout.

        ``env`` is added to a minimal environment (``HOME``, ``PATH``, ``USER`` …; the rest of ours is not
        passed on); ``cwd`` is its working directory; its stderr goes to ``stderr`` (default: ours). Each new
        session (after a crash) starts a new process. ``options``: see the class."""
        return cls(StdioTarget(command, args, env, cwd, stderr), **options)

    @classmethod
    def http(cls, url: str, *, headers: Mapping[str, str] | None = None, **options: Any) -> MCPServer:
        """A server at ``url`` spoken to over streamable HTTP, sending ``headers`` (for example
        ``{"Authorization": "Bearer …"}``) with every request. Header values never reach a log or an error
        message. ``options``: see the class."""
        timeout = _positive("connect_timeout", options.get("connect_timeout", 30.0))
        assert timeout is not None
        return cls(HttpTarget(url, headers, timeout), **options)

    @classmethod
    def parse(cls, text: str, *, headers: Mapping[str, str] | None = None, **options: Any) -> MCPServer:
        """``http://…`` or ``https://…`` is a URL (``http``); anything else a command line split as a shell
        would (``stdio``), as ``toolwire chat --mcp`` takes it."""
        if not isinstance(text, str) or not text.strip():
            raise UsageError("an MCP server is a command line or an http(s):// URL, not an empty string")
        if text.startswith(("http://", "https://")):
            return cls.http(text, headers=headers, **options)
        if headers:
            raise UsageError("headers are for MCP servers reached over HTTP, not for the command "
                             f"{command_label(text.split())}")
        try:
            words = shlex.split(text)
        except ValueError as exc:
            raise UsageError(f"cannot split the MCP server command {command_label(text.split())}: {exc}") from None
        return cls.stdio(words[0], words[1:], **options)

    # ---- state -----------------------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        """The server's command line or URL, as logs and errors name it."""
        return self._target.label

    @property
    def changed(self) -> bool:
        """True once the server said its tool list changed (or came back from a restart with other tools) since
        the last ``tools()``/``registry()``; registries built before keep working unchanged."""
        return self._changed

    @property
    def skipped(self) -> tuple[SkippedTool, ...]:
        """The tools the last listing left out, each with its reason."""
        return self._skipped

    @property
    def listing(self) -> tuple[ListedTool, ...]:
        """The tools the last listing took, each with its effect, where the effect came from and the server's
        hints."""
        return self._listing

    @property
    def protocol_version(self) -> str | None:
        """The protocol version of the current session, None when there is none."""
        session = self._session
        return None if session is None else session.protocol_version

    def __repr__(self) -> str:
        state = "open" if self._session is not None else "closed"
        return f"MCPServer({self.name!r}, {state})"

    # ---- opening and closing ---------------------------------------------------------------------------------
    def _start(self) -> tuple[LoopThread, Session]:
        with self._guard:
            if self._session is not None:
                raise UsageError(f"the MCP server {self.name} is already open")
            thread = LoopThread(name=f"toolwire-mcp {self.name[:40]}")
            session = Session(self._target, on_change=self._changed_now, **self._options)  # type: ignore[arg-type]
            self._thread, self._session = thread, session
            return thread, session

    def _forget(self) -> tuple[LoopThread | None, Session | None]:
        with self._guard:
            thread, session = self._thread, self._session
            self._thread = self._session = None
            return thread, session

    def open(self) -> MCPServer:
        """Connect (``with server:`` does it). Raises ``MCPConnectionError`` (nothing stays open then)."""
        thread, session = self._start()
        try:
            thread.run(session.ensure())
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Stop the session (a stdio server's process with it). Closing twice is harmless."""
        thread, session = self._forget()
        if thread is None or session is None:
            return
        try:
            thread.run(session.close(), timeout=60.0)
        except Exception:  # noqa: BLE001 - closing is best effort; the loop goes either way
            pass
        finally:
            thread.stop()

    async def aopen(self) -> MCPServer:
        """Connect without blocking the running event loop (``async with server:`` does it)."""
        thread, session = self._start()
        try:
            await asyncio.wrap_future(thread.submit(session.ensure()))
        except BaseException:
            await self.aclose()
            raise
        return self

    async def aclose(self) -> None:
        thread, session = self._forget()
        if thread is None or session is None:
            return
        try:
            await asyncio.wait_for(asyncio.wrap_future(thread.submit(session.close())), 60.0)
        except Exception:  # noqa: BLE001
            pass
        finally:
            await asyncio.to_thread(thread.stop)

    def __enter__(self) -> MCPServer:
        return self.open()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    async def __aenter__(self) -> MCPServer:
        return await self.aopen()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()

    def _live(self) -> tuple[LoopThread, Session]:
        thread, session = self._thread, self._session
        if thread is None or session is None:
            raise UsageError(f"the MCP server {self.name} is not open: use `with server:` or "
                             "`async with server:` first")
        return thread, session

    def _changed_now(self, generation: int) -> None:
        """On the session's loop: the server's tool list changed. Logged once until the next listing; the
        callback runs in one thread at a time, once more after it if the list changed again meanwhile (a server
        that floods notifications gets neither a thread nor a log line for each)."""
        if not self._changed:
            _log.emit(_log.INFO, "mcp.tools_changed", server=self.name, generation=generation)
        self._changed = True
        callback = self._on_change
        if callback is None:
            return
        with self._notify:
            if self._notifying:
                self._notify_again = True
                return
            self._notifying = True

        def run() -> None:
            try:
                while True:
                    try:
                        callback(self)
                    except Exception as exc:  # noqa: BLE001 - the application's callback must not stop the session
                        _log.emit(_log.ERROR, "mcp.on_change_failed", server=self.name, error=describe(exc))
                    with self._notify:
                        if not self._notify_again:
                            self._notifying = False
                            return
                        self._notify_again = False
            except BaseException:  # a SystemExit in the callback: the next change still calls it
                with self._notify:
                    self._notifying = False
                raise

        threading.Thread(target=run, name="toolwire-mcp-on-change", daemon=True).start()

    # ---- tools ------------------------------------------------------------------------------------------------
    def tools(self, *, effects: Mapping[str, str] | None = None, timeout: float = DEFAULT_TIMEOUT,
              prefix: str = "", dialects: Sequence[str] | None = None,
              trust_read_only: bool = False) -> list[Tool]:
        """The server's tools (every ``tools/list`` page), with handlers that block until the server answers.

        ``effects`` maps tool names (as the server lists them) to ``"read"`` or ``"write"``; every other tool is a
        write, since a server's annotations are its own claims (``trust_read_only=True``, for a server you trust,
        makes a tool with ``readOnlyHint: true`` a read). ``timeout`` is each tool's timeout. ``prefix`` is put before every name (``"files_"``), so that
        several servers fit one registry. A tool that the portability audit says one of ``dialects`` (default:
        every dialect) would refuse, or whose name or schema cannot be declared, is left out (``skipped``).

        Raises ``MCPConnectionError``, ``MCPProtocolError`` (a listing that breaks the protocol or its bounds) or
        ``UsageError`` (bad options, a server that is not open)."""
        thread, session = self._live()
        self._changed = False
        entries = thread.run(session.list_tools())
        return self._build(entries, self._blocking_handler, effects, timeout, prefix, dialects, trust_read_only)

    async def atools(self, *, effects: Mapping[str, str] | None = None, timeout: float = DEFAULT_TIMEOUT,
                     prefix: str = "", dialects: Sequence[str] | None = None,
                     trust_read_only: bool = False) -> list[Tool]:
        """As ``tools()``, with async handlers (for ``Dispatcher.arun`` and ``AsyncToolLoop``)."""
        thread, session = self._live()
        self._changed = False
        entries = await asyncio.wrap_future(thread.submit(session.list_tools()))
        return self._build(entries, self._async_handler, effects, timeout, prefix, dialects, trust_read_only)

    def registry(self, **options: Any) -> Registry:
        """``Registry(self.tools(**options))``: a new frozen snapshot; registries built before are unchanged."""
        return Registry(self.tools(**options))

    async def aregistry(self, **options: Any) -> Registry:
        """``Registry(await self.atools(**options))``."""
        return Registry(await self.atools(**options))

    def _build(self, entries: list[dict[str, Any]], make: Callable[[str, float], Callable[..., Any]],
               effects: Mapping[str, str] | None, timeout: float, prefix: str, dialects: Sequence[str] | None,
               trust_read_only: bool) -> list[Tool]:
        checked = check_effects(effects)
        seconds = _positive("timeout", timeout)
        assert seconds is not None
        if not isinstance(prefix, str):
            raise UsageError(f"prefix must be a string, not {type(prefix).__name__}")
        chosen = tuple(PROVIDERS if dialects is None else dialects)
        if isinstance(dialects, str) or not chosen or any(d not in PROVIDERS for d in chosen):
            raise UsageError(f"dialects must be a non-empty list of: {', '.join(PROVIDERS)}")
        tools, listed, skipped = build_tools(
            entries, lambda name: make(name, seconds), server=self.name, effects=checked, timeout=seconds,
            prefix=prefix, dialects=chosen, trust_read_only=bool(trust_read_only))
        self._listing, self._skipped = tuple(listed), tuple(skipped)
        _log.emit(_log.INFO, "mcp.tools_listed", server=self.name, tools=len(tools), skipped=len(skipped))
        return tools

    # Each handler takes the dispatcher's ToolContext: an attempt of a call that may already have run on the server
    # (a read retried after OutcomeUnknown) is answered from ``_sent`` and never sent again.
    def _blocking_handler(self, name: str, timeout: float) -> Callable[..., Content]:
        wire = timeout + CALL_GRACE
        server = self

        def call_mcp_tool(args: dict[str, Any], ctx: ToolContext | None = None) -> Content:
            server._sent.check(ctx, args, name)
            thread, session = server._live()
            future = thread.submit(session.call(name, args, wire))
            try:
                return future.result(wire + CALL_GRACE)
            except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
                future.cancel()
                exc = OutcomeUnknown(f"the MCP server {server.name} did not answer {name} in time: the call may "
                                     "or may not have run")
                server._sent.remember(ctx, args, exc)
                raise exc from None
            except OutcomeUnknown as exc:
                server._sent.remember(ctx, args, exc)
                raise

        call_mcp_tool.__name__ = f"mcp_{name}"
        return call_mcp_tool

    def _async_handler(self, name: str, timeout: float) -> Callable[..., Any]:
        wire = timeout + CALL_GRACE
        server = self

        async def call_mcp_tool(args: dict[str, Any], ctx: ToolContext | None = None) -> Content:
            server._sent.check(ctx, args, name)
            thread, session = server._live()
            try:
                return await asyncio.wrap_future(thread.submit(session.call(name, args, wire)))
            except OutcomeUnknown as exc:
                server._sent.remember(ctx, args, exc)
                raise

        call_mcp_tool.__name__ = f"mcp_{name}"
        return call_mcp_tool
