"""Results and history, per dialect: the provider-native message(s) answering a turn's calls, the replay of the
assistant message in a form the provider accepts, and the repair of a stored history.

Each dialect module provides ``encode(turn, pairs, echo_ids=)`` (the result message(s) for ``(call, result)``
pairs in call order), ``replay(turn, calls)`` (the assistant message(s) to append) and ``repair(messages,
echo_ids=, counter=)`` (the repaired history and the ``RepairAction`` records, from a copy of the history that it
may edit, counting calls on ``counter``). The public entry points are in ``toolwire.history``, which hands
``encode`` and ``replay`` a turn of one choice (the calls and assistant message of the choice being answered)
and ``repair`` a copy already made encodable.
"""

from __future__ import annotations

from types import ModuleType

from . import anthropic, gemini, gemini_interactions, openai_chat, openai_responses
from ._common import (
    INVALID_ARGUMENTS_KEY,
    MISSING_RESULT_TEXT,
    RepairAction,
    RepairKind,
    RepairReport,
    missing_result,
    wire_id,
)

__all__ = [
    "DIALECTS",
    "INVALID_ARGUMENTS_KEY",
    "MISSING_RESULT_TEXT",
    "RepairAction",
    "RepairKind",
    "RepairReport",
    "missing_result",
    "wire_id",
]

#: provider id -> its results module
DIALECTS: dict[str, ModuleType] = {
    openai_chat.PROVIDER: openai_chat,
    openai_responses.PROVIDER: openai_responses,
    anthropic.PROVIDER: anthropic,
    gemini.PROVIDER: gemini,
    gemini_interactions.PROVIDER: gemini_interactions,
}
