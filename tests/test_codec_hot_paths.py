"""The per-payload paths of the Responses and Gemini Interactions codecs against their rules, written here
without the codecs' shortcuts.

* Responses: every event with a ``sequence_number`` (known, ignored or of an unknown type) must carry the one after
  the previous numbered event's; the first break is reported as ``sequence_number N after M``, whatever numbering
  and event mix comes.
* Gemini Interactions: a payload that starts with ``[DONE]`` ends the stream wherever it comes, whatever follows
  those six bytes (the codec now recognises it only once the event decoder refused it).
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

import toolwire

from .test_codec_openai_responses import function_item, sse_bytes, stream

_SETTINGS = settings(max_examples=150, deadline=None)


def _expected_break(numbers: list[int | None]) -> tuple[int, int] | None:
    """(previous, got) of the first numbered event that does not follow the previous numbered one."""
    last = None
    for sn in numbers:
        if sn is None:
            continue
        if last is not None and sn != last + 1:
            return last, sn
        last = sn
    return None


@_SETTINGS
@given(data=st.data())
def test_responses_sequence_numbers_follow_the_rule_for_any_numbering(data):
    """Events numbered at random (in order, with gaps, steps back, repeats, or not at all), unknown event types
    among them: the turn has a protocol error naming the first break exactly when there is one."""
    events = stream(function_item(0, "fc_1", "call_1", "f", '{"a":1,"b":"xyz"}', (3,)), numbered=False)
    at = data.draw(st.integers(2, len(events) - 1), label="unknown event at")
    events.insert(at, {"type": "response.brand_new_thing", "x": 1})
    start = data.draw(st.integers(0, 5), label="first number")
    numbers: list[int | None] = []
    for i in range(len(events)):
        how = data.draw(st.sampled_from(["next", "next", "next", "none", "jump", "back"]), label=f"number {i}")
        last = next((n for n in reversed(numbers) if n is not None), start - 1)
        numbers.append({"next": last + 1, "none": None, "jump": last + 2, "back": max(0, last - 1)}[how])
    numbered = [e if n is None else {**e, "sequence_number": n} for e, n in zip(events, numbers)]
    turn = toolwire.parse("openai-responses", sse_bytes(numbered))
    expected = _expected_break(numbers)
    if expected is None:
        assert turn.error is None
        assert [c.args for c in turn.calls] == [{"a": 1, "b": "xyz"}]
    else:
        assert turn.error is not None and turn.error.type == "protocol_error"
        assert f"sequence_number {expected[1]} after {expected[0]}:" in turn.error.message


def _interactions(events: list[dict], tail: bytes) -> bytes:
    body = b"".join(f"event: {e['event_type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)
    return body + b"data: " + tail + b"\n\n"


_HEAD = [
    {"event_type": "interaction.created", "interaction": {"id": "v1_x", "status": "in_progress"}},
    {"event_type": "step.start", "index": 0, "step": {"type": "function_call", "id": "c1", "name": "f",
                                                      "arguments": {}}},
    {"event_type": "step.delta", "index": 0, "delta": {"type": "arguments_delta", "arguments": '{"a":1}'}},
]


def _summary(turn: toolwire.Turn) -> tuple:
    return (turn.finish_reason, turn.error and (turn.error.type, turn.error.message),
            [(c.state.value, c.problem and c.problem.code) for c in turn.calls])


@_SETTINGS
@given(suffix=st.binary(max_size=20).filter(lambda b: b"\n" not in b and b"\r" not in b),
       cut=st.integers(0, len(_HEAD)))
def test_interactions_done_with_anything_after_it_ends_the_stream_like_done(suffix, cut):
    """``[DONE]`` followed by any bytes, before the completion, ends the stream as ``[DONE]`` alone does: a cut
    (not a payload that does not decode), every call still open truncated."""
    turn = toolwire.parse("gemini-interactions", _interactions(_HEAD[:cut], b"[DONE]" + suffix))
    assert turn.error.type == "stream_cut"
    assert all(c.state.value == "truncated" for c in turn.calls)
    plain = toolwire.parse("gemini-interactions", _interactions(_HEAD[:cut], b"[DONE]"))
    assert _summary(turn) == _summary(plain)
