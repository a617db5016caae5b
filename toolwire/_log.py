"""Logging: structlog events, silent and cheap unless the application asks for them.

toolwire never calls ``structlog.configure()``. Whether an event is emitted at all is decided by the standard
``logging`` logger named ``"toolwire"`` (so the host's level settings apply; it has a ``NullHandler``, so nothing
is printed by default). An emitted event goes to structlog:

* if the application configured structlog, through its configuration (``structlog.get_logger("toolwire")``), so
  ``structlog.testing.capture_logs()`` and the application's processors see every event;
* otherwise through the ``"toolwire"`` standard logger, rendered as ``event key=value …``, where the host's
  handlers decide what is printed.

Hot paths check ``enabled(level)`` (about 0.2 µs) before building an event.
"""

from __future__ import annotations

import logging

import structlog

__all__ = ["stdlib_logger", "enabled", "emit", "DEBUG", "INFO", "WARNING", "ERROR"]

DEBUG = logging.DEBUG
INFO = logging.INFO
WARNING = logging.WARNING
ERROR = logging.ERROR

#: set by ``toolwire.logs.configure_logging(log_arguments=True)``: argument values may then be logged
LOG_ARGUMENTS = False

stdlib_logger = logging.getLogger("toolwire")
stdlib_logger.addHandler(logging.NullHandler())

_METHOD = {DEBUG: "debug", INFO: "info", WARNING: "warning", ERROR: "error"}

_fallback = structlog.wrap_logger(
    stdlib_logger,
    processors=[
        structlog.processors.KeyValueRenderer(key_order=["event"], drop_missing=True),
    ],
    wrapper_class=structlog.stdlib.BoundLogger,
)


def enabled(level: int) -> bool:
    """Return True when an event at ``level`` would be emitted."""
    return stdlib_logger.isEnabledFor(level)


def emit(level: int, event: str, **kw: object) -> None:
    """Emit ``event`` at ``level`` with ``kw`` as its keys, if the ``toolwire`` logger is enabled for it."""
    if not stdlib_logger.isEnabledFor(level):
        return
    if structlog.is_configured():
        log = structlog.get_logger("toolwire")
    else:
        log = _fallback
    getattr(log, _METHOD.get(level, "info"))(event, **kw)
