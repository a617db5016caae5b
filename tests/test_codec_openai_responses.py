"""The OpenAI Responses codec: table-driven cases, bad input, properties over generated streams, and the
openai SDK's own Responses stream accumulator as an oracle.

The wire helpers below write Responses events from Python values; ``stream()`` numbers them with
``sequence_number`` and wraps them in ``response.created`` … ``response.completed`` (or another terminal event).
"""

from __future__ import annotations

import json
import string
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai._models import construct_type
from openai._types import omit
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.responses import ResponseStreamEvent

import toolwire
from toolwire import CallKind, CallState, FinishReason, ProblemCode


# ---- wire helpers -------------------------------------------------------------------------------------------
def split(text: str, sizes: tuple[int, ...] = (7,)) -> list[str]:
    """Cut ``text`` into fragments of the (cycled) ``sizes``, in characters."""
    out, i, k = [], 0, 0
    while i < len(text):
        n = sizes[k % len(sizes)]
        out.append(text[i:i + n])
        i += n
        k += 1
    return out


def function_item(index: int, item_id: str, call_id: str, name: str, arguments: str, sizes=(7,), *,
                  args_done: bool = True, item_done: bool = True, status: str = "completed",
                  final: str | None = None, item_final: str | None = None, **extra: Any) -> list[dict]:
    """Events of one streamed ``function_call`` item: added, deltas, ``.done``, ``output_item.done``."""
    item = {"type": "function_call", "id": item_id, "call_id": call_id, "name": name, "arguments": "",
            "status": "in_progress", **extra}
    evs: list[dict] = [{"type": "response.output_item.added", "output_index": index, "item": item}]
    for frag in split(arguments, sizes):
        evs.append({"type": "response.function_call_arguments.delta", "item_id": item_id, "output_index": index,
                    "delta": frag, "obfuscation": "xyz"})
    if args_done:
        evs.append({"type": "response.function_call_arguments.done", "item_id": item_id, "output_index": index,
                    "arguments": arguments if final is None else final})
    if item_done:
        done_args = item_final if item_final is not None else (arguments if final is None else final)
        evs.append({"type": "response.output_item.done", "output_index": index,
                    "item": {**item, "arguments": done_args, "status": status}})
    return evs


def custom_item(index: int, item_id: str, call_id: str, name: str, text: str, sizes=(5,), *,
                input_done: bool = True, item_done: bool = True) -> list[dict]:
    """Events of one streamed ``custom_tool_call`` item (free-text input)."""
    item = {"type": "custom_tool_call", "id": item_id, "call_id": call_id, "name": name, "input": "",
            "status": "in_progress"}
    evs: list[dict] = [{"type": "response.output_item.added", "output_index": index, "item": item}]
    for frag in split(text, sizes):
        evs.append({"type": "response.custom_tool_call_input.delta", "item_id": item_id, "output_index": index,
                    "delta": frag})
    if input_done:
        evs.append({"type": "response.custom_tool_call_input.done", "item_id": item_id, "output_index": index,
                    "input": text})
    if item_done:
        evs.append({"type": "response.output_item.done", "output_index": index,
                    "item": {**item, "input": text, "status": "completed"}})
    return evs


def reasoning_item(index: int, item_id: str, summary: str = "thinking", encrypted: str = "gAAAA-enc") -> list[dict]:
    """A reasoning item: ``encrypted_content`` is complete only in its ``output_item.done``."""
    added = {"type": "reasoning", "id": item_id, "summary": [], "encrypted_content": None}
    done = {"type": "reasoning", "id": item_id, "summary": [{"type": "summary_text", "text": summary}],
            "encrypted_content": encrypted}
    return [{"type": "response.output_item.added", "output_index": index, "item": added},
            {"type": "response.reasoning_summary_text.delta", "item_id": item_id, "output_index": index,
             "summary_index": 0, "delta": summary},
            {"type": "response.output_item.done", "output_index": index, "item": done}]


def message_item(index: int, item_id: str, text: str, sizes=(6,)) -> list[dict]:
    """An assistant message item with its text streamed as ``output_text.delta``."""
    item = {"type": "message", "id": item_id, "role": "assistant", "status": "in_progress", "content": []}
    part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    evs: list[dict] = [{"type": "response.output_item.added", "output_index": index, "item": item},
                       {"type": "response.content_part.added", "item_id": item_id, "output_index": index,
                        "content_index": 0, "part": part}]
    for frag in split(text, sizes):
        evs.append({"type": "response.output_text.delta", "item_id": item_id, "output_index": index,
                    "content_index": 0, "delta": frag, "logprobs": []})
    whole = {**part, "text": text}
    evs += [{"type": "response.output_text.done", "item_id": item_id, "output_index": index, "content_index": 0,
             "text": text, "logprobs": []},
            {"type": "response.content_part.done", "item_id": item_id, "output_index": index, "content_index": 0,
             "part": whole},
            {"type": "response.output_item.done", "output_index": index,
             "item": {**item, "status": "completed", "content": [whole]}}]
    return evs


