"""Request signing: an ``HTTP`` part that authenticates by a signature over each request's bytes (``HTTP.sign``) is
called by the transports for every attempt, sync and async, over real loopback HTTP; it may need no API key
(``api_key`` returns None), and the secrets it signs with never reach a log."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import msgspec
import pytest

import toolwire
from toolwire.codecs.capabilities import Limit
from toolwire.harness import AsyncToolLoop, RetryPolicy, ToolLoop
from toolwire.harness.transport import AsyncHTTPTransport, HTTPTransport

from .test_dialect_registry import TOY, ToyHTTP, frames

SECRET = "toy-signing-secret-0123456789"
_CLOCK = itertools.count(1)


def _signature(method: str, path: str, stamp: str, body: bytes) -> str:
    text = "\n".join((method, path, stamp, hashlib.sha256(body).hexdigest()))
    return hmac.new(SECRET.encode(), text.encode(), hashlib.sha256).hexdigest()


class SignedToyHTTP(ToyHTTP):
    """The toy dialect's HTTP part, authenticating by an HMAC of each request (with a stamp that changes on every
    signing, as a timestamp does) when no key is given."""

    def api_key(self, api_key: str | None) -> str | None:
        return api_key or None

    def sign(self, method: str, url: str, headers: dict[str, str], body: bytes) -> dict[str, str]:
        if "authorization" in headers:
            return headers
        stamp = str(next(_CLOCK))
        path = url.split("://", 1)[1].partition("/")[2]
        return {**headers, "x-toy-stamp": stamp,
                "authorization": f"TOY-HMAC Signature={_signature(method, '/' + path, stamp, body)}"}

    def secrets(self) -> tuple[str, ...]:
        return (SECRET,)


class FailingSignHTTP(ToyHTTP):
    def api_key(self, api_key: str | None) -> str | None:
        return None

    def sign(self, method: str, url: str, headers: dict[str, str], body: bytes) -> dict[str, str]:
        raise RuntimeError("the credentials could not be refreshed")


def _record(http: Any) -> toolwire.codecs.Dialect:
    caps = msgspec.structs.replace(TOY.capabilities, max_request_bytes=Limit(None, "toy", documented=False))
    return msgspec.structs.replace(TOY, http=http, capabilities=caps)


@pytest.fixture
def signed_toy(monkeypatch):
    """The toy dialect, with the signing HTTP part, in the registry for one test."""
    import toolwire.codecs as codecs

    registry = dict(codecs._discover())
    registry["toy"] = _record(SignedToyHTTP("toy"))
    monkeypatch.setattr(codecs, "_REGISTRY", registry)
    return registry["toy"]


class Server:
    """A loopback server that checks each request's signature: 403 when it does not verify, a planned 503 for the
    first request of a path under ``/flaky``, else a streamed answer in the toy's framing."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.url = ""


def _handler(server: Server) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            auth = self.headers.get("authorization") or ""
            stamp = self.headers.get("x-toy-stamp") or ""
            ok = auth == f"TOY-HMAC Signature={_signature('POST', self.path, stamp, body)}"
            with server.lock:
                first = not any(s["path"] == self.path for s in server.seen)
                server.seen.append({"path": self.path, "auth": auth, "stamp": stamp, "ok": ok, "body": body})
            if not ok:
                self._send(403, b'{"message":"signature mismatch; the key ' + SECRET.encode() + b' was not used"}',
                           "application/json")
            elif "/flaky" in self.path and first:
                self._send(503, b'{"message":"try again"}', "application/json")
            else:
                self._send(200, frames({"text": "Signed."}, {"end": "end_turn"}), "application/vnd.amazon.eventstream")

        def _send(self, status: int, data: bytes, ctype: str) -> None:
            self.send_response(status)
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            return

    return Handler


@pytest.fixture
def server() -> Iterator[Server]:
    state = Server()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


REGISTRY = toolwire.Registry([])
FAST = RetryPolicy(attempts=3, initial=0.01, max_backoff=0.02)


