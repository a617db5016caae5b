"""Gemini ``generateContent``: the functionResponse content, replay, history repair (WIRE.md D3, D6, PITFALL 17).

Results: one ``{"role": "user", "parts": [...]}`` content with one ``functionResponse`` part per call, in call
order: ``{"id": …, "name": …, "response": {"output": …}}`` (``{"error": …}`` for errors). ``response`` is
always an object (the result's value is wrapped, whatever it is). ``id`` is the call's id, present exactly when
the call had one and ``echo_ids`` is true (pass ``echo_ids=False`` for endpoints that reject it, such as Vertex
Express).

Replay: the model content of the replayed candidate with every part verbatim and in order (``thoughtSignature``
stays on its exact part); a ``functionCall`` whose ``args`` is not an object gets the parsed object, or
``{"_invalid_arguments": "<raw text>"}`` (PITFALL 21).

Repair reads REST camelCase (``functionCall``, ``functionResponse``, ``thoughtSignature``) and the python SDK's
snake_case (``function_call``, ``function_response``) and writes new parts in the style of the call's part.
Responses pair with calls by id, and by name in order for calls without one.
"""

from __future__ import annotations

from typing import Any

from ...types import ToolCall, Turn
from ._common import (
    MISSING_RESULT_TEXT,
    Actions,
    Pair,
    RepairKind,
    as_json_value,
    call_arguments,
    deep_copy,
    error_text,
    object_arguments,
)

__all__ = ["PROVIDER", "encode", "replay", "repair", "function_response"]

PROVIDER = "gemini"


def function_response(call_id: str | None, name: str | None, value: Any, is_error: bool) -> dict[str, Any]:
    """``{"id"?, "name", "response": {"output" | "error": value}}``."""
    fr: dict[str, Any] = {}
    if call_id:
        fr["id"] = call_id
    fr["name"] = name or ""
    fr["response"] = {"error": value} if is_error else {"output": value}
    return fr


def encode(turn: Turn, pairs: list[Pair], *, echo_ids: bool = True) -> dict[str, Any]:
    """One user content: a functionResponse part per call, in call order."""
    parts = []
    for call, result in pairs:
        value = error_text(result) if result.is_error else as_json_value(result.content)
        parts.append({"functionResponse": function_response(call.call_id if echo_ids else None, call.name, value,
                                                            result.is_error)})
    return {"role": "user", "parts": parts}


def _fc_key(part: Any) -> str | None:
    if not isinstance(part, dict):
        return None
    if isinstance(part.get("functionCall"), dict):
        return "functionCall"
    if isinstance(part.get("function_call"), dict):
        return "function_call"
    return None


def _fr_key(part: Any) -> str | None:
    if not isinstance(part, dict):
        return None
    if isinstance(part.get("functionResponse"), dict):
        return "functionResponse"
    if isinstance(part.get("function_response"), dict):
        return "function_response"
    return None


def replay(turn: Turn, calls: list[ToolCall]) -> list[dict[str, Any]]:
    """The model content verbatim, every functionCall's ``args`` an object."""
    msg = deep_copy(turn.assistant_message)
    parts = msg.get("parts") if isinstance(msg, dict) else None
    if not isinstance(parts, list):
        return [msg]
    for call in calls:
        at = call.provider_meta.get("part_index")
        if not isinstance(at, int) or not 0 <= at < len(parts):
            continue
        key = _fc_key(parts[at])
        if key is None:
            continue
        fc = parts[at][key]
        if "args" in fc and not isinstance(fc["args"], dict):
            fc["args"] = call_arguments(call)
        elif "args" not in fc and call.args is None and call.raw_arguments:
            fc["args"] = call_arguments(call)
    return [msg]


# ---- history repair -----------------------------------------------------------------------------------------
class _Call:
    __slots__ = ("id", "name", "snake", "answered")

    def __init__(self, id: str | None, name: str | None, snake: bool) -> None:
        self.id = id
        self.name = name
        self.snake = snake
        self.answered: tuple[int, dict[str, Any]] | None = None


def _parts(content: Any) -> list[Any] | None:
    parts = content.get("parts") if isinstance(content, dict) else None
    return parts if isinstance(parts, list) else None


