"""encode_results and history_messages for all five dialects: every result kind, call order, pairing by
local_id, the replay of the assistant message, and conformance to the official SDKs' request types.

Conformance is checked twice: with pydantic ``TypeAdapter`` over the SDK's param type (as the issue asks), and
with ``sdk_problems`` below, a strict walk of the same type hints that also fails on keys the TypedDict does not
declare (pydantic ignores unknown TypedDict keys, and validates ``Iterable`` fields lazily, so a misspelt field
name would pass it). Gemini contents go through ``google.genai.types.Content.model_validate_json`` on the
camelCase JSON (its models forbid unknown fields).
"""

from __future__ import annotations

import inspect
import json
from typing import Any

import msgspec
import pydantic
import pytest

import toolwire
from toolwire import CallKind, CallState, ResultKind, ToolResult, UsageError
from toolwire.registry import Decision, Dispatcher, Registry, Tool

from .dialects import CONTENT, REGISTERED, SIG, adapter, results_for
from .dialects.anthropic import REDACTED, THINKING, anthropic_turn  # noqa: F401 - for the regression tests
from .dialects.gemini import gemini_content, gemini_turn
from .dialects.gemini_interactions import interactions_turn
from .dialects.openai_chat import chat_turn, without_chat_extensions  # noqa: F401
from .dialects.openai_responses import REASONING, responses_body, responses_member, responses_turn  # noqa: F401
from .wire import chunk, sse, tc

K = ResultKind
#: every registered dialect: the suites below run for each, through its test adapter (tests/dialects)
DIALECTS = REGISTERED


def check_sdk(provider: str, message: Any) -> None:
    """One message (Chat, Anthropic, Gemini) or item/step (Responses, Interactions) fits the official SDK."""
    adapter(provider).check_sdk(message)


# ==== turns parsed from small streams, one per dialect ===========================================================
# Each has three calls: get_weather (valid arguments), lookup (arguments that do not parse), get_time ({}).
TURNS = {d: (lambda d=d: adapter(d).turn()) for d in DIALECTS}
#: the turn cut by the dialect's token limit
CUT = {d: (lambda d=d: adapter(d).cut_turn()) for d in DIALECTS}


# ==== results ======================================================================================================
def expected_text(result: ToolResult) -> str:
    return result.content if isinstance(result.content, str) else json.dumps(result.content,
                                                                             separators=(",", ":"))


def only(encoded: list[dict]) -> dict:
    """The one message of an Anthropic or Gemini answer (a user message / content holding every result)."""
    assert isinstance(encoded, list) and len(encoded) == 1
    return encoded[0]


def answered(provider: str, encoded: Any) -> list[tuple[str | None, Any, bool]]:
    """(id, content, is_error) of each result in an encoded answer (a list of messages), in order."""
    return adapter(provider).answered(encoded)


def check_answer(provider: str, turn: toolwire.Turn, encoded: Any, results: list[ToolResult]) -> None:
    """The provider's rules for an encoded answer, and the SDK types."""
    by_local = {r.local_id: r for r in results}
    got = answered(provider, encoded)
    assert [g[0] for g in got] == [c.call_id for c in turn.calls]  # call order, under the calls' own ids
    for (_, content, err), call in zip(got, turn.calls):
        r = by_local[call.local_id]
        assert content == adapter(provider).content_of(r, expected_text)
        if err is not None:
            assert err is r.is_error
    adapter(provider).check_answer(turn, encoded, results)
    for message in encoded:
        check_sdk(provider, message)


# ==== every dialect × every result kind ============================================================================
@pytest.mark.parametrize("kind", list(K), ids=lambda k: k.value)
@pytest.mark.parametrize("provider", DIALECTS)
def test_every_kind_is_encoded_in_call_order_and_fits_the_sdk(provider, kind):
    """Results of each kind given in reverse order come out in call order, flagged, and fit the SDK types."""
    turn = TURNS[provider]()
    assert len(turn.calls) == 3
    results = results_for(turn, kind)
    encoded = toolwire.encode_results(turn, results)
    check_answer(provider, turn, encoded, results)