def whole_item(index: int, item: dict, *, added: dict | None = None) -> list[dict]:
    """An item announced by ``output_item.added`` (``added`` or the item itself) and finished by its done."""
    return [{"type": "response.output_item.added", "output_index": index, "item": added or item},
            {"type": "response.output_item.done", "output_index": index, "item": item}]


def done_items(events: list[dict]) -> list[dict]:
    """The items of the ``output_item.done`` events, in output order (the final ``response.output``)."""
    done = {e["output_index"]: e["item"] for e in events if e["type"] == "response.output_item.done"}
    return [done[k] for k in sorted(done)]


def stream(*items: list[dict], terminal: str | None = "completed", response_id: str = "resp_1",
           incomplete_reason: str | None = "max_output_tokens", error: dict | None = None,
           numbered: bool = True) -> list[dict]:
    """A whole event stream: created, in_progress, the items' events, then the terminal event (None: cut)."""
    body = [e for evs in items for e in evs]
    base = {"id": response_id, "object": "response", "model": "gpt-test", "status": "in_progress", "output": [],
            "error": None, "incomplete_details": None, "usage": None}
    evs = [{"type": "response.created", "response": dict(base)},
           {"type": "response.in_progress", "response": dict(base)}] + body
    if terminal is not None:
        final = {**base, "status": terminal, "output": done_items(body), "usage": {"total_tokens": 42}}
        if terminal == "incomplete":
            final["incomplete_details"] = {"reason": incomplete_reason}
        if terminal == "failed":
            final["error"] = error or {"code": "server_error", "message": "The model failed."}
        evs.append({"type": f"response.{terminal}", "response": final})
    if numbered:
        evs = [{**e, "sequence_number": i} for i, e in enumerate(evs)]
    return evs


def then(events: list[dict], *payloads: Any) -> list[dict]:
    """``events`` followed by ``payloads``, numbered on from the last ``sequence_number`` (str sent as is)."""
    n = max((e["sequence_number"] for e in events if isinstance(e, dict) and "sequence_number" in e), default=-1)
    out = list(events)
    for p in payloads:
        if isinstance(p, dict) and "sequence_number" not in p:
            n += 1
            p = {**p, "sequence_number": n}
        out.append(p)
    return out


def sse_bytes(events: list[Any], newline: str = "\n") -> bytes:
    """SSE bytes with an ``event:`` line naming each payload's type (str payloads are written as they are)."""
    return encode(events, newline)[0]


def encode(events: list[Any], newline: str = "\n") -> tuple[bytes, list[int]]:
    """SSE bytes, and per event the offset just after its ``data:`` value."""
    out, ends = bytearray(), []
    nl = newline.encode()
    for e in events:
        if isinstance(e, dict):
            out += b"event: " + e["type"].encode() + nl
            body = json.dumps(e, ensure_ascii=False, separators=(",", ":"))
        else:
            body = e
        out += b"data: " + body.encode()
        ends.append(len(out))
        out += nl + nl
    return bytes(out), ends


def parse(events: list[Any]) -> toolwire.Turn:
    return toolwire.parse("openai-responses", sse_bytes(events))


def calls_of(turn) -> list[tuple]:
    return [(c.call_id, c.name, c.args, c.state.value, c.kind.value) for c in turn.calls]


# ---- table-driven cases -------------------------------------------------------------------------------------
ARGS = '{"location":"Paris","unit":"c"}'
SHELL = {"type": "exec", "command": ["ls", "-a"], "env": {}}
MCP = {"type": "mcp_call", "id": "mcp_1", "name": "ask_question", "server_label": "deepwiki",
       "arguments": '{"q":"what?"}', "output": "an answer", "status": "completed", "error": None}


def _gap(events: list[dict]) -> list[dict]:
    return [e for e in events if e["sequence_number"] != 3]


def _swap(events: list[dict]) -> list[dict]:
    out = list(events)
    out[3], out[4] = out[4], out[3]
    return out


