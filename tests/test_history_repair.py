"""repair_history for all five dialects: table-driven broken histories with the typed report they give, what
history_messages produces needs no repair, and a hypothesis property: any deletion, duplication, move or orphan
of results in a valid history is repaired into a well-formed one (every call exactly one result, in the
provider's order) that fits the official SDK types, and repairing again changes nothing."""

from __future__ import annotations

import copy
import inspect
import json
import os
import sys
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolwire
from toolwire import RepairAction, RepairKind, RepairReport, ResultKind
from toolwire.codecs.results import INVALID_ARGUMENTS_KEY, MISSING_RESULT_TEXT
from toolwire.codecs.results.gemini import SKIP_SIGNATURE as SKIP

from .test_results_encoding import CUT, DIALECTS, TURNS, check_sdk, results_for

R = RepairKind
K = ResultKind


def kinds(report: RepairReport) -> list[str]:
    return [a.kind.value for a in report.actions]


def repair(provider: str, messages: list[Any], **kw: Any) -> tuple[list[Any], RepairReport]:
    """repair_history, checking it leaves its input alone and that repairing its output changes nothing."""
    before = copy.deepcopy(messages)
    out, report = toolwire.repair_history(provider, messages, **kw)
    assert messages == before
    again, report2 = toolwire.repair_history(provider, out, **kw)
    assert again == out and report2.actions == [], report2.actions
    assert well_formed(provider, out) == []
    return out, report


# ==== what "well formed" means per dialect =======================================================================
def _chat(msgs: list[Any]) -> list[str]:
    problems, answered = [], set()
    for i, m in enumerate(msgs):
        if m.get("role") == "assistant" and m.get("tool_calls") is not None:
            ids = [t["id"] for t in m["tool_calls"]]
            after = [x.get("tool_call_id") for x in msgs[i + 1:i + 1 + len(ids)] if x.get("role") == "tool"]
            if after != ids:
                problems.append(f"message {i}: results {after} for calls {ids}")
            answered.update(range(i + 1, i + 1 + len(ids)))
            for t in m["tool_calls"]:
                if t.get("type", "function") == "function":
                    if not isinstance(json.loads(t["function"]["arguments"]), dict):
                        problems.append(f"message {i}: arguments not an object")
    problems += [f"message {i}: stray tool message" for i, m in enumerate(msgs)
                 if m.get("role") == "tool" and i not in answered]
    return problems


def _anthropic(msgs: list[Any]) -> list[str]:
    problems, allowed = [], set()
    for i, m in enumerate(msgs):
        blocks = m["content"] if isinstance(m.get("content"), list) else []
        if m["role"] == "assistant":
            ids = [b["id"] for b in blocks if b.get("type") == "tool_use"]
            if not all(isinstance(b["input"], dict) for b in blocks if b.get("type") == "tool_use"):
                problems.append(f"message {i}: input not an object")
            if ids:
                nxt = msgs[i + 1] if i + 1 < len(msgs) else {"role": None, "content": []}
                got = [b.get("tool_use_id") for b in nxt["content"][:len(ids)]] if nxt["role"] == "user" else []
                if got != ids:
                    problems.append(f"message {i}: results {got} for calls {ids}")
                if any(b.get("type") == "tool_result" for b in nxt["content"][len(ids):]):
                    problems.append(f"message {i + 1}: a tool_result after other content")
                allowed.add(i + 1)
    problems += [f"message {i}: stray tool_result" for i, m in enumerate(msgs) if i not in allowed
                 and isinstance(m.get("content"), list) and any(b.get("type") == "tool_result" for b in m["content"])]
    return problems


def _gemini(msgs: list[Any], echo_ids: bool = True) -> list[str]:
    problems, allowed = [], set()
    for i, m in enumerate(msgs):
        if m["role"] != "model":
            continue
        calls = [p["functionCall"] for p in m["parts"] if "functionCall" in p]
        if not calls:
            continue
        if not all(isinstance(c.get("args", {}), dict) for c in calls):
            problems.append(f"content {i}: args not an object")
        nxt = msgs[i + 1] if i + 1 < len(msgs) else {"role": None, "parts": []}
        frs = [p.get("functionResponse") for p in nxt["parts"][:len(calls)]]
        want = [(c.get("id") if echo_ids else None, c.get("name")) for c in calls]
        got = [(f.get("id"), f.get("name")) if f else None for f in frs]
        if nxt["role"] != "user" or got != want:
            problems.append(f"content {i}: responses {got} for calls {want}")
        if not all(f and isinstance(f.get("response"), dict) for f in frs):
            problems.append(f"content {i + 1}: a response that is not an object")
        allowed.add(i + 1)
    problems += [f"content {i}: stray functionResponse" for i, m in enumerate(msgs)
                 if i not in allowed and any("functionResponse" in p for p in m["parts"])]
    return problems


_OUTPUTS = {"function_call_output", "custom_tool_call_output", "local_shell_call_output", "shell_call_output",
            "apply_patch_call_output", "computer_call_output", "tool_search_output"}
_CALLS = {"function_call", "custom_tool_call", "local_shell_call", "shell_call", "apply_patch_call", "computer_call"}


def _flat(items: list[Any], is_call: Any, call_id: Any, is_result: Any, result_id: Any,
          is_user: Any) -> list[str]:
    """Runs of model entries; the calls of each run answered right after it, in order; nothing else."""
    problems, i, answered = [], 0, set()
    while i < len(items):
        if is_user(items[i]) or is_result(items[i]):
            i += 1
            continue
        j = i
        while j < len(items) and not is_user(items[j]) and not is_result(items[j]):
            j += 1
        ids = [call_id(x) for x in items[i:j] if is_call(x)]
        got = [result_id(x) for x in items[j:j + len(ids)] if is_result(x)]
        if ids and got != ids:
            problems.append(f"entries {i}..{j - 1}: results {got} for calls {ids}")
        answered.update(range(j, j + len(ids)))
        if items[j - 1].get("type") == "reasoning":
            problems.append(f"entry {j - 1}: reasoning with nothing after it")
        i = j
    if not any(x.get("type") == "item_reference" for x in items):  # outputs of referenced calls stay
        problems += [f"entry {k}: stray result" for k, x in enumerate(items) if is_result(x) and k not in answered]
    for k, x in enumerate(items):
        if x.get("type") == "function_call":
            args = x["arguments"]
            if not isinstance(json.loads(args) if isinstance(args, str) else args, dict):
                problems.append(f"entry {k}: arguments not an object")
    return problems


def _responses(items: list[Any]) -> list[str]:
    return _flat(items, lambda x: x.get("type") in _CALLS, lambda x: x["call_id"],
                 lambda x: x.get("type") in _OUTPUTS, lambda x: x.get("call_id", x.get("id")),
                 lambda x: x.get("type", "message") == "message" and x.get("role") != "assistant")


def _interactions(steps: list[Any]) -> list[str]:
    return _flat(steps, lambda x: x["type"] == "function_call", lambda x: x["id"],
                 lambda x: x["type"] == "function_result", lambda x: x["call_id"],
                 lambda x: x["type"] == "user_input")