@pytest.mark.parametrize("kind", list(K), ids=lambda k: k.value)
@pytest.mark.parametrize("provider", DIALECTS)
def test_every_kind_history_fits_the_sdk(provider, kind):
    """history_messages (replayed assistant message, then the results) validates message by message."""
    turn = TURNS[provider]()
    msgs = toolwire.history_messages(turn, results_for(turn, kind))
    for m in msgs:
        check_sdk(provider, m)
    assert_history_shape(provider, turn, msgs)


def assert_history_shape(provider: str, turn: toolwire.Turn, msgs: list[Any]) -> None:
    """The replay comes first and the answer right after it, every call answered once."""
    adapter(provider).history_shape(turn, msgs)


# ==== content forms ================================================================================================
@pytest.mark.parametrize("content", [{"a": [1, 2]}, [1, "two"], 42, True, None, "plain text", ""],
                         ids=["object", "list", "number", "bool", "null", "text", "empty"])
@pytest.mark.parametrize("provider", DIALECTS)
def test_any_json_content_is_encoded_in_the_form_the_wire_needs(provider, content):
    """Any JSON value is JSON text where the wire needs a string and an object elsewhere (Gemini: {"output": v})."""
    turn = TURNS[provider]()
    results = results_for(turn, K.OK, content)
    encoded = toolwire.encode_results(turn, results)
    check_answer(provider, turn, encoded, results)
    adapter(provider).check_json_content(encoded, content)


@pytest.mark.parametrize("provider", DIALECTS)
def test_empty_error_content_becomes_a_message(provider):
    """An error result with empty content is sent with a non-empty message (Anthropic refuses empty errors)."""
    turn = TURNS[provider]()
    results = results_for(turn, K.HANDLER_FAILED, "")
    got = answered(provider, toolwire.encode_results(turn, results))
    assert all(isinstance(c, str) and c.strip() for _, c, _ in got)


def test_non_json_content_is_sent_as_its_text():
    """A content msgspec cannot encode is sent as its str, never raised."""
    turn = chat_turn()

    class Odd:
        def __str__(self) -> str:
            return "odd value"

    results = results_for(turn, K.OK, Odd())
    assert [m["content"] for m in toolwire.encode_results(turn, results)] == ["odd value"] * 3


# ==== results from a real Dispatcher ===============================================================================
def get_weather(city: str) -> dict:
    """Current weather of a city."""
    return {"city": city, "temp_c": 21}


def lookup(key: str) -> str:
    """Look a value up."""
    return "170 cm"


def get_time() -> str:
    """The time."""
    raise RuntimeError("clock unavailable")


def dispatcher(policy: Any = None) -> Dispatcher:
    tools = [Tool.from_function(get_weather, effect="read"), Tool.from_function(lookup, effect="read"),
             Tool.from_function(get_time, effect="read")]
    return Dispatcher(Registry(tools), policy=policy, read_retries=0, backoff=0)


@pytest.mark.parametrize("provider", DIALECTS)
def test_dispatcher_results_are_encoded_per_call(provider):
    """Dispatcher.run on a parsed turn gives ok / invalid_arguments / handler_failed, and each lands on its call."""
    turn = TURNS[provider]()
    results = dispatcher().run(turn, conversation_id="c1")
    assert [r.kind for r in results] == [K.OK, K.INVALID_ARGUMENTS, K.HANDLER_FAILED]
    encoded = toolwire.encode_results(turn, results)
    check_answer(provider, turn, encoded, results)
    msgs = toolwire.history_messages(turn, results)
    for m in msgs:
        check_sdk(provider, m)