# name: (events, calls, server calls, raw finish reason, finish reason, error type)
CASES: dict[str, tuple] = {
    "one_call": (
        stream(function_item(0, "fc_1", "call_1", "get_weather", ARGS)),
        [("call_1", "get_weather", {"location": "Paris", "unit": "c"}, "complete", "function")], [],
        "completed", FinishReason.TOOL_CALLS, None),
    "parallel_calls": (
        stream(function_item(0, "fc_1", "call_1", "a", '{"x":1}', (2,)),
               function_item(1, "fc_2", "call_2", "b", '{"y":[1,2]}', (3,))),
        [("call_1", "a", {"x": 1}, "complete", "function"), ("call_2", "b", {"y": [1, 2]}, "complete", "function")],
        [], "completed", FinishReason.TOOL_CALLS, None),
    "custom_tool": (
        stream(custom_item(0, "ctc_1", "call_c", "run_sql", "SELECT 1 -- not JSON")),
        [("call_c", "run_sql", None, "complete", "custom")], [], "completed", FinishReason.TOOL_CALLS, None),
    "custom_tool_without_its_done_event_ends_at_output_item_done": (
        stream(custom_item(0, "ctc_1", "call_c", "setHtml", "<p>hi</p>", input_done=False)),
        [("call_c", "setHtml", None, "complete", "custom")], [], "completed", FinishReason.TOOL_CALLS, None),
    "builtin_local_shell_call": (
        stream(whole_item(0, {"type": "local_shell_call", "id": "lsh_1", "call_id": "call_s", "status": "completed",
                              "action": SHELL},
                          added={"type": "local_shell_call", "id": "lsh_1", "call_id": "call_s",
                                 "status": "in_progress", "action": {"type": "exec", "command": [], "env": {}}})),
        [("call_s", "local_shell", SHELL, "complete", "builtin")], [], "completed", FinishReason.TOOL_CALLS, None),
    "builtin_client_tool_search_call": (
        stream(whole_item(0, {"type": "tool_search_call", "id": "tsc_1", "call_id": "call_t", "execution": "client",
                              "status": "completed", "arguments": {"query": "weather"}})),
        [("call_t", "tool_search", {"query": "weather"}, "complete", "builtin")], [], "completed",
        FinishReason.TOOL_CALLS, None),
    "hosted_mcp_call_goes_to_server_calls": (
        stream(whole_item(0, MCP, added={**MCP, "arguments": "", "status": "in_progress", "output": None}),
               message_item(1, "msg_1", "Done.")),
        [], [(None, "ask_question", "mcp_call", {"q": "what?"})], "completed", FinishReason.STOP, None),
    "hosted_server_tool_search_goes_to_server_calls": (
        stream(whole_item(0, {"type": "tool_search_call", "id": "tsc_1", "call_id": None, "execution": "server",
                              "status": "completed", "arguments": {"paths": ["crm"]}}),
               function_item(1, "fc_1", "call_1", "lookup", "{}")),
        [("call_1", "lookup", {}, "complete", "function")],
        [(None, "tool_search", "tool_search_call", {"paths": ["crm"]})], "completed", FinishReason.TOOL_CALLS, None),
    "hosted_web_search_call_goes_to_server_calls": (
        stream(whole_item(0, {"type": "web_search_call", "id": "ws_1", "status": "completed",
                              "action": {"type": "search", "query": "news"}}),
               message_item(1, "msg_1", "Found it.")),
        [], [(None, "web_search", "web_search_call", {"type": "search", "query": "news"})], "completed",
        FinishReason.STOP, None),
    "builtin_computer_call_with_batched_actions": (
        stream(whole_item(0, {"type": "computer_call", "id": "cu_1", "call_id": "call_u", "status": "completed",
                              "pending_safety_checks": [], "actions": [{"type": "click", "x": 1, "y": 2,
                                                                        "button": "left"}]})),
        [("call_u", "computer", {"actions": [{"type": "click", "x": 1, "y": 2, "button": "left"}]}, "complete",
          "builtin")], [], "completed", FinishReason.TOOL_CALLS, None),
    "incomplete_max_output_tokens_truncates_the_open_call": (
        stream(function_item(0, "fc_1", "call_1", "save", '{"path":"/tmp/a","dry_run":', args_done=False,
                             item_done=False), terminal="incomplete"),
        [("call_1", "save", None, "truncated", "function")], [], "incomplete", FinishReason.LENGTH, None),
    "incomplete_content_filter_truncates_the_open_call": (
        stream(function_item(0, "fc_1", "call_1", "save", '{"a":', args_done=False, item_done=False),
               terminal="incomplete", incomplete_reason="content_filter"),
        [("call_1", "save", None, "truncated", "function")], [], "incomplete", FinishReason.CONTENT_FILTER, None),
    "item_done_with_status_incomplete_is_cut_not_completed": (
        stream(function_item(0, "fc_1", "call_1", "save", '{"a":1', args_done=False, status="incomplete"),
               terminal="incomplete"),
        [("call_1", "save", None, "truncated", "function")], [], "incomplete", FinishReason.LENGTH, None),
    "failed": (
        stream(function_item(0, "fc_1", "call_1", "save", '{"a":', args_done=False, item_done=False),
               terminal="failed"),
        [("call_1", "save", None, "truncated", "function")], [], "failed", FinishReason.ERROR, "server_error"),
    "flat_error_event": (
        then(stream(function_item(0, "fc_1", "call_1", "save", '{"a":', args_done=False, item_done=False),
                    terminal=None),
             {"type": "error", "code": "rate_limit_exceeded", "message": "Slow down", "param": None}),
        [("call_1", "save", None, "truncated", "function")], [], None, None, "rate_limit_exceeded"),
    "nested_error_event": (
        then(stream(terminal=None), {"type": "error", "error": {
            "type": "too_many_requests", "code": "too_many_requests", "message": "Too Many Requests"}}),
        [], [], None, None, "too_many_requests"),
    "unknown_event_type_is_skipped": (
        stream([{"type": "response.brand_new_thing", "payload": {"x": 1}}],
               function_item(0, "fc_1", "call_1", "f", '{"a":1}')),
        [("call_1", "f", {"a": 1}, "complete", "function")], [], "completed", FinishReason.TOOL_CALLS, None),
    "sequence_gap_is_a_protocol_error_on_the_turn": (
        _gap(stream(function_item(0, "fc_1", "call_1", "f", '{"a":1}'))),
        [("call_1", "f", {"a": 1}, "complete", "function")], [], "completed", FinishReason.TOOL_CALLS,
        "protocol_error"),
    "sequence_reordering_is_a_protocol_error_on_the_turn": (
        _swap(stream(function_item(0, "fc_1", "call_1", "f", '{"a":1}', (3,)))),
        [("call_1", "f", None, "errored", "function")], [], "completed", FinishReason.TOOL_CALLS, "protocol_error"),
    "delta_for_an_unknown_item_id": (
        then(stream(function_item(0, "fc_1", "call_1", "f", '{"a":1}', args_done=False, item_done=False),
                    terminal=None),
             {"type": "response.function_call_arguments.delta", "item_id": "fc_nope", "output_index": 7,
              "delta": "x"}),
        [("call_1", "f", None, "errored", "function")], [], None, None, "protocol_error"),
    "args_done_mismatch_is_final_mismatch": (
        stream(function_item(0, "fc_1", "call_1", "f", '{"a":1}', final='{"a":2}')),
        [("call_1", "f", None, "errored", "function")], [], "completed", FinishReason.TOOL_CALLS, None),
    "output_item_done_mismatch_after_done_is_final_mismatch": (
        stream(function_item(0, "fc_1", "call_1", "f", '{"a":1}', item_final='{"a":1,"b":2}')),
        [("call_1", "f", None, "errored", "function")], [], "completed", FinishReason.TOOL_CALLS, None),
    "output_item_done_alone_is_a_terminator": (
        stream(function_item(0, "fc_1", "call_1", "f", '{"a":1}', args_done=False)),
        [("call_1", "f", {"a": 1}, "complete", "function")], [], "completed", FinishReason.TOOL_CALLS, None),
    "completed_before_the_terminator_is_a_protocol_error": (
        stream(function_item(0, "fc_1", "call_1", "f", '{"a":1}', args_done=False, item_done=False)),
        [("call_1", "f", None, "errored", "function")], [], "completed", FinishReason.TOOL_CALLS, "protocol_error"),
    "stream_cut_without_a_terminal_event": (
        stream(function_item(0, "fc_1", "call_1", "f", '{"a":1}'), terminal=None),
        [("call_1", "f", {"a": 1}, "complete", "function")], [], None, None, "stream_cut"),
    "empty_string_call_id_counts_as_no_id": (
        stream(function_item(0, "fc_1", "", "f", "{}")),
        [(None, "f", {}, "complete", "function")], [], "completed", FinishReason.TOOL_CALLS, None),
    "empty_string_item_id_matches_deltas_by_output_index": (
        stream(function_item(0, "", "call_1", "f", '{"a":1}', (2,))),
        [("call_1", "f", {"a": 1}, "complete", "function")], [], "completed", FinishReason.TOOL_CALLS, None),
    "arguments_in_the_added_item_are_the_first_fragment": (
        stream([{**e, "item": {**e["item"], "arguments": '{"a":'}} if e["type"].endswith("added") else e
                for e in function_item(0, "fc_1", "call_1", "f", '{"a":1}', (5,))
                if e.get("delta") != '{"a":']),
        [("call_1", "f", {"a": 1}, "complete", "function")], [], "completed", FinishReason.TOOL_CALLS, None),
    "text_only": (
        stream(message_item(0, "msg_1", "Hello there, world")), [], [], "completed", FinishReason.STOP, None),
    "no_sequence_numbers_at_all": (
        stream(function_item(0, "fc_1", "call_1", "f", '{"a":1}'), numbered=False),
        [("call_1", "f", {"a": 1}, "complete", "function")], [], "completed", FinishReason.TOOL_CALLS, None),
    "fragment_after_done_fails_the_call": (
        then(stream(function_item(0, "fc_1", "call_1", "f", '{"a":1}', item_done=False), terminal=None),
             {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0,
              "delta": "}"}),
        [("call_1", "f", None, "errored", "function")], [], None, None, "protocol_error"),
    "second_response_created_is_a_spliced_stream": (
        then(stream(function_item(0, "fc_1", "call_1", "f", '{"a":1}', args_done=False, item_done=False),
                    terminal=None),
             {"type": "response.created", "response": {"id": "resp_2", "status": "in_progress"}}),
        [("call_1", "f", None, "errored", "function")], [], None, None, "spliced_stream"),
    "done_sentinel_from_a_proxy_is_tolerated": (
        then(stream(function_item(0, "fc_1", "call_1", "f", '{"a":1}')), "[DONE]"),
        [("call_1", "f", {"a": 1}, "complete", "function")], [], "completed", FinishReason.TOOL_CALLS, None),
}


