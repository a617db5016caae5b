"""Results and history, per dialect: the provider-native message(s) answering a turn's calls, the replay of the
assistant message in a form the provider accepts, and the repair of a stored history.

Each dialect module provides a ``Results`` part (``._part``, where the interface is documented): ``encode``
(the result message(s) for ``(call, result)`` pairs in call order), ``replay`` (the assistant message(s) to
append), ``repair`` (the repaired history and the ``RepairAction`` records, from a copy of the history that it
may edit, counting calls on ``counter``), ``user_message`` and ``rename_ids``. The dialect's record
(``toolwire.codecs.dialect``) holds it. The public entry points are in ``toolwire.history``, which hands
``encode`` and ``replay`` a turn of one choice (the calls and assistant message of the choice being answered)
and ``repair`` a copy already made encodable.
"""

from __future__ import annotations

from typing import Any

from ._common import (
    INVALID_ARGUMENTS_KEY,
    MISSING_RESULT_TEXT,
    RepairAction,
    RepairKind,
    RepairReport,
    missing_result,
    wire_id,
)
from ._part import Results

__all__ = [
    "DIALECTS",
    "Results",
    "INVALID_ARGUMENTS_KEY",
    "MISSING_RESULT_TEXT",
    "RepairAction",
    "RepairKind",
    "RepairReport",
    "missing_result",
    "wire_id",
]

def __getattr__(name: str) -> Any:
    if name == "DIALECTS":  # provider id -> its results part, from the registry
        from .. import dialects

        return {d.id: d.results for d in dialects()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
