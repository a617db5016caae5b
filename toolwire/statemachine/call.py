"""One call in flight: the model attached to the shared call Machine.

Triggers are methods (``receive``, ``finish``, ``truncate``, ``fail``, ``reject``, ``dispatch``, ``answer``)
that go through ``transitions``; an invalid one logs ``call.invalid_transition`` and raises ``InvalidTransition``.

``fragments`` is the per-fragment hot path codecs use, ``rec.fragments.append(text)``: while the call
accumulates it is the fragment list itself (equivalent to the table's internal transition, at the cost of a list
append), in every other state a guard whose ``append`` takes the checked path (the assembler's
``append_or_fail``, which starts accumulating on the first fragment and fails a call that already ended); every
transition points it at the right one. ``append`` is the checked path of a record without an assembler.

The assembler reports new fragments once per ``feed()`` for the calls that got some, never by walking every open
call: the first fragment a call gets after each report goes through the guard too, which adds the call to its
assembler's list of touched calls (``Assembler.touched``) and points ``fragments`` at the list again; the
report points it back at the guard. A call costs one guarded append per feed that gave it fragments. (With few
calls open the assembler looks at each of them instead and leaves ``fragments`` the list.)
"""

from __future__ import annotations

import weakref
from itertools import starmap
from typing import Any

from transitions import MachineError

from .. import _log
from ..errors import InvalidTransition
from ..types import CallKind, CallState, Problem, ProblemCode, ToolCall, Transition
from .table import MACHINE, Trigger

__all__ = ["CallRecord", "Step"]


class _Checked(weakref.ref):
    """What ``CallRecord.fragments`` is while the call does not accumulate: its ``append`` takes the checked path.
    It is a weak reference to the record (so a record and its guard make no reference cycle), made in C without
    a Python ``__init__`` (one is made per call)."""

    __slots__ = ()

    def append(self, fragment: str) -> None:
        rec = self()
        if rec is not None:
            owner = rec.owner
            if owner is not None and rec.state is _ACCUMULATING:
                # the call's first fragment since its assembler last reported it (``checked_append`` without
                # its call: this runs once per feed for every call that gets fragments)
                owner.touched.append(rec)
                frags = rec.fragments = rec.frags
                frags.append(fragment)
            else:
                rec.checked_append(fragment)

_ACCUMULATING = CallState.ACCUMULATING
_ANNOUNCED = CallState.ANNOUNCED  # (a member read through its class costs ~60 ns on CPython 3.11)
_EVENTS = MACHINE.events
#: per trigger: its ``transitions`` Event's ``trigger`` and its name (``Enum.value`` is a property, slow to read)
_FIRE = {t: (MACHINE.events[t.value].trigger, t.value) for t in Trigger}
_RECEIVE, _FINISH, _TRUNCATE, _FAIL = (_FIRE[t] for t in (Trigger.RECEIVE, Trigger.FINISH, Trigger.TRUNCATE,
                                                          Trigger.FAIL))
_REJECT, _DISPATCH, _ANSWER = (_FIRE[t] for t in (Trigger.REJECT, Trigger.DISPATCH, Trigger.ANSWER))
_debug_enabled = _log.stdlib_logger.isEnabledFor
_DEBUG = _log.DEBUG


class Step(tuple):
    """One transition a call went through: (trigger, src, dst, position). ``position`` is the payload number
    (1-based) that caused it, or None outside a stream."""

    __slots__ = ()

    def __new__(cls, trigger: str, src: CallState, dst: CallState, position: int | None):
        return tuple.__new__(cls, (trigger, src, dst, position))

    trigger = property(lambda self: self[0])
    src = property(lambda self: self[1])
    dst = property(lambda self: self[2])
    position = property(lambda self: self[3])


_new_tuple = tuple.__new__  # ``Step(...)`` without the Python-level ``__new__`` frame: the same tuple
_new_object = object.__new__


