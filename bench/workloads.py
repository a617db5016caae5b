"""Deterministic (seeded) streams for every dialect, in its exact wire format.

A workload is a list of tool calls (name, id, arguments object); ``render(dialect, calls, interleave)`` turns it
into the bytes a provider would send, and ``chunked`` cuts those bytes into network-like chunks of 1 to 4 KiB.
Argument text is split into fragments of 4 to 8 characters (about one token each). Every stream ends cleanly:
Chat ``finish_reason`` + usage chunk + ``[DONE]``; Anthropic ``message_delta`` + ``message_stop``; Responses
``response.completed``; Gemini ``finishReason: STOP``; Interactions ``interaction.completed`` + ``[DONE]``;
Bedrock ``messageStop`` + ``metadata``, in AWS event-stream binary frames (with their CRC32s) instead of SSE.

Gemini ``small`` and ``parallel`` use the Gemini API form (each ``functionCall`` whole, ``args`` an object, one
per chunk); Gemini ``large`` uses the Vertex streamed form (``partialArgs`` ``stringValue`` fragments of one
``jsonPath`` with ``willContinue``, closed by an empty ``functionCall: {}``), with ``\\r\\n\\r\\n`` separators.
"""

from __future__ import annotations

import itertools
import random
import struct
import zlib
from dataclasses import dataclass
from typing import Any, Iterator

import msgspec

__all__ = ["DIALECTS", "Call", "Workload", "make_calls", "render", "chunked", "build", "ChatManyCalls"]

#: every dialect the bench knows, in table order (toolwire may not have registered all of them yet)
DIALECTS = ("openai-chat", "openai-responses", "anthropic", "gemini", "gemini-interactions", "bedrock-converse")

#: dialects whose parallel calls are interleaved on the wire (the others stream one call after the other)
INTERLEAVED = {"openai-chat", "openai-responses", "gemini-interactions"}

_enc = msgspec.json.encode

_WORDS = (
    "the", "tool", "call", "stream", "parser", "bytes", "fragment", "state", "machine", "argument", "value",
    "index", "delta", "event", "message", "provider", "model", "turn", "schema", "object", "string", "number",
    "say \"hi\"", "tab\there", "back\\slash", "naïve", "café", "東京", "Zürich", "emoji🙂", "<tag>", "a&b",
    "x", "of", "to", "in", "and", "for", "with", "on", "at", "by", "from",
)


@dataclass(frozen=True)
class Call:
    call_id: str
    name: str
    args: dict[str, Any]
    text: str  # the arguments as JSON text (what string-argument dialects stream)


@dataclass
class Workload:
    dialect: str
    name: str
    calls: list[Call]
    stream_bytes: int
    chunks: list[bytes]

    @property
    def arg_bytes(self) -> int:
        return sum(len(c.text.encode()) for c in self.calls)


def _text(rng: random.Random, size: int) -> str:
    """About ``size`` characters of words, newlines, quotes, backslashes and non-ASCII text."""
    out: list[str] = []
    n = 0
    while n < size:
        words = rng.choices(_WORDS, k=4096)
        for i in range(0, 4096, 12):
            line = " ".join(words[i:i + 12]) + "\n"
            out.append(line)
            n += len(line)
            if n >= size:
                break
    return "".join(out)[:size]


def make_calls(rng: random.Random, count: int, arg_size: int, *, large: bool = False) -> list[Call]:
    """``count`` calls whose JSON argument text is about ``arg_size`` bytes each."""
    calls = []
    for i in range(count):
        if large:
            # one string at one JSON path (the Vertex streamed form needs a single path)
            args: dict[str, Any] = {"content": _text(rng, arg_size)}
        else:
            args = {"path": f"src/pkg/module_{i}.py", "line": rng.randint(1, 5000), "overwrite": bool(i % 2),
                    "content": ""}
            overhead = len(_enc(args))
            args["content"] = _text(rng, max(8, arg_size - overhead))
        # trim to the byte budget: non-ASCII characters and escapes make the JSON text longer than the text
        text = _enc(args).decode()
        excess = len(text.encode()) - arg_size
        while excess > 16 and args["content"]:
            args["content"] = args["content"][: max(0, len(args["content"]) - excess)]
            text = _enc(args).decode()
            excess = len(text.encode()) - arg_size
        calls.append(Call(call_id=f"call_{rng.getrandbits(64):016x}", name="write_file" if i % 3 else "read_file",
                          args=args, text=text))
    return calls


