"""The test adapter of Amazon Bedrock Converse (``bedrock-converse``): ConverseStream streams written as real AWS
event-stream frames (``encode_message``: both checksums, the padding ``p`` the service adds), whole Converse bodies,
the three-call turn after signed and redacted reasoning, botocore's service model as the SDK oracle
(``_bedrock_shapes``), and the history of toolUse and toolResult blocks."""

from __future__ import annotations

import json
import random
from typing import Any, Callable, Sequence

from hypothesis import strategies as st

import toolwire
from toolwire.codecs.eventstream import encode_message

from ..streamgen import Encoded, FragmentPlan, calls_strategy, fragment_plan, split_text, unicode_text
from . import _bedrock_shapes as shapes
from ._adapter import Adapter, Call, Case

__all__ = ["ADAPTER", "bedrock_events", "encode_events", "frame", "bedrock_turn", "tool_use", "tool_result",
           "REASONING", "REDACTED", "EXTRA"]

CLEAN = ("tool_use", "end_turn")
UNCLEAN = ("max_tokens", "guardrail_intervened", "malformed_tool_use")
PADDING = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

REASONING = {"reasoningContent": {"reasoningText": {"text": "The user wants the weather.",
                                                    "signature": "EqQBCkYIARgCKkA-sig"}}}
REDACTED = {"reasoningContent": {"redactedContent": "RW13S0FoZ0JFZ3ktcmVkYWN0ZWQ="}}

#: what the real service sends that botocore's model does not declare (seen in tests/fixtures/real/bedrock-converse):
#: usage.serverToolUsage, usage.cacheReadInputTokenCount and usage.cacheWriteInputTokenCount, and a client toolUse
#: typed "tool_use" (replayed as received)
EXTRA = frozenset({("TokenUsage", "serverToolUsage"), ("TokenUsage", "cacheReadInputTokenCount"),
                   ("TokenUsage", "cacheWriteInputTokenCount"), ("ToolUseType", "tool_use")})


def frame(event: str, payload: dict[str, Any], *, padding: int = 0, ensure_ascii: bool = False) -> bytes:
    """One ConverseStream event as AWS sends it: the three string headers, the member's JSON with its padding."""
    body = dict(payload)
    if padding:
        body["p"] = PADDING[:padding]
    return encode_message({":event-type": event, ":content-type": "application/json", ":message-type": "event"},
                          json.dumps(body, ensure_ascii=ensure_ascii, separators=(",", ":")).encode())


def exception(kind: str, message: str) -> bytes:
    """An in-stream exception message (``:message-type exception``)."""
    return encode_message({":exception-type": kind, ":content-type": "application/json",
                           ":message-type": "exception"}, json.dumps({"message": message}).encode())


def encode_events(events: Sequence[tuple[str, dict]], *, paddings: Sequence[int] = (0,),
                  ensure_ascii: bool = False) -> Encoded:
    """The frames of ``events``; each end is the offset just after its frame (its message checksum)."""
    out, ends = bytearray(), []
    for i, (name, payload) in enumerate(events):
        out += frame(name, payload, padding=paddings[i % len(paddings)], ensure_ascii=ensure_ascii)
        ends.append(len(out))
    return Encoded(bytes(out), list(events), ends)


