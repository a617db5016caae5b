"""Requests and HTTP errors of every dialect: endpoints, auth headers, request bodies, error bodies.

What a transport needs to talk to a provider, as data and small functions: no I/O here (``toolwire.harness``
sends the requests). Field names stay in ``codecs/``.
"""

from __future__ import annotations

import copy
import email.utils
import os
import re
import time
from typing import Any, Mapping

import msgspec

from ..errors import UsageError
from .capabilities import capabilities_for

__all__ = ["Endpoint", "endpoint", "request_body", "user_message", "parse_error", "ProviderErrorInfo",
           "options_fragment", "merge_body", "body_conflicts", "REASONING_EFFORTS", "MAX_TEMPERATURE",
           "API_KEY_ENV", "BASE_URL_ENV", "DEFAULT_BASE_URL"]

API_KEY_ENV: dict[str, tuple[str, ...]] = {
    "openai-chat": ("OPENAI_API_KEY",),
    "openai-responses": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "gemini-interactions": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
}
BASE_URL_ENV: dict[str, str] = {
    "openai-chat": "OPENAI_BASE_URL",
    "openai-responses": "OPENAI_BASE_URL",
    "anthropic": "ANTHROPIC_BASE_URL",
    "gemini": "GEMINI_BASE_URL",
    "gemini-interactions": "GEMINI_BASE_URL",
}
DEFAULT_BASE_URL: dict[str, str] = {
    "openai-chat": "https://api.openai.com",
    "openai-responses": "https://api.openai.com",
    "anthropic": "https://api.anthropic.com",
    "gemini": "https://generativelanguage.googleapis.com",
    "gemini-interactions": "https://generativelanguage.googleapis.com",
}


class Endpoint(msgspec.Struct, frozen=True, kw_only=True):
    """Where and how to send one request. ``headers`` hold the API key: never log them."""

    method: str
    url: str
    headers: dict[str, str]
    stream: bool


def _api_key(dialect: str, api_key: str | None) -> str:
    if api_key:
        return api_key
    for name in API_KEY_ENV[dialect]:
        value = os.environ.get(name)
        if value:
            return value
    raise UsageError(f"no API key for {dialect}: pass api_key= or set {' or '.join(API_KEY_ENV[dialect])}")


def endpoint(dialect: str, *, model: str, stream: bool = True, base_url: str | None = None,
             api_key: str | None = None) -> Endpoint:
    """The endpoint of one model request. ``base_url`` overrides the provider's (or the ``*_BASE_URL``
    environment variable); the key comes from ``api_key`` or the usual environment variable. Raises
    ``UsageError`` for an unknown dialect or a missing key."""
    capabilities_for(dialect)
    base = (base_url or os.environ.get(BASE_URL_ENV[dialect]) or DEFAULT_BASE_URL[dialect]).rstrip("/")
    key = _api_key(dialect, api_key)
    headers = {"content-type": "application/json", "user-agent": "toolwire"}
    if stream:
        headers["accept"] = "text/event-stream"
    if dialect == "openai-chat":
        url = f"{base}/v1/chat/completions"
        headers["authorization"] = f"Bearer {key}"
    elif dialect == "openai-responses":
        url = f"{base}/v1/responses"
        headers["authorization"] = f"Bearer {key}"
    elif dialect == "anthropic":
        url = f"{base}/v1/messages"
        headers["x-api-key"] = key
        headers["anthropic-version"] = "2023-06-01"
    elif dialect == "gemini":
        url = (f"{base}/v1beta/models/{model}:streamGenerateContent?alt=sse" if stream
               else f"{base}/v1beta/models/{model}:generateContent")
        headers["x-goog-api-key"] = key
    else:
        url = f"{base}/v1beta/interactions"
        headers["x-goog-api-key"] = key
    return Endpoint(method="POST", url=url, headers=headers, stream=stream)


def user_message(dialect: str, text: str, *, alone: bool = True) -> Any:
    """The history entry (message, input item or content) that says ``text`` as the user. ``alone``: False when
    other input goes with it (Interactions then take a text content, not the bare string)."""
    if dialect == "gemini":
        return {"role": "user", "parts": [{"text": text}]}
    if dialect == "gemini-interactions":
        # Interactions take the user's text as the whole ``input``, or as a text content among other input
        return text if alone else {"type": "text", "text": text}
    return {"role": "user", "content": text}


