"""Exactly once, for real: every write call instance has one effect, only the chosen whole calls of a clean turn
run, answered calls are never run again, approvals are single-use, bound to their call instance, and expire.

Every test goes through the public API (``toolwire.parse`` and ``Dispatcher.run`` / ``arun``) for every dialect.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3

import msgspec
import pytest
from structlog.testing import capture_logs

import toolwire
from toolwire import (
    CallState,
    Decision,
    Dispatcher,
    InvalidTransition,
    LedgerKey,
    MemoryLedger,
    Registry,
    ResultKind,
    SQLiteLedger,
    Tool,
    ToolDeclarationError,
    UsageError,
)
from toolwire.registry import arguments_sha256

from ..bodies import PROVIDERS, body, identified

K = ResultKind
MODES = ("sync", "async")


class Diary:
    """A tiny application: one write (``add_item``) and one read (``count_items``), counting effects and runs."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self.reads = 0

    def tools(self, *, key=None) -> list[Tool]:
        def add_item(item: str) -> dict:
            """Add an item to the list."""
            self.items.append(item)
            return {"added": item, "count": len(self.items)}

        def count_items(item: str) -> int:
            """Count an item."""
            self.reads += 1
            return self.items.count(item)

        return [Tool.from_function(add_item, effect="write", idempotency_key=key),
                Tool.from_function(count_items, effect="read")]

    def registry(self, **kw) -> Registry:
        return Registry(self.tools(**kw))


def dispatch(mode: str, d: Dispatcher, turn: toolwire.Turn, **kw) -> list[toolwire.ToolResult]:
    if mode == "sync":
        return d.run(turn, **kw)
    return asyncio.run(d.arun(turn, **kw))


def add(provider: str, item: str = "apple", *, call_id: str | None = "call_1", response_id: str | None = "resp_1"):
    return toolwire.parse(provider, body(provider, [(call_id, "add_item", {"item": item})], response_id=response_id))


def ledger_rows(path) -> list[tuple]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT call_key, status FROM toolwire_ledger ORDER BY call_key").fetchall()


