"""Deterministic encoders of well-formed provider streams, and hypothesis strategies that drive them.

Independent of toolwire: the encoders write the wire format of the providers (OpenAI Chat Completions chunks) and
C3 (Anthropic Messages events) byte for byte, so the differential and property tests can feed the same bytes to
toolwire and to the official SDKs' accumulators.

* ``chat_stream(calls, ...)`` / ``anthropic_stream(calls, ...)`` return the SSE bytes.
* ``chat_events(...)`` / ``anthropic_events(...)`` return the ``(sse_event_name, payload)`` list, and
  ``encode_sse(events, ...)`` turns it into an ``Encoded`` (bytes plus the offset where each event's data ends),
  which tests use to know which terminator a prefix of the bytes contains.
* ``calls_strategy()``, ``fragment_plan()``, ``args_strategy()`` … are hypothesis strategies.

``calls`` is a list of ``(call_id, name, args_dict)``. Nothing here is random: the same arguments give the
same bytes; hypothesis supplies the variety through a ``FragmentPlan``.
"""

from __future__ import annotations

import json
import string
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from hypothesis import strategies as st

__all__ = [
    "Call",
    "FragmentPlan",
    "Encoded",
    "DONE",
    "split_text",
    "encode_sse",
    "parse_sse_events",
    "chat_events",
    "chat_stream",
    "anthropic_events",
    "anthropic_stream",
    "args_strategy",
    "json_values",
    "unicode_text",
    "names",
    "calls_strategy",
    "fragment_plan",
    "NEWLINES",
]

Call = tuple[str, str, dict]

DONE = "[DONE]"
NEWLINES = ("\n", "\r\n", "\r")

CHAT_ID = "chatcmpl-tw0001"
CHAT_MODEL = "gpt-4o-2024-08-06"
CREATED = 1760000000
MESSAGE_ID = "msg_01TwGeneratedStream0001"
CLAUDE_MODEL = "claude-sonnet-4-5-20250929"


@dataclass(frozen=True)
class FragmentPlan:
    """How to cut and order a stream; every sequence is cycled.

    ``sizes``: character lengths of successive argument (and text) fragments. ``order``: choices used to pick
    which call sends the next fragment when Chat calls are interleaved. ``per_chunk``: how many ``tool_calls``
    entries one Chat chunk carries. ``pings``: after each Anthropic event, whether a ``ping`` follows.
    """

    sizes: tuple[int, ...] = (7,)
    order: tuple[int, ...] = (0,)
    per_chunk: tuple[int, ...] = (1,)
    pings: tuple[bool, ...] = (False,)

    def __post_init__(self) -> None:
        if not self.sizes or any(s < 1 for s in self.sizes):
            raise ValueError("fragment sizes must be >= 1")
        if not self.order or not self.per_chunk or any(n < 1 for n in self.per_chunk) or not self.pings:
            raise ValueError("plan sequences must be non-empty (per_chunk >= 1)")


class _Cycle:
    """Deterministic cursor over a non-empty sequence, shared across uses within one stream."""

    def __init__(self, seq: Sequence[Any]) -> None:
        self.seq = tuple(seq)
        self.i = 0

    def next(self) -> Any:
        v = self.seq[self.i % len(self.seq)]
        self.i += 1
        return v


def split_text(text: str, sizes: Sequence[int] | _Cycle) -> list[str]:
    """Cut ``text`` into fragments of the (cycled) ``sizes``, in characters; an empty text gives no fragment."""
    cyc = sizes if isinstance(sizes, _Cycle) else _Cycle(sizes)
    out, i = [], 0
    while i < len(text):
        n = cyc.next()
        out.append(text[i:i + n])
        i += n
    return out


@dataclass
class Encoded:
    """SSE bytes plus, for each event, the offset just after its ``data:`` value (before the line end)."""

    data: bytes
    events: list[tuple[str | None, Any]]
    ends: list[int] = field(default_factory=list)

    def end_of(self, predicate) -> int | None:
        """Offset after the data of the first event whose ``(name, payload)`` satisfies ``predicate``."""
        for (name, payload), end in zip(self.events, self.ends):
            if predicate(name, payload):
                return end
        return None


