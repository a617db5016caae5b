"""The test adapter of Anthropic Messages (``anthropic``): streams from ``tests/streamgen.py``, whole bodies, the
three-call turn after signed and redacted thinking, the official anthropic SDK's request and response types, and the
history of tool_use and tool_result blocks."""

from __future__ import annotations

import json
import random
from typing import Any, Callable, Sequence

import pydantic
from pydantic import TypeAdapter
from hypothesis import strategies as st

import toolwire

from .. import wire
from ..streamgen import (
    NEWLINES,
    FragmentPlan,
    anthropic_events,
    calls_strategy,
    encode_sse,
    fragment_plan,
    unicode_text,
)
from ._adapter import Adapter, Call, Case
from ._sdk import assert_keys, conforms

__all__ = ["ADAPTER", "anthropic_turn", "tool_use", "tool_result", "THINKING", "REDACTED"]

CLEAN = ("tool_use", "end_turn")
UNCLEAN = ("max_tokens", "refusal")

THINKING = {"type": "thinking", "thinking": "The user wants the weather.", "signature": "EqQBCkYIARgCKkA-sig"}
REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy-redacted"}


def anthropic_turn(stop_reason: str = "tool_use") -> toolwire.Turn:
    """An Anthropic stream: thinking (signed), redacted thinking, text, then three tool_use blocks."""
    evs = wire.anthropic_events([
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "toolu_a", "name": "get_weather", "fragments": ['{"city": ', '"Paris"}']},
        {"type": "tool_use", "id": "toolu_b", "name": "lookup", "fragments": ['{"key": "hei', 'ght"']},
        {"type": "tool_use", "id": "toolu_c", "name": "get_time", "fragments": [""]},
    ], stop_reason=stop_reason)
    # shift the blocks by two and put the thinking blocks first
    for e in evs:
        if "index" in e:
            e["index"] += 2
    head = [
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "",
                                                                       "signature": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta",
                                                               "thinking": THINKING["thinking"]}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta",
                                                               "signature": THINKING["signature"]}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": REDACTED},
        {"type": "content_block_stop", "index": 1},
    ]
    return toolwire.parse("anthropic", wire.sse(evs[0], *head, *evs[1:], events=True))


def tool_use(tid: str, name: str = "f", inp: Any = None) -> dict[str, Any]:
    return {"type": "tool_use", "id": tid, "name": name, "input": {} if inp is None else inp}


def tool_result(tid: str, content: str = "ok", **kw: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tid, "content": content, **kw}


def _only(encoded: list[dict]) -> dict:
    """The one message of an answer (a user message holding every result)."""
    assert isinstance(encoded, list) and len(encoded) == 1
    return encoded[0]


def _rename(d: dict, old: str, new: str) -> dict:
    return {(new if k == old else k): v for k, v in d.items()}


def _block_ends(events: list[tuple[str, dict]], enc: Any, calls: Sequence[Call]) -> list[int]:
    block_of = {p["content_block"]["id"]: p["index"] for n, p in events if n == "content_block_start"
                and p["content_block"]["type"] == "tool_use"}
    return [enc.end_of(lambda n, p, i=block_of[cid]: n == "content_block_stop" and p["index"] == i)
            for cid, _, _ in calls]


# ---- the declarations against the SDK ----------------------------------------------------------------------------
def validate_anthropic(fragment: dict) -> None:
    import anthropic.types as at
    from anthropic.types.message_create_params import MessageCreateParamsBase

    assert_keys(MessageCreateParamsBase, fragment)
    for tool in fragment["tools"]:
        TypeAdapter(at.ToolParam).validate_python(tool)
        assert_keys(at.ToolParam, tool)
    choice = fragment["tool_choice"]
    TypeAdapter(at.ToolChoiceParam).validate_python(choice)
    by_type = {"auto": at.ToolChoiceAutoParam, "any": at.ToolChoiceAnyParam, "tool": at.ToolChoiceToolParam,
               "none": at.ToolChoiceNoneParam}
    TypeAdapter(by_type[choice["type"]]).validate_python(choice)
    assert_keys(by_type[choice["type"]], choice)


