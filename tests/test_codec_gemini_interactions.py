"""The Gemini Interactions codec: table-driven cases (current "steps" schema, legacy "outputs" schema, bodies),
typed errors for bad input, and properties of generated streams. There are no recordings: the streams are
written from the API's documentation and the SDK's types (``google/genai/_gaos/types/interactions``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolwire
from toolwire import CallState, FinishReason, ProblemCode

P = "gemini-interactions"
IID = "v1_ChdTb21lSW50ZXJhY3Rpb24"


# ---- wire helpers -----------------------------------------------------------------------------------------
def ev(event_type: str, **fields: Any) -> dict:
    return {"event_type": event_type, **fields}


def created(status: str = "in_progress") -> dict:
    return ev("interaction.created", interaction={"id": IID, "status": status, "object": "interaction",
                                                  "model": "gemini-3-flash-preview"}, event_id="e0")


def completed(status: str, **extra: Any) -> dict:
    return ev("interaction.completed", interaction={"id": IID, "status": status, **extra},
              event_id="e9")


def step_start(index: int, step: dict) -> dict:
    return ev("step.start", index=index, step=step)


def delta(index: int, d: dict) -> dict:
    return ev("step.delta", index=index, delta=d)


def args_delta(index: int, fragment: str) -> dict:
    return delta(index, {"type": "arguments_delta", "arguments": fragment})


def step_stop(index: int) -> dict:
    return ev("step.stop", index=index, step_usage={"total_tokens": 3})


def function_call(index: int, id: str, name: str, fragments: list[str], start_args: Any = None) -> list[dict]:
    """A function_call step streamed as ``arguments_delta`` fragments."""
    step = {"type": "function_call", "id": id, "name": name, "arguments": {} if start_args is None else start_args}
    return [step_start(index, step), *[args_delta(index, f) for f in fragments], step_stop(index)]


def thought(index: int, signature: str | None = "c2lnbmF0dXJl") -> list[dict]:
    evs = [step_start(index, {"type": "thought"})]
    if signature is not None:
        evs.append(delta(index, {"type": "thought_signature", "signature": signature}))
    return evs + [step_stop(index)]


def output(index: int, *texts: str) -> list[dict]:
    return [step_start(index, {"type": "model_output"}),
            *[delta(index, {"type": "text", "text": t}) for t in texts], step_stop(index)]


def sse(*events: Any, sep: str = "\n", done: bool = True) -> bytes:
    """SSE bytes with an ``event:`` line naming each payload's ``event_type``, then ``data: [DONE]``."""
    out = []
    for e in events:
        if isinstance(e, list):
            out.append(sse(*e, sep=sep, done=False).decode())  # a step's events, as the helpers above give
            continue
        lines = [f"event: {e['event_type']}"] if "event_type" in e else []
        lines.append(f"data: {json.dumps(e, ensure_ascii=False)}")
        out.append(sep.join(lines) + sep + sep)
    if done:
        out.append(f"data: [DONE]{sep}{sep}")
    return "".join(out).encode()


def calls_of(turn):
    return [(c.call_id, c.name, c.args, c.state.value) for c in turn.calls]


