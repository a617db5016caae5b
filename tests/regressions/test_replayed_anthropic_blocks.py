"""A replayed Anthropic block (a second ``content_block_start`` for an index that already started, or a block
that repeats an earlier block's id) is a protocol error in both parser modes: the streaming mode, which forgets
a block once it stopped, must not hand the same call over twice.
"""

from __future__ import annotations

import pytest

import toolwire

from ..wire import anthropic_events, sse
from .streams import MODES, Spy, both_modes

CALL = {"type": "tool_use", "id": "toolu_1", "name": "first", "fragments": ['{"a": 1}']}
OTHER = {"type": "tool_use", "id": "toolu_2", "name": "first", "fragments": ['{"a": 2}']}


def _block(index: int, block_id: str, block_type: str = "tool_use", fragment: str = '{"a": 1}') -> list[dict]:
    return [{"type": "content_block_start", "index": index,
             "content_block": {"type": block_type, "id": block_id, "name": "first", "input": {}}},
            {"type": "content_block_delta", "index": index,
             "delta": {"type": "input_json_delta", "partial_json": fragment}},
            {"type": "content_block_stop", "index": index}]


def _with(*extra: list[dict]) -> bytes:
    """One tool_use block (index 0), then ``extra`` blocks, then message_delta and message_stop."""
    evs = anthropic_events([CALL])
    head, tail = evs[:-2], evs[-2:]
    return sse(*head, *[e for block in extra for e in block], *tail, events=True)


REPLAYS = {
    "same_block_replayed_at_its_index": _with(_block(0, "toolu_1")),
    "other_block_at_a_used_index": _with(_block(0, "toolu_9")),
    "same_id_at_a_new_index": _with(_block(1, "toolu_1")),
    "same_id_after_other_blocks": _with(_block(1, "toolu_2"), _block(2, "toolu_3"), _block(3, "toolu_1")),
    "server_tool_repeating_a_client_id": _with(_block(1, "toolu_1", "server_tool_use")),
    "second_stop_of_a_stopped_block": _with([{"type": "content_block_stop", "index": 0}]),
}


@pytest.mark.parametrize("name", REPLAYS)
def test_a_replayed_anthropic_block_is_a_protocol_error_in_both_modes(name):
    """Both modes: a protocol error on the turn, one CallCompleted for ``toolu_1``, nothing runnable."""
    outs = both_modes("anthropic", REPLAYS[name])
    for keep, out in zip(MODES, outs):
        assert out.turn.error is not None and out.turn.error.type == "protocol_error", (keep, out.turn.error)
        assert not out.turn.finished_cleanly and out.turn.runnable_calls == []
        assert out.completed.count("toolu_1") == 1, keep
    assert outs[0].ends == outs[1].ends


@pytest.mark.parametrize("name", REPLAYS)
def test_a_replayed_anthropic_block_runs_nothing(name):
    """The dispatcher runs nothing of a turn with a replayed block."""
    spy = Spy("first")
    assert set(spy.run(toolwire.parse("anthropic", REPLAYS[name]))) == {"not_run"} and spy.ran == []


def test_distinct_blocks_in_order_are_clean_in_both_modes():
    """Several blocks with distinct indexes and ids stay a clean turn in both modes."""
    for out in both_modes("anthropic", sse(*anthropic_events([CALL, OTHER]), events=True)):
        assert out.turn.finished_cleanly and out.completed == ["toolu_1", "toolu_2"]


def test_max_tokens_cuts_the_block_with_the_highest_index_in_both_modes():
    """With blocks stopped out of index order, a max_tokens finish truncates the highest-index block in both
    modes (the streaming mode must not take the last one stopped instead)."""
    evs = anthropic_events([], "max_tokens")
    head, tail = evs[:1], evs[1:]
    text = [{"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}},
            {"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "hi"}},
            {"type": "content_block_stop", "index": 2}]
    data = sse(*head, *text, *_block(1, "toolu_1"), *tail, events=True)
    outs = both_modes("anthropic", data)
    assert outs[0].ends == outs[1].ends == [("tw-0", "complete", None, {"a": 1})]
    assert all(o.turn.finish_reason is toolwire.FinishReason.LENGTH for o in outs)
