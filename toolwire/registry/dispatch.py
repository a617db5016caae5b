"""The dispatcher: decides which calls of a turn run, runs them, and answers every call exactly once.

Only one choice of a turn is dispatched (``choice=0`` unless the caller picks another; the results answer
exactly that choice's calls), and only when that choice ended cleanly. Of a response with several choices, the
first choice dispatched is claimed in the ledger under its turn identity (``LedgerKey.for_choice``): another choice
of it is refused with ``ChoiceError`` before anything runs, by any dispatcher sharing the ledger. Order for each
of its calls:

0. A turn (choice) that did not finish cleanly (an error, a cut, ``length``/``max_tokens``, ``content_filter``,
   data after the stream's terminator): every call is answered ``not_run`` and nothing runs
   (``allow_unclean=True`` opts out for the calls that are still whole). A truncated or errored call is
   ``not_run`` in any turn. A call handed over already dispatched or answered is refused by the state table
   (``InvalidTransition``) before anything of the turn runs. A call instance this dispatcher already answered
   is answered again from its record (nothing runs): the last ``_REMEMBERED`` (4,096) answers, in memory (a read
   answered longer ago runs again; a write's ledger record answers it).
1. Exact-name lookup in the frozen registry: unknown → ``unknown_tool`` (the message lists the available names),
   nothing runs, nothing is written to the ledger.
2. Arguments that did not parse, or fail the tool's schema → ``invalid_arguments`` with path and reason.
3. A write with a record in the ledger (it ran before: a restart, a re-run step, an answer this dispatcher no
   longer remembers) is answered by it, ``completed`` with the stored result and ``started`` with
   ``outcome_unknown``; the policy is not asked (looked up only when there is a policy: without one the write's
   claim finds the same record). Then the policy → allow / deny (``denied``) / needs approval (``approval_required`` with a signed ``ApprovalRequest``,
   unless a verified ``Approval`` for exactly this call and these arguments is passed in ``approvals``).
4. Effects. Reads: retried on handler exceptions (``read_retries``, with ``backoff``), then ``handler_failed``;
   a timeout is ``handler_timeout``. Writes: never re-run automatically. The ledger records ``started`` before the
   handler (after the state table allowed the dispatch) and ``completed`` with the result after; a key found
   ``completed`` is answered with the stored result (nothing runs), one found ``started`` only with
   ``outcome_unknown`` (nothing runs); a ledger that cannot read or claim (down, locked past its timeout) runs
   nothing and answers the write ``outcome_unknown``, since whether it ran before cannot be checked (a ledger
   answer that is not a ``LedgerRecord`` counts as a failed ledger). A write that raised may have taken effect
   first: ``outcome_unknown`` (recorded as its completed outcome, so it is not re-run and a replay says the
   same), unless the exception is a ``HandlerNotStarted`` (``handler_failed``: nothing began); one that timed
   out, or raised ``OutcomeUnknown``, is ``outcome_unknown`` and its entry stays ``started``. A handler's own
   ``CancelledError`` (it awaited something cancelled elsewhere) is a failure like any other; only a run
   cancelled from outside ends with ``CancelledError``. A write of a turn that did not finish cleanly is answered
   by its record when it ran before (with ``allow_unclean``), else ``not_run``. A handler that raises ``ToolError`` answered: ``tool_error`` with the exception's content, never
   retried, and recorded as a write's completed outcome (``OutcomeUnknown`` in a read is an exception like any
   other). The key is the call *instance* (see ``ledger``), or the tool's own ``idempotency_key``.
5. A value the handler returned that cannot be sent as JSON (nor as text), or ``Content`` that fails its checks
   (``_rich``), is ``result_unusable``; a write's ledger entry is completed with that result all the same.
   ``Content`` is checked and capped to ``max_result_bytes`` and kept typed in ``ToolResult.parts``.

Call instances: a turn is identified by the caller's ``turn_id`` (the loop passes the identity minted for the
model request, ``StepRecord.turn_id``), else by the provider's response id. A turn with neither is given a random identity the first time
this dispatcher sees that Turn object: dispatching the same object again finds its calls, but a restarted process
cannot, so pass ``turn_id`` when your provider sends no response id.

Reads of one turn run concurrently when every call that runs is a read; results always come back in call order
(docs/failure-modes.md 24). Each call is driven through the shared call state machine with ``CallRecord.resume``:
a rejected call fires ``reject`` then ``answer``, a run call ``dispatch`` then ``answer``; the transition table (not
this module) forbids dispatching a truncated or errored call and answering twice, by raising ``InvalidTransition``.

Handlers: sync handlers run on a pool of long-lived daemon threads when they have a timeout, or when reads run
concurrently (a thread cannot be killed: the call is answered when the timeout expires, and a thread stuck in a
handler is replaced by a new one); async handlers run under ``asyncio.wait_for`` (in ``run``, on a private
event loop in a daemon thread). "Not found" is an ``ok`` result the handler returns; "could not look" is an
exception the handler raises.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import heapq
import inspect
import os
import queue
import threading
import time
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, NamedTuple

import msgspec

from .. import _log, otel as _otel
from ..errors import UsageError
from ..statemachine.call import CallRecord
from ..statemachine.table import Trigger, next_state
from ..types import CallState, ToolCall, Transition, Turn
from .approval import (
    Approval,
    ApprovalRequest,
    Decision,
    PolicyContext,
    Signer,
    approval_targets,
    arguments_sha256,
    valid_verdict,
)
from . import _rich
from ._steps import Steps, adrive, drive
from .content import Content, HandlerNotStarted, OutcomeUnknown, ToolError
from .context import ToolContext, context_parameter
from .errors import ApprovalError, ChoiceError, LedgerError
from .ledger import Ledger, LedgerKey, LedgerRecord, MemoryLedger
from .registry import Registry
from .result import ResultKind, ToolResult
from .tool import ArgumentsInvalid, Tool

__all__ = ["Dispatcher", "Policy"]

Policy = Callable[[ToolCall, PolicyContext], Any]

K = ResultKind
_NOT_RUNNABLE = (CallState.TRUNCATED, CallState.ERRORED, CallState.ANNOUNCED, CallState.ACCUMULATING)
_HANDED_OVER = (CallState.DISPATCHED, CallState.REJECTED, CallState.ANSWERED)
#: results that are not final for their call instance: answered again by evaluating the call again
_NOT_REMEMBERED = frozenset({ResultKind.APPROVAL_REQUIRED, ResultKind.NOT_RUN})
DEFAULT_APPROVAL_TTL = 900.0
#: bytes of JSON a result may take before it is cut (with a marker saying so) for the model
DEFAULT_MAX_RESULT_BYTES = 1 << 20
_REMEMBERED = 4096
_MAX_LISTED_NAMES = 128
_BACKOFF_CAP = 8.0
_ASYNC_GRACE = 1.0  # extra seconds a sync run waits for an async handler's own wait_for to fire


class _Plan:
    """One call on its way through the dispatcher."""

    __slots__ = ("call", "rec", "tool", "value", "args_hash", "result", "attempts", "started", "instance", "key",
                 "fingerprint", "args", "flight", "waiting", "data", "span")

    def __init__(self, call: ToolCall) -> None:
        self.call = call
        self.rec: CallRecord | None = None
        self.tool: Tool | None = None
        self.value: Any = None
        self.args_hash = ""
        self.result: ToolResult | None = None
        self.attempts = 0
        self.started = time.perf_counter()
        self.instance: LedgerKey | None = None  # this call instance's key
        self.key: LedgerKey | None = None  # the ledger key a write claims (the instance, or the tool's own key)
        self.fingerprint = ""
        self.args: Any = None  # the dispatcher's own copy of the arguments (see _own_arguments)
        self.flight: _InFlight | None = None  # set while this plan is the one dispatch of its call instance
        self.waiting: _InFlight | None = None  # set when another dispatch of the same instance is in flight
        self.data: Any = None  # the application's ``data`` for this run (``ToolContext.data``)
        self.span: Any = None  # its OpenTelemetry span while it is dispatched (toolwire.otel)


class _InFlight:
    """One call instance being dispatched: later dispatches of the same instance wait for its answer.

    A bare lock held until the answer is published (lighter than a ``threading.Event``, and one is made for
    every call): ``set`` releases it once; ``wait`` returns once it was released."""

    __slots__ = ("_lock", "answered", "result", "claimed", "fingerprint")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()
        self.answered = False
        self.result: ToolResult | None = None
        #: the write's ledger key once this dispatch claimed it (its handler may then have run), and its
        #: fingerprint: a dispatch cut short after that leaves its waiters to the ledger's record
        self.claimed: LedgerKey | None = None
        self.fingerprint = ""

    def set(self) -> None:
        self.answered = True
        self._lock.release()

    def wait(self) -> None:
        with self._lock:  # given back at once: every waiter gets through
            pass


class _Get(NamedTuple):
    """A request of phase 1 (see ``_prepare``): the ledger's record of ``key`` (a claim is a ``(key,
    fingerprint)`` tuple)."""

    key: LedgerKey


class _Outcome:
    """What one handler invocation did: returned (``ok``), raised (``error``) or ran out of time (``timeout``)."""

    __slots__ = ("status", "value")

    def __init__(self, status: str, value: Any = None) -> None:
        self.status = status
        self.value = value


def _raised(outcome: _Outcome) -> _Outcome:
    """A ``ToolError`` or ``OutcomeUnknown`` a handler returned instead of raising counts as raised."""
    if outcome.status == "ok" and _is_instance(outcome.value, (ToolError, OutcomeUnknown)):
        return _Outcome("error", outcome.value)
    return outcome


def _checked(record: Any) -> LedgerRecord | None:
    """A ledger's answer, when it is one: None, or a ``LedgerRecord`` whose status, fingerprint and result have
    their types. Anything else (``False``, a ``dict``, a record whose result is a plain ``dict``, as a ledger
    storing JSON may give back) is a ``LedgerError``: the ledger failed, so nothing runs and a write that may have
    run is answered ``outcome_unknown``."""
    if record is None:
        return None
    if (isinstance(record, LedgerRecord) and record.status in ("started", "completed")
            and isinstance(record.fingerprint, str)
            and (record.result is None or isinstance(record.result, ToolResult))):
        return record
    raise LedgerError(f"the ledger answered with a {type(record).__name__}, not a LedgerRecord (status "
                      "'started' or 'completed', a str fingerprint, a ToolResult or None as result)")


def _is_instance(value: Any, types: type | tuple[type, ...]) -> bool:
    """``isinstance``, False for a value whose ``__class__`` raises (an unbound lazy proxy a handler returned)."""
    try:
        return isinstance(value, types)
    except Exception:  # noqa: BLE001
        return False


def _unchecked_write_text(name: str) -> str:
    return (f"{name} changes state and its idempotency ledger is unavailable, so whether it already ran (in an "
            "earlier dispatch of this call) cannot be checked: it may or may not have taken effect. Nothing was run "
            "now.")


def _short(text: object, limit: int = 100) -> str:
    s = str(text)
    return s if len(s) <= limit else s[:limit] + "…"


def _reason(exc: BaseException) -> str:
    """The reason an ``OutcomeUnknown`` gives, for the model: its text cut short; whatever the handler put there
    (a value whose ``str`` raises, text UTF-8 cannot encode), never an exception."""
    try:
        return _short(getattr(exc, "reason", exc), 300).encode("utf-8", "replace").decode("utf-8")
    except Exception:  # noqa: BLE001 - the write may have taken effect: its answer must not fail
        return "no reason could be read"


def _jsonable(value: Any, call: ToolCall, conversation_id: str) -> tuple[Any, bool]:
    """The handler's return value as JSON-able builtins (msgspec.to_builtins), else its ``str``; ``(None, False)``
    when neither can be encoded (a value that contains itself, an int too large for JSON or for ``str``, a
    ``__str__`` that raises, lone surrogates …)."""
    try:
        # through JSON and back: the content is exactly what will be sent (NaN and infinities become null)
        return msgspec.json.decode(msgspec.json.encode(msgspec.to_builtins(value))), True
    except Exception:  # noqa: BLE001 - whatever the value does, the call gets a typed result
        pass
    _log.emit(_log.WARNING, "dispatch.result_not_json", provider=call.provider, conversation_id=conversation_id,
              call_id=call.call_id, local_id=call.local_id, name=call.name, type=type(value).__name__)
    try:
        text = str(value)
        msgspec.json.encode(text)
        return text, True
    except Exception:  # noqa: BLE001
        return None, False


def _own_arguments(call: ToolCall) -> tuple[Any, str]:
    """A private copy of the call's arguments and the sha256 of their canonical JSON.

    The copy is decoded from ``raw_arguments``, the text the provider sent, which nothing can change: whatever a
    policy or a handler does to ``call.args`` (``args.setdefault(...)``, ``args["amount"] *= 100``), the next
    dispatch of the same call has the same key and the history replays what the model sent. A call built by
    hand whose text is not its argument object falls back to a copy of ``call.args``. For a custom tool or
    arguments that did not parse, the copy is None and the hash is the raw text's."""
    if call.args is not None:
        try:
            value = _json_decode(call.raw_arguments) if call.raw_arguments else None
        except (msgspec.DecodeError, RecursionError):
            value = None
        if not isinstance(value, dict):
            try:
                value = _json_decode(msgspec.json.encode(call.args))
            except Exception:  # noqa: BLE001 - a hand-built dict that is not JSON
                return call.args, arguments_sha256(call.raw_arguments)
        return value, arguments_sha256(value)
    return None, arguments_sha256(call.raw_arguments)


