"""MCP servers that attack the client: a line of hundreds of MB or one that never ends, output that is not
JSON-RPC, an answer that cannot be read or is not a valid result, a process that exits while a child it left
behind keeps its output open, a child that escapes its process group, a flood of list-changed notifications, an
HTTP answer larger than the bound, an SSE answer that cannot be read, credentials in the URL (failure mode "MCP
servers that attack the client"). Each one is a real server process (tests/hostile_mcp_server.py,
tests/hostile_mcp_http.py)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time

import pytest
from structlog.testing import capture_logs

pytest.importorskip("mcp")

import toolwire  # noqa: E402
from toolwire import Registry, ResultKind, TextPart  # noqa: E402
from toolwire.mcp import MCPConnectionError, MCPProtocolError, MCPServer, MCPUnreadableAnswer  # noqa: E402

from ..conftest import ROOT  # noqa: E402
from ..mcp_helpers import HostileHttp, call, gone, hostile, kill_all  # noqa: E402

#: a tool timeout far longer than any answer here: a call answered "timeout" means toolwire waited for nothing
LONG = 60.0


def count(registry: Registry) -> int:
    return int(registry["count"].invoke({}).parts[0].text)


def events(logs: list[dict], name: str) -> list[dict]:
    return [e for e in logs if e["event"] == name]


# ---- stdio: one message is bounded -------------------------------------------------------------------------------

def test_a_line_of_hundreds_of_megabytes_keeps_the_client_s_memory_bounded():
    """A server answers with one 300 MB line: the client (a process of its own, its address space capped at 4 GiB
    so that a client without the bound fails rather than takes the machine's memory) peaks far below the line's
    size, answers the read handler_failed and the next call works."""
    script = (
        "import resource, toolwire\n"
        "resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))\n"
        "from tests.mcp_helpers import hostile, call\n"
        "with hostile(reconnect_attempts=1) as server:\n"
        f"    registry = toolwire.Registry(server.tools(timeout={LONG}, trust_read_only=True))\n"
        "    print(call(registry, 'huge', {'bytes': 300 << 20}).kind.value,\n"
        "          call(registry, 'echo', {'text': 'after'}).kind.value)\n"
        # the peak of this process's own memory (ru_maxrss would count the test runner it was forked from)
        "print(int(open('/proc/self/status').read().split('VmHWM:')[1].split()[0]) >> 10)\n")
    env = {**os.environ, "MALLOC_ARENA_MAX": "2"}  # threads reserve less address space
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    kinds, peak_mb = out.stdout.splitlines()
    assert kinds == "handler_failed ok" and int(peak_mb) < 250, (out.stdout, out.stderr[-2000:])


@pytest.mark.parametrize("tool, kind", [("huge", ResultKind.HANDLER_FAILED),
                                        ("huge_write", ResultKind.OUTCOME_UNKNOWN)])
def test_a_message_over_max_message_bytes_is_answered_as_a_crash(tmp_path, tool, kind):
    """An answer over max_message_bytes ends the connection: the call in flight is answered as after a crash (a
    read handler_failed, a write outcome_unknown and never run again), logged, and the next call gets a new
    process."""
    with hostile("--state", str(tmp_path / "state"), max_message_bytes=1 << 20) as server:
        registry = Registry(server.tools(timeout=LONG, trust_read_only=True))
        pid = registry["pid"].invoke({}).parts[0].text
        with capture_logs() as logs:
            result = call(registry, tool, {"bytes": 8 << 20})
        assert result.kind is kind
        assert [e["limit"] for e in events(logs, "mcp.message_too_large")][:1] == [1 << 20]
        assert registry["pid"].invoke({}).parts[0].text != pid
        assert count(registry) == (1 if tool == "huge_write" else 0)


def test_a_line_that_never_ends_is_answered_without_waiting_for_the_timeout():
    """A server writes one line without end: the read is answered handler_failed (not handler_timeout: toolwire
    stops at max_message_bytes instead of reading on), and the next call works."""
    with hostile(max_message_bytes=1 << 20) as server:
        registry = Registry(server.tools(timeout=LONG, trust_read_only=True))
        assert call(registry, "endless").kind is ResultKind.HANDLER_FAILED
        assert registry["echo"].invoke({"text": "after"}).parts == [TextPart(text="after")]


# ---- stdio: what is not JSON-RPC ---------------------------------------------------------------------------------

def test_lines_that_are_not_json_rpc_are_left_out_and_the_answer_after_them_arrives(toolwire_debug):
    """Lines that are not JSON, not UTF-8, or not a JSON-RPC message are skipped (logged): the answer written
    after them is the call's answer, and the session keeps working."""
    with hostile() as server:
        registry = Registry(server.tools(timeout=LONG))
        with capture_logs() as logs:
            result = call(registry, "garbage")
        assert result.kind is ResultKind.OK and result_text(result) == "after the garbage"
        assert events(logs, "mcp.unreadable_message")[0]["count"] == 1
        assert registry["echo"].invoke({"text": "still"}).parts == [TextPart(text="still")]


@pytest.mark.parametrize("tool, kind", [("broken_answer", ResultKind.HANDLER_FAILED),
                                        ("broken_answer_write", ResultKind.OUTCOME_UNKNOWN)])
def test_an_answer_that_cannot_be_read_is_answered_at_once(tmp_path, tool, kind):
    """An answer under the call's id that is not JSON answers the call at once (not at its timeout): a read
    handler_failed, a write outcome_unknown (it reached the server), never run again."""
    with hostile("--state", str(tmp_path / "state")) as server:
        registry = Registry(server.tools(timeout=LONG, trust_read_only=True))
        dispatcher = toolwire.Dispatcher(registry)
        turn = toolwire.parse("openai-chat", _body(tool))
        assert [r.kind for r in dispatcher.run(turn, conversation_id="c")] == [kind]
        assert [r.kind for r in dispatcher.run(turn, conversation_id="c")] == [kind]  # answered from its record
        assert count(registry) == (1 if tool == "broken_answer_write" else 0)
        with pytest.raises(MCPUnreadableAnswer, match="could not be read"):
            registry["broken_answer"].invoke({})


def test_a_write_answered_with_a_result_that_is_not_valid_is_outcome_unknown(tmp_path):
    """A write the server runs and answers with a result that is not valid MCP (structuredContent a list) is
    outcome_unknown, not handler_failed: the model is not told it failed, and it is never run again."""
    with hostile("--state", str(tmp_path / "state")) as server:
        registry = Registry(server.tools(timeout=LONG))
        dispatcher = toolwire.Dispatcher(registry)
        turn = toolwire.parse("openai-chat", _body("bad_result_write"))
        assert [r.kind for r in dispatcher.run(turn, conversation_id="c")] == [ResultKind.OUTCOME_UNKNOWN]
        assert [r.kind for r in dispatcher.run(turn, conversation_id="c")] == [ResultKind.OUTCOME_UNKNOWN]
        assert count(registry) == 1
        with pytest.raises(MCPUnreadableAnswer) as info:
            registry["bad_result"].invoke({})
        assert isinstance(info.value, MCPProtocolError) and isinstance(info.value, toolwire.OutcomeUnknown)


def test_a_tools_list_page_that_cannot_be_read_is_a_protocol_error_at_once(tmp_path):
    """A listing nested deeper than the SDK's JSON parser reads: MCPProtocolError saying the answer could not be
    read, at once, not "did not answer tools/list" after connect_timeout."""
    deep = '{"type": "object", "properties": {"a": ' * 5000 + '{"type": "string"}' + "}}" * 5000
    tools = tmp_path / "tools.json"
    tools.write_text('[{"name": "ok", "inputSchema": {"type": "object"}}, {"name": "deep", "inputSchema": '
                     + deep + "}]")
    with hostile("--tools", str(tools), connect_timeout=LONG) as server:
        with pytest.raises(MCPProtocolError, match="could not be read"):
            server.tools()


def test_a_tools_list_page_over_max_message_bytes_is_a_protocol_error(tmp_path, toolwire_debug):
    """A listing page over max_message_bytes (3000 tools of 1 kB over stdio, 1 MiB allowed): MCPProtocolError
    naming the bound, after one connection (the same page would be as large again)."""
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([{"name": f"t{i}", "description": "d" * 1000, "inputSchema": {"type": "object"}}
                                 for i in range(3000)]))
    with hostile("--tools", str(tools), max_message_bytes=1 << 20) as server:
        with capture_logs() as logs:
            with pytest.raises(MCPProtocolError, match="max_message_bytes"):
                server.tools()
    assert len(events(logs, "mcp.message_too_large")) == 1


