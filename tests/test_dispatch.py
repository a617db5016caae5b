"""The dispatcher: one result per call in call order; lookup, validation, policy, approval, effects, timeouts."""

from __future__ import annotations

import asyncio
import threading
import time

import msgspec
import pytest
from structlog.testing import capture_logs

import toolwire
from toolwire import CallState, InvalidTransition
from toolwire.registry import (
    Approval,
    ApprovalError,
    Decision,
    Dispatcher,
    MemoryLedger,
    Registry,
    ResultKind,
    SQLiteLedger,
    Tool,
    ToolResult,
)
from toolwire.statemachine.call import CallRecord

from .tools_demo import DemoWorld, anthropic_turn, chat_turn, world  # noqa: F401 - fixture

K = ResultKind
LOOKUP = ("toolu_1", "lookup_demo_value", '{"key": "height"}')
SEARCH = ("toolu_2", "search_foods", '{"query": "arroz"}')
SAVE = ("toolu_3", "save_measurement", '{"kind": "weight", "value": 70, "unit": "kg"}')
ADD = ("toolu_4", "add_food_to_meal", '{"meal": "lunch", "food": "arroz", "grams": 150}')


class SpyLedger(MemoryLedger):
    """A MemoryLedger that records every call made to it."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple[str, str]] = []

    def claim(self, key, fingerprint=""):
        self.ops.append(("claim", key.call_key))
        return super().claim(key, fingerprint)

    def complete(self, key, result):
        self.ops.append(("complete", key.call_key))
        return super().complete(key, result)


def kinds(results: list[ToolResult]) -> list[str]:
    return [r.kind.value for r in results]


def needs_approval_for_writes(call, ctx):
    return Decision.needs_approval("changes the diary") if ctx.tool.effect == "write" else Decision.allow()


# ---- the basics ------------------------------------------------------------------------------------------------


def test_runs_reads_and_writes_and_answers_under_each_call_id(world):
    """Reads and writes of a clean turn run; each result carries its call's ids and name."""
    results = Dispatcher(world.registry()).run(anthropic_turn(LOOKUP, SEARCH, SAVE), conversation_id="c1")
    assert kinds(results) == ["ok", "ok", "ok"]
    assert [(r.call_id, r.local_id, r.name) for r in results] == [
        ("toolu_1", "tw-0", "lookup_demo_value"), ("toolu_2", "tw-1", "search_foods"),
        ("toolu_3", "tw-2", "save_measurement")]
    assert results[0].content == {"found": True, "key": "height", "value": "170 cm"}
    assert results[1].content == [{"name": "Arroz blanco (cocido)", "carbohydrate_g_per_100g": 28}]
    assert not any(r.is_error for r in results)
    assert world.effects.count("save_measurement") == 1


def test_results_are_json_encodable(world):
    """Every result encodes with msgspec.json (content is JSON-able)."""
    results = Dispatcher(world.registry()).run(anthropic_turn(LOOKUP, ("x", "nope", "{}")), conversation_id="c")
    decoded = msgspec.json.decode(msgspec.json.encode(results), type=list[ToolResult])
    assert decoded == results


def test_empty_turn_gives_no_results(world):
    """A turn without calls gives an empty list."""
    assert Dispatcher(world.registry()).run(toolwire.parse("anthropic", b""), conversation_id="c") == []


def test_conversation_id_is_required(world):
    """An empty conversation id is a usage error."""
    with pytest.raises(toolwire.UsageError):
        Dispatcher(world.registry()).run(anthropic_turn(LOOKUP), conversation_id="")


# ---- unknown tool, invalid arguments -----------------------------------------------------------------------------


def test_unknown_tool_runs_nothing_and_writes_nothing(world):
    """An unknown name is answered unknown_tool listing available names; no handler runs, no ledger write."""
    ledger = SpyLedger()
    results = Dispatcher(world.registry(), ledger=ledger).run(
        anthropic_turn(("toolu_9", "save_measurements", SAVE[2])), conversation_id="c")
    assert kinds(results) == ["unknown_tool"] and results[0].is_error
    assert "save_measurements" in results[0].content
    assert "lookup_demo_value, search_foods, add_food_to_meal, save_measurement" in results[0].content
    assert world.calls == {} and ledger.ops == []


