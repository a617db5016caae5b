"""PostgresLedger under misuse and failing servers: each module gets its own private cluster (stopped at its end), a TCP proxy that
can stop forwarding (a server that stops answering), and a helper that runs a call under a hard bound."""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any, Callable

import pytest


@pytest.fixture(scope="module")
def cluster():
    if os.environ.get("TOOLWIRE_SKIP_POSTGRES") == "1":
        pytest.skip("TOOLWIRE_SKIP_POSTGRES=1")
    from tests.pg_cluster import start

    c = start(durable=True)
    try:
        yield c
    finally:
        c.stop()


class Proxy:
    """A TCP proxy to 127.0.0.1:``port``. ``freeze()`` stops forwarding (``down_only``: only the server's replies),
    keeping every connection open: a server that accepted and then never answers."""

    def __init__(self, port: int) -> None:
        self.port = port
        self._frozen_up = threading.Event()
        self._frozen_down = threading.Event()
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(200)
        self.lport = self.srv.getsockname()[1]
        self.socks: list[socket.socket] = []
        self.marker: bytes | None = None
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.lport}/postgres"

    def freeze(self, down_only: bool = False) -> None:
        self._frozen_down.set()
        if not down_only:
            self._frozen_up.set()

    def freeze_replies_after(self, marker: bytes) -> None:
        """Hold back the server's replies from the moment a client sends bytes containing ``marker`` (the
        statement reaches the server and runs; its answer waits)."""
        self.marker = marker

    def thaw(self) -> None:
        self.marker = None
        self._frozen_up.clear()
        self._frozen_down.clear()

    def _pump(self, a: socket.socket, b: socket.socket, frozen: threading.Event) -> None:
        while True:
            try:
                data = a.recv(65536)
            except OSError:
                return
            if frozen is self._frozen_up and self.marker is not None and self.marker in data:
                self._frozen_down.set()
            while frozen.is_set():
                time.sleep(0.01)
            if not data:
                try:
                    b.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                return
            try:
                b.sendall(data)
            except OSError:
                return

    def _accept(self) -> None:
        while True:
            try:
                cl = self.srv.accept()[0]
            except OSError:
                return
            if self._frozen_up.is_set():  # frozen: accept, never answer
                self.socks.append(cl)
                continue
            try:
                up = socket.create_connection(("127.0.0.1", self.port))
            except OSError:  # the server is down: so is the proxy's answer
                cl.close()
                continue
            self.socks += [cl, up]
            threading.Thread(target=self._pump, args=(cl, up, self._frozen_up), daemon=True).start()
            threading.Thread(target=self._pump, args=(up, cl, self._frozen_down), daemon=True).start()

    def cut(self) -> None:
        """Close every proxied connection, dropping whatever replies were held back (they never arrive)."""
        socks, self.socks = self.socks, []
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)  # wakes a blocked recv and sends the FIN (close alone does not)
            except OSError:
                pass
            try:
                s.close()
            except OSError:
                pass
        self.thaw()

    def close(self) -> None:
        self.thaw()
        for s in [self.srv, *self.socks]:
            try:
                s.close()
            except OSError:
                pass


@pytest.fixture
def proxy(cluster):
    p = Proxy(cluster.port)
    try:
        yield p
    finally:
        p.close()


class Hung(AssertionError):
    pass


def bounded(fn: Callable[[], Any], limit: float, *, progress: Callable[[], Any] | None = None) -> tuple[float, Any]:
    """Run ``fn`` on a daemon thread; (elapsed, ("ok", value) | ("raised", exc)); ``Hung`` when it takes longer
    than ``limit`` seconds (the thread is left behind, stuck). With ``progress`` (a function whose value changes as
    ``fn`` gets on, such as a count of iterations done), ``limit`` bounds the time without progress instead of the
    whole run: a machine busy with other work slows a long loop down without making it hang, and only a loop
    that stops moving is ``Hung``."""
    box: dict[str, Any] = {}

    def run() -> None:
        t = time.monotonic()
        try:
            box["r"] = ("ok", fn())
        except BaseException as exc:  # noqa: BLE001
            box["r"] = ("raised", exc)
        box["t"] = time.monotonic() - t

    th = threading.Thread(target=run, daemon=True)
    th.start()
    if progress is None:
        th.join(limit)
    else:
        seen, since = progress(), time.monotonic()
        while th.is_alive() and time.monotonic() - since < limit:
            th.join(min(1.0, limit))
            now = progress()
            if now != seen:
                seen, since = now, time.monotonic()
    if th.is_alive():
        raise Hung(f"still running after {limit} s" + (" without progress" if progress is not None else ""))
    return box["t"], box["r"]
