"""Misuse of ``toolwire demo --workers N`` (toolwire/harness/workers.py) through the CLI only."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("dbos")

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "toolwire.cli", "demo", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _children(pid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(d))
    return out


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("database", [
    "admin:hunter2@db.internal/app",                        # the scheme forgotten
    "host=127.0.0.1 port=1 user=admin password=hunter2",    # a libpq keyword DSN
])
def test_a_refused_database_url_never_prints_its_password(database):
    """A --database value that is refused is reported (exit 2, one line) without the password in it."""
    done = _cli("--workers", "1", "--database", database, timeout=60)
    assert done.returncode == 2
    assert "hunter2" not in done.stderr + done.stdout, done.stderr


def test_a_password_in_the_query_string_is_not_printed_in_the_report(tmp_path):
    """postgresql://host/db?password=SECRET: the report's database field (text and --json) hides the password."""
    sys.path.insert(0, str(ROOT))
    from tests.pg_cluster import ClusterError, start

    try:
        cluster = start()
    except ClusterError as exc:  # pragma: no cover
        pytest.skip(f"no PostgreSQL: {exc}")
    try:
        url = cluster.url + "?password=hunter2"   # trust auth: any password is accepted
        done = _cli("--workers", "1", "--provider", "anthropic", "--scenario", "height", "--database", url, "--json",
                    timeout=180)
    finally:
        cluster.stop()
    assert done.returncode == 0, done.stderr[-2000:]
    assert "hunter2" not in done.stdout + done.stderr


def test_sigterm_to_the_demo_stops_its_worker_processes():
    """SIGTERM to `toolwire demo --workers N` ends it and every worker process it started (no orphans)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "toolwire.cli", "demo", "--workers", "3", "--kill-every", "0.5"],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while len(workers) < 3 and time.monotonic() < deadline:
            workers = _children(proc.pid)
            time.sleep(0.2)
        time.sleep(3)  # workers ready, conversations running
        workers = _children(proc.pid)
        assert workers, "the demo started no workers"
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 20
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.2)
        leaked = [w for w in workers if _alive(w)]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for w in workers:  # clean up what the demo left behind
            if _alive(w):
                os.kill(w, signal.SIGKILL)
    assert leaked == [], f"worker processes left running after SIGTERM to the demo: {leaked}"


def test_a_worker_that_cannot_start_is_reported_without_a_traceback(tmp_path):
    """A worker failing at start (SQLite file in a directory that does not exist): one line, no traceback text."""
    done = _cli("--workers", "1", "--database", f"sqlite:///{tmp_path}/missing/dir/dbos.sqlite", timeout=60)
    assert done.returncode in (1, 2)
    assert len(done.stderr.strip().splitlines()) == 1
    assert 'File "' not in done.stderr and "Traceback" not in done.stderr and "^^^" not in done.stderr, done.stderr


def test_the_smallest_accepted_kill_interval_still_lets_one_conversation_finish():
    """--kill-every 0.05 is accepted, so one conversation on one worker must still end (here within 120 s; it
    takes ~3 s without kills), or the value must be refused (exit 2): the killer must not kill workers that
    are still starting, forever."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "toolwire.cli", "demo", "--workers", "1", "--kill-every", "0.05",
                             "--provider", "anthropic", "--scenario", "height", "--json"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)  # the demo stops its workers on SIGINT
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
        pytest.fail("one conversation on one worker with --kill-every 0.05 did not finish within 120 s")
    assert proc.returncode in (0, 2), err


def test_a_worker_that_cannot_start_exits_1_not_2(tmp_path):
    """A PostgreSQL server that is down is a failure of the run (exit 1, one line), not a usage error (exit 2)."""
    done = _cli("--workers", "1", "--database", "postgresql://postgres@127.0.0.1:1/postgres", timeout=120)
    assert done.returncode == 1, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_the_database_password_is_never_on_a_workers_command_line(pg_dsn):
    """Workers get the database URL through their environment: `ps` (any local user) never shows its password,
    and neither does the report."""
    scheme, rest = pg_dsn.split("://", 1)
    user, host = rest.split("@", 1)
    url = f"{scheme}://{user}:s3cret-pw@{host}"  # the test cluster trusts loopback: any password is accepted
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "toolwire.cli", "demo", "--workers", "2", "--database", url,
                             "--provider", "anthropic", "--json"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            for child in _children(proc.pid):
                try:
                    seen.append(Path(f"/proc/{child}/cmdline").read_bytes().decode(errors="replace"))
                except OSError:
                    pass
            time.sleep(0.1)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err[-2000:]
    assert seen and any("toolwire.harness.workers" in c for c in seen)
    assert not any("s3cret-pw" in c for c in seen)
    assert "s3cret-pw" not in out and "s3cret-pw" not in err
