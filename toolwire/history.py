"""Results and history: answer a turn's calls in the provider's format, append the turn to the conversation,
and repair a stored conversation before the next request.

Which calls are answered: every call of the replayed assistant message, whatever its state. A truncated,
errored or not-run call is replayed too (its arguments in an accepted form) and answered with its ``not_run``
result, so no call is ever left without exactly one result (failure mode 25 in docs/failure-modes.md). A call
for which ``results`` holds nothing is answered with an error result saying no result was recorded.

Several choices (Chat ``n > 1``, Gemini candidates): a history continues one of them, the one whose calls were
run. The results say which: the replayed message is that choice's (``Choice.assistant_message``) and only its
calls are answered; with no results it is the choice ``turn.assistant_message`` replays (choice 0). Results
for calls of two choices are a ``UsageError``.

Pairing is by ``local_id``, never by position; results come out in call order whatever order they were given in
(failure mode 24). Malformed arguments are replayed as ``{"_invalid_arguments": "<the raw text>"}`` (a JSON object
string for OpenAI ``arguments``, an object for Anthropic ``input``, Gemini ``args`` and Interactions
``arguments``): the provider accepts it and the model sees what it sent (failure mode 21).

Calls without the id a provider requires (a Chat server that sent none) are answered under a synthetic id made
of the response id and the call's ``local_id``; the replayed call carries the same id. ``echo_ids`` matters only
for Gemini: False leaves the call id out of its function responses (endpoints that refuse it, such as Vertex
Express).

Each dialect's part of this (the answer's shape, the replay, the repair rules) is its ``Results`` part
(``toolwire.codecs.results``), which its module's docstring describes; this module pairs, checks and chooses.

Text that UTF-8 cannot encode (surrogate code points, which ``json.loads`` makes from ``"\\ud800"``) would make
the next request impossible to send: what these functions return never holds any. ``encode_results`` and
``history_messages`` replace a lone surrogate by U+FFFD (and join a valid pair) in what they build;
``repair_history`` does the same and reports it (``REPLACED_SURROGATES``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, overload

import msgspec

from .codecs import dialect_for, dialects
from .codecs.results import RepairAction, RepairKind, RepairReport, Results, missing_result
from .codecs.results._common import DEFAULT_MAX_CALLS, Actions, CallCounter, Pair, clean_copy
from .errors import UsageError
from .registry import _rich
from .registry.content import Content
from .registry.result import ToolResult
from .types import Message, Turn

__all__ = ["encode_results", "history_messages", "repair_history", "remap_call_ids", "CALL_ID_RULES", "RepairReport",
           "RepairAction", "RepairKind", "DEFAULT_MAX_CALLS"]


def _dialect(provider: str) -> Results:
    return dialect_for(provider).results


def _checked(turn: Turn, results: Iterable[ToolResult]) -> dict[str, ToolResult]:
    """``results`` by the ``local_id`` of the call each answers, after checking each answers a call of ``turn``."""
    known = {c.local_id: c for c in turn.calls}
    by_local: dict[str, ToolResult] = {}
    for r in results:
        if not isinstance(r, ToolResult):
            raise UsageError(f"results must be ToolResult objects, got {type(r).__name__}")
        call = known.get(r.local_id)
        if call is None:
            raise UsageError(f"result for local_id {r.local_id!r}, which is no call of this turn")
        if r.call_id is not None and call.call_id is not None and r.call_id != call.call_id:
            raise UsageError(f"result {r.local_id!r} answers call id {r.call_id!r}, but that call of this turn has "
                             f"id {call.call_id!r} (a result of another turn?)")
        if r.name is not None and call.name is not None and r.name != call.name:
            raise UsageError(f"result {r.local_id!r} is for tool {r.name!r}, but that call of this turn is "
                             f"{call.name!r} (a result of another turn?)")
        if r.local_id in by_local:
            raise UsageError(f"two results for call {r.local_id!r}: every call is answered exactly once")
        if r.parts is not None:
            try:
                clean = _rich.checked(Content(parts=r.parts))
            except _rich.Unusable as exc:
                raise UsageError(f"result {r.local_id!r} has parts that cannot be sent: {exc.reason}") from None
            # the checked copy is what is encoded: typed parts (also from dicts), base64 (also from bytes)
            r = msgspec.structs.replace(r, parts=clean.parts)
        by_local[r.local_id] = r
    return by_local


def _chosen(turn: Turn, by_local: dict[str, ToolResult]) -> tuple[int | None, Turn]:
    """The choice the results answer, and ``turn`` reduced to it: its calls and its assistant message.

    A turn of one choice is returned as it is (choice None). With several, the choice is the one of the answered
    calls (the one ``turn.assistant_message`` replays when there are no results); results in two choices are
    refused, since one history can only continue one choice."""
    indexes = {ch.index for ch in turn.choices} | {c.choice for c in turn.calls}
    if len(indexes) <= 1:
        return None, turn
    answered = sorted({c.choice for c in turn.calls if c.local_id in by_local})
    if len(answered) > 1:
        listed = ", ".join(str(i) for i in answered[:-1]) + f" and {answered[-1]}"
        raise UsageError(f"the results answer calls of choices {listed}; a history continues one choice, so pass "
                         f"the results of one choice (turn.choice_calls(n)) only")
    default = 0 if 0 in indexes else min(indexes)
    index = answered[0] if answered else default
    message = next((ch.assistant_message for ch in turn.choices if ch.index == index), None)
    if message is None and index == default:
        message = turn.assistant_message
    return index, msgspec.structs.replace(turn, calls=turn.choice_calls(index), assistant_message=message)


def _pairs(turn: Turn, by_local: dict[str, ToolResult]) -> list[Pair]:
    """Every call of the (one-choice) turn with its result; the provider needs an answer for each call it is
    shown, so a call without one gets the "no result was recorded" error."""
    return [(c, by_local.get(c.local_id) or missing_result(c)) for c in turn.calls]


def _answers(mod: Results, turn: Turn, pairs: list[Pair], echo_ids: bool) -> list[Message]:
    """The dialect's answer to ``pairs`` as a list of messages (Anthropic and Gemini answer with one)."""
    encoded = mod.encode(turn, pairs, echo_ids=echo_ids)
    return encoded if isinstance(encoded, list) else [encoded]


