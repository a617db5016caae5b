"""MCP ``tools/call`` results as ``toolwire.Content``.

``content_from_result`` reads a result (the MCP SDK's ``CallToolResult``, or its JSON as a dict) and returns the
``Content`` a handler answers with: each content block becomes a part in order (``text`` → ``TextPart``,
``image`` → ``ImagePart``, ``audio`` → ``AudioPart``, an embedded ``resource`` → ``ResourcePart``,
``resource_link`` → ``LinkPart``) and ``structuredContent`` becomes ``Content.structured``. A result with
``isError: true`` raises ``ToolError`` carrying that content, so the call is answered ``tool_error`` under its
own id. What a provider could not take is never passed on: binary data that is not valid base64, and a block
of a type toolwire does not know, are replaced by a text part saying what was left out.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from ..registry.content import AudioPart, Content, ImagePart, LinkPart, Part, ResourcePart, TextPart, ToolError

__all__ = ["content_from_result"]


def _as_dict(value: Any) -> Mapping[str, Any]:
    """The result as MCP JSON (camelCase keys): a mapping as it is, a pydantic model dumped by alias."""
    if isinstance(value, Mapping):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        dumped = dump(by_alias=True, mode="json", exclude_none=True)
        if isinstance(dumped, Mapping):
            return dumped
    raise TypeError(f"not an MCP tools/call result: {type(value).__name__}")


def _base64(value: Any) -> str | None:
    """``value`` if it is base64 text a provider accepts (standard alphabet, padded), else None."""
    if not isinstance(value, str):
        return None
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
    return value


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _dropped(what: str, why: str) -> TextPart:
    return TextPart(text=f"[{what} from the MCP server was left out: {why}]")


def _part(block: Any) -> Part:
    if not isinstance(block, Mapping):
        return _dropped("a content block", "it is not an object")
    kind = block.get("type")
    if kind == "text":
        return TextPart(text=_text(block.get("text")) or "")
    if kind in ("image", "audio"):
        data = _base64(block.get("data"))
        if data is None:
            return _dropped(f"an {kind}", "its data is not valid base64")
        mime = _text(block.get("mimeType")) or "application/octet-stream"
        return ImagePart(data=data, mime_type=mime) if kind == "image" else AudioPart(data=data, mime_type=mime)
    if kind == "resource":
        resource = block.get("resource")
        if not isinstance(resource, Mapping) or not isinstance(resource.get("uri"), str):
            return _dropped("an embedded resource", "it has no uri")
        blob = resource.get("blob")
        if blob is not None and _base64(blob) is None:
            return _dropped(f"the resource {resource['uri']}", "its blob is not valid base64")
        return ResourcePart(uri=resource["uri"], mime_type=_text(resource.get("mimeType")),
                            text=_text(resource.get("text")), blob=_text(blob))
    if kind == "resource_link":
        uri = block.get("uri")
        if not isinstance(uri, str):
            return _dropped("a resource link", "it has no uri")
        return LinkPart(uri=uri, name=_text(block.get("name")), description=_text(block.get("description")),
                        mime_type=_text(block.get("mimeType")))
    shown = json.dumps(kind) if isinstance(kind, str) else "no type"
    return _dropped(f"a content block of type {shown}", "toolwire does not know that type")


def content_from_result(result: Any) -> Content:
    """The ``Content`` of an MCP ``tools/call`` result (a ``CallToolResult`` or its JSON as a dict).

    Raises ``ToolError`` with that content when the result has ``isError: true`` (an error result with no
    content says so in a text part), and ``TypeError`` for a value that is not a result."""
    data = _as_dict(result)
    blocks = data.get("content")
    parts = [_part(b) for b in blocks] if isinstance(blocks, list) else []
    structured = data.get("structuredContent")
    if structured is not None and not isinstance(structured, dict):
        parts.append(TextPart(text=json.dumps(structured, ensure_ascii=False)))
        structured = None
    if data.get("isError") is True:
        if not parts and structured is None:
            parts.append(TextPart(text="the tool reported an error without saying what it was"))
        raise ToolError(Content(parts=parts, structured=structured))
    return Content(parts=parts, structured=structured)
