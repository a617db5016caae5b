"""A durable worker for tests/regressions/test_durable_recovery.py (lost, hung and upgraded workers).

``python -m tests.regressions.durable_recovery_worker MODE --sysdb URL --ledger SPEC --effects PATH --sim URL
--provider P --executor-id ID --version V --workflow-id WF --out PATH [--ready PATH] [--heartbeat SECONDS]
[--max-recovery-attempts N] [--requests PATH] [--gate PATH] PROMPT``

MODE ``run`` runs the prompt (``loop.run``) and writes its LoopResult JSON to OUT; ``crash`` runs it and dies by
SIGKILL after the write's effect; ``stop`` stops itself (SIGSTOP) there; ``pause`` waits there until the file
GATE exists; ``crash-request`` dies by SIGKILL when it is about to send a model request and the file REQUESTS
says one was already sent (by any process); ``serve`` (or ``--serve`` with another mode) only launches DBOS and
waits for WF's result. OUT gets
``{"result": ...}`` or ``{"error": "<type>"}``. The database URLs come from the command line (test databases
without passwords). LEDGER: ``sqlite:PATH`` or a postgresql:// URL.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("run", "crash", "stop", "pause", "crash-request", "serve"))
    for name in ("sysdb", "ledger", "effects", "sim", "provider", "executor-id", "version", "workflow-id", "out"):
        ap.add_argument(f"--{name}", required=True)
    ap.add_argument("--ready")
    ap.add_argument("--heartbeat", type=float, default=0.0)
    ap.add_argument("--max-recovery-attempts", type=int)
    ap.add_argument("--requests")
    ap.add_argument("--gate")
    ap.add_argument("--serve", action="store_true", help="wait for WORKFLOW_ID instead of running the prompt")
    ap.add_argument("prompt")
    args = ap.parse_args(argv)
    import faulthandler

    faulthandler.register(signal.SIGUSR1)  # a stuck worker's stacks, for a test that times out

    import msgspec
    from dbos import DBOS

    from toolwire import Dispatcher, PostgresLedger, SQLiteLedger
    from toolwire.durable import DurableLoop, Heartbeat, RecoveryLimitReached, dbos_config, result_of
    from toolwire.harness import RetryPolicy
    from toolwire.harness.demo_tools import DemoWorld
    from toolwire.harness.transport import HTTPTransport

    after = None
    if args.mode == "crash":
        def after() -> None:
            os.kill(os.getpid(), signal.SIGKILL)
    elif args.mode == "stop":
        def after() -> None:
            os.kill(os.getpid(), signal.SIGSTOP)
    elif args.mode == "pause":
        def after() -> None:
            while not os.path.exists(args.gate):
                time.sleep(0.05)

    world = DemoWorld(args.effects)
    registry = world.registry(timeout=120.0, after_effect=after)
    ledger = (SQLiteLedger(args.ledger[len("sqlite:"):]) if args.ledger.startswith("sqlite:")
              else PostgresLedger(args.ledger, pool_size=2, timeout=30))

    transport = None
    if args.mode == "crash-request":
        counter = Path(args.requests)

        class KillingTransport(HTTPTransport):
            def request(self, body, **kw):  # type: ignore[no-untyped-def]
                if counter.exists():
                    os.kill(os.getpid(), signal.SIGKILL)
                counter.write_text("1")
                return super().request(body, **kw)

        transport = KillingTransport(args.provider, model="sim-model", base_url=args.sim,
                                     api_key="sk-test-0000000000", timeout=5.0)
    retry = RetryPolicy(attempts=3, deadline=30.0, initial=0.01, max_backoff=0.05, max_hint=1.0)
    loop = DurableLoop(args.provider, model="sim-model", registry=registry, base_url=args.sim,
                       api_key="sk-test-0000000000", retry=retry, timeout=5.0, transport=transport,
                       dispatcher=Dispatcher(registry, ledger=ledger),
                       max_recovery_attempts=args.max_recovery_attempts)
    DBOS(config=dbos_config("toolwire-recovery-test", args.sysdb, executor_id=args.executor_id,
                            application_version=args.version, log_level="WARNING"))
    DBOS.launch()
    beat = Heartbeat(args.sysdb, interval=args.heartbeat).start() if args.heartbeat else None
    if args.ready:
        Path(args.ready).write_text(str(os.getpid()))
    try:
        try:
            if args.mode == "serve" or args.serve:
                result = result_of(DBOS.retrieve_workflow(args.workflow_id))
            else:
                result = loop.run(args.prompt, conversation_id=args.workflow_id, workflow_id=args.workflow_id)
            doc = {"result": msgspec.to_builtins(result), "pid": os.getpid()}
        except RecoveryLimitReached as exc:
            doc = {"error": type(exc).__name__, "workflow_id": exc.workflow_id, "pid": os.getpid()}
        Path(args.out).write_text(json.dumps(doc))
    finally:
        if beat is not None:
            beat.stop()
        DBOS.destroy(workflow_completion_timeout_sec=2)
        loop.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
