"""The event loop a ``MCPServer`` keeps its session on: an asyncio loop in a daemon thread of its own."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from contextlib import suppress
from typing import Any, TypeVar

from ..errors import UsageError

__all__ = ["LoopThread", "describe"]

T = TypeVar("T")


def describe(exc: BaseException) -> str:
    """One line for ``exc``: the first leaf of an exception group, as ``Type: message``."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = " ".join(str(exc).split())
    if len(text) > 300:
        text = text[:300] + "…"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class LoopThread:
    """An asyncio event loop running in a daemon thread; ``submit`` schedules a coroutine on it."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            with suppress(Exception):
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and wait for it (cancelled if ``timeout`` passes first)."""
        if threading.current_thread() is self._thread:
            coro.close()
            raise UsageError("a blocking toolwire.mcp method was called on the server's own event loop thread "
                             "(from an on_change callback?): use the async methods there")
        future = self.submit(coro)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        with suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self.loop.stop)
        if threading.current_thread() is not self._thread:
            self._thread.join(10.0)
