"""Regression tests, one per failure mode in docs/failure-modes.md that applies to the Chat and Anthropic dialects.

Each test is named ``test_pitfall_NN_…`` after the entry it pins; the ones marked (effect) there are
also checked over every chunk boundary with hypothesis, because getting them wrong runs or repeats an effect.
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

import toolwire
from toolwire import CallState, FinishReason, ProblemCode

from ..wire import anthropic_events, chunk, sse, tc


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, prev = [], 0
    for p in points:
        pieces.append(data[prev:p])
        prev = p
    pieces.append(data[prev:])
    return [p for p in pieces if p]


cuts = st.lists(st.integers(min_value=0, max_value=10_000), max_size=12)


# ---- stream reassembly (OpenAI Chat and compatible servers) -------------------------------------------
def test_pitfall_01_parallel_whole_calls_sharing_index_zero_stay_separate():
    """Two whole calls both sent with index 0 but different ids become two calls, not '{"a":1}{"a":2}'."""
    data = sse(
        chunk(tc(0, "call_a", "get_weather", '{"city":"Paris"}')),
        chunk(tc(0, "call_b", "get_weather", '{"city":"Oslo"}')),
        chunk(finish="tool_calls"), "[DONE]")
    turn = toolwire.parse("openai-chat", data)
    assert [(c.call_id, c.args) for c in turn.calls] == [("call_a", {"city": "Paris"}), ("call_b", {"city": "Oslo"})]
    assert all(c.state is CallState.COMPLETE for c in turn.calls)


PITFALL_02_CUMULATIVE = sse(
    chunk(tc(0, "call_1", "get_stock", "")),
    chunk(tc(0, None, None, '{"stock":')),
    chunk(tc(0, None, None, '{"stock":"MS')),
    chunk(tc(0, None, None, '{"stock":"MSFT"}')),
    chunk(finish="tool_calls"), "[DONE]")

PITFALL_02_EMPTY_THEN_FULL = sse(
    chunk(tc(0, "call_1", "get_stock", "{}")),
    chunk(tc(0, "call_1", "get_stock", '{"stock":"MSFT"}')),
    chunk(finish="tool_calls"), "[DONE]")


def test_pitfall_02_cumulative_resend_is_not_concatenated():
    """A server that resends the arguments-so-far yields the last whole value, not '{"stock":{"stock":…'."""
    turn = toolwire.parse("openai-chat", PITFALL_02_CUMULATIVE)
    (call,) = turn.calls
    assert call.args == {"stock": "MSFT"}
    assert call.provider_meta["reassembled"] == "cumulative"


def test_pitfall_02_empty_object_then_full_object_runs_with_the_full_input():
    """'{}' followed by the full object is the full object: never '{}{…}' and never an empty input."""
    turn = toolwire.parse("openai-chat", PITFALL_02_EMPTY_THEN_FULL)
    (call,) = turn.calls
    assert call.args == {"stock": "MSFT"}
    assert call.name == "get_stock"


@given(cuts)
def test_pitfall_02_resend_recovery_holds_over_every_chunk_boundary(cut_points):
    """(effect) The cumulative and '{}'-then-full recoveries give the full input however the bytes are split."""
    for data in (PITFALL_02_CUMULATIVE, PITFALL_02_EMPTY_THEN_FULL):
        turn = toolwire.parse("openai-chat", _split(data, cut_points), format="sse")
        assert [c.args for c in turn.calls] == [{"stock": "MSFT"}]


def test_pitfall_03_repeated_id_and_name_are_set_once_not_appended():
    """A server repeating id and name on every fragment gives 'read_file', not 'read_fileread_file'."""
    data = sse(
        chunk(tc(0, "call_1", "read_file", '{"path":')),
        chunk(tc(0, "call_1", "read_file", '"/etc/hosts"}')),
        chunk(finish="tool_calls"), "[DONE]")
    (call,) = toolwire.parse("openai-chat", data).calls
    assert (call.call_id, call.name, call.args) == ("call_1", "read_file", {"path": "/etc/hosts"})


def test_pitfall_03_conflicting_name_for_one_id_is_a_typed_problem():
    """The same id arriving with another name errors the call (it never runs) instead of renaming it."""
    data = sse(
        chunk(tc(0, "call_1", "read_file", '{"path":')),
        chunk(tc(0, "call_1", "delete_file", '"/x"}')),
        chunk(finish="tool_calls"), "[DONE]")
    (call,) = toolwire.parse("openai-chat", data).calls
    assert call.state is CallState.ERRORED
    assert call.problem.code is ProblemCode.CONFLICTING_NAME
    assert call.name == "read_file"


def test_pitfall_04_two_entries_with_the_same_index_in_one_chunk():
    """id/name and the first arguments for the same index in one chunk make one call."""
    data = sse(
        chunk(tc(0, "call_1", "f", None), tc(0, None, None, '{"a":')),
        chunk(tc(0, None, None, "1}")),
        chunk(finish="tool_calls"), "[DONE]")
    (call,) = toolwire.parse("openai-chat", data).calls
    assert call.args == {"a": 1}


def test_pitfall_05_missing_index_correlates_by_id_then_latest_open_call():
    """Without index (Gemini's compatible endpoint) fragments go to the call with that id, else the latest."""
    data = sse(
        chunk(tc(None, "call_1", "f", '{"a":')),
        chunk(tc(None, None, None, "1}")),
        chunk(tc(None, "call_2", "g", '{"b":2}')),
        chunk(finish="tool_calls"), "[DONE]")
    turn = toolwire.parse("openai-chat", data)
    assert [(c.call_id, c.name, c.args) for c in turn.calls] == [("call_1", "f", {"a": 1}), ("call_2", "g", {"b": 2})]


def test_pitfall_05_sparse_non_zero_based_indexes():
    """Indexes 3 and 7 are just keys: two calls, in arrival order."""
    data = sse(
        chunk(tc(3, "call_1", "f", '{"a":')), chunk(tc(7, "call_2", "g", '{"b":')),
        chunk(tc(3, None, None, "1}")), chunk(tc(7, None, None, "2}")),
        chunk(finish="tool_calls"), "[DONE]")
    turn = toolwire.parse("openai-chat", data)
    assert [(c.index, c.name, c.args) for c in turn.calls] == [(0, "f", {"a": 1}), (1, "g", {"b": 2})]


def test_pitfall_05_index_reused_for_a_different_id_starts_a_new_call():
    """An index reused with a new id and a name is a new call, not a continuation."""
    data = sse(
        chunk(tc(0, "call_1", "f", '{"a":1}')),
        chunk(tc(0, "call_2", "g", '{"b":2}')),
        chunk(finish="tool_calls"), "[DONE]")
    turn = toolwire.parse("openai-chat", data)
    assert [(c.call_id, c.args) for c in turn.calls] == [("call_1", {"a": 1}), ("call_2", {"b": 2})]


def test_pitfall_06_continuations_without_id_and_name_arriving_late():
    """Fragments without an id (Mistral) continue the call; a name arriving after the id and arguments is set."""
    data = sse(
        chunk(tc(0, "call_1", None, '{"q":')),
        chunk(tc(0, None, "search", None)),
        chunk(tc(0, None, None, '"rice"}')),
        chunk(finish="tool_calls"), "[DONE]")
    (call,) = toolwire.parse("openai-chat", data).calls
    assert (call.call_id, call.name, call.args, call.state) == ("call_1", "search", {"q": "rice"}, CallState.COMPLETE)


def test_pitfall_06_a_call_that_never_got_a_name_never_runs():
    """A call that ends without a name is errored with missing_name."""
    data = sse(chunk(tc(0, "call_1", None, "{}")), chunk(finish="tool_calls"), "[DONE]")
    (call,) = toolwire.parse("openai-chat", data).calls
    assert call.state is CallState.ERRORED and call.problem.code is ProblemCode.MISSING_NAME


def test_pitfall_06_new_id_per_fragment_without_a_name_is_a_continuation():
    """A server minting an id per fragment (OCI) keeps one call with the first id; the others are aliases."""
    data = sse(
        chunk(tc(0, "id_1", "f", '{"a":')),
        chunk(tc(0, "id_2", "", "1}")),
        chunk(finish="tool_calls"), "[DONE]")
    (call,) = toolwire.parse("openai-chat", data).calls
    assert (call.call_id, call.args, call.provider_meta["alias_ids"]) == ("id_1", {"a": 1}, ["id_2"])


def test_pitfall_07_finish_reason_stop_after_tool_calls_keeps_the_calls():
    """finish_reason 'stop' after tool calls (gpt-4o, Ollama) still completes them; the turn is clean, and
    reported as tool_calls (the provider's word stays in raw_finish_reason)."""
    data = sse(chunk(tc(0, "call_1", "f", '{"a":1}')), chunk(finish="stop"), "[DONE]")
    turn = toolwire.parse("openai-chat", data)
    assert turn.finish_reason is FinishReason.TOOL_CALLS and turn.raw_finish_reason == "stop"
    assert turn.finished_cleanly
    assert [c.state for c in turn.calls] == [CallState.COMPLETE]
    assert turn.runnable_calls == turn.calls


def test_pitfall_08_empty_choices_and_comment_lines_are_tolerated():
    """Azure's first chunk with choices [], usage-only chunks and ': keep-alive' comments are no calls, no error."""
    azure_first = {"id": "", "object": "", "created": 0, "model": "", "choices": [],
                   "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {}}]}
    data = (b": keep-alive\n\n" + sse(azure_first) + b": OPENROUTER PROCESSING\n\n"
            + sse(chunk(tc(0, "call_1", "f", '{"a":1}')), chunk(finish="tool_calls"),
                  {"id": "x", "object": "chat.completion.chunk", "choices": [], "usage": {"total_tokens": 3}},
                  "[DONE]"))
    turn = toolwire.parse("openai-chat", data)
    assert turn.error is None and turn.finished_cleanly
    assert [c.args for c in turn.calls] == [{"a": 1}]
    assert turn.usage == {"total_tokens": 3}


def test_pitfall_09_error_shapes_in_stream_are_recognised_failures():
    """vLLM/Mistral '{"object":"error"}', Groq 'event: error', OpenRouter's top-level error: each is an error."""
    partial = sse(chunk(tc(0, "call_1", "f", '{"a":')))
    shapes = [
        sse({"object": "error", "message": "boom", "type": "BadRequestError", "param": None, "code": 400}),
        b'event: error\ndata: {"error":{"message":"Failed to call a function","type":"invalid_request_error",'
        b'"code":"tool_use_failed","status_code":400}}\n\n',
        sse({"id": "gen-1", "object": "chat.completion.chunk", "error": {"code": 502, "message": "upstream"},
             "choices": [{"index": 0, "delta": {}, "finish_reason": "error"}]}),
    ]
    for shape in shapes:
        turn = toolwire.parse("openai-chat", partial + shape)
        assert turn.error is not None, shape
        assert not turn.finished_cleanly
        (call,) = turn.calls
        assert call.state is CallState.TRUNCATED and call.problem.code is ProblemCode.STREAM_ERROR
    assert toolwire.parse("openai-chat", partial + shapes[1]).error.code == "tool_use_failed"


def test_pitfall_10_spliced_anthropic_stream_does_not_merge_two_generations():
    """A second message_start with another id is a spliced_stream error; the second generation is ignored."""
    first = anthropic_events([{"type": "tool_use", "id": "toolu_1", "name": "f", "fragments": ['{"a":', "1"]}],
                             stop_reason=None, stop=False)
    first = [e for e in first if not (e["type"] == "content_block_stop")]
    second = anthropic_events([{"type": "tool_use", "id": "toolu_2", "name": "g", "fragments": ["}"]}],
                              message_id="msg_2")
    turn = toolwire.parse("anthropic", sse(*first, *second, events=True))
    assert turn.error is not None and turn.error.type == "spliced_stream"
    assert [c.call_id for c in turn.calls] == ["toolu_1"]
    assert turn.calls[0].state is CallState.ERRORED
    assert turn.runnable_calls == []


# ---- truncation ---------------------------------------------------------------------------------------
TRUNCATION_STREAM = sse(
    chunk(tc(0, "call_1", "transfer", '{"amount": 10, "confirm": fa')),
    chunk(tc(0, None, None, 'lse, "dry_run": tr')),
    chunk(finish="length"), "[DONE]")


def test_pitfall_11_cut_arguments_are_never_completed_or_executed():
    """A stream cut inside the arguments ('"dry_run": tr') gives a truncated call with no args, never a guess."""
    turn = toolwire.parse("openai-chat", TRUNCATION_STREAM)
    (call,) = turn.calls
    assert call.state is CallState.TRUNCATED and call.args is None
    assert call.raw_arguments == '{"amount": 10, "confirm": false, "dry_run": tr'
    assert turn.runnable_calls == []


@given(st.integers(min_value=0, max_value=10_000))
def test_pitfall_11_every_prefix_of_a_call_is_truncated_or_absent(cut):
    """(effect) Every byte prefix of a tool-call stream yields the call truncated or absent, never complete."""
    whole = sse(chunk(tc(0, "call_1", "transfer", '{"amount": 10, ')),
                chunk(tc(0, None, None, '"confirm": true, "dry_run": false}')),
                chunk(finish="tool_calls"), "[DONE]")
    finish_at = whole.index(b'"finish_reason": "tool_calls"')
    prefix = whole[: cut % finish_at]
    turn = toolwire.parse("openai-chat", prefix, format="sse")
    assert all(c.state is CallState.TRUNCATED for c in turn.calls)
    assert turn.runnable_calls == []


def test_pitfall_12_no_call_runs_after_length_error_or_content_filter():
    """Calls that reached their terminator stay complete, but a length/content_filter/error turn runs nothing."""
    blocks = [{"type": "tool_use", "id": "toolu_1", "name": "f", "fragments": ['{"a": 1}']},
              {"type": "tool_use", "id": "toolu_2", "name": "g", "fragments": ['{"b": 2}']}]
    for reason in ("max_tokens", "refusal", "model_context_window_exceeded"):
        turn = toolwire.parse("anthropic", sse(*anthropic_events(blocks, reason), events=True))
        assert turn.calls[0].state is CallState.COMPLETE
        assert not turn.finished_cleanly and turn.runnable_calls == [], reason
    # the call a max_tokens finish cut is truncated even though its block was closed
    turn = toolwire.parse("anthropic", sse(*anthropic_events(blocks, "max_tokens"), events=True))
    assert turn.calls[1].state is CallState.TRUNCATED
    assert turn.calls[1].problem.code is ProblemCode.CUT_BY_LENGTH
    for finish in ("length", "content_filter"):
        data = sse(chunk(tc(0, "c1", "f", '{"a": 1}')), chunk(finish=finish), "[DONE]")
        turn = toolwire.parse("openai-chat", data)
        assert turn.runnable_calls == [] and turn.calls[0].state is CallState.TRUNCATED


@given(cuts)
def test_pitfall_12_length_finish_runs_nothing_over_every_chunk_boundary(cut_points):
    """(effect) However the bytes are split, a turn ended by max_tokens has no runnable call."""
    blocks = [{"type": "tool_use", "id": "toolu_1", "name": "f", "fragments": ['{"a": 1}']}]
    data = sse(*anthropic_events(blocks, "max_tokens"), events=True)
    turn = toolwire.parse("anthropic", _split(data, cut_points), format="sse")
    assert turn.runnable_calls == [] and turn.calls[0].state is CallState.TRUNCATED


PITFALL_13_STREAM = sse(*anthropic_events(
    [{"type": "tool_use", "id": "toolu_1", "name": "save", "fragments": ["{}", ""]}], stop=False,
    stop_reason=None), events=True).replace(b'"partial_json": "{}"', b'"partial_json": "{"') + sse(
    {"type": "content_block_delta", "index": 0,
     "delta": {"type": "input_json_delta", "partial_json": '"value": 70, "unit": "kg"}'}},
    events=True)


def test_pitfall_13_a_buffer_that_parses_is_not_a_terminator():
    """'{}' (or any prefix that parses) does not complete a call; only content_block_stop does."""
    data = sse(*anthropic_events([{"type": "tool_use", "id": "toolu_1", "name": "save",
                                   "fragments": ["{}"], "stop": False}], stop_reason=None, stop=False),
               events=True)
    parser = toolwire.StreamParser("anthropic")
    events = parser.feed(data)
    assert not any(isinstance(e, toolwire.CallCompleted) for e in events)
    assert parser.turn.calls[0].state is CallState.ACCUMULATING
    parser.close()
    assert parser.turn.calls[0].state is CallState.TRUNCATED


@given(cuts)
def test_pitfall_13_no_prefix_completes_a_call_before_its_block_stop(cut_points):
    """(effect) Fed in any pieces, a call is complete only once its content_block_stop arrived."""
    blocks = [{"type": "tool_use", "id": "toolu_1", "name": "save", "fragments": ["{}"]}]
    data = sse(*anthropic_events(blocks), events=True)
    stop_at = data.index(b'"content_block_stop"')
    parser = toolwire.StreamParser("anthropic")
    seen = 0
    for piece in _split(data, cut_points):
        for ev in parser.feed(piece):
            if isinstance(ev, toolwire.CallCompleted):
                assert seen + len(piece) > stop_at
        seen += len(piece)
    parser.close()
    assert parser.turn.calls[0].state is CallState.COMPLETE


def test_pitfall_14_anthropic_no_argument_tool_is_an_empty_object():
    """A tool with no arguments streams partial_json "" only: its args are {}, not a parse error."""
    blocks = [{"type": "tool_use", "id": "toolu_1", "name": "get_time", "fragments": [""]}]
    turn = toolwire.parse("anthropic", sse(*anthropic_events(blocks), events=True))
    (call,) = turn.calls
    assert (call.state, call.args, call.problem) == (CallState.COMPLETE, {}, None)
    assert turn.runnable_calls == [call]


def test_pitfall_15_eager_input_streaming_invalid_json_is_a_typed_problem():
    """Fine-grained streaming can end a block with invalid JSON: complete, args None, invalid_json, not run."""
    blocks = [{"type": "tool_use", "id": "toolu_1", "name": "f", "fragments": ['{"a": [1, 2', "}"]}]
    turn = toolwire.parse("anthropic", sse(*anthropic_events(blocks), events=True))
    (call,) = turn.calls
    assert call.state is CallState.COMPLETE and call.args is None
    assert call.problem.code is ProblemCode.INVALID_JSON
    assert turn.runnable_calls == []
    assert json.loads(json.dumps(call.raw_arguments)) == '{"a": [1, 2}'
