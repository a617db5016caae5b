"""The Gemini generateContent codec: table-driven cases, typed errors for bad input, and properties of
generated streams (SSE with CRLF separators and the progressively streamed JSON array)."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolwire
from toolwire import CallState, FinishReason, ProblemCode
from toolwire.codecs.gemini import JSONPathError, parse_json_path

P = "gemini"


# ---- wire helpers -----------------------------------------------------------------------------------------
def fc(name: str | None = None, args: Any = ..., id: str | None = None, sig: str | None = None,
       **extra: Any) -> dict:
    """A ``functionCall`` part; ``args=...`` leaves the ``args`` key out."""
    call: dict[str, Any] = {}
    if name is not None:
        call["name"] = name
    if args is not ...:
        call["args"] = args
    if id is not None:
        call["id"] = id
    call.update(extra)
    part: dict[str, Any] = {"functionCall": call}
    if sig is not None:
        part["thoughtSignature"] = sig
    return part


def text(t: str, sig: str | None = None, **extra: Any) -> dict:
    part: dict[str, Any] = {"text": t, **extra}
    if sig is not None:
        part["thoughtSignature"] = sig
    return part


def pa(path: str, value: Any, more: bool = False) -> dict:
    """One ``partialArgs`` entry; ``value`` picks the typed field from its Python type."""
    d: dict[str, Any] = {"jsonPath": path}
    if value is None:
        d["nullValue"] = "NULL_VALUE"
    elif isinstance(value, bool):
        d["boolValue"] = value
    elif isinstance(value, (int, float)):
        d["numberValue"] = value
    else:
        d["stringValue"] = value
    if more:
        d["willContinue"] = True
    return d


def partial(*args: dict, more: bool = True) -> dict:
    """A continuation ``functionCall`` part carrying ``partialArgs`` (``more``: functionCall.willContinue)."""
    call: dict[str, Any] = {"partialArgs": list(args)}
    if more:
        call["willContinue"] = True
    return {"functionCall": call}


SEPARATOR = {"functionCall": {"willContinue": True}}
END = {"functionCall": {}}


def start(name: str, id: str | None = None, sig: str | None = None) -> dict:
    return fc(name, id=id, sig=sig, willContinue=True)


def chunk(*parts: dict, finish: str | None = None, index: int | None = None, **extra: Any) -> dict:
    """One ``GenerateContentResponse`` with one candidate holding ``parts``."""
    cand: dict[str, Any] = {}
    if parts:
        cand["content"] = {"role": "model", "parts": copy.deepcopy(list(parts))}
    if finish is not None:
        cand["finishReason"] = finish
    if index is not None:
        cand["index"] = index
    resp: dict[str, Any] = {"candidates": [cand]}
    resp.update(extra)
    return resp


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False)


def sse(*payloads: Any, sep: str = "\r\n") -> bytes:
    """``alt=sse`` bytes: one ``data:`` message per payload, CRLF line ends as Google sends them."""
    return "".join(f"data: {dumps(p)}{sep}{sep}" for p in payloads).encode()


def array(*payloads: Any) -> bytes:
    """The JSON array ``streamGenerateContent`` sends without ``alt=sse`` (``[{…}\\n,{…}\\n]``)."""
    return ("[" + "\n,".join(dumps(p) for p in payloads) + "\n]").encode()


def calls_of(turn):
    return [(c.call_id, c.name, c.args, c.state.value) for c in turn.calls]


# ---- table-driven cases -----------------------------------------------------------------------------------
RECIPE = {"recipe": {"name": "Lasagna", "ingredients": [{"name": "Noodles", "amount": 16},
                                                      {"name": "Ricotta cheese", "fresh": True, "note": None}],
                     "steps": ["Boil", "Bake at 190°C"]},
          "odd key": "x"}

CASES: dict[str, tuple[bytes, list, str | None, FinishReason | None, bool]] = {
    "whole_call": (
        sse(chunk(fc("get_weather", {"city": "Paris"}, id="c1", sig="U0lH"), finish="STOP")),
        [("c1", "get_weather", {"city": "Paris"}, "complete")], "STOP", FinishReason.TOOL_CALLS, True),
    "parallel_calls_signature_on_the_first_only": (
        sse(chunk(fc("get_weather", {"city": "Paris"}, id="c1", sig="U0lH")),
            chunk(fc("get_weather", {"city": "Oslo"}, id="c2")), chunk(text(""), finish="STOP")),
        [("c1", "get_weather", {"city": "Paris"}, "complete"), ("c2", "get_weather", {"city": "Oslo"}, "complete")],
        "STOP", FinishReason.TOOL_CALLS, True),
    "signature_on_a_later_empty_part": (
        sse(chunk(fc("a", {"x": 1})), chunk(fc("b", {"y": 2})), chunk(text("", sig="TEFURQ=="), finish="STOP")),
        [(None, "a", {"x": 1}, "complete"), (None, "b", {"y": 2}, "complete")], "STOP", FinishReason.TOOL_CALLS,
        True),
    "calls_without_ids": (
        sse(chunk(fc("read_theme")), chunk(fc("read_screen", {"id": "A"})), chunk(finish="STOP")),
        [(None, "read_theme", {}, "complete"), (None, "read_screen", {"id": "A"}, "complete")], "STOP",
        FinishReason.TOOL_CALLS, True),
    "args_as_a_json_string_and_null_args": (
        sse(chunk(fc("f", '{"a": 1}', id="c1"), fc("g", None, id="c2"), finish="STOP")),
        [("c1", "f", {"a": 1}, "complete"), ("c2", "g", {}, "complete")], "STOP", FinishReason.TOOL_CALLS, True),
    "streamed_partial_args_nested_paths_and_arrays": (
        sse(chunk(start("cookRecipe", sig="U0lH")),
            chunk(partial(pa("$.recipe.name", "Las", more=True))), chunk(partial(pa("$.recipe.name", "agna"))),
            chunk(partial(pa("$.recipe.ingredients[0].name", "Noodles"), pa("$.recipe.ingredients[0].amount", 16))),
            chunk(SEPARATOR),
            chunk(partial(pa("$.recipe.ingredients[1].name", "Ricotta ", more=True))),
            chunk(partial(pa("$.recipe.ingredients[1].name", "cheese"))),
            chunk(partial(pa("$.recipe.ingredients[1].fresh", True), pa("$.recipe.ingredients[1].note", None))),
            chunk(partial(pa("$.recipe.steps[0]", "Boil"), pa("$.recipe.steps[1]", "Bake at 190°C"))),
            chunk(partial(pa("$['odd key']", "x"))),
            chunk(END), chunk(text(""), finish="STOP")),
        [(None, "cookRecipe", RECIPE, "complete")], "STOP", FinishReason.TOOL_CALLS, True),
    "streamed_call_whose_end_marker_never_comes": (
        sse(chunk(start("writeItems")),
            chunk(partial(pa("$.operations[0].action", "add", more=True))),
            chunk(partial(pa("$.operations[0].action", ""))),
            chunk(partial(pa("$.operations[0].price", 0.5), more=False)),
            chunk(text(""), finish="STOP")),
        [(None, "writeItems", {"operations": [{"action": "add", "price": 0.5}]}, "complete")], "STOP",
        FinishReason.TOOL_CALLS, True),
    "stop_while_a_streamed_call_announced_more_is_a_protocol_error": (
        sse(chunk(start("f")), chunk(partial(pa("$.a", "x", more=True))), chunk(text(""), finish="STOP")),
        [(None, "f", None, "errored")], "STOP", FinishReason.TOOL_CALLS, False),
    "streamed_call_without_arguments": (
        sse(chunk(start("ping", id="p1")), chunk(END, finish="STOP")),
        [("p1", "ping", {}, "complete")], "STOP", FinishReason.TOOL_CALLS, True),
    "malformed_function_call_without_content": (
        sse({"candidates": [{"finishReason": "MALFORMED_FUNCTION_CALL", "finishMessage": "Malformed function call"}]}),
        [], "MALFORMED_FUNCTION_CALL", FinishReason.ERROR, False),
    "max_tokens_cuts_the_open_streamed_call": (
        sse(chunk(fc("a", {"x": 1}, id="c1")), chunk(start("b", id="c2")), chunk(partial(pa("$.q", "hal", True))),
            chunk(finish="MAX_TOKENS")),
        [("c1", "a", {"x": 1}, "complete"), ("c2", "b", None, "truncated")], "MAX_TOKENS", FinishReason.LENGTH,
        False),
    "safety": (
        sse(chunk(text("I can")), chunk(finish="SAFETY")), [], "SAFETY", FinishReason.CONTENT_FILTER, False),
    "image_safety_is_a_content_filter": (
        sse(chunk(finish="IMAGE_SAFETY")), [], "IMAGE_SAFETY", FinishReason.CONTENT_FILTER, False),
    "unexpected_tool_call_is_an_error": (
        sse(chunk(fc("f", {"a": 1}), finish="UNEXPECTED_TOOL_CALL")),
        [(None, "f", {"a": 1}, "complete")], "UNEXPECTED_TOOL_CALL", FinishReason.ERROR, False),
    "other_finish_reasons_are_other": (
        sse(chunk(text("olá"), finish="LANGUAGE")), [], "LANGUAGE", FinishReason.OTHER, False),
    "text_only_stop": (
        sse(chunk(text("Hello")), chunk(text(" world"), finish="STOP")), [], "STOP", FinishReason.STOP, True),
    "no_finish_reason_is_a_cut": (
        sse(chunk(fc("f", {"a": 1}, id="c1")), chunk(start("g")), chunk(partial(pa("$.b", 2)))),
        [("c1", "f", {"a": 1}, "complete"), (None, "g", None, "truncated")], None, None, False),
    "prompt_blocked": (
        sse({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}, "usageMetadata": {"promptTokenCount": 3}}),
        [], "PROHIBITED_CONTENT", FinishReason.CONTENT_FILTER, False),
    "array_stream": (
        array(chunk(fc("f", {"a": 1}, id="c1"), responseId="r1", modelVersion="gemini-3"), chunk(finish="STOP")),
        [("c1", "f", {"a": 1}, "complete")], "STOP", FinishReason.TOOL_CALLS, True),
    "unary_body": (
        json.dumps(chunk(fc("f", {"a": [1, 2]}, id="c1", sig="U0lH"), fc("g", {"b": "ü"}, id="c2"), finish="STOP",
                         responseId="r1", modelVersion="gemini-3"), indent=2).encode(),
        [("c1", "f", {"a": [1, 2]}, "complete"), ("c2", "g", {"b": "ü"}, "complete")], "STOP",
        FinishReason.TOOL_CALLS, True),
}


@pytest.mark.parametrize("name", CASES)
def test_gemini_case(name):
    """Each Gemini case gives the calls, raw and canonical finish reason and cleanliness written next to it."""
    data, expected, raw_finish, finish, clean = CASES[name]
    turn = toolwire.parse(P, data)
    assert calls_of(turn) == expected
    assert turn.raw_finish_reason == raw_finish
    assert turn.finish_reason is finish
    assert turn.finished_cleanly is clean
    if not clean:
        assert turn.runnable_calls == []


def test_gemini_streamed_arguments_equal_the_unary_form():
    """Arguments assembled from partialArgs paths equal the unary object; raw_arguments is that object's JSON."""
    streamed = toolwire.parse(P, CASES["streamed_partial_args_nested_paths_and_arrays"][0]).calls[0]
    unary = toolwire.parse(P, json.dumps(chunk(fc("cookRecipe", RECIPE), finish="STOP")).encode()).calls[0]
    assert streamed.args == unary.args == RECIPE
    assert json.loads(streamed.raw_arguments) == RECIPE