def bedrock_events(calls: Sequence[Call], *, text: str | None = None, reasoning: bool = False,
                   stop_reason: str | None = "tool_use", plan: FragmentPlan | None = None,
                   empty_first: bool = True, metadata: bool = True, ensure_ascii: bool = False
                   ) -> list[tuple[str, dict]]:
    """The events of a ConverseStream: messageStart, an optional reasoning block, an optional text block (neither
    has a contentBlockStart), one toolUse block per call (its input in fragments, Claude's empty one first when
    ``empty_first``), messageStop and metadata."""
    sizes = (plan or FragmentPlan()).sizes
    events: list[tuple[str, dict]] = [("messageStart", {"role": "assistant"})]
    index = 0
    if reasoning:
        for piece in split_text("Which tools answer this? Weather first.", sizes):
            events.append(("contentBlockDelta", {"contentBlockIndex": index,
                                                 "delta": {"reasoningContent": {"text": piece}}}))
        events.append(("contentBlockDelta", {"contentBlockIndex": index,
                                             "delta": {"reasoningContent": {"signature": "EqQBCkgIARABGAIiQL0=="}}}))
        events.append(("contentBlockStop", {"contentBlockIndex": index}))
        index += 1
    if text:
        for piece in split_text(text, sizes):
            events.append(("contentBlockDelta", {"contentBlockIndex": index, "delta": {"text": piece}}))
        events.append(("contentBlockStop", {"contentBlockIndex": index}))
        index += 1
    for call_id, name, args in calls:
        events.append(("contentBlockStart", {"contentBlockIndex": index,
                                             "start": {"toolUse": {"toolUseId": call_id, "name": name}}}))
        if empty_first:
            events.append(("contentBlockDelta", {"contentBlockIndex": index, "delta": {"toolUse": {"input": ""}}}))
        raw = args if isinstance(args, str) else json.dumps(args, ensure_ascii=ensure_ascii)
        for piece in split_text(raw, sizes):
            events.append(("contentBlockDelta", {"contentBlockIndex": index, "delta": {"toolUse": {"input": piece}}}))
        events.append(("contentBlockStop", {"contentBlockIndex": index}))
        index += 1
    if stop_reason is not None:
        events.append(("messageStop", {"stopReason": stop_reason}))
    if metadata:
        events.append(("metadata", {"usage": {"inputTokens": 400, "outputTokens": 90, "totalTokens": 490},
                                    "metrics": {"latencyMs": 812}}))
    return events


def _call_ends(events: list[tuple[str, dict]], enc: Encoded, calls: Sequence[Call]) -> list[int]:
    block_of = {p["start"]["toolUse"]["toolUseId"]: p["contentBlockIndex"] for n, p in events
                if n == "contentBlockStart"}
    return [enc.end_of(lambda n, p, i=block_of[cid]: n == "contentBlockStop" and p["contentBlockIndex"] == i)
            for cid, _, _ in calls]


def bedrock_turn(stop_reason: str = "tool_use") -> toolwire.Turn:
    """A stream: signed reasoning, redacted reasoning, text, then three toolUse blocks (the second's input does
    not parse, the third's is empty)."""
    events = [("messageStart", {"role": "assistant"}),
              ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {
                  "text": REASONING["reasoningContent"]["reasoningText"]["text"]}}}),
              ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {
                  "signature": REASONING["reasoningContent"]["reasoningText"]["signature"]}}}),
              ("contentBlockStop", {"contentBlockIndex": 0}),
              ("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"reasoningContent": {
                  "redactedContent": REDACTED["reasoningContent"]["redactedContent"]}}}),
              ("contentBlockStop", {"contentBlockIndex": 1}),
              ("contentBlockDelta", {"contentBlockIndex": 2, "delta": {"text": "Let me check."}}),
              ("contentBlockStop", {"contentBlockIndex": 2})]
    blocks = [("tooluse_a", "get_weather", ['{"city": ', '"Paris"}']), ("tooluse_b", "lookup", ['{"key": "hei', 'ght"']),
              ("tooluse_c", "get_time", [""])]
    for i, (tid, name, pieces) in enumerate(blocks, start=3):
        events.append(("contentBlockStart", {"contentBlockIndex": i,
                                             "start": {"toolUse": {"toolUseId": tid, "name": name}}}))
        events += [("contentBlockDelta", {"contentBlockIndex": i, "delta": {"toolUse": {"input": p}}})
                   for p in pieces]
        events.append(("contentBlockStop", {"contentBlockIndex": i}))
    events += [("messageStop", {"stopReason": stop_reason}),
               ("metadata", {"usage": {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15},
                             "metrics": {"latencyMs": 100}})]
    return toolwire.parse("bedrock-converse", encode_events(events, paddings=(3, 11)).data)


