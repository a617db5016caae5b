"""OpenAI Responses API (``POST /v1/responses``): streaming events and non-streaming response bodies.

Wire facts: every stream event carries ``type`` and an increasing ``sequence_number``;
``response.created`` → per output item ``response.output_item.added`` / argument deltas / ``….done`` /
``response.output_item.done`` → ``response.completed`` | ``response.incomplete`` | ``response.failed``, the
stream's terminator (only the ``[DONE]`` some proxies add may follow it); the flat ``error`` event may come anywhere
before it (some servers nest an ``error`` object in it); unknown event types are skipped. Every end a response
states is one of the turn's ends, and the worst is its finish: the terminal event's, its response's ``status`` when
that says otherwise, a lifecycle event's ``status`` that ends a response, an ``incomplete_details.reason`` in a
response that says it completed. A non-null ``error`` in a response that did not fail is the turn's error. A call
the application runs whose item ends with a status other than ``completed`` did not complete: it never runs (a
protocol error in a completed response), except ``in_progress`` on a call a hosted program made (``caller``), which
waits for its result.
A body is the Response object itself (``{"object": "response", "output": [...], "status": ...}``).

Three ids (failure mode 19 in docs/failure-modes.md): an item's ``id`` (``fc_…``) is what argument deltas
name in ``item_id``; its ``call_id`` is what the result answers; ``sequence_number`` orders the events (a gap or a step
back is a protocol error on the turn: events were lost, so no call of it may run, but the calls still parse so they can
be inspected).

Items: ``function_call`` (arguments streamed as ``function_call_arguments.delta``) and ``custom_tool_call``
(free text streamed as ``custom_tool_call_input.delta``) end at their ``….done`` event, or at
``output_item.done`` when no ``….done`` came; a later ``output_item.done`` is compared with what was assembled.
Provider-defined tools the application runs (``local_shell_call``, ``shell_call``, ``apply_patch_call``,
``computer_call``, client ``tool_search_call``) are whole at ``output_item.done``: their ``action`` /
``operation`` / ``arguments`` object is the call's arguments. Hosted tools (``mcp_call``, web and file search,
code interpreter, image generation, server ``tool_search_call``, ``program``, and any other ``*_call`` item) go to
``server_calls``. Every item, reasoning included, is kept in output order for replay (``assistant_message``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Union

import msgspec

from .. import _log
from ..types import CallKind, CallState, FinishReason, ProblemCode, StreamError, StreamFailed, TokenUsage
from .base import Codec, count, details
from .capabilities import Capabilities, Limit, PERMANENT_STATUSES
from .declare import openai_responses as _declarations
from .dialect import Dialect
from .http import openai_responses as _http
from .openai_chat import OPENAI_ARRAY_ITEMS, OPENAI_SCHEMA_ROOT, OPENAI_TRANSIENT_STATUSES
from .results import openai_responses as _results

__all__ = ["OpenAIResponsesCodec", "DIALECT", "CAPABILITIES"]

_FUNCTION = "function_call"
_CUSTOM = "custom_tool_call"
#: provider-defined tools that the application executes -> the field holding their arguments object
_BUILTIN_PAYLOAD = {
    "local_shell_call": "action",
    "shell_call": "action",
    "computer_call": "action",
    "apply_patch_call": "operation",
    "tool_search_call": "arguments",  # only with execution "client"
}
#: items that are never calls, whatever their name ends with
_NOT_CALLS = frozenset({"reasoning", "message", "mcp_list_tools", "mcp_approval_request", "mcp_approval_response",
                        "compaction", "additional_tools"})

_INCOMPLETE = {
    "max_output_tokens": (FinishReason.LENGTH, ProblemCode.CUT_BY_LENGTH),
    "content_filter": (FinishReason.CONTENT_FILTER, ProblemCode.CUT_BY_FILTER),
}
_BODY_STATUS = {"completed": "completed", "incomplete": "incomplete", "failed": "failed", "cancelled": "cancelled"}


def _incomplete_reason(details: Any) -> str | None:
    """``incomplete_details.reason`` when it is a non-empty string, else None."""
    why = details.get("reason") if isinstance(details, dict) else None
    return why if isinstance(why, str) and why else None


def _status_reason(status: str, details: Any) -> FinishReason:
    """The canonical end of a response ``status`` that ends it (``incomplete``: by its details' reason)."""
    if status == "completed":
        return FinishReason.STOP
    if status == "failed":
        return FinishReason.ERROR
    if status == "incomplete":
        return _INCOMPLETE.get(_incomplete_reason(details), (FinishReason.OTHER,))[0]
    return FinishReason.OTHER  # cancelled

_ACC = CallState.ACCUMULATING
_COMPLETE = CallState.COMPLETE


# ---- wire Structs ---------------------------------------------------------------------------------------
class _Response(msgspec.Struct, gc=False):
    """The Response object: a whole body, or the ``response`` of a lifecycle event."""

    id: str | None = None
    object: str | None = None
    model: str | None = None
    status: str | None = None
    output: list[msgspec.Raw] | None = None
    error: Any = None
    incomplete_details: Any = None
    usage: Any = None


class _Item(msgspec.Struct, gc=False):
    """The fields of an output item that matter for calls (the whole item is kept as a dict for replay)."""

    type: str = ""
    id: str | None = None
    call_id: str | None = None
    name: str | None = None
    status: str | None = None
    namespace: Any = None
    caller: Any = None
    execution: str | None = None
    arguments: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)  # a string (functions) or an object
    input: Any = None
    action: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    operation: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    actions: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    code: Any = None


