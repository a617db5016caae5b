"""Shared pieces of the rich-result tests: small media in base64, one ``Content`` per part kind, a tool whose
handler answers with them, and readers that find what an encoded answer carries natively."""

from __future__ import annotations

import base64
import json
from typing import Any

import toolwire
from toolwire import AudioPart, Content, ImagePart, LinkPart, ResourcePart, TextPart

from .bodies import body

#: a 1×1 transparent PNG
PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")
#: the first bytes of a JPEG (JFIF header and end marker): what the providers read its type from
JPEG = base64.b64encode(b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00\xff\xd9").decode()
WAV = base64.b64encode(b"RIFF$\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00D\xac\x00\x00\x88X\x01\x00"
                       b"\x02\x00\x10\x00data\x00\x00\x00\x00").decode()
PDF = base64.b64encode(b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n").decode()
ZIP = base64.b64encode(b"PK\x05\x06" + b"\x00" * 18).decode()
STRUCTURED = {"city": "Paris", "temp_c": 21}

#: one Content per kind of answer, by name (the handler's ``kind`` argument picks one)
CONTENTS: dict[str, Content] = {
    "text": Content(parts=[TextPart(text="Sunny, 21 °C.")]),
    "image": Content(parts=[TextPart(text="The radar map:"), ImagePart(data=PNG, mime_type="image/png")]),
    "audio": Content(parts=[AudioPart(data=WAV, mime_type="audio/wav")]),
    "resource_text": Content(parts=[ResourcePart(uri="file:///notes.md", mime_type="text/markdown",
                                                 text="# Notes\nbring an umbrella")]),
    "resource_pdf": Content(parts=[ResourcePart(uri="file:///report.pdf", mime_type="application/pdf", blob=PDF)]),
    "resource_blob": Content(parts=[ResourcePart(uri="file:///archive.zip", mime_type="application/zip",
                                                 blob=ZIP)]),
    "link": Content(parts=[LinkPart(uri="https://example.com/forecast", name="forecast",
                                    description="the week's forecast", mime_type="text/html")]),
    "structured": Content(structured=STRUCTURED),
    "structured_twin": Content(parts=[TextPart(text=json.dumps(STRUCTURED))], structured=STRUCTURED),
    "mixed": Content(parts=[TextPart(text="Here:"), ImagePart(data=JPEG, mime_type="image/jpeg"),
                            AudioPart(data=WAV, mime_type="audio/wav"),
                            ResourcePart(uri="file:///report.pdf", mime_type="application/pdf", blob=PDF),
                            LinkPart(uri="https://example.com/x")], structured=STRUCTURED),
}

#: the (MIME type, base64) pairs each dialect carries natively for each Content above
_IMAGE = [("image/png", PNG)]
_PDF = [("application/pdf", PDF)]
class _Native(dict):
    """``NATIVE[dialect][kind]``; a dialect not written out below gets its entry from its test adapter's
    ``native_types``: the (MIME type, base64) of each part of the kind's Content whose type it carries natively."""

    def __missing__(self, provider: str) -> dict[str, list[tuple[str, str]]]:
        from .dialects import adapter

        types = adapter(provider).native_types
        out: dict[str, list[tuple[str, str]]] = {}
        for kind, content in CONTENTS.items():
            found = []
            for part in content.parts or ():
                data = part.data if isinstance(part, (ImagePart, AudioPart)) else getattr(part, "blob", None)
                if data is not None and part.mime_type in types:
                    found.append((part.mime_type, data))
            if found:
                out[kind] = found
        return out


NATIVE: dict[str, dict[str, list[tuple[str, str]]]] = _Native({
    "openai-chat": {},
    "openai-responses": {"image": _IMAGE, "resource_pdf": _PDF, "mixed": [("image/jpeg", JPEG)] + _PDF},
    "anthropic": {"image": _IMAGE, "resource_pdf": _PDF, "mixed": [("image/jpeg", JPEG)] + _PDF},
    "gemini": {"image": _IMAGE, "resource_pdf": _PDF, "mixed": [("image/jpeg", JPEG)] + _PDF},
    "gemini-interactions": {"image": _IMAGE, "audio": [("audio/wav", WAV)], "resource_pdf": _PDF,
                            "mixed": [("image/jpeg", JPEG), ("audio/wav", WAV)] + _PDF},
})


def turn_of(provider: str, *calls: tuple[str, dict[str, Any]]) -> toolwire.Turn:
    """A whole response of ``provider`` with these ``(name, args)`` calls (ids ``call_0``, ``call_1`` …)."""
    return toolwire.parse(provider, body(provider, [(f"call_{i}", name, args) for i, (name, args) in
                                                    enumerate(calls)]))


def media_of(provider: str, encoded: list[Any]) -> list[tuple[str, str]]:
    """Every (MIME type, base64) an encoded answer carries as a native block, in order."""
    out: list[tuple[str, str]] = []

    def data_url(url: str) -> tuple[str, str]:
        head, data = url.split(",", 1)
        assert head.startswith("data:") and head.endswith(";base64")
        return head[5:-7], data

    for message in encoded:
        if provider == "anthropic":
            for block in message["content"]:
                content = block["content"]
                for item in content if isinstance(content, list) else ():
                    if item["type"] in ("image", "document"):
                        out.append((item["source"]["media_type"], item["source"]["data"]))
        elif provider == "openai-responses":
            output = message.get("output")
            for item in output if isinstance(output, list) else ():
                if item["type"] == "input_image":
                    out.append(data_url(item["image_url"]))
                elif item["type"] == "input_file":
                    out.append(data_url(item["file_data"]))
        elif provider == "gemini":
            for part in message["parts"]:
                for media in part["functionResponse"].get("parts", ()):
                    out.append((media["inlineData"]["mimeType"], media["inlineData"]["data"]))
        elif provider == "gemini-interactions":
            result = message["result"]
            for item in result if isinstance(result, list) else ():
                if item["type"] != "text":
                    out.append((item["mime_type"], item["data"]))
        elif provider == "openai-chat":
            assert isinstance(message["content"], str)
        else:  # a dialect not written out here: its test adapter reads its answer
            from .dialects import adapter

            out += adapter(provider).media_of(message)
    return out


def texts_of(provider: str, encoded: list[Any]) -> str:
    """All the text an encoded answer carries (text blocks and strings), joined, for substring checks."""
    return json.dumps(encoded, ensure_ascii=False)
