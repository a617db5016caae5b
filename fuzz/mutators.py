"""Mutators: byte-level, event-level (SSE messages, JSON lines, elements of a JSON array) and JSON-value level.

``Doc.parse(data, format)`` splits a response into its events so that mutations stay meaningful; ``Doc.dump()``
writes it back (byte for byte for an unmutated SSE or JSON-lines input written with one line end). JSON mutations
decode one payload with ``json``, change one node, and encode it again; values that ``json`` cannot write (deep
nesting, invalid UTF-8, lone surrogates, huge numbers, duplicated keys) are spliced in as raw text in place of a
marker string.

``mutate(seed, rng, pool)`` applies a random stack of 1 to 4 mutations and returns the bytes and their names.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["Doc", "Event", "Mutation", "mutate", "byte_mutate", "json_mutate", "deep_array", "deep_object",
           "terminator_index", "terminator_cut", "BIG_MUTATIONS", "JSON_MUTATORS", "BYTE_MUTATORS", "EVENT_MUTATORS"]

_MARK = "\u0000fuzz-raw-"

#: mutations that make big inputs or deep structures: the memory property is checked after them
BIG_MUTATIONS = frozenset({"json.long_string", "json.deep", "json.deep_args", "json.big_index", "byte.repeat",
                           "json.huge_number"})


# ---- documents ------------------------------------------------------------------------------------------
@dataclass
class Event:
    """One SSE message (``lines`` before the data line, ``data`` its value), JSON line or array element.

    ``data`` is None for an SSE message without exactly one ``data:`` line (kept verbatim in ``lines``)."""

    lines: list[bytes]
    data: bytes | None

    def json(self) -> Any:
        """The decoded data; ValueError when it is not JSON (or too deep for ``json``)."""
        if self.data is None:
            raise ValueError("no data")
        return loads(self.data)


def loads(data: bytes) -> Any:
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("too deep") from None


@dataclass
class Doc:
    kind: str  # sse | jsonl | array | body
    events: list[Event]
    sep: bytes = b"\n"
    tail: bytes = b""  # bytes after the last SSE message (an unterminated last line)
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, data: bytes, fmt: str) -> "Doc":
        if fmt == "sse":
            sep = b"\r\n" if b"\r\n" in data else (b"\r" if b"\r" in data and b"\n" not in data else b"\n")
            blocks = data.split(sep + sep)
            tail = blocks.pop() if blocks else b""
            events = []
            for block in blocks:
                lines = block.split(sep) if block else []
                datas = [i for i, ln in enumerate(lines) if ln.startswith(b"data:")]
                if len(datas) == 1:
                    i = datas[0]
                    value = lines[i][5:]
                    if value.startswith(b" "):
                        value = value[1:]
                    events.append(Event(lines[:i] + lines[i + 1:], value))
                else:
                    events.append(Event(lines, None))
            return cls("sse", events, sep, tail)
        stripped = data.strip()
        if fmt == "json" and stripped.startswith(b"["):
            try:
                items = loads(stripped)
            except ValueError:
                items = None
            if isinstance(items, list):
                return cls("array", [Event([], _dumps(x)) for x in items])
        if fmt == "jsonl":
            return cls("jsonl", [Event([], ln.strip()) for ln in data.split(b"\n") if ln.strip()])
        return cls("body", [Event([], stripped)])

    def dump(self) -> bytes:
        if self.kind == "sse":
            sep = self.sep
            out = []
            for ev in self.events:
                lines = list(ev.lines)
                if ev.data is not None:
                    lines.append(b"data: " + ev.data)
                out.append(sep.join(lines) + sep + sep)
            return b"".join(out) + self.tail
        if self.kind == "jsonl":
            return b"".join((ev.data or b"") + b"\n" for ev in self.events)
        if self.kind == "array":
            return b"[" + b"\n,".join(ev.data or b"null" for ev in self.events) + b"\n]"
        return b"".join(ev.data or b"" for ev in self.events)

    def json_events(self) -> list[int]:
        """Indices of the events whose data is a JSON object or array."""
        return [i for i, ev in enumerate(self.events) if ev.data is not None and ev.data[:1] in (b"{", b"[")]


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")


def event_type(dialect: str, ev: Event) -> str | None:
    """The event's type as the dialect names it (``[DONE]`` for the sentinel), or None."""
    if ev.data is None:
        return None
    if ev.data.strip() == b"[DONE]":
        return "[DONE]"
    try:
        obj = loads(ev.data)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    return _adapter(dialect).fuzz_event_type(obj)


