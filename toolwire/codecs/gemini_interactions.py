"""Gemini Interactions API (``POST /v1beta/interactions``): streaming events and non-streaming bodies.

Wire facts: SSE with ``event:`` and a payload discriminated by ``event_type`` (not ``type``); the
stream ends with ``data: [DONE]``. Current ("steps") schema: ``interaction.created`` → per step ``step.start
{index, step}`` / ``step.delta {index, delta}`` / ``step.stop {index}`` → ``interaction.completed {interaction:
{status}}`` → ``[DONE]``; ``interaction.status_update`` and ``error {error: {code, message}}`` may appear anywhere
before the completion. Nothing but ``[DONE]`` may follow the completion, and nothing may follow ``[DONE]``. A
``function_call`` step ``{id, name, arguments}`` is a call; its arguments stream as ``arguments_delta`` string
fragments and are parsed at ``step.stop`` (whole ``arguments`` on the start, if any, are replaced by deltas).
Built-in ``*_call`` steps (Google Search, code execution, MCP servers …) run at Google: ``server_calls``.
The turn's end is the interaction's status: ``requires_action`` (calls pending) and ``completed`` end it cleanly
(``tool_calls`` when it has client calls, else ``stop``), ``incomplete`` / ``budget_exceeded`` → length,
``failed`` / ``cancelled`` → error; an ``error`` (or a non-empty ``errors``) beside a clean status is an error of
the turn. A status that ends an interaction stated before the completion (by
``interaction.status_update`` or ``interaction.created``) is one of the turn's ends too: the worst is its finish.

The legacy "outputs" schema (≤ 2026-05) is read too: ``interaction.start``, ``content.start {index, content}``,
``content.delta`` (a function_call delta carries the **whole** ``arguments`` object), ``content.stop``,
``interaction.complete``. Non-streaming bodies are the Interaction itself (``{id, status, steps}``, legacy
``{…, outputs}``). Unknown event, step and delta types are skipped with a debug log.

Thought signatures ride on ``thought`` steps (``signature``, or a ``thought_signature`` delta): they stay on that
step in the replay, and the first function call after a signed thought gets it in
``provider_meta["thought_signature"]`` (with ``provider_meta["thought_step"]``, the index of the step carrying it).
``assistant_message()`` is ``{"id": interaction id, "steps": [...]}`` (legacy: ``"outputs"``): the model's
steps in order, each as received with streamed text, summaries, signatures and arguments filled in.
"""

from __future__ import annotations

from bisect import bisect_right, insort
from collections.abc import Mapping
from typing import Any, Union

import msgspec

from .. import _log
from ..types import CallState, FinishReason, ProblemCode, StreamError, TokenUsage
from .base import Codec, add, count
from .capabilities import Capabilities, Limit, PERMANENT_STATUSES
from .declare import gemini_interactions as _declarations
from .dialect import Dialect
from .http import gemini_interactions as _http
from .results import gemini_interactions as _results

__all__ = ["GeminiInteractionsCodec", "DIALECT", "CAPABILITIES"]

_STATUS = {
    "requires_action": FinishReason.TOOL_CALLS,
    "completed": FinishReason.STOP,
    "incomplete": FinishReason.LENGTH,
    "budget_exceeded": FinishReason.LENGTH,
    "failed": FinishReason.ERROR,
    "cancelled": FinishReason.ERROR,
}


# ---- wire Structs ---------------------------------------------------------------------------------------
class _ArgumentsDelta(msgspec.Struct, tag="arguments_delta", tag_field="type", gc=False):
    arguments: Union[str, None] = None


class _TextDelta(msgspec.Struct, tag="text", tag_field="type", gc=False):
    text: str = ""


class _SignatureDelta(msgspec.Struct, tag="thought_signature", tag_field="type", gc=False):
    signature: Union[str, None] = None


class _FunctionCallDelta(msgspec.Struct, tag="function_call", tag_field="type", gc=False):
    """Legacy ``content.delta``: the whole arguments object (and possibly id and name)."""

    id: Union[str, None] = None
    name: Union[str, None] = None
    arguments: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)