@pytest.mark.parametrize("name", CASES)
def test_case(name):
    """Each Responses stream case gives the calls, server calls, finish and error written next to it."""
    events, calls, server, raw, finish, error = CASES[name]
    turn = parse(events)
    assert calls_of(turn) == calls
    assert [(s.call_id, s.name, s.type, s.input) for s in turn.server_calls] == server
    assert turn.raw_finish_reason == raw
    assert turn.finish_reason == finish
    assert (turn.error.type if turn.error else None) == error
    if error is not None or finish not in (FinishReason.TOOL_CALLS, FinishReason.STOP):
        assert turn.runnable_calls == []


def test_final_mismatch_is_typed_and_never_runs():
    """A ``.done`` whose arguments differ from the deltas leaves the call errored with FINAL_MISMATCH."""
    turn = parse(CASES["args_done_mismatch_is_final_mismatch"][0])
    (call,) = turn.calls
    assert call.problem.code is ProblemCode.FINAL_MISMATCH and not call.runnable
    assert turn.finished_cleanly and turn.runnable_calls == []
    turn = parse(CASES["output_item_done_mismatch_after_done_is_final_mismatch"][0])
    assert turn.calls[0].problem.code is ProblemCode.FINAL_MISMATCH and turn.runnable_calls == []


def test_items_only_in_the_final_response_are_taken_whole():
    """A stream of lifecycle events only (some proxies) gives the calls listed in ``response.completed``."""
    items = done_items(stream(reasoning_item(0, "rs_1"), function_item(1, "fc_1", "call_1", "f", '{"a":1}'),
                              message_item(2, "msg_1", "ok")))
    events = stream(terminal="completed")
    events[-1]["response"]["output"] = items
    turn = parse(events)
    assert calls_of(turn) == [("call_1", "f", {"a": 1}, "complete", "function")]
    assert turn.text == "ok" and turn.assistant_message == items and turn.finished_cleanly


