"""toolwire.mcp against hostile servers and hostile use, where it already behaves: a server that never answers
the handshake or answers it with a protocol nobody speaks, requests the client never advertised, answers under
ids nobody asked for, a flood on stderr, schemas with ``$ref`` cycles, an HTTP server that redirects elsewhere,
hangs an event stream, cuts a body or never accepts; handlers called from many threads and event loops, a
server opened and closed every way, a write interrupted (SIGINT, SIGKILL) with a SQLite ledger; and the rule that
toolwire reads no private attribute of the MCP SDK. The servers are real processes (tests/hostile_mcp_server.py,
tests/hostile_mcp_http.py)."""

from __future__ import annotations

import ast
import asyncio
import json
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("mcp")

import toolwire  # noqa: E402
from toolwire import Registry, ResultKind, TextPart  # noqa: E402
from toolwire.mcp import MCPConnectionError, MCPServer  # noqa: E402

from .conftest import ROOT  # noqa: E402
from .mcp_helpers import HostileHttp, call, hostile, kill_all  # noqa: E402


def text(content: toolwire.Content) -> str:
    return "".join(p.text for p in content.parts if isinstance(p, TextPart))


# ---- the handshake -------------------------------------------------------------------------------------------------

def test_a_server_that_never_answers_initialize_is_a_connection_error():
    """No answer to the handshake: MCPConnectionError after connect_timeout, and no process is left."""
    server = hostile("--no-init", connect_timeout=1.0, reconnect_attempts=1)
    with pytest.raises(MCPConnectionError, match="handshake"):
        server.open()
    assert repr(server).endswith("closed)")


def test_a_protocol_version_nobody_speaks_is_a_connection_error():
    """initialize answered with protocol version 1999-01-01: MCPConnectionError naming it."""
    with pytest.raises(MCPConnectionError, match="1999-01-01"):
        hostile("--version", "1999-01-01", reconnect_attempts=1).open()


# ---- what a stdio server sends -------------------------------------------------------------------------------------

def test_requests_the_client_never_advertised_are_refused_and_the_call_completes():
    """The server asks for sampling, elicitation and roots mid-call: each is refused with a JSON-RPC error, and
    the call's own answer still arrives."""
    with hostile() as server:
        answers = json.loads(text(Registry(server.tools())["ask"].invoke({})))
    assert [a["message"] for a in answers] == ["Sampling not supported", "Elicitation not supported",
                                               "List roots not supported"]


def test_answers_under_ids_nobody_asked_for_are_dropped():
    """Answers under other ids never answer the call: it is answered handler_timeout at its timeout, and the
    session keeps working."""
    with hostile() as server:
        registry = Registry(server.tools(timeout=1.0, trust_read_only=True))
        assert call(registry, "wrong_id").kind is ResultKind.HANDLER_TIMEOUT
        assert text(registry["echo"].invoke({"text": "after"})) == "after"


def test_a_late_answer_to_an_abandoned_call_never_answers_the_next_one(tmp_path):
    """A write answered after its timeout: outcome_unknown; its late answer is dropped, the next call gets its
    own answer; a write whose arun task is cancelled is outcome_unknown when the turn is dispatched again. Each
    ran once."""
    from .bodies import body

    with hostile("--state", str(tmp_path / "state"), probe_timeout=30.0) as server:  # busy, not frozen
        registry = Registry(server.tools(timeout=1.0))
        patient = Registry(server.tools(timeout=30.0))
        assert call(registry, "slow_bump", {"seconds": 3}).kind is ResultKind.OUTCOME_UNKNOWN
        assert text(patient["echo"].invoke({"text": "mine"})) == "mine"  # sent before the late answer came
        dispatcher = toolwire.Dispatcher(Registry(asyncio.run(server.atools(timeout=30.0))))
        turn = toolwire.parse("openai-chat", body("openai-chat", [("call_x", "slow_bump", {"seconds": 3})]))

        async def cancel_then_again() -> list[toolwire.ToolResult]:
            task = asyncio.create_task(dispatcher.arun(turn, conversation_id="c"))
            while not (tmp_path / "state").read_text() == "2":
                await asyncio.sleep(0.02)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return await dispatcher.arun(turn, conversation_id="c")

        assert [r.kind for r in asyncio.run(cancel_then_again())] == [ResultKind.OUTCOME_UNKNOWN]
        assert text(patient["count"].invoke({})) == "2"  # answered after the abandoned call's answer


