"""Property tests of ``StreamParser`` on generated well-formed streams of both dialects.

(a) Split invariance: any chunking of the bytes (split points inside multi-byte UTF-8 and between CR and LF
    included, with LF, CRLF and lone-CR line ends) gives the same Turn as the whole input, and so does feeding
    one byte at a time.
(b) Prefixes: a stream cut at any byte never has a ``complete`` call whose terminator is not in the prefix, is
    never ``finished_cleanly`` without its end event, and then has no runnable calls.
(c) Events: per call, the ``ArgumentsReceived`` texts concatenate to ``raw_arguments``; one ``CallAnnounced``
    and one terminal event per call; ``close()`` ends with ``TurnFinished``.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

import toolwire
from toolwire import (
    ArgumentsReceived,
    CallAnnounced,
    CallCompleted,
    CallErrored,
    CallState,
    CallTruncated,
    StreamParser,
    TurnFinished,
)

from .streamgen import (
    NEWLINES,
    Encoded,
    anthropic_events,
    calls_strategy,
    chat_events,
    encode_sse,
    fragment_plan,
    unicode_text,
)

PROVIDERS = ("openai-chat", "anthropic")
TERMINAL_EVENTS = (CallCompleted, CallTruncated, CallErrored)


@dataclass
class Case:
    """One generated stream and where, in its bytes, each terminator ends."""

    provider: str
    enc: Encoded
    calls: list
    call_ends: list[int]  # per call: offset after its terminator's data (Chat: finish chunk; Anthropic: block stop)
    turn_end: int  # offset after the end event's data (Chat: the finish chunk; Anthropic: message_stop)
    clean: bool  # the stream's finish reason is a clean one

    @property
    def data(self) -> bytes:
        return self.enc.data


@st.composite
def cases(draw, providers=PROVIDERS, max_calls: int = 4, max_text: int = 20, stops=None) -> Case:
    provider = draw(st.sampled_from(providers))
    chat = provider == "openai-chat"
    calls = draw(calls_strategy(max_calls=max_calls, id_prefix="call_" if chat else "toolu_01"))
    plan = draw(fragment_plan())
    text = draw(st.none() | unicode_text(max_text, 1))
    ensure_ascii = draw(st.booleans())
    newline = draw(st.sampled_from(NEWLINES))
    wire_ascii = draw(st.booleans())
    if chat:
        finish = draw(st.sampled_from(stops or ("tool_calls", "stop")))
        events = chat_events(calls, text=text, finish=finish, plan=plan, ensure_ascii=ensure_ascii,
                             parallel_interleave=draw(st.booleans()), include_usage=draw(st.booleans()),
                             done=draw(st.booleans()))
        enc = encode_sse(events, newline=newline, ensure_ascii=wire_ascii)
        end = enc.end_of(lambda _n, p: isinstance(p, dict) and bool(p["choices"])
                         and p["choices"][0]["finish_reason"] is not None)
        call_ends = [end] * len(calls)
        clean = finish in ("tool_calls", "stop")
    else:
        stop = draw(st.sampled_from(stops or ("tool_use", "end_turn")))
        events = anthropic_events(calls, text=text, thinking=draw(st.booleans()), stop_reason=stop, plan=plan,
                                  ensure_ascii=ensure_ascii, empty_input_as_nothing=draw(st.booleans()))
        enc = encode_sse(events, newline=newline, ensure_ascii=wire_ascii)
        block_of = {p["content_block"]["id"]: p["index"] for n, p in events if n == "content_block_start"
                    and p["content_block"]["type"] == "tool_use"}
        call_ends = [enc.end_of(lambda n, p, i=block_of[cid]: n == "content_block_stop" and p["index"] == i)
                     for cid, _, _ in calls]
        end = enc.end_of(lambda n, _p: n == "message_stop")
        clean = stop in ("tool_use", "end_turn")
    return Case(provider, enc, calls, call_ends, end, clean)


def interesting_points(data: bytes) -> list[int]:
    """Offsets inside a multi-byte UTF-8 character or between CR and LF."""
    return [i for i in range(1, len(data))
            if 0x80 <= data[i] <= 0xBF or (data[i - 1:i + 1] == b"\r\n")]


@st.composite
def split_points(draw, data: bytes) -> list[int]:
    points = draw(st.lists(st.integers(0, len(data)), max_size=40), label="random splits")
    special = interesting_points(data)
    if special:
        points += draw(st.lists(st.sampled_from(special), max_size=20), label="splits in UTF-8 / CRLF")
    return points


def chunked(data: bytes, points) -> list[bytes]:
    cuts = sorted({p for p in points if 0 < p < len(data)})
    out, last = [], 0
    for p in cuts:
        out.append(data[last:p])
        last = p
    out.append(data[last:])
    return out


def run(provider: str, chunks) -> tuple[toolwire.Turn, list, list]:
    """Feed ``chunks``; return the final turn, the events of all feeds, and the events of close()."""
    parser = StreamParser(provider, format="sse")
    fed = []
    for c in chunks:
        fed.extend(parser.feed(c))
    closing = parser.close()
    return parser.turn, fed, closing


def summary(turn: toolwire.Turn):
    calls = [(c.local_id, c.call_id, c.name, c.args, c.state.value, c.raw_arguments,
              c.problem.code.value if c.problem else None, c.index) for c in turn.calls]
    error = None if turn.error is None else (turn.error.type, turn.error.message, turn.error.code)
    return calls, turn.finish_reason, turn.raw_finish_reason, error, turn.text, turn.finished_cleanly


# ---- (a) split invariance ------------------------------------------------------------------------------------


@given(data=st.data())
def test_any_split_gives_the_same_turn(data):
    """Split invariance: any chunking (incl. inside UTF-8 and CR|LF, for LF/CRLF/CR line ends) gives one Turn."""
    case = data.draw(cases())
    whole = toolwire.parse(case.provider, case.data, format="sse")
    assert whole.finished_cleanly and whole.error is None
    assert [(c.call_id, c.name, c.args) for c in whole.calls] == [tuple(c) for c in case.calls]
    assert all(c.state is CallState.COMPLETE for c in whole.calls)

    points = data.draw(split_points(case.data))
    turn, _, _ = run(case.provider, chunked(case.data, points))
    assert summary(turn) == summary(whole)
    assert turn.assistant_message == whole.assistant_message


@settings(max_examples=min(settings.default.max_examples, 30))
@given(case=cases(max_calls=2, max_text=6))
def test_one_byte_at_a_time_gives_the_same_turn(case):
    """Split invariance: feeding a small stream one byte at a time gives the same Turn as feeding it whole."""
    whole = toolwire.parse(case.provider, case.data, format="sse")
    turn, _, _ = run(case.provider, [case.data[i:i + 1] for i in range(len(case.data))])
    assert summary(turn) == summary(whole)
    assert turn.assistant_message == whole.assistant_message


def test_crlf_split_between_cr_and_lf_everywhere():
    """Split invariance: a CRLF stream cut between every CR and its LF gives the same Turn."""
    events = chat_events([("call_1", "get_weather", {"city": "Zürich 😀"})], text="héllo", fragment_sizes=(4,))
    enc = encode_sse(events, newline="\r\n")
    points = [i for i in range(1, len(enc.data)) if enc.data[i - 1:i + 1] == b"\r\n"]
    whole = toolwire.parse("openai-chat", enc.data, format="sse")
    turn, _, _ = run("openai-chat", chunked(enc.data, points))
    assert summary(turn) == summary(whole)
    assert whole.calls[0].args == {"city": "Zürich 😀"} and whole.finished_cleanly


# ---- (b) prefixes -------------------------------------------------------------------------------------------


def check_prefix(case: Case, cut: int) -> None:
    turn, _, _ = run(case.provider, [case.data[:cut]])
    ids = [c[0] for c in case.calls]
    assert [c.call_id for c in turn.calls] == ids[:len(turn.calls)], "calls out of order or unknown"
    for call, expected, end in zip(turn.calls, case.calls, case.call_ends):
        if end <= cut:
            assert call.state is CallState.COMPLETE, (cut, call)
            assert (call.call_id, call.name, call.args) == tuple(expected)
        else:
            assert call.state is CallState.TRUNCATED, (cut, call)
            assert call.args is None and not call.runnable
    if cut < case.turn_end:
        assert not turn.finished_cleanly, cut
    if not turn.finished_cleanly:
        assert turn.runnable_calls == [], cut


@given(data=st.data())
def test_every_prefix_is_truncated_or_absent_and_never_runnable(data):
    """Prefixes: no call complete before its terminator, no clean finish before the end event, nothing runnable."""
    case = data.draw(cases(max_calls=3))
    n = len(case.data)
    # every event boundary (and one byte either side of it), plus hypothesis-chosen cuts anywhere
    cuts = {e + d for e in case.enc.ends for d in (-1, 0, 1, 2)}
    cuts |= set(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=20), label="cuts"))
    for cut in sorted(c for c in cuts if 0 <= c < n):
        check_prefix(case, cut)


def test_every_byte_prefix_of_a_small_stream():
    """Prefixes: every single byte cut of two small streams (one per dialect) obeys the prefix rules."""
    calls = [("call_1", "a", {"k": "v😀"}), ("call_2", "b", {})]
    for provider, events in (
        ("openai-chat", chat_events(calls, fragment_sizes=(3,), parallel_interleave=True)),
        ("anthropic", anthropic_events([("toolu_011", "a", {"k": "v😀"}), ("toolu_012", "b", {})],
                                       fragment_sizes=(3,))),
    ):
        enc = encode_sse(events, newline="\r\n")
        if provider == "openai-chat":
            end = enc.end_of(lambda _n, p: isinstance(p, dict) and bool(p["choices"])
                             and p["choices"][0]["finish_reason"] is not None)
            call_ends = [end, end]
        else:
            call_ends = [enc.end_of(lambda n, p, i=i: n == "content_block_stop" and p["index"] == i)
                         for i in (0, 1)]
            end = enc.end_of(lambda n, _p: n == "message_stop")
        case = Case(provider, enc, calls if provider == "openai-chat" else
                    [("toolu_011", "a", {"k": "v😀"}), ("toolu_012", "b", {})], call_ends, end, True)
        for cut in range(len(enc.data)):
            check_prefix(case, cut)


# ---- (c) events ---------------------------------------------------------------------------------------------


def check_events(turn, fed, closing) -> None:
    events = fed + closing
    assert closing and isinstance(closing[-1], TurnFinished)
    assert [e for e in events if isinstance(e, TurnFinished)] == [closing[-1]]
    assert closing[-1].turn == turn
    local_ids = [c.local_id for c in turn.calls]
    announced = [e.local_id for e in events if isinstance(e, CallAnnounced)]
    assert announced == local_ids
    for call in turn.calls:
        text = "".join(e.text for e in events if isinstance(e, ArgumentsReceived) and e.local_id == call.local_id)
        assert text == call.raw_arguments, call.local_id
        ends = [e for e in events if isinstance(e, TERMINAL_EVENTS) and e.call.local_id == call.local_id]
        assert len(ends) == 1, (call.local_id, ends)
        assert ends[0].call.state is call.state
        first = events.index(next(e for e in events if isinstance(e, CallAnnounced)
                                  and e.local_id == call.local_id))
        assert events.index(ends[0]) > first
        assert all(events.index(e) < events.index(ends[0]) for e in events
                   if isinstance(e, ArgumentsReceived) and e.local_id == call.local_id)


@given(data=st.data())
def test_events_account_for_every_call(data):
    """Events: ArgumentsReceived texts concatenate to raw_arguments; one announce and one end per call; TurnFinished last."""
    case = data.draw(cases(stops=None))
    n = len(case.data)
    cut = data.draw(st.one_of(st.just(n), st.integers(0, n)), label="cut")
    chunks = chunked(case.data[:cut], data.draw(split_points(case.data[:cut])))
    turn, fed, closing = run(case.provider, chunks)
    check_events(turn, fed, closing)
    if cut == n:
        assert [(c.call_id, c.name, c.args) for c in turn.calls] == [tuple(c) for c in case.calls]


@given(data=st.data())
def test_events_account_for_every_call_when_cut_by_length(data):
    """Events: with Chat "length" finishes, every call still gets exactly one end event."""
    case = data.draw(cases(providers=("openai-chat",), stops=("length",)))
    turn, fed, closing = run(case.provider, chunked(case.data, data.draw(split_points(case.data))))
    check_events(turn, fed, closing)
    assert turn.runnable_calls == []


def test_events_a_completed_call_cut_by_max_tokens_is_then_truncated():
    """Events: with Anthropic "max_tokens", the last call gets CallCompleted at its block stop, then
    CallTruncated at message_stop (documented: the final Turn, not an early event, decides what runs)."""
    data = encode_sse(anthropic_events([("toolu_01A", "get_weather", {"city": "Paris"})],
                                       stop_reason="max_tokens")).data
    turn, fed, closing = run("anthropic", [data])
    assert turn.calls[0].state is CallState.TRUNCATED
    ends = [type(e).__name__ for e in fed + closing
            if isinstance(e, (toolwire.CallCompleted, toolwire.CallTruncated, toolwire.CallErrored))]
    assert ends == ["CallCompleted", "CallTruncated"]
    assert turn.runnable_calls == []
