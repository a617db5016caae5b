"""A response whose body holds bytes that are not UTF-8 in a field toolwire ignores still has a message to replay.

Every dialect answered ``history_messages(turn, [])`` with the assistant message it could replay, except Gemini,
whose replay decodes each payload again: there the bad bytes made the message None and the call raised a
``UsageError`` blaming the parse mode ("parse it with calls kept"), which was not the cause.
"""

from __future__ import annotations

import pytest

import toolwire

from ..bodies import PROVIDERS, body


def _with_bad_bytes_in_an_ignored_field(data: bytes) -> bytes:
    start = data.index(b"{")
    return data[:start + 1] + b'"x_ignored_field": "bad \xff bytes", ' + data[start + 1:]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_body_with_bytes_that_are_not_utf8_in_an_ignored_field_still_replays_an_assistant_message(
        provider: str) -> None:
    """No dialect raises for the replay; each gives what it could keep (Responses items and Interactions steps: none,
    the body being their one payload)."""
    data = _with_bad_bytes_in_an_ignored_field(body(provider, [("call_1", "lookup", {"q": "x"})], text="hello"))
    turn = toolwire.parse(provider, data)
    assert isinstance(toolwire.history_messages(turn, []), list)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_body_that_is_not_utf8_anywhere_runs_none_of_its_calls(provider: str) -> None:
    """JSON text is UTF-8: a body with other bytes, even in a field nobody reads, is not what it must be."""
    data = _with_bad_bytes_in_an_ignored_field(body(provider, [("call_1", "lookup", {"q": "x"})], text="hello"))
    turn = toolwire.parse(provider, data)
    assert turn.runnable_calls == []
    assert turn.error is not None and turn.error.type == "protocol_error"
