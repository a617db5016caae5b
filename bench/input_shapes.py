"""Input shapes that once cost more than linear time, timed at 1x and 4x: each line must stay within 5x.

* ``auto_whitespace``: ``format="auto"`` after a long white-space prefix, fed in 64-byte pieces (the format
  sniffer must look at each new piece only);
* ``jsonl_whitespace``: JSON lines padded with long runs of white space, fed in 64-byte pieces;
* ``chat_repeated_name``: a Chat stream whose every argument fragment repeats the tool name without an id (the
  codec must tell a continuation from a new call without re-reading the whole buffer).
"""

from __future__ import annotations

import json
import statistics
import time
from typing import Callable

import toolwire

__all__ = ["SHAPES", "measure"]


def _auto_whitespace(n: int) -> tuple[str, str, bytes]:
    body = b'{"id":"c","object":"chat.completion","choices":[{"index":0,"finish_reason":"stop",' \
           b'"message":{"role":"assistant","content":"hi"}}]}'
    return "openai-chat", "auto", b"\n \t" * n + body


def _jsonl_whitespace(n: int) -> tuple[str, str, bytes]:
    line = b'{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"x"}}]}'
    end = b'{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}'
    pad = b" " * 2000 + b"\n" + b"\t" * 1000
    return "openai-chat", "jsonl", (pad + line + b"\n") * (n // 40) + end + b"\n"


def _chat_repeated_name(n: int) -> tuple[str, str, bytes]:
    out = []
    for i in range(n // 4):
        frag = '{"a": "' if i == 0 else "xxxx"
        chunk = {"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"name": "lookup", "arguments": frag}}]}}]}
        out.append(b"data: " + json.dumps(chunk).encode() + b"\n\n")
    tail = {"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "function": {"arguments": '"}'}}]}, "finish_reason": "tool_calls"}]}
    out.append(b"data: " + json.dumps(tail).encode() + b"\n\ndata: [DONE]\n\n")
    return "openai-chat", "sse", b"".join(out)


SHAPES: dict[str, Callable[[int], tuple[str, str, bytes]]] = {
    "auto_whitespace": _auto_whitespace, "jsonl_whitespace": _jsonl_whitespace,
    "chat_repeated_name": _chat_repeated_name,
}


def _parse(provider: str, fmt: str, data: bytes) -> toolwire.Turn:
    parser = toolwire.StreamParser(provider, format=fmt)
    for i in range(0, len(data), 64):
        parser.feed(data[i:i + 64])
    parser.close()
    return parser.turn


def measure(shape: str, n: int, repeats: int) -> dict[str, float | bool]:
    """Median seconds at ``n`` and ``4n`` (interleaved repeats) and their ratio; ``ok`` when both parses ended
    without a stream error."""
    small, big = SHAPES[shape](n), SHAPES[shape](4 * n)
    times: dict[int, list[float]] = {1: [], 4: []}
    ok = True
    for _ in range(repeats):
        for k, case in ((1, small), (4, big)):
            t = time.perf_counter()
            turn = _parse(*case)
            times[k].append(time.perf_counter() - t)
            ok = ok and turn.error is None
    one, four = statistics.median(times[1]), statistics.median(times[4])
    return {"s_1x": one, "s_4x": four, "ratio": four / one if one else float("inf"), "ok": ok}