def test_a_tool_name_of_100000_characters_is_skipped_in_a_short_log_line(tmp_path):
    """A listed name of 100,000 characters is left out (reason "name"); its SkippedTool keeps the name, but the
    log line and the detail quote at most a few hundred characters of it."""
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([{"name": "x" * 100_000, "inputSchema": {"type": "object"}},
                                 {"name": "ok", "inputSchema": {"type": "object"}}]))
    with hostile("--tools", str(tools)) as server:
        with capture_logs() as logs:
            assert [t.name for t in server.tools()] == ["ok"]
    [skipped] = server.skipped
    assert (len(skipped.name), skipped.reason) == (100_000, "name") and len(skipped.detail) < 1000
    [event] = events(logs, "mcp.tool_skipped")
    assert len(event["tool"]) < 300 and len(event["detail"]) < 1000


# ---- stdio: the server's process and what it leaves behind --------------------------------------------------------

def test_a_server_that_exits_while_a_child_keeps_its_output_open_is_answered_as_a_crash(tmp_path):
    """The server forks a child that keeps stdout open (in a session of its own), then exits mid-call: the read is
    handler_failed with the exit code in the reason (not handler_timeout), and the child does not outlive the
    session."""
    pids = tmp_path / "pids"
    try:
        with hostile("--pids", str(pids)) as server:
            registry = Registry(server.tools(timeout=LONG))
            with pytest.raises(toolwire.OutcomeUnknown, match="exited with code 3"):
                registry["die_keep_child"].invoke({})
            assert registry["echo"].invoke({"text": "after"}).parts == [TextPart(text="after")]
        child = int(pids.read_text().split()[0])
        assert _eventually(lambda: gone(child))
    finally:
        kill_all([int(p) for p in pids.read_text().split()] if pids.exists() else [])