class _Sizes:
    """A cycle of seeded random sizes (fast, deterministic)."""

    def __init__(self, rng: random.Random, lo: int, hi: int, n: int = 8192) -> None:
        self._it = itertools.cycle([rng.randint(lo, hi) for _ in range(n)])

    def __next__(self) -> int:
        return next(self._it)


def _fragments(text: str, sizes: _Sizes) -> list[str]:
    out = []
    i = 0
    n = len(text)
    while i < n:
        j = i + next(sizes)
        out.append(text[i:j])
        i = j
    return out


def _ifragments(text: str, sizes: _Sizes) -> Iterator[str]:
    i = 0
    n = len(text)
    while i < n:
        j = i + next(sizes)
        yield text[i:j]
        i = j


def _interleave(per_call: list[list[Any]], interleave: bool) -> Iterator[tuple[int, Any]]:
    """(call number, fragment) in wire order: round-robin across calls, or one call after the other."""
    if not interleave:
        for k, frags in enumerate(per_call):
            for f in frags:
                yield k, f
        return
    its = [iter(f) for f in per_call]
    live = list(range(len(its)))
    while live:
        nxt = []
        for k in live:
            f = next(its[k], None)
            if f is None:
                continue
            yield k, f
            nxt.append(k)
        live = nxt


# ---- OpenAI Chat Completions (A3) ---------------------------------------------------------------------------
_CHAT_HEAD = (b'data: {"id":"chatcmpl-BENCH7x","object":"chat.completion.chunk","created":1760000000,'
              b'"model":"gpt-4.1-2025-04-14","service_tier":"default","system_fingerprint":"fp_51e1070cf2","choices":')


def _chat(calls: list[Call], interleave: bool, sizes: _Sizes, obf: list[bytes]) -> Iterator[bytes]:
    ob = itertools.cycle(obf)
    head = _CHAT_HEAD
    yield head + (b'[{"index":0,"delta":{"role":"assistant","content":null,"refusal":null},"logprobs":null,'
                  b'"finish_reason":null}],"usage":null,"obfuscation":"' + next(ob) + b'"}\n\n')
    per_call = [_fragments(c.text, sizes) for c in calls]
    started = [False] * len(calls)
    for k, frag in _interleave(per_call, interleave):
        if not started[k]:
            started[k] = True
            c = calls[k]
            yield head + (b'[{"index":0,"delta":{"tool_calls":[{"index":%d,"id":%s,"type":"function","function":'
                          b'{"name":%s,"arguments":""}}]},"logprobs":null,"finish_reason":null}],"usage":null,'
                          b'"obfuscation":"%s"}\n\n' % (k, _enc(c.call_id), _enc(c.name), next(ob)))
        yield head + (b'[{"index":0,"delta":{"tool_calls":[{"index":%d,"function":{"arguments":%s}}]},'
                      b'"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"%s"}\n\n'
                      % (k, _enc(frag), next(ob)))
    yield head + b'[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null}\n\n'
    yield head + (b'[],"usage":{"prompt_tokens":812,"completion_tokens":%d,"total_tokens":%d,'
                  b'"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}'
                  b'\n\n' % (sum(map(len, per_call)), 812 + sum(map(len, per_call))))
    yield b"data: [DONE]\n\n"


# ---- OpenAI Responses (B3) ----------------------------------------------------------------------------------
def _resp_item(c: Call, item_id: str, status: str, arguments: str) -> dict[str, Any]:
    return {"id": item_id, "type": "function_call", "status": status, "arguments": arguments,
            "call_id": c.call_id, "name": c.name}


