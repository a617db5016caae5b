"""A small agent application written against toolwire's public API, checked with ``mypy --strict``.

tests/test_typing.py type-checks this file (tests/typing/mypy.ini) without a single ``type: ignore``, then runs
it. It declares tools three ways, parses a recorded Anthropic stream whole and piece by piece, dispatches the
turn synchronously and asynchronously, answers a Responses turn with a free-text tool call, answers a Gemini
turn with an image and with a ToolError (rich results), keeps histories
typed ``list[dict[str, Any]]``, repairs one, and talks to the simulated provider with ``ToolLoop`` and
``AsyncToolLoop``. Run it with the repository on ``PYTHONPATH``: ``PYTHONPATH=. python tests/typing/app.py``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Literal

import toolwire
from toolwire import (
    ArgumentsReceived,
    Content,
    ImagePart,
    Part,
    TextPart,
    ToolError,
    CallAnnounced,
    CallCompleted,
    CallErrored,
    CallTruncated,
    Dispatcher,
    Event,
    Registry,
    ServerCallSeen,
    StreamFailed,
    StreamParser,
    TextReceived,
    TokenUsage,
    Tool,
    ToolCall,
    ToolResult,
    Turn,
    TurnFinished,
)
from toolwire.harness import AsyncToolLoop, LoopResult, ToolLoop
from toolwire.sim import SimProvider

FIXTURE = (Path(__file__).resolve().parents[1] / "fixtures" / "real" / "anthropic"
           / "anthropic-sdk-python__streaming-fixtures__tool_use_response.sse")

#: a whole (non-streamed) Responses body: a reasoning item, a free-text call and a function call
RESPONSES_BODY: dict[str, Any] = {
    "id": "resp_1", "object": "response", "status": "completed", "model": "gpt-5",
    "output": [
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAAB-opaque"},
        {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_1", "name": "shout", "input": "hello",
         "status": "completed"},
        {"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "get_weather",
         "arguments": '{"location": "Lisbon"}', "status": "completed"},
    ],
}

# ---- tools -------------------------------------------------------------------------------------------------------

WEATHER: dict[str, int] = {"Paris": 18, "Lisbon": 24}
SAVED: list[tuple[str, float, str]] = []


def get_weather(location: str) -> dict[str, Any]:
    """The current temperature of a city, in degrees Celsius."""
    celsius = WEATHER.get(location)
    return {"location": location, "found": celsius is not None, "celsius": celsius}


def lookup_demo_value(key: str) -> dict[str, Any]:
    """Look up a stored value (height, weight) by key."""
    values = {"height": "170 cm", "weight": "70 kg"}
    if key in values:
        return {"found": True, "key": key, "value": values[key]}
    return {"found": False, "key": key}


async def save_measurement(kind: Literal["height", "weight"], value: float, unit: str) -> dict[str, Any]:
    """Save a body measurement."""
    await asyncio.sleep(0)
    SAVED.append((kind, value, unit))
    return {"saved": {"kind": kind, "value": value, "unit": unit}}


def count_rows(args: dict[str, Any]) -> dict[str, Any]:
    return {"table": str(args["table"]), "rows": 0}


def shout(text: str) -> str:
    return text.upper()


def build_tools() -> list[Tool]:
    return [
        Tool.from_function(get_weather, effect="read", timeout=5.0),
        Tool.from_function(lookup_demo_value, effect="read"),
        Tool.from_function(save_measurement, effect="write",
                           idempotency_key=lambda args: f"{args['kind']}:{args['value']}"),
        Tool.from_schema("count_rows", {"type": "object", "properties": {"table": {"type": "string"}},
                                        "required": ["table"]},
                         count_rows, effect="read", description="Count the rows of a table."),
        Tool.custom("shout", shout, effect="read", description="Repeat the text, louder.",
                    format={"type": "text"}),
    ]


def describe(tool: Tool) -> str:
    timeout: float | None = tool.timeout
    parameters = sorted(tool.input_schema.get("properties", {}))
    keyed = "keyed" if tool.idempotency_key is not None else "unkeyed"
    fmt = "" if tool.format is None else f" format={tool.format['type']}"
    summary = tool.description.splitlines()[0] if tool.description else "-"
    return f"{tool.name} [{tool.kind}, {tool.effect}, {keyed}, timeout={timeout}] {parameters}{fmt}: {summary}"


# ---- parsing -----------------------------------------------------------------------------------------------------


def progress(event: Event) -> str | None:
    """A line for a progress display (facts as they arrive; only the final Turn decides what runs)."""
    if isinstance(event, CallAnnounced):
        return f"announced {event.name} ({event.local_id}, {event.kind.value})"
    if isinstance(event, ArgumentsReceived):
        return f"{len(event.text)} argument characters for {event.local_id}"
    if isinstance(event, CallCompleted):
        call: ToolCall = event.call
        return f"whole: {call.name} {call.args}"
    if isinstance(event, (CallTruncated, CallErrored)):
        problem = event.call.problem
        return f"{event.call.local_id} cannot run: {problem.code.value if problem else event.call.state.value}"
    if isinstance(event, ServerCallSeen):
        return f"the provider ran {event.server_call.name}"
    if isinstance(event, TextReceived):
        return None
    if isinstance(event, StreamFailed):
        return f"the stream failed: {event.error.type}: {event.error.message}"
    if isinstance(event, TurnFinished):
        reason = event.turn.finish_reason
        return f"turn finished: {reason.value if reason else None}"
    return None


def parse_in_pieces(data: bytes, size: int = 97) -> Turn:
    """Feed ``data`` as a transport would, in pieces of any size."""
    parser = StreamParser("anthropic")
    events: list[Event] = []
    for start in range(0, len(data), size):
        events += parser.feed(data[start:start + size])
    events += parser.close()
    for event in events:
        line = progress(event)
        if line is not None:
            print("  " + line)
    return parser.turn


# ---- results and history -----------------------------------------------------------------------------------------


def replay(turn: Turn) -> list[dict[str, Any]]:
    """The assistant message as history entries: one message, or Responses' output items."""
    message = turn.assistant_message
    if message is None:  # a streaming-mode parse keeps none
        return []
    return message if isinstance(message, list) else [message]


