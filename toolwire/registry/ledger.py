"""The idempotency ledger: a write runs at most once per key, across retries, threads and processes.

Protocol (small on purpose, so Redis and PostgreSQL ledgers can follow):

* ``claim(key, fingerprint="") -> None | LedgerRecord``: atomically record ``started`` for ``key``. None means
  this caller owns the key and may run the handler; otherwise the existing record is returned and nothing may
  run (``completed`` → its stored result is the answer; ``started`` → the outcome is unknown).
* ``complete(key, result)``: record ``completed`` with the ``ToolResult``, after the handler returned.
* ``get(key) -> None | LedgerRecord``.

Optional async twins (``AsyncLedger``): ``async aclaim(key, fingerprint="")``, ``async acomplete(key, result)`` and
``async aget(key)``, with the same answers and errors. ``Dispatcher.arun`` awaits ``aclaim``/``acomplete`` when the
ledger has them (``MemoryLedger``, ``SQLiteLedger`` and ``PostgresLedger`` do) and otherwise runs ``claim``/``complete`` in a worker
thread (``asyncio.to_thread``), so a ledger that has only the sync methods never blocks the event loop either. A
claim whose caller is cancelled must never commit, or must remove its row: the caller will not run the handler, and
a ``started`` row nobody completes answers ``outcome_unknown`` for good.

``fingerprint`` (tool name and arguments hash) is stored beside the key, so a key reused for a different call is
noticed rather than answered with another call's result.

Keys: ``LedgerKey(conversation_id, call_key)``. The dispatcher uses three kinds of ``call_key``:

* a call *instance* (``LedgerKey.for_call``): ``"call:" + JSON [turn, ref, tool name, arguments sha256]``,
  where ``turn`` identifies the model response the call came from (``"turn:" + turn_id`` given by the caller,
  else ``"response:" + response_id`` sent by the provider) and ``ref`` is ``"id:" + call_id`` (the provider's
  id) or ``"local:" + local_id`` (its position in the turn) when the provider sent none; a JSON array, so no
  choice of ids or names can make two different calls' keys equal. The same call dispatched again (a
  re-dispatch, a restarted process parsing the same bytes) has the same key; an identical call in a later turn,
  or a reused id with another tool or other arguments, has another.
* a tool's own key (``Tool(..., idempotency_key=fn)``): ``"key:" + tool name + ":" + fn(args)``, so the same
  action re-planned under a new call id finds the first one's record.
* a consumed approval: ``"approval:" + the approval's signature`` (it is never completed).
* the dispatched choice of a response with several choices: ``"choice:" + turn`` with the fingerprint
  ``"choice:" + the choice's index`` (claimed before anything of the turn runs, never completed: the first
  choice claimed is the only one that ever runs).
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import itertools
import math
import os
import sqlite3
import threading
import time
from typing import Any, Literal, Protocol, runtime_checkable

import msgspec

from ..types import ToolCall
from .errors import LedgerError
from .result import ToolResult

__all__ = ["LedgerKey", "LedgerRecord", "Ledger", "AsyncLedger", "MemoryLedger", "SQLiteLedger"]

Status = Literal["started", "completed"]


class LedgerKey(msgspec.Struct, frozen=True):
    """Identifies one effect: a conversation and one call in it."""

    conversation_id: str
    call_key: str

    @classmethod
    def for_call(cls, conversation_id: str, call: ToolCall, args_sha256: str, *, turn: str) -> "LedgerKey":
        """The key of one call instance: the turn's identity, the call's provider id (or, without one, its local
        id) and its arguments hash."""
        ref = "id:" + call.call_id if call.call_id else "local:" + call.local_id
        return cls(conversation_id, "call:" + msgspec.json.encode([turn, ref, call.name, args_sha256]).decode())

    @classmethod
    def for_idempotency_key(cls, conversation_id: str, tool_name: str, key: str) -> "LedgerKey":
        """The key of a write whose tool names its own idempotency key."""
        return cls(conversation_id, f"key:{tool_name}:{key}")

    @classmethod
    def for_approval(cls, conversation_id: str, signature: str) -> "LedgerKey":
        """The key that marks an approval as used."""
        return cls(conversation_id, "approval:" + signature)

    @classmethod
    def for_choice(cls, conversation_id: str, turn: str) -> "LedgerKey":
        """The key that records which choice of a response (turn identity ``turn``) was dispatched."""
        return cls(conversation_id, "choice:" + turn)


class LedgerRecord(msgspec.Struct, kw_only=True):
    """What the ledger knows about one key."""

    key: LedgerKey
    status: Status
    fingerprint: str = ""
    result: ToolResult | None = None
    started_at: float = 0.0
    completed_at: float | None = None


@runtime_checkable
class Ledger(Protocol):
    """The idempotency ledger protocol (see the module docstring)."""

    def claim(self, key: LedgerKey, fingerprint: str = "") -> LedgerRecord | None: ...

    def complete(self, key: LedgerKey, result: ToolResult) -> None: ...

    def get(self, key: LedgerKey) -> LedgerRecord | None: ...


@runtime_checkable
class AsyncLedger(Protocol):
    """The optional async part of the ledger protocol: coroutine twins of ``claim``, ``complete`` and ``get``
    (same arguments, answers and errors). ``Dispatcher.arun`` awaits ``aclaim``/``acomplete`` when a ledger has
    them, and runs the sync methods in a worker thread otherwise."""

    async def aclaim(self, key: LedgerKey, fingerprint: str = "") -> LedgerRecord | None: ...

    async def acomplete(self, key: LedgerKey, result: ToolResult) -> None: ...

    async def aget(self, key: LedgerKey) -> LedgerRecord | None: ...


class MemoryLedger:
    """An in-process ledger (a dict under a lock): exactly-once within one process and one dispatcher's life.

    The dispatcher's default when no ledger is given. Use ``SQLiteLedger`` (or a shared store) across processes
    or restarts. Its async twins (``aclaim``, ``acomplete``, ``aget``) never suspend, so ``arun`` never hands it to
    a worker thread and a cancelled ``arun`` never leaves a claim behind.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: dict[LedgerKey, LedgerRecord] = {}

    def claim(self, key: LedgerKey, fingerprint: str = "") -> LedgerRecord | None:
        with self._lock:
            rec = self._records.get(key)
            if rec is not None:
                return msgspec.structs.replace(rec)
            self._records[key] = LedgerRecord(key=key, status="started", fingerprint=fingerprint,
                                              started_at=time.time())
            return None

    def complete(self, key: LedgerKey, result: ToolResult) -> None:
        with self._lock:
            rec = self._records.get(key)
            if rec is None or rec.status != "started":
                raise LedgerError(f"cannot complete {key!r}: it is not started")
            rec.status = "completed"
            rec.result = result
            rec.completed_at = time.time()

    def get(self, key: LedgerKey) -> LedgerRecord | None:
        with self._lock:
            rec = self._records.get(key)
            return None if rec is None else msgspec.structs.replace(rec)

    # The async twins do the work at once, on the caller's thread, without ever suspending: a task cancelled
    # around ``aclaim`` either never claimed or got its claim back (a claim made on a worker thread for a caller
    # cancelled meanwhile would stay ``started`` for a write whose handler never ran).
    async def aclaim(self, key: LedgerKey, fingerprint: str = "") -> LedgerRecord | None:
        """``claim``, without suspending (the dict is in memory): a cancelled caller never strands a claim."""
        return self.claim(key, fingerprint)

    async def acomplete(self, key: LedgerKey, result: ToolResult) -> None:
        """``complete``, without suspending."""
        self.complete(key, result)

    async def aget(self, key: LedgerKey) -> LedgerRecord | None:
        """``get``, without suspending."""
        return self.get(key)


