"""The call state machine checked against an independent, hand-written reference table.

The reference below is written out from the design, not derived from ``toolwire.statemachine.table``, so a
change to the table that is not also a change to the design fails here.
"""

from __future__ import annotations

import gc
import itertools
import weakref

import pytest
import transitions
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

import toolwire
from toolwire.statemachine.call import CallRecord, Step
from toolwire.statemachine.table import MACHINE, TRANSITIONS, Trigger, next_state
from toolwire.types import CallState, ProblemCode

S = CallState
T = Trigger

# ---- the reference, from the design --------------------------------------------------------------------
#: (state, trigger) -> destination; every pair not listed is invalid. "Stays" is written as the same state.
REFERENCE: dict[tuple[CallState, Trigger], CallState] = {
    (S.ANNOUNCED, T.RECEIVE): S.ACCUMULATING,
    (S.ACCUMULATING, T.RECEIVE): S.ACCUMULATING,
    (S.ANNOUNCED, T.FINISH): S.COMPLETE,
    (S.ACCUMULATING, T.FINISH): S.COMPLETE,
    (S.ANNOUNCED, T.TRUNCATE): S.TRUNCATED,
    (S.ACCUMULATING, T.TRUNCATE): S.TRUNCATED,
    (S.COMPLETE, T.TRUNCATE): S.TRUNCATED,
    (S.ANNOUNCED, T.FAIL): S.ERRORED,
    (S.ACCUMULATING, T.FAIL): S.ERRORED,
    (S.COMPLETE, T.FAIL): S.ERRORED,
    (S.COMPLETE, T.REJECT): S.REJECTED,
    (S.COMPLETE, T.DISPATCH): S.DISPATCHED,
    (S.DISPATCHED, T.ANSWER): S.ANSWERED,
    (S.REJECTED, T.ANSWER): S.ANSWERED,
}

#: A valid way to bring a fresh call (announced) to each state.
PATH: dict[CallState, tuple[Trigger, ...]] = {
    S.ANNOUNCED: (),
    S.ACCUMULATING: (T.RECEIVE,),
    S.COMPLETE: (T.FINISH,),
    S.TRUNCATED: (T.TRUNCATE,),
    S.ERRORED: (T.FAIL,),
    S.REJECTED: (T.FINISH, T.REJECT),
    S.DISPATCHED: (T.FINISH, T.DISPATCH),
    S.ANSWERED: (T.FINISH, T.DISPATCH, T.ANSWER),
}

ALL_PAIRS = list(itertools.product(list(CallState), list(Trigger)))


def new_record(**kw) -> CallRecord:
    args = dict(provider="test", local_id="x", call_id="c1", name="t")
    args.update(kw)
    return CallRecord(**args)


def fire(rec: CallRecord, trigger: Trigger) -> None:
    """Call the trigger method named ``trigger`` on ``rec`` (truncate/fail need a problem)."""
    method = getattr(rec, trigger.value)
    if trigger is T.TRUNCATE:
        method(ProblemCode.STREAM_CUT, "cut")
    elif trigger is T.FAIL:
        method(ProblemCode.PROTOCOL_ERROR, "bad")
    else:
        method()


def record_in(state: CallState, **kw) -> CallRecord:
    rec = new_record(**kw)
    for trig in PATH[state]:
        fire(rec, trig)
    assert rec.state is state
    return rec


def _pair_id(pair) -> str:
    return f"{pair[0].value}-{pair[1].value}"


# ---- the reference itself --------------------------------------------------------------------------------
def test_reference_paths_are_valid_under_reference():
    """Every setup path used below is valid according to the hand-written reference."""
    for target, path in PATH.items():
        state = S.ANNOUNCED
        for trig in path:
            state = REFERENCE[(state, trig)]
        assert state is target


