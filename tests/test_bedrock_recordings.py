"""Real Amazon Bedrock Converse recordings (tests/fixtures/real/bedrock-converse) through the public API: every file
parses with ``toolwire.parse`` / ``StreamParser`` and ``toolwire parse`` (``--format auto`` and, for the streams,
``--format eventstream``) to the facts its ``manifest.json`` lists (written with a separate event-stream reader):
the run of events, the stop reason, the toolUse blocks, the error's status and type. The req_llm streams are fed in
the transport chunks they were received in, the others in seeded random chunkings; every recorded event and body
fits botocore's shapes but for the fields the adapter lists as undeclared."""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys

import pytest

import toolwire
from toolwire import FinishReason, Registry, ResultKind, Tool
from toolwire.codecs import dialect_for
from toolwire.codecs.eventstream import EventStreamDecoder

from .conftest import FIXTURES
from .dialects import _bedrock_shapes as shapes
from .dialects.bedrock_converse import EXTRA

P = "bedrock-converse"
HERE = FIXTURES / "real" / "bedrock-converse"
MANIFEST = json.loads((HERE / "manifest.json").read_text(encoding="utf-8"))
STREAMS = [e for e in MANIFEST if e["file"].endswith(".bin")]
BODIES = [e for e in MANIFEST if e["file"].endswith(".json")]
FINISH = {"tool_use": FinishReason.TOOL_CALLS, "end_turn": FinishReason.STOP, "max_tokens": FinishReason.LENGTH,
          "guardrail_intervened": FinishReason.CONTENT_FILTER}


def _id(entry):
    return entry["file"]


def _read(entry) -> bytes:
    return (HERE / entry["file"]).read_bytes()


def _chunkings(entry) -> list[tuple[str, list[bytes]]]:
    """The transport chunks the capture kept, or seeded random pieces of 1 to 64 bytes and one byte at a time."""
    data = _read(entry)
    if "transport_chunks" in entry:
        out, at = [], 0
        for size in entry["transport_chunks"]:
            out.append(data[at:at + size])
            at += size
        return [("transport", out)]
    rng = random.Random(entry["file"])
    pieces, i = [], 0
    while i < len(data):
        n = rng.randint(1, 64)
        pieces.append(data[i:i + n])
        i += n
    return [("random", pieces), ("bytewise", [data[i:i + 1] for i in range(len(data))])]


def _parse(chunks: list[bytes], fmt: str) -> toolwire.Turn:
    parser = toolwire.StreamParser(P, format=fmt)
    for chunk in chunks:
        parser.feed(chunk)
    parser.close()
    return parser.turn


def _client_and_server(turn: toolwire.Turn) -> tuple[list[dict], list[dict]]:
    return ([{"toolUseId": c.call_id, "name": c.name} for c in turn.calls],
            [{"toolUseId": s.call_id, "name": s.name} for s in turn.server_calls])


def _check_stream_turn(entry, turn: toolwire.Turn) -> None:
    client, server = _client_and_server(turn)
    if entry["exception"]:
        assert (turn.error.type, turn.error.status, turn.error.message) == (
            entry["exception"]["type"], 400, entry["exception"]["message"])
        assert not turn.finished_cleanly and turn.runnable_calls == []
        return
    assert turn.error is None and turn.raw_finish_reason == entry["stop_reason"]
    assert turn.finish_reason is FINISH[entry["stop_reason"]]
    assert sorted(client + server, key=entry["tool_uses"].index) == entry["tool_uses"]
    assert [c for c in entry["tool_uses"] if c in server] == server  # in block order
    assert all(s["name"] == "nova_grounding" for s in server)
    clean = entry["stop_reason"] in ("tool_use", "end_turn")
    assert turn.finished_cleanly is clean
    assert [c.call_id for c in turn.runnable_calls] == ([c["toolUseId"] for c in client] if clean else [])
    assert turn.token_usage is not None and turn.token_usage.output_tokens is not None


@pytest.mark.parametrize("fmt", ["auto", "eventstream"])
@pytest.mark.parametrize("entry", STREAMS, ids=_id)
def test_every_recorded_stream_gives_its_stop_reason_and_tool_uses(entry, fmt):
    """Fed whole and in its chunkings, in the eventstream format and detected by auto, a recording gives the
    manifest's stop reason (or exception) and toolUse blocks (server tools apart), and the same turn every time."""
    whole = _parse([_read(entry)], fmt)
    _check_stream_turn(entry, whole)
    for _, chunks in _chunkings(entry):
        assert _parse(chunks, fmt) == whole


@pytest.mark.parametrize("entry", STREAMS, ids=_id)
def test_the_dialect_framing_gives_the_recorded_run_of_events(entry):
    """The dialect's framing (its registry record's) cuts a recording into the manifest's run of events, and each
    event fits botocore's ConverseStreamOutput member but for the fields the service sends undeclared."""
    framer = dialect_for(P).codec.framing.make(1 << 20)
    items = []
    for chunk in _chunkings(entry)[0][1]:
        items += framer.feed(chunk)
    items += framer.close()
    runs: list[list] = []
    for item in items:
        kind = item.event.rpartition(":")[2]
        if runs and runs[-1][0] == kind:
            runs[-1][1] += 1
        else:
            runs.append([kind, 1])
    assert runs == entry["events"]
    for item in items:
        body = json.loads(item.data)
        body.pop("p", None)
        if item.event.startswith(":"):
            shapes.check(body, "ValidationException")
        else:
            shapes.check({item.event: body}, "ConverseStreamOutput", extra=EXTRA)