_SCHEMA = """
CREATE TABLE IF NOT EXISTS toolwire_ledger (
    conversation_id TEXT NOT NULL,
    call_key        TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('started', 'completed')),
    fingerprint     TEXT NOT NULL DEFAULT '',
    result          BLOB,
    started_at      REAL NOT NULL,
    completed_at    REAL,
    pid             INTEGER,
    PRIMARY KEY (conversation_id, call_key)
)
"""

_result_decoder = msgspec.json.Decoder(ToolResult)


def record_from_row(key: LedgerKey, row: tuple) -> LedgerRecord:
    """A ``LedgerRecord`` from a ``(status, fingerprint, result blob, started_at, completed_at)`` row, the shape
    every SQL ledger stores; a status or result that cannot be read is a ``LedgerError``."""
    status, fingerprint, blob, started_at, completed_at = row
    if status not in ("started", "completed"):
        raise LedgerError(f"ledger row for {key!r} has an unknown status {status!r}")
    try:
        result = _result_decoder.decode(bytes(blob)) if blob is not None else None
    except (msgspec.DecodeError, TypeError, ValueError) as exc:
        raise LedgerError(f"ledger row for {key!r} holds a result that cannot be read ({exc})") from exc
    return LedgerRecord(key=key, status=status, fingerprint=fingerprint, result=result,
                        started_at=started_at, completed_at=completed_at)


