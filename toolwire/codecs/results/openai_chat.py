"""OpenAI Chat Completions (and OpenAI-compatible servers): tool messages, replay, history repair.

Results: one ``{"role": "tool", "tool_call_id": id, "content": str}`` per call, in call order, right after the
assistant message. A tool message takes text only: a rich result (``ToolResult.parts``) is sent as its text, every
image, audio clip and binary resource described in words (``_parts``).

Replay: the assistant message as the codec built it (``extra_content`` thought signatures, DeepSeek
``reasoning_content`` kept), with each function call's ``arguments`` a JSON object string (failure mode 21: text
that is not one becomes ``{"_invalid_arguments": "<text>"}``) and an id on every call (a call a server sent
without one gets the synthetic id its result uses).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...types import CallKind, ToolCall, Turn
from ._common import (
    MISSING_RESULT_TEXT,
    Actions,
    CallCounter,
    CallRef,
    IdRenamer,
    Pair,
    RepairKind,
    as_text,
    deep_copy,
    object_arguments_text,
    result_text,
    wire_id,
)
from ._flat import Group, place_results
from ._part import Results
from ._parts import joined, pieces

__all__ = ["PROVIDER", "PART", "encode", "replay", "repair"]

PROVIDER = "openai-chat"


def encode(turn: Turn, pairs: list[Pair], *, echo_ids: bool = True) -> list[dict[str, Any]]:
    """One tool message per call, in call order."""
    return [{"role": "tool", "tool_call_id": wire_id(turn, call), "content": _content(result)}
            for call, result in pairs]


def _content(result: Any) -> str:
    if result.parts is None:
        return result_text(result)
    return joined(result, pieces(result, lambda part: None)) or ""


def replay(turn: Turn, calls: list[ToolCall]) -> list[dict[str, Any]]:
    """The assistant message, arguments in the accepted form, every call with an id."""
    msg = deep_copy(turn.assistant_message)
    entries = msg.get("tool_calls") or []
    for call, entry in zip(calls, entries):
        entry["id"] = wire_id(turn, call)
        if call.kind is CallKind.CUSTOM or entry.get("type") == "custom":
            custom = entry.setdefault("custom", {})
            if not isinstance(custom.get("input"), str):
                custom["input"] = call.raw_arguments
            continue
        fn = entry.setdefault("function", {})
        if fn.get("name") is None:
            fn["name"] = call.name or ""
        fn["arguments"], _ = object_arguments_text(fn.get("arguments"))
    return [msg]


# ---- history repair -----------------------------------------------------------------------------------------
def _tool_calls(msg: Any) -> list[Any] | None:
    if isinstance(msg, dict) and msg.get("role") == "assistant" and isinstance(msg.get("tool_calls"), list):
        return msg["tool_calls"]
    return None


def _result_id(msg: Any) -> str | None:
    if isinstance(msg, dict) and msg.get("role") == "tool":
        tid = msg.get("tool_call_id")
        return tid if isinstance(tid, str) else ""
    return None


def _all_ids(items: list[Any]) -> Any:
    for msg in items:
        rid = _result_id(msg)
        if rid is not None:
            yield rid
        for tc in _tool_calls(msg) or ():
            if isinstance(tc, dict):
                yield tc.get("id")


def _set_result_id(msg: dict[str, Any], new: str) -> None:
    msg["tool_call_id"] = new


def repair(items: list[Any], *, echo_ids: bool = True, counter: CallCounter) -> tuple[list[Any], Actions]:
    """Every ``tool_calls`` id answered by exactly one tool message right after its assistant message, in call
    order; duplicates and orphans dropped; malformed arguments replaced. ``items`` is the repair's own copy."""
    actions = Actions()
    groups: list[Group] = []
    renamer = IdRenamer(lambda: _all_ids(items))
    for i, msg in enumerate(items):
        tid = _result_id(msg)
        if tid is not None:
            content = msg.get("content")
            if not isinstance(content, (str, list)):
                msg["content"] = as_text(content)
                actions.add(RepairKind.FIXED_CONTENT, i, tid or None,
                            detail="tool message content must be text: encoded as JSON text")
            continue
        calls = _tool_calls(msg)
        if calls is None:
            continue
        if not calls:
            del msg["tool_calls"]
            if msg.get("content") is None:
                msg["content"] = ""
            actions.add(RepairKind.DROPPED_EMPTY_TOOL_CALLS, i, detail="an empty tool_calls list was removed")
            continue
        refs = []
        seen: set[str] = set()
        for k, tc in enumerate(calls):
            if not isinstance(tc, dict):
                continue
            counter.add(i)
            match = None
            if not isinstance(tc.get("id"), str) or not tc["id"]:
                tc["id"] = f"tw_call_{i}_{k}"
                actions.add(RepairKind.ASSIGNED_ID, i, tc["id"], detail="a tool call without an id got one")
            elif tc["id"] in seen:
                match, tc["id"] = tc["id"], renamer.new(tc["id"])
                actions.add(RepairKind.ASSIGNED_ID, i, tc["id"],
                            detail=f"a second tool call with id {match!r} in one message got a new id (the "
                                   f"next result with that id, if any, answers it under the new one)")
            seen.add(tc["id"])
            if tc.get("type", "function") == "function":
                fn = tc.get("function")
                if isinstance(fn, dict):
                    fixed, changed = object_arguments_text(fn.get("arguments"))
                    if changed:
                        fn["arguments"] = fixed
                        actions.add(RepairKind.REPLACED_ARGUMENTS, i, tc["id"], fn.get("name"),
                                    detail="arguments that were not a JSON object were replaced")
                name = fn.get("name") if isinstance(fn, dict) else None
            else:
                sub = tc.get(tc.get("type")) if isinstance(tc.get("type"), str) else None
                name = sub.get("name") if isinstance(sub, dict) else None
            refs.append(CallRef(tc["id"], name, i, match=match))
        if refs:
            groups.append(Group(i, refs))

    def missing(c: CallRef) -> dict[str, Any]:
        return {"role": "tool", "tool_call_id": c.id, "content": MISSING_RESULT_TEXT}

    out = place_results(items, groups, _result_id, missing, actions, set_result_id=_set_result_id)
    return out, actions


class ChatResults(Results):
    """OpenAI Chat tool messages, replay and repair (see the module docstring)."""

    dialect = PROVIDER
    renames_ids = True

    def encode(self, turn: Turn, pairs: list[Pair], *, echo_ids: bool = True) -> Any:
        return encode(turn, pairs, echo_ids=echo_ids)

    def replay(self, turn: Turn, calls: list[ToolCall]) -> list[Any]:
        return replay(turn, calls)

    def repair(self, messages: list[Any], *, echo_ids: bool = True, counter: CallCounter
               ) -> tuple[list[Any], Actions]:
        return repair(messages, echo_ids=echo_ids, counter=counter)

    def rename_ids(self, messages: list[Any], new_id: Callable[[Any], Any]) -> None:
        """Every ``tool_calls[].id`` and every tool message's ``tool_call_id``."""
        for msg in messages:
            if not isinstance(msg, dict):
                continue
            for tc in msg.get("tool_calls") or ():
                if isinstance(tc, dict) and "id" in tc:
                    tc["id"] = new_id(tc["id"])
            if msg.get("role") == "tool" and "tool_call_id" in msg:
                msg["tool_call_id"] = new_id(msg["tool_call_id"])


PART = ChatResults()
