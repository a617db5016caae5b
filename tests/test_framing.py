"""Tests of the incremental framers in ``toolwire.framing``.

Every table case is run whole, one byte at a time, at every two-way split and at seeded random splits
(h11's style), so chunk boundaries inside CRLF, inside a UTF-8 BOM, inside multi-byte characters and inside
JSON escapes are all exercised. Property tests check that any split gives the same messages as the whole input,
and that both equal what an independent reference encoder put in.
"""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolwire.errors import FramingError, ProviderProtocolError, ToolwireError
from toolwire.framing import (
    DEFAULT_MAX_MESSAGE_BYTES,
    JSONBodyDecoder,
    JSONLinesDecoder,
    JSONValuesDecoder,
    SSEDecoder,
    SSEMessage,
)

BOM = b"\xef\xbb\xbf"
KIB = 1024

PROPERTY_SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --------------------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------------------


def split_at(data: bytes, points) -> list[bytes]:
    """Cut ``data`` at the given offsets (unsorted, duplicates allowed); empty pieces are kept out."""
    cuts = sorted({p for p in points if 0 < p < len(data)})
    pieces, last = [], 0
    for p in cuts:
        pieces.append(data[last:p])
        last = p
    pieces.append(data[last:])
    return [p for p in pieces if p]


def chunkings(data: bytes, *, random_runs: int = 20, seed: int = 0):
    """Yield (label, chunks): whole, one byte at a time, every two-way split and seeded random splits."""
    yield "whole", [data]
    yield "bytewise", [data[i:i + 1] for i in range(len(data))]
    for i in range(1, len(data)):
        yield f"split@{i}", [data[:i], data[i:]]
    rng = random.Random(seed)
    for run in range(random_runs):
        k = rng.randint(1, max(1, len(data)))
        yield f"random#{run}", split_at(data, [rng.randint(0, len(data)) for _ in range(k)])


def run_framer(decoder, chunks) -> list:
    """Feed every chunk then close; return everything the framer produced, in order."""
    out = []
    for chunk in chunks:
        out.extend(decoder.feed(chunk))
    out.extend(decoder.close())
    return out


def run_sse(chunks, **kwargs) -> tuple[list[SSEMessage], bool]:
    dec = SSEDecoder(**kwargs)
    msgs = run_framer(dec, chunks)
    return msgs, dec.unterminated_last_line


def assert_sse(data: bytes, expected: list[SSEMessage], *, unterminated: bool = False) -> None:
    """The SSE framer gives ``expected`` (and the unterminated flag) for ``data`` at every chunking."""
    for label, chunks in chunkings(data):
        msgs, flag = run_sse(chunks)
        assert msgs == expected, f"{label}: {chunks!r}"
        assert flag is unterminated, f"{label}: {chunks!r}"


def assert_framer(factory, data: bytes, expected: list[bytes]) -> None:
    """A bytes framer built by ``factory`` gives ``expected`` for ``data`` at every chunking."""
    for label, chunks in chunkings(data):
        assert run_framer(factory(), chunks) == expected, f"{label}: {chunks!r}"


def M(data: bytes, event: str | None = None, id: str | None = None, retry: int | None = None) -> SSEMessage:
    return SSEMessage(data, event, id, retry)


# --------------------------------------------------------------------------------------------------------------
# SSE: table of cases, each run at every chunking
# --------------------------------------------------------------------------------------------------------------

