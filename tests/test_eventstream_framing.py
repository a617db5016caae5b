"""Tests of the AWS event-stream decoder in ``toolwire.codecs.eventstream``.

Messages are built by a small encoder written here from the format's description (``int.to_bytes`` and
``binascii.crc32``, nothing shared with the decoder), so the decoder is checked against an independent source.
Every case that depends on chunk boundaries is fed whole, one byte at a time and at every two-way split; the
property tests draw the messages and the chunking.
"""

from __future__ import annotations

import binascii
import datetime
import random
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolwire.codecs.eventstream import (
    DEFAULT_MAX_MESSAGE_BYTES,
    MAX_HEADERS_BYTES,
    MIN_MESSAGE_BYTES,
    EventStreamDecoder,
    EventStreamError,
    EventStreamMessage,
    HeaderType,
    encode_message,
)
from toolwire.errors import FramingError, ToolwireError

from .conftest import FIXTURES

RECORDINGS = FIXTURES / "real" / "bedrock-converse"
KIB = 1024
MIB = 1024 * KIB
UTC = datetime.timezone.utc

PROPERTY_SETTINGS = settings(max_examples=200, deadline=None,
                             suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# --------------------------------------------------------------------------------------------------------------
# an independent encoder
# --------------------------------------------------------------------------------------------------------------

_WIDTH = {2: 1, 3: 2, 4: 4, 5: 8, 8: 8}


def header(name: str | bytes, kind: int, value: object = None) -> bytes:
    """One header: name length, name, type byte, value (per the format's table)."""
    raw = name.encode("utf-8") if isinstance(name, str) else name
    out = bytes([len(raw)]) + raw + bytes([kind])
    if kind in (0, 1):
        return out
    if kind in _WIDTH:
        assert isinstance(value, int)
        return out + value.to_bytes(_WIDTH[kind], "big", signed=True)
    if kind in (6, 7):
        data = value.encode("utf-8") if isinstance(value, str) else value
        assert isinstance(data, bytes)
        return out + len(data).to_bytes(2, "big") + data
    assert kind == 9 and isinstance(value, bytes) and len(value) == 16
    return out + value


def frame(headers: bytes = b"", payload: bytes = b"", *, total: int | None = None, hlen: int | None = None,
          prelude_crc: int | None = None, message_crc: int | None = None) -> bytes:
    """A whole message; the keyword arguments replace a field by a wrong value."""
    t = len(headers) + len(payload) + 16 if total is None else total
    h = len(headers) if hlen is None else hlen
    prelude = t.to_bytes(4, "big") + h.to_bytes(4, "big")
    pcrc = binascii.crc32(prelude) if prelude_crc is None else prelude_crc
    body = prelude + pcrc.to_bytes(4, "big") + headers + payload
    mcrc = binascii.crc32(body) if message_crc is None else message_crc
    return body + mcrc.to_bytes(4, "big")


def bare_prelude(total: int, hlen: int = 0) -> bytes:
    """Twelve bytes announcing ``total`` and ``hlen``, with a correct prelude checksum."""
    prelude = total.to_bytes(4, "big") + hlen.to_bytes(4, "big")
    return prelude + binascii.crc32(prelude).to_bytes(4, "big")


def decoded(kind: int, value: object) -> object:
    """What the decoder must give for a header of ``kind`` encoded from ``value``."""
    if kind == 0:
        return True
    if kind == 1:
        return False
    if kind == 8:
        assert isinstance(value, int)
        return datetime.datetime(1970, 1, 1, tzinfo=UTC) + datetime.timedelta(milliseconds=value)
    if kind == 9:
        assert isinstance(value, bytes)
        return uuid.UUID(bytes=value)
    return value


def event(event_type: str, payload: bytes) -> bytes:
    """A Bedrock-style event: the three string headers, a JSON payload."""
    return frame(header(":event-type", 7, event_type) + header(":content-type", 7, "application/json")
                 + header(":message-type", 7, "event"), payload)


# --------------------------------------------------------------------------------------------------------------
# feeding helpers
# --------------------------------------------------------------------------------------------------------------


def split_at(data: bytes, points) -> list[bytes]:
    """Cut ``data`` at the given offsets (unsorted, duplicates allowed); empty pieces are left out."""
    cuts = sorted({p for p in points if 0 < p < len(data)})
    pieces, last = [], 0
    for p in cuts:
        pieces.append(data[last:p])
        last = p
    pieces.append(data[last:])
    return [p for p in pieces if p]


def chunkings(data: bytes, *, random_runs: int = 10, seed: int = 0):
    """Yield (label, chunks): whole, one byte at a time, every two-way split and seeded random splits."""
    yield "whole", [data]
    yield "bytewise", [data[i:i + 1] for i in range(len(data))]
    for i in range(1, len(data)):
        yield f"split@{i}", [data[:i], data[i:]]
    rng = random.Random(seed)
    for run in range(random_runs):
        yield f"random#{run}", split_at(data, [rng.randint(0, len(data)) for _ in range(rng.randint(1, 40))])


def decode(chunks, **kwargs) -> list[EventStreamMessage]:
    """Feed every chunk to a new decoder, close it, and return all the messages."""
    decoder = EventStreamDecoder(**kwargs)
    out: list[EventStreamMessage] = []
    for chunk in chunks:
        out += decoder.feed(chunk)
    out += decoder.close()
    return out


def failure(chunks, **kwargs) -> tuple[list[EventStreamMessage], EventStreamError]:
    """Feed ``chunks`` until the decoder fails; return the messages it gave (its error's included) and the error."""
    decoder = EventStreamDecoder(**kwargs)
    got: list[EventStreamMessage] = []
    try:
        for chunk in chunks:
            got += decoder.feed(chunk)
        decoder.close()
    except EventStreamError as exc:
        return got + exc.messages, exc
    raise AssertionError("the decoder did not fail")


GOOD = event("messageStart", b'{"p":"abcd","role":"assistant"}')
GOOD2 = event("contentBlockDelta", b'{"contentBlockIndex":0,"delta":{"text":"Hi"},"p":"ab"}')


# --------------------------------------------------------------------------------------------------------------
# headers
# --------------------------------------------------------------------------------------------------------------

ALL_TYPES = [
    ("t", 0, None),
    ("f", 1, None),
    ("byte", 2, -7),
    ("short", 3, -1234),
    ("int", 4, 123456789),
    ("long", 5, -(2**40) - 5),
    ("bytes", 6, b"\x00\x01\xfe\xff"),
    ("string", 7, "Grüße, 世界 🙂"),
    ("time", 8, 1_700_000_000_123),
    ("uuid", 9, bytes(range(16))),
]


def test_every_header_type_decodes_to_its_typed_value():
    """One message carrying all ten value types gives bool, int, bytes, str, datetime and UUID values."""
    headers = b"".join(header(n, k, v) for n, k, v in ALL_TYPES)
    [message] = decode([frame(headers, b"payload")])
    assert message.headers == {n: decoded(k, v) for n, k, v in ALL_TYPES}
    assert message.payload == b"payload"
    assert message.headers["t"] is True and message.headers["f"] is False
    assert message.headers["time"] == datetime.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC)
    assert message.headers["uuid"] == uuid.UUID("00010203-0405-0607-0809-0a0b0c0d0e0f")
    assert [t.value for t in HeaderType] == list(range(10))


