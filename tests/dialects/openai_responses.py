"""The test adapter of OpenAI Responses (``openai-responses``): streams from the codec tests' item generators, whole
bodies, the three-call turn after a reasoning item, the official openai SDK's request and response types, and the
history of output items."""

from __future__ import annotations

import json
import random
import typing
from typing import Any, Callable, Sequence

import pydantic
from pydantic import TypeAdapter
from hypothesis import strategies as st

import toolwire

from .. import wire
from ..streamgen import Encoded
from ..test_codec_openai_responses import encode, function_item, items_strategy, stream
from ._adapter import Adapter, Call, Case
from ._fuzz import body_seeds, fuzz_calls, fuzz_jsonl, fuzz_split, fuzz_sse
from ._history import flat_well_formed
from ._sdk import assert_keys, conforms, unwrap

__all__ = ["ADAPTER", "responses_turn", "responses_body", "responses_member", "REASONING", "fcall", "out_", "RS",
           "UQ", "OUTPUTS", "CALLS"]

REASONING = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "weather first"}],
             "encrypted_content": "gAAAAB-encrypted-reasoning"}
RS = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc"}
UQ = {"type": "message", "role": "user", "content": "q"}
#: output items, and the call items they answer
OUTPUTS = {"function_call_output", "custom_tool_call_output", "local_shell_call_output", "shell_call_output",
           "apply_patch_call_output", "computer_call_output", "tool_search_output"}
CALLS = {"function_call", "custom_tool_call", "local_shell_call", "shell_call", "apply_patch_call", "computer_call"}
#: the terminator event of a call item, by item type
_TERMINATORS = {"response.function_call_arguments.done", "response.custom_tool_call_input.done"}


def _numbered(events: list[dict]) -> list[dict]:
    return [{**e, "sequence_number": i} for i, e in enumerate(events)]


def _fc_events(index: int, item_id: str, call_id: str, name: str, fragments: list[str]) -> list[dict]:
    item = {"type": "function_call", "id": item_id, "call_id": call_id, "name": name, "arguments": "",
            "status": "in_progress"}
    text = "".join(fragments)
    return ([{"type": "response.output_item.added", "output_index": index, "item": item}]
            + [{"type": "response.function_call_arguments.delta", "item_id": item_id, "output_index": index,
                "delta": f} for f in fragments]
            + [{"type": "response.function_call_arguments.done", "item_id": item_id, "output_index": index,
                "arguments": text},
               {"type": "response.output_item.done", "output_index": index,
                "item": {**item, "arguments": text, "status": "completed"}}])


def responses_turn(terminal: str = "completed") -> toolwire.Turn:
    """A Responses stream: a reasoning item (encrypted_content), then three function_call items."""
    base = {"id": "resp_1", "object": "response", "model": "gpt-test", "status": "in_progress", "output": []}
    body = ([{"type": "response.output_item.added", "output_index": 0,
              "item": {**REASONING, "summary": [], "encrypted_content": None}},
             {"type": "response.output_item.done", "output_index": 0, "item": REASONING}]
            + _fc_events(1, "fc_1", "call_a", "get_weather", ['{"city":', ' "Paris"}'])
            + _fc_events(2, "fc_2", "call_b", "lookup", ['{"key": "hei', 'ght"'])
            + _fc_events(3, "fc_3", "call_c", "get_time", ["{}"]))
    final = {**base, "status": terminal}
    if terminal == "incomplete":
        final["incomplete_details"] = {"reason": "max_output_tokens"}
    events = [{"type": "response.created", "response": base}] + body + [
        {"type": f"response.{terminal}", "response": final}]
    return toolwire.parse("openai-responses", wire.sse(*_numbered(events), events=True))


def responses_body(*items: dict, status: str = "completed") -> toolwire.Turn:
    """A non-streaming Responses body with these output items."""
    body = {"id": "resp_2", "object": "response", "status": status, "model": "gpt-test", "output": list(items)}
    return toolwire.parse("openai-responses", json.dumps(body).encode(), format="json")


def responses_member(item_type: str) -> Any:
    """The member of ``ResponseInputItemParam`` for an item ``type``."""
    from openai.types.responses import ResponseInputItemParam

    for member in typing.get_args(ResponseInputItemParam):
        hint = typing.get_type_hints(member, include_extras=True).get("type")
        if hint is not None and item_type in typing.get_args(unwrap(hint)):
            return member
    raise AssertionError(f"no ResponseInputItemParam member for {item_type!r}")