SSE_CASES = [
    # line ends
    ("lf", b"data: a\n\n", [M(b"a")]),
    ("crlf", b"data: a\r\n\r\n", [M(b"a")]),
    ("lone_cr", b"data: a\r\r", [M(b"a")]),
    ("mixed_line_ends", b"data: a\rdata: b\r\ndata: c\n\r\n", [M(b"a\nb\nc")]),
    ("cr_then_crlf_blank", b"data: a\r\r\ndata: b\n\n", [M(b"a"), M(b"b")]),
    ("crlf_pairs_are_one_line_end", b"data: a\r\ndata: b\r\n\r\n", [M(b"a\nb")]),
    ("cr_blank_cr", b"data: a\r\rdata: b\r\r", [M(b"a"), M(b"b")]),
    # the data field
    ("data_with_space", b"data: x\n\n", [M(b"x")]),
    ("data_without_space", b"data:x\n\n", [M(b"x")]),
    ("data_only_one_space_removed", b"data:  x\n\n", [M(b" x")]),
    ("data_trailing_space_kept", b"data: x \n\n", [M(b"x ")]),
    ("data_tab_not_removed", b"data:\tx\n\n", [M(b"\tx")]),
    ("data_colons_in_value", b"data: a:b: c\n\n", [M(b"a:b: c")]),
    ("data_json_value", b'data: {"a": [1, "b:c"]}\n\n', [M(b'{"a": [1, "b:c"]}')]),
    ("data_lines_joined_with_lf", b"data: a\ndata: b\ndata: c\n\n", [M(b"a\nb\nc")]),
    ("data_empty_value_dispatched", b"data:\n\n", [M(b"")]),
    ("data_single_space_value_dispatched", b"data: \n\n", [M(b"")]),
    ("data_no_colon_is_empty_data", b"data\n\n", [M(b"")]),
    ("data_no_colon_twice", b"data\ndata\n\n", [M(b"\n")]),
    ("data_empty_lines_joined", b"data:\ndata: x\ndata:\n\n", [M(b"\nx\n")]),
    ("data_bytes_not_decoded", b"data: \xff\xfe\x00\n\n", [M(b"\xff\xfe\x00")]),
    ("data_utf8_multibyte", "data: héllo 🎉 世界\n\n".encode(), [M("héllo 🎉 世界".encode())]),
    ("data_utf8_multiline", "data: é\ndata: 🎉\n\n".encode(), [M("é\n🎉".encode())]),
    # event, id, retry
    ("event_named", b"event: add\ndata: x\n\n", [M(b"x", "add")]),
    ("event_without_space", b"event:add\ndata: x\n\n", [M(b"x", "add")]),
    ("event_after_data", b"data: x\nevent: add\n\n", [M(b"x", "add")]),
    ("event_last_one_wins", b"event: a\nevent: b\ndata: x\n\n", [M(b"x", "b")]),
    ("event_utf8", "event: café\ndata: x\n\n".encode(), [M(b"x", "café")]),
    ("event_reset_between_messages", b"event: a\ndata: x\n\ndata: y\n\n", [M(b"x", "a"), M(b"y")]),
    ("event_reset_by_blank_without_data", b"event: a\n\ndata: y\n\n", [M(b"y")]),
    ("id_set", b"id: 42\ndata: x\n\n", [M(b"x", id="42")]),
    ("id_without_space", b"id:42\ndata: x\n\n", [M(b"x", id="42")]),
    ("id_empty", b"id:\ndata: x\n\n", [M(b"x", id="")]),
    ("id_with_nul_ignored", b"id: 4\x002\ndata: x\n\n", [M(b"x")]),
    ("id_with_nul_keeps_earlier_id", b"id: 1\nid: \x00\ndata: x\n\n", [M(b"x", id="1")]),
    ("retry_digits", b"retry: 3000\ndata: x\n\n", [M(b"x", retry=3000)]),
    ("retry_zero", b"retry:0\ndata: x\n\n", [M(b"x", retry=0)]),
    ("retry_non_digit_ignored", b"retry: 3s\ndata: x\n\n", [M(b"x")]),
    ("retry_negative_ignored", b"retry: -1\ndata: x\n\n", [M(b"x")]),
    ("retry_empty_ignored", b"retry:\ndata: x\n\n", [M(b"x")]),
    ("retry_two_spaces_ignored", b"retry:  10\ndata: x\n\n", [M(b"x")]),
    ("retry_non_ascii_digit_ignored", "retry: ١٢\ndata: x\n\n".encode(), [M(b"x")]),
    ("all_fields", b"event: e\nid: 7\nretry: 5\ndata: x\n\n", [M(b"x", "e", "7", 5)]),
    # comments and unknown fields
    ("comment_keep_alive", b": keep-alive\n\n", []),
    ("comment_openrouter", b": OPENROUTER PROCESSING\n\ndata: x\n\n", [M(b"x")]),
    ("comment_empty", b":\ndata: x\n\n", [M(b"x")]),
    ("comment_between_data_lines", b"data: a\n: note\ndata: b\n\n", [M(b"a\nb")]),
    ("comment_looks_like_data", b":data: x\n\n", []),
    ("unknown_field_ignored", b"foo: bar\ndata: x\n\n", [M(b"x")]),
    ("unknown_field_no_colon_ignored", b"foo\ndata: x\n\n", [M(b"x")]),
    ("field_names_case_sensitive", b"Data: x\nEVENT: e\n\n", []),
    ("field_with_leading_space_ignored", b" data: x\n\n", []),
    ("field_with_space_before_colon_ignored", b"data : x\n\n", []),
    # dispatch
    ("no_data_no_dispatch", b"event: e\nid: 1\nretry: 2\n\n", []),
    ("extra_blank_lines", b"\n\n\ndata: x\n\n\n\n", [M(b"x")]),
    ("several_messages", b"data: 1\n\ndata: 2\n\nevent: e\ndata: 3\n\n", [M(b"1"), M(b"2"), M(b"3", "e")]),
    ("empty_stream", b"", []),
    # BOM
    ("bom_stripped", BOM + b"data: a\n\n", [M(b"a")]),
    ("bom_before_comment", BOM + b": hi\ndata: a\n\n", [M(b"a")]),
    ("bom_only_one_stripped", BOM + BOM + b"data: a\n\ndata: b\n\n", [M(b"b")]),
    ("bom_later_not_stripped", b"data: a\n\n" + BOM + b"data: b\n\n", [M(b"a")]),
    ("bom_inside_data_kept", b"data: " + BOM + b"x\n\n", [M(BOM + b"x")]),
    ("bom_prefix_not_a_bom", b"\xef\xbbdata: a\n\ndata: b\n\n", [M(b"b")]),
    # close(): a last message without its blank line
    ("close_returns_unterminated_message", b"data: a\n", [M(b"a")]),
    ("close_returns_unterminated_multiline", b"event: e\ndata: a\r\ndata: b\r\n", [M(b"a\nb", "e")]),
    ("close_after_cr_line_end", b"data: a\r", [M(b"a")]),
    ("close_no_data_nothing", b"event: e\n", []),
]


@pytest.mark.parametrize(("data", "expected"), [c[1:] for c in SSE_CASES], ids=[c[0] for c in SSE_CASES])
def test_sse_case_same_at_every_chunking(data, expected):
    """Each SSE table case gives the expected messages whole, byte by byte, at every split and random splits."""
    assert_sse(data, expected)


SSE_UNTERMINATED_CASES = [
    ("only_line", b"data: a", [M(b"a")]),
    ("after_complete_lines", b"data: a\ndata: b", [M(b"a\nb")]),
    ("after_dispatch", b"data: a\n\ndata: b", [M(b"a"), M(b"b")]),
    ("after_crlf_dispatch", b"data: a\r\n\r\ndata: b", [M(b"a"), M(b"b")]),
    ("comment", b"data: a\n\n: keep-al", [M(b"a")]),
    ("event_line", b"data: a\nevent: x", [M(b"a", "x")]),
    ("data_no_colon", b"data: a\ndata", [M(b"a\n")]),
    ("cut_json_kept_as_is", b'event: e\ndata: {"x": 1', [M(b'{"x": 1', "e")]),
    ("utf8", "data: é🎉".encode(), [M("é🎉".encode())]),
]


@pytest.mark.parametrize(("data", "expected"), [c[1:] for c in SSE_UNTERMINATED_CASES],
                         ids=[c[0] for c in SSE_UNTERMINATED_CASES])
def test_sse_close_takes_unterminated_last_line_as_a_line(data, expected):
    """close() takes a last line lacking its line end as a line and sets unterminated_last_line."""
    assert_sse(data, expected, unterminated=True)


# --------------------------------------------------------------------------------------------------------------
# SSE: specific behaviours
# --------------------------------------------------------------------------------------------------------------


def test_sse_cr_and_lf_split_across_chunks_is_one_line_end():
    """A CR at the end of one chunk and an LF at the start of the next make one line end, not a blank line."""
    dec = SSEDecoder()
    assert dec.feed(b"data: a\r") == []
    assert dec.feed(b"\ndata: b\r") == []  # were the LF a blank line, "a" would be dispatched alone here
    assert dec.feed(b"\n") == []  # the same again: still one message being built
    assert dec.feed(b"\r") == [M(b"a\nb")]  # a real blank line
    assert dec.feed(b"\n") == []
    # the same bytes cut at other places
    dec2 = SSEDecoder()
    out = []
    for piece in (b"data: a\r", b"\n", b"data: b\r", b"\n", b"\r", b"\n"):
        out.extend(dec2.feed(piece))
    assert out == [M(b"a\nb")]
    assert dec2.close() == []
    assert not dec2.unterminated_last_line


def test_sse_cr_at_chunk_end_dispatches_without_waiting():
    """A blank line ended by a lone CR at the end of a chunk dispatches at once (no wait for a possible LF)."""
    dec = SSEDecoder()
    assert dec.feed(b"data: a\r") == []
    assert dec.feed(b"\r") == [M(b"a")]
    assert dec.feed(b"\n") == []  # the LF that completes the CRLF is swallowed, not a second blank line
    assert dec.feed(b"data: b\n\n") == [M(b"b")]


