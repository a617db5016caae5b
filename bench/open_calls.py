"""Many calls open at once, and many choices, fed one provider event per ``feed()``: 4x the calls within 5x.

A response may hold thousands of calls open at the same time (Chat keeps every call open until its choice's
``finish_reason``; any dialect may start many blocks before it stops them) or thousands of choices (Chat
``choices``, Gemini ``candidates``). The parser's cost per event must not grow with them, else such a response
costs the square of its size. Each stream is built outside timing, in the dialect's wire form, as a list of
messages (one provider event each, fed one by one, as a slow network delivers them):

* ``calls`` (every dialect): ``n`` calls started one after the other, then a second argument fragment for each
  (so all ``n`` are open together), then each call's terminator (where the dialect has one), then the end of
  the turn. Gemini streams one call at a time per candidate, so its ``calls`` are whole ``functionCall`` parts,
  one per chunk.
* ``choices`` (Chat, Gemini): ``n`` choices, each with one call (Chat: a start fragment, then a second one;
  Gemini: a Vertex streamed call, its start then one ``partialArgs`` part), then each choice's finish. Parsed
  with ``max_choices=n`` (the default cap, 128, would stop the response).

``measure`` times each stream at ``n`` and ``4n`` (medians of interleaved repeats, the garbage collector off
during each run) and checks the answer outside timing (every call runnable with its arguments).
``tests/regressions/test_open_calls_linear.py`` counts the Python lines executed instead of timing them.
"""

from __future__ import annotations

import gc
import statistics
import time
from typing import Any, Callable

import msgspec

import toolwire
from toolwire.codecs import dialect_for

from .workloads import _es_message

__all__ = ["SHAPES", "DIALECT_SHAPES", "stream", "parse_stream", "expected", "limits_for", "problem", "measure", "line",
           "TARGET"]

#: time at 4x the calls (or choices) over 1x, at most
TARGET = 5.0

SHAPES = ("calls", "choices")
#: the shapes each dialect has (choices: the dialects whose responses hold several)
DIALECT_SHAPES: dict[str, tuple[str, ...]] = {
    "openai-chat": ("calls", "choices"),
    "openai-responses": ("calls",),
    "anthropic": ("calls",),
    "gemini": ("calls", "choices"),
    "gemini-interactions": ("calls",),
    "bedrock-converse": ("calls",),
}

_enc = msgspec.json.encode


def _sse(payload: Any, event: str | None = None) -> bytes:
    head = b"event: " + event.encode() + b"\n" if event else b""
    return head + b"data: " + (_enc(payload) if not isinstance(payload, bytes) else payload) + b"\n\n"


def _halves(k: int) -> tuple[str, str]:
    """A call's argument text ``{"n": k}`` in two fragments."""
    return '{"n": ', f"{k}}}"


# ---- calls ------------------------------------------------------------------------------------------------
def _chat_calls(n: int) -> list[bytes]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _sse({"id": "c", "object": "chat.completion.chunk", "model": "m",
                     "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    out = [chunk({"role": "assistant"})]
    for k in range(n):
        out.append(chunk({"tool_calls": [{"index": k, "id": f"call_{k}", "type": "function",
                                          "function": {"name": "lookup", "arguments": _halves(k)[0]}}]}))
    for k in range(n):
        out.append(chunk({"tool_calls": [{"index": k, "function": {"arguments": _halves(k)[1]}}]}))
    out.append(chunk({}, "tool_calls"))
    out.append(b"data: [DONE]\n\n")
    return out


def _responses_calls(n: int) -> list[bytes]:
    def ev(name: str, body: dict[str, Any]) -> bytes:
        return _sse({"type": name, **body}, name)

    def item(k: int, status: str, args: str) -> dict[str, Any]:
        return {"id": f"fc_{k}", "type": "function_call", "status": status, "arguments": args,
                "call_id": f"call_{k}", "name": "lookup"}

    base = {"id": "resp_1", "object": "response", "status": "in_progress", "model": "m", "output": []}
    out = [ev("response.created", {"response": base})]
    for k in range(n):
        out.append(ev("response.output_item.added", {"output_index": k, "item": item(k, "in_progress", "")}))
        out.append(ev("response.function_call_arguments.delta",
                      {"item_id": f"fc_{k}", "output_index": k, "delta": _halves(k)[0]}))
    for k in range(n):
        out.append(ev("response.function_call_arguments.delta",
                      {"item_id": f"fc_{k}", "output_index": k, "delta": _halves(k)[1]}))
    for k in range(n):
        text = "".join(_halves(k))
        out.append(ev("response.function_call_arguments.done", {"item_id": f"fc_{k}", "output_index": k,
                                                                "arguments": text}))
        out.append(ev("response.output_item.done", {"output_index": k, "item": item(k, "completed", text)}))
    out.append(ev("response.completed", {"response": dict(base, status="completed")}))
    return out


def _anthropic_calls(n: int) -> list[bytes]:
    def ev(payload: dict[str, Any]) -> bytes:
        return _sse(payload, payload["type"])

    out = [ev({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
                                                    "content": [], "model": "m", "stop_reason": None,
                                                    "usage": {"input_tokens": 1, "output_tokens": 1}}})]
    for k in range(n):
        out.append(ev({"type": "content_block_start", "index": k, "content_block": {
            "type": "tool_use", "id": f"toolu_{k}", "name": "lookup", "input": {}}}))
        out.append(ev({"type": "content_block_delta", "index": k,
                       "delta": {"type": "input_json_delta", "partial_json": _halves(k)[0]}}))
    for k in range(n):
        out.append(ev({"type": "content_block_delta", "index": k,
                       "delta": {"type": "input_json_delta", "partial_json": _halves(k)[1]}}))
    for k in range(n):
        out.append(ev({"type": "content_block_stop", "index": k}))
    out.append(ev({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}}))
    out.append(ev({"type": "message_stop"}))
    return out