def _adapter(dialect: str) -> Any:
    from tests.dialects import adapter

    return adapter(dialect)


def terminator_index(dialect: str, doc: Doc) -> int | None:
    """Index of the first event that ends the stream for ``dialect`` (None for a body or when there is none): the
    dialect's test adapter names its terminating events (``stream_terminators``) and the bytes they hold
    (``terminator_needles``)."""
    if doc.kind == "body":
        return None
    ends = _adapter(dialect).stream_terminators
    needles = _adapter(dialect).terminator_needles
    for i, ev in enumerate(doc.events):
        if ev.data is not None and any(n in ev.data for n in needles) and event_type(dialect, ev) in ends:
            return i
    return None


def terminator_cut(dialect: str, data: bytes, fmt: str) -> bytes | None:
    """``data`` cut right after the event that ends the stream (a JSON array closed again), or None when there is
    no terminator or nothing follows it. Events are found as ``Doc.parse`` finds them; every boundary it cuts at
    (two line ends in a row, a newline between JSON lines) is a message boundary for toolwire's framers too."""
    doc = Doc.parse(data, fmt)
    t = terminator_index(dialect, doc)
    if t is None or t >= len(doc.events) - 1:
        return None
    if doc.kind == "sse":
        step = len(doc.sep) * 2
        blocks = data.split(doc.sep + doc.sep)
        end = sum(len(b) + step for b in blocks[:t + 1])
        return data[:end]
    if doc.kind == "jsonl":
        pos, seen = 0, -1
        for line in data.split(b"\n"):
            pos += len(line) + 1
            if line.strip():
                seen += 1
                if seen == t:
                    return data[:pos]
        return None
    if doc.kind == "array":
        return Doc("array", doc.events[:t + 1]).dump()
    return None


# ---- JSON values ----------------------------------------------------------------------------------------
def deep_array(depth: int) -> bytes:
    return b"[" * depth + b"1" + b"]" * depth


def deep_object(depth: int) -> bytes:
    return b'{"a":' * depth + b"null" + b"}" * depth


_DEPTHS = (500, 990, 1000, 1001, 1100, 3000)
_BAD_UTF8 = (b"\xff", b"\xfe", b"\xc3", b"\xc3(", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xf4\x90\x80\x80", b"\xc0\xaf",
             b"\xe2\x82", b"\x80", b"\xf0\x9f\x98")
_SURROGATES = (b"\\ud800", b"\\udfff", b"\\udc00\\ud800", b"\\ud83d", b"\\ud800\\u0041", b"\\uDBFF")
_HUGE_NUMBERS = (b"1" + b"0" * 400, b"-" + b"9" * 5000, b"1e400", b"-1e400", b"1e-400", b"18446744073709551616",
                 b"-9223372036854775809", b"9223372036854775808", b"1.7976931348623157e309", b"-0", b"0.0e0",
                 b"123456789012345678901234567890.5", b"1E+2", b"NaN", b"Infinity", b"-Infinity", b"01", b"1.",
                 b".5", b"+1")
_OTHER_VALUES: tuple[Any, ...] = (0, -1, 1, 2, -2 ** 63, 2 ** 63 - 1, 2 ** 64, 2 ** 31, 1.5, -0.0, 1e300, True, False,
                                  None, "", "x", "0", "null", "{}", "[]", [], {}, [None], {"": None}, [[]], {"a": {}})
_INDEX_VALUES: tuple[Any, ...] = (-1, -2, -2 ** 63, 2 ** 63 - 1, 2 ** 64, 10 ** 6, 10 ** 9, 1, 2, 3, 0, 255, 65536,
                                  "0", 0.5, None, True)
