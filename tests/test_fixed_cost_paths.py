"""The shortcuts taken for the fixed cost of a turn and of a call give what the general paths give.

* A call transition's state change (``_CallTransition._change_state``, States resolved once) against
  ``transitions``' own ``Transition._change_state``, on every pair of the table and on random trigger sequences;
  state callbacks and ``on_final`` still run.
* ``StreamParser``'s one-test check of its limits against the check of each limit.
* ``feed`` of a chunk that is not exactly ``bytes`` against the same bytes.
* ``usage_from`` of a mapping that is not a dict against the same dict.
"""

from __future__ import annotations

import enum
import gc
import types
import weakref

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from transitions import Transition

import toolwire
from toolwire.codecs import codec_for
from toolwire.codecs.base import usage_from
from toolwire.errors import FramingError, InvalidTransition, UsageError
from toolwire.statemachine import table
from toolwire.statemachine.call import CallRecord
from toolwire.statemachine.table import MACHINE, Trigger
from toolwire.types import CallState, Problem, ProblemCode

from .dialects import REGISTERED, adapter

S = CallState


def _fire(rec: CallRecord, trigger: Trigger) -> str:
    """Fire ``trigger`` on ``rec``; the outcome as text (``ok`` or the invalid transition)."""
    method = getattr(rec, trigger.value)
    try:
        if trigger in (Trigger.TRUNCATE, Trigger.FAIL):
            method(ProblemCode.STREAM_CUT, "cut")
        else:
            method()
    except InvalidTransition as exc:
        return f"invalid {exc}"
    return "ok"


def _run(triggers: list[Trigger]) -> tuple:
    rec = CallRecord(provider="test", local_id="tw-0", call_id="c", name="f")
    try:
        outcomes = [_fire(rec, t) for t in triggers]
        return outcomes, rec.state, list(rec.history), rec.fragments is rec.frags
    finally:
        rec.release()


@pytest.fixture
def transitions_own_change_state(monkeypatch):
    """The call machine with ``transitions``' own ``Transition._change_state``."""
    monkeypatch.setattr(table._CallTransition, "_change_state", Transition._change_state)


def test_every_transition_is_resolved_to_the_machines_states():
    for event in MACHINE.events.values():
        for transitions in event.transitions.values():
            for tr in transitions:
                machine, src, dst, value = tr.resolved
                assert machine is MACHINE
                assert src is MACHINE.get_state(tr.source)
                assert dst is (MACHINE.get_state(tr.dest) if tr.dest else None)
                assert value == (dst.value if dst is not None else None)


SEQUENCES = [[t] for t in Trigger] + [[a, b] for a in Trigger for b in Trigger] + [
    [Trigger.RECEIVE, Trigger.RECEIVE, Trigger.FINISH, Trigger.DISPATCH, Trigger.ANSWER, Trigger.ANSWER],
    [Trigger.FINISH, Trigger.REJECT, Trigger.ANSWER, Trigger.RECEIVE],
]


def test_resolved_state_change_gives_what_transitions_own_gives(monkeypatch):
    fast = [_run(seq) for seq in SEQUENCES]
    monkeypatch.setattr(table._CallTransition, "_change_state", Transition._change_state)
    assert [_run(seq) for seq in SEQUENCES] == fast


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(list(Trigger)), max_size=8))
def test_random_trigger_sequences_agree_with_transitions_own_state_change(seq):
    fast = _run(seq)
    original = table._CallTransition._change_state
    table._CallTransition._change_state = Transition._change_state
    try:
        general = _run(seq)
    finally:
        table._CallTransition._change_state = original
    assert fast == general


def test_state_callbacks_and_on_final_still_run():
    seen = []
    announced, complete = MACHINE.get_state(S.ANNOUNCED), MACHINE.get_state(S.COMPLETE)
    saved = (announced.on_exit, complete.on_enter, complete.final, MACHINE.on_final)
    announced.on_exit = [lambda *a: seen.append(("exit", MACHINE.get_state(S.ANNOUNCED) is announced))]
    complete.on_enter = [lambda *a: seen.append(("enter", rec.state))]
    complete.final = True
    MACHINE.on_final = [lambda *a: seen.append(("final", rec.state))]
    rec = CallRecord(provider="test", local_id="tw-0", call_id="c", name="f")
    try:
        rec.finish()
    finally:
        announced.on_exit, complete.on_enter, complete.final, MACHINE.on_final = saved
        rec.release()
    assert seen == [("exit", True), ("enter", S.COMPLETE), ("final", S.COMPLETE)]


def _transitions_log_lines() -> list[str]:
    import logging

    logger = logging.getLogger("transitions.core")
    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())
    saved = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        _run([Trigger.RECEIVE, Trigger.FINISH, Trigger.DISPATCH])
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved)
    return lines


