"""One contract for every ledger: MemoryLedger, SQLiteLedger and PostgresLedger answer claim, complete and get
alike, keep one write to one effect through the Dispatcher (``run`` and ``arun``), and fail only with LedgerError.
PostgresLedger's async twins (aclaim, acomplete, aget) answer like its sync methods, and ``arun`` awaits them.

The PostgreSQL ledger runs against ``TOOLWIRE_PG_DSN`` or a private cluster started for the session (see
``conftest.pg_dsn``); each test uses its own conversation ids, so tests never see each other's rows.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import socket
import sqlite3
import threading
import time
import uuid
from typing import Any, Callable

import msgspec
import pytest

import toolwire
from toolwire.harness.demo_tools import DemoWorld
from toolwire.registry import (
    AsyncLedger,
    Dispatcher,
    Ledger,
    LedgerError,
    LedgerKey,
    MemoryLedger,
    PostgresLedger,
    ResultKind,
    SQLiteLedger,
    ToolResult,
)

from .bodies import body

RACERS = 8
CTX = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
UNREACHABLE = "postgresql://127.0.0.1:1/x"
SAVE = ("toolu_save", "save_measurement", {"kind": "weight", "value": 70, "unit": "kg"})
LOOKUP = ("toolu_look", "lookup_demo_value", {"key": "height"})


def _result(**kw: Any) -> ToolResult:
    base = dict(call_id="toolu_1", local_id="tw-0", name="save_measurement", content={"entry_id": 1},
                is_error=False, kind=ResultKind.OK)
    base.update(kw)
    return ToolResult(**base)


def _open(spec: tuple[str, str]) -> Ledger:
    """A ledger from a picklable spec (``("sqlite", path)`` or ``("postgres", dsn)``), as a racing process opens
    it."""
    kind, where = spec
    return SQLiteLedger(where) if kind == "sqlite" else PostgresLedger(where, pool_size=2, timeout=10)


class Store:
    """One ledger implementation under test: ``ledger`` is open; ``reopen()`` gives another ledger object on the
    same store (a restarted process), ``spec`` describes it to other processes (None for memory)."""

    def __init__(self, kind: str, make: Callable[[], Ledger], spec: tuple[str, str] | None) -> None:
        self.kind, self._make, self.spec = kind, make, spec
        self._opened: list[Ledger] = []
        self.ledger = self.reopen() if kind != "memory" else make()

    def reopen(self) -> Ledger:
        if self.kind == "memory":
            return self.ledger
        ledger = self._make()
        self._opened.append(ledger)
        return ledger

    def close(self) -> None:
        for ledger in self._opened:
            ledger.close()


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request, tmp_path):
    """Each ledger implementation, on a fresh store (PostgreSQL: the shared table, with this test's own ids)."""
    if request.param == "memory":
        s = Store("memory", MemoryLedger, None)
    elif request.param == "sqlite":
        path = str(tmp_path / "ledger.db")
        s = Store("sqlite", lambda: SQLiteLedger(path), ("sqlite", path))
    else:
        dsn = request.getfixturevalue("pg_dsn")
        s = Store("postgres", lambda: PostgresLedger(dsn, pool_size=2, timeout=10), ("postgres", dsn))
    yield s
    s.close()


@pytest.fixture
def conv() -> str:
    """A conversation id no other test uses."""
    return "contract-" + uuid.uuid4().hex


def _save_turn() -> toolwire.Turn:
    return toolwire.parse("anthropic", body("anthropic", [SAVE], response_id="msg_contract"))


@pytest.fixture(params=["run", "arun"])
def how(request) -> str:
    """Dispatch through ``Dispatcher.run`` or through ``Dispatcher.arun`` (on a fresh event loop)."""
    return request.param


def _dispatch(d: Dispatcher, how: str, turn: toolwire.Turn, **kw: Any) -> list[ToolResult]:
    return d.run(turn, **kw) if how == "run" else asyncio.run(d.arun(turn, **kw))


def _kinds(results: list[ToolResult]) -> list[str]:
    return [r.kind.value for r in results]


# ---- claim, complete, get -------------------------------------------------------------------------------------


def test_ledger_follows_the_protocol(store):
    """Every implementation satisfies the runtime-checkable Ledger protocol."""
    assert isinstance(store.ledger, Ledger)


def test_claim_complete_get(store, conv):
    """The first claim wins (None); later claims see started, then completed with the stored result."""
    ledger, key = store.ledger, LedgerKey(conv, "id:toolu_1")
    assert ledger.get(key) is None
    assert ledger.claim(key, "save_measurement:abc") is None
    rec = ledger.claim(key, "save_measurement:abc")
    assert (rec.key, rec.status, rec.fingerprint, rec.result, rec.completed_at) == \
        (key, "started", "save_measurement:abc", None, None)
    assert rec.started_at > 0
    ledger.complete(key, _result())
    rec = ledger.get(key)
    assert rec.status == "completed" and rec.result == _result() and rec.completed_at >= rec.started_at
    again = ledger.claim(key, "save_measurement:abc")
    assert again.status == "completed" and again.result == _result()
    assert store.reopen().get(key) == rec


def test_started_without_completion_stays_started(store, conv):
    """A claim that is never completed (a crash, a consumed approval) stays started for every later reader."""
    key = LedgerKey.for_approval(conv, "sig")
    assert store.ledger.claim(key, "approval") is None
    for ledger in (store.ledger, store.reopen()):
        rec = ledger.get(key)
        assert (rec.status, rec.result, rec.completed_at, rec.fingerprint) == ("started", None, None, "approval")
        assert ledger.claim(key, "approval").status == "started"


def test_complete_requires_a_started_claim(store, conv):
    """Completing an unclaimed or already completed key is a LedgerError; the first result is kept."""
    ledger, key = store.ledger, LedgerKey(conv, "id:x")
    with pytest.raises(LedgerError):
        ledger.complete(key, _result())
    assert ledger.get(key) is None
    ledger.claim(key)
    ledger.complete(key, _result())
    with pytest.raises(LedgerError):
        ledger.complete(key, _result(content="second"))
    assert ledger.get(key).result == _result()


def test_fingerprint_is_stored_per_key(store, conv):
    """The fingerprint given to the first claim is stored; a later claim with another one sees the first."""
    key = LedgerKey(conv, "key:save_measurement:k1")
    assert store.ledger.claim(key, "save_measurement:" + "a" * 64) is None
    assert store.ledger.claim(key, "other:b").fingerprint == "save_measurement:" + "a" * 64
    assert store.reopen().get(key).fingerprint == "save_measurement:" + "a" * 64


def test_keys_are_scoped_by_conversation(store, conv):
    """One call key in two conversations is two keys."""
    assert store.ledger.claim(LedgerKey(conv + "-1", "id:toolu_1")) is None
    assert store.ledger.claim(LedgerKey(conv + "-2", "id:toolu_1")) is None


@pytest.mark.parametrize("stored", [
    _result(),
    _result(content=[{"a": 1.5, "b": None, "c": "ç", "d": [True, False]}], kind=ResultKind.HANDLER_FAILED,
            is_error=True),
    _result(content="Result unusable: the handler returned a value that cannot be sent as JSON or text.",
            kind=ResultKind.RESULT_UNUSABLE, is_error=True),
    _result(content={"blob": "x" * 2_000_000, "rows": list(range(10_000))}),
    _result(call_id=None, local_id="tw-7", content="\u2028 emoji \U0001f600 nul-free text"),
], ids=["ok", "handler_failed", "result_unusable", "big", "no_call_id"])
def test_results_round_trip(store, conv, stored):
    """Stored results decode to equal ToolResults, from this ledger object and from a reopened one."""
    key = LedgerKey(conv, "id:rt")
    store.ledger.claim(key)
    store.ledger.complete(key, stored)
    assert store.ledger.get(key).result == stored
    assert store.reopen().get(key).result == stored


def test_unstorable_result_is_ledger_error(store, conv):
    """A result msgspec cannot encode is a LedgerError and the key stays started."""
    if store.kind == "memory":
        pytest.skip("the memory ledger keeps the object as it is")
    key = LedgerKey(conv, "id:bad")
    store.ledger.claim(key)
    with pytest.raises(LedgerError):
        store.ledger.complete(key, _result(content={"x": object()}))
    assert store.ledger.get(key).status == "started"


def _corrupt(store: Store, key: LedgerKey) -> None:
    kind, where = store.spec
    if kind == "sqlite":
        with sqlite3.connect(where) as conn:
            conn.execute("UPDATE toolwire_ledger SET result = ? WHERE conversation_id = ? AND call_key = ?",
                         (b"{not json", key.conversation_id, key.call_key))
    else:
        import psycopg

        with psycopg.connect(where, autocommit=True) as conn:
            conn.execute("UPDATE toolwire_ledger SET result = %s WHERE conversation_id = %s AND call_key = %s",
                         (b"{not json", key.conversation_id, key.call_key))


def test_corrupt_row_is_ledger_error(store, conv):
    """A stored result that cannot be decoded is a LedgerError on get and on claim."""
    if store.kind == "memory":
        pytest.skip("nothing to corrupt in memory")
    key = LedgerKey(conv, "id:corrupt")
    store.ledger.claim(key)
    store.ledger.complete(key, _result())
    _corrupt(store, key)
    with pytest.raises(LedgerError, match="cannot be read"):
        store.ledger.get(key)
    with pytest.raises(LedgerError, match="cannot be read"):
        store.ledger.claim(key)


# ---- through the Dispatcher -----------------------------------------------------------------------------------


def test_run_makes_one_effect_and_replays(store, conv):
    """Dispatcher.run of one write: one effect; re-dispatch (same or reopened ledger) replays the stored result."""
    world = DemoWorld()
    [first] = Dispatcher(world.registry(), ledger=store.ledger).run(_save_turn(), conversation_id=conv)
    assert first.kind is ResultKind.OK and world.effects.count() == 1
    for ledger in (store.ledger, store.reopen()):
        [again] = Dispatcher(world.registry(), ledger=ledger).run(_save_turn(), conversation_id=conv)
        assert again.kind is ResultKind.OK and again.content == first.content
    assert world.effects.count() == 1 and world.calls == {"save_measurement": 1}


def test_arun_makes_one_effect_and_replays(store, conv):
    """Dispatcher.arun of one write: one effect; re-dispatch replays the stored result."""
    world = DemoWorld()
    [first] = asyncio.run(Dispatcher(world.registry(), ledger=store.ledger).arun(_save_turn(), conversation_id=conv))
    assert first.kind is ResultKind.OK and world.effects.count() == 1
    for ledger in (store.ledger, store.reopen()):
        [again] = asyncio.run(Dispatcher(world.registry(), ledger=ledger).arun(_save_turn(), conversation_id=conv))
        assert again.kind is ResultKind.OK and again.content == first.content
    assert world.effects.count() == 1 and world.calls == {"save_measurement": 1}


def test_started_write_is_outcome_unknown_on_redispatch(store, conv, how):
    """A write whose key is started but never completed is answered outcome_unknown and not run again."""
    world = DemoWorld()
    d = Dispatcher(world.registry(), ledger=store.ledger)
    [res] = _dispatch(d, how, _save_turn(), conversation_id=conv)
    call = _save_turn().calls[0]
    # the same call in another conversation, whose key a crashed process left at started
    other = conv + "-crashed"
    key = LedgerKey.for_call(other, call, toolwire.registry.arguments_sha256(call.args), turn="response:msg_contract")
    assert store.ledger.claim(key, "") is None
    [unknown] = _dispatch(d, how, _save_turn(), conversation_id=other)
    assert res.kind is ResultKind.OK and unknown.kind is ResultKind.OUTCOME_UNKNOWN
    assert world.effects.count() == 1


def test_approval_is_used_once(store, conv, how):
    """An approval runs its call once: a later dispatcher on the same ledger refuses it for a read and answers the
    write from its record, with no second effect."""
    world = DemoWorld()

    def dispatcher() -> Dispatcher:  # a fresh one each time: a restarted worker sharing the secret and the ledger
        return Dispatcher(world.registry(), ledger=store.ledger, policy=lambda call, ctx: "needs_approval",
                          approval_secret=b"contract-secret-" * 2)

    def turn() -> toolwire.Turn:
        return toolwire.parse("anthropic", body("anthropic", [LOOKUP, SAVE], response_id="msg_approval"))

    asked = _dispatch(dispatcher(), how, turn(), conversation_id=conv)
    assert _kinds(asked) == ["approval_required", "approval_required"] and world.calls == {}
    approver = dispatcher()
    tokens = [approver.approve(r.approval, approver="ana") for r in asked]
    ran = _dispatch(dispatcher(), how, turn(), conversation_id=conv, approvals=tokens)
    assert _kinds(ran) == ["ok", "ok"] and world.effects.count() == 1
    again = _dispatch(dispatcher(), how, turn(), conversation_id=conv, approvals=tokens)
    assert _kinds(again) == ["approval_required", "ok"] and again[1].content == ran[1].content
    assert world.effects.count() == 1
    assert world.calls == {"lookup_demo_value": 1, "save_measurement": 1}


class _SyncOnly:
    """A ledger with only the sync methods, delegating to another and noting the thread of every call."""

    def __init__(self, inner: Ledger) -> None:
        self.inner = inner
        self.threads: list[tuple[str, int]] = []

    def claim(self, key: LedgerKey, fingerprint: str = "") -> Any:
        self.threads.append(("claim", threading.get_ident()))
        return self.inner.claim(key, fingerprint)

    def complete(self, key: LedgerKey, result: ToolResult) -> None:
        self.threads.append(("complete", threading.get_ident()))
        self.inner.complete(key, result)

    def get(self, key: LedgerKey) -> Any:
        return self.inner.get(key)


def test_arun_calls_a_sync_only_ledger_in_worker_threads(store, conv):
    """A ledger without async methods is called by arun in worker threads, never on the event loop's thread,
    for the write's claim and completion and for the approval it consumes."""
    world = DemoWorld()
    ledger = _SyncOnly(store.ledger)
    assert not isinstance(ledger, AsyncLedger)
    d = Dispatcher(world.registry(), ledger=ledger, policy=lambda call, ctx: "needs_approval")

    async def main() -> tuple[list[ToolResult], int]:
        [asked] = await d.arun(_save_turn(), conversation_id=conv)
        token = d.approve(asked.approval, approver="ana")
        return await d.arun(_save_turn(), conversation_id=conv, approvals=[token]), threading.get_ident()

    results, loop_thread = asyncio.run(main())
    assert _kinds(results) == ["ok"] and world.effects.count() == 1
    assert [op for op, _ in ledger.threads] == ["claim", "claim", "complete"]  # approval, write, completion
    assert all(thread != loop_thread for _, thread in ledger.threads)


class _CountingPostgresLedger(PostgresLedger):
    """A PostgresLedger that counts its async calls and refuses its sync ones (arun must not use them)."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.calls: list[str] = []

    async def aclaim(self, key: LedgerKey, fingerprint: str = "") -> Any:
        self.calls.append("aclaim")
        return await super().aclaim(key, fingerprint)

    async def acomplete(self, key: LedgerKey, result: ToolResult) -> None:
        self.calls.append("acomplete")
        await super().acomplete(key, result)

    def claim(self, key: LedgerKey, fingerprint: str = "") -> Any:
        raise AssertionError("arun called the sync claim")

    def complete(self, key: LedgerKey, result: ToolResult) -> None:
        raise AssertionError("arun called the sync complete")


def test_arun_awaits_the_async_methods_of_postgres_ledger(pg_dsn, conv):
    """arun awaits aclaim for the approval and the write and acomplete for its result, never the sync methods."""
    world = DemoWorld()
    ledger = _CountingPostgresLedger(pg_dsn, pool_size=2, timeout=10)
    try:
        assert isinstance(ledger, AsyncLedger)
        d = Dispatcher(world.registry(), ledger=ledger, policy=lambda call, ctx: "needs_approval")

        async def main() -> list[ToolResult]:
            [asked] = await d.arun(_save_turn(), conversation_id=conv)
            token = d.approve(asked.approval, approver="ana")
            try:
                return await d.arun(_save_turn(), conversation_id=conv, approvals=[token])
            finally:
                await ledger.aclose()

        results = asyncio.run(main())
        assert _kinds(results) == ["ok"] and world.effects.count() == 1
        assert ledger.calls == ["aclaim", "aclaim", "acomplete"]
        assert ledger.get(LedgerKey.for_call(conv, _save_turn().calls[0],
                                             toolwire.registry.arguments_sha256(SAVE[2]),
                                             turn="response:msg_contract")).status == "completed"
    finally:
        ledger.close()


# ---- across processes -----------------------------------------------------------------------------------------


def _claim_worker(spec: tuple[str, str], key: LedgerKey, barrier: Any, out: Any) -> None:
    try:
        ledger = _open(spec)
        barrier.wait()
        out.put(ledger.claim(key, "race") is None)
    except BaseException as exc:  # report, so the parent fails with the reason rather than a timeout
        out.put(repr(exc))


def _join(procs, timeout: float = 60.0) -> None:
    for p in procs:
        p.join(timeout)
    for p in procs:
        if p.is_alive():  # pragma: no cover - a hung racer fails the test, never the session
            p.kill()
            pytest.fail("a racing process did not finish")


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_eight_processes_claim_one_key_exactly_once(kind, request, tmp_path, conv):
    """Eight processes racing on one key: exactly one claim wins, the others see it started."""
    spec = ("sqlite", str(tmp_path / "l.db")) if kind == "sqlite" else ("postgres", request.getfixturevalue("pg_dsn"))
    _open(spec).close()
    key = LedgerKey(conv, "id:race")
    barrier, out = CTX.Barrier(RACERS), CTX.Queue()
    procs = [CTX.Process(target=_claim_worker, args=(spec, key, barrier, out)) for _ in range(RACERS)]
    for p in procs:
        p.start()
    _join(procs)
    wins = [out.get(timeout=10) for _ in range(RACERS)]
    assert wins.count(True) == 1 and wins.count(False) == RACERS - 1, wins
    ledger = _open(spec)
    try:
        assert ledger.get(key).status == "started"
    finally:
        ledger.close()


def _forked_claim(ledger: PostgresLedger, key: LedgerKey, out: Any) -> None:
    try:
        out.put(ledger.claim(key) is None)
    except BaseException as exc:
        out.put(repr(exc))


def test_postgres_ledger_inherited_by_fork_opens_its_own_pool(pg_dsn, conv):
    """A PostgresLedger used before fork works in the child (its own pool) and still works in the parent."""
    if "fork" not in multiprocessing.get_all_start_methods():  # pragma: no cover
        pytest.skip("no fork")
    ledger = PostgresLedger(pg_dsn, pool_size=2, timeout=10)
    try:
        assert ledger.claim(LedgerKey(conv, "id:parent")) is None
        ctx = multiprocessing.get_context("fork")
        out = ctx.Queue()
        proc = ctx.Process(target=_forked_claim, args=(ledger, LedgerKey(conv, "id:child"), out))
        proc.start()
        _join([proc])
        assert out.get(timeout=10) is True and proc.exitcode == 0
        assert ledger.get(LedgerKey(conv, "id:child")).status == "started"
        assert ledger.claim(LedgerKey(conv, "id:parent-after")) is None
    finally:
        ledger.close()


# ---- PostgreSQL failures and maintenance ----------------------------------------------------------------------


def test_postgres_unreachable_server_is_ledger_error():
    """A server that cannot be reached is a LedgerError from the constructor, without the DSN's password."""
    with pytest.raises(LedgerError) as info:
        PostgresLedger("postgresql://u:hunter2secret@127.0.0.1:1/x", timeout=2)
    assert "hunter2secret" not in str(info.value)
    with pytest.raises(toolwire.ToolwireError):
        PostgresLedger(UNREACHABLE, timeout=2)


def test_postgres_bad_arguments_are_ledger_errors():
    """A pool size or timeout that cannot work is refused before connecting."""
    for kw in ({"pool_size": 0}, {"timeout": 0}, {"timeout": float("nan")}):
        with pytest.raises(LedgerError):
            PostgresLedger(UNREACHABLE, **kw)


def test_postgres_driver_errors_are_ledger_errors(pg_dsn, conv):
    """An error the server or driver raises (here: a NUL in a text key) is a LedgerError, never psycopg's own."""
    ledger = PostgresLedger(pg_dsn, pool_size=1, timeout=10)
    try:
        bad = LedgerKey(conv + "\x00", "id:nul")
        for op in (lambda: ledger.claim(bad), lambda: ledger.get(bad), lambda: ledger.complete(bad, _result())):
            with pytest.raises(LedgerError):
                op()
        assert ledger.claim(LedgerKey(conv, "id:after")) is None  # the pool recovered
        assert "PostgresLedger(postgresql://127.0.0.1:" in repr(ledger)
    finally:
        ledger.close()


def test_postgres_close_then_reuse(pg_dsn, conv):
    """close() closes this process's pool; the ledger reopens it on next use."""
    ledger = PostgresLedger(pg_dsn, pool_size=1, timeout=10)
    ledger.claim(LedgerKey(conv, "id:a"))
    ledger.close()
    ledger.close()
    assert ledger.get(LedgerKey(conv, "id:a")).status == "started"
    with ledger:
        assert ledger.claim(LedgerKey(conv, "id:b")) is None


def test_postgres_purge_completed_never_deletes_started_rows(pg_dsn, conv):
    """purge_completed deletes completed rows older than the limit only: never started claims or approvals."""
    import psycopg

    ledger = PostgresLedger(pg_dsn, pool_size=1, timeout=10)
    try:
        old, fresh = LedgerKey(conv, "id:old"), LedgerKey(conv, "id:fresh")
        stuck, approval = LedgerKey(conv, "id:stuck"), LedgerKey.for_approval(conv, "sig")
        for key in (old, fresh, stuck, approval):
            ledger.claim(key)
        ledger.complete(old, _result())
        ledger.complete(fresh, _result())
        with psycopg.connect(pg_dsn, autocommit=True) as conn:  # age everything of this test by two hours
            conn.execute("UPDATE toolwire_ledger SET started_at = started_at - 7200,"
                         " completed_at = completed_at - 7200 WHERE conversation_id = %s AND call_key <> %s",
                         (conv, fresh.call_key))
        assert ledger.purge_completed(3600) >= 1
        assert ledger.get(old) is None
        assert ledger.get(fresh).status == "completed"
        assert ledger.get(stuck).status == "started" and ledger.get(approval).status == "started"
        # a purged key can be claimed again
        assert ledger.claim(old) is None
        for bad in (-1, float("nan"), float("inf"), "1"):
            with pytest.raises(LedgerError):
                ledger.purge_completed(bad)
    finally:
        ledger.close()


class _Proxy:
    """A TCP relay to the server that can be cut: a ledger behind it loses its server mid-life."""

    def __init__(self, host: str, port: int) -> None:
        self._upstream = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()
        self._cut = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                if self._cut:
                    client.close()
                    return
                upstream = socket.create_connection(self._upstream)
                self._socks += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def cut(self) -> None:
        with self._lock:
            self._cut = True
            try:
                self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
            except OSError:
                pass
            self._listener.close()
            for s in self._socks:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()


def test_dispatcher_runs_nothing_when_postgres_is_unreachable_at_claim(pg_dsn, conv):
    """The server goes away after the ledger opened: nothing runs, and the write is answered outcome_unknown
    (whether it ran in an earlier dispatch cannot be checked)."""
    import psycopg

    info = psycopg.conninfo.conninfo_to_dict(pg_dsn)
    proxy = _Proxy(info.get("host") or "127.0.0.1", int(info.get("port") or 5432))
    dsn = psycopg.conninfo.make_conninfo(pg_dsn, host="127.0.0.1", port=str(proxy.port))
    ledger = PostgresLedger(dsn, pool_size=1, timeout=2)
    try:
        assert ledger.claim(LedgerKey(conv, "id:warm")) is None  # the pool is open and connected
        proxy.cut()
        world = DemoWorld()
        for run in (lambda d: d.run(_save_turn(), conversation_id=conv),
                    lambda d: asyncio.run(d.arun(_save_turn(), conversation_id=conv))):
            [res] = run(Dispatcher(world.registry(), ledger=ledger))
            assert res.kind is ResultKind.OUTCOME_UNKNOWN and res.is_error
        assert world.effects.count() == 0 and world.calls == {}
        with pytest.raises(LedgerError):
            ledger.get(LedgerKey(conv, "id:warm"))
    finally:
        ledger.close()
    # the claim never reached the server
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM toolwire_ledger WHERE conversation_id = %s",
                            (conv,)).fetchone()[0] == 1


