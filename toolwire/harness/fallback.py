"""Localized fallback messages: what the user reads when no answer could be had. Never any diagnostics.

A run that ended in a fallback after one of its writes took effect (or may have) must not ask the user to try
again, which would do the action twice: with ``writes`` the message says the action was done, or may have been,
whatever the reason."""

from __future__ import annotations

import enum

from ..errors import UsageError

__all__ = ["FallbackReason", "WriteOutcome", "LOCALES", "fallback_message"]


class FallbackReason(str, enum.Enum):
    PROVIDER_FAILED = "provider_failed"  # no usable response after every retry, or a permanent error
    CONTENT_FILTERED = "content_filtered"  # the provider's filter or the model refused (refusal, SAFETY …)
    CORRECTIONS_EXHAUSTED = "corrections_exhausted"  # the model failed again after its correction round
    STEP_LIMIT = "step_limit"  # the conversation reached its step bound without an answer


class WriteOutcome(str, enum.Enum):
    """What became of a write of the run: its effect happened (``ok``: the handler returned, its value usable
    or not), or may have (``outcome_unknown``)."""

    OK = "ok"
    OUTCOME_UNKNOWN = "outcome_unknown"


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

#: the fallback of a run whose writes took effect (``ok``) or may have (``outcome_unknown``), for every reason
_AFTER_WRITES: dict[str, dict[WriteOutcome, str]] = {
    "en": {
        WriteOutcome.OK: "I carried out the action, but I couldn't finish my reply. Please check the result "
                         "before asking again, so that it isn't done twice.",
        WriteOutcome.OUTCOME_UNKNOWN: "I may have carried out the action, but I couldn't confirm it or finish my "
                                      "reply. Please check before asking again, so that it isn't done twice.",
    },
    "pt-BR": {
        WriteOutcome.OK: "Realizei a ação, mas não consegui concluir minha resposta. Confira o resultado antes de "
                         "pedir de novo, para que ela não seja feita duas vezes.",
        WriteOutcome.OUTCOME_UNKNOWN: "Posso ter realizado a ação, mas não consegui confirmar nem concluir minha "
                                      "resposta. Confira antes de pedir de novo, para que ela não seja feita duas "
                                      "vezes.",
    },
    "es": {
        WriteOutcome.OK: "Realicé la acción, pero no pude terminar mi respuesta. Revisa el resultado antes de "
                         "pedirlo de nuevo, para que no se haga dos veces.",
        WriteOutcome.OUTCOME_UNKNOWN: "Puede que haya realizado la acción, pero no pude confirmarlo ni terminar mi "
                                      "respuesta. Revísalo antes de pedirlo de nuevo, para que no se haga dos "
                                      "veces.",
    },
}

LOCALES = tuple(_MESSAGES)


def fallback_message(reason: FallbackReason, locale: str = "en", *, writes: WriteOutcome | None = None) -> str:
    """The message for ``reason`` in ``locale`` (en, pt-BR, es; a bare language such as "pt" or "es-MX"
    falls back to its language). ``writes``: what became of the run's writes, None when none ran; given, the
    message says the action was done (``WriteOutcome.OK``) or may have been (``OUTCOME_UNKNOWN``) instead of
    asking to try again, for every reason. Raises ``UsageError`` for a locale with no messages."""
    lang = locale if locale in _MESSAGES else next(
        (loc for loc in _MESSAGES if loc.split("-")[0].lower() == locale.split("-")[0].lower()), None)
    if lang is None:
        raise UsageError(f"no fallback messages for locale {locale!r}; available: {', '.join(LOCALES)}")
    reason = FallbackReason(reason)
    if writes is not None:
        return _AFTER_WRITES[lang][WriteOutcome(writes)]
    return _MESSAGES[lang][reason]
