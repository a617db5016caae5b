"""Regression tests for the dispatch failure modes of docs/failure-modes.md (22, 23, 24, 26, 27, 28).

Each test is named ``test_pitfall_NN_…`` after the entry it pins; the (effect) entries (26, 27) are also checked
over every chunk boundary with hypothesis: however the bytes arrive, nothing runs that must not.
"""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

import toolwire
from toolwire.registry import Decision, Dispatcher, Registry, ResultKind, Tool, ToolNameError

from ..tools_demo import DemoWorld, anthropic_turn, chat_turn
from ..wire import anthropic_events, sse

K = ResultKind
cuts = st.lists(st.integers(min_value=0, max_value=10_000), max_size=12)


def _split(data: bytes, cut_points: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cut_points})
    pieces, prev = [], 0
    for p in points:
        pieces.append(data[prev:p])
        prev = p
    pieces.append(data[prev:])
    return [p for p in pieces if p]


def _code_registry(ran: list[dict]) -> Registry:
    def run_code(code: str) -> str:
        """Run a snippet (records what it was given)."""
        ran.append({"code": code})
        return "done"

    return Registry([Tool.from_function(run_code, effect="write")])


# ---- 22, 23: hallucinated names ------------------------------------------------------------------------------------


def test_pitfall_22_hallucinated_tool_name_becomes_an_error_result():
    """An unknown tool name is answered (unknown_tool, listing the real names), never raised; others still run."""
    world = DemoWorld()
    turn = chat_turn(("call_1", "get_user_height", '{"user": "me"}'),
                     ("call_2", "lookup_demo_value", '{"key": "height"}'))
    results = Dispatcher(world.registry()).run(turn, conversation_id="c")
    assert [r.kind for r in results] == [K.UNKNOWN_TOOL, K.OK]
    assert results[0].call_id == "call_1" and results[0].is_error
    assert "Available tools: lookup_demo_value" in results[0].content
    assert world.calls == {"lookup_demo_value": 1}


def test_pitfall_23_multi_tool_use_parallel_wrapper_is_just_an_unknown_tool():
    """A hallucinated multi_tool_use.parallel wrapper is not unwrapped into real calls: nothing inside runs."""
    world = DemoWorld()
    wrapper = ('{"tool_uses": [{"recipient_name": "functions.save_measurement", "parameters": '
               '{"kind": "weight", "value": 70, "unit": "kg"}}]}')
    turn = chat_turn(("call_1", "multi_tool_use.parallel", wrapper))
    results = Dispatcher(world.registry()).run(turn, conversation_id="c")
    assert [r.kind for r in results] == [K.UNKNOWN_TOOL]
    assert "'multi_tool_use.parallel'" in results[0].content
    assert world.calls == {} and world.effects.count() == 0
    assert toolwire.Registry(world.tools()).get("functions.save_measurement") is None


# ---- 24: call order ------------------------------------------------------------------------------------------------


def test_pitfall_24_results_follow_call_order_not_completion_order():
    """Concurrent reads finishing in reverse order are still answered in call order, under their own ids."""
    def make(name: str, delay: float) -> Tool:
        def handler(args):
            time.sleep(delay)
            return name
        return Tool.from_schema(name, {"type": "object"}, handler, effect="read")

    reg = Registry([make("first", 0.2), make("second", 0.1), make("third", 0.0)])
    turn = anthropic_turn(("toolu_a", "first", "{}"), ("toolu_b", "second", "{}"), ("toolu_c", "third", "{}"))
    results = Dispatcher(reg).run(turn, conversation_id="c")
    assert [(r.call_id, r.content) for r in results] == [("toolu_a", "first"), ("toolu_b", "second"),
                                                          ("toolu_c", "third")]


# ---- 26: calls of a failed attempt never cross the retry -----------------------------------------------------------

FAILED_ATTEMPT = anthropic_events(
    [{"type": "tool_use", "id": "toolu_ok", "name": "run_code", "fragments": ['{"code": "x = 1"}']},
     {"type": "tool_use", "id": "toolu_cut", "name": "run_code", "fragments": ['{"code":"pri'], "stop": False}],
    stop_reason=None, stop=False, message_id="msg_1") + [
    {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}]
RETRY = anthropic_events(
    [{"type": "tool_use", "id": "toolu_new", "name": "run_code", "fragments": ['{"code":"pri', 'nt(1)"}']}],
    message_id="msg_2")