def _gemini_chunk(cands: list[dict[str, Any]]) -> bytes:
    return _sse({"candidates": cands, "modelVersion": "m", "responseId": "r"})


def _gemini_calls(n: int) -> list[bytes]:
    out = []
    for k in range(n):
        cand: dict[str, Any] = {"content": {"role": "model", "parts": [
            {"functionCall": {"id": f"g{k}", "name": "lookup", "args": {"n": k}}}]}, "index": 0}
        if k == n - 1:
            cand["finishReason"] = "STOP"
        out.append(_gemini_chunk([cand]))
    return out


def _interactions_calls(n: int) -> list[bytes]:
    def ev(name: str, body: dict[str, Any]) -> bytes:
        return _sse({"event_type": name, **body}, name)

    out = [ev("interaction.created", {"interaction": {"id": "i1", "status": "in_progress", "model": "m"}})]
    for k in range(n):
        out.append(ev("step.start", {"index": k, "step": {"type": "function_call", "id": f"call_{k}",
                                                          "name": "lookup", "arguments": {}}}))
        out.append(ev("step.delta", {"index": k, "delta": {"type": "arguments_delta",
                                                           "arguments": _halves(k)[0]}}))
    for k in range(n):
        out.append(ev("step.delta", {"index": k, "delta": {"type": "arguments_delta", "arguments": _halves(k)[1]}}))
    for k in range(n):
        out.append(ev("step.stop", {"index": k}))
    out.append(ev("interaction.completed", {"interaction": {"id": "i1", "status": "requires_action",
                                                            "model": "m"}}))
    out.append(b"data: [DONE]\n\n")
    return out


