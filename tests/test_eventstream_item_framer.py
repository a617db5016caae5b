"""The Bedrock framer's items against the general path they shortcut.

``EventStreamFramer`` builds each item straight from a checked message's bytes, and for a headers section seen
before from the event it gave then (``_SECTION_EVENTS``), without building an ``EventStreamMessage``. The general
path is ``EventStreamDecoder`` followed by ``_item`` on each message: every stream, in every chunking, with the
caches cold or warm, must give the same items, and a damaged one the same error.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from toolwire.codecs import bedrock_converse, eventstream
from toolwire.codecs.bedrock_converse import EventStreamFramer, _item
from toolwire.codecs.eventstream import EventStreamDecoder, EventStreamError

from .test_eventstream_framing import _NAMES, _VALUES, PROPERTY_SETTINGS, frame, header, split_at

# the headers that decide an item, with values of every kind (a non-string type is no type)
_TYPED = st.sampled_from([
    (":message-type", (7, "event")), (":message-type", (7, "exception")), (":message-type", (7, "error")),
    (":message-type", (7, "something-else")), (":message-type", (4, 7)), (":event-type", (7, "contentBlockDelta")),
    (":event-type", (7, ":exception:x")), (":event-type", (6, b"contentBlockDelta")),
    (":exception-type", (7, "throttlingException")), (":error-code", (7, "InternalFailure")),
    (":error-message", (7, "it broke")), (":error-code", (0, None)),
])


@st.composite
def sections(draw):
    """A headers section: a few of the headers that decide an item, maybe others, each name once."""
    fields = dict(draw(st.lists(_TYPED, max_size=4)))
    fields.update(draw(st.dictionaries(_NAMES, _VALUES, max_size=2)))
    return b"".join(header(n, k, v) for n, (k, v) in fields.items())


def general(chunks: list[bytes], limit: int):
    """The items and the error (or None) of the general path."""
    decoder = EventStreamDecoder(limit)
    items = []
    try:
        for chunk in chunks:
            items += [_item(m) for m in decoder.feed(chunk)]
        decoder.close()
    except EventStreamError as exc:
        return items, (exc.code, exc.offset, exc.section)
    return items, None


def framed(chunks: list[bytes], limit: int):
    framer = EventStreamFramer(limit)
    items = []
    try:
        for chunk in chunks:
            items += framer.feed(chunk)
        assert framer.close() == []
    except EventStreamError as exc:
        return items, (exc.code, exc.offset, exc.section)
    return items, None


@PROPERTY_SETTINGS
@given(heads=st.lists(sections(), min_size=1, max_size=4),
       picks=st.lists(st.tuples(st.integers(0, 3), st.binary(max_size=200)), max_size=10),
       cold=st.booleans(), damage=st.none() | st.tuples(st.integers(0, 10 ** 6), st.integers(1, 255)),
       data=st.data())
def test_the_framer_gives_the_items_of_the_decoder_and_item(heads, picks, cold, damage, data):
    """Messages that repeat a few headers sections (as streams do) with any payloads, maybe one byte damaged, in
    any chunking and with the module's caches cold or warm: the framer gives exactly the items and the error of
    ``EventStreamDecoder`` + ``_item``, and again on a second pass (every section then seen)."""
    if cold:
        bedrock_converse._SECTION_EVENTS.clear()
        eventstream._HEADERS_SEEN.clear()
    stream = bytearray(b"".join(frame(heads[i % len(heads)], payload) for i, payload in picks))
    if damage is not None and stream:
        stream[damage[0] % len(stream)] ^= damage[1]
    points = data.draw(st.lists(st.integers(0, len(stream)), max_size=20), label="cuts")
    chunks = split_at(bytes(stream), points)
    limit = data.draw(st.sampled_from([64, 512, eventstream.DEFAULT_MAX_MESSAGE_BYTES]), label="limit")
    expected = general(chunks, limit)
    assert framed(chunks, limit) == expected
    assert framed(chunks, limit) == expected
    assert len(bedrock_converse._SECTION_EVENTS) <= bedrock_converse._SECTION_EVENTS_MAX


def test_an_error_message_takes_its_data_from_its_headers_every_time():
    """Two ``error`` messages with the same headers and different payloads: each item's data is the error the
    headers say (the payload is not it), the second as the first; an event with that section would not be kept."""
    section = header(":message-type", 7, "error") + header(":error-code", 7, "E") + header(":error-message", 7, "m")
    chunk = frame(section, b"one") + frame(section, b"two")
    items = EventStreamFramer(1 << 20).feed(chunk)
    assert [(i.event, i.data) for i in items] == [(":error:E", b'{"code":"E","message":"m"}')] * 2
    assert section not in bedrock_converse._SECTION_EVENTS


def test_many_distinct_sections_keep_the_section_cache_bounded():
    """Thousands of distinct sections give the right events and never grow the cache past its bound."""
    names = [f"e{i}" for i in range(3000)]
    chunk = b"".join(frame(header(":event-type", 7, name), b"{}") for name in names)
    items = EventStreamFramer(1 << 24).feed(chunk)
    assert [i.event for i in items] == names
    assert len(bedrock_converse._SECTION_EVENTS) <= bedrock_converse._SECTION_EVENTS_MAX
