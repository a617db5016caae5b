"""Handlers see the caller's context variables: a sync handler under a timeout (on a worker thread), without one,
concurrent reads, and async handlers, through ``Dispatcher.run`` and ``arun``, for every dialect."""

from __future__ import annotations

import asyncio
import contextvars

import pytest
import structlog

import toolwire
from toolwire.codecs import PROVIDERS

from ..bodies import body

REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="unset")


def _registry(seen: list[tuple[str, str, str]], timeout: float | None) -> toolwire.Registry:
    def lookup(key: str) -> str:
        """Look up a value."""
        seen.append(("sync", REQUEST_ID.get(), str(structlog.contextvars.get_contextvars().get("who"))))
        return key

    async def alookup(key: str) -> str:
        """Look up a value, asynchronously."""
        seen.append(("async", REQUEST_ID.get(), str(structlog.contextvars.get_contextvars().get("who"))))
        return key

    return toolwire.Registry([toolwire.Tool.from_function(lookup, effect="read", timeout=timeout),
                              toolwire.Tool.from_function(alookup, effect="read", timeout=timeout)])


def _turn(provider: str) -> toolwire.Turn:
    calls = [("c1", "lookup", {"key": "a"}), ("c2", "alookup", {"key": "b"}), ("c3", "lookup", {"key": "c"})]
    return toolwire.parse(provider, body(provider, calls))


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("timeout", [5.0, None])
@pytest.mark.parametrize("concurrent", [True, False])
def test_handlers_run_in_the_callers_context_with_run(provider, timeout, concurrent):
    """Dispatcher.run: every handler reads the caller's context variables, on whatever thread it runs."""
    seen: list[tuple[str, str, str]] = []
    dispatcher = toolwire.Dispatcher(_registry(seen, timeout), concurrent_reads=concurrent)
    token = REQUEST_ID.set("req-42")
    try:
        with structlog.contextvars.bound_contextvars(who="alice"):
            results = dispatcher.run(_turn(provider), conversation_id="ctx")
    finally:
        REQUEST_ID.reset(token)
    assert [r.kind.value for r in results] == ["ok"] * 3
    assert sorted(seen) == [("async", "req-42", "alice"), ("sync", "req-42", "alice"), ("sync", "req-42", "alice")]


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("timeout", [5.0, None])
def test_handlers_run_in_the_callers_context_with_arun(provider, timeout):
    """Dispatcher.arun: sync handlers on their threads and async handlers read the caller's context variables."""
    seen: list[tuple[str, str, str]] = []
    dispatcher = toolwire.Dispatcher(_registry(seen, timeout))

    async def main() -> list[toolwire.ToolResult]:
        REQUEST_ID.set("req-7")
        with structlog.contextvars.bound_contextvars(who="bob"):
            return await dispatcher.arun(_turn(provider), conversation_id="ctx")

    results = asyncio.run(main())
    assert [r.kind.value for r in results] == ["ok"] * 3
    assert sorted(seen) == [("async", "req-7", "bob"), ("sync", "req-7", "bob"), ("sync", "req-7", "bob")]
