"""Dialect codecs: everything about one provider's wire format lives in its module(s) here.

The registry of dialects is built from this package: every module or subpackage whose name does not start with
``_`` is imported once, on the first question, and each that defines ``DIALECT`` (a ``Dialect`` record,
``toolwire.codecs.dialect``) is a dialect. ``dialects()`` lists them, ``dialect_for(id)`` finds one,
``dialects_with("http")`` and ``dialects_with("sim")`` those with that optional part. ``PROVIDERS``,
``CODECS`` and ``codec_for`` are derived from it.
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from .base import Codec
from .dialect import PARTS, Dialect

__all__ = ["Codec", "CODECS", "PROVIDERS", "Dialect", "codec_for", "dialect_for", "dialects", "dialects_with"]

if TYPE_CHECKING:  # pragma: no cover
    #: provider id -> codec class, for the dialects registered
    CODECS: dict[str, type[Codec]]
    #: the registered dialects' ids, in the registry's order
    PROVIDERS: tuple[str, ...]

_REGISTRY: dict[str, Dialect] | None = None
_LOCK = threading.RLock()


def _discover() -> dict[str, Dialect]:
    """Import every public module of this package and collect the ``DIALECT`` records, in their order."""
    global _REGISTRY
    with _LOCK:
        if _REGISTRY is not None:
            return _REGISTRY
        found: dict[str, Dialect] = {}
        for info in pkgutil.iter_modules(__path__):
            if info.name.startswith("_"):
                continue
            module = importlib.import_module(f"{__name__}.{info.name}")
            record = getattr(module, "DIALECT", None)
            if not isinstance(record, Dialect):
                continue
            if record.id in found:
                raise RuntimeError(f"two dialect modules define the dialect {record.id!r}")
            found[record.id] = record
        _REGISTRY = {d.id: d for d in sorted(found.values(), key=lambda d: (d.order, d.id))}
        return _REGISTRY


def dialects() -> tuple[Dialect, ...]:
    """Every registered dialect, in the registry's order."""
    registry = _REGISTRY if _REGISTRY is not None else _discover()
    return tuple(registry.values())


def dialect_for(provider: str) -> Dialect:
    """The record of ``provider``. Raises ``UsageError`` for an unknown provider id."""
    registry = _REGISTRY if _REGISTRY is not None else _discover()
    try:
        return registry[provider]
    except KeyError:
        raise UsageError(f"unknown provider {provider!r}; expected one of: {', '.join(registry)}") from None


def dialects_with(part: str) -> tuple[Dialect, ...]:
    """The registered dialects that have the optional ``part``: ``"http"`` (the harness loop can call them) or
    ``"sim"`` (the simulated provider speaks them)."""
    if part not in PARTS:
        raise UsageError(f"unknown dialect part {part!r}; expected one of: {', '.join(PARTS)}")
    return tuple(d for d in dialects() if getattr(d, part) is not None)


def codec_for(provider: str) -> Codec:
    """Return a new codec for ``provider``. Raises ``UsageError`` for an unknown provider id."""
    return dialect_for(provider).codec()


def __getattr__(name: str) -> Any:
    if name == "PROVIDERS":
        return tuple(d.id for d in dialects())
    if name == "CODECS":
        return {d.id: d.codec for d in dialects()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