@pytest.mark.parametrize("provider", DIALECTS)
def test_dispatcher_denied_and_approval_required_are_encoded(provider):
    """A policy's deny and needs-approval verdicts are answered as errors under their calls' ids."""
    def policy(call, ctx):
        return {"get_weather": Decision.needs_approval("costs money"), "get_time": Decision.deny("no")}.get(
            call.name, Decision.allow())

    turn = TURNS[provider]()
    results = dispatcher(policy).run(turn, conversation_id="c1")
    assert [r.kind for r in results] == [K.APPROVAL_REQUIRED, K.INVALID_ARGUMENTS, K.DENIED]
    check_answer(provider, turn, toolwire.encode_results(turn, results), results)


@pytest.mark.parametrize("provider", DIALECTS)
def test_truncated_turn_answers_every_call_not_run(provider):
    """A turn cut by its token limit runs nothing and every call is replayed and answered not_run."""
    turn = CUT[provider]()
    assert not turn.finished_cleanly
    results = dispatcher().run(turn, conversation_id="c1")
    assert {r.kind for r in results} == {K.NOT_RUN}
    msgs = toolwire.history_messages(turn, results)
    for m in msgs:
        check_sdk(provider, m)
    assert_history_shape(provider, turn, msgs)


@pytest.mark.parametrize("provider", DIALECTS)
def test_unknown_tool_from_dispatcher_is_answered(provider):
    """A call naming no registered tool is answered unknown_tool under its own id."""
    turn = TURNS[provider]()
    tools = [Tool.from_function(get_weather, effect="read")]
    results = Dispatcher(Registry(tools), read_retries=0).run(turn, conversation_id="c1")
    assert [r.kind for r in results] == [K.OK, K.UNKNOWN_TOOL, K.UNKNOWN_TOOL]
    check_answer(provider, turn, toolwire.encode_results(turn, results), results)


# ==== pairing ======================================================================================================
@pytest.mark.parametrize("provider", DIALECTS)
def test_missing_results_are_answered_with_an_error(provider):
    """A call that has no result in ``results`` is still answered, with an error saying none was recorded."""
    turn = TURNS[provider]()
    results = [r for r in results_for(turn, K.OK) if r.local_id == turn.calls[1].local_id]
    got = answered(provider, toolwire.encode_results(turn, results))
    assert len(got) == 3
    assert "no result was recorded for this call" in json.dumps(got[0][1])
    assert "no result was recorded for this call" in json.dumps(got[2][1])
    assert got[1][1] != got[0][1]


def test_pairing_is_by_local_id_not_position():
    """Results are matched to calls by local_id: swapping two results in the list swaps nothing on the wire."""
    turn = chat_turn()
    a, b, c = turn.calls
    results = [ToolResult(call_id=b.call_id, local_id=b.local_id, name=b.name, content="B", is_error=False,
                          kind=K.OK),
               ToolResult(call_id=a.call_id, local_id=a.local_id, name=a.name, content="A", is_error=False,
                          kind=K.OK),
               ToolResult(call_id=c.call_id, local_id=c.local_id, name=c.name, content="C", is_error=False,
                          kind=K.OK)]
    assert [(m["tool_call_id"], m["content"]) for m in toolwire.encode_results(turn, results)] == [
        ("call_a", "A"), ("call_b", "B"), ("call_c", "C")]