_Delta = Union[_ArgumentsDelta, _TextDelta, _SignatureDelta, _FunctionCallDelta]


class _InteractionLite(msgspec.Struct, gc=False):
    id: Union[str, None] = None
    status: Union[str, None] = None
    model: Union[str, None] = None
    usage: Any = None
    steps: Union[list[msgspec.Raw], None] = None
    outputs: Union[list[msgspec.Raw], None] = None
    errors: Any = None
    error: Any = None


class _Event(msgspec.Struct, tag_field="event_type", gc=False):
    pass


class _Created(_Event, tag="interaction.created"):
    interaction: _InteractionLite = msgspec.field(default_factory=_InteractionLite)


class _Start(_Event, tag="interaction.start"):
    interaction: _InteractionLite = msgspec.field(default_factory=_InteractionLite)


class _StatusUpdate(_Event, tag="interaction.status_update"):
    interaction_id: Union[str, None] = None
    status: Union[str, None] = None
    usage: Any = None


class _StepStart(_Event, tag="step.start"):
    index: int
    step: msgspec.Raw


class _StepDelta(_Event, tag="step.delta"):
    index: int
    delta: _Delta


class _StepStop(_Event, tag="step.stop"):
    index: int
    usage: Any = None
    step_usage: Any = None


class _ContentStart(_Event, tag="content.start"):
    index: int
    content: msgspec.Raw


class _ContentDelta(_Event, tag="content.delta"):
    index: int
    delta: _Delta


class _ContentStop(_Event, tag="content.stop"):
    index: int


class _Completed(_Event, tag="interaction.completed"):
    interaction: _InteractionLite = msgspec.field(default_factory=_InteractionLite)


class _Complete(_Event, tag="interaction.complete"):
    interaction: _InteractionLite = msgspec.field(default_factory=_InteractionLite)


class _ErrorEvent(_Event, tag="error"):
    error: Any = None


class _AnyDelta(msgspec.Struct, gc=False):
    index: int
    delta: dict[str, Any]


class _Envelope(msgspec.Struct, gc=False):
    event_type: Any = None
    id: Any = None
    status: Any = None
    steps: Any = None
    outputs: Any = None


class _Step(msgspec.Struct, gc=False):
    type: str = ""
    id: Union[str, None] = None
    name: Union[str, None] = None
    arguments: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    signature: Union[str, None] = None


_EVENTS = msgspec.json.Decoder(Union[_StepDelta, _StepStart, _StepStop, _Created, _StatusUpdate, _Completed,
                                     _ErrorEvent, _ContentDelta, _ContentStart, _ContentStop, _Start, _Complete])
_ENVELOPE = msgspec.json.Decoder(_Envelope)
_ANY_DELTA = msgspec.json.Decoder(_AnyDelta)
_STEP = msgspec.json.Decoder(_Step)
_BODY = msgspec.json.Decoder(_InteractionLite)
_ANY = msgspec.json.Decoder()
_KNOWN = frozenset({"interaction.created", "interaction.start", "interaction.status_update", "step.start",
                    "step.delta", "step.stop", "content.start", "content.delta", "content.stop",
                    "interaction.completed", "interaction.complete", "error"})

_KNOWN_DELTAS = frozenset({"arguments_delta", "text", "thought_signature", "function_call"})

_ANN = CallState.ANNOUNCED


class _StepState:
    __slots__ = ("index", "raw", "type", "rec", "text", "summary", "signature", "stopped", "whole_args")

    def __init__(self, index: int, raw: dict[str, Any], type_: str, rec: Any) -> None:
        self.index = index
        self.raw = raw
        self.type = type_
        self.rec = rec
        self.text: list[str] = []
        self.summary: list[Any] = []
        self.signature: str | None = None
        self.stopped = False
        self.whole_args: Any = None  # legacy: the latest whole arguments object


