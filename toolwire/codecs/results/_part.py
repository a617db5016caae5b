"""The results part of a dialect record: the history side of a dialect, what ``toolwire.history`` and the harness
loop ask of it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from ...types import Message, ToolCall, Turn
from ._common import Actions, CallCounter, Pair, deep_copy

__all__ = ["Results"]


class Results:
    """What a conversation's history looks like in one dialect.

    A dialect implements ``encode`` and ``repair``; the rest has defaults:

    * ``encode(turn, pairs, echo_ids=)``: the provider-native answer to a turn's calls, one ``(call, result)``
      pair per call in call order (every call of the turn's choice, the ones that did not run included): one
      message or a list of them. ``toolwire.history`` has already paired the results by ``local_id``, made up the
      missing ones and reduced the turn to one choice; ``wire_id`` (``._common``) gives a call without an id the
      synthetic one its replay carries too. ``echo_ids`` is False for endpoints that refuse an id in a result.
    * ``replay(turn, calls)``: the assistant message(s) to append before the answer, as a list; the default is
      the turn's assistant message, copied. A dialect replaces what the provider would refuse (arguments that did
      not parse, as ``{"_invalid_arguments": "<raw text>"}``: ``call_arguments``) and keeps the rest verbatim.
    * ``repair(messages, echo_ids=, counter=)``: a stored history (its own copy, which it may edit) in which every
      call has exactly one result in the place the provider requires, and the ``RepairAction`` records of every
      change; ``counter.add(position)`` once per call found (it enforces ``max_calls``). Repairing twice changes
      nothing. ``_flat.place_results`` serves dialects whose results are entries of the list (a tool message, an
      output item, a result step), ``_blocks.place_result_blocks`` those whose results are blocks at the start
      of the next user message.
    * ``user_message(text, alone=)``: the history entry that says ``text`` as the user (default ``{"role":
      "user", "content": text}``); ``alone`` is False when other input goes with it.
    * ``add_user(history, text, alone=)``: add the user's ``text`` to the end of ``history``, in place (default:
      append ``user_message``). A dialect whose roles must alternate adds it to a trailing user message instead
      (the history of a run stopped once its results were in it ends with one); it replaces that entry with a
      new one rather than editing an entry the caller may hold.
    * ``renames_ids`` and ``rename_ids(messages, new_id)``: ``remap_call_ids`` for dialects whose call ids a
      stricter server may refuse: rename every call's id and every result's reference to it through ``new_id``,
      in place (default: not supported).
    """

    #: the dialect id
    dialect: ClassVar[str]
    #: ``rename_ids`` is implemented
    renames_ids: ClassVar[bool] = False

    def encode(self, turn: Turn, pairs: list[Pair], *, echo_ids: bool = True) -> Message | list[Message]:
        """The answer to ``pairs`` (see the class docstring)."""
        raise NotImplementedError

    def replay(self, turn: Turn, calls: list[ToolCall]) -> list[Any]:
        """The assistant message(s) replaying ``turn``."""
        return [deep_copy(turn.assistant_message)]

    def repair(self, messages: list[Any], *, echo_ids: bool = True, counter: CallCounter
               ) -> tuple[list[Any], Actions]:
        """The repaired history and what changed (see the class docstring)."""
        raise NotImplementedError

    def user_message(self, text: str, *, alone: bool = True) -> Any:
        """The history entry of a user's ``text``."""
        return {"role": "user", "content": text}

    def add_user(self, history: list[Any], text: str, *, alone: bool = True) -> None:
        """Add the user's ``text`` to the end of ``history``, in place (see the class docstring)."""
        history.append(self.user_message(text, alone=alone))

    def rename_ids(self, messages: list[Any], new_id: Callable[[Any], Any]) -> None:
        """Rename, in place, every call id and every reference to one in ``messages``."""
        raise NotImplementedError
