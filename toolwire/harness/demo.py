"""``toolwire demo``: the seed scenarios, for every dialect, against the simulated provider over real HTTP.

Each run gets a fresh demo world (its tools and effect counter), a SQLite idempotency ledger, the scenario's
fault plan on the simulated provider, and a ``ToolLoop`` pointed at the simulator's base URL: the same code a
real provider gets, but for the URL.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Sequence, TextIO

import msgspec

from ..codecs import dialect_for, dialects_with
from ..errors import UsageError
from ..registry import Dispatcher, SQLiteLedger
from ..trace import format_trace
from .demo_tools import DemoWorld
from .loop import LoopResult, ToolLoop
from .retry import RetryPolicy

__all__ = ["SCENARIO_NAMES", "DemoRun", "run_demo", "print_runs", "runs_to_json", "sim_providers", "demo_model"]

SCENARIO_NAMES = ("height", "height_weight", "rice", "misspelled_tool", "missing_argument", "catalogue_down",
                  "save_with_faults", "provider_down", "mcp_notes")
#: scenarios whose tools come from a real MCP server process (``demo_mcp_server``; needs ``toolwire[mcp]``)
MCP_SCENARIOS = ("mcp_notes",)



def sim_providers() -> tuple[str, ...]:
    """The dialects the simulated provider speaks (and the harness can call): the demo's providers."""
    return tuple(d.id for d in dialects_with("sim") if d.http is not None)


def demo_model(provider: str) -> str:
    """The model name the demo asks ``provider``'s simulator for (its simulator part's ``demo_model``)."""
    return str(dialect_for(provider).simulator().demo_model)


#: fast retries: the simulator asks for short waits
DEMO_RETRY = RetryPolicy(attempts=5, deadline=20.0, initial=0.02, max_backoff=0.2, max_hint=2.0)


def _fault_plan(scenario: str) -> list[Any]:
    from ..sim import Fault

    if scenario == "save_with_faults":
        # first request: rate limited, then cut mid-call, then an in-stream overload, then the call;
        # the request carrying the result: a server error, then the answer. The write must run once.
        return [Fault.status(429, retry_after=0.02), Fault.cut(at=0.6), Fault.in_stream_error(kind="overloaded"),
                Fault.ok(), Fault.status(500), Fault.ok()]
    if scenario == "provider_down":
        return [Fault.status(503) for _ in range(DEMO_RETRY.attempts * 2)]
    return []


class DemoRun(msgspec.Struct, kw_only=True):
    provider: str
    scenario: str
    prompt: str
    result: LoopResult
    effects: dict[str, int]
    requests: int


def mcp_available() -> bool:
    """True when the MCP SDK (``toolwire[mcp]``) is installed."""
    try:
        import mcp  # noqa: F401
    except ImportError:
        return False
    return True


def demo_mcp_server() -> Any:
    """The demo's MCP server (``python -m toolwire.harness.demo_mcp_server``), unopened: the toolwire it imports
    is this one, and its stderr is not shown."""
    import subprocess
    import sys

    from ..mcp import MCPServer

    package_parent = str(Path(__file__).resolve().parent.parent.parent)
    path = os.pathsep.join([package_parent, *filter(None, [os.environ.get("PYTHONPATH")])])
    return MCPServer.stdio(sys.executable, ["-m", "toolwire.harness.demo_mcp_server"], env={"PYTHONPATH": path},
                           stderr=subprocess.DEVNULL, connect_timeout=30.0)


def _one_mcp(sim: Any, base_url: str, provider: str, scenario: str, lang: str, workdir: Path) -> DemoRun:
    from ..sim import SCENARIOS

    sim.reset()
    sim.plan(_fault_plan(scenario))
    prompt = SCENARIOS[scenario].prompts[lang]
    with demo_mcp_server() as server:
        # toolwire's own server: its readOnlyHint (list_notes) is trusted; any other server's tools are writes
        registry = server.registry(dialects=[provider], timeout=5.0, trust_read_only=True)
        dispatcher = Dispatcher(registry, ledger=SQLiteLedger(workdir / f"{provider}-{scenario}.db"), backoff=0.01)
        with ToolLoop(provider, model=demo_model(provider), registry=registry, dispatcher=dispatcher,
                      base_url=base_url, api_key="sim-key", locale=lang, retry=DEMO_RETRY, timeout=5.0,
                      conversation_id=f"demo-{provider}-{scenario}") as loop:
            result = loop.run(prompt)
        notes = registry["list_notes"].invoke({})
    count = len((notes.structured or {}).get("notes") or [])
    return DemoRun(provider=provider, scenario=scenario, prompt=prompt, result=result, effects={"add_note": count},
                   requests=len(sim.requests))