def test_gemini_several_candidates_become_choices():
    """Each candidate is a choice with its own calls and finish reason; the replay is candidate 0's."""
    data = sse({"candidates": [{"index": 0, "content": {"role": "model", "parts": [fc("f", {"a": 1}, id="c0")]}},
                               {"index": 1, "content": {"role": "model", "parts": [text("no call")]}}]},
               {"candidates": [{"index": 0, "finishReason": "STOP"}, {"index": 1, "finishReason": "MAX_TOKENS"}]})
    turn = toolwire.parse(P, data)
    assert [(c.choice, c.name, c.args) for c in turn.calls] == [(0, "f", {"a": 1})]
    assert [(ch.index, ch.finish_reason, ch.text) for ch in turn.choices] == [
        (0, FinishReason.TOOL_CALLS, ""), (1, FinishReason.LENGTH, "no call")]
    assert turn.finish_reason is FinishReason.TOOL_CALLS
    assert turn.assistant_message == {"role": "model", "parts": [fc("f", {"a": 1}, id="c0")]}


def test_gemini_built_in_tool_call_goes_to_server_calls():
    """A toolCall part is a server call (never dispatchable); toolResponse stays in the replay only."""
    tool_call = {"toolCall": {"id": "s1", "toolType": "GOOGLE_SEARCH_WEB", "args": {"queries": ["weather"]}},
                 "thoughtSignature": "U0lH"}
    tool_resp = {"toolResponse": {"id": "s1", "toolType": "GOOGLE_SEARCH_WEB", "response": {"ok": True}}}
    data = sse(chunk(tool_call), chunk(tool_resp), chunk(fc("calc", {"e": "2+2"}, id="c1")), chunk(finish="STOP"))
    turn = toolwire.parse(P, data)
    assert calls_of(turn) == [("c1", "calc", {"e": "2+2"}, "complete")]
    (server,) = turn.server_calls
    assert (server.call_id, server.name, server.type, server.input) == ("s1", "GOOGLE_SEARCH_WEB", "toolCall",
                                                                        {"queries": ["weather"]})
    assert turn.assistant_message["parts"] == [tool_call, tool_resp, fc("calc", {"e": "2+2"}, id="c1")]


