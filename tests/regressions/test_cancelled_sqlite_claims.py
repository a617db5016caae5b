"""A write's claim in a ``SQLiteLedger`` cut short (its ``arun`` cancelled, its ``run`` interrupted by Ctrl-C): the
handler never ran, so the claim must never commit, or its row must be removed; otherwise every later dispatch of
the call answers ``outcome_unknown`` for a write that never ran (the model can never have it done).

The ledger's database lock is held from a second connection (``BEGIN IMMEDIATE``) so the claim waits on it; the
moment the claim starts waiting (or commits) is seen through a trace callback on the ledger's own connection.
"""

from __future__ import annotations

import asyncio
import random
import signal
import sqlite3
import threading
import time
from typing import Any, Callable

import pytest

import toolwire
from toolwire import Dispatcher, LedgerKey, Registry, ResultKind, SQLiteLedger, Tool, ToolContext

from ..bodies import PROVIDERS, body

K = ResultKind
LIMIT = 60.0  # the generous bound on each test's own work: never reached unless something hangs


class Statements:
    """Reports the statements that connections opened by ``SQLiteLedger`` begin (sqlite3's trace callback): each
    hook ``(prefix, fn)`` is called with the statement's text, on the thread that runs it, while it is armed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.hooks: list[tuple[str, Callable[[str], Any]]] = []
        real = sqlite3.connect

        def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            conn = real(*args, **kwargs)
            conn.set_trace_callback(self._traced)
            return conn

        monkeypatch.setattr(sqlite3, "connect", connect)

    def _traced(self, sql: str) -> None:
        for prefix, fn in list(self.hooks):
            if sql.startswith(prefix):
                fn(sql)

    def once(self, prefix: str, fn: Callable[[str], Any] = lambda sql: None) -> threading.Event:
        """An event set when the next statement starting with ``prefix`` begins (then ``fn`` runs, before it)."""
        seen = threading.Event()

        def hook(sql: str) -> None:
            if not seen.is_set():
                self.hooks.remove(entry)
                seen.set()
                fn(sql)

        entry = (prefix, hook)
        self.hooks.append(entry)
        return seen


class Lock:
    """The ledger file's write lock, held by a connection of its own."""

    def __init__(self, path: Any) -> None:
        self.conn: sqlite3.Connection | None = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.conn.execute("BEGIN IMMEDIATE")

    def release(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            conn.close()  # rolls the transaction back


class Notes:
    """One write, ``save_note``, that records which dispatch (the ``data`` it was given) ran it for each text."""

    def __init__(self) -> None:
        self.runs: dict[str, list[Any]] = {}
        self.ran = threading.Condition()

    def registry(self) -> Registry:
        def save_note(text: str, ctx: ToolContext) -> str:
            """Save a note."""
            with self.ran:
                self.runs.setdefault(text, []).append(ctx.data)
                self.ran.notify_all()
            return "saved " + text

        return Registry([Tool.from_function(save_note, effect="write")])

    def wait_for_run(self, text: str, limit: float) -> bool:
        with self.ran:
            return self.ran.wait_for(lambda: text in self.runs, limit)


def rows(path: Any) -> list[tuple]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT call_key, status FROM toolwire_ledger").fetchall()


def note(provider: str, text: str = "x") -> toolwire.Turn:
    return toolwire.parse(provider, body(provider, [("call_1", "save_note", {"text": text})], response_id=None))


def within(fn: Callable[[], Any], limit: float = LIMIT) -> Any:
    """``fn()`` on a daemon thread, failing the test (instead of hanging the suite) when it takes over ``limit``."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            box["raised"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(limit)
    assert not worker.is_alive(), f"still running after {limit} s"
    if "raised" in box:
        raise box["raised"]
    return box["value"]


def settled(ledger: SQLiteLedger) -> None:
    """Return once no claim of ``ledger`` is still under way in this process (its operations take turns)."""
    ledger.get(LedgerKey("-", "-"))


# ---- arun cancelled -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_arun_cancelled_while_its_claim_waits_on_the_database_lock_never_commits_the_claim(
        provider, tmp_path, monkeypatch):
    """Cancelled while its claim waits on a lock held elsewhere, the write leaves no row and later runs once."""
    statements = Statements(monkeypatch)
    path = tmp_path / "l.db"
    notes, ledger = Notes(), SQLiteLedger(path)
    turn = note(provider)

    async def main() -> list[toolwire.ToolResult]:
        d = Dispatcher(notes.registry(), ledger=ledger)
        lock = Lock(path)
        waiting = statements.once("BEGIN IMMEDIATE")
        task = asyncio.create_task(d.arun(turn, conversation_id="c", turn_id="t", data="first"))
        assert await asyncio.to_thread(waiting.wait, LIMIT)
        task.cancel()  # an asyncio.timeout() around the request, a client gone
        with pytest.raises(asyncio.CancelledError):
            await task
        lock.release()
        await asyncio.to_thread(settled, ledger)
        assert rows(path) == []  # the cancelled claim never committed
        return await d.arun(turn, conversation_id="c", turn_id="t", data="again")

    [again] = within(lambda: asyncio.run(main()))
    assert again.kind is K.OK, (again.kind, rows(path))
    assert notes.runs == {"x": ["again"]}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_arun_cancelled_as_its_claim_returns_removes_the_claimed_row(provider, tmp_path, monkeypatch):
    """Cancelled after its claim committed and returned, before the task saw the answer, the write's row is removed:
    the call dispatched again runs once."""
    statements = Statements(monkeypatch)
    path = tmp_path / "l.db"
    notes, ledger = Notes(), SQLiteLedger(path)
    turn = note(provider)

    async def main() -> list[toolwire.ToolResult]:
        d = Dispatcher(notes.registry(), ledger=ledger)
        lock = Lock(path)
        waiting = statements.once("BEGIN IMMEDIATE")
        task = asyncio.create_task(d.arun(turn, conversation_id="c", turn_id="t", data="first"))
        assert await asyncio.to_thread(waiting.wait, LIMIT)
        # from here until the cancellation the event loop is blocked, so the task cannot take the claim's answer
        lock.release()
        settled(ledger)  # the claim has committed its row and returned
        assert [status for _, status in rows(path)] == ["started"]
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert rows(path) == []  # removed before the cancellation reached the caller
        return await d.arun(turn, conversation_id="c", turn_id="t", data="again")

    [again] = within(lambda: asyncio.run(main()))
    assert again.kind is K.OK, (again.kind, rows(path))
    assert notes.runs == {"x": ["again"]}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_arun_cancelled_twice_while_its_claim_commits_removes_the_row_before_it_ends(
        provider, tmp_path, monkeypatch):
    """Cancelled twice while its claim's COMMIT runs, the arun ends only once the committed row is removed."""
    statements = Statements(monkeypatch)
    path = tmp_path / "l.db"
    notes, ledger = Notes(), SQLiteLedger(path)
    turn = note(provider)
    go = threading.Event()

    async def main() -> list[toolwire.ToolResult]:
        d = Dispatcher(notes.registry(), ledger=ledger)
        committing = statements.once("COMMIT", lambda sql: go.wait(LIMIT))  # the COMMIT waits for ``go``
        task = asyncio.create_task(d.arun(turn, conversation_id="c", turn_id="t", data="first"))
        try:
            assert await asyncio.to_thread(committing.wait, LIMIT)
            task.cancel()
            for _ in range(5):  # the task takes the first cancellation and starts waiting for the claim's outcome
                await asyncio.sleep(0)
            task.cancel()
        finally:
            go.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert rows(path) == []
        return await d.arun(turn, conversation_id="c", turn_id="t", data="again")

    [again] = within(lambda: asyncio.run(main()))
    assert again.kind is K.OK, (again.kind, rows(path))
    assert notes.runs == {"x": ["again"]}


def test_a_cancelled_claims_row_that_cannot_be_removed_yet_is_removed_before_the_next_claim(tmp_path, monkeypatch):
    """The removal of a cancelled claim's row finds the file locked elsewhere: the row is kept for later and removed
    by this process's next claim, so the call dispatched again runs once."""
    statements = Statements(monkeypatch)
    path = tmp_path / "l.db"
    notes, ledger = Notes(), SQLiteLedger(path)
    turn = note("anthropic")

    async def main() -> list[toolwire.ToolResult]:
        d = Dispatcher(notes.registry(), ledger=ledger)
        lock = Lock(path)
        waiting = statements.once("BEGIN IMMEDIATE")
        task = asyncio.create_task(d.arun(turn, conversation_id="c", turn_id="t", data="first"))
        assert await asyncio.to_thread(waiting.wait, LIMIT)
        lock.release()  # the event loop is blocked from here until the cancellation
        settled(ledger)
        lock = Lock(path)  # the file is locked again while the cancelled claim would remove its row
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert [status for _, status in rows(path)] == ["started"]
        lock.release()
        return await d.arun(turn, conversation_id="c", turn_id="t", data="again")

    [again] = within(lambda: asyncio.run(main()))
    assert again.kind is K.OK, (again.kind, rows(path))
    assert notes.runs == {"x": ["again"]}


def test_a_claim_and_the_removals_it_retries_first_share_one_timeout(tmp_path, monkeypatch):
    """On a file locked for good, a claim that first retries a kept removal fails after one timeout, not two."""
    statements = Statements(monkeypatch)
    path = tmp_path / "l.db"
    ledger = SQLiteLedger(path, timeout=1.0)
    held: list[Lock] = []

    async def cancelled_as_it_returns() -> None:
        lock = Lock(path)
        waiting = statements.once("BEGIN IMMEDIATE")
        task = asyncio.create_task(ledger.aclaim(LedgerKey("c", "first")))
        assert await asyncio.to_thread(waiting.wait, LIMIT)
        lock.release()
        settled(ledger)
        held.append(Lock(path))  # locked from now on: the removal is kept for later
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    try:
        within(lambda: asyncio.run(cancelled_as_it_returns()))
        assert rows(path) == [("first", "started")]
        started = time.monotonic()
        with pytest.raises(toolwire.LedgerError, match="locked"):
            within(lambda: ledger.claim(LedgerKey("c", "second")))
        assert 1.0 <= time.monotonic() - started < 1.8
    finally:
        held[0].release()
    assert ledger.claim(LedgerKey("c", "second")) is None
    assert rows(path) == [("second", "started")]  # the kept removal was done first


def test_aruns_cancelled_at_random_moments_never_strand_a_write(tmp_path, monkeypatch):
    """Hundreds of aruns cancelled at random moments (some waiting on a lock released at another random moment):
    dispatched again, each write that never ran runs once, one that ran answers ok or outcome_unknown, none twice."""
    path = tmp_path / "l.db"
    notes, ledger = Notes(), SQLiteLedger(path)
    rng = random.Random(20261203)
    answers: dict[str, ResultKind] = {}

    async def main() -> None:
        d = Dispatcher(notes.registry(), ledger=ledger)
        loop = asyncio.get_running_loop()
        for i in range(300):
            provider, text = PROVIDERS[i % len(PROVIDERS)], f"n{i}"
            turn = note(provider, text)
            lock = Lock(path) if rng.random() < 0.5 else None
            task = asyncio.create_task(d.arun(turn, conversation_id="c", turn_id=f"t{i}", data="first"))
            if lock is not None:
                loop.call_later(rng.uniform(0, 0.004), lock.release)
            loop.call_later(rng.uniform(0, 0.006), task.cancel)
            try:
                await task
            except asyncio.CancelledError:
                pass
            if lock is not None:
                lock.release()
            [again] = await d.arun(turn, conversation_id="c", turn_id=f"t{i}", data="again")
            answers[text] = again.kind
            if again.kind is K.OUTCOME_UNKNOWN:  # only a write whose handler started in the cancelled arun
                assert await asyncio.to_thread(notes.wait_for_run, text, 10), (text, rows(path))

    started = time.monotonic()
    within(lambda: asyncio.run(main()), 120)
    assert time.monotonic() - started < 120
    for text, kind in answers.items():
        runs = notes.runs.get(text, [])
        assert kind in (K.OK, K.OUTCOME_UNKNOWN), (text, kind, runs)
        assert len(runs) == 1, (text, kind, runs)  # never run twice, and a write that never ran runs when asked again
        if kind is K.OUTCOME_UNKNOWN:
            assert runs == ["first"], (text, runs)
    assert len(answers) == 300


# ---- run interrupted by Ctrl-C ------------------------------------------------------------------------------------


def interrupt_main_when(event: threading.Event, then: Callable[[], Any]) -> threading.Thread:
    """A thread that, once ``event`` is set, sends SIGINT to the main thread (as Ctrl-C does), then calls ``then``."""
    def run() -> None:
        if event.wait(LIMIT):
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        then()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_run_interrupted_while_its_claim_waits_on_the_database_lock_leaves_the_ledger_usable(
        provider, tmp_path, monkeypatch):
    """Ctrl-C while a sync run's claim waits on a lock held elsewhere: no row, no transaction left open (holding the
    file's lock), and the call dispatched again runs once."""
    assert threading.current_thread() is threading.main_thread()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    statements = Statements(monkeypatch)
    path = tmp_path / "l.db"
    notes, ledger = Notes(), SQLiteLedger(path, timeout=LIMIT)
    d = Dispatcher(notes.registry(), ledger=ledger)
    turn = note(provider)
    lock = Lock(path)
    waiting = statements.once("BEGIN IMMEDIATE")
    helper = interrupt_main_when(waiting, lock.release)
    with pytest.raises(KeyboardInterrupt):
        d.run(turn, conversation_id="c", turn_id="t", data="first")
    helper.join(LIMIT)
    assert rows(path) == []
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # the interrupted claim holds no lock on the file
    other.execute("ROLLBACK")
    other.close()
    [again] = d.run(turn, conversation_id="c", turn_id="t", data="again")
    assert again.kind is K.OK, (again.kind, rows(path))
    assert notes.runs == {"x": ["again"]}


def test_claims_interrupted_at_random_moments_leave_no_row_of_their_own(tmp_path):
    """Hundreds of sync claims interrupted by SIGINT at random moments (some waiting on a lock released at another
    random moment): a claim that raised KeyboardInterrupt left no row and no open transaction behind it."""
    assert threading.current_thread() is threading.main_thread()
    path = tmp_path / "l.db"
    ledger = SQLiteLedger(path)
    rng = random.Random(1203)
    inside = threading.Event()  # set while this thread is in a claim: SIGINT elsewhere is ignored

    def on_sigint(signum: int, frame: Any) -> None:
        if inside.is_set():
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, on_sigint)
    interrupted = claimed = 0
    try:
        for i in range(300):
            key = LedgerKey("c", f"k{i}")
            lock = Lock(path) if rng.random() < 0.5 else None
            moments = [(rng.uniform(0, 0.003), lambda: signal.pthread_kill(threading.main_thread().ident,
                                                                            signal.SIGINT))]
            if lock is not None:
                moments.append((rng.uniform(0, 0.004), lock.release))
            chaos = threading.Thread(target=at_moments, args=(sorted(moments, key=lambda m: m[0]),), daemon=True)
            inside.set()
            try:
                chaos.start()
                record = ledger.claim(key)
                inside.clear()
            except KeyboardInterrupt as exc:
                inside.clear()
                chaos.join(LIMIT)
                if exc.__traceback__ is not None and exc.__traceback__.tb_next is not None:  # raised in the claim
                    interrupted += 1
                    assert ledger.get(key) is None, key
                    assert ledger.claim(key) is None, key  # the ledger is usable, the key free
                continue
            chaos.join(LIMIT)
            assert record is None
            claimed += 1
            if lock is not None:
                lock.release()
    finally:
        inside.clear()
        signal.signal(signal.SIGINT, previous)
    assert interrupted > 20 and claimed > 20, (interrupted, claimed)


def at_moments(moments: list[tuple[float, Callable[[], Any]]]) -> None:
    """Call each function at its moment (seconds from now)."""
    start, pause = time.monotonic(), threading.Event()
    for at, fn in moments:
        pause.wait(max(0.0, at - (time.monotonic() - start)))
        fn()
