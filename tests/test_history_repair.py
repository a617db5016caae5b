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

from .dialects import adapter
from .dialects.anthropic import tool_result, tool_use
from .dialects.gemini import HELLO, MODEL, fc, fr, gmissing
from .dialects.gemini_interactions import THOUGHT, UI, step_fc, step_fr
from .dialects.openai_chat import assistant_calls, tool
from .dialects.openai_responses import RS, UQ, fcall, out_
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


# ==== what "well formed" means per dialect (each adapter says) ======================================================
def well_formed(provider: str, msgs: list[Any], echo_ids: bool = True) -> list[str]:
    """Problems with a history: a call without exactly one result in the provider's required place."""
    return adapter(provider).well_formed(msgs, echo_ids)


# ==== valid histories from history_messages =======================================================================
def user(provider: str, text: str) -> dict[str, Any]:
    """A user text message in the dialect's native form."""
    return adapter(provider).user(text)


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
    return adapter(provider).strip_results(msgs)


# ==== Chat ===========================================================================================================
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
MODEL = {"role": "model", "parts": [fc("f", "g1", thoughtSignature="c2ln"), fc("g", "g2")]}

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
    return adapter(provider).result_units(msgs)


def _take(msgs: list[Any], unit: tuple[int, int | None]) -> Any:
    i, k = unit
    if k is None:
        return msgs[i]
    return (msgs[i]["content"] if "content" in msgs[i] else msgs[i]["parts"])[k]


def _wrap(provider: str, unit: Any) -> Any:
    return adapter(provider).wrap_result(unit)


def _remove(msgs: list[Any], unit: tuple[int, int | None]) -> None:
    i, k = unit
    if k is None:
        msgs[i] = None
    else:
        key = "content" if "content" in msgs[i] else "parts"
        msgs[i][key][k] = None


def _orphan(provider: str) -> Any:
    return adapter(provider).orphan()


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
        if m is not None:
            m = adapter(provider).clean_damaged(m)
        if m is not None:
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
        adapter(provider).check_history_entry(m)


def call_ids(provider: str, msgs: list[Any]) -> list[str | None]:
    """The ids of the calls in a history, in order."""
    return adapter(provider).call_ids(msgs)


# ==== a call id used twice in one turn =============================================================================
def same_id_twice(provider: str, results: int) -> list[Any]:
    """A turn whose two calls (``f`` then ``g``) carry the id ``dup``, followed by ``results`` results with it."""
    return adapter(provider).same_id_twice(results)


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
    assert kinds(report) == ["assigned_id"] + list(adapter(provider).renamed_result_fixes)
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
    return adapter(provider).render_model(at)


def _arguments(kind: str, text: bool) -> dict[str, Any]:
    return {} if kind == "missing" else {"v": _ARGS[kind][0 if text else 1]}


def _render_calls(provider: str, calls: list[Any], extra: bool, at: int) -> list[Any]:
    return adapter(provider).render_calls(calls, extra, at, _arguments)


def _render_results(provider: str, results: list[Any], odd: bool) -> list[Any]:
    return adapter(provider).render_results(results, odd)


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


@pytest.mark.parametrize("provider,echo_ids", [(p, True) for p in DIALECTS]
                         + [(p, False) for p in DIALECTS if adapter(p).echo_ids_matter])
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
    msgs = conversation(provider)[:adapter(provider).surrogate_prefix]
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