# ---- table-driven cases -----------------------------------------------------------------------------------
CASES: dict[str, tuple[bytes, list, str | None, FinishReason | None, bool]] = {
    "function_call_in_fragments": (
        sse(created(), ev("interaction.status_update", interaction_id=IID, status="in_progress"), thought(0),
            function_call(1, "fc_1", "get_weather", ['{"location":"Par', 'is"}']), completed("requires_action")),
        [("fc_1", "get_weather", {"location": "Paris"}, "complete")], "requires_action", FinishReason.TOOL_CALLS,
        True),
    "parallel_calls": (
        sse(created(), function_call(0, "fc_1", "get_weather", ['{"location":', '"Paris"}']),
            function_call(1, "fc_2", "get_weather", ['{"location":"Oslo"}']), completed("requires_action")),
        [("fc_1", "get_weather", {"location": "Paris"}, "complete"),
         ("fc_2", "get_weather", {"location": "Oslo"}, "complete")], "requires_action", FinishReason.TOOL_CALLS, True),
    "whole_arguments_on_the_start": (
        sse(created(), function_call(0, "fc_1", "f", [], start_args={"a": [1, 2]}), completed("requires_action")),
        [("fc_1", "f", {"a": [1, 2]}, "complete")], "requires_action", FinishReason.TOOL_CALLS, True),
    "deltas_replace_the_arguments_of_the_start": (
        sse(created(), function_call(0, "fc_1", "f", ['{"a": 1', ', "b": 2}'], start_args={"a": 1}),
            completed("requires_action")),
        [("fc_1", "f", {"a": 1, "b": 2}, "complete")], "requires_action", FinishReason.TOOL_CALLS, True),
    "call_without_arguments": (
        sse(created(), function_call(0, "fc_1", "ping", []), completed("requires_action")),
        [("fc_1", "ping", {}, "complete")], "requires_action", FinishReason.TOOL_CALLS, True),
    "text_only_completed": (
        sse(created(), output(0, "Hello", " world"), completed("completed")), [], "completed", FinishReason.STOP,
        True),
    "incomplete_truncates_the_open_call": (
        sse(created(), step_start(0, {"type": "function_call", "id": "fc_1", "name": "f", "arguments": {}}),
            args_delta(0, '{"a": "hal'), completed("incomplete")),
        [("fc_1", "f", None, "truncated")], "incomplete", FinishReason.LENGTH, False),
    "budget_exceeded_is_a_length_finish": (
        sse(created(), function_call(0, "fc_1", "f", ['{"a": 1}']), completed("budget_exceeded")),
        [("fc_1", "f", {"a": 1}, "complete")], "budget_exceeded", FinishReason.LENGTH, False),
    "failed": (
        sse(created(), function_call(0, "fc_1", "f", ['{"a": 1}']), completed("failed")),
        [("fc_1", "f", {"a": 1}, "complete")], "failed", FinishReason.ERROR, False),
    "cancelled": (
        sse(created(), step_start(0, {"type": "function_call", "id": "fc_1", "name": "f", "arguments": {}}),
            completed("cancelled")),
        [("fc_1", "f", None, "truncated")], "cancelled", FinishReason.ERROR, False),
    "completed_before_the_step_stop_is_a_protocol_error": (
        sse(created(), step_start(0, {"type": "function_call", "id": "fc_1", "name": "f", "arguments": {}}),
            args_delta(0, '{"a": 1}'), completed("requires_action")),
        [("fc_1", "f", None, "errored")], "requires_action", FinishReason.TOOL_CALLS, False),
    "no_completed_event_is_a_cut": (
        sse(created(), function_call(0, "fc_1", "f", ['{"a": 1}']),
            step_start(1, {"type": "function_call", "id": "fc_2", "name": "g", "arguments": {}})),
        [("fc_1", "f", {"a": 1}, "complete"), ("fc_2", "g", None, "truncated")], None, None, False),
    "legacy_content_schema": (
        sse(ev("interaction.start", interaction={"id": IID, "status": "in_progress"}),
            ev("content.start", index=0, content={"type": "text", "text": "Checking."}),
            ev("content.stop", index=0),
            ev("content.start", index=1, content={"type": "function_call", "id": "fc_1", "name": "get_weather",
                                                  "arguments": {}, "signature": "c2ln"}),
            ev("content.delta", index=1, delta={"type": "function_call", "arguments": {"location": "Pa"}}),
            ev("content.delta", index=1, delta={"type": "function_call", "arguments": {"location": "Paris"}}),
            ev("content.stop", index=1),
            ev("interaction.complete", interaction={"id": IID, "status": "requires_action", "outputs": []})),
        [("fc_1", "get_weather", {"location": "Paris"}, "complete")], "requires_action", FinishReason.TOOL_CALLS,
        True),
    "steps_body": (
        json.dumps({"id": IID, "object": "interaction", "status": "requires_action", "model": "gemini-3",
                    "steps": [{"type": "thought", "signature": "c2ln"},
                              {"type": "function_call", "id": "fc_1", "name": "f", "arguments": {"a": 1}},
                              {"type": "function_call", "id": "fc_2", "name": "g", "arguments": {}}]}).encode(),
        [("fc_1", "f", {"a": 1}, "complete"), ("fc_2", "g", {}, "complete")], "requires_action",
        FinishReason.TOOL_CALLS, True),
    "legacy_outputs_body": (
        json.dumps({"id": IID, "status": "requires_action",
                    "outputs": [{"type": "function_call", "id": "fc_1", "name": "f", "arguments": {"a": 1}}]}).encode(),
        [("fc_1", "f", {"a": 1}, "complete")], "requires_action", FinishReason.TOOL_CALLS, True),
    "completed_body_with_text": (
        json.dumps({"id": IID, "status": "completed",
                    "steps": [{"type": "model_output", "content": [{"type": "text", "text": "Hi"}]}]}).encode(),
        [], "completed", FinishReason.STOP, True),
}


