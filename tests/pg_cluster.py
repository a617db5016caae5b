"""A private, throwaway PostgreSQL cluster for the ledger tests.

``start()`` creates a temporary data directory, runs ``initdb`` (as the ``postgres`` OS user when run as root,
which PostgreSQL refuses), listens on a free port of 127.0.0.1 only (its unix socket inside the data directory),
trusts local connections and waits until the server accepts them; it returns a ``Cluster`` whose ``url`` is the
DSN and whose ``stop()`` stops the server (``pg_ctl stop -m fast``) and removes the directory. ``stop_server()``,
``start_server()`` and ``restart()`` stop and start the server on the same data directory and port (for tests of
a server that restarts under a running client).

The binaries are looked up on PATH, then under ``/usr/lib/postgresql/*/bin`` (``make test`` installs them with apt
when neither has them).

From the shell::

    python -m tests.pg_cluster start   # prints the URL; the cluster keeps running
    python -m tests.pg_cluster url     # the running cluster's URL
    python -m tests.pg_cluster stop    # stops it and removes its directory
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

#: where the command line remembers the cluster it started
STATE_FILE = Path(tempfile.gettempdir()) / "toolwire-pg-cluster.json"


class ClusterError(RuntimeError):
    """The private cluster could not be started."""


def find_bindir() -> Path:
    """The directory holding ``initdb`` and ``pg_ctl``: PATH first, then the newest /usr/lib/postgresql/*/bin."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl", path=str(Path(found).parent)):
        return Path(found).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                        key=lambda p: [int(x) if x.isdigit() else 0 for x in Path(p).parts[-3].split(".")])
    for initdb in reversed(candidates):
        if os.access(Path(initdb).parent / "pg_ctl", os.X_OK):
            return Path(initdb).parent
    raise ClusterError("PostgreSQL binaries (initdb, pg_ctl) not found on PATH or under /usr/lib/postgresql/*/bin "
                       "(apt-get install postgresql, or set TOOLWIRE_SKIP_POSTGRES=1 to skip those tests)")


def _as_owner() -> list[str]:
    """The prefix that runs a command as the cluster's owner: ``postgres`` when we are root, else ourselves."""
    if os.geteuid() != 0:
        return []
    if shutil.which("runuser"):
        return ["runuser", "-u", "postgres", "--"]
    return ["su", "postgres", "-s", "/bin/sh", "-c", "exec \"$0\" \"$@\""]  # pragma: no cover


def _run(cmd: list[str], *, timeout: float) -> None:
    proc = subprocess.run(_as_owner() + cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout)
    if proc.returncode != 0:
        raise ClusterError(f"{Path(cmd[0]).name} failed ({proc.returncode}): {(proc.stderr or proc.stdout).strip()}")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@dataclass
