"""The loop's turn identity is unique per model request, never a function of the history alone.

A provider that sends no response id (no ``id`` in the body, no request id header: many OpenAI-compatible servers)
and numbers its calls ``call_0``, ``call_1`` answers two different requests of one conversation id with the same
call ids. When the history has the same length again (a new session of a per-user conversation id, a windowed or a
repaired history), a key made of the history length and the (missing) response id repeats: the second write would
be answered ``ok`` from the first one's record and its handler would never run. Each model request gets its own
identity instead (a nonce minted when the request is sent, kept in ``StepRecord.turn_id``; in a durable workflow
recorded with the request step), and dispatching the same stored turn again under that identity still runs
nothing twice.

Real HTTP over loopback (a scripted server below that speaks each dialect without response ids), every dialect,
sync and async, the memory ledger and a SQLite ledger; the durable path runs DBOS on SQLite in a child process.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import msgspec
import pytest

from toolwire import Dispatcher, MemoryLedger, SQLiteLedger
from toolwire.harness import AsyncToolLoop, LoopResult, RetryPolicy, ToolLoop
from toolwire.harness.demo_tools import DemoWorld, EffectLog

from ..bodies import body
from ..dialects import SIMULATED as PROVIDERS
from ..wire import sse, tc

ROOT = Path(__file__).resolve().parents[2]
FAST = RetryPolicy(attempts=2, deadline=30.0, initial=0.01, max_backoff=0.05)
MODES = ["sync", "async"]
LEDGERS = ["memory", "sqlite"]
SAVE_ARGS = {"kind": "weight", "value": 70, "unit": "kg"}
CONVERSATION = "user-42"  # a per-user conversation id, the same in every session


class NoIdServer:
    """A provider on loopback that sends no response id (none in the body, no request id header) and numbers its
    calls ``call_0``: each run of a prompt gets one call of ``save_measurement``, then the answer ``Saved``.
    ``stream`` answers in Chat Completions SSE chunks without ``id`` (openai-chat only)."""

    def __init__(self, provider: str, *, stream: bool = False) -> None:
        self.provider = provider
        self.stream = stream
        self.replies: deque[tuple[bytes, str]] = deque()
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length") or 0)
                data = self.rfile.read(length)
                with server.lock:
                    server.requests.append(json.loads(data or b"null"))
                    payload, ctype = server.replies.popleft() if server.replies else (b'{"error": "unplanned"}',
                                                                                      "application/json")
                status = 500 if b"unplanned" in payload else 200
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                return None

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def plan_save(self) -> None:
        """The next run: a call ``call_0`` of ``save_measurement``, then the answer."""
        with self.lock:
            self.replies.append(self._call())
            self.replies.append(self._answer())

    def _call(self) -> tuple[bytes, str]:
        if self.stream:
            return sse(_chunk(tc(0, "call_0", "save_measurement", json.dumps(SAVE_ARGS))),
                       _chunk(finish="tool_calls"), "[DONE]"), "text/event-stream"
        return body(self.provider, [("call_0", "save_measurement", SAVE_ARGS)], response_id=None), "application/json"

    def _answer(self) -> tuple[bytes, str]:
        if self.stream:
            return sse(_chunk(content="Saved"), _chunk(finish="stop"), "[DONE]"), "text/event-stream"
        return body(self.provider, [], response_id=None, text="Saved"), "application/json"

    def __enter__(self) -> "NoIdServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=30)


def _chunk(*calls: dict[str, Any], finish: str | None = None, content: str | None = None) -> dict[str, Any]:
    """A Chat Completions stream chunk with no ``id``."""
    delta: dict[str, Any] = {}
    if content is not None:
        delta["content"] = content
    if calls:
        delta["tool_calls"] = list(calls)
    return {"object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


@pytest.fixture
def aws_free(monkeypatch, tmp_path):
    """No AWS credentials from the machine: Bedrock authenticates with the API key given to the loop."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_REGION", "us-east-1")


def _dispatcher(world: DemoWorld, ledger: str, tmp_path: Path) -> Dispatcher:
    store = MemoryLedger() if ledger == "memory" else SQLiteLedger(str(tmp_path / "ledger.db"))
    return Dispatcher(world.registry(timeout=5.0), ledger=store)