_json_decode = msgspec.json.decode


class Dispatcher:
    """Runs the calls of a turn through a registry (see the module docstring for the order of checks).

    ``ledger``: an idempotency ledger for writes (default: a ``MemoryLedger`` private to this dispatcher; pass a
    ``SQLiteLedger`` to be safe across processes and restarts; ``arun`` awaits its ``aclaim``/``acomplete`` when it
    has them, see ``AsyncLedger``, and runs its sync methods in a worker thread otherwise). ``policy``: ``policy(call, context)`` returning a
    ``Decision``, ``"allow"``/``"deny"``/``"needs_approval"`` or a bool; None allows every declared tool (a
    policy that raises denies). ``concurrent_reads``: run the reads of a turn in parallel when all calls that
    run are reads. ``read_retries``: extra attempts for a read whose handler raised. ``backoff``: seconds before
    retry n (0-based) as ``backoff * 2**n`` capped at 8 s, or a callable ``backoff(n) -> seconds``.
    ``approval_secret``: HMAC key for approval requests and tokens (default: random per dispatcher, so tokens
    do not outlive it; pass a stable secret of at least 16 bytes to approve across processes or restarts).
    ``approval_ttl``: seconds an ``Approval`` stays valid after ``approve`` (default 900: fifteen minutes);
    an expired one is ``approval_required`` again. ``max_result_bytes``: a handler's value whose JSON is larger
    is sent to the model cut to that size, as text ending with a marker that says so (default 1 MiB).
    ``max_workers``: the most reads of one turn under way at once when they run concurrently.
    """

    def __init__(self, registry: Registry, ledger: Ledger | None = None, policy: Policy | None = None, *,
                 concurrent_reads: bool = True, read_retries: int = 2,
                 backoff: float | Callable[[int], float] = 0.25, approval_secret: bytes | None = None,
                 approval_ttl: float = DEFAULT_APPROVAL_TTL, max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
                 max_workers: int = 8) -> None:
        if not isinstance(registry, Registry):
            raise UsageError(f"Dispatcher needs a Registry, got {type(registry).__name__}")
        if isinstance(read_retries, bool) or not isinstance(read_retries, int) or read_retries < 0:
            raise UsageError("read_retries must be an int >= 0")
        if isinstance(approval_ttl, bool) or not isinstance(approval_ttl, (int, float)) or not approval_ttl > 0:
            raise UsageError("approval_ttl must be a positive number of seconds")
        if ledger is not None and not isinstance(ledger, Ledger):
            raise UsageError(f"ledger must implement claim/complete/get, got {type(ledger).__name__}")
        if isinstance(max_result_bytes, bool) or not isinstance(max_result_bytes, int) or max_result_bytes < 256:
            raise UsageError("max_result_bytes must be an int >= 256")
        self.approval_ttl = float(approval_ttl)
        self.max_result_bytes = max_result_bytes
        # call instances this dispatcher answered (the last _REMEMBERED), and identities of id-less turns
        self._answered: OrderedDict[tuple[str, str], ToolResult] = OrderedDict()
        self._answered_lock = threading.Lock()
        self._in_flight: dict[tuple[str, str], _InFlight] = {}
        self._anonymous: dict[int, str] = {}
        self.registry = registry
        self.ledger: Ledger = ledger if ledger is not None else MemoryLedger()
        self.policy = policy
        self.concurrent_reads = concurrent_reads
        self.read_retries = int(read_retries)
        self.backoff = backoff
        self.max_workers = max(1, int(max_workers))
        self._signer = Signer(approval_secret if approval_secret is not None else os.urandom(32))
        # the handlers that ask for a ToolContext, and the parameter it goes to (the registry is frozen)
        self._context_params = {t.name: p for t in registry if (p := context_parameter(t.handler, t.name))}

    # ==== public API ===========================================================================================
    def run(self, turn: Turn, *, conversation_id: str, turn_id: str | None = None, choice: int = 0,
            approvals: Iterable[Approval] = (), allow_unclean: bool = False, data: Any = None) -> list[ToolResult]:
        """Answer every call of choice ``choice`` of ``turn``, in call order, running those that may run.

        ``turn_id``: identifies this model response in the conversation (unique per response, the same when the
        response is dispatched again, after a restart too); default: the provider's response id. It makes the
        ledger key of each call instance. ``choice``: which choice or candidate to dispatch (responses with
        ``n > 1``); the others are not answered. ``approvals``: tokens from ``approve`` for calls that need
        approval. ``allow_unclean``: run the whole calls of a turn that did not finish cleanly (default False:
        such a turn runs nothing). ``data``: any object of the application's, handed to the handlers that declare
        a ``ToolContext`` parameter as ``ToolContext.data`` (toolwire never reads it).
        """
        plans = drive(self._prepare(turn, conversation_id, turn_id, choice, approvals, allow_unclean),
                      self._ledger_request)
        for p in plans:
            p.data = data
        _otel.start(plans)
        try:
            self._run_plans(plans, conversation_id)
            for p in plans:
                if p.waiting is not None:
                    p.waiting.wait()
                    record, failure = None, None
                    if p.waiting.result is None and p.waiting.claimed is not None:
                        try:
                            record = _checked(self.ledger.get(p.waiting.claimed))
                        except Exception as exc:  # noqa: BLE001 - a ledger of the application's may raise anything
                            failure = exc
                    self._answer_waiting(p, record, failure)
        except BaseException as exc:
            _otel.abort(plans, exc)
            raise
        finally:
            self._release(plans)
        return self._finish(plans, conversation_id)

    def _run_plans(self, plans: list[_Plan], conversation_id: str) -> None:
        todo = [p for p in plans if p.result is None and p.waiting is None]
        if self._parallel(todo):
            # transitions fire on this thread; pool threads only run handlers
            for p in todo:
                self._dispatch(p)
            for p, result in zip(todo, self._read_concurrently(todo, conversation_id)):
                self._answer(p, result)
        else:
            for p in todo:
                if p.tool.effect == "read":
                    self._run_read(p, conversation_id)
                else:
                    self._run_write(p, conversation_id)

    async def arun(self, turn: Turn, *, conversation_id: str, turn_id: str | None = None, choice: int = 0,
                   approvals: Iterable[Approval] = (), allow_unclean: bool = False,
                   data: Any = None) -> list[ToolResult]:
        """The async twin of ``run``: async handlers are awaited, concurrent reads are gathered, and the ledger is
        awaited (its ``aclaim``/``acomplete`` when it has them, else its sync methods in a worker thread)."""
        plans = await adrive(self._prepare(turn, conversation_id, turn_id, choice, approvals, allow_unclean),
                             self._aledger_request)
        for p in plans:
            p.data = data
        _otel.start(plans)
        try:
            await self._arun_plans(plans, conversation_id)
            for p in plans:
                if p.waiting is not None:
                    if not p.waiting.answered:
                        await asyncio.to_thread(p.waiting.wait)
                    record, failure = None, None
                    if p.waiting.result is None and p.waiting.claimed is not None:
                        try:
                            record = _checked(await self._aledger("get", p.waiting.claimed))
                        except Exception as exc:  # noqa: BLE001 - a ledger of the application's may raise anything
                            failure = exc
                    self._answer_waiting(p, record, failure)
        except BaseException as exc:
            _otel.abort(plans, exc)
            raise
        finally:
            self._release(plans)
        return self._finish(plans, conversation_id)

    async def _arun_plans(self, plans: list[_Plan], conversation_id: str) -> None:
        todo = [p for p in plans if p.result is None and p.waiting is None]
        if self._parallel(todo):
            for p in todo:
                self._dispatch(p)
            outcomes = await asyncio.gather(*(self._aread_loop(p, conversation_id) for p in todo))
            for p, result in zip(todo, outcomes):
                self._answer(p, result)
        else:
            for p in todo:
                if p.tool.effect == "read":
                    await self._arun_read(p, conversation_id)
                else:
                    await self._arun_write(p, conversation_id)

    def approve(self, request: ApprovalRequest, *, approver: str) -> Approval:
        """Turn an ``ApprovalRequest`` this dispatcher issued into a signed ``Approval`` for exactly that call.

        Raises ``ApprovalError`` when the request was not issued by this dispatcher (or another sharing its
        secret), was altered, or its ``arguments`` do not match its hash.
        """
        if not isinstance(request, ApprovalRequest):
            raise ApprovalError(f"approve() takes an ApprovalRequest, got {type(request).__name__}",
                                reason="not_a_request")
        if not self._signer.request_valid(request):
            _log.emit(_log.WARNING, "dispatch.approval_invalid", conversation_id=request.conversation_id,
                      call_id=request.call_id, local_id=request.local_id, name=_short(request.name),
                      reason="bad_signature", where="approve")
            raise ApprovalError("approval request signature does not verify", reason="bad_signature")
        if arguments_sha256(request.arguments) != request.args_sha256:
            _log.emit(_log.WARNING, "dispatch.approval_invalid", conversation_id=request.conversation_id,
                      call_id=request.call_id, local_id=request.local_id, name=_short(request.name),
                      reason="arguments_mismatch", where="approve")
            raise ApprovalError("approval request arguments do not match their hash", reason="arguments_mismatch")
        now = time.time()
        token = Approval(conversation_id=request.conversation_id, call_id=request.call_id,
                         local_id=request.local_id, name=request.name, args_sha256=request.args_sha256,
                         approver=str(approver), issued_at=now, turn_id=request.turn_id,
                         expires_at=now + self.approval_ttl)
        token = msgspec.structs.replace(token, signature=self._signer.approval_mac(token))
        _log.emit(_log.INFO, "dispatch.approved", conversation_id=request.conversation_id, call_id=request.call_id,
                  local_id=request.local_id, name=request.name, approver=str(approver),
                  args_sha256=request.args_sha256)
        return token

    # ==== phase 1: decide, without running anything ===========================================================
    # Phase 1 is a step generator (see ``_steps``): it yields ledger requests, the claims that record the
    # dispatched choice or consume approvals, as ``(key, fingerprint)``, and the look-ups of writes' records
    # (``_Get``), and receives their answers; ``run`` answers them with the ledger's sync methods, ``arun`` by
    # awaiting ``_aledger``.
    def _ledger_request(self, request: tuple[LedgerKey, str] | _Get) -> LedgerRecord | None:
        if isinstance(request, _Get):
            return _checked(self.ledger.get(request.key))
        return _checked(self.ledger.claim(*request))

    async def _aledger_request(self, request: tuple[LedgerKey, str] | _Get) -> LedgerRecord | None:
        if isinstance(request, _Get):
            return _checked(await self._aledger("get", request.key))
        return _checked(await self._aledger("claim", *request))

    def _prepare(self, turn: Turn, conversation_id: str, turn_id: str | None, choice: int,
                 approvals: Iterable[Approval], allow_unclean: bool) -> Steps[list[_Plan]]:
        if not isinstance(conversation_id, str) or not conversation_id:
            raise UsageError("conversation_id must be a non-empty string")
        if not isinstance(turn, Turn):
            raise UsageError(f"run() takes a Turn (from toolwire.parse or StreamParser), got {type(turn).__name__}")
        if isinstance(choice, bool) or not isinstance(choice, int) or choice < 0:
            raise UsageError(f"choice must be an int >= 0, got {choice!r}")
        known = {c.index for c in turn.choices} | {c.choice for c in turn.calls} | {0}
        if choice not in known:
            raise UsageError(f"choice {choice} is not in this turn (choices: {sorted(known)})")
        tokens = self._tokens(approvals, conversation_id)
        ident = self._turn_identity(turn, turn_id, conversation_id)
        calls = [c for c in turn.calls if c.choice == choice]
        handed_over = [c for c in calls if c.state in _HANDED_OVER]
        for call in handed_over:
            # the table refuses it (logged as call.invalid_transition) before anything of the turn runs
            rec = CallRecord.resume(call)
            try:
                rec.dispatch()
            finally:
                rec.release()
        # a response with several choices: the first choice dispatched of its turn identity is the only one
        # that ever runs (recorded in the ledger, so across dispatchers, processes and restarts)
        choice_unchecked = (yield from self._claim_choice(turn, conversation_id, ident, choice)) \
            if len(known) > 1 else None
        plans = [_Plan(call) for call in calls]
        for p in plans:
            p.args, p.args_hash = _own_arguments(p.call)
            p.instance = LedgerKey.for_call(conversation_id, p.call, p.args_hash, turn=ident)
        clean = turn.choice_finished_cleanly(choice)
        if not clean and plans:
            _log.emit(_log.WARNING, "dispatch.unclean_turn", provider=turn.provider,
                      conversation_id=conversation_id,
                      finish_reason=turn.raw_finish_reason or (turn.finish_reason and turn.finish_reason.value),
                      error=turn.error.type if turn.error else None, calls=len(plans), allow_unclean=allow_unclean)
        try:
            for p in plans:
                call = p.call
                if choice_unchecked is not None:
                    tool = self.registry.get(call.name)
                    if tool is not None and tool.effect == "write":
                        # this choice may have been dispatched before, and its writes run: not "not run"
                        self._reject(p, K.OUTCOME_UNKNOWN, _unchecked_write_text(tool.name))
                    else:
                        self._reject(p, K.NOT_RUN, "Not run: whether another choice of this response was already "
                                                   "dispatched cannot be checked (the ledger is unavailable), so "
                                                   "nothing of this one was run.")
                    continue
                if not clean and not allow_unclean:
                    yield from self._unclean(p, turn, conversation_id)
                    continue
                if call.state in _NOT_RUNNABLE:
                    reason = call.problem.message if call.problem else call.state.value
                    p.result = self._result(call, K.NOT_RUN,
                                            f"Not run: the call was {call.state.value} ({reason}); nothing ran.")
                    continue
                before, p.waiting = self._claim_instance(p)
                if p.waiting is not None:
                    continue  # answered once the dispatch already in flight answers it (``_answer_waiting``)
                if before is not None:
                    _log.emit(_log.INFO, "dispatch.answered_before", provider=call.provider,
                              conversation_id=conversation_id, call_id=call.call_id, local_id=call.local_id,
                              name=_short(call.name), kind=before.kind.value)
                    self._dispatch(p)
                    self._answer(p, msgspec.structs.replace(before, call_id=call.call_id, local_id=call.local_id,
                                                            name=call.name, history=[]))
                    continue
                yield from self._prepare_call(p, turn, conversation_id, ident, tokens)
        except BaseException:
            self._release(plans)  # no later dispatch may wait for a plan that never runs
            raise
        return plans

    def _claim_choice(self, turn: Turn, conversation_id: str, ident: str, choice: int) -> Steps[BaseException | None]:
        """Claim ``choice`` as the dispatched choice of the turn ``ident``: the first claim wins. Raises
        ``ChoiceError`` when another choice holds the claim; returns the ledger's failure (then nothing of the turn
        runs), or None."""
        mine = f"choice:{choice}"
        try:
            record = yield LedgerKey.for_choice(conversation_id, ident), mine
        except Exception as exc:  # noqa: BLE001 - a ledger of the application's may raise anything
            _log.emit(_log.ERROR, "dispatch.ledger_error", provider=turn.provider, conversation_id=conversation_id,
                      call_id=None, local_id=None, name=None, op="choice",
                      error=f"{type(exc).__name__}: {_short(exc, 200)}")
            return exc
        if record is None or record.fingerprint == mine:
            return None
        held = record.fingerprint.removeprefix("choice:") if isinstance(record.fingerprint, str) else ""
        dispatched = int(held) if held.isdigit() and held.isascii() else None
        _log.emit(_log.WARNING, "dispatch.choice_refused", provider=turn.provider, conversation_id=conversation_id,
                  choice=choice, dispatched=dispatched)
        raise ChoiceError(f"choice {choice} of this response was not dispatched: "
                          + (f"choice {dispatched}" if dispatched is not None else "another choice")
                          + " of it was dispatched already, and only one choice of a response ever runs",
                          choice=choice, dispatched=dispatched)

    def _turn_identity(self, turn: Turn, turn_id: str | None, conversation_id: str) -> str:
        """What identifies ``turn`` among the conversation's model responses (the first part of its calls' keys)."""
        if turn_id is not None:
            if not isinstance(turn_id, str) or not turn_id:
                raise UsageError("turn_id must be a non-empty string (or None to use the response id)")
            return "turn:" + turn_id
        if turn.response_id:
            return "response:" + turn.response_id
        key = id(turn)
        with self._answered_lock:  # two threads dispatching one Turn must agree on its identity
            ident = self._anonymous.get(key)
            minted = ident is None
            if minted:
                ident = self._anonymous[key] = "anonymous:" + uuid.uuid4().hex
                weakref.finalize(turn, self._anonymous.pop, key, None)
        if minted:
            _log.emit(_log.WARNING, "dispatch.turn_unidentified", provider=turn.provider,
                      conversation_id=conversation_id, calls=len(turn.calls))
        return ident

    def _claim_instance(self, p: _Plan) -> tuple[ToolResult | None, _InFlight | None]:
        """Atomically: the answer this dispatcher already gave the call instance, or the dispatch of it still in
        flight (in another thread, task or run), or nothing, and then ``p`` is that dispatch."""
        key = (p.instance.conversation_id, p.instance.call_key)
        with self._answered_lock:
            result = self._answered.get(key)
            if result is not None:
                self._answered.move_to_end(key)
                return result, None
            flight = self._in_flight.get(key)
            if flight is not None:
                return None, flight
            p.flight = self._in_flight[key] = _InFlight()
            return None, None

    def _publish(self, p: _Plan) -> None:
        """``p`` has its answer: remember it (when final) and release the dispatches waiting for it."""
        flight = p.flight
        if flight is None:
            return
        p.flight = None
        key = (p.instance.conversation_id, p.instance.call_key)
        with self._answered_lock:
            if p.result is not None and p.result.kind not in _NOT_REMEMBERED:
                self._answered[key] = p.result
                while len(self._answered) > _REMEMBERED:
                    self._answered.popitem(last=False)
            if self._in_flight.get(key) is flight:
                del self._in_flight[key]
        flight.result = p.result
        flight.set()

    def _release(self, plans: list[_Plan]) -> None:
        """Whatever happened, no later dispatch waits for a plan of this one (its answer, or None)."""
        for p in plans:
            self._publish(p)

    def _answer_waiting(self, p: _Plan, record: LedgerRecord | None, failure: BaseException | None) -> None:
        """Answer ``p`` with the answer of the dispatch of the same instance that was in flight. That dispatch cut
        short (cancelled, interrupted) after it claimed its write left ``record``, the write's ledger record read
        since (or the ledger's ``failure``): its stored result when completed, else ``outcome_unknown``, never
        "nothing ran"."""
        flight = p.waiting
        other = flight.result
        call = p.call
        self._dispatch(p)
        if other is None and flight.claimed is not None:
            if failure is None and record is not None and record.status == "completed" \
                    and record.result is not None and record.fingerprint in ("", flight.fingerprint):
                other = record.result
            else:
                _log.emit(_log.WARNING, "dispatch.outcome_unknown", provider=call.provider,
                          conversation_id=p.instance.conversation_id, call_id=call.call_id, local_id=call.local_id,
                          name=_short(call.name), reason="waited_dispatch_cut_short")
                self._answer(p, self._result(call, K.OUTCOME_UNKNOWN, (
                    f"{_short(call.name)} was started by another dispatch of this same call that did not finish: "
                    "it may or may not have taken effect. It was not run again; check before retrying.")))
                return
        if other is None:
            self._answer(p, self._result(call, K.NOT_RUN, "Not run: another dispatch of this same call was in "
                                                          "progress and did not finish; nothing ran here."))
            return
        _log.emit(_log.INFO, "dispatch.answered_before", provider=call.provider,
                  conversation_id=p.instance.conversation_id, call_id=call.call_id, local_id=call.local_id,
                  name=_short(call.name), kind=other.kind.value)
        self._answer(p, msgspec.structs.replace(other, call_id=call.call_id, local_id=call.local_id,
                                                name=call.name, history=[]))

    def _prepare_call(self, p: _Plan, turn: Turn, conversation_id: str, ident: str,
                      tokens: list[Approval]) -> Steps[None]:
        call = p.call
        # 1. exact-name lookup (no normalisation): a hallucinated wrapper is just an unknown tool
        tool = self.registry.get(call.name)
        if tool is None:
            names = self.registry.names
            listed = ", ".join(names[:_MAX_LISTED_NAMES]) + (", …" if len(names) > _MAX_LISTED_NAMES else "")
            label = repr(call.name) if call.name else "(no name)"
            _log.emit(_log.WARNING, "dispatch.unknown_tool", provider=call.provider,
                      conversation_id=conversation_id, call_id=call.call_id, local_id=call.local_id,
                      name=_short(call.name))
            self._reject(p, K.UNKNOWN_TOOL,
                         f"Unknown tool {label}: no tool of that exact name exists, nothing was run. "
                         f"Available tools: {listed or '(none)'}.")
            return
        p.tool = tool
        # 2. arguments (a custom tool takes the text; every other tool a JSON object)
        if tool.kind == "custom" and call.args is None and call.problem is None:
            try:
                p.value = tool.validate(call.raw_arguments)
            except ArgumentsInvalid as exc:  # text outside the tool's declared format
                _log.emit(_log.INFO, "dispatch.invalid_arguments", provider=call.provider,
                          conversation_id=conversation_id, call_id=call.call_id, local_id=call.local_id,
                          name=tool.name, path=exc.path, problem="format")
                self._reject(p, K.INVALID_ARGUMENTS, f"Invalid input for {tool.name}: {exc.message}. Nothing was "
                             "run; send the call again with text in the tool's format.")
                return
        elif call.args is None:
            detail = call.problem.message if call.problem else "no argument object"
            _log.emit(_log.INFO, "dispatch.invalid_arguments", provider=call.provider,
                      conversation_id=conversation_id, call_id=call.call_id, local_id=call.local_id, name=tool.name,
                      path="$", problem=call.problem.code.value if call.problem else None)
            self._reject(p, K.INVALID_ARGUMENTS,
                         f"Invalid arguments for {tool.name}: the arguments are not a JSON object ({detail}) "
                         "- at `$`. Nothing was run; send the call again with a valid JSON object.")
            return
        else:
            try:
                p.value = tool.validate(p.args)
            except ArgumentsInvalid as exc:
                _log.emit(_log.INFO, "dispatch.invalid_arguments", provider=call.provider,
                          conversation_id=conversation_id, call_id=call.call_id, local_id=call.local_id,
                          name=tool.name, path=exc.path, problem="schema")
                if _log.LOG_ARGUMENTS:
                    # validators quote the offending values: only when the application opted in to argument logs
                    _log.emit(_log.DEBUG, "dispatch.invalid_arguments_detail", provider=call.provider,
                              conversation_id=conversation_id, call_id=call.call_id, local_id=call.local_id,
                              name=tool.name, message=exc.message)
                self._reject(p, K.INVALID_ARGUMENTS,
                             f"Invalid arguments for {tool.name}: {exc.message}. Nothing was run; "
                             "correct the arguments and call again.")
                return
        if not self._set_key(p, tool, conversation_id):
            return
        # 3. a write that ran before (after a restart, or once this dispatcher forgot its answer) is answered by
        # its ledger record: the policy decides only calls that have not run. Without a policy every call is
        # allowed and the write's claim finds the same record, so nothing is looked up here.
        if tool.effect == "write" and self.policy is not None:
            try:
                record = yield _Get(p.key)
            except Exception as exc:  # noqa: BLE001 - a ledger of the application's may raise anything
                self._ledger_failed(p, conversation_id, "read", exc)
                return
            if record is not None and (not record.fingerprint or record.fingerprint == p.fingerprint):
                self._dispatch(p)
                self._write_claimed(p, conversation_id, record, None)  # answers p: stored result or outcome_unknown
                return
        # 4. authorization: only the policy's decision, and a verified approval, let a call run
        decision = self._decide(call, tool, turn, conversation_id)
        if decision.verdict == "deny":
            _log.emit(_log.INFO, "dispatch.denied", provider=call.provider, conversation_id=conversation_id,
                      call_id=call.call_id, local_id=call.local_id, name=tool.name, reason=decision.reason)
            self._reject(p, K.DENIED, f"Denied: {tool.name} may not run here"
                         + (f" ({decision.reason})." if decision.reason else ".") + " Nothing was run.")
            return
        if decision.verdict == "needs_approval" \
                and not (yield from self._approved(p, conversation_id, ident, tokens)):
            if p.result is not None:  # the approval could not be checked (ledger unavailable)
                return
            request = ApprovalRequest(conversation_id=conversation_id, call_id=call.call_id,
                                      local_id=call.local_id, name=tool.name, args_sha256=p.args_hash,
                                      arguments=p.args if tool.kind != "custom" else call.raw_arguments,
                                      reason=decision.reason, turn_id=ident)
            request = msgspec.structs.replace(request, signature=self._signer.request_mac(request))
            _log.emit(_log.INFO, "dispatch.approval_required", provider=call.provider,
                      conversation_id=conversation_id, call_id=call.call_id, local_id=call.local_id, name=tool.name,
                      args_sha256=p.args_hash, reason=decision.reason)
            self._reject(p, K.APPROVAL_REQUIRED,
                         f"Approval required: {tool.name} waits for a person's approval"
                         + (f" ({decision.reason})" if decision.reason else "")
                         + "; it has not run.", approval=request)
            return
        # runs in phase 2

    def _set_key(self, p: _Plan, tool: Tool, conversation_id: str) -> bool:
        """The ledger key a write claims (``p.key``, ``p.fingerprint``): the tool's own idempotency key, else the
        call instance. False when the key function failed (``p`` is then answered ``not_run``)."""
        call = p.call
        p.key = p.instance
        p.fingerprint = f"{tool.name}:{p.args_hash}"
        if tool.effect == "write" and tool.idempotency_key is not None:
            try:
                own = tool.idempotency_key(_json_decode(msgspec.json.encode(p.args)) if tool.kind != "custom"
                                           else call.raw_arguments)
                if not isinstance(own, str) or not own:
                    raise TypeError(f"idempotency_key returned {type(own).__name__}, not a non-empty str")
            except Exception as exc:  # noqa: BLE001 - the key function is application code
                _log.emit(_log.ERROR, "dispatch.idempotency_key_error", provider=call.provider,
                          conversation_id=conversation_id, call_id=call.call_id, local_id=call.local_id,
                          name=tool.name, error=type(exc).__name__)
                self._reject(p, K.NOT_RUN, f"Not run: {tool.name} could not be started because its idempotency "
                                           "key could not be computed. Nothing was run.")
                return False
            p.key = LedgerKey.for_idempotency_key(conversation_id, tool.name, own)
            p.fingerprint = tool.name
        return True

    def _unclean(self, p: _Plan, turn: Turn, conversation_id: str) -> Steps[None]:
        """A call of a turn that did not finish cleanly: it does not run. A write that ran before (dispatched with
        ``allow_unclean``, or judged clean when it ran) is answered by what this dispatcher remembers or by its
        ledger record, never "not run"; every other call is ``not_run``."""
        call = p.call
        text = f"Not run: {self._unclean_reason(turn)}. No tool was run for this response."
        tool = self.registry.get(call.name)
        if tool is not None and tool.effect == "write" and call.state is CallState.COMPLETE:
            with self._answered_lock:
                before = self._answered.get((p.instance.conversation_id, p.instance.call_key))
            if before is not None:
                self._dispatch(p)
                self._answer(p, msgspec.structs.replace(before, call_id=call.call_id, local_id=call.local_id,
                                                        name=call.name, history=[]))
                return
            p.tool = tool
            if not self._set_key(p, tool, conversation_id):
                return
            try:
                record = yield _Get(p.key)
            except Exception as exc:  # noqa: BLE001 - a ledger of the application's may raise anything
                self._ledger_failed(p, conversation_id, "read", exc)
                return
            if record is not None and (not record.fingerprint or record.fingerprint == p.fingerprint):
                self._dispatch(p)
                self._write_claimed(p, conversation_id, record, None)  # the stored result or outcome_unknown
                return
        if next_state(call.state, Trigger.REJECT):
            self._reject(p, K.NOT_RUN, text)
        else:
            p.result = self._result(call, K.NOT_RUN, text)

    def _decide(self, call: ToolCall, tool: Tool, turn: Turn, conversation_id: str) -> Decision:
        if self.policy is None:
            return Decision.allow()
        try:
            verdict = self.policy(call, PolicyContext(conversation_id=conversation_id, tool=tool, turn=turn))
        except Exception as exc:
            _log.emit(_log.ERROR, "dispatch.policy_error", provider=call.provider, conversation_id=conversation_id,
                      call_id=call.call_id, local_id=call.local_id, name=tool.name, error=type(exc).__name__)
            return Decision.deny("the authorization policy failed")
        # read again, strictly: only the three words (exact str), True or False decide; anything else denies
        if isinstance(verdict, Decision):
            try:
                word, reason = verdict.verdict, verdict.reason
            except Exception:  # noqa: BLE001 - a subclass whose fields cannot be read
                word, reason = None, None
            if valid_verdict(word, reason):
                return Decision(word, reason)
            what = f"a Decision with verdict of type {type(word).__name__} and reason of type " \
                   f"{type(reason).__name__}"
        elif verdict is True:
            return Decision.allow()
        elif verdict is False:
            return Decision.deny()
        elif valid_verdict(verdict, ""):
            return Decision(verdict)
        else:
            what = f"a {type(verdict).__name__}"
            if inspect.iscoroutine(verdict):  # an async policy: its coroutine is never awaited, so close it
                what = "a coroutine (the policy must be a plain function)"
                verdict.close()
        _log.emit(_log.ERROR, "dispatch.policy_error", provider=call.provider, conversation_id=conversation_id,
                  call_id=call.call_id, local_id=call.local_id, name=tool.name, error=f"no valid verdict: {what}")
        return Decision.deny("the authorization policy gave no valid verdict")

    def _tokens(self, approvals: Iterable[Any], conversation_id: str) -> list[Approval]:
        tokens: list[Approval] = []
        if isinstance(approvals, (Approval, ApprovalRequest, dict)):
            approvals = [approvals]
        if approvals is None:
            approvals = ()
        if isinstance(approvals, (str, bytes)) or not isinstance(approvals, Iterable):
            raise UsageError(f"approvals must be an iterable of Approval, got {type(approvals).__name__}")
        for a in approvals:
            if isinstance(a, dict):
                try:
                    a = msgspec.convert(a, Approval)
                except msgspec.ValidationError:
                    a = None
            if not isinstance(a, Approval):
                _log.emit(_log.WARNING, "dispatch.approval_invalid", conversation_id=conversation_id, call_id=None,
                          local_id=None, name=None, reason="not_an_approval", where="run")
                continue
            tokens.append(a)
        return tokens

    def _approved(self, p: _Plan, conversation_id: str, ident: str, tokens: Sequence[Approval]) -> Steps[bool]:
        """True when a valid, unexpired, unused approval for exactly this call instance was given; it is
        consumed (recorded in the ledger) here, right before the call runs."""
        call = p.call
        for a in tokens:
            if not approval_targets(a, conversation_id, ident, call.call_id, call.local_id):
                continue
            if not self._signer.approval_valid(a):
                reason = "bad_signature"
            elif a.name != p.tool.name:
                reason = "name_mismatch"
            elif a.args_sha256 != p.args_hash:
                reason = "arguments_mismatch"
            elif a.expires_at <= time.time():
                reason = "expired"
            else:
                used = yield from self._consume(p, a, conversation_id)
                if used is None:
                    return False
                if used:
                    _log.emit(_log.INFO, "dispatch.approval_accepted", conversation_id=conversation_id,
                              call_id=call.call_id, local_id=call.local_id, name=p.tool.name, approver=a.approver)
                    return True
                reason = "already_used"
            _log.emit(_log.WARNING, "dispatch.approval_invalid", conversation_id=conversation_id,
                      call_id=call.call_id, local_id=call.local_id, name=p.tool.name, reason=reason, where="run")
        return False

    def _consume(self, p: _Plan, a: Approval, conversation_id: str) -> Steps[bool | None]:
        """Record the approval as used. True: this call may run on it. False: it was used before (by another
        dispatch of this instance; a write then goes on to find its own ledger record, which answers it).
        None: the ledger failed (the call is answered ``not_run``). The claim is yielded to the driver of phase 1."""
        try:
            before = yield LedgerKey.for_approval(conversation_id, a.signature), p.instance.call_key
            if before is None:
                return True
            # a write dispatched again on its approval: its own ledger record answers it (or, if it never
            # started, it runs now, once)
            return p.tool.effect == "write" and before.fingerprint == p.instance.call_key
        except Exception as exc:  # noqa: BLE001 - a ledger of the application's may raise anything
            self._ledger_failed(p, conversation_id, "approve", exc)
            return None

    @staticmethod
    def _unclean_reason(turn: Turn) -> str:
        if turn.error is not None:
            return f"the response failed ({turn.error.type})"
        if turn.finish_reason is None:
            return "the response ended before it finished"
        return f"the response did not finish cleanly ({turn.raw_finish_reason or turn.finish_reason.value})"

    # ==== results and transitions ==============================================================================
    @staticmethod
    def _result(call: ToolCall, kind: ResultKind, content: Any, approval: ApprovalRequest | None = None,
                parts: list[Any] | None = None) -> ToolResult:
        return ToolResult(call_id=call.call_id, local_id=call.local_id, name=call.name, content=content,
                          is_error=kind is not K.OK, kind=kind, approval=approval, parts=parts)

    def _reject(self, p: _Plan, kind: ResultKind, content: str, approval: ApprovalRequest | None = None) -> None:
        """Answer ``p`` without running it: ``reject`` then ``answer`` (the table refuses other states)."""
        rec = p.rec = CallRecord.resume(p.call)
        rec.reject()
        p.result = self._result(p.call, kind, content, approval)
        rec.answer()
        self._publish(p)

    def _dispatch(self, p: _Plan) -> None:
        p.rec = CallRecord.resume(p.call)
        p.rec.dispatch()

    def _answer(self, p: _Plan, result: ToolResult) -> None:
        p.result = result
        p.rec.answer()
        self._publish(p)

    def _finish(self, plans: list[_Plan], conversation_id: str) -> list[ToolResult]:
        results: list[ToolResult] = []
        logged = _log.enabled(_log.INFO)
        for p in plans:
            r = p.result
            if p.rec is not None:
                r.history = [Transition(t, a, b, n) for t, a, b, n in p.rec.history]
                p.rec.release()
            else:
                r.history = list(p.call.history)
            results.append(r)
            if p.span is not None:
                _otel.finish(p, r)
            if logged:
                _log.emit(_log.INFO, "dispatch.result", provider=p.call.provider, conversation_id=conversation_id,
                          call_id=p.call.call_id, local_id=p.call.local_id, name=_short(p.call.name),
                          kind=r.kind.value, effect=p.tool.effect if p.tool else None, attempts=p.attempts,
                          duration_ms=round((time.perf_counter() - p.started) * 1000, 3))
        return results

    def _parallel(self, todo: list[_Plan]) -> bool:
        return self.concurrent_reads and len(todo) > 1 and all(p.tool.effect == "read" for p in todo)

    def _delay(self, retry: int) -> float:
        if callable(self.backoff):
            return max(0.0, float(self.backoff(retry)))
        return min(_BACKOFF_CAP, max(0.0, float(self.backoff)) * (2 ** retry))

    # ==== phase 2 helpers shared by run and arun ===============================================================
    def _read_step(self, p: _Plan, outcome: _Outcome, conversation_id: str) -> ToolResult | float:
        """Judge one read attempt: the call's result, or the delay before the next attempt."""
        tool, call = p.tool, p.call
        outcome = _raised(outcome)
        if outcome.status == "ok":
            return self._ok_result(p, outcome.value, conversation_id)
        if outcome.status == "error" and isinstance(outcome.value, ToolError):
            return self._tool_error(p, outcome.value, conversation_id)  # the tool's answer: never retried
        if outcome.status == "timeout":
            _log.emit(_log.WARNING, "dispatch.handler_timeout", provider=call.provider,
                      conversation_id=conversation_id, call_id=call.call_id, local_id=call.local_id, name=tool.name,
                      effect="read", timeout=tool.timeout, attempt=p.attempts)
            return self._result(call, K.HANDLER_TIMEOUT,
                                f"{tool.name} did not answer within {tool.timeout:g} s; no result is available.")
        exc = outcome.value
        retry = p.attempts <= self.read_retries
        _log.emit(_log.WARNING, "dispatch.handler_failed", provider=call.provider, conversation_id=conversation_id,
                  call_id=call.call_id, local_id=call.local_id, name=tool.name, effect="read",
                  error=type(exc).__name__, attempt=p.attempts, will_retry=retry)
        if retry:
            delay = self._delay(p.attempts - 1)
            _log.emit(_log.INFO, "dispatch.retry", provider=call.provider, conversation_id=conversation_id,
                      call_id=call.call_id, local_id=call.local_id, name=tool.name, attempt=p.attempts + 1,
                      delay=delay)
            return delay
        return self._result(call, K.HANDLER_FAILED, self._failure_text(tool, exc))

    @staticmethod
    def _failure_text(tool: Tool, exc: BaseException) -> str:
        return (f"{tool.name} failed ({type(exc).__name__}): it could not complete, so there is no result. "
                "This is a failure, not an empty answer.")

    def _write_claim(self, p: _Plan, conversation_id: str) -> tuple[LedgerRecord | None, BaseException | None]:
        """Claim the write's ledger key (after the table allowed its dispatch): the existing record, or the
        ledger's failure."""
        try:
            return _checked(self.ledger.claim(p.key, p.fingerprint)), None
        except Exception as exc:  # noqa: BLE001 - a ledger of the application's may raise anything
            return None, exc

    def _write_claimed(self, p: _Plan, conversation_id: str, existing: LedgerRecord | None,
                       failure: BaseException | None) -> bool:
        """Judge the claim of a dispatched write. True when this caller must run the handler; otherwise
        answers ``p`` (stored result, outcome unknown, conflict or ledger failure) and returns False."""
        call, tool = p.call, p.tool
        if failure is not None:
            self._ledger_failed(p, conversation_id, "claim", failure)
            return False
        if existing is None:
            if p.flight is not None:  # from here on the handler may run: a waiter asks the ledger if this is cut
                p.flight.claimed, p.flight.fingerprint = p.key, p.fingerprint
            return True
        if existing.fingerprint and existing.fingerprint != p.fingerprint:
            _log.emit(_log.ERROR, "dispatch.ledger_conflict", provider=call.provider,
                      conversation_id=conversation_id, call_id=call.call_id, local_id=call.local_id, name=tool.name,
                      status=existing.status)
            self._answer(p, self._result(call, K.NOT_RUN, f"Not run: the ledger key of this {tool.name} call was "
                                                          "already used for a different call in this conversation."))
            return False
        if existing.status == "completed" and existing.result is not None:
            _log.emit(_log.INFO, "dispatch.ledger_replay", provider=call.provider, conversation_id=conversation_id,
                      call_id=call.call_id, local_id=call.local_id, name=tool.name, kind=existing.result.kind.value)
            stored = msgspec.structs.replace(existing.result, call_id=call.call_id, local_id=call.local_id,
                                             name=call.name, history=[])
            self._answer(p, stored)
            return False
        _log.emit(_log.WARNING, "dispatch.outcome_unknown", provider=call.provider, conversation_id=conversation_id,
                  call_id=call.call_id, local_id=call.local_id, name=tool.name, reason="started_without_completion")
        self._answer(p, self._result(call, K.OUTCOME_UNKNOWN,
                                     f"{tool.name} was started earlier but its completion was never recorded: "
                                     "it may or may not have taken effect. It was not run again; check before "
                                     "retrying."))
        return False

    def _ledger_failed(self, p: _Plan, conversation_id: str, op: str, exc: BaseException) -> None:
        """The ledger could not be used before the write ran. Nothing runs now; but on a look-up (``read``) or a
        claim the write's record could not be read, so it may have run in an earlier dispatch of the same call:
        ``outcome_unknown``, never "not run". Only an approval that could not be recorded (its look-up had just
        found no record) is ``not_run``."""
        call, tool = p.call, p.tool
        _log.emit(_log.ERROR, "dispatch.ledger_error", provider=call.provider, conversation_id=conversation_id,
                  call_id=call.call_id, local_id=call.local_id, name=tool.name, op=op,
                  error=f"{type(exc).__name__}: {_short(exc, 200)}")
        if op in ("claim", "read"):
            kind, text = K.OUTCOME_UNKNOWN, _unchecked_write_text(tool.name)
        else:
            kind = K.NOT_RUN
            text = f"Not run: the approval of {tool.name} could not be recorded because the ledger is unavailable."
        if p.rec is not None and p.rec.state is CallState.DISPATCHED:
            self._answer(p, self._result(call, kind, text))
        else:
            self._reject(p, kind, text)

    def _write_end(self, p: _Plan, key: LedgerKey, outcome: _Outcome, conversation_id: str,
                   complete: Callable[[LedgerKey, ToolResult], None]) -> None:
        call, tool = p.call, p.tool
        outcome = _raised(outcome)
        if outcome.status == "error" and isinstance(outcome.value, OutcomeUnknown):
            # the handler cannot tell whether its effect happened: leave the ledger at `started`, like a timeout
            _log.emit(_log.WARNING, "dispatch.outcome_unknown", provider=call.provider,
                      conversation_id=conversation_id, call_id=call.call_id, local_id=call.local_id, name=tool.name,
                      reason="handler_raised")
            why = _reason(outcome.value)
            self._answer(p, self._result(call, K.OUTCOME_UNKNOWN,
                                         f"{tool.name} could not confirm whether it took effect ({why}): it may or "
                                         "may not have taken effect. It will not be run again automatically."))
            return
        if outcome.status == "timeout":
            # the handler may still be running: leave the ledger at `started` so no retry runs it again
            _log.emit(_log.WARNING, "dispatch.handler_timeout", provider=call.provider,
                      conversation_id=conversation_id, call_id=call.call_id, local_id=call.local_id, name=tool.name,
                      effect="write", timeout=tool.timeout, attempt=p.attempts)
            self._answer(p, self._result(call, K.OUTCOME_UNKNOWN,
                                         f"{tool.name} did not confirm within {tool.timeout:g} s: it may or may "
                                         "not have taken effect. It will not be run again automatically."))
            return
        if outcome.status == "ok":
            result = self._ok_result(p, outcome.value, conversation_id)
        elif isinstance(outcome.value, ToolError):
            result = self._tool_error(p, outcome.value, conversation_id)  # recorded as the completed outcome
        elif isinstance(outcome.value, HandlerNotStarted):  # the handler certifies it never began
            exc = outcome.value
            _log.emit(_log.WARNING, "dispatch.handler_failed", provider=call.provider,
                      conversation_id=conversation_id, call_id=call.call_id, local_id=call.local_id, name=tool.name,
                      effect="write", error=type(exc).__name__, attempt=p.attempts, will_retry=False)
            result = self._result(call, K.HANDLER_FAILED, self._failure_text(tool, exc))
        else:
            # it started and raised: before its effect or after it, nobody knows. Recorded as the completed
            # outcome, so a replay says the same and nothing runs it again
            exc = outcome.value
            _log.emit(_log.WARNING, "dispatch.outcome_unknown", provider=call.provider,
                      conversation_id=conversation_id, call_id=call.call_id, local_id=call.local_id, name=tool.name,
                      reason="handler_raised", error=type(exc).__name__)
            result = self._result(call, K.OUTCOME_UNKNOWN,
                                  f"{tool.name} raised {type(exc).__name__} after it started: it may or may not have "
                                  "taken effect. It will not be run again automatically; check before retrying.")
        try:
            complete(key, result)
        except Exception as exc:  # noqa: BLE001 - the effect happened: the caller still gets its result
            _log.emit(_log.ERROR, "dispatch.ledger_error", provider=call.provider, conversation_id=conversation_id,
                      call_id=call.call_id, local_id=call.local_id, name=tool.name, op="complete",
                      error=f"{type(exc).__name__}: {_short(exc, 200)}")
        self._answer(p, result)

    def _capped(self, p: _Plan, content: Any, conversation_id: str) -> Any:
        """``content``, or its JSON text cut to ``max_result_bytes`` with a marker when it is larger."""
        if isinstance(content, (int, float, bool)) or content is None:
            return content
        text = content if isinstance(content, str) else None
        size = len(text.encode("utf-8")) if text is not None else len(msgspec.json.encode(content))
        if size <= self.max_result_bytes:
            return content
        if text is None:
            text = msgspec.json.encode(content).decode("utf-8")
        marker = (f" […truncated by toolwire: the result was {size} bytes and the limit is "
                  f"{self.max_result_bytes}; the rest is not shown]")
        keep = self.max_result_bytes - len(marker.encode("utf-8"))
        cut = text.encode("utf-8")[:max(0, keep)].decode("utf-8", "ignore")
        _log.emit(_log.WARNING, "dispatch.result_truncated", provider=p.call.provider,
                  conversation_id=conversation_id, call_id=p.call.call_id, local_id=p.call.local_id,
                  name=p.tool.name, size=size, limit=self.max_result_bytes)
        return cut + marker

    def _ok_result(self, p: _Plan, value: Any, conversation_id: str) -> ToolResult:
        """The result of a handler that returned: its ``Content``, its value as JSON, or ``result_unusable``."""
        return self._answer_value(p, value, K.OK, conversation_id)

    def _tool_error(self, p: _Plan, exc: ToolError, conversation_id: str) -> ToolResult:
        """The result of a handler that raised ``ToolError``: ``tool_error`` with the exception's content."""
        call = p.call
        _log.emit(_log.INFO, "dispatch.tool_error", provider=call.provider, conversation_id=conversation_id,
                  call_id=call.call_id, local_id=call.local_id, name=p.tool.name, effect=p.tool.effect,
                  attempt=p.attempts)
        try:
            value = exc.content if hasattr(exc, "content") else str(exc)
        except Exception:  # noqa: BLE001 - a ToolError of the application's whose content cannot be read
            return self._unusable(p, "a ToolError whose content cannot be read")
        return self._answer_value(p, value, K.TOOL_ERROR, conversation_id)

    def _answer_value(self, p: _Plan, value: Any, kind: ResultKind, conversation_id: str) -> ToolResult:
        """``kind`` (``ok`` or ``tool_error``) with the handler's value: ``Content`` checked and capped, anything
        else as JSON (or its text), capped; ``result_unusable`` when it cannot be sent."""
        try:
            rich = _rich.as_content(value)
        except Exception:  # noqa: BLE001 - a value whose type cannot be asked (an unbound lazy proxy)
            return self._unusable(p, "a value whose type cannot be read")
        if rich is not None:
            return self._rich_result(p, rich, kind, conversation_id)
        content, usable = _jsonable(value, p.call, conversation_id)
        if usable:
            return self._result(p.call, kind, self._capped(p, content, conversation_id))
        return self._unusable(p, f"a value of type {type(value).__name__} that cannot be sent back as JSON or text")

    def _rich_result(self, p: _Plan, content: Content, kind: ResultKind, conversation_id: str) -> ToolResult:
        call = p.call
        try:
            content = _rich.checked(content)
        except _rich.Unusable as exc:
            _log.emit(_log.WARNING, "dispatch.content_invalid", provider=call.provider,
                      conversation_id=conversation_id, call_id=call.call_id, local_id=call.local_id,
                      name=p.tool.name, reason=exc.reason)
            return self._unusable(p, f"content that cannot be sent ({exc.reason})")
        content, size = _rich.capped(content, self.max_result_bytes)
        if size is not None:
            _log.emit(_log.WARNING, "dispatch.result_truncated", provider=call.provider,
                      conversation_id=conversation_id, call_id=call.call_id, local_id=call.local_id,
                      name=p.tool.name, size=size, limit=self.max_result_bytes)
        return self._result(call, kind, self._capped(p, _rich.json_form(content), conversation_id),
                            parts=list(content.parts))

    def _unusable(self, p: _Plan, what: str) -> ToolResult:
        done = " It ran and its action took effect: do not repeat it." if p.tool.effect == "write" else ""
        return self._result(p.call, K.RESULT_UNUSABLE,
                            f"{p.tool.name} returned {what}, so no result is available.{done}")

    # ==== phase 2, sync ========================================================================================
    def _run_read(self, p: _Plan, conversation_id: str) -> None:
        self._dispatch(p)
        self._answer(p, self._read_loop(p, conversation_id))

    def _read_loop(self, p: _Plan, conversation_id: str) -> ToolResult:
        """Attempts of one read (no transitions here: this may run on a worker thread)."""
        while True:
            p.attempts += 1
            outcome = self._invoke_sync(p.tool, _otel.bind(p.span, functools.partial(self._call_handler, p)))
            step = self._read_step(p, outcome, conversation_id)
            if isinstance(step, ToolResult):
                return step
            if step:
                time.sleep(step)

    def _run_write(self, p: _Plan, conversation_id: str) -> None:
        self._dispatch(p)  # the table first: a call it refuses never leaves a ledger entry
        if not self._write_claimed(p, conversation_id, *self._write_claim(p, conversation_id)):
            return
        p.attempts += 1
        outcome = self._invoke_sync(p.tool, _otel.bind(p.span, functools.partial(self._call_handler, p)))
        self._write_end(p, p.key, outcome, conversation_id, self.ledger.complete)

    def _call_handler(self, p: _Plan) -> Any:
        """Call ``p``'s handler once (attempt ``p.attempts``), with a ``ToolContext`` when it declares one."""
        tool = p.tool
        param = self._context_params.get(tool.name)
        if param is None:
            return tool.invoke(p.value)
        context = ToolContext(conversation_id=p.instance.conversation_id, call_id=p.call.call_id,
                              local_id=p.call.local_id, name=tool.name, attempt=p.attempts,
                              deadline=None if tool.timeout is None else time.monotonic() + tool.timeout,
                              data=p.data)
        # Tool's calling convention is ``_invoke(handler, value)``: the context goes in as one more keyword
        return tool._invoke(functools.partial(tool.handler, **{param: context}), p.value)

    @staticmethod
    def _invoke_sync(tool: Tool, invoke: Callable[[], Any]) -> _Outcome:
        timeout = tool.timeout
        if timeout is None and not tool.is_async:
            job = _Job(invoke, None, _ignore)  # what the handler sets stays in its own copy of the context
            job.outcome = job.context.run(job._call)  # on this thread: BaseException reaches the caller
            return job.outcome
        # the handler sees the caller's context variables (request ids, tracing, structlog's bound values)
        answered = queue.SimpleQueue()
        _HANDLERS.submit(_Job(invoke, timeout, answered.put))
        try:
            return answered.get(timeout=None if timeout is None else timeout + (_ASYNC_GRACE if tool.is_async
                                                                                else 0.0)).outcome
        except queue.Empty:
            return _Outcome("timeout")

    def _read_concurrently(self, todo: list[_Plan], conversation_id: str) -> list[ToolResult]:
        """The reads of ``todo`` run at once (at most ``max_workers`` calls under way), their attempts handed to
        pool threads and judged on this thread as they come back; their results in call order.

        Each attempt has its own deadline (a late answer of an attempt that timed out is ignored); a read to retry
        keeps its place while it waits for its backoff, as it would in a thread of its own."""
        n = len(todo)
        results: list[ToolResult | None] = [None] * n
        current: list[_Job | None] = [None] * n  # each read's attempt under way
        deadlines: dict[int, float] = {}  # when the attempt under way of a read with a timeout runs out
        retries: list[tuple[float, int]] = []  # (when, read) waiting for their backoff
        answered: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        limit = min(self.max_workers, n)
        clock = time.monotonic
        started, left = 0, n

        def attempt(i: int) -> None:
            p = todo[i]
            p.attempts += 1
            tool = p.tool
            job = current[i] = _Job(_otel.bind(p.span, functools.partial(self._call_handler, p)), tool.timeout,
                                    answered.put, slot=i)
            if tool.timeout is not None:
                deadlines[i] = clock() + tool.timeout + (_ASYNC_GRACE if tool.is_async else 0.0)
            _HANDLERS.submit(job)

        def judge(i: int, outcome: _Outcome) -> None:
            nonlocal left
            current[i] = None
            deadlines.pop(i, None)
            step = self._read_step(todo[i], outcome, conversation_id)
            if isinstance(step, ToolResult):
                results[i] = step
                left -= 1
            elif step:
                heapq.heappush(retries, (clock() + step, i))
            else:
                attempt(i)

        while left:
            while started < n and (started - (n - left)) < limit:  # reads under way (or waiting to retry)
                attempt(started)
                started += 1
            now = clock()
            while retries and retries[0][0] <= now:
                attempt(heapq.heappop(retries)[1])
            wake = min(deadlines.values(), default=None)
            if retries and (wake is None or retries[0][0] < wake):
                wake = retries[0][0]
            try:
                job = answered.get(timeout=None if wake is None else max(0.0, wake - now))
            except queue.Empty:
                job = None
            while job is not None:
                if current[job.slot] is job:  # else the late answer of an attempt that timed out
                    judge(job.slot, job.outcome)
                try:
                    job = answered.get_nowait()
                except queue.Empty:
                    job = None
            now = clock()
            for i in [i for i, t in deadlines.items() if t <= now]:
                judge(i, _Outcome("timeout"))
        return results  # type: ignore[return-value]

    # ==== phase 2, async =======================================================================================
    async def _arun_read(self, p: _Plan, conversation_id: str) -> None:
        self._dispatch(p)
        self._answer(p, await self._aread_loop(p, conversation_id))

    async def _aread_loop(self, p: _Plan, conversation_id: str) -> ToolResult:
        while True:
            p.attempts += 1
            outcome = await self._invoke_async(p.tool, _otel.bind(p.span, functools.partial(self._call_handler, p)))
            step = self._read_step(p, outcome, conversation_id)
            if isinstance(step, ToolResult):
                return step
            if step:
                await asyncio.sleep(step)

    def _aledger(self, op: str, *args: Any) -> Awaitable[Any]:
        """The ledger's ``op`` (``"claim"``, ``"complete"`` or ``"get"``) for ``arun``: its async twin (``aclaim``,
        ``acomplete``, ``aget``: the optional ``AsyncLedger`` part of the protocol) when it has one, else the sync method
        in a worker thread, so the event loop never waits on the ledger."""
        twin = getattr(self.ledger, "a" + op, None)
        if callable(twin):
            return twin(*args)
        return asyncio.to_thread(getattr(self.ledger, op), *args)

    async def _arun_write(self, p: _Plan, conversation_id: str) -> None:
        self._dispatch(p)  # the table first: a call it refuses never leaves a ledger entry
        try:
            existing, failure = _checked(await self._aledger("claim", p.key, p.fingerprint)), None
        except Exception as exc:  # noqa: BLE001 - a ledger of the application's may raise anything
            existing, failure = None, exc
        if not self._write_claimed(p, conversation_id, existing, failure):
            return
        p.attempts += 1
        outcome = await self._invoke_async(p.tool, _otel.bind(p.span, functools.partial(self._call_handler, p)))
        result_box: list[tuple[LedgerKey, ToolResult]] = []
        self._write_end(p, p.key, outcome, conversation_id, lambda k, r: result_box.append((k, r)))
        if result_box:
            try:
                await self._aledger("complete", *result_box[0])
            except Exception as exc:  # noqa: BLE001 - the effect happened: the caller still gets its result
                _log.emit(_log.ERROR, "dispatch.ledger_error", provider=p.call.provider,
                          conversation_id=conversation_id, call_id=p.call.call_id, local_id=p.call.local_id,
                          name=p.tool.name, op="complete", error=f"{type(exc).__name__}: {_short(exc, 200)}")

    @staticmethod
    async def _invoke_async(tool: Tool, invoke: Callable[[], Any]) -> _Outcome:
        timeout = tool.timeout
        if tool.is_async:
            try:
                coro = invoke()
            except Exception as exc:
                return _Outcome("error", exc)
            return await _within(coro, timeout)
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[_Outcome] = loop.create_future()

        def settle(outcome: _Outcome) -> None:
            if not fut.done():
                fut.set_result(outcome)

        def answered(job: _Job) -> None:
            try:
                loop.call_soon_threadsafe(settle, job.outcome)
            except RuntimeError:  # the loop closed while the handler ran past its timeout
                pass

        # on a pool thread, in a copy of this task's context; an awaitable it returns is awaited here
        _HANDLERS.submit(_Job(invoke, timeout, answered, awaited=False))
        try:
            outcome = await asyncio.wait_for(asyncio.shield(fut), timeout)
        except TimeoutError:
            return _Outcome("timeout")
        if outcome.status == "ok" and _isawaitable(outcome.value):
            return await _within(outcome.value, timeout)
        return outcome


