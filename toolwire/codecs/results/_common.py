"""What the result encoders and history repairers of every dialect share: the repair records, the text and object
forms of a result's content, the accepted replay form of malformed arguments, the synthetic answer, the copy that
makes text encodable, the cap on calls, and the index that pairs stored results with calls.

Nothing here knows a provider field name; the dialect modules next to this one do.
"""

from __future__ import annotations

import bisect
import copy
import enum
import re
from typing import Any, Callable

import msgspec

from ...errors import HistoryTooLargeError
from ...limits import DEFAULT_MAX_DEPTH, json_depth_exceeds
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
    "clean_copy",
    "clean_text",
    "json_text",
    "Actions",
    "CallCounter",
    "CallRef",
    "DEFAULT_MAX_CALLS",
    "IdRenamer",
    "Pairing",
]

#: The key under which arguments that are not a JSON object are replayed (failure mode 21 in
#: docs/failure-modes.md): ``{"_invalid_arguments": "<the exact text the model sent>"}``, so the provider accepts
#: the history and the model sees what it sent.
INVALID_ARGUMENTS_KEY = "_invalid_arguments"

#: The content of the error result inserted for a call that has none.
MISSING_RESULT_TEXT = "Error: no result was recorded for this call; nothing is known to have run."


class RepairKind(str, enum.Enum):
    """What ``repair_history`` changed. Every difference between its input and its output is one of these."""

    INSERTED_RESULT = "inserted_result"  # a call had no result: a synthetic error result was inserted
    DROPPED_DUPLICATE = "dropped_duplicate"  # a second result for a call that already had one
    DROPPED_ORPHAN = "dropped_orphan"  # a result for no call before it
    MOVED_RESULT = "moved_result"  # a result was not where the provider needs it: moved there
    REORDERED_RESULTS = "reordered_results"  # the results of one turn were put back in call order
    MOVED_CONTENT = "moved_content"  # Anthropic, Gemini: other content before or between the results moved after
    MERGED_MESSAGES = "merged_messages"  # results split over several messages were merged into one
    REPLACED_ARGUMENTS = "replaced_arguments"  # malformed arguments replaced by the accepted form
    WRAPPED_RESPONSE = "wrapped_response"  # Gemini: a functionResponse.response that was not an object
    FIXED_RESPONSE_ID = "fixed_response_id"  # Gemini: functionResponse.id set to (or removed like) the call's id
    FIXED_RESPONSE_NAME = "fixed_response_name"  # Gemini: functionResponse.name set to the call's name
    FIXED_ROLE = "fixed_role"  # Gemini: a result content whose role was not "user"
    FIXED_CONTENT = "fixed_content"  # Chat: a tool message content that was neither text nor text parts
    ASSIGNED_ID = "assigned_id"  # a call without an id, or repeating the id of another call of its turn, got one
    DROPPED_EMPTY_TOOL_CALLS = "dropped_empty_tool_calls"  # Chat: ``tool_calls: []`` (rejected) removed
    DROPPED_REASONING = "dropped_reasoning"  # Responses: a reasoning item with no item after it in its turn
    INSERTED_THOUGHT_SIGNATURE = "inserted_thought_signature"  # Gemini: the documented sentinel on an unsigned call
    REPLACED_SURROGATES = "replaced_surrogates"  # text that cannot be encoded as UTF-8 made encodable

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


_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> tuple[str, int]:
    """``text`` in a form UTF-8 can encode, and how many code points had to change.

    A Python string can hold surrogate code points (``json.loads('"\\ud800"')`` gives one), which no encoder
    accepts: the request could not even be sent. A high and low surrogate in a row are joined into the character
    they stand for; a lone one becomes U+FFFD. Text without surrogates is returned as it is (one scan)."""
    if text.isascii():
        return text, 0
    found = len(_SURROGATE.findall(text))
    if not found:
        return text, 0
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace"), found


