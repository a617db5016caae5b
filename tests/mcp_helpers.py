"""Real MCP servers for the tests: ``tests/mcp_server.py`` as a stdio subprocess (through ``MCPServer.stdio``) or
as an HTTP server process on a free loopback port, stopped by the fixture that started it; the hostile servers
(``tests/hostile_mcp_server.py`` over stdio, ``tests/hostile_mcp_http.py`` over HTTP) likewise."""

from __future__ import annotations

import os
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


# ---- hostile servers (tests/hostile_mcp_server.py, tests/hostile_mcp_http.py) ----------------------------------

def hostile(*extra: str, **options: Any) -> Any:
    """An unopened ``MCPServer`` running the hostile stdio server with ``extra`` options."""
    from toolwire.mcp import MCPServer

    options.setdefault("connect_timeout", 30.0)
    options.setdefault("probe_timeout", 2.0)
    return MCPServer.stdio(sys.executable, ["-m", "tests.hostile_mcp_server", *extra], cwd=ROOT, **options)


def call(registry: Any, name: str, args: dict[str, Any] | None = None, mode: str = "run", **options: Any) -> Any:
    """Dispatch one call of ``name`` (a turn of its own) and return its ``ToolResult``."""
    import asyncio

    import toolwire

    from .bodies import body

    turn = toolwire.parse("openai-chat", body("openai-chat", [("call_1", name, args or {})]))
    dispatcher = toolwire.Dispatcher(registry, **options)
    if mode == "arun":
        return asyncio.run(dispatcher.arun(turn, conversation_id="c"))[0]
    return dispatcher.run(turn, conversation_id="c")[0]


def gone(pid: int) -> bool:
    """True when process ``pid`` has exited (a zombie left for its parent to reap counts as exited)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return True


def kill_all(pids: list[int]) -> None:
    """Stop processes a test started (through a server) that may still run."""
    import signal

    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


class HostileHttp:
    """The hostile HTTP server on ``http://127.0.0.1:PORT/mcp`` with ``extra`` options."""

    def __init__(self, *extra: str) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.hostile_mcp_http", "--port", str(self.port),
                                      *extra], cwd=ROOT)
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("the hostile HTTP server did not start") from None
                time.sleep(0.05)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
