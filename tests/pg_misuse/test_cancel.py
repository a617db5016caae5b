"""An ``arun`` cancelled while its write's claim is in flight: the handler never ran, so the call must not be left
answering ``outcome_unknown`` forever (a ``started`` row nobody will complete)."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from typing import Any

import psycopg
import pytest

import toolwire
from toolwire.registry import Dispatcher, PostgresLedger, ResultKind

from ..bodies import body
from .conftest import bounded


def _rows(url: str, conv: str) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT status FROM toolwire_ledger WHERE conversation_id = %s", (conv,)).fetchall()


def _saving(ran: list[str]) -> toolwire.Registry:
    """A registry of one async write, ``save_note``, that records each text it saves in ``ran``."""
    async def save_note(text: str) -> str:
        """Save a note."""
        ran.append(text)
        return "saved"

    return toolwire.Registry([toolwire.Tool.from_function(save_note, effect="write")])


async def _start_with_its_claim_committed(cluster: Any, proxy: Any, conv: str, coro: Any) -> asyncio.Task:
    """Hold back the server's replies from the claim's INSERT on (it commits, its answer waits), run ``coro`` as a
    task, and return the task once the claim's row of ``conv`` is committed."""
    proxy.freeze_replies_after(b"INSERT INTO toolwire_ledger")
    task = asyncio.create_task(coro)
    deadline = time.monotonic() + 10
    while not await asyncio.to_thread(_rows, cluster.url, conv):
        assert time.monotonic() < deadline, "the claim never reached the server"
        await asyncio.sleep(0.02)
    return task


def test_arun_cancelled_after_its_claim_committed_does_not_leave_a_phantom_started_write(cluster, proxy):
    """arun cancelled after its claim committed but before the handler ran: a re-dispatch runs it once."""
    ran: list[str] = []
    registry = _saving(ran)
    ledger = PostgresLedger(proxy.url, timeout=10)
    conv = "cancel-" + uuid.uuid4().hex
    turn = toolwire.parse("anthropic", body("anthropic", [("toolu_1", "save_note", {"text": "x"})]))

    async def main():
        d = Dispatcher(registry, ledger=ledger)
        await ledger.aget(toolwire.registry.LedgerKey("warm", "up"))  # the loop's pool holds a connection
        task = await _start_with_its_claim_committed(cluster, proxy, conv, d.arun(turn, conversation_id=conv))
        task.cancel()  # e.g. an asyncio.timeout() around the request, or the client went away
        proxy.thaw()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert ran == []  # the handler never ran
        again = await Dispatcher(registry, ledger=ledger).arun(turn, conversation_id=conv)
        return again

    _, (how, value) = bounded(lambda: asyncio.run(main()), 60)
    assert how == "ok", value
    [res] = value
    assert res.kind is not ResultKind.OUTCOME_UNKNOWN, (res.kind, _rows(cluster.url, conv), ran)
    assert ran == ["x"] and res.kind is ResultKind.OK


@pytest.mark.parametrize("how", ["run", "arun"])
def test_claim_committed_then_server_gone_is_not_outcome_unknown_forever(cluster, proxy, how):
    """A committed claim whose reply was lost past the timeout runs nothing (answered outcome_unknown: the record
    could not be read), then later runs once."""
    ran: list[str] = []

    def save_note(text: str) -> str:
        """Save a note."""
        ran.append(text)
        return "saved"

    registry = toolwire.Registry([toolwire.Tool.from_function(save_note, effect="write")])
    ledger = PostgresLedger(proxy.url, timeout=3)
    conv = "lost-" + uuid.uuid4().hex
    turn = toolwire.parse("openai-chat", body("openai-chat", [("call_1", "save_note", {"text": "x"})]))
    d = Dispatcher(registry, ledger=ledger)
    go = (lambda: d.run(turn, conversation_id=conv)) if how == "run" else \
        (lambda: asyncio.run(d.arun(turn, conversation_id=conv)))
    ledger.get(toolwire.registry.LedgerKey("warm", "up"))
    proxy.freeze_replies_after(b"INSERT INTO toolwire_ledger")


    box: dict = {}
    th = threading.Thread(target=lambda: box.setdefault("r", go()), daemon=True)
    th.start()
    try:
        deadline = time.monotonic() + 10
        while not _rows(cluster.url, conv):
            assert time.monotonic() < deadline, "the claim never reached the server"
            time.sleep(0.05)
        cluster.stop_server("fast")  # the server goes away with the claim committed ...
        proxy.cut()  # ... and its reply is lost with the connection
        th.join(20)
        assert not th.is_alive(), "dispatch did not end"
    finally:
        if not cluster.running:
            cluster.start_server()
    [first] = box["r"]
    assert first.kind is ResultKind.OUTCOME_UNKNOWN and ran == []
    [again] = Dispatcher(registry, ledger=ledger).run(turn, conversation_id=conv)
    assert again.kind is not ResultKind.OUTCOME_UNKNOWN, (again.kind, _rows(cluster.url, conv), ran)