def test_dispatcher_with_unreachable_ledger_at_construction(conv):
    """A PostgresLedger that cannot reach its server is never built, so no Dispatcher can use it."""
    with pytest.raises(LedgerError):
        Dispatcher(DemoWorld().registry(), ledger=PostgresLedger(UNREACHABLE, timeout=2))


def test_msgspec_json_is_the_stored_form(pg_dsn, conv):
    """Results are stored as msgspec JSON bytes (readable by any client)."""
    import psycopg

    ledger = PostgresLedger(pg_dsn, pool_size=1, timeout=10)
    try:
        key = LedgerKey(conv, "id:json")
        ledger.claim(key)
        ledger.complete(key, _result())
    finally:
        ledger.close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        raw = conn.execute("SELECT result FROM toolwire_ledger WHERE conversation_id = %s", (conv,)).fetchone()[0]
    assert msgspec.json.decode(bytes(raw)) == msgspec.to_builtins(_result())


# ---- PostgreSQL: the async twins ------------------------------------------------------------------------------


def _on_a_loop(ledger: PostgresLedger, main: Callable[[], Any]) -> Any:
    """``await main()`` on a fresh event loop, close that loop's pool (``async with ledger``), then the ledger."""
    async def run() -> Any:
        async with ledger:
            return await main()

    try:
        return asyncio.run(run())
    finally:
        ledger.close()


