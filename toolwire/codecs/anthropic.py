"""Anthropic Messages: streaming events and non-streaming message bodies.

Wire facts: ``message_start`` → per block ``content_block_start`` / ``content_block_delta`` /
``content_block_stop`` (``index`` is the position in ``message.content``) → ``message_delta`` (``stop_reason``)
→ ``message_stop``, the stream's terminator (nothing but a ``ping`` may follow it); ``ping`` and ``error`` may
appear anywhere before it; unknown event and delta types are skipped. Every ``stop_reason`` a message states
(``message_start``, each ``message_delta``) is one of its ends: the worst of them is its finish.
``tool_use`` blocks are the application's calls; ``server_tool_use`` and ``mcp_tool_use`` run at the provider
and go to ``server_calls``. A tool's input streams as ``input_json_delta.partial_json`` fragments and is parsed
at ``content_block_stop`` (an empty buffer is ``{}``). Thinking, redacted thinking and signatures are kept
verbatim in the assistant message for replay. A message whose ``role`` is not ``assistant`` (a body's, or
``message_start``'s; absent is fine) is a protocol error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Union

import msgspec

from .. import _log
from ..types import CallKind, FinishReason, ProblemCode, StreamError, TokenUsage
from .base import BlockIndexes, Codec, cache_split_usage
from .capabilities import Capabilities, Limit
from .declare import anthropic as _declarations
from .dialect import Dialect
from .http import anthropic as _http
from .results import anthropic as _results

__all__ = ["AnthropicCodec", "DIALECT", "CAPABILITIES"]

_CLIENT_TOOL_BLOCKS = frozenset({"tool_use"})
_SERVER_TOOL_BLOCKS = frozenset({"server_tool_use", "mcp_tool_use"})

_STOP = {
    "end_turn": FinishReason.STOP,
    "stop_sequence": FinishReason.STOP,
    "tool_use": FinishReason.TOOL_CALLS,
    "max_tokens": FinishReason.LENGTH,
    "model_context_window_exceeded": FinishReason.LENGTH,
    "refusal": FinishReason.CONTENT_FILTER,
    "pause_turn": FinishReason.PAUSE,
}


# ---- wire Structs ---------------------------------------------------------------------------------------
class _InputJsonDelta(msgspec.Struct, tag="input_json_delta", tag_field="type", gc=False):
    partial_json: str = ""


class _TextDelta(msgspec.Struct, tag="text_delta", tag_field="type", gc=False):
    text: str = ""


class _ThinkingDelta(msgspec.Struct, tag="thinking_delta", tag_field="type", gc=False):
    thinking: str = ""


class _SignatureDelta(msgspec.Struct, tag="signature_delta", tag_field="type", gc=False):
    signature: str = ""


class _CitationsDelta(msgspec.Struct, tag="citations_delta", tag_field="type", gc=False):
    citation: Any = None


_Delta = Union[_InputJsonDelta, _TextDelta, _ThinkingDelta, _SignatureDelta, _CitationsDelta]


class _Event(msgspec.Struct, tag_field="type", gc=False):
    pass


class _MessageStart(_Event, tag="message_start"):
    message: msgspec.Raw


class _BlockStart(_Event, tag="content_block_start"):
    index: int
    content_block: msgspec.Raw


class _BlockDelta(_Event, tag="content_block_delta"):
    index: int
    delta: _Delta


class _BlockDeltaAny(msgspec.Struct, gc=False):
    index: int
    delta: dict[str, Any]


class _BlockStop(_Event, tag="content_block_stop"):
    index: int


class _MessageDeltaBody(msgspec.Struct, gc=False):
    stop_reason: str | None = None
    stop_sequence: str | None = None
    stop_details: Any = None


class _MessageDelta(_Event, tag="message_delta"):
    delta: _MessageDeltaBody = msgspec.field(default_factory=_MessageDeltaBody)
    usage: Any = None


class _MessageStop(_Event, tag="message_stop"):
    pass


class _Ping(_Event, tag="ping"):
    pass


class _ErrorBody(msgspec.Struct, gc=False):
    type: str | None = None
    message: str | None = None


class _Error(_Event, tag="error"):
    error: Any = None
    request_id: str | None = None


class _Message(_Event, tag="message"):
    """A whole (non-streaming) message, or the ``message`` of ``message_start``."""

    id: str | None = None
    model: str | None = None
    role: str | None = None
    content: list[msgspec.Raw] = msgspec.field(default_factory=list)
    stop_reason: str | None = None
    stop_sequence: str | None = None
    usage: Any = None


class _Envelope(msgspec.Struct, gc=False):
    type: Any = None


class _Block(msgspec.Struct, gc=False):
    type: str = ""
    id: str | None = None
    name: str | None = None
    input: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    caller: Any = None


_EVENTS = msgspec.json.Decoder(
    Union[_BlockDelta, _BlockStart, _BlockStop, _MessageStart, _MessageDelta, _MessageStop, _Ping, _Error, _Message]
)
_ENVELOPE = msgspec.json.Decoder(_Envelope)
_DELTA_ANY = msgspec.json.Decoder(_BlockDeltaAny)
_BLOCK = msgspec.json.Decoder(_Block)
_MESSAGE = msgspec.json.Decoder(_Message)
_ANY = msgspec.json.Decoder()
_KNOWN = frozenset({"message_start", "content_block_start", "content_block_delta", "content_block_stop",
                    "message_delta", "message_stop", "ping", "error", "message"})


class _BlockState:
    __slots__ = ("raw", "type", "rec", "parts", "signature", "stopped")

    def __init__(self, raw: dict[str, Any], type_: str, rec: Any) -> None:
        self.raw = raw
        self.type = type_
        self.rec = rec
        self.parts: list[str] = []
        self.signature: str | None = None
        self.stopped = False


class AnthropicCodec(Codec):
    provider = "anthropic"
    length_cuts_last_item = True  # max_tokens right after a tool_use block's stop still cut that call

    @staticmethod
    def read_usage(raw: Mapping[str, Any]) -> TokenUsage | None:
        """Anthropic's ``input_tokens`` leaves the cache out: the whole input adds the cache reads and writes."""
        return cache_split_usage(raw, uncached="input_tokens", cache_read="cache_read_input_tokens", cache_write="cache_creation_input_tokens",
                                 output="output_tokens")

    def __init__(self) -> None:
        super().__init__()
        self._blocks: dict[int, _BlockState] = {}
        self._started_indexes = BlockIndexes()  # also the blocks the streaming mode forgot
        self._ids: set[str] = set()  # ids of the tool blocks so far: a repeated one is a replay
        self._message_id: str | None = None
        self._started = False
        self._stop_reason: str | None = None
        self._stop_details: Any = None

    # ---- payloads -------------------------------------------------------------------------------------
    def on_payload(self, event: str | None, data: bytes) -> None:
        try:
            ev = _EVENTS.decode(data)
        except msgspec.ValidationError as exc:
            self._unusual(data, exc)
            return
        except msgspec.DecodeError as exc:
            self.unrecognised(exc, data)
            return
        cls = type(ev)
        if cls is _BlockDelta:
            blk = self._blocks.get(ev.index)
            d = ev.delta
            if blk is None or blk.stopped:
                self._late_delta(ev.index, blk, d)
                return
            if type(d) is _InputJsonDelta:
                rec = blk.rec
                if rec is None:
                    self.asm.protocol_error(f"input_json_delta for {blk.type} block {ev.index}")
                elif d.partial_json:
                    rec.fragments.append(d.partial_json)
            elif type(d) is _TextDelta:
                blk.parts.append(d.text)
                self.asm.add_text(d.text)
            elif type(d) is _ThinkingDelta:
                blk.parts.append(d.thinking)
            elif type(d) is _SignatureDelta:
                blk.signature = d.signature  # assigned, not appended (as the SDK does)
            else:  # citations
                blk.raw.setdefault("citations", []).append(d.citation)
            return
        asm = self.asm
        if cls is _BlockStart:
            self._block_start(ev.index, ev.content_block)
        elif cls is _BlockStop:
            self._block_stop(ev.index)
        elif cls is _MessageDelta:
            if ev.delta.stop_reason is not None:
                self._saw_stop_reason(ev.delta.stop_reason)
                if ev.delta.stop_details is not None:
                    self._stop_details = ev.delta.stop_details
            if ev.usage is not None:
                # the counts are cumulative; a field message_delta leaves out (or null) keeps message_start's
                if isinstance(asm.usage, dict) and isinstance(ev.usage, dict):
                    asm.usage = {**asm.usage, **{k: v for k, v in ev.usage.items() if v is not None}}
                else:
                    asm.usage = ev.usage
        elif cls is _MessageStart:
            self._message_start(ev.message, data)
        elif cls is _MessageStop:
            self._message_stop()
        elif cls is _Ping:
            pass
        elif cls is _Error:
            err = ev.error
            if isinstance(err, dict):
                asm.stream_error(StreamError(type=str(err.get("type") or "error"),
                                             message=str(err.get("message") or ""), raw=err))
            else:
                asm.stream_error(StreamError(type="error", message=str(err), raw=err))
        elif cls is _Message:
            self._whole_message(ev)

    def _unusual(self, data: bytes, exc: Exception) -> None:
        """A payload that did not fit the known shapes: an unknown event or delta type is skipped; a known
        event with a wrong shape is a protocol error."""
        asm = self.asm
        try:
            env = _ENVELOPE.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            self.unrecognised(exc, data)
            return
        if env.type == "content_block_delta":
            try:
                ev = _DELTA_ANY.decode(data)
            except (msgspec.DecodeError, msgspec.ValidationError):
                self.unrecognised(exc, data)
                return
            blk = self._blocks.get(ev.index)
            if blk is None or blk.stopped:  # after the block's stop, whatever its type (as in streaming mode)
                self._late_delta(ev.index, blk, None)
                return
            _log.emit(_log.DEBUG, "payload.skipped", provider=self.provider, reason="unknown delta type",
                      type=ev.delta.get("type"), position=asm.position)
            blk.raw.setdefault("_unknown_deltas", []).append(ev.delta)
            return
        if isinstance(env.type, str) and env.type not in _KNOWN:
            _log.emit(_log.DEBUG, "payload.skipped", provider=self.provider, reason="unknown event type",
                      type=env.type, position=asm.position)
            return
        self.unrecognised(exc, data)

    def _late_delta(self, index: int, blk: _BlockState | None, delta: Any) -> None:
        asm = self.asm
        if blk is None:
            if index in self._started_indexes:  # streaming mode: a block that stopped and was forgotten
                asm.protocol_error(f"content_block_delta for block {index} after its content_block_stop")
            else:
                asm.protocol_error(f"content_block_delta for block {index}, which was never started")
            return
        rec = blk.rec
        if rec is not None and type(delta) is _InputJsonDelta and delta.partial_json:
            rec.fragments.append(delta.partial_json)  # fails the call and records the protocol error
        else:
            asm.protocol_error(f"content_block_delta for block {index} after its content_block_stop")

    # ---- messages and blocks --------------------------------------------------------------------------
    def _message_start(self, raw_message: msgspec.Raw, data: bytes) -> None:
        asm = self.asm
        try:
            msg = _MESSAGE.decode(raw_message)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            self.bad_payload(exc, data)
            return
        if self._started:
            asm.stream_error(StreamError(
                type="spliced_stream",
                message=f"a second message_start ({msg.id!r} after {self._message_id!r}): two generations "
                        "must not merge"), ProblemCode.PROTOCOL_ERROR)
            return
        self._started = True
        if not self._assistant(msg):
            return
        self._message_id = msg.id
        asm.response_id = msg.id
        asm.model = msg.model
        if msg.usage is not None:
            asm.usage = msg.usage
        # programmatic tool calling continuations put whole blocks (and the stop_reason) in message_start
        for i, raw in enumerate(msg.content):
            self._block_start(i, raw)
            self._block_stop(i)
        if msg.stop_reason is not None:
            self._saw_stop_reason(msg.stop_reason)

    def _assistant(self, msg: _Message) -> bool:
        """The message is the assistant's (its ``role`` is ``assistant``, or absent); another role is a protocol
        error: nothing of it is read."""
        role = msg.role
        if role and role != "assistant":
            self.asm.protocol_error(f"a message with role {role!r}, not 'assistant'")
            return False
        return True

    def _saw_stop_reason(self, raw: str) -> None:
        """A stop reason arrived (``message_start``, each ``message_delta``): every one is one of the turn's ends,
        and the worst is its finish at ``message_stop`` (a ``tool_use`` after ``max_tokens`` does not make the
        turn clean)."""
        self._stop_reason = raw
        self.asm.saw_end(0, _STOP.get(raw, FinishReason.OTHER), raw)

    def _whole_message(self, msg: _Message) -> None:
        asm = self.asm
        if self._started:
            asm.stream_error(StreamError(type="spliced_stream", message="a message body inside a stream"),
                             ProblemCode.PROTOCOL_ERROR)
            return
        self._started = True
        if not self._assistant(msg):
            return
        self._message_id = msg.id
        asm.response_id = msg.id
        asm.model = msg.model
        asm.usage = msg.usage
        for i, raw in enumerate(msg.content):
            self._block_start(i, raw)
            self._block_stop(i)
        self._stop_reason = msg.stop_reason
        self._message_stop()

    def _block_start(self, index: int, raw: msgspec.Raw) -> None:
        asm = self.asm
        if index in self._started_indexes:
            asm.protocol_error(f"content_block_start for block {index}, which was already started")
            return
        try:
            block = _BLOCK.decode(raw)
            raw_dict = _ANY.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            self.bad_payload(exc, bytes(raw))
            return
        if not isinstance(raw_dict, dict):
            asm.protocol_error(f"content block {index} is not an object")
            return
        rec = None
        t = block.type
        if t in _CLIENT_TOOL_BLOCKS or t in _SERVER_TOOL_BLOCKS:
            if block.id:
                if block.id in self._ids:
                    asm.protocol_error(f"content block {index} repeats the id {block.id!r} of an earlier block")
                    return
                self._ids.add(block.id)
            meta: dict[str, Any] = {"block_index": index}
            if block.caller is not None:
                meta["caller"] = block.caller
            server = t in _SERVER_TOOL_BLOCKS
            # the whole input given at the start (server tools, bodies); {} is a placeholder for the deltas
            text = bytes(block.input).decode() if block.input else None
            rec = asm.open_call(call_id=block.id, name=block.name, kind=CallKind.FUNCTION,
                                server=server, server_type=t if server else None, meta=meta,
                                initial=None if text is None or text.strip() == "null" else text)
        elif t in ("text", "thinking"):
            text = raw_dict.get(t, "")
            if not isinstance(text, str):
                # the replayed block would be built by appending the deltas to it: refuse it here, in both modes
                asm.protocol_error(f"{t} block {index} starts with a {type(text).__name__}, not text")
                return
            if t == "text" and text:
                asm.add_text(text)
        self._blocks[index] = _BlockState(raw_dict, t, rec)
        self._started_indexes.add(index)
        asm.item(index, rec)  # the block of the highest index is the one a token limit cut

    def _block_stop(self, index: int) -> None:
        asm = self.asm
        blk = self._blocks.get(index)
        if blk is None or blk.stopped:
            if blk is None and index not in self._started_indexes:
                asm.protocol_error(f"content_block_stop for block {index}, which was never started")
            else:
                asm.protocol_error(f"second content_block_stop for block {index}")
            return
        blk.stopped = True
        asm.terminate(blk.rec)  # deltas replace the placeholder input, as the SDK does
        if not asm.keep_calls:
            # streaming mode: nothing is kept for replay (the assembler remembers the last block's call, which a
            # max_tokens finish truncates), so memory stays bounded by the blocks still open
            del self._blocks[index]

    def _message_stop(self) -> None:
        asm = self.asm
        asm.stream_ended("message_stop")
        raw = self._stop_reason
        reason = _STOP.get(raw, FinishReason.OTHER) if raw is not None else None
        if reason is None:
            asm.stream_error(StreamError(type="protocol_error", message="message_stop without a stop_reason"),
                             ProblemCode.STREAM_CUT)
            return
        # a length finish truncates the last block's call even when it closed, a refusal the open calls; a call
        # still open at a clean message_stop never got its content_block_stop
        asm.end_choice(0, reason, raw, "message_stop")

    def ignorable_after_end(self, event: str | None, data: bytes) -> bool:
        """A ``ping`` is a keep-alive: it says nothing about the message."""
        try:
            return _ENVELOPE.decode(data).type == "ping"
        except (msgspec.DecodeError, msgspec.ValidationError):
            return False

    def assistant_message(self) -> Any:
        """``{"role": "assistant", "content": [blocks]}``, every block as received (thinking, signatures,
        redacted thinking, server tool results), with streamed text, thinking and tool input filled in.
        None in streaming mode (``keep_calls=False``), which keeps nothing for replay."""
        if not self.asm.keep_calls:
            return None
        content = []
        for index in sorted(self._blocks):
            blk = self._blocks[index]
            block = dict(blk.raw)
            block.pop("_unknown_deltas", None)
            if blk.type == "text" and blk.parts:
                block["text"] = block.get("text", "") + "".join(blk.parts)
            elif blk.type == "thinking":
                if blk.parts:
                    block["thinking"] = block.get("thinking", "") + "".join(blk.parts)
                if blk.signature is not None:
                    block["signature"] = blk.signature
            elif blk.rec is not None:
                rec = blk.rec
                if isinstance(rec.args, dict):
                    block["input"] = rec.args
                elif rec.raw or rec.frags or rec.initial:
                    block["input"] = {}  # unparsable input is replaced when the history is repaired
            content.append(block)
        return {"role": "assistant", "content": content}