def well_formed(provider: str, msgs: list[Any], echo_ids: bool = True) -> list[str]:
    """Problems with a history: a call without exactly one result in the provider's required place."""
    if provider == "gemini":
        return _gemini(msgs, echo_ids)
    return {"openai-chat": _chat, "anthropic": _anthropic, "openai-responses": _responses,
            "gemini-interactions": _interactions}[provider](msgs)


# ==== valid histories from history_messages =======================================================================
def user(provider: str, text: str) -> dict[str, Any]:
    """A user text message in the dialect's native form."""
    if provider == "gemini":
        return {"role": "user", "parts": [{"text": text}]}
    if provider == "gemini-interactions":
        return {"type": "user_input", "content": [{"type": "text", "text": text}]}
    if provider == "openai-responses":
        return {"type": "message", "role": "user", "content": text}
    return {"role": "user", "content": text}


def conversation(provider: str, kind: ResultKind = K.OK) -> list[Any]:
    """Two rounds: user, the turn and its results, user, the same turn again (ids reused) and its results."""
    turn = TURNS[provider]()
    round_ = toolwire.history_messages(turn, results_for(turn, kind))
    return [user(provider, "weather?"), *copy.deepcopy(round_), user(provider, "again"), *copy.deepcopy(round_)]


@pytest.mark.parametrize("kind", [K.OK, K.INVALID_ARGUMENTS, K.NOT_RUN], ids=lambda k: k.value)
@pytest.mark.parametrize("provider", DIALECTS)
def test_history_messages_need_no_repair(provider, kind):
    """What history_messages appends (twice, ids reused across turns) is already well formed."""
    msgs = conversation(provider, kind)
    out, report = repair(provider, msgs)
    assert out == msgs and not report.changed


@pytest.mark.parametrize("provider", DIALECTS)
def test_truncated_turn_history_needs_no_repair(provider):
    """A truncated turn's history (calls not run, malformed arguments replaced) is already well formed."""
    turn = CUT[provider]()
    msgs = toolwire.history_messages(turn, results_for(turn, K.NOT_RUN))
    out, report = repair(provider, msgs)
    assert out == msgs and not report.changed


@pytest.mark.parametrize("provider", DIALECTS)
def test_every_missing_result_is_inserted(provider):
    """Removing every result of a conversation: repair inserts one error result per call, in call order."""
    msgs = conversation(provider)
    stripped = strip_results(provider, msgs)
    out, report = repair(provider, stripped)
    assert kinds(report) == ["inserted_result"] * 6
    assert [a.call_id for a in report.actions] == [c.call_id for c in TURNS[provider]().calls] * 2
    assert MISSING_RESULT_TEXT in json.dumps(out)
    for m in out:
        check_sdk(provider, m)


def strip_results(provider: str, msgs: list[Any]) -> list[Any]:
    if provider == "openai-chat":
        return [m for m in msgs if m.get("role") != "tool"]
    if provider == "openai-responses":
        return [m for m in msgs if m.get("type") not in _OUTPUTS]
    if provider == "gemini-interactions":
        return [m for m in msgs if m.get("type") != "function_result"]
    if provider == "anthropic":
        return [m for m in msgs if not (isinstance(m["content"], list)
                                        and any(b.get("type") == "tool_result" for b in m["content"]))]
    return [m for m in msgs if not any("functionResponse" in p for p in m["parts"])]


# ==== Chat ===========================================================================================================
def assistant_calls(*calls: tuple[str, str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                           for i, n, a in calls]}


