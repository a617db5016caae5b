"""A body whose field toolwire ignores holds a number no Python value can take (``1e400``, an integer of 5,000
digits) still has a message to replay, in every dialect.

JSON allows such numbers; toolwire skips fields it does not read without converting them. Gemini's replay read
each payload again in full, so there the number made the message None, and ``history_messages(turn, [])`` raised
a ``UsageError`` that blamed the parse mode ("parse it with calls kept"). The other dialects returned their
assistant message. The replay now reads only the parts it gives back. If a turn still has no message to replay,
the error names both possible causes and the turn's error.
"""

from __future__ import annotations

import pytest

import toolwire

from ..bodies import PROVIDERS, body
from ..dialects import adapter

NUMBERS = {"float_out_of_range": b"1e400", "integer_of_5000_digits": b"9" * 5000}


def _with_ignored_number(data: bytes, number: bytes) -> bytes:
    start = data.index(b"{")
    return data[:start + 1] + b'"x_ignored_field": ' + number + b", " + data[start + 1:]


@pytest.mark.parametrize("number", NUMBERS)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_body_with_an_unreadable_number_in_an_ignored_field_replays_an_assistant_message(provider, number):
    """No dialect raises for the replay of a whole body."""
    data = _with_ignored_number(body(provider, [("call_1", "lookup", {"q": "x"})], text="hello"), NUMBERS[number])
    turn = toolwire.parse(provider, data)
    assert isinstance(toolwire.history_messages(turn, []), list)


@pytest.mark.parametrize("number", NUMBERS)
@pytest.mark.parametrize("provider", [p for p in PROVIDERS if adapter(p).stream_format == "sse"])
def test_a_stream_with_an_unreadable_number_in_an_ignored_field_replays_an_assistant_message(provider, number):
    """No dialect raises for the replay of a stream whose every payload carries such a field."""
    data = adapter(provider).small_case().data
    blocks = data.split(b"data: {")
    data = b"data: {".join([blocks[0]] + [b'"x_ignored_field": ' + NUMBERS[number] + b", " + b for b in blocks[1:]])
    turn = toolwire.parse(provider, data, format="sse")
    assert isinstance(toolwire.history_messages(turn, []), list)


def test_no_message_to_replay_names_both_causes():
    """The streaming mode keeps no message: the error says so, and also that the replay may not have been built
    from the provider's data."""
    parser = toolwire.StreamParser("gemini", keep_calls=False)
    parser.feed(adapter("gemini").small_case().data)
    parser.close()
    with pytest.raises(toolwire.UsageError, match="keep_calls=False.*provider's data"):
        toolwire.history_messages(parser.turn, [])


@pytest.mark.parametrize("number", NUMBERS)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_body_with_an_unreadable_number_in_an_ignored_field_keeps_its_calls_and_text(provider, number):
    """The number is in a field no dialect reads: the body is the same turn without it, so its calls are whole
    and its message replays them (Bedrock decoded the whole body at once, so the number made it a protocol
    error and its calls were lost)."""
    plain = body(provider, [("call_1", "lookup", {"q": "x"})], text="hello")
    expected = toolwire.parse(provider, plain)
    turn = toolwire.parse(provider, _with_ignored_number(plain, NUMBERS[number]))
    assert turn.error is None, turn.error
    assert [(c.name, c.args, c.state) for c in turn.calls] == [(c.name, c.args, c.state) for c in expected.calls]
    assert turn.text == expected.text
    assert toolwire.history_messages(turn, []) == toolwire.history_messages(expected, [])
