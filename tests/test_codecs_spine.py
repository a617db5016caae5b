"""Table-driven cases for the OpenAI Chat and Anthropic codecs, and their answers to bad input."""

from __future__ import annotations

import json

import pytest

import toolwire
from toolwire import CallKind, CallState, FinishReason, ProblemCode

from .wire import anthropic_events, chunk, sse, tc


def calls_of(turn):
    return [(c.call_id, c.name, c.args, c.state.value) for c in turn.calls]


# ---- OpenAI Chat ----------------------------------------------------------------------------------------
CHAT_CASES = {
    "one_call_fragmented": (
        sse(chunk(tc(0, "call_1", "get_weather", "")), chunk(tc(0, None, None, '{"city"')),
            chunk(tc(0, None, None, ': "Paris"}')), chunk(finish="tool_calls"), "[DONE]"),
        [("call_1", "get_weather", {"city": "Paris"}, "complete")], "tool_calls"),
    "two_parallel_calls_interleaved": (
        sse(chunk(tc(0, "call_1", "a", "")), chunk(tc(1, "call_2", "b", "")), chunk(tc(0, None, None, '{"x":')),
            chunk(tc(1, None, None, '{"y":')), chunk(tc(0, None, None, "1}")), chunk(tc(1, None, None, "2}")),
            chunk(finish="tool_calls"), "[DONE]"),
        [("call_1", "a", {"x": 1}, "complete"), ("call_2", "b", {"y": 2}, "complete")], "tool_calls"),
    "text_only": (
        sse(chunk(content="Hello"), chunk(content=" world"), chunk(finish="stop"), "[DONE]"), [], "stop"),
    "unicode_arguments": (
        sse(chunk(tc(0, "call_1", "say", '{"t": "olá 🌍 ')), chunk(tc(0, None, None, '漢字"}')),
            chunk(finish="tool_calls"), "[DONE]"),
        [("call_1", "say", {"t": "olá 🌍 漢字"}, "complete")], "tool_calls"),
    "arguments_as_object_from_a_compatible_server": (
        sse(chunk(tc(0, "call_1", "f", None) | {"function": {"name": "f", "arguments": {"a": 1}}}),
            chunk(finish="stop"), "[DONE]"),
        [("call_1", "f", {"a": 1}, "complete")], "stop"),
    "no_finish_reason_is_a_cut": (
        sse(chunk(tc(0, "call_1", "f", '{"a": 1}')), "[DONE]"),
        [("call_1", "f", None, "truncated")], None),
    "empty_string_id_counts_as_no_id": (
        sse(chunk(tc(0, "", "f", '{"a": 1}')), chunk(finish="tool_calls")),
        [(None, "f", {"a": 1}, "complete")], "tool_calls"),
}


@pytest.mark.parametrize("name", CHAT_CASES)
def test_chat_case(name):
    """Each Chat stream case gives the calls and finish reason written next to it."""
    data, expected, finish = CHAT_CASES[name]
    turn = toolwire.parse("openai-chat", data)
    assert calls_of(turn) == expected
    assert turn.raw_finish_reason == finish


def test_chat_non_streaming_body_with_function_and_custom_calls():
    """A non-streaming body gives whole calls; a custom tool's input stays text in raw_arguments."""
    body = {"id": "chatcmpl-1", "object": "chat.completion", "model": "m", "choices": [{
        "index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}},
            {"id": "call_b", "type": "custom", "custom": {"name": "run_sql", "input": "SELECT 1"}}]}}],
        "usage": {"total_tokens": 5}}
    turn = toolwire.parse("openai-chat", json.dumps(body).encode(), format="json")
    a, b = turn.calls
    assert (a.call_id, a.name, a.args, a.kind) == ("call_a", "get_weather", {"city": "Paris"}, CallKind.FUNCTION)
    assert (b.call_id, b.name, b.args, b.raw_arguments, b.kind) == ("call_b", "run_sql", None, "SELECT 1",
                                                                    CallKind.CUSTOM)
    assert b.runnable and turn.finished_cleanly and turn.runnable_calls == [a, b]
    assert turn.assistant_message["tool_calls"][1] == {"id": "call_b", "type": "custom",
                                                       "custom": {"name": "run_sql", "input": "SELECT 1"}}


