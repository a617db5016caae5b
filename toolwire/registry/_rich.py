"""Rich answers (``Content``): what counts as one, the checks it must pass, its text form, the words that stand
for a part a wire cannot carry, and the cap on its size.

A handler answers with ``Content`` by returning (or raising in a ``ToolError``) a ``Content``, one part, or a
non-empty list of parts. ``checked`` returns a validated copy or raises ``Unusable`` with a reason that quotes no
value: a part of the wrong type, text that UTF-8 cannot encode, base64 that does not decode (standard alphabet,
padded, no white space), an ``ImagePart`` whose MIME type is not ``image/*`` (``AudioPart``: ``audio/*``), a
``ResourcePart`` without exactly one of ``text`` and ``blob``, an empty ``uri``, a ``structured`` value that is not
a JSON object.

The type of media a provider decodes (images, PDF documents) is read from their first bytes: providers refuse an
image whose bytes are of another type than its MIME type says (Anthropic, in every later request of the
conversation), so an image (or an image or PDF blob) whose bytes are of a known type (``sniffed``) takes that type.
Bytes of no known type keep their label; the encoders describe them in words instead of sending them as media.

Sizes: every part has a *cost*, the most bytes of text it can put on any wire: a text's UTF-8 length, a media
part's base64 length plus the words that describe it (a wire that cannot carry the part sends those words), and
so on; ``structured`` costs its JSON length. ``capped`` keeps a ``Content`` whose costs add up to more than the
limit within it: parts are kept whole in order while they fit, the first text that does not fit is cut (at a
character boundary), parts that do not fit are left out (base64 is never cut), and one marker says what happened.
"""

from __future__ import annotations

import binascii
import re
from collections import Counter
from typing import Any

import msgspec

from .content import AudioPart, Content, ImagePart, LinkPart, Part, ResourcePart, TextPart

__all__ = ["Unusable", "as_content", "checked", "capped", "describe", "resource_text", "json_form", "text_form",
           "structured_text_part", "decoded_size", "sniffed", "decoded", "PDF", "SEPARATOR"]

#: what joins the text of consecutive parts where a wire takes one string
SEPARATOR = "\n\n"
_PARTS = (TextPart, ImagePart, AudioPart, ResourcePart, LinkPart)
_MIME = re.compile(r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}")
_content_decoder = msgspec.json.Decoder(Content)
#: room kept for the marker of a capped answer (the marker is shorter than this, whatever the numbers)
_MARKER_ROOM = 320


