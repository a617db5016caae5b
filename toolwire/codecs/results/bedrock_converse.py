"""Amazon Bedrock Converse: the toolResult message, replay, history repair.

Results: ONE user message whose content is one ``toolResult`` block per call, in call order: ``{"toolResult":
{"toolUseId", "content": [...], "status": "success" | "error"}}``. The content of a plain result is ``[{"json":
object}]`` when the result is a JSON object and ``[{"text": ...}]`` otherwise (an error is text, never empty). A
rich result (``ToolResult.parts``) has one content block per piece, in the parts' order: ``text``, ``image``
(PNG, JPEG, GIF, WebP: ``{"format", "source": {"bytes": base64}}``) and ``document`` (a PDF resource:
``{"format": "pdf", "name", "source": {"bytes": base64}}``); other parts are described in words (``_parts``).
Blobs are base64 strings, the JSON wire form (botocore's Python form holds bytes).

Replay: the assistant content as received (reasoning with its signature, redacted reasoning, text, citations,
server tools' blocks, in order), each ``toolUse`` with an object ``input``: input that did not parse is replayed
as ``{"_invalid_arguments": "<raw text>"}``.

A prompt after a trailing user message (the history of a run stopped once its results were in it) joins that
message as a text block (``add_user``): Converse refuses two messages of one role in a row.

Repair (``_blocks.place_result_blocks``): the user message after an assistant message with ``toolUse`` blocks
starts with one ``toolResult`` per toolUse, in call order (missing ones inserted as errors; results found in later
or split messages moved and merged there; duplicates and orphans dropped); any other content follows them.
"""

from __future__ import annotations

import re
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
    as_json_value,
    call_arguments,
    deep_copy,
    result_text,
    wire_id,
)
from ._part import Results
from ._parts import ANTHROPIC_IMAGES, PDF, joined, media, pieces

__all__ = ["PROVIDER", "PART", "BedrockConverseResults", "IMAGES"]

PROVIDER = "bedrock-converse"
#: the image types a Converse ImageBlock takes (botocore ``ImageFormat``: png, jpeg, gif, webp)
IMAGES = ANTHROPIC_IMAGES
_FORMAT = {"image/png": "png", "image/jpeg": "jpeg", "image/gif": "gif", "image/webp": "webp"}
#: a DocumentBlock's name: 1 to 200 characters of letters, digits, white space, hyphens, parentheses and brackets
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9\s\-()\[\]]")
_NAME_MAX = 200


def tool_result(tool_use_id: str, content: list[dict[str, Any]], is_error: bool) -> dict[str, Any]:
    return {"toolResult": {"toolUseId": tool_use_id, "content": content,
                           "status": "error" if is_error else "success"}}


def _document_name(part: ResourcePart) -> str:
    name = " ".join(_NAME_UNSAFE.sub(" ", part.uri.rsplit("/", 1)[-1]).split())[:_NAME_MAX].strip()
    return name or "document"


def _native(part: Part) -> dict[str, Any] | None:
    found = media(part, IMAGES)
    if found is not None:
        return {"image": {"format": _FORMAT[found[0]], "source": {"bytes": found[1]}}}
    found = media(part, frozenset({PDF})) if isinstance(part, ResourcePart) else None
    if found is None or not isinstance(part, ResourcePart):
        return None
    return {"document": {"format": "pdf", "name": _document_name(part), "source": {"bytes": found[1]}}}


def _content(result: ToolResult) -> list[dict[str, Any]]:
    if result.parts is None:
        if not result.is_error:
            value = as_json_value(result.content)
            if isinstance(value, dict):
                return [{"json": value}]
        return [{"text": result_text(result)}]
    items = pieces(result, _native)
    text = joined(result, items)
    if text is not None:
        return [{"text": text}]
    # an empty text block says nothing (and some models refuse one)
    return [{"text": i} if isinstance(i, str) else i for i in items if i != ""]


def encode(turn: Turn, pairs: list[Pair], *, echo_ids: bool = True) -> dict[str, Any]:
    """One user message: every toolResult block, in call order."""
    return {"role": "user", "content": [tool_result(wire_id(turn, call), _content(result), result.is_error)
                                        for call, result in pairs]}


def _tool_use(block: Any) -> dict[str, Any] | None:
    inner = block.get("toolUse") if isinstance(block, dict) else None
    return inner if isinstance(inner, dict) else None


