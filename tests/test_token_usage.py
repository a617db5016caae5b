"""Token usage on the Turn (``Turn.token_usage``, a ``toolwire.TokenUsage``): each dialect's usage report read in
one meaning (input with the cached tokens, output with the reasoning tokens), streamed and whole, however the
stream is cut, and never a failure whatever a provider puts in its usage object."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import toolwire
from toolwire import TokenUsage
from toolwire.codecs import codec_for
from toolwire.codecs.base import usage_from


def sse(*payloads, named: bool = False, done: bool = False) -> bytes:
    out = []
    for p in payloads:
        head = f"event: {p['type']}\n" if named else ""
        out.append(f"{head}data: {json.dumps(p)}\n\n")
    if done:
        out.append("data: [DONE]\n\n")
    return "".join(out).encode()


CHAT_USAGE = {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150,
              "prompt_tokens_details": {"cached_tokens": 100, "audio_tokens": 0},
              "completion_tokens_details": {"reasoning_tokens": 12}}
RESPONSES_USAGE = {"input_tokens": 120, "input_tokens_details": {"cached_tokens": 100}, "output_tokens": 30,
                   "output_tokens_details": {"reasoning_tokens": 12}, "total_tokens": 150}
GEMINI_USAGE = {"promptTokenCount": 120, "cachedContentTokenCount": 100, "candidatesTokenCount": 18,
                "thoughtsTokenCount": 12, "toolUsePromptTokenCount": 5, "totalTokenCount": 155}
INTERACTIONS_USAGE = {"total_input_tokens": 120, "total_cached_tokens": 100, "total_output_tokens": 18,
                      "total_thought_tokens": 12, "total_tool_use_tokens": 5, "total_tokens": 155}

#: dialect → (a streamed response reporting usage, the TokenUsage it means)
STREAMS = {
    "openai-chat": (sse(
        {"id": "c1", "object": "chat.completion.chunk", "model": "gpt-x",
         "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi"}, "finish_reason": None}]},
        {"id": "c1", "object": "chat.completion.chunk", "model": "gpt-x",
         "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": None},
        {"id": "c1", "object": "chat.completion.chunk", "model": "gpt-x", "choices": [], "usage": CHAT_USAGE},
        done=True), TokenUsage(input_tokens=120, output_tokens=30, cache_read_input_tokens=100,
                               reasoning_output_tokens=12)),
    "openai-responses": (sse(*[{**e, "sequence_number": i} for i, e in enumerate([
        {"type": "response.created", "response": {"id": "resp_1", "object": "response", "model": "gpt-x",
                                                  "status": "in_progress", "output": [], "usage": None}},
        {"type": "response.output_item.added", "output_index": 0,
         "item": {"type": "message", "id": "msg_1", "role": "assistant", "status": "in_progress", "content": []}},
        {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0,
         "delta": "Hi"},
        {"type": "response.output_item.done", "output_index": 0,
         "item": {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                  "content": [{"type": "output_text", "text": "Hi", "annotations": []}]}},
        {"type": "response.completed", "response": {
            "id": "resp_1", "object": "response", "model": "gpt-x", "status": "completed",
            "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": "Hi", "annotations": []}]}],
            "usage": RESPONSES_USAGE}}])], named=True),
        TokenUsage(input_tokens=120, output_tokens=30, cache_read_input_tokens=100, reasoning_output_tokens=12)),
    "anthropic": (sse(
        {"type": "message_start", "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x", "content": [],
            "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 20, "cache_creation_input_tokens": 30, "cache_read_input_tokens": 70,
                      "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
         "usage": {"output_tokens": 30}},
        {"type": "message_stop"}, named=True),
        TokenUsage(input_tokens=120, output_tokens=30, cache_read_input_tokens=70, cache_creation_input_tokens=30)),
    "gemini": (sse(
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "H"}]}, "index": 0}],
         "usageMetadata": {"promptTokenCount": 120, "totalTokenCount": 120}, "modelVersion": "gemini-x",
         "responseId": "r1"},
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "i"}]}, "finishReason": "STOP",
                         "index": 0}], "usageMetadata": GEMINI_USAGE, "modelVersion": "gemini-x",
         "responseId": "r1"}),
        TokenUsage(input_tokens=125, output_tokens=30, cache_read_input_tokens=100, reasoning_output_tokens=12)),
    "gemini-interactions": (sse(
        {"event_type": "interaction.created", "interaction": {"id": "v1_1", "status": "in_progress",
                                                              "object": "interaction", "model": "gemini-x"}},
        {"event_type": "step.start", "index": 0, "step": {"type": "model_output", "content": []}},
        {"event_type": "step.delta", "index": 0, "delta": {"type": "text", "text": "Hi"}},
        {"event_type": "step.stop", "index": 0},
        {"event_type": "interaction.completed", "interaction": {
            "id": "v1_1", "status": "completed", "object": "interaction", "model": "gemini-x",
            "usage": INTERACTIONS_USAGE}}, done=True),
        TokenUsage(input_tokens=125, output_tokens=30, cache_read_input_tokens=100, reasoning_output_tokens=12)),
}


@pytest.mark.parametrize("provider", list(STREAMS))
def test_each_dialects_usage_is_read_in_one_meaning(provider):
    """The streamed usage of every dialect becomes the same TokenUsage: cached input inside the input, reasoning
    inside the output; the provider's own object stays on Turn.usage."""
    data, expected = STREAMS[provider]
    turn = toolwire.parse(provider, data, format="sse")
    assert turn.finished_cleanly, (turn.error, turn.raw_finish_reason)
    assert turn.token_usage == expected
    assert isinstance(turn.usage, dict)


