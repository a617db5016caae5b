"""OpenAI Chat Completions (and OpenAI-compatible servers): streaming chunks and non-streaming bodies.

Wire facts: chunks have no ``event:`` name; ``choices[].delta.tool_calls[]`` carry ``index``, and
``id``/``type``/``function.name`` on a call's first fragment only; ``arguments`` are string fragments; the
choice's ``finish_reason`` is the terminator (``stop`` after tool calls is tolerated; a choice that states another
``finish_reason`` later keeps both, and the worst is its finish); ``data: [DONE]`` ends the
stream (a payload after it is a protocol error); ``choices: []`` appears in usage-only and Azure content-filter
chunks. Errors arrive in-stream as a top-level ``error`` (OpenAI, OpenRouter, Groq's ``event: error``) or as
``{"object": "error", …}`` (vLLM, Mistral). A non-empty ``refusal`` (``message.refusal``, ``delta.refusal``) is an
end of its choice as a filter's (raw word ``refusal``), whatever ``finish_reason`` says; a message whose ``role`` is
not ``assistant`` (absent is fine) is a protocol error.

Correlation (failure modes 1 to 6 in docs/failure-modes.md): by id first, then index, then the latest open
call; ``id`` and ``name`` are set once and never appended (a repeat is ignored, a conflicting name is a problem); a new
id without a name on an index whose call is still open is a continuation (servers that mint an id per fragment); two
whole calls that share index 0 with different ids stay separate.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import msgspec

from ..types import CallKind, CallState, FinishReason, ProblemCode, StreamError, TokenUsage
from .base import Codec, count, details
from .capabilities import Capabilities, Limit, PERMANENT_STATUSES
from .declare import openai_chat as _declarations
from .dialect import Dialect
from .http import openai_chat as _http
from .results import openai_chat as _results

__all__ = ["OpenAIChatCodec", "DIALECT", "CAPABILITIES"]


class _Function(msgspec.Struct, gc=False):
    name: str | None = None
    arguments: Any = None  # a string; some servers send an object


class _Custom(msgspec.Struct, gc=False):
    name: str | None = None
    input: Any = None


class _ToolCall(msgspec.Struct, gc=False):
    index: int | None = None
    id: str | None = None
    type: str | None = None
    function: _Function | None = None
    custom: _Custom | None = None
    extra_content: Any = None  # Gemini's OpenAI-compatible endpoint: thought signatures


class _Delta(msgspec.Struct, gc=False):
    role: str | None = None
    content: Any = None
    tool_calls: list[_ToolCall] | None = None
    function_call: _Function | None = None  # deprecated single-function form
    refusal: str | None = None
    reasoning_content: str | None = None


class _Choice(msgspec.Struct, gc=False):
    index: int = 0
    delta: _Delta | None = None
    message: _Delta | None = None
    finish_reason: str | None = None


class _Chunk(msgspec.Struct, gc=False):
    choices: list[_Choice] | None = None
    id: str | None = None
    object: str | None = None
    model: str | None = None
    usage: Any = None
    error: Any = None
    # vLLM / Mistral error shape: {"object": "error", "message": ..., "type": ..., "code": ...}
    message: Any = None
    type: Any = None
    code: Any = None


_DECODER = msgspec.json.Decoder(_Chunk)

_FINISH = {
    "tool_calls": FinishReason.TOOL_CALLS,
    "function_call": FinishReason.TOOL_CALLS,
    "stop": FinishReason.STOP,
    "length": FinishReason.LENGTH,
    "content_filter": FinishReason.CONTENT_FILTER,
    "error": FinishReason.ERROR,
}

_ACC = CallState.ACCUMULATING


_NOT_SPACE = re.compile(r"[^ \t\n\r]")
_OUTSIDE = re.compile(r'["\[\]{}]')
_INSIDE = re.compile(r'["\\]')

_EMPTY, _OPEN, _WHOLE, _OTHER = range(4)


class _Shape:
    """Whether a call's argument text so far is one whole JSON object or array, kept up to date fragment by
    fragment: each fragment is scanned once (strings and escapes respected), so a server that repeats the name
    on every fragment costs linear time, not a join and a decode of the whole buffer per fragment.

    ``state`` is ``_EMPTY`` (white space only), ``_OPEN`` (an object or array started and not yet closed),
    ``_WHOLE`` (one closed, only white space after it) or ``_OTHER`` (a scalar, or text after the value).
    """

    __slots__ = ("seen", "size", "state", "depth", "in_str", "esc", "value")

    def __init__(self) -> None:
        self.seen = 0  # fragments of the call scanned so far
        self.size = 0  # and their length
        self.state = _EMPTY
        self.depth = 0
        self.in_str = False
        self.esc = False  # the last fragment ended inside a string, right after a backslash
        self.value: Any = _Shape  # the decoded whole value, once asked for (``_Shape``: not yet)

    def update(self, frags: list[str]) -> int:
        """Scan the fragments not seen yet; return the state."""
        for text in frags[self.seen:]:
            self.size += len(text)
            self._scan(text)
        self.seen = len(frags)
        return self.state

    def _scan(self, text: str) -> None:
        pos, n = 0, len(text)
        while pos < n and self.state != _OTHER:
            if self.state != _OPEN:  # before or after the value: only white space may come
                m = _NOT_SPACE.search(text, pos)
                if m is None:
                    return
                if self.state == _WHOLE or text[m.start()] not in "{[":
                    self.state = _OTHER
                    return
                self.state, self.depth, pos = _OPEN, 1, m.end()
            elif self.in_str:
                if self.esc:
                    self.esc = False
                    pos += 1
                    continue
                m = _INSIDE.search(text, pos)
                if m is None:
                    return
                pos = m.end()
                if m.group() == '"':
                    self.in_str = False
                elif pos < n:
                    pos += 1  # the escaped character
                else:
                    self.esc = True
            else:
                m = _OUTSIDE.search(text, pos)
                if m is None:
                    return
                pos = m.end()
                c = m.group()
                if c == '"':
                    self.in_str = True
                elif c == "{" or c == "[":
                    self.depth += 1
                else:
                    self.depth -= 1
                    if self.depth == 0:
                        self.state = _WHOLE

    def whole_value(self, frags: list[str]) -> Any:
        """The decoded value of a ``_WHOLE`` text (decoded once), or None when it does not decode."""
        if self.value is _Shape:
            try:
                self.value = msgspec.json.decode("".join(frags))
            except msgspec.DecodeError:
                self.value = None
                self.state = _OTHER  # balanced but not JSON: never a whole value
        return self.value


class _ChoiceCalls:
    __slots__ = ("by_index", "by_id", "last", "finished", "reasoning", "shapes")

    def __init__(self) -> None:
        self.by_index: dict[int, Any] = {}
        self.by_id: dict[str, Any] = {}
        self.last = None
        self.finished = False
        self.reasoning: list[str] = []
        self.shapes: dict[Any, _Shape] = {}  # per call record checked for a repeated name


def _error_from(value: Any, fallback_type: str = "api_error") -> StreamError:
    if isinstance(value, dict):
        code = value.get("code")
        status = value.get("status_code") if isinstance(value.get("status_code"), int) else (
            code if isinstance(code, int) else None)
        return StreamError(type=str(value.get("type") or fallback_type),
                           message=str(value.get("message") or "An error occurred during streaming"),
                           code=None if code is None else str(code), status=status, raw=value)
    return StreamError(type=fallback_type, message=str(value), raw=value)


class OpenAIChatCodec(Codec):
    provider = "openai-chat"
    recover_resends = True
    finish_terminates_calls = True  # a choice's finish_reason is its calls' terminator


    @staticmethod
    def read_usage(raw: Mapping[str, Any]) -> TokenUsage | None:
        """``prompt_tokens`` holds the cached ones, ``completion_tokens`` the reasoning ones."""
        return TokenUsage(input_tokens=count(raw, "prompt_tokens"), output_tokens=count(raw, "completion_tokens"),
                          cache_read_input_tokens=count(details(raw, "prompt_tokens_details"), "cached_tokens"),
                          reasoning_output_tokens=count(details(raw, "completion_tokens_details"),
                                                        "reasoning_tokens"))

    def __init__(self) -> None:
        super().__init__()
        self._choices: dict[int, _ChoiceCalls] = {}
        self.done = False

    # ---- payloads -------------------------------------------------------------------------------------
    def on_payload(self, event: str | None, data: bytes) -> None:
        asm = self.asm
        if data[:6] == b"[DONE]":
            self.done = True
            asm.stream_ended("[DONE]")
            return
        try:
            chunk = _DECODER.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            self.unrecognised(exc, data)
            return
        if chunk.error is not None and chunk.error is not False:
            asm.stream_error(_error_from(chunk.error))
            return
        if chunk.object == "error" or event == "error":
            asm.stream_error(_error_from({"message": chunk.message, "type": chunk.type, "code": chunk.code}))
            return
        choices = chunk.choices
        if choices is None:
            self.skip("no choices", type=chunk.object)
            return
        if chunk.id and asm.response_id is None:
            asm.response_id = chunk.id
        if chunk.model and asm.model is None:
            asm.model = chunk.model
        if chunk.usage is not None:
            asm.usage = chunk.usage
        for ch in choices:
            whole = ch.message is not None
            d = ch.message if whole else ch.delta
            st = self._choices.get(ch.index)
            if st is None:
                if not asm.admit_choice(ch.index):
                    return  # over max_choices: the turn failed, nothing more of the payload is read
                st = self._choices[ch.index] = _ChoiceCalls()
            if d is not None:
                role = d.role
                if role and role != "assistant":  # (absent or null in most chunks)
                    asm.protocol_error(f"the message of choice {ch.index} has role {role!r}, not 'assistant'")
                    return
                tcs = d.tool_calls
                if d.function_call is not None:  # the deprecated single-function form, after any tool calls
                    tcs = [*(tcs or ()), _ToolCall(index=-1, function=d.function_call)]
                if tcs:
                    for tc in tcs:
                        fn = tc.function
                        # the hot path: a continuation fragment (no id, no name) for an accumulating call at a
                        # known index; anything else goes through ``_tool_call``
                        if not whole and not tc.id and fn is not None and not fn.name and tc.index is not None:
                            rec = st.by_index.get(tc.index)
                            if rec is not None and rec.state is _ACC:
                                args = fn.arguments
                                if args:
                                    rec.fragments.append(args if isinstance(args, str) else self.to_text(args))
                                continue
                        self._tool_call(ch.index, st, tc, whole)
                if d.content:
                    if isinstance(d.content, str):
                        asm.add_text(d.content, ch.index)
                if d.reasoning_content:
                    st.reasoning.append(d.reasoning_content)
                if d.refusal:
                    # the model refused: an end of the choice as a filter's, whatever finish_reason it states (the
                    # worst end wins), so none of the choice's calls runs
                    asm.saw_end(ch.index, FinishReason.CONTENT_FILTER, "refusal")
            if ch.finish_reason:
                self._finish(ch.index, st, ch.finish_reason)

    def ignorable_after_end(self, event: str | None, data: bytes) -> bool:
        """A repeated ``[DONE]`` says nothing new."""
        return data[:6] == b"[DONE]"

    def _tool_call(self, choice: int, st: _ChoiceCalls, tc: _ToolCall, whole: bool) -> None:
        fn = tc.function
        asm = self.asm
        if st.finished:
            asm.protocol_error(f"tool call fragment after finish_reason in choice {choice}")
            return
        custom = tc.custom
        name = (fn.name if fn is not None else None) or (custom.name if custom is not None else None) or None
        call_id = tc.id or None
        if fn is not None:
            args = fn.arguments
        elif custom is not None:
            args = custom.input
        else:
            args = None
        rec = None
        if not whole:
            if call_id is not None:
                rec = st.by_id.get(call_id)
                if rec is None:
                    prev = st.by_index.get(tc.index) if tc.index is not None else st.last
                    if prev is not None and prev.is_open and not name and prev.name:
                        # a server that mints a new id per fragment: a continuation, the first id stays
                        rec = prev
                        if prev.call_id is None:
                            prev.call_id = call_id
                        elif call_id != prev.call_id:
                            if prev.alias_ids is None:
                                prev.alias_ids = []
                                prev.meta["alias_ids"] = prev.alias_ids
                            prev.alias_ids.append(call_id)
                        st.by_id[call_id] = prev
            elif tc.index is not None:
                rec = st.by_index.get(tc.index)
                if rec is not None and name and rec.name and self._starts_new_call(st, rec, name, args):
                    rec = None
            elif st.last is not None and st.last.is_open:
                rec = st.last
        if rec is None:
            kind = CallKind.CUSTOM if (tc.type == "custom" or custom is not None) else CallKind.FUNCTION
            meta = {}
            if tc.extra_content is not None:
                meta["extra_content"] = tc.extra_content
            if tc.index is not None and tc.index >= 0:
                meta["wire_index"] = tc.index
            rec = asm.open_call(call_id=call_id, name=name, kind=kind, choice=choice, meta=meta)
            if call_id is not None:
                st.by_id[call_id] = rec
            if tc.index is not None:
                st.by_index[tc.index] = rec
            st.last = rec
        else:
            if name and rec.name is None:
                rec.name = name
            elif name and name != rec.name:
                asm.fail(rec, ProblemCode.CONFLICTING_NAME,
                         f"call {rec.call_id or rec.local_id} was named {rec.name!r}, then {name!r}")
                return
            if call_id is not None and rec.call_id is None:
                rec.call_id = call_id
                st.by_id[call_id] = rec
            if tc.extra_content is not None and "extra_content" not in rec.meta:
                rec.meta["extra_content"] = tc.extra_content
        if args is not None and args != "":
            rec.fragments.append(args if isinstance(args, str) else self.to_text(args))

    @staticmethod
    def _starts_new_call(st: _ChoiceCalls, rec: Any, name: str, args: Any) -> bool:
        """A name re-sent without an id at a used index: a new call (Ollama's parallel calls all at index 0)
        unless it is the same call repeated (failure mode 3) or its arguments resent (failure mode 2). A new call starts
        only after the previous one's text is a whole JSON object or array; that is tracked incrementally
        (``_Shape``), so checking every fragment of a call costs time linear in its text."""
        if name != rec.name:
            return True
        if not rec.is_open:
            return True
        if not isinstance(args, str) or not args:
            return False
        frags = rec.frags
        shape = st.shapes.get(rec)
        if shape is None or shape.seen > len(frags):
            shape = st.shapes[rec] = _Shape()
        state = shape.update(frags)
        if state == _EMPTY:
            return False  # nothing (or white space) so far: a continuation
        if state != _WHOLE:
            return False  # an unfinished value (a cumulative resend's too), or no JSON value: a continuation
        prev = shape.whole_value(frags)
        if prev is None or (len(args) >= shape.size and args.startswith("".join(frags))):
            return False  # (joined only when the fragment is at least as long: linear overall)
        try:
            new = msgspec.json.decode(args)
        except msgspec.DecodeError:
            return False
        if isinstance(prev, dict) and isinstance(new, dict) and all(k in new and new[k] == v
                                                                   for k, v in prev.items()):
            return False  # '{}' then the full object: a resend, not a new call
        return True

    def _finish(self, choice: int, st: _ChoiceCalls, raw: str) -> None:
        st.finished = True
        st.shapes.clear()
        # a clean finish completes the choice's open calls (finish_terminates_calls)
        self.asm.end_choice(choice, _FINISH.get(raw, FinishReason.OTHER), raw, f"finish_reason of choice {choice}")

    def assistant_message(self) -> Any:
        """``{"role": "assistant", "content": …, "tool_calls": […]}`` for choice 0, arguments as received."""
        return self._message(0)

    def choice_messages(self) -> dict[int, Any]:
        """The assistant message of every choice (``n > 1``): the calls are sorted by choice in one pass."""
        by_choice: dict[int, list[Any]] = {}
        for rec in self.asm.records:
            if not rec.server:
                calls = by_choice.get(rec.choice)
                if calls is None:
                    calls = by_choice[rec.choice] = []
                calls.append(rec)
        return {i: self._message(i, by_choice.get(i, ()))
                for i in sorted(set(self.asm.choices) | set(self._choices))}

    def _message(self, choice: int, records: Any = None) -> Any:
        """The assistant message of ``choice``; ``records``: its client calls, in order (default: found in every
        call of the turn)."""
        asm = self.asm
        st = asm.choices.get(choice)
        text = "".join(st.text) if st else ""
        calls = []
        for rec in asm.records if records is None else records:
            if rec.choice != choice or rec.server:
                continue
            if rec.kind is CallKind.CUSTOM:
                entry = {"id": rec.call_id, "type": "custom", "custom": {"name": rec.name, "input": rec.raw}}
            else:
                entry = {"id": rec.call_id, "type": "function",
                         "function": {"name": rec.name, "arguments": rec.raw if rec.raw else rec.text()}}
            if "extra_content" in rec.meta:
                entry["extra_content"] = rec.meta["extra_content"]
            calls.append(entry)
        msg: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            msg["tool_calls"] = calls
        ch = self._choices.get(choice)
        if ch is not None and ch.reasoning:
            msg["reasoning_content"] = "".join(ch.reasoning)
        return msg


# ---- the dialect record ---------------------------------------------------------------------------------------------
#: statuses the OpenAI APIs answer for a failure worth a retry
OPENAI_TRANSIENT_STATUSES = (408, 409, 429, 500, 502, 503, 504)
OPENAI_SCHEMA_ROOT = ("OpenAI API error invalid_function_parameters: schema must be a JSON Schema of "
                      "'type: \"object\"', got 'type: \"array\"' (or \"None\")")
OPENAI_ARRAY_ITEMS = "OpenAI API error invalid_function_parameters: array schema missing items"

CAPABILITIES = Capabilities(
    dialect="openai-chat", endpoint="POST /v1/chat/completions",
    name_pattern=r"[a-zA-Z0-9_-]{1,64}", name_max=64,
    name_source="openai-python types (function_definition.py)",
    max_tools=Limit(128, "OpenAI API error array_above_max_length on tools"),
    schema_depth=Limit(10, "OpenAI Structured Outputs: strict mode nesting (older limit 5)", documented=True,
                       applies="strict"),
    max_request_bytes=Limit(None, "not documented", documented=False),
    max_schema_properties=Limit(5000, "OpenAI Structured Outputs: strict mode properties", applies="strict"),
    max_enum_values=Limit(1000, "OpenAI Structured Outputs: strict mode enum values", applies="strict"),
    tool_kinds=("function", "custom"),
    tool_kinds_source="openai-python types (chat_completion_custom_tool_param.py)",
    schema_root="object", schema_root_source=OPENAI_SCHEMA_ROOT, array_items=True,
    array_items_source=OPENAI_ARRAY_ITEMS,
    ids_echoed="tool message tool_call_id = tool_calls[].id",
    signatures="none (Gemini's compatible endpoint: tool_calls[].extra_content.google.thought_signature)",
    tool_turn_finish=("tool_calls", "stop", "function_call"),
    transient_statuses=OPENAI_TRANSIENT_STATUSES + (520, 522, 524),
    permanent_statuses=PERMANENT_STATUSES,
    transient_error_types=("server_error", "rate_limit_exceeded", "overloaded_error", "api_error"),
    delay_hints=("retry-after-ms", "retry-after"),
)

DIALECT = Dialect(id="openai-chat", codec=OpenAIChatCodec, declarations=_declarations.PART, results=_results.PART,
                  capabilities=CAPABILITIES, http=_http.PART, sim="toolwire.sim._chat:OpenAIChat", order=10)
