"""MCP servers' labels (``name``, ``repr``, ``MCPConnectionError``, every ``mcp.*`` event) hold no credential.

Before: a stdio server started with ``--api-key X``, ``--token=X`` or a URL argument carrying user info, a query
or a token in its path showed them in its label; so did an HTTP server's URL with a token in its path; and a
command line that could not be split was quoted whole in the ``UsageError``."""

from __future__ import annotations

import asyncio
import json
import logging
import sys

import pytest
from structlog.testing import capture_logs

import toolwire
from toolwire.mcp import MCPConnectionError, MCPServer

from ..conftest import ROOT
from ..mcp_helpers import server_args

API_KEY = "mcp-apikey-7f3a9c2e"
TOKEN = "mcp-token-51be0d44"
PASSWORD = "hook-pa55word-91"
QUERY_KEY = "query-key-d8e1f0a6"
PATH_TOKEN = "T0A1B2C3D4E5F6G7H8I9J0K1L2M3N4O5"  # a webhook-style token in a URL path
SECRETS = [API_KEY, TOKEN, PASSWORD, QUERY_KEY, PATH_TOKEN]
ENDPOINT = f"https://hooks:{PASSWORD}@hooks.example.com/services/{PATH_TOKEN}/run?key={QUERY_KEY}"
CREDENTIAL_ARGS = ["--api-key", API_KEY, f"--token={TOKEN}", "--endpoint", ENDPOINT]


def leaks(texts) -> list[str]:
    return [t for t in texts for s in SECRETS if s in t]


class Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.texts: list[str] = []

    def emit(self, record):
        self.texts.append(f"{record.name} {record.getMessage()}")


@pytest.fixture
def root_logs():
    handler = Collect()
    names = ["", "toolwire", "mcp", "httpx", "httpcore", "httpx2"]
    before = {n: logging.getLogger(n).level for n in names}
    for n in names:
        logging.getLogger(n).setLevel(logging.DEBUG)
    logging.getLogger().addHandler(handler)
    yield handler.texts
    logging.getLogger().removeHandler(handler)
    for n, level in before.items():
        logging.getLogger(n).setLevel(level)


def events_text(events) -> list[str]:
    return [json.dumps(e, default=str) for e in events if e["event"].startswith("mcp.")]


def started(*extra: str, **options) -> MCPServer:
    options.setdefault("connect_timeout", 30.0)
    options.setdefault("probe_timeout", 2.0)
    return MCPServer.stdio(sys.executable, [*server_args(None), *CREDENTIAL_ARGS, *extra], cwd=ROOT, **options)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_stdio_servers_secret_options_are_in_no_label_repr_or_event(mode, root_logs):
    """``--api-key X``, ``--token=X`` and a URL with user info, a query and a path token: the server starts with
    them, and its name, repr and mcp.* events (structlog and the standard loggers) hold none of them."""
    server = started()
    with capture_logs() as events:
        if mode == "sync":
            with server:
                tools = server.tools()
        else:
            async def main():
                async with server:
                    return await server.atools()
            tools = asyncio.run(main())
    assert tools
    assert [e for e in events if e["event"] == "mcp.connected"]
    assert "--api-key" in server.name and "--token=" in server.name and "hooks.example.com" in server.name
    assert leaks([server.name, repr(server), *events_text(events), *root_logs]) == [], server.name


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_stdio_server_that_fails_to_start_names_no_secret_in_its_error(mode, root_logs):
    """The same command with an option the server refuses: MCPConnectionError and mcp.connect_failed hold no
    secret."""
    server = started("--no-such-option")
    with capture_logs() as events, pytest.raises(MCPConnectionError) as err:
        if mode == "sync":
            with server:
                pass
        else:
            async def main():
                async with server:
                    pass
            asyncio.run(main())
    assert [e for e in events if e["event"] == "mcp.connect_failed"]
    assert leaks([str(err.value), repr(err.value), *events_text(events), *root_logs]) == [], str(err.value)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_http_servers_path_token_is_in_no_label_or_error(mode, root_logs):
    """``http://host/services/<token>/mcp`` that cannot be reached: name, repr, the error and events hold no token,
    no password and no query value."""
    server = MCPServer.http(f"http://hooks:{PASSWORD}@127.0.0.1:9/services/{PATH_TOKEN}/mcp?key={QUERY_KEY}",
                            connect_timeout=5.0)
    with capture_logs() as events, pytest.raises(MCPConnectionError) as err:
        if mode == "sync":
            with server:
                pass
        else:
            async def main():
                async with server:
                    pass
            asyncio.run(main())
    assert "127.0.0.1:9/services/" in server.name
    assert leaks([server.name, repr(server), str(err.value), *events_text(events), *root_logs]) == []


def test_a_command_line_that_cannot_be_split_is_not_quoted_with_its_secrets():
    with pytest.raises(toolwire.UsageError) as err:
        MCPServer.parse(f"server --api-key {API_KEY} --token={TOKEN} 'unclosed")
    assert leaks([str(err.value)]) == []
    with pytest.raises(toolwire.UsageError) as err:
        MCPServer.parse(f"server --api-key {API_KEY}", headers={"X-Api-Key": "abcdefgh12345"})
    assert leaks([str(err.value)]) == []
