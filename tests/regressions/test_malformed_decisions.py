"""A policy's answer that is not one of its three verdicts denies the call: a ``Decision`` built with a typo
(``"denied"``, ``"needs-approval"``, ``False``) is refused when it is built, and checked again when the dispatcher
reads it (a subclass that skips the check, a ``str`` subclass that equals everything); anything that is not a
``Decision``, a verdict string or a bool (None, a dict, a number, a coroutine, a value whose ``==`` raises), and a
policy that raises, deny too. Nothing ever runs on a malformed decision: the write fails closed.

Through ``Dispatcher.run`` and ``arun``; the policy sees no dialect, so one dialect stands for all.
"""

from __future__ import annotations

import msgspec
import pytest

import toolwire
from toolwire import Decision, Dispatcher, Registry, ResultKind, Tool, UsageError

from ..bodies import body
from .ledgers import MODES, dispatch

K = ResultKind

TYPOS = ["denied", "Deny", "DENY", "needs-approval", "needs approval", "approve", "allowed", "Allow", "allow ", "",
         False, True, None, 0, 1, ["deny"], {"verdict": "deny"}]


class Wallet:
    def __init__(self) -> None:
        self.paid: list[int] = []

    def registry(self) -> Registry:
        def pay(amount: int) -> dict:
            """Pay an amount."""
            self.paid.append(amount)
            return {"paid": amount}

        return Registry([Tool.from_function(pay, effect="write")])


def pay_turn() -> toolwire.Turn:
    return toolwire.parse("anthropic", body("anthropic", [("toolu_1", "pay", {"amount": 500})], response_id="msg_p"))


def run_with(mode: str, policy) -> tuple[toolwire.ToolResult, Wallet]:
    wallet = Wallet()
    [r] = dispatch(mode, Dispatcher(wallet.registry(), policy=policy), pay_turn(), conversation_id="c")
    return r, wallet


@pytest.mark.parametrize("verdict", TYPOS, ids=repr)
def test_a_decision_with_an_unknown_verdict_cannot_be_built(verdict):
    """``Decision(verdict)`` accepts exactly "allow", "deny" and "needs_approval" (a str, nothing else)."""
    with pytest.raises(UsageError, match="verdict"):
        Decision(verdict)
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(msgspec.json.encode({"verdict": verdict}), type=Decision)


def test_a_decision_reason_must_be_text():
    with pytest.raises(UsageError, match="reason"):
        Decision("deny", 42)
    for verdict in ("allow", "deny", "needs_approval"):
        assert Decision(verdict, "why").verdict == verdict


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("verdict", TYPOS, ids=repr)
def test_a_policy_building_a_malformed_decision_denies(verdict, mode):
    """The policy's ``Decision(typo)`` fails inside the policy: the call is denied and the write never runs."""
    r, wallet = run_with(mode, lambda call, ctx: Decision(verdict, "checked"))
    assert r.kind is K.DENIED and r.is_error and "Nothing was run" in r.content
    assert wallet.paid == []


class Loose(Decision, frozen=True):
    """A Decision subclass that skips the check when it is built."""

    def __post_init__(self) -> None:
        pass


class EqualsAnything(str):
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = str.__hash__


class EqRaises:
    def __eq__(self, other: object) -> bool:
        raise RuntimeError("no comparison")

    __hash__ = object.__hash__

    def __repr__(self) -> str:  # a test id the same in every process (pytest-xdist compares them)
        return "EqRaises()"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("verdict", ["denied", "needs-approval", False, None, EqualsAnything("nope"), EqRaises()],
                         ids=repr)
def test_a_malformed_decision_that_skipped_the_check_denies_when_read(verdict, mode):
    """A decision whose verdict escaped the check at construction is read again by the dispatcher: it denies."""
    r, wallet = run_with(mode, lambda call, ctx: Loose(verdict))
    assert r.kind is K.DENIED and wallet.paid == []
    assert "no valid verdict" in r.content


@pytest.mark.parametrize("mode", MODES)
def test_a_decision_with_a_reason_that_is_not_text_denies_when_read(mode):
    class Shouting:
        def __str__(self) -> str:
            raise RuntimeError("no text")

    r, wallet = run_with(mode, lambda call, ctx: Loose("allow", Shouting()))
    assert r.kind is K.DENIED and wallet.paid == []


async def _async_policy(call, ctx):
    return Decision.allow()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("answer", [None, "denied", "Allow", EqualsAnything("allow"), 1, 0, 1.0, {"verdict": "allow"},
                                    ["allow"], EqRaises(), b"allow"], ids=repr)
def test_anything_but_a_verdict_denies(answer, mode):
    """A policy returning something that is not a Decision, one of the three words or a bool denies the call."""
    r, wallet = run_with(mode, lambda call, ctx: answer)
    assert r.kind is K.DENIED and wallet.paid == []


@pytest.mark.parametrize("mode", MODES)
def test_an_async_policy_denies_and_leaves_no_coroutine_behind(mode, recwarn):
    """A coroutine function as policy (whose coroutine is not a verdict) denies, and its coroutine is closed."""
    r, wallet = run_with(mode, _async_policy)
    assert r.kind is K.DENIED and wallet.paid == []
    assert not [w for w in recwarn if "never awaited" in str(w.message)]


@pytest.mark.parametrize("mode", MODES)
def test_a_policy_that_raises_denies(mode):
    def policy(call, ctx):
        raise KeyError("no such user")

    r, wallet = run_with(mode, policy)
    assert r.kind is K.DENIED and wallet.paid == [] and "policy failed" in r.content


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("answer,kind", [(Decision.allow(), K.OK), ("allow", K.OK), (True, K.OK),
                                         (Decision.deny("no"), K.DENIED), ("deny", K.DENIED), (False, K.DENIED),
                                         (Decision.needs_approval("ask"), K.APPROVAL_REQUIRED),
                                         ("needs_approval", K.APPROVAL_REQUIRED)], ids=repr)
def test_the_documented_verdicts_still_decide(answer, kind, mode):
    r, wallet = run_with(mode, lambda call, ctx: answer)
    assert r.kind is kind and wallet.paid == ([500] if kind is K.OK else [])
