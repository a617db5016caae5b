"""Where an MCP server is: a command to start (stdio) or a URL (streamable HTTP), and the SDK client for it.

``label`` names the server in logs and errors: the command line with the values of options whose names say they
are secrets (``--api-key X``, ``--token=X``) redacted, or the URL without user info, query or fragment and with
path segments that look like tokens redacted (a URL among a command's arguments likewise). Secrets never reach
either: those values, header values (and the token of a ``Bearer`` header) and the values of environment
variables whose names look secret are registered with the log scrubber, and ``label`` is scrubbed.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TextIO
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

from .. import __version__, _log
from ..errors import UsageError
from ._loop import describe
from ._wire import Wire

__all__ = ["Target", "StdioTarget", "HttpTarget"]

MessageHandler = Callable[[Any], Awaitable[None]]
_SECRET_NAME = re.compile(r"key|token|secret|passw|auth|cookie|credential|session", re.IGNORECASE)
_PROTOCOLS = ("auto", "legacy")
#: what HTTP/1.1 sends (RFC 9110 token; visible ASCII with inner spaces and tabs)
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_HEADER_VALUE = re.compile(r"(?:[\x21-\x7e](?:[\t\x20-\x7e]*[\x21-\x7e])?)?")


#: a path segment that looks like a token (webhook URLs carry their secret there): long, letters and digits
_PATH_TOKEN = re.compile(r"(?=[^/]*[0-9])(?=[^/]*[A-Za-z])[A-Za-z0-9_\-.~%+=]{16,}")
#: an option naming a secret, with its value: ``--api-key=X``, ``TOKEN=X`` (as ``env`` takes it)
_OPTION_VALUE = re.compile(r"(-{0,2}[A-Za-z][A-Za-z0-9_.\-]*)=(.*)", re.DOTALL)
_REDACTED = "[redacted]"


def url_label(url: str) -> str:
    """``url`` as a label: no user info, query or fragment, path segments that look like tokens redacted; its
    password, secret query values and path tokens are registered with the log scrubber."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError:
        return _REDACTED
    if parts.password:
        _log.add_secret(parts.password)
        _log.add_secret(unquote(parts.password))
    for name, value in parse_qsl(parts.query):
        if _SECRET_NAME.search(name) or _PATH_TOKEN.fullmatch(value):
            _log.add_secret(value)
    for token in _PATH_TOKEN.findall(parts.path):
        _log.add_secret(token)
        _log.add_secret(unquote(token))
    path = "/".join(_REDACTED if _PATH_TOKEN.fullmatch(seg) else seg for seg in parts.path.split("/"))
    host = parts.netloc.rpartition("@")[2]
    return _log.scrub(urlunsplit((parts.scheme, host, path, "", "")))


def command_label(words: Sequence[str]) -> str:
    """A command line as a label: the values of options whose names say they are secrets (``--api-key X``,
    ``--token=X``, ``API_KEY=X``) redacted, URLs shown as ``url_label`` does; those values are registered with
    the log scrubber."""
    out: list[str] = []
    secret_next = False
    for word in words:
        if secret_next and not word.startswith("-"):
            _log.add_secret(word)
            out.append(_REDACTED)
            secret_next = False
            continue
        secret_next = False
        option = _OPTION_VALUE.fullmatch(word)
        if option and _SECRET_NAME.search(option.group(1)):
            _log.add_secret(option.group(2))
            out.append(f"{option.group(1)}={_REDACTED}")
        elif option and "://" in option.group(2):
            out.append(f"{option.group(1)}={url_label(option.group(2))}")
        elif "://" in word:
            out.append(url_label(word))
        else:
            out.append(word)
            secret_next = word.startswith("-") and _SECRET_NAME.search(word) is not None
    return _log.scrub(shlex.join(out))


def check_protocol(protocol: str) -> str:
    if protocol not in _PROTOCOLS:
        raise UsageError(f"protocol must be one of {', '.join(_PROTOCOLS)}, not {protocol!r}")
    return protocol


