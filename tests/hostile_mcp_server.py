"""A hostile MCP server over stdio, written by hand (newline-delimited JSON-RPC, the ``initialize`` handshake), for
what a well-behaved SDK server never does. Each tool misbehaves in its own way when called; the options change
how the server starts, answers ``initialize``, lists its tools and stops.

Tools: ``echo`` (a read that answers its ``text``), ``bump`` (a write that adds one to the count in ``--state``
and answers it), ``slow_bump`` (the same, answered after ``seconds``), ``count`` (a read of that count), ``pid``;
``huge`` (answers one line of ``bytes`` bytes), ``huge_write`` (a write: bumps the count, then answers like
``huge``), ``endless`` (writes a line that never ends), ``garbage`` (writes lines that are not JSON, not UTF-8,
or not JSON-RPC, then answers), ``stderr`` (writes ``mb`` MiB to stderr, then answers), ``wrong_id`` (answers
under another id, never under its own), ``bad_result`` / ``bad_result_write`` (an answer that is not a valid
result: structuredContent a list), ``broken_answer`` / ``broken_answer_write`` (an answer under its id that is
not JSON), ``blocks`` (``n`` text blocks), ``flood`` (``n`` tools/list_changed notifications, then answers),
``ask`` (sends the client sampling, elicitation and roots requests it never advertised, then answers with what
came back), ``die`` (exits mid-call), ``die_keep_child`` / ``die_keep_child_write`` (forks a child that keeps
stdout open, the write bumps the count first, then the server exits mid-call). Each write bumps the count before
it misbehaves.

Options: ``--exit-at-start`` (exit 7 before reading anything), ``--no-init`` (never answer ``initialize``),
``--version V`` (answer ``initialize`` with protocol version V), ``--tools FILE`` (list the tools in FILE, a JSON
list sent as it is, instead), ``--ignore-term`` (ignore SIGTERM and keep running after stdin ends),
``--child-on-start`` (fork a child holding stdout open before serving), ``--state FILE``, ``--pids FILE`` (where
the pids of those children are written), ``--own-pid FILE`` (where the server writes its own pid).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

OUT = sys.stdout.buffer
#: where the children that keep stdout open are recorded (``--pids``)
PIDS: Path | None = None
OBJECT = {"type": "object", "properties": {}}
READ = {"readOnlyHint": True}


def _tool(name: str, read: bool = True, **props: str) -> dict:
    schema = {"type": "object", "properties": {k: {"type": v} for k, v in props.items()}}
    return {"name": name, "description": f"the {name} tool", "inputSchema": schema,
            "annotations": READ if read else {"readOnlyHint": False}}


TOOLS = [
    _tool("echo", text="string"), _tool("bump", read=False), _tool("count"), _tool("pid"),
    _tool("huge", bytes="integer"), _tool("huge_write", read=False, bytes="integer"), _tool("endless"),
    _tool("garbage"), _tool("stderr", mb="integer"), _tool("wrong_id"), _tool("bad_result"),
    _tool("bad_result_write", read=False), _tool("broken_answer"), _tool("broken_answer_write", read=False),
    _tool("blocks", n="integer"), _tool("flood", n="integer"), _tool("ask"),
    _tool("slow_bump", read=False, seconds="number"), _tool("die"), _tool("die_keep_child"),
    _tool("die_keep_child_write", read=False),
]


def send(message: dict) -> None:
    OUT.write(json.dumps(message).encode() + b"\n")
    OUT.flush()


def answer(request_id: object, result: object = None, error: dict | None = None) -> None:
    message: dict = {"jsonrpc": "2.0", "id": request_id}
    message.update({"error": error} if error is not None else {"result": result})
    send(message)


def text(value: str) -> dict:
    return {"content": [{"type": "text", "text": value}]}


class Server:
    def __init__(self, options: argparse.Namespace) -> None:
        self.options = options
        #: the ``tools`` of a listing, as JSON text (a file's is sent as it is, however deep it nests)
        self.tools = Path(options.tools).read_bytes() if options.tools else json.dumps(TOOLS).encode()
        self.next_id = 0
        self.lines = iter(sys.stdin.buffer.readline, b"")

    def count(self) -> int:
        state = self.options.state
        return int(state.read_text() or "0") if state is not None and state.exists() else 0

    def bump(self) -> int:
        n = self.count() + 1
        if self.options.state is not None:
            self.options.state.write_text(str(n))
        return n

    def ask(self, method: str, params: dict) -> object:
        """Send the client a request and wait for its answer (other messages meanwhile are ignored)."""
        self.next_id += 1
        send({"jsonrpc": "2.0", "id": f"s{self.next_id}", "method": method, "params": params})
        for line in self.lines:
            message = json.loads(line)
            if message.get("id") == f"s{self.next_id}" and "method" not in message:
                return message.get("error") or message.get("result")
        return None

    def call(self, request_id: object, name: str, args: dict) -> None:
        if name == "echo":
            answer(request_id, text(str(args.get("text"))))
        elif name == "bump":
            answer(request_id, text(str(self.bump())))
        elif name == "count":
            answer(request_id, text(str(self.count())))
        elif name == "slow_bump":
            n = self.bump()
            time.sleep(float(args.get("seconds", 30)))
            answer(request_id, text(str(n)))
        elif name == "pid":
            answer(request_id, text(str(os.getpid())))
        elif name in ("huge", "huge_write"):
            if name == "huge_write":
                self.bump()
            size = int(args.get("bytes", 64 << 20))
            OUT.write(b'{"jsonrpc":"2.0","id":' + json.dumps(request_id).encode() +
                      b',"result":{"content":[{"type":"text","text":"')
            chunk = b"x" * (1 << 20)
            while size > 0:
                OUT.write(chunk[:size])
                size -= len(chunk)
            OUT.write(b'"}]}}\n')
            OUT.flush()
        elif name == "endless":
            chunk = b"y" * (1 << 20)
            while True:
                OUT.write(chunk)
                OUT.flush()
        elif name == "garbage":
            OUT.write(b"this is not json\n\xff\xfe\x00 not utf-8 either\n[1, 2, 3]\n{\"jsonrpc\": \"1.0\"}\n\n")
            OUT.flush()
            answer(request_id, text("after the garbage"))
        elif name == "stderr":
            line = b"e" * 1023 + b"\n"
            for _ in range(int(args.get("mb", 64)) * 1024):
                sys.stderr.buffer.write(line)
            sys.stderr.buffer.flush()
            answer(request_id, text("after the noise"))
        elif name == "wrong_id":
            answer(f"not-{request_id}", text("an answer to nobody"))
            answer(10_000 + int(request_id) if isinstance(request_id, int) else 10_000, text("nobody either"))
        elif name in ("bad_result", "bad_result_write"):
            if name == "bad_result_write":
                self.bump()
            answer(request_id, {"content": [{"type": "text", "text": "x"}], "structuredContent": [1, 2]})
        elif name in ("broken_answer", "broken_answer_write"):
            if name == "broken_answer_write":
                self.bump()
            OUT.write(b'{"jsonrpc": "2.0", "id": ' + json.dumps(request_id).encode() + b', "result": {"content": [}\n')
            OUT.flush()
        elif name == "blocks":
            answer(request_id, {"content": [{"type": "text", "text": str(i)} for i in range(int(args.get("n", 0)))]})
        elif name == "flood":
            note = (json.dumps({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}) + "\n").encode()
            OUT.write(note * int(args.get("n", 1000)))
            OUT.flush()
            answer(request_id, text("flooded"))
        elif name == "ask":
            got = [self.ask("sampling/createMessage", {"messages": [], "maxTokens": 1}),
                   self.ask("elicitation/create", {"message": "your password?", "requestedSchema": OBJECT}),
                   self.ask("roots/list", {})]
            answer(request_id, text(json.dumps(got)))
        elif name == "die":
            os._exit(3)
        elif name in ("die_keep_child", "die_keep_child_write"):
            if name == "die_keep_child_write":
                self.bump()
            keep_child()
            os._exit(3)
        else:
            answer(request_id, error={"code": -32602, "message": f"no tool {name}"})

    def serve(self) -> None:
        for line in self.lines:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if not isinstance(message, dict) or "id" not in message or "method" not in message:
                continue  # a notification, or an answer nobody waits for
            method, params, request_id = message["method"], message.get("params") or {}, message["id"]
            if method == "initialize":
                if self.options.no_init:
                    continue
                version = self.options.version or params.get("protocolVersion", "2025-06-18")
                answer(request_id, {"protocolVersion": version,
                                    "capabilities": {"tools": {"listChanged": True}},
                                    "serverInfo": {"name": "hostile", "version": "1"}})
            elif method == "tools/list":
                OUT.write(b'{"jsonrpc": "2.0", "id": ' + json.dumps(request_id).encode() + b', "result": {"tools": ' +
                          self.tools + b"}}\n")
                OUT.flush()
            elif method == "tools/call":
                self.call(request_id, params.get("name"), params.get("arguments") or {})
            elif method == "ping":
                answer(request_id, {})
            else:
                answer(request_id, error={"code": -32601, "message": "Method not found"})
        if self.options.ignore_term:
            while True:  # stdin is gone: stay anyway, until killed
                time.sleep(1)


def keep_child() -> None:
    """Fork a child in a session of its own (out of the server's process group) that keeps stdout open; its pid
    is appended to ``--pids``, so that the test that started the server can stop it."""
    pid = os.fork()
    if pid != 0:
        if PIDS is not None:
            with PIDS.open("a") as f:
                f.write(f"{pid}\n")
        return
    os.setsid()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(60)
    os._exit(0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--exit-at-start", action="store_true")
    parser.add_argument("--no-init", action="store_true")
    parser.add_argument("--version")
    parser.add_argument("--tools")
    parser.add_argument("--ignore-term", action="store_true")
    parser.add_argument("--child-on-start", action="store_true")
    parser.add_argument("--state", type=Path)
    parser.add_argument("--pids", type=Path)
    parser.add_argument("--own-pid", type=Path)
    options = parser.parse_args()
    if options.own_pid is not None:
        options.own_pid.write_text(str(os.getpid()))
    global PIDS
    PIDS = options.pids
    if options.exit_at_start:
        sys.stderr.write("hostile server: exiting at start\n")
        sys.exit(7)
    if options.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if options.child_on_start:
        keep_child()
    Server(options).serve()


if __name__ == "__main__":
    main()
