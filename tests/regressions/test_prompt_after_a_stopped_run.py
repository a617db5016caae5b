"""The prompt after a run that stopped once its results were in the history (docs/failure-modes.md 52).

A callback raising on ``CallAnswered`` stops the run after the whole turn was dispatched: the history then ends
with the tool results, a user message in the dialects whose results are blocks of one. The next prompt was
appended as a second user message in a row, which a provider whose roles must alternate refuses ("A conversation
must alternate between user and assistant roles"), in every later request: the user got only the fallback.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from toolwire import Registry, Tool
from toolwire.harness import AsyncToolLoop, CallAnswered, RetryPolicy, ToolLoop
from toolwire.sim import SimProvider

from ..dialects import SIMULATED

FAST = RetryPolicy(attempts=3, deadline=20.0, initial=0.01, max_backoff=0.05, max_hint=2.0)


class UIBroke(Exception):
    pass


def lookup_demo_value(key: str) -> str:
    """Look up one of the user's stored values: height or weight."""
    return "marker-170-cm"


def stop_on_answer(event: Any) -> None:
    if isinstance(event, CallAnswered):
        raise UIBroke("ui down")


def two_prompts(provider: str, url: str, mode: str) -> Any:
    """The first prompt's run stopped by the callback on its result, then the next prompt on the same loop."""
    kw = dict(model="m", registry=Registry([Tool.from_function(lookup_demo_value, effect="read")]), base_url=url,
              api_key="sim-key", retry=FAST, timeout=10.0)
    if mode == "sync":
        with ToolLoop(provider, **kw) as loop:
            with pytest.raises(UIBroke):
                loop.run("How tall am I?", on_event=stop_on_answer)
            return loop.run("And how tall was I?")

    async def main() -> Any:
        async with AsyncToolLoop(provider, **kw) as loop:
            with pytest.raises(UIBroke):
                await loop.run("How tall am I?", on_event=stop_on_answer)
            return await loop.run("And how tall was I?")

    return asyncio.run(main())


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("provider", SIMULATED)  # the loop runs against the simulated provider
def test_the_prompt_after_a_run_stopped_on_its_results_is_accepted(provider, mode):
    """The next prompt reaches the provider in a history it accepts (the results and the prompt, no refused
    request), and the model answers."""
    sim = SimProvider(seed=5)
    with sim.serve() as url:
        result = two_prompts(provider, url, mode)
    assert [r.status for r in sim.requests if r.dialect == provider][:2] == [200, 200], \
        [r.error for r in sim.requests]
    follow_up = sim.requests[1].body
    assert "marker-170-cm" in json.dumps(follow_up) and "And how tall was I?" in json.dumps(follow_up)
    assert not result.fallback, result.reason
