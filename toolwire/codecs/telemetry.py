"""What the OpenTelemetry GenAI semantic conventions call each dialect's requests, as data.

The conventions' names (``gen_ai.operation.name``, ``gen_ai.provider.name``) for every dialect, and the request
parameters a body sets, read from each dialect's own fields (the request field names stay in ``codecs/``).
``toolwire.harness.tracing`` puts them on the inference spans of the loop. No OpenTelemetry import here.

The names follow the conventions' registry (semantic conventions 1.41, GenAI, development status): Gemini's
``generateContent`` is ``generate_content``; OpenAI Chat Completions, the Responses API, Anthropic Messages and
Gemini Interactions (a conversation with server-side state, as Responses) are ``chat``. The provider is the
conventions' well-known value for the dialect (``openai``, ``anthropic``, ``gcp.gemini``), or for a server the
conventions name, found by its host (Azure OpenAI, Vertex AI, Groq, DeepSeek, Mistral AI, Perplexity, xAI, and
the Gemini API's OpenAI-compatible endpoint).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["OPERATION_NAMES", "PROVIDER_NAMES", "OPENAI_API_TYPES", "provider_name", "request_attributes"]

#: ``gen_ai.operation.name`` of a model request, per dialect
OPERATION_NAMES: dict[str, str] = {
    "openai-chat": "chat",
    "openai-responses": "chat",
    "anthropic": "chat",
    "gemini": "generate_content",
    "gemini-interactions": "chat",
}
#: ``gen_ai.provider.name`` per dialect, when the host is none of ``_HOSTS``
PROVIDER_NAMES: dict[str, str] = {
    "openai-chat": "openai",
    "openai-responses": "openai",
    "anthropic": "anthropic",
    "gemini": "gcp.gemini",
    "gemini-interactions": "gcp.gemini",
}
#: ``openai.api.type`` (the conventions' OpenAI attribute) of the OpenAI dialects
OPENAI_API_TYPES: dict[str, str] = {"openai-chat": "chat_completions", "openai-responses": "responses"}
#: host → ``gen_ai.provider.name``, for the servers the conventions name that speak these dialects: the host itself
#: or a subdomain of it (Vertex AI's regional hosts, ``us-central1-aiplatform.googleapis.com``, too)
_HOSTS: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(pattern), name) for pattern, name in (
    (r"(^|[.-])aiplatform\.googleapis\.com$", "gcp.vertex_ai"),
    (r"(^|\.)generativelanguage\.googleapis\.com$", "gcp.gemini"),
    (r"(^|\.)openai\.azure\.com$", "azure.ai.openai"),
    (r"(^|\.)api\.groq\.com$", "groq"),
    (r"(^|\.)api\.deepseek\.com$", "deepseek"),
    (r"(^|\.)api\.mistral\.ai$", "mistral_ai"),
    (r"(^|\.)api\.perplexity\.ai$", "perplexity"),
    (r"(^|\.)api\.x\.ai$", "x_ai"),
))


def provider_name(dialect: str, host: str | None) -> str:
    """``gen_ai.provider.name`` for a request of ``dialect`` to ``host``."""
    if host:
        host = host.lower().rstrip(".")
        for pattern, name in _HOSTS:
            if pattern.search(host):
                return name
    return PROVIDER_NAMES.get(dialect, dialect)


#: per dialect: where its request parameters live (a path of object keys) → the conventions' attribute; the kind
#: is what the attribute holds (``double``, ``int``, ``strings``: a list of strings, or one string)
_DOUBLE, _INT, _STRINGS = "double", "int", "strings"
_FIELDS: dict[str, tuple[tuple[tuple[str, ...], str, str], ...]] = {
    "openai-chat": (
        (("temperature",), "gen_ai.request.temperature", _DOUBLE),
        (("top_p",), "gen_ai.request.top_p", _DOUBLE),
        (("max_completion_tokens",), "gen_ai.request.max_tokens", _INT),
        (("max_tokens",), "gen_ai.request.max_tokens", _INT),
        (("stop",), "gen_ai.request.stop_sequences", _STRINGS),
        (("seed",), "gen_ai.request.seed", _INT),
        (("frequency_penalty",), "gen_ai.request.frequency_penalty", _DOUBLE),
        (("presence_penalty",), "gen_ai.request.presence_penalty", _DOUBLE),
        (("n",), "gen_ai.request.choice.count", _INT),
    ),
    "openai-responses": (
        (("temperature",), "gen_ai.request.temperature", _DOUBLE),
        (("top_p",), "gen_ai.request.top_p", _DOUBLE),
        (("max_output_tokens",), "gen_ai.request.max_tokens", _INT),
    ),
    "anthropic": (
        (("temperature",), "gen_ai.request.temperature", _DOUBLE),
        (("top_p",), "gen_ai.request.top_p", _DOUBLE),
        (("top_k",), "gen_ai.request.top_k", _DOUBLE),
        (("max_tokens",), "gen_ai.request.max_tokens", _INT),
        (("stop_sequences",), "gen_ai.request.stop_sequences", _STRINGS),
    ),
    "gemini": (
        (("generationConfig", "temperature"), "gen_ai.request.temperature", _DOUBLE),
        (("generationConfig", "topP"), "gen_ai.request.top_p", _DOUBLE),
        (("generationConfig", "topK"), "gen_ai.request.top_k", _DOUBLE),
        (("generationConfig", "maxOutputTokens"), "gen_ai.request.max_tokens", _INT),
        (("generationConfig", "stopSequences"), "gen_ai.request.stop_sequences", _STRINGS),
        (("generationConfig", "seed"), "gen_ai.request.seed", _INT),
        (("generationConfig", "frequencyPenalty"), "gen_ai.request.frequency_penalty", _DOUBLE),
        (("generationConfig", "presencePenalty"), "gen_ai.request.presence_penalty", _DOUBLE),
        (("generationConfig", "candidateCount"), "gen_ai.request.choice.count", _INT),
    ),
    "gemini-interactions": (
        (("generation_config", "temperature"), "gen_ai.request.temperature", _DOUBLE),
        (("generation_config", "top_p"), "gen_ai.request.top_p", _DOUBLE),
        (("generation_config", "max_output_tokens"), "gen_ai.request.max_tokens", _INT),
        (("generation_config", "stop_sequences"), "gen_ai.request.stop_sequences", _STRINGS),
        (("generation_config", "seed"), "gen_ai.request.seed", _INT),
    ),
}
_MAX_INT = (1 << 63) - 1


def _value(kind: str, value: Any) -> Any:
    """``value`` as an attribute of ``kind``, or None when it is not one (a request field of the application's
    ``extra_body`` may hold anything)."""
    if isinstance(value, bool):
        return None
    if kind == _INT:
        return value if isinstance(value, int) and -_MAX_INT <= value <= _MAX_INT else None
    if kind == _DOUBLE:
        if isinstance(value, int) and -_MAX_INT <= value <= _MAX_INT:
            return float(value)
        return value if isinstance(value, float) else None
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


def request_attributes(dialect: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """The conventions' ``gen_ai.request.*`` attributes for the parameters ``body`` (a request body of
    ``dialect``) sets: temperature, top_p, top_k, max_tokens, stop_sequences, seed, the penalties, and the number
    of choices when it is not 1. A field that holds a value of the wrong type is left out."""
    out: dict[str, Any] = {}
    for path, attribute, kind in _FIELDS.get(dialect, ()):
        here: Any = body
        for key in path:
            here = here.get(key) if isinstance(here, Mapping) else None
        if here is None or attribute in out:
            continue
        value = _value(kind, here)
        if value is not None:
            out[attribute] = value
    if out.get("gen_ai.request.choice.count") == 1:
        del out["gen_ai.request.choice.count"]
    return out
