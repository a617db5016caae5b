"""The ledgers a dispatch rule must hold with: ``MemoryLedger``, ``SQLiteLedger`` and ``PostgresLedger`` (the test
session's PostgreSQL server, see ``conftest.pg_dsn``), each opened again as a restarted process would.

``Store.ledger`` is open; ``Store.reopen()`` gives another ledger object on the same store (memory: the same
object, the only way its records outlive a dispatcher). Tests use their own conversation ids (``conv``), so the
shared PostgreSQL table never mixes them.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, Callable

import pytest

import toolwire
from toolwire import Ledger, MemoryLedger, PostgresLedger, SQLiteLedger

LEDGERS = ("memory", "sqlite", "postgres")
MODES = ("sync", "async")


class Store:
    def __init__(self, kind: str, make: Callable[[], Ledger]) -> None:
        self.kind, self._make = kind, make
        self._opened: list[Any] = []
        self.ledger = make() if kind == "memory" else self.reopen()

    def reopen(self) -> Ledger:
        if self.kind == "memory":
            return self.ledger
        ledger = self._make()
        self._opened.append(ledger)
        return ledger

    def close(self) -> None:
        for ledger in self._opened:
            ledger.close()


def open_store(kind: str, request: pytest.FixtureRequest, tmp_path) -> Store:
    if kind == "memory":
        return Store("memory", MemoryLedger)
    if kind == "sqlite":
        path = str(tmp_path / "ledger.db")
        return Store("sqlite", lambda: SQLiteLedger(path))
    dsn = request.getfixturevalue("pg_dsn")
    return Store("postgres", lambda: PostgresLedger(dsn, pool_size=2, timeout=10))


def new_conversation() -> str:
    return "conv-" + uuid.uuid4().hex


def dispatch(mode: str, d: toolwire.Dispatcher, turn: toolwire.Turn, **kw: Any) -> list[toolwire.ToolResult]:
    if mode == "sync":
        return d.run(turn, **kw)
    return asyncio.run(d.arun(turn, **kw))
