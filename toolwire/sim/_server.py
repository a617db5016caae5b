"""``SimProvider``: the loopback HTTP server (standard library only) that answers in five dialects."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ..codecs import dialects_with
from ._base import Dialect, Ev, Request
from ._core import ApiError, Fault, Rand, RecordedRequest, Reply, Signer, dumps
from ._model import respond

__all__ = ["SimProvider"]


def _dialects() -> tuple[Dialect, ...]:
    """The simulator part of every dialect record that has one (``dialects_with("sim")``)."""
    return tuple(d.simulator() for d in dialects_with("sim"))


DIALECTS: tuple[Dialect, ...] = _dialects()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    block_on_close = False
    request_queue_size = 64
    sim: SimProvider
    resets: set[Any]  # connections to close with a reset: no FIN first

    def shutdown_request(self, request: Any) -> None:
        if request in self.resets:
            self.resets.discard(request)
            self.close_request(request)  # SO_LINGER 0: the close sends a RST
            return
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up is normal here (cut streams, abandoned reads): stay quiet about it."""
        import sys

        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError, OSError)):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "toolwire-sim/1"
    sys_version = ""
    #: TCP_NODELAY: a response goes out as several small writes (status line and headers, then the body or each
    #: chunk); with Nagle's algorithm the second write waits for the client's delayed ACK, about 40 ms a request
    disable_nagle_algorithm = True
    server: _Server

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self.server.sim._handle(self)

    do_GET = do_PUT = do_DELETE = do_PATCH = do_POST  # noqa: N815 - unknown routes answer 404

    def log_message(self, format: str, *args: Any) -> None:  # silence the default stderr log
        return


