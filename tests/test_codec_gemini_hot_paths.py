"""The Gemini codec's hot paths give what its general path gives.

``GeminiCodec.hot_paths`` (on by default) lets a payload that is the next ``partialArgs`` fragment of a streamed
call skip the per-response, per-candidate and per-part steps; off, every payload takes the general path. The
streams here are the generated ones of ``test_codec_gemini`` bent in every way that should leave the hot path
(several parts or candidates, a finish, a signature or an id on a continuation, text beside it, bad or clashing
paths, usage that changes, is null or absent, errors, fragments with no call open …), made-up streams of
fragments among everything else a payload can carry, and a table of streams at the hot path's edges: both
settings must give the same events after every chunk, the same Turn and the same replayed message byte for byte. The usage a turn
keeps (decoded only when it changes) and ``read_usage`` are checked against their definitions, the replayed
parts against the parts as sent, and the replay's arguments are its own (editing ``call.args`` leaves it alone).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolwire
from toolwire import StreamParser
from toolwire.codecs.base import count
from toolwire.codecs.gemini import GeminiCodec

from .test_codec_gemini import END, SEPARATOR, array, chunk, encode_sse, fc, gemini_streams, pa, partial, split, \
    start, text

P = "gemini"
USAGES = st.one_of(st.none(), st.just("null"), st.fixed_dictionaries(
    {}, optional={"promptTokenCount": st.integers(0, 3), "candidatesTokenCount": st.integers(0, 3)}))


def _parts(payload: dict) -> list | None:
    cands = payload.get("candidates")
    if not cands or "content" not in cands[0]:
        return None
    return cands[0]["content"]["parts"]


def _fc(payload: dict) -> dict | None:
    parts = _parts(payload)
    return parts[0].get("functionCall") if parts else None


@st.composite
def bent_streams(draw) -> list[dict]:
    """Generated payloads, some of them bent (see the module docstring)."""
    payloads = copy.deepcopy(draw(gemini_streams()).payloads)
    out: list[dict] = []
    for p in payloads:
        how = draw(st.sampled_from(["keep"] * 6 + [
            "merge", "signature", "id", "finish", "text", "index", "second_candidate", "bad_path", "clash",
            "more_args", "no_more", "empty_name", "drop", "error", "start_again", "separator", "end"]))
        f = _fc(p)
        if how == "merge" and out and _parts(out[-1]) is not None and _parts(p) is not None:
            _parts(out[-1]).extend(_parts(p))  # two parts in one payload
            continue
        if how == "signature" and f is not None:
            _parts(p)[0]["thoughtSignature"] = draw(st.sampled_from(["U0lH", "TEFURQ=="]))
        elif how == "id" and f is not None:
            f["id"] = draw(st.sampled_from(["c1", "other"]))
        elif how == "finish":
            p["candidates"][0]["finishReason"] = draw(st.sampled_from(["STOP", "MAX_TOKENS", 1, 9]))
        elif how == "text" and f is not None:
            _parts(p)[0]["text"] = draw(st.sampled_from(["", "hi"]))
        elif how == "index":
            p["candidates"][0]["index"] = draw(st.sampled_from([0, 1]))
        elif how == "second_candidate":
            p["candidates"].append(draw(st.sampled_from([
                {"index": 1, "content": {"role": "model", "parts": [text("other")]}},
                {"index": 1, "content": {"role": "model", "parts": [partial(pa("$.a", "x"))]}},
                {"index": 0, "finishReason": "STOP"}])))
        elif how == "bad_path" and f is not None and f.get("partialArgs"):
            f["partialArgs"][0]["jsonPath"] = draw(st.sampled_from(["$", "a", "$.a[*]", "$[0]"]))
        elif how == "clash" and f is not None and f.get("partialArgs"):
            f["partialArgs"].append({"jsonPath": f["partialArgs"][0]["jsonPath"], "numberValue": 1})
        elif how == "more_args" and f is not None and f.get("partialArgs"):
            f["partialArgs"].append(draw(st.sampled_from([
                pa("$.zz", "s", more=True), pa("$.zz", 2), {"jsonPath": "$.zz"}, pa("$.zz", None)])))
        elif how == "no_more" and f is not None:
            f.pop("willContinue", None)
        elif how == "empty_name" and f is not None and "name" not in f:
            f["name"] = ""
        elif how == "drop":
            continue
        elif how == "error":
            out.append({"error": {"code": 500, "message": "boom", "status": "INTERNAL"}})
        elif how == "start_again":
            out.append(chunk(start("g", id=draw(st.sampled_from([None, "c1"])))))
        elif how == "separator":
            out.append(chunk(SEPARATOR))
        elif how == "end":
            out.append(chunk(END))
        usage = draw(USAGES)
        if usage == "null":
            p["usageMetadata"] = None
        elif usage is not None:
            p["usageMetadata"] = usage
        if draw(st.booleans()):
            p.update(responseId="r1", modelVersion="gemini-3")
        out.append(p)
    return out or [chunk(text("hi"))]


PATHS = ("$.a", "$.b", "$.c[0]", "$.c[1]", "$['x y']", "$.d.e")
PIECE = st.sampled_from(["", "x", "yz", "é✓", "\\n"])


@st.composite
def _part(draw, last: list[str]) -> dict:
    """One part of a made-up stream: mostly the next fragment of the string being streamed."""
    kind = draw(st.sampled_from(["frag"] * 6 + ["frag_last"] * 3 + ["value", "multi", "no_value", "separator",
                                                                     "end", "start", "whole", "text", "signed",
                                                                     "with_id", "named"]))
    path = last[0] if draw(st.integers(0, 9)) < 7 else draw(st.sampled_from(PATHS))
    last[0] = path
    if kind == "frag":
        return partial(pa(path, draw(PIECE), more=True))
    if kind == "frag_last":
        return partial(pa(path, draw(PIECE)), more=draw(st.booleans()))
    if kind == "value":
        return partial(pa(draw(st.sampled_from(PATHS)), draw(st.sampled_from([1, 2.5, True, None]))),
                       more=draw(st.booleans()))
    if kind == "multi":
        return partial(pa(path, draw(PIECE), more=True), pa(draw(st.sampled_from(PATHS)), 3))
    if kind == "no_value":
        return partial({"jsonPath": draw(st.sampled_from(PATHS + ("$", "$[0]")))})
    if kind == "separator":
        return copy.deepcopy(SEPARATOR)
    if kind == "end":
        return copy.deepcopy(END)
    if kind == "start":
        return start("f", id=draw(st.sampled_from([None, "c1", "c2"])), sig=draw(st.sampled_from([None, "U0lH"])))
    if kind == "whole":
        return fc("g", {"k": 1}, id=draw(st.sampled_from([None, "c3"])))
    if kind == "text":
        return text(draw(st.sampled_from(["", "t"])), sig=draw(st.sampled_from([None, "U0lH"])))
    part = partial(pa(path, draw(PIECE), more=True))
    if kind == "signed":
        part["thoughtSignature"] = "TEFURQ=="
    elif kind == "with_id":
        part["functionCall"]["id"] = draw(st.sampled_from(["c1", "c9"]))
    else:
        part["functionCall"]["name"] = draw(st.sampled_from(["", "h"]))
    return part


@st.composite
def made_up_streams(draw) -> list[dict]:
    """A streamed call's fragments among everything else a payload can carry, in any order."""
    last = [draw(st.sampled_from(PATHS))]
    payloads = [chunk(start("f", id="c1"))]
    for _ in range(draw(st.integers(0, 12))):
        parts = [draw(_part(last)) for _ in range(1 if draw(st.integers(0, 9)) else 2)]
        p = chunk(*parts, index=draw(st.sampled_from([None] * 6 + [0, 1])))
        if not draw(st.integers(0, 15)):
            p["candidates"][0]["finishReason"] = draw(st.sampled_from(["STOP", "MAX_TOKENS"]))
        usage = draw(USAGES)
        if usage is not None:
            p["usageMetadata"] = None if usage == "null" else usage
        if not draw(st.integers(0, 5)):
            p.update(responseId="r1", modelVersion="gemini-3")
        payloads.append(p)
    if draw(st.booleans()):
        payloads.append(chunk(text(""), finish="STOP"))
    return payloads


