"""Property tests of ``StreamParser`` on generated well-formed streams of every registered dialect (each
dialect's test adapter, ``tests/dialects``, generates its streams and says where their terminators are).

(a) Split invariance: any chunking of the bytes (split points inside multi-byte UTF-8 and between CR and LF
    included, with LF, CRLF and lone-CR line ends) gives the same Turn as the whole input, and so does feeding
    one byte at a time.
(b) Prefixes: a stream cut at any byte never has a ``complete`` call whose terminator is not in the prefix, is
    never ``finished_cleanly`` without its end event, and then has no runnable calls.
(c) Events: per call, the ``ArgumentsReceived`` texts concatenate to ``raw_arguments`` (to nothing in a dialect
    whose arguments arrive whole); one ``CallAnnounced`` and one terminal event per call; ``close()`` ends with
    ``TurnFinished``.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import toolwire
from toolwire.errors import FramingError
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

from .dialects import REGISTERED, Case, adapter
from .streamgen import anthropic_events, chat_events, encode_sse

#: every registered dialect
PROVIDERS = REGISTERED
TERMINAL_EVENTS = (CallCompleted, CallTruncated, CallErrored)


@st.composite
def cases(draw, providers=None, max_calls: int = 4, max_text: int = 20, stops=None) -> Case:
    """A generated stream of one of ``providers`` (default: every registered dialect) ending cleanly, from the
    dialect's adapter; ``stops``: the raw finish words to choose from instead (for dialects whose adapter takes
    them: Chat, Anthropic)."""
    provider = draw(st.sampled_from(providers or PROVIDERS))
    if stops is None:
        return adapter(provider).cases(draw, max_calls=max_calls, max_text=max_text)
    return adapter(provider).cases(draw, max_calls=max_calls, max_text=max_text, stops=stops)


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
    """Feed ``chunks`` in the dialect's stream format; return the final turn, the events of all feeds, and the events
    of close() (for a binary framing cut inside a message, those its FramingError carries)."""
    parser = StreamParser(provider, format=adapter(provider).stream_format)
    fed = []
    for c in chunks:
        fed.extend(parser.feed(c))
    try:
        closing = parser.close()
    except FramingError as exc:
        assert adapter(provider).binary_framing, exc  # SSE streams are cut, never refused
        closing = exc.events
    return parser.turn, fed, closing


def summary(turn: toolwire.Turn):
    calls = [(c.local_id, c.call_id, c.name, c.args, c.state.value, c.raw_arguments,
              c.problem.code.value if c.problem else None, c.index) for c in turn.calls]
    error = None if turn.error is None else (turn.error.type, turn.error.message, turn.error.code)
    return calls, turn.finish_reason, turn.raw_finish_reason, error, turn.text, turn.finished_cleanly


# ---- (a) split invariance ------------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
@given(data=st.data())
def test_any_split_gives_the_same_turn(provider, data):
    """Split invariance: any chunking (incl. inside UTF-8 and CR|LF, for LF/CRLF/CR line ends) gives one Turn."""
    case = data.draw(cases(providers=(provider,)))
    whole = toolwire.parse(case.provider, case.data, format=adapter(provider).stream_format)
    assert whole.finished_cleanly and whole.error is None
    assert [(c.call_id, c.name, c.args) for c in whole.calls] == [tuple(c) for c in case.calls]
    assert all(c.state is CallState.COMPLETE for c in whole.calls)

    points = data.draw(split_points(case.data))
    turn, _, _ = run(case.provider, chunked(case.data, points))
    assert summary(turn) == summary(whole)
    assert turn.assistant_message == whole.assistant_message


@pytest.mark.parametrize("provider", PROVIDERS)
@settings(max_examples=min(settings.default.max_examples, 30))
@given(data=st.data())
def test_one_byte_at_a_time_gives_the_same_turn(provider, data):
    """Split invariance: feeding a small stream one byte at a time gives the same Turn as feeding it whole."""
    case = data.draw(cases(providers=(provider,), max_calls=2, max_text=6))
    whole = toolwire.parse(case.provider, case.data, format=adapter(provider).stream_format)
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
    if case.turn_end is None or cut < case.turn_end:
        assert not turn.finished_cleanly, cut
    if not turn.finished_cleanly:
        assert turn.runnable_calls == [], cut


@pytest.mark.parametrize("provider", PROVIDERS)
@given(data=st.data())
def test_every_prefix_is_truncated_or_absent_and_never_runnable(provider, data):
    """Prefixes: no call complete before its terminator, no clean finish before the end event, nothing runnable."""
    case = data.draw(cases(providers=(provider,), max_calls=3))
    n = len(case.data)
    # every event boundary (and one byte either side of it), plus hypothesis-chosen cuts anywhere
    cuts = {e + d for e in case.enc.ends for d in (-1, 0, 1, 2)}
    cuts |= set(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=20), label="cuts"))
    for cut in sorted(c for c in cuts if 0 <= c < n):
        check_prefix(case, cut)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_every_byte_prefix_of_a_small_stream(provider):
    """Prefixes: every single byte cut of a small stream of two calls obeys the prefix rules."""
    case = adapter(provider).small_case()
    for cut in range(len(case.data)):
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
        assert text == call.raw_arguments or (not text and not adapter(turn.provider).arguments_stream), \
            call.local_id
        ends = [e for e in events if isinstance(e, TERMINAL_EVENTS) and e.call.local_id == call.local_id]
        assert len(ends) == 1, (call.local_id, ends)
        assert ends[0].call.state is call.state
        first = events.index(next(e for e in events if isinstance(e, CallAnnounced)
                                  and e.local_id == call.local_id))
        assert events.index(ends[0]) > first
        assert all(events.index(e) < events.index(ends[0]) for e in events
                   if isinstance(e, ArgumentsReceived) and e.local_id == call.local_id)


@pytest.mark.parametrize("provider", PROVIDERS)
@given(data=st.data())
def test_events_account_for_every_call(provider, data):
    """Events: ArgumentsReceived texts concatenate to raw_arguments; one announce and one end per call; TurnFinished last."""
    case = data.draw(cases(providers=(provider,)))
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
