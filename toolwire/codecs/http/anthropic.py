"""Anthropic Messages over HTTP: ``POST {base}/v1/messages`` with ``x-api-key`` and ``anthropic-version``;
``max_tokens`` is required; the request has no temperature field any more (its SDK's request type): a model that
still takes one gets it through ``extra_body``."""

from __future__ import annotations

from typing import Any

from ..requests import HTTP

__all__ = ["AnthropicHTTP", "PART"]


class AnthropicHTTP(HTTP):
    api_key_env = ("ANTHROPIC_API_KEY",)
    base_url_env = "ANTHROPIC_BASE_URL"
    default_base_url = "https://api.anthropic.com"
    secret_headers = ("x-api-key",)
    reasoning_efforts = ("low", "medium", "high", "xhigh", "max")
    max_temperature = None
    provider_name = "anthropic"
    request_fields = (
        (("temperature",), "gen_ai.request.temperature", "double"),
        (("top_p",), "gen_ai.request.top_p", "double"),
        (("top_k",), "gen_ai.request.top_k", "double"),
        (("max_tokens",), "gen_ai.request.max_tokens", "int"),
        (("stop_sequences",), "gen_ai.request.stop_sequences", "strings"),
    )

    def url(self, base: str, *, model: str, stream: bool) -> str:
        return f"{base}/v1/messages"

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"x-api-key": key, "anthropic-version": "2023-06-01"}

    def body(self, *, model: str, history: list[Any], tools_fragment: dict[str, Any], stream: bool,
             system: str | None, max_tokens: int, previous_id: str | None) -> dict[str, Any]:
        body = {"model": model, "max_tokens": max_tokens, "messages": list(history), **tools_fragment}
        if system:
            body["system"] = system
        body["stream"] = stream
        return body

    def option_fields(self, temperature: float | None, reasoning_effort: str | None) -> list[dict[str, Any]]:
        return [{"output_config": {"effort": reasoning_effort}}] if reasoning_effort is not None else []


PART = AnthropicHTTP("anthropic")
