"""A ledger in PostgreSQL: the SQLite ledger's contract, shared by every process that can reach one server.

Needs the ``pg`` extra (``pip install 'toolwire[pg]'``: psycopg 3 and psycopg_pool). Importing this module never
needs them; constructing a ``PostgresLedger`` does.

Each operation is a step generator (see ``_steps``): its SQL and the handling of each answer are written once and
performed by the sync methods on this process's ``ConnectionPool`` and by the async ones (``aclaim``,
``acomplete``, ``aget``) on the running event loop's ``AsyncConnectionPool``; ``PostgresLedger._operation``
wraps each in the retries that carry it over a server restart.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import heapq
import itertools
import math
import os
import re
import socket
import threading
import time
import urllib.parse
import uuid
import weakref
from typing import Any, Awaitable, Callable, NamedTuple, TypeVar

import msgspec

from .. import _log
from ._steps import Steps, adrive, drive
from .errors import LedgerError
from .ledger import LedgerKey, LedgerRecord, record_from_row
from .result import ToolResult

__all__ = ["PostgresLedger"]

T = TypeVar("T")

_INSTALL_HINT = "PostgresLedger needs psycopg 3 and psycopg_pool: pip install 'toolwire[pg]'"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS toolwire_ledger (
    conversation_id TEXT NOT NULL,
    call_key        TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('started', 'completed')),
    fingerprint     TEXT NOT NULL DEFAULT '',
    result          BYTEA,
    started_at      DOUBLE PRECISION NOT NULL,
    completed_at    DOUBLE PRECISION,
    pid             INTEGER,
    claim_token     TEXT,
    PRIMARY KEY (conversation_id, call_key)
)
"""
# a table created before the claim token existed gets the column (without the ALTER's exclusive lock when it has it)
_HAS_TOKEN = ("SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('toolwire_ledger') AND attname = 'claim_token'"
              " AND NOT attisdropped")
_HAS_TABLE = "SELECT to_regclass('toolwire_ledger') IS NOT NULL"
_ADD_TOKEN = "ALTER TABLE toolwire_ledger ADD COLUMN IF NOT EXISTS claim_token TEXT"
# serializes concurrent CREATE TABLE IF NOT EXISTS (which can otherwise fail with a unique violation)
_SCHEMA_LOCK_ID = 0x746F6F6C77697265  # "toolwire"

_CLAIM = ("INSERT INTO toolwire_ledger (conversation_id, call_key, status, fingerprint, started_at, pid, claim_token)"
          " VALUES (%s, %s, 'started', %s, %s, %s, %s) ON CONFLICT (conversation_id, call_key) DO NOTHING")
_SELECT = ("SELECT status, fingerprint, result, started_at, completed_at, claim_token FROM toolwire_ledger"
           " WHERE conversation_id = %s AND call_key = %s")
_COMPLETE = ("UPDATE toolwire_ledger SET status = 'completed', result = %s, completed_at = %s"
             " WHERE conversation_id = %s AND call_key = %s AND status = 'started'")
_RELEASE = ("DELETE FROM toolwire_ledger WHERE conversation_id = %s AND call_key = %s AND claim_token = %s"
            " AND status = 'started'")
_PURGE = "DELETE FROM toolwire_ledger WHERE status = 'completed' AND completed_at IS NOT NULL AND completed_at < %s"

#: the first pause before retrying an operation the server did not answer, doubled each time up to the cap
_RETRY_FIRST = 0.05
_RETRY_CAP = 1.0
#: the longest one attempt waits for a pooled connection, and the longest a pool retries one lost connection in
#: the background before the next attempt asks for a new one: while the server is unreachable a connection is
#: tried every second or two, so a restarted server is used again within about that long
_RECONNECT = 2.0

#: how long a failed claim tries to remove its own row (a committed insert whose reply was lost)
_RELEASE_WAIT = 0.3
#: how long an async operation cancelled by its caller waits for the server's answer to a cancel request, and
#: then for the statement to end, before it shuts the connection's socket down
_CANCEL_WAIT = 0.5
_UNRELEASED_MAX = 10_000
#: how long past an operation's deadline a connection that has not answered is shut down (the server's
#: statement_timeout, equal to the ledger's timeout, normally ends a slow statement first)
_HARD_SLACK = 0.5
#: the longest the check of a pooled connection may wait for the server (a frozen server would hold it forever)
_CHECK_LIMIT = 0.5

