"""Dispatch cost: validating and running a trivial read tool, per call (needs ``toolwire.Dispatcher``/``Tool``).

A turn of 100 calls to ``lookup(n: int)`` (parsed by toolwire from an OpenAI Chat stream, outside timing);
``Tool.from_function(lookup, effect="read")``, ``Registry([tool])``, then ``Dispatcher(registry).run(turn,
conversation_id="c")`` timed, a fresh Dispatcher (built outside timing) per repeat; µs per call = time / 100.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import msgspec

import toolwire

__all__ = ["available", "measure"]

N_CALLS = 100


def available() -> bool:
    return hasattr(toolwire, "Dispatcher") and hasattr(toolwire, "Tool")


def _registry_cls() -> Any:
    cls = getattr(toolwire, "Registry", None)
    if cls is None:
        from toolwire.registry.registry import Registry as cls  # type: ignore[no-redef]
    return cls


def _turn() -> Any:
    head = b'data: {"id":"chatcmpl-D","object":"chat.completion.chunk","created":1760000000,"model":"gpt-4.1","choices":'
    parts = []
    for i in range(N_CALLS):
        tc = {"index": i, "id": f"call_{i:04d}", "type": "function",
              "function": {"name": "lookup", "arguments": msgspec.json.encode({"n": i}).decode()}}
        parts.append(head + msgspec.json.encode([{"index": 0, "delta": {"tool_calls": [tc]}, "finish_reason": None}])
                     + b"}\n\n")
    parts.append(head + b'[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\ndata: [DONE]\n\n')
    turn = toolwire.parse("openai-chat", b"".join(parts), format="sse")
    assert turn.finished_cleanly and len(turn.runnable_calls) == N_CALLS, "dispatch turn did not parse"
    return turn


def lookup(n: int) -> int:
    """Return n plus one."""
    return n + 1


def measure(repeats: int) -> dict[str, Any]:
    Tool = toolwire.Tool
    Dispatcher = toolwire.Dispatcher
    registry = _registry_cls()([Tool.from_function(lookup, effect="read")])
    # informative: the handler without a timeout runs on the caller's thread (no handoff to a worker)
    untimed = _registry_cls()([Tool.from_function(lookup, effect="read", timeout=None)])
    turn = _turn()
    out: dict[str, Any] = {}
    variants: dict[str, dict[str, Any]] = {"default": {}, "no_timeout": {"concurrent_reads": False}}
    try:  # informative: the same without the thread pool for concurrent reads, when the keyword exists
        Dispatcher(registry, concurrent_reads=False)
        variants["sequential"] = {"concurrent_reads": False}
    except TypeError:
        pass
    samples: dict[str, list[float]] = {k: [] for k in variants}
    for r in range(repeats + 1):
        for name, kw in variants.items():
            d = Dispatcher(untimed if name == "no_timeout" else registry, **kw)
            t0 = time.perf_counter()
            results = d.run(turn, conversation_id="c")
            elapsed = time.perf_counter() - t0
            if r == 0:  # warm-up; check the answers once, outside timing
                if len(results) != N_CALLS:
                    raise AssertionError(f"dispatcher returned {len(results)} results for {N_CALLS} calls")
                bad = [x for x in results if getattr(x, "is_error", False)]
                if bad:
                    raise AssertionError(f"dispatcher errors: {bad[0]!r}")
                continue
            samples[name].append(elapsed / N_CALLS * 1e6)
    for name, s in samples.items():
        out[name] = {"us_per_call_median": round(statistics.median(s), 2), "samples_us": [round(x, 2) for x in s]}
    return out
