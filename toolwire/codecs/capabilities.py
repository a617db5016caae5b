"""Provider differences as data (docs/architecture.md): one capabilities record per dialect and endpoint.

Each dialect's record is part of its ``Dialect`` (``toolwire.codecs.dialect``), written in its dialect module;
``capabilities_for`` and ``CAPABILITIES`` read them from the registry. Codecs, the registry (name checks when
declaring), the retry policy and ``toolwire audit`` read these records; nothing else hard-codes a provider limit.
Every value names its source (a provider's documentation, an SDK type or an error text); values the providers do
not document are marked ``documented=False`` and say what was observed instead.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

__all__ = ["Limit", "Capabilities", "CAPABILITIES", "capabilities_for", "is_transient_error", "PORTABLE_NAME",
           "PERMANENT_STATUSES"]


class Limit(msgspec.Struct, frozen=True):
    """A number a provider enforces, with where it comes from and whether the provider documents it.

    ``applies`` says when the limit is enforced: ``"always"``, or ``"strict"`` for limits of OpenAI's strict
    (Structured Outputs) schemas only.
    """

    value: int | None
    source: str
    documented: bool = True
    applies: str = "always"


class Capabilities(msgspec.Struct, frozen=True, kw_only=True):
    dialect: str
    endpoint: str
    name_pattern: str
    name_max: int
    name_source: str
    max_tools: Limit
    schema_depth: Limit
    max_request_bytes: Limit
    ids_echoed: str  # how a result names its call
    signatures: str  # where opaque replay state lives
    tool_turn_finish: tuple[str, ...]  # raw finish reasons that end a tool turn cleanly
    transient_statuses: tuple[int, ...]
    permanent_statuses: tuple[int, ...]
    transient_error_types: tuple[str, ...]  # in-stream / body error types worth a retry
    delay_hints: tuple[str, ...]  # where a server says how long to wait
    # ---- declarations (toolwire.codecs.declare, toolwire audit) ----
    #: total properties in one strict schema
    max_schema_properties: Limit = Limit(None, "not documented", documented=False)
    #: enum values across one strict schema
    max_enum_values: Limit = Limit(None, "not documented", documented=False)
    #: size of one call's arguments (no provider documents one)
    max_argument_bytes: Limit = Limit(None, "not documented", documented=False)
    #: rule for top-level parameter (property) names, where the provider has one; None = no rule
    param_name_pattern: str | None = None
    param_name_source: str = ""
    #: where the parameter-name rule applies: "always", or "openapi" (Gemini's OpenAPI ``parameters`` only)
    param_name_applies: str = "always"
    #: the kinds of tool the dialect declares: "function" (JSON arguments), "custom" (free text, optionally
    #: constrained by a grammar)
    tool_kinds: tuple[str, ...] = ("function",)
    tool_kinds_source: str = "function tools only"
    #: what the root of a function tool's input schema must be: "object" (``"type": "object"``), or
    #: "plain_object" (that, with no ``anyOf``/``oneOf``/``allOf`` beside it); None when no rule is known
    schema_root: str | None = None
    schema_root_source: str = ""
    #: every array schema in a function tool's input must give its ``items``
    array_items: bool = False
    array_items_source: str = ""

    def name_ok(self, name: str) -> bool:
        return len(name) <= self.name_max and re.fullmatch(self.name_pattern, name) is not None


#: HTTP statuses no dialect retries
PERMANENT_STATUSES = (400, 401, 403, 404, 422)


def __getattr__(name: str) -> Any:
    if name == "CAPABILITIES":  # dialect id -> its record, from the registry of dialects
        from . import dialects

        return {d.id: d.capabilities for d in dialects()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: A tool name every dialect accepts: the strictest common rule (OpenAI's 64 characters, Gemini's first
#: character a letter or underscore).
PORTABLE_NAME = r"[A-Za-z_][A-Za-z0-9_-]{0,63}"


_TRANSIENT_WORDS = ("overload", "rate_limit", "ratelimit", "server_error", "unavailable", "internal", "timeout",
                    "exhausted", "try again")


def is_transient_error(dialect: str, type: str | None, code: str | None = None, message: str | None = None) -> bool:
    """True when an error the provider reported (in a stream or a body) is worth a retry: a type or code the
    dialect's record lists, or one that says overloaded / rate limit / server error / unavailable / timeout."""
    cap = capabilities_for(dialect)
    for value in (type, code):
        if value and (value in cap.transient_error_types or any(w in value.lower() for w in _TRANSIENT_WORDS)):
            return True
    return False


def capabilities_for(dialect: str) -> Capabilities:
    """The capabilities record of ``dialect`` (its ``Dialect`` record's). Raises ``UsageError`` for an unknown
    dialect."""
    from ..errors import UsageError
    from . import dialects

    for d in dialects():
        if d.id == dialect:
            return d.capabilities
    raise UsageError(f"no capabilities record for {dialect!r}")
