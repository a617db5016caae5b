"""Every exception toolwire raises, in one tree.

``ToolwireError`` is the root. Beneath it:

* ``UsageError``: the application called the API wrongly (an unknown provider, feeding a closed parser).
  ``HistoryTooLargeError`` is the case of a stored history holding more calls than ``repair_history`` is
  allowed to take (``max_calls``).
* ``ProviderProtocolError``: bytes from the provider that cannot be understood. ``FramingError`` is the
  framing-level case (an oversized message, a body that is not JSON). Each carries ``provider`` and an
  ``excerpt`` of the offending input.
* ``InvalidTransition``: a trigger fired in a state that does not allow it (``call_id``, ``state``, ``trigger``).

Remote mistakes inside a stream are recorded on the ``Turn`` and its calls rather than raised: a model's bad
arguments fail that call only, and garbage from the provider puts the stream in a terminal error state.
Local misuse raises.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ToolwireError",
    "UsageError",
    "HistoryTooLargeError",
    "ProviderProtocolError",
    "FramingError",
    "InvalidTransition",
]

_EXCERPT = 200


def excerpt(data: bytes | str | None, limit: int = _EXCERPT) -> str:
    """Return a short printable excerpt of ``data`` for error messages."""
    if data is None:
        return ""
    if isinstance(data, (bytes, bytearray, memoryview)):
        text = bytes(data[: limit * 4]).decode("utf-8", "replace")
    else:
        text = data
    return text if len(text) <= limit else text[:limit] + "…"


class ToolwireError(Exception):
    """Base class of every error toolwire raises."""


class UsageError(ToolwireError, ValueError):
    """The API was called wrongly: an unknown provider or format, a parser used after ``close()``."""


class HistoryTooLargeError(UsageError):
    """A history handed to ``repair_history`` holds more calls than its ``max_calls`` cap.

    Repair copies the history and indexes every call, so its time and memory grow with the history: the cap
    bounds both for a history that comes from storage or from a client rather than from this process. A
    ``UsageError``, since the caller chooses what to pass and the cap. Attributes: ``limit`` (the cap),
    ``position`` (the index of the message holding the first call over it).
    """

    def __init__(self, message: str, *, limit: int, position: int | None) -> None:
        super().__init__(message)
        self.limit = limit
        self.position = position


class ProviderProtocolError(ToolwireError):
    """The provider sent something that cannot be understood.

    Attributes: ``provider`` (dialect id or None), ``excerpt`` (a short piece of the bad input),
    ``code`` (a stable machine-readable reason).
    """

    code = "protocol_error"

    def __init__(self, message: str, *, provider: str | None = None, data: bytes | str | None = None,
                 code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.provider = provider
        self.excerpt = excerpt(data)
        if code is not None:
            self.code = code


class FramingError(ProviderProtocolError):
    """The byte stream cannot be split into messages (for example a message larger than the cap).

    Attributes besides those of ``ProviderProtocolError``: ``limit`` and ``size`` (bytes) when a cap was hit;
    ``events``: when a ``StreamParser`` raised it, the events its parse ended with (the calls it truncated, the
    ``TurnFinished`` of the failed turn), which ``feed`` or ``close`` could not return.
    """

    code = "framing_error"

    def __init__(self, message: str, *, provider: str | None = None, data: bytes | str | None = None,
                 limit: int | None = None, size: int | None = None, code: str | None = None) -> None:
        super().__init__(message, provider=provider, data=data, code=code)
        self.limit = limit
        self.size = size
        self.events: list[Any] = []


class InvalidTransition(ToolwireError):
    """A trigger was fired in a state that does not allow it.

    Attributes: ``call_id`` (provider id or None), ``local_id``, ``state`` (the current state's value),
    ``trigger``. The same facts are logged as ``call.invalid_transition``.
    """

    def __init__(self, *, call_id: str | None, local_id: str | None, state: str, trigger: str) -> None:
        super().__init__(f"cannot {trigger!r} call {call_id or local_id!r} in state {state!r}")
        self.call_id = call_id
        self.local_id = local_id
        self.state = state
        self.trigger = trigger
