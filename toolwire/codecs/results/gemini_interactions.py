"""Gemini Interactions API: function_result steps, replay, history repair.

Results: one ``{"type": "function_result", "call_id", "name", "result", "is_error"?}`` step per call, in call
order (send them as ``input`` with ``previous_interaction_id``). ``result`` is the result's text, or its object
when it is one (the SDK's ``FunctionResultStepParam.result`` is an object, a string or content items, so lists
and other values are sent as JSON text); ``is_error: true`` for errors. A rich result (``ToolResult.parts``)
with images, audio or PDF resources of the types the SDK lists is a list of ``text`` / ``image`` / ``audio`` /
``document`` items in the parts' order (other parts described in words, see ``_parts``); without them, its text,
or its ``structured`` object when nothing else is there.

Replay (a stateless ``input`` of steps): the model's steps as received (thought steps with their signatures,
model output, built-in call and result steps), each ``function_call`` step's ``arguments`` an object (failure
mode 21 in docs/failure-modes.md: ``{"_invalid_arguments": "<raw text>"}``), then the function_result steps.

Repair works on such a list of steps: every function_call step gets one function_result after its turn (the
run of model steps that holds it), in call order. With ``previous_interaction_id`` the calls live on the
server: there is nothing to repair, and the results would look like orphans.
"""

from __future__ import annotations

from typing import Any

from ...registry._rich import SEPARATOR
from ...registry.content import Part, ResourcePart
from ...registry.result import ToolResult
from ...types import ToolCall, Turn
from ._common import (
    MISSING_RESULT_TEXT,
    Actions,
    CallCounter,
    CallRef,
    IdRenamer,
    Pair,
    RepairKind,
    as_json_value,
    as_text,
    call_arguments,
    deep_copy,
    error_text,
    object_arguments,
    wire_id,
)
from ._flat import Group, place_results
from ._part import Results
from ._parts import (
    INTERACTIONS_AUDIO,
    INTERACTIONS_DOCUMENTS,
    INTERACTIONS_IMAGES,
    media,
    pieces,
    structured_of,
)

__all__ = ["PROVIDER", "PART", "encode", "replay", "repair"]

PROVIDER = "gemini-interactions"


def function_result(call_id: str, name: str | None, result: Any, is_error: bool) -> dict[str, Any]:
    step: dict[str, Any] = {"type": "function_result", "call_id": call_id}
    if name:
        step["name"] = name
    step["result"] = result
    if is_error:
        step["is_error"] = True
    return step


def _native(part: Part) -> dict[str, Any] | None:
    for kind, accepted in (("image", INTERACTIONS_IMAGES), ("audio", INTERACTIONS_AUDIO)):
        found = media(part, accepted)
        if found is not None:
            return {"type": kind, "data": found[1], "mime_type": found[0]}
    found = media(part, INTERACTIONS_DOCUMENTS) if isinstance(part, ResourcePart) else None
    return None if found is None else {"type": "document", "data": found[1], "mime_type": found[0]}


def _rich_value(result: ToolResult) -> Any:
    rest = pieces(result, _native, with_structured=False)
    structured = structured_of(result)
    if all(isinstance(i, str) for i in rest):
        if structured is not None and not any(rest):
            return structured
        text = SEPARATOR.join(pieces(result, _native))
        return text if text.strip() or not result.is_error else error_text(result)
    return [{"type": "text", "text": i} if isinstance(i, str) else i for i in pieces(result, _native) if i != ""]


def _result_value(result: Any) -> Any:
    if result.parts is not None:
        return _rich_value(result)
    if result.is_error:
        return error_text(result)
    value = as_json_value(result.content)
    return value if isinstance(value, (str, dict)) else as_text(value)


def encode(turn: Turn, pairs: list[Pair], *, echo_ids: bool = True) -> list[dict[str, Any]]:
    """One function_result step per call, in call order."""
    return [function_result(wire_id(turn, call), call.name, _result_value(result), result.is_error)
            for call, result in pairs]


def _steps(message: Any) -> list[Any]:
    if isinstance(message, dict):
        steps = message.get("steps")
        if steps is None:
            steps = message.get("outputs")  # legacy schema
        return list(steps or [])
    return list(message or [])


