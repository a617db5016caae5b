"""Worker for tests/regressions/test_durable_misuse.py: ``python -m tests.regressions.durable_misuse_worker MODE LEDGER
TMP BASE_URL PROVIDER WORKFLOW_ID PROMPT``. MODE run | crash (SIGKILL after the write's effect) | recover.
LEDGER sqlite | memory (the Dispatcher's default ledger). Exit 3 when DurableLoop refuses the setup (UsageError)."""

from __future__ import annotations

import os
import signal
import sys


def main(argv: list[str]) -> int:
    mode, ledger_kind, tmp, base_url, provider, workflow_id, prompt = argv
    import msgspec
    from dbos import DBOS

    from toolwire import Dispatcher, SQLiteLedger, UsageError
    from toolwire.durable import DurableLoop, result_of
    from toolwire.harness import RetryPolicy
    from toolwire.harness.demo_tools import DemoWorld

    world = DemoWorld(os.path.join(tmp, "effects.db"))
    kill = (lambda: os.kill(os.getpid(), signal.SIGKILL)) if mode == "crash" else None
    registry = world.registry(timeout=5.0, after_effect=kill)
    retry = RetryPolicy(attempts=3, deadline=30.0, initial=0.01, max_backoff=0.05, max_hint=1.0)
    dispatcher = (Dispatcher(registry, ledger=SQLiteLedger(os.path.join(tmp, "ledger.db")))
                  if ledger_kind == "sqlite" else Dispatcher(registry))
    try:
        loop = DurableLoop(provider, model="sim-model", registry=registry, base_url=base_url, api_key="sk-test-0",
                           retry=retry, timeout=5.0, dispatcher=dispatcher)
    except UsageError as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 3
    DBOS(config={"name": "toolwire-durable-misuse", "system_database_url": f"sqlite:///{tmp}/dbos.sqlite",
                 "executor_id": "local", "log_level": "WARNING"})
    DBOS.launch()
    try:
        if mode == "recover":
            result = result_of(DBOS.retrieve_workflow(workflow_id).get_result())
        else:
            result = loop.run(prompt, conversation_id="conv-misuse", workflow_id=workflow_id)
        with open(os.path.join(tmp, "out.json"), "wb") as f:
            f.write(msgspec.json.encode(result))
    finally:
        DBOS.destroy()
        loop.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
