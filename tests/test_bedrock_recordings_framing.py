"""Real Amazon Bedrock ``ConverseStream`` recordings decode, frame by frame, as recorded
(tests/fixtures/real/bedrock-converse, described in its SOURCES.md).

``manifest.json`` there was written with a separate event-stream reader, not with toolwire: for each stream it
gives the run of event types, the stop reason and the toolUse blocks; for each non-streaming body, its stop
reason, content blocks and toolUse blocks, or its HTTP status and error type.
"""

from __future__ import annotations

import hashlib
import json
import random

import pytest

from toolwire.codecs.eventstream import EventStreamDecoder, EventStreamMessage

from .conftest import FIXTURES

HERE = FIXTURES / "real" / "bedrock-converse"
MANIFEST = json.loads((HERE / "manifest.json").read_text(encoding="utf-8"))
STREAMS = [e for e in MANIFEST if e["file"].endswith(".bin")]
BODIES = [e for e in MANIFEST if e["file"].endswith(".json")]

#: the members of each ConverseStream event's payload: (always there, may be there), besides the padding "p"
EVENT_KEYS = {
    "messageStart": ({"role"}, set()),
    "contentBlockStart": ({"contentBlockIndex", "start"}, set()),
    "contentBlockDelta": ({"contentBlockIndex", "delta"}, set()),
    "contentBlockStop": ({"contentBlockIndex"}, set()),
    "messageStop": ({"stopReason"}, {"additionalModelResponseFields"}),
    "metadata": ({"usage", "metrics"}, {"trace", "serviceTier", "performanceConfig"}),
}
DELTA_KINDS = {"text", "toolUse", "reasoningContent", "citation", "toolResult"}
START_KINDS = {"toolUse", "toolResult"}
#: the padding ``p`` of every recorded event is a prefix of this alphabet, of random length
PADDING = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def _id(entry):
    return entry["file"]


def _read(entry) -> bytes:
    return (HERE / entry["file"]).read_bytes()


def _decode(chunks) -> list[EventStreamMessage]:
    decoder = EventStreamDecoder()
    out: list[EventStreamMessage] = []
    for chunk in chunks:
        out += decoder.feed(chunk)
    out += decoder.close()
    return out


def _runs(messages):
    runs = []
    for m in messages:
        kind = m.event_type or m.exception_type
        if runs and runs[-1][0] == kind:
            runs[-1][1] += 1
        else:
            runs.append([kind, 1])
    return runs


def test_the_manifest_lists_every_file_and_the_files_are_the_recorded_bytes():
    """Every file of the directory is in the manifest, with the size and SHA-256 it was copied with."""
    on_disk = {p.name for p in HERE.iterdir() if p.suffix in (".bin", ".json") and p.name != "manifest.json"}
    assert on_disk == {e["file"] for e in MANIFEST}
    for entry in MANIFEST:
        data = _read(entry)
        assert (len(data), hashlib.sha256(data).hexdigest()) == (entry["bytes"], entry["sha256"]), entry["file"]


@pytest.mark.parametrize("entry", STREAMS, ids=_id)
def test_every_recorded_stream_decodes_to_the_recorded_event_sequence(entry):
    """Fed whole, a recording decodes with both checksums of every message valid (any mismatch raises) into the
    event types the manifest lists, in order."""
    messages = _decode([_read(entry)])
    assert len(messages) == entry["messages"]
    assert _runs(messages) == entry["events"]


@pytest.mark.parametrize("entry", STREAMS, ids=_id)
def test_every_recorded_stream_decodes_the_same_in_small_pieces(entry):
    """Byte by byte and in seeded random pieces of 1 to 64 bytes, a recording gives the same messages as whole."""
    data = _read(entry)
    whole = _decode([data])
    assert _decode([data[i:i + 1] for i in range(len(data))]) == whole
    rng = random.Random(entry["file"])
    pieces, i = [], 0
    while i < len(data):
        n = rng.randint(1, 64)
        pieces.append(data[i:i + n])
        i += n
    assert _decode(pieces) == whole


@pytest.mark.parametrize("entry", [e for e in STREAMS if "transport_chunks" in e], ids=_id)
def test_streams_decode_the_same_in_the_chunks_they_were_received_in(entry):
    """Where the capture kept the transport chunks (some hold two messages), feeding them as received gives the
    same messages as the whole body."""
    data = _read(entry)
    sizes = entry["transport_chunks"]
    assert sum(sizes) == len(data)
    chunks, at = [], 0
    for size in sizes:
        chunks.append(data[at:at + size])
        at += size
    assert _decode(chunks) == _decode([data])