#: pools inherited through fork: never used, closed or collected in the child (closing one there would end the
#: parent's server sessions, whose sockets the child shares)
_abandoned: list[Any] = []


class _Attempt(NamedTuple):
    """A request of ``PostgresLedger._operation``: run ``steps`` on a pooled connection."""

    steps: Steps[Any]
    deadline: float

    def hard_limit(self) -> float:
        """Seconds after which this attempt's connection is shut down if the server has not answered: past the
        deadline, with the slack the server's own statement timeout needs to answer first."""
        return max(self.deadline - time.monotonic(), 0.0) + _HARD_SLACK

    def wait(self) -> float:
        """Seconds this attempt may wait for a connection: what is left until the deadline (a little at least, so
        the pool answers at once), at most ``_RECONNECT``."""
        return min(max(self.deadline - time.monotonic(), 0.001), _RECONNECT)


class _Pause(NamedTuple):
    """A request of ``PostgresLedger._operation``: sleep before the next attempt."""

    seconds: float


class PostgresLedger:
    """A ledger in one PostgreSQL table (``toolwire_ledger``, created if missing), safe across threads, processes
    and hosts.

    ``dsn``: a libpq connection string or URL. ``pool_size``: the most connections this process holds per pool
    (a ``psycopg_pool.ConnectionPool`` shared by threads, and one ``AsyncConnectionPool`` per event loop that
    uses the async methods). ``timeout``: seconds an operation may take to reach the server, retries included
    (also each connection's connect timeout).

    The claim is one ``INSERT … ON CONFLICT (conversation_id, call_key) DO NOTHING``, then the existing row when
    the insert did nothing: of any number of processes racing on one key, exactly one claims it. ``complete``
    updates only a ``started`` row. Results are stored as msgspec JSON in a ``bytea`` column. Each statement
    commits on its own (the connections are in autocommit mode).

    Async twins: ``aclaim``, ``acomplete`` and ``aget`` (the optional ``AsyncLedger`` part of the protocol, which
    ``Dispatcher.arun`` awaits) run the same SQL with the same answers and errors through psycopg's async API, on
    an ``AsyncConnectionPool`` of the running event loop (opened there on first use, one per loop and process).
    The pool is closed when its loop ends under ``asyncio.run`` (which cancels the loop's tasks) or by ``await
    aclose()``; one whose loop was closed otherwise is dropped at the next use.

    A server restart (or any lost connection) is survived: the pools check each connection before handing it out
    (a broken one is discarded and replaced), and an operation that fails on the connection (an
    ``OperationalError``: connection lost, server shutting down or starting, no connection within the time) is
    retried after a short pause (50 ms, doubling up to 1 s) until ``timeout`` seconds have passed since it began;
    only then is it a ``LedgerError``. While the server is unreachable a new connection is tried every second or
    two, so a restarted server is used again within about two seconds. Each retry is logged (``ledger.retry``). A failure that is not about the connection (a value the server refuses, a
    row that cannot be read) is a ``LedgerError`` at once. A retry cannot always know whether the failed attempt
    was committed before its reply was lost, so:

    * each claim writes a fresh random ``claim_token`` with its row; a retried claim that finds the row holding
      its own token knows the row is its own and answers None (claimed), never "started by someone else" (which
      the dispatcher would answer ``outcome_unknown`` for a claim that is in fact ours). The column is added to
      an existing table when the ledger opens (``ALTER TABLE … ADD COLUMN IF NOT EXISTS``; rows written before
      have none, which no token matches);
    * a retried ``complete`` that finds the row already completed with exactly the result it was storing has
      succeeded (its first attempt committed); any other state is still a ``LedgerError``.

    Every failure is a ``LedgerError`` (never a psycopg exception). The constructor creates or upgrades the table
    in one attempt: a server that cannot be reached then is a ``LedgerError`` at once.

    The pools are opened per process: a ledger inherited through ``fork`` opens its own in the child and never
    touches the parent's. ``close()`` closes this process's sync pool (it is reopened on next use).
    """

    def __init__(self, dsn: str, *, pool_size: int = 4, timeout: float = 30.0) -> None:
        try:
            import psycopg
            import psycopg_pool
        except ImportError as exc:
            raise LedgerError(f"{_INSTALL_HINT} ({exc})") from exc
        if not isinstance(pool_size, int) or isinstance(pool_size, bool) or pool_size < 1:
            raise LedgerError(f"pool_size must be a positive int, got {pool_size!r}")
        if not _finite(timeout) or not timeout > 0:
            raise LedgerError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self._psycopg = psycopg
        self._pool_mod = psycopg_pool
        _register_secrets(psycopg, dsn)
        #: every failure that becomes a LedgerError (UnicodeError: text the server's encoding cannot hold)
        self._errors: tuple[type[BaseException], ...] = (psycopg.Error, OSError, UnicodeError)
        #: failures of the connection rather than of the statement: retried until the deadline
        self._transient: tuple[type[BaseException], ...] = (psycopg.OperationalError, OSError)
        self.dsn = dsn
        self.pool_size = pool_size
        self.timeout = float(timeout)
        self._where = _describe(psycopg, dsn)
        self._lock = threading.Lock()
        self._pool: Any = None
        self._pid: int | None = None
        self._apools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()
        self._apid: int | None = None
        #: loops whose pool was closed as they end (see ``_loop_pool``)
        self._ending: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()
        #: failed claims whose rows may exist (committed, reply lost) and could not be removed yet
        self._unreleased: collections.deque[tuple[LedgerKey, str]] = collections.deque(maxlen=_UNRELEASED_MAX)
        self._connect_kwargs = {"autocommit": True, "connect_timeout": max(2, math.ceil(self.timeout))}
        #: the pooled connections that carry this ledger's session settings (see ``_session_settings``)
        self._set_up: weakref.WeakSet[Any] = weakref.WeakSet()
        self._create_schema()

    # ---- connections ----------------------------------------------------------------------------------
    def _create_schema(self) -> None:
        """Create or upgrade the table, within ``timeout`` (libpq's connect timeout is whole seconds, at least
        two, and per host: the attempt runs on a thread that is abandoned, and ends on its own, past it)."""
        box: list[BaseException | None] = []

        def attempt() -> None:
            try:
                self._create_schema_now()
                box.append(None)
            except BaseException as exc:  # noqa: BLE001 - handed to the constructor's thread
                box.append(exc)

        worker = threading.Thread(target=attempt, name="toolwire-ledger-open", daemon=True)
        worker.start()
        worker.join(self.timeout + _HARD_SLACK)
        if not box:
            raise LedgerError(f"cannot open ledger {self._where}: no answer within {self.timeout:g} s")
        if box[0] is not None:
            raise box[0]

    def _create_schema_now(self) -> None:
        try:
            with self._psycopg.connect(self.dsn, **self._connect_kwargs) as conn:
                if conn.execute(_HAS_TABLE).fetchone()[0] and conn.execute(_HAS_TOKEN).fetchone() is not None:
                    return  # nothing to create: a role that may only read and write rows can use the ledger
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK_ID,))
                    conn.execute(_SCHEMA)
                    if conn.execute(_HAS_TOKEN).fetchone() is None:
                        conn.execute(_ADD_TOKEN)
        except self._errors as exc:
            raise LedgerError(f"cannot open ledger {self._where}: {_reason(exc)}") from exc

    def _pool_options(self, pool_class: Any) -> dict[str, Any]:
        """The options of every pool: the same size, waits and connection settings, and a check of each
        connection before it is handed out (a connection a restart broke is discarded, not used)."""
        is_async = pool_class is self._pool_mod.AsyncConnectionPool
        return dict(min_size=1, max_size=self.pool_size, timeout=self.timeout, kwargs=dict(self._connect_kwargs),
                    open=False, name="toolwire-ledger", check=_acheck if is_async else _check,
                    reconnect_timeout=min(self.timeout, _RECONNECT))

    def _session_settings(self) -> tuple[str, tuple]:
        """Statements and lock waits end on the server after ``timeout`` (a table locked by a migration, a
        slow server): the operation then fails like a lost connection, within its deadline.

        Sent by the first operation on each connection, under that operation's deadline, rather than by the
        pool's ``configure`` hook: the pool runs that hook on its own worker, where a server that stops answering
        would hold the worker (one of three) forever, and where the task cancelled at the end of ``asyncio.run``
        makes psycopg wait ten seconds for a cancel request the server never answers."""
        ms = max(1, int(self.timeout * 1000))
        return "SELECT set_config('statement_timeout', %s, false), set_config('lock_timeout', %s, false)", \
            (f"{ms}ms", f"{ms}ms")

    def _sync_pool(self) -> Any:
        """This process's sync pool (opened here, once per process)."""
        pid = os.getpid()
        with self._lock:
            if self._pool is None or self._pid != pid:
                if self._pool is not None:
                    _abandoned.append(self._pool)
                    self._pool = None
                pool = self._pool_mod.ConnectionPool(self.dsn, **self._pool_options(self._pool_mod.ConnectionPool))
                pool.open()
                self._pool, self._pid = pool, pid
            return self._pool

    def _loop_pool(self) -> tuple[Any, bool]:
        """The running event loop's async pool in this process (created here; opened by its first user), with
        the task that closes it when the loop ends (see ``_close_with_loop``); and whether it is a pool of its
        own for one attempt, to be closed by it: on a loop whose pool was closed as the loop ends (a task's
        ``finally`` that uses the ledger while ``asyncio.run`` cancels everything), where a new pool and closer
        would outlive the loop with their connections."""
        loop = asyncio.get_running_loop()
        with self._lock:
            self._forget_loop_pools()
            if loop in self._ending:
                self._apools.pop(loop, None)
                return self._pool_mod.AsyncConnectionPool(
                    self.dsn, **self._pool_options(self._pool_mod.AsyncConnectionPool)), True
            entry = self._apools.get(loop)
            if entry is None:
                pool = self._pool_mod.AsyncConnectionPool(
                    self.dsn, **self._pool_options(self._pool_mod.AsyncConnectionPool))
                closer = loop.create_task(self._close_with_loop(loop, pool), name="toolwire-ledger-pool-closer")
                entry = self._apools[loop] = (pool, closer)
            return entry[0], False

    async def _close_with_loop(self, loop: asyncio.AbstractEventLoop, pool: Any) -> None:
        """Wait, as long as the loop runs, to close ``pool``: when ``asyncio.run`` ends it cancels every task of
        the loop, this one included. Without it a pool worker busy connecting at that moment takes the
        cancellation as a failed connection and waits for more work, and ``asyncio.run`` never returns."""
        try:
            await loop.create_future()  # never set: this waits until the task is cancelled
        finally:
            # no lock here: this ``finally`` also runs when the garbage collector finalizes a closer destroyed with
            # its loop, possibly on a thread that holds the lock (``_loop_pool``); the entry is dropped there
            self._ending.add(loop)
            try:
                await pool.close()  # tells every worker to stop, including one that ignored the cancellation
            except asyncio.CancelledError:  # a worker that was cancelled: the others were told to stop all the same
                pass

    def _forget_loop_pools(self) -> None:
        """Under the lock: drop the async pools of closed loops (a loop closed without the ``asyncio.run``
        ending that closes its pool: its connections end when the pool is collected), and abandon those
        inherited through fork."""
        pid = os.getpid()
        if self._apid != pid:
            _abandoned.extend(self._apools.values())
            self._apools = weakref.WeakKeyDictionary()
            self._apid = pid
        for dead in [loop for loop in self._apools if loop.is_closed()]:
            del self._apools[dead]

    def close(self) -> None:
        """Close this process's sync pool (it is reopened on next use) and drop the async pools of event loops
        that have closed (``aclose`` closes the running loop's)."""
        with self._lock:
            self._forget_loop_pools()
            pool, pid = self._pool, self._pid
            self._pool = None
        if pool is not None and pid == os.getpid():
            pool.close()

    async def aclose(self) -> None:
        """Close the running event loop's async pool (another is opened on next use)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            self._forget_loop_pools()
            entry = self._apools.pop(loop, None)
        if entry is not None:
            closer = entry[1]
            closer.cancel()
            await asyncio.wait((closer,))  # its ``finally`` closes the pool and marks the loop as ending ...
            self._ending.discard(loop)  # ... which it is not: the next use opens a new pool for the loop

    def __enter__(self) -> "PostgresLedger":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> "PostgresLedger":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ---- performing steps -----------------------------------------------------------------------------
    def _perform(self, request: _Attempt | _Pause) -> Any:
        if isinstance(request, _Pause):
            return time.sleep(request.seconds)
        with self._sync_pool().connection(timeout=request.wait()) as conn:
            # a server that stops answering an open connection (a frozen host, a partition) would hold this
            # thread forever: past the deadline the connection's socket is shut down, which fails the statement
            guard = _WATCHDOG.arm(request.hard_limit(), conn)
            try:
                return drive(self._on(conn, request.steps), functools.partial(_execute, conn))
            finally:
                guard.cancel()

    async def _aperform(self, request: _Attempt | _Pause) -> Any:
        if isinstance(request, _Pause):
            return await asyncio.sleep(request.seconds)
        pool, temporary = self._loop_pool()
        try:
            await pool.open()  # once per pool; later calls return at once
            async with pool.connection(timeout=request.wait()) as conn:
                guard = asyncio.get_running_loop().call_later(request.hard_limit(), _shut_down, conn)
                try:
                    return await _promptly(conn, adrive(self._on(conn, request.steps),
                                                        functools.partial(_aexecute, conn)))
                finally:
                    guard.cancel()
        finally:
            if temporary:
                await pool.close()

    def _on(self, conn: Any, steps: Steps[Any]) -> Steps[Any]:
        """``steps`` on ``conn``, after the session settings when ``conn`` does not carry them yet."""
        if conn not in self._set_up:
            yield self._session_settings()
            self._set_up.add(conn)
        return (yield from steps)

    def _operation(self, op: str, key: LedgerKey | None, make_steps: Callable[[bool], Steps[Any]],
                   deadline: float | None = None) -> Steps[Any]:
        """One ledger operation: ``make_steps(retried)`` run in attempts until one is answered (see the class
        docstring), until ``deadline`` (default: ``timeout`` from now); every failure is a ``LedgerError`` naming
        ``op`` and ``key``."""
        if deadline is None:
            deadline = time.monotonic() + self.timeout
        try:
            for attempt in itertools.count():
                try:
                    return (yield _Attempt(make_steps(attempt > 0), deadline))
                except self._transient as exc:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise
                    pause = min(_RETRY_FIRST * 2 ** min(attempt, 8), _RETRY_CAP, left)
                    _log.emit(_log.WARNING, "ledger.retry", ledger=self._where, op=op, attempt=attempt + 1,
                              delay=round(pause, 3), error=_reason(exc))
                    yield _Pause(pause)
        except self._errors as exc:
            where = "" if key is None else f" for {key!r}"
            raise LedgerError(f"ledger {op} failed{where}: {_reason(exc)}") from exc

    # ---- protocol -------------------------------------------------------------------------------------
    def _claim(self, key: LedgerKey, fingerprint: str) -> Steps[LedgerRecord | None]:
        token = uuid.uuid4().hex  # one per claim, the same in each of its attempts
        # one deadline for the claim and the removals it does first: together they take at most ``timeout``
        deadline = time.monotonic() + self.timeout
        if self._unreleased:
            yield from self._release_pending(deadline)
        try:
            return (yield from self._operation("claim", key, lambda retried: _claim_steps(key, fingerprint, token),
                                               deadline))
        except GeneratorExit:
            raise
        except BaseException:
            # the claim failed (or its task was cancelled), so the caller will not run the handler; but an attempt
            # may have committed the row before its reply was lost: remove a row holding our token, or every later
            # dispatch would answer outcome_unknown for a write that never ran. If the server cannot be reached
            # now either, the row stays: the safe side (never a second effect).
            try:
                yield _Attempt(_release_steps(key, token), time.monotonic() + _RELEASE_WAIT)
            except BaseException as exc:  # noqa: BLE001 - best effort; the claim's own failure is what the caller gets
                with self._lock:  # tried again before this process's next claim (also when cancelled again now)
                    self._unreleased.append((key, token))
                if isinstance(exc, GeneratorExit):
                    raise
            raise

    def _release_pending(self, deadline: float) -> Steps[None]:
        """Remove the rows of failed claims whose removal failed too (the server was gone): before the next
        claim, so the same call dispatched again in this process finds no row of ours and runs, once. Within the
        claim's ``deadline``; what is not removed (unreachable, or the claim cancelled) is kept for the next."""
        with self._lock:
            pending, self._unreleased = list(self._unreleased), collections.deque(maxlen=_UNRELEASED_MAX)
        for i, (key, token) in enumerate(pending):
            try:  # with the retries of any operation: a server that answers the claim answers this first
                yield from self._operation("release", key, functools.partial(_released, key, token), deadline)
            except BaseException as exc:  # noqa: BLE001 - still unreachable, or cancelled: keep them for the next
                with self._lock:
                    self._unreleased.extend(pending[i:])
                if not isinstance(exc, Exception):
                    raise
                return

    def _complete(self, key: LedgerKey, result: ToolResult) -> Steps[None]:
        try:
            blob = msgspec.json.encode(result)
        except (TypeError, ValueError, OverflowError, RecursionError) as exc:
            raise LedgerError(f"ledger complete failed for {key!r}: the result cannot be stored ({exc})") from exc
        return self._operation("complete", key, lambda retried: _complete_steps(key, blob, retried))

    def _get(self, key: LedgerKey) -> Steps[LedgerRecord | None]:
        return self._operation("read", key, lambda retried: _get_steps(key))

    def claim(self, key: LedgerKey, fingerprint: str = "") -> LedgerRecord | None:
        return drive(self._claim(key, fingerprint), self._perform)

    def complete(self, key: LedgerKey, result: ToolResult) -> None:
        drive(self._complete(key, result), self._perform)

    def get(self, key: LedgerKey) -> LedgerRecord | None:
        return drive(self._get(key), self._perform)

    async def aclaim(self, key: LedgerKey, fingerprint: str = "") -> LedgerRecord | None:
        """``claim`` without blocking the event loop."""
        return await adrive(self._claim(key, fingerprint), self._aperform)

    async def acomplete(self, key: LedgerKey, result: ToolResult) -> None:
        """``complete`` without blocking the event loop."""
        await adrive(self._complete(key, result), self._aperform)

    async def aget(self, key: LedgerKey) -> LedgerRecord | None:
        """``get`` without blocking the event loop."""
        return await adrive(self._get(key), self._aperform)

    # ---- maintenance ----------------------------------------------------------------------------------
    def purge_completed(self, older_than_seconds: float) -> int:
        """Delete ``completed`` rows completed more than ``older_than_seconds`` ago; return how many.

        ``started`` rows are never deleted: a claim whose outcome is unknown, and a consumed approval (claimed,
        never completed), must keep refusing to run again. A purged key can be claimed, and run, again: choose
        ``older_than_seconds`` longer than any retry or re-dispatch of the same call can come. (When a connection
        was lost after the server deleted rows, the retry does not count those.)
        """
        if not _finite(older_than_seconds) or not older_than_seconds >= 0:
            raise LedgerError(f"older_than_seconds must be a non-negative number, got {older_than_seconds!r}")
        return drive(self._operation("purge", None, lambda retried: _purge_steps(older_than_seconds)),
                     self._perform)

    def __repr__(self) -> str:
        return f"PostgresLedger({self._where})"