class _Event(msgspec.Struct, tag_field="type", gc=False):
    sequence_number: int | None = None


class _ArgsDelta(_Event, tag="response.function_call_arguments.delta"):
    item_id: str = ""
    output_index: int | None = None
    delta: str = ""


class _InputDelta(_Event, tag="response.custom_tool_call_input.delta"):
    item_id: str = ""
    output_index: int | None = None
    delta: str = ""


class _ArgsDone(_Event, tag="response.function_call_arguments.done"):
    item_id: str = ""
    output_index: int | None = None
    arguments: str | None = None
    name: str | None = None


class _InputDone(_Event, tag="response.custom_tool_call_input.done"):
    item_id: str = ""
    output_index: int | None = None
    input: str | None = None


class _TextDelta(_Event, tag="response.output_text.delta"):
    delta: str = ""


class _Added(_Event, tag="response.output_item.added"):
    output_index: int | None = None
    item: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)


class _Done(_Event, tag="response.output_item.done"):
    output_index: int | None = None
    item: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)


class _Created(_Event, tag="response.created"):
    response: _Response = msgspec.field(default_factory=_Response)


class _Progress(_Event, tag="response.in_progress"):
    response: _Response = msgspec.field(default_factory=_Response)


class _Queued(_Event, tag="response.queued"):
    response: _Response = msgspec.field(default_factory=_Response)


class _Completed(_Event, tag="response.completed"):
    response: _Response = msgspec.field(default_factory=_Response)


class _Incomplete(_Event, tag="response.incomplete"):
    response: _Response = msgspec.field(default_factory=_Response)


class _Failed(_Event, tag="response.failed"):
    response: _Response = msgspec.field(default_factory=_Response)


class _Error(_Event, tag="error"):
    code: Any = None
    message: Any = None
    param: Any = None
    error: Any = None  # the nested shape some servers send


# events that carry nothing toolwire needs: decoded cheaply (no second decode, no log line) and ignored
_IGNORED_TYPES = (
    "response.output_text.done", "response.output_text.annotation.added", "response.content_part.added",
    "response.content_part.done", "response.refusal.delta", "response.refusal.done",
    "response.reasoning_summary_part.added", "response.reasoning_summary_part.done",
    "response.reasoning_summary_text.delta", "response.reasoning_summary_text.done",
    "response.reasoning_text.delta", "response.reasoning_text.done",
    "response.mcp_call_arguments.delta", "response.mcp_call_arguments.done", "response.mcp_call.in_progress",
    "response.mcp_call.completed", "response.mcp_call.failed", "response.mcp_list_tools.in_progress",
    "response.mcp_list_tools.completed", "response.mcp_list_tools.failed",
    "response.web_search_call.in_progress", "response.web_search_call.searching",
    "response.web_search_call.completed", "response.file_search_call.in_progress",
    "response.file_search_call.searching", "response.file_search_call.completed",
    "response.code_interpreter_call.in_progress", "response.code_interpreter_call.interpreting",
    "response.code_interpreter_call.completed", "response.code_interpreter_call_code.delta",
    "response.code_interpreter_call_code.done", "response.image_generation_call.in_progress",
    "response.image_generation_call.generating", "response.image_generation_call.partial_image",
    "response.image_generation_call.completed", "response.shell_call_command.added",
    "response.shell_call_command.delta", "response.shell_call_command.done",
    "response.apply_patch_call_operation_diff.delta", "response.apply_patch_call_operation_diff.done",
    "response.audio.delta", "response.audio.done", "response.audio.transcript.delta",
    "response.audio.transcript.done",
)
_IGNORED = tuple(msgspec.defstruct(f"_Ignored{i}", [], bases=(_Event,), tag=t) for i, t in enumerate(_IGNORED_TYPES))
_IGNORED_SET = frozenset(_IGNORED)