def test_postgres_async_claim_complete_get(pg_dsn, conv):
    """aclaim, acomplete and aget answer like claim, complete and get, on the same rows."""
    ledger = PostgresLedger(pg_dsn, pool_size=2, timeout=10)
    key = LedgerKey(conv, "id:async")

    async def main() -> Any:
        assert await ledger.aget(key) is None
        assert await ledger.aclaim(key, "save_measurement:abc") is None
        rec = await ledger.aclaim(key, "save_measurement:abc")
        assert (rec.status, rec.fingerprint, rec.result) == ("started", "save_measurement:abc", None)
        await ledger.acomplete(key, _result())
        done = await ledger.aget(key)
        assert done.status == "completed" and done.result == _result() and done.completed_at >= done.started_at
        assert (await ledger.aclaim(key)).result == _result()
        # the sync methods read what the async ones wrote
        assert await asyncio.to_thread(ledger.get, key) == done
        return done

    done = _on_a_loop(ledger, main)
    with PostgresLedger(pg_dsn, pool_size=1, timeout=10) as other:
        assert other.get(key) == done and other.claim(key).status == "completed"


def test_postgres_async_errors_are_ledger_errors(pg_dsn, conv):
    """The async twins fail as the sync methods do: a LedgerError for an unclaimed or completed key, an unstorable
    result, a value the driver refuses and a row that cannot be read; never psycopg's own exception."""
    import psycopg

    ledger = PostgresLedger(pg_dsn, pool_size=1, timeout=10)
    key, bad = LedgerKey(conv, "id:async-errors"), LedgerKey(conv + "\x00", "id:nul")

    async def main() -> None:
        with pytest.raises(LedgerError, match="not started"):
            await ledger.acomplete(key, _result())
        assert await ledger.aclaim(key) is None
        for op in (lambda: ledger.acomplete(key, _result(content={"x": object()})), lambda: ledger.aclaim(bad),
                   lambda: ledger.aget(bad), lambda: ledger.acomplete(bad, _result())):
            with pytest.raises(LedgerError) as info:
                await op()
            assert not isinstance(info.value, psycopg.Error)
        await ledger.acomplete(key, _result())
        with pytest.raises(LedgerError, match="not started"):
            await ledger.acomplete(key, _result(content="second"))
        assert (await ledger.aget(key)).result == _result()
        _corrupt(Store("postgres", lambda: ledger, ("postgres", pg_dsn)), key)
        for op in (ledger.aget, ledger.aclaim):
            with pytest.raises(LedgerError, match="cannot be read"):
                await op(key)

    _on_a_loop(ledger, main)


