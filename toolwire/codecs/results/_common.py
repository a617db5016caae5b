"""What the result encoders and history repairers of every dialect share: the repair records, the text and object
forms of a result's content, the accepted replay form of malformed arguments, and the synthetic answer.

Nothing here knows a provider field name; the dialect modules next to this one do.
"""

from __future__ import annotations

import copy
import enum
import re
from typing import Any

import msgspec

from ...registry.result import ResultKind, ToolResult
from ...types import ToolCall, Turn

__all__ = [
    "INVALID_ARGUMENTS_KEY",
    "MISSING_RESULT_TEXT",
    "RepairKind",
    "RepairAction",
    "RepairReport",
    "Pair",
    "as_text",
    "as_json_value",
    "error_text",
    "result_text",
    "call_arguments",
    "object_arguments",
    "object_arguments_text",
    "wire_id",
    "missing_result",
    "deep_copy",
    "Actions",
]

#: The key under which arguments that are not a JSON object are replayed (PITFALL 21): ``{"_invalid_arguments":
#: "<the exact text the model sent>"}``, so the provider accepts the history and the model sees what it sent.
INVALID_ARGUMENTS_KEY = "_invalid_arguments"

#: The content of the error result inserted for a call that has none.
MISSING_RESULT_TEXT = "Error: no result was recorded for this call; nothing is known to have run."


class RepairKind(str, enum.Enum):
    """What ``repair_history`` changed."""

    INSERTED_RESULT = "inserted_result"  # a call had no result: a synthetic error result was inserted
    DROPPED_DUPLICATE = "dropped_duplicate"  # a second result for a call that already had one
    DROPPED_ORPHAN = "dropped_orphan"  # a result for no call before it
    MOVED_RESULT = "moved_result"  # a result was not where the provider needs it: moved there
    REORDERED_RESULTS = "reordered_results"  # the results of one turn were put back in call order
    MOVED_CONTENT = "moved_content"  # Anthropic: text/other blocks before the tool_result blocks moved after them
    MERGED_MESSAGES = "merged_messages"  # results split over several messages were merged into one
    REPLACED_ARGUMENTS = "replaced_arguments"  # malformed arguments replaced by the accepted form (PITFALL 21)
    WRAPPED_RESPONSE = "wrapped_response"  # Gemini: a functionResponse.response that was not an object
    FIXED_RESPONSE_ID = "fixed_response_id"  # Gemini: functionResponse.id set to (or removed like) the call's id
    FIXED_RESPONSE_NAME = "fixed_response_name"  # Gemini: functionResponse.name set to the call's name
    FIXED_ROLE = "fixed_role"  # Gemini: a result content whose role was not "user"
    FIXED_CONTENT = "fixed_content"  # Chat: a tool message content that was neither text nor text parts
    ASSIGNED_ID = "assigned_id"  # a call without the id the provider requires got a synthetic one
    DROPPED_EMPTY_TOOL_CALLS = "dropped_empty_tool_calls"  # Chat: ``tool_calls: []`` (rejected) removed
    DROPPED_REASONING = "dropped_reasoning"  # Responses: a reasoning item with no item after it in its turn

    def __str__(self) -> str:  # pragma: no cover - cosmetic
        return self.value


class RepairAction(msgspec.Struct, frozen=True, kw_only=True):
    """One change ``repair_history`` made.

    ``position`` is the index, in the messages passed in, of the message (or Responses item / Interactions
    step) the change is about (for an inserted result: the message holding the call); ``call_id`` the call it
    concerns, when there is one; ``detail`` says what happened, for people."""

    kind: RepairKind
    position: int | None
    call_id: str | None = None
    name: str | None = None
    detail: str = ""


class RepairReport(msgspec.Struct, kw_only=True):
    """What ``repair_history`` changed, as typed records in the order they were found."""

    provider: str
    actions: list[RepairAction] = msgspec.field(default_factory=list)

    @property
    def changed(self) -> bool:
        """True when the history was changed at all."""
        return bool(self.actions)

    def of(self, kind: RepairKind | str) -> list[RepairAction]:
        """The actions of one kind."""
        kind = RepairKind(kind)
        return [a for a in self.actions if a.kind is kind]

    def counts(self) -> dict[str, int]:
        """``{kind: number of actions}`` for the kinds that occurred."""
        out: dict[str, int] = {}
        for a in self.actions:
            out[a.kind.value] = out.get(a.kind.value, 0) + 1
        return out