def test_invalid_arguments_carry_path_and_reason(world):
    """Schema failures are invalid_arguments with the JSON path; nothing runs, nothing is claimed."""
    ledger = SpyLedger()
    turn = anthropic_turn(("toolu_1", "save_measurement", '{"kind": "weight", "value": "70", "unit": "kg"}'),
                          ("toolu_2", "add_food_to_meal", '{"meal": "brunch", "food": "arroz", "grams": 1}'))
    results = Dispatcher(world.registry(), ledger=ledger).run(turn, conversation_id="c")
    assert kinds(results) == ["invalid_arguments", "invalid_arguments"]
    assert "Expected `float`, got `str` - at `$.value`" in results[0].content
    assert "- at `$.meal`" in results[1].content
    assert world.calls == {} and ledger.ops == []


@pytest.mark.parametrize("args,problem", [('{"key": ', "not valid JSON"), ("[1]", "not an object")])
def test_unparsed_arguments_are_invalid_arguments(world, args, problem):
    """Arguments that did not parse (args None) are invalid_arguments; nothing runs."""
    results = Dispatcher(world.registry()).run(chat_turn(("call_1", "lookup_demo_value", args)),
                                               conversation_id="c")
    assert kinds(results) == ["invalid_arguments"]
    assert problem in results[0].content and "- at `$`" in results[0].content
    assert world.calls == {}


# ---- turns that did not finish cleanly -----------------------------------------------------------------------------


def test_turn_cut_by_max_tokens_runs_nothing(world):
    """A max_tokens turn answers every call not_run, even the ones that completed."""
    turn = anthropic_turn(LOOKUP, SAVE, ("toolu_5", "search_foods", '{"query": "ar'), stop_reason="max_tokens",
                          stop_last=False)
    assert turn.calls[0].state is CallState.COMPLETE and not turn.finished_cleanly
    results = Dispatcher(world.registry()).run(turn, conversation_id="c")
    assert kinds(results) == ["not_run", "not_run", "not_run"]
    assert all(r.is_error and "max_tokens" in r.content for r in results)
    assert world.calls == {} and world.effects.count() == 0


def test_stream_cut_runs_nothing(world):
    """A stream that ends without its stop events runs nothing."""
    turn = anthropic_turn(LOOKUP, stop_reason=None)
    assert not turn.finished_cleanly
    assert kinds(Dispatcher(world.registry()).run(turn, conversation_id="c")) == ["not_run"]
    assert world.calls == {}


def test_allow_unclean_runs_only_whole_calls(world):
    """allow_unclean=True opts out for whole calls; a truncated call is still not_run."""
    turn = anthropic_turn(LOOKUP, ("toolu_5", "search_foods", '{"query": "ar'), stop_reason="max_tokens",
                          stop_last=False)
    results = Dispatcher(world.registry()).run(turn, conversation_id="c", allow_unclean=True)
    assert kinds(results) == ["ok", "not_run"]
    assert world.calls == {"lookup_demo_value": 1}


# ---- the state machine guards dispatch -----------------------------------------------------------------------------


def test_table_refuses_dispatching_a_truncated_call():
    """CallRecord.resume of a truncated call cannot be dispatched or rejected: InvalidTransition."""
    turn = anthropic_turn(("toolu_5", "search_foods", '{"query": "ar'), stop_reason="max_tokens", stop_last=False)
    call = turn.calls[0]
    assert call.state is CallState.TRUNCATED
    rec = CallRecord.resume(call)
    with pytest.raises(InvalidTransition):
        rec.dispatch()
    with pytest.raises(InvalidTransition):
        rec.reject()


def test_table_refuses_answering_twice():
    """A dispatched call answered once cannot be answered again."""
    rec = CallRecord.resume(anthropic_turn(LOOKUP).calls[0])
    rec.dispatch()
    rec.answer()
    with pytest.raises(InvalidTransition):
        rec.answer()


def test_parsed_calls_are_immutable(world):
    """A parsed ToolCall cannot be edited into another state (a truncated call cannot be made dispatchable)."""
    call = anthropic_turn(LOOKUP).calls[0]
    with pytest.raises(AttributeError):
        call.state = CallState.COMPLETE
    with pytest.raises(AttributeError):
        call.args = {}


