"""What the OpenTelemetry GenAI semantic conventions call each dialect's requests, as data.

The conventions' names (``gen_ai.operation.name``, ``gen_ai.provider.name``) for every dialect, and the request
parameters a body sets, read from each dialect's own fields: both are in the dialect's ``HTTP`` part
(``toolwire.codecs.requests.HTTP``), so the request field names stay in ``codecs/``.
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

__all__ = ["OPERATION_NAMES", "PROVIDER_NAMES", "OPENAI_API_TYPES", "provider_name", "request_attributes",
           "span_attributes", "operation_name"]


def __getattr__(name: str) -> Any:
    """The per-dialect tables, derived from the ``HTTP`` parts of the registry: ``OPERATION_NAMES``
    (``gen_ai.operation.name`` of a model request), ``PROVIDER_NAMES`` (``gen_ai.provider.name`` when the host is
    none of ``_HOSTS``) and ``OPENAI_API_TYPES`` (``openai.api.type`` of the OpenAI dialects)."""
    from . import dialects_with

    if name == "OPERATION_NAMES":
        return {d.id: d.http.operation_name for d in dialects_with("http")}
    if name == "PROVIDER_NAMES":
        return {d.id: d.http.provider_name for d in dialects_with("http")}
    if name == "OPENAI_API_TYPES":
        return {d.id: d.http.span_attributes["openai.api.type"] for d in dialects_with("http")
                if "openai.api.type" in d.http.span_attributes}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _http(dialect: str) -> Any:
    from . import dialects_with

    for d in dialects_with("http"):
        if d.id == dialect:
            return d.http
    return None


def operation_name(dialect: str) -> str:
    """``gen_ai.operation.name`` of a model request of ``dialect`` (``chat`` for a dialect without an HTTP part)."""
    part = _http(dialect)
    return part.operation_name if part is not None else "chat"


def span_attributes(dialect: str) -> dict[str, str]:
    """The attributes the conventions add to an inference span of ``dialect`` (``openai.api.type``)."""
    part = _http(dialect)
    return dict(part.span_attributes) if part is not None else {}


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
    part = _http(dialect)
    return part.provider_name if part is not None else dialect


#: the kinds of value an attribute holds (``HTTP.request_fields``): a double, an int, a list of strings (or one)
_DOUBLE, _INT, _STRINGS = "double", "int", "strings"
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
    part = _http(dialect)
    for path, attribute, kind in (part.request_fields if part is not None else ()):
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
