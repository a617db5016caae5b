"""Amazon Bedrock Converse: ``ConverseStream`` event streams and whole ``Converse`` bodies.

Wire facts (botocore's ``bedrock-runtime`` service model, and the recordings in tests/fixtures/real/bedrock-converse):

* A streamed body is AWS event-stream framing (``toolwire.codecs.eventstream``), not SSE: the framing is named
  ``eventstream`` and ``format="auto"`` recognises it from the checksum of its first 12 bytes. Each ``event``
  message's ``:event-type`` header names the event and its payload is the JSON of that event's member (not wrapped
  in its name, padded with a random ``p``). ``exception`` messages (``:exception-type``: ``throttlingException``,
  ``validationException`` …, a ``{"message"}`` payload) and ``error`` messages (``:error-code``,
  ``:error-message``) are errors of the provider.
* Events: ``messageStart`` (role) → per block ``contentBlockStart`` (tool blocks only: ``start.toolUse`` with
  ``toolUseId``, ``name`` and, for a tool the provider runs itself, ``type: server_tool_use``; ``start.toolResult``
  for that tool's result) / ``contentBlockDelta`` (``text``, ``toolUse.input`` text fragments,
  ``reasoningContent`` text / signature / redactedContent, ``citation``, ``toolResult``, ``image``) /
  ``contentBlockStop`` (a call's terminator) → ``messageStop`` (``stopReason``: the end of the turn) → ``metadata``
  (usage, metrics), the only event accepted after ``messageStop``. A text, reasoning or citation block has no
  ``contentBlockStart``: its first delta opens it. Unknown events and delta members are skipped, never fatal.
* A whole ``Converse`` body is ``{output: {message: {role, content: [blocks]}}, stopReason, usage, metrics}``, a
  tool's ``input`` a JSON object (read as the JSON value it is: a string holding JSON is a string, refused as
  ``not_an_object``; a ``toolUse`` that is not an object is a protocol error); an HTTP error body is ``{"message": ...}``. The SDK's own event form,
  ``{"contentBlockDelta": {...}}`` per JSON line, is read too.
* ``max_tokens`` and ``model_context_window_exceeded`` cut the last block's call even when it had closed;
  ``malformed_tool_use`` and ``malformed_model_output`` end the turn with an error (nothing runs).

The assistant message for replay is ``{"role": "assistant", "content": [blocks]}`` in the provider's JSON form:
reasoning (``reasoningContent.reasoningText`` with its ``signature``, ``redactedContent`` as base64) verbatim and
in order, text, citations, tool blocks with their ``input`` as an object, server tools' results.
"""

from __future__ import annotations

import base64
import binascii
import struct
import zlib
from collections.abc import Mapping
from typing import Annotated, Any

import msgspec

from .. import _log
from ..types import FinishReason, ProblemCode, StreamError, TokenUsage
from .base import BlockIndexes, Codec, Framing, cache_split_usage
from .capabilities import Capabilities, Limit
from .declare import bedrock_converse as _declarations
from .http import bedrock_converse as _http
from .dialect import Dialect
from .eventstream import EventStreamDecoder, EventStreamMessage, _headers
from .results import bedrock_converse as _results

__all__ = ["BedrockConverseCodec", "CAPABILITIES", "DIALECT", "EVENTSTREAM", "EventStreamFramer"]

PROVIDER = "bedrock-converse"

_STOP = {
    "end_turn": FinishReason.STOP,
    "stop_sequence": FinishReason.STOP,
    "tool_use": FinishReason.TOOL_CALLS,
    "max_tokens": FinishReason.LENGTH,
    "model_context_window_exceeded": FinishReason.LENGTH,
    "guardrail_intervened": FinishReason.CONTENT_FILTER,
    "content_filtered": FinishReason.CONTENT_FILTER,
    "malformed_tool_use": FinishReason.ERROR,
    "malformed_model_output": FinishReason.ERROR,
}

