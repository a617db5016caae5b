"""The floor: the least work that gets the right answer, approximating what Python cannot beat.

Split the byte stream into messages on the blank line (Bedrock: on the lengths in each binary frame's prelude) (a bytearray scanned once, so a message spread over many
chunks costs no more than one), take what follows ``data: ``, decode it with a module-level msgspec
``Decoder`` of minimal Structs for the dialect, concatenate each call's argument fragments, then decode each
call's arguments once. No validation beyond what the Structs imply, no state machine, no events, no logging.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Optional

import msgspec

__all__ = ["FLOORS"]

_decode_args = msgspec.json.decode


# ---- OpenAI Chat --------------------------------------------------------------------------------------------
class _CFn(msgspec.Struct, gc=False):
    arguments: Optional[str] = None


class _CTC(msgspec.Struct, gc=False):
    index: int = 0
    function: Optional[_CFn] = None


class _CDelta(msgspec.Struct, gc=False):
    tool_calls: Optional[list[_CTC]] = None


class _CChoice(msgspec.Struct, gc=False):
    delta: Optional[_CDelta] = None


class _CChunk(msgspec.Struct, gc=False):
    choices: Optional[list[_CChoice]] = None


_CHAT = msgspec.json.Decoder(_CChunk)


# ---- OpenAI Responses ---------------------------------------------------------------------------------------
class _REvent(msgspec.Struct, gc=False):
    type: str = ""
    item_id: Optional[str] = None
    delta: Optional[str] = None


_RESP = msgspec.json.Decoder(_REvent)


# ---- Anthropic ----------------------------------------------------------------------------------------------
class _ADelta(msgspec.Struct, gc=False):
    partial_json: Optional[str] = None


class _AEvent(msgspec.Struct, gc=False):
    index: int = 0
    delta: Optional[_ADelta] = None


_ANTH = msgspec.json.Decoder(_AEvent)


# ---- Gemini -------------------------------------------------------------------------------------------------
class _GPartial(msgspec.Struct, gc=False, rename="camel"):
    json_path: str = ""
    string_value: Optional[str] = None


class _GCall(msgspec.Struct, gc=False, rename="camel"):
    name: Optional[str] = None
    args: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    partial_args: Optional[list[_GPartial]] = None


class _GPart(msgspec.Struct, gc=False, rename="camel"):
    function_call: Optional[_GCall] = None


class _GContent(msgspec.Struct, gc=False):
    parts: Optional[list[_GPart]] = None


class _GCand(msgspec.Struct, gc=False):
    content: Optional[_GContent] = None


class _GResp(msgspec.Struct, gc=False):
    candidates: Optional[list[_GCand]] = None


_GEM = msgspec.json.Decoder(_GResp)


# ---- Gemini Interactions ------------------------------------------------------------------------------------
class _IDelta(msgspec.Struct, gc=False):
    arguments: Optional[str] = None


class _IEvent(msgspec.Struct, gc=False):
    index: int = 0
    delta: Optional[_IDelta] = None


_INTER = msgspec.json.Decoder(_IEvent)


def _messages(chunks: Iterable[bytes], sep: bytes, handle: Callable[[bytes], None]) -> None:
    """Call ``handle(payload)`` for every message's ``data:`` payload.

    The unfinished tail is joined to the next chunk and the result split on the separator; a tail that grows
    past 64 KiB (a message spread over many chunks) is kept as a list of pieces instead, each new chunk only
    probed for the separator, so a long message is copied once, not once per chunk.
    """
    seplen = len(sep)
    tail = b""
    pieces: list[bytes] = []
    for chunk in chunks:
        if pieces:
            if sep not in pieces[-1][1 - seplen:] + chunk[:seplen - 1] and sep not in chunk:
                pieces.append(chunk)
                continue
            pieces.append(chunk)
            data = b"".join(pieces)
            pieces.clear()
        else:
            data = tail + chunk if tail else chunk
        msgs = data.split(sep)
        tail = msgs.pop()
        for m in msgs:
            if m[:6] == b"data: ":
                handle(m[6:])
            else:
                d = m.find(b"data: ")
                if d >= 0:
                    handle(m[d + 6:])
        if len(tail) > 65536:
            pieces.append(tail)
            tail = b""
    if pieces:
        tail = b"".join(pieces)
    if tail:
        d = tail.find(b"data: ")
        if d >= 0:
            handle(tail[d + 6:].rstrip(b"\r\n"))


def floor_chat(chunks: Iterable[bytes]) -> list[Any]:
    frags: dict[int, list[str]] = {}
    decode = _CHAT.decode

    def handle(payload: bytes) -> None:
        if payload[:1] != b"{":
            return  # [DONE]
        for ch in decode(payload).choices or ():
            d = ch.delta
            if d is not None and d.tool_calls:
                for tc in d.tool_calls:
                    fn = tc.function
                    if fn is not None and fn.arguments:
                        lst = frags.get(tc.index)
                        if lst is None:
                            lst = frags[tc.index] = []
                        lst.append(fn.arguments)

    _messages(chunks, b"\n\n", handle)
    return [_decode_args("".join(frags[i])) for i in sorted(frags)]


def floor_responses(chunks: Iterable[bytes]) -> list[Any]:
    frags: dict[str, list[str]] = {}  # by item_id, in the order the items appeared
    decode = _RESP.decode

    def handle(payload: bytes) -> None:
        ev = decode(payload)
        if ev.delta is not None and ev.type == "response.function_call_arguments.delta":
            lst = frags.get(ev.item_id)  # type: ignore[arg-type]
            if lst is None:
                lst = frags[ev.item_id] = []  # type: ignore[index]
            lst.append(ev.delta)

    _messages(chunks, b"\n\n", handle)
    return [_decode_args("".join(v)) for v in frags.values()]


def floor_anthropic(chunks: Iterable[bytes]) -> list[Any]:
    frags: dict[int, list[str]] = {}
    decode = _ANTH.decode

    def handle(payload: bytes) -> None:
        ev = decode(payload)
        d = ev.delta
        if d is not None and d.partial_json:
            lst = frags.get(ev.index)
            if lst is None:
                lst = frags[ev.index] = []
            lst.append(d.partial_json)

    _messages(chunks, b"\n\n", handle)
    return [_decode_args("".join(frags[i])) for i in sorted(frags)]


def floor_gemini(chunks: Iterable[bytes]) -> list[Any]:
    calls: list[Any] = []  # msgspec.Raw (whole args) or {path: [fragments]} (Vertex streamed)
    decode = _GEM.decode

    def handle(payload: bytes) -> None:
        for cand in decode(payload).candidates or ():
            content = cand.content
            if content is None or not content.parts:
                continue
            for part in content.parts:
                fc = part.function_call
                if fc is None:
                    continue
                if fc.name is not None:
                    calls.append(fc.args if fc.args else {})
                if fc.partial_args:
                    cur = calls[-1]
                    for pa in fc.partial_args:
                        if pa.string_value is not None:
                            lst = cur.get(pa.json_path)
                            if lst is None:
                                lst = cur[pa.json_path] = []
                            lst.append(pa.string_value)

    _messages(chunks, b"\r\n\r\n", handle)
    out = []
    for c in calls:
        if isinstance(c, msgspec.Raw):
            out.append(_decode_args(c))
        else:
            out.append({path[2:]: "".join(v) for path, v in c.items()})  # "$.content" -> "content"
    return out


def floor_interactions(chunks: Iterable[bytes]) -> list[Any]:
    frags: dict[int, list[str]] = {}
    decode = _INTER.decode

    def handle(payload: bytes) -> None:
        if payload[:1] != b"{":
            return  # [DONE]
        ev = decode(payload)
        d = ev.delta
        if d is not None and d.arguments:
            lst = frags.get(ev.index)
            if lst is None:
                lst = frags[ev.index] = []
            lst.append(d.arguments)

    _messages(chunks, b"\n\n", handle)
    return [_decode_args("".join(frags[i])) for i in sorted(frags)]


# ---- Amazon Bedrock ConverseStream --------------------------------------------------------------------------
class _BToolUse(msgspec.Struct, gc=False):
    input: Optional[str] = None


class _BDelta(msgspec.Struct, gc=False, rename="camel"):
    tool_use: Optional[_BToolUse] = None


class _BEvent(msgspec.Struct, gc=False, rename="camel"):
    content_block_index: int = 0
    delta: Optional[_BDelta] = None


_BEDROCK = msgspec.json.Decoder(_BEvent)


def floor_bedrock(chunks: Iterable[bytes]) -> list[Any]:
    """AWS event-stream frames: read each message's total and header lengths from its prelude, cut the payload
    out (no CRC check, no header parsing: every payload is decoded), join the toolUse input fragments."""
    frags: dict[int, list[str]] = {}
    decode = _BEDROCK.decode
    buf = b""
    for chunk in chunks:
        buf = buf + chunk if buf else chunk
        pos, n = 0, len(buf)
        while n - pos >= 12:
            total = int.from_bytes(buf[pos:pos + 4], "big")
            if n - pos < total:
                break
            start = pos + 12 + int.from_bytes(buf[pos + 4:pos + 8], "big")
            ev = decode(buf[start:pos + total - 4])
            d = ev.delta
            if d is not None and d.tool_use is not None and d.tool_use.input:
                lst = frags.get(ev.content_block_index)
                if lst is None:
                    lst = frags[ev.content_block_index] = []
                lst.append(d.tool_use.input)
            pos += total
        buf = buf[pos:]
    return [_decode_args("".join(frags[i])) for i in sorted(frags)]


FLOORS: dict[str, Callable[[Iterable[bytes]], list[Any]]] = {
    "openai-chat": floor_chat,
    "openai-responses": floor_responses,
    "anthropic": floor_anthropic,
    "gemini": floor_gemini,
    "gemini-interactions": floor_interactions,
    "bedrock-converse": floor_bedrock,
}
