"""The demo tools as test fixtures, with stores that can fail and an effect counter that works across processes.

* ``lookup_demo_value(key)`` (read): ``height`` → ``"170 cm"``, ``weight`` → ``"70 kg"``; an unknown key is a
  "not found" ok result; a store that is down raises ``StoreUnavailable`` ("could not look").
* ``search_foods(query)`` (read): ``"arroz"`` → ``Arroz blanco (cocido)``, 28 g carbohydrate per 100 g; no match is
  an empty ok result; a catalogue that is down raises ``CatalogueUnavailable``.
* ``add_food_to_meal(meal, food, grams)`` and ``save_measurement(kind, value, unit)`` (writes): each effect is
  one row in an ``EffectLog`` (a SQLite file when given a path, so several processes can be counted).

Also: helpers that build Turns from small Anthropic and Chat streams, and the worker functions the
multiprocess tests start.
"""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest

import toolwire
from toolwire.harness.demo_tools import CatalogueUnavailable, DemoWorld, EffectLog, StoreUnavailable
from toolwire.registry import Dispatcher, SQLiteLedger

from .wire import anthropic_events, chunk, sse, tc

__all__ = [
    "StoreUnavailable", "CatalogueUnavailable", "EffectLog", "DemoWorld", "anthropic_turn", "chat_turn",
    "world", "race_worker", "killed_worker", "WRITE_BLOCK",
]


@pytest.fixture
def world() -> DemoWorld:
    """A fresh demo world with in-memory stores."""
    return DemoWorld()


# ---- turns from small provider streams ---------------------------------------------------------------------


def anthropic_turn(*calls: tuple[str, str, str | list[str]], stop_reason: str | None = "tool_use",
                   stop_last: bool = True, message_id: str = "msg_1") -> toolwire.Turn:
    """Parse an Anthropic stream whose tool_use blocks are ``(id, name, arguments text or fragments)``."""
    blocks = []
    for i, (cid, name, args) in enumerate(calls):
        frags = [args] if isinstance(args, str) else list(args)
        blocks.append({"type": "tool_use", "id": cid, "name": name, "fragments": frags,
                       "stop": stop_last or i < len(calls) - 1})
    return toolwire.parse("anthropic", sse(*anthropic_events(blocks, stop_reason, message_id=message_id),
                                           events=True))


def chat_turn(*calls: tuple[str | None, str, str], finish: str | None = "tool_calls") -> toolwire.Turn:
    """Parse a Chat Completions stream with one chunk per call ``(id, name, arguments text)``."""
    chunks = [chunk(tc(i, cid, name, args)) for i, (cid, name, args) in enumerate(calls)]
    if finish is not None:
        chunks.append(chunk(finish=finish))
    return toolwire.parse("openai-chat", sse(*chunks, "[DONE]"))


# ---- multiprocess workers ------------------------------------------------------------------------------------

#: The one write every racing process tries to dispatch.
WRITE_BLOCK = ("toolu_race", "save_measurement", '{"kind": "weight", "value": 70, "unit": "kg"}')


def race_worker(ledger_path: str, effects_path: str, barrier: Any, out: Any) -> None:
    """Dispatch WRITE_BLOCK after every racer reached the barrier; report the result kind."""
    world = DemoWorld(effects_path)
    dispatcher = Dispatcher(world.registry(write_delay=0.05), ledger=SQLiteLedger(ledger_path))
    turn = anthropic_turn(WRITE_BLOCK)
    barrier.wait()
    [result] = dispatcher.run(turn, conversation_id="race")
    out.put(result.kind.value)


def killed_worker(ledger_path: str, effects_path: str) -> None:
    """Dispatch WRITE_BLOCK and die by SIGKILL after the effect, before the ledger records completion."""
    world = DemoWorld(effects_path)
    dispatcher = Dispatcher(world.registry(after_effect=lambda: os.kill(os.getpid(), signal.SIGKILL)),
                            ledger=SQLiteLedger(ledger_path))
    dispatcher.run(anthropic_turn(WRITE_BLOCK), conversation_id="killed")
