"""``toolwire.mcp.content_from_result``: MCP tools/call results (the SDK's models or their JSON) as Content, and
a property over any JSON a server may send."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolwire import AudioPart, Content, ImagePart, LinkPart, ResourcePart, TextPart, ToolError
from toolwire.mcp import content_from_result

B64 = base64.b64encode(b"\x00\x01binary").decode()


def test_every_block_kind_maps_to_its_part_in_order():
    """text, image, audio, embedded text and blob resources and a resource link, in order, with structured."""
    content = content_from_result({"content": [
        {"type": "text", "text": "hello"},
        {"type": "image", "data": B64, "mimeType": "image/png"},
        {"type": "audio", "data": B64, "mimeType": "audio/wav"},
        {"type": "resource", "resource": {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "A"}},
        {"type": "resource", "resource": {"uri": "file:///b.bin", "blob": B64}},
        {"type": "resource_link", "uri": "file:///c", "name": "c"},
    ], "structuredContent": {"n": 1}})
    assert content == Content(parts=[
        TextPart(text="hello"), ImagePart(data=B64, mime_type="image/png"),
        AudioPart(data=B64, mime_type="audio/wav"),
        ResourcePart(uri="file:///a.txt", mime_type="text/plain", text="A"),
        ResourcePart(uri="file:///b.bin", blob=B64),
        LinkPart(uri="file:///c", name="c")], structured={"n": 1})


def test_the_sdk_model_maps_like_its_json():
    """A CallToolResult of the MCP SDK gives the same Content as its JSON."""
    types = pytest.importorskip("mcp_types")
    result = types.CallToolResult(content=[types.TextContent(type="text", text="t"),
                                           types.ImageContent(type="image", data=B64, mime_type="image/png")],
                                  structured_content={"k": "v"})
    assert content_from_result(result) == content_from_result(
        {"content": [{"type": "text", "text": "t"}, {"type": "image", "data": B64, "mimeType": "image/png"}],
         "structuredContent": {"k": "v"}})
    with pytest.raises(ToolError):
        content_from_result(types.CallToolResult(content=[types.TextContent(type="text", text="x")], is_error=True))


def test_a_value_that_is_not_a_result_is_a_type_error():
    """content_from_result refuses what is not a result (a list, a number)."""
    for value in ([], 3, "text"):
        with pytest.raises(TypeError):
            content_from_result(value)


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=20)
BLOCK = st.one_of(
    JSON,
    st.fixed_dictionaries({"type": st.sampled_from(["text", "image", "audio", "resource", "resource_link", "x"])},
                          optional={"text": JSON, "data": st.one_of(JSON, st.just(B64)), "mimeType": JSON,
                                    "uri": JSON, "name": JSON, "resource": JSON}))
RESULT = st.fixed_dictionaries({}, optional={"content": st.one_of(JSON, st.lists(BLOCK, max_size=6)),
                                             "structuredContent": JSON, "isError": JSON})


@given(RESULT)
def test_any_json_result_gives_content_a_provider_can_take(result):
    """Whatever JSON a server sends as a result: Content or ToolError(Content), never another exception; binary
    parts always carry valid base64 and every part is one of the documented kinds."""
    try:
        content = content_from_result(result)
    except ToolError as exc:
        content = exc.content
        assert result.get("isError") is True
    assert isinstance(content, Content)
    assert content.structured is None or isinstance(content.structured, dict)
    for part in content.parts:
        assert isinstance(part, (TextPart, ImagePart, AudioPart, ResourcePart, LinkPart))
        if isinstance(part, (ImagePart, AudioPart)):
            base64.b64decode(part.data, validate=True)
        if isinstance(part, ResourcePart) and part.blob is not None:
            base64.b64decode(part.blob, validate=True)
