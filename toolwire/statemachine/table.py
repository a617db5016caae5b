"""The call state machine: every state, trigger and transition, in this one module.

Theory of operation
-------------------
Each tool call in flight is a model attached to one shared ``transitions.Machine`` built from ``TRANSITIONS``
below (allocated once per process, as h2 does, because a Machine per call costs hundreds of microseconds).

    announced --receive--> accumulating --finish--> complete --dispatch--> dispatched --answer--> answered
        |                      |                       |
        +--finish--> complete  +--truncate--> truncated  +--reject--> rejected --answer--> answered
        +--truncate/fail-->    +--fail--> errored        +--truncate/fail--> truncated/errored

* A call becomes ``complete`` only through ``finish``, which the assembler fires on the dialect's terminator.
* ``truncated`` and ``errored`` are terminal: no trigger leaves them, so such a call can never be dispatched.
* ``complete`` can still become ``truncated`` (the token limit cut the turn right after this call's block
  closed) or ``errored`` (the provider's authoritative final value disagrees, or a fragment arrives after the
  terminator).
* ``answer`` leaves ``dispatched`` and ``rejected`` only, so a second answer is an invalid transition.

Argument fragments do not fire a trigger each: the first fragment fires ``receive`` (announced → accumulating)
and later ones are accepted by a plain state check that is equivalent to the internal transition
``accumulating --receive--> accumulating`` listed in the table; a fragment in any other state fires ``receive``
for real, which fails and is reported as an invalid transition.

Diagrams (``toolwire diagram``) are generated from ``TRANSITIONS`` and a test checks the committed ones match.
"""

from __future__ import annotations

import enum
import logging
import weakref

from transitions import Machine, State, Transition

from ..types import CallState

__all__ = ["CallState", "Trigger", "TRANSITIONS", "TERMINAL_STATES", "MACHINE", "next_state"]

S = CallState


class Trigger(str, enum.Enum):
    RECEIVE = "receive"
    FINISH = "finish"
    TRUNCATE = "truncate"
    FAIL = "fail"
    REJECT = "reject"
    DISPATCH = "dispatch"
    ANSWER = "answer"


T = Trigger

#: (trigger, sources, destination); ``None`` as destination is an internal transition (no state change).
TRANSITIONS: tuple[tuple[Trigger, tuple[CallState, ...], CallState | None], ...] = (
    (T.RECEIVE, (S.ANNOUNCED,), S.ACCUMULATING),
    (T.RECEIVE, (S.ACCUMULATING,), None),
    (T.FINISH, (S.ANNOUNCED, S.ACCUMULATING), S.COMPLETE),
    (T.TRUNCATE, (S.ANNOUNCED, S.ACCUMULATING, S.COMPLETE), S.TRUNCATED),
    (T.FAIL, (S.ANNOUNCED, S.ACCUMULATING, S.COMPLETE), S.ERRORED),
    (T.REJECT, (S.COMPLETE,), S.REJECTED),
    (T.DISPATCH, (S.COMPLETE,), S.DISPATCHED),
    (T.ANSWER, (S.DISPATCHED, S.REJECTED), S.ANSWERED),
)

#: States no trigger leaves.
TERMINAL_STATES = frozenset({S.TRUNCATED, S.ERRORED, S.ANSWERED})

_NEXT: dict[tuple[CallState, Trigger], CallState | None] = {
    (src, trig): dst for trig, sources, dst in TRANSITIONS for src in sources
}


def next_state(state: CallState, trigger: Trigger) -> CallState | None | bool:
    """Return the destination of ``trigger`` from ``state`` (``None`` for an internal transition), or ``False``
    when the trigger is not allowed there. A pure lookup in the table, for tests and tools."""
    return _NEXT.get((state, trigger), False)


_TRANSITIONS_LOG = logging.getLogger("transitions.core")


class _CallStateObj(State):
    """``transitions``' State with its name computed once (``State.name`` is a property that asks the Enum member
    for its name on every read, several times a trigger) and no enter or exit work when there is none to do: no
    callbacks, and ``transitions``' own logger would drop the lines it writes (it still writes them when enabled).
    """

    name = None  # shadows ``State.name``: set per instance below

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.name = self._name.name if isinstance(self._name, enum.Enum) else self._name

    def enter(self, event_data) -> None:
        if self.on_enter or _TRANSITIONS_LOG.isEnabledFor(logging.INFO):
            State.enter(self, event_data)

    def exit(self, event_data) -> None:
        if self.on_exit or _TRANSITIONS_LOG.isEnabledFor(logging.INFO):
            State.exit(self, event_data)


