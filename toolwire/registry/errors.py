"""Errors raised by declarations, the registry, approvals and ledgers (all beneath ``ToolwireError``).

A model's mistakes never raise here: an unknown tool, bad arguments, a denied or unapproved call and a failing
handler all become a ``ToolResult`` for the model. These exceptions are for the application's own misuse:
a tool that no provider would accept, two tools with one name, an approval request that was not issued by the
dispatcher, a ledger that cannot be used.
"""

from __future__ import annotations

from ..errors import ToolwireError, UsageError

__all__ = [
    "ToolDeclarationError",
    "ToolNameError",
    "HandlerSignatureError",
    "DuplicateToolError",
    "ApprovalError",
    "ChoiceError",
    "LedgerError",
]


class ToolDeclarationError(ToolwireError, ValueError):
    """A tool cannot be declared as given (bad schema, bad effect, unsupported parameters).

    Attributes: ``tool`` (the tool's name, or None when unknown) and ``rule`` (a short stable description of the
    rule that was broken).
    """

    def __init__(self, message: str, *, tool: str | None, rule: str) -> None:
        super().__init__(message)
        self.message = message
        self.tool = tool
        self.rule = rule


class ToolNameError(ToolDeclarationError):
    """A tool name that some provider would reject (too long, or characters outside the common pattern).

    Caught at declaration, never when a request fails (failure mode 28 in docs/failure-modes.md).
    """


class HandlerSignatureError(ToolDeclarationError, UsageError):
    """A handler cannot take the arguments the way its tool passes them: a ``from_schema`` / ``from_mcp`` handler
    is called with one positional argument, the argument dict, and this one cannot be, or is written to take
    the arguments one by one (``def search(query: str)``: declare it with ``Tool.from_function`` instead).

    Also a ``UsageError``: it is the application's mistake, found when the tool is built.
    """


class DuplicateToolError(ToolDeclarationError):
    """Two tools of one registry share a name."""


class ApprovalError(ToolwireError, ValueError):
    """``Dispatcher.approve`` was given a request this dispatcher did not issue, or one whose fields were changed.

    Attribute: ``reason`` (``bad_signature``, ``arguments_mismatch`` or ``not_a_request``).
    """

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason


class ChoiceError(UsageError):
    """``Dispatcher.run`` / ``arun`` was asked for a choice of a response (a turn identity) of which another choice
    was already dispatched: only one choice of a response is ever dispatched, so nothing of this one ran.

    Attributes: ``choice`` (the one asked for) and ``dispatched`` (the one that was dispatched, or None when its
    record cannot be read).
    """

    def __init__(self, message: str, *, choice: int, dispatched: int | None) -> None:
        super().__init__(message)
        self.message = message
        self.choice = choice
        self.dispatched = dispatched


class LedgerError(ToolwireError):
    """The idempotency ledger could not be read or written (the call it guards is not run)."""
