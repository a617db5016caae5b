"""Requests and HTTP errors: endpoints, auth headers, request bodies, request options, error bodies.

Each dialect's ``HTTP`` part (its ``Dialect`` record's ``http``, written in its module under ``codecs/http/``)
knows its own; this module holds the interface with its defaults and the functions the harness calls with a
dialect id (``endpoint``, ``request_body``, ``options_fragment``, ``parse_error``, ``user_message``). What a
transport needs to talk to a provider, as data and small functions: no I/O here (``toolwire.harness`` sends the
requests). Field names stay in ``codecs/``.
"""

from __future__ import annotations

import base64
import copy
import os
import re
import time
import urllib.parse
from collections.abc import Callable
from typing import Any, ClassVar, Mapping

import msgspec

from ..errors import UsageError
from .capabilities import Capabilities, capabilities_for

__all__ = ["Endpoint", "HTTP", "endpoint", "request_body", "user_message", "add_user", "parse_error", "ProviderErrorInfo",
           "options_fragment", "merge_body", "body_conflicts", "read_error", "http_part", "REASONING_EFFORTS",
           "MAX_TEMPERATURE", "API_KEY_ENV", "BASE_URL_ENV", "DEFAULT_BASE_URL"]


def __getattr__(name: str) -> Any:
    """The per-dialect tables of earlier versions, derived from the registry's ``HTTP`` parts."""
    tables: dict[str, Callable[[HTTP], Any]] = {
        "API_KEY_ENV": lambda h: h.api_key_env,
        "BASE_URL_ENV": lambda h: h.base_url_env,
        "DEFAULT_BASE_URL": lambda h: h.default_base_url,
        "REASONING_EFFORTS": lambda h: h.reasoning_efforts,
    }
    if name in tables:
        return {d.id: tables[name](d.http) for d in _http_dialects()}
    if name == "MAX_TEMPERATURE":
        return {d.id: d.http.max_temperature for d in _http_dialects() if d.http.max_temperature is not None}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _http_dialects() -> Any:
    from . import dialects_with

    return dialects_with("http")


def http_part(dialect: str) -> HTTP:
    """The ``HTTP`` part of ``dialect``. Raises ``UsageError`` for an unknown dialect or one the harness cannot
    call (a record without an HTTP part)."""
    from . import dialect_for

    capabilities_for(dialect)  # an unknown dialect: the same error as before
    part = dialect_for(dialect).http
    if part is None:
        raise UsageError(f"{dialect} has no HTTP part: toolwire can parse, declare and answer it, not call it")
    return part


class Endpoint(msgspec.Struct, frozen=True, kw_only=True):
    """Where and how to send one request. ``headers`` hold the API key: never log them."""

    method: str
    url: str
    headers: dict[str, str]
    stream: bool


def endpoint(dialect: str, *, model: str, stream: bool = True, base_url: str | None = None,
             api_key: str | None = None) -> Endpoint:
    """The endpoint of one model request. ``base_url`` overrides the provider's (or the ``*_BASE_URL``
    environment variable); the key comes from ``api_key`` or the usual environment variable. Raises
    ``UsageError`` for an unknown dialect or a missing key."""
    return http_part(dialect).endpoint(model=model, stream=stream, base_url=base_url, api_key=api_key)


def user_message(dialect: str, text: str, *, alone: bool = True) -> Any:
    """The history entry (message, input item or content) that says ``text`` as the user. ``alone``: False when
    other input goes with it (Interactions then take a text content, not the bare string)."""
    from . import dialect_for

    return dialect_for(dialect).results.user_message(text, alone=alone)


def add_user(dialect: str, history: list[Any], text: str, *, alone: bool = True) -> None:
    """Add the user's ``text`` to the end of ``history`` (in place) as ``dialect`` takes it: a new user entry, or
    the text added to a trailing user message where the dialect's roles must alternate."""
    from . import dialect_for

    dialect_for(dialect).results.add_user(history, text, alone=alone)