def test_final_response_output_that_differs_from_the_deltas_is_final_mismatch():
    """A call whose arguments in ``response.completed`` differ from the assembled ones never runs."""
    events = stream(function_item(0, "fc_1", "call_1", "f", '{"a":1}'))
    events[-1]["response"]["output"][0]["arguments"] = '{"a":2}'
    turn = parse(events)
    assert turn.calls[0].problem.code is ProblemCode.FINAL_MISMATCH and turn.runnable_calls == []


def test_truncation_problems_say_what_cut_the_call():
    """Calls cut by max_output_tokens, a content filter, an error or a cut carry the matching problem code."""
    expected = {
        "incomplete_max_output_tokens_truncates_the_open_call": ProblemCode.CUT_BY_LENGTH,
        "incomplete_content_filter_truncates_the_open_call": ProblemCode.CUT_BY_FILTER,
        "item_done_with_status_incomplete_is_cut_not_completed": ProblemCode.CUT_BY_LENGTH,
        "failed": ProblemCode.STREAM_ERROR,
        "flat_error_event": ProblemCode.STREAM_ERROR,
    }
    for name, code in expected.items():
        (call,) = parse(CASES[name][0]).calls
        assert call.problem.code is code, name


def test_error_events_keep_the_providers_fields():
    """The flat ``error`` event and ``response.failed`` keep code and message on the turn's error."""
    err = parse(CASES["flat_error_event"][0]).error
    assert (err.type, err.code, err.message) == ("rate_limit_exceeded", "rate_limit_exceeded", "Slow down")
    err = parse(CASES["failed"][0]).error
    assert (err.type, err.code, err.message) == ("server_error", "server_error", "The model failed.")


def test_sequence_problem_keeps_the_calls_visible_but_not_runnable():
    """After a sequence gap the calls still parse, but the turn records a protocol error and runs nothing."""
    turn = parse(CASES["sequence_gap_is_a_protocol_error_on_the_turn"][0])
    assert "sequence_number 4 after 2" in turn.error.message
    assert turn.calls[0].runnable and not turn.finished_cleanly and turn.runnable_calls == []


def test_call_meta_keeps_item_id_namespace_and_caller():
    """``provider_meta`` keeps the item id (``fc_…``), namespace and caller; ``call_id`` is the answer key."""
    caller = {"type": "program", "caller_id": "call_prog"}
    turn = parse(stream(function_item(0, "fc_9", "call_9", "lookup", "{}", namespace="crm", caller=caller)))
    (call,) = turn.calls
    assert call.call_id == "call_9"
    assert call.provider_meta == {"item_id": "fc_9", "namespace": "crm", "caller": caller}


