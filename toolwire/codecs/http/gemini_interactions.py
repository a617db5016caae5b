"""Gemini Interactions over HTTP: ``POST {base}/v1beta/interactions`` with ``x-goog-api-key``. The server keeps
the conversation: a request after the first names the last interaction (``previous_interaction_id``) and carries
only the new input (the results of the last turn)."""

from __future__ import annotations

from typing import Any

from ..requests import HTTP
from .gemini import GOOGLE_EFFORTS

__all__ = ["InteractionsHTTP", "PART"]


class InteractionsHTTP(HTTP):
    api_key_env = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    base_url_env = "GEMINI_BASE_URL"
    default_base_url = "https://generativelanguage.googleapis.com"
    secret_headers = ("x-goog-api-key",)
    keeps_history = True
    reasoning_efforts = GOOGLE_EFFORTS
    provider_name = "gcp.gemini"
    request_fields = (
        (("generation_config", "temperature"), "gen_ai.request.temperature", "double"),
        (("generation_config", "top_p"), "gen_ai.request.top_p", "double"),
        (("generation_config", "max_output_tokens"), "gen_ai.request.max_tokens", "int"),
        (("generation_config", "stop_sequences"), "gen_ai.request.stop_sequences", "strings"),
        (("generation_config", "seed"), "gen_ai.request.seed", "int"),
    )

    def url(self, base: str, *, model: str, stream: bool) -> str:
        return f"{base}/v1beta/interactions"

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"x-goog-api-key": key}

    def body(self, *, model: str, history: list[Any], tools_fragment: dict[str, Any], stream: bool,
             system: str | None, max_tokens: int, previous_id: str | None) -> dict[str, Any]:
        items = list(history)
        body = {"model": model, "input": items[0] if len(items) == 1 and isinstance(items[0], str) else items,
                **tools_fragment, "stream": stream}
        if system:
            body["system_instruction"] = system
        if previous_id:
            body["previous_interaction_id"] = previous_id
        return body

    def option_fields(self, temperature: float | None, reasoning_effort: str | None) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if temperature is not None:
            out.append({"generation_config": {"temperature": temperature}})
        if reasoning_effort is not None:
            out.append({"generation_config": {"thinking_level": reasoning_effort}})
        return out


PART = InteractionsHTTP("gemini-interactions")
