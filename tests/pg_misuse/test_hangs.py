"""A server that stops answering, or a table another session holds locked: every operation must end within the
ledger's ``timeout`` (plus slack) as a LedgerError, and a write dispatched then must be answered ``not_run``."""

from __future__ import annotations

import asyncio
import socket
import threading
import uuid

import psycopg
import pytest

import toolwire
from toolwire.registry import Dispatcher, LedgerError, LedgerKey, PostgresLedger, ResultKind

from ..bodies import body
from .conftest import bounded

TIMEOUT = 2.0
SLACK = 3.0


def _key() -> LedgerKey:
    return LedgerKey("hang-" + uuid.uuid4().hex, "k")


@pytest.fixture
def locked(cluster):
    """Another session holds toolwire_ledger in ACCESS EXCLUSIVE mode (a migration, a VACUUM FULL, a stuck
    transaction) for the duration of the test."""
    PostgresLedger(cluster.url, timeout=5).close()  # the table exists
    holder = psycopg.connect(cluster.url)
    holder.execute("LOCK TABLE toolwire_ledger IN ACCESS EXCLUSIVE MODE")
    try:
        yield
    finally:
        holder.rollback()
        holder.close()


def test_claim_ends_within_timeout_when_the_table_is_locked(cluster, locked):
    """claim on a table another session holds locked is a LedgerError within timeout (+ slack), not a hang."""
    ledger = PostgresLedger(cluster.url, timeout=TIMEOUT)
    elapsed, (how, value) = bounded(lambda: ledger.claim(_key()), TIMEOUT + SLACK)
    assert how == "raised" and isinstance(value, LedgerError), value


def test_aclaim_ends_within_timeout_when_the_table_is_locked(cluster, locked):
    """aclaim on a table another session holds locked is a LedgerError within timeout (+ slack), not a hang."""
    ledger = PostgresLedger(cluster.url, timeout=TIMEOUT)
    elapsed, (how, value) = bounded(lambda: asyncio.run(ledger.aclaim(_key())), TIMEOUT + SLACK)
    assert how == "raised" and isinstance(value, LedgerError), value


@pytest.mark.parametrize("how", ["run", "arun"])
def test_write_does_not_run_within_timeout_when_the_table_is_locked(cluster, locked, how):
    """A write dispatched while the ledger table is locked does not run and is answered (outcome_unknown: its
    record cannot be read) within timeout (+ slack)."""
    ran = []

    def save_note(text: str) -> str:
        """Save a note."""
        ran.append(text)
        return "saved"

    registry = toolwire.Registry([toolwire.Tool.from_function(save_note, effect="write")])
    d = Dispatcher(registry, ledger=PostgresLedger(cluster.url, timeout=TIMEOUT))
    turn = toolwire.parse("anthropic", body("anthropic", [("toolu_1", "save_note", {"text": "x"})]))
    conv = "hang-" + uuid.uuid4().hex
    go = (lambda: d.run(turn, conversation_id=conv)) if how == "run" else \
        (lambda: asyncio.run(d.arun(turn, conversation_id=conv)))
    elapsed, (outcome, value) = bounded(go, TIMEOUT + SLACK)
    assert outcome == "ok" and value[0].kind is ResultKind.OUTCOME_UNKNOWN and not ran, value


def test_claim_ends_within_timeout_when_the_server_stops_answering(proxy):
    """A server that stops answering on a pooled connection: claim is a LedgerError within timeout (+ slack)."""
    ledger = PostgresLedger(proxy.url, timeout=TIMEOUT)
    assert ledger.claim(_key()) is None  # the pool holds a working connection
    proxy.freeze()
    elapsed, (how, value) = bounded(lambda: ledger.claim(_key()), TIMEOUT + SLACK)
    assert how == "raised" and isinstance(value, LedgerError), value


def test_aclaim_ends_within_timeout_when_the_server_stops_answering(proxy):
    """The async twin: on the loop's pool, a server that stops answering is a LedgerError within timeout."""
    ledger = PostgresLedger(proxy.url, timeout=TIMEOUT)

    async def main():
        assert await ledger.aclaim(_key()) is None
        proxy.freeze()
        return await ledger.aclaim(_key())

    elapsed, (how, value) = bounded(lambda: asyncio.run(main()), TIMEOUT + SLACK)
    assert how == "raised" and isinstance(value, LedgerError), value


def test_complete_ends_within_timeout_when_the_server_stops_answering(proxy):
    """complete after the server stopped answering is a LedgerError within timeout (+ slack)."""
    from toolwire.registry import ToolResult

    ledger = PostgresLedger(proxy.url, timeout=TIMEOUT)
    key = _key()
    assert ledger.claim(key) is None
    proxy.freeze()
    res = ToolResult(call_id="c", local_id="l", name="n", content="x", is_error=False, kind=ResultKind.OK)
    elapsed, (how, value) = bounded(lambda: ledger.complete(key, res), TIMEOUT + SLACK)
    assert how == "raised" and isinstance(value, LedgerError), value


