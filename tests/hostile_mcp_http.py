"""A hostile MCP server over HTTP, written by hand on ``http.server`` (JSON-RPC over POST, the ``initialize``
handshake; ``server/discover`` is answered "method not found", so clients fall back to it), for what a
well-behaved server never does. Each tool misbehaves in its own way when called; ``--status`` makes every POST
fail.

Tools: ``echo`` (a read that answers its ``text``), ``bump`` (a write that adds one to a counter kept in memory
and answers it), ``count``; ``huge_json`` (answers with an ``application/json`` body of ``bytes`` bytes),
``big_sse`` (answers with one SSE event of ``bytes`` bytes), ``hang_sse`` (starts an SSE answer, then sends
nothing), ``broken_sse`` / ``broken_sse_write`` (SSE whose event is not JSON, then a cut one; the write counts
first), ``cut_json`` / ``cut_json_write`` (promises a body longer than it sends, then closes), ``redirect`` (a 307
to ``--redirect-to``); ``bump_then_status`` (a write that counts, then answers with HTTP ``status``, default
502, and an HTML body: a gateway whose upstream ran the call), ``status_read`` (the same for a read, without
counting), ``bump_then_internal_error`` (a write that counts, then answers JSON-RPC -32603), ``refuse_write``
(answers JSON-RPC -32602 at HTTP 400, counting nothing), ``bump_then_status_error`` (counts, then answers HTTP
``status`` with a JSON-RPC error of ``code``), ``bump_then_202`` / ``bump_then_html`` (count, then answer 202
Accepted with no body / 200 with an HTML body), ``restart`` (forgets the session, as a restarted server does:
requests that carry its id are answered 404 until the next ``initialize``), ``fail_next_lists`` (the next
``count`` ``tools/list`` requests are answered HTTP ``status``); ``gzip_sse`` / ``gzip_json`` (an SSE / JSON
answer sent with ``Content-Encoding: gzip``, though the client asked for ``identity``: ``mib`` MiB of gzip that
expand to about a thousand times as much).

Options: ``--port``, ``--status CODE`` (answer every POST with CODE), ``--redirect-all URL`` (answer every POST
with a 307 to URL), ``--record FILE`` (append each request's method, path and headers, one JSON line each).
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

OBJECT = {"type": "object", "properties": {}}


def _tool(name: str, read: bool = True, **props: str) -> dict:
    schema = {"type": "object", "properties": {k: {"type": v} for k, v in props.items()}}
    return {"name": name, "inputSchema": schema, "annotations": {"readOnlyHint": read}}


TOOLS = [_tool("echo", text="string"), _tool("bump", read=False), _tool("count"), _tool("huge_json", bytes="integer"),
         _tool("big_sse", bytes="integer"), _tool("hang_sse"), _tool("broken_sse"),
         _tool("broken_sse_write", read=False), _tool("cut_json"),
         _tool("cut_json_write", read=False), _tool("redirect"),
         _tool("bump_then_status", read=False, status="integer"), _tool("status_read", status="integer"),
         _tool("bump_then_internal_error", read=False, delay="number"), _tool("refuse_write", read=False),
         _tool("bump_then_status_error", read=False, status="integer", code="integer"),
         _tool("bump_then_202", read=False), _tool("bump_then_html", read=False), _tool("restart"),
         _tool("fail_next_lists", count="integer", status="integer"), _tool("gzip_sse", mib="integer"),
         _tool("gzip_json", mib="integer")]


def _bomb(mib: int) -> bytes:
    """About ``mib`` MiB of gzip: blank lines, about a thousand times as many bytes once decompressed."""
    import zlib

    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    piece = b"\n" * (1 << 20)
    return b"".join(c.compress(piece) for _ in range(mib * 1030)) + c.flush()


class State:
    options: argparse.Namespace
    count = 0
    lock = threading.Lock()
    session = "hostile-session"
    forgot = False  # "restarted": requests with the old session id are answered 404 until a new initialize
    list_failures: list[int] = []  # HTTP statuses the next tools/list requests are answered with, one each


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass

    def record(self) -> None:
        if State.options.record is not None:
            entry = {"method": self.command, "path": self.path, "headers": dict(self.headers.items())}
            with State.lock, State.options.record.open("a") as f:
                f.write(json.dumps(entry) + "\n")

    def reply(self, status: int, body: bytes, content_type: str = "application/json", **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in headers.items():
            self.send_header(key.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def result(self, request_id: object, result: object = None, error: dict | None = None) -> None:
        message: dict = {"jsonrpc": "2.0", "id": request_id}
        message.update({"error": error} if error is not None else {"result": result})
        self.reply(200, json.dumps(message).encode(), mcp_session_id=State.session)

    def sse_head(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def do_GET(self) -> None:  # noqa: N802 - the base class's name
        self.record()
        self.reply(405, b"")

    def do_DELETE(self) -> None:  # noqa: N802
        self.record()
        self.reply(200, b"")

    def do_POST(self) -> None:  # noqa: N802
        self.record()
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        options = State.options
        if options.status:
            self.reply(options.status, b'{"detail": "no"}')
            return
        if options.redirect_all:
            self.reply(307, b"", Location=options.redirect_all)
            return
        message = json.loads(body)
        if "id" not in message:
            self.reply(202, b"")
            return
        method, params, request_id = message.get("method"), message.get("params") or {}, message["id"]
        if State.forgot and method != "initialize" and self.headers.get("Mcp-Session-Id"):
            self.reply(404, b"")
            return
        if method == "initialize":
            if State.forgot:
                State.forgot, State.session = False, f"hostile-session-{time.monotonic_ns()}"
            self.result(request_id, {"protocolVersion": params.get("protocolVersion", "2025-06-18"),
                                     "capabilities": {"tools": {}}, "serverInfo": {"name": "hostile", "version": "1"}})
        elif method == "tools/list":
            if State.list_failures:
                self.reply(State.list_failures.pop(0), b"<html>busy</html>", content_type="text/html")
                return
            self.result(request_id, {"tools": TOOLS})
        elif method == "ping":
            self.result(request_id, {})
        elif method == "tools/call":
            self.call(request_id, params.get("name"), params.get("arguments") or {})
        else:
            self.result(request_id, error={"code": -32601, "message": "Method not found"})

    def call(self, request_id: object, name: str, args: dict) -> None:
        def text(value: str) -> dict:
            return {"content": [{"type": "text", "text": value}]}

        if name == "echo":
            self.result(request_id, text(str(args.get("text"))))
        elif name == "bump":
            with State.lock:
                State.count += 1
                n = State.count
            self.result(request_id, text(str(n)))
        elif name == "count":
            self.result(request_id, text(str(State.count)))
        elif name == "huge_json":
            size = int(args.get("bytes", 64 << 20))
            head = b'{"jsonrpc":"2.0","id":' + json.dumps(request_id).encode() + b',"result":{"content":[' \
                b'{"type":"text","text":"'
            tail = b'"}]}}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(head) + size + len(tail)))
            self.end_headers()
            self.wfile.write(head)
            chunk = b"x" * (1 << 20)
            try:
                while size > 0:
                    self.wfile.write(chunk[:size])
                    size -= len(chunk)
                self.wfile.write(tail)
            except OSError:
                return  # the client stopped reading
        elif name == "big_sse":
            data = json.dumps({"jsonrpc": "2.0", "id": request_id,
                               "result": text("x" * int(args.get("bytes", 2 << 20)))})
            self.sse_head()
            self.wfile.write(b"event: message\ndata: " + data.encode() + b"\n\n")
        elif name in ("gzip_sse", "gzip_json"):
            data = _bomb(int(args.get("mib", 1)))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream" if name == "gzip_sse" else "application/json")
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            try:
                self.wfile.write(data)
            except OSError:
                return  # the client stopped reading
        elif name == "hang_sse":
            self.sse_head()
            self.wfile.flush()
            time.sleep(600)
        elif name in ("broken_sse", "broken_sse_write"):
            if name == "broken_sse_write":
                with State.lock:
                    State.count += 1
            self.sse_head()
            self.wfile.write(b"event: message\ndata: {this is not json\n\n")
            self.wfile.write(b"event: message\ndata: {\"jsonrpc\": \"2.0\", \"id\": ")
            self.wfile.flush()
        elif name in ("cut_json", "cut_json_write"):
            if name == "cut_json_write":
                with State.lock:
                    State.count += 1
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b'{"jsonrpc": "2.0", "id": ')
            self.wfile.flush()
            self.close_connection = True
        elif name in ("bump_then_status", "status_read"):
            if name == "bump_then_status":
                with State.lock:
                    State.count += 1
            self.reply(int(args.get("status", 502)), b"<html>upstream failed</html>", content_type="text/html")
        elif name == "bump_then_internal_error":
            with State.lock:
                State.count += 1
            time.sleep(float(args.get("delay", 0)))
            self.result(request_id, error={"code": -32603, "message": "Internal error"})
        elif name == "bump_then_status_error":
            with State.lock:
                State.count += 1
            self.reply(int(args.get("status", 502)), json.dumps({"jsonrpc": "2.0", "id": request_id, "error": {
                "code": int(args.get("code", -32602)), "message": "upstream said no"}}).encode())
        elif name in ("bump_then_202", "bump_then_html"):
            with State.lock:
                State.count += 1
            if name == "bump_then_202":
                self.reply(202, b"")
            else:
                self.reply(200, b"<html>done</html>", content_type="text/html")
        elif name == "refuse_write":
            self.reply(400, json.dumps({"jsonrpc": "2.0", "id": request_id,
                                        "error": {"code": -32602, "message": "bad arguments"}}).encode())
        elif name == "fail_next_lists":
            State.list_failures = [int(args.get("status", 503))] * int(args.get("count", 1))
            self.result(request_id, text("ok"))
        elif name == "restart":
            State.forgot = True
            self.result(request_id, text("restarted"))
        elif name == "redirect":
            self.reply(307, b"", Location=State.options.redirect_to or "http://127.0.0.1:9/")
        else:
            self.result(request_id, error={"code": -32602, "message": f"no tool {name}"})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--status", type=int)
    parser.add_argument("--redirect-all")
    parser.add_argument("--redirect-to")
    parser.add_argument("--record", type=Path)
    State.options = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", State.options.port), Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