def test_builtin_arguments_are_the_action_object_as_received():
    """A builtin call's ``raw_arguments`` is its action's JSON text and ``args`` the object; it is runnable."""
    data = b'{"type":"response.output_item.done","output_index":0,"item":{"type":"shell_call","id":"sh_1",' \
           b'"call_id":"call_s","status":"completed","action":{"commands": ["ls"],"timeout_ms":null}}}\n' \
           b'{"type":"response.completed","response":{"id":"r","status":"completed"}}\n'
    turn = toolwire.parse("openai-responses", data, format="jsonl")
    (call,) = turn.calls
    assert (call.kind, call.name, call.args) == (CallKind.BUILTIN, "shell", {"commands": ["ls"], "timeout_ms": None})
    assert call.raw_arguments == '{"commands": ["ls"],"timeout_ms":null}'
    assert turn.runnable_calls == [call]


def test_reasoning_before_a_call_is_replayed_in_assistant_message():
    """``assistant_message`` lists the items in output order, reasoning with its final encrypted_content."""
    events = stream(reasoning_item(0, "rs_1", encrypted="gAAAA-final"),
                    function_item(1, "fc_1", "call_1", "get_weather", ARGS),
                    message_item(2, "msg_1", "Checking."))
    turn = parse(events)
    msg = turn.assistant_message
    assert [i["type"] for i in msg] == ["reasoning", "function_call", "message"]
    assert msg[0]["id"] == "rs_1" and msg[0]["encrypted_content"] == "gAAAA-final"
    assert (msg[1]["call_id"], msg[1]["id"], msg[1]["arguments"]) == ("call_1", "fc_1", ARGS)
    assert msg[2]["content"][0]["text"] == "Checking." and turn.text == "Checking."


def test_assistant_message_of_a_cut_call_carries_the_streamed_text():
    """An item that never got its ``output_item.done`` is replayed with the arguments streamed so far."""
    turn = parse(stream(function_item(0, "fc_1", "call_1", "f", '{"a":1', args_done=False, item_done=False),
                        terminal=None))
    assert turn.assistant_message == [{"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f",
                                       "arguments": '{"a":1', "status": "in_progress"}]


