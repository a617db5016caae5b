"""Gemini ``generateContent`` / ``streamGenerateContent`` (Gemini API and Vertex AI): chunks and unary bodies.

Wire facts: every payload is a whole ``GenerateContentResponse`` (one SSE ``data:`` message with
``alt=sse``, one element of the JSON array streamed without it, or the unary body; a ``format="json"`` body may be
that whole array). Candidates are choices. ``functionCall`` parts arrive whole (``args`` is an object; a JSON
string is tolerated; no ``args`` is ``{}``; ``id`` is optional), so they are opened and completed at once.
Built-in ``toolCall`` parts run at Google and go to ``server_calls``; ``toolResponse`` parts are replay only.

Vertex streamed arguments: a ``functionCall`` with ``name`` and ``willContinue: true`` opens a
call; the following ``functionCall`` parts carry ``partialArgs`` (typed values by JSON path; string fragments of
one path concatenate) and omit name and id; ``{"willContinue": true}`` parts are separators; an empty
``functionCall: {}`` ends the call. When that end marker never comes, a ``STOP`` finish ends the call provided
its last part said no more would follow (``willContinue`` absent); otherwise the candidate contradicts itself
and the turn is a protocol error. The arguments are built as an object from the paths, so they equal the unary
form; ``raw_arguments`` is that object's JSON.

``finishReason`` is the candidate's end (``STOP`` with calls is reported as ``tool_calls``, as everywhere); there
is no sentinel, so a stream that closes without one was cut. A candidate that states another ``finishReason``
later keeps both, and the worst is its finish (``SAFETY`` or ``MAX_TOKENS`` after ``STOP`` makes it unclean). A response streamed as one JSON array ends with the
array: a value after it is a protocol error. A ``promptFeedback.blockReason`` is an end (a filter's) of every
candidate of the turn, those before it, beside it and after it. A candidate whose ``content.role`` is not ``model``
(absent is fine: later chunks often leave it out) is a protocol error. Errors arrive as ``{"error": {code, message, status, details}}``,
possibly wrapped in a one-element array.

Replay (failure mode 16 in docs/failure-modes.md): ``assistant_message()`` is the model ``Content`` of
candidate 0 with every part verbatim and in order (``thoughtSignature`` on its exact part, empty-text signature parts
kept); a streamed call is replayed as the one whole ``functionCall`` part it stands for, at its start part's position.
Calls keep their part's signature in ``provider_meta["thought_signature"]`` and the position of their part in
``provider_meta["part_index"]``; a signature that arrives on a later empty part before any call of the candidate was
signed is also recorded on the first call, with ``provider_meta["thought_signature_part"]`` giving the part that carries
it (replay it there, not on the call's part).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Union

import msgspec
from msgspec import UNSET, UnsetType

from .. import _log
from ..types import CallState, FinishReason, ProblemCode, StreamError, TokenUsage
from .base import _MAX_COUNT, Codec
from .capabilities import Capabilities, Limit, PERMANENT_STATUSES
from .declare import gemini as _declarations
from .dialect import Dialect
from .http import gemini as _http
from .results import gemini as _results

__all__ = ["GeminiCodec", "DIALECT", "CAPABILITIES", "parse_json_path", "JSONPathError"]


# ---- wire Structs ---------------------------------------------------------------------------------------
class _PartialArg(msgspec.Struct, rename="camel", gc=False):
    json_path: str
    string_value: Union[str, UnsetType] = UNSET
    number_value: Union[int, float, UnsetType] = UNSET
    bool_value: Union[bool, UnsetType] = UNSET
    null_value: Any = UNSET
    will_continue: Union[bool, None] = None


class _FunctionCall(msgspec.Struct, rename="camel", gc=False):
    id: Union[str, None] = None
    name: Union[str, None] = None
    args: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    partial_args: Union[list[_PartialArg], None] = None
    will_continue: Union[bool, None] = None


class _ToolCall(msgspec.Struct, rename="camel", gc=False):
    id: Union[str, None] = None
    tool_type: Union[str, None] = None
    args: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)


class _Part(msgspec.Struct, rename="camel", gc=False):
    text: Union[str, None] = None
    thought: Union[bool, None] = None
    thought_signature: Union[str, None] = None
    function_call: Union[_FunctionCall, None] = None
    tool_call: Union[_ToolCall, None] = None


class _Content(msgspec.Struct, gc=False):
    role: Union[str, None] = None
    parts: Union[list[msgspec.Raw], None] = None


class _Candidate(msgspec.Struct, rename="camel", gc=False):
    content: Union[_Content, None] = None
    finish_reason: Union[str, int, None] = None  # a name, or its number (``$alt=json;enum-encoding=int``)
    index: Union[int, None] = None
    finish_message: Union[str, None] = None


class _PromptFeedback(msgspec.Struct, rename="camel", gc=False):
    block_reason: Union[str, int, None] = None
    block_reason_message: Union[str, None] = None


class _Response(msgspec.Struct, rename="camel", gc=False):
    candidates: Union[list[_Candidate], None] = None
    prompt_feedback: Union[_PromptFeedback, None] = None
    usage_metadata: Any = None
    model_version: Union[str, None] = None
    response_id: Union[str, None] = None
    error: Any = None


class _TypedContent(msgspec.Struct, gc=False):
    role: Union[str, None] = None
    parts: Union[list[_Part], None] = None


class _TypedCandidate(_Candidate, gc=False):
    content: Union[_TypedContent, None] = None


class _TypedResponse(_Response, gc=False):
    candidates: Union[list[_TypedCandidate], None] = None
    #: decoded as it arrived. Before the response is read, ``GeminiCodec.on_payload`` puts its value in its place
    #: (as ``_Response`` holds it: None when absent or null), unless it is the one last decoded, whose value the
    #: turn's usage is already: that one stays a ``Raw`` (present, nothing new). Each new one is decoded once.
    usage_metadata: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)


#: the payload in one pass, parts typed (the usual case); a payload it refuses is decoded again with
#: ``_PAYLOAD``, whose parts stay ``Raw`` and are decoded one by one, so a bad part is reported as before
_TYPED = msgspec.json.Decoder(Union[_TypedResponse, list[_TypedResponse]])
_PAYLOAD = msgspec.json.Decoder(Union[_Response, list[_Response]])
_PART = msgspec.json.Decoder(_Part)
_ANY = msgspec.json.Decoder()


class _ReplayContent(msgspec.Struct, gc=False):
    parts: list[Any] = []


class _ReplayCandidate(msgspec.Struct, gc=False):
    content: Union[_ReplayContent, None] = None


class _ReplayResponse(msgspec.Struct, gc=False):
    candidates: list[_ReplayCandidate] = []


#: a payload read again for the replay: its candidates' parts as JSON values, everything else skipped
_REPLAY = msgspec.json.Decoder(Union[_ReplayResponse, list[_ReplayResponse]])
_RAW = msgspec.Raw
_encode = msgspec.json.encode
#: a ``usageMetadata`` that says nothing: absent, or null
_NO_USAGE = (msgspec.Raw(), msgspec.Raw(b"null"))

_FINISH = {
    "STOP": FinishReason.STOP,
    "MAX_TOKENS": FinishReason.LENGTH,
    "SAFETY": FinishReason.CONTENT_FILTER,
    "RECITATION": FinishReason.CONTENT_FILTER,
    "BLOCKLIST": FinishReason.CONTENT_FILTER,
    "PROHIBITED_CONTENT": FinishReason.CONTENT_FILTER,
    "SPII": FinishReason.CONTENT_FILTER,
    "MALFORMED_FUNCTION_CALL": FinishReason.ERROR,
    "UNEXPECTED_TOOL_CALL": FinishReason.ERROR,
    "TOO_MANY_TOOL_CALLS": FinishReason.ERROR,
}


#: enum numbers, for bodies requested with ``$alt=json;enum-encoding=int`` (as Google's own client libraries do):
#: ``Candidate.FinishReason`` and ``PromptFeedback.BlockReason`` of the Vertex AI and Gemini API protos
_FINISH_NUMBERS = ("FINISH_REASON_UNSPECIFIED", "STOP", "MAX_TOKENS", "SAFETY", "RECITATION", "OTHER", "BLOCKLIST",
                   "PROHIBITED_CONTENT", "SPII", "MALFORMED_FUNCTION_CALL", "MODEL_ARMOR", "IMAGE_SAFETY",
                   "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION", "IMAGE_OTHER", "UNEXPECTED_TOOL_CALL", "NO_IMAGE")
_BLOCK_NUMBERS = ("BLOCKED_REASON_UNSPECIFIED", "SAFETY", "OTHER", "BLOCKLIST", "PROHIBITED_CONTENT",
                  "MODEL_ARMOR", "IMAGE_SAFETY")


def enum_name(value: str | int | None, names: tuple[str, ...]) -> str | None:
    """The name of an enum value sent as a name or as its number; an unknown number is kept as its digits
    (read as an unknown reason, never fatal)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return str(value)
    return names[value] if 0 <= value < len(names) else str(value)  # 0: "…_UNSPECIFIED", as in the name form