class _Envelope(msgspec.Struct, gc=False):
    type: Any = None
    object: Any = None
    error: Any = None
    output: Any = None
    sequence_number: Any = None


_EVENTS = msgspec.json.Decoder(Union[(_ArgsDelta, _InputDelta, _TextDelta, _ArgsDone, _InputDone, _Added, _Done,
                                      _Created, _Progress, _Queued, _Completed, _Incomplete, _Failed, _Error)
                                     + _IGNORED])
_ENVELOPE = msgspec.json.Decoder(_Envelope)
_RESPONSE = msgspec.json.Decoder(_Response)
_ITEM = msgspec.json.Decoder(_Item)
_ANY = msgspec.json.Decoder()
_KNOWN = frozenset({
    "response.function_call_arguments.delta", "response.custom_tool_call_input.delta",
    "response.output_text.delta", "response.function_call_arguments.done", "response.custom_tool_call_input.done",
    "response.output_item.added", "response.output_item.done", "response.created", "response.in_progress",
    "response.queued", "response.completed", "response.incomplete", "response.failed", "error",
}) | frozenset(_IGNORED_TYPES)


def _error_from(value: Any, fallback_type: str) -> StreamError:
    if isinstance(value, dict):
        code = value.get("code")
        return StreamError(type=str(value.get("type") or code or fallback_type),
                           message=str(value.get("message") or "the response failed"),
                           code=None if code is None else str(code), raw=value)
    return StreamError(type=fallback_type, message=str(value) if value is not None else "the response failed",
                       raw=value)


def _raw_text(raw: msgspec.Raw) -> str | None:
    """The JSON text of an object field as it arrived; None when the field is absent or null."""
    if not raw:
        return None
    text = bytes(raw).decode()
    return None if text == "null" else text


class _ItemState:
    """One output item: its replayable dict, its call (if it is one) and which delta event feeds it."""

    __slots__ = ("item_id", "index", "type", "raw", "rec", "delta", "done", "order")

    def __init__(self, item_id: str | None, index: int | None, type_: str, raw: Any, order: int) -> None:
        self.item_id = item_id
        self.index = index
        self.type = type_
        self.raw = raw
        self.rec: Any = None
        self.delta: type | None = None  # _ArgsDelta / _InputDelta for calls that stream their arguments
        self.done = False
        self.order = order


