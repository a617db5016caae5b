"""Every exception toolwire raises, in one tree.

``ToolwireError`` is the root. Beneath it:

* ``UsageError``: the application called the API wrongly (an unknown provider, feeding a closed parser).
* ``ProviderProtocolError``: bytes from the provider that cannot be understood. ``FramingError`` is the
  framing-level case (an oversized message, a body that is not JSON). Each carries ``provider`` and an
  ``excerpt`` of the offending input.
* ``InvalidTransition``: a trigger fired in a state that does not allow it (``call_id``, ``state``, ``trigger``).

Remote mistakes inside a stream are recorded on the ``Turn`` and its calls rather than raised: a model's bad
arguments fail that call only, and garbage from the provider puts the stream in a terminal error state.
Local misuse raises.
"""

from __future__ import annotations

__all__ = [
    "ToolwireError",
    "UsageError",
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

    Attributes besides those of ``ProviderProtocolError``: ``limit`` and ``size`` (bytes) when a cap was hit.
    """

    code = "framing_error"

    def __init__(self, message: str, *, provider: str | None = None, data: bytes | str | None = None,
                 limit: int | None = None, size: int | None = None, code: str | None = None) -> None:
        super().__init__(message, provider=provider, data=data, code=code)
        self.limit = limit
        self.size = size


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
