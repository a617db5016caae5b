"""Many workers: the demo's conversations on DBOS worker processes (``toolwire demo --workers``), SIGKILLed at random
and inside writes, against a real PostgreSQL; and worker processes racing on one write through the Dispatcher.

The kill test checks what the durable design promises: every conversation ends (the model's answer or the
fallback), no write has two effects, and every ``outcome_unknown`` is a write whose claiming process was killed
after it claimed (the ledger row records the claiming pid and time; the supervisor records every kill).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import msgspec
import pytest

pytest.importorskip("dbos")

import toolwire  # noqa: E402
from .dialects import SIMULATED as PROVIDERS  # noqa: E402 - the dialects the loop can call on the simulator
from toolwire.harness.demo import runs_to_json, run_demo  # noqa: E402
from toolwire.harness.demo_tools import DemoWorld, EffectLog  # noqa: E402
from toolwire.harness.workers import report_to_json, run_workers  # noqa: E402

from .bodies import body  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
WRITES = ("save_measurement", "add_food_to_meal")
CTX = multiprocessing.get_context("spawn")


def _essence(run: dict[str, Any]) -> tuple[Any, ...]:
    return (run["provider"], run["scenario"], run["answer"], run["fallback"],
            [(c["name"], c["states"], c["result_kind"]) for c in run["calls"]], run["effects"])


@pytest.fixture(scope="module")
def plain_runs() -> dict[tuple[str, str], dict[str, Any]]:
    """The plain demo's runs (one process, no DBOS), by dialect and scenario."""
    return {(r["provider"], r["scenario"]): r for r in runs_to_json(run_demo())["runs"]}


def test_the_workers_demo_on_sqlite_gives_the_plain_demos_runs(plain_runs, tmp_path):
    """`toolwire demo --workers 3 --json` (SQLite system database and ledger): the same runs (8 per dialect), answers,
    call states and effects as `toolwire demo --json`, each with the worker that finished it."""
    # the toolwire under test, not whichever the interpreter would import from the temporary directory
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "toolwire.cli", "demo", "--workers", "3", "--json"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert len(doc["runs"]) == len(PROVIDERS) * 8
    assert [_essence(r) for r in doc["runs"]] == [_essence(plain_runs[r["provider"], r["scenario"]])
                                                   for r in doc["runs"]]
    assert {r["worker"] for r in doc["runs"]} <= {"worker-1", "worker-2", "worker-3"}
    assert all(r["recoveries"] == 0 and r["kills"] == 0 and r["error"] is None for r in doc["runs"])
    assert doc["workers"] == 3 and doc["kills"] == [] and doc["restarts"] == 0


def _ledger_rows(dsn: str, conversation_id: str) -> list[tuple[str, str, int, float]]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute("SELECT call_key, status, pid, started_at FROM toolwire_ledger WHERE conversation_id = %s",
                            (conversation_id,)).fetchall()


def test_eight_workers_with_a_killer_finish_every_demo_conversation_without_a_second_effect(pg_dsn, plain_runs):
    """8 workers on PostgreSQL take the demo conversations (8 per dialect) from a DBOS queue while a killer SIGKILLs random
    workers (and some right after a write's effect) and restarts them: every conversation ends with the model's
    answer or the fallback, no write has two effects, and every outcome_unknown is a write claimed by a process
    that was then killed."""
    report = run_workers(8, pg_dsn, kill_every=0.5, seed=11, timeout=600)
    doc = report_to_json(report)
    assert len(report.runs) == len(PROVIDERS) * 8
    killed = {k.pid: k.at for k in report.kills}
    assert any(k.in_write for k in report.kills)
    # every kill is followed by a restart, but one that lands as the run ends (the supervisor is stopping)
    assert report.restarts == sum(k.restarted for k in report.kills) >= len(report.kills) - 1
    unknown = 0
    for wr, entry in zip(report.runs, doc["runs"]):
        res, plain = wr.run.result, plain_runs[wr.run.provider, wr.run.scenario]
        assert wr.error is None, wr.error
        assert res.answer, (wr.run.provider, wr.run.scenario)
        assert res.fallback == plain["fallback"], (wr.run.provider, wr.run.scenario, res.answer)
        assert entry["worker"] and entry["worker"].startswith("worker-")
        for tool in WRITES:
            assert wr.run.effects[tool] <= max(1, plain["effects"][tool]), (wr.conversation_id, wr.run.effects)
        kinds = [c.result_kind for c in res.calls]
        if "outcome_unknown" in kinds:
            unknown += kinds.count("outcome_unknown")
            started = [(pid, at) for key, status, pid, at in _ledger_rows(pg_dsn, wr.conversation_id)
                       if status == "started" and key.startswith("call:")]
            assert started, wr.conversation_id
            for pid, at in started:
                assert pid in killed and killed[pid] >= at, (wr.conversation_id, pid, killed.get(pid), at)
        elif plain["effects"] != {t: 0 for t in WRITES}:
            assert wr.run.effects == plain["effects"], (wr.conversation_id, wr.run.effects)
    # the counts the issue note quotes
    assert len(report.kills) >= 3, report.kills
    sys.stderr.write(f"\nkill test: {len(report.runs)} conversations, {len(report.kills)} kills "
                     f"({sum(k.in_write for k in report.kills)} inside a write), {report.restarts} restarts, "
                     f"{sum(r.recoveries for r in report.runs)} recoveries, "
                     f"{sum(sum(r.run.effects.values()) for r in report.runs)} effects, {unknown} outcome_unknown, "
                     f"{report.seconds:.1f} s\n")