_STALLS = {
    # the server stops answering altogether: the pool's check of the connection is what waits
    "check": lambda proxy: proxy.freeze(),
    # the claim's INSERT reaches the server and commits; its reply is what waits
    "statement": lambda proxy: proxy.freeze_replies_after(b"INSERT INTO toolwire_ledger"),
}


@pytest.mark.parametrize("stall", sorted(_STALLS))
def test_aclaim_cancelled_by_the_callers_timeout_ends_promptly_on_a_server_that_stopped_answering(cluster, proxy,
                                                                                                stall):
    """asyncio.wait_for(aclaim, 0.5) on a server that stopped answering ends with TimeoutError within a second or
    two (psycopg alone answers a cancelled statement with a cancel request it waits 5 s for); the ledger works
    again once the server answers."""
    ledger = PostgresLedger(proxy.url, timeout=10)
    key = toolwire.registry.LedgerKey("prompt-" + uuid.uuid4().hex, "k")

    async def main():
        assert await ledger.aget(toolwire.registry.LedgerKey("warm", "up")) is None  # a connection is pooled
        _STALLS[stall](proxy)
        t = time.monotonic()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(ledger.aclaim(key), 0.5)
        waited = time.monotonic() - t
        proxy.cut()
        return waited, await ledger.aclaim(toolwire.registry.LedgerKey("prompt-" + uuid.uuid4().hex, "k"))

    _, (how, value) = bounded(lambda: asyncio.run(main()), 30)
    assert how == "ok", value
    waited, claimed = value
    # 0.5 s, then the removal of a row the cancelled claim may have committed (at most 0.3 s to reach the server,
    # plus the half second its watchdog allows): well under psycopg's 5 s cancel request
    assert waited < 3.0 and claimed is None, value


@pytest.mark.parametrize("stall", sorted(_STALLS))
def test_arun_cancelled_by_the_callers_timeout_ends_promptly_and_the_write_runs_once_later(cluster, proxy, stall):
    """A write's arun under asyncio.wait_for, cancelled while its claim waits on a stalled server, ends within a
    second or two with the handler not run; dispatched again once the server answers, it runs exactly once."""
    ran: list[str] = []
    registry = _saving(ran)
    ledger = PostgresLedger(proxy.url, timeout=10)
    conv = "prompt-" + uuid.uuid4().hex
    turn = toolwire.parse("gemini", body("gemini", [("", "save_note", {"text": "x"})]))

    async def main():
        await ledger.aget(toolwire.registry.LedgerKey("warm", "up"))
        _STALLS[stall](proxy)
        t = time.monotonic()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(Dispatcher(registry, ledger=ledger).arun(turn, conversation_id=conv), 0.5)
        waited = time.monotonic() - t
        assert ran == []
        proxy.cut()
        [again] = await Dispatcher(registry, ledger=ledger).arun(turn, conversation_id=conv)
        return waited, again

    _, (how, value) = bounded(lambda: asyncio.run(main()), 30)
    assert how == "ok", value
    waited, again = value
    assert waited < 3.0, waited
    assert again.kind is ResultKind.OK and ran == ["x"], (again.kind, _rows(cluster.url, conv), ran)


def test_aclaim_cancelled_twice_in_a_row_leaves_no_failure_unretrieved_and_no_row(cluster):
    """aclaim cancelled, then cancelled again a few loop turns later, 150 times on a healthy server: no task failure
    left unretrieved (the connection never went back to its pool while its statement ran: psycopg frees it, and
    the process crashed) and no row left started."""
    import gc
    import random

    rnd = random.Random(5)
    ledger = PostgresLedger(cluster.url, timeout=5)
    messages: list[str] = []
    convs: list[str] = []

    async def main():
        asyncio.get_running_loop().set_exception_handler(lambda loop, ctx: messages.append(ctx["message"]))
        await ledger.aget(toolwire.registry.LedgerKey("warm", "up"))
        for n in range(150):
            conv = f"twice-{n}-{uuid.uuid4().hex[:8]}"
            convs.append(conv)
            task = asyncio.create_task(ledger.aclaim(toolwire.registry.LedgerKey(conv, "k")))
            for _ in range(rnd.randrange(1, 12)):
                await asyncio.sleep(0)
            task.cancel()
            for _ in range(rnd.randrange(1, 3)):
                await asyncio.sleep(0)
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
            gc.collect()
        await asyncio.sleep(0.2)
        gc.collect()

    # 150 rounds of cancel requests: bounded by the time without a round done, not by the whole loop's
    _, (how, value) = bounded(lambda: asyncio.run(main()), 60, progress=lambda: len(convs))
    assert how == "ok", value
    assert messages == []
    with psycopg.connect(cluster.url, autocommit=True) as conn:
        left = conn.execute("SELECT conversation_id FROM toolwire_ledger WHERE conversation_id = ANY(%s)",
                            (convs,)).fetchall()
    assert left == [], left


