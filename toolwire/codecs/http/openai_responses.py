"""OpenAI Responses over HTTP: ``POST {base}/v1/responses`` with a bearer key; stateless (``store: false``), the
reasoning items' encrypted content included so that the history replays them."""

from __future__ import annotations

from typing import Any

from ..requests import HTTP
from .openai_chat import OPENAI_EFFORTS

__all__ = ["ResponsesHTTP", "PART"]


class ResponsesHTTP(HTTP):
    api_key_env = ("OPENAI_API_KEY",)
    base_url_env = "OPENAI_BASE_URL"
    default_base_url = "https://api.openai.com"
    reasoning_efforts = OPENAI_EFFORTS
    provider_name = "openai"
    span_attributes = {"openai.api.type": "responses"}
    request_fields = (
        (("temperature",), "gen_ai.request.temperature", "double"),
        (("top_p",), "gen_ai.request.top_p", "double"),
        (("max_output_tokens",), "gen_ai.request.max_tokens", "int"),
    )

    def url(self, base: str, *, model: str, stream: bool) -> str:
        return f"{base}/v1/responses"

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"authorization": f"Bearer {key}"}

    def body(self, *, model: str, history: list[Any], tools_fragment: dict[str, Any], stream: bool,
             system: str | None, max_tokens: int, previous_id: str | None) -> dict[str, Any]:
        body = {"model": model, "input": list(history), "store": False, **tools_fragment}
        if system:
            body["instructions"] = system
        body["stream"] = stream
        body["include"] = ["reasoning.encrypted_content"]
        return body

    def option_fields(self, temperature: float | None, reasoning_effort: str | None) -> list[dict[str, Any]]:
        out = super().option_fields(temperature, reasoning_effort)
        if reasoning_effort is not None:
            out.append({"reasoning": {"effort": reasoning_effort}})
        return out


PART = ResponsesHTTP("openai-responses")
