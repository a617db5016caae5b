"""Tiny helpers that write provider wire bytes from Python values, for table-driven tests."""

from __future__ import annotations

import json
from typing import Any


def sse(*payloads: Any, events: bool = False, sep: str = "\n") -> bytes:
    """SSE bytes: one ``data:`` message per payload (dicts are JSON-encoded; str is sent as is).

    With ``events``, each message also gets an ``event:`` line naming the payload's ``type``."""
    out = []
    for p in payloads:
        data = p if isinstance(p, str) else json.dumps(p)
        lines = []
        if events and isinstance(p, dict) and "type" in p:
            lines.append(f"event: {p['type']}")
        lines.append(f"data: {data}")
        out.append(sep.join(lines) + sep + sep)
    return "".join(out).encode()


def chunk(*tool_calls: dict, finish: str | None = None, content: str | None = None, choice: int = 0,
          **extra: Any) -> dict:
    """One Chat Completions stream chunk with the given tool-call deltas."""
    delta: dict[str, Any] = {}
    if content is not None:
        delta["content"] = content
    if tool_calls:
        delta["tool_calls"] = list(tool_calls)
    c = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
         "choices": [{"index": choice, "delta": delta, "finish_reason": finish}]}
    c.update(extra)
    return c


def tc(index: int | None = None, id: str | None = None, name: str | None = None, args: Any = None,
       type: str | None = None) -> dict:
    """One ``tool_calls[]`` delta entry; fields left None are omitted."""
    d: dict[str, Any] = {}
    if index is not None:
        d["index"] = index
    if id is not None:
        d["id"] = id
        d["type"] = type or "function"
    fn: dict[str, Any] = {}
    if name is not None:
        fn["name"] = name
    if args is not None:
        fn["arguments"] = args
    if fn:
        d["function"] = fn
    return d


def anthropic_events(blocks: list[dict], stop_reason: str | None = "tool_use", *, message_id: str = "msg_1",
                     stop: bool = True) -> list[dict]:
    """Anthropic stream events for ``blocks``: each block is
    ``{"type": "tool_use", "id": …, "name": …, "fragments": [...]}`` or ``{"type": "text", "text": …}``."""
    evs: list[dict] = [{"type": "message_start", "message": {
        "id": message_id, "type": "message", "role": "assistant", "content": [], "model": "claude-x",
        "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}}]
    for i, b in enumerate(blocks):
        if b["type"] in ("tool_use", "server_tool_use"):
            evs.append({"type": "content_block_start", "index": i,
                        "content_block": {"type": b["type"], "id": b["id"], "name": b["name"], "input": {}}})
            for frag in b.get("fragments", []):
                evs.append({"type": "content_block_delta", "index": i,
                            "delta": {"type": "input_json_delta", "partial_json": frag}})
        else:
            evs.append({"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}})
            evs.append({"type": "content_block_delta", "index": i,
                        "delta": {"type": "text_delta", "text": b["text"]}})
        if b.get("stop", True):
            evs.append({"type": "content_block_stop", "index": i})
    if stop_reason is not None:
        evs.append({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                    "usage": {"output_tokens": 9}})
    if stop:
        evs.append({"type": "message_stop"})
    return evs