@pytest.mark.parametrize("kind,bits", [(2, 8), (3, 16), (4, 32), (5, 64)])
@pytest.mark.parametrize("edge", ["min", "max", "minus_one", "zero"])
def test_integer_headers_are_signed_big_endian_at_their_extremes(kind, bits, edge):
    """byte, short, int and long values are read as signed big-endian at their limits."""
    value = {"min": -(2 ** (bits - 1)), "max": 2 ** (bits - 1) - 1, "minus_one": -1, "zero": 0}[edge]
    [message] = decode([frame(header("n", kind, value))])
    assert message.headers == {"n": value}
    assert type(message.headers["n"]) is int


@pytest.mark.parametrize("millis", [0, -1, 1, -62135596800000, 253402300799999])
def test_timestamp_header_is_an_aware_utc_datetime_in_milliseconds(millis):
    """A timestamp is milliseconds since the epoch, negative ones included, up to the range of datetime."""
    [message] = decode([frame(header("ts", 8, millis))])
    value = message.headers["ts"]
    assert isinstance(value, datetime.datetime) and value.tzinfo is UTC
    assert (value - datetime.datetime(1970, 1, 1, tzinfo=UTC)) // datetime.timedelta(milliseconds=1) == millis


def test_string_and_bytes_headers_may_be_empty_or_64_kib_long():
    """Strings and byte arrays of length 0 and 65535 (the 2-byte length's maximum) are read whole."""
    long_text = "é" * 32767 + "x"
    first = frame(header("e", 7, "") + header("b", 6, b"") + header("s", 7, long_text), b"1")
    second = frame(header("B", 6, b"\x01" * 65535), b"2")
    assert decode([first + second]) == [EventStreamMessage({"e": "", "b": b"", "s": long_text}, b"1"),
                                        EventStreamMessage({"B": b"\x01" * 65535}, b"2")]