@pytest.mark.parametrize("name", CASES)
def test_interactions_case(name):
    """Each Interactions case gives the calls, raw and canonical finish reason and cleanliness written next to it."""
    data, expected, raw_finish, finish, clean = CASES[name]
    turn = toolwire.parse(P, data)
    assert calls_of(turn) == expected
    assert turn.raw_finish_reason == raw_finish
    assert turn.finish_reason is finish
    assert turn.finished_cleanly is clean
    if not clean:
        assert turn.runnable_calls == []


def test_interactions_crlf_separators_and_no_event_lines_parse_the_same():
    """Dispatch is on the payload's event_type: CRLF separators and missing ``event:`` lines change nothing."""
    events = [created(), *function_call(0, "fc_1", "f", ['{"a":', " 1}"]), completed("requires_action")]
    base = toolwire.parse(P, sse(*events))
    crlf = toolwire.parse(P, sse(*events, sep="\r\n"))
    bare = toolwire.parse(P, b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events) + b"data: [DONE]\n\n")
    assert calls_of(base) == calls_of(crlf) == calls_of(bare) == [("fc_1", "f", {"a": 1}, "complete")]


def test_interactions_response_id_model_and_text_are_kept():
    """The interaction id and model become response_id and model; text deltas become the turn's text."""
    turn = toolwire.parse(P, sse(created(), output(0, "Hel", "lo"), completed("completed", usage={"total_tokens": 7})))
    assert (turn.response_id, turn.model, turn.text, turn.usage) == (IID, "gemini-3-flash-preview", "Hello",
                                                                    {"total_tokens": 7})


def test_interactions_thought_signature_goes_to_the_first_following_call():
    """A thought step's signature stays on that step in the replay and is recorded on the first call after it."""
    data = sse(created(), thought(0, "c2lnLTE="), function_call(1, "fc_1", "f", ['{"a":1}']),
               function_call(2, "fc_2", "g", ['{"b":2}']), completed("requires_action"))
    turn = toolwire.parse(P, data)
    a, b = turn.calls
    assert a.provider_meta["thought_signature"] == "c2lnLTE=" and a.provider_meta["thought_step"] == 0
    assert "thought_signature" not in b.provider_meta
    assert turn.assistant_message == {"id": IID, "steps": [
        {"type": "thought", "signature": "c2lnLTE="},
        {"type": "function_call", "id": "fc_1", "name": "f", "arguments": {"a": 1}},
        {"type": "function_call", "id": "fc_2", "name": "g", "arguments": {"b": 2}}]}


def test_interactions_signature_arriving_after_the_call_started_still_reaches_it():
    """A thought's signature delta that arrives after the next call started is recorded on that call."""
    data = sse(created(), step_start(0, {"type": "thought"}),
               step_start(1, {"type": "function_call", "id": "fc_1", "name": "f", "arguments": {}}),
               delta(0, {"type": "thought_signature", "signature": "bGF0ZQ=="}), step_stop(0),
               args_delta(1, "{}"), step_stop(1), completed("requires_action"))
    (call,) = toolwire.parse(P, data).calls
    assert call.provider_meta["thought_signature"] == "bGF0ZQ=="


def test_interactions_built_in_call_steps_go_to_server_calls():
    """Built-in *_call steps run at Google: they are server calls, never calls to run; results are replay only."""
    search = {"type": "google_search_call", "id": "gs_1", "arguments": {"queries": ["weather Paris"]},
              "signature": "c2ln"}
    result = {"type": "google_search_result", "call_id": "gs_1", "result": [{"url": "https://example.com"}]}
    data = sse(created(), step_start(0, search), step_stop(0), step_start(1, result), step_stop(1),
               function_call(2, "fc_1", "f", ['{"a":1}']), completed("requires_action"))
    turn = toolwire.parse(P, data)
    assert calls_of(turn) == [("fc_1", "f", {"a": 1}, "complete")]
    (server,) = turn.server_calls
    assert (server.call_id, server.name, server.type, server.input) == (
        "gs_1", "google_search", "google_search_call", {"queries": ["weather Paris"]})
    assert turn.assistant_message["steps"][:2] == [search, result]


