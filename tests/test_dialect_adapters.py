"""Every registered dialect has a test adapter (``tests/dialects``), so the generic suites (split invariance,
prefixes, results, history repair, ``toolwire parse``, fuzz, and for the simulated dialects the loop and the SDK
response models) cover it; and what an adapter writes parses."""

from __future__ import annotations

import random

import pytest

import toolwire
from toolwire.codecs import dialects

from .dialects import REGISTERED, adapter, adapters


def test_every_registered_dialect_has_a_test_adapter():
    """A dialect added to toolwire.codecs without tests/dialects/<id>.py fails here (and in every generic suite)."""
    missing = [d.id for d in dialects() if d.id not in adapters()]
    assert missing == [], f"no test adapter for {missing}: write tests/dialects/<id>.py defining ADAPTER"


def test_every_adapter_is_a_registered_dialect():
    """An adapter names a dialect the registry knows (a renamed or removed dialect leaves no stray adapter)."""
    assert set(adapters()) <= set(REGISTERED)


@pytest.mark.parametrize("provider", REGISTERED)
def test_the_fuzz_seeds_of_every_dialect_parse(provider):
    """The adapter's fuzz seeds exist in every format it writes (the text formats, and the dialect's own framing)
    and each parses without an exception."""
    seeds = adapter(provider).fuzz_seeds(random.Random(1), 8)
    assert seeds and {fmt for _, fmt, _ in seeds} <= {"sse", "jsonl", "json", adapter(provider).stream_format}
    for _, fmt, data in seeds:
        toolwire.parse(provider, data, format=fmt)


@pytest.mark.parametrize("provider", REGISTERED)
def test_the_small_stream_and_a_body_give_their_calls(provider):
    """The adapter's small stream and a whole body give the calls they were written with, cleanly."""
    a = adapter(provider)
    case = a.small_case()
    turn = toolwire.parse(provider, case.data)
    assert turn.finished_cleanly and [(c.call_id, c.name, c.args) for c in turn.calls] == case.calls
    calls = [("c_1", "f", {"x": 1}), ("c_2", "g", {})]
    turn = toolwire.parse(provider, a.body(calls, text="Sure."), format="json")
    assert turn.finished_cleanly and [(c.call_id, c.name, c.args) for c in turn.calls] == calls


@pytest.mark.parametrize("provider", REGISTERED)
def test_an_adapter_says_truly_whether_a_body_carries_its_response_id(provider):
    """`response_ids` is True exactly when a body built with a response id parses to a Turn with that id (the
    identity tests pass it as `turn_id` otherwise)."""
    a = adapter(provider)
    turn = toolwire.parse(provider, a.body([("call_1", "f", {})], response_id="resp_42"))
    assert (turn.response_id == "resp_42") is a.response_ids, turn.response_id
    if not a.response_ids:
        assert turn.response_id is None