def test_closing_stops_a_server_that_ignores_sigterm_and_the_child_that_left_its_group(tmp_path, toolwire_debug):
    """A server that ignores SIGTERM and the end of its stdin, with a child that left its process group and
    holds its stdout: closing returns, the server is killed, the child is found holding the output and killed
    (logged), and no toolwire thread is left."""
    pids = tmp_path / "pids"
    before = {t.ident for t in threading.enumerate()}
    try:
        with capture_logs() as logs:
            with hostile("--ignore-term", "--child-on-start", "--pids", str(pids)) as server:
                pid = int(Registry(server.tools())["pid"].invoke({}).parts[0].text)
        child = int(pids.read_text().split()[0])
        assert gone(pid) and _eventually(lambda: gone(child))
        assert child in events(logs, "mcp.process_left_behind")[0]["pids"]
        assert _eventually(lambda: not [t for t in threading.enumerate()
                                        if t.ident not in before and t.name.startswith("toolwire-mcp")])
    finally:
        kill_all([int(p) for p in pids.read_text().split()] if pids.exists() else [])


def test_a_server_that_exits_at_start_says_its_exit_code():
    """A command that exits before the handshake: MCPConnectionError whose cause names the exit code."""
    with pytest.raises(MCPConnectionError) as info:
        hostile("--exit-at-start", reconnect_attempts=1).open()
    assert "exited with code 7" in info.value.cause


@pytest.mark.parametrize("stderr", [subprocess.PIPE, subprocess.STDOUT])
def test_stderr_as_a_pipe_nobody_reads_or_as_stdout_is_a_usage_error(stderr):
    """stderr=PIPE would block the server once the pipe fills; stderr=STDOUT would mix it into the protocol."""
    with pytest.raises(toolwire.UsageError, match="stderr"):
        MCPServer.stdio(sys.executable, ["-m", "tests.hostile_mcp_server"], stderr=stderr)