# ---- every (state, trigger) pair ---------------------------------------------------------------------------
@pytest.mark.parametrize("pair", ALL_PAIRS, ids=_pair_id)
def test_next_state_agrees_with_reference(pair):
    """next_state() gives the reference destination for allowed pairs and False for every other pair."""
    state, trigger = pair
    got = next_state(state, trigger)
    if (state, trigger) in REFERENCE:
        assert got is not False
        # None is the table's spelling of an internal transition: the call stays where it is
        assert (state if got is None else got) is REFERENCE[(state, trigger)]
    else:
        assert got is False


@pytest.mark.parametrize("pair", ALL_PAIRS, ids=_pair_id)
def test_call_record_trigger_agrees_with_reference(pair):
    """Firing each trigger on a real CallRecord lands in the reference state or raises InvalidTransition."""
    state, trigger = pair
    rec = record_in(state)
    history = list(rec.history)
    if (state, trigger) in REFERENCE:
        fire(rec, trigger)
        assert rec.state is REFERENCE[(state, trigger)]
        assert rec.history[-1] == Step(trigger.value, state, REFERENCE[(state, trigger)], None)
    else:
        with pytest.raises(toolwire.InvalidTransition) as info:
            fire(rec, trigger)
        err = info.value
        assert err.call_id == "c1"
        assert err.local_id == "x"
        assert err.state == state.value
        assert err.trigger == trigger.value
        assert rec.state is state
        assert rec.history == history


def test_table_has_no_transition_outside_reference():
    """TRANSITIONS lists exactly the reference pairs, no more and no fewer."""
    pairs = {}
    for trig, sources, dst in TRANSITIONS:
        for src in sources:
            assert (src, trig) not in pairs, f"duplicate row for {(src, trig)}"
            pairs[(src, trig)] = src if dst is None else dst
    assert pairs == REFERENCE


# ---- named guarantees ------------------------------------------------------------------------------------
@pytest.mark.parametrize("state", [S.TRUNCATED, S.ERRORED], ids=lambda s: s.value)
def test_truncated_and_errored_are_terminal(state):
    """No trigger (and no fragment) leaves truncated or errored."""
    for trigger in Trigger:
        rec = record_in(state)
        with pytest.raises(toolwire.InvalidTransition):
            fire(rec, trigger)
        assert rec.state is state
    rec = record_in(state)
    with pytest.raises(toolwire.InvalidTransition):
        rec.append("{}")
    assert rec.state is state


def test_dispatched_only_reachable_from_complete():
    """dispatch succeeds from complete only; from every other state it raises and the state is kept."""
    for state in CallState:
        rec = record_in(state)
        if state is S.COMPLETE:
            rec.dispatch()
            assert rec.state is S.DISPATCHED
        else:
            with pytest.raises(toolwire.InvalidTransition):
                rec.dispatch()
            assert rec.state is state
    # and no other trigger leads into dispatched
    assert {src for (src, _t), dst in REFERENCE.items() if dst is S.DISPATCHED} == {S.COMPLETE}
    assert all(dst is not S.DISPATCHED or trig is T.DISPATCH for trig, _s, dst in TRANSITIONS)


@pytest.mark.parametrize("via", [S.DISPATCHED, S.REJECTED], ids=lambda s: s.value)
def test_answer_twice_raises(via):
    """A second answer is an invalid transition and leaves the call answered."""
    rec = record_in(via)
    rec.answer()
    assert rec.state is S.ANSWERED
    with pytest.raises(toolwire.InvalidTransition) as info:
        rec.answer()
    assert info.value.state == "answered"
    assert info.value.trigger == "answer"
    assert rec.state is S.ANSWERED
    assert [step.trigger for step in rec.history].count("answer") == 1


