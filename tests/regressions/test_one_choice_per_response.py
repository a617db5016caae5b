"""Only one choice of a response is ever dispatched, across runs, dispatchers and restarts: the first choice
dispatched of a turn identity is recorded in the ledger (a claim: of racing dispatches of two choices, exactly
one wins), and dispatching another choice of that turn raises ``ChoiceError`` before anything of it runs.

Through ``Dispatcher.run`` and ``arun``, with every ledger (memory, SQLite, PostgreSQL), for the dialects whose
responses carry several choices (Chat ``n > 1``, Gemini candidates).
"""

from __future__ import annotations

import sqlite3
import threading

import pytest

import toolwire
from toolwire import Dispatcher, Registry, ResultKind, SQLiteLedger, Tool, UsageError

from ..bodies import MULTI_CHOICE, body, choices_body
from .ledgers import LEDGERS, MODES, dispatch, new_conversation, open_store

K = ResultKind


class Shop:
    def __init__(self) -> None:
        self.items: list[str] = []
        self.lock = threading.Lock()

    def registry(self) -> Registry:
        def add_item(item: str) -> dict:
            """Add an item to the list."""
            with self.lock:
                self.items.append(item)
            return {"added": item}

        return Registry([Tool.from_function(add_item, effect="write")])


def two_choices(provider: str) -> toolwire.Turn:
    return toolwire.parse(provider, choices_body(provider, [[("call_a", "add_item", {"item": "apple"})],
                                                            [("call_p", "add_item", {"item": "pear"})]],
                                                 response_id="resp_two"))


@pytest.fixture(params=LEDGERS)
def store(request, tmp_path):
    s = open_store(request.param, request, tmp_path)
    yield s
    s.close()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", MULTI_CHOICE)
def test_another_choice_of_a_dispatched_response_is_refused(provider, mode, store):
    """Choice 0 ran; choice 1 of the same response, dispatched again by the same dispatcher, runs nothing."""
    shop, conv = Shop(), new_conversation()
    d = Dispatcher(shop.registry(), ledger=store.ledger)
    [first] = dispatch(mode, d, two_choices(provider), conversation_id=conv)
    assert first.kind is K.OK and shop.items == ["apple"]
    with pytest.raises(UsageError) as refused:
        dispatch(mode, d, two_choices(provider), conversation_id=conv, choice=1)
    assert shop.items == ["apple"]
    assert isinstance(refused.value, toolwire.ChoiceError)
    assert (refused.value.choice, refused.value.dispatched) == (1, 0)
    # the choice that was dispatched may be dispatched again: answered from its records, nothing runs twice
    [again] = dispatch(mode, d, two_choices(provider), conversation_id=conv)
    assert again.kind is K.OK and again.content == {"added": "apple"} and shop.items == ["apple"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", MULTI_CHOICE)
def test_another_choice_is_refused_after_a_restart(provider, mode, store):
    """A restarted process (a new dispatcher on the same ledger) that dispatches choice 1 of a response whose choice
    0 ran refuses it: the ledger remembers which choice of the turn identity was dispatched."""
    shop, conv = Shop(), new_conversation()
    dispatch(mode, Dispatcher(shop.registry(), ledger=store.ledger), two_choices(provider), conversation_id=conv)
    with pytest.raises(toolwire.ChoiceError):
        dispatch(mode, Dispatcher(shop.registry(), ledger=store.reopen()), two_choices(provider),
                 conversation_id=conv, choice=1)
    assert shop.items == ["apple"]
    # with a turn_id, the turn identity is the caller's: the same rule
    dispatch(mode, Dispatcher(shop.registry(), ledger=store.reopen()), two_choices(provider),
             conversation_id=conv, turn_id="step-7", choice=1)
    with pytest.raises(toolwire.ChoiceError):
        dispatch(mode, Dispatcher(shop.registry(), ledger=store.reopen()), two_choices(provider),
                 conversation_id=conv, turn_id="step-7", choice=0)
    assert shop.items == ["apple", "pear"]


@pytest.mark.parametrize("provider", MULTI_CHOICE)
def test_racing_dispatches_of_two_choices_run_one(provider, store):
    """Eight dispatchers sharing a ledger dispatch choice 0 or 1 of one response at once: one choice wins, its write
    runs once, and every dispatch of the other choice is refused (before the record, both choices' writes ran)."""
    shop, conv = Shop(), new_conversation()
    barrier = threading.Barrier(8)
    outcomes: list[str] = []

    def racer(choice: int) -> None:
        d = Dispatcher(shop.registry(), ledger=store.reopen())
        turn = two_choices(provider)
        barrier.wait()
        try:
            [r] = d.run(turn, conversation_id=conv, choice=choice)
            outcomes.append(f"{choice}:{r.kind.value}")
        except toolwire.ChoiceError:
            outcomes.append(f"{choice}:refused")

    threads = [threading.Thread(target=racer, args=(i % 2,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(outcomes) == 8
    assert len(shop.items) == 1
    won = 0 if shop.items == ["apple"] else 1
    assert sorted(o for o in outcomes if not o.startswith(f"{won}:")) == [f"{1 - won}:refused"] * 4
    # the winner's write ran once: the racers of its choice that found it under way answer outcome_unknown
    assert f"{won}:ok" in outcomes and set(outcomes) <= {f"{won}:ok", f"{won}:outcome_unknown", f"{1 - won}:refused"}


@pytest.mark.parametrize("mode", MODES)
def test_a_response_with_one_choice_leaves_no_choice_record(mode, tmp_path):
    """The record is kept only for responses with several choices: a single-choice turn costs no ledger write."""
    path = tmp_path / "l.db"
    shop = Shop()
    turn = toolwire.parse("openai-chat", body("openai-chat", [("call_1", "add_item", {"item": "fig"})]))
    dispatch(mode, Dispatcher(shop.registry(), ledger=SQLiteLedger(path)), turn, conversation_id="c")
    with sqlite3.connect(path) as conn:
        keys = [k for (k,) in conn.execute("SELECT call_key FROM toolwire_ledger")]
    assert len(keys) == 1 and keys[0].startswith("call:")