def test_a_part_that_signs_needs_no_api_key(signed_toy, server):
    """Without a key the endpoint carries no auth header, and the transport sends the signed bytes: the server
    verifies the signature over exactly the body it received."""
    with HTTPTransport("toy", model="m1", base_url=server.url) as t:
        assert "authorization" not in t._endpoint.headers
        turn = t.request({"messages": [{"role": "user", "content": [{"text": "héllo"}]}]})
    assert turn.text == "Signed." and turn.finished_cleanly
    [seen] = server.seen
    assert seen["ok"] and json.loads(seen["body"]) == {"messages": [{"role": "user", "content": [{"text": "héllo"}]}]}


def test_every_attempt_is_signed_again_sync(signed_toy, server):
    """A retried request is signed afresh: two attempts, two stamps, two signatures, both verified."""
    with ToolLoop("toy", model="flaky", registry=REGISTRY, base_url=server.url, retry=FAST) as loop:
        result = loop.run("hi")
    assert result.answer == "Signed."
    attempts = [s for s in server.seen if s["path"] == "/model/flaky/converse-stream"]
    assert len(attempts) == 2 and all(s["ok"] for s in attempts)
    assert attempts[0]["stamp"] != attempts[1]["stamp"] and attempts[0]["auth"] != attempts[1]["auth"]


def test_every_attempt_is_signed_again_async(signed_toy, server):
    """The async transport signs every attempt too, streamed and whole."""
    async def main() -> list[str | None]:
        answers = []
        for stream in (True, False):
            async with AsyncToolLoop("toy", model=f"flaky{int(stream)}", registry=REGISTRY, base_url=server.url,
                                     retry=FAST, stream=stream) as loop:
                answers.append((await loop.run("hi")).answer)
        return answers

    assert anyio.run(main) == ["Signed.", "Signed."]
    assert len(server.seen) == 4 and all(s["ok"] for s in server.seen)
    assert len({s["auth"] for s in server.seen}) == 4


def test_a_key_still_goes_in_the_auth_headers(signed_toy, server):
    """With a key, the part's auth headers carry it and its sign hook leaves them (the server refuses it: 403)."""
    with HTTPTransport("toy", model="m1", base_url=server.url, api_key="k-123456789") as t:
        with pytest.raises(toolwire.ToolwireError) as err:
            t.request({"messages": []})
    assert err.value.status == 403 and server.seen[0]["auth"] == "Bearer k-123456789"


def test_the_signing_secrets_never_reach_a_log(signed_toy, server, caplog):
    """The values a part's secrets() names are scrubbed from every log event, an error body echoing one included."""
    caplog.set_level(logging.DEBUG, logger="toolwire")
    with HTTPTransport("toy", model="m1", base_url=server.url, api_key="k-123456789") as t:
        with pytest.raises(toolwire.ToolwireError):
            t.request({"messages": []})
    with HTTPTransport("toy", model="m1", base_url=server.url) as t:
        t.request({"messages": []})
    logged = "\n".join(r.getMessage() + repr(r.__dict__) for r in caplog.records)
    assert "http.error" in logged and SECRET not in logged


def test_a_signing_that_fails_is_a_permanent_provider_error(monkeypatch, server):
    """A sign hook that raises makes the request fail with a typed, permanent ProviderError; nothing is sent."""
    import toolwire.codecs as codecs

    registry = dict(codecs._discover())
    registry["toy"] = _record(FailingSignHTTP("toy"))
    monkeypatch.setattr(codecs, "_REGISTRY", registry)
    with HTTPTransport("toy", model="m1", base_url=server.url) as t:
        with pytest.raises(toolwire.ToolwireError) as err:
            t.request({"messages": []})
    assert err.value.type == "signing_error" and err.value.transient is False and server.seen == []

    async def main() -> None:
        async with AsyncHTTPTransport("toy", model="m1", base_url=server.url) as t:
            await t.request({"messages": []})

    with pytest.raises(toolwire.ToolwireError, match="could not be signed"):
        anyio.run(main)


def test_a_part_without_signing_still_needs_a_key(monkeypatch):
    """The default api_key() still refuses to go without a key: a UsageError naming the variables."""
    monkeypatch.delenv("TOY_API_KEY", raising=False)
    import toolwire.codecs as codecs

    registry = dict(codecs._discover())
    registry["toy"] = TOY
    monkeypatch.setattr(codecs, "_REGISTRY", registry)
    with pytest.raises(toolwire.UsageError, match="TOY_API_KEY"):
        HTTPTransport("toy", model="m1", base_url="http://127.0.0.1:9")