def encode_sse(events: Iterable[tuple[str | None, Any]], *, newline: str = "\n",
               ensure_ascii: bool = False) -> Encoded:
    """Write ``events`` as SSE: an optional ``event:`` line, one ``data:`` line, a blank line.

    ``payload`` is a dict (JSON-encoded compactly, non-ASCII as raw UTF-8 unless ``ensure_ascii``) or a string
    written verbatim (``[DONE]``). ``newline`` is the line end used throughout (``\\n``, ``\\r\\n`` or ``\\r``).
    """
    nl = newline.encode()
    out = bytearray()
    evs, ends = [], []
    for name, payload in events:
        evs.append((name, payload))
        if name is not None:
            out += b"event: " + name.encode() + nl
        body = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=ensure_ascii,
                                                                   separators=(",", ":"))
        out += b"data: " + body.encode("utf-8")
        ends.append(len(out))
        out += nl + nl
    return Encoded(bytes(out), evs, ends)


def parse_sse_events(data: bytes) -> list[tuple[str | None, str]]:
    """A minimal reference SSE reader for the bytes this module writes: ``(event, data)`` per message."""
    text = data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    out = []
    for block in text.split("\n\n"):
        name, datas = None, []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                datas.append(line[6:] if line.startswith("data: ") else line[5:])
        if datas:
            out.append((name, "\n".join(datas)))
    return out


def _plan(plan: FragmentPlan | None, fragment_sizes: Sequence[int] | None) -> FragmentPlan:
    plan = plan or FragmentPlan()
    if fragment_sizes is not None:
        plan = FragmentPlan(tuple(fragment_sizes), plan.order, plan.per_chunk, plan.pings)
    return plan


def _args_text(args: Any, ensure_ascii: bool, separators: tuple[str, str] | None = None) -> str:
    return json.dumps(args, ensure_ascii=ensure_ascii, separators=separators)


# ---- OpenAI Chat Completions ------------------------------------------------------------------------------