def test_a_header_with_an_empty_name_is_read():
    """A zero name length is a header named "" (the format does not forbid it; AWS's decoders accept it)."""
    [message] = decode([frame(header("", 7, "v") + header("x", 0))])
    assert message.headers == {"": "v", "x": True}


def test_message_without_headers_or_payload_is_the_16_byte_minimum():
    """The smallest frame, 16 bytes, is a message with no headers and an empty payload."""
    data = frame()
    assert len(data) == MIN_MESSAGE_BYTES == 16
    assert decode([data]) == [EventStreamMessage({}, b"")]


def test_properties_read_the_aws_headers():
    """message_type, event_type, exception_type, error_code, error_message and content_type read their headers."""
    [ev] = decode([GOOD])
    assert (ev.message_type, ev.event_type, ev.content_type) == ("event", "messageStart", "application/json")
    assert (ev.exception_type, ev.error_code, ev.error_message) == (None, None, None)
    exc = frame(header(":exception-type", 7, "throttlingException") + header(":message-type", 7, "exception"),
                b'{"message":"slow down"}')
    err = frame(header(":error-code", 7, "InternalFailure") + header(":error-message", 7, "boom")
                + header(":message-type", 7, "error"))
    [e1, e2] = decode([exc + err])
    assert (e1.message_type, e1.exception_type, e1.event_type) == ("exception", "throttlingException", None)
    assert (e2.message_type, e2.error_code, e2.error_message) == ("error", "InternalFailure", "boom")


def test_properties_are_none_when_the_header_is_not_a_string():
    """A well-known header name carrying another value type is not taken for the string the property reads."""
    [message] = decode([frame(header(":message-type", 6, b"event") + header(":event-type", 4, 3)
                              + header(":content-type", 0))])
    assert (message.message_type, message.event_type, message.content_type) == (None, None, None)
    assert message.headers == {":message-type": b"event", ":event-type": 3, ":content-type": True}


def test_each_message_gets_its_own_headers_dict():
    """Two messages with the same header bytes do not share one dict: changing one leaves the other alone."""
    first, second = decode([GOOD + GOOD])
    first.headers[":event-type"] = "changed"
    assert second.headers[":event-type"] == "messageStart"
    [third] = decode([GOOD])
    assert third.headers[":event-type"] == "messageStart"


# --------------------------------------------------------------------------------------------------------------
# chunking
# --------------------------------------------------------------------------------------------------------------


def test_messages_split_at_every_byte_boundary_decode_the_same():
    """Two messages, fed whole, byte by byte, at every two-way split and at random splits, decode the same."""
    data = GOOD + frame(b"".join(header(n, k, v) for n, k, v in ALL_TYPES), b"\x00" * 40) + GOOD2
    expected = decode([data])
    assert len(expected) == 3
    for label, chunks in chunkings(data):
        assert decode(chunks) == expected, label


def test_a_real_message_split_at_every_byte_boundary_decodes_the_same():
    """A recorded toolUse start event gives the same message at every two-way split and byte by byte."""
    data = (RECORDINGS / "langchain-aws-stream-tool-use-get-weather.bin").read_bytes()
    start = int.from_bytes(data[:4], "big")
    second = data[start:start + int.from_bytes(data[start:start + 4], "big")]
    [expected] = decode([second])
    assert expected.event_type == "contentBlockStart"
    for label, chunks in chunkings(second):
        assert decode(chunks) == [expected], label


def test_bytearray_and_memoryview_chunks_decode_like_bytes():
    """Chunks given as bytearray or memoryview give the same messages as bytes."""
    data = GOOD + GOOD2
    expected = decode([data])
    assert decode([bytearray(data[:7]), memoryview(data)[7:50], bytearray(data[50:])]) == expected
    assert decode([memoryview(data)]) == expected


def test_empty_chunks_change_nothing():
    """An empty chunk, anywhere (inside a prelude, inside a message, between messages), returns nothing."""
    decoder = EventStreamDecoder()
    assert decoder.feed(b"") == []
    assert decoder.feed(GOOD[:5]) == [] and decoder.feed(b"") == []
    assert decoder.feed(GOOD[5:30]) == [] and decoder.feed(b"") == []
    assert len(decoder.feed(GOOD[30:])) == 1
    assert decoder.feed(b"") == [] and decoder.close() == []


