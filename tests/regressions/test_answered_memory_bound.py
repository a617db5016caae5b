"""The memory of answered calls that keeps a turn dispatched twice from running a read twice is bounded: a dispatcher
remembers its last 4,096 answers, and the README says so where it makes that promise. A read answered 4,096 answers
ago is still answered from memory; one answered 4,097 answers ago runs again (writes are kept by the ledger).

The bound is read from the README sentence itself, so the test and the documentation cannot drift apart.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import toolwire
from toolwire import Dispatcher, Registry, ResultKind, Tool

from ..bodies import body
from .ledgers import MODES, dispatch

K = ResultKind
README = Path(__file__).resolve().parents[2] / "README.md"
BATCH = 512


def documented_bound() -> int:
    text = " ".join(README.read_text(encoding="utf-8").split())
    found = re.search(r"so dispatching the same `Turn` twice runs no read and no write twice \(it remembers the "
                      r"last ([\d,]+) answers", text)
    assert found, "the README must state the bound where it promises that a turn dispatched twice runs no read twice"
    return int(found.group(1).replace(",", ""))


class Counter:
    def __init__(self) -> None:
        self.reads = 0

    def registry(self) -> Registry:
        def look(key: str) -> str:
            """Look a key up."""
            self.reads += 1
            return key

        return Registry([Tool.from_function(look, effect="read")])


def reads_turn(rid: str, n: int) -> toolwire.Turn:
    return toolwire.parse("openai-chat", body("openai-chat", [(f"call_{i}", "look", {"key": str(i)}) for i in range(n)],
                                              response_id=rid))


def answer_others(mode: str, d: Dispatcher, n: int) -> None:
    """``n`` answers of other calls (reads of other turns)."""
    for b in range(0, n, BATCH):
        dispatch(mode, d, reads_turn(f"other_{b}", min(BATCH, n - b)), conversation_id="c")


def test_the_readme_states_the_bound():
    assert documented_bound() == 4096


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("later", [0, 1], ids=["remembered", "forgotten"])
def test_a_read_answered_longer_ago_than_the_bound_runs_again(later, mode):
    """After the bound's worth of other answers less one, the first read is answered from memory; after exactly the
    bound's worth (it is then the bound-plus-first answer ago) it runs again, as the README says."""
    bound = documented_bound()
    counter = Counter()
    d = Dispatcher(counter.registry(), concurrent_reads=False)
    [first] = dispatch(mode, d, reads_turn("first", 1), conversation_id="c")
    assert first.kind is K.OK and counter.reads == 1
    answer_others(mode, d, bound - 1 + later)
    assert counter.reads == bound + later
    [again] = dispatch(mode, d, reads_turn("first", 1), conversation_id="c")
    assert again.kind is K.OK and again.content == "0"
    assert counter.reads == bound + later + later  # forgotten: the read ran again; remembered: it did not
