"""A dispatch of a call instance that another dispatch of the same instance was waiting for, cut short after its
write may have taken effect (its ``arun`` task cancelled, its ``run`` interrupted): the waiter is answered from the
ledger, the stored result or ``outcome_unknown``, never ``not_run`` ("nothing ran here") for a write that may
have run. And a ``MemoryLedger`` claim whose ``arun`` is cancelled never strands the write: a call whose handler
never started runs when dispatched again, instead of being answered ``outcome_unknown`` for good.

Through ``Dispatcher.run`` and ``arun``, with every ledger (memory, SQLite, PostgreSQL).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading

import pytest

import toolwire
from toolwire import Dispatcher, MemoryLedger, Registry, ResultKind, Tool
from toolwire.registry import arguments_sha256

from ..bodies import body
from .ledgers import LEDGERS, new_conversation, open_store

K = ResultKind
LIMIT = 60.0  # the generous bound on each wait: never reached unless something hangs


class Interrupted(BaseException):
    """What Ctrl-C or SystemExit does to a handler: not an Exception, so the dispatch itself is cut short."""


def turn(*, marker: bool = False) -> toolwire.Turn:
    """A payment; with ``marker``, the same response read again with one more call after it (the same payment
    instance: same response id, call id and arguments), a read whose policy check tells the test that the dispatch
    got past the payment, now waiting for the first dispatch's answer."""
    calls = [("call_pay", "pay", {"amount": 70})] + ([("call_bal", "balance", {})] if marker else [])
    return toolwire.parse("anthropic", body("anthropic", calls, response_id="msg_cut"))


class Scene:
    """One payment handler that takes effect, then is held; a policy that counts the dispatches that reached the
    read (the second one's write is then waiting for the first one's)."""

    def __init__(self, *, asynchronous: bool) -> None:
        self.paid: list[int] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        self.reached = 0  # dispatches that reached the marker read
        self.second_reached = threading.Event()
        self.lock = threading.Lock()
        self.asynchronous = asynchronous

    def registry(self) -> Registry:
        if self.asynchronous:
            async def pay(amount: int) -> dict:
                """Pay (then never confirm: cancelled here)."""
                self.paid.append(amount)
                self.entered.set()
                await asyncio.Event().wait()
                return {"paid": amount}
        else:
            def pay(amount: int) -> dict:  # type: ignore[misc]
                """Pay (then the process is interrupted)."""
                self.paid.append(amount)
                self.entered.set()
                self.release.wait(LIMIT)
                raise Interrupted

        def balance() -> int:
            """Read the balance."""
            return 1000 - sum(self.paid)

        # no timeout for the sync handler: it runs on the dispatching thread, so what it raises cuts the run short
        timeout = {} if self.asynchronous else {"timeout": None}
        return Registry([Tool.from_function(pay, effect="write", **timeout),
                         Tool.from_function(balance, effect="read")])

    def policy(self, call, ctx) -> str:
        if call.name == "balance":
            with self.lock:
                self.reached += 1
                self.second_reached.set()
        return "allow"


@pytest.fixture(params=LEDGERS)
def store(request, tmp_path):
    s = open_store(request.param, request, tmp_path)
    yield s
    s.close()


def test_the_waiter_of_a_cancelled_arun_is_not_told_nothing_ran(store):
    """The first ``arun`` paid and is cancelled in its handler; the second, waiting for it, answers
    ``outcome_unknown`` (the ledger says started), not "nothing ran here"."""
    scene, conv = Scene(asynchronous=True), new_conversation()
    d = Dispatcher(scene.registry(), ledger=store.ledger, policy=scene.policy)

    async def main() -> list[toolwire.ToolResult]:
        first = asyncio.create_task(d.arun(turn(), conversation_id=conv))
        await asyncio.wait_for(asyncio.to_thread(scene.entered.wait, LIMIT), LIMIT)
        second = asyncio.create_task(d.arun(turn(marker=True), conversation_id=conv))
        await asyncio.wait_for(asyncio.to_thread(scene.second_reached.wait, LIMIT), LIMIT)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        return await asyncio.wait_for(second, LIMIT)

    pay, bal = asyncio.run(main())
    assert pay.kind is K.OUTCOME_UNKNOWN and pay.call_id == "call_pay", pay.content
    assert "nothing ran" not in pay.content.lower()
    assert bal.kind is K.OK and scene.paid == [70]


