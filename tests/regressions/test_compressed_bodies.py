"""Compressed response bodies are decoded step by step and every cap counts decoded bytes: a gzip bomb (one layer
or stacked), a body that expands past ``max_body_bytes``, megabytes of compressed blank lines, an error body that
expands without end. Over real loopback HTTP against the simulated provider, every dialect, streamed and whole,
sync and async, for the loop and ``toolwire chat``; the MCP client over HTTP never decompresses."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import subprocess
import sys
import zlib
from functools import lru_cache
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from toolwire.harness import AsyncToolLoop, FallbackReason, LoopResult, RetryPolicy, ToolLoop, fallback_message
from toolwire.harness import AsyncHTTPTransport, HTTPTransport, ProviderError
from toolwire.harness.demo_tools import DemoWorld
from toolwire.sim import SCENARIOS, Fault, SimProvider

from ..conftest import ROOT
from ..dialects import SIMULATED as PROVIDERS

FAST = RetryPolicy(attempts=4, deadline=60.0, initial=0.01, max_backoff=0.05)
MODEL = "sim-model"
KEY = "sk-test-KEY-0f1e2d3c4b5a"
HEIGHT = SCENARIOS["height"].prompts["en"]
MODES = ["sync", "async"]
STREAMS = [True, False]


@lru_cache(maxsize=None)
def gzipped(size: int, fill: bytes = b"\n", layers: int = 1) -> bytes:
    """``size`` bytes of ``fill``, gzip-compressed ``layers`` times (built piece by piece, never whole)."""
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    piece = fill * ((1 << 20) // len(fill))
    out = [c.compress(piece) for _ in range(size // len(piece))]
    data = b"".join(out) + c.flush()
    for _ in range(layers - 1):
        data = gzip.compress(data, 9)
    return data


def deflated(size: int) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 15)
    piece = b"\n" * (1 << 20)
    return b"".join(c.compress(piece) for _ in range(size // len(piece))) + c.flush()


@pytest.fixture
def sim():
    provider = SimProvider(seed=3)
    with provider.serve():
        yield provider


def run(sim: SimProvider, provider: str, mode: str, *, stream: bool = True,
        max_body_bytes: int | None = None) -> LoopResult:
    world = DemoWorld()
    kw: dict[str, Any] = dict(model=MODEL, registry=world.registry(timeout=5.0), retry=FAST)
    tkw: dict[str, Any] = dict(model=MODEL, base_url=sim.base_url, api_key=KEY, stream=stream, timeout=30.0)
    if max_body_bytes is not None:
        tkw["max_body_bytes"] = max_body_bytes
    if mode == "sync":
        with ToolLoop(provider, transport=HTTPTransport(provider, **tkw), stream=stream, **kw) as loop:
            return loop.run(HEIGHT)

    async def go() -> LoopResult:
        async with AsyncToolLoop(provider, transport=AsyncHTTPTransport(provider, **tkw), stream=stream,
                                 **kw) as loop:
            return await loop.run(HEIGHT)

    return asyncio.run(go())


def ctype(provider: str, stream: bool) -> str:
    if not stream:
        return "application/json"
    return "application/vnd.amazon.eventstream" if provider == "bedrock-converse" else "text/event-stream"


def unreadable(logs: list[dict]) -> list[str]:
    return [e["type"] for e in logs if e["event"] == "http.unreadable_body"]


def assert_fallback(result: LoopResult) -> None:
    assert result.fallback and result.reason is FallbackReason.PROVIDER_FAILED, (result.reason, result.answer)
    assert result.answer == fallback_message(FallbackReason.PROVIDER_FAILED, "en")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("stream", STREAMS, ids=["stream", "whole"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_stacked_gzip_bomb_is_refused_and_the_loop_falls_back(sim, provider, stream, mode):
    """``Content-Encoding: gzip, gzip`` over a few KB that expand to 1 GiB: refused before a byte is inflated
    (``decoding_error``), retried once, then the fallback; never a MemoryError."""
    bomb = gzipped(1 << 30, layers=2)
    assert len(bomb) < 64 * 1024
    sim.plan([], then=Fault.raw(bomb, content_type=ctype(provider, stream),
                                headers={"Content-Encoding": "gzip, gzip"}))
    with capture_logs() as logs:
        result = run(sim, provider, mode, stream=stream)
    assert_fallback(result)
    assert unreadable(logs) == ["decoding_error", "decoding_error"]
    assert len(sim.requests) == 2


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("stream", STREAMS, ids=["stream", "whole"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_gzip_body_is_capped_by_its_decoded_size(sim, provider, stream, mode):
    """One gzip layer of blank lines, 8 MiB decoded from a few KB, against a cap of 1 MiB: ``body_too_large``
    (streamed) or the framer's own cap, counted on decoded bytes; the fallback, never the whole body held."""
    sim.plan([], then=Fault.raw(gzipped(8 << 20), content_type=ctype(provider, stream),
                                headers={"Content-Encoding": "gzip"}))
    with capture_logs() as logs:
        result = run(sim, provider, mode, stream=stream, max_body_bytes=1 << 20)
    assert_fallback(result)
    # blank lines are no AWS event stream: its framer refuses the first decoded bytes (a typed error all the same)
    expected = "crc_mismatch" if (provider, stream) == ("bedrock-converse", True) else "body_too_large"
    assert unreadable(logs) == [expected, expected]


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "identity"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_compressed_answer_within_the_cap_is_read(sim, provider, mode, encoding):
    """A whole answer sent gzip- or deflate-compressed is decoded and used; only those codings are asked for."""
    from ..bodies import body

    data = body(provider, [], text="Compressed hello.")
    packed = {"gzip": gzip.compress, "deflate": zlib.compress, "identity": bytes}[encoding](data)
    sim.plan([], then=Fault.raw(packed, headers={"Content-Encoding": encoding}))
    result = run(sim, provider, mode, stream=False)
    assert not result.fallback and result.answer == "Compressed hello.", result.answer
    assert sim.requests and all(r.headers.get("accept-encoding") == "gzip, deflate" for r in sim.requests)