def finish_reason_of(raw: str) -> FinishReason:
    """Canonical reason for a Gemini ``finishReason`` (``STOP`` before the has-calls rule of the assembler)."""
    reason = _FINISH.get(raw)
    if reason is None:
        reason = FinishReason.CONTENT_FILTER if raw.startswith("IMAGE_") else FinishReason.OTHER
    return reason


_ANN = CallState.ANNOUNCED


# ---- JSON paths (RFC 9535 normalized paths, the subset partialArgs use) -----------------------------------
class JSONPathError(ValueError):
    """A ``partialArgs`` JSON path that cannot be applied to the arguments object."""


_SEGMENT = re.compile(
    r"""\.([A-Za-z_\u0080-\U0010ffff][A-Za-z0-9_\-\u0080-\U0010ffff]*)"""
    r"""|\[(0|[1-9][0-9]*)\]"""
    r"""|\['((?:[^'\\]|\\.)*)'\]"""
    r"""|\["((?:[^"\\]|\\.)*)"\]"""
)


def _unquote(body: str, quote: str) -> str:
    if "\\" not in body and (quote == '"' or '"' not in body):
        return body
    if quote == "'":
        body = body.replace("\\'", "'").replace('"', '\\"')
    try:
        return msgspec.json.decode(('"' + body + '"').encode())
    except msgspec.DecodeError:
        raise JSONPathError(f"bad escape in {body!r}") from None