def test_misuse_raises_usage_error():
    """Unknown local ids, two results for one call, results of another turn, non-results and empty turns raise."""
    turn = chat_turn()
    good = results_for(turn, K.OK)
    with pytest.raises(UsageError, match="no call of this turn"):
        toolwire.encode_results(turn, [ToolResult(call_id="x", local_id="tw-99", name="get_time", content="",
                                                  is_error=False, kind=K.OK)])
    with pytest.raises(UsageError, match="two results"):
        toolwire.encode_results(turn, good + good[:1])
    other = ToolResult(call_id="call_zzz", local_id=turn.calls[0].local_id, name="get_weather", content="",
                       is_error=False, kind=K.OK)
    with pytest.raises(UsageError, match="another turn"):
        toolwire.encode_results(turn, [other])
    renamed = ToolResult(call_id=None, local_id=turn.calls[0].local_id, name="lookup", content="",
                         is_error=False, kind=K.OK)
    with pytest.raises(UsageError, match="another turn"):
        toolwire.encode_results(turn, [renamed])
    with pytest.raises(UsageError, match="ToolResult"):
        toolwire.encode_results(turn, [{"call_id": "call_a"}])
    empty = toolwire.parse("openai-chat", sse(chunk(content="hi"), chunk(finish="stop"), "[DONE]"))
    with pytest.raises(UsageError, match="no call"):
        toolwire.encode_results(empty, [])
    with pytest.raises(UsageError, match="unknown provider"):
        toolwire.repair_history("mistral", [])


def test_a_turn_without_calls_replays_just_its_message():
    """history_messages of a text-only turn is its assistant message alone."""
    turn = toolwire.parse("openai-chat", sse(chunk(content="hi"), chunk(finish="stop"), "[DONE]"))
    assert toolwire.history_messages(turn, []) == [{"role": "assistant", "content": "hi"}]


def test_turn_without_assistant_message_cannot_be_replayed():
    """A turn with no assistant message (a streaming-mode parse) raises UsageError in history_messages."""
    turn = chat_turn()
    bare = toolwire.Turn(provider=turn.provider, calls=turn.calls, finish_reason=turn.finish_reason)
    with pytest.raises(UsageError, match="no assistant message"):
        toolwire.history_messages(bare, results_for(turn, K.OK))


# ==== ids ==========================================================================================================
def test_chat_call_without_id_gets_the_same_synthetic_id_in_replay_and_result():
    """A Chat server that sends no ids (vLLM): the replayed call and its tool message share a synthetic id."""
    turn = chat_turn(ids=False)
    assert [c.call_id for c in turn.calls] == [None, None, None]
    msgs = toolwire.history_messages(turn, results_for(turn, K.OK))
    ids = [t["id"] for t in msgs[0]["tool_calls"]]
    assert len(set(ids)) == 3 and all(ids)
    assert [m["tool_call_id"] for m in msgs[1:]] == ids
    assert toolwire.encode_results(turn, results_for(turn, K.OK)) == msgs[1:]
    for m in msgs:
        check_sdk("openai-chat", m)


def test_gemini_ids_echoed_only_when_present_and_wanted():
    """functionResponse.id is the call's id when it had one; absent for id-less calls and with echo_ids=False."""
    with_ids = gemini_turn()
    parts = only(toolwire.encode_results(with_ids, results_for(with_ids, K.OK)))["parts"]
    assert [p["functionResponse"]["id"] for p in parts] == ["g_a", "g_b", "g_c"]
    parts = only(toolwire.encode_results(with_ids, results_for(with_ids, K.OK), echo_ids=False))["parts"]
    assert all("id" not in p["functionResponse"] for p in parts)
    no_ids = gemini_turn(ids=False)
    parts = only(toolwire.encode_results(no_ids, results_for(no_ids, K.OK)))["parts"]
    assert all("id" not in p["functionResponse"] for p in parts)
    assert [p["functionResponse"]["name"] for p in parts] == ["get_weather", "lookup", "get_time"]
    gemini_content(only(toolwire.encode_results(no_ids, results_for(no_ids, K.OK))))


# ==== replay ========================================================================================================
def test_chat_replay_keeps_extra_content_and_reasoning_content():
    """Chat: Gemini's extra_content thought signature and DeepSeek's reasoning_content are replayed."""
    extra = {"google": {"thought_signature": SIG}}
    first = chunk(tc(0, "call_a", "get_weather", '{"city":"Paris"}'))
    first["choices"][0]["delta"]["tool_calls"][0]["extra_content"] = extra
    first["choices"][0]["delta"]["reasoning_content"] = "thinking about weather"
    turn = toolwire.parse("openai-chat", sse(first, chunk(finish="tool_calls"), "[DONE]"))
    msgs = toolwire.history_messages(turn, results_for(turn, K.OK))
    assert msgs[0]["tool_calls"][0]["extra_content"] == extra
    assert msgs[0]["reasoning_content"] == "thinking about weather"
    check_sdk("openai-chat", msgs[0])


