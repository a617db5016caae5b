"""A `toolwire demo --workers` worker process never outlives its supervisor: not when the supervisor dies while the
worker is still starting (before its ready file), not after, and not when it is started for a supervisor that is
not its parent (any more)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("dbos")

ROOT = Path(__file__).resolve().parents[2]

#: a supervisor: starts one worker for itself, prints the worker's pid, then waits to be killed
SUPERVISOR = textwrap.dedent("""
    import os, subprocess, sys, time
    tmp = sys.argv[1]
    cmd = [sys.executable, "-m", "toolwire.harness.workers", "--supervisor", str(os.getpid()),
           "--executor-id", "orphan-test", "--effects", tmp + "/effects.db", "--sim", "http://127.0.0.1:9",
           "--queue", "orphan-test", "--ready", tmp + "/ready", "--log", tmp + "/worker.log"]
    worker = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=open(tmp + "/worker.stderr", "ab"))
    print(worker.pid, flush=True)
    time.sleep(600)
""")


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _env(tmp_path: Path, pdeathsig: bool) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               TOOLWIRE_WORKER_DATABASE=f"sqlite:///{tmp_path}/dbos.sqlite",
               TOOLWIRE_WORKER_LEDGER=f"sqlite:{tmp_path}/ledger.db")
    if not pdeathsig:
        env["TOOLWIRE_WORKER_PDEATHSIG"] = "0"  # as on a platform without prctl: polling getppid() only
    return env


def _wait_gone(pid: int, bound: float = 60.0) -> bool:
    deadline = time.monotonic() + bound
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not _alive(pid)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("pdeathsig", [True, False], ids=["pdeathsig", "polling"])
@pytest.mark.parametrize("when", ["while_starting", "when_ready"])
def test_a_worker_leaves_when_its_supervisor_is_killed(tmp_path, when, pdeathsig):
    """SIGKILL to the supervisor while its worker starts, or once it is ready: the worker is gone within 60 s
    (by PR_SET_PDEATHSIG on Linux, and by polling getppid() where that is not available)."""
    script = tmp_path / "supervisor.py"
    script.write_text(SUPERVISOR)
    sup = subprocess.Popen([sys.executable, str(script), str(tmp_path)], cwd=tmp_path, env=_env(tmp_path, pdeathsig),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    worker = 0
    try:
        worker = int(sup.stdout.readline())
        ready = tmp_path / "ready"
        if when == "while_starting":
            time.sleep(0.3)  # the worker is importing / launching DBOS
            assert not ready.exists(), "the worker was ready before the supervisor could be killed"
        else:
            deadline = time.monotonic() + 120
            while not ready.exists() and time.monotonic() < deadline:
                assert _alive(worker), (tmp_path / "worker.stderr").read_text()[-2000:]
                time.sleep(0.05)
            assert ready.exists(), "the worker never got ready"
        assert _alive(worker), (tmp_path / "worker.stderr").read_text()[-2000:]
        sup.send_signal(signal.SIGKILL)
        sup.wait(30)
        gone = _wait_gone(worker)
    finally:
        if sup.poll() is None:
            sup.kill()
            sup.wait()
        if worker and _alive(worker):
            os.kill(worker, signal.SIGKILL)
    assert gone, f"the worker ({when}) outlived its supervisor by 60 s"
    stderr = (tmp_path / "worker.stderr").read_text()
    assert "usage:" not in stderr and "Traceback" not in stderr, stderr[-2000:]  # it left; it did not fail


def test_a_worker_started_for_a_supervisor_that_is_not_its_parent_exits_at_once(tmp_path):
    """`--supervisor PID` names the parent: when it is not (the supervisor died before the worker ran), the worker
    exits before it starts anything (no ready file, exit status 1)."""
    cmd = [sys.executable, "-m", "toolwire.harness.workers", "--supervisor", str(os.getpid() + 10_000_000),
           "--executor-id", "orphan-test", "--effects", str(tmp_path / "effects.db"), "--sim", "http://127.0.0.1:9",
           "--queue", "orphan-test", "--ready", str(tmp_path / "ready"), "--log", str(tmp_path / "worker.log")]
    done = subprocess.run(cmd, cwd=tmp_path, env=_env(tmp_path, True), capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "supervisor" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "ready").exists()
    assert not (tmp_path / "dbos.sqlite").exists()