class AnthropicAdapter(Adapter):
    dialect = "anthropic"
    stream_terminators = frozenset({"message_stop"})
    terminator_needles = (b"message_stop",)
    surrogate_prefix = 3

    # ---- streams -----------------------------------------------------------------------------------------------
    def cases(self, draw: Any, *, max_calls: int = 4, max_text: int = 20, clean: bool | None = True,
              stops: Sequence[str] | None = None) -> Case:
        calls = draw(calls_strategy(max_calls=max_calls, id_prefix="toolu_01"))
        plan = draw(fragment_plan())
        text = draw(st.none() | unicode_text(max_text, 1))
        ensure_ascii = draw(st.booleans())
        newline = draw(st.sampled_from(NEWLINES))
        wire_ascii = draw(st.booleans())
        if stops is None:
            stops = CLEAN if clean else UNCLEAN if clean is False else CLEAN + UNCLEAN
        stop = draw(st.sampled_from(stops))
        events = anthropic_events(calls, text=text, thinking=draw(st.booleans()), stop_reason=stop, plan=plan,
                                  ensure_ascii=ensure_ascii, empty_input_as_nothing=draw(st.booleans()))
        enc = encode_sse(events, newline=newline, ensure_ascii=wire_ascii)
        end = enc.end_of(lambda n, _p: n == "message_stop")
        return Case(self.dialect, enc, calls, _block_ends(events, enc, calls), end, stop in CLEAN)

    def small_case(self) -> Case:
        calls = [("toolu_011", "a", {"k": "v😀"}), ("toolu_012", "b", {})]
        events = anthropic_events(calls, fragment_sizes=(3,))
        enc = encode_sse(events, newline="\r\n")
        return Case(self.dialect, enc, calls, _block_ends(events, enc, calls),
                    enc.end_of(lambda n, _p: n == "message_stop"), True)

    def body(self, calls: Sequence[Call], *, response_id: str | None = "resp_1", text: str | None = None,
             custom: bool = False) -> bytes:
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        content += [{"type": "tool_use", "id": cid, "name": name, "input": args} for cid, name, args in calls]
        out: dict[str, Any] = {"type": "message", "role": "assistant", "model": "m", "content": content,
                               "stop_reason": "tool_use" if calls else "end_turn"}
        if response_id:
            out["id"] = response_id
        return json.dumps(out).encode()

    def fuzz_seeds(self, rng: random.Random, k: int) -> list[tuple[str, str, bytes]]:
        from ..streamgen import anthropic_stream
        from ._fuzz import body_seeds, fuzz_calls

        out = []
        for i in range(k):
            calls = fuzz_calls(rng, "toolu_")
            plan = FragmentPlan(sizes=tuple(rng.randint(1, 24) for _ in range(3)),
                                pings=tuple(rng.random() < 0.3 for _ in range(3)))
            data = anthropic_stream(calls, text=rng.choice([None, "Checking.", "ü"]), thinking=rng.random() < 0.3,
                                    stop_reason=rng.choice(["tool_use", "tool_use", "end_turn", "max_tokens", None]),
                                    plan=plan, message_stop=rng.random() < 0.9,
                                    newline=rng.choice(["\n", "\r\n"]), wire_ascii=rng.random() < 0.3)
            out.append((f"gen:anthropic:sse:{i}", "sse", data))
        blocks = [{"type": "text", "text": "Looking."},
                  {"type": "tool_use", "id": "toolu_1", "name": "f", "fragments": ['{"a"', ': [1, 2', "]}"]},
                  {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "fragments": ['{"q": "x"}']},
                  {"type": "tool_use", "id": "toolu_2", "name": "g", "fragments": ["{}"], "stop": False}]
        out.append(("gen:anthropic:wire:blocks", "sse", wire.sse(*wire.anthropic_events(blocks), events=True)))
        out.append(("gen:anthropic:wire:cut", "sse",
                    wire.sse(*wire.anthropic_events(blocks[:2], stop_reason=None, stop=False), events=True)))
        return out + body_seeds(self, rng, max(4, k // 4))

    def response_models(self) -> tuple[Callable[[Any], Any], Callable[[Any], Any], Callable[[Any], Any] | None]:
        from anthropic.types import ErrorResponse, Message, RawMessageStreamEvent

        return (Message.model_validate, pydantic.TypeAdapter(RawMessageStreamEvent).validate_python,
                ErrorResponse.model_validate)

    def is_error_payload(self, name: str | None, kind: str, doc: Any) -> bool:
        return name == "error"

    def ignorable_payload(self, name: str | None, doc: Any) -> bool:
        """``ping`` is a keep-alive: the SDK skips it (it has no model)."""
        if name == "ping":
            assert doc == {"type": "ping"}
            return True
        return False

    # ---- results -----------------------------------------------------------------------------------------------
    def turn(self) -> toolwire.Turn:
        return anthropic_turn()

    def cut_turn(self) -> toolwire.Turn:
        return anthropic_turn("max_tokens")

    def results_in(self, body: dict[str, Any]) -> list[Any]:
        return [m for m in body["messages"] if m["role"] == "user" and isinstance(m["content"], list)
                and any(b.get("type") == "tool_result" for b in m["content"])]

    def answered(self, encoded: Any) -> list[tuple[Any, Any, bool | None]]:
        return [(b["tool_use_id"], b["content"], b.get("is_error", False)) for b in _only(encoded)["content"]]

    def check_answer(self, turn: toolwire.Turn, encoded: Any, results: list[Any]) -> None:
        by_local = {r.local_id: r for r in results}
        message = _only(encoded)
        assert message["role"] == "user"
        assert all(b["type"] == "tool_result" for b in message["content"])
        assert all(("is_error" in b) is by_local[c.local_id].is_error for b, c in zip(message["content"], turn.calls))

    def history_shape(self, turn: toolwire.Turn, msgs: list[Any]) -> None:
        ids = [c.call_id for c in turn.calls]
        assert [m["role"] for m in msgs] == ["assistant", "user"]
        assert [b["id"] for b in msgs[0]["content"] if b["type"] == "tool_use"] == ids
        assert [b["tool_use_id"] for b in msgs[1]["content"]] == ids

    def check_sdk(self, message: Any) -> None:
        from anthropic.types import MessageParam, ToolResultBlockParam

        conforms(message, MessageParam)
        for block in message["content"] if isinstance(message["content"], list) else ():
            if block.get("type") == "tool_result":
                conforms(block, ToolResultBlockParam)

    def misspellings(self) -> dict[str, Callable[[list[Any]], list[Any]]]:
        return {
            "anthropic_tool_id": lambda e: [{**e[0], "content": [_rename(e[0]["content"][0], "tool_use_id",
                                                                         "tool_id")]}],
            "anthropic_error_flag": lambda e: [{**e[0], "content": [dict(e[0]["content"][0], error=True)]}],
        }

    def check_declaration(self, fragment: dict) -> None:
        validate_anthropic(fragment)

    # ---- history repair ----------------------------------------------------------------------------------------
    def user(self, text: str) -> Any:
        return {"role": "user", "content": text}

    def well_formed(self, msgs: list[Any], echo_ids: bool = True) -> list[str]:
        problems, allowed = [], set()
        for i, m in enumerate(msgs):
            blocks = m["content"] if isinstance(m.get("content"), list) else []
            if m["role"] == "assistant":
                ids = [b["id"] for b in blocks if b.get("type") == "tool_use"]
                if not all(isinstance(b["input"], dict) for b in blocks if b.get("type") == "tool_use"):
                    problems.append(f"message {i}: input not an object")
                if ids:
                    nxt = msgs[i + 1] if i + 1 < len(msgs) else {"role": None, "content": []}
                    got = [b.get("tool_use_id") for b in nxt["content"][:len(ids)]] if nxt["role"] == "user" else []
                    if got != ids:
                        problems.append(f"message {i}: results {got} for calls {ids}")
                    if any(b.get("type") == "tool_result" for b in nxt["content"][len(ids):]):
                        problems.append(f"message {i + 1}: a tool_result after other content")
                    allowed.add(i + 1)
        problems += [f"message {i}: stray tool_result" for i, m in enumerate(msgs) if i not in allowed
                     and isinstance(m.get("content"), list)
                     and any(b.get("type") == "tool_result" for b in m["content"])]
        return problems

    def replayed_and_answered(self, msgs: list[Any]) -> tuple[list[tuple[Any, Any]], list[tuple[Any, Any]]]:
        calls = [(b["id"], b["name"]) for b in msgs[0]["content"] if b.get("type") == "tool_use"]
        answers = [(b["tool_use_id"], None) for m in msgs[1:] for b in m["content"] if b.get("type") == "tool_result"]
        return calls, answers

    def call_ids(self, msgs: list[Any]) -> list[Any]:
        return [b["id"] for m in msgs if m["role"] == "assistant" and isinstance(m["content"], list)
                for b in m["content"] if b.get("type") == "tool_use"]

    def strip_results(self, msgs: list[Any]) -> list[Any]:
        return [m for m in msgs if not (isinstance(m["content"], list)
                                        and any(b.get("type") == "tool_result" for b in m["content"]))]

    def same_id_twice(self, results: int) -> list[Any]:
        msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [tool_use("dup"),
                                                                                     tool_use("dup", "g")]}]
        return msgs + [{"role": "user", "content": [tool_result("dup", f"r{k}") for k in range(results)]}] * bool(
            results)

    def result_units(self, msgs: list[Any]) -> list[tuple[int, int | None]]:
        return [(i, k) for i, m in enumerate(msgs) if isinstance(m.get("content"), list)
                for k, b in enumerate(m["content"]) if b.get("type") == "tool_result"]

    def wrap_result(self, unit: Any) -> Any:
        return {"role": "user", "content": [unit]}

    def orphan(self) -> Any:
        return {"type": "tool_result", "tool_use_id": "toolu_orphan", "content": "x"}

    def clean_damaged(self, entry: Any) -> Any:
        if isinstance(entry, dict) and isinstance(entry.get("content"), list):
            entry["content"] = [b for b in entry["content"] if b is not None]
            if not entry["content"]:
                return None
        return entry

    def render_model(self, at: int) -> Any:
        return {"role": "assistant", "content": "thinking aloud"}

    def render_calls(self, calls: list[Any], extra: bool, at: int, arguments: Callable[[str, bool], Any]
                     ) -> list[Any]:
        blocks = [{"type": "text", "text": "calling"}] if extra else []
        for cid, name, kind in calls:
            a = arguments(kind, False)
            blocks.append({"type": "tool_use", **({"id": cid} if cid else {}), "name": name,
                           **({"input": a["v"]} if a else {})})
        return [{"role": "assistant", "content": blocks}]

    def render_results(self, results: list[Any], odd: bool) -> list[Any]:
        return [{"role": "user", "content": [
            tool_result(r[1] or "zz") if r[0] == "r" else {"type": "text", "text": "between"} for r in results]}]

    def with_usage(self, data: bytes, tokens: int) -> bytes:
        out = json.loads(data)
        out["usage"] = {"input_tokens": tokens, "output_tokens": tokens}
        return json.dumps(out).encode()


ADAPTER = AnthropicAdapter()