@lru_cache(maxsize=4096)
def parse_json_path(path: str) -> tuple[str | int, ...]:
    """``"$.recipe.ingredients[3].name"`` → ``("recipe", "ingredients", 3, "name")``.

    Accepts member names (dot or bracket-quoted) and non-negative indices. Raises ``JSONPathError`` for
    anything else (no ``$``, wildcards, slices, negative indices, filters, an empty path)."""
    if not path.startswith("$"):
        raise JSONPathError(f"JSON path {path!r} does not start with '$'")
    keys: list[str | int] = []
    pos = 1
    n = len(path)
    while pos < n:
        m = _SEGMENT.match(path, pos)
        if m is None:
            raise JSONPathError(f"JSON path {path!r} is not supported at offset {pos}")
        name, index, single, double = m.groups()
        if name is not None:
            keys.append(name)
        elif index is not None:
            keys.append(int(index))
        elif single is not None:
            keys.append(_unquote(single, "'"))
        else:
            keys.append(_unquote(double, '"'))
        pos = m.end()
    if not keys:
        raise JSONPathError(f"JSON path {path!r} names the whole arguments object, not a member of it")
    if not isinstance(keys[0], str):
        raise JSONPathError(f"JSON path {path!r} indexes the arguments object as an array")
    return tuple(keys)


def _child(node: Any, key: str | int, make: type, path: str) -> Any:
    if isinstance(key, str):
        if type(node) is not dict:
            raise JSONPathError(f"{path}: member {key!r} of a value that is not an object")
        child = node.get(key)
        if child is None and key not in node:
            child = node[key] = make()
            return child
    else:
        if type(node) is not list:
            raise JSONPathError(f"{path}: index [{key}] of a value that is not an array")
        if key == len(node):
            child = make()
            node.append(child)
            return child
        if key > len(node):
            raise JSONPathError(f"{path}: index [{key}] skips over index [{len(node)}]")
        child = node[key]
    if type(child) is not make:
        raise JSONPathError(f"{path}: the value at {key!r} is not {'an array' if make is list else 'an object'}")
    return child


def _set(root: dict, path: str, value: Any) -> tuple[Any, str | int]:
    """Put ``value`` at ``path`` and return the container and key it went to. Raises ``JSONPathError`` when the
    path contradicts what is there (a gap in an array, a member of a non-object, a value set twice)."""
    keys = parse_json_path(path)
    node: Any = root
    last = len(keys) - 1
    for i in range(last):
        node = _child(node, keys[i], list if type(keys[i + 1]) is int else dict, path)
    key = keys[last]
    if type(key) is str:
        if type(node) is not dict:
            raise JSONPathError(f"{path}: member {key!r} of a value that is not an object")
        if key in node:
            raise JSONPathError(f"{path}: set twice")
        node[key] = value
        return node, key
    if type(node) is not list:
        raise JSONPathError(f"{path}: index [{key}] of a value that is not an array")
    size = len(node)
    if key > size:
        raise JSONPathError(f"{path}: index [{key}] skips over index [{size}]")
    if key < size:
        raise JSONPathError(f"{path}: set twice")
    node.append(value)
    return node, key


# ---- where a part is ---------------------------------------------------------------------------------------
# A part of a payload decoded in one pass is kept as the tuple ``(data, resp, cand, part)``: the payload, its
# response's position in a payload that is an array (else -1), its candidate's position in ``candidates`` and its
# position in ``content.parts``. The part is decoded again only when it is needed as it arrived (replay, a
# diagnostic), so the usual path decodes each payload once. A part of a payload decoded with ``_PAYLOAD`` is kept
# as its ``msgspec.Raw``.


