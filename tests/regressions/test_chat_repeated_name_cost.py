"""A Chat stream that repeats ``name`` (without ``id``) on every fragment costs linear work: telling a new call
from a continuation must not re-join and re-decode the whole argument buffer at each fragment. Work is counted
(JSON decodes and the characters they read), never timed.
"""

from __future__ import annotations

import json

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolwire
from toolwire import CallState

from ..streamgen import calls_strategy, split_text
from ..wire import chunk, sse, tc


def _stream(fragments: int) -> tuple[bytes, str]:
    value = "x" * (fragments * 4)
    text = '{"v": "' + value + '"}'
    size = -(-len(text) // fragments)
    pieces = [text[i:i + size] for i in range(0, len(text), size)]
    chunks = [chunk(tc(0, "call_1" if i == 0 else None, "write", p)) for i, p in enumerate(pieces)]
    return sse(*chunks, chunk(finish="tool_calls"), "[DONE]"), value


def _decode_work(monkeypatch, fragments: int) -> tuple[int, int]:
    """(decodes, characters decoded) through ``msgspec.json.decode`` while parsing the stream."""
    data, value = _stream(fragments)
    real = msgspec.json.decode
    work = [0, 0]

    def counting(buf, *args, **kwargs):
        work[0] += 1
        work[1] += len(buf)
        return real(buf, *args, **kwargs)

    monkeypatch.setattr(msgspec.json, "decode", counting)
    turn = toolwire.parse("openai-chat", data)
    monkeypatch.setattr(msgspec.json, "decode", real)
    assert [(c.call_id, c.name, c.args, c.state) for c in turn.calls] == [
        ("call_1", "write", {"v": value}, CallState.COMPLETE)]
    return work[0], work[1]


def test_a_name_repeated_on_every_fragment_costs_linear_decoding_work(monkeypatch):
    """Doubling the fragments (and the text) at most doubles the JSON decoding work, instead of quadrupling it."""
    calls_1, chars_1 = _decode_work(monkeypatch, 2000)
    calls_2, chars_2 = _decode_work(monkeypatch, 4000)
    assert calls_2 <= 2 * calls_1 + 2
    assert chars_2 <= 2.5 * max(chars_1, 1)


@pytest.mark.parametrize("fragments", [1, 2, 7])
def test_a_name_repeated_on_every_fragment_is_still_one_call(fragments):
    """However the arguments are cut, fragments that repeat the name continue the one call."""
    data, value = _stream(fragments)
    turn = toolwire.parse("openai-chat", data)
    assert [(c.call_id, c.args) for c in turn.calls] == [("call_1", {"v": value})]


@given(calls=calls_strategy(max_calls=3), sizes=st.lists(st.integers(1, 12), min_size=1, max_size=4),
       same_index=st.booleans(), whole_first=st.booleans())
def test_names_repeated_on_every_fragment_give_the_calls_they_were_built_from(calls, sizes, same_index,
                                                                              whole_first):
    """Calls whose every fragment repeats the name (the id only on the first), at their own index or all at
    index 0, come out as the calls they were built from: a continuation is never taken for a new call."""
    chunks = []
    for k, (call_id, name, args) in enumerate(calls):
        text = json.dumps(args)
        frags = [text] if whole_first and k == 0 else split_text(text, sizes)
        index = 0 if same_index else k
        chunks += [chunk(tc(index, call_id if i == 0 else None, name, f)) for i, f in enumerate(frags)]
    turn = toolwire.parse("openai-chat", sse(*chunks, chunk(finish="tool_calls"), "[DONE]"))
    assert [(c.call_id, c.name, c.args) for c in turn.calls] == [tuple(c) for c in calls]
    assert turn.finished_cleanly
