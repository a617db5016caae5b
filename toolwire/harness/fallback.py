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

#: the message of any fallback that comes after a write of the same run may have taken effect: "try again" would
#: invite the user to do it twice
_AFTER_EFFECTS: dict[str, str] = {
    "en": "I couldn't finish that, but part of it was already done. Please check what was done before trying "
          "again.",
    "pt-BR": "Não consegui terminar isso, mas uma parte já foi feita. Verifique o que foi feito antes de tentar "
             "novamente.",
    "es": "No pude terminar eso, pero una parte ya se hizo. Comprueba lo que se hizo antes de intentarlo de nuevo.",
}

LOCALES = tuple(_MESSAGES)


def fallback_message(reason: FallbackReason, locale: str = "en", *, after_effects: bool = False) -> str:
    """The message for ``reason`` in ``locale`` (en, pt-BR, es; a bare language such as "pt" or "es-MX"
    falls back to its language). ``after_effects``: a write of the run may have taken effect, and the message says
    that part of the request was done instead of inviting a plain retry. Raises ``UsageError`` for a locale with
    no messages."""
    table = _MESSAGES.get(locale)
    if table is None:
        lang = locale.split("-")[0].lower()
        table = next((t for loc, t in _MESSAGES.items() if loc.split("-")[0].lower() == lang), None)
    if table is None:
        raise UsageError(f"no fallback messages for locale {locale!r}; available: {', '.join(LOCALES)}")
    message = table[FallbackReason(reason)]
    if after_effects:
        return next(_AFTER_EFFECTS[loc] for loc, t in _MESSAGES.items() if t is table)
    return message