def test_chat_several_choices_keep_their_calls_apart():
    """With n > 1, calls are keyed by choice and index; the turn says which choice each belongs to."""
    data = sse(chunk(tc(0, "c0", "f", '{"a":'), choice=0), chunk(tc(0, "c1", "g", '{"b":'), choice=1),
               chunk(tc(0, None, None, "1}"), choice=0), chunk(tc(0, None, None, "2}"), choice=1),
               chunk(finish="tool_calls", choice=0), chunk(finish="length", choice=1), "[DONE]")
    turn = toolwire.parse("openai-chat", data)
    assert [(c.choice, c.index, c.name, c.args, c.state) for c in turn.calls] == [
        (0, 0, "f", {"a": 1}, CallState.COMPLETE), (1, 0, "g", None, CallState.TRUNCATED)]
    assert [(ch.index, ch.finish_reason) for ch in turn.choices] == [(0, FinishReason.TOOL_CALLS),
                                                                      (1, FinishReason.LENGTH)]
    assert turn.finish_reason is FinishReason.TOOL_CALLS


def test_chat_assistant_message_replays_arguments_as_received():
    """The assistant message echoes each call's id, name and exact argument text for the history."""
    data = sse(chunk(tc(0, "call_1", "f", '{"a": 1, ')), chunk(tc(0, None, None, '"b": 2}')),
               chunk(finish="tool_calls"), "[DONE]")
    msg = toolwire.parse("openai-chat", data).assistant_message
    assert msg == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1, "b": 2}'}}]}


def test_chat_fragment_after_finish_reason_is_a_protocol_error():
    """A tool-call fragment after its choice finished is recorded as a protocol error, not merged."""
    data = sse(chunk(tc(0, "call_1", "f", '{"a": 1}')), chunk(finish="tool_calls"),
               chunk(tc(0, None, None, "garbage")), "[DONE]")
    turn = toolwire.parse("openai-chat", data)
    assert turn.error.type == "protocol_error"
    assert turn.calls[0].args == {"a": 1}
    assert turn.runnable_calls == []


def test_chat_arguments_that_are_not_an_object_are_a_typed_problem():
    """Arguments that parse to a list are complete with args None and not_an_object."""
    data = sse(chunk(tc(0, "call_1", "f", "[1, 2]")), chunk(finish="tool_calls"))
    (call,) = toolwire.parse("openai-chat", data).calls
    assert call.state is CallState.COMPLETE and call.args is None
    assert call.problem.code is ProblemCode.NOT_AN_OBJECT


# ---- Anthropic ------------------------------------------------------------------------------------------
def test_anthropic_thinking_and_signature_are_kept_verbatim_for_replay():
    """Thinking text, its signature (assigned, not appended) and redacted thinking replay unchanged."""
    evs = [
        {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
                                              "content": [], "model": "m", "stop_reason": None}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "",
                                                                       "signature": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Let me "}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "think."}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQB"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "redacted_thinking", "data": "EmwK"}},
        {"type": "content_block_stop", "index": 1},
        {"type": "ping"},
        {"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_1",
                                                                       "name": "f", "input": {}}},
        {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": ""}},
        {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta",
                                                                "partial_json": '{"a": 1}'}},
        {"type": "content_block_stop", "index": 2},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 3}},
        {"type": "message_stop"},
    ]
    turn = toolwire.parse("anthropic", sse(*evs, events=True))
    assert turn.assistant_message == {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "Let me think.", "signature": "EqQB"},
        {"type": "redacted_thinking", "data": "EmwK"},
        {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}}]}
    assert calls_of(turn) == [("toolu_1", "f", {"a": 1}, "complete")]
    assert turn.finished_cleanly


def test_anthropic_server_tool_use_goes_to_server_calls_never_to_calls():
    """server_tool_use blocks (web_search …) are recorded in server_calls and never dispatchable."""
    blocks = [{"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
               "fragments": ['{"query": "rice"}']},
              {"type": "tool_use", "id": "toolu_1", "name": "f", "fragments": ["{}"]}]
    turn = toolwire.parse("anthropic", sse(*anthropic_events(blocks), events=True))
    assert [(s.call_id, s.name, s.type, s.input) for s in turn.server_calls] == [
        ("srvtoolu_1", "web_search", "server_tool_use", {"query": "rice"})]
    assert [c.call_id for c in turn.calls] == ["toolu_1"]


def test_anthropic_non_streaming_message_body():
    """A whole message body gives complete calls with their input objects."""
    body = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "stop_reason": "tool_use",
            "content": [{"type": "text", "text": "Checking."},
                        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
                        {"type": "tool_use", "id": "toolu_2", "name": "get_time", "input": {}}]}
    turn = toolwire.parse("anthropic", json.dumps(body), format="json")
    assert calls_of(turn) == [("toolu_1", "get_weather", {"city": "Paris"}, "complete"),
                              ("toolu_2", "get_time", {}, "complete")]
    assert turn.text == "Checking." and turn.finished_cleanly
    assert turn.assistant_message["content"] == body["content"]