def test_dispatching_an_already_answered_call_raises(world):
    """A call handed over in state answered is refused by the table, not silently re-run."""
    turn = anthropic_turn(LOOKUP)
    turn.calls[0] = msgspec.structs.replace(turn.calls[0], state=CallState.ANSWERED)
    with pytest.raises(InvalidTransition):
        Dispatcher(world.registry()).run(turn, conversation_id="c")
    assert world.calls == {}


# ---- policy --------------------------------------------------------------------------------------------------------


def test_policy_denies(world):
    """A deny decision answers denied with the reason; nothing runs."""
    policy = lambda call, ctx: Decision.deny("read-only session") if ctx.tool.effect == "write" else "allow"
    results = Dispatcher(world.registry(), policy=policy).run(anthropic_turn(LOOKUP, SAVE), conversation_id="c")
    assert kinds(results) == ["ok", "denied"]
    assert "read-only session" in results[1].content
    assert world.effects.count() == 0


def test_policy_sees_every_call_whatever_its_name(world):
    """The policy is consulted for every declared tool: no name grants permission by itself."""
    seen = []

    def policy(call, ctx):
        seen.append((call.name, ctx.conversation_id, ctx.tool.effect))
        return False

    results = Dispatcher(world.registry(), policy=policy).run(anthropic_turn(LOOKUP, SEARCH), conversation_id="c")
    assert kinds(results) == ["denied", "denied"]
    assert seen == [("lookup_demo_value", "c", "read"), ("search_foods", "c", "read")]


def test_policy_that_raises_denies(world):
    """A failing policy fails closed."""
    def policy(call, ctx):
        raise RuntimeError("boom")

    assert kinds(Dispatcher(world.registry(), policy=policy).run(anthropic_turn(SAVE), conversation_id="c")) \
        == ["denied"]
    assert world.effects.count() == 0


def test_policy_with_unknown_verdict_denies(world):
    """A verdict that is not allow/deny/needs_approval denies."""
    results = Dispatcher(world.registry(), policy=lambda c, x: "maybe").run(anthropic_turn(SAVE),
                                                                           conversation_id="c")
    assert kinds(results) == ["denied"]


# ---- approval ------------------------------------------------------------------------------------------------------


def test_approval_required_then_approved_then_ok(world):
    """A write needing approval waits; the approved token resumes exactly that call, once."""
    d = Dispatcher(world.registry(), policy=needs_approval_for_writes)
    turn = anthropic_turn(LOOKUP, SAVE)
    first = d.run(turn, conversation_id="c")
    assert kinds(first) == ["ok", "approval_required"]
    req = first[1].approval
    assert (req.conversation_id, req.call_id, req.name) == ("c", "toolu_3", "save_measurement")
    assert req.arguments == {"kind": "weight", "value": 70, "unit": "kg"} and req.signature
    assert world.effects.count() == 0
    token = d.approve(req, approver="ana")
    again = d.run(turn, conversation_id="c", approvals=[token])
    assert kinds(again) == ["ok", "ok"] and world.effects.count() == 1
    assert kinds(d.run(turn, conversation_id="c", approvals=[token])) == ["ok", "ok"]
    assert world.effects.count() == 1


def test_approval_token_survives_serialisation(world):
    """A token stored as JSON (or a dict) and read back still approves the call."""
    d = Dispatcher(world.registry(), policy=needs_approval_for_writes)
    turn = anthropic_turn(SAVE)
    token = d.approve(d.run(turn, conversation_id="c")[0].approval, approver="ana")
    stored = msgspec.json.decode(msgspec.json.encode(token))
    assert kinds(d.run(turn, conversation_id="c", approvals=[stored])) == ["ok"]


def _approved_token(d: Dispatcher, turn, conversation_id="c") -> Approval:
    [res] = d.run(turn, conversation_id=conversation_id)
    assert res.kind is K.APPROVAL_REQUIRED
    return d.approve(res.approval, approver="ana")


def test_token_for_other_arguments_is_refused(world):
    """An approval for value 70 does not approve the same call id with value 700."""
    d = Dispatcher(world.registry(), policy=needs_approval_for_writes)
    token = _approved_token(d, anthropic_turn(SAVE))
    other = anthropic_turn(("toolu_3", "save_measurement", '{"kind": "weight", "value": 700, "unit": "kg"}'))
    with capture_logs() as logs:
        assert kinds(d.run(other, conversation_id="c", approvals=[token])) == ["approval_required"]
    assert world.effects.count() == 0
    assert any(e["event"] == "dispatch.approval_invalid" and e["reason"] == "arguments_mismatch" for e in logs)


