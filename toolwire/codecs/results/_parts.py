"""Rich results (``ToolResult.parts``) on the wire, for every dialect: which parts a provider takes inside a tool
result, and the ordered pieces (text, and the dialect's own blocks for the parts it takes) that the dialect
modules put in their result.

A part the dialect does not take is sent as the words ``describe`` gives it (an embedded text resource: its text
under a header naming it); an ``ImagePart`` of a type the provider does not list is described the same way, and so
is an image (or a PDF) whose bytes are of no type the providers read: they would refuse it.
``structured`` JSON (``ToolResult.content`` when it is an object) comes first as JSON text, unless a text part
already carries it (MCP asks servers to repeat it as text: it is not sent twice); a dialect whose result is an
object (Gemini ``response``, an Interactions ``result`` with nothing else) takes the object instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...registry._rich import SEPARATOR, decoded, describe, sniffed, structured_text_part
from ...registry.content import AudioPart, Content, ImagePart, Part, ResourcePart
from ...registry.result import ToolResult
from ._common import error_text, json_text

__all__ = ["Native", "pieces", "joined", "structured_of", "mime", "media", "ANTHROPIC_IMAGES", "OPENAI_IMAGES",
           "GEMINI_MEDIA", "INTERACTIONS_IMAGES", "INTERACTIONS_AUDIO", "INTERACTIONS_DOCUMENTS", "PDF"]

#: how a dialect carries one part natively: its wire block, or None when it does not take the part
Native = Callable[[Part], Any]

PDF = "application/pdf"
#: what each provider takes inside a tool result (its SDK's request types and documentation)
ANTHROPIC_IMAGES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})  # Base64ImageSourceParam
OPENAI_IMAGES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})  # image inputs, as data URLs
GEMINI_MEDIA = frozenset({"image/png", "image/jpeg", "image/webp", PDF})  # multimodal function responses
INTERACTIONS_IMAGES = frozenset({"image/png", "image/jpeg", "image/webp", "image/heic", "image/heif", "image/gif",
                                 "image/bmp", "image/tiff"})  # ImageContentMimeType
INTERACTIONS_AUDIO = frozenset({"audio/wav", "audio/mp3", "audio/aiff", "audio/aac", "audio/ogg", "audio/flac",
                                "audio/mpeg", "audio/m4a", "audio/l16", "audio/opus", "audio/alaw", "audio/mulaw",
                                "audio/webm"})  # AudioContentMimeType
INTERACTIONS_DOCUMENTS = frozenset({PDF})  # DocumentContentMimeType (text documents go as text)

_ALIASES = {"image/jpg": "image/jpeg"}


def mime(part: Part) -> str:
    """The part's MIME type in lower case (``image/jpg`` read as ``image/jpeg``), or ``""``."""
    value = (getattr(part, "mime_type", None) or "").lower()
    return _ALIASES.get(value, value)


def media(part: Part, accepted: frozenset[str]) -> tuple[str, str] | None:
    """``(mime type, base64 data)`` of an image, audio or blob resource part whose type is in ``accepted``. The
    type of an image or a PDF is the one its first bytes have (``sniffed``): bytes of no known type are None."""
    if isinstance(part, (ImagePart, AudioPart)):
        data = part.data
    elif isinstance(part, ResourcePart) and part.blob is not None:
        data = part.blob
    else:
        return None
    kind = mime(part)
    if decoded(kind):
        found = sniffed(data)
        if found is None or (isinstance(part, ImagePart) and not found.startswith("image/")):
            return None
        kind = found
    return (kind, data) if kind in accepted else None


def structured_of(result: ToolResult) -> dict[str, Any] | None:
    """The ``structured`` object of a rich result (its ``content`` when that is an object)."""
    return result.content if result.parts is not None and isinstance(result.content, dict) else None


def pieces(result: ToolResult, native: Native, *, with_structured: bool = True) -> list[Any]:
    """The ordered pieces of a rich result: ``str`` for text, the dialect's blocks for the parts ``native`` takes.
    ``with_structured``: put the structured JSON text first (unless a text part carries it)."""
    parts = list(result.parts or ())
    structured = structured_of(result)
    out: list[Any] = []
    dup = structured_text_part(Content(parts=parts, structured=structured))
    if structured is not None and with_structured and dup is None:
        out.append(json_text(structured))
    for i, part in enumerate(parts):
        if i == dup and not with_structured:
            continue  # the object goes elsewhere (Gemini response): its text twin is not sent again
        block = native(part)
        out.append(describe(part) if block is None else block)
    return out


def joined(result: ToolResult, items: list[Any]) -> str | None:
    """The pieces as one text when they are all text (None when one is a block); an error never empty."""
    if any(not isinstance(i, str) for i in items):
        return None
    text = SEPARATOR.join(items)
    if result.is_error and not text.strip():
        return error_text(result)
    return text
