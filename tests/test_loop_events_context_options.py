"""The loop's surface for applications: ``ToolContext`` for handlers, events for user interfaces (``on_event`` and
``AsyncToolLoop.stream``), and request options, in every dialect, sync and async, against ``toolwire.sim`` over
loopback HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import typing
from typing import Annotated, Any

import httpx
import msgspec
import pytest
from pydantic import TypeAdapter

import toolwire
from toolwire import Dispatcher, Registry, Tool, ToolChoice, ToolContext
from .dialects import SIMULATED as PROVIDERS  # the dialects the loop can call on the simulator
from toolwire.harness import (
    AsyncToolLoop,
    CallAnswered,
    LoopFinished,
    RequestStarted,
    ResponseEvent,
    RetryPolicy,
    RetryScheduled,
    ToolLoop,
)
from toolwire.harness.demo_tools import DemoWorld
from toolwire.sim import SCENARIOS, Fault, SimProvider

from .bodies import body as response_body
from .test_loop_e2e import sim  # noqa: F401 - the fixture: a simulated provider of its own for each test

FAST = RetryPolicy(attempts=4, deadline=20.0, initial=0.01, max_backoff=0.05, max_hint=2.0)
MODEL = "sim-model"
MODES = ("sync", "async")
HEIGHT = SCENARIOS["height"].prompts["en"]
RICE = SCENARIOS["rice"].prompts["en"]


def values(key: str) -> dict[str, Any]:
    return {"found": True, "key": key, "value": DemoWorld.values[key]} if key in DemoWorld.values \
        else {"found": False, "key": key}


def make_loop(mode: str, provider: str, sim: SimProvider, registry: Registry, **kw: Any) -> Any:
    cls = ToolLoop if mode == "sync" else AsyncToolLoop
    kw.setdefault("retry", FAST)
    return cls(provider, model=MODEL, registry=registry, base_url=sim.base_url, api_key="k", **kw)


def converse(mode: str, loop: Any, prompt: str, **kw: Any) -> toolwire.harness.LoopResult:
    """``loop.run(prompt, **kw)`` in the loop's own mode (the transport is closed afterwards)."""
    if mode == "sync":
        with loop:
            return loop.run(prompt, **kw)

    async def go() -> Any:
        async with loop:
            return await loop.run(prompt, **kw)

    return asyncio.run(go())


def sent_tools(provider: str, request_body: dict[str, Any]) -> str:
    return json.dumps(request_body.get("tools"))


