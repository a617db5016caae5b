"""`toolwire demo --workers N --kill-every S`: the killer never kills again before the run made progress since its
last kill (a finished conversation, an effect, a provider request), so a loaded machine slows the run down but
never livelocks it; a run that stops making progress for ``--stall-timeout`` seconds (or passes ``--timeout``)
fails with exit 1, and with ``--json`` still prints the report of what finished."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("dbos")

from toolwire.harness.workers import WORKER_SCENARIOS, _Supervisor  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _demo(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "toolwire", "demo", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_a_run_under_kills_ends_with_its_json_report():
    """Two workers on SQLite, one killed about every 0.5 s: the run ends (no livelock) and prints its JSON report,
    every conversation answered or in the fallback, none lost."""
    done = _demo("--workers", "2", "--kill-every", "0.5", "--provider", "anthropic", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout)
    assert doc["runs"] and all(r["error"] is None and r["answer"] for r in doc["runs"])
    assert "unfinished" not in doc or doc["unfinished"] == []


def test_a_run_past_its_timeout_prints_what_finished_and_exits_1():
    """--timeout 1: the conversations cannot all finish; the run exits 1 with one line on stderr and, with --json,
    the report: the runs that finished, the ones that did not, and why."""
    done = _demo("--workers", "1", "--provider", "gemini", "--timeout", "1", "--json")
    assert done.returncode == 1, done.stderr[-3000:]
    doc = json.loads(done.stdout)
    assert doc["error"] and "did not finish" in doc["error"]
    assert doc["unfinished"] and len(doc["runs"]) + len(doc["unfinished"]) == len(WORKER_SCENARIOS)
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_the_stall_timeout_is_checked_like_the_other_limits():
    """--stall-timeout takes positive seconds; 0 or less is a usage error (exit 2)."""
    done = _demo("--workers", "1", "--stall-timeout", "0", timeout=120)
    assert done.returncode == 2 and "stall" in done.stderr


# ---- the killer's rule, on a supervisor whose workers are stand-in processes -----------------------------------------
class _Sleepers(_Supervisor):
    """A supervisor whose worker processes are ``sleep`` processes that are ready at once."""

    def spawn(self, w) -> None:  # type: ignore[no-untyped-def]
        ready = self.tmp / f"{w.name}.{w.spawns}.ready"
        w.spawns += 1
        w.proc = subprocess.Popen(["sleep", "600"])
        ready.write_text(str(w.proc.pid))
        os.utime(ready, (time.time() - 60, time.time() - 60))  # up for a minute: old enough to be killed
        w.ready = ready


def _effect(sup: _Supervisor, pid: int) -> None:
    with sqlite3.connect(sup.effects_path) as conn:
        conn.execute("INSERT INTO effects (kind, payload, pid, conversation, at) VALUES (?, ?, ?, ?, ?)",
                     ("save_measurement", "{}", pid, "conv-1", time.time()))


def test_the_killer_never_kills_twice_without_progress_in_between(tmp_path):
    """Progress frozen: one kill, then none however long the killer waits. Then a write's effect (progress) on a
    worker: one kill inside that write, and again none after it until something else moves: a timed kill
    never follows a kill inside a write without progress in between."""
    sup = _Sleepers(2, "sqlite:///unused", "sqlite:unused", tmp_path, "http://127.0.0.1:9", "q", "run", "en",
                    kill_every=0.5, seed=3, concurrency=1)
    moved = [0]
    sup.progress = lambda: moved[0] + sup.effects.count()
    for w in sup.workers:
        sup.spawn(w)
    watcher = threading.Thread(target=sup.watch, daemon=True)
    watcher.start()
    try:
        deadline = time.monotonic() + 60
        while not sup.kills and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(sup.kills) == 1
        time.sleep(3)  # about six kill intervals
        assert len(sup.kills) == 1, sup.kills

        victim = sup.workers[0]
        _effect(sup, victim.proc.pid)
        deadline = time.monotonic() + 60
        while len(sup.kills) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(sup.kills) == 2 and sup.kills[1].in_write, sup.kills
        time.sleep(3)
        assert len(sup.kills) == 2, sup.kills

        moved[0] += 1  # e.g. a provider request
        deadline = time.monotonic() + 60
        while len(sup.kills) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(sup.kills) == 3, sup.kills
    finally:
        sup.stop()
        watcher.join(10)
        for w in sup.workers:
            if w.proc is not None and w.proc.poll() is None:
                os.kill(w.proc.pid, signal.SIGKILL)


def test_workers_that_never_start_end_at_the_stall_timeout_with_the_json_report():
    """The database accepts connections and never answers: the workers never become ready. The run ends after
    --stall-timeout (it waited a fixed 120 s, ignoring it) and still prints its JSON report (it printed none),
    exit 1 with one line on stderr."""
    import socket

    blackhole = socket.socket()
    blackhole.bind(("127.0.0.1", 0))
    blackhole.listen(16)
    port = blackhole.getsockname()[1]
    try:
        done = _demo("--workers", "1", "--provider", "anthropic", "--stall-timeout", "3", "--json",
                     "--database", f"postgresql://nobody@127.0.0.1:{port}/nothing", timeout=120)
    finally:
        blackhole.close()
    assert done.returncode == 1, done.stderr[-3000:]
    doc = json.loads(done.stdout)
    assert "not ready within 3 s" in doc["error"] and doc["runs"] == []
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
