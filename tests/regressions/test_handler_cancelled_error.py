"""A handler that raises ``CancelledError`` of its own (it awaited a future or task that something else cancelled)
is a handler that failed, not a cancelled run.

``CancelledError`` is a ``BaseException``: the async path caught only ``Exception``, so ``arun`` raised it, the loop
took the turn as never dispatched, put its history back and re-raised; a write of the same turn that had already
run was reported nowhere, and running the prompt again ran it a second time. The same came out of a sync handler
with no timeout (it runs on the caller's thread). Now the handler's own ``CancelledError`` is its failure: a read
is ``handler_failed``, a write ``outcome_unknown``, the turn is answered and kept. A run that is really cancelled
from outside still ends with ``CancelledError``.

Through ``Dispatcher.run`` and ``arun`` and through the loops (sync and async) over the simulator on loopback, in
every dialect the loop speaks.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import toolwire
from toolwire import Dispatcher, Registry, ResultKind, Tool
from toolwire.harness import AsyncToolLoop, ToolLoop
from toolwire.sim import Fault, SimProvider

from ..bodies import body
from ..dialects import SIMULATED

K = ResultKind


async def _cancelled_elsewhere() -> None:
    fut = asyncio.get_running_loop().create_future()
    fut.cancel()
    await fut


class App:
    def __init__(self) -> None:
        self.effects: list[int] = []

    def registry(self, *, failing: str, is_async: bool, timeout: float | None = 5.0) -> Registry:
        def save(x: int) -> dict:
            """Save x."""
            self.effects.append(x)
            return {"saved": x}

        async def lookup(key: str) -> dict:
            """Look a key up."""
            await _cancelled_elsewhere()
            return {}

        def lookup_sync(key: str) -> dict:
            """Look a key up."""
            raise asyncio.CancelledError()

        async def save_later(x: int) -> dict:
            """Save x, then wait on something cancelled."""
            self.effects.append(x)
            await _cancelled_elsewhere()
            return {"saved": x}

        def save_later_sync(x: int) -> dict:
            """Save x, then find the wait cancelled."""
            self.effects.append(x)
            raise asyncio.CancelledError()

        tools = [Tool.from_function(save, effect="write", timeout=timeout)]
        if failing == "read":
            fn = lookup if is_async else lookup_sync
            tools.append(Tool.from_function(fn, name="lookup", effect="read", timeout=timeout))
        else:
            fn = save_later if is_async else save_later_sync
            tools.append(Tool.from_function(fn, name="save_later", effect="write", timeout=timeout))
        return Registry(tools)


CASES = [("read", True, 5.0), ("read", False, None), ("write", True, 5.0), ("write", True, None),
         ("write", False, None)]
IDS = [f"{f}-{'async' if a else 'sync'}-handler-timeout-{t}" for f, a, t in CASES]


def _calls(failing: str) -> list[tuple[str, str, dict[str, Any]]]:
    second = ("call_2", "lookup", {"key": "k"}) if failing == "read" else ("call_2", "save_later", {"x": 2})
    return [("call_1", "save", {"x": 1}), second]


def _expected(failing: str) -> list[ResultKind]:
    return [K.OK, K.HANDLER_FAILED if failing == "read" else K.OUTCOME_UNKNOWN]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(("failing", "is_async", "timeout"), CASES, ids=IDS)
def test_a_handlers_own_cancelled_error_is_its_failure(failing, is_async, timeout, mode):
    app = App()
    d = Dispatcher(app.registry(failing=failing, is_async=is_async, timeout=timeout))
    turn = toolwire.parse("anthropic", body("anthropic", _calls(failing), response_id="resp_c"))
    results = d.run(turn, conversation_id="c") if mode == "sync" else \
        asyncio.run(d.arun(turn, conversation_id="c"))
    assert [r.kind for r in results] == _expected(failing), [(r.kind, r.content) for r in results]
    assert app.effects == ([1] if failing == "read" else [1, 2])


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("provider", SIMULATED)
def test_a_loop_keeps_the_turn_and_runs_no_write_twice(provider, mode):
    """The turn with the failing handler is answered and kept; running the prompt again does not repeat the
    write that ran (the model's second turn asks for other calls)."""
    app = App()
    registry = app.registry(failing="read", is_async=True)
    sim = SimProvider()
    with sim.serve() as base_url:
        turn = Fault.raw(body(provider, _calls("read"), response_id="resp_1"))
        sim.plan([turn, Fault.raw(body(provider, [], text="done", response_id="resp_2"))], then=Fault.status(400))
        kw: dict[str, Any] = dict(model="sim-model", registry=registry, base_url=base_url, api_key="sim-key",
                                  stream=False)
        if mode == "sync":
            with ToolLoop(provider, **kw) as loop:
                result = loop.run("save 1 and look k up")
        else:
            async def go():
                async with AsyncToolLoop(provider, **kw) as loop:
                    return await loop.run("save 1 and look k up")
            result = asyncio.run(go())
    assert app.effects == [1]
    assert not result.fallback and result.answer == "done"
    assert [(c.name, c.result_kind) for c in result.calls] == [("save", "ok"), ("lookup", "handler_failed")]
    assert [(w.name, w.outcome.value) for w in result.writes] == [("save", "ok")]


def test_a_run_cancelled_from_outside_is_still_cancelled():
    """``CancelledError`` from outside (the task is cancelled) still ends ``arun`` with it."""
    started = asyncio.Event()

    async def slow(key: str) -> dict:
        """Wait."""
        started.set()
        await asyncio.sleep(60)
        return {}

    d = Dispatcher(Registry([Tool.from_function(slow, effect="read", timeout=120)]))
    turn = toolwire.parse("anthropic", body("anthropic", [("call_1", "slow", {"key": "k"})], response_id="r"))

    async def go():
        task = asyncio.create_task(d.arun(turn, conversation_id="c"))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