def _sessions(server: NoIdServer, provider: str, mode: str, dispatcher: Dispatcher, world: DemoWorld,
              count: int, *, stream: bool = False) -> list[LoopResult]:
    """``count`` sessions of one conversation id, each a new loop that starts from an empty history and runs the
    same prompt: every session's first request answers a history of the same length."""
    kw: dict[str, Any] = dict(model="m", registry=world.registry(timeout=5.0), dispatcher=dispatcher,
                              base_url=server.base_url, api_key="sk-test-0000000000", retry=FAST, timeout=10.0,
                              conversation_id=CONVERSATION, stream=stream)
    results = []
    for _ in range(count):
        server.plan_save()
        if mode == "sync":
            with ToolLoop(provider, **kw) as loop:
                results.append(loop.run("Save my weight, 70 kg"))
        else:
            async def go() -> Any:
                async with AsyncToolLoop(provider, **kw) as loop:
                    return await loop.run("Save my weight, 70 kg")
            results.append(asyncio.run(go()))
    return results


@pytest.mark.parametrize("ledger", LEDGERS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_two_sessions_of_one_conversation_id_without_response_ids_each_run_their_write(
        provider, mode, ledger, tmp_path, aws_free):
    """Two sessions of one conversation id, histories of the same length, a server with no response id that
    numbers its calls ``call_0``: each session's write runs (two effects), under two different turn identities."""
    world = DemoWorld()
    dispatcher = _dispatcher(world, ledger, tmp_path)
    with NoIdServer(provider) as server:
        results = _sessions(server, provider, mode, dispatcher, world, 2)
    assert [r.fallback for r in results] == [False, False], [r.answer for r in results]
    assert [[c.result_kind for c in r.calls] for r in results] == [["ok"], ["ok"]]
    assert world.effects.count("save_measurement") == 2
    first, second = (r.steps[0].turn_id for r in results)
    assert first and second and first != second


@pytest.mark.parametrize("ledger", LEDGERS)
@pytest.mark.parametrize("mode", MODES)
def test_two_streamed_sessions_without_chunk_ids_each_run_their_write(mode, ledger, tmp_path):
    """The same over a Chat Completions stream whose chunks carry no ``id``."""
    world = DemoWorld()
    dispatcher = _dispatcher(world, ledger, tmp_path)
    with NoIdServer("openai-chat", stream=True) as server:
        results = _sessions(server, "openai-chat", mode, dispatcher, world, 2, stream=True)
    assert [[c.result_kind for c in r.calls] for r in results] == [["ok"], ["ok"]]
    assert world.effects.count("save_measurement") == 2


@pytest.mark.parametrize("ledger", LEDGERS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_every_request_of_a_conversation_has_its_own_turn_identity(provider, mode, ledger, tmp_path, aws_free):
    """Each step of each session records the identity its calls were dispatched under: all different, and none
    of them made of the history's length."""
    world = DemoWorld()
    with NoIdServer(provider) as server:
        results = _sessions(server, provider, mode, _dispatcher(world, ledger, tmp_path), world, 3)
    ids = [s.turn_id for r in results for s in r.steps]
    assert len(ids) == 6 and len(set(ids)) == 6, ids
    assert all(i.startswith("req:") for i in ids), ids


@pytest.mark.parametrize("ledger", LEDGERS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_dispatching_a_stored_turn_again_under_its_turn_id_runs_nothing(provider, mode, ledger, tmp_path, aws_free):
    """The stored step (its turn and its turn id, from the result) dispatched again, as a restart re-dispatching
    from stored state does: the write is answered from its record and does not run again."""
    world = DemoWorld()
    dispatcher = _dispatcher(world, ledger, tmp_path)
    with NoIdServer(provider) as server:
        [result] = _sessions(server, provider, mode, dispatcher, world, 1)
    step = result.steps[0]
    if mode == "sync":
        again = dispatcher.run(step.turn, conversation_id=CONVERSATION, turn_id=step.turn_id)
    else:
        again = asyncio.run(dispatcher.arun(step.turn, conversation_id=CONVERSATION, turn_id=step.turn_id))
    assert [r.kind.value for r in again] == ["ok"]
    assert again[0].content == step.results[0].content
    assert world.effects.count("save_measurement") == 1


@pytest.mark.parametrize("mode", MODES)
def test_a_stored_turn_dispatched_again_by_a_new_process_runs_nothing(mode, tmp_path):
    """The same through a SQLite ledger read by a new dispatcher (a restarted process): the stored result's turn
    and turn id find the write's record."""
    world = DemoWorld()
    path = str(tmp_path / "ledger.db")
    with NoIdServer("openai-chat") as server:
        [result] = _sessions(server, "openai-chat", mode, Dispatcher(world.registry(timeout=5.0),
                                                                     ledger=SQLiteLedger(path)), world, 1)
    stored = msgspec.json.encode(result)  # the result as an application keeps it
    step = msgspec.json.decode(stored, type=LoopResult).steps[0]
    fresh = Dispatcher(world.registry(timeout=5.0), ledger=SQLiteLedger(path))
    if mode == "sync":
        again = fresh.run(step.turn, conversation_id=CONVERSATION, turn_id=step.turn_id)
    else:
        again = asyncio.run(fresh.arun(step.turn, conversation_id=CONVERSATION, turn_id=step.turn_id))
    assert [r.kind.value for r in again] == ["ok"]
    assert world.effects.count("save_measurement") == 1


# ---- the durable path (DBOS on SQLite, in a child process: DBOS is a process-wide singleton) --------------------

DURABLE_PRELUDE = """
import json, sys
from dbos import DBOS
from toolwire import Dispatcher, SQLiteLedger
from toolwire.durable import DurableLoop, result_of
from toolwire.harness import RetryPolicy
from toolwire.harness.demo_tools import DemoWorld
TMP, URL, PROVIDER = sys.argv[1], sys.argv[2], sys.argv[3]
OUT = {}
world = DemoWorld(f"{TMP}/effects.db")
registry = world.registry(timeout=5.0)
loop = DurableLoop(PROVIDER, name="ti", model="m", registry=registry, base_url=URL, api_key="sk-test-0000000000",
                   stream=False, timeout=10.0, retry=RetryPolicy(attempts=2, deadline=30.0, initial=0.01, max_backoff=0.05),
                   dispatcher=Dispatcher(registry, ledger=SQLiteLedger(f"{TMP}/ledger.db")))
DBOS(config={"name": "turn-identity", "system_database_url": f"sqlite:///{TMP}/dbos.sqlite", "executor_id": "x",
             "log_level": "ERROR"})
DBOS.launch()
def summary(r):
    return {"fallback": r.fallback, "kinds": [c.result_kind for c in r.calls],
            "turn_ids": [getattr(s, "turn_id", "") for s in r.steps]}
"""

DURABLE_EPILOGUE = """
print("@@" + json.dumps(OUT))
DBOS.destroy(workflow_completion_timeout_sec=1)
loop.close()
"""


def _durable(body_: str, tmp_path: Path, server: NoIdServer, provider: str) -> dict[str, Any]:
    pytest.importorskip("dbos")
    path = tmp_path / "script.py"
    path.write_text(DURABLE_PRELUDE + textwrap.dedent(body_) + DURABLE_EPILOGUE)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, str(path), str(tmp_path), server.base_url, provider], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=180)
    lines = [line for line in done.stdout.splitlines() if line.startswith("@@")]
    assert lines, f"script failed ({done.returncode}): {done.stderr[-3000:]}"
    return json.loads(lines[-1][2:])


@pytest.mark.parametrize("provider", PROVIDERS)
def test_two_durable_prompts_of_one_conversation_id_without_response_ids_each_run_their_write(
        provider, tmp_path, aws_free):
    """Two workflows of one conversation id, each from an empty history, against the server without response ids:
    two effects, and each turn's identity is the one its request step recorded."""
    with NoIdServer(provider) as server:
        server.plan_save()
        server.plan_save()
        out = _durable("""
            OUT["first"] = summary(loop.run("Save my weight, 70 kg", conversation_id="user-42", workflow_id="a"))
            OUT["second"] = summary(loop.run("Save my weight, 70 kg", conversation_id="user-42", workflow_id="b"))
        """, tmp_path, server, provider)
    assert out["first"]["kinds"] == ["ok"] and out["second"]["kinds"] == ["ok"], out
    ids = out["first"]["turn_ids"] + out["second"]["turn_ids"]
    assert len(set(ids)) == 4 and all(i.startswith("req:") for i in ids), ids
    assert EffectLog(tmp_path / "effects.db").count("save_measurement") == 2


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_durable_turn_dispatched_again_from_its_recorded_request_runs_nothing(provider, tmp_path, aws_free):
    """A workflow forked at its dispatch step (DBOS replays the recorded request step, so the same turn and the
    same turn identity, and runs the dispatch step again): the write is answered from its record, one effect."""
    with NoIdServer(provider) as server:
        server.plan_save()
        with server.lock:
            server.replies.append(server._answer())  # the forked workflow asks for the answer again
        out = _durable("""
            OUT["first"] = summary(loop.run("Save my weight, 70 kg", conversation_id="user-42", workflow_id="a"))
            steps = DBOS.list_workflow_steps("a")
            dispatch = next(s["function_id"] for s in steps if s["function_name"] == "toolwire.durable.dispatch")
            OUT["names"] = [s["function_name"] for s in steps]
            handle = DBOS.fork_workflow("a", dispatch)
            OUT["forked"] = summary(result_of(handle.get_result()))
        """, tmp_path, server, provider)
    assert out["first"]["kinds"] == ["ok"] and out["forked"]["kinds"] == ["ok"], out
    assert out["forked"]["turn_ids"][0] == out["first"]["turn_ids"][0], out
    assert EffectLog(tmp_path / "effects.db").count("save_measurement") == 1