def test_gemini_response_id_model_and_usage_are_kept():
    """responseId and modelVersion become the turn's response_id and model; the last usage is kept."""
    data = sse(chunk(text("a"), responseId="r1", modelVersion="gemini-3", usageMetadata={"totalTokenCount": 1}),
               chunk(text("b"), finish="STOP", responseId="r1", usageMetadata={"totalTokenCount": 2}))
    turn = toolwire.parse(P, data)
    assert (turn.response_id, turn.model, turn.usage, turn.text) == ("r1", "gemini-3", {"totalTokenCount": 2}, "ab")


def test_gemini_thought_text_is_replayed_but_not_the_answer():
    """Thinking summaries (thought: true) stay in the replay but not in the turn's text."""
    data = sse(chunk(text("pondering", thought=True)), chunk(text("Answer", sig="U0lH"), finish="STOP"))
    turn = toolwire.parse(P, data)
    assert turn.text == "Answer"
    assert turn.assistant_message["parts"] == [text("pondering", thought=True), text("Answer", sig="U0lH")]


def test_gemini_replay_keeps_every_part_in_order_and_rebuilds_streamed_calls():
    """The replay holds each part verbatim in arrival order, a streamed call as one whole part; bare empty
    text parts (refused by the API) are dropped, empty-text signature parts kept."""
    data = sse(chunk(text("Let me check.")), chunk(start("f", id="c1", sig="U0lH")), chunk(partial(pa("$.a", 1))),
               chunk(END), chunk(fc("g", {"b": 2}, id="c2")), chunk(text(""), text("", sig="TEFURQ==")),
               chunk(text(""), finish="STOP"))
    turn = toolwire.parse(P, data)
    assert turn.assistant_message == {"role": "model", "parts": [
        text("Let me check."), fc("f", {"a": 1}, id="c1", sig="U0lH"), fc("g", {"b": 2}, id="c2"),
        text("", sig="TEFURQ==")]}
    assert [c.provider_meta.get("part_index") for c in turn.calls] == [1, 2]


