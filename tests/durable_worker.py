"""A worker process for tests/test_durable.py: runs (or recovers) one durable prompt on DBOS.

``python -m tests.durable_worker MODE SYSDB LEDGER EFFECTS BASE_URL PROVIDER WORKFLOW_ID OUT PROMPT``; MODE ``run``
runs the prompt, ``crash`` runs it and dies by SIGKILL after the write's effect, ``recover`` only launches DBOS
(which resumes pending workflows) and waits for the workflow. The result (LoopResult JSON) is written to OUT.
"""

from __future__ import annotations

import os
import signal
import sys


def main(argv: list[str]) -> None:
    mode, sysdb, ledger, effects, base_url, provider, workflow_id, out, prompt = argv
    from dbos import DBOS

    from toolwire import Dispatcher, SQLiteLedger
    from toolwire.durable import DurableLoop, result_of
    from toolwire.harness import RetryPolicy
    from toolwire.harness.demo_tools import DemoWorld

    import msgspec

    world = DemoWorld(effects)
    kill = (lambda: os.kill(os.getpid(), signal.SIGKILL)) if mode == "crash" else None
    registry = world.registry(timeout=5.0, after_effect=kill)
    retry = RetryPolicy(attempts=3, deadline=30.0, initial=0.01, max_backoff=0.05, max_hint=1.0)
    loop = DurableLoop(provider, model="sim-model", registry=registry, base_url=base_url,
                       api_key="sk-test-0000000000", retry=retry, timeout=5.0,
                       dispatcher=Dispatcher(registry, ledger=SQLiteLedger(ledger)))
    DBOS(config={"name": "toolwire-durable-test", "system_database_url": f"sqlite:///{sysdb}",
                 "executor_id": "local"})
    DBOS.launch()
    try:
        if mode == "recover":
            result = result_of(DBOS.retrieve_workflow(workflow_id).get_result())
        else:
            result = loop.run(prompt, conversation_id="conv-durable", workflow_id=workflow_id)
        with open(out, "wb") as f:
            f.write(msgspec.json.encode(result))
    finally:
        DBOS.destroy()
        loop.close()


if __name__ == "__main__":
    main(sys.argv[1:])
