"""OpenAI Chat Completions over HTTP: ``POST {base}/v1/chat/completions`` with a bearer key; the system prompt is
the first message; a streamed request asks for the usage chunk."""

from __future__ import annotations

from typing import Any

from ..requests import HTTP

__all__ = ["ChatHTTP", "PART", "OPENAI_EFFORTS"]

#: ``reasoning_effort`` (Chat) and ``reasoning.effort`` (Responses) values the openai SDK's request types list
OPENAI_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")


class ChatHTTP(HTTP):
    api_key_env = ("OPENAI_API_KEY",)
    base_url_env = "OPENAI_BASE_URL"
    default_base_url = "https://api.openai.com"
    reasoning_efforts = OPENAI_EFFORTS
    provider_name = "openai"
    span_attributes = {"openai.api.type": "chat_completions"}
    request_fields = (
        (("temperature",), "gen_ai.request.temperature", "double"),
        (("top_p",), "gen_ai.request.top_p", "double"),
        (("max_completion_tokens",), "gen_ai.request.max_tokens", "int"),
        (("max_tokens",), "gen_ai.request.max_tokens", "int"),
        (("stop",), "gen_ai.request.stop_sequences", "strings"),
        (("seed",), "gen_ai.request.seed", "int"),
        (("frequency_penalty",), "gen_ai.request.frequency_penalty", "double"),
        (("presence_penalty",), "gen_ai.request.presence_penalty", "double"),
        (("n",), "gen_ai.request.choice.count", "int"),
    )

    def url(self, base: str, *, model: str, stream: bool) -> str:
        return f"{base}/v1/chat/completions"

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"authorization": f"Bearer {key}"}

    def body(self, *, model: str, history: list[Any], tools_fragment: dict[str, Any], stream: bool,
             system: str | None, max_tokens: int, previous_id: str | None) -> dict[str, Any]:
        messages = ([{"role": "system", "content": system}] if system else []) + list(history)
        body = {"model": model, "messages": messages, **tools_fragment}
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    def option_fields(self, temperature: float | None, reasoning_effort: str | None) -> list[dict[str, Any]]:
        out = super().option_fields(temperature, reasoning_effort)
        if reasoning_effort is not None:
            out.append({"reasoning_effort": reasoning_effort})
        return out


PART = ChatHTTP("openai-chat")
