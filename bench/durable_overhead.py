"""``python -m bench.durable_overhead ROUNDS SCENARIOS PROVIDERS`` (run by ``bench/workers_rate.py``): the same
conversations through ``ToolLoop`` and through ``DurableLoop.run`` in this one process (the one worker), one
after the other, both with the same ``PostgresLedger`` on ``TOOLWIRE_BENCH_DSN`` (a fresh database, also the
DBOS system database). Prints one JSON line: wall and CPU ms per conversation for each, their ratios, and the
DBOS steps the durable conversations recorded (``operation_outputs`` rows, through ``DBOS.list_workflow_steps``).
One conversation per dialect of each kind runs first, unmeasured (imports, connections).
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from typing import Any


def main(argv: list[str]) -> int:
    from dbos import DBOS

    from toolwire import Dispatcher, PostgresLedger
    from toolwire.harness import ToolLoop
    from toolwire.harness.transport import HTTPTransport
    from toolwire.durable import DurableLoop
    from toolwire.harness.demo import DEMO_RETRY, demo_model, sim_providers
    from toolwire.harness.demo_tools import DemoWorld
    from toolwire.sim import SCENARIOS, SimProvider

    rounds = int(argv[0])
    scenarios = argv[1].split(",")
    providers = [p for p in argv[2].split(",") if p] if len(argv) > 2 else []
    providers = providers or list(sim_providers())
    dsn = os.environ["TOOLWIRE_BENCH_DSN"]
    ledger = PostgresLedger(dsn, pool_size=2, timeout=30)
    work = [(p, s) for _ in range(rounds) for p in providers for s in scenarios]
    sim = SimProvider()
    for p in providers:
        for s in scenarios:
            sim.plan([], scenario=s, dialect=p)

    def registry(scenario: str) -> Any:
        world = DemoWorld()
        world.catalogue_up = scenario != "catalogue_down"
        return world.registry(timeout=5.0)

    out: dict[str, Any] = {"conversations": len(work)}
    with sim.serve() as base_url:
        # ---- plain: ToolLoop, one per conversation (its conversation id is the loop's), on one transport per
        # dialect kept open, as each DurableLoop keeps its own ----------------------------------------------------
        regs = {(p, s): registry(s) for p in providers for s in scenarios}
        transports = {p: HTTPTransport(p, model=demo_model(p), base_url=base_url, api_key="sim-key", timeout=5.0)
                      for p in providers}

        def plain(p: str, s: str) -> None:
            reg = regs[p, s]
            loop = ToolLoop(p, model=demo_model(p), registry=reg, transport=transports[p], retry=DEMO_RETRY,
                            dispatcher=Dispatcher(reg, ledger=ledger, backoff=0.01),
                            conversation_id=f"plain-{uuid.uuid4().hex}")
            loop.run(SCENARIOS[s].prompts["en"])  # (not closed: that would close the shared transport)

        for p in providers:  # unmeasured: a first conversation per dialect (imports, connections)
            plain(p, scenarios[0])
        out["plain"] = _measure(lambda: [plain(p, s) for p, s in work], len(work))
        for t in transports.values():
            t.close()

        # ---- durable: DurableLoop.run on DBOS launched here ------------------------------------------------------
        loops = {}
        for p in providers:
            for variant in ("", ":catalogue_down"):
                reg = registry("catalogue_down" if variant else "height")
                loops[p, variant] = DurableLoop(p, name=f"bench:{p}{variant}", model=demo_model(p), registry=reg,
                                                dispatcher=Dispatcher(reg, ledger=ledger, backoff=0.01),
                                                base_url=base_url, api_key="sim-key", retry=DEMO_RETRY,
                                                timeout=5.0)
        DBOS(config={"name": "toolwire-bench", "system_database_url": dsn, "executor_id": "bench",
                     "log_level": "WARNING"})
        DBOS.launch()
        workflows: list[str] = []
        try:
            def durable(p: str, s: str) -> None:
                wf = f"bench-{uuid.uuid4().hex}"
                loops[p, ":catalogue_down" if s == "catalogue_down" else ""].run(
                    SCENARIOS[s].prompts["en"], conversation_id=wf, workflow_id=wf)
                workflows.append(wf)

            for p in providers:
                durable(p, scenarios[0])
            warm = len(workflows)
            out["durable"] = _measure(lambda: [durable(p, s) for p, s in work], len(work))
            names: dict[str, int] = {}
            for wf in workflows[warm:]:
                for step in DBOS.list_workflow_steps(wf):
                    names[step["function_name"]] = names.get(step["function_name"], 0) + 1
            out["durable"]["steps_per_conversation"] = sum(names.values()) / len(work)
            out["durable"]["steps_by_name"] = {k: v / len(work) for k, v in sorted(names.items())}
        finally:
            DBOS.destroy()
            for loop in loops.values():
                loop.close()
    out["wall_ratio"] = out["durable"]["wall_ms"] / out["plain"]["wall_ms"]
    out["cpu_ratio"] = out["durable"]["cpu_ms"] / out["plain"]["cpu_ms"]
    print(json.dumps(out))
    return 0


def _measure(run: Any, n: int) -> dict[str, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return {"wall_ms": 1000 * (time.perf_counter() - wall) / n, "cpu_ms": 1000 * (time.process_time() - cpu) / n}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
