"""A call left open in a turn that otherwise ends cleanly makes the whole turn a protocol error, not only that
call: the provider's events contradict each other, so none of the turn's calls may run. A stream that ends
without its terminator is ``stream_cut``, with the same effect.
"""

from __future__ import annotations

import pytest

import toolwire
from toolwire import CallState, ProblemCode

from ..test_codec_gemini import END, fc, pa, partial, start
from ..test_codec_gemini import chunk as gemini_chunk
from ..test_codec_gemini import sse as gemini_sse
from ..test_codec_gemini_interactions import completed, created, function_call, step_start
from ..test_codec_gemini_interactions import sse as interactions_sse
from ..test_codec_openai_responses import function_item, sse_bytes, stream
from ..wire import anthropic_events, chunk, sse, tc
from .streams import MODES, Spy, both_modes

FIRST = {"type": "tool_use", "id": "toolu_1", "name": "first", "fragments": ['{"a": 1}']}
OPEN = {"type": "tool_use", "id": "toolu_2", "name": "second", "fragments": ['{"b": 2}'], "stop": False}

OPEN_AT_A_CLEAN_END: dict[str, tuple[str, bytes]] = {
    "anthropic_block_never_stopped_then_tool_use_and_message_stop": (
        "anthropic", sse(*anthropic_events([FIRST, OPEN], "tool_use"), events=True)),
    "anthropic_block_never_stopped_then_pause_turn": (
        "anthropic", sse(*anthropic_events([FIRST, OPEN], "pause_turn"), events=True)),
    "anthropic_block_never_stopped_then_end_turn": (
        "anthropic", sse(*anthropic_events([FIRST, OPEN], "end_turn"), events=True)),
    "responses_call_without_its_done_events_then_completed": (
        "openai-responses", sse_bytes(stream(
            function_item(0, "fc_1", "call_1", "first", '{"a": 1}'),
            function_item(1, "fc_2", "call_2", "second", '{"b": 2}', args_done=False, item_done=False)))),
    "responses_call_whose_item_ended_incomplete_then_completed": (
        "openai-responses", sse_bytes(stream(
            function_item(0, "fc_1", "call_1", "first", '{"a": 1}'),
            function_item(1, "fc_2", "call_2", "second", '{"b": 2}', args_done=False, status="incomplete")))),
    "gemini_streamed_call_announcing_more_then_stop": (
        "gemini", gemini_sse(
            gemini_chunk(fc("first", {"a": 1}, id="g1")),
            gemini_chunk(start("second", id="g2")),
            gemini_chunk(partial(pa("$.b", "x", more=True))),
            gemini_chunk(finish="STOP"))),
    "gemini_second_candidate_call_announcing_more_then_stop": (
        "gemini", gemini_sse(
            {"candidates": [
                {"index": 0, "content": {"role": "model", "parts": [fc("first", {"a": 1}, id="g1")]}},
                {"index": 1, "content": {"role": "model", "parts": [start("second", id="g2")]}}]},
            {"candidates": [
                {"index": 0, "finishReason": "STOP"},
                {"index": 1, "finishReason": "STOP"}]})),
    "interactions_step_never_stopped_then_requires_action": (
        "gemini-interactions", interactions_sse(
            created(), function_call(0, "fc_1", "first", ['{"a": 1}']),
            step_start(1, {"type": "function_call", "id": "fc_2", "name": "second", "arguments": {}}),
            completed("requires_action"))),
    "interactions_step_never_stopped_then_completed": (
        "gemini-interactions", interactions_sse(
            created(), function_call(0, "fc_1", "first", ['{"a": 1}']),
            step_start(1, {"type": "function_call", "id": "fc_2", "name": "second", "arguments": {}}),
            completed("completed"))),
}


@pytest.mark.parametrize("name", OPEN_AT_A_CLEAN_END)
def test_a_call_left_open_at_a_clean_end_makes_the_whole_turn_a_protocol_error(name):
    """The open call is errored, the turn is a protocol error, and its finished sibling is not runnable."""
    provider, data = OPEN_AT_A_CLEAN_END[name]
    for keep, out in zip(MODES, both_modes(provider, data)):
        turn = out.turn
        assert turn.error is not None and turn.error.type == "protocol_error", (keep, turn.error)
        assert not turn.finished_cleanly and turn.runnable_calls == []
        assert not any(turn.choice_finished_cleanly(i) for i in range(3))
        if keep:
            second = [c for c in turn.calls if c.name == "second"]
            assert [c.state for c in second] == [CallState.ERRORED]
            assert second[0].problem.code is ProblemCode.PROTOCOL_ERROR


@pytest.mark.parametrize("name", OPEN_AT_A_CLEAN_END)
def test_nothing_of_a_turn_with_a_call_left_open_runs(name):
    """The dispatcher answers every call of such a turn not_run and runs none of them."""
    provider, data = OPEN_AT_A_CLEAN_END[name]
    spy = Spy("first", "second")
    kinds = spy.run(toolwire.parse(provider, data))
    assert spy.ran == [] and set(kinds) == {"not_run"}


def test_a_gemini_streamed_call_whose_last_part_announced_nothing_more_still_ends_at_stop():
    """A streamed call without its empty end marker, whose last part said nothing would follow, ends at STOP."""
    data = gemini_sse(gemini_chunk(start("second", id="g2")), gemini_chunk(partial(pa("$.b", "x"), more=False)),
                      gemini_chunk(finish="STOP"))
    turn = toolwire.parse("gemini", data)
    assert turn.finished_cleanly and [(c.name, c.args) for c in turn.runnable_calls] == [("second", {"b": "x"})]
    closed = gemini_sse(gemini_chunk(start("second", id="g2")), gemini_chunk(partial(pa("$.b", "x"))),
                        gemini_chunk(END, finish="STOP"))
    assert toolwire.parse("gemini", closed).finished_cleanly


CUT: dict[str, tuple[str, bytes]] = {
    "chat_without_finish_reason_and_done": ("openai-chat", sse(chunk(tc(0, "call_1", "first", '{"a": 1}')))),
    "chat_finish_reason_for_one_choice_of_two": ("openai-chat", sse(
        chunk(tc(0, "call_1", "first", '{"a": 1}'), finish="tool_calls"),
        chunk(tc(0, "call_2", "first", '{"a": 2}'), choice=1), "[DONE]")),
    "anthropic_without_message_stop": ("anthropic", sse(*anthropic_events([FIRST], "tool_use", stop=False),
                                                        events=True)),
    "responses_without_a_terminal_event": ("openai-responses", sse_bytes(stream(
        function_item(0, "fc_1", "call_1", "first", '{"a": 1}'), terminal=None))),
    "gemini_without_a_finish_reason": ("gemini", gemini_sse(gemini_chunk(fc("first", {"a": 1}, id="g1")))),
    "interactions_without_its_completion": ("gemini-interactions", interactions_sse(
        created(), function_call(0, "fc_1", "first", ['{"a": 1}']))),
}


@pytest.mark.parametrize("name", CUT)
def test_a_stream_that_ends_without_its_terminator_is_cut_and_runs_nothing(name):
    """No terminator: ``stream_cut`` on the turn in both modes, and the dispatcher runs none of its calls."""
    provider, data = CUT[name]
    for out in both_modes(provider, data):
        assert out.turn.error is not None and out.turn.error.type == "stream_cut"
        assert not out.turn.finished_cleanly and out.turn.runnable_calls == []
    spy = Spy("first")
    assert set(spy.run(toolwire.parse(provider, data))) == {"not_run"} and spy.ran == []