# ---- the dialect record ---------------------------------------------------------------------------------------------
CAPABILITIES = Capabilities(
    dialect="anthropic", endpoint="POST /v1/messages",
    name_pattern=r"[a-zA-Z0-9_-]{1,128}", name_max=128, name_source="Anthropic API error text",
    max_tools=Limit(None, "not documented for Messages", documented=False),
    schema_depth=Limit(None, "not documented", documented=False),
    max_request_bytes=Limit(32 * 1024 * 1024, "Anthropic API: 413 request_too_large"),
    tool_kinds_source="Anthropic Messages: every client tool takes a JSON Schema input",
    schema_root="plain_object",
    schema_root_source="Anthropic API errors: input_schema.type Field required / Input should be 'object'; "
                       "input_schema does not support oneOf, allOf, or anyOf at the top level",
    ids_echoed="tool_result.tool_use_id = tool_use.id; all results first in one user message",
    signatures="thinking.signature and redacted_thinking.data, replayed verbatim before tool_use",
    tool_turn_finish=("tool_use", "end_turn", "stop_sequence", "pause_turn"),
    transient_statuses=(408, 409, 429, 500, 502, 503, 504, 529),
    permanent_statuses=(400, 401, 402, 403, 404, 413, 422),
    transient_error_types=("overloaded_error", "rate_limit_error", "api_error", "timeout_error"),
    delay_hints=("retry-after-ms", "retry-after"),
)

DIALECT = Dialect(id="anthropic", codec=AnthropicCodec, declarations=_declarations.PART, results=_results.PART,
                  capabilities=CAPABILITIES, http=_http.PART, sim="toolwire.sim._anthropic:Anthropic", order=20)
