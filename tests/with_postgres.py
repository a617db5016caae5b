"""Run one command against a private PostgreSQL cluster started for it, then stop the cluster.

``python -m tests.with_postgres COMMAND ARGS...``: every ``{dsn}`` in the arguments becomes the cluster's URL, which
is also in the environment as ``TOOLWIRE_PG_DSN``. The cluster (see ``tests/pg_cluster.py``) listens on loopback
only and is stopped, and its directory removed, however the command ends; the exit status is the command's.
"""

from __future__ import annotations

import os
import subprocess
import sys

from .pg_cluster import ClusterError, start


def main(argv: list[str]) -> int:
    if not argv:
        sys.stderr.write("usage: python -m tests.with_postgres COMMAND [ARGS...]  ({dsn} is the cluster's URL)\n")
        return 2
    try:
        cluster = start()
    except ClusterError as exc:
        sys.stderr.write(f"cannot start a private PostgreSQL cluster: {exc}\n")
        return 1
    try:
        args = [a.replace("{dsn}", cluster.url) for a in argv]
        return subprocess.call(args, env=dict(os.environ, TOOLWIRE_PG_DSN=cluster.url))
    except KeyboardInterrupt:
        return 130
    finally:
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