def _responses(calls: list[Call], interleave: bool, sizes: _Sizes, obf: list[bytes]) -> Iterator[bytes]:
    ob = itertools.cycle(obf)
    seq = itertools.count()
    base = {"id": "resp_0bench7x", "object": "response", "created_at": 1760000000, "status": "in_progress",
            "background": False, "error": None, "incomplete_details": None, "instructions": None,
            "max_output_tokens": None, "model": "gpt-5-2025-08-07", "output": [], "parallel_tool_calls": True,
            "previous_response_id": None, "reasoning": {"effort": "medium", "summary": None}, "store": True,
            "temperature": 1.0, "text": {"format": {"type": "text"}, "verbosity": "medium"}, "tool_choice": "auto",
            "tools": [{"type": "function", "name": n, "description": "bench tool", "parameters": {"type": "object"},
                       "strict": False} for n in ("read_file", "write_file")],
            "top_p": 1.0, "truncation": "disabled", "usage": None, "user": None, "metadata": {}}

    def ev(name: str, body: dict[str, Any]) -> bytes:
        payload = {"type": name, "sequence_number": next(seq), **body}
        return b"event: " + name.encode() + b"\ndata: " + _enc(payload) + b"\n\n"

    yield ev("response.created", {"response": base})
    yield ev("response.in_progress", {"response": base})
    item_ids = [f"fc_{k:02d}{c.call_id[5:]}" for k, c in enumerate(calls)]
    per_call = [_fragments(c.text, sizes) for c in calls]
    started = [False] * len(calls)
    left = [len(f) for f in per_call]

    def added(k: int) -> bytes:
        return ev("response.output_item.added",
                  {"output_index": k, "item": _resp_item(calls[k], item_ids[k], "in_progress", "")})

    def done(k: int) -> Iterator[bytes]:
        c = calls[k]
        yield ev("response.function_call_arguments.done",
                 {"item_id": item_ids[k], "output_index": k, "name": c.name, "arguments": c.text})
        yield ev("response.output_item.done",
                 {"output_index": k, "item": _resp_item(c, item_ids[k], "completed", c.text)})

    for k, frag in _interleave(per_call, interleave):
        if not started[k]:
            started[k] = True
            yield added(k)
        # hand-built: the per-fragment event is the hot spot of generation
        yield (b'event: response.function_call_arguments.delta\ndata: {"type":"response.function_call_arguments.delta",'
               b'"sequence_number":%d,"item_id":"%s","output_index":%d,"delta":%s,"obfuscation":"%s"}\n\n'
               % (next(seq), item_ids[k].encode(), k, _enc(frag), next(ob)))
        left[k] -= 1
        if left[k] == 0:
            yield from done(k)
    final = dict(base, status="completed",
                 output=[_resp_item(c, item_ids[k], "completed", c.text) for k, c in enumerate(calls)],
                 usage={"input_tokens": 812, "input_tokens_details": {"cached_tokens": 0},
                        "output_tokens": sum(map(len, per_call)),
                        "output_tokens_details": {"reasoning_tokens": 0},
                        "total_tokens": 812 + sum(map(len, per_call))})
    yield ev("response.completed", {"response": final})


# ---- Anthropic Messages (C3) --------------------------------------------------------------------------------
def _anthropic(calls: list[Call], interleave: bool, sizes: _Sizes, obf: list[bytes]) -> Iterator[bytes]:
    def ev(name: str, payload: dict[str, Any]) -> bytes:
        return b"event: " + name.encode() + b"\ndata: " + _enc(payload) + b"\n\n"

    yield ev("message_start", {"type": "message_start", "message": {
        "id": "msg_01BENCH7xq", "type": "message", "role": "assistant", "content": [],
        "model": "claude-sonnet-4-5-20250929", "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 812, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
                  "output_tokens": 1, "service_tier": "standard"}}})
    yield ev("ping", {"type": "ping"})
    total = 0
    for k, c in enumerate(calls):  # content blocks are sequential in Anthropic streams
        yield ev("content_block_start", {"type": "content_block_start", "index": k, "content_block": {
            "type": "tool_use", "id": "toolu_01" + c.call_id[5:], "name": c.name, "input": {}}})
        yield (b'event: content_block_delta\ndata: {"type":"content_block_delta","index":%d,'
               b'"delta":{"type":"input_json_delta","partial_json":""}}\n\n' % k)
        for frag in _fragments(c.text, sizes):
            total += 1
            yield (b'event: content_block_delta\ndata: {"type":"content_block_delta","index":%d,'
                   b'"delta":{"type":"input_json_delta","partial_json":%s}}\n\n' % (k, _enc(frag)))
        yield ev("content_block_stop", {"type": "content_block_stop", "index": k})
    yield ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                               "usage": {"output_tokens": total}})
    yield ev("message_stop", {"type": "message_stop"})


# ---- Gemini generateContent, alt=sse (D4, D5) ---------------------------------------------------------------
_GEM_USAGE = {"promptTokenCount": 812, "candidatesTokenCount": 40, "totalTokenCount": 852}


def _gem_chunk(parts: list[Any], finish: bool = False) -> bytes:
    cand: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        cand["finishReason"] = "STOP"
    payload = {"candidates": [cand], "usageMetadata": _GEM_USAGE, "modelVersion": "gemini-2.5-pro",
               "responseId": "bench7xResp"}
    return b"data: " + _enc(payload) + b"\r\n\r\n"