# ---- the operations' steps: SQL to run, and what each answer means ----------------------------------------------
# Each yields (sql, params) and receives (rowcount, first row or None).


def _claim_steps(key: LedgerKey, fingerprint: str, token: str) -> Steps[LedgerRecord | None]:
    where = (key.conversation_id, key.call_key)
    for _ in range(3):  # a completed row purged between the insert and the select: claim again
        inserted, _row = yield _CLAIM, (*where, fingerprint, time.time(), os.getpid(), token)
        if inserted == 1:
            return None
        _count, row = yield _SELECT, where
        if row is not None:
            # our own token: an earlier attempt of this claim inserted the row, and its reply was lost
            return None if row[5] == token else record_from_row(key, row[:5])
    raise LedgerError(f"ledger row for {key!r} disappeared while it was claimed")


def _released(key: LedgerKey, token: str, _retried: bool) -> Steps[int]:
    return _release_steps(key, token)


def _release_steps(key: LedgerKey, token: str) -> Steps[int]:
    deleted, _row = yield _RELEASE, (key.conversation_id, key.call_key, token)
    return deleted


def _complete_steps(key: LedgerKey, blob: bytes, retried: bool) -> Steps[None]:
    where = (key.conversation_id, key.call_key)
    updated, _row = yield _COMPLETE, (blob, time.time(), *where)
    if updated == 1:
        return
    if retried:  # an earlier attempt may have committed this very completion before its reply was lost
        _count, row = yield _SELECT, where
        if row is not None and row[0] == "completed" and row[2] is not None and bytes(row[2]) == blob:
            return
    raise LedgerError(f"cannot complete {key!r}: it is not started")