def tool(cid: str, content: Any = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": content}


A2 = assistant_calls(("call_a", "f", "{}"), ("call_b", "g", '{"x":1}'))

CHAT_CASES = {
    "missing_results_inserted": (
        [{"role": "user", "content": "hi"}, A2],
        [{"role": "user", "content": "hi"}, A2, tool("call_a", MISSING_RESULT_TEXT),
         tool("call_b", MISSING_RESULT_TEXT)],
        ["inserted_result", "inserted_result"]),
    "duplicate_dropped_first_kept": (
        [A2, tool("call_a", "1"), tool("call_b"), tool("call_a", "2")],
        [A2, tool("call_a", "1"), tool("call_b")],
        ["dropped_duplicate"]),
    "orphan_dropped": (
        [tool("call_zz"), {"role": "user", "content": "hi"}, A2, tool("call_a"), tool("call_b"), tool("call_q")],
        [{"role": "user", "content": "hi"}, A2, tool("call_a"), tool("call_b")],
        ["dropped_orphan", "dropped_orphan"]),
    "misplaced_moved_after_their_call": (
        [A2, {"role": "user", "content": "and?"}, tool("call_b"), tool("call_a")],
        [A2, tool("call_a"), tool("call_b"), {"role": "user", "content": "and?"}],
        ["moved_result", "moved_result"]),
    "reordered_into_call_order": (
        [A2, tool("call_b"), tool("call_a")],
        [A2, tool("call_a"), tool("call_b")],
        ["reordered_results"]),
    "malformed_arguments_replaced": (
        [assistant_calls(("call_a", "f", '{"x": "unterminated'), ("call_b", "g", {"x": 1})), tool("call_a"),
         tool("call_b")],
        [assistant_calls(("call_a", "f", json.dumps({INVALID_ARGUMENTS_KEY: '{"x": "unterminated'},
                                                     separators=(",", ":"))),
                         ("call_b", "g", '{"x":1}')), tool("call_a"), tool("call_b")],
        ["replaced_arguments", "replaced_arguments"]),
    "empty_tool_calls_removed": (
        [{"role": "assistant", "content": None, "tool_calls": []}],
        [{"role": "assistant", "content": ""}],
        ["dropped_empty_tool_calls"]),
    "reused_ids_pair_with_the_nearest_call_before": (
        [assistant_calls(("call_0", "f", "{}")), tool("call_0", "first"), {"role": "user", "content": "again"},
         assistant_calls(("call_0", "f", "{}"))],
        [assistant_calls(("call_0", "f", "{}")), tool("call_0", "first"), {"role": "user", "content": "again"},
         assistant_calls(("call_0", "f", "{}")), tool("call_0", MISSING_RESULT_TEXT)],
        ["inserted_result"]),
    "non_text_content_encoded": (
        [A2, tool("call_a", {"t": 1}), tool("call_b")],
        [A2, tool("call_a", '{"t":1}'), tool("call_b")],
        ["fixed_content"]),
    "call_without_id_gets_one": (
        [{"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}]}],
        [{"role": "assistant", "tool_calls": [{"id": "tw_call_0_0", "type": "function",
                                               "function": {"name": "f", "arguments": "{}"}}]},
         tool("tw_call_0_0", MISSING_RESULT_TEXT)],
        ["assigned_id", "inserted_result"]),
}


@pytest.mark.parametrize("case", list(CHAT_CASES))
def test_chat_repair(case):
    """Chat: one tool message per tool_call id right after its assistant message, in call order."""
    given_, expected, expected_kinds = CHAT_CASES[case]
    out, report = repair("openai-chat", given_)
    assert out == expected
    assert kinds(report) == expected_kinds
    for m in out:
        check_sdk("openai-chat", m)


def test_report_records_are_typed():
    """The report is a RepairReport of RepairAction records with a kind, a position, the call id and a detail."""
    _, report = repair("openai-chat", [{"role": "user", "content": "hi"}, A2, tool("call_b")])
    assert isinstance(report, RepairReport) and report.provider == "openai-chat" and report.changed
    (action,) = report.actions
    assert isinstance(action, RepairAction)
    assert (action.kind, action.position, action.call_id, action.name) == (R.INSERTED_RESULT, 1, "call_a", "f")
    assert action.detail
    assert report.of("inserted_result") == [action] and report.counts() == {"inserted_result": 1}


# ==== Anthropic ======================================================================================================
def tool_use(tid: str, name: str = "f", inp: Any = None) -> dict[str, Any]:
    return {"type": "tool_use", "id": tid, "name": name, "input": {} if inp is None else inp}


def tool_result(tid: str, content: str = "ok", **kw: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tid, "content": content, **kw}


def missing(tid: str) -> dict[str, Any]:
    return tool_result(tid, MISSING_RESULT_TEXT, is_error=True)


THINK = {"type": "thinking", "thinking": "hm", "signature": "sig=="}
ASST = {"role": "assistant", "content": [THINK, tool_use("toolu_a"), tool_use("toolu_b", "g")]}
TEXT = {"type": "text", "text": "go on"}

ANTHROPIC_CASES = {
    "missing_results_inserted_as_errors": (
        [{"role": "user", "content": "hi"}, ASST],
        [{"role": "user", "content": "hi"}, ASST,
         {"role": "user", "content": [missing("toolu_a"), missing("toolu_b")]}],
        ["inserted_result", "inserted_result"]),
    "one_missing_inserted_in_place": (
        [ASST, {"role": "user", "content": [tool_result("toolu_b")]}],
        [ASST, {"role": "user", "content": [missing("toolu_a"), tool_result("toolu_b")]}],
        ["inserted_result"]),
    "text_before_results_moved_after": (
        [ASST, {"role": "user", "content": [TEXT, tool_result("toolu_a"), tool_result("toolu_b")]}],
        [ASST, {"role": "user", "content": [tool_result("toolu_a"), tool_result("toolu_b"), TEXT]}],
        ["moved_content"]),
    "split_result_messages_merged": (
        [ASST, {"role": "user", "content": [tool_result("toolu_a")]},
         {"role": "user", "content": [tool_result("toolu_b")]}],
        [ASST, {"role": "user", "content": [tool_result("toolu_a"), tool_result("toolu_b")]}],
        ["moved_result", "merged_messages"]),
    "orphan_dropped_and_empty_message_removed": (
        [{"role": "user", "content": [tool_result("toolu_zz")]}, {"role": "user", "content": "hi"}],
        [{"role": "user", "content": "hi"}],
        ["dropped_orphan"]),
    "duplicate_dropped": (
        [ASST, {"role": "user", "content": [tool_result("toolu_a", "1"), tool_result("toolu_b"),
                                            tool_result("toolu_a", "2")]}],
        [ASST, {"role": "user", "content": [tool_result("toolu_a", "1"), tool_result("toolu_b")]}],
        ["dropped_duplicate"]),
    "string_content_after_the_call_follows_the_results": (
        [ASST, {"role": "user", "content": "continue"}],
        [ASST, {"role": "user", "content": [missing("toolu_a"), missing("toolu_b"),
                                            {"type": "text", "text": "continue"}]}],
        ["inserted_result", "inserted_result"]),
    "reordered_into_call_order": (
        [ASST, {"role": "user", "content": [tool_result("toolu_b"), tool_result("toolu_a")]}],
        [ASST, {"role": "user", "content": [tool_result("toolu_a"), tool_result("toolu_b")]}],
        ["reordered_results"]),
    "malformed_input_replaced": (
        [{"role": "assistant", "content": [tool_use("toolu_a", inp='{"x": 1'), tool_use("toolu_b", inp='{"y": 2}')]},
         {"role": "user", "content": [tool_result("toolu_a"), tool_result("toolu_b")]}],
        [{"role": "assistant", "content": [tool_use("toolu_a", inp={INVALID_ARGUMENTS_KEY: '{"x": 1'}),
                                           tool_use("toolu_b", inp={"y": 2})]},
         {"role": "user", "content": [tool_result("toolu_a"), tool_result("toolu_b")]}],
        ["replaced_arguments", "replaced_arguments"]),
    "result_moved_from_a_later_message": (
        [ASST, {"role": "user", "content": [tool_result("toolu_a")]}, {"role": "assistant", "content": "ok"},
         {"role": "user", "content": [TEXT, tool_result("toolu_b")]}],
        [ASST, {"role": "user", "content": [tool_result("toolu_a"), tool_result("toolu_b")]},
         {"role": "assistant", "content": "ok"}, {"role": "user", "content": [TEXT]}],
        ["moved_result"]),
}


@pytest.mark.parametrize("case", list(ANTHROPIC_CASES))
def test_anthropic_repair(case):
    """Anthropic: the user message after tool_use blocks starts with all their tool_result blocks, in order."""
    given_, expected, expected_kinds = ANTHROPIC_CASES[case]
    out, report = repair("anthropic", given_)
    assert out == expected
    assert kinds(report) == expected_kinds
    for m in out:
        check_sdk("anthropic", m)


# ==== Gemini ========================================================================================================
def fc(name: str, id_: str | None = None, args: Any = None, **extra: Any) -> dict[str, Any]:
    call: dict[str, Any] = {"name": name, "args": {} if args is None else args}
    if id_:
        call["id"] = id_
    return {"functionCall": call, **extra}


def fr(name: str, id_: str | None = None, response: Any = None) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "response": {"output": "ok"} if response is None else response}
    if id_:
        body = {"id": id_, **body}
    return {"functionResponse": body}


def gmissing(name: str, id_: str | None = None) -> dict[str, Any]:
    return fr(name, id_, {"error": MISSING_RESULT_TEXT})


MODEL = {"role": "model", "parts": [fc("f", "g1", thoughtSignature="c2ln"), fc("g", "g2")]}
HELLO = {"role": "user", "parts": [{"text": "hi"}]}

GEMINI_CASES = {
    "missing_inserted_as_error": (
        [HELLO, MODEL], [HELLO, MODEL, {"role": "user", "parts": [gmissing("f", "g1"), gmissing("g", "g2")]}],
        ["inserted_result", "inserted_result"], {}),
    "response_not_an_object_wrapped": (
        [MODEL, {"role": "user", "parts": [fr("f", "g1", "21 C"), fr("g", "g2", [1, 2])]}],
        [MODEL, {"role": "user", "parts": [fr("f", "g1", {"output": "21 C"}), fr("g", "g2", {"output": [1, 2]})]}],
        ["wrapped_response", "wrapped_response"], {}),
    "paired_by_id_and_put_in_call_order": (
        [MODEL, {"role": "user", "parts": [fr("g", "g2"), fr("f", "g1")]}],
        [MODEL, {"role": "user", "parts": [fr("f", "g1"), fr("g", "g2")]}],
        ["reordered_results"], {}),
    "missing_response_id_set_from_the_call": (
        [MODEL, {"role": "user", "parts": [fr("f"), fr("g", "g2")]}],
        [MODEL, {"role": "user", "parts": [fr("f", "g1"), fr("g", "g2")]}],
        ["fixed_response_id"], {}),
    "id_removed_where_the_call_had_none": (
        [{"role": "model", "parts": [fc("f", thoughtSignature="c2ln")]},
         {"role": "user", "parts": [fr("f", "made_up")]}],
        [{"role": "model", "parts": [fc("f", thoughtSignature="c2ln")]}, {"role": "user", "parts": [fr("f")]}],
        ["fixed_response_id"], {}),
    "echo_ids_false_removes_ids": (
        [MODEL, {"role": "user", "parts": [fr("f", "g1"), fr("g", "g2")]}],
        [MODEL, {"role": "user", "parts": [fr("f"), fr("g")]}],
        ["fixed_response_id", "fixed_response_id"], {"echo_ids": False}),
    "no_ids_same_name_paired_in_order": (
        [{"role": "model", "parts": [fc("f", args={"n": 1}, thoughtSignature="c2ln"), fc("f", args={"n": 2})]},
         {"role": "user", "parts": [fr("f", response={"output": 1})]}],
        [{"role": "model", "parts": [fc("f", args={"n": 1}, thoughtSignature="c2ln"), fc("f", args={"n": 2})]},
         {"role": "user", "parts": [fr("f", response={"output": 1}), gmissing("f")]}],
        ["inserted_result"], {}),
    "role_tool_becomes_user": (
        [MODEL, {"role": "tool", "parts": [fr("f", "g1"), fr("g", "g2")]}],
        [MODEL, {"role": "user", "parts": [fr("f", "g1"), fr("g", "g2")]}],
        ["fixed_role"], {}),
    "string_args_replaced": (
        [{"role": "model", "parts": [fc("f", "g1", '{"a": 1}', thoughtSignature="c2ln"), fc("g", "g2", "not json")]},
         {"role": "user", "parts": [fr("f", "g1"), fr("g", "g2")]}],
        [{"role": "model", "parts": [fc("f", "g1", {"a": 1}, thoughtSignature="c2ln"),
                                     fc("g", "g2", {INVALID_ARGUMENTS_KEY: "not json"})]},
         {"role": "user", "parts": [fr("f", "g1"), fr("g", "g2")]}],
        ["replaced_arguments", "replaced_arguments"], {}),
    "orphan_and_duplicate_dropped": (
        [{"role": "user", "parts": [fr("zz", "x9")]}, MODEL,
         {"role": "user", "parts": [fr("f", "g1"), fr("g", "g2"), fr("f", "g1", {"output": "again"})]}],
        [MODEL, {"role": "user", "parts": [fr("f", "g1"), fr("g", "g2")]}],
        ["dropped_orphan", "dropped_duplicate"], {}),
    "split_contents_merged": (
        [MODEL, {"role": "user", "parts": [fr("f", "g1")]}, {"role": "user", "parts": [fr("g", "g2")]}],
        [MODEL, {"role": "user", "parts": [fr("f", "g1"), fr("g", "g2")]}],
        ["moved_result", "merged_messages"], {}),
}


@pytest.mark.parametrize("case", list(GEMINI_CASES))
def test_gemini_repair(case):
    """Gemini: one functionResponse per call right after the model content, id as the call's, response an object."""
    given_, expected, expected_kinds, kw = GEMINI_CASES[case]
    out, report = toolwire.repair_history("gemini", given_, **kw)
    assert out == expected
    assert kinds(report) == expected_kinds
    assert well_formed("gemini", out, kw.get("echo_ids", True)) == []
    assert toolwire.repair_history("gemini", out, **kw)[1].actions == []
    for m in out:
        check_sdk("gemini", m)


def test_gemini_snake_case_parts_are_read():
    """The python SDK's snake_case parts (function_call / function_response) are paired too."""
    msgs = [{"role": "model", "parts": [{"function_call": {"id": "g1", "name": "f", "args": {}}}]},
            {"role": "user", "parts": [{"function_response": {"id": "g1", "name": "f", "response": "x"}}]},
            {"role": "model", "parts": [{"function_call": {"name": "h", "args": {}}}]}]
    out, report = toolwire.repair_history("gemini", msgs)
    assert out[1] == {"role": "user", "parts": [{"function_response": {"id": "g1", "name": "f",
                                                                       "response": {"output": "x"}}}]}
    assert out[3] == {"role": "user", "parts": [{"function_response": {"name": "h",
                                                                       "response": {"error": MISSING_RESULT_TEXT}}}]}
    # no user text: the whole history is the current turn, and the sentinel is written in the parts' style
    assert [out[0]["parts"][0]["thought_signature"], out[2]["parts"][0]["thought_signature"]] == [SKIP] * 2
    assert kinds(report) == ["wrapped_response", "inserted_result", "inserted_thought_signature",
                             "inserted_thought_signature"]


# ==== Responses =====================================================================================================
def fcall(cid: str, name: str = "f", args: str = "{}", iid: str | None = None) -> dict[str, Any]:
    return {"type": "function_call", "id": iid or f"fc_{cid}", "call_id": cid, "name": name, "arguments": args}


def out_(cid: str, output: str = "ok") -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": cid, "output": output}


RS = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc"}
UQ = {"type": "message", "role": "user", "content": "q"}

RESPONSES_CASES = {
    "missing_output_inserted": (
        [UQ, RS, fcall("c1"), fcall("c2")],
        [UQ, RS, fcall("c1"), fcall("c2"), out_("c1", MISSING_RESULT_TEXT), out_("c2", MISSING_RESULT_TEXT)],
        ["inserted_result", "inserted_result"]),
    "output_between_reasoning_and_call_moved_after": (
        [UQ, RS, out_("c1"), fcall("c1")],
        [UQ, RS, fcall("c1"), out_("c1")],
        ["moved_result"]),
    "sequential_turns_left_alone": (
        [UQ, fcall("c1"), out_("c1"), RS, fcall("c2"), out_("c2")],
        [UQ, fcall("c1"), out_("c1"), RS, fcall("c2"), out_("c2")],
        []),
    "reasoning_without_its_item_dropped": (
        [UQ, RS, UQ],
        [UQ, UQ],
        ["dropped_reasoning"]),
    "orphan_and_duplicate_dropped": (
        [out_("c9"), UQ, fcall("c1"), out_("c1", "1"), out_("c1", "2")],
        [UQ, fcall("c1"), out_("c1", "1")],
        ["dropped_orphan", "dropped_duplicate"]),
    "malformed_arguments_replaced": (
        [fcall("c1", args='{"a": '), out_("c1")],
        [fcall("c1", args=json.dumps({INVALID_ARGUMENTS_KEY: '{"a": '}, separators=(",", ":"))), out_("c1")],
        ["replaced_arguments"]),
    "builtin_and_custom_calls_get_their_output_types": (
        [{"type": "local_shell_call", "id": "lsh_1", "call_id": "c_ls", "status": "completed",
          "action": {"type": "exec", "command": ["ls"], "env": {}}},
         {"type": "custom_tool_call", "id": "ctc_1", "call_id": "c_ct", "name": "sql", "input": "SELECT 1"},
         {"type": "apply_patch_call", "id": "ap_1", "call_id": "c_ap", "status": "completed",
          "operation": {"type": "delete_file", "path": "a"}}],
        [{"type": "local_shell_call", "id": "lsh_1", "call_id": "c_ls", "status": "completed",
          "action": {"type": "exec", "command": ["ls"], "env": {}}},
         {"type": "custom_tool_call", "id": "ctc_1", "call_id": "c_ct", "name": "sql", "input": "SELECT 1"},
         {"type": "apply_patch_call", "id": "ap_1", "call_id": "c_ap", "status": "completed",
          "operation": {"type": "delete_file", "path": "a"}},
         {"type": "local_shell_call_output", "id": "c_ls", "output": MISSING_RESULT_TEXT},
         {"type": "custom_tool_call_output", "call_id": "c_ct", "output": MISSING_RESULT_TEXT},
         {"type": "apply_patch_call_output", "call_id": "c_ap", "status": "failed", "output": MISSING_RESULT_TEXT}],
        ["inserted_result"] * 3),
    "local_shell_output_matched_by_id": (
        [{"type": "local_shell_call", "id": "lsh_1", "call_id": "c_ls", "status": "completed",
          "action": {"type": "exec", "command": ["ls"], "env": {}}},
         {"type": "local_shell_call_output", "id": "c_ls", "output": "a.py"}],
        [{"type": "local_shell_call", "id": "lsh_1", "call_id": "c_ls", "status": "completed",
          "action": {"type": "exec", "command": ["ls"], "env": {}}},
         {"type": "local_shell_call_output", "id": "c_ls", "output": "a.py"}],
        []),
    "outputs_kept_when_calls_may_be_item_references": (
        [{"type": "item_reference", "id": "fc_stored"}, out_("c_stored")],
        [{"type": "item_reference", "id": "fc_stored"}, out_("c_stored")],
        []),
}


@pytest.mark.parametrize("case", list(RESPONSES_CASES))
def test_responses_repair(case):
    """Responses: every call item has one output after its turn; reasoning stays right before its item."""
    given_, expected, expected_kinds = RESPONSES_CASES[case]
    out, report = repair("openai-responses", given_)
    assert out == expected
    assert kinds(report) == expected_kinds
    for m in out:
        if m.get("type") != "item_reference":
            check_sdk("openai-responses", m)


# ==== Interactions ==================================================================================================
def step_fc(cid: str, name: str = "f", args: Any = None) -> dict[str, Any]:
    return {"type": "function_call", "id": cid, "name": name, "arguments": {} if args is None else args}


def step_fr(cid: str, result: Any = "ok", name: str = "f", **kw: Any) -> dict[str, Any]:
    return {"type": "function_result", "call_id": cid, "name": name, "result": result, **kw}


UI = {"type": "user_input", "content": [{"type": "text", "text": "q"}]}
THOUGHT = {"type": "thought", "signature": "c2ln"}

INTERACTIONS_CASES = {
    "missing_result_inserted": (
        [UI, THOUGHT, step_fc("a"), step_fc("b", "g")],
        [UI, THOUGHT, step_fc("a"), step_fc("b", "g"), step_fr("a", MISSING_RESULT_TEXT, is_error=True),
         step_fr("b", MISSING_RESULT_TEXT, "g", is_error=True)],
        ["inserted_result", "inserted_result"]),
    "orphan_duplicate_and_reorder": (
        [step_fr("zz"), UI, step_fc("a"), step_fc("b"), step_fr("b"), step_fr("a"), step_fr("a", "again")],
        [UI, step_fc("a"), step_fc("b"), step_fr("a"), step_fr("b")],
        ["dropped_orphan", "dropped_duplicate", "reordered_results"]),
    "string_arguments_replaced": (
        [step_fc("a", args='{"x":'), step_fr("a")],
        [step_fc("a", args={INVALID_ARGUMENTS_KEY: '{"x":'}), step_fr("a")],
        ["replaced_arguments"]),
    "sequential_turns_left_alone": (
        [UI, step_fc("a"), step_fr("a"), THOUGHT, step_fc("b"), step_fr("b")],
        [UI, step_fc("a"), step_fr("a"), THOUGHT, step_fc("b"), step_fr("b")],
        []),
    "result_after_the_next_user_input_moved": (
        [UI, step_fc("a"), UI, step_fr("a")],
        [UI, step_fc("a"), step_fr("a"), UI],
        ["moved_result"]),
}


@pytest.mark.parametrize("case", list(INTERACTIONS_CASES))
def test_interactions_repair(case):
    """Interactions: every function_call step has one function_result after its turn, in call order."""
    given_, expected, expected_kinds = INTERACTIONS_CASES[case]
    out, report = repair("gemini-interactions", given_)
    assert out == expected
    assert kinds(report) == expected_kinds
    for m in out:
        if m["type"] != "user_input":
            check_sdk("gemini-interactions", m)


def test_repair_refuses_a_non_list():
    """repair_history takes the list of messages, not one message or text."""
    with pytest.raises(toolwire.UsageError):
        toolwire.repair_history("openai-chat", {"role": "user", "content": "hi"})


# ==== property: any damage to the results of a valid history is repaired =======================================
def _result_units(provider: str, msgs: list[Any]) -> list[tuple[int, int | None]]:
    """Where the results are: (message index, block/part index or None for a whole entry)."""
    units = []
    for i, m in enumerate(msgs):
        if provider == "openai-chat" and m.get("role") == "tool":
            units.append((i, None))
        elif provider == "openai-responses" and m.get("type") in _OUTPUTS:
            units.append((i, None))
        elif provider == "gemini-interactions" and m.get("type") == "function_result":
            units.append((i, None))
        elif provider == "anthropic" and isinstance(m.get("content"), list):
            units += [(i, k) for k, b in enumerate(m["content"]) if b.get("type") == "tool_result"]
        elif provider == "gemini":
            units += [(i, k) for k, p in enumerate(m["parts"]) if "functionResponse" in p]
    return units


def _take(msgs: list[Any], unit: tuple[int, int | None]) -> Any:
    i, k = unit
    if k is None:
        return msgs[i]
    return (msgs[i]["content"] if "content" in msgs[i] else msgs[i]["parts"])[k]


def _wrap(provider: str, unit: Any) -> Any:
    if provider == "anthropic":
        return {"role": "user", "content": [unit]}
    if provider == "gemini":
        return {"role": "user", "parts": [unit]}
    return unit


def _remove(msgs: list[Any], unit: tuple[int, int | None]) -> None:
    i, k = unit
    if k is None:
        msgs[i] = None
    else:
        key = "content" if "content" in msgs[i] else "parts"
        msgs[i][key][k] = None


def _orphan(provider: str) -> Any:
    return {"openai-chat": {"role": "tool", "tool_call_id": "call_orphan", "content": "x"},
            "openai-responses": {"type": "function_call_output", "call_id": "call_orphan", "output": "x"},
            "gemini-interactions": {"type": "function_result", "call_id": "call_orphan", "result": "x"},
            "anthropic": {"type": "tool_result", "tool_use_id": "toolu_orphan", "content": "x"},
            "gemini": {"functionResponse": {"id": "g_orphan", "name": "nope", "response": {"output": 1}}}}[provider]


@st.composite
def damaged(draw: Any, provider: str) -> list[Any]:
    """A valid two-round conversation with random results deleted, duplicated, moved, or orphans added."""
    msgs = copy.deepcopy(conversation(provider, draw(st.sampled_from([K.OK, K.DENIED]))))
    inserts: list[tuple[int, Any]] = []
    units = _result_units(provider, msgs)
    for unit in units:
        op = draw(st.sampled_from(["keep", "keep", "delete", "duplicate", "move"]))
        value = copy.deepcopy(_take(msgs, unit))
        if op in ("delete", "move"):
            _remove(msgs, unit)
        if op in ("duplicate", "move"):
            inserts.append((draw(st.integers(0, len(msgs))), _wrap(provider, value)))
    for _ in range(draw(st.integers(0, 2))):
        inserts.append((draw(st.integers(0, len(msgs))), _wrap(provider, _orphan(provider))))
    for pos, value in sorted(inserts, key=lambda x: -x[0]):
        msgs.insert(pos, value)
    cleaned = []
    for m in msgs:
        if m is None:
            continue
        if isinstance(m, dict) and isinstance(m.get("content"), list) and provider == "anthropic":
            m["content"] = [b for b in m["content"] if b is not None]
            if not m["content"]:
                continue
        if isinstance(m, dict) and provider == "gemini":
            m["parts"] = [p for p in m["parts"] if p is not None]
            if not m["parts"]:
                continue
        cleaned.append(m)
    return cleaned


@pytest.mark.parametrize("provider", DIALECTS)
@given(data=st.data())
def test_any_damage_to_results_is_repaired(provider, data):
    """Deleted, duplicated, moved and orphan results are repaired into a well-formed, SDK-valid fixed point."""
    msgs = data.draw(damaged(provider))
    out, report = repair(provider, msgs)
    assert well_formed(provider, out) == []
    assert call_ids(provider, out) == call_ids(provider, msgs) == call_ids(provider, conversation(provider))
    for m in out:
        if provider == "gemini-interactions" and m["type"] == "user_input":
            continue
        check_sdk(provider, m)


def call_ids(provider: str, msgs: list[Any]) -> list[str | None]:
    """The ids of the calls in a history, in order."""
    if provider == "openai-chat":
        return [t["id"] for m in msgs if m.get("role") == "assistant" for t in m.get("tool_calls") or ()]
    if provider == "anthropic":
        return [b["id"] for m in msgs if m["role"] == "assistant" and isinstance(m["content"], list)
                for b in m["content"] if b.get("type") == "tool_use"]
    if provider == "gemini":
        return [p["functionCall"].get("id") for m in msgs if m["role"] == "model" for p in m["parts"]
                if "functionCall" in p]
    if provider == "openai-responses":
        return [m["call_id"] for m in msgs if m.get("type") in _CALLS]
    return [m["id"] for m in msgs if m["type"] == "function_call"]


# ==== a call id used twice in one turn =============================================================================
def same_id_twice(provider: str, results: int) -> list[Any]:
    """A turn whose two calls (``f`` then ``g``) carry the id ``dup``, followed by ``results`` results with it."""
    if provider == "openai-chat":
        return [{"role": "user", "content": "hi"}, assistant_calls(("dup", "f", "{}"), ("dup", "g", "{}")),
                *[tool("dup", f"r{k}") for k in range(results)]]
    if provider == "anthropic":
        msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [tool_use("dup"),
                                                                                     tool_use("dup", "g")]}]
        return msgs + [{"role": "user", "content": [tool_result("dup", f"r{k}") for k in range(results)]}] * bool(
            results)
    if provider == "gemini":
        msgs = [HELLO, {"role": "model", "parts": [fc("f", "dup", thoughtSignature="c2ln"), fc("g", "dup")]}]
        return msgs + [{"role": "user", "parts": [fr(n, "dup") for n in "fg"[:results]]}] * bool(results)
    if provider == "openai-responses":
        return [UQ, fcall("dup", "f", iid="fc_1"), fcall("dup", "g", iid="fc_2"),
                *[out_("dup", f"r{k}") for k in range(results)]]
    return [UI, step_fc("dup"), step_fc("dup", "g"),
            *[step_fr("dup", f"r{k}", n) for k, n in zip(range(results), "fg")]]


