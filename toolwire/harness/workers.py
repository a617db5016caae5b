"""``toolwire demo --workers N``: the demo scenarios as durable conversations taken by DBOS worker processes.

This process (the supervisor) starts the simulated provider on loopback, with each conversation's fault plan of
its own, and N worker processes (``python -m toolwire.harness.workers``). Each worker creates the demo's
``DurableLoop``s (one per dialect, and one per dialect whose food catalogue is down), a ledger on the same
database (``SQLiteLedger`` next to a SQLite system database, ``PostgresLedger`` on a PostgreSQL one), registers
the queue and launches DBOS under its own executor id. The supervisor enqueues one conversation per dialect and
scenario through a ``dbos.DBOSClient`` and waits for all of them.

With ``kill_every``, a killer thread sends SIGKILL to a random worker about every ``kill_every`` seconds, and also,
half of the time, to the worker that has just recorded a write's effect (the handler then waits a moment before
it returns, so the kill lands between the effect and the ledger's completion). A killed worker is restarted under
the same executor id; DBOS, launching there, recovers the workflows it held, and any worker may finish them.
Effects are counted per conversation in a SQLite file; the log of each worker (JSON lines) tells which worker
started, recovered and finished which conversation.

Needs the ``dbos`` extra (and ``pg`` for PostgreSQL).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Sequence, TextIO

import msgspec

from ..errors import ToolwireError, UsageError
from .demo import (
    DEMO_RETRY,
    MCP_SCENARIOS,
    SCENARIO_NAMES,
    DemoRun,
    _fault_plan,
    check_selection,
    demo_model,
    print_run,
    runs_to_json,
    sim_providers,
)

#: the scenarios a durable worker runs: all but those whose tools are a local MCP server process
WORKER_SCENARIOS = tuple(s for s in SCENARIO_NAMES if s not in MCP_SCENARIOS)
from .demo_tools import EffectLog

__all__ = ["Kill", "WorkerRun", "WorkersError", "WorkersReport", "run_workers", "print_report", "report_to_json"]

#: how long a worker's write handler waits after its effect when kills are on (the window a kill can land in)
WRITE_PAUSE = 0.25
_READY_TIMEOUT = 120.0


class WorkersError(ToolwireError):
    """The workers could not do the job: one could not start, one died on its own, or conversations did not
    finish in time (the CLI exits 1). ``report``: once conversations were enqueued, the ``WorkersReport`` of
    what finished (its ``error`` and ``unfinished`` set), else None."""

    report: "WorkersReport | None" = None


#: the worker reads its database URLs from the environment, never from its command line (``ps`` shows that)
_DATABASE_ENV = "TOOLWIRE_WORKER_DATABASE"
_LEDGER_ENV = "TOOLWIRE_WORKER_LEDGER"


class Kill(msgspec.Struct, kw_only=True):
    """One SIGKILL: the worker, its process, when (Unix time), and whether it landed inside a write (after
    its effect, before the handler returned), then for which conversation."""

    worker: str
    pid: int
    at: float
    in_write: bool = False
    conversation_id: str | None = None
    #: whether the worker was started again (not when the run was already ending)
    restarted: bool = False


class WorkerRun(msgspec.Struct, kw_only=True):
    """A demo run, with the worker that finished it, how many times it was resumed after a kill, and how many
    kills hit a worker while it held the conversation."""

    run: DemoRun
    conversation_id: str
    workflow_id: str
    worker: str | None
    recoveries: int = 0
    kills: int = 0
    error: str | None = None


class WorkersReport(msgspec.Struct, kw_only=True):
    workers: int
    database: str
    runs: list[WorkerRun]
    kills: list[Kill]
    restarts: int
    seconds: float
    #: from the first enqueue to the last conversation's end (without the workers' start)
    busy_seconds: float = 0.0
    #: DBOS steps recorded by the run's conversations (``run_workers(count_steps=True)``), else None
    steps: int | None = None
    #: CPU seconds from the first enqueue to the last conversation's end: ``supervisor`` (this process, with the
    #: simulated provider's threads) and ``workers`` (all worker processes; Linux only, and only the processes
    #: alive at both ends: without kills, all of them), else None
    cpu_seconds: dict[str, float] | None = None
    #: when the run failed: why, and the workflows of the conversations that did not finish
    error: str | None = None
    unfinished: list[str] = []


# ==== the supervisor ===================================================================================================
def _database(url: str | None, tmp: Path) -> tuple[str, str]:
    """The DBOS system database URL and the ledger spec (``sqlite:PATH`` or the PostgreSQL URL)."""
    if url is None:
        return f"sqlite:///{tmp / 'dbos.sqlite'}", f"sqlite:{tmp / 'ledger.db'}"
    if not isinstance(url, str):
        raise UsageError("the database must be a sqlite:///PATH or postgresql:// URL")
    if url.startswith("sqlite:///") and len(url) > len("sqlite:///"):
        path = Path(url[len("sqlite:///"):])
        if not path.parent.is_dir():
            raise UsageError(f"--database: the directory {str(path.parent)!r} does not exist")
        return url, f"sqlite:{tmp / 'ledger.db'}"
    if url.startswith(("postgresql://", "postgres://")):
        url = "postgresql://" + url.split("://", 1)[1]
        return url, url
    # never echoed: what was given may hold a password in a form we do not parse
    raise UsageError("--database must be a sqlite:///PATH or postgresql://USER@HOST:PORT/DB URL")


def _shown(url: str) -> str:
    """``url`` without its password (in the authority or as a query parameter); a SQLite URL as it is."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    if url.startswith("sqlite:"):
        return url

    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            creds, _, host = netloc.rpartition("@")
            netloc = (creds.split(":", 1)[0] + ":***" if ":" in creds else creds) + "@" + host
        query = urlencode([(k, "***" if "pass" in k.lower() else v)
                           for k, v in parse_qsl(parts.query, keep_blank_values=True)])
        return urlunsplit((parts.scheme, netloc, parts.path, query, ""))
    except ValueError:
        return "<database URL>"


