"""Dialect codecs: everything about one provider's wire format lives in its module here."""

from __future__ import annotations

from ..errors import UsageError
from .anthropic import AnthropicCodec
from .base import Codec
from .gemini import GeminiCodec
from .gemini_interactions import GeminiInteractionsCodec
from .openai_chat import OpenAIChatCodec
from .openai_responses import OpenAIResponsesCodec

__all__ = ["Codec", "CODECS", "PROVIDERS", "codec_for"]

#: provider id -> codec class, for the dialects implemented
CODECS: dict[str, type[Codec]] = {
    OpenAIChatCodec.provider: OpenAIChatCodec,
    AnthropicCodec.provider: AnthropicCodec,
    OpenAIResponsesCodec.provider: OpenAIResponsesCodec,
    GeminiCodec.provider: GeminiCodec,
    GeminiInteractionsCodec.provider: GeminiInteractionsCodec,
}

PROVIDERS = tuple(CODECS)


def codec_for(provider: str) -> Codec:
    """Return a new codec for ``provider``. Raises ``UsageError`` for an unknown provider id."""
    try:
        cls = CODECS[provider]
    except KeyError:
        raise UsageError(
            f"unknown provider {provider!r}; expected one of: {', '.join(PROVIDERS)}") from None
    return cls()
