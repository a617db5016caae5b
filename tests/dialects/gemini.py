"""The test adapter of Gemini ``generateContent`` (``gemini``): streams from the codec tests' generator (whole
and Vertex streamed calls), whole bodies, the three-call turn with its thought signature, the google-genai SDK's
models, and the history of function call and function response parts."""

from __future__ import annotations

import json
import random
from typing import Any, Callable, Sequence

from pydantic.alias_generators import to_camel

import toolwire
from toolwire.codecs.results import MISSING_RESULT_TEXT

from ..streamgen import Encoded
from ..test_codec_gemini import chunk, encode_sse, gemini_streams
from ..test_codec_gemini import fc as part
from ._adapter import SIG, Adapter, Call, Case
from ._fuzz import body_seeds, fuzz_calls, fuzz_jsonl, fuzz_sse

__all__ = ["ADAPTER", "gemini_turn", "gemini_content", "fc", "fr", "gmissing", "MODEL", "HELLO"]

SIG1 = "c2lnbmF0dXJlLW9mLWNhbmRpZGF0ZS0x"  # base64, another candidate's signature


def gemini_turn(finish: str = "STOP", *, ids: bool = True) -> toolwire.Turn:
    """A Gemini stream: three functionCall parts in separate chunks, the signature on the first; the second's
    ``args`` is a string that does not parse. ``ids=False``: an older model that sends no ids."""
    def part(id_: str, name: str, args: Any, sig: str | None = None) -> dict:
        call = {"name": name, "args": args}
        if ids:
            call["id"] = id_
        out: dict[str, Any] = {"functionCall": call}
        if sig:
            out["thoughtSignature"] = sig
        return out

    def resp(p: dict, finish_reason: str | None = None) -> dict:
        cand: dict[str, Any] = {"content": {"role": "model", "parts": [p]}, "index": 0}
        if finish_reason:
            cand["finishReason"] = finish_reason
        return {"candidates": [cand], "modelVersion": "gemini-3-flash", "responseId": "gresp_1"}

    payloads = [resp(part("g_a", "get_weather", {"city": "Paris"}, SIG)),
                resp(part("g_b", "lookup", '{"key": "height"')),
                resp(part("g_c", "get_time", {}), finish)]
    return toolwire.parse("gemini", "".join(f"data: {json.dumps(p)}\r\n\r\n" for p in payloads).encode())


def gemini_content(content: dict) -> Any:
    """Validate a camelCase content with google-genai (unknown fields are refused) and check each
    functionResponse.response is an object."""
    from google.genai import types as gt

    model = gt.Content.model_validate_json(json.dumps(content))
    for part in content.get("parts", []):
        if "functionResponse" in part:
            assert isinstance(part["functionResponse"]["response"], dict)
    return model


def fc(name: str, id_: str | None = None, args: Any = None, **extra: Any) -> dict[str, Any]:
    call: dict[str, Any] = {"name": name, "args": {} if args is None else args}
    if id_:
        call["id"] = id_
    return {"functionCall": call, **extra}


def fr(name: str, id_: str | None = None, response: Any = None) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "response": {"output": "ok"} if response is None else response}
    if id_:
        body = {"id": id_, **body}
    return {"functionResponse": body}


def gmissing(name: str, id_: str | None = None) -> dict[str, Any]:
    return fr(name, id_, {"error": MISSING_RESULT_TEXT})


MODEL = {"role": "model", "parts": [fc("f", "g1", thoughtSignature="c2ln"), fc("g", "g2")]}
HELLO = {"role": "user", "parts": [{"text": "hi"}]}


def _genai_error(doc: Any) -> Any:
    """google-genai has no model for an error in a stream: it raises ``errors.APIError`` built from the payload,
    which must then carry the numeric code, the status name and the message."""
    from google.genai import errors as genai_errors

    assert set(doc) == {"error"} and set(doc["error"]) <= {"code", "message", "status", "details"}, doc
    err = genai_errors.APIError(doc["error"]["code"], doc)
    assert isinstance(err.code, int) and isinstance(err.status, str) and err.status.isupper(), doc
    assert isinstance(err.message, str) and err.message, doc
    return err


def _rename(d: dict, old: str, new: str) -> dict:
    return {(new if k == old else k): v for k, v in d.items()}


def _only(encoded: list[dict]) -> dict:
    assert isinstance(encoded, list) and len(encoded) == 1
    return encoded[0]


def _candidate_calls(calls: Sequence[Call]) -> list[dict]:
    parts = []
    for cid, name, args in calls:
        call: dict[str, Any] = {"name": name, "args": args}
        if cid:
            call["id"] = cid
        parts.append({"functionCall": call})
    return parts


