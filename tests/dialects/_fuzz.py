"""What the adapters share to write the fuzzer's seeds (``Adapter.fuzz_seeds``): random calls, names and arguments,
fragments, SSE and JSON lines, and whole bodies of a dialect. Deterministic for a given random state."""

from __future__ import annotations

import json
import random
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ._adapter import Adapter

__all__ = ["fuzz_args", "fuzz_calls", "fuzz_split", "fuzz_sse", "fuzz_jsonl", "body_seeds"]

_NAMES = ["get_weather", "search", "write_file", "delete_row", "f", "g", "lookup_user", "send_email",
          "a" * 64, "_private", "Tool-9", "calc"]
_WEIRD_NAMES = ["", "bad name", "x" * 65, "9lives", "naïve", "get.weather"]
_STRINGS = ["Paris", "", "é中文字😀", "line\nbreak", "quote\"back\\slash", "\u2028\u00a0", "\x00\x7f", "🎉" * 5,
            "a" * 300]


def fuzz_args(rng: random.Random, depth: int = 0) -> dict[str, Any]:
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
        return fuzz_args(rng, depth)
    return rng.choice([rng.choice(_STRINGS), rng.randint(-10 ** 6, 10 ** 6), 3.25, True, False, None,
                       2 ** 53 + 1, -0.5])


def fuzz_calls(rng: random.Random, prefix: str, n: int | None = None) -> list[tuple[str, str, dict]]:
    n = rng.randint(1, 4) if n is None else n
    out = []
    for i in range(n):
        name = rng.choice(_NAMES) if rng.random() > 0.08 else rng.choice(_WEIRD_NAMES)
        out.append((f"{prefix}{i}{rng.randrange(10 ** 6)}", name, fuzz_args(rng)))
    return out


def fuzz_split(text: str, rng: random.Random) -> list[str]:
    out, i = [], 0
    while i < len(text):
        n = rng.randint(1, 12)
        out.append(text[i:i + n])
        i += n
    return out


def fuzz_sse(payloads: list[Any], *, sep: str = "\n", event_key: str | None = "type", done: bool = False) -> bytes:
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


def fuzz_jsonl(payloads: list[Any]) -> bytes:
    return "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in payloads).encode()


def body_seeds(adapter: Adapter, rng: random.Random, k: int, *, custom: bool = False, idless: bool = False
               ) -> list[tuple[str, str, bytes]]:
    """``k`` whole bodies of ``adapter``'s dialect: 0 to 3 calls, sometimes with arguments that do not parse, calls
    without ids (``idless``: a dialect whose ids are optional), custom tools (``custom``: a dialect that has
    them), with or without a response id and text."""
    out = []
    for i in range(k):
        calls: list[Any] = list(fuzz_calls(rng, "id_", rng.randint(0, 3)))
        if idless and rng.random() < 0.5:
            calls = [(None, n, a) for _, n, a in calls]
        if calls and rng.random() < 0.15:
            cid, name, _ = calls[0]
            calls[0] = (cid, name, rng.choice(['{"a": ', "[1, 2]", "not json"]))
        is_custom = custom and rng.random() < 0.15
        if is_custom:
            calls = [(c, n, "free text " + json.dumps(a)) for c, n, a in calls]
        data = adapter.body(calls, response_id=rng.choice(["resp_1", None]), text=rng.choice([None, "Sure.", "é"]),
                            custom=is_custom)
        out.append((f"gen:{adapter.dialect}:json:{i}", "json", data))
    return out