def test_gemini_json_format_iterates_a_whole_array_body():
    """With format="json" the whole streamed array is one payload whose elements are read in order."""
    data = array(chunk(fc("f", {"a": 1}, id="c1")), chunk(fc("g", {"b": 2}, id="c2")), chunk(finish="STOP"))
    whole = toolwire.parse(P, data, format="json")
    auto = toolwire.parse(P, data)
    assert calls_of(whole) == calls_of(auto) == [("c1", "f", {"a": 1}, "complete"), ("c2", "g", {"b": 2}, "complete")]
    assert whole.finished_cleanly and auto.finished_cleanly


# ---- errors -----------------------------------------------------------------------------------------------
ERROR_BODY = {"error": {"code": 429, "message": "Resource has been exhausted", "status": "RESOURCE_EXHAUSTED",
                        "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}]}}


@pytest.mark.parametrize("data,fmt", [
    (json.dumps(ERROR_BODY).encode(), "json"),
    (json.dumps([ERROR_BODY]).encode(), "json"),
    (json.dumps([ERROR_BODY]).encode(), "auto"),
    (array(chunk(fc("f", {"a": 1}, id="c1")), ERROR_BODY), "auto"),
    (array(chunk(fc("f", {"a": 1}, id="c1")), ERROR_BODY), "json"),
    (sse(chunk(fc("f", {"a": 1}, id="c1")), ERROR_BODY), "sse"),
], ids=["body", "one_element_array_json", "one_element_array_auto", "array_stream_auto", "array_stream_json",
        "sse"])
def test_gemini_error_payloads_become_a_stream_error_with_code_and_status(data, fmt):
    """{"error": …}, alone, wrapped in a one-element array or mid-stream, is a stream error with its status."""
    turn = toolwire.parse(P, data, format=fmt)
    assert (turn.error.type, turn.error.code, turn.error.status) == ("RESOURCE_EXHAUSTED", "RESOURCE_EXHAUSTED", 429)
    assert turn.error.message == "Resource has been exhausted"
    assert turn.error.raw["details"][0]["retryDelay"] == "37s"
    assert not turn.finished_cleanly and turn.runnable_calls == []


@pytest.mark.parametrize("data,needle", [
    (b"data: this is not json\r\n\r\n", "could not be decoded"),
    (sse({"candidates": "nope"}), "could not be decoded"),
    (sse({"candidates": [{"content": {"parts": [17]}}]}), "part could not be decoded"),
    (sse(chunk({"functionCall": {"name": 5}})), "part could not be decoded"),
    (sse(chunk(start("f")), chunk({"functionCall": {"partialArgs": [{"stringValue": "x"}], "willContinue": True}})),
     "part could not be decoded"),
    (sse(chunk(partial(pa("$.a", 1))), chunk(finish="STOP")), "no streamed call open"),
    (sse(chunk(SEPARATOR), chunk(finish="STOP")), "no streamed call open"),
], ids=["garbage", "candidates_not_a_list", "part_not_an_object", "name_not_a_string", "partial_arg_without_path",
        "partial_args_before_a_start", "separator_before_a_start"])
def test_gemini_malformed_input_is_a_protocol_error(data, needle):
    """Garbage, wrong shapes and partialArgs with no call open are typed protocol errors, never calls to run."""
    turn = toolwire.parse(P, data)
    assert turn.error.type == "protocol_error"
    assert needle in turn.error.message
    assert turn.runnable_calls == []
    assert all(c.state is not CallState.COMPLETE for c in turn.calls)


@pytest.mark.parametrize("path", ["location", "$", "$..a", "$.a[*]", "$.a[-1]", "$[0]", "$.a[01]", "$.a.", "$.a b",
                                  "$['a]", "$.1a"])
def test_gemini_bad_json_path_fails_the_call_with_a_protocol_error(path):
    """A partialArgs path that is not a member path of the arguments object errors the call and the stream."""
    data = sse(chunk(start("f", id="c1")), chunk(partial(pa(path, "x"))), chunk(END), chunk(finish="STOP"))
    turn = toolwire.parse(P, data)
    assert turn.error.type == "protocol_error" and "bad partialArgs" in turn.error.message
    (call,) = turn.calls
    assert call.state is CallState.ERRORED and call.problem.code is ProblemCode.PROTOCOL_ERROR
    assert turn.runnable_calls == []


@pytest.mark.parametrize("parts,why", [
    ([pa("$.a[1]", "x")], "skips over"),
    ([pa("$.a", "x"), pa("$.a.b", "y")], "not an object"),
    ([pa("$.a", 1), pa("$.a", 2)], "set twice"),
    ([pa("$.a[0]", 1), pa("$.a.b", 2)], "not an object"),
    ([pa("$.a.b", 1), pa("$.a[0]", 2)], "not an array"),
], ids=["index_gap", "member_of_a_string", "number_set_twice", "member_of_an_array", "index_of_an_object"])
def test_gemini_conflicting_paths_are_protocol_errors(parts, why):
    """Paths that contradict what was already built (gaps, type clashes, values set twice) error the call."""
    data = sse(chunk(start("f")), chunk(partial(*parts)), chunk(END), chunk(finish="STOP"))
    turn = toolwire.parse(P, data)
    assert turn.error.type == "protocol_error" and why in turn.error.message
    assert turn.calls[0].state is CallState.ERRORED


def test_gemini_json_path_parser():
    """Dot members, quoted members with escapes and indices parse; the cache returns the same tuple."""
    assert parse_json_path("$.recipe.ingredients[3].name") == ("recipe", "ingredients", 3, "name")
    assert parse_json_path("$['a b'][\"c\\\"d\"]['it\\'s']") == ("a b", 'c"d', "it's")
    assert parse_json_path("$.ação") == ("ação",)
    with pytest.raises(JSONPathError):
        parse_json_path("$.a[?(@.b)]")


def test_gemini_new_call_before_the_end_marker_errors_the_open_call():
    """A new functionCall while a streamed call still announced more errors that call; the new one proceeds."""
    data = sse(chunk(start("f", id="c1")), chunk(partial(pa("$.a", "x", True))), chunk(fc("g", {"b": 1}, id="c2")),
               chunk(finish="STOP"))
    turn = toolwire.parse(P, data)
    assert calls_of(turn) == [("c1", "f", None, "errored"), ("c2", "g", {"b": 1}, "complete")]
    assert turn.calls[0].problem.code is ProblemCode.PROTOCOL_ERROR
    assert [c.call_id for c in turn.runnable_calls] == ["c2"]


def test_gemini_new_call_after_a_last_partial_part_ends_the_previous_call():
    """A streamed call whose last part said no more would follow is ended by the next call's start."""
    data = sse(chunk(start("f", id="c1")), chunk(partial(pa("$.a", 1), more=False)), chunk(start("g", id="c2")),
               chunk(partial(pa("$.b", 2), more=False)), chunk(END), chunk(finish="STOP"))
    turn = toolwire.parse(P, data)
    assert calls_of(turn) == [("c1", "f", {"a": 1}, "complete"), ("c2", "g", {"b": 2}, "complete")]


def test_gemini_function_call_after_the_finish_reason_is_a_protocol_error():
    """A functionCall for a candidate that already finished is not merged into the turn."""
    data = sse(chunk(fc("f", {"a": 1}), finish="STOP"), chunk(fc("g", {"b": 2})))
    turn = toolwire.parse(P, data)
    assert turn.error.type == "protocol_error"
    assert [c.name for c in turn.calls] == ["f"] and turn.runnable_calls == []


def test_gemini_call_without_a_name_is_a_typed_problem():
    """A whole functionCall with arguments but no name errors with missing_name and never runs."""
    turn = toolwire.parse(P, sse(chunk(fc(None, {"a": 1}, id="c1")), chunk(finish="STOP")))
    (call,) = turn.calls
    assert call.state is CallState.ERRORED and call.problem.code is ProblemCode.MISSING_NAME


def test_gemini_arguments_that_are_not_an_object_are_a_typed_problem():
    """args that are an array (or a string that is not an object) complete with args None and a problem."""
    turn = toolwire.parse(P, sse(chunk(fc("f", [1, 2]), fc("g", "not json"), finish="STOP")))
    assert [(c.state, c.problem.code) for c in turn.calls] == [
        (CallState.COMPLETE, ProblemCode.NOT_AN_OBJECT), (CallState.COMPLETE, ProblemCode.INVALID_JSON)]
    assert turn.runnable_calls == []


def test_gemini_payload_without_known_fields_is_not_understood(toolwire_debug):
    """A JSON object with no Gemini field is skipped; with nothing else the turn says no payload was found."""
    turn = toolwire.parse(P, sse({"hello": "world"}))
    assert turn.error.type == "no_payload"


def test_gemini_stream_cut_inside_a_payload_is_a_cut():
    """Bytes that end inside a chunk's JSON are a cut stream, not garbage."""
    data = sse(chunk(fc("f", {"a": 1}, id="c1")), chunk(finish="STOP"))
    turn = toolwire.parse(P, data[:-12])
    assert turn.error.type == "stream_cut"
    assert calls_of(turn) == [("c1", "f", {"a": 1}, "complete")] and turn.runnable_calls == []


# ---- properties of generated streams ---------------------------------------------------------------------
KEY = st.one_of(st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True),
                st.text(alphabet="ab 'ç\"\\-é", min_size=1, max_size=5))
LEAF = st.one_of(st.text(max_size=12), st.integers(-2**53, 2**53), st.booleans(), st.none(),
                 st.floats(allow_nan=False, allow_infinity=False, width=32))
VALUE = st.recursive(LEAF, lambda inner: st.one_of(st.lists(inner, min_size=1, max_size=3),
                                                   st.dictionaries(KEY, inner, min_size=1, max_size=3)),
                     max_leaves=8)
ARGS = st.dictionaries(KEY, VALUE, max_size=4)
NAME = st.from_regex(r"[a-z][a-z_]{0,8}", fullmatch=True)
CALL_ID = st.one_of(st.none(), st.from_regex(r"[a-z0-9]{8}", fullmatch=True))
SIG = st.one_of(st.none(), st.just("U0lHTkFUVVJF"))


def path_of(keys: tuple) -> str:
    out = "$"
    for k in keys:
        if isinstance(k, int):
            out += f"[{k}]"
        elif k and (k[0].isalpha() or k[0] == "_") and all(c.isalnum() or c == "_" for c in k) and k.isascii():
            out += "." + k
        else:
            out += "['" + k.replace("\\", "\\\\").replace("'", "\\'") + "']"
    return out


def leaves(value: Any, keys: tuple = ()):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from leaves(v, keys + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from leaves(v, keys + (i,))
    else:
        yield keys, value


def partial_parts(args: dict, cuts: list[int], draw_sep) -> list[dict]:
    """Continuation parts for ``args``: strings split into fragments at ``cuts``, separators sprinkled in."""
    parts = []
    for n, (keys, value) in enumerate(leaves(args)):
        path = path_of(keys)
        if isinstance(value, str) and len(value) > 1:
            at = sorted({c % len(value) for c in cuts if c % len(value)})
            pieces = [value[i:j] for i, j in zip([0] + at, at + [len(value)])]
            for i, piece in enumerate(pieces):
                parts.append(partial(pa(path, piece, more=i < len(pieces) - 1)))
        else:
            parts.append(partial(pa(path, value)))
        if draw_sep(n):
            parts.append(SEPARATOR)
    return parts


@dataclass
class Gen:
    """A generated stream: its payloads, the calls it should give, and which payload ends each call."""

    payloads: list[dict]
    calls: list[tuple]  # (call_id, name, args)
    ends: list[int]  # per call: index of the payload holding its terminator
    streamed: list[bool]
    finish: str | None
    finish_at: int | None = None  # index of the payload holding the finishReason


@st.composite
def gemini_streams(draw):
    items = draw(st.lists(st.tuples(st.sampled_from(["text", "call", "streamed"]), NAME, CALL_ID, ARGS, SIG),
                          max_size=4))
    finish = draw(st.sampled_from(["STOP", "STOP", "MAX_TOKENS", None]))
    payloads: list[dict] = []
    calls, ends, streamed = [], [], []
    cuts = draw(st.lists(st.integers(0, 50), max_size=3))
    seps = draw(st.lists(st.booleans(), min_size=8, max_size=8))
    for n, (kind, name, cid, args, sig) in enumerate(items):
        last = n == len(items) - 1
        if kind == "text":
            payloads.append(chunk(text(name + " é ✓", sig=sig)))
            continue
        calls.append((cid, name, args))
        if kind == "call":
            payloads.append(chunk(fc(name, args if args else ..., id=cid, sig=sig)))
            ends.append(len(payloads) - 1)
            streamed.append(False)
            continue
        payloads.append(chunk(start(name, id=cid, sig=sig)))
        payloads.extend(chunk(p) for p in partial_parts(args, cuts, lambda i: seps[i % 8]))
        streamed.append(True)
        while payloads[-1]["candidates"][0]["content"]["parts"][0] == SEPARATOR:
            payloads.pop()  # (a separator never ends a call's parts)
        no_marker = last and finish == "STOP" and args and draw(st.booleans())
        if no_marker:  # the recorded Vertex form: the last partialArgs part ends the call, STOP ends the turn
            payloads[-1]["candidates"][0]["content"]["parts"][0]["functionCall"].pop("willContinue", None)
            ends.append(len(payloads))  # the finishing payload
        else:
            payloads.append(chunk(END))
            ends.append(len(payloads) - 1)
    gen = Gen(payloads, calls, ends, streamed, finish)
    if finish is not None:
        payloads.append(chunk(text("", sig=draw(SIG)) if draw(st.booleans()) else text(""), finish=finish))
        gen.finish_at = len(payloads) - 1
    if not payloads:
        payloads.append(chunk(text("hi")))
    return gen


def encode_sse(payloads: list[dict]) -> tuple[bytes, list[int]]:
    """SSE bytes with CRLF separators and, per payload, the offset just after its JSON text."""
    out, ends, size = [], [], 0
    for p in payloads:
        head = b"data: " + dumps(p).encode()
        ends.append(size + len(head))
        piece = head + b"\r\n\r\n"
        out.append(piece)
        size += len(piece)
    return b"".join(out), ends


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, prev = [], 0
    for p in points:
        pieces.append(data[prev:p])
        prev = p
    pieces.append(data[prev:])
    return [p for p in pieces if p]


CUTS = st.lists(st.integers(min_value=0, max_value=100_000), max_size=16)


@given(gemini_streams())
def test_generated_streams_give_the_calls_they_were_built_from(gen):
    """Whole and streamed calls come out with their ids, names and arguments (streamed = unary form), the same
    from SSE, the JSON array and the whole array as one body."""
    data, _ = encode_sse(gen.payloads)
    turn = toolwire.parse(P, data)
    assert [(c.call_id, c.name, c.args) for c in turn.calls] == gen.calls
    assert all(c.state is CallState.COMPLETE for c in turn.calls)
    unary = toolwire.parse(P, json.dumps(chunk(*[fc(n, a, id=i) for i, n, a in gen.calls], finish="STOP")).encode())
    assert [c.args for c in unary.calls] == [c.args for c in turn.calls]
    assert toolwire.parse(P, array(*gen.payloads)) == turn
    body = toolwire.parse(P, array(*gen.payloads), format="json")
    assert calls_of(body) == calls_of(turn) and body.finish_reason == turn.finish_reason
    if gen.finish is None:
        assert turn.error.type == "stream_cut" and turn.runnable_calls == []
    else:
        expected = {"STOP": FinishReason.TOOL_CALLS if gen.calls else FinishReason.STOP,
                    "MAX_TOKENS": FinishReason.LENGTH}[gen.finish]
        assert turn.finish_reason is expected
        assert turn.finished_cleanly is (gen.finish == "STOP")
    fcs = [p["functionCall"] for p in turn.assistant_message["parts"] if "functionCall" in p]
    assert [(f.get("id"), f["name"], f.get("args", {})) for f in fcs] == gen.calls


@given(gemini_streams(), CUTS)
def test_any_split_of_the_sse_bytes_gives_the_same_turn(gen, cuts):
    """SSE with CRLF separators split anywhere (inside UTF-8 characters, between CR and LF) parses the same."""
    data, _ = encode_sse(gen.payloads)
    assert toolwire.parse(P, split(data, cuts), format="sse") == toolwire.parse(P, data, format="sse")


@given(gemini_streams(), CUTS)
def test_any_split_of_the_json_array_gives_the_same_turn(gen, cuts):
    """The progressively streamed JSON array split anywhere parses the same as whole, with format auto."""
    data = array(*gen.payloads)
    assert toolwire.parse(P, split(data, cuts)) == toolwire.parse(P, data)


@given(gemini_streams(), st.lists(st.integers(min_value=0, max_value=100_000), min_size=1, max_size=6))
def test_strict_prefixes_never_run_calls_before_the_finish(gen, cut_points):
    """A stream cut before its finishing chunk has no runnable calls, and a streamed call is never complete
    before its terminator arrived; the JSON array cut anywhere never finishes cleanly."""
    data, ends = encode_sse(gen.payloads)
    points = {c % len(data) for c in cut_points} | {e for e in ends if e < len(data)} | {
        e - 1 for e in ends if 0 < e <= len(data)}
    finish_end = ends[gen.finish_at] if gen.finish_at is not None else len(data) + 1
    for n in sorted(points):
        turn = toolwire.parse(P, data[:n], format="sse")
        if n < finish_end:
            assert turn.runnable_calls == [] and not turn.finished_cleanly
        for call, end, streamed in zip(turn.calls, gen.ends, gen.streamed):
            if streamed and n < ends[min(end, len(ends) - 1)]:
                assert call.state is not CallState.COMPLETE
    arr = array(*gen.payloads)
    for c in cut_points:
        turn = toolwire.parse(P, arr[:c % len(arr)])
        assert turn.runnable_calls == [] and not turn.finished_cleanly