def _get_steps(key: LedgerKey) -> Steps[LedgerRecord | None]:
    _count, row = yield _SELECT, (key.conversation_id, key.call_key)
    return None if row is None else record_from_row(key, row[:5])


def _purge_steps(older_than_seconds: float) -> Steps[int]:
    deleted, _row = yield _PURGE, (time.time() - older_than_seconds,)
    return deleted


class _Guard:
    """One armed deadline. ``cancel`` waits for a shutdown in progress, so a connection handed back to its pool
    is never shut down afterwards (one shut down before is discarded by the pool's check)."""

    __slots__ = ("conn", "cancelled", "lock")

    def __init__(self, conn: Any) -> None:
        self.conn, self.cancelled, self.lock = conn, False, threading.Lock()

    def cancel(self) -> None:
        with self.lock:
            self.cancelled = True

    def fire(self) -> None:
        with self.lock:
            if not self.cancelled:
                _shut_down(self.conn)


class _Watchdog:
    """One daemon thread that shuts down the connections whose time ran out (a thread per operation, as
    ``threading.Timer`` would start, costs more than a claim on a fast server)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, _Guard]] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()

    def arm(self, seconds: float, conn: Any) -> _Guard:
        guard = _Guard(conn)
        with self._cond:
            if self._thread is None or self._pid != os.getpid():  # started lazily, again in a forked child
                self._heap, self._pid = [], os.getpid()
                self._thread = threading.Thread(target=self._run, name="toolwire-ledger-watchdog", daemon=True)
                self._thread.start()
            heapq.heappush(self._heap, (time.monotonic() + seconds, next(self._seq), guard))
            if self._heap[0][2] is guard:
                self._cond.notify()
        return guard

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._heap and self._heap[0][2].cancelled:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait()
                    continue
                due, _, guard = self._heap[0]
                left = due - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                heapq.heappop(self._heap)
            guard.fire()


_WATCHDOG = _Watchdog()


def _shut_down(conn: Any) -> None:
    """Shut down ``conn``'s socket: a statement waiting for a server that stopped answering fails at once (the
    pool's check then discards the connection)."""
    try:
        fd = conn.fileno()
        sock = socket.socket(fileno=os.dup(fd))
    except Exception:  # noqa: BLE001 - a connection already closed: nothing to wake
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        sock.close()