class Actions(list):
    """A list of ``RepairAction`` with a shorthand to add one."""

    def add(self, kind: RepairKind, position: int | None, call_id: str | None = None, name: str | None = None,
            detail: str = "") -> None:
        self.append(RepairAction(kind=kind, position=position, call_id=call_id, name=name, detail=detail))


#: (call, the result answering it), in call order
Pair = tuple[ToolCall, ToolResult]


def deep_copy(value: Any) -> Any:
    """A deep copy of JSON-like data (never mutate the caller's history or a turn's assistant message)."""
    return copy.deepcopy(value)


def as_json_value(content: Any) -> Any:
    """``content`` as JSON builtins (dict, list, str, number, bool, None); a value msgspec cannot convert
    becomes its ``str``."""
    if content is None or isinstance(content, (str, bool, int, float)):
        return content
    try:
        return msgspec.to_builtins(content)
    except (TypeError, ValueError):
        return str(content)


def as_text(content: Any) -> str:
    """``content`` as the string a wire needs: a string unchanged, anything else as compact JSON."""
    if isinstance(content, str):
        return content
    value = as_json_value(content)
    if isinstance(value, str):
        return value
    return msgspec.json.encode(value).decode()


def error_text(result: ToolResult) -> str:
    """The text of an error result; never empty (Anthropic refuses an empty error ``tool_result``)."""
    text = as_text(result.content)
    if text.strip():
        return text
    return f"Error: the call was not answered successfully ({result.kind.value})."


def result_text(result: ToolResult) -> str:
    """The text form of a result: its content, or for an error a non-empty message."""
    return error_text(result) if result.is_error else as_text(result.content)


def _parse_object(text: str) -> dict[str, Any] | None:
    try:
        value = msgspec.json.decode(text)
    except msgspec.DecodeError:
        return None
    return value if isinstance(value, dict) else None


def object_arguments(value: Any) -> tuple[dict[str, Any], bool]:
    """Arguments in a form an object-typed wire accepts, and whether they had to change.

    An object stays as it is; a string holding a JSON object becomes that object; anything else (text that
    does not parse or is not an object, a list, a number) becomes ``{"_invalid_arguments": <text>}``; absent
    (None or an empty string) becomes ``{}``."""
    if isinstance(value, dict):
        return value, False
    if value is None or value == "":
        return {}, value is not None
    if isinstance(value, str):
        parsed = _parse_object(value)
        if parsed is not None:
            return parsed, True
        return {INVALID_ARGUMENTS_KEY: value}, True
    return {INVALID_ARGUMENTS_KEY: as_text(value)}, True


def object_arguments_text(value: Any) -> tuple[str, bool]:
    """Arguments as the JSON-object string a string-typed wire (OpenAI ``arguments``) accepts, and whether they
    had to change: valid object text stays byte for byte; anything else becomes the ``_invalid_arguments``
    object's JSON (absent: ``"{}"``)."""
    if isinstance(value, str) and _parse_object(value) is not None:
        return value, False
    obj, _ = object_arguments(value)
    return msgspec.json.encode(obj).decode(), True


def call_arguments(call: ToolCall) -> dict[str, Any]:
    """A call's arguments as an object for replay: its parsed ``args``, else its raw text in the accepted form."""
    if isinstance(call.args, dict):
        return call.args
    obj, _ = object_arguments(call.raw_arguments)
    return obj


_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def wire_id(turn: Turn, call: ToolCall) -> str:
    """The id a call is answered under: the provider's, or (when it sent none) a synthetic one made of the
    response id and the call's ``local_id`` (letters, digits, ``_`` and ``-`` only, as Anthropic requires).
    The same turn and call always give the same id, so the replayed call and its result agree."""
    if call.call_id:
        return call.call_id
    rid = _UNSAFE.sub("_", turn.response_id or "")
    local = _UNSAFE.sub("_", call.local_id)
    return f"tw_{rid}_{local}" if rid else f"tw_{local}"


def missing_result(call: ToolCall) -> ToolResult:
    """The answer given to a call that has no result: an error saying none was recorded (kind ``not_run``)."""
    return ToolResult(call_id=call.call_id, local_id=call.local_id, name=call.name, content=MISSING_RESULT_TEXT,
                      is_error=True, kind=ResultKind.NOT_RUN)