def _run(chunks: list[bytes], hot: bool, fmt: str) -> tuple[list, Any, bytes, bytes]:
    parser = StreamParser(P, format=fmt)
    parser._codec.hot_paths = hot
    events = [parser.feed(c) for c in chunks]
    events.append(parser.close())
    turn = parser.turn
    choices = msgspec.json.encode([c.assistant_message for c in turn.choices])
    return events, turn, msgspec.json.encode(turn.assistant_message), choices


@given(st.one_of(bent_streams(), made_up_streams()), st.lists(st.integers(min_value=0, max_value=100_000),
                                                                max_size=8))
def test_hot_paths_give_what_the_general_path_gives(payloads, cuts):
    """SSE split anywhere and the streamed JSON array: same events per chunk, Turn and replay bytes."""
    data, _ = encode_sse(payloads)
    for chunks, fmt in ((split(data, cuts), "sse"), (split(array(*payloads), cuts), "auto")):
        assert _run(chunks, True, fmt) == _run(chunks, False, fmt)


def _frag(path: str, value: Any, more: bool = True, **extra: Any) -> dict:
    part = partial(pa(path, value, more=isinstance(value, str)), more=more)
    part["functionCall"].update(extra)
    return part


STOP = chunk(text(""), finish="STOP")
#: streams whose fragments sit right at the edge of the hot path: each either takes it or must not
EDGES = {
    "more_after_a_last_part": [chunk(start("f")), chunk(_frag("$.a", "x", more=False)), chunk(_frag("$.a", "y")),
                               STOP],
    "number_on_the_strings_path": [chunk(start("f")), chunk(_frag("$.a", "x")), chunk(_frag("$.a", 1)), STOP],
    "no_value_on_the_strings_path": [chunk(start("f")), chunk(_frag("$.a", "x")),
                                     chunk(partial({"jsonPath": "$.a"})), chunk(END), STOP],
    "model_first_on_a_fragment": [chunk(start("f")), chunk(_frag("$.a", "x")),
                                  chunk(_frag("$.a", "y"), responseId="r", modelVersion="m"), chunk(END), STOP],
    "usage_changes_on_fragments": [chunk(start("f"), usageMetadata={"promptTokenCount": 1}),
                                   chunk(_frag("$.a", "x"), usageMetadata={"promptTokenCount": 1}),
                                   chunk(_frag("$.a", "y"), usageMetadata=None),
                                   chunk(_frag("$.a", "z"), usageMetadata={"promptTokenCount": 2}), chunk(END), STOP],
    "signature_on_a_fragment": [chunk(start("f")), chunk(_frag("$.a", "x")),
                                chunk({**_frag("$.a", "y"), "thoughtSignature": "U0lH"}), chunk(END), STOP],
    "id_on_a_fragment": [chunk(start("f", id="c1")), chunk(_frag("$.a", "x")), chunk(_frag("$.a", "y", id="c2")),
                         chunk(END), STOP],
    "empty_name_on_a_fragment": [chunk(start("f")), chunk(_frag("$.a", "x")), chunk(_frag("$.a", "y", name="")),
                                 chunk(END), STOP],
    "finish_on_a_fragment": [chunk(start("f")), chunk(_frag("$.a", "x")), chunk(_frag("$.a", "y"), finish="STOP")],
    "two_arguments_in_a_fragment": [chunk(start("f")), chunk(_frag("$.a", "x")),
                                    chunk(partial(pa("$.a", "y", more=True), pa("$.a", "z"))), chunk(END), STOP],
    "text_beside_a_fragment": [chunk(start("f")), chunk(_frag("$.a", "x")), chunk({**_frag("$.a", "y"), "text": "t"}),
                               chunk(END), STOP],
    "fragment_for_another_candidate": [chunk(start("f")), chunk(_frag("$.a", "x")),
                                       chunk(_frag("$.a", "y"), index=1), chunk(END), STOP],
    "two_candidates": [chunk(start("f")), chunk(_frag("$.a", "x")),
                       {"candidates": [chunk(_frag("$.a", "y"))["candidates"][0], {"index": 1, "finishReason": "STOP"}]},
                       chunk(END), STOP],
    "two_parts": [chunk(start("f")), chunk(_frag("$.a", "x")), chunk(_frag("$.a", "y"), _frag("$.a", "z")),
                  chunk(END), STOP],
    "error_beside_a_fragment": [chunk(start("f")), chunk(_frag("$.a", "x")), {**chunk(_frag("$.a", "y")),
                                                                              "error": {"message": "boom"}}],
    "no_call_open": [chunk(_frag("$.a", "x")), STOP],
    "bad_path": [chunk(start("f")), chunk(_frag("$.a", "x")), chunk(_frag("$[0]", "y")), STOP],
    "after_the_end_marker": [chunk(start("f")), chunk(_frag("$.a", "x")), chunk(END), chunk(_frag("$.a", "y")), STOP],
}


