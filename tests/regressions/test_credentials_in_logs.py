"""Credentials kept out of every log, toolwire's and the libraries' it drives (httpx, httpcore, the MCP SDK), out of
errors and out of ``toolwire chat``'s stderr, whatever encoding a server echoes them in.

Before: the password of a base URL's ``user:password@`` was printed by httpx's own ``HTTP Request:`` line; an error
body echoing ``Authorization: Basic <base64 of user:password>`` reached ``http.error`` and the CLI's stderr; for the
dialects whose key goes in ``Authorization`` (openai-chat, openai-responses, bedrock-converse) httpx's Basic auth
replaced the key, so every request was a 401."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote

import pytest
from structlog.testing import capture_logs

import toolwire
from toolwire.harness import AsyncToolLoop, RetryPolicy, ToolLoop

from ..conftest import ROOT

KEY = "tw-key-0123456789abcdefXYZ"  # no provider key shape: only its registration can redact it
USER = "alice"
PASSWORD = "Pa55!w0rd-s3cret"  # its '!' is percent-encoded in the URL
PASSWORD_IN_URL = quote(PASSWORD, safe="")
FAST = RetryPolicy(attempts=2, deadline=20.0, initial=0.01, max_backoff=0.05, max_hint=1.0)
#: the dialects whose API key travels in a header of their own: user info becomes Basic credentials next to it
OWN_HEADER = ["anthropic", "gemini", "gemini-interactions"]
#: the dialects whose key (or signature) is the Authorization header: user info in the base URL is refused
IN_AUTHORIZATION = ["openai-chat", "openai-responses", "bedrock-converse"]
ALL = OWN_HEADER + IN_AUTHORIZATION


def encodings(secret: str) -> list[str]:
    """The forms a server may echo ``secret`` in."""
    return [secret, quote(secret, safe=""), base64.b64encode(secret.encode()).decode().rstrip("="),
            "".join(f"\\u{ord(c):04x}" for c in secret)]


FORBIDDEN = sorted({*encodings(KEY), *encodings(PASSWORD), *encodings(f"{USER}:{PASSWORD}"), PASSWORD_IN_URL})


def leaks(texts) -> list[str]:
    return [t for t in texts for s in FORBIDDEN if s in t]


class Echo(BaseHTTPRequestHandler):
    """Answers every POST with ``status`` and a JSON error body that echoes the credentials it got, plainly,
    URL-encoded, JSON-escaped and (the Basic header) in base64."""
    status = 401
    seen: list[dict[str, str]] = []

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("content-length") or 0))
        got = {k.lower(): v for k, v in self.headers.items()}
        type(self).seen.append(got)
        echoed = {k: got[k] for k in ("authorization", "x-api-key", "x-goog-api-key") if k in got}
        text = "; ".join(f"{k}: {v}" for k, v in echoed.items())
        message = (f"invalid credentials ({text}) url-encoded: {quote(text, safe='')} escaped: "
                   + "".join(f"\\u{ord(c):04x}" for c in text) + f" path: {self.path} base64: "
                   + " ".join(base64.b64encode(v.split()[-1].encode()).decode() for v in echoed.values()))
        body = json.dumps({"error": {"type": "authentication_error", "message": message}}).encode()
        self.send_response(self.status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def echo():
    Echo.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.texts: list[str] = []

    def emit(self, record):
        self.texts.append(f"{record.name} {record.getMessage()}")
        if record.exc_info:
            self.texts.append(logging.Formatter().formatException(record.exc_info))


@pytest.fixture
def root_logs():
    """Every record of every logger (root, httpx, httpcore, toolwire) at DEBUG."""
    handler = Collect()
    names = ["", "httpx", "httpcore", "toolwire", "mcp", "httpx2"]
    before = {n: logging.getLogger(n).level for n in names}
    for n in names:
        logging.getLogger(n).setLevel(logging.DEBUG)
    logging.getLogger().addHandler(handler)
    yield handler.texts
    logging.getLogger().removeHandler(handler)
    for n, level in before.items():
        logging.getLogger(n).setLevel(level)


def registry() -> toolwire.Registry:
    def lookup_height() -> str:
        """The user's height."""
        return "170 cm"
    return toolwire.Registry([toolwire.Tool.from_function(lookup_height, effect="read")])


def run(provider: str, base_url: str, mode: str) -> list[str]:
    """One prompt through the loop against ``base_url``; the texts of what it raised or answered."""
    options = {"model": "m", "registry": registry(), "base_url": base_url, "api_key": KEY, "retry": FAST,
               "timeout": 10.0}
    try:
        if mode == "sync":
            with ToolLoop(provider, **options) as loop:
                result = loop.run("How tall am I?")
        else:
            async def main():
                async with AsyncToolLoop(provider, **options) as loop:
                    return await loop.run("How tall am I?")
            result = asyncio.run(main())
    except toolwire.ToolwireError as exc:
        return [str(exc), repr(exc)]
    return [repr(result)]


def structlog_texts(events) -> list[str]:
    return [json.dumps(e, default=str) for e in events]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("provider", ALL)
