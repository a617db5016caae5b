"""PostgreSQL stopped or restarted under a running PostgresLedger: operations wait and retry up to the ledger's
timeout, a completion is never lost, a retried claim knows its own row, and a server that stays away is a typed
LedgerError (a write is then answered not_run and never runs).

These tests stop and restart their server, so they use their own private cluster (``tests.pg_cluster.start``,
with durable commits so that an immediate shutdown, like a crash, loses no committed row), never the shared
``pg_dsn`` one. ``TOOLWIRE_SKIP_POSTGRES=1`` skips them; a cluster that cannot start fails them.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid
from typing import Any

import msgspec
import pytest

import toolwire
from toolwire.registry import Dispatcher, LedgerError, LedgerKey, PostgresLedger, ResultKind, ToolResult
from toolwire.registry.pg_ledger import _Attempt

from .bodies import PROVIDERS, body, identified

MODES = ("fast", "immediate")


def _result(content: Any = "stored") -> ToolResult:
    return ToolResult(call_id="call_1", local_id="tw-0", name="save_note", content=content, is_error=False,
                      kind=ResultKind.OK)


@pytest.fixture(scope="module")
def cluster():
    """A private PostgreSQL cluster for this module only (its tests stop and restart it), stopped at the end."""
    if os.environ.get("TOOLWIRE_SKIP_POSTGRES") == "1":
        pytest.skip("TOOLWIRE_SKIP_POSTGRES=1: the PostgreSQL ledger tests are skipped")
    from .pg_cluster import start

    try:
        c = start(durable=True)
    except Exception as exc:  # noqa: BLE001 - any reason the cluster cannot start fails the tests
        pytest.fail(f"cannot start a private PostgreSQL cluster (set TOOLWIRE_SKIP_POSTGRES=1 to skip the "
                    f"PostgreSQL tests): {exc}", pytrace=False)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def server(cluster):
    """The module's cluster, running when each test starts and again when it ends (whatever the test did)."""
    if not cluster.running:
        cluster.start_server()
    yield cluster
    if not cluster.running:
        cluster.start_server()


@pytest.fixture
def conv() -> str:
    """A conversation id no other test uses."""
    return "restart-" + uuid.uuid4().hex