#: the reasoning effort values each dialect's API documents (the official SDKs' request types): Chat
#: ``reasoning_effort``, Responses ``reasoning.effort``, Anthropic ``output_config.effort``, Gemini
#: ``generationConfig.thinkingConfig.thinkingLevel`` (upper case on the wire) and Interactions
#: ``generation_config.thinking_level``
REASONING_EFFORTS: dict[str, tuple[str, ...]] = {
    "openai-chat": ("none", "minimal", "low", "medium", "high", "xhigh", "max"),
    "openai-responses": ("none", "minimal", "low", "medium", "high", "xhigh", "max"),
    "anthropic": ("low", "medium", "high", "xhigh", "max"),
    "gemini": ("minimal", "low", "medium", "high", "xhigh"),
    "gemini-interactions": ("minimal", "low", "medium", "high", "xhigh"),
}
#: the largest sampling temperature each dialect accepts (the smallest is 0). Anthropic's Messages request (its
#: SDK's request type) has no temperature any more: a model that still takes one gets it through ``extra_body``
MAX_TEMPERATURE: dict[str, float] = {"openai-chat": 2.0, "openai-responses": 2.0, "gemini": 2.0,
                                     "gemini-interactions": 2.0}


def options_fragment(dialect: str, *, temperature: float | None = None,
                     reasoning_effort: str | None = None) -> dict[str, Any]:
    """The request fields for a sampling ``temperature`` and a ``reasoning_effort`` in ``dialect``'s own place
    (see ``REASONING_EFFORTS``); empty when both are None. Raises ``UsageError`` for a value the dialect does not
    accept (a temperature out of its range, an effort it does not document): nothing is changed silently."""
    capabilities_for(dialect)
    out: dict[str, Any] = {}
    if temperature is not None:
        top = MAX_TEMPERATURE.get(dialect)
        if top is None:
            raise UsageError(f"{dialect} requests have no temperature field; a model that takes one gets it "
                             "through extra_body")
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) \
                or not 0.0 <= temperature <= top:
            raise UsageError(f"temperature must be a number from 0 to {top:g} for {dialect}, got {temperature!r}")
        merge_body(out, {"generationConfig": {"temperature": temperature}} if dialect == "gemini"
                   else {"generation_config": {"temperature": temperature}} if dialect == "gemini-interactions"
                   else {"temperature": temperature})
    if reasoning_effort is not None:
        allowed = REASONING_EFFORTS[dialect]
        if reasoning_effort not in allowed:
            raise UsageError(f"reasoning_effort {reasoning_effort!r} is not a value {dialect} accepts; expected one "
                             f"of: {', '.join(allowed)}")
        effort: dict[str, Any] = {
            "openai-chat": {"reasoning_effort": reasoning_effort},
            "openai-responses": {"reasoning": {"effort": reasoning_effort}},
            "anthropic": {"output_config": {"effort": reasoning_effort}},
            "gemini": {"generationConfig": {"thinkingConfig": {"thinkingLevel": reasoning_effort.upper()}}},
            "gemini-interactions": {"generation_config": {"thinking_level": reasoning_effort}},
        }[dialect]
        merge_body(out, effort)
    return out


