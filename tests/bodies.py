"""Whole (non-streaming) response bodies of every dialect, built from canonical calls, for dispatch tests.

``body(provider, calls, response_id=...)`` gives the bytes a provider would send for one model response whose
calls are ``(call_id or None, name, args dict)``; ``response_id=None`` leaves the response id out.
``choices_body(provider, choices, response_id=...)`` gives a response with several alternative completions (Chat
``n > 1``, Gemini candidates), one list of calls per choice. Each dialect's test adapter (``tests/dialects``) writes
its own.
"""

from __future__ import annotations

from typing import Any, Sequence

from .dialects import REGISTERED, adapter, adapters

#: every registered dialect
PROVIDERS = REGISTERED
#: the dialects whose responses can carry several choices (candidates)
MULTI_CHOICE = tuple(d for d in REGISTERED if d in adapters() and adapters()[d].multi_choice)

Call = tuple[str | None, str, Any]


def body(provider: str, calls: Sequence[Call], *, response_id: str | None = "resp_1", text: str | None = None,
         custom: bool = False) -> bytes:
    """One model response of ``provider`` carrying ``calls`` (ids None where the provider sent none)."""
    return adapter(provider).body(calls, response_id=response_id, text=text, custom=custom)


def identified(provider: str, response_id: str) -> dict[str, str]:
    """The dispatch keywords that identify a response of ``provider`` built with ``response_id``: none where the body
    carries the id, else ``turn_id=response_id`` (a dialect whose bodies have no response id: what its users pass)."""
    return {} if adapter(provider).response_ids else {"turn_id": response_id}


def choices_body(provider: str, choices: Sequence[Sequence[Call]], *, response_id: str | None = "resp_1") -> bytes:
    """One response of ``provider`` (a dialect with several choices) with one choice (candidate) per list of calls,
    every choice finished cleanly."""
    return adapter(provider).choices_body(choices, response_id=response_id)
