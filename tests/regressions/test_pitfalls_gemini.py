"""Regression tests for the Gemini entries of docs/failure-modes.md (16: thought signatures, 17: call ids).

16 — Gemini 3 thought signatures dropped in streaming or rebuilt wrongly make the next request fail with HTTP 400
     ("Function call is missing a thought_signature in functionCall parts"): only the first of parallel calls
     carries one, it may arrive on a later (empty-text) part, and it must be replayed on the exact part
     (pydantic/pydantic-ai#3481, vercel/ai#12402).
17 — ``functionCall.id`` must be echoed exactly in ``functionResponse.id`` ("functionResponse.id does not match
     functionCall.id"); older models send no id, and results must then be paired without inventing one.
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

import toolwire

from ..test_codec_gemini import END, chunk, fc, pa, partial, split, sse, start, text

P = "gemini"
SIG = "CqYBAXLI2nz+7aG/Q0lHTkFUVVJFLTE="
LATE_SIG = "EpIDCo8DAQw51scL+dHffCC+bznOIyXj"

PARALLEL = sse(chunk(fc("get_weather", {"city": "Paris"}, id="call_1", sig=SIG)),
               chunk(fc("get_weather", {"city": "Oslo"}, id="call_2")),
               chunk(fc("get_time", {"tz": "CET"}, id="call_3")),
               chunk(text(""), finish="STOP"))

LATE = sse(chunk(fc("get_weather", {"city": "Paris"})), chunk(fc("get_weather", {"city": "Oslo"})),
           chunk(text("", sig=LATE_SIG), finish="STOP"))

cuts = st.lists(st.integers(min_value=0, max_value=10_000), max_size=12)


def test_pitfall_16_signature_stays_with_the_first_of_parallel_calls():
    """Only the first parallel call carries the signature; it is kept in its provider_meta and replayed on
    exactly that part, the other call parts replayed without one."""
    turn = toolwire.parse(P, PARALLEL)
    assert [c.provider_meta.get("thought_signature") for c in turn.calls] == [SIG, None, None]
    assert turn.assistant_message == {"role": "model", "parts": [
        fc("get_weather", {"city": "Paris"}, id="call_1", sig=SIG),
        fc("get_weather", {"city": "Oslo"}, id="call_2"),
        fc("get_time", {"tz": "CET"}, id="call_3")]}


def test_pitfall_16_signature_arriving_on_a_later_empty_part_is_replayed_on_that_part():
    """A signature streamed on a later empty-text part is recorded for the first call, with the part it sits
    on, and the replay keeps it on that very part instead of moving or dropping it."""
    turn = toolwire.parse(P, LATE)
    first, second = turn.calls
    assert first.provider_meta["thought_signature"] == LATE_SIG
    assert first.provider_meta["thought_signature_part"] == 2
    assert "thought_signature" not in second.provider_meta
    assert turn.assistant_message["parts"] == [fc("get_weather", {"city": "Paris"}),
                                               fc("get_weather", {"city": "Oslo"}), text("", sig=LATE_SIG)]


def test_pitfall_16_streamed_call_keeps_its_signature_on_the_rebuilt_part():
    """A Vertex streamed call is replayed as one whole functionCall part that still carries its signature."""
    data = sse(chunk(start("get_weather", sig=SIG)), chunk(partial(pa("$.city", "Par", True))),
               chunk(partial(pa("$.city", "is"))), chunk(END), chunk(fc("get_time", {"tz": "CET"})),
               chunk(finish="STOP"))
    turn = toolwire.parse(P, data)
    assert [c.provider_meta.get("thought_signature") for c in turn.calls] == [SIG, None]
    assert turn.assistant_message["parts"] == [fc("get_weather", {"city": "Paris"}, sig=SIG),
                                               fc("get_time", {"tz": "CET"})]


def test_pitfall_16_text_answer_signature_stays_on_its_last_part():
    """Without calls the signature arrives on the last (empty) part; the replay keeps it there."""
    data = sse(chunk(text("It is ")), chunk(text("sunny.")), chunk(text("", sig=LATE_SIG), finish="STOP"))
    assert toolwire.parse(P, data).assistant_message["parts"] == [text("It is "), text("sunny."),
                                                                  text("", sig=LATE_SIG)]


@given(cuts)
def test_pitfall_16_signatures_survive_every_chunk_boundary(cut_points):
    """However the bytes are split, the signatures and their parts come out the same."""
    for data in (PARALLEL, LATE):
        whole = toolwire.parse(P, data)
        pieces = toolwire.parse(P, split(data, cut_points), format="sse")
        assert pieces.assistant_message == whole.assistant_message
        assert [c.provider_meta for c in pieces.calls] == [c.provider_meta for c in whole.calls]


IDS = ["call_4162774", "g1bmv6il", "fc/+=Ab_9", "ÄÖ-ü 1"]


def test_pitfall_17_call_ids_are_kept_exactly():
    """Provider ids come out byte for byte (no trimming, normalising or minting) and are replayed unchanged;
    an empty-string id counts as no id."""
    data = sse(*[chunk(fc("f", {"n": i}, id=cid)) for i, cid in enumerate(IDS)], chunk(fc("f", {"n": 9}, id="")),
               chunk(finish="STOP"))
    turn = toolwire.parse(P, data)
    assert [c.call_id for c in turn.calls] == IDS + [None]
    assert [p["functionCall"].get("id") for p in turn.assistant_message["parts"]] == IDS + [""]


def test_pitfall_17_calls_without_ids_have_distinct_stable_local_ids():
    """Calls without ids keep call_id None and get distinct local ids, identical on every run of the same input,
    so results can be paired by position without inventing a provider id."""
    data = sse(chunk(fc("read_screen", {"id": "A"})), chunk(fc("read_screen", {"id": "A"})),
               chunk(start("read_screen")), chunk(partial(pa("$.id", "B"))), chunk(END), chunk(finish="STOP"))
    first, again = toolwire.parse(P, data), toolwire.parse(P, data)
    assert [c.call_id for c in first.calls] == [None, None, None]
    local = [c.local_id for c in first.calls]
    assert len(set(local)) == 3 and [c.local_id for c in again.calls] == local
    assert [c.index for c in first.calls] == [0, 1, 2]


@given(cuts)
def test_pitfall_17_local_ids_do_not_depend_on_chunk_boundaries(cut_points):
    """The local ids of id-less calls are the same however the stream is split."""
    data = sse(chunk(fc("a")), chunk(fc("a")), chunk(fc("b", {"x": 1})), chunk(finish="STOP"))
    whole = [c.local_id for c in toolwire.parse(P, data).calls]
    assert [c.local_id for c in toolwire.parse(P, split(data, cut_points), format="sse").calls] == whole


def test_pitfall_17_interactions_call_ids_are_kept_exactly():
    """Interactions function_call ids (answered by function_result.call_id) come out exactly as sent."""
    steps = [{"type": "function_call", "id": cid, "name": "f", "arguments": {"n": i}} for i, cid in enumerate(IDS)]
    body = json.dumps({"id": "v1_x", "status": "requires_action", "steps": steps}).encode()
    turn = toolwire.parse("gemini-interactions", body)
    assert [c.call_id for c in turn.calls] == IDS
    assert [s["id"] for s in turn.assistant_message["steps"]] == IDS
