"""HTTP transports over httpx, sync and async: one model request in, one parsed ``Turn`` out.

The bytes of a streamed response are fed to the sans-I/O ``StreamParser`` as they arrive. Every attempt gets a
new parser, so nothing of a failed attempt can leak into the next one (PITFALL 26). API keys live only in the
request headers: they are never logged and never appear in an error message.
"""

from __future__ import annotations

from typing import Any

import httpx

from .. import _log
from ..codecs.requests import endpoint, parse_error
from ..parser import StreamParser
from ..types import Turn
from .errors import ProviderError

__all__ = ["HTTPTransport", "AsyncHTTPTransport", "DEFAULT_TIMEOUT"]

DEFAULT_TIMEOUT = httpx.Timeout(60.0, connect=10.0, read=60.0)


def _redact(text: str, secret: str | None) -> str:
    if secret and secret in text:
        text = text.replace(secret, "[redacted]")
    return text


class _Base:
    def __init__(self, provider: str, *, model: str, base_url: str | None = None, api_key: str | None = None,
                 stream: bool = True, timeout: httpx.Timeout | float | None = None) -> None:
        self.provider = provider
        self.model = model
        self.stream = stream
        self.timeout = timeout if timeout is not None else DEFAULT_TIMEOUT
        # resolved once: a missing key is a UsageError now, not at the first request
        self._endpoint = endpoint(provider, model=model, stream=stream, base_url=base_url, api_key=api_key)
        self._secret = next((v.split(" ", 1)[-1] for k, v in self._endpoint.headers.items()
                             if k in ("authorization", "x-api-key", "x-goog-api-key")), None)

    @property
    def url(self) -> str:
        return self._endpoint.url

    def _parser(self) -> StreamParser:
        return StreamParser(self.provider, format="sse" if self.stream else "auto")

    def _http_error(self, status: int, headers: Any, body: bytes) -> ProviderError:
        info = parse_error(self.provider, status, headers, body)
        _log.emit(_log.WARNING, "http.error", provider=self.provider, url=self.url, status=status,
                  type=info.type, transient=info.transient, retry_after=info.retry_after,
                  body=_redact(body[:500].decode("utf-8", "replace"), self._secret))
        return ProviderError(f"{self.provider} answered HTTP {status} ({info.type})", provider=self.provider,
                             status=status, type=info.type, transient=info.transient,
                             retry_after=info.retry_after)

    def _network_error(self, exc: Exception) -> ProviderError:
        kind = "timeout" if isinstance(exc, httpx.TimeoutException) else "connection_error"
        _log.emit(_log.WARNING, "http.error", provider=self.provider, url=self.url, status=None, type=kind,
                  transient=True, retry_after=None, body=_redact(str(exc)[:300], self._secret))
        return ProviderError(f"{self.provider} request failed: {kind}", provider=self.provider, status=None,
                             type=kind, transient=True)


class HTTPTransport(_Base):
    """Synchronous transport. ``request(body)`` returns the parsed Turn of one attempt, or raises
    ``ProviderError`` (``transient`` says whether a retry may help). Use as a context manager, or ``close()``."""

    def __init__(self, provider: str, *, model: str, base_url: str | None = None, api_key: str | None = None,
                 stream: bool = True, timeout: httpx.Timeout | float | None = None,
                 client: httpx.Client | None = None) -> None:
        super().__init__(provider, model=model, base_url=base_url, api_key=api_key, stream=stream, timeout=timeout)
        self._client = client or httpx.Client(timeout=self.timeout)
        self._own = client is None

    def request(self, body: dict[str, Any]) -> Turn:
        ep = self._endpoint
        parser = self._parser()
        try:
            with self._client.stream(ep.method, ep.url, headers=ep.headers, json=body) as resp:
                if resp.status_code >= 400:
                    raise self._http_error(resp.status_code, resp.headers, resp.read())
                for chunk in resp.iter_bytes():
                    parser.feed(chunk)
        except httpx.HTTPError as exc:
            raise self._network_error(exc) from None
        parser.close()
        return parser.turn

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
                 client: httpx.AsyncClient | None = None) -> None:
        super().__init__(provider, model=model, base_url=base_url, api_key=api_key, stream=stream, timeout=timeout)
        self._client = client or httpx.AsyncClient(timeout=self.timeout)
        self._own = client is None

    async def request(self, body: dict[str, Any]) -> Turn:
        ep = self._endpoint
        parser = self._parser()
        try:
            async with self._client.stream(ep.method, ep.url, headers=ep.headers, json=body) as resp:
                if resp.status_code >= 400:
                    raise self._http_error(resp.status_code, resp.headers, await resp.aread())
                async for chunk in resp.aiter_bytes():
                    parser.feed(chunk)
        except httpx.HTTPError as exc:
            raise self._network_error(exc) from None
        parser.close()
        return parser.turn

    async def aclose(self) -> None:
        if self._own:
            await self._client.aclose()

    async def __aenter__(self) -> "AsyncHTTPTransport":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