#: the modelled exceptions of ConverseStream and Converse, with the HTTP status botocore's model gives them
EXCEPTION_STATUS = {
    "internalServerException": 500, "modelStreamErrorException": 424, "validationException": 400,
    "throttlingException": 429, "serviceUnavailableException": 503, "accessDeniedException": 403,
    "resourceNotFoundException": 404, "modelTimeoutException": 408, "modelNotReadyException": 429,
    "modelErrorException": 424,
}

_EVENTS = frozenset({"messageStart", "contentBlockStart", "contentBlockDelta", "contentBlockStop", "messageStop",
                     "metadata"})
#: what the framer puts in an item's ``event`` for a message that is not an event
_EXCEPTION = ":exception:"
_ERROR = ":error:"
_OTHER = ":message-type:"


# ---- the framing ------------------------------------------------------------------------------------------------
class _Item(msgspec.Struct, gc=False):
    """One framed message as the codec takes it: ``event`` (the event's name, or a marker for an exception or an
    error) and ``data`` (its payload bytes)."""

    event: str | None
    data: bytes


def _item(m: EventStreamMessage) -> _Item:
    headers = m.headers
    kind = headers.get(":message-type")
    if kind == "event" or not isinstance(kind, str):  # an event (a header that is not a string is no type)
        event = headers.get(":event-type")
        return _Item(event if isinstance(event, str) else None, m.payload)
    if kind == "exception":
        return _Item(_EXCEPTION + (m.exception_type or ""), m.payload)
    if kind == "error":
        return _Item(_ERROR + (m.error_code or ""),
                     msgspec.json.encode({"code": m.error_code, "message": m.error_message}))
    return _Item(_OTHER + kind, m.payload)


#: the ``event`` of the item each headers section gives, for the sections whose item carries the payload as it
#: came (all but an error's): a stream repeats a handful of sections, one per event type
_SECTION_EVENTS: dict[bytes, str | None] = {}
_SECTION_EVENTS_MAX = 256
_SECTION_EVENTS_SIZE = 512


def _item_of(section: bytes, payload: bytes, offset: int) -> _Item:
    """``_item`` of the message of ``section`` and ``payload``; the section's ``event`` is kept in
    ``_SECTION_EVENTS`` when the item is ``_Item(event, payload)``: ``_item`` reads nothing but the headers (a
    function of the section's bytes) and, except for an error, passes the payload through unchanged. A section
    that fails to parse raises as it does in ``EventStreamDecoder`` (and is never kept)."""
    item = _item(EventStreamMessage(_headers(section, offset) if section else {}, payload))
    if item.data is payload and len(section) <= _SECTION_EVENTS_SIZE:  # not an error, whose data it builds
        if len(_SECTION_EVENTS) >= _SECTION_EVENTS_MAX:
            _SECTION_EVENTS.clear()  # start over rather than keep sections that may never come back
        _SECTION_EVENTS[section] = item.event
    return item


class EventStreamFramer(EventStreamDecoder):
    """``EventStreamDecoder`` with the shape of the framers in ``toolwire.framing``: each message becomes an item
    with ``.event`` and ``.data`` (``_item``), built straight from the message's checked bytes. Bounded by
    ``max_message_bytes``; any chunking gives the same items; damage is an ``EventStreamError`` (a
    ``FramingError``)."""

    __slots__ = ()

    _build = staticmethod(_item_of)
    _known = _SECTION_EVENTS  # type: ignore[assignment]
    _make = _Item  # a section seen before: its event and the payload


_PRELUDE = struct.Struct(">III")


def sniff(head: bytes) -> bool | None:
    """An event-stream message starts with a 12-byte prelude whose last four bytes are the CRC-32 of the first
    eight (and a total length of at least 16 bytes): None until 12 bytes are there."""
    if len(head) < 12:
        return None
    total, _, crc = _PRELUDE.unpack_from(head)
    return total >= 16 and zlib.crc32(head[:8]) == crc