# ---- list changes -------------------------------------------------------------------------------------------------

def test_a_flood_of_list_changed_notifications_calls_on_change_a_few_times(toolwire_debug):
    """5000 tools/list_changed notifications: on_change runs in one thread at a time, once more after it if the
    list changed meanwhile (not 5000 threads and calls), and the change is logged once."""
    calls: list[int] = []
    release = threading.Event()

    def on_change(server: MCPServer) -> None:
        calls.append(threading.active_count())
        release.wait(30)

    with hostile(on_change=on_change) as server:
        registry = Registry(server.tools(timeout=LONG))
        with capture_logs() as logs:
            assert registry["flood"].invoke({"n": 5000}).parts == [TextPart(text="flooded")]
            registry["echo"].invoke({"text": "the notifications before this answer are handled"})
            release.set()
            assert _eventually(lambda: server.changed and len(calls) >= 2)
            time.sleep(0.5)  # no more calls come
        assert len(calls) == 2
        assert len(events(logs, "mcp.tools_changed")) == 1


# ---- HTTP -----------------------------------------------------------------------------------------------------

@pytest.fixture
def http():
    server = HostileHttp()
    yield server
    server.stop()


def test_an_http_answer_over_max_message_bytes_fails_that_call_only(http):
    """A JSON answer over max_message_bytes is not read into memory: the read is handler_failed (logged), and the
    session keeps working."""
    with MCPServer.http(http.url, max_message_bytes=1 << 20, reconnect_attempts=1) as server:
        registry = Registry(server.tools(timeout=LONG, trust_read_only=True))
        with capture_logs() as logs:
            assert call(registry, "huge_json", {"bytes": 64 << 20}).kind is ResultKind.HANDLER_FAILED
        assert events(logs, "mcp.message_too_large")
        assert registry["echo"].invoke({"text": "after"}).parts == [TextPart(text="after")]


def test_an_sse_answer_within_max_message_bytes_is_read(http):
    """An answer of 3 MB in one SSE event (within the 16 MiB default, over the SDK's own 1 MiB) is read, as it
    would be over stdio."""
    with MCPServer.http(http.url, reconnect_attempts=1) as server:
        registry = Registry(server.tools(timeout=LONG))
        result = registry["big_sse"].invoke({"bytes": 3_000_000})
        assert len(result.parts[0].text) == 3_000_000


def test_an_sse_answer_to_a_write_that_cannot_be_read_is_outcome_unknown(http):
    """An SSE answer that is not JSON reached the server: a write is outcome_unknown (not tool_error, which says
    the server refused it), never run again."""
    with MCPServer.http(http.url, reconnect_attempts=1) as server:
        registry = Registry(server.tools(timeout=LONG, trust_read_only=True))
        assert call(registry, "broken_sse_write").kind is ResultKind.OUTCOME_UNKNOWN
        assert call(registry, "broken_sse").kind is ResultKind.HANDLER_FAILED
        assert count(registry) == 1


@pytest.mark.parametrize("status", [401, 403, 500])
def test_an_http_error_status_is_named_when_connecting_fails(status):
    """A server that answers every request with an HTTP error: MCPConnectionError whose cause names the status."""
    server = HostileHttp("--status", str(status))
    try:
        with pytest.raises(MCPConnectionError) as info:
            MCPServer.http(server.url, reconnect_attempts=1).open()
        assert f"HTTP {status}" in info.value.cause
    finally:
        server.stop()