def test_interactions_replay_fills_in_streamed_text_and_arguments():
    """The replay holds each step as received with streamed text and arguments filled in."""
    data = sse(created(), output(0, "Let me ", "check."), function_call(1, "fc_1", "f", ['{"q": "ü"}']),
               completed("requires_action"))
    assert toolwire.parse(P, data).assistant_message == {"id": IID, "steps": [
        {"type": "model_output", "content": [{"type": "text", "text": "Let me check."}]},
        {"type": "function_call", "id": "fc_1", "name": "f", "arguments": {"q": "ü"}}]}


def test_interactions_legacy_replay_uses_outputs():
    """A legacy stream replays as ``outputs`` with the signature on the call's content."""
    msg = toolwire.parse(P, CASES["legacy_content_schema"][0]).assistant_message
    assert msg == {"id": IID, "outputs": [
        {"type": "text", "text": "Checking."},
        {"type": "function_call", "id": "fc_1", "name": "get_weather", "arguments": {"location": "Paris"},
         "signature": "c2ln"}]}


def test_interactions_failed_status_and_error_event_are_stream_errors():
    """A failed interaction and an ``error`` event are turn errors with the provider's code and message."""
    failed = toolwire.parse(P, sse(created(), completed("failed", error={"code": "internal", "message": "boom"})))
    assert (failed.error.type, failed.error.message) == ("internal", "boom")
    data = sse(created(), step_start(0, {"type": "function_call", "id": "fc_1", "name": "f", "arguments": {}}),
               args_delta(0, '{"a"'), ev("error", error={"code": "resource_exhausted", "message": "quota"}))
    turn = toolwire.parse(P, data)
    assert (turn.error.type, turn.error.code, turn.error.message) == ("resource_exhausted", "resource_exhausted",
                                                                      "quota")
    assert calls_of(turn) == [("fc_1", "f", None, "truncated")] and turn.runnable_calls == []


def test_interactions_unknown_event_and_delta_types_are_skipped(toolwire_debug):
    """Event and delta types added later are skipped; the calls around them are unaffected."""
    data = sse(created(), ev("interaction.heartbeat", n=1),
               step_start(0, {"type": "function_call", "id": "fc_1", "name": "f", "arguments": {}}),
               delta(0, {"type": "shiny_new_delta", "x": 1}), args_delta(0, '{"a": 1}'), step_stop(0),
               step_start(1, {"type": "thought"}), delta(1, {"type": "thought_summary", "content": {"type": "text",
                                                                                                   "text": "hm"}}),
               step_stop(1), completed("requires_action"))
    turn = toolwire.parse(P, data)
    assert calls_of(turn) == [("fc_1", "f", {"a": 1}, "complete")] and turn.error is None
    assert turn.assistant_message["steps"][1] == {"type": "thought", "summary": [{"type": "text", "text": "hm"}]}


# ---- errors -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("data,needle", [
    (b"event: step.start\ndata: {not json\n\n", "could not be decoded"),
    (sse(created(), ev("step.start", step={"type": "function_call"})), "could not be decoded"),
    (sse(created(), ev("step.delta", index="one", delta={"type": "arguments_delta", "arguments": "{}"})),
     "could not be decoded"),
    (sse(created(), args_delta(3, "{}")), "never started"),
    (sse(created(), *output(0, "a"), delta(0, {"type": "text", "text": "b"})), "after its stop"),
    (sse(created(), step_stop(2)), "never started"),
    (sse(created(), *function_call(0, "fc_1", "f", ["{}"]), step_stop(0)), "second stop"),
    (sse(created(), step_start(0, {"type": "function_call", "id": "a", "name": "f", "arguments": {}}),
         step_start(0, {"type": "function_call", "id": "b", "name": "g", "arguments": {}})), "already started"),
    (sse(created(), step_start(0, {"type": "thought"}), args_delta(0, "{}")), "arguments_delta for thought"),
    (sse(created(), step_start(0, {"type": "function_call", "id": "a", "name": "f", "arguments": {}}),
         delta(0, {"type": "arguments_delta", "arguments": 5})), "wrong shape"),
    (sse(created(), *function_call(0, "fc_1", "f", ["{}"]), args_delta(0, '{"late": 1}')), "argument fragment"),
    (sse(created(), completed("completed"), output(0, "late")), "after the stream's terminator"),
    (sse(created(), completed("requires_action"), completed("completed")), "after the stream's terminator"),
], ids=["garbage", "start_without_index", "index_not_an_int", "delta_for_unknown_step", "text_after_stop",
        "stop_for_unknown_step",
        "double_stop", "step_started_twice", "arguments_for_a_thought", "known_delta_wrong_shape",
        "fragment_after_stop", "step_after_completion", "completed_twice"])