def options_fragment(dialect: str, *, temperature: float | None = None,
                     reasoning_effort: str | None = None) -> dict[str, Any]:
    """The request fields for a sampling ``temperature`` and a ``reasoning_effort`` in ``dialect``'s own place
    (see ``REASONING_EFFORTS``); empty when both are None. Raises ``UsageError`` for a value the dialect does not
    accept (a temperature out of its range, an effort it does not document): nothing is changed silently."""
    return http_part(dialect).options(temperature=temperature, reasoning_effort=reasoning_effort)


def merge_body(body: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``extra`` into ``body`` in place and return it: an object merges with the object already there, key
    by key; any other value replaces (``body_conflicts`` finds where that would happen)."""
    for key, value in extra.items():
        here = body.get(key)
        if isinstance(here, dict) and isinstance(value, Mapping):
            body[key] = merge_body(dict(here), value)
        else:
            body[key] = copy.deepcopy(value)
    return body


def body_conflicts(body: Mapping[str, Any], extra: Mapping[str, Any], path: str = "") -> list[str]:
    """The paths (``a.b``) where ``merge_body(body, extra)`` would replace a value ``body`` already has with
    another one."""
    found: list[str] = []
    for key, value in extra.items():
        if key not in body:
            continue
        here, where = body[key], f"{path}{key}"
        if isinstance(here, Mapping) and isinstance(value, Mapping):
            found.extend(body_conflicts(here, value, where + "."))
        elif here != value:
            found.append(where)
    return found


def request_body(dialect: str, *, model: str, history: list[Any], tools_fragment: Mapping[str, Any] | None,
                 stream: bool = True, system: str | None = None, max_tokens: int = 1024,
                 previous_id: str | None = None, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The JSON body of one request: ``history`` in the dialect's own format (messages, input items or
    contents), ``tools_fragment`` from ``toolwire.codecs.declare.declare(...).fragment``, then ``extra`` (request
    options from ``options_fragment``, the application's own fields) merged in with ``merge_body``."""
    from . import dialect_for

    try:
        record = dialect_for(dialect)
    except UsageError:
        raise UsageError(f"unknown dialect {dialect!r}") from None
    if record.http is None:
        raise UsageError(f"unknown dialect {dialect!r}")
    body = record.http.body(model=model, history=history, tools_fragment=dict(tools_fragment or {}), stream=stream,
                            system=system, max_tokens=max_tokens, previous_id=previous_id)
    return merge_body(body, extra) if extra else body


class ProviderErrorInfo(msgspec.Struct, kw_only=True):
    """What an HTTP error response says: ``transient`` decides a retry, ``retry_after`` (seconds) the wait."""

    status: int
    type: str
    message: str
    transient: bool
    retry_after: float | None = None


_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+)s\s*$")
#: RFC 9110 ``delay-seconds`` (``1*DIGIT``), and the decimal milliseconds of ``retry-after-ms``: ASCII only
_SECONDS = re.compile(r"[0-9]+", re.ASCII)
_MILLIS = re.compile(r"[0-9]{1,15}(?:\.[0-9]{1,15})?", re.ASCII)
#: more digits than this are a wait no policy honours: read as this many seconds (over any ``max_hint``)
_LONGEST = 10 ** 12
_MONTHS = {m: i + 1 for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct",
                                           "Nov", "Dec"))}
_DAY = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
_MON = r"(?P<mon>Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_TIME = r"(?P<h>[0-9]{2}):(?P<m>[0-9]{2}):(?P<s>[0-9]{2})"
#: RFC 9110 HTTP-date: IMF-fixdate, then the obsolete rfc850-date and asctime-date a recipient must accept
_HTTP_DATES = (
    re.compile(rf"{_DAY}, (?P<d>[0-9]{{2}}) {_MON} (?P<y>[0-9]{{4}}) {_TIME} GMT", re.ASCII),
    re.compile(r"(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), "
               rf"(?P<d>[0-9]{{2}})-{_MON}-(?P<y>[0-9]{{2}}) {_TIME} GMT", re.ASCII),
    re.compile(rf"{_DAY} {_MON} (?P<d>[ 0-9][0-9]) {_TIME} (?P<y>[0-9]{{4}})", re.ASCII),
)


