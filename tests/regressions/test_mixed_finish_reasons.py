"""A turn that reports more than one end: the worst one wins, in every dialect and both parser modes.

Any unclean end seen anywhere in a turn (a token limit, a filter or refusal, an error, an unknown word) makes the
turn unclean, whatever clean end comes before or after it: an Anthropic ``message_delta`` with ``tool_use`` after
one with ``max_tokens``, a Gemini ``SAFETY`` after ``STOP``, a Chat ``finish_reason`` repeated for a choice, a
Responses terminal event whose response says otherwise, an Interactions status update. ``finish_reason`` and
``raw_finish_reason`` are the worst end; ``finish_reasons`` and ``raw_finish_reasons`` list every end the turn saw,
in order, each once. A repeated clean end changes nothing.
"""

from __future__ import annotations

import json

import pytest

import toolwire
from toolwire import FinishReason

from ..dialects.bedrock_converse import bedrock_events, encode_events
from ..test_codec_gemini import chunk as gemini_chunk
from ..test_codec_gemini import fc
from ..test_codec_gemini import sse as gemini_sse
from ..test_codec_gemini import text as gemini_text
from ..test_codec_gemini_interactions import IID, completed, created, ev, function_call
from ..test_codec_gemini_interactions import sse as interactions_sse
from ..test_codec_openai_responses import function_item, sse_bytes, stream
from ..wire import anthropic_events, chunk, sse, tc
from .streams import MODES, Spy, run_parser

F = FinishReason
CALL = {"type": "tool_use", "id": "toolu_1", "name": "f", "fragments": ['{"a": 1}']}


def _anthropic(*stop_reasons: str) -> bytes:
    """One whole tool_use block, then a ``message_delta`` per stop reason, then ``message_stop``."""
    evs = anthropic_events([CALL], None, stop=False)
    evs += [{"type": "message_delta", "delta": {"stop_reason": r, "stop_sequence": None},
             "usage": {"output_tokens": 9}} for r in stop_reasons]
    return sse(*evs, {"type": "message_stop"}, events=True)


def _chat(*finishes: str) -> bytes:
    return sse(chunk(tc(0, "call_1", "f", '{"a": 1}')), *(chunk(finish=f) for f in finishes), "[DONE]")


def _gemini(*finishes: str) -> bytes:
    """A whole functionCall with the first finishReason, then a chunk per later one (no content)."""
    first, *later = finishes
    return gemini_sse(gemini_chunk(fc("f", {"a": 1}, id="g1"), finish=first),
                      *(gemini_chunk(finish=f) for f in later))


def _responses(*events: dict, terminal: str = "completed", **final: object) -> bytes:
    """A function call item; ``events`` after ``response.in_progress``; ``final`` overrides fields of the terminal
    event's response."""
    evs = stream(function_item(0, "fc_1", "call_1", "f", '{"a": 1}'), terminal=terminal, numbered=False)
    evs = evs[:2] + list(events) + evs[2:]
    evs[-1] = {**evs[-1], "response": {**evs[-1]["response"], **final}}
    return sse_bytes([{**e, "sequence_number": i} for i, e in enumerate(evs)])


def _lifecycle(status: str, **fields: object) -> dict:
    return {"type": "response.in_progress", "response": {
        "id": "resp_1", "object": "response", "model": "gpt-test", "status": status, "output": [], "error": None,
        "incomplete_details": None, "usage": None, **fields}}


def _interactions(*statuses: str, final: str = "requires_action") -> bytes:
    updates = [ev("interaction.status_update", interaction_id=IID, status=s) for s in statuses]
    return interactions_sse(created(), *updates, function_call(0, "fc_1", "f", ['{"a": 1}']), completed(final))


def _bedrock(*stops: str) -> bytes:
    events = bedrock_events([("tooluse_1", "f", {"a": 1})], stop_reason=None, metadata=False)
    return encode_events(events + [("messageStop", {"stopReason": s}) for s in stops]).data