def test_token_for_other_call_id_is_refused(world):
    """An approval of one call id does not approve another call with identical arguments."""
    d = Dispatcher(world.registry(), policy=needs_approval_for_writes)
    token = _approved_token(d, anthropic_turn(SAVE))
    other = anthropic_turn(("toolu_other", SAVE[1], SAVE[2]))
    assert kinds(d.run(other, conversation_id="c", approvals=[token])) == ["approval_required"]
    assert world.effects.count() == 0


def test_token_for_other_conversation_is_refused(world):
    """An approval given in one conversation does not approve the same call in another."""
    d = Dispatcher(world.registry(), policy=needs_approval_for_writes)
    token = _approved_token(d, anthropic_turn(SAVE), conversation_id="c1")
    assert kinds(d.run(anthropic_turn(SAVE), conversation_id="c2", approvals=[token])) == ["approval_required"]
    assert world.effects.count() == 0


def test_forged_tokens_are_refused(world):
    """Tokens with an edited field, a made-up signature, or another dispatcher's secret are refused."""
    d = Dispatcher(world.registry(), policy=needs_approval_for_writes)
    turn = anthropic_turn(SAVE)
    token = _approved_token(d, turn)
    other = Dispatcher(world.registry(), policy=needs_approval_for_writes)
    forged = [
        msgspec.structs.replace(token, approver="mallory"),
        msgspec.structs.replace(token, signature="0" * 64),
        msgspec.structs.replace(token, signature=""),
        _approved_token(other, turn),
    ]
    for bad in forged:
        with capture_logs() as logs:
            assert kinds(d.run(turn, conversation_id="c", approvals=[bad])) == ["approval_required"]
        assert any(e.get("reason") == "bad_signature" for e in logs)
    assert world.effects.count() == 0


def test_request_is_not_an_approval(world):
    """The signed request itself, passed as an approval, approves nothing."""
    d = Dispatcher(world.registry(), policy=needs_approval_for_writes)
    turn = anthropic_turn(SAVE)
    req = d.run(turn, conversation_id="c")[0].approval
    assert kinds(d.run(turn, conversation_id="c", approvals=[req])) == ["approval_required"]
    as_token = Approval(conversation_id=req.conversation_id, call_id=req.call_id, local_id=req.local_id,
                        name=req.name, args_sha256=req.args_sha256, approver="x", issued_at=0.0,
                        signature=req.signature)
    assert kinds(d.run(turn, conversation_id="c", approvals=[as_token])) == ["approval_required"]
    assert world.effects.count() == 0


def test_approve_refuses_forged_requests(world):
    """approve() only signs requests this dispatcher issued, unaltered."""
    d = Dispatcher(world.registry(), policy=needs_approval_for_writes)
    req = d.run(anthropic_turn(SAVE), conversation_id="c")[0].approval
    with pytest.raises(ApprovalError) as info:
        d.approve(msgspec.structs.replace(req, call_id="toolu_other"), approver="ana")
    assert info.value.reason == "bad_signature"
    with pytest.raises(ApprovalError) as info:
        d.approve(msgspec.structs.replace(req, arguments={"kind": "weight", "value": 700, "unit": "kg"}),
                  approver="ana")
    assert info.value.reason == "arguments_mismatch"
    with pytest.raises(ApprovalError):
        d.approve({"call_id": "toolu_3"}, approver="ana")


def test_shared_secret_approves_across_dispatchers(world):
    """Two dispatchers with one approval secret (two workers) accept each other's tokens."""
    secret = b"s" * 32
    a = Dispatcher(world.registry(), policy=needs_approval_for_writes, approval_secret=secret)
    b = Dispatcher(world.registry(), policy=needs_approval_for_writes, approval_secret=secret)
    token = _approved_token(a, anthropic_turn(SAVE))
    assert kinds(b.run(anthropic_turn(SAVE), conversation_id="c", approvals=[token])) == ["ok"]


def test_denied_beats_approval(world):
    """A valid approval does not override a policy that denies."""
    flag = {"deny": False}

    def policy(call, ctx):
        return "deny" if flag["deny"] else "needs_approval"

    d = Dispatcher(world.registry(), policy=policy)
    token = _approved_token(d, anthropic_turn(SAVE))
    flag["deny"] = True
    assert kinds(d.run(anthropic_turn(SAVE), conversation_id="c", approvals=[token])) == ["denied"]


