"""A ledger of the application's that answers with something that is not a ledger record (``False``, ``0``, a
``dict``, a record whose result is a plain ``dict`` as a ledger storing JSON would give back) is a ledger that
failed: the write is answered ``outcome_unknown`` and nothing runs, like a ledger that raises.

``run`` and ``arun`` (and the loop, after an earlier write of the run had taken effect) crashed with an untyped
``AttributeError`` reading ``.fingerprint`` or ``.result.kind``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import toolwire
from toolwire import Decision, Dispatcher, LedgerRecord, MemoryLedger, Registry, ResultKind, Tool
from toolwire.registry import LedgerKey

from ..bodies import body

K = ResultKind
MODES = ["sync", "async"]


def _record(status: str = "completed", result: Any = None, fingerprint: Any = "save:x") -> LedgerRecord:
    rec = LedgerRecord(key=LedgerKey("c", "k"), status="completed")
    # what a hand-written ledger may build: msgspec does not check attribute assignment
    rec.status, rec.result, rec.fingerprint = status, result, fingerprint
    return rec


GARBAGE = {
    "false": lambda: False,
    "zero": lambda: 0,
    "empty_string": lambda: "",
    "dict": lambda: {"status": "completed"},
    "result_is_a_dict": lambda: _record(result={"kind": "ok", "content": 1}, fingerprint=""),
    "fingerprint_is_a_number": lambda: _record(fingerprint=7),
    "unknown_status": lambda: _record(status="done", fingerprint=""),
}


class Garbage(MemoryLedger):
    """Answers ``op`` with ``make()``; everything else as a memory ledger."""

    def __init__(self, op: str, make) -> None:
        super().__init__()
        self.op, self.make = op, make

    def claim(self, key, fingerprint=""):
        return self.make() if self.op == "claim" else super().claim(key, fingerprint)

    def get(self, key):
        return self.make() if self.op == "get" else super().get(key)

    async def aclaim(self, key, fingerprint=""):
        return self.claim(key, fingerprint)

    async def aget(self, key):
        return self.get(key)


def allow(call, ctx) -> Decision:
    return Decision.allow()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", ["claim", "get"])
@pytest.mark.parametrize("garbage", GARBAGE)
def test_a_malformed_ledger_answer_is_a_ledger_failure(garbage, op, mode):
    effects: list[int] = []

    def save(x: int) -> dict:
        """Save x."""
        effects.append(x)
        return {"saved": x}

    d = Dispatcher(Registry([Tool.from_function(save, effect="write")]), ledger=Garbage(op, GARBAGE[garbage]),
                   policy=allow if op == "get" else None)
    turn = toolwire.parse("anthropic", body("anthropic", [("toolu_1", "save", {"x": 1})], response_id="resp_g"))
    results = d.run(turn, conversation_id="c") if mode == "sync" else asyncio.run(d.arun(turn, conversation_id="c"))
    [r] = results
    assert r.kind is K.OUTCOME_UNKNOWN and effects == [], (r.kind, r.content)
