"""Gemini ``generateContent`` over HTTP (Gemini API): ``POST {base}/v1beta/models/{model}:streamGenerateContent
?alt=sse`` (streamed) or ``:generateContent``, with ``x-goog-api-key``; options in ``generationConfig`` (the
effort as ``thinkingConfig.thinkingLevel``, upper case)."""

from __future__ import annotations

from typing import Any

from ..requests import HTTP

__all__ = ["GeminiHTTP", "PART", "GOOGLE_EFFORTS"]

#: the thinking levels Google documents (Gemini ``thinkingLevel`` in upper case, Interactions ``thinking_level``)
GOOGLE_EFFORTS = ("minimal", "low", "medium", "high", "xhigh")


class GeminiHTTP(HTTP):
    api_key_env = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    base_url_env = "GEMINI_BASE_URL"
    default_base_url = "https://generativelanguage.googleapis.com"
    secret_headers = ("x-goog-api-key",)
    reasoning_efforts = GOOGLE_EFFORTS
    operation_name = "generate_content"
    provider_name = "gcp.gemini"
    request_fields = (
        (("generationConfig", "temperature"), "gen_ai.request.temperature", "double"),
        (("generationConfig", "topP"), "gen_ai.request.top_p", "double"),
        (("generationConfig", "topK"), "gen_ai.request.top_k", "double"),
        (("generationConfig", "maxOutputTokens"), "gen_ai.request.max_tokens", "int"),
        (("generationConfig", "stopSequences"), "gen_ai.request.stop_sequences", "strings"),
        (("generationConfig", "seed"), "gen_ai.request.seed", "int"),
        (("generationConfig", "frequencyPenalty"), "gen_ai.request.frequency_penalty", "double"),
        (("generationConfig", "presencePenalty"), "gen_ai.request.presence_penalty", "double"),
        (("generationConfig", "candidateCount"), "gen_ai.request.choice.count", "int"),
    )

    def url(self, base: str, *, model: str, stream: bool) -> str:
        return (f"{base}/v1beta/models/{model}:streamGenerateContent?alt=sse" if stream
                else f"{base}/v1beta/models/{model}:generateContent")

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"x-goog-api-key": key}

    def body(self, *, model: str, history: list[Any], tools_fragment: dict[str, Any], stream: bool,
             system: str | None, max_tokens: int, previous_id: str | None) -> dict[str, Any]:
        body = {"contents": list(history), **tools_fragment}
        if system:
            body["systemInstruction"] = {"parts": [{"text": system}]}
        return body

    def option_fields(self, temperature: float | None, reasoning_effort: str | None) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if temperature is not None:
            out.append({"generationConfig": {"temperature": temperature}})
        if reasoning_effort is not None:
            out.append({"generationConfig": {"thinkingConfig": {"thinkingLevel": reasoning_effort.upper()}}})
        return out


PART = GeminiHTTP("gemini")