def _chunk(delta: dict, finish: str | None, include_usage: bool) -> dict:
    chunk = {"id": CHAT_ID, "object": "chat.completion.chunk", "created": CREATED, "model": CHAT_MODEL,
             "system_fingerprint": "fp_tw0001", "service_tier": "default",
             "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
    if include_usage:
        chunk["usage"] = None
    return chunk


def chat_events(calls: Sequence[Call], *, text: str | None = None, finish: str | None = "tool_calls",
                fragment_sizes: Sequence[int] | None = None, parallel_interleave: bool = False,
                include_usage: bool = True, done: bool = True, ensure_ascii: bool = False,
                plan: FragmentPlan | None = None) -> list[tuple[None, Any]]:
    """The chunks of a Chat Completions stream (see ``chat_stream``), as ``(None, payload)`` pairs."""
    plan = _plan(plan, fragment_sizes)
    sizes = _Cycle(plan.sizes)
    events: list[tuple[None, Any]] = []
    first_delta: dict[str, Any] = {"role": "assistant", "content": "" if text else None, "refusal": None}
    if text:
        events.append((None, _chunk(first_delta, None, include_usage)))
        first_delta = {}
        for frag in split_text(text, sizes):
            events.append((None, _chunk({"content": frag}, None, include_usage)))

    # per call: its header entry, then its argument fragments
    queues: list[list[dict]] = []
    for i, (call_id, name, args) in enumerate(calls):
        q = [{"index": i, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}]
        for frag in split_text(_args_text(args, ensure_ascii), sizes):
            q.append({"index": i, "function": {"arguments": frag}})
        queues.append(q)

    entries: list[dict] = []
    if not parallel_interleave:
        for q in queues:
            entries.extend(q)
    else:
        # any merge that keeps each call's order and announces call k only after call k-1 was announced
        order = _Cycle(plan.order)
        pos = [0] * len(queues)
        started = 0
        while True:
            eligible = [k for k in range(started) if pos[k] < len(queues[k])]
            if started < len(queues):
                eligible.append(started)
            if not eligible:
                break
            k = eligible[order.next() % len(eligible)]
            if k == started:
                started += 1
            entries.append(queues[k][pos[k]])
            pos[k] += 1

    per_chunk = _Cycle(plan.per_chunk)
    i = 0
    while i < len(entries):
        n = per_chunk.next()
        delta = dict(first_delta)
        first_delta = {}
        delta["tool_calls"] = entries[i:i + n]
        events.append((None, _chunk(delta, None, include_usage)))
        i += n
    if first_delta:  # no text and no calls: still announce the role
        events.append((None, _chunk(first_delta, None, include_usage)))
    if finish is not None:
        events.append((None, _chunk({}, finish, include_usage)))
        if include_usage:
            events.append((None, {"id": CHAT_ID, "object": "chat.completion.chunk", "created": CREATED,
                                  "model": CHAT_MODEL, "system_fingerprint": "fp_tw0001", "choices": [],
                                  "usage": {"prompt_tokens": 82, "completion_tokens": 31, "total_tokens": 113}}))
    if done:
        events.append((None, DONE))
    return events


def chat_stream(calls: Sequence[Call], *, text: str | None = None, finish: str | None = "tool_calls",
                fragment_sizes: Sequence[int] | None = None, parallel_interleave: bool = False,
                include_usage: bool = True, done: bool = True, ensure_ascii: bool = False,
                plan: FragmentPlan | None = None, newline: str = "\n", wire_ascii: bool = False) -> bytes:
    """SSE bytes of an OpenAI Chat Completions stream.

    Each call's first ``tool_calls`` entry carries ``index``/``id``/``type``/``name`` and ``arguments: ""``;
    its argument JSON (``json.dumps``, ``ensure_ascii`` as given) follows in fragments of ``fragment_sizes``
    characters (cycled), keyed by ``index``. ``parallel_interleave`` mixes the fragments of different calls
    (in the order ``plan.order`` picks). Then ``delta: {}`` with ``finish_reason`` (omitted when ``finish`` is
    None), a usage chunk with ``choices: []`` when ``include_usage``, and ``data: [DONE]`` when ``done``.
    ``wire_ascii`` escapes non-ASCII in the chunk JSON itself (otherwise raw UTF-8 is on the wire).
    """
    events = chat_events(calls, text=text, finish=finish, fragment_sizes=fragment_sizes,
                         parallel_interleave=parallel_interleave, include_usage=include_usage, done=done,
                         ensure_ascii=ensure_ascii, plan=plan)
    return encode_sse(events, newline=newline, ensure_ascii=wire_ascii).data


# ---- Anthropic Messages ----------------------------------------------------------------------------------


def anthropic_events(calls: Sequence[Call], *, text: str | None = None, thinking: bool | str = False,
                     stop_reason: str | None = "tool_use", fragment_sizes: Sequence[int] | None = None,
                     ensure_ascii: bool = False, plan: FragmentPlan | None = None,
                     message_stop: bool = True, empty_input_as_nothing: bool = True
                     ) -> list[tuple[str, dict]]:
    """The events of an Anthropic Messages stream (see ``anthropic_stream``), as ``(event_name, payload)``."""
    plan = _plan(plan, fragment_sizes)
    sizes = _Cycle(plan.sizes)
    pings = _Cycle(plan.pings)
    events: list[tuple[str, dict]] = []

    def emit(payload: dict) -> None:
        events.append((payload["type"], payload))
        if pings.next():
            events.append(("ping", {"type": "ping"}))

    events.append(("message_start", {"type": "message_start", "message": {
        "id": MESSAGE_ID, "type": "message", "role": "assistant", "model": CLAUDE_MODEL, "content": [],
        "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 400, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
                  "output_tokens": 1, "service_tier": "standard"}}}))
    events.append(("ping", {"type": "ping"}))
    index = 0
    if thinking:
        thought = thinking if isinstance(thinking, str) else "Let me think about which tools to call…"
        emit({"type": "content_block_start", "index": index,
              "content_block": {"type": "thinking", "thinking": "", "signature": ""}})
        for frag in split_text(thought, sizes):
            emit({"type": "content_block_delta", "index": index,
                  "delta": {"type": "thinking_delta", "thinking": frag}})
        emit({"type": "content_block_delta", "index": index,
              "delta": {"type": "signature_delta", "signature": "EqQBCkgIARABGAIiQL0tw+sig=="}})
        emit({"type": "content_block_stop", "index": index})
        index += 1
    if text:
        emit({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})
        for frag in split_text(text, sizes):
            emit({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": frag}})
        emit({"type": "content_block_stop", "index": index})
        index += 1
    for call_id, name, args in calls:
        emit({"type": "content_block_start", "index": index,
              "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}}})
        emit({"type": "content_block_delta", "index": index,
              "delta": {"type": "input_json_delta", "partial_json": ""}})
        if not (empty_input_as_nothing and args == {}):
            for frag in split_text(_args_text(args, ensure_ascii), sizes):
                emit({"type": "content_block_delta", "index": index,
                      "delta": {"type": "input_json_delta", "partial_json": frag}})
        emit({"type": "content_block_stop", "index": index})
        index += 1
    if stop_reason is not None:
        emit({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
              "usage": {"output_tokens": 90}})
    if message_stop:
        events.append(("message_stop", {"type": "message_stop"}))
    return events


def anthropic_stream(calls: Sequence[Call], *, text: str | None = None, thinking: bool | str = False,
                     stop_reason: str | None = "tool_use", fragment_sizes: Sequence[int] | None = None,
                     ensure_ascii: bool = False, plan: FragmentPlan | None = None, message_stop: bool = True,
                     empty_input_as_nothing: bool = True, newline: str = "\n", wire_ascii: bool = False) -> bytes:
    """SSE bytes of an Anthropic Messages stream, ``event:`` lines included.

    ``message_start`` (then a ``ping``), an optional thinking block (``thinking_delta`` fragments then a
    ``signature_delta``), an optional text block, one ``tool_use`` block per call (``content_block_start`` with
    ``input: {}``, a first ``partial_json: ""``, the argument JSON in fragments, ``content_block_stop``),
    ``message_delta`` with ``stop_reason`` and ``message_stop``; ``plan.pings`` sprinkles more pings. A call
    with no arguments streams only the empty ``partial_json`` (as the API does) unless
    ``empty_input_as_nothing`` is False.
    """
    events = anthropic_events(calls, text=text, thinking=thinking, stop_reason=stop_reason,
                              fragment_sizes=fragment_sizes, ensure_ascii=ensure_ascii, plan=plan,
                              message_stop=message_stop, empty_input_as_nothing=empty_input_as_nothing)
    return encode_sse(events, newline=newline, ensure_ascii=wire_ascii).data


# ---- hypothesis strategies -------------------------------------------------------------------------------

_SPICE = "é中文字😀🎉👩‍💻𝄞\u2028\u00a0\"\\/\n\t\x00\x7f"


def unicode_text(max_size: int = 10, min_size: int = 0) -> st.SearchStrategy[str]:
    """Short strings mixing any non-surrogate code point with emoji, CJK, escapes and control characters."""
    return st.text(st.one_of(st.characters(codec="utf-8"), st.sampled_from(_SPICE)),
                   min_size=min_size, max_size=max_size)


_ROUND_TRIP_FLOATS = st.floats(allow_nan=False, allow_infinity=False).filter(
    lambda f: json.loads(json.dumps(f)) == f)


def json_values(max_leaves: int = 6) -> st.SearchStrategy[Any]:
    """JSON values: strings (unicode), ints, round-tripping floats, bools, None, nested lists and dicts."""
    scalars = st.one_of(unicode_text(), st.integers(-(2 ** 63), 2 ** 63 - 1), _ROUND_TRIP_FLOATS,
                        st.booleans(), st.none())
    return st.recursive(scalars, lambda kids: st.one_of(st.lists(kids, max_size=3),
                                                        st.dictionaries(unicode_text(6), kids, max_size=3)),
                        max_leaves=max_leaves)


def args_strategy(max_keys: int = 4) -> st.SearchStrategy[dict]:
    """A tool's argument object: unicode keys, any JSON values; small."""
    return st.dictionaries(unicode_text(8), json_values(), max_size=max_keys)


def names() -> st.SearchStrategy[str]:
    """Tool names valid for both APIs: ``^[a-zA-Z0-9_-]{1,64}$``."""
    return st.from_regex(r"\A[a-zA-Z0-9_-]{1,64}\Z", fullmatch=True)


def _ids(prefix: str) -> st.SearchStrategy[str]:
    return st.text(string.ascii_letters + string.digits, min_size=1, max_size=24).map(lambda s: prefix + s)


def calls_strategy(min_calls: int = 1, max_calls: int = 4, *, id_prefix: str = "call_"
                   ) -> st.SearchStrategy[list[Call]]:
    """1 to 4 ``(call_id, name, args)`` with distinct ids."""
    return st.lists(st.tuples(_ids(id_prefix), names(), args_strategy()), min_size=min_calls,
                    max_size=max_calls, unique_by=lambda c: c[0])


def fragment_plan() -> st.SearchStrategy[FragmentPlan]:
    """Fragment sizes (1..24 characters, cycled), an interleaving order, entries per chunk, ping placement."""
    return st.builds(
        FragmentPlan,
        sizes=st.lists(st.integers(1, 24), min_size=1, max_size=6).map(tuple),
        order=st.lists(st.integers(0, 7), min_size=1, max_size=8).map(tuple),
        per_chunk=st.lists(st.integers(1, 3), min_size=1, max_size=4).map(tuple),
        pings=st.lists(st.booleans(), min_size=1, max_size=5).map(tuple),
    )