def test_sse_lone_lf_chunks_after_cr_only_skip_one_lf():
    """Only the single LF right after a chunk-final CR is swallowed; a second LF is a real blank line."""
    dec = SSEDecoder()
    assert dec.feed(b"data: a\r") == []
    assert dec.feed(b"\n") == []
    assert dec.feed(b"\n") == [M(b"a")]


def test_sse_empty_chunk_keeps_cr_state():
    """An empty chunk between a CR and its LF does not break the CRLF pair."""
    dec = SSEDecoder()
    assert dec.feed(b"data: a\r") == []
    assert dec.feed(b"") == []
    assert dec.feed(b"\n") == []
    assert dec.feed(b"\n") == [M(b"a")]


def test_sse_dispatches_on_the_blank_line_byte():
    """Fed byte by byte, a message comes out exactly when the byte ending the blank line arrives."""
    data = b"event: e\ndata: x\n\n"
    dec = SSEDecoder()
    for i in range(len(data) - 1):
        assert dec.feed(data[i:i + 1]) == [], i
    assert dec.feed(data[-1:]) == [M(b"x", "e")]


def test_sse_several_messages_in_one_chunk():
    """One chunk holding several complete messages returns them all, in order, from that feed()."""
    dec = SSEDecoder()
    chunk = b"".join(b"data: %d\n\n" % i for i in range(50))
    assert dec.feed(chunk) == [M(b"%d" % i) for i in range(50)]
    assert dec.close() == []


def test_sse_one_message_over_many_chunks():
    """A message fed in many small chunks is returned once, whole, when its blank line arrives."""
    dec = SSEDecoder()
    payload = json.dumps({"text": "x" * 500, "list": list(range(50))}).encode()
    data = b"event: big\ndata: " + payload + b"\n\n"
    out = []
    for i in range(0, len(data), 7):
        got = dec.feed(data[i:i + 7])
        if i + 7 < len(data):
            assert got == []
        out.extend(got)
    assert out == [M(payload, "big")]


def test_sse_multibyte_utf8_split_is_byte_exact():
    """Every split inside multi-byte UTF-8 characters yields the original bytes, never replacement characters."""
    text = "Ünïcödé 🎉🐍 中文 \u2028 ok"
    data = b"data: " + text.encode() + b"\n\n"
    assert_sse(data, [M(text.encode())])
    # and a stream of 4-byte characters fed one byte at a time
    payload = ("🎉" * 100).encode()
    msgs, _ = run_sse([bytes([b]) for b in b"data: " + payload + b"\n\n"])
    assert msgs == [M(payload)]
    assert msgs[0].data.decode("utf-8") == "🎉" * 100


def test_sse_bom_split_across_chunks_is_stripped():
    """A BOM delivered one byte per chunk at the very start is still stripped."""
    dec = SSEDecoder()
    assert dec.feed(b"\xef") == []
    assert dec.feed(b"\xbb") == []
    assert dec.feed(b"\xbf") == []
    assert dec.feed(b"data: a\n\n") == [M(b"a")]


def test_sse_bom_at_start_of_later_chunk_not_stripped():
    """A BOM at the start of a later chunk (not the stream) is data of the line, not stripped."""
    dec = SSEDecoder()
    assert dec.feed(b"data: a\n") == []
    assert dec.feed(BOM + b"data: b\n\n") == [M(b"a")]  # the "\ufeffdata" field is unknown
    dec = SSEDecoder()
    assert dec.feed(b"data: ") == []
    assert dec.feed(BOM + b"x\n\n") == [M(BOM + b"x")]


def test_sse_event_and_retry_do_not_leak_but_the_last_event_id_persists():
    """event and retry describe only their message; the last event id persists across messages (WHATWG)."""
    dec = SSEDecoder()
    out = dec.feed(b"event: e\nid: 1\nretry: 10\ndata: a\n\ndata: b\n\nid: 2\ndata: c\n\n")
    assert out == [M(b"a", "e", "1", 10), M(b"b", id="1"), M(b"c", id="2")]


def test_sse_empty_event_name_is_the_default_type():
    """A bare 'event' line (empty name) leaves the message with the default type (None)."""
    assert SSEDecoder().feed(b"event\ndata: x\n\n") == [M(b"x")]


def test_sse_message_fields_types():
    """A dispatched message carries data as bytes, event and id as str and retry as int."""
    (msg,) = SSEDecoder().feed(b"event: e\nid: 9\nretry: 15\ndata: x\n\n")
    assert type(msg.data) is bytes
    assert type(msg.event) is str
    assert type(msg.id) is str
    assert type(msg.retry) is int
    (msg,) = SSEDecoder().feed(b"data: x\n\n")
    assert msg.event is None and msg.id is None and msg.retry is None


def test_sse_close_returns_message_lacking_blank_line():
    """close() returns the last message whose lines ended but whose closing blank line never came."""
    dec = SSEDecoder()
    assert dec.feed(b"data: a\n\nevent: e\ndata: b\n") == [M(b"a")]
    assert dec.has_pending
    assert dec.close() == [M(b"b", "e")]
    assert not dec.unterminated_last_line
    assert not dec.has_pending


def test_sse_unterminated_flag_set_only_by_close():
    """unterminated_last_line stays False while feeding and becomes True at the close() that finds the line."""
    dec = SSEDecoder()
    assert dec.feed(b"data: a\ndata: b") == []
    assert not dec.unterminated_last_line
    assert dec.close() == [M(b"a\nb")]
    assert dec.unterminated_last_line
    assert not dec.has_pending
    assert dec.close() == []


def test_sse_close_twice_returns_nothing_more():
    """A second close() returns nothing: close() clears the pending message."""
    dec = SSEDecoder()
    dec.feed(b"data: a\n")
    assert dec.close() == [M(b"a")]
    assert dec.close() == []


def test_sse_close_on_clean_stream_returns_nothing():
    """close() after a stream that ended on a blank line returns nothing and flags nothing."""
    dec = SSEDecoder()
    assert dec.feed(b"data: a\n\n") == [M(b"a")]
    assert not dec.has_pending
    assert dec.close() == []
    assert not dec.unterminated_last_line


def test_sse_has_pending_tracks_unfinished_message():
    """has_pending is True while a line or data of an undispatched message is held, False after dispatch."""
    dec = SSEDecoder()
    assert not dec.has_pending
    dec.feed(b"da")
    assert dec.has_pending
    dec.feed(b"ta: x\n")
    assert dec.has_pending
    dec.feed(b"\n")
    assert not dec.has_pending
    dec.feed(b"event: e\n")
    assert dec.has_pending