def _rows(url: str, conversation_id: str) -> list[tuple]:
    """(call_key, status, result) of every row of the conversation, read straight from the server."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT call_key, status, result FROM toolwire_ledger WHERE conversation_id = %s"
                            " ORDER BY call_key", (conversation_id,)).fetchall()


def _restart_later(server: Any, seconds: float) -> threading.Thread:
    """Start the stopped server again after ``seconds``, from another thread."""
    def later() -> None:
        time.sleep(seconds)
        server.start_server()

    thread = threading.Thread(target=later)
    thread.start()
    return thread


# ---- the ledger alone -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_complete_after_a_restart_between_claim_and_complete_is_recorded(server, conv, mode):
    """The server restarts between claim and complete: complete retries on a new connection and the record is
    completed, for this ledger object and for a new one."""
    ledger = PostgresLedger(server.url, pool_size=2, timeout=30)
    key = LedgerKey(conv, "id:restart")
    try:
        assert ledger.claim(key, "save_note") is None
        server.restart(mode)
        ledger.complete(key, _result())
        rec = ledger.get(key)
        assert (rec.status, rec.result, rec.fingerprint) == ("completed", _result(), "save_note")
    finally:
        ledger.close()
    with PostgresLedger(server.url, pool_size=1, timeout=30) as fresh:
        assert fresh.get(key) == rec


@pytest.mark.parametrize("mode", MODES)
def test_acomplete_after_a_restart_between_aclaim_and_acomplete_is_recorded(server, conv, mode):
    """The async twins over a restart: acomplete retries on a new connection of the loop's pool and the record
    is completed."""
    ledger = PostgresLedger(server.url, pool_size=2, timeout=30)
    key = LedgerKey(conv, "id:arestart")

    async def main() -> Any:
        async with ledger:
            assert await ledger.aclaim(key, "save_note") is None
            await asyncio.to_thread(server.restart, mode)
            await ledger.acomplete(key, _result())
            return await ledger.aget(key)

    try:
        rec = asyncio.run(main())
        assert (rec.status, rec.result) == ("completed", _result())
        assert ledger.get(key) == rec
    finally:
        ledger.close()


def test_operations_raise_ledger_error_when_the_server_stays_down_past_the_timeout(server, conv):
    """With the server down longer than the timeout, every operation, sync and async, raises LedgerError (never
    psycopg's own error) within the timeout and a margin; once the server is back the same ledger works again."""
    import psycopg

    ledger = PostgresLedger(server.url, pool_size=2, timeout=3)
    key, other = LedgerKey(conv, "id:down"), LedgerKey(conv, "id:other")
    ops = [lambda: ledger.aclaim(other), lambda: ledger.acomplete(key, _result()), lambda: ledger.aget(key),
           lambda: asyncio.to_thread(ledger.claim, other), lambda: asyncio.to_thread(ledger.complete, key, _result()),
           lambda: asyncio.to_thread(ledger.get, key), lambda: asyncio.to_thread(ledger.purge_completed, 3600)]

    async def main() -> list[tuple[BaseException | None, float]]:
        outcomes: list[tuple[BaseException | None, float]] = []
        async with ledger:
            assert await ledger.aclaim(key) is None  # both pools are open and connected
            assert await asyncio.to_thread(ledger.get, key) is not None
            await asyncio.to_thread(server.stop_server)
            for op in ops:
                started = time.monotonic()
                try:
                    await op()
                except LedgerError as exc:
                    outcomes.append((exc, time.monotonic() - started))
                else:
                    outcomes.append((None, time.monotonic() - started))
        return outcomes

    try:
        outcomes = asyncio.run(main())
        assert all(isinstance(exc, LedgerError) and not isinstance(exc, psycopg.Error) for exc, _ in outcomes)
        assert all(took < ledger.timeout + 10 for _, took in outcomes)
        server.start_server()
        assert ledger.claim(LedgerKey(conv, "id:back")) is None
        assert asyncio.run(ledger.aclaim(LedgerKey(conv, "id:aback"))) is None
        ledger.complete(key, _result())
    finally:
        ledger.close()
    assert [(k, s) for k, s, _ in _rows(server.url, conv)] == \
        [("id:aback", "started"), ("id:back", "started"), ("id:down", "completed")]


def test_claim_waits_for_a_server_that_comes_back_within_the_timeout(server, conv):
    """A claim made while the server is down for less than the timeout waits, then claims the key."""
    ledger = PostgresLedger(server.url, pool_size=2, timeout=30)
    try:
        assert ledger.claim(LedgerKey(conv, "id:warm")) is None
        server.stop_server()
        back = _restart_later(server, 3)
        started = time.monotonic()
        try:
            assert ledger.claim(LedgerKey(conv, "id:waited"), "save_note") is None
        finally:
            back.join()
        assert time.monotonic() - started < ledger.timeout + 10
        assert ledger.get(LedgerKey(conv, "id:waited")).status == "started"
    finally:
        ledger.close()


def test_aclaim_waits_for_a_server_that_comes_back_within_the_timeout(server, conv):
    """An aclaim made while the server is down for less than the timeout waits (without blocking the loop),
    then claims the key."""
    ledger = PostgresLedger(server.url, pool_size=2, timeout=30)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.05)
            ticks += 1

    async def main() -> Any:
        async with ledger:
            assert await ledger.aclaim(LedgerKey(conv, "id:awarm")) is None
            await asyncio.to_thread(server.stop_server)
            back = _restart_later(server, 3)
            clock = asyncio.create_task(ticker())
            try:
                return await ledger.aclaim(LedgerKey(conv, "id:awaited"), "save_note")
            finally:
                clock.cancel()
                await asyncio.to_thread(back.join)

    try:
        assert asyncio.run(main()) is None
        assert ticks > 10  # the loop kept running while the claim waited
        assert ledger.get(LedgerKey(conv, "id:awaited")).status == "started"
    finally:
        ledger.close()


