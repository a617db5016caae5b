"""Whole conversations, exactly once: a state machine over an application that talks to a model for many turns.

The application has two writes (``add_item``, ``add_tag``) and a read (``count_items``) and an ``SQLiteLedger`` on
a temporary file. Two machines run the same rules: one whose policy allows every call, one whose policy makes
every write wait for a person's approval. Each run draws which writes carry an ``idempotency_key`` (the item:
one effect per item and conversation), one dialect for every conversation or one per conversation, and whether
the server is broken (reuses a response id for a new response). The rules:

* a model turn arrives (1-3 calls, with or without provider call ids, ids reused as ``call_0`` every turn or
  unique, with or without a response id (never one for a dialect whose bodies carry none); without one the
  application passes the conversation position as
  ``turn_id``, as a loop does, and some applications always pass it; sometimes several choices, of which one is
  dispatched) and is dispatched, sync or async, with or without every approval the application holds; sometimes
  the ledger fails to record a write's completion, after its effect: the process dies there and restarts, or it
  only loses the record and goes on; either way the record stays ``started``;
* a turn (the last one or an earlier one) is dispatched again, from the same Turn object or the same bytes, by
  the same process or after a restart (a new ``Dispatcher`` and ``SQLiteLedger`` on the same file), with no
  approvals, its own, or all of the conversation's;
* after such a crash the model re-plans the same write under a new call id in a new turn;
* approvals are granted for some pending calls of a turn (by the dispatcher, or by one with a tiny
  ``approval_ttl`` so that they have expired when presented) and the turn is dispatched with them; they are
  presented again by later dispatches and for later turns' identical calls;
* the process restarts.

A reference model written from the documented rules (ledger keys per call instance or per the tool's own key,
``completed`` answered with the stored result and ``started`` with ``outcome_unknown``, the dispatcher's record
of answered instances, approvals bound to one instance, single-use and expiring) predicts every result kind,
every replayed content and every handler run; the application's own effect log (tagged with the conversation
and the turn's position) and the ledger file are checked against it, and the model-free invariants of exactly
once besides: at most one effect per write call instance (and per idempotency key), a later identical write
runs, the results and the history answer exactly the dispatched calls once each, no handler runs for a call
answered as not run, an approval runs only its own call and once, an expired approval runs nothing.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import shutil
import sqlite3
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, event, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import toolwire
from toolwire import Approval, Decision, Dispatcher, LedgerError, Registry, ResultKind, SQLiteLedger, Tool

from .bodies import MULTI_CHOICE, PROVIDERS, body, choices_body
from .dialects import adapter

K = ResultKind
WRITES = ("add_item", "add_tag")
READ = "count_items"
ITEMS = ("apple", "pear")
SECRET = b"conversation-machine-approval-key"
#: result kinds under which a handler may have run (a write's timeout is outcome_unknown, but these handlers
#: never time out, so here outcome_unknown always means "nothing ran")
RAN = frozenset({K.OK, K.HANDLER_FAILED, K.RESULT_UNUSABLE, K.HANDLER_TIMEOUT})
#: kinds the dispatcher does not remember for a call instance (the call is evaluated again next time)
NOT_REMEMBERED = frozenset({K.APPROVAL_REQUIRED, K.NOT_RUN})


# ci runs a short machine; `make fuzz` (HYPOTHESIS_PROFILE=deep) runs it much longer and deeper
_BASE = settings.default.max_examples
MACHINE_SETTINGS = settings(
    max_examples=_BASE if _BASE < 1000 else _BASE // 2,  # per machine: there are two
    stateful_step_count=50 if _BASE < 1000 else 80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


#: the ledger file lives in memory where there is a tmpfs: the machine is about exactly once, not about surviving a
#: power cut, and an SQLiteLedger syncs every claim and completion to disk (most of the run time on a disk)
RAM_DIR = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


class ProcessDied(BaseException):
    """The process was killed: nothing after this point of the dispatch happened (not an ``Exception``, so no
    handler of the dispatcher's catches it)."""


class CrashableLedger:
    """The application's ledger: an ``SQLiteLedger`` whose next ``complete`` can be made to fail, after the
    write's effect and before its record says ``completed``.

    ``"dies"``: the process is killed there (``ProcessDied`` escapes the dispatch). ``"ledger_fails"``: the ledger
    raises (a full disk); the dispatcher logs it and answers the call with its result. Either way the record
    stays ``started``.
    """

    def __init__(self, path: Path) -> None:
        self.inner = SQLiteLedger(path)
        self.crash: str | None = None
        self.fired: str | None = None

    def claim(self, key, fingerprint=""):
        return self.inner.claim(key, fingerprint)

    def complete(self, key, result):
        crash, self.crash = self.crash, None
        if crash == "dies":
            self.fired = crash
            raise ProcessDied()
        if crash == "ledger_fails":
            self.fired = crash
            raise LedgerError("disk full: the completion was not recorded")
        self.inner.complete(key, result)

    def get(self, key):
        return self.inner.get(key)

    def close(self) -> None:
        self.inner.close()


# ---- the application's view of a conversation ------------------------------------------------------------------

Spec = tuple[str | None, str, str]  # (provider call id or None, tool name, item)


@dataclass
class Conv:
    id: str
    dialect: str
    loop_turn_ids: bool  # pass turn_id=position for every turn (as a loop does), not only without a response id
    turns: list["TurnRec"] = field(default_factory=list)


@dataclass
class TurnRec:
    conv: Conv
    index: int  # position in the conversation
    data: bytes
    response_id: str | None
    turn_id: str | None  # what the application passes to run()
    choice: int  # the choice the application dispatches (always the same one for this turn)
    specs: list[list[Spec]]  # the calls of every choice
    broken: bool = False  # its response id was already used by an earlier, different response
    turn: toolwire.Turn | None = None  # the parsed object the live process holds
    tokens: list[Approval] = field(default_factory=list)  # approvals the application stored for this turn
    pending: list[Any] = field(default_factory=list)  # ApprovalRequests of its last dispatch
    results: list[toolwire.ToolResult] | None = None  # its last results (None: never answered)

    @property
    def ident(self) -> tuple[str, str]:
        """The turn's identity as documented: the caller's turn_id, else the provider's response id."""
        if self.turn_id is not None:
            return ("turn", self.turn_id)
        assert self.response_id is not None
        return ("response", self.response_id)

    @property
    def tag(self) -> tuple[str, int]:
        """How the application names this turn in its effect log."""
        return (self.conv.id, self.index)


class App:
    """The application's tools: every handler run is logged with the turn being dispatched."""

    def __init__(self) -> None:
        self.effects: list[tuple[str, int, str, str]] = []  # (conversation, turn position, tool, item): writes
        self.runs: list[tuple[str, str]] = []  # (tool, item) of every handler run of the current dispatch
        self.current: tuple[str, int] | None = None

    def _write(self, name: str, item: str) -> dict:
        assert self.current is not None
        self.effects.append((*self.current, name, item))
        self.runs.append((name, item))
        return {"tool": name, "item": item, "effect": len(self.effects)}

    def registry(self, keyed: frozenset[str]) -> Registry:
        def add_item(item: str) -> dict:
            """Add an item to the list."""
            return self._write("add_item", item)

        def add_tag(item: str) -> dict:
            """Tag an item."""
            return self._write("add_tag", item)

        def count_items(item: str) -> int:
            """Count an item."""
            self.runs.append(("count_items", item))
            return sum(1 for e in self.effects if e[2] == "add_item" and e[3] == item)

        def by_item(args: dict) -> str:
            # the effect's own identity: adding (or tagging) an item once per conversation
            return args["item"]

        return Registry([Tool.from_function(f, effect="write", idempotency_key=by_item if f.__name__ in keyed
                                            else None) for f in (add_item, add_tag)]
                        + [Tool.from_function(count_items, effect="read")])


def writes_need_approval(call, ctx) -> Decision:
    return Decision.needs_approval("changes the list") if ctx.tool.effect == "write" else Decision.allow()


# ---- the reference model ---------------------------------------------------------------------------------------

@dataclass
class Entry:
    status: str  # "started" | "completed"
    fingerprint: tuple
    content: Any = None


@dataclass
class Expect:
    kind: ResultKind
    runs: bool = False
    stored: Entry | None = None  # answered from this ledger record: its content
    remembered: tuple | None = None  # answered from the dispatcher's record: (content,)

    def content(self) -> Any:
        return self.stored.content if self.stored is not None else self.remembered[0]

    @property
    def has_content(self) -> bool:
        return self.stored is not None or self.remembered is not None


class Model:
    """What the documentation says the dispatcher and its ledger do, on plain dicts."""

    def __init__(self, keyed: frozenset[str], approvals: bool) -> None:
        self.keyed = keyed
        self.approvals = approvals
        self.ledger: dict[tuple, Entry] = {}
        self.consumed: dict[str, tuple] = {}  # approval signature -> the instance that used it
        self.memory: dict[tuple, tuple[str, ResultKind, Any]] = {}  # instance -> (tool, kind, content)
        self.tokens: dict[str, tuple[tuple, str, bool]] = {}  # signature -> (instance, tool, expired)
        self.choices: dict[tuple, int] = {}  # (conversation, turn identity) -> the one choice ever dispatched

    @staticmethod
    def instance(rec: TurnRec, call: toolwire.ToolCall) -> tuple:
        """A call instance: the turn's identity, the provider id (else the local id) and the arguments."""
        ref = ("id", call.call_id) if call.call_id else ("local", call.local_id)
        return (rec.conv.id, rec.ident, ref, call.name, call.args["item"])

    def key(self, rec: TurnRec, call: toolwire.ToolCall) -> tuple[tuple, tuple]:
        """The ledger key a write claims and its fingerprint."""
        if call.name in self.keyed:
            return ("key", rec.conv.id, call.name, call.args["item"]), (call.name,)
        return ("instance", *self.instance(rec, call)), (call.name, call.args["item"])

    def restart(self) -> None:
        self.memory.clear()

    def _approved(self, inst: tuple, name: str, approvals: list[Approval]) -> bool:
        for a in approvals:
            target, tool, expired = self.tokens[a.signature]
            if target != inst or tool != name or expired:
                continue
            used = self.consumed.get(a.signature)
            if used is None:
                self.consumed[a.signature] = inst
                return True
            if used == inst:  # a write dispatched again on its approval: its own record answers it
                return True
        return False

    def predict(self, rec: TurnRec, calls: list[toolwire.ToolCall], approvals: list[Approval],
                crash: str | None) -> tuple[list[Expect | None], int | None]:
        """Expected answers of one dispatch (None: not answered, the process died first), and the position of
        the write whose completion fails (None: no write ran while a crash was armed)."""
        out: list[Expect | None] = [None] * len(calls)
        # phase 1: answered before, then authorization (approvals are consumed here, before anything runs)
        for i, call in enumerate(calls):
            inst = self.instance(rec, call)
            seen = self.memory.get(inst)
            if seen is not None:
                _tool, kind, content = seen
                out[i] = Expect(kind, remembered=(content,))
                continue
            if self.approvals and call.name in WRITES:
                # a write that ran before is answered by its record, before the policy is asked (and before
                # any approval is looked at, so none is consumed)
                key, fingerprint = self.key(rec, call)
                entry = self.ledger.get(key)
                if entry is not None and entry.fingerprint == fingerprint:
                    out[i] = Expect(K.OK, stored=entry) if entry.status == "completed" \
                        else Expect(K.OUTCOME_UNKNOWN)
                    continue
                if not self._approved(inst, call.name, approvals):
                    out[i] = Expect(K.APPROVAL_REQUIRED)
        # phase 2: effects, in call order
        crashed_at = None
        died = False
        for i, call in enumerate(calls):
            if out[i] is not None:
                continue
            if call.name == READ:
                out[i] = Expect(K.OK, runs=True)
                continue
            key, fingerprint = self.key(rec, call)
            entry = self.ledger.get(key)
            if entry is not None:
                if entry.fingerprint != fingerprint:
                    out[i] = Expect(K.NOT_RUN)
                elif entry.status == "completed":
                    out[i] = Expect(K.OK, stored=entry)
                else:
                    out[i] = Expect(K.OUTCOME_UNKNOWN)
                continue
            out[i] = Expect(K.OK, runs=True)
            if crash is not None and crashed_at is None:
                crashed_at = i
                self.ledger[key] = Entry("started", fingerprint)
                if crash == "dies":
                    died = True
                    break
            else:
                self.ledger[key] = Entry("completed", fingerprint)
        if died:
            for j in range(crashed_at + 1, len(calls)):
                out[j] = None
        return out, crashed_at

    def stored(self, rec: TurnRec, calls: list[toolwire.ToolCall], results: list[toolwire.ToolResult],
               expected: list[Expect]) -> None:
        """After a dispatch that returned: the results the ledger now stores for the writes that ran."""
        for call, r, e in zip(calls, results, expected):
            if e.runs and call.name in WRITES:
                entry = self.ledger[self.key(rec, call)[0]]
                if entry.status == "completed":
                    entry.content = r.content

    def settle(self, rec: TurnRec, calls: list[toolwire.ToolCall], results: list[toolwire.ToolResult]) -> None:
        """After a dispatch that returned: the dispatcher's memory of answered instances."""
        for call, r in zip(calls, results):
            if r.kind not in NOT_REMEMBERED:
                inst = self.instance(rec, call)
                self.memory[inst] = (call.name, r.kind, r.content)

    def ledger_rows(self) -> Counter:
        rows = Counter(e.status for e in self.ledger.values())
        rows["started"] += len(self.consumed)  # a consumed approval is a claim that is never completed
        return rows


# ---- the machine -----------------------------------------------------------------------------------------------

calls_st = st.lists(st.tuples(st.sampled_from(WRITES + WRITES + (READ,)), st.sampled_from(ITEMS)),
                    min_size=1, max_size=3)
modes_st = st.sampled_from(["sync", "async"])
crash_st = st.sampled_from([None, None, "dies", "ledger_fails"])


class ConversationMachine(RuleBasedStateMachine):
    """Conversations whose policy allows every call."""

    approval_policy = False

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="toolwire-conv-", dir=RAM_DIR))
        self.path = self.dir / "ledger.db"
        self.app = App()
        self.ledger: CrashableLedger | None = None
        self.dispatcher: Dispatcher | None = None
        self.convs: list[Conv] = []
        self.counter = itertools.count()
        self.crashed: list[tuple[Conv, str, str]] = []  # writes whose completion was never recorded

    # ---- setup ---------------------------------------------------------------------------------------------
    @initialize(keyed=st.sets(st.sampled_from(WRITES)), one_dialect=st.booleans(), dialect=st.sampled_from(PROVIDERS),
                broken_server=st.sampled_from([False, False, False, True]), loop_turn_ids=st.booleans())
    def setup(self, keyed, one_dialect, dialect, broken_server, loop_turn_ids):
        self.keyed = frozenset(keyed)
        self.one_dialect = dialect if one_dialect else None
        self.broken_server = broken_server
        self.model = Model(self.keyed, self.approval_policy)
        self.registry = self.app.registry(self.keyed)
        note(f"keyed={sorted(keyed)} dialect={self.one_dialect} broken={broken_server}")
        self._start()
        self.convs.append(Conv("conv-0", dialect, loop_turn_ids))

    def _make_dispatcher(self, ttl: float | None = None) -> Dispatcher:
        kw = {} if ttl is None else {"approval_ttl": ttl}
        return Dispatcher(self.registry, ledger=self.ledger, approval_secret=SECRET,
                          policy=writes_need_approval if self.model.approvals else None, **kw)

    def _start(self) -> None:
        """Start (or restart) the process: a new ledger connection on the same file, a new dispatcher; the
        application keeps only what it stored: bytes, turn ids, approval tokens."""
        if self.ledger is not None:
            self.ledger.close()
        self.ledger = CrashableLedger(self.path)
        self.dispatcher = self._make_dispatcher()
        self.model.restart()
        for conv in self.convs:
            for rec in conv.turns:
                rec.turn = None

    def teardown(self) -> None:
        if self.ledger is not None:
            self.ledger.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # ---- dispatching ---------------------------------------------------------------------------------------
    def _dispatch(self, rec: TurnRec, *, mode: str, approvals: list[Approval], crash: str | None,
                  reparse: bool = False) -> list[Expect | None]:
        """Dispatch ``rec`` as the application does, check everything about that one dispatch, and return what
        the model expected."""
        if rec.turn is None or reparse:
            rec.turn = toolwire.parse(rec.conv.dialect, rec.data)
        turn = rec.turn
        calls = turn.choice_calls(rec.choice)
        assert [(c.call_id, c.name, c.args) for c in calls] == [
            (cid, name, {"item": item}) for cid, name, item in rec.specs[rec.choice]]
        if len(rec.specs) > 1:
            # only one choice of a turn identity ever runs (a broken server's reused response id makes two
            # responses one turn): another choice is refused before anything of it is looked at
            held = self.model.choices.setdefault((rec.conv.id, rec.ident), rec.choice)
            if held != rec.choice:
                return self._refused_choice(rec, turn, mode, approvals, held)
        expected, crashed_at = self.model.predict(rec, calls, approvals, crash)
        note(f"dispatch {rec.tag} ident={rec.ident} choice={rec.choice} {mode} crash={crash} "
             f"calls={[(c.local_id, c.call_id, c.name, c.args['item']) for c in calls]} "
             f"approvals={len(approvals)} expected={[e and (e.kind.value, e.runs) for e in expected]}")
        self.ledger.crash = crash
        self.ledger.fired = None
        self.app.current = rec.tag
        self.app.runs = []
        effects_before = len(self.app.effects)
        kw: dict[str, Any] = {"conversation_id": rec.conv.id, "choice": rec.choice, "approvals": approvals}
        if rec.turn_id is not None:
            kw["turn_id"] = rec.turn_id
        results = None
        try:
            if mode == "sync":
                results = self.dispatcher.run(turn, **kw)
            else:
                results = asyncio.run(self.dispatcher.arun(turn, **kw))
        except ProcessDied:
            pass
        finally:
            self.ledger.crash = None
            self.app.current = None
        for e in expected:
            if e is not None:
                event(f"answer: {e.kind.value}{' (ran)' if e.runs else ''}")
        if crashed_at is not None:
            event(f"crash: {crash}")
        runs = Counter(self.app.runs)
        expected_runs = Counter((c.name, c.args["item"]) for c, e in zip(calls, expected) if e and e.runs)
        # the handlers that ran are exactly the ones the documented rules allow, and only the chosen choice's
        assert runs == expected_runs, (runs, expected_runs)
        chosen = Counter((c.name, c.args["item"]) for c in calls)
        assert not runs - chosen
        new_effects = self.app.effects[effects_before:]
        assert all(e[:2] == rec.tag for e in new_effects)

        if crashed_at is not None:
            call = calls[crashed_at]
            self.crashed.append((rec.conv, call.name, call.args["item"]))
            assert self.ledger.fired == crash
        else:
            assert self.ledger.fired is None
        if crash == "dies" and crashed_at is not None:
            # the process died after the effect: no results reached the application; it restarts
            assert results is None
            rec.results = None
            self._start()
            return expected
        assert results is not None
        self.model.stored(rec, calls, results, expected)
        self._check_results(rec, calls, results, expected)
        self.model.settle(rec, calls, results)
        rec.results = results
        rec.pending = [r.approval for r in results if r.kind is K.APPROVAL_REQUIRED]
        return expected

    def _refused_choice(self, rec: TurnRec, turn: toolwire.Turn, mode: str, approvals: list[Approval],
                        held: int) -> list[Expect]:
        note(f"dispatch {rec.tag} ident={rec.ident} choice={rec.choice} {mode}: choice {held} was dispatched")
        event("choice refused")
        kw: dict[str, Any] = {"conversation_id": rec.conv.id, "choice": rec.choice, "approvals": approvals}
        if rec.turn_id is not None:
            kw["turn_id"] = rec.turn_id
        self.app.runs = []
        effects_before = len(self.app.effects)
        try:
            if mode == "sync":
                self.dispatcher.run(turn, **kw)
            else:
                asyncio.run(self.dispatcher.arun(turn, **kw))
        except toolwire.ChoiceError as exc:
            assert (exc.choice, exc.dispatched) == (rec.choice, held)
        else:
            raise AssertionError(f"choice {rec.choice} was dispatched after choice {held} of the same turn")
        assert not self.app.runs and len(self.app.effects) == effects_before
        rec.results = None
        rec.pending = []
        return [Expect(K.NOT_RUN) for _ in rec.specs[rec.choice]]

    def _check_results(self, rec: TurnRec, calls: list[toolwire.ToolCall], results: list[toolwire.ToolResult],
                       expected: list[Expect]) -> None:
        # one answer per call of the chosen choice, in call order, under the call's own ids
        assert [(r.local_id, r.call_id, r.name) for r in results] == [(c.local_id, c.call_id, c.name) for c in calls]
        assert len({r.local_id for r in results}) == len(results)
        assert [r.kind for r in results] == [e.kind for e in expected], \
            ([r.kind.value for r in results], [e.kind.value for e in expected])
        for r, e in zip(results, expected):
            assert r.is_error is (r.kind is not K.OK)
            if e.has_content:  # answered from the ledger or the dispatcher's record: the first answer's content
                assert r.content == e.content(), (r.content, e.content())
            if r.kind is K.APPROVAL_REQUIRED:
                assert r.approval is not None and r.approval.local_id == r.local_id
        # no handler ran for a call whose answer says nothing ran
        ran = Counter((c.name, c.args["item"]) for c, r in zip(calls, results) if r.kind in RAN)
        assert not Counter(self.app.runs) - ran
        # the history answers exactly the dispatched calls, once each, after the dispatched choice's message
        if results:
            msgs = toolwire.history_messages(rec.turn, results)
            replayed, answers = adapter(rec.conv.dialect).replayed_and_answered(msgs)
            assert len(replayed) == len(answers) == len(calls)
            assert [ref for ref, _ in answers] == [ref for ref, _ in replayed]
            for (ref, name), (aref, aname), call in zip(replayed, answers, calls):
                assert name == call.name and aname in (None, call.name)
                if call.call_id is not None:
                    assert ref == call.call_id
            ids = [ref for ref, _ in replayed if ref is not None]
            assert len(set(ids)) == len(ids)

    def _conv(self, data: st.DataObject) -> Conv:
        return data.draw(st.sampled_from(self.convs), label="conversation")

    def _new_turn(self, conv: Conv, data: st.DataObject, choices: list[list[tuple[str, str]]], choice: int,
                  id_mode: str) -> TurnRec:
        """A new model response in ``conv`` (the next position) carrying ``choices``."""
        index = len(conv.turns)
        n = next(self.counter)
        k = itertools.count()
        specs: list[list[Spec]] = []
        for calls in choices:
            specs.append([({"none": None, "reused": f"call_{next(k)}", "unique": f"call_{n}_{next(k)}"}[id_mode],
                           name, item) for name, item in calls])
        rid_modes = ["none", "unique"] + (["reused"] if self.broken_server and conv.turns else [])
        if not adapter(conv.dialect).response_ids:  # its bodies carry none: the application passes turn_id
            rid_modes = ["none"]
        rid_mode = data.draw(st.sampled_from(rid_modes), label="response id")
        broken = False
        if rid_mode == "none":
            response_id = None
        elif rid_mode == "unique":
            response_id = f"resp_{n}"
        else:  # a broken server sends a new response under an earlier response's id
            response_id = next((t.response_id for t in reversed(conv.turns) if t.response_id), None) or f"resp_{n}"
            broken = any(t.response_id == response_id for t in conv.turns)
        turn_id = str(index) if response_id is None or conv.loop_turn_ids else None
        wire = [[(cid, name, {"item": item}) for cid, name, item in calls] for calls in specs]
        if len(wire) > 1:
            raw = choices_body(conv.dialect, wire, response_id=response_id)
        else:
            raw = body(conv.dialect, wire[0], response_id=response_id)
        rec = TurnRec(conv=conv, index=index, data=raw, response_id=response_id, turn_id=turn_id, choice=choice,
                      specs=specs, broken=broken and turn_id is None)
        event(f"turn: {conv.dialect}")
        event(f"turn: call ids {id_mode}, response id {rid_mode}" + (", turn_id given" if turn_id is not None else ""))
        if len(specs) > 1:
            event(f"turn: {len(specs)} choices, choice {choice} dispatched")
        if rec.broken:
            event("turn: a response id reused by a broken server")
        conv.turns.append(rec)
        return rec

    def _tokens(self, conv: Conv, rec: TurnRec, which: str) -> list[Approval]:
        if which == "turn":
            return list(rec.tokens)
        if which == "conversation":  # every token the application holds, other turns' too
            return [a for t in conv.turns for a in t.tokens]
        return []

    # ---- rules ---------------------------------------------------------------------------------------------
    @precondition(lambda self: len(self.convs) < 3)
    @rule(dialect=st.sampled_from(PROVIDERS), loop_turn_ids=st.booleans())
    def open_conversation(self, dialect, loop_turn_ids):
        self.convs.append(Conv(f"conv-{len(self.convs)}", self.one_dialect or dialect, loop_turn_ids))

    @rule(data=st.data(), calls=calls_st, id_mode=st.sampled_from(["none", "unique", "reused"]), mode=modes_st,
          crash=crash_st, tokens=st.sampled_from(["none", "conversation"]))
    def model_turn_arrives(self, data, calls, id_mode, mode, crash, tokens):
        """A model response arrives and the application dispatches it."""
        conv = self._conv(data)
        choices, choice = [calls], 0
        if conv.dialect in MULTI_CHOICE and data.draw(st.booleans(), label="several choices"):
            # n > 1 (Chat) or two candidates (Gemini): the application dispatches one of them
            other = data.draw(calls_st, label="other choice")
            choice = data.draw(st.sampled_from([0, 0, 1]), label="choice")
            choices = [calls, other] if choice == 0 else [other, calls]
        keys_before = {(e[0], e[2], e[3]) for e in self.app.effects}
        rec = self._new_turn(conv, data, choices, choice, id_mode)
        approvals = self._tokens(conv, rec, tokens)
        expected = self._dispatch(rec, mode=mode, approvals=approvals, crash=crash)
        if rec.broken or self.model.approvals:
            return
        # a legitimate later identical write runs: a new turn is a new call instance; only a write whose tool
        # names its own idempotency key, already used in this conversation, is not run again
        for (cid, name, item), e in zip(rec.specs[rec.choice], expected):
            if e is None or name == READ:
                continue
            if name not in self.keyed:
                assert e.runs, (name, item)
            elif (conv.id, name, item) in keys_before:
                assert not e.runs and Counter(self.app.effects)[(*rec.tag, name, item)] == 0

    @precondition(lambda self: any(c.turns for c in self.convs))
    @rule(data=st.data(), mode=modes_st, restart=st.booleans(), reparse=st.booleans(),
          tokens=st.sampled_from(["none", "turn", "conversation"]), crash=crash_st, last=st.booleans())
    def dispatch_again(self, data, mode, restart, reparse, tokens, crash, last):
        """The application dispatches a turn again (the last one, or an earlier one): the same Turn object or
        the same bytes, in the same process or after a restart."""
        conv = data.draw(st.sampled_from([c for c in self.convs if c.turns]), label="conversation")
        rec = conv.turns[-1] if last else data.draw(st.sampled_from(conv.turns), label="turn")
        if restart:
            self._start()
        # settled: every call was answered by a dispatch that returned, and no other response shares the turn's
        # identity (a broken server's reused response id makes them one turn, documented)
        settled = (rec.results is not None and not any(t.broken and t.ident == rec.ident for t in conv.turns)
                   and all(r.kind is not K.APPROVAL_REQUIRED for r in rec.results))
        event(f"dispatch again: {'after a restart' if restart else 'same process'}, "
              f"{'settled' if settled else 'unsettled'} turn, tokens {tokens}")
        before = len(self.app.effects)
        self._dispatch(rec, mode=mode, approvals=self._tokens(conv, rec, tokens), crash=crash, reparse=reparse)
        if settled:
            # every write of this turn was answered before (ran, or was found in the ledger): nothing new runs
            assert len(self.app.effects) == before

    @precondition(lambda self: bool(self.crashed))
    @rule(data=st.data(), mode=modes_st, with_read=st.booleans())
    def model_replans_after_crash(self, data, mode, with_read):
        """After a crash between a write's effect and its record, the model (which never saw a result) asks for
        the same write again, under a new call id, in a new turn."""
        conv, name, item = data.draw(st.sampled_from(self.crashed), label="crashed write")
        calls = [(name, item)] + ([(READ, item)] if with_read else [])
        rec = self._new_turn(conv, data, [calls], 0, data.draw(st.sampled_from(["none", "unique"]), label="ids"))
        before = Counter(self.app.effects)
        [e, *_] = self._dispatch(rec, mode=mode, approvals=[], crash=None)
        event(f"re-plan: {'keyed' if name in self.keyed else 'unkeyed'}"
              + (" (approval policy)" if self.model.approvals else ""))
        if self.model.approvals or rec.broken:
            return
        if name in self.keyed:
            # the tool's own key joins the re-planned call to the crashed one, whose record stays `started`: the
            # outcome is unknown, and it does not run again
            assert not e.runs and e.kind is K.OUTCOME_UNKNOWN
            assert rec.results[0].kind is e.kind
            assert Counter(self.app.effects) == before
        else:
            # without an idempotency_key the re-planned call is a new call instance (a new turn, a new call id):
            # nothing tells the dispatcher it is the same action as the crashed one rather than a deliberate
            # repeat, so it runs again. That is why writes that must not repeat across re-plans name a key.
            assert e.runs and rec.results[0].kind is K.OK
            assert Counter(self.app.effects)[(*rec.tag, name, item)] == 1

    @precondition(lambda self: self.model.approvals and any(t.pending for c in self.convs for t in c.turns))
    @rule(data=st.data(), mode=modes_st, expiring=st.sampled_from([False, False, True]), reparse=st.booleans(),
          crash=crash_st)
    def approve_and_dispatch(self, data, mode, expiring, reparse, crash):
        """A person approves some of a turn's pending calls; the application dispatches the turn with the
        tokens. ``expiring``: the tokens come from a dispatcher with a tiny approval_ttl, expired on use."""
        rec = data.draw(st.sampled_from([t for c in self.convs for t in c.turns if t.pending]), label="turn")
        chosen = data.draw(st.lists(st.sampled_from(rec.pending), min_size=1, unique_by=lambda r: r.local_id),
                           label="approved")
        approver = self._make_dispatcher(ttl=1e-9) if expiring else self.dispatcher
        calls = {c.local_id: c for c in toolwire.parse(rec.conv.dialect, rec.data).choice_calls(rec.choice)}
        fresh = []
        for request in chosen:
            token = approver.approve(request, approver="ana")
            call = calls[request.local_id]
            self.model.tokens[token.signature] = (self.model.instance(rec, call), call.name, expiring)
            fresh.append(token)
        rec.tokens.extend(fresh)
        before = len(self.app.effects)
        event(f"approval: {'expired' if expiring else 'granted'}")
        if expiring:
            expected = self._dispatch(rec, mode=mode, approvals=fresh, crash=None, reparse=reparse)
            # an expired approval runs nothing
            assert len(self.app.effects) == before
            assert all(not e.runs for e, c in zip(expected, calls.values()) if c.name in WRITES)
        else:
            self._dispatch(rec, mode=mode, approvals=fresh, crash=crash, reparse=reparse)
            # an approval runs at most its own call, once
            approved = Counter((c.name, c.args["item"]) for c in calls.values()
                               if c.local_id in {r.local_id for r in chosen})
            assert not Counter((e[2], e[3]) for e in self.app.effects[before:]) - approved

    @rule()
    def restart(self):
        """The process restarts: a new dispatcher and ledger connection on the same file."""
        self._start()

    # ---- invariants, after every step ----------------------------------------------------------------------
    @invariant()
    def each_write_instance_has_at_most_one_effect(self):
        per_instance = Counter(self.app.effects)
        for (conv_id, index, name, item), n in per_instance.items():
            conv = next(c for c in self.convs if c.id == conv_id)
            rec = conv.turns[index]
            calls = [s for s in rec.specs[rec.choice] if (s[1], s[2]) == (name, item)]
            assert n <= len(calls), (conv_id, index, name, item, n)

    @invariant()
    def a_keyed_write_has_one_effect_per_key(self):
        per_key = Counter((c, name, item) for c, _, name, item in self.app.effects if name in self.keyed)
        assert all(n == 1 for n in per_key.values()), per_key

    @invariant()
    def approved_writes_only(self):
        """Under the approval policy every effect is of a call instance a person approved (with a token that had
        not expired), and at most one effect per approved instance."""
        if not self.model.approvals:
            return
        approved: set[tuple] = set()  # (instance, tool) the application holds a valid token for
        for conv in self.convs:
            for rec in conv.turns:
                for a in rec.tokens:
                    inst, tool, expired = self.model.tokens[a.signature]
                    if not expired:
                        approved.add((inst, tool))
        effects: Counter = Counter()
        for conv_id, index, name, item in self.app.effects:
            rec = next(c for c in self.convs if c.id == conv_id).turns[index]
            effects[(conv_id, rec.ident, name, item)] += 1
        for (conv_id, ident, name, item), n in effects.items():
            instances = {inst for inst, tool in approved if tool == name and inst[:2] == (conv_id, ident)
                         and inst[-1] == item}
            assert n <= len(instances), (conv_id, ident, name, item, n)

    @invariant()
    def ledger_file_matches_the_model(self):
        with sqlite3.connect(self.path) as conn:
            rows = Counter(dict(conn.execute(
                "SELECT status, count(*) FROM toolwire_ledger WHERE call_key NOT LIKE 'choice:%' GROUP BY status")))
        conn.close()
        assert rows == self.model.ledger_rows(), (rows, self.model.ledger_rows())

    @invariant()
    def one_effect_per_ledger_key(self):
        # a write runs only after claiming a new ledger key, so effects and the model's keys agree one to one
        assert len(self.app.effects) == len(self.model.ledger)

class ApprovalConversationMachine(ConversationMachine):
    """The same conversations under a policy that makes every write wait for a person's approval."""

    approval_policy = True


ConversationMachine.TestCase.settings = MACHINE_SETTINGS
ApprovalConversationMachine.TestCase.settings = MACHINE_SETTINGS
TestConversations = ConversationMachine.TestCase
TestConversationsWithApprovals = ApprovalConversationMachine.TestCase