def _http_date(text: str) -> float | None:
    """Seconds from now until the RFC 9110 HTTP-date ``text`` (0 for one in the past), or None."""
    import datetime

    for form in _HTTP_DATES:
        m = form.fullmatch(text)
        if m is None:
            continue
        year = int(m["y"])
        if len(m["y"]) == 2:  # rfc850: a year more than 50 years ahead is the last one past with those digits
            now_year = datetime.datetime.now(datetime.timezone.utc).year
            year += now_year - now_year % 100
            if year > now_year + 50:
                year -= 100
        try:
            when = datetime.datetime(year, _MONTHS[m["mon"]], int(m["d"]), int(m["h"]), int(m["m"]),
                                     min(int(m["s"]), 59), tzinfo=datetime.timezone.utc)
        except ValueError:  # the 31st of February, hour 25, year 0
            return None
        return max(0.0, when.timestamp() - time.time())
    return None


def _header_delay(headers: Mapping[str, str]) -> float | None:
    """The wait a response asks for: ``retry-after-ms`` (ASCII decimal milliseconds), else ``Retry-After`` as RFC
    9110 has it (``delay-seconds``, ASCII digits only, or an HTTP-date). Anything else (a sign, a fraction,
    an exponent, ``1_0``, digits of another script, ``infinity``) is no delay: the retry policy's own backoff
    applies."""
    low = {k.lower(): v for k, v in headers.items()}
    ms = low.get("retry-after-ms")
    if isinstance(ms, str) and _MILLIS.fullmatch(ms.strip(" \t")):
        return float(ms.strip(" \t")) / 1000.0
    ra = low.get("retry-after")
    if not isinstance(ra, str):
        return None
    ra = ra.strip(" \t")
    if _SECONDS.fullmatch(ra):
        digits = ra.lstrip("0") or "0"
        return float(_LONGEST if len(digits) > 12 else int(digits))
    return _http_date(ra)


def _body_delay(body: Any) -> float | None:
    """Gemini's ``RetryInfo.retryDelay`` ("37s", "1.5s") in ``error.details``."""
    err = body.get("error") if isinstance(body, dict) else None
    details = err.get("details") if isinstance(err, dict) else None
    if isinstance(details, list):
        for d in details:
            if isinstance(d, dict) and str(d.get("@type", "")).endswith("google.rpc.RetryInfo"):
                m = _DURATION.match(str(d.get("retryDelay", "")))
                if m:
                    return float(m.group(1))
    return None


def parse_error(dialect: str, status: int, headers: Mapping[str, str], body: bytes) -> ProviderErrorInfo:
    """Classify an HTTP error response of ``dialect``: transient (retry) or permanent (fail fast), and how
    long the server asked to wait (``retry-after-ms``, ``retry-after``, Gemini ``RetryInfo``)."""
    from . import dialect_for

    cap = capabilities_for(dialect)
    part = dialect_for(dialect).http
    if part is None:
        return read_error(cap, status, headers, body)
    return part.parse_error(cap, status, headers, body)


def read_error(cap: Capabilities, status: int, headers: Mapping[str, str], body: bytes) -> ProviderErrorInfo:
    """The default reading of an error response (``HTTP.parse_error``): the type and message of an ``error``
    object (or of a body whose ``object`` is ``error``), the statuses the capabilities record says are transient
    (and any 5xx it does not call permanent), a 429 for a spent quota permanent, ``x-should-retry`` deciding when
    present, and the delay from ``retry-after-ms``, ``retry-after`` or a ``google.rpc.RetryInfo`` detail."""
    try:
        doc = msgspec.json.decode(body) if body else None
    except msgspec.DecodeError:
        doc = None
    if isinstance(doc, list) and len(doc) == 1:
        doc = doc[0]  # Gemini's array stream wraps errors
    etype, message = f"http_{status}", ""
    code = None
    if isinstance(doc, dict):
        err = doc.get("error")
        if isinstance(err, dict):
            etype = str(err.get("type") or err.get("status") or etype)
            message = str(err.get("message") or "")
            code = err.get("code")
        elif doc.get("object") == "error":
            etype = str(doc.get("type") or etype)
            message = str(doc.get("message") or "")
    transient = status in cap.transient_statuses or (status >= 500 and status not in cap.permanent_statuses)
    # quota that will not come back by waiting
    text = f"{etype} {code} {message}".lower()
    if status == 429 and ("insufficient_quota" in text or "spend_limit" in text or "perday" in text.replace(" ", "")):
        transient = False
    header = {k.lower(): v for k, v in headers.items()}
    should = header.get("x-should-retry")
    if should in ("true", "false"):
        transient = should == "true"
    delay = _header_delay(headers)
    if delay is None:
        delay = _body_delay(doc)
    return ProviderErrorInfo(status=status, type=etype, message=message[:500], transient=transient,
                             retry_after=delay)