def test_sse_default_cap():
    """The default cap is DEFAULT_MAX_MESSAGE_BYTES (16 MiB)."""
    assert DEFAULT_MAX_MESSAGE_BYTES == 16 * 1024 * 1024
    dec = SSEDecoder()
    big = b"x" * (1024 * 1024)
    for _ in range(15):
        dec.feed(b"data: " + big + b"\n")
    with pytest.raises(FramingError):
        for _ in range(3):
            dec.feed(b"data: " + big + b"\n")


# --------------------------------------------------------------------------------------------------------------
# SSE: the size cap
# --------------------------------------------------------------------------------------------------------------


def assert_too_large(err: FramingError, limit: int) -> None:
    assert isinstance(err, ProviderProtocolError)
    assert isinstance(err, ToolwireError)
    assert err.code == "message_too_large"
    assert err.limit == limit
    assert err.size is not None and err.size > limit
    assert len(err.excerpt) <= 201  # an excerpt, not the whole message


def test_sse_endless_line_raises_while_feeding():
    """An endless unterminated line raises message_too_large within ~cap/chunk chunks, before input runs out."""
    cap = 64 * KIB
    dec = SSEDecoder(max_message_bytes=cap)
    dec.feed(b"data: ")
    chunk = b"x" * KIB
    fed = 0
    with pytest.raises(FramingError) as info:
        for _ in range(10_000):  # an "endless" line: far more than the cap
            dec.feed(chunk)
            fed += 1
    assert fed <= 65  # raised on (or just after) the chunk that crossed 64 KiB: memory stayed bounded
    assert_too_large(info.value, cap)
    assert info.value.size <= cap + 2 * KIB


def test_sse_endless_comment_line_raises():
    """An endless comment line is bounded too: comments are not a way around the cap."""
    cap = 4 * KIB
    dec = SSEDecoder(max_message_bytes=cap)
    dec.feed(b": ")
    with pytest.raises(FramingError) as info:
        for _ in range(1000):
            dec.feed(b"y" * 256)
    assert_too_large(info.value, cap)


def test_sse_many_data_lines_add_up_to_cap():
    """Many data lines of one undispatched message that together exceed the cap raise message_too_large."""
    cap = 1000
    dec = SSEDecoder(max_message_bytes=cap)
    line = b"data: " + b"x" * 94 + b"\n"  # 100 bytes with its line end
    fed = 0
    with pytest.raises(FramingError) as info:
        for _ in range(1000):
            dec.feed(line)
            fed += 1
    assert fed <= 11
    assert_too_large(info.value, cap)


def test_sse_many_data_lines_in_one_chunk_over_cap_raise():
    """One chunk holding an undispatched message's many data lines, over the cap, raises."""
    cap = 1000
    dec = SSEDecoder(max_message_bytes=cap)
    with pytest.raises(FramingError) as info:
        dec.feed((b"data: " + b"x" * 94 + b"\n") * 20)
    assert_too_large(info.value, cap)


def test_sse_cap_resets_after_each_dispatch():
    """The cap applies per message: many messages each under the cap, together far over it, are fine."""
    cap = 1000
    dec = SSEDecoder(max_message_bytes=cap)
    out = []
    for i in range(100):
        out.extend(dec.feed(b"data: " + b"x" * 500 + b"\n\n"))
    assert len(out) == 100


def test_sse_message_under_cap_accepted_at_any_chunking():
    """A message comfortably under the cap is accepted whatever the chunking."""
    cap = 200
    data = b"event: e\ndata: " + b"a" * 60 + b"\ndata: " + b"b" * 60 + b"\n\n"
    expected = [M(b"a" * 60 + b"\n" + b"b" * 60, "e")]
    for label, chunks in chunkings(data, random_runs=5):
        assert run_sse(chunks, max_message_bytes=cap) == (expected, False), label


def test_sse_over_cap_message_rejected_whatever_the_chunking():
    """An over-cap message raises whether it arrives in pieces or inside one chunk (same bytes, same outcome)."""
    cap = 100
    data = b"data: " + b"x" * 1000 + b"\n\n"
    with pytest.raises(FramingError):
        run_sse([data[:500], data[500:]], max_message_bytes=cap)  # raises today
    with pytest.raises(FramingError):
        run_sse([data], max_message_bytes=cap)  # returns the 1006-byte message today


# --------------------------------------------------------------------------------------------------------------
# SSE: property tests with an independent reference encoder
# --------------------------------------------------------------------------------------------------------------

_LINE_TEXT = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\r\n"), max_size=12)
_ID_TEXT = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\r\n\x00"), max_size=8)
_EVENT_TEXT = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\r\n"), min_size=1, max_size=8)
_LINE_END = st.sampled_from([b"\n", b"\r\n", b"\r"])


@st.composite
def _field_line(draw, name: str, value: str) -> bytes:
    """``name: value`` or ``name:value`` (the short form only when it cannot lose a leading space)."""
    forms = [f"{name}: {value}"]
    if not value.startswith(" "):
        forms.append(f"{name}:{value}")
    if value == "":
        forms.append(name)
    return draw(st.sampled_from(forms)).encode()


@st.composite
def sse_streams(draw):
    """A stream of SSE messages as (bytes, expected messages, expected unterminated flag), with noise."""
    lines: list[bytes] = []  # lines without their line ends; b"" is a blank (dispatching) line
    expected: list[SSEMessage] = []
    if draw(st.booleans()):
        lines.append(b":" + draw(_LINE_TEXT).encode())  # a leading comment
    n_blocks = draw(st.integers(0, 5))
    last_id = None  # the last event id persists across messages (WHATWG)
    for _ in range(n_blocks):
        block: list[bytes] = []
        kind = draw(st.sampled_from(["message", "message", "message", "no_data"]))
        event = draw(st.none() | _EVENT_TEXT)
        ident = draw(st.none() | _ID_TEXT)
        retry = draw(st.none() | st.integers(0, 10**9))
        data_lines = draw(st.lists(_LINE_TEXT, min_size=1, max_size=4)) if kind == "message" else []
        for value in data_lines:
            block.append(draw(_field_line("data", value)))
        extras: list[bytes] = []
        if event is not None:
            extras.append(draw(_field_line("event", event)))
        if ident is not None:
            extras.append(draw(_field_line("id", ident)))
        if retry is not None:
            extras.append(draw(_field_line("retry", str(retry))))
        for comment in draw(st.lists(_LINE_TEXT, max_size=2)):
            extras.append(b":" + comment.encode())
        if draw(st.booleans()):
            extras.append(b"x-unknown: " + draw(_LINE_TEXT).encode())
        for extra in extras:  # insert each extra line anywhere; the data lines keep their order
            block.insert(draw(st.integers(0, len(block))), extra)
        if ident is not None:
            last_id = ident
        if kind == "message":
            expected.append(SSEMessage(b"\n".join(v.encode() for v in data_lines), event or None, last_id,
                                       retry))
        lines.extend(block)
        lines.append(b"")  # the blank line that dispatches (or, with no data, just resets)
    if lines and lines[-1] == b"" and draw(st.booleans()):
        lines.pop()  # the last blank line never came: close() must still return the last message
    # join with line ends; a blank line's LF right after a lone CR would merge into one CRLF, so avoid that
    out = bytearray()
    prev_end = b""
    for line in lines:
        end = draw(_LINE_END)
        if line == b"" and prev_end == b"\r" and end == b"\n":
            end = b"\r\n"
        out += line + end
        prev_end = end
    # the very last line may lack its line end: close() takes it as a line all the same
    unterminated = bool(lines) and lines[-1] != b"" and draw(st.booleans())
    if unterminated:
        del out[-len(prev_end):]
    if draw(st.booleans()):
        out = bytearray(BOM) + out
    return bytes(out), expected, unterminated


