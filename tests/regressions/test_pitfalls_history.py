"""Regression tests for the entries of docs/failure-modes.md about results and history (all five dialects).

17: Gemini ``functionCall.id`` must be echoed in ``functionResponse.id`` where the endpoint uses ids and omitted
    where it rejects them; pairing results by position when the order differs gives 400.
18: Anthropic thinking and redacted_thinking blocks must be replayed verbatim before ``tool_use``, or 400.
19: Responses: a ``function_call`` replayed without its ``reasoning`` item (or the reverse) gives 400; results
    answer ``call_id``, not the ``fc_…`` item id.
21: malformed arguments kept in history poison every later request: replay them in a form the provider accepts.
24: results serialised in completion order instead of call order break provider prompt caching.
25: an orphan ``tool_use`` without ``tool_result`` after truncation: the next request is rejected.
"""

from __future__ import annotations

import json
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolwire
from toolwire import CallState, ResultKind
from toolwire.codecs.results import INVALID_ARGUMENTS_KEY
from toolwire.registry import Dispatcher, Registry, Tool

from ..test_history_repair import strip_results, well_formed
from ..test_results_encoding import (
    CUT,
    DIALECTS,
    REDACTED,
    REASONING,
    THINKING,
    TURNS,
    anthropic_turn,
    check_sdk,
    gemini_content,
    gemini_turn,
    responses_turn,
    results_for,
)
from ..wire import anthropic_events, chunk, sse, tc

K = ResultKind


# ---- 17 ----------------------------------------------------------------------------------------------------------
def test_pitfall_17_gemini_response_ids_echo_the_calls_exactly_and_pair_by_id():
    """functionResponse.id echoes each call's id in call order; absent with echo_ids=False or id-less calls."""
    turn = gemini_turn()
    results = results_for(turn, K.OK)  # given in reverse order
    [content] = toolwire.encode_results(turn, results)  # one user content answers every call
    parts = content["parts"]
    assert [(p["functionResponse"]["id"], p["functionResponse"]["name"]) for p in parts] == [
        ("g_a", "get_weather"), ("g_b", "lookup"), ("g_c", "get_time")]
    assert all("id" not in p["functionResponse"]
               for p in toolwire.encode_results(turn, results, echo_ids=False)[0]["parts"])
    no_ids = gemini_turn(ids=False)
    assert all("id" not in p["functionResponse"]
               for p in toolwire.encode_results(no_ids, results_for(no_ids, K.OK))[0]["parts"])


def test_pitfall_17_repair_pairs_stored_responses_by_id_not_position():
    """Stored responses in another order than the calls are paired by id, and lost ids are put back."""
    model = {"role": "model", "parts": [{"functionCall": {"id": "a1", "name": "f", "args": {}},
                                         "thoughtSignature": "c2ln"},
                                        {"functionCall": {"id": "b2", "name": "f", "args": {"x": 1}}}]}
    stored = [model, {"role": "user", "parts": [
        {"functionResponse": {"id": "b2", "name": "f", "response": {"output": "B"}}},
        {"functionResponse": {"name": "f", "response": {"output": "A"}}}]}]
    out, report = toolwire.repair_history("gemini", stored)
    assert [(p["functionResponse"].get("id"), p["functionResponse"]["response"]) for p in out[1]["parts"]] == [
        ("a1", {"output": "A"}), ("b2", {"output": "B"})]
    assert {a.kind.value for a in report.actions} == {"fixed_response_id", "reordered_results"}
    gemini_content(out[1])


# ---- 18 ----------------------------------------------------------------------------------------------------------
def test_pitfall_18_thinking_and_redacted_thinking_replayed_verbatim_before_tool_use():
    """Signed thinking and redacted_thinking blocks are replayed byte for byte before the tool_use blocks."""
    turn = anthropic_turn()
    assistant, results = toolwire.history_messages(turn, results_for(turn, K.OK))
    assert assistant["content"][0] == THINKING
    assert assistant["content"][1] == REDACTED
    assert [b["type"] for b in assistant["content"]] == ["thinking", "redacted_thinking", "text", "tool_use",
                                                         "tool_use", "tool_use"]
    assert results["role"] == "user" and all(b["type"] == "tool_result" for b in results["content"])
    check_sdk("anthropic", assistant)


def test_pitfall_18_repair_leaves_thinking_blocks_untouched():
    """Repairing a history with thinking blocks changes only the results, never the signed blocks."""
    turn = anthropic_turn()
    assistant, _ = toolwire.history_messages(turn, results_for(turn, K.OK))
    out, report = toolwire.repair_history("anthropic", [assistant])
    assert out[0] == assistant
    assert [a.kind.value for a in report.actions] == ["inserted_result"] * 3