def _gemini(calls: list[Call], interleave: bool, sizes: _Sizes, obf: list[bytes], *,
            streamed: bool = False) -> Iterator[bytes]:
    if not streamed:
        # Gemini API: every functionCall arrives whole, one per chunk, no index; the last chunk says STOP
        for k, c in enumerate(calls):
            yield _gem_chunk([{"functionCall": {"id": c.call_id, "name": c.name, "args": c.args}}],
                             finish=k == len(calls) - 1)
        return
    # Vertex streamed arguments: start part, partialArgs fragments of one path, then the empty functionCall
    tail = (b']},"index":0}],"usageMetadata":{"promptTokenCount":812,"candidatesTokenCount":40,'
            b'"totalTokenCount":852},"modelVersion":"gemini-2.5-pro","responseId":"bench7xResp"}\r\n\r\n')
    head = b'data: {"candidates":[{"content":{"role":"model","parts":['
    for c in calls:
        (path, value), = c.args.items()
        yield _gem_chunk([{"functionCall": {"id": c.call_id, "name": c.name, "willContinue": True}}])
        jp = _enc("$." + path)
        frags = _fragments(value, sizes)
        last = len(frags) - 1
        for i, frag in enumerate(frags):
            if i < last:
                yield (head + b'{"functionCall":{"partialArgs":[{"jsonPath":%s,"stringValue":%s,"willContinue":true}],'
                       b'"willContinue":true}}' % (jp, _enc(frag)) + tail)
            else:
                yield (head + b'{"functionCall":{"partialArgs":[{"jsonPath":%s,"stringValue":%s}],'
                       b'"willContinue":true}}' % (jp, _enc(frag)) + tail)
    yield _gem_chunk([{"functionCall": {}}], finish=True)


# ---- Gemini Interactions, steps schema (E2) -----------------------------------------------------------------
def _interactions(calls: list[Call], interleave: bool, sizes: _Sizes, obf: list[bytes]) -> Iterator[bytes]:
    def ev(name: str, payload: dict[str, Any]) -> bytes:
        return b"event: " + name.encode() + b"\ndata: " + _enc({"event_type": name, **payload}) + b"\n\n"

    iid = "v1_bench7xInteraction"
    eid = itertools.count(1)
    yield ev("interaction.created", {"interaction": {"id": iid, "status": "in_progress", "object": "interaction",
                                                     "model": "gemini-3-pro-preview"}, "event_id": f"e{next(eid)}"})
    yield ev("interaction.status_update", {"interaction_id": iid, "status": "in_progress",
                                           "event_id": f"e{next(eid)}"})
    per_call = [_fragments(c.text, sizes) for c in calls]
    started = [False] * len(calls)
    left = [len(f) for f in per_call]
    for k, frag in _interleave(per_call, interleave):
        idx = k + 1  # step 0 is the user input
        if not started[k]:
            started[k] = True
            c = calls[k]
            yield ev("step.start", {"index": idx, "step": {"type": "function_call", "id": c.call_id, "name": c.name,
                                                           "arguments": {}}, "event_id": f"e{next(eid)}"})
        yield (b'event: step.delta\ndata: {"event_type":"step.delta","index":%d,'
               b'"delta":{"type":"arguments_delta","arguments":%s},"event_id":"e%d"}\n\n' % (idx, _enc(frag), next(eid)))
        left[k] -= 1
        if left[k] == 0:
            yield ev("step.stop", {"index": idx, "step_usage": {"total_tokens": len(per_call[k])},
                                   "event_id": f"e{next(eid)}"})
    yield ev("interaction.completed", {"interaction": {"id": iid, "status": "requires_action", "object": "interaction",
                                                       "model": "gemini-3-pro-preview",
                                                       "usage": {"total_input_tokens": 812,
                                                                 "total_output_tokens": sum(map(len, per_call))}},
                                       "event_id": f"e{next(eid)}"})
    yield b"data: [DONE]\n\n"


# ---- Amazon Bedrock ConverseStream (AWS event-stream binary framing) ----------------------------------------
_ES_HEAD = struct.Struct(">II")


def _es_header(name: bytes, value: bytes) -> bytes:
    return bytes((len(name),)) + name + b"\x07" + len(value).to_bytes(2, "big") + value  # 7: a string


