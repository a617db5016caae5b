"""Gemini ``generateContent``: the functionResponse content, replay, history repair (failure mode 17 in
docs/failure-modes.md).

Results: one ``{"role": "user", "parts": [...]}`` content with one ``functionResponse`` part per call, in call
order: ``{"id": …, "name": …, "response": {"output": …}}`` (``{"error": …}`` for errors). ``response`` is
always an object (the result's value is wrapped, whatever it is). ``id`` is the call's id, present exactly when
the call had one and ``echo_ids`` is true (pass ``echo_ids=False`` for endpoints that reject it, such as Vertex
Express). A rich result (``ToolResult.parts``) puts its images (PNG, JPEG, WebP) and PDF resources in the
function response's own ``parts`` (``{"inlineData": {"mimeType", "data"}}``, Gemini's multimodal function
responses), its ``structured`` object in ``output`` (or ``error``), and its text (other parts described in words,
see ``_parts``) in ``output``, or beside the object under ``text``.

Replay: the model content of the replayed candidate with every part verbatim and in order (``thoughtSignature``
stays on its exact part); a ``functionCall`` whose ``args`` is not an object gets the parsed object, or
``{"_invalid_arguments": "<raw text>"}`` (failure mode 21).

Repair reads REST camelCase (``functionCall``, ``functionResponse``, ``thoughtSignature``) and the python SDK's
snake_case (``function_call``, ``function_response``, ``thought_signature``) and writes new parts and fields in
the style of the call's part. Responses pair with calls by id, and by name in order for calls without one. In
the current turn, a model content whose calls lost their thought signature gets ``SKIP_SIGNATURE`` (D3).
"""

from __future__ import annotations

import bisect
from typing import Any

from ...registry._rich import SEPARATOR
from ...registry.content import Part
from ...registry.result import ToolResult
from ...types import ToolCall, Turn
from ._common import (
    Actions,
    CallCounter,
    IdRenamer,
    MISSING_RESULT_TEXT,
    Pair,
    RepairKind,
    as_json_value,
    call_arguments,
    deep_copy,
    error_text,
    object_arguments,
    split_results,
)
from ._part import Results
from ._parts import GEMINI_MEDIA, media, pieces, structured_of

__all__ = ["PROVIDER", "PART", "SKIP_SIGNATURE", "encode", "replay", "repair", "function_response"]

PROVIDER = "gemini"