_INDEX_KEYS = frozenset({"index", "output_index", "content_index", "summary_index", "sequence_number", "choice",
                         "n", "tool_call_index"})
_UNKNOWN_TYPES = ("", "unknown", "response.teleported", "content_block_teleport", "step.sideways",
                  "interaction.unheard_of", "message_stop ", "MESSAGE_STOP", "ping", "error", "type",
                  "response.output_item.added.extra", "\u00e9v\u00e9nement", "data")
_NEW_KEYS = ("extra", "type", "id", "index", "name", "arguments", "input", "partial_json", "args", "error", "status",
             "finish_reason", "delta", "content", "choices", "candidates", "functionCall", "event_type", "item",
             "tool_calls", "call_id", "willContinue", "partialArgs", "jsonPath", "stop_reason", "response")


class _Raw:
    """Collects raw JSON texts to splice in place of marker strings."""

    def __init__(self) -> None:
        self.items: list[bytes] = []

    def mark(self, raw: bytes) -> str:
        self.items.append(raw)
        return f"{_MARK}{len(self.items) - 1}\u0000"

    def splice(self, text: bytes) -> bytes:
        for i, raw in enumerate(self.items):
            token = _dumps(f"{_MARK}{i}\u0000")
            text = text.replace(token, raw, 1)
        return text


def _nodes(obj: Any) -> list[tuple[Any, Any]]:
    """Every (container, key) pair of ``obj``, breadth first (containers themselves included as values)."""
    out: list[tuple[Any, Any]] = []
    todo = [obj]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            for k, v in node.items():
                out.append((node, k))
                if isinstance(v, (dict, list)):
                    todo.append(v)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                out.append((node, i))
                if isinstance(v, (dict, list)):
                    todo.append(v)
    return out


def _strings_of(obj: Any, limit: int = 200) -> list[str]:
    out = []
    for parent, key in _nodes(obj):
        v = parent[key]
        if isinstance(v, str) and len(v) < 200:
            out.append(v)
            if len(out) >= limit:
                break
    return out


JsonMutator = Callable[[Any, Any, Any, random.Random, _Raw, "Pool"], Any]


def _pick_string(rng: random.Random, nodes: list[tuple[Any, Any]]) -> tuple[Any, Any] | None:
    strs = [(p, k) for p, k in nodes if isinstance(p[k], str)]
    return rng.choice(strs) if strs else None


def _m_type_swap(parent, key, value, rng, raw, pool):
    return rng.choice(_OTHER_VALUES + (str(value)[:50], [value], {"v": value}))


def _m_huge_number(parent, key, value, rng, raw, pool):
    return raw.mark(rng.choice(_HUGE_NUMBERS))


def _m_big_index(parent, key, value, rng, raw, pool):
    return rng.choice(_INDEX_VALUES)


def _m_deep(parent, key, value, rng, raw, pool):
    depth = rng.choice(_DEPTHS)
    return raw.mark(deep_array(depth) if rng.random() < 0.5 else deep_object(depth))


def _m_deep_args(parent, key, value, rng, raw, pool):
    """Deeply nested JSON *text* (arguments are JSON inside a JSON string)."""
    depth = rng.choice(_DEPTHS)
    text = (deep_array(depth) if rng.random() < 0.5 else deep_object(depth)).decode()
    if isinstance(value, str) and value and rng.random() < 0.5:
        cut = rng.randint(0, len(value))
        return value[:cut] + text + value[cut:]
    return text


def _m_bad_utf8(parent, key, value, rng, raw, pool):
    s = value if isinstance(value, str) else "x"
    cut = rng.randint(0, len(s))
    body = _dumps(s[:cut])[1:-1] + rng.choice(_BAD_UTF8) + _dumps(s[cut:])[1:-1]
    return raw.mark(b'"' + body + b'"')


def _m_surrogate(parent, key, value, rng, raw, pool):
    s = value if isinstance(value, str) else "x"
    cut = rng.randint(0, len(s))
    body = _dumps(s[:cut])[1:-1] + rng.choice(_SURROGATES) + _dumps(s[cut:])[1:-1]
    return raw.mark(b'"' + body + b'"')


