"""The simulator's bodies against the official SDKs' own models: every dialect's whole responses and streamed
events, over several scenarios and unclean endings, validate with the pydantic models the SDKs parse the real
APIs with (``Model.model_validate``; ``pydantic.TypeAdapter(Union).validate_python`` for event unions).

Beyond what the models require, nothing may be left over: a field a model does not declare (kept as an extra
by the openai, anthropic and Interactions models; refused outright by google-genai's), or a payload that an open
union could only take as its "unknown" variant, is reported too. So a simulator body that drifts from the
current SDKs (a required field missing, a misspelt one, a wrong type) fails here rather than in a demo. Every
dialect the simulator speaks is checked, with the models its test adapter names (``tests/dialects``).

Error payloads the SDKs raise on instead of parsing (Chat's ``{"error": ...}`` chunk, Anthropic's ``error``
event, Gemini's ``{"error": ...}`` in a stream) are checked against the SDKs' error models or, for Gemini, the
error the SDK builds from them; Anthropic's ``ping`` keep-alive has no model (the SDK skips it) and ``[DONE]`` is
no JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pydantic
import pytest

import toolwire
from toolwire.sim import SCENARIOS, Fault, SimProvider

from .dialects import SIMULATED, adapter
from .streamgen import parse_sse_events
from .test_sim import AUTH, UNCLEAN_ENDINGS, Conv, post, tools

pytest.importorskip("anthropic.types")
pytest.importorskip("openai.types.responses")
pytest.importorskip("google.genai.interactions")

#: the dialects the simulator speaks; each one's SDK models come from its test adapter (``response_models``)
DIALECTS = list(SIMULATED)


def undeclared(dialect: str, label: str, path: str) -> bool:
    """A field the real API sends that the current SDK models do not declare (kept as an extra, not refused), by
    event type ("*.delta": any delta event; "whole": the non-streamed body) and path (the adapter's list)."""
    return any(p == path and (t == label or t == "*" or (t == "*.delta" and label.endswith(".delta")))
               for t, p in adapter(dialect).undeclared)


#: conversations played to their end: one call then text, parallel calls, an unknown tool corrected, a refused
#: call, a catalogue error, a plain text answer
SCENARIO_NAMES = ["height", "height_weight", "misspelled_tool", "missing_argument", "catalogue_down",
                  "provider_down"]
#: each dialect's unclean ending (``Fault.finish``)
UNCLEAN = {dialect: reason for dialect, (reason, _, _) in UNCLEAN_ENDINGS.items()}
MODES = ["stream", "whole"]
GEMINI_ARRAY = "array"  # streamGenerateContent without alt=sse: one JSON array, streamed


# ---- capture -----------------------------------------------------------------------------------------------------


def _conv(dialect: str, prompt: str, mode: str) -> Conv:
    return Conv(dialect, prompt, stream=mode != "whole", gemini_sse=mode != GEMINI_ARRAY)


def _send(url: str, conv: Conv) -> bytes:
    path, body = conv.request()
    resp = post(url, path, body, AUTH[conv.dialect])
    assert resp.status == 200 and resp.complete, resp.body[:500]
    return resp.body


def conversation(url: str, dialect: str, mode: str, prompt: str, **kw: Any) -> list[bytes]:
    """Every response body of one conversation played to the model's text answer."""
    conv = _conv(dialect, prompt, mode)
    bodies = []
    for _ in range(8):
        body = _send(url, conv)
        bodies.append(body)
        turn = toolwire.parse(dialect, body)
        assert turn.finished_cleanly, (turn.error, turn.raw_finish_reason)
        conv.add_turn(turn)
        if not turn.calls:
            return bodies
        conv.add_results([tools(c, **kw) for c in turn.calls])
    raise AssertionError("the model never answered")


def payloads(mode: str, body: bytes, dialect: str = "") -> Iterator[tuple[str, str | None, Any]]:
    """("whole" | "event" | "exception", event name, JSON) of everything in one response body (an AWS event stream
    as its messages: an event as the SDK's ``{name: member}``, an exception as its payload)."""
    if mode == "whole":
        yield "whole", None, json.loads(body)
    elif dialect and toolwire.codecs.dialect_for(dialect).codec.framing.name == "eventstream":
        from toolwire.codecs.eventstream import EventStreamDecoder

        decoder = EventStreamDecoder()
        for m in decoder.feed(body) + decoder.close():
            if m.message_type == "event":
                member = json.loads(m.payload)
                member.pop("p", None)  # the padding of every event, which the SDK's parser drops (not modelled)
                yield "event", m.event_type, {m.event_type: member}
            else:
                yield "exception", m.exception_type or m.error_code, json.loads(m.payload or b"{}")
    elif mode == GEMINI_ARRAY:
        for doc in json.loads(body):
            yield "event", None, doc
    else:
        for event, data in parse_sse_events(body):
            if data.strip() != "[DONE]":
                yield "event", event, json.loads(data)


# ---- validation --------------------------------------------------------------------------------------------------


def leftovers(value: Any, path: str = "$") -> list[str]:
    """Fields a validated model kept as extras, and open-union "unknown" variants, anywhere in ``value``."""
    found: list[str] = []
    if isinstance(value, pydantic.BaseModel):
        if getattr(value, "is_unknown", False) is True:
            found.append(f"{path}: {type(value).__name__}")
        found += [f"{path}.{key}" for key in (value.model_extra or {})]
        for name in type(value).model_fields:  # read from __dict__: getattr warns for deprecated fields
            found += leftovers(value.__dict__.get(name), f"{path}.{name}")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            found += leftovers(item, f"{path}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            found += leftovers(item, f"{path}.{key}")
    return found


def problems(dialect: str, mode: str, bodies: list[bytes]) -> list[str]:
    """What the SDK models refuse or cannot place in ``bodies``, one line each (empty when all is valid)."""
    a = adapter(dialect)
    whole, event, error = a.response_models()
    out: list[str] = []
    for n, body in enumerate(bodies):
        for kind, name, doc in payloads(mode, body, dialect):
            label = "whole" if kind == "whole" else name or doc.get("type") or doc.get("event_type") or "?"
            where = f"{dialect} {mode} body {n} {label}"
            if a.ignorable_payload(name, doc):
                continue
            validate = error if a.is_error_payload(name, kind, doc) else whole if kind == "whole" else event
            assert validate is not None
            try:
                model = validate(doc)
            except pydantic.ValidationError as exc:
                out.append(f"{where}: {exc}")
                continue
            out += [f"{where}: not in the SDK model: {p}" for p in leftovers(model)
                    if not undeclared(dialect, label, p)]
    return out


# ---- the simulator, once for the module --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    sim = SimProvider(seed=11)
    with sim.serve() as base_url:
        yield base_url


def _modes(dialect: str) -> list[str]:
    return MODES + list(adapter(dialect).sim_modes)


CASES = [(d, m) for d in DIALECTS for m in _modes(d)]


@pytest.mark.parametrize("dialect,mode", CASES, ids=[f"{d}-{m}" for d, m in CASES])
def test_conversations_fit_the_sdk_models(url: str, dialect: str, mode: str) -> None:
    """Every response of several scripted conversations: calls, parallel calls, corrections, text."""
    bodies: list[bytes] = []
    for name in SCENARIO_NAMES:
        kw = {"catalogue_up": False} if name == "catalogue_down" else {}
        bodies += conversation(url, dialect, mode, SCENARIOS[name].prompts["en"], **kw)
    assert len(bodies) >= 2 * len(SCENARIO_NAMES) - 1
    assert problems(dialect, mode, bodies) == []


def _faulted(url: str, sim: SimProvider, dialect: str, mode: str, fault: Fault, scenario: str) -> bytes:
    sim.plan([fault], dialect=dialect, scenario=scenario)
    return _send(url, _conv(dialect, SCENARIOS[scenario].prompts["en"], mode))


@pytest.mark.parametrize("dialect,mode", CASES, ids=[f"{d}-{m}" for d, m in CASES])
def test_unclean_endings_fit_the_sdk_models(dialect: str, mode: str) -> None:
    """A token limit inside the arguments or the text, the dialect's unclean ending (with and without partial
    text) and, in streams, the provider's in-stream error."""
    sim = SimProvider(seed=13)
    with sim.serve() as url:
        bodies = [
            _faulted(url, sim, dialect, mode, Fault.max_tokens(), "height"),
            _faulted(url, sim, dialect, mode, Fault.max_tokens(), "provider_down"),
            _faulted(url, sim, dialect, mode, Fault.finish(UNCLEAN[dialect]), "height"),
            _faulted(url, sim, dialect, mode, Fault.finish(UNCLEAN[dialect], partial=True), "provider_down"),
        ]
        if mode != "whole":  # a non-streaming request gets an HTTP error instead
            bodies += [_faulted(url, sim, dialect, mode, Fault.in_stream_error(kind), "height")
                       for kind in ("overloaded", "rate_limit", "server")]
    assert problems(dialect, mode, bodies) == []


def test_the_check_is_not_vacuous() -> None:
    """A missing required field, a misspelt one and an unknown event type are each reported."""
    usage = {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
             "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0}}
    completed = {"type": "response.completed", "sequence_number": 3, "response": {
        "id": "resp_1", "object": "response", "created_at": 1, "status": "completed", "model": "m", "output": [],
        "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "usage": usage}}
    ok = b"event: response.completed\ndata: " + json.dumps(completed).encode() + b"\n\n"
    assert problems("openai-responses", "stream", [ok]) == []
    del usage["input_tokens_details"]["cache_write_tokens"]
    missing = b"event: response.completed\ndata: " + json.dumps(completed).encode() + b"\n\n"
    assert "cache_write_tokens" in "".join(problems("openai-responses", "stream", [missing]))
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
             "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None, "finsh_reason": None}]}
    found = problems("openai-chat", "stream", [b"data: " + json.dumps(chunk).encode() + b"\n\n"])
    assert found and "finsh_reason" in found[0]
    step = {"event_type": "step.begin", "index": 0}
    assert problems("gemini-interactions", "stream", [b"event: step.begin\ndata: " + json.dumps(step).encode()
                                                      + b"\n\n"])