# ---- replies lost after the server committed -------------------------------------------------------------------


class _LosesAConnection(PostgresLedger):
    """A PostgresLedger whose next operation, once armed with ``lose_next``, loses its connection in its first
    attempt: after the server ran and committed it (``committed=True``: the reply is lost) or before it reached
    the server. The operation must be retried, and must tell which of the two happened."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.lost = 0
        self._lose: bool | None = None

    def lose_next(self, *, committed: bool) -> None:
        self._lose = committed

    def _maybe_lose(self, request: Any, committed: bool) -> None:
        import psycopg

        if isinstance(request, _Attempt) and self._lose is committed:
            self._lose = None
            self.lost += 1
            raise psycopg.OperationalError("server closed the connection unexpectedly")

    def _perform(self, request: Any) -> Any:
        self._maybe_lose(request, committed=False)
        answer = super()._perform(request)
        self._maybe_lose(request, committed=True)
        return answer

    async def _aperform(self, request: Any) -> Any:
        self._maybe_lose(request, committed=False)
        answer = await super()._aperform(request)
        self._maybe_lose(request, committed=True)
        return answer


def test_claim_whose_reply_was_lost_is_still_ours(server, conv):
    """A claim committed on the server whose reply was lost is retried and answered None (ours, by its claim
    token), not as someone else's started claim; another claimer still sees it started."""
    ledger = _LosesAConnection(server.url, pool_size=1, timeout=30)
    key, akey = LedgerKey(conv, "id:lost-claim"), LedgerKey(conv, "id:lost-aclaim")
    try:
        ledger.lose_next(committed=True)
        assert ledger.claim(key, "save_note") is None
        ledger.lose_next(committed=True)
        assert asyncio.run(ledger.aclaim(akey, "save_note")) is None
        assert ledger.lost == 2
        with PostgresLedger(server.url, pool_size=1, timeout=30) as other:
            for k in (key, akey):
                rec = other.claim(k, "save_note")
                assert (rec.status, rec.fingerprint) == ("started", "save_note")
        assert ledger.claim(key, "save_note").status == "started"  # a new claim of ours is another claim
    finally:
        ledger.close()


def test_claim_whose_connection_broke_before_the_server_ran_it_is_claimed_once(server, conv):
    """A claim whose connection broke before it reached the server is retried and claims the key, once."""
    ledger = _LosesAConnection(server.url, pool_size=1, timeout=30)
    key = LedgerKey(conv, "id:broke-claim")
    try:
        ledger.lose_next(committed=False)
        assert ledger.claim(key) is None and ledger.lost == 1
        assert [(k, s) for k, s, _ in _rows(server.url, conv)] == [("id:broke-claim", "started")]
    finally:
        ledger.close()


def test_complete_whose_reply_was_lost_succeeds_on_retry(server, conv):
    """A completion committed on the server whose reply was lost is retried and succeeds (the row already holds
    this result), sync and async; a second, separate complete is still refused."""
    ledger = _LosesAConnection(server.url, pool_size=1, timeout=30)
    key, akey = LedgerKey(conv, "id:lost-complete"), LedgerKey(conv, "id:lost-acomplete")
    try:
        for k in (key, akey):
            assert ledger.claim(k) is None
        ledger.lose_next(committed=True)
        ledger.complete(key, _result())
        ledger.lose_next(committed=True)
        asyncio.run(ledger.acomplete(akey, _result("async")))
        assert ledger.lost == 2
        assert ledger.get(key).result == _result() and ledger.get(akey).result == _result("async")
        with pytest.raises(LedgerError, match="not started"):
            ledger.complete(key, _result())
    finally:
        ledger.close()


