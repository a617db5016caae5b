"""An unclean end inserted anywhere into a response that would run calls leaves nothing to run, in every dialect.

The responses are the real recordings of tests/fixtures/real whose calls run as recorded (streamed ones: SSE,
JSON lines, AWS event streams) and a small generated stream of every dialect (the only source for Interactions).
Each dialect's own wire form of an unclean end (a Chat ``finish_reason``, a Responses terminal or lifecycle event
whose status is not ``completed``, an Anthropic ``message_delta`` with ``max_tokens`` or ``refusal``, a Gemini
candidate's ``finishReason``, an Interactions status update or completion, a Bedrock ``messageStop``) is put
between two payloads at any position, or appended, and the response is parsed whole and in random pieces, in both
parser modes: ``runnable_calls`` is always empty.
"""

from __future__ import annotations

import json
import random
import re
import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolwire

from ..conftest import FIXTURES
from ..dialects import REGISTERED, adapter
from ..dialects.bedrock_converse import frame

REAL = FIXTURES / "real"


# ---- responses as lists of payload units (bytes whose concatenation is the response) -------------------------
def _sse_units(data: bytes) -> list[bytes]:
    text = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return [block + b"\n\n" for block in text.split(b"\n\n") if block.strip()]


def _jsonl_units(data: bytes) -> list[bytes]:
    return [line + b"\n" for line in data.split(b"\n") if line.strip()]


def _eventstream_units(data: bytes) -> list[bytes]:
    units, at = [], 0
    while at < len(data):
        (total,) = struct.unpack_from(">I", data, at)
        units.append(data[at:at + total])
        at += total
    return units


_SPLIT = {"sse": _sse_units, "jsonl": _jsonl_units, "eventstream": _eventstream_units}


def _payloads(units: list[bytes], fmt: str) -> list[Any]:
    """The JSON payloads of ``units`` (SSE data, JSON lines), for the ids an inserted end repeats."""
    out = []
    for unit in units:
        if fmt == "sse":
            lines = [ln[5:].strip() for ln in unit.split(b"\n") if ln.startswith(b"data:")]
            raw = b"\n".join(lines)
        elif fmt == "jsonl":
            raw = unit.strip()
        else:
            continue
        try:
            out.append(json.loads(raw))
        except ValueError:
            continue
    return out


# ---- each dialect's unclean ends, as units in the response's own format --------------------------------------
def _unit(fmt: str, payload: dict[str, Any], event: str | None = None) -> bytes:
    body = json.dumps(payload).encode()
    if fmt == "jsonl":
        return body + b"\n"
    return (b"event: " + event.encode() + b"\n" if event else b"") + b"data: " + body + b"\n\n"


def _chat_ends(fmt: str, payloads: list[Any]) -> list[bytes]:
    first = next((p for p in payloads if isinstance(p, dict) and "id" in p), {})
    return [_unit(fmt, {"id": first.get("id", "chatcmpl-1"), "object": "chat.completion.chunk",
                        "created": first.get("created", 1), "model": first.get("model", "m"),
                        "choices": [{"index": 0, "delta": {}, "finish_reason": r}]})
            for r in ("length", "content_filter")]


def _responses_ends(fmt: str, payloads: list[Any]) -> list[bytes]:
    rid = next((p["response"].get("id") for p in payloads if isinstance(p, dict)
                and isinstance(p.get("response"), dict) and p["response"].get("id")), None)
    base = {"object": "response", "output": [], **({"id": rid} if rid else {})}
    ends = []
    for reason in ("max_output_tokens", "content_filter"):
        cut = {**base, "status": "incomplete", "incomplete_details": {"reason": reason}}
        ends.append(_unit(fmt, {"type": "response.incomplete", "response": cut}, "response.incomplete"))
        ends.append(_unit(fmt, {"type": "response.in_progress", "response": cut}, "response.in_progress"))
    failed = {**base, "status": "failed", "error": {"code": "server_error", "message": "The model failed."}}
    ends.append(_unit(fmt, {"type": "response.failed", "response": failed}, "response.failed"))
    ends.append(_unit(fmt, {"type": "response.in_progress", "response": failed}, "response.in_progress"))
    return ends


def _anthropic_ends(fmt: str, payloads: list[Any]) -> list[bytes]:
    return [_unit(fmt, {"type": "message_delta", "delta": {"stop_reason": r, "stop_sequence": None},
                        "usage": {"output_tokens": 1}}, "message_delta")
            for r in ("max_tokens", "refusal", "model_context_window_exceeded")]


def _gemini_ends(fmt: str, payloads: list[Any]) -> list[bytes]:
    return [_unit(fmt, {"candidates": [{"index": 0, "finishReason": r}]})
            for r in ("SAFETY", "MAX_TOKENS", "RECITATION", "MALFORMED_FUNCTION_CALL")]


