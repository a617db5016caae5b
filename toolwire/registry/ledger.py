"""The idempotency ledger: a write runs at most once per key, across retries, threads and processes.

Protocol (small on purpose, so Redis and PostgreSQL ledgers can follow):

* ``claim(key, fingerprint="") -> None | LedgerRecord``: atomically record ``started`` for ``key``. None means
  this caller owns the key and may run the handler; otherwise the existing record is returned and nothing may
  run (``completed`` → its stored result is the answer; ``started`` → the outcome is unknown).
* ``complete(key, result)``: record ``completed`` with the ``ToolResult``, after the handler returned.
* ``get(key) -> None | LedgerRecord``.

Optional async twins (``AsyncLedger``): ``async aclaim(key, fingerprint="")``, ``async acomplete(key, result)`` and
``async aget(key)``, with the same answers and errors. ``Dispatcher.arun`` awaits ``aclaim``/``acomplete`` when the
ledger has them (``PostgresLedger`` does) and otherwise runs ``claim``/``complete`` in a worker thread
(``asyncio.to_thread``), so a ledger that has only the sync methods never blocks the event loop either.

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
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from typing import Literal, Protocol, runtime_checkable

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
    or restarts.
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


class SQLiteLedger:
    """A ledger in one SQLite file, safe across threads and processes.

    WAL mode, ``synchronous=FULL`` (a ``started`` record is durable before the handler runs), every write in a
    ``BEGIN IMMEDIATE`` transaction, and the claim is a single ``INSERT … ON CONFLICT DO NOTHING`` on the
    primary key: of any number of processes racing on one key, exactly one claims it. Connections are opened
    per process (a ledger object inherited through ``fork`` reopens its file) and shared by threads under a lock.
    """

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 30.0) -> None:
        self.path = os.fspath(path)
        self.timeout = timeout
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid: int | None = None
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
            conn = self._connection()
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    cur = conn.execute(
                        "INSERT INTO toolwire_ledger (conversation_id, call_key, status, fingerprint, started_at,"
                        " pid) VALUES (?, ?, 'started', ?, ?, ?) ON CONFLICT (conversation_id, call_key) DO NOTHING",
                        (key.conversation_id, key.call_key, fingerprint, time.time(), os.getpid()))
                    claimed = cur.rowcount == 1
                    row = None if claimed else self._select(conn, key)
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
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