def clean_copy(value: Any) -> tuple[Any, int]:
    """A deep copy of JSON-like data with every string (keys too) passed through ``clean_text``, and the number
    of code points changed.

    Dicts and lists are rebuilt, so two references to one object in the input become two independent copies and
    repairing one never edits the other; tuples stay tuples; other objects are ``copy.deepcopy``-ed. Iterative
    over dicts and lists, so deep nesting cannot exhaust the stack; ASCII strings (nearly all) cost one check."""
    fixed = 0

    def text(s: str) -> str:
        nonlocal fixed
        out, n = clean_text(s)
        fixed += n
        return out

    def walk(top: Any) -> Any:
        if isinstance(top, str):
            return top if top.isascii() else text(top)
        if isinstance(top, dict):
            root: Any = {}
        elif isinstance(top, list):
            root = list(top)
        elif isinstance(top, tuple):
            return tuple(walk(list(top)))
        elif top is None or isinstance(top, (bool, int, float)):
            return top
        else:
            return copy.deepcopy(top)
        stack: list[tuple[Any, Any]] = [(top, root)]
        while stack:
            src, dst = stack.pop()
            if isinstance(src, dict):
                for k, item in src.items():
                    if isinstance(k, str) and not k.isascii():
                        k = text(k)
                    if isinstance(item, str):
                        dst[k] = item if item.isascii() else text(item)
                    elif isinstance(item, dict):
                        dst[k] = new = {}
                        stack.append((item, new))
                    elif isinstance(item, list):
                        dst[k] = new = list(item)
                        stack.append((item, new))
                    elif item is None or isinstance(item, (bool, int, float)):
                        dst[k] = item
                    else:
                        dst[k] = walk(item)
            else:  # a list, already a shallow copy: replace what is not immutable
                for k, item in enumerate(dst):
                    if isinstance(item, str):
                        if not item.isascii():
                            dst[k] = text(item)
                    elif isinstance(item, dict):
                        dst[k] = new = {}
                        stack.append((item, new))
                    elif isinstance(item, list):
                        dst[k] = new = list(item)
                        stack.append((item, new))
                    elif not (item is None or isinstance(item, (bool, int, float))):
                        dst[k] = walk(item)
        return root

    return walk(value), fixed


def json_text(value: Any) -> str:
    """Compact JSON text of JSON builtins; strings that UTF-8 cannot encode are made encodable first
    (``clean_text``) instead of failing."""
    try:
        return msgspec.json.encode(value).decode()
    except UnicodeEncodeError:
        return msgspec.json.encode(clean_copy(value)[0]).decode()


def as_json_value(content: Any) -> Any:
    """``content`` as JSON builtins (dict, list, str, number, bool, None); a value msgspec cannot convert
    becomes its ``str``."""
    if content is None or isinstance(content, (str, bool, int)):
        return content
    if isinstance(content, float):
        return content if content == content and content not in (float("inf"), float("-inf")) else None
    try:
        # through JSON and back: what is sent is exactly JSON (NaN and infinities become null, as in JSON)
        return msgspec.json.decode(msgspec.json.encode(msgspec.to_builtins(content)))
    except (TypeError, ValueError, OverflowError, RecursionError, msgspec.DecodeError):
        return str(content)


def as_text(content: Any) -> str:
    """``content`` as the string a wire needs: a string unchanged, anything else as compact JSON."""
    if isinstance(content, str):
        return content
    value = as_json_value(content)
    if isinstance(value, str):
        return value
    return json_text(value)


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
    if json_depth_exceeds(text, DEFAULT_MAX_DEPTH):
        return None  # nested past the parser's limit: never an argument object, and decoding would recurse
    try:
        value = msgspec.json.decode(text)
    except (msgspec.DecodeError, RecursionError):
        return None
    except UnicodeEncodeError:  # surrogates in the text: parse what UTF-8 can carry
        try:
            value = msgspec.json.decode(clean_text(text)[0])
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



def split_results(items: list[Any], is_result: Callable[[Any], bool], kept: dict[int, int]
                  ) -> tuple[list[int], list[Any], bool]:
    """Split the content that follows a call message into the results it keeps and everything else.

    ``kept`` maps ``id(result item)`` to its call's position. Returns the kept results' call positions in the
    order they appear (sorted when already in call order), the other items in order, and whether any other
    item stood before or between kept results (so putting the results first moves it)."""
    order: list[int] = []
    rest: list[Any] = []
    first_other = last_kept = None
    for at, item in enumerate(items):
        if is_result(item):
            k = kept.get(id(item))
            if k is not None:
                order.append(k)
                last_kept = at
            continue
        if first_other is None:
            first_other = at
        rest.append(item)
    return order, rest, first_other is not None and last_kept is not None and first_other < last_kept