@pytest.mark.parametrize(
    "state",
    [S.COMPLETE, S.TRUNCATED, S.ERRORED, S.DISPATCHED, S.REJECTED, S.ANSWERED],
    ids=lambda s: s.value,
)
def test_append_outside_open_states_raises_and_drops_fragment(state):
    """append() on a call that is not announced/accumulating raises InvalidTransition and keeps frags as is."""
    rec = record_in(state)
    frags = list(rec.frags)
    history = list(rec.history)
    with pytest.raises(toolwire.InvalidTransition) as info:
        rec.append('{"late": 1}')
    assert info.value.state == state.value
    assert info.value.trigger == "receive"
    assert info.value.call_id == "c1"
    assert rec.frags == frags
    assert rec.state is state
    assert rec.history == history


def test_append_on_announced_moves_to_accumulating():
    """The first fragment moves an announced call to accumulating; later ones keep it there."""
    rec = new_record()
    rec.append('{"a"')
    assert rec.state is S.ACCUMULATING
    assert rec.history == [Step("receive", S.ANNOUNCED, S.ACCUMULATING, None)]
    rec.append(": 1}")
    assert rec.state is S.ACCUMULATING
    assert rec.frags == ['{"a"', ": 1}"]
    assert rec.text() == '{"a": 1}'


def test_history_records_trigger_src_dst_position():
    """Each transition appends a Step (trigger, src, dst, position) with the payload number at that moment."""
    counter = {"n": 0}
    rec = new_record(position_of=lambda: counter["n"])
    expected = []
    for trig, src, dst in [
        (T.RECEIVE, S.ANNOUNCED, S.ACCUMULATING),
        (T.RECEIVE, S.ACCUMULATING, S.ACCUMULATING),
        (T.FINISH, S.ACCUMULATING, S.COMPLETE),
        (T.DISPATCH, S.COMPLETE, S.DISPATCHED),
        (T.ANSWER, S.DISPATCHED, S.ANSWERED),
    ]:
        counter["n"] += 1
        fire(rec, trig)
        expected.append((trig.value, src, dst, counter["n"]))
    assert [tuple(step) for step in rec.history] == expected
    last = rec.history[-1]
    assert (last.trigger, last.src, last.dst, last.position) == ("answer", S.DISPATCHED, S.ANSWERED, 5)
    # a failed attempt records nothing
    with pytest.raises(toolwire.InvalidTransition):
        rec.answer()
    assert len(rec.history) == 5


def test_history_position_is_none_outside_a_stream():
    """Without a position_of callable, history positions are None."""
    rec = record_in(S.ANSWERED)
    assert [step.position for step in rec.history] == [None, None, None]


# ---- stateful: random triggers against a plain-dict model -------------------------------------------------
N_CALLS = 3
OPEN = (S.ANNOUNCED, S.ACCUMULATING)


