"""One contract for every ledger: MemoryLedger, SQLiteLedger and PostgresLedger answer claim, complete and get
alike, keep one write to one effect through the Dispatcher, and fail only with LedgerError.

The PostgreSQL ledger runs against ``TOOLWIRE_PG_DSN`` or a private cluster started for the session (see
``conftest.pg_dsn``); each test uses its own conversation ids, so tests never see each other's rows.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import socket
import sqlite3
import threading
import uuid
from typing import Any, Callable

import msgspec
import pytest

import toolwire
from toolwire.harness.demo_tools import DemoWorld
from toolwire.registry import (
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


def test_started_write_is_outcome_unknown_on_redispatch(store, conv):
    """A write whose key is started but never completed is answered outcome_unknown and not run again."""
    world = DemoWorld()
    d = Dispatcher(world.registry(), ledger=store.ledger)
    [res] = d.run(_save_turn(), conversation_id=conv)
    call = _save_turn().calls[0]
    # the same call in another conversation, whose key a crashed process left at started
    other = conv + "-crashed"
    key = LedgerKey.for_call(other, call, toolwire.registry.arguments_sha256(call.args), turn="response:msg_contract")
    assert store.ledger.claim(key, "") is None
    [unknown] = d.run(_save_turn(), conversation_id=other)
    assert res.kind is ResultKind.OK and unknown.kind is ResultKind.OUTCOME_UNKNOWN
    assert world.effects.count() == 1


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
    assert _open(spec).get(key).status == "started"


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


def test_dispatcher_answers_not_run_when_postgres_is_unreachable_at_claim(pg_dsn, conv):
    """The server goes away after the ledger opened: the write is answered not_run and nothing runs."""
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
            assert res.kind is ResultKind.NOT_RUN and res.is_error
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