def _args_text(raw: msgspec.Raw) -> str | None:
    """Arguments as text: an object as it arrived, a JSON string's content; None when absent or null."""
    if not raw:
        return None
    data = bytes(raw)
    if data == b"null":
        return None
    if data[:1] == b'"':
        return msgspec.json.decode(data)
    return data.decode()


def _error_from(value: Any, fallback: str = "error") -> StreamError:
    if isinstance(value, list) and value:
        value = value[0]
    if isinstance(value, dict):
        code = value.get("code")
        return StreamError(type=str(code or value.get("status") or fallback),
                           message=str(value.get("message") or "the provider reported an error"),
                           code=None if code is None else str(code), raw=value)
    return StreamError(type=fallback, message=str(value), raw=value)


class GeminiInteractionsCodec(Codec):
    provider = "gemini-interactions"


    @staticmethod
    def read_usage(raw: Mapping[str, Any]) -> TokenUsage | None:
        """As Gemini's: tool-use tokens are input besides ``total_input_tokens`` (which holds the cached ones),
        thought tokens output besides ``total_output_tokens`` (``total_reasoning_tokens`` in older schemas)."""
        prompt = count(raw, "total_input_tokens")
        thoughts = count(raw, "total_thought_tokens")
        if thoughts is None:
            thoughts = count(raw, "total_reasoning_tokens")
        return TokenUsage(
            input_tokens=None if prompt is None else count(raw, "total_input_tokens", "total_tool_use_tokens"),
            output_tokens=add(count(raw, "total_output_tokens"), thoughts),
            cache_read_input_tokens=count(raw, "total_cached_tokens"), reasoning_output_tokens=thoughts)

    def __init__(self) -> None:
        super().__init__()
        self._steps: dict[int, _StepState] = {}
        self._call_steps: list[int] = []  # the indexes of the steps that are client calls, sorted
        self._interaction_id: str | None = None
        self._legacy = False
        self._completed = False
        self._pending_signature: tuple[int, str] | None = None  # a signed thought step no call has taken yet
        self.done = False

    # ---- payloads -------------------------------------------------------------------------------------
    def on_payload(self, event: str | None, data: bytes) -> None:
        try:
            ev = _EVENTS.decode(data)
        except msgspec.ValidationError as exc:  # [DONE] among them: it starts like an array, not an object
            self._unusual(data, exc)
            return
        except msgspec.DecodeError as exc:
            self.unrecognised(exc, data)
            return
        cls = type(ev)
        if cls is _StepDelta or cls is _ContentDelta:
            st = self._steps.get(ev.index)
            d = ev.delta
            if st is None or st.stopped:
                self._late_delta(ev.index, st, d)
                return
            if type(d) is _ArgumentsDelta:
                rec = st.rec
                if rec is None or rec.server:
                    self.asm.protocol_error(f"arguments_delta for {st.type} step {ev.index}")
                elif d.arguments:
                    rec.fragments.append(d.arguments)
            elif type(d) is _TextDelta:
                st.text.append(d.text)
                if d.text:
                    self.asm.add_text(d.text)
            elif type(d) is _SignatureDelta:
                if d.signature:
                    self._signature(st, d.signature)
            else:
                self._whole_arguments(st, d)
            return
        asm = self.asm
        if cls is _StepStart or cls is _ContentStart:
            if cls is _ContentStart:
                self._legacy = True
            self._start(ev.index, ev.step if cls is _StepStart else ev.content)
        elif cls is _StepStop or cls is _ContentStop:
            self._stop(ev.index)
        elif cls is _Created or cls is _Start:
            if cls is _Start:
                self._legacy = True
            new_id = ev.interaction.id
            if self._interaction_id is not None and new_id and new_id != self._interaction_id:
                asm.stream_error(StreamError(
                    type="spliced_stream",
                    message=f"a second interaction ({new_id!r} after {self._interaction_id!r}): two generations "
                            "must not merge"), ProblemCode.PROTOCOL_ERROR)
                return
            self._interaction(ev.interaction)
        elif cls is _Completed or cls is _Complete:
            self._interaction(ev.interaction)
            if not self._steps:
                self._whole_steps(ev.interaction)
            self._complete(ev.interaction)
        elif cls is _StatusUpdate:
            if ev.usage is not None:
                asm.usage = ev.usage
            self._saw_status(ev.status)
        else:  # error
            asm.stream_error(_error_from(ev.error))

    def ignorable_after_end(self, event: str | None, data: bytes) -> bool:
        """The ``[DONE]`` that closes the stream, after the interaction's completion (or repeated)."""
        return data[:6] == b"[DONE]"

    def _unusual(self, data: bytes, exc: Exception) -> None:
        """Not a known event: an unknown event or delta type is skipped, a whole Interaction body is read, and
        a known event with a wrong shape is a protocol error."""
        asm = self.asm
        if data[:6] == b"[DONE]":  # the stream's end (the ``[DONE]`` after the completion is ``after_end``'s)
            self.done = True
            asm.stream_ended("[DONE]")
            return
        try:
            env = _ENVELOPE.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            self.unrecognised(exc, data)
            return
        et = env.event_type
        if et in ("step.delta", "content.delta"):
            try:
                ev = _ANY_DELTA.decode(data)
            except (msgspec.DecodeError, msgspec.ValidationError):
                self.unrecognised(exc, data)
                return
            st = self._steps.get(ev.index)
            if st is None or st.stopped:
                self._late_delta(ev.index, st, None)
                return
            self._other_delta(st, ev.delta)
            return
        if isinstance(et, str) and et not in _KNOWN:
            _log.emit(_log.DEBUG, "payload.skipped", provider=self.provider, reason="unknown event type",
                      type=et, position=asm.position)
            return
        if et is None and (env.steps is not None or env.outputs is not None or env.status is not None):
            try:
                body = _BODY.decode(data)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc2:
                self.unrecognised(exc2, data)
                return
            self._whole_interaction(body)
            return
        self.unrecognised(exc, data)

    def _late_delta(self, index: int, st: _StepState | None, d: Any) -> None:
        asm = self.asm
        if st is None:
            asm.protocol_error(f"delta for step {index}, which was never started")
        elif st.rec is not None and type(d) is _ArgumentsDelta and d.arguments:
            st.rec.fragments.append(d.arguments)  # fails the call and records the protocol error
        else:
            asm.protocol_error(f"delta for step {index} after its stop")

    def _other_delta(self, st: _StepState, delta: dict[str, Any]) -> None:
        t = delta.get("type")
        if t in _KNOWN_DELTAS:
            self.asm.protocol_error(f"{t} delta of step {st.index} has a wrong shape", msgspec.json.encode(delta))
        elif t == "thought_summary":
            st.summary.append(delta.get("content"))
        elif isinstance(delta.get("signature"), str) and delta["signature"]:
            self._signature(st, delta["signature"])  # built-in call deltas may carry one
        elif _log.enabled(_log.DEBUG):
            _log.emit(_log.DEBUG, "payload.skipped", provider=self.provider, reason="unknown delta type",
                      type=t, position=self.asm.position)

    # ---- interactions ---------------------------------------------------------------------------------
    def _saw_status(self, status: Any) -> None:
        """A status an event states (a status update, the interaction of ``interaction.created``): a status that
        ends an interaction is one of the turn's ends, and the worst of them is its finish at the completion (an
        ``incomplete`` update before a ``requires_action`` completion leaves the turn unclean). Other statuses
        (``in_progress`` …) say nothing about the end."""
        if type(status) is str:
            reason = _STATUS.get(status)
            if reason is not None:
                self.asm.saw_end(0, reason, status)

    def _interaction(self, it: _InteractionLite) -> None:
        asm = self.asm
        self._saw_status(it.status)
        if it.id and self._interaction_id is None:
            self._interaction_id = it.id
            asm.response_id = it.id
        if it.model and asm.model is None:
            asm.model = it.model
        if it.usage is not None:
            asm.usage = it.usage

    def _whole_steps(self, it: _InteractionLite) -> None:
        steps = it.steps
        if steps is None and it.outputs is not None:
            self._legacy = True
            steps = it.outputs
        for i, raw in enumerate(steps or ()):
            self._start(i, raw)
            self._stop(i)
            if self.asm.failed:
                return

    def _whole_interaction(self, it: _InteractionLite) -> None:
        if self._steps or self._completed:
            self.asm.stream_error(StreamError(type="spliced_stream", message="an Interaction body inside a stream"),
                                  ProblemCode.PROTOCOL_ERROR)
            return
        self._interaction(it)
        self._whole_steps(it)
        if not self.asm.failed:
            self._complete(it)

    def _complete(self, it: _InteractionLite) -> None:
        asm = self.asm
        if asm.failed:
            return
        self._completed = True
        asm.stream_ended("the interaction's completion")
        status = it.status
        if status is None:
            asm.stream_error(StreamError(type="protocol_error", message="the interaction ended without a status"),
                             ProblemCode.STREAM_CUT)
            return
        reason = _STATUS.get(status, FinishReason.OTHER)
        err = it.error if it.error is not None else it.errors
        if err is not None and err != [] and reason is not FinishReason.ERROR:
            # an error beside a status that says otherwise (``requires_action``, ``completed``): the interaction is
            # not what its status says, an error of the turn (the calls still open are cut by it)
            asm.stream_error(_error_from(err, "api_error"))
        # a length or error finish truncates the open calls; after a clean one, a step that never stopped fails
        asm.end_choice(0, reason, status, f"the interaction's completion ({status})")
        if reason is FinishReason.ERROR:
            if err:
                asm.stream_error(_error_from(err, f"interaction_{status}"))
            else:
                asm.stream_error(StreamError(type=f"interaction_{status}", message=f"the interaction {status}"))

    # ---- steps ----------------------------------------------------------------------------------------
    def _start(self, index: int, raw: msgspec.Raw) -> None:
        asm = self.asm
        if index in self._steps:
            asm.protocol_error(f"start of step {index}, which was already started")
            return
        try:
            step = _STEP.decode(raw)
            raw_dict = _ANY.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            self.bad_payload(exc, bytes(raw))
            return
        t = step.type
        rec = None
        if t == "function_call" or (t.endswith("_call") and t):
            server = t != "function_call"
            meta: dict[str, Any] = {"step_index": index}
            if step.signature:
                meta["thought_signature"] = step.signature
            elif not server and self._pending_signature is not None:
                meta["thought_step"], meta["thought_signature"] = self._pending_signature
                self._pending_signature = None
            name = step.name if not server else (step.name or t[:-len("_call")])
            # whole arguments on the start (bodies, legacy content.start); {} is a placeholder for the deltas
            rec = asm.open_call(call_id=step.id, name=name, server=server, server_type=t if server else None,
                                meta=meta, initial=_args_text(step.arguments))
        elif t == "model_output":
            for item in raw_dict.get("content") or ():
                if isinstance(item, dict) and item.get("type") == "text" and isinstance(item.get("text"), str):
                    if item["text"]:
                        asm.add_text(item["text"])
        elif t == "text":  # legacy text content
            if isinstance(raw_dict.get("text"), str) and raw_dict["text"]:
                asm.add_text(raw_dict["text"])
        elif t == "thought" and step.signature:
            self._pending_signature = (index, step.signature)
        self._steps[index] = _StepState(index, raw_dict, t, rec)
        if rec is not None and not rec.server:
            calls = self._call_steps
            if not calls or index > calls[-1]:
                calls.append(index)  # (steps start in order)
            else:
                insort(calls, index)

    def _signature(self, st: _StepState, sig: str) -> None:
        st.signature = sig
        rec = st.rec
        if rec is not None:
            rec.meta["thought_signature"] = sig
            return
        if st.type != "thought":
            return
        # a thought's signature: the first call after that thought takes it (found by bisection: a signature
        # costs the same however many steps came before it)
        calls = self._call_steps
        at = bisect_right(calls, st.index)
        if at < len(calls):
            meta = self._steps[calls[at]].rec.meta
            if "thought_signature" not in meta:
                meta["thought_signature"] = sig
                meta["thought_step"] = st.index
            return
        self._pending_signature = (st.index, sig)

    def _whole_arguments(self, st: _StepState, d: _FunctionCallDelta) -> None:
        """Legacy ``content.delta`` of a function call: the whole arguments object, replacing the previous."""
        asm = self.asm
        rec = st.rec
        if rec is None or rec.server:
            asm.protocol_error(f"function_call delta for {st.type} step {st.index}")
            return
        if d.name and rec.name is None:
            rec.name = d.name
        elif d.name and d.name != rec.name:
            asm.fail(rec, ProblemCode.CONFLICTING_NAME, f"call {rec.call_id} was named {rec.name!r}, then {d.name!r}")
            return
        if d.id and rec.call_id is None:
            rec.call_id = d.id
        text = _args_text(d.arguments)
        if text is not None:
            if not rec.is_open:
                rec.fragments.append(text)  # fails the call: it had ended
                return
            if rec.state is _ANN:
                rec.receive()
            rec.initial = text

    def _stop(self, index: int) -> None:
        asm = self.asm
        st = self._steps.get(index)
        if st is None:
            asm.protocol_error(f"stop of step {index}, which was never started")
            return
        if st.stopped:
            asm.protocol_error(f"second stop of step {index}")
            return
        st.stopped = True
        asm.terminate(st.rec)  # deltas replace the arguments given on the start

    def assistant_message(self) -> Any:
        """``{"id": …, "steps": [...]}`` (legacy ``"outputs"``): the model's steps as received, with streamed
        text, summaries, signatures and arguments filled in."""
        out = []
        for index in sorted(self._steps):
            st = self._steps[index]
            step = dict(st.raw)
            if st.text:
                text = "".join(st.text)
                if st.type == "text":
                    step["text"] = step.get("text", "") + text
                else:
                    content = list(step.get("content") or [])
                    content.append({"type": "text", "text": text})
                    step["content"] = content
            if st.summary:
                step["summary"] = list(step.get("summary") or []) + [s for s in st.summary if s is not None]
            if st.signature is not None:
                step["signature"] = st.signature
            rec = st.rec
            if rec is not None and not rec.server:
                # unparsable arguments become {} here; the history repair replaces them
                step["arguments"] = rec.args if isinstance(rec.args, dict) else {}
            out.append(step)
        key = "outputs" if self._legacy else "steps"
        return {"id": self._interaction_id, key: out}