# ---- effects: the ledger -------------------------------------------------------------------------------------------


def test_same_write_dispatched_twice_has_one_effect(world, tmp_path):
    """Dispatching one write twice (even from a new dispatcher on the same SQLite file) runs it once."""
    path = tmp_path / "ledger.db"
    first = Dispatcher(world.registry(), ledger=SQLiteLedger(path)).run(anthropic_turn(ADD), conversation_id="c")
    second = Dispatcher(world.registry(), ledger=SQLiteLedger(path)).run(anthropic_turn(ADD), conversation_id="c")
    assert kinds(first) == kinds(second) == ["ok"]
    assert second[0].content == first[0].content == {"entry_id": 1, "meal": "lunch", "food": "arroz",
                                                      "grams": 150.0}
    assert world.effects.count() == 1 and world.calls == {"add_food_to_meal": 1}


def test_default_ledger_dedupes_within_one_dispatcher(world):
    """Without an explicit ledger a dispatcher still runs a given write once."""
    d = Dispatcher(world.registry())
    d.run(anthropic_turn(SAVE), conversation_id="c")
    d.run(anthropic_turn(SAVE), conversation_id="c")
    assert world.effects.count() == 1
    d.run(anthropic_turn(SAVE), conversation_id="other")
    assert world.effects.count() == 2


def test_started_without_completion_is_outcome_unknown(world):
    """A key found started (a crash mid-write elsewhere) answers outcome_unknown and runs nothing."""
    ledger = MemoryLedger()
    from toolwire.registry import LedgerKey, arguments_sha256
    call = anthropic_turn(SAVE).calls[0]
    ledger.claim(LedgerKey.for_call("c", call, arguments_sha256(call.args), turn="response:msg_1"))
    results = Dispatcher(world.registry(), ledger=ledger).run(anthropic_turn(SAVE), conversation_id="c")
    assert kinds(results) == ["outcome_unknown"] and results[0].is_error
    assert world.calls == {}


def test_reused_call_id_with_other_arguments_in_a_later_turn_runs(world):
    """A call id reused by a later turn for different arguments is a new call: it runs, it is not refused."""
    d = Dispatcher(world.registry())
    d.run(anthropic_turn(SAVE), conversation_id="c")
    other = anthropic_turn(("toolu_3", "save_measurement", '{"kind": "height", "value": 170, "unit": "cm"}'),
                           message_id="msg_2")
    results = d.run(other, conversation_id="c")
    assert kinds(results) == ["ok"]
    assert world.effects.count() == 2


def test_ledger_key_held_by_another_tool_runs_nothing(world):
    """A ledger key whose record belongs to another tool is not answered with that tool's result."""
    ledger = MemoryLedger()
    from toolwire.registry import LedgerKey, arguments_sha256
    call = anthropic_turn(SAVE).calls[0]
    ledger.claim(LedgerKey.for_call("c", call, arguments_sha256(call.args), turn="response:msg_1"),
                 "another_tool:" + arguments_sha256(call.args))
    with capture_logs() as logs:
        results = Dispatcher(world.registry(), ledger=ledger).run(anthropic_turn(SAVE), conversation_id="c")
    assert kinds(results) == ["not_run"]
    assert world.effects.count() == 0
    assert any(e["event"] == "dispatch.ledger_conflict" for e in logs)


def test_write_failure_is_outcome_unknown_and_never_rerun(world):
    """A write whose handler raises may have taken effect first: outcome_unknown; dispatching it again runs
    nothing and says the same."""
    attempts = []

    def save_measurement(kind: str, value: float, unit: str) -> str:
        attempts.append(1)
        raise ConnectionError("diary down")

    reg = Registry([Tool.from_function(save_measurement, effect="write")])
    d = Dispatcher(reg, read_retries=5, backoff=0)
    assert kinds(d.run(anthropic_turn(SAVE), conversation_id="c")) == ["outcome_unknown"]
    second = d.run(anthropic_turn(SAVE), conversation_id="c")
    assert kinds(second) == ["outcome_unknown"] and "ConnectionError" in second[0].content
    assert len(attempts) == 1