def test_transitions_info_lines_are_written_as_transitions_own_state_change_writes_them(monkeypatch):
    fast = _transitions_log_lines()
    assert "Finished processing state COMPLETE enter callbacks." in fast
    assert "Finished processing state ANNOUNCED exit callbacks." in fast
    monkeypatch.setattr(table._CallTransition, "_change_state", Transition._change_state)
    assert _transitions_log_lines() == fast


def test_add_model_sets_the_initial_state_or_the_one_given():
    class Model:
        state = None

    fresh, resumed = Model(), Model()
    MACHINE.add_model(fresh)
    MACHINE.add_model(resumed, initial=S.DISPATCHED)
    try:
        assert fresh.state is S.ANNOUNCED and resumed.state is S.DISPATCHED
        assert MACHINE.get_model_state(resumed) is MACHINE.get_state(S.DISPATCHED)
    finally:
        MACHINE.remove_model(fresh)
        MACHINE.remove_model(resumed)


# ---- the parser's limits ----------------------------------------------------------------------------------
LIMITS = ("max_message_bytes", "max_depth", "max_argument_chars", "max_calls")


class Size(enum.IntEnum):
    TEN = 10


@pytest.mark.parametrize("name", LIMITS)
@pytest.mark.parametrize("value", [0, -1, True, False, 1.5, "3", None, 10.0])
def test_a_limit_that_is_not_an_int_of_at_least_one_is_refused(name, value):
    with pytest.raises(UsageError, match=rf"^{name} must be an int >= 1, got {value!r}$"):
        toolwire.StreamParser("openai-chat", **{name: value})


def test_the_first_bad_limit_in_order_is_named():
    with pytest.raises(UsageError, match="^max_depth must"):
        toolwire.StreamParser("openai-chat", max_depth=0, max_calls=0)


@pytest.mark.parametrize("value", [1, Size.TEN, 2 ** 70])
def test_int_limits_including_int_subclasses_are_taken(value):
    parser = toolwire.StreamParser("openai-chat", max_message_bytes=value, max_depth=value,
                                   max_argument_chars=value, max_calls=value)
    asm = parser._codec.asm
    assert (parser._max, asm.max_depth, asm.max_argument_chars, asm.max_calls) == (value,) * 4


# ---- chunks and usage objects -----------------------------------------------------------------------------
CHAT = (b'data: {"id":"r","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1",'
        b'"type":"function","function":{"name":"f","arguments":"{\\"a\\": 1}"}}]}}]}\n\n'
        b'data: {"id":"r","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\n'
        b'data: [DONE]\n\n')


class Chunk(bytes):
    pass


def _events(convert) -> list:
    parser = toolwire.StreamParser("openai-chat")
    events = []
    for i in range(0, len(CHAT), 37):
        events += parser.feed(convert(CHAT[i:i + 37]))
    return events + parser.close()


@pytest.mark.parametrize("convert", [bytearray, memoryview, Chunk, lambda b: b.decode("utf-8")],
                         ids=["bytearray", "memoryview", "bytes-subclass", "str"])
def test_chunks_of_any_accepted_type_give_the_events_bytes_give(convert):
    expected = _events(bytes)
    assert expected[-1].turn.calls[0].args == {"a": 1}
    assert _events(convert) == expected


@pytest.mark.parametrize("provider, raw", [
    ("openai-chat", {"prompt_tokens": 5, "completion_tokens": 2}),
    ("gemini", {"promptTokenCount": 7, "candidatesTokenCount": 3}),
    ("anthropic", {"input_tokens": 20, "cache_read_input_tokens": 70, "output_tokens": 9}),
])
def test_a_mapping_that_is_not_a_dict_reads_as_the_dict(provider, raw):
    read = codec_for(provider).read_usage
    assert usage_from(types.MappingProxyType(raw), read) == usage_from(raw, read) is not None


