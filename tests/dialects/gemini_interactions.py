"""The test adapter of Gemini Interactions (``gemini-interactions``): streams from the codec tests' generator, whole
bodies, the three-call turn after a signed thought step, the google-genai SDK's Interactions types, and the history
(a list of steps) of function_call and function_result steps."""

from __future__ import annotations

import json
import random
import typing
from typing import Any, Callable, Sequence

import pydantic
from hypothesis import strategies as st

import toolwire

from ..streamgen import Encoded
from ..test_codec_gemini_interactions import (
    completed,
    created,
    encode,
    function_call,
    interaction_streams,
)
from ._adapter import SIG, Adapter, Call, Case
from ._fuzz import body_seeds, fuzz_calls, fuzz_jsonl, fuzz_split, fuzz_sse
from ._history import flat_well_formed
from ._sdk import assert_keys

__all__ = ["ADAPTER", "interactions_turn", "step_fc", "step_fr", "UI", "THOUGHT"]

CLEAN = ("requires_action", "completed")


def interactions_turn(status: str = "requires_action") -> toolwire.Turn:
    """An Interactions stream: a signed thought step, then three function_call steps streamed as fragments."""
    iid = "v1_interaction"

    def ev(t: str, **kw: Any) -> dict:
        return {"event_type": t, **kw}

    def call(index: int, id_: str, name: str, frags: list[str]) -> list[dict]:
        return ([ev("step.start", index=index, step={"type": "function_call", "id": id_, "name": name,
                                                     "arguments": {}})]
                + [ev("step.delta", index=index, delta={"type": "arguments_delta", "arguments": f}) for f in frags]
                + [ev("step.stop", index=index)])

    events = ([ev("interaction.created", interaction={"id": iid, "status": "in_progress"}),
               ev("step.start", index=0, step={"type": "thought"}),
               ev("step.delta", index=0, delta={"type": "thought_signature", "signature": SIG}),
               ev("step.stop", index=0)]
              + call(1, "fc_a", "get_weather", ['{"city":', '"Paris"}'])
              + call(2, "fc_b", "lookup", ['{"key": "hei', 'ght"'])
              + call(3, "fc_c", "get_time", ["{}"])
              + [ev("interaction.completed", interaction={"id": iid, "status": status})])
    lines = []
    for e in events:
        lines.append(f"event: {e['event_type']}\ndata: {json.dumps(e)}\n\n")
    lines.append("data: [DONE]\n\n")
    return toolwire.parse("gemini-interactions", "".join(lines).encode())


def step_fc(cid: str, name: str = "f", args: Any = None) -> dict[str, Any]:
    return {"type": "function_call", "id": cid, "name": name, "arguments": {} if args is None else args}


def step_fr(cid: str, result: Any = "ok", name: str = "f", **kw: Any) -> dict[str, Any]:
    return {"type": "function_result", "call_id": cid, "name": name, "result": result, **kw}


UI = {"type": "user_input", "content": [{"type": "text", "text": "q"}]}
THOUGHT = {"type": "thought", "signature": "c2ln"}


def _rename(d: dict, old: str, new: str) -> dict:
    return {(new if k == old else k): v for k, v in d.items()}


# ---- fuzz seeds ------------------------------------------------------------------------------------------------
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
            (cid, name, args), = fuzz_calls(rng, "fc_", 1)
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
                    for t in fuzz_split("Let me check é.", rng)]
        elif kind == "server":
            evs.append({"event_type": "step.start", "index": index, "step": {
                "type": "google_search_call", "id": f"gs_{index}", "arguments": {"queries": ["weather"]}}})
        else:
            (cid, name, args), = fuzz_calls(rng, "fc_", 1)
            text = json.dumps(args, ensure_ascii=rng.random() < 0.5)
            start_args = args if rng.random() < 0.2 else {}
            evs.append({"event_type": "step.start", "index": index,
                        "step": {"type": "function_call", "id": cid, "name": name, "arguments": start_args}})
            evs += [{"event_type": "step.delta", "index": index, "delta": {"type": "arguments_delta",
                                                                            "arguments": f}}
                    for f in fuzz_split(text, rng)]
        evs.append({"event_type": "step.stop", "index": index, "step_usage": {"total_tokens": 3}})
    status = rng.choice(["requires_action", "requires_action", "completed", "incomplete", "failed", None])
    if status is not None:
        interaction: dict[str, Any] = {"id": iid, "status": status, "usage": {"total_tokens": 7}}
        if status == "failed":
            interaction["error"] = {"code": "internal", "message": "boom"}
        evs.append({"event_type": "interaction.completed", "event_id": "e9", "interaction": interaction})
    return evs


