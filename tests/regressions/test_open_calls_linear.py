"""Many calls open at once, or many choices, cost work linear in the response, and choices are capped.

Every ``feed()`` used to walk every open call and every choice (the assembler's event pass), and a choice's end
walked the calls of every choice, so a response that holds many calls open (Chat keeps each open until its
``finish_reason``; any dialect may start many blocks before it stops them) or many choices cost the square of
its size. Work is counted as the Python lines executed (``sys.settrace``), the same on every run of the same
input, never timed: streams from ``bench/open_calls.py``, fed one provider event per ``feed()``, for every
dialect. ``max_choices`` (default 128) caps the choices (Chat ``choices``, Gemini ``candidates``) of one
response: over it the turn records ``limit_exceeded`` and nothing runs.
"""

from __future__ import annotations

import gc
import json
import sys
from typing import Any, Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import toolwire
from bench import open_calls as oc
from toolwire import UsageError
from toolwire.codecs import dialect_for

from ..test_codec_gemini import sse as gemini_sse
from ..wire import chunk, sse, tc
from .streams import MODES, Spy

#: the documented default of ``max_choices``
DEFAULT_MAX_CHOICES = 128

CASES = [(d, s) for d, shapes in oc.DIALECT_SHAPES.items() for s in shapes]


def _lines_executed(fn: Callable[[], Any]) -> int:
    """The Python lines ``fn`` executes, counted by a trace function (deterministic for a given input; the
    garbage collector is off meanwhile, so that no finalizer of an earlier test's objects runs inside)."""
    count = 0

    def trace(frame: Any, event: str, arg: Any) -> Any:
        nonlocal count
        count += 1
        return trace

    gc.collect()
    gc.disable()
    previous = sys.gettrace()
    sys.settrace(trace)
    try:
        fn()
    finally:
        sys.settrace(previous)
        gc.enable()
    return count


def _parse(dialect: str, messages: list[bytes], keep_calls: bool = True, **limits: Any) -> toolwire.Turn:
    parser = toolwire.StreamParser(dialect, format=dialect_for(dialect).codec.stream_format,
                                   keep_calls=keep_calls, **limits)
    for message in messages:
        parser.feed(message)
    parser.close()
    return parser.turn


def test_every_registered_dialect_has_an_open_calls_stream():
    """A new dialect is measured too (by the bench's open-calls lines and by these tests)."""
    assert set(toolwire.PROVIDERS) <= set(oc.DIALECT_SHAPES)


@pytest.mark.parametrize("keep_calls", MODES)
@pytest.mark.parametrize(("dialect", "shape"), CASES)
def test_four_times_the_open_calls_cost_at_most_five_times_the_work(dialect, shape, keep_calls):
    """Fed one event per feed(), 4x the calls (or choices, each with a call) executes at most 5x the lines, and
    every call comes out whole."""
    counts = {}
    for n in (60, 240):
        messages = oc.stream(dialect, shape, n)
        limits = oc.limits_for(shape, n)
        out: list[toolwire.Turn] = []
        counts[n] = _lines_executed(lambda: out.append(_parse(dialect, messages, keep_calls, **limits)))
        turn = out[0]
        assert turn.error is None, turn.error
        if keep_calls:
            assert [c.args for c in turn.calls] == oc.expected(shape, n)
    assert counts[240] <= 5 * counts[60], (dialect, shape, counts, counts[240] / counts[60])


#: the message of each stream fed while all its calls (or choices) are open: a second argument fragment (Gemini
#: calls: a later whole call, every earlier one ended)
def _probe(dialect: str, shape: str, n: int) -> int:
    if shape == "choices":
        return n
    return {"openai-chat": 1 + n, "gemini": n - 2}.get(dialect, 1 + 2 * n)