def _es_message(event: str, payload: bytes) -> bytes:
    """One ``application/vnd.amazon.eventstream`` message: prelude (total and header lengths, their CRC32),
    the ``:event-type`` / ``:content-type`` / ``:message-type`` headers, the JSON payload, the message CRC32."""
    headers = (_es_header(b":event-type", event.encode()) + _es_header(b":content-type", b"application/json")
               + _es_header(b":message-type", b"event"))
    prelude = _ES_HEAD.pack(12 + len(headers) + len(payload) + 4, len(headers))
    head = prelude + zlib.crc32(prelude).to_bytes(4, "big") + headers + payload
    return head + zlib.crc32(head).to_bytes(4, "big")


def _bedrock(calls: list[Call], interleave: bool, sizes: _Sizes, obf: list[bytes]) -> Iterator[bytes]:
    # every event carries the "p" padding field the real service adds to hide payload sizes
    pad = itertools.cycle(obf)

    def ev(name: str, payload: dict[str, Any]) -> bytes:
        return _es_message(name, _enc({**payload, "p": next(pad).decode()}))

    yield ev("messageStart", {"role": "assistant"})
    total = 0
    for k, c in enumerate(calls):  # content blocks are sequential, as in Anthropic streams
        yield ev("contentBlockStart", {"start": {"toolUse": {"toolUseId": "tooluse_" + c.call_id[5:],
                                                             "name": c.name}}, "contentBlockIndex": k})
        for frag in _fragments(c.text, sizes):
            total += 1
            yield _es_message("contentBlockDelta", b'{"contentBlockIndex":%d,"delta":{"toolUse":{"input":%s}},'
                              b'"p":"%s"}' % (k, _enc(frag), next(pad)))
        yield ev("contentBlockStop", {"contentBlockIndex": k})
    yield ev("messageStop", {"stopReason": "tool_use"})
    yield ev("metadata", {"usage": {"inputTokens": 812, "outputTokens": total, "totalTokens": 812 + total},
                          "metrics": {"latencyMs": 1234}})


_RENDER = {
    "openai-chat": _chat,
    "openai-responses": _responses,
    "anthropic": _anthropic,
    "gemini": _gemini,
    "gemini-interactions": _interactions,
    "bedrock-converse": _bedrock,
}

#: separator of SSE messages in each SSE dialect's generated stream
SEPARATOR = {d: b"\r\n\r\n" if d == "gemini" else b"\n\n" for d in DIALECTS if d != "bedrock-converse"}


def render(dialect: str, calls: list[Call], *, seed: int, large: bool = False) -> bytes:
    rng = random.Random(seed)
    sizes = _Sizes(rng, 4, 8)
    obf = [bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
                 for _ in range(rng.randint(2, 12))) for _ in range(64)]
    fn = _RENDER[dialect]
    interleave = dialect in INTERLEAVED
    if dialect == "gemini":
        return b"".join(_gemini(calls, interleave, sizes, obf, streamed=large))
    return b"".join(fn(calls, interleave, sizes, obf))


def chunked(data: bytes, *, seed: int, lo: int = 1024, hi: int = 4096) -> list[bytes]:
    """Network-like chunks of ``lo`` to ``hi`` bytes (seeded)."""
    sizes = _Sizes(random.Random(seed), lo, hi)
    out = []
    i = 0
    n = len(data)
    while i < n:
        j = i + next(sizes)
        out.append(data[i:j])
        i = j
    return out


#: workload name -> (number of calls, argument bytes per call, large form)
def shapes(large_bytes: int) -> dict[str, tuple[int, int, bool]]:
    return {"small": (1, 200, False), "parallel": (8, 2048, False), "large": (1, large_bytes, True)}


def build(dialect: str, workload: str, *, count: int, arg_size: int, large: bool, seed: int = 1234) -> Workload:
    # the calls depend on the workload shape only, so every dialect carries the same arguments
    rng = random.Random(f"{seed}/{workload}/{count}/{arg_size}")
    calls = make_calls(rng, count, arg_size, large=large)
    data = render(dialect, calls, seed=seed + 1, large=large)
    return Workload(dialect=dialect, name=workload, calls=calls, stream_bytes=len(data),
                    chunks=chunked(data, seed=seed + 2))


