"""Lost, hung and upgraded durable workers: conversations held by an executor that never comes back are recovered
by ``toolwire durable recover`` / ``toolwire.durable.recover_lost`` and finished by another worker, with one
effect per write; a stopped worker (SIGSTOP) is seen unseen through its heartbeat; a retired application version's
conversations move to the new one only when asked; ``max_recovery_attempts`` ends a conversation whose workers
keep dying. Real worker processes (tests/regressions/durable_recovery_worker.py), real SQLite (and PostgreSQL)
system databases and ledgers, the simulated provider over loopback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("dbos")

from toolwire.harness.demo_tools import EffectLog  # noqa: E402
from toolwire.sim import SCENARIOS, SimProvider  # noqa: E402

SAVE = SCENARIOS["save_with_faults"].prompts["en"]
ROOT = Path(__file__).resolve().parents[2]
PROVIDER = "anthropic"  # recovery does not depend on the dialect (tests/test_durable.py covers every one)
WAIT = 120.0


@pytest.fixture
def sim():
    provider = SimProvider(seed=5)
    with provider.serve():
        yield provider


class Env:
    def __init__(self, tmp: Path, sysdb: str, ledger: str, sim: SimProvider) -> None:
        self.tmp, self.sysdb, self.ledger, self.sim = tmp, sysdb, ledger, sim
        self.effects = tmp / "effects.db"
        self.workflow_id = f"wf-{uuid.uuid4().hex[:8]}"
        self.procs: list[subprocess.Popen] = []

    def spawn(self, mode: str, executor: str, *, version: str = "v1", out: str = "out.json", heartbeat: float = 0.0,
              ready: str | None = None, extra: tuple[str, ...] = ()) -> subprocess.Popen:
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        args = [sys.executable, "-m", "tests.regressions.durable_recovery_worker", mode, "--sysdb", self.sysdb,
                "--ledger", self.ledger, "--effects", str(self.effects), "--sim", self.sim.base_url,
                "--provider", PROVIDER, "--executor-id", executor, "--version", version,
                "--workflow-id", self.workflow_id, "--out", str(self.tmp / out), "--heartbeat", str(heartbeat),
                *(("--ready", str(self.tmp / ready)) if ready else ()), *extra, SAVE]
        err = open(self.tmp / f"{executor}.{len(self.procs)}.stderr", "wb")
        proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err)
        err.close()
        proc.log = self.tmp / f"{executor}.{len(self.procs)}.stderr"  # type: ignore[attr-defined]
        self.procs.append(proc)
        return proc

    def finish(self, proc: subprocess.Popen, timeout: float = WAIT) -> int:
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGUSR1)
            time.sleep(1.0)
            proc.kill()
            proc.wait()
            raise AssertionError(f"worker did not finish: {proc.log.read_text()[-2000:]}")  # type: ignore

    def out(self, name: str = "out.json") -> dict[str, Any]:
        return json.loads((self.tmp / name).read_text())

    def effects_count(self) -> int:
        return EffectLog(self.effects).count("save_measurement")

    def wait_ready(self, name: str, proc: subprocess.Popen) -> None:
        _until(lambda: (self.tmp / name).exists() or proc.poll() is not None, "worker ready")
        assert proc.poll() is None, proc.log.read_text()[-2000:]  # type: ignore[attr-defined]

    def cleanup(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.kill(p.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
                p.kill()
                p.wait()


def _until(pred: Any, what: str, timeout: float = WAIT) -> None:
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _fresh_pg_database(dsn: str) -> str:
    import psycopg

    name = f"recovery_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, _db = dsn.rpartition("/")
    return f"{base}/{name}"


@pytest.fixture(params=["sqlite", "postgresql"])
def env(request, tmp_path, sim):
    if request.param == "sqlite":
        e = Env(tmp_path, f"sqlite:///{tmp_path / 'dbos.sqlite'}", f"sqlite:{tmp_path / 'ledger.db'}", sim)
    else:
        url = _fresh_pg_database(request.getfixturevalue("pg_dsn"))
        e = Env(tmp_path, url, url, sim)
    yield e
    e.cleanup()


@pytest.fixture
def sqlite_env(tmp_path, sim):
    e = Env(tmp_path, f"sqlite:///{tmp_path / 'dbos.sqlite'}", f"sqlite:{tmp_path / 'ledger.db'}", sim)
    yield e
    e.cleanup()


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "toolwire", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=WAIT)


def _status(url: str, workflow_id: str) -> Any:
    from dbos import DBOSClient

    client = DBOSClient(system_database_url=url)
    try:
        return client.list_workflows(workflow_ids=[workflow_id], load_input=False, load_output=False)[0]
    finally:
        client.destroy()


def _mine(report: Any, workflow_id: str) -> list[Any]:
    return [w for w in report.workflows if w.workflow_id == workflow_id]


# ==== a worker lost for good ==========================================================================================
def test_a_lost_workers_conversation_is_recovered_by_the_command_and_finished_by_another_worker(env):
    """Executor A is SIGKILLed inside the write (after its effect) and never restarted: its conversation stays
    PENDING. ``toolwire durable recover --unseen-for 0`` (another process) puts it back on the queue; worker B,
    another executor id, finishes it: the write has one effect, answered outcome_unknown."""
    a = env.spawn("crash", "exec-A")
    assert env.finish(a) == -signal.SIGKILL, a.log.read_text()[-2000:]  # type: ignore[attr-defined]
    assert env.effects_count() == 1
    assert _status(env.sysdb, env.workflow_id).status == "PENDING"

    kept = _cli("durable", "recover", "--database", env.sysdb, "--unseen-for", "3600", "--json")
    assert kept.returncode == 0, kept.stderr
    assert json.loads(kept.stdout)["workflows"] == []  # seen a moment ago (its workflow's last update): not lost

    done = _cli("durable", "recover", "--database", env.sysdb, "--unseen-for", "0", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    mine = [w for w in doc["workflows"] if w["workflow_id"] == env.workflow_id]
    assert [(w["executor_id"], w["action"]) for w in mine] == [("exec-A", "requeued")]
    assert [e["seen_by"] for e in doc["executors"] if e["executor_id"] == "exec-A"] == ["workflows"]

    b = env.spawn("serve", "exec-B", heartbeat=0.5)
    assert env.finish(b) == 0, b.log.read_text()[-2000:]  # type: ignore[attr-defined]
    from toolwire.durable import executors_seen

    beat = [e for e in executors_seen(env.sysdb) if e.executor_id == "exec-B"]
    assert [(e.seen_by, e.application_version, e.pid, e.pending) for e in beat] == [("heartbeat", "v1", b.pid, 0)]
    res = env.out()["result"]
    assert [c["result_kind"] for c in res["calls"]] == ["outcome_unknown"]
    assert res["answer"] and not res["fallback"]
    assert env.effects_count() == 1
    status = _status(env.sysdb, env.workflow_id)
    assert (status.status, status.executor_id) == ("SUCCESS", "exec-B")


def test_recovering_a_live_worker_with_a_write_in_flight_keeps_one_effect_and_one_result(sqlite_env):
    """The "lost" executor A is alive, inside the write (after its effect): recovery with --unseen-for 0 puts the
    conversation back on the queue anyway, and a live worker takes it: B, or A itself (it serves the queue too).
    B would answer the write outcome_unknown (the ledger has it started); A's new execution waits for its own
    dispatch in flight. Either way the write is never run again; when A goes on, DBOS refuses the records of its
    old execution (it no longer owns the workflow) and A's ``run`` returns the recorded result: the same as B's."""
    env = sqlite_env
    gate = env.tmp / "gate"
    a = env.spawn("pause", "exec-A", heartbeat=0.2, out="a.json", extra=("--gate", str(gate)))
    _until(lambda: env.effects_count() == 1 or a.poll() is not None, "A's write effect")
    assert a.poll() is None, a.log.read_text()[-2000:]  # type: ignore[attr-defined]
    b = env.spawn("serve", "exec-B", out="b.json", ready="b.ready")
    env.wait_ready("b.ready", b)

    from toolwire.durable import recover_lost

    report = recover_lost(env.sysdb, unseen_for=0)
    assert [(w.executor_id, w.action) for w in _mine(report, env.workflow_id)] == [("exec-A", "requeued")]
    # the new owner takes it (B, or A's queue thread) while A's first execution is still inside the write
    _until(lambda: _status(env.sysdb, env.workflow_id).status != "ENQUEUED", "a live worker taking it")
    time.sleep(1.0)
    gate.write_text("go")
    assert env.finish(b) == 0, b.log.read_text()[-2000:]  # type: ignore[attr-defined]
    assert env.finish(a) == 0, a.log.read_text()[-2000:]  # type: ignore[attr-defined]
    res = env.out("b.json")["result"]
    assert env.out("a.json")["result"] == res
    owner = _status(env.sysdb, env.workflow_id).executor_id
    assert [c["result_kind"] for c in res["calls"]] == (["outcome_unknown"] if owner == "exec-B" else ["ok"])
    assert res["answer"] and not res["fallback"]
    assert env.effects_count() == 1


# ==== a hung worker ===================================================================================================
def test_a_stopped_worker_is_recovered_after_the_heartbeat_bound_and_has_no_second_effect_when_continued(env):
    """Worker A (heartbeat every 0.2 s) stops itself with SIGSTOP inside the write. With --unseen-for 60 it is not
    lost; once its heartbeat is older than 1 s it is, and the recovery hands its conversation to worker B, which
    finishes it. SIGCONT: A's write completes (its one effect), A's workflow records are refused, A's ``run``
    returns B's result: one effect, one result."""
    a = env.spawn("stop", "exec-A", heartbeat=0.2, out="a.json")

    def stopped() -> bool:
        try:
            return Path(f"/proc/{a.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"
        except OSError:
            return a.poll() is not None
    _until(stopped, "A stopped")
    assert env.effects_count() == 1

    from toolwire.durable import executors_seen, recover_lost

    assert _mine(recover_lost(env.sysdb, unseen_for=60), env.workflow_id) == []
    seen = {e.executor_id: e for e in executors_seen(env.sysdb, unseen_for=60)}
    assert seen["exec-A"].seen_by == "heartbeat" and seen["exec-A"].pid == a.pid and seen["exec-A"].pending == 1

    found: list[Any] = []

    def recovered() -> bool:
        found.extend(_mine(recover_lost(env.sysdb, unseen_for=1.0), env.workflow_id))
        return bool(found)
    _until(recovered, "the heartbeat bound")
    assert [(w.executor_id, w.action) for w in found] == [("exec-A", "requeued")]

    b = env.spawn("serve", "exec-B", out="b.json", heartbeat=0.2)
    assert env.finish(b) == 0, b.log.read_text()[-2000:]  # type: ignore[attr-defined]
    os.kill(a.pid, signal.SIGCONT)
    assert env.finish(a) == 0, a.log.read_text()[-2000:]  # type: ignore[attr-defined]
    assert env.effects_count() == 1
    assert env.out("a.json")["result"] == env.out("b.json")["result"]
    assert [c["result_kind"] for c in env.out("b.json")["result"]["calls"]] == ["outcome_unknown"]


# ==== upgrades ========================================================================================================
def test_a_retired_versions_conversation_moves_to_the_new_version_only_when_asked(sqlite_env):
    """A v1 worker dies inside the write; only v2 workers run now. A plain recovery puts the conversation back
    under v1 (reported waiting for a v1 worker): the v2 worker does not run it. ``--to-version v2`` moves it (the
    recorded request and dispatch kept): the v2 worker finishes it, with one effect."""
    env = sqlite_env
    a = env.spawn("crash", "exec-A", version="v1")
    assert env.finish(a) == -signal.SIGKILL, a.log.read_text()[-2000:]  # type: ignore[attr-defined]
    sent = len(env.sim.requests)
    b = env.spawn("serve", "exec-B", version="v2", heartbeat=0.2, ready="b.ready")
    env.wait_ready("b.ready", b)

    from toolwire.durable import recover_lost

    plain = _mine(recover_lost(env.sysdb, unseen_for=0), env.workflow_id)
    assert [(w.action, w.application_version, w.waiting_for_version) for w in plain] == [("requeued", "v1", True)]
    time.sleep(3.0)  # B polls its queues many times meanwhile
    status = _status(env.sysdb, env.workflow_id)
    assert (status.status, status.app_version) == ("ENQUEUED", "v1")
    assert len(env.sim.requests) == sent and b.poll() is None

    from dbos import DBOSClient

    from toolwire.durable import enqueue

    client = DBOSClient(system_database_url=env.sysdb)
    try:  # a fresh conversation a front end enqueued (no version): waiting for any worker, not to be moved
        enqueue(client, "default", "hi", conversation_id="fresh", workflow_id=f"{env.workflow_id}-fresh",
                queue="nobody-serves-this")
    finally:
        client.destroy()
    # a front end's handle polls the conversation while it moves: it must never see it cancelled (the move was a
    # cancel then a rewind, and a handle waiting in between raised DBOS's "awaited workflow was cancelled")
    import sqlite3

    seen: set[str] = set()
    moving = threading.Event()

    def watch() -> None:
        path = env.sysdb.removeprefix("sqlite:///")
        while not moving.is_set():
            with sqlite3.connect(path, timeout=10) as conn:
                row = conn.execute("SELECT status FROM workflow_status WHERE workflow_uuid = ?",
                                   (env.workflow_id,)).fetchone()
            conn.close()
            if row:
                seen.add(row[0])

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    moved = _cli("durable", "recover", "--database", env.sysdb, "--unseen-for", "5", "--to-version", "v2", "--json")
    moving.set()
    watcher.join(10)
    assert moved.returncode == 0, moved.stderr
    assert "CANCELLED" not in seen, seen
    mine = [w for w in json.loads(moved.stdout)["workflows"] if w["workflow_id"] == env.workflow_id]
    assert [(w["action"], w["application_version"], w["to_version"]) for w in mine] == [("moved", "v1", "v2")]
    assert [w for w in json.loads(moved.stdout)["workflows"] if w["workflow_id"].endswith("-fresh")] == []
    fresh = _status(env.sysdb, f"{env.workflow_id}-fresh")
    assert (fresh.status, fresh.app_version) == ("ENQUEUED", None)
    assert env.finish(b) == 0, b.log.read_text()[-2000:]  # type: ignore[attr-defined]
    res = env.out()["result"]
    assert [c["result_kind"] for c in res["calls"]] == ["outcome_unknown"]
    assert res["answer"] and not res["fallback"]
    assert env.effects_count() == 1
    assert len(env.sim.requests) == sent + 1  # the recorded first turn was not asked again
    status = _status(env.sysdb, env.workflow_id)
    assert (status.status, status.app_version) == ("SUCCESS", "v2")

    # a recovery whose survey saw the conversation pending on the lost executor moves it only if it still is:
    # one that finished meanwhile keeps its status and its recorded steps (the move was a cancel, which does
    # nothing to a finished workflow, then a rewind, which deleted the steps its writes' ledger keys come from,
    # and the next worker ran the write again)
    from types import SimpleNamespace

    from toolwire._durable_ops import _move

    client = DBOSClient(system_database_url=env.sysdb)
    try:
        steps = len(client.list_workflow_steps(env.workflow_id))
        stale = SimpleNamespace(workflow_id=env.workflow_id, executor_id="exec-A", status="PENDING",
                                app_version="v1", queue_name=None)
        assert _move(client, stale, "v3") == "taken"
        assert len(client.list_workflow_steps(env.workflow_id)) == steps
    finally:
        client.destroy()
    status = _status(env.sysdb, env.workflow_id)
    assert (status.status, status.app_version) == ("SUCCESS", "v2")


# ==== recovery limits =================================================================================================
def test_a_conversation_whose_workers_keep_dying_ends_at_max_recovery_attempts_with_a_typed_error(sqlite_env):
    """Every worker that runs the conversation dies (SIGKILL) when it is about to ask the model for the answer,
    after the write. Each time the recovery command hands it to a new executor. With max_recovery_attempts=2,
    DBOS ends it after the first run and two recoveries: the next worker gets RecoveryLimitReached from
    ``result_of(handle)``, the workflow is MAX_RECOVERY_ATTEMPTS_EXCEEDED, and the write had one effect."""
    env = sqlite_env
    extra = ("--max-recovery-attempts", "2", "--requests", str(env.tmp / "requests"))
    first = env.spawn("crash-request", "exec-0", extra=extra)
    assert env.finish(first) == -signal.SIGKILL, first.log.read_text()[-2000:]  # type: ignore[attr-defined]
    assert env.effects_count() == 1

    from toolwire.durable import recover_lost

    deaths = 1
    for i in range(1, 6):
        assert [w.action for w in _mine(recover_lost(env.sysdb, unseen_for=0), env.workflow_id)] == ["requeued"]
        w = env.spawn("crash-request", f"exec-{i}", extra=(*extra, "--serve"), out=f"out{i}.json")
        code = env.finish(w)
        if code == 0:
            break
        assert code == -signal.SIGKILL, w.log.read_text()[-2000:]  # type: ignore[attr-defined]
        deaths += 1
    assert deaths == 3  # the first run and two recoveries
    assert env.out(f"out{i}.json")["error"] == "RecoveryLimitReached"
    assert _status(env.sysdb, env.workflow_id).status == "MAX_RECOVERY_ATTEMPTS_EXCEEDED"
    from dbos import DBOSClient

    from toolwire.durable import RecoveryLimitReached, result_of

    client = DBOSClient(system_database_url=env.sysdb)
    try:  # a front end's handle says the same
        with pytest.raises(RecoveryLimitReached) as ended:
            result_of(client.retrieve_workflow(env.workflow_id))
        assert ended.value.workflow_id == env.workflow_id
    finally:
        client.destroy()
    assert _mine(recover_lost(env.sysdb, unseen_for=0), env.workflow_id) == []  # it is over: nothing to recover
    # DurableLoop.run with the ended conversation's workflow id says the same (it raised DBOS's own error)
    again = env.spawn("crash-request", "exec-run", extra=extra, out="out-run.json")
    assert env.finish(again) == 0, again.log.read_text()[-2000:]  # type: ignore[attr-defined]
    assert env.out("out-run.json")["error"] == "RecoveryLimitReached"
    assert env.effects_count() == 1


# ==== misuse ==========================================================================================================
@pytest.mark.parametrize("unseen_for", [-1, "60", True, float("nan"), None])
def test_recover_lost_refuses_a_bound_that_is_not_seconds(tmp_path, unseen_for):
    from toolwire import UsageError
    from toolwire.durable import recover_lost

    with pytest.raises(UsageError, match="unseen_for"):
        recover_lost(f"sqlite:///{tmp_path / 'dbos.sqlite'}", unseen_for=unseen_for)


def test_recover_lost_refuses_an_empty_version_and_a_database_it_cannot_use(tmp_path):
    from toolwire import UsageError
    from toolwire.durable import RecoveryError, recover_lost

    with pytest.raises(UsageError, match="to_version"):
        recover_lost(f"sqlite:///{tmp_path / 'dbos.sqlite'}", unseen_for=1, to_version="")
    with pytest.raises(UsageError) as bad:
        recover_lost("mysql://root:hunter2@db/app", unseen_for=1)
    assert "hunter2" not in str(bad.value)
    with pytest.raises(RecoveryError):  # a typo'd path is not created
        recover_lost(f"sqlite:///{tmp_path / 'nope.sqlite'}", unseen_for=1)
    assert not (tmp_path / "nope.sqlite").exists()


def test_heartbeat_and_dbos_config_refuse_bad_arguments(tmp_path):
    from toolwire import UsageError
    from toolwire.durable import Heartbeat, dbos_config

    url = f"sqlite:///{tmp_path / 'dbos.sqlite'}"
    for kw in ({"interval": 0}, {"interval": True}, {"executor_id": ""}, {"application_version": 3}):
        with pytest.raises(UsageError):
            Heartbeat(url, **kw)
    with pytest.raises(UsageError, match="application_version"):
        dbos_config("app", url, executor_id="w1", application_version="")
    assert dbos_config("app", url, executor_id="w1", application_version="v2", log_level="WARNING") == {
        "name": "app", "system_database_url": url, "executor_id": "w1", "application_version": "v2",
        "log_level": "WARNING"}


def test_max_recovery_attempts_is_checked_and_one_value_per_process(tmp_path):
    from toolwire import Dispatcher, SQLiteLedger, UsageError
    from toolwire.durable import DurableLoop
    from toolwire.harness.demo_tools import DemoWorld

    registry = DemoWorld().registry()
    dispatcher = Dispatcher(registry, ledger=SQLiteLedger(tmp_path / "ledger.db"))
    kw = dict(model="m", registry=registry, dispatcher=dispatcher, base_url="http://127.0.0.1:9", api_key="k")
    for bad in (0, -1, True, 2.5, "3"):
        with pytest.raises(UsageError, match="max_recovery_attempts"):
            DurableLoop("anthropic", name="limits-bad", max_recovery_attempts=bad, **kw)
    with DurableLoop("anthropic", name="limits-a", max_recovery_attempts=5, **kw):
        with DurableLoop("anthropic", name="limits-b", max_recovery_attempts=5, **kw):
            pass
        with pytest.raises(UsageError, match="one value per process"):
            DurableLoop("anthropic", name="limits-c", max_recovery_attempts=7, **kw)
        with DurableLoop("anthropic", name="limits-d", **kw):  # no value: takes the process's
            pass


def test_the_recover_command_reports_misuse_on_one_line_with_exit_2(tmp_path):
    missing = _cli("durable", "recover", "--unseen-for", "5")
    assert missing.returncode == 2 and "--database" in missing.stderr
    negative = _cli("durable", "recover", "--database", f"sqlite:///{tmp_path / 'x'}", "--unseen-for", "-5")
    assert negative.returncode == 2
    secret = _cli("durable", "recover", "--database", "mysql://u:s3cret@h/db", "--unseen-for", "5")
    assert secret.returncode == 2 and "s3cret" not in secret.stderr + secret.stdout
    absent = _cli("durable", "executors", "--database", f"sqlite:///{tmp_path / 'absent.sqlite'}")
    assert absent.returncode == 1 and len(absent.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("url", ["postgresql://u:S3cretPW@[::1/db", "postgresql://u:S3cretPW@h:x1/db"])
def test_an_unreadable_postgres_url_is_a_usage_error_that_hides_the_password(url):
    """A URL whose host or port cannot be read was an internal error (ValueError, exit 1)."""
    for command in (("durable", "recover", "--unseen-for", "5"), ("durable", "executors")):
        done = _cli(*command, "--database", url)
        assert done.returncode == 2, (command, done.stderr)
        assert "S3cretPW" not in done.stderr + done.stdout and "internal error" not in done.stderr


def test_looking_and_a_dry_run_write_nothing(tmp_path):
    """``executors`` and ``recover --dry-run`` change nothing: on a database that is not DBOS's they fail
    without creating the heartbeat table (they created it, then failed)."""
    import sqlite3

    path = tmp_path / "other.sqlite"
    sqlite3.connect(path).close()
    url = f"sqlite:///{path}"
    for command in (("durable", "executors"), ("durable", "recover", "--unseen-for", "5", "--dry-run")):
        done = _cli(*command, "--database", url)
        assert done.returncode == 1, (command, done.stderr)
        with sqlite3.connect(path) as conn:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        conn.close()
        assert tables == set(), (command, tables)