class _Job:
    """One handler invocation handed to a pool thread (see ``_DaemonPool``).

    ``invoke`` runs in ``context`` (a copy of the caller's context variables, taken on the caller's thread); its
    outcome goes to ``outcome`` and ``notify(job)`` is called on the pool thread, after the thread counted itself
    idle again. ``awaited``: an awaitable the handler returned is run there under ``timeout`` (``run``); without
    it the awaitable is the outcome's value (``arun`` awaits it on its own loop). ``slot``: the caller's own tag.
    """

    __slots__ = ("invoke", "context", "timeout", "awaited", "notify", "outcome", "slot")

    def __init__(self, invoke: Callable[[], Any], timeout: float | None, notify: Callable[["_Job"], Any],
                 awaited: bool = True, slot: int = 0) -> None:
        self.invoke = invoke
        self.context = contextvars.copy_context()
        self.timeout = timeout
        self.awaited = awaited
        self.notify = notify
        self.outcome: _Outcome | None = None
        self.slot = slot

    def run(self) -> None:
        try:
            self.outcome = self.context.run(self._call)
        except BaseException as exc:  # noqa: BLE001 - SystemExit and friends end only this handler
            self.outcome = _Outcome("error", exc)

    def _call(self) -> _Outcome:
        try:
            r = self.invoke()
            if self.awaited and _isawaitable(r):
                r = asyncio.run(_within(r, self.timeout))
            return r if type(r) is _Outcome else _Outcome("ok", r)
        except (Exception, asyncio.CancelledError) as exc:  # a handler's failure is a result; a sync function
            return _Outcome("error", exc)                    # cannot be cancelled, so its CancelledError is its own