@pytest.mark.parametrize("status", [400, 429, 500, 503])
@pytest.mark.parametrize("mode", MODES)
def test_an_error_body_bomb_is_read_up_to_its_decoded_limit(sim, status, mode):
    """An error body of 256 MiB decoded (256 KB on the wire): at most ERROR_BODY_LIMIT decoded bytes are read,
    the status decides; stacked codings leave the body out. The loop falls back, nothing crashes."""
    for encoding, data in (("gzip", gzipped(256 << 20)), ("gzip, gzip", gzipped(1 << 30, layers=2))):
        sim.reset()
        sim.plan([], then=Fault.raw(data, status=status, headers={"Content-Encoding": encoding}))
        with capture_logs() as logs:
            result = run(sim, "openai-chat", mode, stream=True)
        assert_fallback(result)
        errors = [e for e in logs if e["event"] == "http.error"]
        assert errors and all(e["status"] == status for e in errors)


@pytest.mark.parametrize("mode", MODES)
def test_megabytes_of_compressed_blank_lines_end_at_the_cap(sim, mode):
    """260 KB of gzip that expand to 256 MiB of blank lines: read up to the default 64 MiB cap only, then
    ``body_too_large`` and the fallback (blank lines are dropped in C-level passes, not one by one)."""
    sim.plan([], then=Fault.raw(gzipped(256 << 20), content_type="text/event-stream",
                                headers={"Content-Encoding": "gzip"}))
    with capture_logs() as logs:
        result = run(sim, "openai-chat", mode)
    assert_fallback(result)
    assert unreadable(logs) == ["body_too_large", "body_too_large"]


def test_a_deflate_body_over_the_cap_is_body_too_large(sim):
    sim.plan([], then=Fault.raw(deflated(8 << 20), content_type="text/event-stream",
                                headers={"Content-Encoding": "deflate"}))
    with capture_logs() as logs:
        result = run(sim, "anthropic", "sync", max_body_bytes=1 << 20)
    assert_fallback(result)
    assert unreadable(logs) == ["body_too_large", "body_too_large"]


@pytest.mark.parametrize("encoding", ["br", "zstd", "compress", "gzip, identity, gzip"])
def test_an_unknown_or_stacked_encoding_is_a_typed_error(sim, encoding):
    """A coding that was not asked for: ``ProviderError`` of type ``decoding_error`` from the transport."""
    sim.plan([], then=Fault.raw(b"data: {}\n\n", content_type="text/event-stream",
                                headers={"Content-Encoding": encoding}))
    with HTTPTransport("openai-chat", model=MODEL, base_url=sim.base_url, api_key=KEY) as t:
        with pytest.raises(ProviderError) as info:
            t.request({"model": MODEL, "messages": [{"role": "user", "content": "hi"}]})
    assert info.value.type == "decoding_error" and info.value.transient


def test_max_body_bytes_is_validated():
    from toolwire import UsageError

    for bad in (0, -1, True, 1.5, "1"):
        with pytest.raises(UsageError):
            HTTPTransport("openai-chat", model=MODEL, api_key=KEY, max_body_bytes=bad)