@PROPERTY_SETTINGS
@given(stream=sse_streams(), data=st.data())
def test_sse_any_split_equals_whole_equals_encoded(stream, data):
    """For generated SSE streams, any split gives the same messages as the whole, and both equal what was encoded."""
    raw, expected, unterminated = stream
    whole = run_sse([raw])
    assert whole == (expected, unterminated)
    points = data.draw(st.lists(st.integers(0, len(raw)), max_size=max(1, len(raw))), label="split points")
    assert run_sse(split_at(raw, points)) == whole


@PROPERTY_SETTINGS
@given(stream=sse_streams())
def test_sse_bytewise_equals_encoded(stream):
    """For generated SSE streams, feeding one byte at a time gives exactly the encoded messages."""
    raw, expected, unterminated = stream
    assert run_sse([raw[i:i + 1] for i in range(len(raw))]) == (expected, unterminated)


# --------------------------------------------------------------------------------------------------------------
# JSON Lines
# --------------------------------------------------------------------------------------------------------------

JSONL_CASES = [
    ("one_line", b'{"a":1}\n', [b'{"a":1}']),
    ("several_lines", b'{"a":1}\n{"b":2}\n[3]\n', [b'{"a":1}', b'{"b":2}', b"[3]"]),
    ("crlf", b'{"a":1}\r\n{"b":2}\r\n', [b'{"a":1}', b'{"b":2}']),
    ("blank_lines_skipped", b'\n\n{"a":1}\n\n\r\n  \n{"b":2}\n\n', [b'{"a":1}', b'{"b":2}']),
    ("lines_stripped", b'  {"a":1}  \t\n\t{"b":2}\r\n', [b'{"a":1}', b'{"b":2}']),
    ("last_line_without_newline", b'{"a":1}\n{"b":2}', [b'{"a":1}', b'{"b":2}']),
    ("only_line_without_newline", b'{"a":1}', [b'{"a":1}']),
    ("last_line_whitespace_only", b'{"a":1}\n   ', [b'{"a":1}']),
    ("bom_stripped", BOM + b'{"a":1}\n', [b'{"a":1}']),
    ("bom_later_kept", b'{"a":1}\n' + BOM + b'{"b":2}\n', [b'{"a":1}', BOM + b'{"b":2}']),
    ("utf8_kept", '{"t":"héllo 🎉"}\n'.encode(), ['{"t":"héllo 🎉"}'.encode()]),
    ("not_json_passed_through", b"hello\nworld\n", [b"hello", b"world"]),
    ("empty", b"", []),
    ("only_newlines", b"\n\r\n\n", []),
]


@pytest.mark.parametrize(("data", "expected"), [c[1:] for c in JSONL_CASES], ids=[c[0] for c in JSONL_CASES])
def test_jsonlines_case_same_at_every_chunking(data, expected):
    """Each JSON Lines case gives one stripped payload per non-blank line at every chunking."""
    assert_framer(JSONLinesDecoder, data, expected)


def test_jsonlines_returns_line_as_soon_as_complete():
    """A line is returned by the feed() that brings its newline; a line without newline waits for close()."""
    dec = JSONLinesDecoder()
    assert dec.feed(b'{"a":') == []
    assert dec.has_pending
    assert dec.feed(b'1}\n{"b"') == [b'{"a":1}']
    assert dec.feed(b":2}") == []
    assert dec.close() == [b'{"b":2}']
    assert not dec.has_pending


def test_jsonlines_has_pending_ignores_whitespace():
    """has_pending is False when only whitespace of an unfinished line is held."""
    dec = JSONLinesDecoder()
    dec.feed(b'{"a":1}\n  ')
    assert not dec.has_pending


def test_jsonlines_line_over_cap_raises():
    """One line longer than the cap raises message_too_large, whole or fed in pieces."""
    cap = 100
    line = b'{"a":"' + b"x" * 200 + b'"}\n'
    with pytest.raises(FramingError) as info:
        JSONLinesDecoder(max_message_bytes=cap).feed(line)
    assert_too_large(info.value, cap)
    dec = JSONLinesDecoder(max_message_bytes=cap)
    with pytest.raises(FramingError) as info:
        for i in range(0, len(line), 10):
            dec.feed(line[i:i + 10])
    assert_too_large(info.value, cap)


def test_jsonlines_endless_line_raises_while_feeding():
    """An endless line raises within ~cap/chunk chunks rather than buffering the whole input."""
    cap = 64 * KIB
    dec = JSONLinesDecoder(max_message_bytes=cap)
    fed = 0
    with pytest.raises(FramingError) as info:
        for _ in range(10_000):
            dec.feed(b"x" * KIB)
            fed += 1
    assert fed <= 65
    assert_too_large(info.value, cap)


def test_jsonlines_tail_over_cap_after_newline_raises():
    """A chunk that ends a line and starts an over-cap unterminated one raises."""
    cap = 100
    with pytest.raises(FramingError) as info:
        JSONLinesDecoder(max_message_bytes=cap).feed(b"{}\n" + b"x" * 200)
    assert_too_large(info.value, cap)


def test_jsonlines_cap_is_per_line():
    """Many lines each under the cap, together far over it, are fine."""
    dec = JSONLinesDecoder(max_message_bytes=100)
    out = dec.feed(b'{"a":"' + b"x" * 80 + b'"}\n' * 1)
    for _ in range(50):
        out += dec.feed(b'{"a":"' + b"x" * 80 + b'"}\n')
    assert len(out) == 51


def test_jsonlines_line_at_cap_accepted():
    """A line of exactly the cap in length is accepted, whole and byte by byte."""
    line = b"x" * 50
    assert run_framer(JSONLinesDecoder(max_message_bytes=50), [line + b"\n"]) == [line]
    chunks = [bytes([b]) for b in line + b"\n"]
    assert run_framer(JSONLinesDecoder(max_message_bytes=50), chunks) == [line]


