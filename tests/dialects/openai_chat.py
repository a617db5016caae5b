"""The test adapter of OpenAI Chat Completions (``openai-chat``): streams from ``tests/streamgen.py``, whole bodies,
the three-call turn, the official openai SDK's request and response types, and the history of tool messages."""

from __future__ import annotations

import json
import random
from typing import Any, Callable, Sequence

from hypothesis import strategies as st
from pydantic import TypeAdapter

import toolwire

from .. import wire
from ..streamgen import NEWLINES, FragmentPlan, calls_strategy, chat_events, encode_sse, fragment_plan, unicode_text
from ._adapter import Adapter, Call, Case
from ._sdk import assert_keys, conforms

__all__ = ["ADAPTER", "assistant_calls", "tool", "chat_turn", "without_chat_extensions"]

#: the finish reasons of a generated stream: clean, and unclean
CLEAN = ("tool_calls", "stop")
UNCLEAN = ("length", "content_filter")


def chat_turn(finish: str = "tool_calls", *, ids: bool = True) -> toolwire.Turn:
    """A Chat stream with three calls; ``ids=False`` is a server that sends no ids (vLLM)."""
    cid = (lambda x: x) if ids else (lambda x: None)
    return toolwire.parse("openai-chat", wire.sse(
        wire.chunk(wire.tc(0, cid("call_a"), "get_weather", '{"city": "Par')), wire.chunk(wire.tc(0, args='is"}')),
        wire.chunk(wire.tc(1, cid("call_b"), "lookup", '{"key": "hei')), wire.chunk(wire.tc(1, args='ght"')),
        wire.chunk(wire.tc(2, cid("call_c"), "get_time", "{}")),
        wire.chunk(finish=finish), "[DONE]"))


def without_chat_extensions(message: dict) -> dict:
    """A Chat message without the documented provider extensions the openai SDK does not type:
    DeepSeek's ``reasoning_content`` and Gemini's ``tool_calls[].extra_content``."""
    message = {k: v for k, v in message.items() if k != "reasoning_content"}
    if "tool_calls" in message:
        message["tool_calls"] = [{k: v for k, v in t.items() if k != "extra_content"} for t in message["tool_calls"]]
    return message


def assistant_calls(*calls: tuple[str, str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                           for i, n, a in calls]}