def test_feed_returns_each_message_as_soon_as_its_last_byte_arrives():
    """A message is returned by the feed that brings its last byte, not later."""
    decoder = EventStreamDecoder()
    assert decoder.feed(GOOD[:-1]) == []
    assert decoder.has_pending and decoder.buffered_bytes == len(GOOD) - 1
    [message] = decoder.feed(GOOD[-1:] + GOOD2[:3])
    assert message.event_type == "messageStart"
    assert decoder.buffered_bytes == 3


# --------------------------------------------------------------------------------------------------------------
# checksums and preludes
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("byte", range(12))
def test_a_damaged_prelude_is_a_prelude_crc_mismatch(byte):
    """A bit flipped in any of the 12 prelude bytes is ``crc_mismatch`` in the prelude, at the message's offset,
    whatever the chunking, and the message before it is still delivered."""
    bad = bytearray(GOOD2)
    bad[byte] ^= 0x10
    data = GOOD + bytes(bad) + GOOD
    for label, chunks in [("whole", [data]), ("bytewise", [data[i:i + 1] for i in range(len(data))]),
                          ("at_damage", [data[:len(GOOD) + byte], data[len(GOOD) + byte:]])]:
        messages, exc = failure(chunks)
        assert (exc.code, exc.section, exc.offset) == ("crc_mismatch", "prelude", len(GOOD)), label
        assert [m.event_type for m in messages] == ["messageStart"], label
        assert isinstance(exc, FramingError) and isinstance(exc, ToolwireError)


