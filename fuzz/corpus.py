"""Seed inputs: every recording in ``tests/fixtures/real`` and generated streams and bodies of every dialect.

A ``Seed`` is one whole provider response: its dialect, the format it is written in (``sse``, ``jsonl`` or
``json``) and its bytes. Generated seeds reuse the test suite's encoders (``tests/streamgen.py`` for Chat and
Anthropic streams, ``tests/wire.py``, ``tests/bodies.py`` for whole bodies of every dialect); Responses, Gemini
and Interactions streams are written here in the shapes the codec tests use. Everything is deterministic: the
same code gives the same seeds, in the same order.
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "tests" / "fixtures" / "real"

if str(ROOT) not in sys.path:  # the test helpers are imported as ``tests.*``
    sys.path.insert(0, str(ROOT))

DIALECTS = ("openai-chat", "openai-responses", "anthropic", "gemini", "gemini-interactions")

__all__ = ["Seed", "DIALECTS", "load_seeds", "real_seeds", "generated_seeds"]


@dataclass(frozen=True)
class Seed:
    name: str
    dialect: str
    format: str  # sse | jsonl | json (a Gemini JSON array is "json")
    data: bytes


def real_seeds() -> list[Seed]:
    """The recordings listed in ``tests/fixtures/real/manifest.json`` (read at run time, never copied)."""
    manifest = json.loads((REAL / "manifest.json").read_text())
    out = []
    for entry in manifest:
        if entry["provider"] not in DIALECTS:
            continue
        out.append(Seed("real:" + entry["file"], entry["provider"], entry["format"],
                        (REAL / entry["file"]).read_bytes()))
    return out


# ---- shared pieces --------------------------------------------------------------------------------------
_NAMES = ["get_weather", "search", "write_file", "delete_row", "f", "g", "lookup_user", "send_email",
          "a" * 64, "_private", "Tool-9", "calc"]
_WEIRD_NAMES = ["", "bad name", "x" * 65, "9lives", "naïve", "get.weather"]
_STRINGS = ["Paris", "", "é中文字😀", "line\nbreak", "quote\"back\\slash", "\u2028\u00a0", "\x00\x7f", "🎉" * 5,
            "a" * 300]


def _args(rng: random.Random, depth: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for _ in range(rng.randint(0, 4)):
        key = rng.choice(["city", "q", "n", "items", "nested", "ü", "", "flag", "path", "x y"])
        out[key] = _value(rng, depth + 1)
    return out


def _value(rng: random.Random, depth: int) -> Any:
    r = rng.random()
    if depth < 3 and r < 0.15:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if depth < 3 and r < 0.3:
        return _args(rng, depth)
    return rng.choice([rng.choice(_STRINGS), rng.randint(-10 ** 6, 10 ** 6), 3.25, True, False, None,
                       2 ** 53 + 1, -0.5])


def _calls(rng: random.Random, prefix: str, n: int | None = None) -> list[tuple[str, str, dict]]:
    n = rng.randint(1, 4) if n is None else n
    out = []
    for i in range(n):
        name = rng.choice(_NAMES) if rng.random() > 0.08 else rng.choice(_WEIRD_NAMES)
        out.append((f"{prefix}{i}{rng.randrange(10 ** 6)}", name, _args(rng)))
    return out


def _split(text: str, rng: random.Random) -> list[str]:
    out, i = [], 0
    while i < len(text):
        n = rng.randint(1, 12)
        out.append(text[i:i + n])
        i += n
    return out


def _sse(payloads: list[Any], *, sep: str = "\n", event_key: str | None = "type", done: bool = False) -> bytes:
    out = []
    for p in payloads:
        lines = []
        if event_key and isinstance(p, dict) and isinstance(p.get(event_key), str):
            lines.append(f"event: {p[event_key]}")
        lines.append("data: " + (p if isinstance(p, str) else json.dumps(p, ensure_ascii=False)))
        out.append(sep.join(lines) + sep + sep)
    if done:
        out.append(f"data: [DONE]{sep}{sep}")
    return "".join(out).encode()


def _jsonl(payloads: list[Any]) -> bytes:
    return "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in payloads).encode()


# ---- OpenAI Chat and Anthropic: the test suite's encoders -------------------------------------------------
def _chat(rng: random.Random, k: int) -> list[Seed]:
    from tests.streamgen import FragmentPlan, chat_stream

    out = []
    for i in range(k):
        calls = _calls(rng, "call_")
        plan = FragmentPlan(sizes=tuple(rng.randint(1, 24) for _ in range(3)),
                            order=tuple(rng.randint(0, 7) for _ in range(4)),
                            per_chunk=tuple(rng.randint(1, 3) for _ in range(2)))
        finish = rng.choice(["tool_calls", "tool_calls", "stop", "length", "content_filter", None])
        data = chat_stream(calls, text=rng.choice([None, "Let me check.", "é"]), finish=finish, plan=plan,
                           parallel_interleave=rng.random() < 0.5, include_usage=rng.random() < 0.7,
                           done=rng.random() < 0.85, newline=rng.choice(["\n", "\n", "\r\n", "\r"]),
                           wire_ascii=rng.random() < 0.3)
        out.append(Seed(f"gen:openai-chat:sse:{i}", "openai-chat", "sse", data))
    return out


def _anthropic(rng: random.Random, k: int) -> list[Seed]:
    from tests.streamgen import FragmentPlan, anthropic_stream

    out = []
    for i in range(k):
        calls = _calls(rng, "toolu_")
        plan = FragmentPlan(sizes=tuple(rng.randint(1, 24) for _ in range(3)),
                            pings=tuple(rng.random() < 0.3 for _ in range(3)))
        data = anthropic_stream(calls, text=rng.choice([None, "Checking.", "ü"]), thinking=rng.random() < 0.3,
                                stop_reason=rng.choice(["tool_use", "tool_use", "end_turn", "max_tokens", None]),
                                plan=plan, message_stop=rng.random() < 0.9,
                                newline=rng.choice(["\n", "\r\n"]), wire_ascii=rng.random() < 0.3)
        out.append(Seed(f"gen:anthropic:sse:{i}", "anthropic", "sse", data))
    return out


def _wire(rng: random.Random) -> list[Seed]:
    """A few table-style streams written with ``tests/wire.py``: Chat with two choices, Anthropic blocks."""
    from tests import wire

    chat = wire.sse(
        wire.chunk(wire.tc(0, "call_a", "get_weather", ""), choice=0),
        wire.chunk(wire.tc(0, "call_b", "search", '{"q":'), choice=1),
        wire.chunk(wire.tc(0, args='{"city": "Paris"}'), choice=0),
        wire.chunk(wire.tc(0, args='"x"}'), choice=1),
        wire.chunk(finish="tool_calls", choice=0), wire.chunk(finish="tool_calls", choice=1), "[DONE]")
    blocks = [{"type": "text", "text": "Looking."},
              {"type": "tool_use", "id": "toolu_1", "name": "f", "fragments": ['{"a"', ': [1, 2', "]}"]},
              {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "fragments": ['{"q": "x"}']},
              {"type": "tool_use", "id": "toolu_2", "name": "g", "fragments": ["{}"], "stop": False}]
    anth = wire.sse(*wire.anthropic_events(blocks), events=True)
    anth_cut = wire.sse(*wire.anthropic_events(blocks[:2], stop_reason=None, stop=False), events=True)
    return [Seed("gen:openai-chat:wire:choices", "openai-chat", "sse", chat),
            Seed("gen:anthropic:wire:blocks", "anthropic", "sse", anth),
            Seed("gen:anthropic:wire:cut", "anthropic", "sse", anth_cut)]


def _bodies(rng: random.Random, k: int) -> list[Seed]:
    from tests.bodies import body

    out = []
    for dialect in DIALECTS:
        for i in range(k):
            calls: list[Any] = list(_calls(rng, "id_", rng.randint(0, 3)))
            if dialect == "gemini" and rng.random() < 0.5:
                calls = [(None, n, a) for _, n, a in calls]
            if calls and rng.random() < 0.15:
                cid, name, _ = calls[0]
                calls[0] = (cid, name, rng.choice(['{"a": ', "[1, 2]", "not json"]))
            custom = dialect in ("openai-chat", "openai-responses") and rng.random() < 0.15
            if custom:
                calls = [(c, n, "free text " + json.dumps(a)) for c, n, a in calls]
            data = body(dialect, calls, response_id=rng.choice(["resp_1", None]),
                        text=rng.choice([None, "Sure.", "é"]), custom=custom)
            out.append(Seed(f"gen:{dialect}:json:{i}", dialect, "json", data))
    return out


# ---- OpenAI Responses -------------------------------------------------------------------------------------
def _responses_events(rng: random.Random) -> list[dict]:
    items: list[list[dict]] = []
    index = 0
    for kind in rng.sample(["reasoning", "message", "call", "call", "custom", "shell"], rng.randint(1, 4)):
        iid = f"{kind[:2]}_{index}{rng.randrange(1000)}"
        if kind == "reasoning":
            added = {"type": "reasoning", "id": iid, "summary": [], "encrypted_content": None}
            done = {"type": "reasoning", "id": iid, "summary": [{"type": "summary_text", "text": "hm"}],
                    "encrypted_content": "gAAAA-enc"}
            items.append([{"type": "response.output_item.added", "output_index": index, "item": added},
                          {"type": "response.reasoning_summary_text.delta", "item_id": iid, "output_index": index,
                           "summary_index": 0, "delta": "hm"},
                          {"type": "response.output_item.done", "output_index": index, "item": done}])
        elif kind == "message":
            text = rng.choice(["Hello", "é中文", "Let me check the weather."])
            item = {"type": "message", "id": iid, "role": "assistant", "status": "in_progress", "content": []}
            part = {"type": "output_text", "text": "", "annotations": []}
            evs = [{"type": "response.output_item.added", "output_index": index, "item": item},
                   {"type": "response.content_part.added", "item_id": iid, "output_index": index,
                    "content_index": 0, "part": part}]
            evs += [{"type": "response.output_text.delta", "item_id": iid, "output_index": index,
                     "content_index": 0, "delta": f} for f in _split(text, rng)]
            whole = {**part, "text": text}
            evs += [{"type": "response.output_text.done", "item_id": iid, "output_index": index,
                     "content_index": 0, "text": text},
                    {"type": "response.content_part.done", "item_id": iid, "output_index": index,
                     "content_index": 0, "part": whole},
                    {"type": "response.output_item.done", "output_index": index,
                     "item": {**item, "status": "completed", "content": [whole]}}]
            items.append(evs)
        elif kind in ("call", "custom"):
            (cid, name, args), = _calls(rng, "call_", 1)
            custom = kind == "custom"
            text = ("patch: " + json.dumps(args)) if custom else json.dumps(args, ensure_ascii=rng.random() < 0.5)
            field, delta_type = ("input", "custom_tool_call_input") if custom else ("arguments",
                                                                                   "function_call_arguments")
            item = {"type": "custom_tool_call" if custom else "function_call", "id": iid, "call_id": cid,
                    "name": name, field: "", "status": "in_progress"}
            evs = [{"type": "response.output_item.added", "output_index": index, "item": item}]
            evs += [{"type": f"response.{delta_type}.delta", "item_id": iid, "output_index": index, "delta": f}
                    for f in _split(text, rng)]
            if rng.random() < 0.9:
                evs.append({"type": f"response.{delta_type}.done", "item_id": iid, "output_index": index,
                            field: text})
            evs.append({"type": "response.output_item.done", "output_index": index,
                        "item": {**item, field: text, "status": "completed"}})
            items.append(evs)
        else:
            item = {"type": "local_shell_call", "id": iid, "call_id": f"call_sh{index}", "status": "completed",
                    "action": {"type": "exec", "command": ["ls", "-a"], "env": {}}}
            items.append([{"type": "response.output_item.added", "output_index": index,
                           "item": {**item, "status": "in_progress"}},
                          {"type": "response.output_item.done", "output_index": index, "item": item}])
        index += 1
    body = [e for evs in items for e in evs]
    base = {"id": f"resp_{rng.randrange(10 ** 6)}", "object": "response", "model": "gpt-test",
            "status": "in_progress", "output": [], "error": None, "incomplete_details": None, "usage": None}
    evs = [{"type": "response.created", "response": dict(base)},
           {"type": "response.in_progress", "response": dict(base)}] + body
    terminal = rng.choice(["completed", "completed", "completed", "incomplete", "failed", None])
    if terminal is not None:
        done = {e["output_index"]: e["item"] for e in body if e["type"] == "response.output_item.done"}
        final = {**base, "status": terminal, "output": [done[k] for k in sorted(done)],
                 "usage": {"total_tokens": 42}}
        if terminal == "incomplete":
            final["incomplete_details"] = {"reason": "max_output_tokens"}
        if terminal == "failed":
            final["error"] = {"code": "server_error", "message": "The model failed."}
        evs.append({"type": f"response.{terminal}", "response": final})
    return [{**e, "sequence_number": i} for i, e in enumerate(evs)]


def _responses(rng: random.Random, k: int) -> list[Seed]:
    out = []
    for i in range(k):
        evs = _responses_events(rng)
        if rng.random() < 0.7:
            data = _sse(evs, sep=rng.choice(["\n", "\r\n"]))
            out.append(Seed(f"gen:openai-responses:sse:{i}", "openai-responses", "sse", data))
        else:
            out.append(Seed(f"gen:openai-responses:jsonl:{i}", "openai-responses", "jsonl", _jsonl(evs)))
    return out


# ---- Gemini generateContent -------------------------------------------------------------------------------
def _leaves(value: Any, keys: tuple = ()) -> list[tuple[tuple, Any]]:
    if isinstance(value, dict) and value:
        return [leaf for k, v in value.items() for leaf in _leaves(v, keys + (k,))]
    if isinstance(value, list) and value:
        return [leaf for i, v in enumerate(value) for leaf in _leaves(v, keys + (i,))]
    return [(keys, value)]


def _json_path(keys: tuple) -> str:
    out = "$"
    for k in keys:
        if isinstance(k, int):
            out += f"[{k}]"
        elif k.isidentifier():
            out += "." + k
        else:
            out += "[" + json.dumps(k) + "]"
    return out


def _partial_arg(path: str, value: Any, more: bool) -> dict:
    d: dict[str, Any] = {"jsonPath": path}
    if value is None:
        d["nullValue"] = "NULL_VALUE"
    elif isinstance(value, bool):
        d["boolValue"] = value
    elif isinstance(value, (int, float)):
        d["numberValue"] = value
    elif isinstance(value, str):
        d["stringValue"] = value
    else:  # an empty container: sent whole as a string value is not possible; use null
        d["nullValue"] = "NULL_VALUE"
    if more:
        d["willContinue"] = True
    return d


def _gemini_chunk(parts: list[dict] | None, finish: str | None = None, **extra: Any) -> dict:
    cand: dict[str, Any] = {}
    if parts:
        cand["content"] = {"role": "model", "parts": parts}
    if finish is not None:
        cand["finishReason"] = finish
    return {"candidates": [cand], **extra}


def _gemini_payloads(rng: random.Random) -> list[dict]:
    payloads: list[dict] = []
    for kind in [rng.choice(["text", "call", "streamed", "thought"]) for _ in range(rng.randint(1, 4))]:
        sig = rng.choice([None, "U0lH", "c2lnbmF0dXJl"])
        if kind in ("text", "thought"):
            part: dict[str, Any] = {"text": rng.choice(["Let me check.", "é ✓", ""])}
            if kind == "thought":
                part["thought"] = True
            if sig:
                part["thoughtSignature"] = sig
            payloads.append(_gemini_chunk([part]))
            continue
        (cid, name, args), = _calls(rng, "c", 1)
        fc: dict[str, Any] = {"name": name}
        if rng.random() < 0.5:
            fc["id"] = cid
        if kind == "call":
            if args or rng.random() < 0.5:
                fc["args"] = args
            part = {"functionCall": fc}
            if sig:
                part["thoughtSignature"] = sig
            payloads.append(_gemini_chunk([part]))
            continue
        start = {"functionCall": {**fc, "willContinue": True}}
        if sig:
            start["thoughtSignature"] = sig
        payloads.append(_gemini_chunk([start]))
        leaves = _leaves(args) if args else []
        for n, (keys, value) in enumerate(leaves):
            if isinstance(value, str) and len(value) > 2 and rng.random() < 0.5:
                cut = rng.randint(1, len(value) - 1)
                pieces = [(value[:cut], True), (value[cut:], False)]
            else:
                pieces = [(value, False)]
            for text, more in pieces:
                payloads.append(_gemini_chunk([{"functionCall": {
                    "partialArgs": [_partial_arg(_json_path(keys), text, more)], "willContinue": True}}]))
        payloads.append(_gemini_chunk([{"functionCall": {}}]))
    finish = rng.choice(["STOP", "STOP", "STOP", "MAX_TOKENS", "SAFETY", "MALFORMED_FUNCTION_CALL", None])
    extra = {"responseId": f"r{rng.randrange(1000)}", "modelVersion": "gemini-3"} if rng.random() < 0.6 else {}
    if finish is not None:
        payloads.append(_gemini_chunk([{"text": ""}], finish=finish,
                                      usageMetadata={"promptTokenCount": 3, "totalTokenCount": 9}, **extra))
    elif payloads:
        payloads[0].update(extra)
    return payloads


def _gemini(rng: random.Random, k: int) -> list[Seed]:
    out = []
    for i in range(k):
        payloads = _gemini_payloads(rng)
        r = rng.random()
        if r < 0.5:
            data = _sse(payloads, sep="\r\n", event_key=None)
            out.append(Seed(f"gen:gemini:sse:{i}", "gemini", "sse", data))
        elif r < 0.75:
            data = ("[" + "\n,".join(json.dumps(p, ensure_ascii=False) for p in payloads) + "\n]").encode()
            out.append(Seed(f"gen:gemini:array:{i}", "gemini", "json", data))
        else:
            out.append(Seed(f"gen:gemini:jsonl:{i}", "gemini", "jsonl", _jsonl(payloads)))
    return out


# ---- Gemini Interactions ----------------------------------------------------------------------------------
def _interaction_events(rng: random.Random) -> list[dict]:
    iid = "v1_ChdTb21lSW50ZXJhY3Rpb24"
    legacy = rng.random() < 0.2
    if legacy:
        evs: list[dict] = [{"event_type": "interaction.start", "interaction": {"id": iid, "status": "in_progress"}}]
        for index in range(rng.randint(1, 3)):
            if rng.random() < 0.3:
                evs += [{"event_type": "content.start", "index": index, "content": {"type": "text", "text": "Hm."}},
                        {"event_type": "content.stop", "index": index}]
                continue
            (cid, name, args), = _calls(rng, "fc_", 1)
            evs.append({"event_type": "content.start", "index": index, "content": {
                "type": "function_call", "id": cid, "name": name, "arguments": {}, "signature": "c2ln"}})
            evs.append({"event_type": "content.delta", "index": index,
                        "delta": {"type": "function_call", "arguments": args}})
            evs.append({"event_type": "content.stop", "index": index})
        evs.append({"event_type": "interaction.complete",
                    "interaction": {"id": iid, "status": "requires_action", "outputs": []}})
        return evs
    evs = [{"event_type": "interaction.created", "event_id": "e0", "interaction": {
        "id": iid, "status": "in_progress", "object": "interaction", "model": "gemini-3-flash-preview"}}]
    if rng.random() < 0.3:
        evs.append({"event_type": "interaction.status_update", "interaction_id": iid, "status": "in_progress"})
    for index, kind in enumerate(rng.choice(["thought", "text", "call", "call", "server"])
                                 for _ in range(rng.randint(1, 4))):
        if kind == "thought":
            evs.append({"event_type": "step.start", "index": index, "step": {"type": "thought"}})
            if rng.random() < 0.7:
                evs.append({"event_type": "step.delta", "index": index,
                            "delta": {"type": "thought_signature", "signature": "c2lnbmF0dXJl"}})
        elif kind == "text":
            evs.append({"event_type": "step.start", "index": index, "step": {"type": "model_output"}})
            evs += [{"event_type": "step.delta", "index": index, "delta": {"type": "text", "text": t}}
                    for t in _split("Let me check é.", rng)]
        elif kind == "server":
            evs.append({"event_type": "step.start", "index": index, "step": {
                "type": "google_search_call", "id": f"gs_{index}", "arguments": {"queries": ["weather"]}}})
        else:
            (cid, name, args), = _calls(rng, "fc_", 1)
            text = json.dumps(args, ensure_ascii=rng.random() < 0.5)
            start_args = args if rng.random() < 0.2 else {}
            evs.append({"event_type": "step.start", "index": index,
                        "step": {"type": "function_call", "id": cid, "name": name, "arguments": start_args}})
            evs += [{"event_type": "step.delta", "index": index, "delta": {"type": "arguments_delta",
                                                                            "arguments": f}}
                    for f in _split(text, rng)]
        evs.append({"event_type": "step.stop", "index": index, "step_usage": {"total_tokens": 3}})
    status = rng.choice(["requires_action", "requires_action", "completed", "incomplete", "failed", None])
    if status is not None:
        interaction: dict[str, Any] = {"id": iid, "status": status, "usage": {"total_tokens": 7}}
        if status == "failed":
            interaction["error"] = {"code": "internal", "message": "boom"}
        evs.append({"event_type": "interaction.completed", "event_id": "e9", "interaction": interaction})
    return evs


def _interactions(rng: random.Random, k: int) -> list[Seed]:
    out = []
    for i in range(k):
        evs = _interaction_events(rng)
        if rng.random() < 0.8:
            data = _sse(evs, sep=rng.choice(["\n", "\r\n"]), event_key="event_type", done=rng.random() < 0.85)
            out.append(Seed(f"gen:gemini-interactions:sse:{i}", "gemini-interactions", "sse", data))
        else:
            out.append(Seed(f"gen:gemini-interactions:jsonl:{i}", "gemini-interactions", "jsonl", _jsonl(evs)))
    return out


def generated_seeds(per_dialect: int = 40) -> list[Seed]:
    """Deterministic generated seeds: ``per_dialect`` streams of each dialect plus whole bodies of each."""
    rng = random.Random(20240601)
    return (_chat(rng, per_dialect) + _anthropic(rng, per_dialect) + _wire(rng)
            + _responses(rng, per_dialect) + _gemini(rng, per_dialect) + _interactions(rng, per_dialect)
            + _bodies(rng, max(4, per_dialect // 4)))


def load_seeds(dialects: tuple[str, ...] | list[str] = DIALECTS, *, per_dialect: int = 40
               ) -> dict[str, list[Seed]]:
    """Seeds grouped by dialect (only those asked for), recordings first."""
    out: dict[str, list[Seed]] = {d: [] for d in dialects}
    for seed in real_seeds() + generated_seeds(per_dialect):
        if seed.dialect in out:
            out[seed.dialect].append(seed)
    return out