def _one(sim: Any, base_url: str, provider: str, scenario: str, lang: str, workdir: Path) -> DemoRun:
    from ..sim import SCENARIOS

    if scenario in MCP_SCENARIOS:
        return _one_mcp(sim, base_url, provider, scenario, lang, workdir)
    world = DemoWorld()
    if scenario == "catalogue_down":
        world.catalogue_up = False
    registry = world.registry(timeout=5.0)
    ledger = SQLiteLedger(workdir / f"{provider}-{scenario}.db")
    dispatcher = Dispatcher(registry, ledger=ledger, backoff=0.01)
    sim.reset()
    sim.plan(_fault_plan(scenario))
    prompt = SCENARIOS[scenario].prompts[lang]
    with ToolLoop(provider, model=demo_model(provider), registry=registry, dispatcher=dispatcher,
                  base_url=base_url, api_key="sim-key", locale=lang, retry=DEMO_RETRY, timeout=5.0,
                  conversation_id=f"demo-{provider}-{scenario}") as loop:
        result = loop.run(prompt)
    effects = {"save_measurement": world.effects.count("save_measurement"),
               "add_food_to_meal": world.effects.count("add_food_to_meal")}
    return DemoRun(provider=provider, scenario=scenario, prompt=prompt, result=result, effects=effects,
                   requests=len(sim.requests))


def check_selection(providers: Sequence[str], scenarios: Sequence[str]) -> None:
    """``UsageError`` for a provider or a scenario the demo does not know."""
    known = sim_providers()
    for p in providers:
        if p not in known:
            raise UsageError(f"unknown provider {p!r}")
    for s in scenarios:
        if s not in SCENARIO_NAMES:
            raise UsageError(f"unknown scenario {s!r}; expected one of: {', '.join(SCENARIO_NAMES)}")
        if s in MCP_SCENARIOS and not mcp_available():
            raise UsageError(f"the {s} scenario runs a real MCP server and needs the mcp extra: "
                             "pip install 'toolwire[mcp]'")


def run_demo(providers: Sequence[str] | None = None, scenarios: Sequence[str] = SCENARIO_NAMES, lang: str = "en",
             on_run: Callable[[DemoRun], None] | None = None) -> list[DemoRun]:
    """Run every scenario for every provider (default: every one the simulator speaks, ``sim_providers()``)
    against a simulated provider started for the purpose."""
    from ..sim import SimProvider

    providers = sim_providers() if providers is None else providers
    check_selection(providers, scenarios)
    runs: list[DemoRun] = []
    sim = SimProvider()
    with tempfile.TemporaryDirectory(prefix="toolwire-demo-") as tmp, sim.serve() as base_url:
        for provider in providers:
            for scenario in scenarios:
                run = _one(sim, base_url, provider, scenario, lang, Path(tmp))
                runs.append(run)
                if on_run is not None:
                    on_run(run)
    return runs


def runs_to_json(runs: Sequence[DemoRun]) -> dict[str, Any]:
    """The ``toolwire demo --json`` document (a contract)."""
    return {"runs": [{
        "provider": r.provider,
        "scenario": r.scenario,
        "answer": r.result.answer,
        "fallback": r.result.fallback,
        "calls": [{"name": c.name, "call_id": c.call_id, "states": c.states, "result_kind": c.result_kind}
                  for c in r.result.calls],
        "effects": r.effects,
    } for r in runs]}


def print_run(run: DemoRun, out: TextIO, trace: bool = False) -> None:
    r = run.result
    out.write(f"\n{run.provider} / {run.scenario}: {run.prompt}\n")
    for c in r.calls:
        out.write(f"  {c.name} {c.call_id or '-'}: {' → '.join(c.states)} [{c.result_kind}]\n")
    if trace:
        for i, step in enumerate(r.steps):
            out.write(f"  step {i}: {step.attempts} attempt(s)\n")
            for line in format_trace(step.turn).splitlines():
                out.write(f"    {line}\n")
        out.write(f"  requests to the provider: {run.requests}\n")
    writes = ", ".join(f"{k}={v}" for k, v in run.effects.items() if v)
    if writes:
        out.write(f"  effects: {writes}\n")
    label = "fallback" if r.fallback else "answer"
    out.write(f"  {label}: {r.answer}\n")


def print_runs(runs: Sequence[DemoRun], out: TextIO, trace: bool = False) -> None:
    for run in runs:
        print_run(run, out, trace)


def dump_json(runs: Sequence[DemoRun], out: TextIO) -> None:
    out.write(json.dumps(runs_to_json(runs), ensure_ascii=False, indent=2) + "\n")