@pytest.mark.parametrize("name", EDGES)
def test_hot_paths_at_their_edges(name):
    """Each stream at the edge of the hot path gives the same with and without it, whole and byte by byte."""
    data, _ = encode_sse(EDGES[name])
    for chunks, fmt in (([data], "sse"), ([data[i:i + 1] for i in range(len(data))], "sse"),
                        ([array(*EDGES[name])], "auto")):
        assert _run(chunks, True, fmt) == _run(chunks, False, fmt)


def test_hot_paths_are_taken_by_a_streamed_call():
    """The fragments of a streamed call take the hot path (the general path is not called for them)."""
    payloads = [chunk(start("f", id="c1")), *[chunk(partial(pa("$.a", s, more=True))) for s in "abc"],
                chunk(partial(pa("$.b", 1))), chunk(END), chunk(text(""), finish="STOP")]
    seen: list[int] = []

    class Counting(GeminiCodec):
        def _response(self, resp, data, ri):
            seen.append(1)
            return super()._response(resp, data, ri)

    codec = Counting()
    codec.feed_payloads([json.dumps(p).encode() for p in payloads], False)
    codec.on_close()
    assert len(seen) == 3  # the start, the end marker and the finish; every fragment took the hot path
    (call,) = codec.asm.records
    assert call.args == {"a": "abc", "b": 1}