def repair(messages: list[Any], *, echo_ids: bool = True) -> tuple[list[Any], Actions]:
    """After each model content with functionCall parts, one user content starting with one functionResponse
    per call in call order (id echoed exactly when the call had one and ``echo_ids``; ``response`` an object);
    missing ones inserted as errors, duplicates and orphans dropped, malformed ``args`` replaced."""
    contents = deep_copy(list(messages))
    actions = Actions()
    groups: dict[int, list[_Call]] = {}
    for i, content in enumerate(contents):
        if not isinstance(content, dict) or content.get("role") != "model":
            continue
        calls = []
        for part in _parts(content) or ():
            key = _fc_key(part)
            if key is None:
                continue
            fc = part[key]
            cid = fc.get("id") if isinstance(fc.get("id"), str) and fc.get("id") else None
            if "args" in fc and not isinstance(fc["args"], dict):
                fc["args"], _ = object_arguments(fc["args"])
                actions.add(RepairKind.REPLACED_ARGUMENTS, i, cid, fc.get("name"),
                            detail="args that were not an object were replaced (PITFALL 21)")
            calls.append(_Call(cid, fc.get("name"), key == "function_call"))
        if calls:
            groups[i] = calls
    order = sorted(groups)

    def owner(i: int, fr: dict[str, Any]) -> tuple[int, _Call] | None:
        rid = fr.get("id") if isinstance(fr.get("id"), str) and fr.get("id") else None
        name = fr.get("name")
        for g in reversed([g for g in order if g < i]):
            calls = groups[g]
            if rid is not None:
                for c in calls:
                    if c.id == rid:
                        return g, c
                continue
            for c in calls:  # no id: the first call of that name not yet answered, else a duplicate
                if c.name == name and c.answered is None:
                    return g, c
            for c in calls:
                if c.name == name:
                    return g, c
        if rid is not None:  # an id no call has: a call without an id, by name
            for g in reversed([g for g in order if g < i]):
                for c in groups[g]:
                    if c.id is None and c.name == name and c.answered is None:
                        return g, c
        return None

    for i, content in enumerate(contents):
        if not isinstance(content, dict) or content.get("role") == "model":
            continue
        for part in _parts(content) or ():
            key = _fr_key(part)
            if key is None:
                continue
            fr = part[key]
            found = owner(i, fr)
            if found is None:
                actions.add(RepairKind.DROPPED_ORPHAN, i, fr.get("id"), fr.get("name"),
                            detail="a functionResponse for no functionCall before it was dropped")
                continue
            g, call = found
            if call.answered is not None:
                actions.add(RepairKind.DROPPED_DUPLICATE, i, call.id, call.name,
                            detail=f"a second functionResponse for the call was dropped (the one in content "
                                   f"{call.answered[0]} is kept)")
                continue
            call.answered = (i, part)

    def fixed_part(g: int, call: _Call) -> dict[str, Any]:
        if call.answered is None:
            actions.add(RepairKind.INSERTED_RESULT, g, call.id, call.name,
                        detail="no functionResponse was recorded for this call: an error result was inserted")
            key = "function_response" if call.snake else "functionResponse"
            return {key: function_response(call.id if echo_ids else None, call.name, MISSING_RESULT_TEXT, True)}
        pos, part = call.answered
        key = _fr_key(part)
        fr = part[key]
        if pos != g + 1:
            actions.add(RepairKind.MOVED_RESULT, pos, call.id, call.name,
                        detail=f"moved into the content right after its functionCall (content {g})")
        want_id = call.id if echo_ids else None
        have_id = fr.get("id") or None
        if have_id != want_id:
            if want_id is None:
                fr.pop("id", None)
            else:
                fr["id"] = want_id
            actions.add(RepairKind.FIXED_RESPONSE_ID, pos, call.id, call.name,
                        detail=f"functionResponse.id {have_id!r} set to {want_id!r}")
        if call.name is not None and fr.get("name") != call.name:
            actions.add(RepairKind.FIXED_RESPONSE_NAME, pos, call.id, call.name,
                        detail=f"functionResponse.name {fr.get('name')!r} set to the call's")
            fr["name"] = call.name
        if not isinstance(fr.get("response"), dict):
            fr["response"] = {"output": fr.get("response")}
            actions.add(RepairKind.WRAPPED_RESPONSE, pos, call.id, call.name,
                        detail="a response that was not an object was wrapped as {\"output\": …}")
        return part

    out: list[Any] = []
    consumed: set[int] = set()
    for i, content in enumerate(contents):
        if i in consumed:
            continue
        if i in groups:
            out.append(content)
            responses = [fixed_part(i, c) for c in groups[i]]
            nxt = contents[i + 1] if i + 1 < len(contents) else None
            if isinstance(nxt, dict) and nxt.get("role") != "model" and _parts(nxt) is not None:
                consumed.add(i + 1)
                rest = [p for p in _parts(nxt) if _fr_key(p) is None]
                kept_order = [k for p in _parts(nxt) for k, r in enumerate(responses) if r is p]
                if kept_order != sorted(kept_order):
                    actions.add(RepairKind.REORDERED_RESULTS, i + 1,
                                detail="the functionResponse parts were put in call order")
                merged = dict(nxt)
                if merged.get("role") != "user":
                    actions.add(RepairKind.FIXED_ROLE, i + 1, detail=f"role {merged.get('role')!r} set to 'user'")
                    merged["role"] = "user"
                merged["parts"] = responses + rest
                out.append(merged)
            else:
                out.append({"role": "user", "parts": responses})
            continue
        parts = _parts(content)
        if isinstance(content, dict) and content.get("role") != "model" and parts is not None \
                and any(_fr_key(p) is not None for p in parts):
            remaining = [p for p in parts if _fr_key(p) is None]
            if not remaining:
                if any(c.answered is not None and c.answered[0] == i for cs in groups.values() for c in cs):
                    actions.add(RepairKind.MERGED_MESSAGES, i,
                                detail="its functionResponse parts were merged into the result content of "
                                       "their turn")
                continue
            content = dict(content)
            content["parts"] = remaining
        out.append(content)
    return out, actions