def _part_bytes(ref: Any) -> bytes:
    """The part's JSON text exactly as it arrived."""
    if type(ref) is not tuple:
        return bytes(ref)
    data, ri, ci, pi = ref
    resp = _PAYLOAD.decode(data)
    if ri >= 0:
        resp = resp[ri]
    return bytes(resp.candidates[ci].content.parts[pi])


def _part_value(ref: Any, docs: dict[int, Any]) -> dict[str, Any]:
    """The part as a new JSON object; ``docs`` keeps the payloads decoded so far (by ``id``), so the parts of one
    payload cost one decoding. Only the parts are read as JSON values: the rest of the payload is skipped as the
    first reading skipped it, so a field toolwire ignores (a number no Python value can take, ``1e400``) cannot
    fail the replay of a payload that was read."""
    if type(ref) is not tuple:
        return _ANY.decode(ref)
    data, ri, ci, pi = ref
    doc = docs.get(id(data))
    if doc is None:
        doc = docs[id(data)] = _REPLAY.decode(data)
    resp = doc if ri < 0 else doc[ri]
    return resp.candidates[ci].content.parts[pi]


# ---- per-candidate state ----------------------------------------------------------------------------------
class _Streamed:
    """A call whose arguments arrive as ``partialArgs`` (Vertex): its start part and the object being built.

    Consecutive string fragments of one path are kept in a list and joined once (when another path comes or
    the value is read), so a long string streamed in many fragments costs linear time."""

    __slots__ = ("rec", "start", "_args", "path", "frags", "_node", "_key", "ended", "signature")

    def __init__(self, rec: Any, start: Any) -> None:
        self.rec = rec
        self.start = start
        self._args: dict[str, Any] = {}
        # the string being streamed: its path, its fragments so far, and the container and key it is at
        self.path: str | None = None
        self.frags: list[str] = []
        self._node: Any = None
        self._key: str | int = ""
        self.ended = False  # its last part said no more would follow (functionCall.willContinue absent)
        self.signature: str | None = None  # a signature that arrived on a continuation part

    def apply(self, partial_args: list[_PartialArg]) -> None:
        """Apply one part's ``partialArgs``. Raises ``JSONPathError``."""
        for pa in partial_args:
            path = pa.json_path
            value: Any = pa.string_value
            if value is not UNSET:
                if path == self.path:
                    self.frags.append(value)  # the next fragment of the same string
                    continue
            elif pa.number_value is not UNSET:
                value = pa.number_value
            elif pa.bool_value is not UNSET:
                value = pa.bool_value
            elif pa.null_value is not UNSET:
                value = None
            else:
                parse_json_path(path)  # a fragment without a value still needs a sound path
                continue
            self._flush()
            node, key = _set(self._args, path, value)
            if type(value) is str:
                self.path, self.frags, self._node, self._key = path, [value], node, key

    def _flush(self) -> None:
        if self.path is not None:
            frags, node = self.frags, self._node
            self.path, self.frags, self._node = None, [], None
            if len(frags) > 1:
                node[self._key] = "".join(frags)

    @property
    def args(self) -> dict[str, Any]:
        """The arguments object built so far."""
        self._flush()
        return self._args

    def replay(self, docs: dict[int, Any]) -> dict[str, Any]:
        part = _part_value(self.start, docs)
        fc = dict(part.get("functionCall") or {})
        fc.pop("willContinue", None)
        fc.pop("partialArgs", None)
        rec = self.rec
        # the arguments decoded again from the text they were decoded from: equal to the call's, but the
        # replay's own (editing ``call.args`` never changes the replayed history)
        fc["args"] = _ANY.decode(rec.raw) if isinstance(rec.args, dict) and rec.raw else {}
        part["functionCall"] = fc
        if self.signature is not None and "thoughtSignature" not in part:
            part["thoughtSignature"] = self.signature
        return part


class _Cand:
    __slots__ = ("index", "entries", "open", "first", "signed", "finished")

    def __init__(self, index: int) -> None:
        self.index = index
        self.entries: list[Any] = []  # replay parts: msgspec.Raw or _Ref (verbatim), or _Streamed
        self.open: _Streamed | None = None
        self.first: Any = None  # its first client call
        self.signed = False  # some call of this candidate carries a thought signature
        self.finished = False


def _error_from(value: Any) -> StreamError:
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, dict):
        code = value.get("code")
        status = value.get("status")
        return StreamError(type=str(status or "api_error"),
                           message=str(value.get("message") or "the provider reported an error"),
                           code=None if status is None else str(status),
                           status=code if isinstance(code, int) and not isinstance(code, bool) else None,
                           raw=value)
    return StreamError(type="api_error", message=str(value), raw=value)


def _args_text(raw: msgspec.Raw) -> tuple[str | None, bytes | None]:
    """The arguments as text: an object as it arrived, a JSON string's content; None when absent or null. Second:
    the bytes the text was decoded from when it is the JSON as it arrived (for ``Assembler.complete(utf8=)``),
    else None."""
    if not raw:
        return None, None
    data = bytes(raw)
    if data == b"null":
        return None, None
    if data[:1] == b'"':
        return msgspec.json.decode(data), None
    return data.decode(), data


