"""HTTP transports over httpx, sync and async: one model request in, one parsed ``Turn`` out.

The bytes of a streamed response are fed to the sans-I/O ``StreamParser`` as they arrive. Every attempt gets a
new parser, so nothing of a failed attempt can leak into the next one (failure mode 26 in
docs/failure-modes.md). API keys live only in the
request headers: they are never logged and never appear in an error message.

Whatever the provider sends, ``request`` returns a Turn or raises ``ProviderError``, nothing else:

* a status outside 2xx: classified by the dialect's rules (``parse_error``); an error body or a header those
  rules cannot read (nesting past the recursion limit, a ``Retry-After`` that is neither seconds nor a date)
  is left out of the classification instead, so the status still decides. At most ``ERROR_BODY_LIMIT`` decoded
  bytes of an error body are read.
* the body is read raw and decoded by ``_decode`` (``gzip`` or ``deflate``, the only codings asked for), at most
  64 KiB of output per step, so every cap counts decoded bytes and a compressed body cannot expand past it: a 2xx
  body over ``max_body_bytes`` decoded bytes (64 MiB by default) is ``body_too_large``; stacked or unknown codings
  and bytes that do not decode are ``decoding_error`` (both ``transient`` with ``retry_limit=1``, as below).
* a 2xx body the parser cannot take (a message over ``max_message_bytes``, bytes after the JSON body, nesting
  past the recursion limit, a content encoding that does not decode): ``transient`` with ``retry_limit=1``.
  It is most likely the same on a retry, but a proxy or a one-off glitch can produce it; a second one fails.
  Logged as ``http.unreadable_body``.
* timeouts, refused, reset or cut connections: transient.

The body is serialised here (as httpx would: compact UTF-8 JSON) and handed, with the headers, to the dialect's
``HTTP.sign`` on every attempt, so that a part that signs requests signs the exact bytes sent, afresh for each
retry. A signing that fails is a permanent ``ProviderError`` of type ``signing_error``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from .. import _log
from ..codecs import dialect_for
from . import _deadline
from ..codecs.requests import ProviderErrorInfo, http_part, parse_error
from ..errors import ProviderProtocolError, ToolwireError, UsageError
from ..parser import StreamParser
from ..types import Event, Turn
from ._decode import ACCEPT_ENCODING, BodyDecodeError, BodyTooLarge, Decoder
from .errors import CallbackError, ProviderError, callback

__all__ = ["HTTPTransport", "AsyncHTTPTransport", "DEFAULT_TIMEOUT", "ERROR_BODY_LIMIT", "DEFAULT_MAX_BODY_BYTES"]

DEFAULT_TIMEOUT = httpx.Timeout(60.0, connect=10.0, read=60.0)
#: bytes of an error response's body that are read (classification needs its start; the rest is dropped)
ERROR_BODY_LIMIT = 1 << 20
#: decoded bytes of a 2xx body (streamed or whole) that are read; past them the attempt fails (``body_too_large``)
DEFAULT_MAX_BODY_BYTES = 64 << 20
_HEAD = 500  # characters of a body kept for the logs
_HEAD_READ = _HEAD + 512  # bytes kept before redaction, so that a key straddling the cut is still recognised
_RETRY_HEADERS = frozenset({"retry-after", "retry-after-ms"})


def _redact(text: str, secret: str | None) -> str:
    """``text`` without ``secret``; callers redact the whole body before cutting an excerpt from it."""
    if secret and secret in text:
        text = text.replace(secret, "[redacted]")
    return _log.scrub(text)


def _without_userinfo(url: str) -> tuple[str, str | None]:
    """``url`` without the ``user:password@`` of its authority (what the logs show), and that password."""
    try:
        parts = urlsplit(url)
        if "@" not in parts.netloc:
            return url, None
        return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2])), parts.password
    except ValueError:  # a URL urllib cannot split (httpx refuses it anyway): no part of it is logged
        return "[unreadable url]", None


#: the longest response id read from a header that is kept (a longer one is not an id a provider sends)
_MAX_REQUEST_ID = 200


class _Base:
    def __init__(self, provider: str, *, model: str, base_url: str | None = None, api_key: str | None = None,
                 stream: bool = True, timeout: httpx.Timeout | float | None = None,
                 max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        if isinstance(max_body_bytes, bool) or not isinstance(max_body_bytes, int) or max_body_bytes < 1:
            raise UsageError("max_body_bytes must be an int >= 1")
        self.max_body_bytes = max_body_bytes
        self.provider = provider
        self.model = model
        self.stream = stream
        self.timeout = timeout if timeout is not None else DEFAULT_TIMEOUT
        # resolved once: a missing key is a UsageError now, not at the first request
        http = self._http = http_part(provider)
        self._endpoint = http.endpoint(model=model, stream=stream, base_url=base_url, api_key=api_key)
        self._secret = next((v.split(" ", 1)[-1] for k, v in self._endpoint.headers.items()
                             if k in http.secret_headers), None)
        # a streamed body is framed the way the dialect's codec says (SSE, or a binary framing of its own)
        self._format = dialect_for(provider).codec.framing.name if stream else "auto"
        _log.add_secret(self._secret)  # scrubbed from every log event from now on
        _log.add_secret(api_key)
        self._logged_url, password = _without_userinfo(self._endpoint.url)
        _log.add_secret(password)  # a base URL's ``user:password@``: never logged either

    @property
    def url(self) -> str:
        return self._endpoint.url

    def _prepare(self, body: dict[str, Any]) -> tuple[dict[str, str], bytes]:
        """The headers and bytes of one attempt: the body serialised, then signed by the dialect's part."""
        data = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
        ep = self._endpoint
        try:
            headers = self._http.sign(ep.method, ep.url, dict(ep.headers), data)
            for secret in self._http.secrets():
                _log.add_secret(secret)
        except ToolwireError:
            raise
        except Exception as exc:  # credentials that cannot be refreshed, a signer that fails
            _log.emit(_log.WARNING, "http.error", provider=self.provider, url=self._logged_url, status=None,
                      type="signing_error", transient=False, retry_after=None,
                      body=_redact(f"{type(exc).__name__}: {exc}"[:300], self._secret))
            raise ProviderError(f"{self.provider} request could not be signed ({type(exc).__name__})",
                                provider=self.provider, status=None, type="signing_error",
                                transient=False) from None
        return headers, data

    def _request_id(self, headers: Any) -> str | None:
        """The response's id from its headers (``HTTP.response_id``), when it is a short printable string."""
        rid = self._http.response_id(headers)
        if isinstance(rid, str) and 0 < len(rid) <= _MAX_REQUEST_ID and rid.isprintable() and rid.strip() == rid:
            return rid
        return None

    def _parser(self) -> StreamParser:
        return StreamParser(self.provider, format=self._format)

    def _classify(self, status: int, headers: Any, body: bytes) -> ProviderErrorInfo:
        """``parse_error``, leaving out what it cannot read: the retry headers, then the body, then both."""
        headers = dict(headers.items()) if hasattr(headers, "items") else dict(headers)
        plain = {k: v for k, v in headers.items() if k.lower() not in _RETRY_HEADERS}
        for h, b in ((headers, body), (plain, body), (headers, b""), (plain, b"")):
            try:
                return parse_error(self.provider, status, h, b)
            except Exception:  # a RecursionError from nesting, a ValueError from a date that is none, …
                continue
        return parse_error(self.provider, status, {}, b"")

    def _http_error(self, status: int, headers: Any, body: bytes) -> ProviderError:
        info = self._classify(status, headers, body)
        _log.emit(_log.WARNING, "http.error", provider=self.provider, url=self._logged_url, status=status,
                  type=info.type, transient=info.transient, retry_after=info.retry_after,
                  body=_redact(body[:_HEAD_READ].decode("utf-8", "replace"), self._secret)[:_HEAD])
        return ProviderError(f"{self.provider} answered HTTP {status} ({info.type})", provider=self.provider,
                             status=status, type=info.type, transient=info.transient,
                             retry_after=info.retry_after)

    def _unreadable(self, exc: BaseException, status: int, head: bytes) -> ProviderError:
        """A 2xx body the parser could not take: transient, one retry."""
        if isinstance(exc, ProviderProtocolError):
            kind = exc.code
        elif isinstance(exc, RecursionError):
            kind = "nesting_too_deep"
        elif isinstance(exc, BodyTooLarge):
            kind = "body_too_large"
        elif isinstance(exc, (httpx.DecodingError, BodyDecodeError)):
            kind = "decoding_error"
        else:
            kind = "unreadable_body"
        _log.emit(_log.WARNING, "http.unreadable_body", provider=self.provider, url=self._logged_url,
                  status=status, type=kind, transient=True,
                  error=_redact(f"{type(exc).__name__}: {exc}"[:300], self._secret),
                  # a 2xx body carries the model's calls: their arguments only with log_arguments
                  body=_redact(head.decode("utf-8", "replace"), self._secret)[:_HEAD] if _log.LOG_ARGUMENTS
                  else f"[{len(head)} bytes not shown: they may hold call arguments; see log_arguments]")
        return ProviderError(f"{self.provider} sent a body that cannot be read ({kind})", provider=self.provider,
                             status=status, type=kind, transient=True, retry_limit=1)

    def _network_error(self, exc: Exception) -> ProviderError:
        kind = "timeout" if isinstance(exc, httpx.TimeoutException) else "connection_error"
        _log.emit(_log.WARNING, "http.error", provider=self.provider, url=self._logged_url, status=None, type=kind,
                  transient=True, retry_after=None, body=_redact(str(exc)[:300], self._secret))
        return ProviderError(f"{self.provider} request failed: {kind}", provider=self.provider, status=None,
                             type=kind, transient=True)

    def _timed_out(self, seconds: float | None) -> ProviderError:
        """The exchange ran past its wall-clock bound (``time_limit``): a ``timeout``."""
        return self._network_error(_deadline.TimedOut(f"the exchange ran past its time limit of {seconds:.3g} s"))


