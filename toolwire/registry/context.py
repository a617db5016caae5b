"""``ToolContext``: what a handler may ask to know about the call it is running for.

A handler asks for it by declaring a parameter annotated ``toolwire.ToolContext`` (any name; keyword-capable):
``Tool.from_function`` leaves that parameter out of the tool's JSON schema (the model never sees or fills it), and
the dispatcher passes a fresh ``ToolContext`` as that keyword argument on every attempt. The same works for
async handlers, for ``Tool.from_schema`` / ``Tool.from_mcp`` handlers (``handler(args, ctx=...)``) and for
``Tool.custom`` handlers (``handler(text, ctx=...)``). A handler without such a parameter is called as before.
"""

from __future__ import annotations

import functools
import inspect
import types
import typing
from collections.abc import Callable
from typing import Any

import msgspec

from .errors import ToolDeclarationError

__all__ = ["ToolContext", "context_parameter"]


class ToolContext(msgspec.Struct, frozen=True, kw_only=True):
    """The call a handler is running for.

    ``conversation_id``: the conversation the dispatcher was given. ``call_id``: the provider's id of the call
    (None when it sent none), ``local_id``: toolwire's id of the call in its turn (always present). ``name``: the
    tool's name. ``attempt``: 1 for the first run of the handler, 2, 3 … for a read retried after a failure.
    ``deadline``: the ``time.monotonic()`` value at which this attempt is answered ``handler_timeout`` (or, for a
    write, ``outcome_unknown``), or None when the tool has no timeout. ``data``: the application's own object for
    this run, passed as ``data=`` to ``Dispatcher.run`` / ``arun`` or ``ToolLoop.run`` / ``AsyncToolLoop.run`` /
    ``stream`` (None when none was given). toolwire never reads, copies or serialises ``data``.
    """

    conversation_id: str
    call_id: str | None
    local_id: str
    name: str
    attempt: int
    deadline: float | None
    data: Any = None


def _is_context(annotation: Any) -> bool:
    if annotation is ToolContext:
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _is_context(typing.get_args(annotation)[0])
    if origin is typing.Union or origin is types.UnionType:
        # `ToolContext | None`: still the context (always given); never a schema property the model would fill
        return any(_is_context(arg) for arg in typing.get_args(annotation))
    # an annotation that stayed a string (an unresolvable forward reference elsewhere in the signature)
    return isinstance(annotation, str) and annotation.rsplit(".", 1)[-1] == "ToolContext"


def _target(fn: Callable[..., Any]) -> Any:
    """What holds ``fn``'s annotations: the function itself, a partial's function, an object's ``__call__``."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.isroutine(fn) or inspect.isclass(fn):
        return fn
    call = getattr(type(fn), "__call__", None)
    return call if call is not None else fn


def context_parameter(fn: Callable[..., Any], tool: str | None = None) -> str | None:
    """The name of ``fn``'s parameter annotated ``ToolContext``, or None when it has none.

    Raises ``ToolDeclarationError`` when two parameters ask for it, or when it cannot be passed by keyword
    (positional-only, ``*args``, ``**kwargs``)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        hints = typing.get_type_hints(_target(fn), include_extras=True)
    except Exception:  # noqa: BLE001 - unresolvable forward references: read the raw annotations
        hints = {}
    found: list[str] = []
    for pname, param in sig.parameters.items():
        if not _is_context(hints.get(pname, param.annotation)):
            continue
        if param.kind not in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
            raise ToolDeclarationError(
                f"tool {tool!r}: parameter {pname!r} annotated ToolContext is {param.kind.description}; it must "
                "be passable by keyword", tool=tool, rule="ToolContext parameter is keyword-capable")
        found.append(pname)
    if len(found) > 1:
        raise ToolDeclarationError(f"tool {tool!r}: parameters {found} are all annotated ToolContext; declare one",
                                   tool=tool, rule="at most one ToolContext parameter")
    return found[0] if found else None