#: the ``usageMetadata`` counts ``read_usage`` reads, in the order it unpacks them
_USAGE_KEYS = ("promptTokenCount", "toolUsePromptTokenCount", "candidatesTokenCount", "thoughtsTokenCount",
               "cachedContentTokenCount")


class GeminiCodec(Codec):
    provider = "gemini"
    #: take the hot paths of a streamed call's fragments (False: the general path, which they must equal; a test
    #: compares the two)
    hot_paths = True

    @staticmethod
    def read_usage(raw: Mapping[str, Any]) -> TokenUsage | None:
        """``usageMetadata``: the prompt holds the cached content; tool-use prompts are input besides it, thoughts
        output besides the candidates."""
        # each key read once, as ``count`` reads it: a value that is not a non-negative int (a bool, a float, a
        # string, a number too large) is not there; a sum is capped as ``count`` caps it
        prompt, tool, cands, thoughts, cached = [v if type(v) is int and 0 <= v <= _MAX_COUNT else None
                                                  for v in map(raw.get, _USAGE_KEYS)]
        return TokenUsage(
            input_tokens=prompt if prompt is None or tool is None else min(_MAX_COUNT, prompt + tool),
            output_tokens=thoughts if cands is None else cands if thoughts is None else min(_MAX_COUNT,
                                                                                          cands + thoughts),
            cache_read_input_tokens=cached,
            reasoning_output_tokens=thoughts)

    def __init__(self) -> None:
        super().__init__()
        self._cands: dict[int, _Cand] = {}
        self._blocked: str | None = None  # the prompt's block reason, once one arrived
        self._usage: msgspec.Raw | None = None  # the last usageMetadata decoded (not null), as it arrived

    def _usage_value(self, raw: msgspec.Raw) -> Any:
        """The value of a ``usageMetadata`` other than the one last decoded (None when absent or null). Raises
        ``msgspec.DecodeError`` as decoding it with the payload did (a number out of range, text that is not
        UTF-8)."""
        if raw in _NO_USAGE:
            return None
        value = _ANY.decode(raw)
        self._usage = raw
        return value

    # ---- payloads -------------------------------------------------------------------------------------
    def on_payload(self, event: str | None, data: bytes) -> None:
        asm = self.asm
        try:
            value = _TYPED.decode(data)
            # what the usage says, before anything of the payload is read (a repeat of the one last decoded, the
            # usual case, stays as it is: see ``_TypedResponse.usage_metadata``)
            if type(value) is list:
                for resp in value:
                    if resp.usage_metadata != self._usage:
                        resp.usage_metadata = self._usage_value(resp.usage_metadata)
            elif value.usage_metadata != self._usage:
                value.usage_metadata = self._usage_value(value.usage_metadata)
        except (msgspec.DecodeError, msgspec.ValidationError):
            # (``_PAYLOAD`` decodes the usage as it decoded the whole payload, so it refuses a usage that does not
            # decode as the payload then did)
            self._usage = None  # its usage, if it has one, is decoded with it
            try:
                value = _PAYLOAD.decode(data)  # parts as Raw: a part that does not decode is reported alone
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                self.unrecognised(exc, data)
                return
        if type(value) is list:  # a whole streamed array handed over as one body
            if not value:
                self.skip("empty array")
                return
            understood = False
            for ri, resp in enumerate(value):
                if asm.failed:
                    break
                understood = self._response(resp, data, ri) or understood
            if not understood:
                self.not_understood()  # no response of the array had a field Gemini sends
            return
        cands = value.candidates
        if cands is not None and len(cands) == 1 and self.hot_paths and value.error is None \
                and type(value) is _TypedResponse:
            # The hot path of a streamed call (Vertex): one candidate without a finish whose one part carries
            # the next ``partialArgs`` of its open call, more to follow, and nothing else a part can say to a
            # call (no name, id or signature). It does what ``_response`` and ``_candidate`` do for such a
            # payload (the response's fields, then ``_continue``), without their calls.
            cand = cands[0]
            content = cand.content
            if cand.finish_reason is None and content is not None and (not content.role or content.role == "model"):
                parts = content.parts
                if parts is not None and len(parts) == 1:
                    part = parts[0]
                    fc = part.function_call
                    if fc is not None and fc.will_continue and fc.partial_args and fc.name is None \
                            and fc.id is None and part.thought_signature is None:
                        st = self._cands.get(0 if cand.index is None else cand.index)
                        cur = None if st is None else st.open
                        if cur is not None:
                            if asm.response_id is None and value.response_id:
                                asm.response_id = value.response_id
                            if asm.model is None and value.model_version:
                                asm.model = value.model_version
                            usage = value.usage_metadata
                            if usage is not None and type(usage) is not _RAW:
                                asm.usage = usage
                            pas = fc.partial_args
                            if len(pas) == 1:
                                pa = pas[0]
                                if pa.json_path == cur.path and pa.string_value is not UNSET:
                                    # the next fragment of the string being streamed: what ``_continue`` does
                                    # with it (the call accumulates since the string's first fragment)
                                    cur.frags.append(pa.string_value)
                                    cur.ended = False
                                    return
                            self._continue(cur, pas, (data, -1, 0, 0))
                            return
        if not self._response(value, data, -1):
            self.not_understood()

    def _response(self, resp: _Response, data: bytes, ri: int) -> bool:
        """One response (``ri``: its position in a payload that is an array, else -1); False when it has no
        field Gemini sends (it is skipped)."""
        asm = self.asm
        if resp.error is not None:
            asm.stream_error(_error_from(resp.error))
            return True
        cands = resp.candidates
        if cands is None and resp.prompt_feedback is None and resp.usage_metadata is None \
                and resp.response_id is None and resp.model_version is None:
            if _log.enabled(_log.DEBUG):
                _log.emit(_log.DEBUG, "payload.skipped", provider=self.provider, reason="no known field",
                          position=asm.position)
            return False
        if resp.response_id and asm.response_id is None:
            asm.response_id = resp.response_id
        if resp.model_version and asm.model is None:
            asm.model = resp.model_version
        usage = resp.usage_metadata
        if usage is not None and type(usage) is not _RAW:  # (a Raw: the turn's usage already)
            asm.usage = usage
        if cands:
            for pos, cand in enumerate(cands):
                self._candidate(cand, pos, data, ri)
                if asm.failed:
                    return True
        block = enum_name(resp.prompt_feedback.block_reason, _BLOCK_NUMBERS) \
            if resp.prompt_feedback is not None else None
        if block:
            # a blocked prompt is an unclean end of every candidate, whether it comes alone, beside candidates or
            # after them (the worst end wins: nothing of the turn runs); a candidate that appears later gets it too
            # (``_candidate``)
            if self._blocked is None:
                self._blocked = block
            for index in (tuple(self._cands) or (0,)):
                asm.end_choice(index, FinishReason.CONTENT_FILTER, block, "the prompt's block reason")
        return True

    def _candidate(self, cand: _Candidate, pos: int, data: bytes, ri: int) -> None:
        index = cand.index if cand.index is not None else pos
        st = self._cands.get(index)
        asm = self.asm
        content = cand.content
        if content is not None:
            role = content.role
            if role and role != "model":  # (absent in many chunks)
                asm.protocol_error(f"candidate {index} has content with role {role!r}, not 'model'")
                return
        if st is None:
            if not asm.admit_choice(index):
                return  # over max_choices: the turn failed (the caller reads no more of the payload)
            st = self._cands[index] = _Cand(index)
            if self._blocked is not None:
                # a candidate after the prompt's block reason: the block is one of its ends too (the worst wins)
                asm.saw_end(index, FinishReason.CONTENT_FILTER, self._blocked)
        if content is not None and content.parts:
            for pi, part in enumerate(content.parts):
                if type(part) is not _Part:  # a Raw part (the payload did not decode in one pass)
                    raw = part
                    try:
                        part = _PART.decode(raw)
                    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                        asm.protocol_error(f"gemini part could not be decoded: {exc}", bytes(raw))
                        return
                    self._part(st, part, raw)
                else:
                    fc = part.function_call
                    if fc is None:
                        self._part(st, part, (data, ri, pos, pi))
                    elif st.open is not None and self.hot_paths and fc.name is None and fc.id is None \
                            and part.thought_signature is None and fc.partial_args and fc.will_continue:
                        # the hot path of a streamed call: a fragment of its arguments, more to follow
                        self._continue(st.open, fc.partial_args, (data, ri, pos, pi))
                    else:
                        self._function_call(st, part, fc, (data, ri, pos, pi))
                if asm.failed:
                    return
        finish = cand.finish_reason
        if finish is not None:
            if type(finish) is not str:
                finish = enum_name(finish, _FINISH_NUMBERS)
            if finish:
                self._finish(st, finish)

    def _continue(self, cur: _Streamed, partial_args: list[_PartialArg], ref: tuple) -> None:
        """A continuation part with ``partialArgs`` and more to follow, which says nothing else to the call (no
        name, id or signature): what ``_function_call`` does with it."""
        rec = cur.rec
        if rec.state is _ANN:
            rec.receive()
        try:
            cur.apply(partial_args)
        except JSONPathError as exc:
            self.asm.protocol_error(f"bad partialArgs for call {rec.call_id or rec.local_id}: {exc}",
                                    _part_bytes(ref))
            return
        cur.ended = False

    def _part(self, st: _Cand, part: _Part, ref: Any) -> None:
        """One decoded part; ``ref`` is where it is (``Raw``, or a tuple locating it in its payload), kept for
        replay."""
        asm = self.asm
        fc = part.function_call
        if fc is not None:
            self._function_call(st, part, fc, ref)
            return
        tc = part.tool_call
        if tc is not None:
            rec = asm.open_call(call_id=tc.id, name=tc.tool_type, choice=st.index, server=True,
                                server_type="toolCall", meta={"part_index": len(st.entries)})
            rec.initial, utf8 = _args_text(tc.args)
            st.entries.append(ref)
            asm.complete(rec, utf8=utf8)
            return
        text = part.text
        sig = part.thought_signature
        if text:
            if not part.thought:
                asm.add_text(text, st.index)
        elif sig is None and text == "" and _part_value(ref, {}).keys() <= {"text"}:
            return  # a bare {"text": ""} carries nothing (and an empty text part is refused on replay)
        if sig is not None and not text and not st.signed and st.first is not None:
            # the signature of the first of the candidate's calls, delivered on a later empty part
            st.signed = True
            st.first.meta["thought_signature"] = sig
            st.first.meta["thought_signature_part"] = len(st.entries)
        st.entries.append(ref)

    def _function_call(self, st: _Cand, part: _Part, fc: _FunctionCall, ref: Any) -> None:
        asm = self.asm
        cur = st.open
        name = fc.name or None
        if name is None and (fc.partial_args or fc.will_continue):
            # a continuation part of the streamed call (hot path)
            if cur is None:
                asm.protocol_error("functionCall partialArgs arrived with no streamed call open", _part_bytes(ref))
                return
            rec = cur.rec
            if fc.id and fc.id != rec.call_id:
                if rec.call_id is None:
                    rec.call_id = fc.id
                else:
                    asm.protocol_error(f"continuation part with id {fc.id!r} for call {rec.call_id!r}")
                    return
            if part.thought_signature is not None:
                self._streamed_signature(st, cur, part.thought_signature)
            if fc.partial_args:
                if rec.state is _ANN:
                    rec.receive()
                try:
                    cur.apply(fc.partial_args)
                except JSONPathError as exc:
                    asm.protocol_error(f"bad partialArgs for call {rec.call_id or rec.local_id}: {exc}",
                                       _part_bytes(ref))
                    return
                cur.ended = not fc.will_continue
            else:
                cur.ended = False
            return
        args_text, utf8 = _args_text(fc.args)
        if name is None and args_text is None and fc.id is None:
            # the empty functionCall that ends a streamed call
            if cur is not None:
                if part.thought_signature is not None:
                    self._streamed_signature(st, cur, part.thought_signature)
                self._end_streamed(st)
            elif part.thought_signature is not None:
                st.entries.append(ref)
            elif _log.enabled(_log.DEBUG):
                _log.emit(_log.DEBUG, "payload.skipped", provider=self.provider,
                          reason="end marker with no streamed call open", position=asm.position)
            return
        # a new call: the streamed one before it must have ended
        if cur is not None:
            if cur.ended:
                self._end_streamed(st)
            else:
                st.open = None
                asm.fail(cur.rec, ProblemCode.PROTOCOL_ERROR,
                         "a new functionCall began before this call's end marker")
        if st.finished:
            asm.protocol_error(f"functionCall after candidate {st.index}'s finishReason", _part_bytes(ref))
            return
        meta: dict[str, Any] = {"part_index": len(st.entries)}
        sig = part.thought_signature
        if sig is not None:
            meta["thought_signature"] = sig
            st.signed = True
        rec = asm.open_call(call_id=fc.id, name=name, choice=st.index, meta=meta)
        if st.first is None:
            st.first = rec
        if fc.will_continue:
            cur = st.open = _Streamed(rec, ref)
            st.entries.append(cur)
            if fc.partial_args:
                rec.receive()
                try:
                    cur.apply(fc.partial_args)
                except JSONPathError as exc:
                    asm.protocol_error(f"bad partialArgs for call {rec.call_id or rec.local_id}: {exc}",
                                       _part_bytes(ref))
            return
        st.entries.append(ref)
        if fc.partial_args:  # a whole call given as partialArgs in one part
            whole = _Streamed(rec, ref)
            try:
                whole.apply(fc.partial_args)
            except JSONPathError as exc:
                asm.protocol_error(f"bad partialArgs for call {rec.call_id or rec.local_id}: {exc}", _part_bytes(ref))
                return
            utf8 = _encode(whole.args)
            args_text = utf8.decode()
        rec.initial = args_text
        if name is None:
            asm.fail(rec, ProblemCode.MISSING_NAME, "the functionCall has no name")
        else:
            asm.complete(rec, utf8=utf8)

    def _streamed_signature(self, st: _Cand, cur: _Streamed, sig: str) -> None:
        meta = cur.rec.meta
        if "thought_signature" not in meta:
            meta["thought_signature"] = sig
            cur.signature = sig
            st.signed = True

    def _end_streamed(self, st: _Cand) -> None:
        cur = st.open
        st.open = None
        rec = cur.rec
        if rec.is_open:
            utf8 = None
            if cur.args:
                utf8 = _encode(cur.args)
                rec.initial = utf8.decode()
            self.asm.complete(rec, utf8=utf8)

    def _finish(self, st: _Cand, raw: str) -> None:
        reason = finish_reason_of(raw)
        if st.finished:
            # a later finishReason for the same candidate: recorded, and the worst of its ends is its finish
            # (``SAFETY`` after ``STOP`` makes it unclean)
            self.asm.end_choice(st.index, reason, raw, f"finishReason {raw} of candidate {st.index}")
            return
        if reason is FinishReason.STOP:
            cur = st.open
            if cur is not None and cur.ended:
                # no end marker came, but the call's last part said nothing would follow: the finish ends it
                self._end_streamed(st)
        st.open = None
        st.finished = True
        # a finish other than STOP truncates a call still open; after STOP, a streamed call whose last part
        # announced more is still open: the candidate contradicts itself
        self.asm.end_choice(st.index, reason, raw, f"finishReason {raw} of candidate {st.index}")

    def ended(self) -> bool:
        """Every candidate got its finishReason, or the prompt was blocked before any candidate."""
        if self._cands:
            for st in self._cands.values():
                if not st.finished:
                    return False
            return True
        return self._blocked is not None

    def assistant_message(self) -> Any:
        """``{"role": "model", "parts": [...]}`` for candidate 0: every part verbatim and in order, a streamed
        call as the one whole ``functionCall`` part it stands for."""
        st = self._cands.get(0)
        if st is None and self._cands:
            st = self._cands[min(self._cands)]
        return self._content(st)

    def choice_messages(self) -> dict[int, Any]:
        """The model content of every candidate, when there are several (or the one is not candidate 0); empty
        otherwise, as the turn then lists no choices (its ``assistant_message`` is that content)."""
        cands = self._cands
        if len(cands) == 1 and 0 in cands:
            return {}
        return {i: self._content(st) for i, st in sorted(cands.items())}

    @staticmethod
    def _content(st: _Cand | None) -> dict[str, Any]:
        parts = []
        if st is not None:
            docs: dict[int, Any] = {}
            append = parts.append
            for entry in st.entries:
                if type(entry) is tuple:
                    # ``_part_value(entry, docs)`` without its call (a part of a payload decoded in one pass)
                    data, ri, ci, pi = entry
                    doc = docs.get(id(data))
                    if doc is None:
                        doc = docs[id(data)] = _REPLAY.decode(data)
                    append((doc if ri < 0 else doc[ri]).candidates[ci].content.parts[pi])
                else:
                    append(entry.replay(docs) if type(entry) is _Streamed else _part_value(entry, docs))
        return {"role": "model", "parts": parts}