def tool(cid: str, content: Any = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": content}


def _args_text(args: Any) -> str:
    return args if isinstance(args, str) else json.dumps(args)


def _rename(d: dict, old: str, new: str) -> dict:
    return {(new if k == old else k): v for k, v in d.items()}


# ---- the declarations against the SDK ----------------------------------------------------------------------------
def validate_openai_chat(fragment: dict) -> None:
    from openai.types.chat import (
        ChatCompletionAllowedToolChoiceParam,
        ChatCompletionAllowedToolsParam,
        ChatCompletionToolChoiceOptionParam,
        ChatCompletionToolParam,
    )
    from openai.types.chat.completion_create_params import CompletionCreateParamsBase
    from openai.types.shared_params import FunctionDefinition

    assert_keys(CompletionCreateParamsBase, fragment)
    for tool in fragment["tools"]:
        if tool["type"] == "custom":
            validate_chat_custom_tool(tool)
            continue
        TypeAdapter(ChatCompletionToolParam).validate_python(tool)
        assert_keys(ChatCompletionToolParam, tool)
        assert_keys(FunctionDefinition, tool["function"])
    choice = fragment["tool_choice"]
    TypeAdapter(ChatCompletionToolChoiceOptionParam).validate_python(choice)
    if isinstance(choice, dict) and choice["type"] in ("function", "custom"):
        validate_chat_named_choice(choice)
    elif isinstance(choice, dict):
        assert_keys(ChatCompletionAllowedToolChoiceParam, choice)
        assert_keys(ChatCompletionAllowedToolsParam, choice["allowed_tools"])
        for ref in choice["allowed_tools"]["tools"]:
            validate_chat_named_choice(ref)
    if "parallel_tool_calls" in fragment:
        assert isinstance(fragment["parallel_tool_calls"], bool)


def validate_chat_custom_tool(tool: dict) -> None:
    """A Chat custom tool: ``{"type": "custom", "custom": {name, description?, format?}}``, the grammar nested."""
    from openai.types.chat import ChatCompletionCustomToolParam, ChatCompletionToolUnionParam
    from openai.types.chat.chat_completion_custom_tool_param import (
        Custom,
        CustomFormatGrammar,
        CustomFormatGrammarGrammar,
        CustomFormatText,
    )

    TypeAdapter(ChatCompletionToolUnionParam).validate_python(tool)
    TypeAdapter(ChatCompletionCustomToolParam).validate_python(tool)
    assert_keys(ChatCompletionCustomToolParam, tool)
    assert_keys(Custom, tool["custom"])
    fmt = tool["custom"].get("format")
    if fmt is not None:
        assert_keys(CustomFormatGrammar if fmt["type"] == "grammar" else CustomFormatText, fmt)
        if fmt["type"] == "grammar":
            assert_keys(CustomFormatGrammarGrammar, fmt["grammar"])


def validate_chat_named_choice(ref: dict) -> None:
    """A Chat named tool choice (or allowed-tools entry), function or custom."""
    from openai.types.chat import ChatCompletionNamedToolChoiceCustomParam, ChatCompletionNamedToolChoiceParam

    named = ChatCompletionNamedToolChoiceCustomParam if ref["type"] == "custom" else ChatCompletionNamedToolChoiceParam
    TypeAdapter(named).validate_python(ref)
    assert_keys(named, ref)
    assert set(ref[ref["type"]]) == {"name"}


class ChatAdapter(Adapter):
    dialect = "openai-chat"
    stream_terminators = frozenset({"[DONE]"})
    terminator_needles = (b"[DONE]",)
    multi_choice = True
    choice_ids = (["call_0a"], ["call_1a", "call_1b"])

    # ---- streams -----------------------------------------------------------------------------------------------
    def cases(self, draw: Any, *, max_calls: int = 4, max_text: int = 20, clean: bool | None = True,
              stops: Sequence[str] | None = None) -> Case:
        calls = draw(calls_strategy(max_calls=max_calls, id_prefix="call_"))
        plan = draw(fragment_plan())
        text = draw(st.none() | unicode_text(max_text, 1))
        ensure_ascii = draw(st.booleans())
        newline = draw(st.sampled_from(NEWLINES))
        wire_ascii = draw(st.booleans())
        if stops is None:
            stops = CLEAN if clean else UNCLEAN if clean is False else CLEAN + UNCLEAN
        finish = draw(st.sampled_from(stops))
        events = chat_events(calls, text=text, finish=finish, plan=plan, ensure_ascii=ensure_ascii,
                             parallel_interleave=draw(st.booleans()), include_usage=draw(st.booleans()),
                             done=draw(st.booleans()))
        enc = encode_sse(events, newline=newline, ensure_ascii=wire_ascii)
        end = enc.end_of(lambda _n, p: isinstance(p, dict) and bool(p["choices"])
                         and p["choices"][0]["finish_reason"] is not None)
        return Case(self.dialect, enc, calls, [end] * len(calls), end, finish in CLEAN)

    def small_case(self) -> Case:
        calls = [("call_1", "a", {"k": "v😀"}), ("call_2", "b", {})]
        enc = encode_sse(chat_events(calls, fragment_sizes=(3,), parallel_interleave=True), newline="\r\n")
        end = enc.end_of(lambda _n, p: isinstance(p, dict) and bool(p["choices"])
                         and p["choices"][0]["finish_reason"] is not None)
        return Case(self.dialect, enc, calls, [end, end], end, True)

    def body(self, calls: Sequence[Call], *, response_id: str | None = "resp_1", text: str | None = None,
             custom: bool = False) -> bytes:
        msg: dict[str, Any] = {"role": "assistant", "content": text}
        if calls:
            msg["tool_calls"] = [
                {"id": cid, "type": "custom", "custom": {"name": name, "input": args}} if custom else
                {"id": cid, "type": "function", "function": {"name": name, "arguments": _args_text(args)}}
                for cid, name, args in calls]
        out: dict[str, Any] = {"object": "chat.completion", "model": "m",
                               "choices": [{"index": 0, "message": msg,
                                            "finish_reason": "tool_calls" if calls else "stop"}]}
        if response_id:
            out["id"] = response_id
        return json.dumps(out).encode()

    def choices_body(self, choices: Sequence[Sequence[Call]], *, response_id: str | None = "resp_1") -> bytes:
        def choice(i: int, calls: Sequence[Call]) -> dict[str, Any]:
            msg: dict[str, Any] = {"role": "assistant", "content": None}
            if calls:
                msg["tool_calls"] = [{"id": cid, "type": "function",
                                      "function": {"name": name, "arguments": _args_text(args)}}
                                     for cid, name, args in calls]
            return {"index": i, "message": msg, "finish_reason": "tool_calls" if calls else "stop"}

        out: dict[str, Any] = {"object": "chat.completion", "model": "m",
                               "choices": [choice(i, c) for i, c in enumerate(choices)]}
        if response_id:
            out["id"] = response_id
        return json.dumps(out).encode()

    def fuzz_seeds(self, rng: random.Random, k: int) -> list[tuple[str, str, bytes]]:
        from ..streamgen import chat_stream
        from ._fuzz import body_seeds, fuzz_calls

        out = []
        for i in range(k):
            calls = fuzz_calls(rng, "call_")
            plan = FragmentPlan(sizes=tuple(rng.randint(1, 24) for _ in range(3)),
                                order=tuple(rng.randint(0, 7) for _ in range(4)),
                                per_chunk=tuple(rng.randint(1, 3) for _ in range(2)))
            finish = rng.choice(["tool_calls", "tool_calls", "stop", "length", "content_filter", None])
            data = chat_stream(calls, text=rng.choice([None, "Let me check.", "é"]), finish=finish, plan=plan,
                               parallel_interleave=rng.random() < 0.5, include_usage=rng.random() < 0.7,
                               done=rng.random() < 0.85, newline=rng.choice(["\n", "\n", "\r\n", "\r"]),
                               wire_ascii=rng.random() < 0.3)
            out.append((f"gen:openai-chat:sse:{i}", "sse", data))
        choices = wire.sse(
            wire.chunk(wire.tc(0, "call_a", "get_weather", ""), choice=0),
            wire.chunk(wire.tc(0, "call_b", "search", '{"q":'), choice=1),
            wire.chunk(wire.tc(0, args='{"city": "Paris"}'), choice=0),
            wire.chunk(wire.tc(0, args='"x"}'), choice=1),
            wire.chunk(finish="tool_calls", choice=0), wire.chunk(finish="tool_calls", choice=1), "[DONE]")
        out.append(("gen:openai-chat:wire:choices", "sse", choices))
        return out + body_seeds(self, rng, max(4, k // 4), custom=True)

    def response_models(self) -> tuple[Callable[[Any], Any], Callable[[Any], Any], Callable[[Any], Any] | None]:
        from openai.types import ErrorObject
        from openai.types.chat import ChatCompletion, ChatCompletionChunk

        return (ChatCompletion.model_validate, ChatCompletionChunk.model_validate,
                lambda doc: ErrorObject.model_validate(doc["error"]))

    # ---- results -----------------------------------------------------------------------------------------------
    def turn(self) -> toolwire.Turn:
        return chat_turn()

    def cut_turn(self) -> toolwire.Turn:
        return chat_turn("length")

    def results_in(self, body: dict[str, Any]) -> list[Any]:
        return [m for m in body["messages"] if m["role"] == "tool"]

    def answered(self, encoded: Any) -> list[tuple[Any, Any, bool | None]]:
        return [(m["tool_call_id"], m["content"], None) for m in encoded]

    def history_shape(self, turn: toolwire.Turn, msgs: list[Any]) -> None:
        ids = [c.call_id for c in turn.calls]
        assert msgs[0]["role"] == "assistant" and [t["id"] for t in msgs[0]["tool_calls"]] == ids
        assert [m["tool_call_id"] for m in msgs[1:]] == ids

    def check_sdk(self, message: Any) -> None:
        from openai.types.chat import (
            ChatCompletionAssistantMessageParam,
            ChatCompletionMessageParam,
            ChatCompletionToolMessageParam,
        )

        message = without_chat_extensions(message)
        conforms(message, ChatCompletionMessageParam)
        if message["role"] == "tool":
            conforms(message, ChatCompletionToolMessageParam)
        elif message["role"] == "assistant":
            conforms(message, ChatCompletionAssistantMessageParam)

    def misspellings(self) -> dict[str, Callable[[list[Any]], list[Any]]]:
        return {"chat_tool_id": lambda e: [_rename(e[0], "tool_call_id", "tool_id")] + e[1:]}

    def two_choices(self) -> toolwire.Turn:
        """A Chat stream with ``n=2``, the chunks of the two choices interleaved: choice 0 calls get_weather,
        choice 1 says something and calls get_time and lookup."""
        return toolwire.parse("openai-chat", wire.sse(
            wire.chunk(wire.tc(0, "call_0a", "get_weather", '{"city": "Par'), choice=0),
            wire.chunk(content="Checking.", choice=1),
            wire.chunk(wire.tc(0, "call_1a", "get_time", "{}"), choice=1),
            wire.chunk(wire.tc(0, args='is"}'), choice=0),
            wire.chunk(wire.tc(1, "call_1b", "lookup", '{"key": "height"}'), choice=1),
            wire.chunk(finish="tool_calls", choice=0), wire.chunk(finish="tool_calls", choice=1), "[DONE]"))

    def replayed_ids(self, message: Any) -> list[str]:
        return [t["id"] for t in message.get("tool_calls", [])]

    def check_choices(self, turn: toolwire.Turn) -> None:
        assert turn.choices[1].assistant_message["content"] == "Checking."
        assert turn.choices[0].assistant_message["content"] is None

    def check_declaration(self, fragment: dict) -> None:
        validate_openai_chat(fragment)

    # ---- history repair ----------------------------------------------------------------------------------------
    def user(self, text: str) -> Any:
        return {"role": "user", "content": text}

    def well_formed(self, msgs: list[Any], echo_ids: bool = True) -> list[str]:
        problems, answered = [], set()
        for i, m in enumerate(msgs):
            if m.get("role") == "assistant" and m.get("tool_calls") is not None:
                ids = [t["id"] for t in m["tool_calls"]]
                after = [x.get("tool_call_id") for x in msgs[i + 1:i + 1 + len(ids)] if x.get("role") == "tool"]
                if after != ids:
                    problems.append(f"message {i}: results {after} for calls {ids}")
                answered.update(range(i + 1, i + 1 + len(ids)))
                for t in m["tool_calls"]:
                    if t.get("type", "function") == "function":
                        if not isinstance(json.loads(t["function"]["arguments"]), dict):
                            problems.append(f"message {i}: arguments not an object")
        problems += [f"message {i}: stray tool message" for i, m in enumerate(msgs)
                     if m.get("role") == "tool" and i not in answered]
        return problems

    def replayed_and_answered(self, msgs: list[Any]) -> tuple[list[tuple[Any, Any]], list[tuple[Any, Any]]]:
        calls = [(tc["id"], tc["function"]["name"]) for tc in msgs[0]["tool_calls"]]
        answers = [(m["tool_call_id"], None) for m in msgs[1:] if m.get("role") == "tool"]
        return calls, answers

    def call_ids(self, msgs: list[Any]) -> list[Any]:
        return [t["id"] for m in msgs if m.get("role") == "assistant" for t in m.get("tool_calls") or ()]

    def strip_results(self, msgs: list[Any]) -> list[Any]:
        return [m for m in msgs if m.get("role") != "tool"]

    def same_id_twice(self, results: int) -> list[Any]:
        return [{"role": "user", "content": "hi"}, assistant_calls(("dup", "f", "{}"), ("dup", "g", "{}")),
                *[tool("dup", f"r{k}") for k in range(results)]]

    def result_units(self, msgs: list[Any]) -> list[tuple[int, int | None]]:
        return [(i, None) for i, m in enumerate(msgs) if m.get("role") == "tool"]

    def orphan(self) -> Any:
        return {"role": "tool", "tool_call_id": "call_orphan", "content": "x"}

    def render_model(self, at: int) -> Any:
        return {"role": "assistant", "content": "thinking aloud"}

    def render_calls(self, calls: list[Any], extra: bool, at: int, arguments: Callable[[str, bool], Any]
                     ) -> list[Any]:
        tcs = []
        for cid, name, kind in calls:
            fn = {"name": name, **({"arguments": v} if (v := arguments(kind, True).get("v")) is not None else {})}
            tcs.append({**({"id": cid} if cid else {}), "type": "function", "function": fn})
        return [{"role": "assistant", "content": None, "tool_calls": tcs}]

    def render_results(self, results: list[Any], odd: bool) -> list[Any]:
        return [self.user("between") if r[0] == "text" else tool(r[1] or "zz", {"t": 1} if odd else "ok")
                for r in results]

    def with_usage(self, data: bytes, tokens: int) -> bytes:
        out = json.loads(data)
        out["usage"] = {"prompt_tokens": tokens, "completion_tokens": tokens, "total_tokens": tokens}
        return json.dumps(out).encode()


ADAPTER = ChatAdapter()