def object_arguments_text(value: Any) -> tuple[str, bool]:
    """Arguments as the JSON-object string a string-typed wire (OpenAI ``arguments``) accepts, and whether they
    had to change: valid object text stays byte for byte; anything else becomes the ``_invalid_arguments``
    object's JSON (absent: ``"{}"``)."""
    if isinstance(value, str) and _parse_object(value) is not None:
        return value, False
    obj, _ = object_arguments(value)
    return json_text(obj), True


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


# ---- what every repair shares ---------------------------------------------------------------------------------
#: How many calls ``repair_history`` takes by default before it raises ``HistoryTooLargeError``.
DEFAULT_MAX_CALLS = 100_000


class CallCounter:
    """The calls a repair has met so far; past ``limit`` (None: no cap) it raises ``HistoryTooLargeError``, so a
    history from storage or from a client cannot make a repair take unbounded time and memory."""

    __slots__ = ("limit", "count")

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.count = 0

    def add(self, position: int | None) -> None:
        self.count += 1
        if self.limit is not None and self.count > self.limit:
            raise HistoryTooLargeError(
                f"the history holds more than {self.limit} calls (the call at position {position} is over "
                f"max_calls); pass a larger max_calls, or None, to repair it anyway",
                limit=self.limit, position=position)


class CallRef:
    """One call in a stored history: its id (``match``: the id its stored results carry, which differs only for a
    call the repair renamed), name, the position of the entry holding it, its wire type, and the result found
    for it (``result``, at position ``result_at``)."""

    __slots__ = ("id", "match", "name", "position", "type", "result", "result_at")

    def __init__(self, id: str, name: str | None, position: int, type: str = "", match: str | None = None) -> None:
        self.id = id
        self.match = id if match is None else match
        self.name = name
        self.position = position
        self.type = type
        self.result: Any = None
        self.result_at: int | None = None


class Pairing:
    """Which call a stored result answers, in constant time per result (a binary search over the turns holding
    its id), so a repair stays linear in the size of the history.

    Turns are added in history order with the position of their first entry. A result at position ``at``
    answers a call of the latest turn that starts before it and holds a call with the result's id: ids reused
    across turns (``call_0`` every turn) pair with the nearest call before them. Within a turn, the results
    carrying one id answer the calls with that id in call order."""

    __slots__ = ("_starts", "_slots")

    def __init__(self) -> None:
        self._starts: dict[str, list[int]] = {}
        self._slots: dict[str, list[list[Any]]] = {}  # per id, per turn: [turn key, calls with that id, next]

    def add(self, key: Any, start: int, calls: list[CallRef]) -> None:
        """Add a turn (``key`` is the caller's) whose first entry is at ``start``; turns come in history order."""
        for c in calls:
            slots = self._slots.get(c.match)
            if slots is None:
                self._starts[c.match] = [start]
                self._slots[c.match] = [[key, [c], 0]]
            elif slots[-1][0] == key:
                slots[-1][1].append(c)
            else:
                self._starts[c.match].append(start)
                slots.append([key, [c], 0])

    def known(self, rid: Any) -> bool:
        """Whether some call of the history has this id."""
        return rid in self._starts

    def claim(self, rid: Any, at: int) -> tuple[Any, CallRef | None, CallRef] | None:
        """The turn a result with id ``rid`` at position ``at`` belongs to, the call it answers (None when every
        call with that id in that turn already has a result: a duplicate) and the last call with that id there;
        None when no turn before it holds that id (an orphan)."""
        starts = self._starts.get(rid)
        if starts is None:
            return None
        k = bisect.bisect_right(starts, at) - 1
        if k < 0:
            return None
        slot = self._slots[rid][k]
        calls = slot[1]
        if slot[2] < len(calls):
            call = calls[slot[2]]
            slot[2] += 1
            return slot[0], call, call
        return slot[0], None, calls[-1]


class IdRenamer:
    """A new id for a call whose id repeats the id of another call of its turn (the provider refuses two calls
    with one id, and one result could not answer both): ``<id>_<n>``, unique in the whole history. ``all_ids``
    lists every call and result id of the history; it is read once, at the first rename."""

    __slots__ = ("_all", "_used", "_next")

    def __init__(self, all_ids: Any) -> None:
        self._all = all_ids
        self._used: set[str] | None = None
        self._next: dict[str, int] = {}

    def new(self, old: str) -> str:
        if self._used is None:
            self._used = {i for i in self._all() if isinstance(i, str)}
        n = self._next.get(old, 2)
        while f"{old}_{n}" in self._used:
            n += 1
        self._next[old] = n + 1
        new = f"{old}_{n}"
        self._used.add(new)
        return new