# ---- 19 ----------------------------------------------------------------------------------------------------------
def test_pitfall_19_reasoning_item_replayed_right_before_the_function_calls():
    """The reasoning item is replayed right before the function_calls; outputs answer call_id, never fc_ ids."""
    turn = responses_turn()
    items = toolwire.history_messages(turn, results_for(turn, K.OK))
    assert items[0] == REASONING
    assert [i["type"] for i in items[1:4]] == ["function_call"] * 3
    assert [i["id"] for i in items[1:4]] == ["fc_1", "fc_2", "fc_3"]
    outputs = items[4:]
    assert [o["call_id"] for o in outputs] == ["call_a", "call_b", "call_c"]
    assert not any(o["call_id"].startswith("fc_") for o in outputs)
    for i in items:
        check_sdk("openai-responses", i)


def test_pitfall_19_repair_keeps_reasoning_adjacent_to_its_call():
    """Repair moves an output out from between reasoning and its call and drops a reasoning item left alone."""
    rs = dict(REASONING)
    fc = {"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "f", "arguments": "{}"}
    out_a = {"type": "function_call_output", "call_id": "call_a", "output": "ok"}
    user = {"type": "message", "role": "user", "content": "next"}
    out, report = toolwire.repair_history("openai-responses", [rs, out_a, fc, user, dict(rs, id="rs_2"), user])
    assert out == [rs, fc, out_a, user, user]
    assert [a.kind.value for a in report.actions] == ["dropped_reasoning", "moved_result"]


# ---- 21 ----------------------------------------------------------------------------------------------------------
def _replayed_arguments(provider: str, msgs: list) -> list:
    """The arguments of each replayed call, as the wire carries them."""
    if provider == "openai-chat":
        return [t["function"]["arguments"] for t in msgs[0]["tool_calls"]]
    if provider == "openai-responses":
        return [i["arguments"] for i in msgs if i.get("type") == "function_call"]
    if provider == "anthropic":
        return [b["input"] for b in msgs[0]["content"] if b["type"] == "tool_use"]
    if provider == "gemini":
        return [p["functionCall"]["args"] for p in msgs[0]["parts"] if "functionCall" in p]
    if provider == "gemini-interactions":
        return [s["arguments"] for s in msgs if s["type"] == "function_call"]
    from ..dialects import adapter

    return adapter(provider).replayed_arguments(msgs)


@pytest.mark.parametrize("provider", DIALECTS)
def test_pitfall_21_malformed_arguments_are_replayed_in_an_accepted_form(provider):
    """Unparsable arguments are replayed as {"_invalid_arguments": raw} in every dialect, valid ones unchanged."""
    turn = TURNS[provider]()
    bad = turn.calls[1]
    assert bad.args is None and bad.raw_arguments
    results = Dispatcher(Registry([Tool.from_function(lambda key: key, effect="read", name="lookup")])).run(
        turn, conversation_id="c")
    assert results[1].kind is K.INVALID_ARGUMENTS
    msgs = toolwire.history_messages(turn, results)
    args = [json.loads(a) if isinstance(a, str) else a for a in _replayed_arguments(provider, msgs)]
    assert args == [{"city": "Paris"}, {INVALID_ARGUMENTS_KEY: bad.raw_arguments}, {}]
    for m in msgs:
        check_sdk(provider, m)
    assert well_formed(provider, msgs) == []


@pytest.mark.parametrize("provider", DIALECTS)
def test_pitfall_21_stored_malformed_arguments_are_replaced_by_repair(provider):
    """Raw malformed arguments in a stored history are replaced by the accepted form, and reported."""
    turn = TURNS[provider]()
    msgs = toolwire.history_messages(turn, results_for(turn, K.INVALID_ARGUMENTS))
    raw = turn.calls[1].raw_arguments
    poisoned = json.loads(json.dumps(msgs))
    if provider == "openai-chat":
        poisoned[0]["tool_calls"][1]["function"]["arguments"] = raw
    elif provider == "openai-responses":
        next(i for i in poisoned if i.get("call_id") == "call_b" and i["type"] == "function_call")["arguments"] = raw
    elif provider == "anthropic":
        poisoned[0]["content"][4]["input"] = raw
    elif provider == "gemini":
        poisoned[0]["parts"][1]["functionCall"]["args"] = raw
    elif provider == "gemini-interactions":
        poisoned[2]["arguments"] = raw
    else:
        from ..dialects import adapter

        adapter(provider).poison_arguments(poisoned, raw)
    out, report = toolwire.repair_history(provider, poisoned)
    assert out == msgs
    assert [a.kind.value for a in report.actions] == ["replaced_arguments"]
    assert report.actions[0].call_id == turn.calls[1].call_id


# ---- 24 ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("provider", DIALECTS)
@given(order=st.permutations([0, 1, 2]))
def test_pitfall_24_encoded_results_follow_call_order_for_any_completion_order(provider, order):
    """Whatever order the results arrive in, the encoded answer is byte-identical and in call order."""
    turn = TURNS[provider]()
    results = results_for(turn, K.OK)[::-1]
    reference = json.dumps(toolwire.encode_results(turn, results))
    shuffled = [results[i] for i in order]
    assert json.dumps(toolwire.encode_results(turn, shuffled)) == reference


def test_pitfall_24_concurrent_reads_finishing_out_of_order_are_answered_in_call_order():
    """Three reads run concurrently and finish last-first; the tool messages still follow the call order."""
    done: list[str] = []
    finished = {n: threading.Event() for n in ("first", "second", "third")}

    def run(name: str, after: str | None) -> str:
        if after is not None:
            assert finished[after].wait(5)
        done.append(name)
        finished[name].set()
        return name

    def first() -> str:
        return run("first", "second")

    def second() -> str:
        return run("second", "third")

    def third() -> str:
        return run("third", None)

    turn = toolwire.parse("openai-chat", sse(
        chunk(tc(0, "call_1", "first", "{}")), chunk(tc(1, "call_2", "second", "{}")),
        chunk(tc(2, "call_3", "third", "{}")), chunk(finish="tool_calls"), "[DONE]"))
    tools = [Tool.from_function(f, effect="read") for f in (first, second, third)]
    results = Dispatcher(Registry(tools), max_workers=3).run(turn, conversation_id="c")
    assert done == ["third", "second", "first"]  # completion order
    encoded = toolwire.encode_results(turn, results[::-1])
    assert [(m["tool_call_id"], m["content"]) for m in encoded] == [
        ("call_1", "first"), ("call_2", "second"), ("call_3", "third")]


# ---- 25 ----------------------------------------------------------------------------------------------------------
def test_pitfall_25_tool_use_cut_by_max_tokens_is_answered_in_the_next_message():
    """A tool_use cut by max_tokens is replayed in accepted form and answered with a not_run tool_result."""
    events = anthropic_events([{"type": "tool_use", "id": "toolu_cut", "name": "save",
                                "fragments": ['{"path": "/tmp/a", "dry_run": ']}],
                              stop_reason="max_tokens")
    turn = toolwire.parse("anthropic", sse(*events, events=True))
    (call,) = turn.calls
    assert call.state is CallState.TRUNCATED
    results = Dispatcher(Registry([Tool.from_function(lambda path, dry_run: 1, effect="write", name="save")])).run(
        turn, conversation_id="c")
    assert [r.kind for r in results] == [K.NOT_RUN]
    assistant, answer = toolwire.history_messages(turn, results)
    assert assistant["content"][0]["input"] == {INVALID_ARGUMENTS_KEY: '{"path": "/tmp/a", "dry_run": '}
    assert answer["content"] == [{"type": "tool_result", "tool_use_id": "toolu_cut", "content": results[0].content,
                                  "is_error": True}]
    check_sdk("anthropic", assistant)
    check_sdk("anthropic", answer)


@pytest.mark.parametrize("provider", DIALECTS)
def test_pitfall_25_every_truncated_call_gets_exactly_one_result(provider):
    """In every dialect a turn cut by its token limit is appended with one not_run result per call."""
    turn = CUT[provider]()
    results = Dispatcher(Registry([Tool.from_function(lambda city: city, effect="read", name="get_weather")])).run(
        turn, conversation_id="c")
    msgs = toolwire.history_messages(turn, results)
    assert well_formed(provider, msgs) == []
    assert toolwire.repair_history(provider, msgs)[1].actions == []


@pytest.mark.parametrize("provider", DIALECTS)
def test_pitfall_25_stored_history_with_orphan_calls_is_repaired_before_the_next_request(provider):
    """A stored history that kept the cut assistant message but no results gets one error result per call."""
    turn = CUT[provider]()
    replay_only = strip_results(provider, toolwire.history_messages(turn, []))
    out, report = toolwire.repair_history(provider, replay_only)
    assert [a.kind.value for a in report.actions] == ["inserted_result"] * len(turn.calls)
    assert well_formed(provider, out) == []
    for m in out:
        check_sdk(provider, m)