def merge_body(body: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``extra`` into ``body`` in place and return it: an object merges with the object already there, key
    by key; any other value replaces (``body_conflicts`` finds where that would happen)."""
    for key, value in extra.items():
        here = body.get(key)
        if isinstance(here, dict) and isinstance(value, Mapping):
            body[key] = merge_body(dict(here), value)
        else:
            body[key] = copy.deepcopy(value)
    return body


def body_conflicts(body: Mapping[str, Any], extra: Mapping[str, Any], path: str = "") -> list[str]:
    """The paths (``a.b``) where ``merge_body(body, extra)`` would replace a value ``body`` already has with
    another one."""
    found: list[str] = []
    for key, value in extra.items():
        if key not in body:
            continue
        here, where = body[key], f"{path}{key}"
        if isinstance(here, Mapping) and isinstance(value, Mapping):
            found.extend(body_conflicts(here, value, where + "."))
        elif here != value:
            found.append(where)
    return found


def request_body(dialect: str, *, model: str, history: list[Any], tools_fragment: Mapping[str, Any] | None,
                 stream: bool = True, system: str | None = None, max_tokens: int = 1024,
                 previous_id: str | None = None, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The JSON body of one request: ``history`` in the dialect's own format (messages, input items or
    contents), ``tools_fragment`` from ``toolwire.codecs.declare.declare(...).fragment``, then ``extra`` (request
    options from ``options_fragment``, the application's own fields) merged in with ``merge_body``."""
    body: dict[str, Any]
    tools = dict(tools_fragment or {})
    if dialect == "openai-chat":
        messages = ([{"role": "system", "content": system}] if system else []) + list(history)
        body = {"model": model, "messages": messages, **tools}
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
    elif dialect == "openai-responses":
        body = {"model": model, "input": list(history), "store": False, **tools}
        if system:
            body["instructions"] = system
        body["stream"] = stream
        body["include"] = ["reasoning.encrypted_content"]
    elif dialect == "anthropic":
        body = {"model": model, "max_tokens": max_tokens, "messages": list(history), **tools}
        if system:
            body["system"] = system
        body["stream"] = stream
    elif dialect == "gemini":
        body = {"contents": list(history), **tools}
        if system:
            body["systemInstruction"] = {"parts": [{"text": system}]}
    elif dialect == "gemini-interactions":
        items = list(history)
        body = {"model": model, "input": items[0] if len(items) == 1 and isinstance(items[0], str) else items,
                **tools, "stream": stream}
        if system:
            body["system_instruction"] = system
        if previous_id:
            body["previous_interaction_id"] = previous_id
    else:
        raise UsageError(f"unknown dialect {dialect!r}")
    return merge_body(body, extra) if extra else body


class ProviderErrorInfo(msgspec.Struct, kw_only=True):
    """What an HTTP error response says: ``transient`` decides a retry, ``retry_after`` (seconds) the wait."""

    status: int
    type: str
    message: str
    transient: bool
    retry_after: float | None = None


_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+)s\s*$")


def _header_delay(headers: Mapping[str, str]) -> float | None:
    low = {k.lower(): v for k, v in headers.items()}
    ms = low.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    ra = low.get("retry-after")
    if ra:
        try:
            return max(0.0, float(ra))
        except ValueError:
            parsed = email.utils.parsedate_to_datetime(ra) if ra else None
            if parsed is not None:
                return max(0.0, parsed.timestamp() - time.time())
    return None


def _body_delay(body: Any) -> float | None:
    """Gemini's ``RetryInfo.retryDelay`` ("37s", "1.5s") in ``error.details``."""
    err = body.get("error") if isinstance(body, dict) else None
    details = err.get("details") if isinstance(err, dict) else None
    if isinstance(details, list):
        for d in details:
            if isinstance(d, dict) and str(d.get("@type", "")).endswith("google.rpc.RetryInfo"):
                m = _DURATION.match(str(d.get("retryDelay", "")))
                if m:
                    return float(m.group(1))
    return None


def parse_error(dialect: str, status: int, headers: Mapping[str, str], body: bytes) -> ProviderErrorInfo:
    """Classify an HTTP error response of ``dialect``: transient (retry) or permanent (fail fast), and how
    long the server asked to wait (``retry-after-ms``, ``retry-after``, Gemini ``RetryInfo``)."""
    cap = capabilities_for(dialect)
    try:
        doc = msgspec.json.decode(body) if body else None
    except msgspec.DecodeError:
        doc = None
    if isinstance(doc, list) and len(doc) == 1:
        doc = doc[0]  # Gemini's array stream wraps errors
    etype, message = f"http_{status}", ""
    code = None
    if isinstance(doc, dict):
        err = doc.get("error")
        if isinstance(err, dict):
            etype = str(err.get("type") or err.get("status") or etype)
            message = str(err.get("message") or "")
            code = err.get("code")
        elif doc.get("object") == "error":
            etype = str(doc.get("type") or etype)
            message = str(doc.get("message") or "")
    transient = status in cap.transient_statuses or (status >= 500 and status not in cap.permanent_statuses)
    # quota that will not come back by waiting
    text = f"{etype} {code} {message}".lower()
    if status == 429 and ("insufficient_quota" in text or "spend_limit" in text or "perday" in text.replace(" ", "")):
        transient = False
    header = {k.lower(): v for k, v in headers.items()}
    should = header.get("x-should-retry")
    if should in ("true", "false"):
        transient = should == "true"
    delay = _header_delay(headers)
    if delay is None:
        delay = _body_delay(doc)
    return ProviderErrorInfo(status=status, type=etype, message=message[:500], transient=transient,
                             retry_after=delay)