# ---- the dialect record ---------------------------------------------------------------------------------------------
CAPABILITIES = Capabilities(
    dialect="gemini", endpoint="POST models/{m}:generateContent / :streamGenerateContent",
    name_pattern=r"[A-Za-z_][A-Za-z0-9_.:-]{0,127}", name_max=128,
    name_source="google-genai types.py (FunctionDeclaration)",
    max_tools=Limit(512, "Gemini API: function_declarations (older Vertex: 64)"),
    schema_depth=Limit(None, "not documented", documented=False),
    max_request_bytes=Limit(None, "not documented", documented=False),
    param_name_pattern=r"[A-Za-z_][A-Za-z0-9_]{0,63}",
    param_name_source="google-genai types.py (FunctionDeclaration.parameters)",
    param_name_applies="openapi",
    tool_kinds_source="Gemini: functionDeclarations only",
    ids_echoed="functionResponse.id = functionCall.id when the call had one; name always",
    signatures="thoughtSignature on the exact part (only the first of parallel calls)",
    tool_turn_finish=("STOP",),
    transient_statuses=(408, 429, 500, 502, 503, 504),
    permanent_statuses=PERMANENT_STATUSES,
    transient_error_types=("RESOURCE_EXHAUSTED", "UNAVAILABLE", "INTERNAL", "DEADLINE_EXCEEDED"),
    delay_hints=("body: error.details[RetryInfo].retryDelay",),
)

DIALECT = Dialect(id="gemini", codec=GeminiCodec, declarations=_declarations.PART, results=_results.PART,
                  capabilities=CAPABILITIES, http=_http.PART, sim="toolwire.sim._gemini:Gemini", order=40)
