"""Several processes opening one new ``SQLiteLedger`` file at the same moment all open it.

The first open of a file switches it to WAL and creates the table. Two connections doing that at once: the one
that loses gets "database is locked" at once, since SQLite does not wait for that lock with the busy timeout.
``toolwire demo --workers 2`` failed that way when both workers started together on a busy machine. An open now
tries again until its ``timeout``.
"""

from __future__ import annotations

import multiprocessing

import pytest

from toolwire import SQLiteLedger

CTX = multiprocessing.get_context("fork")


def _open(path: str, start, errors) -> None:
    start.wait()
    try:
        SQLiteLedger(path, timeout=30).close()
    except Exception as exc:  # noqa: BLE001 - reported to the test
        errors.put(f"{type(exc).__name__}: {exc}")


@pytest.mark.parametrize("round_", range(30))
def test_processes_opening_a_new_ledger_at_once_all_open_it(tmp_path, round_):
    path = str(tmp_path / "ledger.db")
    start, errors = CTX.Event(), CTX.Queue()
    procs = [CTX.Process(target=_open, args=(path, start, errors)) for _ in range(24)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(60)
    found = []
    while not errors.empty():
        found.append(errors.get())
    assert found == []
    assert all(p.exitcode == 0 for p in procs)