def test_the_waiter_of_an_interrupted_run_is_not_told_nothing_ran(store):
    """The first ``run`` paid and is interrupted (a BaseException from its handler); the second thread, waiting
    for it, answers ``outcome_unknown``, not "nothing ran here"."""
    scene, conv = Scene(asynchronous=False), new_conversation()
    d = Dispatcher(scene.registry(), ledger=store.ledger, policy=scene.policy)
    out: dict[str, object] = {}

    def first() -> None:
        try:
            d.run(turn(), conversation_id=conv)
        except Interrupted:
            out["first"] = "interrupted"

    def second() -> None:
        out["second"] = d.run(turn(marker=True), conversation_id=conv)

    t1 = threading.Thread(target=first)
    t1.start()
    assert scene.entered.wait(LIMIT)
    t2 = threading.Thread(target=second)
    t2.start()
    assert scene.second_reached.wait(LIMIT)
    scene.release.set()
    t1.join(LIMIT)
    t2.join(LIMIT)
    assert out["first"] == "interrupted"
    pay, bal = out["second"]
    assert pay.kind is K.OUTCOME_UNKNOWN and "nothing ran" not in pay.content.lower(), pay.content
    assert bal.kind is K.OK and scene.paid == [70]


def test_a_waiter_gets_the_stored_result_when_the_write_completed(store):
    """The first dispatch was cut short after another process completed the same call instance in the shared
    ledger: the waiter answers with that stored result."""
    scene, conv = Scene(asynchronous=True), new_conversation()
    d = Dispatcher(scene.registry(), ledger=store.ledger, policy=scene.policy)

    async def main() -> list[toolwire.ToolResult]:
        first = asyncio.create_task(d.arun(turn(), conversation_id=conv))
        await asyncio.wait_for(asyncio.to_thread(scene.entered.wait, LIMIT), LIMIT)
        second = asyncio.create_task(d.arun(turn(marker=True), conversation_id=conv))
        await asyncio.wait_for(asyncio.to_thread(scene.second_reached.wait, LIMIT), LIMIT)
        # what a process that finished the same write leaves in the ledger: the record completed
        key = toolwire.LedgerKey.for_call(conv, turn().calls[0], arguments_sha256({"amount": 70}),
                                          turn="response:msg_cut")
        await asyncio.to_thread(store.reopen().complete, key, toolwire.ToolResult(
            call_id="call_pay", local_id="tw-0", name="pay", content={"paid": 70, "by": "the other process"},
            is_error=False, kind=K.OK))
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        return await asyncio.wait_for(second, LIMIT)

    pay, _bal = asyncio.run(main())
    assert pay.kind is K.OK and pay.content == {"paid": 70, "by": "the other process"}


class LateReports(concurrent.futures.ThreadPoolExecutor):
    """An event loop's default executor that runs each job at once but reports its end only once ``gate`` opens:
    the window in which a cancellation reaches a caller whose job has already done its work."""

    def __init__(self) -> None:
        super().__init__(max_workers=4)
        self.ran = threading.Event()
        self.gate = threading.Event()

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[override]
        def late():
            try:
                return fn(*args, **kwargs)
            finally:
                self.ran.set()
                self.gate.wait(LIMIT)

        return super().submit(late)


def test_a_cancelled_arun_never_strands_its_memory_ledger_claim():
    """An ``arun`` cancelled around its claim in a ``MemoryLedger``: if the handler never started, the call runs
    (once) when dispatched again; if it started, the write may have run and is ``outcome_unknown``, never run
    twice."""
    entered = threading.Event()
    paid: list[int] = []

    async def pay(amount: int) -> dict:
        """Pay."""
        entered.set()
        paid.append(amount)
        await asyncio.sleep(0)
        return {"paid": amount}

    d = Dispatcher(Registry([Tool.from_function(pay, effect="write")]), ledger=MemoryLedger())
    one = toolwire.parse("anthropic", body("anthropic", [("call_pay", "pay", {"amount": 70})], response_id="m1"))

    async def main() -> toolwire.ToolResult:
        executor = LateReports()
        asyncio.get_running_loop().set_default_executor(executor)
        task = asyncio.create_task(d.arun(one, conversation_id="c"))
        for _ in range(int(LIMIT * 100)):
            if executor.ran.is_set() or entered.is_set() or task.done():
                break
            await asyncio.sleep(0.01)
        task.cancel()
        executor.gate.set()
        try:
            await task
        except asyncio.CancelledError:
            pass
        [again] = await d.arun(one, conversation_id="c")
        return again

    again = asyncio.run(main())
    if entered.is_set():
        assert paid == [70] and again.kind in (K.OK, K.OUTCOME_UNKNOWN)
    else:
        assert again.kind is K.OK and paid == [70], again.content
