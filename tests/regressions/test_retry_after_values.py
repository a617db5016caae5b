"""``Retry-After`` is read as RFC 9110 writes it: ``delay-seconds`` (ASCII digits only) or an HTTP-date.

``float()`` took "1_0", digits of other scripts ("١٠", "１０"), "infinity", "+5" and "5.0" as delays: a garbled
header turned into a wait, or into "do not retry". Anything that is not digits or an HTTP-date is now ignored (the
policy's own backoff applies); ``retry-after-ms`` takes ASCII decimals only. A wait that would end past the
deadline is not started: the fallback comes at once.
"""

from __future__ import annotations

import asyncio
import email.utils
import re
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, strategies as st

from toolwire.codecs.requests import parse_error
from toolwire.harness import AsyncToolLoop, LoopResult, RetryPolicy, ToolLoop
from toolwire.harness.demo_tools import DemoWorld
from toolwire.sim import SCENARIOS, Fault, SimProvider

from ..dialects import SIMULATED as PROVIDERS

MODES = ["sync", "async"]
WEATHER = SCENARIOS["provider_down"].prompts["en"]
WEATHER_TEXT = "I can't check the weather: I have no weather tool."
_DATE = re.compile(r"(Mon|Tue|Wed|Thu|Fri|Sat|Sun), [0-9]{2} [A-Z][a-z]{2} [0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2} GMT")


def delay(value: str, header: str = "retry-after") -> float | None:
    return parse_error("openai-chat", 429, {header: value}, b"").retry_after


# ---- the header alone ---------------------------------------------------------------------------------------------

@given(st.text())
def test_only_digits_or_an_http_date_give_a_delay(value):
    """Any text: a delay only for ASCII digits (their value) or an HTTP-date; never an exception."""
    got = delay(value)
    bare = value.strip(" \t")
    if re.fullmatch(r"[0-9]{1,12}", bare, re.ASCII):
        assert got == float(int(bare))
    elif got is not None:
        assert re.fullmatch(r"[0-9]+", bare, re.ASCII) or _DATE.search(bare) or "-" in bare or \
            re.search(r"[A-Z][a-z]{2} [ 0-9][0-9] ", bare), value
        assert got >= 0


@given(st.integers(min_value=0, max_value=10**40))
def test_digits_are_read_as_whole_seconds(n):
    got = delay(str(n))
    assert got is not None and got >= min(n, 10**9)


@given(st.from_regex(r"\A[+-]?[0-9_]{0,3}([._eE][0-9]{1,3})?\Z")
       | st.sampled_from(["infinity", "Infinity", "-inf", "nan", "NaN", "1_0", "١٠", "１０", "٣", "+5", "5.0",
                          "0x10", "1e3", "-0", "5 5", "", " "]))
def test_what_float_takes_and_rfc_9110_does_not_is_ignored(value):
    if re.fullmatch(r"[0-9]+", value.strip(" \t"), re.ASCII):
        return
    assert delay(value) is None


@given(st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2200, 1, 1)))
def test_an_imf_fixdate_is_read_as_the_time_until_it(when):
    when = when.replace(microsecond=0, tzinfo=timezone.utc)
    got = delay(email.utils.format_datetime(when, usegmt=True))
    expected = max(0.0, (when - datetime.now(timezone.utc)).total_seconds())
    assert got is not None and abs(got - expected) < 120


@pytest.mark.parametrize("value", ["Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
                                   "Sun, 06 Nov 1994 08:49:37 GMT"])
def test_the_obsolete_date_forms_are_read_too(value):
    assert delay(value) == 0.0  # in the past: no wait


@given(st.text(alphabet="0123456789.", max_size=12) | st.sampled_from(["infinity", "nan", "1_000", "١٠٠", "1e3",
                                                                       "-5", "+5"]))
def test_retry_after_ms_takes_ascii_decimals_only(value):
    got = delay(value, "retry-after-ms")
    if re.fullmatch(r"[0-9]+(\.[0-9]+)?", value, re.ASCII):
        assert got == pytest.approx(float(value) / 1000.0)
    else:
        assert got is None


# ---- through the loop ---------------------------------------------------------------------------------------------

@pytest.fixture
def sim():
    provider = SimProvider(seed=3)
    with provider.serve():
        yield provider


def run(sim: SimProvider, provider: str, mode: str, retry: RetryPolicy) -> LoopResult:
    kw: dict[str, Any] = dict(model="sim-model", registry=DemoWorld().registry(), base_url=sim.base_url,
                              api_key="sk-test", retry=retry, timeout=5.0)
    if mode == "sync":
        with ToolLoop(provider, **kw) as loop:
            return loop.run(WEATHER)

    async def go() -> LoopResult:
        async with AsyncToolLoop(provider, **kw) as loop:
            return await loop.run(WEATHER)

    return asyncio.run(go())


def status_429(header: str, value: bytes) -> Fault:
    body = b'{"error": {"type": "rate_limit_error", "message": "slow down"}}'
    return Fault.wire(b"HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\n" + header.encode()
                      + b": " + value + b"\r\ncontent-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


GARBLED = [("retry-after", v) for v in ("1_0", "١٠", "１０", "infinity", "+30", "30.0", "1e400")] + \
          [("retry-after-ms", "infinity")]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("header,value", GARBLED, ids=[f"{h}={v}" for h, v in GARBLED])
def test_a_retry_after_that_is_no_rfc_value_is_ignored(sim, header, value, provider, mode):
    """A value float() would have taken as a long (or endless) wait is ignored: the policy's backoff, then the
    answer."""
    sim.plan([status_429(header, value.encode()), Fault.ok()])
    result = run(sim, provider, mode, RetryPolicy(attempts=3, deadline=20.0, initial=0.01, max_backoff=0.05,
                                                  max_hint=2.0))
    assert not result.fallback and result.answer == WEATHER_TEXT
    assert len(sim.requests) == 2


def _in(seconds: int) -> bytes:
    when = datetime.now(timezone.utc) + timedelta(seconds=seconds)
    return email.utils.format_datetime(when.replace(microsecond=0), usegmt=True).encode()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("value", [b"30", "date"], ids=["seconds", "date"])
def test_a_wait_past_the_deadline_is_not_started(sim, value, mode):
    """The server asks for 30 s, within max_hint, but the deadline is 3 s away: no wait, the fallback at once
    (it used to sleep the 30 s and send the request again)."""
    sim.plan([status_429("retry-after", _in(30) if value == "date" else value), Fault.ok()])
    started = time.monotonic()
    result = run(sim, "anthropic", mode, RetryPolicy(attempts=3, deadline=3.0, initial=0.01, max_hint=60.0))
    assert result.fallback
    assert len(sim.requests) == 1
    assert time.monotonic() - started < 3.0 + 15.0
