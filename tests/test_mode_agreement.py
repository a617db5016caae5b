"""The streaming mode (``keep_calls=False``) agrees with the default mode on everything both report: finish
reason, raw finish reason, error type, ``finished_cleanly`` and the sequence of call end events (local id,
state, problem code, arguments). Checked on every recording in tests/fixtures/real, whole, split and cut
anywhere, on generated Chat and Anthropic streams with every kind of finish, cut short, and with a block or
chunk replayed later in the stream, and on generated Responses, Gemini and Interactions streams, cut short.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from .conftest import FIXTURES
from .regressions.streams import run_parser
from .streamgen import encode_sse
from .test_codec_gemini import encode_sse as gemini_sse
from .test_codec_gemini import gemini_streams
from .test_codec_gemini_interactions import encode as interactions_sse
from .test_codec_gemini_interactions import interaction_streams
from .test_codec_openai_responses import _generated as responses_events
from .test_codec_openai_responses import items_strategy, sse_bytes
from .test_stream_properties import cases, chunked, split_points

REAL = FIXTURES / "real"
RECORDINGS = json.loads((REAL / "manifest.json").read_text())

STOPS = ("tool_calls", "stop", "length", "content_filter", "tool_use", "end_turn", "max_tokens", "pause_turn",
         "refusal", "something_new")


def report(provider: str, data: bytes, *, keep_calls: bool, format: str = "sse", pieces=None):
    """What both modes report about one parse."""
    out = run_parser(provider, data, keep_calls=keep_calls, format=format, pieces=pieces)
    turn = out.turn
    return (turn.finish_reason, turn.raw_finish_reason, turn.error.type if turn.error else None,
            turn.finished_cleanly, tuple(turn.choice_finished_cleanly(i) for i in range(3)), out.ends)


def assert_modes_agree(provider: str, data: bytes, *, format: str = "sse", pieces=None) -> None:
    default = report(provider, data, keep_calls=True, format=format, pieces=pieces)
    streaming = report(provider, data, keep_calls=False, format=format, pieces=pieces)
    assert streaming == default


@pytest.mark.parametrize("entry", RECORDINGS, ids=lambda e: e["file"])
def test_both_modes_agree_on_every_recording(entry):
    """Each recording, fed whole, gives the same report in both modes."""
    assert_modes_agree(entry["provider"], (REAL / entry["file"]).read_bytes(), format=entry["format"])


@given(entry=st.sampled_from(RECORDINGS), data=st.data())
def test_both_modes_agree_on_recordings_split_and_cut_anywhere(entry, data):
    """A recording split anywhere, and possibly cut short at any byte, gives the same report in both modes."""
    raw = (REAL / entry["file"]).read_bytes()
    cut = data.draw(st.none() | st.integers(0, len(raw)), label="cut at")
    if cut is not None:
        raw = raw[:cut]
    pieces = chunked(raw, data.draw(split_points(raw), label="split at"))
    assert_modes_agree(entry["provider"], raw, format=entry["format"], pieces=pieces)


def _replayed(events: list, draw) -> list:
    """``events`` with one Anthropic tool block (start to stop) or one Chat chunk sent again later, at its own
    index, at a fresh index (the same id again) or as it was."""
    if not events:
        return events
    starts = [i for i, (name, p) in enumerate(events) if name == "content_block_start"]
    if starts:
        i = draw(st.sampled_from(starts), label="replayed block")
        index = events[i][1]["index"]
        stops = [k for k in range(i, len(events))
                 if events[k][0] == "content_block_stop" and events[k][1]["index"] == index]
        j = stops[0] if stops else i
        block = [(n, dict(p)) for n, p in events[i:j + 1]]
        if draw(st.booleans(), label="at a fresh index"):
            fresh = 1 + max(p["index"] for n, p in events if n.startswith("content_block"))
            block = [(n, {**p, "index": fresh}) for n, p in block]
        at = draw(st.integers(j + 1, len(events)), label="replayed at")
        return events[:at] + block + events[at:]
    i = draw(st.integers(0, len(events) - 1), label="replayed chunk")
    at = draw(st.integers(i + 1, len(events)), label="replayed at")
    return events[:at] + [events[i]] + events[at:]


@given(case=cases(providers=("openai-chat", "anthropic"), stops=STOPS), data=st.data())
def test_both_modes_agree_on_generated_streams(case, data):
    """Generated Chat and Anthropic streams with any finish, possibly with a block or chunk replayed and cut
    short, split anywhere: the same report in both modes."""
    events = case.enc.events
    if data.draw(st.booleans(), label="replay"):
        events = _replayed(events, data.draw)
    raw = encode_sse(events).data
    if data.draw(st.booleans(), label="cut"):
        raw = raw[:data.draw(st.integers(0, len(raw)), label="cut at")]
    pieces = chunked(raw, data.draw(split_points(raw), label="split at"))
    assert_modes_agree(case.provider, raw, pieces=pieces)


OTHER_DIALECTS = st.one_of(
    st.tuples(st.just("openai-responses"), items_strategy(), st.sampled_from(["completed", "incomplete", None])).map(
        lambda t: (t[0], sse_bytes(responses_events(t[1], t[2])))),
    gemini_streams().map(lambda gen: ("gemini", gemini_sse(gen.payloads)[0])),
    st.tuples(interaction_streams(), st.sampled_from(["\n", "\r\n"])).map(
        lambda t: ("gemini-interactions", interactions_sse(t[0].events, t[1])[0])),
)


@given(stream=OTHER_DIALECTS, data=st.data())
def test_both_modes_agree_on_generated_responses_gemini_and_interactions_streams(stream, data):
    """Generated Responses, Gemini and Interactions streams, possibly cut short, split anywhere: the same report
    in both modes."""
    provider, raw = stream
    if data.draw(st.booleans(), label="cut"):
        raw = raw[:data.draw(st.integers(0, len(raw)), label="cut at")]
    pieces = chunked(raw, data.draw(split_points(raw), label="split at"))
    assert_modes_agree(provider, raw, pieces=pieces)