# ---- the declarations against the SDK ----------------------------------------------------------------------------
def validate_gemini_interactions(fragment: dict) -> None:
    from google.genai._gaos.types.interactions import allowedtools, function, generationconfig, toolchoiceconfig

    assert set(fragment) == {"tools", "generation_config"}
    for tool in fragment["tools"]:
        function.Function.model_validate(tool)
        assert_keys(function.FunctionParam, tool)
        assert tool["type"] == "function"
    config = fragment["generation_config"]
    assert_keys(generationconfig.GenerationConfigParam, config)
    choice = config["tool_choice"]
    modes = set(typing.get_args(typing.get_args(allowedtools.ToolChoiceType)[0]))
    if isinstance(choice, str):
        assert choice in modes
    else:
        toolchoiceconfig.ToolChoiceConfig.model_validate(choice)
        assert_keys(toolchoiceconfig.ToolChoiceConfigParam, choice)
        assert_keys(allowedtools.AllowedToolsParam, choice["allowed_tools"])
        assert choice["allowed_tools"]["mode"] in modes
        assert all(isinstance(n, str) for n in choice["allowed_tools"]["tools"])


class InteractionsAdapter(Adapter):
    dialect = "gemini-interactions"
    stream_terminators = frozenset({"interaction.completed", "interaction.complete"})
    terminator_needles = (b"interaction.complete",)
    #: google-genai's model of the streamed interaction declares ``object``; its Interaction model does not
    undeclared = frozenset({("whole", "$.object")})

    # ---- streams -----------------------------------------------------------------------------------------------
    def cases(self, draw: Any, *, max_calls: int = 4, max_text: int = 20, clean: bool | None = True) -> Case:
        statuses = CLEAN if clean else ("incomplete",) if clean is False else CLEAN + ("incomplete",)
        gen = draw(interaction_streams().filter(
            lambda g: g.status in statuses and len(g.calls) <= max_calls and not any(  # client calls only
                e["event_type"] == "step.start" and e["step"]["type"].endswith("_call")
                and e["step"]["type"] != "function_call" for e in g.events)))
        data, ends = encode(gen.events, draw(st.sampled_from(["\n", "\r\n"])))
        enc = Encoded(data, [(e["event_type"], e) for e in gen.events], ends)
        return Case(self.dialect, enc, list(gen.calls), [ends[i] for i in gen.stops], ends[gen.completed_at],
                    gen.status in CLEAN)

    def small_case(self) -> Case:
        events = [created(), *function_call(0, "fc_1", "a", ['{"k": ', '"v😀"}']),
                  *function_call(1, "fc_2", "b", ["{}"]), completed("requires_action")]
        data, ends = encode(events, "\r\n")
        stops = [i for i, e in enumerate(events) if e["event_type"] == "step.stop"]
        return Case(self.dialect, Encoded(data, [(e["event_type"], e) for e in events], ends),
                    [("fc_1", "a", {"k": "v😀"}), ("fc_2", "b", {})], [ends[i] for i in stops], ends[-1], True)

    def body(self, calls: Sequence[Call], *, response_id: str | None = "resp_1", text: str | None = None,
             custom: bool = False) -> bytes:
        steps: list[dict[str, Any]] = []
        if text:
            steps.append({"type": "model_output", "content": [{"type": "text", "text": text}]})
        steps += [{"type": "function_call", "id": cid, "name": name, "arguments": args} for cid, name, args in calls]
        out: dict[str, Any] = {"status": "requires_action" if calls else "completed", "steps": steps}
        if response_id:
            out["id"] = response_id
        return json.dumps(out).encode()

    def fuzz_event_type(self, payload: dict[str, Any]) -> str | None:
        t = payload.get("event_type")
        return t if isinstance(t, str) else None

    def fuzz_seeds(self, rng: random.Random, k: int) -> list[tuple[str, str, bytes]]:
        out = []
        for i in range(k):
            evs = _interaction_events(rng)
            if rng.random() < 0.8:
                data = fuzz_sse(evs, sep=rng.choice(["\n", "\r\n"]), event_key="event_type",
                                done=rng.random() < 0.85)
                out.append((f"gen:gemini-interactions:sse:{i}", "sse", data))
            else:
                out.append((f"gen:gemini-interactions:jsonl:{i}", "jsonl", fuzz_jsonl(evs)))
        return out + body_seeds(self, rng, max(4, k // 4))

    def response_models(self) -> tuple[Callable[[Any], Any], Callable[[Any], Any], Callable[[Any], Any] | None]:
        import google.genai.interactions as gi

        return gi.Interaction.model_validate, pydantic.TypeAdapter(gi.InteractionSSEEvent).validate_python, None

    def is_error_payload(self, name: str | None, kind: str, doc: Any) -> bool:
        return False

    # ---- results -----------------------------------------------------------------------------------------------
    def turn(self) -> toolwire.Turn:
        return interactions_turn()

    def cut_turn(self) -> toolwire.Turn:
        return interactions_turn("incomplete")

    def results_in(self, body: dict[str, Any]) -> list[Any]:
        return [s for s in body["input"] if isinstance(s, dict) and s.get("type") == "function_result"]

    def answered(self, encoded: Any) -> list[tuple[Any, Any, bool | None]]:
        return [(s["call_id"], s["result"], s.get("is_error", False)) for s in encoded]

    def content_of(self, result: Any, expected_text: Callable[[Any], str]) -> Any:
        return result.content if isinstance(result.content, (str, dict)) else expected_text(result)

    def history_shape(self, turn: toolwire.Turn, msgs: list[Any]) -> None:
        ids = [c.call_id for c in turn.calls]
        fcs = [s["id"] for s in msgs if s["type"] == "function_call"]
        frs = [s["call_id"] for s in msgs if s["type"] == "function_result"]
        assert fcs == ids and frs == ids

    def check_sdk(self, message: Any) -> None:
        import google.genai.interactions as gi

        from ._sdk import conforms

        conforms(message, gi.StepParam, adapter=gi.Step)

    def misspellings(self) -> dict[str, Callable[[list[Any]], list[Any]]]:
        return {"interactions_id": lambda e: [_rename(e[0], "call_id", "id")]}

    def check_declaration(self, fragment: dict) -> None:
        validate_gemini_interactions(fragment)

    # ---- history repair ----------------------------------------------------------------------------------------
    def user(self, text: str) -> Any:
        return {"type": "user_input", "content": [{"type": "text", "text": text}]}

    def well_formed(self, msgs: list[Any], echo_ids: bool = True) -> list[str]:
        return flat_well_formed(msgs, lambda x: x["type"] == "function_call", lambda x: x["id"],
                                lambda x: x["type"] == "function_result", lambda x: x["call_id"],
                                lambda x: x["type"] == "user_input")

    def replayed_and_answered(self, msgs: list[Any]) -> tuple[list[tuple[Any, Any]], list[tuple[Any, Any]]]:
        calls = [(s["id"], s["name"]) for s in msgs if s.get("type") == "function_call"]
        answers = [(s["call_id"], s.get("name")) for s in msgs if s.get("type") == "function_result"]
        return calls, answers

    def call_ids(self, msgs: list[Any]) -> list[Any]:
        return [m["id"] for m in msgs if m["type"] == "function_call"]

    def strip_results(self, msgs: list[Any]) -> list[Any]:
        return [m for m in msgs if m.get("type") != "function_result"]

    def same_id_twice(self, results: int) -> list[Any]:
        return [UI, step_fc("dup"), step_fc("dup", "g"),
                *[step_fr("dup", f"r{k}", n) for k, n in zip(range(results), "fg")]]

    def result_units(self, msgs: list[Any]) -> list[tuple[int, int | None]]:
        return [(i, None) for i, m in enumerate(msgs) if m.get("type") == "function_result"]

    def orphan(self) -> Any:
        return {"type": "function_result", "call_id": "call_orphan", "result": "x"}

    def render_model(self, at: int) -> Any:
        return THOUGHT

    def render_calls(self, calls: list[Any], extra: bool, at: int, arguments: Callable[[str, bool], Any]
                     ) -> list[Any]:
        items: list[Any] = [THOUGHT] if extra else []
        for cid, name, kind in calls:
            a = arguments(kind, False)
            items.append({"type": "function_call", **({"id": cid} if cid else {}), "name": name,
                          **({"arguments": a["v"]} if a else {})})
        return items

    def render_results(self, results: list[Any], odd: bool) -> list[Any]:
        return [self.user("between") if r[0] == "text" else step_fr(r[1] or "zz", name=r[2]) for r in results]

    def check_history_entry(self, entry: Any) -> None:
        if entry["type"] != "user_input":  # the SDK's Step type has no user input
            self.check_sdk(entry)

    def with_usage(self, data: bytes, tokens: int) -> bytes:
        out = json.loads(data)
        out["usage"] = {"total_input_tokens": tokens, "total_output_tokens": tokens, "total_tokens": tokens}
        return json.dumps(out).encode()


ADAPTER = InteractionsAdapter()