class _CallTransition(Transition):
    """``transitions``' Transition, whose ``execute`` goes straight to the state change when there is nothing else
    to do (no prepare, condition, before or after callback on it or on the machine, and ``transitions``' logger
    would drop its debug lines); otherwise ``Transition.execute`` as it is."""

    def execute(self, event_data) -> bool:
        machine = event_data.machine
        if (self.prepare or self.conditions or self.before or self.after or machine.before_state_change
                or machine.after_state_change or _TRANSITIONS_LOG.isEnabledFor(logging.DEBUG)):
            return Transition.execute(self, event_data)
        if self.dest:  # None: an internal transition
            self._change_state(event_data)
        return True

    #: (machine, source State, destination State, its value), resolved once when the shared Machine is built
    resolved: tuple | None = None

    def _change_state(self, event_data) -> None:
        """``Transition._change_state`` with the source and destination States resolved once: it looks each up by
        name every time (``get_state`` three times, a fourth through ``EventData.update``, and ``set_state``
        wraps the model in a list to set one attribute). The same steps in the same order: exit the source, set
        the model's state to the destination's value, point the event data at the destination, enter it, and the
        machine's ``on_final`` callbacks when it is final."""
        resolved = self.resolved
        machine = event_data.machine
        if resolved is None or resolved[0] is not machine:
            Transition._change_state(self, event_data)
            return
        _, src, dst, value = resolved
        # ``exit`` and ``enter`` do nothing without callbacks when transitions' logger drops info lines (see
        # ``_CallStateObj``): that is asked once here, and nothing runs between the two that could change it
        quiet = not src.on_exit and not dst.on_enter and not _TRANSITIONS_LOG.isEnabledFor(logging.INFO)
        if not quiet:
            src.exit(event_data)
        setattr(event_data.model, machine.model_attribute, value)
        event_data.state = dst
        if not quiet:
            dst.enter(event_data)
        if dst.final:
            machine.callbacks(machine.on_final, event_data)


class _SharedMachine(Machine):
    """A ``Machine`` whose models define their trigger methods themselves.

    ``Machine.add_model`` binds a partial per trigger and an ``is_<state>`` helper per state onto every model
    (about 100 µs a call); call models already have explicit trigger methods, so registering one only sets its
    initial state and records it in ``models`` (a weak mapping used as a set, so removal is O(1)).

    ``get_state`` finds a ``CallState`` member's State by one dict lookup (``Machine.get_state`` asks the Enum
    for the member's name first); any other argument takes ``Machine.get_state``.
    """

    state_cls = _CallStateObj
    transition_cls = _CallTransition
    _by_member: dict = {}
    _initial_state: State | None = None

    def get_state(self, state):
        if type(state) is CallState:
            found = self._by_member.get(state)
            if found is not None:
                return found
        return Machine.get_state(self, state)

    def get_model_state(self, model):
        # ``Machine.get_model_state``: ``get_state`` of the model's state attribute, here without the extra call
        state = getattr(model, self.model_attribute)
        if type(state) is CallState:
            found = self._by_member.get(state)
            if found is not None:
                return found
        return Machine.get_state(self, state)

    def add_model(self, model, initial=None):  # noqa: D401 - same contract as Machine.add_model
        # ``set_state(state, model=model)`` for one model: the State's value on the model's state attribute (the
        # initial State is found once, in ``_build``, instead of by name for every call)
        state = self._initial_state if initial is None else self.get_state(initial)
        setattr(model, self.model_attribute, state.value)
        self.models[model] = None

    def remove_model(self, model):
        self.models.pop(model, None)


def _build() -> _SharedMachine:
    m = _SharedMachine(
        model=None,
        states=CallState,
        initial=S.ANNOUNCED,
        auto_transitions=False,
        send_event=False,
        ignore_invalid_triggers=False,
    )
    for trig, sources, dst in TRANSITIONS:
        m.add_transition(trig.value, list(sources), dst)
    # O(1) add and remove for many calls in flight; weak, so a parser dropped without close() leaks nothing
    m.models = weakref.WeakKeyDictionary()
    m._by_member = {member: m.states[member.name] for member in CallState}
    m._initial_state = m.get_state(m.initial)
    for event in m.events.values():
        for transitions in event.transitions.values():
            for tr in transitions:
                dst = m.get_state(tr.dest) if tr.dest else None
                tr.resolved = (m, m.get_state(tr.source), dst, dst.value if dst is not None else None)
    return m


#: The one Machine every call is attached to.
MACHINE = _build()