# --------------------------------------------------------------------------------------------------------------
# JSON body
# --------------------------------------------------------------------------------------------------------------

JSON_BODY_CASES = [
    ("compact", b'{"a":1}', [b'{"a":1}']),
    ("stripped", b' \r\n {"a":1}\n\n', [b'{"a":1}']),
    ("pretty", b'{\n  "a": [\n    1\n  ]\n}\n', [b'{\n  "a": [\n    1\n  ]\n}']),
    ("bom_stripped", BOM + b'{"a":1}', [b'{"a":1}']),
    ("bom_then_space_stripped", BOM + b'  {"a":1}', [b'{"a":1}']),
    ("utf8_kept", '{"t":"🎉"}'.encode(), ['{"t":"🎉"}'.encode()]),
    ("empty", b"", []),
    ("whitespace_only", b" \n\t ", []),
    ("not_json_passed_through", b"<html>oops</html>", [b"<html>oops</html>"]),
]


@pytest.mark.parametrize(("data", "expected"), [c[1:] for c in JSON_BODY_CASES],
                         ids=[c[0] for c in JSON_BODY_CASES])
def test_jsonbody_case_same_at_every_chunking(data, expected):
    """Each JSON body case is returned whole and stripped by close(), at every chunking."""
    assert_framer(JSONBodyDecoder, data, expected)


def test_jsonbody_returns_nothing_until_close():
    """feed() never returns a payload; close() returns the whole body and clears it."""
    dec = JSONBodyDecoder()
    assert dec.feed(b'{"a":') == []
    assert dec.has_pending
    assert dec.feed(b"1}") == []
    assert dec.close() == [b'{"a":1}']
    assert not dec.has_pending
    assert dec.close() == []


def test_jsonbody_over_cap_raises():
    """A body larger than the cap raises message_too_large on the feed that crosses it."""
    cap = 1000
    dec = JSONBodyDecoder(max_message_bytes=cap)
    fed = 0
    with pytest.raises(FramingError) as info:
        for _ in range(1000):
            dec.feed(b"x" * 100)
            fed += 1
    assert fed == 10
    assert_too_large(info.value, cap)
    assert info.value.size == 1100
    with pytest.raises(FramingError) as info:
        JSONBodyDecoder(max_message_bytes=cap).feed(b"x" * 1001)
    assert_too_large(info.value, cap)


def test_jsonbody_at_cap_accepted():
    """A body of exactly the cap is accepted."""
    dec = JSONBodyDecoder(max_message_bytes=10)
    dec.feed(b"0123456789")
    assert dec.close() == [b"0123456789"]


# --------------------------------------------------------------------------------------------------------------
# JSON values
# --------------------------------------------------------------------------------------------------------------

_TRICKY = b'{"s":"a\\\\\\"]}","t":"[{\\"x\\": ]}","u":"\\\\","v":"\\u005d\\""}'  # escaped quotes, backslashes

JSON_VALUES_CASES = [
    ("one_object", b'{"a":1}', [b'{"a":1}']),
    ("consecutive_compact", b'{"a":1}{"b":2}{}', [b'{"a":1}', b'{"b":2}', b"{}"]),
    ("separated_by_whitespace", b' {"a":1}\n\n\t{"b":2}\r\n ', [b'{"a":1}', b'{"b":2}']),
    ("separated_by_commas", b'{"a":1},{"b":2} , {"c":3},', [b'{"a":1}', b'{"b":2}', b'{"c":3}']),
    ("pretty_printed", b'{\n  "a": {\n    "b": [1, 2]\n  }\n}\n{\n  "c": 3\n}\n',
     [b'{\n  "a": {\n    "b": [1, 2]\n  }\n}', b'{\n  "c": 3\n}']),
    ("nested", b'{"a":{"b":{"c":[[{}],[]]}}}', [b'{"a":{"b":{"c":[[{}],[]]}}}']),
    ("array_unwrapped", b'[{"a":1},{"b":2}]', [b'{"a":1}', b'{"b":2}']),
    ("array_streamed_gemini_style", b'[{"a":1}\n,{"b":2}\n,{"c":3}\n]', [b'{"a":1}', b'{"b":2}', b'{"c":3}']),
    ("array_pretty", b'[\n  {\n    "a": 1\n  },\n  {\n    "b": [\n      2\n    ]\n  }\n]\n',
     [b'{\n    "a": 1\n  }', b'{\n    "b": [\n      2\n    ]\n  }']),
    ("array_nested_elements", b'[{"a":[1,[2,{"b":[]}]]},[[1],{"c":{}}]]',
     [b'{"a":[1,[2,{"b":[]}]]}', b'[[1],{"c":{}}]']),
    ("array_empty", b"[]", []),
    ("array_empty_spaced", b"[ \n ]", []),
    ("array_trailing_comma", b'[{"a":1},]', [b'{"a":1}']),
    ("array_then_object", b'[{"a":1}]\n{"b":2}', [b'{"a":1}', b'{"b":2}']),
    ("two_arrays", b'[{"a":1}][{"b":2}]', [b'{"a":1}', b'{"b":2}']),
    ("strings_with_brackets", b'{"a":"}]{[","b":["]"]}', [b'{"a":"}]{[","b":["]"]}']),
    ("strings_with_escaped_quote_and_backslash", b'{"k":"a\\\\\\"]}"}', [b'{"k":"a\\\\\\"]}"}']),
    ("string_ending_in_backslash", b'{"k":"\\\\"}{"j":1}', [b'{"k":"\\\\"}', b'{"j":1}']),
    ("tricky", _TRICKY, [_TRICKY]),
    ("tricky_in_array", b"[" + _TRICKY + b"," + _TRICKY + b"]", [_TRICKY, _TRICKY]),
    ("utf8_strings", '{"t":"héllo 🎉 ]}"}'.encode(), ['{"t":"héllo 🎉 ]}"}'.encode()]),
    ("bom_stripped", BOM + b'{"a":1}', [b'{"a":1}']),
    ("empty", b"", []),
    ("whitespace_only", b" \n ,, \n", []),
]


@pytest.mark.parametrize(("data", "expected"), [c[1:] for c in JSON_VALUES_CASES],
                         ids=[c[0] for c in JSON_VALUES_CASES])
def test_jsonvalues_case_same_at_every_chunking(data, expected):
    """Each JSON values case yields each top-level value (or array element) as exact bytes at every chunking."""
    assert_framer(JSONValuesDecoder, data, expected)
    for value in expected:
        json.loads(value)  # each payload is a complete JSON text