#: name -> (provider, data, format, the turn's finish reason (the worst), raw finish reason, every raw end seen)
CASES: dict[str, tuple[str, bytes, str, FinishReason, str, tuple[str, ...]]] = {
    "anthropic_max_tokens_then_tool_use": ("anthropic", _anthropic("max_tokens", "tool_use"), "sse", F.LENGTH,
                                           "max_tokens", ("max_tokens", "tool_use")),
    "anthropic_refusal_then_tool_use": ("anthropic", _anthropic("refusal", "tool_use"), "sse", F.CONTENT_FILTER,
                                        "refusal", ("refusal", "tool_use")),
    "anthropic_tool_use_then_max_tokens": ("anthropic", _anthropic("tool_use", "max_tokens"), "sse", F.LENGTH,
                                           "max_tokens", ("tool_use", "max_tokens")),
    "anthropic_max_tokens_then_refusal_then_end_turn": ("anthropic", _anthropic("max_tokens", "refusal", "end_turn"),
                                                        "sse", F.CONTENT_FILTER, "refusal",
                                                        ("max_tokens", "refusal", "end_turn")),
    "gemini_stop_then_safety": ("gemini", _gemini("STOP", "SAFETY"), "sse", F.CONTENT_FILTER, "SAFETY",
                                ("STOP", "SAFETY")),
    "gemini_stop_then_max_tokens": ("gemini", _gemini("STOP", "MAX_TOKENS"), "sse", F.LENGTH, "MAX_TOKENS",
                                    ("STOP", "MAX_TOKENS")),
    "gemini_max_tokens_then_stop": ("gemini", _gemini("MAX_TOKENS", "STOP"), "sse", F.LENGTH, "MAX_TOKENS",
                                    ("MAX_TOKENS", "STOP")),
    "chat_length_then_tool_calls": ("openai-chat", _chat("length", "tool_calls"), "sse", F.LENGTH, "length",
                                    ("length", "tool_calls")),
    "chat_tool_calls_then_content_filter": ("openai-chat", _chat("tool_calls", "content_filter"), "sse",
                                            F.CONTENT_FILTER, "content_filter", ("tool_calls", "content_filter")),
    "responses_in_progress_says_incomplete_then_completed": (
        "openai-responses", _responses(_lifecycle("incomplete", incomplete_details={"reason": "max_output_tokens"})),
        "sse", F.LENGTH, "incomplete", ("incomplete", "completed")),
    "responses_in_progress_says_failed_then_completed": (
        "openai-responses", _responses(_lifecycle("failed")), "sse", F.ERROR, "failed", ("failed", "completed")),
    "responses_completed_event_with_status_incomplete": (
        "openai-responses", _responses(status="incomplete", incomplete_details={"reason": "content_filter"}), "sse",
        F.CONTENT_FILTER, "incomplete", ("completed", "incomplete")),
    "responses_completed_with_incomplete_details": (
        "openai-responses", _responses(incomplete_details={"reason": "max_output_tokens"}), "sse", F.LENGTH,
        "max_output_tokens", ("completed", "max_output_tokens")),
    "interactions_status_update_incomplete_then_requires_action": (
        "gemini-interactions", _interactions("incomplete"), "sse", F.LENGTH, "incomplete",
        ("incomplete", "requires_action")),
    "interactions_status_update_failed_then_completed": (
        "gemini-interactions", _interactions("in_progress", "failed", final="completed"), "sse", F.ERROR, "failed",
        ("failed", "completed")),
    "interactions_budget_exceeded_then_requires_action": (
        "gemini-interactions", _interactions("budget_exceeded"), "sse", F.LENGTH, "budget_exceeded",
        ("budget_exceeded", "requires_action")),
    "bedrock_max_tokens_then_tool_use": ("bedrock-converse", _bedrock("max_tokens", "tool_use"), "eventstream",
                                         F.LENGTH, "max_tokens", ("max_tokens",)),
}


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("keep_calls", MODES)
def test_the_worst_end_wins_and_every_end_is_recorded(name, keep_calls):
    """The turn reports its worst end, lists every end it saw, and offers no call to run."""
    provider, data, fmt, worst, raw, seen = CASES[name]
    turn = run_parser(provider, data, keep_calls=keep_calls, format=fmt).turn
    assert (turn.finish_reason, turn.raw_finish_reason) == (worst, raw)
    assert turn.raw_finish_reasons == seen
    assert len(turn.finish_reasons) == len(seen) and worst in turn.finish_reasons
    assert not turn.finished_cleanly and turn.runnable_calls == []


@pytest.mark.parametrize("name", CASES)
def test_nothing_runs_after_a_mixed_end(name):
    """The dispatcher, sync and async, runs none of the turn's calls: each gets a not-run result."""
    provider, data, fmt, *_ = CASES[name]
    turn = toolwire.parse(provider, data, format=fmt)
    spy = Spy("f")
    kinds = spy.run(turn)
    assert spy.ran == [] and kinds and set(kinds) == {"not_run"}


CLEAN_TWICE: dict[str, tuple[str, bytes, str, tuple[str, ...]]] = {
    "anthropic_tool_use_twice": ("anthropic", _anthropic("tool_use", "tool_use"), "sse", ("tool_use",)),
    "anthropic_end_turn_then_tool_use": ("anthropic", _anthropic("end_turn", "tool_use"), "sse",
                                         ("end_turn", "tool_use")),
    "gemini_stop_twice": ("gemini", _gemini("STOP", "STOP"), "sse", ("STOP",)),
    "chat_stop_then_tool_calls": ("openai-chat", _chat("stop", "tool_calls"), "sse", ("stop", "tool_calls")),
    "interactions_in_progress_then_requires_action": ("gemini-interactions", _interactions("in_progress"), "sse",
                                                      ("requires_action",)),
    "responses_completed": ("openai-responses", _responses(), "sse", ("completed",)),
    "bedrock_tool_use": ("bedrock-converse", _bedrock("tool_use"), "eventstream", ("tool_use",)),
}