#: the framing of a ConverseStream body
EVENTSTREAM = Framing(name="eventstream", make=EventStreamFramer, sniff=sniff)


# ---- blocks -----------------------------------------------------------------------------------------------------
class _Block:
    """One content block as it streams: its kind (``text``, ``reasoning``, ``toolUse``, ``toolResult``, ``image``
    or an unknown start's member), the call it is, what its deltas built."""

    __slots__ = ("kind", "start", "rec", "parts", "signature", "redacted", "citations", "results", "extra",
                 "stopped")

    def __init__(self, kind: str, start: dict[str, Any] | None = None, rec: Any = None) -> None:
        self.kind = kind
        self.start = start if start is not None else {}
        self.rec = rec
        self.parts: list[str] = []
        self.signature: str | None = None
        self.redacted: list[str] = []
        self.citations: list[Any] = []
        self.results: list[Any] = []
        self.extra: dict[str, Any] = {}
        self.stopped = False

    def wire(self) -> dict[str, Any] | None:
        """The block in a Converse message's content (None for a block that says nothing)."""
        kind = self.kind
        if kind == "text":
            text = "".join(self.parts)
            if self.citations:
                body: dict[str, Any] = {"citations": list(self.citations)}
                if text:
                    body["content"] = [{"text": text}]
                return {"citationsContent": body}
            return {"text": text}
        if kind == "reasoning":
            if self.redacted and not self.parts and self.signature is None:
                return {"reasoningContent": {"redactedContent": _joined_base64(self.redacted)}}
            text_block: dict[str, Any] = {"text": "".join(self.parts)}
            if self.signature is not None:
                text_block["signature"] = self.signature
            return {"reasoningContent": {"reasoningText": text_block}}
        if kind == "toolResult":
            return {"toolResult": {**self.start, "content": list(self.results)}}
        if kind == "image":
            return {"image": {**self.start, **self.extra}}
        if kind == "toolUse":
            return {"toolUse": dict(self.start)}
        return {kind: self.start} if self.start else None


def _joined_base64(pieces: list[str]) -> str:
    """Several base64 pieces of one blob as one base64 string (one piece stays as it came)."""
    if len(pieces) == 1:
        return pieces[0]
    try:
        return base64.b64encode(b"".join(base64.b64decode(p, validate=True) for p in pieces)).decode()
    except (binascii.Error, ValueError):
        return "".join(pieces)


_DECODE = msgspec.json.Decoder()

_Index = Annotated[int, msgspec.Meta(ge=0)]


# ---- wire Structs (the members of ConverseStreamOutput, and a Converse body), read from decoded objects -----------
class _MessageStart(msgspec.Struct, gc=False):
    role: Any = None


class _BlockStart(msgspec.Struct, gc=False):
    contentBlockIndex: _Index
    start: dict[str, Any]


class _BlockDelta(msgspec.Struct, gc=False):
    contentBlockIndex: _Index
    delta: dict[str, Any]


