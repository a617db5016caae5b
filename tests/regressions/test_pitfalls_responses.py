"""Regression tests for the entries of docs/failure-modes.md that apply to the OpenAI Responses dialect.

19: a ``function_call`` replayed without its ``reasoning`` item (or the reverse) gets HTTP 400; argument
deltas carry ``item_id`` (``fc_…``) while results are answered with ``call_id``.
"""

from __future__ import annotations

import json

import toolwire
from toolwire import CallState

from ..test_codec_openai_responses import function_item, reasoning_item, sse_bytes, stream


def _interleaved_parallel_calls() -> list[dict]:
    """Two function_call items whose argument deltas alternate, each naming its item only by ``item_id``."""
    a = function_item(0, "fc_aaa", "call_111", "get_weather", '{"city":"Paris"}', (4,))
    b = function_item(1, "fc_bbb", "call_222", "get_time", '{"tz":"Europe/Oslo"}', (4,))
    deltas_a = [e for e in a if e["type"].endswith(".delta")]
    deltas_b = [e for e in b if e["type"].endswith(".delta")]
    mixed = [a[0], b[0]]
    for i in range(max(len(deltas_a), len(deltas_b))):
        mixed += [{k: v for k, v in e.items() if k != "output_index"} for e in (deltas_a[i:i + 1] + deltas_b[i:i + 1])]
    mixed += [e for e in a + b if not e["type"].endswith(".delta") and e["type"] != "response.output_item.added"]
    return mixed


def test_pitfall_19_deltas_carry_item_id_and_results_are_answered_with_call_id():
    """Deltas keyed by ``item_id`` reach the right calls; each call's id is its ``call_id``, the item id is meta."""
    turn = toolwire.parse("openai-responses", sse_bytes(stream(_interleaved_parallel_calls())))
    assert [(c.call_id, c.name, c.args, c.state) for c in turn.calls] == [
        ("call_111", "get_weather", {"city": "Paris"}, CallState.COMPLETE),
        ("call_222", "get_time", {"tz": "Europe/Oslo"}, CallState.COMPLETE)]
    assert [c.provider_meta["item_id"] for c in turn.calls] == ["fc_aaa", "fc_bbb"]
    assert [c.call_id for c in turn.runnable_calls] == ["call_111", "call_222"]
    replay = turn.assistant_message
    assert [(i["id"], i["call_id"]) for i in replay] == [("fc_aaa", "call_111"), ("fc_bbb", "call_222")]


def test_pitfall_19_a_delta_naming_the_call_id_instead_of_the_item_id_is_not_matched():
    """A delta whose ``item_id`` is a ``call_id`` matches no item: a protocol error, never a guess."""
    events = function_item(0, "fc_aaa", "call_111", "get_weather", '{"city":"Paris"}', args_done=False,
                           item_done=False)
    events.insert(2, {"type": "response.function_call_arguments.delta", "item_id": "call_111", "output_index": 0,
                      "delta": "{}"})
    turn = toolwire.parse("openai-responses", sse_bytes(stream(events)))
    assert turn.error.type == "protocol_error" and "call_111" in turn.error.message
    assert turn.calls[0].state is CallState.ERRORED and turn.runnable_calls == []


def test_pitfall_19_reasoning_item_is_kept_next_to_its_function_call_in_the_replay():
    """Each reasoning item is replayed right before the call it preceded, with its final encrypted_content."""
    events = stream(reasoning_item(0, "rs_1", encrypted="ENC-ONE"),
                    function_item(1, "fc_1", "call_1", "search", '{"q":"a"}'),
                    reasoning_item(2, "rs_2", encrypted="ENC-TWO"),
                    function_item(3, "fc_2", "call_2", "search", '{"q":"b"}'))
    turn = toolwire.parse("openai-responses", sse_bytes(events))
    replay = turn.assistant_message
    assert [(i["type"], i["id"]) for i in replay] == [("reasoning", "rs_1"), ("function_call", "fc_1"),
                                                      ("reasoning", "rs_2"), ("function_call", "fc_2")]
    assert [i.get("encrypted_content") for i in replay[::2]] == ["ENC-ONE", "ENC-TWO"]
    assert [i["arguments"] for i in replay[1::2]] == ['{"q":"a"}', '{"q":"b"}']
    # the non-streaming body of the same response replays the same items
    body = {"id": "resp_1", "object": "response", "status": "completed", "output": replay}
    assert toolwire.parse("openai-responses", json.dumps(body).encode()).assistant_message == replay