def encode_results(turn: Turn, results: Iterable[ToolResult], *, echo_ids: bool = True) -> list[Message]:
    """The provider-native messages answering the calls of ``turn``, in call order: always a list, to append
    to (or send as) the conversation.

    Chat: one tool message per call; Responses: the output items; Anthropic: one user message holding every
    result block; Gemini: one user content holding every function response part; Interactions: one result step
    per call (each dialect's ``Results`` part says how). Every call of the replayed assistant message is answered
    exactly once;
    in a turn of several choices, that is the choice of the calls the results answer (see the module
    docstring).

    Raises ``UsageError`` for an unknown provider, a turn with no call to answer, a result that is not a
    ``ToolResult``, answers a call that is not in ``turn`` (or has another call id or tool name), a second
    result for one call, results for calls of two choices, or a result built by hand whose ``parts`` could not
    be sent (the checks the dispatcher applies to a handler's ``Content``).
    """
    mod = _dialect(turn.provider)
    by_local = _checked(turn, results)
    _, turn = _chosen(turn, by_local)
    pairs = _pairs(turn, by_local)
    if not pairs:
        raise UsageError("the turn has no call to answer")
    answers: list[Message] = clean_copy(_answers(mod, turn, pairs, echo_ids))[0]
    return answers


def history_messages(turn: Turn, results: Iterable[ToolResult], *, echo_ids: bool = True) -> list[Message]:
    """What to append to the conversation after ``turn``: the assistant message (or Responses items /
    Interactions steps) replayed verbatim, with malformed arguments in the accepted form, then the results
    (``encode_results``).

    In a turn of several choices the replayed message is the one of the choice the results answer (choice 0
    without results). A turn without calls gives just its assistant message. Raises ``UsageError`` as
    ``encode_results`` does, and when the chosen choice has no assistant message to replay (a streaming-mode
    parse keeps none).
    """
    mod = _dialect(turn.provider)
    by_local = _checked(turn, results)
    index, turn = _chosen(turn, by_local)
    if turn.assistant_message is None:
        where = "the turn" if index is None else f"choice {index} of the turn"
        why = f"; the turn's error: {turn.error.type}: {turn.error.message[:200]}" if turn.error is not None else ""
        raise UsageError(f"{where} has no assistant message to replay: it was parsed with keep_calls=False (parse "
                         f"it with calls kept), or its replay could not be built from the provider's data{why}")
    pairs = _pairs(turn, by_local)
    out: list[Message] = list(mod.replay(turn, [c for c, _ in pairs]))
    if pairs:
        out.extend(_answers(mod, turn, pairs, echo_ids))
    messages: list[Message] = clean_copy(out)[0]
    return messages


@overload
def repair_history(provider: str, messages: Iterable[Message], *, echo_ids: bool = True,
                   max_calls: int | None = DEFAULT_MAX_CALLS) -> tuple[list[Message], RepairReport]: ...


@overload
def repair_history(provider: str, messages: Iterable[Any], *, echo_ids: bool = True,
                   max_calls: int | None = DEFAULT_MAX_CALLS) -> tuple[list[Any], RepairReport]: ...


