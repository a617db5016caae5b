"""Real MCP servers for the tests: ``tests/mcp_server.py`` as a stdio subprocess (through ``MCPServer.stdio``) or
as an HTTP server process on a free loopback port, stopped by the fixture that started it."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .conftest import ROOT

TOKEN = "test-token-5f1c9e2a7b"


def server_args(state: Path | None = None, *extra: str) -> list[str]:
    args = ["-m", "tests.mcp_server", "--page-size", "5", *extra]
    return [*args, "--state", str(state)] if state is not None else args


def stdio(state: Path | None = None, *extra: str, **options: Any) -> Any:
    """An unopened ``MCPServer`` running the test server over stdio."""
    from toolwire.mcp import MCPServer

    options.setdefault("connect_timeout", 30.0)
    options.setdefault("probe_timeout", 2.0)
    return MCPServer.stdio(sys.executable, server_args(state, *extra), cwd=ROOT, **options)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class HttpServerProcess:
    """The test server on ``http://127.0.0.1:PORT/mcp`` (requiring ``Authorization: Bearer TOKEN``)."""

    def __init__(self, state: Path, *extra: str) -> None:
        self.port = free_port()
        self.state = state
        self.extra = extra
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> None:
        self.proc = subprocess.Popen([sys.executable, *server_args(self.state, "--http", str(self.port),
                                                                   "--token", TOKEN, *self.extra)], cwd=ROOT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the test MCP server exited with {self.proc.returncode}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("the test MCP server did not answer on its port")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None

    def wait_exit(self, timeout: float = 10.0) -> int | None:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def server(self, token: str = TOKEN, **options: Any) -> Any:
        from toolwire.mcp import MCPServer

        options.setdefault("connect_timeout", 30.0)
        options.setdefault("probe_timeout", 2.0)
        return MCPServer.http(self.url, headers={"Authorization": f"Bearer {token}"}, **options)