#: the pauses between attempts to take the database's write lock for a claim (those of SQLite's own busy handler,
#: the last repeated): waited on an event, so a cancelled claim stops waiting at once
_LOCK_PAUSES = (0.001, 0.002, 0.005, 0.01, 0.015, 0.02, 0.025, 0.025, 0.025, 0.05, 0.05, 0.1)
#: how often a cancelled claim queued behind this process's other ledger operations looks whether it may stop
_QUEUE_POLL = 0.01
#: how long the removal of a cancelled claim's row waits for the database (then it is kept for the next claim)
_RELEASE_WAIT = 0.3
_UNRELEASED_MAX = 10_000
_REMOVE = ("DELETE FROM toolwire_ledger WHERE conversation_id = ? AND call_key = ? AND status = 'started'"
           " AND pid = ? AND started_at = ?")

_stamp_lock = threading.Lock()
_last_stamp = 0.0


def _stamp() -> float:
    """``time.time()``, strictly increasing in this process: with the pid, it tells one claim's row from any other
    claim of the same key."""
    global _last_stamp
    with _stamp_lock:
        now = time.time()
        _last_stamp = now if now > _last_stamp else math.nextafter(_last_stamp, math.inf)
        return _last_stamp


class _Stopped(Exception):
    """A claim's caller was cancelled before the claim committed: it rolls back (or removes its row) and ends."""


class _Ticket:
    """What the task awaiting an async claim and the thread running it tell each other, under ``lock``: whether the
    task was cancelled (``cancelled``), and how far the claim got (``state``: ``open``, then ``committing`` once
    the claim decided to commit, then ``done``, with ``claimed`` telling whether the committed row is its own)."""

    __slots__ = ("lock", "cancelled", "state", "claimed", "stamp")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.cancelled = threading.Event()
        self.state = "open"
        self.claimed = False
        self.stamp = 0.0

    def cancel(self) -> str:
        """Mark the claim cancelled; the state it had: ``open`` (it will never commit), ``committing`` (it removes
        its row itself) or ``done`` (it ended first: the task removes the row when ``claimed``)."""
        with self.lock:
            self.cancelled.set()
            return self.state

    def commit(self, stamp: float) -> None:
        """The claim is about to commit its row (``stamp``): raises ``_Stopped`` instead when it was cancelled."""
        with self.lock:
            if self.cancelled.is_set():
                raise _Stopped
            self.state, self.stamp = "committing", stamp

    def committed(self, claimed: bool) -> None:
        """The claim committed: raises ``_Stopped`` when it was cancelled meanwhile (its row is then removed)."""
        with self.lock:
            if self.cancelled.is_set():
                raise _Stopped
            self.state, self.claimed = "done", claimed