@pytest.mark.parametrize("entry", STREAMS, ids=_id)
def test_every_event_payload_is_the_json_object_of_its_event_member(entry):
    """Each event is a JSON ``event`` message whose payload is the member named by ``:event-type``, not wrapped in
    that name: the members that event always has, some optional ones, and the random-length padding ``p``."""
    for m in _decode([_read(entry)]):
        if m.message_type == "exception":
            continue
        assert (m.message_type, m.content_type) == ("event", "application/json")
        assert set(m.headers) == {":event-type", ":content-type", ":message-type"}
        body = json.loads(m.payload)
        assert isinstance(body, dict)
        assert m.event_type in EVENT_KEYS, m.event_type
        assert m.event_type not in body  # not wrapped: {"contentBlockDelta": {...}} is not what is sent
        required, optional = EVENT_KEYS[m.event_type]
        assert required <= set(body) - {"p"} <= required | optional, (m.event_type, sorted(body))
        assert PADDING.startswith(body["p"])
        if m.event_type == "contentBlockDelta":
            assert len(body["delta"]) == 1 and set(body["delta"]) <= DELTA_KINDS, body["delta"]
        if m.event_type == "contentBlockStart":
            assert len(body["start"]) == 1 and set(body["start"]) <= START_KINDS, body["start"]


@pytest.mark.parametrize("entry", STREAMS, ids=_id)
def test_every_recorded_stream_has_the_recorded_stop_reason_and_tool_uses(entry):
    """The messageStop's stopReason and the toolUse blocks started are those of the manifest."""
    stop, tools = None, []
    for m in _decode([_read(entry)]):
        if m.event_type == "messageStop":
            stop = json.loads(m.payload)["stopReason"]
        elif m.event_type == "contentBlockStart":
            start = json.loads(m.payload)["start"]
            if "toolUse" in start:
                tools.append({"toolUseId": start["toolUse"]["toolUseId"], "name": start["toolUse"]["name"]})
    assert stop == entry["stop_reason"]
    assert tools == entry["tool_uses"]


def test_the_stop_reasons_and_tools_the_fixtures_are_chosen_for_are_all_there():
    """The streams cover tool use (client and server tools), reasoning, citations, max_tokens,
    guardrail_intervened and an in-stream exception."""
    stops = {e["stop_reason"] for e in STREAMS}
    assert {"tool_use", "end_turn", "max_tokens", "guardrail_intervened"} <= stops
    assert {t["name"] for e in STREAMS for t in e["tool_uses"]} >= {"get_weather", "weather", "fetch_concept",
                                                                    "cosine", "nova_grounding"}
    kinds = set()
    for entry in STREAMS:
        for m in _decode([_read(entry)]):
            if m.event_type == "contentBlockDelta":
                kinds |= set(json.loads(m.payload)["delta"])
    assert kinds == DELTA_KINDS


def test_the_in_stream_exception_is_an_exception_message_with_its_type_and_text():
    """The recorded validationException is one ``exception`` message: its type in ``:exception-type``, its text
    in the payload's ``message``, and no ``:event-type``."""
    [entry] = [e for e in STREAMS if e["exception"]]
    [m] = _decode([_read(entry)])
    assert (m.message_type, m.exception_type, m.event_type) == ("exception", "validationException", None)
    assert m.content_type == "application/json"
    assert json.loads(m.payload) == {"message": entry["exception"]["message"]}


@pytest.mark.parametrize("entry", BODIES, ids=_id)
def test_every_recorded_converse_body_is_what_the_manifest_says(entry):
    """A non-streaming body is JSON with the recorded stop reason, content blocks and toolUse blocks; an error
    body has the recorded status and a message."""
    body = json.loads(_read(entry))
    if entry["status"] >= 400:
        assert set(body) == {"message"} and body["message"] == entry["message"]
        assert entry["error_type"]
        return
    assert body["stopReason"] == entry["stop_reason"]
    content = body["output"]["message"]["content"]
    assert [next(iter(block)) for block in content] == entry["blocks"]
    assert [{"toolUseId": b["toolUse"]["toolUseId"], "name": b["toolUse"]["name"]}
            for b in content if "toolUse" in b] == entry["tool_uses"]
    for block in content:
        if "toolUse" in block:
            assert isinstance(block["toolUse"]["input"], dict)  # whole arguments, as JSON, not as text