@pytest.mark.parametrize("provider", DIALECTS)
def test_a_second_call_with_the_same_id_is_renamed_and_answered_on_its_own(provider):
    """Two calls of one turn with one id: the second gets a new id and its own (inserted) result, both reported,
    instead of one stored result silently answering both."""
    msgs = same_id_twice(provider, 1)
    out, report = repair(provider, msgs)
    assert call_ids(provider, out) == ["dup", "dup_2"]
    assert kinds(report) == ["assigned_id", "inserted_result"]
    assert [a.call_id for a in report.actions] == ["dup_2", "dup_2"]
    assert json.dumps(out).count(MISSING_RESULT_TEXT) == 1


@pytest.mark.parametrize("provider", DIALECTS)
def test_results_sharing_a_duplicated_id_answer_its_calls_in_order(provider):
    """Two stored results with the id two calls of one turn share answer those calls in call order: the second
    follows its call to the new id and nothing is invented."""
    msgs = same_id_twice(provider, 2)
    out, report = repair(provider, msgs)
    assert call_ids(provider, out) == ["dup", "dup_2"]
    assert kinds(report) == ["assigned_id"] + (["fixed_response_id"] if provider == "gemini" else [])
    assert MISSING_RESULT_TEXT not in json.dumps(out)


def test_anthropic_text_between_results_moved_after_them_is_reported():
    """Anthropic: a text block between two tool_result blocks ends up after them, and the report says so."""
    out, report = repair("anthropic", [ASST, {"role": "user", "content": [tool_result("toolu_a"), TEXT,
                                                                          tool_result("toolu_b")]}])
    assert out[1]["content"] == [tool_result("toolu_a"), tool_result("toolu_b"), TEXT]
    assert kinds(report) == ["moved_content"]


