"""The demo's tools and the small world behind them (used by ``toolwire demo`` and the tests).

* ``lookup_demo_value(key)`` (read): ``height`` → ``"170 cm"``, ``weight`` → ``"70 kg"``; an unknown key is a
  "not found" ok result; a store that is down raises ``StoreUnavailable`` ("could not look").
* ``search_foods(query)`` (read): ``"arroz"`` → ``Arroz blanco (cocido)``, 28 g carbohydrate per 100 g; no match is
  an empty ok result; a catalogue that is down raises ``CatalogueUnavailable``.
* ``add_food_to_meal(meal, food, grams)`` and ``save_measurement(kind, value, unit)`` (writes): each effect is
  one row in an ``EffectLog`` (a SQLite file when given a path, so several processes can be counted), with the
  conversation it belongs to (the ``conversation_id`` the loop binds in structlog's context variables, which
  reach the handler).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Annotated, Any, Literal

import msgspec
import structlog

from ..registry import Registry, Tool

__all__ = ["StoreUnavailable", "CatalogueUnavailable", "EffectLog", "DemoWorld", "FOODS"]


class StoreUnavailable(Exception):
    """The value store could not be reached: the lookup could not look."""


class CatalogueUnavailable(Exception):
    """The food catalogue could not be reached."""


class EffectLog:
    """Counts effects: in memory, or in a SQLite file shared by processes (each write its own transaction).
    Each effect has a kind (the tool), its payload, the conversation it belongs to and the process it ran in."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = os.fspath(path) if path is not None else None
        self._lock = threading.Lock()
        self._rows: list[tuple[str, dict, str | None]] = []
        if self.path is not None:
            with self._connect() as conn:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("CREATE TABLE IF NOT EXISTS effects (id INTEGER PRIMARY KEY, kind TEXT, payload TEXT,"
                             " pid INTEGER, conversation TEXT, at REAL)")

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=30.0)

    def record(self, kind: str, payload: dict[str, Any], conversation: str | None = None) -> int:
        if self.path is None:
            with self._lock:
                self._rows.append((kind, payload, conversation))
                return len(self._rows)
        conn = self._connect()
        try:
            with conn:
                cur = conn.execute("INSERT INTO effects (kind, payload, pid, conversation, at) VALUES (?, ?, ?, ?, ?)",
                                   (kind, msgspec.json.encode(payload).decode(), os.getpid(), conversation,
                                    time.time()))
                return int(cur.lastrowid)
        finally:
            conn.close()

    def count(self, kind: str | None = None, *, conversation: str | None = None) -> int:
        """Effects of ``kind`` (every kind when None), of ``conversation`` only when given."""
        if self.path is None:
            with self._lock:
                return sum(1 for k, _, c in self._rows
                           if (kind is None or k == kind) and (conversation is None or c == conversation))
        where, params = [], []
        if kind is not None:
            where.append("kind = ?")
            params.append(kind)
        if conversation is not None:
            where.append("conversation = ?")
            params.append(conversation)
        sql = "SELECT COUNT(*) FROM effects" + (" WHERE " + " AND ".join(where) if where else "")
        conn = self._connect()
        try:
            return conn.execute(sql, params).fetchone()[0]
        finally:
            conn.close()

    def rows(self, since_id: int = 0) -> list[tuple[int, str, int | None, str | None, float | None]]:
        """``(id, kind, pid, conversation, at)`` of the effects after ``since_id`` (file-backed logs only)."""
        if self.path is None:
            return []
        conn = self._connect()
        try:
            return conn.execute("SELECT id, kind, pid, conversation, at FROM effects WHERE id > ? ORDER BY id",
                                (since_id,)).fetchall()
        finally:
            conn.close()


def _conversation() -> str | None:
    value = structlog.contextvars.get_contextvars().get("conversation_id")
    return value if isinstance(value, str) else None


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
            entry = world.effects.record("add_food_to_meal", {"meal": meal, "food": food, "grams": grams},
                                         _conversation())
            if after_effect is not None:
                after_effect()
            if write_delay:
                time.sleep(write_delay)
            return {"entry_id": entry, "meal": meal, "food": food, "grams": grams}

        def save_measurement(kind: Literal["height", "weight"], value: float, unit: str) -> dict[str, Any]:
            """Save a body measurement."""
            world._count("save_measurement")
            entry = world.effects.record("save_measurement", {"kind": kind, "value": value, "unit": unit},
                                         _conversation())
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
