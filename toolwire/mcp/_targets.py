"""Where an MCP server is: a command to start (stdio) or a URL (streamable HTTP), and the SDK client for it.

``label`` names the server in logs and errors: the command line, or the URL without user info, query or
fragment. Secrets never reach either: header values (and the token of a ``Bearer`` header) and the values of
environment variables whose names look secret are registered with the log scrubber, and ``label`` is scrubbed.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, TextIO
from urllib.parse import urlsplit, urlunsplit

from .. import __version__, _log
from ..errors import UsageError

__all__ = ["Target", "StdioTarget", "HttpTarget"]

MessageHandler = Callable[[Any], Awaitable[None]]
_SECRET_NAME = re.compile(r"key|token|secret|passw|auth|cookie|credential|session", re.IGNORECASE)
_PROTOCOLS = ("auto", "legacy")
_SSE_READ_TIMEOUT = 300.0


def check_protocol(protocol: str) -> str:
    if protocol not in _PROTOCOLS:
        raise UsageError(f"protocol must be one of {', '.join(_PROTOCOLS)}, not {protocol!r}")
    return protocol


class Target:
    label: str

    def transport(self) -> Any:
        raise NotImplementedError

    def client(self, message_handler: MessageHandler, protocol: str) -> Any:
        """A new, unopened ``mcp.Client`` for this server."""
        from mcp import Client
        from mcp_types import Implementation

        handler: Any = message_handler  # the SDK's MessageHandlerFnT protocol, which this coroutine function is
        return Client(self.transport(), mode=protocol, cache=None, message_handler=handler,
                      client_info=Implementation(name="toolwire", version=__version__))


class StdioTarget(Target):
    def __init__(self, command: str, args: Sequence[str], env: Mapping[str, str] | None,
                 cwd: str | os.PathLike[str] | None, stderr: TextIO | int | None) -> None:
        if not isinstance(command, str) or not command:
            raise UsageError("the MCP server's command must be a non-empty string")
        if isinstance(args, str) or not all(isinstance(a, str) for a in args):
            raise UsageError("args must be a sequence of strings (one per argument), not a string")
        if env is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            raise UsageError("env must map strings to strings")
        self.command = command
        self.args = list(args)
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.stderr = stderr
        for key, value in (self.env or {}).items():
            if _SECRET_NAME.search(key):
                _log.add_secret(value)
        self.label = _log.scrub(shlex.join([command, *self.args]))

    def _errlog(self) -> Any:
        """Where the server's stderr goes: the given stream or descriptor, else ours when it has a descriptor
        (under a capturing test runner it may not), else nowhere."""
        target: Any = self.stderr if self.stderr is not None else sys.stderr
        if isinstance(target, int):
            return target
        try:
            target.fileno()
        except (AttributeError, OSError, ValueError):
            return subprocess.DEVNULL
        return target

    def transport(self) -> Any:
        from mcp.client.stdio import StdioServerParameters, stdio_client

        cwd = None if self.cwd is None else os.fspath(self.cwd)
        params = StdioServerParameters(command=self.command, args=self.args, env=self.env, cwd=cwd)
        return stdio_client(params, errlog=self._errlog())


class HttpTarget(Target):
    def __init__(self, url: str, headers: Mapping[str, str] | None, timeout: float) -> None:
        if not isinstance(url, str):
            raise UsageError("the MCP server's url must be a string")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError("the MCP server's url must be an http:// or https:// URL with a host")
        if headers is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
            raise UsageError("headers must map strings to strings")
        self.url = url
        self.headers = dict(headers or {})
        self.timeout = timeout
        for value in self.headers.values():
            _log.add_secret(value)
            scheme, _, token = value.partition(" ")
            if token and scheme.isalpha():
                _log.add_secret(token.strip())
        if parts.password:
            _log.add_secret(parts.password)
        host = parts.hostname + (f":{parts.port}" if parts.port else "")
        self.label = _log.scrub(urlunsplit((parts.scheme, host, parts.path, "", "")))

    def transport(self) -> Any:
        return self._transport()

    @asynccontextmanager
    async def _transport(self) -> AsyncIterator[Any]:
        import httpx2  # the MCP SDK's HTTP client
        from mcp.client.streamable_http import streamable_http_client

        # reads may wait long on an event stream; each call has its own deadline besides
        timeout = httpx2.Timeout(self.timeout, read=_SSE_READ_TIMEOUT)
        async with httpx2.AsyncClient(headers=self.headers, timeout=timeout) as http:
            async with streamable_http_client(self.url, http_client=http) as streams:
                yield streams
