"""Misuse of the loop surface: a second run while one runs, extra_body that is not JSON, an optional ToolContext."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Optional

import pytest

from toolwire import Tool, ToolContext
from toolwire.errors import UsageError
from toolwire.harness import AsyncToolLoop, RequestStarted, RetryPolicy, ToolLoop
from toolwire.harness.demo_tools import DemoWorld
from toolwire.registry.errors import ToolDeclarationError
from toolwire.sim import SCENARIOS, SimProvider

DIALECTS = ("openai-chat", "openai-responses", "anthropic", "gemini", "gemini-interactions")
P = SCENARIOS["height"].prompts["en"]
FAST = RetryPolicy(attempts=2, deadline=5.0, initial=0.01, max_backoff=0.05, max_hint=1.0)


@pytest.fixture
def url():
    sim = SimProvider()
    with sim.serve() as u:
        yield u


@pytest.mark.parametrize("provider", DIALECTS)
def test_extra_body_nan_is_a_usage_error_not_a_raw_valueerror(url, provider):
    """extra_body={'x': nan} passes the constructor's JSON check but every run() raises a bare ValueError."""
    try:
        loop = ToolLoop(provider, model="m", registry=DemoWorld().registry(), base_url=url, api_key="k",
                        retry=FAST, extra_body={"x": math.nan})
    except UsageError:
        return
    with loop, pytest.raises(UsageError):
        loop.run(P)


@pytest.mark.parametrize("provider", DIALECTS)
def test_run_called_from_its_own_on_event_is_refused(url, provider):
    """A run started from the loop's own on_event callback must be a UsageError, not interleave the history."""
    loop = ToolLoop(provider, model="m", registry=DemoWorld().registry(), base_url=url, api_key="k", retry=FAST)
    inner: list[object] = []

    def cb(ev):
        if isinstance(ev, RequestStarted) and ev.step == 1 and not inner:
            try:
                inner.append(loop.run(P))
            except UsageError as exc:
                inner.append(exc)
                raise

    with loop:
        with pytest.raises(UsageError):
            loop.run(P, on_event=cb)
    assert inner and isinstance(inner[0], UsageError), inner


@pytest.mark.parametrize("provider", DIALECTS)
def test_two_concurrent_runs_on_one_async_loop_are_refused(url, provider):
    """Two overlapping AsyncToolLoop.run()s on one loop share its history; the second must be a UsageError."""
    async def main():
        async with AsyncToolLoop(provider, model="m", registry=DemoWorld().registry(), base_url=url,
                                 api_key="k", retry=FAST) as loop:
            return await asyncio.gather(loop.run(P), loop.run(P), return_exceptions=True)

    outcomes = asyncio.run(main())
    assert any(isinstance(o, UsageError) for o in outcomes), outcomes



def _pep604(x: int, ctx: ToolContext | None = None) -> int:
    return x


def _typing_optional(x: int, ctx: Optional[ToolContext] = None) -> int:  # noqa: UP045
    return x


@pytest.mark.parametrize("fn", [_pep604, _typing_optional], ids=["pep604", "typing.Optional"])
def test_an_optional_tool_context_parameter_never_reaches_the_models_schema(fn):
    """`ctx: ToolContext | None = None` is put in the JSON schema as a model-fillable object (a forgeable context)."""
    try:
        tool = Tool.from_function(fn, effect="read")
    except ToolDeclarationError:
        return  # refusing it is fine too
    assert "ctx" not in json.dumps(tool.input_schema), tool.input_schema
