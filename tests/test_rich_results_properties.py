"""Hypothesis: whatever ``Content`` a handler answers with (returned, or raised in a ``ToolError``), the call is
answered with typed parts whose encoding in every dialect the official SDKs' request types accept, within the
size cap and with only valid base64, or it is answered ``result_unusable``; never an exception."""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

import msgspec
from hypothesis import event, given, strategies as st

import toolwire
from toolwire import (
    AudioPart,
    Content,
    Dispatcher,
    ImagePart,
    LinkPart,
    Registry,
    ResourcePart,
    ResultKind,
    TextPart,
    Tool,
    ToolError,
)

from .bodies import PROVIDERS
from .rich import turn_of
from .test_results_encoding import check_sdk

K = ResultKind
TURNS = {p: turn_of(p, ("answer", {"n": 1})) for p in PROVIDERS}

# anything a handler might put in a part, and (eight times as likely) what is valid
TEXT = st.one_of(st.text(max_size=40), st.text(st.characters(blacklist_categories=()), max_size=8))
GOOD_TEXT = st.text(max_size=60)
GOOD_BASE64 = st.binary(min_size=1, max_size=700).map(lambda b: base64.b64encode(b).decode())
BASE64 = st.one_of(GOOD_BASE64, st.just(""), st.text(max_size=12),
                   st.binary(min_size=1, max_size=32).map(lambda b: base64.b64encode(b).decode().rstrip("=")))
IMAGES = ["image/png", "image/jpeg", "image/jpg", "image/gif", "image/webp", "image/heic", "image/svg+xml"]
AUDIO = ["audio/wav", "audio/mpeg", "audio/x-unknown"]
OTHER = ["application/pdf", "application/zip", "text/plain", "text/markdown", "video/mp4"]
MIME = st.one_of(st.sampled_from(IMAGES + AUDIO + OTHER), st.text(max_size=12))
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                               max_size=3), max_leaves=8)
ANY_PART = st.one_of(
    st.builds(TextPart, text=TEXT),
    st.builds(ImagePart, data=BASE64, mime_type=MIME),
    st.builds(AudioPart, data=BASE64, mime_type=MIME),
    st.builds(ResourcePart, uri=TEXT, mime_type=st.none() | MIME, text=st.none() | TEXT, blob=st.none() | BASE64),
    st.builds(LinkPart, uri=TEXT, name=st.none() | TEXT, description=st.none() | TEXT,
              mime_type=st.none() | MIME),
)
URI = st.text(min_size=1, max_size=30)
GOOD_PART = st.one_of(
    st.builds(TextPart, text=GOOD_TEXT),
    st.builds(ImagePart, data=GOOD_BASE64, mime_type=st.sampled_from(IMAGES)),
    st.builds(AudioPart, data=GOOD_BASE64, mime_type=st.sampled_from(AUDIO)),
    st.builds(ResourcePart, uri=URI, mime_type=st.none() | st.sampled_from(OTHER + IMAGES), text=GOOD_TEXT),
    st.builds(ResourcePart, uri=URI, mime_type=st.none() | st.sampled_from(OTHER + IMAGES + AUDIO),
              blob=GOOD_BASE64),
    st.builds(LinkPart, uri=URI, name=st.none() | GOOD_TEXT, description=st.none() | GOOD_TEXT,
              mime_type=st.none() | st.sampled_from(OTHER)),
)
PART = st.one_of(*[GOOD_PART] * 8, ANY_PART)
OBJECT = st.dictionaries(st.text(max_size=8), JSON, max_size=4)
STRUCTURED = st.one_of(st.none(), st.none(), OBJECT, OBJECT, JSON)


@st.composite
def contents(draw: Any) -> Content:
    """A Content; sometimes with a text part that repeats its structured JSON (as MCP servers send it)."""
    parts = draw(st.lists(PART, max_size=6))
    structured = draw(STRUCTURED)
    if isinstance(structured, dict) and draw(st.booleans()):
        parts.insert(draw(st.integers(0, len(parts))), TextPart(text=json.dumps(structured)))
    return Content(parts=parts, structured=structured)


CONTENT = contents()

#: fields of an encoded result that are structure (tags, ids, names, MIME types), not what the handler answered
_STRUCTURAL = {"type", "role", "tool_call_id", "tool_use_id", "call_id", "id", "name", "media_type", "mimeType",
               "mime_type", "is_error"}


def _payload(value: Any, key: str | None = None) -> int:
    """UTF-8 bytes of the answer's own strings in an encoded result (JSON objects counted as their JSON)."""
    if key in _STRUCTURAL:
        return 0
    if isinstance(value, str):
        return len(value.encode("utf-8", "replace"))
    if isinstance(value, list):
        return sum(_payload(v) for v in value)
    if isinstance(value, dict):
        if key in ("output", "error", "result") and not {"type"} & set(value):
            return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "replace"))
        return sum(_payload(v, k) for k, v in value.items())
    return 0


def _base64_fields(encoded: Any) -> list[str]:
    wire = json.dumps(encoded)
    return re.findall(r'"(?:data|file_data|image_url)": "(?:data:[^;"]+;base64,)?([^"]*)"', wire)


@given(content=CONTENT, raised=st.booleans(), limit=st.sampled_from([256, 1024, 4096, 1 << 20]))
def test_any_content_is_sent_within_the_sdk_types_or_answered_result_unusable(content, raised, limit):
    """Generated Content: result_unusable, or typed parts that encode to SDK-valid messages in every dialect,
    within the cap, every base64 payload decoding."""
    def answer(n: int) -> Any:
        """Answer."""
        if raised:
            raise ToolError(content)
        return content

    dispatcher = Dispatcher(Registry([Tool.from_function(answer, effect="read")]), max_result_bytes=limit,
                            read_retries=0)
    [result] = dispatcher.run(TURNS["anthropic"], conversation_id="c")
    event(f"{result.kind.value}, {len(result.parts or ())} parts")
    if result.kind is K.RESULT_UNUSABLE:
        assert result.parts is None and isinstance(result.content, str)
        return
    assert result.kind is (K.TOOL_ERROR if raised else K.OK)
    assert isinstance(result.parts, list)
    assert all(isinstance(p, (TextPart, ImagePart, AudioPart, ResourcePart, LinkPart)) for p in result.parts)
    # typed parts survive the ledgers' encoding
    assert msgspec.json.decode(msgspec.json.encode(result), type=toolwire.ToolResult).parts == result.parts
    for provider, turn in TURNS.items():
        [call] = turn.calls
        mine = msgspec.structs.replace(result, call_id=call.call_id, local_id=call.local_id, name=call.name)
        encoded = toolwire.encode_results(turn, [mine])
        for message in encoded:
            check_sdk(provider, message)
        for data in _base64_fields(encoded):
            binascii.a2b_base64(data, strict_mode=True)
        assert _payload(encoded) <= limit + 64, provider
