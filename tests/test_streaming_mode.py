"""keep_calls=False: a gateway's streaming mode whose memory is bounded by the calls still open."""

from __future__ import annotations

import gc
import tracemalloc

import toolwire
from toolwire.statemachine.table import MACHINE

from .wire import anthropic_events, sse


def _many_calls(n: int, size: int = 200) -> bytes:
    blocks = [{"type": "tool_use", "id": f"toolu_{i}", "name": "f",
               "fragments": ['{"v": "', "x" * size, '"}']} for i in range(n)]
    return sse(*anthropic_events(blocks), events=True)


def test_streaming_mode_delivers_every_call_through_events_and_keeps_none():
    """Every call arrives as CallCompleted; the final turn keeps no calls and no replay message."""
    data = _many_calls(50)
    parser = toolwire.StreamParser("anthropic", keep_calls=False)
    completed = []
    for i in range(0, len(data), 1000):
        completed += [e.call for e in parser.feed(data[i:i + 1000]) if isinstance(e, toolwire.CallCompleted)]
    completed += [e.call for e in parser.close() if isinstance(e, toolwire.CallCompleted)]
    assert [c.call_id for c in completed] == [f"toolu_{i}" for i in range(50)]
    assert all(c.args == {"v": "x" * 200} for c in completed)
    turn = parser.turn
    assert turn.calls == [] and turn.assistant_message is None and turn.finished_cleanly


def test_streaming_mode_releases_ended_calls_from_the_shared_machine():
    """Ended calls are detached from the shared Machine while the stream is still open."""
    parser = toolwire.StreamParser("anthropic", keep_calls=False)
    before = len(MACHINE.models)
    parser.feed(_many_calls(200))
    gc.collect()
    assert len(MACHINE.models) - before <= 1
    parser.close()


def test_streaming_mode_memory_grows_by_an_id_per_call_not_by_its_arguments():
    """From 400 to 4000 calls of 2 kB arguments each, peak traced memory grows by under 200 bytes a call: an
    ended call's arguments are not kept, only its id (so that a replayed block is refused)."""
    def peak(n: int) -> int:
        data = _many_calls(n, size=2000)
        chunks = [data[i:i + 4096] for i in range(0, len(data), 4096)]
        del data
        gc.collect()
        tracemalloc.start()
        parser = toolwire.StreamParser("anthropic", keep_calls=False)
        for c in chunks:
            parser.feed(c)
        parser.close()
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return top

    small, large = peak(400), peak(4000)
    assert (large - small) / 3600 < 200, (small, large)


def test_keep_calls_default_retains_the_whole_turn():
    """By default the turn keeps every call and the assistant message for replay."""
    turn = toolwire.parse("anthropic", _many_calls(5))
    assert len(turn.calls) == 5 and len(turn.assistant_message["content"]) == 5


import pytest  # noqa: E402

from .dialects import REGISTERED, adapter  # noqa: E402


@pytest.mark.parametrize("dialect", REGISTERED)
def test_streaming_mode_turn_has_no_replay_message_in_any_dialect(dialect):
    """In every dialect the streaming mode's turn has no assistant message and no per-choice message: the ended
    calls are forgotten, so a message built from what is left would replay a turn without its calls."""
    case = adapter(dialect).small_case()
    parser = toolwire.StreamParser(dialect, keep_calls=False, format=adapter(dialect).stream_format)
    completed = [e.call for e in parser.feed(case.data) if isinstance(e, toolwire.CallCompleted)]
    completed += [e.call for e in parser.close() if isinstance(e, toolwire.CallCompleted)]
    turn = parser.turn
    assert [c.call_id for c in completed] == [cid for cid, _, _ in case.calls]
    assert turn.calls == [] and turn.assistant_message is None
    assert all(choice.assistant_message is None for choice in turn.choices)