# ---- the dialect record ---------------------------------------------------------------------------------------------
CAPABILITIES = Capabilities(
    dialect="gemini-interactions", endpoint="POST /v1beta/interactions",
    name_pattern=r"[A-Za-z_][A-Za-z0-9_.:-]{0,127}", name_max=128,
    name_source="Gemini Interactions: as generateContent (not documented separately)",
    max_tools=Limit(None, "not documented", documented=False),
    schema_depth=Limit(None, "not documented", documented=False),
    max_request_bytes=Limit(None, "not documented", documented=False),
    tool_kinds_source="Gemini Interactions: function tools only",
    ids_echoed="function_result.call_id = function_call.id",
    signatures="thought steps (signature) and thought_signature deltas",
    tool_turn_finish=("requires_action", "completed"),
    transient_statuses=(408, 409, 429, 500, 502, 503, 504),
    permanent_statuses=PERMANENT_STATUSES,
    transient_error_types=("RESOURCE_EXHAUSTED", "UNAVAILABLE", "INTERNAL"),
    delay_hints=("retry-after", "retry-after-ms"),
)

DIALECT = Dialect(id="gemini-interactions", codec=GeminiInteractionsCodec, declarations=_declarations.PART,
                  results=_results.PART, capabilities=CAPABILITIES, http=_http.PART,
                  sim="toolwire.sim._interactions:Interactions", order=50)
