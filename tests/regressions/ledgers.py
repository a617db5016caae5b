"""The ledgers a dispatch rule must hold with: ``MemoryLedger``, ``SQLiteLedger`` and ``PostgresLedger`` (the test
session's PostgreSQL server, see ``conftest.pg_dsn``), each opened again as a restarted process would.

``Store.ledger`` is open; ``Store.reopen()`` gives another ledger object on the same store (memory: the same
object, the only way its records outlive a dispatcher). Tests use their own conversation ids (``conv``), so the
shared PostgreSQL table never mixes them.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

import toolwire
from toolwire import MemoryLedger, PostgresLedger, SQLiteLedger

from ..test_ledger_contract import Store  # the contract's store: open, reopened as a restarted process would

LEDGERS = ("memory", "sqlite", "postgres")
MODES = ("sync", "async")


def open_store(kind: str, request: pytest.FixtureRequest, tmp_path) -> Store:
    if kind == "memory":
        return Store("memory", MemoryLedger, None)
    if kind == "sqlite":
        path = str(tmp_path / "ledger.db")
        return Store("sqlite", lambda: SQLiteLedger(path), ("sqlite", path))
    dsn = request.getfixturevalue("pg_dsn")
    return Store("postgres", lambda: PostgresLedger(dsn, pool_size=2, timeout=10), ("postgres", dsn))


def new_conversation() -> str:
    return "conv-" + uuid.uuid4().hex


def dispatch(mode: str, d: toolwire.Dispatcher, turn: toolwire.Turn, **kw: Any) -> list[toolwire.ToolResult]:
    if mode == "sync":
        return d.run(turn, **kw)
    return asyncio.run(d.arun(turn, **kw))