def test_ledger_unavailable_runs_no_write(world):
    """When the ledger cannot claim, the write is not started; it is answered outcome_unknown, since whether it
    ran in an earlier dispatch cannot be checked."""
    class Broken(MemoryLedger):
        def claim(self, key, fingerprint=""):
            raise toolwire.LedgerError("disk full")

    results = Dispatcher(world.registry(), ledger=Broken()).run(anthropic_turn(LOOKUP, SAVE), conversation_id="c")
    assert kinds(results) == ["ok", "outcome_unknown"] and world.effects.count() == 0


# ---- reads: retries, not found vs could not look, concurrency ------------------------------------------------------


def test_read_retried_then_succeeds(toolwire_debug):
    """A read whose handler fails twice then answers is ok after three attempts."""
    attempts = []

    def lookup_demo_value(key: str) -> str:
        attempts.append(key)
        if len(attempts) < 3:
            raise TimeoutError("flaky")
        return "170 cm"

    d = Dispatcher(Registry([Tool.from_function(lookup_demo_value, effect="read")]), read_retries=2, backoff=0)
    with capture_logs() as logs:
        results = d.run(anthropic_turn(LOOKUP), conversation_id="c")
    assert kinds(results) == ["ok"] and results[0].content == "170 cm"
    assert len(attempts) == 3
    assert [e["event"] for e in logs].count("dispatch.retry") == 2


def test_read_retries_exhausted_is_handler_failed(world):
    """A read that keeps failing is handler_failed after 1 + read_retries attempts, with backoff between."""
    world.store_up = False
    delays = []
    d = Dispatcher(world.registry(), read_retries=3, backoff=lambda n: delays.append(n) or 0)
    results = d.run(anthropic_turn(LOOKUP), conversation_id="c")
    assert kinds(results) == ["handler_failed"]
    assert "StoreUnavailable" in results[0].content
    assert world.calls == {"lookup_demo_value": 4} and delays == [0, 1, 2]


def test_backoff_grows_and_is_capped():
    """The default backoff doubles per retry and stops at 8 seconds."""
    d = Dispatcher(Registry([]), backoff=0.5)
    assert [d._delay(n) for n in range(6)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]


def test_not_found_differs_from_could_not_look(world):
    """An unknown key is an ok 'not found'; a store that is down is handler_failed; nothing is invented."""
    d = Dispatcher(world.registry(), backoff=0)
    found, missing, no_food = d.run(anthropic_turn(LOOKUP, ("toolu_2", "lookup_demo_value", '{"key": "bmi"}'),
                                                   ("toolu_3", "search_foods", '{"query": "pizza"}')),
                                    conversation_id="c")
    assert (found.kind, found.content["value"]) == (K.OK, "170 cm")
    assert (missing.kind, missing.content) == (K.OK, {"found": False, "key": "bmi"})
    assert (no_food.kind, no_food.content) == (K.OK, [])
    world.store_up = world.catalogue_up = False
    down, cat_down = d.run(anthropic_turn(LOOKUP, SEARCH, message_id="msg_2"), conversation_id="c")
    assert down.kind is K.HANDLER_FAILED and "StoreUnavailable" in down.content
    assert cat_down.kind is K.HANDLER_FAILED and "CatalogueUnavailable" in cat_down.content


def _sleepy_registry(order: list[str]) -> Registry:
    def make(name: str, delay: float):
        def handler(args):
            time.sleep(delay)
            order.append(name)
            return name
        return Tool.from_schema(name, {"type": "object"}, handler, effect="read")
    return Registry([make("slow", 0.3), make("medium", 0.15), make("fast", 0.0)])


def test_concurrent_reads_come_back_in_call_order():
    """Reads run in parallel (faster than in sequence) yet results follow call order, not completion order."""
    order: list[str] = []
    turn = anthropic_turn(("a", "slow", "{}"), ("b", "medium", "{}"), ("c", "fast", "{}"))
    start = time.perf_counter()
    results = Dispatcher(_sleepy_registry(order)).run(turn, conversation_id="c")
    elapsed = time.perf_counter() - start
    assert [r.content for r in results] == ["slow", "medium", "fast"]
    assert order == ["fast", "medium", "slow"]  # in parallel: run in sequence, "slow" would end first
    assert elapsed < 0.45 * 20  # and not stuck (generous: the machine may be busy)