def _check(conn: Any) -> None:
    """The pool's check of a connection before handing it out, bounded: a server that does not answer within
    ``_CHECK_LIMIT`` fails the check (the connection is discarded)."""
    guard = _WATCHDOG.arm(_CHECK_LIMIT, conn)
    try:
        conn.execute("")
    finally:
        guard.cancel()


async def _acheck(conn: Any) -> None:
    guard = asyncio.get_running_loop().call_later(_CHECK_LIMIT, _shut_down, conn)
    try:
        await _promptly(conn, conn.execute(""))
    finally:
        guard.cancel()


async def _promptly(conn: Any, work: Awaitable[T]) -> T:
    """Await ``work`` (statements on ``conn``) so that the caller's cancellation (``asyncio.timeout``,
    ``wait_for``, a client gone) takes effect within about a second, and never before the statement has ended.

    psycopg answers the cancellation of a running statement by sending the server a cancel request and waiting
    for the statement to end, up to five seconds each: on a server that stopped answering, a caller's 0.5 s
    timeout took eleven seconds. Here the work runs on a task of its own that the cancellation does not reach.
    The cancelled caller asks the server to cancel the statement and waits for it, ``_CANCEL_WAIT`` seconds at
    most for each (a server that answers ends it at once, committed or not, so what follows, such as a claim's
    removal of its row, sees its outcome); then shuts ``conn``'s socket down (the statement fails as a lost
    connection and the pool discards the connection). Cancelled again meanwhile, it goes on with the same bounded
    waits. Either way the connection goes back to its pool only once the work has ended: psycopg frees a
    connection returned while a statement still runs on it."""
    task = asyncio.ensure_future(work)
    task.add_done_callback(_retrieved)  # its failure is not the caller's once the caller is cancelled
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        settling = asyncio.ensure_future(_settle(conn, task))
        settling.add_done_callback(_retrieved)
        while not settling.done():
            try:
                await asyncio.shield(settling)
            except asyncio.CancelledError:
                pass  # cancelled again: the bounded settling goes on (a socket shut down too early would leave the
                # statement running on the server: a claim's INSERT committing after its row was removed)
        while not task.done():  # the settling was itself cancelled (the loop is ending): never hand back a busy one
            _shut_down(conn)
            try:
                await asyncio.wait((task,))
            except asyncio.CancelledError:
                pass
        raise