def _interactions_ends(fmt: str, payloads: list[Any]) -> list[bytes]:
    iid = next((p["interaction"].get("id") for p in payloads if isinstance(p, dict)
                and isinstance(p.get("interaction"), dict) and p["interaction"].get("id")), "v1_x")
    updates = [_unit(fmt, {"event_type": "interaction.status_update", "interaction_id": iid, "status": s},
                     "interaction.status_update") for s in ("incomplete", "budget_exceeded", "failed", "cancelled")]
    return updates + [_unit(fmt, {"event_type": "interaction.completed",
                                  "interaction": {"id": iid, "status": "incomplete"}}, "interaction.completed")]


def _bedrock_ends(fmt: str, payloads: list[Any]) -> list[bytes]:
    return [frame("messageStop", {"stopReason": r}) for r in
            ("max_tokens", "model_context_window_exceeded", "guardrail_intervened", "content_filtered",
             "malformed_tool_use")]


UNCLEAN_ENDS = {"openai-chat": _chat_ends, "openai-responses": _responses_ends, "anthropic": _anthropic_ends,
                "gemini": _gemini_ends, "gemini-interactions": _interactions_ends,
                "bedrock-converse": _bedrock_ends}


# ---- the responses that run calls as they are --------------------------------------------------------------
def _recordings() -> list[tuple[str, str, str, bytes]]:
    """(name, provider, format, bytes) of every streamed recording, then of each dialect's small stream."""
    found = []
    for entry in json.loads((REAL / "manifest.json").read_text()):
        if entry["format"] in ("sse", "jsonl"):
            found.append((entry["file"], entry["provider"], entry["format"], (REAL / entry["file"]).read_bytes()))
    for path in sorted((REAL / "bedrock-converse").glob("*.bin")):
        found.append((path.name, "bedrock-converse", "eventstream", path.read_bytes()))
    for dialect in REGISTERED:
        a = adapter(dialect)
        found.append((f"{dialect} small case", dialect, a.stream_format, a.small_case().data))
    return found


def _runnable(provider: str, fmt: str, units: list[bytes]) -> bool:
    return bool(toolwire.parse(provider, b"".join(units), format=fmt).runnable_calls)


RESPONSES = []
for _name, _provider, _fmt, _data in _recordings():
    if _provider not in UNCLEAN_ENDS:
        continue
    _units = _SPLIT[_fmt](_data)
    if _runnable(_provider, _fmt, _units):  # (units rejoined: what the property changes is only the insertion)
        RESPONSES.append((_name, _provider, _fmt, _units, UNCLEAN_ENDS[_provider](_fmt, _payloads(_units, _fmt))))


def test_every_dialect_has_a_response_that_runs_calls():
    """The property below covers every registered dialect (a recording or the dialect's small stream)."""
    assert {provider for _, provider, *_ in RESPONSES} == set(REGISTERED)
    assert len(RESPONSES) > len(REGISTERED)  # real recordings among them


def _pieces(data: bytes, seed: int) -> list[bytes]:
    rng, out, at = random.Random(seed), [], 0
    while at < len(data):
        n = rng.randint(1, 64)
        out.append(data[at:at + n])
        at += n
    return out


def _streamed(provider: str, fmt: str, pieces: list[bytes], keep_calls: bool) -> toolwire.Turn:
    parser = toolwire.StreamParser(provider, format=fmt, keep_calls=keep_calls)
    for piece in pieces:
        parser.feed(piece)
    parser.close()
    return parser.turn


@given(st.data())
def test_an_unclean_end_anywhere_leaves_nothing_to_run(data):
    """Insert (or append) one unclean end at any payload boundary: nothing runs, whole or in pieces, in both
    modes; the pieces give the same turn as the whole."""
    name, provider, fmt, units, ends = data.draw(st.sampled_from(RESPONSES), label="response")
    end = data.draw(st.sampled_from(ends), label="unclean end")
    at = data.draw(st.integers(0, len(units)), label="position")
    body = b"".join(units[:at]) + end + b"".join(units[at:])
    whole = toolwire.parse(provider, body, format=fmt)
    assert whole.runnable_calls == [] and not whole.finished_cleanly, (name, at, end)
    pieces = _pieces(body, data.draw(st.integers(0, 2**32), label="seed"))
    for keep_calls in (True, False):
        turn = _streamed(provider, fmt, pieces, keep_calls)
        assert turn.runnable_calls == [] and not turn.finished_cleanly, (name, at, end, keep_calls)
        if keep_calls:
            assert turn == whole


@pytest.mark.parametrize("provider", sorted(UNCLEAN_ENDS))
def test_every_position_of_every_unclean_end_in_the_small_stream(provider):
    """The exhaustive form on each dialect's small stream: every unclean end at every position."""
    name, _, fmt, units, ends = next(r for r in RESPONSES if r[1] == provider and r[0].endswith("small case"))
    failures = []
    for end in ends:
        for at in range(len(units) + 1):
            body = b"".join(units[:at]) + end + b"".join(units[at:])
            for keep_calls in (True, False):
                turn = _streamed(provider, fmt, [body], keep_calls)
                if turn.runnable_calls or turn.finished_cleanly:
                    failures.append((at, re.sub(rb"\s+", b" ", end)[:120], keep_calls))
    assert failures == []