def continue_history(history: list[dict[str, Any]], turn: Turn, results: list[ToolResult]) -> None:
    for result in results:
        print(f"  {result.name}: {result.kind.value} (error={result.is_error}) {' -> '.join(result.states)}")
    history += replay(turn)
    history += toolwire.encode_results(turn, results)


async def dispatch_async(dispatcher: Dispatcher, turn: Turn) -> list[ToolResult]:
    return await dispatcher.arun(turn, conversation_id="app-async")


def offline(registry: Registry) -> list[dict[str, Any]]:
    turn = toolwire.parse("anthropic", FIXTURE.read_bytes())
    calls: list[ToolCall] = turn.runnable_calls
    print(f"anthropic: {len(calls)} runnable call(s), text {turn.text!r}")
    streamed = parse_in_pieces(FIXTURE.read_bytes())
    assert [c.args for c in streamed.runnable_calls] == [c.args for c in calls]

    history: list[dict[str, Any]] = [{"role": "user", "content": "What is the weather in Paris?"}]
    results = Dispatcher(registry).run(turn, conversation_id="app-sync")
    continue_history(history, turn, results)
    assert history[1:] == toolwire.history_messages(turn, results)
    async_results = asyncio.run(dispatch_async(Dispatcher(registry), streamed))
    assert [r.content for r in async_results] == [r.content for r in results]

    # a stored conversation that lost its results: every call gets exactly one again
    repaired, report = toolwire.repair_history("anthropic", history[:-1])
    for action in report.actions:
        print(f"  repaired: {action.kind.value} at {action.position} ({action.call_id})")
    assert report.changed and len(repaired) == len(history)

    responses = toolwire.parse("openai-responses", json.dumps(RESPONSES_BODY))
    items: list[dict[str, Any]] = [{"role": "user", "content": "Shout hello, then the weather in Lisbon."}]
    continue_history(items, responses, Dispatcher(registry).run(responses, conversation_id="app-responses"))
    print(f"openai-responses: {[item['type'] for item in items[1:]]}")
    return history


def radar(city: str) -> Content:
    """The weather radar of a city."""
    if city != "Paris":
        raise ToolError(Content(parts=[TextPart(text=f"No radar covers {city}.")]))
    pixel = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
    return Content(parts=[TextPart(text="Rain moving east."), ImagePart(data=pixel, mime_type="image/png")],
                   structured={"city": city, "rain": True})


def rich() -> list[dict[str, Any]]:
    calls = [{"functionCall": {"id": "g1", "name": "radar", "args": {"city": "Paris"}}},
             {"functionCall": {"id": "g2", "name": "radar", "args": {"city": "Lyon"}}}]
    body = {"responseId": "r1",
            "candidates": [{"index": 0, "finishReason": "STOP", "content": {"role": "model", "parts": calls}}]}
    turn = toolwire.parse("gemini", json.dumps(body))
    paris, lyon = Dispatcher(Registry([Tool.from_function(radar, effect="read")])).run(turn, conversation_id="rich")
    parts: list[Part] = paris.parts or []
    images = [p for p in parts if isinstance(p, ImagePart)]
    assert images and images[0].mime_type == "image/png" and lyon.kind.value == "tool_error"
    answer: list[dict[str, Any]] = toolwire.encode_results(turn, [paris, lyon])
    print(f"gemini: {[type(p).__name__ for p in parts]}, then {lyon.kind.value}")
    return answer


# ---- conversations against the simulated provider ----------------------------------------------------------------


def spent(result: LoopResult) -> tuple[int, int]:
    """Input and output tokens of a conversation's responses, where the provider reported them."""
    inputs = outputs = 0
    for step in result.steps:
        usage: TokenUsage | None = step.turn.token_usage
        if usage is not None:
            inputs += usage.input_tokens or 0
            outputs += usage.output_tokens or 0
    return inputs, outputs


def converse(registry: Registry) -> None:
    sim = SimProvider(seed=1)
    with sim.serve() as base_url:
        with ToolLoop("openai-chat", model="sim-model", registry=registry, base_url=base_url,
                      api_key="sim-key") as loop:
            result: LoopResult = loop.run("How tall am I?")
        print(f"{loop.conversation_id}: {result.answer!r} fallback={result.fallback}")
        for outcome in result.calls:
            print(f"  {outcome.name}: {' -> '.join(outcome.states)} ({outcome.result_kind})")
        assert "170 cm" in result.answer
        print(f"  tokens: {spent(result)}")

        async def save() -> LoopResult:
            async with AsyncToolLoop("anthropic", model="sim-model", registry=registry, base_url=base_url,
                                     api_key="sim-key") as aloop:
                return await aloop.run("Save my weight: 70 kg.")

        saved = asyncio.run(save())
        print(f"anthropic: {saved.answer!r}; saved {SAVED}")
        assert not saved.fallback and SAVED == [("weight", 70.0, "kg")]


def main() -> None:
    tools = build_tools()
    for tool in tools:
        print(describe(tool))
    history = offline(Registry(tools))
    print(f"history: {len(history)} messages")
    rich()
    # only the OpenAI dialects can declare a free-text tool: the conversations get the function tools
    converse(Registry([tool for tool in tools if tool.kind == "function"]))


if __name__ == "__main__":
    main()