def test_interactions_malformed_input_is_a_protocol_error(data, needle):
    """Garbage, wrong shapes and events for steps that are not open are typed protocol errors."""
    turn = toolwire.parse(P, data)
    assert turn.error.type == "protocol_error"
    assert needle in turn.error.message
    assert turn.runnable_calls == []


def test_interactions_fragment_after_step_stop_errors_the_call():
    """An arguments_delta after the call's step.stop fails that call (fragment_after_end), never merges."""
    data = sse(created(), *function_call(0, "fc_1", "f", ['{"a": 1}']), args_delta(0, '{"b": 2}'),
               completed("requires_action"))
    (call,) = toolwire.parse(P, data).calls
    assert call.state is CallState.ERRORED and call.problem.code is ProblemCode.FRAGMENT_AFTER_END


def test_interactions_second_interaction_in_one_stream_is_a_splice():
    """A second interaction.created with another id means two generations were spliced: they never merge."""
    data = sse(created(), function_call(0, "fc_1", "f", ['{"a": 1}']),
               ev("interaction.created", interaction={"id": "v1_other", "status": "in_progress"}),
               function_call(1, "fc_2", "g", ['{"b": 2}']), completed("requires_action"))
    turn = toolwire.parse(P, data)
    assert turn.error.type == "spliced_stream"
    assert [c.call_id for c in turn.calls] == ["fc_1"] and turn.runnable_calls == []


def test_interactions_missing_name_is_a_typed_problem():
    """A function_call step without a name errors with missing_name and never runs."""
    data = sse(created(), step_start(0, {"type": "function_call", "id": "fc_1", "arguments": {}}),
               args_delta(0, "{}"), step_stop(0), completed("requires_action"))
    (call,) = toolwire.parse(P, data).calls
    assert call.state is CallState.ERRORED and call.problem.code is ProblemCode.MISSING_NAME


def test_interactions_invalid_arguments_are_complete_but_not_runnable():
    """Fragments that do not join into JSON give a complete call with args None and invalid_json."""
    data = sse(created(), function_call(0, "fc_1", "f", ['{"a": ', "}"]), completed("requires_action"))
    (call,) = toolwire.parse(P, data).calls
    assert call.state is CallState.COMPLETE and call.args is None
    assert call.problem.code is ProblemCode.INVALID_JSON and call.raw_arguments == '{"a": }'


def test_interactions_nothing_but_done_is_not_a_turn():
    """A stream with only the sentinel has no interaction: it was cut."""
    turn = toolwire.parse(P, b"data: [DONE]\n\n")
    assert turn.error.type == "stream_cut" and not turn.finished_cleanly


# ---- properties of generated streams ---------------------------------------------------------------------
ARGS = st.dictionaries(st.text(max_size=6), st.one_of(st.text(max_size=10), st.integers(), st.booleans(),
                                                      st.none(), st.lists(st.integers(), max_size=3)), max_size=4)
NAME = st.from_regex(r"[a-z][a-z_]{0,8}", fullmatch=True)


@dataclass
class Gen:
    events: list[dict]
    calls: list[tuple]
    stops: list[int]  # per call: index of its step.stop event
    status: str | None
    completed_at: int | None


