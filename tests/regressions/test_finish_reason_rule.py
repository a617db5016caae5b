"""One finish-reason rule for every dialect, per choice and in both parser modes: a choice that ended cleanly
with at least one client call (any state) is ``tool_calls``, one without is ``stop``; ``pause`` stays ``pause``
and the unclean reasons are unchanged. ``raw_finish_reason`` keeps the provider's word.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from toolwire import FinishReason

from ..test_codec_gemini import fc
from ..test_codec_gemini import chunk as gemini_chunk
from ..test_codec_gemini import sse as gemini_sse
from ..test_codec_gemini import text as gemini_text
from ..test_codec_gemini_interactions import completed, created, function_call, output
from ..test_codec_gemini_interactions import sse as interactions_sse
from ..test_codec_openai_responses import MCP, function_item, message_item, sse_bytes, stream, whole_item
from ..wire import anthropic_events, chunk, sse, tc
from .streams import both_modes, run_parser

F = FinishReason
CALL = {"type": "tool_use", "id": "toolu_1", "name": "f", "fragments": ['{"a": 1}']}
BAD_JSON = {"type": "tool_use", "id": "toolu_1", "name": "f", "fragments": ['{"a": ']}
SERVER = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "fragments": ['{"q": "x"}']}
TEXT = {"type": "text", "text": "Hello"}


def _anthropic(blocks: list[dict], stop_reason: str) -> bytes:
    return sse(*anthropic_events(blocks, stop_reason), events=True)


def _chat(finish: str, *calls: dict) -> bytes:
    return sse(*(chunk(c) for c in calls), chunk(content="hi") if not calls else chunk(), chunk(finish=finish),
               "[DONE]")


#: name -> (provider, data, canonical finish reason, raw finish reason)
CASES: dict[str, tuple[str, bytes, FinishReason, str]] = {
    "chat_tool_calls_with_a_call": ("openai-chat", _chat("tool_calls", tc(0, "c1", "f", "{}")), F.TOOL_CALLS,
                                    "tool_calls"),
    "chat_stop_with_a_call": ("openai-chat", _chat("stop", tc(0, "c1", "f", "{}")), F.TOOL_CALLS, "stop"),
    "chat_tool_calls_without_a_call": ("openai-chat", _chat("tool_calls"), F.STOP, "tool_calls"),
    "chat_stop_without_a_call": ("openai-chat", _chat("stop"), F.STOP, "stop"),
    "chat_invalid_json_call_still_counts": ("openai-chat", _chat("stop", tc(0, "c1", "f", '{"a":')), F.TOOL_CALLS,
                                            "stop"),
    "chat_length_with_a_call_is_length": ("openai-chat", _chat("length", tc(0, "c1", "f", '{"a":')), F.LENGTH,
                                          "length"),
    "anthropic_tool_use": ("anthropic", _anthropic([CALL], "tool_use"), F.TOOL_CALLS, "tool_use"),
    "anthropic_end_turn_with_a_call": ("anthropic", _anthropic([CALL], "end_turn"), F.TOOL_CALLS, "end_turn"),
    "anthropic_end_turn_with_text": ("anthropic", _anthropic([TEXT], "end_turn"), F.STOP, "end_turn"),
    "anthropic_server_tool_only_is_stop": ("anthropic", _anthropic([SERVER, TEXT], "end_turn"), F.STOP, "end_turn"),
    "anthropic_invalid_json_call_still_counts": ("anthropic", _anthropic([BAD_JSON], "tool_use"), F.TOOL_CALLS,
                                                 "tool_use"),
    "anthropic_pause_turn_stays_pause": ("anthropic", _anthropic([SERVER], "pause_turn"), F.PAUSE, "pause_turn"),
    "anthropic_max_tokens_is_length": ("anthropic", _anthropic([CALL], "max_tokens"), F.LENGTH, "max_tokens"),
    "anthropic_refusal_is_content_filter": ("anthropic", _anthropic([TEXT], "refusal"), F.CONTENT_FILTER,
                                            "refusal"),
    "responses_completed_with_a_call": ("openai-responses", sse_bytes(stream(
        function_item(0, "fc_1", "call_1", "f", '{"a": 1}'))), F.TOOL_CALLS, "completed"),
    "responses_completed_with_a_hosted_tool_only": ("openai-responses", sse_bytes(stream(
        whole_item(0, MCP), message_item(1, "msg_1", "Done."))), F.STOP, "completed"),
    "responses_incomplete_is_length": ("openai-responses", sse_bytes(stream(
        function_item(0, "fc_1", "call_1", "f", '{"a":', args_done=False, item_done=False),
        terminal="incomplete")), F.LENGTH, "incomplete"),
    "gemini_stop_with_a_call": ("gemini", gemini_sse(gemini_chunk(fc("f", {"a": 1}), finish="STOP")), F.TOOL_CALLS,
                                "STOP"),
    "gemini_stop_with_text": ("gemini", gemini_sse(gemini_chunk(gemini_text("Hello"), finish="STOP")), F.STOP,
                              "STOP"),
    "gemini_max_tokens_is_length": ("gemini", gemini_sse(gemini_chunk(gemini_text("Hel"), finish="MAX_TOKENS")),
                                    F.LENGTH, "MAX_TOKENS"),
    "interactions_requires_action_with_a_call": ("gemini-interactions", interactions_sse(
        created(), function_call(0, "fc_1", "f", ['{"a": 1}']), completed("requires_action")), F.TOOL_CALLS,
        "requires_action"),
    "interactions_completed_with_a_call": ("gemini-interactions", interactions_sse(
        created(), function_call(0, "fc_1", "f", ['{"a": 1}']), completed("completed")), F.TOOL_CALLS, "completed"),
    "interactions_requires_action_without_a_call": ("gemini-interactions", interactions_sse(
        created(), output(0, "Hello"), completed("requires_action")), F.STOP, "requires_action"),
    "interactions_completed_with_text": ("gemini-interactions", interactions_sse(
        created(), output(0, "Hello"), completed("completed")), F.STOP, "completed"),
    "interactions_incomplete_is_length": ("gemini-interactions", interactions_sse(
        created(), output(0, "Hel"), completed("incomplete")), F.LENGTH, "incomplete"),
}


@pytest.mark.parametrize("name", CASES)
def test_the_finish_reason_follows_one_rule_in_every_dialect_and_both_modes(name):
    """The canonical finish reason depends on how the choice ended and whether it has client calls only."""
    provider, data, finish, raw = CASES[name]
    for out in both_modes(provider, data):
        assert (out.turn.finish_reason, out.turn.raw_finish_reason) == (finish, raw)


def test_the_rule_applies_to_each_chat_choice():
    """Chat ``n = 2``: a choice with a call that said ``stop`` is tool_calls, one with text that said
    ``tool_calls`` is stop."""
    data = sse(chunk(tc(0, "c1", "f", "{}")), chunk(content="hi", choice=1), chunk(finish="stop"),
               chunk(finish="tool_calls", choice=1), "[DONE]")
    for keep in (True, False):
        turn = run_parser("openai-chat", data, keep_calls=keep).turn
        assert [(c.finish_reason, c.raw_finish_reason) for c in turn.choices] == [
            (F.TOOL_CALLS, "stop"), (F.STOP, "tool_calls")]


def test_the_rule_applies_to_each_gemini_candidate():
    """Gemini: the candidate with a call is tool_calls, the one with text is stop, both from ``STOP``."""
    data = gemini_sse({"candidates": [
        {"index": 0, "content": {"role": "model", "parts": [{"text": "hi"}]}, "finishReason": "STOP"},
        {"index": 1, "content": {"role": "model", "parts": [fc("f", {})]}, "finishReason": "STOP"}]})
    for keep in (True, False):
        turn = run_parser("gemini", data, keep_calls=keep).turn
        assert [c.finish_reason for c in turn.choices] == [F.STOP, F.TOOL_CALLS]


def test_the_parse_command_reports_the_canonical_finish_reason():
    """``toolwire parse`` prints the same canonical finish reason as the Turn (its keys are unchanged)."""
    out = subprocess.run([sys.executable, "-m", "toolwire.cli", "parse", "--provider", "anthropic", "-"],
                         input=CASES["anthropic_end_turn_with_a_call"][1], capture_output=True, check=False)
    doc = json.loads(out.stdout)
    assert (doc["finish_reason"], doc["raw_finish_reason"]) == ("tool_calls", "end_turn")