def function_response(call_id: str | None, name: str | None, value: Any, is_error: bool, *,
                      text: str = "", parts: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """``{"id"?, "name", "response": {"output" | "error": value, "text"?}, "parts"?}``."""
    fr: dict[str, Any] = {}
    if call_id:
        fr["id"] = call_id
    fr["name"] = name or ""
    fr["response"] = {"error": value} if is_error else {"output": value}
    if text:
        fr["response"]["text"] = text
    if parts:
        fr["parts"] = parts
    return fr


def _native(part: Part) -> dict[str, Any] | None:
    found = media(part, GEMINI_MEDIA)
    return None if found is None else {"inlineData": {"mimeType": found[0], "data": found[1]}}


def _response(call_id: str | None, name: str | None, result: ToolResult) -> dict[str, Any]:
    if result.parts is None:
        value = error_text(result) if result.is_error else as_json_value(result.content)
        return function_response(call_id, name, value, result.is_error)
    items = pieces(result, _native, with_structured=False)
    text = SEPARATOR.join(i for i in items if isinstance(i, str))
    blocks = [i for i in items if not isinstance(i, str)]
    structured = structured_of(result)
    if structured is not None:
        return function_response(call_id, name, structured, result.is_error, text=text, parts=blocks)
    if result.is_error and not text.strip():
        text = error_text(result)
    return function_response(call_id, name, text, result.is_error, parts=blocks)


def encode(turn: Turn, pairs: list[Pair], *, echo_ids: bool = True) -> dict[str, Any]:
    """One user content: a functionResponse part per call, in call order."""
    parts = [{"functionResponse": _response(call.call_id if echo_ids else None, call.name, result)}
             for call, result in pairs]
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
#: The value Google documents for a ``thoughtSignature`` the client does not have (a call replayed from storage
#: that kept only the canonical call, another model's turn, a hand-built history): Gemini 3 then skips the
#: signature check instead of refusing the request (ai.google.dev/gemini-api/docs/thought-signatures).
SKIP_SIGNATURE = "skip_thought_signature_validator"


class _Call:
    __slots__ = ("id", "match", "name", "key", "snake", "answered")

    def __init__(self, id: str | None, name: Any, snake: bool, match: str | None) -> None:
        self.id = id
        self.match = match  # the id its stored responses carry (differs from ``id`` only for a renamed call)
        self.name = name
        self.key = _name_key(name)
        self.snake = snake
        self.answered: tuple[int, dict[str, Any]] | None = None


def _name_key(name: Any) -> Any:
    """A hashable stand-in for a name (a malformed history may hold any JSON value there)."""
    if name is None or name == "":
        return None  # a nameless call is answered with name "" (the field is required): the same key
    return name if isinstance(name, str) else ("json", repr(name))


class _Index:
    """The calls of the model contents holding a key (an id, or a name), for the nearest-before-a-position
    look-ups of ``repair``: a binary search, then a pointer past the calls already answered (answers are never
    withdrawn, so each pointer only moves forward), and contents whose calls are all answered skipped for good
    (path-compressed links), so every look-up costs O(log n) amortized."""

    __slots__ = ("starts", "calls", "next", "skip")

    def __init__(self) -> None:
        self.starts: list[int] = []  # model content positions, ascending
        self.calls: list[list[_Call]] = []  # per content: its calls with the key, in order
        self.next: list[int] = []  # per content: the first of them that may still be unanswered
        self.skip: list[int] = []  # per content: itself, or (all answered) a link to an earlier one (-1: none)

    def add(self, g: int, call: _Call) -> None:
        if self.starts and self.starts[-1] == g:
            self.calls[-1].append(call)
            return
        self.skip.append(len(self.starts))
        self.starts.append(g)
        self.calls.append([call])
        self.next.append(0)

    def _unanswered(self, k: int) -> _Call | None:
        calls, p = self.calls[k], self.next[k]
        while p < len(calls) and calls[p].answered is not None:
            p += 1
        self.next[k] = p
        return calls[p] if p < len(calls) else None

    def nearest(self, at: int) -> tuple[int, _Call] | None:
        """The nearest content before ``at`` with the key: its first unanswered call, else its first call."""
        k = bisect.bisect_left(self.starts, at) - 1
        if k < 0:
            return None
        call = self._unanswered(k)
        return self.starts[k], call if call is not None else self.calls[k][0]

    def nearest_unanswered(self, at: int) -> tuple[int, _Call] | None:
        """The nearest content before ``at`` with an unanswered call of the key, and that call."""
        k = bisect.bisect_left(self.starts, at) - 1
        while k >= 0:
            k = self._root(k)
            if k < 0:
                return None
            call = self._unanswered(k)
            if call is not None:
                return self.starts[k], call
            self.skip[k] = k - 1
        return None

    def _root(self, k: int) -> int:
        skip = self.skip
        root = k
        while root >= 0 and skip[root] != root:
            root = skip[root]
        while k >= 0 and skip[k] != k:
            skip[k], k = root, skip[k]
        return root


def _parts(content: Any) -> list[Any] | None:
    parts = content.get("parts") if isinstance(content, dict) else None
    return parts if isinstance(parts, list) else None


def _all_ids(contents: list[Any]) -> Any:
    for content in contents:
        for part in _parts(content) or ():
            key = _fc_key(part) or _fr_key(part)
            if key is not None:
                yield part[key].get("id")


def _signed(part: Any) -> bool:
    return isinstance(part, dict) and ("thoughtSignature" in part or "thought_signature" in part)


def _starts_turn(content: Any) -> bool:
    """A user content with text and no functionResponse: where the current turn begins."""
    if not isinstance(content, dict) or content.get("role", "user") != "user":
        return False
    parts = _parts(content) or ()
    return any(isinstance(p, dict) and isinstance(p.get("text"), str) and p["text"] for p in parts) \
        and not any(_fr_key(p) is not None for p in parts)


def repair(contents: list[Any], *, echo_ids: bool = True, counter: CallCounter) -> tuple[list[Any], Actions]:
    """After each model content with functionCall parts, one user content starting with one functionResponse
    per call in call order (id echoed exactly when the call had one and ``echo_ids``; ``response`` an object);
    missing ones inserted as errors, duplicates and orphans dropped, malformed ``args`` replaced. In the current
    turn, a model content with calls and no thought signature gets ``SKIP_SIGNATURE`` on its first call (see
    ``_sign``). ``contents`` is the repair's own copy."""
    actions = Actions()
    renamer = IdRenamer(lambda: _all_ids(contents))
    groups: dict[int, list[_Call]] = {}
    by_id: dict[str, _Index] = {}
    by_name: dict[Any, _Index] = {}
    idless_by_name: dict[Any, _Index] = {}
    for i, content in enumerate(contents):
        if not isinstance(content, dict) or content.get("role") != "model":
            continue
        calls = []
        seen: set[str] = set()
        for part in _parts(content) or ():
            key = _fc_key(part)
            if key is None:
                continue
            counter.add(i)
            fc = part[key]
            cid = fc.get("id") if isinstance(fc.get("id"), str) and fc.get("id") else None
            match = cid
            if cid is not None and cid in seen:
                cid = fc["id"] = renamer.new(cid)
                actions.add(RepairKind.ASSIGNED_ID, i, cid, fc.get("name"),
                            detail=f"a second functionCall with id {match!r} in one content got a new id (the "
                                   f"next functionResponse with that id, if any, answers it under the new one)")
            if cid is not None:
                seen.add(cid)
            if "args" in fc and not isinstance(fc["args"], dict):
                fc["args"], _ = object_arguments(fc["args"])
                actions.add(RepairKind.REPLACED_ARGUMENTS, i, cid, fc.get("name"),
                            detail="args that were not an object were replaced")
            call = _Call(cid, fc.get("name"), key == "function_call", match)
            calls.append(call)
            if match is not None:
                by_id.setdefault(match, _Index()).add(i, call)
            else:
                idless_by_name.setdefault(call.key, _Index()).add(i, call)
            by_name.setdefault(call.key, _Index()).add(i, call)
        if calls:
            groups[i] = calls

    def owner(i: int, fr: dict[str, Any]) -> tuple[int, _Call] | None:
        rid = fr.get("id") if isinstance(fr.get("id"), str) and fr.get("id") else None
        name = _name_key(fr.get("name"))
        if rid is None:  # no id: the first call of that name not yet answered, else a duplicate
            index = by_name.get(name)
            return index.nearest(i) if index is not None else None
        index = by_id.get(rid)
        found = index.nearest(i) if index is not None else None
        if found is not None:
            return found
        index = idless_by_name.get(name)  # an id no call before it has: a call without an id, by name
        return index.nearest_unanswered(i) if index is not None else None

    holds_kept: set[int] = set()
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
            holds_kept.add(i)

    def fixed_part(g: int, call: _Call) -> dict[str, Any]:
        if call.answered is None:
            actions.add(RepairKind.INSERTED_RESULT, g, call.id, call.name,
                        detail="no functionResponse was recorded for this call: an error result was inserted")
            key = "function_response" if call.snake else "functionResponse"
            fr = function_response(call.id if echo_ids else None, call.name, MISSING_RESULT_TEXT, True)
            # named exactly as a kept response is renamed (below): a call named by a value that is not a string
            # (``0``, ``false``, ``[]`` …) keeps that value, so the next repair finds the answer and changes nothing
            fr["name"] = call.name if call.name is not None else ""
            return {key: fr}
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
        if _name_key(fr.get("name")) != _name_key(call.name):  # compared as keys: NaN, "" for a nameless call
            actions.add(RepairKind.FIXED_RESPONSE_NAME, pos, call.id, call.name,
                        detail=f"functionResponse.name {fr.get('name')!r} set to the call's")
            fr["name"] = call.name if call.name is not None else ""
        if not isinstance(fr.get("response"), dict):
            fr["response"] = {"output": fr.get("response")}
            actions.add(RepairKind.WRAPPED_RESPONSE, pos, call.id, call.name,
                        detail="a response that was not an object was wrapped as {\"output\": …}")
        return part

    out: list[Any] = []
    placed: list[tuple[int, int]] = []  # (position in out, position in contents) of each content with calls
    consumed: set[int] = set()
    for i, content in enumerate(contents):
        if i in consumed:
            continue
        calls = groups.get(i)
        if calls is not None:
            placed.append((len(out), i))
            out.append(content)
            here = {id(c.answered[1]): k for k, c in enumerate(calls)
                    if c.answered is not None and c.answered[0] == i + 1}
            responses = [fixed_part(i, c) for c in calls]
            nxt = contents[i + 1] if i + 1 < len(contents) else None
            parts = _parts(nxt)
            if isinstance(nxt, dict) and nxt.get("role") != "model" and parts is not None:
                consumed.add(i + 1)
                order, rest, moved = split_results(parts, lambda p: _fr_key(p) is not None, here)
                if moved:
                    actions.add(RepairKind.MOVED_CONTENT, i + 1,
                                detail="parts before or between the functionResponse parts were moved after them")
                if order != sorted(order):
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
                if i in holds_kept:
                    actions.add(RepairKind.MERGED_MESSAGES, i,
                                detail="its functionResponse parts were merged into the result content of "
                                       "their turn")
                continue
            content = dict(content)
            content["parts"] = remaining
        out.append(content)
    _sign(out, placed, groups, actions)
    return out, actions


def _sign(out: list[Any], placed: list[tuple[int, int]], groups: dict[int, list[_Call]], actions: Actions) -> None:
    """Put ``SKIP_SIGNATURE`` on the first functionCall part of every model content of the current turn that
    carries no thought signature at all.

    Gemini 3 refuses (400 "Function call is missing a thought_signature") a replayed model content whose first
    functionCall part has no signature, and checks only the current turn: the contents after the latest user
    content with text; older turns are accepted as they are, so they are left alone. A content with
    a signature elsewhere (a stream can deliver it on a later empty part) is replayed as it came, and a real
    signature is never replaced. The turn is read on the repaired list, where results have their final places.
    """
    start = -1
    for k in range(len(out) - 1, -1, -1):
        if _starts_turn(out[k]):
            start = k
            break
    for at, i in placed:
        if at < start:
            continue
        parts = out[at]["parts"]
        if any(_signed(p) for p in parts):
            continue
        first = next(p for p in parts if _fc_key(p) is not None)
        snake = _fc_key(first) == "function_call"
        first["thought_signature" if snake else "thoughtSignature"] = SKIP_SIGNATURE
        call = groups[i][0]
        actions.add(RepairKind.INSERTED_THOUGHT_SIGNATURE, i, call.id, call.name,
                    detail="a model content of the current turn whose calls carry no thought signature got the "
                           f"documented {SKIP_SIGNATURE!r} on its first call (Gemini 3 refuses it without one)")


class GeminiResults(Results):
    """Gemini functionResponse contents, replay and repair (see the module docstring)."""

    dialect = PROVIDER

    def encode(self, turn: Turn, pairs: list[Pair], *, echo_ids: bool = True) -> Any:
        return encode(turn, pairs, echo_ids=echo_ids)

    def replay(self, turn: Turn, calls: list[ToolCall]) -> list[Any]:
        return replay(turn, calls)

    def repair(self, messages: list[Any], *, echo_ids: bool = True, counter: CallCounter
               ) -> tuple[list[Any], Actions]:
        return repair(messages, echo_ids=echo_ids, counter=counter)

    def user_message(self, text: str, *, alone: bool = True) -> Any:
        """A user content with one text part."""
        return {"role": "user", "parts": [{"text": text}]}


PART = GeminiResults()
