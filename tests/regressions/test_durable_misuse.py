"""Misuse of ``toolwire.durable`` through its public API. DBOS is a process-wide singleton, so every check
that launches it runs in a child process (a small script, or tests/regressions/durable_misuse_worker.py for crashes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("dbos")

from toolwire import UsageError  # noqa: E402
from toolwire.harness.demo_tools import EffectLog  # noqa: E402
from toolwire.sim import SCENARIOS, SimProvider  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
HEIGHT = SCENARIOS["height"].prompts["en"]
SAVE = SCENARIOS["save_with_faults"].prompts["en"]

PRELUDE = """
import json, sys
from dbos import DBOS
from toolwire import Dispatcher, Registry, SQLiteLedger, Tool, UsageError
from toolwire.durable import DurableLoop, result_of
from toolwire.harness.demo_tools import DemoWorld
TMP, URL = sys.argv[1], sys.argv[2]
OUT = {}
def outcome(f):
    try:
        r = f()
        return {"ok": True, "conversation_id": getattr(r, "conversation_id", None), "answer": getattr(r, "answer", None)}
    except Exception as exc:
        return {"ok": False, "type": type(exc).__name__, "usage_error": isinstance(exc, UsageError), "message": str(exc)}
def launch():
    DBOS(config={"name": "durable-misuse", "system_database_url": f"sqlite:///{TMP}/dbos.sqlite", "executor_id": "x",
                 "log_level": "ERROR"})
    DBOS.launch()
def loop(provider, name, registry=None):
    registry = registry or DemoWorld(f"{TMP}/effects.db").registry(timeout=5.0)
    return DurableLoop(provider, name=name, model="sim-model", registry=registry, base_url=URL, api_key="k",
                       timeout=5.0, dispatcher=Dispatcher(registry, ledger=SQLiteLedger(f"{TMP}/ledger.db")))
"""

EPILOGUE = """
print("@@" + json.dumps(OUT))
DBOS.destroy(workflow_completion_timeout_sec=1)
"""


def _script(body: str, tmp_path: Path, sim: SimProvider) -> dict:
    path = tmp_path / "script.py"
    path.write_text(PRELUDE + textwrap.dedent(body) + EPILOGUE)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, str(path), str(tmp_path), sim.base_url], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    lines = [line for line in done.stdout.splitlines() if line.startswith("@@")]
    assert lines, f"script failed ({done.returncode}): {done.stderr[-3000:]}"
    return json.loads(lines[-1][2:])


@pytest.fixture
def sim():
    provider = SimProvider(seed=5)
    with provider.serve():
        yield provider


def test_two_durable_loops_with_one_name_are_refused_or_each_runs_its_own(sim, tmp_path):
    """A second DurableLoop with a name already taken is a UsageError; else each loop's run uses its own dialect
    and tools (never silently the other loop's)."""
    out = _script("""
        a = loop("openai-chat", "dup")
        OUT["second"] = outcome(lambda: loop("anthropic", "dup", Registry([])))
        launch()
        OUT["run"] = outcome(lambda: a.run("How tall am I?", conversation_id="conv-a"))
    """, tmp_path, sim)
    if not out["second"]["ok"]:
        assert out["second"]["usage_error"], out
        return
    dialects = {r.dialect for r in sim.requests}
    assert dialects == {"openai-chat"}, f"loop 'openai-chat' sent its requests as {dialects}: {out}"
    assert out["run"]["answer"] == "You are 170 cm tall.", out


def test_a_durable_loop_on_a_memory_ledger_never_runs_a_write_twice_after_a_crash(sim, tmp_path):
    """DurableLoop with the Dispatcher's default MemoryLedger: refused (UsageError), or a write killed after its
    effect has at most one effect once the workflow is recovered."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))

    def worker(mode: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "tests.regressions.durable_misuse_worker", mode, "memory", str(tmp_path),
                               sim.base_url, "anthropic", "wf-1", SAVE], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=120)

    crashed = worker("crash")
    if crashed.returncode == 3:  # refused: a ledger that dies with the process cannot gate a write
        assert "refused" in crashed.stderr
        return
    assert crashed.returncode == -9, crashed.stderr[-2000:]
    recovered = worker("recover")
    assert recovered.returncode == 0, recovered.stderr[-2000:]
    assert EffectLog(tmp_path / "effects.db").count("save_measurement") <= 1


def test_a_workflow_id_reused_for_another_conversation_is_not_answered_with_the_first_ones_result(sim, tmp_path):
    """run(workflow_id=W) for conversation B after W ran conversation A: a UsageError, never A's answer as B's."""
    out = _script("""
        l = loop("anthropic", "support")
        launch()
        OUT["a"] = outcome(lambda: l.run("How tall am I?", conversation_id="conv-A", workflow_id="W"))
        OUT["b"] = outcome(lambda: l.run("What is the weather?", conversation_id="conv-B", workflow_id="W"))
    """, tmp_path, sim)
    assert out["a"]["ok"], out
    b = out["b"]
    assert (not b["ok"] and b["usage_error"]) or b["conversation_id"] == "conv-B", out


def test_odd_arguments_to_run_and_enqueue_are_usage_errors(sim, tmp_path):
    """workflow_id not a non-empty string, an unregistered queue, a history that is no JSON: UsageError each."""
    out = _script("""
        l = loop("anthropic", "support")
        launch()
        OUT["workflow_id=5"] = outcome(lambda: l.run("hi", conversation_id="c1", workflow_id=5))
        OUT["workflow_id=''"] = outcome(lambda: l.run("hi", conversation_id="c2", workflow_id=""))
        OUT["queue='nope'"] = outcome(lambda: l.enqueue("hi", conversation_id="c3", queue="nope"))
        OUT["history=[object()]"] = outcome(lambda: l.run("hi", conversation_id="c4", history=[object()]))
    """, tmp_path, sim)
    bad = {k: v for k, v in out.items() if v["ok"] or not v["usage_error"]}
    assert bad == {}, bad


class _Client:
    """A stand-in for dbos.DBOSClient: records what would be enqueued."""

    def __init__(self) -> None:
        self.enqueued: list[tuple] = []

    def enqueue(self, options, *args):
        self.enqueued.append((options, args))
        return object()


@pytest.mark.parametrize("prompt", [None, 123, b"How tall am I?", ["How tall am I?"]])
def test_module_enqueue_refuses_a_prompt_that_is_not_a_string(prompt):
    """toolwire.durable.enqueue(client, name, prompt): a non-string prompt is a UsageError, nothing enqueued
    (DurableLoop.run/enqueue refuse it; through the client it reached the model as a garbage prompt)."""
    from toolwire.durable import enqueue

    client = _Client()
    with pytest.raises(UsageError):
        enqueue(client, "support", prompt, conversation_id="conv-1")
    assert client.enqueued == []


@pytest.mark.parametrize("dispatcher", [None, "not a dispatcher"])
def test_a_durable_loop_without_a_dispatcher_is_refused(dispatcher, tmp_path):
    """DurableLoop(dispatcher=None or not a Dispatcher) is a UsageError at construction (it was accepted, and the
    first turn with a call then died in the workflow with AttributeError, after the model request was spent)."""
    from toolwire.durable import DurableLoop
    from toolwire.harness.demo_tools import DemoWorld

    registry = DemoWorld(tmp_path / "effects.db").registry()
    with pytest.raises(UsageError):
        DurableLoop("anthropic", model="sim-model", registry=registry, dispatcher=dispatcher, api_key="k",
                    name=f"no-dispatcher-{type(dispatcher).__name__}")
