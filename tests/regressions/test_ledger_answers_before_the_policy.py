"""A write dispatched again is answered by its ledger record before the policy is asked: after a restart (or once
the dispatcher no longer remembers its answer) a completed write gets its stored result and a started one
``outcome_unknown``, never "Denied ... Nothing was run." or "Approval required ... it has not run." for a write
that did run. The policy decides only calls that have not run (and is not even called for the others).

Through ``Dispatcher.run`` and ``arun``, with every ledger (memory, SQLite, PostgreSQL).
"""

from __future__ import annotations

import pytest

import toolwire
from toolwire import Decision, Dispatcher, OutcomeUnknown, Registry, ResultKind, Tool

from ..bodies import PROVIDERS, body, identified
from .ledgers import LEDGERS, MODES, dispatch, new_conversation, open_store

K = ResultKind


class Bank:
    def __init__(self, *, unknown: bool = False) -> None:
        self.paid: list[int] = []
        self.balance_reads = 0
        self.unknown = unknown

    def registry(self, **kw) -> Registry:
        def pay(amount: int) -> dict:
            """Pay an amount."""
            self.paid.append(amount)
            if self.unknown:
                raise OutcomeUnknown("the bank did not confirm")
            return {"paid": amount, "receipt": len(self.paid)}

        def balance() -> int:
            """Read the balance."""
            self.balance_reads += 1
            return 1000 - sum(self.paid)

        return Registry([Tool.from_function(pay, effect="write", **kw), Tool.from_function(balance, effect="read")])


class Policy:
    """Allows, denies or asks for approval, counting the calls it was asked about."""

    def __init__(self, answer: Decision) -> None:
        self.answer = answer
        self.asked: list[str] = []

    def __call__(self, call, ctx) -> Decision:
        self.asked.append(call.name)
        return self.answer


def pay_turn(provider: str = "anthropic", rid: str = "resp_pay") -> toolwire.Turn:
    return toolwire.parse(provider, body(provider, [("call_pay", "pay", {"amount": 70})], response_id=rid))


@pytest.fixture(params=LEDGERS)
def store(request, tmp_path):
    s = open_store(request.param, request, tmp_path)
    yield s
    s.close()


LATER = [Decision.deny("payments are closed now"), Decision.needs_approval("a person confirms payments now")]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("later", LATER, ids=lambda d: d.verdict)
def test_a_completed_write_is_answered_from_its_record_after_a_restart(later, mode, store):
    """Paid under an allowing policy; a restarted process whose policy now denies (or wants an approval) answers
    the same call with the stored receipt, runs nothing, and never asks its policy about it."""
    bank, conv = Bank(), new_conversation()
    [first] = dispatch(mode, Dispatcher(bank.registry(), ledger=store.ledger, policy=Policy(Decision.allow())),
                       pay_turn(), conversation_id=conv)
    assert first.kind is K.OK
    policy = Policy(later)
    [again] = dispatch(mode, Dispatcher(bank.registry(), ledger=store.reopen(), policy=policy), pay_turn(),
                       conversation_id=conv)
    assert again.kind is K.OK and again.content == first.content and again.call_id == "call_pay"
    assert bank.paid == [70] and policy.asked == []


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("later", LATER, ids=lambda d: d.verdict)
def test_a_started_write_is_outcome_unknown_whatever_the_policy_says(later, mode, store):
    """A write whose record stayed ``started`` (its outcome unknown) is answered ``outcome_unknown`` when dispatched
    again under a denying policy: never "Nothing was run"."""
    bank, conv = Bank(unknown=True), new_conversation()
    [first] = dispatch(mode, Dispatcher(bank.registry(), ledger=store.ledger), pay_turn(), conversation_id=conv)
    assert first.kind is K.OUTCOME_UNKNOWN
    policy = Policy(later)
    [again] = dispatch(mode, Dispatcher(bank.registry(), ledger=store.reopen(), policy=policy), pay_turn(),
                       conversation_id=conv)
    assert again.kind is K.OUTCOME_UNKNOWN and "Nothing was run" not in again.content
    assert "has not run" not in again.content and bank.paid == [70] and policy.asked == []


@pytest.mark.parametrize("mode", MODES)
def test_an_approved_write_dispatched_again_without_its_token_gets_its_result(mode, store):
    """A write that needed an approval ran on it; re-dispatched later without the token (a re-run step, a
    restart), it is answered from its record, not "Approval required ... it has not run"."""
    bank, conv = Bank(), new_conversation()
    policy = Policy(Decision.needs_approval("payments need a person"))
    d = Dispatcher(bank.registry(), ledger=store.ledger, policy=policy, approval_secret=b"s" * 32)
    [asked] = dispatch(mode, d, pay_turn(), conversation_id=conv)
    token = d.approve(asked.approval, approver="ana")
    [paid] = dispatch(mode, d, pay_turn(), conversation_id=conv, approvals=[token])
    assert paid.kind is K.OK
    restarted = Dispatcher(bank.registry(), ledger=store.reopen(), policy=policy, approval_secret=b"s" * 32)
    [again] = dispatch(mode, restarted, pay_turn(), conversation_id=conv)
    assert again.kind is K.OK and again.content == paid.content and bank.paid == [70]


@pytest.mark.parametrize("mode", MODES)
def test_a_write_under_its_own_idempotency_key_is_answered_from_its_record(mode, store):
    """The same payment re-planned under a new call id and turn (its tool's idempotency key finds the record) is
    answered with the stored receipt even though the policy now denies."""
    bank, conv = Bank(), new_conversation()
    key = {"idempotency_key": lambda args: f"pay:{args['amount']}"}
    dispatch(mode, Dispatcher(bank.registry(**key), ledger=store.ledger), pay_turn(rid="r1"), conversation_id=conv)
    turn = toolwire.parse("anthropic", body("anthropic", [("call_other", "pay", {"amount": 70})], response_id="r2"))
    [again] = dispatch(mode, Dispatcher(bank.registry(**key), ledger=store.reopen(),
                                        policy=Policy(Decision.deny())), turn, conversation_id=conv)
    assert again.kind is K.OK and again.content == {"paid": 70, "receipt": 1} and bank.paid == [70]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_policy_still_decides_calls_that_have_not_run(provider, mode, store):
    """A write never run before, and every read, are still the policy's to decide."""
    bank, conv = Bank(), new_conversation()
    turn = toolwire.parse(provider, body(provider, [("call_pay", "pay", {"amount": 70}), ("call_bal", "balance", {})],
                                         response_id="resp_new"))
    policy = Policy(Decision.deny("closed"))
    results = dispatch(mode, Dispatcher(bank.registry(), ledger=store.ledger, policy=policy), turn,
                       conversation_id=conv, **identified(provider, "resp_new"))
    assert [r.kind for r in results] == [K.DENIED, K.DENIED]
    assert bank.paid == [] and bank.balance_reads == 0 and policy.asked == ["pay", "balance"]