def repair_history(provider: str, messages: Iterable[Any], *, echo_ids: bool = True,
                   max_calls: int | None = DEFAULT_MAX_CALLS) -> tuple[list[Any], RepairReport]:
    """A copy of a stored conversation (the provider's native request ``messages`` / ``contents`` / ``input``
    list) in which every call has exactly one result in the provider's required order, and a report of what
    changed (``RepairReport.actions``: typed ``RepairAction`` records). The input is not modified. A history of
    messages (``list[Message]``) is repaired into one; anything else in the list is kept where it is.

    Chat: one tool message per call id right after its assistant message. Anthropic: the user message after an
    assistant message with call blocks starts with all its result blocks. Gemini: the content after a model
    content with function call parts has one function response per call (with the call's id exactly when the
    call had one and ``echo_ids``; its response an object), and in the current turn a model content whose calls
    carry no thought signature gets the documented ``skip_thought_signature_validator`` on its first call
    (Gemini 3 refuses it otherwise). Responses: every call item has one output item after its turn, and reasoning
    items stay right before the item they precede. Interactions (a list of steps): every call step has one result
    step. (Each dialect's ``Results.repair``, described in its module, applies its rules.) Missing results are
    inserted as errors ("no result was recorded for this call"), duplicates and orphans dropped, misplaced ones
    moved, malformed arguments replaced by the accepted form, a call repeating another call's id in its turn
    renamed, text UTF-8 cannot encode made encodable.

    Every difference between the input and the output is reported, and repairing the output again changes and
    reports nothing. The cost is linear in the size of the history; ``max_calls`` (default
    ``DEFAULT_MAX_CALLS``, 100,000; None for no cap) bounds it for a history from storage or a client.

    Raises ``UsageError`` for an unknown provider, when ``messages`` is not a list of messages or ``max_calls``
    is not a positive integer or None, and ``HistoryTooLargeError`` (a ``UsageError``) when the history holds
    more than ``max_calls`` calls.
    """
    mod = _dialect(provider)
    if isinstance(messages, (str, bytes, dict)) or not isinstance(messages, Iterable):
        raise UsageError(f"messages must be a list of the provider's messages, got {type(messages).__name__}")
    if max_calls is not None and (isinstance(max_calls, bool) or not isinstance(max_calls, int) or max_calls < 1):
        raise UsageError(f"max_calls must be a positive integer or None, got {max_calls!r}")
    actions = Actions()
    copied: list[Any] = []
    for i, message in enumerate(messages):
        message, fixed = clean_copy(message)
        if fixed:
            actions.add(RepairKind.REPLACED_SURROGATES, i,
                        detail=f"{fixed} surrogate code point(s), which UTF-8 cannot encode, were replaced: a "
                               f"valid pair by its character, a lone one by U+FFFD")
        copied.append(message)
    repaired, found = mod.repair(copied, echo_ids=echo_ids, counter=CallCounter(max_calls))
    actions.extend(found)
    return repaired, RepairReport(provider=provider, actions=list(actions))


_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

#: Call id rules of servers stricter than the dialect they speak (failure mode 20 in docs/failure-modes.md).
CALL_ID_RULES = {
    "mistral": (r"[a-zA-Z0-9]{9}", 9),
}


def _short_id(original: str, length: int, salt: int) -> str:
    import hashlib

    n = int.from_bytes(hashlib.sha256(f"{salt}:{original}".encode()).digest()[:16], "big")
    out = []
    for _ in range(length):
        n, r = divmod(n, 62)
        out.append(_BASE62[r])
    return "".join(out)


def remap_call_ids(provider: str, messages: Iterable[Any], *, rule: str = "mistral"
                   ) -> tuple[list[Any], dict[str, str]]:
    """A copy of a Chat or Anthropic conversation whose call ids all satisfy ``rule`` (Mistral: exactly nine
    ASCII letters and digits), with each call and its result renamed consistently, and the mapping used.

    For a conversation that moves to a server with stricter ids than the one that made them (failure mode 20). Ids
    that already satisfy the rule are kept; the others get a deterministic id derived from the original (the
    same input gives the same output), unique within the conversation. The input is not modified. Raises
    ``UsageError`` for another provider or an unknown rule.
    """
    import copy
    import re

    part = next((d.results for d in dialects() if d.id == provider), None)
    if part is None or not part.renames_ids:
        able = [d.id for d in dialects() if d.results.renames_ids]
        listed = " and ".join(able) if len(able) <= 2 else ", ".join(able[:-1]) + " and " + able[-1]
        raise UsageError(f"remap_call_ids supports {listed}, not {provider!r}")
    try:
        pattern, length = CALL_ID_RULES[rule]
    except KeyError:
        raise UsageError(f"unknown call id rule {rule!r}; expected one of: {', '.join(CALL_ID_RULES)}") from None
    ok = re.compile(pattern)
    out = copy.deepcopy(list(messages))
    mapping: dict[str, str] = {}
    used: set[str] = set()

    def new_id(old: Any) -> Any:
        if not isinstance(old, str):
            return old
        if old in mapping:
            return mapping[old]
        if ok.fullmatch(old) and old not in used:
            mapping[old] = old
        else:
            salt = 0
            candidate = _short_id(old, length, salt)
            while candidate in used:
                salt += 1
                candidate = _short_id(old, length, salt)
            mapping[old] = candidate
        used.add(mapping[old])
        return mapping[old]

    part.rename_ids(out, new_id)
    return out, {k: v for k, v in mapping.items() if k != v}