@pytest.mark.parametrize(("dialect", "shape"), CASES)
def test_one_event_costs_the_same_with_ten_or_four_hundred_calls_open(dialect, shape):
    """The lines one later event executes do not grow with the calls (or choices) already open."""
    cost = {}
    for n in (10, 400):
        messages = oc.stream(dialect, shape, n)
        k = _probe(dialect, shape, n)
        parser = toolwire.StreamParser(dialect, format=dialect_for(dialect).codec.stream_format,
                                       **oc.limits_for(shape, n))
        for message in messages[:k]:
            parser.feed(message)
        events: list[Any] = []
        cost[n] = _lines_executed(lambda: events.extend(parser.feed(messages[k])))
        assert events or dialect == "gemini", (dialect, shape)  # (an argument event, or a call's end)
        for message in messages[k + 1:]:
            parser.feed(message)
        parser.close()
        assert [c.args for c in parser.turn.calls] == oc.expected(shape, n)
    assert cost[400] <= cost[10] + 10, (dialect, shape, cost)


def test_argument_events_of_one_feed_come_in_call_order():
    """Fragments of several open calls in one feed give one ArgumentsReceived per call, in the calls' order
    (announcement order), whatever order the fragments came in."""
    parser = toolwire.StreamParser("openai-chat")
    parser.feed(sse(*(chunk(tc(k, f"call_{k}", "f", '{"k": ')) for k in range(3))))
    events = parser.feed(sse(chunk(tc(2, None, None, "2")), chunk(tc(0, None, None, "0")),
                             chunk(tc(1, None, None, "1")), chunk(tc(0, None, None, "}"))))
    assert [(e.local_id, e.text) for e in events if isinstance(e, toolwire.ArgumentsReceived)] == [
        ("tw-0", "0}"), ("tw-1", "1"), ("tw-2", "2")]


# ---- the cap on choices -----------------------------------------------------------------------------------
def _chat_choices(n: int, *, body: bool = False) -> bytes:
    if body:
        return json.dumps({"id": "c", "object": "chat.completion", "model": "m", "choices": [
            {"index": k, "finish_reason": "tool_calls", "message": {"role": "assistant", "tool_calls": [
                {"id": f"call_{k}", "type": "function", "function": {"name": "f", "arguments": f'{{"k": {k}}}'}}]}}
            for k in range(n)]}).encode()
    return sse(*(chunk(tc(0, f"call_{k}", "f", f'{{"k": {k}}}'), choice=k) for k in range(n)),
               *(chunk(finish="tool_calls", choice=k) for k in range(n)), "[DONE]")


def _gemini_candidates(n: int, *, body: bool = False) -> bytes:
    cands = [{"index": k, "content": {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {"k": k}}}]},
              "finishReason": "STOP"} for k in range(n)]
    if body:
        return json.dumps({"candidates": cands, "modelVersion": "m"}).encode()
    return gemini_sse(*({"candidates": [c]} for c in cands))


CHOICE_DIALECTS = {"openai-chat": _chat_choices, "gemini": _gemini_candidates}


def _run(provider: str, data: bytes, *, body: bool, keep_calls: bool = True, **limits: Any) -> toolwire.Turn:
    parser = toolwire.StreamParser(provider, format="json" if body else "sse", keep_calls=keep_calls, **limits)
    parser.feed(data)
    parser.close()
    return parser.turn


@pytest.mark.parametrize("keep_calls", MODES)
@pytest.mark.parametrize("body", [False, True])
@pytest.mark.parametrize("provider", list(CHOICE_DIALECTS))
def test_choices_up_to_the_default_cap_are_read(provider, body, keep_calls):
    """128 choices (the default cap) are all read, each with its call."""
    turn = _run(provider, CHOICE_DIALECTS[provider](DEFAULT_MAX_CHOICES, body=body), body=body,
                keep_calls=keep_calls)
    assert turn.error is None and turn.finished_cleanly
    assert len(turn.choices) == DEFAULT_MAX_CHOICES
    if keep_calls:
        assert [c.args for c in turn.calls] == [{"k": k} for k in range(DEFAULT_MAX_CHOICES)]


