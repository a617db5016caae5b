"""The retry policy's time bounds hold while a response is being read, not only between attempts.

A server that trickles (an SSE comment every half second, a correct body one byte at a time, endless ``100
Continue`` interim responses, header lines that never end) never trips an HTTP read timeout, which is per read.
``RetryPolicy.attempt_timeout`` bounds each attempt and ``RetryPolicy.deadline`` all the attempts of a request on
the wall clock, enforced while reading: past them the attempt is a ``timeout``, retried only while time remains,
and ``run()`` answers with the fallback. A write that took effect earlier in the same run is never run again, and
the answer says that part of the request was done.

The servers are raw sockets on loopback (one thread per connection); each trickle stops by itself after
``LIFETIME`` seconds or as soon as the client goes away. Times are asserted with generous slack only.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any

import httpx
import pytest
from structlog.testing import capture_logs

from toolwire.harness import (AsyncToolLoop, FallbackReason, LoopResult, RetryPolicy, ToolLoop, WriteOutcome,
                              fallback_message)
from toolwire.harness.demo_tools import DemoWorld
from toolwire.sim import SCENARIOS, SimProvider

from ..dialects import SIMULATED as PROVIDERS

SSE_PROVIDERS = tuple(p for p in PROVIDERS if p != "bedrock-converse")  # the dialects whose streams are SSE
MODES = ["sync", "async"]
TICK = 0.5  # seconds between two trickled pieces
LIFETIME = 40.0  # a trickle stops by itself after this long (well past every bound the tests set)
SLACK = 15.0  # added to a bound before a test calls it broken: the machine is shared
WEATHER = SCENARIOS["provider_down"].prompts["en"]  # the first response is text
SAVE = SCENARIOS["save_with_faults"].prompts["en"]  # the first response is a write call, the second text


def policy(deadline: float, attempt_timeout: float | None = None, attempts: int = 4) -> RetryPolicy:
    kw: dict[str, Any] = {} if attempt_timeout is None else {"attempt_timeout": attempt_timeout}
    return RetryPolicy(attempts=attempts, deadline=deadline, initial=0.01, max_backoff=0.05, max_hint=1.0, **kw)


class Trickle:
    """A loopback HTTP/1.1 server: the first ``relay`` requests get the simulated provider's own response, sent at
    once; every later request gets the trickle ``kind``:

    * ``sse_comments``: a 200 event stream whose body is an SSE comment line every ``TICK``, for ever;
    * ``drip``: the simulated provider's correct response, one byte every ``TICK``;
    * ``continue``: ``HTTP/1.1 100 Continue`` every ``TICK``, never a final status;
    * ``slow_headers``: a 200 status line, then one more header line every ``TICK``, never the blank line.
    """

    def __init__(self, sim: SimProvider, kind: str, relay: int = 0) -> None:
        self.sim, self.kind, self.relay = sim, kind, relay
        self.requests: list[str] = []  # the request paths, in order
        self.stop = threading.Event()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.base_url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.threads: list[threading.Thread] = []
        self.lock = threading.Lock()
        self.accepter = threading.Thread(target=self._accept, daemon=True)
        self.accepter.start()

    def __enter__(self) -> "Trickle":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.sock.close()
        for t in [self.accepter, *self.threads]:
            t.join(timeout=5)

    def _accept(self) -> None:
        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self.threads.append(t)
            t.start()

    @staticmethod
    def _read_request(conn: socket.socket) -> tuple[str, dict[str, str], bytes] | None:
        data = b""
        while b"\r\n\r\n" not in data:
            piece = conn.recv(65536)
            if not piece:
                return None
            data += piece
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        path = lines[0].split(" ")[1]
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        while len(body) < length:
            piece = conn.recv(65536)
            if not piece:
                return None
            body += piece
        return path, headers, body

    def _from_sim(self, path: str, headers: dict[str, str], body: bytes) -> tuple[str, bytes]:
        """The simulated provider's answer to the same request: its content type and body."""
        keep = {k: v for k, v in headers.items()
                if k not in ("host", "content-length", "connection", "accept-encoding", "transfer-encoding")}
        r = httpx.post(self.sim.base_url + path, content=body, headers=keep, timeout=10.0)
        return r.headers.get("content-type", "application/json"), r.content

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(10.0)
        try:
            got = self._read_request(conn)
            if got is None:
                return
            path, headers, body = got
            with self.lock:
                self.requests.append(path)
                n = len(self.requests)
            if n <= self.relay:
                ctype, data = self._from_sim(path, headers, body)
                conn.sendall(f"HTTP/1.1 200 OK\r\ncontent-type: {ctype}\r\ncontent-length: {len(data)}\r\n"
                             f"connection: close\r\n\r\n".encode() + data)
                return
            self._trickle(conn, path, headers, body)
        except OSError:
            pass  # the client went away: the trickle ends
        finally:
            conn.close()

    def _pieces(self, path: str, headers: dict[str, str], body: bytes) -> tuple[bytes, Any]:
        if self.kind == "sse_comments":
            return (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n",
                    iter(lambda: b": still thinking\n\n", None))
        if self.kind == "drip":
            ctype, data = self._from_sim(path, headers, body)
            head = f"HTTP/1.1 200 OK\r\ncontent-type: {ctype}\r\ncontent-length: {len(data)}\r\n\r\n".encode()
            return head, (data[i:i + 1] for i in range(len(data)))
        if self.kind == "continue":
            return b"", iter(lambda: b"HTTP/1.1 100 Continue\r\n\r\n", None)
        if self.kind == "slow_headers":
            return b"HTTP/1.1 200 OK\r\n", (f"x-slow-{i}: {i}\r\n".encode() for i in range(1 << 30))
        raise AssertionError(self.kind)

    def _trickle(self, conn: socket.socket, path: str, headers: dict[str, str], body: bytes) -> None:
        head, pieces = self._pieces(path, headers, body)
        if head:
            conn.sendall(head)
        ends = time.monotonic() + LIFETIME
        for piece in pieces:
            if self.stop.wait(TICK) or time.monotonic() > ends:
                return
            conn.sendall(piece)