def test_jsonvalues_array_elements_stream_as_they_complete():
    """Elements of a streamed top-level array come out from the feed() that completes them, not at the end."""
    dec = JSONValuesDecoder()
    assert dec.feed(b"[") == []
    assert dec.has_pending
    assert dec.feed(b'{"a":') == []
    assert dec.feed(b'1}\n') == [b'{"a":1}']
    assert dec.has_pending  # the array is still open
    assert dec.feed(b',{"b":[2,') == []
    assert dec.feed(b'3]}\n,{"c"') == [b'{"b":[2,3]}']
    assert dec.feed(b":{}}\n]") == [b'{"c":{}}']
    assert not dec.has_pending
    assert dec.close() == []


def test_jsonvalues_has_pending_while_value_incomplete():
    """has_pending is True while a value is incomplete (including inside a string) and False between values."""
    dec = JSONValuesDecoder()
    assert not dec.has_pending
    dec.feed(b'{"a":"x')
    assert dec.has_pending
    dec.feed(b'y"')
    assert dec.has_pending
    assert dec.feed(b"}") == [b'{"a":"xy"}']
    assert not dec.has_pending
    dec.feed(b"  \n")
    assert not dec.has_pending
    dec.feed(b"{")
    assert dec.has_pending


def test_jsonvalues_escape_backslash_split_at_chunk_boundary():
    """A string's escape backslash at the very end of a chunk is joined with the escaped byte of the next."""
    dec = JSONValuesDecoder()
    assert dec.feed(b'{"k":"a\\') == []
    assert dec.feed(b'"]}') == []  # the quote is escaped: the string goes on, the ]} are inside it
    assert dec.feed(b'"}') == [b'{"k":"a\\"]}"}']
    dec = JSONValuesDecoder()
    assert dec.feed(b'{"k":"a\\') == []
    assert dec.feed(b'\\') == []  # an escaped backslash: the next quote ends the string
    assert dec.feed(b'"}') == [b'{"k":"a\\\\"}']


def test_jsonvalues_without_unwrap_returns_array_whole():
    """With unwrap_array=False a top-level array is one value, returned whole."""
    data = b'[{"a":1},{"b":2}] [1, 2, "]"]'
    assert_framer(lambda: JSONValuesDecoder(unwrap_array=False), data, [b'[{"a":1},{"b":2}]', b'[1, 2, "]"]'])


NOT_JSON_CASES = [
    ("text", b"hello"),
    ("sse_sent_to_wrong_framer", b'data: {"a":1}\n\n'),
    ("html_error_page", b"<html><body>502</body></html>"),
    ("scalar_number", b"1"),
    ("scalar_string", b'"x"'),
    ("scalar_after_object", b'{"a":1} 2'),
    ("scalar_array_element", b"[1,2]"),
    ("stray_close_bracket", b"]"),
    ("stray_close_brace", b"}"),
    ("close_after_object", b'{"a":1}]'),
]


@pytest.mark.parametrize("data", [c[1] for c in NOT_JSON_CASES], ids=[c[0] for c in NOT_JSON_CASES])
def test_jsonvalues_non_json_raises_not_json(data):
    """A byte that cannot start an object or array where a value should start raises FramingError 'not_json'."""
    for label, chunks in chunkings(data, random_runs=3):
        with pytest.raises(FramingError) as info:
            run_framer(JSONValuesDecoder(), chunks)
        assert info.value.code == "not_json", label
        assert isinstance(info.value, ProviderProtocolError)


def test_jsonvalues_not_json_excerpt_shows_bad_input():
    """The not_json error carries an excerpt of the offending bytes."""
    with pytest.raises(FramingError) as info:
        JSONValuesDecoder().feed(b"<html>bad gateway</html>")
    assert "html" in info.value.excerpt


def test_jsonvalues_values_before_bad_byte_in_earlier_chunks_are_kept():
    """Values returned by earlier feeds stay delivered; the error comes from the feed holding the bad byte."""
    dec = JSONValuesDecoder()
    assert dec.feed(b'{"a":1}\n') == [b'{"a":1}']
    with pytest.raises(FramingError):
        dec.feed(b"oops")


def test_jsonvalues_pending_value_over_cap_raises_while_feeding():
    """An incomplete value growing past the cap raises message_too_large within ~cap/chunk chunks."""
    cap = 64 * KIB
    dec = JSONValuesDecoder(max_message_bytes=cap)
    dec.feed(b'{"a":"')
    fed = 0
    with pytest.raises(FramingError) as info:
        for _ in range(10_000):
            dec.feed(b"x" * KIB)
            fed += 1
    assert fed <= 65
    assert_too_large(info.value, cap)


def test_jsonvalues_pending_array_element_over_cap_raises():
    """An incomplete element of an unwrapped array is capped like any value (the array itself is not held)."""
    cap = 1000
    dec = JSONValuesDecoder(max_message_bytes=cap)
    out = []
    for _ in range(20):  # many small elements: the whole array is far over the cap, which is fine
        out += dec.feed(b'{"a":"' + b"x" * 100 + b'"},')
    assert len(out) == 20
    with pytest.raises(FramingError) as info:
        dec.feed(b'{"b":[')
        for _ in range(100):
            dec.feed(b"1," * 50)
    assert_too_large(info.value, cap)


def test_jsonvalues_between_values_memory_is_released():
    """Whitespace and commas between values are not accumulated toward the cap."""
    dec = JSONValuesDecoder(max_message_bytes=100)
    for _ in range(100):
        assert dec.feed(b" \n," * 50) == []
    assert dec.feed(b"{}") == [b"{}"]


def test_jsonvalues_has_pending_inside_second_array():
    """has_pending is True inside a second top-level array, as it is inside the first (truncation detection)."""
    dec = JSONValuesDecoder()
    assert dec.feed(b'[{"a":1}]') == [b'{"a":1}']
    assert not dec.has_pending
    assert dec.feed(b'[{"b":2},') == [b'{"b":2}']
    assert dec.has_pending  # the second array is open: a stream cut here is truncated (False today)


def test_jsonvalues_array_end_counts_the_values_before_the_first_array_closed():
    """``array_end`` is the number of values returned before the first top-level array closed, however the
    bytes are cut, so a parser can tell which values came after the array's end."""
    data = b'[{"a":1},\n{"b":2}\n] {"c":3}[{"d":4}]'
    for cut in range(len(data) + 1):
        dec = JSONValuesDecoder()
        got = dec.feed(data[:cut])
        assert dec.array_end is None or dec.array_end == 2
        got += dec.feed(data[cut:])
        assert got == [b'{"a":1}', b'{"b":2}', b'{"c":3}', b'{"d":4}']
        assert dec.array_end == 2 and dec.emitted == 4


def test_jsonvalues_over_cap_value_rejected_whatever_the_chunking():
    """An over-cap value raises whether it arrives in pieces or inside one chunk (same bytes, same outcome)."""
    data = b'{"a":"' + b"x" * 1000 + b'"}'
    with pytest.raises(FramingError):
        run_framer(JSONValuesDecoder(max_message_bytes=100), [data[:500], data[500:]])  # raises today
    with pytest.raises(FramingError):
        run_framer(JSONValuesDecoder(max_message_bytes=100), [data])  # returns the value today


