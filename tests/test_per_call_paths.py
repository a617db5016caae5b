"""The shortcuts taken for the cost of each whole call give what the general paths give.

* ``Assembler.complete(rec, utf8=)``: the depth test and the JSON decoding read the bytes the arguments text was
  decoded from, with the same outcome (state, args, raw text, problem, limit error, events) as reading the text.
* ``CallRecord.to_call`` gives the ``ToolCall`` it made when the call ended again while it still says what the
  record says, and a new one as soon as anything differs (a codec that sets the id, the name or metadata after
  the end, a transition after it, a ``provider_meta`` edited by the application).
* Gemini whole calls (which pass ``utf8``) give the turn the general path gives.
"""

from __future__ import annotations

import json

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

import toolwire
from toolwire.codecs import gemini as gemini_codec
from toolwire.statemachine.assembler import Assembler
from toolwire.types import CallCompleted, CallKind, CallState, ProblemCode

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=12,
)
_texts = st.one_of(
    _json_values.map(lambda v: json.dumps(v, ensure_ascii=False)),
    st.text(alphabet='[]{}"ab:,1 \\\\é東🙂\u2028', max_size=30),
)


def _complete(raw: str, utf8: bool, kind: CallKind, max_depth: int, max_chars: int):
    asm = Assembler("gemini")
    asm.max_depth, asm.max_argument_chars = max_depth, max_chars
    rec = asm.open_call(call_id="c", name="f", kind=kind)
    rec.initial = raw
    asm.complete(rec, utf8=raw.encode() if utf8 else None)
    outcome = (rec.state, rec.args, rec.raw, rec.problem, asm.error, asm.take_events())
    asm.release()
    return outcome


@settings(max_examples=400, deadline=None)
@given(raw=_texts, custom=st.booleans(), max_depth=st.integers(1, 6), max_chars=st.integers(1, 60))
def test_completion_from_the_utf8_bytes_is_completion_from_the_text(raw, custom, max_depth, max_chars):
    kind = CallKind.CUSTOM if custom else CallKind.FUNCTION
    assert _complete(raw, True, kind, max_depth, max_chars) == _complete(raw, False, kind, max_depth, max_chars)


@settings(max_examples=100, deadline=None)
@given(frags=st.lists(_texts, min_size=1, max_size=3), final=st.none() | _texts)
def test_utf8_is_ignored_when_it_is_not_the_whole_arguments(frags, final):
    """With fragments or a provider's final value, the bytes given describe ``initial`` only: not read."""
    outcomes = []
    for utf8 in (b"[[[[[[[[not json", None):
        asm = Assembler("gemini")
        asm.max_depth = 3
        rec = asm.open_call(call_id="c", name="f", initial="{}")
        for f in frags:
            rec.append(f)
        asm.complete(rec, final, utf8=utf8)
        outcomes.append((rec.state, rec.args, rec.raw, rec.problem, asm.error, asm.take_events()))
        asm.release()
    assert outcomes[0] == outcomes[1]


# ---- to_call --------------------------------------------------------------------------------------------------
def _ended_call(asm: Assembler, **kw):
    rec = asm.open_call(call_id="c1", name="f", meta={"part_index": 0}, **kw)
    rec.initial = '{"a": [1, {"b": "é"}]}'
    asm.complete(rec)
    event = asm.take_events()[-1]
    assert isinstance(event, CallCompleted)
    return rec, event.call


def test_the_event_call_and_the_turn_call_are_separate_objects_that_agree():
    """An ended call's event and the turn give equal ToolCalls that are not the same object."""
    asm = Assembler("gemini")
    rec, call = _ended_call(asm)
    turn = asm.build_turn()
    assert turn.calls[0] is not call and turn.calls[0] == call and rec.to_call() == call
    assert call.args == {"a": [1, {"b": "é"}]} and call.provider_meta == {"part_index": 0}


def test_a_change_after_the_end_reaches_the_turn():
    """What a codec changes on a record after its call ended (id, name, metadata, a later cut) is in the turn."""
    changes = [
        lambda rec: setattr(rec, "call_id", "c2"),
        lambda rec: setattr(rec, "name", "g"),
        lambda rec: rec.meta.__setitem__("thought_signature", "sig"),
        lambda rec: rec.meta.__setitem__("part_index", 1),
        lambda rec: rec.owner.truncate(rec, ProblemCode.CUT_BY_LENGTH, "cut"),
        lambda rec: setattr(rec, "args", None),
        lambda rec: setattr(rec, "raw", rec.raw + " "),
    ]
    for change in changes:
        asm = Assembler("gemini")
        rec, call = _ended_call(asm)
        change(rec)
        got = asm.build_turn().calls[0]
        assert got == rec.to_call() and got != call
    asm = Assembler("gemini")
    rec, call = _ended_call(asm)
    rec.owner.truncate(rec, ProblemCode.CUT_BY_LENGTH, "cut")  # (a truncation after the end)
    got = asm.build_turn().calls[0]
    assert got.state is CallState.TRUNCATED and got.args is None and len(got.history) == 2
    assert call.state is CallState.COMPLETE and len(call.history) == 1