@pytest.mark.parametrize("keep_calls", MODES)
@pytest.mark.parametrize("body", [False, True])
@pytest.mark.parametrize("provider", list(CHOICE_DIALECTS))
def test_a_choice_over_the_default_cap_is_limit_exceeded_and_nothing_runs(provider, body, keep_calls):
    """The 129th choice ends the turn with ``limit_exceeded``: its call is never announced, no call of any choice
    runs (sync and async dispatch)."""
    n = DEFAULT_MAX_CHOICES + 1
    turn = _run(provider, CHOICE_DIALECTS[provider](n, body=body), body=body, keep_calls=keep_calls)
    assert turn.error is not None and turn.error.type == "limit_exceeded"
    assert "max_choices" in turn.error.message
    assert not turn.finished_cleanly and turn.runnable_calls == []
    assert all(c.choice < DEFAULT_MAX_CHOICES for c in turn.calls)
    assert all(not turn.choice_finished_cleanly(i) for i in range(n))
    spy = Spy("f")
    for i in (0, 1, DEFAULT_MAX_CHOICES - 1):
        assert all(kind != "ok" for kind in _dispatch(spy, turn, i))
    assert spy.ran == []


def _dispatch(spy: Spy, turn: toolwire.Turn, choice: int) -> list[str]:
    import asyncio

    from toolwire.registry import Dispatcher

    results = Dispatcher(spy.registry).run(turn, conversation_id="c", choice=choice)
    asyncio.run(Dispatcher(spy.registry).arun(turn, conversation_id="c", choice=choice))
    return [r.kind.value for r in results]


@settings(max_examples=30, deadline=None)
@given(provider=st.sampled_from(list(CHOICE_DIALECTS)), cap=st.integers(1, 6), extra=st.integers(-3, 3),
       body=st.booleans(), cut=st.integers(1, 64))
def test_max_choices_is_the_number_of_choices_a_response_may_have(provider, cap, extra, body, cut):
    """However the response is cut into chunks, up to ``max_choices`` choices it finishes cleanly, with one more
    it records ``limit_exceeded`` and runs nothing."""
    n = max(1, cap + extra)
    data = CHOICE_DIALECTS[provider](n, body=body)
    parser = toolwire.StreamParser(provider, format="json" if body else "sse", max_choices=cap)
    for i in range(0, len(data), cut):
        parser.feed(data[i:i + cut])
    parser.close()
    turn = parser.turn
    if n <= cap:
        assert turn.error is None and [c.args for c in turn.calls] == [{"k": k} for k in range(n)]
    else:
        assert turn.error is not None and turn.error.type == "limit_exceeded"
        assert turn.runnable_calls == [] and all(c.choice < cap for c in turn.calls)


@pytest.mark.parametrize("provider", list(CHOICE_DIALECTS))
def test_parse_takes_max_choices(provider):
    data = CHOICE_DIALECTS[provider](3)
    assert toolwire.parse(provider, data, max_choices=3).error is None
    assert toolwire.parse(provider, data, max_choices=2).error.type == "limit_exceeded"


@pytest.mark.parametrize("bad", [0, -1, True, "10", 1.5, None])
def test_max_choices_that_is_not_an_int_of_at_least_one_is_refused(bad):
    with pytest.raises(UsageError, match=rf"^max_choices must be an int >= 1, got {bad!r}$"):
        toolwire.StreamParser("openai-chat", max_choices=bad)
    with pytest.raises(UsageError, match="^max_choices must"):
        toolwire.parse("gemini", b"{}", max_choices=bad)


def _interactions_event(name: str, body: dict[str, Any]) -> bytes:
    return sse({"event_type": name, **body})