# ---- ToolContext -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_handler_declaring_tool_context_gets_the_call_and_the_runs_data(sim, provider, mode):
    """The handler's ToolContext names its call, attempt 1, a deadline, and the very object passed as data=."""
    seen: list[ToolContext] = []

    def lookup_demo_value(key: str, call_context: ToolContext) -> dict[str, Any]:
        """Look up a stored demo value (height, weight) by key."""
        seen.append(call_context)
        return values(key)

    async def alookup_demo_value(key: str, call_context: ToolContext) -> dict[str, Any]:
        """Look up a stored demo value (height, weight) by key."""
        seen.append(call_context)
        return values(key)

    handler = lookup_demo_value if mode == "sync" else alookup_demo_value
    tool = Tool.from_function(handler, effect="read", name="lookup_demo_value", timeout=5.0)
    assert "call_context" not in json.dumps(tool.input_schema)
    data = object()
    before = time.monotonic()
    loop = make_loop(mode, provider, sim, Registry([tool]), conversation_id=f"ctx-{provider}")
    result = converse(mode, loop, HEIGHT, data=data)
    assert not result.fallback and "170 cm" in result.answer
    [ctx] = seen
    [answered] = result.steps[0].results
    assert (ctx.conversation_id, ctx.call_id, ctx.local_id, ctx.name, ctx.attempt) == \
        (f"ctx-{provider}", answered.call_id, answered.local_id, "lookup_demo_value", 1)
    assert ctx.data is data
    assert before + 5.0 <= ctx.deadline <= time.monotonic() + 5.0
    assert "call_context" not in sent_tools(provider, sim.requests[0].body)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_read_retries_grow_the_attempt_of_a_schema_tools_context(sim, provider, mode):
    """A from_schema read that fails twice sees attempts 1, 2, 3 (keyword ToolContext) and no deadline without
    a timeout."""
    attempts: list[tuple[int, float | None, Any]] = []

    def search_foods(args: dict[str, Any], *, ctx: ToolContext) -> list[dict[str, Any]]:
        attempts.append((ctx.attempt, ctx.deadline, ctx.data))
        if ctx.attempt < 3:
            raise ConnectionError("catalogue flaky")
        return [{"name": "Arroz blanco (cocido)", "carbohydrate_g_per_100g": 28}]

    schema = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
    registry = Registry([Tool.from_schema("search_foods", schema, search_foods, effect="read", timeout=None)])
    dispatcher = Dispatcher(registry, read_retries=2, backoff=0.0)
    loop = make_loop(mode, provider, sim, registry, dispatcher=dispatcher)
    result = converse(mode, loop, RICE, data={"user": "u-1"})
    assert not result.fallback and "28 g" in result.answer
    assert attempts == [(1, None, {"user": "u-1"}), (2, None, {"user": "u-1"}), (3, None, {"user": "u-1"})]
    assert [c.result_kind for c in result.calls] == ["ok"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", ["openai-responses", "openai-chat"])
def test_a_custom_tool_handler_gets_a_tool_context(provider, mode):
    """Tool.custom handlers ask for a ToolContext the same way, and get it with the text."""
    seen: list[tuple[str, ToolContext]] = []

    def run_sql(text: str, *, context: ToolContext) -> str:
        seen.append((text, context))
        return "3 rows"

    tool = Tool.custom("run_sql", run_sql, effect="read")
    turn = toolwire.parse(provider, response_body(provider, [("call_1", "run_sql", "SELECT 1")], custom=True))
    dispatcher = Dispatcher(Registry([tool]))
    run = dispatcher.run if mode == "sync" else (lambda *a, **k: asyncio.run(dispatcher.arun(*a, **k)))
    [result] = run(turn, conversation_id="c", data=42)
    [(text, ctx)] = seen
    assert (result.content, text, ctx.call_id, ctx.name, ctx.attempt, ctx.data) == \
        ("3 rows", "SELECT 1", "call_1", "run_sql", 1, 42)


def test_a_dispatch_without_data_gives_handlers_none():
    """Dispatcher.run without data= hands the handler ToolContext.data None."""
    seen: list[ToolContext] = []

    def lookup(key: str, ctx: ToolContext) -> str:
        seen.append(ctx)
        return key

    turn = toolwire.parse("anthropic", response_body("anthropic", [("toolu_1", "lookup", {"key": "a"})]))
    [result] = Dispatcher(Registry([Tool.from_function(lookup, effect="read")])).run(turn, conversation_id="c")
    assert result.content == "a" and seen[0].data is None and seen[0].local_id == turn.calls[0].local_id


def test_the_tool_context_parameter_never_reaches_the_schema():
    """Whatever its name or Annotated form, the ToolContext parameter is left out; a misplaced one is refused."""
    def plain(city: str, where: ToolContext, days: int = 1) -> str:
        return city

    def annotated(city: str, ctx: Annotated[ToolContext, "the call"]) -> str:
        return city

    for fn in (plain, annotated):
        schema = Tool.from_function(fn, effect="read").input_schema
        assert set(schema["properties"]) <= {"city", "days"} and schema["required"] == ["city"]

    def positional(ctx: ToolContext, /, city: str) -> str:
        return city

    def twice(a: ToolContext, b: ToolContext) -> str:
        return ""

    for fn in (positional, twice):
        with pytest.raises(toolwire.ToolDeclarationError):
            Tool.from_function(fn, effect="read")


# ---- events ------------------------------------------------------------------------------------------------------


def collect(mode: str, loop: Any, prompt: str) -> tuple[list[Any], toolwire.harness.LoopResult]:
    """Every event of one run: ``on_event`` for the sync loop, ``stream()`` for the async one."""
    if mode == "sync":
        events: list[Any] = []
        with loop:
            result = loop.run(prompt, on_event=events.append)
        return events, result

    async def go() -> tuple[list[Any], Any]:
        async with loop:
            got = [event async for event in loop.stream(prompt)]
        return got, got[-1].result

    return asyncio.run(go())


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_whole_conversation_reports_its_events_in_order(sim, provider, mode):
    """A 500 then a call then an answer: request, retry, second attempt's parser events, the result, the answer's
    events, and LoopFinished with the very result run returns."""
    sim.plan([Fault.status(500)])
    world = DemoWorld()
    loop = make_loop(mode, provider, sim, world.registry(), conversation_id=f"ev-{provider}")
    events, result = collect(mode, loop, HEIGHT)
    assert not result.fallback and "170 cm" in result.answer
    assert all(e.conversation_id == f"ev-{provider}" for e in events)
    assert events[0] == RequestStarted(conversation_id=f"ev-{provider}", step=0, attempt=1)
    retry = events[1]
    assert isinstance(retry, RetryScheduled) and (retry.step, retry.attempt, retry.status) == (0, 1, 500)
    assert retry.delay >= 0 and retry.reason
    assert events[2] == RequestStarted(conversation_id=f"ev-{provider}", step=0, attempt=2)
    kinds = [type(e).__name__ if not isinstance(e, ResponseEvent) else type(e.event).__name__ for e in events]
    first = kinds.index("CallAnswered")
    assert kinds[3] == "CallAnnounced" and kinds[first - 1] == "TurnFinished"
    assert "CallCompleted" in kinds[3:first]
    if not provider.startswith("gemini"):  # Gemini sends each call whole
        assert "ArgumentsReceived" in kinds[3:first]
    assert all((e.step, e.attempt) == (0, 2) for e in events[3:first])
    [answered] = [e for e in events if isinstance(e, CallAnswered)]
    assert answered.result.kind is toolwire.ResultKind.OK and answered.result == result.steps[0].results[0]
    assert events[first + 1] == RequestStarted(conversation_id=f"ev-{provider}", step=1, attempt=1)
    text = "".join(e.event.text for e in events if isinstance(e, ResponseEvent)
                   and isinstance(e.event, toolwire.TextReceived) and e.step == 1)
    assert text == result.answer
    assert kinds[-2] == "TurnFinished" and isinstance(events[-1], LoopFinished)
    assert events[-1].result is result or events[-1].result == result
    msgspec.json.encode(events)  # ready for a browser as they are


@pytest.mark.parametrize("provider", PROVIDERS)
def test_breaking_out_of_stream_leaves_no_task_no_open_connection_and_no_trace(sim, provider):
    """Leaving stream() at the first parser event (aclosing) cancels the run: no task left, no connection in use,
    the history as before, and the same prompt runs again to its answer."""
    world = DemoWorld()

    async def go() -> tuple[Any, ...]:
        async with make_loop("async", provider, sim, world.registry()) as loop:
            async with contextlib.aclosing(loop.stream(HEIGHT)) as events:
                async for event in events:
                    if isinstance(event, ResponseEvent):
                        break
            tasks = asyncio.all_tasks() - {asyncio.current_task()}
            pool = loop.transport._client._transport._pool
            busy = [c for c in pool.connections if not c.is_idle() and not c.is_closed()]
            history = list(loop.core.history)
            result = await loop.run(HEIGHT)
            return tasks, busy, history, result

    tasks, busy, history, result = asyncio.run(go())
    assert tasks == set() and busy == []
    assert history == []  # nothing was dispatched: the prompt is gone again
    assert not result.fallback and "170 cm" in result.answer
    assert world.calls == {"lookup_demo_value": 1}
    assert len(sim.requests) == 3  # the abandoned request, then the two of the second run


@pytest.mark.parametrize("provider", PROVIDERS)
def test_leaving_stream_at_a_turns_end_starts_no_dispatch(sim, provider):
    """A consumer that leaves on the turn's TurnFinished never asked for more: no handler runs."""
    world = DemoWorld()

    async def go() -> list[Any]:
        async with make_loop("async", provider, sim, world.registry()) as loop:
            async with contextlib.aclosing(loop.stream(HEIGHT)) as events:
                async for event in events:
                    if isinstance(event, ResponseEvent) and isinstance(event.event, toolwire.TurnFinished):
                        break
            return list(loop.core.history)

    assert asyncio.run(go()) == [] and world.calls == {}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_stream_closed_during_a_dispatch_lets_the_dispatch_finish_first(sim, provider):
    """The consumer gives up while a handler runs: the handler finishes, its result enters the history, then the
    run stops."""
    finished: list[str] = []

    async def lookup_demo_value(key: str) -> dict[str, Any]:
        """Look up a stored demo value (height, weight) by key."""
        await asyncio.sleep(0.3)
        finished.append(key)
        return {"found": True, "key": key, "value": "marker-170-cm"}

    registry = Registry([Tool.from_function(lookup_demo_value, effect="read")])

    async def go() -> list[Any]:
        async with make_loop("async", provider, sim, registry) as loop:
            events = loop.stream(HEIGHT)
            async for event in events:
                if isinstance(event, ResponseEvent) and isinstance(event.event, toolwire.TurnFinished):
                    break
            with pytest.raises(TimeoutError):  # asking for more starts the dispatch; the consumer stops waiting
                await asyncio.wait_for(anext(events), 0.1)
            assert finished == ["height"]  # the dispatch ended before the stream did
            with pytest.raises(StopAsyncIteration):
                await anext(events)
            assert asyncio.all_tasks() == {asyncio.current_task()}
            return list(loop.core.history)

    history = asyncio.run(go())
    assert finished == ["height"]
    assert "marker-170-cm" in json.dumps(history)


class UIBroke(Exception):
    pass


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_callback_raising_mid_stream_propagates_and_leaves_the_history_untouched(sim, provider, mode):
    """A callback failing on a parser event: its exception comes out of run unchanged, nothing ran, nothing is
    retried, the history is as before, and the loop answers the same prompt afterwards."""
    world = DemoWorld()
    boom = UIBroke("ui down")

    def on_event(event: Any) -> None:
        if isinstance(event, ResponseEvent):
            raise boom

    loop = make_loop(mode, provider, sim, world.registry())
    with pytest.raises(UIBroke) as info:
        converse(mode, loop, HEIGHT, on_event=on_event)
    assert info.value is boom
    assert len(sim.requests) == 1 and world.calls == {} and loop.core.history == []
    result = converse(mode, make_loop(mode, provider, sim, world.registry(), history=None), HEIGHT)
    assert not result.fallback and world.calls == {"lookup_demo_value": 1}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_callback_raising_on_a_result_keeps_the_whole_dispatched_turn(sim, provider, mode):
    """A callback failing on CallAnswered stops the run after the whole turn was dispatched and recorded: the
    write ran once, and the next prompt continues from that history."""
    world = DemoWorld()

    def on_event(event: Any) -> None:
        if isinstance(event, CallAnswered):
            raise UIBroke("ui down")

    loop = make_loop(mode, provider, sim, world.registry())
    with pytest.raises(UIBroke):
        converse(mode, loop, SCENARIOS["save_with_faults"].prompts["en"], on_event=on_event)
    assert world.effects.count("save_measurement") == 1 and len(sim.requests) == 1
    history, previous_id = loop.core.history, loop.core.previous_id
    assert "entry_id" in json.dumps(history)  # the write's result, ready to be sent
    again = make_loop(mode, provider, sim, world.registry())
    again.core.history, again.core.previous_id = history, previous_id
    converse(mode, again, HEIGHT)
    follow_up = sim.requests[1]
    assert follow_up.status == 200, follow_up.error  # the provider accepts the history the stop left
    assert "entry_id" in json.dumps(follow_up.body)


@pytest.mark.parametrize("mode", MODES)
def test_a_callback_raising_an_httpx_error_is_not_taken_for_a_network_failure(sim, mode):
    """What the callback raises is never classified as the provider's failure, even an httpx.HTTPError."""
    def on_event(event: Any) -> None:
        if isinstance(event, ResponseEvent):
            raise httpx.ConnectError("the UI's own websocket")

    loop = make_loop(mode, "openai-chat", sim, DemoWorld().registry())
    with pytest.raises(httpx.ConnectError, match="websocket"):
        converse(mode, loop, HEIGHT, on_event=on_event)
    assert len(sim.requests) == 1


# ---- request options ---------------------------------------------------------------------------------------------

#: a real field of each dialect's request, sent through extra_body (Gemini's and Interactions' merge into the
#: generation config toolwire builds)
EXTRA = {
    "openai-chat": {"seed": 7},
    "openai-responses": {"metadata": {"app": "toolwire-tests"}},
    "anthropic": {"metadata": {"user_id": "u-1"}},
    "gemini": {"generationConfig": {"seed": 7}},
    "gemini-interactions": {"generation_config": {"seed": 7}},
    "bedrock-converse": {"additionalModelRequestFields": {"top_k": 5}},
}


def option_fields(provider: str, body: dict[str, Any]) -> dict[str, Any]:
    """The fields the options produce, read from the dialect's own places."""
    if provider == "openai-chat":
        return {k: body.get(k) for k in ("tool_choice", "parallel_tool_calls", "temperature", "reasoning_effort",
                                         "seed")}
    if provider == "openai-responses":
        return {k: body.get(k) for k in ("tool_choice", "parallel_tool_calls", "temperature", "reasoning",
                                         "metadata")}
    if provider == "anthropic":
        return {k: body.get(k) for k in ("tool_choice", "temperature", "output_config", "metadata")}
    if provider == "gemini":
        return {k: body.get(k) for k in ("toolConfig", "generationConfig")}
    if provider == "bedrock-converse":
        return {"toolChoice": body["toolConfig"].get("toolChoice"), "inferenceConfig": body.get("inferenceConfig"),
                "additionalModelRequestFields": body.get("additionalModelRequestFields")}
    return {"generation_config": body.get("generation_config")}


FIRST = {
    "openai-chat": {"tool_choice": "required", "parallel_tool_calls": False, "temperature": 0.5,
                    "reasoning_effort": "high", "seed": 7},
    "openai-responses": {"tool_choice": "required", "parallel_tool_calls": False, "temperature": 0.5,
                         "reasoning": {"effort": "high"}, "metadata": {"app": "toolwire-tests"}},
    "anthropic": {"tool_choice": {"type": "any", "disable_parallel_tool_use": True}, "temperature": None,
                  "output_config": {"effort": "high"}, "metadata": {"user_id": "u-1"}},
    "gemini": {"toolConfig": {"functionCallingConfig": {"mode": "ANY"}},
               "generationConfig": {"temperature": 0.5, "thinkingConfig": {"thinkingLevel": "HIGH"}, "seed": 7}},
    "gemini-interactions": {"generation_config": {"tool_choice": "any", "temperature": 0.5,
                                                  "thinking_level": "high", "seed": 7}},
    "bedrock-converse": {"toolChoice": {"any": {}}, "inferenceConfig": {"maxTokens": 1024, "temperature": 0.5},
                         "additionalModelRequestFields": {"top_k": 5}},
}
#: the forced choice of the first request is relaxed to auto afterwards
LATER_CHOICE = {
    "openai-chat": ("tool_choice", "auto"),
    "openai-responses": ("tool_choice", "auto"),
    "anthropic": ("tool_choice", {"type": "auto", "disable_parallel_tool_use": True}),
    "gemini": ("toolConfig", {"functionCallingConfig": {"mode": "AUTO"}}),
    "gemini-interactions": ("generation_config", {"tool_choice": "auto", "temperature": 0.5, "thinking_level": "high",
                                                  "seed": 7}),
    "bedrock-converse": ("toolChoice", {"auto": {}}),
}


def validate_with_sdk(provider: str, body: dict[str, Any]) -> None:
    """The request body's fields are fields of the official SDK's request type, the options' values valid."""
    def keys(typed_dict: Any) -> set[str]:
        return set(typing.get_type_hints(typed_dict))

    if provider == "openai-chat":
        from openai.types.chat.completion_create_params import CompletionCreateParamsStreaming
        from openai.types.shared import ReasoningEffort

        assert set(body) <= keys(CompletionCreateParamsStreaming)
        TypeAdapter(ReasoningEffort).validate_python(body["reasoning_effort"])
    elif provider == "openai-responses":
        from openai.types.responses.response_create_params import ResponseCreateParamsStreaming
        from openai.types.shared_params import Reasoning

        assert set(body) <= keys(ResponseCreateParamsStreaming)
        TypeAdapter(Reasoning).validate_python(body["reasoning"])
    elif provider == "anthropic":
        from anthropic.types import OutputConfigParam
        from anthropic.types.message_create_params import MessageCreateParamsStreaming

        assert set(body) <= keys(MessageCreateParamsStreaming)
        TypeAdapter(OutputConfigParam).validate_python(body["output_config"])
    elif provider == "gemini":
        from google.genai import types as gt

        gt.GenerationConfig.model_validate(body["generationConfig"])  # unknown fields are refused
        gt.ToolConfig.model_validate(body["toolConfig"])
    elif provider == "bedrock-converse":
        import botocore.session
        from botocore.validate import ParamValidator

        shape = botocore.session.get_session().get_service_model("bedrock-runtime").operation_model(
            "ConverseStream").input_shape
        report = ParamValidator().validate({**body, "modelId": "m"}, shape)
        assert not report.has_errors(), report.generate_report()
    else:
        from google.genai._gaos.types.interactions import generationconfig

        assert set(body["generation_config"]) <= keys(generationconfig.GenerationConfigParam)
        generationconfig.GenerationConfig.model_validate(body["generation_config"])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_request_options_reach_every_request_in_the_dialects_own_fields(sim, provider, mode):
    """tool_choice, parallel, temperature, reasoning_effort and extra_body are in each body where the dialect
    wants them, valid for its SDK; a forced choice applies to the first request only."""
    world = DemoWorld()
    temperature = None if provider == "anthropic" else 0.5  # Anthropic's request type has no temperature
    effort = None if provider == "bedrock-converse" else "high"  # Bedrock's is a model's own field (extra_body)
    loop = make_loop(mode, provider, sim, world.registry(), tool_choice=ToolChoice.required(), parallel=False,
                     temperature=temperature, reasoning_effort=effort, extra_body=EXTRA[provider])
    warnings = loop.warnings
    result = converse(mode, loop, HEIGHT)
    assert not result.fallback and "170 cm" in result.answer
    first, later = sim.requests[0].body, sim.requests[1].body
    assert option_fields(provider, first) == FIRST[provider]
    field, choice = LATER_CHOICE[provider]
    assert option_fields(provider, later)[field] == choice
    for body in (first, later):
        validate_with_sdk(provider, body)
    if provider.startswith("gemini") or provider == "bedrock-converse":
        assert [w.code for w in warnings] == ["parallel_not_expressible"]
    else:
        assert warnings == ()


STRICT = {
    "openai-chat": lambda b: all(t["function"]["strict"] for t in b["tools"]) and b["parallel_tool_calls"] is False,
    "openai-responses": lambda b: all(t["strict"] for t in b["tools"]) and b["parallel_tool_calls"] is False,
    "anthropic": lambda b: all(t["strict"] for t in b["tools"]),
    "gemini": lambda b: b["toolConfig"]["functionCallingConfig"]["mode"] == "VALIDATED",
    "gemini-interactions": lambda b: b["generation_config"]["tool_choice"] == "validated",
    "bedrock-converse": lambda b: all(t["toolSpec"]["strict"] for t in b["toolConfig"]["tools"]),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_strict_reaches_the_request_as_the_dialect_expresses_it(sim, provider, mode):
    """strict=True: OpenAI strict tools without parallel calls, Anthropic strict tools, Gemini VALIDATED."""
    loop = make_loop(mode, provider, sim, DemoWorld().registry(), strict=True)
    result = converse(mode, loop, HEIGHT)
    assert not result.fallback
    assert all(STRICT[provider](r.body) for r in sim.requests)


@pytest.mark.parametrize("provider,kw,needle", [
    ("anthropic", {"reasoning_effort": "minimal"}, "reasoning_effort"),
    ("gemini", {"reasoning_effort": "none"}, "reasoning_effort"),
    ("openai-chat", {"reasoning_effort": "extreme"}, "reasoning_effort"),
    ("anthropic", {"temperature": 0.5}, "extra_body"),
    ("openai-responses", {"temperature": -0.1}, "temperature"),
    ("gemini", {"temperature": True}, "temperature"),
    ("openai-chat", {"extra_body": {"messages": []}}, "messages"),
    ("gemini", {"temperature": 0.2, "extra_body": {"generationConfig": {"temperature": 0.9}}},
     "generationConfig.temperature"),
    ("anthropic", {"extra_body": {"stream": False}}, "stream"),
    ("openai-chat", {"extra_body": {"x": object()}}, "JSON"),
    ("openai-chat", {"tool_choice": ToolChoice.auto(parallel=True), "parallel": False}, "contradicts"),
    ("openai-chat", {"tool_choice": "required"}, "ToolChoice"),
])
def test_options_a_dialect_cannot_take_are_refused_before_anything_is_sent(sim, provider, kw, needle):
    """Values a dialect does not document, and extra_body fields that would change toolwire's own, are a
    UsageError at construction."""
    with pytest.raises(toolwire.UsageError, match=needle):
        ToolLoop(provider, model=MODEL, registry=DemoWorld().registry(), base_url=sim.base_url, api_key="k", **kw)
    assert sim.requests == []


def test_tool_options_need_tools():
    """tool_choice, strict or parallel with an empty registry is a UsageError."""
    for kw in ({"tool_choice": ToolChoice.none()}, {"strict": True}, {"parallel": True}):
        with pytest.raises(toolwire.UsageError, match="need tools"):
            ToolLoop("anthropic", model=MODEL, registry=Registry([]), api_key="k", **kw)


@pytest.mark.parametrize("provider,extra,kw,message", [
    ("anthropic", {"thinking": {"type": "enabled", "budget_tokens": 2048}}, {}, "max_tokens"),
    ("anthropic", {"thinking": {"type": "enabled", "budget_tokens": 512}}, {"max_tokens": 4096}, "1024"),
    ("anthropic", {"thinking": {"type": "adaptive"}, "temperature": 0.3}, {}, "temperature"),
    ("anthropic", {"thinking": {"type": "adaptive"}}, {"tool_choice": ToolChoice.required()}, "forces tool use"),
    ("gemini", {"generationConfig": {"thinkingConfig": {"thinkingBudget": 128}}}, {"reasoning_effort": "low"},
     "only one of thinking budget and thinking level"),
    ("gemini", {"generationConfig": {"thinkingConfig": {"thinkingLevel": "HUGE"}}}, {}, "thinking_level"),
    ("gemini-interactions", {"generation_config": {"thinking_level": "huge"}}, {}, "thinking_level"),
    ("openai-responses", {"reasoning": {"effort": "extreme"}}, {}, "Supported values"),
])
def test_the_simulator_refuses_option_fields_as_the_provider_does(sim, provider, extra, kw, message):
    """Fields the provider refuses (sent through extra_body, past toolwire's own checks) get the provider's 400,
    and the loop fails fast to its fallback."""
    loop = ToolLoop(provider, model=MODEL, registry=DemoWorld().registry(), base_url=sim.base_url, api_key="k",
                    retry=FAST, extra_body=extra, **kw)
    with loop:
        result = loop.run(HEIGHT)
    assert result.fallback and len(sim.requests) == 1
    assert sim.requests[0].status == 400 and message in sim.requests[0].error


@pytest.mark.parametrize("field,value,code", [("temperature", 3, "decimal_above_max_value"),
                                              ("reasoning_effort", "extreme", "invalid_value"),
                                              ("parallel_tool_calls", "no", "invalid_type")])
def test_the_simulator_checks_chat_option_values(sim, field, value, code):
    """Chat Completions: an out-of-range temperature, an unknown effort, a non-boolean parallel flag are 400s."""
    body = {"model": MODEL, "messages": [{"role": "user", "content": HEIGHT}], "tools": [
        {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}],
        field: value}
    response = httpx.post(sim.base_url + "/v1/chat/completions", json=body, headers={"authorization": "Bearer k"})
    assert response.status_code == 400 and response.json()["error"]["code"] == code
    no_tools = {"model": MODEL, "messages": [{"role": "user", "content": HEIGHT}], "tool_choice": "auto"}
    response = httpx.post(sim.base_url + "/v1/chat/completions", json=no_tools, headers={"authorization": "Bearer k"})
    assert response.status_code == 400 and "only allowed when 'tools' are specified" in response.text
