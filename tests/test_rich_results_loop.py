"""The loop end to end with rich results: ``ToolLoop`` and ``AsyncToolLoop`` over loopback HTTP against the
simulated provider, in every dialect, with a handler that answers with an image and structured JSON; the request
the simulator records carries the image where the provider takes it (described in words where it does not), and
a ToolError reaches the model as an error and the model still answers."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest

from toolwire import Content, ImagePart, Registry, TextPart, Tool, ToolError
from toolwire.harness import AsyncToolLoop, RetryPolicy, ToolLoop
from toolwire.sim import SimProvider

from .dialects import SIMULATED as PROVIDERS  # the loop runs against the simulated provider
from .dialects import adapter
from .rich import NATIVE, PNG, media_of

FAST = RetryPolicy(attempts=3, deadline=20.0, initial=0.01, max_backoff=0.05, max_hint=2.0)


@pytest.fixture
def sim():
    provider = SimProvider(seed=11)
    with provider.serve() as base_url:
        provider.base_url = base_url
        yield provider


def lookup_demo_value(key: str) -> Content:
    """Look up one of the user's stored values, with a picture of it."""
    return Content(parts=[ImagePart(data=PNG, mime_type="image/png")],
                   structured={"key": key, "value": {"height": "170 cm"}.get(key)})


def answers_sent(provider: str, body: dict[str, Any]) -> list[Any]:
    """The tool results in a recorded request body, in the shape ``encode_results`` gives them."""
    return adapter(provider).results_in(body)


def run_loop(sim: SimProvider, provider: str, mode: str, registry: Registry, prompt: str) -> Any:
    kw = dict(model="sim-model", registry=registry, base_url=sim.base_url, api_key="sim-key", retry=FAST,
              timeout=10.0)
    if mode == "sync":
        with ToolLoop(provider, **kw) as loop:
            return loop.run(prompt)

    async def main() -> Any:
        async with AsyncToolLoop(provider, **kw) as loop:
            return await loop.run(prompt)

    return asyncio.run(main())


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_image_a_handler_returns_reaches_the_provider_where_it_is_taken(sim, provider, mode):
    """The follow-up request holds the image natively (Anthropic image block, Responses input_image, Gemini
    inlineData, Interactions image item) or its description (Chat), and the model answers from the structured
    JSON."""
    registry = Registry([Tool.from_function(lookup_demo_value, effect="read")])
    result = run_loop(sim, provider, mode, registry, "How tall am I?")
    assert not result.fallback and "170 cm" in result.answer
    assert [c.result_kind for c in result.calls] == ["ok"]
    first, follow_up = (r for r in sim.requests if r.dialect == provider)
    sent = answers_sent(provider, follow_up.body)
    assert sent
    assert media_of(provider, sent) == NATIVE[provider].get("image", [])
    if provider == "openai-chat":
        assert "[image: image/png, 70 bytes" in sent[0]["content"] and PNG not in sent[0]["content"]
    else:
        assert media_of(provider, sent) == [("image/png", PNG)]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_tool_error_reaches_the_model_as_an_error(sim, provider, mode):
    """A handler raising ToolError: the call is tool_error, the model reads it as an error and answers."""
    def lookup_demo_value(key: str) -> Any:
        """Look up one of the user's stored values."""
        raise ToolError(Content(parts=[TextPart(text="Error: the store has no such value.")]))

    registry = Registry([Tool.from_function(lookup_demo_value, effect="read")])
    result = run_loop(sim, provider, mode, registry, "How tall am I?")
    assert [c.result_kind for c in result.calls] == ["tool_error"]
    assert not result.fallback and "170 cm" not in result.answer
    follow_up = [r for r in sim.requests if r.dialect == provider][1]
    sent = answers_sent(provider, follow_up.body)
    assert "the store has no such value" in str(sent)


@pytest.mark.parametrize("provider", [p for p in PROVIDERS if p != "openai-chat"])
def test_the_simulator_refuses_media_the_provider_would_refuse(sim, provider):
    """The recorded follow-up request, with the image's base64 broken, is refused by the simulator (400, naming
    the data), as the provider refuses it: the loop tests above would catch an encoder sending bad media."""
    import httpx

    registry = Registry([Tool.from_function(lookup_demo_value, effect="read")])
    run_loop(sim, provider, "sync", registry, "How tall am I?")
    follow_up = [r for r in sim.requests if r.dialect == provider][1]
    broken = json.loads(json.dumps(follow_up.body).replace(PNG, "not*base64"))
    headers = {"Authorization": "Bearer sim-key", "x-api-key": "sim-key", "x-goog-api-key": "sim-key",
               "anthropic-version": "2023-06-01"}
    response = httpx.post(sim.base_url.rstrip("/") + follow_up.path, json=broken, headers=headers, timeout=10)
    assert response.status_code == 400, response.text
    assert re.search(r"base64|data URL", response.text, re.I), response.text
