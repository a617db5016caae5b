"""Helpers for the regression tests of how a turn ends: both parser modes side by side, and a registry that
records what ran."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import toolwire
from toolwire.registry import Dispatcher, Registry, Tool

PROVIDERS = ("openai-chat", "openai-responses", "anthropic", "gemini", "gemini-interactions")
MODES = (True, False)  # keep_calls: the default mode, then the streaming mode


@dataclass
class Outcome:
    """What one parse reported: the final turn and every call end event, in order."""

    turn: toolwire.Turn
    ends: list[tuple[str, str, str | None, Any]] = field(default_factory=list)  # local_id, state, problem, args
    completed: list[str | None] = field(default_factory=list)  # call ids of the CallCompleted events


def run_parser(provider: str, data: bytes, *, keep_calls: bool = True, format: str = "sse",
               pieces: list[bytes] | None = None) -> Outcome:
    """Feed ``data`` (or ``pieces``) to a StreamParser and collect the turn and the call end events."""
    parser = toolwire.StreamParser(provider, format=format, keep_calls=keep_calls)
    events = []
    for piece in pieces if pieces is not None else [data]:
        events += parser.feed(piece)
    events += parser.close()
    out = Outcome(parser.turn)
    for e in events:
        if isinstance(e, (toolwire.CallCompleted, toolwire.CallTruncated, toolwire.CallErrored)):
            c = e.call
            out.ends.append((c.local_id, c.state.value, c.problem.code.value if c.problem else None, c.args))
            if isinstance(e, toolwire.CallCompleted):
                out.completed.append(c.call_id)
    return out


def both_modes(provider: str, data: bytes, *, format: str = "sse") -> list[Outcome]:
    """The outcome in the default mode, then in the streaming mode (``keep_calls=False``)."""
    return [run_parser(provider, data, keep_calls=k, format=format) for k in MODES]


class Spy:
    """A registry of read tools that accept any arguments and record each run."""

    def __init__(self, *names: str) -> None:
        self.ran: list[str] = []
        self.registry = Registry([Tool.from_schema(n, {"type": "object"}, self._handler(n), effect="read")
                                  for n in names])

    def _handler(self, name: str):
        def handler(args: dict) -> str:
            self.ran.append(name)
            return "ok"
        return handler

    def run(self, turn: toolwire.Turn) -> list[str]:
        """Dispatch ``turn`` with ``run`` and ``arun``; return the result kinds of ``run``."""
        results = Dispatcher(self.registry).run(turn, conversation_id="c")
        asyncio.run(Dispatcher(self.registry).arun(turn, conversation_id="c"))
        return [r.kind.value for r in results]