def test_an_edited_provider_meta_or_history_of_the_event_does_not_reach_the_turn():
    """Editing the event's call (its metadata, appending to or replacing an entry of its history) leaves the
    turn's call as the record says."""
    asm = Assembler("gemini")
    rec, call = _ended_call(asm)
    call.provider_meta["mine"] = 1
    first = call.history[0]
    call.history.append(first)
    turn = asm.build_turn()
    assert turn.calls[0] is not call
    assert turn.calls[0].provider_meta == {"part_index": 0} and len(turn.calls[0].history) == 1
    assert turn.calls[0].history[0] == first


def test_a_history_entry_replaced_in_place_does_not_reach_the_turn():
    """Replacing an entry of the event's call history (same length) is not seen in the turn's call."""
    asm = Assembler("anthropic")
    rec = asm.open_call(call_id="c1", name="f")
    rec.append('{"a": 1}')
    asm.complete(rec)
    call = next(e.call for e in asm.take_events() if isinstance(e, CallCompleted))
    before = list(call.history)
    call.history[0] = call.history[-1]
    turn = asm.build_turn()
    assert turn.calls[0].history == before


def test_an_open_call_is_made_anew_each_time():
    asm = Assembler("gemini")
    rec = asm.open_call(call_id="c", name="f")
    rec.append('{"a"')
    first = rec.to_call()
    rec.append(": 1}")
    second = rec.to_call()
    assert first.raw_arguments == '{"a"' and second.raw_arguments == '{"a": 1}'
    asm.complete(rec)
    assert rec.to_call().args == {"a": 1}


# ---- Gemini whole calls ---------------------------------------------------------------------------------------
def _turn(body: bytes, monkeypatch=None, bytes_path=True):
    if not bytes_path:
        orig = Assembler.complete

        def text_only(self, rec, final=None, *, utf8=None):
            orig(self, rec, final)

        monkeypatch.setattr(Assembler, "complete", text_only)
    turn = toolwire.parse("gemini", body, format="json")
    if not bytes_path:
        monkeypatch.undo()
    return turn


_part_args = st.one_of(_json_values, st.dictionaries(st.text(max_size=4), _json_values, max_size=3))


@settings(max_examples=150, deadline=None)
@given(parts=st.lists(st.tuples(_part_args, st.booleans()), min_size=1, max_size=3))
def test_gemini_whole_calls_from_bytes_give_the_general_paths_turn(parts):
    from _pytest.monkeypatch import MonkeyPatch

    body = msgspec.json.encode({"candidates": [{"content": {"role": "model", "parts": [
        {"functionCall": {"name": "f", "args": json.dumps(a, ensure_ascii=False) if as_string else a}}
        for a, as_string in parts]}, "finishReason": "STOP", "index": 0}]})
    mp = MonkeyPatch()
    try:
        assert _turn(body) == _turn(body, mp, bytes_path=False)
    finally:
        mp.undo()


def test_gemini_args_text_gives_the_bytes_only_for_json_as_it_arrived():
    raw = msgspec.Raw
    assert gemini_codec._args_text(raw(b'{"a":"\xc3\xa9"}')) == ('{"a":"é"}', b'{"a":"\xc3\xa9"}')
    assert gemini_codec._args_text(raw(b'"{\\"a\\":1}"')) == ('{"a":1}', None)
    assert gemini_codec._args_text(raw(b"null")) == (None, None)
    assert gemini_codec._args_text(raw()) == (None, None)


# ---- CallRecord.new -------------------------------------------------------------------------------------------
def test_a_record_made_by_new_is_the_record_init_makes():
    from toolwire.statemachine.call import CallRecord
    from toolwire.statemachine.table import MACHINE

    asm = Assembler("gemini")
    args = dict(provider="gemini", local_id="tw-3", call_id="c", name="f", kind=CallKind.CUSTOM, index=2, choice=1,
                server=True, server_type="toolCall", meta={"k": 1}, position_of=None, owner=asm)
    made, init = CallRecord.new(*args.values()), CallRecord(**args)
    skip = {"_guard", "fragments", "__weakref__"}
    for slot in CallRecord.__slots__:
        if slot not in skip:
            assert getattr(made, slot) == getattr(init, slot), slot
    assert made.fragments is made._guard and made._guard() is made and made in MACHINE.models
    made.fragments.append('{"a"')  # the guard's checked path: the call starts accumulating
    assert made.state is CallState.ACCUMULATING and made.fragments is made.frags == ['{"a"']
    made.release()
    init.release()
