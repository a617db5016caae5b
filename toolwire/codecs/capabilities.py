"""Provider differences as data (docs/architecture.md): one capabilities record per dialect and endpoint.

Codecs, the registry (name checks when declaring), the retry policy and ``toolwire audit`` read these records;
nothing else hard-codes a provider limit. Every value names its source (a provider's documentation, an SDK type or
an error text); values the providers do not document are marked ``documented=False`` and say what was observed
instead.
"""

from __future__ import annotations

import re

import msgspec

__all__ = ["Limit", "Capabilities", "CAPABILITIES", "capabilities_for", "is_transient_error", "PORTABLE_NAME"]


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


_OPENAI_TRANSIENT = (408, 409, 429, 500, 502, 503, 504)
_PERMANENT = (400, 401, 403, 404, 422)
_OPENAI_ROOT = ("OpenAI API error invalid_function_parameters: schema must be a JSON Schema of 'type: \"object\"', "
                "got 'type: \"array\"' (or \"None\")")
_OPENAI_ITEMS = "OpenAI API error invalid_function_parameters: array schema missing items"

CAPABILITIES: dict[str, Capabilities] = {
    "openai-chat": Capabilities(
        dialect="openai-chat", endpoint="POST /v1/chat/completions",
        name_pattern=r"[a-zA-Z0-9_-]{1,64}", name_max=64,
        name_source="openai-python types (function_definition.py)",
        max_tools=Limit(128, "OpenAI API error array_above_max_length on tools"),
        schema_depth=Limit(10, "OpenAI Structured Outputs: strict mode nesting (older limit 5)", documented=True,
                           applies="strict"),
        max_request_bytes=Limit(None, "not documented", documented=False),
        max_schema_properties=Limit(5000, "OpenAI Structured Outputs: strict mode properties", applies="strict"),
        max_enum_values=Limit(1000, "OpenAI Structured Outputs: strict mode enum values", applies="strict"),
        tool_kinds=("function", "custom"),
        tool_kinds_source="openai-python types (chat_completion_custom_tool_param.py)",
        schema_root="object", schema_root_source=_OPENAI_ROOT, array_items=True, array_items_source=_OPENAI_ITEMS,
        ids_echoed="tool message tool_call_id = tool_calls[].id",
        signatures="none (Gemini's compatible endpoint: tool_calls[].extra_content.google.thought_signature)",
        tool_turn_finish=("tool_calls", "stop", "function_call"),
        transient_statuses=_OPENAI_TRANSIENT + (520, 522, 524),
        permanent_statuses=_PERMANENT,
        transient_error_types=("server_error", "rate_limit_exceeded", "overloaded_error", "api_error"),
        delay_hints=("retry-after-ms", "retry-after"),
    ),
    "openai-responses": Capabilities(
        dialect="openai-responses", endpoint="POST /v1/responses",
        name_pattern=r"[a-zA-Z0-9_-]{1,64}", name_max=64,
        name_source="OpenAI Responses function tools (the Chat Completions rule)",
        max_tools=Limit(128, "OpenAI API error array_above_max_length on tools"),
        schema_depth=Limit(10, "OpenAI Structured Outputs: strict mode nesting", applies="strict"),
        max_request_bytes=Limit(None, "not documented", documented=False),
        max_schema_properties=Limit(5000, "OpenAI Structured Outputs: strict mode properties", applies="strict"),
        max_enum_values=Limit(1000, "OpenAI Structured Outputs: strict mode enum values", applies="strict"),
        tool_kinds=("function", "custom"), tool_kinds_source="openai-python types (custom_tool_param.py)",
        schema_root="object", schema_root_source=_OPENAI_ROOT, array_items=True, array_items_source=_OPENAI_ITEMS,
        ids_echoed="function_call_output.call_id = function_call.call_id (not the fc_ item id)",
        signatures="reasoning items (encrypted_content) replayed before their function_call",
        tool_turn_finish=("completed",),
        transient_statuses=_OPENAI_TRANSIENT,
        permanent_statuses=_PERMANENT,
        transient_error_types=("server_error", "rate_limit_exceeded", "server_is_overloaded"),
        delay_hints=("retry-after-ms", "retry-after"),
    ),
    "anthropic": Capabilities(
        dialect="anthropic", endpoint="POST /v1/messages",
        name_pattern=r"[a-zA-Z0-9_-]{1,128}", name_max=128, name_source="Anthropic API error text",
        max_tools=Limit(None, "not documented for Messages", documented=False),
        schema_depth=Limit(None, "not documented", documented=False),
        max_request_bytes=Limit(32 * 1024 * 1024, "Anthropic API: 413 request_too_large"),
        tool_kinds_source="Anthropic Messages: every client tool takes a JSON Schema input",
        schema_root="plain_object",
        schema_root_source="Anthropic API errors: input_schema.type Field required / Input should be 'object'; "
                           "input_schema does not support oneOf, allOf, or anyOf at the top level",
        ids_echoed="tool_result.tool_use_id = tool_use.id; all results first in one user message",
        signatures="thinking.signature and redacted_thinking.data, replayed verbatim before tool_use",
        tool_turn_finish=("tool_use", "end_turn", "stop_sequence", "pause_turn"),
        transient_statuses=(408, 409, 429, 500, 502, 503, 504, 529),
        permanent_statuses=(400, 401, 402, 403, 404, 413, 422),
        transient_error_types=("overloaded_error", "rate_limit_error", "api_error", "timeout_error"),
        delay_hints=("retry-after-ms", "retry-after"),
    ),
    "gemini": Capabilities(
        dialect="gemini", endpoint="POST models/{m}:generateContent / :streamGenerateContent",
        name_pattern=r"[A-Za-z_][A-Za-z0-9_.:-]{0,127}", name_max=128,
        name_source="google-genai types.py (FunctionDeclaration)",
        max_tools=Limit(512, "Gemini API: function_declarations (older Vertex: 64)"),
        schema_depth=Limit(None, "not documented", documented=False),
        max_request_bytes=Limit(None, "not documented", documented=False),
        param_name_pattern=r"[A-Za-z_][A-Za-z0-9_]{0,63}",
        param_name_source="google-genai types.py (FunctionDeclaration.parameters)",
        param_name_applies="openapi",
        tool_kinds_source="Gemini: functionDeclarations only",
        ids_echoed="functionResponse.id = functionCall.id when the call had one; name always",
        signatures="thoughtSignature on the exact part (only the first of parallel calls)",
        tool_turn_finish=("STOP",),
        transient_statuses=(408, 429, 500, 502, 503, 504),
        permanent_statuses=_PERMANENT,
        transient_error_types=("RESOURCE_EXHAUSTED", "UNAVAILABLE", "INTERNAL", "DEADLINE_EXCEEDED"),
        delay_hints=("body: error.details[RetryInfo].retryDelay",),
    ),
    "gemini-interactions": Capabilities(
        dialect="gemini-interactions", endpoint="POST /v1beta/interactions",
        name_pattern=r"[A-Za-z_][A-Za-z0-9_.:-]{0,127}", name_max=128,
        name_source="Gemini Interactions: as generateContent (not documented separately)",
        max_tools=Limit(None, "not documented", documented=False),
        schema_depth=Limit(None, "not documented", documented=False),
        max_request_bytes=Limit(None, "not documented", documented=False),
        tool_kinds_source="Gemini Interactions: function tools only",
        ids_echoed="function_result.call_id = function_call.id",
        signatures="thought steps (signature) and thought_signature deltas",
        tool_turn_finish=("requires_action", "completed"),
        transient_statuses=(408, 409, 429, 500, 502, 503, 504),
        permanent_statuses=_PERMANENT,
        transient_error_types=("RESOURCE_EXHAUSTED", "UNAVAILABLE", "INTERNAL"),
        delay_hints=("retry-after", "retry-after-ms"),
    ),
}

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
    from ..errors import UsageError

    try:
        return CAPABILITIES[dialect]
    except KeyError:
        raise UsageError(f"no capabilities record for {dialect!r}") from None