@pytest.fixture
def blackhole():
    """A port that accepts TCP connections and never says a word."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(50)
    held: list[socket.socket] = []

    def accept():
        while True:
            try:
                held.append(srv.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield srv.getsockname()[1]
    finally:
        srv.close()
        for s in held:
            s.close()


@pytest.mark.parametrize("timeout", [0.5, 1.0])
def test_constructor_against_a_silent_server_ends_within_timeout(blackhole, timeout):
    """PostgresLedger(dsn, timeout=t) against a server that accepts and never answers fails within t and a
    generous slack (a busy machine), far from hanging."""
    elapsed, (how, value) = bounded(
        lambda: PostgresLedger(f"postgresql://u@127.0.0.1:{blackhole}/db", timeout=timeout), 30)
    assert how == "raised" and isinstance(value, LedgerError), value
    assert elapsed < timeout + 10.0, f"took {elapsed:.2f} s with timeout={timeout}"


def test_constructor_with_two_silent_hosts_ends_within_timeout(blackhole):
    """A multi-host DSN of silent servers: the constructor still fails within the timeout, not the timeout per
    host (10 s each would be 20 s; the slack allows a busy machine)."""
    dsn = f"host=127.0.0.1,127.0.0.1 port={blackhole},{blackhole} user=u dbname=db"
    elapsed, (how, value) = bounded(lambda: PostgresLedger(dsn, timeout=10), 60)
    assert how == "raised" and isinstance(value, LedgerError), value
    assert 10 <= elapsed + 0.5 and elapsed < 18, f"took {elapsed:.2f} s with timeout=10"


_SETUP = b"set_config('statement_timeout'"  # the statement that sets up each new connection of the pools


def test_claim_and_close_end_within_timeout_when_a_new_connection_is_never_set_up(proxy):
    """A server that stops answering while a new connection is set up: claim is a LedgerError within timeout
    (+ slack), and close() returns within the connect timeout (no pool thread stays blocked on the set-up)."""
    ledger = PostgresLedger(proxy.url, timeout=TIMEOUT)
    proxy.freeze_replies_after(_SETUP)
    elapsed, (how, value) = bounded(lambda: ledger.claim(_key()), TIMEOUT + SLACK)
    assert how == "raised" and isinstance(value, LedgerError), value
    # a pool thread may still be connecting (libpq's connect timeout: 2 s here); psycopg_pool gives a stuck
    # thread 5 s before it closes the pool without it
    elapsed, (how, value) = bounded(ledger.close, TIMEOUT + 1.0)
    assert how == "ok", value


def test_aclaim_and_asyncio_run_end_within_timeout_when_a_new_connection_is_never_set_up(proxy):
    """The async twin: asyncio.run of an aclaim ends within timeout (+ slack) with a LedgerError; the loop's end
    does not wait for a pool task cancelled while it set up a connection (psycopg's cancel request then waits
    ten seconds on a server that does not answer)."""
    ledger = PostgresLedger(proxy.url, timeout=TIMEOUT)
    proxy.freeze_replies_after(_SETUP)
    elapsed, (how, value) = bounded(lambda: asyncio.run(ledger.aclaim(_key())), TIMEOUT + SLACK)
    assert how == "raised" and isinstance(value, LedgerError), value


@pytest.mark.parametrize("how", ["run", "arun"])
def test_ledger_works_again_after_a_server_that_stalled_while_a_connection_was_set_up(proxy, how):
    """After the server stalled during a connection's set-up and came back, the same ledger claims again (the
    pool did not keep a worker stuck on the stalled statement)."""
    ledger = PostgresLedger(proxy.url, timeout=TIMEOUT)
    proxy.freeze_replies_after(_SETUP)
    claim = (lambda k: ledger.claim(k)) if how == "run" else (lambda k: asyncio.run(ledger.aclaim(k)))
    elapsed, (outcome, value) = bounded(lambda: claim(_key()), TIMEOUT + SLACK)
    assert outcome == "raised" and isinstance(value, LedgerError), value
    proxy.cut()  # the held connections are dropped, and the proxy forwards again
    elapsed, (outcome, value) = bounded(lambda: claim(_key()), TIMEOUT + SLACK)
    assert outcome == "ok" and value is None, value


@pytest.mark.parametrize("how", ["claim", "aclaim"])
def test_claims_after_failed_ones_still_end_within_timeout_on_a_locked_table(cluster, locked, how):
    """Three claims in a row on a table another session holds locked: each fails as a LedgerError within timeout
    plus the removal of its row (well under two timeouts: the removals a claim retries first share its deadline)."""
    timeout = 3.0
    ledger = PostgresLedger(cluster.url, timeout=timeout)
    claim = (lambda k: ledger.claim(k)) if how == "claim" else (lambda k: asyncio.run(ledger.aclaim(k)))
    for _ in range(3):
        elapsed, (outcome, value) = bounded(lambda: claim(_key()), timeout + 2.5)
        assert outcome == "raised" and isinstance(value, LedgerError), value
