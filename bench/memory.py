"""Memory, measured with tracemalloc in its own step (after the timing races, whose data has been freed).

* ``many_calls``: an Anthropic (default) or OpenAI Chat stream of ``total`` bytes made of many small calls and
  one larger call, generated lazily in 1 to 4 KiB chunks and fed to ``StreamParser`` with ``keep_calls=False``.
  Anthropic calls end at their own ``content_block_stop``, so streaming mode can forget each one as it ends;
  Chat calls all end at the choice's ``finish_reason``, so Chat necessarily holds every call until then (its
  figure is printed for comparison, not judged against the target). Reports the peak of traced memory, the peak of the generator alone (run
  separately: its share of the first figure) and the largest call's argument size.
* ``no_boundary``: ``data: `` followed by endless bytes, fed in 64 KiB chunks up to ``total`` bytes: toolwire
  must stop at its framing cap with ``FramingError``; reports where it stopped and the peak.
"""

from __future__ import annotations

import gc
import inspect
import tracemalloc
from typing import Any

import toolwire

from .workloads import AnthropicManyCalls, ChatManyCalls

__all__ = ["many_calls", "no_boundary", "has_keep_calls"]

MiB = 1024 * 1024


def has_keep_calls() -> bool:
    try:
        return "keep_calls" in inspect.signature(toolwire.StreamParser).parameters
    except (TypeError, ValueError):
        return False


def _traced(fn: Any) -> tuple[Any, int]:
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        result = fn()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return result, peak


def many_calls(total: int, *, big_call: int = 256 * 1024, dialect: str = "anthropic") -> dict[str, Any]:
    keep = has_keep_calls()
    cls = AnthropicManyCalls if dialect == "anthropic" else ChatManyCalls
    stream = cls(total, big_call=big_call)  # argument texts made here, before tracing

    def generator_only() -> dict[str, int]:
        for _ in stream.chunks():
            pass
        return dict(stream.info)

    def parse() -> dict[str, Any]:
        chunks = stream.chunks()
        info = stream.info
        kw = {"keep_calls": False} if keep else {}
        parser = toolwire.StreamParser(stream.dialect, format="sse", **kw)
        completed = 0
        for chunk in chunks:
            for ev in parser.feed(chunk):
                if type(ev) is toolwire.CallCompleted:
                    completed += 1
        for ev in parser.close():
            if type(ev) is toolwire.CallCompleted:
                completed += 1
        turn = parser.turn
        return {"info": dict(info), "completed_events": completed, "turn_calls": len(turn.calls),
                "finished_cleanly": turn.finished_cleanly,
                "error": None if turn.error is None else turn.error.message}

    gen_info, gen_peak = _traced(generator_only)
    res, peak = _traced(parse)
    info = res["info"]
    return {"dialect": stream.dialect, "keep_calls": False if keep else "default (no keep_calls keyword yet)",
            "stream_bytes": info["bytes"], "calls": info["calls"], "largest_call_bytes": info["largest"],
            "peak_bytes": peak, "generator_peak_bytes": gen_peak,
            "peak_over_largest_call": round(peak / max(1, info["largest"]), 2),
            "completed_events": res["completed_events"], "turn_calls": res["turn_calls"],
            "finished_cleanly": res["finished_cleanly"], "error": res["error"],
            "ok": res["finished_cleanly"] and res["completed_events"] == info["calls"]}


def no_boundary(total: int, *, chunk_size: int = 64 * 1024) -> dict[str, Any]:
    block = b"x" * chunk_size  # one object fed again and again: the input itself costs nothing

    def run() -> dict[str, Any]:
        parser = toolwire.StreamParser("openai-chat", format="sse")
        fed = 0
        try:
            parser.feed(b"data: ")
            fed = 6
            while fed < total:
                parser.feed(block)
                fed += chunk_size
        except toolwire.FramingError as exc:
            return {"raised": "FramingError", "stopped_after_bytes": fed, "limit": getattr(exc, "limit", None),
                    "message": str(exc)[:160], "turn_error": getattr(parser.turn.error, "type", None)}
        return {"raised": None, "stopped_after_bytes": fed, "limit": None, "message": None, "turn_error": None}

    res, peak = _traced(run)
    res["peak_bytes"] = peak
    res["ok"] = res["raised"] == "FramingError"
    return res