def tool_use(tid: str, name: str = "f", inp: Any = None) -> dict[str, Any]:
    return {"toolUse": {"toolUseId": tid, "name": name, "input": {} if inp is None else inp}}


def tool_result(tid: str, text: str = "ok", status: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"toolUseId": tid, "content": [{"text": text}]}
    if status:
        out["status"] = status
    return {"toolResult": out}


def _only(encoded: list[dict]) -> dict:
    assert isinstance(encoded, list) and len(encoded) == 1
    return encoded[0]


def _rename(d: dict, old: str, new: str) -> dict:
    return {(new if k == old else k): v for k, v in d.items()}


def _flat(content: list[dict]) -> Any:
    """A toolResult's content as the generic suites compare it: one text block as its text, one json block as
    compact JSON text; anything else as it is."""
    if len(content) == 1 and set(content[0]) == {"text"}:
        return content[0]["text"]
    if len(content) == 1 and set(content[0]) == {"json"}:
        return json.dumps(content[0]["json"], separators=(",", ":"))
    return content


def _is_result(b: Any) -> bool:
    return isinstance(b, dict) and isinstance(b.get("toolResult"), dict)


def _is_call(b: Any) -> bool:
    return isinstance(b, dict) and isinstance(b.get("toolUse"), dict) and b["toolUse"].get("type") != \
        "server_tool_use"