def test_a_claim_cancelled_while_its_insert_is_slow_leaves_no_started_row(cluster):
    """A slow INSERT (a commit waiting on a slow disk, simulated by a trigger that sleeps 1 s) and the caller's
    asyncio.timeout(0.3) around arun: the server is asked to cancel the INSERT and the claim's removal runs after
    it ended, so no started row appears later, and the write dispatched again runs once."""
    ran: list[str] = []
    registry = _saving(ran)
    ledger = PostgresLedger(cluster.url, timeout=10)
    conv = "slow-" + uuid.uuid4().hex
    turn = toolwire.parse("anthropic", body("anthropic", [("toolu_1", "save_note", {"text": "x"})]))
    with psycopg.connect(cluster.url, autocommit=True) as conn:
        conn.execute("CREATE OR REPLACE FUNCTION toolwire_test_slow() RETURNS trigger LANGUAGE plpgsql AS "
                     "$$BEGIN PERFORM pg_sleep(1); RETURN NEW; END$$")
        conn.execute("CREATE TRIGGER toolwire_test_slow BEFORE INSERT ON toolwire_ledger FOR EACH ROW "
                     "EXECUTE FUNCTION toolwire_test_slow()")
    try:
        async def main():
            await ledger.aget(toolwire.registry.LedgerKey("warm", "up"))
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.3):
                    await Dispatcher(registry, ledger=ledger).arun(turn, conversation_id=conv)
            await asyncio.sleep(1.5)  # the INSERT would have committed by now
            return await asyncio.to_thread(_rows, cluster.url, conv)

        _, (how, value) = bounded(lambda: asyncio.run(main()), 30)
        assert how == "ok" and value == [], value
    finally:
        with psycopg.connect(cluster.url, autocommit=True) as conn:
            conn.execute("DROP TRIGGER IF EXISTS toolwire_test_slow ON toolwire_ledger")
    [again] = Dispatcher(registry, ledger=ledger).run(turn, conversation_id=conv)
    assert again.kind is ResultKind.OK and ran == ["x"], again


@pytest.mark.parametrize("cancels", [1, 2])
def test_a_claim_cancelled_again_while_removing_its_row_keeps_it_for_later(cluster, proxy, cancels):
    """The claim's INSERT commits and its reply is held back; arun is cancelled (and cancelled again during the
    removal of its row): the row is remembered, removed before the next claim, and the write runs once."""
    ran: list[str] = []
    registry = _saving(ran)
    ledger = PostgresLedger(proxy.url, timeout=10)
    conv = f"again{cancels}-" + uuid.uuid4().hex
    turn = toolwire.parse("openai-responses", body("openai-responses", [("call_1", "save_note", {"text": "x"})]))

    async def main():
        await ledger.aget(toolwire.registry.LedgerKey("warm", "up"))
        task = await _start_with_its_claim_committed(cluster, proxy, conv, Dispatcher(registry, ledger=ledger).arun(turn, conversation_id=conv))
        task.cancel()
        if cancels == 2:
            await asyncio.sleep(0.05)
            task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        proxy.cut()
        assert ran == []
        [again] = await Dispatcher(registry, ledger=ledger).arun(turn, conversation_id=conv)
        return again

    _, (how, value) = bounded(lambda: asyncio.run(main()), 60)
    assert how == "ok", value
    assert value.kind is ResultKind.OK and ran == ["x"], (value.kind, _rows(cluster.url, conv), ran)