def run(provider: str, mode: str, base_url: str, prompt: str, retry: RetryPolicy,
        world: DemoWorld | None = None) -> tuple[LoopResult, float, list[dict[str, Any]]]:
    """One prompt through the public loop: its result, the seconds it took, the log events."""
    world = world if world is not None else DemoWorld()
    kw: dict[str, Any] = dict(model="sim-model", registry=world.registry(timeout=5.0), base_url=base_url,
                              api_key="sk-test", retry=retry, timeout=5.0)
    started = time.monotonic()
    with capture_logs() as logs:
        if mode == "sync":
            with ToolLoop(provider, **kw) as loop:
                result = loop.run(prompt)
        else:
            async def go() -> LoopResult:
                async with AsyncToolLoop(provider, **kw) as loop:
                    return await loop.run(prompt)

            result = asyncio.run(go())
    return result, time.monotonic() - started, logs


def assert_timed_out(result: LoopResult, logs: list[dict[str, Any]]) -> None:
    """The run ended in the provider fallback because of a typed ``timeout``."""
    assert result.fallback and result.reason is FallbackReason.PROVIDER_FAILED, result.answer
    [end] = [e for e in logs if e["event"] == "loop.fallback"]
    assert end["error_type"] == "timeout", end
    assert any(e["event"] == "http.error" and e["type"] == "timeout" for e in logs)


@pytest.fixture
def sim():
    provider = SimProvider(seed=5)
    with provider.serve():
        yield provider


# ---- a trickle holds run() no longer than the deadline ------------------------------------------------------------

CASES = ([("sse_comments", p) for p in SSE_PROVIDERS] + [("drip", p) for p in PROVIDERS]
         + [(k, p) for k in ("continue", "slow_headers") for p in ("openai-chat", "bedrock-converse")])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind,provider", CASES, ids=[f"{k}-{p}" for k, p in CASES])
def test_a_trickling_response_is_cut_at_the_deadline(sim, kind, provider, mode):
    """No attempt bound of its own: the deadline (3 s) ends the trickle while it is read, and run() answers with
    the fallback because of a timeout, long before the trickle would end."""
    with Trickle(sim, kind) as server:
        result, took, logs = run(provider, mode, server.base_url, WEATHER, policy(deadline=3.0))
    assert_timed_out(result, logs)
    assert took < 3.0 + SLACK, took
    assert len(server.requests) == 1  # the deadline is spent: no retry starts after it


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", ["drip", "continue", "slow_headers"])
def test_an_attempt_past_its_own_bound_is_retried_while_time_remains(sim, kind, mode):
    """attempt_timeout (1 s) under a longer deadline (6 s): each trickling attempt is cut at its own bound and
    the next one starts, until the attempts or the deadline run out."""
    with Trickle(sim, kind) as server:
        result, took, logs = run("anthropic", mode, server.base_url, WEATHER,
                                 policy(deadline=6.0, attempt_timeout=1.0))
    assert_timed_out(result, logs)
    assert took < 6.0 + SLACK, took
    assert len(server.requests) >= 2
    failures = [e for e in logs if e["event"] == "http.error"]
    assert len(failures) == len(server.requests) and all(e["type"] == "timeout" for e in failures)


@pytest.mark.parametrize("mode", MODES)
def test_an_attempt_that_spends_the_deadline_is_not_retried(sim, mode):
    """An attempt bound longer than the deadline: the deadline cuts the first attempt and nothing is left for a
    second one."""
    with Trickle(sim, "drip") as server:
        result, took, logs = run("openai-chat", mode, server.base_url, WEATHER,
                                 policy(deadline=2.0, attempt_timeout=60.0))
    assert_timed_out(result, logs)
    assert took < 2.0 + SLACK, took
    assert len(server.requests) == 1


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_response_within_the_bounds_is_answered(sim, provider, mode):
    """The bounds change nothing for a response that arrives in time."""
    result, _, _ = run(provider, mode, sim.base_url, WEATHER, policy(deadline=20.0, attempt_timeout=10.0))
    assert not result.fallback, result.answer


# ---- a write earlier in the run -----------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_trickle_after_a_write_keeps_the_write_and_says_it_was_done(sim, provider, mode):
    """The first response (relayed from the simulated provider) calls a write, which runs; the second trickles
    past the deadline. The write ran once and is not run again, the run answers with the fallback, and the
    answer says that part of the request was already done (never the plain "try again")."""
    world = DemoWorld()
    with Trickle(sim, "drip", relay=1) as server:
        result, took, logs = run(provider, mode, server.base_url, SAVE, policy(deadline=3.0, attempt_timeout=1.5),
                                 world=world)
    assert_timed_out(result, logs)
    assert took < 3.0 + SLACK, took
    assert world.effects.count("save_measurement") == 1
    assert [(c.name, c.result_kind) for c in result.calls] == [("save_measurement", "ok")]
    assert len(server.requests) >= 2  # the write's turn, then the trickling answer's attempts
    assert result.answer == fallback_message(FallbackReason.PROVIDER_FAILED, "en", writes=WriteOutcome.OK)
    assert result.answer != fallback_message(FallbackReason.PROVIDER_FAILED, "en")