@given(st.lists(USAGES, min_size=1, max_size=6))
def test_the_turn_keeps_the_last_usage_that_says_something(usages):
    """Usage decoded only when it changes is still the last non-null usageMetadata of the stream, whatever
    repeats, changes back or is null in between; a turn without one has none."""
    payloads = []
    for n, usage in enumerate(usages):
        p = chunk(text(str(n)), finish="STOP" if n == len(usages) - 1 else None)
        if usage is not None:
            p["usageMetadata"] = None if usage == "null" else usage
        payloads.append(p)
    expected = None
    for usage in usages:
        if usage is not None and usage != "null":
            expected = usage
    data, _ = encode_sse(payloads)
    turn = toolwire.parse(P, data)
    assert turn.usage == expected
    assert toolwire.parse(P, array(*payloads)).usage == expected


def test_a_null_usage_alone_is_not_a_known_field():
    """A payload whose only field is a null usageMetadata says nothing (as with no field at all)."""
    turn = toolwire.parse(P, b'data: {"usageMetadata": null}\r\n\r\n')
    assert turn.error.type == "no_payload"


COUNT = st.one_of(st.integers(-2, 5), st.integers(2**63 - 3, 2**64), st.booleans(), st.floats(0, 3),
                  st.text(max_size=2), st.none())
USAGE_KEYS = ("promptTokenCount", "toolUsePromptTokenCount", "candidatesTokenCount", "thoughtsTokenCount",
              "cachedContentTokenCount", "totalTokenCount")


@given(st.dictionaries(st.sampled_from(USAGE_KEYS), COUNT))
def test_read_usage_is_the_sum_of_the_counts(raw):
    """``read_usage`` reads each count as ``count`` does (sums capped, non-counts absent)."""
    prompt = count(raw, "promptTokenCount")
    assert GeminiCodec.read_usage(raw) == toolwire.TokenUsage(
        input_tokens=None if prompt is None else count(raw, "promptTokenCount", "toolUsePromptTokenCount"),
        output_tokens=count(raw, "candidatesTokenCount", "thoughtsTokenCount"),
        cache_read_input_tokens=count(raw, "cachedContentTokenCount"),
        reasoning_output_tokens=count(raw, "thoughtsTokenCount"))