def _feed(transport: _Base, parser: StreamParser, chunk: bytes, head: bytearray, status: int,
          on_event: Callable[[Event], None] | None) -> None:
    """Feed one chunk; whatever the parser raises for it becomes a ``ProviderError`` (the parser is dropped). The
    events it returns go to ``on_event``."""
    if len(head) < _HEAD_READ:
        head += chunk[:_HEAD_READ - len(head)]
    try:
        events = parser.feed(chunk)
    except Exception as exc:  # FramingError, a RecursionError from nesting, anything else the body provoked
        raise transport._unreadable(exc, status, bytes(head)) from None
    if on_event is not None:
        for event in events:
            on_event(event)


def _close(transport: _Base, parser: StreamParser, head: bytearray, status: int,
           on_event: Callable[[Event], None] | None) -> Turn:
    try:
        events = parser.close()
    except Exception as exc:
        raise transport._unreadable(exc, status, bytes(head)) from None
    if on_event is not None:
        for event in events:
            on_event(event)
    return parser.turn


def _listener(on_event: Callable[[Event], Any] | None) -> Callable[[Event], None] | None:
    return None if on_event is None else callback(on_event)


class HTTPTransport(_Base):
    """Synchronous transport. ``request(body)`` returns the parsed Turn of one attempt, or raises
    ``ProviderError`` (``transient`` says whether a retry may help). Use as a context manager, or ``close()``."""

    def __init__(self, provider: str, *, model: str, base_url: str | None = None, api_key: str | None = None,
                 stream: bool = True, timeout: httpx.Timeout | float | None = None,
                 client: httpx.Client | None = None, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        super().__init__(provider, model=model, base_url=base_url, api_key=api_key, stream=stream, timeout=timeout,
                         max_body_bytes=max_body_bytes)
        self._client = client or httpx.Client(timeout=self.timeout)
        self._own = client is None
        _deadline.install(self._client)  # each socket operation then honours the time limit of a request

    def request(self, body: dict[str, Any], *, on_event: Callable[[Event], Any] | None = None,
                time_limit: float | None = None) -> Turn:
        """Send ``body``; return the Turn. ``on_event(event)`` gets each parser event as the response is read
        (what it raises propagates unchanged, the response is closed, nothing is retried). ``time_limit``: seconds
        of wall clock for the whole exchange (connecting, interim responses, headers, body), held while reading;
        past it a ``ProviderError`` of type ``timeout``. None: only the HTTP timeouts, which are per operation."""
        try:
            with _deadline.limit(time_limit):
                return self._request(body, _listener(on_event), time_limit)
        except CallbackError as exc:
            raise exc.error from None

    def _request(self, body: dict[str, Any], on_event: Callable[[Event], None] | None,
                 time_limit: float | None = None) -> Turn:
        ep = self._endpoint
        headers, data = self._prepare(body)
        parser = self._parser()
        head = bytearray()
        status = 0
        try:
            with self._client.stream(ep.method, ep.url, headers=headers, content=data,
                                     timeout=_deadline.capped(self._client.timeout, time_limit)) as resp:
                status = resp.status_code
                if not 200 <= status < 300:
                    error_body = bytearray()
                    try:
                        decoder = Decoder(resp.headers.get("content-encoding"), ERROR_BODY_LIMIT, truncate=True)
                        for raw in _deadline.checked(resp.iter_raw()):
                            for piece in decoder.feed(raw):
                                error_body += piece
                            if decoder.full:
                                break
                    except (httpx.HTTPError, BodyDecodeError):
                        pass  # an error body cut or not decodable: the status and what arrived decide
                    raise self._http_error(status, resp.headers, bytes(error_body))
                request_id = self._request_id(resp.headers)
                try:
                    decoder = Decoder(resp.headers.get("content-encoding"), self.max_body_bytes)
                    for raw in _deadline.checked(resp.iter_raw()):
                        for piece in decoder.feed(raw):
                            _feed(self, parser, piece, head, status, on_event)
                    decoder.close()
                except (BodyDecodeError, BodyTooLarge) as exc:
                    raise self._unreadable(exc, status, bytes(head)) from None
        except httpx.DecodingError as exc:
            raise self._unreadable(exc, status, bytes(head)) from None
        except httpx.HTTPError as exc:
            raise self._network_error(exc) from None
        turn = _close(self, parser, head, status, on_event)
        turn.request_id = request_id
        return turn

    def close(self) -> None:
        if self._own:
            self._client.close()

    def __enter__(self) -> "HTTPTransport":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncHTTPTransport(_Base):
    """The async twin of ``HTTPTransport`` (``await request(body)``, ``await aclose()``)."""

    def __init__(self, provider: str, *, model: str, base_url: str | None = None, api_key: str | None = None,
                 stream: bool = True, timeout: httpx.Timeout | float | None = None,
                 client: httpx.AsyncClient | None = None, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        super().__init__(provider, model=model, base_url=base_url, api_key=api_key, stream=stream, timeout=timeout,
                         max_body_bytes=max_body_bytes)
        self._client = client or httpx.AsyncClient(timeout=self.timeout)
        self._own = client is None

    async def request(self, body: dict[str, Any], *, on_event: Callable[[Event], Any] | None = None,
                      time_limit: float | None = None) -> Turn:
        """The async twin of ``HTTPTransport.request`` (``on_event`` is a plain callable; ``time_limit`` a cancel
        scope over the exchange)."""
        try:
            with _deadline.alimit(time_limit) as scope:
                return await self._request(body, _listener(on_event))
        except CallbackError as exc:
            raise exc.error from None
        if scope.cancelled_caught:
            raise self._timed_out(time_limit) from None
        raise AssertionError("unreachable")  # pragma: no cover

    async def _request(self, body: dict[str, Any], on_event: Callable[[Event], None] | None) -> Turn:
        ep = self._endpoint
        headers, data = self._prepare(body)
        parser = self._parser()
        head = bytearray()
        status = 0
        try:
            async with self._client.stream(ep.method, ep.url, headers=headers, content=data) as resp:
                status = resp.status_code
                if not 200 <= status < 300:
                    error_body = bytearray()
                    try:
                        decoder = Decoder(resp.headers.get("content-encoding"), ERROR_BODY_LIMIT, truncate=True)
                        async for raw in resp.aiter_raw():
                            for piece in decoder.feed(raw):
                                error_body += piece
                            if decoder.full:
                                break
                    except (httpx.HTTPError, BodyDecodeError):
                        pass  # an error body cut or not decodable: the status and what arrived decide
                    raise self._http_error(status, resp.headers, bytes(error_body))
                request_id = self._request_id(resp.headers)
                try:
                    decoder = Decoder(resp.headers.get("content-encoding"), self.max_body_bytes)
                    async for raw in resp.aiter_raw():
                        for piece in decoder.feed(raw):
                            _feed(self, parser, piece, head, status, on_event)
                    decoder.close()
                except (BodyDecodeError, BodyTooLarge) as exc:
                    raise self._unreadable(exc, status, bytes(head)) from None
        except httpx.DecodingError as exc:
            raise self._unreadable(exc, status, bytes(head)) from None
        except httpx.HTTPError as exc:
            raise self._network_error(exc) from None
        turn = _close(self, parser, head, status, on_event)
        turn.request_id = request_id
        return turn

    async def aclose(self) -> None:
        if self._own:
            await self._client.aclose()

    async def __aenter__(self) -> "AsyncHTTPTransport":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
