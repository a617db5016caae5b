"""Wall-clock bounds on one HTTP exchange, held while it is read.

An HTTP read timeout bounds each read, not the exchange: a server that trickles (a byte, an SSE comment, an interim
``100 Continue`` or a header line now and then) keeps every read short and the exchange open for ever. Here:

* ``limit(seconds)`` (sync) sets when the exchange under way in this thread must end. Every socket operation of a
  connection made by an httpx client passed through ``install`` is then given at most the time left (its own
  timeout capped), and one started past the end fails at once as a timeout: the status line, interim responses,
  headers and body are bounded alike, also for a connection reused from the pool. ``checked(chunks)`` checks the
  clock between the chunks of a body as well, for a client whose transport ``install`` could not reach.
* ``alimit(seconds)`` (async) is a cancel scope over the whole exchange; ``expired(scope)`` says it fired.

Outside ``limit`` nothing changes: an installed connection behaves as before.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpcore
import httpx

__all__ = ["limit", "alimit", "checked", "capped", "install", "TimedOut"]

#: when the exchange under way in this context must end (``time.monotonic()``), or None
_END: contextvars.ContextVar[float | None] = contextvars.ContextVar("toolwire_exchange_end", default=None)


class TimedOut(httpx.ReadTimeout):
    """The exchange ran past its wall-clock bound (an ``httpx.TimeoutException``)."""


def _left(error: type[Exception]) -> float | None:
    end = _END.get()
    if end is None:
        return None
    left = end - time.monotonic()
    if left <= 0:
        raise error("the exchange ran past its time limit")
    return left


def _cap(timeout: float | None, error: type[Exception]) -> float | None:
    left = _left(error)
    if left is None:
        return timeout
    return left if timeout is None else min(timeout, left)


@contextlib.contextmanager
def limit(seconds: float | None) -> Iterator[None]:
    """Bound what runs inside (in this thread) to ``seconds`` of wall clock; None: no bound."""
    if seconds is None:
        yield
        return
    token = _END.set(time.monotonic() + max(0.0, seconds))
    try:
        yield
    finally:
        _END.reset(token)


def alimit(seconds: float | None) -> Any:
    """A cancel scope that ends what runs inside after ``seconds`` (None: never)."""
    return anyio.CancelScope() if seconds is None else anyio.move_on_after(max(0.0, seconds))


def checked(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """``chunks``, with the clock checked before each (``TimedOut`` past the end of ``limit``)."""
    for chunk in chunks:
        _left(TimedOut)
        yield chunk


def capped(timeout: httpx.Timeout, seconds: float | None) -> httpx.Timeout:
    """``timeout`` with every part capped at ``seconds`` (at least a millisecond)."""
    if seconds is None:
        return timeout
    s = max(0.001, seconds)

    def cap(v: float | None) -> float:
        return s if v is None else min(v, s)
    return httpx.Timeout(connect=cap(timeout.connect), read=cap(timeout.read), write=cap(timeout.write),
                         pool=cap(timeout.pool))


class _Stream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _cap(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _cap(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return _Stream(self._inner.start_tls(ssl_context, server_hostname, _cap(timeout, httpcore.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Any = None) -> httpcore.NetworkStream:
        return _Stream(self._inner.connect_tcp(host, port, _cap(timeout, httpcore.ConnectTimeout), local_address,
                                               socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Any = None) -> httpcore.NetworkStream:
        return _Stream(self._inner.connect_unix_socket(path, _cap(timeout, httpcore.ConnectTimeout),
                                                       socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def install(client: httpx.Client) -> None:
    """Make the connections ``client`` opens from now on honour ``limit`` (its httpx transports' connection
    pools; a transport of another kind is left alone, and ``checked`` still bounds its bodies)."""
    for transport in [getattr(client, "_transport", None), *getattr(client, "_mounts", {}).values()]:
        pool = getattr(transport, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        if isinstance(backend, httpcore.NetworkBackend) and not isinstance(backend, _Backend):
            pool._network_backend = _Backend(backend)  # type: ignore[union-attr]