def test_retried_complete_that_finds_another_result_is_refused(server, conv):
    """A retried complete that finds the row completed with a different result is a LedgerError, and the stored
    result is kept."""
    ledger = _LosesAConnection(server.url, pool_size=1, timeout=30)
    key = LedgerKey(conv, "id:other-result")
    try:
        assert ledger.claim(key) is None
        ledger.complete(key, _result("first"))
        ledger.lose_next(committed=False)
        with pytest.raises(LedgerError, match="not started"):
            ledger.complete(key, _result("second"))
        assert ledger.lost == 1 and ledger.get(key).result == _result("first")
    finally:
        ledger.close()


# ---- through the public API -----------------------------------------------------------------------------------


def _dispatch(d: Dispatcher, how: str, turn: toolwire.Turn, **kw: Any) -> list[ToolResult]:
    return d.run(turn, **kw) if how == "run" else asyncio.run(d.arun(turn, **kw))


def _note_turn(provider: str) -> toolwire.Turn:
    call_id = None if provider == "gemini" else "call_note_1"  # Gemini sends calls without ids
    return toolwire.parse(provider, body(provider, [(call_id, "save_note", {"text": "hello"})],
                                         response_id="resp_restart"))


@pytest.mark.parametrize("how", ["run", "arun"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_write_that_restarts_the_server_is_completed_and_answered_once(server, conv, provider, how):
    """A write whose handler restarts the ledger's server (between claim and complete) is answered ok, its
    record is completed with that result, and dispatching the turn again answers from the record with no
    second effect."""
    effects: list[str] = []

    def save_note(text: str) -> dict[str, Any]:
        """Save a note."""
        effects.append(text)
        server.restart()
        return {"saved": text, "count": len(effects)}

    registry = toolwire.Registry([toolwire.Tool.from_function(save_note, effect="write", timeout=120)])
    ledger = PostgresLedger(server.url, pool_size=2, timeout=30)
    try:
        # the turn's identity: the response id its body carries, else the turn_id its users pass
        kw = identified(provider, "resp_restart")
        [res] = _dispatch(Dispatcher(registry, ledger=ledger), how, _note_turn(provider), conversation_id=conv, **kw)
        assert res.kind is ResultKind.OK and res.content == {"saved": "hello", "count": 1}
        [(_, status, stored)] = _rows(server.url, conv)
        assert status == "completed"
        assert msgspec.json.decode(bytes(stored), type=ToolResult).content == res.content
        # a new dispatcher (a restarted worker) on the same ledger: answered from the record, nothing runs
        [again] = _dispatch(Dispatcher(registry, ledger=ledger), how, _note_turn(provider), conversation_id=conv,
                            **kw)
        assert again.kind is ResultKind.OK and again.content == res.content
        assert effects == ["hello"]
    finally:
        ledger.close()


@pytest.mark.parametrize("how", ["run", "arun"])
def test_write_does_not_run_when_the_server_stays_down_past_the_timeout(server, conv, how):
    """With the server down longer than the ledger's timeout, a write's handler never runs and no row is written;
    it is answered outcome_unknown (whether it ran in an earlier dispatch cannot be checked)."""
    effects: list[str] = []

    def save_note(text: str) -> dict[str, Any]:
        """Save a note."""
        effects.append(text)
        return {"saved": text}

    registry = toolwire.Registry([toolwire.Tool.from_function(save_note, effect="write")])
    ledger = PostgresLedger(server.url, pool_size=2, timeout=2)
    try:
        assert ledger.claim(LedgerKey(conv, "id:warm")) is None
        server.stop_server()
        started = time.monotonic()
        [res] = _dispatch(Dispatcher(registry, ledger=ledger), how, _note_turn("anthropic"), conversation_id=conv)
        assert time.monotonic() - started < ledger.timeout + 10
        assert res.kind is ResultKind.OUTCOME_UNKNOWN and res.is_error and effects == []
    finally:
        ledger.close()
    server.start_server()
    assert [k for k, _, _ in _rows(server.url, conv)] == ["id:warm"]
