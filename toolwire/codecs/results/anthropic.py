"""Anthropic Messages: the tool_result message, replay, history repair (failure modes 18 and 25 in
docs/failure-modes.md).

Results: ONE user message whose content is every ``tool_result`` block of the turn, in call order
(``tool_use_id``, ``content`` text, ``is_error: true`` for errors). A rich result (``ToolResult.parts``) with an
image (JPEG, PNG, GIF, WebP; an embedded resource of those types too) or a PDF resource has a list of blocks for
``content``: ``text``, ``image`` (base64 source) and ``document`` (base64 PDF source), in the parts' order; other
parts are described in words (``_parts``), and a result of text only stays one string.

Replay: the assistant content as received (thinking and redacted_thinking blocks with their signatures, text,
server tool blocks, in order), each ``tool_use`` with an object ``input``: input that did not parse is replayed as
``{"_invalid_arguments": "<raw text>"}`` (failure mode 21).

Repair: the user message after an assistant message with ``tool_use`` blocks starts with one ``tool_result``
per tool_use, in call order (missing ones inserted as errors; results found in later or split messages moved
and merged there; duplicates and orphans dropped); any other content of that message follows the results.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...registry.content import Part, ResourcePart
from ...registry.result import ToolResult
from ...types import ToolCall, Turn
from ._common import (
    Actions,
    CallCounter,
    CallRef,
    IdRenamer,
    MISSING_RESULT_TEXT,
    Pair,
    Pairing,
    RepairKind,
    call_arguments,
    deep_copy,
    object_arguments,
    result_text,
    split_results,
    wire_id,
)
from ._part import Results
from ._parts import ANTHROPIC_IMAGES, PDF, joined, media, pieces

__all__ = ["PROVIDER", "PART", "encode", "replay", "repair"]

PROVIDER = "anthropic"
#: the longest ``uri`` given as a document's ``title`` (a longer one stays in the words before it only)
_TITLE_MAX = 200


def tool_result(tool_use_id: str, content: str | list[dict[str, Any]], is_error: bool) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id, "content": content}
    if is_error:
        block["is_error"] = True
    return block


def _native(part: Part) -> dict[str, Any] | None:
    found = media(part, ANTHROPIC_IMAGES)
    if found is not None:
        return {"type": "image", "source": {"type": "base64", "media_type": found[0], "data": found[1]}}
    found = media(part, frozenset({PDF})) if isinstance(part, ResourcePart) else None
    if found is None:
        return None
    block: dict[str, Any] = {"type": "document", "source": {"type": "base64", "media_type": PDF, "data": found[1]}}
    if isinstance(part, ResourcePart) and len(part.uri) <= _TITLE_MAX:
        block["title"] = part.uri
    return block


def _content(result: ToolResult) -> str | list[dict[str, Any]]:
    if result.parts is None:
        return result_text(result)
    items = pieces(result, _native)
    text = joined(result, items)
    if text is not None:
        return text
    # Anthropic refuses empty text blocks
    return [{"type": "text", "text": i} if isinstance(i, str) else i for i in items if i != ""]


def encode(turn: Turn, pairs: list[Pair], *, echo_ids: bool = True) -> dict[str, Any]:
    """One user message: all the tool_result blocks, in call order."""
    return {"role": "user", "content": [tool_result(wire_id(turn, call), _content(result), result.is_error)
                                        for call, result in pairs]}


def replay(turn: Turn, calls: list[ToolCall]) -> list[dict[str, Any]]:
    """The assistant message verbatim, every tool_use ``input`` an object."""
    msg = deep_copy(turn.assistant_message)
    content = msg.get("content")
    if not isinstance(content, list):
        return [msg]
    used: set[int] = set()
    for call in calls:
        at = None
        for i, block in enumerate(content):
            if i not in used and isinstance(block, dict) and block.get("type") == "tool_use" \
                    and call.call_id is not None and block.get("id") == call.call_id:
                at = i
                break
        if at is None:
            bi = call.provider_meta.get("block_index")
            if isinstance(bi, int) and 0 <= bi < len(content) and bi not in used \
                    and isinstance(content[bi], dict) and content[bi].get("type") == "tool_use":
                at = bi
        if at is None:
            continue
        used.add(at)
        block = content[at]
        block["id"] = wire_id(turn, call)
        if not (isinstance(call.args, dict) and isinstance(block.get("input"), dict)):
            block["input"] = call_arguments(call)
    return [msg]


# ---- history repair -----------------------------------------------------------------------------------------
def _blocks(msg: Any) -> list[Any] | None:
    content = msg.get("content") if isinstance(msg, dict) else None
    return content if isinstance(content, list) else None


def _is_result(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "tool_result"


def _all_ids(msgs: list[Any]) -> Any:
    for msg in msgs:
        for block in _blocks(msg) or ():
            if isinstance(block, dict):
                yield block.get("id") if block.get("type") == "tool_use" else block.get("tool_use_id")


def repair(msgs: list[Any], *, echo_ids: bool = True, counter: CallCounter) -> tuple[list[Any], Actions]:
    """See the module docstring. ``msgs`` is the repair's own copy."""
    actions = Actions()
    renamer = IdRenamer(lambda: _all_ids(msgs))
    pairing = Pairing()
    # the calls of each assistant message, in order
    groups: dict[int, list[CallRef]] = {}
    for i, msg in enumerate(msgs):
        if not isinstance(msg, dict) or msg.get("role") != "assistant":
            continue
        blocks = _blocks(msg)
        if not blocks:
            continue
        calls = []
        seen: set[str] = set()
        for k, block in enumerate(blocks):
            if not isinstance(block, dict) or block.get("type") != "tool_use":
                continue
            counter.add(i)
            match = None
            if not isinstance(block.get("id"), str) or not block["id"]:
                block["id"] = f"tw_toolu_{i}_{k}"
                actions.add(RepairKind.ASSIGNED_ID, i, block["id"], block.get("name"),
                            detail="a tool_use block without an id got one")
            elif block["id"] in seen:
                match, block["id"] = block["id"], renamer.new(block["id"])
                actions.add(RepairKind.ASSIGNED_ID, i, block["id"], block.get("name"),
                            detail=f"a second tool_use block with id {match!r} in one message got a new id (the "
                                   f"next tool_result with that id, if any, answers it under the new one)")
            seen.add(block["id"])
            fixed, changed = object_arguments(block.get("input"))
            if changed or "input" not in block:
                block["input"] = fixed
                actions.add(RepairKind.REPLACED_ARGUMENTS, i, block["id"], block.get("name"),
                            detail="input that was not an object was replaced")
            calls.append(CallRef(block["id"], block.get("name"), i, match=match))
        if calls:
            groups[i] = calls
            pairing.add(i, i, calls)
    # every tool_result block: to its call (the nearest tool_use before it with that id), or dropped
    holds_kept: set[int] = set()  # messages holding a result that is kept
    for i, msg in enumerate(msgs):
        if not isinstance(msg, dict) or msg.get("role") != "user":
            continue
        for block in _blocks(msg) or ():
            if not _is_result(block):
                continue
            tid = block.get("tool_use_id")
            found = pairing.claim(tid, i) if isinstance(tid, str) else None
            if found is None:
                actions.add(RepairKind.DROPPED_ORPHAN, i, tid if isinstance(tid, str) else None,
                            detail="a tool_result for no tool_use before it was dropped")
                continue
            _, call, last = found
            if call is None:
                actions.add(RepairKind.DROPPED_DUPLICATE, i, last.id, last.name,
                            detail=f"a second tool_result for the call was dropped (the one in message "
                                   f"{last.result_at} is kept)")
                continue
            call.result, call.result_at = block, i
            holds_kept.add(i)
    out: list[Any] = []
    consumed: set[int] = set()
    for i, msg in enumerate(msgs):
        if i in consumed:
            continue
        calls = groups.get(i)
        if calls is not None:
            out.append(msg)
            results = []
            here: dict[int, int] = {}  # id() of a result block already in the next message -> its call's index
            for k, c in enumerate(calls):
                if c.result is None:
                    actions.add(RepairKind.INSERTED_RESULT, i, c.id, c.name,
                                detail="no tool_result was recorded for this call: an error result was inserted")
                    results.append(tool_result(c.id, MISSING_RESULT_TEXT, True))
                    continue
                if c.result_at != i + 1:
                    actions.add(RepairKind.MOVED_RESULT, c.result_at, c.id, c.name,
                                detail=f"moved into the message right after its tool_use (message {i})")
                else:
                    here[id(c.result)] = k
                if c.id != c.match:
                    c.result["tool_use_id"] = c.id
                results.append(c.result)
            nxt = msgs[i + 1] if i + 1 < len(msgs) else None
            if isinstance(nxt, dict) and nxt.get("role") == "user":
                consumed.add(i + 1)
                content = nxt.get("content")
                rest: list[Any] = []
                if isinstance(content, str):
                    if content:
                        rest.append({"type": "text", "text": content})
                elif isinstance(content, list):
                    order, others, moved = split_results(content, _is_result, here)
                    rest.extend(others)
                    if moved:
                        actions.add(RepairKind.MOVED_CONTENT, i + 1,
                                    detail="content before or between the tool_result blocks was moved after them")
                    if order != sorted(order):
                        actions.add(RepairKind.REORDERED_RESULTS, i + 1,
                                    detail="the tool_result blocks were put in call order")
                merged = dict(nxt)
                merged["content"] = results + rest
                out.append(merged)
            else:
                out.append({"role": "user", "content": results})
            continue
        blocks = _blocks(msg)
        if isinstance(msg, dict) and msg.get("role") == "user" and blocks is not None \
                and any(_is_result(b) for b in blocks):
            remaining = [b for b in blocks if not _is_result(b)]
            if not remaining:
                if i in holds_kept:
                    actions.add(RepairKind.MERGED_MESSAGES, i,
                                detail="its tool_result blocks were merged into the result message of their turn")
                continue  # nothing left
            msg = dict(msg)
            msg["content"] = remaining
        out.append(msg)
    return out, actions


class AnthropicResults(Results):
    """Anthropic tool_result blocks, replay and repair (see the module docstring)."""

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
        """Every ``tool_use`` block's ``id`` and every ``tool_result`` block's ``tool_use_id``."""
        for msg in messages:
            if not isinstance(msg, dict):
                continue
            content = msg.get("content")
            for block in content if isinstance(content, list) else ():
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_use" and "id" in block:
                    block["id"] = new_id(block["id"])
                elif block.get("type") == "tool_result" and "tool_use_id" in block:
                    block["tool_use_id"] = new_id(block["tool_use_id"])


PART = AnthropicResults()
