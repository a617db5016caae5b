"""End-to-end: the harness loop over real loopback HTTP against the simulated provider, every dialect.

Every dialect × scenario, the fault matrix (no handler runs for a partial or truncated call, the user gets the
model's answer or the fallback, every write runs exactly once however many retries happened), the async twin,
permanent errors failing fast, localized fallbacks, and API keys never reaching logs or errors.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from structlog.testing import capture_logs

import toolwire
from .dialects import SIMULATED as PROVIDERS  # the dialects the loop can call on the simulator
from toolwire.harness import AsyncToolLoop, FallbackReason, ProviderError, RetryPolicy, ToolLoop, fallback_message
from toolwire.harness.demo import SCENARIO_NAMES, run_demo, runs_to_json
from toolwire.harness.demo_tools import DemoWorld
from toolwire.registry import Dispatcher, SQLiteLedger
from toolwire.sim import SCENARIOS, Fault, SimProvider

FAST = RetryPolicy(attempts=5, deadline=20.0, initial=0.01, max_backoff=0.05, max_hint=2.0)
MODEL = "sim-model"

EXPECTED = {
    "height": ("170 cm", ["ok"]),
    "height_weight": ("70 kg", ["ok", "ok"]),
    "rice": ("28 g", ["ok"]),
    "misspelled_tool": ("28 g", ["unknown_tool", "ok"]),
    "missing_argument": ("?", ["invalid_arguments"]),
    "catalogue_down": ("catalogue", ["handler_failed"]),
    "save_with_faults": ("70 kg", ["ok"]),
}


@pytest.fixture
def sim():
    """A simulated provider of its own for each test (a slow request of another test cannot leak into it)."""
    provider = SimProvider(seed=7)
    with provider.serve() as base_url:
        provider.base_url = base_url
        yield provider


def make_loop(sim, provider, world, tmp_path, *, locale="en", timeout=5.0, api_key="sim-key", retry=FAST,
              name="c"):
    registry = world.registry(timeout=5.0)
    dispatcher = Dispatcher(registry, ledger=SQLiteLedger(tmp_path / f"{provider}-{name}.db"), backoff=0.01)
    return ToolLoop(provider, model=MODEL, registry=registry, dispatcher=dispatcher, base_url=sim.base_url,
                    api_key=api_key, locale=locale, retry=retry, timeout=timeout, conversation_id=f"{provider}-{name}")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_demo_runs_every_scenario_for_the_dialect(provider):
    """All scenarios over real HTTP: the expected answers, result kinds, one effect for the write, and the
    provider-down fallback."""
    runs = {r.scenario: r for r in run_demo([provider], SCENARIO_NAMES, "en")}
    for scenario, (needle, kinds) in EXPECTED.items():
        run = runs[scenario]
        assert not run.result.fallback, (scenario, run.result.answer)
        assert needle in run.result.answer, (scenario, run.result.answer)
        assert [c.result_kind for c in run.result.calls] == kinds, scenario
        for call in run.result.calls:
            assert call.states[0] == "announced" and call.states[-1] == "answered"
            assert ("dispatched" in call.states) == (call.result_kind in ("ok", "handler_failed"))
    assert runs["save_with_faults"].effects["save_measurement"] == 1
    assert runs["missing_argument"].effects["save_measurement"] == 0
    down = runs["provider_down"].result
    assert down.fallback and down.answer == fallback_message(FallbackReason.PROVIDER_FAILED, "en")


def test_demo_json_is_the_documented_contract():
    """toolwire demo --json: {"runs": [{provider, scenario, answer, fallback, calls: [...], effects}]}."""
    doc = runs_to_json(run_demo(["anthropic"], ["height", "save_with_faults"], "en"))
    assert set(doc) == {"runs"}
    for run in doc["runs"]:
        assert set(run) == {"provider", "scenario", "answer", "fallback", "calls", "effects"}
        for call in run["calls"]:
            assert set(call) == {"name", "call_id", "states", "result_kind"}
    assert doc["runs"][1]["effects"]["save_measurement"] == 1
    json.dumps(doc)


FAULTS = {
    "rate_limited": lambda: Fault.status(429, retry_after=0.01),
    "server_error": lambda: Fault.status(500),
    "overloaded_529": lambda: Fault.status(529),
    "cut_mid_call": lambda: Fault.cut(at=0.5),
    "in_stream_overloaded": lambda: Fault.in_stream_error(kind="overloaded"),
    "max_tokens_mid_call": lambda: Fault.max_tokens(),
    "slow_first_byte": lambda: Fault.slow_first_byte(1.5),
}


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("fault", FAULTS)
def test_fault_before_a_write_runs_it_exactly_once(sim, provider, fault, tmp_path):
    """Faults on the first and the follow-up request: the write runs once, no partial call runs, an answer
    comes back (the slow first byte passes the client's 1 s read timeout)."""
    sim.reset()
    sim.plan([FAULTS[fault](), Fault.ok(), FAULTS[fault](), Fault.ok()])
    world = DemoWorld()
    with make_loop(sim, provider, world, tmp_path, timeout=1.0, name=fault) as loop:
        result = loop.run(SCENARIOS["save_with_faults"].prompts["en"])
    assert world.effects.count("save_measurement") == 1
    assert not result.fallback, result.answer
    assert "70 kg" in result.answer
    ran = [r for step in result.steps for r in step.results if r.kind is toolwire.ResultKind.OK]
    assert len(ran) == 1
    for step in result.steps:
        if step.results:
            assert step.turn.finished_cleanly  # only whole turns were dispatched
    assert sum(step.attempts for step in result.steps) >= 3


@pytest.mark.parametrize("provider", PROVIDERS)
def test_provider_down_for_every_attempt_gives_the_localized_fallback(sim, provider, tmp_path):
    """503 on every attempt: after the bounded retries the user gets the fallback in their language."""
    sim.reset()
    sim.plan([], then=Fault.status(503))
    world = DemoWorld()
    with make_loop(sim, provider, world, tmp_path, locale="pt-BR", name="down") as loop:
        result = loop.run(SCENARIOS["provider_down"].prompts["pt-BR"])
    assert result.fallback and result.reason is FallbackReason.PROVIDER_FAILED
    assert result.answer == "Não consegui obter uma resposta. Por favor, tente novamente."
    assert "503" not in result.answer
    assert len(sim.requests) == FAST.attempts


@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_permanent_errors_fail_fast_without_retries(sim, status, tmp_path):
    """A permanent status is not retried: one request, then the fallback (no diagnostics in it)."""
    sim.reset()
    sim.plan([Fault.status(status)])
    with make_loop(sim, "anthropic", DemoWorld(), tmp_path, name=f"perm{status}") as loop:
        result = loop.run(SCENARIOS["height"].prompts["en"])
    assert result.fallback and len(sim.requests) == 1
    assert str(status) not in result.answer


def test_a_second_failed_correction_gets_the_fallback(sim, tmp_path):
    """A model that names an unknown tool again after its correction round gets the fallback."""
    sim.reset()
    world = DemoWorld()
    registry = toolwire.Registry([t for t in world.tools() if t.name != "search_foods"])  # the fix is unknown too
    loop = ToolLoop("openai-chat", model=MODEL, registry=registry, base_url=sim.base_url, api_key="k",
                    retry=FAST, conversation_id="twice")
    with loop:
        result = loop.run(SCENARIOS["misspelled_tool"].prompts["es"])
    assert result.fallback and result.reason is FallbackReason.CORRECTIONS_EXHAUSTED
    assert result.answer == fallback_message(FallbackReason.CORRECTIONS_EXHAUSTED, "en")
    assert [c.result_kind for c in result.calls] == ["unknown_tool", "unknown_tool"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_async_loop_runs_the_parallel_scenario(sim, provider, tmp_path):
    """AsyncToolLoop over httpx.AsyncClient: parallel reads answered by id, the same answer as sync."""
    sim.reset()
    sim.plan([Fault.status(500), Fault.ok()])
    world = DemoWorld()
    registry = world.registry(timeout=5.0)

    async def go():
        async with AsyncToolLoop(provider, model=MODEL, registry=registry, base_url=sim.base_url, api_key="k",
                                 retry=FAST, conversation_id=f"async-{provider}") as loop:
            return await loop.run(SCENARIOS["height_weight"].prompts["en"])

    result = asyncio.run(go())
    assert not result.fallback
    assert "170 cm" in result.answer and "70 kg" in result.answer
    assert [c.result_kind for c in result.calls] == ["ok", "ok"]


def test_async_write_under_faults_runs_once(sim, tmp_path):
    """The async path keeps the exactly-once guarantee for writes under a cut and a 429."""
    sim.reset()
    sim.plan([Fault.cut(at=0.5), Fault.status(429, retry_after=0.01), Fault.ok()])
    world = DemoWorld()
    registry = world.registry(timeout=5.0)
    dispatcher = Dispatcher(registry, ledger=SQLiteLedger(tmp_path / "a.db"))

    async def go():
        async with AsyncToolLoop("gemini", model=MODEL, registry=registry, dispatcher=dispatcher,
                                 base_url=sim.base_url, api_key="k", retry=FAST) as loop:
            return await loop.run(SCENARIOS["save_with_faults"].prompts["en"])

    result = asyncio.run(go())
    assert not result.fallback and world.effects.count("save_measurement") == 1


def test_api_keys_never_appear_in_logs_or_errors(sim, tmp_path, toolwire_debug):
    """A distinctive key is in no log event and no error, even when the provider echoes it back."""
    secret = "sk-test-SECRET-0123456789"
    sim.reset()
    sim.plan([Fault.status(401, body={"error": {"message": f"Incorrect API key provided: {secret}",
                                                 "type": "invalid_request_error", "code": "invalid_api_key"}})])
    with capture_logs() as logs:
        with make_loop(sim, "openai-chat", DemoWorld(), tmp_path, api_key=secret, name="key") as loop:
            result = loop.run(SCENARIOS["height"].prompts["en"])
        transport = toolwire.harness.HTTPTransport("openai-chat", model=MODEL, base_url=sim.base_url,
                                                   api_key=secret)
        sim.plan([Fault.status(401)])
        with pytest.raises(ProviderError) as info:
            transport.request({"model": MODEL, "messages": [{"role": "user", "content": "hi"}]})
        transport.close()
    assert result.fallback
    assert logs, "the failure was logged"
    assert secret not in json.dumps(logs, default=str)
    assert secret not in str(info.value) and secret not in repr(info.value.__dict__)


def test_missing_api_key_is_a_usage_error(monkeypatch):
    """Without api_key= or the environment variable, building a transport raises UsageError naming it."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(toolwire.UsageError, match="ANTHROPIC_API_KEY"):
        toolwire.harness.HTTPTransport("anthropic", model=MODEL)


def test_retry_after_and_retry_delay_are_honoured(sim, tmp_path):
    """Retry-After / retry-after-ms / Gemini RetryInfo set the wait; a wait over the cap is not retried."""
    from toolwire.codecs.requests import parse_error

    assert parse_error("openai-chat", 429, {"retry-after-ms": "250"}, b"").retry_after == 0.25
    assert parse_error("anthropic", 529, {"retry-after": "2"}, b"").retry_after == 2.0
    body = json.dumps({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "quota", "details": [
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1.5s"}]}}).encode()
    info = parse_error("gemini", 429, {}, body)
    assert info.transient and info.retry_after == 1.5
    assert not parse_error("openai-chat", 400, {}, b"{}").transient
    assert not parse_error("openai-chat", 429, {}, b'{"error": {"code": "insufficient_quota"}}').transient
    sim.reset()
    sim.plan([Fault.status(429, retry_after=30)])
    with make_loop(sim, "anthropic", DemoWorld(), tmp_path, name="cap") as loop:
        result = loop.run(SCENARIOS["height"].prompts["en"])
    assert result.fallback and len(sim.requests) == 1  # 30 s is past the 2 s cap: fail, do not sleep


def test_locales_and_unknown_locale():
    """Fallbacks exist in en, pt-BR and es (a bare language falls back to it); another locale is a UsageError."""
    assert fallback_message(FallbackReason.PROVIDER_FAILED, "es").startswith("No pude")
    assert fallback_message(FallbackReason.PROVIDER_FAILED, "pt").startswith("Não consegui")
    with pytest.raises(toolwire.UsageError):
        fallback_message(FallbackReason.PROVIDER_FAILED, "fr")


def test_a_resumed_broken_history_is_repaired_before_it_is_sent(sim, tmp_path):
    """A stored Chat history whose call lost its tool message is repaired (the provider would answer 400)."""
    broken = [
        {"role": "user", "content": SCENARIOS["height"].prompts["en"]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_old", "type": "function", "function": {"name": "lookup_demo_value",
                                                                "arguments": '{"key": "hei'}}]},
    ]
    sim.reset()
    world = DemoWorld()
    registry = world.registry()
    loop = ToolLoop("openai-chat", model=MODEL, registry=registry, base_url=sim.base_url, api_key="k",
                    retry=FAST, history=broken)
    with loop:
        result = loop.run(SCENARIOS["height"].prompts["en"])
    assert not result.fallback and "170 cm" in result.answer
    sent = sim.requests[0].body["messages"]
    assert sent[2]["role"] == "tool" and sent[2]["tool_call_id"] == "call_old"
    assert json.loads(sent[1]["tool_calls"][0]["function"]["arguments"]) == {"_invalid_arguments": '{"key": "hei'}


def test_every_event_of_a_conversation_carries_its_id(sim, tmp_path):
    """With configure_logging, parser and dispatcher events of a loop run carry the conversation id too."""
    import io

    from toolwire.logs import configure_logging

    stream = io.StringIO()
    configure_logging("json", "debug", stream=stream)
    sim.reset()
    with make_loop(sim, "anthropic", DemoWorld(), tmp_path, name="bound") as loop:
        loop.run(SCENARIOS["height"].prompts["en"])
    events = [json.loads(line) for line in stream.getvalue().splitlines()]
    kinds = {e["event"] for e in events}
    assert {"call.transition", "call.parsed", "dispatch.result", "loop.answer"} <= kinds
    assert all(e.get("conversation_id") == "anthropic-bound" for e in events)


def test_toolwire_chat_runs_the_same_loop_with_tools_from_a_module(sim, monkeypatch, capsys):
    """toolwire chat --tools MODULE --base-url URL: the loop a real provider gets, here pointed at the sim."""
    from toolwire.cli import main

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sim-key")
    sim.reset()
    code = main(["chat", "--provider", "anthropic", "--model", MODEL, "--tools", "tests.chat_tools",
                 "--base-url", sim.base_url, "--json", SCENARIOS["height_weight"].prompts["en"]])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and not doc["fallback"]
    assert "170 cm" in doc["answer"] and "70 kg" in doc["answer"]
    assert [c["result_kind"] for c in doc["calls"]] == ["ok", "ok"]


def test_toolwire_chat_refuses_a_module_without_tools(capsys):
    """A --tools module with neither TOOLS nor registry is a usage error (exit 2)."""
    from toolwire.cli import main

    assert main(["chat", "--provider", "anthropic", "--model", MODEL, "--tools", "json", "hi"]) == 2
    assert "TOOLS" in capsys.readouterr().err


def test_gemini_function_response_ids_can_be_left_out(tmp_path):
    """echo_ids=False: the follow-up's functionResponse parts carry no id (Vertex Express rejects them)."""
    sim = SimProvider(seed=3, gemini_ids=False)
    with sim.serve() as base_url:
        world = DemoWorld()
        with ToolLoop("gemini", model=MODEL, registry=world.registry(), base_url=base_url, api_key="k",
                      retry=FAST, echo_ids=False) as loop:
            result = loop.run(SCENARIOS["height"].prompts["en"])
        follow_up = sim.requests[-1].body["contents"][-1]["parts"]
    assert not result.fallback and "170 cm" in result.answer
    assert all("id" not in p["functionResponse"] for p in follow_up if "functionResponse" in p)