class SimProvider:
    """A simulated LLM provider: a real HTTP server on loopback that speaks the five dialects, plays the scripted
    model of ``toolwire.sim.scenarios`` and checks requests as the real APIs do. Thread-safe.

    ``gemini_ids=False`` makes Gemini function calls carry no ``id`` (older models: results pair by name and
    order). ``seed`` makes ids, fragment sizes and socket-write grouping reproducible (request by request, in
    arrival order). ``write_pause`` sleeps that many seconds between socket writes of a stream.
    """

    def __init__(self, *, gemini_ids: bool = True, seed: Any = None, write_pause: float = 0.0) -> None:
        self.gemini_ids = gemini_ids
        self.write_pause = write_pause
        self._seed = seed
        secret = (hashlib.sha256(f"toolwire-sim:{seed}".encode()).digest() if seed is not None
                  else os.urandom(32))
        self.signer = Signer(secret)
        self._lock = threading.RLock()
        self._plan: deque[Fault] = deque()
        self._then: Fault | None = None
        # plans for one conversation: (dialect, scenario) -> [queued faults, then]
        self._keyed: dict[tuple[str | None, str | None], list[Any]] = {}
        self._requests: list[RecordedRequest] = []
        self._stores: dict[str, dict[str, Any]] = {}  # what the dialects store, by store name
        self._registries: dict[str, dict[str, Any]] = {}
        self._count = 0
        self.base_url: str | None = None

    # ---- public API ---------------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def serve(self, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
        """Run the server on a daemon thread; yields its base URL (``http://127.0.0.1:PORT``)."""
        server = _Server((host, port), _Handler)
        server.sim = self
        server.resets = set()
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                  name="toolwire-sim", daemon=True)
        thread.start()
        url = f"http://{host}:{server.server_address[1]}"
        self.base_url = url
        try:
            yield url
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)
            if self.base_url == url:
                self.base_url = None

    def plan(self, faults: Iterable[Fault], *, then: Fault | None = None, scenario: str | None = None,
             dialect: str | None = None) -> None:
        """Queue ``faults`` for the next requests (one per request, in arrival order, after any still queued);
        ``then`` (if given) applies to every request once the queue is empty.

        With ``scenario`` (a scenario name) and/or ``dialect``, the faults apply only to the requests of those
        conversations, in their own queue: conversations running side by side each get their own plan. A
        request takes its fault from the most specific plan that matches it (dialect and scenario, then
        scenario, then dialect), else from the unkeyed plan."""
        faults = list(faults)
        for f in [*faults, *([then] if then is not None else [])]:
            if not isinstance(f, Fault):
                raise TypeError(f"plan() takes Fault objects, not {type(f).__name__}")
        if scenario is not None:
            from .scenarios import SCENARIOS

            if scenario not in SCENARIOS:
                raise ValueError(f"plan(): unknown scenario {scenario!r}; expected one of: {', '.join(SCENARIOS)}")
        if dialect is not None and dialect not in {d.name for d in DIALECTS}:
            raise ValueError(f"plan(): unknown dialect {dialect!r}; expected one of: "
                             f"{', '.join(d.name for d in DIALECTS)}")
        with self._lock:
            if scenario is None and dialect is None:
                self._plan.extend(faults)
                if then is not None:
                    self._then = then
                return
            entry = self._keyed.setdefault((dialect, scenario), [deque(), None])
            entry[0].extend(faults)
            if then is not None:
                entry[1] = then

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in arrival order (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def pending_faults(self) -> int:
        """Faults still queued, in every plan."""
        with self._lock:
            return len(self._plan) + sum(len(q) for q, _ in self._keyed.values())

    def reset(self) -> None:
        """Forget the plan, the request log, the stored responses and interactions and the replay registries."""
        with self._lock:
            self._plan.clear()
            self._then = None
            self._keyed.clear()
            self._requests.clear()
            for store in self._stores.values():
                store.clear()
            self._registries.clear()

    # ---- state the dialects keep ----------------------------------------------------------------------------------
    def _store_get(self, store: str, key: Any) -> Any:
        with self._lock:
            return self._stores.get(store, {}).get(key) if isinstance(key, str) else None

    def _store_put(self, store: str, key: str, value: Any) -> None:
        with self._lock:
            self._stores.setdefault(store, {})[key] = value

    def _registry_get(self, name: str, key: Any) -> Any:
        with self._lock:
            return self._registries.get(name, {}).get(key) if isinstance(key, str) else None

    def _registry_put(self, name: str, key: str, value: Any) -> None:
        with self._lock:
            self._registries.setdefault(name, {})[key] = value

    # ---- one request --------------------------------------------------------------------------------------------
    def _handle(self, h: _Handler) -> None:
        h._sim_started = False  # type: ignore[attr-defined]  # one handler serves every request of a connection
        try:
            self._handle_one(h)
        except Exception as exc:  # a bug or a request shape the simulator does not know: answer, don't hang up
            if getattr(h, "_sim_started", False):
                _drop(h)
                return
            with self._lock:
                self._requests.append(RecordedRequest(None, h.command, urlsplit(h.path).path, None, 500, None,
                                                      error=f"simulator error: {exc!r}"))
            _send(h, 500, dumps({"error": {"message": f"toolwire.sim internal error: {exc!r}",
                                           "type": "server_error", "param": None, "code": None}}))

    def _handle_one(self, h: _Handler) -> None:
        url = urlsplit(h.path)
        path, query = url.path, parse_qs(url.query, keep_blank_values=True)
        raw = _read_body(h)
        with self._lock:
            n = self._count
            self._count += 1
        rand = Rand(f"{self._seed}:{n}" if self._seed is not None else None)
        dialect, route = None, None
        for d in DIALECTS:
            route = d.route(h.command, path)
            if route is not None:
                dialect = d
                break
        body: Any = None
        parse_error: Exception | None = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError as exc:
                parse_error = exc
        else:
            parse_error = ValueError("the request body is empty")
        req = Request(sim=self, rand=rand, method=h.command, path=path, query=query, headers=h.headers, body=body,
                      raw=raw, route=route or {})
        fault, scenario = self._next_fault(dialect, req, parse_error is None)

        def record(status: int, error: str | None = None) -> None:
            headers = {k.lower(): v for k, v in h.headers.items()
                       if k.lower() not in ("authorization", "x-api-key", "x-goog-api-key")}
            with self._lock:
                self._requests.append(RecordedRequest(dialect.name if dialect else None, h.command, path, body,
                                                      status, fault, url.query, headers, error, scenario))

        if dialect is None:
            record(404, "no such endpoint")
            _send(h, 404, dumps({"error": {"code": 404, "message": f"Not found: {h.command} {path}",
                                           "status": "NOT_FOUND"}}))
            return
        if fault is not None and fault.kind == "slow_first_byte":
            time.sleep(fault.seconds)
        headers = dialect.response_headers(req)
        try:
            if not dialect.authorized(req):
                status, err_body = dialect.auth_error(req)
                record(status, "missing API key")
                _send(h, status, dumps(err_body), headers=headers)
                return
            if fault is not None and fault.kind == "status":
                self._send_status(h, dialect, req, fault, record, headers)
                return
            if fault is not None and fault.kind == "raw":
                self._send_raw(h, fault, record, headers)
                return
            if fault is not None and fault.kind == "wire":
                record(0, f"planned wire bytes ({len(fault.body)} bytes)")
                h._sim_started = True  # type: ignore[attr-defined]
                try:
                    h.wfile.write(fault.body)
                except OSError:
                    pass
                _drop(h)
                return
            dialect.preflight(req)
            if parse_error is not None:
                raise dialect.bad_json(req, parse_error)
            conv = dialect.read(req)
        except ApiError as err:
            record(err.status, err.message)
            _send(h, err.status, dumps(dialect.error_body(err, req)), headers=headers)
            return
        reply = respond(conv)
        kind = fault.kind if fault is not None else "ok"
        if kind == "arguments":
            reply = Reply(text=reply.text, calls=[(name, fault.body) for name, _ in reply.calls])
        if kind == "in_stream_error" and not req.stream:
            status, err_body = dialect.in_stream_error_status(fault.error_kind, req)
            dialect.finish(reply, req, outcome="failed")
            record(status, "planned in-stream error (non-streaming request)")
            _send(h, status, dumps(err_body), headers=headers)
            return
        max_tokens = kind == "max_tokens"
        outcome = ("max_tokens" if max_tokens else "failed" if kind in ("cut", "reset", "in_stream_error", "finish")
                   else "ok")
        cutting = kind in ("cut", "reset")
        if req.stream:
            if kind == "finish":
                evs = dialect.ending_events(reply, req, reason=fault.reason, partial=fault.partial)
            else:
                evs = dialect.events(reply, req, max_tokens=max_tokens)
            if kind == "in_stream_error":
                keep = _midpoint(evs)
                evs = evs[:keep] + [Ev(b) for b in dialect.stream_error(fault.error_kind, req, keep)]
            dialect.finish(reply, req, outcome=outcome)  # before the last byte: the client may ask again at once
            record(200)
            self._write_stream(h, dialect.content_type(req), headers, evs, rand,
                               fault.at if cutting else None, reset=kind == "reset")
        else:
            if kind == "finish":
                whole = dialect.ending_whole(reply, req, reason=fault.reason, partial=fault.partial)
            else:
                whole = dialect.whole(reply, req, max_tokens=max_tokens)
            data = dumps(whole, indent=dialect.body_indent)
            dialect.finish(reply, req, outcome=outcome)
            record(200)
            cut = None if not cutting else max(1, min(len(data) - 1, int(len(data) * fault.at)))
            _send(h, 200, data, headers=headers, cut=cut, reset=kind == "reset")

    def _next_fault(self, dialect: Dialect | None, req: Request, parsed: bool) -> tuple[Fault | None, str | None]:
        """The fault for this request (from its conversation's plan when one matches, else the unkeyed plan)
        and its scenario's name (only looked up while plans for one conversation exist)."""
        with self._lock:
            keyed = bool(self._keyed)
        key_dialect = key_scenario = None
        if keyed and dialect is not None:
            key_dialect = dialect.name
            if parsed:
                key_scenario = self._scenario_of(dialect, req)
        with self._lock:
            for key in ((key_dialect, key_scenario), (None, key_scenario), (key_dialect, None)):
                entry = self._keyed.get(key) if key != (None, None) else None
                if entry is not None:
                    return (entry[0].popleft() if entry[0] else entry[1]), key_scenario
            return (self._plan.popleft() if self._plan else self._then), key_scenario

    @staticmethod
    def _scenario_of(dialect: Dialect, req: Request) -> str | None:
        """The scenario a request's conversation plays (read from a copy of the request), or None."""
        from .scenarios import find_scenario

        probe = Request(sim=req.sim, rand=Rand(None), method=req.method, path=req.path, query=req.query,
                        headers=req.headers, body=req.body, route=dict(req.route))
        try:
            conv = dialect.read(probe)
        except Exception:  # noqa: BLE001 - a request the dialect refuses belongs to no scenario
            return None
        users = [v for k, v in conv.entries if k == "user"]
        found = find_scenario(users[0]) if users else None
        return found[0].name if found else None

    def _send_status(self, h: _Handler, dialect: Dialect, req: Request, fault: Fault, record: Any,
                     headers: dict[str, str]) -> None:
        code = fault.code or 500
        if fault.body is None:
            data = dumps(dialect.status_body(fault, req))
        elif isinstance(fault.body, bytes):
            data = fault.body
        elif isinstance(fault.body, str):
            data = fault.body.encode()
        else:
            data = dumps(fault.body)
        headers = dict(headers)
        if fault.retry_after is not None:
            headers["retry-after"] = f"{fault.retry_after:g}"
        if fault.retry_after_ms is not None:
            headers["retry-after-ms"] = f"{fault.retry_after_ms:g}"
        headers.update(fault.headers)
        record(code, f"planned status {code}")
        _send(h, code, data, headers=headers)

    def _send_raw(self, h: _Handler, fault: Fault, record: Any, headers: dict[str, str]) -> None:
        body = fault.body
        data = body if isinstance(body, bytes) else body.encode() if isinstance(body, str) else dumps(body)
        code = fault.code if fault.code is not None else 200
        record(code, f"planned raw body ({len(data)} bytes)")
        _send(h, code, data, headers={**headers, **dict(fault.headers)},
              ctype=fault.content_type or "application/json")

    def _write_stream(self, h: _Handler, ctype: str, headers: dict[str, str], evs: list[Ev], rand: Rand,
                      cut_at: float | None, *, reset: bool = False) -> None:
        limit = None
        if cut_at is not None:
            offsets, pos = [], 0
            for ev in evs:
                offsets.append(pos)
                pos += len(ev.data)
            content = [i for i, ev in enumerate(evs) if ev.content]
            if content:
                start, end = offsets[content[0]], offsets[content[-1]] + len(evs[content[-1]].data)
            else:
                start, end = 0, pos
            limit = max(1, min(pos - 1, start + int((end - start) * cut_at)))
        h._sim_started = True  # type: ignore[attr-defined]
        try:
            h.send_response(200)
            h.send_header("Content-Type", ctype)
            h.send_header("Transfer-Encoding", "chunked")
            h.send_header("Cache-Control", "no-cache")
            for k, v in headers.items():
                h.send_header(k, v)
            h.end_headers()
            h.wfile.flush()
            sent = 0
            for piece in _write_plan(evs, rand):
                if limit is not None and sent + len(piece) >= limit:
                    piece = piece[:limit - sent]
                    if piece:
                        _chunk(h, piece)
                    _drop(h, reset=reset)
                    return
                _chunk(h, piece)
                sent += len(piece)
                if self.write_pause:
                    time.sleep(self.write_pause)
            h.wfile.write(b"0\r\n\r\n")
            h.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            h.close_connection = True


# ---- HTTP plumbing ------------------------------------------------------------------------------------------------


def _read_body(h: BaseHTTPRequestHandler) -> bytes:
    if "chunked" in (h.headers.get("Transfer-Encoding") or "").lower():
        out = bytearray()
        while True:
            line = h.rfile.readline()
            size = int(line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while h.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return bytes(out)
            out += h.rfile.read(size)
            h.rfile.readline()
    length = int(h.headers.get("Content-Length") or 0)
    return h.rfile.read(length) if length > 0 else b""


def _send(h: BaseHTTPRequestHandler, status: int, data: bytes, *, headers: dict[str, str] | None = None,
          ctype: str = "application/json", cut: int | None = None, reset: bool = False) -> None:
    h._sim_started = True  # type: ignore[attr-defined]
    try:
        h.send_response(status)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        if cut is not None:
            h.wfile.write(data[:cut])
            _drop(h, reset=reset)
            return
        h.wfile.write(data)
        h.wfile.flush()
    except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
        h.close_connection = True


def _chunk(h: BaseHTTPRequestHandler, data: bytes) -> None:
    h.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
    h.wfile.flush()


def _drop(h: BaseHTTPRequestHandler, *, reset: bool = False) -> None:
    """Close the connection now, mid-body; ``reset``: with a TCP RST (no FIN, whatever the client still sends)."""
    h.close_connection = True
    try:
        h.wfile.flush()
    except OSError:
        pass
    if reset:
        try:
            h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        h.server.resets.add(h.connection)  # type: ignore[attr-defined]
        return
    try:
        h.connection.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _midpoint(evs: list[Ev]) -> int:
    """How many events to keep before an in-stream error: about half of the content events."""
    content = [i for i, ev in enumerate(evs) if ev.content]
    if len(content) >= 2:
        return content[len(content) // 2]
    if content:
        return content[0] + 1
    return max(1, len(evs) // 2)


def _write_plan(evs: list[Ev], rand: Rand) -> list[bytes]:
    """Socket writes for ``evs``: sometimes several events in one write, sometimes one event over several writes.
    The first event is always split and the last two always share a write, so both happen in every stream."""
    rng = rand.rng
    data = b"".join(e.data for e in evs)
    cuts: set[int] = set()
    pos = 0
    for k, ev in enumerate(evs):
        start, pos = pos, pos + len(ev.data)
        if k == len(evs) - 1:
            break
        if k < len(evs) - 2 and rng.random() >= 0.35:
            cuts.add(pos)  # an event boundary kept as a write boundary
        if (k == 0 or rng.random() < 0.25) and len(ev.data) > 4:
            cuts.update(rng.sample(range(start + 1, pos), min(len(ev.data) - 1, rng.randint(1, 3))))
    out, prev = [], 0
    for c in sorted(cuts):
        out.append(data[prev:c])
        prev = c
    out.append(data[prev:])
    return out