@pytest.mark.parametrize("where", ["headers", "payload", "checksum"])
def test_a_damaged_message_is_a_message_crc_mismatch(where):
    """A byte changed in the headers, the payload or the trailing checksum is ``crc_mismatch`` in the message."""
    hlen = int.from_bytes(GOOD2[4:8], "big")
    index = {"headers": 12 + hlen // 2, "payload": 12 + hlen + 3, "checksum": len(GOOD2) - 1}[where]
    bad = bytearray(GOOD2)
    bad[index] ^= 0xFF
    for label, chunks in chunkings(GOOD + bytes(bad), random_runs=3):
        messages, exc = failure(chunks)
        assert (exc.code, exc.section, exc.offset) == ("crc_mismatch", "message", len(GOOD)), label
        assert [m.event_type for m in messages] == ["messageStart"], label


def test_a_one_gib_announced_length_is_refused_as_soon_as_the_prelude_is_there():
    """A valid prelude announcing 1 GiB is ``message_too_large`` on its 12th byte; nothing of it is held."""
    prelude = bare_prelude(1 << 30, 10)
    decoder = EventStreamDecoder()
    for i in range(11):
        assert decoder.feed(prelude[i:i + 1]) == []
    with pytest.raises(EventStreamError) as info:
        decoder.feed(prelude[11:] + b"x" * 4096)
    exc = info.value
    assert (exc.code, exc.section, exc.size, exc.limit) == ("message_too_large", "prelude", 1 << 30,
                                                             DEFAULT_MAX_MESSAGE_BYTES)
    assert decoder.buffered_bytes == 0 and not decoder.has_pending
    _, whole = failure([GOOD + prelude])
    assert (whole.code, whole.offset) == ("message_too_large", len(GOOD))


def test_the_limit_is_on_the_whole_message_and_inclusive():
    """A message of exactly ``max_message_bytes`` is read; one byte more is refused from its prelude alone."""
    payload = b"z" * 100
    exact = frame(payload=payload)
    assert decode([exact], max_message_bytes=len(exact)) == [EventStreamMessage({}, payload)]
    _, exc = failure([exact[:12]], max_message_bytes=len(exact) - 1)
    assert (exc.code, exc.size, exc.limit) == ("message_too_large", len(exact), len(exact) - 1)


@pytest.mark.parametrize("total", [0, 1, 12, 15])
def test_a_total_length_under_the_minimum_frame_is_a_bad_prelude(total):
    """A total length under 16 bytes, with a correct prelude checksum, is ``bad_prelude``."""
    _, exc = failure([bare_prelude(total) + b"\x00" * 8])
    assert (exc.code, exc.section, exc.size) == ("bad_prelude", "prelude", total)


@pytest.mark.parametrize("hlen_over", [1, 2, 1000])
def test_a_headers_length_that_does_not_fit_is_a_bad_prelude(hlen_over):
    """A headers length larger than the message leaves room for (total - 16) is ``bad_prelude``."""
    total = 64
    data = bare_prelude(total, total - 16 + hlen_over) + b"\x00" * (total - 12)
    for label, chunks in chunkings(data, random_runs=2):
        _, exc = failure(chunks)
        assert (exc.code, exc.section) == ("bad_prelude", "prelude"), label


def test_a_headers_length_larger_than_the_total_is_a_bad_prelude():
    """A headers length over the total length (up to 2**32 - 1) is ``bad_prelude``, not a read past the end."""
    for hlen in (65, 1 << 20, 2**32 - 1):
        _, exc = failure([bare_prelude(64, hlen) + b"\x00" * 52])
        assert exc.code == "bad_prelude", hlen


def test_a_headers_section_over_128_kib_is_refused_and_128_kib_is_read():
    """Headers of exactly 128 KiB decode; one byte more is ``message_too_large`` with the 128 KiB limit."""
    exact = header("a", 6, b"\x01" * 65535) + header("b", 6, b"\x02" * 65527)
    assert len(exact) == MAX_HEADERS_BYTES
    [message] = decode([frame(exact)], max_message_bytes=MIB)
    assert message.headers == {"a": b"\x01" * 65535, "b": b"\x02" * 65527}
    _, exc = failure([bare_prelude(MAX_HEADERS_BYTES + 17 + 100, MAX_HEADERS_BYTES + 1)], max_message_bytes=MIB)
    assert (exc.code, exc.limit, exc.size) == ("message_too_large", MAX_HEADERS_BYTES, MAX_HEADERS_BYTES + 1)


# --------------------------------------------------------------------------------------------------------------
# bad headers
# --------------------------------------------------------------------------------------------------------------

BAD_HEADERS = [
    ("name_past_the_end", b"\x05ab"),
    ("no_type_byte", b"\x02ab"),
    ("unknown_type_10", b"\x01a\x0a"),
    ("unknown_type_255", b"\x01a\xff"),
    ("byte_missing", b"\x01a\x02"),
    ("short_cut", b"\x01a\x03\x00"),
    ("int_cut", b"\x01a\x04\x00\x00\x00"),
    ("long_cut", b"\x01a\x05" + b"\x00" * 7),
    ("timestamp_cut", b"\x01a\x08" + b"\x00" * 7),
    ("uuid_cut", b"\x01a\x09" + b"\x00" * 15),
    ("string_length_cut", b"\x01a\x07\x00"),
    ("string_past_the_end", b"\x01a\x07\x00\x05abc"),
    ("string_one_byte_short", b"\x01a\x07\x00\x04abc"),
    ("bytes_past_the_end", b"\x01a\x06\x01\x00abc"),
    ("bytes_one_byte_short", b"\x01a\x06\x00\x04abc"),
    ("name_one_byte_short", b"\x03ab"),
    ("name_not_utf8", b"\x01\xff\x00"),
    ("string_not_utf8", b"\x01a\x07\x00\x02\xc3\x28"),
    ("duplicate_name", header("a", 0) + header("a", 1)),
    ("duplicate_name_other_type", header(":event-type", 7, "x") + header(":event-type", 7, "y")),
    ("timestamp_out_of_range", header("t", 8, 2**63 - 1)),
    ("timestamp_before_year_1", header("t", 8, -(2**63))),
    ("good_then_cut", header("ok", 7, "fine") + b"\x03ab"),
]


@pytest.mark.parametrize("section", [c[1] for c in BAD_HEADERS], ids=[c[0] for c in BAD_HEADERS])
def test_a_bad_header_is_a_typed_bad_header_error(section):
    """Headers that run past their section, an unknown type, text that is not UTF-8, a name seen twice or a
    timestamp out of range are ``bad_header`` (with both checksums correct), whole or byte by byte."""
    data = GOOD + frame(section, b"{}")
    for label, chunks in [("whole", [data]), ("bytewise", [data[i:i + 1] for i in range(len(data))])]:
        messages, exc = failure(chunks)
        assert (exc.code, exc.section, exc.offset) == ("bad_header", "headers", len(GOOD)), label
        assert len(messages) == 1, label


# --------------------------------------------------------------------------------------------------------------
# truncation and the decoder's life
# --------------------------------------------------------------------------------------------------------------


def test_a_real_recording_cut_at_every_byte_offset_is_truncated_at_close():
    """A recorded stream cut anywhere gives the messages before the cut, then ``truncated`` at ``close()`` with
    the cut message's offset and the bytes held, unless the cut falls between two messages."""
    data = (RECORDINGS / "langchain-aws-stream-text-then-tool-use-get-weather.bin").read_bytes()
    starts = [0]
    while starts[-1] < len(data):
        starts.append(starts[-1] + int.from_bytes(data[starts[-1]:starts[-1] + 4], "big"))
    assert starts[-1] == len(data) and len(starts) == 16
    whole = decode([data])
    for cut in range(len(data)):
        decoder = EventStreamDecoder()
        got = decoder.feed(data[:cut])
        index = max(i for i, s in enumerate(starts) if s <= cut)
        assert got == whole[:index], cut
        if cut == starts[index]:
            assert not decoder.has_pending and decoder.close() == [], cut
            continue
        with pytest.raises(EventStreamError) as info:
            decoder.close()
        exc = info.value
        assert (exc.code, exc.offset, exc.size) == ("truncated", starts[index], cut - starts[index]), cut
        assert exc.section == ("prelude" if cut - starts[index] < 12 else "message"), cut


def test_a_message_cut_after_many_small_pieces_is_truncated_with_every_byte_counted():
    """Fed in 1-byte pieces and cut one byte short, a message is ``truncated`` holding all but its last byte."""
    decoder = EventStreamDecoder()
    for i in range(len(GOOD2) - 1):
        assert decoder.feed(GOOD2[i:i + 1]) == []
    assert decoder.buffered_bytes == len(GOOD2) - 1
    with pytest.raises(EventStreamError) as info:
        decoder.close()
    assert (info.value.code, info.value.size) == ("truncated", len(GOOD2) - 1)


def test_close_on_a_clean_stream_returns_nothing_and_the_decoder_can_start_again():
    """``close()`` at a message boundary returns [], and the same decoder then reads a new stream from 0."""
    decoder = EventStreamDecoder()
    assert len(decoder.feed(GOOD + GOOD2)) == 2
    assert decoder.close() == []
    assert decoder.close() == []
    decoder.feed(GOOD[:20])
    with pytest.raises(EventStreamError):
        decoder.close()
    assert decoder.feed(GOOD) != [] and decoder.close() == []
    bad = bytearray(GOOD)
    bad[-1] ^= 1
    with pytest.raises(EventStreamError) as info:
        decoder.feed(bytes(bad))
    assert info.value.offset == 0  # offsets count from the start of the new stream


def test_a_failed_decoder_raises_the_same_error_on_every_later_feed():
    """After a failure the message boundaries are lost: later feeds raise the same error, ``close()`` returns []."""
    decoder = EventStreamDecoder()
    with pytest.raises(EventStreamError) as info:
        decoder.feed(b"\x00" * 12)
    first = info.value
    assert first.code == "crc_mismatch"
    for chunk in (GOOD, b"x"):
        with pytest.raises(EventStreamError) as again:
            decoder.feed(chunk)
        assert again.value is first
    assert decoder.close() == [] and not decoder.has_pending


def test_ten_megabytes_of_random_garbage_are_refused_at_once_holding_nothing():
    """Random bytes fail the first prelude checksum: the decoder raises on the first chunk and holds nothing."""
    rng = random.Random(7)
    decoder = EventStreamDecoder()
    with pytest.raises(EventStreamError) as info:
        for _ in range(160):
            decoder.feed(rng.randbytes(64 * KIB))
    assert info.value.code == "crc_mismatch" and info.value.offset == 0
    assert decoder.buffered_bytes == 0


def test_ten_megabytes_of_framed_garbage_never_hold_more_than_the_limit():
    """10 MB of blocks that each start with a valid prelude (announcing up to 4x the limit) followed by random
    bytes, fed in 4 KiB chunks with a new decoder after each failure: no decoder ever holds more than the limit,
    and what is held does come close to it."""
    limit = 64 * KIB
    rng = random.Random(11)
    blocks = []
    for _ in range(10 * MIB // (4 * KIB)):
        total = rng.randint(16, 4 * limit)
        blocks.append(bare_prelude(total, rng.randint(0, min(total - 16, 100))) + rng.randbytes(4 * KIB - 12))
    decoder = EventStreamDecoder(max_message_bytes=limit)
    held = failures = fed = 0
    codes = set()
    for chunk in blocks:
        fed += len(chunk)
        try:
            decoder.feed(chunk)
        except EventStreamError as exc:
            failures += 1
            codes.add(exc.code)
            decoder = EventStreamDecoder(max_message_bytes=limit)
        held = max(held, decoder.buffered_bytes)
        assert decoder.buffered_bytes <= limit
    assert fed >= 10 * 1000 * 1000
    assert limit // 2 < held <= limit
    assert failures > 100 and codes >= {"message_too_large", "crc_mismatch"}


# --------------------------------------------------------------------------------------------------------------
# properties
# --------------------------------------------------------------------------------------------------------------

_NAMES = st.text(max_size=12).filter(lambda s: len(s.encode("utf-8")) <= 255) | st.sampled_from(
    [":event-type", ":message-type", ":content-type", ":exception-type"])
_VALUES = st.one_of(
    st.tuples(st.just(0), st.none()),
    st.tuples(st.just(1), st.none()),
    st.tuples(st.just(2), st.integers(-(2**7), 2**7 - 1)),
    st.tuples(st.just(3), st.integers(-(2**15), 2**15 - 1)),
    st.tuples(st.just(4), st.integers(-(2**31), 2**31 - 1)),
    st.tuples(st.just(5), st.integers(-(2**63), 2**63 - 1)),
    st.tuples(st.just(6), st.binary(max_size=64)),
    st.tuples(st.just(7), st.text(max_size=24)),
    st.tuples(st.just(8), st.integers(-62135596800000, 253402300799999)),
    st.tuples(st.just(9), st.binary(min_size=16, max_size=16)),
)


@st.composite
def messages(draw):
    """(encoded bytes, expected message) for a message with random headers and payload."""
    fields = draw(st.dictionaries(_NAMES, _VALUES, max_size=6))
    payload = draw(st.binary(max_size=300))
    raw = frame(b"".join(header(n, k, v) for n, (k, v) in fields.items()), payload)
    return raw, EventStreamMessage({n: decoded(k, v) for n, (k, v) in fields.items()}, payload)


@PROPERTY_SETTINGS
@given(items=st.lists(messages(), max_size=8), data=st.data())
def test_any_messages_in_any_chunking_decode_to_what_was_encoded(items, data):
    """Messages with random headers of every type and random payloads, encoded independently and fed in a random
    chunking (and byte by byte), decode to exactly those messages."""
    stream = b"".join(raw for raw, _ in items)
    expected = [m for _, m in items]
    points = data.draw(st.lists(st.integers(0, len(stream)), max_size=40), label="cuts")
    assert decode(split_at(stream, points)) == expected
    assert decode([stream[i:i + 1] for i in range(len(stream))]) == expected


@PROPERTY_SETTINGS
@given(items=st.lists(messages(), min_size=1, max_size=5), data=st.data())
def test_messages_before_a_damaged_one_are_given_whatever_the_chunking(items, data):
    """With one byte of a stream damaged, every chunking gives the same messages before the fault, the same
    error code and offset, and never a message from the damaged one onwards."""
    stream = b"".join(raw for raw, _ in items)
    index = data.draw(st.integers(0, len(stream) - 1), label="damaged byte")
    damaged = bytearray(stream)
    damaged[index] ^= data.draw(st.integers(1, 255), label="xor")
    starts = [0]
    for raw, _ in items:
        starts.append(starts[-1] + len(raw))
    hit = max(i for i, s in enumerate(starts[:-1]) if s <= index)
    whole_messages, whole_exc = failure([bytes(damaged)])
    assert whole_messages == [m for _, m in items[:hit]]
    assert whole_exc.offset == starts[hit]
    points = data.draw(st.lists(st.integers(0, len(stream)), max_size=30), label="cuts")
    got, exc = failure(split_at(bytes(damaged), points))
    assert got == whole_messages
    assert (exc.code, exc.offset, exc.section) == (whole_exc.code, whole_exc.offset, whole_exc.section)


@PROPERTY_SETTINGS
@given(blob=st.binary(max_size=600), data=st.data(), limit=st.integers(16, 256))
def test_any_bytes_give_messages_or_a_typed_error_and_never_hold_more_than_the_limit(blob, data, limit):
    """Arbitrary bytes (often with a valid prelude in front) fed in random pieces end in messages or an
    ``EventStreamError``, never another exception, and the decoder never holds more than the limit."""
    if data.draw(st.booleans(), label="valid prelude"):
        blob = bare_prelude(data.draw(st.integers(0, 2 * limit)), data.draw(st.integers(0, 300))) + blob
    points = data.draw(st.lists(st.integers(0, len(blob)), max_size=20), label="cuts")
    decoder = EventStreamDecoder(max_message_bytes=limit)
    try:
        for chunk in split_at(blob, points):
            decoder.feed(chunk)
            assert decoder.buffered_bytes <= limit
        decoder.close()
    except EventStreamError as exc:
        assert exc.code in {"crc_mismatch", "bad_prelude", "message_too_large", "bad_header", "truncated"}


@PROPERTY_SETTINGS
@given(data=st.data())
def test_a_damaged_real_recording_fails_only_with_typed_errors(data):
    """A recorded stream with bytes changed, removed or inserted decodes to messages or an ``EventStreamError``."""
    stream = bytearray((RECORDINGS / "ruby-llm-nova-stream-tool-use-weather.0.bin").read_bytes())
    for _ in range(data.draw(st.integers(1, 4), label="edits")):
        at = data.draw(st.integers(0, len(stream) - 1), label="at")
        how = data.draw(st.sampled_from(["flip", "drop", "insert"]), label="how")
        if how == "flip":
            stream[at] ^= data.draw(st.integers(1, 255), label="xor")
        elif how == "drop":
            del stream[at:at + data.draw(st.integers(1, 40), label="n")]
        else:
            stream[at:at] = data.draw(st.binary(min_size=1, max_size=40), label="bytes")
        if not stream:
            return
    points = data.draw(st.lists(st.integers(0, len(stream)), max_size=20), label="cuts")
    try:
        decode(split_at(bytes(stream), points))
    except EventStreamError as exc:
        assert exc.code in {"crc_mismatch", "bad_prelude", "message_too_large", "bad_header", "truncated"}



def test_many_distinct_headers_sections_keep_the_caches_bounded_and_the_values_right():
    """Thousands of distinct headers sections (a fresh UUID and string each) decode right, and the module's caches
    of parsed sections and texts never grow past their bounds."""
    from toolwire.codecs import eventstream

    rng = random.Random(3)
    values = [(rng.randbytes(16), f"v{i}") for i in range(3000)]
    stream = b"".join(frame(header("id", 9, u) + header(s, 7, s), b"x") for u, s in values) + GOOD
    got = decode([stream])
    assert [m.headers for m in got[:-1]] == [{"id": uuid.UUID(bytes=u), s: s} for u, s in values]
    assert got[-1].event_type == "messageStart"
    assert len(eventstream._HEADERS_SEEN) <= eventstream._HEADERS_SEEN_MAX
    assert len(eventstream._TEXT_SEEN) <= eventstream._TEXT_SEEN_MAX


# --------------------------------------------------------------------------------------------------------------
# the encoder toolwire ships (encode_message), against the independent one and the decoder
# --------------------------------------------------------------------------------------------------------------

_ENCODABLE = st.one_of(st.booleans(), st.integers(-(2**63), 2**63 - 1), st.binary(max_size=64), st.text(max_size=24),
                       st.uuids(), st.integers(-62135596800000, 253402300799999).map(
                           lambda ms: datetime.datetime(1970, 1, 1, tzinfo=UTC) + datetime.timedelta(milliseconds=ms)))


@PROPERTY_SETTINGS
@given(headers=st.dictionaries(_NAMES, _ENCODABLE, max_size=6), payload=st.binary(max_size=300))
def test_encode_message_gives_what_the_decoder_reads_back(headers, payload):
    """Any headers of every Python value type and any payload, encoded by encode_message, decode to those headers
    (an int as itself, a datetime to the millisecond) and that payload, fed whole and byte by byte."""
    raw = encode_message(headers, payload)
    expected = [EventStreamMessage(headers, payload)]
    assert decode([raw]) == expected
    assert decode([raw[i:i + 1] for i in range(len(raw))]) == expected


def test_encode_message_writes_the_bytes_of_the_format():
    """A Bedrock-style event from encode_message is byte for byte the one the independent encoder writes."""
    payload = b'{"contentBlockIndex":0,"delta":{"text":"Hi"},"p":"ab"}'
    assert encode_message({":event-type": "contentBlockDelta", ":content-type": "application/json",
                           ":message-type": "event"}, payload) == GOOD2


def test_encode_message_refuses_what_the_format_cannot_hold():
    """A name over 255 bytes, a string over 65535 bytes or a value of no header type is refused, not cut."""
    with pytest.raises(ValueError):
        encode_message({"n" * 256: True})
    with pytest.raises(ValueError):
        encode_message({"s": "x" * 65536})
    with pytest.raises(TypeError):
        encode_message({"f": 1.5})  # type: ignore[dict-item]