class OpenAIResponsesCodec(Codec):
    provider = "openai-responses"


    @staticmethod
    def read_usage(raw: Mapping[str, Any]) -> TokenUsage | None:
        """``input_tokens`` holds the cached ones, ``output_tokens`` the reasoning ones."""
        return TokenUsage(input_tokens=count(raw, "input_tokens"), output_tokens=count(raw, "output_tokens"),
                          cache_read_input_tokens=count(details(raw, "input_tokens_details"), "cached_tokens"),
                          reasoning_output_tokens=count(details(raw, "output_tokens_details"), "reasoning_tokens"))

    def __init__(self) -> None:
        super().__init__()
        self._items: dict[str, _ItemState] = {}  # by item id ("fc_…"): what deltas name
        self._by_index: dict[int, _ItemState] = {}  # by output_index
        self._order: list[_ItemState] = []
        self._next_seq: int | None = None  # the sequence_number the next event must carry (None: any)
        self._started = False
        self._cut: list[tuple[Any, str]] = []  # client calls whose item ended with another status than "completed"

    # ---- payloads -------------------------------------------------------------------------------------
    def on_payload(self, event: str | None, data: bytes) -> None:
        try:
            ev = _EVENTS.decode(data)
        except msgspec.DecodeError as exc:  # ValidationError included: unknown types, bodies, bad shapes
            self._unusual(data, exc)
            return
        sn = ev.sequence_number
        if sn is not None:
            if sn != self._next_seq and self._next_seq is not None:
                self._sequence_problem(self._next_seq - 1, sn)
            self._next_seq = sn + 1
        cls = type(ev)
        if cls is _ArgsDelta or cls is _InputDelta:
            # hot path: one dict lookup by item_id and one list append
            it = self._items.get(ev.item_id)
            if it is None or it.delta is not cls:
                self._odd_delta(ev, it)
                return
            if ev.delta:
                it.rec.fragments.append(ev.delta)  # a fragment after the call ended fails it
            return
        asm = self.asm
        if cls is _TextDelta:
            if ev.delta:
                asm.add_text(ev.delta)
            return
        if cls in _IGNORED_SET:
            return
        if cls is _Added:
            self._added(ev.output_index, ev.item)
        elif cls is _Done:
            self._item_done(ev.output_index, ev.item)
        elif cls is _ArgsDone:
            self._call_done(ev, _ArgsDelta, ev.arguments, ev.name)
        elif cls is _InputDone:
            self._call_done(ev, _InputDelta, ev.input, None)
        elif cls is _Created:
            self._lifecycle(ev.response, created=True)
        elif cls is _Progress or cls is _Queued:
            self._lifecycle(ev.response, created=False)
        elif cls is _Completed:
            self._terminal("completed", ev.response)
        elif cls is _Incomplete:
            self._terminal("incomplete", ev.response)
        elif cls is _Failed:
            self._terminal("failed", ev.response)
        elif cls is _Error:
            if isinstance(ev.error, dict):
                asm.stream_error(_error_from(ev.error, "error"))
            else:
                asm.stream_error(_error_from({"code": ev.code, "message": ev.message, "param": ev.param}, "error"))

    def ignorable_after_end(self, event: str | None, data: bytes) -> bool:
        """The ``[DONE]`` some proxies send after the terminal event says nothing."""
        return data[:6] == b"[DONE]"

    def _unusual(self, data: bytes, exc: Exception) -> None:
        """A payload that did not fit the known event shapes: a whole Response body, an HTTP error body, an
        unknown event type (skipped), or a known event with a wrong shape (a protocol error)."""
        asm = self.asm
        if data[:6] == b"[DONE]":  # not documented for Responses, but proxies send it
            return
        try:
            env = _ENVELOPE.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            self.unrecognised(exc, data)
            return
        t = env.type
        if t is None:
            if env.object == "response" or (env.object is None and isinstance(env.output, list)):
                self._body(data)
                return
            if isinstance(env.error, dict):
                asm.stream_error(_error_from(env.error, "api_error"))
                return
            self.unrecognised(exc, data)
            return
        if isinstance(t, str) and t not in _KNOWN:
            sn = env.sequence_number
            if isinstance(sn, int) and not isinstance(sn, bool):
                if sn != self._next_seq and self._next_seq is not None:
                    self._sequence_problem(self._next_seq - 1, sn)
                self._next_seq = sn + 1
            if _log.enabled(_log.DEBUG):
                _log.emit(_log.DEBUG, "payload.skipped", provider=self.provider, reason="unknown event type",
                          type=t, position=asm.position)
            return
        self.unrecognised(exc, data)

    def _sequence_problem(self, last: int, got: int) -> None:
        """Events were lost or reordered: a protocol error on the turn, which is then never dispatched. The
        stream is still read, so its calls can be inspected (and a lost delta shows as a final mismatch)."""
        asm = self.asm
        if asm.error is not None:
            return
        if got > last + 1:
            what = f"{got - last - 1} event(s) missing"
        else:
            what = "events out of order"
        err = StreamError(type="protocol_error", message=f"sequence_number {got} after {last}: {what}")
        asm.error = err
        asm.events.append(StreamFailed(error=err))
        _log.emit(_log.WARNING, "stream.error", provider=self.provider, type=err.type, message=err.message,
                  position=asm.position)

    def _odd_delta(self, ev: Any, it: _ItemState | None) -> None:
        asm = self.asm
        kind = ev.__struct_config__.tag
        if it is None:
            it = self._find(ev.item_id, ev.output_index)
            if it is not None and it.delta is type(ev):
                if ev.delta:  # an item sent without an id: its deltas can only be matched by output_index
                    it.rec.fragments.append(ev.delta)
                return
        if it is None:
            asm.protocol_error(f"{kind} for item {ev.item_id!r}, which was never added")
        else:
            asm.protocol_error(f"{kind} for item {ev.item_id!r}, a {it.type} item")

    def _find(self, item_id: str, index: int | None) -> _ItemState | None:
        """The item an event names: by ``item_id``, or by ``output_index`` for an item that has no id."""
        it = self._items.get(item_id) if item_id else None
        if it is None and not item_id and index is not None:
            cand = self._by_index.get(index)
            if cand is not None and cand.item_id is None:
                it = cand
        return it

    # ---- items ----------------------------------------------------------------------------------------
    def _decode_item(self, raw: msgspec.Raw) -> tuple[_Item, dict[str, Any]] | None:
        try:
            item = _ITEM.decode(raw)
            as_dict = _ANY.decode(raw)
        except msgspec.DecodeError as exc:  # not an object, or a field of the wrong type
            self.bad_payload(exc, bytes(raw))
            return None
        return item, as_dict

    def _register(self, item: _Item, as_dict: dict[str, Any], index: int | None) -> _ItemState:
        st = _ItemState(item.id or None, index, item.type, as_dict, len(self._order))
        self._order.append(st)
        if st.item_id is not None:
            self._items[st.item_id] = st
        if index is not None:
            self._by_index[index] = st
        return st

    def _added(self, index: int | None, raw: msgspec.Raw) -> None:
        if not raw or bytes(raw) == b"null":
            return  # an empty added event (the SDK skips it too)
        decoded = self._decode_item(raw)
        if decoded is None:
            return
        item, as_dict = decoded
        iid = item.id or None
        if (iid is not None and iid in self._items) or (index is not None and index in self._by_index):
            self.asm.protocol_error(f"output_item.added for item {iid!r} at output_index {index}, which was "
                                    "already added")
            return
        st = self._register(item, as_dict, index)
        rec = self._open(item, st)
        if rec is not None and st.delta is not None:
            first = item.input if item.type == _CUSTOM else self._string_arguments(item)
            if isinstance(first, str) and first and (item.type == _CUSTOM or bytes(item.arguments)[:1] == b'"'):
                rec.fragments.append(first)  # arguments given in the added item: deltas append to them

    def _item_done(self, index: int | None, raw: msgspec.Raw) -> None:
        asm = self.asm
        decoded = self._decode_item(raw)
        if decoded is None:
            return
        item, as_dict = decoded
        iid = item.id or None
        st = self._items.get(iid) if iid is not None else None
        if st is None and index is not None:
            cand = self._by_index.get(index)
            if cand is not None:
                if cand.item_id is not None and iid is not None:
                    asm.protocol_error(f"output_item.done for item {iid!r} at output_index {index}, where item "
                                       f"{cand.item_id!r} was added")
                    return
                st = cand
        if st is None:
            self._whole_item(index, item, as_dict)  # done without added (trimmed streams): a whole item
            return
        if st.type != item.type:
            asm.protocol_error(f"output_item.done for a {item.type} item, added as a {st.type} item")
            return
        if st.done:
            asm.protocol_error(f"a second output_item.done for item {iid!r}")
            return
        st.done = True
        st.raw = as_dict  # replay the provider's final item (reasoning: its complete encrypted_content)
        if st.item_id is None and iid is not None:
            st.item_id = iid
            self._items[iid] = st
        if st.rec is not None:
            self._finish_item(st.rec, item)

    def _whole_item(self, index: int | None, item: _Item, as_dict: dict[str, Any]) -> None:
        st = self._register(item, as_dict, index)
        st.done = True
        if item.type == "message":
            for part in as_dict.get("content") or ():
                if isinstance(part, dict) and part.get("type") == "output_text" and isinstance(part.get("text"), str):
                    self.asm.add_text(part["text"])
        rec = self._open(item, st)
        if rec is not None:
            self._finish_item(rec, item)

    def _open(self, item: _Item, st: _ItemState) -> Any:
        """Announce the call an item is, if it is one; return its record (None for other items)."""
        t = item.type
        server = False
        if t == _FUNCTION:
            kind, name, st.delta = CallKind.FUNCTION, item.name, _ArgsDelta
        elif t == _CUSTOM:
            kind, name, st.delta = CallKind.CUSTOM, item.name, _InputDelta
        elif t in _BUILTIN_PAYLOAD and (t != "tool_search_call" or item.execution == "client"):
            kind, name = CallKind.BUILTIN, t[:-5]
        elif t == "tool_search_call" or (t.endswith("_call") or t == "program") and t not in _NOT_CALLS:
            kind, name, server = CallKind.FUNCTION, item.name or (t[:-5] if t.endswith("_call") else t), True
        else:
            return None
        meta: dict[str, Any] = {}
        if item.id:
            meta["item_id"] = item.id
        if item.namespace is not None:
            meta["namespace"] = item.namespace
        if item.caller is not None:
            meta["caller"] = item.caller
        rec = self.asm.open_call(call_id=item.call_id, name=name, kind=kind, server=server,
                                 server_type=t if server else None, meta=meta)
        st.rec = rec
        return rec

    @staticmethod
    def _string_arguments(item: _Item) -> str | None:
        """A function_call's ``arguments`` text: the string, or the JSON of an object some servers send
        instead; None when absent or null."""
        text = _raw_text(item.arguments)
        if text is None or text[:1] != '"':
            return text
        return msgspec.json.decode(text)

    def _payload_text(self, item: _Item) -> str | None:
        """The arguments object of a builtin or hosted tool item, as JSON text."""
        t = item.type
        if t == "computer_call" and not _raw_text(item.action) and _raw_text(item.actions):
            return '{"actions":' + _raw_text(item.actions) + "}"  # batched actions: wrapped to stay an object
        field = _BUILTIN_PAYLOAD.get(t)
        if field is not None:
            return _raw_text(getattr(item, field))
        for raw in (item.arguments, item.action, item.operation):  # hosted tools: whatever input they show
            text = _raw_text(raw)
            if text is not None:
                value = msgspec.json.decode(text)
                return value if isinstance(value, str) else text
        if isinstance(item.code, str):
            return msgspec.json.encode({"code": item.code}).decode()
        return None

    def _finish_item(self, rec: Any, item: _Item) -> None:
        """``output_item.done`` (or a whole item) for a call: its terminator when still open, else a check."""
        asm = self.asm
        status = item.status
        if status is None or status == "completed":
            incomplete = False
        elif rec.server:
            incomplete = status == "incomplete"  # (a hosted tool that failed is the model's to read)
        else:
            # a call the application runs whose item did not complete (``incomplete``, ``failed``, ``in_progress``,
            # any other word) must not run; only a call a hosted program made waits ``in_progress`` for its result
            incomplete = status != "in_progress" or item.caller is None
        if rec.server or rec.kind is CallKind.BUILTIN:
            if not rec.is_open:
                if incomplete and rec.state is _COMPLETE and not rec.server:
                    self._cut.append((rec, status))
                return
            text = self._payload_text(item)
            if incomplete:
                if not rec.server:
                    self._cut.append((rec, status))
                rec.initial = text  # left open: the terminal event says what cut it
                return
            if text is None and rec.kind is CallKind.BUILTIN:
                asm.fail(rec, ProblemCode.PROTOCOL_ERROR,
                         f"{item.type} item without its {_BUILTIN_PAYLOAD.get(item.type, 'action')}")
                return
            asm.complete(rec, final=text)
            return
        final = item.input if rec.kind is CallKind.CUSTOM else self._string_arguments(item)
        if not isinstance(final, str):
            final = None
        if item.name and rec.name is None and (rec.is_open or rec.state is _COMPLETE):
            rec.name = item.name  # (a call that already failed keeps what it had when it ended)
        if rec.is_open:
            if incomplete:
                if not rec.frags:
                    rec.initial = final  # a whole item's partial arguments, kept as they arrived
                self._cut.append((rec, status))
                return  # left open: the terminal event says what cut it
            if rec.name is None:
                asm.fail(rec, ProblemCode.MISSING_NAME, "the call ended without a tool name")
            elif final is None and not rec.frags:
                asm.fail(rec, ProblemCode.PROTOCOL_ERROR,
                         f"{item.type} item without its {'input' if rec.kind is CallKind.CUSTOM else 'arguments'}")
            else:
                asm.complete(rec, final=final)
        elif rec.state is _COMPLETE:
            if final is not None and final != rec.raw:
                rec.final = final
                asm.fail(rec, ProblemCode.FINAL_MISMATCH,
                         f"output_item.done's arguments ({len(final)} chars) differ from the assembled ones "
                         f"({len(rec.raw)} chars)")
            elif incomplete:
                self._cut.append((rec, status))

    def _call_done(self, ev: Any, want: type, final: str | None, name: str | None) -> None:
        """``function_call_arguments.done`` / ``custom_tool_call_input.done``: the call's terminator."""
        asm = self.asm
        kind = ev.__struct_config__.tag
        it = self._find(ev.item_id, ev.output_index)
        if it is None or it.delta is not want:
            asm.protocol_error(f"{kind} for item {ev.item_id!r}, which is not a "
                               f"{'function_call' if want is _ArgsDelta else 'custom_tool_call'} item that was added")
            return
        rec = it.rec
        if not rec.is_open:
            if rec.state is _COMPLETE:
                asm.protocol_error(f"a second {kind} for item {ev.item_id!r}")
            return
        if name:
            if rec.name is None:
                rec.name = name
            elif name != rec.name:
                asm.fail(rec, ProblemCode.CONFLICTING_NAME, f"call {rec.call_id or rec.local_id} was named "
                                                            f"{rec.name!r}, then {name!r}")
                return
        if rec.name is None:
            asm.fail(rec, ProblemCode.MISSING_NAME, "the call ended without a tool name")
            return
        asm.complete(rec, final=final)

    # ---- the response -----------------------------------------------------------------------------------
    def _same_response(self, rid: str | None) -> bool:
        asm = self.asm
        if rid and asm.response_id and rid != asm.response_id:
            asm.stream_error(StreamError(
                type="spliced_stream",
                message=f"events of response {rid!r} inside response {asm.response_id!r}: two generations "
                        "must not merge"), ProblemCode.PROTOCOL_ERROR)
            return False
        if rid and asm.response_id is None:
            asm.response_id = rid
        return True

    def _lifecycle(self, resp: _Response, *, created: bool) -> None:
        asm = self.asm
        if created:
            if self._started:
                asm.stream_error(StreamError(type="spliced_stream",
                                             message=f"a second response.created ({resp.id!r}): two generations "
                                                     "must not merge"), ProblemCode.PROTOCOL_ERROR)
                return
            self._started = True
        if not self._same_response(resp.id or None):
            return
        if resp.model and asm.model is None:
            asm.model = resp.model
        self._saw_ends(resp)
        if resp.error is not None:
            asm.stream_error(_error_from(resp.error, "api_error"))

    def _saw_ends(self, resp: _Response) -> None:
        """The ends a Response object states: a status that ends a response (``completed``, ``incomplete``,
        ``failed``, ``cancelled``, on a lifecycle event too), and an ``incomplete_details`` reason in a response
        that says it completed. Each is one of the turn's ends (the worst is its finish), so a status or a reason
        that contradicts a ``response.completed`` leaves the turn unclean."""
        asm = self.asm
        status = resp.status
        if status in _BODY_STATUS:
            asm.saw_end(0, _status_reason(status, resp.incomplete_details), status)
        if status == "completed" or status is None:
            why = _incomplete_reason(resp.incomplete_details)
            if why:
                asm.saw_end(0, _INCOMPLETE.get(why, (FinishReason.OTHER,))[0], why)

    def _body(self, data: bytes) -> None:
        """A non-streaming Response body: its output items in order, then its status."""
        asm = self.asm
        try:
            resp = _RESPONSE.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            self.bad_payload(exc, data)
            return
        if self._started or self._order:
            asm.stream_error(StreamError(type="spliced_stream", message="a response body inside a stream"),
                             ProblemCode.PROTOCOL_ERROR)
            return
        self._started = True
        asm.response_id = resp.id or None
        asm.model = resp.model
        for i, raw in enumerate(resp.output or ()):
            decoded = self._decode_item(raw)
            if decoded is None:
                return
            self._whole_item(i, *decoded)
            if asm.failed:
                return
        kind = _BODY_STATUS.get(resp.status or "")
        if kind is not None:
            self._terminal(kind, resp, body=True)
        else:
            asm.usage = resp.usage  # queued / in progress: not finished, the end of input makes it a cut

    def _terminal(self, kind: str, resp: _Response, body: bool = False) -> None:
        asm = self.asm
        if not self._same_response(resp.id or None):
            return
        if resp.model and asm.model is None:
            asm.model = resp.model
        if resp.usage is not None:
            asm.usage = resp.usage
        if not body and resp.output:
            self._reconcile(resp.output)
            if asm.failed:
                return
        asm.stream_ended("the response body" if body else f"response.{kind}")
        # the event's own end (a body's: its status) first, then any other end its response states; the worst of
        # them is the turn's finish, and the end rules below follow it (``Assembler.end_choice``). The raw word is
        # the response's status; a response without one gives None (the provider said no word)
        raw = kind if resp.status is not None else None
        asm.saw_end(0, _status_reason(kind, resp.incomplete_details), raw)
        self._saw_ends(resp)
        if resp.error is not None and kind != "failed":
            # an error beside a status that says otherwise: the response is not what it says (as a Chat
            # completion's top-level error beside its choices)
            asm.stream_error(_error_from(resp.error, "api_error"))
        if kind == "failed":
            self._truncate_cut(ProblemCode.STREAM_ERROR, "the response failed")
            asm.stream_error(_error_from(resp.error, "response_failed"))
            asm.end_choice(0, FinishReason.ERROR, raw, "response.failed")
            return
        if kind == "completed":
            self._fail_cut()
            # tool_calls when it has calls (the assembler's rule); a call whose terminator never came fails the turn
            asm.end_choice(0, FinishReason.STOP, raw, "response.completed")
            return
        if kind == "incomplete":
            why = _incomplete_reason(resp.incomplete_details)
            reason, code = _INCOMPLETE.get(why, (FinishReason.OTHER, ProblemCode.STREAM_ERROR))
            message = f"the response is incomplete ({why or 'no reason given'})"
        else:  # cancelled
            reason, code, message = FinishReason.OTHER, ProblemCode.STREAM_ERROR, f"the response was {raw}"
        self._truncate_cut(code, message)
        asm.truncate_open(code, message)
        asm.end_choice(0, reason, raw, f"response.{kind}")

    def _reconcile(self, output: list[msgspec.Raw]) -> None:
        """The terminal event's ``response.output``: items the stream never mentioned are taken whole (servers
        that send only the lifecycle events); a call already complete is checked against its final item. A
        call still open is not completed from it: its terminator never came."""
        for i, raw in enumerate(output):
            decoded = self._decode_item(raw)
            if decoded is None:
                return
            item, as_dict = decoded
            st = self._items.get(item.id) if item.id else self._by_index.get(i)
            if st is None:
                if item.id or i not in self._by_index:
                    self._whole_item(i if i not in self._by_index else None, item, as_dict)
                continue
            rec = st.rec
            if rec is None or rec.state is not _COMPLETE or st.delta is None or st.type != item.type:
                continue
            final = item.input if rec.kind is CallKind.CUSTOM else self._string_arguments(item)
            if isinstance(final, str) and final != rec.raw:
                rec.final = final
                self.asm.fail(rec, ProblemCode.FINAL_MISMATCH,
                              f"the final response's arguments ({len(final)} chars) differ from the assembled "
                              f"ones ({len(rec.raw)} chars)")

    def _fail_cut(self) -> None:
        """A response that completed although the item of one of its calls ended with a status other than
        ``completed`` (``incomplete``, ``failed``, ``in_progress``): the events contradict each other, a protocol
        error on the turn (such a call is errored)."""
        cut = [(rec, status) for rec, status in self._cut if rec.state is _COMPLETE or rec.is_open]
        self._cut.clear()
        if not cut:
            return
        asm = self.asm
        for rec, status in cut:
            asm.fail(rec, ProblemCode.PROTOCOL_ERROR, f"its item ended with status {status} in a completed response")
        said = ", ".join(f"{rec.call_id or rec.local_id} ended with status {status}" for rec, status in cut)
        asm.protocol_error(f"response.completed after the item of call {said}")

    def _truncate_cut(self, code: ProblemCode, message: str) -> None:
        for rec, _ in self._cut:
            if rec.state is _COMPLETE:
                self.asm.truncate(rec, code, message)
        self._cut.clear()

    def at_close(self) -> None:
        self._truncate_cut(ProblemCode.STREAM_CUT, "the call's item did not complete")

    def assistant_message(self) -> Any:
        """The output items to replay in the next request's ``input``, in output order: reasoning items (with
        the ``encrypted_content`` of their ``output_item.done``), calls with their exact arguments, messages,
        hosted tool items. An item that never got its ``output_item.done`` carries the text streamed so far."""
        items = sorted(self._order, key=lambda s: (s.index is None, s.index if s.index is not None else 0, s.order))
        out = []
        for st in items:
            item = dict(st.raw)
            rec = st.rec
            if rec is not None and not st.done and st.delta is not None:
                text = rec.raw if rec.state is not _ACC and rec.state is not CallState.ANNOUNCED else rec.text()
                item["input" if st.type == _CUSTOM else "arguments"] = text
            out.append(item)
        return out