# ---- fuzz seeds ------------------------------------------------------------------------------------------------
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
        (cid, name, args), = fuzz_calls(rng, "c", 1)
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


# ---- the declarations against the SDK ----------------------------------------------------------------------------
def _camel_fields(model: Any) -> set[str]:
    return {to_camel(name) for name in model.model_fields}


def validate_gemini(fragment: dict) -> None:
    from google.genai import types as gt

    assert set(fragment) <= {"tools", "toolConfig"}
    gt.GenerateContentConfig.model_validate(fragment)  # the same two names; unknown fields are refused
    for tool in fragment["tools"]:
        gt.Tool.model_validate(tool)
        assert set(tool) == {"functionDeclarations"}
        for declaration in tool["functionDeclarations"]:
            assert set(declaration) <= _camel_fields(gt.FunctionDeclaration)
            assert not {"parameters", "parametersJsonSchema"} <= set(declaration)  # mutually exclusive
    config = fragment["toolConfig"]
    gt.ToolConfig.model_validate(config)
    assert set(config) <= _camel_fields(gt.ToolConfig)
    calling = config["functionCallingConfig"]
    assert set(calling) <= _camel_fields(gt.FunctionCallingConfig) - {"streamFunctionCallArguments"}
    assert calling["mode"] in {m.value for m in gt.FunctionCallingConfigMode}
    if "allowedFunctionNames" in calling:
        assert calling["mode"] == "ANY"  # "Only set when the Mode is ANY"