def test_anthropic_error_event_truncates_open_calls():
    """An in-stream overloaded_error truncates the open call and is the turn's error."""
    evs = anthropic_events([{"type": "tool_use", "id": "toolu_1", "name": "f", "fragments": ['{"a":'],
                             "stop": False}], stop_reason=None, stop=False)
    evs.append({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    turn = toolwire.parse("anthropic", sse(*evs, events=True))
    assert turn.error.type == "overloaded_error"
    assert turn.calls[0].state is CallState.TRUNCATED
    assert turn.calls[0].problem.code is ProblemCode.STREAM_ERROR


def test_anthropic_unknown_event_and_delta_types_are_skipped():
    """New event types and delta types are skipped with a debug log; the turn still parses."""
    evs = anthropic_events([{"type": "tool_use", "id": "toolu_1", "name": "f", "fragments": ['{"a": 1}']}])
    evs.insert(1, {"type": "future_event", "x": 1})
    evs.insert(3, {"type": "content_block_delta", "index": 0, "delta": {"type": "future_delta", "y": 2}})
    turn = toolwire.parse("anthropic", sse(*evs, events=True))
    assert turn.error is None and calls_of(turn) == [("toolu_1", "f", {"a": 1}, "complete")]


@pytest.mark.parametrize("mutation, expected_error", [
    ("delta_before_start", "protocol_error"),
    ("delta_for_unknown_index", "protocol_error"),
    ("second_block_stop", "protocol_error"),
    ("missing_message_stop", "stream_cut"),
])
def test_anthropic_events_out_of_order_are_typed_errors(mutation, expected_error):
    """Deltas before their start, unknown indexes, double stops and missing ends are errors, never calls run."""
    evs = anthropic_events([{"type": "tool_use", "id": "toolu_1", "name": "f", "fragments": ['{"a": 1}']}])
    if mutation == "delta_before_start":
        evs[1], evs[2] = evs[2], evs[1]
    elif mutation == "delta_for_unknown_index":
        evs.insert(3, {"type": "content_block_delta", "index": 5,
                       "delta": {"type": "input_json_delta", "partial_json": "x"}})
    elif mutation == "second_block_stop":
        evs.insert(4, {"type": "content_block_stop", "index": 0})
    elif mutation == "missing_message_stop":
        evs = evs[:-1]
    turn = toolwire.parse("anthropic", sse(*evs, events=True))
    assert turn.error is not None and turn.error.type == expected_error
    assert turn.runnable_calls == []


def test_anthropic_fragment_after_block_stop_errors_that_call():
    """An input fragment after content_block_stop fails the (complete) call: it never runs."""
    evs = anthropic_events([{"type": "tool_use", "id": "toolu_1", "name": "f", "fragments": ['{"a": 1}']}])
    evs.insert(4, {"type": "content_block_delta", "index": 0,
                   "delta": {"type": "input_json_delta", "partial_json": "}"}})
    turn = toolwire.parse("anthropic", sse(*evs, events=True))
    (call,) = turn.calls
    assert call.state is CallState.ERRORED and call.problem.code is ProblemCode.FRAGMENT_AFTER_END


# ---- bad input, both dialects ---------------------------------------------------------------------------
@pytest.mark.parametrize("provider", ["openai-chat", "anthropic"])
@pytest.mark.parametrize("data, error_type", [
    (b"\x00\xff\xfe garbage \x80", "no_payload"),
    (b"data: {\"choices\": [\xff]}\n\n", "protocol_error"),
    (b"data: {not json\n\n", "protocol_error"),
    (b"", "no_payload"),
    (b"data: 12\n\n", "protocol_error"),
])
def test_bad_input_gives_a_typed_error_never_an_exception(provider, data, error_type):
    """Garbage, invalid UTF-8, broken JSON and empty input become a turn error, not an untyped exception."""
    turn = toolwire.parse(provider, data)
    assert turn.error is not None
    assert turn.error.type == error_type
    assert turn.calls == [] and turn.runnable_calls == []


def test_a_message_over_the_cap_raises_a_framing_error():
    """One pending message larger than max_message_bytes raises FramingError with limit and size."""
    parser = toolwire.StreamParser("openai-chat", max_message_bytes=1024)
    with pytest.raises(toolwire.FramingError) as info:
        for _ in range(10):
            parser.feed(b"data: " + b"x" * 200)
    assert info.value.limit == 1024 and info.value.size > 1024
    assert info.value.provider == "openai-chat"
    assert parser.closed and parser.turn.error.type == "framing_error"


def test_unknown_provider_and_format_are_usage_errors():
    """An unknown provider id or format raises UsageError; feeding after close too."""
    with pytest.raises(toolwire.UsageError):
        toolwire.StreamParser("mistral")
    with pytest.raises(toolwire.UsageError):
        toolwire.StreamParser("anthropic", format="xml")
    parser = toolwire.StreamParser("anthropic")
    parser.close()
    with pytest.raises(toolwire.UsageError):
        parser.feed(b"data: {}\n\n")
