"""A ledger in PostgreSQL: the SQLite ledger's contract, shared by every process that can reach one server.

Needs the ``pg`` extra (``pip install 'toolwire[pg]'``: psycopg 3 and psycopg_pool). Importing this module never
needs them; constructing a ``PostgresLedger`` does.
"""

from __future__ import annotations

import math
import os
import threading
import time
from typing import Any

import msgspec

from .errors import LedgerError
from .ledger import LedgerKey, LedgerRecord, record_from_row
from .result import ToolResult

__all__ = ["PostgresLedger"]

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
    PRIMARY KEY (conversation_id, call_key)
)
"""
# serializes concurrent CREATE TABLE IF NOT EXISTS (which can otherwise fail with a unique violation)
_SCHEMA_LOCK_ID = 0x746F6F6C77697265  # "toolwire"

_SELECT = ("SELECT status, fingerprint, result, started_at, completed_at FROM toolwire_ledger"
           " WHERE conversation_id = %s AND call_key = %s")

#: pools inherited through fork: never used, closed or collected in the child (closing one there would end the
#: parent's server sessions, whose sockets the child shares)
_abandoned: list[Any] = []


class PostgresLedger:
    """A ledger in one PostgreSQL table (``toolwire_ledger``, created if missing), safe across threads, processes
    and hosts.

    ``dsn``: a libpq connection string or URL. ``pool_size``: the most connections this process holds (a
    ``psycopg_pool.ConnectionPool``, shared by threads). ``timeout``: seconds to wait for a connection (and the
    connect timeout of each one).

    The claim is one ``INSERT … ON CONFLICT (conversation_id, call_key) DO NOTHING`` in a transaction, then the
    existing row when the insert did nothing: of any number of processes racing on one key, exactly one claims
    it. ``complete`` updates only a ``started`` row. Results are stored as msgspec JSON in a ``bytea`` column.
    Every failure (server unreachable, a query that fails, a row that cannot be read) is a ``LedgerError``.

    The pool is opened per process: a ledger inherited through ``fork`` opens its own in the child and never
    touches the parent's. ``close()`` closes this process's pool (it is reopened on next use).
    """

    def __init__(self, dsn: str, *, pool_size: int = 4, timeout: float = 30.0) -> None:
        try:
            import psycopg
            import psycopg_pool
        except ImportError as exc:
            raise LedgerError(f"{_INSTALL_HINT} ({exc})") from exc
        if not isinstance(pool_size, int) or isinstance(pool_size, bool) or pool_size < 1:
            raise LedgerError(f"pool_size must be a positive int, got {pool_size!r}")
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not timeout > 0 \
                or math.isinf(timeout):
            raise LedgerError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self._psycopg = psycopg
        self._pool_mod = psycopg_pool
        self._errors: tuple[type[BaseException], ...] = (psycopg.Error, OSError)
        self.dsn = dsn
        self.pool_size = pool_size
        self.timeout = float(timeout)
        self._where = _describe(psycopg, dsn)
        self._lock = threading.Lock()
        self._pool: Any = None
        self._pid: int | None = None
        self._connect_kwargs = {"autocommit": True, "connect_timeout": max(2, math.ceil(self.timeout))}
        self._create_schema()

    # ---- connections ----------------------------------------------------------------------------------
    def _create_schema(self) -> None:
        try:
            with self._psycopg.connect(self.dsn, **self._connect_kwargs) as conn:
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK_ID,))
                    conn.execute(_SCHEMA)
        except self._errors as exc:
            raise LedgerError(f"cannot open ledger {self._where}: {_reason(exc)}") from exc

    def _connection(self) -> Any:
        """This process's pool's connection context (the pool is opened here, once per process)."""
        pid = os.getpid()
        with self._lock:
            if self._pool is None or self._pid != pid:
                if self._pool is not None:
                    _abandoned.append(self._pool)
                    self._pool = None
                self._pool = self._pool_mod.ConnectionPool(
                    self.dsn, min_size=1, max_size=self.pool_size, timeout=self.timeout,
                    kwargs=dict(self._connect_kwargs), open=True, name="toolwire-ledger")
                self._pid = pid
            pool = self._pool
        return pool.connection(timeout=self.timeout)

    def close(self) -> None:
        """Close this process's pool (it is reopened on next use)."""
        with self._lock:
            pool, pid = self._pool, self._pid
            self._pool = None
        if pool is not None and pid == os.getpid():
            pool.close()

    def __enter__(self) -> "PostgresLedger":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- protocol -------------------------------------------------------------------------------------
    def claim(self, key: LedgerKey, fingerprint: str = "") -> LedgerRecord | None:
        try:
            with self._connection() as conn:
                for _ in range(3):  # a completed row purged between the insert and the select: claim again
                    with conn.transaction():
                        cur = conn.execute(
                            "INSERT INTO toolwire_ledger (conversation_id, call_key, status, fingerprint, started_at,"
                            " pid) VALUES (%s, %s, 'started', %s, %s, %s)"
                            " ON CONFLICT (conversation_id, call_key) DO NOTHING",
                            (key.conversation_id, key.call_key, fingerprint, time.time(), os.getpid()))
                        if cur.rowcount == 1:
                            return None
                        row = conn.execute(_SELECT, (key.conversation_id, key.call_key)).fetchone()
                    if row is not None:
                        break
        except self._errors as exc:
            raise LedgerError(f"ledger claim failed for {key!r}: {_reason(exc)}") from exc
        return self._record(key, row)

    def complete(self, key: LedgerKey, result: ToolResult) -> None:
        try:
            blob = msgspec.json.encode(result)
        except (TypeError, ValueError, OverflowError, RecursionError) as exc:
            raise LedgerError(f"ledger complete failed for {key!r}: the result cannot be stored ({exc})") from exc
        try:
            with self._connection() as conn:
                with conn.transaction():
                    cur = conn.execute(
                        "UPDATE toolwire_ledger SET status = 'completed', result = %s, completed_at = %s"
                        " WHERE conversation_id = %s AND call_key = %s AND status = 'started'",
                        (blob, time.time(), key.conversation_id, key.call_key))
                    updated = cur.rowcount == 1
        except self._errors as exc:
            raise LedgerError(f"ledger complete failed for {key!r}: {_reason(exc)}") from exc
        if not updated:
            raise LedgerError(f"cannot complete {key!r}: it is not started")

    def get(self, key: LedgerKey) -> LedgerRecord | None:
        try:
            with self._connection() as conn:
                row = conn.execute(_SELECT, (key.conversation_id, key.call_key)).fetchone()
        except self._errors as exc:
            raise LedgerError(f"ledger read failed for {key!r}: {_reason(exc)}") from exc
        return None if row is None else self._record(key, row)

    # ---- maintenance ----------------------------------------------------------------------------------
    def purge_completed(self, older_than_seconds: float) -> int:
        """Delete ``completed`` rows completed more than ``older_than_seconds`` ago; return how many.

        ``started`` rows are never deleted: a claim whose outcome is unknown, and a consumed approval (claimed,
        never completed), must keep refusing to run again. A purged key can be claimed, and run, again: choose
        ``older_than_seconds`` longer than any retry or re-dispatch of the same call can come.
        """
        if not isinstance(older_than_seconds, (int, float)) or isinstance(older_than_seconds, bool) \
                or not older_than_seconds >= 0 or math.isinf(older_than_seconds):
            raise LedgerError(f"older_than_seconds must be a non-negative number, got {older_than_seconds!r}")
        try:
            with self._connection() as conn:
                with conn.transaction():
                    cur = conn.execute(
                        "DELETE FROM toolwire_ledger WHERE status = 'completed' AND completed_at IS NOT NULL"
                        " AND completed_at < %s", (time.time() - older_than_seconds,))
                    return cur.rowcount
        except self._errors as exc:
            raise LedgerError(f"ledger purge failed: {_reason(exc)}") from exc

    # ---- helpers --------------------------------------------------------------------------------------
    @staticmethod
    def _record(key: LedgerKey, row: tuple | None) -> LedgerRecord:
        if row is None:
            raise LedgerError(f"ledger row for {key!r} disappeared while it was claimed")
        return record_from_row(key, row)

    def __repr__(self) -> str:
        return f"PostgresLedger({self._where})"


def _describe(psycopg: Any, dsn: str) -> str:
    """Where the ledger lives, without credentials."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(dsn)
    except Exception:  # noqa: BLE001 - a DSN libpq cannot parse is reported when connecting
        return "<unparsed dsn>"
    host, port, db = info.get("host") or "localhost", info.get("port") or "5432", info.get("dbname") or ""
    return f"postgresql://{host}:{port}/{db}"


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"