def test_a_response_without_usage_has_none():
    """No usage reported: token_usage is None (not a TokenUsage of Nones)."""
    from .bodies import PROVIDERS, body

    for provider in PROVIDERS:
        assert toolwire.parse(provider, body(provider, [("c1", "f", {})])).token_usage is None


@pytest.mark.parametrize("provider, raw, expected", [
    ("openai-chat", CHAT_USAGE, TokenUsage(input_tokens=120, output_tokens=30, cache_read_input_tokens=100,
                                           reasoning_output_tokens=12)),
    ("openai-responses", RESPONSES_USAGE, TokenUsage(input_tokens=120, output_tokens=30, cache_read_input_tokens=100,
                                                     reasoning_output_tokens=12)),
    ("anthropic", {"input_tokens": 20, "cache_read_input_tokens": 70, "output_tokens": 9},
     TokenUsage(input_tokens=90, output_tokens=9, cache_read_input_tokens=70)),
    ("gemini", {"promptTokenCount": 7}, TokenUsage(input_tokens=7)),  # a blocked prompt: no output counted
    ("gemini-interactions", {"total_input_tokens": 7, "total_reasoning_tokens": 3},  # the older schema's name
     TokenUsage(input_tokens=7, output_tokens=3, reasoning_output_tokens=3)),
    ("anthropic", {"output_tokens": 9}, TokenUsage(output_tokens=9)),  # no input count: no input total
])
def test_whole_bodies_and_partial_reports(provider, raw, expected):
    """Whole (non-streaming) reports, and reports that leave counts out: a count not reported is None."""
    assert usage_from(raw, codec_for(provider).read_usage) == expected


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=24), inner,
                                                                                max_size=6), max_leaves=20)
KEYS = ["prompt_tokens", "completion_tokens", "input_tokens", "output_tokens", "cache_read_input_tokens",
        "cache_creation_input_tokens", "promptTokenCount", "candidatesTokenCount", "thoughtsTokenCount",
        "toolUsePromptTokenCount", "cachedContentTokenCount", "total_input_tokens", "total_output_tokens",
        "total_thought_tokens", "total_cached_tokens", "total_tool_use_tokens", "prompt_tokens_details",
        "completion_tokens_details", "input_tokens_details", "output_tokens_details"]
USAGE = st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=8),
                        JSON | st.dictionaries(st.sampled_from(["cached_tokens", "reasoning_tokens"]), JSON),
                        max_size=10)


@settings(max_examples=300)
@given(raw=USAGE | JSON, provider=st.sampled_from(list(STREAMS)))
def test_any_usage_object_gives_counts_or_none_never_an_error(raw, provider):
    """Whatever a provider puts in its usage object: None or a TokenUsage of non-negative 64-bit counts."""
    usage = usage_from(raw, codec_for(provider).read_usage)
    assert usage is None or isinstance(usage, TokenUsage)
    if usage is not None:
        for value in (usage.input_tokens, usage.output_tokens, usage.cache_read_input_tokens,
                      usage.cache_creation_input_tokens, usage.reasoning_output_tokens):
            assert value is None or (type(value) is int and 0 <= value < 2 ** 63)


@settings(max_examples=60)
@given(data=st.data(), provider=st.sampled_from(list(STREAMS)))
def test_the_usage_is_the_same_however_the_stream_is_cut(data, provider):
    """Fed in pieces of any size, every dialect's stream gives the same token usage as whole."""
    raw, expected = STREAMS[provider]
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=12)))
    parser = toolwire.StreamParser(provider, format="sse")
    start = 0
    for cut in [*cuts, len(raw)]:
        parser.feed(raw[start:cut])
        start = cut
    parser.close()
    assert parser.turn.token_usage == expected