class GeminiAdapter(Adapter):
    dialect = "gemini"
    stream_terminators = frozenset({"finish"})
    terminator_needles = (b"finishReason",)
    arguments_stream = False  # a call's arguments arrive whole (or as Vertex paths): no ArgumentsReceived
    multi_choice = True
    echo_ids_matter = True
    renamed_result_fixes = ("fixed_response_id",)
    surrogate_prefix = 3
    choice_ids = (["g_0a"], ["g_1a", "g_1b"])
    sim_modes = ("array",)  # streamGenerateContent without alt=sse: one JSON array, streamed

    # ---- streams -----------------------------------------------------------------------------------------------
    def cases(self, draw: Any, *, max_calls: int = 4, max_text: int = 20, clean: bool | None = True) -> Case:
        finishes = ("STOP",) if clean else ("MAX_TOKENS",) if clean is False else ("STOP", "MAX_TOKENS")
        gen = draw(gemini_streams().filter(lambda g: g.finish in finishes and len(g.calls) <= max_calls))
        data, ends = encode_sse(gen.payloads)
        call_ends = [ends[i] for i in gen.ends]
        enc = Encoded(data, [(None, p) for p in gen.payloads], ends)
        return Case(self.dialect, enc, list(gen.calls), call_ends, ends[gen.finish_at], gen.finish == "STOP")

    def small_case(self) -> Case:
        payloads = [chunk(part("a", {"k": "v😀"}, id="g_1")), chunk(part("b", {}, id="g_2")),
                    chunk({"text": ""}, finish="STOP")]
        data, ends = encode_sse(payloads)
        return Case(self.dialect, Encoded(data, [(None, p) for p in payloads], ends),
                    [("g_1", "a", {"k": "v😀"}), ("g_2", "b", {})], ends[:2], ends[2], True)

    def body(self, calls: Sequence[Call], *, response_id: str | None = "resp_1", text: str | None = None,
             custom: bool = False) -> bytes:
        parts: list[dict[str, Any]] = [{"text": text}] if text else []
        parts += _candidate_calls(calls)
        out: dict[str, Any] = {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}]}
        if response_id:
            out["responseId"] = response_id
        return json.dumps(out).encode()

    def choices_body(self, choices: Sequence[Sequence[Call]], *, response_id: str | None = "resp_1") -> bytes:
        out: dict[str, Any] = {"candidates": [
            {"index": i, "content": {"role": "model", "parts": _candidate_calls(calls)}, "finishReason": "STOP"}
            for i, calls in enumerate(choices)]}
        if response_id:
            out["responseId"] = response_id
        return json.dumps(out).encode()

    def fuzz_event_type(self, payload: dict[str, Any]) -> str | None:
        """``finish`` for a chunk that finishes candidate 0, ``chunk`` for any other."""
        cands = payload.get("candidates")
        if isinstance(cands, list):
            for c in cands:
                if isinstance(c, dict) and c.get("finishReason") and c.get("index", 0) in (0, None):
                    return "finish"
        return "chunk"

    def fuzz_seeds(self, rng: random.Random, k: int) -> list[tuple[str, str, bytes]]:
        out = []
        for i in range(k):
            payloads = _gemini_payloads(rng)
            r = rng.random()
            if r < 0.5:
                out.append((f"gen:gemini:sse:{i}", "sse", fuzz_sse(payloads, sep="\r\n", event_key=None)))
            elif r < 0.75:
                data = ("[" + "\n,".join(json.dumps(p, ensure_ascii=False) for p in payloads) + "\n]").encode()
                out.append((f"gen:gemini:array:{i}", "json", data))
            else:
                out.append((f"gen:gemini:jsonl:{i}", "jsonl", fuzz_jsonl(payloads)))
        return out + body_seeds(self, rng, max(4, k // 4), idless=True)

    def response_models(self) -> tuple[Callable[[Any], Any], Callable[[Any], Any], Callable[[Any], Any] | None]:
        from google.genai import types as gt

        return gt.GenerateContentResponse.model_validate, gt.GenerateContentResponse.model_validate, _genai_error

    # ---- results -----------------------------------------------------------------------------------------------
    def turn(self) -> toolwire.Turn:
        return gemini_turn()

    def cut_turn(self) -> toolwire.Turn:
        return gemini_turn("MAX_TOKENS")

    def results_in(self, body: dict[str, Any]) -> list[Any]:
        return [c for c in body["contents"] if any("functionResponse" in p for p in c["parts"])]

    def answered(self, encoded: Any) -> list[tuple[Any, Any, bool | None]]:
        out = []
        for p in _only(encoded)["parts"]:
            fr_ = p["functionResponse"]
            err = "error" in fr_["response"]
            out.append((fr_.get("id"), fr_["response"]["error" if err else "output"], err))
        return out

    def content_of(self, result: Any, expected_text: Callable[[Any], str]) -> Any:
        return result.content  # any JSON value, wrapped in the response object

    def check_answer(self, turn: toolwire.Turn, encoded: Any, results: list[Any]) -> None:
        assert _only(encoded)["role"] == "user"

    def check_json_content(self, encoded: Any, content: Any) -> None:
        assert all(p["functionResponse"]["response"] == {"output": content} for p in _only(encoded)["parts"])

    def history_shape(self, turn: toolwire.Turn, msgs: list[Any]) -> None:
        assert [m["role"] for m in msgs] == ["model", "user"]
        assert [p["functionResponse"]["id"] for p in msgs[1]["parts"]] == [c.call_id for c in turn.calls]

    def check_sdk(self, message: Any) -> None:
        gemini_content(message)

    def misspellings(self) -> dict[str, Callable[[list[Any]], list[Any]]]:
        return {
            "gemini_result_key": lambda e: [{**e[0], "parts": [{"functionResponse": _rename(
                e[0]["parts"][0]["functionResponse"], "response", "result")}]}],
            "gemini_response_text": lambda e: [{**e[0], "parts": [{"functionResponse": dict(
                e[0]["parts"][0]["functionResponse"], response="21 C")}]}],
        }

    def two_choices(self) -> toolwire.Turn:
        """A Gemini stream with two candidates: candidate 0 calls get_weather (signed), candidate 1 says something
        and calls get_time (signed with its own signature) and lookup, over two chunks."""
        def part(id_: str, name: str, args: dict, sig: str | None = None) -> dict:
            out: dict[str, Any] = {"functionCall": {"id": id_, "name": name, "args": args}}
            if sig:
                out["thoughtSignature"] = sig
            return out

        payloads = [
            {"candidates": [
                {"index": 0, "content": {"role": "model", "parts": [part("g_0a", "get_weather", {"city": "Paris"},
                                                                         SIG)]}},
                {"index": 1, "content": {"role": "model", "parts": [{"text": "Checking."},
                                                                    part("g_1a", "get_time", {}, SIG1)]}}],
             "modelVersion": "gemini-3-flash", "responseId": "gresp_2"},
            {"candidates": [
                {"index": 1, "content": {"role": "model", "parts": [part("g_1b", "lookup", {"key": "height"})]},
                 "finishReason": "STOP"},
                {"index": 0, "finishReason": "STOP"}],
             "modelVersion": "gemini-3-flash", "responseId": "gresp_2"},
        ]
        return toolwire.parse("gemini", "".join(f"data: {json.dumps(p)}\r\n\r\n" for p in payloads).encode())

    def replayed_ids(self, message: Any) -> list[str]:
        return [p["functionCall"]["id"] for p in message["parts"] if "functionCall" in p]

    def check_choices(self, turn: toolwire.Turn) -> None:
        second = turn.choices[1].assistant_message
        assert second["parts"][0] == {"text": "Checking."}
        assert second["parts"][1]["thoughtSignature"] == SIG1  # the signature stays on its own candidate's part
        assert "thoughtSignature" not in second["parts"][2]

    def check_declaration(self, fragment: dict) -> None:
        validate_gemini(fragment)

    # ---- history repair ----------------------------------------------------------------------------------------
    def user(self, text: str) -> Any:
        return {"role": "user", "parts": [{"text": text}]}

    def well_formed(self, msgs: list[Any], echo_ids: bool = True) -> list[str]:
        problems, allowed = [], set()
        for i, m in enumerate(msgs):
            if m["role"] != "model":
                continue
            calls = [p["functionCall"] for p in m["parts"] if "functionCall" in p]
            if not calls:
                continue
            if not all(isinstance(c.get("args", {}), dict) for c in calls):
                problems.append(f"content {i}: args not an object")
            nxt = msgs[i + 1] if i + 1 < len(msgs) else {"role": None, "parts": []}
            frs = [p.get("functionResponse") for p in nxt["parts"][:len(calls)]]
            want = [(c.get("id") if echo_ids else None, c.get("name")) for c in calls]
            got = [(f.get("id"), f.get("name")) if f else None for f in frs]
            if nxt["role"] != "user" or got != want:
                problems.append(f"content {i}: responses {got} for calls {want}")
            if not all(f and isinstance(f.get("response"), dict) for f in frs):
                problems.append(f"content {i + 1}: a response that is not an object")
            allowed.add(i + 1)
        problems += [f"content {i}: stray functionResponse" for i, m in enumerate(msgs)
                     if i not in allowed and any("functionResponse" in p for p in m["parts"])]
        return problems

    def replayed_and_answered(self, msgs: list[Any]) -> tuple[list[tuple[Any, Any]], list[tuple[Any, Any]]]:
        calls = [(p["functionCall"].get("id"), p["functionCall"]["name"]) for p in msgs[0]["parts"]
                 if "functionCall" in p]
        answers = [(p["functionResponse"].get("id"), p["functionResponse"]["name"]) for m in msgs[1:]
                   for p in m["parts"] if "functionResponse" in p]
        return calls, answers

    def call_ids(self, msgs: list[Any]) -> list[Any]:
        return [p["functionCall"].get("id") for m in msgs if m["role"] == "model" for p in m["parts"]
                if "functionCall" in p]

    def strip_results(self, msgs: list[Any]) -> list[Any]:
        return [m for m in msgs if not any("functionResponse" in p for p in m["parts"])]

    def same_id_twice(self, results: int) -> list[Any]:
        msgs = [HELLO, {"role": "model", "parts": [fc("f", "dup", thoughtSignature="c2ln"), fc("g", "dup")]}]
        return msgs + [{"role": "user", "parts": [fr(n, "dup") for n in "fg"[:results]]}] * bool(results)

    def result_units(self, msgs: list[Any]) -> list[tuple[int, int | None]]:
        return [(i, k) for i, m in enumerate(msgs) for k, p in enumerate(m["parts"]) if "functionResponse" in p]

    def wrap_result(self, unit: Any) -> Any:
        return {"role": "user", "parts": [unit]}

    def orphan(self) -> Any:
        return {"functionResponse": {"id": "g_orphan", "name": "nope", "response": {"output": 1}}}

    def clean_damaged(self, entry: Any) -> Any:
        if isinstance(entry, dict):
            entry["parts"] = [p for p in entry["parts"] if p is not None]
            if not entry["parts"]:
                return None
        return entry

    def render_model(self, at: int) -> Any:
        return {"role": "model", "parts": [{"text": "thinking aloud"}]}

    def render_calls(self, calls: list[Any], extra: bool, at: int, arguments: Callable[[str, bool], Any]
                     ) -> list[Any]:
        parts = []
        for k, (cid, name, kind) in enumerate(calls):
            a = arguments(kind, False)
            part: dict[str, Any] = {"functionCall": {**({"id": cid} if cid else {}), "name": name,
                                                     **({"args": a["v"]} if a else {})}}
            if extra and k == 0:
                part["thoughtSignature"] = "c2ln"
            parts.append(part)
        return [{"role": "model", "parts": parts}]

    def render_results(self, results: list[Any], odd: bool) -> list[Any]:
        return [{"role": "tool" if odd else "user", "parts": [
            fr(r[2], r[1], "x" if odd else None) if r[0] == "r" else {"text": "between"} for r in results]}]

    def with_usage(self, data: bytes, tokens: int) -> bytes:
        out = json.loads(data)
        out["usageMetadata"] = {"promptTokenCount": tokens, "candidatesTokenCount": tokens, "totalTokenCount": tokens}
        return json.dumps(out).encode()


ADAPTER = GeminiAdapter()