# ---- the dialect record ---------------------------------------------------------------------------------------------
CAPABILITIES = Capabilities(
    dialect="openai-responses", endpoint="POST /v1/responses",
    name_pattern=r"[a-zA-Z0-9_-]{1,64}", name_max=64,
    name_source="OpenAI Responses function tools (the Chat Completions rule)",
    max_tools=Limit(128, "OpenAI API error array_above_max_length on tools"),
    schema_depth=Limit(10, "OpenAI Structured Outputs: strict mode nesting", applies="strict"),
    max_request_bytes=Limit(None, "not documented", documented=False),
    max_schema_properties=Limit(5000, "OpenAI Structured Outputs: strict mode properties", applies="strict"),
    max_enum_values=Limit(1000, "OpenAI Structured Outputs: strict mode enum values", applies="strict"),
    tool_kinds=("function", "custom"), tool_kinds_source="openai-python types (custom_tool_param.py)",
    schema_root="object", schema_root_source=OPENAI_SCHEMA_ROOT, array_items=True,
    array_items_source=OPENAI_ARRAY_ITEMS,
    ids_echoed="function_call_output.call_id = function_call.call_id (not the fc_ item id)",
    signatures="reasoning items (encrypted_content) replayed before their function_call",
    tool_turn_finish=("completed",),
    transient_statuses=OPENAI_TRANSIENT_STATUSES,
    permanent_statuses=PERMANENT_STATUSES,
    transient_error_types=("server_error", "rate_limit_exceeded", "server_is_overloaded"),
    delay_hints=("retry-after-ms", "retry-after"),
)

DIALECT = Dialect(id="openai-responses", codec=OpenAIResponsesCodec, declarations=_declarations.PART,
                  results=_results.PART, capabilities=CAPABILITIES, http=_http.PART,
                  sim="toolwire.sim._responses:OpenAIResponses", order=30)