class BedrockConverseAdapter(Adapter):
    dialect = "bedrock-converse"
    response_ids = False  # a Converse body has no response id (the x-amzn-RequestId header is it)
    stream_terminators = frozenset({"messageStop"})
    terminator_needles = (b"messageStop",)
    surrogate_prefix = 3
    undeclared = frozenset({("metadata", "usage.serverToolUsage"), ("whole", "usage.serverToolUsage"),
                            ("whole", "usage.cacheReadInputTokenCount"), ("whole", "usage.cacheWriteInputTokenCount"),
                            ("*", "toolUse.type")})

    # ---- streams -----------------------------------------------------------------------------------------------
    def cases(self, draw: Any, *, max_calls: int = 4, max_text: int = 20, clean: bool | None = True,
              stops: Sequence[str] | None = None) -> Case:
        calls = draw(calls_strategy(max_calls=max_calls, id_prefix="tooluse_"))
        plan = draw(fragment_plan())
        text = draw(st.none() | unicode_text(max_text, 1))
        if stops is None:
            stops = CLEAN if clean else UNCLEAN if clean is False else CLEAN + UNCLEAN
        stop = draw(st.sampled_from(stops))
        events = bedrock_events(calls, text=text, reasoning=draw(st.booleans()), stop_reason=stop, plan=plan,
                                empty_first=draw(st.booleans()), metadata=draw(st.booleans()),
                                ensure_ascii=draw(st.booleans()))
        enc = encode_events(events, paddings=tuple(draw(st.lists(st.integers(0, 62), min_size=1, max_size=4))))
        end = enc.end_of(lambda n, _p: n == "messageStop")
        return Case(self.dialect, enc, calls, _call_ends(events, enc, calls), end, stop in CLEAN)

    def small_case(self) -> Case:
        calls = [("tooluse_011", "a", {"k": "v😀"}), ("tooluse_012", "b", {})]
        events = bedrock_events(calls, plan=FragmentPlan(sizes=(3,)))
        enc = encode_events(events, paddings=(5,))
        return Case(self.dialect, enc, calls, _call_ends(events, enc, calls),
                    enc.end_of(lambda n, _p: n == "messageStop"), True)

    def body(self, calls: Sequence[Call], *, response_id: str | None = "resp_1", text: str | None = None,
             custom: bool = False) -> bytes:
        """A Converse body (Converse has no response id: ``response_id`` is not sent; no usage, which the generic
        suites expect of a body)."""
        content: list[dict[str, Any]] = [{"text": text}] if text else []
        content += [{"toolUse": {"toolUseId": cid, "name": name, "input": args}} for cid, name, args in calls]
        return json.dumps({"output": {"message": {"role": "assistant", "content": content}},
                           "stopReason": "tool_use" if calls else "end_turn", "metrics": {"latencyMs": 120}}
                          ).encode()

    def fuzz_seeds(self, rng: random.Random, k: int) -> list[tuple[str, str, bytes]]:
        from ._fuzz import body_seeds, fuzz_calls, fuzz_jsonl

        out = []
        for i in range(k):
            calls = fuzz_calls(rng, "tooluse_")
            plan = FragmentPlan(sizes=tuple(rng.randint(1, 24) for _ in range(3)))
            events = bedrock_events(calls, text=rng.choice([None, "Checking.", "ü"]), reasoning=rng.random() < 0.3,
                                    stop_reason=rng.choice(["tool_use", "tool_use", "end_turn", "max_tokens", None]),
                                    plan=plan, empty_first=rng.random() < 0.5, metadata=rng.random() < 0.8)
            data = encode_events(events, paddings=(rng.randint(0, 62),)).data
            if rng.random() < 0.1:
                data += exception(rng.choice(["throttlingException", "modelStreamErrorException"]), "try again")
            out.append((f"gen:bedrock-converse:eventstream:{i}", "eventstream", data))
        sdk = bedrock_events([("tooluse_1", "f", {"a": [1, 2]}), ("tooluse_2", "g", {})], text="Looking.")
        out.append(("gen:bedrock-converse:jsonl:sdk", "jsonl", fuzz_jsonl([{n: p} for n, p in sdk])))
        return out + body_seeds(self, rng, max(4, k // 4))

    def fuzz_event_type(self, payload: dict[str, Any]) -> str | None:
        """The SDK's form: the event is the payload's one key."""
        return next(iter(payload)) if len(payload) == 1 else None

    def response_models(self) -> tuple[Callable[[Any], Any], Callable[[Any], Any], Callable[[Any], Any] | None]:
        """botocore's shapes: a whole ConverseResponse; a streamed event in the SDK's form ``{name: member}``; an
        error body ``{"message"}``."""
        return (lambda doc: shapes.check(doc, "ConverseResponse", extra=EXTRA),
                lambda doc: shapes.check(doc, "ConverseStreamOutput", extra=EXTRA),
                lambda doc: shapes.check(doc, "ValidationException"))

    def is_error_payload(self, name: str | None, kind: str, doc: Any) -> bool:
        return kind == "exception"

    # ---- declarations ------------------------------------------------------------------------------------------
    def check_declaration(self, fragment: dict) -> None:
        assert set(fragment) == {"toolConfig"}, fragment
        shapes.validate_request({"modelId": "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
                                 "messages": [{"role": "user", "content": [{"text": "hi"}]}], **fragment},
                                "ConverseRequest")

    # ---- results -----------------------------------------------------------------------------------------------
    def turn(self) -> toolwire.Turn:
        return bedrock_turn()

    def cut_turn(self) -> toolwire.Turn:
        return bedrock_turn("max_tokens")

    def results_in(self, body: dict[str, Any]) -> list[Any]:
        return [m for m in body["messages"] if m["role"] == "user"
                and any(isinstance(b, dict) and "toolResult" in b for b in m["content"])]

    def answered(self, encoded: Any) -> list[tuple[Any, Any, bool | None]]:
        return [(b["toolResult"]["toolUseId"], _flat(b["toolResult"]["content"]),
                 b["toolResult"]["status"] == "error") for b in _only(encoded)["content"]]

    def check_answer(self, turn: toolwire.Turn, encoded: Any, results: list[Any]) -> None:
        message = _only(encoded)
        assert message["role"] == "user"
        assert all(set(b) == {"toolResult"} for b in message["content"])
        for block in message["content"]:
            content = block["toolResult"]["content"]
            assert content and all(len(c) == 1 for c in content)
            if block["toolResult"]["status"] == "error":
                assert [set(c) for c in content] == [{"text"}] and content[0]["text"].strip()

    def check_json_content(self, encoded: Any, content: Any) -> None:
        """An object is a json block; any other value its JSON text (a string as it is)."""
        for block in _only(encoded)["content"]:
            got = block["toolResult"]["content"]
            if isinstance(content, dict):
                assert got == [{"json": content}]
            else:
                assert got == [{"text": content if isinstance(content, str) else
                                json.dumps(content, separators=(",", ":"))}]

    def history_shape(self, turn: toolwire.Turn, msgs: list[Any]) -> None:
        ids = [c.call_id for c in turn.calls]
        assert [m["role"] for m in msgs] == ["assistant", "user"]
        assert [b["toolUse"]["toolUseId"] for b in msgs[0]["content"] if _is_call(b)] == ids
        assert [b["toolResult"]["toolUseId"] for b in msgs[1]["content"]] == ids
        assert msgs[0]["content"][:2] == [REASONING, REDACTED]

    native_types = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf"})

    def media_of(self, message: Any) -> list[tuple[str, str]]:
        out = []
        for block in message["content"]:
            for item in block["toolResult"]["content"]:
                if "image" in item:
                    out.append(("image/" + item["image"]["format"], item["image"]["source"]["bytes"]))
                elif "document" in item:
                    assert item["document"]["format"] == "pdf"
                    out.append(("application/pdf", item["document"]["source"]["bytes"]))
        return out

    def structured_text(self, encoded: Any) -> str:
        [item] = _only(encoded)["content"][0]["toolResult"]["content"]
        return item["text"]

    def first_text(self, encoded: Any) -> str:
        return _only(encoded)["content"][0]["toolResult"]["content"][0]["text"]

    def error_flagged(self, encoded: Any) -> bool:
        return _only(encoded)["content"][0]["toolResult"]["status"] == "error"

    def replayed_arguments(self, msgs: list[Any]) -> list[Any]:
        return [b["toolUse"]["input"] for b in msgs[0]["content"] if _is_call(b)]

    def poison_arguments(self, msgs: list[Any], raw: str) -> None:
        [b for b in msgs[0]["content"] if _is_call(b)][1]["toolUse"]["input"] = raw

    def check_sdk(self, message: Any) -> None:
        shapes.validate_request(message, "Message")

    def misspellings(self) -> dict[str, Callable[[list[Any]], list[Any]]]:
        def rename_id(e: list[Any]) -> list[Any]:
            first = e[0]["content"][0]
            return [{**e[0], "content": [{"toolResult": _rename(first["toolResult"], "toolUseId", "toolUseID")}]}]

        def bad_status(e: list[Any]) -> list[Any]:
            first = e[0]["content"][0]
            return [{**e[0], "content": [{"toolResult": {**first["toolResult"], "status": "failed"}}]}]

        return {"bedrock_tool_use_id": rename_id, "bedrock_status": bad_status}

    # ---- history repair ----------------------------------------------------------------------------------------
    def user(self, text: str) -> Any:
        return {"role": "user", "content": [{"text": text}]}

    def well_formed(self, msgs: list[Any], echo_ids: bool = True) -> list[str]:
        problems, allowed = [], set()
        for i, m in enumerate(msgs):
            blocks = m["content"] if isinstance(m.get("content"), list) else []
            if m["role"] == "assistant":
                ids = [b["toolUse"]["toolUseId"] for b in blocks if _is_call(b)]
                if not all(isinstance(b["toolUse"]["input"], dict) for b in blocks if _is_call(b)):
                    problems.append(f"message {i}: input not an object")
                if ids:
                    nxt = msgs[i + 1] if i + 1 < len(msgs) else {"role": None, "content": []}
                    got = [b.get("toolResult", {}).get("toolUseId") for b in nxt["content"][:len(ids)]] \
                        if nxt["role"] == "user" else []
                    if got != ids:
                        problems.append(f"message {i}: results {got} for calls {ids}")
                    if any(_is_result(b) for b in nxt["content"][len(ids):]):
                        problems.append(f"message {i + 1}: a toolResult after other content")
                    allowed.add(i + 1)
        problems += [f"message {i}: stray toolResult" for i, m in enumerate(msgs) if i not in allowed
                     and m["role"] == "user" and isinstance(m.get("content"), list)
                     and any(_is_result(b) for b in m["content"])]
        return problems

    def replayed_and_answered(self, msgs: list[Any]) -> tuple[list[tuple[Any, Any]], list[tuple[Any, Any]]]:
        calls = [(b["toolUse"]["toolUseId"], b["toolUse"]["name"]) for b in msgs[0]["content"] if _is_call(b)]
        answers = [(b["toolResult"]["toolUseId"], None) for m in msgs[1:] for b in m["content"] if _is_result(b)]
        return calls, answers

    def call_ids(self, msgs: list[Any]) -> list[Any]:
        return [b["toolUse"]["toolUseId"] for m in msgs if m["role"] == "assistant"
                and isinstance(m["content"], list) for b in m["content"] if _is_call(b)]

    def strip_results(self, msgs: list[Any]) -> list[Any]:
        return [m for m in msgs if not (m["role"] == "user" and isinstance(m["content"], list)
                                        and any(_is_result(b) for b in m["content"]))]

    def same_id_twice(self, results: int) -> list[Any]:
        msgs = [self.user("hi"), {"role": "assistant", "content": [tool_use("dup"), tool_use("dup", "g")]}]
        return msgs + [{"role": "user", "content": [tool_result("dup", f"r{k}") for k in range(results)]}] * bool(
            results)

    def result_units(self, msgs: list[Any]) -> list[tuple[int, int | None]]:
        return [(i, k) for i, m in enumerate(msgs) if m["role"] == "user" and isinstance(m.get("content"), list)
                for k, b in enumerate(m["content"]) if _is_result(b)]

    def wrap_result(self, unit: Any) -> Any:
        return {"role": "user", "content": [unit]}

    def orphan(self) -> Any:
        return tool_result("tooluse_orphan", "x")

    def clean_damaged(self, entry: Any) -> Any:
        if isinstance(entry, dict) and isinstance(entry.get("content"), list):
            entry["content"] = [b for b in entry["content"] if b is not None]
            if not entry["content"]:
                return None
        return entry

    def render_model(self, at: int) -> Any:
        return {"role": "assistant", "content": [{"text": "thinking aloud"}]}

    def render_calls(self, calls: list[Any], extra: bool, at: int, arguments: Callable[[str, bool], Any]
                     ) -> list[Any]:
        blocks: list[Any] = [{"text": "calling"}] if extra else []
        for cid, name, kind in calls:
            a = arguments(kind, False)
            blocks.append({"toolUse": {**({"toolUseId": cid} if cid else {}), "name": name,
                                       **({"input": a["v"]} if a else {})}})
        return [{"role": "assistant", "content": blocks}]

    def render_results(self, results: list[Any], odd: bool) -> list[Any]:
        return [{"role": "user", "content": [
            tool_result(r[1] or "zz") if r[0] == "r" else {"text": "between"} for r in results]}]

    def with_usage(self, data: bytes, tokens: int) -> bytes:
        out = json.loads(data)
        out["usage"] = {"inputTokens": tokens, "outputTokens": tokens, "totalTokens": tokens}
        return json.dumps(out).encode()


ADAPTER = BedrockConverseAdapter()
