"""Result placement for dialects whose calls are blocks of an assistant message and whose results are blocks at the
start of the next user message (Anthropic Messages, and any dialect with that layout), as ``_flat`` does for
dialects whose results are entries of the history list.

The dialect describes its blocks with a ``BlockLayout`` (which block is a call or a result, where the ids, the
name and the arguments are, how a missing result and a text block look, the words its reports use);
``place_result_blocks`` then makes the history one the provider accepts:

* every call block gets an id (a missing one is assigned, one repeating another call's id in its message is
  renamed), and arguments that are an object;
* the user message right after an assistant message with calls starts with one result per call, in call order:
  the first result found for it (moved there from a later or split message, merged in), or an error result
  saying none was recorded; anything else that message held follows the results (a text content becomes a text
  block);
* a later result for the same call is a duplicate, one answering no call before it an orphan: both dropped; a
  user message left with nothing once its results moved is dropped;
* a result block inside an assistant message that answers one of the history's calls is taken out of it and
  placed like the others; one that answers no call of the history (a server-side tool's result, which the
  provider keeps in the assistant message) stays.

A result belongs to the nearest assistant message before it that holds a call with its id (``Pairing``), so ids
reused across turns pair correctly, and every step is one pass: the cost is linear in the size of the history.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ._common import Actions, CallCounter, CallRef, IdRenamer, Pairing, RepairKind, object_arguments, split_results

__all__ = ["BlockLayout", "place_result_blocks"]


class BlockLayout:
    """How one dialect writes calls and results as blocks of a message's content.

    ``call_of(block)`` is the object holding a call's fields when ``block`` is a call block (the block itself, or
    an object nested in it), else None; ``result_of(block)`` likewise for a result block. The fields are
    ``id_key``, ``name_key`` and ``arguments_key`` in a call, ``result_id_key`` in a result. ``missing(id, name)``
    is an error result block answering a call no result was recorded for, ``text(text)`` a text block.
    ``call_word`` and ``result_word`` name the blocks in the repair report; ``id_prefix`` starts an assigned id.
    Messages are ``{"role": ..., "content": ...}`` with ``assistant_role`` and ``user_role``."""

    assistant_role = "assistant"
    user_role = "user"
    id_key = "id"
    name_key = "name"
    arguments_key = "input"
    result_id_key = "id"
    call_word = "call"
    result_word = "result"
    id_prefix = "tw_call"

    def call_of(self, block: Any) -> dict[str, Any] | None:
        raise NotImplementedError

    def result_of(self, block: Any) -> dict[str, Any] | None:
        raise NotImplementedError

    def missing(self, call_id: str, name: Any) -> dict[str, Any]:
        raise NotImplementedError

    def text(self, text: str) -> dict[str, Any]:
        raise NotImplementedError


def _blocks(msg: Any) -> list[Any] | None:
    content = msg.get("content") if isinstance(msg, dict) else None
    return content if isinstance(content, list) else None


def _ids(msgs: list[Any], layout: BlockLayout) -> Iterator[Any]:
    for msg in msgs:
        for block in _blocks(msg) or ():
            call = layout.call_of(block)
            if call is not None:
                yield call.get(layout.id_key)
                continue
            result = layout.result_of(block)
            if result is not None:
                yield result.get(layout.result_id_key)


def place_result_blocks(msgs: list[Any], layout: BlockLayout, counter: CallCounter) -> tuple[list[Any], Actions]:
    """The repaired history and what changed (see the module docstring). ``msgs`` is the repair's own copy."""
    actions = Actions()
    renamer = IdRenamer(lambda: _ids(msgs, layout))
    pairing = Pairing()
    call_word, result_word = layout.call_word, layout.result_word
    id_key, name_key, args_key = layout.id_key, layout.name_key, layout.arguments_key

    def is_result(block: Any) -> bool:
        return layout.result_of(block) is not None

    # the calls of each assistant message, in order
    groups: dict[int, list[CallRef]] = {}
    for i, msg in enumerate(msgs):
        if not isinstance(msg, dict) or msg.get("role") != layout.assistant_role:
            continue
        blocks = _blocks(msg)
        if not blocks:
            continue
        calls = []
        seen: set[str] = set()
        for k, block in enumerate(blocks):
            call = layout.call_of(block)
            if call is None:
                continue
            counter.add(i)
            match = None
            if not isinstance(call.get(id_key), str) or not call[id_key]:
                call[id_key] = f"{layout.id_prefix}_{i}_{k}"
                actions.add(RepairKind.ASSIGNED_ID, i, call[id_key], call.get(name_key),
                            detail=f"a {call_word} block without an id got one")
            elif call[id_key] in seen:
                match, call[id_key] = call[id_key], renamer.new(call[id_key])
                actions.add(RepairKind.ASSIGNED_ID, i, call[id_key], call.get(name_key),
                            detail=f"a second {call_word} block with id {match!r} in one message got a new id (the "
                                   f"next {result_word} with that id, if any, answers it under the new one)")
            seen.add(call[id_key])
            fixed, changed = object_arguments(call.get(args_key))
            if changed or args_key not in call:
                call[args_key] = fixed
                actions.add(RepairKind.REPLACED_ARGUMENTS, i, call[id_key], call.get(name_key),
                            detail=f"{args_key} that was not an object was replaced")
            calls.append(CallRef(call[id_key], call.get(name_key), i, match=match))
        if calls:
            groups[i] = calls
            pairing.add(i, i, calls)
    # every result block: to its call (the nearest call block before it with that id), or dropped. A result block
    # in an assistant message answering one of the history's calls was put there by mistake (results belong to
    # the user message after the call): it is taken out and placed like any other; one answering no such call is
    # the provider's own (a server-side tool's result) and stays where it is.
    holds_kept: set[int] = set()  # messages holding a result that is kept
    taken: set[int] = set()  # id() of the result blocks taken out of assistant messages
    for i, msg in enumerate(msgs):
        if not isinstance(msg, dict):
            continue
        role = msg.get("role")
        if role != layout.user_role and role != layout.assistant_role:
            continue
        in_assistant = role == layout.assistant_role
        for block in _blocks(msg) or ():
            result = layout.result_of(block)
            if result is None:
                continue
            rid = result.get(layout.result_id_key)
            if in_assistant:
                if not pairing.known(rid):
                    continue
                taken.add(id(block))
            found = pairing.claim(rid, i) if isinstance(rid, str) else None
            if found is None:
                actions.add(RepairKind.DROPPED_ORPHAN, i, rid if isinstance(rid, str) else None,
                            detail=f"a {result_word} for no {call_word} before it was dropped")
                continue
            _, ref, last = found
            if ref is None:
                actions.add(RepairKind.DROPPED_DUPLICATE, i, last.id, last.name,
                            detail=f"a second {result_word} for the call was dropped (the one in message "
                                   f"{last.result_at} is kept)")
                continue
            ref.result, ref.result_at = block, i
            holds_kept.add(i)
    out: list[Any] = []
    consumed: set[int] = set()
    for i, msg in enumerate(msgs):
        if i in consumed:
            continue
        calls = groups.get(i)
        if taken and isinstance(msg, dict) and msg.get("role") == layout.assistant_role:
            blocks = _blocks(msg)
            if blocks is not None and any(id(b) in taken for b in blocks):
                msg = dict(msg)
                msg["content"] = [b for b in blocks if id(b) not in taken]
                if not msg["content"] and calls is None:
                    continue  # an assistant message that held nothing but misplaced results
        if calls is not None:
            out.append(msg)
            results = []
            here: dict[int, int] = {}  # id() of a result block already in the next message -> its call's index
            for k, c in enumerate(calls):
                if c.result is None:
                    actions.add(RepairKind.INSERTED_RESULT, i, c.id, c.name,
                                detail=f"no {result_word} was recorded for this call: an error result was inserted")
                    results.append(layout.missing(c.id, c.name))
                    continue
                if c.result_at != i + 1:
                    actions.add(RepairKind.MOVED_RESULT, c.result_at, c.id, c.name,
                                detail=f"moved into the message right after its {call_word} (message {i})")
                else:
                    here[id(c.result)] = k
                if c.id != c.match:
                    result = layout.result_of(c.result)
                    assert result is not None
                    result[layout.result_id_key] = c.id
                results.append(c.result)
            nxt = msgs[i + 1] if i + 1 < len(msgs) else None
            if isinstance(nxt, dict) and nxt.get("role") == layout.user_role:
                consumed.add(i + 1)
                content = nxt.get("content")
                rest: list[Any] = []
                if isinstance(content, str):
                    if content:
                        rest.append(layout.text(content))
                elif isinstance(content, list):
                    order, others, moved = split_results(content, is_result, here)
                    rest.extend(others)
                    if moved:
                        actions.add(RepairKind.MOVED_CONTENT, i + 1,
                                    detail=f"content before or between the {result_word} blocks was moved after "
                                           "them")
                    if order != sorted(order):
                        actions.add(RepairKind.REORDERED_RESULTS, i + 1,
                                    detail=f"the {result_word} blocks were put in call order")
                merged = dict(nxt)
                merged["content"] = results + rest
                out.append(merged)
            else:
                out.append({"role": layout.user_role, "content": results})
            continue
        blocks = _blocks(msg)
        if isinstance(msg, dict) and msg.get("role") == layout.user_role and blocks is not None \
                and any(is_result(b) for b in blocks):
            remaining = [b for b in blocks if not is_result(b)]
            if not remaining:
                if i in holds_kept:
                    actions.add(RepairKind.MERGED_MESSAGES, i,
                                detail=f"its {result_word} blocks were merged into the result message of their "
                                       "turn")
                continue  # nothing left
            msg = dict(msg)
            msg["content"] = remaining
        out.append(msg)
    return out, actions
