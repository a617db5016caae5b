"""Durable conversations on DBOS, with real crashes: a worker process (tests/durable_worker.py) runs the
``save_with_faults`` prompt as a DBOS workflow (SQLite system database, SQLite ledger, effects counted in a SQLite
file) against the simulated provider in this process; it is SIGKILLed inside the write handler after its effect,
and a second worker, launching DBOS on the same system database, recovers the workflow and finishes it. The
write has one effect, answered ``outcome_unknown``. Every dialect (Gemini Interactions too: its recorded turns
carry the interaction ids that continue the conversation server-side).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

pytest.importorskip("dbos")

from .dialects import SIMULATED as PROVIDERS  # noqa: E402 - the dialects the loop can call on the simulator
from toolwire.harness import LoopResult  # noqa: E402
from toolwire.harness.demo_tools import EffectLog  # noqa: E402
from toolwire.sim import SCENARIOS, SimProvider  # noqa: E402

SAVE = SCENARIOS["save_with_faults"].prompts["en"]
DURABLE = list(PROVIDERS)
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def sim():
    provider = SimProvider(seed=5)
    with provider.serve():
        yield provider


def worker(mode: str, tmp_path: Path, sim: SimProvider, provider: str, workflow_id: str = "wf-1",
           out: str = "out.json") -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    args = [sys.executable, "-m", "tests.durable_worker", mode, str(tmp_path / "dbos.sqlite"),
            str(tmp_path / "ledger.db"), str(tmp_path / "effects.db"), sim.base_url, provider, workflow_id,
            str(tmp_path / out), SAVE]
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def result(tmp_path: Path, out: str = "out.json") -> LoopResult:
    return msgspec.json.decode((tmp_path / out).read_bytes(), type=LoopResult)


@pytest.mark.parametrize("provider", DURABLE)
def test_a_conversation_killed_inside_a_write_is_recovered_with_one_effect(sim, provider, tmp_path):
    """SIGKILL after the write's effect, before its ledger record: the next process's DBOS.launch() resumes
    the workflow; the recorded model request is not sent again, the dispatch step runs again and finds the
    write started without completion (outcome_unknown, not run again); the conversation ends with an answer."""
    crashed = worker("crash", tmp_path, sim, provider)
    assert crashed.returncode == -9, crashed.stderr[-2000:]
    assert not (tmp_path / "out.json").exists()
    effects = EffectLog(tmp_path / "effects.db")
    assert effects.count("save_measurement") == 1
    sent = len(sim.requests)
    assert sent == 1  # the turn with the call

    recovered = worker("recover", tmp_path, sim, provider)
    assert recovered.returncode == 0, recovered.stderr[-2000:]
    res = result(tmp_path)
    assert effects.count("save_measurement") == 1
    assert [c.result_kind for c in res.calls] == ["outcome_unknown"]
    assert not res.fallback and res.answer and res.answer == res.steps[-1].turn.text, res.answer
    assert len(sim.requests) == sent + 1  # only the answer's request: the first turn came from DBOS


@pytest.mark.parametrize("provider", DURABLE)
def test_a_conversation_without_a_crash_has_one_effect_and_the_models_answer(sim, provider, tmp_path):
    done = worker("run", tmp_path, sim, provider)
    assert done.returncode == 0, done.stderr[-2000:]
    res = result(tmp_path)
    assert not res.fallback and res.answer == "Saved: 70 kg"
    assert [c.result_kind for c in res.calls] == ["ok"]
    assert EffectLog(tmp_path / "effects.db").count("save_measurement") == 1
    assert len(sim.requests) == 2


@pytest.mark.parametrize("provider", ["anthropic", "gemini"])
def test_the_same_workflow_id_again_returns_the_recorded_result_without_new_effects(sim, provider, tmp_path):
    first = worker("run", tmp_path, sim, provider, out="first.json")
    assert first.returncode == 0, first.stderr[-2000:]
    sent = len(sim.requests)
    again = worker("run", tmp_path, sim, provider, out="again.json")
    assert again.returncode == 0, again.stderr[-2000:]
    assert result(tmp_path, "again.json") == result(tmp_path, "first.json")
    assert EffectLog(tmp_path / "effects.db").count("save_measurement") == 1
    assert len(sim.requests) == sent  # nothing sent to the provider


def test_import_toolwire_does_not_import_dbos():
    code = "import sys, toolwire, toolwire.harness; assert 'dbos' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)