# ---- writes: one effect per call instance ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_identical_write_in_a_later_turn_runs_again(provider, mode, tmp_path):
    """Two turns that each ask for the same write (no call ids, no response ids) give two effects, not one."""
    diary = Diary()
    d = Dispatcher(diary.registry(), ledger=SQLiteLedger(tmp_path / "l.db"))
    first = dispatch(mode, d, add(provider, call_id=None, response_id=None), conversation_id="c")
    second = dispatch(mode, d, add(provider, call_id=None, response_id=None), conversation_id="c")
    assert [r.kind for r in first + second] == [K.OK, K.OK]
    assert diary.items == ["apple", "apple"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_later_turns_reusing_call_ids_are_new_instances(provider, mode, tmp_path):
    """Turns with their own response ids that reuse `call_0` (and the same arguments) each run once."""
    diary = Diary()
    d = Dispatcher(diary.registry(), ledger=SQLiteLedger(tmp_path / "l.db"))
    for n in range(3):
        [r] = dispatch(mode, d, add(provider, call_id="call_0", response_id=f"resp_{n}"), conversation_id="c")
        assert r.kind is K.OK
    assert diary.items == ["apple"] * 3


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_turn_id_separates_turns_without_response_ids(provider, mode, tmp_path):
    """Without a response id, the caller's turn_id identifies the turn: a new one runs, the same one does not."""
    diary = Diary()
    d = Dispatcher(diary.registry(), ledger=SQLiteLedger(tmp_path / "l.db"))
    kw = {"call_id": None, "response_id": None}
    assert dispatch(mode, d, add(provider, **kw), conversation_id="c", turn_id="3")[0].kind is K.OK
    assert dispatch(mode, d, add(provider, **kw), conversation_id="c", turn_id="4")[0].kind is K.OK
    again = dispatch(mode, d, add(provider, **kw), conversation_id="c", turn_id="4")
    assert again[0].kind is K.OK and again[0].content == {"added": "apple", "count": 2}
    assert diary.items == ["apple", "apple"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("identity", ["response_id", "turn_id"])
def test_restarted_process_redispatching_the_same_bytes_finds_its_record(provider, mode, identity, tmp_path):
    """A new dispatcher (a restarted process) that parses and dispatches the same response again runs nothing."""
    diary, path = Diary(), tmp_path / "l.db"
    rid, kw = ("resp_9", identified(provider, "resp_9")) if identity == "response_id" \
        else (None, {"turn_id": "step-2"})
    data = body(provider, [(None, "add_item", {"item": "pear"})], response_id=rid)
    [first] = dispatch(mode, Dispatcher(diary.registry(), ledger=SQLiteLedger(path)), toolwire.parse(provider, data),
                       conversation_id="c", **kw)
    [again] = dispatch(mode, Dispatcher(diary.registry(), ledger=SQLiteLedger(path)), toolwire.parse(provider, data),
                       conversation_id="c", **kw)
    assert first.kind is again.kind is K.OK and again.content == first.content
    assert diary.items == ["pear"]
    assert [status for _, status in ledger_rows(path)] == ["completed"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", ["openai-chat", "anthropic", "openai-responses"])
def test_reused_call_id_with_other_arguments_in_another_turn_is_not_refused(provider, mode):
    """A call id reused by a later turn for other arguments runs: it is another call, not a conflict."""
    diary = Diary()
    d = Dispatcher(diary.registry())
    dispatch(mode, d, add(provider, "apple", call_id="call_0", response_id="r1"), conversation_id="c")
    [r] = dispatch(mode, d, add(provider, "pear", call_id="call_0", response_id="r2"), conversation_id="c")
    assert r.kind is K.OK and diary.items == ["apple", "pear"]


class CrashingLedger(MemoryLedger):
    """A ledger whose completion never lands: what a process killed after the effect leaves behind."""

    def complete(self, key, result):  # noqa: ARG002 - the record stays `started`
        raise toolwire.LedgerError("the process died before recording the result")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_replanned_write_with_idempotency_key_runs_nothing_after_a_crash(provider, mode):
    """After a crash between effect and completion, the same write re-planned under a new id is outcome_unknown."""
    diary = Diary()
    ledger = CrashingLedger()
    d = Dispatcher(diary.registry(key=lambda args: args["item"]), ledger=ledger)
    [first] = dispatch(mode, d, add(provider, call_id="call_a", response_id="r1"), conversation_id="c")
    assert first.kind is K.OK
    [replanned] = dispatch(mode, Dispatcher(diary.registry(key=lambda args: args["item"]), ledger=ledger),
                           add(provider, call_id="call_b", response_id="r2"), conversation_id="c")
    assert replanned.kind is K.OUTCOME_UNKNOWN and replanned.is_error
    assert diary.items == ["apple"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_replanned_write_with_idempotency_key_gets_the_stored_result(provider, mode, tmp_path):
    """A completed write re-planned under a new call id is answered with its stored result; nothing runs."""
    diary = Diary()
    d = Dispatcher(diary.registry(key=lambda args: "day-1:" + args["item"]), ledger=SQLiteLedger(tmp_path / "l"))
    dispatch(mode, d, add(provider, call_id="call_a", response_id="r1"), conversation_id="c")
    [again] = dispatch(mode, d, add(provider, call_id="call_b", response_id="r2"), conversation_id="c")
    assert again.kind is K.OK and again.content == {"added": "apple", "count": 1}
    assert again.call_id == "call_b"
    assert diary.items == ["apple"]
    # another conversation has its own keys
    dispatch(mode, d, add(provider, call_id="call_c", response_id="r3"), conversation_id="other")
    assert diary.items == ["apple", "apple"]


@pytest.mark.parametrize("mode", MODES)
def test_replanned_write_without_idempotency_key_runs_again(mode):
    """Without an idempotency_key, a write re-planned under a new id is a new instance (documented)."""
    diary = Diary()
    ledger = CrashingLedger()
    dispatch(mode, Dispatcher(diary.registry(), ledger=ledger), add("anthropic", call_id="a", response_id="r1"),
             conversation_id="c")
    dispatch(mode, Dispatcher(diary.registry(), ledger=ledger), add("anthropic", call_id="b", response_id="r2"),
             conversation_id="c")
    assert diary.items == ["apple", "apple"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("bad", [lambda args: 1 / 0, lambda args: 5, lambda args: ""])
def test_idempotency_key_that_fails_runs_nothing(mode, bad):
    """An idempotency_key function that raises or gives no string: not_run (the handler never started)."""
    diary = Diary()
    with capture_logs() as logs:
        [r] = dispatch(mode, Dispatcher(diary.registry(key=bad)), add("openai-chat"), conversation_id="c")
    assert r.kind is K.NOT_RUN and diary.items == []
    assert any(e["event"] == "dispatch.idempotency_key_error" for e in logs)


def test_idempotency_key_is_for_writes_only():
    """Declaring an idempotency_key on a read (or a key that is not callable) fails at declaration."""
    def look(q: str) -> str:
        return q

    def look_up(args: dict) -> str:
        return args["q"]

    with pytest.raises(ToolDeclarationError):
        Tool.from_function(look, effect="read", idempotency_key=lambda a: "k")
    with pytest.raises(ToolDeclarationError):
        Tool.from_schema("look", {"type": "object"}, look_up, effect="write", idempotency_key="k")
    assert Tool.from_mcp({"name": "look", "inputSchema": {"type": "object"}}, look_up, effect="write",
                         idempotency_key=lambda a: "k").idempotency_key is not None


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("state", [CallState.ANSWERED, CallState.DISPATCHED, CallState.REJECTED])
def test_call_the_table_refuses_leaves_no_ledger_entry_and_runs_nothing(mode, state, tmp_path):
    """A call handed over already dispatched/answered raises InvalidTransition before anything of the turn runs,
    and leaves no `started` ledger entry behind."""
    diary, path = Diary(), tmp_path / "l.db"
    turn = toolwire.parse("anthropic", body("anthropic", [("t1", "add_item", {"item": "a"}),
                                                          ("t2", "add_item", {"item": "b"})]))
    turn.calls[1] = msgspec.structs.replace(turn.calls[1], state=state)
    with capture_logs() as logs, pytest.raises(InvalidTransition):
        dispatch(mode, Dispatcher(diary.registry(), ledger=SQLiteLedger(path)), turn, conversation_id="c")
    assert diary.items == [] and ledger_rows(path) == []
    assert any(e["event"] == "call.invalid_transition" for e in logs)
    # the untouched turn still runs both, once
    fresh = toolwire.parse("anthropic", body("anthropic", [("t1", "add_item", {"item": "a"}),
                                                           ("t2", "add_item", {"item": "b"})]))
    dispatch(mode, Dispatcher(diary.registry(), ledger=SQLiteLedger(path)), fresh, conversation_id="c")
    assert diary.items == ["a", "b"]


class SelfRef:
    def __str__(self) -> str:
        raise RuntimeError("no text either")


def _loop() -> dict:
    d: dict = {}
    d["self"] = d
    return d


UNSTORABLE = {"contains_itself": _loop, "huge_int": lambda: 10 ** 5000, "str_raises": SelfRef,
              "lone_surrogate": lambda: {"text": "\ud800"}}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("what", sorted(UNSTORABLE))
def test_results_that_cannot_be_stored_are_typed_and_complete_the_ledger(mode, what, tmp_path):
    """A write whose return value cannot be encoded gets a typed, encodable result and a completed ledger
    entry; dispatching it again replays that result and runs nothing."""
    effects: list[int] = []
    make = UNSTORABLE[what]

    def save(n: int):
        effects.append(n)
        return make()

    path = tmp_path / "l.db"
    reg = Registry([Tool.from_function(save, effect="write")])
    data = body("openai-chat", [("call_1", "save", {"n": 1})])
    [r] = dispatch(mode, Dispatcher(reg, ledger=SQLiteLedger(path)), toolwire.parse("openai-chat", data),
                   conversation_id="c")
    assert r.kind in (K.OK, K.RESULT_UNUSABLE)
    if r.kind is K.RESULT_UNUSABLE:
        assert r.is_error and "took effect" in r.content
    msgspec.json.encode(r)  # always storable and sendable
    toolwire.encode_results(toolwire.parse("openai-chat", data), [r])
    assert [status for _, status in ledger_rows(path)] == ["completed"]
    [again] = dispatch(mode, Dispatcher(reg, ledger=SQLiteLedger(path)), toolwire.parse("openai-chat", data),
                       conversation_id="c")
    assert again.kind is r.kind and effects == [1]


@pytest.mark.parametrize("mode", MODES)
def test_read_with_unusable_result_is_result_unusable(mode):
    """A read whose value cannot be encoded is result_unusable (no invented value)."""
    def look(q: str):
        return SelfRef()

    [r] = dispatch(mode, Dispatcher(Registry([Tool.from_function(look, effect="read")])),
                   toolwire.parse("anthropic", body("anthropic", [("t", "look", {"q": "x"})])), conversation_id="c")
    assert r.kind is K.RESULT_UNUSABLE and "took effect" not in r.content


# ---- answered once ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_same_turn_dispatched_twice_runs_nothing_twice(provider, mode, toolwire_debug):
    """Dispatching a Turn again answers every call from the dispatcher's record: reads and writes run once."""
    diary = Diary()
    d = Dispatcher(diary.registry())
    for rid in ("r1", None):
        data = body(provider, [(None, "add_item", {"item": "kiwi"}), (None, "count_items", {"item": "kiwi"})],
                    response_id=rid)
        turn = toolwire.parse(provider, data)
        first = dispatch(mode, d, turn, conversation_id=f"c-{rid}")
        with capture_logs() as logs:
            second = dispatch(mode, d, turn, conversation_id=f"c-{rid}")
        assert [(r.kind, r.content) for r in first] == [(r.kind, r.content) for r in second]
        assert [e["event"] for e in logs].count("dispatch.answered_before") == 2
        assert second[0].states[-2:] == ["dispatched", "answered"]
    assert diary.items == ["kiwi", "kiwi"] and diary.reads == 2


# ---- several choices -------------------------------------------------------------------------------------------


def two_choices(provider: str, second_finish: str | None = None) -> toolwire.Turn:
    if provider == "openai-chat":
        def choice(i, item, finish):
            return {"index": i, "finish_reason": finish, "message": {"role": "assistant", "content": None,
                    "tool_calls": [{"id": f"call_{i}", "type": "function",
                                    "function": {"name": "add_item", "arguments": json.dumps({"item": item})}}]}}
        data = {"id": "chatcmpl-1", "object": "chat.completion", "model": "m",
                "choices": [choice(0, "apple", "tool_calls"), choice(1, "pear", second_finish or "tool_calls")]}
    else:
        def cand(i, item, finish):
            return {"index": i, "finishReason": finish, "content": {"role": "model", "parts": [
                {"functionCall": {"name": "add_item", "args": {"item": item}}}]}}
        data = {"responseId": "g1", "candidates": [cand(0, "apple", "STOP"), cand(1, "pear", second_finish or "STOP")]}
    return toolwire.parse(provider, json.dumps(data))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", ["openai-chat", "gemini"])
def test_only_the_chosen_choice_is_dispatched(provider, mode):
    """Of two alternative completions only one runs: choice 0 by default, or the one the caller picks."""
    diary = Diary()
    d = Dispatcher(diary.registry())
    results = dispatch(mode, d, two_choices(provider), conversation_id="c")
    assert [(r.kind, r.local_id) for r in results] == [(K.OK, two_choices(provider).choice_calls(0)[0].local_id)]
    assert diary.items == ["apple"]
    results = dispatch(mode, d, two_choices(provider), conversation_id="c2", choice=1)
    assert len(results) == 1 and results[0].kind is K.OK and diary.items == ["apple", "pear"]
    with pytest.raises(UsageError):
        dispatch(mode, d, two_choices(provider), conversation_id="c3", choice=5)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider,bad", [("openai-chat", "length"), ("openai-chat", "content_filter"),
                                          ("gemini", "SAFETY"), ("gemini", "MALFORMED_FUNCTION_CALL")])
def test_a_chosen_choice_that_did_not_end_cleanly_runs_nothing(provider, bad, mode):
    """A candidate that ended with SAFETY, MALFORMED_FUNCTION_CALL, length … is never dispatched."""
    diary = Diary()
    turn = two_choices(provider, bad)
    assert turn.choice_finished_cleanly(0) and not turn.choice_finished_cleanly(1)
    [r] = dispatch(mode, Dispatcher(diary.registry()), turn, conversation_id="c", choice=1)
    assert r.kind is K.NOT_RUN and diary.items == []


# ---- custom tools ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", ["openai-responses", "openai-chat"])
def test_custom_tool_receives_the_text_and_runs(provider, mode):
    """A free-text custom call runs its Tool.custom handler with the text, once."""
    seen: list[str] = []

    def run_sql(text: str) -> str:
        seen.append(text)
        return "3 rows"

    tool = Tool.custom("run_sql", run_sql, effect="write",
                       format={"type": "grammar", "syntax": "regex", "definition": "SELECT .*"})
    turn = toolwire.parse(provider, body(provider, [("call_1", "run_sql", "SELECT 1")], custom=True))
    assert turn.calls[0].kind is toolwire.CallKind.CUSTOM and turn.runnable_calls
    [r] = dispatch(mode, Dispatcher(Registry([tool])), turn, conversation_id="c")
    assert (r.kind, r.content, seen) == (K.OK, "3 rows", ["SELECT 1"])


@pytest.mark.parametrize("mode", MODES)
def test_function_call_to_a_custom_tool_is_invalid_arguments(mode):
    """A JSON-argument call naming a custom tool is answered invalid_arguments; nothing runs."""
    tool = Tool.custom("run_sql", lambda text: "never", effect="read")
    turn = toolwire.parse("anthropic", body("anthropic", [("t", "run_sql", {"q": 1})]))
    [r] = dispatch(mode, Dispatcher(Registry([tool])), turn, conversation_id="c")
    assert r.kind is K.INVALID_ARGUMENTS and "text" in r.content


def test_custom_tool_format_is_checked_at_declaration():
    """A custom tool format that is neither text nor a lark/regex grammar fails at declaration."""
    for bad in ({"type": "json"}, {"type": "grammar", "syntax": "ebnf", "definition": "x"},
                {"type": "grammar", "syntax": "lark", "definition": ""}, "regex"):
        with pytest.raises(ToolDeclarationError):
            Tool.custom("t", lambda text: text, effect="read", format=bad)
    assert Tool.custom("t", lambda text: text, effect="read").kind == "custom"


# ---- approvals -------------------------------------------------------------------------------------------------


def ask(call, ctx):
    return Decision.needs_approval("changes the list") if ctx.tool.effect == "write" else Decision.needs_approval()


SECRET = b"0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_approval_is_single_use_across_processes(provider, mode, tmp_path):
    """An approval runs its call once; the same token presented again (here: another process sharing the ledger)
    runs nothing more."""
    diary, path = Diary(), tmp_path / "l.db"

    def dispatcher():
        return Dispatcher(diary.registry(), ledger=SQLiteLedger(path), policy=ask, approval_secret=SECRET)

    data = body(provider, [("c1", "add_item", {"item": "fig"}), ("c2", "count_items", {"item": "fig"})])
    kw = identified(provider, "resp_1")
    pending = dispatch(mode, dispatcher(), toolwire.parse(provider, data), conversation_id="c", **kw)
    assert [r.kind for r in pending] == [K.APPROVAL_REQUIRED] * 2
    tokens = [dispatcher().approve(r.approval, approver="ana") for r in pending]
    ran = dispatch(mode, dispatcher(), toolwire.parse(provider, data), conversation_id="c", approvals=tokens, **kw)
    assert [r.kind for r in ran] == [K.OK, K.OK]
    again = dispatch(mode, dispatcher(), toolwire.parse(provider, data), conversation_id="c", approvals=tokens,
                     **kw)
    # the write is answered from its ledger record; the read's approval is used up
    assert [r.kind for r in again] == [K.OK, K.APPROVAL_REQUIRED]
    assert diary.items == ["fig"] and diary.reads == 1


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_approval_does_not_approve_a_later_turns_identical_call(provider, mode):
    """An approval for an id-less call binds to its turn, not to `tw-0` and the arguments."""
    diary = Diary()
    d = Dispatcher(diary.registry(), policy=ask)
    first = add(provider, call_id=None, response_id=None)
    [pending] = dispatch(mode, d, first, conversation_id="c")
    token = d.approve(pending.approval, approver="ana")
    assert dispatch(mode, d, first, conversation_id="c", approvals=[token])[0].kind is K.OK
    later = add(provider, call_id=None, response_id=None)
    with capture_logs():
        [r] = dispatch(mode, d, later, conversation_id="c", approvals=[token])
    assert r.kind is K.APPROVAL_REQUIRED and diary.items == ["apple"]


@pytest.mark.parametrize("mode", MODES)
def test_expired_approval_asks_again(mode):
    """An approval past approval_ttl is approval_required again; nothing runs."""
    diary = Diary()
    d = Dispatcher(diary.registry(), policy=ask, approval_ttl=1e-9)
    turn = add("gemini")
    [pending] = dispatch(mode, d, turn, conversation_id="c")
    token = d.approve(pending.approval, approver="ana")
    with capture_logs() as logs:
        [r] = dispatch(mode, d, turn, conversation_id="c", approvals=[token])
    assert r.kind is K.APPROVAL_REQUIRED and diary.items == []
    assert any(e.get("reason") == "expired" for e in logs)


def test_approval_ttl_default_and_validation():
    """Approvals expire after fifteen minutes by default; a non-positive ttl is a usage error."""
    d = Dispatcher(Registry([]))
    assert d.approval_ttl == 900.0
    for bad in (0, -1, "10", True):
        with pytest.raises(UsageError):
            Dispatcher(Registry([]), approval_ttl=bad)


@pytest.mark.parametrize("bad", [5, "token", object()])
def test_approvals_that_are_not_iterable_are_a_usage_error(bad):
    """run(..., approvals=5) is a UsageError, not a TypeError."""
    with pytest.raises(UsageError):
        Dispatcher(Diary().registry()).run(add("anthropic"), conversation_id="c", approvals=bad)


# ---- nothing leaked --------------------------------------------------------------------------------------------


def test_invalid_argument_values_are_not_logged_at_debug_without_opt_in(toolwire_debug):
    """At debug level the validator's message (which quotes the values) is not logged unless opted in."""
    reg = Registry([Tool.from_schema("save", {"type": "object", "properties": {"pin": {"type": "integer"}}},
                                     lambda a: a, effect="write")])
    turn = toolwire.parse("anthropic", body("anthropic", [("t", "save", {"pin": "SECRET-4242"})]))
    with capture_logs() as logs:
        [r] = Dispatcher(reg).run(turn, conversation_id="c")
    assert r.kind is K.INVALID_ARGUMENTS
    assert "SECRET-4242" not in repr(logs)



# ---- what handlers and policies do to the arguments, and dispatches running side by side ---------------------


def _mutating_tools(effects: list) -> list[Tool]:
    def charge(args: dict) -> dict:
        args["amount"] *= 100  # a handler that edits its own input
        args.setdefault("currency", "EUR")
        effects.append(dict(args))
        return {"charged": args["amount"]}

    schema = {"type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]}
    return [Tool.from_schema("charge", schema, charge, effect="write")]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_handler_editing_its_arguments_changes_neither_the_key_nor_the_history(provider, mode):
    """A handler that edits the argument dict it received: the same Turn dispatched again runs nothing, and the
    history replays what the model sent."""
    effects: list = []
    d = Dispatcher(Registry(_mutating_tools(effects)))
    turn = toolwire.parse(provider, body(provider, [("c1", "charge", {"amount": 5})]))
    first = dispatch(mode, d, turn, conversation_id="c")
    again = dispatch(mode, d, turn, conversation_id="c")
    assert effects == [{"amount": 500, "currency": "EUR"}]
    assert first[0].content == again[0].content == {"charged": 500}
    assert turn.calls[0].args == {"amount": 5}
    assert "50000" not in json.dumps(toolwire.history_messages(turn, first), default=str)


@pytest.mark.parametrize("mode", MODES)
def test_a_policy_editing_call_args_changes_neither_the_key_nor_what_runs(mode):
    """A policy that tidies `call.args` in place does not turn a second dispatch into a new call."""
    diary = Diary()

    def tidy(call, ctx):
        if call.args is not None:
            call.args["item"] = call.args["item"].upper()
        return "allow"

    d = Dispatcher(diary.registry(), policy=tidy)
    turn = add("anthropic")
    dispatch(mode, d, turn, conversation_id="c")
    dispatch(mode, d, turn, conversation_id="c")
    assert diary.items == ["apple"]


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("response_id", ["r1", None])
def test_eight_threads_dispatching_one_turn_run_each_call_once(provider, response_id, tmp_path):
    """The same Turn dispatched from 8 threads at once (with or without a response id): one effect per write, one
    run per read; every thread gets the same answers."""
    import threading

    diary = Diary()
    slow = threading.Event()

    def count_items(item: str) -> int:
        slow.wait(0.05)
        diary.reads += 1
        return 0

    reg = Registry([diary.tools()[0], Tool.from_function(count_items, effect="read")])
    d = Dispatcher(reg, ledger=SQLiteLedger(tmp_path / "l.db"))
    turn = toolwire.parse(provider, body(provider, [("c1", "add_item", {"item": "x"}),
                                                    ("c2", "count_items", {"item": "x"})], response_id=response_id))
    barrier = threading.Barrier(8)
    out: list = []

    def worker():
        barrier.wait()
        out.append([(r.kind, r.content) for r in d.run(turn, conversation_id="c")])

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(out) == 8 and all(o == out[0] for o in out)
    assert diary.items == ["x"] and diary.reads == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_eight_gathered_aruns_of_one_turn_run_each_call_once(provider):
    """asyncio.gather of 8 arun on the same Turn: each call runs once, every task gets the same answers."""
    diary = Diary()

    async def count_items(item: str) -> int:
        await asyncio.sleep(0.01)
        diary.reads += 1
        return 0

    d = Dispatcher(Registry([diary.tools()[0], Tool.from_function(count_items, effect="read")]))
    turn = toolwire.parse(provider, body(provider, [(None, "add_item", {"item": "x"}),
                                                    (None, "count_items", {"item": "x"})], response_id=None))

    async def go():
        return await asyncio.gather(*(d.arun(turn, conversation_id="c") for _ in range(8)))

    outs = asyncio.run(go())
    assert all([(r.kind, r.content) for r in o] == [(r.kind, r.content) for r in outs[0]] for o in outs)
    assert diary.items == ["x"] and diary.reads == 1


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_nan_and_infinity_in_results_are_sent_as_json(provider, mode):
    """A result holding NaN or infinities is sent as strict JSON (null) in every dialect."""
    def measure(q: str) -> dict:
        return {"value": float("nan"), "hi": float("inf"), "lo": [float("-inf")]}

    turn = toolwire.parse(provider, body(provider, [("c", "measure", {"q": "x"})]))
    results = dispatch(mode, Dispatcher(Registry([Tool.from_function(measure, effect="read")])), turn,
                       conversation_id="c")
    assert results[0].content == {"value": None, "hi": None, "lo": [None]}
    json.dumps(toolwire.history_messages(turn, results), allow_nan=False)
    hand = [toolwire.ToolResult(call_id=r.call_id, local_id=r.local_id, name=r.name, content={"v": float("nan")},
                                is_error=False, kind=K.OK) for r in results]
    json.dumps(toolwire.history_messages(turn, hand), allow_nan=False)


# ---- found by the conversation state machine (tests/test_conversation_machine.py) -------------------------------


def tag_registry(diary: Diary) -> Registry:
    """The diary's tools and a second write, ``add_tag``."""
    def add_tag(item: str) -> dict:
        """Tag an item."""
        diary.items.append("tag:" + item)
        return {"tagged": item}

    return Registry(diary.tools() + [Tool.from_function(add_tag, effect="write")])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_remembered_answer_is_not_given_to_another_tools_call(provider, mode):
    """Two different responses under one response id (a server that reuses ids), each with call `call_1` and the
    same arguments, but for different tools: the second is another call instance (the tool name is part of the
    key), so it runs, in the dispatcher that answered the first and in a restarted one alike."""
    diary = Diary()
    ledger = MemoryLedger()
    d = Dispatcher(tag_registry(diary), ledger=ledger)
    first = toolwire.parse(provider, body(provider, [("call_1", "add_item", {"item": "apple"})], response_id="r1"))
    second = toolwire.parse(provider, body(provider, [("call_1", "add_tag", {"item": "apple"})], response_id="r1"))
    kw = identified(provider, "r1")
    [r1] = dispatch(mode, d, first, conversation_id="c", **kw)
    assert r1.kind is K.OK and r1.content == {"added": "apple", "count": 1}
    [r2] = dispatch(mode, d, second, conversation_id="c", **kw)
    assert r2.kind is K.OK and r2.content == {"tagged": "apple"}
    [again] = dispatch(mode, Dispatcher(tag_registry(diary), ledger=ledger), second, conversation_id="c", **kw)
    assert again.kind is K.OK and again.content == {"tagged": "apple"}
    assert diary.items == ["apple", "tag:apple"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", ["openai-chat", "gemini"])
def test_history_of_a_dispatched_other_choice_answers_its_calls(provider, mode):
    """Dispatching choice 1 of a two-choice response runs its write (`pear`); the history built from those results
    must answer that call (or refuse, with UsageError), not replay choice 0's `apple` call answered "no result was
    recorded; nothing is known to have run" while the result of the write that did run is dropped."""
    diary = Diary()
    turn = two_choices(provider)
    results = dispatch(mode, Dispatcher(diary.registry()), turn, conversation_id="c", choice=1)
    assert [r.kind for r in results] == [K.OK] and diary.items == ["pear"]
    try:
        messages = toolwire.history_messages(turn, results)
    except UsageError:
        return  # refusing is an acceptable answer: the application learns it cannot build this history
    text = json.dumps(messages)
    assert "pear" in text and "apple" not in text
    assert "no result was recorded" not in text