def test_reasoning_is_replayed_verbatim_with_its_signature():
    """A recorded reasoning stream's assistant message starts with reasoningText {text, signature} exactly as the
    deltas built it, then the text block, and fits botocore's Message."""
    entry = next(e for e in STREAMS if e["file"] == "langchain-aws-stream-reasoning.bin")
    turn = toolwire.parse(P, _read(entry))
    first, second = turn.assistant_message["content"]
    reasoning = first["reasoningContent"]["reasoningText"]
    decoder = EventStreamDecoder()
    deltas = [json.loads(m.payload)["delta"] for m in decoder.feed(_read(entry)) if m.event_type == "contentBlockDelta"]
    assert reasoning["text"] == "".join(d["reasoningContent"].get("text", "") for d in deltas
                                        if "reasoningContent" in d)
    assert reasoning["signature"] == next(d["reasoningContent"]["signature"] for d in deltas
                                          if "signature" in d.get("reasoningContent", {}))
    assert second == {"text": turn.text}
    shapes.validate_request(turn.assistant_message, "Message", extra=EXTRA)


@pytest.mark.parametrize("entry", BODIES, ids=_id)
def test_every_recorded_body_gives_its_stop_reason_blocks_or_error(entry):
    """A Converse body gives the manifest's stop reason, toolUse blocks and block kinds (its replay is the message
    as received); an error body is a typed error with its message, not a crash."""
    data = _read(entry)
    for fmt in ("auto", "json"):
        turn = toolwire.parse(P, data, format=fmt)
        if (entry.get("status") or 200) >= 400:
            assert turn.error is not None and turn.error.message == entry["message"]
            assert turn.calls == [] and not turn.finished_cleanly
            continue
        client, server = _client_and_server(turn)
        assert turn.error is None and turn.raw_finish_reason == entry["stop_reason"]
        assert sorted(client + server, key=entry["tool_uses"].index) == entry["tool_uses"]
        assert [next(iter(b)) for b in turn.assistant_message["content"]] == entry["blocks"]
        assert turn.assistant_message == json.loads(data)["output"]["message"]
        shapes.check(json.loads(data), "ConverseResponse", extra=EXTRA)


@pytest.mark.parametrize("entry", MANIFEST, ids=_id)
def test_toolwire_parse_prints_the_recorded_facts(entry):
    """``toolwire parse --provider bedrock-converse`` (auto, and eventstream for a stream) prints the stop reason and
    the calls of the recording, or its error."""
    formats = ["auto", "eventstream"] if entry["file"].endswith(".bin") else ["auto"]
    for fmt in formats:
        out = subprocess.run([sys.executable, "-m", "toolwire", "parse", "--provider", P, "--format", fmt,
                              str(HERE / entry["file"])], capture_output=True, text=True, check=False)
        assert out.returncode == 0, out.stderr
        doc = json.loads(out.stdout)
        error = entry.get("exception") or (entry if (entry.get("status") or 200) >= 400 else None)
        if error:
            assert doc["error"]["message"] == error["message"]
            continue
        assert doc["error"] is None and doc["raw_finish_reason"] == entry["stop_reason"]
        names = [c["name"] for c in doc["calls"]] + [s["name"] for s in doc["server_calls"]]
        assert sorted(names) == sorted(t["name"] for t in entry["tool_uses"])


# ---- a recorded turn answered through the dispatcher, sync and async -------------------------------------------------
def _registry(seen: list) -> Registry:
    def get_weather(location: str) -> dict:
        """The weather."""
        seen.append(location)
        return {"location": location, "sky": "clear"}

    return Registry([Tool.from_function(get_weather, effect="read")])


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_recorded_tool_use_turn_is_run_answered_and_replayed_in_botocore_shapes(mode):
    """The recorded get_weather stream runs once (Converse sends no response id: the turn is named), and its replay
    and toolResult answer are Messages botocore's validator accepts, the result a json block."""
    entry = next(e for e in STREAMS if e["file"] == "langchain-aws-stream-text-then-tool-use-get-weather.bin")
    turn = toolwire.parse(P, _read(entry))
    seen: list = []
    dispatcher = toolwire.Dispatcher(_registry(seen))
    if mode == "sync":
        results = dispatcher.run(turn, conversation_id="c1", turn_id="t1")
    else:
        results = asyncio.run(dispatcher.arun(turn, conversation_id="c1", turn_id="t1"))
    assert [r.kind for r in results] == [ResultKind.OK] and seen == ["San Francisco, CA"]
    replay, answer = toolwire.history_messages(turn, results)
    for message in (replay, answer):
        shapes.validate_request(message, "Message", extra=EXTRA)  # the recorded toolUse is typed "tool_use"
    [block] = answer["content"]
    assert block == {"toolResult": {"toolUseId": entry["tool_uses"][0]["toolUseId"], "status": "success",
                                    "content": [{"json": {"location": "San Francisco, CA", "sky": "clear"}}]}}
