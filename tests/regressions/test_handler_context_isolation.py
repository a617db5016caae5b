"""Misuse of the context handlers run in (Dispatcher.run / arun)."""

from __future__ import annotations

import asyncio
import contextvars

import pytest
import structlog

import toolwire

from ..bodies import body

WHO: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="unset")


def _setup(timeout):
    seen: list[tuple[str, str, object]] = []

    def first(v: str) -> str:
        """First handler: reads, then changes the context it runs in."""
        seen.append(("first", WHO.get(), structlog.contextvars.get_contextvars().get("user")))
        WHO.set("set-by-first-handler")
        structlog.contextvars.bind_contextvars(user="mallory")
        return v

    def second(v: str) -> str:
        """Second handler: reads the context."""
        seen.append(("second", WHO.get(), structlog.contextvars.get_contextvars().get("user")))
        return v

    registry = toolwire.Registry([toolwire.Tool.from_function(first, effect="write", timeout=timeout),
                                  toolwire.Tool.from_function(second, effect="write", timeout=timeout)])
    turn = toolwire.parse("anthropic", body("anthropic", [("c1", "first", {"v": "a"}), ("c2", "second", {"v": "b"})]))
    return toolwire.Dispatcher(registry), turn, seen


@pytest.mark.parametrize("mode", ["run", "arun"])
@pytest.mark.parametrize("timeout", [5.0, None])
def test_a_handler_changing_context_variables_does_not_change_the_callers_or_the_next_handlers(mode, timeout):
    """Handlers see a copy of the caller's context: what one sets (contextvars, structlog's bound values) reaches
    neither the caller after run/arun nor the next call's handler, with or without a timeout."""
    dispatcher, turn, seen = _setup(timeout)

    def caller():
        WHO.set("alice")
        structlog.contextvars.bind_contextvars(user="alice")
        if mode == "run":
            results = dispatcher.run(turn, conversation_id="ctx")
        else:
            async def main():
                return await dispatcher.arun(turn, conversation_id="ctx")
            results = asyncio.run(main())
        return [r.kind.value for r in results], WHO.get(), structlog.contextvars.get_contextvars().get("user")

    structlog.contextvars.clear_contextvars()
    kinds, who_after, user_after = contextvars.copy_context().run(caller)
    assert kinds == ["ok", "ok"]
    assert seen == [("first", "alice", "alice"), ("second", "alice", "alice")]
    assert (who_after, user_after) == ("alice", "alice")
