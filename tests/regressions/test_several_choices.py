"""Several choices (Chat ``n > 1``) or candidates (Gemini): each one's finish reason is in ``Turn.choices``, so
``choice_finished_cleanly(i)`` is right for every ``i``; a snapshot taken mid-stream never claims a clean finish.
"""

from __future__ import annotations

import pytest

import toolwire
from toolwire import CallState, FinishReason

from ..test_codec_gemini import fc
from ..test_codec_gemini import sse as gemini_sse
from ..wire import chunk, sse, tc
from .streams import MODES, run_parser


def _candidate(index: int, *parts: dict, finish: str | None = None) -> dict:
    cand: dict = {"index": index}
    if parts:
        cand["content"] = {"role": "model", "parts": list(parts)}
    if finish is not None:
        cand["finishReason"] = finish
    return cand


CHAT_TWO_CHOICES = sse(
    chunk(tc(0, "call_a", "first", '{"a": 1}')),
    chunk(tc(0, "call_b", "first", '{"a":'), choice=1),
    chunk(finish="tool_calls"),
    chunk(finish="length", choice=1),
    "[DONE]")

GEMINI_THREE_CANDIDATES = gemini_sse(
    {"candidates": [_candidate(0, fc("first", {"a": 1}, id="g1")), _candidate(1, {"text": "I will not"})]},
    {"candidates": [_candidate(0, finish="STOP"), _candidate(1, finish="SAFETY"),
                    _candidate(2, finish="MALFORMED_FUNCTION_CALL")]})


@pytest.mark.parametrize("keep_calls", MODES)
def test_every_chat_choice_has_its_own_finish_reason_and_cleanliness(keep_calls):
    """Choice 0 ended with tool_calls (clean), choice 1 with length (not clean, its call truncated)."""
    turn = run_parser("openai-chat", CHAT_TWO_CHOICES, keep_calls=keep_calls).turn
    assert [(c.index, c.finish_reason, c.raw_finish_reason) for c in turn.choices] == [
        (0, FinishReason.TOOL_CALLS, "tool_calls"), (1, FinishReason.LENGTH, "length")]
    assert turn.choice_finished_cleanly(0) and not turn.choice_finished_cleanly(1)
    assert not turn.choice_finished_cleanly(2)
    if keep_calls:
        assert [c.state for c in turn.choice_calls(1)] == [CallState.TRUNCATED]
        assert [c.call_id for c in turn.runnable_calls] == ["call_a"]


@pytest.mark.parametrize("keep_calls", MODES)
def test_gemini_candidates_ended_by_safety_or_a_malformed_call_are_not_clean(keep_calls):
    """Candidate 0 ended with STOP (clean); SAFETY and MALFORMED_FUNCTION_CALL candidates are not clean."""
    turn = run_parser("gemini", GEMINI_THREE_CANDIDATES, keep_calls=keep_calls).turn
    assert [(c.index, c.finish_reason, c.raw_finish_reason) for c in turn.choices] == [
        (0, FinishReason.TOOL_CALLS, "STOP"), (1, FinishReason.CONTENT_FILTER, "SAFETY"),
        (2, FinishReason.ERROR, "MALFORMED_FUNCTION_CALL")]
    assert [turn.choice_finished_cleanly(i) for i in range(3)] == [True, False, False]


def test_a_response_whose_only_choice_is_not_the_first_lists_it():
    """A response holding only choice 1 lists it in ``choices``: choice 1 is clean, the absent choice 0 is not."""
    data = sse(chunk(tc(0, "call_b", "first", "{}"), choice=1), chunk(finish="tool_calls", choice=1), "[DONE]")
    for keep in MODES:
        turn = run_parser("openai-chat", data, keep_calls=keep).turn
        assert [(c.index, c.raw_finish_reason) for c in turn.choices] == [(1, "tool_calls")]
        assert turn.choice_finished_cleanly(1) and not turn.choice_finished_cleanly(0)
        assert not turn.finished_cleanly and turn.runnable_calls == []


SNAPSHOTS = {
    "openai-chat": sse(chunk(tc(0, "call_a", "first", '{"a": 1}')), chunk(finish="tool_calls"),
                       chunk(content="still writing", choice=1)),
    "gemini": gemini_sse({"candidates": [_candidate(0, fc("first", {"a": 1}, id="g1"), finish="STOP"),
                                         _candidate(1, {"text": "still writing"})]}),
}


@pytest.mark.parametrize("provider", SNAPSHOTS)
def test_a_snapshot_while_choice_1_is_still_open_claims_no_clean_finish(provider):
    """Mid-stream, with choice 0 finished and choice 1 still open, ``parser.turn`` finishes no choice cleanly."""
    parser = toolwire.StreamParser(provider)
    parser.feed(SNAPSHOTS[provider])
    snap = parser.turn
    assert not snap.ended and snap.finish_reason is FinishReason.TOOL_CALLS
    assert [c.finish_reason for c in snap.choices] == [FinishReason.TOOL_CALLS, None]
    assert not snap.finished_cleanly and not any(snap.choice_finished_cleanly(i) for i in range(2))
    assert snap.runnable_calls == []
    parser.close()
    final = parser.turn  # choice 1 never finished: the stream was cut
    assert final.ended and final.error.type == "stream_cut" and not final.finished_cleanly