def test_a_thought_signature_costs_the_same_after_ten_or_four_hundred_steps():
    """An Interactions thought's signature goes to the first call after the thought: found without walking every
    step that started, so a signature delta costs the same whatever the steps before it."""
    cost = {}
    for n in (10, 400):
        parser = toolwire.StreamParser("gemini-interactions")
        parser.feed(_interactions_event("interaction.created", {"interaction": {"id": "i1", "status": "in_progress"}}))
        parser.feed(_interactions_event("step.start", {"index": 0, "step": {"type": "thought"}}))
        for k in range(1, n + 1):
            parser.feed(_interactions_event("step.start", {"index": k, "step": {
                "type": "function_call", "id": f"call_{k}", "name": "lookup", "arguments": {"k": k}}}))
        signature = _interactions_event("step.delta", {"index": 0, "delta": {"type": "thought_signature",
                                                                             "signature": "c2ln"}})
        cost[n] = _lines_executed(lambda: parser.feed(signature))
        for k in range(n + 1):
            parser.feed(_interactions_event("step.stop", {"index": k}))
        parser.feed(_interactions_event("interaction.completed", {"interaction": {"id": "i1",
                                                                                  "status": "requires_action"}}))
        parser.close()
        calls = parser.turn.calls
        assert [c.provider_meta.get("thought_signature") for c in calls[:2]] == ["c2ln", None]
        assert calls[0].provider_meta["thought_step"] == 0 and len(parser.turn.runnable_calls) == n
    assert cost[400] <= cost[10] + 10, cost


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 40), order=st.randoms(use_true_random=False), cut=st.integers(20, 4000),
       provider=st.sampled_from(["anthropic", "openai-chat"]))
def test_argument_events_add_up_to_each_calls_arguments_however_many_are_open(n, order, cut, provider):
    """Calls opened, fed and (Anthropic) stopped in a random order, so that the number open goes above and
    below the point where the parser stops looking at each open call: every feed's argument events of the
    calls still open come in call order, and each call's events add up to its arguments, as in one feed of the whole stream."""
    pieces = {k: ['{"k": ', f"{k}", ', "s": "', "x" * (k % 5), '"}'] for k in range(n)}
    started: list[int] = []
    live = list(range(n))
    payloads: list[dict] = []
    chat = provider == "openai-chat"
    if not chat:
        payloads.append({"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant",
                                                             "content": [], "model": "m", "usage": {}}})
    while live:
        k = order.choice(live)
        if k not in started:
            started.append(k)
            payloads.append(chunk(tc(k, f"call_{k}", "f", "")) if chat else {
                "type": "content_block_start", "index": k,
                "content_block": {"type": "tool_use", "id": f"toolu_{k}", "name": "f", "input": {}}})
        elif pieces[k]:
            frag = pieces[k].pop(0)
            payloads.append(chunk(tc(k, None, None, frag)) if chat else {
                "type": "content_block_delta", "index": k, "delta": {"type": "input_json_delta",
                                                                     "partial_json": frag}})
        else:
            live.remove(k)
            if not chat:
                payloads.append({"type": "content_block_stop", "index": k})
    if chat:
        data = sse(*payloads, chunk(finish="tool_calls"), "[DONE]")
    else:
        data = sse(*payloads, {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
                   {"type": "message_stop"})
    parser = toolwire.StreamParser(provider)
    texts: dict[str, list[str]] = {}
    for i in range(0, len(data), cut):
        events = parser.feed(data[i:i + cut])
        ended = {e.call.local_id for e in events if isinstance(e, (toolwire.CallCompleted, toolwire.CallTruncated,
                                                                   toolwire.CallErrored))}
        # (a call that ended in the feed reported its arguments with its end, before the others)
        ids = [int(e.local_id[3:]) for e in events
               if isinstance(e, toolwire.ArgumentsReceived) and e.local_id not in ended]
        assert ids == sorted(set(ids))
        for e in events:
            if isinstance(e, toolwire.ArgumentsReceived):
                texts.setdefault(e.local_id, []).append(e.text)
    parser.close()
    calls = parser.turn.calls
    assert [c.args for c in calls] == [{"k": k, "s": "x" * (k % 5)} for k in started]
    assert all("".join(texts.get(c.local_id, [])) == c.raw_arguments for c in calls)
    assert [c.args for c in toolwire.parse(provider, data).calls] == [c.args for c in calls]