def test_gemini_text_between_responses_moved_after_them_is_reported():
    """Gemini: a text part between two functionResponse parts ends up after them, and the report says so."""
    text = {"text": "and then"}
    out, report = repair("gemini", [HELLO, MODEL, {"role": "user", "parts": [fr("f", "g1"), text, fr("g", "g2")]}])
    assert out[2]["parts"] == [fr("f", "g1"), fr("g", "g2"), text]
    assert kinds(report) == ["moved_content"]


# ==== property: over generated histories, every change is reported and a second pass is a no-op ==============
_ARGS = {  # how each kind of arguments is stored: (a string-typed wire, an object-typed wire)
    "ok": ('{"x":1}', {"x": 1}),
    "malformed": ('{"x": ', '{"x": '),
    "not_object": ("[1]", [1]),
}


def render(provider: str, entries: list[Any]) -> list[Any]:
    """An abstract history in a dialect's native form. Entries: ``("user",)``; ``("model",)`` (model output
    without calls: a lone Responses reasoning item, an Interactions thought step, text otherwise); ``("calls",
    [(id or None, name, args kind), ...], extra)`` (extra: a signed Gemini call, a reasoning item or thought step
    before the calls, a text block before Anthropic's tool_use blocks); ``("results", [("r", id or None, name)
    or ("text",), ...], odd)`` (a result, or text between the results; odd: results in a form repair fixes, a Chat
    content that is not text, a Gemini role ``tool`` and a response that is not an object)."""
    out: list[Any] = []
    for e in entries:
        if e[0] == "user":
            out.append(user(provider, "hi"))
        elif e[0] == "model":
            out.append(_render_model(provider, len(out)))
        elif e[0] == "calls":
            out.extend(_render_calls(provider, e[1], e[2], len(out)))
        else:
            out.extend(_render_results(provider, e[1], e[2] if len(e) > 2 else False))
    return out