_MEMORY_SCRIPT = """
import asyncio, sys, resource
from toolwire.harness import ToolLoop, AsyncToolLoop, RetryPolicy
from toolwire.harness.demo_tools import DemoWorld
from toolwire.sim import SCENARIOS, Fault, SimProvider
from tests.regressions.test_compressed_bodies import gzipped, ctype
provider, stream, encoding, layers, mode = sys.argv[1], sys.argv[2] == "stream", sys.argv[3], int(sys.argv[4]), sys.argv[5]
bomb = gzipped(1 << 30, layers=layers)
sim = SimProvider(seed=1)
with sim.serve():
    sim.plan([], then=Fault.raw(bomb, content_type=ctype(provider, stream), headers={"Content-Encoding": encoding}))
    base = int(open('/proc/self/status').read().split('VmRSS:')[1].split()[0]) >> 10
    kw = dict(model="m", registry=DemoWorld().registry(), base_url=sim.base_url, api_key="k", stream=stream,
              retry=RetryPolicy(attempts=2, initial=0.01, max_backoff=0.05), timeout=120.0)
    if mode == "sync":
        with ToolLoop(provider, **kw) as loop:
            result = loop.run(SCENARIOS["height"].prompts["en"])
    else:
        async def go():
            async with AsyncToolLoop(provider, **kw) as loop:
                return await loop.run(SCENARIOS["height"].prompts["en"])
        result = asyncio.run(go())
peak = int(open('/proc/self/status').read().split('VmHWM:')[1].split()[0]) >> 10
print(result.fallback, peak - base)
"""


@pytest.mark.parametrize("provider,stream,encoding,layers,mode", [
    ("openai-chat", "stream", "gzip, gzip", 2, "sync"),
    ("openai-chat", "stream", "gzip", 1, "async"),
    ("anthropic", "whole", "gzip", 1, "sync"),
    ("bedrock-converse", "stream", "gzip", 1, "async"),
])
def test_a_gzip_bomb_keeps_memory_within_the_cap(provider, stream, encoding, layers, mode):
    """1 GiB decoded (about 1 MB on the wire, or a few KB in two layers) in a process of its own: the loop falls
    back and the process's peak grows by less than the 64 MiB cap plus 64 MB, whatever the ratio."""
    out = subprocess.run([sys.executable, "-c", _MEMORY_SCRIPT, provider, stream, encoding, str(layers), mode],
                         cwd=ROOT, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "MALLOC_ARENA_MAX": "2"})
    assert out.returncode == 0, out.stderr[-3000:]
    fallback, grown = out.stdout.split()
    assert fallback == "True" and int(grown) < 128, out.stdout


def test_toolwire_chat_falls_back_on_a_gzip_bomb(sim, tmp_path):
    """``toolwire chat`` against a stacked gzip bomb: exit 0 with the fallback answer (as for any provider
    failure), the refusal in the logs on stderr, no traceback."""
    sim.plan([], then=Fault.raw(gzipped(1 << 30, layers=2), content_type="text/event-stream",
                                headers={"Content-Encoding": "gzip, gzip"}))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": KEY}
    out = subprocess.run([sys.executable, "-m", "toolwire", "chat", "--provider", "openai-chat", "--model", MODEL,
                          "--tools", "tests.chat_tools", "--base-url", sim.base_url, "--json", HEIGHT],
                         capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    assert doc["fallback"] is True and doc["answer"] == fallback_message(FallbackReason.PROVIDER_FAILED, "en")
    assert "decoding_error" in out.stderr and "Traceback" not in out.stderr and "MemoryError" not in out.stderr


_CODINGS = {"gzip": gzip.compress, "deflate": zlib.compress,
            "raw-deflate": lambda d: zlib.compress(d, wbits=-15), "identity": bytes}


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=300_000) | st.builds(lambda n: b"\n" * n, st.integers(0, 400_000)),
       st.sampled_from(sorted(_CODINGS)), st.lists(st.integers(1, 70_000), min_size=1, max_size=40),
       st.integers(1, 500_000))
def test_any_chunking_decodes_to_the_same_bytes_in_bounded_steps(data, coding, cuts, limit):
    """Whatever the network's chunks, the decoded bytes are the body's, no piece is over STEP, and a body over
    the cap raises BodyTooLarge having handed out no more than the cap."""
    from toolwire.harness._decode import STEP, BodyTooLarge, Decoder

    wire = _CODINGS[coding](data)
    decoder = Decoder("deflate" if coding == "raw-deflate" else coding, limit)
    out, pos, i = bytearray(), 0, 0
    try:
        while pos < len(wire):
            step = cuts[i % len(cuts)]
            for piece in decoder.feed(wire[pos:pos + step]):
                assert 0 < len(piece) <= STEP
                out += piece
            pos, i = pos + step, i + 1
        decoder.close()
    except BodyTooLarge:
        assert len(data) > limit and len(out) <= limit and data.startswith(bytes(out))
        return
    assert len(data) <= limit and bytes(out) == data
