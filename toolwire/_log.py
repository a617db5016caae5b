"""Logging: structlog events, silent and cheap unless the application asks for them.

toolwire never calls ``structlog.configure()``. Whether an event is emitted at all is decided by the standard
``logging`` logger named ``"toolwire"`` (so the host's level settings apply; it has a ``NullHandler``, so nothing
is printed by default). An emitted event goes to structlog:

* if the application configured structlog, through its configuration (``structlog.get_logger("toolwire")``), so
  ``structlog.testing.capture_logs()`` and the application's processors see every event;
* otherwise through the ``"toolwire"`` standard logger, rendered as ``event key=value …``, where the host's
  handlers decide what is printed.

Hot paths check ``enabled(level)`` (about 0.2 µs) before building an event.

Secrets never reach a log: every string an event carries (at any depth, keys included) is scrubbed before it is
emitted, of the secrets the transports registered with ``add_secret`` (API keys: wherever they occur, and a
prefix of one left at the end of a cut excerpt) and of text shaped like a provider key or a bearer token.
"""

from __future__ import annotations

import base64
import logging
import re
import threading
from typing import Any
from urllib.parse import unquote, unquote_plus

import structlog

__all__ = ["stdlib_logger", "enabled", "emit", "add_secret", "scrub", "has_secrets", "DEBUG", "INFO", "WARNING",
           "ERROR"]

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


REDACTED = "[redacted]"
#: provider key shapes (OpenAI ``sk-…``, Anthropic ``sk-ant-…``, Google ``AIza…``, AWS ``AKIA…``), bearer tokens
#: and a Basic ``Authorization`` header's value (``Authorization: Basic <base64>``, quoted or not)
_KEY_SHAPES = re.compile(
    r"sk-[A-Za-z0-9_\-]{8,}|AIza[0-9A-Za-z_\-]{20,}|AKIA[0-9A-Z]{12,}|(?i:bearer)\s+[A-Za-z0-9._~+/=\-]{8,}"
    r"|(?i:authorization)[\"']?\s*[:=]\s*[\"']?(?i:basic)\s+[A-Za-z0-9+/]{8,}={0,2}")
_MIN_SECRET = 8  # shorter strings are not treated as secrets (they would redact ordinary words)
_MIN_TAIL = 4  # a cut excerpt ending in at least this much of a secret is redacted too
_secrets: tuple[str, ...] = ()
_secrets_lock = threading.Lock()


def _encoded(value: str) -> tuple[str, ...]:
    """``value`` and the base64 forms a server may echo it in (standard and URL-safe alphabets, without the
    padding, which depends on what follows); its URL and JSON escapes are undone by ``scrub`` instead."""
    raw = value.encode("utf-8")
    return (value, *{base64.b64encode(raw).decode("ascii").rstrip("="),
                     base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")})


def add_secret(value: str | None) -> None:
    """Never log ``value`` (an API key, a password), nor its base64: the transports register theirs when they
    are created."""
    global _secrets
    if not isinstance(value, str) or len(value) < _MIN_SECRET:
        return
    with _secrets_lock:
        new = [v for v in _encoded(value) if v not in _secrets]
        if new:
            _secrets = tuple(sorted((*_secrets, *new), key=len, reverse=True))


def has_secrets(*texts: object) -> bool:
    """True when one of ``texts`` holds something ``scrub`` would redact (cheap when nothing is registered)."""
    return any(isinstance(t, str) and scrub(t) != t for t in texts)


_UNICODE_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")


def _unescaped(text: str) -> list[str]:
    """Readings of ``text`` with the escapes a body may wrap a key in undone: JSON ``\\uXXXX`` and ``\\/``,
    and that with URL percent-encoding undone (``+`` kept, or read as a space)."""
    if "\\" in text:
        text = _UNICODE_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text).replace("\\/", "/")
    readings = [text]
    if "%" in text:
        readings.append(unquote(text))
    if "+" in text:
        readings.append(unquote_plus(text))
    return readings


def _scrub_plain(text: str) -> str:
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
        # a prefix of it at the end of a cut excerpt; a whole short value that merely equals a secret's first
        # characters (a provider named "test" beside a key "test-…") is not an excerpt of it
        for n in range(min(len(secret) - 1, len(text)), _MIN_TAIL - 1, -1):
            if text.endswith(secret[:n]) and (n < len(text) or n >= _MIN_SECRET):
                text = text[:-n] + REDACTED
                break
    if "sk-" in text or "AIza" in text or "AKIA" in text or "earer" in text or "EARER" in text \
            or "uthoriz" in text or "UTHORIZ" in text:
        text = _KEY_SHAPES.sub(REDACTED, text)
    return text


def scrub(text: str) -> str:
    """``text`` with every registered secret, a secret's prefix at its end, and key-shaped text redacted, also
    where the text wraps them in JSON or URL escapes (then the text is returned unescaped, redacted)."""
    text = _scrub_plain(text)
    if "\\" in text or "%" in text or ("+" in text and _secrets):
        for plain in _unescaped(text):
            if plain != text:
                redacted = _scrub_plain(plain)
                if redacted != plain:
                    return redacted
    return text


def _scrub_value(value: Any, depth: int = 0) -> Any:
    if isinstance(value, str):
        return scrub(value)
    if depth > 20:
        return value
    if isinstance(value, dict):
        return {(scrub(k) if isinstance(k, str) else k): _scrub_value(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_scrub_value(v, depth + 1) for v in value) if isinstance(value, list) else \
            tuple(_scrub_value(v, depth + 1) for v in value)
    return value


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
    getattr(log, _METHOD.get(level, "info"))(event, **{k: _scrub_value(v) for k, v in kw.items()})