def test_a_flood_on_stderr_does_not_block_the_server(tmp_path):
    """A server writing 32 MiB to stderr (to a file here) is not blocked by it: the call's answer arrives."""
    log = tmp_path / "stderr.log"
    with log.open("w") as stderr, hostile(stderr=stderr) as server:
        assert text(Registry(server.tools(timeout=60.0))["stderr"].invoke({"mb": 32})) == "after the noise"
    assert log.stat().st_size == 32 << 20


def test_schemas_with_ref_cycles_are_kept_and_bad_entries_are_left_out(tmp_path):
    """$ref cycles (through $defs and to the root) are declared and called; a name that is not ASCII, a schema
    root that is not an object and an entry without inputSchema are left out with their reasons."""
    tools = tmp_path / "tools.json"
    cycle = {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}},
             "$defs": {"A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/A"}}}}}
    to_root = {"type": "object", "properties": {"me": {"$ref": "#"}}}
    tools.write_text(json.dumps([
        {"name": "echo", "inputSchema": cycle}, {"name": "count", "inputSchema": to_root},
        {"name": "ünïcode", "inputSchema": {"type": "object"}},
        {"name": "root_string", "inputSchema": {"type": "string"}}, {"name": "no_schema"}]))
    with hostile("--tools", str(tools)) as server:
        registry = Registry(server.tools())
        for dialect in toolwire.codecs.PROVIDERS:
            toolwire.declare(dialect, list(registry))
        assert call(registry, "echo", {"a": {"b": {"b": {}}}}).kind is ResultKind.OK
        assert call(registry, "count", {"me": {"me": {}}}).kind is ResultKind.OK
        assert call(registry, "echo", {"a": {"b": 5}}).kind is ResultKind.INVALID_ARGUMENTS
    assert {(s.name, s.reason) for s in server.skipped} == {("ünïcode", "name"), ("root_string", "schema"),
                                                           ("no_schema", "schema")}


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the SystemExit, on purpose
def test_an_on_change_that_raises_system_exit_is_called_at_the_next_change():
    """on_change raising SystemExit ends its thread, and the next change calls it again (in a new thread)."""
    calls: list[str] = []

    def on_change(server: MCPServer) -> None:
        calls.append("call")
        if len(calls) == 1:
            raise SystemExit("the callback quits")

    with hostile(on_change=on_change) as server:
        registry = Registry(server.tools())
        registry["flood"].invoke({"n": 1})
        assert _eventually(lambda: len(calls) == 1)
        server.tools()
        registry["flood"].invoke({"n": 1})
        assert _eventually(lambda: len(calls) == 2)


