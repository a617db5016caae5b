"""Durable conversations on DBOS: one user prompt of a conversation runs as a DBOS workflow.

Run it where you call it (``DurableLoop.run``), or put it on a DBOS queue (``DurableLoop.enqueue`` inside a DBOS
process, ``enqueue`` with a ``DBOSClient`` from anywhere) for any worker that serves the queue to take. Each model
request is a DBOS step (the parsed ``Turn`` it returns, as msgspec JSON, is recorded in the DBOS
system database with the turn identity minted for that request), and each turn's dispatch is a step that runs
``Dispatcher.run`` under that recorded ``turn_id``, so a dispatch that runs again (a recovered or a forked
workflow) uses the same identity. A workflow interrupted by a crash is resumed by ``DBOS.launch()`` in the next
process: recorded requests are not sent again, and a dispatch step that runs again finds its calls in the
toolwire ledger: a write that completed is answered from its record, never run twice; a write interrupted
between its effect and its record is answered ``outcome_unknown`` (at most once). A worker that never comes back,
or hangs, is recovered by ``recover_lost`` (``toolwire durable recover``), which reads each worker's
``Heartbeat``; ``dbos_config`` sets the application version, ``DurableLoop(max_recovery_attempts=...)`` the
limit past which DBOS ends a conversation (``result_of(handle)`` raises ``RecoveryLimitReached``).

``DurableLoop`` objects are found by ``name`` when a workflow starts or is recovered: create them (same names,
same tools, same ledger) before ``DBOS.launch()`` in every process that may run a conversation. DBOS steps are at
least once, so the ledger must outlive the process (``SQLiteLedger`` on one machine, ``PostgresLedger`` for
workers on several).

Needs the ``dbos`` extra (``pip install toolwire[dbos]``); ``import toolwire`` does not import it.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any, Iterable

import msgspec
import structlog
from dbos import DBOS, SetWorkflowID

from . import _log
from ._durable_ops import (
    HEARTBEAT_TABLE,
    ExecutorSeen,
    Heartbeat,
    RecoveredWorkflow,
    RecoveryError,
    RecoveryReport,
    executors_seen,
    recover_lost,
)
from .codecs.requests import http_part
from .errors import ToolwireError, UsageError
from .harness.errors import ProviderError
from .harness.loop import LoopResult, _Core
from .harness.retry import RetryPolicy
from .harness.transport import HTTPTransport
from .registry import Dispatcher, MemoryLedger, Registry, ToolResult
from .types import Turn

__all__ = ["DurableLoop", "WORKFLOW_NAME", "QUEUE_NAME", "enqueue", "result_of", "dbos_config", "Heartbeat",
           "HEARTBEAT_TABLE", "recover_lost", "executors_seen", "RecoveryReport", "RecoveredWorkflow",
           "ExecutorSeen", "RecoveryError", "RecoveryLimitReached"]

#: the name the prompt workflow is registered under in DBOS
WORKFLOW_NAME = "toolwire.durable.prompt"
#: the default DBOS queue of ``DurableLoop.enqueue`` and ``enqueue`` (register it in every worker:
#: ``DBOS.register_queue(QUEUE_NAME, worker_concurrency=...)`` right after ``DBOS.launch()``, which it needs)
QUEUE_NAME = "toolwire"

_LOOPS: dict[str, "DurableLoop"] = {}
_LOOPS_LOCK = threading.Lock()


class RecoveryLimitReached(ToolwireError):
    """The prompt workflow was started or recovered more than its ``max_recovery_attempts`` allow (a worker died
    each time): DBOS ended it (status ``MAX_RECOVERY_ATTEMPTS_EXCEEDED``) and nothing of it runs again. Its writes
    that ran have their ledger records; none runs again. ``workflow_id`` names it (``DBOS.resume_workflow`` gives
    it a new budget, once the cause is fixed)."""

    def __init__(self, workflow_id: str, message: str) -> None:
        super().__init__(message)
        self.workflow_id = workflow_id


def dbos_config(name: str, system_database_url: str, *, executor_id: str, application_version: str,
                **more: Any) -> dict[str, Any]:
    """The DBOS config of a worker process (``DBOS(config=dbos_config(...))``), with the application version set
    by the application. DBOS recovers and dequeues a workflow only on executors of the version it was started
    under; left to itself it hashes the workflow functions' source, which does not see a change in the tools,
    the prompts or toolwire. Give every deployment its version (``"2026-12-04"``, a release tag) and move the
    conversations of a retired version with ``recover_lost(..., to_version=...)``. ``more``: any other DBOS
    config key (``log_level``...)."""
    for label, value in (("name", name), ("executor_id", executor_id), ("application_version", application_version)):
        if not isinstance(value, str) or not value:
            raise UsageError(f"{label} must be a non-empty string")
    if not isinstance(system_database_url, str) or not system_database_url:
        raise UsageError("system_database_url must be a sqlite:///PATH or postgresql://... URL")
    return {"name": name, "system_database_url": system_database_url, "executor_id": executor_id,
            "application_version": application_version, **more}


def _loop(name: str) -> "DurableLoop":
    try:
        return _LOOPS[name]
    except KeyError:
        raise UsageError(f"no DurableLoop named {name!r} in this process: create it before DBOS.launch()") from None


class DurableLoop:
    """Runs prompts of conversations as DBOS workflows, with the arguments of ``ToolLoop``.

    ``dispatcher`` is required: its ledger is the at-most-once gate of every write when a dispatch step runs
    again after a crash, so it must be durable (``SQLiteLedger``, ``PostgresLedger``). ``name`` identifies this
    loop to recovered workflows (one name per tool set). ``run`` returns a ``LoopResult``; it never raises for a
    provider's or a model's failure (the fallback message is the answer then).
    """

    def __init__(self, provider: str, *, model: str, registry: Registry, dispatcher: Dispatcher,
                 name: str = "default", transport: HTTPTransport | None = None, base_url: str | None = None,
                 api_key: str | None = None, system: str | None = None, stream: bool = True, locale: str = "en",
                 max_steps: int = 8, retry: RetryPolicy | None = None, max_tokens: int = 1024,
                 timeout: float | None = None, echo_ids: bool = True,
                 max_recovery_attempts: int | None = None) -> None:
        _check_name(name)
        if max_recovery_attempts is not None and (not isinstance(max_recovery_attempts, int)
                                                  or isinstance(max_recovery_attempts, bool)
                                                  or not 1 <= max_recovery_attempts <= 100_000):
            raise UsageError(f"max_recovery_attempts must be between 1 and 100000 (or None: DBOS's default of "
                             f"{_DBOS_DEFAULT_ATTEMPTS}), got {max_recovery_attempts!r}")
        if not isinstance(dispatcher, Dispatcher):
            raise UsageError(f"dispatcher must be a toolwire.Dispatcher with a durable ledger, got "
                             f"{type(dispatcher).__name__}")
        if isinstance(dispatcher.ledger, MemoryLedger):
            raise UsageError("a DurableLoop needs a ledger that outlives the process (SQLiteLedger, "
                             "PostgresLedger): with a MemoryLedger a write resumed after a crash could run twice")
        self.name = name
        self.provider = provider
        self.dispatcher = dispatcher
        self._core_kw: dict[str, Any] = dict(model=model, registry=registry, dispatcher=dispatcher, system=system,
                                             stream=stream, locale=locale, max_steps=max_steps, retry=retry,
                                             max_tokens=max_tokens, echo_ids=echo_ids)
        self._core(None, None)  # bad arguments (locale, max_steps) fail now
        self.transport = transport or HTTPTransport(provider, model=model, base_url=base_url, api_key=api_key,
                                                    stream=stream, timeout=timeout)
        self.max_recovery_attempts = max_recovery_attempts
        with _LOOPS_LOCK:
            taken = name in _LOOPS
            clash = max_recovery_attempts is not None and any(
                o.max_recovery_attempts not in (None, max_recovery_attempts) for o in _LOOPS.values())
            if not taken and not clash:
                _LOOPS[name] = self
                if max_recovery_attempts is not None:
                    _set_max_recovery_attempts(max_recovery_attempts)
        if clash and not taken:
            if transport is None:
                self.transport.close()
            raise UsageError("max_recovery_attempts is one value per process (DBOS reads it from the one prompt "
                             "workflow): another DurableLoop here has another")
        if taken:
            if transport is None:
                self.transport.close()
            raise UsageError(f"a DurableLoop named {name!r} exists in this process: give each loop its own "
                             "name (close the old one first to replace it)")

    def _core(self, conversation_id: str | None, history: Iterable[Any] | None) -> _Core:
        return _Core(self.provider, conversation_id=conversation_id, history=history, **self._core_kw)

    def run(self, prompt: str, *, conversation_id: str, history: Iterable[Any] | None = None,
            previous_id: str | None = None, workflow_id: str | None = None) -> LoopResult:
        """Run ``prompt`` (after ``history``, a previous result's ``history``; for Gemini Interactions after
        ``previous_id``, a previous result's ``previous_id``) as a DBOS workflow and wait for it.

        ``workflow_id``: the DBOS workflow id; the same id again returns the recorded result without running
        anything (default: a new id from DBOS)."""
        from dbos._error import DBOSAwaitedWorkflowMaxRecoveryAttemptsExceeded, MaxRecoveryAttemptsExceededError

        args = self._args(prompt, conversation_id, history, previous_id)
        try:
            if workflow_id is None:
                out = _prompt_workflow(*args)
            else:
                _check_reuse(workflow_id, args, _status_inputs(workflow_id))
                with SetWorkflowID(workflow_id):
                    out = _prompt_workflow(*args)
        except (DBOSAwaitedWorkflowMaxRecoveryAttemptsExceeded, MaxRecoveryAttemptsExceededError) as exc:
            raise _limit_reached(getattr(exc, "workflow_id", None) or workflow_id or "?") from None
        return result_of(out)

    def enqueue(self, prompt: str, *, conversation_id: str, history: Iterable[Any] | None = None,
                previous_id: str | None = None, workflow_id: str | None = None, queue: str = QUEUE_NAME) -> Any:
        """Put ``prompt`` on the DBOS queue ``queue`` (registered with ``DBOS.register_queue``); any worker
        serving it runs the workflow. Returns the DBOS workflow handle: ``result_of(handle.get_result())`` is
        the ``LoopResult``. The same ``workflow_id`` with the same arguments again attaches to the workflow
        already enqueued; with other arguments it is a ``UsageError``."""
        args = self._args(prompt, conversation_id, history, previous_id)
        if not isinstance(queue, str) or not queue:
            raise UsageError("queue must be a non-empty string")
        q = DBOS.retrieve_queue(queue)
        if q is None:
            raise UsageError(f"no DBOS queue named {queue!r}: register it with DBOS.register_queue({queue!r}) "
                             "in the workers")
        if workflow_id is None:
            return q.enqueue(_prompt_workflow, *args)
        _check_reuse(workflow_id, args, _status_inputs(workflow_id))
        with SetWorkflowID(workflow_id):
            return q.enqueue(_prompt_workflow, *args)

    def _args(self, prompt: str, conversation_id: str, history: Iterable[Any] | None,
              previous_id: str | None) -> tuple[Any, ...]:
        if previous_id is not None and not http_part(self.provider).keeps_history:
            raise UsageError("previous_id continues a Gemini Interactions conversation; other dialects pass "
                             "history")
        return _workflow_args(self.name, prompt, conversation_id, history, previous_id)

    def close(self) -> None:
        with _LOOPS_LOCK:
            if _LOOPS.get(self.name) is self:
                del _LOOPS[self.name]
        self.transport.close()

    def __enter__(self) -> "DurableLoop":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def result_of(output: Any) -> LoopResult:
    """The ``LoopResult`` of a prompt workflow: its output (e.g. ``DBOS.retrieve_workflow(id).get_result()``), or
    its handle (a DBOS or ``DBOSClient`` workflow handle: waits for it). From a handle, a conversation that DBOS
    ended after ``max_recovery_attempts`` raises ``RecoveryLimitReached`` (logged
    ``durable.recovery_limit_reached``)."""
    if hasattr(output, "get_result") and hasattr(output, "get_workflow_id"):
        from dbos._error import DBOSAwaitedWorkflowMaxRecoveryAttemptsExceeded, MaxRecoveryAttemptsExceededError

        try:
            output = output.get_result()
        except (DBOSAwaitedWorkflowMaxRecoveryAttemptsExceeded, MaxRecoveryAttemptsExceededError) as exc:
            raise _limit_reached(getattr(exc, "workflow_id", None) or output.get_workflow_id()) from None
    return msgspec.json.decode(output, type=LoopResult)


def _limit_reached(workflow_id: str) -> RecoveryLimitReached:
    _log.emit(_log.ERROR, "durable.recovery_limit_reached", workflow_id=workflow_id)
    return RecoveryLimitReached(workflow_id, f"the conversation's workflow {workflow_id} was ended by DBOS after "
                                "its max_recovery_attempts (a worker died each time it ran): nothing of it runs again")


def _set_max_recovery_attempts(limit: int) -> None:
    """What ``@DBOS.workflow(max_recovery_attempts=...)`` sets, for the one prompt workflow (read by DBOS each time
    it starts or recovers one)."""
    from dbos._registrations import get_func_info

    info = get_func_info(_prompt_workflow)
    if info is not None:
        info.max_recovery_attempts = limit


def enqueue(client: Any, name: str, prompt: str, *, conversation_id: str, history: Iterable[Any] | None = None,
            previous_id: str | None = None, workflow_id: str | None = None, queue: str = QUEUE_NAME) -> Any:
    """Put a prompt for the ``DurableLoop`` named ``name`` on a DBOS queue through a ``dbos.DBOSClient``: from a
    process that runs no workflows (a web front end, a scheduler). Workers that created that loop and serve
    ``queue`` take it. Returns the client's workflow handle (``result_of(handle.get_result())``). The same
    ``workflow_id`` with other arguments is a ``UsageError``."""
    args = _workflow_args(name, prompt, conversation_id, history, previous_id)
    if not isinstance(queue, str) or not queue:
        raise UsageError("queue must be a non-empty string")
    options: dict[str, Any] = {"workflow_name": WORKFLOW_NAME, "queue_name": queue}
    if workflow_id is not None:
        _check_workflow_id(workflow_id)
        found = client.list_workflows(workflow_ids=[workflow_id], load_output=False)
        _check_reuse(workflow_id, args, found[0].input if found else None)
        options["workflow_id"] = workflow_id
    return client.enqueue(options, *args)


def _check_name(name: Any) -> None:
    if not isinstance(name, str) or not name:
        raise UsageError("name must be a non-empty string")


def _check_workflow_id(workflow_id: Any) -> None:
    if not isinstance(workflow_id, str) or not workflow_id:
        raise UsageError(f"workflow_id must be a non-empty string, got {workflow_id!r}")


def _workflow_args(name: Any, prompt: Any, conversation_id: Any, history: Any, previous_id: Any) -> tuple[Any, ...]:
    """The prompt workflow's arguments, checked: what DBOS records and a worker (perhaps another one) runs."""
    _check_name(name)
    if not isinstance(prompt, str):
        raise UsageError(f"prompt must be a string, got {type(prompt).__name__}")
    if not isinstance(conversation_id, str) or not conversation_id:
        raise UsageError("conversation_id must be a non-empty string")
    if previous_id is not None and (not isinstance(previous_id, str) or not previous_id):
        raise UsageError("previous_id must be a non-empty string (a previous result's previous_id) or None")
    if isinstance(history, (str, bytes, dict)):
        raise UsageError(f"history must be a list of messages (a previous result's history), got "
                         f"{type(history).__name__}")
    try:
        items = list(history or [])
        # recorded as JSON by DBOS and sent as JSON to the provider: refuse now what could not be
        items = msgspec.json.decode(msgspec.json.encode(items))
    except (TypeError, ValueError, OverflowError, RecursionError, msgspec.MsgspecError) as exc:
        raise UsageError(f"history must be JSON messages (a previous result's history): {exc}") from None
    return (name, conversation_id, prompt, items, previous_id)


def _status_inputs(workflow_id: Any) -> Any:
    _check_workflow_id(workflow_id)
    status = DBOS.get_workflow_status(workflow_id)
    return None if status is None else status.input


def _check_reuse(workflow_id: str, args: tuple[Any, ...], recorded: Any) -> None:
    """A workflow id already used with other arguments would answer with another prompt's result: refuse."""
    if recorded is None:
        return
    try:
        same = (msgspec.json.encode(list(recorded.get("args", ()))) == msgspec.json.encode(list(args))
                and not recorded.get("kwargs"))
    except (TypeError, ValueError, AttributeError):
        same = False
    if not same:
        raise UsageError(f"workflow_id {workflow_id!r} was already used for another prompt or conversation: "
                         "each prompt of a conversation needs its own workflow id")


@DBOS.step(name="toolwire.durable.request")
def _request_step(name: str, conversation_id: str, body: dict[str, Any], step: int) -> dict[str, Any]:
    """One model request, retried per the loop's policy: the turn (msgspec JSON), its attempts and the turn
    identity minted for the request (recorded with it: a replayed step gives the same one back), or the error that
    ends the conversation in a fallback."""
    loop = _loop(name)
    core = loop._core(conversation_id, None)
    try:
        turn, attempts, turn_id = core.request(loop.transport, body, step)
    except ProviderError as exc:
        return {"error": {"type": exc.type, "status": exc.status, "provider": exc.provider,
                          "message": str(exc)}}
    return {"turn": msgspec.json.encode(turn), "attempts": attempts, "turn_id": turn_id}


@DBOS.step(name="toolwire.durable.dispatch")
def _dispatch_step(name: str, conversation_id: str, turn: bytes, turn_id: str) -> bytes:
    """One turn's calls through the dispatcher; its ledger keeps every write at most once when this step runs
    again after a crash."""
    results = _loop(name).dispatcher.run(msgspec.json.decode(turn, type=Turn), conversation_id=conversation_id,
                                         turn_id=turn_id)
    return msgspec.json.encode(results)


@DBOS.workflow(name=WORKFLOW_NAME)
def _prompt_workflow(name: str, conversation_id: str, prompt: str, history: list[Any],
                     previous_id: str | None = None) -> bytes:
    loop = _loop(name)
    core = loop._core(conversation_id, history)
    core.previous_id = previous_id
    workflow_id = DBOS.workflow_id
    where = {"workflow_id": workflow_id, "executor_id": DBOS.executor_id, "loop": name}
    recovered = _first_start_step() != _PROCESS
    _log.emit(_log.INFO, "durable.prompt_started", conversation_id=conversation_id, recovered=recovered, **where)

    def request(body: dict[str, Any], step: int) -> tuple[Turn, int, str]:
        out = _request_step(name, conversation_id, body, step)
        if "error" in out:
            e = out["error"]
            raise ProviderError(e["message"], provider=e["provider"], status=e["status"], type=e["type"],
                                transient=False)
        # a request recorded without a turn identity (by an earlier version) keeps the one it was dispatched under
        turn_id = out.get("turn_id") or f"dbos:{workflow_id}:{step}"
        return msgspec.json.decode(out["turn"], type=Turn), out["attempts"], turn_id

    def dispatch(turn: Turn, turn_id: str) -> list[ToolResult]:
        raw = _dispatch_step(name, conversation_id, msgspec.json.encode(turn), turn_id)
        return msgspec.json.decode(raw, type=list[ToolResult])

    with structlog.contextvars.bound_contextvars(conversation_id=conversation_id):
        result = core.drive(prompt, request, dispatch)
    _log.emit(_log.INFO, "durable.prompt_finished", conversation_id=conversation_id, fallback=result.fallback,
              **where)
    return msgspec.json.encode(result)


#: DBOS's default ``max_recovery_attempts``
_DBOS_DEFAULT_ATTEMPTS = 100

#: this process: the first start of a workflow records it, a start elsewhere (or after a restart) is a recovery
_PROCESS = uuid.uuid4().hex


@DBOS.step(name="toolwire.durable.started")
def _first_start_step() -> str:
    """The process that first started this workflow (recorded: a resumed workflow gets the first one back)."""
    return _PROCESS
