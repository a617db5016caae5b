"""Ledger claims per second, per backend: ``claim`` then ``complete`` of fresh keys, one thread.

Memory, an SQLite file (WAL, ``synchronous=FULL``: a durable claim per call) and, when the test cluster can be
started (``tests/pg_cluster.py``, PostgreSQL on loopback, run with ``fsync=off``: an upper bound for a durable
server) or ``TOOLWIRE_PG_DSN`` is set, PostgreSQL.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from typing import Any, Iterator

import toolwire
from toolwire import LedgerKey, ResultKind, ToolResult

__all__ = ["rates"]

_RESULT = ToolResult(call_id="c", local_id="tw-0", name="save", content={"ok": True}, is_error=False,
                     kind=ResultKind.OK)


def _rate(ledger: Any, n: int, prefix: str) -> float:
    started = time.perf_counter()
    for i in range(n):
        key = LedgerKey(prefix, f"call:{i}")
        assert ledger.claim(key, "save:h") is None
        ledger.complete(key, _RESULT)
    return n / (time.perf_counter() - started)


def rates(n: int = 2000) -> dict[str, float | str]:
    """Claims (each with its completion) per second for every backend that can be measured here."""
    out: dict[str, float | str] = {"memory": _rate(toolwire.MemoryLedger(), n, "m")}
    with tempfile.TemporaryDirectory() as tmp:
        sqlite = toolwire.SQLiteLedger(os.path.join(tmp, "l.db"))
        out["sqlite"] = _rate(sqlite, n, "s")
        sqlite.close()
    try:
        with postgres() as dsn:
            pg = toolwire.PostgresLedger(dsn)
            out["postgresql"] = _rate(pg, n, f"p{time.time_ns()}")
            pg.close()
    except Exception as exc:  # noqa: BLE001 - the bench reports what it could not measure
        out["postgresql"] = f"not measured ({type(exc).__name__}: {str(exc)[:80]})"
    return out


@contextlib.contextmanager
def postgres() -> Iterator[str]:
    """A PostgreSQL DSN: ``TOOLWIRE_PG_DSN``, else the test cluster started for the block (stopped after it)."""
    dsn = os.environ.get("TOOLWIRE_PG_DSN")
    if dsn:
        yield dsn
        return
    from tests import pg_cluster

    cluster = pg_cluster.start()
    try:
        yield cluster.url
    finally:
        cluster.stop()