def test_chat_custom_tool_call_is_answered_with_a_tool_message():
    """Chat custom tool calls keep their free-text input and get a tool message."""
    body = {"id": "chatcmpl-1", "object": "chat.completion", "choices": [{"index": 0, "finish_reason": "tool_calls",
            "message": {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_sql", "type": "custom", "custom": {"name": "run_sql", "input": "SELECT 1"}}]}}]}
    turn = toolwire.parse("openai-chat", json.dumps(body).encode(), format="json")
    assert turn.calls[0].kind is CallKind.CUSTOM
    msgs = toolwire.history_messages(turn, results_for(turn, K.OK, "1 row"))
    assert msgs[0]["tool_calls"][0]["custom"] == {"name": "run_sql", "input": "SELECT 1"}
    assert msgs[1] == {"role": "tool", "tool_call_id": "call_sql", "content": "1 row"}
    for m in msgs:
        check_sdk("openai-chat", m)


def test_assistant_message_of_the_turn_is_not_mutated():
    """history_messages works on a copy: the turn's assistant message keeps the arguments as received."""
    turn = chat_turn()
    before = json.dumps(turn.assistant_message)
    toolwire.history_messages(turn, results_for(turn, K.OK))
    assert json.dumps(turn.assistant_message) == before


def test_gemini_replay_keeps_the_signature_on_its_part():
    """Gemini: the model content is replayed part for part; the signature stays on the first call's part."""
    turn = gemini_turn()
    model, _ = toolwire.history_messages(turn, results_for(turn, K.OK))
    assert model["parts"][0] == {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}, "id": "g_a"},
                                 "thoughtSignature": SIG}
    assert all("thoughtSignature" not in p for p in model["parts"][1:])
    gemini_content(model)


def test_interactions_replay_keeps_the_thought_step_and_signature():
    """Interactions: the signed thought step is replayed before the function_call steps."""
    turn = interactions_turn()
    steps = toolwire.history_messages(turn, results_for(turn, K.OK))
    assert steps[0] == {"type": "thought", "signature": SIG}
    assert [s["type"] for s in steps] == ["thought"] + ["function_call"] * 3 + ["function_result"] * 3


# ==== Responses: custom and provider-defined tools ================================================================
SHELL_ACTION = {"type": "exec", "command": ["ls", "-la"], "env": {}}


def _builtin_turn(item: dict) -> toolwire.Turn:
    turn = responses_body(item)
    assert [c.kind for c in turn.calls] == [CallKind.BUILTIN]
    return turn


BUILTINS = {
    "local_shell_call": {"type": "local_shell_call", "id": "lsh_1", "call_id": "call_ls", "status": "completed",
                         "action": SHELL_ACTION},
    "shell_call": {"type": "shell_call", "id": "sh_1", "call_id": "call_sh", "status": "completed",
                   "action": {"commands": ["ls"], "timeout_ms": 1000, "max_output_length": 4096}},
    "apply_patch_call": {"type": "apply_patch_call", "id": "ap_1", "call_id": "call_ap", "status": "completed",
                         "operation": {"type": "update_file", "path": "a.py", "diff": "@@ -1 +1 @@\n-a\n+b\n"}},
    "computer_call": {"type": "computer_call", "id": "cu_1", "call_id": "call_cu", "status": "completed",
                      "pending_safety_checks": [], "action": {"type": "screenshot"}},
    "tool_search_call": {"type": "tool_search_call", "id": "ts_1", "call_id": "call_ts", "execution": "client",
                         "status": "completed", "arguments": {"query": "weather"}},
}
BUILTIN_OK = {
    "local_shell_call": {"stdout": "a.py\n", "exit_code": 0},
    "shell_call": [{"stdout": "a.py\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}],
    "apply_patch_call": "patched a.py",
    "computer_call": {"image_url": "data:image/png;base64,iVBORw0KGgo=",
                      "acknowledged_safety_checks": [{"id": "sc_1", "code": "x", "message": "ok"}]},
    "tool_search_call": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"},
                          "strict": False}],
}


@pytest.mark.parametrize("kind", [K.OK, K.HANDLER_FAILED, K.HANDLER_TIMEOUT, K.NOT_RUN], ids=lambda k: k.value)
@pytest.mark.parametrize("item_type", list(BUILTINS))
def test_responses_builtin_calls_get_their_output_item_type(item_type, kind):
    """Each provider-defined call gets its own *_output item, with a user note when the item cannot carry text."""
    turn = _builtin_turn(BUILTINS[item_type])
    content = BUILTIN_OK[item_type] if kind is K.OK else CONTENT[kind]
    encoded = toolwire.encode_results(turn, results_for(turn, kind, content))
    out = encoded[0]
    assert out["type"] == {"local_shell_call": "local_shell_call_output", "shell_call": "shell_call_output",
                           "apply_patch_call": "apply_patch_call_output", "computer_call": "computer_call_output",
                           "tool_search_call": "tool_search_output"}[item_type]
    assert out.get("call_id", out.get("id")) == BUILTINS[item_type]["call_id"]
    for item in encoded:
        check_sdk("openai-responses", item)
    notes = encoded[1:]
    cannot_carry_text = item_type in ("computer_call", "tool_search_call") and kind is not K.OK
    assert len(notes) == (1 if cannot_carry_text else 0)
    if notes:
        assert notes[0]["role"] == "user" and CONTENT[kind] in notes[0]["content"]
    if item_type == "shell_call" and kind is not K.OK:
        assert out["output"][0]["stderr"] == CONTENT[kind]
        assert out["output"][0]["outcome"]["type"] == ("timeout" if kind is K.HANDLER_TIMEOUT else "exit")
    if item_type == "apply_patch_call":
        assert out["status"] == ("completed" if kind is K.OK else "failed")
    msgs = toolwire.history_messages(turn, results_for(turn, kind, content))
    assert msgs[0] == BUILTINS[item_type]
    for m in msgs:
        check_sdk("openai-responses", m)


def test_responses_custom_tool_call_is_answered_with_custom_tool_call_output():
    """A custom tool call gets custom_tool_call_output with text output, its free-text input replayed."""
    item = {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_sql", "name": "run_sql",
            "input": "SELECT 1 -- not JSON"}
    turn = responses_body(item)
    msgs = toolwire.history_messages(turn, results_for(turn, K.OK, [{"n": 1}]))
    assert msgs == [item, {"type": "custom_tool_call_output", "call_id": "call_sql", "output": '[{"n":1}]'}]
    for m in msgs:
        check_sdk("openai-responses", m)


def test_responses_computer_call_needs_a_screenshot():
    """An ok computer result that is no screenshot gets the blank screenshot and a note (never a wrong shape)."""
    turn = _builtin_turn(BUILTINS["computer_call"])
    encoded = toolwire.encode_results(turn, results_for(turn, K.OK, "clicked"))
    assert encoded[0]["output"]["type"] == "computer_screenshot"
    assert "clicked" in encoded[1]["content"]


def test_responses_results_answer_call_id_not_item_id():
    """Outputs carry the call's call_id (call_…), never the item id (fc_…)."""
    turn = responses_turn()
    encoded = toolwire.encode_results(turn, results_for(turn, K.OK))
    assert [o["call_id"] for o in encoded] == ["call_a", "call_b", "call_c"]
    assert all(not o["call_id"].startswith("fc_") for o in encoded)


def test_state_of_calls_does_not_change():
    """Encoding does not touch the calls' state machines (answering is the dispatcher's job)."""
    turn = chat_turn()
    toolwire.history_messages(turn, results_for(turn, K.OK))
    assert [c.state for c in turn.calls] == [CallState.COMPLETE] * 3


#: one wrong field name or shape per case, in every dialect's answer (its adapter's misspellings)
MISSPELT = {name: (d, mutate) for d in DIALECTS for name, mutate in adapter(d).misspellings().items()}


@pytest.mark.parametrize("case", list(MISSPELT))
def test_the_sdk_check_catches_a_misspelt_field(case):
    """The conformance check is not vacuous: one wrong field name or shape in an answer fails it."""
    provider, mutate = MISSPELT[case]
    turn = TURNS[provider]()
    bad = mutate(toolwire.encode_results(turn, results_for(turn, K.OK)))
    with pytest.raises((AssertionError, pydantic.ValidationError)):
        for message in bad:
            check_sdk(provider, message)


# ==== several choices (Chat n > 1, Gemini candidates) ================================================================
#: the dialects whose responses can carry several choices: a turn of two choices, and the call ids of each
MULTI = {d: adapter(d).two_choices for d in DIALECTS if adapter(d).multi_choice}
MULTI_IDS = {d: adapter(d).choice_ids for d in MULTI}


def choice_results(turn: toolwire.Turn, choice: int) -> list[ToolResult]:
    """What a dispatcher that ran choice ``choice`` returns: one ok result per call of that choice (reversed)."""
    return [ToolResult(call_id=c.call_id, local_id=c.local_id, name=c.name, content=f"ran {c.name}",
                       is_error=False, kind=K.OK) for c in turn.choice_calls(choice)][::-1]


def replayed_ids(provider: str, message: Any) -> list[str]:
    """The call ids in a replayed assistant message (Chat) or model content (Gemini)."""
    return adapter(provider).replayed_ids(message)


@pytest.mark.parametrize("provider", list(MULTI))
def test_each_choice_carries_its_own_assistant_message(provider):
    """Every choice of a multi-choice turn has its own assistant message, fit for the SDK; the turn's is choice 0's."""
    turn = MULTI[provider]()
    assert [ch.index for ch in turn.choices] == [0, 1]
    assert [replayed_ids(provider, ch.assistant_message) for ch in turn.choices] == list(MULTI_IDS[provider])
    assert turn.assistant_message == turn.choices[0].assistant_message
    for ch in turn.choices:
        check_sdk(provider, ch.assistant_message)
    adapter(provider).check_choices(turn)


@pytest.mark.parametrize("provider", list(MULTI))
def test_results_of_a_later_choice_answer_its_calls_and_replay_its_message(provider):
    """Results for the calls of choice 1 (what a dispatcher that ran choice 1 returns) answer exactly those calls,
    in call order, after choice 1's assistant message; nothing of choice 0 is replayed or answered."""
    turn = MULTI[provider]()
    results = choice_results(turn, 1)
    first_ids, second_ids = MULTI_IDS[provider]
    encoded = toolwire.encode_results(turn, results)
    got = answered(provider, encoded)
    assert [g[0] for g in got] == second_ids
    assert [g[1] for g in got] == ["ran get_time", "ran lookup"]
    msgs = toolwire.history_messages(turn, results)
    assert msgs[0] == turn.choices[1].assistant_message
    assert replayed_ids(provider, msgs[0]) == second_ids
    assert msgs[1:] == encoded
    for m in msgs:
        check_sdk(provider, m)
    assert not set(first_ids) & set(json.dumps(msgs).split('"'))
    # and the first choice, as before
    msgs = toolwire.history_messages(turn, choice_results(turn, 0))
    assert replayed_ids(provider, msgs[0]) == first_ids
    assert [g[0] for g in answered(provider, msgs[1:])] == first_ids


@pytest.mark.parametrize("provider", list(MULTI))
def test_results_spanning_two_choices_are_a_usage_error(provider):
    """Results for calls of two choices cannot be one answer: both entry points refuse them and name the choices."""
    turn = MULTI[provider]()
    both = choice_results(turn, 0) + choice_results(turn, 1)
    with pytest.raises(UsageError, match=r"choices 0 and 1"):
        toolwire.encode_results(turn, both)
    with pytest.raises(UsageError, match=r"choices 0 and 1"):
        toolwire.history_messages(turn, both)


@pytest.mark.parametrize("provider", list(MULTI))
def test_a_call_of_the_chosen_choice_without_a_result_is_answered_with_an_error(provider):
    """A call of the chosen choice that has no result is still answered (its message replays it); other choices'
    calls are not."""
    turn = MULTI[provider]()
    lookup = [r for r in choice_results(turn, 1) if r.name == "lookup"]
    got = answered(provider, toolwire.encode_results(turn, lookup))
    assert [g[0] for g in got] == MULTI_IDS[provider][1]
    assert "no result was recorded for this call" in json.dumps(got[0][1])
    assert got[1][1] == "ran lookup"


@pytest.mark.parametrize("provider", list(MULTI))
def test_without_results_the_first_choice_is_replayed(provider):
    """No results: choice 0 is replayed and each of its calls answered with an error."""
    turn = MULTI[provider]()
    msgs = toolwire.history_messages(turn, [])
    assert msgs[0] == turn.choices[0].assistant_message
    got = answered(provider, msgs[1:])
    assert [g[0] for g in got] == MULTI_IDS[provider][0]
    assert "no result was recorded for this call" in json.dumps(got)


@pytest.mark.parametrize("provider", list(MULTI))
def test_a_choice_without_an_assistant_message_cannot_be_replayed(provider):
    """A hand-built turn whose chosen choice has no assistant message: history_messages raises UsageError naming
    the choice, encode_results still answers."""
    turn = MULTI[provider]()
    bare = msgspec.structs.replace(turn, choices=[msgspec.structs.replace(ch, assistant_message=None)
                                                  for ch in turn.choices])
    results = choice_results(bare, 1)
    with pytest.raises(UsageError, match="choice 1"):
        toolwire.history_messages(bare, results)
    assert [g[0] for g in answered(provider, toolwire.encode_results(bare, results))] == MULTI_IDS[provider][1]
    # choice 0 falls back to the turn's assistant message
    assert toolwire.history_messages(bare, choice_results(bare, 0))[0] == turn.assistant_message


@pytest.mark.parametrize("provider", DIALECTS)
def test_a_result_for_a_call_of_no_choice_is_a_usage_error(provider):
    """A result whose call is not in the turn (under any choice) is refused, in every dialect."""
    turn = TURNS[provider]()
    stranger = ToolResult(call_id="call_zzz", local_id="tw-99", name="get_time", content="", is_error=False,
                          kind=K.OK)
    with pytest.raises(UsageError, match="no call of this turn"):
        toolwire.encode_results(turn, results_for(turn, K.OK) + [stranger])
    with pytest.raises(UsageError, match="no call of this turn"):
        toolwire.history_messages(turn, [stranger])


@pytest.mark.parametrize("provider", list(MULTI))
def test_dispatcher_results_for_one_choice_are_answered(provider):
    """End to end: the dispatcher runs choice 1 and its results become the history of choice 1."""
    if "choice" not in inspect.signature(Dispatcher.run).parameters:
        pytest.skip("this Dispatcher runs every choice")
    turn = MULTI[provider]()
    results = dispatcher().run(turn, conversation_id="c1", choice=1)
    assert [r.local_id for r in results] == [c.local_id for c in turn.choice_calls(1)]
    msgs = toolwire.history_messages(turn, results)
    assert replayed_ids(provider, msgs[0]) == MULTI_IDS[provider][1]
    for m in msgs:
        check_sdk(provider, m)
