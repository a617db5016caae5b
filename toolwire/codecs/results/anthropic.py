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
from ._blocks import BlockLayout, place_result_blocks
from ._common import (
    MISSING_RESULT_TEXT,
    Actions,
    CallCounter,
    Pair,
    call_arguments,
    deep_copy,
    result_text,
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
class _Layout(BlockLayout):
    """tool_use blocks in assistant messages, tool_result blocks in user messages."""

    id_key = "id"
    name_key = "name"
    arguments_key = "input"
    result_id_key = "tool_use_id"
    call_word = "tool_use"
    result_word = "tool_result"
    id_prefix = "tw_toolu"

    def call_of(self, block: Any) -> dict[str, Any] | None:
        return block if isinstance(block, dict) and block.get("type") == "tool_use" else None

    def result_of(self, block: Any) -> dict[str, Any] | None:
        return block if isinstance(block, dict) and block.get("type") == "tool_result" else None

    def missing(self, call_id: str, name: Any) -> dict[str, Any]:
        return tool_result(call_id, MISSING_RESULT_TEXT, True)

    def text(self, text: str) -> dict[str, Any]:
        return {"type": "text", "text": text}


_LAYOUT = _Layout()


def repair(msgs: list[Any], *, echo_ids: bool = True, counter: CallCounter) -> tuple[list[Any], Actions]:
    """See the module docstring. ``msgs`` is the repair's own copy."""
    return place_result_blocks(msgs, _LAYOUT, counter)


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