def _render_model(provider: str, at: int) -> Any:
    if provider == "openai-responses":
        return {**RS, "id": f"rs_{at}"}
    if provider == "gemini-interactions":
        return THOUGHT
    if provider == "gemini":
        return {"role": "model", "parts": [{"text": "thinking aloud"}]}
    return {"role": "assistant", "content": "thinking aloud"}


def _arguments(kind: str, text: bool) -> dict[str, Any]:
    return {} if kind == "missing" else {"v": _ARGS[kind][0 if text else 1]}


def _render_calls(provider: str, calls: list[Any], extra: bool, at: int) -> list[Any]:
    if provider == "openai-chat":
        tcs = []
        for cid, name, kind in calls:
            fn = {"name": name, **({"arguments": v} if (v := _arguments(kind, True).get("v")) is not None else {})}
            tcs.append({**({"id": cid} if cid else {}), "type": "function", "function": fn})
        return [{"role": "assistant", "content": None, "tool_calls": tcs}]
    if provider == "anthropic":
        blocks = [{"type": "text", "text": "calling"}] if extra else []
        for cid, name, kind in calls:
            a = _arguments(kind, False)
            blocks.append({"type": "tool_use", **({"id": cid} if cid else {}), "name": name,
                           **({"input": a["v"]} if a else {})})
        return [{"role": "assistant", "content": blocks}]
    if provider == "gemini":
        parts = []
        for k, (cid, name, kind) in enumerate(calls):
            a = _arguments(kind, False)
            part: dict[str, Any] = {"functionCall": {**({"id": cid} if cid else {}), "name": name,
                                                     **({"args": a["v"]} if a else {})}}
            if extra and k == 0:
                part["thoughtSignature"] = "c2ln"
            parts.append(part)
        return [{"role": "model", "parts": parts}]
    items: list[Any] = []
    if provider == "openai-responses":
        if extra:
            items.append({**RS, "id": f"rs_{at}"})
        for k, (cid, name, kind) in enumerate(calls):
            a = _arguments(kind, True)
            items.append({"type": "function_call", "id": f"fc_{at}_{k}", **({"call_id": cid} if cid else {}),
                          "name": name, **({"arguments": a["v"]} if a else {})})
        return items
    if extra:
        items.append(THOUGHT)
    for cid, name, kind in calls:
        a = _arguments(kind, False)
        items.append({"type": "function_call", **({"id": cid} if cid else {}), "name": name,
                      **({"arguments": a["v"]} if a else {})})
    return items