class Target:
    label: str
    #: HTTP error statuses seen so far (``status_seq``), and how many of them leave a call's outcome unknown
    #: (5xx, 408): a call compares them before and after to tell a refusal from a failure mid-call
    status_seq = 0
    unknown_statuses = 0
    last_status: int | None = None

    def transport(self, wire: Wire, limit: int) -> Any:
        raise NotImplementedError

    def explain(self, exc: BaseException) -> str:
        """``exc`` (a failure to connect) in one line, with what the transport saw."""
        return describe(exc)

    def client(self, message_handler: MessageHandler, protocol: str, *, wire: Wire, limit: int) -> Any:
        """A new, unopened ``mcp.Client`` for this server, its messages watched by ``wire`` and each at most
        ``limit`` bytes."""
        from mcp import Client
        from mcp_types import Implementation

        handler: Any = message_handler  # the SDK's MessageHandlerFnT protocol, which this coroutine function is
        return Client(wire.around(self.transport(wire, limit)), mode=protocol, cache=None, message_handler=handler,
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
        if stderr in (subprocess.PIPE, subprocess.STDOUT):
            # a pipe nobody reads blocks the server once it fills; stdout would mix its stderr into the protocol
            raise UsageError("stderr must be a file, a descriptor or subprocess.DEVNULL (not PIPE or STDOUT)")
        self.command = command
        self.args = list(args)
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.stderr = stderr
        for key, value in (self.env or {}).items():
            if _SECRET_NAME.search(key):
                _log.add_secret(value)
        self.label = command_label([command, *self.args])

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

    def transport(self, wire: Wire, limit: int) -> Any:
        from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client

        cwd = None if self.cwd is None else os.fspath(self.cwd)
        if os.name != "posix":  # pragma: no cover - the SDK's transport, without toolwire's bounds
            params = StdioServerParameters(command=self.command, args=self.args, env=self.env, cwd=cwd)
            return stdio_client(params, errlog=self._errlog())
        from ._stdio import stdio_transport

        env = get_default_environment() | (self.env or {})
        return stdio_transport(self.command, self.args, env=env, cwd=cwd, errlog=self._errlog(), limit=limit,
                               label=self.label, wire=wire)


class HttpTarget(Target):
    def __init__(self, url: str, headers: Mapping[str, str] | None, timeout: float) -> None:
        if not isinstance(url, str):
            raise UsageError("the MCP server's url must be a string")
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - a port that is not a number raises here
        except ValueError as exc:
            raise UsageError(f"the MCP server's url is not a valid URL ({exc})") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError("the MCP server's url must be an http:// or https:// URL with a host")
        if headers is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
            raise UsageError("headers must map strings to strings")
        self.headers = dict(headers or {})
        for name, value in self.headers.items():
            if _HEADER_NAME.fullmatch(name) is None:
                raise UsageError(f"{name!r} is not an HTTP header name (letters, digits and !#$%&'*+-.^_`|~ only)")
            if _HEADER_VALUE.fullmatch(value) is None:
                # the value is never quoted: it is usually a secret (a key read from a file with its newline)
                raise UsageError(f"the value of the header {name!r} cannot be sent: it holds a line break, a "
                                 "control character or a character outside ASCII, or starts or ends with a space")
        self.timeout = timeout
        for value in self.headers.values():
            _log.add_secret(value)
            scheme, _, token = value.partition(" ")
            if token and scheme.isalpha():
                _log.add_secret(token.strip())
        self.label = url_label(url)  # registers the password, secret query values and path tokens
        host = parts.netloc.rpartition("@")[2]
        #: user info in the URL is sent as basic auth by the HTTP client, never handed to the SDK (which logs URLs)
        self.auth = (unquote(parts.username or ""), unquote(parts.password or "")) if "@" in parts.netloc else None
        self.url = urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
        self.last_status = None
        _scrub_http_logs()

    def explain(self, exc: BaseException) -> str:
        text = describe(exc)
        return text if self.last_status is None else f"{text} (HTTP {self.last_status})"

    def transport(self, wire: Wire, limit: int) -> Any:
        return self._transport(limit)

    def _transport(self, limit: int) -> Any:
        from ._http import http_transport

        self.last_status = None

        def on_status(status: int) -> None:
            self.last_status = status
            if status >= 500 or status == 408:
                self.unknown_statuses += 1
            self.status_seq += 1

        return http_transport(self.url, headers=self.headers, auth=self.auth, timeout=self.timeout, limit=limit,
                              label=self.label, on_error_status=on_status)


class _ScrubSecrets(logging.Filter):
    """Removes the secrets toolwire registered (header values, URL passwords and secret query values) from the
    records of the MCP SDK's HTTP transport and of its HTTP client, which log URLs and messages."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001 - a record that does not format is left to logging
            return True
        clean = _log.scrub(text)
        if clean != text:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:  # an exception's text can quote a URL (httpx2's status errors)
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = _log.scrub(record.exc_text)
        return True


_SCRUB = _ScrubSecrets()


def _scrub_http_logs() -> None:
    for name in ("mcp.client.streamable_http", "httpx2"):
        logger = logging.getLogger(name)
        if _SCRUB not in logger.filters:
            logger.addFilter(_SCRUB)
