"""Nothing after a stream's terminator is a call: a payload that follows it is a protocol error on the turn.

Terminators: Chat ``data: [DONE]``, Anthropic ``message_stop``, Responses ``response.completed`` /
``response.incomplete`` / ``response.failed``, Interactions ``interaction.completed`` (then only ``[DONE]``),
Gemini the end of the top-level JSON array (its SSE form has no terminator). SSE comments, a repeated
``[DONE]`` and Anthropic pings are not payloads that could say anything, and change nothing.
"""

from __future__ import annotations

import json

import pytest

import toolwire

from ..test_codec_gemini import array as gemini_array
from ..test_codec_gemini import chunk as gemini_chunk
from ..test_codec_gemini import fc
from ..test_codec_gemini_interactions import completed, created, function_call
from ..test_codec_gemini_interactions import sse as interactions_sse
from ..test_codec_openai_responses import function_item, sse_bytes, stream, then
from ..wire import anthropic_events, chunk, sse, tc
from .streams import MODES, Spy, both_modes

LATE = "late_call"


def _anthropic(*late: dict) -> bytes:
    evs = anthropic_events([{"type": "tool_use", "id": "toolu_1", "name": "first", "fragments": ['{"a": 1}']}])
    return sse(*evs, *late, events=True)


ANTHROPIC_LATE_BLOCK = [
    {"type": "content_block_start", "index": 1,
     "content_block": {"type": "tool_use", "id": LATE, "name": "second", "input": {}}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{}"}},
    {"type": "content_block_stop", "index": 1}]

CHAT_HEAD = [chunk(tc(0, "call_1", "first", '{"a": 1}')), chunk(finish="tool_calls")]


def _responses(*late: dict, terminal: str = "completed") -> bytes:
    events = stream(function_item(0, "fc_1", "call_1", "first", '{"a": 1}'), terminal=terminal)
    return sse_bytes(then(events, *late))


RESPONSES_LATE_ITEM = function_item(1, "fc_late", LATE, "second", "{}")


def _interactions(*late: dict, done_first: bool = False) -> bytes:
    head = interactions_sse(created(), function_call(0, "fc_1", "first", ['{"a": 1}']), completed("requires_action"),
                            done=done_first)
    return head + interactions_sse(*late, done=not done_first)


GEMINI_HEAD = gemini_chunk(fc("first", {"a": 1}, id="g1"), finish="STOP")
GEMINI_LATE = gemini_chunk(fc("second", {}, id=LATE), finish="STOP")

CASES: dict[str, tuple[str, bytes, str]] = {
    "anthropic_tool_use_after_message_stop": ("anthropic", _anthropic(*ANTHROPIC_LATE_BLOCK), "sse"),
    "anthropic_text_after_message_stop": ("anthropic", _anthropic(
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": "more"}}), "sse"),
    "anthropic_second_message_delta_after_message_stop": ("anthropic", _anthropic(
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}}), "sse"),
    "chat_tool_call_after_done": ("openai-chat", sse(
        *CHAT_HEAD, "[DONE]", chunk(tc(1, LATE, "second", "{}"))), "sse"),
    "chat_tool_call_with_finish_reason_after_done": ("openai-chat", sse(
        *CHAT_HEAD, "[DONE]", chunk(tc(1, LATE, "second", "{}"), finish="tool_calls")), "sse"),
    "chat_new_choice_after_done": ("openai-chat", sse(
        *CHAT_HEAD, "[DONE]", chunk(tc(0, LATE, "second", "{}"), finish="tool_calls", choice=1)), "sse"),
    "chat_usage_chunk_after_done": ("openai-chat", sse(
        *CHAT_HEAD, "[DONE]", {"id": "chatcmpl-1", "choices": [], "usage": {"total_tokens": 3}}), "sse"),
    "responses_call_after_completed": ("openai-responses", _responses(*RESPONSES_LATE_ITEM), "sse"),
    "responses_delta_after_completed": ("openai-responses", _responses(
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0, "delta": " "}),
        "sse"),
    "responses_text_after_completed": ("openai-responses", _responses(
        {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 1, "delta": "hi"}), "sse"),
    "responses_error_after_completed": ("openai-responses", _responses(
        {"type": "error", "code": "server_error", "message": "late"}), "sse"),
    "responses_call_after_incomplete": ("openai-responses", _responses(*RESPONSES_LATE_ITEM,
                                                                       terminal="incomplete"), "sse"),
    "interactions_call_after_completed": ("gemini-interactions", _interactions(
        *function_call(1, LATE, "second", ["{}"])), "sse"),
    "interactions_call_after_done": ("gemini-interactions", _interactions(
        *function_call(1, LATE, "second", ["{}"]), done_first=True), "sse"),
    "interactions_second_completed_after_done": ("gemini-interactions", _interactions(
        completed("completed"), done_first=True), "sse"),
    "gemini_value_after_the_array": ("gemini", gemini_array(GEMINI_HEAD) + b"\n" + json.dumps(GEMINI_LATE).encode(),
                                     "auto"),
    "gemini_second_array_after_the_array": ("gemini", gemini_array(GEMINI_HEAD) + gemini_array(GEMINI_LATE), "auto"),
}