class _FastToolInput(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    input: str


class _FastToolDelta(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    toolUse: _FastToolInput


class _FastDelta(msgspec.Struct, gc=False):
    """The commonest event, a ``contentBlockDelta`` whose delta is exactly one ``toolUse.input`` fragment, decoded
    in one step (anything else about it, including a delta with another member, fails this shape and takes the
    general path, which reports it)."""

    contentBlockIndex: _Index
    delta: _FastToolDelta


_FAST_DELTA = msgspec.json.Decoder(_FastDelta)


class _BlockStop(msgspec.Struct, gc=False):
    contentBlockIndex: _Index


class _MessageStop(msgspec.Struct, gc=False):
    stopReason: Any = None
    additionalModelResponseFields: Any = None


class _Metadata(msgspec.Struct, gc=False):
    usage: Any = None
    metrics: Any = None
    trace: Any = None
    serviceTier: Any = None
    performanceConfig: Any = None


class _ToolUse(msgspec.Struct, gc=False):
    toolUseId: Any = None
    name: Any = None
    type: Any = None
    input: Any = None


class _Converse(msgspec.Struct, gc=False):
    output: Any = None
    stopReason: Any = None
    usage: Any = None
    metrics: Any = None
    additionalModelResponseFields: Any = None


_CONVERSE_MEMBERS = msgspec.json.Decoder(_Converse)


def _whole_members(data: bytes) -> dict[str, Any] | None:
    """The members of a whole Converse body that toolwire reads, when the body as a whole does not decode into
    Python values: members it ignores are skipped without being converted (a number like ``1e400`` there is
    valid JSON that no Python value takes). None when those members do not decode either, or it is no body."""
    try:
        body = _CONVERSE_MEMBERS.decode(data)
    except msgspec.DecodeError:
        return None
    if body.output is None and body.stopReason is None:
        return None
    return {f: getattr(body, f) for f in body.__struct_fields__}


_SHAPES: dict[str, type[msgspec.Struct]] = {
    "messageStart": _MessageStart, "contentBlockStart": _BlockStart, "contentBlockDelta": _BlockDelta,
    "contentBlockStop": _BlockStop, "messageStop": _MessageStop, "metadata": _Metadata}


class BedrockConverseCodec(Codec):
    provider = PROVIDER
    framing = EVENTSTREAM
    length_cuts_last_item = True  # max_tokens right after a toolUse block's stop still cut that call

    @staticmethod
    def read_usage(raw: Mapping[str, Any]) -> TokenUsage | None:
        """``inputTokens`` leaves the cache out: the whole input adds the cache reads and writes."""
        return cache_split_usage(raw, uncached="inputTokens", cache_read="cacheReadInputTokens",
                                 cache_write="cacheWriteInputTokens", output="outputTokens")

    def __init__(self) -> None:
        super().__init__()
        self._blocks: dict[int, _Block] = {}
        self._started_indexes = BlockIndexes()
        self._ids: set[str] = set()
        self._started = False
        self._role: str | None = None
        self._metadata = False
        self._whole: dict[str, Any] | None = None  # the message of a whole body, replayed as it came

    # ---- payloads -----------------------------------------------------------------------------------------
    def on_payload(self, event: str | None, data: bytes) -> None:
        if event == "contentBlockDelta":
            # the fast path: an argument fragment of a call block still streaming
            try:
                fast = _FAST_DELTA.decode(data)
            except msgspec.DecodeError:  # also a ValidationError: the general path below says what is wrong
                pass
            else:
                blk = self._blocks.get(fast.contentBlockIndex)
                if blk is not None and blk.rec is not None and not blk.stopped:
                    text = fast.delta.toolUse.input
                    if text:
                        blk.rec.fragments.append(text)
                    return
        elif event is not None and event[:1] == ":":  # (after the delta test: "contentBlockDelta" has no colon)
            self._not_an_event(event, data)
            return
        try:
            doc = _DECODE.decode(data)
        except msgspec.DecodeError as exc:
            whole = _whole_members(data) if event is None else None
            if whole is None:
                self.unrecognised(exc, data)
            else:  # a whole body with a value no Python type takes in a member toolwire never reads
                self._whole_body(whole, data)
            return
        if not isinstance(doc, dict):
            self.unrecognised(ValueError(f"a JSON {type(doc).__name__}, not an object"), data)
            return
        if event is None:
            self._untyped(doc, data)
        elif event in _EVENTS:
            self._event(event, doc, data)
        else:
            self.skip("unknown event type", type=event)

    def _untyped(self, doc: dict[str, Any], data: bytes) -> None:
        """A payload without an event name: a whole Converse body, an error body, or one event in the SDK's form
        (``{"contentBlockDelta": {...}}``)."""
        if "output" in doc or "stopReason" in doc:
            self._whole_body(doc, data)
            return
        if len(doc) == 1:
            (name, value), = doc.items()
            if name in _EVENTS and isinstance(value, dict):
                self._event(name, value, data)
                return
            if name in EXCEPTION_STATUS and isinstance(value, dict):
                self._exception(name, value)
                return
        if isinstance(doc.get("message"), str) and not ({"role", "content"} & set(doc)):
            kind = doc.get("__type") or doc.get("code") or doc.get("Code")
            self.asm.stream_error(StreamError(type=str(kind).rpartition("#")[2] if kind else "api_error",
                                              message=doc["message"], raw=doc))
            return
        self.unrecognised(ValueError("no Converse member"), data)

    def _not_an_event(self, event: str, data: bytes) -> None:
        if event.startswith(_EXCEPTION):
            try:
                doc = _DECODE.decode(data) if data else {}
            except msgspec.DecodeError:
                doc = {"message": data[:500].decode("utf-8", "replace")}
            self._exception(event[len(_EXCEPTION):] or "exception", doc if isinstance(doc, dict) else {})
        elif event.startswith(_ERROR):
            doc = _DECODE.decode(data)
            self.asm.stream_error(StreamError(type=str(doc.get("code") or "error"),
                                              message=str(doc.get("message") or "the stream reported an error"),
                                              code=doc.get("code"), raw=doc))
        else:
            self.skip("unknown message type", type=event[len(_OTHER):])

    def _exception(self, name: str, doc: dict[str, Any]) -> None:
        message = doc.get("message")
        status = EXCEPTION_STATUS.get(name[:1].lower() + name[1:])
        original = doc.get("originalStatusCode")
        self.asm.stream_error(StreamError(
            type=name, message=str(message) if message is not None else name,
            code=str(original) if type(original) is int else None, status=status, raw=doc))

    def _event(self, name: str, body: dict[str, Any], data: bytes) -> None:
        try:
            ev = msgspec.convert(body, _SHAPES[name])
        except msgspec.ValidationError as exc:
            self.asm.protocol_error(f"{name} event does not fit its shape: {exc}", data)
            return
        cls = type(ev)
        if cls is _BlockDelta:
            self._delta(ev, data)
        elif cls is _BlockStart:
            self._block_start(ev, data)
        elif cls is _BlockStop:
            self._block_stop(ev)
        elif cls is _MessageStart:
            self._message_start(ev)
        elif cls is _MessageStop:
            self._message_stop(ev.stopReason)
        else:
            self._read_metadata(ev, data)

    # ---- events -------------------------------------------------------------------------------------------
    def _message_start(self, ev: _MessageStart) -> None:
        if self._started:
            self.asm.stream_error(StreamError(type="spliced_stream", message="a second messageStart: two "
                                              "generations must not merge"), ProblemCode.PROTOCOL_ERROR)
            return
        self._started = True
        role = ev.role
        self._role = role if isinstance(role, str) else None
        if role != "assistant":
            self.asm.protocol_error(f"messageStart with role {role!r}, not 'assistant'")

    def _open(self, index: int, block: _Block) -> None:
        self._blocks[index] = block
        self._started_indexes.add(index)
        self.asm.item(index, block.rec)  # the block of the highest index is the one a token limit cut

    def _block_start(self, ev: _BlockStart, data: bytes) -> None:
        asm = self.asm
        index = ev.contentBlockIndex
        if index in self._started_indexes:
            asm.protocol_error(f"contentBlockStart for block {index}, which was already started")
            return
        start = ev.start
        if len(start) != 1:
            asm.protocol_error(f"contentBlockStart for block {index} without exactly one start member", data)
            return
        (kind, value), = start.items()
        if not isinstance(value, dict):
            asm.protocol_error(f"contentBlockStart {kind} for block {index} is not an object", data)
            return
        if kind == "toolUse":
            self._open(index, self._tool(index, value, None))
        elif kind in ("toolResult", "image"):
            self._open(index, _Block(kind, dict(value)))
        else:
            _log.emit(_log.DEBUG, "payload.skipped", provider=self.provider, reason="unknown block start",
                      type=kind, position=asm.position)
            self._open(index, _Block(kind, dict(value)))

    def _tool(self, index: int, value: dict[str, Any], whole_input: Any) -> _Block:
        """A toolUse block's call; ``whole_input``: the input object of a whole body (None in a stream)."""
        asm = self.asm
        tool = msgspec.convert(value, _ToolUse)
        tid, name, kind = tool.toolUseId, tool.name, tool.type
        tid = tid if isinstance(tid, str) else None
        if tid:
            if tid in self._ids:
                asm.protocol_error(f"block {index} repeats the toolUseId {tid!r} of an earlier block")
                return _Block("toolUse", {"toolUseId": tid})
            self._ids.add(tid)
        server = kind == "server_tool_use"
        # the input of a whole body is a JSON value: its JSON text, so that a string stays a string (never parsed
        # again into an object the model did not send)
        initial = None if whole_input is None else msgspec.json.encode(whole_input).decode()
        rec = asm.open_call(call_id=tid, name=name if isinstance(name, str) else None, server=server,
                            server_type=kind if server else None, meta={"block_index": index}, initial=initial)
        start = {k: v for k, v in value.items() if k != "input"}
        return _Block("toolUse", start, rec)

    def _delta(self, ev: _BlockDelta, data: bytes) -> None:
        asm = self.asm
        index, delta = ev.contentBlockIndex, ev.delta
        blk = self._blocks.get(index)
        if blk is None:
            if index in self._started_indexes:
                asm.protocol_error(f"contentBlockDelta for block {index} after its contentBlockStop")
                return
            kind = "text" if ("text" in delta or "citation" in delta) else \
                "reasoning" if "reasoningContent" in delta else None
            if kind is None:
                asm.protocol_error(f"contentBlockDelta for block {index}, which was never started", data)
                return
            blk = _Block(kind)
            self._open(index, blk)
        elif blk.stopped:
            tool = delta.get("toolUse")
            if blk.rec is not None and isinstance(tool, dict) and isinstance(tool.get("input"), str) \
                    and tool["input"]:
                blk.rec.fragments.append(tool["input"])  # fails the call and records the protocol error
            else:
                asm.protocol_error(f"contentBlockDelta for block {index} after its contentBlockStop")
            return
        for member, value in delta.items():
            self._delta_member(index, blk, member, value, data)

    def _delta_member(self, index: int, blk: _Block, member: str, value: Any, data: bytes) -> None:
        asm = self.asm
        kind = blk.kind
        if member == "toolUse":
            text = value.get("input") if isinstance(value, dict) else None
            if blk.rec is None or not isinstance(text, str):
                asm.protocol_error(f"a toolUse delta for {kind} block {index}", data)
            elif text:
                blk.rec.fragments.append(text)
        elif member == "text":
            if kind != "text" or not isinstance(value, str):
                asm.protocol_error(f"a text delta for {kind} block {index}", data)
            elif value:
                blk.parts.append(value)
                asm.add_text(value)
        elif member == "citation":
            if kind != "text":
                asm.protocol_error(f"a citation delta for {kind} block {index}", data)
            else:
                blk.citations.append(value)
        elif member == "reasoningContent":
            if kind != "reasoning" or not isinstance(value, dict):
                asm.protocol_error(f"a reasoningContent delta for {kind} block {index}", data)
                return
            for key, piece in value.items():
                if not isinstance(piece, str):
                    asm.protocol_error(f"reasoningContent.{key} of block {index} is not a string", data)
                elif key == "text":
                    blk.parts.append(piece)
                elif key == "signature":
                    blk.signature = piece  # assigned, not appended, as the SDKs do
                elif key == "redactedContent":
                    blk.redacted.append(piece)
                else:
                    blk.extra.setdefault(key, piece)
        elif member == "toolResult":
            if kind != "toolResult" or not isinstance(value, list):
                asm.protocol_error(f"a toolResult delta for {kind} block {index}", data)
            else:
                blk.results.extend(value)
        elif member == "image":
            if kind != "image" or not isinstance(value, dict):
                asm.protocol_error(f"an image delta for {kind} block {index}", data)
            else:
                blk.extra.update(value)
        else:
            _log.emit(_log.DEBUG, "payload.skipped", provider=self.provider, reason="unknown delta member",
                      type=member, position=asm.position)

    def _block_stop(self, ev: _BlockStop) -> None:
        asm = self.asm
        index = ev.contentBlockIndex
        blk = self._blocks.get(index)
        if blk is None or blk.stopped:
            if blk is None and index not in self._started_indexes:
                asm.protocol_error(f"contentBlockStop for block {index}, which was never started")
            else:
                asm.protocol_error(f"second contentBlockStop for block {index}")
            return
        blk.stopped = True
        asm.terminate(blk.rec)
        if not asm.keep_calls:
            del self._blocks[index]  # streaming mode keeps nothing for replay: memory bounded by the open blocks

    def _message_stop(self, raw: Any) -> None:
        asm = self.asm
        asm.stream_ended("messageStop")
        if not isinstance(raw, str):
            asm.stream_error(StreamError(type="protocol_error", message="messageStop without a stopReason"),
                             ProblemCode.STREAM_CUT)
            return
        asm.end_choice(0, _STOP.get(raw, FinishReason.OTHER), raw, "messageStop")

    def _read_metadata(self, ev: _Metadata, data: bytes) -> None:
        if self._metadata:
            self.asm.protocol_error("a second metadata event", data)
            return
        self._metadata = True
        if ev.usage is not None:
            self.asm.usage = ev.usage

    def after_end(self, event: str | None, data: bytes) -> None:
        """``metadata`` (usage and metrics) follows ``messageStop``; anything else after it is a protocol error."""
        if event == "metadata" and not self._metadata:
            try:
                doc = _DECODE.decode(data)
            except msgspec.DecodeError as exc:
                self.bad_payload(exc, data)
                return
            if isinstance(doc, dict):
                self._event("metadata", doc, data)
                return
        if event is None and not self._metadata:  # the SDK's form: {"metadata": {...}}
            try:
                doc = _DECODE.decode(data)
            except msgspec.DecodeError:
                doc = None
            if isinstance(doc, dict) and len(doc) == 1 and isinstance(doc.get("metadata"), dict):
                self._event("metadata", doc["metadata"], data)
                return
        super().after_end(event, data)

    # ---- a whole body -------------------------------------------------------------------------------------
    def _whole_body(self, doc: dict[str, Any], data: bytes) -> None:
        asm = self.asm
        if self._started:
            asm.stream_error(StreamError(type="spliced_stream", message="a Converse body inside a stream"),
                             ProblemCode.PROTOCOL_ERROR)
            return
        self._started = True
        try:
            body = msgspec.convert(doc, _Converse)
        except msgspec.ValidationError as exc:  # pragma: no cover - every member is Any
            asm.protocol_error(f"a Converse body does not fit its shape: {exc}", data)
            return
        output = body.output
        message = output.get("message") if isinstance(output, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            asm.protocol_error("a Converse body without output.message.content", data)
            return
        self._role = message.get("role") if isinstance(message.get("role"), str) else None
        if self._role != "assistant":
            asm.protocol_error(f"a Converse message with role {self._role!r}, not 'assistant'")
            return
        self._whole = message
        asm.usage = body.usage
        for i, block in enumerate(content):
            if not isinstance(block, dict):
                asm.protocol_error(f"content block {i} is not an object", data)
                return
            tool = block.get("toolUse")
            if tool is not None and not isinstance(tool, dict):
                asm.protocol_error(f"the toolUse of content block {i} is not an object", data)
                return
            if isinstance(tool, dict):
                blk = self._tool(i, tool, tool.get("input"))
                self._open(i, blk)
                asm.terminate(blk.rec)
                continue
            text = block.get("text")
            if isinstance(text, str) and text:
                asm.add_text(text)
            elif isinstance(block.get("citationsContent"), dict):
                for piece in block["citationsContent"].get("content") or ():
                    if isinstance(piece, dict) and isinstance(piece.get("text"), str):
                        asm.add_text(piece["text"])
            asm.item(i, None)
        self._message_stop(body.stopReason)
        self._metadata = True

    # ---- the turn -----------------------------------------------------------------------------------------
    def assistant_message(self) -> Any:
        """``{"role": "assistant", "content": [blocks]}``: a whole body's message as it came; a stream's blocks in
        index order, built from their deltas, each toolUse ``input`` the parsed object. None in streaming mode
        (``keep_calls=False``), which keeps nothing for replay."""
        if not self.asm.keep_calls:
            return None
        if self._whole is not None:
            return msgspec.json.decode(msgspec.json.encode(self._whole))  # a copy the caller may edit
        content = []
        for index in sorted(self._blocks):
            blk = self._blocks[index]
            block = blk.wire()
            if block is None:
                continue
            rec = blk.rec
            if rec is not None:
                # input that did not parse is an empty object here; the replay (results part) puts the text back
                block["toolUse"]["input"] = rec.args if isinstance(rec.args, dict) else {}
            content.append(block)
        return {"role": self._role or "assistant", "content": content}


# ---- the dialect record -------------------------------------------------------------------------------------------
CAPABILITIES = Capabilities(
    dialect=PROVIDER, endpoint="POST /model/{modelId}/converse, POST /model/{modelId}/converse-stream",
    name_pattern=r"[a-zA-Z0-9_-]{1,64}", name_max=64,
    name_source="botocore bedrock-runtime model: ToolName (min 1, max 64, pattern [a-zA-Z0-9_-]+)",
    max_tools=Limit(None, "not documented for Converse (ToolConfiguration.tools: min 1)", documented=False),
    schema_depth=Limit(None, "not documented", documented=False),
    max_request_bytes=Limit(None, "not documented for Converse", documented=False),
    tool_kinds_source="Bedrock Converse: a toolSpec takes a JSON Schema input (inputSchema.json)",
    schema_root="object",
    schema_root_source="Bedrock Converse: inputSchema.json is the JSON Schema of the tool's input object "
                       "(models reject a root that is not type object)",
    ids_echoed="toolResult.toolUseId = toolUse.toolUseId; all results in one user message, in call order",
    signatures="reasoningContent.reasoningText.signature and reasoningContent.redactedContent, replayed verbatim",
    tool_turn_finish=("tool_use", "end_turn", "stop_sequence"),
    transient_statuses=(408, 429, 500, 502, 503, 504),
    permanent_statuses=(400, 401, 403, 404, 413, 422),
    transient_error_types=("throttlingException", "ThrottlingException", "serviceUnavailableException",
                           "ServiceUnavailableException", "internalServerException", "InternalServerException",
                           "modelStreamErrorException", "ModelStreamErrorException", "ModelNotReadyException",
                           "modelNotReadyException", "ModelTimeoutException", "modelTimeoutException"),
    delay_hints=(),
)

DIALECT = Dialect(id=PROVIDER, codec=BedrockConverseCodec, declarations=_declarations.PART,
                  results=_results.PART, capabilities=CAPABILITIES, http=_http.PART,
                  sim="toolwire.codecs._sim.bedrock_converse:BedrockConverse", order=60)
