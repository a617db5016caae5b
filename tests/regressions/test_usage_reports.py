"""Usage reports that lose counts: Anthropic's ``message_delta`` usage replaced the ``message_start`` usage
instead of updating it, so a streamed turn kept only the output tokens (docs/failure-modes.md 45)."""

from __future__ import annotations

import json

import pytest

import toolwire


def _events(delta_usage: dict) -> bytes:
    events = [
        {"type": "message_start", "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x", "content": [],
            "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 410, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 2000,
                      "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Done."}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
         "usage": delta_usage},
        {"type": "message_stop"}]
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


@pytest.mark.parametrize("delta_usage", [
    {"output_tokens": 57},  # the long-standing form: output only
    {"input_tokens": None, "cache_creation_input_tokens": None, "cache_read_input_tokens": None,
     "output_tokens": 57},  # the current form, nulls where nothing changed
])
def test_anthropic_message_delta_usage_keeps_the_input_counts_of_message_start(delta_usage):
    """The message_delta usage updates the message_start usage (its counts are cumulative; a field it leaves out
    or sends as null keeps its value): the input and cache counts survive, the output is the final one."""
    turn = toolwire.parse("anthropic", _events(delta_usage), format="sse")
    assert turn.finished_cleanly
    assert turn.usage == {"input_tokens": 410, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 2000,
                          "output_tokens": 57}
    assert turn.token_usage == toolwire.TokenUsage(input_tokens=2410, output_tokens=57, cache_read_input_tokens=2000,
                                                   cache_creation_input_tokens=0)


def test_anthropic_message_delta_usage_with_new_counts_replaces_them():
    """A count message_delta does send (server tool use may add input) is the one kept."""
    turn = toolwire.parse("anthropic", _events({"input_tokens": 450, "output_tokens": 57}), format="sse")
    assert turn.usage["input_tokens"] == 450 and turn.token_usage.input_tokens == 2450