@pytest.mark.parametrize("name", CASES)
def test_a_payload_after_the_terminator_is_a_protocol_error_in_both_modes(name):
    """A payload after the stream's terminator makes the turn a protocol error; none of it becomes a call."""
    provider, data, fmt = CASES[name]
    for keep, out in zip(MODES, both_modes(provider, data, format=fmt)):
        turn = out.turn
        assert turn.error is not None and turn.error.type == "protocol_error", (keep, turn.error)
        assert "terminator" in turn.error.message
        assert not turn.finished_cleanly and turn.runnable_calls == []
        assert LATE not in out.completed and LATE not in [c.call_id for c in turn.calls]


@pytest.mark.parametrize("name", [n for n in CASES if "call" in n])
def test_a_call_after_the_terminator_never_runs(name):
    """The dispatcher runs nothing of a turn that had a call after its terminator, not even the earlier call."""
    provider, data, fmt = CASES[name]
    spy = Spy("first", "second")
    kinds = spy.run(toolwire.parse(provider, data, format=fmt))
    assert spy.ran == [] and set(kinds) <= {"not_run"}


def test_a_call_after_a_failed_response_keeps_the_providers_error():
    """After ``response.failed`` the turn keeps the provider's error; a later call is never even announced."""
    data = _responses(*RESPONSES_LATE_ITEM, terminal="failed")
    for out in both_modes("openai-responses", data):
        assert out.turn.error.type == "server_error" and not out.turn.finished_cleanly
        assert LATE not in out.completed and LATE not in [c.call_id for c in out.turn.calls]


BENIGN: dict[str, tuple[str, bytes, bytes, str]] = {
    "chat_comment_and_repeated_done": (
        "openai-chat", sse(*CHAT_HEAD, "[DONE]"), b": keep-alive\n\ndata: [DONE]\n\n: OPENROUTER PROCESSING\n\n",
        "sse"),
    "anthropic_ping_and_comment": (
        "anthropic", _anthropic(), b"event: ping\ndata: {\"type\": \"ping\"}\n\n: keep-alive\n\n", "sse"),
    "responses_done_sentinel": ("openai-responses", _responses(), b"data: [DONE]\n\n", "sse"),
    "interactions_done_sentinel_then_comment": (
        "gemini-interactions", _interactions(), b": keep-alive\n\n", "sse"),
    "gemini_white_space_after_the_array": ("gemini", gemini_array(GEMINI_HEAD), b"\n\r\n  \n", "auto"),
}


@pytest.mark.parametrize("name", BENIGN)
def test_comments_keep_alives_and_a_repeated_sentinel_after_the_terminator_change_nothing(name):
    """SSE comments, pings and a repeated ``[DONE]`` after the terminator are not payloads: same clean turn."""
    provider, data, tail, fmt = BENIGN[name]
    plain = toolwire.parse(provider, data, format=fmt)
    turn = toolwire.parse(provider, data + tail, format=fmt)
    assert plain.finished_cleanly and turn.finished_cleanly, turn.error
    assert [(c.call_id, c.args) for c in turn.calls] == [(c.call_id, c.args) for c in plain.calls]
    assert len(turn.runnable_calls) == 1