async def _settle(conn: Any, task: asyncio.Future[Any]) -> None:
    """Ask the server to cancel ``conn``'s statement and wait for ``task`` (the work running it) to end, within
    ``_CANCEL_WAIT`` each; then shut the socket down and wait for the work to fail."""
    try:
        await asyncio.wait_for(conn.cancel_safe(timeout=_CANCEL_WAIT), _CANCEL_WAIT)
    except Exception:  # noqa: BLE001 - no answer in time, or the connection is gone: the socket is shut down next
        pass
    await asyncio.wait((task,), timeout=_CANCEL_WAIT)
    if not task.done():
        _shut_down(conn)
        await asyncio.wait((task,))


def _retrieved(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


def _execute(conn: Any, step: tuple[str, tuple]) -> tuple[int, tuple | None]:
    cur = conn.execute(*step)
    return cur.rowcount, cur.fetchone() if cur.description is not None else None


async def _aexecute(conn: Any, step: tuple[str, tuple]) -> tuple[int, tuple | None]:
    cur = await conn.execute(*step)
    return cur.rowcount, await cur.fetchone() if cur.description is not None else None


def _finite(value: Any) -> bool:
    """A real number (not a bool) that is finite as a float (a huge int is not: it overflows)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _register_secrets(psycopg: Any, dsn: Any) -> None:
    """Register the DSN's password (and, for a DSN libpq might split wrongly, its pieces) so it is scrubbed from
    every log event and error message, however the DSN is written."""
    if not isinstance(dsn, str):
        return
    found: list[str] = []
    try:
        found.append(psycopg.conninfo.conninfo_to_dict(dsn).get("password") or "")
    except Exception:  # noqa: BLE001 - an unparsable DSN: the patterns below still find its password
        pass
    scheme, sep, rest = dsn.partition("://")
    if sep:
        authority = rest.split("/", 1)[0].split("?", 1)[0]
        if "@" in authority:
            creds = authority.rpartition("@")[0]
            found.append(creds.partition(":")[2])
        found += re.findall(r"[?&]password=([^&#]*)", rest)
    for m in re.finditer(r"password\s*=\s*('(?:[^'\\]|\\.)*'|\S+(?:\s+(?!\w+\s*=)\S+)*)", dsn):
        found.append(m.group(1).strip("'"))
    for value in found:
        for piece in {value, *re.split(r"[@\s:/]+", value)}:
            _log.add_secret(piece)
            _log.add_secret(urllib.parse.unquote(piece))


def _describe(psycopg: Any, dsn: str) -> str:
    """Where the ledger lives, without credentials."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(dsn)
    except Exception:  # noqa: BLE001 - a DSN libpq cannot parse is reported when connecting
        return "<unparsed dsn>"
    host, port, db = info.get("host") or "localhost", info.get("port") or "5432", info.get("dbname") or ""
    return _log.scrub(f"postgresql://{host}:{port}/{db}")  # a password libpq misread as part of the host


def _reason(exc: BaseException) -> str:
    """The first line of ``exc``'s message, scrubbed of secrets (libpq repeats parts of a DSN it cannot use)."""
    text = str(exc).strip().splitlines()
    return _log.scrub(f"{type(exc).__name__}: {text[0] if text else ''}")