class CallMachine(RuleBasedStateMachine):
    """Random triggers and fragments on a few calls, mirrored in a plain-dict reference model."""

    def __init__(self) -> None:
        super().__init__()
        self.recs = [new_record(local_id=f"h{i}", call_id=f"hc{i}") for i in range(N_CALLS)]
        self.model = [
            {"state": S.ANNOUNCED, "frags": [], "answers": 0, "dispatched_from": [], "seen": [S.ANNOUNCED]}
            for _ in range(N_CALLS)
        ]
        self.prev_frags = [[] for _ in range(N_CALLS)]
        self.prev_state = [S.ANNOUNCED for _ in range(N_CALLS)]

    @rule(i=st.integers(0, N_CALLS - 1), trigger=st.sampled_from(list(Trigger)))
    def fire_trigger(self, i, trigger):
        rec, m = self.recs[i], self.model[i]
        src = m["state"]
        dst = REFERENCE.get((src, trigger))
        if dst is None:
            with pytest.raises(toolwire.InvalidTransition) as info:
                fire(rec, trigger)
            assert info.value.state == src.value
            assert info.value.trigger == trigger.value
        else:
            fire(rec, trigger)
            if dst is S.DISPATCHED:
                m["dispatched_from"].append(src)
            if dst is S.ANSWERED:
                m["answers"] += 1
            m["state"] = dst
        m["seen"].append(m["state"])
        assert rec.state is m["state"]

    @rule(i=st.integers(0, N_CALLS - 1), fragment=st.text(max_size=5))
    def append(self, i, fragment):
        rec, m = self.recs[i], self.model[i]
        src = m["state"]
        if src in OPEN:
            rec.append(fragment)
            m["frags"].append(fragment)
            m["state"] = S.ACCUMULATING
        else:
            with pytest.raises(toolwire.InvalidTransition):
                rec.append(fragment)
        m["seen"].append(m["state"])
        assert rec.state is m["state"]
        assert rec.frags == m["frags"]

    @invariant()
    def matches_model(self):
        for rec, m in zip(self.recs, self.model):
            assert rec.state is m["state"]
            assert rec.frags == m["frags"]

    @invariant()
    def terminal_states_absorb(self):
        for m in self.model:
            seen = m["seen"]
            for k, state in enumerate(seen):
                if state in (S.TRUNCATED, S.ERRORED, S.ANSWERED):
                    assert all(later is state for later in seen[k:])
                    break

    @invariant()
    def answered_at_most_once(self):
        for rec, m in zip(self.recs, self.model):
            assert m["answers"] <= 1
            assert sum(1 for step in rec.history if step.dst is S.ANSWERED) == m["answers"]

    @invariant()
    def dispatched_only_if_complete(self):
        for rec, m in zip(self.recs, self.model):
            assert all(src is S.COMPLETE for src in m["dispatched_from"])
            for step in rec.history:
                if step.dst is S.DISPATCHED:
                    assert step.src is S.COMPLETE
                    assert step.trigger == "dispatch"

    @invariant()
    def fragments_grow_only_while_accumulating(self):
        for i, rec in enumerate(self.recs):
            before, after = self.prev_frags[i], rec.frags
            assert after[: len(before)] == before, "fragments were removed or rewritten"
            if len(after) > len(before):
                assert self.prev_state[i] in OPEN
                assert rec.state is S.ACCUMULATING
            self.prev_frags[i] = list(after)
            self.prev_state[i] = rec.state

    def teardown(self):
        for rec in self.recs:
            rec.release()


TestCallMachine = CallMachine.TestCase


# ---- the shared Machine ----------------------------------------------------------------------------------
def test_many_records_create_no_machine(monkeypatch):
    """Creating many CallRecords allocates no transitions.Machine; all are models of the one MACHINE."""
    created = []
    original = transitions.Machine.__init__

    def counting_init(self, *a, **kw):
        created.append(self)
        original(self, *a, **kw)

    monkeypatch.setattr(transitions.Machine, "__init__", counting_init)
    gc.collect()
    machines_before = sum(1 for o in gc.get_objects() if isinstance(o, transitions.Machine))
    recs = [new_record(local_id=f"m{i}", call_id=f"mc{i}") for i in range(500)]
    for rec in recs[:50]:
        rec.append("{}")
        rec.finish()
    gc.collect()
    machines_after = sum(1 for o in gc.get_objects() if isinstance(o, transitions.Machine))
    assert created == []
    assert machines_after == machines_before
    assert all(rec in MACHINE.models for rec in recs)
    for rec in recs:
        rec.release()


def test_release_removes_record_from_machine_models():
    """release() detaches the record from MACHINE.models and keeps its last state; releasing twice is harmless."""
    rec = record_in(S.DISPATCHED)
    assert rec in MACHINE.models
    rec.release()
    assert rec not in MACHINE.models
    assert rec.state is S.DISPATCHED
    rec.release()
    assert rec not in MACHINE.models


def test_records_are_weakly_held_by_machine():
    """A dropped record (never released) disappears from MACHINE.models after gc."""
    rec = new_record(local_id="weak-only", call_id="weak-c")
    rec.append("{")
    ref = weakref.ref(rec)
    assert rec in MACHINE.models
    del rec
    gc.collect()
    assert ref() is None
    assert not any(getattr(m, "local_id", None) == "weak-only" for m in list(MACHINE.models.keys()))