def test_postgres_concurrent_aclaims_of_one_key_have_one_winner(pg_dsn, conv):
    """Many tasks claiming one key at once through aclaim: exactly one gets None, the others the started row."""
    ledger = PostgresLedger(pg_dsn, pool_size=4, timeout=10)
    key = LedgerKey(conv, "id:async-race")
    answers = _on_a_loop(ledger, lambda: asyncio.gather(*(ledger.aclaim(key, "race") for _ in range(32))))
    assert sum(a is None for a in answers) == 1
    assert all(a.status == "started" and a.fingerprint == "race" for a in answers if a is not None)


def test_postgres_async_pool_per_event_loop(pg_dsn, conv):
    """Each event loop gets its own pool: several loops, one after another and at once in threads, all work;
    aclose closes the running loop's pool and the next call opens another."""
    ledger = PostgresLedger(pg_dsn, pool_size=2, timeout=10)

    async def claim_twice(name: str) -> list[Any]:
        first = await ledger.aclaim(LedgerKey(conv, f"id:{name}-1"))
        await ledger.aclose()
        second = await ledger.aclaim(LedgerKey(conv, f"id:{name}-2"))
        await ledger.aclose()
        return [first, second]

    outcomes: dict[str, Any] = {}

    def in_thread(name: str) -> None:
        try:
            outcomes[name] = asyncio.run(claim_twice(name))
        except BaseException as exc:  # reported to the test below
            outcomes[name] = exc

    try:
        assert asyncio.run(claim_twice("a")) == [None, None]
        assert asyncio.run(claim_twice("b")) == [None, None]
        threads = [threading.Thread(target=in_thread, args=(f"t{i}",)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert outcomes == {f"t{i}": [None, None] for i in range(4)}
        assert asyncio.run(ledger.aget(LedgerKey(conv, "id:t3-2"))).status == "started"
    finally:
        ledger.close()


def test_postgres_async_unreachable_server_is_ledger_error(pg_dsn, conv):
    """A server that went away (its port now closed) makes aclaim, acomplete and aget raise LedgerError, typed,
    within the ledger's timeout and a margin."""
    import psycopg

    info = psycopg.conninfo.conninfo_to_dict(pg_dsn)
    proxy = _Proxy(info.get("host") or "127.0.0.1", int(info.get("port") or 5432))
    dsn = psycopg.conninfo.make_conninfo(pg_dsn, host="127.0.0.1", port=str(proxy.port))
    ledger = PostgresLedger(dsn, pool_size=1, timeout=2)
    key = LedgerKey(conv, "id:async-gone")

    async def main() -> None:
        assert await ledger.aclaim(key) is None  # the loop's pool is open and connected
        proxy.cut()  # every connection is dropped and the port is closed
        for op in (lambda: ledger.aclaim(LedgerKey(conv, "id:other")), lambda: ledger.acomplete(key, _result()),
                   lambda: ledger.aget(key)):
            started = time.monotonic()
            with pytest.raises(LedgerError) as info:
                await op()
            assert not isinstance(info.value, psycopg.Error)
            assert time.monotonic() - started < ledger.timeout + 10

    _on_a_loop(ledger, main)


def test_postgres_ledger_adds_the_claim_token_column_to_an_existing_table(pg_dsn, conv):
    """A table created before claim tokens existed gets the claim_token column when a ledger opens it; its rows
    are still read, and claims work."""
    import psycopg

    schema = "upgrade_" + uuid.uuid4().hex[:12]
    dsn = psycopg.conninfo.make_conninfo(pg_dsn, options=f"-c search_path={schema}")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"CREATE TABLE {schema}.toolwire_ledger (conversation_id TEXT NOT NULL, call_key TEXT NOT NULL,"
                     " status TEXT NOT NULL CHECK (status IN ('started', 'completed')),"
                     " fingerprint TEXT NOT NULL DEFAULT '', result BYTEA, started_at DOUBLE PRECISION NOT NULL,"
                     " completed_at DOUBLE PRECISION, pid INTEGER, PRIMARY KEY (conversation_id, call_key))")
        conn.execute(f"INSERT INTO {schema}.toolwire_ledger (conversation_id, call_key, status, started_at)"
                     " VALUES (%s, 'id:old', 'started', 1.0)", (conv,))
    try:
        ledger = PostgresLedger(dsn, pool_size=1, timeout=10)
        try:
            assert ledger.get(LedgerKey(conv, "id:old")).status == "started"
            assert ledger.claim(LedgerKey(conv, "id:old")).status == "started"  # a NULL token is nobody's
            assert ledger.claim(LedgerKey(conv, "id:new")) is None
        finally:
            ledger.close()
        PostgresLedger(dsn, pool_size=1, timeout=10).close()  # opening it again changes nothing
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            tokens = conn.execute(f"SELECT call_key, claim_token FROM {schema}.toolwire_ledger ORDER BY call_key")
            rows = dict(tokens.fetchall())
        assert rows["id:old"] is None and len(rows["id:new"]) == 32
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