def _eventually(predicate, seconds: float = 15.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


@pytest.mark.parametrize("version", [None, "2025-11-25", "2026-07-28"])
def test_a_listing_page_that_is_not_valid_itself_is_left_to_the_sdk(version):
    """The Wire takes unreadable entries out of a tools/list page, but a page whose own fields are not valid (a
    cursor that is a number) is passed on unchanged, for the SDK to refuse, rather than emptied entry by entry."""
    from toolwire.mcp._wire import Wire

    wire = Wire()
    wire.version = version
    page = {"resultType": "complete", "cacheScope": "public", "ttlMs": 0} if version == "2026-07-28" else {}
    good, bad = {"name": "ok", "inputSchema": {"type": "object"}}, {"description": "no name"}
    found: list[dict] = []
    assert wire._check_listing({**page, "tools": [good], "nextCursor": 5}, found) is None
    assert wire._check_listing({**page, "tools": [good, bad], "nextCursor": 5}, found) is None and found == []
    assert wire._check_listing({**page, "tools": [good, bad]}, found) == {**page, "tools": [good]}
    assert [e["name"] for e in found] == ["None"]
    if version == "2026-07-28":  # a page without the fields of its era: every entry passed on, not dropped
        assert wire._check_listing({"tools": [good, bad]}, found) is None and len(found) == 1


# ---- HTTP ------------------------------------------------------------------------------------------------------

def test_a_redirect_to_another_origin_is_not_followed_and_sends_no_token(tmp_path):
    """Every POST redirected to another origin: the request is not followed, so the other server receives
    nothing (no token), and connecting fails with the reason."""
    record = tmp_path / "elsewhere.jsonl"
    elsewhere = HostileHttp("--record", str(record))
    redirecting = HostileHttp("--redirect-all", f"http://localhost:{elsewhere.port}/mcp")
    try:
        with pytest.raises(MCPConnectionError, match="not followed"):
            MCPServer.http(redirecting.url, headers={"Authorization": "Bearer tok-0f9e8d7c6b"},
                           reconnect_attempts=1).open()
    finally:
        redirecting.stop()
        elsewhere.stop()
    assert not record.exists()


def test_an_event_stream_that_hangs_is_answered_at_the_timeout():
    """An SSE answer that starts and then sends nothing: the read is handler_timeout, the session keeps working."""
    server = HostileHttp()
    try:
        with MCPServer.http(server.url, reconnect_attempts=1, probe_timeout=2.0) as mcp:
            registry = Registry(mcp.tools(timeout=1.0, trust_read_only=True))
            assert call(registry, "hang_sse").kind is ResultKind.HANDLER_TIMEOUT
            assert text(registry["echo"].invoke({"text": "after"})) == "after"
    finally:
        server.stop()


def test_a_body_cut_short_answers_a_write_outcome_unknown():
    """A JSON answer promising 1000 bytes that closes after 25: a write is outcome_unknown, a read
    handler_failed, and the write ran once."""
    server = HostileHttp()
    try:
        with MCPServer.http(server.url, reconnect_attempts=2) as mcp:
            registry = Registry(mcp.tools(timeout=30.0, trust_read_only=True))
            assert call(registry, "cut_json_write").kind is ResultKind.OUTCOME_UNKNOWN
            assert call(registry, "cut_json").kind is ResultKind.HANDLER_FAILED
            assert text(registry["count"].invoke({})) == "1"
    finally:
        server.stop()


def test_a_server_that_never_accepts_is_a_connection_error():
    """A port that listens and never accepts (the connection waits in the backlog): MCPConnectionError after
    connect_timeout."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"
        with pytest.raises(MCPConnectionError):
            MCPServer.http(url, connect_timeout=1.0, reconnect_attempts=1).open()


# ---- misuse ---------------------------------------------------------------------------------------------------------

def test_handlers_called_from_many_threads_and_event_loops_at_once_each_get_their_answer():
    """Blocking handlers from 16 threads and async handlers from 4 event loops (each in its own thread), at
    once, over one session: every call gets its own answer."""
    with hostile() as server:
        blocking = Registry(server.tools())
        awaiting = Registry(asyncio.run(server.atools()))

        def from_thread(i: int) -> str:
            return text(blocking["echo"].invoke({"text": f"t{i}"}))

        def from_loop(i: int) -> list[str]:
            async def main() -> list[toolwire.Content]:
                return await asyncio.gather(*[awaiting["echo"].invoke({"text": f"{i}-{j}"}) for j in range(8)])
            return [text(c) for c in asyncio.run(main())]

        with ThreadPoolExecutor(20) as pool:
            threads = pool.map(from_thread, range(64))
            loops = pool.map(from_loop, range(4))
            assert list(threads) == [f"t{i}" for i in range(64)]
            assert list(loops) == [[f"{i}-{j}" for j in range(8)] for i in range(4)]


def test_opened_in_one_event_loop_and_used_after_it_ended():
    """async with in a loop that has ended: the session lives on the server's own loop, so blocking handlers
    still work until it is closed; closing twice is harmless; with after async with works."""
    server = hostile()

    async def open_it() -> None:
        await server.aopen()

    asyncio.run(open_it())
    assert text(Registry(server.tools())["echo"].invoke({"text": "later"})) == "later"
    server.close()
    server.close()
    with server:
        assert text(Registry(server.tools())["echo"].invoke({"text": "again"})) == "again"

    async def nested() -> None:
        async with server:
            with pytest.raises(toolwire.UsageError, match="already open"):
                server.open()

    asyncio.run(nested())
    assert repr(server).endswith("closed)")


_INTERRUPTED = """
import signal
import sys
import toolwire
from tests.mcp_helpers import hostile
from tests.bodies import body
signal.signal(signal.SIGINT, signal.default_int_handler)  # a test runner may have left SIGINT ignored
ledger, state, pid = sys.argv[1], sys.argv[2], sys.argv[3]
turn = toolwire.parse("openai-chat", body("openai-chat", [("call_w", "slow_bump", {"seconds": 30})]))
with hostile("--state", state, "--own-pid", pid) as server:
    dispatcher = toolwire.Dispatcher(toolwire.Registry(server.tools(timeout=60.0)),
                                     ledger=toolwire.SQLiteLedger(ledger))
    if len(sys.argv) > 4:
        print("dispatching", flush=True)
    print(dispatcher.run(turn, conversation_id="c", turn_id="t1")[0].kind.value, flush=True)
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_a_write_interrupted_mid_call_is_never_run_again_by_a_later_process(tmp_path, sig):
    """A process interrupted (KeyboardInterrupt, or killed) while its write is running on the server: the server
    ran it once; a new process dispatching the same turn with the same SQLite ledger answers outcome_unknown and
    does not send it again."""
    ledger, state, pid = str(tmp_path / "ledger.db"), tmp_path / "state", tmp_path / "server.pid"
    first = subprocess.Popen([sys.executable, "-c", _INTERRUPTED, ledger, str(state), str(pid), "report"], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert first.stdout is not None and first.stdout.readline().strip() == "dispatching"
        deadline = time.monotonic() + 30
        while not (state.exists() and state.read_text() == "1") and time.monotonic() < deadline:
            time.sleep(0.05)
        first.send_signal(sig)
        first.wait(30)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(10)
        kill_all([int(pid.read_text())] if pid.exists() else [])  # the first server, orphaned by SIGKILL
    second = subprocess.run([sys.executable, "-c", _INTERRUPTED, ledger, str(state), str(tmp_path / "second.pid")],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert second.stdout.strip() == "outcome_unknown", second.stderr[-2000:]
    assert state.read_text() == "1"


def test_chat_mcp_with_shell_metacharacters_runs_no_shell(tmp_path):
    """toolwire chat --mcp splits its command as a shell would but runs no shell: `;`, `&&`, `$(…)` and backquotes
    are arguments, so the file they would create is never created (and the command fails as it is)."""
    for i, spec in enumerate([f"echo hi; touch {tmp_path}/a", f"sh -c 'exit 3' && touch {tmp_path}/b",
                              f"$(touch {tmp_path}/c)", f"`touch {tmp_path}/d`"]):
        proc = subprocess.run([sys.executable, "-m", "toolwire", "chat", "--provider", "openai-chat", "--model", "m",
                               "--base-url", "http://127.0.0.1:9", "--mcp", spec, "hi"], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 1 and "cannot connect to the MCP server" in proc.stderr, (i, proc.stderr)
    assert list(tmp_path.iterdir()) == []


# ---- the SDK's private parts -----------------------------------------------------------------------------------

def test_toolwire_mcp_reads_no_private_attribute_of_the_sdk():
    """No module of toolwire.mcp reads an attribute starting with "_" of anything but itself (``self``, the
    server's own alias) and its own modules, nor asks getattr for one: the SDK is used through its public API."""
    found = []
    for path in sorted((ROOT / "toolwire" / "mcp").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                base = node.value
                if isinstance(base, ast.Name) and base.id in ("self", "server", "_log"):
                    continue
                found.append(f"{path.name}:{node.lineno} .{node.attr}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
                name = node.args[1] if len(node.args) > 1 else None
                if isinstance(name, ast.Constant) and str(name.value).startswith("_"):
                    found.append(f"{path.name}:{node.lineno} getattr {name.value}")
    assert found == []