def replay(turn: Turn, calls: list[ToolCall]) -> list[dict[str, Any]]:
    """The assistant message verbatim, every toolUse ``input`` an object."""
    msg = deep_copy(turn.assistant_message)
    content = msg.get("content") if isinstance(msg, dict) else None
    if not isinstance(content, list):
        return [msg]
    used: set[int] = set()
    for call in calls:
        at = None
        for i, block in enumerate(content):
            tool = _tool_use(block)
            if i not in used and tool is not None and call.call_id is not None \
                    and tool.get("toolUseId") == call.call_id:
                at = i
                break
        if at is None:
            bi = call.provider_meta.get("block_index")
            if isinstance(bi, int) and 0 <= bi < len(content) and bi not in used and _tool_use(content[bi]):
                at = bi
        if at is None:
            continue
        used.add(at)
        tool = _tool_use(content[at])
        assert tool is not None
        tool["toolUseId"] = wire_id(turn, call)
        if not (isinstance(call.args, dict) and isinstance(tool.get("input"), dict)):
            tool["input"] = call_arguments(call)
    return [msg]


# ---- history repair -----------------------------------------------------------------------------------------
class _Layout(BlockLayout):
    """``{"toolUse": {...}}`` blocks in assistant messages, ``{"toolResult": {...}}`` blocks in user messages."""

    id_key = "toolUseId"
    name_key = "name"
    arguments_key = "input"
    result_id_key = "toolUseId"
    call_word = "toolUse"
    result_word = "toolResult"
    id_prefix = "tw_tooluse"

    def call_of(self, block: Any) -> dict[str, Any] | None:
        tool = _tool_use(block)
        # a server tool's block is the provider's: its result comes with it, in the assistant message
        return tool if tool is not None and tool.get("type") != "server_tool_use" else None

    def result_of(self, block: Any) -> dict[str, Any] | None:
        inner = block.get("toolResult") if isinstance(block, dict) else None
        return inner if isinstance(inner, dict) else None

    def missing(self, call_id: str, name: Any) -> dict[str, Any]:
        return tool_result(call_id, [{"text": MISSING_RESULT_TEXT}], True)

    def text(self, text: str) -> dict[str, Any]:
        return {"text": text}


_LAYOUT = _Layout()


class BedrockConverseResults(Results):
    """Bedrock Converse toolResult blocks, replay and repair (see the module docstring)."""

    dialect = PROVIDER
    renames_ids = True

    def encode(self, turn: Turn, pairs: list[Pair], *, echo_ids: bool = True) -> Any:
        return encode(turn, pairs, echo_ids=echo_ids)

    def replay(self, turn: Turn, calls: list[ToolCall]) -> list[Any]:
        return replay(turn, calls)

    def repair(self, messages: list[Any], *, echo_ids: bool = True, counter: CallCounter
               ) -> tuple[list[Any], Actions]:
        return place_result_blocks(messages, _LAYOUT, counter)

    def user_message(self, text: str, *, alone: bool = True) -> Any:
        """Converse message content is always a list of blocks."""
        return {"role": "user", "content": [{"text": text}]}

    def add_user(self, history: list[Any], text: str, *, alone: bool = True) -> None:
        """Converse refuses two messages of one role in a row: text after a trailing user message (the results of
        a run stopped once they were in the history) joins it, as a text block after its content."""
        last = history[-1] if history else None
        if isinstance(last, dict) and last.get("role") == "user" and isinstance(last.get("content"), list):
            history[-1] = {**last, "content": [*last["content"], {"text": text}]}
        else:
            history.append(self.user_message(text, alone=alone))

    def rename_ids(self, messages: list[Any], new_id: Callable[[Any], Any]) -> None:
        """Every toolUse block's and every toolResult block's ``toolUseId`` (a server tool's pair included)."""
        for msg in messages:
            content = msg.get("content") if isinstance(msg, dict) else None
            for block in content if isinstance(content, list) else ():
                if not isinstance(block, dict):
                    continue
                for key in ("toolUse", "toolResult"):
                    inner = block.get(key)
                    if isinstance(inner, dict) and "toolUseId" in inner:
                        inner["toolUseId"] = new_id(inner["toolUseId"])


PART = BedrockConverseResults()