# ---- the HTTP part of a dialect record ---------------------------------------------------------------------------
_FieldRule = tuple[tuple[str, ...], str, str]


#: the longest base URL accepted (a longer one is a configuration mistake, not an address)
MAX_BASE_URL = 2048
_LIKE = "like 'http://127.0.0.1:8080' or 'https://host/prefix'"


def checked_base_url(url: Any, source: str, *, key_in_authorization: str | None = None) -> str:
    """``url`` when it is an absolute http(s) URL with a host (a path prefix allowed); else a ``UsageError``
    naming ``source`` (``base_url`` or the environment variable it came from). Nothing of the URL is repeated in
    the message: it may carry credentials. ``key_in_authorization`` (a dialect's name) refuses user info
    (``user:password@``): that dialect's key or signature is the ``Authorization`` header, which Basic
    credentials would replace."""
    if not isinstance(url, str):
        raise UsageError(f"{source} must be a string (an http:// or https:// URL), got {type(url).__name__}")
    if not url:
        raise UsageError(f"{source} is empty: give an http:// or https:// URL, or None for the provider's own")
    if len(url) > MAX_BASE_URL:
        raise UsageError(f"{source} is longer than {MAX_BASE_URL} characters")
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        raise UsageError(f"{source} must be an http:// or https:// URL: it contains white space or control "
                         "characters")
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port  # a port that is no number, or out of range, raises here
        host = parts.hostname
    except ValueError:  # its text may quote the URL's user info or host: not repeated
        raise UsageError(f"{source} is not a URL whose host and port can be read ({_LIKE})") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise UsageError(f"{source} must be an http:// or https:// URL ({_LIKE})")
    if not host or not host.strip(".") or "%" in host or port == 0:
        raise UsageError(f"{source} must name a host (and a port from 1 to 65535, when it has one), {_LIKE}")
    try:
        host.encode("idna")
    except UnicodeError:
        raise UsageError(f"{source} has a host that is no valid DNS name or IP address") from None
    if key_in_authorization is not None and "@" in parts.netloc:
        raise UsageError(f"{source} must not carry user info (user:password@): {key_in_authorization} sends its "
                         "key (or signature) in the Authorization header, which Basic credentials would replace. Give the URL "
                         "without them; a proxy that needs credentials takes them from HTTPS_PROXY or HTTP_PROXY "
                         "(http://user:password@proxy:port)")
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        raise UsageError(f"{source} must not carry a query or a fragment: the request's path is added after it")
    try:
        import httpx

        httpx.URL(url)
    except Exception:  # noqa: BLE001 - whatever the HTTP client refuses: its message may quote the URL
        raise UsageError(f"{source} is not a URL the HTTP client can use ({_LIKE})") from None
    return url