class Unusable(Exception):
    """A ``Content`` that cannot be sent; ``reason`` says why without quoting any value."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def as_content(value: Any) -> Content | None:
    """``value`` as ``Content`` when it is one, a part, or a non-empty list or tuple of parts; else None."""
    if isinstance(value, Content):
        return value
    if isinstance(value, _PARTS):
        return Content(parts=[value])
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, _PARTS) for v in value):
        return Content(parts=list(value))
    return None


def _base64(data: str, where: str, *, empty: bool = False) -> None:
    if not data and not empty:
        raise Unusable(f"{where} is empty")
    if isinstance(data, str) and data[:5].lower() == "data:":
        raise Unusable(f"{where} is a data URL: give the base64 after the comma, and the type as mime_type")
    try:
        binascii.a2b_base64(data, strict_mode=True)
    except (ValueError, TypeError):
        raise Unusable(f"{where} is not valid base64 (standard alphabet, padded, no white space)") from None


def _mime(mime: str | None, where: str, family: str | None = None) -> None:
    if mime is None:
        if family is not None:
            raise Unusable(f"{where} has no MIME type")
        return
    if not _MIME.fullmatch(mime):
        raise Unusable(f"{where} has a MIME type that is not of the form type/subtype")
    if family is not None and mime.split("/", 1)[0].lower() != family:
        raise Unusable(f"{where} has a MIME type that is not {family}/*")


PDF = "application/pdf"
#: the first bytes of the media types a provider reads (and decodes) inside a tool result
_SIGNATURES = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF87a", "image/gif"),
               (b"GIF89a", "image/gif"), (b"%PDF-", PDF), (b"II*\x00", "image/tiff"), (b"MM\x00*", "image/tiff"),
               (b"BM", "image/bmp"))
#: ISO base media brands (``ftyp``) of HEIF images
_BRANDS = {b"heic": "image/heic", b"heix": "image/heic", b"heim": "image/heic", b"heis": "image/heic",
           b"hevc": "image/heic", b"hevx": "image/heic", b"mif1": "image/heif", b"msf1": "image/heif",
           b"avif": "image/avif", b"avis": "image/avif"}


def decoded(mime: str) -> bool:
    """True for a (lower-case) MIME type whose data a provider decodes as what the type says: every image, PDF."""
    return mime.startswith("image/") or mime == PDF


def sniffed(data: str) -> str | None:
    """The media type base64 ``data`` is, read from its first bytes (PNG, JPEG, GIF, WebP, BMP, TIFF, HEIC/HEIF,
    AVIF, PDF), or None when they are none of these."""
    try:
        head = binascii.a2b_base64(data[:24])
    except (ValueError, TypeError):
        return None
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    if head[4:8] == b"ftyp":
        return _BRANDS.get(head[8:12])
    return next((kind for magic, kind in _SIGNATURES if head.startswith(magic)), None)


def _typed(part: Part) -> Part:
    """``part`` with the MIME type its bytes have, when it is an image (or an image or PDF blob) whose first bytes
    say which known type it is and its label says another."""
    if isinstance(part, ImagePart):
        found = sniffed(part.data)
        if found is not None and found.startswith("image/") and found != part.mime_type:
            return msgspec.structs.replace(part, mime_type=found)
    elif isinstance(part, ResourcePart) and part.blob is not None and decoded((part.mime_type or "").lower()):
        found = sniffed(part.blob)
        if found is not None and found != part.mime_type:
            return msgspec.structs.replace(part, mime_type=found)
    return part


def checked(content: Content) -> Content:
    """A validated copy of ``content`` (see the module docstring); raises ``Unusable``."""
    try:
        clean = _content_decoder.decode(msgspec.json.encode(content))
    except UnicodeEncodeError:
        raise Unusable("it holds text that UTF-8 cannot encode (a lone surrogate)") from None
    except msgspec.ValidationError as exc:
        raise Unusable(f"it does not have the shape of Content: {_where(exc)}") from None
    except RecursionError:
        raise Unusable("it is nested too deeply") from None
    except Exception as exc:  # noqa: BLE001 - whatever the value holds, the call gets a typed result
        raise Unusable(f"it holds a value that cannot be encoded as JSON ({type(exc).__name__})") from None
    for i, part in enumerate(clean.parts):
        where = f"part {i} ({type(part).__name__})"
        if isinstance(part, (ImagePart, AudioPart)):
            _mime(part.mime_type, where, "image" if isinstance(part, ImagePart) else "audio")
            _base64(part.data, f"the data of {where}")
        elif isinstance(part, ResourcePart):
            if not part.uri:
                raise Unusable(f"{where} has an empty uri")
            if (part.text is None) == (part.blob is None):
                raise Unusable(f"{where} must have exactly one of text and blob")
            _mime(part.mime_type, where)
            if part.blob is not None:
                _base64(part.blob, f"the blob of {where}", empty=True)
        elif isinstance(part, LinkPart):
            if not part.uri:
                raise Unusable(f"{where} has an empty uri")
            _mime(part.mime_type, where)
    if any(isinstance(p, (ImagePart, ResourcePart)) for p in clean.parts):
        clean = msgspec.structs.replace(clean, parts=[_typed(p) for p in clean.parts])
    return clean


_QUOTED = re.compile(r"'[^']*'")


def _where(exc: msgspec.ValidationError) -> str:
    """A validation error's message (types and the JSON path) without any value it quotes (an unknown tag)."""
    return _QUOTED.sub("'…'", str(exc))[:200]


# ---- sizes and words --------------------------------------------------------------------------------------------
def decoded_size(data: str) -> int:
    """The number of bytes base64 ``data`` stands for."""
    return len(data) // 4 * 3 - data[-2:].count("=") if data else 0


def describe(part: Part) -> str:
    """The words that stand for ``part`` where a wire cannot carry it (never the data itself)."""
    if isinstance(part, ImagePart):
        return f"[image: {part.mime_type}, {decoded_size(part.data)} bytes, returned by the tool but not shown here]"
    if isinstance(part, AudioPart):
        return f"[audio: {part.mime_type}, {decoded_size(part.data)} bytes, returned by the tool but not included here]"
    if isinstance(part, ResourcePart):
        if part.text is not None:
            return resource_text(part)
        return (f"[resource {part.uri}: {part.mime_type or 'binary'}, {decoded_size(part.blob or '')} bytes, "
                "returned by the tool but not included here]")
    if isinstance(part, LinkPart):
        out = f"[resource link: {part.uri}"
        if part.name:
            out += f" ({part.name})"
        if part.mime_type:
            out += f", {part.mime_type}"
        if part.description:
            out += f": {part.description}"
        return out + "]"
    return part.text