class _Worker:
    def __init__(self, index: int, run_id: str) -> None:
        self.index = index
        self.name = f"worker-{index}"
        self.executor_id = f"{run_id}-{self.name}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.killed: set[int] = set()  # pids we killed
        self.spawns = 0


class _Supervisor:
    def __init__(self, workers: int, sysdb: str, ledger: str, tmp: Path, sim_url: str, queue: str,
                 run_id: str, lang: str, kill_every: float | None, seed: int | None, concurrency: int) -> None:
        self.sysdb, self.ledger, self.tmp, self.sim_url, self.queue = sysdb, ledger, tmp, sim_url, queue
        self.lang = lang
        self.concurrency = concurrency
        self.kill_every = kill_every
        self.rng = random.Random(seed)
        self.workers = [_Worker(i, run_id) for i in range(1, workers + 1)]
        self.effects_path = tmp / "effects.db"
        self.effects = EffectLog(self.effects_path)
        self.kills: list[Kill] = []
        self.restarts = 0
        #: what the run has done so far (conversations finished, effects, model requests), as a function the
        #: killer reads: a kill (timed or inside a write) waits until the count moved since the last one, so that
        #: however slow the machine, every kill is paid for by work done and the run always finishes
        self.progress: Callable[[], int] = lambda: 0
        self._progress_at_kill = -1
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.failure: str | None = None

    # ---- processes --------------------------------------------------------------------------------------------
    def spawn(self, w: _Worker) -> None:
        ready = self.tmp / f"{w.name}.{w.spawns}.ready"
        w.spawns += 1
        # the worker dies with the thread that starts it (PR_SET_PDEATHSIG): the main thread or the watcher,
        # both live as long as the run
        cmd = [sys.executable, "-m", "toolwire.harness.workers", "--supervisor", str(os.getpid()),
               "--executor-id", w.executor_id,
               "--effects", str(self.effects_path),
               "--sim", self.sim_url, "--queue", self.queue, "--lang", self.lang, "--ready", str(ready),
               "--log", str(self.tmp / f"{w.name}.log"), "--concurrency", str(self.concurrency),
               "--write-pause", str(WRITE_PAUSE if self.kill_every else 0.0)]
        stderr = open(self.tmp / f"{w.name}.stderr", "ab")
        try:
            env = _child_env()
            env[_DATABASE_ENV], env[_LEDGER_ENV] = self.sysdb, self.ledger
            w.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                                      env=env)
        finally:
            stderr.close()
        w.ready = ready  # type: ignore[attr-defined]

    def wait_ready(self, limit: float = _READY_TIMEOUT) -> None:
        """Until every worker is ready; ``limit`` seconds without one more becoming ready (a start is the run's
        progress then: the stall timeout, when shorter) is a ``WorkersError``."""
        deadline = time.monotonic() + limit
        for w in self.workers:
            while not w.ready.exists():  # type: ignore[attr-defined]
                if w.proc is not None and w.proc.poll() is not None:
                    raise WorkersError(f"{w.name} exited ({w.proc.returncode}) before it was ready: "
                                     f"{self.stderr_tail(w)}")
                if time.monotonic() > deadline:
                    raise WorkersError(f"{w.name} was not ready within {limit:g} s: {self.stderr_tail(w)}")
                time.sleep(0.05)
            deadline = time.monotonic() + limit

    def stderr_tail(self, w: _Worker) -> str:
        """The worker's last line on stderr (the exception that ended it), without the traceback."""
        path = self.tmp / f"{w.name}.stderr"
        text = path.read_text(errors="replace") if path.exists() else ""
        lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
        return lines[-1][:500] if lines else "(no output)"

    def kill(self, w: _Worker, *, in_write: bool = False, conversation_id: str | None = None) -> None:
        with self.lock:
            proc = w.proc
            if proc is None or proc.poll() is not None:
                return
            try:
                os.kill(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                return
            w.killed.add(proc.pid)
            kill = Kill(worker=w.name, pid=proc.pid, at=time.time(), in_write=in_write,
                        conversation_id=conversation_id)
            self.kills.append(kill)
        proc.wait()
        # what the run had done when the killed process was gone: no kill again before it moves
        self._progress_at_kill = self.progress()
        kill.restarted = self.restart(w)

    def may_kill(self) -> bool:
        """The killer's rule: no kill (timed or inside a write) before the run made progress since the last one."""
        return self.progress() != self._progress_at_kill

    def restart(self, w: _Worker) -> bool:
        """Start ``w`` again under its executor id (not once the run is ending); whether it was."""
        with self.lock:
            if self.stopping.is_set():
                return False
            self.restarts += 1
            self.spawn(w)
            return True

    def watch(self) -> None:
        """Restart workers that die on their own (that is a failure of the run, reported); kill when asked."""
        next_kill = time.monotonic() + self._interval() if self.kill_every else None
        seen_effect = 0
        while not self.stopping.wait(0.02):
            for w in self.workers:
                proc = w.proc
                if proc is not None and proc.poll() is not None and proc.pid not in w.killed:
                    if self.stopping.is_set():
                        break  # stop() ended it (SIGTERM) while this pass was under way: not a failure
                    self.failure = self.failure or f"{w.name} exited ({proc.returncode}): {self.stderr_tail(w)}"
                    w.killed.add(proc.pid)  # reported once
                    self.restart(w)
            if not self.kill_every:
                continue
            for _id, _kind, pid, conversation, _at in self.effects.rows(seen_effect):
                seen_effect = _id
                # the first effect always, then half of them: every killed run has a kill inside a write
                if not any(k.in_write for k in self.kills) or self.rng.random() < 0.5:
                    victim = next((w for w in self.workers if w.proc is not None and w.proc.pid == pid), None)
                    if victim is not None and self.may_kill():
                        self.kill(victim, in_write=True, conversation_id=conversation)
            if next_kill is not None and time.monotonic() >= next_kill:
                # only a worker that has been up for a while: one killed while it starts never gets to work
                ready = [w for w in self.workers if self._up_for(w) >= self.kill_every / 2]
                if ready and self.may_kill():
                    self.kill(self.rng.choice(ready))
                next_kill = time.monotonic() + self._interval()

    def _up_for(self, w: _Worker) -> float:
        """Seconds since the worker's current process became ready (0 while it starts)."""
        try:
            return max(0.0, time.time() - w.ready.stat().st_mtime)  # type: ignore[attr-defined]
        except OSError:
            return 0.0

    def _interval(self) -> float:
        assert self.kill_every is not None
        return self.kill_every * self.rng.uniform(0.5, 1.5)

    def stop(self) -> None:
        with self.lock:
            self.stopping.set()
            procs = [w.proc for w in self.workers if w.proc is not None]
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 15
        for proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _conversation_id(run_id: str, provider: str, scenario: str) -> str:
    return f"demo-{run_id}-{provider}-{scenario}"


def run_workers(workers: int = 4, database: str | None = None, *, kill_every: float | None = None,
                providers: Sequence[str] | None = None, scenarios: Sequence[str] = WORKER_SCENARIOS, lang: str = "en",
                timeout: float | None = None, stall_timeout: float = 120.0, seed: int | None = None,
                rounds: int = 1, concurrency: int = 4,
                on_run: Callable[[WorkerRun], None] | None = None, count_steps: bool = False) -> WorkersReport:
    """Run every scenario for every dialect as a durable conversation on ``workers`` DBOS worker processes.

    ``database``: the DBOS system database (and the ledger's): ``sqlite:///PATH`` or ``postgresql://…``; a SQLite
    file in a temporary directory when None. ``kill_every``: seconds between random SIGKILLs (None: no kills;
    never a kill before the run made progress since the last one). ``rounds``: conversations per dialect and
    scenario (the fault plans are per dialect and scenario, so the scenarios with faults see them in the first
    conversation that asks). ``concurrency``: conversations one worker runs at once. ``timeout``: seconds for the
    whole run (None: no limit); ``stall_timeout``: seconds without progress (no conversation finished, no
    effect, no provider request) after which the run fails. ``count_steps``: count the DBOS steps the
    conversations recorded (``steps`` in the report). The run's queue and its workflows (status, inputs, outputs,
    steps) are removed from the DBOS system database when it ends; the ledger's rows are kept.

    Raises ``UsageError`` for bad arguments, ``WorkersError`` for workers that cannot start or die on their own,
    or conversations that did not finish (its ``report`` then has what finished)."""
    from dbos import DBOSClient

    from ..sim import SimProvider
    from .fallback import LOCALES

    if not isinstance(workers, int) or isinstance(workers, bool) or not 1 <= workers <= 64:
        raise UsageError(f"workers must be between 1 and 64, got {workers!r}")
    if kill_every is not None and not (isinstance(kill_every, (int, float)) and 0.5 <= kill_every <= 3600):
        raise UsageError(f"kill_every must be between 0.5 and 3600 seconds (a worker takes about a second to "
                         f"start), got {kill_every!r}")
    for what, value in (("timeout", timeout), ("stall_timeout", stall_timeout)):
        if (value is not None or what == "stall_timeout") and not (
                isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < float("inf")):
            raise UsageError(f"{what} must be a positive number of seconds, got {value!r}")
    if not isinstance(rounds, int) or isinstance(rounds, bool) or not 1 <= rounds <= 1000:
        raise UsageError(f"rounds must be between 1 and 1000, got {rounds!r}")
    if not isinstance(concurrency, int) or isinstance(concurrency, bool) or not 1 <= concurrency <= 256:
        raise UsageError(f"concurrency must be between 1 and 256, got {concurrency!r}")
    if lang not in LOCALES:
        raise UsageError(f"unknown language {lang!r}; expected one of: {', '.join(LOCALES)}")
    providers = sim_providers() if providers is None else providers
    check_selection(providers, scenarios)
    if set(scenarios) & set(MCP_SCENARIOS):
        raise UsageError(f"scenarios {', '.join(MCP_SCENARIOS)} run a local MCP server: not on durable workers")
    from ..sim import SCENARIOS

    run_id = uuid.uuid4().hex[:10]
    queue = f"toolwire-demo-{run_id}"
    started = time.monotonic()
    sim = SimProvider()
    for provider in providers:
        for scenario in scenarios:
            # every conversation its own plan (an empty one too: requests are then counted per conversation)
            plan = _fault_plan(scenario)
            then = plan[-1] if scenario == "provider_down" else None
            sim.plan(plan, then=then, scenario=scenario, dialect=provider)
    with tempfile.TemporaryDirectory(prefix="toolwire-workers-") as tmpdir, sim.serve() as sim_url:
        tmp = Path(tmpdir)
        sysdb, ledger = _database(database, tmp)
        sup = _Supervisor(workers, sysdb, ledger, tmp, sim_url, queue, run_id, lang, kill_every, seed, concurrency)
        finished: list[int] = [0]
        sup.progress = lambda: finished[0] + sup.effects.count() + len(sim.requests)
        watcher = threading.Thread(target=sup.watch, name="toolwire-workers-watch", daemon=True)
        client = None
        pending: list[tuple[str, str, str, str, Any]] = []
        done: dict[str, WorkerRun] = {}
        steps: int | None = None
        cpu: dict[str, float] | None = None
        error: WorkersError | None = None
        busy = busy_from = 0.0
        try:
            if ledger.startswith("sqlite:"):
                # created here, once: workers opening a new SQLite file together race to switch it to WAL, and
                # SQLite answers the loser "database is locked" at once
                from ..registry import SQLiteLedger

                SQLiteLedger(ledger[len("sqlite:"):]).close()
            for w in sup.workers:
                sup.spawn(w)
            sup.wait_ready(min(_READY_TIMEOUT, stall_timeout if stall_timeout is not None else _READY_TIMEOUT))
            client = DBOSClient(system_database_url=sysdb)
            watcher.start()
            from ..durable import enqueue

            busy_from = time.monotonic()
            cpu_at = _cpu_now(sup)
            for provider, scenario, round_ in ((p, s, r) for r in range(rounds) for p in providers
                                               for s in scenarios):
                conv = _conversation_id(run_id, provider, scenario) + (f"-{round_}" if round_ else "")
                name = f"demo:{provider}" + (":catalogue_down" if scenario == "catalogue_down" else "")
                wf = f"{conv}:0"
                handle = enqueue(client, name, SCENARIOS[scenario].prompts[lang], conversation_id=conv,
                                 workflow_id=wf, queue=queue)
                pending.append((provider, scenario, conv, wf, handle))
            runs = _collect(pending, sup, sim, lang, client, None if timeout is None else started + timeout,
                            stall_timeout, on_run, finished, done)
            busy = time.monotonic() - busy_from
            cpu = _cpu_spent(cpu_at, _cpu_now(sup))
        except WorkersError as exc:
            error = exc
        finally:
            sup.stop()
            if watcher.is_alive():
                watcher.join(timeout=5)
            try:
                if client is None and any(w.ready.exists() for w in sup.workers if hasattr(w, "ready")):
                    client = DBOSClient(system_database_url=sysdb)  # the workers registered the queue
                if client is not None:
                    steps = _remove_queue(client, queue, [p[3] for p in pending], count_steps=count_steps)
                    from .._durable_ops import forget_executors

                    forget_executors(sysdb, [w.executor_id for w in sup.workers])  # the run's heartbeat rows
            except Exception as exc:  # noqa: BLE001 - the database went away: the run fails, with its report
                left = WorkersError(f"could not remove the run's queue {queue!r} from the DBOS system database "
                                    f"({type(exc).__name__}): {str(exc).splitlines()[0][:200] if str(exc) else ''}")
                error = error or left
            finally:
                if client is not None:
                    client.destroy()
        if error is None and sup.failure is not None:
            error = WorkersError(f"a worker failed: {sup.failure}")
        if error is not None:
            runs = [done[wf] for *_, wf, _h in pending if wf in done]
            if busy_from and not busy:
                busy = time.monotonic() - busy_from
        _attribute(runs, sup)
        report = WorkersReport(workers=workers, database=_shown(database) if database else "sqlite (temporary)",
                               runs=runs, kills=sup.kills, restarts=sup.restarts,
                               seconds=round(time.monotonic() - started, 3), busy_seconds=round(busy, 3),
                               steps=steps, cpu_seconds=cpu)
        if error is not None:  # what finished, and what did not (nothing, when the workers never started)
            report.unfinished = [wf for *_, wf, _h in pending if wf not in done]
            report.error = str(error)
            error.report = report
            raise error
        return report


def _cpu_now(sup: _Supervisor) -> tuple[float, dict[int, float]]:
    """This process's CPU seconds, and each worker process's (from ``/proc``; none where there is none)."""
    workers: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    for w in sup.workers:
        if w.proc is None:
            continue
        try:
            fields = Path(f"/proc/{w.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            workers[w.proc.pid] = (int(fields[11]) + int(fields[12])) / tick  # utime + stime
        except (OSError, ValueError, IndexError):
            continue
    return time.process_time(), workers


def _cpu_spent(before: tuple[float, dict[int, float]], after: tuple[float, dict[int, float]]) -> dict[str, float]:
    spent = {"supervisor": round(after[0] - before[0], 3)}
    if before[1] and after[1]:
        spent["workers"] = round(sum(after[1][pid] - before[1][pid] for pid in after[1] if pid in before[1]), 3)
    return spent


def _remove_queue(client: Any, queue: str, workflow_ids: list[str], *, count_steps: bool = False) -> int | None:
    """Delete the run's workflows (with their inputs, outputs and steps) and its queue from the DBOS system
    database, once the workers are stopped: nothing of the run is left to poll. The number of steps the
    workflows recorded, when asked."""
    found = client.list_workflows(queue_name=queue, load_input=False, load_output=False)
    ids = list(dict.fromkeys([*workflow_ids, *(w.workflow_id for w in found)]))
    steps = sum(len(client.list_workflow_steps(wf, load_output=False)) for wf in ids) if count_steps else None
    if ids:
        client.delete_workflows(ids)
    client.delete_queue(queue)
    return steps


_TERMINAL = ["SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"]


class _Stall:
    """When the run last made progress (the supervisor's count moved): the run fails after ``timeout`` seconds
    without any."""

    def __init__(self, timeout: float, value: int, now: float) -> None:
        self.timeout, self.value, self.at = timeout, value, now

    def stalled(self, value: int, now: float) -> bool:
        if value != self.value:
            self.value, self.at = value, now
        return now - self.at > self.timeout


def _collect(pending: list[tuple[str, str, str, str, Any]], sup: _Supervisor, sim: Any, lang: str, client: Any,
             deadline: float | None, stall_timeout: float, on_run: Callable[[WorkerRun], None] | None,
             finished: list[int], done: dict[str, WorkerRun]) -> list[WorkerRun]:
    """Wait for the conversations: one query for all those still open every quarter second (never one per
    conversation), each result read once. Fills ``done``, so that a failure still has what finished."""
    from ..durable import result_of
    from ..sim import SCENARIOS
    from .loop import LoopResult

    where = {wf: (provider, scenario, conv) for provider, scenario, conv, wf, _h in pending}
    stall = _Stall(stall_timeout, sup.progress(), time.monotonic())
    while len(done) < len(pending):
        if sup.failure is not None:
            raise WorkersError(f"a worker failed: {sup.failure}")
        open_ids = [wf for wf in where if wf not in done]
        for status in client.list_workflows(workflow_ids=open_ids, status=_TERMINAL, load_input=False):
            wf = status.workflow_id
            provider, scenario, conv = where[wf]
            error = None
            if status.status == "SUCCESS":
                result = result_of(status.output)
            else:
                error = f"{status.status}: {status.error!r}"
                result = LoopResult(conversation_id=conv, answer="", fallback=True)
            effects = {k: sup.effects.count(k, conversation=conv) for k in ("save_measurement", "add_food_to_meal")}
            requests = sum(1 for r in sim.requests if r.dialect == provider and r.scenario == scenario)
            run = DemoRun(provider=provider, scenario=scenario, prompt=SCENARIOS[scenario].prompts[lang],
                          result=result, effects=effects, requests=requests)
            wr = WorkerRun(run=run, conversation_id=conv, workflow_id=wf, worker=_worker_name(status.executor_id),
                           error=error)
            done[wf] = wr
            finished[0] = len(done)
            if on_run is not None:
                on_run(wr)
        if len(done) < len(pending):
            now = time.monotonic()
            missing = len(pending) - len(done)
            if deadline is not None and now > deadline:
                raise WorkersError(f"{missing} conversation(s) did not finish in time")
            if stall.stalled(sup.progress(), now):
                raise WorkersError(f"{missing} conversation(s) did not finish: no progress for "
                                   f"{stall_timeout:g} s")
            time.sleep(0.25)
    return [done[wf] for *_, wf, _h in pending]


def _worker_name(executor_id: str | None) -> str | None:
    if not executor_id:
        return None
    return executor_id.split("-", 1)[1] if "-worker-" in executor_id else executor_id


def _events(sup: _Supervisor) -> list[tuple[float, str, str, str]]:
    """``(unix time, worker, event, workflow_id)`` of the durable prompt events in every worker's log."""
    out: list[tuple[float, str, str, str]] = []
    for w in sup.workers:
        path = sup.tmp / f"{w.name}.log"
        if not path.exists():
            continue
        for line in path.read_text(errors="replace").splitlines():
            try:
                ev = json.loads(line)
            except ValueError:
                continue  # a line cut by a kill
            if not isinstance(ev, dict) or ev.get("event") not in ("durable.prompt_started",
                                                                   "durable.prompt_finished"):
                continue
            event = ev["event"] if ev["event"] == "durable.prompt_finished" or not ev.get("recovered") \
                else "durable.prompt_recovered"
            out.append((float(ev.get("at", 0.0)), w.name, event, str(ev.get("workflow_id"))))
    out.sort()
    return out


def _attribute(runs: list[WorkerRun], sup: _Supervisor) -> None:
    """Per run: the recoveries its workers logged, and the kills that hit a worker while it held the run."""
    events = _events(sup)
    for wr in runs:
        mine = [(t, w, e) for t, w, e, wf in events if wf == wr.workflow_id]
        wr.recoveries = sum(1 for _, _, e in mine if e == "durable.prompt_recovered")
        spans: list[tuple[str, float, float]] = []  # worker, from, to
        for i, (t, w, e) in enumerate(mine):
            if e == "durable.prompt_finished":
                continue
            end = next((t2 for t2, w2, e2 in mine[i + 1:] if w2 == w or e2 != "durable.prompt_finished"),
                       float("inf"))
            spans.append((w, t, end))
        wr.kills = sum(1 for k in sup.kills for w, a, b in spans if k.worker == w and a <= k.at < b)


# ==== output =============================================================================================================
def report_to_json(report: WorkersReport) -> dict[str, Any]:
    """``toolwire demo --workers N --json``: the ``toolwire demo --json`` runs, each with ``worker``,
    ``recoveries`` and ``kills``, plus the kills (a contract); a failed run also has ``error`` and
    ``unfinished``."""
    doc = runs_to_json([wr.run for wr in report.runs])
    for entry, wr in zip(doc["runs"], report.runs):
        entry.update(conversation_id=wr.conversation_id, worker=wr.worker, recoveries=wr.recoveries,
                     kills=wr.kills, error=wr.error)
    doc.update(workers=report.workers, database=report.database, restarts=report.restarts,
               seconds=report.seconds,
               kills=[{"worker": k.worker, "pid": k.pid, "at": k.at, "in_write": k.in_write,
                       "conversation_id": k.conversation_id, "restarted": k.restarted} for k in report.kills])
    if report.error is not None:  # a failed run: why, and the workflows of the conversations that did not finish
        doc.update(error=report.error, unfinished=report.unfinished)
    return doc


def print_worker_run(wr: WorkerRun, out: TextIO) -> None:
    print_run(wr.run, out)
    extra = f", resumed {wr.recoveries}× after {wr.kills} kill(s)" if wr.recoveries or wr.kills else ""
    out.write(f"  finished by {wr.worker or '?'}{extra}\n")
    if wr.error:
        out.write(f"  error: {wr.error}\n")


def print_report(report: WorkersReport, out: TextIO) -> None:
    answered = sum(1 for r in report.runs if not r.run.result.fallback)
    in_write = sum(1 for k in report.kills if k.in_write)
    out.write(f"\n{len(report.runs)} runs on {report.workers} workers ({report.database}) in {report.seconds:.1f} s: "
              f"{answered} answered by the model, {len(report.runs) - answered} fallback; "
              f"{len(report.kills)} kills ({in_write} inside a write), {report.restarts} restarts, "
              f"{sum(r.recoveries for r in report.runs)} recoveries\n")


# ==== the worker process =================================================================================================
def _die_with_parent() -> bool:
    """On Linux, have the kernel send SIGTERM to this process when the thread that started it ends (the
    supervisor died); whether it could (elsewhere the worker polls ``getppid()``). ``TOOLWIRE_WORKER_PDEATHSIG=0``
    leaves it to the polling."""
    if not sys.platform.startswith("linux") or os.environ.get("TOOLWIRE_WORKER_PDEATHSIG") == "0":
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(1, int(signal.SIGTERM), 0, 0, 0) == 0  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return False


def _watch_supervisor(supervisor: int, stop: threading.Event, ready: threading.Event) -> None:
    """Poll ``getppid()`` against the supervisor's pid: once it has gone (or SIGTERM came), a worker that is
    still starting leaves at once (it holds nothing yet); a ready one is stopped, and made to leave if its
    clean stop takes more than 30 s."""
    def run() -> None:
        while not stop.wait(0.2):
            if os.getppid() != supervisor:
                stop.set()
        if not ready.is_set():
            os._exit(1)
        time.sleep(30)
        os._exit(1)

    threading.Thread(target=run, name="toolwire-worker-supervisor", daemon=True).start()


def _worker_main(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m toolwire.harness.workers",
                                 description="one DBOS worker of toolwire demo --workers")
    ap.add_argument("--supervisor", type=int, required=True, help="the pid of the supervisor (the parent)")
    ap.add_argument("--executor-id", required=True)
    ap.add_argument("--effects", required=True)
    ap.add_argument("--sim", required=True)
    ap.add_argument("--queue", required=True)
    ap.add_argument("--lang", default="en")
    ap.add_argument("--ready", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--write-pause", type=float, default=0.0)
    ap.add_argument("--concurrency", type=int, default=4)
    args = ap.parse_args(argv)

    # before anything else: a worker never outlives its supervisor, not even one that died while it started
    _die_with_parent()  # first, then the check: a death between the two is still seen
    if os.getppid() != args.supervisor:
        sys.stderr.write(f"the supervisor (pid {args.supervisor}) is not this worker's parent (any more): "
                         "not starting\n")
        return 1
    stop, ready = threading.Event(), threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    _watch_supervisor(args.supervisor, stop, ready)

    import structlog
    from dbos import DBOS

    from ..durable import DurableLoop, Heartbeat
    from ..logs import configure_logging, redact_secrets
    from ..registry import Dispatcher, PostgresLedger, SQLiteLedger
    from .demo_tools import DemoWorld

    log = open(args.log, "a", buffering=1, encoding="utf-8")
    configure_logging("json", "info", stream=log)
    structlog.configure(processors=[structlog.contextvars.merge_contextvars, structlog.processors.add_log_level,
                                    structlog.processors.TimeStamper(fmt=None, key="at"), redact_secrets,
                                    structlog.processors.JSONRenderer()])

    database, ledger_spec = os.environ[_DATABASE_ENV], os.environ[_LEDGER_ENV]
    ledger: Any
    if ledger_spec.startswith("sqlite:"):
        ledger = SQLiteLedger(ledger_spec[len("sqlite:"):])
    else:
        ledger = PostgresLedger(ledger_spec, pool_size=4, timeout=30)
    loops = []
    for provider in sim_providers():
        for variant in ("", ":catalogue_down"):
            world = DemoWorld(args.effects)
            world.catalogue_up = not variant
            registry = world.registry(timeout=5.0, write_delay=args.write_pause)
            loops.append(DurableLoop(provider, name=f"demo:{provider}{variant}", model=demo_model(provider),
                                     registry=registry, dispatcher=Dispatcher(registry, ledger=ledger, backoff=0.01),
                                     base_url=args.sim, api_key="sim-key", locale=args.lang, retry=DEMO_RETRY,
                                     timeout=5.0))
    DBOS(config={"name": "toolwire-demo", "system_database_url": database, "executor_id": args.executor_id,
                 "log_level": "WARNING"})
    # only this run's queue: queues other runs left in the system database are not polled (each one polled is a
    # thread and a query every polling interval)
    DBOS.listen_queues([args.queue])
    DBOS.launch()
    Heartbeat(database, interval=2.0).start()  # toolwire durable recover sees this worker alive
    DBOS.register_queue(args.queue, worker_concurrency=args.concurrency, polling_interval_sec=0.1)
    ready.set()
    if stop.is_set():  # the supervisor went (or SIGTERM came) while DBOS launched
        os._exit(1)
    Path(args.ready).write_text(str(os.getpid()))
    while not stop.wait(0.5):  # SIGTERM, SIGINT or the supervisor gone (see _watch_supervisor)
        pass
    DBOS.destroy(workflow_completion_timeout_sec=5)
    for loop in loops:
        loop.close()
    return 0


if __name__ == "__main__":
    sys.exit(_worker_main(sys.argv[1:]))