@st.composite
def interaction_streams(draw):
    kinds = draw(st.lists(st.sampled_from(["thought", "text", "call", "server"]), max_size=5))
    status = draw(st.sampled_from(["requires_action", "completed", "incomplete", None]))
    events: list[dict] = [created()]
    calls, stops = [], []
    for index, kind in enumerate(kinds):
        if kind == "thought":
            events += thought(index, draw(st.one_of(st.none(), st.just("c2ln"))))
        elif kind == "text":
            events += output(index, *draw(st.lists(st.text(min_size=1, max_size=8), max_size=3)))
        elif kind == "server":
            events += [step_start(index, {"type": "url_context_call", "id": f"u{index}",
                                          "arguments": {"urls": ["https://example.com"]}}), step_stop(index)]
        else:
            args = draw(ARGS)
            text = json.dumps(args, ensure_ascii=draw(st.booleans()))
            cuts = sorted(set(draw(st.lists(st.integers(0, len(text)), max_size=4))))
            frags = [text[i:j] for i, j in zip([0] + cuts, cuts + [len(text)]) if text[i:j]]
            events += function_call(index, f"fc_{index}", draw(NAME), frags)
            calls.append((f"fc_{index}", events[-len(frags) - 2]["step"]["name"], args))
            stops.append(len(events) - 1)
    completed_at = None
    if status is not None:
        events.append(completed(status))
        completed_at = len(events) - 1
    return Gen(events, calls, stops, status, completed_at)


def encode(events: list[dict], sep: str) -> tuple[bytes, list[int]]:
    """SSE bytes and, per event, the offset just after its data line's JSON."""
    out, ends, size = [], [], 0
    for e in events:
        head = f"event: {e['event_type']}{sep}data: {json.dumps(e, ensure_ascii=False)}".encode()
        ends.append(size + len(head))
        piece = head + (sep + sep).encode()
        out.append(piece)
        size += len(piece)
    return b"".join(out) + f"data: [DONE]{sep}{sep}".encode(), ends


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, prev = [], 0
    for p in points:
        pieces.append(data[prev:p])
        prev = p
    pieces.append(data[prev:])
    return [p for p in pieces if p]


SEP = st.sampled_from(["\n", "\r\n"])
CUTS = st.lists(st.integers(min_value=0, max_value=100_000), max_size=16)


@given(interaction_streams(), SEP)
def test_generated_interactions_give_the_calls_they_were_built_from(gen, sep):
    """Every generated function call comes out with its id, name and arguments, and the status maps as documented
    (a clean end is tool_calls when there are calls, else stop)."""
    data, _ = encode(gen.events, sep)
    turn = toolwire.parse(P, data)
    assert [(c.call_id, c.name, c.args) for c in turn.calls] == gen.calls
    clean = FinishReason.TOOL_CALLS if gen.calls else FinishReason.STOP
    expected = {"requires_action": clean, "completed": clean, "incomplete": FinishReason.LENGTH, None: None}[gen.status]
    assert turn.finish_reason is expected
    assert turn.finished_cleanly is (gen.status in ("requires_action", "completed"))
    assert len(turn.server_calls) == sum(1 for e in gen.events if e["event_type"] == "step.start"
                                         and e["step"]["type"] == "url_context_call")


@given(interaction_streams(), SEP, CUTS)
def test_any_split_of_an_interaction_stream_gives_the_same_turn(gen, sep, cuts):
    """The SSE bytes split anywhere (inside UTF-8 characters, between CR and LF) parse the same as whole."""
    data, _ = encode(gen.events, sep)
    assert toolwire.parse(P, split(data, cuts), format="sse") == toolwire.parse(P, data, format="sse")


@given(interaction_streams(), SEP, st.lists(st.integers(min_value=0, max_value=100_000), min_size=1, max_size=6))
def test_interaction_prefixes_never_run_calls_before_completion(gen, sep, cut_points):
    """A stream cut before interaction.completed has no runnable calls, and no call is complete before its
    step.stop arrived."""
    data, ends = encode(gen.events, sep)
    points = {c % len(data) for c in cut_points} | {e for e in ends} | {e - 1 for e in ends if e > 0}
    done_at = ends[gen.completed_at] if gen.completed_at is not None else len(data) + 1
    for n in sorted(points):
        turn = toolwire.parse(P, data[:n], format="sse")
        if n < done_at:
            assert turn.runnable_calls == [] and not turn.finished_cleanly
        for call, stop in zip(turn.calls, gen.stops):
            if n < ends[stop]:
                assert call.state is not CallState.COMPLETE