def _render_results(provider: str, results: list[Any], odd: bool) -> list[Any]:
    if provider == "anthropic":
        return [{"role": "user", "content": [
            tool_result(r[1] or "zz") if r[0] == "r" else {"type": "text", "text": "between"} for r in results]}]
    if provider == "gemini":
        return [{"role": "tool" if odd else "user", "parts": [
            fr(r[2], r[1], "x" if odd else None) if r[0] == "r" else {"text": "between"} for r in results]}]
    out = []
    for r in results:
        if r[0] == "text":
            out.append(user(provider, "between"))
        elif provider == "openai-chat":
            out.append(tool(r[1] or "zz", {"t": 1} if odd else "ok"))
        elif provider == "openai-responses":
            out.append(out_(r[1] or "zz"))
        else:
            out.append(step_fr(r[1] or "zz", name=r[2]))
    return out


_IDS = st.sampled_from(["a", "b", "c", None])
_NAMES = st.sampled_from(["f", "g"])


@st.composite
def histories(draw: Any, provider: str) -> list[Any]:
    """Random user messages, call turns (ids missing, repeated in a turn or across turns; arguments valid,
    malformed, not objects or missing) and result messages (for any id, in any order and place, with text
    between them)."""
    entry = st.one_of(
        st.tuples(st.just("user")),
        st.tuples(st.just("model")),
        st.tuples(st.just("calls"), st.lists(st.tuples(_IDS, _NAMES, st.sampled_from(["ok", "ok", "malformed",
                                                                                         "not_object", "missing"])),
                                             min_size=1, max_size=3), st.booleans()),
        st.tuples(st.just("results"), st.lists(st.one_of(st.tuples(st.just("r"), _IDS, _NAMES),
                                                         st.tuples(st.just("text"))), min_size=1, max_size=4),
                  st.booleans()))
    return render(provider, draw(st.lists(entry, max_size=8)))


@pytest.mark.parametrize("provider,echo_ids", [(p, True) for p in DIALECTS] + [("gemini", False)])
@given(data=st.data())
def test_every_change_is_reported_and_a_second_repair_is_a_no_op(provider, echo_ids, data):
    """Over generated histories: the output differs from the input only with actions to say why, it is well
    formed and encodable, and repairing it again changes and reports nothing."""
    msgs = data.draw(histories(provider))
    before = copy.deepcopy(msgs)
    out, report = toolwire.repair_history(provider, msgs, echo_ids=echo_ids)
    assert msgs == before
    if out != msgs:
        assert report.actions, "the history changed but the report is empty"
    assert well_formed(provider, out, echo_ids) == []
    msgspec.json.encode(out)
    again, report2 = toolwire.repair_history(provider, out, echo_ids=echo_ids)
    assert report2.actions == [] and again == out


# ==== Gemini 3 thought signatures ==================================================================================
def unsigned(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"role": "model", "parts": list(calls)}


def test_gemini_unsigned_calls_of_the_current_turn_get_the_skip_sentinel():
    """Every model content of the current turn whose calls lost their thoughtSignature gets the documented
    sentinel on its first functionCall part (sequential steps included), reported as inserted_thought_signature."""
    stored = [HELLO, unsigned(fc("f", "g1"), fc("g", "g2")), {"role": "user", "parts": [fr("f", "g1"), fr("g", "g2")]},
              unsigned(fc("h", "g3")), {"role": "user", "parts": [fr("h", "g3")]}]
    out, report = repair("gemini", stored)
    assert out[1]["parts"][0] == {**fc("f", "g1"), "thoughtSignature": SKIP}
    assert "thoughtSignature" not in out[1]["parts"][1]
    assert out[3]["parts"][0] == {**fc("h", "g3"), "thoughtSignature": SKIP}
    assert [(a.kind, a.position, a.call_id, a.name) for a in report.actions] == [
        (R.INSERTED_THOUGHT_SIGNATURE, 1, "g1", "f"), (R.INSERTED_THOUGHT_SIGNATURE, 3, "g3", "h")]
    for m in out:
        check_sdk("gemini", m)


def test_gemini_earlier_turns_and_existing_signatures_are_left_alone():
    """Only the current turn is checked by Gemini 3, so earlier turns keep their parts; a real signature, also
    one a stream left on a later part, is never replaced or doubled."""
    late = {"text": "", "thoughtSignature": "bGF0ZQ=="}
    stored = [HELLO, unsigned(fc("f", "g1")), {"role": "user", "parts": [fr("f", "g1")]},
              {"role": "user", "parts": [{"text": "and now?"}]},
              unsigned(fc("g", "g2", thoughtSignature="c2ln"), fc("g", "g3")),
              {"role": "user", "parts": [fr("g", "g2"), fr("g", "g3")]},
              unsigned(fc("h", "g4"), late), {"role": "user", "parts": [fr("h", "g4")]}]
    out, report = repair("gemini", stored)
    assert out == stored and report.actions == []