class CallRecord:
    """A call being assembled, dispatched and answered. ``state`` is owned by the shared Machine."""

    __slots__ = (
        "state", "provider", "local_id", "call_id", "name", "kind", "index", "choice", "server", "server_type",
        "frags", "initial", "final", "args", "raw", "problem", "meta", "history", "emitted", "position_of",
        "alias_ids", "announced_at", "nchars", "fragments", "owner", "_guard", "seq", "__weakref__",
    )

    def __init__(self, *, provider: str, local_id: str, call_id: str | None, name: str | None,
                 kind: CallKind = CallKind.FUNCTION, index: int = 0, choice: int = 0, server: bool = False,
                 server_type: str | None = None, meta: dict[str, Any] | None = None,
                 position_of=None, owner: Any = None) -> None:
        self.setup(provider, local_id, call_id, name, kind, index, choice, server, server_type, meta, position_of,
                   owner)

    @classmethod
    def new(cls, provider: str, local_id: str, call_id: str | None, name: str | None, kind: CallKind, index: int,
            choice: int, server: bool, server_type: str | None, meta: dict[str, Any] | None, position_of: Any,
            owner: Any) -> "CallRecord":
        """``CallRecord(...)`` with every argument given in order: the assembler makes one per call, and keyword
        arguments bound to a Python ``__init__`` cost more than the rest of it (both run ``setup``)."""
        rec = _new_object(cls)
        rec.setup(provider, local_id, call_id, name, kind, index, choice, server, server_type, meta, position_of,
                  owner)
        return rec

    def setup(self, provider: str, local_id: str, call_id: str | None, name: str | None, kind: CallKind,
              index: int, choice: int, server: bool, server_type: str | None, meta: dict[str, Any] | None,
              position_of: Any, owner: Any) -> None:
        """What ``__init__`` does (``new`` runs it too)."""
        self.provider = provider
        self.local_id = local_id
        self.call_id = call_id
        self.name = name
        self.kind = kind
        self.index = index
        self.choice = choice
        self.server = server
        self.server_type = server_type
        self.frags: list[str] = []
        self.initial: str | None = None  # arguments given whole at the start (Anthropic input, unary bodies)
        self.final: str | None = None  # the provider's authoritative final value, when it sends one
        self.args: Any = None
        self.raw: str = ""
        self.problem: Problem | None = None
        self.meta: dict[str, Any] = meta if meta is not None else {}
        self.history: list[Step] = []
        self.emitted = 0  # fragments already reported in an ArgumentsReceived event
        self.position_of = position_of  # callable giving the current payload number (without an owner)
        self.alias_ids: list[str] | None = None
        self.nchars = 0  # argument characters reported so far (checked against the turn's limit)
        #: the assembler the call belongs to while its stream is parsed: its ``append_or_fail`` is the checked
        #: path (None: ``append``) and its ``position`` numbers the transitions (None: ``position_of``)
        self.owner: Any = owner
        if owner is not None:
            self.announced_at: int | None = owner.position
        else:
            self.announced_at = position_of() if position_of is not None else None
        self._guard = _Checked(self)
        #: where a codec appends a fragment: the list while accumulating (since the call was last reported as
        #: touched), the guard otherwise
        self.fragments: Any = self._guard
        self.seq = 0  # the call's number in its response (``Assembler.open_call`` sets it): its report order
        MACHINE.add_model(self)

    @classmethod
    def resume(cls, call: ToolCall, position_of=None) -> "CallRecord":
        """A record for an already-parsed ``call``, attached to the shared Machine in the call's state.

        The dispatcher drives dispatch-side transitions (reject, dispatch, answer) through it, so the same
        table guards them: a truncated or errored call cannot be dispatched, an answered one not answered again.
        """
        rec = cls.__new__(cls)
        rec.provider = call.provider
        rec.local_id = call.local_id
        rec.call_id = call.call_id
        rec.name = call.name
        rec.kind = call.kind
        rec.index = call.index
        rec.choice = call.choice
        rec.server = False
        rec.server_type = None
        rec.frags = []
        rec.initial = call.raw_arguments
        rec.final = None
        rec.args = call.args
        rec.raw = call.raw_arguments
        rec.problem = call.problem
        rec.meta = dict(call.provider_meta)
        rec.emitted = 0
        rec.position_of = position_of
        rec.alias_ids = None
        rec.announced_at = call.announced_at
        rec.nchars = len(call.raw_arguments)
        rec.history = [Step(t.trigger, t.src, t.dst, t.position) for t in call.history]
        rec.owner = None
        rec._guard = _Checked(rec)
        rec.fragments = rec._guard
        rec.seq = 0
        MACHINE.add_model(rec, initial=call.state)
        return rec

    # ---- the hot path ---------------------------------------------------------------------------------
    def checked_append(self, fragment: str) -> None:
        """A fragment through the checked path: the owning assembler's ``append_or_fail`` (``append`` without
        one); for an accumulating call, the first fragment since its assembler last reported it: the call is
        added to the assembler's touched calls and ``fragments`` is the list again."""
        owner = self.owner
        if owner is not None:
            if self.state is _ACCUMULATING:
                owner.touched.append(self)
                frags = self.fragments = self.frags
                frags.append(fragment)
                return
            owner.append_or_fail(self, fragment)
        else:
            self.append(fragment)

    def append(self, fragment: str) -> None:
        """Add an argument fragment. Raises ``InvalidTransition`` unless the call is announced or accumulating."""
        if self.state is _ACCUMULATING:
            self.frags.append(fragment)
        else:
            self._trigger(_RECEIVE)
            self.frags.append(fragment)

    # ---- triggers -------------------------------------------------------------------------------------
    def _trigger(self, fire_name: tuple[Any, str]) -> None:
        """Fire one trigger (``fire_name``: its ``transitions`` Event's ``trigger`` and its name, from ``_FIRE``)."""
        src = self.state
        fire, name = fire_name
        try:
            fire(self)
        except MachineError:
            _log.emit(_log.WARNING, "call.invalid_transition", provider=self.provider, call_id=self.call_id,
                      local_id=self.local_id, name=self.name, state=src.value, trigger=name)
            raise InvalidTransition(call_id=self.call_id, local_id=self.local_id, state=src.value,
                                    trigger=name) from None
        dst = self.state
        owner = self.owner
        if dst is _ACCUMULATING:
            self.fragments = self.frags
            if owner is not None:
                owner.touched.append(self)  # (the fragment that made it accumulate follows)
        else:
            self.fragments = self._guard
        if owner is not None:
            pos = owner.position
        else:
            pos = self.position_of() if self.position_of is not None else None
        self.history.append(_new_tuple(Step, (name, src, dst, pos)))
        if _debug_enabled(_DEBUG):
            _log.emit(_log.DEBUG, "call.transition", provider=self.provider, call_id=self.call_id,
                      local_id=self.local_id, name=self.name, src=src.value, dst=dst.value,
                      trigger=name, position=pos)

    def receive(self) -> None:
        self._trigger(_RECEIVE)

    def finish(self) -> None:
        self._trigger(_FINISH)

    def truncate(self, code: ProblemCode, message: str) -> None:
        self._trigger(_TRUNCATE)
        self.problem = Problem(code, message)

    def fail(self, code: ProblemCode, message: str) -> None:
        self._trigger(_FAIL)
        self.problem = Problem(code, message)

    def reject(self) -> None:
        self._trigger(_REJECT)

    def dispatch(self) -> None:
        self._trigger(_DISPATCH)

    def answer(self) -> None:
        self._trigger(_ANSWER)

    # ---- views ----------------------------------------------------------------------------------------
    @property
    def is_open(self) -> bool:
        """True while the call can still receive fragments (announced or accumulating)."""
        state = self.state
        return state is _ACCUMULATING or state is _ANNOUNCED

    def text(self) -> str:
        """The argument text received so far (fragments joined, or the whole initial value)."""
        if self.frags:
            return "".join(self.frags)
        return self.initial or ""

    def release(self) -> None:
        """Detach from the shared Machine (the call keeps its last state)."""
        MACHINE.remove_model(self)

    def to_call(self) -> ToolCall:
        """The call as a ``ToolCall``, made anew each time: the event's call and the turn's are separate objects,
        so editing one (its ``provider_meta``, its ``history``) never reaches the other."""
        state = self.state
        raw = self.raw if state is not _ANNOUNCED and state is not _ACCUMULATING else self.text()
        args = self.args
        return ToolCall(
            provider=self.provider, local_id=self.local_id, call_id=self.call_id, index=self.index,
            name=self.name, kind=self.kind, args=args if isinstance(args, dict) else None,
            raw_arguments=raw, state=state, problem=self.problem, choice=self.choice,
            provider_meta=dict(self.meta),
            history=list(starmap(Transition, self.history)),  # each Step is (trigger, src, dst, position)
            announced_at=self.announced_at,
        )

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"<CallRecord {self.local_id} {self.call_id!r} {self.name!r} {self.state.value}>"