def _bedrock_calls(n: int) -> list[bytes]:
    def ev(name: str, payload: dict[str, Any]) -> bytes:
        return _es_message(name, _enc(payload))

    out = [ev("messageStart", {"role": "assistant"})]
    for k in range(n):
        out.append(ev("contentBlockStart", {"start": {"toolUse": {"toolUseId": f"tooluse_{k}", "name": "lookup"}},
                                            "contentBlockIndex": k}))
        out.append(ev("contentBlockDelta", {"contentBlockIndex": k,
                                            "delta": {"toolUse": {"input": _halves(k)[0]}}}))
    for k in range(n):
        out.append(ev("contentBlockDelta", {"contentBlockIndex": k, "delta": {"toolUse": {"input": _halves(k)[1]}}}))
    for k in range(n):
        out.append(ev("contentBlockStop", {"contentBlockIndex": k}))
    out.append(ev("messageStop", {"stopReason": "tool_use"}))
    out.append(ev("metadata", {"usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2}}))
    return out


# ---- choices ----------------------------------------------------------------------------------------------
def _chat_choices(n: int) -> list[bytes]:
    def chunk(k: int, delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _sse({"id": "c", "object": "chat.completion.chunk", "model": "m",
                     "choices": [{"index": k, "delta": delta, "finish_reason": finish}]})

    out = []
    for k in range(n):
        out.append(chunk(k, {"role": "assistant", "tool_calls": [{"index": 0, "id": f"call_{k}", "type": "function",
                                                                  "function": {"name": "lookup",
                                                                               "arguments": _halves(k)[0]}}]}))
    for k in range(n):
        out.append(chunk(k, {"tool_calls": [{"index": 0, "function": {"arguments": _halves(k)[1]}}]}))
    for k in range(n):
        out.append(chunk(k, {}, "tool_calls"))
    out.append(b"data: [DONE]\n\n")
    return out


def _gemini_choices(n: int) -> list[bytes]:
    out = []
    for k in range(n):
        out.append(_gemini_chunk([{"content": {"role": "model", "parts": [
            {"functionCall": {"id": f"g{k}", "name": "lookup", "willContinue": True}}]}, "index": k}]))
    for k in range(n):
        out.append(_gemini_chunk([{"content": {"role": "model", "parts": [
            {"functionCall": {"partialArgs": [{"jsonPath": "$.n", "numberValue": k}], "willContinue": True}}]},
            "index": k}]))
    for k in range(n):
        out.append(_gemini_chunk([{"content": {"role": "model", "parts": [{"functionCall": {}}]}, "index": k,
                                   "finishReason": "STOP"}]))
    return out


_BUILDERS: dict[tuple[str, str], Callable[[int], list[bytes]]] = {
    ("openai-chat", "calls"): _chat_calls,
    ("openai-responses", "calls"): _responses_calls,
    ("anthropic", "calls"): _anthropic_calls,
    ("gemini", "calls"): _gemini_calls,
    ("gemini-interactions", "calls"): _interactions_calls,
    ("bedrock-converse", "calls"): _bedrock_calls,
    ("openai-chat", "choices"): _chat_choices,
    ("gemini", "choices"): _gemini_choices,
}


def stream(dialect: str, shape: str, n: int) -> list[bytes]:
    """The messages of a ``shape`` stream of ``dialect`` with ``n`` calls (or choices), one event each."""
    return _BUILDERS[(dialect, shape)](n)


def expected(shape: str, n: int) -> list[dict[str, Any]]:
    """The arguments of the calls such a stream holds, in order."""
    return [{"n": k} for k in range(n)]


def parse_stream(dialect: str, messages: list[bytes], **limits: Any) -> toolwire.Turn:
    """Feed ``messages`` one per ``feed()`` (the dialect's streamed framing) and return the final Turn."""
    parser = toolwire.StreamParser(dialect, format=dialect_for(dialect).codec.stream_format, **limits)
    feed = parser.feed
    for message in messages:
        feed(message)
    parser.close()
    return parser.turn


def limits_for(shape: str, n: int) -> dict[str, int]:
    """The limits a ``shape`` stream of ``n`` is parsed with (choices: as many as it has)."""
    return {"max_choices": max(n, 1)} if shape == "choices" else {}


def problem(turn: toolwire.Turn, shape: str, n: int) -> str | None:
    """Why ``turn`` is not the answer of a ``shape`` stream of ``n``, or None."""
    if turn.error is not None:
        return f"turn error {turn.error.type}: {turn.error.message[:120]}"
    got = [c.args for c in turn.calls if c.runnable]
    if got != expected(shape, n):
        return f"{len(got)} runnable calls of {n}, or arguments that differ"
    return None


def measure(dialect: str, shape: str, n: int, repeats: int, *, timeout: float = 60.0) -> dict[str, Any]:
    """Median seconds at ``n`` and ``4n`` (interleaved repeats, the collector off during each run), their ratio, and
    ``problem``: why an answer was wrong, or None. A run longer than ``timeout`` is not repeated (its ratio is then
    a lower bound: ``lower_bound``)."""
    inputs = {s: stream(dialect, shape, n * s) for s in (1, 4)}
    times: dict[int, list[float]] = {1: [], 4: []}
    bad = None
    lower = False
    for r in range(repeats):
        for s in ((1, 4) if r % 2 == 0 else (4, 1)):
            if r and times[s] and times[s][-1] > timeout:
                lower = lower or s == 4
                continue
            gc.collect()
            gc.disable()
            try:
                t0 = time.perf_counter()
                turn = parse_stream(dialect, inputs[s], **limits_for(shape, n * s))
                times[s].append(time.perf_counter() - t0)
            finally:
                gc.enable()
            bad = bad or problem(turn, shape, n * s)
    one, four = statistics.median(times[1]), statistics.median(times[4])
    return {"n": [n, 4 * n], "s_1x": one, "s_4x": four, "ratio": four / one if one else float("inf"),
            "lower_bound": lower, "problem": bad, "bytes": [sum(map(len, inputs[1])), sum(map(len, inputs[4]))]}


def line(dialect: str, shape: str, r: dict[str, Any]) -> str:
    """One printed line of the bench: the times at 1x and 4x and their ratio (``*``: over the target)."""
    ratio = r["ratio"]
    flag = "*" if ratio > TARGET else ""
    lower = ">" if r["lower_bound"] else ""
    n1, n4 = r["n"]
    return (f"{dialect:19}  {shape:7}  {n1:>5} -> {n4:>5}: {r['s_1x'] * 1e3:8.1f} ms -> {lower}{r['s_4x'] * 1e3:8.1f} ms"
            f"  ratio {lower}{ratio:.2f}{flag}" + (f"  [wrong: {r['problem']}]" if r["problem"] else ""))