def test_replay_parts_are_the_parts_as_they_arrived():
    """The replayed parts are the parts' JSON as sent (every key, in its order), from SSE and from an array
    body; a streamed call is the whole part it stands for."""
    odd = {"thoughtSignature": "U0lH", "functionCall": {"args": {"z": 1, "a": [1, {"y": None}]}, "name": "f",
                                                        "id": "c1", "extra": True}, "zzz": {"k": 1}}
    payloads = [chunk(text("a", thought=True), odd, index=0, usageMetadata={"promptTokenCount": 1}),
                chunk(start("g")), chunk(partial(pa("$.q", "x", more=True))), chunk(partial(pa("$.q", "y"))),
                chunk(END), chunk(fc("h", {"b": 2}), finish="STOP")]
    expected = msgspec.json.encode({"role": "model", "parts": [
        text("a", thought=True), odd, {"functionCall": {"name": "g", "args": {"q": "xy"}}}, fc("h", {"b": 2})]})
    data, _ = encode_sse(payloads)
    for turn in (toolwire.parse(P, data), toolwire.parse(P, array(*payloads)),
                 toolwire.parse(P, array(*payloads), format="json")):
        assert msgspec.json.encode(turn.assistant_message) == expected


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_editing_call_args_never_changes_the_replay(streamed):
    """The replayed functionCall's args are the replay's own, for a whole call and for one streamed as
    partialArgs (whose replay was once the call's own dict), in the turn's message and in each choice's."""
    if streamed:
        payloads = [chunk(start("f", id="c1")), chunk(partial(pa("$.a", "x", more=True))),
                    chunk(partial(pa("$.a", "y"), pa("$.b", 1))), chunk(END),
                    {"candidates": [chunk(text(""), finish="STOP")["candidates"][0], {"index": 1, "finishReason": "STOP"}]}]
    else:
        payloads = [{"candidates": [chunk(fc("f", {"a": "xy", "b": 1}, id="c1"), finish="STOP")["candidates"][0],
                                    {"index": 1, "finishReason": "STOP"}]}]
    turn = toolwire.parse(P, encode_sse(payloads)[0])
    replayed = {"functionCall": {"name": "f", "id": "c1", "args": {"a": "xy", "b": 1}}}
    assert turn.assistant_message["parts"] == [replayed]
    turn.calls[0].args["a"] = "edited"
    turn.assistant_message["parts"][0]["functionCall"]["args"]["b"] = 2
    assert turn.calls[0].args == {"a": "edited", "b": 1}
    assert turn.choices[0].assistant_message["parts"] == [replayed]
    assert toolwire.encode_results(turn, [])[0]["parts"][0]["functionResponse"]["name"] == "f"


def _refused(message: str) -> bool:
    """The payload was refused as a whole: a value that does not decode, or bytes that are not UTF-8 at all."""
    return "payload could not be decoded" in message or "payload is not UTF-8" in message


BAD_USAGE = [b'{"promptTokenCount": 1e999}', b'{"promptTokenCount": "\xff"}']


@pytest.mark.parametrize("usage", BAD_USAGE, ids=["number_out_of_range", "not_utf8"])
@pytest.mark.parametrize("fragment", [False, True], ids=["whole_call", "fragment"])
def test_a_usage_that_does_not_decode_refuses_its_payload(usage, fragment):
    """A usageMetadata that does not decode (decoded apart from the payload, and only when it changes) still
    refuses its whole payload before anything in it is read, as when it was decoded with the payload: a protocol
    error saying so, the usage before it kept, nothing of the payload applied; whole and in an array body."""
    first = json.dumps(chunk(start("f", id="c1"), usageMetadata={"promptTokenCount": 1})).encode()
    second = chunk(_frag("$.a", "x")) if fragment else chunk(fc("g", {"b": 1}, id="c2"), finish="STOP")
    body = json.dumps(second).encode()[:-1] + b', "usageMetadata": ' + usage + b"}"
    for data in (b"data: " + first + b"\r\n\r\ndata: " + body + b"\r\n\r\n", b"[" + first + b",\n" + body + b"]"):
        turn = toolwire.parse(P, data)
        assert turn.error.type == "protocol_error" and _refused(turn.error.message)
        assert turn.usage == {"promptTokenCount": 1}
        assert [(c.call_id, c.raw_arguments) for c in turn.calls] == [("c1", "")]
    whole = toolwire.parse(P, b"[" + first + b",\n" + body + b"]", format="json")
    assert whole.error.type == "protocol_error" and _refused(whole.error.message)
    assert whole.usage is None and whole.calls == []


def test_a_payload_whose_skipped_fields_do_not_decode_still_has_its_replay():
    """The replay reads only the parts of each payload again: a field the codec skips but JSON values cannot hold
    (a number out of range) changes nothing, as in the other dialects (the turn replays its part, its call runs)."""
    data = b'data: ' + json.dumps(chunk(fc("f", {"a": 1}), finish="STOP")).encode()[:-1] + b', "x": 1e999}\r\n\r\n'
    turn = toolwire.parse(P, data)
    assert [c.name for c in turn.runnable_calls] == ["f"] and turn.error is None
    assert turn.assistant_message == {"role": "model", "parts": [fc("f", {"a": 1})]}
