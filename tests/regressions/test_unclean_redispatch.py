"""A write that ran is answered by its record even when its turn did not finish cleanly.

A turn that did not finish cleanly runs nothing unless the application passes ``allow_unclean=True``. A write
that ran that way (or under a version of toolwire that judged the same stored response clean) and is dispatched
again without it was answered "Not run: the response did not finish cleanly. No tool was run", by the same
dispatcher and after a restart, because the unclean check came before the dispatcher's memory and the ledger.
Now a write of an unclean turn is answered by what the dispatcher remembers or by its ledger record (the stored
result, or ``outcome_unknown`` for a started one, or when the ledger cannot be read); only a write with no record
is ``not_run``.

Through ``Dispatcher.run`` and ``arun``, with every ledger, for an Anthropic refusal and a Gemini ``SAFETY``
candidate.
"""

from __future__ import annotations

import json

import pytest

import toolwire
from toolwire import Dispatcher, Registry, ResultKind, Tool

from .ledgers import LEDGERS, MODES, dispatch, new_conversation, open_store
from .test_ledger_outage_after_a_write import GoesDown

K = ResultKind

UNCLEAN = {
    "anthropic": json.dumps({
        "id": "msg_u", "type": "message", "role": "assistant", "model": "m", "stop_reason": "refusal",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "save", "input": {"x": 1}}],
        "usage": {"input_tokens": 1, "output_tokens": 1}}),
    "gemini": json.dumps({
        "responseId": "resp_u", "candidates": [{"index": 0, "finishReason": "SAFETY", "content": {
            "role": "model", "parts": [{"functionCall": {"name": "save", "args": {"x": 1}}}]}}]}),
}


class App:
    def __init__(self) -> None:
        self.effects: list[int] = []

    def registry(self) -> Registry:
        def save(x: int) -> dict:
            """Save x."""
            self.effects.append(x)
            return {"saved": x}

        return Registry([Tool.from_function(save, effect="write")])


@pytest.fixture(params=LEDGERS)
def store(request, tmp_path):
    s = open_store(request.param, request, tmp_path)
    yield s
    s.close()


def _turn(provider: str) -> toolwire.Turn:
    turn = toolwire.parse(provider, UNCLEAN[provider])
    assert not turn.choice_finished_cleanly(0)
    return turn


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", UNCLEAN)
def test_a_write_run_with_allow_unclean_is_answered_by_its_record_again(store, provider, mode):
    app = App()
    conv = new_conversation()
    d = Dispatcher(app.registry(), ledger=store.ledger)
    [first] = dispatch(mode, d, _turn(provider), conversation_id=conv, allow_unclean=True)
    assert first.kind is K.OK and app.effects == [1]
    [same] = dispatch(mode, d, _turn(provider), conversation_id=conv)
    assert (same.kind, same.content) == (K.OK, {"saved": 1}), (same.kind, same.content)
    [restarted] = dispatch(mode, Dispatcher(app.registry(), ledger=store.reopen()), _turn(provider),
                           conversation_id=conv)
    assert (restarted.kind, restarted.content) == (K.OK, {"saved": 1}), (restarted.kind, restarted.content)
    assert app.effects == [1]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", UNCLEAN)
def test_a_write_of_an_unclean_turn_with_no_record_is_not_run(store, provider, mode):
    app = App()
    [r] = dispatch(mode, Dispatcher(app.registry(), ledger=store.ledger), _turn(provider),
                   conversation_id=new_conversation())
    assert r.kind is K.NOT_RUN and app.effects == []
    assert "did not finish cleanly" in r.content


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", UNCLEAN)
def test_a_write_of_an_unclean_turn_whose_ledger_is_down_is_outcome_unknown(store, provider, mode):
    app = App()
    conv = new_conversation()
    dispatch(mode, Dispatcher(app.registry(), ledger=store.ledger), _turn(provider), conversation_id=conv,
             allow_unclean=True)
    ledger = GoesDown(store.reopen())
    ledger.down = True
    [r] = dispatch(mode, Dispatcher(app.registry(), ledger=ledger), _turn(provider), conversation_id=conv)
    assert r.kind is K.OUTCOME_UNKNOWN and app.effects == [1], (r.kind, r.content)