class ChatManyCalls:
    """A lazily generated OpenAI Chat stream of about ``total_bytes`` (for the memory step): many small calls
    (100 B to 1 KiB of arguments each, one after the other, index 0, 1, 2 …) and one call of ``big_call`` bytes
    in the middle, in chunks of ``lo`` to ``hi`` bytes. The argument texts are made up front (in ``__init__``,
    outside any measurement) and reused, so the generator itself holds little more than one chunk.
    ``info`` is filled in while the stream is generated: calls, largest (argument bytes), bytes."""

    dialect = "openai-chat"

    def __init__(self, total_bytes: int, *, seed: int = 99, big_call: int = 256 * 1024,
                 lo: int = 1024, hi: int = 4096) -> None:
        rng = random.Random(seed)
        self.total = total_bytes
        self.lo, self.hi = lo, hi
        self.seed = seed
        self.small = [(c.name, c.text) for c in (make_calls(rng, 1, rng.randint(100, 1024))[0] for _ in range(64))]
        big = make_calls(rng, 1, big_call)[0]
        self.big = (big.name, big.text)
        self.info = {"calls": 0, "largest": 0, "bytes": 0}

    def chunks(self) -> Iterator[bytes]:
        info = self.info
        info.update(calls=0, largest=0, bytes=0)
        rng = random.Random(self.seed)
        sizes = _Sizes(rng, 4, 8)
        ob = itertools.cycle([b"x" * rng.randint(2, 12) for _ in range(16)])
        csize = _Sizes(rng, self.lo, self.hi)
        head = _CHAT_HEAD
        total = self.total
        small = itertools.cycle(self.small)

        messages = self._messages(info, sizes, ob, head, total, small)
        pending = bytearray()
        hi = self.hi
        for msg in messages:
            pending += msg
            info["bytes"] += len(msg)
            while len(pending) >= hi:
                n = next(csize)
                yield bytes(pending[:n])
                del pending[:n]
        while pending:
            n = next(csize)
            yield bytes(pending[:n])
            del pending[:n]

    def _messages(self, info: dict, sizes: Any, ob: Any, head: bytes, total: int, small: Any) -> Iterator[bytes]:
        if True:
            big_done = False
            k = 0
            yield head + b'[{"index":0,"delta":{"role":"assistant","content":null},"finish_reason":null}]}\n\n'
            while info["bytes"] < total:
                if not big_done and info["bytes"] >= total // 2:
                    big_done = True
                    name, text = self.big
                else:
                    name, text = next(small)
                info["largest"] = max(info["largest"], len(text.encode()))
                yield head + (b'[{"index":0,"delta":{"tool_calls":[{"index":%d,"id":"call_%08d","type":"function",'
                              b'"function":{"name":"%s","arguments":""}}]},"finish_reason":null}]}\n\n'
                              % (k, k, name.encode()))
                for frag in _ifragments(text, sizes):
                    yield head + (b'[{"index":0,"delta":{"tool_calls":[{"index":%d,"function":{"arguments":%s}}]},'
                                  b'"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"%s"}\n\n'
                                  % (k, _enc(frag), next(ob)))
                info["calls"] += 1
                k += 1
            yield head + b'[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\n'
            yield b"data: [DONE]\n\n"


class AnthropicManyCalls(ChatManyCalls):
    """The same stream shape as an Anthropic Messages stream: one tool_use block per call, each closed by its
    content_block_stop (so each call ends, and may be forgotten, long before the stream does)."""

    dialect = "anthropic"

    def _messages(self, info: dict, sizes: Any, ob: Any, head: bytes, total: int, small: Any) -> Iterator[bytes]:
        big_done = False
        k = 0
        yield (b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_BENCH","type":"message",'
               b'"role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,'
               b'"usage":{"input_tokens":10,"output_tokens":1}}}\n\n')
        while info["bytes"] < total:
            if not big_done and info["bytes"] >= total // 2:
                big_done = True
                name, text = self.big
            else:
                name, text = next(small)
            info["largest"] = max(info["largest"], len(text.encode()))
            yield (b'event: content_block_start\ndata: {"type":"content_block_start","index":%d,"content_block":'
                   b'{"type":"tool_use","id":"toolu_%08d","name":"%s","input":{}}}\n\n' % (k, k, name.encode()))
            for frag in _ifragments(text, sizes):
                yield (b'event: content_block_delta\ndata: {"type":"content_block_delta","index":%d,"delta":'
                       b'{"type":"input_json_delta","partial_json":%s}}\n\n' % (k, _enc(frag)))
            yield b'event: content_block_stop\ndata: {"type":"content_block_stop","index":%d}\n\n' % k
            info["calls"] += 1
            k += 1
        yield (b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"tool_use"},'
               b'"usage":{"output_tokens":100}}\n\n')
        yield b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