def test_an_echoed_api_key_reaches_no_logger_in_any_encoding(provider, mode, echo, root_logs):
    """The key echoed in a 401 body (plainly, URL-encoded, JSON-escaped): in no record of any logger at DEBUG,
    no structlog event, no error."""
    with capture_logs() as events:
        texts = run(provider, f"http://{echo}", mode)
    texts += run(provider, f"http://{echo}", mode)  # and through the "toolwire" standard logger
    assert Echo.seen, "the request reached the server"
    assert [e for e in events if e["event"] == "http.error"]
    assert leaks(texts + root_logs + structlog_texts(events)) == []


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("provider", OWN_HEADER)
def test_base_url_user_info_reaches_no_logger_and_travels_as_basic_credentials(provider, mode, echo, root_logs):
    """``http://alice:<password>@host``: the server gets Basic credentials and the key, each in its header; the
    password (plain, percent-encoded, in base64 of ``user:password``) is in no record of any logger (httpx's
    ``HTTP Request:`` line included), no structlog event, no error."""
    url = f"http://{USER}:{PASSWORD_IN_URL}@{echo}"
    with capture_logs() as events:
        texts = run(provider, url, mode)
    texts += run(provider, url, mode)
    basic = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    assert Echo.seen and all(h.get("authorization") == f"Basic {basic}" for h in Echo.seen), Echo.seen
    assert all(KEY in (h.get("x-api-key", "") + h.get("x-goog-api-key", "")) for h in Echo.seen)
    assert any("HTTP Request" in t for t in root_logs), root_logs  # httpx did log the request
    assert [e for e in events if e["event"] == "http.error"]
    assert leaks(texts + root_logs + structlog_texts(events)) == []


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("provider", IN_AUTHORIZATION)
def test_base_url_user_info_is_refused_where_the_key_is_the_authorization_header(provider, mode, echo):
    """Basic credentials would replace the Bearer key (or the signature): a UsageError naming what to do instead,
    before any request, without the password."""
    with pytest.raises(toolwire.UsageError) as err:
        if mode == "sync":
            ToolLoop(provider, model="m", registry=registry(), base_url=f"http://{USER}:{PASSWORD_IN_URL}@{echo}",
                     api_key=KEY)
        else:
            async def main():
                AsyncToolLoop(provider, model="m", registry=registry(),
                              base_url=f"http://{USER}:{PASSWORD_IN_URL}@{echo}", api_key=KEY)
            asyncio.run(main())
    assert "user info" in str(err.value) and "proxy" in str(err.value)
    assert leaks([str(err.value)]) == [] and USER not in str(err.value)
    assert Echo.seen == []


@pytest.mark.parametrize("provider", IN_AUTHORIZATION)
def test_base_url_user_info_from_the_environment_is_refused_too(provider, monkeypatch):
    """The same URL from ``OPENAI_BASE_URL`` / ``AWS_ENDPOINT_URL_BEDROCK_RUNTIME``: refused, naming the variable."""
    var = "AWS_ENDPOINT_URL_BEDROCK_RUNTIME" if provider == "bedrock-converse" else "OPENAI_BASE_URL"
    monkeypatch.setenv(var, f"http://{USER}:{PASSWORD_IN_URL}@127.0.0.1:9")
    with pytest.raises(toolwire.UsageError, match=var) as err:
        ToolLoop(provider, model="m", registry=registry(), api_key=KEY)
    assert leaks([str(err.value)]) == []


def chat(provider: str, base_url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(ROOT), "ANTHROPIC_API_KEY": KEY,
           "GEMINI_API_KEY": KEY, "OPENAI_API_KEY": KEY, "AWS_BEARER_TOKEN_BEDROCK": KEY, "AWS_REGION": "us-east-1"}
    return subprocess.run([sys.executable, "-m", "toolwire", "chat", "--provider", provider, "--model", "m",
                           "--tools", "tests.chat_tools", "--base-url", base_url, *extra, "hello"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)


@pytest.mark.parametrize("level", [[], ["--log-level", "debug"]], ids=["default", "debug"])
@pytest.mark.parametrize("provider", ALL)
def test_toolwire_chat_prints_no_credential_on_stderr(provider, level, echo):
    """``toolwire chat`` against a server that echoes the credentials in its 401: neither stream holds them, at the
    default level or at debug; with user info in the URL where the dialect takes it too."""
    url = f"http://{USER}:{PASSWORD_IN_URL}@{echo}" if provider in OWN_HEADER else f"http://{echo}"
    proc = chat(provider, url, *level)
    assert Echo.seen, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert leaks([proc.stdout, proc.stderr]) == [], proc.stderr


@pytest.mark.parametrize("provider", IN_AUTHORIZATION)
def test_toolwire_chat_refuses_user_info_where_the_key_is_the_authorization_header(provider, echo):
    proc = chat(provider, f"http://{USER}:{PASSWORD_IN_URL}@{echo}")
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "user info" in proc.stderr and Echo.seen == []
    assert leaks([proc.stdout, proc.stderr]) == [], proc.stderr
