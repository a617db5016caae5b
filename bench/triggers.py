"""The cost of the two ``transitions`` triggers every call needs (``receive`` on its first fragment, ``finish`` on
its terminator), measured on fresh call records attached to toolwire's shared call Machine.

The ``small`` workload's target is ``SMALL_TARGET`` times the floor plus this allowance (as a multiple of the
floor): every state change goes through ``transitions`` by design, so its cost is allowed for, not optimised
away. Only the two ``Event.trigger`` calls are timed; building and attaching the records is not.
"""

from __future__ import annotations

import gc
import statistics
import time

__all__ = ["SMALL_TARGET", "two_triggers"]

#: the ``small`` workload's target: this many times the floor, plus the two triggers' cost
SMALL_TARGET = 2.0


def two_triggers(repeats: int = 7, calls: int = 2000) -> float:
    """Median seconds for ``receive`` then ``finish`` through ``transitions`` on one fresh call record."""
    from toolwire.statemachine.call import CallRecord
    from toolwire.statemachine.table import MACHINE, Trigger

    receive = MACHINE.events[Trigger.RECEIVE.value].trigger
    finish = MACHINE.events[Trigger.FINISH.value].trigger
    samples = []
    for _ in range(repeats):
        recs = [CallRecord(provider="bench", local_id=f"tw-{i}", call_id=f"c{i}", name="f") for i in range(calls)]
        gc.collect()
        t0 = time.perf_counter()
        for rec in recs:
            receive(rec)
            finish(rec)
        samples.append((time.perf_counter() - t0) / calls)
        for rec in recs:
            rec.release()
        del recs
    return statistics.median(samples)