class _DaemonPool:
    """Long-lived daemon threads for handlers that run under a timeout, fed through one ``SimpleQueue``.

    Starting a thread per call costs about 70 µs; a pool reuses them. The threads are daemons (unlike
    ``ThreadPoolExecutor``'s), so a handler stuck past its timeout never blocks the interpreter from exiting.
    A job is only queued when a thread is free to take it at once (a new thread is started whenever every
    existing one is busy), so a stuck handler never delays another call and stuck handlers never exhaust the
    pool: the thread a stuck handler holds is replaced by a new one. Threads that come back after a burst stay
    idle up to ``max_idle``; more end.
    """

    def __init__(self, max_idle: int = 64) -> None:
        self.max_idle = max_idle
        self._forget_threads()

    def submit(self, job: _Job) -> None:
        with self._lock:
            if self._idle > 0:
                self._idle -= 1
                start = False
            else:
                start = True
        if start:  # before the job is queued: a thread that cannot start leaves no job behind to run later
            threading.Thread(target=self._work, args=(self._jobs,), name="toolwire-handler", daemon=True).start()
        self._jobs.put(job)

    def _work(self, jobs: "queue.SimpleQueue[_Job]") -> None:
        get = jobs.get
        while True:
            job = get()
            job.run()
            with self._lock:  # counted idle before the caller hears of it: its next job reuses this thread
                idle = self._idle < self.max_idle
                if idle:
                    self._idle += 1
            try:
                job.notify(job)
            except BaseException:  # noqa: BLE001 - the thread is counted idle: it must stay alive to take a job
                pass
            if not idle:
                return

    def _forget_threads(self) -> None:
        """Start afresh (at init; and after ``fork``: the child has none of the parent's threads)."""
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0


_HANDLERS = _DaemonPool()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_HANDLERS._forget_threads)


def _isawaitable(value: Any) -> bool:
    """``inspect.isawaitable``, False for a value whose type cannot even be asked (an unbound lazy proxy whose
    ``__class__`` raises): the handler returned it, so its effect happened; the value is judged as a result."""
    try:
        return inspect.isawaitable(value)
    except Exception:  # noqa: BLE001 - the handler's value, not a failure of the handler
        return False


def _ignore(job: _Job) -> None:
    pass


async def _within(awaitable: Any, timeout: float | None) -> _Outcome:
    """Await a handler's awaitable under ``timeout``; its own exceptions (TimeoutError included) are errors."""
    async def guarded() -> _Outcome:
        try:
            return _Outcome("ok", await awaitable)
        except Exception as exc:  # noqa: BLE001
            return _Outcome("error", exc)
        except asyncio.CancelledError as exc:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # this run is being cancelled: the cancellation goes on
            return _Outcome("error", exc)  # the handler's own (it awaited something cancelled elsewhere)

    try:
        return await asyncio.wait_for(guarded(), timeout)
    except TimeoutError:
        return _Outcome("timeout")
