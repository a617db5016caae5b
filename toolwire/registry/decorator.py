"""``@toolwire.tool(effect=...)``: declare a function as a tool where it is written.

The decorator is ``Tool.from_function`` (same options, same schema, validation and docstring reading) and gives
the ``Tool``; the function stays reachable as ``.handler``. The effect is required: a write must never be taken
for a read (reads are retried on failure, writes never run twice), so a bare ``@toolwire.tool`` or one without
``effect`` is a ``ToolDeclarationError`` when the module defining the function is imported.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, overload

from .errors import ToolDeclarationError
from .tool import DEFAULT_TIMEOUT, Effect, IdempotencyKey, Tool

__all__ = ["tool"]

_RULE = "effect in {read, write}"


@overload
def tool(fn: Callable[..., Any], /, *, effect: Effect, name: str | None = None, description: str | None = None,
         timeout: float | None = DEFAULT_TIMEOUT, idempotency_key: IdempotencyKey | None = None) -> Tool: ...


@overload
def tool(*, effect: Effect, name: str | None = None, description: str | None = None,
         timeout: float | None = DEFAULT_TIMEOUT, idempotency_key: IdempotencyKey | None = None
         ) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(fn: Callable[..., Any] | None = None, /, *, effect: Effect | None = None, name: str | None = None,
         description: str | None = None, timeout: float | None = DEFAULT_TIMEOUT,
         idempotency_key: IdempotencyKey | None = None) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Declare a function as a tool: ``@toolwire.tool(effect="read")`` or ``@toolwire.tool(effect="write",
    idempotency_key=...)`` above it; ``toolwire.tool(fn, effect=...)`` does the same without the ``@``.

    ``effect`` is required; ``name``, ``description``, ``timeout`` and ``idempotency_key`` are those of
    ``Tool.from_function``. Returns the ``Tool`` (the function is its ``handler``). Raises
    ``ToolDeclarationError`` when the effect is missing and for everything ``from_function`` refuses.
    """
    if fn is not None and not callable(fn):
        raise ToolDeclarationError(f"@toolwire.tool takes the function to declare, not {fn!r}: give the effect "
                                   'and other options by keyword, as in @toolwire.tool(effect="read")',
                                   tool=name, rule=_RULE)
    if effect is None:
        label = name if name is not None else getattr(fn, "__name__", None)
        who = f" for {label!r}" if label is not None else ""
        raise ToolDeclarationError(
            f'@toolwire.tool needs an effect{who}: @toolwire.tool(effect="read") for a tool that only looks '
            'things up, @toolwire.tool(effect="write") for one that changes something. There is no default: a '
            "write taken for a read could be retried and take effect twice.", tool=label, rule=_RULE)

    def decorate(function: Callable[..., Any]) -> Tool:
        return Tool.from_function(function, effect=effect, name=name, description=description, timeout=timeout,
                                  idempotency_key=idempotency_key)

    return decorate if fn is None else decorate(fn)