def test_a_cancelled_claim_keeps_the_removals_still_pending(cluster, proxy):
    """A row waiting to be removed (its claim failed while the server was unreachable) stays remembered when the
    next claim, which removes it first, is itself cancelled: the call that never ran runs once later."""
    ran: list[str] = []
    registry = _saving(ran)
    ledger = PostgresLedger(proxy.url, timeout=10)
    conv = "pending-" + uuid.uuid4().hex
    turn = toolwire.parse("bedrock-converse", body("bedrock-converse", [("t1", "save_note", {"text": "x"})]))

    async def main():
        d = Dispatcher(registry, ledger=ledger)
        await ledger.aget(toolwire.registry.LedgerKey("warm", "up"))
        task = await _start_with_its_claim_committed(cluster, proxy, conv,
                                                     d.arun(turn, conversation_id=conv, turn_id="r1"))
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task  # its row could not be removed: remembered
        proxy.freeze()  # still unreachable: the next claim, removing that row first, is cancelled meanwhile
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(ledger.aclaim(toolwire.registry.LedgerKey("other-" + uuid.uuid4().hex, "k")),
                                   0.3)
        proxy.cut()
        [again] = await Dispatcher(registry, ledger=ledger).arun(turn, conversation_id=conv, turn_id="r1")
        return again

    _, (how, value) = bounded(lambda: asyncio.run(main()), 60)
    assert how == "ok", value
    assert value.kind is ResultKind.OK and ran == ["x"], (value.kind, _rows(cluster.url, conv), ran)


def _client_backends(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' "
                            "AND pid <> pg_backend_pid()").fetchone()[0]


def test_ledger_use_in_a_finally_as_asyncio_run_ends_leaves_no_pool_behind(cluster):
    """Tasks busy with the ledger when asyncio.run ends use it once more in their ``finally``: each succeeds, and no
    pool outlives the loop (the pool closed as the loop ends is not replaced by a new one nobody closes: such a
    pool kept its server connections open after the loop was gone)."""
    import gc

    ledger = PostgresLedger(cluster.url, timeout=3)
    done: list[str] = []

    async def worker(i: int) -> None:
        try:
            while True:
                await ledger.aget(toolwire.registry.LedgerKey(f"fin-{i}", "k"))
        finally:
            await ledger.aget(toolwire.registry.LedgerKey(f"fin-{i}", "k"))
            done.append("ok")

    async def main():
        for i in range(3):  # fewer than pool_size: see the README's known limits for more
            asyncio.create_task(worker(i))
        await asyncio.sleep(0.3)

    before = _client_backends(cluster.url)
    _, (how, value) = bounded(lambda: asyncio.run(main()), 30)
    assert how == "ok", value
    assert done == ["ok"] * 3
    gc.collect()
    deadline = time.monotonic() + 5
    while _client_backends(cluster.url) > before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _client_backends(cluster.url) <= before


@pytest.mark.parametrize("cancels", [1, 2, 3])
def test_a_claim_waiting_on_a_row_lock_and_cancelled_repeatedly_leaves_no_row(cluster, cancels):
    """The claim's INSERT waits on another session's uncommitted row of the same key; aclaim is cancelled 1-3 times,
    1 ms apart; once that session rolls back, no row of the cancelled claim appears (its INSERT was cancelled on
    the server, not left running behind a shut socket), and the key can be claimed."""
    ledger = PostgresLedger(cluster.url, timeout=10)
    conv = f"rowlock{cancels}-" + uuid.uuid4().hex
    key = toolwire.registry.LedgerKey(conv, "k")
    blocker = psycopg.connect(cluster.url)
    blocker.execute("INSERT INTO toolwire_ledger (conversation_id, call_key, status, fingerprint, started_at) "
                    "VALUES (%s, 'k', 'started', '', 0)", (conv,))  # uncommitted: holds the key

    async def main():
        await ledger.aget(toolwire.registry.LedgerKey("warm", "up"))
        task = asyncio.create_task(ledger.aclaim(key))
        deadline = time.monotonic() + 120  # generous: waits on the event, a busy machine only slows it
        while True:  # until the claim's INSERT waits on the lock
            with psycopg.connect(cluster.url, autocommit=True) as conn:
                if conn.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query "
                                "LIKE 'INSERT INTO toolwire_ledger%%'").fetchone()[0]:
                    break
            assert time.monotonic() < deadline, "the claim never waited on the lock"
            await asyncio.sleep(0.01)
        for i in range(cancels):
            task.cancel()
            await asyncio.sleep(0.001)
        with pytest.raises(asyncio.CancelledError):
            await task

    try:
        _, (how, value) = bounded(lambda: asyncio.run(main()), 180)
        assert how == "ok", value
    finally:
        blocker.rollback()
        blocker.close()
    time.sleep(0.3)
    assert _rows(cluster.url, conv) == []
    assert ledger.claim(key) is None
