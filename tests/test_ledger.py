"""The idempotency ledger: protocol, SQLite durability and atomic claims across processes, crash recovery."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3

import pytest

import toolwire
from toolwire.registry import (
    Dispatcher,
    Ledger,
    LedgerError,
    LedgerKey,
    MemoryLedger,
    ResultKind,
    SQLiteLedger,
    ToolResult,
    arguments_sha256,
)

from .tools_demo import WRITE_BLOCK, DemoWorld, anthropic_turn, chat_turn, killed_worker, race_worker

RACERS = 8
CTX = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")


def _result(**kw) -> ToolResult:
    base = dict(call_id="toolu_1", local_id="tw-0", name="save_measurement", content={"entry_id": 1},
                is_error=False, kind=ResultKind.OK)
    base.update(kw)
    return ToolResult(**base)


@pytest.fixture(params=["memory", "sqlite"])
def ledger(request, tmp_path) -> Ledger:
    """Each ledger implementation."""
    return MemoryLedger() if request.param == "memory" else SQLiteLedger(tmp_path / "ledger.db")


def test_ledgers_follow_the_protocol(ledger):
    """Both ledgers satisfy the runtime-checkable Ledger protocol."""
    assert isinstance(ledger, Ledger)


def test_claim_complete_get(ledger):
    """The first claim wins (None); later claims see started, then completed with the stored result."""
    key = LedgerKey("c", "id:toolu_1")
    assert ledger.get(key) is None
    assert ledger.claim(key, "save_measurement:abc") is None
    rec = ledger.claim(key, "save_measurement:abc")
    assert (rec.status, rec.fingerprint, rec.result) == ("started", "save_measurement:abc", None)
    ledger.complete(key, _result())
    rec = ledger.get(key)
    assert rec.status == "completed" and rec.result == _result() and rec.completed_at >= rec.started_at
    assert ledger.claim(key).status == "completed"


def test_complete_requires_a_started_claim(ledger):
    """Completing an unclaimed or already completed key is a LedgerError."""
    key = LedgerKey("c", "id:x")
    with pytest.raises(LedgerError):
        ledger.complete(key, _result())
    ledger.claim(key)
    ledger.complete(key, _result())
    with pytest.raises(LedgerError):
        ledger.complete(key, _result())


def test_keys_are_scoped_by_conversation(ledger):
    """One call id in two conversations is two keys."""
    assert ledger.claim(LedgerKey("c1", "id:toolu_1")) is None
    assert ledger.claim(LedgerKey("c2", "id:toolu_1")) is None


def test_results_round_trip_through_sqlite(tmp_path):
    """Stored results (any JSON content, approval requests) decode to equal ToolResults after reopening."""
    path = tmp_path / "l.db"
    key = LedgerKey("c", "id:1")
    stored = _result(content=[{"a": 1.5, "b": None, "c": "ç"}], kind=ResultKind.HANDLER_FAILED, is_error=True)
    first = SQLiteLedger(path)
    first.claim(key)
    first.complete(key, stored)
    first.close()
    assert SQLiteLedger(path).get(key).result == stored


def test_sqlite_ledger_uses_wal(tmp_path):
    """The ledger file is in WAL mode."""
    path = tmp_path / "l.db"
    SQLiteLedger(path)
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_sqlite_ledger_unusable_path_is_ledger_error(tmp_path):
    """A path that cannot be opened raises LedgerError (a ToolwireError)."""
    with pytest.raises(toolwire.ToolwireError):
        SQLiteLedger(tmp_path / "missing-dir" / "l.db")


def test_key_for_calls_with_and_without_ids():
    """A call instance is keyed by its turn, its provider id (or, without one, its local id) and its arguments."""
    with_id = anthropic_turn(WRITE_BLOCK).calls[0]
    assert LedgerKey.for_call("c", with_id, "h", turn="response:msg_1") == \
        LedgerKey("c", '["response:msg_1","id:toolu_race","save_measurement","h"]'.join(("call:", "")))
    no_id = chat_turn((None, "save_measurement", WRITE_BLOCK[2])).calls[0]
    assert no_id.call_id is None
    h = arguments_sha256(no_id.args)
    assert LedgerKey.for_call("c", no_id, h, turn="turn:3") == \
        LedgerKey("c", f'call:["turn:3","local:{no_id.local_id}","save_measurement","{h}"]')


def test_arguments_hash_is_canonical():
    """Key order and whitespace do not change the arguments hash; values do."""
    assert arguments_sha256({"a": 1, "b": [1, 2]}) == arguments_sha256({"b": [1, 2], "a": 1})
    assert arguments_sha256({"a": 1}) != arguments_sha256({"a": 2})


# ---- across processes -------------------------------------------------------------------------------------------


def _claim_worker(path: str, barrier, out) -> None:
    ledger = SQLiteLedger(path)
    barrier.wait()
    out.put(ledger.claim(LedgerKey("race", "id:one")) is None)


def _join(procs, timeout=20.0) -> None:
    for p in procs:
        p.join(timeout)
    for p in procs:
        if p.is_alive():  # pragma: no cover - a hung racer fails the test, never the session
            p.kill()
            pytest.fail("a racing process did not finish")


def test_eight_processes_claim_one_key_exactly_once(tmp_path):
    """Eight processes racing on one key: exactly one claim succeeds."""
    path = str(tmp_path / "l.db")
    SQLiteLedger(path)
    barrier, out = CTX.Barrier(RACERS), CTX.Queue()
    procs = [CTX.Process(target=_claim_worker, args=(path, barrier, out)) for _ in range(RACERS)]
    for p in procs:
        p.start()
    _join(procs)
    wins = [out.get(timeout=5) for _ in range(RACERS)]
    assert wins.count(True) == 1


def test_eight_processes_dispatching_one_write_make_one_effect(tmp_path):
    """Eight processes dispatch the same write against one SQLite ledger: exactly one effect happens."""
    ledger_path, effects_path = str(tmp_path / "l.db"), str(tmp_path / "effects.db")
    SQLiteLedger(ledger_path)
    world = DemoWorld(effects_path)
    barrier, out = CTX.Barrier(RACERS), CTX.Queue()
    procs = [CTX.Process(target=race_worker, args=(ledger_path, effects_path, barrier, out)) for _ in range(RACERS)]
    for p in procs:
        p.start()
    _join(procs)
    kinds = [out.get(timeout=5) for _ in range(RACERS)]
    assert world.effects.count() == 1
    assert set(kinds) <= {"ok", "outcome_unknown"} and "ok" in kinds
    # once the winner completed, a retry anywhere returns the stored result
    world2 = DemoWorld(effects_path)
    [again] = Dispatcher(world2.registry(), ledger=SQLiteLedger(ledger_path)).run(
        anthropic_turn(WRITE_BLOCK), conversation_id="race")
    assert again.kind is ResultKind.OK and world2.effects.count() == 1 and world2.calls == {}


def test_sigkill_after_effect_before_completion_is_outcome_unknown(tmp_path):
    """A process killed after the effect and before `completed`: the retry runs nothing, outcome_unknown."""
    ledger_path, effects_path = str(tmp_path / "l.db"), str(tmp_path / "effects.db")
    world = DemoWorld(effects_path)
    proc = CTX.Process(target=killed_worker, args=(ledger_path, effects_path))
    proc.start()
    _join([proc])
    assert proc.exitcode == -9
    assert world.effects.count() == 1
    call = anthropic_turn(WRITE_BLOCK).calls[0]
    key = LedgerKey.for_call("killed", call, arguments_sha256(call.args), turn="response:msg_1")
    rec = SQLiteLedger(ledger_path).get(key)
    assert rec.status == "started" and rec.result is None
    [retry] = Dispatcher(world.registry(), ledger=SQLiteLedger(ledger_path)).run(
        anthropic_turn(WRITE_BLOCK), conversation_id="killed")
    assert retry.kind is ResultKind.OUTCOME_UNKNOWN and retry.is_error
    assert world.effects.count() == 1 and world.calls == {}


def _forked_claim(ledger: SQLiteLedger, out) -> None:
    out.put(ledger.claim(LedgerKey("fork", "id:child")) is None)


def test_ledger_object_inherited_by_fork_reopens_its_file(tmp_path):
    """A SQLiteLedger created before fork works in the child (its own connection) and the parent sees it."""
    if "fork" not in multiprocessing.get_all_start_methods():  # pragma: no cover
        pytest.skip("no fork")
    ledger = SQLiteLedger(tmp_path / "l.db")
    ledger.claim(LedgerKey("fork", "id:parent"))
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    proc = ctx.Process(target=_forked_claim, args=(ledger, out))
    proc.start()
    _join([proc])
    assert out.get(timeout=5) is True
    assert ledger.get(LedgerKey("fork", "id:child")).status == "started"
    assert os.getpid() == ledger._pid
