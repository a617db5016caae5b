"""Errors of the harness layer: a provider that failed, transiently or for good."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._log import scrub
from ..errors import ToolwireError

__all__ = ["ProviderError", "CallbackError"]


class ProviderError(ToolwireError):
    """A model request failed: an HTTP error status, a network failure, or a turn that ended in an error.

    Attributes: ``provider``, ``status`` (HTTP status or None), ``type`` (the provider's error type, or
    ``timeout`` / ``connection_error`` / ``stream_cut`` / ``length`` / ``content_filter`` / ``framing_error``
    …), ``transient`` (a retry may help), ``retry_after`` (seconds the provider asked to wait, or None),
    ``retry_limit`` (at most this many retries of a failure of this ``type`` within one request, inside the
    retry policy's budget; None: the budget alone decides). The message never holds an API key or a response
    body (those go to the logs).
    """

    def __init__(self, message: str, *, provider: str, status: int | None, type: str, transient: bool,
                 retry_after: float | None = None, retry_limit: int | None = None) -> None:
        # a provider may echo the key in its error type (a 401 body): neither the message nor the type keeps it
        super().__init__(scrub(message))
        self.provider = provider
        self.status = status
        self.type = scrub(type) if isinstance(type, str) else type
        self.transient = transient
        self.retry_after = retry_after
        self.retry_limit = retry_limit


class CallbackError(Exception):
    """Internal: carries what an application's event callback raised through code that classifies exceptions
    (the transports' network errors, the retry policy, the conversation's fallbacks), so it is never taken for a
    provider's failure; unwrapped where it reaches the application again."""

    def __init__(self, error: Exception) -> None:
        super().__init__(repr(error))
        self.error = error


def callback(fn: Callable[[Any], Any]) -> Callable[[Any], None]:
    """``fn``, with whatever it raises (an ``Exception``, a ``CallbackError`` included: each layer unwraps its
    own) carried in a ``CallbackError``."""
    def call(event: Any) -> None:
        try:
            fn(event)
        except Exception as exc:  # noqa: BLE001 - the application's callback may raise anything
            raise CallbackError(exc) from exc
    return call