def test_concurrent_reads_can_be_turned_off():
    """concurrent_reads=False runs reads one after another in call order."""
    order: list[str] = []
    turn = anthropic_turn(("a", "slow", "{}"), ("b", "medium", "{}"), ("c", "fast", "{}"))
    results = Dispatcher(_sleepy_registry(order), concurrent_reads=False).run(turn, conversation_id="c")
    assert order == ["slow", "medium", "fast"] == [r.content for r in results]


def test_a_write_in_the_turn_makes_execution_sequential(world):
    """When a write is among the calls to run, calls run one by one in call order."""
    running = []
    threads = set()

    def lookup_demo_value(key: str) -> str:
        running.append(key)
        threads.add(threading.get_ident())
        return key

    def save_measurement(kind: str, value: float, unit: str) -> str:
        running.append("save")
        return "saved"

    reg = Registry([Tool.from_function(lookup_demo_value, effect="read", timeout=None),
                    Tool.from_function(save_measurement, effect="write", timeout=None)])
    turn = anthropic_turn(("a", "lookup_demo_value", '{"key": "1"}'), SAVE, ("b", "lookup_demo_value", '{"key": "2"}'))
    assert kinds(Dispatcher(reg).run(turn, conversation_id="c")) == ["ok"] * 3
    assert running == ["1", "save", "2"] and threads == {threading.get_ident()}


# ---- timeouts ------------------------------------------------------------------------------------------------------


def test_read_timeout_is_handler_timeout():
    """A read that does not return within its timeout is handler_timeout (not retried)."""
    calls = []

    release = threading.Event()

    def lookup_demo_value(key: str) -> str:
        calls.append(key)
        release.wait(60)
        return "late"

    d = Dispatcher(Registry([Tool.from_function(lookup_demo_value, effect="read", timeout=0.1)]), backoff=0)
    start = time.perf_counter()
    results = d.run(anthropic_turn(LOOKUP), conversation_id="c")
    assert kinds(results) == ["handler_timeout"] and "0.1 s" in results[0].content
    release.set()
    assert time.perf_counter() - start < 30 and len(calls) == 1  # the timeout ended it, not the handler's 60 s


def test_write_timeout_is_outcome_unknown_and_not_rerun(tmp_path):
    """A write that times out is outcome_unknown; dispatching it again runs nothing."""
    calls = []

    def save_measurement(kind: str, value: float, unit: str) -> str:
        calls.append(kind)
        time.sleep(0.6)
        return "saved"

    d = Dispatcher(Registry([Tool.from_function(save_measurement, effect="write", timeout=0.1)]),
                   ledger=SQLiteLedger(tmp_path / "l.db"))
    assert kinds(d.run(anthropic_turn(SAVE), conversation_id="c")) == ["outcome_unknown"]
    assert kinds(d.run(anthropic_turn(SAVE), conversation_id="c")) == ["outcome_unknown"]
    assert calls == ["weight"]


def test_async_handler_under_sync_run():
    """run() drives async handlers (on a private loop) with their timeout."""
    async def lookup_demo_value(key: str) -> str:
        await asyncio.sleep(0.01)
        return key.upper()

    async def slow(key: str) -> str:
        await asyncio.sleep(2)
        return key

    reg = Registry([Tool.from_function(lookup_demo_value, effect="read"),
                    Tool.from_function(slow, effect="read", timeout=0.1)])
    results = Dispatcher(reg).run(anthropic_turn(LOOKUP, ("x", "slow", '{"key": "a"}')), conversation_id="c")
    assert kinds(results) == ["ok", "handler_timeout"] and results[0].content == "HEIGHT"


# ---- async twin ----------------------------------------------------------------------------------------------------


def test_arun_matches_run(world):
    """arun gives the same results as run for a mixed turn of sync handlers."""
    turn = anthropic_turn(LOOKUP, SEARCH, ("x", "nope", "{}"), SAVE)
    expected = Dispatcher(DemoWorld().registry()).run(turn, conversation_id="c")
    got = asyncio.run(Dispatcher(world.registry()).arun(turn, conversation_id="c"))
    assert got == expected
    assert world.effects.count() == 1