def test_non_streaming_body():
    """A whole Response body gives its items in order, server calls apart, status mapped like the stream's."""
    body = {"id": "resp_9", "object": "response", "model": "gpt-test", "status": "completed", "usage": {"t": 1},
            "output": [
                {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc"},
                {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": '{"a":1}',
                 "status": "completed"},
                {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_2", "name": "sql", "input": "SELECT 1"},
                MCP,
                {"type": "apply_patch_call", "id": "apc_1", "call_id": "call_3", "status": "completed",
                 "operation": {"type": "delete_file", "path": "a.txt"}},
                {"type": "message", "id": "msg_1", "role": "assistant", "content": [
                    {"type": "output_text", "text": "Hi", "annotations": []}]}]}
    turn = toolwire.parse("openai-responses", json.dumps(body, indent=2).encode(), format="json")
    assert calls_of(turn) == [("call_1", "f", {"a": 1}, "complete", "function"),
                              ("call_2", "sql", None, "complete", "custom"),
                              ("call_3", "apply_patch", {"type": "delete_file", "path": "a.txt"}, "complete",
                               "builtin")]
    assert turn.calls[1].raw_arguments == "SELECT 1"
    assert [(s.name, s.type) for s in turn.server_calls] == [("ask_question", "mcp_call")]
    assert (turn.response_id, turn.model, turn.text, turn.raw_finish_reason) == ("resp_9", "gpt-test", "Hi",
                                                                                  "completed")
    assert turn.finished_cleanly and len(turn.runnable_calls) == 3
    assert turn.assistant_message == body["output"]
    assert toolwire.parse("openai-responses", json.dumps(body).encode()) == toolwire.parse(
        "openai-responses", json.dumps(body).encode(), format="json")


@pytest.mark.parametrize("item, args, raw, problem", [
    ({"arguments": {"a": 1}}, {"a": 1}, '{"a": 1}', None),
    ({}, None, "", ProblemCode.PROTOCOL_ERROR),
    ({"arguments": None}, None, "", ProblemCode.PROTOCOL_ERROR),
])
def test_whole_function_call_arguments_as_object_or_missing(item, args, raw, problem):
    """Object arguments (compatible servers) are taken as their JSON; missing arguments never become ``{}``."""
    body = {"object": "response", "status": "completed",
            "output": [{"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", **item}]}
    (call,) = toolwire.parse("openai-responses", json.dumps(body).encode(), format="json").calls
    assert (call.args, call.raw_arguments, call.problem and call.problem.code) == (args, raw, problem)


def test_non_streaming_incomplete_body_truncates_the_incomplete_item():
    """A body with status incomplete truncates the call whose item is incomplete and runs nothing."""
    body = {"id": "r", "object": "response", "status": "incomplete",
            "incomplete_details": {"reason": "max_output_tokens"},
            "output": [{"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f",
                        "arguments": '{"a":', "status": "incomplete"}]}
    turn = toolwire.parse("openai-responses", json.dumps(body).encode(), format="json")
    assert calls_of(turn) == [("call_1", "f", None, "truncated", "function")]
    assert turn.calls[0].problem.code is ProblemCode.CUT_BY_LENGTH and turn.calls[0].raw_arguments == '{"a":'
    assert turn.finish_reason is FinishReason.LENGTH and turn.runnable_calls == []


@pytest.mark.parametrize("body, error_type", [
    ({"error": {"message": "Invalid API key", "type": "invalid_request_error", "code": "invalid_api_key"}},
     "invalid_request_error"),
    ({"id": "r", "object": "response", "status": "failed", "output": [],
      "error": {"code": "rate_limit_exceeded", "message": "Too many"}}, "rate_limit_exceeded"),
])
def test_error_bodies_are_typed_errors(body, error_type):
    """An HTTP error body and a failed Response body give a typed turn error, never an exception."""
    turn = toolwire.parse("openai-responses", json.dumps(body).encode(), format="json")
    assert turn.error.type == error_type and turn.calls == [] and turn.runnable_calls == []


@pytest.mark.parametrize("payload, fragment", [
    ({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": 5}, "$.delta"),
    ({"type": "response.output_item.added", "output_index": "zero", "item": {}}, "$.output_index"),
    ({"type": "response.output_item.added", "output_index": 0, "item": ["no"]}, "got `array`"),
])
def test_a_known_event_with_a_wrong_shape_is_a_protocol_error(payload, fragment):
    """A known event type with a wrong field type is a protocol error that names the bad field."""
    turn = parse(then(stream(terminal=None), payload))
    assert turn.error.type == "protocol_error" and fragment in turn.error.message


def test_done_for_an_item_that_is_not_a_call_is_a_protocol_error():
    """``function_call_arguments.done`` naming a message item is a protocol error, not a silent no-op."""
    turn = parse(then(stream(message_item(0, "msg_1", "hi"), terminal=None),
                      {"type": "response.function_call_arguments.done", "item_id": "msg_1", "arguments": "{}"}))
    assert turn.error.type == "protocol_error" and "msg_1" in turn.error.message


def test_events_after_the_terminal_event_are_a_protocol_error():
    """A call announced after ``response.completed`` is a protocol error: the turn is no longer clean."""
    events = then(stream(function_item(0, "fc_1", "call_1", "f", "{}")), *function_item(1, "fc_2", "call_2", "g", "{}"))
    turn = parse(events)
    assert [c.call_id for c in turn.calls] == ["call_1"] and turn.error.type == "protocol_error"
    assert turn.runnable_calls == []


def test_unknown_event_is_logged_at_debug(toolwire_debug):
    """An unknown event type is skipped with a ``payload.skipped`` debug event naming its type."""
    from structlog.testing import capture_logs

    with capture_logs() as logs:
        parse(CASES["unknown_event_type_is_skipped"][0])
    skipped = [e for e in logs if e["event"] == "payload.skipped"]
    assert [e["type"] for e in skipped] == ["response.brand_new_thing"]


# ---- generated streams --------------------------------------------------------------------------------------
_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12) | st.sampled_from(
    ["", "olá 🌍", "漢字\n\"q\"", "\\u00e9\t", "\u2028x"])
_VALUES = st.recursive(_TEXT | st.integers(-10 ** 12, 10 ** 12) | st.booleans() | st.none(),
                       lambda kids: st.lists(kids, max_size=3) | st.dictionaries(_TEXT, kids, max_size=3),
                       max_leaves=5)
_ARGS = st.dictionaries(_TEXT, _VALUES, max_size=4)
_NAMES = st.from_regex(r"\A[a-zA-Z0-9_-]{1,24}\Z", fullmatch=True)
_SUFFIX = st.text(string.ascii_letters + string.digits, min_size=4, max_size=12)
_SIZES = st.lists(st.integers(1, 16), min_size=1, max_size=5).map(tuple)


@st.composite
def items_strategy(draw, kinds=("function", "custom", "reasoning", "message")):
    """1 to 5 output items: function calls (any JSON object), custom calls, reasoning and message items."""
    n = draw(st.integers(1, 5))
    out = []
    for i in range(n):
        kind = draw(st.sampled_from(kinds))
        sfx = draw(_SUFFIX) + str(i)
        sizes = draw(_SIZES)
        if kind == "function":
            args = json.dumps(draw(_ARGS), ensure_ascii=draw(st.booleans()))
            out.append(("function", function_item(i, "fc_" + sfx, "call_" + sfx, draw(_NAMES), args, sizes),
                        "call_" + sfx))
        elif kind == "custom":
            out.append(("custom", custom_item(i, "ctc_" + sfx, "call_" + sfx, draw(_NAMES), draw(_TEXT), sizes),
                        "call_" + sfx))
        elif kind == "reasoning":
            out.append(("reasoning", reasoning_item(i, "rs_" + sfx, draw(_TEXT), "enc" + sfx), None))
        else:
            out.append(("message", message_item(i, "msg_" + sfx, draw(_TEXT), sizes), None))
    return out


def _generated(items, terminal="completed") -> list[dict]:
    return stream(*[evs for _, evs, _ in items], terminal=terminal)


def _pieces(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    out, prev = [], 0
    for p in points:
        out.append(data[prev:p])
        prev = p
    out.append(data[prev:])
    return out


@given(items=items_strategy(), cuts=st.lists(st.integers(0, 1 << 20), max_size=16),
       newline=st.sampled_from(["\n", "\r\n", "\r"]), terminal=st.sampled_from(["completed", "incomplete", None]))
def test_any_split_gives_the_same_turn_as_whole(items, cuts, newline, terminal):
    """Feeding a generated stream in any pieces (inside UTF-8 characters and CRLF too) gives the whole's Turn."""
    data = sse_bytes(_generated(items, terminal), newline)
    whole = toolwire.parse("openai-responses", data)
    assert toolwire.parse("openai-responses", _pieces(data, cuts)) == whole
    if terminal == "completed":
        assert whole.finished_cleanly and [c.call_id for c in whole.calls] == [c for _, _, c in items if c]


@given(items=items_strategy(), data=st.data())
def test_every_strict_prefix_truncates_or_drops_unterminated_calls(items, data):
    """A prefix completes a call only if its terminator is inside it; without response.completed nothing runs."""
    events = _generated(items)
    raw, ends = encode(events)
    term_end: dict[str, int] = {}
    for ev, end in zip(events, ends):
        if ev["type"] in ("response.function_call_arguments.done", "response.custom_tool_call_input.done"):
            item = next(e["item"] for e in events if e["type"] == "response.output_item.added"
                        and e["item"]["id"] == ev["item_id"])
            term_end.setdefault(item["call_id"], end)
    completed_end = ends[-1]
    for cut in data.draw(st.lists(st.integers(0, len(raw) - 1), min_size=1, max_size=6), label="cuts"):
        turn = toolwire.parse("openai-responses", raw[:cut])
        for call in turn.calls:
            if term_end[call.call_id] <= cut:
                assert call.state is CallState.COMPLETE, (cut, call)
            else:
                assert call.state is CallState.TRUNCATED, (cut, call)
        if cut < completed_end:
            assert not turn.finished_cleanly and turn.runnable_calls == []


@given(items=items_strategy())
def test_events_report_each_call_once_and_arguments_add_up(items):
    """Per call: one announcement, one terminal event, and its ArgumentsReceived texts join to raw_arguments."""
    parser = toolwire.StreamParser("openai-responses")
    raw = sse_bytes(_generated(items))
    events = []
    for i in range(0, len(raw), 37):
        events += parser.feed(raw[i:i + 37])
    events += parser.close()
    turn = parser.turn
    for call in turn.calls:
        ann = [e for e in events if isinstance(e, toolwire.CallAnnounced) and e.local_id == call.local_id]
        ends = [e for e in events if isinstance(e, (toolwire.CallCompleted, toolwire.CallTruncated,
                                                    toolwire.CallErrored)) and e.call.local_id == call.local_id]
        text = "".join(e.text for e in events if isinstance(e, toolwire.ArgumentsReceived)
                       and e.local_id == call.local_id)
        assert len(ann) == 1 and len(ends) == 1 and text == call.raw_arguments


# ---- the openai SDK's Responses stream accumulator as oracle ------------------------------------------------
def sdk_snapshot(events: list[dict]):
    """Feed the events to the SDK's ``ResponseStreamState`` and return its accumulated response snapshot."""
    state = ResponseStreamState(input_tools=omit, text_format=omit)
    for payload in events:
        state.handle_event(construct_type(type_=ResponseStreamEvent, value=payload))
    return state._ResponseStreamState__current_snapshot  # the SDK keeps the snapshot there


@given(items=items_strategy(kinds=("function", "function", "reasoning", "message")))
def test_calls_match_the_openai_sdk_accumulator(items):
    """On well-formed streams toolwire's calls (call_id, name, arguments) equal what the SDK accumulates."""
    events = _generated(items)
    sdk = [(o.call_id, o.name, o.arguments) for o in sdk_snapshot(events).output if o.type == "function_call"]
    turn = toolwire.parse("openai-responses", sse_bytes(events))
    assert [(c.call_id, c.name, c.raw_arguments) for c in turn.calls] == sdk
    assert [json.loads(a) for _, _, a in sdk] == [c.args for c in turn.calls]
    assert all(c.runnable for c in turn.calls) and turn.finished_cleanly


def test_composite_stream_matches_the_openai_sdk_accumulator():
    """The composite stream gives the SDK's call, and its final Response has the same arguments."""
    events = stream(function_item(0, "fc_1", "call_1", "get_weather", '{"location":"Paris"}', (12,)))
    state = ResponseStreamState(input_tools=omit, text_format=omit)
    out = []
    for payload in events:
        out += state.handle_event(construct_type(type_=ResponseStreamEvent, value=payload))
    final = out[-1].response.output[0]
    turn = parse(events)
    assert (final.call_id, final.name, final.arguments) == ("call_1", "get_weather", turn.calls[0].raw_arguments)