class Cluster:
    """A running private cluster."""

    datadir: Path
    port: int
    bindir: Path

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    @property
    def running(self) -> bool:
        """True while a server runs on the data directory (its ``postmaster.pid`` exists)."""
        return (self.datadir / "postmaster.pid").exists()

    def stop_server(self, mode: str = "fast") -> None:
        """Stop the server, keeping the data directory: ``fast`` (sessions are ended, then a clean shutdown) or
        ``immediate`` (every process quits at once, like a crash; the next start recovers from the WAL)."""
        if mode not in ("fast", "immediate"):
            raise ValueError(f"mode must be 'fast' or 'immediate', got {mode!r}")
        _run([str(self.bindir / "pg_ctl"), "stop", "-D", str(self.datadir), "-m", mode, "-w", "-t", "120"],
             timeout=180)

    def start_server(self, *, timeout: float = 60.0) -> None:
        """Start the server on the same data directory and port, and wait until it accepts connections."""
        self._launch(timeout)
        self._wait_accepting(timeout)

    def _launch(self, timeout: float) -> None:
        _run([str(self.bindir / "pg_ctl"), "start", "-D", str(self.datadir), "-l", str(self.datadir / "server.log"),
              "-w", "-t", str(int(timeout))], timeout=timeout + 10)

    def _wait_accepting(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not _accepts(self.port):
            if time.monotonic() > deadline:
                raise ClusterError(f"the cluster on port {self.port} does not accept connections")
            time.sleep(0.1)

    def restart(self, mode: str = "fast") -> None:
        """``stop_server(mode)`` then ``start_server()``: every session of the old server is gone."""
        self.stop_server(mode)
        self.start_server()

    def stop(self) -> None:
        """Stop the server (fast shutdown) and remove the data directory."""
        try:
            if self.running:
                try:
                    self.stop_server("fast")
                except (ClusterError, OSError, subprocess.SubprocessError):
                    # a busy machine can keep a fast shutdown past pg_ctl's wait (a checkpoint, sessions still
                    # ending); the directory is removed next, so nothing a clean shutdown keeps is needed
                    self.stop_server("immediate")
        finally:
            shutil.rmtree(self.datadir, ignore_errors=True)


def start(*, timeout: float = 60.0, durable: bool = False) -> Cluster:
    """Start a private cluster on a free port of 127.0.0.1 and wait until it accepts connections.

    By default commits are not flushed to disk (fast, and enough while the server is only ever stopped cleanly);
    ``durable=True`` keeps PostgreSQL's defaults (``fsync``, ``synchronous_commit``), so a committed row survives
    ``stop_server("immediate")``, as it would a crash."""
    bindir = find_bindir()
    datadir = Path(tempfile.mkdtemp(prefix="toolwire-pg-"))
    cluster = None
    try:
        if os.geteuid() == 0:
            shutil.chown(datadir, "postgres", "postgres")
        _run([str(bindir / "initdb"), "-D", str(datadir), "-U", "postgres", "--auth=trust", "--no-sync",
              "-E", "UTF8", "--no-locale"], timeout=timeout)
        for attempt in range(3):  # the free port may be taken between choosing it and binding it
            port = _free_port()
            with open(datadir / "postgresql.auto.conf", "a", encoding="utf-8") as conf:
                conf.write(f"listen_addresses = '127.0.0.1'\nport = {port}\nunix_socket_directories = '{datadir}'\n"
                           "max_connections = 200\n")
                if not durable:
                    conf.write("fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n")
            cluster = Cluster(datadir, port, bindir)
            try:
                cluster._launch(timeout)
            except ClusterError:
                if attempt == 2:
                    raise
                continue
            break
        cluster._wait_accepting(timeout)
        return cluster
    except BaseException as exc:
        log = datadir / "server.log"
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        if cluster is not None:
            cluster.stop()
        else:
            shutil.rmtree(datadir, ignore_errors=True)
        if isinstance(exc, (ClusterError, OSError, subprocess.SubprocessError)):
            raise ClusterError(f"{exc}\n{tail}".strip()) from exc
        raise


def main(argv: list[str]) -> int:
    cmd = argv[0] if argv else ""
    if cmd == "start":
        if STATE_FILE.exists():
            sys.stderr.write(f"a cluster is already recorded in {STATE_FILE}; stop it first\n")
            return 1
        cluster = start()
        STATE_FILE.write_text(json.dumps({"datadir": str(cluster.datadir), "port": cluster.port,
                                          "bindir": str(cluster.bindir)}))
        sys.stdout.write(cluster.url + "\n")
        return 0
    if cmd in ("stop", "url"):
        if not STATE_FILE.exists():
            sys.stderr.write("no cluster is running (start one with: python -m tests.pg_cluster start)\n")
            return 1
        state = json.loads(STATE_FILE.read_text())
        cluster = Cluster(Path(state["datadir"]), int(state["port"]), Path(state["bindir"]))
        if cmd == "url":
            sys.stdout.write(cluster.url + "\n")
            return 0
        cluster.stop()
        STATE_FILE.unlink(missing_ok=True)
        return 0
    sys.stderr.write("usage: python -m tests.pg_cluster start|stop|url\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