def resource_text(part: ResourcePart) -> str:
    """An embedded text resource as text: a header naming it, then its text."""
    mime = f" ({part.mime_type})" if part.mime_type else ""
    return f"[resource {part.uri}{mime}]\n{part.text or ''}"


def _utf8(text: str) -> int:
    return len(text.encode("utf-8"))


def _cost(part: Part) -> int:
    """The most bytes of text ``part`` can put on a wire (native or described), plus a separator."""
    if isinstance(part, TextPart):
        return _utf8(part.text) + len(SEPARATOR)
    words = _utf8(describe(part)) + len(SEPARATOR)
    if isinstance(part, (ImagePart, AudioPart)):
        return words + len(part.data)
    if isinstance(part, ResourcePart) and part.blob is not None:
        return words + len(part.blob)
    return words


def _json(value: Any) -> str:
    return msgspec.json.encode(value).decode("utf-8")


def structured_text_part(content: Content) -> int | None:
    """The index of the text part that already carries ``structured`` (it decodes to the same JSON), or None."""
    if content.structured is None:
        return None
    for i, part in enumerate(content.parts):
        if isinstance(part, TextPart) and part.text.lstrip().startswith("{"):
            try:
                if msgspec.json.decode(part.text) == content.structured:
                    return i
            except (msgspec.DecodeError, RecursionError):
                continue
    return None


def text_form(parts: list[Part]) -> str:
    """The parts as one text: each text as it is, every other part in words (embedded text resources with
    their text)."""
    return SEPARATOR.join(describe(p) for p in parts)


def json_form(content: Content) -> Any:
    """``ToolResult.content`` for a rich answer: ``structured`` when given, else ``text_form`` of the parts."""
    return content.structured if content.structured is not None else text_form(content.parts)


# ---- the cap ----------------------------------------------------------------------------------------------------
def _cut(text: str, room: int) -> str:
    return text.encode("utf-8")[:max(0, room)].decode("utf-8", "ignore")


def capped(content: Content, limit: int) -> tuple[Content, int | None]:
    """``content`` within ``limit`` bytes, and its size when it had to be cut (None when it fitted)."""
    dup = structured_text_part(content)
    s_cost = len(_json(content.structured)) if content.structured is not None else 0
    # the text twin of ``structured`` is sent instead of its JSON where a wire takes text: it costs what it adds
    costs = [max(0, _cost(p) - s_cost) if i == dup else _cost(p) for i, p in enumerate(content.parts)]
    size = s_cost + sum(costs)
    if size <= limit:
        return content, None
    room = limit - _MARKER_ROOM
    structured = content.structured
    parts = list(content.parts)
    if structured is not None:
        if s_cost <= room:
            room -= s_cost
        else:  # the object does not fit: its JSON text is cut like any text, in its place at the front
            text = _json(structured) if dup is None else parts.pop(dup).text  # type: ignore[union-attr]
            costs = [c for i, c in enumerate(costs) if i != dup]
            parts.insert(0, TextPart(text=text))
            costs.insert(0, _cost(parts[0]))
            structured, dup = None, None
    kept: list[Part] = []
    left: Counter[str] = Counter()
    cut = 0
    for i, (part, cost) in enumerate(zip(parts, costs)):
        if cost <= room:
            kept.append(part)
            room -= cost
            continue
        if i == dup:
            continue  # the twin does not fit: ``structured`` says the same, and is sent as text in its place
        if isinstance(part, TextPart) and room > len(SEPARATOR):
            kept.append(TextPart(text=_cut(part.text, room - len(SEPARATOR))))
            room, cut = 0, cut + 1
            continue
        if isinstance(part, ResourcePart) and part.text is not None:
            header = _utf8(resource_text(msgspec.structs.replace(part, text=""))) + len(SEPARATOR)
            if room > header:
                kept.append(msgspec.structs.replace(part, text=_cut(part.text, room - header)))
                room, cut = 0, cut + 1
                continue
        left[_KIND_WORDS[type(part)]] += 1
    kept.append(TextPart(text=_marker(size, limit, left, cut)))
    return Content(parts=kept, structured=structured), size


_KIND_WORDS = {TextPart: "text", ImagePart: "image", AudioPart: "audio", ResourcePart: "resource",
               LinkPart: "link"}


def _marker(size: int, limit: int, left: Counter[str], cut: int) -> str:
    what = ", ".join(f"{n} {kind}" for kind, n in sorted(left.items()))
    out = f"[…truncated by toolwire: the result was {size} bytes and the limit is {limit}"
    if cut:
        out += f"; {cut} text cut short"
    if what:
        out += f"; left out: {what}"
    return out + "]"
