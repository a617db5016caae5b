"""Failure mode 20 (docs/failure-modes.md): Mistral accepts only 9-character alphanumeric call ids; ids from
another provider are mapped."""

from __future__ import annotations

import re

import pytest

import toolwire
from toolwire.history import remap_call_ids

from ..wire import chunk, sse, tc


def _chat_history():
    turn = toolwire.parse("openai-chat", sse(chunk(tc(0, "call_Ab12Cd34Ef56Gh78Ij90", "f", '{"a": 1}')),
                                             chunk(tc(1, "toolu_01XyZ-with_dash", "g", "{}")),
                                             chunk(finish="tool_calls"), "[DONE]"))
    results = [toolwire.ToolResult(call_id=c.call_id, local_id=c.local_id, name=c.name, content="ok",
                                   is_error=False, kind=toolwire.ResultKind.OK) for c in turn.calls]
    return [{"role": "user", "content": "hi"}, *toolwire.history_messages(turn, results)]


def test_pitfall_20_chat_ids_are_mapped_to_nine_alphanumerics_consistently():
    """Every tool_call id and its tool_call_id become the same 9-character alphanumeric id."""
    history = _chat_history()
    mapped, mapping = remap_call_ids("openai-chat", history)
    calls = mapped[1]["tool_calls"]
    answers = [m["tool_call_id"] for m in mapped if m.get("role") == "tool"]
    assert [c["id"] for c in calls] == answers
    assert all(re.fullmatch(r"[a-zA-Z0-9]{9}", i) for i in answers)
    assert len(set(answers)) == 2
    assert set(mapping) == {"call_Ab12Cd34Ef56Gh78Ij90", "toolu_01XyZ-with_dash"}
    assert history[1]["tool_calls"][0]["id"] == "call_Ab12Cd34Ef56Gh78Ij90"  # the input is not modified


def test_pitfall_20_mapping_is_deterministic_and_keeps_valid_ids():
    """The same conversation maps the same way; an id that already fits the rule is kept."""
    history = _chat_history()
    assert remap_call_ids("openai-chat", history) == remap_call_ids("openai-chat", history)
    keep = [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "abcDEF123", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "abcDEF123", "content": "x"}]
    assert remap_call_ids("openai-chat", keep) == (keep, {})


def test_pitfall_20_anthropic_tool_use_and_results_are_renamed_together():
    """Anthropic tool_use ids and their tool_result blocks stay paired after the mapping."""
    history = [{"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01AbCdEf", "name": "f",
                                                  "input": {}}]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01AbCdEf",
                                             "content": "ok"}]}]
    mapped, mapping = remap_call_ids("anthropic", history)
    new = mapping["toolu_01AbCdEf"]
    assert mapped[0]["content"][0]["id"] == new == mapped[1]["content"][0]["tool_use_id"]


def test_pitfall_20_other_providers_and_rules_are_usage_errors():
    """Unsupported providers and unknown rules raise UsageError."""
    with pytest.raises(toolwire.UsageError):
        remap_call_ids("gemini", [])
    with pytest.raises(toolwire.UsageError):
        remap_call_ids("openai-chat", [], rule="cohere")
