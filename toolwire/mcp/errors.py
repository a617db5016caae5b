"""Errors of ``toolwire.mcp`` (all beneath ``ToolwireError``).

A server's mistakes during a call never raise out of the dispatcher: a handler raises one of these (or
``ToolError`` / ``OutcomeUnknown``) and the call is answered. Raised to the application: a server that cannot be
reached when it is opened or listed (``MCPConnectionError``) and a listing that breaks the protocol or its
bounds (``MCPProtocolError``).
"""

from __future__ import annotations

from ..errors import ToolwireError
from ..registry.content import HandlerNotStarted, OutcomeUnknown

__all__ = ["MCPServerError", "MCPConnectionError", "MCPProtocolError", "MCPUnreadableAnswer"]


class MCPServerError(ToolwireError):
    """Something went wrong with an MCP server. ``server`` names it: its command line or its URL (without
    credentials, query or header values)."""

    def __init__(self, message: str, *, server: str) -> None:
        super().__init__(message)
        self.message = message
        self.server = server


class MCPConnectionError(MCPServerError, HandlerNotStarted):
    """The server could not be started or reached, or its session could not be set up, after ``attempts``
    tries; ``cause`` is the last failure, in one line. Raised by a handler, the call is answered
    ``handler_failed`` (a ``HandlerNotStarted``): nothing was sent, so nothing ran."""

    def __init__(self, message: str, *, server: str, attempts: int, cause: str) -> None:
        super().__init__(message, server=server)
        self.attempts = attempts
        self.cause = cause


class MCPProtocolError(MCPServerError):
    """The server answered outside the protocol or its bounds: a ``tools/list`` that does not end (a cursor
    repeated, more pages or tools than allowed), a result that does not validate."""


class MCPUnreadableAnswer(MCPProtocolError, OutcomeUnknown):
    """The server answered a ``tools/call`` with something that is not a valid result (or that could not be
    read): the call reached the server, so whether it took effect is unknown. A write is answered
    ``outcome_unknown`` (never run again), a read ``handler_failed``."""

    def __init__(self, message: str, *, server: str) -> None:
        MCPProtocolError.__init__(self, message, server=server)
        self.reason = message
