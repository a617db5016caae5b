"""A write dispatched again while its ledger is unavailable may have run before: it is answered
``outcome_unknown``, never ``not_run``.

A write completes; the process restarts (a new dispatcher, so nothing is remembered in memory) and the same turn
is dispatched again while the ledger raises on every call: on the look-up a policy needs (``get``), on the write's
claim (no policy), and on the claim of the dispatched choice (a response with several choices). Whether the
write ran before cannot be checked, so it may have: the answer is ``outcome_unknown`` (and nothing runs), never
"Not run", which would tell the model the effect never happened. A read in the same turn needs no ledger and runs,
except when the choice itself cannot be checked: then it is ``not_run``.

Through ``Dispatcher.run`` and ``arun``, for every dialect, with every ledger (memory, SQLite, PostgreSQL).
"""

from __future__ import annotations

from typing import Any

import pytest

import toolwire
from toolwire import Decision, Dispatcher, Registry, ResultKind, Tool

from ..bodies import MULTI_CHOICE, PROVIDERS, body, choices_body
from .ledgers import LEDGERS, MODES, dispatch, new_conversation, open_store

K = ResultKind


class Unavailable(RuntimeError):
    pass


class GoesDown:
    """A ledger that forwards to a real one until ``down`` is set; then every operation raises."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.down = False

    def _op(self, name: str):
        def op(*args: Any) -> Any:
            if self.down:
                raise Unavailable(f"{name}: connection refused")
            return getattr(self.inner, name)(*args)
        return op

    def __getattr__(self, name: str) -> Any:
        if name in ("claim", "complete", "get"):
            return self._op(name)
        if name in ("aclaim", "acomplete", "aget"):
            inner = getattr(self.inner, name, None)
            if inner is None:
                raise AttributeError(name)

            async def aop(*args: Any) -> Any:
                if self.down:
                    raise Unavailable(f"{name}: connection refused")
                return await inner(*args)
            return aop
        return getattr(self.inner, name)


class App:
    def __init__(self) -> None:
        self.paid: list[int] = []
        self.reads = 0

    def registry(self) -> Registry:
        def pay(amount: int) -> dict:
            """Pay an amount."""
            self.paid.append(amount)
            return {"paid": amount}

        def balance() -> int:
            """Read the balance."""
            self.reads += 1
            return 1000 - sum(self.paid)

        return Registry([Tool.from_function(pay, effect="write"), Tool.from_function(balance, effect="read")])


def allow_all(call, ctx) -> Decision:
    return Decision.allow()


CALLS = [("call_pay", "pay", {"amount": 70}), ("call_bal", "balance", {})]


@pytest.fixture(params=LEDGERS)
def store(request, tmp_path):
    s = open_store(request.param, request, tmp_path)
    yield s
    s.close()


def _run_twice(store, mode: str, turn: toolwire.Turn, *, policy, choice: int = 0) -> list[toolwire.ToolResult]:
    app = App()
    conv = new_conversation()
    first = dispatch(mode, Dispatcher(app.registry(), ledger=store.ledger, policy=policy), turn,
                     conversation_id=conv, choice=choice)
    assert [r.kind for r in first] == [K.OK, K.OK]
    assert app.paid == [70]
    ledger = GoesDown(store.reopen())
    ledger.down = True
    again = dispatch(mode, Dispatcher(app.registry(), ledger=ledger, policy=policy), turn,
                     conversation_id=conv, choice=choice)
    assert app.paid == [70], "the write ran a second time"
    return again


def _unknown_not_not_run(results: list[toolwire.ToolResult], read: ResultKind = K.OK) -> None:
    pay, bal = results
    assert pay.kind is K.OUTCOME_UNKNOWN, (pay.kind, pay.content)
    assert "may" in str(pay.content)
    assert not str(pay.content).startswith("Not run")
    assert bal.kind is read


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_write_whose_record_cannot_be_read_is_outcome_unknown(store, provider, mode):
    turn = toolwire.parse(provider, body(provider, CALLS, response_id="resp_outage"))
    _unknown_not_not_run(_run_twice(store, mode, turn, policy=allow_all))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_write_whose_claim_fails_is_outcome_unknown(store, provider, mode):
    turn = toolwire.parse(provider, body(provider, CALLS, response_id="resp_outage"))
    _unknown_not_not_run(_run_twice(store, mode, turn, policy=None))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", MULTI_CHOICE)
def test_a_write_whose_choice_claim_fails_is_outcome_unknown(store, provider, mode):
    turn = toolwire.parse(provider, choices_body(provider, [CALLS, CALLS], response_id="resp_outage"))
    _unknown_not_not_run(_run_twice(store, mode, turn, policy=None, choice=1), read=K.NOT_RUN)
