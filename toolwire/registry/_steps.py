"""Logic written once for a sync and an async caller: a *step generator*.

A step generator holds the logic (what to ask, and what to do with each answer) and does no I/O itself: it yields
requests (a ledger claim, an SQL statement, a pause) and receives their answers; a request that failed is raised
inside it at the ``yield``, so its own ``try`` blocks handle ledger failures as plain code would. The generator's
return value is the result. ``drive`` performs the requests with a function that answers them; ``adrive`` with one
that returns awaitables (a coroutine function). Both are the same loop: ``drive`` runs ``adrive``'s coroutine
without an event loop, which its never-suspending ``perform`` makes possible.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

__all__ = ["Steps", "drive", "adrive"]

T = TypeVar("T")
#: a step generator: yields requests, receives their answers, returns its result
Steps = Generator[Any, Any, T]


async def adrive(steps: Steps[T], perform: Callable[[Any], Awaitable[Any]]) -> T:
    """Run ``steps`` to its end, awaiting ``perform(request)`` for each request it yields (an exception that
    raises, ``CancelledError`` included, is raised inside ``steps``); return what ``steps`` returns."""
    resume, answer = steps.send, None
    while True:
        try:
            request = resume(answer)
        except StopIteration as stop:
            return stop.value
        try:
            answer, resume = await perform(request), steps.send
        except BaseException as exc:  # noqa: BLE001 - handed to the generator, which re-raises what it does not handle
            answer, resume = exc, steps.throw


def drive(steps: Steps[T], perform: Callable[[Any], Any]) -> T:
    """Run ``steps`` to its end, answering each request with ``perform(request)`` on this thread (no event loop)."""
    async def now(request: Any) -> Any:
        return perform(request)

    coro = adrive(steps, now)
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    coro.close()  # pragma: no cover - now() never suspends, so the coroutine ends at its first send
    raise RuntimeError("drive(): a step suspended")  # pragma: no cover
