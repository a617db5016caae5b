"""Each ToolResult carries its call's whole path through the state machine, parsing and dispatch."""

from __future__ import annotations

import toolwire

from .tools_demo import DemoWorld, anthropic_turn


def test_a_run_call_goes_announced_to_answered_through_dispatched():
    """A call that ran: announced, accumulating, complete, dispatched, answered."""
    world = DemoWorld()
    (result,) = toolwire.Dispatcher(world.registry()).run(
        anthropic_turn(("toolu_1", "lookup_demo_value", '{"key": "height"}')), conversation_id="c")
    assert result.kind is toolwire.ResultKind.OK
    assert result.states == ["announced", "accumulating", "complete", "dispatched", "answered"]
    assert [t.trigger for t in result.history] == ["receive", "finish", "dispatch", "answer"]


def test_a_rejected_call_goes_through_rejected_and_a_truncated_one_stops_there():
    """An unknown tool is rejected then answered; a truncated call's path ends at truncated (never dispatched)."""
    world = DemoWorld()
    (rejected,) = toolwire.Dispatcher(world.registry()).run(
        anthropic_turn(("toolu_1", "search_foodz", '{"query": "arroz"}')), conversation_id="c")
    assert rejected.kind is toolwire.ResultKind.UNKNOWN_TOOL
    assert rejected.states[-2:] == ["rejected", "answered"]
    (cut,) = toolwire.Dispatcher(world.registry()).run(
        anthropic_turn(("toolu_2", "lookup_demo_value", '{"key": "hei'), stop_reason=None, stop_last=False),
        conversation_id="c")
    assert cut.kind is toolwire.ResultKind.NOT_RUN
    assert cut.states[-1] == "truncated" and "dispatched" not in cut.states