def test_pitfall_26_calls_of_a_failed_attempt_are_never_dispatched():
    """A truncated attempt runs nothing (not even its whole call); the retry runs once with whole arguments."""
    ran: list[dict] = []
    d = Dispatcher(_code_registry(ran))
    failed = toolwire.parse("anthropic", sse(*FAILED_ATTEMPT, events=True))
    assert not failed.finished_cleanly
    assert [r.kind for r in d.run(failed, conversation_id="c")] == [K.NOT_RUN, K.NOT_RUN]
    assert ran == []
    retry = toolwire.parse("anthropic", sse(*RETRY, events=True))
    assert [r.kind for r in d.run(retry, conversation_id="c")] == [K.OK]
    assert ran == [{"code": "print(1)"}]


def test_pitfall_26_a_replayed_stream_in_one_parser_runs_nothing():
    """Feeding the retry into the parser of the failed attempt (the bug) yields a turn that runs nothing."""
    ran: list[dict] = []
    spliced = toolwire.parse("anthropic", sse(*FAILED_ATTEMPT[:-1], events=True) + sse(*RETRY, events=True))
    results = Dispatcher(_code_registry(ran)).run(spliced, conversation_id="c")
    assert all(r.kind is K.NOT_RUN for r in results) and ran == []


@settings(max_examples=60, deadline=None)
@given(cuts)
def test_pitfall_26_failed_attempt_runs_nothing_over_every_chunk_boundary(cut_points):
    """However the failed attempt's bytes are split, none of its calls runs."""
    ran: list[dict] = []
    turn = toolwire.parse("anthropic", _split(sse(*FAILED_ATTEMPT, events=True), cut_points))
    results = Dispatcher(_code_registry(ran)).run(turn, conversation_id="c")
    assert len(results) == len(turn.calls) and all(r.kind is K.NOT_RUN for r in results)
    assert ran == []


# ---- 27: resumed history never approves ----------------------------------------------------------------------------

HISTORY = anthropic_events(
    [{"type": "text", "text": "Saving your weight."},
     {"type": "tool_use", "id": "toolu_pending", "name": "save_measurement",
      "fragments": ['{"kind": "weight", ', '"value": 70, "unit": "kg"}']}])


def _approval_policy(call, ctx):
    return Decision.needs_approval("writes need a person") if ctx.tool.effect == "write" else "allow"


def test_pitfall_27_resumed_history_with_an_unapproved_call_is_not_approved():
    """A conversation resumed from stored history without a token gets approval_required again, never ok."""
    world = DemoWorld()
    d = Dispatcher(world.registry(), policy=_approval_policy)
    first = d.run(toolwire.parse("anthropic", sse(*HISTORY, events=True)), conversation_id="c")
    assert [r.kind for r in first] == [K.APPROVAL_REQUIRED]
    # the process restarts; the history is loaded and the run resumes, with and without bogus approvals
    restarted = Dispatcher(world.registry(), policy=_approval_policy)
    resumed = toolwire.parse("anthropic", sse(*HISTORY, events=True))
    for approvals in ([], [first[0].approval], [{"call_id": "toolu_pending", "approver": "me"}]):
        again = restarted.run(resumed, conversation_id="c", approvals=approvals)
        assert [r.kind for r in again] == [K.APPROVAL_REQUIRED]
    assert world.effects.count() == 0 and world.calls == {}


@settings(max_examples=40, deadline=None)
@given(cuts)
def test_pitfall_27_unapproved_call_stays_unapproved_over_every_chunk_boundary(cut_points):
    """However the history's bytes are split, the pending write is never run without a token."""
    world = DemoWorld()
    turn = toolwire.parse("anthropic", _split(sse(*HISTORY, events=True), cut_points))
    results = Dispatcher(world.registry(), policy=_approval_policy).run(turn, conversation_id="c")
    assert [r.kind for r in results] == [K.APPROVAL_REQUIRED]
    assert world.effects.count() == 0


# ---- 28: names providers reject ------------------------------------------------------------------------------------


def test_pitfall_28_tool_names_providers_reject_fail_at_declaration():
    """A 65-character name, or one with a dot, fails when declared, naming the tool and the rule."""
    def handler(args):
        return None

    long_name = "get_the_current_weather_for_the_city_the_user_mentioned_earlier_x"
    assert len(long_name) == 65
    for bad in (long_name, "weather.get", "1weather"):
        try:
            Tool.from_schema(bad, {"type": "object"}, handler, effect="read")
        except ToolNameError as exc:
            assert exc.tool == bad and "A-Za-z0-9_-" in exc.rule
        else:  # pragma: no cover
            raise AssertionError(f"{bad!r} was accepted")
    assert Tool.from_schema(long_name[:64], {"type": "object"}, handler, effect="read").name == long_name[:64]