def _m_long_string(parent, key, value, rng, raw, pool):
    n = rng.choice((1000, 65536, 200_000, 1_000_000))
    unit = rng.choice(("a", "é", "😀", "\\", '"', "\n", "{"))
    return (value if isinstance(value, str) else "") + unit * (n // len(unit.encode()))


def _m_string(parent, key, value, rng, raw, pool):
    choices = pool.strings or ["x"]
    return rng.choice([rng.choice(choices), "", " ", "\u0000", "null", "{", "}", "[DONE]", '{"a":1}', "é" * 3,
                       "\ud800"[:0] + "\u2028", value + value if isinstance(value, str) else "x"])


def _m_unknown_type(parent, key, value, rng, raw, pool):
    if rng.random() < 0.5 and pool.types:
        return rng.choice(pool.types)
    return rng.choice(_UNKNOWN_TYPES)


def _m_delete(parent, key, value, rng, raw, pool):
    return _DELETE


def _m_dup_key(parent, key, value, rng, raw, pool):
    """The object holding ``key`` written with that key twice (the second value another one)."""
    if not isinstance(parent, dict):
        return value
    other = rng.choice(_OTHER_VALUES + (value,))
    items = list(parent.items())
    pos = rng.randint(0, len(items))
    parts = [_dumps(str(k)) + b":" + _dumps(v) for k, v in items]
    parts.insert(pos, _dumps(str(key)) + b":" + _dumps(other))
    return _REPLACE_PARENT, raw.mark(b"{" + b",".join(parts) + b"}")


def _m_add_key(parent, key, value, rng, raw, pool):
    if isinstance(value, dict):
        out = dict(value)
        out[rng.choice(_NEW_KEYS)] = rng.choice(_OTHER_VALUES + tuple(pool.strings[:5]))
        return out
    return value


def _m_list(parent, key, value, rng, raw, pool):
    if not isinstance(value, list) or not value:
        return [value] * rng.randint(0, 3)
    out = list(value)
    op = rng.randrange(5)
    i, j = rng.randrange(len(out)), rng.randrange(len(out))
    if op == 0:
        out.insert(j, out[i])
    elif op == 1:
        del out[i]
    elif op == 2:
        out[i], out[j] = out[j], out[i]
    elif op == 3:
        out.reverse()
    else:
        out = out * rng.randint(2, 50)
    return out


def _m_number_nudge(parent, key, value, rng, raw, pool):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return rng.randint(-3, 3)
    return value + rng.choice((-1, 1, 2, -2, 1000))


class _Delete:
    pass


_DELETE = _Delete()
_REPLACE_PARENT = object()

JSON_MUTATORS: dict[str, JsonMutator] = {
    "json.type_swap": _m_type_swap,
    "json.huge_number": _m_huge_number,
    "json.big_index": _m_big_index,
    "json.deep": _m_deep,
    "json.deep_args": _m_deep_args,
    "json.bad_utf8": _m_bad_utf8,
    "json.surrogate": _m_surrogate,
    "json.long_string": _m_long_string,
    "json.string": _m_string,
    "json.unknown_type": _m_unknown_type,
    "json.delete": _m_delete,
    "json.dup_key": _m_dup_key,
    "json.add_key": _m_add_key,
    "json.list": _m_list,
    "json.number": _m_number_nudge,
}

_WEIGHTS = {"json.type_swap": 6, "json.huge_number": 2, "json.big_index": 3, "json.deep": 1, "json.deep_args": 2,
            "json.bad_utf8": 2, "json.surrogate": 2, "json.long_string": 1, "json.string": 5,
            "json.unknown_type": 4, "json.delete": 5, "json.dup_key": 2, "json.add_key": 2, "json.list": 4,
            "json.number": 3}
_JSON_NAMES = list(_WEIGHTS)
_JSON_W = list(_WEIGHTS.values())


@dataclass
class Pool:
    """What mutations borrow from the dialect's seeds: event types, strings and whole events."""

    types: list[str] = field(default_factory=list)
    strings: list[str] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    datas: list[bytes] = field(default_factory=list)

    @classmethod
    def build(cls, dialect: str, seeds: list[Any], rng: random.Random) -> "Pool":
        pool = cls()
        types: set[str] = set()
        strings: set[str] = set()
        for seed in seeds:
            doc = Doc.parse(seed.data, seed.format)
            pool.datas.append(seed.data)
            for ev in doc.events:
                if ev.data is None or len(ev.data) > 4096:
                    continue
                try:
                    obj = ev.json()
                except ValueError:
                    continue
                pool.events.append(ev)
                for parent, key in _nodes(obj):
                    if key in ("type", "event_type") and isinstance(parent[key], str):
                        types.add(parent[key])
                strings.update(_strings_of(obj, 30))
        pool.types = sorted(types)
        pool.strings = sorted(strings)[:2000]
        rng.shuffle(pool.events)
        pool.events = pool.events[:3000]
        return pool


def json_mutate(obj: Any, rng: random.Random, pool: Pool, name: str | None = None) -> tuple[bytes, str]:
    """Apply one JSON mutation to a copy of ``obj``; return the encoded result and the mutation's name."""
    raw = _Raw()
    nodes = _nodes(obj)
    name = name or rng.choices(_JSON_NAMES, _JSON_W)[0]
    if not nodes:
        return _dumps(_m_type_swap(None, None, obj, rng, raw, pool)), name
    fn = JSON_MUTATORS[name]
    # aim where the mutation matters: index keys for big_index, type keys for unknown_type, strings for text ones
    if name == "json.big_index":
        cands = [(p, k) for p, k in nodes if k in _INDEX_KEYS]
    elif name == "json.unknown_type":
        cands = [(p, k) for p, k in nodes if k in ("type", "event_type")]
    elif name in ("json.bad_utf8", "json.surrogate", "json.long_string", "json.deep_args", "json.string"):
        cands = [(p, k) for p, k in nodes if isinstance(p[k], str)]
    elif name == "json.add_key":
        cands = [(p, k) for p, k in nodes if isinstance(p[k], dict)]
    elif name == "json.list":
        cands = [(p, k) for p, k in nodes if isinstance(p[k], list)]
    else:
        cands = nodes
    parent, key = rng.choice(cands or nodes)
    value = parent[key]
    new = fn(parent, key, value, rng, raw, pool)
    if isinstance(new, tuple) and len(new) == 2 and new[0] is _REPLACE_PARENT:
        # replace the parent object itself: find it in its own container (or it is the root)
        marker = new[1]
        if parent is obj:
            return raw.splice(_dumps(marker)), name
        for gp, gk in nodes:
            if gp[gk] is parent:
                gp[gk] = marker
                break
    elif new is _DELETE:
        if isinstance(parent, dict):
            del parent[key]
        else:
            del parent[key]
    else:
        parent[key] = new
    return raw.splice(_dumps(obj)), name


# ---- byte mutations -------------------------------------------------------------------------------------
_TOKENS = (b"\n", b"\n\n", b"\r\n", b"\r", b"\r\n\r\n", b"data: ", b"data:", b"event: ", b": comment\n", b"id: 7\n",
           b"retry: 10\n", b"data: [DONE]\n\n", b"[DONE]", b'"', b"\\", b"{", b"}", b"[", b"]", b",", b":", b"\x00",
           b"\xef\xbb\xbf", b"\xff", b"\xc3", b"\xed\xa0\x80", b"\\ud800", b"\\u0000", b"null", b"1e999", b" ", b"\t",
           b'{"type":"ping"}', b"event: error\n", b"\n,", b'"}', b"}]}")


def _b_flip(data: bytearray, rng: random.Random, pool: Pool) -> None:
    if data:
        i = rng.randrange(len(data))
        data[i] ^= 1 << rng.randrange(8)


def _b_set(data: bytearray, rng: random.Random, pool: Pool) -> None:
    if data:
        data[rng.randrange(len(data))] = rng.choice((0, 0xff, 0x7f, 0x80, 10, 13, 34, 92, 123, 125, 91, 93, 44,
                                                     58, rng.randrange(256)))


def _b_insert(data: bytearray, rng: random.Random, pool: Pool) -> None:
    i = rng.randint(0, len(data))
    piece = rng.choice(_TOKENS) if rng.random() < 0.7 else bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
    data[i:i] = piece


def _b_delete(data: bytearray, rng: random.Random, pool: Pool) -> None:
    if data:
        i = rng.randrange(len(data))
        del data[i:i + rng.choice((1, 1, 2, 4, 16, 64, 512))]


def _b_truncate(data: bytearray, rng: random.Random, pool: Pool) -> None:
    if data:
        del data[rng.randrange(len(data)):]


def _b_repeat(data: bytearray, rng: random.Random, pool: Pool) -> None:
    if data:
        i = rng.randrange(len(data))
        piece = bytes(data[i:i + rng.randint(1, 256)])
        data[i:i] = piece * rng.choice((1, 2, 10, 1000))


def _b_splice(data: bytearray, rng: random.Random, pool: Pool) -> None:
    if pool.datas:
        other = rng.choice(pool.datas)
        if other:
            a = rng.randrange(len(other))
            i = rng.randint(0, len(data))
            data[i:i] = other[a:a + rng.randint(1, 2048)]


BYTE_MUTATORS: dict[str, Callable[[bytearray, random.Random, Pool], None]] = {
    "byte.flip": _b_flip,
    "byte.set": _b_set,
    "byte.insert": _b_insert,
    "byte.delete": _b_delete,
    "byte.truncate": _b_truncate,
    "byte.repeat": _b_repeat,
    "byte.splice": _b_splice,
}
_BYTE_NAMES = list(BYTE_MUTATORS)
_BYTE_W = [4, 3, 5, 4, 4, 1, 2]


def byte_mutate(data: bytes, rng: random.Random, pool: Pool, name: str | None = None) -> tuple[bytes, str]:
    name = name or rng.choices(_BYTE_NAMES, _BYTE_W)[0]
    buf = bytearray(data)
    BYTE_MUTATORS[name](buf, rng, pool)
    return bytes(buf), name


# ---- event mutations ------------------------------------------------------------------------------------
def _e_dup(doc: Doc, rng: random.Random, pool: Pool, dialect: str) -> None:
    if doc.events:
        i = rng.randrange(len(doc.events))
        doc.events.insert(rng.choice((i, rng.randint(0, len(doc.events)))), doc.events[i])


def _e_drop(doc: Doc, rng: random.Random, pool: Pool, dialect: str) -> None:
    if doc.events:
        del doc.events[rng.randrange(len(doc.events))]


def _e_swap(doc: Doc, rng: random.Random, pool: Pool, dialect: str) -> None:
    n = len(doc.events)
    if n >= 2:
        i = rng.randrange(n)
        j = min(n - 1, i + 1) if rng.random() < 0.6 else rng.randrange(n)
        doc.events[i], doc.events[j] = doc.events[j], doc.events[i]


def _e_after_terminator(doc: Doc, rng: random.Random, pool: Pool, dialect: str) -> None:
    """Move an event, or a run of events, after the stream's terminator (or copy one from another seed there)."""
    t = terminator_index(dialect, doc)
    if t is None:
        return
    r = rng.random()
    if r < 0.4 and t > 0:
        # a run of events (a whole block, say) moved from before the terminator to after it
        i = rng.randrange(t)
        j = min(t, i + rng.randint(1, 6))
        run = doc.events[i:j]
        del doc.events[i:j]
        t -= len(run)
        at = rng.randint(t + 1, len(doc.events))
        doc.events[at:at] = run
        return
    if r < 0.7 and t > 0:
        ev = doc.events.pop(rng.randrange(t))
        t -= 1
    elif pool.events:
        ev = rng.choice(pool.events)
    else:
        return
    doc.events.insert(rng.randint(t + 1, len(doc.events)), ev)


def _e_insert_foreign(doc: Doc, rng: random.Random, pool: Pool, dialect: str) -> None:
    if pool.events:
        doc.events.insert(rng.randint(0, len(doc.events)), rng.choice(pool.events))


def _e_truncate(doc: Doc, rng: random.Random, pool: Pool, dialect: str) -> None:
    if doc.events:
        del doc.events[rng.randrange(len(doc.events)):]
        doc.tail = b""


def _e_shuffle(doc: Doc, rng: random.Random, pool: Pool, dialect: str) -> None:
    n = len(doc.events)
    if n >= 3:
        i = rng.randrange(n - 2)
        j = min(n, i + rng.randint(2, 6))
        part = doc.events[i:j]
        rng.shuffle(part)
        doc.events[i:j] = part


def _e_sse_fields(doc: Doc, rng: random.Random, pool: Pool, dialect: str) -> None:
    """SSE only: change the event: line, add id/retry/comment lines, split data over two data lines, change the
    line ends, add a comment-only message. Events are never changed in place (they may be shared)."""
    if doc.kind != "sse" or not doc.events:
        return
    i = rng.randrange(len(doc.events))
    ev = doc.events[i]
    op = rng.randrange(6)
    lines = [ln for ln in ev.lines if not ln.startswith(b"event:")] if op < 2 else list(ev.lines)
    data = ev.data
    if op == 0 and pool.types:
        lines.insert(0, b"event: " + rng.choice(pool.types).encode())
    elif op == 1:
        lines.insert(0, b"event: " + rng.choice(_UNKNOWN_TYPES).encode("utf-8"))
    elif op == 2:
        lines.append(rng.choice((b"id: 1", b"id: \x00", b"retry: 5", b"retry: x", b": keep-alive", b"data",
                                 b"event:", b"data:")))
    elif op == 3 and data is not None and len(data) > 2:
        cut = rng.randrange(1, len(data))
        lines.append(b"data: " + data[:cut])
        data = data[cut:]
    elif op == 4:
        doc.sep = rng.choice((b"\n", b"\r\n", b"\r"))
        return
    else:
        doc.events.insert(rng.randint(0, len(doc.events)), Event([b": ping"], None))
        return
    doc.events[i] = Event(lines, data)


def _e_json(doc: Doc, rng: random.Random, pool: Pool, dialect: str) -> str | None:
    idx = doc.json_events()
    if not idx:
        return None
    i = rng.choice(idx)
    ev = doc.events[i]
    try:
        obj = ev.json()
    except ValueError:
        return None
    data, name = json_mutate(obj, rng, pool)
    doc.events[i] = Event(list(ev.lines), data)
    return name


EVENT_MUTATORS: dict[str, Callable[..., Any]] = {
    "event.dup": _e_dup,
    "event.drop": _e_drop,
    "event.swap": _e_swap,
    "event.after_terminator": _e_after_terminator,
    "event.insert_foreign": _e_insert_foreign,
    "event.truncate": _e_truncate,
    "event.shuffle": _e_shuffle,
    "event.sse_fields": _e_sse_fields,
}
_EVENT_NAMES = list(EVENT_MUTATORS)
_EVENT_W = [4, 4, 3, 3, 3, 2, 1, 2]


@dataclass
class Mutation:
    """A mutated input: its bytes, the names of the mutations applied, and (when the last step kept the event
    structure) the document, so properties can find the stream's terminator."""

    data: bytes
    names: list[str]
    doc: Doc | None


def mutate(data: bytes, fmt: str, dialect: str, rng: random.Random, pool: Pool) -> Mutation:
    """A random stack of 1 to 4 mutations: JSON-value and event ones on the parsed document, then (sometimes)
    byte ones on the result."""
    names: list[str] = []
    doc: Doc | None = Doc.parse(data, fmt)
    steps = rng.choice((1, 1, 1, 2, 2, 3, 4))
    structured = rng.random() < 0.75
    for _ in range(steps):
        if structured and doc is not None and rng.random() < 0.85:
            if rng.random() < 0.55:
                name = _e_json(doc, rng, pool, dialect)
                if name:
                    names.append(name)
            else:
                name = rng.choices(_EVENT_NAMES, _EVENT_W)[0]
                EVENT_MUTATORS[name](doc, rng, pool, dialect)
                names.append(name)
        else:
            if doc is not None:
                data = doc.dump()
                doc = None
            data, name = byte_mutate(data, rng, pool)
            names.append(name)
    if doc is not None:
        data = doc.dump()
    return Mutation(data, names, doc)