def without_user_info(url: str) -> tuple[str, str | None]:
    """``url`` without the ``user:password@`` of its authority, and the ``Authorization`` header value those
    credentials make (``Basic`` base64 of ``user:password``, percent-escapes undone), or None without them.

    The URL handed to the HTTP client never carries them (httpx prints its requests' URLs in its own log). The
    password, ``user:password`` and the header's base64 are registered with the log scrubber."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, host = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    plain = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}"
    token = base64.b64encode(plain.encode("utf-8")).decode("ascii")
    from .. import _log

    for secret in (password, urllib.parse.unquote(password), userinfo, plain, token):
        _log.add_secret(secret)
    return urllib.parse.urlunsplit(parts._replace(netloc=host)), f"Basic {token}"


class HTTP:
    """How to call one dialect's API over HTTP: the ``http`` part of its ``Dialect`` record.

    A dialect sets the class attributes and implements ``url``, ``auth_headers`` and ``body``; the rest has
    defaults:

    * ``api_key_env`` (the environment variables a key is read from, in order), ``base_url_env`` (the one that
      overrides ``default_base_url``);
    * ``url(base, model=, stream=)``: the request URL under ``base``; ``auth_headers(key)``: the headers that carry
      the key (they are never logged, and their values are scrubbed from every log: ``secret_headers`` names
      them); ``endpoint`` puts both together with the content type (and ``accept: text/event-stream`` for a
      streamed request whose framing is SSE);
    * request signing, for an API that authenticates each request by a signature over its bytes rather than (or
      besides) a key: ``sign(method, url, headers, body)`` returns the headers to send with ``body``, the exact
      bytes that are sent (default: ``headers`` unchanged). The transports call it for every attempt, a retry
      included, after the body is serialised, so a signature that carries a timestamp is always fresh.
      ``api_key(api_key)`` returns None when the part will authenticate by signing without a key (the default
      raises ``UsageError`` without one; ``endpoint`` then adds no ``auth_headers``); ``secrets()`` names the
      values the signing uses that must never reach a log (a secret key, a session token), which the transports
      register with the log scrubber each time they sign;
    * ``body(model=, history=, tools_fragment=, stream=, system=, max_tokens=, previous_id=)``: the JSON body of
      one request: the history as the dialect's own list, the system prompt in its place, the tools fragment
      from ``declare`` merged in (``merge_body``: the tools and the choice may sit in a configuration object of
      the body);
    * ``keeps_history``: the server keeps the conversation (``previous_id`` names the last response), so a
      request carries only what is new, the results of the last turn: the loop sends the answers alone and does
      not repair a history it is given;
    * ``reasoning_efforts`` and ``max_temperature`` (None: the request has no temperature field), and
      ``option_fields(temperature, reasoning_effort)``, which puts valid values where the dialect takes them
      (``options`` checks them first);
    * ``parse_error(cap, status, headers, body)``: an HTTP error response classified (default ``read_error``);
    * ``response_id(headers)``: the provider's id of a response, read from its HTTP headers, for an API whose body
      carries none (default None): the transports put it in ``Turn.request_id``, and the harness loop identifies
      a turn by it when the body gives no response id;
    * for the tracing conventions (``toolwire.codecs.telemetry``): ``operation_name`` (``gen_ai.operation.name``),
      ``provider_name`` (``gen_ai.provider.name`` when the host is none the conventions name), ``span_attributes``
      (more attributes of an inference span) and ``request_fields`` (where the request parameters live: a path of
      keys, the conventions' attribute, and its kind, ``double``, ``int`` or ``strings``).

    The framing of a streamed response is the codec's (``Codec.framing``): the transport asks the parser for it.
    """

    api_key_env: ClassVar[tuple[str, ...]]
    base_url_env: ClassVar[str]
    default_base_url: ClassVar[str]
    #: headers whose values are secrets (scrubbed from logs)
    secret_headers: ClassVar[tuple[str, ...]] = ("authorization",)
    keeps_history: ClassVar[bool] = False
    reasoning_efforts: ClassVar[tuple[str, ...]] = ()
    max_temperature: ClassVar[float | None] = 2.0
    operation_name: ClassVar[str] = "chat"
    provider_name: ClassVar[str]
    span_attributes: ClassVar[Mapping[str, str]] = {}
    request_fields: ClassVar[tuple[_FieldRule, ...]] = ()

    def __init__(self, dialect: str) -> None:
        self.dialect = dialect

    # ---- the endpoint ----------------------------------------------------------------------------------------
    def url(self, base: str, *, model: str, stream: bool) -> str:
        """The URL of one request under ``base`` (no trailing slash)."""
        raise NotImplementedError

    def auth_headers(self, key: str) -> dict[str, str]:
        """The headers that carry the API key."""
        raise NotImplementedError

    def api_key(self, api_key: str | None) -> str | None:
        """``api_key``, else the first of ``api_key_env`` that is set. Raises ``UsageError`` without one (a part
        that authenticates by signing returns None instead)."""
        if api_key:
            return api_key
        for name in self.api_key_env:
            value = os.environ.get(name)
            if value:
                return value
        raise UsageError(f"no API key for {self.dialect}: pass api_key= or set {' or '.join(self.api_key_env)}")

    def endpoint(self, *, model: str, stream: bool = True, base_url: str | None = None,
                 api_key: str | None = None) -> Endpoint:
        """Where and how to send one request (see ``toolwire.codecs.requests.endpoint``)."""
        from . import dialect_for

        from_env = os.environ.get(self.base_url_env, "").strip()
        refuse = self.dialect if "authorization" in self.secret_headers else None
        if base_url is not None:
            base = checked_base_url(base_url, "base_url", key_in_authorization=refuse)
        elif from_env:
            base = checked_base_url(from_env, self.base_url_env, key_in_authorization=refuse)
        else:
            base = self.default_base_url
        base, basic = without_user_info(base.rstrip("/"))
        key = self.api_key(api_key)
        headers = {"content-type": "application/json", "user-agent": "toolwire"}
        if stream and dialect_for(self.dialect).codec.framing.name == "sse":
            headers["accept"] = "text/event-stream"
        if basic is not None:
            headers["authorization"] = basic
        if key is not None:
            headers.update(self.auth_headers(key))
        return Endpoint(method="POST", url=self.url(base, model=model, stream=stream), headers=headers,
                        stream=stream)

    # ---- signing ---------------------------------------------------------------------------------------------
    def sign(self, method: str, url: str, headers: dict[str, str], body: bytes) -> dict[str, str]:
        """The headers to send with ``body`` (the exact bytes of the request) to ``url``: ``headers`` with the
        request's signature added. Called for every attempt. Default: ``headers`` unchanged."""
        return headers

    def secrets(self) -> tuple[str, ...]:
        """Values the signing uses that must never be logged (scrubbed from every log event). Default: none."""
        return ()

    # ---- the body --------------------------------------------------------------------------------------------
    def body(self, *, model: str, history: list[Any], tools_fragment: dict[str, Any], stream: bool,
             system: str | None, max_tokens: int, previous_id: str | None) -> dict[str, Any]:
        """The JSON body of one request (see the class docstring)."""
        raise NotImplementedError

    # ---- request options -------------------------------------------------------------------------------------
    def options(self, *, temperature: float | None = None, reasoning_effort: str | None = None) -> dict[str, Any]:
        """The fields for ``temperature`` and ``reasoning_effort`` (``options_fragment``), checked first."""
        if temperature is not None:
            top = self.max_temperature
            if top is None:
                raise UsageError(f"{self.dialect} requests have no temperature field; a model that takes one gets it "
                                 "through extra_body")
            if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) \
                    or not 0.0 <= temperature <= top:
                raise UsageError(f"temperature must be a number from 0 to {top:g} for {self.dialect}, got "
                                 f"{temperature!r}")
        if reasoning_effort is not None and reasoning_effort not in self.reasoning_efforts:
            raise UsageError(f"reasoning_effort {reasoning_effort!r} is not a value {self.dialect} accepts; expected "
                             f"one of: {', '.join(self.reasoning_efforts)}")
        out: dict[str, Any] = {}
        for fields in self.option_fields(temperature, reasoning_effort):
            merge_body(out, fields)
        return out

    def option_fields(self, temperature: float | None, reasoning_effort: str | None) -> list[dict[str, Any]]:
        """The request fields for the (valid) options that are not None, in order (default: top-level
        ``temperature``; a dialect with reasoning efforts places them)."""
        return [{"temperature": temperature}] if temperature is not None else []

    # ---- the response ----------------------------------------------------------------------------------------
    def response_id(self, headers: Mapping[str, str]) -> str | None:
        """The provider's id of a successful response, from its HTTP headers (``headers`` is case-insensitive
        when it is ``httpx.Headers``; a part should not rely on that). Default: None (the body carries the id)."""
        return None

    # ---- errors ----------------------------------------------------------------------------------------------
    def parse_error(self, cap: Capabilities, status: int, headers: Mapping[str, str], body: bytes
                    ) -> ProviderErrorInfo:
        """An HTTP error response classified (default: ``read_error``)."""
        return read_error(cap, status, headers, body)
