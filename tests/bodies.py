"""Whole (non-streaming) response bodies of every dialect, built from canonical calls, for dispatch tests.

``body(provider, calls, response_id=...)`` gives the bytes a provider would send for one model response whose
calls are ``(call_id or None, name, args dict)``; ``response_id=None`` leaves the response id out.
``choices_body(provider, choices, response_id=...)`` gives a response with several alternative completions (Chat
``n > 1``, Gemini candidates), one list of calls per choice.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

PROVIDERS = ("openai-chat", "openai-responses", "anthropic", "gemini", "gemini-interactions")
#: the dialects whose responses can carry several choices (candidates)
MULTI_CHOICE = ("openai-chat", "gemini")

Call = tuple[str | None, str, Any]


def _args_text(args: Any) -> str:
    return args if isinstance(args, str) else json.dumps(args)


def body(provider: str, calls: Sequence[Call], *, response_id: str | None = "resp_1", text: str | None = None,
         custom: bool = False) -> bytes:
    """One model response of ``provider`` carrying ``calls`` (ids None where the provider sent none)."""
    out: dict[str, Any]
    if provider == "openai-chat":
        msg: dict[str, Any] = {"role": "assistant", "content": text}
        if calls:
            msg["tool_calls"] = [
                {"id": cid, "type": "custom", "custom": {"name": name, "input": args}} if custom else
                {"id": cid, "type": "function", "function": {"name": name, "arguments": _args_text(args)}}
                for cid, name, args in calls]
        out = {"object": "chat.completion", "model": "m",
               "choices": [{"index": 0, "message": msg, "finish_reason": "tool_calls" if calls else "stop"}]}
    elif provider == "openai-responses":
        items: list[dict[str, Any]] = []
        if text:
            items.append({"type": "message", "id": "msg_0", "role": "assistant", "status": "completed",
                          "content": [{"type": "output_text", "text": text, "annotations": []}]})
        for i, (cid, name, args) in enumerate(calls):
            if custom:
                items.append({"type": "custom_tool_call", "id": f"ctc_{i}", "call_id": cid, "name": name,
                              "input": args})
            else:
                items.append({"type": "function_call", "id": f"fc_{i}", "call_id": cid, "name": name,
                              "arguments": _args_text(args), "status": "completed"})
        out = {"object": "response", "status": "completed", "model": "m", "output": items}
    elif provider == "anthropic":
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        content += [{"type": "tool_use", "id": cid, "name": name, "input": args} for cid, name, args in calls]
        out = {"type": "message", "role": "assistant", "model": "m", "content": content,
               "stop_reason": "tool_use" if calls else "end_turn"}
    elif provider == "gemini":
        parts: list[dict[str, Any]] = [{"text": text}] if text else []
        for cid, name, args in calls:
            fc: dict[str, Any] = {"name": name, "args": args}
            if cid:
                fc["id"] = cid
            parts.append({"functionCall": fc})
        out = {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}]}
        if response_id:
            out["responseId"] = response_id
        return json.dumps(out).encode()
    elif provider == "gemini-interactions":
        steps: list[dict[str, Any]] = []
        if text:
            steps.append({"type": "model_output", "content": [{"type": "text", "text": text}]})
        steps += [{"type": "function_call", "id": cid, "name": name, "arguments": args} for cid, name, args in calls]
        out = {"status": "requires_action" if calls else "completed", "steps": steps}
    else:  # pragma: no cover
        raise ValueError(provider)
    if response_id:
        out["id"] = response_id
    return json.dumps(out).encode()


def choices_body(provider: str, choices: Sequence[Sequence[Call]], *, response_id: str | None = "resp_1") -> bytes:
    """One response of ``provider`` (``openai-chat`` or ``gemini``) with one choice (candidate) per list of calls,
    every choice finished cleanly."""
    out: dict[str, Any]
    if provider == "openai-chat":
        def choice(i: int, calls: Sequence[Call]) -> dict[str, Any]:
            msg: dict[str, Any] = {"role": "assistant", "content": None}
            if calls:
                msg["tool_calls"] = [{"id": cid, "type": "function",
                                      "function": {"name": name, "arguments": _args_text(args)}}
                                     for cid, name, args in calls]
            return {"index": i, "message": msg, "finish_reason": "tool_calls" if calls else "stop"}

        out = {"object": "chat.completion", "model": "m", "choices": [choice(i, c) for i, c in enumerate(choices)]}
        if response_id:
            out["id"] = response_id
    elif provider == "gemini":
        def candidate(i: int, calls: Sequence[Call]) -> dict[str, Any]:
            parts = []
            for cid, name, args in calls:
                fc: dict[str, Any] = {"name": name, "args": args}
                if cid:
                    fc["id"] = cid
                parts.append({"functionCall": fc})
            return {"index": i, "content": {"role": "model", "parts": parts}, "finishReason": "STOP"}

        out = {"candidates": [candidate(i, c) for i, c in enumerate(choices)]}
        if response_id:
            out["responseId"] = response_id
    else:
        raise ValueError(f"{provider} responses have one choice")
    return json.dumps(out).encode()
