"""What the generic test suites need to know about one dialect: the ``Adapter`` interface, and ``Case``, one generated
stream with the places of its terminators.

Each module of ``tests/dialects`` (its name is the dialect id with ``_`` for ``-``) defines ``ADAPTER``, an
``Adapter`` for one registered dialect. The suites that loop over the registry (split invariance and prefixes in
``test_stream_properties``, results in ``test_results_encoding``, history repair in ``test_history_repair``, the
``toolwire parse`` command in ``test_cli``, the fuzz corpus) ask the adapter of every registered dialect, so a new
dialect gets all of them from its adapter; ``test_dialect_adapters`` fails for a registered dialect without one.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import toolwire
from toolwire import ResultKind, ToolResult

from ..streamgen import Encoded

__all__ = ["Adapter", "Case", "Call", "results_for", "CONTENT", "SIG"]

#: a call as the generators take it: (call id or None, name, arguments object)
Call = tuple[Any, str, Any]

SIG = "c2lnbmF0dXJlLWZvci1nZXRfd2VhdGhlcg=="  # base64, as Gemini signatures are

K = ResultKind
#: a result's content for each kind (the words the dispatcher uses)
CONTENT = {
    K.OK: {"temp_c": 21, "sky": "clear"},
    K.INVALID_ARGUMENTS: "Invalid arguments for lookup: the arguments are not a JSON object - at `$`.",
    K.UNKNOWN_TOOL: "Unknown tool 'get_wether': no tool of that exact name exists, nothing was run.",
    K.DENIED: "Denied: get_time may not run here. Nothing was run.",
    K.APPROVAL_REQUIRED: "Approval required: get_weather waits for a person's approval; it has not run.",
    K.HANDLER_FAILED: "Error: get_weather could not look (StoreUnavailable).",
    K.HANDLER_TIMEOUT: "Error: get_weather did not return within 1.0 s.",
    K.OUTCOME_UNKNOWN: "Outcome unknown: this write started earlier and never confirmed; it was not run again.",
    K.RESULT_UNUSABLE: "get_weather returned a value that cannot be sent back as JSON or text.",
    K.TOOL_ERROR: "No such city: the weather service does not know Pariss.",
    K.NOT_RUN: "Not run: the response did not finish cleanly (length). No tool was run for this response.",
}


def results_for(turn: toolwire.Turn, kind: ResultKind, content: Any = ...) -> list[ToolResult]:
    """One result of ``kind`` per call, given in REVERSE call order (as if they completed that way)."""
    out = [ToolResult(call_id=c.call_id, local_id=c.local_id, name=c.name,
                      content=CONTENT[kind] if content is ... else content, is_error=kind is not K.OK, kind=kind)
           for c in turn.calls]
    return out[::-1]


@dataclass
class Case:
    """One generated stream and where, in its bytes, each terminator ends."""

    provider: str
    enc: Encoded
    calls: list  # (call_id, name, args) of each client call, in order
    call_ends: list[int]  # per call: the offset after its terminator's data
    turn_end: int | None  # the offset after the turn's end event's data (None: it has none)
    clean: bool  # the stream's finish reason is a clean one

    @property
    def data(self) -> bytes:
        return self.enc.data


class Adapter:
    """One dialect, as the generic suites see it. Every method has to be given (the suites call them all); the
    class attributes have defaults.

    Streams (split invariance, prefixes, events, ``toolwire parse``, fuzz seeds):

    * ``cases(draw, max_calls, max_text, clean)``: a hypothesis draw of one well-formed stream of up to
      ``max_calls`` client calls (ids, names and arguments chosen by hypothesis; no server-side calls), with its
      terminators' offsets; ``clean``: True for a clean finish, False for an unclean one, None for either;
    * ``small_case()``: a small fixed stream of two calls, for the every-byte-prefix test;
    * ``stream_format``: the parser format the streams are written in (default: the dialect codec's framing,
      ``"sse"`` or a binary framing's name); a stream of a binary framing cut inside a message ends in a
      ``FramingError`` (``binary_framing``), which carries the parse's last events;
    * ``arguments_stream``: the dialect streams arguments in fragments (``ArgumentsReceived`` then concatenate to
      ``raw_arguments``); False when they arrive whole;
    * ``body(calls, response_id=, text=, custom=)``: a whole non-streaming response body; ``choices_body`` one with
      a choice per list of calls, for dialects with several choices (``multi_choice``); ``response_ids``: the
      body carries ``response_id`` (False: the dialect's bodies have no response id, so a test that identifies
      a response by it passes it as the dispatcher's ``turn_id``, as a user of such a dialect does);
      ``with_usage(data, tokens)``: a whole body with its usage object saying ``tokens`` input and output tokens;
    * ``fuzz_seeds(rng, k)``: ``(name, format, bytes)`` of ``k`` generated responses for the fuzzer; for its
      property that nothing after a stream's terminator is read, ``fuzz_event_type(payload)`` names a payload's
      event (default its ``type``), ``stream_terminators`` the events that end a stream and ``terminator_needles``
      bytes one of them always holds;
    * the official SDK's response models (``test_sim_sdk_models`` checks the simulator's responses with them):
      ``response_models()`` gives the validators of a whole body, of a streamed payload and of an error payload
      (None: the dialect has no separate one); ``is_error_payload(name, kind, doc)`` tells an error payload,
      ``ignorable_payload(name, doc)`` one the SDK skips (a keep-alive); ``undeclared`` lists the ``(event type
      or "whole", "*", "*.delta"; JSON path)`` of fields the real API sends that the SDK's models do not
      declare; ``sim_modes``: response forms the simulator has beyond a stream and a whole body.

    Declarations: ``check_declaration(fragment)``: a ``declare`` fragment fits the official SDK's request types (no
    field they do not declare).

    Results (``encode_results``, ``history_messages``):

    * ``turn()``: a parsed turn of three calls: ``get_weather`` (valid arguments), ``lookup`` (arguments that do not
      parse) and ``get_time`` (``{}``); ``cut_turn()``: the same cut by the dialect's token limit;
    * ``answered(encoded)``: ``(id, content, is_error or None)`` of each result of an encoded answer;
      ``results_in(body)``: the tool results a request body (as the simulator records it) carries, in the shape
      ``encode_results`` gives them (the messages, items or steps that hold them);
    * ``check_answer(turn, encoded, results)``: the dialect's own rules for an answer (the generic ones are checked
      by the suite); ``content_of(result)``: the content the answer carries for a result;
    * ``history_shape(turn, msgs)``: the replay first, the answers right after it, every call answered once;
      ``replayed_and_answered(msgs)``: the (id, name) of each call the history replays and of each answer it gives;
    * ``check_sdk(message)``: one message, item or step fits the official SDK's request types;
    * rich results (``tests/rich.py``, for a dialect its tables do not write out): ``native_types``, the MIME types
      a result carries natively; ``media_of(message)``, the (MIME type, base64) pairs one answer message carries
      natively, in order; ``structured_text(encoded)``, the text a result's structured JSON is sent as;
      ``first_text(encoded)``, the first text piece of the first result; ``error_flagged(encoded)``, the first
      result is marked as an error;
    * ``misspellings()``: one wrong field name or shape per case, which ``check_sdk`` must catch;
    * ``two_choices()``, ``choice_ids``, ``replayed_ids(message)``, ``check_choices(turn)``: a turn of two choices,
      for dialects with several (``multi_choice``).

    History repair (``repair_history``):

    * ``user(text)``: a user entry in the history's own form; ``well_formed(msgs, echo_ids)``: what is wrong with a
      history (empty: every call has exactly one result in the provider's place); ``call_ids(msgs)``;
      ``strip_results(msgs)``; ``same_id_twice(results)``: a turn of two calls sharing one id and ``results``
      results with it; ``result_units(msgs)``, ``wrap_result(unit)``, ``orphan()`` and ``clean_damaged(entry)``: how
      the damage generator finds, moves and drops results; ``render_model``, ``render_calls``, ``render_results``:
      the abstract histories of the generator in the dialect's form; ``check_history_entry(entry)``: the SDK check
      of an entry of a repaired history;
    * ``echo_ids_matter``: ``echo_ids=False`` changes the dialect's results; ``renamed_result_fixes``: the actions
      a result following a renamed call adds; ``surrogate_prefix``: how many entries of the two-round
      conversation the surrogate test keeps.
    """

    dialect: str = ""
    arguments_stream = True
    response_ids = True
    multi_choice = False
    echo_ids_matter = False
    renamed_result_fixes: tuple[str, ...] = ()
    surrogate_prefix: int | None = None
    choice_ids: tuple[list[str], list[str]] = ([], [])
    undeclared: frozenset[tuple[str, str]] = frozenset()
    sim_modes: tuple[str, ...] = ()
    stream_terminators: frozenset[str] = frozenset()
    terminator_needles: tuple[bytes, ...] = ()

    # ---- streams -----------------------------------------------------------------------------------------------
    @property
    def stream_format(self) -> str:
        """The parser format of the dialect's streams: its codec's framing."""
        from toolwire.codecs import dialect_for

        return dialect_for(self.dialect).codec.framing.name

    @property
    def binary_framing(self) -> bool:
        """The streams are framed in binary messages (not SSE lines)."""
        return self.stream_format != "sse"

    def cases(self, draw: Any, *, max_calls: int = 4, max_text: int = 20, clean: bool | None = True) -> Case:
        raise NotImplementedError

    def small_case(self) -> Case:
        raise NotImplementedError

    def body(self, calls: Sequence[Call], *, response_id: str | None = "resp_1", text: str | None = None,
             custom: bool = False) -> bytes:
        raise NotImplementedError

    def choices_body(self, choices: Sequence[Sequence[Call]], *, response_id: str | None = "resp_1") -> bytes:
        raise ValueError(f"{self.dialect} responses have one choice")

    def fuzz_seeds(self, rng: random.Random, k: int) -> list[tuple[str, str, bytes]]:
        raise NotImplementedError

    def fuzz_event_type(self, payload: dict[str, Any]) -> str | None:
        """The event a decoded payload is, as the dialect names it (default: its ``type``)."""
        t = payload.get("type")
        return t if isinstance(t, str) else None

    def response_models(self) -> tuple[Callable[[Any], Any], Callable[[Any], Any], Callable[[Any], Any] | None]:
        raise NotImplementedError

    def is_error_payload(self, name: str | None, kind: str, doc: Any) -> bool:
        """An error the provider sends as a streamed payload (default: one with an ``error`` member)."""
        return kind == "event" and isinstance(doc, dict) and "error" in doc

    def ignorable_payload(self, name: str | None, doc: Any) -> bool:
        """A payload the SDK skips (default: none)."""
        return False

    # ---- declarations ------------------------------------------------------------------------------------------
    def check_declaration(self, fragment: dict) -> None:
        raise NotImplementedError

    # ---- results -----------------------------------------------------------------------------------------------
    def turn(self) -> toolwire.Turn:
        raise NotImplementedError

    def cut_turn(self) -> toolwire.Turn:
        raise NotImplementedError

    def answered(self, encoded: Any) -> list[tuple[Any, Any, bool | None]]:
        raise NotImplementedError

    def results_in(self, body: dict[str, Any]) -> list[Any]:
        raise NotImplementedError

    def with_usage(self, data: bytes, tokens: int) -> bytes:
        raise NotImplementedError

    def content_of(self, result: ToolResult, expected_text: Callable[[ToolResult], str]) -> Any:
        """The content an answer carries for ``result`` (default: its text)."""
        return expected_text(result)

    def check_answer(self, turn: toolwire.Turn, encoded: Any, results: list[ToolResult]) -> None:
        """The dialect's own rules for an answer (none by default)."""

    def check_json_content(self, encoded: Any, content: Any) -> None:
        """How any JSON content appears in an answer, where the dialect says more than ``content_of``."""

    def history_shape(self, turn: toolwire.Turn, msgs: list[Any]) -> None:
        raise NotImplementedError

    native_types: frozenset[str] = frozenset()

    def media_of(self, message: Any) -> list[tuple[str, str]]:
        raise NotImplementedError

    def structured_text(self, encoded: Any) -> str:
        raise NotImplementedError

    def first_text(self, encoded: Any) -> str:
        raise NotImplementedError

    def error_flagged(self, encoded: Any) -> bool:
        raise NotImplementedError

    def replayed_arguments(self, msgs: list[Any]) -> list[Any]:
        """The arguments of each call the replayed assistant message(s) carry, as the wire carries them (for a
        dialect the malformed-arguments regressions do not write out)."""
        raise NotImplementedError

    def poison_arguments(self, msgs: list[Any], raw: str) -> None:
        """Put ``raw`` (text that does not parse) in place of the second call's arguments, in place."""
        raise NotImplementedError

    def replayed_and_answered(self, msgs: list[Any]) -> tuple[list[tuple[Any, Any]], list[tuple[Any, Any]]]:
        """The calls the history messages of one turn (``history_messages``) replay and the answers they give, as
        ``(wire id or None, tool name or None)`` in order (a name where the answer carries one)."""
        raise NotImplementedError

    def check_sdk(self, message: Any) -> None:
        raise NotImplementedError

    def misspellings(self) -> dict[str, Callable[[list[Any]], list[Any]]]:
        raise NotImplementedError

    def two_choices(self) -> toolwire.Turn:
        raise NotImplementedError

    def replayed_ids(self, message: Any) -> list[str]:
        raise NotImplementedError

    def check_choices(self, turn: toolwire.Turn) -> None:
        """The dialect's own facts about the two choices' assistant messages."""

    # ---- history repair ----------------------------------------------------------------------------------------
    def user(self, text: str) -> Any:
        raise NotImplementedError

    def well_formed(self, msgs: list[Any], echo_ids: bool = True) -> list[str]:
        raise NotImplementedError

    def call_ids(self, msgs: list[Any]) -> list[Any]:
        raise NotImplementedError

    def strip_results(self, msgs: list[Any]) -> list[Any]:
        raise NotImplementedError

    def same_id_twice(self, results: int) -> list[Any]:
        raise NotImplementedError

    def result_units(self, msgs: list[Any]) -> list[tuple[int, int | None]]:
        raise NotImplementedError

    def wrap_result(self, unit: Any) -> Any:
        """A result moved on its own becomes this entry (default: the result itself)."""
        return unit

    def orphan(self) -> Any:
        raise NotImplementedError

    def clean_damaged(self, entry: Any) -> Any:
        """An entry of a damaged history with its removed results (None) left out; None to drop it."""
        return entry

    def render_model(self, at: int) -> Any:
        raise NotImplementedError

    def render_calls(self, calls: list[Any], extra: bool, at: int, arguments: Callable[[str, bool], Any]
                     ) -> list[Any]:
        raise NotImplementedError

    def render_results(self, results: list[Any], odd: bool) -> list[Any]:
        raise NotImplementedError

    def check_history_entry(self, entry: Any) -> None:
        """The SDK check of one entry of a repaired history (default ``check_sdk``)."""
        self.check_sdk(entry)