def test_gemini_turn_boundary_is_read_after_the_results_are_placed():
    """A text part that arrived with the results does not start a new turn: the model content before it is still
    in the current turn and gets the sentinel."""
    stored = [HELLO, unsigned(fc("f", "g1")), {"role": "user", "parts": [{"text": "here"}, fr("f", "g1")]}]
    out, report = repair("gemini", stored)
    assert out[1]["parts"][0]["thoughtSignature"] == SKIP
    assert kinds(report) == ["moved_content", "inserted_thought_signature"]


# ==== text that UTF-8 cannot encode ================================================================================
def loaded_with_surrogates(provider: str) -> list[Any]:
    """A stored conversation as ``json.loads`` gives it when the file holds ``\\ud800`` escapes: lone surrogates
    in the user's text, a call's arguments and a result."""
    msgs = conversation(provider)[:3] if provider in ("anthropic", "gemini") else conversation(provider)
    text = json.dumps(msgs).replace("weather?", "weather\\ud800?").replace("Paris", "Par\\udc00is")
    return json.loads(text)


@pytest.mark.parametrize("provider", DIALECTS)
def test_lone_surrogates_are_replaced_and_reported(provider):
    """A history holding lone surrogates is repaired without raising: each message with some gets U+FFFD in their
    place and a replaced_surrogates action; the output encodes as UTF-8, and a second pass changes nothing."""
    msgs = loaded_with_surrogates(provider)
    with pytest.raises(UnicodeEncodeError):
        msgspec.json.encode(msgs)
    out, report = repair(provider, msgs)
    msgspec.json.encode(out)
    assert "\ufffd" in json.dumps(out, ensure_ascii=False)
    fixed = report.of("replaced_surrogates")
    assert fixed and all(a.position is not None and a.detail for a in fixed)
    assert {a.position for a in fixed} == {i for i, m in enumerate(msgs) if "\\ud" in json.dumps(m)}


def test_a_valid_surrogate_pair_becomes_its_character():
    """Two code points that form a valid pair (as some decoders leave them) are joined into the character."""
    msgs = [{"role": "user", "content": "ok \ud83d\ude00"}]
    out, report = repair("openai-chat", msgs)
    assert out == [{"role": "user", "content": "ok \U0001f600"}]
    assert kinds(report) == ["replaced_surrogates"]


def with_surrogates(turn: toolwire.Turn) -> toolwire.Turn:
    """The turn with lone surrogates in its assistant message and in its calls' raw arguments."""
    message = json.loads(json.dumps(turn.assistant_message).replace("hei", "he\\ud800i"))
    calls = [msgspec.structs.replace(c, raw_arguments=c.raw_arguments.replace("hei", "he\ud800i"))
             if c.raw_arguments else c for c in turn.calls]
    return msgspec.structs.replace(turn, assistant_message=message, calls=calls)


@pytest.mark.parametrize("provider", DIALECTS)
def test_encode_results_and_history_messages_make_lone_surrogates_encodable(provider):
    """Results (text, objects, lists) and arguments holding lone surrogates are encoded with U+FFFD in their
    place instead of raising, so the next request can be sent."""
    turn = with_surrogates(TURNS[provider]())
    contents = ["r\ud800", {"k\udc00": "v\ud800"}, ["\udfff"]]
    results = [toolwire.ToolResult(call_id=c.call_id, local_id=c.local_id, name=c.name, content=v,
                                   is_error=False, kind=K.OK) for c, v in zip(turn.calls, contents)]
    encoded = toolwire.encode_results(turn, results)
    history = toolwire.history_messages(turn, results)
    for value in (encoded, history):
        msgspec.json.encode(value)
        assert "\ufffd" in json.dumps(value, ensure_ascii=False)
    replayed = history[:len(history) - len(encoded)]
    assert "\ufffd" in json.dumps(replayed, ensure_ascii=False)  # the replayed arguments too


# ==== the cap on calls =============================================================================================
@pytest.mark.parametrize("provider", DIALECTS)
def test_repair_refuses_a_history_with_more_calls_than_max_calls(provider):
    """More calls than max_calls raise HistoryTooLargeError (a UsageError) naming the cap and where it was
    passed; exactly max_calls is repaired."""
    msgs = conversation(provider)  # six calls, in two turns
    toolwire.repair_history(provider, msgs, max_calls=6)
    with pytest.raises(toolwire.HistoryTooLargeError) as info:
        toolwire.repair_history(provider, msgs, max_calls=5)
    err = info.value
    assert isinstance(err, toolwire.UsageError) and err.limit == 5
    assert err.position == call_positions(provider, msgs)[5]
    assert "max_calls" in str(err)


def call_positions(provider: str, msgs: list[Any]) -> list[int]:
    """For each call of a history, in order, the index of the message (or item, step) holding it."""
    return [i for i, m in enumerate(msgs) for _ in call_ids(provider, [m])]


def test_max_calls_defaults_to_a_hundred_thousand_and_none_lifts_it():
    """The cap is 100,000 calls unless the caller passes another positive integer, or None for no cap."""
    assert inspect.signature(toolwire.repair_history).parameters["max_calls"].default == 100_000
    msgs = conversation("openai-chat")
    assert toolwire.repair_history("openai-chat", msgs, max_calls=None)[0] == msgs
    for bad in (0, -1, True, 2.5, "6"):
        with pytest.raises(toolwire.UsageError):
            toolwire.repair_history("openai-chat", msgs, max_calls=bad)


# ==== the cost is linear in the size of the history ==============================================================
def lines_run(fn: Any) -> int:
    """How many lines of toolwire's own code ``fn()`` executes: a count that grows with the work done and, unlike
    a timing, does not depend on the machine."""
    root = os.path.dirname(toolwire.__file__)
    count = 0

    def local(frame: Any, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return local

    def calls(frame: Any, event: str, arg: Any) -> Any:
        return local if frame.f_code.co_filename.startswith(root) else None

    old = sys.gettrace()
    sys.settrace(calls)
    try:
        fn()
    finally:
        sys.settrace(old)
    return count


def shape(name: str, n: int) -> list[Any]:
    """``wide``: one turn of ``n`` calls, results in reverse order; ``turns``: ``n`` turns reusing ``call_0``."""
    if name == "wide":
        return [("user",), ("calls", [(f"c{k}", "f", "ok") for k in range(n)], True),
                ("results", [("r", f"c{k}", "f") for k in reversed(range(n))])]
    return [("user",), ("calls", [("call_0", "f", "ok")], True), ("results", [("r", "call_0", "f")])] * n


@pytest.mark.parametrize("name", ["wide", "turns"])
@pytest.mark.parametrize("provider", DIALECTS)
def test_repair_work_grows_linearly_with_the_history(provider, name):
    """Four times the calls (in one turn, or in turns reusing one id) take at most five times the work, counted
    in lines executed; pairing each result by scanning the calls would take about sixteen times."""
    small, large = (render(provider, shape(name, n)) for n in (150, 600))
    work = [lines_run(lambda m=m: toolwire.repair_history(provider, m)) for m in (small, large)]
    assert work[1] <= 5 * work[0], work