class SQLiteLedger:
    """A ledger in one SQLite file, safe across threads and processes.

    WAL mode, ``synchronous=FULL`` (a ``started`` record is durable before the handler runs), every write in a
    ``BEGIN IMMEDIATE`` transaction, and the claim is a single ``INSERT … ON CONFLICT DO NOTHING`` on the
    primary key: of any number of processes racing on one key, exactly one claims it. Connections are opened
    per process (a ledger object inherited through ``fork`` reopens its file) and shared by threads under a lock.
    ``timeout``: seconds an operation waits for the database's write lock (held by another connection's write).

    A claim never strands a write: one that does not return (its ``aclaim`` cancelled by the caller, a
    ``KeyboardInterrupt`` in ``claim``) leaves no row of its own, since the caller will not run the handler and a
    ``started`` row nobody completes would answer ``outcome_unknown`` for good. ``aclaim`` runs the claim on a
    worker thread; cancelled while the claim waits for the write lock, the claim stops waiting (its waits are on
    an event, not in SQLite's busy handler, which nothing interrupts) and never commits; cancelled while it
    commits or just after, the row is removed before the cancellation goes on, however many times the caller is
    cancelled meanwhile. A removal that cannot get the lock within 0.3 s is kept and tried again
    before this process's next claim, within that claim's ``timeout``; it removes only the row of the claim that
    wrote it (same pid and ``started_at``), never a later claim's.
    """

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 30.0) -> None:
        self.path = os.fspath(path)
        self.timeout = timeout
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid: int | None = None
        #: rows of claims that did not return whose removal failed: (key, pid, started_at)
        self._unreleased: collections.deque[tuple[LedgerKey, int, float]] = collections.deque(
            maxlen=_UNRELEASED_MAX)
        with self._lock:
            self._connection()

    # ---- connection -----------------------------------------------------------------------------------
    def _connection(self) -> sqlite3.Connection:
        pid = os.getpid()
        if self._conn is not None and self._pid == pid:
            return self._conn
        try:
            conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise LedgerError(f"cannot put {self.path!r} in WAL mode (got {mode!r})")
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute(_SCHEMA)
        except sqlite3.Error as exc:
            raise LedgerError(f"cannot open ledger {self.path!r}: {exc}") from exc
        self._conn = conn  # a connection inherited from a parent process is abandoned, never used or closed
        self._pid = pid
        return conn

    def close(self) -> None:
        """Close this process's connection (it is reopened on next use)."""
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    # ---- protocol -------------------------------------------------------------------------------------
    def claim(self, key: LedgerKey, fingerprint: str = "") -> LedgerRecord | None:
        with self._lock:
            return self._claim(key, fingerprint, None)

    async def aclaim(self, key: LedgerKey, fingerprint: str = "") -> LedgerRecord | None:
        """``claim`` on a worker thread, so the event loop never waits for the database lock. Cancelled, the claim
        never commits, or its row is removed before the cancellation goes on (see the class docstring)."""
        loop = asyncio.get_running_loop()
        ticket = _Ticket()
        work = loop.run_in_executor(None, contextvars.copy_context().run, self._claim_for, key, fingerprint, ticket)
        work.add_done_callback(_retrieved)  # once the caller is cancelled, its failure is nobody's
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:
            state = ticket.cancel()
            if state != "open":  # its row may be committed: wait for its removal, whoever does it
                waits: list[asyncio.Future[Any]] = [work]
                if state == "done" and ticket.claimed:  # it ended before the cancellation: the row is ours to remove
                    removal = loop.run_in_executor(None, self._remove_claimed, key, ticket.stamp)
                    removal.add_done_callback(_retrieved)
                    waits.append(removal)
                await _unhurried(waits)
            raise

    async def acomplete(self, key: LedgerKey, result: ToolResult) -> None:
        """``complete`` on a worker thread."""
        await asyncio.to_thread(self.complete, key, result)

    async def aget(self, key: LedgerKey) -> LedgerRecord | None:
        """``get`` on a worker thread."""
        return await asyncio.to_thread(self.get, key)

    def _claim_for(self, key: LedgerKey, fingerprint: str, ticket: _Ticket) -> LedgerRecord | None:
        """``aclaim``'s claim, on a worker thread: it waits for this process's other operations only as long as its
        caller is not cancelled."""
        while not self._lock.acquire(timeout=_QUEUE_POLL):
            if ticket.cancelled.is_set():
                raise _Stopped
        try:
            return self._claim(key, fingerprint, ticket)
        finally:
            self._lock.release()

    def _claim(self, key: LedgerKey, fingerprint: str, ticket: _Ticket | None) -> LedgerRecord | None:
        """The claim, under ``self._lock``. A claim that raises (cancelled, interrupted, failed) leaves no row of its
        own: a transaction still open is rolled back; a row already committed is removed."""
        stop = None if ticket is None else ticket.cancelled
        conn = self._connection()
        claimed = False
        try:
            if conn.in_transaction:  # left open by an operation interrupted before its rollback
                self._abort(conn)
                conn = self._connection()
            deadline = time.monotonic() + self.timeout  # one deadline for the claim and the removals it retries
            self._release_pending(conn, deadline, stop)
            stamp = _stamp()
            try:
                self._begin(conn, deadline, stop)
                cur = conn.execute(
                    "INSERT INTO toolwire_ledger (conversation_id, call_key, status, fingerprint, started_at,"
                    " pid) VALUES (?, ?, 'started', ?, ?, ?) ON CONFLICT (conversation_id, call_key) DO NOTHING",
                    (key.conversation_id, key.call_key, fingerprint, stamp, os.getpid()))
                claimed = cur.rowcount == 1
                row = None if claimed else self._select(conn, key)
                if ticket is not None:
                    ticket.commit(stamp)
                conn.execute("COMMIT")
                if ticket is not None:
                    ticket.committed(claimed)
            except BaseException:
                if conn.in_transaction:
                    self._abort(conn)  # nothing was committed
                elif claimed:  # committed, but the caller will not run the handler: the row must go
                    self._remove(conn, key, stamp)
                raise
        except sqlite3.Error as exc:
            raise LedgerError(f"ledger claim failed for {key!r}: {exc}") from exc
        return None if claimed else self._record(key, row)

    def complete(self, key: LedgerKey, result: ToolResult) -> None:
        try:
            blob = msgspec.json.encode(result)
        except (TypeError, ValueError, OverflowError, RecursionError) as exc:
            raise LedgerError(f"ledger complete failed for {key!r}: the result cannot be stored ({exc})") from exc
        with self._lock:
            conn = self._connection()
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    cur = conn.execute(
                        "UPDATE toolwire_ledger SET status = 'completed', result = ?, completed_at = ?"
                        " WHERE conversation_id = ? AND call_key = ? AND status = 'started'",
                        (blob, time.time(), key.conversation_id, key.call_key))
                    updated = cur.rowcount == 1
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                raise LedgerError(f"ledger complete failed for {key!r}: {exc}") from exc
        if not updated:
            raise LedgerError(f"cannot complete {key!r}: it is not started")

    def get(self, key: LedgerKey) -> LedgerRecord | None:
        with self._lock:
            conn = self._connection()
            try:
                row = self._select(conn, key)
            except sqlite3.Error as exc:
                raise LedgerError(f"ledger read failed for {key!r}: {exc}") from exc
        return None if row is None else self._record(key, row)

    # ---- helpers --------------------------------------------------------------------------------------
    def _begin(self, conn: sqlite3.Connection, deadline: float, stop: threading.Event | None) -> None:
        """``BEGIN IMMEDIATE``, waiting for the write lock until ``deadline``; raises ``_Stopped`` as soon as ``stop``
        is set. SQLite's busy handler is off meanwhile: nothing can interrupt its waits."""
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            for attempt in itertools.count():
                try:
                    conn.execute("BEGIN IMMEDIATE")
                    return
                except sqlite3.OperationalError as exc:
                    left = deadline - time.monotonic()
                    if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY or left <= 0:
                        raise
                    pause = min(_LOCK_PAUSES[min(attempt, len(_LOCK_PAUSES) - 1)], left)
                    if stop is None:
                        time.sleep(pause)
                    elif stop.wait(pause):
                        raise _Stopped from None
        finally:
            conn.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")

    def _abort(self, conn: sqlite3.Connection) -> None:
        """Roll back ``conn``'s transaction; when that fails, drop the connection (closing it ends the transaction
        and lets go of the file's lock; the next operation opens another)."""
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            if self._conn is conn:
                self._conn = None
            conn.close()

    def _delete(self, conn: sqlite3.Connection, row: tuple[LedgerKey, int, float], deadline: float,
                stop: threading.Event | None) -> None:
        """Delete ``row`` (key, pid, started_at) if it is still that claim's ``started`` row; its transaction ends
        whatever happens."""
        key, pid, stamp = row
        try:
            self._begin(conn, deadline, stop)
            conn.execute(_REMOVE, (key.conversation_id, key.call_key, pid, stamp))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                self._abort(conn)
            raise

    def _remove(self, conn: sqlite3.Connection, key: LedgerKey, stamp: float) -> None:
        """Remove the row a claim that does not return committed (under ``self._lock``); kept for the next claim when
        the database cannot be had within ``_RELEASE_WAIT``, or the removal is interrupted."""
        row = (key, os.getpid(), stamp)
        try:
            self._delete(conn, row, time.monotonic() + _RELEASE_WAIT, None)
        except BaseException as exc:  # noqa: BLE001 - the claim's own failure is what its caller gets
            self._unreleased.append(row)
            if not isinstance(exc, Exception):
                raise

    def _remove_claimed(self, key: LedgerKey, stamp: float) -> None:
        """Remove the row of an async claim whose caller was cancelled as the claim returned (on a worker thread)."""
        if not self._lock.acquire(timeout=_RELEASE_WAIT):
            self._unreleased.append((key, os.getpid(), stamp))
            return
        try:
            try:
                conn = self._connection()
            except LedgerError:
                self._unreleased.append((key, os.getpid(), stamp))
                return
            self._remove(conn, key, stamp)
        finally:
            self._lock.release()

    def _release_pending(self, conn: sqlite3.Connection, deadline: float, stop: threading.Event | None) -> None:
        """Remove the rows whose removal failed before (under ``self._lock``, before a claim): the same call
        dispatched again in this process then finds no row and runs, once. What cannot be removed by ``deadline``
        is kept for the next claim."""
        while self._unreleased:
            try:
                self._delete(conn, self._unreleased[0], deadline, stop)
            except sqlite3.Error:
                return  # the database is still busy: the claim itself tries next, within what is left
            self._unreleased.popleft()

    @staticmethod
    def _select(conn: sqlite3.Connection, key: LedgerKey) -> tuple | None:
        return conn.execute(
            "SELECT status, fingerprint, result, started_at, completed_at FROM toolwire_ledger"
            " WHERE conversation_id = ? AND call_key = ?", (key.conversation_id, key.call_key)).fetchone()

    @staticmethod
    def _record(key: LedgerKey, row: tuple | None) -> LedgerRecord:
        if row is None:  # pragma: no cover - a row that conflicted cannot vanish inside the transaction
            raise LedgerError(f"ledger row for {key!r} disappeared")
        return record_from_row(key, row)

    def __repr__(self) -> str:
        return f"SQLiteLedger({self.path!r})"


async def _unhurried(futures: list[asyncio.Future[Any]]) -> None:
    """Wait until every one of ``futures`` has ended, however many times the waiting task is cancelled meanwhile
    (each is work on a thread that ends on its own, within a bounded time)."""
    while not all(f.done() for f in futures):
        try:
            await asyncio.wait(futures)
        except asyncio.CancelledError:
            pass


def _retrieved(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()