def _racer(dsn: str, effects: str, provider: str, conv: str, barrier: Any, out: Any) -> None:
    try:
        world = DemoWorld(effects)
        registry = world.registry(timeout=10.0, write_delay=0.05)
        dispatcher = toolwire.Dispatcher(registry, ledger=toolwire.PostgresLedger(dsn, pool_size=1, timeout=20))
        turn = toolwire.parse(provider, body(provider, [("call_1", "save_measurement",
                                                          {"kind": "weight", "value": 70, "unit": "kg"})]))
        barrier.wait(30)
        (result,) = dispatcher.run(turn, conversation_id=conv, turn_id="t1")
        out.put(result.kind.value)
    except BaseException as exc:  # report, so the parent fails with the reason rather than a timeout
        out.put(repr(exc))


@pytest.mark.parametrize("provider", PROVIDERS)
def test_eight_worker_processes_racing_on_one_write_make_one_effect(pg_dsn, provider, tmp_path):
    """Eight processes dispatch the same write of the same turn at once through PostgresLedger: the handler runs
    once; the others get its stored result or outcome_unknown while it is still running, never a second run."""
    conv = f"race-{uuid.uuid4().hex[:8]}"
    effects = str(tmp_path / "effects.db")
    EffectLog(effects)
    barrier, out = CTX.Barrier(8), CTX.Queue()
    procs = [CTX.Process(target=_racer, args=(pg_dsn, effects, provider, conv, barrier, out)) for _ in range(8)]
    for p in procs:
        p.start()
    kinds = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(30)
    assert EffectLog(effects).count("save_measurement") == 1
    assert kinds.count("ok") >= 1 and set(kinds) <= {"ok", "outcome_unknown"}, kinds


def test_workers_need_a_known_database_url():
    """--database takes sqlite:/// or postgresql:// URLs; anything else is a one-line usage error (exit 2)."""
    proc = subprocess.run([sys.executable, "-m", "toolwire.cli", "demo", "--workers", "1", "--database",
                           "mysql://u:secret@h/db"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "sqlite:///PATH or postgresql://" in proc.stderr and "secret" not in proc.stderr
    lone = subprocess.run([sys.executable, "-m", "toolwire.cli", "demo", "--kill-every", "1"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert lone.returncode == 2 and "--workers" in lone.stderr


def test_no_worker_process_outlives_the_demo(tmp_path):
    """After `toolwire demo --workers 2` returns, none of its worker processes is left running."""
    mark = f"toolwire-test-{uuid.uuid4().hex}"
    env = dict(os.environ, TOOLWIRE_TEST_MARK=mark)
    proc = subprocess.run([sys.executable, "-m", "toolwire.cli", "demo", "--workers", "2", "--provider", "gemini",
                           "--scenario", "height"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "finished by worker-" in proc.stdout
    assert _processes_with(mark) == []


def _processes_with(mark: str) -> list[int]:
    """Processes whose environment holds ``mark`` (inherited from the demo we started)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if mark.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_postgresql_restarted_mid_run_loses_no_completion_and_no_conversation(plain_runs):
    """PostgreSQL (the DBOS system database and the ledger) restarted while 4 workers run 80 conversations: DBOS
    and the ledger retry over the restart, every conversation ends as in the plain demo, every write has its one
    effect, and no ledger row is left `started` (no completion lost)."""
    from .pg_cluster import start

    if os.environ.get("TOOLWIRE_SKIP_POSTGRES") == "1":
        pytest.skip("TOOLWIRE_SKIP_POSTGRES=1: the PostgreSQL tests are skipped")
    cluster = start(durable=True)
    restarted = threading.Event()
    finished: list[str] = []

    def restart_after_a_few() -> None:
        while len(finished) < 6:
            time.sleep(0.01)
        cluster.restart("fast")
        restarted.set()

    try:
        threading.Thread(target=restart_after_a_few, daemon=True).start()
        report = run_workers(4, cluster.url, rounds=2, timeout=600,
                             on_run=lambda wr: finished.append(wr.conversation_id))
        assert restarted.wait(60), "the server was never restarted"
        assert len(finished) > 6 + 4 * 4  # conversations still running or queued when the server went away
        for wr in report.runs:
            assert wr.error is None, wr.error
            entry = report_to_json(msgspec.structs.replace(report, runs=[wr]))["runs"][0]
            # (the two rounds of a scenario share its fault plan; the outcome is the same either way)
            assert _essence(entry) == _essence(plain_runs[wr.run.provider, wr.run.scenario]), (wr.conversation_id,
                                                                                             entry)
        rows = [row for wr in report.runs for row in _ledger_rows(cluster.url, wr.conversation_id)]
        writes = [(key, status) for key, status, _pid, _at in rows if key.startswith("call:")]
        assert len(writes) == 2 * len(PROVIDERS)  # save_with_faults, two rounds, every dialect
        assert all(status == "completed" for _key, status in writes), writes
    finally:
        cluster.stop()