def fcall(cid: str, name: str = "f", args: str = "{}", iid: str | None = None) -> dict[str, Any]:
    return {"type": "function_call", "id": iid or f"fc_{cid}", "call_id": cid, "name": name, "arguments": args}


def out_(cid: str, output: str = "ok") -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": cid, "output": output}


def _rename(d: dict, old: str, new: str) -> dict:
    return {(new if k == old else k): v for k, v in d.items()}


def _args_text(args: Any) -> str:
    return args if isinstance(args, str) else json.dumps(args)


def fuzz_events(rng: random.Random) -> list[dict]:
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
                     "content_index": 0, "delta": f} for f in fuzz_split(text, rng)]
            whole = {**part, "text": text}
            evs += [{"type": "response.output_text.done", "item_id": iid, "output_index": index,
                     "content_index": 0, "text": text},
                    {"type": "response.content_part.done", "item_id": iid, "output_index": index,
                     "content_index": 0, "part": whole},
                    {"type": "response.output_item.done", "output_index": index,
                     "item": {**item, "status": "completed", "content": [whole]}}]
            items.append(evs)
        elif kind in ("call", "custom"):
            (cid, name, args), = fuzz_calls(rng, "call_", 1)
            custom = kind == "custom"
            text = ("patch: " + json.dumps(args)) if custom else json.dumps(args, ensure_ascii=rng.random() < 0.5)
            field, delta_type = ("input", "custom_tool_call_input") if custom else ("arguments",
                                                                                   "function_call_arguments")
            item = {"type": "custom_tool_call" if custom else "function_call", "id": iid, "call_id": cid,
                    "name": name, field: "", "status": "in_progress"}
            evs = [{"type": "response.output_item.added", "output_index": index, "item": item}]
            evs += [{"type": f"response.{delta_type}.delta", "item_id": iid, "output_index": index, "delta": f}
                    for f in fuzz_split(text, rng)]
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


# ---- the declarations against the SDK ----------------------------------------------------------------------------
def validate_responses_custom_tool(tool: dict) -> None:
    """A Responses custom tool: flat ``{"type": "custom", name, description?, format?}``, the grammar flat."""
    from openai.types.responses import CustomToolParam, ToolParam
    from openai.types.shared_params.custom_tool_input_format import Grammar, Text

    TypeAdapter(ToolParam).validate_python(tool)
    TypeAdapter(CustomToolParam).validate_python(tool)
    assert_keys(CustomToolParam, tool)
    fmt = tool.get("format")
    if fmt is not None:
        assert_keys(Grammar if fmt["type"] == "grammar" else Text, fmt)


def validate_openai_responses(fragment: dict) -> None:
    from openai.types.responses import (
        FunctionToolParam,
        ToolChoiceAllowedParam,
        ToolChoiceCustomParam,
        ToolChoiceFunctionParam,
        ToolParam,
    )
    from openai.types.responses.response_create_params import ResponseCreateParamsBase
    from openai.types.responses.response_create_params import ToolChoice as RToolChoice

    assert_keys(ResponseCreateParamsBase, fragment)
    for tool in fragment["tools"]:
        if tool["type"] == "custom":
            validate_responses_custom_tool(tool)
            continue
        TypeAdapter(ToolParam).validate_python(tool)
        TypeAdapter(FunctionToolParam).validate_python(tool)
        assert_keys(FunctionToolParam, tool)
        assert {"parameters", "strict"} <= set(tool)  # Required[Optional[...]] in the SDK
    named = {"function": ToolChoiceFunctionParam, "custom": ToolChoiceCustomParam}
    choice = fragment["tool_choice"]
    TypeAdapter(RToolChoice).validate_python(choice)
    if isinstance(choice, dict) and choice["type"] in named:
        assert_keys(named[choice["type"]], choice)
    elif isinstance(choice, dict):
        assert_keys(ToolChoiceAllowedParam, choice)
        for ref in choice["tools"]:
            TypeAdapter(named[ref["type"]]).validate_python(ref)
            assert_keys(named[ref["type"]], ref)
    if "parallel_tool_calls" in fragment:
        assert isinstance(fragment["parallel_tool_calls"], bool)