def test_credentials_in_the_url_are_sent_as_basic_auth_and_never_logged(tmp_path, caplog, toolwire_debug):
    """user:password in the URL (and a token in its query) are sent (basic auth, the query), and appear in no log
    record at any level, the MCP SDK's and its HTTP client's included."""
    record = tmp_path / "requests.jsonl"
    server = HostileHttp("--record", str(record))
    password, token = "pw-8d1c2e9f0a", "tok-7b6a5c4d3e"
    url = f"http://alice:{password}@127.0.0.1:{server.port}/mcp?token={token}"
    try:
        with caplog.at_level(logging.DEBUG), capture_logs() as logs:
            with MCPServer.http(url, reconnect_attempts=1) as mcp:
                assert Registry(mcp.tools())["echo"].invoke({"text": "x"}).parts == [TextPart(text="x")]
                assert password not in repr(mcp) and token not in mcp.name
    finally:
        server.stop()
    seen = [json.loads(line) for line in record.read_text().splitlines()]
    assert all(r["headers"].get("Authorization", "").startswith("Basic ") for r in seen if r["method"] == "POST")
    assert all(f"token={token}" in r["path"] for r in seen)
    text = caplog.text + repr(logs)
    assert caplog.records and password not in text and token not in text


@pytest.mark.parametrize("headers", [{"X-Api-Key": "key-4c3b2a1f0e9d\n"}, {"Authorization": "Bearer a\r\nX-Evil: 1"},
                                     {"X-Key": "key-\x00-4c3b2a1f0e"}, {"Bad Name": "v"}, {"X-Key": "kéy-4c3b2a1f0e"}])
def test_a_header_that_cannot_be_sent_is_a_usage_error_that_does_not_quote_its_value(headers):
    """A header value with a line break (a key read from a file with its newline), a NUL or a character outside
    latin-1, or a name with a space: a UsageError naming the header, never quoting the value (HTTP would refuse
    it later with the value in the message, and the log)."""
    with capture_logs() as logs:
        with pytest.raises(toolwire.UsageError) as info:
            MCPServer.http("http://127.0.0.1:9/mcp", headers=headers)
    [(name, value)] = headers.items()
    assert name in str(info.value) and value.strip() not in str(info.value) + repr(logs)


def test_a_url_that_does_not_parse_is_a_usage_error():
    """A URL urllib cannot split (an unclosed IPv6 bracket, a port that is not a number) is a UsageError, not a
    ValueError."""
    for url in ("http://bob:pw@[::1/mcp", "http://127.0.0.1:port/mcp"):
        with pytest.raises(toolwire.UsageError, match="not a valid URL"):
            MCPServer.http(url)


# ---- the command line --------------------------------------------------------------------------------------------

def test_chat_with_a_server_that_writes_no_json_prints_no_traceback():
    """toolwire chat --mcp with a command that writes plain text: one line saying why, exit 1, no traceback."""
    proc = subprocess.run([sys.executable, "-m", "toolwire", "chat", "--provider", "openai-chat", "--model", "m",
                           "--base-url", "http://127.0.0.1:9", "--mcp", f"{sys.executable} -c \"print('hello')\"",
                           "hi"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr and "exited with code 0" in proc.stderr.splitlines()[-1]


# ---- helpers ------------------------------------------------------------------------------------------------------

def _eventually(predicate, seconds: float = 15.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def _body(name: str, args: dict | None = None) -> bytes:
    from ..bodies import body

    return body("openai-chat", [("call_1", name, args or {})])


def result_text(result: toolwire.ToolResult) -> str:
    parts = getattr(result, "parts", None) or []
    return "".join(p.text for p in parts if isinstance(p, TextPart)) or str(result.content)


@pytest.mark.parametrize("tool", ["gzip_sse", "gzip_json"])
def test_a_gzip_answer_is_never_decompressed(http, tool):
    """A server answers a call with 1 MiB of gzip (about 1 GiB once decompressed) though the client asked for
    ``identity``: the answer is refused unread, that read is handler_failed, and the session answers the next
    call within its timeout (decompressing it would keep the session's loop busy far longer)."""
    with MCPServer.http(http.url, reconnect_attempts=1) as server:
        registry = Registry(server.tools(timeout=LONG, trust_read_only=True))
        assert call(registry, tool, {"mib": 1}).kind is ResultKind.HANDLER_FAILED
        registry = Registry(server.tools(timeout=20.0, trust_read_only=True))
        assert registry["echo"].invoke({"text": "after"}).parts == [TextPart(text="after")]