def test_arun_gathers_async_reads_in_call_order():
    """Async reads are gathered concurrently; results follow call order."""
    order: list[str] = []

    def make(name: str, delay: float) -> Tool:
        async def handler(args):
            await asyncio.sleep(delay)
            order.append(name)
            return name
        return Tool.from_schema(name, {"type": "object"}, handler, effect="read")

    reg = Registry([make("slow", 0.3), make("medium", 0.15), make("fast", 0.0)])
    turn = anthropic_turn(("a", "slow", "{}"), ("b", "medium", "{}"), ("c", "fast", "{}"))
    start = time.perf_counter()
    results = asyncio.run(Dispatcher(reg).arun(turn, conversation_id="c"))
    assert [r.content for r in results] == ["slow", "medium", "fast"]
    assert order == ["fast", "medium", "slow"] and time.perf_counter() - start < 0.42


def test_arun_timeouts_retries_and_writes(tmp_path):
    """arun: async timeout → handler_timeout, sync timeout → handler_timeout, retries, one write effect."""
    attempts = []
    effects = []

    async def flaky(key: str) -> str:
        attempts.append(key)
        if len(attempts) < 2:
            raise OSError("flaky")
        return "ok"

    async def hang(key: str) -> str:
        await asyncio.sleep(60)
        return key

    release = threading.Event()

    def sync_hang(key: str) -> str:
        release.wait(60)
        return key

    async def save_measurement(kind: str, value: float, unit: str) -> str:
        effects.append(value)
        return "saved"

    reg = Registry([Tool.from_function(flaky, effect="read"), Tool.from_function(hang, effect="read", timeout=0.1),
                    Tool.from_function(sync_hang, effect="read", timeout=0.1),
                    Tool.from_function(save_measurement, effect="write")])
    d = Dispatcher(reg, ledger=SQLiteLedger(tmp_path / "l.db"), backoff=0)
    turn = anthropic_turn(("a", "flaky", '{"key": "k"}'), ("b", "hang", '{"key": "k"}'),
                          ("c", "sync_hang", '{"key": "k"}'), SAVE)
    start = time.perf_counter()
    results = asyncio.run(d.arun(turn, conversation_id="c"))
    release.set()
    assert kinds(results) == ["ok", "handler_timeout", "handler_timeout", "ok"]
    assert time.perf_counter() - start < 30  # the timeouts ended the hangs (60 s), generous on a busy machine
    again = asyncio.run(d.arun(anthropic_turn(SAVE), conversation_id="c"))
    assert kinds(again) == ["ok"] and effects == [70.0]


def test_arun_refuses_unclean_turns_and_needs_approval(world):
    """arun applies the same rules: an unclean turn runs nothing; approval is required and verified."""
    d = Dispatcher(world.registry(), policy=needs_approval_for_writes)
    cut = anthropic_turn(LOOKUP, stop_reason="max_tokens")
    assert kinds(asyncio.run(d.arun(cut, conversation_id="c"))) == ["not_run"]
    [res] = asyncio.run(d.arun(anthropic_turn(SAVE), conversation_id="c"))
    assert res.kind is K.APPROVAL_REQUIRED
    token = d.approve(res.approval, approver="ana")
    assert kinds(asyncio.run(d.arun(anthropic_turn(SAVE), conversation_id="c", approvals=[token]))) == ["ok"]
    assert world.effects.count() == 1 and world.calls == {"save_measurement": 1}


# ---- logging -------------------------------------------------------------------------------------------------------


def test_events_are_emitted_without_argument_values_at_info(world, toolwire_debug):
    """dispatch.* events are emitted; info-and-above events carry no argument values."""
    turn = anthropic_turn(("toolu_1", "lookup_demo_value", '{"key": "secret-key-123"}'),
                          ("toolu_2", "save_measurement", '{"kind": "weight", "value": "x9876", "unit": "kg"}'),
                          ("toolu_3", "nope", '{"pin": "4242"}'))
    with capture_logs() as logs:
        Dispatcher(world.registry()).run(turn, conversation_id="c")
    events = [e["event"] for e in logs]
    assert events.count("dispatch.result") == 3
    assert {"dispatch.unknown_tool", "dispatch.invalid_arguments"} <= set(events)
    for e in logs:
        if e["log_level"] in ("info", "warning", "error"):
            text = repr(e)
            assert "secret-key-123" not in text and "x9876" not in text and "4242" not in text
    inv = next(e for e in logs if e["event"] == "dispatch.invalid_arguments")
    assert inv["path"] == "$.value" and inv["log_level"] == "info"