class ResponsesAdapter(Adapter):
    dialect = "openai-responses"
    stream_terminators = frozenset({"response.completed", "response.incomplete", "response.failed"})
    terminator_needles = (b"response.completed", b"response.incomplete", b"response.failed")
    undeclared = frozenset({
        # the Response object repeats the request's store flag; openai's Response model has no field for it
        ("*", "$.response.store"), ("whole", "$.store"),
        # stream obfuscation padding on delta events (openai's own include_obfuscation option describes it)
        ("*.delta", "$.obfuscation"),
        # the API reference's function_call_arguments.done names the function
        ("response.function_call_arguments.done", "$.name"),
    })

    # ---- streams -----------------------------------------------------------------------------------------------
    def cases(self, draw: Any, *, max_calls: int = 4, max_text: int = 20, clean: bool | None = True) -> Case:
        items = draw(items_strategy().filter(lambda its: sum(1 for k, _, _ in its if k in ("function", "custom"))
                                             <= max_calls))
        terminals = ("completed",) if clean else ("incomplete",) if clean is False else ("completed", "incomplete")
        terminal = draw(st.sampled_from(terminals))
        events = stream(*[evs for _, evs, _ in items], terminal=terminal)
        data, ends = encode(events, draw(st.sampled_from(["\n", "\r\n", "\r"])))
        calls, call_ends = [], []
        for kind, evs, call_id in items:
            if kind not in ("function", "custom"):
                continue
            item = evs[0]["item"]
            done = next(e for e in evs if e["type"] in _TERMINATORS)
            calls.append((call_id, item["name"], json.loads(done["arguments"]) if kind == "function" else None))
            call_ends.append(ends[next(i for i, e in enumerate(events) if e["type"] in _TERMINATORS
                                       and e["item_id"] == done["item_id"])])
        enc = Encoded(data, [(e["type"], e) for e in events], ends)
        return Case(self.dialect, enc, calls, call_ends, ends[-1], terminal == "completed")

    def small_case(self) -> Case:
        events = stream(function_item(0, "fc_1", "call_1", "a", json.dumps({"k": "v😀"}), (3,)),
                        function_item(1, "fc_2", "call_2", "b", "{}", (3,)))
        data, ends = encode(events, "\r\n")
        call_ends = [ends[i] for i, e in enumerate(events) if e["type"] in _TERMINATORS]
        return Case(self.dialect, Encoded(data, [(e["type"], e) for e in events], ends),
                    [("call_1", "a", {"k": "v😀"}), ("call_2", "b", {})], call_ends, ends[-1], True)

    def body(self, calls: Sequence[Call], *, response_id: str | None = "resp_1", text: str | None = None,
             custom: bool = False) -> bytes:
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
        out: dict[str, Any] = {"object": "response", "status": "completed", "model": "m", "output": items}
        if response_id:
            out["id"] = response_id
        return json.dumps(out).encode()

    def fuzz_seeds(self, rng: random.Random, k: int) -> list[tuple[str, str, bytes]]:
        out = []
        for i in range(k):
            evs = fuzz_events(rng)
            if rng.random() < 0.7:
                out.append((f"gen:openai-responses:sse:{i}", "sse", fuzz_sse(evs, sep=rng.choice(["\n", "\r\n"]))))
            else:
                out.append((f"gen:openai-responses:jsonl:{i}", "jsonl", fuzz_jsonl(evs)))
        return out + body_seeds(self, rng, max(4, k // 4), custom=True)

    def response_models(self) -> tuple[Callable[[Any], Any], Callable[[Any], Any], Callable[[Any], Any] | None]:
        from openai.types.responses import Response, ResponseStreamEvent

        return Response.model_validate, pydantic.TypeAdapter(ResponseStreamEvent).validate_python, None

    def is_error_payload(self, name: str | None, kind: str, doc: Any) -> bool:
        return False

    # ---- results -----------------------------------------------------------------------------------------------
    def turn(self) -> toolwire.Turn:
        return responses_turn()

    def cut_turn(self) -> toolwire.Turn:
        return responses_turn("incomplete")

    def results_in(self, body: dict[str, Any]) -> list[Any]:
        return [i for i in body["input"] if isinstance(i, dict) and i.get("type") == "function_call_output"]

    def answered(self, encoded: Any) -> list[tuple[Any, Any, bool | None]]:
        return [(i.get("call_id", i.get("id")), i.get("output"), None) for i in encoded]

    def history_shape(self, turn: toolwire.Turn, msgs: list[Any]) -> None:
        ids = [c.call_id for c in turn.calls]
        calls = [i["call_id"] for i in msgs if i.get("type") == "function_call"]
        outs = [i["call_id"] for i in msgs if i.get("type") == "function_call_output"]
        assert calls == ids and outs == ids and len(msgs) == 1 + 2 * len(ids)
        assert msgs[0] == REASONING  # the reasoning item first, verbatim (docs/failure-modes.md, 19)

    def check_sdk(self, message: Any) -> None:
        from openai.types.responses import ResponseInputItemParam

        if message.get("type", "message") != "message":  # three members share "message": the union decides
            conforms(message, responses_member(message["type"]))
        conforms(message, ResponseInputItemParam)

    def misspellings(self) -> dict[str, Callable[[list[Any]], list[Any]]]:
        return {"responses_callid": lambda e: [_rename(e[0], "call_id", "callid")],
                "responses_output_type": lambda e: [dict(e[0], type="function_output")]}

    def check_declaration(self, fragment: dict) -> None:
        validate_openai_responses(fragment)

    # ---- history repair ----------------------------------------------------------------------------------------
    def user(self, text: str) -> Any:
        return {"type": "message", "role": "user", "content": text}

    def well_formed(self, msgs: list[Any], echo_ids: bool = True) -> list[str]:
        return flat_well_formed(msgs, lambda x: x.get("type") in CALLS, lambda x: x["call_id"],
                                lambda x: x.get("type") in OUTPUTS, lambda x: x.get("call_id", x.get("id")),
                                lambda x: x.get("type", "message") == "message" and x.get("role") != "assistant")

    def replayed_and_answered(self, msgs: list[Any]) -> tuple[list[tuple[Any, Any]], list[tuple[Any, Any]]]:
        calls = [(i["call_id"], i["name"]) for i in msgs if i.get("type") == "function_call"]
        answers = [(i["call_id"], None) for i in msgs if i.get("type") == "function_call_output"]
        return calls, answers

    def call_ids(self, msgs: list[Any]) -> list[Any]:
        return [m["call_id"] for m in msgs if m.get("type") in CALLS]

    def strip_results(self, msgs: list[Any]) -> list[Any]:
        return [m for m in msgs if m.get("type") not in OUTPUTS]

    def same_id_twice(self, results: int) -> list[Any]:
        return [UQ, fcall("dup", "f", iid="fc_1"), fcall("dup", "g", iid="fc_2"),
                *[out_("dup", f"r{k}") for k in range(results)]]

    def result_units(self, msgs: list[Any]) -> list[tuple[int, int | None]]:
        return [(i, None) for i, m in enumerate(msgs) if m.get("type") in OUTPUTS]

    def orphan(self) -> Any:
        return {"type": "function_call_output", "call_id": "call_orphan", "output": "x"}

    def render_model(self, at: int) -> Any:
        return {**RS, "id": f"rs_{at}"}

    def render_calls(self, calls: list[Any], extra: bool, at: int, arguments: Callable[[str, bool], Any]
                     ) -> list[Any]:
        items: list[Any] = []
        if extra:
            items.append({**RS, "id": f"rs_{at}"})
        for k, (cid, name, kind) in enumerate(calls):
            a = arguments(kind, True)
            items.append({"type": "function_call", "id": f"fc_{at}_{k}", **({"call_id": cid} if cid else {}),
                          "name": name, **({"arguments": a["v"]} if a else {})})
        return items

    def render_results(self, results: list[Any], odd: bool) -> list[Any]:
        return [self.user("between") if r[0] == "text" else out_(r[1] or "zz") for r in results]

    def with_usage(self, data: bytes, tokens: int) -> bytes:
        out = json.loads(data)
        out["usage"] = {"input_tokens": tokens, "output_tokens": tokens}
        return json.dumps(out).encode()


ADAPTER = ResponsesAdapter()