# --------------------------------------------------------------------------------------------------------------
# JSON property tests
# --------------------------------------------------------------------------------------------------------------

_TRICKY_CHARS = st.sampled_from(list('[]{}",:\\/ \n\t\r\x00\u2028\ufeffé🎉'))
_JSON_TEXT = st.text(st.one_of(_TRICKY_CHARS, st.characters(exclude_categories=("Cs",))), max_size=10)
_JSON_SCALARS = (st.none() | st.booleans() | st.integers(-10**20, 10**20)
                 | st.floats(allow_nan=False, allow_infinity=False) | _JSON_TEXT)
_JSON_ANY = st.recursive(_JSON_SCALARS, lambda c: st.lists(c, max_size=4) | st.dictionaries(_JSON_TEXT, c, max_size=4),
                         max_leaves=12)
_JSON_CONTAINER = st.lists(_JSON_ANY, max_size=4) | st.dictionaries(_JSON_TEXT, _JSON_ANY, max_size=4)
_JSON_OBJECT = st.dictionaries(_JSON_TEXT, _JSON_ANY, max_size=5)
_SEPARATOR = st.text(st.sampled_from(" \t\r\n,"), max_size=4).map(str.encode)


@st.composite
def json_dumps(draw, value) -> bytes:
    """``value`` serialized compact, spaced or pretty-printed, ASCII-escaped or raw UTF-8."""
    style = draw(st.sampled_from(["compact", "default", "indent"]))
    ensure_ascii = draw(st.booleans())
    if style == "compact":
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=ensure_ascii)
    elif style == "default":
        text = json.dumps(value, ensure_ascii=ensure_ascii)
    else:
        text = json.dumps(value, indent=draw(st.integers(0, 3)), ensure_ascii=ensure_ascii)
    return text.encode()


@st.composite
def jsonlines_streams(draw):
    """(bytes, expected payloads): one JSON text per line, CRLF or LF, blank lines, maybe no final newline."""
    payloads = [json.dumps(v, ensure_ascii=draw(st.booleans())).encode()
                for v in draw(st.lists(_JSON_ANY, max_size=6))]
    out = bytearray(BOM if draw(st.booleans()) else b"")
    for i, p in enumerate(payloads):
        out += draw(st.sampled_from([b"", b"\n", b"\r\n", b" \n"]))  # blank lines
        out += p
        if i < len(payloads) - 1 or draw(st.booleans()):
            out += draw(st.sampled_from([b"\n", b"\r\n"]))
    return bytes(out), payloads


@PROPERTY_SETTINGS
@given(stream=jsonlines_streams(), data=st.data())
def test_jsonlines_any_split_equals_whole_equals_encoded(stream, data):
    """For generated JSON Lines, any split gives the same payloads as the whole, and both equal the encoded lines."""
    raw, expected = stream
    whole = run_framer(JSONLinesDecoder(), [raw])
    assert whole == expected
    points = data.draw(st.lists(st.integers(0, len(raw)), max_size=max(1, len(raw))), label="split points")
    assert run_framer(JSONLinesDecoder(), split_at(raw, points)) == whole
    assert run_framer(JSONLinesDecoder(), [raw[i:i + 1] for i in range(len(raw))]) == whole


@st.composite
def jsonvalues_streams(draw):
    """(bytes, expected payloads): top-level objects and unwrapped arrays of containers, with separators."""
    out = bytearray(BOM if draw(st.booleans()) else b"")
    expected: list[bytes] = []
    kinds: list[str] = []
    for _ in range(draw(st.integers(0, 4))):
        out += draw(_SEPARATOR)
        kinds.append(draw(st.sampled_from(["object", "array"])))
        if kinds[-1] == "object":
            text = draw(json_dumps(draw(_JSON_OBJECT)))
            out += text
            expected.append(text)
        else:  # a top-level array, written by hand so each element's exact bytes are known
            out += b"["
            elements = [draw(json_dumps(v)) for v in draw(st.lists(_JSON_CONTAINER, max_size=4))]
            for i, element in enumerate(elements):
                out += draw(st.text(st.sampled_from(" \t\r\n"), max_size=3)).encode()
                if i:
                    out += b","
                    out += draw(st.text(st.sampled_from(" \t\r\n"), max_size=3)).encode()
                out += element
            out += draw(st.text(st.sampled_from(" \t\r\n"), max_size=3)).encode() + b"]"
            expected.extend(elements)
    out += draw(_SEPARATOR)
    return bytes(out), expected, kinds


@PROPERTY_SETTINGS
@given(stream=jsonvalues_streams(), data=st.data())
def test_jsonvalues_any_split_equals_whole_equals_encoded(stream, data):
    """For generated JSON value streams, any split gives the same values as the whole, and both equal the input."""
    raw, expected, _ = stream
    whole = run_framer(JSONValuesDecoder(), [raw])
    assert whole == expected
    points = data.draw(st.lists(st.integers(0, len(raw)), max_size=max(1, len(raw))), label="split points")
    assert run_framer(JSONValuesDecoder(), split_at(raw, points)) == whole
    assert run_framer(JSONValuesDecoder(), [raw[i:i + 1] for i in range(len(raw))]) == whole


@PROPERTY_SETTINGS
@given(stream=jsonvalues_streams(), data=st.data())
def test_jsonvalues_has_pending_false_only_between_values(stream, data):
    """After feeding a whole well-formed stream has_pending is False; after a cut inside a value it is True."""
    raw, _, kinds = stream
    dec = JSONValuesDecoder()
    dec.feed(raw)
    assert not dec.has_pending
    # cut inside the last top-level item (object or array): something is left pending
    start = max(raw.rfind(b"}"), raw.rfind(b"]"))
    # (a second top-level array is left out here: see test_jsonvalues_has_pending_inside_second_array)
    if start > 0 and not (kinds[-1] == "array" and "array" in kinds[:-1]):
        dec = JSONValuesDecoder()
        dec.feed(raw[:start])
        assert dec.has_pending


@PROPERTY_SETTINGS
@given(value=_JSON_OBJECT, data=st.data())
def test_jsonbody_any_split_returns_body(value, data):
    """For a generated JSON body, any split gives back the body unchanged at close()."""
    body = data.draw(json_dumps(value))
    raw = data.draw(st.sampled_from([b"", BOM])) + body + data.draw(st.sampled_from([b"", b"\n", b" \r\n"]))
    points = data.draw(st.lists(st.integers(0, len(raw)), max_size=max(1, len(raw))), label="split points")
    assert run_framer(JSONBodyDecoder(), split_at(raw, points)) == [body]
