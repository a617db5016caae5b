"""Localized fallback messages: what the user reads when no answer could be had. Never any diagnostics."""

from __future__ import annotations

import enum

from ..errors import UsageError

__all__ = ["FallbackReason", "LOCALES", "fallback_message"]


class FallbackReason(str, enum.Enum):
    PROVIDER_FAILED = "provider_failed"  # no usable response after every retry, or a permanent error
    CONTENT_FILTERED = "content_filtered"  # the provider's filter or the model refused (refusal, SAFETY …)
    CORRECTIONS_EXHAUSTED = "corrections_exhausted"  # the model failed again after its correction round
    STEP_LIMIT = "step_limit"  # the conversation reached its step bound without an answer


_MESSAGES: dict[str, dict[FallbackReason, str]] = {
    "en": {
        FallbackReason.PROVIDER_FAILED: "I couldn't get a response. Please try again.",
        FallbackReason.CONTENT_FILTERED: "I can't help with that request.",
        FallbackReason.CORRECTIONS_EXHAUSTED: "I couldn't complete that request. Could you rephrase it?",
        FallbackReason.STEP_LIMIT: "I couldn't finish that in time. Please try again with a simpler request.",
    },
    "pt-BR": {
        FallbackReason.PROVIDER_FAILED: "Não consegui obter uma resposta. Por favor, tente novamente.",
        FallbackReason.CONTENT_FILTERED: "Não posso ajudar com esse pedido.",
        FallbackReason.CORRECTIONS_EXHAUSTED: "Não consegui concluir esse pedido. Você pode reformulá-lo?",
        FallbackReason.STEP_LIMIT: "Não consegui terminar a tempo. Tente novamente com um pedido mais simples.",
    },
    "es": {
        FallbackReason.PROVIDER_FAILED: "No pude obtener una respuesta. Por favor, inténtalo de nuevo.",
        FallbackReason.CONTENT_FILTERED: "No puedo ayudar con esa solicitud.",
        FallbackReason.CORRECTIONS_EXHAUSTED: "No pude completar esa solicitud. ¿Podrías reformularla?",
        FallbackReason.STEP_LIMIT: "No pude terminar a tiempo. Inténtalo de nuevo con una solicitud más sencilla.",
    },
}

LOCALES = tuple(_MESSAGES)


def fallback_message(reason: FallbackReason, locale: str = "en") -> str:
    """The message for ``reason`` in ``locale`` (en, pt-BR, es; a bare language such as "pt" or "es-MX"
    falls back to its language). Raises ``UsageError`` for a locale with no messages."""
    table = _MESSAGES.get(locale)
    if table is None:
        lang = locale.split("-")[0].lower()
        table = next((t for loc, t in _MESSAGES.items() if loc.split("-")[0].lower() == lang), None)
    if table is None:
        raise UsageError(f"no fallback messages for locale {locale!r}; available: {', '.join(LOCALES)}")
    return table[FallbackReason(reason)]