@pytest.mark.parametrize("name", CLEAN_TWICE)
@pytest.mark.parametrize("keep_calls", MODES)
def test_clean_ends_only_leave_the_turn_clean(name, keep_calls):
    """Several clean ends (or one said twice) are a clean turn: its call runs; a repeated word is listed once."""
    provider, data, fmt, seen = CLEAN_TWICE[name]
    turn = run_parser(provider, data, keep_calls=keep_calls, format=fmt).turn
    assert turn.finished_cleanly and turn.finish_reason is F.TOOL_CALLS
    assert turn.raw_finish_reasons == seen and set(turn.finish_reasons) == {F.TOOL_CALLS}
    if keep_calls:
        assert [c.name for c in turn.runnable_calls] == ["f"]


def test_each_choice_keeps_its_own_ends():
    """Chat ``n = 2``: a choice that said ``length`` and then ``stop`` is unclean, the other one stays clean."""
    data = sse(chunk(tc(0, "c1", "f", "{}")), chunk(content="hi", choice=1), chunk(finish="tool_calls"),
               chunk(finish="length", choice=1), chunk(finish="stop", choice=1), "[DONE]")
    for keep in MODES:
        turn = run_parser("openai-chat", data, keep_calls=keep).turn
        assert [(c.finish_reason, c.raw_finish_reason, c.raw_finish_reasons) for c in turn.choices] == [
            (F.TOOL_CALLS, "tool_calls", ("tool_calls",)), (F.LENGTH, "length", ("length", "stop"))]
        assert turn.choice_finished_cleanly(0) and not turn.choice_finished_cleanly(1)
        assert turn.choices[1].finish_reasons == (F.LENGTH, F.STOP)


def test_a_gemini_candidate_keeps_its_own_ends():
    """Gemini: ``SAFETY`` after ``STOP`` for candidate 1 leaves candidate 0 clean."""
    data = gemini_sse(
        {"candidates": [{"index": 0, "content": {"role": "model", "parts": [fc("f", {})]}, "finishReason": "STOP"},
                        {"index": 1, "content": {"role": "model", "parts": [gemini_text("hi")]},
                         "finishReason": "STOP"}]},
        {"candidates": [{"index": 1, "finishReason": "SAFETY"}]})
    for keep in MODES:
        turn = run_parser("gemini", data, keep_calls=keep).turn
        assert [c.raw_finish_reasons for c in turn.choices] == [("STOP",), ("STOP", "SAFETY")]
        assert turn.choice_finished_cleanly(0) and not turn.choice_finished_cleanly(1)


def test_the_ends_of_a_snapshot_are_those_seen_so_far():
    """``StreamParser.turn`` before ``close()`` lists the ends that arrived; it never counts as finished."""
    parser = toolwire.StreamParser("anthropic")
    data = _anthropic("max_tokens", "tool_use")
    cut = data.index(b"event: message_stop")
    parser.feed(data[:cut])
    assert parser.turn.raw_finish_reasons == ("max_tokens", "tool_use") and not parser.turn.finished_cleanly
    parser.feed(data[cut:])
    parser.close()
    assert parser.turn.finish_reason is F.LENGTH


# ---- Gemini: a prompt's block reason beside candidates ------------------------------------------------------------
def _blocked_body(together: bool) -> list[bytes]:
    cand = {"responseId": "a", "candidates": [{"index": 0, "content": {"role": "model", "parts": [
        {"functionCall": {"name": "save", "args": {"value": 2}}}]}, "finishReason": "STOP"}]}
    block = {"promptFeedback": {"blockReason": "SAFETY"}}
    if together:
        return [json.dumps({**cand, **block}).encode()]
    return [json.dumps(cand).encode(), json.dumps({"candidates": [], **block}).encode()]


@pytest.mark.parametrize("together", [True, False], ids=["same-chunk", "later-chunk"])
def test_a_gemini_block_reason_beside_or_after_a_clean_candidate_runs_nothing(together):
    """A ``promptFeedback.blockReason`` is an unclean end whether it comes alone, with a candidate that ended
    ``STOP`` or in a later chunk: the worst end wins, no call of the turn runs."""
    chunks = _blocked_body(together)
    whole = toolwire.parse("gemini", chunks[0]) if together else None
    sp = toolwire.StreamParser("gemini")
    for c in chunks:
        sp.feed(b"data: " + c + b"\r\n\r\n")
    sp.close()
    streamed = sp.turn
    for turn in (t for t in (whole, streamed) if t is not None):
        assert turn.finish_reason is toolwire.FinishReason.CONTENT_FILTER
        assert not turn.finished_cleanly
        assert turn.runnable_calls == []
