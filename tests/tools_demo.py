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
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Annotated, Any, Literal

import msgspec
import pytest

import toolwire
from toolwire.registry import Dispatcher, Registry, SQLiteLedger, Tool

from .wire import anthropic_events, chunk, sse, tc

__all__ = [
    "StoreUnavailable", "CatalogueUnavailable", "EffectLog", "DemoWorld", "anthropic_turn", "chat_turn",
    "world", "race_worker", "killed_worker", "WRITE_BLOCK",
]


class StoreUnavailable(Exception):
    """The value store could not be reached: the lookup could not look."""


class CatalogueUnavailable(Exception):
    """The food catalogue could not be reached."""


class EffectLog:
    """Counts effects: in memory, or in a SQLite file shared by processes (each write its own transaction)."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = os.fspath(path) if path is not None else None
        self._lock = threading.Lock()
        self._rows: list[tuple[str, dict]] = []
        if self.path is not None:
            with self._connect() as conn:
                conn.execute("CREATE TABLE IF NOT EXISTS effects (id INTEGER PRIMARY KEY, kind TEXT, payload TEXT,"
                             " pid INTEGER)")

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=30.0)

    def record(self, kind: str, payload: dict[str, Any]) -> int:
        if self.path is None:
            with self._lock:
                self._rows.append((kind, payload))
                return len(self._rows)
        conn = self._connect()
        try:
            with conn:
                cur = conn.execute("INSERT INTO effects (kind, payload, pid) VALUES (?, ?, ?)",
                                   (kind, msgspec.json.encode(payload).decode(), os.getpid()))
                return int(cur.lastrowid)
        finally:
            conn.close()

    def count(self, kind: str | None = None) -> int:
        if self.path is None:
            with self._lock:
                return sum(1 for k, _ in self._rows if kind is None or k == kind)
        conn = self._connect()
        try:
            if kind is None:
                return conn.execute("SELECT COUNT(*) FROM effects").fetchone()[0]
            return conn.execute("SELECT COUNT(*) FROM effects WHERE kind = ?", (kind,)).fetchone()[0]
        finally:
            conn.close()


FOODS = {
    "arroz": {"name": "Arroz blanco (cocido)", "carbohydrate_g_per_100g": 28},
    "feijão": {"name": "Feijão preto (cozido)", "carbohydrate_g_per_100g": 14},
}


class DemoWorld:
    """The state behind the demo tools: stores that can be switched off, and an effect log."""

    values = {"height": "170 cm", "weight": "70 kg"}

    def __init__(self, effects_path: str | os.PathLike[str] | None = None) -> None:
        self.effects = EffectLog(effects_path)
        self.store_up = True
        self.catalogue_up = True
        self.calls: dict[str, int] = {}

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def tools(self, *, write_delay: float = 0.0, after_effect: Callable[[], None] | None = None,
              timeout: float | None = 5.0) -> list[Tool]:
        """The four demo tools bound to this world. ``after_effect`` runs after a write's effect and before the
        handler returns (a crash there leaves the ledger at ``started``)."""
        world = self

        def lookup_demo_value(key: str) -> dict[str, Any]:
            """Look up a stored demo value (height, weight) by key."""
            world._count("lookup_demo_value")
            if not world.store_up:
                raise StoreUnavailable("value store unavailable")
            if key in world.values:
                return {"found": True, "key": key, "value": world.values[key]}
            return {"found": False, "key": key}

        def search_foods(query: str) -> list[dict[str, Any]]:
            """Search the food catalogue; returns matching foods with carbohydrate per 100 g."""
            world._count("search_foods")
            if not world.catalogue_up:
                raise CatalogueUnavailable("food catalogue unavailable")
            q = query.strip().lower()
            return [food for k, food in FOODS.items() if q and q in k]

        def add_food_to_meal(meal: Literal["breakfast", "lunch", "dinner", "snack"], food: str,
                             grams: Annotated[float, msgspec.Meta(gt=0)]) -> dict[str, Any]:
            """Add a portion of a food to a meal of today's diary."""
            world._count("add_food_to_meal")
            entry = world.effects.record("add_food_to_meal", {"meal": meal, "food": food, "grams": grams})
            if after_effect is not None:
                after_effect()
            if write_delay:
                time.sleep(write_delay)
            return {"entry_id": entry, "meal": meal, "food": food, "grams": grams}

        def save_measurement(kind: Literal["height", "weight"], value: float, unit: str) -> dict[str, Any]:
            """Save a body measurement."""
            world._count("save_measurement")
            entry = world.effects.record("save_measurement", {"kind": kind, "value": value, "unit": unit})
            if after_effect is not None:
                after_effect()
            if write_delay:
                time.sleep(write_delay)
            return {"entry_id": entry, "saved": {"kind": kind, "value": value, "unit": unit}}

        return [
            Tool.from_function(lookup_demo_value, effect="read", timeout=timeout),
            Tool.from_function(search_foods, effect="read", timeout=timeout),
            Tool.from_function(add_food_to_meal, effect="write", timeout=timeout),
            Tool.from_function(save_measurement, effect="write", timeout=timeout),
        ]

    def registry(self, **kw: Any) -> Registry:
        return Registry(self.tools(**kw))


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