def replay(turn: Turn, calls: list[ToolCall]) -> list[dict[str, Any]]:
    """The model's steps, every function_call's ``arguments`` an object and every call with an id."""
    steps = deep_copy(_steps(turn.assistant_message))
    fc_positions = [i for i, s in enumerate(steps) if isinstance(s, dict) and s.get("type") == "function_call"]
    used: set[int] = set()
    for n, call in enumerate(calls):
        at = None
        if call.call_id is not None:
            at = next((i for i in fc_positions if i not in used and steps[i].get("id") == call.call_id), None)
        if at is None:
            at = next((i for i in fc_positions if i not in used and not steps[i].get("id")), None)
        if at is None:
            continue
        used.add(at)
        step = steps[at]
        step["id"] = wire_id(turn, call)
        if not (isinstance(call.args, dict) and isinstance(step.get("arguments"), dict)):
            step["arguments"] = call_arguments(call)
    return steps


# ---- history repair -----------------------------------------------------------------------------------------
def _type(step: Any) -> str | None:
    t = step.get("type") if isinstance(step, dict) else None
    return t if isinstance(t, str) else None


def _result_id(step: Any) -> str | None:
    if _type(step) != "function_result":
        return None
    cid = step.get("call_id")
    return cid if isinstance(cid, str) else ""


def _set_result_id(step: dict[str, Any], new: str) -> None:
    step["call_id"] = new


def _all_ids(steps: list[Any]) -> Any:
    for step in steps:
        rid = _result_id(step)
        if rid is not None:
            yield rid
        elif _type(step) == "function_call":
            yield step.get("id")


def repair(steps: list[Any], *, echo_ids: bool = True, counter: CallCounter) -> tuple[list[Any], Actions]:
    """See the module docstring. ``steps`` is the repair's own copy."""
    actions = Actions()
    groups: list[Group] = []
    run: list[int] = []
    run_calls: list[CallRef] = []
    run_ids: set[str] = set()
    renamer = IdRenamer(lambda: _all_ids(steps))

    def close_run() -> None:
        if run_calls:
            groups.append(Group(run[-1], list(run_calls), run[0]))
        run.clear()
        run_calls.clear()
        run_ids.clear()

    for i, step in enumerate(steps):
        rid = _result_id(step)
        if rid is not None:
            if rid in run_ids:
                close_run()
            continue
        t = _type(step)
        if t is None or t == "user_input":
            close_run()
            continue
        run.append(i)
        if t != "function_call":
            continue
        counter.add(i)
        match = None
        if not isinstance(step.get("id"), str) or not step["id"]:
            step["id"] = f"tw_call_{i}"
            actions.add(RepairKind.ASSIGNED_ID, i, step["id"], step.get("name"),
                        detail="a function_call step without an id got one")
        elif step["id"] in run_ids:
            match, step["id"] = step["id"], renamer.new(step["id"])
            actions.add(RepairKind.ASSIGNED_ID, i, step["id"], step.get("name"),
                        detail=f"a second function_call step with id {match!r} in one turn got a new one (the "
                               f"next function_result with that call_id, if any, answers it under the new one)")
        fixed, changed = object_arguments(step.get("arguments"))
        if changed or "arguments" not in step:
            step["arguments"] = fixed
            actions.add(RepairKind.REPLACED_ARGUMENTS, i, step["id"], step.get("name"),
                        detail="arguments that were not an object were replaced")
        run_calls.append(CallRef(step["id"], step.get("name"), i, t, match=match))
        run_ids.add(step["id"])
    close_run()

    def missing(c: CallRef) -> dict[str, Any]:
        return function_result(c.id, c.name, MISSING_RESULT_TEXT, True)

    out = place_results(steps, groups, _result_id, missing, actions, set_result_id=_set_result_id)
    return out, actions


class InteractionsResults(Results):
    """Gemini Interactions function_result steps, replay and repair (see the module docstring)."""

    dialect = PROVIDER

    def encode(self, turn: Turn, pairs: list[Pair], *, echo_ids: bool = True) -> Any:
        return encode(turn, pairs, echo_ids=echo_ids)

    def replay(self, turn: Turn, calls: list[ToolCall]) -> list[Any]:
        return replay(turn, calls)

    def repair(self, messages: list[Any], *, echo_ids: bool = True, counter: CallCounter
               ) -> tuple[list[Any], Actions]:
        return repair(messages, echo_ids=echo_ids, counter=counter)

    def user_message(self, text: str, *, alone: bool = True) -> Any:
        """The user's text as the whole ``input``, or as a text content among other input."""
        return text if alone else {"type": "text", "text": text}


PART = InteractionsResults()