# ---- no reference cycle left behind -----------------------------------------------------------------------
@pytest.mark.parametrize("keep_calls", [True, False])
@pytest.mark.parametrize("dialect", REGISTERED)
def test_a_closed_parser_is_freed_without_the_garbage_collector(dialect, keep_calls):
    """Closing releases the calls from their assembler (``Assembler.release``): once the caller drops the parser,
    reference counting frees the assembler and every call record, whole or cut (the cyclic collector used to be
    needed: each record referred back to its assembler, and the assembler to a closure over itself)."""
    a = adapter(dialect)
    data = a.small_case().data
    toolwire.parse(dialect, data, format=a.stream_format)  # (msgspec's first decode of a type makes cycles)
    gc.collect()
    gc.disable()
    try:
        for cut in (len(data), len(data) * 2 // 3):
            parser = toolwire.StreamParser(dialect, format=a.stream_format, keep_calls=keep_calls)
            parser.feed(data[:cut])
            try:
                parser.close()
            except FramingError:  # a binary framing cut inside a message: the traceback holds the parser's frames
                continue
            asm = weakref.ref(parser._codec.asm)
            records = [weakref.ref(r) for r in [*asm().records, *asm()._open.values()]]
            del parser
            assert asm() is None
            assert all(r() is None for r in records)
    finally:
        gc.enable()


def test_positions_are_the_owner_assemblers_and_a_released_record_keeps_its_history():
    parser = toolwire.StreamParser("openai-chat")
    parser.feed(CHAT)
    rec = parser._codec.asm.records[0]
    assert rec.owner is parser._codec.asm and rec.announced_at == 1
    parser.close()
    call = parser.turn.calls[0]
    assert [(t.trigger, t.position) for t in call.history] == [("receive", 1), ("finish", 2)]
    assert rec.owner is None
    assert [tuple(s) for s in rec.history] == [(t.trigger, t.src, t.dst, t.position) for t in call.history]


# ---- the argument limits at a call's terminator -----------------------------------------------------------
@settings(max_examples=300, deadline=None)
@given(raw=st.text(alphabet='[]{}"ab:,1 \\\\', min_size=1, max_size=40), custom=st.booleans(),
       max_depth=st.integers(1, 6), max_chars=st.integers(1, 45))
def test_the_limits_at_completion_are_those_of_over_limits(raw, custom, max_depth, max_chars):
    """``complete`` skips ``_over_limits`` for arguments no longer than allowed with no more opening brackets than
    levels (free text: any no longer than allowed); the call ends over a limit exactly when the general rule
    (``_over_limits`` for JSON arguments, the length alone for free text) says so, with its message."""
    from toolwire.statemachine.assembler import Assembler
    from toolwire.types import CallKind

    asm = Assembler("openai-responses")
    asm.max_depth, asm.max_argument_chars = max_depth, max_chars
    rec = asm.open_call(call_id="c", name="f", kind=CallKind.CUSTOM if custom else CallKind.FUNCTION)
    rec.initial = raw
    expected = asm._over_limits(rec, raw) if not custom or len(raw) > max_chars else None
    asm.complete(rec)
    if expected is None:
        assert rec.state is S.COMPLETE and (rec.problem is None or rec.problem.code is not ProblemCode.LIMIT_EXCEEDED)
        assert asm.error is None
    else:
        assert rec.state is S.TRUNCATED and rec.problem == Problem(ProblemCode.LIMIT_EXCEEDED, expected)
        assert asm.error.type == "limit_exceeded" and asm.error.message == expected
    asm.release()


# ---- close ------------------------------------------------------------------------------------------------
WHOLE = b'{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}'


@pytest.mark.parametrize("data", [WHOLE[:-3], b"[" + WHOLE + b", " + WHOLE[:20], WHOLE + b"\n" + WHOLE[:9]],
                         ids=["cut-value", "cut-array", "cut-second-value"])
def test_json_values_that_end_inside_a_value_are_a_protocol_error(data):
    """``close`` asks the JSON-values framer whether a value was still open (before closing it): the turn then
    records a protocol error, whatever came before."""
    turn = toolwire.parse("openai-chat", data)
    assert turn.error is not None and turn.error.type == "protocol_error"
    assert turn.error.message == "the input ended inside a JSON value"


@pytest.mark.parametrize("fmt", ["auto", "json", "jsonl", "sse"])
def test_whole_input_ends_with_no_protocol_error(fmt):
    data = WHOLE if fmt != "sse" else b"data: " + WHOLE + b"\n\n"
    parser = toolwire.StreamParser("openai-chat", format=fmt)
    events = parser.feed(data) + parser.close()
    assert isinstance(events[-1], toolwire.TurnFinished) and events[-1].turn is parser.turn
    assert parser.turn.error is None and parser.turn.finished_cleanly


def test_close_returns_the_events_of_input_auto_could_not_place_yet_then_the_end():
    """``auto`` with a dialect whose binary framing can tell itself from the first bytes: input too short to tell
    is parsed at close, and its events come before the turn's last ones."""
    parser = toolwire.StreamParser("bedrock-converse", format="auto")
    assert parser.feed(b'{"x":1}') == []  # too short to tell
    failed, finished = parser.close()
    assert isinstance(failed, toolwire.StreamFailed) and failed.error.raw == '{"x":1}'
    assert isinstance(finished, toolwire.TurnFinished) and finished.turn.error == failed.error
